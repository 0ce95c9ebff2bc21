//! [`AggregateRegistry`]: several registries as one (Istio's
//! `pilot/pkg/serviceregistry/aggregate/controller.go`).
//!
//! ```text
//!  ServiceEntryRegistry ──┐                      services: merged by (hostname, namespace)
//!  (later) Kubernetes  ───┼──► AggregateRegistry  endpoints / proxy instances: every registry's
//!  (more registries)   ───┘        │              events: forwarded, each registry's handler added once
//!                                  ▼
//!                          handlers (xDS server)
//! ```
//!
//! **Precedence.** When several registries declare the same (hostname, namespace), the aggregate
//! shows one service: a Kubernetes service first (Istio's protection against "domain squatting" by
//! a ServiceEntry), then the oldest (creation time), then the registry added first. Lookups by
//! viewer namespace ([`ServiceDiscovery::visible_service`]) use
//! [`compare_service_precedence`] across all registries, then registry order.
//!
//! **Endpoints** are the union of every registry's endpoints for the service, as Istio's endpoint
//! shards are merged at push time; each registry filters by its own service's ports.
//!
//! **Registries come and go** ([`AggregateRegistry::remove_registry`],
//! [`AggregateRegistry::replace_registry`]: remote clusters of a multi-cluster mesh). A removed
//! registry's events stop at once; every service it or its replacement had raises one service event
//! (add, update or delete), so the proxies are pushed what is left.
//!
//! **Events** are forwarded unchanged, in each registry's order. Each registry classifies its
//! endpoint updates for its own shard (`EndpointPush`); for a host that several registries share this
//! is conservative (a registry's service-account change gives a full push even if another registry
//! already had those accounts).

use std::{
    cmp::Ordering,
    collections::BTreeMap,
    sync::{Arc, RwLock, RwLockReadGuard, Weak},
};

use model::{
    Event,
    service::{
        ClusterInfo, Endpoint, EndpointShard, Labels, ProviderId, RegistryEvent, RegistryEventHandler,
        RegistryWarning, Service, ServiceController, ServiceDiscovery, ServiceEvent, ServiceInstance,
        ShardKey, compare_service_precedence, service_config_key,
    },
};

/// Several registries as one. Cheap to clone (a handle).
#[derive(Clone, Default)]
pub struct AggregateRegistry {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    registries: RwLock<Vec<Arc<dyn ServiceController>>>,
    handlers: RwLock<Vec<RegistryEventHandler>>,
}

impl std::fmt::Debug for AggregateRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregateRegistry")
            .field("registries", &self.registries().len())
            .finish_non_exhaustive()
    }
}

/// Services of every registry by (hostname, namespace), each with its registry's position.
type Grouped = BTreeMap<(String, String), Vec<(usize, Arc<Service>)>>;

/// A registry's identity in the list (the address of its data; the vtable part of the pointer is
/// left out, as it may differ between casts of the same object).
fn registry_address(registry: &Arc<dyn ServiceController>) -> usize {
    Arc::as_ptr(registry).cast::<()>() as usize
}

/// A registry's services by (hostname, namespace), each with the shard it declares them in (from its
/// endpoint shards; the provider and an empty cluster for a service without endpoints).
fn service_shards(registry: &dyn ServiceController) -> BTreeMap<(String, String), ShardKey> {
    let shards: BTreeMap<(String, String), ShardKey> =
        registry.endpoint_shards().into_iter().map(|s| ((s.hostname, s.namespace), s.shard)).collect();
    registry
        .services()
        .iter()
        .map(|s| {
            let key = (s.hostname.clone(), s.namespace.clone());
            let shard = shards
                .get(&key)
                .cloned()
                .unwrap_or_else(|| ShardKey { provider: s.registry, cluster: String::new() });
            (key, shard)
        })
        .collect()
}

fn service_event(key: &(String, String), shard: ShardKey, event: Event) -> RegistryEvent {
    RegistryEvent::Service(ServiceEvent { shard, hostname: key.0.clone(), namespace: key.1.clone(), event })
}

/// Precedence across registries for one hostname: Kubernetes, then creation time, then registry
/// order (`index`).
fn across(a: (usize, &Arc<Service>), b: (usize, &Arc<Service>), viewer: Option<&str>) -> Ordering {
    compare_service_precedence(a.1, b.1, viewer).then_with(|| a.0.cmp(&b.0))
}

impl AggregateRegistry {
    /// An aggregate without registries.
    pub fn new() -> AggregateRegistry {
        AggregateRegistry::default()
    }

