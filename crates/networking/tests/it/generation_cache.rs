//! The generation cache (`networking::cache`): scopes, route tables and gateway servers are shared
//! within one config generation, dropped when a newer generation is looked up, and never stored from
//! an older one.

use crate::support;

use std::sync::Arc;

use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use meshpilot_networking::{GenerationCache, Snapshot, listener::generate_listeners, rds::generate_routes};
use model::push::{MeshSettings, PushContext};
use support::*;

/// One service in `ns1` and a gateway selecting `istio: ingressgateway` routers.
fn mesh() -> String {
    http_service_entry("a", "ns1", "10.0.0.1")
        + r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns1}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
"#
}

fn build(world: &World) -> Arc<PushContext> {
    Arc::new(PushContext::new(&world.store, &world.discovery, MeshSettings::default(), "v"))
}

#[test]
fn one_generation_shares_scopes_and_route_tables() {
    let world = World::new(parse(&mesh(), "default"));
    let cache = Arc::new(GenerationCache::new());
    let push = build(&world);
    let a = Snapshot::with_cache(push.clone(), cache.clone());
    let b = Snapshot::with_cache(push.clone(), cache.clone());
    let (one, two) = (sidecar("ns1", &[("app", "one")]), sidecar("ns1", &[("app", "two")]));
    assert!(Arc::ptr_eq(&a.sidecar_scope(&one), &b.sidecar_scope(&two)), "same namespace, same scope");
    assert_eq!(a.sidecar_scope(&one).services().len(), 1, "the scope sees the ServiceEntry");
    assert_eq!(cache.generation(), push.config_generation());

    let routes_one = generate_routes(&a, &one, &["80".to_string()]);
    assert_eq!(cache.len().1, 1, "one route table for port 80");
    let routes_two = generate_routes(&b, &two, &["80".to_string()]);
    assert_eq!(cache.len().1, 1, "the second sidecar of the scope reuses it");
    assert_eq!(routes_one.resources, routes_two.resources);

    let (gw1, gw2) =
        (router("ns1", &[("istio", "ingressgateway")]), router("ns1", &[("istio", "ingressgateway")]));
    generate_listeners(&a, &gw1, &[]);
    generate_listeners(&b, &gw2, &[]);
    assert_eq!(cache.len().2, 1, "gateway servers merged once per set of labels");
}

#[test]
fn a_newer_generation_drops_the_older_entries() {
    let world = World::new(parse(&mesh(), "default"));
    let cache = Arc::new(GenerationCache::new());
    let proxy = sidecar("ns1", &[]);
    let first = Snapshot::with_cache(build(&world), cache.clone());
    let old_scope = first.sidecar_scope(&proxy);
    generate_routes(&first, &proxy, &["80".to_string()]);
    assert_eq!(cache.len(), (1, 1, 0));

    let second = Snapshot::with_cache(build(&world), cache.clone());
    assert!(second.config_generation() > first.config_generation());
    let new_scope = second.sidecar_scope(&proxy);
    assert!(!Arc::ptr_eq(&old_scope, &new_scope), "a new config generation gets its own scope");
    assert_eq!(cache.generation(), second.config_generation());
    assert_eq!(cache.len(), (1, 0, 0), "the old route table is gone with its generation");
}

#[test]
fn an_older_generation_is_computed_but_not_stored() {
    let world = World::new(parse(&mesh(), "default"));
    let cache = Arc::new(GenerationCache::new());
    let proxy = sidecar("ns1", &[]);
    let old = Snapshot::with_cache(build(&world), cache.clone());
    let new = Snapshot::with_cache(build(&world), cache.clone());
    let current = new.sidecar_scope(&proxy);
    assert_eq!(cache.len(), (1, 0, 0));

    // A push still generating from the older snapshot.
    let stale = old.sidecar_scope(&proxy);
    assert!(!Arc::ptr_eq(&stale, &current));
    assert_eq!(stale.services().len(), current.services().len(), "computed from its own snapshot");
    let stale_routes = generate_routes(&old, &proxy, &["80".to_string()]);
    assert_eq!(stale_routes.resources.len(), 1);
    assert_eq!(cache.generation(), new.config_generation(), "the cache stays on the newer generation");
    assert_eq!(cache.len(), (1, 0, 0), "nothing of the older generation was stored");
    assert!(Arc::ptr_eq(&new.sidecar_scope(&proxy), &current));
}

