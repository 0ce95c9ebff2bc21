//! Services and endpoints: what service registries produce and the xDS generators consume.
//!
//! ```text
//!  registries (ServiceEntry/WorkloadEntry; later Kubernetes)
//!      │ ServiceDiscovery: services, service by (hostname, namespace), endpoints by port and subset,
//!      │                   instances of a proxy by IP
//!      │ ServiceController: + append_event_handler, has_synced, endpoint shards, warnings
//!      ▼
//!  RegistryEvent ──► Service(ServiceEvent)     → full push, ConfigsUpdated {ServiceEntry, hostname, namespace}
//!               └──► Endpoints(EndpointUpdate) → EDS (incremental) or full push, per `EndpointPush`
//! ```
//!
//! The types follow Istio's `pilot/pkg/model/service.go` (`Service`, `Port`, `IstioEndpoint`,
//! `ServiceInstance`) and `endpointshards.go` (shards, the push-type rule), with the names in Rust
//! case. The notification types ([`ServiceEvent`], [`EndpointUpdate`], [`RegistryEvent`]) and the
//! handler registration ([`ServiceController::append_event_handler`]) live here, in `model`, so that
//! the xDS server depends on the model only, never on a registry crate.
//!
//! Protocols are [`Protocol`] (`api::protocol`, re-exported as `model::Protocol`): a ServiceEntry port takes its declared
//! `protocol` ([`Protocol::parse`], as Istio's `convertPort`; the port *name* is not consulted), a
//! Kubernetes Service port its `appProtocol` or name prefix ([`convert_protocol`]).

use std::{
    cmp::Ordering,
    collections::{BTreeMap, BTreeSet},
    fmt,
    sync::Arc,
};

pub use api::protocol::{convert_protocol, protocol_from_port_name};
use api::{Kind, protocol::Protocol};

use crate::{ConfigKey, Event};

/// Config kinds whose changes reach the DiscoveryServer through the service registry instead of the
/// config handlers (Istio: the ServiceEntry controller owns them, `pilot/pkg/serviceregistry/serviceentry`).
pub const REGISTRY_KINDS: [Kind; 3] = [Kind::ServiceEntry, Kind::WorkloadEntry, Kind::WorkloadGroup];

/// Labels of a service, workload or endpoint; also used as a selector (every pair must match).
pub type Labels = BTreeMap<String, String>;

/// Cluster id of the config cluster when none is configured (Istio's `--clusterID` default).
pub const DEFAULT_CLUSTER_ID: &str = "Kubernetes";
/// Trust domain of SPIFFE identities when none is configured (Istio's mesh config default).
pub const DEFAULT_TRUST_DOMAIN: &str = "cluster.local";
/// The address Istio gives a service that declares none (`constants.UnspecifiedIP`).
pub const UNSPECIFIED_IP: &str = "0.0.0.0";
/// Prefix of Unix domain socket endpoint addresses (`model.UnixAddressPrefix`).
pub const UNIX_ADDRESS_PREFIX: &str = "unix://";

/// Label that tells whether an endpoint accepts Istio mutual TLS (`security.istio.io/tlsMode`).
pub const TLS_MODE_LABEL: &str = "security.istio.io/tlsMode";
/// [`TLS_MODE_LABEL`] value of endpoints with an Istio proxy (`model.IstioMutualTLSModeLabel`).
pub const TLS_MODE_ISTIO: &str = "istio";
/// [`TLS_MODE_LABEL`] value of endpoints without one (`model.DisabledTLSModeLabel`).
pub const TLS_MODE_DISABLED: &str = "disabled";
/// Endpoint label carrying the locality region (`topology.kubernetes.io/region`).
pub const LABEL_TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
/// Endpoint label carrying the locality zone (`topology.kubernetes.io/zone`).
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// Endpoint label carrying the locality subzone (`topology.istio.io/subzone`).
pub const LABEL_TOPOLOGY_SUBZONE: &str = "topology.istio.io/subzone";
/// Label carrying the Kubernetes node name (`kubernetes.io/hostname`), one of the topology labels
/// Istio adds to proxies and endpoints.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// Endpoint label carrying the cluster id (`topology.istio.io/cluster`).
pub const LABEL_TOPOLOGY_CLUSTER: &str = "topology.istio.io/cluster";
/// Endpoint label carrying the network (`topology.istio.io/network`).
pub const LABEL_TOPOLOGY_NETWORK: &str = "topology.istio.io/network";
/// Workload label giving the whole locality as `region.zone.subzone` or with `/`
/// (`topology.istio.io/locality`).
pub const LABEL_TOPOLOGY_LOCALITY: &str = "topology.istio.io/locality";
/// The older spelling of [`LABEL_TOPOLOGY_LOCALITY`] (`istio-locality`).
pub const LABEL_ISTIO_LOCALITY: &str = "istio-locality";

/// Which kind of registry a service comes from (Istio's `provider.ID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProviderId {
    /// Kubernetes Services and their endpoints (`Kubernetes`).
    Kubernetes,
    /// ServiceEntries and WorkloadEntries (`External`).
    External,
}

impl ProviderId {
    /// Istio's name: `Kubernetes` or `External`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderId::Kubernetes => "Kubernetes",
            ProviderId::External => "External",
        }
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Identifies one registry's share of a service's endpoints (Istio's `ShardKey`): provider and
/// cluster. Written `provider/cluster` (`External/Kubernetes`), as `/debug/endpointz` keys it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardKey {
    /// The registry kind.
    pub provider: ProviderId,
    /// The cluster the registry reads.
    pub cluster: String,
}

impl fmt::Display for ShardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.cluster)
    }
}

