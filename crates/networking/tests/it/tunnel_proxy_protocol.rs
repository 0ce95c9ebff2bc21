//! DestinationRule `trafficPolicy.tunnel` → the outbound TCP proxy's `tunneling_config`;
//! `trafficPolicy.proxyProtocol` → the cluster's `upstream_proxy_protocol` transport socket.

use crate::support;

use envoy_types::pb::envoy::{
    config::{
        cluster::v3::Cluster,
        core::v3::{TransportSocket, proxy_protocol_config::Version, transport_socket::ConfigType},
        listener::v3::{Listener, filter},
    },
    extensions::{
        filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy::TunnelingConfig},
        transport_sockets::proxy_protocol::v3::ProxyProtocolUpstreamTransport,
    },
};
use meshpilot_networking::{cluster::generate_clusters, listener::generate_listeners};
use prost::Message;
use support::*;

const DB: &str = "db.ns1.svc.cluster.local";
const PG: &str = "pg.ns1.svc.cluster.local";

/// `db` (tunnelled); `db-b` and `db-c` route all TCP to `db`'s subsets `v1` (its own tunnel, over
/// POST to an IPv6 proxy target) and `v2` (no tunnel of its own); `pg` sends PROXY v2 (its subset
/// `tls` over TLS, its subset `v1` PROXY v1); `web` is an auto-mTLS HTTP service sending PROXY v1
/// whose subset `tunnelled` sets a tunnel, which istiod never applies to HTTP. (Validation keeps
/// `tunnel` and `proxyProtocol` out of the same policy block.)
const WORLD: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: ns1}
spec:
  hosts: [db.ns1.svc.cluster.local]
  addresses: [240.0.0.10]
  location: MESH_EXTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints:
  - {address: 10.0.0.1, labels: {version: v1}}
  - {address: 10.0.0.2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db-b, namespace: ns1}
spec:
  hosts: [db-b.ns1.svc.cluster.local]
  addresses: [240.0.0.11]
  location: MESH_EXTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.3}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db-c, namespace: ns1}
spec:
  hosts: [db-c.ns1.svc.cluster.local]
  addresses: [240.0.0.12]
  location: MESH_EXTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.4}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns1}
spec:
  hosts: [web.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.5, labels: {security.istio.io/tlsMode: istio}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db-b, namespace: ns1}
spec:
  hosts: [db-b.ns1.svc.cluster.local]
  tcp: [{route: [{destination: {host: db.ns1.svc.cluster.local, subset: v1}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db-c, namespace: ns1}
spec:
  hosts: [db-c.ns1.svc.cluster.local]
  tcp: [{route: [{destination: {host: db.ns1.svc.cluster.local, subset: v2}}]}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: db, namespace: ns1}
spec:
  host: db.ns1.svc.cluster.local
  trafficPolicy:
    tunnel: {targetHost: internal.db, targetPort: 5432}
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy:
      tunnel: {protocol: POST, targetHost: "2001:db8::1", targetPort: 8443}
  - name: v2
    labels: {version: v2}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: pg, namespace: ns1}
spec:
  hosts: [pg.ns1.svc.cluster.local]
  location: MESH_EXTERNAL
  ports: [{number: 5433, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints:
  - {address: 10.0.0.6, labels: {version: v1}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: pg, namespace: ns1}
spec:
  host: pg.ns1.svc.cluster.local
  trafficPolicy:
    proxyProtocol: {version: V2}
  subsets:
  - name: tls
    labels: {version: v1}
    trafficPolicy:
      tls: {mode: SIMPLE, sni: pg.example}
  - name: v1
    labels: {version: v1}
    trafficPolicy:
      proxyProtocol: {version: V1}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: ns1}
spec:
  host: web.ns1.svc.cluster.local
  trafficPolicy:
    proxyProtocol: {version: V1}
  subsets:
  - name: tunnelled
    labels: {app: web}
    trafficPolicy:
      tunnel: {targetHost: proxy.example, targetPort: 3128}
"#;

fn proxy() -> model::push::ProxyContext {
    let mut p = sidecar("ns1", &[]);
    p.workload_certificates = true;
    p
}

fn tcp_proxy(listeners: &[Listener], name: &str) -> TcpProxy {
    let l = listeners.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("no listener {name}"));
    let f = l.filter_chains[0].filters.last().expect("a terminal filter");
    let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else { panic!("{f:?}") };
    TcpProxy::decode(any.value.as_slice()).expect("a TcpProxy")
}

fn cluster<'a>(clusters: &'a [Cluster], name: &str) -> &'a Cluster {
    clusters.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no cluster {name}"))
}

