//! The Kubernetes CRD config source (Istio's `pilot/pkg/config/kube/crdclient`).
//!
//! ```text
//!  CustomResourceDefinitions ──watch──► per Istio kind whose CRD is Established:
//!                                           watch KIND (all namespaces) ─► parse + validate (as files)
//!                                           │  invalid: skipped, warned, listed in rejected()
//!                                           ▼
//!                               MemoryStore (read-only sink) ──► queue ──► handlers
//!  ConfigStore writes ──► writer thread ──► API server (create / update / update_status / delete)
//! ```
//!
//! - **Kinds.** One watch per Istio kind whose CRD exists and is Established, found by watching
//!   CustomResourceDefinitions named `<plural>.<group>` (from the [`api`] schema registry). A CRD that
//!   appears later starts its kind's watch; a CRD that goes away stops it and deletes the kind's objects
//!   (events for each). The watch uses the kind's current version when the CRD serves it, else the
//!   first served alias (`v1alpha3`, `v1beta1`).
//! - **Objects** go through [`model::parse::parse_json`], the same strict decoding and validation as
//!   config files. An invalid object is skipped with a `tracing` warning naming kind, namespace, name,
//!   field path and reason, and listed by [`KubeSource::rejected`]; it is never fatal. If an object that
//!   was valid becomes invalid, its last valid version stays in force (as a bad config file keeps its
//!   last good objects) until it is fixed or deleted.
//! - **Filters.** Objects labelled `istio.io/rev` with a value other than [`KubeSourceOptions::revision`]
//!   are ignored (Istio's `LabelsInRevision`: no label, or no revision configured, means included).
//!   [`KubeSourceOptions::namespaces`] restricts the source to some namespaces.
//! - **Discovery selectors.** With [`KubeSourceOptions::discovery_selectors`] set, the source also
//!   watches Namespaces ([`NamespaceFilter`]): valid objects of unselected (or not yet seen)
//!   namespaces are held aside, not in the store; a namespace that becomes selected adds them, one
//!   that stops being selected deletes its objects from the store (and holds them aside again).
//! - **Errors and restarts.** Watches use kube-runtime's watcher: a dropped watch resumes from the last
//!   resource version; a 410 Gone or failed list starts over with a relist, retried with exponential
//!   backoff ([`KubeSourceOptions::backoff`]). A relist is diffed against the store: objects that still
//!   exist raise no event (unchanged) or an Update, only objects that really went away raise Deletes.
//! - **Sync.** [`ConfigStoreController::has_synced`] turns true once the CRD list (and, with
//!   discovery selectors, the Namespace list) is done, every kind
//!   found then has finished its initial list, and the queue has delivered those objects once.
//! - **Writes** ([`ConfigStore::create`] and friends) are synchronous REST calls made on a dedicated
//!   thread with its own runtime and client, so they work from any context (and block the caller for
//!   one round trip; from async code, call them in `spawn_blocking`). Resource-version conflicts are
//!   [`StoreError::Conflict`], a missing object [`StoreError::NotFound`], other API errors
//!   [`StoreError::Backend`] with a plain explanation. A write shows up in reads once its watch event
//!   arrives (as with Istio's informers).

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{
        Arc, Mutex, MutexGuard, OnceLock,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::Duration,
};

use api::{Kind, Schema};
use config::{Change, MemoryStore, QueueOptions};
use futures::{StreamExt, future::BoxFuture};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::DynamicObject,
    runtime::{WatchStreamExt, utils::Backoff, watcher},
};
use model::{
    Config, ConfigKey, ConfigStore, ConfigStoreController, EventHandler, Shutdown, StoreError,
    parse::{Finding, ParseOptions},
    selector::DiscoverySelectors,
    store::RunFuture,
};
use tokio::task::JoinHandle;

use crate::{
    client::{self, KubeError, api_resource, crd_name, to_config, to_object},
    namespaces::{Membership, NamespaceFilter},
};

/// The label that ties config to an Istio control-plane revision.
pub const REVISION_LABEL: &str = "istio.io/rev";

