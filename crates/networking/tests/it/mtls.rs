//! Mutual TLS and Sidecar ingress through the generators: a plain Envoy (no workload certificates) gets
//! the same output whatever PeerAuthentications say; a proxy with workload certificates gets Istio's
//! inbound chains, `ISTIO_MUTUAL` and auto-mTLS clusters and tlsMode endpoint metadata; Sidecar ingress
//! listeners and their clusters.

use crate::support;

use envoy_types::pb::envoy::{
    config::{
        cluster::v3::Cluster,
        core::v3::{address, transport_socket::ConfigType},
        endpoint::v3::lb_endpoint::HostIdentifier,
        listener::v3::Listener,
    },
    extensions::transport_sockets::tls::v3::{DownstreamTlsContext, UpstreamTlsContext},
};
use meshpilot_networking::{
    Snapshot, cluster::generate_clusters, endpoint::generate_endpoints, listener::generate_listeners,
};
use model::{
    Severity,
    push::{InterceptionMode, ProxyContext},
};
use prost::Message;
use support::*;

/// Two mesh-internal services in `ns`: `web` (HTTP 80 → 8080) whose endpoint runs a sidecar (tlsMode
/// istio, service account `web`), `db` (TCP 5432) without one.
const SERVICES: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns}
spec:
  hosts: [web.ns.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  resolution: STATIC
  endpoints:
  - {address: 10.0.0.1, labels: {app: web, security.istio.io/tlsMode: istio}, serviceAccount: web}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: ns}
spec:
  hosts: [db.ns.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2, labels: {app: db}}]
---
"#;

const STRICT_MESH: &str = r#"
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec:
  mtls: {mode: STRICT}
---
"#;

const ISTIO_MUTUAL_DB: &str = r#"
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: db, namespace: ns}
spec:
  host: db.ns.svc.cluster.local
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
---
"#;

/// The `web` workload's sidecar (10.0.0.1, instances from the registry); with workload certificates
/// when `certified`.
fn web_proxy(w: &World, certified: bool) -> ProxyContext {
    let mut p = sidecar("ns", &[("app", "web")]);
    p.ips = vec!["10.0.0.1".to_string()];
    p.set_instances_from(&w.discovery);
    assert_eq!(p.service_instances.len(), 1);
    p.workload_certificates = certified;
    p
}

/// Everything the proxy gets, encoded (findings left out).
fn output(push: &Snapshot, proxy: &ProxyContext) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    out.extend(generate_clusters(push, proxy, &[]).resources.iter().map(Message::encode_to_vec));
    out.extend(generate_endpoints(push, proxy, &[]).resources.iter().map(Message::encode_to_vec));
    out.extend(generate_listeners(push, proxy, &[]).resources.iter().map(Message::encode_to_vec));
    out
}

fn listener<'a>(listeners: &'a [Listener], name: &str) -> &'a Listener {
    listeners.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("no listener {name}"))
}

fn cluster<'a>(clusters: &'a [Cluster], name: &str) -> &'a Cluster {
    clusters.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no cluster {name}"))
}

fn upstream(socket: &envoy_types::pb::envoy::config::core::v3::TransportSocket) -> UpstreamTlsContext {
    let Some(ConfigType::TypedConfig(any)) = &socket.config_type else { panic!("no typed config") };
    UpstreamTlsContext::decode(any.value.as_slice()).unwrap()
}

