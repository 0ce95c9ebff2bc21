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
//! - **Objects** are decoded one at a time ([`ListedObject`]: an object nested deeper than serde_json's
//!   128 levels is rejected alone instead of failing its kind's whole list), then go through
//!   [`config::parse::parse_json`], the same strict decoding and validation as config files. An invalid object is skipped with a `tracing` warning naming kind, namespace, name,
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
//!   backoff ([`KubeSourceOptions::backoff`]). Every watch goes through a [`Relist`]: a relist is diffed
//!   against what the watch knows, so objects that still exist raise no event (unchanged) or an
//!   Update, only objects that really went away raise Deletes.
//! - **Sync.** [`ConfigStoreController::has_synced`] turns true once the CRD list (and, with
//!   discovery selectors, the Namespace list) is done, every kind
//!   found then has finished its initial list, and the queue has delivered those objects once.
//! - **Writes** ([`ConfigStore::create`] and friends) are synchronous REST calls made on a dedicated
//!   thread with its own runtime and client, so they work from any context (and block the caller for
//!   one round trip; from async code, call them in `spawn_blocking`). Resource-version conflicts are
//!   [`StoreError::Conflict`](model::StoreError::Conflict), a missing object [`StoreError::NotFound`](model::StoreError::NotFound), other API errors
//!   [`StoreError::Backend`](model::StoreError::Backend) with a plain explanation. A write shows up in reads once its watch event
//!   arrives (as with Istio's informers).

mod store;

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, MutexGuard, OnceLock},
    time::Duration,
};

use api::{Kind, Schema};
use config::parse::{Finding, ParseOptions};
use config::{Change, MemoryStore, QueueOptions, SyncBarrier};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use model::{
    Config, ConfigKey, ConfigStore, ConfigStoreController, EventHandler, Shutdown,
    selector::DiscoverySelectors, store::RunFuture,
};
use store::Writer;
use tokio::task::JoinHandle;

use crate::{
    client::{self, api_resource, crd_name, established, served_version, to_config},
    namespaces::{Membership, NamespaceFilter},
    object::ListedObject,
    relist::{self, ObjectKey, Relist, name_key, namespaced_key},
};

