//! Pure conversion: ServiceEntry → services, WorkloadEntry (or inline endpoint) → workload instance,
//! (service, ports, workload) → endpoints.
//!
//! Follows Istio's `pilot/pkg/serviceregistry/serviceentry/conversion.go` (`convertServices`,
//! `convertWorkloadEntryToWorkloadInstance`, `convertWorkloadInstanceToServiceInstance`,
//! `convertServiceEntryToInstances`). Input is taken as it is (validation may not have run): anything
//! the conversion cannot use is skipped with a warning that says so.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::{Arc, Mutex},
};

use api::networking::{
    WorkloadEntry,
    service_entry::{Location, Resolution as SeResolution, ServiceEntry},
};
use model::{
    Config, Protocol,
    autoallocate::{self, Allocator, Entry, Owner, StatusAddress},
    service::{
        DEFAULT_CLUSTER_ID, DEFAULT_TRUST_DOMAIN, Endpoint, ExportTo, HealthStatus, LABEL_ISTIO_LOCALITY,
        LABEL_TOPOLOGY_CLUSTER, LABEL_TOPOLOGY_LOCALITY, LABEL_TOPOLOGY_NETWORK, LABEL_TOPOLOGY_REGION,
        LABEL_TOPOLOGY_SUBZONE, LABEL_TOPOLOGY_ZONE, Labels, Locality, Port, ProviderId, Resolution, Service,
        TLS_MODE_DISABLED, TLS_MODE_ISTIO, TLS_MODE_LABEL, UNIX_ADDRESS_PREFIX,
    },
};

/// Annotation naming the WorkloadGroup a WorkloadEntry was auto-registered from
/// (`istio.io/autoRegistrationGroup`); it becomes the endpoint's workload name.
pub const ANNOTATION_AUTO_REGISTRATION_GROUP: &str = "istio.io/autoRegistrationGroup";
/// Label overriding a WorkloadEntry's workload name (`service.istio.io/workload-name`).
pub const LABEL_WORKLOAD_NAME: &str = "service.istio.io/workload-name";
/// Annotation that turns on health checking of a WorkloadEntry
/// (`proxy.istio.io/health-checks-enabled`); such an entry is an endpoint only while its status has
/// the condition `Healthy: "True"`.
pub const ANNOTATION_HEALTH_CHECKS_ENABLED: &str = "proxy.istio.io/health-checks-enabled";

/// Settings of the ServiceEntry registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceEntryOptions {
    /// Cluster id given to endpoints (locality and the `topology.istio.io/cluster` label) and to the
    /// registry's shard. Istio: `--clusterID`, default `Kubernetes`.
    pub cluster_id: String,
    /// Trust domain of endpoint identities (`spiffe://<trust domain>/ns/<ns>/sa/<account>`). Istio:
    /// mesh config `trustDomain`, default `cluster.local`.
    pub trust_domain: String,
    /// DNS domain suffix (`--domain`, default `cluster.local`); used in the short-host warning only,
    /// since ServiceEntry hosts are used as written.
    pub domain_suffix: String,
    /// Where auto-allocated VIPs come from (Istio's `PILOT_ENABLE_IP_AUTOALLOCATE`, default on).
    pub auto_allocate: AutoAllocate,
}

impl Default for ServiceEntryOptions {
    fn default() -> Self {
        ServiceEntryOptions {
            cluster_id: DEFAULT_CLUSTER_ID.to_string(),
            trust_domain: DEFAULT_TRUST_DOMAIN.to_string(),
            domain_suffix: "cluster.local".to_string(),
            auto_allocate: AutoAllocate::FromStatus,
        }
    }
}

