//! The Kubernetes service registry against a real kube-apiserver (no kubelet: the tests create
//! Services, EndpointSlices, Pods and Nodes themselves). Conversion facts, endpoint conditions,
//! locality, proxy instances, and which changes raise which notifications.

use crate::support;

use meshpilot_kube::testenv::TestEnv;
use model::{
    Event, Protocol,
    service::{
        EndpointPush, ExportTo, HealthStatus, LABEL_TOPOLOGY_CLUSTER, LABEL_TOPOLOGY_REGION,
        LABEL_TOPOLOGY_ZONE, ProviderId, RegistryEvent, Resolution, ServiceController, ServiceDiscovery,
    },
};
use support::{host_ip, namespace, pod, set_pod_ip, slice, slice_endpoint, start_registry, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_convert_like_istio() {
    let env = TestEnv::shared_by(file!());
    let ns = "kreg-svc";
    namespace(env, ns);
    let running = start_registry(env, &[ns]).await;
    env.kubectl_apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: {ns}, labels: {{app: web}}, \
         annotations: {{networking.istio.io/exportTo: \". , other\"}}}}\nspec:\n  selector: {{app: web}}\n  ports:\n  \
         - {{name: http-web, port: 80, targetPort: 8080}}\n  - {{name: grpc, port: 81, targetPort: grpc}}\n  \
         - {{name: custom, port: 82, appProtocol: http2}}\n  - {{name: mongo, port: 27017}}\n  \
         - {{name: dns, port: 53, protocol: UDP}}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: db, namespace: {ns}}}\nspec:\n  clusterIP: None\n  \
         selector: {{app: db}}\n  ports: [{{name: tcp, port: 5432}}]\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: ext, namespace: {ns}}}\nspec:\n  type: ExternalName\n  \
         externalName: api.example.com\n  ports: [{{name: https, port: 443}}]\n"
    ))
    .unwrap();
    let r = &running.registry;
    let host = |n: &str| format!("{n}.{ns}.svc.cluster.local");
    wait_for("three services", || r.services().iter().filter(|s| s.namespace == ns).count() == 3).await;

    let web = r.get_service(&host("web"), ns).unwrap();
    assert_eq!(web.registry, ProviderId::Kubernetes);
    assert_eq!(
        (web.name.as_str(), web.resolution, web.mesh_external),
        ("web", Resolution::ClientSideLb, false)
    );
    assert_eq!(web.addresses.len(), 1, "the ClusterIP the API server allocated");
    assert!(web.addresses[0].starts_with("10.0."), "{:?}", web.addresses);
    let protocols: Vec<(&str, u32, Protocol)> =
        web.ports.iter().map(|p| (p.name.as_str(), p.port, p.protocol)).collect();
    assert_eq!(
        protocols,
        [
            ("http-web", 80, Protocol::Http),
            ("grpc", 81, Protocol::Grpc),
            ("custom", 82, Protocol::Http2),
            ("mongo", 27017, Protocol::Mongo),
            ("dns", 53, Protocol::Udp),
        ]
    );
    assert_eq!(
        web.export_to.iter().cloned().collect::<Vec<_>>(),
        [ExportTo::Private, ExportTo::Namespace("other".into())]
    );
    assert!(web.visible_to(ns) && web.visible_to("other") && !web.visible_to("third"));
    assert_eq!(web.label_selector.as_ref().unwrap()["app"], "web");
    assert!(web.creation_time.is_some());

    let db = r.get_service(&host("db"), ns).unwrap();
    assert_eq!(db.resolution, Resolution::Passthrough, "headless");
    assert!(db.addresses.is_empty());

    let ext = r.get_service(&host("ext"), ns).unwrap();
    assert_eq!(
        (ext.resolution, ext.mesh_external, ext.external_name.as_deref()),
        (Resolution::Alias, true, Some("api.example.com"))
    );
    assert!(r.endpoints(&host("ext"), ns, 443, None).is_empty(), "an alias has no endpoints of its own");

    // Every new service raised an Add.
    let events = running.events.lock().unwrap().clone();
    for n in ["web", "db", "ext"] {
        assert!(
            events.iter().any(
                |e| matches!(e, RegistryEvent::Service(s) if s.hostname == host(n) && s.event == Event::Add)
            ),
            "{n}: {events:?}"
        );
    }

    // Deleting a service raises a Delete.
    env.kubectl(&["-n", ns, "delete", "service", "ext"]).unwrap();
    wait_for("ext deleted", || r.get_service(&host("ext"), ns).is_none()).await;
    let events = running.events.lock().unwrap().clone();
    assert!(events.iter().any(
        |e| matches!(e, RegistryEvent::Service(s) if s.hostname == host("ext") && s.event == Event::Delete)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_take_pod_identity_node_locality_and_conditions() {
    let env = TestEnv::shared_by(file!());
    let ns = "kreg-eps";
    namespace(env, ns);
    let ip = host_ip().to_string();
    env.kubectl_apply(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: kreg-node-a\n  labels: {topology.kubernetes.io/region: us-east1, \
         topology.kubernetes.io/zone: us-east1-b}\n",
    )
    .unwrap();
    let running = start_registry(env, &[ns]).await;
    let r = &running.registry;
    env.kubectl_apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: app, namespace: {ns}}}\nspec:\n  selector: {{app: app}}\n  \
         ports: [{{name: http, port: 80, targetPort: web}}]\n---\n{}",
        pod(ns, "app-1", "app: app, version: v1", "app-sa", "kreg-node-a", "{name: web, containerPort: 9080}")
    ))
    .unwrap();
    set_pod_ip(env, ns, "app-1", &ip);
    // Ready (pod), not ready, terminating, and one without a targetRef at an unknown address.
    env.kubectl_apply(&slice(
        ns,
        "app-abc",
        "app",
        "{name: http, port: 9080}",
        &[
            slice_endpoint(&ip, "app-1", true, false),
            slice_endpoint("10.1.0.2", "", false, false),
            slice_endpoint("10.1.0.3", "", false, true),
        ],
    ))
    .unwrap();
    let host = format!("app.{ns}.svc.cluster.local");
    wait_for("three endpoints", || r.endpoints(&host, ns, 80, None).len() == 3).await;
    let eps = r.endpoints(&host, ns, 80, None);
    let by_ip = |a: &str| eps.iter().find(|e| e.first_address() == a).unwrap().clone();
    let ready = by_ip(&ip);
    assert_eq!((ready.endpoint_port, ready.service_port_name.as_str()), (9080, "http"));
    assert_eq!(ready.health_status, HealthStatus::Healthy);
    assert_eq!(ready.service_account, format!("spiffe://cluster.local/ns/{ns}/sa/app-sa"));
    assert_eq!(ready.labels["version"], "v1");
    assert_eq!(ready.labels[LABEL_TOPOLOGY_REGION], "us-east1");
    assert_eq!(ready.labels[LABEL_TOPOLOGY_ZONE], "us-east1-b");
    assert_eq!(ready.labels[LABEL_TOPOLOGY_CLUSTER], "Kubernetes");
    assert_eq!(ready.labels["kubernetes.io/hostname"], "kreg-node-a");
    assert_eq!(ready.locality.label, "us-east1/us-east1-b/");
    assert_eq!((ready.namespace.as_str(), ready.workload_name.as_str()), (ns, "app-1"));
    assert_eq!(ready.tls_mode, "disabled");
    // Not ready → unhealthy, terminating → terminating: both kept in the registry; EDS
    // sends the unhealthy one as UNHEALTHY and leaves the terminating one out.
    assert_eq!(by_ip("10.1.0.2").health_status, HealthStatus::Unhealthy);
    assert_eq!(by_ip("10.1.0.3").health_status, HealthStatus::Terminating);
    assert!(by_ip("10.1.0.2").service_account.is_empty());
    // Subsets select by pod labels.
    let v1: model::service::Labels = [("version".to_string(), "v1".to_string())].into();
    assert_eq!(r.endpoints(&host, ns, 80, Some(&v1)).len(), 1);

    // publishNotReadyAddresses: the not-ready (but not terminating) endpoint counts as ready.
    env.kubectl(&[
        "-n",
        ns,
        "patch",
        "service",
        "app",
        "--type=merge",
        "-p",
        "{\"spec\":{\"publishNotReadyAddresses\":true}}",
    ])
    .unwrap();
    wait_for("not-ready published", || {
        r.endpoints(&host, ns, 80, None)
            .iter()
            .any(|e| e.first_address() == "10.1.0.2" && e.health_status == HealthStatus::Healthy)
    })
    .await;
    assert!(
        r.endpoints(&host, ns, 80, None)
            .iter()
            .any(|e| e.first_address() == "10.1.0.3" && e.health_status == HealthStatus::Terminating)
    );

    // The node's labels change: the locality follows.
    env.kubectl(&["label", "node", "kreg-node-a", "--overwrite", "topology.kubernetes.io/zone=us-east1-c"])
        .unwrap();
    wait_for("locality follows the node", || {
        r.endpoints(&host, ns, 80, None).iter().any(|e| e.locality.label == "us-east1/us-east1-c/")
    })
    .await;

    // The pod serves the service at its named container port (sidecar inbound side).
    let instances = r.proxy_instances(std::slice::from_ref(&ip), Some(ns));
    assert_eq!(instances.len(), 1, "{instances:?}");
    assert_eq!(instances[0].service.hostname, host);
    assert_eq!((instances[0].service_port.port, instances[0].endpoint.endpoint_port), (80, 9080));
    assert!(r.proxy_instances(std::slice::from_ref(&ip), Some("other")).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_changes_are_incremental_and_service_changes_are_service_events() {
    let env = TestEnv::shared_by(file!());
    let ns = "kreg-push";
    namespace(env, ns);
    let running = start_registry(env, &[ns]).await;
    let r = &running.registry;
    let host = format!("svc.{ns}.svc.cluster.local");
    env.kubectl_apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: svc, namespace: {ns}}}\nspec:\n  ports: [{{name: http, port: 80}}]\n"
    ))
    .unwrap();
    let endpoints = |n: usize| -> Vec<String> {
        (0..n).map(|i| slice_endpoint(&format!("10.2.0.{}", i + 1), "", true, false)).collect()
    };
    let apply = |n: usize| {
        env.kubectl_apply(&slice(ns, "svc-1", "svc", "{name: http, port: 8080}", &endpoints(n))).unwrap()
    };
    apply(1);
    wait_for("one endpoint", || r.endpoints(&host, ns, 80, None).len() == 1).await;
    for n in [3, 2, 5, 1] {
        apply(n);
        wait_for("scaled", || r.endpoints(&host, ns, 80, None).len() == n).await;
    }
    // A slice that dies: the service has no endpoints (still incremental).
    env.kubectl(&["-n", ns, "delete", "endpointslice", "svc-1"]).unwrap();
    wait_for("no endpoints", || r.endpoints(&host, ns, 80, None).is_empty()).await;

    let events = running.events.lock().unwrap().clone();
    let pushes: Vec<EndpointPush> = events
        .iter()
        .filter_map(|e| match e {
            RegistryEvent::Endpoints(u) if u.hostname == host => Some(u.push),
            _ => None,
        })
        .collect();
    assert_eq!(
        pushes,
        [
            EndpointPush::Full, // the first endpoints of the service (a new shard)
            EndpointPush::Incremental,
            EndpointPush::Incremental,
            EndpointPush::Incremental,
            EndpointPush::Incremental,
            EndpointPush::Incremental,
        ],
        "{events:?}"
    );
    let service_events = |events: &[RegistryEvent]| {
        events.iter().filter(|e| matches!(e, RegistryEvent::Service(s) if s.hostname == host)).count()
    };
    assert_eq!(service_events(&events), 1, "only the Add");

    // A label-only change of the Service is a service change; re-applying it unchanged is nothing.
    env.kubectl(&["-n", ns, "label", "service", "svc", "tier=web"]).unwrap();
    wait_for("service update", || service_events(&running.events.lock().unwrap()) == 2).await;
    env.kubectl(&["-n", ns, "annotate", "service", "svc", "unrelated=1"]).unwrap();
    env.kubectl(&["-n", ns, "label", "service", "svc", "tier=api", "--overwrite"]).unwrap();
    wait_for("second update", || service_events(&running.events.lock().unwrap()) == 3).await;
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_waits_for_its_pod() {
    let env = TestEnv::shared_by(file!());
    let ns = "kreg-late-pod";
    namespace(env, ns);
    let ip = host_ip().to_string();
    let running = start_registry(env, &[ns]).await;
    let r = &running.registry;
    let host = format!("late.{ns}.svc.cluster.local");
    env.kubectl_apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: late, namespace: {ns}}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\n{}",
        slice(ns, "late-1", "late", "{name: http, port: 8080}", &[slice_endpoint(&ip, "late-pod", true, false)])
    ))
    .unwrap();
    wait_for("warning about the missing pod", || !r.warnings().is_empty()).await;
    assert!(r.endpoints(&host, ns, 80, None).is_empty(), "left out until the pod is known");
    assert!(r.warnings()[0].message.contains("late-pod"), "{:?}", r.warnings());
    env.kubectl_apply(&pod(ns, "late-pod", "app: late", "late-sa", "kreg-node-b", "{containerPort: 8080}"))
        .unwrap();
    wait_for("endpoint once the pod arrived", || r.endpoints(&host, ns, 80, None).len() == 1).await;
    assert_eq!(
        r.endpoints(&host, ns, 80, None)[0].service_account,
        format!("spiffe://cluster.local/ns/{ns}/sa/late-sa")
    );
    assert!(r.warnings().is_empty());
}
