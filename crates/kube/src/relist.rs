//! The list-and-watch bookkeeping of one kube-runtime watch, written once for every watch of this
//! crate (the role of client-go's reflector `Replace` into an informer's store, which Istio's
//! controllers sit on).
//!
//! ```text
//!  watcher events ──► Relist ──► Change::{Added, Updated, Deleted} ──► the consumer (index, store, …)
//!    Init                 start buffering a (re)list
//!    InitApply(o)         buffer o
//!    InitDone             diff the list against what is known:
//!                           new key → Added, other resource version → Updated, same → nothing,
//!                           known but not listed → Deleted (after the others, by key); synced
//!    Apply(o)             Added / Updated at once (nothing when the resource version is the same)
//!    Delete(o)            Deleted at once
//! ```
//!
//! - **What is known** is the resource version of every object the watch delivered and that still
//!   exists (not the objects: the consumer keeps what it needs). A watch that takes over from
//!   another one (a CRD now served at another version) starts from what the consumer holds
//!   ([`Relist::with_known`]), so its first list deletes what went away in between.
//! - **Resource versions** are compared for equality only (they are opaque in Kubernetes). An empty
//!   one never counts as unchanged.
//! - **Errors.** kube-runtime's watcher reports a failed list or watch as an error and starts over
//!   with `Init`; the consumer logs the error and does not pass it here. A list cut short by an
//!   error is dropped at the next `Init`, so only a complete list deletes anything.
//! - **Sync.** [`Relist::has_synced`] turns true at the first `InitDone` and stays true (a relist
//!   after an error does not make the watch unsynced, as with Istio's informers).
//! - [`Relist::follow`] runs a whole watch stream through it (the loop every watch task needs).

use std::{
    collections::{HashMap, HashSet},
    hash::Hash,
};

use futures::{Stream, StreamExt};
use kube::{Resource, runtime::watcher};

/// What one watch event changes for the consumer, after the relist diff.
#[derive(Clone, Debug, PartialEq)]
pub enum Change<K, T> {
    /// An object that was not known.
    Added(T),
    /// A known object with another (or an empty) resource version.
    Updated(T),
    /// An object went away: a Delete event, or a known object missing from a relist. Passed on for
    /// every Delete event, known or not (deletes are idempotent for every consumer).
    Deleted(K),
}

/// The (re)list state of one watch of objects `T` keyed by `K` (see the module documentation).
pub struct Relist<K, T> {
    key: fn(&T) -> K,
    /// Resource version of every object delivered and not deleted, by key.
    known: HashMap<K, String>,
    /// The list in progress (between `Init` and `InitDone`).
    listing: Option<Vec<T>>,
    synced: bool,
}

impl<K, T> std::fmt::Debug for Relist<K, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relist")
            .field("known", &self.known.len())
            .field("listing", &self.listing.as_ref().map(Vec::len))
            .field("synced", &self.synced)
            .finish()
    }
}

/// `(namespace, name)` of an object.
pub type ObjectKey = (String, String);

