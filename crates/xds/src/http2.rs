//! Serving the ADS ports' gRPC services over HTTP/2 with hyper directly ([`serve`]).
//!
//! tonic's `Server` runs each connection on hyper's HTTP/2 server and has no setting for hyper's
//! per-stream send buffer (`max_send_buf_size`, 400 KiB by default): what h2 holds for a stream whose
//! peer stopped reading, on top of the stream's own response queue. [`serve`] makes the connections
//! with the same HTTP/2 settings tonic uses (HTTP/2 only, hyper's timer, the keepalive pings) plus
//! that bound ([`Http2Settings::max_send_buf_size`]) and h2's guards against hostile clients: at most
//! [`MAX_CONCURRENT_STREAMS`] streams per connection, and h2's reset-flood guards (20 streams reset
//! before they were accepted, 1,024 streams the server had to reset for protocol errors: then the
//! connection gets `GOAWAY`, the defence against "Rapid Reset", CVE-2023-44487, and its kin), hands
//! every request the connection's
//! info as tonic does (`TcpConnectInfo` for `Request::remote_addr`, or the TLS port's own), and shuts
//! down as tonic's `serve_with_incoming_shutdown`: stop accepting, HTTP/2 `GOAWAY` on every connection,
//! wait for their streams to end.

use std::{
    collections::HashMap,
    convert::Infallible,
    fmt::Display,
    future::Future,
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{Stream, StreamExt as _};
use hyper::{body::Incoming, service::service_fn};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::{service::Routes, transport::server::Connected};
use tower_service::Service as _;
use tracing::{debug, info};

/// hyper's per-stream HTTP/2 send buffer on the ADS ports (`MESHPILOT_XDS_SEND_BUFFER_BYTES`): what h2
/// buffers for one stream beyond the peer's flow-control window, so with the response queue
/// ([`crate::DEFAULT_RESPONSE_BUFFER_BYTES`]) the bound of what a client that never reads holds.
/// hyper's default is 400 KiB; a response larger than it is still sent, in pieces, as the peer reads.
pub const DEFAULT_SEND_BUFFER_BYTES: usize = 64 << 10;

/// Most concurrent streams one client connection may open on an ADS port (HTTP/2
/// `SETTINGS_MAX_CONCURRENT_STREAMS`). A proxy uses one ADS stream per connection (pilot-agent one
/// more for its certificates); the bound keeps one connection from holding thousands of streams'
/// state. Streams beyond it are refused by h2 (`REFUSED_STREAM`), the connection stays.
pub const MAX_CONCURRENT_STREAMS: u32 = 128;

/// The HTTP/2 settings of an ADS port.
#[derive(Clone, Debug)]
pub struct Http2Settings {
    /// Interval of the server's HTTP/2 keepalive pings (Istio's `GRPC_KEEPALIVE_INTERVAL`,
    /// [`crate::AdsConfig::keepalive_interval`]).
    pub keepalive_interval: Duration,
    /// How long a ping may go unanswered before the connection is closed (Istio's
    /// `GRPC_KEEPALIVE_TIMEOUT`).
    pub keepalive_timeout: Duration,
    /// hyper's per-stream send buffer in bytes ([`DEFAULT_SEND_BUFFER_BYTES`]).
    pub max_send_buf_size: usize,
    /// The most connections the port holds ([`ConnectionLimits`]).
    pub connection_limits: ConnectionLimits,
    /// When connections are drained for their age (`None`: never, [`MaxConnectionAge`]).
    pub max_connection_age: Option<MaxConnectionAge>,
}

/// Default of [`MaxConnectionAge::grace`]: 10 s, istiod's `MaxServerConnectionAgeGrace`
/// (`pkg/keepalive/options.go`, `DefaultOption`; istiod has no flag or variable for it).
pub const DEFAULT_MAX_CONNECTION_AGE_GRACE: Duration = Duration::from_secs(10);

/// The age at which a connection of an ADS port is drained, and the grace it is then given (istiod's
/// `--keepaliveMaxServerConnectionAge` and `MaxServerConnectionAgeGrace`, passed to grpc-go as
/// `keepalive.ServerParameters` `MaxConnectionAge` and `MaxConnectionAgeGrace`; see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxConnectionAge {
    /// The age before jitter ([`MaxConnectionAge::jittered`]); positive.
    pub age: Duration,
    /// How long a drained connection may keep its open streams before it is dropped.
    pub grace: Duration,
}

