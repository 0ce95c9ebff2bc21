//! Leader election on a Lease against the real kube-apiserver: one leader among electors of one lock
//! (the Lease's holderIdentity names it), takeover when the leader stops (released lease) or dies
//! (expired lease), per-revision locks independent of each other.

mod support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use meshpilot_kube::{
    leader::{
        GATEWAY_STATUS_CONTROLLER, HOLDER_KEY_ANNOTATION, LeaderElection, LeaderElectionOptions, Leadership,
        LockScope, run_while_leading,
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

async fn holder(api: &Api<Lease>, name: &str) -> Option<String> {
    api.get_opt(name)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

async fn wait_holder(api: &Api<Lease>, name: &str, want: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if holder(api, name).await.as_deref() == Some(want) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "lease {name} never held by {want}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_and_takeover_on_release() {
    let env = TestEnv::shared();
    support::namespace(env, "leader-release");
    let client = client(env).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "leader-release");
    let lock = "istio-analyze-leader";

    let (stop_a, shutdown_a) = shutdown_channel();
    let a = LeaderElection::new(client.clone(), lock, LockScope::Shared, options("leader-release", "a", ""))
        .start(shutdown_a);
    wait_leading(&a, true, "a").await;
    let (_stop_b, shutdown_b) = shutdown_channel();
    let b = LeaderElection::new(client.clone(), lock, LockScope::Shared, options("leader-release", "b", ""))
        .start(shutdown_b);

    // b has tried (its lease read saw a's record) and does not lead; the lease names a.
    wait_holder(&api, lock, "a").await;
    let lease = api.get(lock).await.unwrap();
    assert_eq!(lease.metadata.annotations.unwrap()[HOLDER_KEY_ANNOTATION], "default");
    assert!(a.is_leader());
    // Several of b's retry periods pass while a renews: a's renewTime moves, b never leads.
    let renewed = lease.spec.unwrap().renew_time.unwrap();
    loop {
        let now = api.get(lock).await.unwrap().spec.unwrap();
        if now.renew_time.unwrap() != renewed {
            assert_eq!(now.holder_identity.as_deref(), Some("a"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!b.is_leader(), "two leaders for one lock");

    // Stopping a releases the lease; b takes it.
    stop_a.trigger();
    a.stopped().await;
    wait_leading(&b, true, "b").await;
    wait_holder(&api, lock, "b").await;
    let spec = api.get(lock).await.unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_after_the_leader_dies_without_release() {
    let env = TestEnv::shared();
    support::namespace(env, "leader-expiry");
    let client = client(env).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "leader-expiry");
    let lock = "istio-status-leader";

    let (_stop_a, shutdown_a) = shutdown_channel();
    let a = LeaderElection::new(client.clone(), lock, LockScope::Shared, options("leader-expiry", "a", ""))
        .start(shutdown_a);
    wait_leading(&a, true, "a").await;
    let (_stop_b, shutdown_b) = shutdown_channel();
    let b = LeaderElection::new(client.clone(), lock, LockScope::Shared, options("leader-expiry", "b", ""))
        .start(shutdown_b);
    a.abort();
    // The lease still names a until it expires; then b takes it over.
    wait_leading(&b, true, "b").await;
    wait_holder(&api, lock, "b").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_have_their_own_leaders() {
    let env = TestEnv::shared();
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
    wait_holder(&api, "istio-gateway-status-leader-stable", "istiod-stable").await;
    wait_holder(&api, "istio-gateway-status-leader-canary", "istiod-canary").await;
    // Per-revision locks carry no holder key (istiod: no takeover between revisions).
    let lease = api.get("istio-gateway-status-leader-stable").await.unwrap();
    assert!(!lease.metadata.annotations.unwrap_or_default().contains_key(HOLDER_KEY_ANNOTATION));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_while_leading_runs_one_term_per_leadership() {
    let env = TestEnv::shared();
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
