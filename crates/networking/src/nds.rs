//! NDS, the name table pilot-agent's DNS proxy answers from (Istio's `pkg/dns/server/name_table.go`
//! `BuildNameTable`, served by `pilot/pkg/xds/nds.go`): every service of the proxy's Sidecar scope
//! with its addresses — Kubernetes ClusterIPs, ServiceEntry `addresses`, or the auto-allocated VIPs
//! for proxies that capture DNS — and, for headless services (`NONE` resolution without an address),
//! the IPs of their healthy endpoints on the proxy's network.
//!
//! The message is `istio.networking.nds.v1.NameTable`, written here by hand with the field numbers of
//! Istio's `pkg/dns/proto/nds.proto`. Pure: a function of the snapshot, the scope and a few node facts.

use std::{collections::BTreeMap, net::IpAddr};

use model::{
    push::{PushContext, SidecarScope},
    service::{HealthStatus, ProviderId, Resolution, Service, UNSPECIFIED_IP},
};

/// The type URL of NDS (Istio's `model.NameTableType`).
pub const NAME_TABLE_TYPE: &str = "type.googleapis.com/istio.networking.nds.v1.NameTable";

/// `istio.networking.nds.v1.NameTable`: host → [`NameInfo`]. A `BTreeMap`, so equal tables encode to
/// equal bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NameTable {
    /// Field 1, `map<string, NameInfo> table`.
    #[prost(btree_map = "string, message", tag = "1")]
    pub table: BTreeMap<String, NameInfo>,
}

/// `istio.networking.nds.v1.NameTable.NameInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NameInfo {
    /// Field 1: the addresses the host resolves to.
    #[prost(string, repeated, tag = "1")]
    pub ips: Vec<String>,
    /// Field 2: the registry (`Kubernetes`, `External`).
    #[prost(string, tag = "2")]
    pub registry: String,
    /// Field 3: the Kubernetes Service name; with [`NameInfo::namespace`] the agent answers the short
    /// forms (`name`, `name.ns`, `name.ns.svc`) itself.
    #[prost(string, tag = "3")]
    pub shortname: String,
    /// Field 4: the Kubernetes Service namespace.
    #[prost(string, tag = "4")]
    pub namespace: String,
    /// Field 5 (deprecated in Istio, never set by istiod).
    #[prost(string, repeated, tag = "5")]
    pub alt_hosts: Vec<String>,
}

impl prost::Name for NameTable {
    const NAME: &'static str = "NameTable";
    const PACKAGE: &'static str = "istio.networking.nds.v1";

    fn type_url() -> String {
        NAME_TABLE_TYPE.to_string()
    }
}

/// What the table reads of the proxy (Istio's `model.Proxy` fields `BuildNameTable` uses).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameTableProxy {
    /// The proxy consumes auto-allocated addresses (Istio's `nodeUsesAutoallocatedIPs`: auto-allocation
    /// on — `PILOT_ENABLE_IP_AUTOALLOCATE` or the node's `DNS_AUTO_ALLOCATE` — and the node captures
    /// DNS, `DNS_CAPTURE`).
    pub uses_auto_allocated: bool,
    /// The proxy has an IPv4 address (Istio's `SupportsIPv4`).
    pub ipv4: bool,
    /// The proxy has an IPv6 address.
    pub ipv6: bool,
    /// The proxy's network (`NETWORK`, empty: the default network).
    pub network: String,
}

impl NameTableProxy {
    /// Facts from the proxy's IPs; IP families as Istio's `DiscoverIPMode` (no parsable IP: IPv4).
    pub fn new<S: AsRef<str>>(ips: &[S], network: &str, uses_auto_allocated: bool) -> NameTableProxy {
        let parsed: Vec<IpAddr> = ips.iter().filter_map(|ip| ip.as_ref().parse().ok()).collect();
        let ipv6 = parsed.iter().any(IpAddr::is_ipv6);
        let ipv4 = parsed.iter().any(IpAddr::is_ipv4) || !ipv6;
        NameTableProxy { uses_auto_allocated, ipv4, ipv6, network: network.to_string() }
    }

    fn family_ok(&self, address: &str) -> bool {
        match address.parse::<IpAddr>() {
            Ok(IpAddr::V4(_)) => self.ipv4,
            Ok(IpAddr::V6(_)) => self.ipv6,
            Err(_) => true,
        }
    }
}

/// The addresses of `service` for the proxy (Istio's `GetAllAddressesForProxy` as `BuildNameTable`
/// reads it): Kubernetes ClusterIPs of the proxy's IP families; else the auto-allocated VIPs when the
/// proxy consumes them; else every address the service declares (a ServiceEntry's `addresses`:
/// Istio makes one service per address and merges their IPs). CIDR ranges are left out. Empty for a
/// service without an address (headless).
pub fn service_addresses(service: &Service, proxy: &NameTableProxy) -> Vec<String> {
    let valid = |a: &&String| a.parse::<IpAddr>().is_ok() && a.as_str() != UNSPECIFIED_IP;
    if service.registry == ProviderId::Kubernetes {
        return service.addresses.iter().filter(valid).filter(|a| proxy.family_ok(a)).cloned().collect();
    }
    if service.addresses.is_empty() && proxy.uses_auto_allocated {
        let auto: Vec<String> =
            service.auto_allocated.iter().filter(valid).filter(|a| proxy.family_ok(a)).cloned().collect();
        if !auto.is_empty() {
            return auto;
        }
    }
    service.addresses.iter().filter(valid).cloned().collect()
}