impl MaxConnectionAge {
    /// `age` with istiod's grace ([`DEFAULT_MAX_CONNECTION_AGE_GRACE`]).
    pub fn new(age: Duration) -> MaxConnectionAge {
        MaxConnectionAge { age, grace: DEFAULT_MAX_CONNECTION_AGE_GRACE }
    }

    /// The age one connection is drained at: `age` moved by grpc-go's jitter (`getJitter` in
    /// `internal/transport/http2_server.go`), `random mod 2r − r` nanoseconds with `r` = a tenth of
    /// `age`, so within `[0.9 × age, 1.1 × age)`; connections accepted together (after a rollout)
    /// then do not all leave together. `random` is any uniformly random number.
    pub fn jittered(age: Duration, random: u64) -> Duration {
        let tenth = age / 10;
        let span = tenth.as_nanos() * 2;
        if span == 0 {
            return age;
        }
        let offset = u128::from(random) % span;
        let offset = Duration::new(
            u64::try_from(offset / 1_000_000_000).unwrap_or(u64::MAX),
            u32::try_from(offset % 1_000_000_000).unwrap_or(0),
        );
        (age - tenth).saturating_add(offset)
    }

    /// [`MaxConnectionAge::jittered`] with a fresh random number, for a new connection.
    fn for_new_connection(&self) -> Duration {
        use std::hash::BuildHasher as _;
        // std's `RandomState` is seeded from the OS once per thread and moved on at every `new`:
        // a uniformly random number for jitter without another dependency.
        let random = std::collections::hash_map::RandomState::new().hash_one(self.age);
        Self::jittered(self.age, random)
    }
}

/// Default of [`ConnectionLimits::max_total`] (`MESHPILOT_XDS_MAX_CONNECTIONS`): 100,000, ten times
/// the largest fleet measured on one instance (docs/BENCHMARKS.md), well below the file descriptors
/// a control plane is given.
pub const DEFAULT_MAX_CONNECTIONS: usize = 100_000;

/// The most connections one ADS port holds at once: in all, and from one peer IP address. `0` is no
/// limit. A connection over either is closed at accept (counted in
/// `meshpilot_xds_connections_refused{reason}`); its client reconnects with its backoff. No limit per
/// peer by default (`MESHPILOT_XDS_MAX_CONNECTIONS_PER_PEER`): proxies of a remote cluster reach the
/// control plane through an east-west gateway, and VMs through NAT, each under one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections in all.
    pub max_total: usize,
    /// Connections from one peer IP address.
    pub max_per_peer: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits { max_total: DEFAULT_MAX_CONNECTIONS, max_per_peer: 0 }
    }
}

/// A port's open connections, in all and per peer address, within [`ConnectionLimits`].
#[derive(Debug)]
pub struct ConnectionCount {
    limits: ConnectionLimits,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One admitted connection of a [`ConnectionCount`]; dropping it (the connection ended) frees it.
#[derive(Debug)]
pub struct ConnectionSlot {
    count: Arc<ConnectionCount>,
    peer: Option<IpAddr>,
}

impl ConnectionCount {
    /// A count within `limits`.
    pub fn new(limits: ConnectionLimits) -> Arc<ConnectionCount> {
        Arc::new(ConnectionCount { limits, open: Mutex::new((0, HashMap::new())) })
    }

