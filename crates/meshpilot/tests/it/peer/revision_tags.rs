//! Revision tags as istiod serves them, on the real kube-apiserver: the istiod chart's
//! `revisionTags={prod}` renders MutatingWebhookConfiguration `istio-revision-tag-prod` (labels
//! `istio.io/tag=prod`, `istio.io/rev=default`; namespaces and pods select it with
//! `istio.io/rev=prod`). istiod's `WebhookCertPatcher` patches the caBundle of every configuration
//! labelled with its revision, so the tag's too; nothing else in injection knows tags. meshpilot
//! does the same: the tag's configuration gets its caBundle, and pods of a namespace labelled
//! `istio.io/rev=prod` (or labelled so themselves) are injected.

use std::process::Stdio;

use kube_source::testenv::TestEnv;
use meshpilot_testing::wait::wait_for_blocking;
use serde_json::Value;

use crate::webhook_support::{self, DEFAULT_CONFIGURATIONS, Webhook, chart_install};

/// Deletes what the test installed that would send later requests of this API server to a webhook
/// that is gone, also when the test fails.
struct Cleanup<'a>(&'a TestEnv);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for name in ["istio-revision-tag-prod", "istio-revision-tag-canary"] {
            let _ = self.0.kubectl(&["delete", "mutatingwebhookconfiguration", name, "--ignore-not-found"]);
        }
        for name in DEFAULT_CONFIGURATIONS {
            let _ = self.0.kubectl(&["delete", "validatingwebhookconfiguration", name, "--ignore-not-found"]);
        }
    }
}

/// The istiod chart's tag configuration for `tag` (helm, the pinned chart), calling `inject_url`.
fn tag_webhook(tag: &str, sets: &[&str]) -> Value {
    let tags = format!("revisionTags={{{tag}}}");
    let all: Vec<&str> = [tags.as_str()].into_iter().chain(sets.iter().copied()).collect();
    chart_install::render("istiod", "istio-control/istio-discovery", &all)
        .into_iter()
        .find(|o| {
            o["kind"] == "MutatingWebhookConfiguration"
                && o["metadata"]["name"] == format!("istio-revision-tag-{tag}").as_str()
        })
        .expect("the chart renders the tag's MutatingWebhookConfiguration")
}

fn webhooks_bundles(env: &TestEnv, name: &str) -> Option<Vec<Option<String>>> {
    let out = env.kubectl(&["get", "mutatingwebhookconfiguration", name, "-o", "json"]).ok()?;
    let current: Value = serde_json::from_str(&out).ok()?;
    Some(
        current["webhooks"]
            .as_array()?
            .iter()
            .map(|w| w["clientConfig"]["caBundle"].as_str().map(str::to_string))
            .collect(),
    )
}

fn pod(namespace: &str, name: &str, labels: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {namespace}, labels: {{{labels}}}}}\n\
         spec:\n  serviceAccountName: default\n  containers:\n  - {{name: web, image: nginx}}\n"
    )
}

/// The stored pod's `sidecar.istio.io/status`, parsed, if injected.
fn injection_status(env: &TestEnv, namespace: &str, name: &str) -> Option<Value> {
    let pod: Value =
        serde_json::from_str(&env.kubectl(&["get", "pod", name, "-n", namespace, "-o", "json"]).unwrap())
            .unwrap();
    serde_json::from_str(pod["metadata"]["annotations"]["sidecar.istio.io/status"].as_str()?).ok()
}

#[test]
fn a_revision_tags_webhook_is_patched_and_its_namespaces_are_injected() {
    let env = TestEnv::shared_by(file!());
    let _cleanup = Cleanup(env);
    for namespace in ["istio-system", "tagged", "plain"] {
        let _ = env.kubectl(&["create", "namespace", namespace]);
    }
    env.kubectl(&["label", "namespace", "tagged", "istio.io/rev=prod", "--overwrite"]).unwrap();

    let dir = tempfile::tempdir().unwrap();
    webhook_support::write_chart_injection_files(dir.path());
    let server = Webhook::start_in(dir.path(), env, &[], &[("POD_NAMESPACE", "istio-system")], Stdio::null());
    let url = server.url.replace("/validate", "/inject");
    let injection_url = format!("istiodRemote.injectionURL={url}");

    // A tag of another revision: not this control plane's to patch.
    let canary = tag_webhook("canary", &[&injection_url, "revision=canary"]);
    assert_eq!(canary["metadata"]["labels"]["istio.io/rev"], "canary");
    env.kubectl_apply(&serde_json::to_string(&canary).unwrap()).unwrap();

    // The tag `prod` of the default revision, as `helm template` renders it (no caBundle).
    let prod = tag_webhook("prod", &[&injection_url]);
    assert_eq!(prod["metadata"]["labels"]["istio.io/tag"], "prod");
    assert_eq!(prod["metadata"]["labels"]["istio.io/rev"], "default");
    env.kubectl_apply(&serde_json::to_string(&prod).unwrap()).unwrap();
    let bundles = wait_for_blocking("the tag's caBundle patched", std::time::Duration::from_secs(90), || {
        webhooks_bundles(env, "istio-revision-tag-prod").filter(|b| b.iter().all(Option::is_some))
    })
    .unwrap();
    assert_eq!(bundles.len(), 2, "rev.namespace. and rev.object.");
    // Listed and patched in the same pass as `prod` had it been selected.
    assert_eq!(webhooks_bundles(env, "istio-revision-tag-canary").unwrap(), vec![None, None]);

    // The namespace selects the tag: injected by this (the default) revision.
    env.kubectl_apply(&pod("tagged", "web", "")).unwrap();
    let status = injection_status(env, "tagged", "web").expect("a pod of the tagged namespace is injected");
    assert_eq!(status["revision"], "default");
    // A pod selecting the tag itself, in an unlabelled namespace (the `rev.object.` webhook).
    env.kubectl_apply(&pod("plain", "tagged-pod", "istio.io/rev: prod")).unwrap();
    assert!(
        injection_status(env, "plain", "tagged-pod").is_some(),
        "a pod labelled with the tag is injected"
    );
    // Neither: not injected.
    env.kubectl_apply(&pod("plain", "untagged", "")).unwrap();
    assert!(injection_status(env, "plain", "untagged").is_none());
}
