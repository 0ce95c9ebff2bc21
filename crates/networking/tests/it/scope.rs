//! What a proxy sees: exportTo, Sidecar egress hosts and outbound policy, DestinationRule precedence,
//! endpoint-only snapshots.

use crate::support;

use std::sync::Arc;

use meshpilot_networking::{
    Snapshot, cluster::generate_clusters, endpoint::generate_endpoints, listener::generate_listeners,
    rds::generate_routes,
};
use model::{
    push::{MeshSettings, OutboundTrafficPolicy},
    service::ExportTo,
};
use support::*;

fn se(name: &str, ns: &str, host: &str, export: &str, address: &str) -> String {
    let export = if export.is_empty() { String::new() } else { format!("  exportTo: [{export:?}]") };
    format!(
        r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: {name}, namespace: {ns}}}
spec:
  hosts: [{host}]
  location: MESH_INTERNAL
{export}
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: {address}, labels: {{version: v1}}}}]
---"#
    )
}

fn names(out: &[envoy_types::pb::envoy::config::cluster::v3::Cluster]) -> Vec<String> {
    out.iter().map(|c| c.name.clone()).filter(|n| n.starts_with("outbound|")).collect()
}

fn world() -> World {
    let mut text = String::new();
    text += &se("a", "ns1", "a.ns1.svc.cluster.local", "", "10.0.0.1");
    text += &se("b", "ns2", "b.ns2.svc.cluster.local", "*", "10.0.0.2");
    text += &se("private", "ns2", "p.ns2.svc.cluster.local", ".", "10.0.0.3");
    World::new(parse(&text, "default"))
}

#[test]
fn export_to_hides_private_services() {
    let w = world();
    let push = w.push();
    let ns1 = names(&generate_clusters(&push, &sidecar("ns1", &[]), &[]).resources);
    assert_eq!(ns1, ["outbound|80||a.ns1.svc.cluster.local", "outbound|80||b.ns2.svc.cluster.local"]);
    let ns2 = names(&generate_clusters(&push, &sidecar("ns2", &[]), &[]).resources);
    assert_eq!(ns2.len(), 3);
    // A mesh default of "." hides services without exportTo from other namespaces.
    let private = w
        .push_with(MeshSettings { default_export_to: [ExportTo::Private].into(), ..MeshSettings::default() });
    let ns2 = names(&generate_clusters(&private, &sidecar("ns2", &[]), &[]).resources);
    assert_eq!(ns2, ["outbound|80||b.ns2.svc.cluster.local", "outbound|80||p.ns2.svc.cluster.local"]);
}

#[test]
fn sidecar_egress_hosts_and_outbound_policy() {
    let mut text = String::new();
    text += &se("a", "ns1", "a.ns1.svc.cluster.local", "*", "10.0.0.1");
    text += &se("b", "ns2", "b.ns2.svc.cluster.local", "*", "10.0.0.2");
    text += r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: ns1}
spec:
  egress:
  - hosts: ["./*"]
    port: {number: 80, protocol: HTTP, name: http}
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
"#;
    let w = World::new(parse(&text, "default"));
    let push = w.push();
    let proxy = sidecar("ns1", &[]);
    let out = generate_clusters(&push, &proxy, &[]);
    assert_eq!(names(&out.resources), ["outbound|80||a.ns1.svc.cluster.local"]);
    assert!(!out.findings.iter().any(|f| f.path.starts_with("spec.egress")), "{:?}", out.findings);
    let rc = &generate_routes(&push, &proxy, &["80".to_string()]).resources[0];
    assert_eq!(rc.virtual_hosts.last().unwrap().name, "block_all");
    // Other namespaces are not affected by ns1's Sidecar.
    assert_eq!(names(&generate_clusters(&push, &sidecar("ns3", &[]), &[]).resources).len(), 2);
    let rc = &generate_routes(&push, &sidecar("ns3", &[]), &["80".to_string()]).resources[0];
    assert_eq!(rc.virtual_hosts.last().unwrap().name, "allow_any");
    // The mesh-wide policy.
    let strict = w.push_with(MeshSettings {
        outbound_traffic_policy: OutboundTrafficPolicy::RegistryOnly,
        ..MeshSettings::default()
    });
    let lds = generate_listeners(&strict, &sidecar("ns3", &[]), &["virtualOutbound".to_string()]);
    let dump = meshpilot_networking::debug::listener_summary(&lds.resources[0]);
    assert_eq!(dump["filter_chains"][0]["filters"][0]["target"]["cluster"], "BlackHoleCluster");
}

