//! [`ServiceEntryIndex`]: the ServiceEntry registry's state and its update rules, as a plain
//! struct. Feed it config changes ([`ServiceEntryIndex::apply`]); it returns the notifications they
//! cause and answers lookups. No locks, no I/O.
//!
//! ```text
//!  ServiceEntry ──convert──► services per host ─┐
//!  WorkloadEntry ─convert──► workload instance ─┼─► per (hostname, namespace):
//!  (inline endpoints)                           │     contributors (ServiceEntries, oldest first)
//!  WorkloadGroup ──► kept as templates          │     service  = oldest entry's, ports merged
//!                                               │     endpoints = all entries' (selected WEs × ports)
//!                                               ▼
//!                  diff with the previous state ──► ServiceEvent / EndpointUpdate
//! ```
//!
//! **What counts as a service change.** The per-host [`Service`] differs by
//! [`Service::equals_for_push`] (hosts, ports, addresses, resolution, location, exportTo, labels,
//! selector, subjectAltNames), or a port's `targetPort` changed (Istio's `TargetPorts` rule). Anything
//! else a change does — a WorkloadEntry added, removed or edited, a ServiceEntry's inline
//! `endpoints` edited — is endpoint-only: an [`EndpointUpdate`] classified by
//! [`classify_endpoint_update`] (incremental unless the set of service accounts changed, the service
//! is new, or it is DNS-resolved). A change that leaves both equal raises nothing.
//!
//! **Several ServiceEntries, one host, one namespace** (Istio's `mergeServicesInstancesByNamespaceHost`
//! and sidecar-scope merge): the oldest entry (creation time, then name) defines the service; ports of
//! the others are added when their resolution, labels, selector and exportTo are the same, otherwise
//! they are ignored with a warning; endpoints of all of them are merged, except that a
//! `DNS_ROUND_ROBIN` entry contributes no endpoint for a port that already has one.
//!
//! **The same host in several namespaces** gives one service per namespace; lookups by viewer pick
//! one with [`model::service::compare_service_precedence`]; a warning lists the namespaces.
//!
//! **Cost.** Objects are kept per namespace and name, and labels are indexed both ways: every
//! WorkloadEntry under each of its label pairs, every selecting ServiceEntry under one pair of its
//! selector. A WorkloadEntry change therefore looks only at the ServiceEntries that could select it
//! and recomputes only their hosts; a ServiceEntry change looks only at the workloads carrying its
//! rarest selector pair. Lookups by name do not allocate.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
};

use api::Kind;
use model::{
    Config, ConfigKey, Event,
    service::{
        Endpoint, EndpointPush, EndpointShard, EndpointUpdate, Labels, ProviderId, RegistryEvent,
        RegistryWarning, Resolution, Service, ServiceEvent, ServiceInstance, ShardKey,
        classify_endpoint_update, compare_service_precedence, labels_match, pick_visible_service,
    },
};

use super::conversion::{
    ConvertedServiceEntry, ServiceEntryOptions, WorkloadInstance, convert_service_entry,
    convert_workload_entry, host_endpoints, workload_endpoints,
};
use crate::workload_group::group_entry_labels;

/// namespace → name → object.
type ByNamespace<T> = HashMap<String, HashMap<String, T>>;
/// namespace → label key → label value → object names.
type LabelIndex = HashMap<String, HashMap<String, HashMap<String, BTreeSet<String>>>>;
/// (hostname, namespace) of a service.
type HostKey = (String, String);

fn label_index_insert(index: &mut LabelIndex, namespace: &str, key: &str, value: &str, name: &str) {
    index
        .entry(namespace.to_string())
        .or_default()
        .entry(key.to_string())
        .or_default()
        .entry(value.to_string())
        .or_default()
        .insert(name.to_string());
}

fn label_index_remove(index: &mut LabelIndex, namespace: &str, key: &str, value: &str, name: &str) {
    let Some(keys) = index.get_mut(namespace) else { return };
    let Some(values) = keys.get_mut(key) else { return };
    let Some(names) = values.get_mut(value) else { return };
    names.remove(name);
    if names.is_empty() {
        values.remove(value);
        if values.is_empty() {
            keys.remove(key);
            if keys.is_empty() {
                index.remove(namespace);
            }
        }
    }
}

fn label_index_get<'a>(
    index: &'a LabelIndex,
    namespace: &str,
    key: &str,
    value: &str,
) -> Option<&'a BTreeSet<String>> {
    index.get(namespace)?.get(key)?.get(value)
}

fn get<'a, T>(map: &'a ByNamespace<T>, namespace: &str, name: &str) -> Option<&'a T> {
    map.get(namespace)?.get(name)
}

