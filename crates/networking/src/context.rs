//! What the generators read: the asking proxy ([`ProxyContext`]) and an immutable snapshot of config
//! and services with its indexes ([`PushContext`]).
//!
//! ```text
//!  ConfigStore ── VirtualService, DestinationRule, Gateway, Sidecar ──┐
//!  ServiceDiscovery ── services, endpoints per (host, namespace, port) ┼─► PushContext::new
//!  MeshSettings (root namespace, exportTo default, outbound policy, …) ┘        │
//!                                                                               │ Arc-shared parts:
//!   config indexes (VS by host/gateway, DR by namespace/host, gateways, sidecars)
//!   service index (by hostname) · endpoint index (per host/ns/port) · sidecar scope cache
//!                                                                               │
//!  ProxyContext (node: kind, IPs, namespace, labels, interception, generator) ──┴─► generators
//! ```
//!
//! Follows Istio's `PushContext` (`pilot/pkg/model/push_context.go`) and `SidecarScope`
//! (`pilot/pkg/model/sidecar.go`): VirtualService hosts are qualified with
//! `ResolveShortnameToFQDN`; a DestinationRule is found in the proxy's namespace first, then exported
//! from the service's namespace, then from the root namespace; a Sidecar's `egress.hosts`
//! (`namespace/host`) restricts the services and VirtualServices a sidecar sees, by default everything
//! exported to its namespace. A snapshot never changes; [`PushContext::with_endpoints`] makes a new one
//! that shares every config index and only re-reads the endpoints of the services named (the EDS path).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    sync::{Arc, LazyLock, Mutex},
};

use api::{
    Kind, Spec,
    networking::{
        DestinationRule, Gateway, Sidecar, VirtualService,
        sidecar::outbound_traffic_policy::Mode as SidecarMode,
    },
};
use model::{
    Config, ConfigKey, ConfigStore, ServiceDiscovery,
    service::{
        Endpoint, ExportTo, Labels, Service, ServiceInstance, compare_service_precedence, labels_match,
    },
};

use crate::{Finding, Severity, delegate, host, naming::MESH_GATEWAY, route::resolve_gateway_name};

/// Kind of proxy asking (the first field of the node id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProxyKind {
    /// A workload's sidecar (`sidecar`).
    Sidecar,
    /// A gateway (`router`).
    Router,
}

/// How traffic reaches a sidecar (node metadata `INTERCEPTION_MODE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum InterceptionMode {
    /// iptables REDIRECT to the virtual listeners 15001/15006 (Istio's default).
    #[default]
    Redirect,
    /// iptables TPROXY to the virtual listeners (transparent).
    Tproxy,
    /// No capture: outbound listeners bind their own ports; no virtual listeners, no inbound listeners
    /// derived from services.
    None,
}

impl InterceptionMode {
    /// Reads `REDIRECT`, `TPROXY` or `NONE` (any other value: `REDIRECT`, as Istio).
    pub fn parse(text: &str) -> InterceptionMode {
        match text {
            "NONE" => InterceptionMode::None,
            "TPROXY" => InterceptionMode::Tproxy,
            _ => InterceptionMode::Redirect,
        }
    }
}

/// Treatment of outbound traffic to destinations the mesh does not know (mesh config
/// `outboundTrafficPolicy.mode`, overridable per Sidecar).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OutboundTrafficPolicy {
    /// Forward it to its original destination (`PassthroughCluster`). Istio's default.
    #[default]
    AllowAny,
    /// Drop it (`BlackHoleCluster`, HTTP 502 from the `block_all` virtual host).
    RegistryOnly,
}

/// What the generators need to know about the proxy asking. Built by the xDS server from the node
/// (`TYPE~IP~ID~DOMAIN` and metadata); tests build it directly.
#[derive(Clone, Debug)]
pub struct ProxyContext {
    /// Node id (`sidecar~10.1.2.3~reviews-v1-abc.bookinfo~bookinfo.svc.cluster.local`), for findings.
    pub id: String,
    /// Sidecar or gateway.
    pub kind: ProxyKind,
    /// The proxy's IPs (`INSTANCE_IPS`, else the node id's IP).
    pub ips: Vec<String>,
    /// Config namespace (`NAMESPACE`, else from the DNS domain).
    pub namespace: String,
    /// Workload labels (`LABELS`).
    pub labels: Labels,
    /// DNS domain of the proxy (`bookinfo.svc.cluster.local`): short host forms in virtual hosts
    /// are derived from it.
    pub dns_domain: String,
    /// `INTERCEPTION_MODE`.
    pub interception_mode: InterceptionMode,
    /// `GENERATOR=grpc`: a proxyless gRPC client (API listeners, its own route and cluster shapes).
    pub proxyless_grpc: bool,
    /// `ISTIO_VERSION` (informational).
    pub istio_version: String,
    /// Address outbound and gateway listeners bind to (`0.0.0.0`, Istio's wildcard); `127.0.0.1` in
    /// loopback tests. Listener names follow it (`0.0.0.0_80`, `127.0.0.1_80`).
    pub bind_address: String,
    /// The service instances this proxy's workload serves (Istio's `ServiceTargets`), from
    /// [`ServiceDiscovery::proxy_instances`]; see [`ProxyContext::set_instances_from`].
    pub service_instances: Vec<ServiceInstance>,
}

