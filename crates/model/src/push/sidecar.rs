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
        Sidecar, destination_rule::ConnectionPoolSettings, gateway::ServerTlsSettings,
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

/// One egress entry before its imports are resolved.
struct EgressEntry {
    path: String,
    port: Option<EgressPort>,
    bind: String,
    capture_none: Option<bool>,
    /// `None`: everything visible (no Sidecar egress section).
    hosts: Option<Vec<EgressHost>>,
}

impl EgressEntry {
    fn imports(&self, ns: &str, hostname: &str) -> bool {
        match &self.hosts {
            None => true,
            Some(hosts) => {
                hosts.iter().any(|e| e.namespace_matches(ns) && host::subset_of(hostname, &e.host))
            }
        }
    }

    /// The entry's services (Istio's `selectServices`: one per hostname by precedence, aliases it
    /// imports, trimmed to the entry's port) and the `mesh_vs` its hosts name.
    fn import(
        self,
        push: &PushContext,
        namespace: &str,
        mesh_vs: &[Arc<IndexedVirtualService>],
    ) -> EgressListener {
        let mut services = Vec::new();
        for (hostname, candidates) in &push.services.by_host {
            let chosen = candidates
                .iter()
                .filter(|s| push.service_visible(s, namespace) && self.imports(&s.namespace, hostname))
                .min_by(|a, b| compare_service_precedence(a, b, Some(namespace)));
            let Some(s) = chosen else { continue };
            let mut s = imported_aliases(s, |alias| self.imports(&s.namespace, alias));
            if let Some(port) = self.port.as_ref().filter(|p| p.matches_services()) {
                // Istio's `serviceMatchingListenerPort`: only services with the listener's port, with
                // that port alone.
                let Some(p) = s.port_by_number(port.number) else { continue };
                if s.ports.len() > 1 {
                    let mut trimmed = Service::clone(&s);
                    trimmed.ports = vec![p.clone()];
                    s = Arc::new(trimmed);
                }
            }
            services.push(s);
        }
        let virtual_services = mesh_vs
            .iter()
            .filter(|vs| match &self.hosts {
                None => true,
                Some(hosts) => hosts.iter().any(|e| {
                    e.namespace_matches(vs.namespace()) && vs.hosts.iter().any(|h| host::matches(h, &e.host))
                }),
            })
            .cloned()
            .collect();
        EgressListener {
            path: self.path,
            port: self.port,
            bind: self.bind,
            capture_none: self.capture_none,
            imports: Arc::new(Imports::new(services, virtual_services)),
        }
    }
}

/// Istio's scope inference from VirtualServices (`SidecarScope` construction in `sidecar.go`): the
/// destinations (routes, mirrors; HTTP routes whose `match` names another `sourceNamespace` left
/// out) of the VirtualServices each egress listener imports add their services to the scope when
/// the scope has no service of that hostname yet — the one in the proxy's `namespace`, else the
/// best visible one ([`compare_service_precedence`]: Kubernetes first, then the oldest) — trimmed
/// to the listener's port (an entry with a port) or to the ports the destinations name (none named:
/// every port; none of them on the service: not added). They give clusters (and name-table entries),
/// not listeners: the egress listeners keep their own imports.
fn with_destination_services(
    push: &PushContext,
    namespace: &str,
    egress: &[EgressListener],
    all: Arc<Imports>,
) -> Arc<Imports> {
    let mut added: std::collections::BTreeMap<String, Arc<Service>> = std::collections::BTreeMap::new();
    for e in egress {
        for vs in e.imports.virtual_services() {
            for (hostname, ports) in destination_hosts(vs, namespace, &push.mesh.domain_suffix) {
                if all.by_host.contains_key(&hostname) || added.contains_key(&hostname) {
                    continue;
                }
                let Some(candidates) = push.services.by_host.get(&hostname) else { continue };
                let chosen = candidates.iter().find(|s| s.namespace == namespace).or_else(|| {
                    candidates
                        .iter()
                        .filter(|s| push.service_visible(s, namespace))
                        .min_by(|a, b| compare_service_precedence(a, b, Some(namespace)))
                });
                let Some(s) = chosen else { continue };
                let wanted: Vec<u32> = match e.port.as_ref().filter(|p| p.matches_services()) {
                    Some(p) => vec![p.number],
                    None if ports.contains(&0) => Vec::new(),
                    None => ports.into_iter().collect(),
                };
                let s = if wanted.is_empty() {
                    s.clone()
                } else {
                    let kept: Vec<_> = s.ports.iter().filter(|p| wanted.contains(&p.port)).cloned().collect();
                    if kept.is_empty() {
                        continue;
                    }
                    if kept.len() == s.ports.len() {
                        s.clone()
                    } else {
                        let mut trimmed = Service::clone(s);
                        trimmed.ports = kept;
                        Arc::new(trimmed)
                    }
                };
                added.insert(hostname, s);
            }
        }
    }
    if added.is_empty() {
        return all;
    }
    let mut services = all.services.clone();
    services.extend(added.into_values());
    services.sort_by_key(|a| a.hostname.to_ascii_lowercase());
    Arc::new(Imports::new(services, all.virtual_services.clone()))
}

