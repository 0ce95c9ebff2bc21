//! Networks and their east-west gateways (Istio's `pilot/pkg/model/network.go` and the Kubernetes
//! controller's `pilot/pkg/serviceregistry/kube/controller/network.go`), pure.
//!
//! * [`MeshNetworks`]: the mesh networks config (`meshNetworks`) as typed values, read from the JSON
//!   form `config::mesh_networks` checks.
//! * [`NetworkGateway`] and [`NetworkGateways`]: the gateways of every network, indexed by network and
//!   by network and cluster, with the weight scale factor of split-horizon EDS (the least common
//!   multiple of the gateway counts, istiod's `NetworkGateways.update`).
//! * The gateway sources istiod reads: the `address` gateways of `meshNetworks`
//!   ([`gateways_from_mesh_networks`], istiod's `NetworkManager.reload`) and gateway Services
//!   ([`gateways_from_service`]: a Service labelled `topology.istio.io/network`, or named by a
//!   `registryServiceName` of a network whose endpoints come `fromRegistry` the Service's cluster).
//! * [`MeshNetworks::network_for`]: the network `meshNetworks` gives an endpoint that has none
//!   (istiod's `networkFromMeshNetworks`: `fromRegistry`, then `fromCidr`).

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use serde_json::Value;

use crate::service::{LABEL_TOPOLOGY_NETWORK, Service};

/// The Service label that sets the gateway's port (`networking.istio.io/gatewayPort`; istiod reads it
/// from the labels, `label.NetworkingGatewayPort`).
pub const LABEL_GATEWAY_PORT: &str = "networking.istio.io/gatewayPort";
/// The port of a labelled gateway Service without [`LABEL_GATEWAY_PORT`] (istiod's
/// `DefaultNetworkGatewayPort`): the mTLS port of the east-west gateway.
pub const DEFAULT_GATEWAY_PORT: u32 = 15443;

/// The mesh networks config (Istio's `meshconfig.MeshNetworks`): networks by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeshNetworks {
    /// Networks by name.
    pub networks: BTreeMap<String, MeshNetwork>,
}

/// One network of [`MeshNetworks`] (Istio's `meshconfig.Network`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeshNetwork {
    /// Which endpoints belong to the network, in order.
    pub endpoints: Vec<NetworkEndpoints>,
    /// The network's gateways.
    pub gateways: Vec<MeshNetworkGateway>,
}

/// Which endpoints belong to a network (Istio's `Network.NetworkEndpoints`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetworkEndpoints {
    /// `fromCidr`: endpoints whose IP is in this CIDR.
    FromCidr(String),
    /// `fromRegistry`: endpoints read from the registry (cluster) with this id.
    FromRegistry(String),
}

/// A gateway of a network (Istio's `Network.IstioNetworkGateway`): exactly one of `address` and
/// `registry_service_name` is set (the other is empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeshNetworkGateway {
    /// `address`: an IP address (or a DNS name, which meshpilot does not resolve).
    pub address: String,
    /// `registryServiceName`: the hostname of the gateway Service in the network's registry.
    pub registry_service_name: String,
    /// `port` (1-65535).
    pub port: u32,
    /// `locality` (read, not used: istiod does not use it either).
    pub locality: String,
}

fn field<'a>(map: &'a serde_json::Map<String, Value>, json: &str, proto: &str) -> Option<&'a Value> {
    map.get(json).or_else(|| map.get(proto))
}

fn text(map: &serde_json::Map<String, Value>, json: &str, proto: &str) -> String {
    field(map, json, proto).and_then(Value::as_str).unwrap_or_default().to_string()
}