impl ProxyContext {
    /// A proxy of `kind` in `namespace` with Istio's defaults: no IPs or labels, DNS domain
    /// `<namespace>.svc.cluster.local`, REDIRECT interception, Envoy (not proxyless), bound to
    /// `0.0.0.0`.
    pub fn new(kind: ProxyKind, namespace: &str) -> ProxyContext {
        let prefix = match kind {
            ProxyKind::Sidecar => "sidecar",
            ProxyKind::Router => "router",
        };
        ProxyContext {
            id: format!("{prefix}~0.0.0.0~proxy.{namespace}~{namespace}.svc.cluster.local"),
            kind,
            ips: Vec::new(),
            namespace: namespace.to_string(),
            labels: Labels::new(),
            dns_domain: format!("{namespace}.svc.cluster.local"),
            interception_mode: InterceptionMode::Redirect,
            proxyless_grpc: false,
            istio_version: String::new(),
            bind_address: "0.0.0.0".to_string(),
            service_instances: Vec::new(),
        }
    }

    /// Fills [`service_instances`](ProxyContext::service_instances) from `discovery`: the instances at
    /// the proxy's IPs, in its namespace (Istio's `GetProxyServiceTargets`).
    pub fn set_instances_from(&mut self, discovery: &dyn ServiceDiscovery) {
        self.service_instances = if self.ips.is_empty() {
            Vec::new()
        } else {
            discovery.proxy_instances(&self.ips, Some(&self.namespace))
        };
    }

    /// `true` for a sidecar.
    pub fn is_sidecar(&self) -> bool {
        self.kind == ProxyKind::Sidecar
    }
}

/// Mesh-wide settings (the parts of Istio's `MeshConfig` the generators use).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeshSettings {
    /// Namespace whose Sidecar and DestinationRules apply mesh-wide (`rootNamespace`, default
    /// `istio-system`).
    pub root_namespace: String,
    /// `exportTo` of services, VirtualServices and DestinationRules that declare none
    /// (`defaultServiceExportTo` & co); empty means `*`.
    pub default_export_to: BTreeSet<ExportTo>,
    /// `outboundTrafficPolicy.mode` (default `ALLOW_ANY`).
    pub outbound_traffic_policy: OutboundTrafficPolicy,
    /// Upstream connect timeout (`connectTimeout`, default 10 s).
    pub connect_timeout: std::time::Duration,
    /// DNS domain suffix (`--domain`, default `cluster.local`).
    pub domain_suffix: String,
}

impl Default for MeshSettings {
    fn default() -> Self {
        MeshSettings {
            root_namespace: "istio-system".to_string(),
            default_export_to: BTreeSet::new(),
            outbound_traffic_policy: OutboundTrafficPolicy::AllowAny,
            connect_timeout: std::time::Duration::from_secs(10),
            domain_suffix: "cluster.local".to_string(),
        }
    }
}

/// `exportTo` of an object, with the mesh default applied when it declares none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Visibility(BTreeSet<ExportTo>);

impl Visibility {
    fn new(declared: impl IntoIterator<Item = ExportTo>, default: &BTreeSet<ExportTo>) -> Visibility {
        let declared: BTreeSet<ExportTo> = declared.into_iter().collect();
        Visibility(if declared.is_empty() { default.clone() } else { declared })
    }

    /// `true` if an object in `owner` namespace is visible from `viewer` namespace.
    fn visible(&self, owner: &str, viewer: &str) -> bool {
        if self.0.is_empty() {
            return true;
        }
        self.0.iter().any(|e| match e {
            ExportTo::Public => true,
            ExportTo::Private => owner == viewer,
            ExportTo::None => false,
            ExportTo::Namespace(ns) => ns == viewer,
        })
    }

    fn is_private_only(&self) -> bool {
        !self.0.is_empty() && self.0.iter().all(|e| matches!(e, ExportTo::Private | ExportTo::None))
    }
}

static EMPTY_VS: LazyLock<VirtualService> = LazyLock::new(VirtualService::default);
static EMPTY_GW: LazyLock<Gateway> = LazyLock::new(Gateway::default);

