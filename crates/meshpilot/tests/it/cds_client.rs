//! A scripted SotW ADS client subscribed to CDS as a sidecar (Istio 1.28.0), as Envoy would be:
//! `mesh_source.rs` ACKs with it, `proxy_status_cli.rs` and `control_plane_dashboard.rs` NACK.

use std::{net::SocketAddr, time::Duration};

use envoy_types::pb::{
    envoy::{
        config::core::v3::Node,
        service::discovery::v3::{
            DiscoveryRequest, DiscoveryResponse,
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::{
        protobuf::{Struct, Value as PbValue, value::Kind},
        rpc::Status,
    },
};
use futures::StreamExt;
use meshpilot_testing::wait::wait_for;

/// Envoy's cluster type URL.
pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/// The client: its request sender and response stream (the stream stays open while it lives).
pub struct CdsClient {
    /// Requests to the server.
    pub tx: tokio::sync::mpsc::UnboundedSender<DiscoveryRequest>,
    /// Responses from the server.
    pub responses: tonic::Streaming<DiscoveryResponse>,
}

impl CdsClient {
    /// Connects to `grpc` as the sidecar `name` in `namespace` (node id
    /// `sidecar~127.0.0.1~NAME.NAMESPACE~NAMESPACE.svc.cluster.local`, cluster `Kubernetes`) once the
    /// port answers (90 s at most: a limit, not a timing assertion), and returns the client with its
    /// first response.
    ///
    /// # Panics
    /// When no CDS response comes; the message carries `log()`.
    pub async fn connect(
        grpc: SocketAddr,
        name: &str,
        namespace: &str,
        log: &dyn Fn() -> String,
    ) -> (CdsClient, DiscoveryResponse) {
        let text = |v: &str| PbValue { kind: Some(Kind::StringValue(v.to_owned())) };
        let metadata = Struct {
            fields: [
                ("NAMESPACE", text(namespace)),
                ("ISTIO_VERSION", text("1.28.0")),
                ("CLUSTER_ID", text("Kubernetes")),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        };
        let node = Node {
            id: format!("sidecar~127.0.0.1~{name}.{namespace}~{namespace}.svc.cluster.local"),
            metadata: Some(metadata),
            ..Default::default()
        };
        // The ADS port refuses streams until the plane is ready: open one until it answers.
        wait_for("a CDS response", Duration::from_secs(90), async || {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<DiscoveryRequest>();
            tx.send(DiscoveryRequest {
                node: Some(node.clone()),
                type_url: CDS.into(),
                ..Default::default()
            })
            .ok()?;
            let mut client =
                AggregatedDiscoveryServiceClient::connect(format!("http://{grpc}")).await.ok()?;
            let requests = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
            let mut responses = client.stream_aggregated_resources(requests).await.ok()?.into_inner();
            let first = responses.next().await?.ok()?;
            Some((CdsClient { tx, responses }, first))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", log()))
    }

    /// ACKs `response`.
    pub fn ack(&self, response: &DiscoveryResponse) {
        let _ = self.tx.send(DiscoveryRequest {
            type_url: CDS.into(),
            version_info: response.version_info.clone(),
            response_nonce: response.nonce.clone(),
            ..Default::default()
        });
    }

    /// NACKs `response` with `message` (gRPC code 3, INVALID_ARGUMENT, as Envoy).
    pub fn nack(&self, response: &DiscoveryResponse, message: &str) {
        let _ = self.tx.send(DiscoveryRequest {
            type_url: CDS.into(),
            response_nonce: response.nonce.clone(),
            error_detail: Some(Status { code: 3, message: message.into(), details: vec![] }),
            ..Default::default()
        });
    }
}
