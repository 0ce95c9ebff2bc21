//! Process faults of `meshpilot discovery` (the real binary) with two real Envoys (a sidecar and an
//! ingress gateway) carrying requests to an echo server (docs/RELIABILITY.md):
//!
//! - `kill -9` and a restart on the same ports: the Envoys keep serving while the control plane is
//!   gone, reconnect (the test bootstrap's ADS retry back-off is 0.1–0.5 s), ACK the new stream's
//!   responses, and no cluster or listener is modified or removed (SotW resends identical resources;
//!   Delta sends nothing the `initial_resource_versions` already hold). SotW and Delta.
//! - SIGTERM: meshpilot ends every xDS stream, exits with status 0 and logs it; the Envoys keep
//!   serving and a second replica (the other address of their `xds-grpc` cluster) takes them over.
//!
//! Needs Envoy (scripts/install-envoy.sh). The long form under load is `scripts/reliability/kill9.sh`.

use crate::process;

use std::time::Duration;

use meshpilot_testing::{AdsApi, Bootstrap, Envoy, wait_for};
use process::{Mesh, Ports, ROUTER, SIDECAR, churn, wait_serving, wait_synced};
use serde_json::json;

async fn connected(envoy: &Envoy) -> Option<u64> {
    envoy.stat("control_plane.connected_state").await.ok().flatten()
}

