//! Protocol sniffing through a real Envoy sidecar (INTERCEPTION_MODE NONE, loopback): a ServiceEntry
//! port without a declared protocol gets Istio's sniffed outbound listener, so on the same port plaintext
//! HTTP is routed by a VirtualService and any other bytes are proxied as TCP. Needs Envoy
//! (scripts/install-envoy.sh).

use crate::support;

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::{AdsApi, EchoServer, Envoy, Plane, free_port, request, wait_for};
use support::{NS, sidecar};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// A TCP upstream that writes back every byte it reads, on `127.0.0.1`.
async fn tcp_echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 || conn.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// Sends `line` over TCP to `addr` and reads until as many bytes came back; `None` on any failure.
async fn tcp_round_trip(addr: SocketAddr, line: &[u8]) -> Option<Vec<u8>> {
    let mut conn = TcpStream::connect(addr).await.ok()?;
    conn.write_all(line).await.ok()?;
    let mut got = vec![0u8; line.len()];
    tokio::time::timeout(Duration::from_secs(2), conn.read_exact(&mut got)).await.ok()?.ok()?;
    Some(got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unnamed_port_carries_routed_http_and_raw_tcp() {
    let tcp_upstream = tcp_echo().await;
    let web = EchoServer::start("web").await.unwrap();
    let (mixed_port, web_port) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    // `mixed`: no protocol on its port (Istio: auto-detect), its workload a raw TCP echo. Its
    // VirtualService sends HTTP to `web`, an HTTP service whose workload answers with its name.
    let config = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: mixed, namespace: {NS}}}\n\
         spec:\n  hosts: [mixed.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {mixed_port}, name: unnamed}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: mixed}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: mixed, namespace: {NS}}}\n\
         spec:\n  address: 127.0.0.1\n  ports: {{unnamed: {tcp}}}\n  labels: {{app: mixed}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: web, namespace: {NS}}}\n\
         spec:\n  hosts: [web.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {web_port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: web}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: web, namespace: {NS}}}\n\
         spec:\n  address: 127.0.0.1\n  ports: {{http: {web_up}}}\n  labels: {{app: web}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: mixed, namespace: {NS}}}\n\
         spec:\n  hosts: [mixed.{NS}.svc.cluster.local]\n  http:\n  - route:\n    - destination: {{host: web.{NS}.svc.cluster.local, port: {{number: {web_port}}}}}\n",
        tcp = tcp_upstream.port(),
        web_up = web.addr.port(),
    );
    std::fs::write(dir.path().join("mixed.yaml"), config).unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&sidecar("client", &plane, AdsApi::Sotw)).await.unwrap();
    let listener: SocketAddr = ([127, 0, 0, 1], mixed_port).into();
    let host = format!("mixed.{NS}.svc.cluster.local");

    // HTTP on the unnamed port: the HTTP inspector finds HTTP/1.1, the connection manager's route
    // (RDS `PORT`) applies the VirtualService, so `web` answers.
    let routed = wait_for("HTTP routed by the VirtualService", Duration::from_secs(10), async || {
        match request(listener, &host, "/", &[]).await {
            Ok(r) if r.status == 200 && r.body == "web" => Some(()),
            _ => None,
        }
    })
    .await;
    if let Err(e) = routed {
        panic!("{e}\n{}", envoy.log_tail(40));
    }
    assert!(web.hits() >= 1);

    // Other bytes on the same port: no application protocol, the TCP chain proxies them to `mixed`'s
    // workload unchanged.
    let line = b"\x00\x01 not HTTP at all\n";
    let echoed = wait_for("raw bytes proxied as TCP", Duration::from_secs(10), async || {
        tcp_round_trip(listener, line).await.filter(|got| got == line)
    })
    .await;
    if let Err(e) = echoed {
        let stats = envoy.admin_get("/stats?filter=inspector|no_filter_chain").await.map(|(_, b)| b);
        panic!("{e}\n{stats:?}\n{}", envoy.log_tail(40));
    }

    let dump = envoy.config_dump(false).await.unwrap().to_string();
    assert!(dump.contains("envoy.filters.listener.http_inspector"), "no HTTP inspector in {dump}");
    envoy.assert_no_rejected_updates().await;
}
