//! Proxies that poll the REST-JSON discovery endpoints (Envoy's `api_type: REST`) instead of holding
//! a stream: what `/debug/syncz`, `proxy-status` and the status page show of them.
//!
//! A polling proxy has no connection to register: each poll is one `POST /v3/discovery:<type>` with
//! the whole node. The registry keeps one entry per `node.id`, updated by every poll, and forgets an
//! entry [`PollingLimits::expiry`] after its last poll. It is bounded in entries and in bytes (the
//! size of the request that last refreshed each entry, which carries the node): when full, the entry
//! polled least recently goes.
//!
//! **What a poll tells about the previous answer.** Envoy's REST client
//! (`source/extensions/config_subscription/rest/http_subscription_impl.cc`) sends no nonce and no
//! `error_detail`, and it sets its request's `version_info` to a response's version only once the
//! update was accepted. So the next poll of the same subscription (type and resource names: Envoy polls
//! each RDS route configuration and each EDS cluster on its own) says what happened: the version sent
//! → accepted (shown as ACKed); another version → rejected (Envoy counts `update_rejected`) or lost on
//! the way. This is inferred, never reported by the proxy: [`apply_poll`] records it with the reason.
//! The version stands in for the nonce in [`TypeStatus`]'s `nonce_*` fields, so "sent equals acked"
//! still means in sync.

use std::{
    collections::{BTreeSet, HashMap},
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use crate::{
    registry::{ConnectionSnapshot, TypeStatus},
    source::{Variant, Watch},
    state::{SyncState, TypeMap},
};

/// The bounds of a [`PollingRegistry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollingLimits {
    /// Most proxies kept (default 10,000).
    pub max_proxies: usize,
    /// Most bytes of requests kept, summed over the entries (default 256 MiB: the node of every
    /// entry, as the requests carried it).
    pub max_bytes: usize,
    /// An entry is forgotten this long after its last poll (default 5 minutes: far above any
    /// `refresh_delay` a polling proxy uses, so a live proxy never drops out).
    pub expiry: Duration,
    /// Most subscriptions remembered per proxy (default 4,096: one per RDS route configuration and
    /// per EDS cluster it polls); over it the oldest is forgotten and its next answer not judged.
    pub max_subscriptions: usize,
}

impl Default for PollingLimits {
    fn default() -> Self {
        PollingLimits {
            max_proxies: 10_000,
            max_bytes: 256 << 20,
            expiry: Duration::from_secs(300),
            max_subscriptions: 4096,
        }
    }
}

/// How a poll was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollOutcome {
    /// `200` with a response of `version` holding `resources` resources of `bytes` encoded bytes.
    Sent {
        /// The response's `version_info`.
        version: String,
        /// How many resources.
        resources: usize,
        /// Their encoded size (protobuf, as counted for streams).
        bytes: u64,
    },
    /// `304 Not Modified`: the proxy holds the current version.
    NotModified,
    /// Answered with an error status (the message it carried): nothing sent.
    Failed(String),
}

/// One poll, as [`PollingRegistry::record`] takes it.
#[derive(Debug, Clone)]
pub struct Poll<'a> {
    /// The type polled.
    pub type_url: &'a str,
    /// The resource names of the request (empty: all of the type).
    pub names: &'a [String],
    /// The request's `version_info`: the last version the proxy accepted for this subscription.
    pub client_version: &'a str,
    /// The answer.
    pub outcome: PollOutcome,
    /// When.
    pub at: SystemTime,
}

#[derive(Debug, Clone, Default)]
struct Subscription {
    /// The version of the last `200` for it.
    version_sent: String,
    /// Whether that version was already found rejected (counted once).
    rejected: bool,
}

/// What is kept per polling proxy.
#[derive(Debug)]
pub struct PollEntry<N> {
    proxy: Arc<N>,
    peer: Option<SocketAddr>,
    first_poll: SystemTime,
    last_poll: SystemTime,
    cost: usize,
    /// The key of the request node (and caller) `proxy` was read from ([`PollingRegistry::record_keyed`]).
    node_key: Option<u64>,
    types: TypeMap<TypeStatus>,
    subscriptions: HashMap<u64, Subscription>,
    /// Insertion order of `subscriptions`, to forget the oldest.
    order: std::collections::VecDeque<u64>,
}

