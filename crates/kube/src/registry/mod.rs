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
//! from its last resource version; a relist (410 Gone, API-server restart) is diffed against the index:
//! unchanged objects (same resource version) raise nothing, only objects that are gone are deleted.
//! `managedFields` are dropped before objects are kept. [`KubeRegistryOptions::namespaces`] restricts
//! Services, EndpointSlices and Pods to some namespaces.
//!
//! **Discovery selectors.** With [`KubeRegistryOptions::discovery_selectors`] set, the watch task keeps
//! the last version of every Service, EndpointSlice and Pod, and only those of namespaces the
//! [`NamespaceFilter`] selects (fed by the Namespace watch) reach the index. A namespace that becomes
//! selected adds its objects (add events); one that stops being selected deletes them (delete events).
//!
//! **Sync.** [`ServiceController::has_synced`] is true once every watch has finished its initial list
//! and the index has applied it.

pub mod conversion;
pub mod index;

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, RwLock, RwLockReadGuard,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::{
    Metadata,
    api::{
        core::v1::{Namespace, Node, Pod, Service as KubeService},
        discovery::v1::EndpointSlice,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};
use model::{
    Shutdown,
    selector::DiscoverySelectors,
    service::{
        DEFAULT_CLUSTER_ID, DEFAULT_TRUST_DOMAIN, Endpoint, EndpointShard, Labels, RegistryEvent,
        RegistryEventHandler, RegistryWarning, Service, ServiceController, ServiceDiscovery, ServiceInstance,
        ShardKey,
    },
    store::RunFuture,
};

pub use index::KubeIndex;
use index::ObjectKey;

use crate::{
    client,
    namespaces::{Membership, NamespaceFilter},
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
    synced: AtomicBool,
    backoff: (Duration, Duration),
    selectors: DiscoverySelectors,
}

impl std::fmt::Debug for KubeRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeRegistry").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

/// The kinds watched, in the order their initial lists are tracked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Watched {
    Service,
    Slice,
    Pod,
    Node,
    Namespace,
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

/// A typed watch event's shape, for the initial-list bookkeeping.
enum Phase<K> {
    Init,
    InitApply(K),
    InitDone,
    Apply(K),
    Delete(K),
}

fn phase<K>(event: watcher::Event<K>) -> Phase<K> {
    match event {
        watcher::Event::Init => Phase::Init,
        watcher::Event::InitApply(k) => Phase::InitApply(k),
        watcher::Event::InitDone => Phase::InitDone,
        watcher::Event::Apply(k) => Phase::Apply(k),
        watcher::Event::Delete(k) => Phase::Delete(k),
    }
}

fn strip<K: Metadata<Ty = ObjectMeta>>(mut object: K) -> K {
    object.metadata_mut().managed_fields = None;
    object
}

fn meta_key(meta: &ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

/// Buffers of the initial lists in progress, one per kind.
#[derive(Default)]
struct Lists {
    services: Option<Vec<KubeService>>,
    slices: Option<Vec<EndpointSlice>>,
    pods: Option<Vec<Pod>>,
    nodes: Option<Vec<Node>>,
    namespaces: Option<Vec<Namespace>>,
    done: HashSet<Watched>,
    /// Discovery-selector state (enabled only with selectors).
    filter: NamespaceFilter,
    /// With selectors: the last version of every object, selected or not, by (namespace, name).
    cached_services: HashMap<ObjectKey, Arc<KubeService>>,
    cached_slices: HashMap<ObjectKey, Arc<EndpointSlice>>,
    cached_pods: HashMap<ObjectKey, Arc<Pod>>,
}

impl Lists {
    /// Keeps `listed` as the kind's whole cache (with selectors) and returns the selected ones.
    fn relist<T: Clone>(
        filter: &NamespaceFilter,
        cache: &mut HashMap<ObjectKey, T>,
        listed: Vec<T>,
        key: impl Fn(&T) -> ObjectKey,
    ) -> Vec<T> {
        if !filter.is_enabled() {
            return listed;
        }
        *cache = listed.iter().map(|o| (key(o), o.clone())).collect();
        listed.into_iter().filter(|o| filter.selects(&key(o).0)).collect()
    }

    /// Caches one object (with selectors); `true` when its namespace is selected.
    fn keep<T>(
        filter: &NamespaceFilter,
        cache: &mut HashMap<ObjectKey, T>,
        key: ObjectKey,
        object: T,
    ) -> bool {
        if !filter.is_enabled() {
            return true;
        }
        let selected = filter.selects(&key.0);
        cache.insert(key, object);
        selected
    }
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
                synced: AtomicBool::new(false),
            }),
        }
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

    fn stream<K>(&self, api: Api<K>) -> BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    {
        let backoff = crate::source::watch_backoff(self.inner.backoff);
        watcher(api, watcher::Config::default()).backoff(backoff).boxed()
    }

    async fn watch(self, client: Client) {
        let streams: Vec<BoxStream<'static, (Watched, Result<Update, watcher::Error>)>> = vec![
            self.stream(Api::<KubeService>::all(client.clone()))
                .map(|r| (Watched::Service, r.map(Update::Service)))
                .boxed(),
            self.stream(Api::<EndpointSlice>::all(client.clone()))
                .map(|r| (Watched::Slice, r.map(Update::Slice)))
                .boxed(),
            self.stream(Api::<Pod>::all(client.clone())).map(|r| (Watched::Pod, r.map(Update::Pod))).boxed(),
            self.stream(Api::<Node>::all(client.clone()))
                .map(|r| (Watched::Node, r.map(Update::Node)))
                .boxed(),
            self.stream(Api::<Namespace>::all(client))
                .map(|r| (Watched::Namespace, r.map(Update::Namespace)))
                .boxed(),
        ];
        let mut merged = futures::stream::select_all(streams);
        let mut lists =
            Lists { filter: NamespaceFilter::new(self.inner.selectors.clone()), ..Lists::default() };
        while let Some((kind, update)) = merged.next().await {
            match update {
                Ok(update) => self.handle(update, &mut lists),
                Err(err) => {
                    tracing::warn!(registry = %self.inner.name, ?kind, error = %err, "watch failed; retrying with backoff");
                }
            }
            if !self.inner.synced.load(Ordering::Acquire) && lists.done.len() == 5 {
                self.inner.synced.store(true, Ordering::Release);
                tracing::info!(registry = %self.inner.name, "Kubernetes registry synced");
            }
        }
    }

    fn handle(&self, update: Update, lists: &mut Lists) {
        match update {
            Update::Service(e) => match phase(e) {
                Phase::Init => lists.services = Some(Vec::new()),
                Phase::InitApply(o) => lists.services.get_or_insert_with(Vec::new).push(strip(o)),
                Phase::InitDone => {
                    let listed: Vec<Arc<KubeService>> =
                        lists.services.take().unwrap_or_default().into_iter().map(Arc::new).collect();
                    let listed = Lists::relist(&lists.filter, &mut lists.cached_services, listed, |o| {
                        meta_key(&o.metadata)
                    });
                    self.update(|index| {
                        let keep: HashSet<_> = listed.iter().map(|o| meta_key(&o.metadata)).collect();
                        let mut events: Vec<RegistryEvent> =
                            listed.iter().flat_map(|o| index.apply_service(o)).collect();
                        for key in index.service_keys().into_iter().filter(|k| !keep.contains(k)) {
                            events.extend(index.delete_service(&key));
                        }
                        events
                    });
                    lists.done.insert(Watched::Service);
                }
                Phase::Apply(o) => {
                    let o = Arc::new(strip(o));
                    let key = meta_key(&o.metadata);
                    if Lists::keep(&lists.filter, &mut lists.cached_services, key.clone(), o.clone()) {
                        self.update(|index| index.apply_service(&o));
                    } else {
                        self.update(|index| index.delete_service(&key));
                    }
                }
                Phase::Delete(o) => {
                    let key = meta_key(&o.metadata);
                    lists.cached_services.remove(&key);
                    self.update(|index| index.delete_service(&key));
                }
            },
            Update::Slice(e) => match phase(e) {
                Phase::Init => lists.slices = Some(Vec::new()),
                Phase::InitApply(o) => lists.slices.get_or_insert_with(Vec::new).push(strip(o)),
                Phase::InitDone => {
                    let listed: Vec<Arc<EndpointSlice>> =
                        lists.slices.take().unwrap_or_default().into_iter().map(Arc::new).collect();
                    let listed = Lists::relist(&lists.filter, &mut lists.cached_slices, listed, |o| {
                        meta_key(&o.metadata)
                    });
                    self.update(|index| {
                        let keep: HashSet<_> = listed.iter().map(|o| meta_key(&o.metadata)).collect();
                        let mut events: Vec<RegistryEvent> =
                            listed.iter().flat_map(|o| index.apply_slice(o)).collect();
                        for key in index.slice_keys().into_iter().filter(|k| !keep.contains(k)) {
                            events.extend(index.delete_slice(&key));
                        }
                        events
                    });
                    lists.done.insert(Watched::Slice);
                }
                Phase::Apply(o) => {
                    let o = Arc::new(strip(o));
                    let key = meta_key(&o.metadata);
                    if Lists::keep(&lists.filter, &mut lists.cached_slices, key.clone(), o.clone()) {
                        self.update(|index| index.apply_slice(&o));
                    } else {
                        self.update(|index| index.delete_slice(&key));
                    }
                }
                Phase::Delete(o) => {
                    let key = meta_key(&o.metadata);
                    lists.cached_slices.remove(&key);
                    self.update(|index| index.delete_slice(&key));
                }
            },
            Update::Pod(e) => match phase(e) {
                Phase::Init => lists.pods = Some(Vec::new()),
                Phase::InitApply(o) => lists.pods.get_or_insert_with(Vec::new).push(strip(o)),
                Phase::InitDone => {
                    let listed: Vec<Arc<Pod>> =
                        lists.pods.take().unwrap_or_default().into_iter().map(Arc::new).collect();
                    let listed = Lists::relist(&lists.filter, &mut lists.cached_pods, listed, |o| {
                        meta_key(&o.metadata)
                    });
                    self.update(|index| {
                        let keep: HashSet<_> = listed.iter().map(|o| meta_key(&o.metadata)).collect();
                        let mut events: Vec<RegistryEvent> =
                            listed.iter().flat_map(|o| index.apply_pod(o)).collect();
                        for key in index.pod_keys().into_iter().filter(|k| !keep.contains(k)) {
                            events.extend(index.delete_pod(&key));
                        }
                        events
                    });
                    lists.done.insert(Watched::Pod);
                }
                Phase::Apply(o) => {
                    let o = Arc::new(strip(o));
                    let key = meta_key(&o.metadata);
                    if Lists::keep(&lists.filter, &mut lists.cached_pods, key.clone(), o.clone()) {
                        self.update(|index| index.apply_pod(&o));
                    } else {
                        self.update(|index| index.delete_pod(&key));
                    }
                }
                Phase::Delete(o) => {
                    let key = meta_key(&o.metadata);
                    lists.cached_pods.remove(&key);
                    self.update(|index| index.delete_pod(&key));
                }
            },
            Update::Node(e) => match phase(e) {
                Phase::Init => lists.nodes = Some(Vec::new()),
                Phase::InitApply(o) => lists.nodes.get_or_insert_with(Vec::new).push(o),
                Phase::InitDone => {
                    let listed = lists.nodes.take().unwrap_or_default();
                    self.update(|index| {
                        let keep: HashSet<String> =
                            listed.iter().filter_map(|o| o.metadata.name.clone()).collect();
                        let mut events: Vec<RegistryEvent> =
                            listed.iter().flat_map(|o| apply_node(index, o)).collect();
                        for name in index.node_names().into_iter().filter(|k| !keep.contains(k)) {
                            events.extend(index.delete_node(&name));
                        }
                        events
                    });
                    lists.done.insert(Watched::Node);
                }
                Phase::Apply(o) => self.update(|index| apply_node(index, &o)),
                Phase::Delete(o) => {
                    self.update(|index| index.delete_node(o.metadata.name.as_deref().unwrap_or_default()));
                }
            },
            Update::Namespace(e) => match phase(e) {
                Phase::Init => lists.namespaces = Some(Vec::new()),
                Phase::InitApply(o) => lists.namespaces.get_or_insert_with(Vec::new).push(o),
                Phase::InitDone => {
                    let listed = lists.namespaces.take().unwrap_or_default();
                    let keep: HashSet<String> =
                        listed.iter().filter_map(|o| o.metadata.name.clone()).collect();
                    self.update(|index| {
                        let mut events: Vec<RegistryEvent> =
                            listed.iter().flat_map(|o| apply_namespace(index, o)).collect();
                        for name in index.namespace_names().into_iter().filter(|k| !keep.contains(k)) {
                            events.extend(index.delete_namespace(&name));
                        }
                        events
                    });
                    for namespace in &listed {
                        self.membership(namespace, lists);
                    }
                    lists.filter.retain(&keep);
                    lists.done.insert(Watched::Namespace);
                }
                Phase::Apply(o) => {
                    self.update(|index| apply_namespace(index, &o));
                    self.membership(&o, lists);
                }
                Phase::Delete(o) => {
                    let name = o.metadata.name.as_deref().unwrap_or_default();
                    lists.filter.delete(name);
                    self.update(|index| index.delete_namespace(name));
                }
            },
        }
    }
}

