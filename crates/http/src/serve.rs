//! Serving a router on the control plane's HTTP ports with istiod's timeouts.
//!
//! `axum::serve` runs hyper without a timer, so hyper's HTTP/1 header read timeout never fires: a
//! client that opens a connection and sends its headers a byte at a time (slowloris), or nothing at
//! all, holds the connection and its buffers forever. [`serve`] is `axum::serve` with hyper's timer set
//! and istiod's `ReadHeaderTimeout` of 30 s (`pilot/pkg/bootstrap/server.go`, `webhook.go`)
//! ([`HEADER_READ_TIMEOUT`]): the timeout covers the headers of each request, an idle keep-alive
//! connection waiting for its next request, and a connection that sends nothing at all. HTTP/2
//! clients (prior knowledge) are served as before.

use std::{future::Future, time::Duration};

use axum::Router;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::conn::auto::Builder,
    service::TowerToHyperService,
};
use tokio::net::TcpListener;

/// istiod's `ReadHeaderTimeout` on its HTTP, monitoring and webhook servers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `router` on `listener` until `shutdown` completes: then stops accepting and lets each
/// connection finish its request in flight (hyper's graceful shutdown), as `axum::serve`'s
/// `with_graceful_shutdown`. HTTP/1 connections that do not complete a request's headers within
/// `header_read_timeout` are closed (hyper answers `408` when part of a request was read).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send,
) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let (tcp, _peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "HTTP: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            // The HTTP/1-or-2 detection reads the first bytes with no timeout of its own: a client
            // that sends nothing at all gets the same header read timeout.
            let mut first = [0u8; 1];
            match tokio::time::timeout(header_read_timeout, tcp.peek(&mut first)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(_) => return,
                Err(_) => {
                    tracing::debug!(
                        "HTTP: closing a connection that sent nothing for {header_read_timeout:?}"
                    );
                    return;
                }
            }
            let mut builder = Builder::new(TokioExecutor::new());
            builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
            tokio::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(err) = result {
                        tracing::debug!(error = %err, "HTTP: connection ended with an error");
                    }
                    return;
                }
                _ = stop.wait_for(|s| *s) => conn.as_mut().graceful_shutdown(),
            }
            if let Err(err) = conn.await {
                tracing::debug!(error = %err, "HTTP: connection ended with an error");
            }
        });
    }
    let _ = stop_tx.send(true);
}
