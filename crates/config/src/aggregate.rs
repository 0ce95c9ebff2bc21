//! The aggregate store: several sources seen as one (Istio's `pilot/pkg/config/aggregate`).
//!
//! ```text
//!  source 0 (highest precedence) ─┐  internal handler per kind: re-read the key from its source,
//!  source 1 ──────────────────────┼─► per key: [state in source 0, state in source 1, …]
//!  source n ──────────────────────┘            │ effective = first present, in source order
//!                                              ▼ changed? → aggregate queue ──► handlers
//! ```
//!
//! - **Precedence.** Sources are ordered; for an object (kind, namespace, name) present in several,
//!   the first source wins, reads return its copy, and a warning names the sources once when the
//!   overlap appears.
//! - **Events.** Handlers registered on the aggregate get events for the *effective* objects only:
//!   a change to a shadowed copy raises nothing; removing the winning copy turns into an Update to
//!   the next source's copy (not a Delete and an Add); adding a higher-precedence copy is an Update.
//!   The aggregate has its own [`Queue`], so handler failures are retried here, with the queue's
//!   ordering guarantees, independently of the sources.
//! - **Reads** go to the sources directly (first source that has the object).
//! - **Writes** go to the one writable source, if any (the first, with a warning if there are more);
//!   without one they fail with [`StoreError::ReadOnly`].
//! - **Run / sync.** [`ConfigStoreController::run`] runs every source and the aggregate's queue;
//!   [`ConfigStoreController::has_synced`] is true once every source has synced and the aggregate has
//!   delivered what they produced up to then.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, MutexGuard, Weak},
};

use api::Kind;
use model::{
    Config, ConfigKey, ConfigStore, ConfigStoreController, EventHandler, Shutdown, StoreError,
    store::RunFuture,
};

use crate::queue::{Queue, QueueOptions, SyncBarrier};

/// Several [`ConfigStoreController`]s as one. Cheap to clone (a handle).
#[derive(Clone)]
pub struct Aggregate {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Aggregate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregate").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

struct Inner {
    name: String,
    sources: Vec<Arc<dyn ConfigStoreController>>,
    writer: Option<usize>,
    kinds: Vec<Kind>,
    /// Per key, the state in each source (only keys present in at least one).
    view: Mutex<HashMap<ConfigKey, Vec<Option<Arc<Config>>>>>,
    queue: Queue,
    sync: SyncBarrier,
}

impl Aggregate {
    /// Joins `sources`, the first with the highest precedence, and registers with each of them.
    pub fn new(sources: Vec<Arc<dyn ConfigStoreController>>, options: QueueOptions) -> Aggregate {
        let names: Vec<&str> = sources.iter().map(|s| s.name()).collect();
        let name = format!("aggregate[{}]", names.join(", "));
        let writers: Vec<usize> = (0..sources.len()).filter(|i| sources[*i].writable()).collect();
        if writers.len() > 1 {
            tracing::warn!(
                store = %name,
                "several writable sources; writes go to {} only",
                sources[writers[0]].name(),
            );
        }
        let mut kinds = Vec::new();
        for kind in sources.iter().flat_map(|s| s.schemas().iter().copied()) {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        let inner = Arc::new(Inner {
            queue: Queue::new(name.clone(), options),
            name,
            writer: writers.first().copied(),
            kinds,
            view: Mutex::default(),
            sync: SyncBarrier::default(),
            sources,
        });
        for (index, source) in inner.sources.iter().enumerate() {
            for kind in source.schemas() {
                let weak: Weak<Inner> = Arc::downgrade(&inner);
                source.register_event_handler(
                    *kind,
                    Arc::new(move |_old: Option<&Arc<Config>>, new: &Arc<Config>, _event| {
                        if let Some(inner) = weak.upgrade() {
                            inner.source_changed(index, new.key());
                        }
                        Ok(())
                    }),
                );
            }
        }
        Aggregate { inner }
    }

    /// The aggregate's event queue (diagnostics).
    pub fn queue(&self) -> &Queue {
        &self.inner.queue
    }

    /// The sources, highest precedence first.
    pub fn sources(&self) -> &[Arc<dyn ConfigStoreController>] {
        &self.inner.sources
    }
}

impl Inner {
    fn view(&self) -> MutexGuard<'_, HashMap<ConfigKey, Vec<Option<Arc<Config>>>>> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Source `index` reported a change of `key`: take its current copy and update the effective one.
    /// Re-reading (rather than using the event's object) keeps this level-triggered and copy-free.
    fn source_changed(&self, index: usize, key: ConfigKey) {
        let current = self.sources[index].get(key.kind, &key.namespace, &key.name);
        let mut view = self.view();
        let slots = view.entry(key.clone()).or_insert_with(|| vec![None; self.sources.len()]);
        let before = slots.iter().flatten().next().cloned();
        let before_winner = slots.iter().position(Option::is_some);
        let before_count = slots.iter().flatten().count();
        slots[index] = current;
        let after = slots.iter().flatten().next().cloned();
        let after_winner = slots.iter().position(Option::is_some);
        let holders: Vec<&str> = slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| self.sources[i].name())
            .collect();
        if holders.len() > 1 && (before_count < 2 || before_winner != after_winner) {
            tracing::warn!(
                store = %self.name,
                object = %key,
                "{key} is defined in several sources ({}); using the one from {} (first source wins)",
                holders.join(", "),
                holders[0],
            );
        }
        if holders.is_empty() {
            view.remove(&key);
        }
        let same = match (&before, &after) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if !same {
            self.queue.enqueue(&key, before, after);
        }
    }
}

impl ConfigStore for Aggregate {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn schemas(&self) -> &[Kind] {
        &self.inner.kinds
    }

