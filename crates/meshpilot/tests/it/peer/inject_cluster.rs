//! Sidecar injection called by a real kube-apiserver (scripts/kube-testenv.sh): Istio's own
//! MutatingWebhookConfiguration (rendered by the pinned `istioctl manifest generate` with the chart's
//! `istiodRemote.injectionURL` pointing at meshpilot) gets its caBundle patched by meshpilot; a pod
//! created in a namespace labelled `istio-injection=enabled` is stored with Istio's sidecar; a pod in
//! an unlabelled namespace is stored as it was sent; a pod asking for a template that does not exist
//! is denied with istiod's message.

use std::process::Stdio;

use kube_source::testenv::TestEnv;
use serde_json::Value;

use crate::webhook_support::{self, Webhook};

/// A pod as a client sends it; `serviceAccountName` is set as the ServiceAccount admission plugin
/// (off in the test API server) would have set it before the webhook is called.
fn pod(namespace: &str, name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels: {{app: web}}\n  annotations: {{{annotations}}}\n\
         spec:\n  serviceAccountName: default\n  containers:\n  - name: web\n    image: nginx\n    ports: [{{containerPort: 8080}}]\n    readinessProbe: {{httpGet: {{port: 8080, path: /ready}}}}\n"
    )
}

fn stored(env: &TestEnv, namespace: &str, name: &str) -> Value {
    serde_json::from_str(&env.kubectl(&["get", "pod", name, "-n", namespace, "-o", "json"]).unwrap()).unwrap()
}

fn names(list: &Value) -> Vec<String> {
    list.as_array().into_iter().flatten().filter_map(|c| c["name"].as_str().map(str::to_string)).collect()
}

#[test]
fn the_api_server_calls_inject_and_stores_pods_with_istios_sidecar() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", "istio-system"]);
    let _ = env.kubectl(&["create", "namespace", "injected"]);
    let _ = env.kubectl(&["create", "namespace", "plain"]);
    env.kubectl(&["label", "namespace", "injected", "istio-injection=enabled", "--overwrite"]).unwrap();

    // The injector's config and values as the chart renders them, where istiod reads them.
    let dir = tempfile::tempdir().unwrap();
    webhook_support::write_chart_injection_files(dir.path());

    let server = Webhook::start_in(dir.path(), env, &[], &[("POD_NAMESPACE", "istio-system")], Stdio::null());
    let inject_url = server.url.replace("/validate", "/inject");

    // Istio's MutatingWebhookConfiguration, calling meshpilot's URL, without a caBundle: meshpilot
    // patches it in.
    let _cleanup = webhook_support::install_injector_webhook(env, &inject_url);

    // Created through the API server: injected.
    env.kubectl_apply(&pod("injected", "web-1", "")).unwrap();
    let injected = stored(env, "injected", "web-1");
    let spec = &injected["spec"];
    let all: Vec<String> =
        names(&spec["initContainers"]).into_iter().chain(names(&spec["containers"])).collect();
    assert!(all.contains(&"istio-proxy".to_string()), "{all:?}");
    assert!(all.contains(&"web".to_string()), "{all:?}");
    let status: Value = serde_json::from_str(
        injected["metadata"]["annotations"]["sidecar.istio.io/status"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(status["revision"], "default");
    assert_eq!(injected["metadata"]["labels"]["security.istio.io/tlsMode"], "istio");
    // The app's HTTP probe now goes through the agent.
    let web = spec["containers"].as_array().unwrap().iter().find(|c| c["name"] == "web").unwrap();
    assert_eq!(web["readinessProbe"]["httpGet"]["path"], "/app-health/web/readyz");

    // Not in an injected namespace: stored as sent.
    env.kubectl_apply(&pod("plain", "web-2", "")).unwrap();
    assert_eq!(names(&stored(env, "plain", "web-2")["spec"]["containers"]), vec!["web".to_string()]);

    // A template that does not exist: denied with istiod's message.
    let err = env
        .kubectl_apply(&pod("injected", "web-3", "inject.istio.io/templates: nope"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("requested template \"nope\" not found"), "{err}");
}
