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
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{
        Arc, LazyLock,
        atomic::{AtomicU64, Ordering},
    },
};

use api::{
    Kind, Spec,
    networking::{DestinationRule, Gateway, VirtualService},
};

use super::{
    ProxyContext, ProxyKind, SidecarScope,
    authn::{EffectivePeerAuthentication, MtlsMode, PeerAuthenticationPolicy, effective_peer_authentication},
    cluster_local::ClusterLocalHosts,
    delegate,
    virtual_service::{MESH_GATEWAY, resolve_gateway_name},
};
use crate::{
    Config, ConfigKey, ConfigStore, Finding, ServiceDiscovery, Severity, host,
    network::NetworkGateways,
    service::{Endpoint, ExportTo, Labels, Service, compare_service_precedence, labels_match},
};

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

/// Mesh-wide settings (the parts of Istio's `MeshConfig` the generators use).
#[derive(Clone, Debug, PartialEq)]
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
    /// How often DNS-resolved clusters re-resolve when a lookup fails (`dnsRefreshRate`, default 60 s;
    /// successful lookups follow the record's TTL).
    pub dns_refresh_rate: std::time::Duration,
    /// DNS domain suffix (`--domain`, default `cluster.local`).
    pub domain_suffix: String,
    /// The mesh's trust domain (`trustDomain`, default `cluster.local`): inbound mutual TLS accepts peers
    /// whose SPIFFE id is under `spiffe://<trust domain>/` (Istio's `TrustDomainsForValidation`).
    pub trust_domain: String,
    /// Other trust domains accepted from peers (`trustDomainAliases`).
    pub trust_domain_aliases: Vec<String>,
    /// `enableAutoMtls` (default `true`): outbound clusters without DestinationRule TLS use Istio mutual
    /// TLS to endpoints labelled `security.istio.io/tlsMode: istio` (proxies with workload
    /// certificates only).
    pub enable_auto_mtls: bool,
    /// `extensionProviders`: the external authorizers (and other extensions) CUSTOM
    /// AuthorizationPolicies name.
    pub extension_providers: Vec<super::extension_provider::ExtensionProvider>,
    /// `accessLogFile`: where every proxy writes its access log when no Telemetry configures access
    /// logging (empty, the default: no access log).
    pub access_log_file: String,
    /// `accessLogEncoding` (default `TEXT`).
    pub access_log_encoding: super::telemetry::AccessLogEncoding,
    /// `accessLogFormat`: the format string (TEXT) or JSON object text (JSON); empty: Istio's default.
    pub access_log_format: String,
    /// `defaultProviders.accessLogging`: the access log providers of proxies no Telemetry names
    /// providers for.
    pub default_access_log_providers: Vec<String>,
    /// `enableTracing` (default `true`): without Telemetry tracing and default tracing providers,
    /// connection managers trace with the proxy config's sampling and no provider of their own (the
    /// tracer, if any, is the bootstrap's).
    pub enable_tracing: bool,
    /// `defaultProviders.tracing`: the tracing providers of proxies no Telemetry names one for (only
    /// the first is used, as istiod).
    pub default_tracing_providers: Vec<String>,
    /// `defaultProviders.metrics`: the metrics providers of proxies no Telemetry `metrics` entry
    /// applies to (Istio's chart sets `[prometheus]`; istiod's built-in default is none).
    pub default_metrics_providers: Vec<String>,
    /// `defaultConfig.tracing`: the legacy tracing settings of proxies without their own proxy config
    /// (`PROXY_CONFIG` node metadata).
    pub default_proxy_tracing: Option<super::tracing::ProxyTracing>,
    /// `PILOT_TRACE_SAMPLING` (default 1.0 %, [`super::tracing::DEFAULT_TRACE_SAMPLING`]): the
    /// sampling when neither a Telemetry nor the proxy config sets one. An environment variable of
    /// istiod, not a mesh field; the binary sets it.
    pub trace_sampling: f64,
    /// `localityLbSetting`: the mesh-wide locality load balancing that applies to destinations whose
    /// DestinationRule sets none (Istio's default: `{enabled: true}`, so outlier detection alone turns
    /// on locality failover); `enabled: false` turns it off.
    pub locality_lb_setting: Option<api::networking::destination_rule::LocalityLoadBalancerSetting>,
    /// `zoneAwareLbSetting`: the mesh-wide zone-aware load balancing (default none); it takes
    /// precedence over [`locality_lb_setting`](MeshSettings::locality_lb_setting).
    pub zone_aware_lb_setting: Option<api::networking::destination_rule::ZoneAwareLoadBalancerSetting>,
    /// `serviceSettings`: hosts with `settings.clusterLocal`, in order (what
    /// [`super::cluster_local::ClusterLocalHosts`] is built from, with the defaults).
    pub service_settings: Vec<super::cluster_local::ServiceSettings>,
    /// `defaultConfig.discoveryAddress` (default `istiod.istio-system.svc:15012`): its host is a
    /// default cluster-local host.
    pub discovery_address: String,
    /// The mesh config as read (a JSON map with Istio's field names, as in the `mesh` key of the
    /// `istio` ConfigMap; `Null` when none was given): what meshpilot serves as `MeshConfig` to
    /// MCP-over-xDS clients, with the effective values of the fields above filled in.
    pub source: serde_json::Value,
    /// The mesh networks in force (`meshNetworks`: istiod's `--networksConfig` file or the `istio`
    /// ConfigMap's `meshNetworks` key, read beside the mesh config): the networks of endpoints that
    /// carry none and the `address` east-west gateways ([`crate::network`]). Empty by default.
    pub mesh_networks: Arc<crate::network::MeshNetworks>,
    /// `ENABLE_TLS_ON_SIDECAR_INGRESS` (an istiod environment variable, default false; not mesh
    /// config): Sidecar `ingress[].tls` terminates TLS on that inbound port. Off, the `tls` block is
    /// ignored (reported), as istiod ignores it.
    pub enable_tls_on_sidecar_ingress: bool,
}

