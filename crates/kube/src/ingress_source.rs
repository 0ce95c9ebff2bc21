//! Kubernetes Ingress as a config source (Istio's `pilot/pkg/config/kube/ingress` controller): the
//! [`Feed`] of a read-only [`config::ReadOnlySource`] (`ReadOnlySource::new(source)`, the
//! [`model::ConfigStoreController`]) whose Gateways and VirtualServices are the conversion
//! ([`ingress::convert`]) of the cluster's Ingresses, and the writer of Ingress
//! `status.loadBalancer`.
//!
//! ```text
//!  kube-apiserver ──watch Ingresses, IngressClasses, Services (all namespaces)──► State
//!        ▲                                                                           │ every change
//!        │                                  ingress::convert (pure) ◄────────────────┤
//!        │                                         ▼                                 │
//!        │                    MemoryStore (Gateway, VirtualService; read-only) ──► queue ──► handlers
//!        └── patch status.loadBalancer ◄── leader of `istio-leader` only, no write when unchanged
//! ```
//!
//! - **What is converted.** Every Ingress Istio handles ([`ingress::should_process`] with the mesh
//!   config's `ingressControllerMode` / `ingressClass` and the IngressClass the Ingress names); named
//!   backend ports are resolved against the watched Services. The whole conversion is recomputed on
//!   every change and the store replaced kind by kind, so only objects that really changed raise
//!   events. Ingresses that fail to decode are skipped with a warning naming them.
//! - **Status.** With [`IngressSourceOptions::leader`] set, the replica holding the `istio-leader`
//!   Lease (shared across revisions, as istiod's `IngressController` election) writes each processed
//!   Ingress's `status.loadBalancer.ingress` with the addresses of the mesh `ingressService` in the
//!   ingress namespace ([`ingress::status`]): a JSON merge patch of the status subresource, only when
//!   the addresses differ from what the Ingress (as last watched) says.
//! - **Sync.** The source's `has_synced` is true once the three watches have listed ([`Feed::loaded`])
//!   and the queue has delivered the result once; `source_of` is `k8s-ingress://`.
//!
//! **Where meshpilot differs.** Without `ingressService`, istiod falls back to the node external IPs
//! of a running gateway pod; meshpilot does not watch Pods and Nodes for this and writes no address
//! ([`ingress::status::running_addresses`] has the rule, for when it does). The mesh settings are those
//! at start (istiod recomputes on a mesh config change). Ingresses are not filtered by discovery
//! selectors or revision tags.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use api::Kind;
use config::{Feed, MemoryStore, QueueOptions};
use ingress::{
    Ingress, IngressClass, IngressSettings, ServicePort, ServicePorts,
    status::{IngressService, load_balancer_status, running_addresses},
    types::IngressLoadBalancerIngress,
};
use k8s_openapi::api::{
    core::v1::Service,
    networking::v1::{Ingress as KubeIngress, IngressClass as KubeIngressClass},
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use model::{Config, ConfigKey, Shutdown, store::RunFuture};
use serde_json::json;
use tokio::sync::watch;

use crate::{
    client::{self, FIELD_MANAGER, KubeError},
    leader::{INGRESS_CONTROLLER, LeaderElection, LeaderElectionOptions, LockScope, run_while_leading},
    relist::{Change, ObjectKey, Relist, name_key, namespaced_key},
};

/// Settings of an [`IngressSource`].
#[derive(Clone, Debug)]
pub struct IngressSourceOptions {
    /// The mesh config's Ingress fields and the ingress namespace.
    pub settings: IngressSettings,
    /// Domain suffix of backend hosts (`cluster.local`).
    pub domain_suffix: String,
    /// Retry settings of the event queue.
    pub queue: QueueOptions,
    /// Watch retry backoff: first delay and cap.
    pub backoff: (Duration, Duration),
    /// Election settings for the status writer; `None` writes no status.
    pub leader: Option<LeaderElectionOptions>,
}

impl Default for IngressSourceOptions {
    fn default() -> Self {
        IngressSourceOptions {
            settings: IngressSettings::default(),
            domain_suffix: "cluster.local".into(),
            queue: QueueOptions::default(),
            backoff: (Duration::from_millis(800), Duration::from_secs(30)),
            leader: None,
        }
    }
}

/// The Ingress config source (see the module documentation). Cheap to clone (a handle).
#[derive(Clone)]
pub struct IngressSource {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for IngressSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngressSource").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

struct Inner {
    name: String,
    config: kube::Config,
    options: IngressSourceOptions,
    store: MemoryStore,
    state: Mutex<State>,
    /// Bumped after every change of [`State`] (the status writer waits on it).
    version: watch::Sender<u64>,
    /// Status patches written, and status passes completed (for tests and debugging).
    status_writes: AtomicU64,
    status_passes: AtomicU64,
}

#[derive(Default)]
struct State {
    ingresses: BTreeMap<ObjectKey, Ingress>,
    classes: BTreeMap<String, IngressClass>,
    services: ServicePorts,
    /// The mesh `ingressService`, when it exists.
    ingress_service: Option<IngressService>,
    /// Ingresses, IngressClasses, Services listed.
    listed: [bool; 3],
    /// The Ingresses processed by the last conversion (`namespace/name`).
    supported: Vec<String>,
}

/// The kinds the source serves.
pub const KINDS: [Kind; 2] = [Kind::Gateway, Kind::VirtualService];

impl IngressSource {
    /// A source over the cluster of `config`; nothing happens until its
    /// [`config::ReadOnlySource`] runs.
    pub fn new(config: kube::Config, options: IngressSourceOptions) -> IngressSource {
        let name = "kubernetes-ingress".to_string();
        let store = MemoryStore::read_only(name.clone(), &KINDS, options.queue.clone());
        IngressSource {
            inner: Arc::new(Inner {
                name,
                config,
                options,
                store,
                state: Mutex::new(State::default()),
                version: watch::channel(0).0,
                status_writes: AtomicU64::new(0),
                status_passes: AtomicU64::new(0),
            }),
        }
    }

    /// How many `status.loadBalancer` patches this replica wrote.
    pub fn status_writes(&self) -> u64 {
        self.inner.status_writes.load(Ordering::Acquire)
    }

    /// How many status passes (compare every processed Ingress, write those that differ) completed;
    /// a pass follows every change the watches deliver while this replica leads.
    pub fn status_passes(&self) -> u64 {
        self.inner.status_passes.load(Ordering::Acquire)
    }

    /// The Ingresses the last conversion processed, as `namespace/name`.
    pub fn supported(&self) -> Vec<String> {
        self.inner.state().supported.clone()
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Recomputes the conversion into the store (under the state lock, so replacements never
    /// interleave) and wakes the status writer.
    fn recompute(&self, mut state: MutexGuard<'_, State>) {
        let ingresses: Vec<Ingress> = state.ingresses.values().cloned().collect();
        let out = ingress::convert(
            &ingresses,
            &state.classes,
            &state.services,
            &self.options.settings,
            &self.options.domain_suffix,
        );
        for warning in &out.warnings {
            tracing::debug!(source = %self.name, "{warning}");
        }
        let mut by_kind: BTreeMap<Kind, Vec<Arc<Config>>> = KINDS.iter().map(|k| (*k, Vec::new())).collect();
        for c in out.configs {
            by_kind.entry(c.kind()).or_default().push(Arc::new(c));
        }
        for (kind, configs) in by_kind {
            self.store.replace_kind(kind, configs);
        }
        state.supported = out.supported;
        drop(state);
        self.version.send_modify(|v| *v += 1);
    }

    fn ingress_changed(&self, changes: Vec<Change<ObjectKey, KubeIngress>>) {
        let mut state = self.state();
        for change in changes {
            match change {
                Change::Added(o) | Change::Updated(o) => {
                    let key = namespaced_key(&o);
                    match serde_json::to_value(&o)
                        .map_err(|e| e.to_string())
                        .and_then(|v| Ingress::from_json(&v))
                    {
                        Ok(i) => {
                            state.ingresses.insert(key, i);
                        }
                        Err(err) => {
                            tracing::warn!(source = %self.name, ingress = %format!("{}/{}", key.0, key.1), error = %err, "Ingress skipped");
                            state.ingresses.remove(&key);
                        }
                    }
                }
                Change::Deleted(key) => {
                    state.ingresses.remove(&key);
                }
            }
        }
        self.recompute(state);
    }

    fn class_changed(&self, changes: Vec<Change<String, KubeIngressClass>>) {
        let mut state = self.state();
        for change in changes {
            match change {
                Change::Added(o) | Change::Updated(o) => {
                    let name = name_key(&o);
                    match serde_json::to_value(&o)
                        .map_err(|e| e.to_string())
                        .and_then(|v| IngressClass::from_json(&v))
                    {
                        Ok(c) => {
                            state.classes.insert(name, c);
                        }
                        Err(err) => {
                            tracing::warn!(source = %self.name, class = %name, error = %err, "IngressClass skipped");
                            state.classes.remove(&name);
                        }
                    }
                }
                Change::Deleted(name) => {
                    state.classes.remove(&name);
                }
            }
        }
        self.recompute(state);
    }

    fn service_changed(&self, changes: Vec<Change<ObjectKey, Service>>) {
        let settings = &self.options.settings;
        let ingress_key = (settings.namespace.clone(), settings.ingress_service.clone());
        let mut state = self.state();
        for change in changes {
            match change {
                Change::Added(svc) | Change::Updated(svc) => {
                    let key = namespaced_key(&svc);
                    let spec = svc.spec.clone().unwrap_or_default();
                    let ports = spec
                        .ports
                        .iter()
                        .flatten()
                        .map(|p| ServicePort { name: p.name.clone().unwrap_or_default(), port: p.port })
                        .collect();
                    if key == ingress_key {
                        state.ingress_service = Some(ingress_service(&svc));
                    }
                    state.services.insert(key, ports);
                }
                Change::Deleted(key) => {
                    if key == ingress_key {
                        state.ingress_service = None;
                    }
                    state.services.remove(&key);
                }
            }
        }
        self.recompute(state);
    }

    fn mark_listed(&self, index: usize) {
        self.state().listed[index] = true;
        self.version.send_modify(|v| *v += 1);
    }

    /// What each processed Ingress's `status.loadBalancer.ingress` should be, for those whose current
    /// status differs: `(namespace, name, wanted)`.
    fn status_updates(&self) -> Vec<(String, String, Vec<IngressLoadBalancerIngress>)> {
        let state = self.state();
        if !state.listed.iter().all(|l| *l) {
            return Vec::new();
        }
        let set = !self.options.settings.ingress_service.is_empty();
        let want = load_balancer_status(&running_addresses(
            set,
            state.ingress_service.as_ref(),
            &[],
            &BTreeMap::new(),
        ));
        state
            .supported
            .iter()
            .filter_map(|key| {
                let (ns, name) = key.split_once('/')?;
                let current = state.ingresses.get(&(ns.to_string(), name.to_string()))?;
                (current.status.load_balancer.ingress != want)
                    .then(|| (ns.to_string(), name.to_string(), want.clone()))
            })
            .collect()
    }
}

fn ingress_service(svc: &Service) -> IngressService {
    let spec = svc.spec.clone().unwrap_or_default();
    let lb = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.clone())
        .unwrap_or_default();
    IngressService {
        service_type: spec.type_.unwrap_or_default(),
        external_name: spec.external_name.unwrap_or_default(),
        load_balancer: lb
            .into_iter()
            .map(|i| (i.ip.unwrap_or_default(), i.hostname.unwrap_or_default()))
            .collect(),
        external_ips: spec.external_ips.unwrap_or_default(),
    }
}

/// Writes `status.loadBalancer.ingress` of one Ingress (merge patch of the status subresource, field
/// manager [`FIELD_MANAGER`]).
///
/// # Errors
/// [`KubeError`] (Not Found when the Ingress is gone).
pub async fn patch_load_balancer(
    client: &Client,
    namespace: &str,
    name: &str,
    addresses: &[IngressLoadBalancerIngress],
) -> Result<(), KubeError> {
    let api: Api<KubeIngress> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"status": {"loadBalancer": {"ingress": addresses}}});
    api.patch_status(
        name,
        &PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() },
        &Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
    .map_err(|e| KubeError::from_kube(e, &format!("update the status of Ingress {namespace}/{name}")))
}

impl IngressSource {
    async fn watch_all(self, client: Client) {
        let inner = &self.inner;
        let backoff = inner.options.backoff;
        let warn = |what: &'static str| {
            move |err: kube::runtime::watcher::Error| {
                tracing::warn!(source = %inner.name, what, error = %err, "watch failed; retrying with backoff");
            }
        };
        let ingresses = Relist::new(namespaced_key).follow(
            client::watch(Api::<KubeIngress>::all(client.clone()), backoff),
            |c| inner.ingress_changed(c),
            || inner.mark_listed(0),
            warn("Ingress"),
        );
        let classes = Relist::new(name_key).follow(
            client::watch(Api::<KubeIngressClass>::all(client.clone()), backoff),
            |c| inner.class_changed(c),
            || inner.mark_listed(1),
            warn("IngressClass"),
        );
        let services = Relist::new(namespaced_key).follow(
            client::watch(Api::<Service>::all(client.clone()), backoff),
            |c| inner.service_changed(c),
            || inner.mark_listed(2),
            warn("Service"),
        );
        tokio::join!(ingresses, classes, services);
    }

    /// The status writer: while leading, writes the status of every processed Ingress that differs,
    /// after each change. A failed write is retried at the next change or after 5 s.
    async fn write_status(self, client: Client, mut term: Shutdown) {
        let mut changes = self.inner.version.subscribe();
        loop {
            let mut failed = false;
            for (ns, name, want) in self.inner.status_updates() {
                match patch_load_balancer(&client, &ns, &name, &want).await {
                    Ok(()) => {
                        self.inner.status_writes.fetch_add(1, Ordering::AcqRel);
                        tracing::info!(source = %self.inner.name, ingress = %format!("{ns}/{name}"), "status.loadBalancer written");
                    }
                    Err(err) if err.is_not_found() => {}
                    Err(err) => {
                        failed = true;
                        tracing::warn!(source = %self.inner.name, error = %err, "cannot write Ingress status");
                    }
                }
            }
            self.inner.status_passes.fetch_add(1, Ordering::AcqRel);
            let retry = async {
                if failed {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = term.wait() => return,
                r = changes.changed() => if r.is_err() { return },
                () = retry => {}
            }
        }
    }
}

impl Feed for IngressSource {
    fn store(&self) -> &MemoryStore {
        &self.inner.store
    }

    /// `k8s-ingress://`: derived from the cluster's Ingresses.
    fn source_of(&self, _key: &ConfigKey) -> Option<String> {
        Some("k8s-ingress://".to_string())
    }

    /// Connects, watches, and runs the status writer (when configured) until `shutdown`.
    fn run(&self, shutdown: Shutdown) -> RunFuture {
        let source = self.clone();
        Box::pin(async move {
            let client = match client::connection(source.inner.config.clone()) {
                Ok(connection) => connection.client,
                Err(err) => {
                    tracing::error!(source = %source.inner.name, error = %err, "cannot create the Kubernetes client");
                    return;
                }
            };
            let status = source.inner.options.leader.clone().map(|options| {
                let leadership =
                    LeaderElection::new(client.clone(), INGRESS_CONTROLLER, LockScope::Shared, options)
                        .start(shutdown.clone());
                let (writer, client, shutdown) = (source.clone(), client.clone(), shutdown.clone());
                tokio::spawn(async move {
                    run_while_leading(leadership.subscribe(), shutdown, |term| {
                        writer.clone().write_status(client.clone(), term)
                    })
                    .await;
                    leadership.stopped().await;
                })
            });
            let mut stop = shutdown;
            tokio::select! {
                () = source.clone().watch_all(client) => {}
                () = stop.wait() => {}
            }
            if let Some(task) = status {
                let _ = task.await;
            }
        })
    }

    /// Once Ingresses, IngressClasses and Services have all been listed.
    fn loaded(&self) -> bool {
        self.inner.state().listed.iter().all(|l| *l)
    }
}
