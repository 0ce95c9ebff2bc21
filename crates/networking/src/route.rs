//! VirtualService HTTP routes → Envoy routes. PLACEHOLDER: the interface is fixed, the body is to be
//! written.

use std::collections::BTreeMap;

use api::networking::virtual_service::{Destination, VirtualService};
use envoy_types::pb::envoy::config::route::v3::Route;
use model::ConfigKey;

use crate::Finding;

/// What route translation needs to know about the route table being built.
pub struct RouteContext<'a> {
    /// Port of the listener / route configuration being built (matches with `port` must equal it);
    /// 0 when the route table serves several ports.
    pub listener_port: u32,
    /// The gateways this route table is for: `["mesh"]` for a sidecar, `["ns/name", …]` for a gateway's
    /// servers. HTTP matches naming other `gateways` do not apply.
    pub gateways: &'a [String],
    /// Labels of the proxy asking (for `sourceLabels` matches).
    pub proxy_labels: &'a BTreeMap<String, String>,
    /// Namespace of the proxy asking (for `sourceNamespace` matches).
    pub proxy_namespace: &'a str,
    /// Resolves a destination of the VirtualService to its Envoy cluster name
    /// (`outbound|PORT|SUBSET|FQDN`), or `None` when the host is unknown (then the route is dropped with
    /// a finding, as Envoy would fail the request anyway).
    pub cluster_for: &'a dyn Fn(&Destination) -> Option<String>,
}

/// Translates the `http` routes of `vs` (object `key`) into Envoy routes, in order, for the route table
/// described by `ctx`. Routes Envoy would reject are left out and reported in `findings`.
pub fn translate_http_routes(
    vs: &VirtualService,
    key: &ConfigKey,
    ctx: &RouteContext<'_>,
    findings: &mut Vec<Finding>,
) -> Vec<Route> {
    let _ = (vs, key, ctx, findings);
    Vec::new()
}
