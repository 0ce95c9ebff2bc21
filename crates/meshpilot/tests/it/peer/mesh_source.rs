//! The mesh config from the cluster, as istiod finds it when `./etc/istio/config/mesh` does not exist
//! (Istio's chart mounts no mesh file): the ConfigMap `istio` in `POD_NAMESPACE`, key `mesh`,
//! watched. A change reaches an ADS client as a new CDS version (mesh `connectTimeout` is every
//! cluster's `connect_timeout`); a broken one is refused (log, `meshpilot_mesh_config_errors`) and the
//! last good one stays. And the cluster reached the way a pod reaches it: no `--kubeconfig`,
//! `KUBECONFIG` naming a missing file (Istio's chart), the service account's token and CA under
//! `/var/run/secrets/kubernetes.io/serviceaccount` (in a private mount namespace: nothing is left on
//! the host).

use std::{
    ffi::OsStr,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use envoy_types::pb::envoy::{config::cluster::v3::Cluster, service::discovery::v3::DiscoveryResponse};
use futures::StreamExt;
use kube_source::testenv::TestEnv;
use meshpilot_testing::wait::wait_for;
use prost::Message;
use serde_json::json;

use crate::cds_client::CdsClient;
use crate::process::{Meshpilot, Ports};
use crate::webhook_support::{Process, counter};

/// The ConfigMap `istio` of `namespace` with `mesh` as its `mesh` key.
fn mesh_configmap(namespace: &str, mesh: &str) -> String {
    serde_json::to_string(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio", "namespace": namespace},
        "data": {"mesh": mesh},
    }))
    .unwrap()
}

impl CdsClient {
    /// ACKs `response` and reads responses until one gives PassthroughCluster `seconds` of connect
    /// timeout; returns its version.
    async fn until_connect_timeout(
        &mut self,
        mut response: DiscoveryResponse,
        seconds: i64,
        log: &dyn Fn() -> String,
    ) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            self.ack(&response);
            if passthrough_connect_timeout(&response) == Some(seconds) {
                return response.version_info;
            }
            response = match tokio::time::timeout_at(deadline, self.responses.next()).await {
                Ok(Some(Ok(r))) => r,
                other => panic!("no CDS version with connect_timeout {seconds}s: {other:?}\n{}", log()),
            };
        }
    }
}

/// The `connect_timeout` seconds of PassthroughCluster in a CDS response.
fn passthrough_connect_timeout(response: &DiscoveryResponse) -> Option<i64> {
    response
        .resources
        .iter()
        .filter_map(|any| Cluster::decode(any.value.as_slice()).ok())
        .find(|c| c.name == "PassthroughCluster")
        .and_then(|c| c.connect_timeout)
        .map(|d| d.seconds)
}

