//! The aggregate registry: merge by hostname with precedence, fan-out lookups, handlers once.

use crate::support;

use std::sync::{Arc, Mutex};

use meshpilot_registry::{AggregateRegistry, ServiceEntryOptions};
use model::{
    Protocol, RegistryEvent, ServiceController, ServiceDiscovery,
    service::{
        Endpoint, EndpointShard, Labels, Port, ProviderId, RegistryEventHandler, RegistryWarning, Resolution,
        Service, ServiceInstance, ShardKey, labels_match,
    },
};
use support::*;

/// A fixed registry standing in for the (later) Kubernetes one.
#[derive(Default)]
struct StaticRegistry {
    services: Vec<Arc<Service>>,
    endpoints: Vec<(String, String, Arc<Endpoint>)>,
    handlers: Mutex<Vec<RegistryEventHandler>>,
}

impl StaticRegistry {
    fn emit(&self, event: &RegistryEvent) {
        for h in self.handlers.lock().unwrap().iter() {
            h(event);
        }
    }
}

impl ServiceDiscovery for StaticRegistry {
    fn services(&self) -> Vec<Arc<Service>> {
        self.services.clone()
    }
    fn get_service(&self, hostname: &str, namespace: &str) -> Option<Arc<Service>> {
        self.services.iter().find(|s| s.hostname == hostname && s.namespace == namespace).cloned()
    }
    fn endpoints(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        subset: Option<&Labels>,
    ) -> Vec<Arc<Endpoint>> {
        let Some(service) = self.get_service(hostname, namespace) else { return vec![] };
        self.endpoints
            .iter()
            .filter(|(h, n, e)| h == hostname && n == namespace && e.serves(&service, port))
            .filter(|(_, _, e)| subset.is_none_or(|s| labels_match(s, &e.labels)))
            .map(|(_, _, e)| e.clone())
            .collect()
    }
    fn proxy_instances(&self, _ips: &[String], _namespace: Option<&str>) -> Vec<ServiceInstance> {
        vec![]
    }
}

impl ServiceController for StaticRegistry {
    fn append_event_handler(&self, handler: RegistryEventHandler) {
        self.handlers.lock().unwrap().push(handler);
    }
    fn has_synced(&self) -> bool {
        true
    }
    fn endpoint_shards(&self) -> Vec<EndpointShard> {
        vec![]
    }
    fn warnings(&self) -> Vec<RegistryWarning> {
        vec![]
    }
}

fn kube_service(hostname: &str, namespace: &str, created: &str) -> Arc<Service> {
    Arc::new(Service {
        hostname: hostname.into(),
        namespace: namespace.into(),
        name: hostname.split('.').next().unwrap().into(),
        object_name: hostname.split('.').next().unwrap().into(),
        registry: ProviderId::Kubernetes,
        ports: vec![Port { name: "http".into(), port: 80, protocol: Protocol::Http }],
        addresses: vec!["10.96.0.10".into()],
        resolution: Resolution::ClientSideLb,
        mesh_external: false,
        export_to: Default::default(),
        labels: Labels::new(),
        label_selector: None,
        service_accounts: vec![],
        creation_time: Some(created.into()),
        passthrough_target_ports: Default::default(),
        external_name: None,
        aliases: Vec::new(),
        auto_allocated: Vec::new(),
        traffic_distribution: Default::default(),
        cluster_external_addresses: Default::default(),
    })
}

fn kube_endpoint(address: &str) -> Arc<Endpoint> {
    Arc::new(Endpoint {
        addresses: vec![address.into()],
        service_port_name: "http".into(),
        endpoint_port: 8080,
        ..Default::default()
    })
}

