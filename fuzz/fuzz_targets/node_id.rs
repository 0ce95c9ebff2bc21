//! `node_id`: the body is `meshpilot_fuzzing::fuzz_node_id`, which `crates/fuzzing/tests/it/replay.rs` also runs
//! over this target's corpus (`fuzz/corpus/node_id`) with stable `cargo test`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| meshpilot_fuzzing::fuzz_node_id(data));
