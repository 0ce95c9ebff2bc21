//! Names and shapes for bookinfo: the repository's ServiceEntries/WorkloadEntries with Istio's
//! `destination-rule-all.yaml`, and the example's gateway and VirtualServices.
//!
//! Route translation (`route::translate_http_routes`) is written elsewhere; assertions about hosts
//! that have a VirtualService hold whether it returns routes or not.

use crate::support;

use envoy_types::pb::envoy::{
    config::{
        cluster::v3::{
            Cluster,
            cluster::{ClusterDiscoveryType, DiscoveryType, LbPolicy},
        },
        listener::v3::{Listener, filter},
        route::v3::{RouteConfiguration, VirtualHost, route::Action, route_action::ClusterSpecifier},
    },
    extensions::filters::network::http_connection_manager::v3::{
        HttpConnectionManager, http_connection_manager::RouteSpecifier,
    },
};
use meshpilot_networking::{
    cluster::generate_clusters,
    debug::config_dump,
    endpoint::generate_endpoints,
    listener::generate_listeners,
    rds::generate_routes,
    route::{DestinationCluster, RouteContext, translate_http_routes},
};
use prost::Message;
use support::*;

const REVIEWS: &str = "reviews.bookinfo.svc.cluster.local";

fn with_destination_rules() -> World {
    let mut configs = bookinfo_example(false);
    configs.extend(parse_file(
        &corpus().join("samples/bookinfo/networking/destination-rule-all.yaml"),
        "bookinfo",
    ));
    World::new(configs)
}

fn cluster<'a>(clusters: &'a [Cluster], name: &str) -> &'a Cluster {
    clusters.iter().find(|c| c.name == name).unwrap_or_else(|| {
        panic!("no cluster {name}; have {:?}", clusters.iter().map(|c| &c.name).collect::<Vec<_>>())
    })
}

fn discovery(c: &Cluster) -> DiscoveryType {
    match c.cluster_discovery_type {
        Some(ClusterDiscoveryType::Type(t)) => DiscoveryType::try_from(t).unwrap(),
        _ => panic!("no discovery type"),
    }
}

fn hcm(l: &Listener) -> HttpConnectionManager {
    let f = &l.filter_chains.last().expect("a filter chain").filters[0];
    let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else { panic!("untyped filter") };
    assert_eq!(
        any.type_url,
        "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
    );
    HttpConnectionManager::decode(any.value.as_slice()).unwrap()
}

fn rds_name(h: &HttpConnectionManager) -> String {
    match &h.route_specifier {
        Some(RouteSpecifier::Rds(rds)) => rds.route_config_name.clone(),
        other => panic!("not RDS: {other:?}"),
    }
}

fn vhost<'a>(rc: &'a RouteConfiguration, name: &str) -> Option<&'a VirtualHost> {
    rc.virtual_hosts.iter().find(|v| v.name == name)
}

fn route_cluster(v: &VirtualHost) -> String {
    match &v.routes[0].action {
        Some(Action::Route(a)) => match &a.cluster_specifier {
            Some(ClusterSpecifier::Cluster(c)) => c.clone(),
            other => panic!("not a single cluster: {other:?}"),
        },
        other => panic!("not a route action: {other:?}"),
    }
}

#[test]
fn clusters_per_port_and_subset() {
    let world = with_destination_rules();
    let push = world.push();
    let out = generate_clusters(&push, &sidecar("bookinfo", &[("app", "productpage")]), &[]);
    let c = &out.resources;
    for name in [
        format!("outbound|9080||{REVIEWS}"),
        format!("outbound|9080|v1|{REVIEWS}"),
        format!("outbound|9080|v2|{REVIEWS}"),
        format!("outbound|9080|v3|{REVIEWS}"),
        "outbound|9080|v1|productpage.bookinfo.svc.cluster.local".to_string(),
        "outbound|9080|v2-mysql-vm|ratings.bookinfo.svc.cluster.local".to_string(),
        "outbound|9080|v2|details.bookinfo.svc.cluster.local".to_string(),
    ] {
        let cl = cluster(c, &name);
        assert_eq!(discovery(cl), DiscoveryType::Eds, "{name}");
        assert_eq!(cl.eds_cluster_config.as_ref().unwrap().service_name, name);
        assert_eq!(cl.lb_policy, LbPolicy::LeastRequest as i32, "Istio's default load balancer");
        assert_eq!(cl.connect_timeout.as_ref().unwrap().seconds, 10);
        let t = &cl.circuit_breakers.as_ref().unwrap().thresholds[0];
        assert_eq!(t.max_requests.as_ref().unwrap().value, u32::MAX);
    }
    assert!(c.iter().any(|c| c.name == "BlackHoleCluster"));
    assert!(c.iter().any(|c| c.name == "PassthroughCluster"));
    assert!(c.windows(2).all(|w| w[0].name < w[1].name), "sorted by name, no duplicates");
    assert!(out.findings.is_empty(), "{:?}", out.findings);
}