#[test]
fn a_plain_envoy_gets_the_same_output_whatever_peer_authentication_says() {
    let plain = World::new(parse(SERVICES, "ns"));
    let strict = World::new(parse(&format!("{SERVICES}{STRICT_MESH}"), "ns"));
    let (a, b) = (plain.push(), strict.push());
    let (pa, pb) = (web_proxy(&plain, false), web_proxy(&strict, false));
    assert_eq!(output(&a, &pa), output(&b, &pb));
    // And no mTLS shows up in it: no TLS socket on inbound chains, no transport socket matches, no
    // tlsMode endpoint metadata.
    let listeners = generate_listeners(&b, &pb, &[]).resources;
    assert!(
        listener(&listeners, "virtualInbound").filter_chains.iter().all(|c| c.transport_socket.is_none())
    );
    assert!(generate_clusters(&b, &pb, &[]).resources.iter().all(|c| c.transport_socket_matches.is_empty()));
    assert!(
        generate_endpoints(&b, &pb, &[])
            .resources
            .iter()
            .flat_map(|a| &a.endpoints)
            .flat_map(|l| &l.lb_endpoints)
            .all(|e| !has_tls_match(e))
    );
}

/// Whether an endpoint carries the auto-mTLS match (`envoy.transport_socket_match`); every endpoint
/// also carries `istio.workload`, which says nothing about mTLS.
fn has_tls_match(e: &envoy_types::pb::envoy::config::endpoint::v3::LbEndpoint) -> bool {
    e.metadata.as_ref().is_some_and(|m| {
        m.filter_metadata.contains_key(meshpilot_networking::mtls::TRANSPORT_SOCKET_MATCH_KEY)
    })
}

#[test]
fn istio_mutual_is_plaintext_with_a_finding_for_a_plain_envoy_and_tls_for_a_certified_proxy() {
    let w = World::new(parse(&format!("{SERVICES}{ISTIO_MUTUAL_DB}"), "ns"));
    let push = w.push();
    let plain = generate_clusters(&push, &web_proxy(&w, false), &[]);
    assert!(cluster(&plain.resources, "outbound|5432||db.ns.svc.cluster.local").transport_socket.is_none());
    let finding = plain.findings.iter().find(|f| f.path.ends_with("tls.mode")).expect("ISTIO_MUTUAL finding");
    assert_eq!(finding.severity, Severity::Unsupported);
    assert!(finding.message.contains("pilot-agent"), "{finding}");

    let certified = generate_clusters(&push, &web_proxy(&w, true), &[]);
    assert!(!certified.findings.iter().any(|f| f.path.ends_with("tls.mode")), "{:?}", certified.findings);
    let db = cluster(&certified.resources, "outbound|5432||db.ns.svc.cluster.local");
    let ctx = upstream(db.transport_socket.as_ref().expect("ISTIO_MUTUAL transport socket"));
    assert_eq!(ctx.sni, "outbound_.5432_._.db.ns.svc.cluster.local");
    let common = ctx.common_tls_context.unwrap();
    assert_eq!(common.alpn_protocols, ["istio"]);
    assert_eq!(common.tls_certificate_sds_secret_configs[0].name, "default");
    assert!(db.transport_socket_matches.is_empty(), "an explicit DestinationRule TLS replaces auto mTLS");
}

/// Proxyless gRPC clients read no SDS: `ISTIO_MUTUAL` names the certificate provider instance
/// `default` of their gRPC bootstrap (certificate `default`, roots `ROOTCA`), as istiod's grpcgen.
#[test]
fn istio_mutual_for_a_proxyless_grpc_client_uses_certificate_providers() {
    let w = World::new(parse(&format!("{SERVICES}{ISTIO_MUTUAL_DB}"), "ns"));
    let push = w.push();
    let mut grpc = web_proxy(&w, false);
    grpc.proxyless_grpc = true;
    let name = "outbound|5432||db.ns.svc.cluster.local";
    let out = generate_clusters(&push, &grpc, &[name.to_string()]);
    assert!(!out.findings.iter().any(|f| f.path.ends_with("tls.mode")), "{:?}", out.findings);
    let ctx = upstream(
        cluster(&out.resources, name).transport_socket.as_ref().expect("ISTIO_MUTUAL transport socket"),
    );
    let common = ctx.common_tls_context.unwrap();
    assert!(common.tls_certificate_sds_secret_configs.is_empty(), "no SDS for gRPC");
    let cert = common.tls_certificate_provider_instance.expect("certificate provider");
    assert_eq!((cert.instance_name.as_str(), cert.certificate_name.as_str()), ("default", "default"));
    let Some(envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::ValidationContextType::CombinedValidationContext(combined)) =
        common.validation_context_type
    else {
        panic!("combined validation context")
    };
    let roots = combined
        .default_validation_context
        .unwrap()
        .ca_certificate_provider_instance
        .expect("roots provider");
    assert_eq!((roots.instance_name.as_str(), roots.certificate_name.as_str()), ("default", "ROOTCA"));
}