    /// A slot for a new connection from `peer`, or the limit it is over (`"total"`, `"peer"`).
    ///
    /// # Errors
    /// The port holds [`ConnectionLimits::max_total`] connections, or `max_per_peer` from `peer`.
    pub fn admit(self: &Arc<Self>, peer: Option<IpAddr>) -> Result<ConnectionSlot, &'static str> {
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (total, by_peer) = &mut *open;
        if self.limits.max_total > 0 && *total >= self.limits.max_total {
            return Err("total");
        }
        // Peers are counted only when there is a per-peer limit.
        let peer = peer.filter(|_| self.limits.max_per_peer > 0);
        if let Some(ip) = peer {
            let n = by_peer.entry(ip).or_insert(0);
            if *n >= self.limits.max_per_peer {
                return Err("peer");
            }
            *n += 1;
        }
        *total += 1;
        Ok(ConnectionSlot { count: Arc::clone(self), peer })
    }

    /// [`ConnectionCount::admit`] for a connection from `peer`; a refusal is logged at debug and
    /// counted in `meshpilot_xds_connections_refused{reason}`, and gives `None` (close it).
    pub fn admit_or_refuse(self: &Arc<Self>, peer: Option<SocketAddr>) -> Option<ConnectionSlot> {
        match self.admit(peer.map(|a| a.ip())) {
            Ok(slot) => Some(slot),
            Err(reason) => {
                debug!(peer = ?peer, limit = reason, "ADS: connection refused: the port's connection limit");
                crate::metrics::record_connection_refused(reason);
                None
            }
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.count.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (total, by_peer) = &mut *open;
        *total = total.saturating_sub(1);
        if let Some(ip) = self.peer
            && let Some(n) = by_peer.get_mut(&ip)
        {
            *n -= 1;
            if *n == 0 {
                by_peer.remove(&ip);
            }
        }
    }
}

/// Serves `routes` over HTTP/2 on the connections `incoming` yields until `shutdown` completes, then
/// sends `GOAWAY` on every connection and returns once all of them have closed. Connections that fail
/// (handshake, protocol errors, an HTTP/1 client) are logged at debug and dropped; an `Err` from
/// `incoming` (a failed accept or TLS handshake) is logged and skipped.
///
/// `peer_of` gives a connection's peer address from its connect info, for
/// [`ConnectionLimits::max_per_peer`]. With [`Http2Settings::max_connection_age`] each connection is
/// drained at its age and dropped after the grace (module doc).
pub async fn serve<I, IO, E>(
    incoming: I,
    routes: Routes,
    settings: &Http2Settings,
    peer_of: impl Fn(&IO::ConnectInfo) -> Option<SocketAddr>,
    shutdown: impl Future<Output = ()>,
) where
    I: Stream<Item = Result<IO, E>>,
    IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
    E: Display,
{
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        // h2's defaults: 20 reset-before-accepted streams, 1,024 locally reset ones (see the module doc).
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(1024)
        .keep_alive_interval(settings.keepalive_interval)
        .keep_alive_timeout(settings.keepalive_timeout)
        .max_send_buf_size(settings.max_send_buf_size);
    let count = ConnectionCount::new(settings.connection_limits);
    // Every connection task holds a receiver: `closed()` resolves when the last one has ended.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::pin!(shutdown);
    let mut incoming = std::pin::pin!(incoming);
    loop {
        let io = tokio::select! {
            () = &mut shutdown => break,
            next = incoming.next() => match next {
                Some(Ok(io)) => io,
                Some(Err(err)) => {
                    debug!("ADS: connection not accepted: {err}");
                    continue;
                }
                None => break,
            },
        };
        let info = io.connect_info();
        let peer = peer_of(&info);
        let Some(slot) = count.admit_or_refuse(peer) else { continue };
        let routes = routes.clone();
        let service = service_fn(move |mut request: http::Request<Incoming>| {
            request.extensions_mut().insert(info.clone());
            let mut routes = routes.clone();
            async move { Ok::<_, Infallible>(routes.call(request).await.unwrap_or_else(|e| match e {})) }
        });
        // Boxed before it moves into the task: pinned inside the task it would take room twice
        // there (the captured value and the pinned one, ≈ 1.6 KiB each per connection).
        let mut connection = Box::pin(builder.serve_connection(TokioIo::new(io), service));
        let mut stop = stop_rx.clone();
        let max_age = settings.max_connection_age.map(|m| (m.for_new_connection(), m.grace));
        tokio::spawn(async move {
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                () = async { drop(stop.wait_for(|s| *s).await) } => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
                (age, grace) = aged(max_age) => {
                    info!(peer = ?peer, ?age, "ADS: connection reached its max age, closing it gracefully (GOAWAY)");
                    connection.as_mut().graceful_shutdown();
                    // A server shutdown meanwhile has nothing more to ask: the GOAWAY is sent.
                    tokio::time::timeout(grace, connection.as_mut()).await.unwrap_or_else(|_| {
                        debug!(peer = ?peer, ?grace, "ADS: connection dropped at the end of its max-age grace");
                        Ok(())
                    })
                }
            };
            if let Err(err) = ended {
                debug!("ADS: HTTP/2 connection ended with an error: {err}");
            }
            drop(slot);
            drop(stop);
        });
    }
    drop(stop_rx);
    let _ = stop_tx.send(true);
    stop_tx.closed().await;
}

