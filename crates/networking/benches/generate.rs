//! Generation benchmarks on Istio's own benchmark workloads (`pilot/pkg/xds/bench_test.go`, rendered in
//! `../shared/istio-testdata/_derived/xds/benchmarks/rendered/` with the upstream parameters).
//!
//! For each workload, as Istio's `BenchmarkInitPushContext` and `Benchmark{Cluster,Endpoint,Listener,
//! Route}Generation` do for their single test proxy (IP 1.1.1.1, namespace `default`, labels
//! `istio.io/benchmark: "true"`, a sidecar or a router per case):
//!
//! - `snapshot/<case>`: `PushContext::new` over the config store and the ServiceEntry registry, plus
//!   `init_proxy` (the proxy's sidecar scope and, for routers, merged gateway servers: Istio's
//!   `InitContext` + `SetSidecarScope` + `SetGatewaysForProxy`, as `initPushContext` times them);
//! - `cds|eds|lds|rds/<case>`: one generator call for the proxy **and** the protobuf encoding of every
//!   resource (Istio times generation + marshal to `Any`), on a fresh snapshot each time (nothing
//!   shared from an earlier call: upstream disables its xDS cache). EDS and RDS are asked for the names
//!   the proxy would watch (EDS clusters from CDS, route names from the listeners), as Envoy does;
//! - `rds-shared/<case>` (sidecars): the same RDS call again on the same snapshot, i.e. for a further
//!   proxy of the same scope, which gets the shared route configurations (clone + encode);
//!   `lds-shared/authorizationpolicy` likewise for LDS (the security filters are shared).
//!
//! Istio reports `kb/msg` and `resources/msg` next to the time; criterion cannot, so each benchmark
//! prints one line `bytes <type>/<case>: N resources, M bytes` before it runs, and the whole table is
//! printed once at the start.
//!
//! Run: `cargo bench -p meshpilot-networking --bench generate` (filter: `-- rds/gateways`).

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

#[allow(dead_code)] // the test helpers; each bench uses a few
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use meshpilot_networking::{
    Snapshot,
    cluster::{eds_cluster_names, generate_clusters},
    endpoint::generate_endpoints,
    listener::generate_listeners,
    rds::{generate_routes_encoded, route_names},
};
use model::push::{ProxyContext, ProxyKind};
use prost::Message;
use support::{World, corpus, parse_file};

/// xDS type a generator serves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Cds,
    Eds,
    Lds,
    Rds,
}

impl Type {
    const ALL: [Type; 4] = [Type::Cds, Type::Eds, Type::Lds, Type::Rds];

    fn name(self) -> &'static str {
        match self {
            Type::Cds => "cds",
            Type::Eds => "eds",
            Type::Lds => "lds",
            Type::Rds => "rds",
        }
    }
}

/// One of Istio's benchmark cases (`params.yaml`): the rendered file, the proxy type, and the types
/// upstream runs (`onlyRunType` / `skipType`).
struct Case {
    name: &'static str,
    file: &'static str,
    kind: ProxyKind,
    only: Option<Type>,
    skip: Option<Type>,
}

const fn case(name: &'static str, file: &'static str, kind: ProxyKind) -> Case {
    Case { name, file, kind, only: None, skip: None }
}

/// Upstream's cases. `waypoint` runs as a sidecar (meshpilot serves no waypoint proxies yet) and
/// `secrets` (SDS only) is measured for the snapshot alone.
const CASES: &[Case] = &[
    case("gateways", "gateways-s1000.yaml", ProxyKind::Router),
    case("gateways-shared", "gateways-shared-s1000.yaml", ProxyKind::Router),
    case("knative-gateway", "knative-gateway-s100.yaml", ProxyKind::Router),
    case("http", "http-s100.yaml", ProxyKind::Sidecar),
    Case { skip: Some(Type::Rds), ..case("tcp", "tcp-s100.yaml", ProxyKind::Sidecar) },
    Case { skip: Some(Type::Rds), ..case("tls", "tls-s100.yaml", ProxyKind::Sidecar) },
    case("auto", "auto-s100.yaml", ProxyKind::Sidecar),
    Case { only: Some(Type::Lds), ..case("strict", "strict-s0.yaml", ProxyKind::Sidecar) },
    Case { only: Some(Type::Lds), ..case("disabled", "disabled-s0.yaml", ProxyKind::Sidecar) },
    case("externalname", "externalname-s100.yaml", ProxyKind::Sidecar),
    case("telemetry-api", "telemetry-api-s100.yaml", ProxyKind::Sidecar),
    case("virtualservice", "virtualservice-s100.yaml", ProxyKind::Sidecar),
    Case {
        only: Some(Type::Lds),
        ..case("authorizationpolicy", "authorizationpolicy-s100.yaml", ProxyKind::Sidecar)
    },
    case("serviceentry-workloadentry", "serviceentry-workloadentry-s100-i1000.yaml", ProxyKind::Sidecar),
    Case { skip: Some(Type::Rds), ..case("waypoint", "waypoint-s100.yaml", ProxyKind::Sidecar) },
];

