//! The RPC edge: Envoy's `AggregatedDiscoveryService` (SotW and Delta) over a [`ResourceSource`],
//! served through [`crate::framing`].
//!
//! Each stream runs as one task:
//!
//! ```text
//!   first request ──► node_parts ─► source.node (InvalidArgument if malformed) ─► source.connect ─► register
//!   loop (biased select): stop ▸ request ▸ push wake-up
//!     request ──► session.on_request (pure) ──► answer?  generate ─► send ─► session.on_sent
//!     push    ──► source.needs_push ──► per watched type in CDS, EDS, LDS, RDS order: generate ─► send
//!   end ──► source.disconnect, unregister
//! ```
//!
//! Responses go out through a bounded channel; when the client reads slowly the task waits
//! (back-pressure) rather than buffering. `tonic::Status` appears only here.

use bytes::Bytes;
use std::{
    future::Future,
    net::SocketAddr,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use tokio::{
    net::TcpListener,
    sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc},
};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Status};
use tracing::{debug, info, warn};

use crate::{
    admission::RequestLimiter,
    delta::DeltaSession,
    framing::{AdsService, Requests},
    metrics,
    node::NodeError,
    registry::{ConnectionRegistry, Entry, PendingPush, Registration},
    sotw::SotwSession,
    source::{
        FNV_OFFSET, GenerateRequest, Generated, Resource, ResourceSource, SourceError, Trigger, Variant,
        Watch, content_version, fnv1a,
    },
    type_url::{CLUSTER, ENDPOINT, short_name},
    wire::{DeltaWire, SotwWire, Wire},
};

/// Tuning of the ADS server. Every knob has a default matching Istio or the prototype.
#[derive(Debug, Clone)]
pub struct AdsConfig {
    /// Responses buffered per stream before the stream's task waits for the client to read. Default 16.
    pub response_buffer: usize,
    /// Encoded bytes of responses buffered per stream before the stream's task waits for the client
    /// to read (a larger response is still queued alone). Bounds what a client that stops reading pins
    /// in the server besides HTTP/2's own send buffer. `MESHPILOT_XDS_RESPONSE_BUFFER_BYTES`; default
    /// [`DEFAULT_RESPONSE_BUFFER_BYTES`].
    pub response_buffer_bytes: usize,
    /// hyper's HTTP/2 send buffer per stream in bytes: what h2 holds for a stream beyond the peer's
    /// flow-control window, the other half of what a client that stops reading pins
    /// ([`crate::http2`]). `MESHPILOT_XDS_SEND_BUFFER_BYTES`; default
    /// [`crate::http2::DEFAULT_SEND_BUFFER_BYTES`] (hyper's own: 400 KiB).
    pub send_buffer_bytes: usize,
    /// What one stream may make the server hold ([`StreamLimits`]).
    pub limits: StreamLimits,
    /// The most connections the port holds, in all and per peer address
    /// (`MESHPILOT_XDS_MAX_CONNECTIONS`, `MESHPILOT_XDS_MAX_CONNECTIONS_PER_PEER`;
    /// [`crate::http2::ConnectionLimits`]).
    pub connection_limits: crate::http2::ConnectionLimits,
    /// Longest time a new connection on [`AdsServer::serve`]'s port may take to send the HTTP/2
    /// preface and its first request headers, and a new stream its first request; then the
    /// connection is closed (stream: `DEADLINE_EXCEEDED`). `MESHPILOT_XDS_HANDSHAKE_TIMEOUT`; default
    /// [`DEFAULT_HANDSHAKE_TIMEOUT`] (grpc-go, istiod's server, allows 120 s for the HTTP/2 handshake
    /// alone). Zero: no bound.
    pub handshake_timeout: Duration,
    /// Largest request accepted, in bytes. Default 4 MiB (Istio's `ISTIO_GPRC_MAXRECVMSGSIZE`).
    pub max_decoding_message_size: usize,
    /// Largest response sent, in bytes. Default 256 MiB (quilkin's choice; Envoy's own receive limit
    /// is set in its bootstrap).
    pub max_encoding_message_size: usize,
    /// HTTP/2 keepalive ping interval. Default 30 s (Istio's `GRPC_KEEPALIVE_INTERVAL`).
    pub keepalive_interval: Duration,
    /// HTTP/2 keepalive timeout. Default 10 s (Istio's `GRPC_KEEPALIVE_TIMEOUT`).
    pub keepalive_timeout: Duration,
    /// When a connection is drained for its age, so proxies spread over replicas (istiod's
    /// `--keepaliveMaxServerConnectionAge`; [`crate::http2::MaxConnectionAge`]). Default `None`:
    /// connections are never closed for their age (istiod's default too).
    pub max_connection_age: Option<crate::http2::MaxConnectionAge>,
    /// How many connections may process a push at once (generate and send); the others wait with
    /// their push pending (and keep merging newer ones into it) while still reading requests.
    /// Istio's `PILOT_PUSH_THROTTLE`; default [`default_push_throttle`].
    pub push_throttle: usize,
    /// Who may open streams (Istio's `XDS_AUTH` on the secure port 15012): `None` accepts every
    /// caller, as on the plaintext port 15010.
    pub authenticator: Option<Arc<dyn StreamAuthenticator>>,
    /// With an authenticator: refuse a proxy whose namespace is none of its caller's identities'
    /// (Istio's `PILOT_ENABLE_XDS_IDENTITY_CHECK`, default true).
    pub identity_check: bool,
    /// Admission of new streams (Istio's `PILOT_MAX_REQUESTS_PER_SECOND`, [`crate::admission`]):
    /// share one limiter between the ports of a control plane. Default
    /// [`crate::admission::default_max_requests_per_second`].
    pub request_limiter: Arc<RequestLimiter>,
    /// Longest wait to hand one response to a stream whose client stopped reading (its
    /// `response_buffer` is full); then the stream is closed with `DEADLINE_EXCEEDED`, logged and
    /// counted in `pilot_xds_write_timeout`, releasing its push throttle slot. Istio's former
    /// `PILOT_XDS_SEND_TIMEOUT` (default 0 = none there, removed in Istio 1.22); meshpilot's default
    /// 10 s. Zero: wait forever.
    pub send_timeout: Duration,
    /// Flow control: a push waits until the client has answered (ACK or NACK) the last response of
    /// every Envoy type sent on its stream ([`crate::type_url::is_envoy_type`]: other types, such as
    /// MCP's MeshConfig, are not always answered); pushes arriving meanwhile merge into the one
    /// waiting, which goes out (with the latest config) at the answer. Requests are always answered.
    /// A real client (Envoy, gRPC) answers each response within milliseconds, so this only coalesces
    /// the pushes of a busy proxy, and a client that reads without answering, or does not read, costs
    /// one response per type instead of a response per push (docs/RELIABILITY.md "Slow and hostile
    /// clients").
    /// Istio 1.9 added this as `PILOT_ENABLE_FLOW_CONTROL`, default false, and later dropped it;
    /// meshpilot keeps the name with default true.
    pub flow_control: bool,
}

