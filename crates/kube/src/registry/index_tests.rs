//! [`KubeIndex`] without a cluster: Services, EndpointSlices, Pods and Nodes built as k8s-openapi
//! values, fed in, and the notifications and lookups checked against Istio's documented behaviour
//! (module documentation, docs/ARCHITECTURE.md "Service registry"). Expected values are written out.

use std::sync::Arc;

use k8s_openapi::api::{
    core::v1::{Node, Pod, Service as KubeService},
    discovery::v1::EndpointSlice,
};
use model::{
    Event,
    service::{EndpointPush, HealthStatus, RegistryEvent, Resolution, ServiceInstance},
};

use super::*;

const NS: &str = "bookinfo";
const HOST: &str = "reviews.bookinfo.svc.cluster.local";

fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn index() -> KubeIndex {
    KubeIndex::new(KubeRegistryOptions::default())
}

/// The `reviews` Service at `rv` with `spec`.
fn service(rv: &str, spec: serde_json::Value) -> KubeService {
    service_meta(serde_json::json!({"name": "reviews", "namespace": NS, "resourceVersion": rv}), spec)
}

fn service_meta(metadata: serde_json::Value, spec: serde_json::Value) -> KubeService {
    object(serde_json::json!({"metadata": metadata, "spec": spec}))
}

/// A ClusterIP service with one port `http` 9080 → 9080.
fn reviews(rv: &str) -> KubeService {
    service(
        rv,
        serde_json::json!({"clusterIP": "10.0.0.10", "clusterIPs": ["10.0.0.10"], "selector": {"app": "reviews"},
            "ports": [{"name": "http", "port": 9080, "targetPort": 9080}]}),
    )
}

/// A slice of `reviews` named `name`, port `http` 9080, with `endpoints` (JSON).
fn slice(name: &str, rv: &str, endpoints: serde_json::Value) -> Arc<EndpointSlice> {
    Arc::new(object(serde_json::json!({
        "metadata": {"name": name, "namespace": NS, "resourceVersion": rv,
                     "labels": {"kubernetes.io/service-name": "reviews"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 9080, "protocol": "TCP"}],
        "endpoints": endpoints,
    })))
}

/// A slice endpoint at `ip` with conditions, optionally naming a pod.
fn ep(ip: &str, ready: bool, terminating: bool, pod: Option<&str>) -> serde_json::Value {
    let mut e =
        serde_json::json!({"addresses": [ip], "conditions": {"ready": ready, "terminating": terminating}});
    if let Some(pod) = pod {
        e["targetRef"] = serde_json::json!({"kind": "Pod", "name": pod, "namespace": NS});
    }
    e
}

fn pod(name: &str, rv: &str, ip: &str, node: &str, labels: serde_json::Value) -> Arc<Pod> {
    Arc::new(object(serde_json::json!({
        "metadata": {"name": name, "namespace": NS, "resourceVersion": rv, "labels": labels},
        "spec": {"nodeName": node, "serviceAccountName": "bookinfo-reviews", "containers": []},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]},
    })))
}

