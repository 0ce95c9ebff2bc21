//! Helpers of the tests that run `meshpilot discovery` with its validating webhook against a real
//! kube-apiserver (`webhook_cluster.rs`, `istiod_beside.rs`).

use std::{
    path::Path,
    process::{Child, Command, Stdio},
};

use kube_source::testenv::TestEnv;
use meshpilot_testing::free_port;

/// Kills the child on drop.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `meshpilot discovery` against the test API server with its webhook on a free loopback port, called
/// by the API server at [`Webhook::url`]; killed on drop.
pub struct Webhook {
    /// The process, killed when this is dropped.
    _process: Process,
    /// Its monitoring port (`/metrics`).
    pub monitoring: u16,
    /// The webhook URL it advertises (`--validation-webhook-url`).
    pub url: String,
}

impl Webhook {
    /// Starts it with `args` and `envs` added (revision, secure port, `POD_NAMESPACE`, …), stderr to
    /// `stderr`.
    pub fn start(env: &TestEnv, args: &[&str], envs: &[(&str, &str)], stderr: Stdio) -> Webhook {
        Webhook::start_in(Path::new("."), env, args, envs, stderr)
    }

    /// [`Webhook::start`] in the working directory `dir` (where istiod's relative paths, such as the
    /// injection config's `./var/lib/istio/inject`, are read).
    pub fn start_in(
        dir: &Path,
        env: &TestEnv,
        args: &[&str],
        envs: &[(&str, &str)],
        stderr: Stdio,
    ) -> Webhook {
        let (grpc, http, monitoring, https) = (free_port(), free_port(), free_port(), free_port());
        let url = format!("https://127.0.0.1:{https}/validate");
        let child = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
            .current_dir(dir)
            .args(["discovery", "--kubeconfig"])
            .arg(env.kubeconfig())
            .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
            .args(["--http-addr", &format!("127.0.0.1:{http}")])
            .args(["--monitoring-addr", &format!("127.0.0.1:{monitoring}")])
            .args(["--https-addr", &format!("127.0.0.1:{https}")])
            .args(["--validation-webhook-url", &url])
            .args(args)
            .envs(envs.iter().copied())
            .stderr(stderr)
            .spawn()
            .unwrap();
        Webhook { _process: Process(child), monitoring, url }
    }
}

/// The configurations Istio's charts install for the default revision in `istio-system` (meshpilot
/// creates them when none exists).
pub const DEFAULT_CONFIGURATIONS: &[&str] = &["istio-validator-istio-system", "istiod-default-validator"];

/// Deletes the named ValidatingWebhookConfigurations the test made the control plane create (they
/// would send every later Istio write of this API server to a webhook that is gone), also when the
/// test fails.
pub struct DeleteWebhooks<'a>(pub &'a TestEnv, pub &'static [&'static str]);

impl Drop for DeleteWebhooks<'_> {
    fn drop(&mut self) {
        for name in self.1 {
            let _ = self.0.kubectl(&["delete", "validatingwebhookconfiguration", name, "--ignore-not-found"]);
        }
    }
}

/// The ValidatingWebhookConfiguration `name` as JSON, if it exists.
pub fn vwc(env: &TestEnv, name: &str) -> Option<serde_json::Value> {
    let out = env.kubectl(&["get", "validatingwebhookconfiguration", name, "-o", "json"]).ok()?;
    serde_json::from_str(&out).ok()
}

/// `curl` of a malformed review at the webhook `url`, trusting only `bundle` (PEM): the answer's
/// body, a newline and the HTTP status.
pub fn review_with_bundle(url: &str, bundle: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, bundle).unwrap();
    let out = Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&ca)
        .args(["-H", "Content-Type: application/json", "--data", "{not json", "-w", "\n%{http_code}", url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{url}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
