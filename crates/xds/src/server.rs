//! The RPC edge: a tonic `AggregatedDiscoveryService` (SotW and Delta) over a [`ResourceSource`].
//!
//! Each stream runs as one task:
//!
//! ```text
//!   first request ──► node → Proxy (InvalidArgument if malformed) ──► source.connect ──► register
//!   loop (biased select): stop ▸ request ▸ push wake-up
//!     request ──► session.on_request (pure) ──► answer?  generate ─► send ─► session.on_sent
//!     push    ──► source.needs_push ──► per watched type in CDS, EDS, LDS, RDS order: generate ─► send
//!   end ──► source.disconnect, unregister
//! ```
//!
//! Responses go out through a bounded channel; when the client reads slowly the task waits
//! (back-pressure) rather than buffering. `tonic::Status` appears only here.

use std::{
    future::Future,
    net::SocketAddr,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
    Resource as ProtoResource, aggregated_discovery_service_server::AggregatedDiscoveryService,
};
use tokio::{
    net::TcpListener,
    sync::{OwnedSemaphorePermit, Semaphore, mpsc},
};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};
use tracing::{debug, info, warn};

use crate::{
    delta::{self, DeltaSession},
    framing::AdsService,
    metrics,
    node::{NodeError, Proxy},
    registry::{ConnectionRegistry, Entry, PendingPush, Registration},
    sotw::{self, SentResponse, SotwSession},
    source::{
        FNV_OFFSET, GenerateRequest, Generated, Protocol, Resource, ResourceSource, SourceError, Trigger,
        Watch, content_version, fnv1a,
    },
    type_url::{self, CLUSTER, ENDPOINT, short_name},
};

/// Tuning of the ADS server. Every knob has a default matching Istio or the prototype.
#[derive(Debug, Clone)]
pub struct AdsConfig {
    /// Responses buffered per stream before the stream's task waits for the client to read. Default 16.
    pub response_buffer: usize,
    /// Largest request accepted, in bytes. Default 4 MiB (Istio's `ISTIO_GPRC_MAXRECVMSGSIZE`).
    pub max_decoding_message_size: usize,
    /// Largest response sent, in bytes. Default 256 MiB (quilkin's choice; Envoy's own receive limit
    /// is set in its bootstrap).
    pub max_encoding_message_size: usize,
    /// HTTP/2 keepalive ping interval. Default 30 s (Istio's `GRPC_KEEPALIVE_INTERVAL`).
    pub keepalive_interval: Duration,
    /// HTTP/2 keepalive timeout. Default 10 s (Istio's `GRPC_KEEPALIVE_TIMEOUT`).
    pub keepalive_timeout: Duration,
    /// How many connections may process a push at once (generate and send); the others wait with
    /// their push pending (and keep merging newer ones into it) while still reading requests.
    /// Istio's `PILOT_PUSH_THROTTLE`; default [`default_push_throttle`].
    pub push_throttle: usize,
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
            max_decoding_message_size: 4 * 1024 * 1024,
            max_encoding_message_size: 256 * 1024 * 1024,
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            push_throttle: default_push_throttle(),
        }
    }
}

/// Errors of [`AdsServer::serve`].
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The gRPC server failed (listener or HTTP/2 error).
    #[error("xDS gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// The ADS server: implements `AggregatedDiscoveryService` for any [`ResourceSource`].
pub struct AdsServer<S: ResourceSource> {
    source: Arc<S>,
    registry: ConnectionRegistry<S::Push>,
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
    pub fn with_registry(source: Arc<S>, config: AdsConfig, registry: ConnectionRegistry<S::Push>) -> Self {
        let throttle = Arc::new(Semaphore::new(config.push_throttle.max(1)));
        AdsServer { source, registry, config, throttle }
    }

