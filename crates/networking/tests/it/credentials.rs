//! credentialName on gateways: the SDS names in the listeners, and which of them a router may read
//! (Istio's `VerifiedCertificateReferences`: own namespace, ReferenceGrants for Gateway API names,
//! the service-account annotation of generated Gateways).

use crate::support;

use std::collections::BTreeSet;

use envoy_types::pb::envoy::{
    config::core::v3::transport_socket::ConfigType,
    extensions::transport_sockets::tls::v3::DownstreamTlsContext,
};
use meshpilot_networking::{
    credentials::{ProxyIdentity, verified_certificate_references},
    listener::generate_listeners,
};
use prost::Message;
use support::*;

const CONFIG: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: [a.example]
    tls: {mode: MUTUAL, credentialName: own-cert}
  - port: {number: 8443, name: https-granted, protocol: HTTPS}
    hosts: [b.example]
    tls: {mode: SIMPLE, credentialName: "kubernetes-gateway://apps/granted"}
  - port: {number: 9443, name: https-denied, protocol: HTTPS}
    hosts: [c.example]
    tls: {mode: SIMPLE, credentialName: "kubernetes-gateway://apps/denied"}
  - port: {number: 10443, name: https-explicit, protocol: HTTPS}
    hosts: [d.example]
    tls: {mode: SIMPLE, credentialName: "kubernetes://other/theirs"}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: generated
  namespace: istio-system
  annotations: {internal.istio.io/service-account-name: dedicated}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 11443, name: https-sa, protocol: HTTPS}
    hosts: [e.example]
    tls: {mode: SIMPLE, credentialName: "kubernetes-gateway://istio-system/sa-only"}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: grant, namespace: apps}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: istio-system}]
  to: [{group: "", kind: Secret, name: granted}]
"#;

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn verified_references_follow_namespace_grants_and_service_account() {
    let world = World::new(parse(CONFIG, "istio-system"));
    let push = world.push();
    let proxy = router("istio-system", &[("istio", "ingressgateway")]);
    let identity = ProxyIdentity::new("spiffe://cluster.local/ns/istio-system/sa/ingress", "istio-system");
    let got = verified_certificate_references(&push, &proxy, Some(&identity));
    assert_eq!(
        got,
        set(&["kubernetes-gateway://apps/granted", "kubernetes://own-cert", "kubernetes://own-cert-cacert"]),
        "own namespace (with -cacert for MUTUAL) and the granted name; not the ungranted one, not another \
         namespace's kubernetes:// name, not the Gateway of another service account"
    );
    let dedicated = ProxyIdentity::new("spiffe://cluster.local/ns/istio-system/sa/dedicated", "istio-system");
    let got = verified_certificate_references(&push, &proxy, Some(&dedicated));
    assert!(got.contains("kubernetes-gateway://istio-system/sa-only"), "{got:?}");
    let elsewhere = ProxyIdentity::new("spiffe://cluster.local/ns/apps/sa/ingress", "apps");
    assert!(verified_certificate_references(&push, &proxy, Some(&elsewhere)).is_empty());
    assert!(verified_certificate_references(&push, &proxy, None).is_empty(), "no identity, nothing verified");
}

#[test]
fn gateway_listeners_reference_credentials_over_ads() {
    let world = World::new(parse(CONFIG, "istio-system"));
    let push = world.push();
    let proxy = router("istio-system", &[("istio", "ingressgateway")]);
    let g = generate_listeners(&push, &proxy, &[]);
    let mut names = Vec::new();
    for l in &g.resources {
        for chain in &l.filter_chains {
            let Some(ConfigType::TypedConfig(any)) =
                chain.transport_socket.as_ref().and_then(|t| t.config_type.as_ref())
            else {
                continue;
            };
            let ctx = DownstreamTlsContext::decode(any.value.as_slice()).unwrap();
            let common = ctx.common_tls_context.unwrap();
            for c in &common.tls_certificate_sds_secret_configs {
                assert!(c.sds_config.as_ref().is_some_and(|s| s.config_source_specifier.is_some()), "{c:?}");
                names.push(c.name.clone());
            }
        }
    }
    names.sort();
    assert_eq!(
        names,
        [
            "kubernetes-gateway://apps/denied",
            "kubernetes-gateway://apps/granted",
            "kubernetes-gateway://istio-system/sa-only",
            "kubernetes://other/theirs",
            "kubernetes://own-cert",
        ],
        "every server is built; who may read the secret is decided when SDS is asked"
    );
    assert!(g.findings.iter().all(|f| !f.path.contains("credentialName")), "{:?}", g.findings);
}