/// Settings of a [`KubeSource`].
#[derive(Clone, Debug)]
pub struct KubeSourceOptions {
    /// How objects are read (domain suffix; the default namespace is unused: API objects have one).
    pub parse: ParseOptions,
    /// Retry settings of the event queue.
    pub queue: QueueOptions,
    /// Kinds served (default: every Istio kind meshpilot knows); the others are not watched.
    pub kinds: Vec<Kind>,
    /// This control plane's revision (Istio's `REVISION`); `None` or empty accepts every object.
    pub revision: Option<String>,
    /// Namespaces to read; empty reads all (the watches are cluster-wide either way).
    pub namespaces: Vec<String>,
    /// Watch retry backoff: first delay and cap (client-go's are 800 ms and 30 s).
    pub backoff: (Duration, Duration),
    /// Mesh config `discoverySelectors`: only objects of selected namespaces are read; empty reads all.
    pub discovery_selectors: DiscoverySelectors,
}

impl Default for KubeSourceOptions {
    fn default() -> Self {
        KubeSourceOptions {
            parse: ParseOptions::default(),
            queue: QueueOptions::default(),
            kinds: Kind::ALL.to_vec(),
            revision: None,
            namespaces: Vec::new(),
            backoff: (Duration::from_millis(800), Duration::from_secs(30)),
            discovery_selectors: DiscoverySelectors::default(),
        }
    }
}

/// An object in the cluster that is not in force because it failed parsing or validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// The object.
    pub key: ConfigKey,
    /// Its resource version when it was rejected.
    pub resource_version: String,
    /// Why (field path and reason each).
    pub errors: Vec<Finding>,
    /// `true` when an earlier valid version stays in force.
    pub kept_previous: bool,
}

/// The Kubernetes CRD [`ConfigStoreController`]. Cheap to clone (a handle).
#[derive(Clone)]
pub struct KubeSource {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for KubeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSource").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

struct Inner {
    name: String,
    config: kube::Config,
    options: KubeSourceOptions,
    store: MemoryStore,
    state: Mutex<State>,
    writer: OnceLock<Result<Writer, String>>,
    barrier: OnceLock<u64>,
    synced: AtomicBool,
    /// Discovery-selector state; held across the store update it decides, so a namespace's
    /// membership change and an object's event never interleave.
    discovery: Mutex<Discovery>,
}

/// The namespace filter and the valid objects it holds aside (of unselected namespaces).
struct Discovery {
    filter: NamespaceFilter,
    hidden: HashMap<ConfigKey, Arc<Config>>,
    /// The Namespace watch finished its first list (always true without selectors).
    listed: bool,
}

#[derive(Default)]
struct State {
    /// The CRD watch finished its first list.
    crds_listed: bool,
    /// Running watches.
    watches: HashMap<Kind, Watch>,
    /// Invalid objects, by key.
    rejected: BTreeMap<ConfigKey, Rejected>,
}

struct Watch {
    version: String,
    /// The watch finished its first list.
    listed: bool,
    task: JoinHandle<()>,
}

impl KubeSource {
    /// A source reading the cluster `config` points at (see [`client::client_config`]). Nothing is
    /// contacted until [`ConfigStoreController::run`].
    pub fn new(config: kube::Config, options: KubeSourceOptions) -> KubeSource {
        let name = format!("kubernetes:{}", config.cluster_url);
        let store = MemoryStore::read_only(name.clone(), &options.kinds, options.queue.clone());
        let selectors = options.discovery_selectors.clone();
        let options_selectors_empty = selectors.is_empty();
        KubeSource {
            inner: Arc::new(Inner {
                name,
                config,
                options,
                store,
                state: Mutex::default(),
                writer: OnceLock::new(),
                barrier: OnceLock::new(),
                synced: AtomicBool::new(false),
                discovery: Mutex::new(Discovery {
                    listed: options_selectors_empty,
                    filter: NamespaceFilter::new(selectors),
                    hidden: HashMap::new(),
                }),
            }),
        }
    }

    /// The store the watches fill (its queue, snapshot).
    pub fn store(&self) -> &MemoryStore {
        &self.inner.store
    }

    /// Objects in the cluster that are not in force because they are invalid, by key.
    pub fn rejected(&self) -> Vec<Rejected> {
        self.inner.state().rejected.values().cloned().collect()
    }

