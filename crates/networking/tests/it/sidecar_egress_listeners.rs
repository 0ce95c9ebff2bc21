//! Sidecar egress listeners with a `port`, `bind` and `captureMode` (Istio's
//! `buildSidecarOutboundListeners`), and Gateway servers with a `bind`: listener names and addresses,
//! `bind_to_port`, route configuration names and what their virtual hosts serve.

use crate::support;

use meshpilot_networking::{
    cluster::generate_clusters, debug::listener_summary, listener::generate_listeners, rds::generate_routes,
};
use serde_json::Value;
use support::*;

/// `svc` (HTTP 8080 + TCP 9000, VIP 10.1.1.1) and `other` (HTTP 8080, VIP 10.1.1.2) in ns1, `db`
/// (TCP 5432, VIP 10.2.2.2) in ns2.
const SERVICES: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: ns1}
spec:
  hosts: [svc.ns1.svc.cluster.local]
  addresses: [10.1.1.1]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: other, namespace: ns1}
spec:
  hosts: [other.ns1.svc.cluster.local]
  addresses: [10.1.1.2]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: ns2}
spec:
  hosts: [db.ns2.svc.cluster.local]
  addresses: [10.2.2.2]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.3}]
---
"#;

/// A Sidecar for ns1 whose `egress` list is `entries` (YAML list items, two-space indented).
fn ns1_egress(entries: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: ns1}}\nspec:\n  egress:\n{entries}"
    )
}

/// The sorted names of the outbound clusters of an ns1 sidecar.
fn outbound_clusters(w: &World) -> Vec<String> {
    generate_clusters(&w.push(), &sidecar("ns1", &[]), &[])
        .resources
        .into_iter()
        .map(|c| c.name)
        .filter(|n| n.starts_with("outbound|"))
        .collect()
}

fn world(sidecar_yaml: &str) -> World {
    World::new(parse(&format!("{SERVICES}{sidecar_yaml}"), "default"))
}

fn summaries(w: &World, proxy: &model::push::ProxyContext) -> (Vec<Value>, Vec<model::Finding>) {
    let out = generate_listeners(&w.push(), proxy, &[]);
    (out.resources.iter().map(listener_summary).collect(), out.findings)
}

fn names(ls: &[Value]) -> Vec<&str> {
    ls.iter().map(|l| l["name"].as_str().unwrap()).collect()
}

fn sorted_names(ls: &[Value]) -> Vec<&str> {
    let mut out = names(ls);
    out.sort_unstable();
    out
}

fn by_name<'a>(ls: &'a [Value], name: &str) -> &'a Value {
    ls.iter().find(|l| l["name"] == name).unwrap_or_else(|| panic!("no listener {name}: {:?}", names(ls)))
}

fn vhost_names(rc: &envoy_types::pb::envoy::config::route::v3::RouteConfiguration) -> Vec<&str> {
    rc.virtual_hosts.iter().map(|v| v.name.as_str()).collect()
}

const PORTED: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: ns1}
spec:
  egress:
  - port: {number: 8080, protocol: HTTP, name: http}
    bind: 127.0.0.1
    captureMode: NONE
    hosts: ["./svc.ns1.svc.cluster.local"]
  - port: {number: 5432, protocol: TCP, name: tcp}
    hosts: ["ns2/*"]
  - hosts: ["./*"]
"#;

#[test]
fn an_egress_port_with_bind_and_capture_none_binds_its_address_for_its_hosts_only() {
    let w = world(PORTED);
    let (ls, findings) = summaries(&w, &sidecar("ns1", &[]));
    assert!(!findings.iter().any(|f| f.path.starts_with("spec.egress")), "{findings:?}");
    let mut got = names(&ls);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            "0.0.0.0_8080",
            "10.1.1.1_9000",
            "10.2.2.2_5432",
            "127.0.0.1_8080",
            "virtualInbound",
            "virtualOutbound"
        ]
    );
    // captureMode NONE: Envoy binds 127.0.0.1:8080 itself; the others wait for virtualOutbound.
    let own = by_name(&ls, "127.0.0.1_8080");
    assert_eq!(own["address"], "127.0.0.1:8080");
    assert!(own.get("bind_to_port").is_none(), "{own:#}");
    assert_eq!(own["filter_chains"][0]["filters"][0]["routes"]["rds"], "8080");
    assert_eq!(by_name(&ls, "10.2.2.2_5432")["bind_to_port"], false);
    assert_eq!(by_name(&ls, "0.0.0.0_8080")["bind_to_port"], false);
    // The 8080 table is the egress entry's (Istio's `GetEgressListenerForRDS`): `svc` only, even for
    // the catch-all's 0.0.0.0:8080 listener that shares its name.
    let rc = &generate_routes(&w.push(), &sidecar("ns1", &[]), &["8080".to_string()]).resources[0];
    assert_eq!(vhost_names(rc), ["svc.ns1.svc.cluster.local:8080", "allow_any"]);
    assert_eq!(
        route_clusters(vhost(rc, "svc.ns1.svc.cluster.local:8080")),
        ["outbound|8080||svc.ns1.svc.cluster.local"]
    );
    // The TCP entry: ns2's db on its VIP, proxied to its cluster.
    let db = by_name(&ls, "10.2.2.2_5432");
    assert_eq!(
        db["filter_chains"][0]["filters"][0]["target"]["cluster"],
        "outbound|5432||db.ns2.svc.cluster.local"
    );
    // Clusters: every port the catch-all imports, and each port entry's port.
    let clusters = outbound_clusters(&w);
    assert_eq!(
        clusters,
        [
            "outbound|5432||db.ns2.svc.cluster.local",
            "outbound|8080||other.ns1.svc.cluster.local",
            "outbound|8080||svc.ns1.svc.cluster.local",
            "outbound|9000||svc.ns1.svc.cluster.local",
        ]
    );
}

