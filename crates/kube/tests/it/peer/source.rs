//! The CRD config source against a real kube-apiserver (scripts/kube-testenv.sh), one shared per test
//! binary; each test works in its own namespace.

use crate::support;

use api::{Kind, Spec};
use config::parse::ParseOptions;
use meshpilot_kube::testenv::TestEnv;
use model::{ConfigStore, Event, StoreError};
use support::{namespace, start, virtual_service, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_arrive_and_invalid_ones_are_skipped_with_a_warning() {
    let env = TestEnv::shared_by(file!());
    let ns = "src-invalid";
    namespace(env, ns);
    env.kubectl_apply(&virtual_service(ns, "good", "reviews", "reviews")).unwrap();
    // Accepted by the CRD's schema, refused by Istio's validation: "bad host!" is not a host name.
    env.kubectl_apply(&virtual_service(ns, "bad", "bad host!", "reviews")).unwrap();
    let running = start(env, &[ns], &[Kind::VirtualService]).await;
    running.synced().await;

    let source = &running.source;
    assert!(source.get(Kind::VirtualService, ns, "good").is_some());
    assert!(source.get(Kind::VirtualService, ns, "bad").is_none());
    assert!(running.saw(Event::Add, "src-invalid/good"));
    assert!(!running.saw(Event::Add, "src-invalid/bad"));
    let rejected = source.rejected();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0].key.name, "bad");
    assert!(rejected[0].errors.iter().any(|e| e.path.starts_with("spec.hosts")), "{:?}", rejected[0].errors);

    // Fixing the object makes it arrive; the rest kept working meanwhile.
    env.kubectl_apply(&virtual_service(ns, "bad", "ratings", "ratings")).unwrap();
    wait_for("the fixed object", || running.saw(Event::Add, "src-invalid/bad")).await;
    assert!(source.rejected().is_empty());

    // A valid object that turns invalid keeps its last valid version.
    env.kubectl_apply(&virtual_service(ns, "good", "bad host!", "reviews")).unwrap();
    wait_for("the rejection", || !source.rejected().is_empty()).await;
    let kept = source.get(Kind::VirtualService, ns, "good").unwrap();
    let Spec::VirtualService(vs) = &kept.spec else { panic!("{kept:?}") };
    assert_eq!(vs.hosts, ["reviews"]);
    assert!(source.rejected()[0].kept_previous);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_reach_the_api_server_and_conflicts_are_typed() {
    let env = TestEnv::shared_by(file!());
    let ns = "src-writes";
    namespace(env, ns);
    let running = start(env, &[ns], &[Kind::VirtualService]).await;
    running.synced().await;
    let source = running.source.clone();

    let text = virtual_service(ns, "w", "reviews", "reviews");
    let parsed = config::parse::parse_text("t.yaml", &text, &ParseOptions::default());
    let config = parsed[0].config.clone().unwrap();

    // The store's writes block; call them off the async workers.
    let (s, c) = (source.clone(), config.clone());
    let created = tokio::task::spawn_blocking(move || s.create(c)).await.unwrap().unwrap();
    assert!(!created.is_empty());
    wait_for("the created object's Add", || running.saw(Event::Add, "src-writes/w")).await;
    let (s, c) = (source.clone(), config.clone());
    let again = tokio::task::spawn_blocking(move || s.create(c)).await.unwrap();
    assert!(matches!(again, Err(StoreError::AlreadyExists(_))), "{again:?}");

    // Update on the current version succeeds; the same (now stale) version conflicts.
    let mut update = config.clone();
    update.meta.resource_version = created.clone();
    let Spec::VirtualService(vs) = &mut update.spec else { unreachable!() };
    vs.hosts = vec!["reviews.other".into()];
    let (s, u) = (source.clone(), update.clone());
    let updated = tokio::task::spawn_blocking(move || s.update(u)).await.unwrap().unwrap();
    assert_ne!(updated, created);
    let (s, u) = (source.clone(), update.clone());
    let stale = tokio::task::spawn_blocking(move || s.update(u)).await.unwrap();
    match stale {
        Err(StoreError::Conflict { given, current, .. }) => {
            assert_eq!(given, created);
            assert_eq!(current, updated);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    wait_for("the update event", || running.saw(Event::Update, "src-writes/w")).await;

    // Status writes keep the spec.
    let mut status = update.clone();
    status.meta.resource_version = String::new();
    status.status = Some(serde_json::json!({"observedGeneration": 2}));
    let s = source.clone();
    tokio::task::spawn_blocking(move || s.update_status(status)).await.unwrap().unwrap();

    // Delete with a stale version conflicts; without one it deletes.
    let (s, v) = (source.clone(), created.clone());
    let stale =
        tokio::task::spawn_blocking(move || s.delete(Kind::VirtualService, "src-writes", "w", Some(&v)))
            .await
            .unwrap();
    assert!(matches!(stale, Err(StoreError::Conflict { .. })), "{stale:?}");
    let s = source.clone();
    tokio::task::spawn_blocking(move || s.delete(Kind::VirtualService, "src-writes", "w", None))
        .await
        .unwrap()
        .unwrap();
    wait_for("the delete event", || running.saw(Event::Delete, "src-writes/w")).await;
    let s = source.clone();
    let missing =
        tokio::task::spawn_blocking(move || s.delete(Kind::VirtualService, "src-writes", "w", None))
            .await
            .unwrap();
    assert!(matches!(missing, Err(StoreError::NotFound(_))), "{missing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_denials_are_backend_errors_in_plain_words() {
    let env = TestEnv::shared_by(file!());
    let config = meshpilot_kube::client_config(Some(&env.viewer_kubeconfig())).await.unwrap();
    let source = meshpilot_kube::KubeSource::new(config, meshpilot_kube::KubeSourceOptions::default());
    let text = virtual_service("default", "denied", "reviews", "reviews");
    let config =
        config::parse::parse_text("t.yaml", &text, &ParseOptions::default())[0].config.clone().unwrap();
    let err = tokio::task::spawn_blocking(move || source.create(config)).await.unwrap().unwrap_err();
    let StoreError::Backend { message, .. } = &err else { panic!("{err:?}") };
    assert!(message.contains("forbidden") && message.contains("RBAC"), "{message}");
}

/// An EnvoyFilter whose patch value (free-form in the CRD's schema) nests `depth` objects.
fn envoy_filter(namespace: &str, name: &str, depth: usize) -> String {
    let value = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    format!(
        r#"{{"apiVersion":"networking.istio.io/v1alpha3","kind":"EnvoyFilter","metadata":{{"name":"{name}","namespace":"{namespace}"}},"spec":{{"configPatches":[{{"applyTo":"CLUSTER","patch":{{"operation":"MERGE","value":{value}}}}}]}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_nested_too_deep_is_rejected_alone_and_its_kind_still_lists() {
    let env = TestEnv::shared_by(file!());
    let ns = "src-deep";
    namespace(env, ns);
    env.kubectl_apply(&envoy_filter(ns, "good", 2)).unwrap();
    // The API server stores it (its JSON limit is 10,000 levels); serde_json reads 128.
    env.kubectl_apply(&envoy_filter(ns, "deep", 400)).unwrap();
    let running = start(env, &[ns], &[Kind::EnvoyFilter]).await;
    // The kind's list is read (before, the one deep object failed the whole list, for ever).
    running.synced().await;
    let source = &running.source;
    assert!(source.get(Kind::EnvoyFilter, ns, "good").is_some());
    assert!(source.get(Kind::EnvoyFilter, ns, "deep").is_none());
    let rejected = source.rejected();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!((rejected[0].key.namespace.as_str(), rejected[0].key.name.as_str()), (ns, "deep"));
    assert!(rejected[0].errors[0].message.contains("deeper than 128 levels"), "{:?}", rejected[0].errors);

    // Through the watch as well: a good object turned deep keeps its last good version; objects
    // created after it still arrive.
    env.kubectl_apply(&envoy_filter(ns, "good", 400)).unwrap();
    wait_for("the deep update rejected", || source.rejected().iter().any(|r| r.key.name == "good")).await;
    assert!(source.get(Kind::EnvoyFilter, ns, "good").is_some());
    assert!(source.rejected().iter().find(|r| r.key.name == "good").unwrap().kept_previous);
    env.kubectl_apply(&envoy_filter(ns, "later", 3)).unwrap();
    wait_for("an object after the deep ones", || running.saw(Event::Add, "src-deep/later")).await;
}
