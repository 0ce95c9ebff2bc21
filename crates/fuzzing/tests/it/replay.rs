//! Stable replay of the checked-in fuzz corpora: every file of `fuzz/corpus/<target>/` through the
//! target's entry point (the same function the libFuzzer target calls). CI runs this instead of
//! fuzzing; a panic in any entry point fails it, naming the corpus files that panicked.

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    path::PathBuf,
};

use meshpilot_fuzzing::TARGETS;

fn corpus_files(target: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_file_replays_without_a_panic() {
    let mut failures = Vec::new();
    for (target, entry) in TARGETS {
        let files = corpus_files(target);
        // Not vacuous: an empty or missing corpus is a failure, not a pass.
        assert!(!files.is_empty(), "no corpus files for {target}");
        for path in &files {
            let data = std::fs::read(path).expect("corpus file readable");
            if catch_unwind(AssertUnwindSafe(|| entry(&data))).is_err() {
                failures.push(path.display().to_string());
            }
        }
        eprintln!("{target}: replayed {} corpus files", files.len());
    }
    assert!(failures.is_empty(), "entry points panicked on: {failures:#?}");
}

#[test]
fn every_target_has_a_corpus_and_a_fuzz_target() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for (target, _) in TARGETS {
        assert!(root.join("fuzz_targets").join(format!("{target}.rs")).is_file(), "no fuzz target {target}");
        assert!(corpus_files(target).len() >= 5, "corpus of {target} has fewer than 5 files");
    }
}