/// The destination hosts of `vs` (qualified in its namespace) with the port numbers they name (0: a
/// destination without a port), Istio's `virtualServiceDestinationsFilteredBySourceNamespace` for a
/// proxy in `namespace`.
fn destination_hosts(
    vs: &IndexedVirtualService,
    namespace: &str,
    domain_suffix: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<u32>> {
    let mut out: std::collections::BTreeMap<String, std::collections::BTreeSet<u32>> =
        std::collections::BTreeMap::new();
    let mut add = |d: &Destination| {
        let hostname = host::resolve_short_name(&d.host, vs.namespace(), domain_suffix).to_ascii_lowercase();
        out.entry(hostname).or_default().insert(d.port.as_ref().map_or(0, |p| p.number));
    };
    let spec = vs.spec();
    for h in &spec.http {
        let named: Vec<&str> =
            h.r#match.iter().map(|m| m.source_namespace.as_str()).filter(|n| !n.is_empty()).collect();
        if !named.is_empty() && !named.contains(&namespace) {
            continue;
        }
        h.route.iter().filter_map(|r| r.destination.as_ref()).for_each(&mut add);
        h.mirror.iter().for_each(&mut add);
        h.mirrors.iter().filter_map(|m| m.destination.as_ref()).for_each(&mut add);
    }
    for t in &spec.tcp {
        t.route.iter().filter_map(|r| r.destination.as_ref()).for_each(&mut add);
    }
    for t in &spec.tls {
        t.route.iter().filter_map(|r| r.destination.as_ref()).for_each(&mut add);
    }
    out
}

/// What several egress listeners import together (Istio's `collectImportedServices` /
/// `appendSidecarServices`): the first entry's service for a hostname; a later entry's service of the
/// same namespace, registry and resolution adds the ports it lacks. VirtualServices in `mesh_vs` order.
fn union(egress: &[EgressListener], mesh_vs: Vec<Arc<IndexedVirtualService>>) -> Imports {
    let mut services: std::collections::BTreeMap<String, Arc<Service>> = std::collections::BTreeMap::new();
    for e in egress {
        for s in e.imports.services() {
            let key = s.hostname.to_ascii_lowercase();
            let Some(existing) = services.get_mut(&key) else {
                services.insert(key, s.clone());
                continue;
            };
            let mergeable = existing.namespace == s.namespace
                && existing.registry == s.registry
                && existing.resolution == s.resolution;
            if Arc::ptr_eq(existing, s) || !mergeable {
                continue;
            }
            let missing: Vec<_> =
                s.ports.iter().filter(|p| existing.port_by_number(p.port).is_none()).cloned().collect();
            if !missing.is_empty() {
                let mut merged = Service::clone(existing);
                merged.ports.extend(missing);
                *existing = Arc::new(merged);
            }
        }
    }
    let imported: HashSet<*const IndexedVirtualService> =
        egress.iter().flat_map(|e| e.imports.virtual_services().iter().map(Arc::as_ptr)).collect();
    let virtual_services = mesh_vs.into_iter().filter(|vs| imported.contains(&Arc::as_ptr(vs))).collect();
    Imports::new(services.into_values().collect(), virtual_services)
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
    /// `tls` with its field path (`spec.ingress[N].tls`): server TLS terminated on this port. Only
    /// with `ENABLE_TLS_ON_SIDECAR_INGRESS` (`MeshSettings::enable_tls_on_sidecar_ingress`), as istiod;
    /// otherwise `None` and reported.
    pub tls: Option<(ServerTlsSettings, String)>,
}

/// What one egress listener — or the whole scope — imports: services by hostname and the mesh-bound
/// VirtualServices (Istio's `IstioEgressListenerWrapper.services` / `virtualServices`).
#[derive(Debug, Default)]
pub struct Imports {
    services: Vec<Arc<Service>>,
    by_host: HashMap<String, Arc<Service>>,
    virtual_services: Vec<Arc<IndexedVirtualService>>,
    vs_exact: HashMap<String, Arc<IndexedVirtualService>>,
    vs_wildcard: Vec<(String, Arc<IndexedVirtualService>)>,
}

impl Imports {
    /// `services` ordered by hostname (one per hostname), `virtual_services` oldest first.
    fn new(services: Vec<Arc<Service>>, virtual_services: Vec<Arc<IndexedVirtualService>>) -> Imports {
        let by_host = services.iter().map(|s| (s.hostname.to_ascii_lowercase(), s.clone())).collect();
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
        Imports { services, by_host, virtual_services, vs_exact, vs_wildcard }
    }

    /// The imported services, one per hostname, ordered by hostname.
    pub fn services(&self) -> &[Arc<Service>] {
        &self.services
    }

    /// The imported service with this hostname.
    pub fn service(&self, hostname: &str) -> Option<&Arc<Service>> {
        self.by_host.get(hostname).or_else(|| self.by_host.get(&hostname.to_ascii_lowercase()))
    }

    /// The imported VirtualServices bound to `mesh`, oldest first.
    pub fn virtual_services(&self) -> &[Arc<IndexedVirtualService>] {
        &self.virtual_services
    }

    /// The VirtualService that routes `hostname`: the oldest naming it exactly, else the one with the
    /// most specific matching wildcard host (oldest on ties).
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
}

/// The `port` of a Sidecar egress listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressPort {
    /// `port.number`; 0 with a `unix://` bind (a Unix domain socket listener).
    pub number: u32,
    /// `port.protocol`, parsed; it decides the listener's kind (HTTP, TCP, sniffed), not the services'.
    pub protocol: crate::Protocol,
    /// `port.name`.
    pub name: String,
}

