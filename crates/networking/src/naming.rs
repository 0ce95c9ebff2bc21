//! Istio's names for Envoy resources (`pilot/pkg/model/service.go` `BuildSubsetKey`,
//! `pilot/pkg/networking/util/util.go`, `pilot/pkg/model/listener.go`, `pilot/pkg/model/gateway.go`).

/// Cluster that drops traffic (`BlackHoleCluster`): routes to unknown destinations in
/// `REGISTRY_ONLY` mode.
pub const BLACK_HOLE_CLUSTER: &str = "BlackHoleCluster";
/// Cluster that forwards to the original destination (`PassthroughCluster`): unknown destinations
/// in `ALLOW_ANY` mode.
pub const PASSTHROUGH_CLUSTER: &str = "PassthroughCluster";
/// Inbound original-destination cluster for traffic to ports no service declares
/// (`InboundPassthroughCluster`).
pub const INBOUND_PASSTHROUGH_CLUSTER: &str = "InboundPassthroughCluster";
/// Name of the catch-all virtual host and route that forward unknown hosts (`allow_any`).
pub const ALLOW_ANY_VHOST: &str = "allow_any";
/// Name of the catch-all virtual host and route that reject unknown hosts (`block_all`).
pub const BLOCK_ALL_VHOST: &str = "block_all";
/// Name of the route a virtual host gets when no VirtualService applies (`default`).
pub const DEFAULT_ROUTE_NAME: &str = "default";
/// The sidecar listener that captures all outbound traffic (`virtualOutbound`, port 15001).
pub const VIRTUAL_OUTBOUND_LISTENER: &str = "virtualOutbound";
/// The sidecar listener that captures all inbound traffic (`virtualInbound`, port 15006).
pub const VIRTUAL_INBOUND_LISTENER: &str = "virtualInbound";
/// Port of [`VIRTUAL_OUTBOUND_LISTENER`] (mesh config `proxyListenPort`).
pub const VIRTUAL_OUTBOUND_PORT: u32 = 15001;
/// Port of [`VIRTUAL_INBOUND_LISTENER`] (mesh config `proxyInboundListenPort`).
pub const VIRTUAL_INBOUND_PORT: u32 = 15006;
/// The gateway name that stands for every sidecar in VirtualService `gateways` (`mesh`).
pub use model::push::MESH_GATEWAY;
/// Prefix of the listener names a proxyless gRPC server asks for
/// (`xds.istio.io/grpc/lds/inbound/`, then `IP:PORT`).
pub const GRPC_INBOUND_LISTENER_PREFIX: &str = "xds.istio.io/grpc/lds/inbound/";
/// Source address inbound clusters bind to, so that iptables lets their traffic through
/// (`InboundPassthroughBindIpv4`).
pub const INBOUND_PASSTHROUGH_BIND_IPV4: &str = "127.0.0.6";

/// Direction of traffic, as in a cluster name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrafficDirection {
    /// Leaving the proxy towards a service (`outbound`).
    Outbound,
    /// Arriving at the proxy's own workload (`inbound`).
    Inbound,
}

impl TrafficDirection {
    /// `outbound` or `inbound`.
    pub fn as_str(self) -> &'static str {
        match self {
            TrafficDirection::Outbound => "outbound",
            TrafficDirection::Inbound => "inbound",
        }
    }
}

/// `outbound|PORT|SUBSET|HOST` (subset empty for the service's default cluster), Istio's
/// `BuildSubsetKey`.
pub fn outbound_cluster_name(port: u32, subset: &str, host: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(16 + subset.len() + host.len());
    let _ = write!(out, "outbound|{port}|");
    out.push_str(subset);
    out.push('|');
    out.push_str(host);
    out
}

/// `inbound|PORT||` for the proxy's own workload port, Istio's `BuildInboundSubsetKey`.
pub fn inbound_cluster_name(port: u32) -> String {
    format!("inbound|{port}||")
}

/// The parts of a cluster name made by [`outbound_cluster_name`] or [`inbound_cluster_name`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterKey<'a> {
    /// Direction.
    pub direction: TrafficDirection,
    /// Port.
    pub port: u32,
    /// Subset name, empty for none.
    pub subset: &'a str,
    /// Hostname, empty for inbound clusters.
    pub host: &'a str,
}