/// Default of [`AdsConfig::response_buffer_bytes`]: 64 KiB (a larger response still goes alone).
pub const DEFAULT_RESPONSE_BUFFER_BYTES: usize = 64 * 1024;

/// Default of [`AdsConfig::handshake_timeout`]: 10 s, as the TLS handshake bound of the secure port.
/// A real client (Envoy, grpc) sends the preface, its settings and its first request in its first
/// packets; 10 s leaves room for a loaded control plane or network while keeping what a silent or
/// half-open connection holds short-lived.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one ADS stream may make the server hold. Istio has no such limits (istiod keeps whatever
/// names and types a client watches; its only bound is the 4 MiB message size); these are set far
/// above what real clients use, so only a broken or hostile client meets them. A request over a limit
/// ends the stream with `RESOURCE_EXHAUSTED` naming the limit and its variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamLimits {
    /// Most resource names one stream may watch for one type: names of a SotW request, a Delta
    /// subscription after the request (and its `initial_resource_versions`). An Envoy sidecar of a
    /// mesh with 10,000 services watches ≈ 10,000 EDS names. `MESHPILOT_XDS_MAX_RESOURCE_NAMES`;
    /// default [`StreamLimits::DEFAULT_MAX_RESOURCE_NAMES`].
    pub max_resource_names: usize,
    /// Most type URLs one stream may watch at once. An Envoy sidecar watches 4–6 (CDS, EDS, LDS, RDS,
    /// SDS, ECDS), an MCP client one per config kind (≈ 30). `MESHPILOT_XDS_MAX_TYPES_PER_STREAM`;
    /// default [`StreamLimits::DEFAULT_MAX_TYPES`].
    pub max_types: usize,
}

impl StreamLimits {
    /// 50,000 names per type per stream (5 × the EDS watch of a 10,000-service mesh's sidecar).
    pub const DEFAULT_MAX_RESOURCE_NAMES: usize = 50_000;
    /// 64 type URLs per stream.
    pub const DEFAULT_MAX_TYPES: usize = 64;

    /// `Err` (`RESOURCE_EXHAUSTED`) when a stream would watch `names` names of `type_url`.
    ///
    /// # Errors
    /// The status ending the stream.
    pub fn check_names(&self, type_url: &str, names: usize) -> Result<(), Status> {
        if names <= self.max_resource_names {
            return Ok(());
        }
        metrics::record_limit_refusal("names");
        Err(Status::resource_exhausted(format!(
            "too many resource names: {names} for {type_url} on one stream, the limit is {} \
             (MESHPILOT_XDS_MAX_RESOURCE_NAMES)",
            self.max_resource_names
        )))
    }

    /// `Err` (`RESOURCE_EXHAUSTED`) when a stream watching `watched` types asks for another one,
    /// `type_url`.
    ///
    /// # Errors
    /// The status ending the stream.
    pub fn check_new_type(&self, type_url: &str, watched: usize) -> Result<(), Status> {
        if watched < self.max_types {
            return Ok(());
        }
        metrics::record_limit_refusal("types");
        Err(Status::resource_exhausted(format!(
            "too many resource types: {type_url} would be type {} on one stream, the limit is {} \
             (MESHPILOT_XDS_MAX_TYPES_PER_STREAM)",
            watched + 1,
            self.max_types
        )))
    }
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_resource_names: Self::DEFAULT_MAX_RESOURCE_NAMES,
            max_types: Self::DEFAULT_MAX_TYPES,
        }
    }
}

/// An authenticated stream caller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamCaller {
    /// Its identities (SPIFFE URIs).
    pub identities: Vec<String>,
    /// The namespace of each identity (for the identity check).
    pub namespaces: Vec<String>,
}

/// A boxed future (object-safe async in traits).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Authenticates the caller of an ADS stream from its gRPC metadata (`authorization`) and its
/// connection's request extensions (the TLS peer certificates the secure port records).
pub trait StreamAuthenticator: Send + Sync + std::fmt::Debug + 'static {
    /// `Ok` with the caller, or `Err` with the reason (logged; the caller gets `Unauthenticated`).
    fn authenticate<'a>(
        &'a self,
        metadata: &'a tonic::metadata::MetadataMap,
        extensions: &'a http::Extensions,
    ) -> BoxFuture<'a, Result<StreamCaller, String>>;

    /// The peer address recorded in the connection's request extensions, if any.
    fn peer_addr(&self, _extensions: &http::Extensions) -> Option<SocketAddr> {
        None
    }
}

/// Istio's identity check (`pilot/pkg/xds/authentication.go`): a proxy may only connect as a
/// workload of a namespace one of its caller's identities belongs to.
///
/// # Errors
/// `PermissionDenied` naming the identities and the proxy's namespace.
pub fn check_identity(caller: &StreamCaller, proxy_namespace: &str) -> Result<(), Status> {
    if caller.namespaces.iter().any(|ns| ns == proxy_namespace) {
        return Ok(());
    }
    Err(Status::permission_denied(format!(
        "authorization failed: no identities ({:?}) matched namespace {proxy_namespace}",
        caller.identities
    )))
}

/// Istio's automatic `PILOT_PUSH_THROTTLE` (`pilot/pkg/features/tuning.go`): `min(15 + 5 × CPUs, 100)`
/// (25 on 2 cores).
pub fn default_push_throttle() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    (15 + 5 * cpus).min(100)
}

impl Default for AdsConfig {
    fn default() -> Self {
        AdsConfig {
            response_buffer: 16,
            response_buffer_bytes: DEFAULT_RESPONSE_BUFFER_BYTES,
            send_buffer_bytes: crate::http2::DEFAULT_SEND_BUFFER_BYTES,
            limits: StreamLimits::default(),
            connection_limits: crate::http2::ConnectionLimits::default(),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            max_decoding_message_size: 4 * 1024 * 1024,
            max_encoding_message_size: 256 * 1024 * 1024,
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            max_connection_age: None,
            push_throttle: default_push_throttle(),
            authenticator: None,
            identity_check: true,
            request_limiter: Arc::new(RequestLimiter::default()),
            send_timeout: Duration::from_secs(10),
            flow_control: true,
        }
    }
}

