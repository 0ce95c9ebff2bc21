//! Cost of one REST-JSON poll (docs/REST-XDS.md) beside the protobuf a stream gets: one sidecar's CDS
//! and LDS in the mesh of `scripts/bench/scale.sh` (1,000 services in 50 namespaces, 2 endpoints
//! each; 2,000 sidecars in the real run), with a Sidecar per namespace (`./*`, `istio-system/*`: the
//! sidecar sees its namespace's 20 services) and without (it sees all 1,000).
//!
//! - `rest/encode/{scoped,unscoped}`: the JSON `DiscoveryResponse`s of the proxy's CDS and LDS
//!   (`discovery::rest::encode_response`: protobuf → reflection → JSON, `ads {}` → REST sources).
//! - `rest/generate/{scoped,unscoped}`: generating the same CDS and LDS (protobuf, what ADS sends),
//!   for comparison.
//! - `rest/decode_request`: reading one Envoy 1.40-sized JSON `DiscoveryRequest` (node metadata of 30
//!   keys, 300 extensions), which every poll that generates costs (and every `304` before the fast path).
//! - `rest/not_modified_head`: what a `304` reads since the fast path (`RequestHead`: `versionInfo`,
//!   `typeUrl`, `resourceNames`, the node's id and a hash of its raw bytes) from the same request.
//!
//! Run: `cargo bench -p meshpilot-discovery --bench rest_json`. The bytes per response are printed once.

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

// The networking test support names the crate as its own tests do.
extern crate networking as meshpilot_networking;

#[allow(dead_code)] // the test helpers; this bench uses a few
#[path = "../../networking/tests/it/support/mod.rs"]
mod support;

use std::{fmt::Write as _, hint::black_box, time::Duration};

use criterion::{Criterion, criterion_group, criterion_main};
use meshpilot_discovery::{
    rest::{RequestHead, RestConfigSource, decode_request, encode_response},
    source::generate_type,
};
use model::push::{ProxyContext, ProxyKind};
use networking::Snapshot;
use support::{World, parse};
use xds::{Generated, type_url};

const SERVICES: usize = 1000;
const NAMESPACES: usize = 50;

fn mesh(scoped: bool) -> String {
    let mut yaml = String::new();
    for i in 0..SERVICES {
        let ns = i % NAMESPACES;
        let _ = write!(
            yaml,
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: svc-{i}, namespace: ns-{ns}}}\n\
             spec:\n  hosts: [svc-{i}.ns-{ns}.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  \
             ports: [{{name: http, number: 80, protocol: HTTP, targetPort: 8080}}]\n  \
             endpoints: [{{address: 10.1.{a}.{b}}}, {{address: 10.2.{a}.{b}}}]\n---\n",
            a = i / 250,
            b = i % 250
        );
    }
    if scoped {
        for ns in 0..NAMESPACES {
            let _ = write!(
                yaml,
                "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: ns-{ns}}}\n\
                 spec:\n  egress:\n  - hosts: [\"./*\", \"istio-system/*\"]\n---\n"
            );
        }
    }
    yaml
}

fn proxy() -> ProxyContext {
    let mut p = ProxyContext::new(ProxyKind::Sidecar, "ns-3");
    p.id = "sidecar~10.200.0.3~pod-3.ns-3~ns-3.svc.cluster.local".into();
    p.ips = vec!["10.200.0.3".into()];
    p.labels = [("app".to_string(), "svc-3".to_string())].into();
    p
}

fn generate(snapshot: &Snapshot, proxy: &ProxyContext) -> [Generated; 2] {
    [type_url::CLUSTER, type_url::LISTENER].map(|t| {
        let (resources, _) = generate_type(snapshot, proxy, t, &[], false).unwrap();
        Generated::full("2026-12-06T20:00:00Z/7", resources)
    })
}

fn encode(generated: &[Generated; 2], source: &RestConfigSource) -> usize {
    [type_url::CLUSTER, type_url::LISTENER]
        .iter()
        .zip(generated)
        .map(|(t, g)| encode_response(t, g, Some(source)).unwrap().len())
        .sum()
}

/// An Envoy 1.40-sized request: metadata as pilot-agent writes it, and Envoy's extension list.
fn request_json() -> Vec<u8> {
    let mut metadata = serde_json::Map::new();
    for k in 0..30 {
        metadata.insert(format!("KEY_{k}"), serde_json::json!(format!("value-{k}-of-some-length")));
    }
    metadata.insert("NAMESPACE".into(), serde_json::json!("ns-3"));
    let extensions: Vec<serde_json::Value> = (0..300)
        .map(|i| {
            serde_json::json!({"name": format!("envoy.filters.http.extension_{i}"),
                "category": "envoy.filters.http", "typeUrls": [format!("type.googleapis.com/envoy.extensions.filters.http.e{i}.v3.Config")]})
        })
        .collect();
    serde_json::json!({
        "versionInfo": "2026-12-06T20:00:00Z/7",
        "node": {"id": "sidecar~10.200.0.3~pod-3.ns-3~ns-3.svc.cluster.local", "cluster": "svc-3.ns-3",
                 "metadata": metadata, "userAgentName": "envoy", "extensions": extensions,
                 "userAgentBuildVersion": {"version": {"majorNumber": 1, "minorNumber": 40}}},
        "typeUrl": type_url::CLUSTER,
    })
    .to_string()
    .into_bytes()
}

fn bench(c: &mut Criterion) {
    let source = RestConfigSource { cluster: "xds-grpc".into(), refresh_delay: Duration::from_secs(1) };
    let proxy = proxy();
    let mut group = c.benchmark_group("rest");
    group.sample_size(20);
    for (name, scoped) in [("scoped", true), ("unscoped", false)] {
        let world = World::new(parse(&mesh(scoped), "default"));
        let snapshot = world.push();
        let generated = generate(&snapshot, &proxy);
        let protobuf: usize = generated.iter().flat_map(|g| &g.resources).map(|r| r.body.value.len()).sum();
        let resources: usize = generated.iter().map(|g| g.resources.len()).sum();
        println!(
            "bytes rest/{name}: CDS+LDS {resources} resources, {protobuf} bytes protobuf, {} bytes JSON",
            encode(&generated, &source)
        );
        group.bench_function(format!("encode/{name}"), |b| b.iter(|| black_box(encode(&generated, &source))));
        group.bench_function(format!("generate/{name}"), |b| {
            b.iter(|| black_box(generate(&snapshot, &proxy).iter().map(|g| g.resources.len()).sum::<usize>()))
        });
    }
    let body = request_json();
    println!("bytes rest/decode_request: {} bytes of request", body.len());
    group.bench_function("decode_request", |b| b.iter(|| black_box(decode_request(&body).unwrap())));
    // What a 304 costs since the fast path: the head, the node id and the node key, not the node.
    group.bench_function("not_modified_head", |b| {
        b.iter(|| {
            let head = RequestHead::read(black_box(&body)).unwrap();
            black_box((head.node_id().unwrap().len(), head.node_key(None).unwrap(), head.version_info.len()))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
