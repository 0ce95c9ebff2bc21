//! The `ads_requests` target: request sequences through the pure ADS state machines.
//!
//! The input is a sequence of operations, each one op byte, `op % 4` choosing:
//!
//! - [`ADS_OP_SOTW`]: a length-delimited protobuf `DiscoveryRequest` follows; it goes through
//!   [`SotwSession::on_request`] (the first request of a stream also through
//!   `crate::proxy_from_node`), and when the session says to answer, a simulated engine sends a
//!   response (nonce `n<k>`) recorded with `on_sent`, as the server does.
//! - [`ADS_OP_DELTA`]: the same with a `DeltaDiscoveryRequest`, [`DeltaSession::on_request`],
//!   `plan` and `on_sent`.
//! - [`ADS_OP_PUSH`]: a config change: the engine pushes every watched type of both sessions
//!   again; `op >> 2` picks what changed (versions, a removed resource, an incremental result).
//! - [`ADS_OP_RECONNECT`]: the stream ends; both sessions start over (a reconnecting client).
//!
//! Input that does not decode ends the sequence. The simulated engine's responses are
//! deterministic, so a corpus entry can ACK them by nonce (`n0`, `n1`, … in send order).

use std::collections::{BTreeSet, hash_map::DefaultHasher};
use std::hash::{Hash, Hasher};

use envoy_types::pb::{
    envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest},
    google::protobuf::Any,
};
use prost::Message;
use xds::{
    Generated, Resource, Watch,
    delta::{self, DeltaRequest, DeltaSession, MAX_IN_FLIGHT},
    sotw::{self, SentResponse, SotwRequest, SotwSession},
    state::SyncState,
};

/// Op byte (mod 4): a SotW `DiscoveryRequest` follows (length-delimited protobuf).
pub const ADS_OP_SOTW: u8 = 0;
/// Op byte (mod 4): a `DeltaDiscoveryRequest` follows (length-delimited protobuf).
pub const ADS_OP_DELTA: u8 = 1;
/// Op byte (mod 4): a config change pushes every watched type again.
pub const ADS_OP_PUSH: u8 = 2;
/// Op byte (mod 4): the stream ends and the client reconnects (fresh sessions).
pub const ADS_OP_RECONNECT: u8 = 3;

/// Operations read from one input at most (a bound on the work per input, not on its shape).
const MAX_OPS: usize = 512;

/// Names every wildcard watch produces; explicitly watched names exist unless they start with `missing`.
const UNIVERSE: [&str; 3] = ["a", "b", "c"];

/// `ads_requests`: see the module docs for the input format.
pub fn fuzz_ads_requests(data: &[u8]) {
    let mut sim = Engine::default();
    let mut rest = data;
    for _ in 0..MAX_OPS {
        let Some((&op, tail)) = rest.split_first() else { return };
        rest = tail;
        match op % 4 {
            ADS_OP_SOTW => {
                let Ok(req) = DiscoveryRequest::decode_length_delimited(&mut rest) else { return };
                sim.sotw_request(&req);
            }
            ADS_OP_DELTA => {
                let Ok(req) = DeltaDiscoveryRequest::decode_length_delimited(&mut rest) else { return };
                sim.delta_request(&req);
            }
            ADS_OP_PUSH => sim.push(op >> 2),
            _ => sim.reconnect(),
        }
    }
}

/// A stand-in for the engine around the two state machines: it answers as the server would.
#[derive(Default)]
struct Engine {
    sotw: SotwSession,
    delta: DeltaSession,
    sotw_started: bool,
    delta_started: bool,
    /// Responses sent so far (nonces `n0`, `n1`, …; not reset on reconnect, as a server's are unique).
    sent: u64,
    /// The config version; pushes bump it.
    config: u64,
    /// Resources the config no longer has (a push may remove one).
    removed: BTreeSet<String>,
}

impl Engine {
    fn next_nonce(&mut self) -> String {
        let nonce = format!("n{}", self.sent);
        self.sent += 1;
        nonce
    }

    /// The resources of `watch` in the current config.
    fn generate(&self, type_url: &str, watch: &Watch) -> Vec<Resource> {
        let wildcard: &[&str] = if watch.wildcard { &UNIVERSE } else { &[] };
        let names: BTreeSet<&str> = wildcard
            .iter()
            .copied()
            .chain(watch.names.iter().map(String::as_str))
            .filter(|n| !n.starts_with("missing") && !self.removed.contains(*n))
            .collect();
        names
            .into_iter()
            .map(|name| {
                let body = Any { type_url: type_url.to_owned(), value: name.as_bytes().to_vec() };
                Resource::from_any(name, body).with_version(format!("v{}", self.config))
            })
            .collect()
    }