    /// The kinds being watched now, with the version each watch uses.
    pub fn watched_kinds(&self) -> Vec<(Kind, String)> {
        let mut out: Vec<(Kind, String)> =
            self.inner.state().watches.iter().map(|(k, w)| (*k, w.version.clone())).collect();
        out.sort();
        out
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn discovery(&self) -> MutexGuard<'_, Discovery> {
        self.discovery.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A valid object to hold: into the store when its namespace is selected, else aside.
    fn hold(&self, discovery: &mut Discovery, config: Config) -> Change {
        let key = config.key();
        if discovery.filter.selects(&key.namespace) {
            discovery.hidden.remove(&key);
            Change::Upsert(Arc::new(config))
        } else {
            discovery.hidden.insert(key.clone(), Arc::new(config));
            Change::Remove(key)
        }
    }

    /// A Namespace was listed or changed: add or delete its objects on a membership change.
    fn namespace_applied(&self, discovery: &mut Discovery, name: &str, labels: &model::service::Labels) {
        let changes: Vec<Change> = match discovery.filter.apply(name, labels) {
            None => return,
            Some(Membership::Selected) => {
                let keys: Vec<ConfigKey> =
                    discovery.hidden.keys().filter(|k| k.namespace == name).cloned().collect();
                keys.iter().filter_map(|k| discovery.hidden.remove(k)).map(Change::Upsert).collect()
            }
            Some(Membership::Deselected) => {
                let mut changes = Vec::new();
                for kind in &self.options.kinds {
                    for config in self.store.list(*kind, Some(name)) {
                        changes.push(Change::Remove(config.key()));
                        discovery.hidden.insert(config.key(), config);
                    }
                }
                changes
            }
        };
        tracing::info!(source = %self.name, namespace = %name, objects = changes.len(), "namespace discovery membership changed");
        self.store.apply(changes);
    }

    fn wanted_namespace(&self, namespace: &str) -> bool {
        self.options.namespaces.is_empty() || self.options.namespaces.iter().any(|n| n == namespace)
    }

    fn in_revision(&self, labels: &serde_json::Value) -> bool {
        let Some(revision) = self.options.revision.as_deref().filter(|r| !r.is_empty()) else {
            return true;
        };
        match labels.get(REVISION_LABEL).and_then(serde_json::Value::as_str) {
            None => true,
            Some(value) => value == revision,
        }
    }

    /// What an object from the watch means for the store: `Some(config)` to hold, `None` to not hold
    /// (filtered out), or an error (invalid: keep what is there).
    fn convert(
        &self,
        schema: &Schema,
        version: &str,
        object: &DynamicObject,
    ) -> (ConfigKey, Result<Option<Config>, Vec<Finding>>) {
        let key = ConfigKey {
            kind: schema.kind,
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: object.metadata.name.clone().unwrap_or_default(),
        };
        let mut value = serde_json::to_value(object).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            // List items may come without type fields.
            map.entry("apiVersion").or_insert_with(|| format!("{}/{version}", schema.group).into());
            map.entry("kind").or_insert_with(|| schema.kind.as_str().into());
        }
        if !self.wanted_namespace(&key.namespace) || !self.in_revision(&value["metadata"]["labels"]) {
            return (key, Ok(None));
        }
        let result = to_config(&value, &self.options.parse).map(Some);
        (key, result)
    }

    /// Records an invalid object and warns once per resource version.
    fn reject(&self, key: &ConfigKey, resource_version: &str, errors: Vec<Finding>) {
        let kept_previous = self.store.get(key.kind, &key.namespace, &key.name).is_some();
        let mut state = self.state();
        if state.rejected.get(key).is_some_and(|r| r.resource_version == resource_version) {
            return;
        }
        for e in &errors {
            tracing::warn!(
                source = %self.name,
                object = %key,
                field = %e.path,
                "skipping invalid {} {}/{}: {}{}{}{}",
                key.kind,
                key.namespace,
                key.name,
                e.path,
                if e.path.is_empty() { "" } else { ": " },
                e.message,
                if kept_previous { "; its last valid version stays in force" } else { "" },
            );
        }
        metrics::counter!("meshpilot_config_kube_invalid_objects", "kind" => key.kind.as_str()).increment(1);
        state.rejected.insert(
            key.clone(),
            Rejected {
                key: key.clone(),
                resource_version: resource_version.to_string(),
                errors,
                kept_previous,
            },
        );
    }

    fn accept(&self, key: &ConfigKey) {
        let mut state = self.state();
        if state.rejected.remove(key).is_some() {
            tracing::info!(source = %self.name, object = %key, "object is valid again");
        }
    }

