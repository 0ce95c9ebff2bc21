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
//! - [`input`]: [`Inputs`], the one door into the push model ([`Input`]: config, mesh settings, Gateway API
//!   cluster objects).
//! - [`push`]: which xDS types a change regenerates (Istio's per-type `*NeedsPush` tables).
//! - [`push_log`]: the last pushes (version, reasons, full or incremental, proxies, duration).
//! - [`server`]: [`DiscoveryServer`] (handlers, debounce, push, published snapshots).
//! - [`source`]: [`NetworkingSource`], the engine's `ResourceSource` over the generators.
//! - [`rest`]: [`rest::RestXds`], Envoy's REST-JSON xDS (polling discovery) over the same source;
//!   [`rest_router`]: its HTTP routes, for the HTTP port and (authenticated) the secure port.
//! - [`debug`]: istiod's debug types over xDS (`istio.io/debug/syncz`, `…/config_dump`, `istio.io/debug`)
//!   and the Envoy `ConfigDump` of a proxy.
//! - [`objects`]: per config object, the proxies it concerns and whether they ACKed it (`/debug/objectz`).
//! - [`metrics`]: metric names.
//!
//! The SDS secrets read from certificate files (`file-cert:`/`file-root:`) are served by
//! `sds::FileSecrets` (crate `meshpilot-sds`), which [`NetworkingSource`] answers SDS requests with;
//! the HTTP endpoints (`/ready`, `/debug/*`, `/metrics`) are in crate `meshpilot-http`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod debounce;
pub mod debug;
pub mod input;
pub mod metrics;
pub mod objects;
pub mod options;
pub mod push;
pub mod push_log;
pub mod rest;
pub mod rest_router;
pub mod secure;
pub mod server;
pub mod source;

pub use input::{Input, Inputs, SecretsChanged};
pub use options::{
    AdsOptions, DebounceOptions, EnvError, SecurityOptions, ServerOptions, trace_sampling_from_lookup,
};
pub use server::{DiscoveryServer, PushContexts};
pub use source::NetworkingSource;
