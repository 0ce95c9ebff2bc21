//! meshpilot's DiscoveryServer (Istio's `pilot/pkg/xds/discovery.go`): config and registry events →
//! [`PushRequest`]s → debounce → one merged push at a time, each building a new immutable
//! `networking::PushContext` → the connections (through `xds::ConnectionRegistry`) whose proxies the
//! change can matter to, regenerating only the xDS types it affects.
//!
//! - [`options`]: `PILOT_DEBOUNCE_AFTER` / `PILOT_DEBOUNCE_MAX` / `PILOT_ENABLE_EDS_DEBOUNCE`.
//! - [`push`]: [`PushRequest`], trigger reasons, which proxies and types a change affects.
//! - [`server`]: [`DiscoveryServer`] (handlers, debounce, push).
//! - [`source`]: [`NetworkingSource`], the engine's `ResourceSource` over the generators.
//! - [`mesh`]: the mesh config file (`--mesh-config`).
//! - [`metrics`]: metric names.
//!
//! The SDS secrets read from certificate files (`file-cert:`/`file-root:`) are served by
//! `sds::FileSecrets` (crate `meshpilot-sds`), which [`NetworkingSource`] answers SDS requests with;
//! the HTTP endpoints (`/ready`, `/debug/*`, `/metrics`) are in crate `meshpilot-http`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod mesh;
pub mod metrics;
pub mod options;
pub mod push;
pub mod server;
pub mod source;

pub use options::{DebounceOptions, EnvError};
pub use push::{PushRequest, TriggerReason};
pub use server::DiscoveryServer;
pub use source::NetworkingSource;