impl Default for MeshSettings {
    fn default() -> Self {
        MeshSettings {
            root_namespace: "istio-system".to_string(),
            default_export_to: BTreeSet::new(),
            outbound_traffic_policy: OutboundTrafficPolicy::AllowAny,
            connect_timeout: std::time::Duration::from_secs(10),
            dns_refresh_rate: std::time::Duration::from_secs(60),
            domain_suffix: "cluster.local".to_string(),
            trust_domain: "cluster.local".to_string(),
            trust_domain_aliases: Vec::new(),
            enable_auto_mtls: true,
            extension_providers: Vec::new(),
            access_log_file: String::new(),
            access_log_encoding: super::telemetry::AccessLogEncoding::Text,
            access_log_format: String::new(),
            default_access_log_providers: Vec::new(),
            enable_tracing: true,
            default_tracing_providers: Vec::new(),
            default_metrics_providers: Vec::new(),
            default_proxy_tracing: None,
            trace_sampling: super::tracing::DEFAULT_TRACE_SAMPLING,
            locality_lb_setting: Some(api::networking::destination_rule::LocalityLoadBalancerSetting {
                enabled: Some(true),
                ..Default::default()
            }),
            zone_aware_lb_setting: None,
            service_settings: Vec::new(),
            discovery_address: super::cluster_local::DEFAULT_DISCOVERY_ADDRESS.to_string(),
            source: serde_json::Value::Null,
            mesh_networks: Arc::default(),
            enable_tls_on_sidecar_ingress: false,
        }
    }
}

/// `exportTo` of an object, with the mesh default applied when it declares none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Visibility(BTreeSet<ExportTo>);

impl Visibility {
    fn new(declared: impl IntoIterator<Item = ExportTo>, default: &BTreeSet<ExportTo>) -> Visibility {
        let declared: BTreeSet<ExportTo> = declared.into_iter().collect();
        Visibility(if declared.is_empty() { default.clone() } else { declared })
    }

