//! The in-memory store and controller (Istio's `pilot/pkg/config/memory`).
//!
//! Used directly as a writable store (tests, later status writers), and as the sink of sources that
//! mirror another system: the feeds of a [`crate::ReadOnlySource`] (files, Kubernetes Ingresses, an
//! MCP-over-xDS server) and the Kubernetes CRD source write into a read-only [`MemoryStore`] through
//! its sink methods ([`MemoryStore::apply`], [`MemoryStore::replace_kind`]), while [`ConfigStore`]
//! writes from outside get [`StoreError::ReadOnly`].
//!
//! Every change goes through one [`Queue`] to the handlers, in the order it was applied. An update
//! whose spec, labels and annotations are unchanged raises no event (Istio's `NeedsPush`).

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc, RwLock, RwLockReadGuard, RwLockWriteGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::SystemTime,
};

use api::Kind;
use model::{
    Config, ConfigKey, ConfigStore, ConfigStoreController, EventHandler, Shutdown, StoreError,
    store::RunFuture,
};

use crate::{
    queue::{Queue, QueueOptions},
    time::rfc3339,
};

/// One change for [`MemoryStore::apply`].
#[derive(Clone, Debug)]
pub enum Change {
    /// Add or replace this object (no resource-version check).
    Upsert(Arc<Config>),
    /// Remove this object if present.
    Remove(ConfigKey),
}

type Objects = HashMap<Kind, BTreeMap<(String, String), Arc<Config>>>;

/// An in-memory [`ConfigStoreController`]. Cheap to clone (a handle).
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

struct Inner {
    name: String,
    kinds: Vec<Kind>,
    writable: bool,
    data: RwLock<Objects>,
    queue: Queue,
    next_version: AtomicU64,
}

impl MemoryStore {
    /// A writable store serving `kinds`.
    pub fn new(name: impl Into<String>, kinds: &[Kind], options: QueueOptions) -> MemoryStore {
        MemoryStore::build(name.into(), kinds, true, options)
    }

    /// A store whose [`ConfigStore`] writes fail with [`StoreError::ReadOnly`]; only its owner changes
    /// it, through [`MemoryStore::apply`] and [`MemoryStore::replace_kind`].
    pub fn read_only(name: impl Into<String>, kinds: &[Kind], options: QueueOptions) -> MemoryStore {
        MemoryStore::build(name.into(), kinds, false, options)
    }

    fn build(name: String, kinds: &[Kind], writable: bool, options: QueueOptions) -> MemoryStore {
        let data = kinds.iter().map(|k| (*k, BTreeMap::new())).collect();
        MemoryStore {
            inner: Arc::new(Inner {
                queue: Queue::new(name.clone(), options),
                name,
                kinds: kinds.to_vec(),
                writable,
                data: RwLock::new(data),
                next_version: AtomicU64::new(1),
            }),
        }
    }

    /// The event queue (length, retries; for diagnostics and tests).
    pub fn queue(&self) -> &Queue {
        &self.inner.queue
    }

    fn read(&self) -> RwLockReadGuard<'_, Objects> {
        self.inner.data.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Objects> {
        self.inner.data.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn next_version(&self) -> String {
        self.inner.next_version.fetch_add(1, Ordering::Relaxed).to_string()
    }

    fn unknown_kind(&self, kind: Kind) -> StoreError {
        StoreError::UnknownKind { kind, source_name: self.inner.name.clone() }
    }

    fn check_writable(&self) -> Result<(), StoreError> {
        if self.inner.writable {
            Ok(())
        } else {
            Err(StoreError::ReadOnly { source_name: self.inner.name.clone() })
        }
    }

    /// Applies `changes` in order, atomically with respect to readers and handler registration, and
    /// queues their events. Changes to kinds the store does not serve are ignored (returned count
    /// excludes them); an upsert of an object equal to the stored one changes nothing. Returns how
    /// many objects actually changed.
    pub fn apply(&self, changes: impl IntoIterator<Item = Change>) -> usize {
        let mut data = self.write();
        let mut changed = 0;
        for change in changes {
            match change {
                Change::Upsert(config) => {
                    let key = config.key();
                    let Some(objects) = data.get_mut(&key.kind) else {
                        tracing::debug!(store = %self.inner.name, %key, "kind not served; ignored");
                        continue;
                    };
                    let slot = (key.namespace.clone(), key.name.clone());
                    if let Some(old) = objects.get(&slot)
                        && (Arc::ptr_eq(old, &config) || **old == *config)
                    {
                        continue;
                    }
                    let before = objects.insert(slot, config.clone());
                    self.inner.queue.enqueue(&key, before, Some(config));
                    changed += 1;
                }
                Change::Remove(key) => {
                    let Some(objects) = data.get_mut(&key.kind) else { continue };
                    if let Some(before) = objects.remove(&(key.namespace.clone(), key.name.clone())) {
                        self.inner.queue.enqueue(&key, Some(before), None);
                        changed += 1;
                    }
                }
            }
        }
        changed
    }

    /// Makes the objects of `kind` exactly `configs` (state-of-the-world replacement, as an MCP
    /// response): missing ones are removed, new or changed ones upserted. Returns how many changed.
    pub fn replace_kind(&self, kind: Kind, configs: impl IntoIterator<Item = Arc<Config>>) -> usize {
        let wanted: BTreeMap<ConfigKey, Arc<Config>> =
            configs.into_iter().filter(|c| c.kind() == kind).map(|c| (c.key(), c)).collect();
        let present: Vec<ConfigKey> = self.list(kind, None).iter().map(|c| c.key()).collect();
        // `apply` takes the write lock; a concurrent `replace_kind` of the same kind could interleave
        // between the list above and the apply. Owners call this from one task, as MCP does.
        let mut changes: Vec<Change> =
            present.into_iter().filter(|k| !wanted.contains_key(k)).map(Change::Remove).collect();
        changes.extend(wanted.into_values().map(Change::Upsert));
        self.apply(changes)
    }

    /// Every object of every kind (for diffing by sources that own the store).
    pub fn snapshot(&self) -> HashMap<ConfigKey, Arc<Config>> {
        let data = self.read();
        data.values().flat_map(|objects| objects.values().map(|c| (c.key(), c.clone()))).collect()
    }

    fn write_op(
        &self,
        kind: Kind,
        op: impl FnOnce(
            &mut BTreeMap<(String, String), Arc<Config>>,
        ) -> Result<(ConfigKey, Option<Arc<Config>>, Option<Arc<Config>>), StoreError>,
    ) -> Result<Option<Arc<Config>>, StoreError> {
        self.check_writable()?;
        let mut data = self.write();
        let objects = data.get_mut(&kind).ok_or_else(|| self.unknown_kind(kind))?;
        let (key, before, after) = op(objects)?;
        self.inner.queue.enqueue(&key, before, after.clone());
        Ok(after)
    }
}

fn conflict(key: &ConfigKey, given: &str, current: &Config) -> Result<(), StoreError> {
    if given.is_empty() || given == current.meta.resource_version {
        Ok(())
    } else {
        Err(StoreError::Conflict {
            key: key.clone(),
            given: given.to_string(),
            current: current.meta.resource_version.clone(),
        })
    }
}

impl ConfigStore for MemoryStore {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn schemas(&self) -> &[Kind] {
        &self.inner.kinds
    }

