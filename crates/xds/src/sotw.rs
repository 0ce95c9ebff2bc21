//! State of the World (SotW) ADS: the per-type state machine, pure (no I/O, no clock).
//!
//! One [`SotwSession`] per stream holds a [`SotwType`] per subscribed type URL. Every request goes
//! through [`SotwSession::on_request`], which classifies it ([`Verdict`]) and says whether to answer
//! ([`Respond`]); every response sent is recorded with [`SotwSession::on_sent`]. The rules are
//! Envoy's xDS protocol as Istio applies them (`pkg/xds/server.go` `ShouldRespond`):
//!
//! 1. `error_detail` set ⇒ **NACK**. Its `version_info` is the last version the client *accepted*
//!    and `response_nonce` the rejected nonce. Record the error; never answer (answering with the
//!    same config would loop).
//! 2. A named type (RDS, EDS, …) with an empty name list ⇒ **unsubscribe**: forget the type.
//! 3. No state for the type yet, or an empty nonce ⇒ **initial** request (also a reconnect to this
//!    server): subscribe and answer with the whole watch.
//! 4. A nonce that is not the latest one sent for the type ⇒ **stale**: ignore (a newer response is
//!    on its way and will be ACKed or NACKed itself). Requests of *other* types keep flowing
//!    meanwhile — Envoy asks for EDS before it ACKs CDS — which is why state is per type.
//! 5. Otherwise ⇒ **ACK** of the latest response. If the name list changed, answer: the new names
//!    only for named types, the whole watch for wildcard-capable types (a SotW Listener/Cluster
//!    response must carry the complete set).
//!
//! ```text
//!             initial request             response sent (nonce n)
//!   (none) ───────────────────► Requested ─────────────────────► Sent ──ACK n──► Acked
//!                                   ▲                              │  └─NACK n──► Rejected
//!                                   │ initial (empty nonce)        │ (a new response from Acked or
//!                                   └──────────────────────────────┘  Rejected goes back to Sent)
//!   empty names on a named type: the type's state is dropped (unsubscribe)
//! ```

use std::{collections::BTreeSet, sync::Arc};

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;

use crate::{
    source::Watch,
    state::{Rejection, Respond, SyncState, TypeMap},
    type_url,
};

/// The protocol-relevant part of a SotW `DiscoveryRequest`.
#[derive(Debug, Clone, Copy)]
pub struct SotwRequest<'a> {
    /// `type_url`.
    pub type_url: &'a str,
    /// `version_info`: the last version the client accepted for the type.
    pub version_info: &'a str,
    /// `response_nonce`: the nonce of the response this request answers (empty on an initial request).
    pub response_nonce: &'a str,
    /// `resource_names`.
    pub resource_names: &'a [String],
    /// `error_detail.message` when the request is a NACK.
    pub error: Option<&'a str>,
}

impl<'a> SotwRequest<'a> {
    /// Views a protobuf request.
    pub fn from_proto(req: &'a DiscoveryRequest) -> Self {
        SotwRequest {
            type_url: &req.type_url,
            version_info: &req.version_info,
            response_nonce: &req.response_nonce,
            resource_names: &req.resource_names,
            error: req.error_detail.as_ref().map(|e| e.message.as_str()),
        }
    }
}

/// What a request was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// First request for the type on this stream, or the client restarted the type (empty nonce).
    Initial,
    /// The client accepted the latest response.
    Ack {
        /// The ACKed nonce.
        nonce: String,
        /// The accepted version.
        version: String,
    },
    /// The client rejected a response.
    Nack {
        /// The rejected nonce.
        nonce: String,
        /// The version the client still runs (its last accepted one).
        version: String,
        /// `error_detail.message`.
        message: String,
        /// Whether the rejected response is the latest one sent (else an older one, already superseded).
        current: bool,
    },
    /// The nonce is not the latest sent for the type: ignored.
    Stale {
        /// The stale nonce.
        nonce: String,
    },
    /// A named type with no names: the client stopped watching it.
    Unsubscribe,
}