impl MeshNetworks {
    /// Reads the JSON form of mesh networks (`{"networks": {NAME: {endpoints, gateways}}}`, as
    /// `config::mesh_networks::parse_mesh_networks` returns it after its checks; JSON and proto field
    /// names both accepted).
    ///
    /// # Errors
    /// A value of the wrong shape, named by its path (`networks.n1.gateways[0].port: …`).
    pub fn from_json(value: &Value) -> Result<MeshNetworks, String> {
        let mut out = MeshNetworks::default();
        let Some(networks) = value.get("networks") else { return Ok(out) };
        let networks = networks.as_object().ok_or("networks: expected a map")?;
        for (name, network) in networks {
            let path = format!("networks.{name}");
            let network = network.as_object().ok_or_else(|| format!("{path}: expected a map"))?;
            let mut parsed = MeshNetwork::default();
            for (i, ep) in
                network.get("endpoints").and_then(Value::as_array).into_iter().flatten().enumerate()
            {
                let ep = ep.as_object().ok_or_else(|| format!("{path}.endpoints[{i}]: expected a map"))?;
                let cidr = text(ep, "fromCidr", "from_cidr");
                let registry = text(ep, "fromRegistry", "from_registry");
                if !cidr.is_empty() {
                    parsed.endpoints.push(NetworkEndpoints::FromCidr(cidr));
                } else if !registry.is_empty() {
                    parsed.endpoints.push(NetworkEndpoints::FromRegistry(registry));
                }
            }
            for (i, gw) in network.get("gateways").and_then(Value::as_array).into_iter().flatten().enumerate()
            {
                let gw_path = format!("{path}.gateways[{i}]");
                let gw = gw.as_object().ok_or_else(|| format!("{gw_path}: expected a map"))?;
                let port = match gw.get("port") {
                    Some(Value::Number(n)) => n.as_u64(),
                    Some(Value::String(s)) => s.parse().ok(),
                    _ => None,
                }
                .and_then(|p| u32::try_from(p).ok())
                .filter(|p| (1..=65535).contains(p))
                .ok_or_else(|| format!("{gw_path}.port: expected a port number 1-65535"))?;
                parsed.gateways.push(MeshNetworkGateway {
                    address: text(gw, "address", "address"),
                    registry_service_name: text(gw, "registryServiceName", "registry_service_name"),
                    port,
                    locality: text(gw, "locality", "locality"),
                });
            }
            out.networks.insert(name.clone(), parsed);
        }
        Ok(out)
    }

    /// The network `meshNetworks` assigns to an endpoint with address `ip` read from cluster
    /// `cluster_id`, for endpoints that carry none (istiod's `Controller.Network` steps 3:
    /// `networkFromMeshNetworks`): the network whose endpoints are `fromRegistry: CLUSTER_ID` (the
    /// first by name when several list it: istiod warns and keeps one), else the network of a
    /// `fromCidr` range holding the IP (the widest range first, as istiod's CIDR ranger returns them;
    /// ties by network name). `None` when neither applies.
    pub fn network_for<'a>(&'a self, ip: &str, cluster_id: &str) -> Option<&'a str> {
        if !cluster_id.is_empty()
            && let Some((name, _)) = self.networks_from_registry(cluster_id).next()
        {
            return Some(name);
        }
        let ip: IpAddr = ip.parse().ok()?;
        let mut best: Option<(u8, &str)> = None;
        for (name, network) in &self.networks {
            for ep in &network.endpoints {
                let NetworkEndpoints::FromCidr(cidr) = ep else { continue };
                let Some(prefix) = cidr_contains(cidr, ip) else { continue };
                if best.is_none_or(|(b, _)| prefix < b) {
                    best = Some((prefix, name));
                }
            }
        }
        best.map(|(_, name)| name)
    }

    /// The networks whose endpoints are `fromRegistry: cluster_id`.
    fn networks_from_registry<'a>(
        &'a self,
        cluster_id: &str,
    ) -> impl Iterator<Item = (&'a String, &'a MeshNetwork)> {
        self.networks.iter().filter(move |(_, n)| {
            n.endpoints.iter().any(|e| matches!(e, NetworkEndpoints::FromRegistry(r) if r == cluster_id))
        })
    }
}

/// The prefix length of `cidr` when it holds `ip` (an IP without a prefix is a host range), else
/// `None` (also for a malformed CIDR, which istiod skips with a warning).
fn cidr_contains(cidr: &str, ip: IpAddr) -> Option<u8> {
    let (addr, len) = cidr.split_once('/').unwrap_or((cidr, ""));
    let net: IpAddr = addr.parse().ok()?;
    let max = if net.is_ipv4() { 32 } else { 128 };
    let len: u8 = if len.is_empty() { max } else { len.parse().ok()? };
    if len > max {
        return None;
    }
    let (a, b, bits) = match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => (u128::from(u32::from(n)), u128::from(u32::from(i)), 32),
        (IpAddr::V6(n), IpAddr::V6(i)) => (u128::from(n), u128::from(i), 128),
        _ => return None,
    };
    let shift = bits - u32::from(len);
    let same = if shift >= 128 { true } else { (a >> shift) == (b >> shift) };
    same.then_some(len)
}

