//! Services a Sidecar scope takes from the destinations of the VirtualServices it imports (Istio's
//! `SidecarScope` inference in `pilot/pkg/model/sidecar.go`): a destination host the egress hosts do
//! not import still gets its cluster, trimmed to the ports the destinations name; routes whose match
//! names another `sourceNamespace` add nothing.

use crate::support;

use meshpilot_networking::cluster::generate_clusters;
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
metadata: {name: backend, namespace: ns2}
spec:
  hosts: [backend.ns2.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: other, namespace: ns2}
spec:
  hosts: [other.ns2.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 7070, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.3}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: ns1}
spec:
  egress:
  - hosts: ["./*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front, namespace: ns1}
spec:
  hosts: [front]
  http:
  - match: [{sourceNamespace: elsewhere}]
    route: [{destination: {host: other.ns2.svc.cluster.local}}]
  - route: [{destination: {host: backend.ns2.svc.cluster.local, port: {number: 8080}}}]
---
"#;

#[test]
fn virtual_service_destinations_add_their_services_to_the_scope() {
    let w = World::new(parse(WORLD, "ns1"));
    let push = w.push();
    let proxy = sidecar("ns1", &[]);
    let mut names: Vec<String> = generate_clusters(&push, &proxy, &[])
        .resources
        .into_iter()
        .map(|c| c.name)
        .filter(|n| n.starts_with("outbound|"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["outbound|8080||backend.ns2.svc.cluster.local", "outbound|80||front.ns1.svc.cluster.local"]
    );
    // Without the VirtualService, the egress hosts alone.
    let without =
        WORLD.split("---\napiVersion: networking.istio.io/v1\nkind: VirtualService").next().unwrap();
    let w = World::new(parse(without, "ns1"));
    let names: Vec<String> = generate_clusters(&w.push(), &proxy, &[])
        .resources
        .into_iter()
        .map(|c| c.name)
        .filter(|n| n.starts_with("outbound|"))
        .collect();
    assert_eq!(names, ["outbound|80||front.ns1.svc.cluster.local"]);
}
