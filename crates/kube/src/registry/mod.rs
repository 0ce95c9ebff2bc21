//! The Kubernetes service registry (Istio's `pilot/pkg/serviceregistry/kube/controller`): Services,
//! EndpointSlices (`discovery.k8s.io/v1`), Pods, Nodes and Namespaces watched from the API server and
//! turned into the service model.
//!
//! ```text
//!  kube-apiserver ──watch Services, EndpointSlices, Pods, Nodes, Namespaces (kube-runtime watchers)──┐
//!                                                                                                     ▼
//!               one task, events in arrival order ──► KubeIndex::apply_* (pure, write lock) ──► RegistryEvents
//!                                                                                                     │ lock released
//!                                                                                                     ▼
//!                                                                   handlers (append_event_handler), in order
//! ```
//!
//! - [`conversion`]: pure conversion of one object (Service → service, slice endpoint + Pod + Node →
//!   endpoints).
//! - [`index`]: [`KubeIndex`], the state and update rules, tested by values.
//! - [`KubeRegistry`]: the thin edge that runs the watches, keeps the index behind a lock and calls the
//!   handlers. It is a [`ServiceController`], for [`registry::AggregateRegistry`](../../registry) (where
//!   a Kubernetes service wins over a ServiceEntry of the same hostname).
//!
//! **Watches.** One kube-runtime watcher per kind, all cluster-wide, merged into one stream handled
//! by one task, so notifications keep the API server's order per kind. A watch that fails resumes
//! from its last resource version; a relist (410 Gone, API-server restart) goes through
//! [`Relist`], which diffs it against what the watch knows: unchanged objects
//! (same resource version) raise nothing, only objects that are gone are deleted.
//! `managedFields` are dropped as objects arrive. [`KubeRegistryOptions::namespaces`] restricts
//! Services, EndpointSlices and Pods to some namespaces.
//!
//! **Discovery selectors.** With [`KubeRegistryOptions::discovery_selectors`] set, the watch task keeps
//! the last version of every Service, EndpointSlice and Pod, and only those of namespaces the
//! [`NamespaceFilter`] selects (fed by the Namespace watch) reach the index. A namespace that becomes
//! selected adds its objects (add events); one that stops being selected deletes them (delete events).
//!
//! **Sync.** [`ServiceController::has_synced`] is true once every watch has finished its initial list
//! and the index has applied it; [`KubeRegistry::wait_synced`] waits for that moment.

pub mod conversion;
pub mod index;

use std::{
    collections::HashMap,
    sync::{Arc, RwLock, RwLockReadGuard},
    time::Duration,
};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::{
    core::v1::{Namespace, Node, Pod, Service as KubeService},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};
use model::{
    Shutdown,
    selector::DiscoverySelectors,
    service::{
        ClusterInfo, ClusterSyncStatus, DEFAULT_CLUSTER_ID, DEFAULT_TRUST_DOMAIN, Endpoint, EndpointShard,
        Labels, RegistryEvent, RegistryEventHandler, RegistryWarning, Service, ServiceController,
        ServiceDiscovery, ServiceInstance, ShardKey,
    },
    store::RunFuture,
};

pub use index::KubeIndex;
use index::ObjectKey;

use crate::{
    client,
    namespaces::{Membership, NamespaceFilter},
    relist::{Change, Relist, name_key, namespaced_key},
};

/// Settings of the Kubernetes registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeRegistryOptions {
    /// The cluster id (Istio's `--clusterID`, default `Kubernetes`): the shard and the endpoints'
    /// `topology.istio.io/cluster` label and locality.
    pub cluster_id: String,
    /// DNS domain suffix of service hostnames (`--domain`, default `cluster.local`).
    pub domain_suffix: String,
    /// Trust domain of endpoint identities (mesh config `trustDomain`, default `cluster.local`).
    pub trust_domain: String,
    /// Namespaces whose Services, EndpointSlices and Pods are read; empty reads all.
    pub namespaces: Vec<String>,
    /// Watch retry backoff: first delay and cap (client-go's are 800 ms and 30 s).
    pub backoff: (Duration, Duration),
    /// Mesh config `discoverySelectors`: only Services, EndpointSlices and Pods of selected
    /// namespaces are read; empty reads all.
    pub discovery_selectors: DiscoverySelectors,
}

