//! One simulated proxy: an ADS stream (SotW or Delta) that behaves like Envoy and records when things
//! happened.
//!
//! Behaviour (Envoy's, as observed against Istio):
//! - the first request asks for all clusters (CDS wildcard) and carries the node;
//! - each CDS response: ACK, then subscribe EDS to the EDS names of its EDS clusters;
//! - the first EDS response (or a CDS without EDS clusters): ask for all listeners (LDS wildcard);
//! - each LDS response: ACK, then subscribe RDS to the route names of its HTTP connection managers;
//! - every response is ACKed with its nonce (SotW: and its version and the current names); once the
//!   stream is ready, a response is NACKed instead with probability `nack_rate` (SotW: with the last
//!   accepted version; both: an `error_detail`), which the control plane must not answer;
//! - on a stream error the proxy reconnects after a jittered backoff (a random wait between half and
//!   all of 0.5 s, doubling to 5 s, as Envoy's jittered gRPC retry), `RESOURCE_EXHAUSTED` (admission
//!   control) included; Delta sends the versions it holds as `initial_resource_versions`;
//! - a storm stream ([`StreamSpec::storm`]), when the harness calls [`Shared::storm`], drops its
//!   stream and its HTTP/2 connection and reconnects at once on a new connection (a restart or
//!   failover of the control plane, as its proxies see it), and is *ready again* when the four types
//!   are ACKed once more.
//!
//! The stream is *ready* once CDS and LDS were ACKed and EDS and RDS were ACKed or not needed. For
//! each change the harness announces ([`Shared::announce`]), the stream records when a response of
//! the marker's type containing the marker (or a later change's) was received and when its ACK was
//! handed to the connection, relative to the change's T0.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use envoy_types::pb::{
    envoy::{
        config::core::v3::{Node, node::UserAgentVersionType},
        service::discovery::v3::{
            DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::{
        protobuf::{Struct, Value, value::Kind},
        rpc::Status as RpcStatus,
    },
};
use prost::Message;
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use crate::{
    change::Marker,
    layout::{ProxyIdentity, ProxyType},
    names,
    xds::XdsType,
};

/// xDS protocol variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// State of the world (`StreamAggregatedResources`).
    Sotw,
    /// Incremental (`DeltaAggregatedResources`).
    Delta,
}

/// A change the streams watch for.
#[derive(Clone, Debug)]
struct Announced {
    seq: u64,
    marker: Marker,
    t0: Instant,
}

/// State shared by the harness and every stream.
#[derive(Debug)]
pub struct Shared {
    /// When the run started (stream times are relative to it).
    pub origin: Instant,
    markers: RwLock<Vec<Announced>>,
    current: AtomicU64,
    ready: AtomicUsize,
    converged: Mutex<Vec<usize>>,
    stop: watch::Sender<bool>,
    storm: watch::Sender<u64>,
    storm_ready: AtomicUsize,
    rate_limited: AtomicU64,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            origin: Instant::now(),
            markers: RwLock::new(Vec::new()),
            current: AtomicU64::new(0),
            ready: AtomicUsize::new(0),
            converged: Mutex::new(Vec::new()),
            stop: watch::channel(false).0,
            storm: watch::channel(0).0,
            storm_ready: AtomicUsize::new(0),
            rate_limited: AtomicU64::new(0),
        }
    }
}

impl Shared {
    /// Records that change `seq` (1, 2, …) was applied at `t0` with `marker`. Call in increasing `seq`.
    pub fn announce(&self, seq: u64, marker: Marker, t0: Instant) {
        self.markers.write().unwrap_or_else(|p| p.into_inner()).push(Announced { seq, marker, t0 });
        self.current.store(seq, Ordering::SeqCst);
    }

    /// Streams ready so far.
    pub fn ready(&self) -> usize {
        self.ready.load(Ordering::SeqCst)
    }

    /// Affected streams that converged on change `seq`.
    pub fn converged(&self, seq: u64) -> usize {
        let c = self.converged.lock().unwrap_or_else(|p| p.into_inner());
        c.get(seq as usize).copied().unwrap_or(0)
    }

    /// Tells every stream to close and return its report.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Tells every storm stream to drop its stream and connection and reconnect at once.
    pub fn storm(&self) {
        self.storm.send_modify(|g| *g += 1);
    }

