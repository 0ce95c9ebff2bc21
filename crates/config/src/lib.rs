//! meshpilot's config reading, stores and sources.
//!
//! ```text
//!  file / stdin / API text ──► parse::parse_text ──► ParsedDocument per document
//!                                                 ├─ Config (typed spec + metadata) when valid
//!                                                 └─ findings: errors / warnings with file, line, path
//!
//!  --config-dir DIR ──► FileSource ─► ReadOnlySource ───┐ (read-only MemoryStore inside)
//!  Ingress, MCP feeds ──► ReadOnlySource ───────────────┤
//!  Kubernetes CRDs (kube::KubeSource) ──────────────────┼──► Aggregate ──► Queue ──► handlers
//!  MemoryStore (writable) ──────────────────────────────┘        │
//!                                                                └──► configz() for /debug/configz
//! ```
//!
//! Every source implements [`model::ConfigStore`] and [`model::ConfigStoreController`]:
//!
//! - [`parse`]: turns Kubernetes-style YAML/JSON documents into typed, validated [`model::Config`]s, or
//!   into findings that name the file, document, line, field path and reason (the only place documents
//!   meet validation).
//! - [`queue`]: the coalescing, retrying task queue between a store and its handlers (ordering
//!   guarantees are documented there).
//! - [`memory`]: [`MemoryStore`], writable or read-only (the sink of mirroring sources).
//! - [`source`]: [`ReadOnlySource`], the one read-only source type, over a [`Feed`] that fills its
//!   store (the file source here; the Ingress and MCP sources in their crates).
//! - [`file`](mod@file): [`FileSource`], a watched directory of YAML/JSON (bad-file and duplicate policy
//!   there), the feed of `--config-dir`.
//! - [`aggregate`]: [`Aggregate`], several sources as one (precedence, shadowing, writes).
//! - [`configz`](mod@configz): the JSON dump of a store for `/debug/configz`.
//! - [`mesh`]: the mesh config file (`--mesh-config`, Istio's `MeshConfig` YAML) → `model::push::MeshSettings`, and its `configSources`.
//!
//! Metrics (via the `metrics` crate; nothing is recorded unless the binary installs a recorder):
//! `meshpilot_config_handler_retries{kind}` (counter), `meshpilot_config_file_errors` (counter, one per
//! rejected file content), `meshpilot_config_bad_files` (gauge).

pub mod aggregate;
pub mod configz;
pub mod file;
pub mod memory;
pub mod mesh;
pub mod mesh_networks;
pub mod parse;
pub mod queue;
pub mod source;
pub mod time;
pub mod watch;

pub use aggregate::Aggregate;
pub use configz::{configz, kubernetes_object};
pub use file::{FileSource, FileSourceOptions, FileSourceStatus, ObjectOrigin};
pub use memory::{Change, MemoryStore};
pub use queue::{Queue, QueueOptions, SyncBarrier};
pub use source::{Feed, ReadOnlySource};
pub use time::{Periodic, rfc3339};