fn dr(name: &str, ns: &str, host: &str, export: &str, subset: &str) -> String {
    format!(
        r#"
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: {name}, namespace: {ns}}}
spec:
  host: {host:?}
  exportTo: [{export:?}]
  subsets: [{{name: {subset}, labels: {{version: v1}}}}]
---"#
    )
}

#[test]
fn destination_rule_precedence() {
    let mut text = String::new();
    text += &se("b", "ns2", "b.ns2.svc.cluster.local", "*", "10.0.0.2");
    text += &dr("in-service-ns", "ns2", "b", "*", "from-ns2");
    text += &dr("private", "ns2", "b", ".", "private-ns2");
    text += &dr("client-side", "ns1", "b.ns2.svc.cluster.local", ".", "from-ns1");
    text += &dr("root", "istio-system", "*.svc.cluster.local", "*", "from-root");
    let w = World::new(parse(&text, "default"));
    let push = w.push();
    let subsets = |ns: &str| -> Vec<String> {
        generate_clusters(&push, &sidecar(ns, &[]), &[])
            .resources
            .iter()
            .filter_map(|c| c.name.split('|').nth(2).filter(|s| !s.is_empty()).map(str::to_string))
            .collect()
    };
    assert_eq!(subsets("ns1"), ["from-ns1"], "the proxy's namespace first");
    // Rules for one host in one namespace with different exportTo are not merged: the first applies.
    assert_eq!(subsets("ns2"), ["from-ns2"]);
    assert_eq!(subsets("ns3"), ["from-ns2"], "exported from the service's namespace");
    // Rules with the same exportTo merge their subsets.
    let mut text = String::new();
    text += &se("b", "ns2", "b.ns2.svc.cluster.local", "*", "10.0.0.2");
    text += &dr("first", "ns2", "b", "*", "s1");
    text += &dr("second", "ns2", "b", "*", "s2");
    let w = World::new(parse(&text, "default"));
    let push = w.push();
    let out = generate_clusters(&push, &sidecar("ns9", &[]), &[]);
    for s in ["s1", "s2"] {
        assert!(out.resources.iter().any(|c| c.name == format!("outbound|80|{s}|b.ns2.svc.cluster.local")));
    }
    // Without the service-namespace rule, the root namespace's applies.
    let mut text = String::new();
    text += &se("b", "ns2", "b.ns2.svc.cluster.local", "*", "10.0.0.2");
    text += &dr("root", "istio-system", "*.svc.cluster.local", "*", "from-root");
    let w = World::new(parse(&text, "default"));
    let push = w.push();
    let out = generate_clusters(&push, &sidecar("ns3", &[]), &[]);
    assert!(out.resources.iter().any(|c| c.name == "outbound|80|from-root|b.ns2.svc.cluster.local"));
}

#[test]
fn endpoint_only_snapshots_share_config() {
    let host = "a.ns1.svc.cluster.local";
    let w = World::new(parse(&se("a", "ns1", host, "*", "10.0.0.1"), "default"));
    let push = w.push();
    let proxy = sidecar("ns1", &[]);
    let cluster = format!("outbound|80||{host}");
    let addr = |p: &meshpilot_networking::Snapshot| {
        let a = &generate_endpoints(p, &proxy, std::slice::from_ref(&cluster)).resources[0];
        meshpilot_networking::debug::endpoints_summary(a)["localities"][0]["endpoints"][0]["address"].clone()
    };
    assert_eq!(addr(&push), "10.0.0.1:80");
    let moved = World::new(parse(&se("a", "ns1", host, "*", "10.0.0.9"), "default"));
    let next = push.with_endpoints(&moved.discovery, &[(host.to_string(), "ns1".to_string())], "v2");
    let next = Snapshot::with_cache(Arc::new(next), push.cache().clone());
    assert_eq!(next.version(), "v2");
    assert_eq!(addr(&next), "10.0.0.9:80");
    assert_eq!(addr(&push), "10.0.0.1:80", "the old snapshot is unchanged");
    assert!(
        Arc::ptr_eq(&push.sidecar_scope(&proxy), &next.sidecar_scope(&proxy)),
        "an endpoint-only snapshot keeps the config generation, so it shares the cached scope"
    );
}

