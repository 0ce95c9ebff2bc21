//! Parse + validate throughput over the whole shared corpus, in documents per second.
//!
//! Run: `cargo bench -p meshpilot-config --bench parse_validate`

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use meshpilot_config::parse::{ParseOptions, config_files, parse_text};

fn corpus() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/istio-testdata");
    let mut files = Vec::new();
    for dir in [
        "samples",
        "tests/testdata/config",
        "pkg/config/validation/testdata/crds",
        "pkg/test/datasets/validation/dataset",
        "_derived/validation/istioctl-validate",
    ] {
        files.extend(config_files(&root.join(dir)).expect("shared test data beside the repository"));
    }
    files.into_iter().map(|f| (f.display().to_string(), std::fs::read_to_string(&f).unwrap())).collect()
}

fn bench(c: &mut Criterion) {
    let corpus = corpus();
    let options = ParseOptions::default();
    let documents: usize = corpus.iter().map(|(name, text)| parse_text(name, text, &options).len()).sum();
    let bytes: usize = corpus.iter().map(|(_, text)| text.len()).sum();
    println!("corpus: {} files, {documents} documents, {bytes} bytes", corpus.len());
    let mut group = c.benchmark_group("parse_validate");
    group.throughput(Throughput::Elements(documents as u64));
    group.bench_function("shared_corpus", |b| {
        b.iter(|| {
            let mut n = 0;
            for (name, text) in &corpus {
                n += parse_text(name, text, &options).len();
            }
            n
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