/// A port of a service (Istio's `model.Port`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Port {
    /// Port name; endpoints refer to their service port by this name.
    pub name: String,
    /// Port number clients connect to (1–65535).
    pub port: u32,
    /// Application protocol.
    pub protocol: Protocol,
}

/// How a proxy finds the addresses of a service's endpoints (Istio's `model.Resolution`).
///
/// From a ServiceEntry's `resolution`: `STATIC` → [`ClientSideLb`](Resolution::ClientSideLb),
/// `DNS` → [`Dns`](Resolution::Dns), `DNS_ROUND_ROBIN` → [`DnsRoundRobin`](Resolution::DnsRoundRobin),
/// `NONE` → [`Passthrough`](Resolution::Passthrough), `DYNAMIC_DNS` → [`DynamicDns`](Resolution::DynamicDns).
/// Annotation of Services and ServiceEntries giving their traffic distribution when the Kubernetes
/// field is unset (`networking.istio.io/traffic-distribution`).
pub const ANNOTATION_TRAFFIC_DISTRIBUTION: &str = "networking.istio.io/traffic-distribution";

/// A Service's preference for nearby endpoints (Istio's `TrafficDistribution`, from Kubernetes'
/// `spec.trafficDistribution` or the [`ANNOTATION_TRAFFIC_DISTRIBUTION`] annotation). Locality load
/// balancing turns it into failover priorities when no DestinationRule sets one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TrafficDistribution {
    /// No preference.
    #[default]
    Any,
    /// `PreferSameZone` (or the older `PreferClose`): same network, region, zone first.
    PreferSameZone,
    /// `PreferSameNode`: same network, region, zone, subzone, node first.
    PreferSameNode,
}

impl TrafficDistribution {
    /// Istio's `GetTrafficDistribution` without the namespace annotation: the Kubernetes field when it
    /// names a known value (`PreferClose`, `PreferSameZone`, `PreferSameNode`, case-sensitive as
    /// Kubernetes), else the annotation compared case-insensitively; anything else is `Any`.
    pub fn from_spec(spec: Option<&str>, annotation: Option<&str>) -> TrafficDistribution {
        match spec {
            Some("PreferClose" | "PreferSameZone") => return TrafficDistribution::PreferSameZone,
            Some("PreferSameNode") => return TrafficDistribution::PreferSameNode,
            _ => {}
        }
        match annotation.map(str::to_ascii_lowercase).as_deref() {
            Some("preferclose" | "prefersamezone") => TrafficDistribution::PreferSameZone,
            Some("prefersamenode") => TrafficDistribution::PreferSameNode,
            _ => TrafficDistribution::Any,
        }
    }
}

/// A Kubernetes `type: ExternalName` Service is an [`Alias`](Resolution::Alias) (Istio's
/// `ConvertService`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resolution {
    /// The proxy load-balances over the endpoints it is given (EDS).
    ClientSideLb,
    /// The proxy resolves the endpoints' names and uses every address (strict DNS).
    Dns,
    /// The proxy forwards to the original destination address.
    Passthrough,
    /// The proxy resolves names and uses the first address (logical DNS).
    DnsRoundRobin,
    /// The proxy resolves the request's host at request time (dynamic forward proxy).
    DynamicDns,
    /// Another name for the service named by [`Service::external_name`] (Istio's `Alias`, a
    /// Kubernetes `ExternalName` Service): no cluster, listener or virtual host of its own; its
    /// hostname is served by the concrete service's ([`Service::aliases`]).
    Alias,
}

impl Resolution {
    /// Istio's name (`ClientSide`, `DNS`, `DNSRoundRobin`, `Passthrough`, `DynamicDNS`; `4` for
    /// [`Alias`](Resolution::Alias), which Istio's `String` does not name).
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::ClientSideLb => "ClientSide",
            Resolution::Dns => "DNS",
            Resolution::Passthrough => "Passthrough",
            Resolution::DnsRoundRobin => "DNSRoundRobin",
            Resolution::DynamicDns => "DynamicDNS",
            // Istio's `Resolution.String` has no name for it and prints the number.
            Resolution::Alias => "4",
        }
    }

    /// The number Istio's Go enum has (`/debug/registryz` writes the number).
    pub fn istio_number(self) -> u32 {
        match self {
            Resolution::ClientSideLb => 0,
            Resolution::Dns => 1,
            Resolution::Passthrough => 2,
            Resolution::DnsRoundRobin => 3,
            Resolution::Alias => 4,
            Resolution::DynamicDns => 5,
        }
    }

    /// `true` for [`Dns`](Resolution::Dns) and [`DnsRoundRobin`](Resolution::DnsRoundRobin): the
    /// endpoints travel inside the cluster (CDS), so an endpoint change needs a full push.
    pub fn is_dns(self) -> bool {
        matches!(self, Resolution::Dns | Resolution::DnsRoundRobin)
    }
}

/// One entry of a service's `exportTo` (Istio's `visibility.Instance`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExportTo {
    /// `*`: every namespace.
    Public,
    /// `.`: the service's own namespace.
    Private,
    /// `~`: no namespace.
    None,
    /// A namespace by name.
    Namespace(String),
}

impl ExportTo {
    /// Reads one `exportTo` entry: `*`, `.`, `~` or a namespace name.
    pub fn parse(text: &str) -> ExportTo {
        match text {
            "*" => ExportTo::Public,
            "." => ExportTo::Private,
            "~" => ExportTo::None,
            ns => ExportTo::Namespace(ns.to_string()),
        }
    }

