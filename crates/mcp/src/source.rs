//! [`McpSource`]: the `xds://` config source, the [`Feed`] of a read-only [`config::ReadOnlySource`]
//! (`ReadOnlySource::new(source)`, the [`model::ConfigStoreController`]; Istio fills a
//! `pilot/pkg/config/memory` controller from `pkg/adsc`).

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use api::{Kind, networking::destination_rule::ClientTlsSettings};
use config::{Feed, MemoryStore, QueueOptions, parse::ParseOptions};
use model::{Config, ConfigKey, ConfigStore, Shutdown, store::RunFuture};

use crate::apply::InvalidResource;

/// Applies a mesh config received from the server: given the MeshConfig as mesh config JSON
/// (Istio's field names), returns the warnings to log, or an error that NACKs the response.
pub type MeshHandler = Arc<dyn Fn(&serde_json::Value) -> Result<Vec<String>, String> + Send + Sync>;

/// Who the client says it is (the node of its requests), as istiod's MCP client: node id
/// `sidecar~IP~POD_NAME.POD_NAMESPACE~POD_NAMESPACE.svc.cluster.local`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIdentity {
    /// `POD_NAME` (istiod's client: `test-1` when empty).
    pub pod_name: String,
    /// `POD_NAMESPACE` (istiod: `istio-system`).
    pub pod_namespace: String,
    /// The IP in the node id; `None` takes the local address of the connection to the server.
    pub ip: Option<String>,
}

impl Default for NodeIdentity {
    /// istiod's defaults: pod `test-1` in `istio-system`, the IP of the connection.
    fn default() -> Self {
        NodeIdentity::from_lookup(|_| None)
    }
}

impl NodeIdentity {
    /// From `POD_NAME`, `POD_NAMESPACE` and `INSTANCE_IP` read through `lookup` (the binary's one
    /// snapshot of the environment; tests a map), with istiod's defaults for unset or empty ones.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> NodeIdentity {
        let var = |k: &str| lookup(k).filter(|v| !v.is_empty());
        NodeIdentity {
            pod_name: var("POD_NAME").unwrap_or_else(|| "test-1".into()),
            pod_namespace: var("POD_NAMESPACE").unwrap_or_else(|| "istio-system".into()),
            ip: var("INSTANCE_IP"),
        }
    }

    /// The node id for `ip`.
    pub fn node_id(&self, ip: &str) -> String {
        let (pod, ns) = (&self.pod_name, &self.pod_namespace);
        format!("sidecar~{ip}~{pod}.{ns}~{ns}.svc.cluster.local")
    }
}

/// Settings of an [`McpSource`].
#[derive(Clone)]
pub struct McpOptions {
    /// `HOST:PORT` of the server (the `xds://` address without the scheme).
    pub address: String,
    /// The config source's `tlsSettings`; `None` dials plaintext ([`crate::tls`]).
    pub tls: Option<ClientTlsSettings>,
    /// How objects are read (domain suffix).
    pub parse: ParseOptions,
    /// This control plane's revision (`REVISION`): objects labelled `istio.io/rev` otherwise are
    /// skipped; also sent as the node's `ISTIO_REVISION`.
    pub revision: Option<String>,
    /// Kinds subscribed to (default: Istio's own kinds, [`Kind::ISTIO`], as istiod's
    /// `collections.Pilot`; kinds MCP does not carry, such as the Gateway API's, are never subscribed
    /// to and never waited for).
    pub kinds: Vec<Kind>,
    /// The node of the requests (default: istiod's, [`NodeIdentity::default`]; the binary sets
    /// the one of its environment).
    pub node: NodeIdentity,
    /// Reconnect backoff: first delay and cap (doubling in between). Default 500 ms and 30 s.
    pub backoff: (Duration, Duration),
    /// Retry settings of the event queue.
    pub queue: QueueOptions,
    /// What to do with a MeshConfig from the server; `None` subscribes to no MeshConfig.
    pub mesh_handler: Option<MeshHandler>,
}

impl std::fmt::Debug for McpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpOptions")
            .field("address", &self.address)
            .field("revision", &self.revision)
            .field("node", &self.node)
            .field("mesh_handler", &self.mesh_handler.is_some())
            .finish_non_exhaustive()
    }
}

impl McpOptions {
    /// Options for `address` (`HOST:PORT`) with the defaults.
    pub fn new(address: impl Into<String>) -> McpOptions {
        McpOptions {
            address: address.into(),
            tls: None,
            parse: ParseOptions::default(),
            revision: None,
            kinds: Kind::ISTIO.to_vec(),
            node: NodeIdentity::default(),
            backoff: (Duration::from_millis(500), Duration::from_secs(30)),
            queue: QueueOptions::default(),
            mesh_handler: None,
        }
    }
}

