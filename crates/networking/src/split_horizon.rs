//! Split-horizon EDS (Istio's `EndpointsByNetworkFilter`, `pilot/pkg/xds/endpoints/ep_filters.go`,
//! sidecar mode) and the mTLS-only filter of SNI-DNAT clusters (`EndpointsWithMTLSFilter`), pure.
//!
//! With at least one network gateway known (istiod's `IsMultiNetworkEnabled`), every endpoint's
//! weight is multiplied by the gateways' scale factor (the least common multiple of the gateway
//! counts, [`NetworkGateways::scale_factor`]); then, per locality:
//! * an endpoint on the proxy's network — or with no network, or seen by a proxy without one — or on a
//!   network with no gateway is kept as it is (istiod keeps endpoints of networks without gateways
//!   in sidecar mode: "this logic has been around for years");
//! * a proxy without a network still goes through the gateway to an endpoint whose network has one
//!   (istiod's `forceGateway`);
//! * any other endpoint is replaced by its network's gateways (those of its cluster first, else every
//!   gateway of the network, [`NetworkGateways::for_endpoint`]): its weight is split evenly among
//!   them (integer division) and summed per gateway; endpoints that do not take Istio mutual TLS are
//!   dropped instead (cross-network traffic is routed by the SNI of the mTLS connection), and so are
//!   endpoints whose network has gateways but none of an IP family the proxy has;
//! * gateway endpoints come after the kept ones, ordered by address then port, their weight at least 1,
//!   labelled `tlsMode: istio` for auto mTLS; the locality's weight is the sum of what is left (none
//!   when nothing is).

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::endpoint::v3::{
    Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use model::network::{NetworkGateway, NetworkGateways};

use crate::convert::{address, u32v};

/// What split-horizon EDS knows of one endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EndpointFacts<'a> {
    /// Its network (empty: none).
    pub network: &'a str,
    /// The cluster it was read from.
    pub cluster: &'a str,
    /// Whether the proxy would send it Istio mutual TLS (istiod's `isMtlsEnabled`).
    pub mtls: bool,
}

/// The proxy's side: its network (empty: none), the IP families of its addresses (`(IPv4, IPv6)`), and
/// the snapshot's gateways; `tls_metadata` says whether gateway endpoints get the auto-mTLS match
/// metadata (as the proxy's other endpoints do).
pub(crate) struct NetworkView<'a> {
    pub network: &'a str,
    pub ip_families: (bool, bool),
    pub gateways: &'a NetworkGateways,
    pub tls_metadata: bool,
}

impl NetworkView<'_> {
    /// Whether the proxy can reach `gw` by its IP family (istiod's `filterGatewaysByIPFamily`: a proxy
    /// with addresses of one family only reaches gateways of that family; one with both, or with no
    /// known address, reaches all). IPv4-mapped IPv6 addresses count as IPv4.
    fn reaches(&self, gw: &NetworkGateway) -> bool {
        let (v4, v6) = self.ip_families;
        if v4 == v6 {
            return true;
        }
        match gw.address.parse::<std::net::IpAddr>().map(|a| a.to_canonical()) {
            Ok(std::net::IpAddr::V4(_)) => v4,
            Ok(std::net::IpAddr::V6(_)) => v6,
            Err(_) => false,
        }
    }
}

/// Istio's `Proxy.InNetwork`: the same network, or either side has none.
fn in_network(proxy: &str, endpoint: &str) -> bool {
    proxy.is_empty() || endpoint.is_empty() || proxy == endpoint
}

