//! Config stores: what every config source (files, Kubernetes, MCP-over-xDS, memory) offers to the
//! rest of meshpilot.
//!
//! ```text
//!   source ──► ConfigStore (get / list; create / update / delete when writable)
//!          └─► ConfigStoreController (register_event_handler per kind, run, has_synced)
//!                       │ Add / Update / Delete, in order per object
//!                       ▼
//!                   EventHandler(old, new, event) -> Result   (an Err is retried by the source)
//! ```
//!
//! Follows Istio's `model.ConfigStore` / `model.ConfigStoreController` (`pilot/pkg/model/config.go`):
//! the same operations, the same optimistic concurrency on `resourceVersion`, the same handler shape.
//! Differences: configs are handed out as [`Arc<Config>`] (a read never copies an object), handlers
//! return a `Result` so that a source can retry a failed delivery, and read-only sources say so with a
//! typed [`StoreError::ReadOnly`].

use std::{fmt, future::Future, pin::Pin, sync::Arc};

use api::Kind;
use tokio::sync::watch;

use crate::{Config, ConfigKey};

/// What happened to an object (Istio's `model.Event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// The object appeared.
    Add,
    /// The object changed.
    Update,
    /// The object went away.
    Delete,
}

impl Event {
    /// `add`, `update` or `delete`, the words Istio uses in logs and metric labels.
    pub fn as_str(&self) -> &'static str {
        match self {
            Event::Add => "add",
            Event::Update => "update",
            Event::Delete => "delete",
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a handler could not take an event; the source logs it and delivers the event again later.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// A per-kind event handler: `(old, new, event)`.
///
/// - `Add`: `old` is `None`, `new` is the object.
/// - `Update`: `old` is the object as the handler last saw it (or as it was before the first change
///   that was merged into this event), `new` is the current object.
/// - `Delete`: `old` is `None`, `new` is the object as it was last seen (as Istio passes it).
///
/// Returning `Err` asks the source to deliver the event again after a delay (merged with any later
/// change of the same object). Handlers are called from the source's worker, one at a time: keep them
/// short and never block on the source itself.
///
/// The objects are passed as the source's shared `Arc`s, so a handler that keeps an object (a
/// registry's index) holds the source's copy instead of cloning it.
pub type EventHandler =
    Arc<dyn Fn(Option<&Arc<Config>>, &Arc<Config>, Event) -> Result<(), HandlerError> + Send + Sync>;

/// A boxed future returned by [`ConfigStoreController::run`].
pub type RunFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Errors of store operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The source does not accept writes (files, an MCP mirror).
    #[error(
        "read-only source: {source_name} does not accept create/update/delete; change the config at its origin"
    )]
    ReadOnly {
        /// The source, as [`ConfigStore::name`] gives it.
        source_name: String,
    },
    /// The store does not serve this kind.
    #[error("{source_name} does not serve kind {kind}")]
    UnknownKind {
        /// The kind asked for.
        kind: Kind,
        /// The source, as [`ConfigStore::name`] gives it.
        source_name: String,
    },
    /// No object with this key.
    #[error("{0} not found")]
    NotFound(ConfigKey),
    /// `create` of an object that exists.
    #[error("{0} already exists")]
    AlreadyExists(ConfigKey),
    /// The write named a resource version that is no longer current (someone else wrote first).
    #[error(
        "conflict on {key}: resource version {given:?} is not the current {current:?}; read the object again and retry"
    )]
    Conflict {
        /// The object.
        key: ConfigKey,
        /// The resource version the write was based on.
        given: String,
        /// The store's current resource version.
        current: String,
    },
    /// The system behind the store refused or failed the operation (an API server that is unreachable,
    /// denies access, or rejects the object); `message` says which and what to do.
    #[error("{source_name}: {message}")]
    Backend {
        /// The source, as [`ConfigStore::name`] gives it.
        source_name: String,
        /// What happened, in plain words.
        message: String,
    },
}

/// A source of config objects (Istio's `model.ConfigStore`).
///
/// Reads are cheap: objects are shared [`Arc`]s. Writes use optimistic concurrency: an update or
/// delete that carries a non-empty `resource_version` fails with [`StoreError::Conflict`] unless it is
/// the current one; an empty one overwrites unconditionally (as Istio's memory store).
pub trait ConfigStore: Send + Sync {
    /// A short name for logs and errors (`file:/etc/istio/config`, `memory`).
    fn name(&self) -> &str;

    /// The kinds this store serves.
    fn schemas(&self) -> &[Kind];

    /// `true` if create/update/delete can succeed; read-only stores return [`StoreError::ReadOnly`].
    fn writable(&self) -> bool;

    /// The object `kind`/`namespace`/`name`, if present.
    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Config>>;

    /// Every object of `kind` in `namespace` (all namespaces for `None`), ordered by namespace and name.
    fn list(&self, kind: Kind, namespace: Option<&str>) -> Vec<Arc<Config>>;