/// Reads `outbound|PORT|SUBSET|HOST` or `inbound|PORT|SUBSET|HOST` (Istio's `ParseSubsetKey`);
/// `None` for any other name.
pub fn parse_cluster_name(name: &str) -> Option<ClusterKey<'_>> {
    let mut parts = name.splitn(4, '|');
    let direction = match parts.next()? {
        "outbound" => TrafficDirection::Outbound,
        "inbound" => TrafficDirection::Inbound,
        _ => return None,
    };
    let port = parts.next()?.parse().ok()?;
    let subset = parts.next()?;
    let host = parts.next()?;
    Some(ClusterKey { direction, port, subset, host })
}

/// `outbound_.PORT_.SUBSET_.HOST` (Istio's `BuildDNSSrvSubsetKey`): the SNI-DNAT cluster of an
/// `AUTO_PASSTHROUGH` gateway server, named like the SNI sidecars send with Istio mutual TLS.
pub fn sni_dnat_cluster_name(port: u32, subset: &str, host: &str) -> String {
    format!("outbound_.{port}_.{subset}_.{host}")
}

/// Reads `outbound_.PORT_.SUBSET_.HOST` (Istio's `ParseSubsetKeyHostname` / `IsDNSSrvSubsetKey`) as an
/// outbound [`ClusterKey`]; `None` for any other name. The subset is empty for `_`.
pub fn parse_sni_dnat_cluster_name(name: &str) -> Option<ClusterKey<'_>> {
    let rest = name.strip_prefix("outbound_.")?;
    let (port, rest) = rest.split_once("_.")?;
    let (subset, host) = rest.split_once("_.")?;
    Some(ClusterKey { direction: TrafficDirection::Outbound, port: port.parse().ok()?, subset, host })
}

/// The cluster unknown traffic of an `ALLOW_ANY` sidecar goes to: its Sidecar's `egressProxy`
/// cluster (`outbound|PORT|SUBSET|HOST`, the host as written, port 0 when none is given: Istio's
/// `GetDestinationCluster` without a service), else `PassthroughCluster`.
pub fn allow_any_cluster(egress_proxy: Option<&api::networking::virtual_service::Destination>) -> String {
    match egress_proxy {
        Some(d) => outbound_cluster_name(d.port.as_ref().map_or(0, |p| p.number), &d.subset, &d.host),
        None => PASSTHROUGH_CLUSTER.to_string(),
    }
}

/// `BIND_PORT`, the name of a listener bound to an address (`0.0.0.0_80`, `10.96.0.10_53`).
pub fn listener_name(bind: &str, port: u32) -> String {
    format!("{bind}_{port}")
}

/// `http.PORT`: the route configuration of a gateway's plain-HTTP servers on a port.
pub fn gateway_http_route_name(port: u32) -> String {
    format!("http.{port}")
}

/// `https.PORT.PORTNAME.GATEWAY.NAMESPACE`: the route configuration of a gateway server that
/// terminates TLS.
pub fn gateway_https_route_name(port: u32, port_name: &str, gateway: &str, namespace: &str) -> String {
    format!("https.{port}.{port_name}.{gateway}.{namespace}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sni_dnat_names_are_istios_dns_srv_subset_keys() {
        assert_eq!(
            sni_dnat_cluster_name(9080, "", "r.ns.svc.cluster.local"),
            "outbound_.9080_._.r.ns.svc.cluster.local"
        );
        let key = parse_sni_dnat_cluster_name("outbound_.9080_.v1_.r.ns.svc.cluster.local").unwrap();
        assert_eq!((key.port, key.subset, key.host), (9080, "v1", "r.ns.svc.cluster.local"));
        let key = parse_sni_dnat_cluster_name("outbound_.80_._.h").unwrap();
        assert_eq!((key.port, key.subset, key.host), (80, "", "h"));
        assert!(parse_sni_dnat_cluster_name("outbound|80||h").is_none());
        assert!(parse_sni_dnat_cluster_name("outbound_.x_._.h").is_none());
    }

    #[test]
    fn cluster_names_round_trip() {
        let name = outbound_cluster_name(9080, "v2", "reviews.bookinfo.svc.cluster.local");
        assert_eq!(name, "outbound|9080|v2|reviews.bookinfo.svc.cluster.local");
        let key = parse_cluster_name(&name).unwrap();
        assert_eq!((key.port, key.subset, key.host), (9080, "v2", "reviews.bookinfo.svc.cluster.local"));
        assert_eq!(inbound_cluster_name(8080), "inbound|8080||");
        assert_eq!(parse_cluster_name("inbound|8080||").unwrap().direction, TrafficDirection::Inbound);
        assert!(parse_cluster_name("BlackHoleCluster").is_none());
        assert!(parse_cluster_name("outbound|x||h").is_none());
        assert_eq!(gateway_https_route_name(443, "https", "gw", "ns"), "https.443.https.gw.ns");
    }
}
