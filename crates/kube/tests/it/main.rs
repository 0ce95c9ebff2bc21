//! The integration tests of `kube`, one test binary (`cargo test -p <crate> --test it`);
//! each module was once its own binary. Modules under `peer` drive a real peer process (Envoy,
//! kube-apiserver, istiod or pilot-agent, Python grpcio, Chromium); `scripts/test.sh --pure`
//! skips them (`-- --skip peer::`).

mod support;

/// Tests that need a real peer process (see the crate doc above).
mod peer {
    mod discovery_selectors;
    mod gateway_deployment;
    mod ingress;
    mod ip_autoallocate;
    mod leader;
    mod multicluster;
    mod registry;
    mod registry_churn;
    mod registry_envoy;
    mod secrets;
    mod source;
    mod source_disruption;
}
