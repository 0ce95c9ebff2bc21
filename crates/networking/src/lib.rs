//! Istio config and services → Envoy resources: the generators.
//!
//! ```text
//!  model::push::PushContext (immutable snapshot, indexes) ─┐
//!  GenerationCache (scopes, route tables, gateway servers) ┴► Snapshot
//!                                          │
//!  model::push::ProxyContext (who asks) ───┤
//!                                          ▼
//!        cluster (CDS) · endpoint (EDS) · listener (LDS) · rds (RDS assembly)
//!                                          │ uses
//!                                          ▼
//!                route (VirtualService HTTP routes → Envoy routes) · check (pre-send validation)
//! ```
//!
//! Everything here is pure: values in, Envoy messages (envoy-types) out; no I/O, no clock. Names follow
//! Istio (`outbound|PORT|SUBSET|HOST`, `inbound|PORT||`, `0.0.0.0_PORT`, route configs `PORT` and
//! `http.PORT`, …). An Istio object that would produce a resource Envoy rejects is dropped from the output
//! and reported as a [`model::Finding`]; it never takes the rest of its route configuration or listener down.
//!
//! HTTP filter chain contract (every HTTP connection manager built here): the proxy's security filters
//! first on inbound chains and gateway servers ([`policy`]: ext_authz, jwt_authn, RBAC) with the
//! WasmPlugin / TrafficExtension filters between them by phase ([`extension`]), then
//! `envoy.filters.http.fault`, `envoy.filters.http.cors`, and `envoy.filters.http.router` last. Per-route fault and CORS settings are
//! set by [`route`] in `typed_per_filter_config` under those filter names.

pub mod access_log;
pub mod authz;
pub mod built;
pub mod cache;
pub mod check;
pub mod cluster;
mod convert;
pub mod credentials;
pub mod debug;
pub mod endpoint;
mod envoy_filter;
pub mod extension;
pub mod filters;
mod gateway;
pub mod inbound;
pub mod jwt;
pub mod listener;
mod locality;
pub mod mtls;
pub mod naming;
pub mod nds;
pub mod policy;
pub mod rds;
pub mod route;
pub mod sds;
mod split_horizon;
pub mod stats;
mod tls;
pub mod tracing;
pub use tls::file_secret_references;

pub use built::Built;
pub use cache::{GenerationCache, Snapshot};
