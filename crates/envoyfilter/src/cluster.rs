//! CLUSTER patches (Istio's `cluster_patch.go`).
//!
//! Per cluster, in order: a REMOVE that matches drops it; MERGE (and MERGE_AND_REPLACE_LIST) merges
//! the value — or, when the value has a transport socket, only that (Istio's
//! `mergeTransportSocketCluster`: the socket's typed config is merged into the cluster's socket of the
//! same name, in `transport_socket_matches` when the cluster has them (no socket of that name there: the
//! patch does nothing), else the value's socket replaces a socket of another name or none).
//! ADD appends the value (context `ANY` adds to outbound and gateway clusters only).
//!
//! Matching: `name` alone when set; else `subset`, `service` and `portNumber` against the name
//! `direction|port|subset|host`, where for inbound clusters `service` is compared with the services the
//! proxy serves on that port.

use api::networking::envoy_filter::{ApplyTo, PatchContext, patch::Operation};
use envoy_types::pb::envoy::config::{
    cluster::v3::Cluster,
    core::v3::{TransportSocket, transport_socket::ConfigType},
};
use model::{ConfigKey, Severity};

use crate::{CompiledPatch, Findings, ProxyPatches, listener::merge_value, merge};

/// Istio's inbound passthrough cluster names (IPv4, IPv6).
const INBOUND_PASSTHROUGH: [&str; 2] = ["InboundPassthroughCluster", "InboundPassthroughClusterIpv6"];

/// The patch context of a generated cluster: GATEWAY for gateways; for sidecars SIDECAR_INBOUND for
/// `inbound|…` and the inbound passthrough clusters, else SIDECAR_OUTBOUND.
pub fn context_of(cluster_name: &str, gateway: bool) -> PatchContext {
    if gateway {
        PatchContext::Gateway
    } else if cluster_name.starts_with("inbound|") || INBOUND_PASSTHROUGH.contains(&cluster_name) {
        PatchContext::SidecarInbound
    } else {
        PatchContext::SidecarOutbound
    }
}

/// Applies the CLUSTER patches of `ctx` to `cluster` (Istio's `ApplyClusterMerge`); `false` when a
/// patch removes it. `hosts`: for inbound clusters, the hostnames of the services the proxy serves on
/// the cluster's port.
pub fn patch_cluster(
    ctx: PatchContext,
    patches: &ProxyPatches,
    cluster: &mut Cluster,
    hosts: &[String],
    findings: &mut Findings,
) -> bool {
    for cp in patches.of(ApplyTo::Cluster) {
        if !cp.context_matches(ctx) || !cluster_match(cluster, cp, hosts) {
            continue;
        }
        if cp.operation == Operation::Remove {
            return false;
        }
        if cp.is_merge() && !merge_transport_socket(cp, cluster, findings) {
            let name = cluster.name.clone();
            merge_value(cp, cluster, &name, findings);
        }
    }
    true
}

/// The clusters CLUSTER ADD patches insert for `ctx`, with their EnvoyFilter (Istio's
/// `InsertedClusters`).
pub fn inserted_clusters(ctx: PatchContext, patches: &ProxyPatches) -> Vec<(ConfigKey, Cluster)> {
    patches
        .of(ApplyTo::Cluster)
        .iter()
        .filter(|cp| cp.operation == Operation::Add)
        .filter(|cp| !(cp.context == PatchContext::Any && ctx == PatchContext::SidecarInbound))
        .filter(|cp| cp.context_matches(ctx))
        .filter_map(|cp| cp.value.as_ref().map(|v| (cp.filter.clone(), v.typed())))
        .collect()
}

fn merge_transport_socket(cp: &CompiledPatch, cluster: &mut Cluster, findings: &mut Findings) -> bool {
    let Some(value) = &cp.value else { return false };
    let patch: Cluster = value.typed();
    let Some(src) = patch.transport_socket else { return false };
    let target: Option<&mut TransportSocket> = if !cluster.transport_socket_matches.is_empty() {
        match cluster
            .transport_socket_matches
            .iter_mut()
            .filter_map(|m| m.transport_socket.as_mut())
            .find(|ts| ts.name == src.name)
        {
            Some(ts) => Some(ts),
            None => return true,
        }
    } else {
        cluster.transport_socket.as_mut().filter(|ts| ts.name == src.name)
    };
    match target {
        None => cluster.transport_socket = Some(src),
        Some(ts) => {
            if let (Some(ConfigType::TypedConfig(d)), Some(ConfigType::TypedConfig(s))) =
                (&mut ts.config_type, &src.config_type)
            {
                match merge::merge_any(d, s) {
                    Ok(merged) => *d = merged,
                    Err(e) => findings.push(cp.finding(
                        Severity::Dropped,
                        ".patch.value.transport_socket",
                        &cluster.name,
                        e,
                    )),
                }
            }
        }
    }
    true
}

/// Istio's `clusterMatch`.
fn cluster_match(cluster: &Cluster, cp: &CompiledPatch, hosts: &[String]) -> bool {
    let Some(m) = &cp.matches.cluster else { return true };
    if !m.name.is_empty() {
        return m.name == cluster.name;
    }
    let mut parts = cluster.name.splitn(4, '|');
    let direction = parts.next().unwrap_or_default();
    let port: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let subset = parts.next().unwrap_or_default();
    let host = parts.next().unwrap_or_default();
    if !m.subset.is_empty() && m.subset != subset {
        return false;
    }
    if !m.service.is_empty() {
        let found = if direction == "inbound" && !hosts.is_empty() {
            hosts.contains(&m.service)
        } else {
            host == m.service
        };
        if !found {
            return false;
        }
    }
    m.port_number == 0 || m.port_number == port
}
