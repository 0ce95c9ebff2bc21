//! `meshpilot discovery --kubeconfig` (the real binary) when its kube-apiserver restarts
//! (docs/RELIABILITY.md "kube-apiserver restart / watch expiry"), with a private etcd + kube-apiserver
//! and two real Envoys (a Delta sidecar and a SotW ingress gateway) carrying requests:
//!
//! - the Istio config (ServiceEntry, WorkloadEntry, Gateway, VirtualService) lives in the cluster;
//! - writes the watches do not follow (ConfigMaps) move the cluster's resource version past theirs,
//!   then the API server stops and starts again: its new watch cache cannot resume the old watches
//!   (410 Gone, "too old resource version"), so every watch relists;
//! - the Envoys serve throughout, a ServiceEntry created after the restart reaches the sidecar, no
//!   cluster or listener is removed from either Envoy (the relist is diffed: unchanged objects raise
//!   nothing), and the pushes are counted: a storm (a push per relisted object) would show as many
//!   more than the one change.
//!
//! Needs Envoy (scripts/install-envoy.sh) and the kube test env (scripts/kube-testenv.sh build).

use crate::process;

use std::{ffi::OsStr, time::Duration};

use kube_source::testenv::TestEnv;
use meshpilot_testing::{AdsApi, Bootstrap, EchoServer, Envoy, free_port, wait_for};
use process::{Meshpilot, NS, Ports, ROUTER, SIDECAR, churn, echo_mesh, through, wait_serving, wait_synced};

/// ServiceEntry `late.test.svc.cluster.local:port` with an inline endpoint `127.0.0.1:upstream`.
fn late_service(port: u16, upstream: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: late, namespace: {NS}}}\n\
         spec:\n  hosts: [late.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  endpoints:\n  \
         - {{address: 127.0.0.1, ports: {{http: {upstream}}}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_api_server_restart_with_410_relists_removes_nothing_from_proxies() {
    let env = TestEnv::start().expect("kube test environment (scripts/kube-testenv.sh build)");
    env.kubectl_apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: istio-system}}\n"
    ))
    .unwrap();
    let echo = EchoServer::start("echo").await.unwrap();
    let (svc_port, gw_port, late_port) = (free_port(), free_port(), free_port());
    env.kubectl_apply(&echo_mesh(svc_port, echo.addr.port(), gw_port)).unwrap();

    let work = tempfile::tempdir().unwrap();
    let kubeconfig = env.kubeconfig();
    let args = [OsStr::new("--kubeconfig"), kubeconfig.as_os_str()];
    let mp = Meshpilot::start_with(&args, Ports::free(), work.path().join("meshpilot.log"));
    let sidecar =
        Envoy::start(&Bootstrap::sidecar("echo-client", mp.ports.grpc, AdsApi::Delta)).await.unwrap();
    let router = Envoy::start(&Bootstrap::router(mp.ports.grpc, AdsApi::Sotw)).await.unwrap();
    wait_serving(svc_port, "the sidecar").await;
    wait_serving(gw_port, "the router").await;
    wait_synced(&mp, &[SIDECAR, ROUTER]).await;
    let before = (churn(&sidecar).await, churn(&router).await);
    let pushes_before = mp.metric("pilot_xds_pushes").await.unwrap();
    let rss_before = mp.rss_kib();

    // Writes no watch of meshpilot follows, then an API server restart: the new watch cache starts
    // past the watches' resource versions.
    for i in 0..5 {
        env.kubectl(&["create", "configmap", &format!("filler-{i}"), "-n", NS]).unwrap();
    }
    env.stop_apiserver().unwrap();
    assert!(through(svc_port).await && through(gw_port).await, "a request failed with the API server down");
    env.start_apiserver().unwrap();
    env.kubectl_apply(&late_service(late_port, echo.addr.port())).unwrap();

    // The change made after the restart arrives: the watches resumed (relisted).
    wait_for("the late ServiceEntry to route through the sidecar", Duration::from_secs(60), async || {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], late_port));
        matches!(meshpilot_testing::get(addr, &format!("late.{NS}.svc.cluster.local"), "/", &[]).await,
                 Ok((200, body)) if body.starts_with("echo"))
        .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\nmeshpilot log:\n{}", mp.log_text()));
    wait_synced(&mp, &[SIDECAR, ROUTER]).await;
    assert!(through(svc_port).await && through(gw_port).await, "a request failed after the restart");

    let after = (churn(&sidecar).await, churn(&router).await);
    for (name, b, a) in [("sidecar", &before.0, &after.0), ("router", &before.1, &after.1)] {
        for removed in ["cluster_manager.cluster_removed", "listener_manager.listener_removed"] {
            assert_eq!(b[removed], a[removed], "{name}: {removed} across the API server restart");
        }
    }
    let pushes = mp.metric("pilot_xds_pushes").await.unwrap() - pushes_before;
    let log = mp.log_text();
    let expired: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("watch failed") && (l.contains("410") || l.contains("too old resource version"))
        })
        .collect();
    for l in expired.iter().take(3) {
        println!("{l}");
    }
    let expired = expired.len();
    println!(
        "API server restart: {pushes} xDS responses pushed (2 proxies), {expired} watch restarts on 410 Gone; \
         RSS {rss_before:?} → {:?} KiB\nsidecar churn {:?} → {:?}\nrouter churn {:?} → {:?}",
        mp.rss_kib(),
        before.0,
        after.0,
        before.1,
        after.1
    );
    // The scenario did make the watches expire (else it would not test a relist).
    assert!(expired > 0, "no watch restarted on 410 Gone / too old resource version:\n{log}");
    // One change (a new service) is one push per proxy: CDS, EDS, LDS and RDS responses at most
    // (5 types × 2 proxies, with slack for a second debounced push of the same change). A push per
    // relisted object would be several times that.
    assert!(pushes <= 20.0, "push storm: {pushes} responses for one change\n{log}");
}