#[test]
fn subset_endpoints_follow_labels() {
    let world = with_destination_rules();
    let push = world.push();
    let proxy = sidecar("bookinfo", &[]);
    let names = vec![
        format!("outbound|9080|v2|{REVIEWS}"),
        format!("outbound|9080||{REVIEWS}"),
        "outbound|1|x|nope".into(),
    ];
    let out = generate_endpoints(&push, &proxy, &names);
    let v2 = &out.resources[0];
    assert_eq!(v2.cluster_name, names[0]);
    assert_eq!(v2.endpoints.len(), 1);
    assert_eq!(v2.endpoints[0].lb_endpoints.len(), 1);
    assert!(
        v2.endpoints[0].load_balancing_weight.as_ref().unwrap().value >= 1,
        "gRPC needs locality weights"
    );
    let all: usize = out.resources[1].endpoints.iter().map(|l| l.lb_endpoints.len()).sum();
    assert_eq!(all, 3);
    assert!(out.resources[2].endpoints.is_empty(), "unknown clusters get an empty assignment");
    // Without names: one assignment per EDS cluster.
    let every = generate_endpoints(&push, &proxy, &[]);
    assert!(every.resources.iter().any(|a| a.cluster_name == names[0]));
}

#[test]
fn sidecar_listeners_and_default_routes() {
    let world = with_destination_rules();
    let push = world.push();

    // Loopback, no interception: one listener per port binding it.
    let loopback = loopback_sidecar("bookinfo");
    let lds = generate_listeners(&push, &loopback, &[]);
    let names: Vec<&str> = lds.resources.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["127.0.0.1_9080"]);
    let h = hcm(&lds.resources[0]);
    assert_eq!(rds_name(&h), "9080");
    let filters: Vec<&str> = h.http_filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(filters, ["envoy.filters.http.fault", "envoy.filters.http.cors", "envoy.filters.http.router"]);
    assert!(lds.resources[0].bind_to_port.is_none());

    // Default interception: 0.0.0.0_PORT does not bind; the virtual listeners capture.
    let lds = generate_listeners(&push, &sidecar("bookinfo", &[]), &[]);
    let names: Vec<&str> = lds.resources.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["0.0.0.0_9080", "virtualInbound", "virtualOutbound"]);
    assert_eq!(lds.resources[0].bind_to_port.as_ref().map(|b| b.value), Some(false));

    // RDS 9080: a virtual host per service with the default route, then allow_any.
    let rds = generate_routes(&push, &loopback, &[]);
    assert_eq!(rds.resources.len(), 1);
    let rc = &rds.resources[0];
    assert_eq!(rc.name, "9080");
    let reviews = vhost(rc, &format!("{REVIEWS}:9080")).expect("reviews virtual host");
    assert_eq!(route_cluster(reviews), format!("outbound|9080||{REVIEWS}"));
    assert_eq!(reviews.routes[0].name, "default");
    for d in [
        REVIEWS,
        "reviews",
        "reviews.bookinfo",
        "reviews.bookinfo.svc",
        "reviews.bookinfo.svc.cluster.local.",
    ] {
        assert!(reviews.domains.iter().any(|x| x == d), "{d} in {:?}", reviews.domains);
    }
    assert_eq!(rc.virtual_hosts.last().unwrap().name, "allow_any");
    assert_eq!(rc.virtual_hosts.len(), 5);
}

#[test]
fn virtual_service_hosts_route_either_way() {
    let world = World::new(bookinfo_example(true));
    let push = world.push();
    let proxy = sidecar("bookinfo", &[]);
    let rc = &generate_routes(&push, &proxy, &["9080".to_string()]).resources[0];
    // Hosts without VirtualService: default routes.
    let ratings = vhost(rc, "ratings.bookinfo.svc.cluster.local:9080").unwrap();
    assert_eq!(route_cluster(ratings), "outbound|9080||ratings.bookinfo.svc.cluster.local");
    // reviews has a VirtualService: its virtual host exists exactly when its routes translate.
    let scope = push.sidecar_scope(&proxy);
    let vs = scope.virtual_service_for(REVIEWS).expect("reviews VirtualService bound to mesh");
    let cluster_for =
        |_: &api::networking::virtual_service::Destination| DestinationCluster::Service("x".to_string());
    let gateways = ["mesh".to_string()];
    let ctx = RouteContext {
        listener_port: 9080,
        gateways: &gateways,
        proxy_labels: &proxy.labels,
        proxy_namespace: &proxy.namespace,
        cluster_for: &cluster_for,
        hash_for: None,
    };
    let translated = translate_http_routes(vs.spec(), &vs.key, &ctx, &mut Vec::new());
    let reviews = vhost(rc, &format!("{REVIEWS}:9080"));
    assert_eq!(reviews.is_some(), !translated.is_empty());
    if let Some(v) = reviews {
        assert_ne!(v.routes[0].name, "default", "VirtualService routes, not the default route");
    }
}

