//! The CRD config source when the cluster changes under it: a CRD installed after the start (and
//! removed again), and an API server restart. Each test has its own etcd + kube-apiserver.

use crate::support;

use api::Kind;
use meshpilot_kube::testenv::TestEnv;
use model::{ConfigStore, Event};
use support::{destination_rule, start, virtual_service, wait_for};

const CRDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/istio-testdata/manifests/charts/base/files/crd-all.gen.yaml"
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_installed_after_the_start_is_picked_up_and_its_removal_deletes() {
    let env = TestEnv::start().expect("test environment");
    env.kubectl(&["delete", "crd", "virtualservices.networking.istio.io", "--wait=true"]).unwrap();
    env.kubectl_apply(&destination_rule("default", "early", "a")).unwrap();
    let running = start(&env, &[], &[Kind::VirtualService, Kind::DestinationRule]).await;
    running.synced().await;
    let source = &running.source;
    assert!(running.saw(Event::Add, "default/early"), "{:?}", running.events());
    assert!(!source.watched_kinds().iter().any(|(k, _)| *k == Kind::VirtualService));

    env.kubectl(&["apply", "--server-side", "-f", CRDS]).unwrap();
    env.kubectl(&["wait", "--for", "condition=established", "crd/virtualservices.networking.istio.io"])
        .unwrap();
    wait_for("the VirtualService watch", || {
        source.watched_kinds().iter().any(|(k, v)| *k == Kind::VirtualService && v == "v1")
    })
    .await;
    env.kubectl_apply(&virtual_service("default", "late", "reviews", "reviews")).unwrap();
    wait_for("the VirtualService created after its CRD", || running.saw(Event::Add, "default/late")).await;

    env.kubectl(&["delete", "crd", "virtualservices.networking.istio.io", "--wait=true"]).unwrap();
    wait_for("the delete of the CRD's object", || running.saw(Event::Delete, "default/late")).await;
    assert!(source.get(Kind::VirtualService, "default", "late").is_none());
    assert!(source.get(Kind::DestinationRule, "default", "early").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restart_causes_no_deletes_and_the_watch_resumes() {
    let env = TestEnv::start().expect("test environment");
    for i in 0..3 {
        env.kubectl_apply(&virtual_service("default", &format!("vs{i}"), "reviews", "reviews")).unwrap();
    }
    let running = start(&env, &[], &[Kind::VirtualService]).await;
    running.synced().await;
    assert_eq!(running.events().len(), 3, "{:?}", running.events());

    env.stop_apiserver().unwrap();
    // Let the watches notice the lost connection and retry (with backoff) against the stopped server.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    env.start_apiserver().unwrap();
    // A change made after the restart arrives: the watch resumed.
    env.kubectl_apply(&virtual_service("default", "after", "reviews", "reviews")).unwrap();
    env.kubectl(&["delete", "virtualservice", "vs0"]).unwrap();
    wait_for("the object created after the restart", || running.saw(Event::Add, "default/after")).await;
    wait_for("the real delete", || running.saw(Event::Delete, "default/vs0")).await;

    let deletes: Vec<_> = running.events().into_iter().filter(|(e, _, _)| *e == Event::Delete).collect();
    assert_eq!(deletes.len(), 1, "only the real delete: {deletes:?}");
    for name in ["vs1", "vs2", "after"] {
        assert!(running.source.get(Kind::VirtualService, "default", name).is_some(), "{name}");
    }
}