impl<N> PollEntry<N> {
    fn new(proxy: Arc<N>, peer: Option<SocketAddr>, at: SystemTime, cost: usize) -> Self {
        PollEntry {
            proxy,
            peer,
            first_poll: at,
            last_poll: at,
            cost,
            node_key: None,
            types: TypeMap::default(),
            subscriptions: HashMap::new(),
            order: std::collections::VecDeque::new(),
        }
    }
}

/// The subscription a poll belongs to: its type and names (Envoy sorts the names).
fn subscription_key(type_url: &str, names: &[String]) -> u64 {
    let mut hash = crate::source::fnv1a(crate::source::FNV_OFFSET, type_url.as_bytes());
    for n in names {
        hash = crate::source::fnv1a(hash, &[0]);
        hash = crate::source::fnv1a(hash, n.as_bytes());
    }
    hash
}

/// Most names kept in a type's [`Watch`] of a polling proxy (the union of the names it polled).
pub const MAX_WATCH_NAMES: usize = 4096;

/// Updates `entry` for one poll (pure: see the module doc for what a poll says about the previous
/// answer).
pub fn apply_poll<N>(entry: &mut PollEntry<N>, poll: &Poll<'_>, limits: &PollingLimits) {
    entry.last_poll = entry.last_poll.max(poll.at);
    let key = subscription_key(poll.type_url, poll.names);
    let status = entry.types.get_or_insert_with(poll.type_url, TypeStatus::default);
    if poll.names.is_empty() {
        if !status.watch.wildcard {
            status.watch = Arc::new(Watch { wildcard: true, names: status.watch.names.clone() });
        }
    } else if poll.names.iter().any(|n| !status.watch.names.contains(n))
        && status.watch.names.len() < MAX_WATCH_NAMES
    {
        let mut names: BTreeSet<String> = status.watch.names.clone();
        names.extend(poll.names.iter().take(MAX_WATCH_NAMES - names.len().min(MAX_WATCH_NAMES)).cloned());
        status.watch = Arc::new(Watch { wildcard: status.watch.wildcard, names });
    }
    let sub = entry.subscriptions.get_mut(&key);
    let mut known = false;
    if let Some(sub) = sub {
        known = true;
        if !sub.version_sent.is_empty() {
            if poll.client_version == sub.version_sent {
                status.state = SyncState::Acked;
                status.nonce_acked = sub.version_sent.clone();
                status.version_acked = sub.version_sent.clone();
                status.last_error = None;
                sub.rejected = false;
            } else if !sub.rejected {
                sub.rejected = true;
                status.state = SyncState::Rejected;
                status.rejects += 1;
                status.last_error = Some(format!(
                    "polled again with version {:?}, not {:?} sent last: the proxy rejected that response \
                     (Envoy's update_rejected counter and log say why) or never received it; a polling \
                     proxy cannot report a NACK",
                    poll.client_version, sub.version_sent
                ));
            }
        }
    }
    match &poll.outcome {
        PollOutcome::Sent { version, resources, bytes } => {
            status.nonce_sent = version.clone();
            status.version_sent = version.clone();
            status.last_send_time = Some(poll.at);
            status.responses += 1;
            status.resources_sent += *resources as u64;
            status.last_resources = *resources;
            status.bytes_sent += bytes;
            let sub = if known {
                entry.subscriptions.get_mut(&key)
            } else {
                if entry.order.len() >= limits.max_subscriptions.max(1)
                    && let Some(old) = entry.order.pop_front()
                {
                    entry.subscriptions.remove(&old);
                }
                entry.order.push_back(key);
                Some(entry.subscriptions.entry(key).or_default())
            };
            if let Some(sub) = sub {
                let same_rejected = sub.rejected && sub.version_sent == *version;
                if !same_rejected {
                    sub.rejected = false;
                    status.state = SyncState::Sent;
                }
                sub.version_sent = version.clone();
            }
        }
        PollOutcome::NotModified => {
            // The proxy holds the current version (also after a control-plane restart, when the
            // subscription is not known yet).
            status.state = SyncState::Acked;
            status.nonce_acked = poll.client_version.to_string();
            status.version_acked = poll.client_version.to_string();
            if status.version_sent.is_empty() {
                status.nonce_sent = poll.client_version.to_string();
                status.version_sent = poll.client_version.to_string();
            }
            status.last_error = None;
        }
        PollOutcome::Failed(message) => status.last_error = Some(message.clone()),
    }
}

