//! Sidecar `inboundConnectionPool` and `ingress[].connectionPool` → inbound clusters' circuit
//! breakers (Istio's `InboundConnectionPoolForPort`: the ingress entry's pool, else the Sidecar's,
//! either replacing the DestinationRule's).

use crate::support;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use meshpilot_networking::cluster::generate_clusters;
use support::*;

/// `api` on port 8080, its workload at 10.0.0.7, and a DestinationRule limiting it to 7 connections.
const WORLD: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: ns1}
spec:
  hosts: [api.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: api}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: api, namespace: ns1}
spec: {address: 10.0.0.7, labels: {app: api}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: api, namespace: ns1}
spec:
  host: api.ns1.svc.cluster.local
  trafficPolicy: {connectionPool: {tcp: {maxConnections: 7}}}
---
"#;

/// The `max_connections` of each inbound cluster, and the findings, for the `api` workload's sidecar
/// under `WORLD` plus `sidecar`.
fn inbound_limits(sidecar_yaml: &str) -> (Vec<(String, u32)>, Vec<model::Finding>) {
    let w = World::new(parse(&format!("{WORLD}{sidecar_yaml}"), "ns1"));
    let mut proxy = sidecar("ns1", &[("app", "api")]);
    proxy.ips = vec!["10.0.0.7".into()];
    proxy.set_instances_from(&w.discovery);
    let out = generate_clusters(&w.push(), &proxy, &[]);
    let max = |c: &Cluster| {
        c.circuit_breakers
            .as_ref()
            .and_then(|b| b.thresholds[0].max_connections.as_ref())
            .map_or(0, |v| v.value)
    };
    let limits = out
        .resources
        .iter()
        .filter(|c| c.name.starts_with("inbound|"))
        .map(|c| (c.name.clone(), max(c)))
        .collect();
    (limits, out.findings)
}

const INBOUND_POOL: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: ns1}
spec:
  inboundConnectionPool: {tcp: {maxConnections: 11}}
"#;

#[test]
fn the_sidecars_inbound_pool_replaces_the_destination_rules() {
    assert_eq!(inbound_limits("").0, [("inbound|8080||".to_string(), 7)], "the DestinationRule's pool");
    let (limits, findings) = inbound_limits(INBOUND_POOL);
    assert_eq!(limits, [("inbound|8080||".to_string(), 11)]);
    assert!(findings.is_empty(), "{findings:?}");
}

#[test]
fn an_ingress_entrys_pool_wins_over_the_inbound_pool() {
    let ingress = format!(
        "{INBOUND_POOL}  ingress:\n  \
         - {{port: {{number: 9090, name: http, protocol: HTTP}}, defaultEndpoint: 127.0.0.1:9091, connectionPool: {{tcp: {{maxConnections: 5}}}}}}\n  \
         - {{port: {{number: 9092, name: tcp, protocol: TCP}}, defaultEndpoint: 127.0.0.1:9093}}\n"
    );
    let (limits, findings) = inbound_limits(&ingress);
    assert_eq!(limits, [("inbound|9090||".to_string(), 5), ("inbound|9092||".to_string(), 11)]);
    assert!(findings.is_empty(), "{findings:?}");
}

/// An ingress entry on the port of one of the proxy's instances (istiod's `findOrCreateService`: the
/// instance whose target port is the entry's port) takes that service's DestinationRule pool when the
/// Sidecar sets no pool; an entry on another port keeps Envoy's defaults.
#[test]
fn an_ingress_entry_on_an_instances_port_takes_the_destination_rules_pool() {
    let ingress = "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: ns1}\n\
                   spec:\n  ingress:\n  \
                   - {port: {number: 8080, name: http, protocol: HTTP}, defaultEndpoint: 127.0.0.1:9080}\n  \
                   - {port: {number: 9092, name: tcp, protocol: TCP}, defaultEndpoint: 127.0.0.1:9093}\n";
    let (limits, findings) = inbound_limits(ingress);
    assert_eq!(limits, [("inbound|8080||".to_string(), 7), ("inbound|9092||".to_string(), 0)]);
    assert!(findings.is_empty(), "{findings:?}");
}