impl Default for KubeRegistryOptions {
    fn default() -> Self {
        KubeRegistryOptions {
            cluster_id: DEFAULT_CLUSTER_ID.to_string(),
            domain_suffix: "cluster.local".to_string(),
            trust_domain: DEFAULT_TRUST_DOMAIN.to_string(),
            namespaces: Vec::new(),
            backoff: (Duration::from_millis(800), Duration::from_secs(30)),
            discovery_selectors: DiscoverySelectors::default(),
        }
    }
}

/// The Kubernetes service registry. Cheap to clone (a handle). Nothing is contacted until
/// [`KubeRegistry::run`].
#[derive(Clone)]
pub struct KubeRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    config: kube::Config,
    index: RwLock<KubeIndex>,
    handlers: RwLock<Vec<RegistryEventHandler>>,
    /// `true` once synced; [`KubeRegistry::wait_synced`] waits on it.
    synced: tokio::sync::watch::Sender<bool>,
    backoff: (Duration, Duration),
    selectors: DiscoverySelectors,
}

impl std::fmt::Debug for KubeRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeRegistry").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

/// One watch event of any watched kind (moved, never copied: the size difference does not matter).
#[allow(clippy::large_enum_variant)]
enum Update {
    Service(watcher::Event<KubeService>),
    Slice(watcher::Event<EndpointSlice>),
    Pod(watcher::Event<Pod>),
    Node(watcher::Event<Node>),
    Namespace(watcher::Event<Namespace>),
}

/// The list state of every watch, and the discovery-selector state.
struct Watches {
    services: Relist<ObjectKey, KubeService>,
    slices: Relist<ObjectKey, EndpointSlice>,
    pods: Relist<ObjectKey, Pod>,
    nodes: Relist<String, Node>,
    namespaces: Relist<String, Namespace>,
    /// Discovery-selector state (enabled only with selectors).
    filter: NamespaceFilter,
    /// With selectors: the last version of every object, selected or not, by (namespace, name).
    cached_services: HashMap<ObjectKey, Arc<KubeService>>,
    cached_slices: HashMap<ObjectKey, Arc<EndpointSlice>>,
    cached_pods: HashMap<ObjectKey, Arc<Pod>>,
}

impl Watches {
    fn new(selectors: DiscoverySelectors) -> Watches {
        Watches {
            services: Relist::new(namespaced_key),
            slices: Relist::new(namespaced_key),
            pods: Relist::new(namespaced_key),
            nodes: Relist::new(name_key),
            namespaces: Relist::new(name_key),
            filter: NamespaceFilter::new(selectors),
            cached_services: HashMap::new(),
            cached_slices: HashMap::new(),
            cached_pods: HashMap::new(),
        }
    }

    /// Every watch finished its initial list.
    fn synced(&self) -> bool {
        self.services.has_synced()
            && self.slices.has_synced()
            && self.pods.has_synced()
            && self.nodes.has_synced()
            && self.namespaces.has_synced()
    }
}

/// A namespaced kind the index holds (Services, EndpointSlices, Pods), seen through the
/// discovery-selector filter.
trait Namespaced: kube::Resource + Sized {
    fn apply(index: &mut KubeIndex, object: &Arc<Self>) -> Vec<RegistryEvent>;
    fn delete(index: &mut KubeIndex, key: &ObjectKey) -> Vec<RegistryEvent>;
}

impl Namespaced for KubeService {
    fn apply(index: &mut KubeIndex, object: &Arc<Self>) -> Vec<RegistryEvent> {
        index.apply_service(object)
    }
    fn delete(index: &mut KubeIndex, key: &ObjectKey) -> Vec<RegistryEvent> {
        index.delete_service(key)
    }
}

impl Namespaced for EndpointSlice {
    fn apply(index: &mut KubeIndex, object: &Arc<Self>) -> Vec<RegistryEvent> {
        index.apply_slice(object)
    }
    fn delete(index: &mut KubeIndex, key: &ObjectKey) -> Vec<RegistryEvent> {
        index.delete_slice(key)
    }
}

impl Namespaced for Pod {
    fn apply(index: &mut KubeIndex, object: &Arc<Self>) -> Vec<RegistryEvent> {
        index.apply_pod(object)
    }
    fn delete(index: &mut KubeIndex, key: &ObjectKey) -> Vec<RegistryEvent> {
        index.delete_pod(key)
    }
}

/// Drops `managedFields` (never read, often the larger part of an object).
fn strip<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

