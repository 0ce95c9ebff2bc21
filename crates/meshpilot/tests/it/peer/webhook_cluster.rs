//! The validating webhook (`meshpilot discovery --https-addr`) called by a real kube-apiserver
//! (scripts/kube-testenv.sh, one per test binary): the ValidatingWebhookConfigurations are created
//! with meshpilot's caBundle (patched back after an edit) and switched to failurePolicy Fail, `kubectl apply` of an invalid
//! VirtualService is denied naming the field, a valid one is created, and a malformed review does not
//! hurt the server.

use std::{process::Stdio, time::Duration};

use crate::webhook_support;

use base64::Engine;
use kube_source::testenv::TestEnv;
use meshpilot_testing::wait::wait_for_blocking;
use webhook_support::{DEFAULT_CONFIGURATIONS, DeleteWebhooks, Webhook, counter, review_with_bundle, vwc};

/// Waits (90 s at most: a limit, not a timing assertion) until `check` gives a value.
fn wait_for<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    wait_for_blocking(what, Duration::from_secs(90), check).unwrap()
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
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", "istio-system"]);
    let _ = env.kubectl(&["create", "namespace", "webhook-test"]);
    let _cleanup = DeleteWebhooks(env, DEFAULT_CONFIGURATIONS);
    let server = Webhook::start(env, &[], &[("POD_NAMESPACE", "istio-system")], Stdio::null());
    let url = server.url.clone();

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
    let text = review_with_bundle(&url, &bundle);
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

/// One replica of the control plane for revision `canary` in namespace `replicas`: the webhook on its
/// own port and URL.
fn replica(env: &TestEnv, name: &str) -> Webhook {
    Webhook::start(
        env,
        &["--revision", "canary"],
        &[("POD_NAMESPACE", "replicas"), ("POD_NAME", name)],
        Stdio::null(),
    )
}

/// Two replicas against one API server: both serve certificates from the root kept in
/// `istio-ca-secret`, so the caBundle either writes verifies both, and an overwritten caBundle is
/// patched back once — no replica keeps rewriting it. (Before, each replica had its own in-memory root
/// and they overwrote each other's caBundle for ever.)
#[test]
fn two_replicas_share_one_root_and_leave_one_stable_ca_bundle() {
    const CONFIG: &str = "istio-validator-canary-replicas";
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", "replicas"]);
    let _cleanup = DeleteWebhooks(env, &[CONFIG]);
    let (a, b) = (replica(env, "replica-a"), replica(env, "replica-b"));
    let (mon_a, mon_b) = (a.monitoring, b.monitoring);

    let config = wait_for("the canary configuration with failurePolicy Fail", || {
        vwc(env, CONFIG).filter(|c| c["webhooks"][0]["failurePolicy"] == "Fail")
    });
    let root = env
        .kubectl(&[
            "get",
            "secret",
            "istio-ca-secret",
            "-n",
            "replicas",
            "-o",
            "jsonpath={.data.root-cert\\.pem}",
        ])
        .expect("the shared root in istio-ca-secret");
    assert_eq!(
        config["webhooks"][0]["clientConfig"]["caBundle"],
        root.trim(),
        "caBundle is not the shared root"
    );
    let bundle =
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(root.trim()).unwrap()).unwrap();
    // Whichever replica the API server calls, the advertised bundle verifies it.
    for url in [&a.url, &b.url] {
        let answer = review_with_bundle(url, &bundle);
        assert!(answer.ends_with("\n200") && answer.contains("could not decode body"), "{url}: {answer}");
    }

    // Someone overwrites the caBundle. It is patched back, and once both replicas have handled the
    // overwrite and the restore (two passes each, counted after any write of theirs), at most one
    // write per replica happened: no replica keeps rewriting it.
    let passes = |port| counter(port, "meshpilot_webhook_config_reconciles");
    let patches = || {
        counter(mon_a, "meshpilot_webhook_config_patches")
            + counter(mon_b, "meshpilot_webhook_config_patches")
    };
    let (before_a, before_b, patched_before) = (passes(mon_a), passes(mon_b), patches());
    env.kubectl(&[
        "patch",
        "validatingwebhookconfiguration",
        CONFIG,
        "--type=json",
        "-p",
        r#"[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "Zm9v"}]"#,
    ])
    .unwrap();
    wait_for("the caBundle patched back", || {
        vwc(env, CONFIG).filter(|c| c["webhooks"][0]["clientConfig"]["caBundle"] == root.trim())
    });
    wait_for("both replicas to handle the overwrite and the restore", || {
        (passes(mon_a) >= before_a + 2.0 && passes(mon_b) >= before_b + 2.0).then_some(())
    });
    let written = patches() - patched_before;
    assert!((1.0..=2.0).contains(&written), "{written} caBundle writes for one overwrite");
    assert_eq!(vwc(env, CONFIG).unwrap()["webhooks"][0]["clientConfig"]["caBundle"], root.trim());
}