/// One east-west gateway of a network (Istio's `model.NetworkGateway`, without the ambient HBONE
/// port): traffic for endpoints of `network` (in `cluster`) enters through `address:port`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetworkGateway {
    /// The gateway's address: an IP (istiod's `Addr`); sorted first, as `SortGateways`.
    pub address: String,
    /// The gateway's mTLS port (15443 by default).
    pub port: u32,
    /// The network it leads into.
    pub network: String,
    /// The cluster it belongs to; empty for `meshNetworks` `address` gateways (istiod: "TODO: Add
    /// Cluster to the API").
    pub cluster: String,
}

/// The gateways of every network (Istio's `model.NetworkGateways`), each list sorted by address then
/// port; built once per push context.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkGateways {
    by_network: BTreeMap<String, Vec<NetworkGateway>>,
    by_network_and_cluster: BTreeMap<(String, String), Vec<NetworkGateway>>,
    lcm: u32,
}

impl NetworkGateways {
    /// Indexes `gateways` (duplicates count once). The scale factor is the least common multiple of the
    /// number of gateways of every network and of every (network, cluster) pair (istiod's
    /// `NetworkGateways.update`); 1 with no gateways.
    pub fn new(gateways: impl IntoIterator<Item = NetworkGateway>) -> NetworkGateways {
        let set: BTreeSet<NetworkGateway> = gateways.into_iter().collect();
        let mut by_network: BTreeMap<String, Vec<NetworkGateway>> = BTreeMap::new();
        let mut by_network_and_cluster: BTreeMap<(String, String), Vec<NetworkGateway>> = BTreeMap::new();
        for gw in set {
            by_network.entry(gw.network.clone()).or_default().push(gw.clone());
            by_network_and_cluster.entry((gw.network.clone(), gw.cluster.clone())).or_default().push(gw);
        }
        let counts = by_network.values().chain(by_network_and_cluster.values()).map(Vec::len);
        let lcm = counts.fold(1u64, |acc, n| lcm(acc, n as u64)).min(u64::from(u32::MAX));
        NetworkGateways { by_network, by_network_and_cluster, lcm: u32::try_from(lcm).unwrap_or(u32::MAX) }
    }

    /// Whether any network has a gateway (istiod's `IsMultiNetworkEnabled`): only then does EDS
    /// split the horizon.
    pub fn is_multi_network(&self) -> bool {
        !self.by_network.is_empty()
    }

    /// The weight scale factor of split-horizon EDS (istiod's `GetLBWeightScaleFactor`).
    pub fn scale_factor(&self) -> u32 {
        self.lcm.max(1)
    }

    /// The gateways of `network` in `cluster`, or when there are none, of `network` in any cluster
    /// (istiod's `selectNetworkGateways`).
    pub fn for_endpoint(&self, network: &str, cluster: &str) -> &[NetworkGateway] {
        let key = (network.to_string(), cluster.to_string());
        match self.by_network_and_cluster.get(&key) {
            Some(g) if !g.is_empty() => g,
            _ => self.by_network.get(network).map_or(&[], Vec::as_slice),
        }
    }