fn remove<T>(map: &mut ByNamespace<T>, namespace: &str, name: &str) -> Option<T> {
    let names = map.get_mut(namespace)?;
    let removed = names.remove(name);
    if names.is_empty() {
        map.remove(namespace);
    }
    removed
}

struct EntryRecord {
    config: Arc<Config>,
    converted: ConvertedServiceEntry,
}

struct WorkloadRecord {
    config: Arc<Config>,
    /// `Err(reason)` when the entry is not an endpoint now.
    instance: Result<WorkloadInstance, String>,
}

#[derive(Default)]
struct HostRecord {
    /// Names of the ServiceEntries in the namespace that declare the host.
    contributors: BTreeSet<String>,
    service: Option<Arc<Service>>,
    /// (port, targetPort) of every contributor, in precedence order (Istio's `TargetPorts`).
    target_ports: Vec<(u32, u32)>,
    /// `None` until a first endpoint list was published (a new shard).
    endpoints: Option<Vec<Arc<Endpoint>>>,
    service_accounts: BTreeSet<String>,
    /// Warnings of the merge (per contributor name).
    merge_warnings: Vec<(String, String)>,
    /// The endpoints each source gave last time, reused while its objects are unchanged.
    cache: EndpointCache,
}

/// Endpoints per source: (ServiceEntry, WorkloadEntry) for selected workloads, (ServiceEntry, none)
/// for inline or host endpoints. Keyed by the objects' `Arc` addresses, valid because each entry keeps
/// its objects alive (an address cannot be reused while the entry exists) and an object that changes
/// is a new `Arc`. Rebuilt on every refresh from the current sources only, so it never grows stale.
type EndpointCache = HashMap<(usize, usize), CachedEndpoints>;

struct CachedEndpoints {
    _entry: Arc<Config>,
    _workload: Option<Arc<Config>>,
    endpoints: Vec<Arc<Endpoint>>,
}

/// The ServiceEntry registry's state (see the module documentation).
pub struct ServiceEntryIndex {
    options: ServiceEntryOptions,
    shard: ShardKey,
    entries: ByNamespace<EntryRecord>,
    workloads: ByNamespace<WorkloadRecord>,
    groups: BTreeMap<(String, String), Arc<Config>>,
    /// hostname → namespace → service state.
    hosts: BTreeMap<String, BTreeMap<String, HostRecord>>,
    /// ServiceEntries with a non-empty selector, each under the first pair of its selector.
    selectors: LabelIndex,
    /// Namespace → ServiceEntries with an empty selector (they select every workload).
    select_all: HashMap<String, BTreeSet<String>>,
    /// WorkloadEntries that are endpoints, under every pair of their labels.
    workload_labels: LabelIndex,
    /// Namespace → WorkloadEntries that are endpoints.
    workloads_by_namespace: HashMap<String, BTreeSet<String>>,
    /// First endpoint address → services with an endpoint there, sorted. A `Vec`, not a set: an
    /// address almost always has one service, and a B-tree set's first node is ≈ 0.5 KiB.
    hosts_by_ip: HashMap<String, Vec<HostKey>>,
}

impl std::fmt::Debug for ServiceEntryIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (entries, workloads) = self.object_counts();
        f.debug_struct("ServiceEntryIndex")
            .field("shard", &self.shard)
            .field("service_entries", &entries)
            .field("workload_entries", &workloads)
            .field("services", &self.hosts.values().map(BTreeMap::len).sum::<usize>())
            .finish_non_exhaustive()
    }
}

fn config_key(kind: Kind, namespace: &str, name: &str) -> ConfigKey {
    ConfigKey { kind, namespace: namespace.to_string(), name: name.to_string() }
}

/// Istio's `canMergeServices` for two services of the same hostname and namespace.
fn can_merge(a: &Service, b: &Service) -> bool {
    a.resolution == b.resolution
        && a.labels == b.labels
        && a.label_selector == b.label_selector
        && a.export_to == b.export_to
}

impl ServiceEntryIndex {
    /// An empty index; its shard is `External/<cluster_id>`.
    pub fn new(options: ServiceEntryOptions) -> ServiceEntryIndex {
        let shard = ShardKey { provider: ProviderId::External, cluster: options.cluster_id.clone() };
        ServiceEntryIndex {
            options,
            shard,
            entries: HashMap::new(),
            workloads: HashMap::new(),
            groups: BTreeMap::new(),
            hosts: BTreeMap::new(),
            selectors: HashMap::new(),
            select_all: HashMap::new(),
            workload_labels: HashMap::new(),
            workloads_by_namespace: HashMap::new(),
            hosts_by_ip: HashMap::new(),
        }
    }

