//! Gateway API backend policies reach Envoy: the DestinationRules the Gateway API converter
//! generates from BackendTLSPolicy and XBackendTrafficPolicy (run while the push context is built, as
//! in `meshpilot discovery`) give the clusters' upstream TLS contexts and retry budgets.

use crate::support;

use std::sync::Arc;

use envoy_types::pb::envoy::{
    config::{cluster::v3::Cluster, core::v3::transport_socket},
    extensions::transport_sockets::tls::v3::{
        CertificateValidationContext, UpstreamTlsContext, common_tls_context::ValidationContextType,
        subject_alt_name_matcher::SanType,
    },
    r#type::matcher::v3::string_matcher::MatchPattern,
};
use meshpilot_networking::{Snapshot, cluster::generate_clusters};
use model::push::{ConfigConverter, MeshSettings, ProxyContext, PushContext};
use prost::Message;
use support::*;

const CONFIG: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: default}
spec:
  hosts: [echo.default.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}, {number: 443, name: https, protocol: HTTPS}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: bad, namespace: default}
spec:
  hosts: [bad.default.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: echo-system, namespace: default}
spec:
  targetRefs: [{group: "", kind: Service, name: echo}]
  validation: {wellKnownCACertificates: System, hostname: echo.example.com}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: echo-https, namespace: default}
spec:
  targetRefs: [{group: "", kind: Service, name: echo, sectionName: https}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: auth-cert}]
    hostname: auth.example.com
    subjectAltNames: [{type: Hostname, hostname: extra.example.com}]
---
apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XBackendTrafficPolicy
metadata: {name: echo-retries, namespace: default}
spec:
  targetRefs: [{group: "", kind: Service, name: echo}]
  retryConstraint:
    budget: {percent: 30, interval: 10s}
    minRetryRate: {count: 5, interval: 1s}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: bad-ca, namespace: default}
spec:
  targetRefs: [{group: "", kind: Service, name: bad}]
  validation:
    caCertificateRefs: [{group: "", kind: UnknownKind, name: blah}]
    hostname: bad.example.com
"#;

fn clusters(proxy: &ProxyContext) -> Vec<Cluster> {
    let world = World::new(parse(CONFIG, "default"));
    let converters: Vec<Arc<dyn ConfigConverter>> = vec![Arc::new(gateway::GatewayApiConverter::new())];
    let push = PushContext::with_converters(
        &world.store,
        &world.discovery,
        MeshSettings::default(),
        "v1",
        &converters,
    );
    generate_clusters(&Snapshot::new(push), proxy, &[]).resources
}

fn tls_of(clusters: &[Cluster], name: &str) -> Option<UpstreamTlsContext> {
    let c = clusters.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no cluster {name}"));
    let Some(transport_socket::ConfigType::TypedConfig(any)) = &c.transport_socket.as_ref()?.config_type
    else {
        return None;
    };
    Some(UpstreamTlsContext::decode(any.value.as_slice()).unwrap())
}

/// The SDS name of the CA and the default validation context of a credential's TLS context.
fn ca(tls: &UpstreamTlsContext) -> (String, CertificateValidationContext) {
    let common = tls.common_tls_context.as_ref().unwrap();
    let Some(ValidationContextType::CombinedValidationContext(c)) = &common.validation_context_type else {
        panic!("no combined validation context: {common:?}");
    };
    (
        c.validation_context_sds_secret_config.as_ref().unwrap().name.clone(),
        c.default_validation_context.clone().unwrap_or_default(),
    )
}

#[test]
fn backend_tls_policy_gives_the_cluster_tls_context() {
    let router = clusters(&router("istio-system", &[("istio", "ingressgateway")]));
    let https =
        tls_of(&router, "outbound|443||echo.default.svc.cluster.local").expect("TLS on the https port");
    assert_eq!(https.sni, "auth.example.com", "the policy's hostname is the SNI");
    let (name, validation) = ca(&https);
    assert_eq!(name, "configmap://default/auth-cert-cacert", "the ConfigMap CA over SDS");
    let sans: Vec<_> = validation
        .match_typed_subject_alt_names
        .iter()
        .map(|m| (m.san_type, m.matcher.as_ref().and_then(|m| m.match_pattern.clone())))
        .collect();
    assert_eq!(sans, [(SanType::Dns as i32, Some(MatchPattern::Exact("extra.example.com".into())))]);

    let http = tls_of(&router, "outbound|80||echo.default.svc.cluster.local").expect("service-wide TLS");
    assert_eq!(http.sni, "echo.example.com", "the System-CA policy applies to the other ports");

    // A sidecar verifies with the ConfigMap CA too (Istio lets every proxy read ConfigMaps).
    let sidecar = clusters(&sidecar("default", &[]));
    let https = tls_of(&sidecar, "outbound|443||echo.default.svc.cluster.local").expect("sidecar TLS");
    assert_eq!(ca(&https).0, "configmap://default/auth-cert-cacert");
}

#[test]
fn a_refused_ca_reference_blocks_instead_of_sending_plain_text() {
    let router = clusters(&router("istio-system", &[("istio", "ingressgateway")]));
    let tls = tls_of(&router, "outbound|80||bad.default.svc.cluster.local").expect("TLS is kept");
    assert_eq!(tls.sni, "bad.example.com");
    assert_eq!(ca(&tls).0, "invalid://", "a CA name that is never served");
}

#[test]
fn backend_traffic_policy_gives_the_retry_budget() {
    let router = clusters(&router("istio-system", &[("istio", "ingressgateway")]));
    let c = router.iter().find(|c| c.name == "outbound|80||echo.default.svc.cluster.local").unwrap();
    let budget = c
        .circuit_breakers
        .as_ref()
        .and_then(|cb| cb.thresholds.first())
        .and_then(|t| t.retry_budget)
        .expect("a retry budget");
    assert_eq!(budget.budget_percent.map(|p| p.value), Some(30.0));
    assert_eq!(budget.min_retry_concurrency.map(|v| v.value), Some(5));
}
