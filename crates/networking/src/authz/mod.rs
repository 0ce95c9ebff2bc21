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
//!
//! Differences from Istio (everything else follows its builder; the 20 builder goldens agree as
//! decoded protos, `tests/it/peer/authz_golden.rs`):
//! - fail closed: Istio skips a rule it cannot translate (unknown `when` key, malformed IP / CIDR,
//!   port, header or claim key) — which fails *open* for DENY — or, for DENY/AUDIT, silently drops the
//!   bad value. Here such a rule of an enforced ALLOW, DENY or CUSTOM policy becomes a match-all policy
//!   under its Istio name in the DENY filter: the proxy denies every request until it is fixed. Rules
//!   of dry-run and AUDIT policies are skipped as in Istio. Each case is a [`Finding`] with the field
//!   path;
//! - a `when: source.principal` condition of a rule with several `from` entries is migrated to the
//!   trust domain aliases once (Istio migrates the shared condition once per `from`, repeating
//!   principals in the OR: same matches, bigger config).
//!
//! Kept from Istio (reported as findings where Istio only logs): CUSTOM policies with an unusable
//! provider deny the requests they match (`-deny-due-to-bad-CUSTOM-action`); more than one CUSTOM
//! provider per workload is refused the same way (`PILOT_ENABLE_MULTIPLE_CUSTOM_AUTHZ_PROVIDERS` off);
//! a CUSTOM policy with an HTTP provider is not applied on TCP chains. Not kept: Istio puts dry-run
//! CUSTOM rules into the enforced `rules` (action DENY) of the marking RBAC filter (its comment says
//! this only marks requests; Envoy's RBAC enforces `rules`, so the "dry run" denies). Validation refuses
//! the annotation on CUSTOM policies; should one get through, it is left out with a finding.

mod builder;
pub use builder::{DRY_RUN_ALLOW_STAT_PREFIX, DRY_RUN_ANNOTATION, DRY_RUN_DENY_STAT_PREFIX, TCP_STAT_PREFIX};
pub mod extauthz;
pub mod matcher;
pub mod model;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use ::model::{Finding, push::extension_provider::ExtensionProvider, service::Service};
use envoy_types::pb::envoy::{
    config::listener::v3::Filter, extensions::filters::network::http_connection_manager::v3::HttpFilter,
};

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
    /// `true` for router proxies (gateways). Istio's builder builds the same filters for gateways and
    /// sidecars; kept for the caller's and future use.
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
/// the proxy's namespace, each by creation time). Other kinds of config are ignored.
///
/// Order, as Istio's builders run: per CUSTOM provider (sorted by name) an RBAC filter whose shadow
/// rules mark the requests to check and the `ext_authz` filter; then one RBAC filter each for AUDIT,
/// DENY and ALLOW policies (when there are any), dry-run policies (`istio.io/dry-run: "true"`) in its
/// shadow rules. Fail-closed beyond Istio: a rule that cannot be translated (unknown `when` key,
/// malformed IP, port or key) of an enforced ALLOW, DENY or CUSTOM policy becomes a match-all policy
/// under the rule's name in the DENY filter (created if needed), with a [`Finding`]; a CUSTOM policy
/// whose provider is unusable denies the requests it matches, as Istio does.
pub fn build_http(policies: &[Arc<::model::Config>], ctx: &AuthzContext<'_>) -> AuthzFilters<HttpFilter> {
    builder::build(policies, ctx, builder::Chain::Http)
}

/// Network filters (`envoy.filters.network.rbac` / `envoy.filters.network.ext_authz`) for a TCP
/// filter chain; same inputs and order as [`build_http`]. HTTP-only fields (hosts, methods, paths,
/// request principals, request headers and JWT claims) are dropped as Istio does: an ALLOW rule using
/// one is left out (it can never match), in DENY / AUDIT / CUSTOM rules the field is ignored (the rule
/// matches more); each with a [`Finding`]. CUSTOM policies with an HTTP provider are not applied on TCP
/// (Istio), reported as a [`Finding`].
pub fn build_tcp(policies: &[Arc<::model::Config>], ctx: &AuthzContext<'_>) -> AuthzFilters<Filter> {
    builder::build(policies, ctx, builder::Chain::Tcp)
}
