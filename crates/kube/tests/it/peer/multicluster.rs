//! Remote clusters from Secrets against two real kube-apiservers: the config cluster holds the
//! `istio/multiCluster=true` Secret, the remote one the Service's other endpoints. Adds, endpoint
//! changes, a kubeconfig rotation, an API-server restart, refused and unreachable clusters, removal.

use crate::support;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use meshpilot_kube::{
    KubeRegistry, KubeRegistryOptions, Multicluster, MulticlusterOptions,
    identity::KubeTokenReviewer,
    multicluster::{ClusterTokenReviewer, MULTICLUSTER_SECRET_LABEL, kubeconfig_from_bytes},
    testenv::TestEnv,
};
use meshpilot_registry::AggregateRegistry;
use model::{
    Event,
    service::{ClusterSyncStatus, RegistryEvent, ServiceController, ServiceDiscovery},
    shutdown_channel,
};
use security::authn::TokenReviewer;
use support::{namespace, slice, slice_endpoint, wait_for};

const NS: &str = "mc-shop";

/// The config cluster's registry and the remote-cluster controller in one aggregate, recording
/// every event.
struct Mesh {
    services: AggregateRegistry,
    remote: Multicluster,
    events: Arc<Mutex<Vec<RegistryEvent>>>,
    _stop: model::ShutdownTrigger,
}

fn fast(cluster_id: &str) -> KubeRegistryOptions {
    KubeRegistryOptions {
        cluster_id: cluster_id.into(),
        namespaces: vec![NS.into()],
        backoff: (Duration::from_millis(100), Duration::from_secs(1)),
        ..KubeRegistryOptions::default()
    }
}

async fn start_mesh(config: &TestEnv, system_namespace: &str, timeout: Duration) -> Mesh {
    let (stop, shutdown) = shutdown_channel();
    let local = KubeRegistry::new(config.client_config().await.unwrap(), fast("cluster-a"));
    tokio::spawn(local.run(shutdown.clone()));
    let remote = Multicluster::new(MulticlusterOptions {
        system_namespace: system_namespace.into(),
        config_cluster_id: "cluster-a".into(),
        registry: fast("ignored"),
        remote_cluster_timeout: timeout,
        client_config: Arc::new(|bytes| Box::pin(kubeconfig_from_bytes(bytes, Default::default()))),
    });
    let client = meshpilot_kube::client::connection(config.client_config().await.unwrap()).unwrap().client;
    tokio::spawn(remote.run(client, shutdown));
    let services = AggregateRegistry::new();
    services.add_registry(Arc::new(local));
    services.add_registry(Arc::new(remote.clone()));
    let events: Arc<Mutex<Vec<RegistryEvent>>> = Arc::default();
    let log = events.clone();
    services.append_event_handler(Arc::new(move |e: &RegistryEvent| log.lock().unwrap().push(e.clone())));
    Mesh { services, remote, events, _stop: stop }
}

/// Writes (creates or updates in place) the remote Secret `name` in `system_namespace` with `data` (cluster id →
/// kubeconfig text).
fn write_secret(env: &TestEnv, system_namespace: &str, name: &str, data: &[(&str, &str)]) {
    let mut manifest = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {system_namespace}\n  labels: \
         {{{MULTICLUSTER_SECRET_LABEL}: \"true\"}}\n  annotations: {{networking.istio.io/cluster: remote}}\nstringData:\n"
    );
    for (id, kubeconfig) in data {
        manifest.push_str(&format!("  {id}: |\n"));
        for line in kubeconfig.lines() {
            manifest.push_str(&format!("    {line}\n"));
        }
    }
    env.kubectl_apply(&manifest).unwrap();
}

fn service(namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: echo, namespace: {namespace}}}\nspec:\n  \
         selector: {{app: echo}}\n  ports: [{{name: http, port: 80, targetPort: 8080}}]\n"
    )
}

const HOST: &str = "echo.mc-shop.svc.cluster.local";

