//! Remote clusters from Secrets (istiod's `pkg/kube/multicluster/secretcontroller.go` and
//! `cluster.go`): every Secret labelled `istio/multiCluster=true` in the system namespace holds one
//! kubeconfig per cluster id (`data.<cluster id>`); each becomes a Kubernetes service registry in
//! [`Multicluster`], a [`ServiceController`] the binary puts in its aggregate after the config
//! cluster's registry.
//!
//! ```text
//!  Secrets (system namespace, istio/multiCluster=true) ──watch──► Relist ──► one task, in order:
//!    data key = cluster id, value = kubeconfig            add    → start a KubeRegistry, add it to the aggregate
//!                                                          update → start the new one; swap when it has synced
//!                                                          delete → stop it; remove it (its services raise events)
//! ```
//!
//! Rules, as istiod:
//! - a data key equal to the config cluster's id is ignored (it would overwrite the config cluster);
//!   a cluster id already configured by another Secret is ignored (first Secret wins);
//! - an unchanged kubeconfig (same bytes) does nothing; a changed one starts a new client and swaps it
//!   in only once it has synced (the old keeps serving meanwhile: no endpoints lost during credential
//!   rotation);
//! - a cluster that has not synced after [`MulticlusterOptions::remote_cluster_timeout`] (istiod's
//!   `PILOT_REMOTE_CLUSTER_TIMEOUT`, 30 s) no longer holds readiness back (status `timeout`, counter
//!   `remote_cluster_sync_timeouts_total`); it keeps retrying and its endpoints appear when it syncs;
//! - an unreachable API server or a watch that fails is retried by the registry's watches (they
//!   resume, and a relist only deletes what is really gone: a remote API-server restart deletes
//!   nothing that still exists);
//! - a kubeconfig is untrusted input ([`crate::remote_kubeconfig`]): one that is refused (exec, token
//!   or certificate files, … unless `PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS` allows them) or
//!   cannot be used is logged and shown in `/debug/clusterz` (`error`); nothing of that cluster is read.
//!
//! Per-cluster tasks ([`Multicluster::add_component`], istiod's multi-cluster components) run against
//! every serving remote cluster and stop with it: the binary publishes `istio-ca-root-cert` into each
//! remote cluster's namespaces with it (a leader per cluster, istiod's namespace-controller lock).
//!
//! Metrics (istiod's names): gauge `istiod_managed_clusters{cluster_type="local"|"remote"}`, gauge
//! `istiod_remote_cluster_sync_status{cluster,cluster_type="remote",status}` (1 for the current
//! state), counters `remote_cluster_secret_events_total{event}` and
//! `remote_cluster_sync_timeouts_total`.

use std::{
    collections::{BTreeMap, BTreeSet},
    hash::{DefaultHasher, Hash, Hasher},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};
use meshpilot_registry::AggregateRegistry;
use model::{
    Shutdown, ShutdownTrigger,
    service::{
        ClusterInfo, ClusterSyncStatus, Endpoint, EndpointShard, Labels, RegistryEventHandler,
        RegistryWarning, Service, ServiceController, ServiceDiscovery, ServiceInstance,
    },
    store::{RunFuture, shutdown_channel},
};
use security::authn::{BoxFuture, TokenReviewStatus, TokenReviewer};
use tokio::sync::mpsc;

use crate::{
    KubeRegistry, KubeRegistryOptions,
    identity::KubeTokenReviewer,
    relist::{Change, ObjectKey, Relist, namespaced_key},
    remote_kubeconfig::InsecureKubeconfigOptions,
};

/// The label that marks a remote-cluster Secret (`istio/multiCluster: "true"`).
pub const MULTICLUSTER_SECRET_LABEL: &str = "istio/multiCluster";

/// Gauge `istiod_managed_clusters{cluster_type}`: 1 `local`, and the number of `remote` clusters.
pub const MANAGED_CLUSTERS: &str = "istiod_managed_clusters";
/// Gauge `istiod_remote_cluster_sync_status{cluster,cluster_type,status}`: 1 for a remote cluster's
/// current status (`synced`, `syncing`, `timeout`, `closed`), 0 for the others.
pub const REMOTE_CLUSTER_SYNC_STATUS: &str = "istiod_remote_cluster_sync_status";
/// Counter `remote_cluster_secret_events_total{event}` (`add`, `update`, `delete`).
pub const REMOTE_CLUSTER_SECRET_EVENTS: &str = "remote_cluster_secret_events_total";
/// Counter `remote_cluster_sync_timeouts_total`: remote clusters that did not sync in time.
pub const REMOTE_CLUSTER_SYNC_TIMEOUTS: &str = "remote_cluster_sync_timeouts_total";

