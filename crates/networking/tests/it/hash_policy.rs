//! DestinationRule `consistentHash` keys become route hash policies (Istio's `hashForService` for
//! default routes, `HashForHTTPDestination` for VirtualService destinations).

use crate::support;

use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteConfiguration,
    route::Action,
    route_action::hash_policy::{Cookie, Header, PolicySpecifier, QueryParameter},
};
use meshpilot_networking::rds::generate_routes;
use support::*;

const WORLD: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns1}
spec:
  hosts: [web.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, labels: {v: a}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: ns1}
spec:
  host: web.ns1.svc.cluster.local
  trafficPolicy:
    loadBalancer: {consistentHash: {httpHeaderName: x-user}}
  subsets:
  - name: a
    labels: {v: a}
    trafficPolicy:
      loadBalancer: {consistentHash: {httpCookie: {name: sticky, ttl: 60s}}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: ns1}
spec:
  hosts: [api.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: api, namespace: ns1}
spec:
  host: api.ns1.svc.cluster.local
  trafficPolicy:
    loadBalancer: {consistentHash: {httpQueryParameterName: u}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: api, namespace: ns1}
spec:
  hosts: [api.ns1.svc.cluster.local]
  http:
  - match: [{uri: {prefix: /one}}]
    route: [{destination: {host: web.ns1.svc.cluster.local, subset: a}}]
  - route:
    - {destination: {host: api.ns1.svc.cluster.local}, weight: 50}
    - {destination: {host: web.ns1.svc.cluster.local}, weight: 50}
"#;

fn route_table() -> RouteConfiguration {
    let world = World::new(parse(WORLD, "ns1"));
    let out = generate_routes(&world.push(), &sidecar("ns1", &[]), &["80".to_string()]);
    out.resources.into_iter().next().expect("route table for port 80")
}

fn routes<'a>(rc: &'a RouteConfiguration, vhost: &str) -> &'a [Route] {
    &rc.virtual_hosts.iter().find(|v| v.name == vhost).expect(vhost).routes
}

fn hashes(r: &Route) -> Vec<PolicySpecifier> {
    let Some(Action::Route(a)) = &r.action else { panic!("route action") };
    a.hash_policy.iter().filter_map(|h| h.policy_specifier.clone()).collect()
}

fn header(name: &str) -> PolicySpecifier {
    PolicySpecifier::Header(Header { header_name: name.into(), ..Default::default() })
}

#[test]
fn default_route_hashes_on_the_rules_key() {
    let rc = route_table();
    let web = routes(&rc, "web.ns1.svc.cluster.local:80");
    assert_eq!(hashes(&web[0]), vec![header("x-user")]);
}

#[test]
fn virtual_service_destinations_hash_as_their_rules_pick() {
    let rc = route_table();
    let api = routes(&rc, "api.ns1.svc.cluster.local:80");
    // A subset's hash wins over the rule's; the cookie keeps its TTL (Envoy generates it).
    let first = hashes(&api[0]);
    let [PolicySpecifier::Cookie(Cookie { name, ttl: Some(ttl), .. })] = first.as_slice() else {
        panic!("{first:?}")
    };
    assert_eq!((name.as_str(), ttl.seconds), ("sticky", 60));
    // Weighted destinations each add their own, in order.
    assert_eq!(
        hashes(&api[1]),
        vec![PolicySpecifier::QueryParameter(QueryParameter { name: "u".into() }), header("x-user")]
    );
}