    fn apply_object(&self, schema: &Schema, version: &str, object: &DynamicObject) {
        let (key, result) = self.convert(schema, version, object);
        let mut discovery = self.discovery();
        match result {
            Ok(Some(config)) => {
                self.accept(&key);
                let change = self.hold(&mut discovery, config);
                self.store.apply([change]);
            }
            Ok(None) => {
                self.accept(&key);
                discovery.hidden.remove(&key);
                self.store.apply([Change::Remove(key)]);
            }
            Err(errors) => {
                let rv = object.metadata.resource_version.clone().unwrap_or_default();
                self.reject(&key, &rv, errors);
            }
        }
    }

    fn delete_object(&self, kind: Kind, object: &DynamicObject) {
        let key = ConfigKey {
            kind,
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: object.metadata.name.clone().unwrap_or_default(),
        };
        self.state().rejected.remove(&key);
        let mut discovery = self.discovery();
        discovery.hidden.remove(&key);
        self.store.apply([Change::Remove(key)]);
    }

    /// A (re)list finished: make the store's objects of `kind` exactly the listed ones. Objects that
    /// still exist and did not change raise nothing; invalid listed objects keep their last valid
    /// version.
    fn relisted(&self, schema: &Schema, version: &str, listed: Vec<DynamicObject>) {
        let kind = schema.kind;
        let mut keep: HashSet<ConfigKey> = HashSet::new();
        let mut changes = Vec::new();
        let mut discovery = self.discovery();
        discovery.hidden.retain(|k, _| k.kind != kind);
        for object in &listed {
            let (key, result) = self.convert(schema, version, object);
            match result {
                Ok(Some(config)) => {
                    self.accept(&key);
                    let change = self.hold(&mut discovery, config);
                    if matches!(change, Change::Upsert(_)) {
                        keep.insert(key);
                        changes.push(change);
                    }
                }
                Ok(None) => self.accept(&key),
                Err(errors) => {
                    let rv = object.metadata.resource_version.clone().unwrap_or_default();
                    self.reject(&key, &rv, errors);
                    keep.insert(key);
                }
            }
        }
        for config in self.store.list(kind, None) {
            let key = config.key();
            if !keep.contains(&key) {
                changes.push(Change::Remove(key));
            }
        }
        {
            let mut state = self.state();
            state.rejected.retain(|k, _| k.kind != kind || keep.contains(k));
        }
        let changed = self.store.apply(changes);
        drop(discovery);
        tracing::debug!(source = %self.name, %kind, objects = listed.len(), changed, "list done");
    }
}

/// Exponential backoff for watch retries: `initial`, doubling, capped at `max`; reset after a success.
pub(crate) struct WatchBackoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let current = self.next;
        self.next = (self.next * 2).min(self.max);
        Some(current)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = self.initial;
    }
}

fn backoff(options: &KubeSourceOptions) -> WatchBackoff {
    watch_backoff(options.backoff)
}

/// A [`WatchBackoff`] from `(initial, max)`.
pub(crate) fn watch_backoff((initial, max): (Duration, Duration)) -> WatchBackoff {
    WatchBackoff { initial, max, next: initial }
}

/// The served version to watch a kind at: its current version when served, else the first served alias.
fn served_version(schema: &Schema, crd: &CustomResourceDefinition) -> Option<String> {
    let served: Vec<&str> = crd.spec.versions.iter().filter(|v| v.served).map(|v| v.name.as_str()).collect();
    if served.contains(&schema.version) {
        return Some(schema.version.to_string());
    }
    schema.version_aliases.iter().find(|a| served.contains(a)).map(|a| (*a).to_string())
}

fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
}

