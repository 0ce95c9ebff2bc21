//! Helpers shared by analyzers (Istio's `pkg/config/analysis/analyzers/util`): scoped host names,
//! the host → service table built from ServiceEntries and Kubernetes Services, `ns/name` references.

use std::collections::BTreeMap;

use api::{Kind, Spec};

use crate::{Context, resource::kinds};

/// `svc.cluster.local`: the suffix of Kubernetes service host names.
pub const DEFAULT_CLUSTER_LOCAL_DOMAIN: &str = "svc.cluster.local";
/// `exportTo` value: the object's own namespace.
pub const EXPORT_TO_NAMESPACE_LOCAL: &str = ".";
/// `exportTo` value: every namespace.
pub const EXPORT_TO_ALL_NAMESPACES: &str = "*";
/// The reserved gateway name of the sidecars.
pub const MESH_GATEWAY: &str = "mesh";
/// The annotation restricting a Service's visibility (`networking.istio.io/exportTo`).
pub const EXPORT_TO_ANNOTATION: &str = "networking.istio.io/exportTo";

/// Istio's `ConvertHostToFQDN`: a host without a dot (and not a wildcard) becomes
/// `host.namespace.svc.cluster.local`.
pub fn host_to_fqdn(namespace: &str, host: &str) -> String {
    if !host.starts_with('*') && !host.contains('.') {
        format!("{host}.{namespace}.{DEFAULT_CLUSTER_LOCAL_DOMAIN}")
    } else {
        host.to_string()
    }
}

/// `scope/fqdn`: a host as seen from the namespaces of `scope` (`*` = all) — Istio's `ScopedFqdn`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopedFqdn {
    /// A namespace, or `*`.
    pub scope: String,
    /// The fully qualified host.
    pub fqdn: String,
}

impl ScopedFqdn {
    /// `host` (qualified with `namespace` when short) visible in `scope`.
    pub fn new(scope: &str, namespace: &str, host: &str) -> ScopedFqdn {
        ScopedFqdn { scope: scope.to_string(), fqdn: host_to_fqdn(namespace, host) }
    }
}

impl std::fmt::Display for ScopedFqdn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.scope, self.fqdn)
    }
}

/// `(namespace, name)` of the Kubernetes service a host names (Istio's `GetResourceNameFromHost`):
/// `name.ns.svc.cluster.local` → `(ns, name)`; any other host → `(default_namespace, host)`.
pub fn resource_name_from_host(default_namespace: &str, host: &str) -> (String, String) {
    match full_name_from_fqdn(host) {
        Some((ns, name)) => (ns, name),
        None => (default_namespace.to_string(), host.to_string()),
    }
}

/// `name.ns.svc.cluster.local` → `(ns, name)` (Istio's `GetFullNameFromFQDN`, greedy on the name).
pub fn full_name_from_fqdn(fqdn: &str) -> Option<(String, String)> {
    let rest = fqdn.strip_suffix(".svc.cluster.local")?;
    let (name, ns) = rest.rsplit_once('.')?;
    (!name.is_empty() && !ns.is_empty()).then(|| (ns.to_string(), name.to_string()))
}

/// `ns/name` → `(ns, name)`; `name` → `(namespace, name)` (Istio's `resource.NewShortOrFullName`).
pub fn short_or_full_name(namespace: &str, name: &str) -> (String, String) {
    match name.split_once('/') {
        Some((ns, n)) => (ns.to_string(), n.to_string()),
        None => (namespace.to_string(), name.to_string()),
    }
}

/// `ns/name`, or `name` without a namespace (Istio's `FullName.String`).
pub fn full_name(namespace: &str, name: &str) -> String {
    if namespace.is_empty() { name.to_string() } else { format!("{namespace}/{name}") }
}

/// One port of a [`ServiceInfo`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePort {
    /// Port number.
    pub number: u32,
    /// Port name.
    pub name: String,
    /// Protocol as written.
    pub protocol: String,
}

/// What a host resolves to: the ports of the ServiceEntry or Kubernetes Service defining it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ServiceInfo {
    /// The ports.
    pub ports: Vec<ServicePort>,
    /// A ServiceEntry's `workloadSelector.labels` (empty for Kubernetes Services, as Istio's table).
    pub workload_selector: BTreeMap<String, String>,
}