/// The PROXY version and the wrapped socket's name of an `upstream_proxy_protocol` socket.
fn proxy_protocol(ts: &TransportSocket) -> (Version, String) {
    assert_eq!(ts.name, "envoy.transport_sockets.upstream_proxy_protocol");
    let Some(ConfigType::TypedConfig(any)) = &ts.config_type else { panic!("{ts:?}") };
    let pp = ProxyProtocolUpstreamTransport::decode(any.value.as_slice()).unwrap();
    let version = Version::try_from(pp.config.unwrap().version).unwrap();
    (version, pp.transport_socket.unwrap().name)
}

#[test]
fn tunnel_sets_the_tcp_proxys_tunneling_config_by_route_destination() {
    let w = World::new(parse(WORLD, "ns1"));
    let out = generate_listeners(&w.push(), &proxy(), &[]);
    let tunnel = |name: &str| tcp_proxy(&out.resources, name).tunneling_config;
    assert_eq!(
        tunnel("240.0.0.10_5432"),
        Some(TunnelingConfig { hostname: "internal.db:5432".into(), ..Default::default() })
    );
    assert_eq!(
        tunnel("240.0.0.11_5432"),
        Some(TunnelingConfig { hostname: "[2001:db8::1]:8443".into(), use_post: true, ..Default::default() }),
        "a single destination naming a subset takes the subset's tunnel"
    );
    assert_eq!(tunnel("240.0.0.12_5432"), None, "a subset without a tunnel does not inherit the rule's");
    assert!(
        !out.findings.iter().any(|f| f.path.contains("tunnel")),
        "nothing reported for the TCP listeners: {:?}",
        out.findings
    );
}

#[test]
fn proxy_protocol_wraps_the_clusters_transport_socket() {
    let w = World::new(parse(WORLD, "ns1"));
    let out = generate_clusters(&w.push(), &proxy(), &[]);
    let c = &out.resources;
    let pp = |name: &str| proxy_protocol(cluster(c, name).transport_socket.as_ref().expect("a socket"));
    assert_eq!(
        pp(&format!("outbound|5433||{PG}")),
        (Version::V2, "envoy.transport_sockets.raw_buffer".into()),
        "plaintext is wrapped in raw_buffer"
    );
    assert_eq!(
        pp(&format!("outbound|5433|tls|{PG}")),
        (Version::V2, "envoy.transport_sockets.tls".into()),
        "the subset inherits the rule's PROXY version and wraps its TLS"
    );
    assert_eq!(
        pp(&format!("outbound|5433|v1|{PG}")),
        (Version::V1, "envoy.transport_sockets.raw_buffer".into())
    );

    // Auto mTLS: every transport socket match is wrapped, the cluster keeps no socket of its own.
    let web = cluster(c, "outbound|80||web.ns1.svc.cluster.local");
    assert!(web.transport_socket.is_none());
    let wrapped: Vec<(Version, String)> = web
        .transport_socket_matches
        .iter()
        .map(|m| proxy_protocol(m.transport_socket.as_ref().unwrap()))
        .collect();
    assert_eq!(
        wrapped,
        [
            (Version::V1, "envoy.transport_sockets.tls".into()),
            (Version::V1, "envoy.transport_sockets.raw_buffer".into())
        ]
    );

    // The HTTP service's tunnel is reported (istiod applies tunnels to TCP proxies only).
    let reported: Vec<(&str, &str)> =
        out.findings.iter().map(|f| (f.path.as_str(), f.resource.as_str())).collect();
    assert_eq!(
        reported,
        [("spec.subsets[0].trafficPolicy.tunnel", "outbound|80|tunnelled|web.ns1.svc.cluster.local")]
    );
    assert!(
        cluster(c, &format!("outbound|5432||{DB}")).transport_socket.is_none(),
        "a tunnel leaves the cluster alone"
    );
}

#[test]
fn proxyless_clients_report_proxy_protocol() {
    let w = World::new(parse(WORLD, "ns1"));
    let out = generate_clusters(&w.push(), &proxyless("ns1"), &[]);
    assert!(out.findings.iter().any(
        |f| f.path == "spec.trafficPolicy.proxyProtocol" && f.resource == format!("outbound|5433||{PG}")
    ));
    assert!(cluster(&out.resources, &format!("outbound|5433||{PG}")).transport_socket.is_none());
}