async fn kill9_and_restart(api: AdsApi) {
    let mesh = Mesh::new().await;
    let ports = Ports::free();
    let mut first = mesh.start(ports, "meshpilot-1.log");
    let sidecar = Envoy::start(&Bootstrap::sidecar("echo-client", ports.grpc, api)).await.unwrap();
    let router = Envoy::start(&Bootstrap::router(ports.grpc, api)).await.unwrap();
    wait_serving(mesh.svc_port, "the sidecar").await;
    wait_serving(mesh.gw_port, "the router").await;
    wait_synced(&first, &[SIDECAR, ROUTER]).await;
    let before = (churn(&sidecar).await, churn(&router).await);

    // kill -9: both Envoys see the stream go away and keep serving their last config.
    first.kill9();
    for envoy in [&sidecar, &router] {
        wait_for("Envoy to see the control plane gone", Duration::from_secs(30), async || {
            (connected(envoy).await == Some(0)).then_some(())
        })
        .await
        .unwrap();
    }
    for _ in 0..5 {
        assert!(mesh.serving().await, "a request failed while the control plane was down");
    }

    // Restart on the same ports: both reconnect and ACK the new process's responses, with no
    // cluster or listener modified or removed and no route reloaded.
    let second = mesh.start(ports, "meshpilot-2.log");
    wait_synced(&second, &[SIDECAR, ROUTER]).await;
    assert_eq!(connected(&sidecar).await, Some(1));
    assert_eq!(connected(&router).await, Some(1));
    let after = (churn(&sidecar).await, churn(&router).await);
    assert_eq!(before.0, after.0, "sidecar config churn across the restart");
    assert_eq!(before.1, after.1, "router config churn across the restart");
    assert!(mesh.serving().await, "a request failed after the restart");
    if api == AdsApi::Delta {
        // Delta: the reconnecting Envoys' `initial_resource_versions` match every resource, so the new
        // process sends none (only empty responses, for a nonce to ACK).
        let log = second.log_text();
        let pushes: Vec<&str> = log.lines().filter(|l| l.contains(": PUSH ")).collect();
        assert!(!pushes.is_empty(), "no response logged:\n{log}");
        let sent: Vec<&&str> = pushes.iter().filter(|l| !l.contains("resources:0 ")).collect();
        assert!(sent.is_empty(), "resources resent to a Delta client that holds them:\n{sent:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn envoy_keeps_serving_across_kill9_and_restart_with_no_churn_sotw() {
    kill9_and_restart(AdsApi::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn envoy_keeps_serving_across_kill9_and_restart_with_no_churn_delta() {
    kill9_and_restart(AdsApi::Delta).await;
}

/// `bootstrap` with a second control-plane address in its `xds-grpc` cluster (two replicas behind
/// one name, as istiod's Service).
fn with_replica(bootstrap: &Bootstrap, replica: std::net::SocketAddr) -> serde_json::Value {
    let mut config = bootstrap.to_json();
    let endpoints =
        &mut config["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"];
    endpoints.as_array_mut().unwrap().push(json!({"endpoint": {"address": {"socket_address": {
        "address": replica.ip().to_string(), "port_value": replica.port()
    }}}}));
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_ends_streams_and_exits_and_another_replica_takes_over() {
    let mesh = Mesh::new().await;
    let (ports_a, ports_b) = (Ports::free(), Ports::free());
    let mut a = mesh.start(ports_a, "meshpilot-a.log");
    // Replica B is not running yet, so both Envoys end up on A.
    let sidecar = Envoy::start_json(&with_replica(
        &Bootstrap::sidecar("echo-client", ports_a.grpc, AdsApi::Delta),
        ports_b.grpc,
    ))
    .await
    .unwrap();
    let router =
        Envoy::start_json(&with_replica(&Bootstrap::router(ports_a.grpc, AdsApi::Sotw), ports_b.grpc))
            .await
            .unwrap();
    wait_serving(mesh.svc_port, "the sidecar").await;
    wait_serving(mesh.gw_port, "the router").await;
    wait_synced(&a, &[SIDECAR, ROUTER]).await;
    let before = (churn(&sidecar).await, churn(&router).await);
    let b = mesh.start(ports_b, "meshpilot-b.log");

    a.sigterm();
    let status = a.wait_exit().await;
    let log = a.log_text();
    assert!(status.success(), "meshpilot exited with {status} after SIGTERM:\n{log}");
    assert!(
        log.contains("closed xDS streams streams_closed=2"),
        "no 'closed xDS streams' in the log:\n{log}"
    );
    assert!(log.contains("stopped: xDS streams closed, listeners and tasks ended"), "{log}");

    // The Envoys keep serving and move to replica B.
    assert!(mesh.serving().await, "a request failed after the control plane stopped");
    wait_synced(&b, &[SIDECAR, ROUTER]).await;
    assert_eq!(before, (churn(&sidecar).await, churn(&router).await), "config churn on moving to replica B");
    assert!(mesh.serving().await, "a request failed after the move to replica B");
}

/// After `MESHPILOT_MEMORY_TRIM_AFTER_CLOSES` xDS connections closed and the churn stopped,
/// meshpilot hands its freed heap back to the OS (glibc's `malloc_trim`; docs/RELIABILITY.md
/// "Connection storms"): counted in `meshpilot_memory_trims` and logged with the RSS before and
/// after. Two Envoys connect and go; with the threshold at 2 one trim follows, not before both left.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_heap_is_trimmed_after_connections_close() {
    let mesh = Mesh::new().await;
    let ports = Ports::free();
    let mp = mesh.start_with(&[], &[("MESHPILOT_MEMORY_TRIM_AFTER_CLOSES", "2")], ports, "meshpilot.log");
    let trims = async || mp.metric("meshpilot_memory_trims").await;
    let sidecar = Envoy::start(&Bootstrap::sidecar("echo-client", ports.grpc, AdsApi::Sotw)).await.unwrap();
    let router = Envoy::start(&Bootstrap::router(ports.grpc, AdsApi::Delta)).await.unwrap();
    wait_synced(&mp, &[SIDECAR, ROUTER]).await;
    drop(sidecar);
    // One close is under the threshold: the connection count in syncz is the positive signal that
    // meshpilot saw it, and a trim would have needed a second close.
    wait_for("the sidecar's stream gone from syncz", Duration::from_secs(30), async || {
        let syncz = mp.syncz().await?;
        (syncz.as_array()?.len() == 1).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(trims().await, Some(0.0), "trimmed after one close:\n{}", mp.log_text());
    drop(router);
    wait_for("a trim after the second close", Duration::from_secs(30), async || {
        trims().await.filter(|n| *n >= 1.0)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mp.log_text()));
    let log = mp.log_text();
    assert!(log.contains("returned freed heap to the operating system after connection churn"), "{log}");
}