/// Where a ServiceEntry host without `addresses` gets its auto-allocated VIPs
/// ([`model::autoallocate`]; [`Service::auto_allocated`]).
#[derive(Clone, Debug, Default)]
pub enum AutoAllocate {
    /// None (`PILOT_ENABLE_IP_AUTOALLOCATE=false`).
    Off,
    /// The entry's `status.addresses`, as the cluster's allocator (the leader of
    /// `istio-ip-autoallocate`) writes them, as istiod.
    #[default]
    FromStatus,
    /// Files only (no cluster to write status to): allocated in this process's memory, stable while it
    /// runs (an entry removed and added again gets its addresses back), not across restarts. istiod
    /// allocates nothing without a cluster.
    InMemory(InMemoryAllocator),
}

impl PartialEq for AutoAllocate {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (AutoAllocate::InMemory(a), AutoAllocate::InMemory(b)) => Arc::ptr_eq(&a.0, &b.0),
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

impl Eq for AutoAllocate {}

/// The files-only allocator: an [`Allocator`] and the addresses it gave each entry (the status the
/// entry would have in a cluster). Cheap to clone (shared).
#[derive(Clone, Debug, Default)]
pub struct InMemoryAllocator(Arc<Mutex<InMemoryState>>);

/// The allocator and, per entry, the addresses it gave (what the entry's status would hold).
type InMemoryState = (Allocator, BTreeMap<Owner, Vec<StatusAddress>>);

impl InMemoryAllocator {
    /// The addresses of the entry `config` (a ServiceEntry), allocating for hosts that have none.
    pub fn addresses(&self, config: &Config, spec: &ServiceEntry) -> Vec<StatusAddress> {
        let owner = (config.meta.namespace.clone(), config.meta.name.clone());
        let mut guard = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (allocator, given) = &mut *guard;
        let entry = Entry {
            owner: owner.clone(),
            creation_time: config.meta.creation_timestamp.as_deref(),
            labels: &config.meta.labels,
            spec,
            status: given.get(&owner).cloned().unwrap_or_default(),
        };
        if let (Some(addresses), _) = allocator.reconcile(true, &entry, false) {
            given.insert(owner.clone(), addresses);
        }
        given.get(&owner).cloned().unwrap_or_default()
    }
}

/// The auto-allocated addresses of each host of a ServiceEntry (empty when it gets none).
fn auto_allocated(config: &Config, spec: &ServiceEntry, mode: &AutoAllocate) -> Vec<StatusAddress> {
    if !autoallocate::should_allocate(!matches!(mode, AutoAllocate::Off), &config.meta.labels, spec) {
        return Vec::new();
    }
    match mode {
        AutoAllocate::Off => Vec::new(),
        AutoAllocate::FromStatus => autoallocate::status_addresses(config.status.as_ref()),
        AutoAllocate::InMemory(allocator) => allocator.addresses(config, spec),
    }
}

/// Istio's `AutoAllocatedIPv4Address` and `AutoAllocatedIPv6Address` of `host`: the last address of
/// each family, IPv4 first.
fn host_auto_addresses(all: &[StatusAddress], host: &str) -> Vec<String> {
    let of = |v6: bool| all.iter().rev().find(|a| a.host == host && a.value.is_ipv6() == v6);
    [of(false), of(true)].into_iter().flatten().map(|a| a.value.to_string()).collect()
}

/// A ServiceEntry port: the service port and where it goes on the workloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceEntryPort {
    /// The service port (protocol from the declared `protocol` only, as Istio's `convertPort`).
    pub port: Port,
    /// `targetPort`; 0 when unset (the endpoint then uses the port number).
    pub target_port: u32,
}

/// A workload as an endpoint without ports (Istio's `WorkloadInstance`): a WorkloadEntry, or one of
/// a ServiceEntry's inline `endpoints`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadInstance {
    /// Object name (`<serviceentry>-<index>` for inline endpoints).
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// The endpoint, with `service_port_name`, `legacy_cluster_port_key` and `endpoint_port` unset.
    pub endpoint: Endpoint,
    /// Service port name → port on the workload (`WorkloadEntry.ports`).
    pub port_map: BTreeMap<String, u32>,
    /// `true` when the address is a DNS name or a Unix socket: only DNS-resolved ServiceEntries use it
    /// (Istio's `DNSServiceEntryOnly`).
    pub dns_service_entry_only: bool,
}

