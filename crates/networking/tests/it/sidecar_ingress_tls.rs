//! Sidecar `ingress[].tls` through the listener generator (istiod's `buildInboundChainConfigs` /
//! `buildInboundListeners`): with `ENABLE_TLS_ON_SIDECAR_INGRESS` an ingress port terminates the
//! entry's TLS on one `tls` chain where mutual TLS is off for the port (PeerAuthentication `DISABLE`,
//! or a proxy without workload certificates); HTTPS is served as HTTP after termination; with mTLS on
//! the entry's TLS is ignored (reported); a certificate that cannot be served leaves the port out;
//! without the variable the block is ignored and reported, as istiod ignores it.

use crate::support;

use envoy_types::pb::envoy::{
    config::{core::v3::transport_socket::ConfigType, listener::v3::Listener},
    extensions::transport_sockets::tls::v3::DownstreamTlsContext,
};
use meshpilot_networking::listener::generate_listeners;
use model::{Finding, Severity, push::MeshSettings};
use prost::Message;
use support::*;

/// A Sidecar whose ingress port 9443 (`protocol`) terminates `tls`, forwarding to 127.0.0.1:8080.
fn sidecar_yaml(protocol: &str, tls: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: ingress, namespace: ns}}\nspec:\n  \
         ingress:\n  - port: {{number: 9443, protocol: {protocol}, name: in}}\n    \
         defaultEndpoint: 127.0.0.1:8080\n    tls: {tls}\n---\n"
    )
}

const FILES: &str = "{mode: SIMPLE, serverCertificate: /certs/cert.pem, privateKey: /certs/key.pem}";

const DISABLE: &str = "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\n\
                       metadata: {name: default, namespace: ns}\nspec: {mtls: {mode: DISABLE}}\n---\n";

/// The listeners and findings of a loopback sidecar (binding its ingress ports) in `ns` under `config`,
/// with `ENABLE_TLS_ON_SIDECAR_INGRESS` = `enabled` and workload certificates = `certified`.
fn generate(config: &str, enabled: bool, certified: bool) -> (Vec<Listener>, Vec<Finding>) {
    let w = World::new(parse(config, "ns"));
    let push =
        w.push_with(MeshSettings { enable_tls_on_sidecar_ingress: enabled, ..MeshSettings::default() });
    let mut proxy = loopback_sidecar("ns");
    proxy.ips = vec!["10.0.0.9".to_string()];
    proxy.workload_certificates = certified;
    let out = generate_listeners(&push, &proxy, &[]);
    (out.resources, out.findings)
}

fn ingress(listeners: &[Listener]) -> Option<&Listener> {
    listeners.iter().find(|l| l.name == "10.0.0.9_9443")
}

fn downstream(l: &Listener, chain: usize) -> Option<DownstreamTlsContext> {
    let socket = l.filter_chains[chain].transport_socket.as_ref()?;
    let Some(ConfigType::TypedConfig(any)) = &socket.config_type else { panic!("typed config expected") };
    Some(DownstreamTlsContext::decode(any.value.as_slice()).unwrap())
}

fn ingress_findings(findings: &[Finding]) -> Vec<(Severity, &str)> {
    findings
        .iter()
        .filter(|f| f.path.starts_with("spec.ingress"))
        .map(|f| (f.severity, f.path.as_str()))
        .collect()
}

#[test]
fn https_ingress_terminates_the_entrys_tls_as_http() {
    let (listeners, findings) = generate(&sidecar_yaml("HTTPS", FILES), true, false);
    let l = ingress(&listeners).expect("the ingress listener");
    assert_eq!(l.filter_chains.len(), 1, "one chain: TLS only");
    let m = l.filter_chains[0].filter_chain_match.as_ref().unwrap();
    assert_eq!(m.transport_protocol, "tls");
    assert!(m.application_protocols.is_empty());
    let ctx = downstream(l, 0).expect("the entry's TLS");
    let common = ctx.common_tls_context.unwrap();
    assert_eq!(common.alpn_protocols, ["h2", "http/1.1"]);
    assert_eq!(common.tls_certificate_sds_secret_configs[0].name, "file-cert:/certs/cert.pem~/certs/key.pem");
    assert_ne!(ctx.require_client_certificate.map(|b| b.value), Some(true));
    // HTTPS after termination is HTTP: the connection manager, not a TCP proxy.
    assert_eq!(
        l.filter_chains[0].filters.last().unwrap().name,
        "envoy.filters.network.http_connection_manager"
    );
    let filters: Vec<&str> = l.listener_filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(filters, ["envoy.filters.listener.tls_inspector"]);
    assert!(ingress_findings(&findings).is_empty(), "{findings:?}");
}

