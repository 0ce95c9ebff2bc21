//! LISTENER, LISTENER_FILTER, FILTER_CHAIN, NETWORK_FILTER and HTTP_FILTER patches (Istio's
//! `listener_patch.go`).
//!
//! Order, as istiod: for each listener, LISTENER patches (REMOVE drops it, MERGE merges), then
//! LISTENER_FILTER patches, then for each filter chain (and the default chain) FILTER_CHAIN patches
//! (REMOVE drops the chain; MERGE merges, or only merges the transport socket when the patch has one of
//! the same name), NETWORK_FILTER ADD / INSERT_* / REPLACE / REMOVE, then for each filter NETWORK_FILTER
//! MERGE (the `typed_config`s merged by type) and, inside `envoy.filters.network.http_connection_manager`,
//! the same for HTTP_FILTER; then FILTER_CHAIN ADD. LISTENER ADD after all listeners of the context
//! (not for virtual listeners, and a patch with context `ANY` adds to outbound and gateway listeners only).
//!
//! Matching (istiod's quirks kept): a listener `portNumber` is not checked on `virtualInbound` /
//! `virtualOutbound` for patches below LISTENER, where it selects filter chains by destination port
//! instead; INSERT_BEFORE without a filter to match inserts first, INSERT_AFTER without one appends;
//! REPLACE, REMOVE and MERGE need one.

use api::networking::envoy_filter::{ApplyTo, PatchContext, patch::Operation};
use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{TrafficDirection, address, socket_address::PortSpecifier},
            listener::v3::{Filter, FilterChain, Listener, ListenerFilter, filter, listener_filter},
        },
        extensions::filters::network::http_connection_manager::v3::{
            HttpConnectionManager, HttpFilter, http_connection_manager::RouteSpecifier, http_filter,
        },
    },
    google::protobuf::Any,
};
use model::{ConfigKey, Severity};
use prost::{Message, Name};

use crate::{CompiledPatch, Findings, ProxyPatches, merge, route};

/// Name of Envoy's HTTP connection manager network filter.
pub const HTTP_CONNECTION_MANAGER: &str = "envoy.filters.network.http_connection_manager";
/// Istio's virtual outbound listener.
pub const VIRTUAL_OUTBOUND: &str = "virtualOutbound";
/// Istio's virtual inbound listener.
pub const VIRTUAL_INBOUND: &str = "virtualInbound";

/// The patch context of a generated listener: GATEWAY for gateways; for sidecars SIDECAR_INBOUND for
/// `virtualInbound` and listeners with `traffic_direction: INBOUND`, else SIDECAR_OUTBOUND.
pub fn context_of(listener: &Listener, gateway: bool) -> PatchContext {
    if gateway {
        PatchContext::Gateway
    } else if listener.name == VIRTUAL_INBOUND
        || listener.traffic_direction == TrafficDirection::Inbound as i32
    {
        PatchContext::SidecarInbound
    } else {
        PatchContext::SidecarOutbound
    }
}

/// Patches one generated listener; `false` when a patch removes it. `gateway` selects the GATEWAY
/// context, else the listener's direction decides ([`context_of`]). Route patches of the
/// SIDECAR_INBOUND context are applied to the inline route configurations of inbound listeners first
/// (istiod patches them when it builds them).
pub fn patch_one(patches: &ProxyPatches, l: &mut Listener, gateway: bool, findings: &mut Findings) -> bool {
    let ctx = context_of(l, gateway);
    if ctx == PatchContext::SidecarInbound
        && patches.has_any(&[ApplyTo::RouteConfiguration, ApplyTo::VirtualHost, ApplyTo::HttpRoute])
    {
        patch_inline_routes(patches, l, findings);
    }
    if l.name.is_empty() {
        return true;
    }
    patch_listener(ctx, patches, l, findings);
    !l.name.is_empty()
}

