//! The integration tests of `xds`, one test binary (`cargo test -p <crate> --test it`);
//! each module was once its own binary. Modules under `peer` drive a real peer process (Envoy,
//! kube-apiserver, istiod or pilot-agent, Python grpcio, Chromium); `scripts/test.sh --pure`
//! skips them (`-- --skip peer::`).

mod support;

mod ads_protocol;
mod hostile;

/// Tests that need a real peer process (see the crate doc above).
mod peer {
    mod envoy_delta;
    mod envoy_sotw;
}