/// What one ServiceEntry contributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertedServiceEntry {
    /// One service per distinct usable host, in `hosts` order.
    pub services: Vec<Arc<Service>>,
    /// Usable ports, in declaration order.
    pub ports: Vec<ServiceEntryPort>,
    /// The workload selector; when set, the inline endpoints are ignored (as Istio does).
    pub selector: Option<Labels>,
    /// The inline endpoints as workloads.
    pub inline_workloads: Vec<WorkloadInstance>,
    /// `true` for a DNS-resolved entry without endpoints and selector: each host is its own
    /// endpoint.
    pub host_is_endpoint: bool,
    /// Problems found, with what was done about them.
    pub warnings: Vec<String>,
}

impl ConvertedServiceEntry {
    /// The service of `hostname`, if this entry declares it.
    pub fn service(&self, hostname: &str) -> Option<&Arc<Service>> {
        self.services.iter().find(|s| s.hostname == hostname)
    }
}

/// `true` for an IP address (v4 or v6) written without a prefix length.
pub fn is_ip(address: &str) -> bool {
    address.parse::<IpAddr>().is_ok()
}

/// A ServiceEntry address as Istio keeps it: an IP as is; a CIDR with a full-length prefix as the
/// bare IP; another valid CIDR as written; `None` for anything else.
fn normalize_address(address: &str) -> Option<String> {
    if is_ip(address) {
        return Some(address.to_string());
    }
    let (ip, bits) = address.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    match bits.cmp(&max) {
        std::cmp::Ordering::Equal => Some(ip.to_string()),
        std::cmp::Ordering::Less => Some(address.to_string()),
        std::cmp::Ordering::Greater => None,
    }
}

/// The model resolution of a ServiceEntry `resolution` number (unknown numbers read as `NONE`, the
/// proto default).
pub fn resolution_of(resolution: i32) -> Resolution {
    match SeResolution::try_from(resolution).unwrap_or(SeResolution::None) {
        SeResolution::None => Resolution::Passthrough,
        SeResolution::Static => Resolution::ClientSideLb,
        SeResolution::Dns => Resolution::Dns,
        SeResolution::DnsRoundRobin => Resolution::DnsRoundRobin,
        SeResolution::DynamicDns => Resolution::DynamicDns,
    }
}

fn resolution_name(resolution: i32) -> &'static str {
    SeResolution::try_from(resolution).map_or("NONE", |r| r.as_str_name())
}