    fn writable(&self) -> bool {
        self.inner.writer.is_some()
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Config>> {
        self.inner
            .sources
            .iter()
            .filter(|s| s.schemas().contains(&kind))
            .find_map(|s| s.get(kind, namespace, name))
    }

    /// The source of the copy in force: asks the first source (in precedence order) holding it.
    fn source_of(&self, kind: Kind, namespace: &str, name: &str) -> Option<String> {
        let holder = self
            .inner
            .sources
            .iter()
            .filter(|s| s.schemas().contains(&kind))
            .find(|s| s.get(kind, namespace, name).is_some())?;
        holder.source_of(kind, namespace, name)
    }

    fn list(&self, kind: Kind, namespace: Option<&str>) -> Vec<Arc<Config>> {
        let mut serving = self.inner.sources.iter().filter(|s| s.schemas().contains(&kind));
        let Some(first) = serving.next() else {
            return Vec::new();
        };
        let mut rest = serving.peekable();
        if rest.peek().is_none() {
            return first.list(kind, namespace);
        }
        let mut merged: BTreeMap<(String, String), Arc<Config>> = BTreeMap::new();
        for source in std::iter::once(first).chain(rest) {
            for config in source.list(kind, namespace) {
                merged.entry((config.meta.namespace.clone(), config.meta.name.clone())).or_insert(config);
            }
        }
        merged.into_values().collect()
    }

    fn create(&self, config: Config) -> Result<String, StoreError> {
        self.writer()?.create(config)
    }

    fn update(&self, config: Config) -> Result<String, StoreError> {
        self.writer()?.update(config)
    }

    fn update_status(&self, config: Config) -> Result<String, StoreError> {
        self.writer()?.update_status(config)
    }

    fn delete(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), StoreError> {
        self.writer()?.delete(kind, namespace, name, resource_version)
    }
}

impl Aggregate {
    fn writer(&self) -> Result<&Arc<dyn ConfigStoreController>, StoreError> {
        match self.inner.writer {
            Some(i) => Ok(&self.inner.sources[i]),
            None => Err(StoreError::ReadOnly { source_name: self.inner.name.clone() }),
        }
    }
}

impl ConfigStoreController for Aggregate {
    fn register_event_handler(&self, kind: Kind, handler: EventHandler) {
        if !self.inner.kinds.contains(&kind) {
            return;
        }
        // Hold the view: the initial Adds and later changes cannot interleave.
        let view = self.inner.view();
        let existing = view
            .iter()
            .filter(|(k, _)| k.kind == kind)
            .filter_map(|(_, slots)| slots.iter().flatten().next().cloned());
        self.inner.queue.register(kind, handler, existing.collect::<Vec<_>>());
    }

    /// Runs every source and the aggregate's queue until `shutdown`.
    fn run(&self, shutdown: Shutdown) -> RunFuture {
        let mut futures: Vec<RunFuture> =
            self.inner.sources.iter().map(|s| s.run(shutdown.clone())).collect();
        let queue = self.inner.queue.clone();
        futures.push(Box::pin(async move { queue.run(shutdown).await }));
        Box::pin(async move {
            let mut set = tokio::task::JoinSet::new();
            for future in futures {
                set.spawn(future);
            }
            while set.join_next().await.is_some() {}
        })
    }

    /// The reasons of the sources that have not synced (`config source NAME has not synced` for one
    /// with no reason of its own), joined with `; `.
    fn not_synced_reason(&self) -> Option<String> {
        let reasons: Vec<String> = self
            .inner
            .sources
            .iter()
            .filter(|s| !s.has_synced())
            .map(|s| {
                s.not_synced_reason().unwrap_or_else(|| format!("config source {} has not synced", s.name()))
            })
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }

    fn has_synced(&self) -> bool {
        let inner = &self.inner;
        // Everything the sources delivered up to their sync is queued before the mark.
        inner.sync.passed(&inner.queue, || inner.sources.iter().all(|s| s.has_synced()))
    }
}
