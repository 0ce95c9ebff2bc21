//! [`SidecarScope`] (Istio's `pilot/pkg/model/sidecar.go`): what one proxy sees of the mesh under the
//! Sidecar that applies to it — the services and mesh-bound VirtualServices it imports, its outbound
//! traffic policy, and the config objects its output depends on (for push filtering).

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use api::{
    Kind, Spec,
    networking::{
        Sidecar, destination_rule::ConnectionPoolSettings,
        sidecar::outbound_traffic_policy::Mode as SidecarMode, virtual_service::Destination,
    },
};

use super::{
    IndexedDestinationRule, IndexedVirtualService, OutboundTrafficPolicy, PushContext,
    virtual_service::MESH_GATEWAY,
};
use crate::{
    Config, ConfigKey, Finding, Severity, host,
    service::{Service, compare_service_precedence},
};

/// The VirtualService and DestinationRule keys a scope reads: its VirtualServices and their
/// delegates, and every DestinationRule visible from `namespace` whose host covers one of its
/// services (a superset of the rule each service picks, so no change is missed).
fn scope_dependencies(
    push: &PushContext,
    namespace: &str,
    services: &[Arc<Service>],
    virtual_services: &[Arc<IndexedVirtualService>],
) -> HashSet<ConfigKey> {
    let mut deps = HashSet::new();
    for vs in virtual_services {
        deps.insert(vs.key.clone());
        let Spec::VirtualService(spec) = &vs.config.spec else { continue };
        for d in spec.http.iter().filter_map(|h| h.delegate.as_ref()) {
            let ns = if d.namespace.is_empty() { vs.namespace() } else { d.namespace.as_str() };
            deps.insert(ConfigKey {
                kind: Kind::VirtualService,
                namespace: ns.to_string(),
                name: d.name.clone(),
            });
        }
    }
    let root = &push.mesh.root_namespace;
    let names: HashSet<String> = services.iter().map(|s| s.hostname.to_ascii_lowercase()).collect();
    for (dr_ns, hosts) in &push.config.dr_namespace_local {
        let visible = |dr: &IndexedDestinationRule| {
            dr_ns == namespace || dr_ns == root || dr.visibility.visible(dr_ns, namespace)
        };
        let mut add = |dr: &Arc<IndexedDestinationRule>| {
            if visible(dr) {
                deps.extend(dr.keys.iter().cloned());
            }
        };
        for (host, rules) in &hosts.specific {
            if names.contains(host) {
                rules.iter().for_each(&mut add);
            }
        }
        for dr in &hosts.wildcard {
            if names.iter().any(|n| host::subset_of(n, &dr.host)) {
                add(dr);
            }
        }
    }
    deps
}

/// `service`, or a copy keeping only the aliases the Sidecar imports (Istio's `matchingAliasService`:
/// an alias hostname is checked against the hosts imported for the service's namespace).
fn imported_aliases(service: &Arc<Service>, imports: impl Fn(&str) -> bool) -> Arc<Service> {
    if service.aliases.iter().all(|a| imports(&a.hostname)) {
        return service.clone();
    }
    let mut copy = Service::clone(service);
    copy.aliases.retain(|a| imports(&a.hostname));
    Arc::new(copy)
}

/// One `namespace/host` entry of a Sidecar's `egress.hosts`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct EgressHost {
    /// `*`, a namespace name (`.` already replaced by the Sidecar's namespace) or `~` (nothing).
    namespace: String,
    /// `*`, `*.suffix` or a host.
    host: String,
}

impl EgressHost {
    fn parse(text: &str, own_namespace: &str) -> Option<EgressHost> {
        let (ns, host) = text.split_once('/')?;
        let namespace = if ns == "." { own_namespace.to_string() } else { ns.to_string() };
        Some(EgressHost { namespace, host: host.to_ascii_lowercase() })
    }

    fn namespace_matches(&self, namespace: &str) -> bool {
        self.namespace == "*" || self.namespace == namespace
    }
}