/// The listeners LISTENER ADD patches add, with their EnvoyFilter: for gateways those of the GATEWAY
/// context, for sidecars those of SIDECAR_INBOUND and SIDECAR_OUTBOUND (a patch with context `ANY`
/// adds once, as an outbound listener).
pub fn added(patches: &ProxyPatches, gateway: bool) -> Vec<(ConfigKey, Listener)> {
    let contexts: &[PatchContext] = if gateway {
        &[PatchContext::Gateway]
    } else {
        &[PatchContext::SidecarInbound, PatchContext::SidecarOutbound]
    };
    let mut out = Vec::new();
    for ctx in contexts {
        for lp in patches.of(ApplyTo::Listener) {
            if lp.operation != Operation::Add
                || (lp.context == PatchContext::Any && *ctx == PatchContext::SidecarInbound)
                || !lp.context_matches(*ctx)
            {
                continue;
            }
            if let Some(v) = &lp.value {
                out.push((lp.filter.clone(), v.typed()));
            }
        }
    }
    out
}

fn patch_inline_routes(patches: &ProxyPatches, l: &mut Listener, findings: &mut Findings) {
    for fc in l.filter_chains.iter_mut().chain(l.default_filter_chain.as_mut()) {
        for f in fc.filters.iter_mut().filter(|f| f.name == HTTP_CONNECTION_MANAGER) {
            let Some(filter::ConfigType::TypedConfig(any)) = &mut f.config_type else { continue };
            let Ok(mut hcm) = HttpConnectionManager::decode(any.value.as_slice()) else { continue };
            if let Some(RouteSpecifier::RouteConfig(rc)) = &mut hcm.route_specifier {
                route::patch_route_configuration(
                    route::RouteScope::of(PatchContext::SidecarInbound),
                    patches,
                    rc,
                    findings,
                );
                any.value = hcm.encode_to_vec();
            }
        }
    }
}

/// One listener (Istio's `patchListener`); a REMOVE empties its name.
fn patch_listener(ctx: PatchContext, patches: &ProxyPatches, l: &mut Listener, findings: &mut Findings) {
    for lp in patches.of(ApplyTo::Listener) {
        if !lp.context_matches(ctx) || !listener_match(l, lp) {
            continue;
        }
        if lp.operation == Operation::Remove {
            l.name.clear();
            return;
        }
        if lp.is_merge() {
            merge_value(lp, l, &l.name.clone(), findings);
        }
    }
    patch_listener_filters(ctx, patches.of(ApplyTo::ListenerFilter), l, findings);
    patch_filter_chains(ctx, patches, l, findings);
}

/// MERGE (or MERGE_AND_REPLACE_LIST) of the patch value into `target`, a finding on failure.
pub(crate) fn merge_value<M: Message + Name + Default>(
    patch: &CompiledPatch,
    target: &mut M,
    resource: &str,
    findings: &mut Findings,
) {
    let Some(value) = &patch.value else { return };
    if let Err(e) =
        merge::merge_typed(target, &value.message, patch.operation == Operation::MergeAndReplaceList)
    {
        findings.push(patch.finding(
            Severity::Dropped,
            ".patch.value",
            resource,
            format!("merge failed: {e}"),
        ));
    }
}

fn listener_port(l: &Listener) -> Option<u32> {
    match l.address.as_ref()?.address.as_ref()? {
        address::Address::SocketAddress(s) => match s.port_specifier {
            Some(PortSpecifier::PortValue(p)) => Some(p),
            _ => None,
        },
        _ => None,
    }
}

fn is_virtual(l: &Listener) -> bool {
    l.name == VIRTUAL_INBOUND || l.name == VIRTUAL_OUTBOUND
}

/// Istio's `listenerMatch`.
fn listener_match(l: &Listener, lp: &CompiledPatch) -> bool {
    let Some(m) = &lp.matches.listener else { return true };
    if !m.name.is_empty() && m.name != l.name {
        return false;
    }
    if lp.apply_to != ApplyTo::Listener && is_virtual(l) {
        return true;
    }
    m.port_number == 0 || listener_port(l) == Some(m.port_number)
}

