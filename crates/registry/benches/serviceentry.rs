//! The ServiceEntry registry on Istio's `serviceentry-workloadentry` benchmark workload (100
//! ServiceEntries selecting 1,000 WorkloadEntries, plus the proxy's own ServiceEntry):
//!
//! - `initial_build/index`: apply the 1,101 configs to an empty [`ServiceEntryIndex`] (pure);
//! - `initial_build/store_and_registry`: a memory store holding them, a registry subscribed to it,
//!   until the registry has synced (queue, locks and handler calls included);
//! - `workload_entry_update/index`: one WorkloadEntry address change applied to the built index,
//!   returning its incremental endpoint update;
//! - `workload_entry_update/store_to_handler`: one WorkloadEntry update written to the store until
//!   the registry's handler receives the endpoint update (end-to-end latency on a running queue).
//!
//! Run: `cargo bench -p meshpilot-registry --bench serviceentry`

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use std::{
    path::Path,
    sync::{Arc, mpsc},
    time::{Duration, Instant},
};

use api::{Kind, Spec};
use config::parse::{ParseOptions, parse_text};
use config::{MemoryStore, QueueOptions};
use criterion::{Criterion, criterion_group, criterion_main};
use meshpilot_registry::{
    ServiceEntryIndex, ServiceEntryOptions, ServiceEntryRegistry, index_from_configs, serviceentry::KINDS,
};
use model::{
    Config, ConfigStore, ConfigStoreController, EndpointPush, Event, RegistryEvent, ServiceController,
    shutdown_channel,
};

fn workload() -> Vec<Config> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/istio-testdata/_derived/xds/benchmarks/rendered/serviceentry-workloadentry-s100-i1000.yaml");
    let text = std::fs::read_to_string(&path).expect("shared test data beside the repository");
    let configs: Vec<Config> = parse_text("bench", &text, &ParseOptions::default())
        .into_iter()
        .filter_map(|d| d.config)
        .filter(|c| KINDS.contains(&c.kind()))
        .collect();
    assert_eq!(configs.len(), 1101);
    configs
}

/// `config` (a WorkloadEntry) with its address's last octet replaced by `n`.
fn moved(config: &Config, n: u32) -> Config {
    let mut config = config.clone();
    if let Spec::WorkloadEntry(we) = &mut config.spec {
        let (prefix, _) = we.address.rsplit_once('.').expect("IPv4");
        we.address = format!("{prefix}.{n}");
    }
    config
}

fn bench(c: &mut Criterion) {
    let configs = workload();
    let we = configs
        .iter()
        .find(|c| c.kind() == Kind::WorkloadEntry && c.meta.name == "random-500")
        .unwrap()
        .clone();

    let mut group = c.benchmark_group("initial_build");
    group.sample_size(20);
    group.bench_function("index", |b| {
        b.iter(|| {
            let (index, events) = index_from_configs(&configs, ServiceEntryOptions::default());
            assert_eq!(index.services().len(), 101);
            events.len()
        });
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    group.bench_function("store_and_registry", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let store = MemoryStore::new("bench", &KINDS, QueueOptions::default());
                store.apply(configs.iter().cloned().map(|c| config::Change::Upsert(Arc::new(c))));
                let registry =
                    ServiceEntryRegistry::new(Arc::new(store.clone()), ServiceEntryOptions::default());
                let (trigger, shutdown) = shutdown_channel();
                runtime.spawn(store.run(shutdown));
                while !registry.has_synced() {
                    std::thread::sleep(Duration::from_micros(50));
                }
                total += start.elapsed();
                assert_eq!(model::ServiceDiscovery::services(&registry).len(), 101);
                trigger.trigger();
            }
            total
        });
    });
    group.finish();

    let mut group = c.benchmark_group("workload_entry_update");
    let (mut index, _) = index_from_configs(&configs, ServiceEntryOptions::default());
    let mut n = 0u32;
    group.bench_function("index", |b| {
        b.iter(|| {
            n = (n + 1) % 200;
            let events = apply_one(&mut index, &moved(&we, n + 10));
            assert!(
                matches!(events.as_slice(), [RegistryEvent::Endpoints(u)] if u.push == EndpointPush::Incremental),
                "{events:?}"
            );
        });
    });

    let store = MemoryStore::new("bench", &KINDS, QueueOptions::default());
    store.apply(configs.iter().cloned().map(|c| config::Change::Upsert(Arc::new(c))));
    let registry = ServiceEntryRegistry::new(Arc::new(store.clone()), ServiceEntryOptions::default());
    let (tx, rx) = mpsc::channel::<RegistryEvent>();
    registry.append_event_handler(Arc::new(move |e: &RegistryEvent| {
        let _ = tx.send(e.clone());
    }));
    let (_trigger, shutdown) = shutdown_channel();
    runtime.spawn(store.run(shutdown));
    while !registry.has_synced() {
        std::thread::sleep(Duration::from_millis(1));
    }
    while rx.try_recv().is_ok() {}
    let mut n = 0u32;
    group.bench_function("store_to_handler", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n = (n + 1) % 200;
                let next = moved(&we, n + 10);
                let start = Instant::now();
                store.update(next).expect("update");
                let event = rx.recv_timeout(Duration::from_secs(5)).expect("endpoint update");
                total += start.elapsed();
                assert!(
                    matches!(event, RegistryEvent::Endpoints(ref u) if u.push == EndpointPush::Incremental)
                );
            }
            total
        });
    });
    group.finish();
}

fn apply_one(index: &mut ServiceEntryIndex, config: &Config) -> Vec<RegistryEvent> {
    index.apply(Event::Update, config)
}

criterion_group!(benches, bench);
criterion_main!(benches);
