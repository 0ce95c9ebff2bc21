//! Sidecar egress listeners with `port`, `bind` and `captureMode`, and a Gateway server with `bind`,
//! through a real Envoy (INTERCEPTION_MODE NONE, loopback). Needs Envoy (scripts/install-envoy.sh).

use crate::support;

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::{AdsApi, EchoServer, Envoy, Plane, free_port, request, wait_for};
use support::{NS, router, sidecar};

/// A ServiceEntry `<name>.<NS>.svc.cluster.local` on HTTP `port` with one WorkloadEntry at
/// `127.0.0.1:upstream`.
fn service(name: &str, port: u16, upstream: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {NS}}}\n\
         spec:\n  hosts: [{name}.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: {name}}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: {name}, namespace: {NS}}}\n\
         spec:\n  address: 127.0.0.1\n  ports: {{http: {upstream}}}\n  labels: {{app: {name}}}\n---\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_egress_port_bound_to_loopback_serves_its_hosts_only() {
    let svc = EchoServer::start("svc").await.unwrap();
    let other = EchoServer::start("other").await.unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    // Both services on `port`; the egress entry on that port imports `svc` only, the catch-all
    // `other` (whose port the entry already holds on 127.0.0.1: Istio's locked listener).
    let config = format!(
        "{}{}apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: client, namespace: {NS}}}\n\
         spec:\n  workloadSelector: {{labels: {{app: client}}}}\n  egress:\n  \
         - port: {{number: {port}, protocol: HTTP, name: http}}\n    bind: 127.0.0.1\n    captureMode: NONE\n    \
         hosts: [\"./svc.{NS}.svc.cluster.local\"]\n  - hosts: [\"./*\"]\n  \
         outboundTrafficPolicy: {{mode: REGISTRY_ONLY}}\n",
        service("svc", port, svc.addr.port()),
        service("other", port, other.addr.port()),
    );
    std::fs::write(dir.path().join("egress.yaml"), config).unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&sidecar("client", &plane, AdsApi::Sotw)).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let host = format!("svc.{NS}.svc.cluster.local");
    let r = wait_for("svc through 127.0.0.1:PORT", Duration::from_secs(10), async || {
        let r = request(addr, &host, "/", &[]).await.ok()?;
        (r.status == 200).then_some(r)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    assert_eq!(r.body, "svc");
    // `other` is not a host of the listener's entry: the table's catch-all (REGISTRY_ONLY) refuses it.
    let refused = request(addr, &format!("other.{NS}.svc.cluster.local"), "/", &[]).await.unwrap();
    assert_eq!(refused.status, 502, "{refused:?}");
    assert_eq!(other.hits(), 0);
    envoy.assert_no_rejected_updates().await;
    let dump = envoy.config_dump(false).await.unwrap().to_string();
    assert!(dump.contains(&format!("\"name\":\"127.0.0.1_{port}\"")), "listener named BIND_PORT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_server_with_a_bind_listens_there_with_its_own_route() {
    let svc = EchoServer::start("svc").await.unwrap();
    let (svc_port, gw_port) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: istio-system}}\n\
         spec:\n  selector: {{istio: ingressgateway}}\n  servers:\n  \
         - port: {{number: {gw_port}, name: http, protocol: HTTP}}\n    bind: 127.0.0.1\n    hosts: [\"*\"]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: svc, namespace: {NS}}}\n\
         spec:\n  hosts: [\"*\"]\n  gateways: [istio-system/gw]\n  http:\n  \
         - route: [{{destination: {{host: svc.{NS}.svc.cluster.local, port: {{number: {svc_port}}}}}}}]\n",
        service("svc", svc_port, svc.addr.port()),
    );
    std::fs::write(dir.path().join("gateway.yaml"), config).unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&router(&plane, AdsApi::Sotw)).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], gw_port).into();
    let r = wait_for("svc through the gateway's bind", Duration::from_secs(10), async || {
        let r = request(addr, "anything.example", "/", &[]).await.ok()?;
        (r.status == 200).then_some(r)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    assert_eq!(r.body, "svc");
    let dump = envoy.config_dump(false).await.unwrap().to_string();
    assert!(dump.contains(&format!("\"name\":\"127.0.0.1_{gw_port}\"")), "listener named BIND_PORT");
    assert!(
        dump.contains(&format!("\"route_config_name\":\"http.{gw_port}.127.0.0.1\"")),
        "route http.PORT.BIND"
    );
}
