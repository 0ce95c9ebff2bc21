//! Admission control and hostile ADS clients (issue 20; docs/RELIABILITY.md): each hostile behaviour
//! gets a clear status, and a well-behaved proxy on the same server keeps receiving pushes.

use crate::support;

use std::{net::SocketAddr, sync::Arc, time::Duration};

use envoy_types::pb::envoy::{
    config::core::v3::Node,
    service::discovery::v3::{
        DeltaDiscoveryRequest, DiscoveryRequest, DiscoveryResponse,
        aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
    },
};
use meshpilot_testing::{RunningAds, wait_for};
use meshpilot_xds::{
    AdsConfig, AdsServer, RequestLimiter, StreamLimits,
    type_url::{CLUSTER, ENDPOINT},
};
use support::{Changed, STEP, TestSource, cluster, endpoints, prom_value, prometheus};
use tokio::sync::mpsc;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Streaming, transport::Endpoint};

fn node(i: usize) -> Option<Node> {
    Some(Node {
        id: format!("sidecar~10.0.0.{i}~client-{i}.test~test.svc.cluster.local"),
        ..Default::default()
    })
}

fn req(type_url: &str, version: &str, nonce: &str, names: &[&str]) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.into(),
        version_info: version.into(),
        response_nonce: nonce.into(),
        resource_names: names.iter().map(|n| (*n).to_owned()).collect(),
        ..Default::default()
    }
}

async fn server_with(config: AdsConfig) -> (Arc<TestSource>, RunningAds<TestSource>) {
    prometheus();
    let up: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let source = TestSource::new(vec![(CLUSTER, vec![cluster("a")]), (ENDPOINT, vec![endpoints("a", up)])]);
    let ads = RunningAds::start(AdsServer::with_config(Arc::clone(&source), config), None).await.unwrap();
    (source, ads)
}

struct Sotw {
    tx: mpsc::Sender<DiscoveryRequest>,
    rx: Streaming<DiscoveryResponse>,
}

impl Sotw {
    /// Opens a stream (its own HTTP/2 connection, default windows) whose first request is `first`.
    async fn open(addr: SocketAddr, first: DiscoveryRequest) -> Result<Sotw, tonic::Status> {
        let channel = Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
        Self::open_on(channel, first).await
    }

    async fn open_on(
        channel: tonic::transport::Channel,
        first: DiscoveryRequest,
    ) -> Result<Sotw, tonic::Status> {
        let (tx, rx) = mpsc::channel(64);
        tx.send(first).await.unwrap();
        let mut client = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(usize::MAX);
        let resp = client.stream_aggregated_resources(ReceiverStream::new(rx)).await?;
        Ok(Sotw { tx, rx: resp.into_inner() })
    }

    async fn recv(&mut self) -> DiscoveryResponse {
        tokio::time::timeout(STEP, self.rx.message()).await.expect("a response").unwrap().unwrap()
    }

    /// The status the stream ends with (responses before it are skipped).
    async fn end_status(&mut self) -> tonic::Status {
        loop {
            match tokio::time::timeout(STEP, self.rx.message()).await.expect("the stream to end") {
                Ok(Some(_)) => {}
                Ok(None) => return tonic::Status::ok(""),
                Err(status) => return status,
            }
        }
    }

    async fn ack(&self, r: &DiscoveryResponse, names: &[&str]) {
        self.tx.send(req(&r.type_url, &r.version_info, &r.nonce, names)).await.unwrap();
    }
}

/// A client that asks for clusters and never reads its stream, with HTTP/2 windows of 64 KiB (hyper's
/// client default is 2 MiB), so the server's sends back up soon.
async fn stuck_client(addr: SocketAddr) -> Sotw {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .initial_stream_window_size(Some(65_535))
        .initial_connection_window_size(Some(65_535))
        .connect()
        .await
        .unwrap();
    Sotw::open_on(channel, DiscoveryRequest { node: node(1), ..req(CLUSTER, "", "", &[]) }).await.unwrap()
}

