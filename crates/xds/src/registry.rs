//! Connected proxies, their per-type sync status, and the push path into each connection.
//!
//! Every ADS stream registers itself once its node is known, under a connection id
//! `<proxy id>-<counter>` (Istio's `connectionID`), and unregisters when it ends. The registry is
//! what the DiscoveryServer pushes through and what `/debug/syncz` and `/debug/adsz` read.
//!
//! **Pushes** go into a per-connection slot holding at most one pending event: a push to a
//! connection whose slot is full is merged into it ([`PushEvent::merge`]), and the connection is
//! woken through a channel of capacity one. However fast changes arrive, each connection has at most
//! one push pending and one being processed (Istio's push queue), and memory stays bounded.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Instant, SystemTime},
};

use tokio::sync::Notify;

use crate::{
    metrics,
    source::{NodeInfo, PushEvent, Variant, Watch},
    state::{SyncState, TypeMap},
};

/// The sync status of one type on one connection (one row of `/debug/syncz`).
#[derive(Debug, Clone, PartialEq)]
pub struct TypeStatus {
    /// What the client watches: shared with the stream's SotW session (a watch of tens of thousands
    /// of names is kept once, not once per copy).
    pub watch: Arc<Watch>,
    /// Where the type is in its request/response cycle.
    pub state: SyncState,
    /// Nonce of the latest response sent (empty if none).
    pub nonce_sent: String,
    /// Version of the latest response sent.
    pub version_sent: String,
    /// Nonce of the latest ACKed response (empty if none).
    pub nonce_acked: String,
    /// Version of the latest ACKed response.
    pub version_acked: String,
    /// The last NACK's `error_detail.message`, until the next ACK.
    pub last_error: Option<String>,
    /// When the latest response was sent.
    pub last_send_time: Option<SystemTime>,
    /// Responses sent.
    pub responses: u64,
    /// Resources sent, summed over all responses.
    pub resources_sent: u64,
    /// Resources in the latest response.
    pub last_resources: usize,
    /// Bytes of resources sent (encoded messages, without framing), summed over all responses.
    pub bytes_sent: u64,
    /// NACKs received.
    pub rejects: u64,
}

impl Default for TypeStatus {
    fn default() -> Self {
        TypeStatus {
            watch: Arc::default(),
            state: SyncState::Requested,
            nonce_sent: String::new(),
            version_sent: String::new(),
            nonce_acked: String::new(),
            version_acked: String::new(),
            last_error: None,
            last_send_time: None,
            responses: 0,
            resources_sent: 0,
            last_resources: 0,
            bytes_sent: 0,
            rejects: 0,
        }
    }
}

/// A copy of one connection's state, for debug endpoints and tests. `N` is the source's node type
/// ([`crate::ResourceSource::Node`]).
#[derive(Debug)]
pub struct ConnectionSnapshot<N> {
    /// `<proxy id>-<counter>`.
    pub id: String,
    /// The proxy's identity.
    pub proxy: Arc<N>,
    /// The peer address, when the transport knows it.
    pub peer: Option<SocketAddr>,
    /// When the stream's node was accepted.
    pub connected_at: SystemTime,
    /// SotW, Delta, or REST for a polling proxy ([`crate::polling`]).
    pub protocol: Variant,
    /// Status per watched type URL.
    pub types: BTreeMap<String, TypeStatus>,
    /// A polling proxy's latest request (any type, `304` answers included); `None` for a stream.
    pub last_poll: Option<SystemTime>,
}

impl<N> Clone for ConnectionSnapshot<N> {
    fn clone(&self) -> Self {
        ConnectionSnapshot {
            id: self.id.clone(),
            proxy: Arc::clone(&self.proxy),
            peer: self.peer,
            connected_at: self.connected_at,
            protocol: self.protocol,
            types: self.types.clone(),
            last_poll: self.last_poll,
        }
    }
}

/// A push waiting for its connection.
#[derive(Debug)]
pub struct PendingPush<P> {
    /// The (merged) event.
    pub event: P,
    /// When the oldest event merged into it was enqueued (start of `pilot_proxy_convergence_time`).
    pub enqueued: Instant,
}

