//! Istio's configuration API for meshpilot.
//!
//! ```text
//!  YAML/JSON text ──► yaml::parse_documents ──► yaml::Node tree (lines, columns)
//!                                                   │  schema::lookup(apiVersion, kind)
//!                                                   ▼
//!                        de::from_node ──► Spec (typed, per kind) + unknown fields with paths
//!                                                   │
//!                       serde ◄─────────────────────┴─────────────────► prost (protobuf / MCP)
//! ```
//!
//! - [`yaml`]: multi-document YAML/JSON into a spanned tree (duplicate keys rejected).
//! - [`de`]: a serde deserializer over that tree with field paths and unknown-field capture.
//! - [`wkt`]: `Duration`, `Struct`/`Value`, enum and bytes helpers (protobuf JSON mapping).
//! - [`schema`]: the kinds meshpilot serves (group, versions and aliases, plural, scope, proto names).
//! - [`meta`]: Kubernetes object metadata.
//! - [`mesh_config`]: the subset of `istio.mesh.v1alpha1.MeshConfig` meshpilot reads (protobuf and JSON).
//! - [`protocol`]: Istio's application protocols of a port (`pkg/config/protocol`).
//! - [`spec`]: [`Spec`], one enum over every kind's typed spec.
//! - [`mcp`]: MCP-over-xDS wire types (`istio.mcp.v1alpha1.Resource`), type URLs and the
//!   spec-level conversions both the MCP server and client use.
//! - [`networking`], [`security`], [`telemetry`], [`extensions`], [`type_v1beta1`]: the Istio API
//!   types, written from the Istio API reference (field names and numbers of `istio.io/api`).
//!
//! Every type reads Kubernetes-style JSON/YAML with Istio's field names (lowerCamelCase; the proto
//! snake_case names are accepted too), and encodes to protobuf with the Istio API's field numbers.
//! Proto oneofs are sibling `Option` fields (the wire format is the same); "at most one member set"
//! is checked by validation, which names the field.

pub mod de;
pub mod extensions;
pub mod gateway_api;
pub mod mcp;
pub mod mesh_config;
pub mod meta;
pub mod networking;
pub mod protocol;
pub mod schema;
pub mod security;
pub mod spec;
pub mod telemetry;
#[cfg(test)]
mod test_corpus;
pub mod type_v1beta1;
pub mod wkt;
pub mod yaml;

pub use schema::{GroupVersionKind, Kind, Schema};
pub use spec::Spec;