impl AdsConfig {
    /// The HTTP/2 settings of a port serving this config ([`crate::http2::serve`]).
    pub fn http2_settings(&self) -> crate::http2::Http2Settings {
        crate::http2::Http2Settings {
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            max_send_buf_size: self.send_buffer_bytes,
            connection_limits: self.connection_limits,
            max_connection_age: self.max_connection_age,
        }
    }
}

/// The ADS server: Envoy's `AggregatedDiscoveryService` (both methods) for any [`ResourceSource`].
pub struct AdsServer<S: ResourceSource> {
    source: Arc<S>,
    registry: ConnectionRegistry<S::Node, S::Push>,
    config: AdsConfig,
    throttle: Arc<Semaphore>,
}

impl<S: ResourceSource> std::fmt::Debug for AdsServer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdsServer").field("registry", &self.registry).field("config", &self.config).finish()
    }
}

impl<S: ResourceSource> AdsServer<S> {
    /// A server over `source` with default [`AdsConfig`].
    pub fn new(source: Arc<S>) -> Self {
        Self::with_config(source, AdsConfig::default())
    }

    /// A server over `source` with `config`.
    pub fn with_config(source: Arc<S>, config: AdsConfig) -> Self {
        Self::with_registry(source, config, ConnectionRegistry::new())
    }

    /// A server over `source` with `config`, registering its connections in `registry` (one the
    /// control plane created first, e.g. its DiscoveryServer's).
    pub fn with_registry(
        source: Arc<S>,
        config: AdsConfig,
        registry: ConnectionRegistry<S::Node, S::Push>,
    ) -> Self {
        let throttle = Arc::new(Semaphore::new(config.push_throttle.max(1)));
        AdsServer { source, registry, config, throttle }
    }

    /// The connection registry (clone it before [`AdsServer::into_service`] to push and to read
    /// sync status).
    pub fn registry(&self) -> &ConnectionRegistry<S::Node, S::Push> {
        &self.registry
    }

    /// The ADS endpoint for a tonic server (both methods), with the configured message size limits.
    /// Responses are framed by [`crate::framing`], not by tonic's per-stream encode buffer.
    pub fn into_service(self) -> AdsService<S> {
        AdsService::new(self)
    }

    /// The server's tuning.
    pub fn config(&self) -> &AdsConfig {
        &self.config
    }

    /// Serves ADS (plaintext HTTP/2, as on Istio's port 15010) on `listener` until `shutdown`
    /// completes. Each connection must send the HTTP/2 preface and its first request headers within
    /// [`AdsConfig::handshake_timeout`] ([`crate::handshake`]). Failed accepts and connections are
    /// logged and skipped ([`crate::http2::serve`]): nothing ends the server but `shutdown`.
    /// Connections are `TCP_NODELAY`, as Go's (so istiod's) and tonic's server sockets are: without it
    /// a small response waits for the peer's delayed ACK (≈ 40 ms on Linux) behind an unacknowledged one.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()> + Send) {
        use tokio_stream::StreamExt as _;
        let settings = self.config.http2_settings();
        let handshake = self.config.handshake_timeout;
        let incoming = TcpListenerStream::new(listener).map(move |tcp| {
            tcp.map(|tcp| {
                if let Err(err) = tcp.set_nodelay(true) {
                    debug!("ADS: TCP_NODELAY not set: {err}");
                }
                crate::handshake::HandshakeDeadline::new(tcp, handshake)
            })
        });
        let routes = tonic::service::Routes::new(self.into_service());
        let peer_of = |info: &tonic::transport::server::TcpConnectInfo| info.remote_addr();
        crate::http2::serve(incoming, routes, &settings, peer_of, shutdown).await;
    }

    /// The peer's address: tonic records it for plain TCP connections; an authenticator knows it
    /// for the connections of its port.
    fn peer_addr<T>(&self, request: &Request<T>) -> Option<SocketAddr> {
        request
            .remote_addr()
            .or_else(|| self.config.authenticator.as_ref().and_then(|a| a.peer_addr(request.extensions())))
    }

    /// The stream's caller when the server authenticates (see [`AdsConfig::authenticator`]).
    async fn authenticate(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        extensions: &http::Extensions,
        peer: Option<SocketAddr>,
    ) -> Result<Option<StreamCaller>, Status> {
        let Some(authn) = &self.config.authenticator else { return Ok(None) };
        match authn.authenticate(metadata, extensions).await {
            Ok(caller) => Ok(Some(caller)),
            Err(reason) => {
                warn!(peer = ?peer, reason = %reason, "ADS: rejecting stream: caller not authenticated");
                metrics::record_auth_failure("authentication");
                Err(Status::unauthenticated("authentication failure"))
            }
        }
    }

    /// The stream's first request, within [`AdsConfig::handshake_timeout`].
    async fn first_request<T: prost::Message + Default>(
        &self,
        inbound: &mut Requests<T>,
        peer: Option<SocketAddr>,
    ) -> Result<T, Status> {
        let timeout = self.config.handshake_timeout;
        let read = inbound.message();
        let first = if timeout.is_zero() {
            read.await
        } else if let Ok(first) = tokio::time::timeout(timeout, read).await {
            first
        } else {
            metrics::record_handshake_timeout();
            warn!(peer = ?peer, "ADS: closing stream: no first request within {timeout:?}");
            return Err(Status::deadline_exceeded(format!(
                "no first request within {timeout:?} (MESHPILOT_XDS_HANDSHAKE_TIMEOUT)"
            )));
        };
        first?.ok_or_else(|| Status::cancelled("stream closed before its first request"))
    }

    fn start(
        &self,
        first_node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
        peer: Option<SocketAddr>,
        protocol: Variant,
        caller: Option<&StreamCaller>,
    ) -> Result<Connection<S>, Status> {
        let rejected = |e: &dyn std::fmt::Display| {
            warn!(peer = ?peer, protocol = protocol.as_str(), "ADS: rejecting stream: {e}");
        };
        let parts = crate::node::node_parts(first_node).map_err(|e| {
            rejected(&e);
            node_status(&e)
        })?;
        let proxy = self.source.node(parts, caller).map_err(|e| {
            rejected(&e);
            source_status(&e)
        })?;
        let info = self.source.node_info(&proxy);
        if let Some(caller) = caller.filter(|_| self.config.identity_check) {
            check_identity(caller, info.namespace).inspect_err(|e| {
                warn!(node = %info.node_id, peer = ?peer, "ADS: rejecting stream: {}", e.message());
                metrics::record_auth_failure("identity");
            })?;
        }
        let ctx = self.source.connect(&proxy).map_err(|e| {
            warn!(node = %info.node_id, "ADS: source refused connection: {e}");
            source_status(&e)
        })?;
        let proxy = Arc::new(proxy);
        let info = self.source.node_info(&proxy);
        let reg = self.registry.register(Arc::clone(&proxy), info, peer, protocol);
        info!(connection = %reg.entry.id, peer = ?peer, protocol = protocol.as_str(), "ADS: new connection");
        Ok(Connection {
            source: Arc::clone(&self.source),
            ctx: Some(ctx),
            proxy,
            reg,
            convergence: Convergence::default(),
            throttle: Arc::clone(&self.throttle),
            push_wanted: false,
            permit: None,
            send_timeout: self.config.send_timeout,
            limits: self.config.limits.clone(),
            flow_control: self.config.flow_control,
            held: false,
            nack_log: crate::wire::NackLog::default(),
        })
    }
}