/// Completes with `max_age` (age, grace) once the age has passed; never without one.
async fn aged(max_age: Option<(Duration, Duration)>) -> (Duration, Duration) {
    match max_age {
        Some((age, grace)) => {
            tokio::time::sleep(age).await;
            (age, grace)
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_bounded_in_all_and_per_peer() {
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let count = ConnectionCount::new(ConnectionLimits { max_total: 3, max_per_peer: 2 });
        let a1 = count.admit(Some(a)).unwrap();
        let _a2 = count.admit(Some(a)).unwrap();
        assert_eq!(count.admit(Some(a)).unwrap_err(), "peer");
        let _b1 = count.admit(Some(b)).unwrap();
        assert_eq!(count.admit(Some(b)).unwrap_err(), "total");
        assert_eq!(count.open(), 3);
        drop(a1);
        assert_eq!(count.open(), 2);
        let _a3 = count.admit(Some(a)).expect("a slot was freed");
        let unlimited = ConnectionCount::new(ConnectionLimits { max_total: 0, max_per_peer: 0 });
        let many: Vec<_> = (0..1000).map(|_| unlimited.admit(Some(a)).unwrap()).collect();
        assert_eq!(unlimited.open(), many.len());
    }

    #[test]
    fn the_age_is_jittered_within_ten_percent_as_grpc_go() {
        let age = Duration::from_secs(1800);
        let (low, high) = (Duration::from_secs(1620), Duration::from_secs(1980));
        // The span is 2 × 180 s in nanoseconds: 0 is the lowest, span − 1 the highest, span wraps.
        let span = 360_000_000_000u64;
        assert_eq!(MaxConnectionAge::jittered(age, 0), low);
        assert_eq!(MaxConnectionAge::jittered(age, span / 2), age);
        assert_eq!(MaxConnectionAge::jittered(age, span - 1), high - Duration::from_nanos(1));
        assert_eq!(MaxConnectionAge::jittered(age, span), low);
        for random in [1, 12_345_678_901, u64::MAX / 3, u64::MAX] {
            let jittered = MaxConnectionAge::jittered(age, random);
            assert!((low..high).contains(&jittered), "{random}: {jittered:?}");
        }
        // Too short to move (a tenth is under a nanosecond), and the longest Go duration.
        assert_eq!(MaxConnectionAge::jittered(Duration::from_nanos(9), u64::MAX), Duration::from_nanos(9));
        let longest = Duration::from_nanos(i64::MAX.unsigned_abs());
        assert!(MaxConnectionAge::jittered(longest, u64::MAX) < longest + longest / 10);
        // Fresh connections draw different ages.
        let m = MaxConnectionAge::new(age);
        let ages: std::collections::BTreeSet<_> = (0..16).map(|_| m.for_new_connection()).collect();
        assert!(ages.len() > 1, "{ages:?}");
        assert!(ages.iter().all(|a| (low..high).contains(a)), "{ages:?}");
    }

    #[test]
    fn istiods_grace_by_default() {
        let m = MaxConnectionAge::new(Duration::from_secs(60));
        assert_eq!(m, MaxConnectionAge { age: Duration::from_secs(60), grace: Duration::from_secs(10) });
    }
}
