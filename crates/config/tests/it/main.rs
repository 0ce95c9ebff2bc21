//! The integration tests of `config`, one test binary (`cargo test -p <crate> --test it`);
//! each module was once its own binary. Modules under `peer` drive a real peer process (Envoy,
//! kube-apiserver, istiod or pilot-agent, Python grpcio, Chromium); `scripts/test.sh --pure`
//! skips them (`-- --skip peer::`).

mod common;

mod aggregate;
mod corpus;
mod file_origin;
mod file_proptest;
mod file_source;
mod memory;
mod robustness;
