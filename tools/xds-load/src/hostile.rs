//! Hostile clients (`run --hostile N`, docs/RELIABILITY.md "Slow and hostile clients"): N connections
//! of a mix of misbehaving kinds, opened once the well-behaved streams are ready and kept until the
//! run ends, so the run's changes show whether the well-behaved proxies still get their pushes and the
//! samples show what the hostile connections cost the control plane.
//!
//! Kinds, round robin ([`Kind::ALL`]):
//! - `never-read`: an ADS stream (64 KiB HTTP/2 windows) asks for all clusters and never reads;
//! - `nonce-flood`: an ADS stream that reads, and sends 1,000 requests with garbage nonces, one for an
//!   unknown type and one naming 20,000 resources (`--hostile-names`: 0 for none, 100,000 for a
//!   watch over the server's names limit);
//! - `name-flood` (not in the default rotation): like `nonce-flood`'s watches (all clusters, an unknown
//!   type, the unknown EDS names) without the garbage, and answering (ACKing) every response as a
//!   real client does, so the server's flow control (`PILOT_ENABLE_FLOW_CONTROL`) does not hold its
//!   pushes: a heavy but protocol-correct client;
//! - `http1-on-grpc`: plaintext HTTP/1 on the gRPC port;
//! - `grpc-slowloris`: half of the HTTP/2 preface on the gRPC port, then silence;
//! - `http-slowloris`: an HTTP/1 request on the debug port whose headers never end (a header line
//!   every 5 s), when the debug address is known.
//!
//! For each connection the report says whether the server closed it and with what (a gRPC status, or
//! the end of the TCP stream).

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use envoy_types::pb::envoy::{
    config::core::v3::Node,
    service::discovery::v3::{
        DiscoveryRequest, DiscoveryResponse,
        aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
    },
};
use serde::Serialize;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::{mpsc, watch},
    task::JoinHandle,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Endpoint;

use crate::xds::XdsType;

/// A kind of hostile connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// ADS stream that never reads its responses.
    NeverRead,
    /// ADS stream flooding garbage requests.
    NonceFlood,
    /// HTTP/1 on the gRPC port.
    Http1OnGrpc,
    /// Half an HTTP/2 preface, then nothing.
    GrpcSlowloris,
    /// Never-ending request headers on the HTTP debug port.
    HttpSlowloris,
    /// ADS stream watching 20,000 unknown names and ACKing every response.
    NameFlood,
}

impl Kind {
    /// Every kind, in the round-robin order.
    pub const ALL: [Kind; 5] =
        [Kind::NeverRead, Kind::NonceFlood, Kind::Http1OnGrpc, Kind::GrpcSlowloris, Kind::HttpSlowloris];

    fn name(self) -> &'static str {
        match self {
            Kind::NeverRead => "never-read",
            Kind::NonceFlood => "nonce-flood",
            Kind::Http1OnGrpc => "http1-on-grpc",
            Kind::GrpcSlowloris => "grpc-slowloris",
            Kind::HttpSlowloris => "http-slowloris",
            Kind::NameFlood => "name-flood",
        }
    }
}

/// What happened to the connections of one kind.
#[derive(Clone, Debug, Default, Serialize)]
pub struct KindReport {
    /// Connections opened.
    pub opened: usize,
    /// Of those, closed by the server before the run ended.
    pub closed_by_server: usize,
    /// How they were closed (gRPC status or "EOF"), with counts.
    pub endings: BTreeMap<String, usize>,
    /// Seconds from opening to the server closing it: largest.
    pub max_seconds_to_close: f64,
    /// Could not even connect.
    pub connect_errors: usize,
}