pub(crate) struct Entry<N, P> {
    pub(crate) id: String,
    /// Registration order (the counter in the id): pushes go out oldest connection first.
    seq: u64,
    pub(crate) proxy: Arc<N>,
    /// The client's version ([`crate::NodeInfo::version`]), for `pilot_xds{version}`.
    version: Box<str>,
    peer: Option<SocketAddr>,
    connected_at: SystemTime,
    protocol: Variant,
    pending: Mutex<Option<PendingPush<P>>>,
    /// Signalled when a push is pending; one stored wake-up at most (a `Notify` permit), like a
    /// channel of one `()` but without a channel's allocation per stream.
    pub(crate) wake: Notify,
    pub(crate) stop: Notify,
    status: Mutex<TypeMap<TypeStatus>>,
}

impl<N, P: PushEvent> Entry<N, P> {
    fn push(&self, event: P) {
        {
            let mut slot = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match slot.as_mut() {
                Some(p) => p.event.merge(event),
                None => *slot = Some(PendingPush { event, enqueued: Instant::now() }),
            }
        }
        // At most one wake-up is stored; after the connection ended nobody waits for it.
        self.wake.notify_one();
    }

    pub(crate) fn take_pending(&self) -> Option<PendingPush<P>> {
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }
}

impl<N, P> Entry<N, P> {
    pub(crate) fn update_type(&self, type_url: &str, f: impl FnOnce(&mut TypeStatus)) {
        let mut status = self.status.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(status.get_or_insert_with(type_url, TypeStatus::default));
    }

    pub(crate) fn remove_type(&self, type_url: &str) {
        self.status.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(type_url);
    }

    fn snapshot(&self) -> ConnectionSnapshot<N> {
        ConnectionSnapshot {
            id: self.id.clone(),
            proxy: Arc::clone(&self.proxy),
            peer: self.peer,
            connected_at: self.connected_at,
            protocol: self.protocol,
            types: (self.status.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            last_poll: None,
        }
    }
}

/// A handle to push to one connection (cheap to clone; stays valid but inert after the connection
/// ends).
pub struct PushHandle<N, P> {
    entry: Arc<Entry<N, P>>,
}

impl<N, P> Clone for PushHandle<N, P> {
    fn clone(&self) -> Self {
        PushHandle { entry: Arc::clone(&self.entry) }
    }
}

impl<N, P> std::fmt::Debug for PushHandle<N, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushHandle").field("connection", &self.entry.id).finish()
    }
}

impl<N, P: PushEvent> PushHandle<N, P> {
    /// Enqueues `event` (merged into the pending one, if any) and wakes the connection. Never blocks.
    pub fn push(&self, event: P) {
        self.entry.push(event);
    }

    /// The connection id.
    pub fn connection_id(&self) -> &str {
        &self.entry.id
    }

    /// The connected proxy.
    pub fn proxy(&self) -> &N {
        &self.entry.proxy
    }
}

struct Inner<N, P> {
    connections: RwLock<BTreeMap<String, Arc<Entry<N, P>>>>,
    counter: AtomicU64,
}

/// Connections per `pilot_xds{version}` label ([`version_label`]), across every registry of the
/// process (the `pilot_xds` gauge, like Istio's global tracker). Labels are never removed (a
/// Prometheus series stays once exported), so their number is what [`MAX_VERSION_LABELS`] bounds.
static BY_VERSION: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

/// Most distinct `version` label values of `pilot_xds`; later versions count under `other`.
pub const MAX_VERSION_LABELS: usize = 32;

/// Longest `version` label value, in bytes (Istio's versions are `1.28.0`, `1.29-dev`, …).
pub const MAX_VERSION_LABEL_LEN: usize = 32;