/// One Sidecar `ingress` listener (Istio's `IstioIngressListener`), as the inbound builder reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct IngressListener {
    /// `port.number`: the port the listener accepts on (Istio has no target port here).
    pub port: u32,
    /// `port.protocol`, parsed (`HTTP`, `TCP`, …).
    pub protocol: crate::Protocol,
    /// `port.name`.
    pub port_name: String,
    /// `bind`; empty: the proxy's IP.
    pub bind: String,
    /// `captureMode` is `NONE`: the listener binds its port. `IPTABLES`: a chain of `virtualInbound`.
    /// `DEFAULT` (`None` here): follows the proxy's interception mode.
    pub bind_to_port: Option<bool>,
    /// `defaultEndpoint`: `127.0.0.1:PORT`, `0.0.0.0:PORT` (the proxy's IP), `[::1]:PORT`, `[::]:PORT`
    /// or `unix:///path`.
    pub default_endpoint: String,
    /// `connectionPool` with its field path (`spec.ingress[N].connectionPool`).
    pub connection_pool: Option<(ConnectionPoolSettings, String)>,
}

/// What one sidecar (or gateway) sees of the mesh (Istio's `SidecarScope`): the services and
/// mesh-bound VirtualServices it imports and its outbound traffic policy.
#[derive(Debug)]
pub struct SidecarScope {
    /// The proxy namespace the scope was computed for.
    pub namespace: String,
    /// The Sidecar object, when one applies.
    pub sidecar: Option<ConfigKey>,
    /// Outbound traffic policy (the Sidecar's, else the mesh's).
    pub outbound_traffic_policy: OutboundTrafficPolicy,
    /// The Sidecar's `ingress` listeners (empty: inbound chains come from the proxy's service
    /// instances).
    pub ingress: Vec<IngressListener>,
    /// The Sidecar's `inboundConnectionPool`.
    pub inbound_connection_pool: Option<ConnectionPoolSettings>,
    /// `outboundTrafficPolicy.egressProxy` under `ALLOW_ANY`: where unknown traffic goes instead of
    /// `PassthroughCluster` (Istio ignores it under `REGISTRY_ONLY`).
    pub egress_proxy: Option<Destination>,
    services: Vec<Arc<Service>>,
    /// Some service is DNS-resolved (its endpoints travel in CDS).
    has_dns_services: bool,
    by_host: HashMap<String, Arc<Service>>,
    virtual_services: Vec<Arc<IndexedVirtualService>>,
    vs_exact: HashMap<String, Arc<IndexedVirtualService>>,
    vs_wildcard: Vec<(String, Arc<IndexedVirtualService>)>,
    /// VirtualServices (roots and their delegates) and DestinationRules the scope's output reads
    /// (Istio's `SidecarScope.configDependencies`).
    dependencies: HashSet<ConfigKey>,
    root_namespace: String,
    findings: Vec<Finding>,
}