/// A VirtualService with its hosts and gateways resolved.
#[derive(Debug)]
pub struct IndexedVirtualService {
    /// The object.
    pub config: Arc<Config>,
    /// Its key.
    pub key: ConfigKey,
    /// `hosts`, lower-cased, short names qualified (`reviews` → `reviews.<ns>.svc.<suffix>`).
    pub hosts: Vec<String>,
    /// `gateways` resolved to `mesh` or `namespace/name`; `[mesh]` when none is given.
    pub gateways: Vec<String>,
    /// The spec with delegate routes merged in, when it delegates.
    merged: Option<VirtualService>,
    visibility: Visibility,
}

impl IndexedVirtualService {
    /// The spec, with the routes of its delegates merged in (Istio's `MergeHTTPRoutes`).
    pub fn spec(&self) -> &VirtualService {
        if let Some(merged) = &self.merged {
            return merged;
        }
        match &self.config.spec {
            Spec::VirtualService(vs) => vs,
            _ => &EMPTY_VS,
        }
    }

    /// The namespace the object lives in.
    pub fn namespace(&self) -> &str {
        &self.key.namespace
    }

    /// `true` if bound to `gateway` (`mesh` or `namespace/name`).
    pub fn bound_to(&self, gateway: &str) -> bool {
        self.gateways.iter().any(|g| g == gateway)
    }
}

/// A DestinationRule (or several for the same host in one namespace, merged as Istio does) with its
/// host resolved.
#[derive(Debug)]
pub struct IndexedDestinationRule {
    /// The objects merged into this rule, the one whose traffic policy wins first.
    pub keys: Vec<ConfigKey>,
    /// Namespace of the objects.
    pub namespace: String,
    /// `host`, lower-cased and qualified.
    pub host: String,
    /// The merged rule: the first rule's traffic policy (or a later one's, if the first has none),
    /// subsets of all rules (the first of a name wins).
    pub rule: DestinationRule,
    /// `workloadSelector.matchLabels`, when set: the rule applies only to those workloads of its
    /// namespace.
    pub selector: Option<Labels>,
    visibility: Visibility,
}

/// A Gateway selected by labels.
#[derive(Debug)]
pub struct IndexedGateway {
    /// The object.
    pub config: Arc<Config>,
    /// `namespace/name`, as VirtualServices refer to it.
    pub name: String,
}

impl IndexedGateway {
    /// The spec.
    pub fn spec(&self) -> &Gateway {
        match &self.config.spec {
            Spec::Gateway(gw) => gw,
            _ => &EMPTY_GW,
        }
    }
}

/// DestinationRules of one namespace by host.
#[derive(Debug, Default)]
struct DrHosts {
    specific: HashMap<String, Vec<Arc<IndexedDestinationRule>>>,
    wildcard: Vec<Arc<IndexedDestinationRule>>,
}

impl DrHosts {
    fn insert(&mut self, dr: Arc<IndexedDestinationRule>) {
        if host::is_wildcard(&dr.host) {
            self.wildcard.push(dr);
        } else {
            self.specific.entry(dr.host.clone()).or_default().push(dr);
        }
    }

    /// The rules for the most specific host matching `hostname`.
    fn lookup(&self, hostname: &str) -> Vec<&Arc<IndexedDestinationRule>> {
        if let Some(rules) = self.specific.get(hostname) {
            return rules.iter().collect();
        }
        let best = host::most_specific_match(hostname, self.wildcard.iter().map(|d| d.host.as_str()));
        match best {
            Some(best) => self.wildcard.iter().filter(|d| d.host == best).collect(),
            None => Vec::new(),
        }
    }
}

/// Config indexes: rebuilt when config changes, shared by endpoint-only snapshots.
#[derive(Debug, Default)]
struct ConfigIndex {
    virtual_services: Vec<Arc<IndexedVirtualService>>,
    vs_by_gateway: HashMap<String, Vec<Arc<IndexedVirtualService>>>,
    dr_namespace_local: HashMap<String, DrHosts>,
    dr_exported: HashMap<String, DrHosts>,
    gateways: Vec<Arc<IndexedGateway>>,
    sidecars: HashMap<String, Vec<Arc<Config>>>,
    findings: Vec<Finding>,
}

/// Services by hostname.
#[derive(Debug, Default)]
struct ServiceIndex {
    all: Vec<Arc<Service>>,
    by_host: BTreeMap<String, Vec<Arc<Service>>>,
}

/// Endpoints per (hostname, namespace, port).
type EndpointIndex = HashMap<(String, String, u32), Arc<[Arc<Endpoint>]>>;

pub(crate) type ScopeKey = (String, Option<ConfigKey>);