fn node_status(e: &NodeError) -> Status {
    Status::invalid_argument(e.to_string())
}

fn source_status(e: &SourceError) -> Status {
    match e {
        SourceError::InvalidNode(_) => Status::invalid_argument(e.to_string()),
        SourceError::Refused(_) => Status::permission_denied(e.to_string()),
        SourceError::Unauthenticated(_) => Status::unauthenticated(e.to_string()),
        SourceError::InvalidRequest(_) => Status::invalid_argument(e.to_string()),
        SourceError::Denied(_) => Status::permission_denied(e.to_string()),
        SourceError::NotReady(_) => Status::unavailable(e.to_string()),
        SourceError::Generate { .. } => Status::internal(e.to_string()),
    }
}

/// One queued item: a response as its gRPC frame ([`crate::framing`]; encoded when it is queued, so
/// the queue holds exactly the bytes it counts) or the status ending the stream, and its size in bytes.
pub(crate) struct Queued {
    size: usize,
    item: Result<Bytes, Status>,
}

/// What the reader of a [`SharedQueue`] got.
pub(crate) enum Dequeued {
    /// The next response's gRPC frame, or the status ending the stream.
    Item(Result<Bytes, Status>),
    /// The stream's task ended without an error: end the stream with `OK`.
    End,
    /// The stream's task abandoned the client (it stopped reading): end with [`abandoned`].
    Abandoned,
}

/// The queue of one stream's responses, shared by the stream's task (which drops the receiver to
/// abandon a client that stopped reading) and the response body (which reads it). It is bounded twice:
/// by count (`AdsConfig::response_buffer`, the channel) and by the encoded bytes it holds
/// (`AdsConfig::response_buffer_bytes`), so a client that stops reading pins at most that much of the
/// server's memory besides what HTTP/2 buffers.
pub(crate) struct SharedQueue<M> {
    rx: std::sync::Mutex<Option<mpsc::Receiver<Box<Queued>>>>,
    _message: std::marker::PhantomData<fn() -> M>,
    /// Encoded bytes of the responses in the queue.
    bytes: AtomicUsize,
    /// Signalled whenever the reader takes an item (room for the sender).
    room: Notify,
}

impl<M> SharedQueue<M> {
    /// Polls the next item; taking one makes room for the sender.
    pub(crate) fn poll_next(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Dequeued> {
        let mut rx = self.rx.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(rx) = rx.as_mut() else { return std::task::Poll::Ready(Dequeued::Abandoned) };
        rx.poll_recv(cx).map(|item| match item {
            Some(queued) => {
                self.bytes.fetch_sub(queued.size, Ordering::AcqRel);
                self.room.notify_one();
                Dequeued::Item(queued.item)
            }
            None => Dequeued::End,
        })
    }

    /// Drops every queued response (the memory is freed at once); the reader then ends the stream
    /// with [`abandoned`].
    fn abandon(&self) {
        drop(self.rx.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take());
        self.bytes.store(0, Ordering::Release);
    }
}

/// Shared handle on a stream's [`SharedQueue`].
pub(crate) type Queue<M> = Arc<SharedQueue<M>>;

/// The status a stream ends with after the server abandoned it (its client stopped reading).
pub(crate) fn abandoned() -> Status {
    Status::deadline_exceeded("client did not read responses within PILOT_XDS_SEND_TIMEOUT: stream closed")
}

/// Why an item could not be queued now.
enum Refused {
    /// No room (count or bytes): the frame comes back.
    Full(Bytes),
    /// The reader is gone.
    Closed,
}

/// The sending half of a stream's responses: a bounded channel (`AdsConfig::response_buffer`
/// responses, `AdsConfig::response_buffer_bytes` bytes).
pub(crate) struct Outbox<M> {
    tx: mpsc::Sender<Box<Queued>>,
    queue: Queue<M>,
    max_bytes: usize,
    /// Largest response sent (`AdsConfig::max_encoding_message_size`).
    max_message_size: usize,
}

impl<M: prost::Message> Outbox<M> {
    /// A queue of `capacity` responses and `max_bytes` encoded bytes (a response larger than that is
    /// still queued when the queue is empty) of responses up to `max_message_size` bytes, and the
    /// stream that reads it.
    pub(crate) fn new(capacity: usize, max_bytes: usize, max_message_size: usize) -> (Self, Queue<M>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let queue = Arc::new(SharedQueue {
            rx: std::sync::Mutex::new(Some(rx)),
            _message: std::marker::PhantomData,
            bytes: AtomicUsize::new(0),
            room: Notify::new(),
        });
        (Outbox { tx, queue: Arc::clone(&queue), max_bytes, max_message_size }, queue)
    }

    /// Ends the stream with `status` when its queue has room (else the client, which stopped
    /// reading, never sees it).
    pub(crate) fn close_with(&self, status: Status) {
        let _ = self.tx.try_send(Box::new(Queued { size: 0, item: Err(status) }));
    }

