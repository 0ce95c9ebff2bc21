//! Invalid objects in `/debug/configstatusz` (`invalidObjects`): an invalid VirtualService created in
//! a real kube-apiserver (no validating webhook in this test binary's API server) is listed with its
//! resourceVersion, field path and reason, and disappears once fixed; a bad file's object is listed in
//! the same shape.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use kube_source::testenv::TestEnv;
use meshpilot_testing::{free_port, http::request_blocking, wait::wait_for_blocking};
use serde_json::Value;

/// Kills the child on drop.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn virtual_service(weight: i64) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: split, namespace: status-invalid}}\n\
         spec:\n  hosts: [reviews]\n  http:\n  - route:\n    - destination: {{host: reviews, subset: v1}}\n      weight: {weight}\n\
         \x20   - destination: {{host: reviews, subset: v2}}\n      weight: {}\n",
        100 - weight
    )
}

/// The `invalidObjects` of configstatusz (`None` while the server does not answer).
fn invalid_objects(port: u16) -> Option<Vec<Value>> {
    let r = request_blocking(([127, 0, 0, 1], port).into(), "localhost", "/debug/configstatusz", &[]).ok()?;
    let value: Value = serde_json::from_str(&r.body).ok()?;
    value["invalidObjects"].as_array().cloned()
}

fn wait_for<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    wait_for_blocking(what, Duration::from_secs(60), check).unwrap()
}

#[test]
fn invalid_cluster_and_file_objects_are_listed_until_fixed() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", "status-invalid"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.yaml"),
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: bad-dr, namespace: files}\n\
         spec:\n  host: reviews\n  trafficPolicy:\n    connectionPool:\n      tcp: {maxConnections: -1}\n",
    )
    .unwrap();
    let (grpc, http, mon) = (free_port(), free_port(), free_port());
    let _server = Process(
        Command::new(env!("CARGO_BIN_EXE_meshpilot"))
            .args(["discovery", "--kubeconfig"])
            .arg(env.kubeconfig())
            .arg("--config-dir")
            .arg(dir.path())
            .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
            .args(["--http-addr", &format!("127.0.0.1:{http}")])
            .args(["--monitoring-addr", &format!("127.0.0.1:{mon}")])
            .args(["--secureGRPCAddr=", "--httpsAddr="])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    env.kubectl_apply(&virtual_service(-5)).unwrap();
    let version = env
        .kubectl(&[
            "get",
            "virtualservice",
            "split",
            "-n",
            "status-invalid",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .unwrap();
    let entry = wait_for("the invalid VirtualService in configstatusz", || {
        invalid_objects(http)?.into_iter().find(|o| o["kind"] == "VirtualService" && o["name"] == "split")
    });
    assert_eq!(entry["namespace"], "status-invalid");
    assert_eq!(entry["resourceVersion"], version.as_str());
    assert_eq!(entry["keptPrevious"], false);
    assert!(entry["source"].as_str().unwrap().starts_with("kubernetes:"), "{entry}");
    let findings = entry["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["path"] == "spec.http[0].route[0].weight"
            && !f["message"].as_str().unwrap_or_default().is_empty()),
        "{entry}"
    );

    // The bad file's object, in the same shape.
    let all = invalid_objects(http).unwrap();
    let file = all.iter().find(|o| o["name"] == "bad-dr").unwrap_or_else(|| panic!("{all:?}"));
    assert_eq!(file["kind"], "DestinationRule");
    assert_eq!(file["namespace"], "files");
    assert!(file["resourceVersion"].is_null());
    assert!(file["source"].as_str().unwrap().contains("bad.yaml:"), "{file}");
    assert!(
        file["findings"].as_array().unwrap().iter().any(|f| f["path"]
            .as_str()
            .unwrap_or_default()
            .starts_with("spec.trafficPolicy.connectionPool.tcp.maxConnections")),
        "{file}"
    );

    // Fixed: the entry goes away.
    env.kubectl_apply(&virtual_service(30)).unwrap();
    wait_for("the fixed VirtualService gone from invalidObjects", || {
        let list = invalid_objects(http)?;
        (!list.iter().any(|o| o["kind"] == "VirtualService" && o["name"] == "split")).then_some(())
    });
    env.kubectl(&["delete", "virtualservice", "split", "-n", "status-invalid"]).unwrap();
}
