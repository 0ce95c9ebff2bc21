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

#[cfg(test)]
mod tests {
    use std::sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    };

    use api::Spec;
    use model::{ConfigMeta, shutdown_channel};

    use super::*;
    use crate::{memory::Change, queue::QueueOptions};

    /// A feed whose initial state is loaded when the test says so.
    struct TestFeed {
        store: MemoryStore,
        loaded: Arc<AtomicBool>,
    }

    impl Feed for TestFeed {
        fn store(&self) -> &MemoryStore {
            &self.store
        }
        fn source_of(&self, key: &ConfigKey) -> Option<String> {
            Some(format!("test://{}", key.name))
        }
        fn run(&self, mut shutdown: Shutdown) -> RunFuture {
            Box::pin(async move { shutdown.wait().await })
        }
        fn loaded(&self) -> bool {
            self.loaded.load(Ordering::Acquire)
        }
        fn not_synced_reason(&self) -> Option<String> {
            Some("still listing".into())
        }
    }

    fn gateway(name: &str) -> Arc<Config> {
        Arc::new(Config {
            meta: ConfigMeta { name: name.into(), namespace: "default".into(), ..ConfigMeta::default() },
            spec: Spec::Gateway(Box::default()),
            status: None,
        })
    }

    fn source(loaded: bool) -> (ReadOnlySource, MemoryStore, Arc<AtomicBool>) {
        let store = MemoryStore::read_only("test://", &[Kind::Gateway], QueueOptions::default());
        let flag = Arc::new(AtomicBool::new(loaded));
        let source = ReadOnlySource::new(TestFeed { store: store.clone(), loaded: flag.clone() });
        (source, store, flag)
    }

    #[test]
    fn reads_are_the_stores_and_writes_are_refused_naming_the_source() {
        let (source, store, _) = source(true);
        store.apply([Change::Upsert(gateway("a"))]);
        assert!(!source.writable());
        assert_eq!(source.name(), "test://");
        assert_eq!(source.schemas(), [Kind::Gateway]);
        assert_eq!(
            source.get(Kind::Gateway, "default", "a").map(|c| c.meta.name.clone()).as_deref(),
            Some("a")
        );
        assert_eq!(source.list(Kind::Gateway, None).len(), 1);
        assert_eq!(source.source_of(Kind::Gateway, "default", "a").as_deref(), Some("test://a"));
        assert_eq!(source.source_of(Kind::Gateway, "default", "absent"), None, "only for objects held");
        let refused = |r: Result<String, StoreError>| {
            assert!(
                matches!(r, Err(StoreError::ReadOnly { ref source_name }) if source_name == "test://"),
                "{r:?}"
            );
        };
        refused(source.create((*gateway("b")).clone()));
        refused(source.update((*gateway("a")).clone()));
        refused(source.update_status((*gateway("a")).clone()));
        assert!(matches!(
            source.delete(Kind::Gateway, "default", "a", None),
            Err(StoreError::ReadOnly { .. })
        ));
        assert!(source.get(Kind::Gateway, "default", "a").is_some(), "the object stays");
    }

    #[tokio::test]
    async fn synced_once_loaded_and_delivered_then_stays_synced() {
        let (source, store, loaded) = source(false);
        let delivered = Arc::new(Mutex::new(Vec::new()));
        let log = delivered.clone();
        source.register_event_handler(
            Kind::Gateway,
            Arc::new(move |_, new: &Arc<Config>, _| {
                log.lock().unwrap().push(new.meta.name.clone());
                Ok(())
            }),
        );
        let (trigger, shutdown) = shutdown_channel();
        let task = tokio::spawn(source.run(shutdown));
        store.apply([Change::Upsert(gateway("a"))]);
        assert!(!source.has_synced(), "the feed has not loaded");
        assert_eq!(source.not_synced_reason().as_deref(), Some("still listing"));
        loaded.store(true, Ordering::Release);
        while !source.has_synced() {
            tokio::task::yield_now().await;
        }
        assert_eq!(*delivered.lock().unwrap(), ["a"], "everything queued before loading was delivered first");
        assert_eq!(source.not_synced_reason(), None);
        loaded.store(false, Ordering::Release);
        assert!(source.has_synced(), "synced stays true");
        drop(trigger);
        task.await.unwrap();
    }
}