/// Converts a ServiceEntry config (whose spec must be a ServiceEntry; anything else gives an empty
/// result with a warning).
///
/// Every distinct host becomes a [`Service`] in the entry's namespace, named after the host, with
/// the entry's ports, addresses, resolution, location, `exportTo`, labels, selector and
/// `subjectAltNames` (Istio's `convertServices`). **Hosts are used as written:** like Istio, a short
/// name (`reviews`) is not qualified with the namespace and domain suffix — only VirtualService and
/// DestinationRule hosts are — so such a host gets a warning saying what a route to it must use.
pub fn convert_service_entry(config: &Config, options: &ServiceEntryOptions) -> ConvertedServiceEntry {
    let mut out = ConvertedServiceEntry {
        services: Vec::new(),
        ports: Vec::new(),
        selector: None,
        inline_workloads: Vec::new(),
        host_is_endpoint: false,
        warnings: Vec::new(),
    };
    let api::Spec::ServiceEntry(se) = &config.spec else {
        out.warnings.push(format!("not a ServiceEntry (kind {}); ignored", config.kind()));
        return out;
    };
    let warnings = &mut out.warnings;
    let namespace = &config.meta.namespace;
    let resolution = resolution_of(se.resolution);

    // Ports: skip numbers outside 1–65535 and repeated numbers or names.
    let mut numbers = BTreeSet::new();
    let mut names = BTreeSet::new();
    for p in &se.ports {
        if p.number == 0 || p.number > 65535 {
            warnings
                .push(format!("port {:?} has number {} (must be 1-65535); port skipped", p.name, p.number));
            continue;
        }
        if !numbers.insert(p.number) {
            warnings.push(format!(
                "port number {} is declared twice; the second ({:?}) is skipped",
                p.number, p.name
            ));
            continue;
        }
        if !names.insert(p.name.clone()) {
            warnings.push(format!(
                "port name {:?} is declared twice; port {} is skipped (endpoints refer to ports by name)",
                p.name, p.number
            ));
            continue;
        }
        let target_port = if p.target_port <= 65535 {
            p.target_port
        } else {
            warnings.push(format!(
                "port {:?} has targetPort {} (must be 1-65535); the port number is used instead",
                p.name, p.target_port
            ));
            0
        };
        out.ports.push(ServiceEntryPort {
            port: Port { name: p.name.clone(), port: p.number, protocol: Protocol::parse(&p.protocol) },
            target_port,
        });
    }
    let passthrough_target_ports: BTreeMap<u32, u32> = if resolution == Resolution::Passthrough {
        out.ports.iter().filter(|p| p.target_port != 0).map(|p| (p.port.port, p.target_port)).collect()
    } else {
        BTreeMap::new()
    };

    let mut addresses = Vec::new();
    for a in &se.addresses {
        match normalize_address(a) {
            Some(a) => addresses.push(a),
            None => warnings.push(format!("address {a:?} is neither an IP nor a CIDR range; skipped")),
        }
    }

    let export_to: BTreeSet<ExportTo> = se.export_to.iter().map(|e| ExportTo::parse(e)).collect();
    let selector = se.workload_selector.as_ref().map(|s| s.labels.clone());
    if se.hosts.is_empty() {
        warnings.push("no hosts: the ServiceEntry declares no service".to_string());
    }
    let auto = auto_allocated(config, se, &options.auto_allocate);
    let mut seen = BTreeSet::new();
    for host in &se.hosts {
        if host.is_empty() || host == "*" {
            warnings.push(format!("host {host:?} cannot be a service name; skipped"));
            continue;
        }
        if !seen.insert(host.as_str()) {
            warnings.push(format!("host {host:?} is listed twice; one service is made"));
            continue;
        }
        if !host.contains('.') {
            warnings.push(format!(
                "host {host:?} is a short name: ServiceEntry hosts are used as written (as Istio does), so \
                 the service is {host:?}, not \"{host}.{namespace}.svc.{}\"; a VirtualService or \
                 DestinationRule naming {host:?} resolves to the latter and will not match it",
                options.domain_suffix
            ));
        }
        out.services.push(Arc::new(Service {
            hostname: host.clone(),
            namespace: namespace.clone(),
            name: host.clone(),
            object_name: config.meta.name.clone(),
            registry: ProviderId::External,
            ports: out.ports.iter().map(|p| p.port.clone()).collect(),
            addresses: addresses.clone(),
            resolution,
            mesh_external: se.location != Location::MeshInternal as i32,
            export_to: export_to.clone(),
            labels: config.meta.labels.clone(),
            label_selector: selector.clone(),
            service_accounts: se.subject_alt_names.clone(),
            creation_time: config.meta.creation_timestamp.clone(),
            passthrough_target_ports: passthrough_target_ports.clone(),
            external_name: None,
            aliases: Vec::new(),
            auto_allocated: host_auto_addresses(&auto, host),
            traffic_distribution: model::service::TrafficDistribution::from_spec(
                None,
                config
                    .meta
                    .annotations
                    .get(model::service::ANNOTATION_TRAFFIC_DISTRIBUTION)
                    .map(String::as_str),
            ),
            cluster_external_addresses: Default::default(),
        }));
    }

    endpoint_warnings(se, resolution, &mut out.warnings);
    if let Some(selector) = selector {
        out.selector = Some(selector);
    } else if se.endpoints.is_empty() {
        out.host_is_endpoint = resolution.is_dns();
    } else {
        for (i, endpoint) in se.endpoints.iter().enumerate() {
            if resolution == Resolution::ClientSideLb
                && !is_ip(&endpoint.address)
                && !endpoint.address.starts_with(UNIX_ADDRESS_PREFIX)
            {
                out.warnings.push(format!(
                    "endpoints[{i}]: address {:?} is not an IP or unix:// path, which STATIC resolution needs \
                     (Envoy would reject it); endpoint skipped",
                    endpoint.address
                ));
                continue;
            }
            let name = format!("{}-{i}", config.meta.name);
            out.inline_workloads.push(workload_instance(
                endpoint,
                &Labels::new(),
                &BTreeMap::new(),
                &name,
                namespace,
                options,
            ));
        }
    }
    out
}

