//! DestinationRule traffic policies → cluster fields; resolution → discovery type; what is reported.

use crate::support;

use envoy_types::pb::envoy::{
    config::cluster::v3::{
        Cluster,
        cluster::{ClusterDiscoveryType, DiscoveryType, LbConfig, LbPolicy},
    },
    config::core::v3::transport_socket,
    extensions::{
        transport_sockets::tls::v3::{UpstreamTlsContext, common_tls_context::ValidationContextType},
        upstreams::http::v3::{
            HttpProtocolOptions,
            http_protocol_options::{UpstreamProtocolOptions, explicit_http_config::ProtocolConfig},
        },
    },
};
use meshpilot_networking::cluster::generate_clusters;
use model::Severity;
use prost::Message;
use support::*;

const SVC: &str = "svc.ns1.svc.cluster.local";

const WORLD: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: ns1}
spec:
  hosts: [svc.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports:
  - {number: 80, name: http, protocol: HTTP}
  - {number: 8443, name: grpc, protocol: GRPC}
  resolution: STATIC
  endpoints:
  - {address: 10.0.0.1, labels: {version: v1}}
  - {address: 10.0.0.2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: svc, namespace: ns1}
spec:
  host: svc
  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 30s}}
    connectionPool:
      tcp: {maxConnections: 100, connectTimeout: 3s, tcpKeepalive: {probes: 3, time: 60s, interval: 10s}}
      http: {http1MaxPendingRequests: 5, http2MaxRequests: 50, maxRetries: 2, idleTimeout: 30s, maxRequestsPerConnection: 10}
    outlierDetection: {consecutive5xxErrors: 3, interval: 5s, baseEjectionTime: 15s, maxEjectionPercent: 40}
    tls: {mode: SIMPLE, caCertificates: /etc/ca.pem, sni: svc.example, subjectAltNames: [spiffe://cluster.local/ns/ns1/sa/svc]}
    tunnel: {targetHost: proxy.example, targetPort: 3128}
    portLevelSettings:
    - port: {number: 8443}
      loadBalancer: {consistentHash: {httpHeaderName: x-user, maglev: {tableSize: 65537}}}
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy:
      loadBalancer: {simple: RANDOM}
      tls: {mode: MUTUAL, clientCertificate: /c.pem, privateKey: /k.pem}
  - name: v2
    labels: {version: v2}
    trafficPolicy:
      loadBalancer: {simple: PASSTHROUGH}
"#;

fn clusters(text: &str, ns: &str) -> (Vec<Cluster>, Vec<model::Finding>) {
    let world = World::new(parse(text, ns));
    let out = generate_clusters(&world.push(), &sidecar(ns, &[]), &[]);
    (out.resources, out.findings)
}

fn get<'a>(c: &'a [Cluster], name: &str) -> &'a Cluster {
    c.iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", c.iter().map(|c| &c.name).collect::<Vec<_>>()))
}

fn kind(c: &Cluster) -> DiscoveryType {
    match c.cluster_discovery_type {
        Some(ClusterDiscoveryType::Type(t)) => DiscoveryType::try_from(t).unwrap(),
        _ => panic!(),
    }
}

fn upstream_tls(c: &Cluster) -> Option<UpstreamTlsContext> {
    let ts = c.transport_socket.as_ref()?;
    let Some(transport_socket::ConfigType::TypedConfig(any)) = &ts.config_type else { return None };
    assert_eq!(
        any.type_url,
        "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
    );
    Some(UpstreamTlsContext::decode(any.value.as_slice()).unwrap())
}

fn http_options(c: &Cluster) -> Option<HttpProtocolOptions> {
    let any =
        c.typed_extension_protocol_options.get("envoy.extensions.upstreams.http.v3.HttpProtocolOptions")?;
    Some(HttpProtocolOptions::decode(any.value.as_slice()).unwrap())
}

#[test]
fn destination_level_policy() {
    let (c, findings) = clusters(WORLD, "ns1");
    let main = get(&c, &format!("outbound|80||{SVC}"));
    assert_eq!(main.lb_policy, LbPolicy::RoundRobin as i32);
    assert!(
        matches!(&main.lb_config, Some(LbConfig::RoundRobinLbConfig(rr)) if rr.slow_start_config.as_ref().unwrap().slow_start_window.as_ref().unwrap().seconds == 30)
    );
    assert_eq!(main.connect_timeout.as_ref().unwrap().seconds, 3);
    let t = &main.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(
        [&t.max_connections, &t.max_pending_requests, &t.max_requests, &t.max_retries]
            .map(|v| v.as_ref().unwrap().value),
        [100, 5, 50, 2]
    );
    let ka = main.upstream_connection_options.as_ref().unwrap().tcp_keepalive.as_ref().unwrap();
    assert_eq!(
        (ka.keepalive_probes.as_ref().unwrap().value, ka.keepalive_time.as_ref().unwrap().value),
        (3, 60)
    );
    let common = http_options(main).unwrap().common_http_protocol_options.unwrap();
    assert_eq!(common.idle_timeout.unwrap().seconds, 30);
    assert_eq!(common.max_requests_per_connection.unwrap().value, 10);
    let od = main.outlier_detection.as_ref().unwrap();
    assert_eq!(od.consecutive_5xx.as_ref().unwrap().value, 3);
    assert_eq!(od.enforcing_consecutive_5xx.as_ref().unwrap().value, 100);
    assert_eq!(od.max_ejection_percent.as_ref().unwrap().value, 40);
    assert_eq!(main.common_lb_config.as_ref().unwrap().healthy_panic_threshold.as_ref().unwrap().value, 0.0);
    let tls = upstream_tls(main).expect("SIMPLE TLS");
    assert_eq!(tls.sni, "svc.example");
    let common = tls.common_tls_context.unwrap();
    assert!(common.tls_certificates.is_empty() && common.tls_certificate_sds_secret_configs.is_empty());
    // The CA file through SDS, the SAN in the static part.
    let Some(ValidationContextType::CombinedValidationContext(v)) = common.validation_context_type else {
        panic!("expected a combined validation context")
    };
    assert_eq!(v.validation_context_sds_secret_config.unwrap().name, "file-root:/etc/ca.pem");
    assert_eq!(v.default_validation_context.unwrap().match_typed_subject_alt_names.len(), 1);
    // The tunnel is reported, once per cluster it would apply to.
    assert!(findings.iter().any(|f| f.severity == Severity::Unsupported
        && f.path == "spec.trafficPolicy.tunnel"
        && f.resource == format!("outbound|80||{SVC}")
        && f.config.as_ref().is_some_and(|k| k.name == "svc")));
}