    /// Every gateway, by network then address.
    pub fn all(&self) -> impl Iterator<Item = &NetworkGateway> {
        self.by_network.values().flatten()
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: u64, b: u64) -> u64 {
    if a == 0 || b == 0 { a.max(b) } else { a / gcd(a, b) * b }
}

/// The `address` gateways of `meshNetworks` (istiod's `NetworkManager.reload`), cluster empty. An
/// address that is not an IP is left out: istiod resolves such names by DNS
/// (`RESOLVE_HOSTNAME_GATEWAYS`), meshpilot does not (yet).
pub fn gateways_from_mesh_networks(networks: &MeshNetworks) -> Vec<NetworkGateway> {
    let mut out = Vec::new();
    for (name, network) in &networks.networks {
        for gw in &network.gateways {
            if gw.address.parse::<IpAddr>().is_ok() {
                out.push(NetworkGateway {
                    address: gw.address.clone(),
                    port: gw.port,
                    network: name.clone(),
                    cluster: String::new(),
                });
            }
        }
    }
    out
}

/// The gateways a Service stands for in each cluster it has external addresses in
/// ([`Service::cluster_external_addresses`]: its load balancer's ingress addresses and `externalIPs`),
/// one per address, as istiod's `extractGatewaysInner` / `getGatewayDetails` (run by each cluster's
/// registry, `CLUSTER_ID` being that cluster):
/// * labelled `topology.istio.io/network: NET`: a gateway into `NET` on the port of the label
///   [`LABEL_GATEWAY_PORT`] (default [`DEFAULT_GATEWAY_PORT`]); the Service must have that port, else
///   it is no gateway (istiod warns);
/// * else, its hostname is the `registryServiceName` of a gateway of a network whose endpoints are
///   `fromRegistry: CLUSTER_ID`: a gateway into that network on the gateway's port.
///
/// Addresses that are not IPs are left out (istiod resolves host names by DNS; meshpilot does not).
pub fn gateways_from_service(service: &Service, networks: &MeshNetworks) -> Vec<NetworkGateway> {
    let mut out = Vec::new();
    for (cluster_id, addresses) in &service.cluster_external_addresses {
        for (network, port) in gateway_ports(service, networks, cluster_id) {
            for address in addresses.iter().filter(|a| a.parse::<IpAddr>().is_ok()) {
                out.push(NetworkGateway {
                    address: address.clone(),
                    port,
                    network: network.clone(),
                    cluster: cluster_id.clone(),
                });
            }
        }
    }
    out
}

/// The (network, port) pairs `service` is a gateway for in cluster `cluster_id` (istiod's
/// `getGatewayDetails`).
fn gateway_ports(service: &Service, networks: &MeshNetworks, cluster_id: &str) -> Vec<(String, u32)> {
    let mut ports: Vec<(String, u32)> = Vec::new();
    if let Some(network) = service.labels.get(LABEL_TOPOLOGY_NETWORK).filter(|n| !n.is_empty()) {
        let port = match service.labels.get(LABEL_GATEWAY_PORT) {
            Some(p) => p.parse().unwrap_or(DEFAULT_GATEWAY_PORT),
            None => DEFAULT_GATEWAY_PORT,
        };
        if service.port_by_number(port).is_some() {
            ports.push((network.clone(), port));
        }
    } else {
        for (name, network) in networks.networks_from_registry(cluster_id) {
            for gw in &network.gateways {
                if !gw.registry_service_name.is_empty() && gw.registry_service_name == service.hostname {
                    ports.push((name.clone(), gw.port));
                }
            }
        }
    }
    ports
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{Port, ProviderId, Resolution};
    use api::protocol::Protocol;
    use serde_json::json;

    fn gw(address: &str, port: u32, network: &str, cluster: &str) -> NetworkGateway {
        NetworkGateway { address: address.into(), port, network: network.into(), cluster: cluster.into() }
    }

    fn networks() -> MeshNetworks {
        MeshNetworks::from_json(&json!({"networks": {
            "net1": {"endpoints": [{"fromRegistry": "cluster1"}],
                     "gateways": [{"registryServiceName": "eastwest.istio-system.svc.cluster.local", "port": 15443},
                                  {"address": "1.1.1.1", "port": 15443}]},
            "net2": {"endpoints": [{"fromCidr": "10.0.0.0/8"}, {"from_cidr": "10.1.0.0/16"}],
                     "gateways": [{"address": "2.2.2.2", "port": "15443"}, {"address": "gw.example.com", "port": 443}]},
            "net3": {"endpoints": [{"fromCidr": "10.1.2.0/24"}]}
        }}))
        .unwrap()
    }

    #[test]
    fn mesh_networks_address_gateways_are_gateways_and_host_names_are_left_out() {
        let gws = gateways_from_mesh_networks(&networks());
        assert_eq!(gws, vec![gw("1.1.1.1", 15443, "net1", ""), gw("2.2.2.2", 15443, "net2", "")]);
        let err =
            MeshNetworks::from_json(&json!({"networks": {"n": {"gateways": [{"address": "1.1.1.1"}]}}}));
        assert_eq!(err.unwrap_err(), "networks.n.gateways[0].port: expected a port number 1-65535");
    }

    #[test]
    fn endpoints_without_a_network_get_one_from_registry_then_the_widest_cidr() {
        let n = networks();
        assert_eq!(n.network_for("10.1.2.3", "cluster1"), Some("net1"), "fromRegistry comes first");
        assert_eq!(n.network_for("10.1.2.3", "other"), Some("net2"), "10.0.0.0/8 is the widest range");
        assert_eq!(n.network_for("10.200.0.1", ""), Some("net2"));
        assert_eq!(n.network_for("192.168.0.1", "other"), None);
        assert_eq!(n.network_for("not-an-ip", "other"), None);
    }

    fn gateway_service(labels: &[(&str, &str)], ports: &[u32], addresses: &[&str]) -> Service {
        let cluster = if labels.is_empty() { "cluster1" } else { "c9" };
        Service {
            hostname: "eastwest.istio-system.svc.cluster.local".into(),
            namespace: "istio-system".into(),
            name: "eastwest".into(),
            object_name: "eastwest".into(),
            registry: ProviderId::Kubernetes,
            ports: ports
                .iter()
                .map(|p| Port { name: format!("p{p}"), port: *p, protocol: Protocol::Tls })
                .collect(),
            addresses: vec!["10.96.0.9".into()],
            resolution: Resolution::ClientSideLb,
            mesh_external: false,
            export_to: Default::default(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            label_selector: None,
            service_accounts: Vec::new(),
            creation_time: None,
            passthrough_target_ports: Default::default(),
            external_name: None,
            aliases: Vec::new(),
            auto_allocated: Vec::new(),
            traffic_distribution: Default::default(),
            cluster_external_addresses: if addresses.is_empty() {
                BTreeMap::new()
            } else {
                BTreeMap::from([(cluster.to_string(), addresses.iter().map(|a| a.to_string()).collect())])
            },
        }
    }

    #[test]
    fn labelled_services_are_gateways_on_their_port() {
        let none = MeshNetworks::default();
        let svc =
            gateway_service(&[(LABEL_TOPOLOGY_NETWORK, "net9")], &[15443, 15021], &["3.3.3.3", "lb.example"]);
        assert_eq!(gateways_from_service(&svc, &none), vec![gw("3.3.3.3", 15443, "net9", "c9")]);
        let custom = gateway_service(
            &[(LABEL_TOPOLOGY_NETWORK, "net9"), (LABEL_GATEWAY_PORT, "16443")],
            &[16443],
            &["3.3.3.3"],
        );
        assert_eq!(gateways_from_service(&custom, &none), vec![gw("3.3.3.3", 16443, "net9", "c9")]);
        let no_port = gateway_service(&[(LABEL_TOPOLOGY_NETWORK, "net9")], &[80], &["3.3.3.3"]);
        assert!(gateways_from_service(&no_port, &none).is_empty(), "the Service lacks port 15443");
        let no_address = gateway_service(&[(LABEL_TOPOLOGY_NETWORK, "net9")], &[15443], &[]);
        assert!(gateways_from_service(&no_address, &none).is_empty());
    }

    #[test]
    fn registry_service_name_gateways_need_their_cluster_in_from_registry() {
        let mut svc = gateway_service(&[], &[15443], &["4.4.4.4"]);
        assert_eq!(gateways_from_service(&svc, &networks()), vec![gw("4.4.4.4", 15443, "net1", "cluster1")]);
        svc.cluster_external_addresses =
            BTreeMap::from([("cluster2".to_string(), vec!["4.4.4.4".to_string()])]);
        assert!(gateways_from_service(&svc, &networks()).is_empty(), "cluster2 is in no fromRegistry");
    }

    #[test]
    fn gateways_are_picked_by_network_and_cluster_and_scaled_by_the_lcm_of_their_counts() {
        let gws = NetworkGateways::new([
            gw("2.0.0.2", 15443, "a", "c1"),
            gw("2.0.0.1", 15443, "a", "c1"),
            gw("2.0.0.3", 15443, "a", "c2"),
            gw("3.0.0.1", 15443, "b", ""),
            gw("3.0.0.1", 15443, "b", ""),
        ]);
        assert!(gws.is_multi_network());
        // Counts: network a 3, network b 1, (a, c1) 2, (a, c2) 1, (b, "") 1 → lcm 6.
        assert_eq!(gws.scale_factor(), 6);
        assert_eq!(
            gws.for_endpoint("a", "c1"),
            &[gw("2.0.0.1", 15443, "a", "c1"), gw("2.0.0.2", 15443, "a", "c1")]
        );
        assert_eq!(gws.for_endpoint("a", "c3").len(), 3, "no gateway in c3: every gateway of the network");
        assert!(gws.for_endpoint("z", "").is_empty());
        let none = NetworkGateways::new([]);
        assert!(!none.is_multi_network());
        assert_eq!(none.scale_factor(), 1);
    }
}