fn node_labels(region: &str, zone: &str) -> Labels {
    let node: Node = object(serde_json::json!({"metadata": {"name": "n1", "labels": {
        "topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone}}}));
    node.metadata.labels.unwrap_or_default()
}

/// Notifications as short lines: `service add HOST`, `endpoints full HOST [ADDRESS:PORT HEALTH, …]`.
fn show(events: &[RegistryEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            RegistryEvent::Service(s) => {
                let what = match s.event {
                    Event::Add => "add",
                    Event::Update => "update",
                    Event::Delete => "delete",
                };
                format!("service {what} {}", s.hostname)
            }
            RegistryEvent::Endpoints(u) => {
                let push = match u.push {
                    EndpointPush::Incremental => "incremental",
                    EndpointPush::Full => "full",
                };
                let eps: Vec<String> = u
                    .endpoints
                    .iter()
                    .map(|e| format!("{}:{} {:?}", e.first_address(), e.endpoint_port, e.health_status))
                    .collect();
                format!("endpoints {push} {} [{}]", u.hostname, eps.join(", "))
            }
        })
        .collect()
}

#[test]
fn a_service_is_added_updated_only_when_it_matters_and_deleted() {
    let mut ix = index();
    // A new service without endpoints: a service event, no endpoint shard (Istio creates none for an
    // empty list).
    assert_eq!(show(&ix.apply_service(&reviews("1"))), [format!("service add {HOST}")]);
    let svc = ix.get_service(HOST, NS).unwrap();
    assert_eq!(
        (svc.name.as_str(), svc.resolution, svc.mesh_external),
        ("reviews", Resolution::ClientSideLb, false)
    );
    assert_eq!(svc.addresses, ["10.0.0.10"]);
    assert_eq!(svc.ports.iter().map(|p| (p.name.as_str(), p.port)).collect::<Vec<_>>(), [("http", 9080)]);
    assert!(ix.get_service(HOST, "other").is_none(), "a Kubernetes service lives in its namespace");
    // The same resource version again: nothing.
    assert!(ix.apply_service(&reviews("1")).is_empty());
    // A new version that differs only in an annotation Istio ignores: no push (serviceUpdateNeedsPush).
    let annotated = service_meta(
        serde_json::json!({"name": "reviews", "namespace": NS, "resourceVersion": "2",
                           "annotations": {"example.com/owner": "team-a"}}),
        reviews("2").spec.map(|s| serde_json::to_value(s).unwrap()).unwrap(),
    );
    assert!(ix.apply_service(&annotated).is_empty());
    // A targetPort change is a service update (Istio's TargetPorts rule), though the model service is
    // the same.
    let retargeted = service(
        "3",
        serde_json::json!({"clusterIP": "10.0.0.10", "clusterIPs": ["10.0.0.10"], "selector": {"app": "reviews"},
            "ports": [{"name": "http", "port": 9080, "targetPort": 8080}]}),
    );
    assert_eq!(show(&ix.apply_service(&retargeted)), [format!("service update {HOST}")]);
    // A port added: update.
    let two_ports = service(
        "4",
        serde_json::json!({"clusterIP": "10.0.0.10", "clusterIPs": ["10.0.0.10"], "selector": {"app": "reviews"},
            "ports": [{"name": "http", "port": 9080, "targetPort": 8080}, {"name": "grpc", "port": 9090}]}),
    );
    assert_eq!(show(&ix.apply_service(&two_ports)), [format!("service update {HOST}")]);
    let key = (NS.to_string(), "reviews".to_string());
    assert_eq!(show(&ix.delete_service(&key)), [format!("service delete {HOST}")]);
    assert!(ix.get_service(HOST, NS).is_none());
    assert!(ix.delete_service(&key).is_empty(), "deleting twice raises nothing");
}

#[test]
fn a_service_exported_to_nobody_raises_nothing() {
    let mut ix = index();
    let hidden = |rv: &str, port: u32| {
        service_meta(
            serde_json::json!({"name": "reviews", "namespace": NS, "resourceVersion": rv,
                               "annotations": {"networking.istio.io/exportTo": "~"}}),
            serde_json::json!({"clusterIP": "10.0.0.10", "ports": [{"name": "http", "port": port}]}),
        )
    };
    assert!(ix.apply_service(&hidden("1", 9080)).is_empty());
    assert!(ix.apply_service(&hidden("2", 9081)).is_empty(), "still exported to nobody");
    assert!(
        ix.apply_slice(&slice("reviews-a", "1", serde_json::json!([ep("10.1.0.1", true, false, None)])))
            .is_empty()
    );
    assert!(ix.delete_service(&(NS.to_string(), "reviews".to_string())).is_empty());
}

#[test]
fn slice_endpoints_carry_istio_health_and_later_changes_are_incremental() {
    let mut ix = index();
    ix.apply_service(&reviews("1"));
    // Three endpoints: ready; not ready and terminating; the third ready or not (not terminating).
    let three = |rv: &str, third_ready: bool| {
        slice(
            "reviews-a",
            rv,
            serde_json::json!([
                ep("10.1.0.1", true, false, None),
                ep("10.1.0.2", false, true, None),
                ep("10.1.0.3", third_ready, false, None),
            ]),
        )
    };
    let events = ix.apply_slice(&three("1", false));
    // First endpoints of the service: a new shard, so a full push; EDS itself drops the unhealthy and
    // terminating ones, the registry keeps their status.
    assert_eq!(
        show(&events),
        [format!(
            "endpoints full {HOST} [10.1.0.1:9080 Healthy, 10.1.0.2:9080 Terminating, 10.1.0.3:9080 Unhealthy]"
        )]
    );
    assert_eq!(ix.endpoints(HOST, NS, 9080, None).len(), 3);
    // The same slice version again: nothing.
    assert!(ix.apply_slice(&slice("reviews-a", "1", serde_json::json!([]))).is_empty());
    // An endpoint turns ready: incremental (same service accounts: none).
    assert_eq!(
        show(&ix.apply_slice(&three("2", true))),
        [format!(
            "endpoints incremental {HOST} [10.1.0.1:9080 Healthy, 10.1.0.2:9080 Terminating, 10.1.0.3:9080 Healthy]"
        )]
    );
    // A new slice version with the same endpoints: nothing to push.
    assert!(ix.apply_slice(&three("3", true)).is_empty());
    // The slice goes away: an empty list, incremental (a drop to zero keeps the shard).
    let key = (NS.to_string(), "reviews-a".to_string());
    assert_eq!(show(&ix.delete_slice(&key)), [format!("endpoints incremental {HOST} []")]);
    assert!(ix.endpoints(HOST, NS, 9080, None).is_empty());
}

#[test]
fn slices_not_of_a_service_are_ignored_and_a_service_finds_its_earlier_slices() {
    let mut ix = index();
    let unlabelled: Arc<EndpointSlice> = Arc::new(object(serde_json::json!({
        "metadata": {"name": "orphan", "namespace": NS, "resourceVersion": "1"},
        "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.0.9"]}],
    })));
    let mcs: Arc<EndpointSlice> = Arc::new(object(serde_json::json!({
        "metadata": {"name": "mcs", "namespace": NS, "resourceVersion": "1", "labels": {
            "kubernetes.io/service-name": "reviews", "multicluster.kubernetes.io/service-name": "reviews"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.0.8"]}],
    })));
    assert!(ix.apply_slice(&unlabelled).is_empty());
    assert!(ix.apply_slice(&mcs).is_empty());
    // A slice that comes before its Service is kept: the Service then starts with its endpoints.
    assert!(
        ix.apply_slice(&slice("reviews-a", "1", serde_json::json!([ep("10.1.0.1", true, false, None)])))
            .is_empty()
    );
    assert_eq!(
        show(&ix.apply_service(&reviews("1"))),
        [format!("service add {HOST}"), format!("endpoints full {HOST} [10.1.0.1:9080 Healthy]")]
    );
    // Deleting the Service keeps its slices: created again, it gets them back.
    ix.delete_service(&(NS.to_string(), "reviews".to_string()));
    assert_eq!(
        show(&ix.apply_service(&reviews("5"))),
        [format!("service add {HOST}"), format!("endpoints full {HOST} [10.1.0.1:9080 Healthy]")]
    );
}

#[test]
fn an_endpoint_waits_for_its_pod_which_brings_labels_and_identity() {
    let mut ix = index();
    ix.apply_service(&reviews("1"));
    // The slice names pod reviews-v1-x, not seen yet: the endpoint is left out and warned about.
    let events = ix.apply_slice(&slice(
        "reviews-a",
        "1",
        serde_json::json!([ep("10.1.0.1", true, false, Some("reviews-v1-x"))]),
    ));
    assert!(events.is_empty(), "no endpoint yet, so no shard: {:?}", show(&events));
    let warnings = ix.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].message.contains("bookinfo/reviews-v1-x"), "{}", warnings[0].message);
    // The pod arrives: the endpoint appears, with the pod's labels, the topology labels and the SPIFFE
    // identity of its service account (a new shard: full).
    let events = ix.apply_pod(&pod(
        "reviews-v1-x",
        "1",
        "10.1.0.1",
        "",
        serde_json::json!({"app": "reviews", "version": "v1"}),
    ));
    assert_eq!(show(&events), [format!("endpoints full {HOST} [10.1.0.1:9080 Healthy]")]);
    let eps = ix.endpoints(HOST, NS, 9080, None);
    assert_eq!(eps.len(), 1);
    let e = &eps[0];
    assert_eq!(e.service_account, "spiffe://cluster.local/ns/bookinfo/sa/bookinfo-reviews");
    assert_eq!(e.labels.get("version").map(String::as_str), Some("v1"));
    assert_eq!(e.labels.get("topology.istio.io/cluster").map(String::as_str), Some("Kubernetes"));
    assert_eq!((e.namespace.as_str(), e.tls_mode.as_str()), (NS, "disabled"));
    assert!(ix.warnings().is_empty());
    // Subsets select by pod labels.
    let v1: Labels = [("version".to_string(), "v1".to_string())].into();
    let v2: Labels = [("version".to_string(), "v2".to_string())].into();
    assert_eq!(ix.endpoints(HOST, NS, 9080, Some(&v1)).len(), 1);
    assert!(ix.endpoints(HOST, NS, 9080, Some(&v2)).is_empty());
    // The pod relabelled to v2: incremental (same identity).
    let events = ix.apply_pod(&pod(
        "reviews-v1-x",
        "2",
        "10.1.0.1",
        "",
        serde_json::json!({"app": "reviews", "version": "v2"}),
    ));
    assert_eq!(show(&events), [format!("endpoints incremental {HOST} [10.1.0.1:9080 Healthy]")]);
    assert_eq!(ix.endpoints(HOST, NS, 9080, Some(&v2)).len(), 1);
    // The pod goes away: its endpoint is left out again.
    let events = ix.delete_pod(&(NS.to_string(), "reviews-v1-x".to_string()));
    assert_eq!(show(&events), [format!("endpoints incremental {HOST} []")]);
}

#[test]
fn an_endpoint_without_target_ref_takes_the_pod_at_its_ip() {
    let mut ix = index();
    ix.apply_service(&reviews("1"));
    ix.apply_pod(&pod("p", "1", "10.1.0.1", "", serde_json::json!({"app": "reviews"})));
    ix.apply_slice(&slice("reviews-a", "1", serde_json::json!([ep("10.1.0.1", true, false, None)])));
    let eps = ix.endpoints(HOST, NS, 9080, None);
    assert_eq!(eps[0].service_account, "spiffe://cluster.local/ns/bookinfo/sa/bookinfo-reviews");
}

#[test]
fn node_labels_give_the_locality_unless_the_pod_sets_one() {
    let mut ix = index();
    ix.apply_service(&reviews("1"));
    ix.apply_slice(&slice(
        "reviews-a",
        "1",
        serde_json::json!([ep("10.1.0.1", true, false, Some("a")), ep("10.1.0.2", true, false, Some("b"))]),
    ));
    ix.apply_pod(&pod("a", "1", "10.1.0.1", "n1", serde_json::json!({})));
    ix.apply_pod(&pod("b", "1", "10.1.0.2", "n1", serde_json::json!({"istio-locality": "eu.west.b1"})));
    let localities = |ix: &KubeIndex| -> Vec<String> {
        ix.endpoints(HOST, NS, 9080, None).iter().map(|e| e.locality.label.clone()).collect()
    };
    assert_eq!(localities(&ix), ["", "eu/west/b1"], "node n1 not known yet");
    // The node arrives: the endpoints on it get `region/zone/subzone`; a node change is endpoint-only.
    let events = ix.apply_node("n1", "1", node_labels("us-east1", "us-east1-b"));
    assert_eq!(
        show(&events),
        [format!("endpoints incremental {HOST} [10.1.0.1:9080 Healthy, 10.1.0.2:9080 Healthy]")]
    );
    assert_eq!(localities(&ix), ["us-east1/us-east1-b/", "eu/west/b1"]);
    let a = &ix.endpoints(HOST, NS, 9080, None)[0];
    assert_eq!(a.labels.get("topology.kubernetes.io/zone").map(String::as_str), Some("us-east1-b"));
    assert_eq!(a.labels.get("kubernetes.io/hostname").map(String::as_str), Some("n1"));
    assert_eq!(a.locality.cluster_id, "Kubernetes");
    // Same labels at a new resource version: nothing.
    assert!(ix.apply_node("n1", "2", node_labels("us-east1", "us-east1-b")).is_empty());
    // The node moves zone.
    ix.apply_node("n1", "3", node_labels("us-east1", "us-east1-c"));
    assert_eq!(localities(&ix), ["us-east1/us-east1-c/", "eu/west/b1"]);
    // The node goes away: back to no locality.
    ix.delete_node("n1");
    assert_eq!(localities(&ix), ["", "eu/west/b1"]);
}

#[test]
fn an_address_in_several_slices_is_one_endpoint_from_the_first_slice_by_name() {
    let mut ix = index();
    ix.apply_service(&reviews("1"));
    // A pod moving between slices: listed ready in reviews-a, not ready in reviews-b.
    ix.apply_slice(&slice(
        "reviews-b",
        "1",
        serde_json::json!([ep("10.1.0.1", false, true, None), ep("10.1.0.2", true, false, None)]),
    ));
    ix.apply_slice(&slice("reviews-a", "1", serde_json::json!([ep("10.1.0.1", true, false, None)])));
    let got: Vec<(String, HealthStatus)> = ix
        .endpoints(HOST, NS, 9080, None)
        .iter()
        .map(|e| (e.first_address().to_string(), e.health_status))
        .collect();
    assert_eq!(
        got,
        [("10.1.0.1".to_string(), HealthStatus::Healthy), ("10.1.0.2".to_string(), HealthStatus::Healthy)]
    );
    // The same IP at another endpoint port (host-network pods) stays a separate endpoint.
    let host_network: Arc<EndpointSlice> = Arc::new(object(serde_json::json!({
        "metadata": {"name": "reviews-c", "namespace": NS, "resourceVersion": "1",
                     "labels": {"kubernetes.io/service-name": "reviews"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 9081}],
        "endpoints": [{"addresses": ["10.1.0.1"]}],
    })));
    ix.apply_slice(&host_network);
    let got: Vec<String> = ix
        .endpoints(HOST, NS, 9080, None)
        .iter()
        .map(|e| format!("{}:{}", e.first_address(), e.endpoint_port))
        .collect();
    assert_eq!(got, ["10.1.0.1:9080", "10.1.0.2:9080", "10.1.0.1:9081"]);
}

#[test]
fn a_headless_service_is_passthrough_and_pushes_fully_for_non_http_ports() {
    let mut ix = index();
    let db = |rv: &str, port: serde_json::Value| {
        service(rv, serde_json::json!({"clusterIP": "None", "selector": {"app": "db"}, "ports": [port]}))
    };
    ix.apply_service(&db("1", serde_json::json!({"name": "tcp-db", "port": 9080})));
    let svc = ix.get_service(HOST, NS).unwrap();
    assert_eq!(svc.resolution, Resolution::Passthrough);
    assert!(svc.addresses.is_empty(), "{:?}", svc.addresses);
    ix.apply_slice(&slice("reviews-a", "1", serde_json::json!([ep("10.1.0.1", true, false, None)])));
    // Istio pushes headless services with a non-HTTP port fully (per-endpoint listeners), even for
    // an endpoint-only change.
    let events = ix.apply_slice(&slice(
        "reviews-a",
        "2",
        serde_json::json!([ep("10.1.0.1", true, false, None), ep("10.1.0.2", true, false, None)]),
    ));
    assert_eq!(
        show(&events),
        [format!("endpoints full {HOST} [10.1.0.1:9080 Healthy, 10.1.0.2:9080 Healthy]")]
    );
    // With only HTTP ports the endpoint change is incremental again.
    ix.apply_service(&db("2", serde_json::json!({"name": "http", "port": 9080})));
    let events =
        ix.apply_slice(&slice("reviews-a", "3", serde_json::json!([ep("10.1.0.1", true, false, None)])));
    assert_eq!(show(&events), [format!("endpoints incremental {HOST} [10.1.0.1:9080 Healthy]")]);
}

#[test]
fn an_external_name_service_is_an_alias_of_its_external_name() {
    let mut ix = index();
    let ext = service(
        "1",
        serde_json::json!({"type": "ExternalName", "externalName": "db.example.com",
                           "ports": [{"name": "tcp", "port": 5432}]}),
    );
    assert_eq!(show(&ix.apply_service(&ext)), [format!("service add {HOST}")]);
    let svc = ix.get_service(HOST, NS).unwrap();
    assert_eq!(
        (svc.resolution, svc.mesh_external, svc.external_name.as_deref()),
        (Resolution::Alias, true, Some("db.example.com"))
    );
    assert_eq!(svc.destination_host(), "db.example.com");
    // No endpoints at the external name: an alias has no cluster to put them in.
    assert!(ix.endpoints(HOST, NS, 5432, None).is_empty());
    // Switching to a ClusterIP Service makes it concrete again.
    let plain =
        service("2", serde_json::json!({"clusterIP": "10.0.0.9", "ports": [{"name": "tcp", "port": 5432}]}));
    assert_eq!(show(&ix.apply_service(&plain)), [format!("service update {HOST}")]);
    let svc = ix.get_service(HOST, NS).unwrap();
    assert_eq!((svc.resolution, svc.external_name.as_deref()), (Resolution::ClientSideLb, None));
}

#[test]
fn a_proxy_without_a_pod_is_matched_by_its_labels_and_namespace() {
    let mut ix = index();
    ix.apply_service(&reviews("1"));
    ix.apply_service(&service_meta(
        serde_json::json!({"name": "named", "namespace": NS, "resourceVersion": "1"}),
        serde_json::json!({"clusterIP": "10.0.0.11", "selector": {"app": "reviews"},
            "ports": [{"name": "http", "port": 80, "targetPort": "web"}]}),
    ));
    ix.apply_service(&service_meta(
        serde_json::json!({"name": "reviews", "namespace": "other", "resourceVersion": "1"}),
        serde_json::json!({"clusterIP": "10.0.0.12", "selector": {"app": "reviews"},
            "ports": [{"name": "http", "port": 9080}]}),
    ));
    let labels = |pairs: &[(&str, &str)]| -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let show = |targets: Vec<ServiceInstance>| -> Vec<(String, u32, u32, String)> {
        targets
            .iter()
            .map(|t| {
                let e = &t.endpoint;
                (
                    t.service.hostname.clone(),
                    t.service_port.port,
                    e.endpoint_port,
                    e.first_address().to_string(),
                )
            })
            .collect()
    };
    let ips = ["10.1.0.9".to_string()];
    let proxy_labels = labels(&[("app", "reviews"), ("version", "v1")]);
    // The selecting Service of the proxy's namespace, at its targetPort; the named targetPort (no pod to
    // read it from) and the other namespace's Service are left out.
    assert_eq!(
        show(ix.proxy_service_targets(&ips, NS, &proxy_labels)),
        [(HOST.to_string(), 9080, 9080, "10.1.0.9".to_string())]
    );
    assert!(ix.proxy_service_targets(&ips, NS, &Labels::new()).is_empty(), "no labels, nothing selected");
    assert!(ix.proxy_service_targets(&ips, NS, &labels(&[("app", "ratings")])).is_empty());
    assert!(ix.proxy_instances(&ips, Some(NS)).is_empty(), "without the labels: no pod, no endpoints");
    // Once a pod is at the IP, its labels decide, not the proxy's.
    ix.apply_pod(&pod("ratings-1", "1", "10.1.0.9", "n1", serde_json::json!({"app": "ratings"})));
    assert!(ix.proxy_service_targets(&ips, NS, &proxy_labels).is_empty());
}

#[test]
fn a_namespace_network_label_reaches_its_endpoints() {
    let mut ix = index();
    ix.apply_service(&reviews("1"));
    ix.apply_slice(&slice("reviews-a", "1", serde_json::json!([ep("10.1.0.1", true, false, None)])));
    let network: Labels = [("topology.istio.io/network".to_string(), "net-1".to_string())].into();
    let events = ix.apply_namespace(NS, "1", network.clone());
    assert_eq!(show(&events), [format!("endpoints incremental {HOST} [10.1.0.1:9080 Healthy]")]);
    assert_eq!(ix.endpoints(HOST, NS, 9080, None)[0].network, "net-1");
    // Another label, same network: nothing.
    let mut more = network;
    more.insert("team".into(), "a".into());
    assert!(ix.apply_namespace(NS, "2", more).is_empty());
}