/// Every kind's report, shared by the connection tasks.
#[derive(Debug, Default)]
struct Tally(Mutex<BTreeMap<&'static str, KindReport>>);

impl Tally {
    fn update(&self, kind: Kind, f: impl FnOnce(&mut KindReport)) {
        f(self.0.lock().unwrap_or_else(|p| p.into_inner()).entry(kind.name()).or_default());
    }

    fn closed(&self, kind: Kind, how: String, opened: Instant) {
        self.update(kind, |r| {
            r.closed_by_server += 1;
            *r.endings.entry(how).or_default() += 1;
            r.max_seconds_to_close = r.max_seconds_to_close.max(opened.elapsed().as_secs_f64());
        });
    }
}

/// The running hostile connections.
pub struct Hostile {
    tally: Arc<Tally>,
    tasks: Vec<JoinHandle<()>>,
    stop: watch::Sender<bool>,
}

impl Hostile {
    /// Opens `n` connections to the ADS port `grpc` (and the debug port `http`, if known: else
    /// `http-slowloris` is skipped in the rotation), round robin over `kinds` (empty: [`Kind::ALL`]);
    /// the `nonce-flood` and `name-flood` streams watch `names` unknown EDS names each (0: none).
    pub fn open(n: u32, grpc: SocketAddr, http: Option<SocketAddr>, kinds: &[Kind], names: usize) -> Hostile {
        let tally = Arc::new(Tally::default());
        let (stop, stop_rx) = watch::channel(false);
        let chosen = if kinds.is_empty() { &Kind::ALL[..] } else { kinds };
        let mut kinds: Vec<Kind> =
            chosen.iter().copied().filter(|k| *k != Kind::HttpSlowloris || http.is_some()).collect();
        if kinds.is_empty() {
            kinds = vec![Kind::NeverRead];
        }
        let tasks = (0..n as usize)
            .map(|i| {
                let kind = kinds[i % kinds.len()];
                let (tally, stop) = (tally.clone(), stop_rx.clone());
                tokio::spawn(connection(i, kind, grpc, http, names, tally, stop))
            })
            .collect();
        Hostile { tally, tasks, stop }
    }

    /// Connections opened so far (connected or failed to).
    pub fn opened(&self) -> usize {
        let t = self.tally.0.lock().unwrap_or_else(|p| p.into_inner());
        t.values().map(|r| r.opened + r.connect_errors).sum()
    }

    /// Closes what is left and returns the per-kind reports.
    pub async fn finish(self) -> BTreeMap<String, KindReport> {
        self.stop.send_replace(true);
        for t in self.tasks {
            let _ = t.await;
        }
        let t = self.tally.0.lock().unwrap_or_else(|p| p.into_inner());
        t.iter().map(|(k, v)| ((*k).to_string(), v.clone())).collect()
    }
}

fn node(i: usize) -> Node {
    Node {
        id: format!(
            "sidecar~10.254.{}.{}~hostile-{i}.hostile~hostile.svc.cluster.local",
            i / 250,
            i % 250 + 1
        ),
        ..Default::default()
    }
}

fn request(t: &str, nonce: &str, names: Vec<String>) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: t.into(),
        response_nonce: nonce.into(),
        resource_names: names,
        ..Default::default()
    }
}