impl SidecarScope {
    pub(crate) fn build(push: &PushContext, namespace: &str, sidecar: Option<&Config>) -> SidecarScope {
        let mut findings = Vec::new();
        let spec: Option<&Sidecar> = sidecar.and_then(|c| match &c.spec {
            Spec::Sidecar(s) => Some(&**s),
            _ => None,
        });
        let key = sidecar.map(|c| c.key());
        let mut unsupported = |path: String, message: &str| {
            findings.push(Finding {
                severity: Severity::Unsupported,
                config: key.clone(),
                path,
                resource: String::new(),
                message: message.to_string(),
            })
        };
        let mut egress: Option<Vec<EgressHost>> = None;
        let mut ingress = Vec::new();
        let mut outbound = push.mesh.outbound_traffic_policy;
        let mut egress_proxy = None;
        if let (Some(spec), Some(config)) = (spec, sidecar) {
            let own = &config.meta.namespace;
            let own_ns = if own == &push.mesh.root_namespace { namespace } else { own.as_str() };
            if !spec.egress.is_empty() {
                let mut hosts = Vec::new();
                for (i, e) in spec.egress.iter().enumerate() {
                    if e.port.is_some() {
                        unsupported(
                            format!("spec.egress[{i}].port"),
                            "per-port egress listeners are not built; the hosts apply to every port",
                        );
                    }
                    if !e.bind.is_empty() {
                        unsupported(format!("spec.egress[{i}].bind"), "egress bind addresses are not used");
                    }
                    if e.capture_mode != 0 {
                        unsupported(format!("spec.egress[{i}].captureMode"), "captureMode is not used");
                    }
                    hosts.extend(e.hosts.iter().filter_map(|h| EgressHost::parse(h, own_ns)));
                }
                egress = Some(hosts);
            }
            for (i, l) in spec.ingress.iter().enumerate() {
                let Some(port) = l.port.as_ref().filter(|p| p.number != 0) else {
                    unsupported(
                        format!("spec.ingress[{i}].port"),
                        "ingress listener without a port; left out",
                    );
                    continue;
                };
                if l.tls.is_some() {
                    unsupported(
                        format!("spec.ingress[{i}].tls"),
                        "TLS termination on Sidecar ingress listeners is not translated; served in plain text",
                    );
                }
                use api::networking::sidecar::CaptureMode;
                let bind_to_port = match CaptureMode::try_from(l.capture_mode) {
                    Ok(CaptureMode::None) => Some(true),
                    Ok(CaptureMode::Iptables) => Some(false),
                    _ => None,
                };
                ingress.push(IngressListener {
                    port: port.number,
                    protocol: crate::Protocol::parse(&port.protocol),
                    port_name: port.name.clone(),
                    bind: l.bind.clone(),
                    bind_to_port,
                    default_endpoint: l.default_endpoint.clone(),
                    connection_pool: l
                        .connection_pool
                        .clone()
                        .map(|p| (p, format!("spec.ingress[{i}].connectionPool"))),
                });
            }
            if let Some(policy) = &spec.outbound_traffic_policy {
                outbound = if policy.mode == SidecarMode::AllowAny as i32 {
                    OutboundTrafficPolicy::AllowAny
                } else {
                    OutboundTrafficPolicy::RegistryOnly
                };
                if outbound == OutboundTrafficPolicy::AllowAny {
                    egress_proxy = policy.egress_proxy.clone();
                }
            }
        }
        let imports = |ns: &str, hostname: &str| match &egress {
            None => true,
            Some(hosts) => {
                hosts.iter().any(|e| e.namespace_matches(ns) && host::subset_of(hostname, &e.host))
            }
        };

        let mut services = Vec::new();
        let mut by_host = HashMap::new();
        for (hostname, candidates) in &push.services.by_host {
            let chosen = candidates
                .iter()
                .filter(|s| push.service_visible(s, namespace) && imports(&s.namespace, hostname))
                .min_by(|a, b| compare_service_precedence(a, b, Some(namespace)));
            if let Some(s) = chosen {
                let s = imported_aliases(s, |alias| imports(&s.namespace, alias));
                services.push(s.clone());
                by_host.insert(hostname.clone(), s);
            }
        }

        let virtual_services: Vec<Arc<IndexedVirtualService>> = push
            .virtual_services_for_gateway(namespace, MESH_GATEWAY)
            .into_iter()
            .filter(|vs| match &egress {
                None => true,
                Some(hosts) => hosts.iter().any(|e| {
                    e.namespace_matches(vs.namespace()) && vs.hosts.iter().any(|h| host::matches(h, &e.host))
                }),
            })
            .collect();
        let mut vs_exact = HashMap::new();
        let mut vs_wildcard = Vec::new();
        for vs in &virtual_services {
            for h in &vs.hosts {
                if host::is_wildcard(h) {
                    vs_wildcard.push((h.clone(), vs.clone()));
                } else {
                    vs_exact.entry(h.clone()).or_insert_with(|| vs.clone());
                }
            }
        }
        let dependencies = scope_dependencies(push, namespace, &services, &virtual_services);
        SidecarScope {
            namespace: namespace.to_string(),
            sidecar: key,
            outbound_traffic_policy: outbound,
            ingress,
            inbound_connection_pool: spec.and_then(|s| s.inbound_connection_pool.clone()),
            egress_proxy,
            has_dns_services: services.iter().any(|s| s.resolution.is_dns()),
            services,
            by_host,
            virtual_services,
            vs_exact,
            vs_wildcard,
            dependencies,
            root_namespace: push.mesh.root_namespace.clone(),
            findings,
        }
    }