#[test]
fn endpoint_only_snapshots_keep_the_generation() {
    let world = World::new(parse(&mesh(), "default"));
    let push = build(&world);
    let next =
        push.with_endpoints(&world.discovery, &[("a.ns1.svc.cluster.local".into(), "ns1".into())], "v2");
    assert_eq!(next.config_generation(), push.config_generation());
    assert_ne!(next.version(), push.version());
}

#[test]
fn findings_are_recorded_per_generation_with_the_proxies_that_met_them() {
    let world = World::new(parse(&mesh(), "default"));
    let cache = Arc::new(GenerationCache::new());
    let push = build(&world);
    let finding = model::Finding {
        severity: model::Severity::Dropped,
        config: None,
        path: "spec.rules[0]".into(),
        resource: "virtualInbound".into(),
        message: "cannot be translated".into(),
    };
    let first = cache.record_findings(&push, "sidecar-a", std::slice::from_ref(&finding));
    assert_eq!(first.len(), 1, "new in this generation");
    assert_eq!(first[0], finding);
    let again = cache.record_findings(&push, "sidecar-b", std::slice::from_ref(&finding));
    assert!(again.is_empty(), "already seen in this generation");
    let recorded = cache.generation_findings();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].1.count, 2);
    assert_eq!(recorded[0].1.proxies, ["sidecar-a", "sidecar-b"]);

    // The next generation starts empty once it is looked up; the finding is new there again.
    let newer = build(&world);
    Snapshot::with_cache(newer.clone(), cache.clone()).sidecar_scope(&sidecar("ns1", &[]));
    assert!(cache.generation_findings().is_empty(), "dropped with the older generation");
    assert_eq!(cache.record_findings(&newer, "sidecar-a", std::slice::from_ref(&finding)).len(), 1);
    // A stale snapshot records nothing.
    assert!(cache.record_findings(&push, "sidecar-c", &[finding]).is_empty());
    assert_eq!(cache.generation_findings()[0].1.proxies, ["sidecar-a"]);
}

fn outbound(host: &str) -> String {
    format!("outbound|80||{host}")
}

/// ClusterLoadAssignments are encoded once per generation and endpoint list and shared by every proxy
/// that gets the same one; an endpoint-only snapshot makes a new one only for the service it re-read;
/// the encoded form decodes to what the message generator makes.
#[test]
fn assignments_are_shared_until_their_endpoints_change() {
    use meshpilot_networking::endpoint::{generate_endpoints, generate_endpoints_encoded};
    use prost::Message;

    let (a, b) = ("a.ns1.svc.cluster.local", "b.ns1.svc.cluster.local");
    let text = http_service_entry("b", "ns1", "10.0.0.2") + &mesh();
    let world = World::new(parse(&text, "default"));
    let cache = Arc::new(GenerationCache::new());
    let push = build(&world);
    let first = Snapshot::with_cache(push.clone(), cache.clone());
    let names = [outbound(a), outbound(b)];
    let (one, two) = (sidecar("ns1", &[("app", "one")]), sidecar("ns1", &[("app", "two")]));
    let e1 = generate_endpoints_encoded(&first, &one, &names, false).resources;
    let e2 = generate_endpoints_encoded(&first, &two, &names, false).resources;
    assert_eq!(e1.len(), 2);
    for (x, y) in e1.iter().zip(&e2) {
        assert!(Arc::ptr_eq(&x.encoded, &y.encoded), "{} is encoded once for both sidecars", x.name);
    }
    assert_eq!(cache.assignments(), 2);
    let decoded: Vec<ClusterLoadAssignment> =
        e1.iter().map(|e| ClusterLoadAssignment::decode(e.bytes()).expect("decodes")).collect();
    assert_eq!(decoded, generate_endpoints(&first, &one, &names).resources);
    assert!(format!("{:?}", decoded[0]).contains("10.0.0.1"));

    // Service a moves to 10.0.0.9: an endpoint-only snapshot of the same generation re-reads it.
    let moved = World::new(parse(&text.replace("10.0.0.1", "10.0.0.9"), "default"));
    let next = Snapshot::with_cache(
        Arc::new(push.with_endpoints(&moved.discovery, &[(a.into(), "ns1".into())], "v2")),
        cache.clone(),
    );
    let e3 = generate_endpoints_encoded(&next, &one, &names, false).resources;
    assert!(!Arc::ptr_eq(&e3[0].encoded, &e1[0].encoded), "a's endpoints changed");
    let a_now = ClusterLoadAssignment::decode(e3[0].bytes()).expect("decodes");
    assert!(format!("{a_now:?}").contains("10.0.0.9"), "{a_now:?}");
    assert!(Arc::ptr_eq(&e3[1].encoded, &e1[1].encoded), "b's list is the same: still shared");
}

