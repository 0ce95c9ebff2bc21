//! meshpilot's MCP-over-xDS, both sides. The client: an `xds://HOST:PORT` entry of mesh config
//! `configSources` as a config source (Istio: `pilot/pkg/bootstrap/configcontroller.go`
//! `initConfigSources` with `pkg/adsc`), described below. The server: [`server::ApiGenerator`], the
//! `api` generator the DiscoveryServer's xDS source answers `GENERATOR: api` clients with (Istio's
//! `apigen`; docs/MCP.md).
//!
//! ```text
//!  McpSource ── dial (plaintext or tlsSettings) ── ADS stream, SotW ───────────────────┐
//!    one DiscoveryRequest per type URL: core/v1alpha1/MeshConfig (when a mesh handler  │ DiscoveryResponse
//!    is set) + group/version/Kind of every kind; node sidecar~IP~POD.NS~NS.svc…,       │ (full state of a type)
//!    metadata GENERATOR: api                                                          ▼
//!  ACK / NACK (error_detail) ◄── apply::apply_response ── decode (api::mcp) + validate (config::parse)
//!                                     │ changes (add / update on version change / delete the missing)
//!                                     ▼
//!                        MemoryStore (read-only) ──► queue ──► handlers (the aggregate)
//!  MeshConfig ──► api::mesh_config::MeshConfig ──► JSON ──► McpOptions::mesh_handler (validate, apply)
//! ```
//!
//! - **Requests**: as istiod's client (`ConfigInitialRequests`): MeshConfig, then every kind at its
//!   canonical version ([`api::mcp::requested_type_urls`]); node id
//!   `sidecar~IP~POD_NAME.POD_NAMESPACE~POD_NAMESPACE.svc.cluster.local`, node metadata
//!   `GENERATOR: api`, `ISTIO_VERSION`, `ISTIO_REVISION` (with a revision).
//! - **Responses** ([`apply`]): full state per type; an object is replaced only when its
//!   `metadata.version` changes; objects of another `istio.io/rev` skipped; every object decoded and
//!   validated as files and CRDs are. **Differs from istiod**: an invalid object keeps its last good
//!   copy (or none) and the response is **NACKed** with an `error_detail` naming each invalid object,
//!   field path and reason (istiod logs, skips and ACKs); the valid objects of the response are
//!   applied either way.
//! - **MeshConfig** arrives as a raw `istio.mesh.v1alpha1.MeshConfig` Any; it is decoded
//!   ([`api::mesh_config`]) and handed as mesh config JSON to [`McpOptions::mesh_handler`], whose
//!   error NACKs it. (istiod's client stores it and does not apply it.)
//! - **Connection**: plaintext, or TLS from `tlsSettings` ([`tls`]; istiod ignores them). A failed
//!   dial or a broken stream is logged with its reason, counted (`meshpilot_mcp_reconnects`) and
//!   retried after a doubling delay ([`McpOptions::backoff`]); the config received so far stays in
//!   force meanwhile. A new stream re-subscribes; the server's full state per type replaces what is
//!   held, so a server restart deletes nothing that still exists.
//! - **Source**: [`McpSource`] is the [`config::Feed`] of a read-only [`config::ReadOnlySource`]
//!   (`ReadOnlySource::new(source)`), which is the [`model::ConfigStoreController`] the aggregate
//!   gets and runs the client: writes refused with `StoreError::ReadOnly`, `source_of` =
//!   `xds://HOST:PORT`.
//! - **Sync**: [`model::ConfigStoreController::has_synced`] once every subscribed kind has had one
//!   answer (MeshConfig not counted, as istiod) and the queue has delivered those objects once; until
//!   then [`model::ConfigStoreController::not_synced_reason`] says why (`config source
//!   xds://127.0.0.1:15010 has not answered: …`), which `/ready` shows.
//! - **Metrics**: `meshpilot_mcp_responses`, `meshpilot_mcp_nacks`, `meshpilot_mcp_invalid_objects`,
//!   `meshpilot_mcp_reconnects` (Istio's client has none).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod apply;
mod client;
pub mod server;
mod source;
pub mod tls;

pub use source::{McpOptions, McpSource, McpStatus, MeshHandler, NodeIdentity};