#[test]
fn a_port_entry_imports_only_services_with_that_port() {
    let w = world(&ns1_egress(
        r#"  - port: {number: 8080, protocol: HTTP, name: http}
    hosts: ["*/*"]
"#,
    ));
    let clusters = outbound_clusters(&w);
    // db has no 8080, svc's 9000 is not the entry's port.
    assert_eq!(
        clusters,
        ["outbound|8080||other.ns1.svc.cluster.local", "outbound|8080||svc.ns1.svc.cluster.local"]
    );
    let (ls, _) = summaries(&w, &sidecar("ns1", &[]));
    assert_eq!(sorted_names(&ls), ["0.0.0.0_8080", "virtualInbound", "virtualOutbound"]);
    // No catch-all: a table for another port has nothing but the catch-all virtual host.
    let rc = &generate_routes(&w.push(), &sidecar("ns1", &[]), &["9000".to_string()]).resources[0];
    assert_eq!(vhost_names(rc), ["allow_any"]);
}

#[test]
fn capture_none_without_bind_takes_loopback_and_the_port_protocol_decides_the_listener() {
    // A TCP entry on an HTTP service port: the entry's protocol makes it a TCP proxy; captureMode
    // NONE without bind: loopback (::1 for an IPv6-only proxy).
    let w = world(&ns1_egress(
        r#"  - port: {number: 8080, protocol: TCP, name: tcp}
    captureMode: NONE
    hosts: ["./other.ns1.svc.cluster.local"]
"#,
    ));
    let (ls, _) = summaries(&w, &sidecar("ns1", &[]));
    let own = by_name(&ls, "127.0.0.1_8080");
    assert!(own.get("bind_to_port").is_none());
    assert_eq!(
        own["filter_chains"][0]["filters"][0]["target"]["cluster"],
        "outbound|8080||other.ns1.svc.cluster.local"
    );
    let mut v6 = sidecar("ns1", &[]);
    v6.ips = vec!["fd00::5".to_string()];
    let (ls, _) = summaries(&w, &v6);
    assert_eq!(by_name(&ls, "::1_8080")["address"], "::1:8080");
    // Without traffic capture every listener binds its port on the proxy's loopback address.
    let (ls, _) = summaries(&w, &loopback_sidecar("ns1"));
    assert_eq!(names(&ls), ["127.0.0.1_8080"]);
}

#[test]
fn an_egress_port_without_protocol_on_its_own_bind_gets_a_table_per_host() {
    let w = world(&ns1_egress(
        r#"  - port: {number: 8080, name: web}
    bind: 127.0.0.5
    hosts: ["./svc.ns1.svc.cluster.local"]
"#,
    ));
    let proxy = sidecar("ns1", &[]);
    let (ls, _) = summaries(&w, &proxy);
    let own = by_name(&ls, "127.0.0.5_8080");
    // An IPTABLES/DEFAULT capture mode with a bind: reached through virtualOutbound only.
    assert_eq!(own["bind_to_port"], false);
    let rds: Vec<&Value> = own["filter_chains"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["filters"].as_array().unwrap().iter().find_map(|f| f.get("routes")))
        .collect();
    assert_eq!(rds[0]["rds"], "svc.ns1.svc.cluster.local:8080");
    let rc =
        &generate_routes(&w.push(), &proxy, &["svc.ns1.svc.cluster.local:8080".to_string()]).resources[0];
    assert_eq!(vhost_names(rc), ["svc.ns1.svc.cluster.local:8080"]);
}

