//! The injection config read from the ConfigMap `istio-sidecar-injector` through the API (istiod's
//! source when `./var/lib/istio/inject` has no files, as with Istio's chart) and kept current: a
//! changed ConfigMap takes effect for the next pod; a broken one is refused and the last good config
//! stays in force.

use std::{process::Stdio, time::Duration};

use kube_source::testenv::TestEnv;
use meshpilot_testing::wait::wait_for_blocking;
use serde_json::{Value, json};

use crate::webhook_support::{self, Webhook, counter};

fn chart_configmap() -> Value {
    webhook_support::chart_objects("ConfigMap", &[])
        .into_iter()
        .find(|o| o["metadata"]["name"] == "istio-sidecar-injector")
        .expect("the chart's injector ConfigMap")
}

fn configmap(config: &str, values: &str) -> String {
    serde_json::to_string(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio-sidecar-injector", "namespace": "istio-system"},
        "data": {"config": config, "values": values},
    }))
    .unwrap()
}

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: injected}}\n\
         spec:\n  serviceAccountName: default\n  containers:\n  - {{name: web, image: nginx}}\n"
    )
}

fn annotations(env: &TestEnv, name: &str) -> Value {
    let pod: Value =
        serde_json::from_str(&env.kubectl(&["get", "pod", name, "-n", "injected", "-o", "json"]).unwrap())
            .unwrap();
    pod["metadata"]["annotations"].clone()
}

#[test]
fn the_injector_configmap_is_read_watched_and_a_broken_one_keeps_the_last_good() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", "istio-system"]);
    let _ = env.kubectl(&["create", "namespace", "injected"]);
    env.kubectl(&["label", "namespace", "injected", "istio-injection=enabled", "--overwrite"]).unwrap();

    let chart_cm = chart_configmap();
    let config = chart_cm["data"]["config"].as_str().unwrap().to_string();
    let values = chart_cm["data"]["values"].as_str().unwrap().to_string();
    env.kubectl_apply(&configmap(&config, &values)).unwrap();

    // No files in the working directory: the ConfigMap is the source.
    let dir = tempfile::tempdir().unwrap();
    let server = Webhook::start_in(dir.path(), env, &[], &[("POD_NAMESPACE", "istio-system")], Stdio::null());
    let inject_url = server.url.replace("/validate", "/inject");
    let _cleanup = webhook_support::install_injector_webhook(env, &inject_url);
    env.kubectl_apply(&pod("first")).unwrap();
    assert!(annotations(env, "first")["sidecar.istio.io/status"].is_string(), "injected from the ConfigMap");

    // A broken template: refused and counted; pods are still injected with the last good config.
    let broken = config.replacen("templates:", "templates:\n  broken: '{{ if }}'", 1);
    assert_ne!(broken, config, "the chart's config has templates");
    env.kubectl_apply(&configmap(&broken, &values)).unwrap();
    let status = wait_for_blocking("the broken ConfigMap refused", Duration::from_secs(90), || {
        (counter(server.monitoring, "meshpilot_injector_config_errors") >= 1.0)
            .then(|| webhook_support::injection_config_status(server.monitoring))?
            .filter(|s| s["lastError"].is_string())
    })
    .unwrap();
    assert_eq!(status["source"], "ConfigMap istio-system/istio-sidecar-injector", "{status}");
    assert!(status["lastError"].as_str().is_some_and(|e| e.contains("config")), "{status}");
    env.kubectl_apply(&pod("during-broken")).unwrap();
    assert!(
        annotations(env, "during-broken")["sidecar.istio.io/status"].is_string(),
        "the last good config injects"
    );

    // A changed, valid config: the next pod shows it.
    let marked =
        config.replacen("injectedAnnotations:", "injectedAnnotations:\n  meshpilot.test/marker: \"2\"", 1);
    assert_ne!(marked, config, "the chart's config has injectedAnnotations");
    env.kubectl_apply(&configmap(&marked, &values)).unwrap();
    let mut attempt = 0;
    wait_for_blocking("a pod injected with the changed config", Duration::from_secs(90), || {
        attempt += 1;
        let name = format!("probe-{attempt}");
        env.kubectl_apply(&pod(&name)).ok()?;
        let found = annotations(env, &name);
        assert!(found["sidecar.istio.io/status"].is_string(), "every pod is injected: {found}");
        (found["meshpilot.test/marker"] == "2").then_some(())
    })
    .unwrap();
}
