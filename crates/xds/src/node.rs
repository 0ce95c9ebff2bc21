//! The `node` of an xDS stream's first request, as the engine reads it before the control plane
//! interprets it: present, bounded in size, and unpacked into plain values ([`NodeParts`]). What the
//! id and metadata mean (Istio's `TYPE~IP~ID~DOMAIN` and typed metadata) is the control plane's
//! business: it turns the parts into its own node type ([`crate::ResourceSource::node`]).

use envoy_types::pb::envoy::config::core::v3::Node;
use serde_json::{Map, Value as Json};

use crate::convert::struct_to_json;

/// The longest `node.id` accepted, bytes. Istio's ids are `TYPE~IP~POD.NAMESPACE~NAMESPACE.svc.DOMAIN`:
/// with Kubernetes' longest names (pod 253, namespace 63, domain 253 characters) under 700 bytes.
/// A longer id is refused: it is kept for the stream's life and written in every log line of it.
pub const MAX_NODE_ID_BYTES: usize = 1024;

/// The largest `node.metadata` accepted, bytes of its protobuf encoding. Istio's agent sends a few KiB;
/// labels and annotations copied from a pod are bounded by Kubernetes (256 KiB of annotations), so
/// 1 MiB leaves room for any real proxy while keeping what one connection holds for its life far
/// below the 4 MiB a request may carry.
pub const MAX_NODE_METADATA_BYTES: usize = 1 << 20;

/// Why the engine refused a stream's `node` before the control plane saw it. The text is what the
/// client receives as the gRPC `InvalidArgument` message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// The first request of a stream carried no node or an empty `node.id`.
    #[error(
        "missing node information: the first request on an xDS stream must carry node.id \
         (TYPE~IP~ID~DOMAIN, e.g. sidecar~10.1.2.3~reviews-v1-abc.default~default.svc.cluster.local)"
    )]
    MissingNode,
    /// The node id or metadata is larger than a proxy ever sends ([`MAX_NODE_ID_BYTES`],
    /// [`MAX_NODE_METADATA_BYTES`]): refused before anything of it is kept or logged.
    #[error("node {what} of {bytes} bytes is over meshpilot's limit of {limit} bytes")]
    TooLarge {
        /// `id` or `metadata`.
        what: &'static str,
        /// Its size (the id's UTF-8 length, the metadata's protobuf encoding).
        bytes: usize,
        /// The limit.
        limit: usize,
    },
}

/// The parts of an xDS `Node` a control plane identifies a client by, unpacked from protobuf.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeParts {
    /// `node.id` (not empty, at most [`MAX_NODE_ID_BYTES`]).
    pub id: String,
    /// `node.metadata` as a JSON object (keys sorted), empty when absent.
    pub metadata: Map<String, Json>,
    /// `node.locality.region` (empty when absent).
    pub region: String,
    /// `node.locality.zone`.
    pub zone: String,
    /// `node.locality.sub_zone`.
    pub sub_zone: String,
    /// `node.user_agent_name` (`envoy`, `grpc-go`, …).
    pub user_agent_name: String,
    /// `node.cluster` (pilot-agent's service cluster, e.g. `reviews.default`; empty when absent).
    pub cluster: String,
    /// Which of Istio's own filters the proxy has compiled in, read from `node.extensions`.
    pub istio_extensions: IstioExtensions,
}

/// Which of istio-proxy's own filters an Envoy has compiled in, as it reports them in
/// `node.extensions` (name, category and the config message types it accepts; upstream Envoy lists
/// none of these). Found by config type within the filter category, so a renamed extension is still
/// recognised. Only these flags are kept, not the list (Envoy 1.40 lists over 500 extensions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IstioExtensions {
    /// An HTTP filter accepting `stats.PluginConfig` (istio-proxy's `istio.stats`).
    pub http_stats: bool,
    /// A network filter accepting `stats.PluginConfig` (istio-proxy's TCP `istio.stats`).
    pub tcp_stats: bool,
    /// An HTTP filter accepting `io.istio.http.peer_metadata.Config` (istio-proxy's peer metadata
    /// filter, named `istio.metadata_exchange` in istiod's listeners).
    pub http_peer_metadata: bool,
    /// A network filter accepting `envoy.tcp.metadataexchange.config.MetadataExchange` (istio-proxy's
    /// TCP `istio.metadata_exchange`).
    pub tcp_metadata_exchange: bool,
    /// An upstream network filter accepting `envoy.tcp.metadataexchange.config.MetadataExchange`
    /// (istio-proxy's `istio.metadata_exchange` on outbound clusters).
    pub upstream_metadata_exchange: bool,
}

