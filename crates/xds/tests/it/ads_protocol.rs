//! Protocol rules checked with a scripted gRPC client (no Envoy): node errors, stale nonces, NACKs
//! that are not answered, push order, delta removals.

use crate::support;

use std::{net::SocketAddr, sync::Arc, time::Duration};

use envoy_types::pb::{
    envoy::{
        config::core::v3::Node,
        service::discovery::v3::{
            DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::rpc::Status as RpcStatus,
};
use meshpilot_testing::{RunningAds, wait_for};
use meshpilot_xds::{
    AdsConfig, AdsServer, SyncState,
    type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE},
};
use support::{Changed, STEP, TestSource, cluster, endpoints, listener, prom_value, prometheus, route_to};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Streaming};

const NODE: &str = "sidecar~10.0.0.1~client-1.test~test.svc.cluster.local";

fn node(id: &str) -> Option<Node> {
    Some(Node { id: id.into(), ..Default::default() })
}

async fn server() -> (Arc<TestSource>, RunningAds<TestSource>) {
    server_with(AdsConfig::default()).await
}

async fn server_with(config: AdsConfig) -> (Arc<TestSource>, RunningAds<TestSource>) {
    prometheus();
    let up: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let source = TestSource::new(vec![
        (CLUSTER, vec![cluster("a"), cluster("b")]),
        (ENDPOINT, vec![endpoints("a", up), endpoints("b", up)]),
        (LISTENER, vec![listener("listener_0", 9, "local_route")]),
        (ROUTE, vec![route_to("local_route", "a")]),
    ]);
    let ads = RunningAds::start(AdsServer::with_config(Arc::clone(&source), config), None).await.unwrap();
    (source, ads)
}

async fn client(addr: SocketAddr) -> AggregatedDiscoveryServiceClient<tonic::transport::Channel> {
    AggregatedDiscoveryServiceClient::connect(format!("http://{addr}")).await.unwrap()
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

struct Sotw {
    tx: mpsc::Sender<DiscoveryRequest>,
    rx: Streaming<DiscoveryResponse>,
}

impl Sotw {
    /// Opens a stream whose first request is `first`.
    async fn open(addr: SocketAddr, first: DiscoveryRequest) -> Result<Sotw, tonic::Status> {
        let (tx, rx) = mpsc::channel(16);
        tx.send(first).await.unwrap();
        let resp = client(addr).await.stream_aggregated_resources(ReceiverStream::new(rx)).await?;
        Ok(Sotw { tx, rx: resp.into_inner() })
    }

    async fn send(&self, r: DiscoveryRequest) {
        self.tx.send(r).await.unwrap();
    }

    async fn recv(&mut self) -> DiscoveryResponse {
        tokio::time::timeout(Duration::from_secs(5), self.rx.message())
            .await
            .expect("a response")
            .unwrap()
            .unwrap()
    }

    async fn silent(&mut self) {
        let r = tokio::time::timeout(Duration::from_millis(300), self.rx.message()).await;
        assert!(r.is_err(), "expected no response, got {r:?}");
    }

    async fn ack(&self, r: &DiscoveryResponse, names: &[&str]) {
        self.send(req(&r.type_url, &r.version_info, &r.nonce, names)).await;
    }
}

#[tokio::test]
async fn malformed_node_ids_get_invalid_argument_with_a_clear_message() {
    let (_source, ads) = server().await;
    let first = DiscoveryRequest { node: node("bad-node"), ..req(CLUSTER, "", "", &[]) };
    let err = Sotw::open(ads.addr, first).await.err().expect("stream refused");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("invalid node id \"bad-node\""), "{}", err.message());
    assert!(err.message().contains("expected 4: TYPE~IP~ID~DOMAIN"), "{}", err.message());

    let first = DiscoveryRequest { node: node("proxy~10.0.0.1~x.y~y.svc"), ..req(CLUSTER, "", "", &[]) };
    let err = Sotw::open(ads.addr, first).await.err().unwrap();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("unknown proxy type \"proxy\""), "{}", err.message());

    let err = Sotw::open(ads.addr, req(CLUSTER, "", "", &[])).await.err().unwrap();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("missing node information"), "{}", err.message());

    // Delta gets the same answer.
    let (tx, rx) = mpsc::channel(1);
    tx.send(DeltaDiscoveryRequest { node: node("a~b~c"), type_url: CLUSTER.into(), ..Default::default() })
        .await
        .unwrap();
    let err = client(ads.addr).await.delta_aggregated_resources(ReceiverStream::new(rx)).await.err().unwrap();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("has 3 '~'-separated part(s)"), "{}", err.message());

    // Nothing was registered, and the server still serves good clients.
    assert!(ads.registry.is_empty());
    let mut ok = Sotw::open(ads.addr, DiscoveryRequest { node: node(NODE), ..req(CLUSTER, "", "", &[]) })
        .await
        .unwrap();
    assert_eq!(ok.recv().await.resources.len(), 2);
}

