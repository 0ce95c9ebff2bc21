//! The generation cache (`networking::cache`): scopes, route tables and gateway servers are shared
//! within one config generation, dropped when a newer generation is looked up, and never stored from
//! an older one.

mod support;

use std::sync::Arc;

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