/// A well-behaved SotW stream that got and ACKed its clusters.
async fn good_stream(addr: SocketAddr, i: usize) -> Sotw {
    let mut good =
        Sotw::open(addr, DiscoveryRequest { node: node(i), ..req(CLUSTER, "", "", &[]) }).await.unwrap();
    let r = good.recv().await;
    good.ack(&r, &[]).await;
    good
}

/// Pushes new clusters to every connection and checks that `good` receives them.
async fn push_reaches(source: &TestSource, ads: &RunningAds<TestSource>, good: &mut Sotw, name: &str) {
    let version = source.set(CLUSTER, vec![cluster(name)]);
    ads.registry.push_where(|_| true, Changed::types(&[CLUSTER]));
    let r = good.recv().await;
    assert_eq!(r.version_info, version, "the well-behaved proxy gets the push");
    good.ack(&r, &[]).await;
}

/// Pushes 2,000 new clusters (≈ 150 KB: more than a stuck client's window) to every connection and
/// checks that `good` receives them; returns the version.
async fn big_push_reaches(
    source: &TestSource,
    ads: &RunningAds<TestSource>,
    good: &mut Sotw,
    round: usize,
) -> String {
    let clusters = (0..2_000).map(|i| cluster(&format!("cluster-{round}-{i:05}"))).collect();
    let version = source.set(CLUSTER, clusters);
    ads.registry.push_where(|_| true, Changed::types(&[CLUSTER]));
    let r = good.recv().await;
    assert_eq!(r.version_info, version, "push {round} reaches the good proxy");
    good.ack(&r, &[]).await;
    version
}

/// Writes `bytes` on a new TCP connection to `addr` and reads until the server closes it; returns
/// what the server sent.
async fn raw_until_closed(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(STEP, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the server closes the connection");
    answer
}

/// The HTTP/2 client connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn counter(name: &str) -> f64 {
    prom_value(&prometheus().render(), name).unwrap_or(0.0)
}