#[tokio::test]
async fn kubernetes_services_win_and_endpoints_are_merged() {
    // The ServiceEntry is older, but a Kubernetes service with the same hostname and namespace wins.
    let host = "reviews.default.svc.cluster.local";
    let se = created_at(
        mk_service_entry("default", "squatter", &[host], |se| se.endpoints = vec![endpoint("192.168.0.1")]),
        "2020-01-01T00:00:00Z",
    );
    let h = Harness::start(vec![se]).await;
    let kube = Arc::new(StaticRegistry {
        services: vec![kube_service(host, "default", "2025-01-01T00:00:00Z")],
        endpoints: vec![(host.into(), "default".into(), kube_endpoint("10.0.0.5"))],
        ..Default::default()
    });
    let aggregate = AggregateRegistry::new();
    aggregate.add_registry(Arc::new(h.registry.clone()));
    aggregate.add_registry(kube.clone());

    let services = aggregate.services();
    assert_eq!(services.len(), 1, "merged by hostname and namespace");
    assert_eq!(services[0].registry, ProviderId::Kubernetes);
    assert_eq!(aggregate.get_service(host, "default").unwrap().registry, ProviderId::Kubernetes);
    assert_eq!(aggregate.visible_service(host, "other").unwrap().registry, ProviderId::Kubernetes);
    // Endpoints of both registries are served.
    let addresses: Vec<String> = aggregate
        .endpoints(host, "default", 80, None)
        .iter()
        .map(|e| e.first_address().to_string())
        .collect();
    assert_eq!(addresses, ["192.168.0.1", "10.0.0.5"]);
    // Lookups fan out: the ServiceEntry registry knows the proxy at 192.168.0.1.
    assert_eq!(aggregate.proxy_instances(&["192.168.0.1".into()], None).len(), 1);
    // The hidden service is reported.
    let warnings = aggregate.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].message.contains("hidden by the Kubernetes one"), "{warnings:?}");
    assert!(aggregate.has_synced());
}

#[tokio::test]
async fn among_non_kubernetes_registries_the_oldest_then_the_first_added_wins() {
    let host = "db.example.com";
    let young = created_at(
        mk_service_entry("ns", "young", &[host], |se| se.endpoints = vec![endpoint("1.0.0.1")]),
        "2025-01-01T00:00:00Z",
    );
    let old = created_at(
        mk_service_entry("ns", "old", &[host], |se| se.endpoints = vec![endpoint("2.0.0.1")]),
        "2021-01-01T00:00:00Z",
    );
    let first = Harness::start(vec![young.clone()]).await;
    let options = ServiceEntryOptions { cluster_id: "east".into(), ..ServiceEntryOptions::default() };
    let second = Harness::start_with(vec![old], options).await;
    let aggregate = AggregateRegistry::new();
    aggregate.add_registry(Arc::new(first.registry.clone()));
    aggregate.add_registry(Arc::new(second.registry.clone()));
    assert_eq!(aggregate.get_service(host, "ns").unwrap().object_name, "old");
    let shards: Vec<String> = aggregate.endpoint_shards().iter().map(|s| s.shard.to_string()).collect();
    assert_eq!(shards, ["External/Kubernetes", "External/east"]);

    // Same creation time, namespace and object name: the registry added first wins.
    let twin = created_at(
        mk_service_entry("ns", "old", &[host], |se| se.addresses = vec!["10.9.9.9".into()]),
        "2021-01-01T00:00:00Z",
    );
    let twin = Harness::start(vec![twin]).await;
    for (order, expected) in [([&twin, &second], vec!["10.9.9.9".to_string()]), ([&second, &twin], vec![])] {
        let aggregate = AggregateRegistry::new();
        for h in order {
            aggregate.add_registry(Arc::new(h.registry.clone()));
        }
        assert_eq!(aggregate.get_service(host, "ns").unwrap().addresses, expected);
        assert_eq!(aggregate.services()[0].addresses, expected);
    }
}

#[tokio::test]
async fn handlers_are_registered_once_and_see_every_registry() {
    let h = Harness::start(vec![]).await;
    let kube = Arc::new(StaticRegistry::default());
    let aggregate = AggregateRegistry::new();
    aggregate.add_registry(Arc::new(h.registry.clone()));
    aggregate.add_registry(kube.clone());
    // A handler added after the registries still gets their events, exactly once each.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    aggregate.append_event_handler(Arc::new(move |e: &RegistryEvent| sink.lock().unwrap().push(describe(e))));

    h.put(mk_service_entry("ns", "se", &["a.example.com"], |se| se.endpoints = vec![endpoint("1.1.1.1")]))
        .await;
    kube.emit(&RegistryEvent::Service(model::ServiceEvent {
        shard: ShardKey { provider: ProviderId::Kubernetes, cluster: "Kubernetes".into() },
        hostname: "k.default.svc.cluster.local".into(),
        namespace: "default".into(),
        event: model::Event::Add,
    }));
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "service add a.example.com/ns",
            "endpoints full a.example.com/ns 1",
            "service add k.default.svc.cluster.local/default"
        ]
    );
}

