//! Incremental (Delta) ADS: the per-type state machine, pure (no I/O, no clock).
//!
//! A [`DeltaSession`] per stream holds a [`DeltaType`] per type URL. Requests go through
//! [`DeltaSession::on_request`]; generated resources become a [`Plan`] (what to send, what to
//! remove) with [`DeltaSession::plan`]; a sent plan is recorded with [`DeltaSession::on_sent`].
//!
//! **Subscriptions** follow the xDS spec: `resource_names_subscribe`/`_unsubscribe` change the set;
//! `*` subscribes to the wildcard explicitly; a wildcard-capable type (Listener, Cluster) whose
//! first request names nothing is a *legacy* wildcard, which ends as soon as the client names a
//! resource without `*`.
//!
//! **Versions are committed only on ACK.** What the client holds ([`DeltaType::acked`]) changes
//! only when the ACK for a response arrives, matched by nonce; responses not yet answered wait in
//! an in-flight list (bounded). After a NACK the client still runs the old versions, so nothing of
//! the rejected response is committed, and its resource versions are remembered as rejected: they
//! are not sent again on this stream unless the client asks anew (a new version is sent normally).
//! On reconnect, `initial_resource_versions` seeds what the client holds, so unchanged resources
//! are not re-sent.
//!
//! **What to send** for a generated set: resources whose version differs from what the client will
//! hold once in-flight responses are applied (plus the forced ones, see
//! [`Trigger::Dependency`](crate::Trigger::Dependency) and [`DeltaSession::plan_forcing`]), and as removals the names the client holds
//! that the complete set no longer contains.
//!
//! ```text
//!   request ──► on_request ──► Outcome { verdict: Initial | Ack | Nack | Stale | Subscription,
//!                                        respond: Option<Respond { watch, full }> }
//!   generated ─► plan ──► Plan { resources, removed } ──send(nonce)──► on_sent (in flight)
//!   ACK(nonce) ─► commit the in-flight plan into `acked`;  NACK(nonce) ─► drop it, remember as rejected
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;

use crate::{
    source::{Generated, Resource, Watch},
    state::{Rejection, Respond, SyncState, TypeMap},
    type_url,
};

/// How many unanswered responses per type are remembered; older ones are forgotten (their
/// resources are then simply re-sent when next generated).
pub const MAX_IN_FLIGHT: usize = 32;

/// The protocol-relevant part of a `DeltaDiscoveryRequest`.
#[derive(Debug, Clone, Copy)]
pub struct DeltaRequest<'a> {
    /// `type_url`.
    pub type_url: &'a str,
    /// `response_nonce` (empty for spontaneous subscription changes and the first request).
    pub response_nonce: &'a str,
    /// `resource_names_subscribe`.
    pub subscribe: &'a [String],
    /// `resource_names_unsubscribe`.
    pub unsubscribe: &'a [String],
    /// `initial_resource_versions` (first request of a reconnecting client).
    pub initial_resource_versions: &'a HashMap<String, String>,
    /// `error_detail.message` when the request is a NACK.
    pub error: Option<&'a str>,
}

impl<'a> DeltaRequest<'a> {
    /// Views a protobuf request.
    pub fn from_proto(req: &'a DeltaDiscoveryRequest) -> Self {
        DeltaRequest {
            type_url: &req.type_url,
            response_nonce: &req.response_nonce,
            subscribe: &req.resource_names_subscribe,
            unsubscribe: &req.resource_names_unsubscribe,
            initial_resource_versions: &req.initial_resource_versions,
            error: req.error_detail.as_ref().map(|e| e.message.as_str()),
        }
    }
}

