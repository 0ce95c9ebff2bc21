//! `meshpilot discovery --kubeconfig` (the real binary) over two real kube-apiservers joined by a
//! remote Secret (docs/MULTICLUSTER.md): one Service `echo` with an endpoint in each cluster, one
//! real Envoy sidecar whose requests reach both; the Secret deleted → only the config cluster's.
//!
//! Needs Envoy (scripts/install-envoy.sh) and the kube test env (scripts/kube-testenv.sh build).

use crate::process;

use std::{collections::BTreeSet, ffi::OsStr, net::SocketAddr, time::Duration};

use kube_source::testenv::TestEnv;
use meshpilot_testing::{
    AdsApi, Bootstrap, EchoOptions, EchoServer, Envoy, free_port, get, http_get, wait_for,
};
use process::{HOST, Meshpilot, NS, Ports, wait_synced};
use serde_json::Value as Json;

/// A non-loopback IPv4 address of this machine (the API server refuses loopback endpoints).
fn host_ip() -> std::net::Ipv4Addr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    socket.connect("198.51.100.1:9").expect("a default route (for a non-loopback host address)");
    match socket.local_addr().unwrap().ip() {
        std::net::IpAddr::V4(ip) if !ip.is_loopback() => ip,
        other => panic!("no non-loopback IPv4 address (got {other})"),
    }
}

/// Service `echo` (port `svc_port`, HTTP) and its EndpointSlice with one endpoint at `upstream`.
fn echo_in_cluster(svc_port: u16, upstream: SocketAddr, slice: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: echo, namespace: {NS}}}\nspec:\n  selector: {{app: echo}}\n  \
         ports: [{{name: http, port: {svc_port}, targetPort: http}}]\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {slice}, namespace: {NS}, \
         labels: {{kubernetes.io/service-name: echo}}}}\naddressType: IPv4\n\
         ports: [{{name: http, port: {}}}]\nendpoints: [{{addresses: [\"{}\"], conditions: {{ready: true}}}}]\n",
        upstream.port(),
        upstream.ip()
    )
}

/// The remote Secret for cluster `id` (istioctl's shape: label, annotation, one kubeconfig key).
pub(super) fn remote_secret(id: &str, kubeconfig: &str) -> String {
    let indented: String = kubeconfig.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: istio-remote-secret-{id}\n  namespace: istio-system\n  \
         labels: {{istio/multiCluster: \"true\"}}\n  annotations: {{networking.istio.io/cluster: {id}}}\n\
         stringData:\n  {id}: |\n{indented}"
    )
}

/// The bodies of `n` requests to the echo service through the sidecar's listener on `port`.
async fn answers(port: u16, n: usize) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for _ in 0..n {
        if let Ok((200, body)) = get(SocketAddr::from(([127, 0, 0, 1], port)), HOST, "/", &[]).await {
            out.insert(body.trim().to_string());
        }
    }
    out
}

async fn debug_json(mp: &Meshpilot, path: &str) -> Option<Json> {
    let (status, body) = http_get(mp.ports.http, path, &[]).await.ok()?;
    (status == 200).then(|| serde_json::from_str(&body).ok()).flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_envoy_reaches_a_services_endpoints_in_two_clusters_until_the_secret_goes() {
    let a = TestEnv::start().expect("kube test environment (scripts/kube-testenv.sh build)");
    let b = TestEnv::start().expect("a second kube-apiserver");
    let ip = host_ip();
    let options = EchoOptions { ip: ip.into(), ..EchoOptions::default() };
    let echo_a = EchoServer::start_with("echo-a", options.clone()).await.unwrap();
    let echo_b = EchoServer::start_with("echo-b", options).await.unwrap();
    let svc_port = free_port();
    a.kubectl_apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: istio-system}\n").unwrap();
    a.kubectl_apply(&echo_in_cluster(svc_port, echo_a.addr, "echo-a")).unwrap();
    b.kubectl_apply(&echo_in_cluster(svc_port, echo_b.addr, "echo-b")).unwrap();
    a.kubectl_apply(&remote_secret("cluster-b", &std::fs::read_to_string(b.kubeconfig()).unwrap())).unwrap();

    let work = tempfile::tempdir().unwrap();
    let kubeconfig = a.kubeconfig();
    let args = [
        OsStr::new("--kubeconfig"),
        kubeconfig.as_os_str(),
        OsStr::new("--clusterID"),
        OsStr::new("cluster-a"),
    ];
    let mp = Meshpilot::start_with_env(
        &args,
        &[("POD_NAMESPACE", "istio-system")],
        Ports::free(),
        work.path().join("meshpilot.log"),
    );
    let _sidecar = Envoy::start(&Bootstrap::sidecar("client", mp.ports.grpc, AdsApi::Delta)).await.unwrap();
    wait_synced(&mp, &["client.test"]).await;

    // Requests through the one sidecar reach the endpoint of each cluster.
    let both: BTreeSet<String> = ["echo-a", "echo-b"].map(String::from).into();
    wait_for("answers from both clusters' endpoints", Duration::from_secs(60), async || {
        (answers(svc_port, 20).await == both).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\nmeshpilot log:\n{}", mp.log_text()));

    // istiod's /debug/clusterz: the config cluster, then the remote one with its Secret.
    let expected = serde_json::json!([
        {"id": "cluster-a", "secretName": "", "syncStatus": "synced"},
        {"id": "cluster-b", "secretName": "istio-system/istio-remote-secret-cluster-b", "syncStatus": "synced"},
    ]);
    let clusterz = wait_for("both clusters synced in /debug/clusterz", Duration::from_secs(60), async || {
        debug_json(&mp, "/debug/clusterz").await.filter(|c| *c == expected)
    })
    .await;
    assert_eq!(clusterz.ok(), Some(expected), "meshpilot log:\n{}", mp.log_text());
    // Each endpoint in its cluster's shard.
    let endpointz = debug_json(&mp, "/debug/endpointz").await.unwrap();
    let shards = &endpointz[HOST][NS]["Shards"];
    let addresses = |shard: &str| -> Vec<String> {
        shards[shard]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["Addresses"][0].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(addresses("Kubernetes/cluster-a"), [ip.to_string()]);
    assert_eq!(addresses("Kubernetes/cluster-b"), [ip.to_string()]);
    assert_eq!(mp.metric("istiod_managed_clusters").await, Some(2.0), "1 local + 1 remote");

    // The Secret deleted: only the config cluster's endpoint is left.
    a.kubectl(&["-n", "istio-system", "delete", "secret", "istio-remote-secret-cluster-b"]).unwrap();
    let only_a: BTreeSet<String> = ["echo-a"].map(String::from).into();
    wait_for("answers from the config cluster only", Duration::from_secs(60), async || {
        (answers(svc_port, 20).await == only_a).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\nmeshpilot log:\n{}", mp.log_text()));
    let clusterz = debug_json(&mp, "/debug/clusterz").await.unwrap();
    assert_eq!(clusterz.as_array().map(Vec::len), Some(1), "{clusterz}");
}