    /// The connection registry (clone it before [`AdsServer::into_service`] to push and to read
    /// sync status).
    pub fn registry(&self) -> &ConnectionRegistry<S::Push> {
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
    /// completes.
    ///
    /// # Errors
    /// [`ServeError`] if the gRPC server fails.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ServeError> {
        let (interval, timeout) = (self.config.keepalive_interval, self.config.keepalive_timeout);
        tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(interval))
            .http2_keepalive_timeout(Some(timeout))
            .add_service(self.into_service())
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
            .await?;
        Ok(())
    }

    fn start(
        &self,
        first_node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
        peer: Option<SocketAddr>,
        protocol: Protocol,
    ) -> Result<Connection<S>, Status> {
        let proxy = Proxy::from_node(first_node).map_err(|e| {
            warn!(peer = ?peer, protocol = protocol.as_str(), "ADS: rejecting stream: {e}");
            node_status(&e)
        })?;
        let ctx = self.source.connect(&proxy).map_err(|e| {
            warn!(node = %proxy.node_id, "ADS: source refused connection: {e}");
            source_status(&e)
        })?;
        let proxy = Arc::new(proxy);
        let reg = self.registry.register(Arc::clone(&proxy), peer, protocol);
        info!(connection = %reg.entry.id, peer = ?peer, protocol = protocol.as_str(), "ADS: new connection");
        Ok(Connection {
            source: Arc::clone(&self.source),
            ctx: Some(ctx),
            proxy,
            reg,
            convergence: Convergence::default(),
            throttle: Arc::clone(&self.throttle),
            push_wanted: false,
        })
    }
}

fn node_status(e: &NodeError) -> Status {
    Status::invalid_argument(e.to_string())
}

fn source_status(e: &SourceError) -> Status {
    match e {
        SourceError::Refused(_) => Status::permission_denied(e.to_string()),
        SourceError::NotReady(_) => Status::unavailable(e.to_string()),
        SourceError::Generate { .. } => Status::internal(e.to_string()),
    }
}

