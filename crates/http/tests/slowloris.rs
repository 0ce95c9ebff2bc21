//! Slowloris on the HTTP debug port (issue 20, docs/RELIABILITY.md): a client that never finishes its
//! request headers, or sends nothing, is closed after the header read timeout (istiod's
//! `ReadHeaderTimeout`; 300 ms here), while a normal client is served meanwhile.

use std::time::Duration;

use axum::{Router, routing::get};
use meshpilot_http::serve::serve;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

const STEP: Duration = Duration::from_secs(10);

/// Writes a header line every 50 ms until the server closes the connection; returns what it answered.
async fn trickle_until_closed(mut tcp: TcpStream) -> Vec<u8> {
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(STEP, async {
        loop {
            tokio::select! {
                n = tcp.read(&mut buf) => match n {
                    Ok(0) | Err(_) => return,
                    Ok(n) => answer.extend_from_slice(&buf[..n]),
                },
                () = tokio::time::sleep(Duration::from_millis(50)) => {
                    if tcp.write_all(b"X-Slow: 1\r\n").await.is_err() {
                        return;
                    }
                }
            }
        }
    })
    .await
    .expect("the server closes the slowloris connection");
    answer
}

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

    let answer = trickle_until_closed(slow).await;
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"),
        "closed, at most with 408: {}",
        String::from_utf8_lossy(&answer)
    );
    let mut rest = Vec::new();
    tokio::time::timeout(STEP, silent.read_to_end(&mut rest))
        .await
        .expect("the silent client is closed")
        .unwrap();
    assert!(rest.is_empty());

    let _ = stop.send(());
    server.await.unwrap();
}