/// An immutable snapshot of config and services with the indexes the generators use (Istio's
/// `PushContext`). Cheap to share: hold it in an `Arc`; every part is itself shared.
#[derive(Debug)]
pub struct PushContext {
    version: String,
    mesh: Arc<MeshSettings>,
    config: Arc<ConfigIndex>,
    services: Arc<ServiceIndex>,
    endpoints: Arc<EndpointIndex>,
    scopes: Arc<Mutex<HashMap<ScopeKey, Arc<SidecarScope>>>>,
    sidecar_routes: Arc<Mutex<HashMap<SidecarRouteKey, SharedRoute>>>,
    gateway_servers: Arc<Mutex<HashMap<Labels, SharedGatewayServers>>>,
}

/// The servers of the gateways selecting a router, merged by port, and the findings met merging them
/// (Istio's `MergedGateway`), shared by every router with the same labels.
pub(crate) type SharedGatewayServers =
    Arc<(std::collections::BTreeMap<u32, crate::gateway::MergedPort>, Vec<Finding>)>;

/// What a sidecar's outbound route configuration `PORT` depends on besides the snapshot's config and
/// services (never endpoints): the scope, the DNS domain (short virtual-host domains), proxyless, and
/// the workload labels only when the scope can tell workloads apart (a VirtualService match with
/// `sourceLabels`, or a DestinationRule with a workload selector in the proxy's namespace).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SidecarRouteKey {
    pub port: u32,
    pub scope: ScopeKey,
    pub dns_domain: String,
    pub proxyless: bool,
    pub labels: Option<Labels>,
}

/// A generated route configuration (encoded) and the findings met making it, shared by every proxy with the
/// same [`SidecarRouteKey`].
pub(crate) type SharedRoute = Arc<(Vec<u8>, Vec<Finding>)>;

/// Kinds the generators do not translate, with what that means for traffic.
const UNTRANSLATED_KINDS: &[(Kind, &str)] = &[
    (Kind::EnvoyFilter, "its patches are not applied"),
    (Kind::PeerAuthentication, "no mutual TLS is set up or required between workloads"),
    (Kind::AuthorizationPolicy, "requests are not authorized by it (everything is allowed)"),
    (Kind::RequestAuthentication, "JWTs are not validated"),
    (Kind::Telemetry, "its metrics, logging and tracing settings are not applied"),
    (Kind::WasmPlugin, "the plugin is not loaded"),
    (Kind::TrafficExtension, "the extension is not loaded"),
    (Kind::ProxyConfig, "proxy settings are not changed"),
];

/// Istio's ordering of configs: older first, then namespace and name.
fn by_creation(a: &Arc<Config>, b: &Arc<Config>) -> std::cmp::Ordering {
    a.meta
        .creation_timestamp
        .cmp(&b.meta.creation_timestamp)
        .then_with(|| a.meta.namespace.cmp(&b.meta.namespace))
        .then_with(|| a.meta.name.cmp(&b.meta.name))
}

fn list_sorted(store: &dyn ConfigStore, kind: Kind) -> Vec<Arc<Config>> {
    let mut out = store.list(kind, None);
    out.sort_by(by_creation);
    out
}

fn domain_suffix<'a>(config: &'a Config, mesh: &'a MeshSettings) -> &'a str {
    if config.meta.domain_suffix.is_empty() { &mesh.domain_suffix } else { &config.meta.domain_suffix }
}

impl ConfigIndex {
    fn build(store: &dyn ConfigStore, mesh: &MeshSettings) -> ConfigIndex {
        let mut index = ConfigIndex::default();
        index.index_virtual_services(list_sorted(store, Kind::VirtualService), mesh);
        index.index_destination_rules(list_sorted(store, Kind::DestinationRule), mesh);
        for config in list_sorted(store, Kind::Gateway) {
            if !matches!(config.spec, Spec::Gateway(_)) {
                continue;
            }
            let name = format!("{}/{}", config.meta.namespace, config.meta.name);
            index.gateways.push(Arc::new(IndexedGateway { config, name }));
        }
        for config in list_sorted(store, Kind::Sidecar) {
            if matches!(config.spec, Spec::Sidecar(_)) {
                index.sidecars.entry(config.meta.namespace.clone()).or_default().push(config);
            }
        }
        for (kind, effect) in UNTRANSLATED_KINDS {
            for config in store.list(*kind, None) {
                index.findings.push(Finding {
                    severity: Severity::Unsupported,
                    config: Some(config.key()),
                    path: String::new(),
                    resource: String::new(),
                    message: format!("{kind} is not translated by the generators: {effect}"),
                });
            }
        }
        index
    }

