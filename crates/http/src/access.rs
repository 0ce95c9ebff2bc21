//! Who may call the debug endpoints, as istiod guards them (`allowAuthenticatedOrLocalhost` in
//! `pilot/pkg/xds/debug.go`, and `ENABLE_DEBUG_ENDPOINT_AUTH` in its xDS debug generator):
//!
//! - `/ready` answers everyone (the kubelet probes it from the node's address); so do the REST-JSON
//!   xDS paths, which are merged into the router outside this guard ([`crate::rest`]);
//! - a caller on the loopback address (`127.0.0.1`, `::1`) gets every handler: `meshpilot` CLI
//!   commands run beside the control plane, `kubectl port-forward` arrives there too;
//! - anyone else must authenticate as on the secure xDS port, with a Kubernetes service-account
//!   token (`Authorization: Bearer …`, reviewed by the API server for Istio's audiences); without a
//!   token, or without a cluster to review it, the answer is `401`;
//! - an authenticated caller of the system namespace (`POD_NAMESPACE`, `istio-system`) gets every
//!   handler; one of another namespace only `/debug/config_dump`, `/debug/edsz` and `/debug/ndsz`
//!   of proxies of its own namespace (`403` otherwise), unless `ENABLE_DEBUG_ENDPOINT_AUTH=false` lets every authenticated caller
//!   see everything, as istiod.
//!
//! Stricter than istiod in one point: istiod counts all of `127.0.0.0/8` as local, meshpilot only the
//! two addresses a local client uses by default. See docs/SECURITY.md.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
};

use axum::{
    extract::{ConnectInfo, Request, State},
    http::StatusCode,
    middleware::Next,
    response::{IntoResponse, Response},
};
use security::Authenticator;

/// The guard's settings (see the module doc).
#[derive(Clone, Debug)]
pub struct DebugAccess {
    /// Authenticates callers that are not on loopback (`None`: no cluster, so only loopback callers
    /// are served).
    pub authenticator: Option<Arc<Authenticator>>,
    /// The control plane's namespace: its callers see everything.
    pub system_namespace: String,
    /// istiod's `ENABLE_DEBUG_ENDPOINT_AUTH` (default `true`): callers of other namespaces see only
    /// their own proxies' `config_dump`, `edsz` and `ndsz`.
    pub namespace_scoped: bool,
    /// istiod's `UNSAFE_ENABLE_ADMIN_ENDPOINTS` (default `false`): `/debug/force_disconnect` is served
    /// (and listed) only when set.
    pub unsafe_admin_endpoints: bool,
}

impl Default for DebugAccess {
    /// Loopback only: no authenticator, system namespace `istio-system`, scoped.
    fn default() -> Self {
        DebugAccess {
            authenticator: None,
            system_namespace: "istio-system".into(),
            namespace_scoped: true,
            unsafe_admin_endpoints: false,
        }
    }
}

/// What a caller may see, put into the request's extensions by [`guard`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grant {
    /// Every handler.
    All,
    /// Only the paths of [`namespace_path`], for proxies in these namespaces.
    Namespaces(Vec<String>),
}

impl Grant {
    /// `true` if a proxy of `namespace` may be shown.
    pub fn allows_namespace(&self, namespace: &str) -> bool {
        match self {
            Grant::All => true,
            Grant::Namespaces(namespaces) => namespaces.iter().any(|n| n == namespace),
        }
    }
}

/// `true` for a caller on the loopback address: `127.0.0.1`, `::1`, or `::ffff:127.0.0.1`.
pub fn is_local(peer: IpAddr) -> bool {
    match peer {
        IpAddr::V4(v4) => v4 == Ipv4Addr::LOCALHOST,
        IpAddr::V6(v6) => v6 == Ipv6Addr::LOCALHOST || v6.to_ipv4_mapped() == Some(Ipv4Addr::LOCALHOST),
    }
}