#[test]
fn gateway_listener_and_routes() {
    let world = World::new(bookinfo_example(true));
    let push = world.push();
    let gw = router("istio-system", &[("istio", "ingressgateway")]);
    let lds = generate_listeners(&push, &gw, &[]);
    let names: Vec<&str> = lds.resources.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["0.0.0.0_8080"]);
    let h = hcm(&lds.resources[0]);
    assert_eq!(rds_name(&h), "http.8080");
    assert_eq!(h.use_remote_address.as_ref().map(|v| v.value), Some(true));
    let rds = generate_routes(&push, &gw, &[]);
    assert_eq!(rds.resources.len(), 1);
    let rc = &rds.resources[0];
    assert_eq!(rc.name, "http.8080");
    let v = vhost(rc, "*:8080").expect("virtual host for the server's host *");
    assert_eq!(v.domains, ["*"]);
    // Routers get clusters for every visible service, no inbound clusters.
    let cds = generate_clusters(&push, &gw, &[]);
    assert!(cds.resources.iter().any(|c| c.name == "outbound|9080||productpage.bookinfo.svc.cluster.local"));
    assert!(cds.resources.iter().all(|c| !c.name.starts_with("inbound|")));
    // A proxy the gateway does not select gets nothing.
    assert!(
        generate_listeners(&push, &router("istio-system", &[("istio", "egress")]), &[]).resources.is_empty()
    );
}

#[test]
fn proxyless_grpc_shapes() {
    let world = with_destination_rules();
    let push = world.push();
    let proxy = proxyless("bookinfo");
    let asked = vec![format!("{REVIEWS}:9080"), "ratings:9080".to_string()];
    let lds = generate_listeners(&push, &proxy, &asked);
    let names: Vec<&str> = lds.resources.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["ratings:9080", &format!("{REVIEWS}:9080")]);
    let api = lds.resources[1].api_listener.as_ref().unwrap().api_listener.as_ref().unwrap();
    let h = HttpConnectionManager::decode(api.value.as_slice()).unwrap();
    let route = rds_name(&h);
    assert_eq!(route, format!("outbound|9080||{REVIEWS}"));
    assert_eq!(h.http_filters.last().unwrap().name, "envoy.filters.http.router");
    assert!(h.http_filters[1].is_optional, "gRPC does not know CORS");

    let rds = generate_routes(&push, &proxy, std::slice::from_ref(&route));
    let rc = &rds.resources[0];
    assert_eq!(rc.name, route);
    assert_eq!(rc.virtual_hosts.len(), 1);
    assert!(rc.virtual_hosts[0].domains.iter().any(|d| d == &format!("{REVIEWS}:9080")));

    let cds = generate_clusters(&push, &proxy, &[format!("outbound|9080|v2|{REVIEWS}")]);
    assert_eq!(cds.resources.len(), 1);
    assert_eq!(discovery(&cds.resources[0]), DiscoveryType::Eds);
    assert!(cds.resources[0].typed_extension_protocol_options.is_empty());
    // No load balancer in the rule: ROUND_ROBIN (Envoy's default here is LEAST_REQUEST, which gRPC
    // C-core NACKs).
    assert_eq!(cds.resources[0].lb_policy, LbPolicy::RoundRobin as i32);
}

#[test]
fn config_dump_lists_everything() {
    let world = with_destination_rules();
    let push = world.push();
    let dump = config_dump(&push, &loopback_sidecar("bookinfo"));
    assert_eq!(dump["version"], "v1");
    assert!(
        dump["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == format!("outbound|9080|v2|{REVIEWS}"))
    );
    // Each outbound cluster names the DestinationRule applied to it (Istio's `istio.config` metadata).
    let v2 = dump["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == format!("outbound|9080|v2|{REVIEWS}"));
    assert_eq!(
        v2.unwrap()["config"],
        "/apis/networking.istio.io/v1/namespaces/bookinfo/destination-rule/reviews",
        "{v2:?}"
    );
    assert!(
        dump["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != "BlackHoleCluster" || c.get("config").is_none())
    );
    assert_eq!(dump["listeners"][0]["name"], "127.0.0.1_9080");
    assert_eq!(dump["listeners"][0]["filter_chains"][0]["filters"][0]["routes"]["rds"], "9080");
    assert_eq!(dump["routes"][0]["name"], "9080");
    assert!(
        dump["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["cluster_name"] == format!("outbound|9080|v2|{REVIEWS}")
                && e["localities"][0]["endpoints"][0]["address"] == "127.0.0.1:19084")
    );
}