#[tokio::test]
async fn sotw_stale_nonce_nack_and_push_order() {
    let (source, ads) = server().await;
    let mut c = Sotw::open(ads.addr, DiscoveryRequest { node: node(NODE), ..req(CLUSTER, "", "", &[]) })
        .await
        .unwrap();
    let cds = c.recv().await;
    assert_eq!((cds.type_url.as_str(), cds.version_info.as_str(), cds.resources.len()), (CLUSTER, "1", 2));
    assert!(cds.resources.iter().all(|r| r.type_url == CLUSTER), "Any carries the message type URL");
    // EDS before the CDS ACK, as Envoy does: per-type state.
    c.send(req(ENDPOINT, "", "", &["a"])).await;
    let eds = c.recv().await;
    assert_eq!((eds.type_url.as_str(), eds.resources.len()), (ENDPOINT, 1));
    c.ack(&cds, &[]).await;
    c.ack(&eds, &["a"]).await;
    c.send(req(LISTENER, "", "", &[])).await;
    let lds = c.recv().await;
    c.ack(&lds, &[]).await;
    c.send(req(ROUTE, "", "", &["local_route"])).await;
    let rds = c.recv().await;
    c.ack(&rds, &["local_route"]).await;
    c.silent().await;
    let conn = ads.registry.snapshot().remove(0);
    assert!(conn.id.starts_with("client-1.test-"));
    assert!([CLUSTER, ENDPOINT, LISTENER, ROUTE].iter().all(|t| support::is_acked(&conn, t)));

    // A push that changes nothing for the proxy (same names, same bytes for every type) is not sent.
    let generated = source.calls().iter().filter(|c| c.trigger == "push").count();
    assert_eq!(ads.registry.push_all(Changed::default()), 1);
    c.silent().await;
    assert_eq!(
        source.calls().iter().filter(|c| c.trigger == "push").count(),
        generated + 4,
        "generated, not sent"
    );

    // A stale nonce is ignored and counted.
    let expired = |m: &str| prom_value(m, "pilot_xds_expired_nonce{type=\"cds\"}").unwrap_or(0.0);
    let before = expired(&prometheus().render());
    c.send(req(CLUSTER, "1", "not-the-latest", &[])).await;
    c.silent().await;
    assert!(expired(&prometheus().render()) > before);

    // Adding an EDS name is answered with just that name; a NACK is never answered.
    c.send(req(ENDPOINT, "1", &eds.nonce, &["a", "b"])).await;
    let eds2 = c.recv().await;
    assert_eq!(eds2.resources.len(), 1);
    c.send(DiscoveryRequest {
        error_detail: Some(RpcStatus {
            code: 13,
            message: "endpoint b rejected".into(),
            ..Default::default()
        }),
        ..req(ENDPOINT, "1", &eds2.nonce, &["a", "b"])
    })
    .await;
    c.silent().await;
    let conn = wait_for("the NACK", STEP, async || {
        let conn = ads.registry.snapshot().remove(0);
        (conn.types[ENDPOINT].state == SyncState::Rejected).then_some(conn)
    })
    .await
    .unwrap();
    assert_eq!(conn.types[ENDPOINT].last_error.as_deref(), Some("endpoint b rejected"));
    assert_eq!(conn.types[ENDPOINT].version_acked, "1");

    // A push of everything goes out in CDS, EDS, LDS, RDS order.
    let up: SocketAddr = "127.0.0.1:10".parse().unwrap();
    source.set(CLUSTER, vec![cluster("a"), cluster("b"), cluster("c")]);
    source.set(ENDPOINT, vec![endpoints("a", up), endpoints("b", up)]);
    source.set(LISTENER, vec![listener("listener_0", 10, "local_route")]);
    source.set(ROUTE, vec![route_to("local_route", "b")]);
    assert_eq!(ads.registry.push_all(Changed::default()), 1);
    let mut order = Vec::new();
    for _ in 0..4 {
        let r = c.recv().await;
        order.push(r.type_url.clone());
        if r.type_url == CLUSTER {
            assert_eq!(r.resources.len(), 3, "LDS/CDS are always the full set in SotW");
        }
    }
    assert_eq!(order, [CLUSTER, ENDPOINT, LISTENER, ROUTE]);
    // Unsubscribing a named type (empty names) is not answered and drops its state.
    c.send(req(ROUTE, "2", "whatever", &[])).await;
    c.silent().await;
    wait_for("RDS to be unsubscribed", STEP, async || {
        (!ads.registry.snapshot().remove(0).types.contains_key(ROUTE)).then_some(())
    })
    .await
    .unwrap();
}