#[tokio::test]
async fn registries_removed_or_replaced_raise_one_event_per_service_and_stop_forwarding() {
    let shared = "echo.shop.svc.cluster.local";
    let only_b = "b-only.shop.svc.cluster.local";
    let only_c = "c-only.shop.svc.cluster.local";
    let a = Arc::new(StaticRegistry {
        services: vec![kube_service(shared, "shop", "2024-01-01T00:00:00Z")],
        endpoints: vec![(shared.into(), "shop".into(), kube_endpoint("10.0.0.1"))],
        ..Default::default()
    });
    let b = Arc::new(StaticRegistry {
        services: vec![
            kube_service(shared, "shop", "2024-01-01T00:00:00Z"),
            kube_service(only_b, "shop", "2024-01-01T00:00:00Z"),
        ],
        endpoints: vec![(shared.into(), "shop".into(), kube_endpoint("10.0.0.2"))],
        ..Default::default()
    });
    let c = Arc::new(StaticRegistry {
        services: vec![
            kube_service(shared, "shop", "2024-01-01T00:00:00Z"),
            kube_service(only_c, "shop", "2024-01-01T00:00:00Z"),
        ],
        endpoints: vec![(shared.into(), "shop".into(), kube_endpoint("10.0.0.3"))],
        ..Default::default()
    });
    let aggregate = AggregateRegistry::new();
    aggregate.add_registry(a.clone());
    let b_dyn: Arc<dyn ServiceController> = b.clone();
    aggregate.add_registry(b_dyn.clone());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    aggregate.append_event_handler(Arc::new(move |e: &RegistryEvent| sink.lock().unwrap().push(describe(e))));
    let addresses = || -> Vec<String> {
        aggregate.endpoints(shared, "shop", 80, None).iter().map(|e| e.first_address().to_string()).collect()
    };
    assert_eq!(addresses(), ["10.0.0.1", "10.0.0.2"]);
    assert!(aggregate.warnings().is_empty(), "the same Kubernetes Service in two clusters is no conflict");

    // Replaced: c takes b's place; a service of both is updated, b's own deleted, c's own added.
    let c_dyn: Arc<dyn ServiceController> = c.clone();
    assert!(aggregate.replace_registry(&b_dyn, c_dyn.clone()));
    assert_eq!(addresses(), ["10.0.0.1", "10.0.0.3"]);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "service delete b-only.shop.svc.cluster.local/shop",
            "service update echo.shop.svc.cluster.local/shop",
            "service add c-only.shop.svc.cluster.local/shop",
        ]
    );
    // b is no member any more: its events stop here; c's reach the handlers.
    seen.lock().unwrap().clear();
    let event = |host: &str| {
        RegistryEvent::Service(model::ServiceEvent {
            shard: ShardKey { provider: ProviderId::Kubernetes, cluster: "x".into() },
            hostname: host.into(),
            namespace: "shop".into(),
            event: model::Event::Update,
        })
    };
    b.emit(&event(only_b));
    c.emit(&event(only_c));
    assert_eq!(*seen.lock().unwrap(), ["service update c-only.shop.svc.cluster.local/shop"]);

    // Removed: the shared service stays (a still has it: an update), c's own goes.
    seen.lock().unwrap().clear();
    assert!(aggregate.remove_registry(&c_dyn));
    assert!(!aggregate.remove_registry(&c_dyn), "not a member any more");
    assert_eq!(addresses(), ["10.0.0.1"]);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "service delete c-only.shop.svc.cluster.local/shop",
            "service update echo.shop.svc.cluster.local/shop"
        ]
    );
}

#[tokio::test]
async fn a_gateway_service_of_several_clusters_keeps_every_clusters_external_addresses() {
    let host = "istio-eastwestgateway.istio-system.svc.cluster.local";
    let in_cluster = |cluster: &str, address: &str| {
        let mut s = Service::clone(&kube_service(host, "istio-system", "2024-01-01T00:00:00Z"));
        s.cluster_external_addresses = [(cluster.to_string(), vec![address.to_string()])].into();
        Arc::new(StaticRegistry { services: vec![Arc::new(s)], ..Default::default() })
    };
    let aggregate = AggregateRegistry::new();
    aggregate.add_registry(in_cluster("east", "203.0.113.1"));
    aggregate.add_registry(in_cluster("west", "203.0.113.2"));
    let expected: std::collections::BTreeMap<String, Vec<String>> =
        [("east".into(), vec!["203.0.113.1".into()]), ("west".into(), vec!["203.0.113.2".into()])].into();
    assert_eq!(aggregate.get_service(host, "istio-system").unwrap().cluster_external_addresses, expected);
    assert_eq!(aggregate.services()[0].cluster_external_addresses, expected);
    assert_eq!(aggregate.visible_service(host, "shop").unwrap().cluster_external_addresses, expected);
}