    fn index_virtual_services(&mut self, configs: Vec<Arc<Config>>, mesh: &MeshSettings) {
        let visible = |c: &Config, viewer: &str| match &c.spec {
            Spec::VirtualService(vs) => {
                Visibility::new(vs.export_to.iter().map(|e| ExportTo::parse(e)), &mesh.default_export_to)
                    .visible(&c.meta.namespace, viewer)
            }
            _ => false,
        };
        let delegates = delegate::Delegates {
            by_key: configs
                .iter()
                .map(|c| ((c.meta.namespace.as_str(), c.meta.name.as_str()), c.as_ref()))
                .collect(),
            visible: &visible,
            suffix: &mesh.domain_suffix,
        };
        let mut entries = Vec::new();
        for config in &configs {
            let Spec::VirtualService(vs) = &config.spec else { continue };
            // A VirtualService without hosts is a delegate: used only through a root's `delegate`.
            if vs.hosts.is_empty() {
                continue;
            }
            let key = config.key();
            let ns = config.meta.namespace.clone();
            let suffix = domain_suffix(config, mesh).to_string();
            let hosts = vs
                .hosts
                .iter()
                .map(|h| host::resolve_short_name(&h.to_ascii_lowercase(), &ns, &suffix))
                .collect();
            let gateways = if vs.gateways.is_empty() {
                vec![MESH_GATEWAY.to_string()]
            } else {
                vs.gateways
                    .iter()
                    .map(|g| if g == MESH_GATEWAY { g.clone() } else { resolve_gateway_name(g, &ns) })
                    .collect()
            };
            let visibility =
                Visibility::new(vs.export_to.iter().map(|e| ExportTo::parse(e)), &mesh.default_export_to);
            let merged = delegate::merge(config, vs, &delegates, &mut self.findings);
            entries.push(Arc::new(IndexedVirtualService {
                config: config.clone(),
                key,
                hosts,
                gateways,
                merged,
                visibility,
            }));
        }
        for entry in entries {
            let mut seen = BTreeSet::new();
            for gw in &entry.gateways {
                if seen.insert(gw.clone()) {
                    self.vs_by_gateway.entry(gw.clone()).or_default().push(entry.clone());
                }
            }
            self.virtual_services.push(entry);
        }
    }

    fn index_destination_rules(&mut self, configs: Vec<Arc<Config>>, mesh: &MeshSettings) {
        // (namespace, host, export set) → position in `merged`, for rules without selector.
        let mut merged: Vec<IndexedDestinationRule> = Vec::new();
        let mut slot: HashMap<(String, String, Visibility), usize> = HashMap::new();
        for config in configs {
            let Spec::DestinationRule(dr) = &config.spec else { continue };
            let ns = config.meta.namespace.clone();
            let host =
                host::resolve_short_name(&dr.host.to_ascii_lowercase(), &ns, domain_suffix(&config, mesh));
            let visibility =
                Visibility::new(dr.export_to.iter().map(|e| ExportTo::parse(e)), &mesh.default_export_to);
            let selector = dr.workload_selector.as_ref().map(|s| s.match_labels.clone());
            if selector.is_none()
                && let Some(&i) = slot.get(&(ns.clone(), host.clone(), visibility.clone()))
            {
                let target = &mut merged[i];
                if target.rule.traffic_policy.is_none() {
                    target.rule.traffic_policy = dr.traffic_policy.clone();
                } else if dr.traffic_policy.is_some() {
                    self.findings.push(Finding {
                        severity: Severity::Dropped,
                        config: Some(config.key()),
                        path: "spec.trafficPolicy".into(),
                        resource: String::new(),
                        message: format!(
                            "{} already sets the traffic policy of host {host}; this one is ignored (Istio's \
                             DestinationRule merge)",
                            target.keys.first().map(ToString::to_string).unwrap_or_default()
                        ),
                    });
                }
                for (i, subset) in dr.subsets.iter().enumerate() {
                    if target.rule.subsets.iter().any(|s| s.name == subset.name) {
                        self.findings.push(Finding {
                            severity: Severity::Dropped,
                            config: Some(config.key()),
                            path: format!("spec.subsets[{i}]"),
                            resource: String::new(),
                            message: format!(
                                "subset {:?} of host {host} is already defined by {}",
                                subset.name,
                                target.keys.first().map(ToString::to_string).unwrap_or_default()
                            ),
                        });
                    } else {
                        target.rule.subsets.push(subset.clone());
                    }
                }
                target.keys.push(config.key());
                continue;
            }
            if selector.is_none() {
                slot.insert((ns.clone(), host.clone(), visibility.clone()), merged.len());
            }
            merged.push(IndexedDestinationRule {
                keys: vec![config.key()],
                namespace: ns,
                host,
                rule: dr.clone(),
                selector,
                visibility,
            });
        }
        for dr in merged {
            let dr = Arc::new(dr);
            self.dr_namespace_local.entry(dr.namespace.clone()).or_default().insert(dr.clone());
            if dr.selector.is_none() && !dr.visibility.is_private_only() {
                self.dr_exported.entry(dr.namespace.clone()).or_default().insert(dr);
            }
        }
    }
}

