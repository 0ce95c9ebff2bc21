//! Mesh config `discoverySelectors` against a real kube-apiserver: the CRD source and the service
//! registry read only objects of selected namespaces, and follow namespace label changes with adds
//! and deletes (Istio's discovery namespace filter).

use crate::support;

use api::Kind;
use meshpilot_kube::{DiscoverySelectors, KubeRegistryOptions, KubeSourceOptions, testenv::TestEnv};
use model::{
    ConfigStore, Event,
    service::{RegistryEvent, ServiceDiscovery},
};
use support::{namespace, start_registry_with, start_with, virtual_service, wait_for};

fn selectors() -> DiscoverySelectors {
    DiscoverySelectors::from_json(&serde_json::json!([{"matchLabels": {"istio-discovery": "enabled"}}]))
        .unwrap()
}

fn label(env: &TestEnv, ns: &str, on: bool) {
    let arg = if on { "istio-discovery=enabled" } else { "istio-discovery-" };
    env.kubectl(&["label", "namespace", ns, arg, "--overwrite"]).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_of_unselected_namespaces_is_not_read_and_follows_labels() {
    let env = TestEnv::shared_by(file!());
    let (on, off) = ("dsel-src-on", "dsel-src-off");
    namespace(env, on);
    namespace(env, off);
    label(env, on, true);
    env.kubectl_apply(&virtual_service(on, "vs", "reviews", "reviews")).unwrap();
    env.kubectl_apply(&virtual_service(off, "vs", "ratings", "ratings")).unwrap();
    let options = KubeSourceOptions { discovery_selectors: selectors(), ..KubeSourceOptions::default() };
    let running = start_with(env, options, &[Kind::VirtualService]).await;
    running.synced().await;
    let source = &running.source;

    // A labeled namespace's objects are there from the start; an unlabeled one's are not.
    assert!(source.get(Kind::VirtualService, on, "vs").is_some());
    assert!(running.saw(Event::Add, "dsel-src-on/vs"));
    assert!(source.get(Kind::VirtualService, off, "vs").is_none());
    assert!(!running.saw(Event::Add, "dsel-src-off/vs"));

    // Labeling the namespace makes its objects appear (Add).
    label(env, off, true);
    wait_for("the newly selected namespace's VirtualService", || running.saw(Event::Add, "dsel-src-off/vs"))
        .await;
    assert!(source.get(Kind::VirtualService, off, "vs").is_some());

    // Removing the label makes them disappear (Delete); the selected namespace is untouched.
    label(env, off, false);
    wait_for("the de-selected namespace's Delete", || running.saw(Event::Delete, "dsel-src-off/vs")).await;
    assert!(source.get(Kind::VirtualService, off, "vs").is_none());
    assert!(source.get(Kind::VirtualService, on, "vs").is_some());

    // An object changed while its namespace is unselected is not read; selecting brings its latest version.
    env.kubectl_apply(&virtual_service(off, "vs", "details", "details")).unwrap();
    env.kubectl_apply(&virtual_service(off, "vs2", "details", "details")).unwrap();
    label(env, off, true);
    wait_for("the re-selected namespace's objects", || {
        source.get(Kind::VirtualService, off, "vs2").is_some()
    })
    .await;
    let vs = source.get(Kind::VirtualService, off, "vs").unwrap();
    let api::Spec::VirtualService(spec) = &vs.spec else { panic!("{vs:?}") };
    assert_eq!(spec.hosts, ["details"]);
}

fn saw_service(events: &[RegistryEvent], hostname: &str, event: Event) -> bool {
    events
        .iter()
        .any(|e| matches!(e, RegistryEvent::Service(s) if s.hostname == hostname && s.event == event))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_of_unselected_namespaces_are_not_read_and_follow_labels() {
    let env = TestEnv::shared_by(file!());
    let (on, off) = ("dsel-reg-on", "dsel-reg-off");
    namespace(env, on);
    namespace(env, off);
    label(env, on, true);
    let service = |ns: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  ports: [{{name: http, port: 80}}]\n"
        )
    };
    env.kubectl_apply(&service(on)).unwrap();
    env.kubectl_apply(&service(off)).unwrap();
    let options = KubeRegistryOptions { discovery_selectors: selectors(), ..KubeRegistryOptions::default() };
    let running = start_registry_with(env, options).await;
    let r = &running.registry;
    let (host_on, host_off) = ("web.dsel-reg-on.svc.cluster.local", "web.dsel-reg-off.svc.cluster.local");
    let events = || running.events.lock().unwrap().clone();

    wait_for("the selected namespace's Service", || r.get_service(host_on, on).is_some()).await;
    assert!(r.get_service(host_off, off).is_none());
    assert!(!saw_service(&events(), host_off, Event::Add));

    label(env, off, true);
    wait_for("the newly selected namespace's Service", || r.get_service(host_off, off).is_some()).await;
    assert!(saw_service(&events(), host_off, Event::Add));

    label(env, off, false);
    wait_for("the de-selected namespace's Service deleted", || r.get_service(host_off, off).is_none()).await;
    assert!(saw_service(&events(), host_off, Event::Delete));
    assert!(r.get_service(host_on, on).is_some());
    assert!(!saw_service(&events(), host_on, Event::Delete));
}
