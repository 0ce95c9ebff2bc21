//! Vocabulary shared by the SotW and Delta state machines.

use crate::source::Watch;

/// Where one type of one stream is in its request/response cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncState {
    /// The client subscribed; no response has been sent yet.
    Requested,
    /// A response was sent and is neither ACKed nor NACKed yet (`istioctl proxy-status`: STALE
    /// while it lasts).
    Sent,
    /// The latest response was ACKed (SYNCED).
    Acked,
    /// The latest response was NACKed; the client keeps running its previous config.
    Rejected,
}

impl SyncState {
    /// `requested`, `sent`, `acked` or `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncState::Requested => "requested",
            SyncState::Sent => "sent",
            SyncState::Acked => "acked",
            SyncState::Rejected => "rejected",
        }
    }
}

/// A NACK as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The rejected response's nonce.
    pub nonce: String,
    /// The version the client still runs (SotW `version_info` of the NACK; empty in Delta).
    pub version: String,
    /// `error_detail.message`.
    pub message: String,
}

/// "Answer this request by generating `watch`".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Respond {
    /// What to generate.
    pub watch: Watch,
    /// Whether `watch` is the whole subscription (else only newly added names).
    pub full: bool,
}

/// Per-type state of one stream, keyed by type URL: a plain vector searched linearly.
///
/// A stream watches a handful of types (an Envoy sidecar: CDS, EDS, LDS, RDS, sometimes SDS), and
/// one such map exists per stream two or three times over (protocol session, `/debug/syncz`
/// mirror), so its footprint counts at 10,000 streams: a `BTreeMap` allocates a leaf of 11 slots
/// for the first entry (≈ 2.5 KiB per map with Istio-sized values, measured with heaptrack in
/// BENCHMARKS.md "Smaller streams"), this holds exactly what is used. Iteration is in insertion
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeMap<V> {
    entries: Vec<(String, V)>,
}

impl<V> Default for TypeMap<V> {
    fn default() -> Self {
        TypeMap { entries: Vec::new() }
    }
}

impl<V> TypeMap<V> {
    /// The value of `type_url`.
    pub fn get(&self, type_url: &str) -> Option<&V> {
        self.entries.iter().find(|(k, _)| k == type_url).map(|(_, v)| v)
    }

    /// The value of `type_url`, mutably.
    pub fn get_mut(&mut self, type_url: &str) -> Option<&mut V> {
        self.entries.iter_mut().find(|(k, _)| k == type_url).map(|(_, v)| v)
    }

    /// Whether `type_url` has a value.
    pub fn contains_key(&self, type_url: &str) -> bool {
        self.get(type_url).is_some()
    }

    /// The value of `type_url`, inserted with `make` first when absent.
    pub fn get_or_insert_with(&mut self, type_url: &str, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.entries.iter().position(|(k, _)| k == type_url) {
            Some(i) => i,
            None => {
                self.entries.push((type_url.to_owned(), make()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }

    /// Sets the value of `type_url`, replacing any previous one.
    pub fn insert(&mut self, type_url: &str, value: V) {
        match self.get_mut(type_url) {
            Some(v) => *v = value,
            None => self.entries.push((type_url.to_owned(), value)),
        }
    }

    /// Removes `type_url` and returns its value.
    pub fn remove(&mut self, type_url: &str) -> Option<V> {
        let i = self.entries.iter().position(|(k, _)| k == type_url)?;
        Some(self.entries.remove(i).1)
    }

    /// The type URLs, in insertion order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The entries, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

/// Whether any Envoy type of a stream ([`crate::type_url::is_envoy_type`]) has a response the client
/// has not answered yet (its state is [`SyncState::Sent`]): what flow control waits on
/// ([`crate::AdsConfig::flow_control`]). Other types are not always answered (istiod's MCP client
/// never ACKs MeshConfig), so they are not waited for.
pub(crate) fn awaits_answer<'a>(states: impl IntoIterator<Item = (&'a String, SyncState)>) -> bool {
    states.into_iter().any(|(t, s)| s == SyncState::Sent && crate::type_url::is_envoy_type(t))
}

#[cfg(test)]
mod tests {
    use super::TypeMap;

    #[test]
    fn type_map_inserts_replaces_and_removes_by_key() {
        let mut m = TypeMap::default();
        assert!(!m.contains_key("cds"));
        *m.get_or_insert_with("cds", || 1) += 10;
        m.insert("eds", 2);
        m.insert("cds", 3);
        assert_eq!(m.get("cds"), Some(&3));
        assert_eq!(*m.get_or_insert_with("eds", || 99), 2);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["cds", "eds"]);
        assert_eq!(m.remove("cds"), Some(3));
        assert_eq!(m.remove("cds"), None);
        assert!(!m.contains_key("cds"));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["eds"]);
    }
}
