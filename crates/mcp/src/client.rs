//! The ADS side of [`McpSource`]: dial, subscribe, apply each response, ACK or NACK, reconnect.

use std::{collections::BTreeMap, time::Duration};

use api::{Kind, mcp, mesh_config::MeshConfig};
use envoy_types::pb::{
    envoy::{
        config::core::v3::Node,
        service::discovery::v3::{
            DiscoveryRequest, DiscoveryResponse,
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::{
        protobuf::{Struct, Value, value::Kind as ValueKind},
        rpc::Status,
    },
};
use model::Shutdown;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use tracing::{debug, info, warn};

use crate::{
    apply::{ApplyOptions, apply_response, nack_message},
    source::McpSource,
};

/// gRPC `INVALID_ARGUMENT`, the code of a NACK's `error_detail`.
const INVALID_ARGUMENT: i32 = 3;

/// The `ISTIO_VERSION` istiod's client sends when it has none (`pkg/adsc`).
const ISTIO_VERSION: &str = "65536.65536.65536";

/// Connects, streams and reconnects until `shutdown`; failures are logged with their reason,
/// counted, and retried after a doubling delay (capped); a stream that delivered a response resets
/// the delay.
pub(crate) async fn run(source: McpSource, mut shutdown: Shutdown) {
    let (first, cap) = source.inner.options.backoff;
    let mut delay = first;
    loop {
        let result = tokio::select! {
            r = stream(&source) => r,
            () = shutdown.wait() => return,
        };
        let (err, answered) = match result {
            Ok(()) => ("the server closed the stream".to_string(), true),
            Err(Failure { reason, answered }) => (reason, answered),
        };
        if answered {
            delay = first;
        }
        {
            let mut state = source.inner.state();
            state.status.connected = false;
            state.status.last_error = Some(err.clone());
        }
        metrics::counter!("meshpilot_mcp_reconnects", "source" => source.inner.name.clone()).increment(1);
        warn!(source = %source.inner.name, error = %err, retry_in = ?delay, "config source unavailable; keeping its last config and retrying");
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shutdown.wait() => return,
        }
        delay = (delay * 2).min(cap);
    }
}

struct Failure {
    reason: String,
    /// The stream delivered at least one response before failing.
    answered: bool,
}

impl Failure {
    fn before_answer(reason: String) -> Failure {
        Failure { reason, answered: false }
    }
}

/// An error with its sources, as one line (tonic's `transport error` alone says nothing).
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let s = e.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        source = e.source();
    }
    text
}

async fn connect(source: &McpSource) -> Result<Channel, String> {
    let address = &source.inner.options.address;
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .map_err(|e| format!("invalid address {address:?}: {e}"))?
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true);
    let connected = match &source.inner.dialer {
        Some(dialer) => endpoint.connect_with_connector(dialer.clone()).await,
        None => endpoint.connect().await,
    };
    connected.map_err(|e| chain(&e))
}

/// The node id's IP: configured, else the local address towards the server, else 127.0.0.1.
fn local_ip(source: &McpSource) -> String {
    if let Some(ip) = &source.inner.options.node.ip {
        return ip.clone();
    }
    let probe = || -> std::io::Result<std::net::IpAddr> {
        let target = std::net::ToSocketAddrs::to_socket_addrs(source.inner.options.address.as_str())?
            .next()
            .ok_or_else(|| std::io::Error::other("no address"))?;
        let any = if target.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
        let socket = std::net::UdpSocket::bind(any)?;
        socket.connect(target)?;
        Ok(socket.local_addr()?.ip())
    };
    probe().map_or_else(|_| "127.0.0.1".to_string(), |ip| ip.to_string())
}

fn string_value(s: &str) -> Value {
    Value { kind: Some(ValueKind::StringValue(s.to_string())) }
}

/// The node of the first request: istiod's client's id and metadata (`GENERATOR: api`).
fn node(source: &McpSource) -> Node {
    let options = &source.inner.options;
    let mut fields = std::collections::HashMap::new();
    fields.insert("GENERATOR".to_string(), string_value("api"));
    fields.insert("ISTIO_VERSION".to_string(), string_value(ISTIO_VERSION));
    fields.insert("NAMESPACE".to_string(), string_value(&options.node.pod_namespace));
    if let Some(rev) = options.revision.as_deref().filter(|r| !r.is_empty()) {
        fields.insert("ISTIO_REVISION".to_string(), string_value(rev));
    }
    Node {
        id: options.node.node_id(&local_ip(source)),
        metadata: Some(Struct { fields: fields.into_iter().collect() }),
        ..Node::default()
    }
}

/// The type URLs subscribed to, in istiod's order: MeshConfig first (when handled), then the kinds.
pub(crate) fn subscriptions(source: &McpSource) -> Vec<String> {
    let kinds = &source.inner.options.kinds;
    mcp::requested_type_urls()
        .into_iter()
        .filter(|url| {
            if url == mcp::MESH_CONFIG_TYPE_URL {
                source.inner.options.mesh_handler.is_some()
            } else {
                mcp::kind_from_type_url(url).is_some_and(|k| kinds.contains(&k))
            }
        })
        .collect()
}

