//! File source benchmarks (`cargo bench -p meshpilot-config`; not part of `cargo test`).
//!
//! - `initial_load/10k_objects`: `FileSource::new` over a generated directory of 10,000 objects
//!   (500 files × 20 VirtualService/DestinationRule documents): list, read, parse, validate, fill the
//!   store. Target < 1 s.
//! - `write_to_handler/…`: latency from an atomic file write to the handler call with the default
//!   options (scanned once the write completes; 100 ms longest wait), with an otherwise empty directory and with the 10,000 objects beside
//!   it (each scan re-reads every file). Target < 200 ms. A percentile summary is printed first.

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use std::{
    path::Path,
    sync::{Arc, mpsc},
    time::{Duration, Instant},
};

use api::Kind;
use criterion::{Criterion, criterion_group, criterion_main};
use meshpilot_config::{FileSource, FileSourceOptions, ReadOnlySource};
use model::{ConfigStore, ConfigStoreController, shutdown_channel};

fn vs(ns: &str, name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         spec:\n  hosts: [{host}]\n  http:\n  - match:\n    - uri: {{prefix: /api}}\n    route:\n    - destination:\n        host: {host}\n        subset: v1\n      weight: 90\n    - destination:\n        host: {host}\n        subset: v2\n      weight: 10\n    timeout: 5s\n    retries: {{attempts: 3, perTryTimeout: 2s}}\n"
    )
}

fn dr(ns: &str, name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         spec:\n  host: {host}\n  trafficPolicy:\n    connectionPool:\n      tcp: {{maxConnections: 100}}\n    outlierDetection:\n      consecutive5xxErrors: 7\n      interval: 5m\n  subsets:\n  - name: v1\n    labels: {{version: v1}}\n  - name: v2\n    labels: {{version: v2}}\n"
    )
}

/// Writes `files × per_file` objects (alternating VirtualService and DestinationRule) under `dir`.
fn generate(dir: &Path, files: usize, per_file: usize) {
    for f in 0..files {
        let sub = dir.join(format!("team{}", f % 10));
        std::fs::create_dir_all(&sub).unwrap();
        let docs: Vec<String> = (0..per_file)
            .map(|i| {
                let n = f * per_file + i;
                let (ns, name, host) = (
                    format!("ns{}", n % 50),
                    format!("svc{n}"),
                    format!("svc{n}.ns{}.svc.cluster.local", n % 50),
                );
                if n.is_multiple_of(2) { vs(&ns, &name, &host) } else { dr(&ns, &name, &host) }
            })
            .collect();
        std::fs::write(sub.join(format!("config{f}.yaml")), docs.join("---\n")).unwrap();
    }
}

fn initial_load(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), 500, 20);
    let count = |s: &FileSource| {
        s.store().list(Kind::VirtualService, None).len() + s.store().list(Kind::DestinationRule, None).len()
    };
    assert_eq!(count(&FileSource::new(dir.path(), FileSourceOptions::default()).unwrap()), 10_000);
    let mut group = c.benchmark_group("initial_load");
    group.sample_size(10).measurement_time(Duration::from_secs(15));
    group.bench_function("10k_objects", |b| {
        b.iter(|| FileSource::new(dir.path(), FileSourceOptions::default()).unwrap());
    });
    group.finish();
}

/// Runs a source with the default options; each `measure()` rewrites one file and returns the time
/// until the handler saw the change.
struct LatencyRig {
    _runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    rx: mpsc::Receiver<Instant>,
    n: u64,
    _shutdown: model::ShutdownTrigger,
}

impl LatencyRig {
    fn new(background: bool) -> LatencyRig {
        let dir = tempfile::tempdir().unwrap();
        if background {
            generate(dir.path(), 500, 20);
        }
        let path = dir.path().join("target.yaml");
        std::fs::write(&path, vs("bench", "target", "h0")).unwrap();
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let source = ReadOnlySource::new(FileSource::new(dir.path(), FileSourceOptions::default()).unwrap());
        let (tx, rx) = mpsc::channel();
        source.register_event_handler(
            Kind::VirtualService,
            Arc::new(move |_, new: &Arc<model::Config>, _| {
                if new.meta.namespace == "bench" {
                    let _ = tx.send(Instant::now());
                }
                Ok(())
            }),
        );
        let (trigger, shutdown) = shutdown_channel();
        runtime.spawn(source.run(shutdown));
        // The initial Add.
        rx.recv_timeout(Duration::from_secs(30)).unwrap();
        // Let the watch start and its catch-up scan finish.
        std::thread::sleep(Duration::from_millis(500));
        LatencyRig { _runtime: runtime, _dir: dir, path, rx, n: 0, _shutdown: trigger }
    }

    fn measure(&mut self) -> Duration {
        self.n += 1;
        let text = vs("bench", "target", &format!("h{}", self.n));
        let tmp = self.path.with_file_name(".target.tmp");
        std::fs::write(&tmp, text).unwrap();
        let start = Instant::now();
        std::fs::rename(&tmp, &self.path).unwrap();
        let seen = self.rx.recv_timeout(Duration::from_secs(10)).expect("handler called");
        seen - start
    }
}

fn percentiles(label: &str, rig: &mut LatencyRig, n: usize) {
    let mut samples: Vec<Duration> = (0..n).map(|_| rig.measure()).collect();
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "write_to_handler/{label}: n={n} min={:.1?} p50={:.1?} p95={:.1?} max={:.1?}",
        samples[0],
        at(0.5),
        at(0.95),
        samples[samples.len() - 1]
    );
}

fn write_to_handler(c: &mut Criterion) {
    let mut group = c.benchmark_group("write_to_handler");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    for (label, background) in [("single_file", false), ("beside_10k_objects", true)] {
        let mut rig = LatencyRig::new(background);
        percentiles(label, &mut rig, 50);
        group.bench_function(label, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| rig.measure()).sum());
        });
    }
    group.finish();
}

criterion_group!(benches, initial_load, write_to_handler);
criterion_main!(benches);
