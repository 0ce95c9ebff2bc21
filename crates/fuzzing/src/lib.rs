//! Fuzz entry points: one function per cargo-fuzz target, shared by the libFuzzer targets in
//! `fuzz/fuzz_targets/` (nightly, `scripts/fuzz.sh`) and the stable replay test
//! (`tests/it/replay.rs`), which runs every checked-in corpus file through exactly the same code.
//!
//! ```text
//!   fuzz/corpus/<target>/*  ──►  fuzz_<target>(&[u8])  ──►  product code (api, model, validation, xds)
//!        ▲                         ▲            ▲
//!   cargo fuzz run (nightly)   fuzz target   tests/it/replay.rs (stable cargo test)
//! ```
//!
//! Every entry point takes arbitrary bytes and must return normally: a panic (including an
//! assertion of an invariant below) is a bug in the product, to be fixed with a clear error and
//! kept as a corpus entry plus a named regression test in the crate that had the bug.
//!
//! | target          | entry point               | what it drives                                               |
//! |-----------------|---------------------------|--------------------------------------------------------------|
//! | `yaml_config`   | [`fuzz_yaml_config`]      | `api::yaml` + typed decoding + `config::parse` (file source), `parse_json` (CRD source) |
//! | `validate`      | [`fuzz_validate`]         | any kind's spec (first byte picks the kind) → decode → `validation::validate` |
//! | `ads_requests`  | [`fuzz_ads_requests`]     | DiscoveryRequest / DeltaDiscoveryRequest sequences → `xds::sotw`, `xds::delta`, `xds::node` |
//! | `node_id`       | [`fuzz_node_id`]          | node id + metadata → `model::push::node::Proxy`, `ProxyContext` |
//! | `grpc_frames`   | [`fuzz_grpc_frames`]      | an ADS request body → `xds::framing` (gRPC frames → requests) |

mod ads;

pub use ads::{ADS_OP_DELTA, ADS_OP_PUSH, ADS_OP_RECONNECT, ADS_OP_SOTW, fuzz_ads_requests};

use api::{
    Spec,
    de::from_node,
    meta::ObjectMeta,
    schema::Kind,
    yaml::{self, Node},
};
use bytes::Bytes;
use config::parse::{ParseOptions, parse_json, parse_text};
use envoy_types::pb::envoy::{
    config::core::v3::Node as XdsNode,
    service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest},
};
use model::push::{
    ProxyContext,
    node::{Locality, NodeMetadata, Proxy},
};
use prost::Message;
use serde_json::Value as Json;

/// A fuzz entry point: arbitrary bytes in, a normal return (or a panic: a bug).
pub type EntryPoint = fn(&[u8]);

/// The fuzz targets, by the name of their corpus directory (`fuzz/corpus/<name>`), with their entry
/// points.
pub const TARGETS: &[(&str, EntryPoint)] = &[
    ("yaml_config", fuzz_yaml_config),
    ("validate", fuzz_validate),
    ("ads_requests", fuzz_ads_requests),
    ("node_id", fuzz_node_id),
    ("grpc_frames", fuzz_grpc_frames),
];

/// `yaml_config`: the bytes as a config file (YAML stream, as the file source reads it: split into
/// documents, typed decoding, the kind's validation) and, when they are JSON, as one object from
/// the Kubernetes API (`parse_json`, the CRD source's path). Non-UTF-8 input is read lossily: the
/// file source refuses such a file before parsing (`read_to_string`), and the lossy text still gives
/// the parser every other byte pattern of the input.
pub fn fuzz_yaml_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let options = ParseOptions::default();
    for doc in parse_text("fuzz.yaml", &text, &options) {
        // A typed config is only ever handed out for a document without errors.
        assert!(doc.config.is_none() || doc.is_valid(), "a config from an invalid document: {doc:?}");
        let _ = doc.object_ref();
        for finding in doc.errors.iter().chain(&doc.warnings) {
            let _ = finding.to_string();
        }
        if let Some(config) = &doc.config {
            // What the CRD and MCP sources re-encode must not fail either.
            let _ = config.spec.to_json();
            let _ = config.spec.encode_proto();
        }
    }
    if let Ok(value) = serde_json::from_slice::<Json>(data) {
        for doc in parse_json("kubernetes", &value, &options) {
            assert!(doc.config.is_none() || doc.is_valid(), "a config from an invalid object: {doc:?}");
        }
    }
}

/// `validate`: the first byte picks the kind (`Kind::ALL[b % n]`, so any input is some kind); the
/// rest is a YAML (or JSON, a subset) document. If it is an object with a `spec`, `spec` and
/// `metadata` are decoded from it; otherwise the whole document is the spec. The typed spec (with any
/// unknown fields ignored, so validators see more than strict readers let through) goes through
/// `validation::validate`.
pub fn fuzz_validate(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let kind = Kind::ALL[usize::from(selector) % Kind::ALL.len()];
    let text = String::from_utf8_lossy(rest);
    let Some(Ok(yaml::Document { root: Some(root), .. })) = yaml::parse_documents(&text).into_iter().next()
    else {
        return;
    };
    let (meta_node, spec_node) = match root.get("spec") {
        Some(spec) => (root.get("metadata"), spec),
        None => (None, &root),
    };
    validate_node(kind, meta_node, spec_node);
}