    fn writable(&self) -> bool {
        self.inner.writable
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Config>> {
        let data = self.read();
        data.get(&kind)?.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    fn list(&self, kind: Kind, namespace: Option<&str>) -> Vec<Arc<Config>> {
        let data = self.read();
        let Some(objects) = data.get(&kind) else {
            return Vec::new();
        };
        match namespace {
            None => objects.values().cloned().collect(),
            Some(ns) => objects
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, c)| c.clone())
                .collect(),
        }
    }

    fn create(&self, mut config: Config) -> Result<String, StoreError> {
        if config.meta.resource_version.is_empty() {
            config.meta.resource_version = self.next_version();
        }
        if config.meta.creation_timestamp.is_none() {
            config.meta.creation_timestamp = Some(rfc3339(SystemTime::now()));
        }
        let version = config.meta.resource_version.clone();
        self.write_op(config.kind(), |objects| {
            let key = config.key();
            let slot = (key.namespace.clone(), key.name.clone());
            if objects.contains_key(&slot) {
                return Err(StoreError::AlreadyExists(key));
            }
            let config = Arc::new(config);
            objects.insert(slot, config.clone());
            Ok((key, None, Some(config)))
        })?;
        Ok(version)
    }

    fn update(&self, mut config: Config) -> Result<String, StoreError> {
        let version = self.next_version();
        self.write_op(config.kind(), |objects| {
            let key = config.key();
            let slot = (key.namespace.clone(), key.name.clone());
            let existing = objects.get(&slot).ok_or_else(|| StoreError::NotFound(key.clone()))?;
            conflict(&key, &config.meta.resource_version, existing)?;
            config.meta.resource_version = version.clone();
            if config.meta.creation_timestamp.is_none() {
                config.meta.creation_timestamp = existing.meta.creation_timestamp.clone();
            }
            if config.spec != existing.spec {
                config.meta.generation = existing.meta.generation + 1;
            }
            let config = Arc::new(config);
            let before = objects.insert(slot, config.clone());
            Ok((key, before, Some(config)))
        })?;
        Ok(version)
    }

    fn update_status(&self, config: Config) -> Result<String, StoreError> {
        let version = self.next_version();
        self.write_op(config.kind(), |objects| {
            let key = config.key();
            let slot = (key.namespace.clone(), key.name.clone());
            let existing = objects.get(&slot).ok_or_else(|| StoreError::NotFound(key.clone()))?;
            conflict(&key, &config.meta.resource_version, existing)?;
            let mut updated = Config::clone(existing);
            updated.status = config.status;
            updated.meta.resource_version = version.clone();
            let updated = Arc::new(updated);
            let before = objects.insert(slot, updated.clone());
            Ok((key, before, Some(updated)))
        })?;
        Ok(version)
    }

    fn delete(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write_op(kind, |objects| {
            let key = ConfigKey { kind, namespace: namespace.to_string(), name: name.to_string() };
            let slot = (key.namespace.clone(), key.name.clone());
            let existing = objects.get(&slot).ok_or_else(|| StoreError::NotFound(key.clone()))?;
            conflict(&key, resource_version.unwrap_or_default(), existing)?;
            let before = objects.remove(&slot);
            Ok((key, before, None))
        })?;
        Ok(())
    }
}

impl ConfigStoreController for MemoryStore {
    fn register_event_handler(&self, kind: Kind, handler: EventHandler) {
        // Hold the write lock: the handler's initial Adds and later changes cannot interleave.
        let data = self.write();
        let Some(objects) = data.get(&kind) else {
            tracing::debug!(store = %self.inner.name, %kind, "handler for a kind this store does not serve");
            return;
        };
        self.inner.queue.register(kind, handler, objects.values().cloned());
    }

    fn run(&self, shutdown: Shutdown) -> RunFuture {
        let queue = self.inner.queue.clone();
        Box::pin(async move { queue.run(shutdown).await })
    }

    fn has_synced(&self) -> bool {
        self.inner.queue.has_synced()
    }
}
