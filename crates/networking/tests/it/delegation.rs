//! VirtualService delegation: the root's delegate routes are replaced by the delegate's routes,
//! merged as Istio merges them.

use crate::support;

use meshpilot_networking::{debug::route_summary, rds::generate_routes};
use model::Severity;
use support::*;

const WORLD: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: front, namespace: ns1}
spec:
  hosts: [front.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: ns2}
spec:
  hosts: [api.ns2.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: root, namespace: ns1}
spec:
  hosts: [front]
  http:
  - name: api
    match: [{uri: {prefix: /api}}]
    delegate: {name: api-routes, namespace: ns2}
  - name: missing
    delegate: {name: nope}
  - route: [{destination: {host: front}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: api-routes, namespace: ns2}
spec:
  http:
  - name: v1
    match: [{uri: {prefix: /api/v1}}]
    route: [{destination: {host: api}}]
  - name: outside
    match: [{uri: {prefix: /other}}]
    route: [{destination: {host: api}}]
"#;

#[test]
fn delegate_routes_are_merged_into_the_root() {
    let world = World::new(parse(WORLD, "ns1"));
    let push = world.push();
    let out = generate_routes(&push, &sidecar("ns1", &[]), &["80".to_string()]);
    let rc = route_summary(&out.resources[0]);
    let vhost = rc["virtual_hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "front.ns1.svc.cluster.local:80")
        .unwrap_or_else(|| panic!("{rc:#}"));
    let routes = vhost["routes"].as_array().unwrap();
    assert_eq!(routes.len(), 2, "{routes:#?}");
    assert_eq!(routes[0]["match"]["prefix"], "/api/v1");
    assert_eq!(
        routes[0]["action"]["cluster"], "outbound|80||api.ns2.svc.cluster.local",
        "short host of the delegate's namespace"
    );
    assert_eq!(routes[1]["action"]["cluster"], "outbound|80||front.ns1.svc.cluster.local");
    let findings = push.findings();
    assert!(
        findings.iter().any(|f| f.severity == Severity::Dropped && f.message.contains("ns1/nope not found"))
    );
    assert!(
        findings
            .iter()
            .any(|f| f.path == "spec.http[1].match"
                && f.config.as_ref().is_some_and(|k| k.name == "api-routes"))
    );
}