impl EgressPort {
    /// Whether the listener imports only services with this port (Istio's `needsPortMatch`): not
    /// for a Unix socket (number 0) nor an `HTTP_PROXY` listener.
    pub fn matches_services(&self) -> bool {
        self.number != 0 && self.protocol != crate::Protocol::HttpProxy
    }

    /// Whether meshpilot builds the listener: not for Unix sockets nor `HTTP_PROXY` (reported).
    pub fn is_built(&self) -> bool {
        self.matches_services()
    }
}

/// Prefix of a Unix domain socket address in a Sidecar `bind` (Istio's `model.UnixAddressPrefix`).
pub const UNIX_ADDRESS_PREFIX: &str = "unix://";

/// One Sidecar `egress` listener (Istio's `IstioEgressListenerWrapper`), or the implicit catch-all
/// (`*/*`) of a proxy without a Sidecar egress section.
#[derive(Debug)]
pub struct EgressListener {
    /// Field path of the entry (`spec.egress[N]`); empty for the implicit catch-all.
    pub path: String,
    /// `port`: a listener on that port for the entry's hosts only; `None`: the catch-all, a listener
    /// per service port not claimed by an earlier entry.
    pub port: Option<EgressPort>,
    /// `bind`: an IP, `unix:///path`, or empty (the service VIPs, the wildcard, or loopback when the
    /// listener binds its port).
    pub bind: String,
    /// `captureMode: NONE` (`Some(true)`), `IPTABLES` (`Some(false)`), `DEFAULT` (`None`).
    pub capture_none: Option<bool>,
    /// The services (trimmed to `port` when the entry has one, except `HTTP_PROXY` and Unix sockets,
    /// as Istio's `serviceMatchingListenerPort`) and VirtualServices of the entry's `hosts`; shared
    /// with the scope's when it is the only entry.
    pub imports: Arc<Imports>,
}