/// The [`Relist`] of one kind's watch.
type KindRelist = Relist<ObjectKey, ListedObject>;

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
    sync: SyncBarrier,
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
                sync: SyncBarrier::default(),
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

    fn in_revision(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let Some(revision) = self.options.revision.as_deref().filter(|r| !r.is_empty()) else {
            return true;
        };
        match labels.and_then(|l| l.get(REVISION_LABEL)) {
            None => true,
            Some(value) => value == revision,
        }
    }

    /// What an object from the watch means for the store: `Some(config)` to hold, `None` to not hold
    /// (filtered out), or an error (invalid, or not decodable: keep what is there).
    fn convert(
        &self,
        schema: &Schema,
        version: &str,
        object: ListedObject,
    ) -> (ConfigKey, Result<Option<Config>, Vec<Finding>>) {
        let key = ConfigKey {
            kind: schema.kind,
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: object.metadata.name.clone().unwrap_or_default(),
        };
        if !self.wanted_namespace(&key.namespace) || !self.in_revision(object.metadata.labels.as_ref()) {
            return (key, Ok(None));
        }
        let mut value = match object.body {
            Ok(value) => value,
            Err(message) => return (key, Err(vec![Finding { path: String::new(), line: 0, message }])),
        };
        if let Some(map) = value.as_object_mut() {
            // List items may come without type fields.
            map.entry("apiVersion").or_insert_with(|| format!("{}/{version}", schema.group).into());
            map.entry("kind").or_insert_with(|| schema.kind.as_str().into());
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

    /// What the kind's watch reported (through its [`Relist`]), applied to the store in one batch:
    /// a new or changed object is parsed and held (or rejected: its last valid version, if any,
    /// stays), a filtered-out one removed, a deleted one forgotten everywhere.
    fn changed(&self, schema: &Schema, version: &str, changes: Vec<relist::Change<ObjectKey, ListedObject>>) {
        let kind = schema.kind;
        let count = changes.len();
        let mut discovery = self.discovery();
        let mut store_changes = Vec::new();
        for change in changes {
            match change {
                relist::Change::Added(object) | relist::Change::Updated(object) => {
                    let rv = object.metadata.resource_version.clone().unwrap_or_default();
                    let (key, result) = self.convert(schema, version, object);
                    match result {
                        Ok(Some(config)) => {
                            self.accept(&key);
                            store_changes.push(self.hold(&mut discovery, config));
                        }
                        Ok(None) => {
                            self.accept(&key);
                            discovery.hidden.remove(&key);
                            store_changes.push(Change::Remove(key));
                        }
                        Err(errors) => {
                            self.reject(&key, &rv, errors);
                        }
                    }
                }
                relist::Change::Deleted((namespace, name)) => {
                    let key = ConfigKey { kind, namespace, name };
                    self.state().rejected.remove(&key);
                    discovery.hidden.remove(&key);
                    store_changes.push(Change::Remove(key));
                }
            }
        }
        let changed = self.store.apply(store_changes);
        drop(discovery);
        tracing::debug!(source = %self.name, %kind, objects = count, changed, "watch changes applied");
    }

    /// What a kind's watch knows already, as `(key, resource version)`: the objects in the store,
    /// held aside and rejected (the latest version seen). A watch that replaces another one (the CRD
    /// changed its served version) starts from it, so its first list deletes what went away.
    fn held(&self, kind: Kind) -> Vec<(ObjectKey, String)> {
        let mut held: HashMap<ObjectKey, String> = self
            .store
            .list(kind, None)
            .iter()
            .map(|c| ((c.meta.namespace.clone(), c.meta.name.clone()), c.meta.resource_version.clone()))
            .collect();
        for (key, config) in self.discovery().hidden.iter().filter(|(k, _)| k.kind == kind) {
            held.insert((key.namespace.clone(), key.name.clone()), config.meta.resource_version.clone());
        }
        for (key, rejected) in self.state().rejected.iter().filter(|(k, _)| k.kind == kind) {
            held.insert((key.namespace.clone(), key.name.clone()), rejected.resource_version.clone());
        }
        held.into_iter().collect()
    }
}

impl KubeSource {
    fn schema_of(&self, crd: &CustomResourceDefinition) -> Option<&'static Schema> {
        let schema = self.schema_named(crd.metadata.name.as_deref()?)?;
        (schema.group == crd.spec.group).then_some(schema)
    }

    /// The served kind whose CRD has this name (`<plural>.<group>`).
    fn schema_named(&self, name: &str) -> Option<&'static Schema> {
        self.inner.options.kinds.iter().map(Kind::schema).find(|s| crd_name(s) == name)
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
        if let Some(watch) = self.inner.state().watches.get(&schema.kind) {
            if watch.version == version {
                return;
            }
            watch.task.abort();
        }
        tracing::info!(source = %self.inner.name, kind = %schema.kind, %version, "watching");
        let relist = Relist::with_known(namespaced_key, self.inner.held(schema.kind));
        let task = tokio::spawn(self.clone().watch_kind(client.clone(), schema, version.clone(), relist));
        self.inner.state().watches.insert(schema.kind, Watch { version, listed: false, task });
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

    async fn watch_kind(self, client: Client, schema: &'static Schema, version: String, relist: KindRelist) {
        let api: Api<ListedObject> = Api::all_with(client, &api_resource(schema, &version));
        let kind = schema.kind;
        relist
            .follow(
                client::watch(api, self.inner.options.backoff),
                |changes| self.inner.changed(schema, &version, changes),
                || {
                    if let Some(w) = self.inner.state().watches.get_mut(&kind) {
                        w.listed = true;
                    }
                },
                |err| {
                    tracing::warn!(source = %self.inner.name, %kind, error = %err, "watch failed; retrying with backoff");
                },
            )
            .await;
    }

    /// Watches Namespaces for the discovery selectors (only started when some are configured).
    async fn watch_namespaces(self, client: Client) {
        let api: Api<Namespace> = Api::all(client);
        let inner = &self.inner;
        Relist::new(name_key)
            .follow(
                client::watch(api, inner.options.backoff),
                |changes| {
                    for change in changes {
                        let mut discovery = inner.discovery();
                        match change {
                            relist::Change::Added(ns) | relist::Change::Updated(ns) => {
                                let name = ns.metadata.name.clone().unwrap_or_default();
                                let labels: model::service::Labels =
                                    ns.metadata.labels.unwrap_or_default().into_iter().collect();
                                inner.namespace_applied(&mut discovery, &name, &labels);
                            }
                            relist::Change::Deleted(name) => discovery.filter.delete(&name),
                        }
                    }
                },
                || inner.discovery().listed = true,
                |err| {
                    tracing::warn!(source = %inner.name, error = %err, "Namespace watch failed; retrying with backoff");
                },
            )
            .await;
    }

    async fn watch_crds(self, client: Client) {
        let api: Api<CustomResourceDefinition> = Api::all(client.clone());
        Relist::new(name_key)
            .follow(
                client::watch(api, self.inner.options.backoff),
                |changes| {
                    for change in changes {
                        match change {
                            relist::Change::Added(crd) | relist::Change::Updated(crd) => {
                                self.crd_applied(&client, &crd);
                            }
                            relist::Change::Deleted(name) => {
                                if let Some(schema) = self.schema_named(&name) {
                                    self.crd_removed(schema.kind);
                                }
                            }
                        }
                    }
                },
                || self.inner.state().crds_listed = true,
                |err| {
                    tracing::warn!(source = %self.inner.name, error = %err, "CustomResourceDefinition watch failed; retrying with backoff");
                },
            )
            .await;
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
        inner.sync.passed(inner.store.queue(), || {
            let listed = {
                let state = inner.state();
                state.crds_listed && state.watches.values().all(|w| w.listed)
            };
            listed && inner.discovery().listed
        })
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher;
    use model::Event;

    use super::*;

    fn object(name: &str, host: &str, rv: &str) -> ListedObject {
        ListedObject::from_json(
            &serde_json::json!({
                "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv},
                "spec": {"host": host},
            })
            .to_string(),
        )
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
            Arc::new(move |_, new: &Arc<Config>, event| {
                l.lock().unwrap().push((event, new.meta.name.clone()));
                Ok(())
            }),
        );
        let (_trigger, shutdown) = model::shutdown_channel();
        tokio::spawn(source.store().run(shutdown));
        let schema = Kind::DestinationRule.schema();
        let inner = &source.inner;
        let mut relist = Relist::new(namespaced_key);
        let mut relisted = |schema: &Schema, version: &str, listed: Vec<ListedObject>| {
            relist.handle(watcher::Event::Init);
            for object in listed {
                relist.handle(watcher::Event::InitApply(object));
            }
            inner.changed(schema, version, relist.handle(watcher::Event::InitDone));
        };
        relisted(schema, "v1", vec![object("a", "a", "1"), object("b", "b", "2")]);
        tokio::time::sleep(Duration::from_millis(10)).await;
        // After an API-server error: a relist where a is unchanged, b changed, c is new and one is invalid.
        relisted(
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
        relisted(schema, "v1", vec![object("a", "a", "1"), object("c", "c", "6"), object("bad", "", "7")]);
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
        let labels = |rev: &str| BTreeMap::from([(REVISION_LABEL.to_string(), rev.to_string())]);
        assert!(inner.in_revision(None));
        assert!(inner.in_revision(Some(&BTreeMap::new())));
        assert!(inner.in_revision(Some(&labels("canary"))));
        assert!(!inner.in_revision(Some(&labels("stable"))));
        let all = KubeSource::new(
            kube::Config::new("https://127.0.0.1:1".parse().unwrap()),
            KubeSourceOptions::default(),
        );
        assert!(all.inner.in_revision(Some(&labels("stable"))));
    }
}
