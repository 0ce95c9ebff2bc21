//! Sidecar `ingress` listeners through a real Envoy (INTERCEPTION_MODE NONE, an Envoy connected
//! directly, so plaintext): an HTTP and a TCP ingress port each bind `127.0.0.1:PORT` (the proxy's IP)
//! and forward to a local echo server through `inbound|PORT||` (`defaultEndpoint`). Needs Envoy
//! (scripts/install-envoy.sh).

use crate::support;

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::{AdsApi, EchoOptions, EchoServer, Envoy, Plane, free_port, request, wait_for};
use support::NS;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sidecar_ingress_forwards_to_the_default_endpoint() {
    let app = EchoServer::start_with("app", EchoOptions { echo_head: true, ..EchoOptions::default() })
        .await
        .unwrap();
    let (http_port, tcp_port) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let sidecar = format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: app, namespace: {NS}}}\nspec:\n  \
         workloadSelector: {{labels: {{app: app}}}}\n  ingress:\n  \
         - port: {{number: {http_port}, protocol: HTTP, name: http}}\n    defaultEndpoint: 127.0.0.1:{app_port}\n  \
         - port: {{number: {tcp_port}, protocol: TCP, name: tcp}}\n    defaultEndpoint: 127.0.0.1:{app_port}\n",
        app_port = app.addr.port()
    );
    std::fs::write(dir.path().join("sidecar.yaml"), sidecar).unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&plane.sidecar("app", NS, AdsApi::Sotw)).await.unwrap();

    for (what, port) in [("HTTP ingress", http_port), ("TCP ingress", tcp_port)] {
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let r = wait_for(what, Duration::from_secs(10), async || {
            let r = request(addr, "app.example", "/hello", &[("x-forwarded-client-cert", "By=spoofed")])
                .await
                .ok()?;
            (r.status == 200).then_some(r)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
        assert!(r.body.starts_with("app"), "{what}: {r:?}");
        assert!(
            r.body.lines().any(|l| l.starts_with("get /hello")),
            "{what}: the app saw the request: {r:?}"
        );
        if port == http_port {
            // A plaintext connection has no client certificate: with APPEND_FORWARD Envoy removes a
            // client-supplied header, so the app cannot be handed a forged identity.
            assert!(
                !r.body.contains("x-forwarded-client-cert"),
                "{what}: forged XFCC reached the app: {r:?}"
            );
        }
    }
    assert!(app.hits() >= 2);
    envoy.assert_no_rejected_updates().await;
    let dump = envoy.config_dump(false).await.unwrap().to_string();
    assert!(dump.contains(&format!("\"name\":\"127.0.0.1_{http_port}\"")), "listener named BIND_PORT");
    assert!(dump.contains(&format!("inbound|{http_port}||")), "inbound cluster");
}