/// istiod's default `PILOT_REMOTE_CLUSTER_TIMEOUT`.
pub const DEFAULT_REMOTE_CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);

/// Settings of the remote-cluster controller.
#[derive(Clone)]
pub struct MulticlusterOptions {
    /// Namespace whose labelled Secrets are read (`istio-system`).
    pub system_namespace: String,
    /// The config cluster's id (`--clusterID`): a Secret key with this id is ignored.
    pub config_cluster_id: String,
    /// Options of each remote registry (its `cluster_id` is replaced by the Secret's key).
    pub registry: KubeRegistryOptions,
    /// How long readiness waits for a remote cluster's initial sync; zero waits for ever
    /// (`PILOT_REMOTE_CLUSTER_TIMEOUT`, default [`DEFAULT_REMOTE_CLUSTER_TIMEOUT`]).
    pub remote_cluster_timeout: Duration,
    /// Turns one Secret data value into a client configuration, refusing what is not allowed
    /// (see [`kubeconfig_from_bytes`]); the error is shown as the cluster's `error`.
    pub client_config: ClientConfigFn,
}

/// A task run against every serving remote cluster (istiod's `BuildMultiClusterComponent`): given
/// the cluster id, a client of its API server and the cluster's shutdown (signalled when the cluster
/// is removed or replaced). Example: the `istio-ca-root-cert` publisher.
pub type ClusterComponent = Arc<dyn Fn(&str, Client, Shutdown) -> RunFuture + Send + Sync>;

/// Builds a client configuration from a remote Secret's kubeconfig bytes.
pub type ClientConfigFn =
    Arc<dyn Fn(Vec<u8>) -> futures::future::BoxFuture<'static, Result<kube::Config, String>> + Send + Sync>;

impl std::fmt::Debug for MulticlusterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MulticlusterOptions")
            .field("system_namespace", &self.system_namespace)
            .field("config_cluster_id", &self.config_cluster_id)
            .field("remote_cluster_timeout", &self.remote_cluster_timeout)
            .finish_non_exhaustive()
    }
}

/// A client configuration from one remote Secret's kubeconfig bytes, read as untrusted input
/// ([`crate::remote_kubeconfig::remote_kubeconfig`]: istiod's `NewUntrustedRestConfig`, exec, token
/// and certificate files and other auth providers than `oidc` refused unless `allowed`), then its
/// current context.
///
/// # Errors
/// The kubeconfig is refused or unusable, in istiod's words where it has them.
pub async fn kubeconfig_from_bytes(
    bytes: Vec<u8>,
    allowed: InsecureKubeconfigOptions,
) -> Result<kube::Config, String> {
    let kubeconfig = crate::remote_kubeconfig::remote_kubeconfig(&bytes, &allowed)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| format!("the kubeconfig cannot be used: {e}"))
}

/// The remote clusters of a multi-cluster mesh as one service registry. Cheap to clone (a handle).
/// Nothing is contacted until [`Multicluster::run`].
#[derive(Clone)]
pub struct Multicluster {
    inner: Arc<Inner>,
}

struct Inner {
    options: MulticlusterOptions,
    services: AggregateRegistry,
    state: Mutex<State>,
    secrets_synced: AtomicBool,
}

#[derive(Default)]
struct State {
    /// Serving clusters by id.
    clusters: BTreeMap<String, RemoteCluster>,
    /// Clusters of a changed kubeconfig, syncing before they replace the serving one, by id.
    pending: BTreeMap<String, RemoteCluster>,
    /// Refused kubeconfigs by cluster id: (Secret, error).
    refused: BTreeMap<String, (String, String)>,
    /// Bumped for every started cluster, so a late swap of a superseded one does nothing.
    generation: u64,
    /// Tasks run against every serving cluster.
    components: Vec<ClusterComponent>,
}

