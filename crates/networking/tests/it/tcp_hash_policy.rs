//! `consistentHash.useSourceIp` on TCP: the outbound TCP proxy gets `hash_policy: [{source_ip: {}}]`
//! (Istio's `maybeSetHashPolicy`): from the DestinationRule of the first destination's service, its
//! top level or — for a single destination naming a subset that sets a load balancer — that subset's;
//! weighted destinations read the top level only; port-level settings are not read.

use crate::support;

use envoy_types::pb::envoy::{
    config::listener::v3::{Filter, Listener, filter::ConfigType},
    extensions::filters::network::tcp_proxy::v3::TcpProxy,
    r#type::v3::hash_policy::PolicySpecifier,
};
use meshpilot_networking::listener::generate_listeners;
use prost::Message;
use support::*;

/// `db` (TCP 5432, VIP 240.0.0.5, subsets `a` and `b`) and `cache` (TCP 6379, VIP 240.0.0.6).
const SERVICES: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: ns1}
spec:
  hosts: [db.ns1.svc.cluster.local]
  addresses: [240.0.0.5]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, labels: {v: a}}, {address: 10.0.0.2, labels: {v: b}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: cache, namespace: ns1}
spec:
  hosts: [cache.ns1.svc.cluster.local]
  addresses: [240.0.0.6]
  location: MESH_INTERNAL
  ports: [{number: 6379, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.3}]
---
"#;

/// `db`'s DestinationRule with `traffic_policy` at the top level and `subset_b` on subset `b` (empty:
/// none; an empty policy is invalid, as in Istio).
fn db_rule(traffic_policy: &str, subset_b: &str) -> String {
    let top = if traffic_policy.is_empty() {
        String::new()
    } else {
        format!("  trafficPolicy: {traffic_policy}\n")
    };
    let b = if subset_b.is_empty() { String::new() } else { format!(", trafficPolicy: {subset_b}") };
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: db, namespace: ns1}}\nspec:\n  \
         host: db.ns1.svc.cluster.local\n{top}  subsets:\n  \
         - {{name: a, labels: {{v: a}}}}\n  - {{name: b, labels: {{v: b}}{b}}}\n---\n"
    )
}

const SOURCE_IP: &str = "{loadBalancer: {consistentHash: {useSourceIp: true}}}";

fn tcp_proxies(config: &str) -> Vec<(String, TcpProxy)> {
    let w = World::new(parse(&format!("{SERVICES}{config}"), "ns1"));
    let out = generate_listeners(&w.push(), &sidecar("ns1", &[]), &[]);
    let decode = |f: &Filter| match &f.config_type {
        Some(ConfigType::TypedConfig(any)) => TcpProxy::decode(any.value.as_slice()).unwrap(),
        _ => panic!("typed config"),
    };
    out.resources
        .iter()
        .filter(|l: &&Listener| l.name.starts_with("240.0.0."))
        .map(|l| {
            let f = l.filter_chains[0]
                .filters
                .iter()
                .find(|f| f.name == "envoy.filters.network.tcp_proxy")
                .unwrap();
            (l.name.clone(), decode(f))
        })
        .collect()
}

fn hashed(config: &str) -> Vec<(String, bool)> {
    tcp_proxies(config)
        .into_iter()
        .map(|(name, p)| {
            let source_ip = match p.hash_policy.as_slice() {
                [] => false,
                [h] => matches!(h.policy_specifier, Some(PolicySpecifier::SourceIp(_))),
                more => panic!("{name}: {more:?}"),
            };
            (name, source_ip)
        })
        .collect()
}

fn vs(route: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: db, namespace: ns1}}\nspec:\n  \
         hosts: [db.ns1.svc.cluster.local]\n  tcp:\n  - route: {route}\n---\n"
    )
}

#[test]
fn the_rules_use_source_ip_hashes_its_tcp_proxy() {
    let expect = |db| vec![("240.0.0.5_5432".to_string(), db), ("240.0.0.6_6379".to_string(), false)];
    assert_eq!(hashed(""), expect(false));
    assert_eq!(hashed(&db_rule(SOURCE_IP, "")), expect(true));
    // Another key, or useSourceIp false: nothing to hash on TCP.
    assert_eq!(
        hashed(&db_rule("{loadBalancer: {consistentHash: {httpHeaderName: x-user}}}", "")),
        expect(false)
    );
    // Port level is not read for TCP proxies.
    let port_level =
        "{portLevelSettings: [{port: {number: 5432}, loadBalancer: {consistentHash: {useSourceIp: true}}}]}";
    assert_eq!(hashed(&db_rule(port_level, "")), expect(false));
}

#[test]
fn a_single_subset_destination_reads_its_subsets_load_balancer() {
    let expect = |db| vec![("240.0.0.5_5432".to_string(), db), ("240.0.0.6_6379".to_string(), false)];
    let to = |subset: &str| {
        vs(&format!("[{{destination: {{host: db.ns1.svc.cluster.local, subset: {subset}}}}}]"))
    };
    // Subset a sets no load balancer: the top level's.
    assert_eq!(hashed(&format!("{}{}", db_rule(SOURCE_IP, ""), to("a"))), expect(true));
    // Subset b's own load balancer without useSourceIp turns it off.
    let b_simple = "{loadBalancer: {simple: ROUND_ROBIN}}";
    assert_eq!(hashed(&format!("{}{}", db_rule(SOURCE_IP, b_simple), to("b"))), expect(false));
    // Subset b's useSourceIp, the top level without.
    assert_eq!(hashed(&format!("{}{}", db_rule("", SOURCE_IP), to("b"))), expect(true));
    // Weighted destinations: the top level only (subset b's key is not read).
    let weighted = vs("[{destination: {host: db.ns1.svc.cluster.local, subset: a}, weight: 50}, \
                       {destination: {host: db.ns1.svc.cluster.local, subset: b}, weight: 50}]");
    assert_eq!(hashed(&format!("{}{weighted}", db_rule("", SOURCE_IP))), expect(false));
    assert_eq!(hashed(&format!("{}{weighted}", db_rule(SOURCE_IP, b_simple))), expect(true));
}