/// The `pilot_xds{version}` label of a client's `ISTIO_VERSION`: the version itself when it looks
/// like one (at most [`MAX_VERSION_LABEL_LEN`] bytes of letters, digits, `.`, `-`, `_`, `+`) and it
/// is already a label or fewer than [`MAX_VERSION_LABELS`] are; else `other`. The value comes from an
/// unauthenticated client: taken verbatim, 40 connections with 60 kB versions grew `/metrics` to
/// 2.5 MB for good.
pub fn version_label<'a>(version: &'a str, labels: &BTreeMap<String, usize>) -> &'a str {
    let well_formed = version.len() <= MAX_VERSION_LABEL_LEN
        && version.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'));
    if well_formed && (labels.contains_key(version) || labels.len() < MAX_VERSION_LABELS) {
        version
    } else {
        "other"
    }
}

fn count_version(version: &str, up: bool) {
    let mut by_version = BY_VERSION.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let label = version_label(version, &by_version).to_owned();
    let n = by_version.entry(label.clone()).or_insert(0);
    *n = if up { *n + 1 } else { n.saturating_sub(1) };
    metrics::set_clients(&label, *n);
}

/// Connections registered and unregistered so far, across every registry of the process.
static OPENED: AtomicU64 = AtomicU64::new(0);
static CLOSED: AtomicU64 = AtomicU64::new(0);

/// Totals of xDS connections opened and closed since the process started, across every registry
/// (both ADS ports): what connection churn the process went through, for the heap trim after a
/// storm (`meshpilot discovery`, docs/RELIABILITY.md "Connection storms").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionChurn {
    /// Connections registered (streams that got past their first request).
    pub opened: u64,
    /// Of those, unregistered (the stream ended).
    pub closed: u64,
}

/// The process's [`ConnectionChurn`] now.
pub fn connection_churn() -> ConnectionChurn {
    ConnectionChurn { opened: OPENED.load(Ordering::Relaxed), closed: CLOSED.load(Ordering::Relaxed) }
}

/// The connected proxies (cheap to clone; clones share the registry): `N` is the source's node type
/// ([`crate::ResourceSource::Node`]), `P` its push event.
pub struct ConnectionRegistry<N, P> {
    inner: Arc<Inner<N, P>>,
}

impl<N, P> Clone for ConnectionRegistry<N, P> {
    fn clone(&self) -> Self {
        ConnectionRegistry { inner: Arc::clone(&self.inner) }
    }
}

impl<N, P> std::fmt::Debug for ConnectionRegistry<N, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionRegistry").field("connections", &self.len()).finish()
    }
}

impl<N, P: PushEvent> Default for ConnectionRegistry<N, P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<N, P> ConnectionRegistry<N, P> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Entry<N, P>>>> {
        self.inner.connections.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How many connections are registered.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no connection is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies of every connection's state, sorted by connection id.
    pub fn snapshot(&self) -> Vec<ConnectionSnapshot<N>> {
        self.read().values().map(|e| e.snapshot()).collect()
    }

    /// A copy of one connection's state.
    pub fn connection(&self, id: &str) -> Option<ConnectionSnapshot<N>> {
        self.read().get(id).map(|e| e.snapshot())
    }

    /// Ends every connection from the server side (e.g. on shutdown, so proxies move to another
    /// instance); returns how many.
    pub fn disconnect_all(&self) -> usize {
        let all = self.read();
        for e in all.values() {
            e.stop.notify_one();
        }
        all.len()
    }

    /// Ends a connection from the server side (the client reconnects; Istio's
    /// `/debug/force_disconnect`). Returns whether it was registered.
    pub fn disconnect(&self, id: &str) -> bool {
        match self.read().get(id) {
            Some(e) => {
                e.stop.notify_one();
                true
            }
            None => false,
        }
    }
}

impl<N, P: PushEvent> ConnectionRegistry<N, P> {
    /// An empty registry.
    pub fn new() -> Self {
        ConnectionRegistry {
            inner: Arc::new(Inner { connections: RwLock::new(BTreeMap::new()), counter: AtomicU64::new(0) }),
        }
    }

    /// Pushes `event` to every connection; returns how many.
    pub fn push_all(&self, event: P) -> usize
    where
        P: Clone,
    {
        self.push_where(|_| true, event)
    }