/// `PILOT_MAX_REQUESTS_PER_SECOND`: a stream whose turn is more than 1 s away is refused at once with
/// `RESOURCE_EXHAUSTED` and Istio's message; retrying (as Envoy does, with backoff) gets it admitted.
#[tokio::test]
async fn streams_over_the_request_rate_get_resource_exhausted_and_a_retry_is_admitted() {
    // 0.5 streams/s, burst 1: the first is admitted, the second's turn is 2 s away.
    let limiter = Arc::new(RequestLimiter::new(0.5));
    let (_source, ads) = server_with(AdsConfig { request_limiter: limiter, ..AdsConfig::default() }).await;
    let before = counter("meshpilot_xds_rate_limited");
    let first = DiscoveryRequest { node: node(1), ..req(CLUSTER, "", "", &[]) };
    let mut admitted = Sotw::open(ads.addr, first.clone()).await.expect("the first stream is admitted");
    assert_eq!(admitted.recv().await.type_url, CLUSTER);

    let err = Sotw::open(ads.addr, DiscoveryRequest { node: node(2), ..first.clone() }).await.err().unwrap();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().starts_with("request rate limit exceeded: "), "{}", err.message());
    assert!(counter("meshpilot_xds_rate_limited") > before);
    assert_eq!(ads.registry.snapshot().len(), 1, "the refused stream was never registered");

    // Retry with a backoff until admitted (a turn ≤ 1 s away waits for it instead of failing).
    let mut retried = wait_for("a retried stream to be admitted", STEP, async || {
        match Sotw::open(ads.addr, DiscoveryRequest { node: node(2), ..first.clone() }).await {
            Ok(s) => Some(s),
            Err(e) => {
                assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                None
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(retried.recv().await.type_url, CLUSTER);
    assert_eq!(ads.registry.snapshot().len(), 2);
}

/// `MESHPILOT_XDS_MAX_CONNECTIONS`: a connection over the port's limit is closed at accept (counted
/// in `meshpilot_xds_connections_refused`) while the admitted proxy keeps its stream; when that one
/// ends, its slot is free for the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_ports_limit_are_closed_and_a_freed_slot_is_reused() {
    let limits = meshpilot_xds::http2::ConnectionLimits { max_total: 1, max_per_peer: 0 };
    let (_source, ads) = server_with(AdsConfig { connection_limits: limits, ..AdsConfig::default() }).await;
    let refused = || counter(r#"meshpilot_xds_connections_refused{reason="total"}"#);
    let before = refused();
    let first = DiscoveryRequest { node: node(1), ..req(CLUSTER, "", "", &[]) };
    let mut admitted = Sotw::open(ads.addr, first.clone()).await.expect("the first connection is admitted");
    assert_eq!(admitted.recv().await.type_url, CLUSTER);

    let mut over = TcpStream::connect(ads.addr).await.unwrap();
    over.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(STEP, over.read_to_end(&mut rest)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "closed at accept, nothing sent: {closed:?} {rest:?}");
    assert!(refused() > before);
    assert_eq!(ads.registry.snapshot().len(), 1);

    drop(admitted);
    let next = wait_for("the freed slot to be reused", STEP, async || {
        let attempt = tokio::time::timeout(Duration::from_secs(1), async {
            let mut s =
                Sotw::open(ads.addr, DiscoveryRequest { node: node(2), ..first.clone() }).await.ok()?;
            tokio::time::timeout(Duration::from_millis(500), s.rx.message()).await.ok()?.ok()?.map(|r| (s, r))
        });
        attempt.await.ok().flatten()
    })
    .await
    .unwrap();
    assert_eq!(next.1.type_url, CLUSTER);
    next.0.tx.send(req(CLUSTER, &next.1.version_info, &next.1.nonce, &[])).await.unwrap();
}

/// A client that stops reading: once its queue (`response_buffer`) is full and a response waits
/// longer than the send timeout, the server closes the stream (`DEADLINE_EXCEEDED`, logged, counted in
/// `pilot_xds_write_timeout`) and drops what was queued for it. With a push throttle of one, the stuck
/// stream held the only push slot: a well-behaved proxy's later push arrives only because it is
/// released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_closed_and_other_proxies_still_get_their_pushes() {
    // Without flow control, which would hold the pushes of a client that answers nothing (tested below).
    let config = AdsConfig {
        push_throttle: 1,
        response_buffer: 1,
        send_timeout: Duration::from_millis(300),
        flow_control: false,
        ..AdsConfig::default()
    };
    let (source, ads) = server_with(config).await;
    let before = counter("pilot_xds_write_timeout");
    let mut stuck = stuck_client(ads.addr).await;
    let mut good =
        Sotw::open(ads.addr, DiscoveryRequest { node: node(2), ..req(CLUSTER, "", "", &[]) }).await.unwrap();
    let r = good.recv().await;
    good.ack(&r, &[]).await;
    // Pushes of ≈ 150 KB each: more than the stuck client's window, then its queue, then the wait.
    let mut last_version = String::new();
    for round in 0..4 {
        last_version = big_push_reaches(&source, &ads, &mut good, round).await;
    }
    wait_for("the stuck stream to be closed", STEP, async || {
        (ads.registry.snapshot().len() == 1).then_some(())
    })
    .await
    .unwrap();
    assert!(counter("pilot_xds_write_timeout") > before);
    // One more push reaches the good proxy at once.
    let version = source.set(CLUSTER, vec![cluster("after")]);
    assert_ne!(version, last_version);
    ads.registry.push_where(|_| true, Changed::types(&[CLUSTER]));
    assert_eq!(good.recv().await.version_info, version);
    // The stuck client, reading at last, finds what HTTP/2 had buffered, then the reason.
    let status = stuck.end_status().await;
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("PILOT_XDS_SEND_TIMEOUT"), "{}", status.message());
}

/// A request above the gRPC max receive size (`ISTIO_GPRC_MAXRECVMSGSIZE`, 4 MiB) ends the stream with
/// `RESOURCE_EXHAUSTED`, as gRPC's own servers answer; the first request or a later one.
#[tokio::test]
async fn a_request_over_the_max_message_size_gets_resource_exhausted() {
    let (_source, ads) =
        server_with(AdsConfig { max_decoding_message_size: 64 * 1024, ..AdsConfig::default() }).await;
    let huge: Vec<String> = (0..10_000).map(|i| format!("name-{i:010}")).collect();
    let names: Vec<&str> = huge.iter().map(String::as_str).collect();
    let err = Sotw::open(ads.addr, DiscoveryRequest { node: node(1), ..req(CLUSTER, "", "", &names) })
        .await
        .err()
        .expect("refused");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("larger than max"), "{}", err.message());

    let mut s =
        Sotw::open(ads.addr, DiscoveryRequest { node: node(2), ..req(CLUSTER, "", "", &[]) }).await.unwrap();
    let r = s.recv().await;
    s.tx.send(req(ENDPOINT, "", "", &names)).await.unwrap();
    let _ = r;
    let status = s.end_status().await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    wait_for("the stream to be gone", STEP, async || ads.registry.snapshot().is_empty().then_some(()))
        .await
        .unwrap();
}