    /// The shard this index publishes endpoints under.
    pub fn shard(&self) -> &ShardKey {
        &self.shard
    }

    /// The settings.
    pub fn options(&self) -> &ServiceEntryOptions {
        &self.options
    }

    /// Applies one config change, as a store's event handler receives it (`config` is the new
    /// object, or for a Delete the object as last seen), and returns the notifications it causes, in
    /// order. Kinds other than ServiceEntry, WorkloadEntry and WorkloadGroup are ignored. An Add of an
    /// object already known is an update; a Delete of an unknown object does nothing.
    ///
    /// Keeps a copy of `config`; [`ServiceEntryIndex::apply_shared`] keeps the caller's instead.
    pub fn apply(&mut self, event: Event, config: &Config) -> Vec<RegistryEvent> {
        self.apply_shared(event, &Arc::new(config.clone()))
    }

    /// [`ServiceEntryIndex::apply`] for an object the caller already shares (a store's event): the
    /// index keeps this `Arc`, so the object is held once in the process, not once per consumer.
    pub fn apply_shared(&mut self, event: Event, config: &Arc<Config>) -> Vec<RegistryEvent> {
        let mut out = Vec::new();
        let (namespace, name) = (config.meta.namespace.as_str(), config.meta.name.as_str());
        match (config.kind(), event) {
            (Kind::ServiceEntry, Event::Delete) => self.remove_service_entry(namespace, name, &mut out),
            (Kind::ServiceEntry, _) => self.upsert_service_entry(config.clone(), &mut out),
            (Kind::WorkloadEntry, Event::Delete) => self.remove_workload_entry(namespace, name, &mut out),
            (Kind::WorkloadEntry, _) => self.upsert_workload_entry(config.clone(), &mut out),
            (Kind::WorkloadGroup, Event::Delete) => {
                self.groups.remove(&(namespace.to_string(), name.to_string()));
            }
            (Kind::WorkloadGroup, _) => {
                self.groups.insert((namespace.to_string(), name.to_string()), config.clone());
            }
            _ => {}
        }
        out
    }

    fn upsert_service_entry(&mut self, config: Arc<Config>, out: &mut Vec<RegistryEvent>) {
        let (namespace, name) = (config.meta.namespace.clone(), config.meta.name.clone());
        let converted = convert_service_entry(&config, &self.options);
        let mut affected = self.detach_service_entry(&namespace, &name);
        for service in &converted.services {
            let record =
                self.hosts.entry(service.hostname.clone()).or_default().entry(namespace.clone()).or_default();
            record.contributors.insert(name.clone());
            affected.insert((service.hostname.clone(), namespace.clone()));
        }
        match converted.selector.as_ref().map(|s| s.iter().next()) {
            Some(Some((key, value))) => {
                label_index_insert(&mut self.selectors, &namespace, key, value, &name)
            }
            Some(None) => {
                self.select_all.entry(namespace.clone()).or_default().insert(name.clone());
            }
            None => {}
        }
        self.entries.entry(namespace).or_default().insert(name, EntryRecord { config, converted });
        for (hostname, namespace) in affected {
            self.refresh_host(&hostname, &namespace, out);
        }
    }

    fn remove_service_entry(&mut self, namespace: &str, name: &str, out: &mut Vec<RegistryEvent>) {
        let affected = self.detach_service_entry(namespace, name);
        remove(&mut self.entries, namespace, name);
        for (hostname, namespace) in affected {
            self.refresh_host(&hostname, &namespace, out);
        }
    }

    /// Removes an entry's contributions from the host records and the selector indexes; returns the
    /// hosts it contributed to.
    fn detach_service_entry(&mut self, namespace: &str, name: &str) -> BTreeSet<HostKey> {
        let mut affected = BTreeSet::new();
        let Some(old) = get(&self.entries, namespace, name) else {
            return affected;
        };
        for service in &old.converted.services {
            if let Some(record) = self.hosts.get_mut(&service.hostname).and_then(|m| m.get_mut(namespace)) {
                record.contributors.remove(name);
            }
            affected.insert((service.hostname.clone(), namespace.to_string()));
        }
        match old.converted.selector.as_ref().map(|s| s.iter().next()) {
            Some(Some((key, value))) => {
                let (key, value) = (key.clone(), value.clone());
                label_index_remove(&mut self.selectors, namespace, &key, &value, name);
            }
            Some(None) => {
                if let Some(names) = self.select_all.get_mut(namespace) {
                    names.remove(name);
                    if names.is_empty() {
                        self.select_all.remove(namespace);
                    }
                }
            }
            None => {}
        }
        affected
    }