/// `(namespace, name)` of an object (the empty namespace for cluster-scoped ones).
pub fn namespaced_key<T: Resource>(object: &T) -> ObjectKey {
    let meta = object.meta();
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

/// The name of an object (for cluster-scoped kinds: Nodes, Namespaces, CRDs).
pub fn name_key<T: Resource>(object: &T) -> String {
    object.meta().name.clone().unwrap_or_default()
}

fn version<T: Resource>(object: &T) -> &str {
    object.meta().resource_version.as_deref().unwrap_or_default()
}

impl<K: Clone + Eq + Hash + Ord, T: Resource> Relist<K, T> {
    /// A watch that knows nothing yet; `key` names an object.
    pub fn new(key: fn(&T) -> K) -> Relist<K, T> {
        Relist::with_known(key, [])
    }

    /// A watch that starts from objects already held elsewhere, as `(key, resource version)`.
    pub fn with_known(key: fn(&T) -> K, known: impl IntoIterator<Item = (K, String)>) -> Relist<K, T> {
        Relist { key, known: known.into_iter().collect(), listing: None, synced: false }
    }

    /// `true` once a first list was complete.
    pub fn has_synced(&self) -> bool {
        self.synced
    }

    /// `true` when an object with this key is known (delivered and not deleted).
    pub fn contains(&self, key: &K) -> bool {
        self.known.contains_key(key)
    }

    /// The keys of the known objects, sorted.
    pub fn keys(&self) -> Vec<K> {
        let mut keys: Vec<K> = self.known.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// Takes one watch event; returns what it changes, in order (empty for `Init`, `InitApply` and
    /// unchanged objects).
    pub fn handle(&mut self, event: watcher::Event<T>) -> Vec<Change<K, T>> {
        match event {
            watcher::Event::Init => {
                self.listing = Some(Vec::new());
                Vec::new()
            }
            watcher::Event::InitApply(object) => {
                self.listing.get_or_insert_with(Vec::new).push(object);
                Vec::new()
            }
            watcher::Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                self.synced = true;
                self.relisted(listed)
            }
            watcher::Event::Apply(object) => self.applied(object).into_iter().collect(),
            watcher::Event::Delete(object) => {
                let key = (self.key)(&object);
                self.known.remove(&key);
                vec![Change::Deleted(key)]
            }
        }
    }

    /// Follows a watch `stream` until it ends: every event through [`Relist::handle`], what changed
    /// to `apply` (never empty), `synced` once after the first complete list, errors to `failed`
    /// (kube-runtime's watcher retries by itself).
    pub async fn follow<S>(
        mut self,
        mut stream: S,
        mut apply: impl FnMut(Vec<Change<K, T>>),
        synced: impl FnOnce(),
        mut failed: impl FnMut(watcher::Error),
    ) where
        S: Stream<Item = Result<watcher::Event<T>, watcher::Error>> + Unpin,
    {
        let mut synced = Some(synced);
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    let changes = self.handle(event);
                    if !changes.is_empty() {
                        apply(changes);
                    }
                    if self.synced
                        && let Some(synced) = synced.take()
                    {
                        synced();
                    }
                }
                Err(err) => failed(err),
            }
        }
    }

    /// One object delivered: `None` when it is known at the same resource version.
    fn applied(&mut self, object: T) -> Option<Change<K, T>> {
        let key = (self.key)(&object);
        let new = version(&object);
        match self.known.insert(key, new.to_string()) {
            None => Some(Change::Added(object)),
            Some(old) if new.is_empty() || old != new => Some(Change::Updated(object)),
            Some(_) => None,
        }
    }

    /// A complete list: the listed objects that are new or changed, then the known ones not listed.
    fn relisted(&mut self, listed: Vec<T>) -> Vec<Change<K, T>> {
        let keep: HashSet<K> = listed.iter().map(self.key).collect();
        let mut changes: Vec<Change<K, T>> = listed.into_iter().filter_map(|o| self.applied(o)).collect();
        let mut gone: Vec<K> = self.known.keys().filter(|k| !keep.contains(*k)).cloned().collect();
        gone.sort();
        for key in gone {
            self.known.remove(&key);
            changes.push(Change::Deleted(key));
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};
    use kube::runtime::watcher::Event;

    use super::*;

    type Key = ObjectKey;

    fn cm(ns: &str, name: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                resource_version: (!rv.is_empty()).then(|| rv.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn key(ns: &str, name: &str) -> Key {
        (ns.into(), name.into())
    }

    /// A change as (what, namespace/name, resource version) for readable assertions.
    fn show(changes: Vec<Change<Key, ConfigMap>>) -> Vec<String> {
        changes
            .into_iter()
            .map(|c| match c {
                Change::Added(o) => format!(
                    "added {}/{}@{}",
                    o.metadata.namespace.unwrap(),
                    o.metadata.name.unwrap(),
                    o.metadata.resource_version.unwrap_or_default()
                ),
                Change::Updated(o) => format!(
                    "updated {}/{}@{}",
                    o.metadata.namespace.unwrap(),
                    o.metadata.name.unwrap(),
                    o.metadata.resource_version.unwrap_or_default()
                ),
                Change::Deleted((ns, name)) => format!("deleted {ns}/{name}"),
            })
            .collect()
    }

    fn list(relist: &mut Relist<Key, ConfigMap>, objects: Vec<ConfigMap>) -> Vec<String> {
        assert!(relist.handle(Event::Init).is_empty());
        for o in objects {
            assert!(relist.handle(Event::InitApply(o)).is_empty(), "nothing before the list is complete");
        }
        show(relist.handle(Event::InitDone))
    }

    #[test]
    fn the_initial_list_is_buffered_until_done_then_added() {
        let mut r = Relist::new(namespaced_key::<ConfigMap>);
        assert!(!r.has_synced());
        assert!(r.handle(Event::Init).is_empty());
        assert!(r.handle(Event::InitApply(cm("ns", "a", "1"))).is_empty());
        assert!(r.handle(Event::InitApply(cm("ns", "b", "2"))).is_empty());
        assert!(!r.has_synced(), "not synced before InitDone");
        assert!(!r.contains(&key("ns", "a")), "a buffered object is not known yet");
        assert_eq!(show(r.handle(Event::InitDone)), ["added ns/a@1", "added ns/b@2"]);
        assert!(r.has_synced());
        assert_eq!(r.keys(), [key("ns", "a"), key("ns", "b")]);
    }

    #[test]
    fn an_empty_initial_list_syncs() {
        let mut r = Relist::new(namespaced_key::<ConfigMap>);
        assert!(list(&mut r, vec![]).is_empty());
        assert!(r.has_synced());
    }

    #[test]
    fn a_relist_raises_only_what_changed_and_deletes_only_what_vanished() {
        let mut r = Relist::new(namespaced_key::<ConfigMap>);
        list(&mut r, vec![cm("ns", "a", "1"), cm("ns", "b", "2"), cm("ns", "c", "3"), cm("other", "d", "4")]);
        // After a 410 Gone: a unchanged, b changed, c and other/d gone, e new.
        let got = list(&mut r, vec![cm("ns", "a", "1"), cm("ns", "b", "7"), cm("ns", "e", "8")]);
        assert_eq!(got, ["updated ns/b@7", "added ns/e@8", "deleted ns/c", "deleted other/d"]);
        assert_eq!(r.keys(), [key("ns", "a"), key("ns", "b"), key("ns", "e")]);
        // The same list again changes nothing.
        assert!(list(&mut r, vec![cm("ns", "a", "1"), cm("ns", "b", "7"), cm("ns", "e", "8")]).is_empty());
    }

    #[test]
    fn watch_events_after_the_list_pass_through_and_update_what_is_known() {
        let mut r = Relist::new(namespaced_key::<ConfigMap>);
        list(&mut r, vec![cm("ns", "a", "1")]);
        assert_eq!(show(r.handle(Event::Apply(cm("ns", "a", "2")))), ["updated ns/a@2"]);
        assert!(r.handle(Event::Apply(cm("ns", "a", "2"))).is_empty(), "same resource version");
        assert_eq!(show(r.handle(Event::Apply(cm("ns", "b", "3")))), ["added ns/b@3"]);
        assert_eq!(show(r.handle(Event::Delete(cm("ns", "a", "2")))), ["deleted ns/a"]);
        assert!(!r.contains(&key("ns", "a")));
        // A relist then compares with the versions the watch delivered.
        assert_eq!(list(&mut r, vec![cm("ns", "b", "3"), cm("ns", "a", "5")]), ["added ns/a@5"]);
    }

    #[test]
    fn an_empty_resource_version_never_counts_as_unchanged() {
        let mut r = Relist::new(namespaced_key::<ConfigMap>);
        list(&mut r, vec![cm("ns", "a", "")]);
        assert_eq!(list(&mut r, vec![cm("ns", "a", "")]), ["updated ns/a@"]);
        assert_eq!(show(r.handle(Event::Apply(cm("ns", "a", "")))), ["updated ns/a@"]);
    }

    #[test]
    fn a_delete_during_a_relist_applies_at_once_and_the_list_decides_the_end_state() {
        let mut r = Relist::new(namespaced_key::<ConfigMap>);
        list(&mut r, vec![cm("ns", "a", "1"), cm("ns", "b", "2")]);
        assert!(r.handle(Event::Init).is_empty());
        assert!(r.handle(Event::InitApply(cm("ns", "a", "1"))).is_empty());
        assert_eq!(show(r.handle(Event::Delete(cm("ns", "b", "2")))), ["deleted ns/b"]);
        // A delete of an object never seen is passed on too (deletes are idempotent downstream).
        assert_eq!(show(r.handle(Event::Delete(cm("ns", "z", "9")))), ["deleted ns/z"]);
        assert!(r.handle(Event::InitApply(cm("ns", "b", "2"))).is_empty());
        // b was listed (the list started before the delete): it is known again, as the list says.
        assert_eq!(show(r.handle(Event::InitDone)), ["added ns/b@2"]);
        assert_eq!(r.keys(), [key("ns", "a"), key("ns", "b")]);
    }

    #[test]
    fn a_list_cut_short_by_an_error_deletes_nothing_and_the_watch_stays_synced() {
        let mut r = Relist::new(namespaced_key::<ConfigMap>);
        list(&mut r, vec![cm("ns", "a", "1"), cm("ns", "b", "2"), cm("ns", "c", "3")]);
        // A relist fails after one page (the watcher reports the error, which is not passed here)…
        assert!(r.handle(Event::Init).is_empty());
        assert!(r.handle(Event::InitApply(cm("ns", "a", "1"))).is_empty());
        assert!(r.has_synced(), "a relist in progress does not unsync the watch");
        assert_eq!(r.keys().len(), 3, "nothing is deleted before a list completes");
        // …and the watcher starts over with Init: the partial list is dropped.
        assert_eq!(
            list(&mut r, vec![cm("ns", "b", "2"), cm("ns", "c", "4")]),
            ["updated ns/c@4", "deleted ns/a"]
        );
        assert!(r.has_synced());
    }

    #[test]
    fn a_watch_taking_over_starts_from_what_is_held() {
        let held = [(key("ns", "a"), "1".to_string()), (key("ns", "gone"), "2".to_string())];
        let mut r = Relist::with_known(namespaced_key::<ConfigMap>, held);
        assert!(!r.has_synced(), "known objects are not a list");
        assert_eq!(
            list(&mut r, vec![cm("ns", "a", "1"), cm("ns", "b", "3")]),
            ["added ns/b@3", "deleted ns/gone"]
        );
    }

    #[tokio::test]
    async fn following_a_stream_applies_changes_syncs_once_and_reports_errors() {
        let events: Vec<Result<Event<ConfigMap>, watcher::Error>> = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(cm("ns", "a", "1"))),
            Err(watcher::Error::NoResourceVersion),
            Ok(Event::Init),
            Ok(Event::InitApply(cm("ns", "a", "1"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(cm("ns", "a", "1"))),
            Ok(Event::Apply(cm("ns", "a", "2"))),
            Ok(Event::Init),
            Ok(Event::InitDone),
        ];
        let mut applied: Vec<String> = Vec::new();
        let mut syncs: Vec<usize> = Vec::new();
        let mut errors = 0;
        let synced_after = std::cell::Cell::new(0);
        Relist::new(namespaced_key::<ConfigMap>)
            .follow(
                futures::stream::iter(events),
                |changes| {
                    applied.extend(show(changes));
                    synced_after.set(applied.len());
                },
                || syncs.push(synced_after.get()),
                |_| errors += 1,
            )
            .await;
        assert_eq!(applied, ["added ns/a@1", "updated ns/a@2", "deleted ns/a"]);
        assert_eq!(syncs, [1], "synced once, after the first list was applied");
        assert_eq!(errors, 1);
    }

    #[test]
    fn cluster_scoped_objects_are_keyed_by_name() {
        let mut r: Relist<String, ConfigMap> = Relist::new(name_key::<ConfigMap>);
        assert!(r.handle(Event::Init).is_empty());
        assert!(r.handle(Event::InitApply(cm("", "n1", "1"))).is_empty());
        assert_eq!(r.handle(Event::InitDone).len(), 1);
        assert_eq!(r.keys(), ["n1"]);
        let changes = r.handle(Event::Delete(cm("", "n1", "1")));
        assert_eq!(changes, [Change::Deleted("n1".to_string())]);
    }
}