/// One remote cluster's running registry.
struct RemoteCluster {
    secret: String,
    kubeconfig_hash: u64,
    generation: u64,
    registry: KubeRegistry,
    handle: Arc<dyn ServiceController>,
    /// A client of the cluster's API server for other uses than the registry's watches (token
    /// reviews of its proxies).
    client: Client,
    stop: ShutdownTrigger,
    /// The cluster's shutdown (for its components).
    shutdown: Shutdown,
    sync: Arc<SyncState>,
}

#[derive(Default)]
struct SyncState {
    timed_out: AtomicBool,
    closed: AtomicBool,
}

impl RemoteCluster {
    fn status(&self) -> ClusterSyncStatus {
        if self.sync.closed.load(Ordering::Acquire) {
            ClusterSyncStatus::Closed
        } else if self.registry.has_synced() {
            ClusterSyncStatus::Synced
        } else if self.sync.timed_out.load(Ordering::Acquire) {
            ClusterSyncStatus::Timeout
        } else {
            ClusterSyncStatus::Syncing
        }
    }

    /// Synced, or no longer waited for.
    fn counts_as_synced(&self) -> bool {
        self.registry.has_synced() || self.sync.timed_out.load(Ordering::Acquire)
    }

    fn start_components(&self, id: &str, components: &[ClusterComponent]) {
        for component in components {
            tokio::spawn(component(id, self.client.clone(), self.shutdown.clone()));
        }
    }

    fn close(&self) {
        self.sync.closed.store(true, Ordering::Release);
        self.stop.trigger();
    }
}

/// One Secret event for the controller task.
enum Message {
    Changes(Vec<Change<ObjectKey, Secret>>),
    Synced,
}

fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn record_status(cluster: &str, status: Option<ClusterSyncStatus>) {
    for s in [
        ClusterSyncStatus::Synced,
        ClusterSyncStatus::Syncing,
        ClusterSyncStatus::Timeout,
        ClusterSyncStatus::Closed,
    ] {
        let value = if Some(s) == status { 1.0 } else { 0.0 };
        metrics::gauge!(REMOTE_CLUSTER_SYNC_STATUS, "cluster" => cluster.to_string(), "cluster_type" => "remote",
            "status" => s.as_str())
        .set(value);
    }
}

