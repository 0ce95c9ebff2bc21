//! Three meshpilot replicas against one API server, as Istio's istiod chart runs istiod's replicas:
//! they share the chart's leader locks in their namespace and the root in `istio-ca-secret`, and two
//! real Envoys name all three behind one `xds-grpc` cluster (the Service). One replica leads the
//! namespace controller (the `istio-ca-root-cert` writer) while the others wait; it is killed
//! (`kill -9`): the Envoys it served reconnect to the others and converge with no config churn, and
//! another replica takes the lock and publishes the root into a namespace made afterwards.

use std::time::Duration;

use kube_source::testenv::TestEnv;
use meshpilot_testing::{AdsApi, Bootstrap, Envoy, free_port, http_get, wait_for};
use serde_json::{Value, json};

use crate::process::{Mesh, Meshpilot, Ports, ROUTER, SIDECAR, churn, synced, wait_serving, wait_synced};

const NAMESPACE: &str = "replicas-system";
const LOCK: &str = "istio-namespace-controller-election";

/// `bootstrap` with every replica's address in its `xds-grpc` cluster.
fn with_replicas(bootstrap: &Bootstrap, replicas: &[Ports]) -> Value {
    let mut config = bootstrap.to_json();
    config["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"] = replicas
        .iter()
        .map(|p| {
            json!({"endpoint": {"address": {"socket_address": {
                "address": p.grpc.ip().to_string(), "port_value": p.grpc.port()
            }}}})
        })
        .collect();
    config
}

/// The holder of the namespace-controller lock.
fn holder(env: &TestEnv) -> Option<String> {
    crate::webhook_support::lock_holder(env, NAMESPACE, LOCK)
}

/// `name{lock="istio-namespace-controller-election"}` on a replica's /metrics.
async fn lock_metric(replica: &Meshpilot, name: &str) -> Option<f64> {
    let (status, body) = http_get(replica.ports.monitoring, "/metrics", &[]).await.ok()?;
    let series = format!("{{lock=\"{LOCK}\"}}");
    (status == 200)
        .then(|| {
            body.lines()
                .filter(|l| l.starts_with(name) && l.contains(&series))
                .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        })
        .flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_share_the_locks_and_a_killed_ones_proxies_converge_on_the_others() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", NAMESPACE]);
    let mesh = Mesh::new().await;
    let kubeconfig = env.kubeconfig();
    let ports = [Ports::free(), Ports::free(), Ports::free()];
    let names = ["replica-a", "replica-b", "replica-c"];
    let start = |i: usize| {
        let secure = format!("127.0.0.1:{}", free_port());
        mesh.start_with(
            &["--kubeconfig", kubeconfig.to_str().unwrap(), "--secureGRPCAddr", &secure, "--httpsAddr="],
            &[("POD_NAMESPACE", NAMESPACE), ("POD_NAME", names[i])],
            ports[i],
            &format!("{}.log", names[i]),
        )
    };

    // Replica A alone: both Envoys (which name all three) end up on it, and it takes the lock.
    let mut a = start(0);
    let sidecar = Envoy::start_json(&with_replicas(
        &Bootstrap::sidecar("echo-client", ports[0].grpc, AdsApi::Delta),
        &ports,
    ))
    .await
    .unwrap();
    let router = Envoy::start_json(&with_replicas(&Bootstrap::router(ports[0].grpc, AdsApi::Sotw), &ports))
        .await
        .unwrap();
    wait_serving(mesh.svc_port, "the sidecar").await;
    wait_serving(mesh.gw_port, "the router").await;
    wait_synced(&a, &[SIDECAR, ROUTER]).await;
    wait_for("replica-a to hold the namespace-controller lock", Duration::from_secs(120), async || {
        (holder(env).as_deref() == Some("replica-a")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", a.log_text()));
    let before = (churn(&sidecar).await, churn(&router).await);

    // B and C join and wait: each sees the lock held by another, and does not lead.
    let (b, c) = (start(1), start(2));
    for replica in [&b, &c] {
        wait_for("a follower to see the lock held by another", Duration::from_secs(120), async || {
            lock_metric(replica, "meshpilot_leader_election_held_by_other").await.filter(|n| *n >= 1.0)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", replica.log_text()));
        assert_eq!(lock_metric(replica, "meshpilot_leader_election_leading").await, Some(0.0));
    }
    assert_eq!(holder(env).as_deref(), Some("replica-a"));

    // A dies: the Envoys converge on B and C, with no config churn, and keep routing.
    a.kill9();
    wait_for("both proxies synced on the remaining replicas", Duration::from_secs(120), async || {
        let (sb, sc) = (b.syncz().await?, c.syncz().await?);
        [SIDECAR, ROUTER].iter().all(|p| synced(&sb, p) || synced(&sc, p)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- b ---\n{}\n--- c ---\n{}", b.log_text(), c.log_text()));
    assert_eq!(before, (churn(&sidecar).await, churn(&router).await), "config churn on moving off replica-a");
    assert!(mesh.serving().await, "a request failed after replica-a died");

    // Another replica takes the lock (after the dead holder's lease runs out) and writes the root into
    // a namespace made now.
    let new_leader =
        wait_for("replica-b or replica-c to take the lock", Duration::from_secs(180), async || {
            holder(env).filter(|h| h == "replica-b" || h == "replica-c")
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- b ---\n{}\n--- c ---\n{}", b.log_text(), c.log_text()));
    let _ = env.kubectl(&["create", "namespace", "after-replica-a"]);
    wait_for(
        "istio-ca-root-cert in a namespace made after the failover",
        Duration::from_secs(120),
        async || env.kubectl(&["get", "configmap", "istio-ca-root-cert", "-n", "after-replica-a"]).ok(),
    )
    .await
    .unwrap_or_else(|e| {
        panic!("{e} (leader {new_leader})\n--- b ---\n{}\n--- c ---\n{}", b.log_text(), c.log_text())
    });
    let leader = if new_leader == "replica-b" { &b } else { &c };
    assert_eq!(lock_metric(leader, "meshpilot_leader_election_leading").await, Some(1.0));
}