/// What a request was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// First request for the type on this stream.
    Initial {
        /// How many resources the client says it already holds (`initial_resource_versions`).
        known: usize,
    },
    /// The client accepted the response with this nonce; its resources are committed.
    Ack {
        /// The nonce.
        nonce: String,
    },
    /// The client rejected the response with this nonce.
    Nack {
        /// The nonce.
        nonce: String,
        /// `error_detail.message`.
        message: String,
        /// Whether it was the latest response sent for the type.
        current: bool,
    },
    /// The nonce is not one of the responses awaiting an answer: ignored (subscription changes in
    /// the same request still apply).
    Stale {
        /// The nonce.
        nonce: String,
    },
    /// No nonce: a spontaneous subscription change.
    Subscription,
}

/// The result of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What the request was.
    pub verdict: Verdict,
    /// Whether (and what) to answer.
    pub respond: Option<Respond>,
}

/// What to send for one generated set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Resources to send (new or changed for the client).
    pub resources: Vec<Resource>,
    /// Names the client must delete (or that do not exist, for names it just subscribed to).
    pub removed: Vec<String>,
}

impl Plan {
    /// Whether there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.removed.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct InFlight {
    nonce: String,
    version: String,
    updated: Vec<(String, String)>,
    removed: Vec<String>,
}

/// One type's state on a Delta stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaType {
    /// What the client is subscribed to.
    pub subscription: Watch,
    /// Whether the wildcard is the legacy one (first request named nothing).
    legacy_wildcard: bool,
    /// name → version the client holds: committed on ACK, seeded by `initial_resource_versions`.
    pub acked: BTreeMap<String, String>,
    in_flight: VecDeque<InFlight>,
    /// name → version the client rejected on this stream.
    rejected: BTreeMap<String, String>,
    /// Where the type is in its request/response cycle.
    pub state: SyncState,
    /// The latest response sent: (nonce, system version).
    pub last_sent: Option<(String, String)>,
    /// The latest response ACKed: (nonce, system version).
    pub last_acked: Option<(String, String)>,
    /// The last NACK since the last ACK.
    pub last_error: Option<Rejection>,
}

impl DeltaType {
    fn new() -> Self {
        DeltaType {
            subscription: Watch::default(),
            legacy_wildcard: false,
            acked: BTreeMap::new(),
            in_flight: VecDeque::new(),
            rejected: BTreeMap::new(),
            state: SyncState::Requested,
            last_sent: None,
            last_acked: None,
            last_error: None,
        }
    }

    /// What the client will hold once every in-flight response is ACKed.
    fn projected(&self) -> BTreeMap<&str, &str> {
        let mut view: BTreeMap<&str, &str> =
            self.acked.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        for f in &self.in_flight {
            for (n, v) in &f.updated {
                view.insert(n, v);
            }
            for n in &f.removed {
                view.remove(n.as_str());
            }
        }
        view
    }

    /// Whether the version of `name` is one the client rejected.
    pub fn is_rejected(&self, name: &str, version: &str) -> bool {
        self.rejected.get(name).is_some_and(|v| v == version)
    }

    /// How many responses await an ACK or NACK.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

/// The Delta state of one stream.
#[derive(Debug, Clone, Default)]
pub struct DeltaSession {
    types: TypeMap<DeltaType>,
}

impl DeltaSession {
    /// An empty session (new stream).
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one request: first the nonce (ACK, NACK or stale), then the subscription changes.
    pub fn on_request(&mut self, req: &DeltaRequest<'_>) -> Outcome {
        let first = !self.types.contains_key(req.type_url);
        let t = self.types.get_or_insert_with(req.type_url, DeltaType::new);
        let verdict = if first {
            t.acked.extend(req.initial_resource_versions.iter().map(|(k, v)| (k.clone(), v.clone())));
            Verdict::Initial { known: req.initial_resource_versions.len() }
        } else if let Some(message) = req.error {
            on_nack(t, req.response_nonce, message)
        } else if req.response_nonce.is_empty() {
            Verdict::Subscription
        } else {
            on_ack(t, req.response_nonce)
        };

        let (added, wildcard_on) = apply_subscription(t, req, first);
        let respond = if first || wildcard_on {
            Some(Respond { watch: t.subscription.clone(), full: true })
        } else if !added.is_empty() {
            Some(Respond { watch: Watch { wildcard: false, names: added }, full: false })
        } else {
            None
        };
        Outcome { verdict, respond }
    }