    /// Adds a registry after the others (it loses precedence ties to them) and subscribes to its
    /// events once: every later event of it reaches every handler of the aggregate, whenever that
    /// handler was added.
    pub fn add_registry(&self, registry: Arc<dyn ServiceController>) {
        self.subscribe(&registry);
        self.inner.registries.write().unwrap_or_else(|p| p.into_inner()).push(registry);
    }

    /// Forwards `registry`'s events to the aggregate's handlers while it is a member (checked per
    /// event by address, so a removed registry that still runs raises nothing).
    fn subscribe(&self, registry: &Arc<dyn ServiceController>) {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let address = registry_address(registry);
        registry.append_event_handler(Arc::new(move |event: &RegistryEvent| {
            let Some(inner) = weak.upgrade() else { return };
            let member = inner
                .registries
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .any(|r| registry_address(r) == address);
            if member {
                let handlers = inner.handlers.read().unwrap_or_else(|p| p.into_inner()).clone();
                crate::notify(&handlers, event);
            }
        }));
    }

    /// Removes `registry` (compared by pointer); `false` if it was not a member. Each of its services
    /// raises a service event (a delete, or an update when another registry still has the hostname in
    /// that namespace), so proxies lose its endpoints in the next push (istiod's `DeleteRegistry` and the
    /// Kubernetes controller's `Cleanup`).
    pub fn remove_registry(&self, registry: &Arc<dyn ServiceController>) -> bool {
        self.swap(registry, None)
    }

    /// Puts `new` in `old`'s place (same precedence), in one step: a remote cluster whose kubeconfig
    /// changed, swapped once the new client has synced, so the endpoints never go missing in between
    /// (istiod's `PendingClusterSwap`). Every service of either raises a service event. `false` (and
    /// nothing changes) if `old` was not a member.
    pub fn replace_registry(
        &self,
        old: &Arc<dyn ServiceController>,
        new: Arc<dyn ServiceController>,
    ) -> bool {
        self.swap(old, Some(new))
    }

    fn swap(&self, old: &Arc<dyn ServiceController>, new: Option<Arc<dyn ServiceController>>) -> bool {
        if let Some(new) = &new {
            self.subscribe(new);
        }
        let before = service_shards(old.as_ref());
        let after = new.as_deref().map(service_shards).unwrap_or_default();
        {
            let mut registries = self.inner.registries.write().unwrap_or_else(|p| p.into_inner());
            let Some(at) = registries.iter().position(|r| registry_address(r) == registry_address(old))
            else {
                return false;
            };
            match new {
                Some(new) => registries[at] = new,
                None => {
                    registries.remove(at);
                }
            }
        }
        let mut events = Vec::new();
        for (key, shard) in &before {
            let event = match after.contains_key(key) || self.get_service(&key.0, &key.1).is_some() {
                true => Event::Update,
                false => Event::Delete,
            };
            events.push(service_event(key, shard.clone(), event));
        }
        for (key, shard) in after.iter().filter(|(k, _)| !before.contains_key(*k)) {
            events.push(service_event(key, shard.clone(), Event::Add));
        }
        let handlers = self.inner.handlers.read().unwrap_or_else(|p| p.into_inner()).clone();
        for event in &events {
            crate::notify(&handlers, event);
        }
        true
    }