    /// The entry as written (`*`, `.`, `~`, or the namespace).
    pub fn as_str(&self) -> &str {
        match self {
            ExportTo::Public => "*",
            ExportTo::Private => ".",
            ExportTo::None => "~",
            ExportTo::Namespace(ns) => ns,
        }
    }
}

/// A service: a hostname with ports, reachable at its endpoints (Istio's `model.Service`).
///
/// Differences from Istio: one `Service` holds all of a ServiceEntry host's `addresses`, where Istio
/// makes one `Service` per (host, address) pair (`/debug/registryz` expands them back, see the
/// registry crate); Istio's `Attributes` are flattened into this struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Service {
    /// The hostname, as written in the ServiceEntry (wildcards allowed) or `<name>.<ns>.svc.<suffix>`
    /// for Kubernetes.
    pub hostname: String,
    /// The namespace of the object that declared the service.
    pub namespace: String,
    /// Istio's `Attributes.Name`: the host for a ServiceEntry, the Service name for Kubernetes.
    pub name: String,
    /// Istio's `K8sAttributes.ObjectName`: the name of the declaring object (the ServiceEntry).
    pub object_name: String,
    /// The registry kind it comes from.
    pub registry: ProviderId,
    /// Ports, in declaration order.
    pub ports: Vec<Port>,
    /// Virtual IPs or CIDR ranges (a `/32` or `/128` written as the bare IP); empty when the service
    /// declares none (Istio then uses [`UNSPECIFIED_IP`]).
    pub addresses: Vec<String>,
    /// How endpoints are resolved.
    pub resolution: Resolution,
    /// `true` for services outside the mesh (ServiceEntry `location: MESH_EXTERNAL`, the default).
    pub mesh_external: bool,
    /// Namespaces the service is visible to; empty means the mesh default, every namespace.
    pub export_to: BTreeSet<ExportTo>,
    /// Labels of the declaring object.
    pub labels: Labels,
    /// The workload selector, when endpoints are selected by labels.
    pub label_selector: Option<Labels>,
    /// Identities the service runs as (ServiceEntry `subjectAltNames`); endpoints add theirs.
    pub service_accounts: Vec<String>,
    /// Creation time of the declaring object (RFC 3339), if known. Older services win hostname
    /// conflicts.
    pub creation_time: Option<String>,
    /// Service port → target port, for `NONE` resolution ServiceEntry ports with a `targetPort`
    /// (Istio's `PassthroughTargetPorts`).
    pub passthrough_target_ports: BTreeMap<u32, u32>,
    /// `spec.externalName` of a Kubernetes `ExternalName` Service (Istio's
    /// `K8sAttributes.ExternalName`): the host an [`Alias`](Resolution::Alias) stands for.
    pub external_name: Option<String>,
    /// The aliases that resolve to this service, by namespace then hostname (Istio's
    /// `Attributes.Aliases`). Registries leave it empty; the push context fills it in
    /// ([`resolve_service_aliases`]).
    pub aliases: Vec<ServiceAlias>,
    /// Addresses auto-allocated to a ServiceEntry host without `addresses` (Istio's
    /// `AutoAllocatedIPv4Address` then `AutoAllocatedIPv6Address`): read from the ServiceEntry's
    /// `status.addresses` (written by the allocator, [`crate::autoallocate`]), at most one per IP
    /// family. Only proxies that capture DNS use them ([`Service::addresses_for_proxy`]).
    pub auto_allocated: Vec<String>,
    /// The Service's preference for nearby endpoints (Istio's `Attributes.TrafficDistribution`).
    pub traffic_distribution: TrafficDistribution,
    /// The addresses the service is reached at from outside each cluster, by cluster id (Istio's
    /// `Attributes.ClusterExternalAddresses`): a Kubernetes `LoadBalancer` Service's
    /// `status.loadBalancer.ingress` IPs (else host names), then its `spec.externalIPs`. Empty for
    /// other services. What an east-west gateway Service is reached at
    /// ([`crate::network::gateways_from_service`]).
    pub cluster_external_addresses: BTreeMap<String, Vec<String>>,
}

/// An alias of a service: the hostname and namespace of an [`Alias`](Resolution::Alias) service
/// (Istio's `NamespacedHostname`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceAlias {
    /// The namespace of the alias (ordered first, as Istio sorts them).
    pub namespace: String,
    /// The alias' hostname.
    pub hostname: String,
}

impl Service {
    /// The port with this number.
    pub fn port_by_number(&self, number: u32) -> Option<&Port> {
        self.ports.iter().find(|p| p.port == number)
    }

    /// The port with this name.
    pub fn port_by_name(&self, name: &str) -> Option<&Port> {
        self.ports.iter().find(|p| p.name == name)
    }

    /// The first address, or [`UNSPECIFIED_IP`] (Istio's `DefaultAddress`).
    pub fn default_address(&self) -> &str {
        self.addresses.first().map_or(UNSPECIFIED_IP, String::as_str)
    }

    /// `true` if a proxy in `namespace` may see this service, by `exportTo` (Istio's
    /// `PushContext.IsServiceVisible` with the mesh default `*`): empty or `*` → everyone; `.` → the
    /// service's namespace; a name → that namespace; `~` alone → nobody.
    pub fn visible_to(&self, namespace: &str) -> bool {
        if self.export_to.is_empty() {
            return true;
        }
        self.export_to.iter().any(|e| match e {
            ExportTo::Public => true,
            ExportTo::Private => self.namespace == namespace,
            ExportTo::None => false,
            ExportTo::Namespace(ns) => ns == namespace,
        })
    }