#[test]
fn port_level_policy_replaces_the_destination_level() {
    let (c, findings) = clusters(WORLD, "ns1");
    let grpc = get(&c, &format!("outbound|8443||{SVC}"));
    assert_eq!(grpc.lb_policy, LbPolicy::Maglev as i32);
    assert!(
        matches!(&grpc.lb_config, Some(LbConfig::MaglevLbConfig(m)) if m.table_size.as_ref().unwrap().value == 65537)
    );
    assert!(grpc.outlier_detection.is_none(), "port-level settings do not inherit");
    assert!(grpc.transport_socket.is_none());
    assert_eq!(grpc.connect_timeout.as_ref().unwrap().seconds, 10, "the mesh default");
    let h2 = http_options(grpc).unwrap().upstream_protocol_options.unwrap();
    assert!(
        matches!(h2, UpstreamProtocolOptions::ExplicitHttpConfig(e) if matches!(e.protocol_config, Some(ProtocolConfig::Http2ProtocolOptions(_))))
    );
    // The hash key of a gRPC (HTTP) port goes on its routes: nothing to report.
    assert!(!findings.iter().any(|f| f.path.ends_with("consistentHash")));
    // Port-level settings apply to subsets too.
    assert_eq!(get(&c, &format!("outbound|8443|v1|{SVC}")).lb_policy, LbPolicy::Random as i32);
}

#[test]
fn subset_policy_overrides_part_by_part() {
    let (c, _) = clusters(WORLD, "ns1");
    let v1 = get(&c, &format!("outbound|80|v1|{SVC}"));
    assert_eq!(v1.lb_policy, LbPolicy::Random as i32);
    assert!(v1.outlier_detection.is_some(), "inherited from the destination level");
    let tls = upstream_tls(v1).unwrap().common_tls_context.unwrap();
    assert!(tls.tls_certificates.is_empty(), "no certificate files in CDS");
    let sds: Vec<&str> = tls.tls_certificate_sds_secret_configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(sds, ["file-cert:/c.pem~/k.pem"], "MUTUAL presents the client certificate, over SDS");
    let v2 = get(&c, &format!("outbound|80|v2|{SVC}"));
    assert_eq!(kind(v2), DiscoveryType::OriginalDst);
    assert_eq!(v2.lb_policy, LbPolicy::ClusterProvided as i32);
    assert!(v2.eds_cluster_config.is_none() && v2.load_assignment.is_none());
}

#[test]
fn resolution_gives_the_discovery_type() {
    let text = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dns, namespace: ns1}
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: rr, namespace: ns1}
spec:
  hosts: [rr.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS_ROUND_ROBIN
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: none, namespace: ns1}
spec:
  hosts: [any.example.com]
  addresses: [10.9.0.0/16]
  ports: [{number: 9000, name: tcp, protocol: TCP}]
  resolution: NONE
"#;
    let (c, _) = clusters(text, "ns1");
    let dns = get(&c, "outbound|443||api.example.com");
    assert_eq!(kind(dns), DiscoveryType::StrictDns);
    let la = dns.load_assignment.as_ref().unwrap();
    assert_eq!(la.endpoints[0].lb_endpoints.len(), 1, "the host itself is the endpoint");
    assert_eq!(kind(get(&c, "outbound|80||rr.example.com")), DiscoveryType::LogicalDns);
    let none = get(&c, "outbound|9000||any.example.com");
    assert_eq!(kind(none), DiscoveryType::OriginalDst);
    assert_eq!(none.lb_policy, LbPolicy::ClusterProvided as i32);
}

#[test]
fn unsupported_tls_modes_are_reported_not_sent() {
    let text = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: ns1}
spec:
  hosts: [svc.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: svc, namespace: ns1}
spec:
  host: svc.ns1.svc.cluster.local
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
    loadBalancer:
      localityLbSetting: {enabled: true}
"#;
    let (c, findings) = clusters(text, "ns1");
    assert!(get(&c, &format!("outbound|80||{SVC}")).transport_socket.is_none());
    assert!(findings.iter().any(|f| f.path == "spec.trafficPolicy.tls.mode"));
    assert!(
        !findings.iter().any(|f| f.path.starts_with("spec.trafficPolicy.loadBalancer")),
        "locality load balancing is translated: {findings:?}"
    );
}