impl ServiceIndex {
    fn build(discovery: &dyn ServiceDiscovery) -> ServiceIndex {
        let all = discovery.services();
        let mut by_host: BTreeMap<String, Vec<Arc<Service>>> = BTreeMap::new();
        for s in &all {
            by_host.entry(s.hostname.to_ascii_lowercase()).or_default().push(s.clone());
        }
        ServiceIndex { all, by_host }
    }
}

fn read_endpoints(discovery: &dyn ServiceDiscovery, service: &Service, into: &mut EndpointIndex) {
    for port in &service.ports {
        let eps = discovery.endpoints(&service.hostname, &service.namespace, port.port, None);
        into.insert((service.hostname.clone(), service.namespace.clone(), port.port), eps.into());
    }
}

impl PushContext {
    /// Builds a snapshot of `store`'s config and `discovery`'s services and endpoints, with `mesh`
    /// settings, labelled `version` (Istio: `<RFC3339 time>/<counter>`; the caller owns the clock).
    pub fn new(
        store: &dyn ConfigStore,
        discovery: &dyn ServiceDiscovery,
        mesh: MeshSettings,
        version: impl Into<String>,
    ) -> PushContext {
        let config = ConfigIndex::build(store, &mesh);
        let services = ServiceIndex::build(discovery);
        let mut endpoints = EndpointIndex::new();
        for s in &services.all {
            read_endpoints(discovery, s, &mut endpoints);
        }
        PushContext {
            version: version.into(),
            mesh: Arc::new(mesh),
            config: Arc::new(config),
            services: Arc::new(services),
            endpoints: Arc::new(endpoints),
            scopes: Arc::new(Mutex::new(HashMap::new())),
            sidecar_routes: Arc::new(Mutex::new(HashMap::new())),
            gateway_servers: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A new snapshot labelled `version` that shares this one's config and service indexes and
    /// re-reads from `discovery` only the endpoints of the services `(hostname, namespace)` listed
    /// (the incremental EDS path: an endpoint change never rebuilds config indexes). Services not in
    /// this snapshot are ignored (a new service needs a full [`PushContext::new`]).
    pub fn with_endpoints(
        &self,
        discovery: &dyn ServiceDiscovery,
        changed: &[(String, String)],
        version: impl Into<String>,
    ) -> PushContext {
        let mut endpoints: EndpointIndex = (*self.endpoints).clone();
        for (hostname, namespace) in changed {
            let hit = self
                .services
                .by_host
                .get(&hostname.to_ascii_lowercase())
                .and_then(|c| c.iter().find(|s| &s.namespace == namespace));
            if let Some(service) = hit {
                read_endpoints(discovery, service, &mut endpoints);
            }
        }
        PushContext {
            version: version.into(),
            mesh: self.mesh.clone(),
            config: self.config.clone(),
            services: self.services.clone(),
            endpoints: Arc::new(endpoints),
            scopes: self.scopes.clone(),
            // Route configurations and gateway servers do not depend on endpoints.
            sidecar_routes: self.sidecar_routes.clone(),
            gateway_servers: self.gateway_servers.clone(),
        }
    }

    /// The snapshot's version label.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Mesh settings.
    pub fn mesh(&self) -> &MeshSettings {
        &self.mesh
    }

    /// Every service, ordered by hostname then namespace.
    pub fn services(&self) -> &[Arc<Service>] {
        &self.services.all
    }

    /// Endpoints of the service `(hostname, namespace)` serving `port` (all labels; filter subsets with
    /// [`labels_match`]).
    pub fn endpoints(&self, hostname: &str, namespace: &str, port: u32) -> &[Arc<Endpoint>] {
        self.endpoints.get(&(hostname.to_string(), namespace.to_string(), port)).map_or(&[], |e| e)
    }

    /// Problems found while indexing config (delegate VirtualServices, DestinationRule merge
    /// conflicts).
    pub fn findings(&self) -> &[Finding] {
        &self.config.findings
    }

    /// Every VirtualService with hosts, oldest first.
    pub fn virtual_services(&self) -> &[Arc<IndexedVirtualService>] {
        &self.config.virtual_services
    }

    /// `true` if a service in `owner` namespace with `export_to` is visible from `viewer`, with the
    /// mesh default for an empty `exportTo`.
    pub fn service_visible(&self, service: &Service, viewer: &str) -> bool {
        Visibility::new(service.export_to.iter().cloned(), &self.mesh.default_export_to)
            .visible(&service.namespace, viewer)
    }

    /// The service a proxy in `viewer` namespace uses for `hostname` (exportTo visibility, then
    /// Istio's precedence: Kubernetes, exported specifically, oldest).
    pub fn visible_service(&self, hostname: &str, viewer: &str) -> Option<Arc<Service>> {
        let candidates = self.services.by_host.get(&hostname.to_ascii_lowercase())?;
        candidates
            .iter()
            .filter(|s| self.service_visible(s, viewer))
            .min_by(|a, b| compare_service_precedence(a, b, Some(viewer)))
            .cloned()
    }

    /// VirtualServices bound to `gateway` (`namespace/name`, or `mesh`) and visible to a proxy in
    /// `proxy_namespace`, oldest first.
    pub fn virtual_services_for_gateway(
        &self,
        proxy_namespace: &str,
        gateway: &str,
    ) -> Vec<Arc<IndexedVirtualService>> {
        self.config
            .vs_by_gateway
            .get(gateway)
            .map(|list| {
                list.iter()
                    .filter(|vs| vs.visibility.visible(vs.namespace(), proxy_namespace))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Gateways whose selector matches the proxy's labels (any namespace, as Istio by default),
    /// oldest first.
    pub fn gateways_for_proxy(&self, proxy: &ProxyContext) -> Vec<Arc<IndexedGateway>> {
        self.config
            .gateways
            .iter()
            .filter(|g| labels_match(&g.spec().selector, &proxy.labels))
            .cloned()
            .collect()
    }

    /// The DestinationRule that applies to traffic from `proxy` to `service` (Istio's
    /// `PushContext.destinationRule`): the proxy's namespace first (a rule whose workload selector
    /// matches the proxy before one without), then rules exported to it from the service's
    /// namespace, then from the root namespace; each by most specific host.
    pub fn destination_rule(
        &self,
        proxy: &ProxyContext,
        service: &Service,
    ) -> Option<Arc<IndexedDestinationRule>> {
        let hostname = service.hostname.to_ascii_lowercase();
        let pick_local = |hosts: &DrHosts| {
            let rules = hosts.lookup(&hostname);
            let selected = rules
                .iter()
                .find(|d| d.selector.as_ref().is_some_and(|s| labels_match(s, &proxy.labels)))
                .or_else(|| rules.iter().find(|d| d.selector.is_none()));
            selected.map(|d| (*d).clone())
        };
        let local_ns = if proxy.namespace == self.mesh.root_namespace {
            &self.mesh.root_namespace
        } else {
            &proxy.namespace
        };
        if let Some(found) = self.config.dr_namespace_local.get(local_ns).and_then(pick_local) {
            return Some(found);
        }
        let exported = |ns: &str| {
            self.config.dr_exported.get(ns).and_then(|hosts| {
                hosts
                    .lookup(&hostname)
                    .into_iter()
                    .find(|d| d.visibility.visible(&d.namespace, &proxy.namespace))
                    .cloned()
            })
        };
        exported(&service.namespace).or_else(|| exported(&self.mesh.root_namespace))
    }

    /// The Sidecar that applies to `proxy`: in its namespace one whose workload selector matches its
    /// labels, else one without selector; else the root namespace's without selector. Gateways have
    /// none.
    pub fn sidecar_for(&self, proxy: &ProxyContext) -> Option<Arc<Config>> {
        if proxy.kind != ProxyKind::Sidecar {
            return None;
        }
        let selector_of = |c: &Config| match &c.spec {
            Spec::Sidecar(s) => s.workload_selector.as_ref().map(|w| w.labels.clone()),
            _ => None,
        };
        if let Some(list) = self.config.sidecars.get(&proxy.namespace) {
            let with_selector = list
                .iter()
                .find(|c| selector_of(c).is_some_and(|s| !s.is_empty() && labels_match(&s, &proxy.labels)));
            let without = list.iter().find(|c| selector_of(c).is_none_or(|s| s.is_empty()));
            if let Some(c) = with_selector.or(without) {
                return Some(c.clone());
            }
        }
        self.config
            .sidecars
            .get(&self.mesh.root_namespace)
            .and_then(|list| list.iter().find(|c| selector_of(c).is_none_or(|s| s.is_empty())).cloned())
    }

    /// The sidecar route configuration for `key`, made by `make` once per snapshot (and the
    /// endpoint-only snapshots derived from it), then shared.
    pub(crate) fn sidecar_route(
        &self,
        key: SidecarRouteKey,
        make: impl FnOnce() -> (Vec<u8>, Vec<Finding>),
    ) -> SharedRoute {
        if let Some(hit) = self.sidecar_routes.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return hit.clone();
        }
        let made = Arc::new(make());
        self.sidecar_routes.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_insert(made).clone()
    }

    /// `true` if route generation for a proxy in `scope` depends on its workload labels: a
    /// VirtualService it imports matches on `sourceLabels`, or a DestinationRule of its namespace has a
    /// workload selector.
    pub(crate) fn routes_depend_on_labels(&self, scope: &SidecarScope) -> bool {
        let selector_dr = self.config.dr_namespace_local.get(&scope.namespace).is_some_and(|hosts| {
            hosts.specific.values().flatten().chain(&hosts.wildcard).any(|d| d.selector.is_some())
        });
        selector_dr
            || scope
                .virtual_services()
                .iter()
                .any(|vs| vs.spec().http.iter().flat_map(|r| &r.r#match).any(|m| !m.source_labels.is_empty()))
    }

    /// The scope key of `proxy`: its namespace and the Sidecar that applies.
    pub(crate) fn scope_key(&self, proxy: &ProxyContext) -> ScopeKey {
        (proxy.namespace.clone(), self.sidecar_for(proxy).map(|c| c.key()))
    }

    /// The servers of the gateways selecting `proxy` merged by port (Istio's `SetGatewaysForProxy`),
    /// computed once per snapshot and set of workload labels (gateways select routers by labels
    /// only), then shared by the listener and route generators of every such router.
    pub(crate) fn gateway_servers(&self, proxy: &ProxyContext) -> SharedGatewayServers {
        if let Some(hit) = self.gateway_servers.lock().unwrap_or_else(|p| p.into_inner()).get(&proxy.labels) {
            return hit.clone();
        }
        let mut findings = Vec::new();
        let made = Arc::new((crate::gateway::merge(self, proxy, &mut findings), findings));
        self.gateway_servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(proxy.labels.clone())
            .or_insert(made)
            .clone()
    }

    /// Computes what the generators look up per proxy and keeps it in this snapshot: the sidecar
    /// scope and, for routers, the merged gateway servers (Istio's `SetSidecarScope` and
    /// `SetGatewaysForProxy`, done when a proxy connects or a push starts). Optional: the
    /// generators compute whatever is missing on first use.
    pub fn init_proxy(&self, proxy: &ProxyContext) {
        self.sidecar_scope(proxy);
        if proxy.kind == ProxyKind::Router && !proxy.proxyless_grpc {
            self.gateway_servers(proxy);
        }
    }

    /// The proxy's [`SidecarScope`] (computed once per namespace and Sidecar, then shared).
    pub fn sidecar_scope(&self, proxy: &ProxyContext) -> Arc<SidecarScope> {
        let sidecar = self.sidecar_for(proxy);
        let key: ScopeKey = (proxy.namespace.clone(), sidecar.as_ref().map(|c| c.key()));
        if let Some(scope) = self.scopes.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return scope.clone();
        }
        let scope = Arc::new(SidecarScope::build(self, &proxy.namespace, sidecar.as_deref()));
        self.scopes.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_insert(scope).clone()
    }
}

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
    services: Vec<Arc<Service>>,
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
    fn build(push: &PushContext, namespace: &str, sidecar: Option<&Config>) -> SidecarScope {
        let mut findings = Vec::new();
        let spec: Option<&Sidecar> = sidecar.and_then(|c| match &c.spec {
            Spec::Sidecar(s) => Some(s),
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
        let mut outbound = push.mesh.outbound_traffic_policy;
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
            if !spec.ingress.is_empty() {
                unsupported("spec.ingress".into(), "Sidecar ingress listeners are not built");
            }
            if spec.inbound_connection_pool.is_some() {
                unsupported("spec.inboundConnectionPool".into(), "inbound connection pools are not applied");
            }
            if let Some(policy) = &spec.outbound_traffic_policy {
                outbound = if policy.mode == SidecarMode::AllowAny as i32 {
                    OutboundTrafficPolicy::AllowAny
                } else {
                    OutboundTrafficPolicy::RegistryOnly
                };
                if policy.egress_proxy.is_some() {
                    unsupported(
                        "spec.outboundTrafficPolicy.egressProxy".into(),
                        "unknown traffic goes to PassthroughCluster, not to an egress proxy",
                    );
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
                services.push(s.clone());
                by_host.insert(hostname.clone(), s.clone());
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

    /// Fields of the Sidecar that are not honoured.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_uses_the_mesh_default() {
        let private: BTreeSet<ExportTo> = [ExportTo::Private].into();
        let v = Visibility::new([], &private);
        assert!(v.visible("a", "a") && !v.visible("a", "b"));
        let v = Visibility::new([ExportTo::Public], &private);
        assert!(v.visible("a", "b"));
        assert!(Visibility::new([], &BTreeSet::new()).visible("a", "b"));
        assert!(Visibility::new([ExportTo::Private], &BTreeSet::new()).is_private_only());
    }

    #[test]
    fn egress_hosts_parse() {
        let e = EgressHost::parse("./*.example.com", "ns1").unwrap();
        assert_eq!((e.namespace.as_str(), e.host.as_str()), ("ns1", "*.example.com"));
        assert!(EgressHost::parse("nohost", "ns1").is_none());
        assert!(EgressHost::parse("*/*", "ns1").unwrap().namespace_matches("x"));
    }
}
