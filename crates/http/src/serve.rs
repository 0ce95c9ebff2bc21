//! Serving a router on the control plane's HTTP ports with istiod's timeouts.
//!
//! `axum::serve` runs hyper without a timer, so hyper's HTTP/1 header read timeout never fires: a
//! client that opens a connection and sends its headers a byte at a time (slowloris), or nothing at
//! all, holds the connection and its buffers forever. [`serve`] is `axum::serve` with hyper's timer set
//! and istiod's `ReadHeaderTimeout` of 30 s (`pilot/pkg/bootstrap/server.go`, `webhook.go`)
//! ([`HEADER_READ_TIMEOUT`]): the timeout covers the headers of each request, an idle keep-alive
//! connection waiting for its next request, and a connection that sends nothing at all. HTTP/2
//! clients (prior knowledge) have no header timeout in hyper, so the same deadline is kept as an idle
//! timeout: a connection with no request in flight for `header_read_timeout` gets `GOAWAY` and is
//! closed (one that sent only the preface, or opened streams and sent no headers, included). A
//! connection still open `header_read_timeout` after its graceful close began (at shutdown or when
//! idle) is dropped.

use std::{
    future::Future,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

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
        let (tcp, peer) = tokio::select! {
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
        // The caller's address for the debug guard (crate::access), and the connection's activity for
        // its idle timeout.
        let activity = Arc::new(Activity::default());
        let service = TowerToHyperService::new(
            router
                .clone()
                .layer(axum::middleware::from_fn_with_state(activity.clone(), track))
                .layer(axum::Extension(axum::extract::ConnectInfo(peer))),
        );
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
                () = activity.idle(header_read_timeout) => {
                    tracing::debug!("HTTP: closing a connection idle for {header_read_timeout:?}");
                    conn.as_mut().graceful_shutdown();
                }
            }
            // HTTP/2's graceful close waits for the client to answer a PING, which a hostile client
            // never does: after the same deadline again the connection is dropped.
            match tokio::time::timeout(header_read_timeout, conn).await {
                Ok(Err(err)) => tracing::debug!(error = %err, "HTTP: connection ended with an error"),
                Ok(Ok(())) => {}
                Err(_) => tracing::debug!("HTTP: connection dropped: it did not close after GOAWAY"),
            }
        });
    }
    let _ = stop_tx.send(true);
}

/// One connection's requests in flight and when the last one ended (or the connection started).
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    last: Mutex<Instant>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity { in_flight: AtomicUsize::new(0), last: Mutex::new(Instant::now()) }
    }
}

impl Activity {
    /// Resolves once no request has been in flight for `timeout`.
    async fn idle(&self, timeout: Duration) {
        loop {
            let last = *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let quiet_until = last + timeout;
            if self.in_flight.load(Ordering::Acquire) == 0 && Instant::now() >= quiet_until {
                return;
            }
            tokio::time::sleep_until(quiet_until.max(Instant::now() + timeout / 4).into()).await;
        }
    }
}

/// Counts a request in flight on its connection's [`Activity`].
async fn track(
    axum::extract::State(activity): axum::extract::State<Arc<Activity>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    activity.in_flight.fetch_add(1, Ordering::AcqRel);
    let _done = InFlight(activity);
    next.run(request).await
}

/// Ends a request in flight when dropped (also when the client cancels it).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