    /// Queues the frame `frame` if there is room now.
    fn try_queue(&self, frame: Bytes) -> Result<(), Refused> {
        let size = frame.len();
        let queued = self.queue.bytes.load(Ordering::Acquire);
        if queued > 0 && queued.saturating_add(size) > self.max_bytes {
            return Err(Refused::Full(frame));
        }
        match self.tx.try_send(Box::new(Queued { size, item: Ok(frame) })) {
            Ok(()) => {
                self.queue.bytes.fetch_add(size, Ordering::AcqRel);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(q)) => match q.item {
                Ok(frame) => Err(Refused::Full(frame)),
                Err(_) => Err(Refused::Closed),
            },
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Refused::Closed),
        }
    }

    /// Hands `response` to the stream. When the queue is full (the client reads slowly) the
    /// connection's push-throttle slot (`permit`, if it holds one) is released first, so other
    /// proxies' pushes do not wait behind this client. When the client does not make room within
    /// `timeout` (non-zero) the stream is abandoned: its queued responses are dropped (memory freed at
    /// once), the body ends with `DEADLINE_EXCEEDED` ([`abandoned`]) when HTTP/2 next polls it, and the
    /// reason is logged and counted (`pilot_xds_write_timeout`).
    pub(crate) async fn send(
        &self,
        response: M,
        type_url: &str,
        timeout: Duration,
        connection: &str,
        permit: &mut Option<OwnedSemaphorePermit>,
    ) -> Result<(), End> {
        let t0 = Instant::now();
        // Encoded now: the message is freed at once and the queue holds exactly the bytes it counts.
        // A response over the size limit ends the stream with RESOURCE_EXHAUSTED.
        let mut frame = crate::framing::frame(&response, self.max_message_size).map_err(End::Refused)?;
        drop(response);
        let deadline = (!timeout.is_zero()).then(|| tokio::time::Instant::from_std(t0) + timeout);
        loop {
            // Register for the reader's signal before looking, so a wake-up between is not lost.
            let room = self.queue.room.notified();
            match self.try_queue(frame) {
                Ok(()) => break,
                Err(Refused::Closed) => {
                    metrics::record_send_error(type_url);
                    return Err(End::ClientGone);
                }
                Err(Refused::Full(back)) => frame = back,
            }
            if permit.take().is_some() {
                debug!(connection, "ADS: response queue full: push throttle slot released while waiting");
            }
            let waited = match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, room).await.is_ok(),
                None => {
                    room.await;
                    true
                }
            };
            if !waited {
                warn!(
                    connection,
                    "ADS: closing stream: the client read none of its {} queued responses ({} bytes) for \
                     {timeout:?} (PILOT_XDS_SEND_TIMEOUT; next: {})",
                    self.tx.max_capacity() - self.tx.capacity(),
                    self.queue.bytes.load(Ordering::Acquire),
                    short_name(type_url),
                );
                metrics::record_write_timeout();
                metrics::record_send_error(type_url);
                self.queue.abandon();
                return Err(End::SendTimeout);
            }
        }
        metrics::record_send_time(t0.elapsed());
        Ok(())
    }
}

impl<S: ResourceSource> AdsServer<S> {
    /// A new stream up to its first request: admission, authentication, the first request, the
    /// proxy's registration.
    async fn open<T: prost::Message + Default + HasNode>(
        &self,
        request: Request<Requests<T>>,
        protocol: Variant,
    ) -> Result<(Connection<S>, T, Requests<T>), Status> {
        let peer = self.peer_addr(&request);
        self.config.request_limiter.admit(peer).await?;
        let (metadata, extensions, mut inbound) = request.into_parts();
        let caller = self.authenticate(&metadata, &extensions, peer).await?;
        let first = self.first_request(&mut inbound, peer).await?;
        let conn = self.start(first.node(), peer, protocol, caller.as_ref())?;
        Ok((conn, first, inbound))
    }

    /// The SotW method (`StreamAggregatedResources`): admits, authenticates and reads the first
    /// request, then runs the stream as its own task and returns the queue of its responses (the
    /// stream's body, [`crate::framing`]).
    ///
    /// # Errors
    /// The status the stream ends with before any response: admission (`RESOURCE_EXHAUSTED`),
    /// authentication, the first request (missing, late, malformed node), or the source refusing it.
    pub(crate) async fn stream_aggregated_resources(
        &self,
        request: Request<Requests<DiscoveryRequest>>,
    ) -> Result<Queue<DiscoveryResponse>, Status> {
        let (conn, first, inbound) = self.open(request, Variant::Sotw).await?;
        let (tx, responses) = Outbox::new(
            self.config.response_buffer,
            self.config.response_buffer_bytes,
            self.config.max_encoding_message_size,
        );
        tokio::spawn(conn.run(SotwWire { session: SotwSession::new(), tx }, Box::new(first), inbound));
        Ok(responses)
    }

    /// The Delta method (`DeltaAggregatedResources`), as [`AdsServer::stream_aggregated_resources`].
    ///
    /// # Errors
    /// As [`AdsServer::stream_aggregated_resources`].
    pub(crate) async fn delta_aggregated_resources(
        &self,
        request: Request<Requests<DeltaDiscoveryRequest>>,
    ) -> Result<Queue<DeltaDiscoveryResponse>, Status> {
        let (conn, first, inbound) = self.open(request, Variant::Delta).await?;
        let (tx, responses) = Outbox::new(
            self.config.response_buffer,
            self.config.response_buffer_bytes,
            self.config.max_encoding_message_size,
        );
        tokio::spawn(conn.run(DeltaWire { session: DeltaSession::new(), tx }, Box::new(first), inbound));
        Ok(responses)
    }
}

/// The requests of both protocols carry the client's `node` (read from the first one).
pub(crate) trait HasNode {
    /// The request's `node`.
    fn node(&self) -> Option<&envoy_types::pb::envoy::config::core::v3::Node>;
}

impl HasNode for DiscoveryRequest {
    fn node(&self) -> Option<&envoy_types::pb::envoy::config::core::v3::Node> {
        self.node.as_ref()
    }
}

impl HasNode for DeltaDiscoveryRequest {
    fn node(&self) -> Option<&envoy_types::pb::envoy::config::core::v3::Node> {
        self.node.as_ref()
    }
}

