//! AuthorizationPolicy → Envoy RBAC / ext_authz filters (Istio's `pilot/pkg/security/authz/builder`,
//! `model` and `matcher`).
//!
//! ```text
//!  policies (selected for the proxy by the caller, Istio's order)
//!     │ split by action: CUSTOM · AUDIT · DENY · ALLOW; `istio.io/dry-run` → shadow rules
//!     ▼
//!  per rule: Model (from/to/when → principals × permissions) ─► rbac.v3.Policy
//!     ▼
//!  filters in Istio's order: [rbac (CUSTOM shadow) + ext_authz] per provider, rbac AUDIT, rbac DENY, rbac ALLOW
//! ```
//!
//! Pure: values in, envoy-types filters out, plus [`Finding`]s for what was dropped.

use std::sync::Arc;

use envoy_types::pb::envoy::{
    config::listener::v3::Filter, extensions::filters::network::http_connection_manager::v3::HttpFilter,
};
use model::{Finding, push::extension_provider::ExtensionProvider, service::Service};

/// Name of the HTTP RBAC filter.
pub const HTTP_RBAC_FILTER: &str = "envoy.filters.http.rbac";
/// Name of the HTTP external authorization filter.
pub const HTTP_EXT_AUTHZ_FILTER: &str = "envoy.filters.http.ext_authz";
/// Name of the network (TCP) RBAC filter.
pub const NETWORK_RBAC_FILTER: &str = "envoy.filters.network.rbac";
/// Name of the network (TCP) external authorization filter.
pub const NETWORK_EXT_AUTHZ_FILTER: &str = "envoy.filters.network.ext_authz";

/// What the builder needs besides the policies: mesh settings and the service registry.
#[derive(Clone, Copy, Debug)]
pub struct AuthzContext<'a> {
    /// The mesh trust domain (`MeshSettings::trust_domain`), e.g. `cluster.local`.
    pub trust_domain: &'a str,
    /// Trust domain aliases (MeshConfig `trustDomainAliases`): principals in any of these domains (or
    /// `cluster.local`) are matched in all of them.
    pub trust_domain_aliases: &'a [String],
    /// MeshConfig `extensionProviders`, for CUSTOM policies.
    pub providers: &'a [ExtensionProvider],
    /// Every service of the push (Istio's `LookupCluster` for ext_authz services).
    pub services: &'a [Arc<Service>],
    /// `true` for router proxies (gateways).
    pub is_gateway: bool,
}

/// Filters built for one filter chain, in the order they go into it, and what could not be honoured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AuthzFilters<F> {
    /// The filters, in chain order (insert before the router / TCP proxy).
    pub filters: Vec<F>,
    /// Dropped rules or fields, and policies replaced by a deny-all.
    pub findings: Vec<Finding>,
}

/// HTTP filters (`envoy.filters.http.rbac` / `envoy.filters.http.ext_authz`) for the
/// AuthorizationPolicies `policies` applying to a proxy (already selected; root namespace first, then
/// the proxy's namespace, each by creation time). Non-AuthorizationPolicy configs are ignored.
pub fn build_http(policies: &[Arc<model::Config>], ctx: &AuthzContext<'_>) -> AuthzFilters<HttpFilter> {
    let _ = ctx;
    unimplemented_filters(policies)
}

/// Network filters (`envoy.filters.network.rbac` / `envoy.filters.network.ext_authz`) for a TCP
/// filter chain; HTTP-only fields are dropped as Istio does. Same inputs as [`build_http`].
pub fn build_tcp(policies: &[Arc<model::Config>], ctx: &AuthzContext<'_>) -> AuthzFilters<Filter> {
    let _ = ctx;
    unimplemented_filters(policies)
}

fn unimplemented_filters<F>(policies: &[Arc<model::Config>]) -> AuthzFilters<F> {
    AuthzFilters {
        filters: Vec::new(),
        findings: policies
            .iter()
            .map(|p| Finding {
                severity: model::finding::Severity::Unsupported,
                config: Some(p.key()),
                path: String::new(),
                resource: String::new(),
                message: "AuthorizationPolicy translation is not implemented yet".into(),
            })
            .collect(),
    }
}