    /// The registries, in precedence order.
    pub fn registries(&self) -> Vec<Arc<dyn ServiceController>> {
        self.read().clone()
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<Arc<dyn ServiceController>>> {
        self.inner.registries.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Every registry's services, grouped by (hostname, namespace), in registry order.
    fn grouped(&self) -> Grouped {
        let mut grouped = Grouped::new();
        for (i, registry) in self.read().iter().enumerate() {
            for service in registry.services() {
                grouped
                    .entry((service.hostname.clone(), service.namespace.clone()))
                    .or_default()
                    .push((i, service));
            }
        }
        grouped
    }
}

/// The winner of `candidates` (same hostname) by [`across`], with the per-cluster
/// external addresses of every other Kubernetes candidate merged in (istiod's aggregate `mergeService`
/// merges `ClusterExternalAddresses`: an east-west gateway Service exists once per cluster).
fn winner(candidates: &[(usize, Arc<Service>)], viewer: Option<&str>) -> Option<Arc<Service>> {
    let (_, best) = candidates.iter().min_by(|a, b| across((a.0, &a.1), (b.0, &b.1), viewer))?;
    let others = || {
        candidates.iter().map(|(_, s)| s).filter(|s| {
            !Arc::ptr_eq(s, best)
                && s.namespace == best.namespace
                && s.registry == ProviderId::Kubernetes
                && best.registry == ProviderId::Kubernetes
        })
    };
    let missing = |s: &&Arc<Service>| {
        s.cluster_external_addresses.keys().any(|c| !best.cluster_external_addresses.contains_key(c))
    };
    if !others().any(|s| missing(&s)) {
        return Some(best.clone());
    }
    let mut merged = Service::clone(best);
    for other in others() {
        for (cluster, addresses) in &other.cluster_external_addresses {
            merged.cluster_external_addresses.entry(cluster.clone()).or_insert_with(|| addresses.clone());
        }
    }
    Some(Arc::new(merged))
}

impl ServiceDiscovery for AggregateRegistry {
    fn services(&self) -> Vec<Arc<Service>> {
        self.grouped().into_values().filter_map(|candidates| winner(&candidates, None)).collect()
    }

    fn get_service(&self, hostname: &str, namespace: &str) -> Option<Arc<Service>> {
        let candidates: Vec<(usize, Arc<Service>)> = self
            .read()
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.get_service(hostname, namespace).map(|s| (i, s)))
            .collect();
        winner(&candidates, None)
    }

    fn visible_service(&self, hostname: &str, viewer: &str) -> Option<Arc<Service>> {
        let candidates: Vec<(usize, Arc<Service>)> = self
            .read()
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.visible_service(hostname, viewer).map(|s| (i, s)))
            .collect();
        winner(&candidates, Some(viewer))
    }

    fn endpoints(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        subset: Option<&Labels>,
    ) -> Vec<Arc<Endpoint>> {
        self.read().iter().flat_map(|r| r.endpoints(hostname, namespace, port, subset)).collect()
    }

    fn proxy_instances(&self, ips: &[String], namespace: Option<&str>) -> Vec<ServiceInstance> {
        self.read().iter().flat_map(|r| r.proxy_instances(ips, namespace)).collect()
    }

    fn proxy_service_targets(
        &self,
        ips: &[String],
        namespace: &str,
        labels: &Labels,
    ) -> Vec<ServiceInstance> {
        self.read().iter().flat_map(|r| r.proxy_service_targets(ips, namespace, labels)).collect()
    }
}

impl ServiceController for AggregateRegistry {
    fn append_event_handler(&self, handler: RegistryEventHandler) {
        self.inner.handlers.write().unwrap_or_else(|p| p.into_inner()).push(handler);
    }

    /// Every registry has synced.
    fn has_synced(&self) -> bool {
        self.read().iter().all(|r| r.has_synced())
    }

    fn endpoint_shards(&self) -> Vec<EndpointShard> {
        self.read().iter().flat_map(|r| r.endpoint_shards()).collect()
    }

    /// Every registry's clusters, in registry order.
    fn clusters(&self) -> Vec<ClusterInfo> {
        self.read().iter().flat_map(|r| r.clusters()).collect()
    }

    /// Every registry's warnings, plus one per service hidden by another registry's service of the
    /// same hostname and namespace.
    fn warnings(&self) -> Vec<RegistryWarning> {
        let mut out: Vec<RegistryWarning> = self.read().iter().flat_map(|r| r.warnings()).collect();
        for ((hostname, namespace), candidates) in self.grouped() {
            let Some(winner) = candidates.iter().min_by(|a, b| across((a.0, &a.1), (b.0, &b.1), None)) else {
                continue;
            };
            // The same Kubernetes Service in several clusters is one service (a multi-cluster mesh's
            // namespace sameness), not a conflict.
            let same_in_another_cluster = |s: &Service| {
                s.registry == ProviderId::Kubernetes && winner.1.registry == ProviderId::Kubernetes
            };
            for (i, loser) in
                candidates.iter().filter(|c| !Arc::ptr_eq(&c.1, &winner.1) && !same_in_another_cluster(&c.1))
            {
                out.push(RegistryWarning {
                    object: service_config_key(&hostname, &namespace),
                    hostname: Some(hostname.clone()),
                    message: format!(
                        "the {} service {hostname:?} in namespace {namespace} (registry #{i}, object {}) is \
                         hidden by the {} one (registry #{}, object {}): Kubernetes services win, then the \
                         oldest, then the registry added first; endpoints of both are served",
                        loser.registry, loser.object_name, winner.1.registry, winner.0, winner.1.object_name
                    ),
                });
            }
        }
        out.sort();
        out
    }
}