struct Delta {
    tx: mpsc::Sender<DeltaDiscoveryRequest>,
    rx: Streaming<DeltaDiscoveryResponse>,
}

impl Delta {
    async fn open(addr: SocketAddr, first: DeltaDiscoveryRequest) -> Delta {
        let (tx, rx) = mpsc::channel(16);
        tx.send(first).await.unwrap();
        let resp = client(addr).await.delta_aggregated_resources(ReceiverStream::new(rx)).await.unwrap();
        Delta { tx, rx: resp.into_inner() }
    }

    async fn recv(&mut self) -> DeltaDiscoveryResponse {
        tokio::time::timeout(Duration::from_secs(5), self.rx.message())
            .await
            .expect("a response")
            .unwrap()
            .unwrap()
    }

    async fn silent(&mut self) {
        let r = tokio::time::timeout(Duration::from_millis(300), self.rx.message()).await;
        assert!(r.is_err(), "expected no response, got {r:?}");
    }

    async fn answer(&self, r: &DeltaDiscoveryResponse, error: Option<&str>) {
        let error_detail = error.map(|m| RpcStatus { code: 13, message: m.into(), ..Default::default() });
        let req = DeltaDiscoveryRequest {
            type_url: r.type_url.clone(),
            response_nonce: r.nonce.clone(),
            error_detail,
            ..Default::default()
        };
        self.tx.send(req).await.unwrap();
    }
}