impl KubeSource {
    fn schema_of(&self, crd: &CustomResourceDefinition) -> Option<&'static Schema> {
        let name = crd.metadata.name.as_deref()?;
        self.inner
            .options
            .kinds
            .iter()
            .map(Kind::schema)
            .find(|s| crd_name(s) == name && s.group == crd.spec.group)
    }

    /// A CRD was listed or changed: start (or restart at another version) its kind's watch.
    fn crd_applied(&self, client: &Client, crd: &CustomResourceDefinition) {
        let Some(schema) = self.schema_of(crd) else { return };
        if crd.metadata.deletion_timestamp.is_some() || !established(crd) {
            return;
        }
        let Some(version) = served_version(schema, crd) else {
            tracing::warn!(
                source = %self.inner.name,
                crd = %crd_name(schema),
                "CRD serves none of the versions meshpilot reads ({}{}); kind not watched",
                schema.version,
                schema.version_aliases.iter().map(|a| format!(", {a}")).collect::<String>(),
            );
            return;
        };
        let mut state = self.inner.state();
        if let Some(watch) = state.watches.get(&schema.kind) {
            if watch.version == version {
                return;
            }
            watch.task.abort();
        }
        tracing::info!(source = %self.inner.name, kind = %schema.kind, %version, "watching");
        let task = tokio::spawn(self.clone().watch_kind(client.clone(), schema, version.clone()));
        state.watches.insert(schema.kind, Watch { version, listed: false, task });
    }

    /// A CRD went away: stop its kind's watch and delete the kind's objects.
    fn crd_removed(&self, kind: Kind) {
        let removed = self.inner.state().watches.remove(&kind);
        if let Some(watch) = removed {
            watch.task.abort();
            tracing::info!(source = %self.inner.name, %kind, "CRD removed; its objects are deleted");
        }
        let changes: Vec<Change> =
            self.inner.store.list(kind, None).iter().map(|c| Change::Remove(c.key())).collect();
        self.inner.store.apply(changes);
        self.inner.discovery().hidden.retain(|k, _| k.kind != kind);
        self.inner.state().rejected.retain(|k, _| k.kind != kind);
    }

    async fn watch_kind(self, client: Client, schema: &'static Schema, version: String) {
        let api: Api<DynamicObject> = Api::all_with(client, &api_resource(schema, &version));
        let mut stream =
            watcher(api, watcher::Config::default()).backoff(backoff(&self.inner.options)).boxed();
        let mut buffer: Option<Vec<DynamicObject>> = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init) => buffer = Some(Vec::new()),
                Ok(watcher::Event::InitApply(object)) => buffer.get_or_insert_with(Vec::new).push(object),
                Ok(watcher::Event::InitDone) => {
                    self.inner.relisted(schema, &version, buffer.take().unwrap_or_default());
                    if let Some(w) = self.inner.state().watches.get_mut(&schema.kind) {
                        w.listed = true;
                    }
                }
                Ok(watcher::Event::Apply(object)) => self.inner.apply_object(schema, &version, &object),
                Ok(watcher::Event::Delete(object)) => self.inner.delete_object(schema.kind, &object),
                Err(err) => {
                    tracing::warn!(source = %self.inner.name, kind = %schema.kind, error = %err, "watch failed; retrying with backoff");
                }
            }
        }
    }

    /// Watches Namespaces for the discovery selectors (only started when some are configured).
    async fn watch_namespaces(self, client: Client) {
        let api: Api<Namespace> = Api::all(client);
        let mut stream =
            watcher(api, watcher::Config::default()).backoff(backoff(&self.inner.options)).boxed();
        let mut listed: Option<HashSet<String>> = None;
        while let Some(event) = stream.next().await {
            let labels = |ns: &Namespace| -> model::service::Labels {
                ns.metadata.labels.clone().unwrap_or_default().into_iter().collect()
            };
            match event {
                Ok(watcher::Event::Init) => listed = Some(HashSet::new()),
                Ok(watcher::Event::InitApply(ns) | watcher::Event::Apply(ns)) => {
                    let name = ns.metadata.name.clone().unwrap_or_default();
                    if let Some(l) = listed.as_mut() {
                        l.insert(name.clone());
                    }
                    let mut discovery = self.inner.discovery();
                    self.inner.namespace_applied(&mut discovery, &name, &labels(&ns));
                }
                Ok(watcher::Event::InitDone) => {
                    let mut discovery = self.inner.discovery();
                    discovery.filter.retain(&listed.take().unwrap_or_default());
                    discovery.listed = true;
                }
                Ok(watcher::Event::Delete(ns)) => {
                    self.inner.discovery().filter.delete(ns.metadata.name.as_deref().unwrap_or_default());
                }
                Err(err) => {
                    tracing::warn!(source = %self.inner.name, error = %err, "Namespace watch failed; retrying with backoff");
                }
            }
        }
    }

    async fn watch_crds(self, client: Client) {
        let api: Api<CustomResourceDefinition> = Api::all(client.clone());
        let mut stream =
            watcher(api, watcher::Config::default()).backoff(backoff(&self.inner.options)).boxed();
        let mut listed: Option<Vec<Kind>> = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init) => listed = Some(Vec::new()),
                Ok(watcher::Event::InitApply(crd)) => {
                    if let Some(schema) = self.schema_of(&crd) {
                        listed.get_or_insert_with(Vec::new).push(schema.kind);
                    }
                    self.crd_applied(&client, &crd);
                }
                Ok(watcher::Event::InitDone) => {
                    let present = listed.take().unwrap_or_default();
                    let gone: Vec<Kind> = {
                        let state = self.inner.state();
                        state.watches.keys().filter(|k| !present.contains(k)).copied().collect()
                    };
                    for kind in gone {
                        self.crd_removed(kind);
                    }
                    self.inner.state().crds_listed = true;
                }
                Ok(watcher::Event::Apply(crd)) => self.crd_applied(&client, &crd),
                Ok(watcher::Event::Delete(crd)) => {
                    if let Some(schema) = self.schema_of(&crd) {
                        self.crd_removed(schema.kind);
                    }
                }
                Err(err) => {
                    tracing::warn!(source = %self.inner.name, error = %err, "CustomResourceDefinition watch failed; retrying with backoff");
                }
            }
        }
    }

    fn writer(&self) -> Result<&Writer, StoreError> {
        self.inner.writer.get_or_init(|| Writer::start(self.inner.config.clone())).as_ref().map_err(
            |message| StoreError::Backend { source_name: self.inner.name.clone(), message: message.clone() },
        )
    }

    fn backend(&self, err: &KubeError) -> StoreError {
        StoreError::Backend { source_name: self.inner.name.clone(), message: err.to_string() }
    }

    fn check_kind(&self, kind: Kind) -> Result<(), StoreError> {
        if self.inner.options.kinds.contains(&kind) {
            Ok(())
        } else {
            Err(StoreError::UnknownKind { kind, source_name: self.inner.name.clone() })
        }
    }

    /// The current resource version of `key` in the cluster (for conflict reports), or a typed error.
    fn current_version(&self, writer: &Writer, key: &ConfigKey) -> Result<String, StoreError> {
        let (kind, ns, name) = (key.kind, key.namespace.clone(), key.name.clone());
        let current = writer.call(move |c| Box::pin(async move { client::get(&c, kind, &ns, &name).await }));
        match current {
            Ok(Some(object)) => Ok(resource_version(&object)),
            Ok(None) => Err(StoreError::NotFound(key.clone())),
            Err(err) => Err(self.backend(&err)),
        }
    }

    fn write_error(&self, writer: &Writer, key: &ConfigKey, given: &str, err: &KubeError) -> StoreError {
        if err.is_already_exists() {
            StoreError::AlreadyExists(key.clone())
        } else if err.is_conflict() {
            let current = self.current_version(writer, key).unwrap_or_default();
            StoreError::Conflict { key: key.clone(), given: given.to_string(), current }
        } else if err.is_not_found() {
            StoreError::NotFound(key.clone())
        } else {
            self.backend(err)
        }
    }
}