fn log_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mesh_configmap_is_read_watched_pushed_and_a_broken_one_keeps_the_last_good() {
    const NS: &str = "mesh-source-cm";
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", NS]);
    env.kubectl_apply(&mesh_configmap(NS, "connectTimeout: 7s\n")).unwrap();

    // No --meshConfig and no ./etc/istio/config/mesh in the working directory: the ConfigMap is the
    // source (POD_NAMESPACE names where it is).
    let work = tempfile::tempdir().unwrap();
    let log = work.path().join("meshpilot.log");
    let ports = Ports::free();
    let kubeconfig = env.kubeconfig();
    let args: [&OsStr; 2] = [OsStr::new("--kubeconfig"), kubeconfig.as_os_str()];
    let mp =
        Meshpilot::start_with_env(&args, &[("POD_NAMESPACE", NS), ("RUST_LOG", "info")], ports, log.clone());
    let logs = || log_of(&log);
    let (mut client, first) = CdsClient::connect(mp.ports.grpc, "app", "app", &logs).await;
    let v7 = client.until_connect_timeout(first, 7, &logs).await;

    // A change: a new CDS version carries it.
    env.kubectl_apply(&mesh_configmap(NS, "connectTimeout: 9s\n")).unwrap();
    let next = client.responses.next().await.unwrap().unwrap();
    let v9 = client.until_connect_timeout(next, 9, &logs).await;
    assert_ne!(v7, v9);

    // A broken one: refused, counted, said why; the last good one stays.
    env.kubectl_apply(&mesh_configmap(NS, "connectTimeout: [9s\n")).unwrap();
    let monitoring = mp.ports.monitoring.port();
    wait_for("the broken mesh refused", Duration::from_secs(60), async || {
        let errors = tokio::task::spawn_blocking(move || counter(monitoring, "meshpilot_mesh_config_errors"))
            .await
            .ok()?;
        (errors >= 1.0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    let text = logs();
    let line = text
        .lines()
        .find(|l| l.contains("mesh config not applied"))
        .unwrap_or_else(|| panic!("no refusal logged:\n{text}"));
    assert!(line.contains(&format!("configmap:{NS}/istio:mesh")) && line.contains("line"), "{line}");

    // Fixed: applied and pushed.
    env.kubectl_apply(&mesh_configmap(NS, "connectTimeout: 11s\n")).unwrap();
    let next = client.responses.next().await.unwrap().unwrap();
    client.until_connect_timeout(next, 11, &logs).await;
    let http = mp.ports.http;
    let status = tokio::task::spawn_blocking(move || {
        meshpilot_testing::http::request_blocking(http, "localhost", "/debug/configstatusz", &[]).unwrap()
    })
    .await
    .unwrap();
    let status: serde_json::Value = serde_json::from_str(&status.body).unwrap();
    assert_eq!(status["mesh"]["meshConfig"]["errors"], 1, "{status}");
    assert_eq!(status["mesh"]["meshConfig"]["lastError"], serde_json::Value::Null, "{status}");
    assert_eq!(status["mesh"]["meshConfig"]["inForce"]["connectTimeout"], "11s", "{status}");
    drop(mp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_cluster_credentials_reach_the_cluster_as_in_a_pod() {
    const NS: &str = "mesh-source-pod";
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", NS]);
    env.kubectl_apply(&mesh_configmap(NS, "connectTimeout: 13s\n")).unwrap();

    // The service account's files: the admin token, the API server's CA, the namespace.
    let work = tempfile::tempdir().unwrap();
    let sa = work.path().join("serviceaccount");
    std::fs::create_dir(&sa).unwrap();
    // A projected token file holds the token alone, no newline.
    let token = std::fs::read_to_string(env.dir().join("admin.token")).unwrap();
    std::fs::write(sa.join("token"), token.trim()).unwrap();
    std::fs::copy(env.dir().join("pki/ca.crt"), sa.join("ca.crt")).unwrap();
    std::fs::write(sa.join("namespace"), NS).unwrap();
    let port = std::fs::read_to_string(env.dir().join("apiserver.port")).unwrap().trim().to_string();

    // A private mount namespace: a tmpfs over /run (/var/run) holds the service account's directory,
    // seen by meshpilot only; the process is meshpilot itself (exec), stopped by the test.
    let ports = Ports::free();
    let log = work.path().join("meshpilot.log");
    let script = "mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && \
                  cp \"$SA\"/token \"$SA\"/ca.crt \"$SA\"/namespace /run/secrets/kubernetes.io/serviceaccount/ && \
                  exec \"$BIN\" discovery \"$@\"";
    let child = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
        .args(["--grpcAddr", &ports.grpc.to_string(), "--httpAddr", &ports.http.to_string()])
        .args(["--monitoringAddr", &ports.monitoring.to_string(), "--secureGRPCAddr=", "--httpsAddr="])
        .env("SA", &sa)
        .env("BIN", env!("CARGO_BIN_EXE_meshpilot"))
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", &port)
        .env("KUBECONFIG", "/var/run/secrets/remote/config")
        .env("POD_NAMESPACE", NS)
        .env("POD_NAME", "meshpilot-in-cluster")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let process = Process(child);
    let logs = || log_of(&log);
    let (mut client, first) = CdsClient::connect(ports.grpc, "app", "app", &logs).await;
    client.until_connect_timeout(first, 13, &logs).await;
    let text = logs();
    assert!(text.contains("in-cluster service account (127.0.0.1:"), "the access chosen is logged:\n{text}");
    drop(process);
}
