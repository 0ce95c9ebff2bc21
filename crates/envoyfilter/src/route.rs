//! ROUTE_CONFIGURATION, VIRTUAL_HOST and HTTP_ROUTE patches (Istio's `rc_patch.go`).
//!
//! Order, as istiod: ROUTE_CONFIGURATION MERGEs, then for each virtual host VIRTUAL_HOST patches
//! (REMOVE, MERGE, REPLACE) and that host's HTTP_ROUTE patches (per route REMOVE / MERGE, then ADD,
//! INSERT_BEFORE / INSERT_AFTER / INSERT_FIRST), then VIRTUAL_HOST ADD.
//!
//! Matching: outside gateways a route configuration `name` and `portNumber` (the name's port:
//! `8080`, or the port of an `inbound|8080||…` name); on gateways `name`, `portNumber`, `portName` and
//! `gateway` (`namespace/name`) from the RDS name (`http.8080`, `https.443.https.gw.ns`). On gateways
//! `portNumber` is compared, as istiod's `GatewayPortMap`, with the port numbers of the Gateway servers
//! whose route configuration it is ([`RouteScope::server_ports`]: an `http.8080` that a Service maps
//! from server port 80 matches `portNumber: 80`, not 8080); without servers, with the name's port.
//! Virtual hosts by `name` and a `domainName` among their domains; routes by `name` and `action`
//! (ROUTE, REDIRECT, DIRECT_RESPONSE).
//!
//! istiod's quirks kept: INSERT_FIRST with a route match inserts first only when some route matches;
//! INSERT_BEFORE without a route match inserts first, INSERT_AFTER without one appends.

use api::networking::envoy_filter::{
    ApplyTo, PatchContext,
    patch::Operation,
    route_configuration_match::{RouteMatch as RouteMatchSpec, route_match::Action},
};
use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost, route};

use crate::{CompiledPatch, Findings, ProxyPatches, listener::merge_value};

/// Where a route configuration is patched: the patch context and, on gateways, the port numbers
/// (`spec.servers[].port.number`) of the Gateway servers that use it.
#[derive(Clone, Copy, Debug)]
pub struct RouteScope<'a> {
    /// SIDECAR_INBOUND, SIDECAR_OUTBOUND or GATEWAY.
    pub context: PatchContext,
    /// Istio's `GatewayPortMap` entry of this route configuration (its name's port → the servers'
    /// ports); empty outside gateways and for names no server produces.
    pub server_ports: &'a [u32],
}

impl RouteScope<'_> {
    /// A scope with no gateway servers (sidecars).
    pub fn of(context: PatchContext) -> RouteScope<'static> {
        RouteScope { context, server_ports: &[] }
    }
}

/// Applies the route patches of `scope` to `rc` (Istio's `ApplyRouteConfigurationPatches`).
pub fn patch_route_configuration(
    scope: RouteScope<'_>,
    patches: &ProxyPatches,
    rc: &mut RouteConfiguration,
    findings: &mut Findings,
) {
    let ctx = scope.context;
    let name = rc.name.clone();
    for rp in patches.of(ApplyTo::RouteConfiguration) {
        if rp.is_merge() && rp.context_matches(ctx) && route_configuration_match(scope, rc, rp) {
            merge_value(rp, rc, &name, findings);
        }
    }
    let mut hosts = std::mem::take(&mut rc.virtual_hosts);
    let mut removed = vec![false; hosts.len()];
    for (i, vh) in hosts.iter_mut().enumerate() {
        removed[i] = patch_virtual_host(scope, patches, rc, vh, findings);
    }
    let mut kept: Vec<VirtualHost> =
        hosts.into_iter().zip(removed).filter(|(_, gone)| !gone).map(|(vh, _)| vh).collect();
    for rp in patches.of(ApplyTo::VirtualHost) {
        if rp.operation == Operation::Add
            && rp.context_matches(ctx)
            && route_configuration_match(scope, rc, rp)
            && let Some(v) = &rp.value
        {
            kept.push(v.typed());
        }
    }
    rc.virtual_hosts = kept;
}

/// One virtual host; `true` when a patch removes it.
fn patch_virtual_host(
    scope: RouteScope<'_>,
    patches: &ProxyPatches,
    rc: &RouteConfiguration,
    vh: &mut VirtualHost,
    findings: &mut Findings,
) -> bool {
    for rp in patches.of(ApplyTo::VirtualHost) {
        if !rp.context_matches(scope.context)
            || !route_configuration_match(scope, rc, rp)
            || !virtual_host_match(vh, rp)
        {
            continue;
        }
        match rp.operation {
            Operation::Remove => return true,
            Operation::Merge | Operation::MergeAndReplaceList => merge_value(rp, vh, &rc.name, findings),
            Operation::Replace => {
                if let Some(v) = &rp.value {
                    *vh = v.typed();
                }
            }
            _ => {}
        }
    }
    patch_http_routes(scope, patches, rc, vh, findings);
    false
}

fn route_match_spec(rp: &CompiledPatch) -> Option<&RouteMatchSpec> {
    rp.matches.route_configuration.as_ref()?.vhost.as_ref()?.route.as_ref()
}

