//! The security policy filters of one proxy: AuthorizationPolicy (RBAC, ext_authz) and
//! RequestAuthentication (jwt_authn), in the order istiod puts them into inbound HTTP connection
//! managers and TCP chains (`pilot/pkg/networking/core/listener_inbound.go` and the gateway builder):
//!
//! | chain | filters before the terminal one |
//! |---|---|
//! | HTTP (connection manager's HTTP filters, before fault/CORS/router) | CUSTOM (`ext_authz` and its shadow RBAC), `jwt_authn`, then AUDIT, DENY, ALLOW RBAC |
//! | TCP (network filters before `tcp_proxy`) | CUSTOM (`ext_authz`), AUDIT, DENY, ALLOW RBAC; HTTP-only rule fields dropped |
//!
//! The filters are the same for every inbound chain of a sidecar (Istio applies policies per
//! workload, not per port: port conditions are in the rules) and for every server of a gateway.

use std::sync::Arc;

use api::{security::authorization_policy::authorization_policy::Action, spec::Spec};
use envoy_types::pb::envoy::{
    config::listener::v3::Filter,
    extensions::filters::network::http_connection_manager::v3::{HttpConnectionManager, HttpFilter},
};
use model::{Config, Finding, push::ProxyContext};

use crate::{
    Snapshot,
    authz::{AuthzContext, build_http, build_tcp},
    cache::SecurityKey,
    extension::PhaseFilters,
    jwt::{build_gateway_jwt_filter, build_jwt_filter},
};

/// The security filters of one proxy (empty when no policy applies to it).
#[derive(Clone, Debug, Default)]
pub struct SecurityFilters {
    /// HTTP filters placed first in every HTTP connection manager of the proxy's inbound chains
    /// (sidecars) or servers (gateways).
    pub http: Vec<HttpFilter>,
    /// How many of `http` are CUSTOM authorization filters (the first ones).
    pub http_custom: usize,
    /// How many of `http` follow those and precede the RBAC filters (`jwt_authn`: 0 or 1).
    pub http_authn: usize,
    /// Network filters placed before `tcp_proxy` on TCP chains.
    pub tcp: Vec<Filter>,
    /// What could not be translated (reported in `/debug/configstatusz`).
    pub findings: Vec<Finding>,
}

impl SecurityFilters {
    /// Puts the HTTP filters in front of `hcm`'s (fault, CORS, router stay last).
    pub fn apply_http(&self, hcm: &mut HttpConnectionManager) {
        self.apply_http_with(hcm, &PhaseFilters::default());
    }

    /// Puts the HTTP filters and the extension filters `extensions` in front of `hcm`'s, in Istio's
    /// order: CUSTOM, AUTHN extensions, `jwt_authn`, AUTHZ extensions, RBAC, STATS extensions,
    /// UNSPECIFIED extensions ([`crate::extension`]).
    pub fn apply_http_with(&self, hcm: &mut HttpConnectionManager, extensions: &PhaseFilters) {
        if self.http.is_empty() && extensions.is_empty() {
            return;
        }
        let (custom, rest) = self.http.split_at(self.http_custom.min(self.http.len()));
        let (authn, rbac) = rest.split_at(self.http_authn.min(rest.len()));
        let front: Vec<HttpFilter> = custom
            .iter()
            .chain(&extensions.authn)
            .chain(authn)
            .chain(&extensions.authz)
            .chain(rbac)
            .chain(&extensions.stats)
            .chain(&extensions.unspecified)
            .cloned()
            .collect();
        // Behind Istio's peer metadata filter when it leads ([`crate::stats`]).
        let at = usize::from(crate::stats::leads_with_metadata_exchange(hcm));
        hcm.http_filters.splice(at..at, front);
    }
}

fn is_custom(config: &Arc<Config>) -> bool {
    matches!(&config.spec, Spec::AuthorizationPolicy(p) if p.action == Action::Custom as i32)
}

/// The security filters of `proxy` under `push` (the table in the module documentation); computed
/// once per config generation and set of selected policies, then shared.
pub fn security_filters(push: &Snapshot, proxy: &ProxyContext) -> Arc<SecurityFilters> {
    security_for(push, proxy).1
}

/// [`security_filters`] with the key they are shared under (`None`: no policy selects the proxy, and
/// the filters are empty).
pub(crate) fn security_for(
    push: &Snapshot,
    proxy: &ProxyContext,
) -> (Option<SecurityKey>, Arc<SecurityFilters>) {
    if !push.has_security_policies() {
        return (None, Arc::default());
    }
    let authz = push.authorization_policies(proxy);
    let authn = push.request_authentications(proxy);
    if authz.is_empty() && authn.is_empty() {
        return (None, Arc::default());
    }
    let gateway = proxy.kind == model::push::ProxyKind::Router;
    let key = SecurityKey {
        gateway,
        authorization: authz.iter().map(|c| c.key()).collect(),
        authentication: authn.iter().map(|c| c.key()).collect(),
    };
    let filters = push.security_filters(key.clone(), || build(push, &authz, &authn, gateway));
    (Some(key), filters)
}

fn build(push: &Snapshot, authz: &[Arc<Config>], authn: &[Arc<Config>], gateway: bool) -> SecurityFilters {
    let mesh = push.mesh();
    let ctx = AuthzContext {
        trust_domain: &mesh.trust_domain,
        trust_domain_aliases: &mesh.trust_domain_aliases,
        providers: &mesh.extension_providers,
        services: push.services(),
        is_gateway: gateway,
    };
    let (custom, others): (Vec<_>, Vec<_>) = authz.iter().cloned().partition(is_custom);
    let mut out = SecurityFilters::default();
    let custom_http = build_http(&custom, &ctx);
    out.http.extend(custom_http.filters);
    out.http_custom = out.http.len();
    out.findings.extend(custom_http.findings);
    let jwt = if gateway {
        build_gateway_jwt_filter(authn, push.jwks())
    } else {
        build_jwt_filter(authn, push.jwks())
    };
    out.http.extend(jwt.filter);
    out.http_authn = out.http.len() - out.http_custom;
    out.findings.extend(jwt.findings);
    let rbac_http = build_http(&others, &ctx);
    out.http.extend(rbac_http.filters);
    out.findings.extend(rbac_http.findings);
    let tcp = build_tcp(authz, &ctx);
    out.tcp = tcp.filters;
    // The TCP builder reports the same untranslatable rules as the HTTP one; add only its own
    // findings (HTTP-only fields dropped on TCP chains).
    for f in tcp.findings {
        if !out.findings.contains(&f) {
            out.findings.push(f);
        }
    }
    out
}
