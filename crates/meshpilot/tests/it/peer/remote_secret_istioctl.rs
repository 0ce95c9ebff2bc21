//! `meshpilot create-remote-secret` against a real kube-apiserver (scripts/kube-testenv.sh), with the
//! pinned real `istioctl create-remote-secret` as the oracle: both run with the same flags on the same
//! cluster and must print the same Secret. The test API server runs no token controller: where a token
//! Secret must be filled, the test fills it (`token`, `ca.crt`) as the controller would, once the
//! command has created it.

use std::{
    path::Path,
    process::{Command, Output, Stdio},
    time::Duration,
};

use kube_source::{
    remote_kubeconfig::{InsecureKubeconfigOptions, remote_kubeconfig},
    testenv::TestEnv,
};
use meshpilot_testing::wait::wait_for_blocking;
use serde_json::Value;

use crate::istio_peer::istioctl;

/// A command with the test's kubeconfig and a clean environment for the kubeconfig lookups (no
/// `KUBECONFIG`, `HOME` an empty directory), as both tools read the default kubeconfig for the
/// namespace.
fn command(bin: &Path, env: &TestEnv, home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("create-remote-secret").arg("--kubeconfig").arg(env.kubeconfig()).args(args);
    cmd.env_remove("KUBECONFIG").env("HOME", home);
    cmd
}

fn run_both(env: &TestEnv, args: &[&str]) -> (Output, Output) {
    let home = tempfile::tempdir().unwrap();
    let ours = command(Path::new(env!("CARGO_BIN_EXE_meshpilot")), env, home.path(), args).output().unwrap();
    let theirs = command(&istioctl(), env, home.path(), args).output().unwrap();
    (ours, theirs)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A token Secret of `account` in `ns` filled as the token controller fills one.
fn filled_token_secret(env: &TestEnv, ns: &str, name: &str, account: &str, token: &str) {
    let b64 = |s: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    env.kubectl_apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: \
         {{kubernetes.io/service-account.name: {account}}}\ntype: kubernetes.io/service-account-token\n\
         data: {{token: {}, ca.crt: {}}}\n",
        b64(token),
        b64("-----BEGIN CERTIFICATE-----\nCA of the test\n-----END CERTIFICATE-----\n")
    ))
    .unwrap();
}

/// The kubeconfig under `stringData` of a printed Secret.
fn embedded_kubeconfig(printed: &str) -> String {
    let secret: Value = serde_saphyr::from_str(printed.trim_end().trim_end_matches("---")).unwrap();
    let data = secret["stringData"].as_object().unwrap();
    assert_eq!(data.len(), 1, "{printed}");
    data.values().next().unwrap().as_str().unwrap().to_string()
}

#[test]
fn existing_service_accounts_give_istioctls_secret() {
    let env = TestEnv::shared_by(file!());
    let ns = "rs-existing";
    env.kubectl(&["create", "namespace", ns]).unwrap();
    env.kubectl(&["create", "serviceaccount", "istio-reader-service-account", "-n", ns]).unwrap();
    env.kubectl(&["create", "serviceaccount", "istiod", "-n", ns]).unwrap();
    filled_token_secret(env, ns, "reader-token", "istio-reader-service-account", "reader.token.value");
    filled_token_secret(env, ns, "istiod-token", "istiod", "istiod.token.value");

    for args in [
        vec!["--name", "west", "-i", ns, "--create-service-account=false"],
        // The cluster name defaults to kube-system's UID.
        vec!["-i", ns],
        vec![
            "-n",
            ns,
            "--name",
            "west",
            "--server",
            "https://10.1.2.3:6443",
            "--tls-server-name",
            "kubernetes.default",
        ],
        vec!["-n", ns, "--name", "cfg", "--type", "config", "--server", "https://api.example:443"],
        vec![
            "-n",
            ns,
            "--name",
            "west",
            "--secret-name",
            "reader-token",
            "--service-account",
            "istio-reader-service-account",
        ],
    ] {
        let (ours, theirs) = run_both(env, &args);
        assert!(theirs.status.success(), "istioctl {args:?}: {}", text(&theirs.stderr));
        assert!(ours.status.success(), "meshpilot {args:?}: {}", text(&ours.stderr));
        assert_eq!(text(&ours.stdout), text(&theirs.stdout), "{args:?}");
        let warned = |o: &Output| {
            text(&o.stderr).lines().any(|l| l.starts_with("warn: server in Kubeconfig is https://127.0.0.1:"))
        };
        assert_eq!(warned(&ours), warned(&theirs), "{args:?}: {}", text(&ours.stderr));

        // What meshpilot writes is what a meshpilot control plane accepts from a remote secret.
        let kubeconfig = embedded_kubeconfig(&text(&ours.stdout));
        let config = remote_kubeconfig(kubeconfig.as_bytes(), &InsecureKubeconfigOptions::default()).unwrap();
        assert!(config.auth_infos[0].auth_info.as_ref().unwrap().token.is_some(), "{args:?}");
    }
    let (ours, _) = run_both(env, &["--name", "west", "-i", ns]);
    let printed = text(&ours.stdout);
    assert!(printed.contains("  name: istio-remote-secret-west\n  namespace: rs-existing\n"), "{printed}");
    assert!(embedded_kubeconfig(&printed).contains("token: reader.token.value"), "{printed}");
}

