//! Helpers of the tests that run `meshpilot discovery` with its admission webhooks against a real
//! kube-apiserver (`webhook_cluster.rs`, `istiod_beside.rs`, `inject_cluster.rs`, `inject_configmap.rs`),
//! and Istio's charts as the install (`chart_install`, for `chart_install.rs`).

pub mod chart_install;
pub mod kubelet;

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
    /// Its plaintext xDS port (`--grpc-addr`).
    pub grpc: u16,
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
            .args(
                // The secure port off unless `args` sets it (`--https-addr` is set above).
                crate::process::secure_ports_off_unless_given(args)
                    .into_iter()
                    .filter(|flag| flag.starts_with("--secureGRPCAddr")),
            )
            .args(args)
            .envs(envs.iter().copied())
            .stderr(stderr)
            .spawn()
            .unwrap();
        Webhook { _process: Process(child), monitoring, grpc, url }
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

/// `GET path` on a control plane's loopback `port` (`None` when it does not answer).
pub fn local_get(port: u16, path: &str) -> Option<meshpilot_testing::Response> {
    meshpilot_testing::http::request_blocking(([127, 0, 0, 1], port).into(), "localhost", path, &[]).ok()
}

/// The sum of a counter's series on a control plane's /metrics (`port` its monitoring port; 0 when
/// absent).
pub fn counter(port: u16, name: &str) -> f64 {
    let r = local_get(port, "/metrics").unwrap();
    assert_eq!(r.status, 200);
    r.body
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `/debug/configstatusz`'s section of the injection config (`mesh.injectionConfig`: `source`,
/// `lastError`, `errors`) of a control plane (`port` its monitoring port); `None` while it does not
/// answer.
pub fn injection_config_status(port: u16) -> Option<serde_json::Value> {
    Some(debug_json(port, "/debug/configstatusz")?["mesh"]["injectionConfig"].clone())
}

/// `GET path` of a control plane's debug handlers (`port` its HTTP or monitoring port) as JSON;
/// `None` while it does not answer 200 with JSON.
pub fn debug_json(port: u16, path: &str) -> Option<serde_json::Value> {
    let r = local_get(port, path)?;
    if r.status != 200 {
        return None;
    }
    serde_json::from_str(&r.body).ok()
}

/// The objects of one kind that Istio's charts render for the pinned version
/// (`istioctl manifest generate` with `sets` as `--set` values).
pub fn chart_objects(kind: &str, sets: &[&str]) -> Vec<serde_json::Value> {
    let mut command = Command::new(crate::istio_peer::istioctl());
    command.args(["manifest", "generate"]);
    for set in sets {
        command.args(["--set", set]);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "istioctl manifest generate: {}", String::from_utf8_lossy(&out.stderr));
    api::yaml::parse_documents(&String::from_utf8(out.stdout).unwrap())
        .into_iter()
        .filter_map(|d| d.unwrap().root.map(|r| r.to_json()))
        .filter(|o| o["kind"] == kind)
        .collect()
}

/// Writes the injector's `config` and `values` as Istio's chart renders them (its ConfigMap
/// `istio-sidecar-injector`) where istiod reads them, `dir/var/lib/istio/inject`; returns that
/// directory.
pub fn write_chart_injection_files(dir: &Path) -> std::path::PathBuf {
    let inject_dir = dir.join("var/lib/istio/inject");
    std::fs::create_dir_all(&inject_dir).unwrap();
    let injector = chart_objects("ConfigMap", &[])
        .into_iter()
        .find(|c| c["metadata"]["name"] == "istio-sidecar-injector")
        .expect("the chart's injector ConfigMap");
    std::fs::write(inject_dir.join("config"), injector["data"]["config"].as_str().unwrap()).unwrap();
    std::fs::write(inject_dir.join("values"), injector["data"]["values"].as_str().unwrap()).unwrap();
    inject_dir
}

/// Applies Istio's MutatingWebhookConfiguration `istio-sidecar-injector`, rendered to call
/// `inject_url`, and waits (90 s at most: a limit, not a timing assertion) until the control plane has
/// patched its caBundle into every webhook. It is deleted on drop of the returned guard, with the
/// validating configurations the control plane created (they would send every later pod or Istio
/// write of this API server to a webhook that is gone), also when the test fails.
pub fn install_injector_webhook<'a>(env: &'a TestEnv, inject_url: &str) -> DeleteInjectorWebhooks<'a> {
    let guard = DeleteInjectorWebhooks(env);
    let mwc = chart_objects(
        "MutatingWebhookConfiguration",
        &[&format!("values.istiodRemote.injectionURL={inject_url}")],
    )
    .pop()
    .expect("the chart's MutatingWebhookConfiguration");
    assert_eq!(mwc["metadata"]["labels"]["istio.io/rev"], "default");
    env.kubectl_apply(&serde_json::to_string(&mwc).unwrap()).unwrap();
    meshpilot_testing::wait::wait_for_blocking(
        "the injector webhooks' caBundle patched",
        std::time::Duration::from_secs(90),
        || {
            let current: serde_json::Value = serde_json::from_str(
                &env.kubectl(&[
                    "get",
                    "mutatingwebhookconfiguration",
                    "istio-sidecar-injector",
                    "-o",
                    "json",
                ])
                .ok()?,
            )
            .ok()?;
            current["webhooks"]
                .as_array()?
                .iter()
                .all(|w| w["clientConfig"]["caBundle"].is_string())
                .then_some(())
        },
    )
    .unwrap();
    guard
}

/// See [`install_injector_webhook`].
pub struct DeleteInjectorWebhooks<'a>(&'a TestEnv);

impl Drop for DeleteInjectorWebhooks<'_> {
    fn drop(&mut self) {
        let _ = self.0.kubectl(&[
            "delete",
            "mutatingwebhookconfiguration",
            "istio-sidecar-injector",
            "--ignore-not-found",
        ]);
        for name in DEFAULT_CONFIGURATIONS {
            let _ = self.0.kubectl(&["delete", "validatingwebhookconfiguration", name, "--ignore-not-found"]);
        }
    }
}

/// The holder of the ConfigMap lock `lock` in `namespace` (istiod's ConfigMap locks, such as
/// `istio-namespace-controller-election`: client-go's record in the annotation
/// `control-plane.alpha.kubernetes.io/leader`); `None` when absent or released.
pub fn lock_holder(env: &TestEnv, namespace: &str, lock: &str) -> Option<String> {
    let out = env.kubectl(&["get", "configmap", lock, "-n", namespace, "-o", "json"]).ok()?;
    let cm: serde_json::Value = serde_json::from_str(&out).ok()?;
    let record: serde_json::Value = serde_json::from_str(
        cm["metadata"]["annotations"]["control-plane.alpha.kubernetes.io/leader"].as_str()?,
    )
    .ok()?;
    record["holderIdentity"].as_str().filter(|h| !h.is_empty()).map(str::to_string)
}