    /// `true` if exported to every namespace (empty `exportTo` or `*`).
    pub fn is_public(&self) -> bool {
        self.export_to.is_empty() || self.export_to.contains(&ExportTo::Public)
    }

    /// The key a service change puts into a push request's `ConfigsUpdated`:
    /// `{ServiceEntry, <hostname>, <namespace>}`, as Istio's service handler does.
    pub fn config_key(&self) -> ConfigKey {
        service_config_key(&self.hostname, &self.namespace)
    }

    /// Istio's `Service.Equals`: equal in everything that affects generated config. The creation time
    /// is ignored, so re-reading an unchanged object raises no service change.
    pub fn equals_for_push(&self, other: &Service) -> bool {
        self.hostname == other.hostname
            && self.namespace == other.namespace
            && self.name == other.name
            && self.object_name == other.object_name
            && self.registry == other.registry
            && self.ports == other.ports
            && self.addresses == other.addresses
            && self.resolution == other.resolution
            && self.mesh_external == other.mesh_external
            && self.export_to == other.export_to
            && self.labels == other.labels
            && self.label_selector == other.label_selector
            && self.service_accounts == other.service_accounts
            && self.passthrough_target_ports == other.passthrough_target_ports
            && self.external_name == other.external_name
            && self.aliases == other.aliases
            && self.auto_allocated == other.auto_allocated
    }

    /// The host whose clusters a route destination naming this service goes to (Istio's
    /// `GetDestinationCluster`): an alias' external name (one hop only, as Istio), else the hostname.
    pub fn destination_host(&self) -> &str {
        self.external_name.as_deref().unwrap_or(&self.hostname)
    }

    /// `true` for an [`Alias`](Resolution::Alias).
    pub fn is_alias(&self) -> bool {
        self.resolution == Resolution::Alias
    }
}

/// Sets [`Service::aliases`] on the services that aliases resolve to (Istio's
/// `resolveServiceAliases`, run when the push context indexes services): each
/// [`Alias`](Resolution::Alias) points at its [`external_name`](Service::external_name); a chain of
/// aliases is followed to the first host that is not an alias (external names are not namespaced: an
/// alias hostname declared in several namespaces counts once); a chain that loops resolves to nothing
/// (Kubernetes DNS answers NXDOMAIN). Every service with the concrete hostname, in any namespace, gets
/// the aliases, sorted by namespace then hostname. An alias whose target no service defines is in no
/// list: it then gets nothing at all. Services are replaced by copies where the list changes.
pub fn resolve_service_aliases(services: &mut [Arc<Service>]) {
    let raw: Vec<(ServiceAlias, &str)> = services
        .iter()
        .filter(|s| s.is_alias())
        .filter_map(|s| {
            let target = s.external_name.as_deref()?;
            Some((ServiceAlias { namespace: s.namespace.clone(), hostname: s.hostname.clone() }, target))
        })
        .collect();
    if raw.is_empty() {
        return;
    }
    let next: BTreeMap<&str, &str> = raw.iter().map(|(a, t)| (a.hostname.as_str(), *t)).collect();
    let mut by_concrete: BTreeMap<String, Vec<ServiceAlias>> = BTreeMap::new();
    for (alias, target) in &raw {
        let mut concrete = *target;
        let mut seen: BTreeSet<&str> = BTreeSet::from([alias.hostname.as_str(), concrete]);
        let resolved = loop {
            match next.get(concrete) {
                None => break Some(concrete),
                Some(n) if !seen.insert(n) => break None,
                Some(n) => concrete = n,
            }
        };
        if let Some(concrete) = resolved {
            by_concrete.entry(concrete.to_string()).or_default().push(alias.clone());
        }
    }
    for list in by_concrete.values_mut() {
        list.sort();
    }
    for s in services.iter_mut() {
        if let Some(aliases) = by_concrete.get(&s.hostname)
            && &s.aliases != aliases
        {
            let mut copy = Service::clone(s);
            copy.aliases = aliases.clone();
            *s = Arc::new(copy);
        }
    }
}

/// `{ServiceEntry, hostname, namespace}`: the push key of a service change.
pub fn service_config_key(hostname: &str, namespace: &str) -> ConfigKey {
    ConfigKey { kind: Kind::ServiceEntry, namespace: namespace.to_string(), name: hostname.to_string() }
}

/// The order in which services with the same hostname win, best first, as a proxy in `viewer`
/// namespace sees them (`None`: no viewer, e.g. a debug lookup).
///
/// Follows Istio's sidecar scope (`SidecarScope.appendSidecarServices` over
/// `PushContext.servicesExportedToNamespace`) and `PushContext.initServiceRegistry`:
/// 1. a Kubernetes service beats any other registry's ("domain squatting" protection);
/// 2. a service exported specifically to the viewer (`.` in its own namespace, or the viewer's
///    name) beats a public one;
/// 3. the older service wins (a missing creation time counts as oldest, like Go's zero time);
/// 4. then namespace and object name, so the choice is deterministic.
pub fn compare_service_precedence(a: &Service, b: &Service, viewer: Option<&str>) -> Ordering {
    // `false` sorts first.
    let not_kubernetes = |s: &Service| s.registry != ProviderId::Kubernetes;
    let public_for_viewer = |s: &Service| viewer.is_some() && s.is_public();
    not_kubernetes(a)
        .cmp(&not_kubernetes(b))
        .then_with(|| public_for_viewer(a).cmp(&public_for_viewer(b)))
        .then_with(|| a.creation_time.cmp(&b.creation_time))
        .then_with(|| a.namespace.cmp(&b.namespace))
        .then_with(|| a.object_name.cmp(&b.object_name))
}