/// Nonces unique across the process and across restarts (a reconnecting client may present a
/// nonce from a previous stream).
pub(crate) fn next_nonce() -> String {
    static SALT: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let salt = *SALT.get_or_init(|| {
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        fnv1a(FNV_OFFSET, &nanos.to_le_bytes()) & 0xffff_ffff
    });
    format!("{salt:08x}-{}", COUNTER.fetch_add(1, Ordering::Relaxed) + 1)
}

/// Hash of a response's resources by names and versions (a resource's version changes whenever its
/// content does, [`Resource::version`]; filled in before this is called): recognises a rejected config
/// if it comes again, and a push that would repeat the last response. Hashing versions rather than
/// bytes keeps a push to many proxies from re-reading every shared resource per stream.
pub(crate) fn content_hash(resources: &[Resource]) -> u64 {
    resources
        .iter()
        .fold(FNV_OFFSET, |h, r| fnv1a(fnv1a(fnv1a(h, r.name.as_bytes()), &[0]), r.version.as_bytes()))
}

/// Drops resources whose `Any` type differs from the response type (a client would reject the whole
/// response; RUST-STACK.md pitfall 1; MCP-over-xDS config types carry wrapped resources, see
/// [`crate::type_url::resource_type_matches`]) and fills empty versions with the content hash. Returns
/// the dropped (name, type URL) pairs. The REST-JSON path (`discovery::rest`) applies it too.
pub fn check_resources(type_url: &str, mut g: Generated) -> (Generated, Vec<(String, String)>) {
    let mut dropped = Vec::new();
    g.resources.retain(|r| {
        let ok = crate::type_url::resource_type_matches(type_url, &r.body.type_url);
        if !ok {
            dropped.push((r.name.clone(), r.body.type_url.clone()));
        }
        ok
    });
    for r in &mut g.resources {
        if r.version.is_empty() {
            r.version = content_version(&r.body);
        }
    }
    (g, dropped)
}

/// Why a stream's task ended.
#[derive(Debug)]
pub(crate) enum End {
    /// The server side asked (registry `disconnect`).
    Stopped,
    /// The client closed its side.
    ClientClosed,
    /// The response stream is gone (client disconnected).
    ClientGone,
    /// A transport error reading a request.
    Transport(Status),
    /// The client did not read a response within the send timeout.
    SendTimeout,
    /// A request over a [`StreamLimits`] limit: the stream ends with this status.
    Refused(Status),
}

/// Time from a push being enqueued to the proxy ACKing every response of it.
#[derive(Debug, Default)]
struct Convergence {
    start: Option<Instant>,
    /// type URL → nonce still awaiting its answer.
    waiting: std::collections::BTreeMap<String, String>,
    failed: bool,
}

impl Convergence {
    fn pushed(&mut self, enqueued: Instant, sent: Vec<(String, String)>) {
        if sent.is_empty() {
            return;
        }
        self.start = Some(self.start.map_or(enqueued, |s| s.min(enqueued)));
        self.waiting.extend(sent);
    }

    fn answered(&mut self, type_url: &str, nonce: &str, accepted: bool) {
        if self.waiting.get(type_url).is_none_or(|n| n != nonce) {
            return;
        }
        self.waiting.remove(type_url);
        self.failed |= !accepted;
        if self.waiting.is_empty() {
            if let (Some(start), false) = (self.start, self.failed) {
                metrics::record_convergence(start.elapsed());
            }
            *self = Convergence::default();
        }
    }
}

enum Event<T> {
    Stop,
    Request(Result<Option<T>, Status>),
    /// A push is pending (the connection now waits for a throttle permit).
    Wake,
    /// A throttle permit for the pending push.
    Push(OwnedSemaphorePermit),
}

/// What a send produced.
pub(crate) struct Sent {
    pub(crate) nonce: String,
    pub(crate) resources: usize,
    /// CDS only: the EDS service names of the clusters the EDS that follows must cover (Delta: of
    /// every cluster sent, i.e. added or changed; SotW: of the clusters the client does not watch
    /// endpoints for yet, i.e. new ones).
    pub(crate) eds_names: std::collections::BTreeSet<String>,
}

/// One stream's task.
pub(crate) struct Connection<S: ResourceSource> {
    source: Arc<S>,
    ctx: Option<S::Context>,
    proxy: Arc<S::Node>,
    reg: Registration<S::Node, S::Push>,
    convergence: Convergence,
    /// The server-wide push throttle (`PILOT_PUSH_THROTTLE`).
    throttle: Arc<Semaphore>,
    /// A push is pending and the connection waits for a throttle permit.
    push_wanted: bool,
    /// The throttle slot of the push being sent; released as soon as a send has to wait for the
    /// client ([`Outbox::send`]).
    permit: Option<OwnedSemaphorePermit>,
    /// [`AdsConfig::send_timeout`].
    send_timeout: Duration,
    /// [`AdsConfig::limits`].
    limits: StreamLimits,
    /// [`AdsConfig::flow_control`].
    flow_control: bool,
    /// A push is pending and waits for the client to answer ([`AdsConfig::flow_control`]).
    held: bool,
    /// Bounds this stream's NACK log lines ([`crate::wire::NackLog`]).
    pub(crate) nack_log: crate::wire::NackLog,
}

impl<S: ResourceSource> Connection<S> {
    pub(crate) fn id(&self) -> &str {
        &self.reg.entry.id
    }

    /// The stream's resource limits.
    pub(crate) fn limits(&self) -> &StreamLimits {
        &self.limits
    }

    /// Hands `response` to the client through `outbox` ([`Outbox::send`]: waits for room up to the
    /// send timeout, releasing this connection's push-throttle slot while it waits).
    pub(crate) async fn send_on<M: prost::Message>(
        &mut self,
        outbox: &Outbox<M>,
        response: M,
        type_url: &str,
    ) -> Result<(), End> {
        outbox.send(response, type_url, self.send_timeout, &self.reg.entry.id, &mut self.permit).await
    }

    /// Whether a push must wait for the client's answers ([`AdsConfig::flow_control`]; the wire's
    /// per-type state says which responses are unanswered).
    fn holds_pushes<W: Wire<S>>(&self, wire: &W) -> bool {
        self.flow_control && wire.awaits_answer()
    }

    /// A held push goes ahead once nothing is awaited any more.
    fn release_held<W: Wire<S>>(&mut self, wire: &W) {
        if self.held && !self.holds_pushes(wire) {
            self.held = false;
            self.push_wanted = true;
            debug!(connection = %self.id(), "push released: the client answered");
        }
    }

    pub(crate) fn entry(&self) -> &Entry<S::Node, S::Push> {
        &self.reg.entry
    }

