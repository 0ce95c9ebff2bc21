//! Slowloris on the HTTP debug port (issue 20, docs/RELIABILITY.md): a client that never finishes its
//! request headers, or sends nothing, is closed after the header read timeout (istiod's
//! `ReadHeaderTimeout`; 300 ms here), while a normal client is served meanwhile; an HTTP/2 client that
//! sends only the connection preface is closed after the same time idle.

use std::time::Duration;

use axum::{Router, routing::get};
use meshpilot_http::serve::serve;
use meshpilot_testing::http::trickle_headers_until_closed;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

const STEP: Duration = Duration::from_secs(10);

/// A server of `/ready` with a 300 ms header read timeout: its address, its stop and its task.
async fn start() -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new().route("/ready", get(|| async { "ok" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, router, Duration::from_millis(300), async {
        let _ = stopped.await;
    }));
    (addr, stop, server)
}

#[tokio::test]
async fn clients_that_never_finish_their_headers_are_closed_and_others_are_served() {
    let (addr, stop, server) = start().await;

    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /ready HTTP/1.1\r\nHost: istiod\r\n").await.unwrap();
    let mut silent = TcpStream::connect(addr).await.unwrap();

    let mut ok = TcpStream::connect(addr).await.unwrap();
    ok.write_all(b"GET /ready HTTP/1.1\r\nHost: istiod\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(STEP, ok.read_to_end(&mut answer)).await.unwrap().unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));

    trickle_headers_until_closed(slow, STEP).await;
    let mut rest = Vec::new();
    tokio::time::timeout(STEP, silent.read_to_end(&mut rest))
        .await
        .expect("the silent client is closed")
        .unwrap();
    assert!(rest.is_empty());

    let _ = stop.send(());
    server.await.unwrap();
}

#[tokio::test]
async fn an_http2_client_that_sends_only_the_preface_is_closed() {
    let (addr, stop, server) = start().await;

    let mut h2 = TcpStream::connect(addr).await.unwrap();
    // The client preface and an empty SETTINGS frame, then nothing.
    h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00").await.unwrap();
    let mut frames = Vec::new();
    tokio::time::timeout(STEP, h2.read_to_end(&mut frames))
        .await
        .expect("the idle HTTP/2 connection is closed")
        .unwrap();
    // The server's SETTINGS (type 4) came first; a GOAWAY (type 7) before the close.
    assert_eq!(frames.get(3), Some(&4), "{frames:?}");
    let mut at = 0;
    let mut types = Vec::new();
    while at + 9 <= frames.len() {
        let len = (usize::from(frames[at]) << 16)
            | (usize::from(frames[at + 1]) << 8)
            | usize::from(frames[at + 2]);
        types.push(frames[at + 3]);
        at += 9 + len;
    }
    assert!(types.contains(&7), "frame types {types:?}");

    let _ = stop.send(());
    server.await.unwrap();
}
