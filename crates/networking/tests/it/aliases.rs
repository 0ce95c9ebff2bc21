//! Kubernetes `ExternalName` Services are aliases, as in istiod (`ENABLE_EXTERNAL_NAME_ALIAS`, now always
//! on): no cluster, listener or virtual host of their own; their names (and short forms) become domains of
//! the concrete service's virtual hosts and SNI names of its TLS chains; a route to an alias goes to the
//! concrete host's cluster; an alias whose target no service defines gets nothing. Sources:
//! `pilot/pkg/model/push_context.go` (`resolveServiceAliases`), `networking/core/cluster.go`,
//! `listener.go`, `tls.go`, `httproute.go` (`generateVirtualHostDomains`) and `route/route.go`
//! (`BuildSidecarVirtualHostWrapper`, `GetDestinationCluster`).

use crate::support;

use meshpilot_networking::{cluster::generate_clusters, listener::generate_listeners, rds::generate_routes};
use support::*;

const CONFIG: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: ns1}
spec:
  hosts: [db.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: secure, namespace: ns1}
spec:
  hosts: [secure.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
---
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
kind: VirtualService
metadata: {name: web, namespace: ns1}
spec:
  hosts: [web]
  http:
  - match: [{uri: {prefix: /db}}]
    route: [{destination: {host: db}}]
  - route: [{destination: {host: web}}]
"#;

/// `db` and `secure` alias ServiceEntry hosts, `hop` aliases the alias `db` (two hops), `ghost` points
/// at a host no service defines.
fn world(extra: &str) -> World {
    World::with_services(
        parse(&format!("{CONFIG}---\n{extra}"), "ns1"),
        vec![
            external_name_service("db", "ns1", "db.example.com", &[("http", 80)]),
            external_name_service("hop", "ns2", "db.ns1.svc.cluster.local", &[("http", 80)]),
            external_name_service("ghost", "ns1", "nowhere.example.com", &[("http", 80), ("tcp-pg", 5432)]),
            external_name_service("secure", "ns1", "secure.example.com", &[("tls", 443)]),
        ],
    )
}

#[test]
fn aliases_get_no_cluster_and_no_listener() {
    let world = world("");
    let push = world.push();
    let proxy = sidecar("ns1", &[]);
    let clusters: Vec<String> =
        generate_clusters(&push, &proxy, &[]).resources.into_iter().map(|c| c.name).collect();
    for concrete in ["outbound|80||db.example.com", "outbound|443||secure.example.com"] {
        assert!(clusters.iter().any(|c| c == concrete), "{concrete} missing: {clusters:?}");
    }
    for alias in ["db.ns1.", "hop.ns2.", "ghost.ns1.", "secure.ns1."] {
        assert!(!clusters.iter().any(|c| c.contains(alias)), "a cluster for alias {alias}: {clusters:?}");
    }
    let listeners: Vec<String> =
        generate_listeners(&push, &proxy, &[]).resources.into_iter().map(|l| l.name).collect();
    assert!(listeners.iter().any(|l| l == "0.0.0.0_443"), "{listeners:?}");
    assert!(
        !listeners.iter().any(|l| l.ends_with("_5432")),
        "ghost's TCP port has a listener: {listeners:?}"
    );
}

#[test]
fn alias_names_are_domains_of_the_concrete_virtual_host_and_routes_follow_them() {
    let world = world("");
    let push = world.push();
    let proxy = sidecar("ns1", &[]);
    let rc = &generate_routes(&push, &proxy, &["80".to_string()]).resources[0];
    let names: Vec<&str> = rc.virtual_hosts.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["db.example.com:80", "web.ns1.svc.cluster.local:80", "allow_any"]);
    assert_eq!(
        vhost(rc, "db.example.com:80").domains,
        [
            "db.example.com",
            "db.example.com.",
            // the aliases by namespace: db (ns1, the proxy's: every short form), then hop (ns2)
            "db.ns1.svc.cluster.local",
            "db.ns1.svc.cluster.local.",
            "db",
            "db.ns1.svc",
            "db.ns1",
            "hop.ns2.svc.cluster.local",
            "hop.ns2.svc.cluster.local.",
            "hop.ns2",
            "hop.ns2.svc",
        ]
    );
    // `db` in a VirtualService is the alias: its route goes to the concrete host's cluster.
    assert_eq!(
        route_clusters(vhost(rc, "web.ns1.svc.cluster.local:80")),
        ["outbound|80||db.example.com", "outbound|80||web.ns1.svc.cluster.local"]
    );
}

#[test]
fn alias_names_are_sni_names_of_the_concrete_tls_chain() {
    let world = world("");
    let push = world.push();
    let proxy = sidecar("ns1", &[]);
    let listeners = generate_listeners(&push, &proxy, &["0.0.0.0_443".to_string()]).resources;
    let chain = listeners[0]
        .filter_chains
        .iter()
        .find(|c| c.name == "outbound|443||secure.example.com")
        .expect("the concrete service's chain");
    let mut names = chain.filter_chain_match.as_ref().unwrap().server_names.clone();
    names.sort();
    assert_eq!(
        names,
        [
            "secure",
            "secure.example.com",
            "secure.ns1",
            "secure.ns1.svc",
            "secure.ns1.svc.cluster.local",
            "secure.ns1.svc.cluster.local.",
        ]
    );
}

#[test]
fn a_sidecar_keeps_only_the_aliases_it_imports() {
    let world = world(
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: ns3}
spec:
  egress: [{hosts: ["*/db.example.com", "*/hop.ns2.svc.cluster.local"]}]
"#,
    );
    let push = world.push();
    let proxy = sidecar("ns3", &[]);
    let rc = &generate_routes(&push, &proxy, &["80".to_string()]).resources[0];
    let names: Vec<&str> = rc.virtual_hosts.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["db.example.com:80", "allow_any"]);
    assert_eq!(
        vhost(rc, "db.example.com:80").domains,
        [
            "db.example.com",
            "db.example.com.",
            "hop.ns2.svc.cluster.local",
            "hop.ns2.svc.cluster.local.",
            "hop.ns2",
            "hop.ns2.svc"
        ]
    );
}