/// The service a proxy in `viewer` namespace uses for a hostname: among `candidates` (same hostname)
/// visible to `viewer`, the first by [`compare_service_precedence`].
pub fn pick_visible_service<'a>(
    candidates: impl IntoIterator<Item = &'a Arc<Service>>,
    viewer: &str,
) -> Option<&'a Arc<Service>> {
    candidates
        .into_iter()
        .filter(|s| s.visible_to(viewer))
        .min_by(|a, b| compare_service_precedence(a, b, Some(viewer)))
}

/// Health of an endpoint (Istio's `HealthStatus`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HealthStatus {
    /// Ready for traffic.
    #[default]
    Healthy,
    /// No health reported: ServiceEntry and WorkloadEntry endpoints (Istio leaves their status unset,
    /// 0). Served like [`HealthStatus::Healthy`]; sent to Envoy as `UNKNOWN`, which Envoy also routes
    /// to, as istiod sends it.
    Unknown,
    /// Not ready.
    Unhealthy,
    /// Shutting down but still serving sticky sessions.
    Draining,
    /// Shutting down.
    Terminating,
}

impl HealthStatus {
    /// The number Istio's Go enum has (1–4; 0 when unset).
    pub fn istio_number(self) -> u32 {
        match self {
            HealthStatus::Unknown => 0,
            HealthStatus::Healthy => 1,
            HealthStatus::Unhealthy => 2,
            HealthStatus::Draining => 3,
            HealthStatus::Terminating => 4,
        }
    }
}

/// Where an endpoint runs (Istio's `model.Locality`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Locality {
    /// `region/zone/subzone`, any part may be missing.
    pub label: String,
    /// The cluster the endpoint was read from.
    pub cluster_id: String,
}

/// One endpoint of one service port (Istio's `IstioEndpoint`): a workload address and the port on
/// it that serves the named service port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Addresses: an IP (the first is the one Envoy connects to), a DNS name for DNS-resolved
    /// services, or a Unix socket path.
    pub addresses: Vec<String>,
    /// Name of the service port this endpoint serves.
    pub service_port_name: String,
    /// The service port *number* this endpoint serves; 0 when endpoints are matched by name only.
    /// ServiceEntry endpoints set it (Istio's `LegacyClusterPortKey`: EDS historically matched
    /// ServiceEntry endpoints by number).
    pub legacy_cluster_port_key: u32,
    /// Port on the workload (0 for Unix sockets).
    pub endpoint_port: u32,
    /// Workload labels plus the topology labels Istio adds (region, zone, subzone, cluster, network).
    /// Shared: a workload's endpoints (one per service port, per selecting service) hold one map.
    pub labels: Arc<Labels>,
    /// SPIFFE identity (`spiffe://<trust domain>/ns/<ns>/sa/<account>`), or empty.
    pub service_account: String,
    /// Network the endpoint is on; empty for the default network.
    pub network: String,
    /// Locality.
    pub locality: Locality,
    /// Load-balancing weight; 0 means unset (Envoy's default, 1).
    pub lb_weight: u32,
    /// [`TLS_MODE_ISTIO`] when the endpoint accepts Istio mutual TLS, else [`TLS_MODE_DISABLED`]
    /// (or whatever the `security.istio.io/tlsMode` label says).
    pub tls_mode: String,
    /// Namespace of the workload.
    pub namespace: String,
    /// Workload name, for telemetry.
    pub workload_name: String,
    /// Health.
    pub health_status: HealthStatus,
}

impl Endpoint {
    /// The first address, or `""`.
    pub fn first_address(&self) -> &str {
        self.addresses.first().map_or("", String::as_str)
    }

    /// Istio's `IstioEndpoint.Key`: `namespace/workload/first-address/service-port-name`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.namespace,
            self.workload_name,
            self.first_address(),
            self.service_port_name
        )
    }

    /// The weight Envoy gets: [`lb_weight`](Endpoint::lb_weight), or 1 when unset.
    pub fn load_balancing_weight(&self) -> u32 {
        if self.lb_weight > 0 { self.lb_weight } else { 1 }
    }

    /// `true` if the endpoint serves `port` of `service`: by number when
    /// [`legacy_cluster_port_key`](Endpoint::legacy_cluster_port_key) is set, else by name (Istio's
    /// `EndpointShards.CopyEndpoints`).
    pub fn serves(&self, service: &Service, port: u32) -> bool {
        if self.legacy_cluster_port_key != 0 {
            return self.legacy_cluster_port_key == port && service.port_by_number(port).is_some();
        }
        service.port_by_name(&self.service_port_name).is_some_and(|p| p.port == port)
    }
}

/// `true` if every pair of `selector` is in `labels` (an empty selector selects everything), as
/// Istio's `labels.Instance.SubsetOf`.
pub fn labels_match(selector: &Labels, labels: &Labels) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// A service port served by an endpoint (Istio's `ServiceInstance`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceInstance {
    /// The service.
    pub service: Arc<Service>,
    /// The service port.
    pub service_port: Port,
    /// The endpoint.
    pub endpoint: Arc<Endpoint>,
}

/// Read access to services and endpoints: what the xDS generators need (Istio's
/// `model.ServiceDiscovery`, reduced).
///
/// Services are keyed by (hostname, namespace): the same hostname may be declared in several
/// namespaces; [`visible_service`](ServiceDiscovery::visible_service) picks the one a proxy uses.
pub trait ServiceDiscovery: Send + Sync {
    /// Every service, one per (hostname, namespace), ordered by hostname then namespace.
    fn services(&self) -> Vec<Arc<Service>>;