    /// Records the client's answer to the response `nonce` of `type_url` (push convergence).
    pub(crate) fn answered(&mut self, type_url: &str, nonce: &str, accepted: bool) {
        self.convergence.answered(type_url, nonce, accepted);
    }

    /// Holds a pending push while the client has a response to answer; `true` when held.
    fn hold<W: Wire<S>>(&mut self, wire: &W) -> bool {
        if !self.holds_pushes(wire) {
            return false;
        }
        if !self.held {
            self.held = true;
            metrics::record_push_held();
            debug!(connection = %self.id(), "push held until the client answers its last responses");
        }
        true
    }

    async fn next_event<T: prost::Message + Default>(&mut self, inbound: &mut Requests<T>) -> Event<T> {
        let stop = self.reg.entry.stop.notified();
        let wake = self.reg.entry.wake.notified();
        let permit = Arc::clone(&self.throttle).acquire_owned();
        tokio::select! {
            biased;
            () = stop => Event::Stop,
            m = inbound.message() => Event::Request(m),
            Ok(p) = permit, if self.push_wanted => Event::Push(p),
            _ = wake, if !self.push_wanted => Event::Wake,
        }
    }

    /// The stream's loop: the first request, then requests and pushes until either side ends.
    ///
    /// This future lives as long as the stream, so it is kept small: each event (a request, node
    /// metadata included, or a push) is handled on its own heap allocation for the time it runs,
    /// instead of every stream's task reserving room for the largest handler (≈ 8.5 KiB per stream
    /// before, ≈ 1 KiB after; BENCHMARKS.md "Smaller streams").
    async fn run<W: Wire<S>>(
        mut self,
        mut wire: W,
        first: Box<W::Request>,
        mut inbound: Requests<W::Request>,
    ) {
        let end = async {
            Box::pin(self.on_event(&mut wire, Event::Request(Ok(Some(*first))))).await?;
            loop {
                let event = self.next_event(&mut inbound).await;
                Box::pin(self.on_event(&mut wire, event)).await?;
            }
        }
        .await;
        let end: End = match end {
            Ok(()) => End::ClientClosed,
            Err(e) => e,
        };
        match &end {
            // A broken request (too large, undecodable) ends the stream with its status, not OK.
            End::Transport(status) | End::Refused(status) => wire.close_with(status.clone()),
            _ => {}
        }
        self.finish(&end);
    }

    /// Handles one event of the stream's loop; `Err` ends the stream.
    async fn on_event<W: Wire<S>>(&mut self, wire: &mut W, event: Event<W::Request>) -> Result<(), End> {
        match event {
            Event::Stop => Err(End::Stopped),
            Event::Request(Ok(Some(req))) => {
                self.on_request(wire, &req).await?;
                self.release_held(wire);
                Ok(())
            }
            Event::Request(Ok(None)) => Err(End::ClientClosed),
            Event::Request(Err(status)) => Err(End::Transport(status)),
            Event::Wake => {
                self.push_wanted = !self.hold(wire);
                Ok(())
            }
            Event::Push(permit) => {
                self.push_wanted = false;
                if self.hold(wire) {
                    return Ok(());
                }
                self.permit = Some(permit);
                if let Some(p) = self.reg.entry.take_pending() {
                    self.push(wire, p).await?;
                }
                self.permit = None;
                Ok(())
            }
        }
    }

    /// One push: every watched type the source regenerates, in push order (EDS right after CDS when
    /// clusters went out, as their dependency).
    async fn push<W: Wire<S>>(&mut self, wire: &mut W, pending: PendingPush<S::Push>) -> Result<(), End> {
        let Some(ctx) = self.ctx.as_mut() else { return Ok(()) };
        if !self.source.needs_push(ctx, &self.proxy, &pending.event) {
            debug!(connection = %self.id(), "push skipped: not relevant to this proxy");
            return Ok(());
        }
        let mut sent_nonces = Vec::new();
        let mut clusters_sent = None;
        for type_url in wire.watched_types() {
            let sent = match &clusters_sent {
                Some(eds_names) if type_url == ENDPOINT => {
                    wire.send_dependency(self, eds_names, Some(&pending.event)).await?
                }
                _ => wire.send_current(self, &type_url, Trigger::Push(&pending.event)).await?,
            };
            if let Some(sent) = sent {
                if type_url == CLUSTER && sent.resources > 0 {
                    clusters_sent = Some(sent.eds_names);
                }
                sent_nonces.push((type_url, sent.nonce));
            }
        }
        self.convergence.pushed(pending.enqueued, sent_nonces);
        Ok(())
    }

    fn finish(mut self, end: &End) {
        match end {
            End::Transport(status) => {
                debug!(connection = %self.id(), "ADS: stream ended with error: {status}");
            }
            End::Refused(status) => {
                warn!(connection = %self.id(), "ADS: closing stream: {}", status.message());
            }
            other => info!(connection = %self.id(), "ADS: connection closed ({other:?})"),
        }
        if let Some(ctx) = self.ctx.take() {
            self.source.disconnect(ctx, &self.proxy);
        }
    }

    /// Calls the source; `Ok(None)` when it has nothing or failed (logged, counted), `Err` with the
    /// status ending the stream when the source refused the request (see [`ResourceSource::generate`]).
    pub(crate) fn generate(
        &mut self,
        protocol: Variant,
        type_url: &str,
        watch: &Watch,
        trigger: Trigger<'_, S::Push>,
    ) -> Result<Option<Generated>, End> {
        let Some(ctx) = self.ctx.as_mut() else { return Ok(None) };
        let request = GenerateRequest { proxy: &*self.proxy, type_url, protocol, watch, trigger };
        Ok(match self.source.generate(ctx, &request) {
            Ok(g) => g.map(|g| {
                let (g, dropped) = check_resources(type_url, g);
                for (name, any_type) in dropped {
                    warn!(
                        connection = %self.reg.entry.id,
                        "{}: dropping resource {name:?}: its Any type {any_type:?} is not the response type",
                        short_name(type_url)
                    );
                    metrics::record_internal_error();
                }
                g
            }),
            Err(e @ (SourceError::Generate { .. } | SourceError::NotReady(_))) => {
                warn!(connection = %self.reg.entry.id, "{}: generation failed: {e}", short_name(type_url));
                metrics::record_internal_error();
                None
            }
            Err(e) => {
                warn!(connection = %self.reg.entry.id, "{}: refused: {e}", short_name(type_url));
                return Err(End::Refused(source_status(&e)));
            }
        })
    }

