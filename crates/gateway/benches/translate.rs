//! Gateway API translation time (`gateway::convert`, pure): Istio's
//! `pilot/pkg/config/kube/gateway/testdata/benchmark-httproute.yaml`, and a generated input of one
//! Gateway with 1,000 HTTPRoutes (one hostname each, two rules, a header filter) over 100 services.
//!
//! `cargo bench -p meshpilot-gateway --bench translate` (numbers in BENCHMARKS.md).

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

#[path = "support/workload.rs"]
mod workload;

use std::{collections::BTreeMap, hint::black_box, sync::Arc};

use api::{GroupVersionKind, schema, yaml};
use criterion::{Criterion, criterion_group, criterion_main};
use meshpilot_gateway::{Input, KubeObjects, StaticStore, convert};
use model::{
    Config, ConfigMeta, Protocol,
    service::{Port, ProviderId, Resolution, Service},
};

fn configs(text: &str) -> Vec<Config> {
    yaml::parse_documents(text)
        .into_iter()
        .filter_map(|d| d.ok()?.root)
        .filter_map(|root| {
            let doc = root.to_json();
            let (api_version, kind) = (doc["apiVersion"].as_str()?, doc["kind"].as_str()?);
            let schema::Lookup::Istio(s) = schema::lookup(api_version, kind) else { return None };
            let (spec, _) = api::Spec::from_node(s.kind, root.get("spec")).ok()?;
            let m = &doc["metadata"];
            Some(Config {
                meta: ConfigMeta {
                    gvk: GroupVersionKind::from_api_version(api_version, kind),
                    name: m["name"].as_str()?.to_string(),
                    namespace: if s.cluster_scoped {
                        String::new()
                    } else {
                        m["namespace"].as_str().unwrap_or("default").to_string()
                    },
                    domain_suffix: "cluster.local".into(),
                    ..Default::default()
                },
                spec,
                status: None,
            })
        })
        .collect()
}

fn service(hostname: String, namespace: &str, port: u32) -> Arc<Service> {
    Arc::new(Service {
        name: hostname.split('.').next().unwrap_or_default().to_string(),
        object_name: hostname.clone(),
        hostname,
        namespace: namespace.to_string(),
        registry: ProviderId::Kubernetes,
        ports: vec![Port { name: "http".into(), port, protocol: Protocol::Http }],
        addresses: vec![],
        resolution: Resolution::ClientSideLb,
        mesh_external: false,
        export_to: Default::default(),
        labels: BTreeMap::new(),
        label_selector: None,
        service_accounts: vec![],
        creation_time: None,
        passthrough_target_ports: BTreeMap::new(),
        external_name: None,
        aliases: Vec::new(),
        auto_allocated: Vec::new(),
        traffic_distribution: Default::default(),
        cluster_external_addresses: Default::default(),
    })
}

fn bench(c: &mut Criterion) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/istio-testdata/pilot/pkg/config/kube/gateway/testdata/benchmark-httproute.yaml"
    );
    let istio = configs(&std::fs::read_to_string(path).expect("shared test data beside the repository"));
    let kube = KubeObjects::default();
    let mut services: Vec<Arc<Service>> = Vec::new();
    for c in &istio {
        if let api::Spec::HTTPRoute(r) = &c.spec {
            for rule in &r.rules {
                for b in &rule.backend_refs {
                    let ns = b.namespace.clone().unwrap_or_else(|| c.meta.namespace.clone());
                    services.push(service(
                        format!("{}.{ns}.svc.cluster.local", b.name),
                        &ns,
                        b.port.unwrap_or(80) as u32,
                    ));
                }
            }
        }
    }
    let store = StaticStore::new(istio);
    c.bench_function("translate/benchmark-httproute", |b| {
        b.iter(|| {
            convert(black_box(&Input {
                store: &store,
                services: &services,
                kube: &kube,
                domain_suffix: "cluster.local",
            }))
        })
    });

    let big = configs(&workload::generated(1000));
    assert_eq!(big.len(), 1002);
    let services: Vec<Arc<Service>> = (0..100)
        .flat_map(|i| {
            (0..10).map(move |n| service(format!("svc{i}.ns{n}.svc.cluster.local"), &format!("ns{n}"), 80))
        })
        .collect();
    let store = StaticStore::new(big);
    let out =
        convert(&Input { store: &store, services: &services, kube: &kube, domain_suffix: "cluster.local" });
    assert_eq!(out.virtual_services.len(), 1000, "one VirtualService per hostname");
    c.bench_function("translate/1000-httproutes", |b| {
        b.iter(|| {
            convert(black_box(&Input {
                store: &store,
                services: &services,
                kube: &kube,
                domain_suffix: "cluster.local",
            }))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