/// An endpoint whose own workload PeerAuthentication is DISABLE (here on its port only) loses its
/// `tlsMode: istio` match metadata, so auto mTLS sends it plaintext (istiod's endpoint builder); the
/// other workloads keep theirs.
#[test]
fn endpoints_of_workloads_with_mtls_disabled_get_no_tls_metadata() {
    const WEB_PORT_DISABLE: &str = r#"
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: web, namespace: ns}
spec:
  selector: {matchLabels: {app: web}}
  portLevelMtls: {"8080": {mode: DISABLE}}
---
"#;
    let has_metadata = |text: &str| {
        let w = World::new(parse(text, "ns"));
        let push = w.push();
        let name = "outbound|80||web.ns.svc.cluster.local";
        let eds = generate_endpoints(&push, &web_proxy(&w, true), &[name.to_string()]).resources;
        eds[0].endpoints.iter().flat_map(|l| &l.lb_endpoints).all(has_tls_match)
    };
    assert!(has_metadata(SERVICES), "tlsMode istio endpoints carry the metadata");
    assert!(
        !has_metadata(&format!("{SERVICES}{WEB_PORT_DISABLE}")),
        "DISABLE on the endpoint's port drops it"
    );
    let other_port = WEB_PORT_DISABLE.replace("\"8080\"", "\"9999\"");
    assert!(has_metadata(&format!("{SERVICES}{other_port}")), "DISABLE on another port changes nothing");
}