/// A client whose response queue is full (it stopped reading) does not keep its push-throttle slot
/// while its send waits: with a throttle of one and no send timeout, a well-behaved proxy still gets
/// every push while the stuck stream stays connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_waiting_on_a_full_queue_releases_its_push_slot() {
    let config = AdsConfig {
        push_throttle: 1,
        response_buffer: 1,
        send_timeout: Duration::ZERO,
        flow_control: false,
        ..AdsConfig::default()
    };
    let (source, ads) = server_with(config).await;
    let _stuck = stuck_client(ads.addr).await;
    let mut good = good_stream(ads.addr, 2).await;
    for round in 0..6 {
        big_push_reaches(&source, &ads, &mut good, round).await;
    }
    assert_eq!(ads.registry.snapshot().len(), 2, "the stuck stream is still connected (no send timeout)");
}

/// Flow control (`PILOT_ENABLE_FLOW_CONTROL`, on by default): a client that has not answered its last
/// response gets no push until it does; the pushes meanwhile merge, so its answer brings the latest
/// config at once, not the first of the pushes it missed. A NACK counts as an answer too. A proxy
/// that answers gets every push.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_has_not_answered_gets_the_latest_push_when_it_does() {
    let (source, ads) = server_with(AdsConfig { push_throttle: 1, ..AdsConfig::default() }).await;
    let held_before = counter("meshpilot_xds_pushes_held");
    let mut silent =
        Sotw::open(ads.addr, DiscoveryRequest { node: node(1), ..req(CLUSTER, "", "", &[]) }).await.unwrap();
    let first = silent.recv().await;
    let mut good = good_stream(ads.addr, 2).await;
    let mut versions = Vec::new();
    for round in 0..3 {
        let version = source.set(CLUSTER, vec![cluster(&format!("round-{round}"))]);
        ads.registry.push_where(|_| true, Changed::types(&[CLUSTER]));
        let r = good.recv().await;
        assert_eq!(r.version_info, version, "push {round} reaches the proxy that answers");
        good.ack(&r, &[]).await;
        versions.push(version);
    }
    assert!(counter("meshpilot_xds_pushes_held") > held_before, "the silent client's push was held");
    silent.ack(&first, &[]).await;
    let next = silent.recv().await;
    assert_eq!(next.version_info, versions[2], "the answer brings the latest push, not {:?}", versions[0]);

    // Unanswered again: the next push waits for this NACK, then goes.
    let version = source.set(CLUSTER, vec![cluster("after-nack")]);
    ads.registry.push_where(|_| true, Changed::types(&[CLUSTER]));
    let r = good.recv().await;
    assert_eq!(r.version_info, version);
    good.ack(&r, &[]).await;
    silent
        .tx
        .send(DiscoveryRequest {
            error_detail: Some(Default::default()),
            ..req(CLUSTER, &first.version_info, &next.nonce, &[])
        })
        .await
        .unwrap();
    assert_eq!(silent.recv().await.version_info, version, "a NACK is an answer");
}

