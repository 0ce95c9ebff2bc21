//! [`KubeIndex`]: the Kubernetes registry's state and update rules, as a plain struct. Feed it
//! objects (`apply_*` / `delete_*`); it returns the notifications they cause and answers lookups.
//! No locks, no I/O.
//!
//! ```text
//!  Service ───────convert──► ServiceRecord (service, target ports, published endpoints)
//!  EndpointSlice ─(kubernetes.io/service-name)──► slices of a service ─┐
//!  Pod ──(targetRef, else IP)───────────────────► labels, account ─────┼─► endpoints of the service
//!  Node ─(pod.spec.nodeName)────────────────────► locality ────────────┤     (slices in name order,
//!  Namespace ───────────────────────────────────► network label ───────┘      deduplicated by address+port)
//!                                                      │
//!                          diff with the published list ──► ServiceEvent / EndpointUpdate
//! ```
//!
//! **What counts as a service change** (Istio's `serviceUpdateNeedsPush`): the converted service
//! differs by [`Service::equals_for_push`] or a port's `targetPort` changed; a service exported to
//! nobody (`exportTo: ~`) raises nothing while it stays so. Everything else — a slice, pod, node or
//! namespace change — is endpoint-only: the affected services' endpoint lists are rebuilt and, when
//! they differ, published as an [`EndpointUpdate`] classified by [`classify_endpoint_update`]
//! (incremental unless the service is new in this shard or its set of service accounts changed), and
//! always [`EndpointPush::Full`] for a headless service with a non-HTTP port (Istio pushes those fully:
//! per-endpoint listeners).
//!
//! **Duplicates.** An address that appears in several slices of a service (a pod moving between
//! slices) gives one endpoint per service port name and endpoint port, from the first slice by name.
//! Istio keys by address and port name only; the endpoint port is added here so that workloads that
//! share an IP (pods on the host network) at different ports stay distinct.
//!
//! **Pods.** An endpoint whose `targetRef` names a Pod the index has not seen is left out until the
//! Pod arrives (Istio: "endpoint without pod", re-queued on pod arrival); an endpoint without a
//! `targetRef` takes the pod at its IP in the same namespace, if any. Reverse indexes (pod → slices,
//! IP → slices, node → pods) limit the rebuild after a pod or node change to the services concerned.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    sync::Arc,
};

use api::Kind;
use k8s_openapi::api::{
    core::v1::{Pod, Service as KubeService},
    discovery::v1::EndpointSlice,
};
use model::{
    ConfigKey, Event,
    service::{
        Endpoint, EndpointPush, EndpointShard, EndpointUpdate, ExportTo, LABEL_TOPOLOGY_NETWORK, Labels,
        ProviderId, RegistryEvent, RegistryWarning, Service, ServiceEvent, ServiceInstance, ShardKey,
        classify_endpoint_update, labels_match, pick_visible_service,
    },
};

use super::{
    KubeRegistryOptions,
    conversion::{
        ConvertedService, LABEL_MCS_SERVICE_NAME, LABEL_SERVICE_NAME, convert_service, endpoint_health,
        find_target_port, pod_ips, slice_endpoints, target_pod, workload_facts,
    },
};

pub use crate::relist::ObjectKey;

struct ServiceRecord {
    resource_version: String,
    converted: ConvertedService,
    /// `None` until a first endpoint list was published (a new shard).
    endpoints: Option<Vec<Arc<Endpoint>>>,
    service_accounts: BTreeSet<String>,
}

struct SliceRecord {
    object: Arc<EndpointSlice>,
    /// The service, from the `kubernetes.io/service-name` label.
    service: ObjectKey,
    /// Pods named by `targetRef`s.
    pods: BTreeSet<ObjectKey>,
    /// Addresses without a pod `targetRef` (their pod is looked up by IP).
    ips: BTreeSet<String>,
}