/// The result of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What the request was.
    pub verdict: Verdict,
    /// Whether (and what) to answer.
    pub respond: Option<Respond>,
}

/// The last response sent for a type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentResponse {
    /// Its nonce.
    pub nonce: String,
    /// Its `version_info`.
    pub version: String,
    /// Hash of its resources (names and bytes), to recognise a rejected config if it comes again.
    pub content: u64,
    /// How many resources it carried.
    pub resources: usize,
    /// Names it carried beyond the client's watch: the assignments of new clusters, sent with the EDS
    /// that follows a CDS update. When the client's ACK of this response adds them to its watch they
    /// are not answered again (one EDS response per CDS change).
    pub unsolicited: BTreeSet<String>,
}

/// One type's state on a SotW stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SotwType {
    /// What the client watches.
    pub watch: Arc<Watch>,
    /// Where the type is in its request/response cycle.
    pub state: SyncState,
    /// The last response sent.
    pub sent: Option<SentResponse>,
    /// The last ACK: (nonce, version).
    pub acked: Option<(String, String)>,
    /// The last NACK since the last ACK.
    pub last_error: Option<Rejection>,
    /// Content hash of the last rejected response; the engine does not push the same content again.
    rejected_content: Option<u64>,
}

impl SotwType {
    fn new(watch: Arc<Watch>) -> Self {
        SotwType {
            watch,
            state: SyncState::Requested,
            sent: None,
            acked: None,
            last_error: None,
            rejected_content: None,
        }
    }
}

/// The SotW state of one stream: a [`SotwType`] per watched type URL.
#[derive(Debug, Clone, Default)]
pub struct SotwSession {
    types: TypeMap<SotwType>,
}

/// The watch a SotW name list means for `type_url`: for wildcard-capable types an empty list (or
/// `*`) is the wildcard.
fn watch_from_names(type_url: &str, names: &[String]) -> Watch {
    Watch {
        wildcard: names_wildcard(type_url, names),
        names: names.iter().filter(|n| *n != "*").cloned().collect(),
    }
}

/// Whether the SotW name list `names` is the wildcard for `type_url` ([`watch_from_names`]).
fn names_wildcard(type_url: &str, names: &[String]) -> bool {
    type_url::is_wildcard_type(type_url) && (names.is_empty() || names.iter().any(|n| n == "*"))
}

/// Whether the SotW name list `names` surely means `watch` (what [`watch_from_names`] would build),
/// found without copying a name: an ACK repeats the client's whole watch (an Envoy sidecar without a
/// Sidecar resource names every EDS cluster of the mesh in each EDS ACK), and is almost always the
/// same list. Each name is looked up in the watch; a list of as many names as the watch, all in it,
/// is the watch unless a name repeats (checked on a sorted copy of the references when the list is
/// not sorted already). `false` for a list with repeated names even when it means the watch: the
/// caller then builds the watch and compares.
fn names_mean(watch: &Watch, type_url: &str, names: &[String]) -> bool {
    if names_wildcard(type_url, names) != watch.wildcard {
        return false;
    }
    let mut explicit = 0usize;
    for name in names.iter().filter(|n| *n != "*") {
        if !watch.names.contains(name) {
            return false;
        }
        explicit += 1;
    }
    if explicit != watch.names.len() {
        return false;
    }
    let listed = names.iter().filter(|n| *n != "*");
    if listed.clone().zip(listed.skip(1)).all(|(a, b)| a < b) {
        return true;
    }
    let mut sorted: Vec<&str> = names.iter().filter(|n| *n != "*").map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}