    /// The connection pool the Sidecar sets for inbound clusters on `port` (Istio's
    /// `InboundConnectionPoolForPort`), with its field path: the `ingress` entry's on that port, else
    /// `inboundConnectionPool`. It replaces the DestinationRule's pool for those clusters.
    pub fn inbound_connection_pool_for_port(&self, port: u32) -> Option<(&ConnectionPoolSettings, &str)> {
        self.ingress
            .iter()
            .filter(|l| l.port == port)
            .find_map(|l| l.connection_pool.as_ref().map(|(p, path)| (p, path.as_str())))
            .or_else(|| self.inbound_connection_pool.as_ref().map(|p| (p, "spec.inboundConnectionPool")))
    }

    /// Whether a change of the object `key` can change what this scope's proxy gets (Istio's
    /// `SidecarScope.DependsOnConfig`): a service (`{ServiceEntry, hostname, namespace}`) the scope
    /// imports; a VirtualService or DestinationRule it reads (delegates included); a Sidecar in the
    /// proxy's or the root namespace (it may be the one that applies). Other kinds always count.
    /// Check the scopes before and after a change: an object that leaves the scope matters too.
    pub fn depends_on(&self, key: &ConfigKey) -> bool {
        match key.kind {
            Kind::ServiceEntry => self.service(&key.name).is_some_and(|s| s.namespace == key.namespace),
            Kind::VirtualService | Kind::DestinationRule => self.dependencies.contains(key),
            Kind::Sidecar => {
                self.sidecar.as_ref() == Some(key)
                    || key.namespace == self.namespace
                    || key.namespace == self.root_namespace
            }
            _ => true,
        }
    }

    /// Services this proxy can reach, one per hostname, ordered by hostname.
    pub fn services(&self) -> &[Arc<Service>] {
        &self.services
    }

    /// Whether some service of the scope is DNS-resolved (`DNS` / `DNS_ROUND_ROBIN`): its cluster
    /// carries its endpoints, so outbound clusters depend on the proxy's locality.
    pub fn has_dns_services(&self) -> bool {
        self.has_dns_services
    }

    /// The service with this hostname, if the proxy can reach it.
    pub fn service(&self, hostname: &str) -> Option<&Arc<Service>> {
        self.by_host.get(hostname).or_else(|| self.by_host.get(&hostname.to_ascii_lowercase()))
    }

    /// VirtualServices bound to `mesh` that the proxy imports, oldest first.
    pub fn virtual_services(&self) -> &[Arc<IndexedVirtualService>] {
        &self.virtual_services
    }

    /// The VirtualService that routes `hostname` for this proxy: the oldest naming it exactly, else the
    /// one with the most specific matching wildcard host (oldest on ties).
    pub fn virtual_service_for(&self, hostname: &str) -> Option<&Arc<IndexedVirtualService>> {
        if let Some(vs) = self.vs_exact.get(hostname) {
            return Some(vs);
        }
        let mut best: Option<&(String, Arc<IndexedVirtualService>)> = None;
        for entry in &self.vs_wildcard {
            if host::subset_of(hostname, &entry.0) && best.is_none_or(|b| entry.0.len() > b.0.len()) {
                best = Some(entry);
            }
        }
        best.map(|b| &b.1)
    }

    /// The mesh's root namespace (as when the scope was built).
    pub fn root_namespace(&self) -> &str {
        &self.root_namespace
    }

    /// Problems found while building the scope (unsupported Sidecar fields).
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_hosts_parse() {
        let e = EgressHost::parse("./*.example.com", "ns1").unwrap();
        assert_eq!((e.namespace.as_str(), e.host.as_str()), ("ns1", "*.example.com"));
        assert!(EgressHost::parse("nohost", "ns1").is_none());
        assert!(EgressHost::parse("*/*", "ns1").unwrap().namespace_matches("x"));
    }
}
