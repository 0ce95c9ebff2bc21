//! The ServiceEntry registry (Istio's `pilot/pkg/serviceregistry/serviceentry`): services from
//! ServiceEntries, endpoints from their inline `endpoints` and from the WorkloadEntries their
//! `workloadSelector` picks, WorkloadGroups kept as templates.
//!
//! ```text
//!  ConfigStoreController ──(ServiceEntry / WorkloadEntry / WorkloadGroup events)──► ServiceEntryRegistry
//!                                                                                     │ write lock
//!                                                                                     ▼
//!                                                        ServiceEntryIndex::apply (pure) → RegistryEvents
//!                                                                                     │ lock released
//!                                                                                     ▼
//!                                                                        handlers (append_event_handler)
//! ```
//!
//! - [`conversion`]: pure conversion of one object (ServiceEntry → services, WorkloadEntry →
//!   workload instance, → endpoints).
//! - [`index`]: [`ServiceEntryIndex`], the state and update rules, tested by values.
//! - [`ServiceEntryRegistry`]: the thin edge that subscribes to a config store, keeps the index
//!   behind a lock and calls the handlers.

pub mod conversion;
pub mod index;

use std::sync::{Arc, RwLock, RwLockReadGuard, Weak};

use api::Kind;
use model::{
    Config, ConfigStoreController, Event,
    service::{
        Endpoint, EndpointShard, Labels, RegistryEvent, RegistryEventHandler, RegistryWarning, Service,
        ServiceController, ServiceDiscovery, ServiceInstance, ShardKey,
    },
};

pub use conversion::{AutoAllocate, InMemoryAllocator, ServiceEntryOptions};
pub use index::ServiceEntryIndex;

/// The kinds the registry listens to.
pub const KINDS: [Kind; 3] = [Kind::ServiceEntry, Kind::WorkloadEntry, Kind::WorkloadGroup];

/// The ServiceEntry registry, subscribed to a config store. Cheap to clone (a handle).
#[derive(Clone)]
pub struct ServiceEntryRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    index: RwLock<ServiceEntryIndex>,
    handlers: RwLock<Vec<RegistryEventHandler>>,
    store: Arc<dyn ConfigStoreController>,
    shard: ShardKey,
}

impl std::fmt::Debug for ServiceEntryRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceEntryRegistry").field("index", &*self.index()).finish_non_exhaustive()
    }
}

impl ServiceEntryRegistry {
    /// A registry fed by `store`: registers one event handler per kind in [`KINDS`] (Istio's
    /// `configController.RegisterEventHandler` for ServiceEntry, WorkloadEntry and WorkloadGroup).
    /// The store delivers the objects it holds as Adds once it runs; add this registry's own handlers
    /// ([`ServiceController::append_event_handler`]) before running the store to see them.
    pub fn new(store: Arc<dyn ConfigStoreController>, options: ServiceEntryOptions) -> ServiceEntryRegistry {
        let index = ServiceEntryIndex::new(options);
        let shard = index.shard().clone();
        let inner = Arc::new(Inner {
            index: RwLock::new(index),
            handlers: RwLock::new(Vec::new()),
            store: store.clone(),
            shard,
        });
        for kind in KINDS {
            // A weak reference: the store holds the handler, the registry holds the store.
            let weak: Weak<Inner> = Arc::downgrade(&inner);
            store.register_event_handler(
                kind,
                Arc::new(move |_old: Option<&Arc<Config>>, config: &Arc<Config>, event: Event| {
                    if let Some(inner) = weak.upgrade() {
                        inner.handle(event, config);
                    }
                    Ok(())
                }),
            );
        }
        ServiceEntryRegistry { inner }
    }

    /// The registry's shard (`External/<cluster id>`).
    pub fn shard(&self) -> ShardKey {
        self.inner.shard.clone()
    }

    /// Read access to the index (for debugging and tests). Do not hold it across an await or while
    /// the store may deliver events.
    pub fn index(&self) -> RwLockReadGuard<'_, ServiceEntryIndex> {
        self.inner.read()
    }
}

impl Inner {
    fn read(&self) -> RwLockReadGuard<'_, ServiceEntryIndex> {
        self.index.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies one store event and notifies the handlers. Never fails: bad input becomes warnings.
    fn handle(&self, event: Event, config: &Arc<Config>) {
        let (events, before, after) = {
            let mut index = self.index.write().unwrap_or_else(|poisoned| poisoned.into_inner());
            let kind = config.kind();
            let (ns, name) = (&config.meta.namespace, &config.meta.name);
            let before = index.object_warnings(kind, ns, name);
            let events = index.apply_shared(event, config);
            let after =
                if event == Event::Delete { Vec::new() } else { index.object_warnings(kind, ns, name) };
            (events, before, after)
        };
        for message in after.iter().filter(|m| !before.contains(m)) {
            tracing::warn!(object = %config.key(), "{message}");
        }
        tracing::debug!(object = %config.key(), %event, notifications = events.len(), "registry updated");
        if events.is_empty() {
            return;
        }
        let handlers = self.handlers.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        for event in &events {
            crate::notify(&handlers, event);
        }
    }
}

impl ServiceDiscovery for ServiceEntryRegistry {
    fn services(&self) -> Vec<Arc<Service>> {
        self.inner.read().services()
    }

    fn get_service(&self, hostname: &str, namespace: &str) -> Option<Arc<Service>> {
        self.inner.read().get_service(hostname, namespace)
    }

    fn visible_service(&self, hostname: &str, viewer: &str) -> Option<Arc<Service>> {
        self.inner.read().visible_service(hostname, viewer)
    }

    fn endpoints(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        subset: Option<&Labels>,
    ) -> Vec<Arc<Endpoint>> {
        self.inner.read().endpoints(hostname, namespace, port, subset)
    }

    fn proxy_instances(&self, ips: &[String], namespace: Option<&str>) -> Vec<ServiceInstance> {
        self.inner.read().proxy_instances(ips, namespace)
    }
}

impl ServiceController for ServiceEntryRegistry {
    fn append_event_handler(&self, handler: RegistryEventHandler) {
        self.inner.handlers.write().unwrap_or_else(|poisoned| poisoned.into_inner()).push(handler);
    }

    /// The store has synced: every object it held when it started has been applied.
    fn has_synced(&self) -> bool {
        self.inner.store.has_synced()
    }

    fn endpoint_shards(&self) -> Vec<EndpointShard> {
        self.inner.read().endpoint_shards()
    }

    fn warnings(&self) -> Vec<RegistryWarning> {
        self.inner.read().warnings()
    }
}

/// Applies a list of configs as Adds to a fresh index and returns it with the notifications raised.
/// For loading a fixed set (tests, benchmarks, `istioctl`-style offline tools) without a store.
pub fn index_from_configs<'a>(
    configs: impl IntoIterator<Item = &'a Config>,
    options: ServiceEntryOptions,
) -> (ServiceEntryIndex, Vec<RegistryEvent>) {
    let mut index = ServiceEntryIndex::new(options);
    let mut events = Vec::new();
    for config in configs {
        events.extend(index.apply(Event::Add, config));
    }
    (index, events)
}