struct PodRecord {
    object: Arc<Pod>,
    ips: Vec<String>,
    node: String,
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> ObjectKey {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

fn rv(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.resource_version.clone().unwrap_or_default()
}

/// `true` when both carry the same, non-empty resource version (the object did not change).
fn same_version(
    a: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    b: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    a.resource_version.as_ref().is_some_and(|v| !v.is_empty()) && a.resource_version == b.resource_version
}

fn exported_to_none(service: &Service) -> bool {
    service.export_to.contains(&ExportTo::None)
}

/// The Kubernetes registry's state (see the module documentation).
pub struct KubeIndex {
    options: KubeRegistryOptions,
    shard: ShardKey,
    services: HashMap<ObjectKey, ServiceRecord>,
    /// hostname → service key, sorted by hostname.
    by_hostname: BTreeMap<String, ObjectKey>,
    /// namespace → names of its services.
    services_by_namespace: HashMap<String, BTreeSet<String>>,
    slices: HashMap<ObjectKey, SliceRecord>,
    /// service key → names of its slices (in its namespace).
    slices_by_service: HashMap<ObjectKey, BTreeSet<String>>,
    pods: HashMap<ObjectKey, PodRecord>,
    pods_by_ip: HashMap<String, BTreeSet<ObjectKey>>,
    pods_by_node: HashMap<String, BTreeSet<ObjectKey>>,
    /// pod key → slices naming it in a `targetRef`.
    slices_by_pod: HashMap<ObjectKey, BTreeSet<ObjectKey>>,
    /// IP → slices with an address there without a pod `targetRef`.
    slices_by_ip: HashMap<String, BTreeSet<ObjectKey>>,
    /// node → (resource version, labels).
    nodes: HashMap<String, (String, Labels)>,
    /// namespace → (resource version, labels).
    namespaces: HashMap<String, (String, Labels)>,
}

impl std::fmt::Debug for KubeIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeIndex")
            .field("shard", &self.shard)
            .field("services", &self.services.len())
            .field("slices", &self.slices.len())
            .field("pods", &self.pods.len())
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

fn index_insert<K: std::hash::Hash + Eq, V: Ord>(map: &mut HashMap<K, BTreeSet<V>>, key: K, value: V) {
    map.entry(key).or_default().insert(value);
}

fn index_remove<K: std::hash::Hash + Eq, V: Ord>(map: &mut HashMap<K, BTreeSet<V>>, key: &K, value: &V) {
    if let Some(set) = map.get_mut(key) {
        set.remove(value);
        if set.is_empty() {
            map.remove(key);
        }
    }
}

impl KubeIndex {
    /// An empty index; its shard is `Kubernetes/<cluster id>`.
    pub fn new(options: KubeRegistryOptions) -> KubeIndex {
        let shard = ShardKey { provider: ProviderId::Kubernetes, cluster: options.cluster_id.clone() };
        KubeIndex {
            options,
            shard,
            services: HashMap::new(),
            by_hostname: BTreeMap::new(),
            services_by_namespace: HashMap::new(),
            slices: HashMap::new(),
            slices_by_service: HashMap::new(),
            pods: HashMap::new(),
            pods_by_ip: HashMap::new(),
            pods_by_node: HashMap::new(),
            slices_by_pod: HashMap::new(),
            slices_by_ip: HashMap::new(),
            nodes: HashMap::new(),
            namespaces: HashMap::new(),
        }
    }

    /// The registry's shard.
    pub fn shard(&self) -> &ShardKey {
        &self.shard
    }

    fn wanted(&self, namespace: &str) -> bool {
        self.options.namespaces.is_empty() || self.options.namespaces.iter().any(|n| n == namespace)
    }

    /// Keys of the Services held.
    pub fn service_keys(&self) -> Vec<ObjectKey> {
        self.services.keys().cloned().collect()
    }

    /// Keys of the EndpointSlices held.
    pub fn slice_keys(&self) -> Vec<ObjectKey> {
        self.slices.keys().cloned().collect()
    }

    /// Keys of the Pods held.
    pub fn pod_keys(&self) -> Vec<ObjectKey> {
        self.pods.keys().cloned().collect()
    }

    /// Names of the Nodes held.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    /// Names of the Namespaces held.
    pub fn namespace_names(&self) -> Vec<String> {
        self.namespaces.keys().cloned().collect()
    }

    // === Services ===

    /// A Service was added or changed.
    pub fn apply_service(&mut self, object: &KubeService) -> Vec<RegistryEvent> {
        let key = key_of(&object.metadata);
        if !self.wanted(&key.0) {
            return self.delete_service(&key);
        }
        let version = rv(&object.metadata);
        if self.services.get(&key).is_some_and(|r| !version.is_empty() && r.resource_version == version) {
            return Vec::new();
        }
        let converted = convert_service(object, &self.options);
        let service = converted.service.clone();
        let mut events = Vec::new();
        let notify = match self.services.get(&key) {
            None => !exported_to_none(&service),
            Some(old) => {
                let before = &old.converted;
                !(exported_to_none(&before.service) && exported_to_none(&service))
                    && (!before.service.equals_for_push(&service)
                        || before.target_ports != converted.target_ports)
            }
        };
        let event = if self.services.contains_key(&key) { Event::Update } else { Event::Add };
        match self.services.get_mut(&key) {
            Some(record) => {
                record.resource_version = version;
                record.converted = converted;
            }
            None => {
                self.by_hostname.insert(service.hostname.clone(), key.clone());
                index_insert(&mut self.services_by_namespace, key.0.clone(), key.1.clone());
                self.services.insert(
                    key.clone(),
                    ServiceRecord {
                        resource_version: version,
                        converted,
                        endpoints: None,
                        service_accounts: BTreeSet::new(),
                    },
                );
            }
        }
        if notify {
            events.push(RegistryEvent::Service(ServiceEvent {
                shard: self.shard.clone(),
                hostname: service.hostname.clone(),
                namespace: service.namespace.clone(),
                event,
            }));
        }
        events.extend(self.refresh(&key));
        events
    }

    /// A Service went away: a Delete (which also drops its endpoints in this shard). Its slices
    /// are kept: a Service created again with the same name gets them back.
    pub fn delete_service(&mut self, key: &ObjectKey) -> Vec<RegistryEvent> {
        let Some(record) = self.services.remove(key) else { return Vec::new() };
        let service = &record.converted.service;
        self.by_hostname.remove(&service.hostname);
        index_remove(&mut self.services_by_namespace, &key.0, &key.1);
        if exported_to_none(service) {
            return Vec::new();
        }
        vec![RegistryEvent::Service(ServiceEvent {
            shard: self.shard.clone(),
            hostname: service.hostname.clone(),
            namespace: service.namespace.clone(),
            event: Event::Delete,
        })]
    }

    // === EndpointSlices ===

    /// An EndpointSlice was added or changed. Slices without a `kubernetes.io/service-name` label,
    /// or with the multi-cluster one, are not a service's and are ignored.
    pub fn apply_slice(&mut self, object: &Arc<EndpointSlice>) -> Vec<RegistryEvent> {
        let key = key_of(&object.metadata);
        let labels = object.metadata.labels.as_ref();
        let service_name = labels.and_then(|l| l.get(LABEL_SERVICE_NAME)).filter(|n| !n.is_empty());
        let mcs = labels.is_some_and(|l| l.contains_key(LABEL_MCS_SERVICE_NAME));
        let Some(service_name) = service_name.filter(|_| !mcs && self.wanted(&key.0)) else {
            return self.delete_slice(&key);
        };
        if self.slices.get(&key).is_some_and(|r| same_version(&r.object.metadata, &object.metadata)) {
            return Vec::new();
        }
        let service = (key.0.clone(), service_name.clone());
        let mut pods = BTreeSet::new();
        let mut ips = BTreeSet::new();
        for e in &object.endpoints {
            match target_pod(e, &key.0) {
                Some(pod) => {
                    pods.insert(pod);
                }
                None => ips.extend(e.addresses.iter().cloned()),
            }
        }
        let mut events = Vec::new();
        let old_service = self.unindex_slice(&key);
        for pod in &pods {
            index_insert(&mut self.slices_by_pod, pod.clone(), key.clone());
        }
        for ip in &ips {
            index_insert(&mut self.slices_by_ip, ip.clone(), key.clone());
        }
        index_insert(&mut self.slices_by_service, service.clone(), key.1.clone());
        self.slices.insert(key, SliceRecord { object: object.clone(), service: service.clone(), pods, ips });
        if let Some(old) = old_service.filter(|old| *old != service) {
            events.extend(self.refresh(&old));
        }
        events.extend(self.refresh(&service));
        events
    }

    /// An EndpointSlice went away.
    pub fn delete_slice(&mut self, key: &ObjectKey) -> Vec<RegistryEvent> {
        match self.unindex_slice(key) {
            Some(service) => self.refresh(&service).into_iter().collect(),
            None => Vec::new(),
        }
    }

    /// Removes a slice and its reverse-index entries; returns its service.
    fn unindex_slice(&mut self, key: &ObjectKey) -> Option<ObjectKey> {
        let old = self.slices.remove(key)?;
        for pod in &old.pods {
            index_remove(&mut self.slices_by_pod, pod, key);
        }
        for ip in &old.ips {
            index_remove(&mut self.slices_by_ip, ip, key);
        }
        index_remove(&mut self.slices_by_service, &old.service, &key.1);
        Some(old.service)
    }

    // === Pods, Nodes, Namespaces ===

    /// A Pod was added or changed: the services whose slices point at it (by `targetRef` or IP)
    /// are rebuilt.
    pub fn apply_pod(&mut self, object: &Arc<Pod>) -> Vec<RegistryEvent> {
        let key = key_of(&object.metadata);
        if !self.wanted(&key.0) {
            return self.delete_pod(&key);
        }
        if self.pods.get(&key).is_some_and(|r| same_version(&r.object.metadata, &object.metadata)) {
            return Vec::new();
        }
        let mut affected = self.unindex_pod(&key);
        let ips = pod_ips(object);
        let node = object.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        for ip in &ips {
            index_insert(&mut self.pods_by_ip, ip.clone(), key.clone());
        }
        if !node.is_empty() {
            index_insert(&mut self.pods_by_node, node.clone(), key.clone());
        }
        affected.extend(self.slices_of_pod(&key, &ips));
        self.pods.insert(key, PodRecord { object: object.clone(), ips, node });
        self.refresh_slices(affected)
    }

    /// A Pod went away.
    pub fn delete_pod(&mut self, key: &ObjectKey) -> Vec<RegistryEvent> {
        let affected = self.unindex_pod(key);
        self.refresh_slices(affected)
    }

    /// Removes a pod and its index entries; returns the slices that pointed at it.
    fn unindex_pod(&mut self, key: &ObjectKey) -> BTreeSet<ObjectKey> {
        let Some(old) = self.pods.remove(key) else { return BTreeSet::new() };
        for ip in &old.ips {
            index_remove(&mut self.pods_by_ip, ip, key);
        }
        if !old.node.is_empty() {
            index_remove(&mut self.pods_by_node, &old.node, key);
        }
        self.slices_of_pod(key, &old.ips)
    }

    fn slices_of_pod(&self, key: &ObjectKey, ips: &[String]) -> BTreeSet<ObjectKey> {
        let mut out: BTreeSet<ObjectKey> = self.slices_by_pod.get(key).cloned().unwrap_or_default();
        for ip in ips {
            out.extend(self.slices_by_ip.get(ip).into_iter().flatten().filter(|s| s.0 == key.0).cloned());
        }
        out
    }

    /// A Node was added or changed: when its labels changed, the services with endpoints on its pods
    /// are rebuilt (locality).
    pub fn apply_node(&mut self, name: &str, resource_version: &str, labels: Labels) -> Vec<RegistryEvent> {
        if let Some((_, old)) = self.nodes.get(name)
            && *old == labels
        {
            self.nodes.insert(name.to_string(), (resource_version.to_string(), labels));
            return Vec::new();
        }
        self.nodes.insert(name.to_string(), (resource_version.to_string(), labels));
        self.refresh_node(name)
    }

    /// A Node went away.
    pub fn delete_node(&mut self, name: &str) -> Vec<RegistryEvent> {
        if self.nodes.remove(name).is_none() {
            return Vec::new();
        }
        self.refresh_node(name)
    }

    fn refresh_node(&mut self, name: &str) -> Vec<RegistryEvent> {
        let pods: Vec<ObjectKey> = self.pods_by_node.get(name).into_iter().flatten().cloned().collect();
        let mut affected = BTreeSet::new();
        for pod in pods {
            let ips = self.pods.get(&pod).map(|p| p.ips.clone()).unwrap_or_default();
            affected.extend(self.slices_of_pod(&pod, &ips));
        }
        self.refresh_slices(affected)
    }

    /// A Namespace was added or changed: when its `topology.istio.io/network` label changed, its
    /// services are rebuilt.
    pub fn apply_namespace(
        &mut self,
        name: &str,
        resource_version: &str,
        labels: Labels,
    ) -> Vec<RegistryEvent> {
        let network = |l: &Labels| l.get(LABEL_TOPOLOGY_NETWORK).cloned();
        let changed = self.namespaces.get(name).is_none_or(|(_, old)| network(old) != network(&labels));
        self.namespaces.insert(name.to_string(), (resource_version.to_string(), labels));
        if changed { self.refresh_namespace(name) } else { Vec::new() }
    }

    /// A Namespace went away.
    pub fn delete_namespace(&mut self, name: &str) -> Vec<RegistryEvent> {
        if self.namespaces.remove(name).is_none() {
            return Vec::new();
        }
        self.refresh_namespace(name)
    }

    fn refresh_namespace(&mut self, name: &str) -> Vec<RegistryEvent> {
        let services: Vec<ObjectKey> =
            self.slices_by_service.keys().filter(|k| k.0 == name).cloned().collect();
        services.iter().filter_map(|s| self.refresh(s)).collect()
    }

    fn refresh_slices(&mut self, slices: BTreeSet<ObjectKey>) -> Vec<RegistryEvent> {
        let services: BTreeSet<ObjectKey> =
            slices.iter().filter_map(|s| self.slices.get(s).map(|r| r.service.clone())).collect();
        services.iter().filter_map(|s| self.refresh(s)).collect()
    }

    // === endpoints ===

    /// The pod of a slice address: the `targetRef` pod (`Err` when named but unknown), else the pod
    /// at that IP in the namespace, if any.
    fn pod_for(
        &self,
        endpoint: &k8s_openapi::api::discovery::v1::Endpoint,
        address: &str,
        namespace: &str,
    ) -> Result<Option<&Pod>, ()> {
        if let Some(pod) = target_pod(endpoint, namespace) {
            return self.pods.get(&pod).map(|p| Some(p.object.as_ref())).ok_or(());
        }
        let at_ip = self.pods_by_ip.get(address).into_iter().flatten().find(|k| k.0 == namespace);
        Ok(at_ip.and_then(|k| self.pods.get(k)).map(|p| p.object.as_ref()))
    }

    /// Builds the endpoints of a service from its slices.
    fn build_endpoints(&self, key: &ObjectKey, converted: &ConvertedService) -> Vec<Arc<Endpoint>> {
        let mut out: Vec<Arc<Endpoint>> = Vec::new();
        let mut seen: HashSet<(String, String, u32)> = HashSet::new();
        let namespace_labels = self.namespaces.get(&key.0).map(|(_, l)| l);
        for slice_name in self.slices_by_service.get(key).into_iter().flatten() {
            let Some(slice) = self.slices.get(&(key.0.clone(), slice_name.clone())) else { continue };
            let slice = &slice.object;
            if slice.address_type == "FQDN" {
                // As Istio: FQDN slices are not supported.
                continue;
            }
            let ports: Vec<(String, u32)> = slice
                .ports
                .iter()
                .flatten()
                .map(|p| {
                    (
                        p.name.clone().unwrap_or_default(),
                        p.port.and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
                    )
                })
                .collect();
            for e in &slice.endpoints {
                let health = endpoint_health(e.conditions.as_ref(), converted);
                for address in &e.addresses {
                    let Ok(pod) = self.pod_for(e, address, &key.0) else { continue };
                    let node = pod
                        .and_then(|p| p.spec.as_ref()?.node_name.as_ref())
                        .and_then(|n| self.nodes.get(n))
                        .map(|(_, l)| l);
                    let facts = workload_facts(pod, node, namespace_labels, &key.0, &self.options);
                    for ep in slice_endpoints(address, &ports, &facts, health, &self.options.cluster_id) {
                        if seen.insert((address.clone(), ep.service_port_name.clone(), ep.endpoint_port)) {
                            out.push(Arc::new(ep));
                        }
                    }
                }
            }
        }
        out
    }

    /// Rebuilds a service's endpoints and publishes them if they changed.
    fn refresh(&mut self, key: &ObjectKey) -> Option<RegistryEvent> {
        let record = self.services.get(key)?;
        let endpoints = self.build_endpoints(key, &record.converted);
        let shard = self.shard.clone();
        let record = self.services.get_mut(key)?;
        let mut push =
            classify_endpoint_update(record.endpoints.as_deref(), &endpoints, &mut record.service_accounts)?;
        let converted = &record.converted;
        let service = &converted.service;
        if service.resolution.is_dns()
            || (converted.headless && service.ports.iter().any(|p| !p.protocol.is_http()))
        {
            push = EndpointPush::Full;
        }
        record.endpoints = Some(endpoints.clone());
        if exported_to_none(service) {
            return None;
        }
        Some(RegistryEvent::Endpoints(EndpointUpdate {
            shard,
            hostname: service.hostname.clone(),
            namespace: service.namespace.clone(),
            endpoints,
            push,
        }))
    }

    // === lookups ===

    /// Every service, ordered by hostname.
    pub fn services(&self) -> Vec<Arc<Service>> {
        self.by_hostname
            .values()
            .filter_map(|k| self.services.get(k))
            .map(|r| r.converted.service.clone())
            .collect()
    }

    /// The service with this hostname in `namespace`.
    pub fn get_service(&self, hostname: &str, namespace: &str) -> Option<Arc<Service>> {
        let key = self.by_hostname.get(hostname)?;
        (key.0 == namespace).then(|| self.services.get(key).map(|r| r.converted.service.clone())).flatten()
    }

    /// The service a proxy in `viewer` uses for `hostname` (one per hostname in this registry).
    pub fn visible_service(&self, hostname: &str, viewer: &str) -> Option<Arc<Service>> {
        let service = self.by_hostname.get(hostname).and_then(|k| self.services.get(k))?;
        pick_visible_service([&service.converted.service], viewer).cloned()
    }

    /// Endpoints of a service port, optionally restricted to a subset's labels.
    pub fn endpoints(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        subset: Option<&Labels>,
    ) -> Vec<Arc<Endpoint>> {
        let Some(record) =
            self.by_hostname.get(hostname).filter(|k| k.0 == namespace).and_then(|k| self.services.get(k))
        else {
            return Vec::new();
        };
        let service = &record.converted.service;
        record
            .endpoints
            .iter()
            .flatten()
            .filter(|e| e.serves(service, port) && subset.is_none_or(|s| labels_match(s, &e.labels)))
            .cloned()
            .collect()
    }

    /// The service instances at `ips` (Istio's `GetProxyServiceTargets`), restricted to `namespace` when
    /// given: see [`KubeIndex::proxy_service_targets`]; without the proxy's labels, a proxy with no pod
    /// gets the endpoints at its IPs only.
    pub fn proxy_instances(&self, ips: &[String], namespace: Option<&str>) -> Vec<ServiceInstance> {
        self.service_targets(ips, namespace, None)
    }

    /// The service instances of a proxy at `ips` in `namespace` with `labels` (Istio's
    /// `GetProxyServiceTargets`):
    /// 1. the pod at one of the IPs (in the namespace) serves each port of every service of its namespace
    ///    whose selector matches its labels, at the port's `targetPort` on the pod
    ///    (`GetProxyServiceTargetsByPod`);
    /// 2. a pod that no service selects: the endpoints of the namespace's services at those IPs
    ///    (services without selector, written slices);
    /// 3. no pod (not created yet, or a VM): the proxy's own labels are matched against the selectors of
    ///    the namespace's services, as if it were a pod of the namespace
    ///    (`GetProxyServiceTargetsFromMetadata`); the target port is the `targetPort` number (the service
    ///    port when unset). Istio reads a named `targetPort` from the `POD_PORTS` metadata, which
    ///    meshpilot does not read: such ports are left out (Istio without that metadata uses port 0).
    ///    When that finds nothing, the endpoints at the IPs, as in 2.
    pub fn proxy_service_targets(
        &self,
        ips: &[String],
        namespace: &str,
        labels: &Labels,
    ) -> Vec<ServiceInstance> {
        self.service_targets(ips, Some(namespace), Some(labels))
    }

    fn service_targets(
        &self,
        ips: &[String],
        namespace: Option<&str>,
        labels: Option<&Labels>,
    ) -> Vec<ServiceInstance> {
        let in_ns = |ns: &str| namespace.is_none_or(|n| n == ns);
        let pod = ips
            .iter()
            .flat_map(|ip| self.pods_by_ip.get(ip).into_iter().flatten())
            .find(|k| in_ns(&k.0))
            .and_then(|k| self.pods.get(k));
        let out = match (pod, namespace, labels.filter(|l| !l.is_empty())) {
            (Some(pod), _, _) => {
                let ip = ips.iter().find(|ip| pod.ips.contains(ip)).cloned().unwrap_or_default();
                self.pod_targets(&pod.object, &ip)
            }
            (None, Some(ns), Some(labels)) => {
                let stand_in = Pod {
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        namespace: Some(ns.to_string()),
                        labels: Some(labels.clone()),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                self.pod_targets(&stand_in, ips.first().map_or("", String::as_str))
            }
            _ => Vec::new(),
        };
        if !out.is_empty() {
            return out;
        }
        self.endpoint_targets(ips, namespace)
    }

    /// What `pod` at `ip` serves: each port of every service of its namespace whose selector matches its
    /// labels, at the port's `targetPort` on the pod (each target port once per service).
    fn pod_targets(&self, pod: &Pod, ip: &str) -> Vec<ServiceInstance> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .and_then(|n| self.nodes.get(n))
            .map(|(_, l)| l);
        let facts =
            workload_facts(Some(pod), node, self.namespaces.get(&ns).map(|(_, l)| l), &ns, &self.options);
        let mut out = Vec::new();
        for name in self.services_by_namespace.get(&ns).into_iter().flatten() {
            let Some(record) = self.services.get(&(ns.clone(), name.clone())) else { continue };
            let converted = &record.converted;
            let Some(selector) = converted.service.label_selector.as_ref().filter(|s| !s.is_empty()) else {
                continue;
            };
            if !labels_match(selector, &labels) {
                continue;
            }
            let mut targets: Vec<u32> = Vec::new();
            for (port, target) in converted.service.ports.iter().zip(&converted.target_ports) {
                let Some(target) = find_target_port(pod, target, port.port) else { continue };
                if targets.contains(&target) {
                    continue;
                }
                targets.push(target);
                let ports = [(port.name.clone(), target)];
                let endpoint = slice_endpoints(
                    ip,
                    &ports,
                    &facts,
                    model::service::HealthStatus::Healthy,
                    &self.options.cluster_id,
                )
                .pop();
                if let Some(endpoint) = endpoint {
                    out.push(ServiceInstance {
                        service: converted.service.clone(),
                        service_port: port.clone(),
                        endpoint: Arc::new(endpoint),
                    });
                }
            }
        }
        out
    }

    /// The endpoints at `ips` of the services (of `namespace`, when given), as service instances.
    fn endpoint_targets(&self, ips: &[String], namespace: Option<&str>) -> Vec<ServiceInstance> {
        let mut out = Vec::new();
        for (key, record) in &self.services {
            if namespace.is_some_and(|n| n != key.0) {
                continue;
            }
            let service = &record.converted.service;
            for endpoint in record.endpoints.iter().flatten() {
                if !ips.iter().any(|ip| ip == endpoint.first_address()) {
                    continue;
                }
                if let Some(port) = service.port_by_name(&endpoint.service_port_name) {
                    out.push(ServiceInstance {
                        service: service.clone(),
                        service_port: port.clone(),
                        endpoint: endpoint.clone(),
                    });
                }
            }
        }
        out
    }

    /// Every service's published endpoints.
    pub fn endpoint_shards(&self) -> Vec<EndpointShard> {
        let mut out: Vec<EndpointShard> = self
            .services
            .values()
            .filter_map(|r| {
                let service = &r.converted.service;
                Some(EndpointShard {
                    shard: self.shard.clone(),
                    hostname: service.hostname.clone(),
                    namespace: service.namespace.clone(),
                    endpoints: r.endpoints.clone()?,
                    service_accounts: r.service_accounts.clone(),
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.hostname, &a.namespace).cmp(&(&b.hostname, &b.namespace)));
        out
    }

    /// Slice endpoints left out because the Pod their `targetRef` names is not known (yet).
    pub fn warnings(&self) -> Vec<RegistryWarning> {
        let mut out = Vec::new();
        for ((ns, name), slice) in &self.slices {
            let missing: Vec<&ObjectKey> =
                slice.pods.iter().filter(|p| !self.pods.contains_key(*p)).collect();
            if missing.is_empty() {
                continue;
            }
            let hostname = self.services.get(&slice.service).map(|r| r.converted.service.hostname.clone());
            out.push(RegistryWarning {
                // The model's config keys name Istio kinds; the slice's service is the closest one.
                object: ConfigKey { kind: Kind::ServiceEntry, namespace: ns.clone(), name: name.clone() },
                hostname,
                message: format!(
                    "EndpointSlice {ns}/{name}: {} endpoint(s) left out until their Pod is known: {}",
                    missing.len(),
                    missing.iter().map(|(n, p)| format!("{n}/{p}")).collect::<Vec<_>>().join(", ")
                ),
            });
        }
        out.sort();
        out
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