    /// `true` if an object in `owner` namespace is visible from `viewer` namespace.
    pub(crate) fn visible(&self, owner: &str, viewer: &str) -> bool {
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
    pub(crate) visibility: Visibility,
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
    pub(crate) visibility: Visibility,
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
pub(crate) struct DrHosts {
    pub(crate) specific: HashMap<String, Vec<Arc<IndexedDestinationRule>>>,
    pub(crate) wildcard: Vec<Arc<IndexedDestinationRule>>,
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
pub(crate) struct ConfigIndex {
    virtual_services: Vec<Arc<IndexedVirtualService>>,
    vs_by_gateway: HashMap<String, Vec<Arc<IndexedVirtualService>>>,
    pub(crate) dr_namespace_local: HashMap<String, DrHosts>,
    dr_exported: HashMap<String, DrHosts>,
    gateways: Vec<Arc<IndexedGateway>>,
    sidecars: HashMap<String, Vec<Arc<Config>>>,
    peer_authentications: Vec<Arc<PeerAuthenticationPolicy>>,
    /// AuthorizationPolicies by namespace, each list by creation time then name.
    authorization_policies: HashMap<String, Vec<Arc<Config>>>,
    /// RequestAuthentications by namespace, each list by creation time then name.
    request_authentications: HashMap<String, Vec<Arc<Config>>>,
    /// Gateway API ReferenceGrants by namespace (the namespace of what they grant access to).
    reference_grants: HashMap<String, Vec<Arc<Config>>>,
    /// ProxyConfigs, oldest first (Istio's `PushContext.ProxyConfigs`).
    proxy_configs: Vec<Arc<Config>>,
    /// Telemetries by namespace, each list oldest first (Istio's `Telemetries`).
    telemetries: HashMap<String, Vec<Arc<Config>>>,
    /// EnvoyFilters by namespace, each list oldest first (Istio's `envoyFiltersByNamespace`; the
    /// order a proxy sees is [`PushContext::envoy_filters`]'s).
    envoy_filters: HashMap<String, Vec<Arc<Config>>>,
    /// WasmPlugins (as TrafficExtensions) and TrafficExtensions by namespace, in Istio's order.
    extensions: super::extensions::ExtensionIndex,
    findings: Vec<Finding>,
}

/// Services by hostname.
#[derive(Debug, Default)]
pub(crate) struct ServiceIndex {
    all: Vec<Arc<Service>>,
    pub(crate) by_host: BTreeMap<String, Vec<Arc<Service>>>,
}

/// Endpoints per (hostname, namespace, port).
type EndpointIndex = HashMap<(String, String, u32), Arc<[Arc<Endpoint>]>>;

/// Endpoints of cluster-local services per (hostname, namespace, port, cluster id).
type LocalEndpointIndex = HashMap<(String, String, u32, String), Arc<[Arc<Endpoint>]>>;

/// Fills `into` with the per-cluster lists of `service`'s endpoints (read from `endpoints`) when the
/// service is cluster-local; removes its old lists either way.
fn split_local_endpoints(
    service: &Service,
    hosts: &ClusterLocalHosts,
    endpoints: &EndpointIndex,
    into: &mut LocalEndpointIndex,
) {
    into.retain(|(h, ns, _, _), _| !(h == &service.hostname && ns == &service.namespace));
    if !hosts.is_cluster_local(&service.hostname) {
        return;
    }
    for port in &service.ports {
        let Some(list) = endpoints.get(&(service.hostname.clone(), service.namespace.clone(), port.port))
        else {
            continue;
        };
        let mut by_cluster: BTreeMap<&str, Vec<Arc<Endpoint>>> = BTreeMap::new();
        for ep in list.iter() {
            by_cluster.entry(ep.locality.cluster_id.as_str()).or_default().push(Arc::clone(ep));
        }
        for (cluster, eps) in by_cluster {
            let key = (service.hostname.clone(), service.namespace.clone(), port.port, cluster.to_string());
            into.insert(key, eps.into());
        }
    }
}

/// What a [`SidecarScope`] depends on besides the snapshot's config: the proxy's namespace and the
/// Sidecar object that applies to it (none: the namespace default). Proxies with equal keys share a
/// scope.
pub type ScopeKey = (String, Option<ConfigKey>);

/// Source of [`PushContext::config_generation`]: one number per config build, process-wide.
static CONFIG_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Source of [`PushContext::snapshot_id`]: one number per snapshot (config build or endpoint update),
/// process-wide.
static SNAPSHOT_ID: AtomicU64 = AtomicU64::new(0);

/// An immutable snapshot of config and services with the indexes the generators use (Istio's
/// `PushContext`). Plain data: any thread reads it without locks. Cheap to share: hold it in an `Arc`;
/// every part is itself shared. What is derived per proxy (sidecar scopes, route tables, merged gateway
/// servers) is cached outside, keyed by [`PushContext::config_generation`] (`networking`'s generation
/// cache), so endpoint-only snapshots keep sharing it.
#[derive(Debug)]
pub struct PushContext {
    version: String,
    pub(crate) mesh: Arc<MeshSettings>,
    pub(crate) config: Arc<ConfigIndex>,
    pub(crate) services: Arc<ServiceIndex>,
    endpoints: Arc<EndpointIndex>,
    /// The mesh's cluster-local hosts (from [`MeshSettings::service_settings`], the domain and the
    /// discovery address).
    cluster_local: Arc<ClusterLocalHosts>,
    /// The endpoint lists of cluster-local services per cluster id (see
    /// [`PushContext::endpoint_list_seen_from`]).
    local_endpoints: Arc<LocalEndpointIndex>,
    config_generation: u64,
    snapshot_id: u64,
    generated: Arc<GeneratedConfig>,
    network_gateways: Arc<NetworkGateways>,
}

/// The objects and statuses [`super::ConfigConverter`]s produced for one snapshot.
#[derive(Debug, Default)]
pub struct GeneratedConfig {
    /// Generated Istio objects (also indexed like stored config).
    pub configs: Vec<Arc<Config>>,
    /// Statuses of the converters' input objects.
    pub statuses: Vec<super::ObjectStatus>,
}

/// Kinds the generators do not translate, with what that means for traffic (ProxyConfig: where it is
/// applied instead).
const UNTRANSLATED_KINDS: &[(Kind, &str)] = &[
    (
        Kind::PeerAuthentication,
        "applied only to proxies started by pilot-agent (with workload certificates); Envoys connected \
         directly get no mutual TLS",
    ),
    (
        Kind::ProxyConfig,
        "applied as istiod applies it, by the injection webhook to pods injected after the change \
         (concurrency, environmentVariables, image); running proxies keep their settings until their \
         pods are re-created",
    ),
];

/// Annotation of generated Gateways: the gateway services (comma-separated hostnames) whose instances
/// the Gateway applies to, instead of a selector (Istio's `InternalGatewayServiceAnnotation`).
pub const GATEWAY_SERVICE_ANNOTATION: &str = "internal.istio.io/gateway-service";
/// Annotation of generated Gateways: the namespace the gateway services live in, when it is not the
/// Gateway's own (Istio's `constants.InternalParentNamespace`).
pub const PARENT_NAMESPACE_ANNOTATION: &str = "internal.istio.io/parent-namespace";

fn gateway_applies(g: &IndexedGateway, proxy: &ProxyContext) -> bool {
    match g.config.meta.annotations.get(GATEWAY_SERVICE_ANNOTATION) {
        Some(_) => g.service_instances(proxy).next().is_some(),
        None => labels_match(&g.spec().selector, &proxy.labels),
    }
}

impl IndexedGateway {
    /// `true` when the gateway selects its proxies by labels (`spec.selector`; Istio's
    /// `legacyGatewaySelector`), `false` when it names its gateway services
    /// ([`GATEWAY_SERVICE_ANNOTATION`], Gateways generated from the Gateway API).
    pub fn selects_by_labels(&self) -> bool {
        !self.config.meta.annotations.contains_key(GATEWAY_SERVICE_ANNOTATION)
    }

    /// The service instances of `proxy` through which this gateway applies to it (Istio's
    /// `gatewayWithInstances.instances`): all of the proxy's instances for a gateway that selects by
    /// labels; for one naming its gateway services, the instances of those services in the Gateway's
    /// namespace (or `internal.istio.io/parent-namespace`).
    pub fn service_instances<'p>(
        &'p self,
        proxy: &'p ProxyContext,
    ) -> impl Iterator<Item = &'p crate::service::ServiceInstance> + 'p {
        let annotations = &self.config.meta.annotations;
        let services = annotations.get(GATEWAY_SERVICE_ANNOTATION);
        let namespace = annotations
            .get(PARENT_NAMESPACE_ANNOTATION)
            .filter(|n| !n.is_empty())
            .unwrap_or(&self.config.meta.namespace);
        proxy.service_instances.iter().filter(move |i| match services {
            None => true,
            Some(hosts) => {
                &i.service.namespace == namespace && hosts.split(',').any(|h| h == i.service.hostname)
            }
        })
    }
}

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
        index.peer_authentications = list_sorted(store, Kind::PeerAuthentication)
            .iter()
            .filter_map(|c| PeerAuthenticationPolicy::from_config(c).map(Arc::new))
            .collect();
        for (kind, index) in [
            (Kind::AuthorizationPolicy, &mut index.authorization_policies),
            (Kind::RequestAuthentication, &mut index.request_authentications),
        ] {
            for config in list_sorted(store, kind) {
                index.entry(config.meta.namespace.clone()).or_default().push(config);
            }
        }
        for config in list_sorted(store, Kind::ReferenceGrant) {
            if matches!(config.spec, Spec::ReferenceGrant(_)) {
                index.reference_grants.entry(config.meta.namespace.clone()).or_default().push(config);
            }
        }
        for config in list_sorted(store, Kind::Telemetry) {
            if matches!(config.spec, Spec::Telemetry(_)) {
                index
                    .findings
                    .extend(super::telemetry::telemetry_findings(&config, &mesh.extension_providers));
                index.telemetries.entry(config.meta.namespace.clone()).or_default().push(config);
            }
        }
        let metrics_configured = !mesh.default_metrics_providers.is_empty()
            || index
                .telemetries
                .values()
                .flatten()
                .any(|c| matches!(&c.spec, Spec::Telemetry(t) if !t.metrics.is_empty()));
        if metrics_configured {
            index.findings.push(super::metrics::extension_note());
        }
        for config in list_sorted(store, Kind::EnvoyFilter) {
            if matches!(config.spec, Spec::EnvoyFilter(_)) {
                index.envoy_filters.entry(config.meta.namespace.clone()).or_default().push(config);
            }
        }
        let (extensions, findings) = super::extensions::index(
            [Kind::WasmPlugin, Kind::TrafficExtension].into_iter().flat_map(|k| store.list(k, None)),
        );
        index.extensions = extensions;
        index.findings.extend(findings);
        index.proxy_configs = list_sorted(store, Kind::ProxyConfig)
            .into_iter()
            .filter(|c| matches!(c.spec, Spec::ProxyConfig(_)))
            .collect();
        for (kind, effect) in UNTRANSLATED_KINDS {
            for config in store.list(*kind, None) {
                index.findings.push(Finding {
                    // ProxyConfig is honoured (at injection, as istiod); the warning says where.
                    severity: if *kind == Kind::ProxyConfig {
                        Severity::Warning
                    } else {
                        Severity::Unsupported
                    },
                    config: Some(config.key()),
                    path: String::new(),
                    resource: String::new(),
                    message: if matches!(kind, Kind::PeerAuthentication | Kind::ProxyConfig) {
                        format!("{kind} is {effect}")
                    } else {
                        format!("{kind} is not translated by the generators: {effect}")
                    },
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
                rule: (**dr).clone(),
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
    /// Indexes `discovery`'s services, with the aliases of each concrete service resolved (Istio's
    /// `initServiceRegistry` → `resolveServiceAliases`).
    fn build(discovery: &dyn ServiceDiscovery) -> ServiceIndex {
        let mut all = discovery.services();
        crate::service::resolve_service_aliases(&mut all);
        let mut by_host: BTreeMap<String, Vec<Arc<Service>>> = BTreeMap::new();
        for s in &all {
            by_host.entry(s.hostname.to_ascii_lowercase()).or_default().push(s.clone());
        }
        ServiceIndex { all, by_host }
    }
}

/// The gateways of a snapshot: `mesh`'s mesh networks' `address` gateways and every gateway Service
/// of `services` (istiod's `NetworkManager.reload`, which merges both sets).
fn network_gateways(mesh: &MeshSettings, services: &[Arc<Service>]) -> NetworkGateways {
    let networks = &mesh.mesh_networks;
    let mut all = crate::network::gateways_from_mesh_networks(networks);
    for s in services {
        all.extend(crate::network::gateways_from_service(s, networks));
    }
    NetworkGateways::new(all)
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
        PushContext::with_converters(store, discovery, mesh, version, &[])
    }

    /// As [`PushContext::new`], running `converters` first (Istio's Gateway API conversion during
    /// `initPushContext`): their objects are indexed with the store's, as if the store held them, and
    /// kept with their statuses ([`PushContext::generated`]). A converter that generates an object the
    /// store also holds (same kind, namespace and name) adds a second one; Istio's names avoid that.
    pub fn with_converters(
        store: &dyn ConfigStore,
        discovery: &dyn ServiceDiscovery,
        mesh: MeshSettings,
        version: impl Into<String>,
        converters: &[Arc<dyn super::ConfigConverter>],
    ) -> PushContext {
        let services = ServiceIndex::build(discovery);
        let mut generated = GeneratedConfig::default();
        for converter in converters {
            let out = converter.convert(store, &services.all, &mesh);
            generated.configs.extend(out.configs.into_iter().map(Arc::new));
            generated.statuses.extend(out.statuses);
        }
        let config = if generated.configs.is_empty() {
            ConfigIndex::build(store, &mesh)
        } else {
            let mut by_kind: BTreeMap<Kind, Vec<Arc<Config>>> = BTreeMap::new();
            for c in &generated.configs {
                by_kind.entry(c.kind()).or_default().push(c.clone());
            }
            ConfigIndex::build(&super::converter::Overlay { base: store, generated: by_kind }, &mesh)
        };
        let mut endpoints = EndpointIndex::new();
        for s in &services.all {
            read_endpoints(discovery, s, &mut endpoints);
        }
        let cluster_local =
            ClusterLocalHosts::new(&mesh.service_settings, &mesh.domain_suffix, &mesh.discovery_address);
        let mut local_endpoints = LocalEndpointIndex::new();
        for s in &services.all {
            split_local_endpoints(s, &cluster_local, &endpoints, &mut local_endpoints);
        }
        let network_gateways = Arc::new(network_gateways(&mesh, &services.all));
        PushContext {
            version: version.into(),
            mesh: Arc::new(mesh),
            config: Arc::new(config),
            services: Arc::new(services),
            endpoints: Arc::new(endpoints),
            cluster_local: Arc::new(cluster_local),
            local_endpoints: Arc::new(local_endpoints),
            config_generation: CONFIG_GENERATION.fetch_add(1, Ordering::Relaxed) + 1,
            snapshot_id: SNAPSHOT_ID.fetch_add(1, Ordering::Relaxed) + 1,
            generated: Arc::new(generated),
            network_gateways,
        }
    }

    /// What the converters generated for this snapshot: Istio objects and the statuses of their inputs.
    pub fn generated(&self) -> &GeneratedConfig {
        &self.generated
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
        let mut local_endpoints: Option<LocalEndpointIndex> = None;
        for (hostname, namespace) in changed {
            let hit = self
                .services
                .by_host
                .get(&hostname.to_ascii_lowercase())
                .and_then(|c| c.iter().find(|s| &s.namespace == namespace));
            if let Some(service) = hit {
                read_endpoints(discovery, service, &mut endpoints);
                if self.cluster_local.is_cluster_local(&service.hostname) {
                    let local = local_endpoints.get_or_insert_with(|| (*self.local_endpoints).clone());
                    split_local_endpoints(service, &self.cluster_local, &endpoints, local);
                }
            }
        }
        PushContext {
            version: version.into(),
            mesh: self.mesh.clone(),
            config: self.config.clone(),
            services: self.services.clone(),
            endpoints: Arc::new(endpoints),
            cluster_local: self.cluster_local.clone(),
            local_endpoints: local_endpoints.map_or_else(|| self.local_endpoints.clone(), Arc::new),
            // Scopes, route configurations and gateway servers do not depend on endpoints.
            config_generation: self.config_generation,
            snapshot_id: SNAPSHOT_ID.fetch_add(1, Ordering::Relaxed) + 1,
            generated: self.generated.clone(),
            // Gateways come from mesh networks and services, which an endpoint change leaves alone.
            network_gateways: self.network_gateways.clone(),
        }
    }

    /// The snapshot's version label.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The config generation: a number unique to each [`PushContext::new`] (increasing in build
    /// order, process-wide) and kept by [`PushContext::with_endpoints`]. Everything derived from config
    /// and services only (scopes, route tables, gateway servers) is the same for two snapshots of one
    /// generation, so caches key by it.
    pub fn config_generation(&self) -> u64 {
        self.config_generation
    }

    /// The snapshot's number: unique to each snapshot, [`PushContext::new`] and
    /// [`PushContext::with_endpoints`] alike (increasing in build order, process-wide). What depends on
    /// endpoints as well as config (outbound clusters: DNS clusters carry their endpoints, mTLS
    /// settings name the endpoints' identities) is cached by it.
    pub fn snapshot_id(&self) -> u64 {
        self.snapshot_id
    }

    /// Mesh settings.
    pub fn mesh(&self) -> &MeshSettings {
        &self.mesh
    }

    /// The east-west gateways of every network (istiod's `NetworkManager`): the `address` gateways of
    /// the mesh networks and the gateway Services ([`crate::network::gateways_from_service`]).
    pub fn network_gateways(&self) -> &NetworkGateways {
        &self.network_gateways
    }

    /// Every service, ordered by hostname then namespace.
    pub fn services(&self) -> &[Arc<Service>] {
        &self.services.all
    }

    /// Endpoints of the service `(hostname, namespace)` serving `port` (all labels; filter subsets with
    /// [`labels_match`]).
    pub fn endpoints(&self, hostname: &str, namespace: &str, port: u32) -> &[Arc<Endpoint>] {
        self.endpoint_list(hostname, namespace, port).map_or(&[], |e| e)
    }

    /// The shared list behind [`PushContext::endpoints`] (`None` when the service has no entry for
    /// `port`). Snapshots made by [`PushContext::with_endpoints`] keep the very same list (`Arc`) for
    /// every service they did not re-read, so its address identifies its content across the snapshots
    /// of one config generation: caches of derived EDS output key by it.
    pub fn endpoint_list(&self, hostname: &str, namespace: &str, port: u32) -> Option<&Arc<[Arc<Endpoint>]>> {
        self.endpoints.get(&(hostname.to_string(), namespace.to_string(), port))
    }

    /// The mesh's cluster-local hosts (Istio's `PushContext.clusterLocalHosts`).
    pub fn cluster_local_hosts(&self) -> &ClusterLocalHosts {
        &self.cluster_local
    }

    /// `true` when the endpoints of `hostname` are only seen from their own cluster (Istio's
    /// `PushContext.IsClusterLocal`).
    pub fn is_cluster_local(&self, hostname: &str) -> bool {
        self.cluster_local.is_cluster_local(hostname)
    }

    /// The endpoint list a proxy of cluster `cluster_id` (node metadata `CLUSTER_ID`) sees for the
    /// service port: [`PushContext::endpoint_list`], except that for a cluster-local service only the
    /// endpoints whose `locality.cluster_id` is `cluster_id` (Istio's `EndpointBuilder`: a cluster-local
    /// service's other shards are skipped; a proxy without a cluster id sees none of them). The
    /// per-cluster lists are made once per snapshot, so their addresses are stable like
    /// [`PushContext::endpoint_list`]'s.
    pub fn endpoint_list_seen_from(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        cluster_id: &str,
    ) -> Option<&Arc<[Arc<Endpoint>]>> {
        if !self.cluster_local.is_cluster_local(hostname) {
            return self.endpoint_list(hostname, namespace, port);
        }
        self.local_endpoints.get(&(hostname.to_string(), namespace.to_string(), port, cluster_id.to_string()))
    }

    /// Problems found while indexing config (delegate VirtualServices, DestinationRule merge
    /// conflicts).
    pub fn findings(&self) -> &[Finding] {
        &self.config.findings
    }

    /// The ProxyConfig resources, oldest first (creation time, then namespace and name; Istio's
    /// `PushContext.ProxyConfigs`, which the injection webhook merges per pod).
    pub fn proxy_configs(&self) -> &[Arc<Config>] {
        &self.config.proxy_configs
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

    /// Gateways that apply to the proxy (any namespace, as Istio by default), oldest first: those whose
    /// selector matches the proxy's labels, and those generated from the Gateway API whose
    /// `internal.istio.io/gateway-service` annotation names a service the proxy is an instance of, in
    /// the Gateway's namespace (Istio's `mergeGateways`).
    pub fn gateways_for_proxy(&self, proxy: &ProxyContext) -> Vec<Arc<IndexedGateway>> {
        self.config.gateways.iter().filter(|g| gateway_applies(g, proxy)).cloned().collect()
    }

    /// `true` if a ReferenceGrant in `to_namespace` lets objects of `from_kind` in `from_namespace` refer
    /// to the Kubernetes Secret `to_namespace/name` (Istio's `ReferenceGrants.SecretAllowed`, which
    /// authorizes `kubernetes-gateway://NAMESPACE/NAME` SDS names across namespaces). A grant's `to`
    /// entry without a name allows every Secret of its namespace.
    pub fn secret_allowed(
        &self,
        from_kind: Kind,
        from_namespace: &str,
        to_namespace: &str,
        name: &str,
    ) -> bool {
        let from_group = from_kind.schema().group;
        let Some(grants) = self.config.reference_grants.get(to_namespace) else { return false };
        grants.iter().any(|g| {
            let Spec::ReferenceGrant(spec) = &g.spec else { return false };
            spec.from.iter().any(|f| {
                f.group == from_group && f.kind == from_kind.as_str() && f.namespace == from_namespace
            }) && spec.to.iter().any(|t| {
                t.group.is_empty() && t.kind == "Secret" && t.name.as_deref().is_none_or(|n| n == name)
            })
        })
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

    /// `true` if route generation for a proxy in `scope` depends on its workload labels: a
    /// VirtualService it imports matches on `sourceLabels`, or a DestinationRule of its namespace has a
    /// workload selector.
    pub fn routes_depend_on_labels(&self, scope: &SidecarScope) -> bool {
        let selector_dr = self.config.dr_namespace_local.get(&scope.namespace).is_some_and(|hosts| {
            hosts.specific.values().flatten().chain(&hosts.wildcard).any(|d| d.selector.is_some())
        });
        selector_dr
            || scope
                .virtual_services()
                .iter()
                .any(|vs| vs.spec().http.iter().flat_map(|r| &r.r#match).any(|m| !m.source_labels.is_empty()))
    }

    /// Every PeerAuthentication, oldest first.
    pub fn peer_authentications(&self) -> &[Arc<PeerAuthenticationPolicy>] {
        &self.config.peer_authentications
    }

    /// The AuthorizationPolicies that apply to `proxy` (Istio's `ListAuthorizationPolicies`; rules in
    /// [`crate::push::policy`]): the root namespace's, then the proxy's namespace's, each by creation
    /// time then name, all actions together.
    pub fn authorization_policies(&self, proxy: &ProxyContext) -> Vec<Arc<Config>> {
        self.policies_for(proxy, &self.config.authorization_policies)
    }

    /// The RequestAuthentications that apply to `proxy`, in the order of
    /// [`PushContext::authorization_policies`].
    pub fn request_authentications(&self, proxy: &ProxyContext) -> Vec<Arc<Config>> {
        self.policies_for(proxy, &self.config.request_authentications)
    }

    /// Whether any AuthorizationPolicy or RequestAuthentication exists (lets generators skip the
    /// lookups in meshes without them).
    pub fn has_security_policies(&self) -> bool {
        !self.config.authorization_policies.is_empty() || !self.config.request_authentications.is_empty()
    }

    /// The WasmPlugins and TrafficExtensions that apply to `proxy` (Istio's `TrafficExtensions`; rules
    /// in [`super::extensions`]): its namespace's, then the root namespace's, sorted by priority.
    pub fn extensions(&self, proxy: &ProxyContext) -> Vec<Arc<super::extensions::ExtensionFilter>> {
        if self.config.extensions.is_empty() {
            return Vec::new();
        }
        let gateways = self.gateway_keys(proxy);
        let matcher = self.policy_matcher(proxy, &gateways);
        self.config.extensions.select(&matcher)
    }

    /// The extension an ECDS request names (Istio's `TrafficExtensionsByName`): one of the proxy's
    /// namespace or of the root namespace, whether or not it selects the proxy (as istiod).
    pub fn extension_by_resource_name(
        &self,
        proxy: &ProxyContext,
        resource_name: &str,
    ) -> Option<Arc<super::extensions::ExtensionFilter>> {
        self.config.extensions.by_resource_name(resource_name, &proxy.namespace, &self.mesh.root_namespace)
    }

    /// The Telemetries that apply to `proxy` in Istio's order
    /// ([`super::telemetry::applicable_telemetries`]).
    pub fn telemetries(&self, proxy: &ProxyContext) -> Vec<Arc<Config>> {
        if self.config.telemetries.is_empty() {
            return Vec::new();
        }
        let gateways = self.gateway_keys(proxy);
        let matcher = self.policy_matcher(proxy, &gateways);
        let index = &self.config.telemetries;
        super::telemetry::applicable_telemetries(&matcher, |ns| {
            index.get(ns).map(Vec::as_slice).unwrap_or(&[])
        })
    }

    /// Every EnvoyFilter of the snapshot (any order).
    pub fn all_envoy_filters(&self) -> Vec<Arc<Config>> {
        self.config.envoy_filters.values().flatten().cloned().collect()
    }

    /// Whether any EnvoyFilter exists (lets generators skip patching entirely).
    pub fn has_envoy_filters(&self) -> bool {
        !self.config.envoy_filters.is_empty()
    }

    /// The EnvoyFilters that apply to `proxy`, in the order their patches apply (Istio's
    /// `PushContext.EnvoyFilters`, `pilot/pkg/model/push_context.go`): those of the root namespace and
    /// of the proxy's namespace whose `workloadSelector` / `targetRefs` select it
    /// ([`super::policy::PolicyMatcher`]), sorted by `priority` (lower first), then root namespace
    /// first, then creation time, then `name.namespace`.
    pub fn envoy_filters(&self, proxy: &ProxyContext) -> Vec<Arc<Config>> {
        let index = &self.config.envoy_filters;
        if index.is_empty() {
            return Vec::new();
        }
        let root = self.mesh.root_namespace.as_str();
        let mut out = self.policies_for(proxy, index);
        let priority = |c: &Config| match &c.spec {
            Spec::EnvoyFilter(f) => f.priority,
            _ => 0,
        };
        out.sort_by(|a, b| {
            priority(a)
                .cmp(&priority(b))
                .then_with(|| (b.meta.namespace == root).cmp(&(a.meta.namespace == root)))
                .then_with(|| a.meta.creation_timestamp.cmp(&b.meta.creation_timestamp))
                .then_with(|| {
                    format!("{}.{}", a.meta.name, a.meta.namespace)
                        .cmp(&format!("{}.{}", b.meta.name, b.meta.namespace))
                })
        });
        out
    }

    /// The access loggers of `proxy` for `direction` and the keys of the Telemetries they come from
    /// (proxies with equal keys and direction get equal loggers). Empty loggers: the mesh config's
    /// `accessLogFile` decides ([`super::telemetry`]).
    pub fn access_logging(
        &self,
        proxy: &ProxyContext,
        direction: super::telemetry::Direction,
    ) -> (Vec<ConfigKey>, Vec<super::telemetry::LoggingConfig>) {
        let applicable = self.telemetries(proxy);
        let logging = super::telemetry::access_logging(
            &applicable,
            &self.mesh.default_access_log_providers,
            &self.mesh.extension_providers,
            direction,
        );
        (super::telemetry::logging_key(&applicable), logging)
    }

    /// The metrics providers of `proxy` with their merged settings ([`super::metrics::metrics`]) and
    /// the keys of the Telemetries they come from (proxies with equal keys get equal settings).
    pub fn metrics(&self, proxy: &ProxyContext) -> (Vec<ConfigKey>, Vec<super::metrics::ProviderMetrics>) {
        let applicable = self.telemetries(proxy);
        let metrics = super::metrics::metrics(
            &applicable,
            &self.mesh.default_metrics_providers,
            &self.mesh.extension_providers,
        );
        (super::metrics::metrics_key(&applicable), metrics)
    }

    /// What policies are matched against for `proxy`, serving the classic Gateways `gateways`
    /// ([`PushContext::gateway_keys`]).
    fn policy_matcher<'a>(
        &'a self,
        proxy: &'a ProxyContext,
        gateways: &'a [(String, String)],
    ) -> crate::push::policy::PolicyMatcher<'a> {
        crate::push::policy::PolicyMatcher {
            namespace: &proxy.namespace,
            labels: &proxy.labels,
            gateways,
            root_namespace: &self.mesh.root_namespace,
        }
    }

    /// The Telemetry tracing of `proxy` ([`super::tracing::tracing`]); `None`: the mesh config's
    /// `enableTracing` decides.
    pub fn tracing(&self, proxy: &ProxyContext) -> Option<super::tracing::TracingConfig> {
        super::tracing::tracing(
            &self.telemetries(proxy),
            &self.mesh.default_tracing_providers,
            &self.mesh.extension_providers,
        )
    }

    fn gateway_keys(&self, proxy: &ProxyContext) -> Vec<(String, String)> {
        if proxy.kind == ProxyKind::Router {
            self.gateways_for_proxy(proxy)
                .iter()
                .map(|g| (g.config.meta.namespace.clone(), g.config.meta.name.clone()))
                .collect()
        } else {
            Vec::new()
        }
    }

    fn policies_for(
        &self,
        proxy: &ProxyContext,
        index: &HashMap<String, Vec<Arc<Config>>>,
    ) -> Vec<Arc<Config>> {
        if index.is_empty() {
            return Vec::new();
        }
        let gateways = self.gateway_keys(proxy);
        let matcher = self.policy_matcher(proxy, &gateways);
        matcher.select(|ns| index.get(ns).map(Vec::as_slice).unwrap_or(&[]))
    }

    /// The PeerAuthentication in force for `proxy`'s workload (its namespace and labels), resolved as
    /// Istio does ([`effective_peer_authentication`]).
    pub fn peer_authentication(&self, proxy: &ProxyContext) -> EffectivePeerAuthentication {
        effective_peer_authentication(
            &self.config.peer_authentications,
            &self.mesh.root_namespace,
            &proxy.namespace,
            &proxy.labels,
        )
    }

    /// The mTLS mode a workload in `namespace` with `labels` accepts on `port` (0 and empty labels:
    /// the namespace's, else the mesh's, mode — Istio's namespace-level inference), resolved as
    /// Istio does ([`effective_peer_authentication`]). PERMISSIVE without any policy.
    pub fn workload_mtls_mode(&self, namespace: &str, labels: &Labels, port: u32) -> MtlsMode {
        if self.config.peer_authentications.is_empty() {
            return MtlsMode::Permissive;
        }
        effective_peer_authentication(
            &self.config.peer_authentications,
            &self.mesh.root_namespace,
            namespace,
            labels,
        )
        .for_port(port)
    }

    /// The scope key of `proxy`: its namespace and the Sidecar that applies.
    pub fn scope_key(&self, proxy: &ProxyContext) -> ScopeKey {
        (proxy.namespace.clone(), self.sidecar_for(proxy).map(|c| c.key()))
    }

    /// Computes the proxy's [`SidecarScope`] (Istio's `SetSidecarScope`): the services and
    /// VirtualServices it imports under the Sidecar that applies ([`PushContext::sidecar_for`]). Not
    /// cached here; proxies with the same [`PushContext::scope_key`] get equal scopes, which is what
    /// the generation cache of `networking` shares.
    pub fn compute_sidecar_scope(&self, proxy: &ProxyContext) -> SidecarScope {
        let sidecar = self.sidecar_for(proxy);
        SidecarScope::build(self, &proxy.namespace, sidecar.as_deref())
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
}