impl SotwSession {
    /// An empty session (new stream).
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one request; see the module docs for the rules.
    pub fn on_request(&mut self, req: &SotwRequest<'_>) -> Outcome {
        let type_url = req.type_url;
        if let Some(message) = req.error {
            return self.on_nack(req, message);
        }
        if !type_url::is_wildcard_type(type_url) && req.resource_names.is_empty() {
            self.types.remove(type_url);
            return Outcome { verdict: Verdict::Unsubscribe, respond: None };
        }
        let Some(t) = self.types.get_mut(type_url).filter(|_| !req.response_nonce.is_empty()) else {
            let watch = watch_from_names(type_url, req.resource_names);
            self.types.insert(type_url, SotwType::new(Arc::new(watch.clone())));
            return Outcome { verdict: Verdict::Initial, respond: Some(Respond { watch, full: true }) };
        };
        if t.sent.as_ref().is_none_or(|s| s.nonce != req.response_nonce) {
            return Outcome {
                verdict: Verdict::Stale { nonce: req.response_nonce.to_owned() },
                respond: None,
            };
        }
        // ACK of the latest response.
        t.state = SyncState::Acked;
        t.acked = Some((req.response_nonce.to_owned(), req.version_info.to_owned()));
        t.last_error = None;
        t.rejected_content = None;
        let verdict =
            Verdict::Ack { nonce: req.response_nonce.to_owned(), version: req.version_info.to_owned() };
        if names_mean(&t.watch, type_url, req.resource_names) {
            return Outcome { verdict, respond: None };
        }
        let watch = watch_from_names(type_url, req.resource_names);
        let previous = std::mem::replace(&mut t.watch, Arc::new(watch.clone()));
        if *previous == watch {
            return Outcome { verdict, respond: None };
        }
        // Names the ACKed response already carried need no answer.
        let already: BTreeSet<String> =
            t.sent.as_mut().map(|s| std::mem::take(&mut s.unsolicited)).unwrap_or_default();
        let respond = if type_url::sotw_requires_full_state(type_url) {
            Some(Respond { watch, full: true })
        } else {
            let added: BTreeSet<String> =
                watch.names.difference(&previous.names).filter(|n| !already.contains(*n)).cloned().collect();
            (!added.is_empty())
                .then_some(Respond { watch: Watch { wildcard: false, names: added }, full: false })
        };
        Outcome { verdict, respond }
    }

    fn on_nack(&mut self, req: &SotwRequest<'_>, message: &str) -> Outcome {
        let nonce = req.response_nonce.to_owned();
        let mut current = false;
        if let Some(t) = self.types.get_mut(req.type_url) {
            if let Some(sent) = t.sent.as_ref().filter(|s| s.nonce == nonce) {
                current = true;
                t.state = SyncState::Rejected;
                t.rejected_content = Some(sent.content);
            }
            // Like Istio, the last error is recorded even for an older nonce; the next ACK clears it.
            t.last_error = Some(Rejection {
                nonce: nonce.clone(),
                version: req.version_info.to_owned(),
                message: message.to_owned(),
            });
        }
        Outcome {
            verdict: Verdict::Nack {
                nonce,
                version: req.version_info.to_owned(),
                message: message.to_owned(),
                current,
            },
            respond: None,
        }
    }

    /// Records a response sent for `type_url`. A response for a type with no state (which the engine
    /// never sends) is ignored.
    pub fn on_sent(&mut self, type_url: &str, sent: SentResponse) {
        if let Some(t) = self.types.get_mut(type_url) {
            t.state = SyncState::Sent;
            t.sent = Some(sent);
        }
    }

    /// Whether `content` is what the client last rejected for `type_url` (a push must not send it
    /// again; only a different config or a new request from the client may).
    pub fn is_rejected_content(&self, type_url: &str, content: u64) -> bool {
        self.types.get(type_url).is_some_and(|t| t.rejected_content == Some(content))
    }

    /// The state of one type.
    pub fn get(&self, type_url: &str) -> Option<&SotwType> {
        self.types.get(type_url)
    }