impl Multicluster {
    /// A controller with no remote cluster yet.
    pub fn new(options: MulticlusterOptions) -> Multicluster {
        Multicluster {
            inner: Arc::new(Inner {
                options,
                services: AggregateRegistry::new(),
                state: Mutex::new(State::default()),
                secrets_synced: AtomicBool::new(false),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The ids of the serving remote clusters, sorted.
    pub fn cluster_ids(&self) -> Vec<String> {
        self.state().clusters.keys().cloned().collect()
    }

    /// Runs `component` against every serving remote cluster, those of now and those to come, until
    /// each is removed or replaced (then against its replacement).
    pub fn add_component(&self, component: ClusterComponent) {
        let mut state = self.state();
        for (id, cluster) in &state.clusters {
            cluster.start_components(id, std::slice::from_ref(&component));
        }
        state.components.push(component);
    }

    /// A client of serving remote cluster `id`'s API server.
    pub fn remote_client(&self, id: &str) -> Option<Client> {
        self.state().clusters.get(id).map(|c| c.client.clone())
    }

    /// Watches the system namespace's remote Secrets with `client` (the config cluster's) until
    /// `shutdown`, then stops every remote cluster. Spawn it.
    pub fn run(&self, client: Client, shutdown: Shutdown) -> RunFuture {
        let this = self.clone();
        Box::pin(async move {
            metrics::gauge!(MANAGED_CLUSTERS, "cluster_type" => "local").set(1.0);
            metrics::gauge!(MANAGED_CLUSTERS, "cluster_type" => "remote").set(0.0);
            let api: Api<Secret> = Api::namespaced(client, &this.inner.options.system_namespace);
            let config = watcher::Config::default().labels(&format!("{MULTICLUSTER_SECRET_LABEL}=true"));
            let backoff = this.inner.options.registry.backoff;
            let stream = watcher(api, config).backoff(crate::client::watch_backoff(backoff)).boxed();
            let (tx, mut rx) = mpsc::unbounded_channel();
            let synced_tx = tx.clone();
            let follow = Relist::new(namespaced_key).follow(
                stream,
                move |changes| {
                    let _ = tx.send(Message::Changes(changes));
                },
                move || {
                    let _ = synced_tx.send(Message::Synced);
                },
                |err| tracing::warn!(what = "remote cluster Secret", error = %err, "watch failed; retrying with backoff"),
            );
            let process = async {
                while let Some(message) = rx.recv().await {
                    match message {
                        Message::Changes(changes) => {
                            for change in changes {
                                this.apply(change).await;
                            }
                        }
                        Message::Synced => {
                            this.inner.secrets_synced.store(true, Ordering::Release);
                            tracing::info!(
                                clusters = this.state().clusters.len(),
                                "remote cluster Secrets synced"
                            );
                        }
                    }
                }
            };
            let mut shutdown = shutdown;
            tokio::select! {
                () = follow => {}
                () = process => {}
                () = shutdown.wait() => {}
            }
            this.stop_all();
        })
    }

    async fn apply(&self, change: Change<ObjectKey, Secret>) {
        match change {
            Change::Added(secret) | Change::Updated(secret) => {
                let (namespace, name) = namespaced_key(&secret);
                let data = secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
                let event =
                    if self.state().clusters.values().any(|c| c.secret == format!("{namespace}/{name}")) {
                        "update"
                    } else {
                        "add"
                    };
                metrics::counter!(REMOTE_CLUSTER_SECRET_EVENTS, "event" => event).increment(1);
                self.set_secret(&format!("{namespace}/{name}"), data).await;
            }
            Change::Deleted((namespace, name)) => {
                metrics::counter!(REMOTE_CLUSTER_SECRET_EVENTS, "event" => "delete").increment(1);
                self.set_secret(&format!("{namespace}/{name}"), BTreeMap::new()).await;
            }
        }
    }

    /// Makes the clusters configured by Secret `secret` (`namespace/name`) those of `data` (cluster
    /// id → kubeconfig): istiod's `addRemoteConfig`, and `deleteRemoteConfig` for empty `data`.
    pub async fn set_secret(&self, secret: &str, data: BTreeMap<String, Vec<u8>>) {
        let gone: Vec<String> = {
            let state = self.state();
            let mut ids: BTreeSet<String> =
                state.clusters.iter().filter(|(_, c)| c.secret == secret).map(|(id, _)| id.clone()).collect();
            ids.extend(state.refused.iter().filter(|(_, (s, _))| s == secret).map(|(id, _)| id.clone()));
            ids.into_iter().filter(|id| !data.contains_key(id)).collect()
        };
        for id in gone {
            self.delete_cluster(&id, secret);
        }
        for (id, kubeconfig) in data {
            if id == self.inner.options.config_cluster_id {
                tracing::info!(cluster = %id, %secret, "ignoring cluster as it would overwrite the config cluster");
                continue;
            }
            let hash = hash_bytes(&kubeconfig);
            {
                let mut state = self.state();
                match state.clusters.get(&id) {
                    Some(c) if c.secret != secret => {
                        tracing::warn!(cluster = %id, %secret, configured_by = %c.secret, "cluster has already been registered");
                        continue;
                    }
                    Some(c) if c.kubeconfig_hash == hash && !state.pending.contains_key(&id) => {
                        tracing::info!(cluster = %id, %secret, "skipping update (kubeconfig are identical)");
                        // Back to the serving kubeconfig after a refused one: the refusal is over.
                        state.refused.remove(&id);
                        continue;
                    }
                    _ => {}
                }
            }
            let config = match (self.inner.options.client_config)(kubeconfig).await {
                Ok(config) => config,
                Err(error) => {
                    tracing::error!(cluster = %id, %secret, %error, "remote cluster refused: nothing of it is read");
                    self.state().refused.insert(id.clone(), (secret.to_string(), error));
                    continue;
                }
            };
            let client = match crate::client::connection(config.clone()) {
                Ok(connection) => connection.client,
                Err(error) => {
                    tracing::error!(cluster = %id, %secret, %error, "remote cluster refused: nothing of it is read");
                    self.state().refused.insert(id.clone(), (secret.to_string(), error.to_string()));
                    continue;
                }
            };
            self.state().refused.remove(&id);
            self.start_cluster(&id, secret, hash, config, client);
        }
        let remote = self.state().clusters.len();
        metrics::gauge!(MANAGED_CLUSTERS, "cluster_type" => "remote").set(remote as f64);
        tracing::info!(remote, "number of remote clusters");
    }

    /// Starts a registry for cluster `id`: serving at once when the cluster is new, else pending until
    /// it syncs, then swapped in for the serving one.
    fn start_cluster(&self, id: &str, secret: &str, hash: u64, config: kube::Config, client: Client) {
        let options =
            KubeRegistryOptions { cluster_id: id.to_string(), ..self.inner.options.registry.clone() };
        let registry = KubeRegistry::new(config, options);
        let (stop, shutdown) = shutdown_channel();
        tokio::spawn(registry.run(shutdown.clone()));
        let handle: Arc<dyn ServiceController> = Arc::new(registry.clone());
        let sync = Arc::new(SyncState::default());
        let mut state = self.state();
        state.generation += 1;
        let generation = state.generation;
        let cluster = RemoteCluster {
            secret: secret.to_string(),
            kubeconfig_hash: hash,
            generation,
            registry: registry.clone(),
            handle: handle.clone(),
            client,
            stop,
            shutdown: shutdown.clone(),
            sync: sync.clone(),
        };
        let swap = state.clusters.contains_key(id);
        if swap {
            tracing::info!(cluster = %id, %secret, "update cluster: the new client serves once it has synced");
            if let Some(previous) = state.pending.insert(id.to_string(), cluster) {
                previous.close();
            }
        } else {
            tracing::info!(cluster = %id, %secret, "add cluster");
            self.inner.services.add_registry(handle);
            cluster.start_components(id, &state.components);
            state.clusters.insert(id.to_string(), cluster);
        }
        drop(state);
        record_status(id, Some(ClusterSyncStatus::Syncing));
        tokio::spawn(self.clone().follow_sync(id.to_string(), generation, registry, sync, swap, shutdown));
    }

    /// Waits for cluster `id`'s registry (of `generation`) to sync: records the status, gives up
    /// waiting (for readiness) after the timeout, and swaps a pending registry in once synced. Woken
    /// by the registry's sync ([`KubeRegistry::wait_synced`]), the timeout or the cluster's shutdown
    /// (closed, replaced or removed), never by polling.
    async fn follow_sync(
        self,
        id: String,
        generation: u64,
        registry: KubeRegistry,
        sync: Arc<SyncState>,
        swap: bool,
        mut shutdown: Shutdown,
    ) {
        let started = Instant::now();
        let timeout = self.inner.options.remote_cluster_timeout;
        let deadline = async {
            if timeout.is_zero() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(timeout).await;
        };
        let synced = registry.wait_synced();
        tokio::pin!(deadline, synced);
        let mut waiting = true;
        loop {
            tokio::select! {
                () = &mut synced => break,
                () = shutdown.wait() => return,
                () = &mut deadline, if waiting => {
                    waiting = false;
                    if !sync.timed_out.swap(true, Ordering::AcqRel) {
                        tracing::error!(cluster = %id, timeout = ?timeout, "remote cluster failed to sync in time; readiness no longer waits for it");
                        metrics::counter!(REMOTE_CLUSTER_SYNC_TIMEOUTS).increment(1);
                        record_status(&id, Some(ClusterSyncStatus::Timeout));
                    }
                }
            }
        }
        if sync.closed.load(Ordering::Acquire) {
            return;
        }
        tracing::info!(cluster = %id, elapsed = ?started.elapsed(), "remote cluster synced");
        record_status(&id, Some(ClusterSyncStatus::Synced));
        if swap {
            self.promote(&id, generation);
        }
    }

    /// Swaps the pending registry of `generation` in for cluster `id`'s serving one.
    fn promote(&self, id: &str, generation: u64) {
        let mut state = self.state();
        if state.pending.get(id).is_none_or(|p| p.generation != generation) {
            return;
        }
        let Some(next) = state.pending.remove(id) else { return };
        next.start_components(id, &state.components);
        let Some(previous) = state.clusters.insert(id.to_string(), next) else { return };
        let handle = state.clusters[id].handle.clone();
        drop(state);
        self.inner.services.replace_registry(&previous.handle, handle);
        previous.close();
        tracing::info!(cluster = %id, "cluster updated: new client serving");
    }

    /// Stops cluster `id` (if Secret `secret` configured it) and removes its services.
    fn delete_cluster(&self, id: &str, secret: &str) {
        let (serving, pending) = {
            let mut state = self.state();
            if state.refused.get(id).is_some_and(|(s, _)| s == secret) {
                state.refused.remove(id);
            }
            if state.clusters.get(id).is_none_or(|c| c.secret != secret) {
                return;
            }
            (state.clusters.remove(id), state.pending.remove(id))
        };
        tracing::info!(cluster = %id, %secret, "deleting cluster");
        if let Some(pending) = pending {
            pending.close();
        }
        if let Some(serving) = serving {
            serving.close();
            self.inner.services.remove_registry(&serving.handle);
        }
        record_status(id, None);
    }

    fn stop_all(&self) {
        let mut state = self.state();
        for cluster in state.clusters.values().chain(state.pending.values()) {
            cluster.close();
        }
        state.pending.clear();
    }
}

impl ServiceDiscovery for Multicluster {
    fn services(&self) -> Vec<Arc<Service>> {
        self.inner.services.services()
    }

    fn get_service(&self, hostname: &str, namespace: &str) -> Option<Arc<Service>> {
        self.inner.services.get_service(hostname, namespace)
    }

    fn visible_service(&self, hostname: &str, viewer: &str) -> Option<Arc<Service>> {
        self.inner.services.visible_service(hostname, viewer)
    }

    fn endpoints(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        subset: Option<&Labels>,
    ) -> Vec<Arc<Endpoint>> {
        self.inner.services.endpoints(hostname, namespace, port, subset)
    }

    fn proxy_instances(&self, ips: &[String], namespace: Option<&str>) -> Vec<ServiceInstance> {
        self.inner.services.proxy_instances(ips, namespace)
    }

    fn proxy_service_targets(
        &self,
        ips: &[String],
        namespace: &str,
        labels: &Labels,
    ) -> Vec<ServiceInstance> {
        self.inner.services.proxy_service_targets(ips, namespace, labels)
    }
}

impl ServiceController for Multicluster {
    fn append_event_handler(&self, handler: RegistryEventHandler) {
        self.inner.services.append_event_handler(handler);
    }

    /// The Secrets' initial list is processed and every serving remote cluster has synced or timed
    /// out (istiod's `Controller.HasSynced`).
    fn has_synced(&self) -> bool {
        self.inner.secrets_synced.load(Ordering::Acquire)
            && self.state().clusters.values().all(RemoteCluster::counts_as_synced)
    }

    fn endpoint_shards(&self) -> Vec<EndpointShard> {
        self.inner.services.endpoint_shards()
    }

    fn warnings(&self) -> Vec<RegistryWarning> {
        self.inner.services.warnings()
    }

    /// The remote clusters with their Secret and status; a refused kubeconfig as `closed` with its
    /// error.
    fn clusters(&self) -> Vec<ClusterInfo> {
        let state = self.state();
        let refused_error = |id: &str| state.refused.get(id).map(|(_, e)| e.clone()).unwrap_or_default();
        let mut out: Vec<ClusterInfo> = state
            .clusters
            .iter()
            .map(|(id, c)| ClusterInfo {
                id: id.clone(),
                secret_name: c.secret.clone(),
                sync_status: c.status(),
                // A serving cluster whose Secret now holds a refused kubeconfig keeps serving with its
                // previous one: listed once, with the refusal.
                error: refused_error(id),
            })
            .collect();
        out.extend(state.refused.iter().filter(|(id, _)| !state.clusters.contains_key(*id)).map(
            |(id, (secret, error))| ClusterInfo {
                id: id.clone(),
                secret_name: secret.clone(),
                sync_status: ClusterSyncStatus::Closed,
                error: error.clone(),
            },
        ));
        out
    }
}

/// Reviews service-account tokens in the cluster the caller names (istiod's
/// `KubeJWTAuthenticator.getKubeClient`): the config cluster for no name or its own id, a serving
/// remote cluster's API server for that cluster's id, an error naming the known clusters otherwise (a
/// token of a cluster meshpilot does not read is never accepted).
#[derive(Clone)]
pub struct ClusterTokenReviewer {
    config_cluster_id: String,
    local: Arc<dyn TokenReviewer>,
    remote: Multicluster,
}

impl std::fmt::Debug for ClusterTokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTokenReviewer")
            .field("config_cluster_id", &self.config_cluster_id)
            .finish_non_exhaustive()
    }
}

impl ClusterTokenReviewer {
    /// Reviews with `local` for the config cluster `config_cluster_id` and with the API servers of
    /// `remote`'s clusters for theirs.
    pub fn new(config_cluster_id: &str, local: Arc<dyn TokenReviewer>, remote: Multicluster) -> Self {
        ClusterTokenReviewer { config_cluster_id: config_cluster_id.to_string(), local, remote }
    }
}

impl TokenReviewer for ClusterTokenReviewer {
    fn review<'a>(
        &'a self,
        token: &'a str,
        audiences: &'a [String],
    ) -> BoxFuture<'a, Result<TokenReviewStatus, String>> {
        self.local.review(token, audiences)
    }