/// `(address, cluster id)` of the echo service's endpoints on port 80, sorted.
fn endpoints(services: &AggregateRegistry) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = services
        .endpoints(HOST, NS, 80, None)
        .iter()
        .map(|e| (e.first_address().to_string(), e.locality.cluster_id.clone()))
        .collect();
    out.sort();
    out
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, c)| ((*a).to_string(), (*c).to_string())).collect()
}

fn kubeconfig_text(env: &TestEnv) -> String {
    std::fs::read_to_string(env.kubeconfig()).unwrap()
}

fn status_of(mesh: &Mesh, id: &str) -> Option<ClusterSyncStatus> {
    mesh.services.clusters().into_iter().find(|c| c.id == id).map(|c| c.sync_status)
}

/// `true` if an event removed cluster-b's endpoints of echo (a delete of its service, or an
/// endpoint update of its shard without any endpoint).
fn cluster_b_lost_endpoints(events: &[RegistryEvent]) -> bool {
    events.iter().any(|e| match e {
        RegistryEvent::Service(s) => {
            s.hostname == HOST && s.shard.cluster == "cluster-b" && s.event == Event::Delete
        }
        RegistryEvent::Endpoints(u) => {
            u.hostname == HOST && u.shard.cluster == "cluster-b" && u.endpoints.is_empty()
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_secret_brings_a_clusters_endpoints_and_takes_them_away() {
    let a = TestEnv::shared_by(file!());
    let b = TestEnv::start().expect("a second kube-apiserver (scripts/kube-testenv.sh build)");
    let system = "mc-system-1";
    for env in [a, &b] {
        namespace(env, NS);
        env.kubectl_apply(&service(NS)).unwrap();
    }
    namespace(a, system);
    a.kubectl_apply(&slice(
        NS,
        "echo-a",
        "echo",
        "{name: http, port: 8080}",
        &[slice_endpoint("10.10.0.1", "", true, false)],
    ))
    .unwrap();
    b.kubectl_apply(&slice(
        NS,
        "echo-b",
        "echo",
        "{name: http, port: 8080}",
        &[slice_endpoint("10.20.0.1", "", true, false)],
    ))
    .unwrap();

    let mesh = start_mesh(a, system, Duration::from_secs(30)).await;
    wait_for("the config cluster's endpoint", || {
        endpoints(&mesh.services) == pairs(&[("10.10.0.1", "cluster-a")])
    })
    .await;
    wait_for("synced with no remote cluster", || mesh.services.has_synced()).await;

    // The Secret adds cluster-b: one service, endpoints of both clusters with their cluster ids.
    write_secret(a, system, "istio-remote-secret-b", &[("cluster-b", &kubeconfig_text(&b))]);
    let both = pairs(&[("10.10.0.1", "cluster-a"), ("10.20.0.1", "cluster-b")]);
    wait_for("endpoints of both clusters", || endpoints(&mesh.services) == both).await;
    assert_eq!(mesh.services.services().iter().filter(|s| s.hostname == HOST).count(), 1);
    // Endpoints can arrive before every watch of the cluster has listed: synced comes after.
    wait_for("cluster-b synced", || status_of(&mesh, "cluster-b") == Some(ClusterSyncStatus::Synced)).await;
    let remote = mesh.remote.clusters();
    assert_eq!(remote.len(), 1);
    assert_eq!(
        (remote[0].id.as_str(), remote[0].secret_name.as_str(), remote[0].sync_status),
        ("cluster-b", "mc-system-1/istio-remote-secret-b", ClusterSyncStatus::Synced)
    );
    let labels = &mesh
        .services
        .endpoints(HOST, NS, 80, None)
        .into_iter()
        .find(|e| e.locality.cluster_id == "cluster-b")
        .unwrap()
        .labels;
    assert_eq!(labels.get("topology.istio.io/cluster").map(String::as_str), Some("cluster-b"));
    assert!(
        mesh.services.warnings().iter().all(|w| !w.message.contains("hidden")),
        "the same Service in two clusters is no conflict: {:?}",
        mesh.services.warnings()
    );

    // A remote proxy's token is reviewed by its own cluster's API server (the `clusterid` it sends),
    // never by the config cluster's; an unknown cluster is an error.
    b.kubectl(&["-n", NS, "create", "serviceaccount", "sleep"]).unwrap();
    let token = b.kubectl(&["-n", NS, "create", "token", "sleep", "--audience", "istio-ca"]).unwrap();
    let token = token.trim();
    let local = meshpilot_kube::client::connection(a.client_config().await.unwrap()).unwrap().client;
    let reviewer =
        ClusterTokenReviewer::new("cluster-a", Arc::new(KubeTokenReviewer::new(local)), mesh.remote.clone());
    let audiences = ["istio-ca".to_string()];
    let in_b = reviewer.review_in_cluster("cluster-b", token, &audiences).await.unwrap();
    assert!(in_b.authenticated, "{in_b:?}");
    assert_eq!(in_b.username, "system:serviceaccount:mc-shop:sleep");
    for config_cluster in ["cluster-a", ""] {
        let in_a = reviewer.review_in_cluster(config_cluster, token, &audiences).await.unwrap();
        assert!(!in_a.authenticated, "cluster-b's token accepted by the config cluster: {in_a:?}");
    }
    let unknown = reviewer.review_in_cluster("cluster-z", token, &audiences).await.unwrap_err();
    assert!(unknown.contains("cluster-z") && unknown.contains("cluster-b"), "{unknown}");

    // A per-cluster component runs against the remote cluster: the root-certificate publisher
    // writes istio-ca-root-cert into its namespaces (a leader of its own, in its istio-system).
    b.kubectl_apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: istio-system}\n").unwrap();
    let root = "-----BEGIN CERTIFICATE-----\nMC-TEST\n-----END CERTIFICATE-----\n";
    mesh.remote.add_component(Arc::new(move |_cluster: &str, client, shutdown| {
        let leader = meshpilot_kube::leader::LeaderElectionOptions {
            identity: "mc-test".into(),
            enabled: false,
            ..Default::default()
        };
        Box::pin(meshpilot_kube::identity::publish_root_cert_while_leading(
            client,
            root.into(),
            leader,
            shutdown,
        ))
    }));
    wait_for("istio-ca-root-cert in the remote cluster", || {
        b.kubectl(&[
            "-n",
            NS,
            "get",
            "configmap",
            "istio-ca-root-cert",
            "-o",
            "jsonpath={.data.root-cert\\.pem}",
        ])
        .is_ok_and(|pem| pem.contains("MC-TEST"))
    })
    .await;

    // A new endpoint in the remote cluster reaches the aggregate.
    b.kubectl_apply(&slice(
        NS,
        "echo-b",
        "echo",
        "{name: http, port: 8080}",
        &[slice_endpoint("10.20.0.1", "", true, false), slice_endpoint("10.20.0.2", "", true, false)],
    ))
    .unwrap();
    let three = pairs(&[("10.10.0.1", "cluster-a"), ("10.20.0.1", "cluster-b"), ("10.20.0.2", "cluster-b")]);
    wait_for("the remote cluster's new endpoint", || endpoints(&mesh.services) == three).await;

    // The remote API server restarts: nothing of it is deleted, and it is followed again after.
    let before = mesh.events.lock().unwrap().len();
    b.stop_apiserver().unwrap();
    b.start_apiserver().unwrap();
    b.kubectl_apply(&slice(
        NS,
        "echo-b",
        "echo",
        "{name: http, port: 8080}",
        &[
            slice_endpoint("10.20.0.1", "", true, false),
            slice_endpoint("10.20.0.2", "", true, false),
            slice_endpoint("10.20.0.3", "", true, false),
        ],
    ))
    .unwrap();
    wait_for("the endpoint added after the restart", || {
        endpoints(&mesh.services).contains(&("10.20.0.3".into(), "cluster-b".into()))
    })
    .await;
    assert!(
        !cluster_b_lost_endpoints(&mesh.events.lock().unwrap()[before..]),
        "a remote API-server restart deleted endpoints: {:?}",
        &mesh.events.lock().unwrap()[before..]
    );

    // A rotated kubeconfig (other bytes, same cluster) swaps the client without losing endpoints:
    // the swap raises an update of the service.
    let before = mesh.events.lock().unwrap().len();
    let rotated = format!("{}\n# rotated\n", kubeconfig_text(&b));
    write_secret(a, system, "istio-remote-secret-b", &[("cluster-b", &rotated)]);
    let swapped = |events: &[RegistryEvent]| {
        events.iter().any(|e| {
            matches!(e, RegistryEvent::Service(s) if s.hostname == HOST && s.shard.cluster == "cluster-b" && s.event == Event::Update)
        })
    };
    wait_for("the rotated client swapped in", || swapped(&mesh.events.lock().unwrap()[before..])).await;
    assert_eq!(endpoints(&mesh.services).len(), 4);
    assert!(!cluster_b_lost_endpoints(&mesh.events.lock().unwrap()[before..]));
    assert_eq!(status_of(&mesh, "cluster-b"), Some(ClusterSyncStatus::Synced));

    // The Secret deleted: cluster-b's endpoints go, cluster-a's stay, the service stays.
    a.kubectl(&["-n", system, "delete", "secret", "istio-remote-secret-b"]).unwrap();
    wait_for("only the config cluster's endpoint", || {
        endpoints(&mesh.services) == pairs(&[("10.10.0.1", "cluster-a")])
    })
    .await;
    assert!(mesh.remote.clusters().is_empty());
    assert!(mesh.services.get_service(HOST, NS).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_ignored_and_unreachable_clusters_never_block_readiness() {
    let a = TestEnv::shared_by(file!());
    let system = "mc-system-2";
    namespace(a, system);
    namespace(a, NS);
    // A closed port: a listener bound then dropped.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let unreachable = kubeconfig_text(a)
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("server:") {
                format!("    server: https://{closed}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    // A kubeconfig whose user runs a command on the control plane's machine: refused.
    let with_exec = kubeconfig_text(a).replace(
        "  user:\n",
        "  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true, interactiveMode: Never}\n",
    );
    assert!(with_exec.contains("exec:"), "{with_exec}");
    write_secret(
        a,
        system,
        "remotes",
        &[
            ("cluster-a", &kubeconfig_text(a)),
            ("broken", "apiVersion: v1\nkind: Config\nclusters: 7\n"),
            ("far", &unreachable),
            ("runs-commands", &with_exec),
        ],
    );
    let mesh = start_mesh(a, system, Duration::from_secs(1)).await;
    wait_for("the unreachable cluster timed out", || {
        status_of(&mesh, "far") == Some(ClusterSyncStatus::Timeout)
    })
    .await;
    assert!(mesh.services.has_synced(), "a timed-out cluster no longer holds readiness back");
    let clusters = mesh.remote.clusters();
    let ids: Vec<&str> = clusters.iter().map(|c| c.id.as_str()).collect();
    assert!(!ids.contains(&"cluster-a"), "the config cluster's id is ignored: {ids:?}");
    let broken = clusters.iter().find(|c| c.id == "broken").expect("the refused cluster is listed");
    assert_eq!(broken.sync_status, ClusterSyncStatus::Closed);
    assert!(broken.error.contains("kubeconfig"), "{}", broken.error);
    let execs = clusters.iter().find(|c| c.id == "runs-commands").expect("the exec kubeconfig is listed");
    assert_eq!(execs.sync_status, ClusterSyncStatus::Closed);
    assert!(execs.error.contains("exec is not allowed"), "{}", execs.error);
    assert_eq!(mesh.remote.cluster_ids(), ["far"]);

    // The Secret gone: so are its clusters, refused ones included.
    a.kubectl(&["-n", system, "delete", "secret", "remotes"]).unwrap();
    wait_for("no remote cluster", || mesh.remote.clusters().is_empty()).await;
}
