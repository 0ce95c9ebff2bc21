//! Cluster-local hosts (Istio's `pilot/pkg/model/cluster_local.go`): services whose endpoints a proxy
//! only sees from its own cluster, even when the same hostname and namespace exist in several
//! clusters of the mesh.
//!
//! The defaults are istiod's hard-coded ones: `*.kube-system.svc.<domain>`,
//! `kubernetes.default.svc.<domain>` and the control plane's own host (the host of the mesh
//! `defaultConfig.discoveryAddress`, default `istiod.istio-system.svc:15012`, qualified with
//! `.<domain>` when it does not end with the domain). Mesh `serviceSettings` entries add hosts with
//! `settings.clusterLocal` true or false, in order (a later entry for the same host wins). An entry
//! with `clusterLocal: false` removes a default it names: the same host, or, for a wildcard default, any
//! host ending with the default's suffix (so `clusterLocal: false` for `coredns.kube-system.svc.<domain>`
//! drops the whole `*.kube-system.svc.<domain>` default, as in istiod). The remaining defaults are added
//! last, as cluster-local.
//!
//! A hostname is cluster-local when its most specific match (the exact host, else the longest matching
//! wildcard, [`crate::host::most_specific_match`]) is set cluster-local; no match: not cluster-local.

use std::collections::HashMap;

/// istiod's default discovery address (`mesh.DefaultProxyConfig().DiscoveryAddress`).
pub const DEFAULT_DISCOVERY_ADDRESS: &str = "istiod.istio-system.svc:15012";

/// One mesh `serviceSettings[]` entry: `hosts` and `settings.clusterLocal`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceSettings {
    /// `hosts`: host names or wildcards (`*.example.com`, `*`), as written.
    pub hosts: Vec<String>,
    /// `settings.clusterLocal` (default false).
    pub cluster_local: bool,
}

/// Which hostnames are cluster-local (built by [`ClusterLocalHosts::new`], held by the push snapshot:
/// rebuilt with it when the mesh config changes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterLocalHosts {
    specific: HashMap<String, bool>,
    wildcard: HashMap<String, bool>,
}

impl ClusterLocalHosts {
    /// The cluster-local hosts for `settings` (mesh `serviceSettings`, in order), the DNS
    /// `domain_suffix` and the control plane's `discovery_address` (`host:port`, mesh
    /// `defaultConfig.discoveryAddress`; see the module docs for the rules). A discovery address
    /// without a numeric port adds no host (istiod logs an error and goes on).
    pub fn new(
        settings: &[ServiceSettings],
        domain_suffix: &str,
        discovery_address: &str,
    ) -> ClusterLocalHosts {
        let mut defaults = vec![
            format!("*.kube-system.svc.{domain_suffix}"),
            format!("kubernetes.default.svc.{domain_suffix}"),
        ];
        if let Some(host) = discovery_host(discovery_address) {
            defaults.push(if host.ends_with(domain_suffix) {
                host.to_string()
            } else {
                format!("{host}.{domain_suffix}")
            });
        }
        let mut hosts = ClusterLocalHosts::default();
        for entry in settings {
            if !entry.cluster_local {
                for h in &entry.hosts {
                    defaults.retain(|d| {
                        let named = h == d || (crate::host::is_wildcard(d) && h.ends_with(&d[1..]));
                        !named
                    });
                }
            }
            for h in &entry.hosts {
                hosts.set(h, entry.cluster_local);
            }
        }
        for d in &defaults {
            hosts.set(d, true);
        }
        hosts
    }

    fn set(&mut self, host: &str, local: bool) {
        let map = if crate::host::is_wildcard(host) { &mut self.wildcard } else { &mut self.specific };
        map.insert(host.to_string(), local);
    }

    /// `true` when `hostname` is cluster-local: its most specific match is set cluster-local.
    pub fn is_cluster_local(&self, hostname: &str) -> bool {
        if !crate::host::is_wildcard(hostname)
            && let Some(local) = self.specific.get(hostname)
        {
            return *local;
        }
        crate::host::most_specific_match(hostname, self.wildcard.keys().map(String::as_str))
            .and_then(|m| self.wildcard.get(m))
            .copied()
            .unwrap_or(false)
    }
}