fn resource_version(object: &serde_json::Value) -> String {
    object["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string()
}

type Job = Box<dyn FnOnce(&tokio::runtime::Runtime, &Client) + Send>;

/// A thread with its own runtime and client that performs the store's synchronous writes.
struct Writer {
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl Writer {
    fn start(config: kube::Config) -> Result<Writer, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the writer runtime: {e}"))?;
        let client =
            runtime.block_on(async { client::connection(config) }).map_err(|e| e.to_string())?.client;
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("meshpilot-kube-writer".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job(&runtime, &client);
                }
            })
            .map_err(|e| format!("cannot start the writer thread: {e}"))?;
        Ok(Writer { jobs: Mutex::new(tx) })
    }

    /// Runs `f` on the writer thread and waits for its result.
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(Client) -> BoxFuture<'static, Result<T, KubeError>> + Send + 'static,
    ) -> Result<T, KubeError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |runtime, client| {
            let _ = tx.send(runtime.block_on(f(client.clone())));
        });
        let sent = self.jobs.lock().unwrap_or_else(|p| p.into_inner()).send(job);
        if sent.is_err() {
            return Err(KubeError::Transport("the writer thread stopped".into()));
        }
        rx.recv().unwrap_or_else(|_| Err(KubeError::Transport("the writer thread stopped".into())))
    }
}