#[test]
fn tls_ingress_is_a_tcp_proxy_after_termination_and_unservable_certificates_drop_the_port() {
    let mutual = "{mode: MUTUAL, serverCertificate: /certs/cert.pem, privateKey: /certs/key.pem, \
                  caCertificates: /certs/ca.pem}";
    let (listeners, _) = generate(&sidecar_yaml("TLS", mutual), true, false);
    let l = ingress(&listeners).unwrap();
    assert_eq!(l.filter_chains[0].filters.last().unwrap().name, "envoy.filters.network.tcp_proxy");
    let ctx = downstream(l, 0).unwrap();
    assert_eq!(ctx.require_client_certificate.map(|b| b.value), Some(true));

    // A certificate that cannot be named as an SDS secret (a `~` in its path): the port is left out
    // (never served in plain text) and reported.
    let unnamed = "{mode: SIMPLE, serverCertificate: /certs/a~b.pem, privateKey: /certs/key.pem}";
    let (listeners, findings) = generate(&sidecar_yaml("TLS", unnamed), true, false);
    assert!(ingress(&listeners).is_none());
    assert_eq!(ingress_findings(&findings), [(Severity::Dropped, "spec.ingress[0].tls.serverCertificate")]);
}

#[test]
fn the_entrys_tls_applies_only_where_mutual_tls_is_off() {
    // A proxy with workload certificates, mTLS PERMISSIVE (the default): Istio's mTLS chains, the
    // entry's TLS ignored and reported.
    let (listeners, findings) = generate(&sidecar_yaml("HTTPS", FILES), true, true);
    let l = ingress(&listeners).unwrap();
    assert_eq!(l.filter_chains.len(), 2, "PERMISSIVE: mTLS and plaintext");
    let ctx = downstream(l, 0).unwrap();
    assert_eq!(ctx.common_tls_context.unwrap().tls_certificate_sds_secret_configs[0].name, "default");
    assert_eq!(ingress_findings(&findings), [(Severity::Unsupported, "spec.ingress[0].tls")]);
    // PeerAuthentication DISABLE: the entry's TLS.
    let (listeners, findings) = generate(&format!("{DISABLE}{}", sidecar_yaml("HTTPS", FILES)), true, true);
    let l = ingress(&listeners).unwrap();
    assert_eq!(l.filter_chains.len(), 1);
    let ctx = downstream(l, 0).unwrap();
    assert!(
        ctx.common_tls_context.unwrap().tls_certificate_sds_secret_configs[0].name.starts_with("file-cert:")
    );
    assert!(ingress_findings(&findings).is_empty(), "{findings:?}");
}

#[test]
fn without_enable_tls_on_sidecar_ingress_the_block_is_ignored_and_reported() {
    let w = World::new(parse(&sidecar_yaml("HTTPS", FILES), "ns"));
    let (listeners, _) = generate(&sidecar_yaml("HTTPS", FILES), false, false);
    let l = ingress(&listeners).unwrap();
    assert_eq!(l.filter_chains.len(), 1);
    assert!(l.filter_chains[0].transport_socket.is_none(), "plain text, as istiod");
    assert_eq!(
        l.filter_chains[0].filters.last().unwrap().name,
        "envoy.filters.network.tcp_proxy",
        "HTTPS as TCP"
    );
    let scope_findings: Vec<_> = w
        .push()
        .sidecar_scope(&loopback_sidecar("ns"))
        .findings()
        .iter()
        .map(|f| (f.severity, f.path.clone()))
        .collect();
    assert_eq!(scope_findings, [(Severity::Unsupported, "spec.ingress[0].tls".to_string())]);
}