    fn upsert_workload_entry(&mut self, config: Arc<Config>, out: &mut Vec<RegistryEvent>) {
        let (namespace, name) = (config.meta.namespace.clone(), config.meta.name.clone());
        let instance = convert_workload_entry(&config, &self.options);
        let mut affected = self.detach_workload_entry(&namespace, &name);
        if let Ok(instance) = &instance {
            affected.extend(self.hosts_selecting(&namespace, &instance.endpoint.labels));
            for (key, value) in instance.endpoint.labels.iter() {
                label_index_insert(&mut self.workload_labels, &namespace, key, value, &name);
            }
            self.workloads_by_namespace.entry(namespace.clone()).or_default().insert(name.clone());
        }
        self.workloads.entry(namespace).or_default().insert(name, WorkloadRecord { config, instance });
        for (hostname, namespace) in affected {
            self.refresh_host(&hostname, &namespace, out);
        }
    }

    fn remove_workload_entry(&mut self, namespace: &str, name: &str, out: &mut Vec<RegistryEvent>) {
        let affected = self.detach_workload_entry(namespace, name);
        remove(&mut self.workloads, namespace, name);
        for (hostname, namespace) in affected {
            self.refresh_host(&hostname, &namespace, out);
        }
    }

    /// Removes a workload from the label indexes; returns the hosts that selected it.
    fn detach_workload_entry(&mut self, namespace: &str, name: &str) -> BTreeSet<HostKey> {
        let Some(WorkloadRecord { instance: Ok(old), .. }) = get(&self.workloads, namespace, name) else {
            return BTreeSet::new();
        };
        let labels = old.endpoint.labels.clone();
        let affected = self.hosts_selecting(namespace, &labels);
        for (key, value) in labels.iter() {
            label_index_remove(&mut self.workload_labels, namespace, key, value, name);
        }
        if let Some(names) = self.workloads_by_namespace.get_mut(namespace) {
            names.remove(name);
            if names.is_empty() {
                self.workloads_by_namespace.remove(namespace);
            }
        }
        affected
    }

    /// Hosts of the ServiceEntries in `namespace` whose selector matches `labels`.
    fn hosts_selecting(&self, namespace: &str, labels: &Labels) -> BTreeSet<HostKey> {
        let mut hosts = BTreeSet::new();
        for entry in self.selecting_entries(namespace, labels) {
            for service in &entry.converted.services {
                hosts.insert((service.hostname.clone(), namespace.to_string()));
            }
        }
        hosts
    }

    /// The ServiceEntries in `namespace` whose selector matches `labels`, by name. Only entries
    /// indexed under one of `labels`' pairs (or with an empty selector) are looked at.
    fn selecting_entries(&self, namespace: &str, labels: &Labels) -> Vec<&EntryRecord> {
        let mut names: BTreeSet<&String> = self.select_all.get(namespace).into_iter().flatten().collect();
        for (key, value) in labels {
            names.extend(label_index_get(&self.selectors, namespace, key, value).into_iter().flatten());
        }
        names
            .into_iter()
            .filter_map(|name| get(&self.entries, namespace, name))
            .filter(|entry| entry.converted.selector.as_ref().is_some_and(|s| labels_match(s, labels)))
            .collect()
    }

    /// The workloads (endpoints) in `namespace` matching `selector`, by name, with their configs.
    fn selected_workloads(
        &self,
        namespace: &str,
        selector: &Labels,
    ) -> Vec<(&Arc<Config>, &WorkloadInstance)> {
        let names: Option<&BTreeSet<String>> = if selector.is_empty() {
            self.workloads_by_namespace.get(namespace)
        } else {
            // The rarest pair of the selector; a pair nobody carries selects nothing.
            let mut rarest: Option<&BTreeSet<String>> = None;
            for (key, value) in selector {
                match label_index_get(&self.workload_labels, namespace, key, value) {
                    None => return Vec::new(),
                    Some(names) if rarest.is_none_or(|r| names.len() < r.len()) => rarest = Some(names),
                    Some(_) => {}
                }
            }
            rarest
        };
        names
            .into_iter()
            .flatten()
            .filter_map(|name| match get(&self.workloads, namespace, name) {
                Some(WorkloadRecord { instance: Ok(instance), config }) => Some((config, instance)),
                _ => None,
            })
            .filter(|(_, instance)| labels_match(selector, &instance.endpoint.labels))
            .collect()
    }