/// A `name-flood` stream's ACK of `r`: the same watch again (its EDS names, the unknown type's one
/// name, the wildcard for the rest), as a SotW client repeats its watch in every request.
fn name_flood_ack(r: &DiscoveryResponse, names: &[String]) -> DiscoveryRequest {
    let watch = if r.type_url == XdsType::Endpoint.url() {
        names.to_vec()
    } else if r.type_url.contains("hostile") {
        vec!["x".into()]
    } else {
        Vec::new()
    };
    DiscoveryRequest { version_info: r.version_info.clone(), ..request(&r.type_url, &r.nonce, watch) }
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn connection(
    i: usize,
    kind: Kind,
    grpc: SocketAddr,
    http: Option<SocketAddr>,
    names: usize,
    tally: Arc<Tally>,
    mut stop: watch::Receiver<bool>,
) {
    let opened = Instant::now();
    match kind {
        Kind::NeverRead | Kind::NonceFlood | Kind::NameFlood => {
            let mut endpoint = Endpoint::from_shared(format!("http://{grpc}")).expect("address");
            if kind == Kind::NeverRead {
                endpoint = endpoint
                    .initial_stream_window_size(Some(65_535))
                    .initial_connection_window_size(Some(65_535));
            }
            let Ok(channel) = endpoint.connect().await else {
                tally.update(kind, |r| r.connect_errors += 1);
                return;
            };
            let (tx, rx) = mpsc::channel(64);
            let _ = tx
                .send(DiscoveryRequest {
                    node: Some(node(i)),
                    ..request(XdsType::Cluster.url(), "", Vec::new())
                })
                .await;
            let mut client =
                AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(usize::MAX);
            let mut responses = match client.stream_aggregated_resources(ReceiverStream::new(rx)).await {
                Ok(r) => r.into_inner(),
                Err(status) => {
                    tally.update(kind, |r| r.opened += 1);
                    tally.closed(kind, format!("{:?}", status.code()), opened);
                    return;
                }
            };
            tally.update(kind, |r| r.opened += 1);
            if kind == Kind::NeverRead {
                stopped(&mut stop).await;
                return;
            }
            let names: Vec<String> = (0..names).map(|k| format!("outbound|80||hostile-{k}.svc")).collect();
            let flood = async {
                let _ = tx.send(request("type.googleapis.com/hostile.Unknown", "", vec!["x".into()])).await;
                if !names.is_empty() {
                    let _ = tx.send(request(XdsType::Endpoint.url(), "", names.clone())).await;
                }
                if kind == Kind::NonceFlood {
                    for k in 0..1_000 {
                        let _ = tx
                            .send(request(
                                XdsType::Cluster.url(),
                                &format!("garbage-{k}-\u{fffd}"),
                                Vec::new(),
                            ))
                            .await;
                    }
                }
                std::future::pending::<()>().await;
            };
            tokio::pin!(flood);
            loop {
                tokio::select! {
                    () = stopped(&mut stop) => return,
                    () = &mut flood => {}
                    m = responses.message() => match m {
                        Ok(Some(r)) if kind == Kind::NameFlood => {
                            let _ = tx.send(name_flood_ack(&r, &names)).await;
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => return tally.closed(kind, "OK".into(), opened),
                        Err(status) => return tally.closed(kind, format!("{:?}", status.code()), opened),
                    },
                }
            }
        }
        Kind::Http1OnGrpc | Kind::GrpcSlowloris | Kind::HttpSlowloris => {
            let target = if kind == Kind::HttpSlowloris { http.expect("http address") } else { grpc };
            let Ok(mut tcp) = TcpStream::connect(target).await else {
                tally.update(kind, |r| r.connect_errors += 1);
                return;
            };
            tally.update(kind, |r| r.opened += 1);
            let first: &[u8] = match kind {
                Kind::Http1OnGrpc => b"GET /debug/syncz HTTP/1.1\r\nHost: istiod\r\n\r\n",
                Kind::GrpcSlowloris => b"PRI * HTTP/2.0\r\n",
                _ => b"GET /debug/syncz HTTP/1.1\r\nHost: istiod\r\n",
            };
            if tcp.write_all(first).await.is_err() {
                return tally.closed(kind, "EOF".into(), opened);
            }
            let mut buf = [0u8; 4096];
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            tick.tick().await;
            loop {
                tokio::select! {
                    () = stopped(&mut stop) => return,
                    n = tcp.read(&mut buf) => match n {
                        Ok(0) | Err(_) => return tally.closed(kind, "EOF".into(), opened),
                        Ok(_) => {}
                    },
                    _ = tick.tick(), if kind == Kind::HttpSlowloris => {
                        if tcp.write_all(b"X-Slow: 1\r\n").await.is_err() {
                            return tally.closed(kind, "EOF".into(), opened);
                        }
                    }
                }
            }
        }
    }
}