/// Istio's `filterChainMatch`.
fn filter_chain_match(l: &Listener, fc: &FilterChain, lp: &CompiledPatch) -> bool {
    let Some(m) = &lp.matches.listener else { return true };
    let fcm = fc.filter_chain_match.as_ref();
    let destination_port = fcm.and_then(|f| f.destination_port).map(|p| p.value);
    if is_virtual(l) && m.port_number > 0 && destination_port != Some(m.port_number) {
        return false;
    }
    let Some(c) = &m.filter_chain else { return true };
    if !c.name.is_empty() && c.name != fc.name {
        return false;
    }
    if !c.sni.is_empty() && !fcm.is_some_and(|f| f.server_names.contains(&c.sni)) {
        return false;
    }
    if !c.transport_protocol.is_empty() && fcm.is_none_or(|f| f.transport_protocol != c.transport_protocol) {
        return false;
    }
    if !c.application_protocols.is_empty() {
        let Some(f) = fcm else { return false };
        if !c.application_protocols.split(',').all(|p| f.application_protocols.iter().any(|a| a == p)) {
            return false;
        }
    }
    c.destination_port == 0 || destination_port == Some(c.destination_port)
}

fn listener_filter_name(lp: &CompiledPatch) -> Option<&str> {
    lp.matches.listener.as_ref().map(|m| m.listener_filter.as_str()).filter(|n| !n.is_empty())
}

fn network_filter_name(lp: &CompiledPatch) -> Option<&str> {
    let m = lp.matches.listener.as_ref()?.filter_chain.as_ref()?.filter.as_ref()?;
    Some(m.name.as_str())
}

fn http_filter_name(lp: &CompiledPatch) -> Option<&str> {
    let m = lp.matches.listener.as_ref()?.filter_chain.as_ref()?.filter.as_ref()?.sub_filter.as_ref()?;
    Some(m.name.as_str())
}

/// The list operations shared by listener, network and HTTP filters (ADD, INSERT_*, REPLACE, REMOVE;
/// MERGE is done per filter elsewhere): `value` the patch's filter (`None` for REMOVE), `target` the
/// filter name the match selects (`None` when the match names none), `name_of` reads an element's name.
fn apply_list_op<T: Clone>(
    op: Operation,
    list: &mut Vec<T>,
    value: Option<T>,
    target: Option<&str>,
    name_of: impl Fn(&T) -> &str,
) {
    if op == Operation::Remove {
        if let Some(t) = target {
            list.retain(|e| name_of(e) != t);
        }
        return;
    }
    let Some(value) = value else { return };
    let position = || target.and_then(|t| list.iter().position(|e| name_of(e) == t));
    match op {
        Operation::Add => list.push(value),
        Operation::InsertFirst => list.insert(0, value),
        Operation::InsertAfter => match target {
            None => list.push(value),
            Some(_) => {
                if let Some(i) = position() {
                    list.insert(i + 1, value);
                }
            }
        },
        Operation::InsertBefore => match target {
            None => list.insert(0, value),
            Some(_) => {
                if let Some(i) = position() {
                    list.insert(i, value);
                }
            }
        },
        Operation::Replace => {
            if let Some(i) = position() {
                list[i] = value;
            }
        }
        _ => {}
    }
}

fn patch_listener_filters(
    ctx: PatchContext,
    patches: &[std::sync::Arc<CompiledPatch>],
    l: &mut Listener,
    findings: &mut Findings,
) {
    for lp in patches {
        if !lp.context_matches(ctx) || !listener_match(l, lp) {
            continue;
        }
        let target = listener_filter_name(lp);
        if lp.is_merge() {
            if target.is_none() {
                continue;
            }
            let Some(value) = &lp.value else { continue };
            let patch: ListenerFilter = value.typed();
            for f in l.listener_filters.iter_mut().filter(|f| Some(f.name.as_str()) == target) {
                let Some(listener_filter::ConfigType::TypedConfig(dst)) = &mut f.config_type else {
                    continue;
                };
                if let Some(listener_filter::ConfigType::TypedConfig(src)) = &patch.config_type {
                    merge_typed_config(lp, &l.name, dst, src, findings);
                }
            }
            continue;
        }
        let value = lp.value.as_ref().map(|v| v.typed());
        apply_list_op(lp.operation, &mut l.listener_filters, value, target, |f| &f.name);
    }
}