/// The host of `host:port` with a numeric port (Go's `net.SplitHostPort` plus istiod's `strconv.Atoi`
/// check of the port).
fn discovery_host(address: &str) -> Option<&str> {
    let (host, port) = address.rsplit_once(':')?;
    port.parse::<i64>().ok()?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    (!host.contains(':') || address.starts_with('[')).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(hosts: &[&str], cluster_local: bool) -> ServiceSettings {
        ServiceSettings { hosts: hosts.iter().map(|h| h.to_string()).collect(), cluster_local }
    }

    fn defaults() -> ClusterLocalHosts {
        ClusterLocalHosts::new(&[], "cluster.local", DEFAULT_DISCOVERY_ADDRESS)
    }

    #[test]
    fn istiod_defaults_are_cluster_local() {
        let hosts = defaults();
        assert!(hosts.is_cluster_local("kube-dns.kube-system.svc.cluster.local"));
        assert!(hosts.is_cluster_local("kubernetes.default.svc.cluster.local"));
        assert!(hosts.is_cluster_local("istiod.istio-system.svc.cluster.local"));
        assert!(!hosts.is_cluster_local("reviews.default.svc.cluster.local"));
        assert!(!hosts.is_cluster_local("kubernetes.default.svc.other.local"));
        assert!(!hosts.is_cluster_local("istiod.istio-system.svc"));
    }

    #[test]
    fn the_domain_suffix_and_discovery_address_shape_the_defaults() {
        let hosts = ClusterLocalHosts::new(&[], "corp.example", "istiod-canary.istio-system.svc:15012");
        assert!(hosts.is_cluster_local("coredns.kube-system.svc.corp.example"));
        assert!(hosts.is_cluster_local("istiod-canary.istio-system.svc.corp.example"));
        assert!(!hosts.is_cluster_local("istiod.istio-system.svc.corp.example"));
        assert!(!hosts.is_cluster_local("coredns.kube-system.svc.cluster.local"));

        // A discovery host already ending with the domain is taken as is.
        let hosts =
            ClusterLocalHosts::new(&[], "cluster.local", "istiod.istio-system.svc.cluster.local:15012");
        assert!(hosts.is_cluster_local("istiod.istio-system.svc.cluster.local"));
        // No port: no discovery host (istiod logs an error).
        let hosts = ClusterLocalHosts::new(&[], "cluster.local", "istiod.istio-system.svc");
        assert!(!hosts.is_cluster_local("istiod.istio-system.svc.cluster.local"));
        assert!(hosts.is_cluster_local("kubernetes.default.svc.cluster.local"));
    }

    #[test]
    fn service_settings_add_hosts_and_wildcards() {
        let hosts = ClusterLocalHosts::new(
            &[setting(&["*.team-a.svc.cluster.local", "db.team-b.svc.cluster.local"], true)],
            "cluster.local",
            DEFAULT_DISCOVERY_ADDRESS,
        );
        assert!(hosts.is_cluster_local("api.team-a.svc.cluster.local"));
        assert!(hosts.is_cluster_local("db.team-b.svc.cluster.local"));
        assert!(!hosts.is_cluster_local("web.team-b.svc.cluster.local"));
        assert!(hosts.is_cluster_local("kube-dns.kube-system.svc.cluster.local"));
    }

    #[test]
    fn the_most_specific_match_wins() {
        let hosts = ClusterLocalHosts::new(
            &[
                setting(&["*.svc.cluster.local"], true),
                setting(&["*.public.svc.cluster.local", "web.shop.svc.cluster.local"], false),
            ],
            "cluster.local",
            DEFAULT_DISCOVERY_ADDRESS,
        );
        assert!(hosts.is_cluster_local("api.shop.svc.cluster.local"));
        assert!(!hosts.is_cluster_local("web.shop.svc.cluster.local"));
        assert!(!hosts.is_cluster_local("api.public.svc.cluster.local"));
        // `*` covers everything; a more specific false entry still wins.
        let hosts = ClusterLocalHosts::new(
            &[setting(&["*"], true), setting(&["*.example.com"], false)],
            "cluster.local",
            DEFAULT_DISCOVERY_ADDRESS,
        );
        assert!(hosts.is_cluster_local("anything.org"));
        assert!(!hosts.is_cluster_local("a.example.com"));
    }

    #[test]
    fn a_later_entry_for_the_same_host_wins() {
        let hosts = ClusterLocalHosts::new(
            &[setting(&["db.shop.svc.cluster.local"], true), setting(&["db.shop.svc.cluster.local"], false)],
            "cluster.local",
            DEFAULT_DISCOVERY_ADDRESS,
        );
        assert!(!hosts.is_cluster_local("db.shop.svc.cluster.local"));
    }

    #[test]
    fn cluster_local_false_overrides_the_defaults_it_names() {
        let hosts = ClusterLocalHosts::new(
            &[setting(
                &["kubernetes.default.svc.cluster.local", "istiod.istio-system.svc.cluster.local"],
                false,
            )],
            "cluster.local",
            DEFAULT_DISCOVERY_ADDRESS,
        );
        assert!(!hosts.is_cluster_local("kubernetes.default.svc.cluster.local"));
        assert!(!hosts.is_cluster_local("istiod.istio-system.svc.cluster.local"));
        assert!(hosts.is_cluster_local("kube-dns.kube-system.svc.cluster.local"));

        // Naming one kube-system host drops the whole wildcard default, as istiod does.
        let hosts = ClusterLocalHosts::new(
            &[setting(&["metrics.kube-system.svc.cluster.local"], false)],
            "cluster.local",
            DEFAULT_DISCOVERY_ADDRESS,
        );
        assert!(!hosts.is_cluster_local("metrics.kube-system.svc.cluster.local"));
        assert!(!hosts.is_cluster_local("kube-dns.kube-system.svc.cluster.local"));

        // A broader false wildcard does not name the default: the default, more specific, still wins.
        let hosts = ClusterLocalHosts::new(
            &[setting(&["*.svc.cluster.local"], false)],
            "cluster.local",
            DEFAULT_DISCOVERY_ADDRESS,
        );
        assert!(hosts.is_cluster_local("kube-dns.kube-system.svc.cluster.local"));
        assert!(!hosts.is_cluster_local("reviews.default.svc.cluster.local"));

        // clusterLocal: true for a default host keeps it (defaults are only removed by false).
        let hosts = ClusterLocalHosts::new(
            &[setting(&["kubernetes.default.svc.cluster.local"], true)],
            "cluster.local",
            DEFAULT_DISCOVERY_ADDRESS,
        );
        assert!(hosts.is_cluster_local("kubernetes.default.svc.cluster.local"));
    }

    #[test]
    fn discovery_addresses_are_split_as_go_does() {
        assert_eq!(discovery_host("istiod.istio-system.svc:15012"), Some("istiod.istio-system.svc"));
        assert_eq!(discovery_host("[fd00::1]:15012"), Some("fd00::1"));
        assert_eq!(discovery_host("istiod:port"), None);
        assert_eq!(discovery_host("fd00::1:15012"), None);
        assert_eq!(discovery_host("istiod"), None);
    }
}
