//! RDS for a Gateway API gateway: the generated workload of `crates/gateway/benches/translate.rs`
//! (one Gateway, 1,000 HTTPRoutes with a hostname each, over 1,000 ServiceEntry services), converted
//! by the Gateway API converter inside the push context as `meshpilot discovery` does, served to the
//! router that is the gateway's instance (a WorkloadEntry of `gw-istio.istio-system.svc.cluster.local`).
//!
//! - `gateway-api/snapshot/1000-httproutes`: `PushContext::with_converters` (indexing plus the
//!   conversion) and the router's merged gateway servers;
//! - `gateway-api/rds/1000-httproutes`: the router's route configuration `http.80` (1,000 virtual
//!   hosts), generated and encoded on a fresh snapshot each time (nothing shared from an earlier call).
//!
//! Run: `cargo bench -p meshpilot-networking --bench gateway_api` (numbers in BENCHMARKS.md).

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

#[allow(dead_code)] // the test helpers; each bench uses a few
#[path = "../tests/it/support/mod.rs"]
mod support;
#[path = "../../gateway/benches/support/workload.rs"]
mod workload;

use std::{hint::black_box, sync::Arc};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use meshpilot_networking::{
    Snapshot,
    rds::{generate_routes_encoded, route_names},
};
use model::push::{ConfigConverter, MeshSettings, ProxyContext, PushContext};
use support::{World, parse, router};

const ROUTES: usize = 1000;

/// The backends (`svc0..99` in `ns0..9`, port 80) and the gateway's own service with its one
/// instance, the router at 10.0.0.1.
fn services() -> String {
    let mut out = String::from(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: gw-istio, namespace: istio-system}\n\
         spec:\n  hosts: [gw-istio.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  \
         ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: STATIC\n  \
         workloadSelector: {labels: {gateway.networking.k8s.io/gateway-name: gw}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: gw-pod, namespace: istio-system}\n\
         spec: {address: 10.0.0.1, labels: {gateway.networking.k8s.io/gateway-name: gw}}\n",
    );
    for i in 0..100 {
        for n in 0..10 {
            out.push_str(&format!(
                "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: svc{i}, namespace: ns{n}}}\n\
                 spec:\n  hosts: [svc{i}.ns{n}.svc.cluster.local]\n  location: MESH_INTERNAL\n  \
                 ports: [{{number: 80, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  \
                 endpoints: [{{address: 10.1.{i}.{n}}}]\n"
            ));
        }
    }
    out
}

fn snapshot(world: &World, converters: &[Arc<dyn ConfigConverter>]) -> Snapshot {
    Snapshot::new(PushContext::with_converters(
        &world.store,
        &world.discovery,
        MeshSettings::default(),
        "v1",
        converters,
    ))
}

fn gateway_router(world: &World) -> ProxyContext {
    let mut proxy = router("istio-system", &[("gateway.networking.k8s.io/gateway-name", "gw")]);
    proxy.ips = vec!["10.0.0.1".into()];
    proxy.set_instances_from(&world.discovery);
    proxy
}

fn bench(c: &mut Criterion) {
    let world = World::new(parse(&(services() + &workload::generated(ROUTES)), "default"));
    let converters: Vec<Arc<dyn ConfigConverter>> = vec![Arc::new(gateway::GatewayApiConverter::new())];
    let proxy = gateway_router(&world);

    let push = snapshot(&world, &converters);
    let names = route_names(&push, &proxy);
    assert_eq!(names, ["http.80"], "the router serves the Gateway's one HTTP listener");
    let rds = generate_routes_encoded(&push, &proxy, &names);
    let table = rds.resources[0].bytes().len();
    let vhosts =
        meshpilot_networking::rds::generate_routes(&push, &proxy, &names).resources[0].virtual_hosts.len();
    assert_eq!(vhosts, ROUTES, "one virtual host per HTTPRoute hostname");
    println!("bytes rds/{ROUTES}-httproutes: 1 route configuration, {vhosts} virtual hosts, {table} bytes");

    c.bench_function("gateway-api/snapshot/1000-httproutes", |b| {
        b.iter(|| {
            let push = snapshot(&world, &converters);
            black_box(route_names(&push, &proxy))
        })
    });
    c.bench_function("gateway-api/rds/1000-httproutes", |b| {
        b.iter_batched(
            || snapshot(&world, &converters),
            |push| black_box(generate_routes_encoded(&push, &proxy, &names)),
            BatchSize::LargeInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