fn endpoint_warnings(se: &ServiceEntry, resolution: Resolution, warnings: &mut Vec<String>) {
    let resolution_text = resolution_name(se.resolution);
    if se.workload_selector.is_some() && !se.endpoints.is_empty() {
        warnings.push(
            "both endpoints and workloadSelector are set (Istio rejects this); the endpoints are ignored and \
             the selector is used"
                .to_string(),
        );
    }
    match resolution {
        Resolution::ClientSideLb if se.endpoints.is_empty() && se.workload_selector.is_none() => {
            warnings.push(
                "resolution STATIC with no endpoints and no workloadSelector: the hosts have no endpoint \
                 addresses, so traffic to them fails (no healthy upstream); add endpoints, select \
                 WorkloadEntries, or use resolution DNS or NONE"
                    .to_string(),
            );
        }
        Resolution::Passthrough if !se.endpoints.is_empty() => warnings.push(format!(
            "resolution {resolution_text} forwards to the address the client asked for; the {} endpoints are \
             kept in the registry but proxies do not load-balance over them",
            se.endpoints.len()
        )),
        _ => {}
    }
}

/// Go's `strconv.ParseBool` accepting `true`.
fn parse_go_bool(text: &str) -> bool {
    matches!(text, "1" | "t" | "T" | "TRUE" | "true" | "True")
}

/// `true` unless health checks are enabled on the WorkloadEntry and its status lacks
/// `Healthy: "True"` (Istio's `isHealthy` with `PILOT_ENABLE_WORKLOAD_ENTRY_HEALTHCHECKS=true`): a
/// health-checked entry counts as unhealthy until a probe said otherwise.
pub fn workload_entry_is_healthy(config: &Config) -> bool {
    if !config.meta.annotations.get(ANNOTATION_HEALTH_CHECKS_ENABLED).is_some_and(|v| parse_go_bool(v)) {
        return true;
    }
    let conditions = config.status.as_ref().and_then(|s| s.get("conditions")).and_then(|c| c.as_array());
    let healthy = conditions
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(|t| t.as_str()) == Some("Healthy"))
        .and_then(|c| c.get("status").and_then(|s| s.as_str()));
    healthy == Some("True")
}

