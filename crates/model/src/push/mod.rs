//! Istio's push model (`pilot/pkg/model`): the immutable snapshot the generators read
//! ([`PushContext`] with its indexes), the per-proxy view of it ([`SidecarScope`]), the proxy asking
//! ([`node::Proxy`], its identity from the xDS node id and metadata, and [`ProxyContext`], what the
//! generators read of it), and the change being pushed ([`PushRequest`], [`TriggerReason`]) with the rules
//! deciding which proxies it concerns ([`proxy_needs_push`], [`scope_needs_push`]).
//!
//! ```text
//!  ConfigStore + ServiceDiscovery ──► PushContext::new (config generation N)
//!                                        │  with_endpoints (EDS path: same generation, new endpoints)
//!  ProxyContext ──► PushContext::compute_sidecar_scope ──► SidecarScope (depends_on: push filtering)
//!  PushRequest (merged changes, the PushContext to generate from) ──► scope_needs_push(proxy, scopes)
//! ```
//!
//! Everything here is plain data and pure functions: no I/O, no clock, no locks. Caches of what is
//! derived per proxy live with the generators (`networking`), keyed by
//! [`PushContext::config_generation`].

pub mod authn;
pub mod cluster_local;
mod context;
pub mod converter;
mod delegate;
pub mod extension_provider;
pub mod extensions;
pub mod metrics;
pub mod node;
pub mod policy;
mod proxy;
mod request;
mod sidecar;
pub mod telemetry;
pub mod tracing;
mod virtual_service;

pub use authn::{EffectivePeerAuthentication, MtlsMode, PeerAuthenticationPolicy};
pub use context::{
    GATEWAY_SERVICE_ANNOTATION, GeneratedConfig, IndexedDestinationRule, IndexedGateway,
    IndexedVirtualService, MeshSettings, OutboundTrafficPolicy, PARENT_NAMESPACE_ANNOTATION, PushContext,
    ScopeKey,
};
pub use converter::{ConfigConverter, Converted, ObjectStatus};
pub use proxy::{InterceptionMode, PROXY_CONFIG_METADATA, ProxyContext, ProxyKind};
pub use request::{PushRequest, TriggerReason, kind_affects_proxy, proxy_needs_push, scope_needs_push};
pub use sidecar::{EgressListener, EgressPort, Imports, IngressListener, SidecarScope, UNIX_ADDRESS_PREFIX};
pub use virtual_service::{MESH_GATEWAY, resolve_gateway_name};