    /// What to send for `generated`, produced for `watch` (the whole subscription when `full`).
    ///
    /// - a resource is sent unless the client holds (or is about to hold) that version — `force`
    ///   sends it anyway — or rejected that version on this stream;
    /// - removals: for a complete set, every name the client holds within the scope that the set no
    ///   longer has; for an incremental set, the source's removals the client holds;
    /// - `report_missing` adds the explicitly watched names that do not exist and that the client
    ///   does not hold (so a client waiting for them stops waiting).
    pub fn plan(
        &self,
        type_url: &str,
        watch: &Watch,
        full: bool,
        generated: Generated,
        force: bool,
        report_missing: bool,
    ) -> Plan {
        self.plan_forcing(type_url, watch, full, generated, |_| force, report_missing)
    }

    /// As [`DeltaSession::plan`], sending the resources `force` names even if the client holds their
    /// version (and, like every resource, unless it rejected that version). The EDS that follows a CDS
    /// update forces exactly the assignments of the clusters that update added or changed: Envoy keeps
    /// a changed cluster warming until its ClusterLoadAssignment arrives again, while re-sending the
    /// unchanged assignments of unchanged clusters would only cost bytes.
    pub fn plan_forcing(
        &self,
        type_url: &str,
        watch: &Watch,
        full: bool,
        generated: Generated,
        force: impl Fn(&str) -> bool,
        report_missing: bool,
    ) -> Plan {
        let empty = DeltaType::new();
        let t = self.types.get(type_url).unwrap_or(&empty);
        let projected = t.projected();
        let generated_names: BTreeSet<&str> = generated.resources.iter().map(|r| r.name.as_str()).collect();
        let mut removed: BTreeSet<String> = BTreeSet::new();
        match &generated.removed {
            None => {
                for name in projected.keys() {
                    let in_scope = full || watch.names.contains(*name);
                    if in_scope && !generated_names.contains(name) {
                        removed.insert((*name).to_owned());
                    }
                }
            }
            Some(names) => {
                removed.extend(names.iter().filter(|n| projected.contains_key(n.as_str())).cloned());
            }
        }
        if report_missing {
            for name in &watch.names {
                if !generated_names.contains(name.as_str()) && !projected.contains_key(name.as_str()) {
                    removed.insert(name.clone());
                }
            }
        }
        let resources = generated
            .resources
            .into_iter()
            .filter(|r| {
                !t.is_rejected(&r.name, &r.version)
                    && (force(&r.name) || projected.get(r.name.as_str()) != Some(&r.version.as_str()))
            })
            .collect();
        Plan { resources, removed: removed.into_iter().collect() }
    }

    /// Records a response sent for `type_url` (it now awaits an ACK or NACK).
    pub fn on_sent(&mut self, type_url: &str, nonce: &str, version: &str, plan: &Plan) {
        let Some(t) = self.types.get_mut(type_url) else { return };
        t.in_flight.push_back(InFlight {
            nonce: nonce.to_owned(),
            version: version.to_owned(),
            updated: plan.resources.iter().map(|r| (r.name.clone(), r.version.clone())).collect(),
            removed: plan.removed.clone(),
        });
        while t.in_flight.len() > MAX_IN_FLIGHT {
            t.in_flight.pop_front();
        }
        t.last_sent = Some((nonce.to_owned(), version.to_owned()));
        t.state = SyncState::Sent;
    }

    /// The state of one type.
    pub fn get(&self, type_url: &str) -> Option<&DeltaType> {
        self.types.get(type_url)
    }