    fn sotw_request(&mut self, req: &DiscoveryRequest) {
        if !self.sotw_started {
            self.sotw_started = true;
            let _ = crate::proxy_from_node(req.node.as_ref());
        }
        let view = SotwRequest::from_proto(req);
        let outcome = self.sotw.on_request(&view);
        match &outcome.verdict {
            sotw::Verdict::Ack { nonce, .. } => {
                let t = self.sotw.get(&req.type_url).expect("an ACKed type has state");
                assert_eq!(t.state, SyncState::Acked);
                assert_eq!(t.acked.as_ref().map(|(n, _)| n), Some(nonce));
                assert!(t.last_error.is_none(), "an ACK clears the last error");
            }
            sotw::Verdict::Unsubscribe => {
                assert!(self.sotw.get(&req.type_url).is_none(), "an unsubscribed type keeps state");
            }
            sotw::Verdict::Nack { current: true, .. } => {
                let t = self.sotw.get(&req.type_url).expect("a current NACK is for a type with state");
                assert_eq!(t.state, SyncState::Rejected);
            }
            _ => {}
        }
        if let Some(respond) = outcome.respond {
            self.sotw_send(&req.type_url, &respond.watch);
        }
    }

    fn sotw_send(&mut self, type_url: &str, watch: &Watch) {
        let resources = self.generate(type_url, watch);
        let mut hasher = DefaultHasher::new();
        for r in &resources {
            (&r.name, &r.body.value, &r.version).hash(&mut hasher);
        }
        let content = hasher.finish();
        if self.sotw.is_rejected_content(type_url, content) {
            return;
        }
        let nonce = self.next_nonce();
        let sent = SentResponse {
            nonce: nonce.clone(),
            version: format!("v{}", self.config),
            content,
            resources: resources.len(),
            unsolicited: BTreeSet::new(),
        };
        self.sotw.on_sent(type_url, sent);
        if let Some(t) = self.sotw.get(type_url) {
            assert_eq!(t.state, SyncState::Sent);
            assert_eq!(t.sent.as_ref().map(|s| s.nonce.as_str()), Some(nonce.as_str()));
        }
    }

    fn delta_request(&mut self, req: &DeltaDiscoveryRequest) {
        if !self.delta_started {
            self.delta_started = true;
            let _ = crate::proxy_from_node(req.node.as_ref());
        }
        let view = DeltaRequest::from_proto(req);
        let outcome = self.delta.on_request(&view);
        let t = self.delta.get(&req.type_url).expect("every delta request leaves state for its type");
        assert!(t.in_flight() <= MAX_IN_FLIGHT, "in-flight responses beyond the bound");
        if let delta::Verdict::Ack { nonce } = &outcome.verdict {
            assert_eq!(t.last_acked.as_ref().map(|(n, _)| n), Some(nonce));
        }
        if let Some(respond) = outcome.respond {
            let generated =
                Generated::full(format!("v{}", self.config), self.generate(&req.type_url, &respond.watch));
            self.delta_send(&req.type_url, &respond.watch, respond.full, generated);
        }
    }

    fn delta_send(&mut self, type_url: &str, watch: &Watch, full: bool, generated: Generated) {
        let version = generated.version.clone();
        let plan = self.delta.plan(type_url, watch, full, generated, false, true);
        let t = self.delta.get(type_url);
        for r in &plan.resources {
            assert!(
                !t.is_some_and(|t| t.is_rejected(&r.name, &r.version)),
                "a plan re-sends a rejected version of {}",
                r.name
            );
        }
        if plan.is_empty() {
            return;
        }
        let nonce = self.next_nonce();
        self.delta.on_sent(type_url, &nonce, &version, &plan);
    }

    /// A config change: `what % 4` = 0 new versions of everything, 1 one resource removed, 2 it
    /// comes back, 3 an incremental push (Delta) of the removal.
    fn push(&mut self, what: u8) {
        self.config += 1;
        match what % 4 {
            1 | 3 => {
                let _ = self.removed.insert("b".to_owned());
            }
            2 => self.removed.clear(),
            _ => {}
        }
        for type_url in self.sotw.watched_types() {
            let Some(watch) = self.sotw.get(&type_url).map(|t| t.watch.clone()) else { continue };
            self.sotw_send(&type_url, &watch);
        }
        for type_url in self.delta.watched_types() {
            let Some(watch) = self.delta.get(&type_url).map(|t| t.subscription.clone()) else { continue };
            let resources = self.generate(&type_url, &watch);
            let version = format!("v{}", self.config);
            let generated = if what % 4 == 3 {
                Generated::incremental(version, resources, self.removed.iter().cloned().collect())
            } else {
                Generated::full(version, resources)
            };
            self.delta_send(&type_url, &watch, true, generated);
        }
    }

    fn reconnect(&mut self) {
        self.sotw = SotwSession::new();
        self.delta = DeltaSession::new();
        self.sotw_started = false;
        self.delta_started = false;
    }
}