    fn review_in_cluster<'a>(
        &'a self,
        cluster: &'a str,
        token: &'a str,
        audiences: &'a [String],
    ) -> BoxFuture<'a, Result<TokenReviewStatus, String>> {
        if cluster.is_empty() || cluster == self.config_cluster_id {
            return self.local.review(token, audiences);
        }
        match self.remote.remote_client(cluster) {
            Some(client) => {
                Box::pin(async move { KubeTokenReviewer::new(client).review(token, audiences).await })
            }
            None => {
                let known = self.remote.cluster_ids();
                let message = format!(
                    "could not get cluster {cluster:?}'s kube client: the config cluster is {:?}, remote clusters {known:?}",
                    self.config_cluster_id
                );
                Box::pin(async move { Err(message) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubeconfig for an API server nobody listens on (the registry just keeps retrying), with
    /// `user` (YAML lines under `user:`).
    fn kubeconfig(user: &str) -> Vec<u8> {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    \
             server: https://127.0.0.1:9\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\n\
             users:\n- name: u\n  user:\n{user}"
        )
        .into_bytes()
    }

    fn controller() -> Multicluster {
        Multicluster::new(MulticlusterOptions {
            system_namespace: "istio-system".into(),
            config_cluster_id: "config".into(),
            registry: KubeRegistryOptions::default(),
            remote_cluster_timeout: Duration::ZERO,
            client_config: Arc::new(|bytes| Box::pin(kubeconfig_from_bytes(bytes, Default::default()))),
        })
    }

    #[tokio::test]
    async fn a_serving_cluster_whose_secret_turns_refused_is_listed_once_with_the_error() {
        let mc = controller();
        let secret = "istio-system/istio-remote-secret-west";
        mc.set_secret(secret, [("west".to_string(), kubeconfig("    token: t1\n"))].into()).await;
        let exec = "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/x}\n";
        mc.set_secret(secret, [("west".to_string(), kubeconfig(exec))].into()).await;
        let clusters = mc.clusters();
        assert_eq!(clusters.len(), 1, "{clusters:?}");
        assert_eq!(clusters[0].id, "west");
        assert_eq!(clusters[0].sync_status, ClusterSyncStatus::Syncing, "the previous client still serves");
        assert!(clusters[0].error.contains("exec is not allowed"), "{clusters:?}");
        assert_eq!(mc.cluster_ids(), ["west"]);

        // Back to the serving kubeconfig: the refusal is over.
        mc.set_secret(secret, [("west".to_string(), kubeconfig("    token: t1\n"))].into()).await;
        assert_eq!(mc.clusters()[0].error, "");
        // A refused kubeconfig of a cluster that is not serving is listed as closed.
        mc.set_secret("istio-system/other", [("east".to_string(), kubeconfig(exec))].into()).await;
        let clusters = mc.clusters();
        assert_eq!(clusters.len(), 2, "{clusters:?}");
        assert_eq!((clusters[1].id.as_str(), clusters[1].sync_status), ("east", ClusterSyncStatus::Closed));
        mc.stop_all();
    }
}