impl KubeRegistry {
    /// A registry reading the cluster `config` points at (see [`client::client_config`]).
    pub fn new(config: kube::Config, options: KubeRegistryOptions) -> KubeRegistry {
        let name = format!("kubernetes-registry:{}", config.cluster_url);
        KubeRegistry {
            inner: Arc::new(Inner {
                name,
                config,
                backoff: options.backoff,
                selectors: options.discovery_selectors.clone(),
                index: RwLock::new(KubeIndex::new(options)),
                handlers: RwLock::new(Vec::new()),
                synced: tokio::sync::watch::Sender::new(false),
            }),
        }
    }

    /// Resolves once the registry has synced ([`ServiceController::has_synced`]), at once when it
    /// already has. A registry that never syncs (an unreachable API server) never resolves it: callers
    /// race it against their own deadline or shutdown.
    pub async fn wait_synced(&self) {
        let mut synced = self.inner.synced.subscribe();
        // The sender lives as long as the registry (`self` holds it): no error while waiting.
        let _ = synced.wait_for(|s| *s).await;
    }

    /// The registry's shard (`Kubernetes/<cluster id>`).
    pub fn shard(&self) -> ShardKey {
        self.read().shard().clone()
    }

    /// Read access to the index (for debugging and tests). Do not hold it across an await.
    pub fn index(&self) -> RwLockReadGuard<'_, KubeIndex> {
        self.read()
    }

    fn read(&self) -> RwLockReadGuard<'_, KubeIndex> {
        self.inner.index.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `f` to the index under the write lock, then notifies the handlers of what it raised
    /// (outside the lock, in order).
    fn update(&self, f: impl FnOnce(&mut KubeIndex) -> Vec<RegistryEvent>) {
        let events = {
            let mut index = self.inner.index.write().unwrap_or_else(|p| p.into_inner());
            f(&mut index)
        };
        if events.is_empty() {
            return;
        }
        let handlers = self.inner.handlers.read().unwrap_or_else(|p| p.into_inner()).clone();
        for event in &events {
            for handler in &handlers {
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(event))).is_err() {
                    tracing::error!(
                        ?event,
                        "registry event handler panicked; event skipped for that handler"
                    );
                }
            }
        }
    }

    /// Watches the cluster until `shutdown`. Spawn it (the discovery server does not run registries).
    pub fn run(&self, shutdown: Shutdown) -> RunFuture {
        let registry = self.clone();
        Box::pin(async move {
            let client = match client::connection(registry.inner.config.clone()) {
                Ok(connection) => connection.client,
                Err(err) => {
                    tracing::error!(registry = %registry.inner.name, error = %err, "cannot create the Kubernetes client");
                    return;
                }
            };
            let mut shutdown = shutdown;
            tokio::select! {
                () = registry.watch(client) => {}
                () = shutdown.wait() => {}
            }
        })
    }

    async fn watch(self, client: Client) {
        let streams: Vec<BoxStream<'static, (&'static str, Result<Update, watcher::Error>)>> = vec![
            client::watch(Api::<KubeService>::all(client.clone()), self.inner.backoff)
                .modify(strip)
                .map(|r| ("Service", r.map(Update::Service)))
                .boxed(),
            client::watch(Api::<EndpointSlice>::all(client.clone()), self.inner.backoff)
                .modify(strip)
                .map(|r| ("EndpointSlice", r.map(Update::Slice)))
                .boxed(),
            client::watch(Api::<Pod>::all(client.clone()), self.inner.backoff)
                .modify(strip)
                .map(|r| ("Pod", r.map(Update::Pod)))
                .boxed(),
            client::watch(Api::<Node>::all(client.clone()), self.inner.backoff)
                .map(|r| ("Node", r.map(Update::Node)))
                .boxed(),
            client::watch(Api::<Namespace>::all(client), self.inner.backoff)
                .map(|r| ("Namespace", r.map(Update::Namespace)))
                .boxed(),
        ];
        let mut merged = futures::stream::select_all(streams);
        let mut watches = Watches::new(self.inner.selectors.clone());
        while let Some((kind, update)) = merged.next().await {
            match update {
                Ok(update) => self.handle(update, &mut watches),
                Err(err) => {
                    tracing::warn!(registry = %self.inner.name, kind, error = %err, "watch failed; retrying with backoff");
                }
            }
            if !*self.inner.synced.borrow() && watches.synced() {
                self.inner.synced.send_replace(true);
                tracing::info!(registry = %self.inner.name, "Kubernetes registry synced");
            }
        }
    }

    /// One watch event: through its kind's [`Relist`], then what changed into the index. Each change
    /// is counted once in [`REG_EVENTS`].
    fn handle(&self, update: Update, w: &mut Watches) {
        match update {
            Update::Service(e) => {
                let changes = count_events("Services", w.services.handle(e));
                self.namespaced(changes, &w.filter, &mut w.cached_services);
            }
            Update::Slice(e) => {
                let changes = count_events("EndpointSlice", w.slices.handle(e));
                self.namespaced(changes, &w.filter, &mut w.cached_slices);
            }
            Update::Pod(e) => {
                let changes = count_events("Pods", w.pods.handle(e));
                self.namespaced(changes, &w.filter, &mut w.cached_pods);
            }
            Update::Node(e) => {
                let changes = count_events("Nodes", w.nodes.handle(e));
                self.update_all(changes, |index, change| match change {
                    Change::Added(o) | Change::Updated(o) => apply_node(index, &o),
                    Change::Deleted(name) => index.delete_node(&name),
                });
            }
            Update::Namespace(e) => {
                let changes = count_events("Namespaces", w.namespaces.handle(e));
                let mut applied: Vec<Namespace> = Vec::new();
                let mut deleted: Vec<String> = Vec::new();
                self.update_all(changes, |index, change| match change {
                    Change::Added(o) | Change::Updated(o) => {
                        let events = apply_namespace(index, &o);
                        applied.push(o);
                        events
                    }
                    Change::Deleted(name) => {
                        let events = index.delete_namespace(&name);
                        deleted.push(name);
                        events
                    }
                });
                for name in &deleted {
                    w.filter.delete(name);
                }
                for namespace in &applied {
                    self.membership(namespace, w);
                }
            }
        }
    }

    /// Applies `changes` to the index in one update (one lock, then the handlers).
    fn update_all<K, T>(
        &self,
        changes: Vec<Change<K, T>>,
        mut apply: impl FnMut(&mut KubeIndex, Change<K, T>) -> Vec<RegistryEvent>,
    ) {
        if changes.is_empty() {
            return;
        }
        self.update(|index| changes.into_iter().flat_map(|c| apply(index, c)).collect());
    }

    /// Changes of a namespaced kind: with discovery selectors, every object is cached and only those
    /// of selected namespaces reach the index (an object moved out of the selection is deleted).
    fn namespaced<T: Namespaced>(
        &self,
        changes: Vec<Change<ObjectKey, T>>,
        filter: &NamespaceFilter,
        cache: &mut HashMap<ObjectKey, Arc<T>>,
    ) {
        self.update_all(changes, |index, change| match change {
            Change::Added(o) | Change::Updated(o) => {
                let key = namespaced_key(&o);
                let o = Arc::new(o);
                let selected = !filter.is_enabled() || {
                    cache.insert(key.clone(), o.clone());
                    filter.selects(&key.0)
                };
                if selected { T::apply(index, &o) } else { T::delete(index, &key) }
            }
            Change::Deleted(key) => {
                cache.remove(&key);
                T::delete(index, &key)
            }
        });
    }
}