/// A client that never reads costs one response with flow control: its pushes are held (it cannot
/// answer), so nothing queues up for it and the send timeout has nothing to wait on; other proxies
/// get every push while it stays connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_holds_no_queued_pushes_with_flow_control() {
    let config = AdsConfig { push_throttle: 1, response_buffer: 1, ..AdsConfig::default() };
    let (source, ads) = server_with(config).await;
    let held_before = counter("meshpilot_xds_pushes_held");
    let writes_before = counter("pilot_xds_write_timeout");
    let _stuck = stuck_client(ads.addr).await;
    let mut good = good_stream(ads.addr, 2).await;
    for round in 0..4 {
        big_push_reaches(&source, &ads, &mut good, round).await;
    }
    wait_for("the stuck stream's push to be held", STEP, async || {
        (counter("meshpilot_xds_pushes_held") > held_before).then_some(())
    })
    .await
    .unwrap();
    let stuck = ads
        .registry
        .snapshot()
        .into_iter()
        .find(|c| c.proxy.node_id.contains("10.0.0.1~"))
        .expect("the stuck client is still connected");
    let cds = stuck.types.get(CLUSTER).expect("CDS state");
    assert_eq!(cds.responses, 1, "only the first response went to the stuck client");
    assert_eq!(counter("pilot_xds_write_timeout"), writes_before);
}

