//! The integration tests of `http`, one test binary (`cargo test -p <crate> --test it`);
//! each module was once its own binary. Modules under `peer` drive a real peer process (Envoy,
//! kube-apiserver, istiod or pilot-agent, Python grpcio, Chromium); `scripts/test.sh --pure`
//! skips them (`-- --skip peer::`).

mod endpoints;
mod istiod_debug;
mod peer;
mod slowloris;