#[test]
fn kinds_without_translation_are_reported() {
    let text = r#"
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec:
  mtls: {mode: STRICT}
"#;
    let w = World::new(parse(text, "default"));
    let push = w.push();
    let f = push.findings();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].config.as_ref().unwrap().name, "default");
    assert!(f[0].message.contains("PeerAuthentication") && f[0].message.contains("mutual TLS"), "{}", f[0]);
}

/// Istio's `SidecarScope.DependsOnConfig`: a Sidecar limiting egress to `ns1` makes the scope
/// depend on ns1's services, VirtualServices (and their delegates) and DestinationRules only.
#[test]
fn scope_depends_only_on_what_it_imports() {
    use api::Kind;
    use model::ConfigKey;
    let key = |kind: Kind, ns: &str, name: &str| ConfigKey { kind, namespace: ns.into(), name: name.into() };
    let mut text = String::new();
    text += &se("a", "ns1", "a.ns1.svc.cluster.local", "", "10.0.0.1");
    text += &se("b", "ns2", "b.ns2.svc.cluster.local", "", "10.0.0.2");
    text += r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: ns1}
spec:
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a-root, namespace: ns1}
spec:
  hosts: [a.ns1.svc.cluster.local]
  http: [{delegate: {name: a-delegate}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a-delegate, namespace: ns1}
spec:
  http: [{route: [{destination: {host: a.ns1.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b-vs, namespace: ns2}
spec:
  hosts: [b.ns2.svc.cluster.local]
  http: [{route: [{destination: {host: b.ns2.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: a-dr, namespace: ns2}
spec:
  host: a.ns1.svc.cluster.local
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: wild-dr, namespace: istio-system}
spec:
  host: "*.ns1.svc.cluster.local"
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: b-dr, namespace: ns2}
spec:
  host: b.ns2.svc.cluster.local
---
"#;
    let w = World::new(parse(&text, "default"));
    let push = w.push();
    let scoped = push.sidecar_scope(&sidecar("ns1", &[]));
    let open = push.sidecar_scope(&sidecar("ns3", &[]));
    let cases = [
        (key(Kind::ServiceEntry, "ns1", "a.ns1.svc.cluster.local"), true, true),
        (key(Kind::ServiceEntry, "ns2", "b.ns2.svc.cluster.local"), false, true),
        (key(Kind::ServiceEntry, "ns2", "a.ns1.svc.cluster.local"), false, false),
        (key(Kind::VirtualService, "ns1", "a-root"), true, true),
        (key(Kind::VirtualService, "ns1", "a-delegate"), true, true),
        (key(Kind::VirtualService, "ns2", "b-vs"), false, true),
        (key(Kind::VirtualService, "ns2", "unknown"), false, false),
        (key(Kind::DestinationRule, "ns2", "a-dr"), true, true),
        (key(Kind::DestinationRule, "istio-system", "wild-dr"), true, true),
        (key(Kind::DestinationRule, "ns2", "b-dr"), false, true),
        (key(Kind::Sidecar, "ns1", "other"), true, false),
        (key(Kind::Sidecar, "istio-system", "default"), true, true),
        (key(Kind::Sidecar, "ns2", "default"), false, false),
        (key(Kind::AuthorizationPolicy, "ns2", "any"), true, true),
    ];
    for (k, in_scoped, in_open) in cases {
        assert_eq!((scoped.depends_on(&k), open.depends_on(&k)), (in_scoped, in_open), "{k}");
    }
}