impl ConfigStore for KubeSource {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn schemas(&self) -> &[Kind] {
        &self.inner.options.kinds
    }

    fn writable(&self) -> bool {
        true
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Config>> {
        self.inner.store.get(kind, namespace, name)
    }

    fn list(&self, kind: Kind, namespace: Option<&str>) -> Vec<Arc<Config>> {
        self.inner.store.list(kind, namespace)
    }

    fn create(&self, config: Config) -> Result<String, StoreError> {
        let kind = config.kind();
        self.check_kind(kind)?;
        let writer = self.writer()?;
        let key = config.key();
        let mut object = to_object(&config);
        if let Some(meta) = object["metadata"].as_object_mut() {
            meta.remove("resourceVersion");
        }
        let ns = key.namespace.clone();
        let created =
            writer.call(move |c| Box::pin(async move { client::create(&c, kind, &ns, object).await }));
        created.map(|o| resource_version(&o)).map_err(|e| self.write_error(writer, &key, "", &e))
    }

    fn update(&self, config: Config) -> Result<String, StoreError> {
        let kind = config.kind();
        self.check_kind(kind)?;
        let writer = self.writer()?;
        let key = config.key();
        let given = config.meta.resource_version.clone();
        let mut object = to_object(&config);
        // The API server requires a resource version on update; an empty one means "whatever is current".
        let version = if given.is_empty() { self.current_version(writer, &key)? } else { given.clone() };
        object["metadata"]["resourceVersion"] = version.clone().into();
        let ns = key.namespace.clone();
        let updated =
            writer.call(move |c| Box::pin(async move { client::replace(&c, kind, &ns, object).await }));
        updated.map(|o| resource_version(&o)).map_err(|e| self.write_error(writer, &key, &version, &e))
    }

    fn update_status(&self, config: Config) -> Result<String, StoreError> {
        let kind = config.kind();
        self.check_kind(kind)?;
        let writer = self.writer()?;
        let key = config.key();
        let (ns, name) = (key.namespace.clone(), key.name.clone());
        let current = writer
            .call(move |c| Box::pin(async move { client::get(&c, kind, &ns, &name).await }))
            .map_err(|e| self.backend(&e))?
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        let current_version = resource_version(&current);
        let given = config.meta.resource_version.clone();
        if !given.is_empty() && given != current_version {
            return Err(StoreError::Conflict { key, given, current: current_version });
        }
        let mut object = current;
        object["status"] = config.status.unwrap_or(serde_json::Value::Null);
        let ns = key.namespace.clone();
        let updated = writer
            .call(move |c| Box::pin(async move { client::replace_status(&c, kind, &ns, object).await }));
        updated
            .map(|o| resource_version(&o))
            .map_err(|e| self.write_error(writer, &key, &current_version, &e))
    }

    fn delete(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), StoreError> {
        self.check_kind(kind)?;
        let writer = self.writer()?;
        let key = ConfigKey { kind, namespace: namespace.to_string(), name: name.to_string() };
        let given = resource_version.unwrap_or_default().to_string();
        let rv = resource_version.filter(|v| !v.is_empty()).map(str::to_string);
        let (ns, n) = (key.namespace.clone(), key.name.clone());
        let deleted = writer
            .call(move |c| Box::pin(async move { client::delete(&c, kind, &ns, &n, rv.as_deref()).await }));
        deleted.map_err(|e| self.write_error(writer, &key, &given, &e))
    }
}

impl ConfigStoreController for KubeSource {
    fn register_event_handler(&self, kind: Kind, handler: EventHandler) {
        self.inner.store.register_event_handler(kind, handler);
    }

    /// Connects, watches CRDs and the installed kinds, and runs the event queue until `shutdown`.
    fn run(&self, shutdown: Shutdown) -> RunFuture {
        let source = self.clone();
        Box::pin(async move {
            let queue = tokio::spawn(source.inner.store.run(shutdown.clone()));
            let client = match client::connection(source.inner.config.clone()) {
                Ok(connection) => connection.client,
                Err(err) => {
                    tracing::error!(source = %source.inner.name, error = %err, "cannot create the Kubernetes client");
                    let _ = queue.await;
                    return;
                }
            };
            let mut shutdown = shutdown;
            let namespaces = (!source.inner.options.discovery_selectors.is_empty())
                .then(|| tokio::spawn(source.clone().watch_namespaces(client.clone())));
            tokio::select! {
                () = source.clone().watch_crds(client) => {}
                () = shutdown.wait() => {}
            }
            if let Some(task) = namespaces {
                task.abort();
            }
            let watches: Vec<Watch> = source.inner.state().watches.drain().map(|(_, w)| w).collect();
            for watch in watches {
                watch.task.abort();
            }
            let _ = queue.await;
        })
    }