/// What an [`McpSource`] reports (for `/ready`, `/debug` and tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McpStatus {
    /// A stream to the server is open now.
    pub connected: bool,
    /// Kinds that have had at least one answer.
    pub answered: usize,
    /// Kinds subscribed to.
    pub subscribed: usize,
    /// Why the last connection attempt or stream failed, if one did.
    pub last_error: Option<String>,
    /// Responses received (all types, MeshConfig included).
    pub responses: u64,
    /// Responses NACKed.
    pub nacks: u64,
    /// Connections made (the first included).
    pub connections: u64,
    /// The invalid resources of the latest responses (their last good copies are in force).
    pub invalid: Vec<InvalidResource>,
    /// The `version_info` of the last response per type URL.
    pub versions: BTreeMap<String, String>,
}

/// The MCP-over-xDS client config source (one `xds://` entry of mesh config `configSources`), the
/// [`Feed`] of a [`config::ReadOnlySource`]. Cheap to clone (a handle). See the crate documentation
/// for the protocol and rules.
#[derive(Clone)]
pub struct McpSource {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for McpSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSource").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) options: McpOptions,
    pub(crate) dialer: Option<crate::tls::TlsDialer>,
    pub(crate) store: MemoryStore,
    pub(crate) state: Mutex<State>,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) answered: HashSet<Kind>,
    pub(crate) status: McpStatus,
    /// Invalid resources per kind, from the latest response of the kind.
    pub(crate) invalid: BTreeMap<Kind, Vec<InvalidResource>>,
}

impl McpSource {
    /// A source reading from `options.address`. Nothing is dialed until its
    /// [`config::ReadOnlySource`] runs.
    ///
    /// # Errors
    /// Unusable `tlsSettings` (the message names the field).
    pub fn new(options: McpOptions) -> Result<McpSource, String> {
        let name = format!("xds://{}", options.address);
        let dialer =
            crate::tls::dialer(&options.address, options.tls.as_ref()).map_err(|e| format!("{name}: {e}"))?;
        let store = MemoryStore::read_only(name.clone(), &options.kinds, options.queue.clone());
        let status = McpStatus { subscribed: options.kinds.len(), ..McpStatus::default() };
        Ok(McpSource {
            inner: Arc::new(Inner {
                name,
                options,
                dialer,
                store,
                state: Mutex::new(State { status, ..State::default() }),
            }),
        })
    }

    /// The store the responses fill.
    pub fn store(&self) -> &MemoryStore {
        &self.inner.store
    }

    /// The current status.
    pub fn status(&self) -> McpStatus {
        let state = self.inner.state();
        let mut status = state.status.clone();
        status.answered = state.answered.len();
        status.invalid = state.invalid.values().flatten().cloned().collect();
        status
    }
}

impl Inner {
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl McpSource {
    /// Which objects of `kind` are held now, by key.
    pub(crate) fn held(&self, kind: Kind) -> BTreeMap<ConfigKey, Arc<Config>> {
        self.inner.store.list(kind, None).into_iter().map(|c| (c.key(), c)).collect()
    }
}

impl Feed for McpSource {
    fn store(&self) -> &MemoryStore {
        &self.inner.store
    }

    /// `xds://HOST:PORT` for every object it holds.
    fn source_of(&self, _key: &ConfigKey) -> Option<String> {
        Some(self.inner.name.clone())
    }

    /// The client (connect, subscribe, apply responses, reconnect with backoff) until `shutdown`.
    fn run(&self, shutdown: Shutdown) -> RunFuture {
        Box::pin(crate::client::run(self.clone(), shutdown))
    }

    /// Once every subscribed kind has had one answer (MeshConfig not counted, as istiod).
    fn loaded(&self) -> bool {
        let subscribed = self.inner.options.kinds.iter().filter(|k| Kind::ISTIO.contains(k)).count();
        self.inner.state().answered.len() >= subscribed
    }

    /// How many kinds have answered, or why the server has not.
    fn not_synced_reason(&self) -> Option<String> {
        let status = self.status();
        let name = &self.inner.name;
        Some(match (status.answered, &status.last_error) {
            (0, Some(err)) => format!("config source {name} has not answered: {err}"),
            (0, None) => format!("config source {name} has not answered yet"),
            (n, _) => format!("config source {name} has answered {n} of {} config types", status.subscribed),
        })
    }
}