/// A name that is no cluster of the proxy is answered with an empty assignment on request and left
/// out with `known_only` (pushes).
#[test]
fn unknown_names_are_answered_empty_or_left_out() {
    use meshpilot_networking::endpoint::generate_endpoints_encoded;
    use prost::Message;

    let world = World::new(parse(&mesh(), "default"));
    let push = world.push();
    let proxy = sidecar("ns1", &[]);
    let names = [outbound("a.ns1.svc.cluster.local"), outbound("nowhere.example"), "garbage".to_string()];
    let all = generate_endpoints_encoded(&push, &proxy, &names, false).resources;
    assert_eq!(all.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), names);
    let empty = ClusterLoadAssignment::decode(all[1].bytes()).expect("decodes");
    assert_eq!(empty.cluster_name, names[1]);
    assert!(empty.endpoints.is_empty());
    let known = generate_endpoints_encoded(&push, &proxy, &names, true).resources;
    assert_eq!(known.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), [names[0].as_str()]);
}

/// The outbound cluster names a push intersects a large EDS watch with hold every EDS cluster the
/// generator makes for the proxy (what a real proxy watches) and nothing but the proxy's outbound
/// clusters.
#[test]
fn outbound_cluster_names_hold_every_eds_cluster_of_the_proxy() {
    use meshpilot_networking::cluster::{eds_cluster_names, generate_clusters, outbound_cluster_names};

    let world = World::new(parse(&with_dns("dns1.example.com"), "default"));
    let snap = Snapshot::with_cache(build(&world), Arc::new(GenerationCache::new()));
    let proxies =
        [sidecar("ns1", &[("app", "one")]), router("ns1", &[("istio", "ingressgateway")]), proxyless("ns1")];
    for proxy in &proxies {
        let names = outbound_cluster_names(&snap, proxy);
        let eds = eds_cluster_names(&snap, proxy);
        assert!(!eds.is_empty(), "{:?} has EDS clusters", proxy.kind);
        for name in &eds {
            assert!(names.contains(name), "{:?}: EDS cluster {name} missing from {names:?}", proxy.kind);
        }
        let generated: Vec<String> =
            generate_clusters(&snap, proxy, &[]).resources.into_iter().map(|c| c.name).collect();
        for name in &names {
            assert!(name.starts_with("outbound|") && generated.contains(name), "{:?}: {name}", proxy.kind);
        }
    }
}

/// Endpoint changes within one generation make new assignments; those of lists no snapshot holds any
/// more are pruned, so a long stream of endpoint changes keeps the cache bounded.
#[test]
fn assignments_of_dropped_endpoint_lists_are_pruned() {
    use meshpilot_networking::endpoint::generate_endpoints_encoded;

    let a = "a.ns1.svc.cluster.local";
    let world = World::new(parse(&mesh(), "default"));
    let cache = Arc::new(GenerationCache::new());
    let push = build(&world);
    let proxy = sidecar("ns1", &[]);
    for i in 0..1_000 {
        let next = Snapshot::with_cache(
            Arc::new(push.with_endpoints(&world.discovery, &[(a.into(), "ns1".into())], format!("v{i}"))),
            cache.clone(),
        );
        assert_eq!(generate_endpoints_encoded(&next, &proxy, &[outbound(a)], false).resources.len(), 1);
    }
    assert_eq!(cache.generation(), push.config_generation());
    let held = cache.assignments();
    assert!(held <= 300, "1,000 endpoint changes left {held} assignments in the cache");
}

/// Service `a` of [`mesh`] plus a DNS-resolved ServiceEntry whose endpoint is the host `endpoint`.
fn with_dns(endpoint: &str) -> String {
    mesh()
        + &format!(
            r#"
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: dns, namespace: ns1}}
spec:
  hosts: [dns.example.com]
  location: MESH_EXTERNAL
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  resolution: DNS
  endpoints: [{{address: {endpoint}}}]
"#
        )
}