/// The config type of istio-proxy's stats filters (HTTP and TCP).
pub const STATS_CONFIG_TYPE: &str = "stats.PluginConfig";
/// The config type of istio-proxy's HTTP peer metadata filter.
pub const PEER_METADATA_CONFIG_TYPE: &str = "io.istio.http.peer_metadata.Config";
/// The config type of istio-proxy's TCP metadata exchange filter.
pub const METADATA_EXCHANGE_CONFIG_TYPE: &str = "envoy.tcp.metadataexchange.config.MetadataExchange";
const HTTP_FILTERS: &str = "envoy.filters.http";
const NETWORK_FILTERS: &str = "envoy.filters.network";
const UPSTREAM_NETWORK_FILTERS: &str = "envoy.filters.upstream_network";

impl IstioExtensions {
    /// Reads the flags from a node's `extensions` (Envoy's `node.extensions`: one entry per compiled
    /// extension with its `category` and `type_urls`, the full names of its config messages).
    pub fn of(extensions: &[envoy_types::pb::envoy::config::core::v3::Extension]) -> IstioExtensions {
        let mut out = IstioExtensions::default();
        for e in extensions.iter().filter(|e| !e.disabled) {
            let http = e.category == HTTP_FILTERS;
            let network = e.category == NETWORK_FILTERS;
            let upstream = e.category == UPSTREAM_NETWORK_FILTERS;
            if !http && !network && !upstream {
                continue;
            }
            for t in &e.type_urls {
                match t.as_str() {
                    STATS_CONFIG_TYPE if http => out.http_stats = true,
                    STATS_CONFIG_TYPE if network => out.tcp_stats = true,
                    PEER_METADATA_CONFIG_TYPE if http => out.http_peer_metadata = true,
                    METADATA_EXCHANGE_CONFIG_TYPE if network => out.tcp_metadata_exchange = true,
                    METADATA_EXCHANGE_CONFIG_TYPE if upstream => out.upstream_metadata_exchange = true,
                    _ => {}
                }
            }
        }
        out
    }
}

