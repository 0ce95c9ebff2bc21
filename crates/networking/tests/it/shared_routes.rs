//! Sidecar route configurations are generated once per snapshot and shared by proxies that would get
//! the same one; sharing never leaks one proxy's routes to another that must differ (workload labels
//! with `sourceLabels`, DNS domain, namespace).

use crate::support;

use meshpilot_networking::rds::generate_routes;
use support::*;

const MESH: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: ns1}
spec:
  hosts: [reviews.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: ns1}
spec:
  hosts: [reviews.ns1.svc.cluster.local]
  http:
  - match: [{sourceLabels: {app: productpage}}]
    route: [{destination: {host: reviews.ns1.svc.cluster.local}}]
    timeout: 7s
  - route: [{destination: {host: reviews.ns1.svc.cluster.local}}]
"#;

fn routes(push: &meshpilot_networking::Snapshot, p: &model::push::ProxyContext) -> String {
    format!("{:?}", generate_routes(push, p, &["80".to_string()]).resources)
}

#[test]
fn shared_routes_follow_labels_domain_and_namespace() {
    let world = World::new(parse(MESH, "ns1"));
    let push = world.push();
    let product = sidecar("ns1", &[("app", "productpage")]);
    let other = sidecar("ns1", &[("app", "ratings")]);
    // sourceLabels: the productpage sidecar gets the 7 s route first, the other does not.
    let (a, b) = (routes(&push, &product), routes(&push, &other));
    assert!(a.contains("seconds: 7"), "{a}");
    assert!(!b.contains("seconds: 7"), "{b}");
    // Asked again (now from the shared copy), each still gets its own.
    assert_eq!(routes(&push, &product), a);
    assert_eq!(routes(&push, &other), b);
    // Another namespace's proxy gets the short host forms of its own DNS domain.
    let elsewhere = sidecar("ns2", &[("app", "productpage")]);
    let c = routes(&push, &elsewhere);
    assert!(a.contains("\"reviews\"") && !c.contains("\"reviews\""), "{c}");
    // A fresh snapshot agrees with the shared result.
    assert_eq!(routes(&world.push(), &other), b);
}

#[test]
fn without_source_labels_proxies_of_a_scope_share_one_route_configuration() {
    let text = MESH
        .replace("  - match: [{sourceLabels: {app: productpage}}]\n", "  - match: [{uri: {prefix: /x}}]\n");
    let world = World::new(parse(&text, "ns1"));
    let push = world.push();
    let a = routes(&push, &sidecar("ns1", &[("app", "productpage")]));
    let b = routes(&push, &sidecar("ns1", &[("app", "ratings")]));
    assert_eq!(a, b);
    assert!(a.contains("seconds: 7"), "{a}");
}

/// A route with two per-filter configs (fault and CORS: envoy-types keeps them in a `HashMap`) encodes
/// to the same bytes in every snapshot, so its content-hash version only changes with its content.
/// Twenty snapshots: with the map's own order, all twenty agreeing would be a 1-in-2^19 chance.
#[test]
fn route_tables_encode_identically_in_every_snapshot() {
    // MESH's ServiceEntry, with a VirtualService whose route has both a fault and a CORS policy.
    let service_entry = MESH.split("---").next().unwrap_or_default();
    let text = service_entry.to_string()
        + r#"---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: ns1}
spec:
  hosts: [reviews.ns1.svc.cluster.local]
  http:
  - route: [{destination: {host: reviews.ns1.svc.cluster.local}}]
    fault: {abort: {httpStatus: 418, percentage: {value: 1}}}
    corsPolicy: {allowOrigins: [{exact: "https://example.com"}], allowMethods: [GET]}
"#;
    let world = World::new(parse(&text, "ns1"));
    let p = sidecar("ns1", &[("app", "productpage")]);
    let names = ["80".to_string()];
    let first = meshpilot_networking::rds::generate_routes_encoded(&world.push(), &p, &names);
    let decoded = generate_routes(&world.push(), &p, &names);
    let text = format!("{:?}", decoded.resources);
    assert!(text.contains("envoy.filters.http.fault") && text.contains("envoy.filters.http.cors"), "{text}");
    for _ in 0..19 {
        let again = meshpilot_networking::rds::generate_routes_encoded(&world.push(), &p, &names);
        assert_eq!(again.resources, first.resources);
    }
}
