//! Admission control and hostile ADS clients (issue 20; docs/RELIABILITY.md): each hostile behaviour
//! gets a clear status, and a well-behaved proxy on the same server keeps receiving pushes.

mod support;

use std::{net::SocketAddr, sync::Arc, time::Duration};

use envoy_types::pb::envoy::{
    config::core::v3::Node,
    service::discovery::v3::{
        DiscoveryRequest, DiscoveryResponse,
        aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
    },
};
use meshpilot_testing::{RunningAds, wait_for};
use meshpilot_xds::{
    AdsConfig, AdsServer, RequestLimiter,
    type_url::{CLUSTER, ENDPOINT},
};
use support::{Changed, STEP, TestSource, cluster, endpoints, prom_value, prometheus};
use tokio::sync::mpsc;
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

/// A client that stops reading: once its queue (`response_buffer`) is full and a response waits
/// longer than the send timeout, the server closes the stream (`DEADLINE_EXCEEDED`, logged, counted in
/// `pilot_xds_write_timeout`) and drops what was queued for it. With a push throttle of one, the stuck
/// stream held the only push slot: a well-behaved proxy's later push arrives only because it is
/// released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_closed_and_other_proxies_still_get_their_pushes() {
    let config = AdsConfig {
        push_throttle: 1,
        response_buffer: 1,
        send_timeout: Duration::from_millis(300),
        ..AdsConfig::default()
    };
    let (source, ads) = server_with(config).await;
    let before = counter("pilot_xds_write_timeout");
    // The stuck client: HTTP/2 windows of 64 KiB (hyper's client default is 2 MiB), and it never
    // reads its stream.
    let channel = Endpoint::from_shared(format!("http://{}", ads.addr))
        .unwrap()
        .initial_stream_window_size(Some(65_535))
        .initial_connection_window_size(Some(65_535))
        .connect()
        .await
        .unwrap();
    let mut stuck = Sotw::open_on(channel, DiscoveryRequest { node: node(1), ..req(CLUSTER, "", "", &[]) })
        .await
        .unwrap();
    let mut good =
        Sotw::open(ads.addr, DiscoveryRequest { node: node(2), ..req(CLUSTER, "", "", &[]) }).await.unwrap();
    let r = good.recv().await;
    good.ack(&r, &[]).await;
    // Pushes of ≈ 150 KB each: more than the stuck client's window, then its queue, then the wait.
    let mut last_version = String::new();
    for round in 0..4 {
        let clusters = (0..2_000).map(|i| cluster(&format!("cluster-{round}-{i:05}"))).collect();
        last_version = source.set(CLUSTER, clusters);
        ads.registry.push_where(|_| true, Changed::types(&[CLUSTER]));
        let r = good.recv().await;
        assert_eq!(r.version_info, last_version, "the good proxy gets every push");
        good.ack(&r, &[]).await;
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