    /// The watched type URLs in push order (CDS, EDS, LDS, RDS, SDS, others).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    fn req<'a>(type_url: &'a str, version: &'a str, nonce: &'a str, names: &'a [String]) -> SotwRequest<'a> {
        SotwRequest {
            type_url,
            version_info: version,
            response_nonce: nonce,
            resource_names: names,
            error: None,
        }
    }

    fn sent(nonce: &str, version: &str, content: u64) -> SentResponse {
        SentResponse {
            nonce: nonce.into(),
            version: version.into(),
            content,
            resources: 1,
            unsolicited: BTreeSet::new(),
        }
    }

    #[test]
    fn a_name_list_means_a_watch_exactly_when_it_would_build_it() {
        let watch = |t: &str, list: &[&str]| watch_from_names(t, &names(list));
        let cases: &[(&str, &[&str], &[&str])] = &[
            (ENDPOINT, &["a", "b", "c"], &["a", "b", "c"]),
            (ENDPOINT, &["a", "b", "c"], &["c", "a", "b"]),
            (ENDPOINT, &["a", "b", "c"], &["a", "b"]),
            (ENDPOINT, &["a", "b", "c"], &["a", "b", "c", "d"]),
            (ENDPOINT, &["a", "b", "c"], &["a", "b", "b"]),
            (ENDPOINT, &["a", "b", "c"], &["b", "a", "a"]),
            (ENDPOINT, &["a", "b"], &["a", "b", "b"]),
            (ENDPOINT, &["a", "b"], &["a", "x"]),
            (CLUSTER, &[], &[]),
            (CLUSTER, &[], &["*"]),
            (CLUSTER, &["*", "a"], &["a", "*"]),
            (CLUSTER, &["*", "a"], &["a"]),
            (CLUSTER, &["a"], &["a"]),
            (CLUSTER, &[], &["a"]),
        ];
        for (t, current, list) in cases {
            let current = watch(t, current);
            let same = watch(t, list) == current;
            let repeats = list.iter().collect::<BTreeSet<_>>().len() < list.len();
            // Never a false "same"; a false "different" only for a list with repeated names.
            let expected = same && !repeats;
            assert_eq!(names_mean(&current, t, &names(list)), expected, "{t} {current:?} vs {list:?}");
        }
    }

    #[test]
    fn envoy_startup_sequence_is_answered_per_type() {
        // The exchange observed with Envoy 1.40 (RUST-STACK.md §1.1): EDS is requested before CDS is ACKed.
        let mut s = SotwSession::new();
        let none = names(&[]);
        let o = s.on_request(&req(CLUSTER, "", "", &none));
        assert_eq!(o.verdict, Verdict::Initial);
        assert_eq!(o.respond, Some(Respond { watch: Watch::wildcard(), full: true }));
        s.on_sent(CLUSTER, sent("1", "v1", 10));
        assert_eq!(s.get(CLUSTER).unwrap().state, SyncState::Sent);

        let eds = names(&["upstream"]);
        let o = s.on_request(&req(ENDPOINT, "", "", &eds));
        assert_eq!(o.respond, Some(Respond { watch: Watch::names(["upstream"]), full: true }));
        s.on_sent(ENDPOINT, sent("2", "v1", 11));

        let o = s.on_request(&req(CLUSTER, "v1", "1", &none));
        assert_eq!(
            o,
            Outcome { verdict: Verdict::Ack { nonce: "1".into(), version: "v1".into() }, respond: None }
        );
        assert_eq!(s.get(CLUSTER).unwrap().state, SyncState::Acked);
        assert_eq!(s.get(CLUSTER).unwrap().acked, Some(("1".into(), "v1".into())));

        let o = s.on_request(&req(ENDPOINT, "v1", "2", &eds));
        assert!(matches!(o.verdict, Verdict::Ack { .. }));
        assert_eq!(o.respond, None);
        assert_eq!(s.watched_types(), vec![CLUSTER.to_owned(), ENDPOINT.to_owned()]);
    }

    #[test]
    fn nack_is_recorded_and_never_answered() {
        let mut s = SotwSession::new();
        let rds = names(&["local_route"]);
        s.on_request(&req(ROUTE, "", "", &rds));
        s.on_sent(ROUTE, sent("4", "2", 20));
        s.on_request(&req(ROUTE, "2", "4", &rds));
        s.on_sent(ROUTE, sent("6", "3", 30));
        let nack = SotwRequest { error: Some("missing ): /foo("), ..req(ROUTE, "2", "6", &rds) };
        let o = s.on_request(&nack);
        assert_eq!(
            o,
            Outcome {
                verdict: Verdict::Nack {
                    nonce: "6".into(),
                    version: "2".into(),
                    message: "missing ): /foo(".into(),
                    current: true
                },
                respond: None
            }
        );
        let t = s.get(ROUTE).unwrap();
        assert_eq!(t.state, SyncState::Rejected);
        assert_eq!(t.acked, Some(("4".into(), "2".into())), "the accepted version stays");
        assert_eq!(t.last_error.as_ref().unwrap().message, "missing ): /foo(");
        assert!(s.is_rejected_content(ROUTE, 30));
        assert!(!s.is_rejected_content(ROUTE, 31));

        // A later valid version is ACKed and clears the error.
        s.on_sent(ROUTE, sent("7", "4", 40));
        let o = s.on_request(&req(ROUTE, "4", "7", &rds));
        assert!(matches!(o.verdict, Verdict::Ack { .. }));
        let t = s.get(ROUTE).unwrap();
        assert_eq!(t.last_error, None);
        assert!(!s.is_rejected_content(ROUTE, 30));
    }

    #[test]
    fn stale_nonces_are_ignored_and_stale_nacks_do_not_reject_the_current_response() {
        let mut s = SotwSession::new();
        let none = names(&[]);
        s.on_request(&req(LISTENER, "", "", &none));
        s.on_sent(LISTENER, sent("1", "v1", 1));
        s.on_sent(LISTENER, sent("2", "v2", 2));
        let o = s.on_request(&req(LISTENER, "v1", "1", &none));
        assert_eq!(o, Outcome { verdict: Verdict::Stale { nonce: "1".into() }, respond: None });
        assert_eq!(s.get(LISTENER).unwrap().state, SyncState::Sent);

        let o = s.on_request(&SotwRequest { error: Some("bad"), ..req(LISTENER, "", "1", &none) });
        assert!(matches!(o.verdict, Verdict::Nack { current: false, .. }));
        assert_eq!(s.get(LISTENER).unwrap().state, SyncState::Sent);
        assert!(!s.is_rejected_content(LISTENER, 1));

        let o = s.on_request(&req(LISTENER, "v2", "2", &none));
        assert!(matches!(o.verdict, Verdict::Ack { .. }));
        assert_eq!(s.get(LISTENER).unwrap().last_error, None);
    }

    #[test]
    fn named_types_answer_only_added_names_and_unsubscribe_on_empty() {
        let mut s = SotwSession::new();
        let a = names(&["a"]);
        s.on_request(&req(ENDPOINT, "", "", &a));
        s.on_sent(ENDPOINT, sent("1", "v1", 1));
        let ab = names(&["a", "b"]);
        let o = s.on_request(&req(ENDPOINT, "v1", "1", &ab));
        assert_eq!(o.respond, Some(Respond { watch: Watch::names(["b"]), full: false }));
        assert_eq!(*s.get(ENDPOINT).unwrap().watch, Watch::names(["a", "b"]));
        // Removing a name needs no answer.
        s.on_sent(ENDPOINT, sent("2", "v1", 2));
        let o = s.on_request(&req(ENDPOINT, "v1", "2", &a));
        assert_eq!(o.respond, None);
        // Empty names on a named type: unsubscribe.
        let none = names(&[]);
        let o = s.on_request(&req(ENDPOINT, "v1", "2", &none));
        assert_eq!(o.verdict, Verdict::Unsubscribe);
        assert!(s.get(ENDPOINT).is_none());
        assert!(s.watched_types().is_empty());
    }

    #[test]
    fn wildcard_types_answer_any_name_change_with_the_full_set() {
        // Proxyless gRPC names its listeners; any change re-sends the whole (full-state) set.
        let mut s = SotwSession::new();
        let a = names(&["echo.test.svc:50051"]);
        let o = s.on_request(&req(LISTENER, "", "", &a));
        assert_eq!(o.respond, Some(Respond { watch: Watch::names(["echo.test.svc:50051"]), full: true }));
        s.on_sent(LISTENER, sent("1", "v1", 1));
        let ab = names(&["echo.test.svc:50051", "other:80"]);
        let o = s.on_request(&req(LISTENER, "v1", "1", &ab));
        assert_eq!(
            o.respond,
            Some(Respond { watch: Watch::names(["echo.test.svc:50051", "other:80"]), full: true })
        );
        // `*` is the explicit wildcard.
        let star = names(&["*", "x"]);
        let o = s.on_request(&req(CLUSTER, "", "", &star));
        assert_eq!(o.respond.unwrap().watch, Watch { wildcard: true, names: ["x".to_owned()].into() });
    }

    #[test]
    fn empty_nonce_restarts_the_type() {
        let mut s = SotwSession::new();
        let none = names(&[]);
        s.on_request(&req(CLUSTER, "", "", &none));
        s.on_sent(CLUSTER, sent("1", "v1", 1));
        let o = s.on_request(&req(CLUSTER, "v1", "", &none));
        assert_eq!(o.verdict, Verdict::Initial);
        assert!(o.respond.is_some());
        assert_eq!(s.get(CLUSTER).unwrap().state, SyncState::Requested);
    }

    #[test]
    fn nack_for_unknown_type_is_harmless() {
        let mut s = SotwSession::new();
        let none = names(&[]);
        let o = s.on_request(&SotwRequest { error: Some("x"), ..req(CLUSTER, "", "9", &none) });
        assert!(matches!(o.verdict, Verdict::Nack { current: false, .. }));
        assert!(s.get(CLUSTER).is_none());
    }

    #[test]
    fn names_already_sent_unsolicited_are_not_answered_again() {
        // EDS after CDS carried the new cluster "c" before Envoy asked; Envoy's request naming it
        // (with the previous nonce) is stale, its ACK of that response adds "c" without an answer.
        let mut s = SotwSession::new();
        let ab = names(&["a", "b"]);
        s.on_request(&req(ENDPOINT, "", "", &ab));
        s.on_sent(ENDPOINT, sent("1", "v1", 10));
        s.on_request(&req(ENDPOINT, "v1", "1", &ab));
        let mut dep = sent("2", "v2", 11);
        dep.unsolicited = ["c".to_owned()].into();
        s.on_sent(ENDPOINT, dep);
        let abc = names(&["a", "b", "c"]);
        let o = s.on_request(&req(ENDPOINT, "v1", "1", &abc));
        assert_eq!(o.verdict, Verdict::Stale { nonce: "1".into() });
        let o = s.on_request(&req(ENDPOINT, "v2", "2", &abc));
        assert!(matches!(o.verdict, Verdict::Ack { .. }));
        assert_eq!(o.respond, None, "c was in the ACKed response");
        assert_eq!(*s.get(ENDPOINT).unwrap().watch, Watch::names(["a", "b", "c"]));
        // A name it did not carry is answered.
        s.on_sent(ENDPOINT, sent("3", "v3", 12));
        let abcd = names(&["a", "b", "c", "d"]);
        let o = s.on_request(&req(ENDPOINT, "v3", "3", &abcd));
        assert_eq!(o.respond, Some(Respond { watch: Watch::names(["d"]), full: false }));
    }
}
