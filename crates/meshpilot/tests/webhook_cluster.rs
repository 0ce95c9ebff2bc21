//! The validating webhook (`meshpilot discovery --https-addr`) called by a real kube-apiserver
//! (scripts/kube-testenv.sh, one per test binary): the ValidatingWebhookConfigurations are created
//! with meshpilot's caBundle (patched back after an edit) and switched to failurePolicy Fail, `kubectl apply` of an invalid
//! VirtualService is denied naming the field, a valid one is created, and a malformed review does not
//! hurt the server.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use base64::Engine;
use kube_source::testenv::TestEnv;
use meshpilot_testing::{free_port, wait::wait_for_blocking};

/// Kills the child on drop.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Deletes the configurations the test made the control plane create (they would send every later
/// Istio write of this API server to a webhook that is gone), also when the test fails.
struct DeleteWebhooks<'a>(&'a TestEnv);

impl Drop for DeleteWebhooks<'_> {
    fn drop(&mut self) {
        for name in ["istio-validator-istio-system", "istiod-default-validator"] {
            let _ = self.0.kubectl(&["delete", "validatingwebhookconfiguration", name, "--ignore-not-found"]);
        }
    }
}

/// Waits (90 s at most: a limit, not a timing assertion) until `check` gives a value.
fn wait_for<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    wait_for_blocking(what, Duration::from_secs(90), check).unwrap()
}

fn vwc(env: &TestEnv, name: &str) -> Option<serde_json::Value> {
    let out = env.kubectl(&["get", "validatingwebhookconfiguration", name, "-o", "json"]).ok()?;
    serde_json::from_str(&out).ok()
}

fn virtual_service(name: &str, weight: i64) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: webhook-test}}\n\
         spec:\n  hosts: [reviews]\n  http:\n  - route:\n    - destination: {{host: reviews, subset: v1}}\n      weight: {weight}\n\
         \x20   - destination: {{host: reviews, subset: v2}}\n      weight: {}\n",
        100 - weight
    )
}

#[test]
fn api_server_calls_the_webhook_which_denies_invalid_objects_naming_the_field() {
    let env = TestEnv::shared();
    let _ = env.kubectl(&["create", "namespace", "istio-system"]);
    let _ = env.kubectl(&["create", "namespace", "webhook-test"]);
    let _cleanup = DeleteWebhooks(env);
    let (grpc, http, mon, https) = (free_port(), free_port(), free_port(), free_port());
    let url = format!("https://127.0.0.1:{https}/validate");
    let _server = Process(
        Command::new(env!("CARGO_BIN_EXE_meshpilot"))
            .args(["discovery", "--kubeconfig"])
            .arg(env.kubeconfig())
            .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
            .args(["--http-addr", &format!("127.0.0.1:{http}")])
            .args(["--monitoring-addr", &format!("127.0.0.1:{mon}")])
            .args(["--https-addr", &format!("127.0.0.1:{https}")])
            .args(["--validation-webhook-url", &url])
            .env("POD_NAMESPACE", "istio-system")
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Both chart configurations appear, pointing at our URL with a caBundle, and are switched to Fail
    // once the API server got the probe Gateway denied through the webhook.
    let mut bundle = String::new();
    for name in ["istio-validator-istio-system", "istiod-default-validator"] {
        let config = wait_for(&format!("{name} with failurePolicy Fail"), || {
            vwc(env, name).filter(|c| c["webhooks"][0]["failurePolicy"] == "Fail")
        });
        let wh = &config["webhooks"][0];
        assert_eq!(wh["clientConfig"]["url"], url.as_str());
        assert_eq!(wh["sideEffects"], "None");
        let pem = base64::engine::general_purpose::STANDARD
            .decode(wh["clientConfig"]["caBundle"].as_str().expect("caBundle set"))
            .unwrap();
        bundle = String::from_utf8(pem).unwrap();
        assert!(bundle.starts_with("-----BEGIN CERTIFICATE-----"), "{bundle}");
    }
    assert_eq!(vwc(env, "istiod-default-validator").unwrap()["webhooks"][0]["name"], "validation.istio.io");

    // An invalid VirtualService is denied by the webhook, with the field path.
    let err = env.kubectl_apply(&virtual_service("negative", -5)).unwrap_err().to_string();
    assert!(err.contains("admission webhook \"validation.istio.io\" denied the request"), "{err}");
    assert!(err.contains("spec.http[0].route[0].weight"), "{err}");
    assert!(env.kubectl(&["get", "virtualservice", "negative", "-n", "webhook-test"]).is_err());

    // A valid one is created.
    env.kubectl_apply(&virtual_service("split", 30)).unwrap();
    env.kubectl(&["get", "virtualservice", "split", "-n", "webhook-test"]).unwrap();

    // A malformed review gets istiod's answer over TLS that the advertised caBundle verifies.
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &bundle).unwrap();
    let out = Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&ca)
        .args(["-H", "Content-Type: application/json", "--data", "{not json", "-w", "\n%{http_code}", &url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.ends_with("\n200"), "{text}");
    assert!(text.contains("could not decode body"), "{text}");

    // Someone overwrites a caBundle: it is patched back.
    let advertised =
        vwc(env, "istiod-default-validator").unwrap()["webhooks"][0]["clientConfig"]["caBundle"].clone();
    env.kubectl(&[
        "patch",
        "validatingwebhookconfiguration",
        "istiod-default-validator",
        "--type=json",
        "-p",
        r#"[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "Zm9v"}]"#,
    ])
    .unwrap();
    wait_for("the caBundle patched back", || {
        vwc(env, "istiod-default-validator")
            .filter(|c| c["webhooks"][0]["clientConfig"]["caBundle"] == advertised)
    });

    // The webhook still serves: an UPDATE to an invalid weight is denied, a valid one is applied.
    let err = env.kubectl_apply(&virtual_service("split", 150)).unwrap_err().to_string();
    assert!(err.contains("denied the request") && err.contains("weight"), "{err}");
    env.kubectl_apply(&virtual_service("split", 40)).unwrap();
    env.kubectl(&["delete", "virtualservice", "split", "-n", "webhook-test"]).unwrap();
}