    /// Storm streams ready again since [`Shared::storm`].
    pub fn storm_ready(&self) -> usize {
        self.storm_ready.load(Ordering::SeqCst)
    }

    /// Streams refused with `RESOURCE_EXHAUSTED` so far (admission control).
    pub fn rate_limited(&self) -> u64 {
        self.rate_limited.load(Ordering::SeqCst)
    }

    fn count_converged(&self, seqs: std::ops::RangeInclusive<u64>) {
        let mut c = self.converged.lock().unwrap_or_else(|p| p.into_inner());
        for seq in seqs {
            let i = seq as usize;
            if c.len() <= i {
                c.resize(i + 1, 0);
            }
            c[i] += 1;
        }
    }
}

/// How a stream behaves.
#[derive(Clone, Debug)]
pub struct StreamOptions {
    /// SotW or Delta.
    pub protocol: Protocol,
    /// Probability of NACKing a response once ready (0 = never).
    pub nack_rate: f64,
    /// `ISTIO_VERSION` metadata.
    pub istio_version: String,
    /// Envoy version sent as `user_agent_version`.
    pub envoy_version: String,
    /// Extra metadata (`KEY=VALUE`), strings.
    pub metadata: Vec<(String, String)>,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            protocol: Protocol::Sotw,
            nack_rate: 0.0,
            istio_version: "1.26.0".into(),
            envoy_version: "1.40.0".into(),
            metadata: Vec::new(),
        }
    }
}

/// Who a stream is.
#[derive(Clone, Debug)]
pub struct StreamSpec {
    /// Index of the stream (and of its workload in the layout).
    pub index: u32,
    /// Sidecar or router.
    pub kind: ProxyType,
    /// Node identity.
    pub identity: ProxyIdentity,
    /// Whether the harness expects this stream to see the changes.
    pub affected: bool,
    /// Whether this stream reconnects when the harness calls [`Shared::storm`].
    pub storm: bool,
}

/// What one stream saw of one change.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChangeObservation {
    /// Response holding the marker received, after T0.
    pub received: Option<Duration>,
    /// Its ACK handed to the connection, after T0.
    pub acked: Option<Duration>,
    /// Responses received while this change was the newest.
    pub responses: u64,
    /// Bytes of those responses (encoded messages).
    pub bytes: u64,
}

/// Everything one stream measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StreamReport {
    /// Stream index.
    pub index: u32,
    /// Node id.
    pub node_id: String,
    /// Expected to see the changes.
    pub affected: bool,
    /// A storm stream (reconnects at [`Shared::storm`]).
    pub storm: bool,
    /// When the stream started connecting, after the run's origin.
    pub started: Duration,
    /// From the start of connecting to ready (all four types ACKed or not needed).
    pub ready_after: Option<Duration>,
    /// From the start of connecting to the first response of each type (CDS, EDS, LDS, RDS).
    pub first_response: [Option<Duration>; 4],
    /// Responses per type.
    pub responses: [u64; 4],
    /// Encoded response bytes per type.
    pub bytes: [u64; 4],
    /// Resources per type, summed over responses.
    pub resources: [u64; 4],
    /// NACKs sent.
    pub nacks: u64,
    /// Reconnections after a stream error.
    pub reconnects: u64,
    /// Streams refused with `RESOURCE_EXHAUSTED` (admission control), retried.
    pub rate_limited: u64,
    /// Storm streams: from the storm to ready again (all four types ACKed on the new connection).
    pub storm_ready_after: Option<Duration>,
    /// Errors (the first few), e.g. `Unavailable: not ready`.
    pub errors: Vec<String>,
    /// Per change (index = seq; 0 = before the first change): what the stream saw.
    pub changes: Vec<ChangeObservation>,
    /// Responses whose nonce was ACKed or NACKed (equals all responses received).
    pub answered: u64,
    /// Names the stream followed at the end: EDS and RDS subscriptions.
    pub subscribed: [usize; 2],
}

impl StreamReport {
    fn epoch(&mut self, seq: u64) -> &mut ChangeObservation {
        let i = seq as usize;
        if self.changes.len() <= i {
            self.changes.resize(i + 1, ChangeObservation::default());
        }
        &mut self.changes[i]
    }

