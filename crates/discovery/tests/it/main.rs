//! The integration tests of `discovery`, one test binary (`cargo test -p <crate> --test it`);
//! each module was once its own binary. Modules under `peer` drive a real peer process (Envoy,
//! kube-apiserver, istiod or pilot-agent, Python grpcio, Chromium); `scripts/test.sh --pure`
//! skips them (`-- --skip peer::`).

mod support;

mod inputs;
mod mcp_server;

/// Tests that need a real peer process (see the crate doc above).
mod peer {
    mod eds_after_cds;
    mod envoy_access_log;
    mod envoy_authz;
    mod envoy_bookinfo;
    mod envoy_consistent_hash;
    mod envoy_corpus;
    mod envoy_credentials;
    mod envoy_envoy_filter;
    mod envoy_extensions;
    mod envoy_gateway_api;
    mod envoy_gateway_authz;
    mod envoy_locality_lb;
    mod envoy_rest;
    mod envoy_rest_secure;
    mod envoy_route_features;
    mod envoy_sds;
    mod envoy_sidecar_egress;
    mod envoy_sidecar_ingress;
    mod envoy_sniffing;
    mod envoy_stats;
    mod envoy_tracing;
    mod envoy_tunnel_proxy_protocol;
    mod grpc_proxyless;
    mod push_scope;
    mod webui_chromium;
}