    /// The contributors of a host, best first (creation time, then name; Istio's
    /// `sortServicesByCreationTime`).
    fn contributors(&self, hostname: &str, namespace: &str) -> Vec<&EntryRecord> {
        let Some(record) = self.hosts.get(hostname).and_then(|m| m.get(namespace)) else {
            return Vec::new();
        };
        let mut entries: Vec<&EntryRecord> =
            record.contributors.iter().filter_map(|name| get(&self.entries, namespace, name)).collect();
        entries.sort_by(|a, b| {
            a.config
                .meta
                .creation_timestamp
                .cmp(&b.config.meta.creation_timestamp)
                .then_with(|| a.config.meta.name.cmp(&b.config.meta.name))
        });
        entries
    }

    /// The endpoints one entry gives its service `service`, per source, reusing `previous` results
    /// of unchanged sources; the sources used are added to `cache`.
    fn entry_endpoints(
        &self,
        entry: &EntryRecord,
        service: &Service,
        previous: Option<&EndpointCache>,
        cache: &mut EndpointCache,
    ) -> Vec<Arc<Endpoint>> {
        let converted = &entry.converted;
        let meta = &entry.config.meta;
        let entry_key = Arc::as_ptr(&entry.config) as usize;
        let mut source = |workload: Option<&Arc<Config>>, build: &dyn Fn() -> Vec<Endpoint>| {
            let key = (entry_key, workload.map_or(0, |w| Arc::as_ptr(w) as usize));
            let endpoints = match previous.and_then(|p| p.get(&key)) {
                Some(hit) => hit.endpoints.clone(),
                None => build().into_iter().map(Arc::new).collect(),
            };
            let cached = CachedEndpoints {
                _entry: entry.config.clone(),
                _workload: workload.cloned(),
                endpoints: endpoints.clone(),
            };
            cache.insert(key, cached);
            endpoints
        };
        if let Some(selector) = &converted.selector {
            let dns = service.resolution.is_dns();
            let mut out = Vec::new();
            for (config, workload) in self.selected_workloads(&meta.namespace, selector) {
                if dns || !workload.dns_service_entry_only {
                    out.extend(source(Some(config), &|| workload_endpoints(&converted.ports, workload)));
                }
            }
            return out;
        }
        if converted.host_is_endpoint {
            return source(None, &|| {
                host_endpoints(
                    &service.hostname,
                    &converted.ports,
                    &meta.namespace,
                    &meta.name,
                    &self.options,
                )
            });
        }
        source(None, &|| {
            converted.inline_workloads.iter().flat_map(|w| workload_endpoints(&converted.ports, w)).collect()
        })
    }

    /// The service, target ports, endpoints and merge warnings of a host from its contributors;
    /// `None` when no ServiceEntry declares it any more.
    fn compute_host(&self, hostname: &str, namespace: &str) -> Option<ComputedHost> {
        let contributors = self.contributors(hostname, namespace);
        let (winner, others) = contributors.split_first()?;
        let mut service = Service::clone(winner.converted.service(hostname)?);
        let mut target_ports: Vec<(u32, u32)> =
            winner.converted.ports.iter().map(|p| (p.port.port, p.target_port)).collect();
        let mut warnings = Vec::new();
        let winner_name = &winner.config.meta.name;
        for other in others {
            let Some(theirs) = other.converted.service(hostname) else { continue };
            target_ports.extend(other.converted.ports.iter().map(|p| (p.port.port, p.target_port)));
            let name = other.config.meta.name.clone();
            if !can_merge(&service, theirs) {
                warnings.push((
                    name,
                    format!(
                        "host {hostname:?} is also declared by the older ServiceEntry {namespace}/{winner_name}, \
                         and the two differ in resolution, labels, workloadSelector or exportTo: this entry's \
                         ports are ignored (its endpoints are still merged)"
                    ),
                ));
                continue;
            }
            let mut added = Vec::new();
            for port in &theirs.ports {
                if service.port_by_number(port.port).is_none() {
                    service.ports.push(port.clone());
                    added.push(port.port);
                }
            }
            let ports = if added.is_empty() {
                "this entry adds no port".to_string()
            } else {
                format!("this entry adds port(s) {added:?}")
            };
            warnings.push((
                name,
                format!(
                    "host {hostname:?} is also declared by the older ServiceEntry {namespace}/{winner_name}, which \
                     defines the service; {ports}; endpoints of both are merged"
                ),
            ));
        }
        let previous = self.host(hostname, namespace).map(|r| &r.cache);
        let mut cache = EndpointCache::new();
        let mut endpoints = Vec::new();
        let mut ports_seen = BTreeSet::new();
        for entry in &contributors {
            let Some(theirs) = entry.converted.service(hostname) else { continue };
            for endpoint in self.entry_endpoints(entry, theirs, previous, &mut cache) {
                let port = endpoint.legacy_cluster_port_key;
                if theirs.resolution == Resolution::DnsRoundRobin && ports_seen.contains(&port) {
                    continue;
                }
                ports_seen.insert(port);
                endpoints.push(endpoint);
            }
        }
        Some(ComputedHost { service: Arc::new(service), target_ports, endpoints, warnings, cache })
    }