impl KubeRegistry {
    /// A Namespace was listed or changed: with discovery selectors, add its cached objects when it
    /// became selected, delete them from the index when it stopped being selected.
    fn membership(&self, namespace: &Namespace, lists: &mut Lists) {
        let name = namespace.metadata.name.as_deref().unwrap_or_default();
        let labels: Labels = namespace.metadata.labels.clone().unwrap_or_default().into_iter().collect();
        let Some(change) = lists.filter.apply(name, &labels) else { return };
        let in_ns = |k: &ObjectKey| k.0 == name;
        tracing::info!(registry = %self.inner.name, namespace = %name, ?change, "namespace discovery membership changed");
        match change {
            Membership::Selected => self.update(|index| {
                let mut events: Vec<RegistryEvent> = Vec::new();
                for (_, o) in lists.cached_services.iter().filter(|(k, _)| in_ns(k)) {
                    events.extend(index.apply_service(o));
                }
                for (_, o) in lists.cached_pods.iter().filter(|(k, _)| in_ns(k)) {
                    events.extend(index.apply_pod(o));
                }
                for (_, o) in lists.cached_slices.iter().filter(|(k, _)| in_ns(k)) {
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
}

impl ServiceController for KubeRegistry {
    fn append_event_handler(&self, handler: RegistryEventHandler) {
        self.inner.handlers.write().unwrap_or_else(|p| p.into_inner()).push(handler);
    }

    /// Every watch (Services, EndpointSlices, Pods, Nodes, Namespaces) finished its initial list and
    /// the index applied it.
    fn has_synced(&self) -> bool {
        self.inner.synced.load(Ordering::Acquire)
    }

    fn endpoint_shards(&self) -> Vec<EndpointShard> {
        self.read().endpoint_shards()
    }

    fn warnings(&self) -> Vec<RegistryWarning> {
        self.read().warnings()
    }
}