    /// The service with this hostname declared in `namespace`.
    fn get_service(&self, hostname: &str, namespace: &str) -> Option<Arc<Service>>;

    /// The service a proxy in namespace `viewer` uses for `hostname`: visible to it by `exportTo`,
    /// chosen by [`compare_service_precedence`] when several namespaces declare the hostname.
    fn visible_service(&self, hostname: &str, viewer: &str) -> Option<Arc<Service>> {
        let all = self.services();
        pick_visible_service(all.iter().filter(|s| s.hostname == hostname), viewer).cloned()
    }

    /// Endpoints of the service (`hostname`, `namespace`) that serve its port number `port`, with
    /// labels matching `subset` when given (a DestinationRule subset). Empty when the service or
    /// port is unknown.
    fn endpoints(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        subset: Option<&Labels>,
    ) -> Vec<Arc<Endpoint>>;

    /// The service instances running at any of `ips` (a proxy's addresses), restricted to services
    /// in `namespace` when given (Istio's `GetProxyServiceTargets`: a proxy only serves services of
    /// its own namespace).
    fn proxy_instances(&self, ips: &[String], namespace: Option<&str>) -> Vec<ServiceInstance>;

    /// The service instances of a proxy at `ips` in `namespace` with `labels` (Istio's
    /// `GetProxyServiceTargets`, which is given the whole proxy). By default
    /// [`proxy_instances`](ServiceDiscovery::proxy_instances) in the namespace; the Kubernetes registry
    /// also matches the labels against Service selectors when no pod is at the IPs (Istio's
    /// `GetProxyServiceTargetsFromMetadata`: a pod not seen yet, a VM).
    fn proxy_service_targets(
        &self,
        ips: &[String],
        namespace: &str,
        labels: &Labels,
    ) -> Vec<ServiceInstance> {
        let _ = labels;
        self.proxy_instances(ips, Some(namespace))
    }
}

/// A change of a service's definition: the server turns it into a full push with
/// `ConfigsUpdated = {`[`config_key`](ServiceEvent::config_key)`}` (Istio's service handler,
/// reason `service`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceEvent {
    /// The registry shard the service comes from.
    pub shard: ShardKey,
    /// The service hostname.
    pub hostname: String,
    /// The service namespace.
    pub namespace: String,
    /// Add, Update or Delete. A Delete also means the service's endpoints in this shard are gone.
    pub event: Event,
}

impl ServiceEvent {
    /// `{ServiceEntry, hostname, namespace}`.
    pub fn config_key(&self) -> ConfigKey {
        service_config_key(&self.hostname, &self.namespace)
    }
}

/// What an endpoint change needs (Istio's `PushType` without `NoPush`: no change raises no update).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EndpointPush {
    /// Only the service's ClusterLoadAssignments are re-sent (EDS).
    Incremental,
    /// A full push keyed `{ServiceEntry, hostname, namespace}`: the service's endpoint shard is new,
    /// its set of service accounts changed (certificate SANs in CDS), or the service is DNS-resolved
    /// (endpoints live in CDS).
    Full,
}

/// A registry's complete, new list of endpoints for one service (Istio's `EDSUpdate`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointUpdate {
    /// The registry shard; replaces what this shard said before about the service.
    pub shard: ShardKey,
    /// The service hostname.
    pub hostname: String,
    /// The service namespace.
    pub namespace: String,
    /// Every endpoint of the service in this shard, all ports.
    pub endpoints: Vec<Arc<Endpoint>>,
    /// Incremental (EDS) or full push.
    pub push: EndpointPush,
}

impl EndpointUpdate {
    /// `{ServiceEntry, hostname, namespace}` (the key of the full push, when [`EndpointPush::Full`]).
    pub fn config_key(&self) -> ConfigKey {
        service_config_key(&self.hostname, &self.namespace)
    }
}

/// A notification from a service registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistryEvent {
    /// A service appeared, changed or went away.
    Service(ServiceEvent),
    /// A service's endpoints changed.
    Endpoints(EndpointUpdate),
}

/// Receives registry notifications. Called from the registry's update path, one event at a time and
/// in order (service event before the endpoint update of the same change); keep it short and do
/// not block on the registry.
pub type RegistryEventHandler = Arc<dyn Fn(&RegistryEvent) + Send + Sync>;

/// One registry's endpoints of one service, with their identities (Istio's `EndpointShards` entry,
/// as `/debug/endpointz` shows it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointShard {
    /// The registry shard.
    pub shard: ShardKey,
    /// The service hostname.
    pub hostname: String,
    /// The service namespace.
    pub namespace: String,
    /// The endpoints, all ports.
    pub endpoints: Vec<Arc<Endpoint>>,
    /// Service accounts seen on the endpoints (kept when the endpoints drop to none).
    pub service_accounts: BTreeSet<String>,
}

/// Something wrong with registry input that did not stop the registry: the object, and what
/// happened to it. Shown by the debug endpoint; never fatal.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RegistryWarning {
    /// The object the warning is about.
    pub object: ConfigKey,
    /// The service hostname concerned, if any.
    pub hostname: Option<String>,
    /// What is wrong and what the registry did about it.
    pub message: String,
}

impl fmt::Display for RegistryWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.message)
    }
}

/// A registry the server can subscribe to (Istio's `serviceregistry.Instance`, reduced).
pub trait ServiceController: ServiceDiscovery {
    /// Adds a handler for every later [`RegistryEvent`]. Events raised before the handler was added
    /// are not replayed: read the current state with [`ServiceDiscovery`] after adding it.
    fn append_event_handler(&self, handler: RegistryEventHandler);

    /// `true` once the registry has read its sources' initial state.
    fn has_synced(&self) -> bool;