    /// Recomputes one (hostname, namespace) from its contributors and emits what changed.
    fn refresh_host(&mut self, hostname: &str, namespace: &str, out: &mut Vec<RegistryEvent>) {
        let next = self.compute_host(hostname, namespace);
        let host_key = || (hostname.to_string(), namespace.to_string());
        let Some(ComputedHost { service, target_ports, endpoints, warnings, cache }) = next else {
            let Some(by_namespace) = self.hosts.get_mut(hostname) else { return };
            let Some(record) = by_namespace.remove(namespace) else { return };
            if by_namespace.is_empty() {
                self.hosts.remove(hostname);
            }
            let old_ips = first_addresses(record.endpoints.iter().flatten());
            unindex_ips(&mut self.hosts_by_ip, old_ips, &host_key());
            if record.service.is_some() {
                out.push(RegistryEvent::Service(ServiceEvent {
                    shard: self.shard.clone(),
                    hostname: hostname.to_string(),
                    namespace: namespace.to_string(),
                    event: Event::Delete,
                }));
            }
            return;
        };

        let record =
            self.hosts.entry(hostname.to_string()).or_default().entry(namespace.to_string()).or_default();
        record.merge_warnings = warnings;
        record.cache = cache;
        let service_event = match &record.service {
            None => Some(Event::Add),
            Some(old) if !old.equals_for_push(&service) || record.target_ports != target_ports => {
                Some(Event::Update)
            }
            Some(_) => None,
        };
        if service_event.is_some() {
            record.service = Some(service);
        }
        record.target_ports = target_ports;
        if let Some(event) = service_event {
            out.push(RegistryEvent::Service(ServiceEvent {
                shard: self.shard.clone(),
                hostname: hostname.to_string(),
                namespace: namespace.to_string(),
                event,
            }));
        }
        let Some(mut push) =
            classify_endpoint_update(record.endpoints.as_deref(), &endpoints, &mut record.service_accounts)
        else {
            return;
        };
        if record.service.as_ref().is_some_and(|s| s.resolution.is_dns()) {
            // DNS endpoints travel in the cluster (CDS): Istio pushes them with a full push.
            push = EndpointPush::Full;
        }
        let old = record.endpoints.replace(endpoints.clone());
        let old_ips = first_addresses(old.iter().flatten());
        let new_ips = first_addresses(endpoints.iter());
        if old_ips != new_ips {
            let key = host_key();
            unindex_ips(&mut self.hosts_by_ip, old_ips.difference(&new_ips).copied(), &key);
            for ip in new_ips.difference(&old_ips) {
                let hosts = self.hosts_by_ip.entry((*ip).to_string()).or_default();
                if let Err(at) = hosts.binary_search(&key) {
                    hosts.insert(at, key.clone());
                }
            }
        }
        out.push(RegistryEvent::Endpoints(EndpointUpdate {
            shard: self.shard.clone(),
            hostname: hostname.to_string(),
            namespace: namespace.to_string(),
            endpoints,
            push,
        }));
    }

    fn host(&self, hostname: &str, namespace: &str) -> Option<&HostRecord> {
        self.hosts.get(hostname)?.get(namespace)
    }

    /// Every service, ordered by hostname then namespace.
    pub fn services(&self) -> Vec<Arc<Service>> {
        self.hosts.values().flat_map(|m| m.values()).filter_map(|r| r.service.clone()).collect()
    }

    /// The service `hostname` declared in `namespace`.
    pub fn get_service(&self, hostname: &str, namespace: &str) -> Option<Arc<Service>> {
        self.host(hostname, namespace)?.service.clone()
    }

    /// Every service named `hostname`, in any namespace (by namespace).
    pub fn services_by_hostname(&self, hostname: &str) -> Vec<Arc<Service>> {
        self.hosts
            .get(hostname)
            .into_iter()
            .flat_map(|m| m.values())
            .filter_map(|r| r.service.clone())
            .collect()
    }

    /// The service a proxy in `viewer` uses for `hostname` (see
    /// [`model::ServiceDiscovery::visible_service`]).
    pub fn visible_service(&self, hostname: &str, viewer: &str) -> Option<Arc<Service>> {
        pick_visible_service(&self.services_by_hostname(hostname), viewer).cloned()
    }

