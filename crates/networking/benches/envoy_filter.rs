//! Push cost of EnvoyFilters: 2,000 sidecars (20 namespaces × 100 pods, each pod its own IP) get their
//! full CDS, LDS and RDS, as a full push does, on a fresh generation cache per push. 50 HTTP services.
//!
//! - `lds-cds-rds/plain`: no EnvoyFilter, no Telemetry.
//! - `lds-cds-rds/20-envoy-filters`: 20 mesh-wide EnvoyFilters in the root namespace (Lua HTTP filters
//!   before the router, connection manager merges, cluster merges, route configuration and virtual host
//!   merges, an HTTP route inserted first).
//! - `lds-cds-rds/20-envoy-filters+access-log`: the same plus a mesh-wide Telemetry with access logging
//!   (built-in `envoy` provider).
//!
//! Run: `cargo bench -p meshpilot-networking --bench envoy_filter`. The bytes per push are printed once.

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

#[allow(dead_code)] // the test helpers; this bench uses a few
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::{hint::black_box, sync::Arc};

use criterion::{Criterion, criterion_group, criterion_main};
use meshpilot_networking::{
    Snapshot, cluster::generate_clusters_encoded, listener::generate_listeners_encoded,
    rds::generate_routes_encoded,
};
use model::push::{ProxyContext, ProxyKind};
use support::{World, parse};

const SERVICES: usize = 50;
const NAMESPACES: usize = 20;
const PODS: usize = 100;

fn services() -> String {
    let mut yaml = String::new();
    for s in 0..SERVICES {
        yaml.push_str(&format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: svc{s}, namespace: ns{ns}}}\n\
             spec:\n  hosts: [svc{s}.ns{ns}.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  \
             ports: [{{number: 80, name: http, protocol: HTTP}}, {{number: 9090, name: grpc, protocol: GRPC}}]\n  \
             endpoints: [{{address: 10.1.{s}.1}}, {{address: 10.1.{s}.2}}]\n---\n",
            ns = s % NAMESPACES
        ));
    }
    yaml
}

/// The 20 EnvoyFilters: 4 each of 5 kinds of patch.
fn envoy_filters() -> String {
    let mut yaml = String::new();
    for i in 0..20 {
        let patch = match i % 5 {
            0 => format!(
                "  - applyTo: HTTP_FILTER\n    match:\n      context: SIDECAR_OUTBOUND\n      listener:\n        filterChain:\n          \
                 filter: {{name: envoy.filters.network.http_connection_manager, subFilter: {{name: envoy.filters.http.router}}}}\n    \
                 patch:\n      operation: INSERT_BEFORE\n      value:\n        name: lua-{i}\n        typed_config:\n          \
                 \"@type\": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua\n          \
                 inlineCode: \"function envoy_on_request(h) h:headers():add('x-{i}', '1') end\"\n"
            ),
            1 => "  - applyTo: NETWORK_FILTER\n    match: {context: SIDECAR_OUTBOUND, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}\n    \
                  patch: {operation: MERGE, value: {typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, server_name: bench}}}\n"
                .to_string(),
            2 => format!(
                "  - applyTo: CLUSTER\n    match: {{context: SIDECAR_OUTBOUND, cluster: {{portNumber: 80}}}}\n    \
                 patch: {{operation: MERGE, value: {{per_connection_buffer_limit_bytes: {}}}}}\n",
                32768 + i
            ),
            3 => format!(
                "  - applyTo: VIRTUAL_HOST\n    match: {{context: SIDECAR_OUTBOUND}}\n    \
                 patch: {{operation: MERGE, value: {{request_headers_to_add: [{{header: {{key: x-vh-{i}, value: v}}}}]}}}}\n"
            ),
            _ => format!(
                "  - applyTo: HTTP_ROUTE\n    match: {{context: SIDECAR_OUTBOUND, routeConfiguration: {{portNumber: 80}}}}\n    \
                 patch: {{operation: INSERT_FIRST, value: {{name: health-{i}, match: {{path: /health-{i}}}, direct_response: {{status: 200}}}}}}\n"
            ),
        };
        yaml.push_str(&format!(
            "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {{name: ef{i}, namespace: istio-system}}\n\
             spec:\n  configPatches:\n{patch}---\n"
        ));
    }
    yaml
}

const ACCESS_LOG: &str = "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: mesh, namespace: istio-system}\n\
                          spec:\n  accessLogging: [{providers: [{name: envoy}]}]\n---\n";

fn proxies() -> Vec<ProxyContext> {
    (0..NAMESPACES * PODS)
        .map(|i| {
            let ns = format!("ns{}", i % NAMESPACES);
            let mut p = ProxyContext::new(ProxyKind::Sidecar, &ns);
            let ip = format!("10.200.{}.{}", i / 250, i % 250);
            p.id = format!("sidecar~{ip}~pod-{i}.{ns}~{ns}.svc.cluster.local");
            p.ips = vec![ip];
            p.labels = [("app".to_string(), format!("app{}", i % 10))].into();
            p
        })
        .collect()
}

/// One full push: every proxy's CDS, LDS and RDS on a fresh cache; returns the bytes sent.
fn push(snapshot: &Arc<model::push::PushContext>, proxies: &[ProxyContext]) -> usize {
    let snapshot = Snapshot::new(Arc::clone(snapshot));
    let size =
        |r: &[meshpilot_networking::cache::EncodedResource]| r.iter().map(|r| r.bytes().len()).sum::<usize>();
    proxies
        .iter()
        .map(|p| {
            size(&generate_clusters_encoded(&snapshot, p, &[]).resources)
                + size(&generate_listeners_encoded(&snapshot, p, &[]).resources)
                + size(&generate_routes_encoded(&snapshot, p, &[]).resources)
        })
        .sum()
}

fn bench(c: &mut Criterion) {
    let proxies = proxies();
    let cases = [
        ("plain", services()),
        ("20-envoy-filters", format!("{}{}", services(), envoy_filters())),
        ("20-envoy-filters+access-log", format!("{}{}{ACCESS_LOG}", services(), envoy_filters())),
    ];
    let mut group = c.benchmark_group("lds-cds-rds");
    group.sample_size(10);
    for (name, yaml) in cases {
        let world = World::new(parse(&yaml, "default"));
        let snapshot = Arc::clone(world.push().push_context());
        println!("bytes lds-cds-rds/{name}: {} bytes per push", push(&snapshot, &proxies));
        group.bench_function(name, |b| b.iter(|| black_box(push(&snapshot, &proxies))));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