fn validate_node(kind: Kind, meta_node: Option<&Node>, spec_node: &Node) {
    let mut meta = meta_node
        .and_then(|n| from_node::<ObjectMeta>(n, "metadata").ok())
        .map(|(m, _)| m)
        .unwrap_or_default();
    if meta.name.is_empty() {
        meta.name = "fuzz".to_string();
    }
    let Ok((spec, _unknown)) = Spec::from_node(kind, Some(spec_node)) else { return };
    assert_eq!(spec.kind(), kind, "decoding a {kind} spec gave another kind");
    let report = validation::validate(&meta, &spec);
    let _ = (report.errors.len(), report.warnings.len());
}

/// `node_id`: a node as a proxy sends it, in two forms.
///
/// - Text: the node id (`TYPE~IP~ID~DOMAIN`) up to the first newline, then the metadata as a JSON
///   object → `NodeMetadata::from_json` → `Proxy::parse` → `ProxyContext::from_proxy`.
/// - Protobuf: the whole input as an Envoy `Node` → [`proxy_from_node`] (`xds::node::node_parts`:
///   size bounds, metadata `Struct`, locality, user agent; then `Proxy::from_node`) →
///   `ProxyContext::from_proxy`.
pub fn fuzz_node_id(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let (id, metadata) = text.split_once('\n').unwrap_or((text, ""));
        let metadata = match serde_json::from_str::<Json>(metadata) {
            Ok(Json::Object(map)) => NodeMetadata::from_json(map),
            _ => Ok(NodeMetadata::default()),
        };
        if let Ok(metadata) = metadata {
            let _ = metadata.to_json();
            if let Ok(proxy) = Proxy::parse(id, metadata) {
                assert_eq!(proxy.node_id, id, "a parsed proxy does not carry the id it was read from");
                let _ = ProxyContext::from_proxy(&proxy);
            }
        }
    }
    if let Ok(node) = XdsNode::decode(data)
        && let Some(proxy) = proxy_from_node(Some(&node))
    {
        let _ = ProxyContext::from_proxy(&proxy);
    }
}

/// A node as meshpilot's ADS server reads it: the engine's bounds and unpacking
/// (`xds::node::node_parts`), then Istio's node id and metadata (`Proxy::from_node`, as
/// `discovery::source::NetworkingSource::node`). `None` when either refuses it.
pub fn proxy_from_node(node: Option<&XdsNode>) -> Option<Proxy> {
    let parts = xds::node::node_parts(node).ok()?;
    let locality = Locality { region: parts.region, zone: parts.zone, sub_zone: parts.sub_zone };
    Proxy::from_node(&parts.id, parts.metadata, locality, parts.user_agent_name).ok()
}

/// `grpc_frames`: the request side of an ADS stream's gRPC framing
/// (`xds::framing::decode_request_frames`, what `framing::Requests` does with a request body). First
/// byte: the message size limit (`64 << (b % 12)` bytes); second: the DATA frame size (`b + 1`
/// bytes); the rest: the request body, cut into frames of that size, decoded as SotW and as Delta
/// requests. Invariants: the result does not depend on how the body is cut into DATA frames (the
/// same bytes as one frame give the same messages and the same error), and no decoded message is
/// larger than the limit.
pub fn fuzz_grpc_frames(data: &[u8]) {
    let [limit, size, body @ ..] = data else { return };
    let max = 64usize << (limit % 12);
    let cut: Vec<Bytes> = body.chunks(usize::from(*size) + 1).map(Bytes::copy_from_slice).collect();
    let whole = vec![Bytes::copy_from_slice(body)];
    same_decoding::<DiscoveryRequest>(&cut, &whole, max);
    same_decoding::<DeltaDiscoveryRequest>(&cut, &whole, max);
}

fn same_decoding<T: Message + Default + PartialEq + std::fmt::Debug>(
    cut: &[Bytes],
    whole: &[Bytes],
    max: usize,
) {
    let decode = |frames: &[Bytes]| -> Vec<_> {
        xds::framing::decode_request_frames::<T>(frames.to_vec(), max)
            .into_iter()
            .map(|r| r.map_err(|status| (status.code(), status.message().to_owned())))
            .collect()
    };
    let (split, one) = (decode(cut), decode(whole));
    assert_eq!(split, one, "decoding depends on how the body is cut into DATA frames");
    for message in split.iter().flatten() {
        assert!(message.encoded_len() <= max, "a decoded request is larger than the limit of {max} bytes");
    }
}
