//! `--keepaliveMaxServerConnectionAge` (istiod's; docs/RELIABILITY.md "Connection age"): `meshpilot
//! discovery` (the real binary) closes every xDS connection gracefully at its age (HTTP/2 GOAWAY,
//! then the connection dropped after istiod's 10 s grace), and two real Envoys (a SotW sidecar and a
//! Delta ingress gateway) come back on new connections with their config intact.
//!
//! Needs Envoy (scripts/install-envoy.sh).

use crate::process;

use std::{collections::BTreeSet, time::Duration};

use meshpilot_testing::{AdsApi, Bootstrap, Envoy, http_get, wait_for};
use process::{Mesh, Meshpilot, Ports, ROUTER, SIDECAR, churn, wait_serving, wait_synced};
use serde_json::Value as Json;

/// The connection ids of `/debug/adsz` (`None` while it does not answer).
async fn connection_ids(mp: &Meshpilot) -> Option<BTreeSet<String>> {
    let (status, body) = http_get(mp.ports.http, "/debug/adsz", &[]).await.ok()?;
    let adsz: Json = serde_json::from_str(&body).ok().filter(|_| status == 200)?;
    let clients = adsz["clients"].as_array()?;
    Some(clients.iter().filter_map(|c| Some(c["connectionId"].as_str()?.to_owned())).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_are_closed_at_their_max_age_and_envoy_comes_back_with_its_config() {
    let mesh = Mesh::new().await;
    let ports = Ports::free();
    let mp = mesh.start_with(&["--keepaliveMaxServerConnectionAge", "2s"], &[], ports, "meshpilot.log");
    let sidecar = Envoy::start(&Bootstrap::sidecar("echo-client", ports.grpc, AdsApi::Sotw)).await.unwrap();
    let router = Envoy::start(&Bootstrap::router(ports.grpc, AdsApi::Delta)).await.unwrap();
    wait_serving(mesh.svc_port, "the sidecar").await;
    wait_serving(mesh.gw_port, "the router").await;
    wait_synced(&mp, &[SIDECAR, ROUTER]).await;
    let first = wait_for("both proxies' connections in /debug/adsz", Duration::from_secs(60), async || {
        connection_ids(&mp).await.filter(|ids| ids.len() == 2)
    })
    .await
    .unwrap();
    let before = (churn(&sidecar).await, churn(&router).await);

    // Each Envoy opens a second connection to its control plane (the first one was closed) …
    for envoy in [&sidecar, &router] {
        envoy
            .wait_stat("cluster.xds-grpc.upstream_cx_total", 2, Duration::from_secs(120))
            .await
            .unwrap_or_else(|e| panic!("{e}\nmeshpilot log:\n{}", mp.log_text()));
    }
    // … and meshpilot holds each proxy on a new connection only (the first ones' state released) …
    wait_for("both proxies on new connections in /debug/adsz", Duration::from_secs(120), async || {
        let now = connection_ids(&mp).await?;
        let renewed = [SIDECAR, ROUTER]
            .iter()
            .all(|p| now.iter().any(|id| id.starts_with(&format!("{p}-")) && !first.contains(id)));
        (renewed && now.is_disjoint(&first)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\nfirst connections: {first:?}\nmeshpilot log:\n{}", mp.log_text()));
    // … where every response sent is ACKed.
    wait_synced(&mp, &[SIDECAR, ROUTER]).await;

    // The config survived the move: requests still route, nothing was modified or removed.
    assert!(mesh.serving().await, "a request failed after the reconnection");
    let after = (churn(&sidecar).await, churn(&router).await);
    assert_eq!(before.0, after.0, "sidecar config churn across the reconnection");
    assert_eq!(before.1, after.1, "router config churn across the reconnection");
    let log = mp.log_text();
    assert!(log.contains("ADS: connection reached its max age, closing it gracefully (GOAWAY)"), "{log}");
    assert!(!log.contains(" ERROR "), "an error logged:\n{log}");
    assert!(!log.contains("accepted but not used"), "the flag is reported as not used:\n{log}");
}