/// Istio's `InitServiceEntryHostMap`: every host of every ServiceEntry (per `exportTo` scope) and every
/// Kubernetes Service (`name.ns.svc.cluster.local`, per its `networking.istio.io/exportTo` annotation).
/// Later definitions of the same scoped host replace earlier ones.
pub fn service_entry_host_map(ctx: &Context<'_>) -> BTreeMap<ScopedFqdn, ServiceInfo> {
    let mut result = BTreeMap::new();
    for r in ctx.istio(Kind::ServiceEntry) {
        let Spec::ServiceEntry(se) = r.spec() else { continue };
        let info = ServiceInfo {
            ports: se
                .ports
                .iter()
                .map(|p| ServicePort { number: p.number, name: p.name.clone(), protocol: p.protocol.clone() })
                .collect(),
            workload_selector: se.workload_selector.as_ref().map(|w| w.labels.clone()).unwrap_or_default(),
        };
        let ns = r.namespace();
        let mut exports_to_all = false;
        for h in &se.hosts {
            if se.export_to.is_empty() || exports_to_all {
                result.insert(ScopedFqdn::new(EXPORT_TO_ALL_NAMESPACES, ns, h), info.clone());
                continue;
            }
            for e in &se.export_to {
                match e.as_str() {
                    EXPORT_TO_ALL_NAMESPACES => {
                        result.insert(ScopedFqdn::new(EXPORT_TO_ALL_NAMESPACES, ns, h), info.clone());
                        exports_to_all = true;
                    }
                    EXPORT_TO_NAMESPACE_LOCAL => {
                        result.insert(ScopedFqdn::new(ns, ns, h), info.clone());
                    }
                    other => {
                        result.insert(ScopedFqdn::new(other, ns, h), info.clone());
                    }
                }
                if exports_to_all {
                    break;
                }
            }
        }
    }
    for s in ctx.kube(kinds::SERVICE) {
        let ports = s
            .pointer("/spec/ports")
            .and_then(serde_json::Value::as_array)
            .map(|ports| {
                ports
                    .iter()
                    .map(|p| ServicePort {
                        number: p.get("port").and_then(serde_json::Value::as_u64).unwrap_or(0) as u32,
                        name: p.get("name").and_then(serde_json::Value::as_str).unwrap_or("").to_string(),
                        protocol: p
                            .get("protocol")
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let info = ServiceInfo { ports, workload_selector: BTreeMap::new() };
        let ns = s.ns();
        let scopes: Vec<String> = match s.annotations.get(EXPORT_TO_ANNOTATION) {
            None => vec![EXPORT_TO_ALL_NAMESPACES.to_string()],
            Some(anno) if anno.is_empty() => vec![EXPORT_TO_ALL_NAMESPACES.to_string()],
            Some(anno) => anno
                .split(',')
                .map(str::trim)
                .map(|e| if e == EXPORT_TO_NAMESPACE_LOCAL { ns.to_string() } else { e.to_string() })
                .collect(),
        };
        for scope in scopes {
            result.insert(ScopedFqdn::new(&scope, ns, &s.name), info.clone());
        }
    }
    result
}

/// Istio's `GetDestinationHost`: the service `host` resolves to from namespace `source_ns` (with the
/// referring object's `export_to`): an exact scoped match, else a wildcard ServiceEntry host visible
/// there whose suffix matches.
pub fn destination_host<'a>(
    source_ns: &str,
    export_to: &[String],
    host: &str,
    hosts: &'a BTreeMap<ScopedFqdn, ServiceInfo>,
) -> Option<&'a ServiceInfo> {
    if let Some(s) = hosts.get(&ScopedFqdn::new(EXPORT_TO_ALL_NAMESPACES, source_ns, host)) {
        return Some(s);
    }
    if export_to.is_empty() {
        if let Some(s) = hosts.get(&ScopedFqdn::new(source_ns, source_ns, host)) {
            return Some(s);
        }
    } else {
        for e in export_to {
            let scope = if e == EXPORT_TO_NAMESPACE_LOCAL { source_ns } else { e.as_str() };
            if let Some(s) = hosts.get(&ScopedFqdn::new(scope, source_ns, host)) {
                return Some(s);
            }
        }
    }
    let host_suffix = host.strip_prefix('*').unwrap_or(host);
    hosts.iter().find_map(|(key, s)| {
        let suffix = key.fqdn.strip_prefix('*')?;
        if key.scope != EXPORT_TO_ALL_NAMESPACES && key.scope != source_ns {
            return None;
        }
        host_suffix.ends_with(suffix).then_some(s)
    })
}

/// Istio's `host.NamesForNamespace`: the hosts of `ns/host` entries visible from `namespace` (`ns` is
/// `namespace` or `*`), plus plain hosts, with the namespace part stripped.
pub fn names_for_namespace<'a>(hosts: &'a [String], namespace: &str) -> Vec<&'a str> {
    hosts
        .iter()
        .filter_map(|h| match h.split_once('/') {
            Some((ns, host)) => (ns == namespace || ns == "*").then_some(host),
            None => Some(h.as_str()),
        })
        .collect()
}

/// `true` when every `selector` entry is among `labels` (Kubernetes' `SelectorFromSet`; an empty
/// selector matches everything).
pub fn selector_matches(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// `k1=v1,k2=v2` in key order (Kubernetes' `labels.Set.String`).
pub fn labels_string(labels: &BTreeMap<String, String>) -> String {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_as_istio() {
        assert_eq!(host_to_fqdn("ns", "reviews"), "reviews.ns.svc.cluster.local");
        assert_eq!(host_to_fqdn("ns", "*.com"), "*.com");
        assert_eq!(
            full_name_from_fqdn("a.b.ns.svc.cluster.local"),
            Some(("ns".to_string(), "a.b".to_string()))
        );
        assert_eq!(resource_name_from_host("d", "x.com"), ("d".to_string(), "x.com".to_string()));
        assert_eq!(short_or_full_name("d", "ns/g"), ("ns".to_string(), "g".to_string()));
        let hosts = vec!["ns1/a.com".to_string(), "*/b.com".to_string(), "c.com".to_string()];
        assert_eq!(names_for_namespace(&hosts, "ns2"), ["b.com", "c.com"]);
    }
}
