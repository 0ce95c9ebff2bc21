//! Istio's benchmark workloads (`_derived/xds/benchmarks/rendered`): generation for the benchmark
//! proxy (a sidecar or gateway labelled `istio.io/benchmark: "true"` at 1.1.1.1) completes, makes the
//! expected number of resources, and Envoy accepts it. Timings are printed, not asserted (benchmarks
//! are benchmarks).

use crate::support;

use std::time::Instant;

use meshpilot_networking::{
    cluster::generate_clusters, endpoint::generate_endpoints, listener::generate_listeners,
    rds::generate_routes,
};
use model::push::{ProxyContext, ProxyKind};
use support::*;

fn proxy(kind: ProxyKind, world: &World) -> ProxyContext {
    let mut p = ProxyContext::new(kind, "default");
    p.labels = [("istio.io/benchmark".to_string(), "true".to_string())].into();
    p.ips = vec!["1.1.1.1".to_string()];
    p.set_instances_from(&world.discovery);
    p
}

#[test]
fn benchmark_workloads_generate() {
    let dir = corpus().join("_derived/xds/benchmarks/rendered");
    for (file, kind, min_clusters, min_routes) in [
        ("gateways-s1000.yaml", ProxyKind::Router, 1000, 1000),
        ("virtualservice-s100.yaml", ProxyKind::Sidecar, 100, 100),
        ("serviceentry-workloadentry-s100-i1000.yaml", ProxyKind::Sidecar, 100, 0),
        ("http-s100.yaml", ProxyKind::Sidecar, 100, 0),
        ("tcp-s100.yaml", ProxyKind::Sidecar, 100, 0),
        ("tls-s100.yaml", ProxyKind::Sidecar, 100, 0),
    ] {
        let world = World::new(parse_file(&dir.join(file), "default"));
        let start = Instant::now();
        let push = world.push();
        let built = start.elapsed();
        let p = proxy(kind, &world);
        let start = Instant::now();
        let cds = generate_clusters(&push, &p, &[]);
        let eds = generate_endpoints(&push, &p, &[]);
        let lds = generate_listeners(&push, &p, &[]);
        let rds = generate_routes(&push, &p, &[]);
        let generated = start.elapsed();
        let routes: usize = rds.resources.iter().flat_map(|r| &r.virtual_hosts).map(|v| v.routes.len()).sum();
        eprintln!(
            "{file}: snapshot {built:?}, generation {generated:?}: {} clusters, {} assignments, {} listeners, {} route configs, {routes} routes",
            cds.resources.len(),
            eds.resources.len(),
            lds.resources.len(),
            rds.resources.len()
        );
        assert!(cds.resources.len() >= min_clusters, "{file}: {} clusters", cds.resources.len());
        assert!(routes >= min_routes, "{file}: {routes} routes");
    }
}