/// The IPs of a headless service's healthy endpoints (first port) on the proxy's network (Istio:
/// cluster-local or, with the default `ENABLE_MULTICLUSTER_HEADLESS`, any cluster of the same network).
fn headless_addresses(push: &PushContext, service: &Service, proxy: &NameTableProxy) -> Vec<String> {
    let Some(port) = service.ports.first() else { return Vec::new() };
    let mut out = Vec::new();
    for e in push.endpoints(&service.hostname, &service.namespace, port.port) {
        let valid = !e.addresses.is_empty() && e.addresses.iter().all(|a| a.parse::<IpAddr>().is_ok());
        if !valid || e.health_status != HealthStatus::Healthy || e.network != proxy.network {
            continue;
        }
        out.extend(e.addresses.iter().cloned());
    }
    out
}

/// Istio's `BuildNameTable` for one proxy: one entry per service of `scope` that has an address (or,
/// headless, healthy endpoints); Kubernetes entries carry the Service's name and namespace (not for
/// `.clusterset.local` hosts).
///
/// Not built (yet): the per-pod names of headless services (`pod.subdomain.ns.svc.domain`), which need
/// the pods' `hostname`/`subdomain` that the Kubernetes registry does not keep.
pub fn build_name_table(push: &PushContext, scope: &SidecarScope, proxy: &NameTableProxy) -> NameTable {
    let mut table: BTreeMap<String, NameInfo> = BTreeMap::new();
    for service in scope.services() {
        if service.is_alias() {
            continue;
        }
        let mut ips = service_addresses(service, proxy);
        if ips.is_empty() && service.resolution == Resolution::Passthrough {
            ips = headless_addresses(push, service, proxy);
        }
        if ips.is_empty() {
            continue;
        }
        let kube = service.registry == ProviderId::Kubernetes;
        let names = kube && !service.hostname.ends_with(".clusterset.local");
        match table.get_mut(&service.hostname) {
            None => {
                let info = NameInfo {
                    ips,
                    registry: service.registry.as_str().to_string(),
                    shortname: if names { service.name.clone() } else { String::new() },
                    namespace: if names { service.namespace.clone() } else { String::new() },
                    alt_hosts: Vec::new(),
                };
                table.insert(service.hostname.clone(), info);
            }
            Some(info) if info.registry != ProviderId::Kubernetes.as_str() => {
                if kube {
                    info.ips = ips;
                    info.registry = service.registry.as_str().to_string();
                    if names {
                        info.shortname = service.name.clone();
                        info.namespace = service.namespace.clone();
                    }
                } else {
                    info.ips.extend(ips);
                }
            }
            Some(_) => {}
        }
    }
    NameTable { table }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(host: &str, registry: ProviderId, addresses: &[&str], auto: &[&str]) -> Service {
        Service {
            hostname: host.into(),
            namespace: "ns".into(),
            name: host.split('.').next().unwrap().into(),
            object_name: "o".into(),
            registry,
            ports: Vec::new(),
            addresses: addresses.iter().map(|a| a.to_string()).collect(),
            resolution: Resolution::Dns,
            mesh_external: true,
            export_to: Default::default(),
            labels: Default::default(),
            label_selector: None,
            service_accounts: Vec::new(),
            creation_time: None,
            passthrough_target_ports: Default::default(),
            external_name: None,
            aliases: Vec::new(),
            auto_allocated: auto.iter().map(|a| a.to_string()).collect(),
            traffic_distribution: Default::default(),
            cluster_external_addresses: Default::default(),
        }
    }

    #[test]
    fn addresses_follow_registry_family_and_dns_capture() {
        let v4 = NameTableProxy::new(&["10.0.0.1"], "", true);
        let dual = NameTableProxy::new(&["10.0.0.1", "fd00::1"], "", true);
        let no_capture = NameTableProxy::new(&["10.0.0.1"], "", false);
        let kube = svc("a.ns.svc.cluster.local", ProviderId::Kubernetes, &["10.96.0.1", "fd00::a"], &[]);
        assert_eq!(service_addresses(&kube, &v4), ["10.96.0.1"]);
        assert_eq!(service_addresses(&kube, &dual), ["10.96.0.1", "fd00::a"]);
        let auto = svc("api.example", ProviderId::External, &[], &["240.240.0.1", "2001:2::1"]);
        assert_eq!(service_addresses(&auto, &v4), ["240.240.0.1"]);
        assert_eq!(service_addresses(&auto, &dual), ["240.240.0.1", "2001:2::1"]);
        assert!(service_addresses(&auto, &no_capture).is_empty());
        let written = svc("db.example", ProviderId::External, &["10.1.0.1", "10.2.0.0/16", "fd00::b"], &[]);
        assert_eq!(service_addresses(&written, &v4), ["10.1.0.1", "fd00::b"], "every VIP, no CIDR");
    }
}