fn patch_filter_chains(ctx: PatchContext, patches: &ProxyPatches, l: &mut Listener, findings: &mut Findings) {
    let mut chains = std::mem::take(&mut l.filter_chains);
    for fc in chains.iter_mut().filter(|fc| !fc.filters.is_empty()) {
        patch_filter_chain(ctx, patches, l, fc, findings);
    }
    if let Some(mut fc) = l.default_filter_chain.take()
        && !fc.filters.is_empty()
    {
        patch_filter_chain(ctx, patches, l, &mut fc, findings);
        if !fc.filters.is_empty() {
            l.default_filter_chain = Some(fc);
        }
    }
    for lp in patches.of(ApplyTo::FilterChain) {
        if lp.operation == Operation::Add
            && lp.context_matches(ctx)
            && listener_match(l, lp)
            && let Some(v) = &lp.value
        {
            chains.push(v.typed());
        }
    }
    chains.retain(|fc| !fc.filters.is_empty());
    l.filter_chains = chains;
}

fn patch_filter_chain(
    ctx: PatchContext,
    patches: &ProxyPatches,
    l: &Listener,
    fc: &mut FilterChain,
    findings: &mut Findings,
) {
    for lp in patches.of(ApplyTo::FilterChain) {
        if !lp.context_matches(ctx) || !listener_match(l, lp) || !filter_chain_match(l, fc, lp) {
            continue;
        }
        if lp.operation == Operation::Remove {
            fc.filters.clear();
            return;
        }
        if lp.is_merge() && !merge_transport_socket(lp, fc, &l.name, findings) {
            merge_value(lp, fc, &l.name, findings);
        }
    }
    patch_network_filters(ctx, patches, l, fc, findings);
}

/// Istio's `mergeTransportSocketListener`: a FILTER_CHAIN MERGE whose value has a transport socket of
/// the chain's socket name merges only the sockets' typed configs (the rest of the value is not
/// merged). `false`: merge the whole value instead.
fn merge_transport_socket(
    lp: &CompiledPatch,
    fc: &mut FilterChain,
    resource: &str,
    findings: &mut Findings,
) -> bool {
    let Some(value) = &lp.value else { return false };
    let patch: FilterChain = value.typed();
    let (Some(src), Some(dst)) = (&patch.transport_socket, &mut fc.transport_socket) else { return false };
    if src.name != dst.name {
        return false;
    }
    use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
    if let (Some(ConfigType::TypedConfig(s)), Some(ConfigType::TypedConfig(d))) =
        (&src.config_type, &mut dst.config_type)
    {
        match merge::merge_any(d, s) {
            Ok(merged) => *d = merged,
            Err(e) => {
                findings.push(lp.finding(Severity::Dropped, ".patch.value.transport_socket", resource, e))
            }
        }
    }
    true
}

fn patch_network_filters(
    ctx: PatchContext,
    patches: &ProxyPatches,
    l: &Listener,
    fc: &mut FilterChain,
    findings: &mut Findings,
) {
    for lp in patches.of(ApplyTo::NetworkFilter) {
        if !lp.context_matches(ctx) || !listener_match(l, lp) || !filter_chain_match(l, fc, lp) {
            continue;
        }
        if !lp.is_merge() {
            let value = lp.value.as_ref().map(|v| v.typed());
            apply_list_op(lp.operation, &mut fc.filters, value, network_filter_name(lp), |f| &f.name);
        }
    }
    for i in 0..fc.filters.len() {
        let mut f = std::mem::take(&mut fc.filters[i]);
        patch_network_filter(ctx, patches, l, fc, &mut f, findings);
        fc.filters[i] = f;
    }
}

