//! meshpilot beside a real istiod against one kube-apiserver (a mixed rollout): they share one root, the
//! self-signed CA istiod keeps in `istio-ca-secret`, so the webhook caBundle both patch in is the same;
//! and they elect one `istio-ca-root-cert` writer between them on istiod's ConfigMap lock
//! `istio-namespace-controller-election`: meshpilot waits while istiod holds it and takes it when istiod
//! stops, then publishes the root into new namespaces. (When meshpilot's locks were Leases, both led at
//! once.)
//!
//! istiod is the cached build of `scripts/istio-peer.sh build`, run by `scripts/peer/run-istiod.sh` against the
//! shared kube-apiserver test environment; a missing build fails the test (naming the script), never skips it.

use crate::istio_peer::Istiod;
use crate::webhook_support;

use std::{path::Path, time::Duration};

use base64::Engine;
use kube_source::testenv::TestEnv;
use meshpilot_testing::{free_port, http::request_blocking, wait::wait_for_blocking};
use webhook_support::{DEFAULT_CONFIGURATIONS, DeleteWebhooks, Webhook, review_with_bundle, vwc};

const LOCK: &str = "istio-namespace-controller-election";

/// Waits (120 s at most: a limit, not a timing assertion) until `check` gives a value; on failure the
/// message carries meshpilot's log.
fn wait_for<T>(log: &Path, what: &str, check: impl FnMut() -> Option<T>) -> T {
    wait_for_blocking(what, Duration::from_secs(120), check).unwrap_or_else(|e| {
        panic!("{e}\n--- meshpilot log ---\n{}", std::fs::read_to_string(log).unwrap_or_default())
    })
}

/// The holder of the namespace-controller lock.
fn holder(env: &TestEnv) -> Option<String> {
    webhook_support::lock_holder(env, "istio-system", LOCK)
}

/// The value of `name{lock="istio-namespace-controller-election"}` on meshpilot's /metrics (`None` when
/// absent).
fn lock_metric(port: u16, name: &str) -> Option<f64> {
    let r = request_blocking(([127, 0, 0, 1], port).into(), "localhost", "/metrics", &[]).ok()?;
    let series = format!("{{lock=\"{LOCK}\"}}");
    r.body
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(&series))
        .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
}

#[test]
fn meshpilot_beside_istiod_shares_the_root_and_one_root_cert_writer() {
    let env = TestEnv::shared_by(file!());
    let _cleanup = DeleteWebhooks(env, DEFAULT_CONFIGURATIONS);
    let work = tempfile::tempdir().unwrap();
    let log = work.path().join("meshpilot.log");
    let istiod = Istiod::start(&work.path().join("istiod"), &env.kubeconfig(), "");
    // istiod made its root (istio-ca-secret) and leads the namespace controller.
    wait_for(&log, "istiod to hold the namespace-controller lock", || {
        (holder(env).as_deref() == Some("istiod-0")).then_some(())
    });
    let istiod_root = env
        .kubectl(&[
            "get",
            "secret",
            "istio-ca-secret",
            "-n",
            "istio-system",
            "-o",
            "jsonpath={.data.root-cert\\.pem}",
        ])
        .expect("istiod's root in istio-ca-secret");

    let meshpilot = Webhook::start(
        env,
        &["--secure-grpc-addr", &format!("127.0.0.1:{}", free_port())],
        &[
            ("POD_NAMESPACE", "istio-system"),
            ("POD_NAME", "meshpilot-0"),
            ("RUST_LOG", "info,meshpilot_kube::leader=debug"),
        ],
        std::fs::File::create(&log).unwrap().into(),
    );
    let (mon, url) = (meshpilot.monitoring, meshpilot.url.clone());

    // meshpilot has read istiod's record (and respected it) at least twice; it does not lead, the lock
    // still names istiod, and no Lease of that name was made beside it.
    wait_for(&log, "meshpilot to find the lock held by istiod", || {
        lock_metric(mon, "meshpilot_leader_election_held_by_other").filter(|n| *n >= 2.0)
    });
    assert_eq!(lock_metric(mon, "meshpilot_leader_election_leading"), Some(0.0));
    assert_eq!(holder(env).as_deref(), Some("istiod-0"));
    assert!(
        env.kubectl(&["get", "lease", LOCK, "-n", "istio-system"]).is_err(),
        "a Lease beside istiod's lock"
    );

    // One root: the caBundle meshpilot advertises (istiod patches the same configurations) is istiod's,
    // and the webhook's certificate verifies against it.
    let config = wait_for(&log, "istiod-default-validator with failurePolicy Fail", || {
        vwc(env, "istiod-default-validator").filter(|c| c["webhooks"][0]["failurePolicy"] == "Fail")
    });
    assert_eq!(config["webhooks"][0]["clientConfig"]["caBundle"], istiod_root.trim());
    let root_pem =
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(istiod_root.trim()).unwrap())
            .unwrap();
    let answer = review_with_bundle(&url, &root_pem);
    assert!(answer.ends_with("\n200"), "{answer}");

    // istiod stops (and releases the lock): meshpilot takes it over.
    istiod.stop();
    wait_for(&log, "meshpilot to lead the namespace controller", || {
        (holder(env).as_deref() == Some("meshpilot-0")).then_some(())
    });
    wait_for(&log, "meshpilot's leading gauge", || {
        (lock_metric(mon, "meshpilot_leader_election_leading") == Some(1.0)).then_some(())
    });
    // As the namespace controller it publishes the (shared) root into a namespace made now.
    env.kubectl(&["create", "namespace", "after-istiod"]).unwrap();
    wait_for(&log, "istio-ca-root-cert in a new namespace", || {
        env.kubectl(&[
            "get",
            "configmap",
            "istio-ca-root-cert",
            "-n",
            "after-istiod",
            "-o",
            "jsonpath={.data.root-cert\\.pem}",
        ])
        .ok()
        .filter(|published| published.trim() == root_pem.trim())
    });
}