/// One connection: dial, send the subscriptions, then handle responses until the stream ends.
async fn stream(source: &McpSource) -> Result<(), Failure> {
    let name = &source.inner.name;
    let channel = connect(source).await.map_err(Failure::before_answer)?;
    let mut client = AggregatedDiscoveryServiceClient::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    let (tx, rx) = mpsc::channel::<DiscoveryRequest>(64);
    let subscriptions = subscriptions(source);
    for (i, type_url) in subscriptions.iter().enumerate() {
        let request = DiscoveryRequest {
            node: (i == 0).then(|| node(source)),
            type_url: type_url.clone(),
            ..DiscoveryRequest::default()
        };
        // The channel holds every subscription (64 > the ~20 types); nothing waits here.
        let _ = tx.try_send(request);
    }
    let response = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .map_err(|s| Failure::before_answer(status_text(&s)))?;
    let mut responses = response.into_inner();
    {
        let mut state = source.inner.state();
        state.status.connected = true;
        state.status.connections += 1;
    }
    info!(source = %name, types = subscriptions.len(), "connected to config source; subscribed");
    // The version of the last accepted response per type, sent back in NACKs (xDS).
    let mut accepted: BTreeMap<String, String> = BTreeMap::new();
    let mut answered = false;
    loop {
        let message = match responses.message().await {
            Ok(Some(m)) => m,
            Ok(None) => return Err(Failure { reason: "the server closed the stream".into(), answered }),
            Err(status) => return Err(Failure { reason: status_text(&status), answered }),
        };
        answered = true;
        let nack = handle(source, &message);
        let mut reply = DiscoveryRequest {
            type_url: message.type_url.clone(),
            response_nonce: message.nonce.clone(),
            ..DiscoveryRequest::default()
        };
        match nack {
            None => {
                accepted.insert(message.type_url.clone(), message.version_info.clone());
                reply.version_info = message.version_info.clone();
            }
            Some(text) => {
                reply.version_info = accepted.get(&message.type_url).cloned().unwrap_or_default();
                reply.error_detail =
                    Some(Status { code: INVALID_ARGUMENT, message: text, details: Vec::new() });
            }
        }
        if tx.send(reply).await.is_err() {
            return Err(Failure { reason: "the request stream closed".into(), answered });
        }
    }
}

fn status_text(status: &tonic::Status) -> String {
    let mut text = format!("{:?}: {}", status.code(), status.message());
    if let Some(source) = std::error::Error::source(status) {
        text.push_str(": ");
        text.push_str(&chain(source));
    }
    text
}

/// Applies one response; returns the NACK text when it must be NACKed.
fn handle(source: &McpSource, message: &DiscoveryResponse) -> Option<String> {
    let inner = &source.inner;
    let type_url = message.type_url.as_str();
    {
        let mut state = inner.state();
        state.status.responses += 1;
        state.status.versions.insert(type_url.to_string(), message.version_info.clone());
    }
    metrics::counter!("meshpilot_mcp_responses", "source" => inner.name.clone(), "type" => type_url.to_string())
        .increment(1);
    let nack = if type_url == mcp::MESH_CONFIG_TYPE_URL {
        mesh_config(source, message)
    } else if let Some(kind) = mcp::kind_from_type_url(type_url) {
        config(source, kind, message)
    } else {
        debug!(source = %inner.name, type_url, "response of a type not subscribed to; ignored");
        None
    };
    if let Some(text) = &nack {
        inner.state().status.nacks += 1;
        metrics::counter!("meshpilot_mcp_nacks", "source" => inner.name.clone(), "type" => type_url.to_string())
            .increment(1);
        warn!(source = %inner.name, type_url, version = %message.version_info, "NACK: {text}");
    }
    nack
}

fn config(source: &McpSource, kind: Kind, message: &DiscoveryResponse) -> Option<String> {
    let inner = &source.inner;
    let options = ApplyOptions {
        source: inner.name.clone(),
        parse: inner.options.parse.clone(),
        revision: inner.options.revision.clone(),
    };
    let applied = apply_response(kind, &message.resources, &source.held(kind), &options);
    for w in &applied.warnings {
        warn!(source = %inner.name, "{w}");
    }
    if applied.other_revision > 0 {
        debug!(source = %inner.name, %kind, skipped = applied.other_revision, "objects of another revision skipped");
    }
    let changed = inner.store.apply(applied.changes);
    debug!(source = %inner.name, %kind, resources = message.resources.len(), changed, "response applied");
    let mut state = inner.state();
    state.answered.insert(kind);
    if applied.invalid.is_empty() {
        state.invalid.remove(&kind);
        return None;
    }
    metrics::counter!("meshpilot_mcp_invalid_objects", "source" => inner.name.clone(), "kind" => kind.as_str())
        .increment(applied.invalid.len() as u64);
    let text = nack_message(&message.type_url, &applied.invalid);
    state.invalid.insert(kind, applied.invalid);
    Some(text)
}

fn mesh_config(source: &McpSource, message: &DiscoveryResponse) -> Option<String> {
    let inner = &source.inner;
    let handler = inner.options.mesh_handler.as_ref()?;
    // istiod's client reads the first resource only; so does meshpilot.
    let any = message.resources.first()?;
    if any.type_url != api::mesh_config::MESH_CONFIG_ANY_TYPE_URL {
        return Some(format!(
            "MeshConfig: type_url: expected {}, got {:?}",
            api::mesh_config::MESH_CONFIG_ANY_TYPE_URL,
            any.type_url
        ));
    }
    let mesh = match MeshConfig::decode_any_value(&any.value) {
        Ok(m) => m,
        Err(e) => return Some(format!("MeshConfig: {e}")),
    };
    match handler(&mesh.to_json()) {
        Ok(warnings) => {
            for w in warnings {
                warn!(source = %inner.name, "mesh config: {w}");
            }
            None
        }
        Err(e) => Some(format!("MeshConfig: {e}")),
    }
}