    /// Endpoints of (`hostname`, `namespace`) serving port number `port`, labels matching `subset`.
    pub fn endpoints(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        subset: Option<&Labels>,
    ) -> Vec<Arc<Endpoint>> {
        let Some(record) = self.host(hostname, namespace) else { return Vec::new() };
        let Some(service) = &record.service else { return Vec::new() };
        record
            .endpoints
            .iter()
            .flatten()
            .filter(|e| e.serves(service, port))
            .filter(|e| subset.is_none_or(|s| labels_match(s, &e.labels)))
            .cloned()
            .collect()
    }

    /// Every endpoint of (`hostname`, `namespace`), all ports.
    pub fn all_endpoints(&self, hostname: &str, namespace: &str) -> Vec<Arc<Endpoint>> {
        self.host(hostname, namespace).and_then(|r| r.endpoints.clone()).unwrap_or_default()
    }

    /// Service instances whose endpoint's first address is one of `ips`, for services in `namespace`
    /// when given.
    pub fn proxy_instances(&self, ips: &[String], namespace: Option<&str>) -> Vec<ServiceInstance> {
        let mut out = Vec::new();
        for ip in ips {
            for (hostname, service_namespace) in self.hosts_by_ip.get(ip).into_iter().flatten() {
                if namespace.is_some_and(|ns| ns != service_namespace) {
                    continue;
                }
                let Some(record) = self.host(hostname, service_namespace) else { continue };
                let Some(service) = &record.service else { continue };
                for endpoint in record.endpoints.iter().flatten().filter(|e| e.first_address() == ip) {
                    let port = if endpoint.legacy_cluster_port_key != 0 {
                        service.port_by_number(endpoint.legacy_cluster_port_key)
                    } else {
                        service.port_by_name(&endpoint.service_port_name)
                    };
                    if let Some(port) = port {
                        out.push(ServiceInstance {
                            service: service.clone(),
                            service_port: port.clone(),
                            endpoint: endpoint.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Every service's endpoints with their service accounts, by hostname then namespace.
    pub fn endpoint_shards(&self) -> Vec<EndpointShard> {
        let mut out = Vec::new();
        for (hostname, by_namespace) in &self.hosts {
            for (namespace, record) in by_namespace.iter().filter(|(_, r)| r.service.is_some()) {
                out.push(EndpointShard {
                    shard: self.shard.clone(),
                    hostname: hostname.clone(),
                    namespace: namespace.clone(),
                    endpoints: record.endpoints.clone().unwrap_or_default(),
                    service_accounts: record.service_accounts.clone(),
                });
            }
        }
        out
    }

    /// The WorkloadGroups, by namespace and name.
    pub fn workload_groups(&self) -> Vec<Arc<Config>> {
        self.groups.values().cloned().collect()
    }

    /// Number of ServiceEntries and WorkloadEntries held.
    pub fn object_counts(&self) -> (usize, usize) {
        (self.entries.values().map(HashMap::len).sum(), self.workloads.values().map(HashMap::len).sum())
    }

    /// Warnings about one object (its conversion problems only), for logging when it changes.
    pub fn object_warnings(&self, kind: Kind, namespace: &str, name: &str) -> Vec<String> {
        match kind {
            Kind::ServiceEntry => {
                get(&self.entries, namespace, name).map(|e| e.converted.warnings.clone()).unwrap_or_default()
            }
            Kind::WorkloadEntry => match get(&self.workloads, namespace, name) {
                Some(WorkloadRecord { instance: Err(reason), .. }) => vec![reason.clone()],
                Some(WorkloadRecord { instance: Ok(w), .. }) if w.endpoint.first_address().is_empty() => {
                    vec![empty_address_warning()]
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// Every current problem with the input, sorted by object: conversion problems of each
    /// ServiceEntry and WorkloadEntry, WorkloadEntries and WorkloadGroups selected by no
    /// ServiceEntry, hosts declared by several ServiceEntries of one namespace, and hosts declared in
    /// several namespaces.
    pub fn warnings(&self) -> Vec<RegistryWarning> {
        let mut out = Vec::new();
        for (namespace, entries) in &self.entries {
            for (name, entry) in entries {
                for message in &entry.converted.warnings {
                    out.push(RegistryWarning {
                        object: config_key(Kind::ServiceEntry, namespace, name),
                        hostname: None,
                        message: message.clone(),
                    });
                }
            }
        }
        for (namespace, workloads) in &self.workloads {
            for (name, workload) in workloads {
                let object = config_key(Kind::WorkloadEntry, namespace, name);
                for message in self.object_warnings(Kind::WorkloadEntry, namespace, name) {
                    out.push(RegistryWarning { object: object.clone(), hostname: None, message });
                }
                let Ok(instance) = &workload.instance else { continue };
                if let Some(message) = self.selection_warning(namespace, instance, &workload.config) {
                    out.push(RegistryWarning { object, hostname: None, message });
                }
            }
        }
        for ((namespace, name), group) in &self.groups {
            let labels = group_entry_labels(group);
            if self.selecting_entries(namespace, &labels).is_empty() {
                out.push(RegistryWarning {
                    object: config_key(Kind::WorkloadGroup, namespace, name),
                    hostname: None,
                    message: format!(
                        "WorkloadEntries created from this group (labels {}) would be selected by no \
                         ServiceEntry in namespace {namespace}: they would not be endpoints of any service",
                        format_labels(&labels),
                    ),
                });
            }
        }
        for (hostname, by_namespace) in &self.hosts {
            for (namespace, record) in by_namespace {
                for (name, message) in &record.merge_warnings {
                    out.push(RegistryWarning {
                        object: config_key(Kind::ServiceEntry, namespace, name),
                        hostname: Some(hostname.clone()),
                        message: message.clone(),
                    });
                }
            }
            if by_namespace.len() < 2 {
                continue;
            }
            let mut services = self.services_by_hostname(hostname);
            services.sort_by(|a, b| compare_service_precedence(a, b, None));
            let listed: Vec<String> =
                services.iter().map(|s| format!("{}/{}", s.namespace, s.object_name)).collect();
            for service in &services {
                out.push(RegistryWarning {
                    object: config_key(Kind::ServiceEntry, &service.namespace, &service.object_name),
                    hostname: Some(hostname.clone()),
                    message: format!(
                        "host {hostname:?} is declared in {} namespaces (ServiceEntries {}): each proxy uses \
                         the one visible to it by exportTo, preferring one exported to its namespace \
                         specifically, then the oldest",
                        by_namespace.len(),
                        listed.join(", ")
                    ),
                });
            }
        }
        out.sort();
        out
    }

    fn selection_warning(
        &self,
        namespace: &str,
        instance: &WorkloadInstance,
        config: &Config,
    ) -> Option<String> {
        let labels = &instance.endpoint.labels;
        let selecting = self.selecting_entries(namespace, labels);
        if selecting.is_empty() {
            // The labels as written (spec labels with metadata labels over them), without the topology
            // labels the registry adds.
            let mut own = match &config.spec {
                api::Spec::WorkloadEntry(we) => we.labels.clone(),
                _ => Labels::new(),
            };
            own.extend(config.meta.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            return Some(format!(
                "selected by no ServiceEntry in namespace {namespace} (no workloadSelector matches its labels {}): \
                 it is not an endpoint of any service",
                format_labels(&own)
            ));
        }
        if instance.dns_service_entry_only
            && selecting.iter().all(|e| e.converted.services.iter().all(|s| !s.resolution.is_dns()))
        {
            let names: Vec<&str> = selecting.iter().map(|e| e.config.meta.name.as_str()).collect();
            return Some(format!(
                "address {:?} is a DNS name or Unix socket, which only DNS-resolved ServiceEntries use; the \
                 ServiceEntries selecting it ({}) are not DNS-resolved, so it is not an endpoint",
                instance.endpoint.first_address(),
                names.join(", ")
            ));
        }
        None
    }
}

/// What [`ServiceEntryIndex::compute_host`] derives for one host.
struct ComputedHost {
    service: Arc<Service>,
    target_ports: Vec<(u32, u32)>,
    endpoints: Vec<Arc<Endpoint>>,
    warnings: Vec<(String, String)>,
    cache: EndpointCache,
}

/// The distinct first addresses of `endpoints`.
fn first_addresses<'a>(endpoints: impl Iterator<Item = &'a Arc<Endpoint>>) -> BTreeSet<&'a str> {
    endpoints.map(|e| e.first_address()).collect()
}

/// Removes `key` from the IP index entries of `ips`.
fn unindex_ips<'a>(
    hosts_by_ip: &mut HashMap<String, Vec<HostKey>>,
    ips: impl IntoIterator<Item = &'a str>,
    key: &HostKey,
) {
    for ip in ips {
        if let Some(hosts) = hosts_by_ip.get_mut(ip) {
            if let Ok(at) = hosts.binary_search(key) {
                hosts.remove(at);
            }
            if hosts.is_empty() {
                hosts_by_ip.remove(ip);
            }
        }
    }
}

fn empty_address_warning() -> String {
    "no address: such an endpoint is only reachable through its network's gateway, which meshpilot does \
     not configure yet"
        .to_string()
}

fn format_labels(labels: &Labels) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", pairs.join(", "))
}