/// Converts a WorkloadEntry config into a workload instance; `None` (with the reason) when the entry
/// is not an endpoint now (health checks enabled and not healthy) or the spec is not a WorkloadEntry.
///
/// Metadata labels are merged over the spec's labels (Istio's `ConvertWorkloadEntry`).
pub fn convert_workload_entry(
    config: &Config,
    options: &ServiceEntryOptions,
) -> Result<WorkloadInstance, String> {
    let api::Spec::WorkloadEntry(we) = &config.spec else {
        return Err(format!("not a WorkloadEntry (kind {}); ignored", config.kind()));
    };
    if !workload_entry_is_healthy(config) {
        return Err(format!(
            "health checks are enabled ({ANNOTATION_HEALTH_CHECKS_ENABLED}) and the status has no \
             Healthy=True condition: not an endpoint until its probe succeeds"
        ));
    }
    Ok(workload_instance(
        we,
        &config.meta.labels,
        &config.meta.annotations,
        &config.meta.name,
        &config.meta.namespace,
        options,
    ))
}

/// The locality of a workload: its `locality`, else the `topology.istio.io/locality` or
/// `istio-locality` label with `.` read as `/` (Istio's `GetLocalityLabel` + `SanitizeLocalityLabel`).
fn workload_locality(we: &WorkloadEntry, labels: &Labels) -> String {
    if !we.locality.is_empty() {
        return we.locality.clone();
    }
    let label = labels.get(LABEL_TOPOLOGY_LOCALITY).or_else(|| labels.get(LABEL_ISTIO_LOCALITY));
    match label {
        Some(l) if l.contains('/') => l.clone(),
        Some(l) => l.replace('.', "/"),
        None => String::new(),
    }
}

