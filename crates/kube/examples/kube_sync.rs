//! Benchmark of the Kubernetes service registry on a real kube-apiserver (not part of `cargo test`):
//!
//! ```text
//! cargo run --release -p meshpilot-kube --example kube_sync [-- SERVICES ENDPOINTS_PER_SERVICE CHURN_SECONDS]
//! ```
//!
//! Starts its own etcd + kube-apiserver (scripts/kube-testenv.sh), creates SERVICES Services (default
//! 1,000) with one EndpointSlice of ENDPOINTS_PER_SERVICE endpoints each (default 10), then measures:
//! 1. initial sync: time from `KubeRegistry::run` to `has_synced`, and the process RSS growth;
//! 2. churn through the API server: concurrent writers replace slices (one endpoint moved each time)
//!    for CHURN_SECONDS (default 10); reports API writes/s and endpoint updates/s reaching the
//!    registry's event handler;
//! 3. the index alone: slice updates/s applied by `KubeIndex` in-process (the registry's own ceiling).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::{StreamExt, stream};
use k8s_openapi::api::{
    core::v1::{Namespace, Service},
    discovery::v1::EndpointSlice,
};
use kube::api::{Api, PostParams};
use meshpilot_kube::{KubeRegistry, KubeRegistryOptions, registry::KubeIndex, testenv::TestEnv};
use model::service::{RegistryEvent, ServiceController, ServiceDiscovery};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:").map(|v| v.trim().trim_end_matches(" kB").to_string()))
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn service(ns: &str, i: usize) -> Service {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("svc-{i}"), "namespace": ns, "labels": {"app": format!("svc-{i}")}},
        "spec": {"selector": {"app": format!("svc-{i}")}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    }))
    .expect("service")
}

fn endpoint_slice(ns: &str, i: usize, per: usize, shift: usize) -> EndpointSlice {
    let endpoints: Vec<serde_json::Value> = (0..per)
        .map(|j| {
            let n = i * per + j + shift;
            serde_json::json!({"addresses": [format!("10.{}.{}.{}", 100 + n / 65536, (n / 256) % 256, n % 256)],
                               "conditions": {"ready": true}})
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("svc-{i}-abc"), "namespace": ns, "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": endpoints,
    }))
    .expect("slice")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let services = args.first().copied().unwrap_or(1000);
    let per = args.get(1).copied().unwrap_or(10);
    let churn_secs = args.get(2).copied().unwrap_or(10) as u64;
    let env = TestEnv::start().expect("test environment");
    let config = env.client_config().await.expect("kubeconfig");
    let client = kube::Client::try_from(config.clone()).expect("client");
    let ns = "bench";
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .expect("namespace");
    let t = Instant::now();
    let svc_api: Api<Service> = Api::namespaced(client.clone(), ns);
    let slice_api: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    stream::iter(0..services)
        .map(|i| {
            let (svc_api, slice_api) = (svc_api.clone(), slice_api.clone());
            async move {
                svc_api.create(&PostParams::default(), &service(ns, i)).await.expect("create service");
                slice_api
                    .create(&PostParams::default(), &endpoint_slice(ns, i, per, 0))
                    .await
                    .expect("create slice");
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    println!(
        "created {services} Services and {services} EndpointSlices ({} endpoints) in {:.1} s",
        services * per,
        t.elapsed().as_secs_f64()
    );

    // 1. Initial sync.
    let rss_before = rss_kib();
    let registry = KubeRegistry::new(config, KubeRegistryOptions::default());
    let updates = Arc::new(AtomicU64::new(0));
    let counter = updates.clone();
    registry.append_event_handler(Arc::new(move |e: &RegistryEvent| {
        if matches!(e, RegistryEvent::Endpoints(_)) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }));
    let (_trigger, shutdown) = model::shutdown_channel();
    let t = Instant::now();
    tokio::spawn(registry.run(shutdown));
    while !registry.has_synced() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let sync = t.elapsed();
    let in_ns = registry.services().iter().filter(|s| s.namespace == ns).count();
    let eps: usize = (0..services)
        .map(|i| registry.endpoints(&format!("svc-{i}.{ns}.svc.cluster.local"), ns, 80, None).len())
        .sum();
    let rss_after = rss_kib();
    println!(
        "initial sync: {in_ns} services, {eps} endpoints in {} ms; RSS {} MiB → {} MiB (+{} MiB)",
        sync.as_millis(),
        rss_before / 1024,
        rss_after / 1024,
        rss_after.saturating_sub(rss_before) / 1024
    );

    // 2. Churn through the API server.
    let writes = Arc::new(AtomicU64::new(0));
    let start_updates = updates.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(churn_secs);
    let t = Instant::now();
    let writers: Vec<_> = (0..16)
        .map(|w| {
            let (slice_api, writes) = (slice_api.clone(), writes.clone());
            tokio::spawn(async move {
                let mut round = 1;
                while Instant::now() < deadline {
                    for i in (w..services).step_by(16) {
                        if Instant::now() >= deadline {
                            break;
                        }
                        let mut s = endpoint_slice(ns, i, per, 0);
                        // Move one endpoint to a new address each round.
                        s.endpoints[0].addresses = vec![format!("10.250.{}.{}", round % 256, i % 256)];
                        // A failed read (API server busy) skips this slice for the round.
                        let Ok(current) = slice_api.get(&format!("svc-{i}-abc")).await else { continue };
                        s.metadata.resource_version = current.metadata.resource_version;
                        if slice_api
                            .replace(&format!("svc-{i}-abc"), &PostParams::default(), &s)
                            .await
                            .is_ok()
                        {
                            writes.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    round += 1;
                }
            })
        })
        .collect();
    for w in writers {
        w.await.expect("writer");
    }
    let written = writes.load(Ordering::Relaxed);
    // Wait for the tail of the watch to arrive.
    let mut last = updates.load(Ordering::Relaxed);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = updates.load(Ordering::Relaxed);
        if now - start_updates >= written || now == last {
            break;
        }
        last = now;
    }
    let elapsed = t.elapsed().as_secs_f64();
    let delivered = updates.load(Ordering::Relaxed) - start_updates;
    println!(
        "churn via API: {written} slice writes ({:.0}/s), {delivered} endpoint updates reached the handler ({:.0}/s)",
        written as f64 / churn_secs as f64,
        delivered as f64 / elapsed
    );

    // 3. The index alone.
    let mut index = KubeIndex::new(KubeRegistryOptions::default());
    for i in 0..services {
        index.apply_service(&{
            let mut s = service(ns, i);
            s.metadata.resource_version = Some("1".into());
            s
        });
        let mut s = endpoint_slice(ns, i, per, 0);
        s.metadata.resource_version = Some("1".into());
        index.apply_slice(&Arc::new(s));
    }
    let n = 20_000;
    let t = Instant::now();
    let mut events = 0;
    for k in 0..n {
        let i = k % services;
        let mut s = endpoint_slice(ns, i, per, 0);
        s.endpoints[0].addresses = vec![format!("10.251.{}.{}", (k / 256) % 256, k % 256)];
        s.metadata.resource_version = Some(format!("{}", k + 2));
        events += index.apply_slice(&Arc::new(s)).len();
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "index alone: {n} slice updates ({events} endpoint updates) at {:.0} updates/s",
        n as f64 / secs
    );
    drop(env);
}