    /// Every service's endpoints, for `/debug/endpointz`.
    fn endpoint_shards(&self) -> Vec<EndpointShard>;

    /// Current problems with the registry's input, for the debug endpoint.
    fn warnings(&self) -> Vec<RegistryWarning>;

    /// The Kubernetes clusters this registry reads, with their sync state (`/debug/clusterz`). By
    /// default none (a registry that reads no cluster: ServiceEntries).
    fn clusters(&self) -> Vec<ClusterInfo> {
        Vec::new()
    }
}

/// One cluster a registry reads endpoints from (istiod's `cluster.DebugInfo`, listed by
/// `/debug/clusterz` as `{"id", "secretName", "syncStatus"}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The cluster id (`--clusterID` for the config cluster, the Secret data key for a remote one).
    pub id: String,
    /// `namespace/name` of the remote Secret that configured the cluster; empty for the config cluster.
    pub secret_name: String,
    /// Where its initial sync stands.
    pub sync_status: ClusterSyncStatus,
    /// Why its kubeconfig was refused (then nothing of it is read); empty otherwise. Not in istiod's
    /// shape (istiod only logs it).
    pub error: String,
}

/// The sync state of one cluster (istiod's `SyncStatus*` strings in `pkg/kube/multicluster/cluster.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClusterSyncStatus {
    /// Every watch finished its initial list.
    Synced,
    /// Still listing.
    Syncing,
    /// Not synced within `PILOT_REMOTE_CLUSTER_TIMEOUT`: readiness no longer waits for it (it keeps
    /// trying, and its endpoints appear when it syncs).
    Timeout,
    /// Stopped (its Secret changed or went away).
    Closed,
}

impl ClusterSyncStatus {
    /// istiod's word: `synced`, `syncing`, `timeout`, `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterSyncStatus::Synced => "synced",
            ClusterSyncStatus::Syncing => "syncing",
            ClusterSyncStatus::Timeout => "timeout",
            ClusterSyncStatus::Closed => "closed",
        }
    }
}

