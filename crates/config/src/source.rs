//! The read-only config source: one [`ConfigStoreController`] over a [`Feed`] that mirrors another
//! system into a read-only [`MemoryStore`] (Istio's `model.ConfigStoreController` as its read-only
//! sources implement it: the `--configDir` controller, `pilot/pkg/config/kube/file` (earlier
//! `pilot/pkg/config/file`); the Ingress controller, `pilot/pkg/config/kube/ingress`; and for MCP a
//! `pilot/pkg/config/memory` controller that `pkg/adsc` fills).
//!
//! ```text
//!  feed: directory watch / Ingress watches / MCP client
//!    │ apply, replace_kind                       loaded, source_of, not_synced_reason
//!    ▼                                                             │
//!  MemoryStore (read-only) ──► Queue ──► handlers                  │
//!    ▲ get, list, register_event_handler                           ▼
//!  ReadOnlySource ◄────────────────────────────────────────────────┘ (writes → StoreError::ReadOnly)
//! ```
//!
//! What differs between sources is the [`Feed`]: how the store is filled, when its initial state is
//! loaded, and where an object comes from. [`ReadOnlySource`] does the rest once: reads from the store,
//! writes refused with [`StoreError::ReadOnly`], handlers registered on the store, `run` = the store's
//! queue and the feed, and `has_synced`.

use std::sync::Arc;

use api::Kind;
use model::{
    Config, ConfigKey, ConfigStore, ConfigStoreController, EventHandler, Shutdown, StoreError,
    store::RunFuture,
};

use crate::{memory::MemoryStore, queue::SyncBarrier};

/// What fills a [`ReadOnlySource`]: the part of a read-only source that is its own (a watched
/// directory, the cluster's Ingresses, an MCP server).
///
/// A feed owns a [`MemoryStore`] made with [`MemoryStore::read_only`] and changes it only through
/// [`MemoryStore::apply`] and [`MemoryStore::replace_kind`]; the store's name and kinds are the
/// source's.
pub trait Feed: Send + Sync + 'static {
    /// The read-only store this feed fills.
    fn store(&self) -> &MemoryStore;

    /// Where the object `key` comes from, for `/debug/configz`'s `source` ([`ConfigStore::source_of`]):
    /// `file:///abs/path`, `k8s-ingress://`, `xds://HOST:PORT`. Asked only for objects the store holds.
    fn source_of(&self, key: &ConfigKey) -> Option<String>;

    /// Runs what fills the store (a watcher, a client) until `shutdown` fires; not the store's queue,
    /// which [`ReadOnlySource`] runs. Called once.
    fn run(&self, shutdown: Shutdown) -> RunFuture;

    /// `true` once the initial state is in the store (a directory read, every watch listed, every
    /// subscribed kind answered). Once true it stays true.
    fn loaded(&self) -> bool;

    /// Why the source has not synced, for `/ready` ([`ConfigStoreController::not_synced_reason`]);
    /// asked only while it has not. `None` (the default): nothing to say.
    fn not_synced_reason(&self) -> Option<String> {
        None
    }
}

/// A read-only [`ConfigStoreController`] over a [`Feed`] (see the module documentation). Cheap to
/// clone (a handle); [`ConfigStoreController::run`] is called once per feed.
///
/// - Reads ([`ConfigStore::get`], [`ConfigStore::list`]), [`ConfigStore::name`] and
///   [`ConfigStore::schemas`] are the store's; [`ConfigStore::source_of`] is the feed's, for objects
///   the store holds.
/// - Writes fail with [`StoreError::ReadOnly`] naming the source; [`ConfigStore::writable`] is false.
/// - [`ConfigStoreController::run`] runs the store's queue (in a task of its own) and [`Feed::run`]
///   until `shutdown`.
/// - [`ConfigStoreController::has_synced`] turns true, and stays true, once the feed is
///   [`Feed::loaded`], everything queued up to then has been delivered once, and so has everything
///   queued before `run` (a delivery that failed and waits for a retry counts, as in Istio).
#[derive(Clone)]
pub struct ReadOnlySource {
    inner: Arc<Inner>,
}

struct Inner {
    feed: Box<dyn Feed>,
    store: MemoryStore,
    sync: SyncBarrier,
}

impl std::fmt::Debug for ReadOnlySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOnlySource").field("name", &self.name()).finish_non_exhaustive()
    }
}

impl ReadOnlySource {
    /// The source over `feed`. A feed loaded already (a directory read by its constructor) sets the
    /// sync mark now, so `has_synced` waits for exactly what is queued before `run`.
    pub fn new(feed: impl Feed) -> ReadOnlySource {
        let store = feed.store().clone();
        let sync = SyncBarrier::default();
        if feed.loaded() {
            sync.set(store.queue());
        }
        ReadOnlySource { inner: Arc::new(Inner { feed: Box::new(feed), store, sync }) }
    }

    /// The store the feed fills (its queue, snapshot).
    pub fn store(&self) -> &MemoryStore {
        &self.inner.store
    }

    fn read_only(&self) -> StoreError {
        StoreError::ReadOnly { source_name: self.name().to_string() }
    }
}

impl<F: Feed> From<F> for ReadOnlySource {
    fn from(feed: F) -> ReadOnlySource {
        ReadOnlySource::new(feed)
    }
}

impl ConfigStore for ReadOnlySource {
    fn name(&self) -> &str {
        self.inner.store.name()
    }

    fn schemas(&self) -> &[Kind] {
        self.inner.store.schemas()
    }

    fn writable(&self) -> bool {
        false
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Config>> {
        self.inner.store.get(kind, namespace, name)
    }

    fn list(&self, kind: Kind, namespace: Option<&str>) -> Vec<Arc<Config>> {
        self.inner.store.list(kind, namespace)
    }

    /// The feed's address of an object the store holds; `None` for others.
    fn source_of(&self, kind: Kind, namespace: &str, name: &str) -> Option<String> {
        let config = self.inner.store.get(kind, namespace, name)?;
        self.inner.feed.source_of(&config.key())
    }

    fn create(&self, _config: Config) -> Result<String, StoreError> {
        Err(self.read_only())
    }

    fn update(&self, _config: Config) -> Result<String, StoreError> {
        Err(self.read_only())
    }

    fn update_status(&self, _config: Config) -> Result<String, StoreError> {
        Err(self.read_only())
    }

    fn delete(&self, _: Kind, _: &str, _: &str, _: Option<&str>) -> Result<(), StoreError> {
        Err(self.read_only())
    }
}

impl ConfigStoreController for ReadOnlySource {
    fn register_event_handler(&self, kind: Kind, handler: EventHandler) {
        self.inner.store.register_event_handler(kind, handler);
    }

    /// Runs the store's queue and the feed until `shutdown`; returns when both have stopped.
    fn run(&self, shutdown: Shutdown) -> RunFuture {
        let queue = self.inner.store.run(shutdown.clone());
        let feed = self.inner.feed.run(shutdown);
        Box::pin(async move {
            let queue = tokio::spawn(queue);
            feed.await;
            let _ = queue.await;
        })
    }

    fn has_synced(&self) -> bool {
        let queue = self.inner.store.queue();
        self.inner.sync.passed(queue, || self.inner.feed.loaded()) && queue.has_synced()
    }

    /// The feed's reason while not synced.
    fn not_synced_reason(&self) -> Option<String> {
        if self.has_synced() { None } else { self.inner.feed.not_synced_reason() }
    }
}
