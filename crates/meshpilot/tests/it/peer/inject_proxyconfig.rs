//! ProxyConfig resources applied by the injection webhook as istiod applies them
//! (`pilot/pkg/model/proxy_config.go`, `pkg/kube/inject/webhook.go`): with a real kube-apiserver, the
//! chart's injector ConfigMap and Istio's MutatingWebhookConfiguration, a pod created in a namespace
//! with ProxyConfig resources is stored with their merged values in its `istio-proxy` container
//! (`PROXY_CONFIG`, the `proxyMetadata` environment, the image type), and a changed resource reaches
//! the next pod injected without a restart.

use std::{process::Stdio, time::Duration};

use kube_source::testenv::TestEnv;
use meshpilot_testing::wait::wait_for_blocking;
use serde_json::{Value, json};

use crate::webhook_support::{self, Webhook};

const NAMESPACE: &str = "pc-injected";

fn chart_configmap() -> Value {
    let mut cm = webhook_support::chart_objects("ConfigMap", &[])
        .into_iter()
        .find(|o| o["metadata"]["name"] == "istio-sidecar-injector")
        .expect("the chart's injector ConfigMap");
    for key in ["resourceVersion", "uid", "creationTimestamp"] {
        cm["metadata"].as_object_mut().map(|m| m.remove(key));
    }
    cm
}

/// A ProxyConfig of NAMESPACE.
fn proxy_config(name: &str, spec: Value) -> String {
    serde_json::to_string(&json!({
        "apiVersion": "networking.istio.io/v1beta1", "kind": "ProxyConfig",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }))
    .unwrap()
}

fn pod(name: &str, labels: Value, annotations: Value) -> String {
    serde_json::to_string(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "annotations": annotations},
        "spec": {"serviceAccountName": "default", "containers": [{"name": "app", "image": "nginx"}]},
    }))
    .unwrap()
}

/// The stored pod's `istio-proxy` container (a native sidecar: among the init containers).
fn istio_proxy(env: &TestEnv, name: &str) -> Value {
    let pod: Value =
        serde_json::from_str(&env.kubectl(&["get", "pod", name, "-n", NAMESPACE, "-o", "json"]).unwrap())
            .unwrap();
    ["initContainers", "containers"]
        .iter()
        .flat_map(|list| pod["spec"][list].as_array().cloned().unwrap_or_default())
        .find(|c| c["name"] == "istio-proxy")
        .unwrap_or_else(|| panic!("pod {name} has no istio-proxy: {pod}"))
}

fn env_value(container: &Value, name: &str) -> Option<String> {
    container["env"].as_array()?.iter().find(|e| e["name"] == name)?["value"].as_str().map(str::to_string)
}

/// The container's `PROXY_CONFIG` (the template's `protoToJSON .ProxyConfig`) as JSON.
fn proxy_config_env(container: &Value) -> Value {
    serde_json::from_str(env_value(container, "PROXY_CONFIG").expect("PROXY_CONFIG").trim()).unwrap()
}

#[test]
fn proxyconfig_resources_reach_injected_pods_in_istiods_order_and_a_change_the_next_pod() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", "istio-system"]);
    let _ = env.kubectl(&["create", "namespace", NAMESPACE]);
    env.kubectl(&["label", "namespace", NAMESPACE, "istio-injection=enabled", "--overwrite"]).unwrap();
    env.kubectl_apply(&serde_json::to_string(&chart_configmap()).unwrap()).unwrap();
    // A namespace-wide resource, and one selecting `app: web`.
    env.kubectl_apply(&proxy_config("namespace-wide", json!({"concurrency": 3}))).unwrap();
    env.kubectl_apply(&proxy_config(
        "web",
        json!({
            "selector": {"matchLabels": {"app": "web"}},
            "environmentVariables": {"MESHPILOT_TEST": "one"},
            "image": {"imageType": "distroless"},
        }),
    ))
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let server = Webhook::start_in(dir.path(), env, &[], &[("POD_NAMESPACE", "istio-system")], Stdio::null());
    let inject_url = server.url.replace("/validate", "/inject");
    let _cleanup = webhook_support::install_injector_webhook(env, &inject_url);

    // Pods until one carries both resources (the first push may come after the webhook is called).
    let mut attempt = 0;
    let web = wait_for_blocking("a pod injected with both ProxyConfigs", Duration::from_secs(90), || {
        attempt += 1;
        let name = format!("web-{attempt}");
        env.kubectl_apply(&pod(&name, json!({"app": "web"}), json!({}))).ok()?;
        let proxy = istio_proxy(env, &name);
        (env_value(&proxy, "MESHPILOT_TEST").is_some() && proxy_config_env(&proxy)["concurrency"] == 3)
            .then_some(proxy)
    })
    .unwrap();
    // istiod's order: namespace-wide, then the selecting resource; the template prints the merged
    // proxy config less Istio's defaults (`cleanProxyConfig`), and each proxyMetadata entry as an env var.
    let web_image = json!({"imageType": "distroless"});
    assert_eq!(
        proxy_config_env(&web),
        json!({"concurrency": 3, "proxyMetadata": {"MESHPILOT_TEST": "one"}, "image": web_image})
    );
    assert_eq!(env_value(&web, "MESHPILOT_TEST").as_deref(), Some("one"));
    let image = web["image"].as_str().unwrap();
    assert!(image.ends_with("-distroless"), "imageType distroless: {image}");

    // Not selected: the namespace-wide resource only; the default image.
    env.kubectl_apply(&pod("db", json!({"app": "db"}), json!({}))).unwrap();
    let db = istio_proxy(env, "db");
    assert_eq!(proxy_config_env(&db), json!({"concurrency": 3}));
    assert!(env_value(&db, "MESHPILOT_TEST").is_none());
    assert!(!db["image"].as_str().unwrap().ends_with("-distroless"), "{}", db["image"]);

    // The annotation sits between the namespace-wide and the selecting resource.
    let annotated =
        json!({"proxy.istio.io/config": "concurrency: 4\nproxyMetadata: {MESHPILOT_TEST: annotation}\n"});
    env.kubectl_apply(&pod("web-annotated", json!({"app": "web"}), annotated)).unwrap();
    assert_eq!(
        proxy_config_env(&istio_proxy(env, "web-annotated")),
        json!({"concurrency": 4, "proxyMetadata": {"MESHPILOT_TEST": "one"}, "image": web_image})
    );

    // A changed resource: the next pods show it, with no restart.
    env.kubectl_apply(&proxy_config("namespace-wide", json!({"concurrency": 5}))).unwrap();
    let mut attempt = 0;
    let changed =
        wait_for_blocking("a pod injected with the changed ProxyConfig", Duration::from_secs(90), || {
            attempt += 1;
            let name = format!("after-{attempt}");
            env.kubectl_apply(&pod(&name, json!({"app": "web"}), json!({}))).ok()?;
            let proxy = istio_proxy(env, &name);
            (proxy_config_env(&proxy)["concurrency"] == 5).then_some(proxy)
        })
        .unwrap();
    assert_eq!(
        proxy_config_env(&changed),
        json!({"concurrency": 5, "proxyMetadata": {"MESHPILOT_TEST": "one"}, "image": web_image})
    );
}