/// Applies split-horizon EDS to `groups` (each group's `lb_endpoints` aligned with its `members`;
/// `facts` tells each member's network, cluster and mTLS). Gateway endpoints are added with the
/// member `None`. Unchanged when no gateway is known.
pub(crate) fn by_network<'f, M: Copy>(
    groups: &mut [LocalityLbEndpoints],
    members: &mut [Vec<Option<M>>],
    view: &NetworkView<'_>,
    facts: impl Fn(M) -> EndpointFacts<'f>,
) {
    if !view.gateways.is_multi_network() {
        return;
    }
    let scale = view.gateways.scale_factor();
    for (group, members) in groups.iter_mut().zip(members.iter_mut()) {
        let mut kept = Vec::with_capacity(group.lb_endpoints.len());
        let mut kept_members = Vec::with_capacity(members.len());
        let mut through: BTreeMap<&NetworkGateway, u32> = BTreeMap::new();
        for (mut lb, member) in std::mem::take(&mut group.lb_endpoints).into_iter().zip(members.drain(..)) {
            let Some(m) = member else {
                kept.push(lb);
                kept_members.push(member);
                continue;
            };
            let ep = facts(m);
            let gateways = view.gateways.for_endpoint(ep.network, ep.cluster);
            let reachable: Vec<&NetworkGateway> = gateways.iter().filter(|g| view.reaches(g)).collect();
            let weight = match lb.load_balancing_weight.as_ref().map_or(0, |w| w.value) {
                0 => scale,
                w => w.saturating_mul(scale),
            };
            lb.load_balancing_weight = Some(u32v(weight));
            let force_gateway = view.network.is_empty() && !ep.network.is_empty() && !gateways.is_empty();
            if !force_gateway && (in_network(view.network, ep.network) || gateways.is_empty()) {
                kept.push(lb);
                kept_members.push(member);
                continue;
            }
            // Gateways exist, but none of the proxy's IP family: left out, not sent direct.
            if reachable.is_empty() || !ep.mtls {
                continue;
            }
            let share = weight / u32::try_from(reachable.len()).unwrap_or(u32::MAX);
            for gw in reachable {
                let total = through.entry(gw).or_default();
                *total = total.saturating_add(share);
            }
        }
        for (gw, weight) in through {
            // Istio labels a gateway endpoint with the gateway's cluster only (no workload, no labels).
            let workload = crate::endpoint::workload_label("", "", &Default::default(), &gw.cluster);
            let tls_mode = view.tls_metadata.then_some(model::service::TLS_MODE_ISTIO);
            kept.push(LbEndpoint {
                metadata: Some(crate::endpoint::lb_endpoint_metadata(tls_mode, workload)),
                load_balancing_weight: Some(u32v(weight.max(1))),
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(EnvoyEndpoint {
                    address: Some(address(&gw.address, gw.port)),
                    ..Default::default()
                })),
                ..Default::default()
            });
            kept_members.push(None);
        }
        group.load_balancing_weight = (!kept.is_empty()).then(|| {
            u32v(
                kept.iter()
                    .filter_map(|e| e.load_balancing_weight.as_ref())
                    .fold(0u32, |a, w| a.saturating_add(w.value)),
            )
        });
        group.lb_endpoints = kept;
        *members = kept_members;
    }
}

