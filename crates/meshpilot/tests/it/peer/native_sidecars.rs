//! `ENABLE_NATIVE_SIDECARS=auto` (istiod's default) decided from the cluster's Nodes, on the real
//! kube-apiserver: with a Node whose kubelet is v1.32.0 the injected `istio-proxy` is an ordinary
//! container; once that Node is gone (every node left, here none, runs 1.33 or later) it is a native
//! sidecar, an init container with `restartPolicy: Always`.

use std::{process::Stdio, time::Duration};

use kube_source::testenv::TestEnv;
use meshpilot_testing::wait::wait_for_blocking;
use serde_json::Value;

use crate::webhook_support::{self, Webhook};

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: injected}}\n\
         spec:\n  serviceAccountName: default\n  containers:\n  - {{name: web, image: nginx}}\n"
    )
}

/// Where the stored pod `name` has `istio-proxy`: `"containers"`, or `"initContainers"` with its
/// restart policy.
fn proxy_place(env: &TestEnv, name: &str) -> Option<String> {
    let pod: Value =
        serde_json::from_str(&env.kubectl(&["get", "pod", name, "-n", "injected", "-o", "json"]).ok()?)
            .ok()?;
    for list in ["containers", "initContainers"] {
        if let Some(proxy) =
            pod["spec"][list].as_array().into_iter().flatten().find(|c| c["name"] == "istio-proxy")
        {
            return Some(match proxy["restartPolicy"].as_str() {
                Some(policy) => format!("{list} restartPolicy={policy}"),
                None => list.to_string(),
            });
        }
    }
    None
}

/// Creates pods until one is stored with `istio-proxy` at `want` (the Node watch needs a moment to
/// see a change); every pod is injected somewhere. 90 s is a hang guard, not a timing assertion.
fn wait_for_proxy_in(env: &TestEnv, prefix: &str, want: &str) {
    let mut attempt = 0;
    wait_for_blocking(&format!("a pod with istio-proxy in {want}"), Duration::from_secs(90), || {
        attempt += 1;
        let name = format!("{prefix}-{attempt}");
        env.kubectl_apply(&pod(&name)).ok()?;
        let place = proxy_place(env, &name);
        assert!(place.is_some(), "pod {name} is injected");
        (place.as_deref() == Some(want)).then_some(())
    })
    .unwrap();
}

/// A Node `name` whose kubelet is `version`: the object, then its status as a kubelet reports it
/// (through the status subresource).
fn node_with_kubelet(env: &TestEnv, name: &str, version: &str) {
    env.kubectl_apply(&format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\n")).unwrap();
    let status = format!(r#"{{"status":{{"nodeInfo":{{"kubeletVersion":"{version}"}}}}}}"#);
    env.kubectl(&["patch", "node", name, "--subresource=status", "--type=merge", "-p", &status]).unwrap();
}

#[test]
fn auto_follows_the_kubelet_versions_of_the_nodes() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", "istio-system"]);
    let _ = env.kubectl(&["create", "namespace", "injected"]);
    env.kubectl(&["label", "namespace", "injected", "istio-injection=enabled", "--overwrite"]).unwrap();

    node_with_kubelet(env, "old-kubelet", "v1.32.0");

    let dir = tempfile::tempdir().unwrap();
    webhook_support::write_chart_injection_files(dir.path());
    // ENABLE_NATIVE_SIDECARS unset: auto.
    let server = Webhook::start_in(dir.path(), env, &[], &[("POD_NAMESPACE", "istio-system")], Stdio::null());
    let _cleanup =
        webhook_support::install_injector_webhook(env, &server.url.replace("/validate", "/inject"));

    wait_for_proxy_in(env, "old", "containers");

    // The old node is gone: no node left below 1.33.
    env.kubectl(&["delete", "node", "old-kubelet"]).unwrap();
    wait_for_proxy_in(env, "native", "initContainers restartPolicy=Always");

    // A node with kubelet 1.31 joins: off again.
    node_with_kubelet(env, "older-kubelet", "v1.31.4");
    wait_for_proxy_in(env, "older", "containers");
    env.kubectl(&["delete", "node", "older-kubelet"]).unwrap();
}