    /// The type URLs with state, in push order.
    pub fn watched_types(&self) -> Vec<String> {
        let mut v: Vec<String> = self.types.keys().cloned().collect();
        type_url::sort_push_order(&mut v);
        v
    }

    /// Whether the client has yet to answer the latest response of an Envoy type
    /// ([`crate::state::awaits_answer`]).
    pub fn awaits_answer(&self) -> bool {
        crate::state::awaits_answer(self.types.iter().map(|(t, s)| (t, s.state)))
    }
}

fn take_in_flight(t: &mut DeltaType, nonce: &str) -> Option<InFlight> {
    let pos = t.in_flight.iter().position(|f| f.nonce == nonce)?;
    // Responses are answered in order; anything older still waiting was lost track of. Forget it
    // (uncommitted): its resources are re-sent when next generated.
    let mut older = t.in_flight.drain(..=pos).collect::<Vec<_>>();
    older.pop()
}

fn is_latest(t: &DeltaType, nonce: &str) -> bool {
    t.last_sent.as_ref().is_some_and(|(n, _)| n == nonce)
}

fn on_ack(t: &mut DeltaType, nonce: &str) -> Verdict {
    let latest = is_latest(t, nonce);
    let Some(f) = take_in_flight(t, nonce) else {
        return Verdict::Stale { nonce: nonce.to_owned() };
    };
    for (name, version) in f.updated {
        t.rejected.remove(&name);
        t.acked.insert(name, version);
    }
    for name in f.removed {
        t.acked.remove(&name);
    }
    t.last_acked = Some((f.nonce, f.version));
    t.last_error = None;
    if latest {
        t.state = SyncState::Acked;
    }
    Verdict::Ack { nonce: nonce.to_owned() }
}

fn on_nack(t: &mut DeltaType, nonce: &str, message: &str) -> Verdict {
    let latest = is_latest(t, nonce);
    let current = match take_in_flight(t, nonce) {
        Some(f) => {
            t.rejected.extend(f.updated);
            if latest {
                t.state = SyncState::Rejected;
            }
            latest
        }
        None => false,
    };
    t.last_error =
        Some(Rejection { nonce: nonce.to_owned(), version: String::new(), message: message.to_owned() });
    Verdict::Nack { nonce: nonce.to_owned(), message: message.to_owned(), current }
}

/// Applies subscribe/unsubscribe; returns the newly subscribed names and whether the wildcard was
/// switched on by this request.
fn apply_subscription(t: &mut DeltaType, req: &DeltaRequest<'_>, first: bool) -> (BTreeSet<String>, bool) {
    let wildcard_capable = type_url::is_wildcard_type(req.type_url);
    let mut added = BTreeSet::new();
    let mut wildcard_on = false;
    if first && wildcard_capable && req.subscribe.is_empty() {
        t.legacy_wildcard = true;
        t.subscription.wildcard = true;
    }
    let explicit_star = req.subscribe.iter().any(|n| n == "*");
    if explicit_star {
        wildcard_on = wildcard_capable && !t.subscription.wildcard;
        t.subscription.wildcard = wildcard_capable;
        t.legacy_wildcard = false;
    }
    for name in req.subscribe.iter().filter(|n| *n != "*") {
        if t.legacy_wildcard {
            // Naming a resource ends the legacy wildcard (xDS spec).
            t.legacy_wildcard = false;
            t.subscription.wildcard = false;
        }
        if t.subscription.names.insert(name.clone()) {
            added.insert(name.clone());
        }
    }
    if first && !t.subscription.wildcard {
        // A reconnecting client lists what it holds; for named subscriptions those are watched.
        t.subscription.names.extend(req.initial_resource_versions.keys().cloned());
    }
    for name in req.unsubscribe {
        if name == "*" {
            t.subscription.wildcard = false;
            t.legacy_wildcard = false;
            continue;
        }
        t.subscription.names.remove(name);
        if !t.subscription.wildcard {
            // The client drops what it no longer watches; no removal needs sending.
            t.acked.remove(name);
        }
    }
    (added, wildcard_on && !first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE};
    use envoy_types::pb::google::protobuf::Any;

    fn s(n: &[&str]) -> Vec<String> {
        n.iter().map(|x| (*x).to_owned()).collect()
    }

    struct Req {
        type_url: &'static str,
        nonce: String,
        sub: Vec<String>,
        unsub: Vec<String>,
        initial: HashMap<String, String>,
        error: Option<String>,
    }

    impl Req {
        fn new(type_url: &'static str) -> Self {
            Req {
                type_url,
                nonce: String::new(),
                sub: vec![],
                unsub: vec![],
                initial: HashMap::new(),
                error: None,
            }
        }
        fn nonce(mut self, n: &str) -> Self {
            self.nonce = n.into();
            self
        }
        fn sub(mut self, n: &[&str]) -> Self {
            self.sub = s(n);
            self
        }
        fn unsub(mut self, n: &[&str]) -> Self {
            self.unsub = s(n);
            self
        }
        fn initial(mut self, kv: &[(&str, &str)]) -> Self {
            self.initial = kv.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
            self
        }
        fn error(mut self, e: &str) -> Self {
            self.error = Some(e.into());
            self
        }
        fn view(&self) -> DeltaRequest<'_> {
            DeltaRequest {
                type_url: self.type_url,
                response_nonce: &self.nonce,
                subscribe: &self.sub,
                unsubscribe: &self.unsub,
                initial_resource_versions: &self.initial,
                error: self.error.as_deref(),
            }
        }
    }