    /// Where the object `kind`/`namespace`/`name` comes from, for debug output (`/debug/configz`'s
    /// `source`): `file:///PATH/TO/FILE` for a config file, `k8s://` for the cluster,
    /// `xds://HOST:PORT` for an MCP-over-xDS server. `None` when the store does not hold the object
    /// or has no such notion (a memory store: the default).
    fn source_of(&self, kind: Kind, namespace: &str, name: &str) -> Option<String> {
        let _ = (kind, namespace, name);
        None
    }

    /// Adds a new object; returns its resource version.
    ///
    /// # Errors
    /// [`StoreError::AlreadyExists`], [`StoreError::UnknownKind`], [`StoreError::ReadOnly`].
    fn create(&self, config: Config) -> Result<String, StoreError>;

    /// Replaces an object's metadata, spec and status; returns the new resource version.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Conflict`], [`StoreError::UnknownKind`],
    /// [`StoreError::ReadOnly`].
    fn update(&self, config: Config) -> Result<String, StoreError>;

    /// Replaces only an object's status (spec and metadata stay); returns the new resource version.
    ///
    /// # Errors
    /// As [`ConfigStore::update`].
    fn update_status(&self, config: Config) -> Result<String, StoreError>;

    /// Removes an object; with `resource_version`, only if it is the current one.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Conflict`], [`StoreError::UnknownKind`],
    /// [`StoreError::ReadOnly`].
    fn delete(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), StoreError>;
}

/// A store that also tells about changes (Istio's `model.ConfigStoreController`).
///
/// Register handlers before calling [`run`](ConfigStoreController::run): a handler first receives an
/// `Add` for every object present when it registers, then every later change, so registering late
/// loses nothing, but [`has_synced`](ConfigStoreController::has_synced) only waits for what was
/// queued before `run`.
pub trait ConfigStoreController: ConfigStore {
    /// Calls `handler` for every change of an object of `kind` (ignored for kinds the store does not
    /// serve).
    fn register_event_handler(&self, kind: Kind, handler: EventHandler);

    /// Runs the source (watchers, the event queue) until `shutdown` fires. The returned future owns
    /// what it needs; spawn it.
    fn run(&self, shutdown: Shutdown) -> RunFuture;

    /// `true` once the source has loaded its initial state and every event queued before `run` has
    /// been delivered once (a delivery that failed and waits for a retry counts; Istio's queue does the
    /// same, so one failing object cannot hold readiness forever).
    fn has_synced(&self) -> bool;

    /// Why the store has not synced, in plain words for `/ready` (e.g. `config source
    /// xds://127.0.0.1:15010 has not answered: connection refused`); `None` when synced or when
    /// the store has nothing to say (the default).
    fn not_synced_reason(&self) -> Option<String> {
        None
    }
}

/// Fires [`Shutdown`]; dropping it fires too.
#[derive(Debug)]
pub struct ShutdownTrigger(watch::Sender<bool>);

/// A clonable shutdown signal, handed to [`ConfigStoreController::run`] and other long-running tasks.
#[derive(Clone, Debug)]
pub struct Shutdown(watch::Receiver<bool>);

/// A new shutdown signal and its trigger.
pub fn shutdown_channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger(tx), Shutdown(rx))
}

impl ShutdownTrigger {
    /// Signals shutdown to every [`Shutdown`] clone.
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }
}

impl Shutdown {
    /// `true` once shutdown was signalled (or the trigger dropped).
    pub fn is_shutdown(&self) -> bool {
        *self.0.borrow() || self.0.has_changed().is_err()
    }

    /// Waits until shutdown is signalled (or the trigger is dropped).
    pub async fn wait(&mut self) {
        // `wait_for` returns an error once the sender is gone: that is a shutdown too.
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// Istio's `NeedsPush` rule for updates: `true` when spec, labels or annotations differ. An update that
/// changes only status, resource version or other metadata raises no event — except a ServiceEntry's
/// `status.addresses` (its auto-allocated VIPs, [`crate::autoallocate`]), which Istio's ServiceEntry
/// registry reads from every update.
pub fn needs_push(old: &Config, new: &Config) -> bool {
    old.spec != new.spec
        || old.meta.labels != new.meta.labels
        || old.meta.annotations != new.meta.annotations
        || (new.kind() == api::Kind::ServiceEntry && status_addresses(old) != status_addresses(new))
}

fn status_addresses(config: &Config) -> Option<&serde_json::Value> {
    config.status.as_ref().and_then(|s| s.get("addresses"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_fires_on_trigger_and_on_drop() {
        let (trigger, shutdown) = shutdown_channel();
        assert!(!shutdown.is_shutdown());
        trigger.trigger();
        assert!(shutdown.is_shutdown());
        let (trigger, shutdown) = shutdown_channel();
        drop(trigger);
        assert!(shutdown.is_shutdown());
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = StoreError::ReadOnly { source_name: "file:/etc/config".into() };
        assert!(e.to_string().starts_with("read-only source: file:/etc/config"));
    }
}
