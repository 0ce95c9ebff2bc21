//! meshpilot's DiscoveryServer (Istio's `pilot/pkg/xds/discovery.go`): config and registry events →
//! `model::push::PushRequest`s → debounce → one merged push at a time, each building a new immutable
//! `model::push::PushContext`, published to the xDS source → the connections (through
//! `xds::ConnectionRegistry`) whose proxies the change can matter to, regenerating only the xDS types it
//! affects.
//!
//! ```text
//!  source (files, kube) → store → event → PushRequest → PushContext → generator → stream
//! ```
//!
//! - [`options`]: `PILOT_DEBOUNCE_AFTER` / `PILOT_DEBOUNCE_MAX` / `PILOT_ENABLE_EDS_DEBOUNCE`.
//! - [`push`]: which xDS types a change regenerates (Istio's per-type `*NeedsPush` tables).
//! - [`server`]: [`DiscoveryServer`] (handlers, debounce, push, published snapshots).
//! - [`source`]: [`NetworkingSource`], the engine's `ResourceSource` over the generators.
//! - [`file_secrets`]: [`FileSecrets`], the SDS secrets `file-cert:`/`file-root:` read from files under
//!   `--file-secret-root`, re-pushed when the files change; [`key_match`] checks a key belongs to its
//!   certificate.
//! - [`mesh`]: the mesh config file (`--mesh-config`).
//! - [`http`]: `/ready`, `/debug/*`, `/metrics` routers (axum).
//! - [`metrics`]: metric names.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod file_secrets;
pub mod http;
pub mod key_match;
pub mod mesh;
pub mod metrics;
pub mod options;
pub mod push;
pub mod server;
pub mod source;

pub use file_secrets::FileSecrets;
pub use options::{DebounceOptions, EnvError, FileSecretOptions};
pub use server::{DiscoveryServer, Snapshots};
pub use source::NetworkingSource;
