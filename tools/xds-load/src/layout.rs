//! The synthetic mesh shared by `xds-load gen` (config files) and `xds-load run` (node identities):
//! one formula for names, namespaces, IPs and labels, so every simulated proxy is a workload the
//! control plane knows (its WorkloadEntry has the proxy's IP and labels), and Sidecar scoping and
//! inbound listeners are what a real pod would get.
//!
//! - service `i` (0-based): ServiceEntry `svc-<i>` in namespace `ns-<i mod namespaces>`, host
//!   `svc-<i>.<ns>.svc.cluster.local`, port `http` 80 → 8080, STATIC, selecting `app: svc-<i>`;
//! - sidecar `j`: workload of service `j mod services`, WorkloadEntry `svc-<s>-<j>` at
//!   [`Layout::proxy_ip`]`(j)` with labels `app: svc-<s>`, `version: v1`, service account `svc-<s>`;
//!   node id `sidecar~<ip>~svc-<s>-<j>.<ns>~<ns>.svc.cluster.local`;
//! - router `j`: `router~<ip>~istio-ingressgateway-<j>.istio-system~istio-system.svc.cluster.local`,
//!   labels `istio: ingressgateway` (no WorkloadEntry).
//!
//! `gen` writes the layout as `.xds-load.json` beside the config (a hidden file: config sources skip
//! it), and `run --config-dir DIR` reads it back.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Name of the layout file `gen` writes into the config directory.
pub const LAYOUT_FILE: &str = ".xds-load.json";

/// The synthetic mesh's size and options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Number of services (ServiceEntries).
    pub services: u32,
    /// Number of namespaces `ns-0 … ns-<n-1>` the services are spread over (round robin).
    pub namespaces: u32,
    /// Number of sidecar workloads (WorkloadEntries) `gen` writes; `run` may simulate fewer or more.
    pub workloads: u32,
    /// A `Sidecar` named `default` in each namespace imports only `./*` and `istio-system/*`
    /// (Istio's namespace isolation).
    pub sidecar_scope: bool,
    /// A VirtualService per service (retries, timeout), except `svc-0`.
    pub virtual_services: bool,
    /// DNS domain suffix.
    pub domain: String,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            services: 100,
            namespaces: 10,
            workloads: 200,
            sidecar_scope: false,
            virtual_services: true,
            domain: "cluster.local".to_string(),
        }
    }
}

/// Kind of proxy a stream impersonates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ProxyType {
    /// An application sidecar (`sidecar~`), one per workload of the layout.
    Sidecar,
    /// An ingress gateway (`router~`) in `istio-system`, labels `istio: ingressgateway`.
    Router,
}

/// The identity of one simulated proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyIdentity {
    /// Node id `TYPE~IP~NAME.NS~NS.svc.DOMAIN`.
    pub node_id: String,
    /// Config namespace.
    pub namespace: String,
    /// Workload labels.
    pub labels: Vec<(String, String)>,
    /// Instance IP.
    pub ip: String,
    /// Workload name (`WORKLOAD_NAME`).
    pub workload: String,
    /// Service account.
    pub service_account: String,
}

impl Layout {
    /// Namespace of service `i`.
    pub fn service_namespace(&self, i: u32) -> String {
        format!("ns-{}", i % self.namespaces.max(1))
    }

    /// Hostname of service `i`.
    pub fn service_host(&self, i: u32) -> String {
        format!("svc-{i}.{}.svc.{}", self.service_namespace(i), self.domain)
    }

    /// IP of workload `j`: `10.<1 + j/62500>.<(j/250) mod 250>.<1 + j mod 250>` (never `10.255.*`,
    /// which markers use; never `.0` or `.255`).
    pub fn proxy_ip(j: u32) -> String {
        format!("10.{}.{}.{}", 1 + j / 62_500, (j / 250) % 250, 1 + j % 250)
    }

    /// The identity of stream `j` of `kind`.
    pub fn proxy(&self, kind: ProxyType, j: u32) -> ProxyIdentity {
        let ip = Self::proxy_ip(j);
        match kind {
            ProxyType::Sidecar => {
                let s = j % self.services.max(1);
                let ns = self.service_namespace(s);
                let app = format!("svc-{s}");
                ProxyIdentity {
                    node_id: format!("sidecar~{ip}~{app}-{j}.{ns}~{ns}.svc.{}", self.domain),
                    namespace: ns,
                    labels: vec![("app".into(), app.clone()), ("version".into(), "v1".into())],
                    ip,
                    workload: app.clone(),
                    service_account: app,
                }
            }
            ProxyType::Router => ProxyIdentity {
                node_id: format!(
                    "router~{ip}~istio-ingressgateway-{j}.istio-system~istio-system.svc.{}",
                    self.domain
                ),
                namespace: "istio-system".into(),
                labels: vec![("istio".into(), "ingressgateway".into())],
                ip,
                workload: "istio-ingressgateway".into(),
                service_account: "istio-ingressgateway".into(),
            },
        }
    }

    /// Reads `DIR/.xds-load.json`, if present.
    ///
    /// # Errors
    /// The file exists but cannot be read or is not a layout.
    pub fn read(dir: &Path) -> anyhow::Result<Option<Layout>> {
        let path = dir.join(LAYOUT_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                Ok(Some(serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_follow_the_layout() {
        let l = Layout { services: 10, namespaces: 3, ..Layout::default() };
        let p = l.proxy(ProxyType::Sidecar, 14);
        assert_eq!(p.node_id, "sidecar~10.1.0.15~svc-4-14.ns-1~ns-1.svc.cluster.local");
        assert_eq!(p.namespace, "ns-1");
        assert_eq!(l.service_host(4), "svc-4.ns-1.svc.cluster.local");
        assert_eq!(Layout::proxy_ip(62_499), "10.1.249.250");
        assert_eq!(Layout::proxy_ip(62_500), "10.2.0.1");
        assert!(l.proxy(ProxyType::Router, 0).node_id.starts_with("router~10.1.0.1~istio-ingressgateway-0."));
    }
}