impl KubeRegistry {
    /// A Namespace was listed or changed: with discovery selectors, add its cached objects when it
    /// became selected, delete them from the index when it stopped being selected.
    fn membership(&self, namespace: &Namespace, watches: &mut Watches) {
        let name = namespace.metadata.name.as_deref().unwrap_or_default();
        let labels: Labels = namespace.metadata.labels.clone().unwrap_or_default().into_iter().collect();
        let Some(change) = watches.filter.apply(name, &labels) else { return };
        let in_ns = |k: &ObjectKey| k.0 == name;
        tracing::info!(registry = %self.inner.name, namespace = %name, ?change, "namespace discovery membership changed");
        match change {
            Membership::Selected => self.update(|index| {
                let mut events: Vec<RegistryEvent> = Vec::new();
                for (_, o) in watches.cached_services.iter().filter(|(k, _)| in_ns(k)) {
                    events.extend(index.apply_service(o));
                }
                for (_, o) in watches.cached_pods.iter().filter(|(k, _)| in_ns(k)) {
                    events.extend(index.apply_pod(o));
                }
                for (_, o) in watches.cached_slices.iter().filter(|(k, _)| in_ns(k)) {
                    events.extend(index.apply_slice(o));
                }
                events
            }),
            Membership::Deselected => self.update(|index| {
                let mut events: Vec<RegistryEvent> = Vec::new();
                for key in index.slice_keys().into_iter().filter(in_ns) {
                    events.extend(index.delete_slice(&key));
                }
                for key in index.pod_keys().into_iter().filter(in_ns) {
                    events.extend(index.delete_pod(&key));
                }
                for key in index.service_keys().into_iter().filter(in_ns) {
                    events.extend(index.delete_service(&key));
                }
                events
            }),
        }
    }
}

