//! The cluster a VirtualService destination goes to, as istiod names it (`route.GetDestinationCluster`): a
//! sidecar's route table on a port knows only the services with that port, a gateway's every service; a
//! destination without a port takes the known service's only port, else the table's port; a host the table
//! does not know keeps its route to a cluster that does not exist (Envoy answers 503), as with Istio.
//! Differences found by the conformance harness against istiod (docs/CONFORMANCE.md).

use crate::support;

use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use meshpilot_networking::rds::generate_routes;
use model::Severity;
use support::*;

const CONFIG: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns1}
spec:
  hosts: [web.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: details, namespace: ns1}
spec:
  hosts: [details.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: multi, namespace: ns1}
spec:
  hosts: [multi.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9090, name: http-admin, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.3}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: ns1}
spec:
  hosts: [web.ns1.svc.cluster.local]
  http:
  - match: [{uri: {prefix: /details}}]
    route: [{destination: {host: details, subset: v2}}]
  - match: [{uri: {prefix: /multi}}]
    route: [{destination: {host: multi}}]
  - match: [{uri: {prefix: /ghost}}]
    route: [{destination: {host: ghost.example}}]
  - match: [{uri: {prefix: /ported}}]
    route: [{destination: {host: ghost.example, port: {number: 7000}}}]
  - route: [{destination: {host: web}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: details, namespace: ns1}
spec:
  hosts: [details]
  http:
  - route: [{destination: {host: details, subset: v2}}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns1}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: edge, namespace: ns1}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - match: [{uri: {prefix: /details}}]
    route: [{destination: {host: details}}]
  - match: [{uri: {prefix: /multi}}]
    route: [{destination: {host: multi}}]
  - match: [{uri: {prefix: /ghost}}]
    route: [{destination: {host: ghost.example}}]
"#;

/// The cluster of every route of virtual host `vhost` in `rc`, in order.
fn clusters(rc: &RouteConfiguration, name: &str) -> Vec<String> {
    route_clusters(vhost(rc, name))
}

#[test]
fn sidecar_tables_know_only_the_services_with_their_port() {
    let world = World::new(parse(CONFIG, "ns1"));
    let push = world.push();
    let proxy = sidecar("ns1", &[]);
    let out = generate_routes(&push, &proxy, &["80".to_string(), "9080".to_string()]);
    let (t80, t9080) = (&out.resources[0], &out.resources[1]);
    assert_eq!((t80.name.as_str(), t9080.name.as_str()), ("80", "9080"));
    // On 80, details (9080 only) and multi (8080, 9090) are not known: the table's port names the cluster.
    assert_eq!(
        clusters(t80, "web.ns1.svc.cluster.local:80"),
        [
            "outbound|80|v2|details.ns1.svc.cluster.local",
            "outbound|80||multi.ns1.svc.cluster.local",
            "outbound|80||ghost.example",
            "outbound|7000||ghost.example",
            "outbound|80||web.ns1.svc.cluster.local",
        ]
    );
    // Port 80 also carries VirtualService hosts without a service on 80 (Istio's port-80 rule), with the
    // same port-80 clusters.
    assert_eq!(
        clusters(t80, "details.ns1.svc.cluster.local:80"),
        ["outbound|80|v2|details.ns1.svc.cluster.local"]
    );
    // On 9080 details is known.
    assert_eq!(
        clusters(t9080, "details.ns1.svc.cluster.local:9080"),
        ["outbound|9080|v2|details.ns1.svc.cluster.local"]
    );
    // Unknown hosts are kept with a warning each, nothing is dropped.
    let warned: Vec<&str> =
        out.findings.iter().filter(|f| f.severity == Severity::Warning).map(|f| f.path.as_str()).collect();
    assert!(warned.contains(&"spec.http[2].route[0].destination.host"), "{:?}", out.findings);
    assert!(out.findings.iter().all(|f| f.severity != Severity::Dropped), "{:?}", out.findings);
}

#[test]
fn gateway_tables_know_every_service_and_use_a_single_port() {
    let world = World::new(parse(CONFIG, "ns1"));
    let push = world.push();
    let proxy = router("ns1", &[("istio", "ingressgateway")]);
    let out = generate_routes(&push, &proxy, &["http.80".to_string()]);
    let rc = &out.resources[0];
    let vhost = rc.virtual_hosts.iter().find(|v| v.domains.iter().any(|d| d == "*")).expect("the * host");
    assert_eq!(
        clusters(rc, &vhost.name),
        [
            // details has one port: its port, not the server's.
            "outbound|9080||details.ns1.svc.cluster.local",
            // multi has two: the server's port (no such cluster: 503, as istiod).
            "outbound|80||multi.ns1.svc.cluster.local",
            // unknown: the server's port.
            "outbound|80||ghost.example",
        ]
    );
}
