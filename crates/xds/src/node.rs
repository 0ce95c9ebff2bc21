//! Reading a proxy's identity from the protobuf `node` of an xDS stream's first request into the
//! model's [`Proxy`] (`model::push::node`: Istio's node id `TYPE~IP~ID~DOMAIN` and typed node
//! metadata). Only the protobuf part lives here: `node.metadata` as a `Struct`, `node.locality`,
//! `node.user_agent_name`.

use envoy_types::pb::{envoy::config::core::v3::Node, google::protobuf::Struct};
pub use model::push::node::{
    Locality, MAX_NODE_ID_BYTES, MAX_NODE_METADATA_BYTES, NodeError, NodeMetadata, NodeType, Proxy,
    VerifiedIdentity,
};

use crate::convert::struct_to_json;

/// Reads the typed metadata from `node.metadata`.
///
/// # Errors
/// [`NodeError::Metadata`] when a modelled key has the wrong JSON type (Istio rejects those too).
pub fn metadata_from_struct(s: &Struct) -> Result<NodeMetadata, NodeError> {
    NodeMetadata::from_json(struct_to_json(s))
}

/// Reads the identity from the `node` of a stream's first request: id and metadata
/// ([`Proxy::parse`]), locality and user agent.
///
/// # Errors
/// [`NodeError`] when the node is missing, the id malformed or the metadata mistyped, or either is
/// over its size limit ([`MAX_NODE_ID_BYTES`], [`MAX_NODE_METADATA_BYTES`]).
pub fn proxy_from_node(node: Option<&Node>) -> Result<Proxy, NodeError> {
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
    let metadata = match &node.metadata {
        Some(s) => metadata_from_struct(s)?,
        None => NodeMetadata::default(),
    };
    let mut proxy = Proxy::parse(&node.id, metadata)?;
    if let Some(l) = &node.locality {
        proxy.locality =
            Locality { region: l.region.clone(), zone: l.zone.clone(), sub_zone: l.sub_zone.clone() };
    }
    proxy.user_agent_name = node.user_agent_name.clone();
    Ok(proxy)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value as Json, json};

    use super::*;
    use crate::convert::json_to_struct;

    #[test]
    fn oversized_ids_and_metadata_are_refused_without_echoing_them() {
        let id =
            format!("sidecar~10.0.0.1~{}.default~default.svc.cluster.local", "p".repeat(MAX_NODE_ID_BYTES));
        let node = Node { id, ..Node::default() };
        let err = proxy_from_node(Some(&node)).unwrap_err();
        assert!(matches!(err, NodeError::TooLarge { what: "id", .. }), "{err}");
        assert!(err.to_string().len() < 200, "{err}");
        let big = json!({"NAMESPACE": "default", "BLOB": "x".repeat(MAX_NODE_METADATA_BYTES)});
        let node = Node {
            id: "sidecar~10.0.0.1~a.default~default.svc.cluster.local".into(),
            metadata: Some(json_to_struct(big.as_object().unwrap())),
            ..Node::default()
        };
        let err = proxy_from_node(Some(&node)).unwrap_err();
        assert!(matches!(err, NodeError::TooLarge { what: "metadata", .. }), "{err}");
        // A malformed id just under the limit is quoted only in part.
        let node = Node { id: "x".repeat(MAX_NODE_ID_BYTES), ..Node::default() };
        let err = proxy_from_node(Some(&node)).unwrap_err().to_string();
        assert!(err.contains("(1024 bytes)") && err.len() < 600, "{err}");
        // A mistyped metadata value is quoted only in part.
        let node = Node {
            id: "sidecar~10.0.0.1~a.default~default.svc.cluster.local".into(),
            metadata: Some(json_to_struct(json!({"NAMESPACE": ["y".repeat(10_000)]}).as_object().unwrap())),
            ..Node::default()
        };
        let err = proxy_from_node(Some(&node)).unwrap_err().to_string();
        assert!(err.contains("NAMESPACE") && err.len() < 600, "{err}");
    }

    #[test]
    fn a_missing_node_or_id_is_refused() {
        assert_eq!(proxy_from_node(None).unwrap_err(), NodeError::MissingNode);
        assert_eq!(proxy_from_node(Some(&Node::default())).unwrap_err(), NodeError::MissingNode);
    }

    #[test]
    fn from_node_reads_struct_metadata_and_locality() {
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
        let p = proxy_from_node(Some(&node)).unwrap();
        assert_eq!(p.locality.zone, "z");
        assert_eq!(p.user_agent_name, "envoy");
        assert_eq!(p.config_namespace, "test");
        let j = p.metadata.to_json();
        assert_eq!(
            Json::Object(j),
            json!({"INSTANCE_IPS": "127.0.0.1", "NAMESPACE": "test", "GENERATOR": "grpc"})
        );
    }
}