/// Builds the workload instance of a WorkloadEntry spec (Istio's
/// `convertWorkloadEntryToWorkloadInstance`):
/// - labels: `meta_labels` over the spec's, plus the topology labels Istio adds
///   (`topology.kubernetes.io/region`/`zone`, `topology.istio.io/subzone` from the locality,
///   `topology.istio.io/cluster`, and `topology.istio.io/network` unless already set);
/// - TLS mode: the `security.istio.io/tlsMode` label, else `istio` when a service account is set,
///   else `disabled`;
/// - identity: `spiffe://<trust domain>/ns/<namespace>/sa/<serviceAccount>`;
/// - workload name: the `istio.io/autoRegistrationGroup` annotation, the
///   `service.istio.io/workload-name` metadata label, or the object name.
pub fn workload_instance(
    we: &WorkloadEntry,
    meta_labels: &Labels,
    meta_annotations: &BTreeMap<String, String>,
    name: &str,
    namespace: &str,
    options: &ServiceEntryOptions,
) -> WorkloadInstance {
    let mut labels = we.labels.clone();
    labels.extend(meta_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    let tls_mode = match labels.get(TLS_MODE_LABEL) {
        Some(mode) => mode.clone(),
        None if !we.service_account.is_empty() => TLS_MODE_ISTIO.to_string(),
        None => TLS_MODE_DISABLED.to_string(),
    };
    let workload_name = meta_annotations
        .get(ANNOTATION_AUTO_REGISTRATION_GROUP)
        .or_else(|| meta_labels.get(LABEL_WORKLOAD_NAME))
        .cloned()
        .unwrap_or_else(|| name.to_string());
    let locality = workload_locality(we, &labels);
    let mut parts = locality.split('/');
    for key in [LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE, LABEL_TOPOLOGY_SUBZONE] {
        if let Some(part) = parts.next().filter(|p| !p.is_empty()) {
            labels.insert(key.to_string(), part.to_string());
        }
    }
    if !options.cluster_id.is_empty() {
        labels.insert(LABEL_TOPOLOGY_CLUSTER.to_string(), options.cluster_id.clone());
    }
    if !we.network.is_empty() && labels.get(LABEL_TOPOLOGY_NETWORK).is_none_or(String::is_empty) {
        labels.insert(LABEL_TOPOLOGY_NETWORK.to_string(), we.network.clone());
    }
    let service_account = if we.service_account.is_empty() {
        String::new()
    } else {
        format!("spiffe://{}/ns/{namespace}/sa/{}", options.trust_domain, we.service_account)
    };
    let address = &we.address;
    let dns_service_entry_only =
        address.starts_with(UNIX_ADDRESS_PREFIX) || (!address.is_empty() && !is_ip(address));
    WorkloadInstance {
        name: name.to_string(),
        namespace: namespace.to_string(),
        endpoint: Endpoint {
            addresses: vec![address.clone()],
            service_port_name: String::new(),
            legacy_cluster_port_key: 0,
            endpoint_port: 0,
            labels: Arc::new(labels),
            service_account,
            network: we.network.clone(),
            locality: Locality { label: locality, cluster_id: options.cluster_id.clone() },
            lb_weight: we.weight,
            tls_mode,
            namespace: namespace.to_string(),
            workload_name,
            // Istio sets no health for ServiceEntry / WorkloadEntry endpoints.
            health_status: HealthStatus::Unknown,
        },
        port_map: we.ports.clone(),
        dns_service_entry_only,
    }
}

/// The endpoints of `workload` for each of `ports` (Istio's `convertWorkloadInstanceToServiceInstance`).
/// The workload port is chosen in this order: a Unix socket address (path without `unix://`, port 0)
/// > the workload's `ports[<port name>]` > the service port's `targetPort` > the port number.
pub fn workload_endpoints(ports: &[ServiceEntryPort], workload: &WorkloadInstance) -> Vec<Endpoint> {
    ports
        .iter()
        .map(|p| {
            let mut endpoint = workload.endpoint.clone();
            let unix = match endpoint.addresses.as_slice() {
                [only] => only.strip_prefix(UNIX_ADDRESS_PREFIX).map(str::to_string),
                _ => None,
            };
            endpoint.endpoint_port = if let Some(path) = unix {
                endpoint.addresses = vec![path];
                0
            } else if let Some(port) = workload.port_map.get(&p.port.name).filter(|n| **n > 0) {
                *port
            } else if p.target_port > 0 {
                p.target_port
            } else {
                p.port.port
            };
            endpoint.service_port_name = p.port.name.clone();
            endpoint.legacy_cluster_port_key = p.port.port;
            endpoint
        })
        .collect()
}

/// The endpoints of a DNS-resolved ServiceEntry without endpoints or selector: the host itself, once
/// per port, at the target port (or the port), TLS disabled, no labels (Istio's
/// `convertServiceEntryToInstances`, `hostnameToServiceInstance`).
pub fn host_endpoints(
    hostname: &str,
    ports: &[ServiceEntryPort],
    namespace: &str,
    entry_name: &str,
    options: &ServiceEntryOptions,
) -> Vec<Endpoint> {
    ports
        .iter()
        .map(|p| Endpoint {
            addresses: vec![hostname.to_string()],
            service_port_name: p.port.name.clone(),
            legacy_cluster_port_key: p.port.port,
            endpoint_port: if p.target_port > 0 { p.target_port } else { p.port.port },
            tls_mode: TLS_MODE_DISABLED.to_string(),
            locality: Locality { label: String::new(), cluster_id: options.cluster_id.clone() },
            namespace: namespace.to_string(),
            workload_name: entry_name.to_string(),
            ..Endpoint::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_normalized_like_istio() {
        assert_eq!(normalize_address("1.2.3.4").as_deref(), Some("1.2.3.4"));
        assert_eq!(normalize_address("1.2.3.4/32").as_deref(), Some("1.2.3.4"));
        assert_eq!(normalize_address("10.0.0.0/8").as_deref(), Some("10.0.0.0/8"));
        assert_eq!(normalize_address("2001:db8::1/128").as_deref(), Some("2001:db8::1"));
        assert_eq!(normalize_address("1.2.3.4/33"), None);
        assert_eq!(normalize_address("example.com"), None);
    }

    #[test]
    fn go_bool() {
        assert!(parse_go_bool("true") && parse_go_bool("1") && parse_go_bool("True"));
        assert!(!parse_go_bool("yes") && !parse_go_bool(""));
    }
}
