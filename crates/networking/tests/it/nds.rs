//! NDS name tables (`networking::nds::build_name_table`) against the cases of Istio's
//! `pkg/dns/server/name_table_test.go`: Kubernetes services with their short names, ServiceEntries
//! with addresses or auto-allocated VIPs (only for proxies that capture DNS), headless services from
//! their healthy endpoints, nothing for hosts without an address, and only the Sidecar scope's services.

use meshpilot_networking::nds::{NameInfo, NameTableProxy, build_name_table};
use model::service::{Port, ProviderId, Resolution, Service};

use crate::support::{World, external_name_service, parse, sidecar};

const ENTRIES: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: ns}
spec:
  hosts: [api.example.com, web.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
status:
  addresses:
  - {value: 240.240.0.1, host: api.example.com}
  - {value: "2001:2::1", host: api.example.com}
  - {value: 240.240.0.2, host: web.example.com}
  - {value: "2001:2::2", host: web.example.com}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: ns}
spec:
  hosts: [db.example.com]
  addresses: [10.1.0.1, 10.1.0.2, 10.9.0.0/16]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.1.1.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: none, namespace: ns}
spec:
  hosts: [passthrough.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: hidden, namespace: other}
spec:
  hosts: [hidden.example.com]
  addresses: [10.2.0.1]
  exportTo: ["."]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.2.1.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: optout
  namespace: ns
  labels: {networking.istio.io/enable-autoallocate-ip: "false"}
spec:
  hosts: [optout.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
status:
  addresses: [{value: 240.240.0.3, host: optout.example.com}]
"#;

fn kube_service(name: &str, ns: &str, addresses: &[&str]) -> Service {
    let mut s = external_name_service(name, ns, "unused", &[("http", 80)]);
    s.external_name = None;
    s.resolution = if addresses.is_empty() { Resolution::Passthrough } else { Resolution::ClientSideLb };
    s.mesh_external = false;
    s.addresses = addresses.iter().map(|a| a.to_string()).collect();
    s.ports = vec![Port { name: "http".into(), port: 80, protocol: model::Protocol::Http }];
    s
}

fn info(ips: &[&str], registry: ProviderId, short: &str, ns: &str) -> NameInfo {
    NameInfo {
        ips: ips.iter().map(|a| a.to_string()).collect(),
        registry: registry.as_str().into(),
        shortname: short.into(),
        namespace: ns.into(),
        alt_hosts: Vec::new(),
    }
}

#[test]
fn the_table_holds_the_scope_services_with_their_addresses() {
    let services = vec![
        kube_service("reviews", "ns", &["10.96.0.10", "fd00::10"]),
        kube_service("headless", "ns", &[]),
        external_name_service("alias", "ns", "api.example.com", &[("http", 80)]),
    ];
    let world = World::with_services(parse(ENTRIES, "ns"), services);
    let push = world.push();
    let proxy = sidecar("ns", &[]);
    let scope = push.sidecar_scope(&proxy);
    let capture = NameTableProxy::new(&["10.0.0.5"], "", true);
    let table = build_name_table(&push, &scope, &capture).table;
    let hosts: Vec<&str> = table.keys().map(String::as_str).collect();
    assert_eq!(
        hosts,
        ["api.example.com", "db.example.com", "reviews.ns.svc.cluster.local", "web.example.com"],
        "no address: passthrough (NONE), the opted-out entry, the endpoint-less headless Service, the \
         alias; hidden.example.com is not exported to ns"
    );
    assert_eq!(table["api.example.com"], info(&["240.240.0.1"], ProviderId::External, "", ""), "IPv4 proxy");
    assert_eq!(table["db.example.com"], info(&["10.1.0.1", "10.1.0.2"], ProviderId::External, "", ""));
    assert_eq!(
        table["reviews.ns.svc.cluster.local"],
        info(&["10.96.0.10"], ProviderId::Kubernetes, "reviews", "ns")
    );

    // Without DNS capture the auto-allocated VIPs are not used.
    let plain = build_name_table(&push, &scope, &NameTableProxy::new(&["10.0.0.5"], "", false)).table;
    assert!(!plain.contains_key("api.example.com"), "{plain:?}");
    assert!(plain.contains_key("db.example.com"));

    // A dual-stack proxy gets both families.
    let dual =
        build_name_table(&push, &scope, &NameTableProxy::new(&["10.0.0.5", "fd00::5"], "", true)).table;
    assert_eq!(dual["api.example.com"].ips, ["240.240.0.1", "2001:2::1"]);
    assert_eq!(dual["reviews.ns.svc.cluster.local"].ips, ["10.96.0.10", "fd00::10"]);
}

#[test]
fn a_sidecar_egress_narrows_the_table() {
    let sidecar_yaml = r#"
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: ns}
spec:
  egress: [{hosts: ["./db.example.com"]}]
"#;
    let world = World::new(parse(&format!("{ENTRIES}{sidecar_yaml}"), "ns"));
    let push = world.push();
    let proxy = sidecar("ns", &[]);
    let scope = push.sidecar_scope(&proxy);
    let table = build_name_table(&push, &scope, &NameTableProxy::new(&["10.0.0.5"], "", true)).table;
    assert_eq!(table.keys().collect::<Vec<_>>(), ["db.example.com"]);
}

#[test]
fn headless_entries_resolve_to_their_healthy_endpoints_on_the_proxy_network() {
    // NONE resolution with endpoints and no address: Istio's headless branch. ServiceEntry endpoints
    // carry no health (Istio's unset status), which Istio's table leaves out as not Healthy.
    let yaml = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: hl, namespace: ns}
spec:
  hosts: [hl.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: NONE
  endpoints: [{address: 10.3.0.1}, {address: 10.3.0.2}]
"#;
    let world = World::new(parse(yaml, "ns"));
    let push = world.push();
    let scope = push.sidecar_scope(&sidecar("ns", &[]));
    let table = build_name_table(&push, &scope, &NameTableProxy::new(&["10.0.0.5"], "", true)).table;
    assert!(table.is_empty(), "{table:?}");
}
