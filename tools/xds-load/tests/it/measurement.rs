//! The measurement is right: xds-load against a scripted ADS server (tonic, in process) whose
//! answers are known — it pushes each change's marker exactly `DELAY` after being told of the change.
//! The reported convergence must be at least `DELAY` (never earlier than the truth) and within a
//! scheduling bound of it; every response must be answered with its own nonce; NACKed responses must
//! not count as converged. Both SotW and Delta.

use std::{
    collections::BTreeSet,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use envoy_types::pb::{
    envoy::{
        config::{
            cluster::v3::{
                Cluster,
                cluster::{ClusterDiscoveryType, DiscoveryType},
            },
            endpoint::v3::ClusterLoadAssignment,
            listener::v3::{Filter, FilterChain, Listener, filter::ConfigType},
            route::v3::{RouteConfiguration, VirtualHost},
        },
        extensions::filters::network::http_connection_manager::v3::{
            HttpConnectionManager, Rds, http_connection_manager::RouteSpecifier,
        },
        service::discovery::v3::{
            DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
            aggregated_discovery_service_server::{
                AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
            },
        },
    },
    google::protobuf::Any,
};
use prost::{Message, Name};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tonic::{Request, Response, Status, Streaming};
use xds_load::{
    change::{Changer, Marker},
    client::{Protocol, StreamOptions},
    layout::{Layout, ProxyIdentity, ProxyType},
    run::{RunOptions, run},
    xds::XdsType,
};

/// When the scripted server pushes a change's marker, after hearing of it.
const DELAY: Duration = Duration::from_millis(300);
/// Allowed lateness of the measurement over `DELAY` (scheduling on a loaded 2-core machine).
const BOUND: Duration = Duration::from_millis(700);
const HCM: &str =
    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

fn marker(seq: u64) -> String {
    format!("marker-{seq}.scripted")
}

fn any<M: Message + Name>(m: &M) -> Any {
    Any { type_url: M::type_url(), value: m.encode_to_vec() }
}

/// The scripted server's resources of `t` with the route marker of change `seq`.
fn resources(t: XdsType, seq: u64) -> Vec<(String, Any)> {
    match t {
        XdsType::Cluster => vec![(
            "c1".into(),
            any(&Cluster {
                name: "c1".into(),
                cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
                ..Default::default()
            }),
        )],
        XdsType::Endpoint => {
            vec![(
                "c1".into(),
                any(&ClusterLoadAssignment { cluster_name: "c1".into(), ..Default::default() }),
            )]
        }
        XdsType::Listener => {
            let hcm = HttpConnectionManager {
                route_specifier: Some(RouteSpecifier::Rds(Rds {
                    route_config_name: "r1".into(),
                    ..Default::default()
                })),
                ..Default::default()
            };
            let filter = Filter {
                name: "hcm".into(),
                config_type: Some(ConfigType::TypedConfig(Any {
                    type_url: HCM.into(),
                    value: hcm.encode_to_vec(),
                })),
            };
            vec![(
                "l1".into(),
                any(&Listener {
                    name: "l1".into(),
                    filter_chains: vec![FilterChain { filters: vec![filter], ..Default::default() }],
                    ..Default::default()
                }),
            )]
        }
        XdsType::Route => vec![(
            "r1".into(),
            any(&RouteConfiguration {
                name: "r1".into(),
                virtual_hosts: vec![VirtualHost {
                    name: "vh".into(),
                    domains: vec![marker(seq)],
                    ..Default::default()
                }],
                ..Default::default()
            }),
        )],
    }
}

/// What the scripted server saw.
#[derive(Default)]
struct Log {
    /// Nonces of every response sent.
    sent: Vec<String>,
    /// `response_nonce` of every request carrying one, with whether it was a NACK.
    answered: Vec<(String, bool)>,
}

struct Scripted {
    changes: broadcast::Sender<u64>,
    /// How long after being told of a change its marker is pushed.
    delay: Duration,
    /// The newest change whose marker is out (its push was sent).
    current: Arc<AtomicU64>,
    nonce: Arc<AtomicU64>,
    log: Arc<Mutex<Log>>,
}

impl Scripted {
    fn new(delay: Duration) -> Scripted {
        let (changes, _) = broadcast::channel(16);
        Scripted {
            changes,
            delay,
            current: Arc::new(AtomicU64::new(0)),
            nonce: Arc::new(AtomicU64::new(0)),
            log: Arc::new(Mutex::new(Log::default())),
        }
    }
}

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// One stream of the scripted server, protocol-independent: answers a new subscription of a type at
/// once and pushes RDS `DELAY` after each change.
struct Session<R> {
    tx: mpsc::Sender<Result<R, Status>>,
    nonce: Arc<AtomicU64>,
    log: Arc<Mutex<Log>>,
    current: Arc<AtomicU64>,
    delay: Duration,
    make: fn(XdsType, u64, String) -> R,
}

impl<R: Send + 'static> Session<R> {
    async fn send(&self, t: XdsType) {
        let nonce = format!("n{}", self.nonce.fetch_add(1, Ordering::SeqCst));
        self.log.lock().unwrap().sent.push(nonce.clone());
        let _ = self.tx.send(Ok((self.make)(t, self.current.load(Ordering::SeqCst), nonce))).await;
    }

    fn spawn_pushes(self: Arc<Self>, mut changes: broadcast::Receiver<u64>) {
        tokio::spawn(async move {
            while let Ok(seq) = changes.recv().await {
                let me = self.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(me.delay).await;
                    me.current.fetch_max(seq, Ordering::SeqCst);
                    me.send(XdsType::Route).await;
                });
            }
        });
    }

    fn answered(&self, nonce: &str, nack: bool) {
        if !nonce.is_empty() {
            self.log.lock().unwrap().answered.push((nonce.to_string(), nack));
        }
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Scripted {
    type StreamAggregatedResourcesStream = Out<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Out<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Out<DiscoveryResponse>>, Status> {
        let mut requests = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let session = Arc::new(Session {
            tx,
            nonce: self.nonce.clone(),
            log: self.log.clone(),
            current: self.current.clone(),
            delay: self.delay,
            make: |t, seq, nonce| DiscoveryResponse {
                type_url: t.url().into(),
                version_info: format!("v{seq}"),
                resources: resources(t, seq).into_iter().map(|(_, a)| a).collect(),
                nonce,
                ..Default::default()
            },
        });
        session.clone().spawn_pushes(self.changes.subscribe());
        tokio::spawn(async move {
            let mut names: [Option<Vec<String>>; 4] = Default::default();
            while let Some(Ok(req)) = requests.next().await {
                session.answered(&req.response_nonce, req.error_detail.is_some());
                let Some(t) = XdsType::from_url(&req.type_url) else { continue };
                if names[t.index()].as_ref() != Some(&req.resource_names) {
                    names[t.index()] = Some(req.resource_names.clone());
                    session.send(t).await;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Out<DeltaDiscoveryResponse>>, Status> {
        let mut requests = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let session = Arc::new(Session {
            tx,
            nonce: self.nonce.clone(),
            log: self.log.clone(),
            current: self.current.clone(),
            delay: self.delay,
            make: |t, seq, nonce| DeltaDiscoveryResponse {
                type_url: t.url().into(),
                resources: resources(t, seq)
                    .into_iter()
                    .map(|(name, a)| Resource {
                        name,
                        version: format!("v{seq}"),
                        resource: Some(a),
                        ..Default::default()
                    })
                    .collect(),
                nonce,
                ..Default::default()
            },
        });
        session.clone().spawn_pushes(self.changes.subscribe());
        tokio::spawn(async move {
            let mut subscribed: BTreeSet<XdsType> = BTreeSet::new();
            while let Some(Ok(req)) = requests.next().await {
                session.answered(&req.response_nonce, req.error_detail.is_some());
                let Some(t) = XdsType::from_url(&req.type_url) else { continue };
                let new = !req.resource_names_subscribe.is_empty() || req.response_nonce.is_empty();
                if new && subscribed.insert(t) {
                    session.send(t).await;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// Tells the scripted server of each change; the marker is in RDS. With `stall`, the harness thread
/// then stalls that long, as if descheduled right after writing a change.
struct ScriptChanger(broadcast::Sender<u64>, Duration);

impl Changer for ScriptChanger {
    fn marker(&self, seq: u64) -> anyhow::Result<Marker> {
        Ok(Marker { xds_type: XdsType::Route, bytes: marker(seq).into_bytes() })
    }

    fn apply(&mut self, seq: u64) -> anyhow::Result<()> {
        if seq > 0 {
            self.0.send(seq)?;
            std::thread::sleep(self.1);
        }
        Ok(())
    }

    fn affects(&self, _proxy: &ProxyIdentity, _kind: ProxyType) -> bool {
        true
    }
}

async fn scenario(protocol: Protocol, nack_rate: f64) -> (xds_load::report::Summary, Log) {
    scenario_with(protocol, nack_rate, DELAY, Duration::ZERO).await
}

/// A run of 5 streams and 3 changes; the server pushes each marker `delay` after the change, the harness
/// stalls `stall` after applying it.
async fn scenario_with(
    protocol: Protocol,
    nack_rate: f64,
    delay: Duration,
    stall: Duration,
) -> (xds_load::report::Summary, Log) {
    let scripted = Scripted::new(delay);
    let changes = scripted.changes.clone();
    let log = scripted.log.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(AggregatedDiscoveryServiceServer::new(scripted))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let options = RunOptions {
        address: format!("http://{addr}"),
        streams: 5,
        layout: Layout { services: 5, namespaces: 1, ..Layout::default() },
        stream: StreamOptions { protocol, nack_rate, ..StreamOptions::default() },
        settle: Duration::ZERO,
        ready_timeout: Duration::from_secs(20),
        hold: Duration::ZERO,
        changes: 3,
        change_timeout: if nack_rate > 0.0 { DELAY * 3 } else { Duration::from_secs(20) },
        gap: Duration::from_millis(50),
        ..RunOptions::default()
    };
    let summary = run(&options, Some(Box::new(ScriptChanger(changes, stall)))).await.unwrap();
    server.abort();
    let log = std::mem::take(&mut *log.lock().unwrap());
    (summary, log)
}

fn check_convergence(summary: &xds_load::report::Summary, log: &Log) {
    assert_eq!((summary.streams, summary.ready), (5, 5), "{}", summary.table());
    assert_eq!(summary.changes.len(), 3);
    for c in &summary.changes {
        assert_eq!((c.affected, c.converged), (5, 5), "change {}: {}", c.seq, summary.table());
        let (lo, hi) = (DELAY.as_secs_f64() * 1000.0, (DELAY + BOUND).as_secs_f64() * 1000.0);
        let after = &c.converged_after;
        let p50 = after.p50_ms;
        assert!(
            c.received.p50_ms >= lo && after.max_ms < hi,
            "change {}: p50 {p50} ms, max {} ms",
            c.seq,
            after.max_ms
        );
        assert!(after.p50_ms >= c.received.p50_ms, "the ACK follows the response");
        // One push per change per stream: the scripted RDS response.
        assert_eq!(c.max_responses_per_stream, 1, "change {}", c.seq);
    }
    // Every response was answered with its own nonce, and nothing else was answered.
    let sent: BTreeSet<&str> = log.sent.iter().map(String::as_str).collect();
    let answered: BTreeSet<&str> = log.answered.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(sent, answered);
    assert_eq!(log.answered.len(), log.sent.len(), "each nonce answered once");
    let responses: u64 = summary.types.iter().map(|t| t.responses).sum();
    assert_eq!((summary.answered, responses), (log.sent.len() as u64, log.sent.len() as u64));
    assert!(log.answered.iter().all(|(_, nack)| !nack));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_convergence_matches_the_scripted_delay_and_acks_carry_nonces() {
    let (summary, log) = scenario(Protocol::Sotw, 0.0).await;
    check_convergence(&summary, &log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_convergence_matches_the_scripted_delay_and_acks_carry_nonces() {
    let (summary, log) = scenario(Protocol::Delta, 0.0).await;
    check_convergence(&summary, &log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacked_marker_responses_are_not_convergence() {
    for protocol in [Protocol::Sotw, Protocol::Delta] {
        let (summary, log) = scenario(protocol, 1.0).await;
        assert_eq!(summary.ready, 5, "startup responses are never NACKed");
        assert_eq!(summary.not_converged, 15, "{protocol:?}: {}", summary.table());
        assert_eq!(summary.nacks, 15, "{protocol:?}: each marker push NACKed");
        let nacked: Vec<_> = log.answered.iter().filter(|(_, nack)| *nack).collect();
        assert_eq!(nacked.len(), 15);
        // The NACKs name the pushes' nonces.
        assert!(nacked.iter().all(|(n, _)| log.sent.contains(n)));
    }
}

/// A control plane faster than the harness: the marker is pushed at once while the harness thread is
/// still stalled after writing the change. The streams must still recognise it (the change is announced
/// before it is applied), not wait for the change timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marker_pushed_before_the_harness_resumes_is_convergence() {
    for protocol in [Protocol::Sotw, Protocol::Delta] {
        let (summary, _) = scenario_with(protocol, 0.0, Duration::ZERO, Duration::from_millis(200)).await;
        assert_eq!(summary.not_converged, 0, "{protocol:?}: {}", summary.table());
        for c in &summary.changes {
            assert_eq!((c.affected, c.converged), (5, 5), "{protocol:?} change {}", c.seq);
            assert_eq!(
                c.max_responses_per_stream, 1,
                "{protocol:?} change {}: one push, in its own epoch",
                c.seq
            );
        }
    }
}