#[tokio::test]
async fn delta_removals_nack_and_unchanged_resources() {
    let (source, ads) = server().await;
    let first = DeltaDiscoveryRequest { node: node(NODE), type_url: CLUSTER.into(), ..Default::default() };
    let mut c = Delta::open(ads.addr, first).await;
    let r = c.recv().await;
    let names: Vec<&str> = r.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(r.resources.iter().all(|x| !x.version.is_empty()));
    c.answer(&r, None).await;

    // Removing cluster b sends only the removal.
    source.set(CLUSTER, vec![cluster("a")]);
    ads.registry.push_all(Changed::types(&[CLUSTER]));
    let r = c.recv().await;
    assert!(r.resources.is_empty());
    assert_eq!(r.removed_resources, ["b"]);
    c.answer(&r, None).await;

    // A rejected version is not sent again; a new one is.
    source.set(CLUSTER, vec![cluster("a"), cluster("bad")]);
    ads.registry.push_all(Changed::types(&[CLUSTER]));
    let r = c.recv().await;
    assert_eq!(r.resources.len(), 1);
    c.answer(&r, Some("cluster bad rejected")).await;
    ads.registry.push_all(Changed::default());
    c.silent().await;
    let conn = ads.registry.snapshot().remove(0);
    assert_eq!(conn.types[CLUSTER].state, SyncState::Rejected);
    assert_eq!(conn.types[CLUSTER].last_error.as_deref(), Some("cluster bad rejected"));
    source.set(CLUSTER, vec![cluster("a"), cluster("good")]);
    ads.registry.push_all(Changed::types(&[CLUSTER]));
    let r = c.recv().await;
    assert_eq!(r.resources.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["good"]);
    c.answer(&r, None).await;
    wait_for("the ACK", STEP, async || {
        let conn = ads.registry.snapshot().remove(0);
        support::is_acked(&conn, CLUSTER).then_some(())
    })
    .await
    .unwrap();

    // Subscribing to a name that does not exist is answered with its removal.
    c.tx.send(DeltaDiscoveryRequest {
        type_url: ENDPOINT.into(),
        resource_names_subscribe: vec!["a".into(), "nope".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let r = c.recv().await;
    assert_eq!(r.resources.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["a"]);
    assert_eq!(r.removed_resources, ["nope"]);
}

/// `PILOT_PUSH_THROTTLE`: with one permit, a second connection's push waits while the first is being
/// generated, yet that connection still answers its requests; releasing the first lets it through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn push_throttle_bounds_concurrent_pushes_but_not_requests() {
    /// Opens the gate when the test ends, even by a panic (else the blocked push never returns).
    struct Opener(Arc<TestSource>);
    impl Drop for Opener {
        fn drop(&mut self) {
            self.0.open_gate();
        }
    }
    let (source, ads) = server_with(AdsConfig { push_throttle: 1, ..AdsConfig::default() }).await;
    let _opener = Opener(Arc::clone(&source));
    let slow_id = "sidecar~10.0.0.1~slow-1.test~test.svc.cluster.local";
    let mut slow =
        Sotw::open(ads.addr, DiscoveryRequest { node: node(slow_id), ..req(CLUSTER, "", "", &[]) })
            .await
            .unwrap();
    let mut fast = Sotw::open(ads.addr, DiscoveryRequest { node: node(NODE), ..req(CLUSTER, "", "", &[]) })
        .await
        .unwrap();
    for s in [&mut slow, &mut fast] {
        let r = s.recv().await;
        s.ack(&r, &[]).await;
    }
    source.close_gate();
    source.set(CLUSTER, vec![cluster("a")]);
    assert_eq!(ads.registry.push_where(|p| p.node_id == slow_id, Changed::types(&[CLUSTER])), 1);
    let started = || source.calls().iter().any(|c| c.node_id == slow_id && c.trigger == "push-started");
    wait_for("the slow push holds the only permit", STEP, async || started().then_some(())).await.unwrap();
    assert_eq!(ads.registry.push_where(|p| p.node_id == NODE, Changed::types(&[CLUSTER])), 1);
    // The fast connection's push waits for the permit...
    fast.silent().await;
    assert!(!source.calls().iter().any(|c| c.node_id == NODE && c.trigger == "push"));
    // ...but its requests are still answered.
    fast.send(DiscoveryRequest { node: None, ..req(LISTENER, "", "", &[]) }).await;
    let listeners = fast.recv().await;
    assert_eq!(listeners.type_url, LISTENER);
    // Answered, as a proxy does (flow control holds a push while a response is unanswered).
    fast.ack(&listeners, &[]).await;
    source.open_gate();
    let r = slow.recv().await;
    assert_eq!((r.type_url.as_str(), r.resources.len()), (CLUSTER, 1));
    let r = fast.recv().await;
    assert_eq!((r.type_url.as_str(), r.resources.len()), (CLUSTER, 1));
}
