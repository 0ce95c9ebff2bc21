//! The Secret watch for credentialName secrets against the real kube-apiserver: the first list, then
//! an update and a delete arrive as changes with the Secret's data; service-account-token Secrets are
//! filtered out by Istio's field selector (shown with a Helm release Secret).

use std::{collections::BTreeMap, sync::Mutex, time::Duration};

use meshpilot_kube::{
    secrets::{SecretChange, watch_secrets},
    testenv::TestEnv,
};
use model::shutdown_channel;

const NS: &str = "creds-watch";

fn secret(name: &str, kind: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {NS}}}\ntype: {kind}\nstringData: {{cacert: {value}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_listed_and_watched_with_their_data() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", NS]);
    env.kubectl_apply(&secret("listed", "Opaque", "one")).unwrap();
    let client = meshpilot_kube::client::connection(env.client_config().await.unwrap()).unwrap().client;

    // Per Secret of the test namespace: its latest `cacert`, `None` once deleted.
    let seen: &'static Mutex<BTreeMap<String, Option<Vec<u8>>>> = Box::leak(Box::default());
    let (trigger, shutdown) = shutdown_channel();
    let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(watch_secrets(
        client,
        (Duration::from_millis(100), Duration::from_secs(1)),
        move |changes| {
            let mut seen = seen.lock().unwrap();
            for c in changes {
                match c {
                    SecretChange::Upsert { key, data } if key.0 == NS => {
                        seen.insert(key.1, Some(data.get("cacert").cloned().unwrap_or_default()));
                    }
                    SecretChange::Delete { key } if key.0 == NS => {
                        seen.insert(key.1, None);
                    }
                    _ => {}
                }
            }
        },
        move || {
            let _ = synced_tx.send(());
        },
        shutdown,
    ));
    tokio::time::timeout(Duration::from_secs(30), synced_rx).await.unwrap().unwrap();
    let get = |name: &str| seen.lock().unwrap().get(name).cloned();
    assert_eq!(get("listed"), Some(Some(b"one".to_vec())), "in the first list");

    env.kubectl_apply(&secret("listed", "Opaque", "two")).unwrap();
    // A Helm release Secret (filtered out), then another Secret: when the second arrives, the first was
    // already processed by the API server's watch in order, so its absence is meaningful.
    env.kubectl_apply(&secret("release", "helm.sh/release.v1", "x")).unwrap();
    env.kubectl_apply(&secret("after", "Opaque", "three")).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while get("after").is_none() || get("listed") != Some(Some(b"two".to_vec())) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watch events never arrived: {:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get("release"), None, "Helm release Secrets are not watched (Istio's field selector)");

    env.kubectl(&["delete", "secret", "listed", "-n", NS]).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while get("listed") != Some(None) {
        assert!(tokio::time::Instant::now() < deadline, "delete never arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(trigger);
}