    fn has_synced(&self) -> bool {
        let inner = &self.inner;
        if inner.synced.load(Ordering::Acquire) {
            return true;
        }
        {
            let state = inner.state();
            if !state.crds_listed || !state.watches.values().all(|w| w.listed) {
                return false;
            }
        }
        if !inner.discovery().listed {
            return false;
        }
        let queue = inner.store.queue();
        let barrier = *inner.barrier.get_or_init(|| queue.mark());
        let synced = queue.passed(barrier);
        if synced {
            inner.synced.store(true, Ordering::Release);
        }
        synced
    }
}

#[cfg(test)]
mod tests {
    use model::Event;

    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_resets() {
        let mut b = WatchBackoff {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(500),
            next: Duration::from_millis(100),
        };
        let got: Vec<u128> = b.by_ref().take(5).map(|d| d.as_millis()).collect();
        assert_eq!(got, [100, 200, 400, 500, 500]);
        b.reset();
        assert_eq!(b.next(), Some(Duration::from_millis(100)));
    }

    fn object(name: &str, host: &str, rv: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv},
            "spec": {"host": host},
        }))
        .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_relist_emits_only_what_changed() {
        let source = KubeSource::new(
            kube::Config::new("https://127.0.0.1:1".parse().unwrap()),
            KubeSourceOptions::default(),
        );
        let log: Arc<Mutex<Vec<(Event, String)>>> = Arc::default();
        let l = log.clone();
        source.register_event_handler(
            Kind::DestinationRule,
            Arc::new(move |_, new: &Config, event| {
                l.lock().unwrap().push((event, new.meta.name.clone()));
                Ok(())
            }),
        );
        let (_trigger, shutdown) = model::shutdown_channel();
        tokio::spawn(source.store().run(shutdown));
        let schema = Kind::DestinationRule.schema();
        let inner = &source.inner;
        inner.relisted(schema, "v1", vec![object("a", "a", "1"), object("b", "b", "2")]);
        tokio::time::sleep(Duration::from_millis(10)).await;
        // After an API-server error: a relist where a is unchanged, b changed, c is new and one is invalid.
        inner.relisted(
            schema,
            "v1",
            vec![
                object("a", "a", "1"),
                object("b", "b2", "5"),
                object("c", "c", "6"),
                object("bad", "", "7"),
            ],
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        // The next relist misses b: only b is deleted; the invalid object stays rejected, not deleted.
        inner.relisted(
            schema,
            "v1",
            vec![object("a", "a", "1"), object("c", "c", "6"), object("bad", "", "7")],
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        let got = log.lock().unwrap().clone();
        let names = |e: Event| -> Vec<String> {
            got.iter().filter(|(ev, _)| *ev == e).map(|(_, n)| n.clone()).collect()
        };
        assert_eq!(names(Event::Add), ["a", "b", "c"]);
        assert_eq!(names(Event::Update), ["b"]);
        assert_eq!(names(Event::Delete), ["b"]);
        assert_eq!(source.rejected().iter().map(|r| r.key.name.as_str()).collect::<Vec<_>>(), ["bad"]);
    }

    #[test]
    fn revision_rule_follows_istio() {
        let source = KubeSource::new(
            kube::Config::new("https://127.0.0.1:1".parse().unwrap()),
            KubeSourceOptions { revision: Some("canary".into()), ..KubeSourceOptions::default() },
        );
        let inner = &source.inner;
        assert!(inner.in_revision(&serde_json::json!({})));
        assert!(inner.in_revision(&serde_json::json!({"istio.io/rev": "canary"})));
        assert!(!inner.in_revision(&serde_json::json!({"istio.io/rev": "stable"})));
        let all = KubeSource::new(
            kube::Config::new("https://127.0.0.1:1".parse().unwrap()),
            KubeSourceOptions::default(),
        );
        assert!(all.inner.in_revision(&serde_json::json!({"istio.io/rev": "stable"})));
    }
}
