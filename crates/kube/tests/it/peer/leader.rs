//! Leader election against the real kube-apiserver, on istiod's lock kinds (a ConfigMap for most shared
//! locks, a Lease for the status lock and per-revision locks): one leader among electors of one lock
//! (the record's holderIdentity names it), takeover when the leader stops (released lock) or dies
//! (expired lock), per-revision locks independent of each other.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::{coordination::v1::Lease, core::v1::ConfigMap};
use kube::Api;
use meshpilot_kube::{
    leader::{
        ANALYZE_CONTROLLER, CONFIGMAP_RECORD_ANNOTATION, GATEWAY_STATUS_CONTROLLER, HOLDER_KEY_ANNOTATION,
        LeaderElection, LeaderElectionOptions, Leadership, LockKind, LockRecord, LockScope,
        STATUS_CONTROLLER, read_record, run_while_leading,
    },
    testenv::TestEnv,
};
use model::shutdown_channel;

fn options(namespace: &str, identity: &str, revision: &str) -> LeaderElectionOptions {
    LeaderElectionOptions {
        namespace: namespace.into(),
        identity: identity.into(),
        revision: revision.into(),
        ..LeaderElectionOptions::default()
    }
    // Short lease so a test of expiry finishes quickly (istiod: 30 s).
    .with_ttl(Duration::from_secs(2))
}

async fn client(env: &TestEnv) -> kube::Client {
    meshpilot_kube::client::connection(env.client_config().await.unwrap()).unwrap().client
}

async fn record(client: &kube::Client, ns: &str, name: &str, kind: LockKind) -> Option<LockRecord> {
    read_record(client, ns, name, kind).await.unwrap()
}

async fn wait_holder(client: &kube::Client, ns: &str, name: &str, kind: LockKind, want: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if record(client, ns, name, kind).await.is_some_and(|r| r.holder_identity == want) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "lock {name} never held by {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_leading(l: &Leadership, want: bool, who: &str) {
    let mut rx = l.subscribe();
    tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|v| *v == want))
        .await
        .unwrap_or_else(|_| panic!("{who} never became leading={want}"))
        .unwrap();
}

