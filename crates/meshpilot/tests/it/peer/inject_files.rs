//! The injection files `./var/lib/istio/inject/{config,values}` (istiod's file watcher source) are
//! watched, on the real kube-apiserver: a changed `values` (the proxy image) takes effect for the
//! next pod; a broken `config` is refused, logged, counted and shown in `/debug/configstatusz`, and
//! the last good config stays in force; `/debug/inject` shows the templates in force.

use std::{path::Path, process::Stdio, time::Duration};

use kube_source::testenv::TestEnv;
use meshpilot_testing::wait::wait_for_blocking;
use serde_json::Value;

use crate::webhook_support::{self, Webhook, counter, injection_config_status};

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: injected}}\n\
         spec:\n  serviceAccountName: default\n  containers:\n  - {{name: web, image: nginx}}\n"
    )
}

/// The image of the stored pod's `istio-proxy` (`None` when not injected).
fn proxy_image(env: &TestEnv, name: &str) -> Option<String> {
    let pod: Value =
        serde_json::from_str(&env.kubectl(&["get", "pod", name, "-n", "injected", "-o", "json"]).ok()?)
            .ok()?;
    let spec = &pod["spec"];
    let mut all = spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(spec["containers"].as_array().into_iter().flatten());
    all.find(|c| c["name"] == "istio-proxy")?["image"].as_str().map(str::to_string)
}

/// `/debug/inject` of the control plane whose debug handlers are on `port`.
fn inject_templates(port: u16) -> Value {
    webhook_support::debug_json(port, "/debug/inject").expect("/debug/inject answers 200 with JSON")
}

/// Replaces `dir/name` at once (a new file renamed over it), so that no half-written file is read.
fn replace(dir: &Path, name: &str, text: &str) {
    let temporary = dir.join(format!(".{name}.new"));
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, dir.join(name)).unwrap();
}

#[test]
fn changed_injection_files_apply_and_a_broken_one_keeps_the_last_good() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", "istio-system"]);
    let _ = env.kubectl(&["create", "namespace", "injected"]);
    env.kubectl(&["label", "namespace", "injected", "istio-injection=enabled", "--overwrite"]).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let inject_dir = webhook_support::write_chart_injection_files(dir.path());
    let server = Webhook::start_in(dir.path(), env, &[], &[("POD_NAMESPACE", "istio-system")], Stdio::null());
    let _cleanup =
        webhook_support::install_injector_webhook(env, &server.url.replace("/validate", "/inject"));

    env.kubectl_apply(&pod("first")).unwrap();
    let first = proxy_image(env, "first").expect("injected from the files");
    assert!(first.contains("proxyv2"), "{first}");
    let status = wait_for_blocking("configstatusz", Duration::from_secs(30), || {
        injection_config_status(server.monitoring)
    })
    .unwrap();
    assert_eq!(status["source"], "files ./var/lib/istio/inject", "{status}");
    assert_eq!(status["errors"], 0, "{status}");
    // istiod's /debug/inject (served on 15014 too, as istiod): the raw templates in force.
    let templates = inject_templates(server.monitoring);
    assert!(templates["sidecar"].as_str().is_some_and(|t| t.contains("istio-proxy")), "{templates}");

    // values: another proxy image (a full reference, which the chart's templates use as is).
    let changed_image = "registry.example.com/meshpilot-test/proxy:changed";
    let mut values: Value =
        serde_json::from_str(&std::fs::read_to_string(inject_dir.join("values")).unwrap()).unwrap();
    values["global"]["proxy"]["image"] = changed_image.into();
    replace(&inject_dir, "values", &serde_json::to_string_pretty(&values).unwrap());
    let mut attempt = 0;
    wait_for_blocking("a pod injected with the changed image", Duration::from_secs(90), || {
        attempt += 1;
        let name = format!("changed-{attempt}");
        env.kubectl_apply(&pod(&name)).ok()?;
        let image = proxy_image(env, &name);
        assert!(image.is_some(), "every pod is injected");
        (image.as_deref() == Some(changed_image)).then_some(())
    })
    .unwrap();

    // config: a template that does not parse. Refused; the last good (with the changed image) stays.
    let config = std::fs::read_to_string(inject_dir.join("config")).unwrap();
    let broken = config.replacen("templates:", "templates:\n  broken: '{{ if }}'", 1);
    assert_ne!(broken, config, "the chart's config has templates");
    replace(&inject_dir, "config", &broken);
    let status = wait_for_blocking("the broken config refused", Duration::from_secs(90), || {
        (counter(server.monitoring, "meshpilot_injector_config_errors") >= 1.0)
            .then(|| injection_config_status(server.monitoring))?
            .filter(|s| s["lastError"].is_string())
    })
    .unwrap();
    assert_eq!(status["errors"], 1, "{status}");
    assert!(status["lastError"].as_str().unwrap().contains("config"), "{status}");
    assert!(
        inject_templates(server.monitoring).get("broken").is_none(),
        "the refused template is not in force"
    );
    env.kubectl_apply(&pod("during-broken")).unwrap();
    assert_eq!(
        proxy_image(env, "during-broken").as_deref(),
        Some(changed_image),
        "the last good config injects"
    );

    // Fixed again: applied, the error cleared.
    replace(&inject_dir, "config", &config);
    wait_for_blocking("the fixed config applied", Duration::from_secs(90), || {
        injection_config_status(server.monitoring).filter(|s| s["lastError"].is_null() && s["errors"] == 1)
    })
    .unwrap();
}
