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

/// Sidecar `ingress[].tls` with `ENABLE_TLS_ON_SIDECAR_INGRESS` (istiod's experimental feature): the
/// inbound listener of an `HTTPS` ingress port terminates TLS with the configured certificate files
/// (served over SDS to the sidecar, which proves its namespace with a workload certificate on the
/// secure xDS port) and forwards plain HTTP to the `defaultEndpoint`; a client that does not speak TLS
/// gets no response.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sidecar_ingress_tls_terminates_with_the_configured_certificate() {
    use super::envoy_sds::{file_secret_plane_with, write_pair};
    use support::{secure::Secure, tls::TestCa};

    let app = EchoServer::start("app").await.unwrap();
    let certs = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    let issued = ca.issue("sidecar-ingress");
    write_pair(certs.path(), &issued);
    let port = free_port();
    let sidecar = format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: app, namespace: {NS}}}\nspec:\n  \
         workloadSelector: {{labels: {{app: app}}}}\n  ingress:\n  \
         - port: {{number: {port}, protocol: HTTPS, name: https}}\n    defaultEndpoint: 127.0.0.1:{app_port}\n    \
         tls: {{mode: SIMPLE, serverCertificate: {cert}, privateKey: {key}}}\n",
        app_port = app.addr.port(),
        cert = certs.path().join("cert.pem").display(),
        key = certs.path().join("key.pem").display(),
    );
    std::fs::write(config.path().join("sidecar.yaml"), sidecar).unwrap();
    let plane = file_secret_plane_with(config.path(), certs.path(), true).await;
    let secure = Secure::start(&plane).await;
    let envoy =
        Envoy::start_json(&secure.secure_bootstrap(plane.sidecar("app", NS, AdsApi::Sotw), NS, "app"))
            .await
            .unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let client = ca.client();
    let (status, body, served) = wait_for("HTTPS to the ingress port", Duration::from_secs(10), async || {
        support::tls::https_get(&client, addr).await.ok()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{:#?}\n{}", plane.secrets.status(), envoy.log_tail(40)));
    assert_eq!((status, body.as_str()), (200, "app"));
    assert_eq!(served, issued.2, "Envoy presents the configured certificate");
    // Plain HTTP on the same port: the listener's only chain wants TLS.
    let plain = request(addr, "app.example", "/", &[]).await;
    assert!(plain.as_ref().map_or(true, |r| r.status != 200), "plain HTTP was served: {plain:?}");
    envoy.assert_no_rejected_updates().await;
    let dump = envoy.config_dump(false).await.unwrap().to_string();
    assert!(dump.contains("envoy.filters.listener.tls_inspector"), "the listener inspects TLS");
}