impl Case {
    fn runs(&self, t: Type) -> bool {
        self.only.is_none_or(|o| o == t) && self.skip != Some(t)
    }
}

/// The benchmark proxy of `bench_test.go`.
fn proxy(kind: ProxyKind, world: &World) -> ProxyContext {
    let mut p = ProxyContext::new(kind, "default");
    let prefix = if kind == ProxyKind::Router { "router" } else { "sidecar" };
    p.id = format!("{prefix}~1.1.1.1~v0.default~default.svc.cluster.local");
    p.labels = [("istio.io/benchmark".to_string(), "true".to_string())].into();
    p.ips = vec!["1.1.1.1".to_string()];
    p.dns_domain = "default.example.org".to_string();
    p.istio_version = "1.26.0".to_string();
    p.set_instances_from(&world.discovery);
    p
}

fn encoded<M: Message>(resources: &[M]) -> usize {
    resources.iter().map(|r| r.encode_to_vec().len()).sum()
}

/// One generator call for `t` and the encoding of its resources: (resources, bytes).
fn generate(
    t: Type,
    push: &Snapshot,
    proxy: &ProxyContext,
    eds: &[String],
    rds: &[String],
) -> (usize, usize) {
    match t {
        Type::Cds => {
            let g = generate_clusters(push, proxy, &[]);
            (g.resources.len(), encoded(&g.resources))
        }
        Type::Eds => {
            let g = generate_endpoints(push, proxy, eds);
            (g.resources.len(), encoded(&g.resources))
        }
        Type::Lds => {
            let g = generate_listeners(push, proxy, &[]);
            (g.resources.len(), encoded(&g.resources))
        }
        Type::Rds => {
            let g = generate_routes_encoded(push, proxy, rds);
            (g.resources.len(), g.resources.iter().map(|r| r.bytes().len()).sum())
        }
    }
}

fn bench(c: &mut Criterion) {
    let dir = corpus().join("_derived/xds/benchmarks/rendered");
    let mut table = Vec::new();
    for case in CASES {
        let world = World::new(parse_file(&dir.join(case.file), "default"));
        let p = proxy(case.kind, &world);

        let mut group = c.benchmark_group("snapshot");
        group.sample_size(20);
        group.bench_function(case.name, |b| {
            b.iter(|| {
                let push = world.push();
                push.init_proxy(&p);
                black_box(push)
            })
        });
        group.finish();

        let push = world.push();
        push.init_proxy(&p);
        let eds_names = eds_cluster_names(&push, &p);
        let rds_names = route_names(&push, &p);
        for t in Type::ALL.into_iter().filter(|t| case.runs(*t)) {
            let (resources, bytes) = generate(t, &push, &p, &eds_names, &rds_names);
            println!("bytes {}/{}: {resources} resources, {bytes} bytes", t.name(), case.name);
            table.push(format!(
                "| {} | {} | {resources} | {:.1} |",
                case.name,
                t.name(),
                bytes as f64 / 1000.0
            ));
            // A fresh snapshot per call (built outside the timing, with the proxy initialised as
            // upstream's initPushContext does): no result shared from an earlier call, as upstream
            // runs with the xDS cache disabled.
            let mut group = c.benchmark_group(t.name());
            group.sample_size(20);
            group.bench_function(case.name, |b| {
                b.iter_batched(
                    || {
                        let fresh = world.push();
                        fresh.init_proxy(&p);
                        fresh
                    },
                    |fresh| {
                        let out = generate(t, &fresh, &p, &eds_names, &rds_names);
                        (fresh, out)
                    },
                    BatchSize::LargeInput,
                )
            });
            group.finish();
            // The same call for a further proxy of the same scope on the same snapshot (what every
            // proxy but the first of a namespace costs: sidecar route configurations are shared).
            // Likewise LDS of a workload with security policies: the policy filters are built once per
            // snapshot and set of selected policies.
            let shared = match t {
                Type::Rds if case.kind == ProxyKind::Sidecar => Some("rds-shared"),
                Type::Lds if case.name == "authorizationpolicy" => Some("lds-shared"),
                _ => None,
            };
            if let Some(group_name) = shared {
                let mut group = c.benchmark_group(group_name);
                group.sample_size(20);
                group
                    .bench_function(case.name, |b| b.iter(|| generate(t, &push, &p, &eds_names, &rds_names)));
                group.finish();
            }
        }
    }
    println!("\n| case | type | resources/msg | kB/msg |\n|---|---|---|---|");
    for row in table {
        println!("{row}");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