#[test]
fn auto_mtls_matches_endpoints_labelled_istio() {
    let w = World::new(parse(SERVICES, "ns"));
    let push = w.push();
    let proxy = web_proxy(&w, true);
    let clusters = generate_clusters(&push, &proxy, &[]).resources;
    let web = cluster(&clusters, "outbound|80||web.ns.svc.cluster.local");
    let names: Vec<&str> = web.transport_socket_matches.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["tlsMode-istio", "tlsMode-disabled"]);
    let ctx = upstream(web.transport_socket_matches[0].transport_socket.as_ref().unwrap());
    assert_eq!(ctx.sni, "outbound_.80_._.web.ns.svc.cluster.local");
    let sans = &ctx.common_tls_context.unwrap();
    let sans = match &sans.validation_context_type {
        Some(envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::ValidationContextType::CombinedValidationContext(c)) => {
            c.default_validation_context.as_ref().unwrap().match_typed_subject_alt_names.len()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(sans, 1, "the endpoint's service account");
    let endpoints = generate_endpoints(&push, &proxy, &[]).resources;
    let metadata = |cluster: &str| {
        endpoints
            .iter()
            .find(|a| a.cluster_name == cluster)
            .unwrap()
            .endpoints
            .iter()
            .flat_map(|l| &l.lb_endpoints)
            .map(has_tls_match)
            .collect::<Vec<_>>()
    };
    assert_eq!(metadata("outbound|80||web.ns.svc.cluster.local"), [true]);
    assert_eq!(metadata("outbound|5432||db.ns.svc.cluster.local"), [false], "no tlsMode label: plaintext");
    let off = model::push::MeshSettings { enable_auto_mtls: false, ..Default::default() };
    let clusters = generate_clusters(&w.push_with(off), &proxy, &[]).resources;
    assert!(cluster(&clusters, "outbound|80||web.ns.svc.cluster.local").transport_socket_matches.is_empty());
}

#[test]
fn a_certified_proxy_gets_chains_by_its_peer_authentication() {
    let port_disable = r#"
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: web, namespace: ns}
spec:
  selector: {matchLabels: {app: web}}
  portLevelMtls: {"9000": {mode: DISABLE}}
---
"#;
    let w = World::new(parse(&format!("{SERVICES}{STRICT_MESH}{port_disable}"), "ns"));
    let push = w.push();
    let proxy = web_proxy(&w, true);
    let listeners = generate_listeners(&push, &proxy, &[]).resources;
    let vi = listener(&listeners, "virtualInbound");
    let port_chains: Vec<_> = vi
        .filter_chains
        .iter()
        .filter(|c| {
            c.filter_chain_match.as_ref().and_then(|m| m.destination_port.as_ref()).map(|p| p.value)
                == Some(8080)
        })
        .collect();
    assert_eq!(port_chains.len(), 1, "STRICT: the TLS chain only");
    let m = port_chains[0].filter_chain_match.as_ref().unwrap();
    assert_eq!(m.transport_protocol, "tls");
    let Some(ConfigType::TypedConfig(any)) = &port_chains[0].transport_socket.as_ref().unwrap().config_type
    else {
        panic!()
    };
    let ctx = DownstreamTlsContext::decode(any.value.as_slice()).unwrap();
    assert_eq!(ctx.require_client_certificate.map(|b| b.value), Some(true));
    let filters: Vec<&str> = vi.listener_filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(filters, ["envoy.filters.listener.original_dst", "envoy.filters.listener.tls_inspector"]);
    // The passthrough chains follow the workload's mode too: TLS only.
    let passthrough: Vec<_> =
        vi.filter_chains.iter().filter(|c| c.name == "PassthroughFilterChain").collect();
    assert_eq!(passthrough.len(), 1);
    assert!(passthrough[0].transport_socket.is_some());
}

#[test]
fn sidecar_ingress_binds_listeners_and_static_clusters_without_interception() {
    let text = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ingress, namespace: ns}
