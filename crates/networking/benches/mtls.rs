//! LDS and CDS generation for a proxy with workload certificates (node metadata `PROXY_CONFIG`, as a
//! pilot-agent sidecar), with and without a mesh-wide STRICT PeerAuthentication in the root namespace
//! (`istio-system`), on the sidecar workloads of Istio's benchmark (`generate.rs` describes them and
//! the proxy; same rendered files under `_derived/xds/benchmarks/rendered/`).
//!
//! - `lds-mtls/<case>/<policy>`: `generate_listeners` + encoding; with STRICT, the inbound listener's
//!   filter chains require TLS with the workload certificate (`networking::inbound`);
//! - `cds-mtls/<case>/<policy>`: `generate_clusters` + encoding; auto mTLS adds the
//!   `tlsMode: istio` transport socket matches to mesh-internal clusters either way (STRICT only
//!   confirms it).
//!
//! `<policy>` is `none` (no PeerAuthentication: PERMISSIVE) or `strict`. As in `generate.rs`, each call
//! runs on a fresh snapshot, and the table of resources and bytes is printed once at the end.
//!
//! Run: `cargo bench -p meshpilot-networking --bench mtls`.

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

#[allow(dead_code)] // the test helpers; each bench uses a few
#[path = "../tests/it/support/mod.rs"]
mod support;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use meshpilot_networking::{Snapshot, cluster::generate_clusters, listener::generate_listeners};
use model::push::{ProxyContext, ProxyKind};
use prost::Message;
use support::{World, corpus, parse, parse_file};

/// Sidecar cases of `generate.rs` (upstream's names and files).
const CASES: &[(&str, &str)] = &[
    ("http", "http-s100.yaml"),
    ("tcp", "tcp-s100.yaml"),
    ("tls", "tls-s100.yaml"),
    ("auto", "auto-s100.yaml"),
    ("serviceentry-workloadentry", "serviceentry-workloadentry-s100-i1000.yaml"),
];

/// Mesh-wide STRICT mTLS (Istio's documented example).
const STRICT: &str = r#"
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec:
  mtls: {mode: STRICT}
"#;

/// The benchmark proxy of `bench_test.go`, with workload certificates (`PROXY_CONFIG` present).
fn proxy(world: &World) -> ProxyContext {
    let mut p = ProxyContext::new(ProxyKind::Sidecar, "default");
    p.id = "sidecar~1.1.1.1~v0.default~default.svc.cluster.local".to_string();
    p.labels = [("istio.io/benchmark".to_string(), "true".to_string())].into();
    p.ips = vec!["1.1.1.1".to_string()];
    p.dns_domain = "default.example.org".to_string();
    p.istio_version = "1.26.0".to_string();
    p.workload_certificates = true;
    p.set_instances_from(&world.discovery);
    p
}

fn encoded<M: Message>(resources: &[M]) -> usize {
    resources.iter().map(|r| r.encode_to_vec().len()).sum()
}

/// LDS (`lds = true`) or CDS for `proxy`, encoded: (resources, bytes).
fn generate(lds: bool, push: &Snapshot, proxy: &ProxyContext) -> (usize, usize) {
    if lds {
        let g = generate_listeners(push, proxy, &[]);
        (g.resources.len(), encoded(&g.resources))
    } else {
        let g = generate_clusters(push, proxy, &[]);
        (g.resources.len(), encoded(&g.resources))
    }
}

fn bench(c: &mut Criterion) {
    let dir = corpus().join("_derived/xds/benchmarks/rendered");
    let mut table = Vec::new();
    for (case, file) in CASES {
        for policy in ["none", "strict"] {
            let mut configs = parse_file(&dir.join(file), "default");
            if policy == "strict" {
                configs.extend(parse(STRICT, "istio-system"));
            }
            let world = World::new(configs);
            let p = proxy(&world);
            let fresh = || {
                let push = world.push();
                push.init_proxy(&p);
                push
            };
            for lds in [true, false] {
                let kind = if lds { "lds" } else { "cds" };
                let (resources, bytes) = generate(lds, &fresh(), &p);
                table.push(format!(
                    "| {case} | {policy} | {kind} | {resources} | {:.1} |",
                    bytes as f64 / 1000.0
                ));
                let mut group = c.benchmark_group(format!("{kind}-mtls"));
                group.sample_size(20);
                group.bench_function(format!("{case}/{policy}"), |b| {
                    b.iter_batched(
                        fresh,
                        |push| {
                            let out = generate(lds, &push, &p);
                            (push, out)
                        },
                        BatchSize::LargeInput,
                    )
                });
                group.finish();
            }
        }
    }
    println!("\n| case | PeerAuthentication | type | resources/msg | kB/msg |\n|---|---|---|---|---|");
    for row in table {
        println!("{row}");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