    /// Pushes `event` to the connections whose proxy matches; returns how many.
    ///
    /// Connections are woken oldest first, and the push throttle (a fair semaphore) serves them in
    /// that order: a stream that connected recently has just been sent the current config in its
    /// first responses (in a reconnect storm, the new streams), while the long-lived ones only get
    /// the change from this push. Istio's push queue has no order (map iteration).
    pub fn push_where(&self, matches: impl FnMut(&N) -> bool, event: P) -> usize
    where
        P: Clone,
    {
        let targets = self.push_targets(matches);
        for e in &targets {
            e.push(event.clone());
        }
        targets.len()
    }

    /// The connections whose proxy matches, in push order: oldest registration first.
    fn push_targets(&self, mut matches: impl FnMut(&N) -> bool) -> Vec<Arc<Entry<N, P>>> {
        let mut targets: Vec<Arc<Entry<N, P>>> =
            self.read().values().filter(|e| matches(&e.proxy)).cloned().collect();
        targets.sort_unstable_by_key(|e| e.seq);
        targets
    }

    /// A push handle for one connection.
    pub fn handle(&self, id: &str) -> Option<PushHandle<N, P>> {
        self.read().get(id).map(|e| PushHandle { entry: Arc::clone(e) })
    }

    /// Push handles for every connection.
    pub fn handles(&self) -> Vec<PushHandle<N, P>> {
        self.read().values().map(|e| PushHandle { entry: Arc::clone(e) }).collect()
    }

    /// Registers a connection of `proxy` under `<info.id>-<counter>`.
    pub(crate) fn register(
        &self,
        proxy: Arc<N>,
        info: NodeInfo<'_>,
        peer: Option<SocketAddr>,
        protocol: Variant,
    ) -> Registration<N, P> {
        let n = self.inner.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("{}-{n}", info.id);
        let entry = Arc::new(Entry {
            id: id.clone(),
            seq: n,
            proxy,
            version: info.version.into(),
            peer,
            connected_at: SystemTime::now(),
            protocol,
            pending: Mutex::new(None),
            wake: Notify::new(),
            stop: Notify::new(),
            status: Mutex::new(TypeMap::default()),
        });
        self.inner
            .connections
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, Arc::clone(&entry));
        count_version(&entry.version, true);
        OPENED.fetch_add(1, Ordering::Relaxed);
        Registration { registry: self.clone(), entry }
    }
}

/// A registered connection; unregisters when dropped (also on panic).
pub(crate) struct Registration<N, P: PushEvent> {
    registry: ConnectionRegistry<N, P>,
    pub(crate) entry: Arc<Entry<N, P>>,
}