impl EgressListener {
    /// Whether Envoy binds the listener's port itself (Istio's `bindToPort` in
    /// `buildSidecarOutboundListeners`): always without traffic capture (`proxy_capture` false); else
    /// with `captureMode: NONE` or a Unix socket bind; otherwise the listener only receives what
    /// `virtualOutbound` hands it.
    pub fn bind_to_port(&self, proxy_capture: bool) -> bool {
        !proxy_capture || self.capture_none == Some(true) || self.bind.starts_with(UNIX_ADDRESS_PREFIX)
    }
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
    /// The egress listeners in the Sidecar's order, the catch-all (if any) last; one catch-all
    /// importing everything visible without a Sidecar egress section.
    pub egress: Vec<EgressListener>,
    /// Everything the egress listeners import (Istio's `collectImportedServices`): the first entry
    /// importing a hostname gives its service, later entries add the ports it lacks.
    all: Arc<Imports>,
    /// Some service is DNS-resolved (its endpoints travel in CDS).
    has_dns_services: bool,
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
        // The egress entries: (path, port, bind, captureMode NONE?, hosts); `None` hosts import
        // everything visible (the implicit `*/*` catch-all).
        let mut entries: Vec<EgressEntry> = Vec::new();
        let mut ingress = Vec::new();
        let mut outbound = push.mesh.outbound_traffic_policy;
        let mut egress_proxy = None;
        if let (Some(spec), Some(config)) = (spec, sidecar) {
            let own = &config.meta.namespace;
            let own_ns = if own == &push.mesh.root_namespace { namespace } else { own.as_str() };
            for (i, e) in spec.egress.iter().enumerate() {
                use api::networking::sidecar::CaptureMode;
                let port = e.port.as_ref().map(|p| EgressPort {
                    number: p.number,
                    protocol: crate::Protocol::parse(&p.protocol),
                    name: p.name.clone(),
                });
                if port.as_ref().is_some_and(|p| p.number == 0 || p.protocol == crate::Protocol::HttpProxy) {
                    unsupported(
                        format!("spec.egress[{i}].port"),
                        "Unix domain socket and HTTP_PROXY egress listeners are not built (their hosts are imported)",
                    );
                }
                entries.push(EgressEntry {
                    path: format!("spec.egress[{i}]"),
                    port,
                    bind: e.bind.clone(),
                    capture_none: match CaptureMode::try_from(e.capture_mode) {
                        Ok(CaptureMode::None) => Some(true),
                        Ok(CaptureMode::Iptables) => Some(false),
                        _ => None,
                    },
                    hosts: Some(e.hosts.iter().filter_map(|h| EgressHost::parse(h, own_ns)).collect()),
                });
            }
            for (i, l) in spec.ingress.iter().enumerate() {
                let Some(port) = l.port.as_ref().filter(|p| p.number != 0) else {
                    unsupported(
                        format!("spec.ingress[{i}].port"),
                        "ingress listener without a port; left out",
                    );
                    continue;
                };
                // As istiod: the `tls` block takes effect only with ENABLE_TLS_ON_SIDECAR_INGRESS.
                let tls = match &l.tls {
                    Some(tls) if push.mesh.enable_tls_on_sidecar_ingress => {
                        Some((tls.clone(), format!("spec.ingress[{i}].tls")))
                    }
                    Some(_) => {
                        unsupported(
                            format!("spec.ingress[{i}].tls"),
                            "ignored as istiod ignores it unless ENABLE_TLS_ON_SIDECAR_INGRESS=true; the port \
                             is served as without tls",
                        );
                        None
                    }
                    None => None,
                };
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
                    tls,
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
        if spec.is_none_or(|s| s.egress.is_empty()) {
            entries.push(EgressEntry {
                path: String::new(),
                port: None,
                bind: String::new(),
                capture_none: None,
                hosts: None,
            });
        }
        let mesh_vs = push.virtual_services_for_gateway(namespace, MESH_GATEWAY);
        let egress: Vec<EgressListener> =
            entries.into_iter().map(|e| e.import(push, namespace, &mesh_vs)).collect();

        let all = match egress.as_slice() {
            [only] => only.imports.clone(),
            _ => Arc::new(union(&egress, mesh_vs)),
        };
        let all = with_destination_services(push, namespace, &egress, all);
        let services = all.services();
        let virtual_services = all.virtual_services();
        let dependencies = scope_dependencies(push, namespace, services, virtual_services);
        SidecarScope {
            namespace: namespace.to_string(),
            sidecar: key,
            outbound_traffic_policy: outbound,
            ingress,
            inbound_connection_pool: spec.and_then(|s| s.inbound_connection_pool.clone()),
            egress_proxy,
            egress,
            has_dns_services: services.iter().any(|s| s.resolution.is_dns()),
            all,
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
        self.all.services()
    }

    /// Whether some service of the scope is DNS-resolved (`DNS` / `DNS_ROUND_ROBIN`): its cluster
    /// carries its endpoints, so outbound clusters depend on the proxy's locality.
    pub fn has_dns_services(&self) -> bool {
        self.has_dns_services
    }

    /// The service with this hostname, if the proxy can reach it.
    pub fn service(&self, hostname: &str) -> Option<&Arc<Service>> {
        self.all.service(hostname)
    }

    /// VirtualServices bound to `mesh` that the proxy imports, oldest first.
    pub fn virtual_services(&self) -> &[Arc<IndexedVirtualService>] {
        self.all.virtual_services()
    }

    /// The VirtualService that routes `hostname` for this proxy: the oldest naming it exactly, else the
    /// one with the most specific matching wildcard host (oldest on ties).
    pub fn virtual_service_for(&self, hostname: &str) -> Option<&Arc<IndexedVirtualService>> {
        self.all.virtual_service_for(hostname)
    }

    /// Everything the scope imports.
    pub fn imports(&self) -> &Imports {
        &self.all
    }

    /// The egress listener whose imports a sidecar route table on `port` serves (Istio's
    /// `GetEgressListenerForRDS`): the first entry with that port, else the catch-all; `None` when
    /// neither exists (a Sidecar whose entries all have other ports).
    pub fn egress_for_port(&self, port: u32) -> Option<&EgressListener> {
        self.egress.iter().find(|e| e.port.as_ref().is_none_or(|p| p.number == port))
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
    fn egress_listeners_bind_their_port_as_istio_decides() {
        let listener = |bind: &str, capture_none| EgressListener {
            path: String::new(),
            port: None,
            bind: bind.to_string(),
            capture_none,
            imports: Arc::default(),
        };
        // Without capture every listener binds.
        assert!(listener("", Some(false)).bind_to_port(false));
        // With capture: captureMode NONE or a Unix socket binds; DEFAULT / IPTABLES do not.
        assert!(listener("", Some(true)).bind_to_port(true));
        assert!(listener("unix:///var/run/app.sock", None).bind_to_port(true));
        assert!(!listener("127.0.0.1", None).bind_to_port(true));
        assert!(!listener("", Some(false)).bind_to_port(true));
        let port = |number, protocol| EgressPort { number, protocol, name: String::new() };
        assert!(port(8080, crate::Protocol::Http).matches_services());
        assert!(!port(0, crate::Protocol::Http).is_built());
        assert!(!port(3128, crate::Protocol::HttpProxy).matches_services());
    }

    #[test]
    fn egress_hosts_parse() {
        let e = EgressHost::parse("./*.example.com", "ns1").unwrap();
        assert_eq!((e.namespace.as_str(), e.host.as_str()), ("ns1", "*.example.com"));
        assert!(EgressHost::parse("nohost", "ns1").is_none());
        assert!(EgressHost::parse("*/*", "ns1").unwrap().namespace_matches("x"));
    }
}