/// A filter MERGE's typed config (Istio's `MergeAnyWithAny` in `patchNetworkFilter`, `mergeHTTPFilter`,
/// `mergeListenerFilter`): `src` merged into `dst`; of another type, `dst` is kept and the patch reported.
fn merge_typed_config(lp: &CompiledPatch, resource: &str, dst: &mut Any, src: &Any, findings: &mut Findings) {
    match merge::merge_any(dst, src) {
        Ok(merged) => *dst = merged,
        Err(e) => findings.push(lp.finding(Severity::Dropped, ".patch.value.typed_config", resource, e)),
    }
}

/// NETWORK_FILTER MERGE of one filter, then its HTTP filters (Istio's `patchNetworkFilter`).
fn patch_network_filter(
    ctx: PatchContext,
    patches: &ProxyPatches,
    l: &Listener,
    fc: &FilterChain,
    f: &mut Filter,
    findings: &mut Findings,
) {
    for lp in patches.of(ApplyTo::NetworkFilter) {
        if lp.operation != Operation::Merge
            || !lp.context_matches(ctx)
            || !listener_match(l, lp)
            || !filter_chain_match(l, fc, lp)
            || network_filter_name(lp).is_some_and(|n| n != f.name)
        {
            continue;
        }
        let Some(filter::ConfigType::TypedConfig(dst)) = &mut f.config_type else { continue };
        let Some(value) = &lp.value else { continue };
        let patch: Filter = value.typed();
        if let Some(filter::ConfigType::TypedConfig(src)) = &patch.config_type {
            merge_typed_config(lp, &l.name, dst, src, findings);
        }
        if !patch.name.is_empty() {
            f.name = patch.name;
        }
    }
    if f.name == HTTP_CONNECTION_MANAGER && !patches.of(ApplyTo::HttpFilter).is_empty() {
        patch_http_filters(ctx, patches, l, fc, f, findings);
    }
}

fn patch_http_filters(
    ctx: PatchContext,
    patches: &ProxyPatches,
    l: &Listener,
    fc: &FilterChain,
    f: &mut Filter,
    findings: &mut Findings,
) {
    let Some(filter::ConfigType::TypedConfig(any)) = &mut f.config_type else { return };
    let Ok(mut hcm) = HttpConnectionManager::decode(any.value.as_slice()) else { return };
    let selects = |lp: &CompiledPatch| {
        lp.context_matches(ctx)
            && listener_match(l, lp)
            && filter_chain_match(l, fc, lp)
            && network_filter_name(lp).is_none_or(|n| n == f.name)
    };
    for lp in patches.of(ApplyTo::HttpFilter) {
        if !selects(lp) {
            continue;
        }
        if !lp.is_merge() {
            let value = lp.value.as_ref().map(|v| v.typed());
            apply_list_op(lp.operation, &mut hcm.http_filters, value, http_filter_name(lp), |f| &f.name);
        }
    }
    for h in &mut hcm.http_filters {
        for lp in patches.of(ApplyTo::HttpFilter) {
            if lp.operation != Operation::Merge
                || !selects(lp)
                || http_filter_name(lp).is_some_and(|n| n != h.name)
            {
                continue;
            }
            let Some(http_filter::ConfigType::TypedConfig(dst)) = &mut h.config_type else { continue };
            let Some(value) = &lp.value else { continue };
            let patch: HttpFilter = value.typed();
            if let Some(http_filter::ConfigType::TypedConfig(src)) = &patch.config_type {
                merge_typed_config(lp, &l.name, dst, src, findings);
            }
            if !patch.name.is_empty() {
                h.name = patch.name;
            }
        }
    }
    *any = Any { type_url: HttpConnectionManager::type_url(), value: hcm.encode_to_vec() };
}