impl<N, P: PushEvent> Drop for Registration<N, P> {
    fn drop(&mut self) {
        let removed = self
            .registry
            .inner
            .connections
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.entry.id);
        if removed.is_some() {
            count_version(&self.entry.version, false);
            CLOSED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt as _;

    #[test]
    fn version_labels_are_bounded_in_length_characters_and_number() {
        let mut labels = BTreeMap::new();
        assert_eq!(version_label("1.28.0", &labels), "1.28.0");
        assert_eq!(version_label(&"9".repeat(60_000), &labels), "other");
        assert_eq!(version_label("1.28.0\nfake_metric 1", &labels), "other");
        assert_eq!(version_label("1.29-dev+build_7", &labels), "1.29-dev+build_7");
        for i in 0..MAX_VERSION_LABELS {
            labels.insert(format!("1.{i}.0"), 0);
        }
        assert_eq!(version_label("1.5.0", &labels), "1.5.0", "a known label stays");
        assert_eq!(version_label("2.0.0", &labels), "other", "no new label once full");
    }

    #[derive(Debug, Clone, PartialEq)]
    struct Keys(Vec<&'static str>);

    impl Extend<Keys> for Keys {
        fn extend<I: IntoIterator<Item = Keys>>(&mut self, newer: I) {
            self.0.extend(newer.into_iter().flat_map(|k| k.0));
        }
    }

    /// A node type of the registry's own: the engine holds whatever the source reads.
    #[derive(Debug)]
    struct TestNode {
        id: String,
    }

    fn register<P: PushEvent>(
        reg: &ConnectionRegistry<TestNode, P>,
        id: &str,
        protocol: Variant,
    ) -> Registration<TestNode, P> {
        let info = NodeInfo { id, namespace: "default", version: "1.30.0", node_id: id };
        reg.register(Arc::new(TestNode { id: id.to_owned() }), info, None, protocol)
    }

    #[tokio::test]
    async fn pushes_merge_into_one_pending_event() {
        let reg = ConnectionRegistry::<TestNode, Keys>::new();
        let r = register(&reg, "a.default", Variant::Sotw);
        assert_eq!(r.entry.id, "a.default-1");
        let r2 = register(&reg, "a.default", Variant::Delta);
        assert_eq!(r2.entry.id, "a.default-2", "same proxy, new connection id");
        assert_eq!(reg.push_all(Keys(vec!["vs"])), 2);
        assert_eq!(reg.push_where(|p| p.id == "a.default", Keys(vec!["dr"])), 2);
        reg.handle("a.default-1").unwrap().push(Keys(vec!["se"]));
        // One wake-up queued, one merged event pending.
        assert!(r.entry.wake.notified().now_or_never().is_some());
        assert!(r.entry.wake.notified().now_or_never().is_none());
        let p = r.entry.take_pending().unwrap();
        assert_eq!(p.event, Keys(vec!["vs", "dr", "se"]));
        assert!(r.entry.take_pending().is_none());
        drop(r);
        assert_eq!(reg.len(), 1, "dropping the registration unregisters");
        assert!(reg.handle("a.default-1").is_none());
        drop(r2);
        assert!(reg.is_empty());
    }

    #[test]
    fn pushes_go_to_the_oldest_connections_first() {
        let reg = ConnectionRegistry::<TestNode, ()>::new();
        // Registration order differs from the ids' order (the registry's map is sorted by id), and
        // the 10th connection's id sorts before the 9th's ("-10" < "-9").
        let names = ["z.ns", "m.ns", "a.ns", "q.ns", "b.ns", "y.ns", "c.ns", "x.ns", "d.ns", "e.ns"];
        let held: Vec<_> = names.iter().map(|n| register(&reg, n, Variant::Sotw)).collect();
        let order: Vec<String> = reg.push_targets(|_| true).iter().map(|e| e.id.clone()).collect();
        let registered: Vec<String> = held.iter().map(|r| r.entry.id.clone()).collect();
        assert_eq!(order, registered);
        let filtered: Vec<String> =
            reg.push_targets(|p| p.id != "m.ns").iter().map(|e| e.proxy.id.clone()).collect();
        assert_eq!(filtered[..3], ["z.ns", "a.ns", "q.ns"]);
    }

    #[test]
    fn churn_counts_registrations_and_their_ends() {
        // Process-wide counters: other tests may register meanwhile, so compare by at least.
        let before = connection_churn();
        let reg = ConnectionRegistry::<TestNode, ()>::new();
        let a = register(&reg, "churn-a.ns", Variant::Sotw);
        let b = register(&reg, "churn-b.ns", Variant::Delta);
        let opened = connection_churn();
        assert!(opened.opened >= before.opened + 2, "{before:?} → {opened:?}");
        drop((a, b));
        let closed = connection_churn();
        assert!(closed.closed >= before.closed + 2, "{before:?} → {closed:?}");
    }

    #[tokio::test]
    async fn status_and_disconnect() {
        let reg = ConnectionRegistry::<TestNode, ()>::new();
        let r = register(&reg, "b.ns", Variant::Sotw);
        r.entry.update_type("t", |s| s.nonce_sent = "n1".into());
        let snap = reg.connection("b.ns-1").unwrap();
        assert_eq!(snap.types["t"].nonce_sent, "n1");
        assert_eq!(reg.snapshot().len(), 1);
        assert!(reg.disconnect("b.ns-1"));
        assert!(!reg.disconnect("nope"));
        assert_eq!(reg.disconnect_all(), 1);
        // The stop permit is stored until the connection waits for it.
        tokio::time::timeout(std::time::Duration::from_secs(1), r.entry.stop.notified()).await.unwrap();
        r.entry.remove_type("t");
        assert!(reg.connection("b.ns-1").unwrap().types.is_empty());
    }
}