/// Counter `pilot_k8s_reg_events{type,event}`: changes of the watched Kubernetes objects, by `type`
/// (`Services`, `EndpointSlice`, `Pods`, `Nodes`, `Namespaces`) and `event` (`add`, `update`,
/// `delete`), counted as each watch reports them, before discovery selectors filter namespaced ones
/// (istiod's `pilot/pkg/serviceregistry/kube/controller`, which counts in its informer handlers).
pub const REG_EVENTS: &str = "pilot_k8s_reg_events";

/// Counts `changes` of `kind` in [`REG_EVENTS`] and hands them back.
fn count_events<K, T>(kind: &'static str, changes: Vec<Change<K, T>>) -> Vec<Change<K, T>> {
    for change in &changes {
        let event = match change {
            Change::Added(_) => "add",
            Change::Updated(_) => "update",
            Change::Deleted(_) => "delete",
        };
        metrics::counter!(REG_EVENTS, "type" => kind, "event" => event).increment(1);
    }
    changes
}

fn apply_node(index: &mut KubeIndex, node: &Node) -> Vec<RegistryEvent> {
    let meta = &node.metadata;
    index.apply_node(
        meta.name.as_deref().unwrap_or_default(),
        meta.resource_version.as_deref().unwrap_or_default(),
        meta.labels.clone().unwrap_or_default(),
    )
}

fn apply_namespace(index: &mut KubeIndex, namespace: &Namespace) -> Vec<RegistryEvent> {
    let meta = &namespace.metadata;
    index.apply_namespace(
        meta.name.as_deref().unwrap_or_default(),
        meta.resource_version.as_deref().unwrap_or_default(),
        meta.labels.clone().unwrap_or_default(),
    )
}

impl ServiceDiscovery for KubeRegistry {
    fn services(&self) -> Vec<Arc<Service>> {
        self.read().services()
    }

    fn get_service(&self, hostname: &str, namespace: &str) -> Option<Arc<Service>> {
        self.read().get_service(hostname, namespace)
    }

    fn visible_service(&self, hostname: &str, viewer: &str) -> Option<Arc<Service>> {
        self.read().visible_service(hostname, viewer)
    }

    fn endpoints(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        subset: Option<&Labels>,
    ) -> Vec<Arc<Endpoint>> {
        self.read().endpoints(hostname, namespace, port, subset)
    }

    fn proxy_instances(&self, ips: &[String], namespace: Option<&str>) -> Vec<ServiceInstance> {
        self.read().proxy_instances(ips, namespace)
    }

    /// [`KubeIndex::proxy_service_targets`]: also matches the proxy's labels when no pod is at its IPs.
    fn proxy_service_targets(
        &self,
        ips: &[String],
        namespace: &str,
        labels: &Labels,
    ) -> Vec<ServiceInstance> {
        self.read().proxy_service_targets(ips, namespace, labels)
    }
}

impl ServiceController for KubeRegistry {
    fn append_event_handler(&self, handler: RegistryEventHandler) {
        self.inner.handlers.write().unwrap_or_else(|p| p.into_inner()).push(handler);
    }

    /// Every watch (Services, EndpointSlices, Pods, Nodes, Namespaces) finished its initial list and
    /// the index applied it.
    fn has_synced(&self) -> bool {
        *self.inner.synced.borrow()
    }

    fn endpoint_shards(&self) -> Vec<EndpointShard> {
        self.read().endpoint_shards()
    }

    fn warnings(&self) -> Vec<RegistryWarning> {
        self.read().warnings()
    }

    /// This registry's cluster: its id, `synced` or `syncing`.
    fn clusters(&self) -> Vec<ClusterInfo> {
        let sync_status =
            if self.has_synced() { ClusterSyncStatus::Synced } else { ClusterSyncStatus::Syncing };
        vec![ClusterInfo {
            id: self.shard().cluster,
            secret_name: String::new(),
            sync_status,
            error: String::new(),
        }]
    }
}