#[test]
fn errors_are_istioctls() {
    let env = TestEnv::shared_by(file!());
    let ns = "rs-errors";
    env.kubectl(&["create", "namespace", ns]).unwrap();
    env.kubectl(&["create", "serviceaccount", "other", "-n", ns]).unwrap();
    filled_token_secret(env, ns, "other-token", "other", "t");
    let error_line = |o: &Output| {
        text(&o.stderr).lines().find(|l| l.starts_with("Error: ")).map(str::to_string).unwrap_or_default()
    };
    for args in [
        vec!["-n", ns, "--name", "west", "--create-service-account=false"],
        vec!["-n", ns, "--name", "Not_A_Label"],
        vec!["-n", ns, "--name", "west", "--service-account", "other", "--secret-name", "nope"],
    ] {
        let (ours, theirs) = run_both(env, &args);
        assert!(!theirs.status.success() && !ours.status.success(), "{args:?}");
        assert!(!error_line(&theirs).is_empty(), "{}", text(&theirs.stderr));
        assert_eq!(error_line(&ours), error_line(&theirs), "{args:?}");
    }
    // A token Secret that does not reference the service account.
    env.kubectl(&["create", "serviceaccount", "istio-reader-service-account", "-n", ns]).unwrap();
    let (ours, theirs) = run_both(env, &["-n", ns, "--name", "west", "--secret-name", "other-token"]);
    assert!(!ours.status.success());
    assert_eq!(error_line(&ours), error_line(&theirs));
    assert!(error_line(&ours).contains("does not reference ServiceAccount istio-reader-service-account"));
}

/// Runs `bin` in `ns` (no reader service account there yet), fills the token Secret it creates as the
/// token controller would, and returns its output.
fn create_and_fill(env: &TestEnv, bin: &Path, ns: &str) -> Output {
    let home = tempfile::tempdir().unwrap();
    let child = command(bin, env, home.path(), &["-i", ns, "--name", "west"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let token_secret = "istio-reader-service-account-istio-remote-secret-token";
    wait_for_blocking("the token Secret to be created", Duration::from_secs(30), || {
        env.kubectl(&["get", "secret", token_secret, "-n", ns]).ok()
    })
    .unwrap();
    let patch = r#"{"data":{"token":"dG9rZW4tYnktY29udHJvbGxlcg==","ca.crt":"Q0EtREFUQQ=="}}"#;
    env.kubectl(&["patch", "secret", token_secret, "-n", ns, "-p", patch]).unwrap();
    child.wait_with_output().unwrap()
}

/// The reader RBAC of namespace `ns` with the namespace replaced by `NS`.
fn reader_rbac(env: &TestEnv, ns: &str) -> (Value, Value) {
    let name = format!("istio-reader-clusterrole-{ns}");
    let get = |kind: &str| -> Value {
        let text = env.kubectl(&["get", kind, &name, "-o", "json"]).unwrap().replace(ns, "NS");
        serde_json::from_str(&text).unwrap()
    };
    let (role, binding) = (get("clusterrole"), get("clusterrolebinding"));
    (role["rules"].clone(), serde_json::json!([binding["roleRef"], binding["subjects"]]))
}

#[test]
fn a_missing_reader_account_is_created_with_its_token_secret() {
    let env = TestEnv::shared_by(file!());
    let theirs = create_and_fill(env, &istioctl(), "rs-create-istioctl");
    let ours = create_and_fill(env, Path::new(env!("CARGO_BIN_EXE_meshpilot")), "rs-create-meshpilot");
    assert!(theirs.status.success(), "{}", text(&theirs.stderr));
    assert!(ours.status.success(), "{}", text(&ours.stderr));
    assert_eq!(text(&ours.stdout), text(&theirs.stdout).replace("rs-create-istioctl", "rs-create-meshpilot"));
    assert!(embedded_kubeconfig(&text(&ours.stdout)).contains("token: token-by-controller"));

    // The same reader account and RBAC as Istio's charts.
    for ns in ["rs-create-istioctl", "rs-create-meshpilot"] {
        env.kubectl(&["get", "serviceaccount", "istio-reader-service-account", "-n", ns]).unwrap();
    }
    assert_eq!(reader_rbac(env, "rs-create-meshpilot"), reader_rbac(env, "rs-create-istioctl"));
}