/// What an authenticated caller whose identities are in `namespaces` may see (a pure rule).
pub fn grant_for(namespaces: &[String], access: &DebugAccess) -> Grant {
    if !access.namespace_scoped || namespaces.contains(&access.system_namespace) {
        Grant::All
    } else {
        Grant::Namespaces(namespaces.to_vec())
    }
}

/// `true` if `path` is served to a caller with a namespace grant (istiod's
/// `activeNamespaceDebuggers` under `ENABLE_DEBUG_ENDPOINT_AUTH`: `config_dump`, `ndsz` and `edsz`;
/// plus meshpilot's summary of `config_dump`).
pub fn namespace_path(path: &str) -> bool {
    matches!(path, "/debug/config_dump" | "/debug/edsz" | "/debug/ndsz" | "/debug/config_summary")
}

/// The middleware of the `--http-addr` router (see the module doc). Needs the connection's
/// [`ConnectInfo`] (put there by [`crate::serve::serve`]); a request without it is treated as remote.
pub async fn guard(State(access): State<Arc<DebugAccess>>, mut request: Request, next: Next) -> Response {
    if request.uri().path() == "/ready" {
        return next.run(request).await;
    }
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    if peer.is_some_and(|p| is_local(p.ip())) {
        request.extensions_mut().insert(Grant::All);
        return next.run(request).await;
    }
    let Some(authenticator) = &access.authenticator else {
        return unauthenticated(
            peer,
            "no cluster is configured to review tokens; only loopback callers are served",
        );
    };
    let metadata = tonic::metadata::MetadataMap::from_headers(request.headers().clone());
    let caller = match authenticator.authenticate(&metadata, None).await {
        Ok(caller) => caller,
        Err(err) => return unauthenticated(peer, &err.to_string()),
    };
    let namespaces: Vec<String> = caller.identities.iter().map(|i| i.namespace.clone()).collect();
    let grant = grant_for(&namespaces, &access);
    if grant != Grant::All && !namespace_path(request.uri().path()) {
        tracing::info!(peer = ?peer, path = %request.uri().path(), ?namespaces, "debug request refused: not of the system namespace");
        return (
            StatusCode::FORBIDDEN,
            "callers outside the control plane's namespace may only read /debug/config_dump, /debug/edsz \
             and /debug/ndsz of their own namespace's proxies\n",
        )
            .into_response();
    }
    request.extensions_mut().insert(grant);
    next.run(request).await
}

fn unauthenticated(peer: Option<SocketAddr>, reason: &str) -> Response {
    tracing::info!(peer = ?peer, reason, "debug request refused: not authenticated");
    // As istiod and the xDS port: no detail for the caller.
    (StatusCode::UNAUTHORIZED, "authentication failure\n").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_standard_loopback_addresses_are_local() {
        assert!(is_local("127.0.0.1".parse().unwrap()));
        assert!(is_local("::1".parse().unwrap()));
        assert!(is_local("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_local("127.0.0.2".parse().unwrap()));
        assert!(!is_local("10.1.2.3".parse().unwrap()));
        assert!(!is_local("::".parse().unwrap()));
    }

    #[test]
    fn system_namespace_callers_see_everything_others_their_namespace() {
        let access = DebugAccess::default();
        assert_eq!(grant_for(&["istio-system".into()], &access), Grant::All);
        let grant = grant_for(&["shop".into()], &access);
        assert_eq!(grant, Grant::Namespaces(vec!["shop".into()]));
        assert!(grant.allows_namespace("shop") && !grant.allows_namespace("bank"));
        let open = DebugAccess { namespace_scoped: false, ..DebugAccess::default() };
        assert_eq!(grant_for(&["shop".into()], &open), Grant::All);
        assert!(namespace_path("/debug/config_dump") && !namespace_path("/debug/configz"));
        assert!(
            namespace_path("/debug/edsz") && namespace_path("/debug/ndsz") && !namespace_path("/debug/ecdsz")
        );
    }
}