    fn res(name: &str, version: &str) -> Resource {
        Resource {
            name: name.into(),
            version: version.into(),
            body: Any { type_url: CLUSTER.into(), value: version.as_bytes().to_vec() },
        }
    }

    fn names_of(p: &Plan) -> Vec<(&str, &str)> {
        p.resources.iter().map(|r| (r.name.as_str(), r.version.as_str())).collect()
    }

    #[test]
    fn legacy_wildcard_first_request_gets_everything() {
        let mut d = DeltaSession::new();
        let o = d.on_request(&Req::new(CLUSTER).view());
        assert_eq!(o.verdict, Verdict::Initial { known: 0 });
        assert_eq!(o.respond, Some(Respond { watch: Watch::wildcard(), full: true }));
        let p = d.plan(
            CLUSTER,
            &Watch::wildcard(),
            true,
            Generated::full("1", vec![res("a", "1"), res("b", "1")]),
            false,
            false,
        );
        assert_eq!(names_of(&p), vec![("a", "1"), ("b", "1")]);
        assert!(p.removed.is_empty());
    }

    #[test]
    fn versions_are_committed_only_on_ack() {
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(CLUSTER).view());
        let p = d.plan(
            CLUSTER,
            &Watch::wildcard(),
            true,
            Generated::full("1", vec![res("a", "1")]),
            false,
            false,
        );
        d.on_sent(CLUSTER, "n1", "1", &p);
        assert!(d.get(CLUSTER).unwrap().acked.is_empty(), "sent is not acked");
        assert_eq!(d.get(CLUSTER).unwrap().state, SyncState::Sent);
        // While in flight, the same version is not sent again.
        let p2 = d.plan(
            CLUSTER,
            &Watch::wildcard(),
            true,
            Generated::full("1", vec![res("a", "1")]),
            false,
            false,
        );
        assert!(p2.is_empty());
        let o = d.on_request(&Req::new(CLUSTER).nonce("n1").view());
        assert_eq!(o, Outcome { verdict: Verdict::Ack { nonce: "n1".into() }, respond: None });
        let t = d.get(CLUSTER).unwrap();
        assert_eq!(t.acked.get("a").map(String::as_str), Some("1"));
        assert_eq!(t.state, SyncState::Acked);
        assert_eq!(t.last_acked, Some(("n1".into(), "1".into())));
    }

    #[test]
    fn nack_keeps_the_old_version_and_the_rejected_version_is_not_resent() {
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(ROUTE).sub(&["local_route"]).view());
        let w = Watch::names(["local_route"]);
        let p = d.plan(ROUTE, &w, true, Generated::full("1", vec![res("local_route", "v1")]), false, true);
        d.on_sent(ROUTE, "n1", "1", &p);
        d.on_request(&Req::new(ROUTE).nonce("n1").view());
        let p = d.plan(ROUTE, &w, true, Generated::full("2", vec![res("local_route", "bad")]), false, false);
        assert_eq!(names_of(&p), vec![("local_route", "bad")]);
        d.on_sent(ROUTE, "n2", "2", &p);
        let o = d.on_request(&Req::new(ROUTE).nonce("n2").error("missing ): /foo(").view());
        assert_eq!(
            o.verdict,
            Verdict::Nack { nonce: "n2".into(), message: "missing ): /foo(".into(), current: true }
        );
        assert_eq!(o.respond, None, "a NACK is never answered");
        let t = d.get(ROUTE).unwrap();
        assert_eq!(t.acked.get("local_route").map(String::as_str), Some("v1"), "client still runs v1");
        assert_eq!(t.state, SyncState::Rejected);
        assert_eq!(t.last_error.as_ref().unwrap().message, "missing ): /foo(");
        // A push regenerating the same bad version sends nothing; a new version goes out.
        let p = d.plan(ROUTE, &w, true, Generated::full("3", vec![res("local_route", "bad")]), false, false);
        assert!(p.is_empty());
        let p = d.plan(ROUTE, &w, true, Generated::full("4", vec![res("local_route", "v4")]), false, false);
        assert_eq!(names_of(&p), vec![("local_route", "v4")]);
        d.on_sent(ROUTE, "n4", "4", &p);
        d.on_request(&Req::new(ROUTE).nonce("n4").view());
        let t = d.get(ROUTE).unwrap();
        assert_eq!(t.acked.get("local_route").map(String::as_str), Some("v4"));
        assert_eq!(t.last_error, None);
        assert_eq!(t.state, SyncState::Acked);
    }

    #[test]
    fn reconnect_with_initial_versions_does_not_resend_unchanged() {
        let mut d = DeltaSession::new();
        let o = d.on_request(&Req::new(CLUSTER).initial(&[("a", "1"), ("b", "1")]).view());
        assert_eq!(o.verdict, Verdict::Initial { known: 2 });
        let g = Generated::full("9", vec![res("a", "1"), res("b", "2"), res("c", "1")]);
        let p = d.plan(CLUSTER, &Watch::wildcard(), true, g, false, false);
        assert_eq!(names_of(&p), vec![("b", "2"), ("c", "1")]);
        // A resource the client holds that no longer exists is removed.
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(CLUSTER).initial(&[("gone", "1")]).view());
        let p = d.plan(CLUSTER, &Watch::wildcard(), true, Generated::full("9", vec![]), false, false);
        assert_eq!(p.removed, vec!["gone".to_owned()]);
    }

    #[test]
    fn removals_of_a_complete_set_and_of_an_incremental_one() {
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(CLUSTER).view());
        let p = d.plan(
            CLUSTER,
            &Watch::wildcard(),
            true,
            Generated::full("1", vec![res("a", "1"), res("b", "1")]),
            false,
            false,
        );
        d.on_sent(CLUSTER, "n1", "1", &p);
        d.on_request(&Req::new(CLUSTER).nonce("n1").view());
        let p = d.plan(
            CLUSTER,
            &Watch::wildcard(),
            true,
            Generated::full("2", vec![res("a", "1")]),
            false,
            false,
        );
        assert!(p.resources.is_empty());
        assert_eq!(p.removed, vec!["b".to_owned()]);
        d.on_sent(CLUSTER, "n2", "2", &p);
        d.on_request(&Req::new(CLUSTER).nonce("n2").view());
        assert!(!d.get(CLUSTER).unwrap().acked.contains_key("b"), "removal committed on ACK");
        let g = Generated::incremental("3", vec![res("c", "1")], vec!["a".into(), "never-had".into()]);
        let p = d.plan(CLUSTER, &Watch::wildcard(), true, g, false, false);
        assert_eq!(names_of(&p), vec![("c", "1")]);
        assert_eq!(p.removed, vec!["a".to_owned()]);
    }

    #[test]
    fn named_subscriptions_added_removed_and_missing() {
        let mut d = DeltaSession::new();
        let o = d.on_request(&Req::new(ENDPOINT).sub(&["a"]).view());
        assert_eq!(o.respond, Some(Respond { watch: Watch::names(["a"]), full: true }));
        let p = d.plan(
            ENDPOINT,
            &Watch::names(["a"]),
            true,
            Generated::full("1", vec![res("a", "1")]),
            false,
            true,
        );
        d.on_sent(ENDPOINT, "n1", "1", &p);
        // Subscribe b (spontaneous, no nonce) → answer only b; b does not exist → reported removed.
        let o = d.on_request(&Req::new(ENDPOINT).sub(&["b"]).view());
        assert_eq!(o.verdict, Verdict::Subscription);
        assert_eq!(o.respond, Some(Respond { watch: Watch::names(["b"]), full: false }));
        let p = d.plan(ENDPOINT, &Watch::names(["b"]), false, Generated::full("1", vec![]), false, true);
        assert_eq!(p.removed, vec!["b".to_owned()]);
        // A partial plan does not remove names outside its scope (a is in flight, not in scope).
        assert!(!p.removed.contains(&"a".to_owned()));
        // Unsubscribe a: no answer, and the client forgets it.
        d.on_request(&Req::new(ENDPOINT).nonce("n1").view());
        let o = d.on_request(&Req::new(ENDPOINT).unsub(&["a"]).view());
        assert_eq!(o.respond, None);
        let t = d.get(ENDPOINT).unwrap();
        assert_eq!(t.subscription, Watch::names(["b"]));
        assert!(t.acked.is_empty());
    }

    #[test]
    fn ack_and_subscription_change_in_one_request_both_apply() {
        // Envoy may carry subscription changes on an ACK; a stale nonce does not drop them either.
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(ROUTE).sub(&["r1"]).view());
        let p = d.plan(
            ROUTE,
            &Watch::names(["r1"]),
            true,
            Generated::full("1", vec![res("r1", "1")]),
            false,
            true,
        );
        d.on_sent(ROUTE, "n1", "1", &p);
        let o = d.on_request(&Req::new(ROUTE).nonce("n1").sub(&["r2"]).view());
        assert_eq!(o.verdict, Verdict::Ack { nonce: "n1".into() });
        assert_eq!(o.respond, Some(Respond { watch: Watch::names(["r2"]), full: false }));
        let o = d.on_request(&Req::new(ROUTE).nonce("old").sub(&["r3"]).view());
        assert_eq!(o.verdict, Verdict::Stale { nonce: "old".into() });
        assert_eq!(o.respond, Some(Respond { watch: Watch::names(["r3"]), full: false }));
    }

    #[test]
    fn explicit_wildcard_and_legacy_wildcard_ending() {
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(LISTENER).view());
        assert!(d.get(LISTENER).unwrap().subscription.wildcard);
        // Naming a resource without `*` ends the legacy wildcard.
        d.on_request(&Req::new(LISTENER).sub(&["l1"]).view());
        assert_eq!(d.get(LISTENER).unwrap().subscription, Watch::names(["l1"]));
        // `*` switches it on explicitly, answered with the whole set.
        let o = d.on_request(&Req::new(LISTENER).sub(&["*"]).view());
        assert_eq!(
            o.respond,
            Some(Respond { watch: Watch { wildcard: true, names: ["l1".to_owned()].into() }, full: true })
        );
        // A first request naming `*` and a resource keeps both.
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(CLUSTER).sub(&["*", "odcds"]).view());
        assert_eq!(
            d.get(CLUSTER).unwrap().subscription,
            Watch { wildcard: true, names: ["odcds".to_owned()].into() }
        );
        d.on_request(&Req::new(CLUSTER).unsub(&["*"]).view());
        assert_eq!(d.get(CLUSTER).unwrap().subscription, Watch::names(["odcds"]));
        // Named types are never wildcard, not even with `*`.
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(ENDPOINT).sub(&["*"]).view());
        assert!(!d.get(ENDPOINT).unwrap().subscription.wildcard);
    }

    #[test]
    fn forced_plans_resend_what_the_client_holds() {
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(ENDPOINT).sub(&["a"]).initial(&[("a", "1")]).view());
        let w = Watch::names(["a"]);
        assert!(
            d.plan(ENDPOINT, &w, true, Generated::full("1", vec![res("a", "1")]), false, false).is_empty()
        );
        let p = d.plan(ENDPOINT, &w, true, Generated::full("1", vec![res("a", "1")]), true, false);
        assert_eq!(names_of(&p), vec![("a", "1")]);
    }

    #[test]
    fn forcing_names_resends_only_those_and_what_changed() {
        // EDS after a CDS update that changed cluster "b": "b" goes again though unchanged, "c"
        // because it changed, "a" (unchanged cluster, unchanged assignment) not at all.
        let mut d = DeltaSession::new();
        d.on_request(
            &Req::new(ENDPOINT).sub(&["a", "b", "c"]).initial(&[("a", "1"), ("b", "1"), ("c", "1")]).view(),
        );
        let w = Watch::names(["a", "b", "c"]);
        let g = Generated::full("2", vec![res("a", "1"), res("b", "1"), res("c", "2")]);
        let p = d.plan_forcing(ENDPOINT, &w, true, g, |n| n == "b", false);
        assert_eq!(names_of(&p), vec![("b", "1"), ("c", "2")]);
        assert!(p.removed.is_empty());
    }

    #[test]
    fn stale_and_unknown_nacks() {
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(CLUSTER).view());
        let o = d.on_request(&Req::new(CLUSTER).nonce("zzz").view());
        assert_eq!(o.verdict, Verdict::Stale { nonce: "zzz".into() });
        let o = d.on_request(&Req::new(CLUSTER).nonce("zzz").error("e").view());
        assert_eq!(o.verdict, Verdict::Nack { nonce: "zzz".into(), message: "e".into(), current: false });
        assert_eq!(d.get(CLUSTER).unwrap().state, SyncState::Requested);
    }

    #[test]
    fn in_flight_is_bounded() {
        let mut d = DeltaSession::new();
        d.on_request(&Req::new(CLUSTER).view());
        for i in 0..(MAX_IN_FLIGHT + 10) {
            let p = Plan { resources: vec![res("a", &i.to_string())], removed: vec![] };
            d.on_sent(CLUSTER, &format!("n{i}"), "v", &p);
        }
        assert_eq!(d.get(CLUSTER).unwrap().in_flight(), MAX_IN_FLIGHT);
        // The oldest were forgotten: their ACK is stale.
        assert!(matches!(d.on_request(&Req::new(CLUSTER).nonce("n0").view()).verdict, Verdict::Stale { .. }));
        // ACK of a middle one commits it and forgets the older ones.
        let o = d.on_request(&Req::new(CLUSTER).nonce("n20").view());
        assert_eq!(o.verdict, Verdict::Ack { nonce: "n20".into() });
        assert_eq!(d.get(CLUSTER).unwrap().acked["a"], "20");
        assert_eq!(d.get(CLUSTER).unwrap().state, SyncState::Sent, "a newer response is still in flight");
    }
}
