//! Slowloris on the HTTP debug port (issue 20, docs/RELIABILITY.md): a client that never finishes its
//! request headers, or sends nothing, is closed after the header read timeout (istiod's
//! `ReadHeaderTimeout`; 300 ms here), while a normal client is served meanwhile.

use std::time::Duration;

use axum::{Router, routing::get};
use meshpilot_http::serve::serve;
use meshpilot_testing::http::trickle_headers_until_closed;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

const STEP: Duration = Duration::from_secs(10);

#[tokio::test]
async fn clients_that_never_finish_their_headers_are_closed_and_others_are_served() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new().route("/ready", get(|| async { "ok" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, router, Duration::from_millis(300), async {
        let _ = stopped.await;
    }));

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