/// `generate_clusters_encoded`, decoded.
fn decoded_clusters(
    push: &Snapshot,
    proxy: &model::push::ProxyContext,
    names: &[String],
) -> Vec<envoy_types::pb::envoy::config::cluster::v3::Cluster> {
    use prost::Message;
    meshpilot_networking::cluster::generate_clusters_encoded(push, proxy, names)
        .resources
        .iter()
        .map(|c| {
            let cluster =
                envoy_types::pb::envoy::config::cluster::v3::Cluster::decode(c.bytes()).expect("decodes");
            assert_eq!(cluster.name, c.name);
            cluster
        })
        .collect()
}

/// The encoded CDS of sidecars, routers and proxyless clients decodes to what the message generator
/// makes (names filter included); the outbound clusters are built once per snapshot and key and shared
/// by the sidecars of a namespace, while each sidecar keeps its own inbound clusters.
#[test]
fn outbound_clusters_are_shared_and_encode_what_the_generator_makes() {
    use meshpilot_networking::cluster::{generate_clusters, generate_clusters_encoded};

    let world = World::new(parse(&with_dns("dns1.example.com"), "default"));
    let cache = Arc::new(GenerationCache::new());
    let snap = Snapshot::with_cache(build(&world), cache.clone());
    let (one, two) = (sidecar("ns1", &[("app", "one")]), sidecar("ns1", &[("app", "two")]));
    let proxies = [one.clone(), two.clone(), router("ns1", &[("istio", "ingressgateway")]), proxyless("ns1")];
    for proxy in &proxies {
        let expected = generate_clusters(&snap, proxy, &[]).resources;
        assert!(!expected.is_empty(), "{:?} gets clusters", proxy.kind);
        assert_eq!(decoded_clusters(&snap, proxy, &[]), expected, "{:?}", proxy.kind);
        let names = [outbound("a.ns1.svc.cluster.local"), "nowhere".to_string()];
        assert_eq!(decoded_clusters(&snap, proxy, &names), generate_clusters(&snap, proxy, &names).resources);
    }
    let a = outbound("a.ns1.svc.cluster.local");
    let find = |proxy| {
        let all = generate_clusters_encoded(&snap, proxy, &[]).resources;
        all.into_iter().find(|c| c.name == a).expect("cluster of service a")
    };
    assert!(Arc::ptr_eq(&find(&one).encoded, &find(&two).encoded), "one outbound cluster for both sidecars");
    assert_eq!(
        cache.outbound_cluster_sets(),
        3,
        "sidecars share one set; the router and proxyless have theirs"
    );
}

/// Outbound clusters depend on endpoints (a DNS cluster carries its hosts), so an endpoint-only
/// snapshot of the same generation gets new ones; an older snapshot is still answered with its own
/// endpoints, without replacing the newer entries.
#[test]
fn outbound_clusters_follow_endpoint_only_snapshots() {
    use meshpilot_networking::cluster::generate_clusters_encoded;

    let world = World::new(parse(&with_dns("dns1.example.com"), "default"));
    let cache = Arc::new(GenerationCache::new());
    let push = build(&world);
    let first = Snapshot::with_cache(push.clone(), cache.clone());
    let proxy = sidecar("ns1", &[]);
    let dns = outbound("dns.example.com");
    let dns_cluster = |snap: &Snapshot| {
        let found = decoded_clusters(snap, &proxy, &[]).into_iter().find(|c| c.name == dns);
        format!("{:?}", found.expect("the DNS cluster"))
    };
    assert!(dns_cluster(&first).contains("dns1.example.com"));

    let moved = World::new(parse(&with_dns("dns2.example.com"), "default"));
    let next = Snapshot::with_cache(
        Arc::new(push.with_endpoints(&moved.discovery, &[("dns.example.com".into(), "ns1".into())], "v2")),
        cache.clone(),
    );
    assert_eq!(next.config_generation(), first.config_generation());
    let now = dns_cluster(&next);
    assert!(now.contains("dns2.example.com") && !now.contains("dns1.example.com"), "{now}");
    let held = generate_clusters_encoded(&next, &proxy, &[]).resources;

    assert!(dns_cluster(&first).contains("dns1.example.com"), "the older snapshot keeps its endpoints");
    let again = generate_clusters_encoded(&next, &proxy, &[]).resources;
    for (x, y) in held.iter().zip(&again) {
        if x.name.starts_with("outbound|") {
            assert!(Arc::ptr_eq(&x.encoded, &y.encoded), "{} still shared after the older lookup", x.name);
        }
    }
}