#[tonic::async_trait]
impl<S: ResourceSource> AggregatedDiscoveryService for AdsServer<S> {
    type StreamAggregatedResourcesStream = ReceiverStream<Result<DiscoveryResponse, Status>>;
    type DeltaAggregatedResourcesStream = ReceiverStream<Result<DeltaDiscoveryResponse, Status>>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let peer = request.remote_addr();
        let mut inbound = request.into_inner();
        let Some(first) = inbound.message().await? else {
            return Err(Status::cancelled("stream closed before its first request"));
        };
        let conn = self.start(first.node.as_ref(), peer, Protocol::Sotw)?;
        let (tx, rx) = mpsc::channel(self.config.response_buffer.max(1));
        tokio::spawn(conn.run(SotwWire { session: SotwSession::new(), tx }, first, inbound));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let peer = request.remote_addr();
        let mut inbound = request.into_inner();
        let Some(first) = inbound.message().await? else {
            return Err(Status::cancelled("stream closed before its first request"));
        };
        let conn = self.start(first.node.as_ref(), peer, Protocol::Delta)?;
        let (tx, rx) = mpsc::channel(self.config.response_buffer.max(1));
        tokio::spawn(conn.run(DeltaWire { session: DeltaSession::new(), tx }, first, inbound));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Nonces unique across the process and across restarts (a reconnecting client may present a
/// nonce from a previous stream).
fn next_nonce() -> String {
    static SALT: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let salt = *SALT.get_or_init(|| {
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        fnv1a(FNV_OFFSET, &nanos.to_le_bytes()) & 0xffff_ffff
    });
    format!("{salt:08x}-{}", COUNTER.fetch_add(1, Ordering::Relaxed) + 1)
}

/// Hash of a response's resources (names and bytes): recognises a rejected config if it comes again.
fn content_hash(resources: &[Resource]) -> u64 {
    resources.iter().fold(FNV_OFFSET, |h, r| fnv1a(fnv1a(fnv1a(h, r.name.as_bytes()), &[0]), &r.body.value))
}

/// Drops resources whose `Any` type differs from the response type (a client would reject the whole
/// response; RUST-STACK.md pitfall 1) and fills empty versions with the content hash. Returns the
/// dropped (name, type URL) pairs.
fn check_resources(type_url: &str, mut g: Generated) -> (Generated, Vec<(String, String)>) {
    let mut dropped = Vec::new();
    g.resources.retain(|r| {
        let ok = r.body.type_url == type_url;
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
enum End {
    /// The server side asked (registry `disconnect`).
    Stopped,
    /// The client closed its side.
    ClientClosed,
    /// The response stream is gone (client disconnected).
    ClientGone,
    /// A transport error reading a request.
    Transport(Status),
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

/// One wire protocol's half of a stream: its session state, its response channel, and how it
/// answers a request or sends a pushed type. [`Connection::run`] and [`Connection::push`] are the
/// parts common to SotW and Delta.
trait Wire<S: ResourceSource>: Send {
    type Request: prost::Message + Default + Send + 'static;

    /// Handles one request (ACK/NACK bookkeeping, then a response if one is due).
    async fn on_request(&mut self, conn: &mut Connection<S>, req: &Self::Request) -> Result<(), End>;

    /// The subscribed types in push order.
    fn watched_types(&self) -> Vec<String>;

    /// Generates and sends `type_url` for a push; `None` when nothing was sent.
    async fn send_push(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        trigger: Trigger<'_, S::Push>,
    ) -> Result<Option<Sent>, End>;
}

/// State-of-the-world half of a stream.
struct SotwWire {
    session: SotwSession,
    tx: mpsc::Sender<Result<DiscoveryResponse, Status>>,
}

impl<S: ResourceSource> Wire<S> for SotwWire {
    type Request = DiscoveryRequest;

    async fn on_request(&mut self, conn: &mut Connection<S>, req: &DiscoveryRequest) -> Result<(), End> {
        conn.sotw_request(&mut self.session, req, &self.tx).await
    }

    fn watched_types(&self) -> Vec<String> {
        self.session.watched_types()
    }

    async fn send_push(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        trigger: Trigger<'_, S::Push>,
    ) -> Result<Option<Sent>, End> {
        let Some(watch) = self.session.get(type_url).map(|t| t.watch.clone()) else { return Ok(None) };
        conn.sotw_send(&mut self.session, type_url, &watch, trigger, &self.tx).await
    }
}

/// Incremental (delta) half of a stream.
struct DeltaWire {
    session: DeltaSession,
    tx: mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>,
}

impl<S: ResourceSource> Wire<S> for DeltaWire {
    type Request = DeltaDiscoveryRequest;

    async fn on_request(&mut self, conn: &mut Connection<S>, req: &DeltaDiscoveryRequest) -> Result<(), End> {
        conn.delta_request(&mut self.session, req, &self.tx).await
    }

    fn watched_types(&self) -> Vec<String> {
        self.session.watched_types()
    }

    async fn send_push(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        trigger: Trigger<'_, S::Push>,
    ) -> Result<Option<Sent>, End> {
        let Some(watch) = self.session.get(type_url).map(|t| t.subscription.clone()) else { return Ok(None) };
        conn.delta_send(&mut self.session, type_url, &watch, true, trigger, false, &self.tx).await
    }
}

/// What a send produced.
struct Sent {
    nonce: String,
    resources: usize,
}

/// One stream's task.
struct Connection<S: ResourceSource> {
    source: Arc<S>,
    ctx: Option<S::Context>,
    proxy: Arc<Proxy>,
    reg: Registration<S::Push>,
    convergence: Convergence,
    /// The server-wide push throttle (`PILOT_PUSH_THROTTLE`).
    throttle: Arc<Semaphore>,
    /// A push is pending and the connection waits for a throttle permit.
    push_wanted: bool,
}

impl<S: ResourceSource> Connection<S> {
    fn id(&self) -> &str {
        &self.reg.entry.id
    }

    fn entry(&self) -> &Entry<S::Push> {
        &self.reg.entry
    }

    async fn next_event<T: prost::Message + Default>(&mut self, inbound: &mut Streaming<T>) -> Event<T> {
        let stop = self.reg.entry.stop.notified();
        let wake = self.reg.wake.recv();
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
    async fn run<W: Wire<S>>(mut self, mut wire: W, first: W::Request, mut inbound: Streaming<W::Request>) {
        let end = async {
            wire.on_request(&mut self, &first).await?;
            loop {
                match self.next_event(&mut inbound).await {
                    Event::Stop => return Err(End::Stopped),
                    Event::Request(Ok(Some(req))) => wire.on_request(&mut self, &req).await?,
                    Event::Request(Ok(None)) => return Err(End::ClientClosed),
                    Event::Request(Err(status)) => return Err(End::Transport(status)),
                    Event::Wake => self.push_wanted = true,
                    Event::Push(permit) => {
                        self.push_wanted = false;
                        if let Some(p) = self.reg.entry.take_pending() {
                            self.push(&mut wire, p).await?;
                        }
                        drop(permit);
                    }
                }
            }
        }
        .await;
        let end: End = match end {
            Ok(()) => End::ClientClosed,
            Err(e) => e,
        };
        self.finish(&end);
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
        let mut clusters_sent = false;
        for type_url in wire.watched_types() {
            let trigger = if type_url == ENDPOINT && clusters_sent {
                Trigger::Dependency
            } else {
                Trigger::Push(&pending.event)
            };
            if let Some(sent) = wire.send_push(self, &type_url, trigger).await? {
                clusters_sent |= type_url == CLUSTER && sent.resources > 0;
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
            other => info!(connection = %self.id(), "ADS: connection closed ({other:?})"),
        }
        if let Some(ctx) = self.ctx.take() {
            self.source.disconnect(ctx, &self.proxy);
        }
    }

    /// Calls the source; `None` when it has nothing or failed (logged, counted).
    fn generate(
        &mut self,
        protocol: Protocol,
        type_url: &str,
        watch: &Watch,
        trigger: Trigger<'_, S::Push>,
    ) -> Option<Generated> {
        let ctx = self.ctx.as_mut()?;
        let request = GenerateRequest { proxy: &self.proxy, type_url, protocol, watch, trigger };
        match self.source.generate(ctx, &request) {
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
            Err(e) => {
                warn!(connection = %self.reg.entry.id, "{}: generation failed: {e}", short_name(type_url));
                metrics::record_internal_error();
                None
            }
        }
    }

    // === SotW ===

    async fn sotw_request(
        &mut self,
        session: &mut SotwSession,
        req: &DiscoveryRequest,
        tx: &mpsc::Sender<Result<DiscoveryResponse, Status>>,
    ) -> Result<(), End> {
        let type_url = req.type_url.as_str();
        let outcome = session.on_request(&sotw::SotwRequest::from_proto(req));
        let short = short_name(type_url);
        match &outcome.verdict {
            sotw::Verdict::Initial => {
                debug!(connection = %self.id(), names = req.resource_names.len(), "{short}: initial request");
            }
            sotw::Verdict::Ack { nonce, version } => {
                debug!(connection = %self.id(), %nonce, %version, "{short}: ACK");
                self.convergence.answered(type_url, nonce, true);
            }
            sotw::Verdict::Nack { nonce, version, message, current } => {
                warn!(
                    connection = %self.id(), %nonce, running_version = %version, current,
                    "{short}: NACK: {message}"
                );
                metrics::record_reject(type_url);
                self.entry().update_type(type_url, |s| s.rejects += 1);
                self.convergence.answered(type_url, nonce, false);
            }
            sotw::Verdict::Stale { nonce } => {
                debug!(connection = %self.id(), %nonce, "{short}: expired nonce, ignored");
                metrics::record_expired_nonce(type_url);
            }
            sotw::Verdict::Unsubscribe => {
                debug!(connection = %self.id(), "{short}: unsubscribed");
                self.entry().remove_type(type_url);
                return Ok(());
            }
        }
        self.mirror_sotw(session, type_url);
        let Some(respond) = outcome.respond else { return Ok(()) };
        let sent = self.sotw_send(session, type_url, &respond.watch, Trigger::Request, tx).await?;
        if type_url == CLUSTER && sent.is_some_and(|s| s.resources > 0) {
            self.sotw_dependent_endpoints(session, tx).await?;
        }
        Ok(())
    }

    async fn sotw_dependent_endpoints(
        &mut self,
        session: &mut SotwSession,
        tx: &mpsc::Sender<Result<DiscoveryResponse, Status>>,
    ) -> Result<Option<Sent>, End> {
        let Some(watch) = session.get(ENDPOINT).map(|t| t.watch.clone()) else { return Ok(None) };
        self.sotw_send(session, ENDPOINT, &watch, Trigger::Dependency, tx).await
    }

    async fn sotw_send(
        &mut self,
        session: &mut SotwSession,
        type_url: &str,
        watch: &Watch,
        trigger: Trigger<'_, S::Push>,
        tx: &mpsc::Sender<Result<DiscoveryResponse, Status>>,
    ) -> Result<Option<Sent>, End> {
        let t0 = Instant::now();
        let is_request = matches!(trigger, Trigger::Request);
        let full_state = type_url::sotw_requires_full_state(type_url);
        let generated = match self.generate(Protocol::Sotw, type_url, watch, trigger) {
            Some(g) => g,
            // Answer a request even without resources, where an empty response changes nothing.
            None if is_request && !full_state => Generated::full(
                session
                    .get(type_url)
                    .and_then(|t| t.sent.as_ref())
                    .map(|s| s.version.clone())
                    .unwrap_or_default(),
                Vec::new(),
            ),
            None => return Ok(None),
        };
        if generated.removed.is_some() && full_state {
            warn!(
                connection = %self.id(),
                "{}: source returned an incremental result; SotW needs the complete set, not sending",
                short_name(type_url)
            );
            metrics::record_internal_error();
            return Ok(None);
        }
        let content = content_hash(&generated.resources);
        if !is_request && session.is_rejected_content(type_url, content) {
            debug!(connection = %self.id(), "{}: not re-sending the config the proxy rejected", short_name(type_url));
            return Ok(None);
        }
        // A push that would repeat the last response byte for byte (same names, same resources) is
        // not sent: the proxy would change nothing. Istio sends it anyway; here it is the EDS of a
        // new service's push, whose new cluster the proxy asks for right after the CDS update. Requests
        // and dependencies (EDS after CDS, which Envoy needs to finish warming a cluster) are always
        // answered.
        if matches!(trigger, Trigger::Push(_))
            && session.get(type_url).and_then(|t| t.sent.as_ref()).is_some_and(|sent| sent.content == content)
        {
            debug!(connection = %self.id(), "{}: push changes nothing for this proxy, not sent", short_name(type_url));
            return Ok(None);
        }
        let nonce = next_nonce();
        let count = generated.resources.len();
        let bytes: usize = generated.resources.iter().map(|r| r.body.value.len()).sum();
        let version = generated.version;
        let response = DiscoveryResponse {
            version_info: version.clone(),
            resources: generated.resources.into_iter().map(|r| r.body).collect(),
            type_url: type_url.to_owned(),
            nonce: nonce.clone(),
            ..Default::default()
        };
        send(tx, response, type_url).await?;
        session.on_sent(
            type_url,
            SentResponse { nonce: nonce.clone(), version: version.clone(), content, resources: count },
        );
        metrics::record_push(type_url, t0.elapsed(), bytes);
        self.mirror_sotw(session, type_url);
        self.count_sent(type_url, count);
        info!(
            connection = %self.id(), %nonce, %version,
            "{}: PUSH{} resources:{count} size:{bytes}B",
            short_name(type_url), trigger_label(&trigger)
        );
        Ok(Some(Sent { nonce, resources: count }))
    }

    fn mirror_sotw(&self, session: &SotwSession, type_url: &str) {
        let Some(t) = session.get(type_url) else { return };
        self.entry().update_type(type_url, |s| {
            s.watch = t.watch.clone();
            s.state = t.state;
            if let Some(sent) = &t.sent {
                s.nonce_sent.clone_from(&sent.nonce);
                s.version_sent.clone_from(&sent.version);
            }
            if let Some((nonce, version)) = &t.acked {
                s.nonce_acked.clone_from(nonce);
                s.version_acked.clone_from(version);
            }
            s.last_error = t.last_error.as_ref().map(|e| e.message.clone());
        });
    }

    fn count_sent(&self, type_url: &str, count: usize) {
        self.entry().update_type(type_url, |s| {
            s.responses += 1;
            s.resources_sent += count as u64;
            s.last_resources = count;
            s.last_send_time = Some(SystemTime::now());
        });
    }

    // === Delta ===

    async fn delta_request(
        &mut self,
        session: &mut DeltaSession,
        req: &DeltaDiscoveryRequest,
        tx: &mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>,
    ) -> Result<(), End> {
        let type_url = req.type_url.as_str();
        let outcome = session.on_request(&delta::DeltaRequest::from_proto(req));
        let short = short_name(type_url);
        match &outcome.verdict {
            delta::Verdict::Initial { known } => {
                debug!(
                    connection = %self.id(), subscribe = req.resource_names_subscribe.len(), known,
                    "{short}: initial request"
                );
            }
            delta::Verdict::Ack { nonce } => {
                debug!(connection = %self.id(), %nonce, "{short}: ACK");
                self.convergence.answered(type_url, nonce, true);
            }
            delta::Verdict::Nack { nonce, message, current } => {
                warn!(connection = %self.id(), %nonce, current, "{short}: NACK: {message}");
                metrics::record_reject(type_url);
                self.entry().update_type(type_url, |s| s.rejects += 1);
                self.convergence.answered(type_url, nonce, false);
            }
            delta::Verdict::Stale { nonce } => {
                debug!(connection = %self.id(), %nonce, "{short}: expired nonce, ignored");
                metrics::record_expired_nonce(type_url);
            }
            delta::Verdict::Subscription => {
                debug!(
                    connection = %self.id(), subscribe = ?req.resource_names_subscribe,
                    unsubscribe = ?req.resource_names_unsubscribe, "{short}: subscription change"
                );
            }
        }
        self.mirror_delta(session, type_url);
        let Some(respond) = outcome.respond else { return Ok(()) };
        let always = matches!(outcome.verdict, delta::Verdict::Initial { .. });
        let sent = self
            .delta_send(session, type_url, &respond.watch, respond.full, Trigger::Request, always, tx)
            .await?;
        if type_url == CLUSTER && sent.is_some_and(|s| s.resources > 0) {
            self.delta_dependent_endpoints(session, tx).await?;
        }
        Ok(())
    }

    async fn delta_dependent_endpoints(
        &mut self,
        session: &mut DeltaSession,
        tx: &mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>,
    ) -> Result<Option<Sent>, End> {
        let Some(watch) = session.get(ENDPOINT).map(|t| t.subscription.clone()) else { return Ok(None) };
        self.delta_send(session, ENDPOINT, &watch, true, Trigger::Dependency, false, tx).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn delta_send(
        &mut self,
        session: &mut DeltaSession,
        type_url: &str,
        watch: &Watch,
        full: bool,
        trigger: Trigger<'_, S::Push>,
        always: bool,
        tx: &mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>,
    ) -> Result<Option<Sent>, End> {
        let t0 = Instant::now();
        let is_request = matches!(trigger, Trigger::Request);
        let force = matches!(trigger, Trigger::Dependency);
        let generated = match self.generate(Protocol::Delta, type_url, watch, trigger) {
            Some(g) => g,
            // Nothing from the source changes nothing for the client.
            None if always => Generated::incremental(String::new(), Vec::new(), Vec::new()),
            None => return Ok(None),
        };
        let version = generated.version.clone();
        let report_missing = is_request && type_url::delta_reports_missing(type_url);
        let plan = session.plan(type_url, watch, full, generated, force, report_missing);
        if plan.is_empty() && !always {
            debug!(connection = %self.id(), "{}: nothing changed for this proxy", short_name(type_url));
            return Ok(None);
        }
        let nonce = next_nonce();
        let count = plan.resources.len();
        let bytes: usize = plan.resources.iter().map(|r| r.body.value.len()).sum();
        let response = DeltaDiscoveryResponse {
            system_version_info: version.clone(),
            resources: plan
                .resources
                .iter()
                .map(|r| ProtoResource {
                    name: r.name.clone(),
                    version: r.version.clone(),
                    resource: Some(r.body.clone()),
                    ..Default::default()
                })
                .collect(),
            type_url: type_url.to_owned(),
            removed_resources: plan.removed.clone(),
            nonce: nonce.clone(),
            ..Default::default()
        };
        send(tx, response, type_url).await?;
        session.on_sent(type_url, &nonce, &version, &plan);
        metrics::record_push(type_url, t0.elapsed(), bytes);
        self.mirror_delta(session, type_url);
        self.count_sent(type_url, count);
        info!(
            connection = %self.id(), %nonce, %version,
            "{}: PUSH{} resources:{count} removed:{} size:{bytes}B",
            short_name(type_url), trigger_label(&trigger), plan.removed.len()
        );
        Ok(Some(Sent { nonce, resources: count }))
    }

    fn mirror_delta(&self, session: &DeltaSession, type_url: &str) {
        let Some(t) = session.get(type_url) else { return };
        self.entry().update_type(type_url, |s| {
            s.watch = t.subscription.clone();
            s.state = t.state;
            if let Some((nonce, version)) = &t.last_sent {
                s.nonce_sent.clone_from(nonce);
                s.version_sent.clone_from(version);
            }
            if let Some((nonce, version)) = &t.last_acked {
                s.nonce_acked.clone_from(nonce);
                s.version_acked.clone_from(version);
            }
            s.last_error = t.last_error.as_ref().map(|e| e.message.clone());
        });
    }
}

async fn send<T>(tx: &mpsc::Sender<Result<T, Status>>, response: T, type_url: &str) -> Result<(), End> {
    let t0 = Instant::now();
    if tx.send(Ok(response)).await.is_err() {
        metrics::record_send_error(type_url);
        return Err(End::ClientGone);
    }
    metrics::record_send_time(t0.elapsed());
    Ok(())
}

fn trigger_label<P>(t: &Trigger<'_, P>) -> &'static str {
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
    fn nonces_are_unique_and_content_hash_depends_on_names_and_bytes() {
        assert_ne!(next_nonce(), next_nonce());
        let a = content_hash(&[res("a", CLUSTER, "1")]);
        assert_eq!(a, content_hash(&[res("a", CLUSTER, "2")]), "the version is not content");
        assert_ne!(a, content_hash(&[res("b", CLUSTER, "1")]));
        assert_ne!(a, content_hash(&[]));
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