/// Reads the `node` of a stream's first request into [`NodeParts`].
///
/// # Errors
/// [`NodeError::MissingNode`] when the node or its id is missing; [`NodeError::TooLarge`] when the id
/// or the metadata is over its limit ([`MAX_NODE_ID_BYTES`], [`MAX_NODE_METADATA_BYTES`]), checked
/// before anything is copied.
pub fn node_parts(node: Option<&Node>) -> Result<NodeParts, NodeError> {
    let node = node.filter(|n| !n.id.is_empty()).ok_or(NodeError::MissingNode)?;
    if node.id.len() > MAX_NODE_ID_BYTES {
        return Err(NodeError::TooLarge { what: "id", bytes: node.id.len(), limit: MAX_NODE_ID_BYTES });
    }
    let metadata_bytes = node.metadata.as_ref().map_or(0, prost::Message::encoded_len);
    if metadata_bytes > MAX_NODE_METADATA_BYTES {
        return Err(NodeError::TooLarge {
            what: "metadata",
            bytes: metadata_bytes,
            limit: MAX_NODE_METADATA_BYTES,
        });
    }
    let locality = node.locality.clone().unwrap_or_default();
    Ok(NodeParts {
        id: node.id.clone(),
        metadata: node.metadata.as_ref().map(struct_to_json).unwrap_or_default(),
        region: locality.region,
        zone: locality.zone,
        sub_zone: locality.sub_zone,
        user_agent_name: node.user_agent_name.clone(),
        cluster: node.cluster.clone(),
        istio_extensions: IstioExtensions::of(&node.extensions),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::convert::json_to_struct;

    #[test]
    fn oversized_ids_and_metadata_are_refused_without_echoing_them() {
        let id =
            format!("sidecar~10.0.0.1~{}.default~default.svc.cluster.local", "p".repeat(MAX_NODE_ID_BYTES));
        let node = Node { id, ..Node::default() };
        let err = node_parts(Some(&node)).unwrap_err();
        assert!(matches!(err, NodeError::TooLarge { what: "id", .. }), "{err}");
        assert!(err.to_string().len() < 200, "{err}");
        let big = json!({"NAMESPACE": "default", "BLOB": "x".repeat(MAX_NODE_METADATA_BYTES)});
        let node = Node {
            id: "sidecar~10.0.0.1~a.default~default.svc.cluster.local".into(),
            metadata: Some(json_to_struct(big.as_object().unwrap())),
            ..Node::default()
        };
        let err = node_parts(Some(&node)).unwrap_err();
        assert!(matches!(err, NodeError::TooLarge { what: "metadata", .. }), "{err}");
        // Exactly at the limit is accepted.
        let node = Node { id: "x".repeat(MAX_NODE_ID_BYTES), ..Node::default() };
        assert_eq!(node_parts(Some(&node)).unwrap().id.len(), MAX_NODE_ID_BYTES);
    }

    #[test]
    fn istio_extensions_are_recognised_by_category_and_config_type() {
        use envoy_types::pb::envoy::config::core::v3::Extension;
        let ext = |name: &str, category: &str, t: &str| Extension {
            name: name.into(),
            category: category.into(),
            type_urls: vec![t.into()],
            ..Default::default()
        };
        let upstream = [ext(
            "envoy.filters.http.router",
            HTTP_FILTERS,
            "envoy.extensions.filters.http.router.v3.Router",
        )];
        assert_eq!(IstioExtensions::of(&upstream), IstioExtensions::default());
        let istio = [
            ext("envoy.filters.http.istio_stats", HTTP_FILTERS, STATS_CONFIG_TYPE),
            ext("envoy.filters.network.istio_stats", NETWORK_FILTERS, STATS_CONFIG_TYPE),
            ext("envoy.filters.http.peer_metadata", HTTP_FILTERS, PEER_METADATA_CONFIG_TYPE),
            ext("envoy.filters.network.metadata_exchange", NETWORK_FILTERS, METADATA_EXCHANGE_CONFIG_TYPE),
        ];
        let all = IstioExtensions {
            http_stats: true,
            tcp_stats: true,
            http_peer_metadata: true,
            tcp_metadata_exchange: true,
            upstream_metadata_exchange: false,
        };
        assert_eq!(IstioExtensions::of(&istio), all);
        let upstream_mx = ext("x", UPSTREAM_NETWORK_FILTERS, METADATA_EXCHANGE_CONFIG_TYPE);
        assert_eq!(
            IstioExtensions::of(std::slice::from_ref(&upstream_mx)),
            IstioExtensions { upstream_metadata_exchange: true, ..IstioExtensions::default() }
        );
        // Another category or disabled: not counted.
        let mut off = istio[3].clone();
        off.disabled = true;
        let elsewhere = ext("y", "envoy.filters.listener", STATS_CONFIG_TYPE);
        assert_eq!(IstioExtensions::of(&[off, elsewhere]), IstioExtensions::default());
    }

    #[test]
    fn a_missing_node_or_id_is_refused() {
        assert_eq!(node_parts(None).unwrap_err(), NodeError::MissingNode);
        assert_eq!(node_parts(Some(&Node::default())).unwrap_err(), NodeError::MissingNode);
    }

    #[test]
    fn node_parts_reads_struct_metadata_locality_and_user_agent() {
        let node = Node {
            id: "sidecar~127.0.0.1~client-1.test~test.svc.cluster.local".into(),
            metadata: Some(json_to_struct(
                json!({"GENERATOR": "grpc", "NAMESPACE": "test", "INSTANCE_IPS": "127.0.0.1"})
                    .as_object()
                    .unwrap(),
            )),
            locality: Some(envoy_types::pb::envoy::config::core::v3::Locality {
                region: "r".into(),
                zone: "z".into(),
                sub_zone: "s".into(),
            }),
            user_agent_name: "envoy".into(),
            ..Default::default()
        };
        let parts = node_parts(Some(&node)).unwrap();
        assert_eq!((parts.region.as_str(), parts.zone.as_str(), parts.sub_zone.as_str()), ("r", "z", "s"));
        assert_eq!(parts.user_agent_name, "envoy");
        assert_eq!(
            Json::Object(parts.metadata),
            json!({"INSTANCE_IPS": "127.0.0.1", "NAMESPACE": "test", "GENERATOR": "grpc"})
        );
    }
}