spec:
  ingress:
  - port: {number: 9080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
  - port: {number: 9090, protocol: TCP, name: tcp}
    defaultEndpoint: 0.0.0.0:7070
  - port: {number: 9091, protocol: TCP, name: uds}
    defaultEndpoint: unix:///var/run/app.sock
---
"#;
    let w = World::new(parse(&format!("{SERVICES}{text}"), "ns"));
    let push = w.push();
    let mut proxy = loopback_sidecar("ns");
    proxy.ips = vec!["10.0.0.9".to_string()];
    assert_eq!(proxy.interception_mode, InterceptionMode::None);
    let generated = generate_listeners(&push, &proxy, &[]);
    let listeners = generated.resources;
    assert!(!listeners.iter().any(|l| l.name == "virtualInbound"));
    let http = listener(&listeners, "10.0.0.9_9080");
    match http.address.as_ref().unwrap().address.as_ref().unwrap() {
        address::Address::SocketAddress(s) => assert_eq!(s.address, "10.0.0.9"),
        other => panic!("{other:?}"),
    }
    assert_eq!(http.filter_chains.len(), 1);
    assert!(http.filter_chains[0].transport_socket.is_none(), "a plain Envoy: plaintext only");
    assert!(http.listener_filters.is_empty(), "no original_dst, no TLS inspector");
    assert_eq!(http.filter_chains[0].filters[0].name, "envoy.filters.network.http_connection_manager");
    assert_eq!(
        listener(&listeners, "10.0.0.9_9090").filter_chains[0].filters[0].name,
        "envoy.filters.network.tcp_proxy"
    );
    assert!(
        !generated.findings.iter().any(|f| f.path.starts_with("spec.ingress")),
        "{:?}",
        generated.findings
    );

    let clusters = generate_clusters(&push, &proxy, &[]).resources;
    let endpoint_of = |name: &str| {
        let c = cluster(&clusters, name);
        let ep = &c.load_assignment.as_ref().unwrap().endpoints[0].lb_endpoints[0];
        let Some(HostIdentifier::Endpoint(e)) = &ep.host_identifier else { panic!() };
        match e.address.as_ref().unwrap().address.as_ref().unwrap() {
            address::Address::SocketAddress(s) => match &s.port_specifier {
                Some(envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(
                    p,
                )) => {
                    format!("{}:{p}", s.address)
                }
                other => panic!("{other:?}"),
            },
            address::Address::Pipe(p) => format!("pipe:{}", p.path),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(endpoint_of("inbound|9080||"), "127.0.0.1:8080");
    assert_eq!(endpoint_of("inbound|9090||"), "10.0.0.9:7070", "0.0.0.0 means the proxy's IP");
    assert_eq!(endpoint_of("inbound|9091||"), "pipe:/var/run/app.sock");

    // With workload certificates and the default (PERMISSIVE) mode, the HTTP port gets a TLS chain too.
    proxy.workload_certificates = true;
    let listeners = generate_listeners(&push, &proxy, &[]).resources;
    let http = listener(&listeners, "10.0.0.9_9080");
    assert_eq!(http.filter_chains.len(), 2);
    assert_eq!(http.listener_filters.len(), 1, "TLS inspector");
}

/// A Gateway server in `ISTIO_MUTUAL` mode (Istio's `BuildListenerTLSContext`): a router started by
/// pilot-agent terminates it with its workload certificate, requires a client certificate verified
/// against `ROOTCA` and the server's `subjectAltNames`, and routes it through its own route table; a
/// router without workload certificates cannot, so the server is left out with a finding.
#[test]
fn istio_mutual_gateway_servers_use_the_routers_workload_certificate() {
    let w = World::new(parse(
        r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: [web.example.com]
    tls: {mode: ISTIO_MUTUAL, subjectAltNames: ["spiffe://cluster.local/ns/ns/sa/client"]}
"#,
        "ns",
    ));
    let push = w.push();
    let mut gw = router("ns", &[("istio", "ingressgateway")]);
    gw.workload_certificates = true;
    let listeners = generate_listeners(&push, &gw, &[]).resources;
    let l = listener(&listeners, "0.0.0.0_443");
    assert_eq!(l.filter_chains.len(), 1, "{l:#?}");
    let Some(ConfigType::TypedConfig(any)) =
        l.filter_chains[0].transport_socket.as_ref().and_then(|t| t.config_type.as_ref())
    else {
        panic!("no TLS on the chain: {l:#?}")
    };
    let tls = DownstreamTlsContext::decode(any.value.as_slice()).unwrap();
    assert_eq!(tls.require_client_certificate.map(|b| b.value), Some(true));
    let common = tls.common_tls_context.unwrap();
    assert_eq!(common.alpn_protocols, ["h2", "http/1.1"]);
    assert_eq!(common.tls_certificate_sds_secret_configs[0].name, "default");
    let text = format!("{:?}", common.validation_context_type);
    assert!(text.contains("ROOTCA") && text.contains("spiffe://cluster.local/ns/ns/sa/client"), "{text}");
    let routes = meshpilot_networking::rds::route_names(&push, &gw);
    assert_eq!(routes, ["https.443.https.gw.ns"]);

    let plain = router("ns", &[("istio", "ingressgateway")]);
    let out = generate_listeners(&push, &plain, &[]);
    assert!(out.resources.iter().all(|l| l.name != "0.0.0.0_443"), "{:#?}", out.resources);
    assert!(
        out.findings
            .iter()
            .any(|f| f.severity == Severity::Dropped
                && f.message.contains("ISTIO_MUTUAL needs an Istio workload")),
        "{:#?}",
        out.findings
    );
    assert!(meshpilot_networking::rds::route_names(&push, &plain).is_empty());
}