/// The polling proxies, one entry per `node.id` (cheap to clone; clones share the registry).
pub struct PollingRegistry<N> {
    inner: Arc<Mutex<HashMap<String, PollEntry<N>>>>,
    limits: PollingLimits,
}

impl<N> Clone for PollingRegistry<N> {
    fn clone(&self) -> Self {
        PollingRegistry { inner: Arc::clone(&self.inner), limits: self.limits }
    }
}

impl<N> std::fmt::Debug for PollingRegistry<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollingRegistry").field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl<N> Default for PollingRegistry<N> {
    fn default() -> Self {
        Self::new(PollingLimits::default())
    }
}

impl<N> PollingRegistry<N> {
    /// An empty registry with `limits`.
    pub fn new(limits: PollingLimits) -> Self {
        PollingRegistry { inner: Arc::default(), limits }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PollEntry<N>>> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a poll of the proxy `node_id` (read into `proxy`), from `peer`, whose request was
    /// `cost` bytes: the entry is created or refreshed (its proxy replaced by this poll's), expired
    /// entries are dropped, and over the limits the least recently polled entries go.
    pub fn record(
        &self,
        node_id: &str,
        proxy: Arc<N>,
        peer: Option<SocketAddr>,
        cost: usize,
        poll: &Poll<'_>,
    ) {
        self.record_keyed(node_id, None, proxy, peer, cost, poll);
    }

    /// [`PollingRegistry::record`], remembering `node_key` (a hash of the request's node as sent and
    /// of the caller's identities) so that a later poll with the same key can be recorded by
    /// [`PollingRegistry::refresh`] without reading the node again. `None` forgets the entry's key.
    pub fn record_keyed(
        &self,
        node_id: &str,
        node_key: Option<u64>,
        proxy: Arc<N>,
        peer: Option<SocketAddr>,
        cost: usize,
        poll: &Poll<'_>,
    ) {
        let mut all = self.lock();
        expire(&mut all, poll.at, self.limits.expiry);
        let entry = match all.get_mut(node_id) {
            Some(e) => {
                e.proxy = proxy;
                e.peer = peer;
                e.cost = cost;
                e
            }
            None => {
                while !all.is_empty()
                    && (all.len() + 1 > self.limits.max_proxies
                        || all.values().map(|e| e.cost).sum::<usize>() + cost > self.limits.max_bytes)
                {
                    let Some(oldest) = all.iter().min_by_key(|(_, e)| e.last_poll).map(|(k, _)| k.clone())
                    else {
                        break;
                    };
                    all.remove(&oldest);
                }
                all.entry(node_id.to_string()).or_insert_with(|| PollEntry::new(proxy, peer, poll.at, cost))
            }
        };
        entry.node_key = node_key;
        apply_poll(entry, poll, &self.limits);
    }

    /// Records `poll` for the proxy `node_id` when its entry was last recorded with `node_key` (the
    /// same node bytes from the same caller): the entry keeps its proxy, the peer is updated. `false`
    /// (nothing recorded) when there is no such entry, it expired, or its key differs: the caller
    /// then reads the node and calls [`PollingRegistry::record_keyed`]. The fast path of a `304`.
    pub fn refresh(&self, node_id: &str, node_key: u64, peer: Option<SocketAddr>, poll: &Poll<'_>) -> bool {
        let mut all = self.lock();
        let Some(entry) = all.get_mut(node_id) else { return false };
        let live = poll.at.duration_since(entry.last_poll).map_or(true, |age| age <= self.limits.expiry);
        if entry.node_key != Some(node_key) || !live {
            return false;
        }
        entry.peer = peer;
        apply_poll(entry, poll, &self.limits);
        true
    }

    /// Copies of the entries polled within [`PollingLimits::expiry`] of `now`, as connections of
    /// protocol [`Variant::Rest`] with id `<node id>-rest`, sorted by id.
    pub fn snapshot(&self, now: SystemTime) -> Vec<ConnectionSnapshot<N>> {
        let mut all = self.lock();
        expire(&mut all, now, self.limits.expiry);
        let mut out: Vec<ConnectionSnapshot<N>> = all
            .iter()
            .map(|(id, e)| ConnectionSnapshot {
                id: format!("{id}-rest"),
                proxy: Arc::clone(&e.proxy),
                peer: e.peer,
                connected_at: e.first_poll,
                protocol: Variant::Rest,
                types: e.types.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                last_poll: Some(e.last_poll),
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// How many entries are kept (expired ones included until the next record or snapshot).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no entry is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn expire<N>(all: &mut HashMap<String, PollEntry<N>>, now: SystemTime, expiry: Duration) {
    all.retain(|_, e| now.duration_since(e.last_poll).map_or(true, |age| age <= expiry));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    const CDS: &str = crate::type_url::CLUSTER;
    const EDS: &str = crate::type_url::ENDPOINT;

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s)
    }

    fn poll<'a>(
        type_url: &'a str,
        names: &'a [String],
        client: &'a str,
        outcome: PollOutcome,
        t: u64,
    ) -> Poll<'a> {
        Poll { type_url, names, client_version: client, outcome, at: at(t) }
    }