/// Decides what a new endpoint list for a service needs, and keeps the service-account set
/// (Istio's `EndpointIndex.UpdateServiceEndpoints` for one shard).
///
/// - `None` (no update) when `new` equals `old` in content and order, or when there is no shard
///   yet (`old` is `None`) and `new` is empty (Istio creates no shard for an empty list);
/// - [`EndpointPush::Full`] when there was no shard for this service before (`old` is `None`) or
///   the set of non-empty service accounts changed;
/// - [`EndpointPush::Incremental`] otherwise, and always when `new` is empty: the service
///   accounts are then kept, so an endpoint that flaps between one and zero never forces full
///   pushes (Istio keeps the shard's accounts for the same reason).
///
/// `service_accounts` is updated to the accounts of `new` (unless `new` is empty). When the result is
/// `None` the caller keeps `old` as it was (no shard stays no shard).
pub fn classify_endpoint_update(
    old: Option<&[Arc<Endpoint>]>,
    new: &[Arc<Endpoint>],
    service_accounts: &mut BTreeSet<String>,
) -> Option<EndpointPush> {
    match old {
        Some(old) if old == new => return None,
        None if new.is_empty() => return None,
        _ => {}
    }
    if new.is_empty() {
        return Some(EndpointPush::Incremental);
    }
    let accounts: BTreeSet<&str> =
        new.iter().map(|e| e.service_account.as_str()).filter(|a| !a.is_empty()).collect();
    let accounts_changed = !accounts.iter().copied().eq(service_accounts.iter().map(String::as_str));
    if accounts_changed {
        *service_accounts = accounts.into_iter().map(str::to_string).collect();
    }
    if old.is_none() || accounts_changed { Some(EndpointPush::Full) } else { Some(EndpointPush::Incremental) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ns: &str, registry: ProviderId, created: Option<&str>, export: &[&str]) -> Service {
        Service {
            hostname: "h.example".into(),
            namespace: ns.into(),
            name: "h.example".into(),
            object_name: format!("se-{ns}"),
            registry,
            ports: vec![Port { name: "http".into(), port: 80, protocol: Protocol::Http }],
            addresses: vec![],
            resolution: Resolution::ClientSideLb,
            mesh_external: false,
            export_to: export.iter().map(|e| ExportTo::parse(e)).collect(),
            labels: Labels::new(),
            label_selector: None,
            service_accounts: vec![],
            creation_time: created.map(str::to_string),
            passthrough_target_ports: BTreeMap::new(),
            external_name: None,
            aliases: Vec::new(),
            auto_allocated: Vec::new(),
            traffic_distribution: Default::default(),
            cluster_external_addresses: Default::default(),
        }
    }

    fn ep(addr: &str, sa: &str) -> Arc<Endpoint> {
        Arc::new(Endpoint {
            addresses: vec![addr.into()],
            service_port_name: "http".into(),
            service_account: sa.into(),
            ..Endpoint::default()
        })
    }

    fn alias(ns: &str, hostname: &str, target: &str) -> Arc<Service> {
        let mut s = svc(ns, ProviderId::Kubernetes, None, &[]);
        s.hostname = hostname.into();
        s.resolution = Resolution::Alias;
        s.external_name = Some(target.into());
        Arc::new(s)
    }

    fn concrete(ns: &str, hostname: &str) -> Arc<Service> {
        let mut s = svc(ns, ProviderId::Kubernetes, None, &[]);
        s.hostname = hostname.into();
        Arc::new(s)
    }

    fn aliases_of(services: &[Arc<Service>], hostname: &str) -> Vec<(String, String)> {
        let s = services.iter().find(|s| s.hostname == hostname).unwrap();
        s.aliases.iter().map(|a| (a.namespace.clone(), a.hostname.clone())).collect()
    }

    #[test]
    fn aliases_resolve_to_the_concrete_service_through_several_hops() {
        let mut services = vec![
            concrete("db", "db.example.com"),
            alias("b", "z.b.svc", "db.example.com"),
            alias("a", "y.a.svc", "z.b.svc"),
            alias("a", "x.a.svc", "db.example.com"),
        ];
        resolve_service_aliases(&mut services);
        let pair = |ns: &str, h: &str| (ns.to_string(), h.to_string());
        assert_eq!(
            aliases_of(&services, "db.example.com"),
            [pair("a", "x.a.svc"), pair("a", "y.a.svc"), pair("b", "z.b.svc")],
            "both hops land on the concrete service, sorted by namespace then hostname"
        );
        assert!(aliases_of(&services, "z.b.svc").is_empty(), "an alias is no alias' target");
        assert_eq!(services[2].destination_host(), "z.b.svc", "routes follow one hop, as Istio");
        assert_eq!(services[0].destination_host(), "db.example.com");
    }

    #[test]
    fn alias_loops_and_unknown_targets_resolve_to_nothing() {
        let mut services = vec![
            concrete("a", "c.a.svc"),
            alias("a", "l1.a.svc", "l2.a.svc"),
            alias("a", "l2.a.svc", "l1.a.svc"),
            alias("a", "self.a.svc", "self.a.svc"),
            alias("a", "ext.a.svc", "nowhere.example.com"),
        ];
        let before = services.clone();
        resolve_service_aliases(&mut services);
        assert!(services.iter().all(|s| s.aliases.is_empty()), "{services:?}");
        assert!(services.iter().zip(&before).all(|(a, b)| Arc::ptr_eq(a, b)), "nothing copied");
    }

    #[test]
    fn export_to_visibility() {
        assert!(svc("a", ProviderId::External, None, &[]).visible_to("b"));
        assert!(svc("a", ProviderId::External, None, &["*"]).visible_to("b"));
        let private = svc("a", ProviderId::External, None, &["."]);
        assert!(private.visible_to("a") && !private.visible_to("b"));
        let named = svc("a", ProviderId::External, None, &["b", "c"]);
        assert!(named.visible_to("b") && named.visible_to("c") && !named.visible_to("a"));
        assert!(!svc("a", ProviderId::External, None, &["~"]).visible_to("a"));
    }

    #[test]
    fn precedence_kubernetes_then_specific_then_oldest() {
        let old = Arc::new(svc("a", ProviderId::External, Some("2020-01-01T00:00:00Z"), &[]));
        let young = Arc::new(svc("b", ProviderId::External, Some("2024-01-01T00:00:00Z"), &[]));
        let kube = Arc::new(svc("c", ProviderId::Kubernetes, Some("2025-01-01T00:00:00Z"), &[]));
        let private_b = Arc::new(svc("b", ProviderId::External, Some("2024-01-01T00:00:00Z"), &["."]));
        assert_eq!(pick_visible_service([&young, &old], "x").unwrap().namespace, "a");
        assert_eq!(pick_visible_service([&young, &old, &kube], "x").unwrap().namespace, "c");
        // Exported specifically to the viewer beats an older public service.
        assert_eq!(pick_visible_service([&old, &private_b], "b").unwrap().namespace, "b");
        // Not visible: skipped.
        assert_eq!(pick_visible_service([&private_b], "a"), None);
    }

    #[test]
    fn endpoint_push_rules() {
        let mut sas = BTreeSet::new();
        assert_eq!(classify_endpoint_update(None, &[], &mut sas), None, "no shard, nothing to say");
        let a = vec![ep("1.1.1.1", "spiffe://td/ns/n/sa/a")];
        assert_eq!(classify_endpoint_update(None, &a, &mut sas), Some(EndpointPush::Full), "new shard");
        assert_eq!(classify_endpoint_update(Some(&a), &a, &mut sas), None, "no change");
        let moved = vec![ep("1.1.1.2", "spiffe://td/ns/n/sa/a")];
        assert_eq!(classify_endpoint_update(Some(&a), &moved, &mut sas), Some(EndpointPush::Incremental));
        let other_sa = vec![ep("1.1.1.2", "spiffe://td/ns/n/sa/b")];
        assert_eq!(classify_endpoint_update(Some(&moved), &other_sa, &mut sas), Some(EndpointPush::Full));
        // Dropping to zero is incremental and keeps the accounts; coming back with them is too.
        assert_eq!(classify_endpoint_update(Some(&other_sa), &[], &mut sas), Some(EndpointPush::Incremental));
        assert_eq!(sas.len(), 1);
        assert_eq!(classify_endpoint_update(Some(&[]), &other_sa, &mut sas), Some(EndpointPush::Incremental));
    }

    #[test]
    fn endpoint_serves_by_number_or_name() {
        let s = svc("a", ProviderId::External, None, &[]);
        let by_name = Endpoint { service_port_name: "http".into(), ..Endpoint::default() };
        assert!(by_name.serves(&s, 80) && !by_name.serves(&s, 81));
        let by_number =
            Endpoint { service_port_name: "x".into(), legacy_cluster_port_key: 80, ..Default::default() };
        assert!(by_number.serves(&s, 80));
        assert_eq!(by_name.load_balancing_weight(), 1);
        assert_eq!(
            ShardKey { provider: ProviderId::External, cluster: "c1".into() }.to_string(),
            "External/c1"
        );
    }
}
