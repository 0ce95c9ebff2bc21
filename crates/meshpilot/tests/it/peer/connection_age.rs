//! `--keepaliveMaxServerConnectionAge` (istiod's; docs/RELIABILITY.md "Connection age"): `meshpilot
//! discovery` (the real binary) closes every xDS connection gracefully at its age (HTTP/2 GOAWAY,
//! then the connection dropped after istiod's 10 s grace), and two real Envoys (a SotW sidecar and a
//! Delta ingress gateway) come back on new connections with their config intact.
//!
//! Needs Envoy (scripts/install-envoy.sh).

use crate::process;

use std::{collections::BTreeMap, time::Duration};

use meshpilot_testing::{AdsApi, Bootstrap, Envoy, wait_for};
use process::{Mesh, Meshpilot, Ports, ROUTER, SIDECAR, churn, synced, wait_serving, wait_synced};
use serde_json::Value as Json;

/// Each proxy's connection id in `syncz`.
fn connection_ids(syncz: &Json) -> BTreeMap<String, String> {
    syncz
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["proxy"].as_str()?.to_owned(), p["connectionId"].as_str()?.to_owned())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_are_closed_at_their_max_age_and_envoy_comes_back_with_its_config() {
    let mesh = Mesh::new().await;
    let ports = Ports::free();
    let config = mesh.work.path().join("config");
    let mp = Meshpilot::start_with(
        &[
            "--config-dir".as_ref(),
            config.as_os_str(),
            "--keepaliveMaxServerConnectionAge".as_ref(),
            "2s".as_ref(),
        ],
        ports,
        mesh.work.path().join("meshpilot.log"),
    );
    let sidecar = Envoy::start(&Bootstrap::sidecar("echo-client", ports.grpc, AdsApi::Sotw)).await.unwrap();
    let router = Envoy::start(&Bootstrap::router(ports.grpc, AdsApi::Delta)).await.unwrap();
    wait_serving(mesh.svc_port, "the sidecar").await;
    wait_serving(mesh.gw_port, "the router").await;
    wait_synced(&mp, &[SIDECAR, ROUTER]).await;
    let first = connection_ids(&mp.syncz().await.unwrap());
    let before = (churn(&sidecar).await, churn(&router).await);

    // Each Envoy opens a second connection to its control plane (the first one was closed) …
    for envoy in [&sidecar, &router] {
        envoy
            .wait_stat("cluster.xds-grpc.upstream_cx_total", 2, Duration::from_secs(120))
            .await
            .unwrap_or_else(|e| panic!("{e}\nmeshpilot log:\n{}", mp.log_text()));
    }
    // … and meshpilot serves both proxies on new connections, every response ACKed.
    wait_for("both proxies synced on new connections", Duration::from_secs(120), async || {
        let syncz = mp.syncz().await?;
        let renewed: Vec<Json> = syncz
            .as_array()?
            .iter()
            .filter(|p| {
                let (proxy, id) = (p["proxy"].as_str(), p["connectionId"].as_str());
                proxy.is_some_and(|proxy| first.get(proxy).map(String::as_str) != id)
            })
            .cloned()
            .collect();
        let renewed = Json::Array(renewed);
        [SIDECAR, ROUTER].iter().all(|p| synced(&renewed, p)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\nfirst connections: {first:?}\nmeshpilot log:\n{}", mp.log_text()));

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