    fn error(&mut self, e: String) {
        if self.errors.len() < 5 {
            self.errors.push(e);
        }
    }
}

/// The node of a stream: Istio's id and metadata, as the agent writes them.
pub fn node(spec: &StreamSpec, options: &StreamOptions) -> Node {
    let s = |v: &str| Value { kind: Some(Kind::StringValue(v.to_string())) };
    let id = &spec.identity;
    let mut fields: std::collections::BTreeMap<String, Value> = [
        ("NAMESPACE", s(&id.namespace)),
        ("INSTANCE_IPS", s(&id.ip)),
        ("WORKLOAD_NAME", s(&id.workload)),
        ("SERVICE_ACCOUNT", s(&id.service_account)),
        ("CLUSTER_ID", s("Kubernetes")),
        ("MESH_ID", s("cluster.local")),
        ("ISTIO_VERSION", s(&options.istio_version)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let labels = Struct { fields: id.labels.iter().map(|(k, v)| (k.clone(), s(v))).collect() };
    fields.insert("LABELS".into(), Value { kind: Some(Kind::StructValue(labels)) });
    for (k, v) in &options.metadata {
        fields.insert(k.clone(), s(v));
    }
    Node {
        id: id.node_id.clone(),
        cluster: format!("{}.{}", id.workload, id.namespace),
        metadata: Some(Struct { fields: fields.into_iter().collect() }),
        user_agent_name: "envoy".into(),
        user_agent_version_type: Some(UserAgentVersionType::UserAgentVersion(options.envoy_version.clone())),
        ..Default::default()
    }
}

/// A tiny deterministic PRNG (xorshift64*), for NACK decisions.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        self.unit() < p
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        x as f64 / (1u64 << 53) as f64
    }
}

/// Per-type state, both protocols.
#[derive(Debug, Default)]
struct TypeState {
    requested: bool,
    acked: bool,
    /// SotW: last accepted version and last nonce.
    version: String,
    nonce: String,
    /// EDS/RDS: subscribed names.
    names: BTreeSet<String>,
    /// Delta: held resources (name → version).
    held: HashMap<String, String>,
}

/// What a Delta stream follows from the clusters and listeners it holds.
#[derive(Debug, Default)]
struct Follow {
    cluster_eds: HashMap<String, Option<String>>,
    listener_rds: HashMap<String, Vec<String>>,
}

/// The stream's memory across reconnects and its counters.
struct Stream<'a> {
    spec: &'a StreamSpec,
    options: &'a StreamOptions,
    shared: &'a Shared,
    report: StreamReport,
    types: [TypeState; 4],
    follow: Follow,
    last_seen: u64,
    rng: Rng,
    connect_start: Instant,
    ready: bool,
    /// When the storm made this stream reconnect, until it is ready again.
    storm_started: Option<Instant>,
}

/// The error a storm stream's session ends with when the harness calls [`Shared::storm`].
const STORM: &str = "storm: reconnecting on a new connection";

