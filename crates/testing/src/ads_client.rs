//! [`AckingClient`]: a proxy on a real ADS stream (tonic, plaintext), for tests that need connected
//! proxies without an Envoy: it subscribes to the types given and ACKs every response with the same
//! names until the server ends the stream.

use std::{collections::HashMap, net::SocketAddr};

use envoy_types::pb::{
    envoy::{
        config::core::v3::Node,
        service::discovery::v3::{
            DiscoveryRequest, aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::protobuf::{Struct, Value, value::Kind},
};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;

use crate::HarnessError;

/// A connected proxy; the stream stays open while the server keeps it (dropping this does not close
/// it: the ACK task owns it).
#[derive(Debug)]
pub struct AckingClient {
    /// Fires when the server ended the stream.
    pub ended: oneshot::Receiver<()>,
}

/// The node of a sidecar `sidecar~IP~NAME.NS~NS.svc.cluster.local` with Istio's usual metadata
/// (`NAMESPACE`, `INSTANCE_IPS`, `ISTIO_VERSION` 1.28.0, `CLUSTER_ID` Kubernetes, `INTERCEPTION_MODE`
/// NONE, `LABELS {app: NAME}`) and the string metadata `extra`.
pub fn sidecar_node(name: &str, namespace: &str, ip: &str, extra: &[(&str, &str)]) -> Node {
    let s = |v: &str| Value { kind: Some(Kind::StringValue(v.into())) };
    let mut fields: HashMap<String, Value> = [
        ("NAMESPACE", namespace),
        ("INSTANCE_IPS", ip),
        ("ISTIO_VERSION", "1.28.0"),
        ("CLUSTER_ID", "Kubernetes"),
        ("INTERCEPTION_MODE", "NONE"),
    ]
    .into_iter()
    .chain(extra.iter().copied())
    .map(|(k, v)| (k.to_string(), s(v)))
    .collect();
    let labels = Struct { fields: [("app".to_string(), s(name))].into() };
    fields.insert("LABELS".into(), Value { kind: Some(Kind::StructValue(labels)) });
    Node {
        id: format!("sidecar~{ip}~{name}.{namespace}~{namespace}.svc.cluster.local"),
        cluster: format!("{name}.{namespace}"),
        metadata: Some(Struct { fields }),
        ..Default::default()
    }
}

impl AckingClient {
    /// Opens a stream to `ads` as `node`, subscribed to each `(type URL, names)` (no names: wildcard).
    ///
    /// # Errors
    /// [`HarnessError::Plane`] when the connection or the stream is refused.
    pub async fn connect(
        ads: SocketAddr,
        node: Node,
        subscriptions: Vec<(&str, Vec<String>)>,
    ) -> Result<AckingClient, HarnessError> {
        let fail = |e: &dyn std::fmt::Display| HarnessError::Plane(format!("ADS stream to {ads}: {e}"));
        let (tx, rx) = mpsc::channel(64);
        let names: HashMap<String, Vec<String>> =
            subscriptions.iter().map(|(t, n)| (t.to_string(), n.clone())).collect();
        for (i, (type_url, resource_names)) in subscriptions.into_iter().enumerate() {
            let node = (i == 0).then(|| node.clone());
            let request =
                DiscoveryRequest { node, type_url: type_url.into(), resource_names, ..Default::default() };
            tx.send(request).await.map_err(|e| fail(&e))?;
        }
        let mut client =
            AggregatedDiscoveryServiceClient::connect(format!("http://{ads}")).await.map_err(|e| fail(&e))?;
        let mut stream = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await
            .map_err(|e| fail(&e))?
            .into_inner();
        let (done, ended) = oneshot::channel();
        tokio::spawn(async move {
            while let Ok(Some(r)) = stream.message().await {
                let ack = DiscoveryRequest {
                    type_url: r.type_url.clone(),
                    version_info: r.version_info.clone(),
                    response_nonce: r.nonce.clone(),
                    resource_names: names.get(&r.type_url).cloned().unwrap_or_default(),
                    ..Default::default()
                };
                if tx.send(ack).await.is_err() {
                    break;
                }
            }
            let _ = done.send(());
        });
        Ok(AckingClient { ended })
    }
}