/// A DestinationRule that selects workloads makes the outbound clusters depend on the sidecar's labels.
#[test]
fn a_workload_selecting_destination_rule_splits_the_shared_clusters() {
    let text = mesh()
        + r#"
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: a-one, namespace: ns1}
spec:
  host: a.ns1.svc.cluster.local
  workloadSelector: {matchLabels: {app: one}}
  trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}
"#;
    let world = World::new(parse(&text, "default"));
    let cache = Arc::new(GenerationCache::new());
    let snap = Snapshot::with_cache(build(&world), cache.clone());
    let a = outbound("a.ns1.svc.cluster.local");
    let policy = |labels: &[(&str, &str)]| {
        let all = decoded_clusters(&snap, &sidecar("ns1", labels), &[]);
        all.into_iter().find(|c| c.name == a).expect("cluster of service a").lb_policy
    };
    use envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy;
    // Istio's default is LEAST_REQUEST; the rule selects only `app: one`.
    assert_eq!(policy(&[("app", "one")]), LbPolicy::RoundRobin as i32);
    assert_eq!(policy(&[("app", "two")]), LbPolicy::LeastRequest as i32);
    assert_eq!(cache.outbound_cluster_sets(), 2);
}

/// Two replicas of `web` (10.0.1.1, 10.0.1.2; HTTP 80 and TCP 9000), `db` (10.0.2.1; HTTP 80), and
/// `policies` appended (PeerAuthentication, AuthorizationPolicy documents).
fn workloads(policies: &str) -> String {
    mesh()
        + r#"
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns1}
spec:
  hosts: [web.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.1.1, labels: {app: web}}, {address: 10.0.1.2, labels: {app: web}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: ns1}
spec:
  hosts: [db.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.2.1, labels: {app: db}}]
---
"# + policies
}

/// A sidecar of `app` at `ip` with its service instances, with workload certificates when `certified`.
fn replica(world: &World, app: &str, ip: &str, certified: bool) -> model::push::ProxyContext {
    let mut p = sidecar("ns1", &[("app", app)]);
    p.ips = vec![ip.to_string()];
    p.set_instances_from(&world.discovery);
    assert!(!p.service_instances.is_empty(), "{ip} is an endpoint");
    p.workload_certificates = certified;
    p
}

/// An AuthorizationPolicy denying `/admin` on the `web` workload.
const WEB_DENY: &str = r#"
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: web-deny, namespace: ns1}
spec:
  selector: {matchLabels: {app: web}}
  action: DENY
  rules: [{to: [{operation: {paths: ["/admin"]}}]}]
"#;

/// `generate_listeners_encoded`, decoded, with the shared `virtualInbound` of the result.
fn decoded_listeners(
    push: &Snapshot,
    proxy: &model::push::ProxyContext,
) -> (
    Vec<envoy_types::pb::envoy::config::listener::v3::Listener>,
    Option<Arc<meshpilot_networking::cache::Encoded>>,
) {
    use prost::Message;
    let encoded = meshpilot_networking::listener::generate_listeners_encoded(push, proxy, &[]).resources;
    let inbound = encoded.iter().find(|l| l.name == "virtualInbound").map(|l| l.encoded.clone());
    let listeners = encoded
        .iter()
        .map(|l| envoy_types::pb::envoy::config::listener::v3::Listener::decode(l.bytes()).expect("decodes"))
        .collect();
    (listeners, inbound)
}