fn patch_http_routes(
    scope: RouteScope<'_>,
    patches: &ProxyPatches,
    rc: &RouteConfiguration,
    vh: &mut VirtualHost,
    findings: &mut Findings,
) {
    let selects = |rp: &CompiledPatch, vh: &VirtualHost| {
        rp.context_matches(scope.context)
            && route_configuration_match(scope, rc, rp)
            && virtual_host_match(vh, rp)
    };
    let mut routes: Vec<Option<Route>> = std::mem::take(&mut vh.routes).into_iter().map(Some).collect();
    for slot in &mut routes {
        for rp in patches.of(ApplyTo::HttpRoute) {
            let Some(r) = slot.as_mut() else { break };
            if !selects(rp, vh) || !route_match(r, rp) {
                continue;
            }
            if rp.operation == Operation::Remove {
                *slot = None;
                break;
            }
            if rp.is_merge() {
                merge_value(rp, r, &rc.name, findings);
            }
        }
    }
    let mut routes: Vec<Route> = routes.into_iter().flatten().collect();
    for rp in patches.of(ApplyTo::HttpRoute) {
        if !selects(rp, vh) {
            continue;
        }
        let Some(value) = &rp.value else { continue };
        let has_match = route_match_spec(rp).is_some();
        let position = || routes.iter().position(|r| route_match(r, rp));
        match rp.operation {
            Operation::Add => routes.push(value.typed()),
            Operation::InsertAfter if !has_match => routes.push(value.typed()),
            Operation::InsertAfter => {
                if let Some(i) = position() {
                    routes.insert(i + 1, value.typed());
                }
            }
            Operation::InsertBefore if !has_match => routes.insert(0, value.typed()),
            Operation::InsertBefore => {
                if let Some(i) = position() {
                    routes.insert(i, value.typed());
                }
            }
            Operation::InsertFirst if !has_match || position().is_some() => routes.insert(0, value.typed()),
            _ => {}
        }
    }
    vh.routes = routes;
}

/// The port in a route configuration name outside gateways (Istio's `getListenerPortFromName`).
fn port_from_name(name: &str) -> u32 {
    if name.starts_with("inbound|") {
        name.split('|').nth(1).and_then(|p| p.parse().ok()).unwrap_or(0)
    } else {
        name.parse().unwrap_or(0)
    }
}

/// Istio's `ParseGatewayRDSRouteName`: (port, port name, `namespace/name`) of `http.8080` or
/// `https.443.portname.gateway.namespace`.
pub fn parse_gateway_route_name(name: &str) -> (u32, &str, String) {
    if let Some(port) = name.strip_prefix("http.") {
        return (port.parse().unwrap_or(0), "", String::new());
    }
    if let Some(rest) = name.strip_prefix("https.")
        && name.matches('.').count() == 4
    {
        let parts: Vec<&str> = rest.split('.').collect();
        return (parts[0].parse().unwrap_or(0), parts[1], format!("{}/{}", parts[3], parts[2]));
    }
    (0, "", String::new())
}

fn route_configuration_match(scope: RouteScope<'_>, rc: &RouteConfiguration, rp: &CompiledPatch) -> bool {
    let Some(m) = &rp.matches.route_configuration else { return true };
    if !m.name.is_empty() && m.name != rc.name {
        return false;
    }
    if scope.context != PatchContext::Gateway {
        return m.port_number == 0 || m.port_number == port_from_name(&rc.name);
    }
    let (port, port_name, gateway) = parse_gateway_route_name(&rc.name);
    // Istio's `anyPortMatches`: the servers' ports when the name has servers, else the name's port.
    let port_matches = if scope.server_ports.is_empty() {
        m.port_number == port
    } else {
        scope.server_ports.contains(&m.port_number)
    };
    (m.port_name.is_empty() || m.port_name == port_name)
        && (m.gateway.is_empty() || m.gateway == gateway)
        && (m.port_number == 0 || port_matches)
}

fn virtual_host_match(vh: &VirtualHost, rp: &CompiledPatch) -> bool {
    let Some(m) = rp.matches.route_configuration.as_ref().and_then(|m| m.vhost.as_ref()) else { return true };
    (m.name.is_empty() || m.name == vh.name)
        && (m.domain_name.is_empty() || vh.domains.contains(&m.domain_name))
}

fn route_match(r: &Route, rp: &CompiledPatch) -> bool {
    let Some(m) = route_match_spec(rp) else { return true };
    if !m.name.is_empty() && m.name != r.name {
        return false;
    }
    let wanted = Action::try_from(m.action).unwrap_or(Action::Any);
    // Routes with another action (or none) match any action, as in istiod's type switch.
    match (&r.action, wanted) {
        (_, Action::Any) => true,
        (Some(route::Action::Route(_)), w) => w == Action::Route,
        (Some(route::Action::Redirect(_)), w) => w == Action::Redirect,
        (Some(route::Action::DirectResponse(_)), w) => w == Action::DirectResponse,
        _ => true,
    }
}