    fn sent(v: &str) -> PollOutcome {
        PollOutcome::Sent { version: v.into(), resources: 2, bytes: 10 }
    }

    fn one(reg: &PollingRegistry<&'static str>, t: u64) -> ConnectionSnapshot<&'static str> {
        reg.snapshot(at(t)).pop().unwrap()
    }

    #[test]
    fn the_next_poll_says_whether_the_answer_was_accepted() {
        let reg = PollingRegistry::default();
        let p = Arc::new("proxy");
        reg.record("n", p.clone(), None, 100, &poll(CDS, &[], "", sent("v1"), 1));
        let s = one(&reg, 1);
        assert_eq!((s.id.as_str(), s.protocol, s.last_poll), ("n-rest", Variant::Rest, Some(at(1))));
        let t = &s.types[CDS];
        assert_eq!(
            (t.state, t.nonce_sent.as_str(), t.responses, t.last_resources),
            (SyncState::Sent, "v1", 1, 2)
        );
        // Polled again with v1: accepted; the answer is 304.
        reg.record("n", p.clone(), None, 100, &poll(CDS, &[], "v1", PollOutcome::NotModified, 2));
        let t = one(&reg, 2).types[CDS].clone();
        assert_eq!((t.state, t.nonce_acked.as_str()), (SyncState::Acked, "v1"));
        // v2 sent, then the proxy polls with v1 again: rejected (counted once), v2 sent again.
        reg.record("n", p.clone(), None, 100, &poll(CDS, &[], "v1", sent("v2"), 3));
        reg.record("n", p.clone(), None, 100, &poll(CDS, &[], "v1", sent("v2"), 4));
        reg.record("n", p.clone(), None, 100, &poll(CDS, &[], "v1", sent("v2"), 5));
        let t = one(&reg, 5).types[CDS].clone();
        assert_eq!((t.state, t.rejects, t.nonce_acked.as_str()), (SyncState::Rejected, 1, "v1"));
        assert!(t.last_error.unwrap().contains("cannot report a NACK"));
        // v3 is accepted.
        reg.record("n", p.clone(), None, 100, &poll(CDS, &[], "v1", sent("v3"), 6));
        assert_eq!(one(&reg, 6).types[CDS].state, SyncState::Sent);
        reg.record("n", p, None, 100, &poll(CDS, &[], "v3", PollOutcome::NotModified, 7));
        let t = one(&reg, 7).types[CDS].clone();
        assert_eq!((t.state, t.last_error), (SyncState::Acked, None));
    }

    #[test]
    fn refresh_records_only_for_the_same_node_key() {
        let reg = PollingRegistry::default();
        let p = Arc::new("proxy");
        let not_modified = |client: &'static str, t| poll(CDS, &[], client, PollOutcome::NotModified, t);
        // Unknown node: nothing recorded, the caller reads the node.
        assert!(!reg.refresh("n", 7, None, &not_modified("v1", 1)));
        assert!(reg.is_empty());
        reg.record_keyed("n", Some(7), p.clone(), None, 100, &poll(CDS, &[], "", sent("v1"), 1));
        // Another node body (or caller) under the same id: not refreshed.
        assert!(!reg.refresh("n", 8, None, &not_modified("v1", 2)));
        assert_eq!(one(&reg, 2).types[CDS].state, SyncState::Sent);
        let peer: SocketAddr = ([10, 0, 0, 1], 5000).into();
        assert!(reg.refresh("n", 7, Some(peer), &not_modified("v1", 3)));
        let s = one(&reg, 3);
        assert_eq!((s.types[CDS].state, s.last_poll, s.peer), (SyncState::Acked, Some(at(3)), Some(peer)));
        // Past the expiry the entry is not refreshed.
        assert!(!reg.refresh("n", 7, None, &not_modified("v1", 3 + 301)));
        // A poll recorded without a key disables the fast path.
        reg.record("n", p, None, 100, &poll(CDS, &[], "v1", sent("v2"), 400));
        assert!(!reg.refresh("n", 7, None, &not_modified("v2", 401)));
    }

    #[test]
    fn subscriptions_of_one_type_are_judged_apart() {
        let reg = PollingRegistry::default();
        let (a, b) = (vec!["a".to_string()], vec!["b".to_string()]);
        let p = Arc::new("proxy");
        reg.record("n", p.clone(), None, 1, &poll(EDS, &a, "", sent("v1"), 1));
        // b's first poll (version "") says nothing about a's answer.
        reg.record("n", p.clone(), None, 1, &poll(EDS, &b, "", sent("v1"), 2));
        assert_eq!(one(&reg, 2).types[EDS].state, SyncState::Sent);
        reg.record("n", p, None, 1, &poll(EDS, &a, "v1", PollOutcome::NotModified, 3));
        let t = one(&reg, 3).types[EDS].clone();
        assert_eq!(t.state, SyncState::Acked);
        assert_eq!(t.watch.names.iter().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn entries_expire_and_the_registry_is_bounded() {
        let limits = PollingLimits { max_proxies: 2, max_bytes: 1000, ..PollingLimits::default() };
        let reg = PollingRegistry::new(limits);
        let p = Arc::new("proxy");
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            reg.record(id, p.clone(), None, 10, &poll(CDS, &[], "", sent("v"), i as u64));
        }
        let ids: Vec<String> = reg.snapshot(at(3)).into_iter().map(|c| c.id).collect();
        assert_eq!(ids, ["b-rest", "c-rest"]);
        // Bytes: a 995-byte request leaves room for nothing else.
        reg.record("d", p.clone(), None, 995, &poll(CDS, &[], "", sent("v"), 4));
        assert_eq!(reg.snapshot(at(4)).len(), 1);
        // Five minutes without a poll: gone.
        assert!(reg.snapshot(at(4 + 301)).is_empty());
        assert!(reg.is_empty());
    }

    #[test]
    fn failures_are_shown_as_the_last_error() {
        let reg = PollingRegistry::default();
        reg.record("n", Arc::new("p"), None, 1, &poll(CDS, &[], "", PollOutcome::Failed("no".into()), 1));
        let t = one(&reg, 1).types[CDS].clone();
        assert_eq!((t.state, t.last_error.as_deref(), t.responses), (SyncState::Requested, Some("no"), 0));
    }
}