/// 100,000 resource names in one request (under the 4 MiB message size) are over the per-stream
/// limit (`MESHPILOT_XDS_MAX_RESOURCE_NAMES`, 50,000): the stream ends with `RESOURCE_EXHAUSTED`
/// naming the limit; a Delta subscription that grows past it over several requests too; other proxies
/// keep getting their pushes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_resource_names_get_resource_exhausted() {
    let (source, ads) = server_with(AdsConfig::default()).await;
    let before = counter("meshpilot_xds_limit_refusals{limit=\"names\"}");
    let mut good = good_stream(ads.addr, 1).await;
    let names: Vec<String> = (0..100_000).map(|i| format!("n{i:06}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();

    let mut hostile = good_stream(ads.addr, 2).await;
    hostile.tx.send(req(ENDPOINT, "", "", &refs)).await.unwrap();
    let status = hostile.end_status().await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("100000 for"), "{}", status.message());
    assert!(status.message().contains("MESHPILOT_XDS_MAX_RESOURCE_NAMES"), "{}", status.message());

    // Delta: 30,000 names, then 30,000 more.
    let channel = Endpoint::from_shared(format!("http://{}", ads.addr)).unwrap().connect().await.unwrap();
    let (tx, rx) = mpsc::channel(4);
    let delta = |from: usize| DeltaDiscoveryRequest {
        node: node(3),
        type_url: ENDPOINT.into(),
        resource_names_subscribe: names[from..from + 30_000].to_vec(),
        ..Default::default()
    };
    tx.send(delta(0)).await.unwrap();
    let mut client = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(usize::MAX);
    let mut responses =
        client.delta_aggregated_resources(ReceiverStream::new(rx)).await.unwrap().into_inner();
    let first = tokio::time::timeout(STEP, responses.message()).await.unwrap().unwrap().unwrap();
    assert_eq!(first.type_url, ENDPOINT, "30,000 names are within the limit");
    tx.send(DeltaDiscoveryRequest { node: None, ..delta(30_000) }).await.unwrap();
    let status = loop {
        match tokio::time::timeout(STEP, responses.message()).await.expect("the stream to end") {
            Ok(Some(_)) => {}
            Ok(None) => panic!("ended with OK"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("60000 for"), "{}", status.message());

    wait_for("the refused streams to be gone", STEP, async || {
        (ads.registry.snapshot().len() == 1).then_some(())
    })
    .await
    .unwrap();
    assert!(counter("meshpilot_xds_limit_refusals{limit=\"names\"}") >= before + 2.0);
    push_reaches(&source, &ads, &mut good, "after-names").await;
}

/// Unknown type URLs are answered as istiod answers them (an empty response: its API generator "does
/// not know about some resource"), up to the per-stream type limit
/// (`MESHPILOT_XDS_MAX_TYPES_PER_STREAM`, 3 here); the type after it ends the stream with
/// `RESOURCE_EXHAUSTED`.
#[tokio::test]
async fn unknown_type_urls_are_answered_empty_up_to_the_type_limit() {
    let limits = StreamLimits { max_types: 3, ..StreamLimits::default() };
    let (source, ads) = server_with(AdsConfig { limits, ..AdsConfig::default() }).await;
    let mut good = good_stream(ads.addr, 1).await;
    let mut s = good_stream(ads.addr, 2).await;
    for k in 0..2 {
        let unknown = format!("type.googleapis.com/hostile.Unknown{k}");
        s.tx.send(req(&unknown, "", "", &["x"])).await.unwrap();
        let r = s.recv().await;
        assert_eq!(r.type_url, unknown);
        assert!(r.resources.is_empty(), "nothing of an unknown type");
        s.ack(&r, &["x"]).await;
    }
    s.tx.send(req("type.googleapis.com/hostile.Unknown2", "", "", &["x"])).await.unwrap();
    let status = s.end_status().await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("MESHPILOT_XDS_MAX_TYPES_PER_STREAM"), "{}", status.message());
    assert!(status.message().contains("hostile.Unknown2"), "{}", status.message());
    push_reaches(&source, &ads, &mut good, "after-types").await;
}

/// Garbage nonces (unknown, non-ASCII, 64 KiB long, for a type the stream never asked for) are stale
/// nonces: ignored and counted; the stream's real ACK that follows them is recorded and it keeps
/// getting pushes.
#[tokio::test]
async fn garbage_nonces_are_ignored_and_the_stream_keeps_working() {
    let (source, ads) = server_with(AdsConfig::default()).await;
    let series = "pilot_xds_expired_nonce{type=\"cds\"}";
    let before = counter(series);
    let mut s =
        Sotw::open(ads.addr, DiscoveryRequest { node: node(1), ..req(CLUSTER, "", "", &[]) }).await.unwrap();
    let r = s.recv().await;
    let long = "z".repeat(64 * 1024);
    for k in 0..1_000 {
        let nonce = match k % 3 {
            0 => format!("garbage-{k}"),
            1 => format!("\u{fffd}\u{1f4a9}-{k}"),
            _ => long.clone(),
        };
        s.tx.send(req(CLUSTER, "v-garbage", &nonce, &[])).await.unwrap();
    }
    s.ack(&r, &[]).await;
    let id = ads.registry.snapshot()[0].id.clone();
    wait_for("the real ACK after the garbage", STEP, async || {
        let c = ads.registry.connection(&id)?;
        (c.types.get(CLUSTER)?.nonce_acked == r.nonce).then_some(())
    })
    .await
    .unwrap();
    assert!(counter(series) >= before + 1_000.0, "each garbage nonce counted as expired");
    push_reaches(&source, &ads, &mut s, "after-garbage").await;
}

/// One stream flooding requests (20,000 repeated ACKs, as fast as HTTP/2 lets it) does not hold up
/// another proxy's push, and is itself still served afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_flood_on_one_stream_does_not_hold_up_other_proxies() {
    let (source, ads) = server_with(AdsConfig::default()).await;
    let mut good = good_stream(ads.addr, 1).await;
    let mut flood =
        Sotw::open(ads.addr, DiscoveryRequest { node: node(2), ..req(CLUSTER, "", "", &[]) }).await.unwrap();
    let r = flood.recv().await;
    let tx = flood.tx.clone();
    let ack = req(CLUSTER, &r.version_info, &r.nonce, &[]);
    let flooding = tokio::spawn(async move {
        for _ in 0..20_000 {
            if tx.send(ack.clone()).await.is_err() {
                return false;
            }
        }
        true
    });
    push_reaches(&source, &ads, &mut good, "during-flood").await;
    assert!(flooding.await.unwrap(), "the flood was read to its end");
    // The flooding stream's own push, after every flooded request.
    let version = source.set(CLUSTER, vec![cluster("after-flood")]);
    ads.registry.push_where(|_| true, Changed::types(&[CLUSTER]));
    let pushed = loop {
        let m = flood.recv().await;
        if m.version_info == version {
            break m;
        }
        // The push made during the flood is answered, as a proxy does (flow control).
        flood.ack(&m, &[]).await;
    };
    assert_eq!(pushed.resources.len(), 1);
    assert_eq!(good.recv().await.version_info, version);
}

