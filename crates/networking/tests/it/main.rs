//! The integration tests of `networking`, one test binary (`cargo test -p <crate> --test it`);
//! each module was once its own binary. Modules under `peer` drive a real peer process (Envoy,
//! kube-apiserver, istiod or pilot-agent, Python grpcio, Chromium); `scripts/test.sh --pure`
//! skips them (`-- --skip peer::`).

mod support;

mod access_logs;
mod aliases;
mod backend_policies;
mod benchmark_workloads;
mod bookinfo;
mod cluster_local;
mod credentials;
mod delegation;
mod envoy_filters;
mod extensions;
mod generation_cache;
mod hash_policy;
mod listeners;
mod mtls;
mod nds;
mod proxyless;
mod route_destinations;
mod scope;
mod shared_routes;
mod sidecar_egress_listeners;
mod sidecar_egress_proxy;
mod sidecar_inbound_pool;
mod sidecar_ingress_tls;
mod sidecar_vs_destinations;
mod stats;
mod tcp_hash_policy;
mod tracing;
mod traffic_policy;
mod tunnel_proxy_protocol;

/// Tests that need a real peer process (see the crate doc above).
mod peer {
    mod authz_golden;
    mod envoy_validate;
}