#[test]
fn unix_socket_and_http_proxy_entries_are_reported_and_leave_other_listeners_alone() {
    let w = world(&ns1_egress(
        r#"  - port: {number: 0, protocol: HTTP, name: uds}
    bind: unix:///var/run/app.sock
    hosts: ["./svc.ns1.svc.cluster.local"]
  - port: {number: 3128, protocol: HTTP_PROXY, name: proxy}
    hosts: ["./*"]
  - hosts: ["ns2/*"]
"#,
    ));
    let (ls, _) = summaries(&w, &sidecar("ns1", &[]));
    assert_eq!(sorted_names(&ls), ["10.2.2.2_5432", "virtualInbound", "virtualOutbound"]);
    // Scope findings travel with CDS (once per proxy).
    let findings = generate_clusters(&w.push(), &sidecar("ns1", &[]), &[]).findings;
    let paths: Vec<&str> = findings.iter().map(|f| f.path.as_str()).collect();
    assert!(paths.contains(&"spec.egress[0].port") && paths.contains(&"spec.egress[1].port"), "{findings:?}");
}

const GATEWAYS: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns1}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*/a.example.com"]
  - port: {number: 8080, name: http-local, protocol: HTTP}
    bind: 127.0.0.1
    hosts: ["*/b.example.com"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: routes, namespace: ns1}
spec:
  hosts: [a.example.com, b.example.com]
  gateways: [gw]
  http:
  - route: [{destination: {host: other.ns1.svc.cluster.local, port: {number: 8080}}}]
---
"#;

#[test]
fn gateway_servers_with_a_bind_get_listeners_and_routes_of_their_own() {
    let w = world(GATEWAYS);
    let gw = router("ns1", &[("istio", "ingressgateway")]);
    let (ls, findings) = summaries(&w, &gw);
    assert!(!findings.iter().any(|f| f.path.ends_with(".bind")), "{findings:?}");
    assert_eq!(names(&ls), ["0.0.0.0_8080", "127.0.0.1_8080"]);
    assert_eq!(by_name(&ls, "127.0.0.1_8080")["address"], "127.0.0.1:8080");
    assert_eq!(by_name(&ls, "0.0.0.0_8080")["filter_chains"][0]["filters"][0]["routes"]["rds"], "http.8080");
    assert_eq!(
        by_name(&ls, "127.0.0.1_8080")["filter_chains"][0]["filters"][0]["routes"]["rds"],
        "http.8080.127.0.0.1"
    );
    let push = w.push();
    let routes = generate_routes(&push, &gw, &[]);
    let route_names: Vec<&str> = routes.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(route_names, ["http.8080", "http.8080.127.0.0.1"]);
    let domains = |i: usize| -> Vec<String> {
        routes.resources[i].virtual_hosts.iter().flat_map(|v| v.domains.clone()).collect()
    };
    assert_eq!(domains(0), ["a.example.com"]);
    assert_eq!(domains(1), ["b.example.com"]);
}

#[test]
fn an_ingress_listener_on_an_egress_address_is_left_out_and_reported() {
    let w = world(&format!(
        "{}  ingress:\n  - port: {{number: 8080, protocol: HTTP, name: in}}\n    defaultEndpoint: 127.0.0.1:9999\n",
        ns1_egress(
            "  - port: {number: 8080, protocol: HTTP, name: http}\n    bind: 127.0.0.1\n    hosts: [\"./svc.ns1.svc.cluster.local\"]\n"
        )
    ));
    // Without capture, ingress listeners bind the proxy's IP.
    let mut proxy = loopback_sidecar("ns1");
    proxy.ips = vec!["127.0.0.1".to_string()];
    let (ls, findings) = summaries(&w, &proxy);
    assert_eq!(names(&ls), ["127.0.0.1_8080"]);
    assert_eq!(ls[0]["filter_chains"][0]["filters"][0]["routes"]["rds"], "8080", "the egress listener");
    let f = findings.iter().find(|f| f.path == "spec.ingress").expect("reported");
    assert_eq!((f.severity, f.resource.as_str()), (model::Severity::Dropped, "127.0.0.1_8080"));
}

#[test]
fn nothing_listens_on_the_wildcard_at_the_virtual_listener_ports() {
    let w = World::new(parse(
        &format!(
            "{SERVICES}apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: odd, namespace: ns1}}\n\
             spec:\n  hosts: [odd.ns1.svc.cluster.local]\n  location: MESH_INTERNAL\n  \
             ports: [{{number: 15001, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  endpoints: [{{address: 10.0.0.9}}]\n"
        ),
        "default",
    ));
    let (ls, _) = summaries(&w, &sidecar("ns1", &[]));
    assert!(!names(&ls).contains(&"0.0.0.0_15001"), "{:?}", names(&ls));
    assert_eq!(by_name(&ls, "virtualOutbound")["address"], "0.0.0.0:15001");
}
