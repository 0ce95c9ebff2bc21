//! DestinationRule `proxyProtocol` and `tunnel` through a real Envoy sidecar (INTERCEPTION_MODE NONE,
//! loopback): the upstream of a PROXY-protocol service reads a PROXY v1 header naming the client's
//! connection before its bytes; a tunnelled service's connection reaches a CONNECT proxy written here
//! as `CONNECT targetHost:targetPort`, and its bytes reach the target through it. Needs Envoy
//! (scripts/install-envoy.sh).

use crate::support;

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::{AdsApi, Envoy, Plane, free_port, wait_for};
use support::{NS, sidecar};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    sync::mpsc,
};

/// A ServiceEntry `name` with one TCP port `port` whose only endpoint is `127.0.0.1:target`, and a
/// DestinationRule for it with `policy` as its `trafficPolicy` (YAML flow mapping).
fn service_with_policy(name: &str, port: u16, target: u16, policy: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {NS}}}\n\
         spec:\n  hosts: [{name}.{NS}.svc.cluster.local]\n  location: MESH_EXTERNAL\n  ports:\n  \
         - {{number: {port}, name: tcp, protocol: TCP}}\n  resolution: STATIC\n  \
         endpoints: [{{address: 127.0.0.1, ports: {{tcp: {target}}}}}]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: {NS}}}\n\
         spec:\n  host: {name}.{NS}.svc.cluster.local\n  trafficPolicy: {policy}\n---\n"
    )
}

/// An upstream that reads one header line (up to `\r\n`), reports it on the channel, then echoes
/// every further byte.
async fn header_then_echo(first_lines: mpsc::UnboundedSender<String>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let tx = first_lines.clone();
            tokio::spawn(async move {
                let mut conn = BufReader::new(conn);
                let mut line = String::new();
                if conn.read_line(&mut line).await.is_err() {
                    return;
                }
                let _ = tx.send(line);
                echo(conn).await;
            });
        }
    });
    addr
}

/// Writes back every byte read until the peer closes.
async fn echo(mut conn: BufReader<TcpStream>) {
    let mut buf = [0u8; 1024];
    while let Ok(n) = conn.read(&mut buf).await {
        if n == 0 || conn.get_mut().write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
}

/// An HTTP/1.1 CONNECT proxy: reports each request line on the channel, answers 200 and splices
/// the connection to the requested `host:port`.
async fn connect_proxy(requests: mpsc::UnboundedSender<String>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let tx = requests.clone();
            tokio::spawn(async move {
                let mut conn = BufReader::new(conn);
                let mut request = String::new();
                if conn.read_line(&mut request).await.is_err() {
                    return;
                }
                let request = request.trim_end().to_string();
                // The header block ends with an empty line.
                loop {
                    let mut h = String::new();
                    match conn.read_line(&mut h).await {
                        Ok(n) if n > 0 && h != "\r\n" => continue,
                        _ => break,
                    }
                }
                let _ = tx.send(request.clone());
                let target = request.split(' ').nth(1).unwrap_or_default().to_string();
                let Ok(mut upstream) = TcpStream::connect(&target).await else { return };
                if conn.get_mut().write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.is_err() {
                    return;
                }
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
            });
        }
    });
    addr
}

/// A TCP upstream that writes back every byte it reads.
async fn tcp_echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            tokio::spawn(echo(BufReader::new(conn)));
        }
    });
    addr
}

/// Connects to `addr`, sends `line` and reads as many bytes back: the client's own address and
/// what came back; `None` on any failure.
async fn round_trip(addr: SocketAddr, line: &[u8]) -> Option<(SocketAddr, Vec<u8>)> {
    let mut conn = TcpStream::connect(addr).await.ok()?;
    let local = conn.local_addr().ok()?;
    conn.write_all(line).await.ok()?;
    let mut got = vec![0u8; line.len()];
    tokio::time::timeout(Duration::from_secs(2), conn.read_exact(&mut got)).await.ok()?.ok()?;
    Some((local, got))
}

async fn assert_no_nack(envoy: &Envoy) {
    envoy.assert_no_rejected_updates().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn proxy_protocol_tells_the_upstream_the_clients_addresses() {
    let (tx, mut headers) = mpsc::unbounded_channel();
    let upstream = header_then_echo(tx).await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let config = service_with_policy("pp", port, upstream.port(), "{proxyProtocol: {version: V1}}");
    std::fs::write(dir.path().join("pp.yaml"), config).unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&sidecar("client", &plane, AdsApi::Sotw)).await.unwrap();
    let listener: SocketAddr = ([127, 0, 0, 1], port).into();

    let line = b"after the header\n";
    let sent = wait_for("bytes proxied behind a PROXY header", Duration::from_secs(10), async || {
        round_trip(listener, line).await.filter(|(_, got)| got == line)
    })
    .await;
    let (client, _) = sent.unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    // Earlier attempts (before the listener was in place) never reached the upstream; the header of
    // the connection that went through is the last one.
    let mut last = None;
    while let Ok(h) = headers.try_recv() {
        last = Some(h);
    }
    assert_eq!(
        last.as_deref(),
        Some(format!("PROXY TCP4 127.0.0.1 127.0.0.1 {} {port}\r\n", client.port()).as_str()),
        "the PROXY v1 header names the client's connection to the sidecar"
    );
    assert_no_nack(&envoy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tunnel_carries_the_connection_through_a_connect_proxy() {
    let (tx, mut requests) = mpsc::unbounded_channel();
    let proxy = connect_proxy(tx).await;
    let target = tcp_echo().await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let policy = format!("{{tunnel: {{targetHost: 127.0.0.1, targetPort: {}}}}}", target.port());
    let config = service_with_policy("tunnelled", port, proxy.port(), &policy);
    std::fs::write(dir.path().join("tunnel.yaml"), config).unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&sidecar("client", &plane, AdsApi::Sotw)).await.unwrap();
    let listener: SocketAddr = ([127, 0, 0, 1], port).into();

    let line = b"through the tunnel\n";
    let sent = wait_for("bytes echoed through the CONNECT proxy", Duration::from_secs(10), async || {
        round_trip(listener, line).await.filter(|(_, got)| got == line)
    })
    .await;
    if let Err(e) = sent {
        panic!("{e}\n{}", envoy.log_tail(40));
    }
    let request = requests.try_recv().expect("the proxy saw a request");
    assert_eq!(request, format!("CONNECT 127.0.0.1:{} HTTP/1.1", target.port()));
    assert_no_nack(&envoy).await;
}
