//! EDS push cost with locality priorities: 2,000 sidecars spread over 3 zones of one region ask for
//! the endpoints of 100 services (30 endpoints each, 10 per zone), as a full push does, on a fresh
//! generation cache per push (every assignment made and encoded once per distinct key).
//!
//! - `eds-push/plain`: no DestinationRules: every proxy shares one assignment per cluster.
//! - `eds-push/outlier-detection`: a DestinationRule with outlier detection per service, which turns on
//!   Istio's default locality failover (priorities relative to each proxy's zone): one assignment per
//!   cluster and zone.
//! - `eds-push/failover-priority`: as above, ranked by `failoverPriority` on the zone label.
//!
//! Run: `cargo bench -p meshpilot-networking --bench locality`.

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

#[allow(dead_code)] // the test helpers; this bench uses a few
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::{hint::black_box, sync::Arc};

use criterion::{Criterion, criterion_group, criterion_main};
use meshpilot_networking::{Snapshot, cluster::eds_cluster_names, endpoint::generate_endpoints_encoded};
use model::push::{ProxyContext, ProxyKind};
use support::{World, parse};

const SERVICES: usize = 100;
const ENDPOINTS: usize = 30;
const PROXIES: usize = 2_000;
const ZONES: [&str; 3] = ["z1", "z2", "z3"];

/// The services (and, with `dr`, one DestinationRule each whose traffic policy is `dr`).
fn world(dr: Option<&str>) -> World {
    let mut yaml = String::new();
    for s in 0..SERVICES {
        yaml.push_str(&format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: svc{s}}}\nspec:\n  \
             hosts: [svc{s}.default.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  \
             ports: [{{number: 80, name: http, protocol: HTTP}}]\n  endpoints:\n"
        ));
        for e in 0..ENDPOINTS {
            let zone = ZONES[e % ZONES.len()];
            yaml.push_str(&format!(
                "  - {{address: 10.{}.{}.{}, locality: r1/{zone}, labels: {{topology.kubernetes.io/zone: {zone}}}}}\n",
                s / 250,
                s % 250,
                e + 1
            ));
        }
        yaml.push_str("---\n");
        if let Some(policy) = dr {
            yaml.push_str(&format!(
                "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: svc{s}}}\nspec:\n  \
                 host: svc{s}.default.svc.cluster.local\n  trafficPolicy:\n{policy}---\n"
            ));
        }
    }
    World::new(parse(&yaml, "default"))
}

/// `PROXIES` sidecars in `default`, in zones z1, z2, z3 in turn.
fn proxies() -> Vec<ProxyContext> {
    (0..PROXIES)
        .map(|i| {
            let mut p = ProxyContext::new(ProxyKind::Sidecar, "default");
            p.id = format!(
                "sidecar~10.200.{}.{}~client-{i}.default~default.svc.cluster.local",
                i / 250,
                i % 250
            );
            p.labels = [
                ("app".to_string(), "client".to_string()),
                ("topology.kubernetes.io/region".to_string(), "r1".to_string()),
                ("topology.kubernetes.io/zone".to_string(), ZONES[i % ZONES.len()].to_string()),
            ]
            .into();
            p.set_topology(None);
            p
        })
        .collect()
}

/// One full EDS push: every proxy's assignments on a fresh cache; returns the bytes sent.
fn push(snapshot: &Arc<model::push::PushContext>, proxies: &[ProxyContext], names: &[String]) -> usize {
    let snapshot = Snapshot::new(Arc::clone(snapshot));
    proxies
        .iter()
        .map(|p| {
            generate_endpoints_encoded(&snapshot, p, names, true)
                .resources
                .iter()
                .map(|r| r.encoded.bytes().len())
                .sum::<usize>()
        })
        .sum()
}

fn bench(c: &mut Criterion) {
    let proxies = proxies();
    let cases = [
        ("plain", None),
        ("outlier-detection", Some("    outlierDetection: {consecutive5xxErrors: 5}\n")),
        (
            "failover-priority",
            Some(
                "    outlierDetection: {consecutive5xxErrors: 5}\n    loadBalancer:\n      localityLbSetting:\n        \
                 failoverPriority: [topology.kubernetes.io/zone]\n",
            ),
        ),
    ];
    let mut group = c.benchmark_group("eds-push");
    group.sample_size(10);
    for (name, dr) in cases {
        let world = world(dr);
        let snapshot = Arc::clone(world.push().push_context());
        let names = eds_cluster_names(&Snapshot::new(Arc::clone(&snapshot)), &proxies[0]);
        assert_eq!(names.len(), SERVICES, "one EDS cluster per service");
        println!("bytes eds-push/{name}: {} bytes per push", push(&snapshot, &proxies, &names));
        group.bench_function(name, |b| b.iter(|| black_box(push(&snapshot, &proxies, &names))));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
