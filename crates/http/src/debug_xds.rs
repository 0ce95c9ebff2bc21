//! istiod's debug types over xDS ([`discovery::debug`]) answered from the debug handlers' data, with
//! their authorisation: what `istioctl proxy-status`, `istioctl x version` and `istioctl x
//! internal-debug` read on the secure xDS port (15012).
//!
//! - No verified identity (the plaintext port, or `XDS_AUTH=false`): the stream ends with
//!   `Unauthenticated` "authentication required" (istiod's `ENABLE_DEBUG_ENDPOINT_AUTH`).
//! - A caller of the system namespace gets everything; one of another namespace (the rule of
//!   [`crate::access::grant_for`]) gets syncz and config dumps of its own namespace's proxies only, and
//!   of the generic type only `config_dump`, `edsz` and `ndsz` paths (else `PermissionDenied` "the
//!   debug info is not available for current identity: …", istiod's wording).

use std::sync::Arc;

use discovery::debug::{DebugGenerator, DebugRequest, DumpOptions, client_config, control_plane_identifier};
use envoy_types::pb::google::protobuf::Any;
use xds::{Generated, Resource, SourceError, type_url};

use crate::{
    DebugState,
    access::{Grant, grant_for},
    proxies,
};

/// The [`DebugGenerator`] of the binary: install it with
/// [`discovery::DiscoveryServer::set_debug_generator`].
#[derive(Debug, Clone)]
pub struct XdsDebug {
    state: DebugState,
}

impl XdsDebug {
    /// Answers from `state` (the HTTP debug handlers' state: its access settings decide who reads what).
    pub fn new(state: DebugState) -> Self {
        XdsDebug { state }
    }

    fn syncz(&self, grant: &Grant) -> Generated {
        let mut conns: Vec<_> = proxies(&self.state.server)
            .into_iter()
            .filter(|c| grant.allows_namespace(&c.proxy.config_namespace))
            .collect();
        conns.sort_by(|a, b| a.id.cmp(&b.id));
        let resources = conns.iter().map(|c| Resource::new(c.proxy.id.clone(), &client_config(c))).collect();
        Generated::full(String::new(), resources).with_control_plane(control_plane_identifier(
            &self.state.control_plane_id,
            env!("CARGO_PKG_VERSION"),
        ))
    }

    /// istiod answers a config dump it cannot make with no resources (the client times out or tries
    /// another instance); so does this, logging why. The dump is `/debug/config_dump`'s
    /// ([`crate::istiod_debug::proxy_config_dump`]: the same lookup, namespace rule and generation bound).
    fn config_dump(&self, names: &std::collections::BTreeSet<String>, grant: &Grant) -> Generated {
        let empty = Generated::full(String::new(), Vec::new());
        let [proxy_id] = names.iter().collect::<Vec<_>>()[..] else {
            tracing::info!("{} with {} resource names", type_url::DEBUG_CONFIG_DUMP, names.len());
            return empty;
        };
        let query = crate::istiod_debug::Params::from([("proxyID".to_string(), proxy_id.clone())]);
        match crate::istiod_debug::proxy_config_dump(&self.state, &query, grant, DumpOptions::default()) {
            Ok(dump) => Generated::full(
                String::new(),
                dump.configs
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| Resource::from_any(i.to_string(), c))
                    .collect(),
            ),
            Err(reply) => {
                tracing::info!(
                    "{} for {proxy_id:?} failed: {}",
                    type_url::DEBUG_CONFIG_DUMP,
                    String::from_utf8_lossy(&reply.body).trim_end()
                );
                empty
            }
        }
    }
}

impl DebugGenerator for XdsDebug {
    fn generate(&self, request: &DebugRequest<'_>) -> Result<Generated, SourceError> {
        let identities = &request.caller.verified_identities;
        if identities.is_empty() {
            tracing::warn!(
                proxy = %request.caller.id,
                "proxy is not authorized to receive debug info: connect over the secure port and authenticate"
            );
            return Err(SourceError::Unauthenticated("authentication required".into()));
        }
        let namespaces: Vec<String> = identities.iter().map(|i| i.namespace.clone()).collect();
        let grant = grant_for(&namespaces, &self.state.access);
        match request.type_url {
            type_url::DEBUG_SYNCZ => Ok(self.syncz(&grant)),
            type_url::DEBUG_CONFIG_DUMP => Ok(self.config_dump(request.names, &grant)),
            type_url::DEBUG => {
                let [name] = request.names.iter().collect::<Vec<_>>()[..] else {
                    return Err(SourceError::InvalidRequest("exactly one debug request is required".into()));
                };
                let path = name.split('?').next().unwrap_or_default();
                if grant != Grant::All && !matches!(path, "config_dump" | "edsz" | "ndsz") {
                    return Err(SourceError::Denied(format!(
                        "the debug info is not available for current identity: {:?}",
                        identities[0].identity
                    )));
                }
                let (_, body) =
                    crate::istiod_debug::serve_debug_path(&self.state, &format!("/debug/{name}"), &grant);
                let any = Any { type_url: type_url::DEBUG.to_string(), value: body };
                Ok(Generated::full(String::new(), vec![Resource::from_any(name.clone(), any)]))
            }
            // Other `istio.io/debug/…` types istiod does not serve either: nothing.
            _ => Ok(Generated::full(String::new(), Vec::new())),
        }
    }
}

/// Installs [`XdsDebug`] over `state` on its server.
pub fn install(state: &DebugState) {
    state.server.set_debug_generator(Arc::new(XdsDebug::new(state.clone())));
}