    pub(crate) fn count_sent(&self, type_url: &str, count: usize, bytes: usize) {
        self.entry().update_type(type_url, |s| {
            s.responses += 1;
            s.bytes_sent += bytes as u64;
            s.resources_sent += count as u64;
            s.last_resources = count;
            s.last_send_time = Some(SystemTime::now());
        });
    }
}

pub(crate) fn trigger_label<P>(t: &Trigger<'_, P>) -> &'static str {
    match t {
        Trigger::Request => " (request)",
        Trigger::Push(_) => "",
        Trigger::Dependency => " (dependency)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::Any;

    fn res(name: &str, type_url: &str, version: &str) -> Resource {
        Resource {
            name: name.into(),
            version: version.into(),
            body: Any { type_url: type_url.into(), value: vec![1] },
        }
    }

    #[test]
    fn resources_of_another_type_are_dropped_and_empty_versions_filled() {
        let g = Generated::full(
            "1",
            vec![res("a", CLUSTER, ""), res("hcm", "envoy.filters.network.http_connection_manager", "1")],
        );
        let (g, dropped) = check_resources(CLUSTER, g);
        assert_eq!(g.resources.len(), 1);
        assert_eq!(g.resources[0].version, content_version(&g.resources[0].body));
        assert_eq!(
            dropped,
            vec![("hcm".to_owned(), "envoy.filters.network.http_connection_manager".to_owned())]
        );
    }

    #[test]
    fn nonces_are_unique_and_content_hash_depends_on_names_and_versions() {
        assert_ne!(next_nonce(), next_nonce());
        let a = content_hash(&[res("a", CLUSTER, "1")]);
        assert_ne!(a, content_hash(&[res("a", CLUSTER, "2")]), "a new version is new content");
        let mut same_version = res("a", CLUSTER, "1");
        same_version.body.value = vec![2];
        assert_eq!(a, content_hash(&[same_version]), "the version stands for the bytes");
        assert_ne!(a, content_hash(&[res("b", CLUSTER, "1")]));
        assert_ne!(a, content_hash(&[]));
    }

    fn response(bytes: usize) -> DiscoveryResponse {
        DiscoveryResponse { version_info: "v".repeat(bytes), ..Default::default() }
    }

    /// The queue holds at most `max_bytes` of responses (one larger response alone); a send that has
    /// to wait gives its push-throttle slot back at once, and one that waits past the send timeout
    /// abandons the stream (queued responses dropped, `DEADLINE_EXCEEDED` for the reader).
    #[tokio::test]
    async fn the_queue_is_bounded_by_bytes_and_a_waiting_send_releases_its_slot() {
        let (outbox, queue) = Outbox::<DiscoveryResponse>::new(16, 1_000, 1 << 20);
        let throttle = Arc::new(Semaphore::new(1));
        let mut permit = Some(Arc::clone(&throttle).acquire_owned().await.unwrap());
        let wait = Duration::from_secs(30);
        // Larger than the bound, but the queue is empty: queued.
        outbox.send(response(1_500), CLUSTER, wait, "c", &mut permit).await.unwrap();
        assert!(permit.is_some(), "no wait, the slot is kept");
        assert_eq!(throttle.available_permits(), 0);
        // Anything more waits for the reader, and the slot is released meanwhile.
        let reader = async {
            // Wait until the sender gave the slot back, then read one response.
            let _slot = Arc::clone(&throttle).acquire_owned().await.unwrap();
            std::future::poll_fn(|cx| queue.poll_next(cx)).await
        };
        let (sent, read) = tokio::join!(outbox.send(response(10), CLUSTER, wait, "c", &mut permit), reader);
        sent.unwrap();
        let Dequeued::Item(Ok(frame)) = read else { panic!("a response") };
        assert_eq!(
            <DiscoveryResponse as prost::Message>::decode(&frame[5..]).unwrap().version_info.len(),
            1_500
        );
        assert!(permit.is_none());
        // The queue counts the frame it holds: the gRPC prefix and the message.
        assert_eq!(queue.bytes.load(Ordering::Acquire), 5 + prost::Message::encoded_len(&response(10)));
        // 995 more bytes do not fit next to the queued response; nobody reads: the stream is abandoned.
        let end = outbox.send(response(995), CLUSTER, Duration::from_millis(50), "c", &mut permit).await;
        assert!(matches!(end, Err(End::SendTimeout)), "{end:?}");
        let after = std::future::poll_fn(|cx| queue.poll_next(cx)).await;
        assert!(matches!(after, Dequeued::Abandoned));
    }

    #[test]
    fn stream_limits_name_the_limit_and_its_variable() {
        let limits = StreamLimits { max_resource_names: 10, max_types: 2 };
        assert!(limits.check_names(ENDPOINT, 10).is_ok());
        let e = limits.check_names(ENDPOINT, 11).unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(e.message().contains("11 for") && e.message().contains("limit is 10"), "{}", e.message());
        assert!(e.message().contains("MESHPILOT_XDS_MAX_RESOURCE_NAMES"), "{}", e.message());
        assert!(limits.check_new_type("t", 1).is_ok());
        let e = limits.check_new_type("t", 2).unwrap_err();
        assert!(e.message().contains("MESHPILOT_XDS_MAX_TYPES_PER_STREAM"), "{}", e.message());
    }

    #[test]
    fn convergence_waits_for_every_type_of_the_push() {
        let t0 = Instant::now();
        let mut c = Convergence::default();
        c.pushed(t0, vec![(CLUSTER.into(), "n1".into()), (ENDPOINT.into(), "n2".into())]);
        c.answered(CLUSTER, "old", true);
        assert_eq!(c.waiting.len(), 2, "another nonce does not count");
        c.answered(CLUSTER, "n1", true);
        assert_eq!(c.waiting.len(), 1);
        // A newer push before convergence keeps the older start.
        c.pushed(t0 + Duration::from_secs(1), vec![(ENDPOINT.into(), "n3".into())]);
        assert_eq!(c.start, Some(t0));
        c.answered(ENDPOINT, "n2", true);
        assert_eq!(c.waiting.len(), 1, "n2 was superseded by n3");
        c.answered(ENDPOINT, "n3", false);
        assert!(c.waiting.is_empty() && c.start.is_none() && !c.failed, "reset after the push ends");
    }
}