/// The encoded LDS decodes to what the message generator makes, for replicas, other workloads, routers
/// and proxyless clients, with and without workload certificates and policies; replicas of one workload
/// share one `virtualInbound`, and what tells sidecars apart (ports, certificates, the mTLS mode and
/// the policies selecting them) gives them their own.
#[test]
fn virtual_inbound_is_shared_by_replicas_and_encodes_what_the_generator_makes() {
    use meshpilot_networking::listener::generate_listeners;

    let policies = r#"
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: db-strict, namespace: ns1}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: STRICT}
---
"#
    .to_string()
        + WEB_DENY;
    for text in [workloads(""), workloads(&policies)] {
        let world = World::new(parse(&text, "default"));
        let cache = Arc::new(GenerationCache::new());
        let snap = Snapshot::with_cache(build(&world), cache.clone());
        let web1 = replica(&world, "web", "10.0.1.1", true);
        let web2 = replica(&world, "web", "10.0.1.2", true);
        let web_plain = replica(&world, "web", "10.0.1.2", false);
        let db = replica(&world, "db", "10.0.2.1", true);
        let others = [router("ns1", &[("istio", "ingressgateway")]), proxyless("ns1")];
        let mut inbound = Vec::new();
        for proxy in [&web1, &web2, &web_plain, &db].into_iter().chain(&others) {
            let (decoded, shared) = decoded_listeners(&snap, proxy);
            assert_eq!(decoded, generate_listeners(&snap, proxy, &[]).resources, "{:?}", proxy.ips);
            inbound.push(shared);
        }
        let [w1, w2, plain, d, router, grpc] = &inbound[..] else { unreachable!() };
        let (w1, w2, plain, d) =
            (w1.as_ref().unwrap(), w2.as_ref().unwrap(), plain.as_ref().unwrap(), d.as_ref().unwrap());
        assert!(Arc::ptr_eq(w1, w2), "replicas of web share virtualInbound");
        assert!(!Arc::ptr_eq(w1, plain), "without certificates: plaintext chains of its own");
        assert!(!Arc::ptr_eq(w1, d), "db has other ports");
        assert!(router.is_none() && grpc.is_none(), "no virtualInbound for routers and proxyless clients");
        assert_eq!(cache.virtual_inbound_listeners(), 3);
    }
}

/// A policy change is a new generation: the shared `virtualInbound` is made again from it.
#[test]
fn virtual_inbound_follows_a_new_generation() {
    let cache = Arc::new(GenerationCache::new());
    let before = World::new(parse(&workloads(""), "default"));
    let first = Snapshot::with_cache(build(&before), cache.clone());
    let (_, open) = decoded_listeners(&first, &replica(&before, "web", "10.0.1.1", true));
    let after = World::new(parse(&workloads(WEB_DENY), "default"));
    let second = Snapshot::with_cache(build(&after), cache.clone());
    let (_, denied) = decoded_listeners(&second, &replica(&after, "web", "10.0.1.2", true));
    let has_rule = |bytes: &[u8]| bytes.windows(6).any(|w| w == b"/admin");
    assert!(!has_rule(open.unwrap().bytes()), "no policy before");
    assert!(
        has_rule(denied.unwrap().bytes()),
        "the RBAC rule (in the filters' Any) reaches the shared listener"
    );
}

/// A sidecar in `ns1` whose workload labels place it in `region/zone`.
fn zoned(zone: &str) -> model::push::ProxyContext {
    let mut p = sidecar(
        "ns1",
        &[("app", "client"), ("topology.kubernetes.io/region", "r1"), ("topology.kubernetes.io/zone", zone)],
    );
    p.set_topology(None);
    p
}

/// With outlier detection on the destination, Istio's default locality failover ranks endpoints
/// relative to the proxy: proxies of one zone share one encoded assignment, another zone gets its own
/// (its own endpoints at priority 0), and a destination without outlier detection is still shared by
/// every proxy.
#[test]
fn locality_ranked_assignments_are_shared_per_zone() {
    use envoy_types::pb::envoy::config::endpoint::v3::LocalityLbEndpoints;
    use meshpilot_networking::endpoint::generate_endpoints_encoded;
    use prost::Message;

    let text = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ranked, namespace: ns1}
spec:
  hosts: [ranked.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, locality: r1/z1}, {address: 10.0.0.2, locality: r1/z2}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ranked, namespace: ns1}
spec:
  host: ranked.ns1.svc.cluster.local
  trafficPolicy: {outlierDetection: {consecutive5xxErrors: 3}}
---
"#
    .to_string()
        + &http_service_entry("plain", "ns1", "10.0.0.3");
    let world = World::new(parse(&text, "default"));
    let cache = Arc::new(GenerationCache::new());
    let push = Snapshot::with_cache(build(&world), cache.clone());
    let names = [outbound("ranked.ns1.svc.cluster.local"), outbound("plain.ns1.svc.cluster.local")];
    let (z1a, z1b, z2) = (zoned("z1"), zoned("z1"), zoned("z2"));
    let [a, b, c] = [&z1a, &z1b, &z2].map(|p| generate_endpoints_encoded(&push, p, &names, false).resources);
    assert!(Arc::ptr_eq(&a[0].encoded, &b[0].encoded), "same zone: one ranked assignment");
    assert!(!Arc::ptr_eq(&a[0].encoded, &c[0].encoded), "another zone: its own ranking");
    assert!(Arc::ptr_eq(&a[1].encoded, &c[1].encoded), "no outlier detection: shared by every zone");
    let priority_of = |bytes: &[u8], ip: &str| -> u32 {
        let cla = ClusterLoadAssignment::decode(bytes).expect("decodes");
        let l: &LocalityLbEndpoints = cla
            .endpoints
            .iter()
            .find(|l| format!("{:?}", l.lb_endpoints).contains(ip))
            .expect("endpoint present");
        l.priority
    };
    assert_eq!((priority_of(a[0].bytes(), "10.0.0.1"), priority_of(a[0].bytes(), "10.0.0.2")), (0, 1));
    assert_eq!((priority_of(c[0].bytes(), "10.0.0.1"), priority_of(c[0].bytes(), "10.0.0.2")), (1, 0));
}