/// Plaintext HTTP/1 on the gRPC port: the HTTP/2 server refuses the bad preface and closes the
/// connection (as grpc-go does: "bogus greeting"), never answering it as HTTP/1.
#[tokio::test]
async fn plaintext_http1_on_the_grpc_port_is_closed() {
    let (source, ads) = server_with(AdsConfig::default()).await;
    let mut good = good_stream(ads.addr, 1).await;
    let answer = raw_until_closed(ads.addr, b"GET /debug/syncz HTTP/1.1\r\nHost: istiod\r\n\r\n").await;
    assert!(!answer.starts_with(b"HTTP/1.1 2"), "{}", String::from_utf8_lossy(&answer));
    let answer = raw_until_closed(ads.addr, b"POST /envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources HTTP/1.1\r\nHost: istiod\r\nContent-Type: application/grpc\r\nContent-Length: 0\r\n\r\n").await;
    assert!(!answer.starts_with(b"HTTP/1.1 2"), "{}", String::from_utf8_lossy(&answer));
    push_reaches(&source, &ads, &mut good, "after-http1").await;
}

/// Connections that do not finish starting within the handshake timeout
/// (`MESHPILOT_XDS_HANDSHAKE_TIMEOUT`, 300 ms here) are closed: half an HTTP/2 preface, a whole
/// preface and settings but no request, and a stream with no first request (`DEADLINE_EXCEEDED`). A
/// connection that started in time is not affected: it still gets its push afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_do_not_start_within_the_handshake_timeout_are_closed() {
    let config = AdsConfig { handshake_timeout: Duration::from_millis(300), ..AdsConfig::default() };
    let (source, ads) = server_with(config).await;
    let before = counter("meshpilot_xds_handshake_timeouts");
    let mut good = good_stream(ads.addr, 1).await;

    raw_until_closed(ads.addr, &PREFACE[..16]).await;
    let mut settings_only = PREFACE.to_vec();
    settings_only.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]); // an empty SETTINGS frame
    raw_until_closed(ads.addr, &settings_only).await;

    let channel = Endpoint::from_shared(format!("http://{}", ads.addr)).unwrap().connect().await.unwrap();
    let (_tx, rx) = mpsc::channel::<DiscoveryRequest>(1);
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let Err(status) = client.stream_aggregated_resources(ReceiverStream::new(rx)).await else {
        panic!("a stream without a first request is refused")
    };
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("no first request"), "{}", status.message());

    assert!(counter("meshpilot_xds_handshake_timeouts") >= before + 3.0);
    push_reaches(&source, &ads, &mut good, "after-handshakes").await;
}
