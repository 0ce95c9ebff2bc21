//! `validate`: the body is `meshpilot_fuzzing::fuzz_validate`, which `crates/fuzzing/tests/it/replay.rs` also runs
//! over this target's corpus (`fuzz/corpus/validate`) with stable `cargo test`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| meshpilot_fuzzing::fuzz_validate(data));