/// Keeps only the endpoints that take Istio mutual TLS (gateway endpoints, member `None`, do), as
/// istiod does for the SNI-DNAT clusters of an `AUTO_PASSTHROUGH` gateway (`EndpointsWithMTLSFilter`:
/// the gateway cannot check that the passed-through connection is mTLS, so it only forwards to mTLS
/// endpoints). Locality weights are summed again.
pub(crate) fn mtls_only<M: Copy>(
    groups: &mut [LocalityLbEndpoints],
    members: &mut [Vec<Option<M>>],
    mtls: impl Fn(M) -> bool,
) {
    for (group, members) in groups.iter_mut().zip(members.iter_mut()) {
        let (kept, kept_members): (Vec<_>, Vec<_>) = std::mem::take(&mut group.lb_endpoints)
            .into_iter()
            .zip(members.drain(..))
            .filter(|(_, m)| m.is_none_or(&mtls))
            .unzip();
        group.load_balancing_weight = (!kept.is_empty()).then(|| {
            u32v(
                kept.iter()
                    .filter_map(|e| e.load_balancing_weight.as_ref())
                    .fold(0u32, |a, w| a.saturating_add(w.value)),
            )
        });
        group.lb_endpoints = kept;
        *members = kept_members;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::{Locality, address::Address as AddressKind};

    /// One test endpoint: address, weight (0: unset), network, cluster, mTLS.
    type Ep = (&'static str, u32, &'static str, &'static str, bool);

    fn group(locality: &str, eps: &[Ep]) -> (LocalityLbEndpoints, Vec<Option<Ep>>) {
        let lb = eps
            .iter()
            .map(|e| LbEndpoint {
                load_balancing_weight: Some(u32v(if e.1 == 0 { 1 } else { e.1 })),
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(EnvoyEndpoint {
                    address: Some(address(e.0, 8080)),
                    ..Default::default()
                })),
                ..Default::default()
            })
            .collect();
        let g = LocalityLbEndpoints {
            locality: Some(Locality { region: locality.into(), ..Default::default() }),
            lb_endpoints: lb,
            load_balancing_weight: Some(u32v(1)),
            ..Default::default()
        };
        (g, eps.iter().copied().map(Some).collect())
    }

    fn facts(e: Ep) -> EndpointFacts<'static> {
        EndpointFacts { network: e.2, cluster: e.3, mtls: e.4 }
    }

    fn gw(address: &str, network: &str, cluster: &str) -> NetworkGateway {
        NetworkGateway {
            address: address.into(),
            port: 15443,
            network: network.into(),
            cluster: cluster.into(),
        }
    }

    /// `(address:port, weight, has tls metadata)` of each endpoint, and the locality weight.
    fn shown(g: &LocalityLbEndpoints) -> (Vec<(String, u32, bool)>, Option<u32>) {
        let eps = g
            .lb_endpoints
            .iter()
            .map(|e| {
                let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) = &e.host_identifier else { panic!() };
                let Some(AddressKind::SocketAddress(sa)) =
                    ep.address.as_ref().and_then(|a| a.address.as_ref())
                else {
                    panic!()
                };
                let port = match sa.port_specifier {
                    Some(
                        envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(p),
                    ) => p,
                    _ => 0,
                };
                (
                    format!("{}:{port}", sa.address),
                    e.load_balancing_weight.as_ref().unwrap().value,
                    e.metadata.as_ref().is_some_and(|m| {
                        m.filter_metadata.contains_key(crate::mtls::TRANSPORT_SOCKET_MATCH_KEY)
                    }),
                )
            })
            .collect();
        (eps, g.load_balancing_weight.as_ref().map(|w| w.value))
    }

    fn run(network: &str, gateways: &NetworkGateways, eps: &[Ep]) -> (Vec<(String, u32, bool)>, Option<u32>) {
        let (g, m) = group("r1", eps);
        let (mut groups, mut members) = (vec![g], vec![m]);
        let view = NetworkView { network, ip_families: (false, false), gateways, tls_metadata: true };
        by_network(&mut groups, &mut members, &view, facts);
        assert_eq!(groups[0].lb_endpoints.len(), members[0].len());
        shown(&groups[0])
    }

    fn s(a: &str, w: u32, tls: bool) -> (String, u32, bool) {
        (a.to_string(), w, tls)
    }

    #[test]
    fn without_gateways_nothing_changes() {
        let none = NetworkGateways::new([]);
        let out = run("a", &none, &[("10.0.0.1", 0, "b", "", true)]);
        assert_eq!(out, (vec![s("10.0.0.1:8080", 1, false)], Some(1)));
    }

    #[test]
    fn remote_endpoints_are_replaced_by_their_gateway_weighted_by_count() {
        // One gateway per network: scale factor 1; network b has 3 endpoints (one of weight 2).
        let gws = NetworkGateways::new([gw("192.0.2.1", "b", ""), gw("192.0.2.9", "c", "")]);
        let out = run(
            "a",
            &gws,
            &[
                ("10.0.0.1", 0, "a", "", false),
                ("10.0.0.2", 0, "", "", false),
                ("10.1.0.1", 0, "b", "", true),
                ("10.1.0.2", 2, "b", "", true),
                ("10.1.0.3", 0, "b", "", true),
                ("10.2.0.1", 0, "c", "", true),
            ],
        );
        assert_eq!(
            out,
            (
                vec![
                    s("10.0.0.1:8080", 1, false),
                    s("10.0.0.2:8080", 1, false),
                    s("192.0.2.1:15443", 4, true),
                    s("192.0.2.9:15443", 1, true),
                ],
                Some(7)
            )
        );
    }

    #[test]
    fn weights_are_scaled_by_the_lcm_and_split_among_a_networks_gateways() {
        // Network b has 2 gateways, c has 3: every weight is scaled by lcm(2, 3, 2, 3) = 6.
        let gws = NetworkGateways::new([
            gw("192.0.2.2", "b", ""),
            gw("192.0.2.1", "b", ""),
            gw("192.0.2.7", "c", ""),
            gw("192.0.2.8", "c", ""),
            gw("192.0.2.9", "c", ""),
        ]);
        let out = run(
            "a",
            &gws,
            &[("10.0.0.1", 0, "a", "", true), ("10.1.0.1", 0, "b", "", true), ("10.2.0.1", 0, "c", "", true)],
        );
        assert_eq!(
            out,
            (
                vec![
                    s("10.0.0.1:8080", 6, false),
                    s("192.0.2.1:15443", 3, true),
                    s("192.0.2.2:15443", 3, true),
                    s("192.0.2.7:15443", 2, true),
                    s("192.0.2.8:15443", 2, true),
                    s("192.0.2.9:15443", 2, true),
                ],
                Some(18)
            )
        );
    }

    #[test]
    fn gateways_of_the_endpoints_cluster_are_preferred() {
        let gws = NetworkGateways::new([gw("192.0.2.1", "b", "c1"), gw("192.0.2.2", "b", "c2")]);
        // lcm of (b: 2, (b, c1): 1, (b, c2): 1) = 2.
        let out = run("a", &gws, &[("10.1.0.1", 0, "b", "c2", true), ("10.1.0.2", 0, "b", "c3", true)]);
        assert_eq!(out, (vec![s("192.0.2.1:15443", 1, true), s("192.0.2.2:15443", 3, true)], Some(4)));
    }

    #[test]
    fn remote_endpoints_without_mtls_are_dropped_and_networks_without_gateways_kept() {
        let gws = NetworkGateways::new([gw("192.0.2.1", "b", "")]);
        let out = run("a", &gws, &[("10.1.0.1", 0, "b", "", false), ("10.3.0.1", 0, "z", "", false)]);
        assert_eq!(out, (vec![s("10.3.0.1:8080", 1, false)], Some(1)), "network z has no gateway: direct");
        let only_plain = run("a", &gws, &[("10.1.0.1", 0, "b", "", false)]);
        assert_eq!(only_plain, (vec![], None), "nothing left: no locality weight");
    }

    #[test]
    fn a_proxy_without_a_network_uses_gateways_of_endpoints_that_have_one() {
        let gws = NetworkGateways::new([gw("192.0.2.1", "b", "")]);
        let out = run("", &gws, &[("10.1.0.1", 0, "b", "", true), ("10.0.0.1", 0, "", "", true)]);
        assert_eq!(out, (vec![s("10.0.0.1:8080", 1, false), s("192.0.2.1:15443", 1, true)], Some(2)));
        let local = run("b", &gws, &[("10.1.0.1", 0, "b", "", true)]);
        assert_eq!(local, (vec![s("10.1.0.1:8080", 1, false)], Some(1)), "the gateway's own network: direct");
    }

    #[test]
    fn single_stack_proxies_use_gateways_of_their_ip_family_only() {
        let gws = NetworkGateways::new([
            gw("2001:db8::1", "b", ""),
            gw("192.0.2.1", "b", ""),
            gw("2001:db8::9", "c", ""),
        ]);
        let run_with = |families: (bool, bool)| {
            let (g, m) = group("r1", &[("10.1.0.1", 0, "b", "", true), ("10.2.0.1", 0, "c", "", true)]);
            let (mut groups, mut members) = (vec![g], vec![m]);
            let view =
                NetworkView { network: "a", ip_families: families, gateways: &gws, tls_metadata: false };
            by_network(&mut groups, &mut members, &view, facts);
            shown(&groups[0])
        };
        // lcm(b: 2, c: 1) = 2. IPv4 only: b's IPv4 gateway takes the whole weight; c's only gateway is
        // IPv6, so its endpoint is left out.
        assert_eq!(run_with((true, false)), (vec![s("192.0.2.1:15443", 2, false)], Some(2)));
        let dual = run_with((true, true));
        assert_eq!(dual.0.len(), 3, "dual stack: every gateway {dual:?}");
        assert_eq!(run_with((false, false)), dual, "no known address: no filter");
    }

    #[test]
    fn sni_dnat_clusters_keep_mtls_endpoints_and_gateways() {
        let (g, m) = group("r1", &[("10.0.0.1", 3, "", "", true), ("10.0.0.2", 0, "", "", false)]);
        let (mut groups, mut members) = (vec![g], vec![m]);
        members[0].push(None);
        groups[0]
            .lb_endpoints
            .push(LbEndpoint { load_balancing_weight: Some(u32v(2)), ..Default::default() });
        mtls_only(&mut groups, &mut members, |e: Ep| e.4);
        assert_eq!(groups[0].lb_endpoints.len(), 2);
        assert_eq!(groups[0].load_balancing_weight.as_ref().unwrap().value, 5);
    }
}
