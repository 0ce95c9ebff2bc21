//! The integration tests of `webhook`, one test binary (`cargo test -p meshpilot-webhook --test it`;
//! docs/ARCHITECTURE.md, "Testing"). No module here needs a peer process.

mod slowloris;