/// A DNS-resolved cluster carries its endpoints in CDS: they are ranked for the proxy's locality, and
/// outbound clusters are shared per locality (not across zones).
#[test]
fn dns_cluster_endpoints_are_ranked_for_the_proxys_locality() {
    let text = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dns, namespace: ns1}
spec:
  hosts: [dns.example.com]
  location: MESH_EXTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
  endpoints: [{address: a.example.com, locality: r1/z1}, {address: b.example.com, locality: r2/z1}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dns, namespace: ns1}
spec:
  host: dns.example.com
  trafficPolicy:
    outlierDetection: {consecutive5xxErrors: 3}
    loadBalancer: {localityLbSetting: {failoverPriority: [topology.kubernetes.io/zone]}}
"#;
    let world = World::new(parse(text, "default"));
    let push = Snapshot::new(build(&world));
    let name = outbound("dns.example.com");
    let ranks = |proxy: &model::push::ProxyContext| -> Vec<(String, u32)> {
        let clusters = decoded_clusters(&push, proxy, &[]);
        let c = clusters.iter().find(|c| c.name == name).expect("dns cluster");
        let cla = c.load_assignment.as_ref().expect("DNS clusters carry their endpoints");
        cla.endpoints.iter().map(|l| (l.locality.as_ref().unwrap().region.clone(), l.priority)).collect()
    };
    assert_eq!(ranks(&zoned("z1")), [("r1".to_string(), 0), ("r2".to_string(), 1)]);
    let mut remote = zoned("z1");
    remote.labels.insert("topology.kubernetes.io/region".into(), "r2".into());
    remote.set_topology(None);
    assert_eq!(ranks(&remote), [("r1".to_string(), 1), ("r2".to_string(), 0)]);
    // failoverPriority is not applied to DNS clusters: reported on the DestinationRule.
    let findings = meshpilot_networking::cluster::generate_clusters(&push, &zoned("z1"), &[]).findings;
    assert!(
        findings
            .iter()
            .any(|f| f.path == "spec.trafficPolicy.loadBalancer" && f.message.contains("failoverPriority")),
        "{findings:?}"
    );
}

#[test]
fn resources_list_what_is_cached_by_type_and_clear_keeps_the_findings() {
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    use prost::Name;
    let world = World::new(parse(&mesh(), "default"));
    let cache = Arc::new(GenerationCache::new());
    let push = build(&world);
    let proxy = sidecar("ns1", &[]);
    let snapshot = Snapshot::with_cache(push.clone(), cache.clone());
    let routes = generate_routes(&snapshot, &proxy, &["80".to_string()]);
    let finding = model::Finding {
        severity: model::finding::Severity::Warning,
        config: None,
        path: String::new(),
        resource: "80".into(),
        message: "kept across a clear".into(),
    };
    cache.record_findings(&push, "p1", std::slice::from_ref(&finding));

    let listed = cache.resources();
    let route =
        listed.iter().find(|r| r.type_url == RouteConfiguration::type_url()).expect("the route table");
    assert_eq!(route.name, "80", "the name is read from the encoding");
    assert_eq!(route.bytes, prost::Message::encoded_len(&routes.resources[0]));

    assert!(cache.clear() >= 2, "the scope and the route table");
    assert!(cache.resources().is_empty());
    assert_eq!(cache.len(), (0, 0, 0));
    assert_eq!(cache.generation(), push.config_generation(), "the generation stays");
    assert_eq!(cache.generation_findings().len(), 1, "findings stay");
    generate_routes(&snapshot, &proxy, &["80".to_string()]);
    assert_eq!(cache.resources().len(), 1, "made again on the next lookup");
}