/// Resolves when the harness calls [`Shared::storm`] (never for a stream without a receiver).
async fn storm_signal(storm: &mut Option<watch::Receiver<u64>>) {
    if let Some(rx) = storm
        && rx.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

/// Runs one stream on `channel` until [`Shared::stop`], then returns what it measured. A storm
/// stream ([`StreamSpec::storm`]) reconnects on a new connection from `endpoint` at each
/// [`Shared::storm`].
pub async fn run(
    channel: Channel,
    endpoint: Option<tonic::transport::Endpoint>,
    spec: StreamSpec,
    options: StreamOptions,
    shared: Arc<Shared>,
) -> StreamReport {
    let mut channel = channel;
    let start = Instant::now();
    let mut s = Stream {
        spec: &spec,
        options: &options,
        shared: &shared,
        report: StreamReport {
            index: spec.index,
            node_id: spec.identity.node_id.clone(),
            affected: spec.affected,
            storm: spec.storm,
            started: start.saturating_duration_since(shared.origin),
            ..Default::default()
        },
        types: Default::default(),
        follow: Follow::default(),
        last_seen: 0,
        rng: Rng::new(u64::from(spec.index) + 1),
        connect_start: start,
        ready: false,
        storm_started: None,
    };
    let mut stop = shared.stop.subscribe();
    let mut storm = spec.storm.then(|| shared.storm.subscribe());
    const FIRST_BACKOFF: Duration = Duration::from_millis(500);
    let mut backoff = FIRST_BACKOFF;
    loop {
        if *stop.borrow() {
            break;
        }
        let result = match options.protocol {
            Protocol::Sotw => s.sotw(channel.clone(), &mut stop, &mut storm).await,
            Protocol::Delta => s.delta(channel.clone(), &mut stop, &mut storm).await,
        };
        match result {
            Ok(()) => break,
            Err(e) if e == STORM => {
                // At once, on a new connection (the old one is dropped with the last stream on it).
                if let Some(endpoint) = &endpoint {
                    channel = endpoint.connect_lazy();
                }
                s.ready = false;
                for t in &mut s.types {
                    t.acked = false;
                }
                s.storm_started = Some(Instant::now());
                backoff = FIRST_BACKOFF;
            }
            Err(e) => {
                if e.starts_with("ResourceExhausted") {
                    s.report.rate_limited += 1;
                    shared.rate_limited.fetch_add(1, Ordering::SeqCst);
                }
                s.report.error(e);
                if *stop.borrow() {
                    break;
                }
                s.report.reconnects += 1;
                // Jittered (Envoy's backoff is too): a wave of refused streams must not come back
                // as one wave.
                let wait = backoff.mul_f64(0.5 + 0.5 * s.rng.unit());
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
    s.report.subscribed = [s.types[1].names.len(), s.types[3].names.len()];
    s.report
}

/// `Code: message: cause: cause…` (the transport's causes say what broke: refused, reset, timed out).
fn status_text(s: &tonic::Status) -> String {
    let mut text = format!("{:?}: {}", s.code(), s.message());
    let mut cause = std::error::Error::source(s);
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

fn nack_detail() -> Option<RpcStatus> {
    Some(RpcStatus { code: 3, message: "xds-load: simulated NACK".into(), details: Vec::new() })
}

impl Stream<'_> {
    /// Records a response of `t` (sizes, first-response time) before it is answered.
    fn received(&mut self, t: XdsType, bytes: usize, resources: usize) {
        let i = t.index();
        let r = &mut self.report;
        r.responses[i] += 1;
        r.bytes[i] += bytes as u64;
        r.resources[i] += resources as u64;
        if r.first_response[i].is_none() {
            r.first_response[i] = Some(self.connect_start.elapsed());
        }
        let epoch = self.shared.current.load(Ordering::SeqCst);
        let e = self.report.epoch(epoch);
        e.responses += 1;
        e.bytes += bytes as u64;
    }

    /// The newest announced change of type `t` newer than what the stream saw, whose marker is in
    /// one of `bodies`.
    fn find_marker<'b>(
        &self,
        t: XdsType,
        bodies: impl Iterator<Item = &'b [u8]> + Clone,
    ) -> Option<(u64, Instant)> {
        let markers = self.shared.markers.read().unwrap_or_else(|p| p.into_inner());
        for m in markers.iter().rev().take_while(|m| m.seq > self.last_seen) {
            if m.marker.xds_type != t {
                continue;
            }
            let finder = memchr::memmem::Finder::new(&m.marker.bytes);
            if bodies.clone().any(|b| finder.find(b).is_some()) {
                return Some((m.seq, m.t0));
            }
        }
        None
    }

    /// Records convergence on every change up to `seq` not yet seen (a later change supersedes).
    fn converged(&mut self, seq: u64, received: Instant, acked: Instant) {
        let markers = self.shared.markers.read().unwrap_or_else(|p| p.into_inner());
        let t0s: Vec<(u64, Instant)> = markers
            .iter()
            .filter(|m| m.seq > self.last_seen && m.seq <= seq)
            .map(|m| (m.seq, m.t0))
            .collect();
        drop(markers);
        for (s, t0) in t0s {
            let e = self.report.epoch(s);
            e.received = Some(received.saturating_duration_since(t0));
            e.acked = Some(acked.saturating_duration_since(t0));
        }
        if self.spec.affected {
            self.shared.count_converged(self.last_seen + 1..=seq);
        }
        self.last_seen = seq;
    }

    fn check_ready(&mut self) {
        if self.ready {
            return;
        }
        let [c, e, l, r] = &self.types;
        if c.acked && l.acked && (e.acked || e.names.is_empty()) && (r.acked || r.names.is_empty()) {
            self.ready = true;
            if let Some(storm) = self.storm_started.take() {
                self.report.storm_ready_after = Some(storm.elapsed());
                self.shared.storm_ready.fetch_add(1, Ordering::SeqCst);
            } else if self.report.ready_after.is_none() {
                self.report.ready_after = Some(self.connect_start.elapsed());
                self.shared.ready.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    fn eds_wanted(&self) -> BTreeSet<String> {
        self.follow.cluster_eds.values().flatten().cloned().collect()
    }

    fn rds_wanted(&self) -> BTreeSet<String> {
        self.follow.listener_rds.values().flatten().cloned().collect()
    }

    // ---- SotW ----

    async fn sotw(
        &mut self,
        channel: Channel,
        stop: &mut watch::Receiver<bool>,
        storm: &mut Option<watch::Receiver<u64>>,
    ) -> Result<(), String> {
        // A new stream starts from nothing (SotW has no resume).
        self.types = Default::default();
        let (tx, rx) = mpsc::channel::<DiscoveryRequest>(16);
        let first = DiscoveryRequest {
            node: Some(node(self.spec, self.options)),
            type_url: XdsType::Cluster.url().into(),
            ..Default::default()
        };
        self.types[0].requested = true;
        tx.send(first).await.map_err(|e| e.to_string())?;
        let mut client = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(usize::MAX);
        let mut responses = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await
            .map_err(|s| status_text(&s))?
            .into_inner();
        loop {
            let msg = tokio::select! {
                _ = stop.changed() => return Ok(()),
                () = storm_signal(storm) => return Err(STORM.into()),
                m = responses.message() => m,
            };
            let resp = match msg {
                Ok(Some(r)) => r,
                Ok(None) => return Err("stream closed by the server".into()),
                Err(s) => return Err(status_text(&s)),
            };
            let received = Instant::now();
            self.sotw_response(&tx, resp, received).await?;
        }
    }

    async fn sotw_send(
        &self,
        tx: &mpsc::Sender<DiscoveryRequest>,
        t: XdsType,
        nack: bool,
    ) -> Result<(), String> {
        let st = &self.types[t.index()];
        let req = DiscoveryRequest {
            type_url: t.url().into(),
            version_info: st.version.clone(),
            response_nonce: st.nonce.clone(),
            resource_names: st.names.iter().cloned().collect(),
            error_detail: if nack { nack_detail() } else { None },
            ..Default::default()
        };
        tx.send(req).await.map_err(|_| "request channel closed".to_string())
    }

    async fn sotw_response(
        &mut self,
        tx: &mpsc::Sender<DiscoveryRequest>,
        resp: DiscoveryResponse,
        received: Instant,
    ) -> Result<(), String> {
        let Some(t) = XdsType::from_url(&resp.type_url) else {
            // A type we never asked for: ACK it so the server is not left waiting.
            let req = DiscoveryRequest {
                type_url: resp.type_url.clone(),
                version_info: resp.version_info.clone(),
                response_nonce: resp.nonce.clone(),
                ..Default::default()
            };
            self.report.answered += 1;
            return tx.send(req).await.map_err(|_| "request channel closed".to_string());
        };
        self.received(t, resp.encoded_len(), resp.resources.len());
        let i = t.index();
        if self.ready && self.rng.chance(self.options.nack_rate) {
            self.types[i].nonce = resp.nonce;
            self.report.nacks += 1;
            self.report.answered += 1;
            return self.sotw_send(tx, t, true).await;
        }
        let marker = self.find_marker(t, resp.resources.iter().map(|r| r.value.as_slice()));
        self.types[i].version = resp.version_info;
        self.types[i].nonce = resp.nonce;
        self.types[i].acked = true;
        self.sotw_send(tx, t, false).await?;
        self.report.answered += 1;
        if let Some((seq, _)) = marker {
            self.converged(seq, received, Instant::now());
        }
        match t {
            XdsType::Cluster => {
                let wanted: BTreeSet<String> =
                    resp.resources.iter().filter_map(|r| names::eds_name(&r.value)).collect();
                let eds = &mut self.types[XdsType::Endpoint.index()];
                if wanted != eds.names || (!eds.requested && !wanted.is_empty()) {
                    eds.names = wanted;
                    eds.requested = true;
                    self.sotw_send(tx, XdsType::Endpoint, false).await?;
                }
                if self.types[XdsType::Endpoint.index()].names.is_empty() {
                    self.sotw_request_listeners(tx).await?;
                }
            }
            XdsType::Endpoint => self.sotw_request_listeners(tx).await?,
            XdsType::Listener => {
                let mut out = Vec::new();
                for r in &resp.resources {
                    names::rds_names(&r.value, &mut out);
                }
                let wanted: BTreeSet<String> = out.into_iter().collect();
                let rds = &mut self.types[XdsType::Route.index()];
                if wanted != rds.names || (!rds.requested && !wanted.is_empty()) {
                    rds.names = wanted;
                    rds.requested = true;
                    self.sotw_send(tx, XdsType::Route, false).await?;
                }
            }
            XdsType::Route => {}
        }
        self.check_ready();
        Ok(())
    }

    async fn sotw_request_listeners(&mut self, tx: &mpsc::Sender<DiscoveryRequest>) -> Result<(), String> {
        let lds = &mut self.types[XdsType::Listener.index()];
        if lds.requested {
            return Ok(());
        }
        lds.requested = true;
        self.sotw_send(tx, XdsType::Listener, false).await
    }

    // ---- Delta ----

    async fn delta(
        &mut self,
        channel: Channel,
        stop: &mut watch::Receiver<bool>,
        storm: &mut Option<watch::Receiver<u64>>,
    ) -> Result<(), String> {
        for t in &mut self.types {
            t.requested = false;
        }
        let (tx, rx) = mpsc::channel::<DeltaDiscoveryRequest>(16);
        let first = DeltaDiscoveryRequest {
            node: Some(node(self.spec, self.options)),
            type_url: XdsType::Cluster.url().into(),
            initial_resource_versions: self.types[0].held.clone(),
            ..Default::default()
        };
        self.types[0].requested = true;
        tx.send(first).await.map_err(|e| e.to_string())?;
        // On a reconnect, resume the other types at once with what is held.
        for t in [XdsType::Endpoint, XdsType::Listener, XdsType::Route] {
            let st = &self.types[t.index()];
            if st.held.is_empty() && st.names.is_empty() {
                continue;
            }
            let req = DeltaDiscoveryRequest {
                type_url: t.url().into(),
                resource_names_subscribe: st.names.iter().cloned().collect(),
                initial_resource_versions: st.held.clone(),
                ..Default::default()
            };
            self.types[t.index()].requested = true;
            tx.send(req).await.map_err(|e| e.to_string())?;
        }
        let mut client = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(usize::MAX);
        let mut responses = client
            .delta_aggregated_resources(ReceiverStream::new(rx))
            .await
            .map_err(|s| status_text(&s))?
            .into_inner();
        loop {
            let msg = tokio::select! {
                _ = stop.changed() => return Ok(()),
                () = storm_signal(storm) => return Err(STORM.into()),
                m = responses.message() => m,
            };
            let resp = match msg {
                Ok(Some(r)) => r,
                Ok(None) => return Err("stream closed by the server".into()),
                Err(s) => return Err(status_text(&s)),
            };
            let received = Instant::now();
            self.delta_response(&tx, resp, received).await?;
        }
    }

    async fn delta_response(
        &mut self,
        tx: &mpsc::Sender<DeltaDiscoveryRequest>,
        resp: DeltaDiscoveryResponse,
        received: Instant,
    ) -> Result<(), String> {
        let send = |req: DeltaDiscoveryRequest| async move {
            tx.send(req).await.map_err(|_| "request channel closed".to_string())
        };
        let ack = |nack: bool| DeltaDiscoveryRequest {
            type_url: resp.type_url.clone(),
            response_nonce: resp.nonce.clone(),
            error_detail: if nack { nack_detail() } else { None },
            ..Default::default()
        };
        let Some(t) = XdsType::from_url(&resp.type_url) else {
            self.report.answered += 1;
            return send(ack(false)).await;
        };
        self.received(t, resp.encoded_len(), resp.resources.len());
        if self.ready && self.rng.chance(self.options.nack_rate) {
            self.report.nacks += 1;
            self.report.answered += 1;
            return send(ack(true)).await;
        }
        let bodies = resp.resources.iter().filter_map(|r| r.resource.as_ref()).map(|a| a.value.as_slice());
        let marker = self.find_marker(t, bodies);
        let i = t.index();
        for r in &resp.resources {
            self.types[i].held.insert(r.name.clone(), r.version.clone());
            let body = r.resource.as_ref().map(|a| a.value.as_slice()).unwrap_or_default();
            match t {
                XdsType::Cluster => {
                    self.follow.cluster_eds.insert(r.name.clone(), names::eds_name(body));
                }
                XdsType::Listener => {
                    let mut out = Vec::new();
                    names::rds_names(body, &mut out);
                    self.follow.listener_rds.insert(r.name.clone(), out);
                }
                _ => {}
            }
        }
        for name in &resp.removed_resources {
            self.types[i].held.remove(name);
            self.follow.cluster_eds.remove(name);
            self.follow.listener_rds.remove(name);
        }
        self.types[i].acked = true;
        send(ack(false)).await?;
        self.report.answered += 1;
        if let Some((seq, _)) = marker {
            self.converged(seq, received, Instant::now());
        }
        let follow = match t {
            XdsType::Cluster => Some((XdsType::Endpoint, self.eds_wanted())),
            XdsType::Listener => Some((XdsType::Route, self.rds_wanted())),
            _ => None,
        };
        if let Some((target, wanted)) = follow {
            let st = &mut self.types[target.index()];
            let subscribe: Vec<String> = wanted.difference(&st.names).cloned().collect();
            let unsubscribe: Vec<String> = st.names.difference(&wanted).cloned().collect();
            if !subscribe.is_empty() || !unsubscribe.is_empty() {
                for n in &unsubscribe {
                    st.held.remove(n);
                }
                st.names = wanted;
                st.requested = true;
                send(DeltaDiscoveryRequest {
                    type_url: target.url().into(),
                    resource_names_subscribe: subscribe,
                    resource_names_unsubscribe: unsubscribe,
                    ..Default::default()
                })
                .await?;
            }
        }
        let lds_due = match t {
            XdsType::Cluster => self.types[XdsType::Endpoint.index()].names.is_empty(),
            XdsType::Endpoint => true,
            _ => false,
        };
        if lds_due && !self.types[XdsType::Listener.index()].requested {
            self.types[XdsType::Listener.index()].requested = true;
            send(DeltaDiscoveryRequest { type_url: XdsType::Listener.url().into(), ..Default::default() })
                .await?;
        }
        self.check_ready();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    #[test]
    fn node_carries_istio_metadata() {
        let layout = Layout::default();
        let spec = StreamSpec {
            index: 3,
            kind: ProxyType::Sidecar,
            identity: layout.proxy(ProxyType::Sidecar, 3),
            affected: true,
            storm: false,
        };
        let n = node(&spec, &StreamOptions::default());
        assert_eq!(n.id, "sidecar~10.1.0.4~svc-3-3.ns-3~ns-3.svc.cluster.local");
        let md = n.metadata.unwrap().fields;
        assert_eq!(md["NAMESPACE"], Value { kind: Some(Kind::StringValue("ns-3".into())) });
        assert_eq!(md["INSTANCE_IPS"], Value { kind: Some(Kind::StringValue("10.1.0.4".into())) });
        let Some(Kind::StructValue(labels)) = &md["LABELS"].kind else { panic!("LABELS") };
        assert_eq!(labels.fields["app"], Value { kind: Some(Kind::StringValue("svc-3".into())) });
    }

    #[test]
    fn nack_chance_follows_the_rate() {
        let mut r = Rng::new(1);
        let hits = (0..10_000).filter(|_| r.chance(0.1)).count();
        assert!((800..1200).contains(&hits), "{hits}");
        assert!(!(0..1000).any(|_| r.chance(0.0)));
    }
}
