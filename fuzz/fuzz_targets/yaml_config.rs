//! `yaml_config`: the body is `meshpilot_fuzzing::fuzz_yaml_config`, which `crates/fuzzing/tests/it/replay.rs` also runs
//! over this target's corpus (`fuzz/corpus/yaml_config`) with stable `cargo test`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| meshpilot_fuzzing::fuzz_yaml_config(data));