/// Two electors of `lock` (kind `kind`) in namespace `ns`: one leads, the other waits through several
/// renewals, and takes over when the first stops and releases.
async fn one_leader_and_takeover_on_release(ns: &str, lock: &str, kind: LockKind) {
    let env = TestEnv::shared_by(file!());
    support::namespace(env, ns);
    let client = client(env).await;

    let (stop_a, shutdown_a) = shutdown_channel();
    let a =
        LeaderElection::new(client.clone(), lock, LockScope::Shared, options(ns, "a", "")).start(shutdown_a);
    wait_leading(&a, true, "a").await;
    let (_stop_b, shutdown_b) = shutdown_channel();
    let b =
        LeaderElection::new(client.clone(), lock, LockScope::Shared, options(ns, "b", "")).start(shutdown_b);

    // b has tried (its read saw a's record) and does not lead; the record names a, with the revision
    // as holder key.
    wait_holder(&client, ns, lock, kind, "a").await;
    let first = record(&client, ns, lock, kind).await.unwrap();
    assert_eq!(first.holder_key, "default");
    assert!(a.is_leader());
    // Several of b's retry periods pass while a renews: a's renewTime moves, b never leads.
    loop {
        let now = record(&client, ns, lock, kind).await.unwrap();
        if now.renew_time != first.renew_time {
            assert_eq!(now.holder_identity, "a");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!b.is_leader(), "two leaders for one lock");

    // Stopping a releases the lock; b takes it.
    stop_a.trigger();
    a.stopped().await;
    wait_leading(&b, true, "b").await;
    wait_holder(&client, ns, lock, kind, "b").await;
    assert_eq!(record(&client, ns, lock, kind).await.unwrap().leader_transitions, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_and_takeover_on_release_configmap_lock() {
    one_leader_and_takeover_on_release("leader-release", ANALYZE_CONTROLLER, LockKind::ConfigMap).await;
    // The record is where istiod's ConfigMapLock reads it, and no Lease of that name exists (an istiod
    // replica would otherwise lead beside us).
    let client = client(TestEnv::shared_by(file!())).await;
    let cm =
        Api::<ConfigMap>::namespaced(client.clone(), "leader-release").get(ANALYZE_CONTROLLER).await.unwrap();
    let text = &cm.metadata.annotations.unwrap()[CONFIGMAP_RECORD_ANNOTATION];
    let json: serde_json::Value = serde_json::from_str(text).unwrap();
    // client-go's record: b holds it (or released it, its test being over), one transition (a → b),
    // times as metav1.Time (RFC 3339, whole seconds).
    assert!(matches!(json["holderIdentity"].as_str(), Some("b" | "")), "{text}");
    assert_eq!(json["holderKey"], "default", "{text}");
    assert_eq!(json["leaderTransitions"], 1, "{text}");
    for time in ["acquireTime", "renewTime"] {
        let t = json[time].as_str().unwrap_or_default();
        assert!(t.len() == 20 && t.ends_with('Z') && t.parse::<jiff::Timestamp>().is_ok(), "{time}: {text}");
    }
    let leases = Api::<Lease>::namespaced(client, "leader-release");
    assert!(leases.get_opt(ANALYZE_CONTROLLER).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_and_takeover_on_release_lease_lock() {
    one_leader_and_takeover_on_release("leader-release-lease", STATUS_CONTROLLER, LockKind::Lease).await;
    let client = client(TestEnv::shared_by(file!())).await;
    let lease =
        Api::<Lease>::namespaced(client, "leader-release-lease").get(STATUS_CONTROLLER).await.unwrap();
    assert_eq!(lease.metadata.annotations.unwrap()[HOLDER_KEY_ANNOTATION], "default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_after_the_leader_dies_without_release() {
    let env = TestEnv::shared_by(file!());
    support::namespace(env, "leader-expiry");
    let client = client(env).await;
    let lock = "istio-leader";

    let (_stop_a, shutdown_a) = shutdown_channel();
    let a = LeaderElection::new(client.clone(), lock, LockScope::Shared, options("leader-expiry", "a", ""))
        .start(shutdown_a);
    wait_leading(&a, true, "a").await;
    let (_stop_b, shutdown_b) = shutdown_channel();
    let b = LeaderElection::new(client.clone(), lock, LockScope::Shared, options("leader-expiry", "b", ""))
        .start(shutdown_b);
    a.abort();
    // The record still names a until it expires; then b takes it over.
    wait_leading(&b, true, "b").await;
    wait_holder(&client, "leader-expiry", lock, LockKind::ConfigMap, "b").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_have_their_own_leaders() {
    let env = TestEnv::shared_by(file!());
    support::namespace(env, "leader-revisions");
    let client = client(env).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "leader-revisions");
    let ns = "leader-revisions";

    let (_stop, shutdown) = shutdown_channel();
    let stable = LeaderElection::new(
        client.clone(),
        GATEWAY_STATUS_CONTROLLER,
        LockScope::PerRevision,
        options(ns, "istiod-stable", "stable"),
    )
    .start(shutdown.clone());
    let canary = LeaderElection::new(
        client.clone(),
        GATEWAY_STATUS_CONTROLLER,
        LockScope::PerRevision,
        options(ns, "istiod-canary", "canary"),
    )
    .start(shutdown.clone());
    wait_leading(&stable, true, "stable").await;
    wait_leading(&canary, true, "canary").await;
    wait_holder(&client, ns, "istio-gateway-status-leader-stable", LockKind::Lease, "istiod-stable").await;
    wait_holder(&client, ns, "istio-gateway-status-leader-canary", LockKind::Lease, "istiod-canary").await;
    // Per-revision locks carry no holder key (istiod: no takeover between revisions).
    let lease = api.get("istio-gateway-status-leader-stable").await.unwrap();
    assert!(!lease.metadata.annotations.unwrap_or_default().contains_key(HOLDER_KEY_ANNOTATION));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_while_leading_runs_one_term_per_leadership() {
    let env = TestEnv::shared_by(file!());
    support::namespace(env, "leader-run");
    let client = client(env).await;
    let (stop, shutdown) = shutdown_channel();
    let a = LeaderElection::new(client, "istio-leader", LockScope::Shared, options("leader-run", "a", ""))
        .start(shutdown.clone());
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let (ended_tx, mut ended) = tokio::sync::mpsc::unbounded_channel();
    let runner = tokio::spawn(run_while_leading(a.subscribe(), shutdown, move |mut term| {
        let (started_tx, ended_tx) = (started_tx.clone(), ended_tx.clone());
        async move {
            started_tx.send(()).unwrap();
            term.wait().await;
            ended_tx.send(()).unwrap();
        }
    }));
    tokio::time::timeout(Duration::from_secs(60), started.recv()).await.unwrap().unwrap();
    stop.trigger();
    tokio::time::timeout(Duration::from_secs(60), ended.recv()).await.unwrap().unwrap();
    runner.await.unwrap();
    a.stopped().await;
}
