//! `meshpilot apply/create/get/delete` and `meshpilot discovery --kubeconfig` against a real
//! kube-apiserver (scripts/kube-testenv.sh, one per test binary; each test uses its own namespace).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output},
    time::Duration,
};

use kube_source::testenv::TestEnv;
use meshpilot_testing::{free_port, http::request_blocking, wait::wait_for_blocking};

fn bookinfo(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/istio-testdata/samples/bookinfo/networking")
        .join(file)
}

fn meshpilot(env: &TestEnv, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_meshpilot"))
        .args(args)
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn get_json(env: &TestEnv, kind: &str, ns: &str) -> serde_json::Value {
    let out = meshpilot(env, &["get", kind, "-n", ns, "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn names(list: &serde_json::Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn apply_get_delete_round_trip_and_invalid_input_applies_nothing() {
    let env = TestEnv::shared_by(file!());
    let ns = "cli-roundtrip";
    let _ = env.kubectl(&["create", "namespace", ns]);
    let dr = bookinfo("destination-rule-all.yaml");
    let vs = bookinfo("virtual-service-reviews-jason-v2-v3.yaml");
    let out = meshpilot(env, &["apply", "-n", ns, "-f", dr.to_str().unwrap(), "-f", vs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("destinationrule.networking.istio.io/reviews created"), "{stdout}");
    assert!(stdout.contains("virtualservice.networking.istio.io/reviews created"), "{stdout}");

    let drs = get_json(env, "dr", ns);
    assert_eq!(names(&drs), ["details", "productpage", "ratings", "reviews"]);
    let vs_obj = meshpilot(env, &["get", "virtualservice", "reviews", "-n", ns, "-o", "yaml"]);
    let yaml = text(&vs_obj.stdout);
    assert!(yaml.contains("kind: VirtualService") && yaml.contains("end-user"), "{yaml}");
    assert!(!yaml.contains("managedFields"), "{yaml}");
    let table = text(&meshpilot(env, &["get", "vs", "-n", ns]).stdout);
    assert!(table.starts_with("NAME") && table.contains("reviews"), "{table}");

    // Re-applying the same files changes nothing.
    let out = meshpilot(env, &["apply", "-n", ns, "-f", dr.to_str().unwrap()]);
    assert!(text(&out.stdout).contains("destinationrule.networking.istio.io/reviews unchanged"));

    // One invalid document: errors name file, line and field; nothing of the input is applied.
    let dir = tempfile::tempdir().unwrap();
    let mixed = dir.path().join("mixed.yaml");
    std::fs::write(
        &mixed,
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: fine}\nspec:\n  hosts: [ratings]\n  http:\n  - route:\n    - destination: {host: ratings}\n---\n\
         apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: broken}\nspec:\n  hosts: [\"bad host!\"]\n  http:\n  - route:\n    - destination: {host: ratings}\n",
    )
    .unwrap();
    let out = meshpilot(env, &["apply", "-n", ns, "-f", mixed.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("mixed.yaml:14") && stderr.contains("spec.hosts[0]"), "{stderr}");
    assert!(stderr.contains("nothing was applied"), "{stderr}");
    assert_eq!(names(&get_json(env, "vs", ns)), ["reviews"], "the valid document was not applied either");

    // delete -f and delete KIND NAME.
    let out = meshpilot(env, &["delete", "-n", ns, "-f", dr.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("destinationrule.networking.istio.io \"reviews\" deleted"));
    assert!(names(&get_json(env, "dr", ns)).is_empty());
    let out = meshpilot(env, &["delete", "vs", "reviews", "-n", ns]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = meshpilot(env, &["delete", "vs", "reviews", "-n", ns]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not found"));
    let out = meshpilot(env, &["delete", "vs", "reviews", "-n", ns, "--ignore-not-found"]);
    assert!(out.status.success());
}

#[test]
fn conflicts_and_rbac_denials_are_explained() {
    let env = TestEnv::shared_by(file!());
    let ns = "cli-errors";
    let _ = env.kubectl(&["create", "namespace", ns]);
    let dr = bookinfo("destination-rule-reviews.yaml");
    let out = meshpilot(env, &["create", "-n", ns, "-f", dr.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = meshpilot(env, &["create", "-n", ns, "-f", dr.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("already exists; use `meshpilot apply -f`"), "{}", text(&out.stderr));

    // A copy read earlier carries a resourceVersion that a later change makes stale.
    let old = meshpilot(env, &["get", "dr", "reviews", "-n", ns, "-o", "yaml"]);
    let dir = tempfile::tempdir().unwrap();
    let old_file = dir.path().join("old.yaml");
    std::fs::write(&old_file, &old.stdout).unwrap();
    let changed = dir.path().join("changed.yaml");
    std::fs::write(
        &changed,
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: reviews, namespace: {ns}}}\n\
             spec:\n  host: reviews\n  trafficPolicy: {{loadBalancer: {{simple: RANDOM}}}}\n"
        ),
    )
    .unwrap();
    let out = meshpilot(env, &["apply", "-f", changed.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = meshpilot(env, &["apply", "-f", old_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("409 Conflict") && stderr.contains("resourceVersion is stale"), "{stderr}");

    // A user without RBAC grants.
    let out = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
        .args(["apply", "-n", ns, "-f", dr.to_str().unwrap(), "--kubeconfig"])
        .arg(env.viewer_kubeconfig())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("403 Forbidden") && stderr.contains("RBAC denied it"), "{stderr}");
    assert!(stderr.contains("meshpilot-viewer"), "{stderr}");
}

/// Kills the child on drop.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GET `path` from 127.0.0.1:`port`; the body, or `None` when the server does not answer 200 yet.
fn http_get(port: u16, path: &str) -> Option<String> {
    let r = request_blocking(([127, 0, 0, 1], port).into(), "localhost", path, &[]).ok()?;
    (r.status == 200).then_some(r.body)
}

/// Waits (60 s at most: a limit, not a timing assertion) until `check` holds.
fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    wait_for_blocking(what, Duration::from_secs(60), || check().then_some(())).unwrap();
}

#[test]
fn discovery_serves_config_from_the_cluster_and_config_dirs_combined() {
    let env = TestEnv::shared_by(file!());
    let ns = "cli-discovery";
    let _ = env.kubectl(&["create", "namespace", ns]);
    let dr = bookinfo("destination-rule-reviews.yaml");
    assert!(meshpilot(env, &["apply", "-n", ns, "-f", dr.to_str().unwrap()]).status.success());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gw.yaml"),
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: from-file, namespace: files}\n\
         spec:\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n",
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
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The objects in force, as (kind, namespace, name).
    let configz = || -> Vec<(String, String, String)> {
        let body = http_get(http, "/debug/configz").unwrap_or_default();
        let value: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        value
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|o| {
                        let field = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
                        (field(&o["kind"]), field(&o["metadata"]["namespace"]), field(&o["metadata"]["name"]))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let has = |kind: &str, ns: &str, name: &str| {
        configz().iter().any(|(k, n, m)| k == kind && n == ns && m == name)
    };
    wait_for("ready", || http_get(http, "/ready").is_some());
    assert!(has("Gateway", "files", "from-file"), "{:?}", configz());
    assert!(has("DestinationRule", ns, "reviews"), "{:?}", configz());

    // A change through the API reaches the running control plane.
    let vs = bookinfo("virtual-service-reviews-jason-v2-v3.yaml");
    assert!(meshpilot(env, &["apply", "-n", ns, "-f", vs.to_str().unwrap()]).status.success());
    wait_for("the VirtualService in configz", || has("VirtualService", ns, "reviews"));
    assert!(meshpilot(env, &["delete", "vs", "reviews", "-n", ns]).status.success());
    wait_for("the VirtualService gone from configz", || !has("VirtualService", ns, "reviews"));
}
