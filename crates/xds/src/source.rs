//! The seam between the protocol engine and the rest of meshpilot: [`ResourceSource`].
//!
//! The engine knows xDS (subscriptions, nonces, versions, ACK/NACK, delta bookkeeping, push order);
//! it knows nothing about Istio config. Whatever owns config (meshpilot's DiscoveryServer and its
//! generators) implements [`ResourceSource`]: it reads each stream's node into its own node type
//! ([`ResourceSource::node`]; meshpilot's is Istio's `Proxy`), and given that node, a type URL, the
//! names to produce and why ([`Trigger`]), it returns the [`Resource`]s. Server-side changes reach
//! connections as [`PushEvent`]s through the [`ConnectionRegistry`](crate::ConnectionRegistry).
//!
//! ```text
//!   DiscoveryServer ── registry.push_all(P) ──► per-connection slot (one pending, merged)
//!                                                   │ wake
//!   Envoy ◄── responses ◄── engine (per stream) ◄───┘
//!         ──► requests ──►    │  generate(ctx, GenerateRequest { proxy, type_url, watch, trigger })
//!                             ▼
//!                        ResourceSource (generators; pure, no I/O)
//! ```

use std::collections::BTreeSet;

use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

use crate::{node::NodeParts, server::StreamCaller};

/// One resource to send: its name, its version and the encoded message.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The resource name (cluster name, listener name, route configuration name, …).
    pub name: String,
    /// The resource's version. Delta xDS compares it with what the client holds to skip unchanged
    /// resources, so it must change whenever the content changes. [`Resource::new`] uses a hash of
    /// the encoded message; an empty version is replaced by that hash before sending.
    pub version: String,
    /// The message packed as `Any`; its `type_url` must be the type URL of the response (resources of
    /// another type are dropped and counted as internal errors, never sent), except for MCP-over-xDS
    /// config types (see [`crate::type_url::resource_type_matches`]).
    pub body: Any,
}

impl Resource {
    /// Packs `message` (with its own type URL, e.g. `T::type_url()`, never a filter name) with a
    /// content-hash version.
    pub fn new<M: Message + Name>(name: impl Into<String>, message: &M) -> Self {
        Self::from_any(name, Any { type_url: M::type_url(), value: message.encode_to_vec() })
    }

    /// Wraps an already packed message, with a content-hash version.
    pub fn from_any(name: impl Into<String>, body: Any) -> Self {
        let version = content_version(&body);
        Resource { name: name.into(), version, body }
    }

    /// Replaces the version (e.g. with a config generation number).
    #[must_use]
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }
}

/// A stable 64-bit FNV-1a hash of a packed message (type URL and bytes), as 16 hex digits: the
/// default [`Resource::version`].
pub fn content_version(body: &Any) -> String {
    format!("{:016x}", fnv1a(fnv1a(FNV_OFFSET, body.type_url.as_bytes()), &body.value))
}

pub(crate) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

pub(crate) fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// What a [`ResourceSource`] returns for one type.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Generated {
    /// The response version (`version_info` in SotW, `system_version_info` in Delta), e.g. the
    /// config snapshot's version.
    pub version: String,
    /// The resources.
    pub resources: Vec<Resource>,
    /// `None`: `resources` is the complete set for the requested [`Watch`]; the engine works out
    /// what the client must delete (Delta `removed_resources`). `Some(names)`: an incremental result
    /// — only changed resources plus these removed names. Incremental results are only valid where
    /// the protocol allows partial responses: Delta, or SotW for named types (RDS, EDS); for SotW
    /// Listener/Cluster the engine refuses them (logged, counted as an internal error, not sent).
    pub removed: Option<Vec<String>>,
    /// `control_plane.identifier` of the response (Envoy's `config.core.v3.ControlPlane`), when set:
    /// istiod sets it on its `istio.io/debug/syncz` answers only (`xds.ControlPlane`), as JSON
    /// `{"Component":"istiod","ID":…,"Info":{"version":…}}` that `istioctl version --remote` reads.
    pub control_plane: Option<String>,
}

impl Generated {
    /// The complete set for the watch.
    pub fn full(version: impl Into<String>, resources: Vec<Resource>) -> Self {
        Generated { version: version.into(), resources, removed: None, control_plane: None }
    }

    /// Only changed resources plus explicit removals.
    pub fn incremental(version: impl Into<String>, resources: Vec<Resource>, removed: Vec<String>) -> Self {
        Generated { version: version.into(), resources, removed: Some(removed), control_plane: None }
    }

    /// Sets the response's `control_plane.identifier`.
    #[must_use]
    pub fn with_control_plane(mut self, identifier: impl Into<String>) -> Self {
        self.control_plane = Some(identifier.into());
        self
    }
}

/// Which resources of a type a client watches (or which to generate now).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watch {
    /// All resources of the type that apply to the proxy (xDS wildcard).
    pub wildcard: bool,
    /// Explicitly named resources (in addition to the wildcard, if set).
    pub names: BTreeSet<String>,
}

impl Watch {
    /// A wildcard watch with no explicit names.
    pub fn wildcard() -> Self {
        Watch { wildcard: true, names: BTreeSet::new() }
    }

    /// A watch of exactly these names.
    pub fn names<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Watch { wildcard: false, names: names.into_iter().map(Into::into).collect() }
    }

    /// Whether the watch covers `name`.
    pub fn covers(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }

    /// Whether the watch covers nothing.
    pub fn is_empty(&self) -> bool {
        !self.wildcard && self.names.is_empty()
    }
}

/// The xDS transport protocol variant of a stream (Envoy's xDS protocol doc: "State of the World" or
/// "Incremental"); named `Variant` so as not to clash with a port's application `api::protocol::Protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// State of the World (`StreamAggregatedResources`).
    Sotw,
    /// Incremental (`DeltaAggregatedResources`).
    Delta,
    /// No stream: a proxy polling the REST-JSON endpoints (`POST /v3/discovery:clusters`, …; Envoy's
    /// `api_type: REST`). It sends no nonce and never ACKs or NACKs ([`crate::polling`]).
    Rest,
}

impl Variant {
    /// `sotw`, `delta` or `rest`.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Sotw => "sotw",
            Variant::Delta => "delta",
            Variant::Rest => "rest",
        }
    }
}

/// Why the engine asks for resources.
#[derive(Debug)]
pub enum Trigger<'a, P> {
    /// The client asked: first request for the type on the stream (also a reconnect), or newly
    /// subscribed names. Return the resources, even an empty set: the client waits for the answer
    /// (Envoy stays un-ready up to its initial fetch timeout). If the source returns `None`, the
    /// engine answers with "no change" where the protocol has one (Delta; SotW RDS/EDS) and sends
    /// nothing for SotW Listener/Cluster, where an empty response would delete the client's set.
    Request,
    /// The server side pushed this event (see [`ConnectionRegistry`](crate::ConnectionRegistry)).
    /// Return `None` when the event does not change this type for this proxy: nothing is sent.
    Push(&'a P),
    /// A type this one depends on was just sent: endpoints after clusters (Envoy warms a changed
    /// cluster until its ClusterLoadAssignment arrives, and a Delta client does not ask again).
    /// Return the current resources for the watch, which for SotW also names the new clusters'
    /// assignments (sent before Envoy asks for them: one EDS response per CDS change). Delta re-sends
    /// those of the clusters just added or changed even if the client holds their versions, and of
    /// the others only what changed.
    Dependency,
}

impl<P> Clone for Trigger<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Trigger<'_, P> {}

/// One call to [`ResourceSource::generate`].
#[derive(Debug)]
pub struct GenerateRequest<'a, N, P> {
    /// The connected proxy (the source's node type, [`ResourceSource::Node`]).
    pub proxy: &'a N,
    /// The type to generate.
    pub type_url: &'a str,
    /// The stream's protocol variant.
    pub protocol: Variant,
    /// What to generate: the client's whole subscription, or only newly subscribed names.
    pub watch: &'a Watch,
    /// Why.
    pub trigger: Trigger<'a, P>,
}

/// A server-side change delivered to connections. At most one event is pending per connection;
/// a newer event is folded into the pending one with [`PushEvent::merge`] (Istio's push queue).
///
/// Implemented for every type that can extend itself with newer events (`Extend<Self>`), so the
/// control plane's event type needs no dependency on this crate: meshpilot's `PushRequest` extends
/// itself as Istio's `PushRequest.Merge`, and `()` ("something changed, regenerate everything") is
/// covered by the standard library's `Extend<()> for ()`.
pub trait PushEvent: Send + Sync + 'static {
    /// Folds `newer` into `self` (e.g. union the changed config keys; keep the newer snapshot).
    fn merge(&mut self, newer: Self)
    where
        Self: Sized;
}

impl<T: Extend<T> + Send + Sync + 'static> PushEvent for T {
    fn merge(&mut self, newer: Self) {
        self.extend(std::iter::once(newer));
    }
}

/// What the engine needs to know of a connected node, borrowed from the source's node type
/// ([`ResourceSource::node_info`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeInfo<'a> {
    /// The start of the connection id `<id>-<counter>` (Istio's proxy id, `pod.namespace`).
    pub id: &'a str,
    /// The namespace the node claims, checked against the caller's verified namespaces when the port
    /// authenticates (`AdsConfig::identity_check`).
    pub namespace: &'a str,
    /// The client's version, the `version` label of `pilot_xds` (Istio's `ISTIO_VERSION`).
    pub version: &'a str,
    /// The node as it named itself, for log lines (`node.id`).
    pub node_id: &'a str,
}

/// Errors a [`ResourceSource`] reports to the engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The node of the first request is malformed (e.g. an id not in the control plane's format).
    /// The stream ends with `InvalidArgument` and this message, which says what was expected.
    #[error("{0}")]
    InvalidNode(String),
    /// The proxy may not connect (e.g. its type is not served) or may not read what it asked for
    /// (a debug path outside its namespace's). The stream ends with `PermissionDenied` and this
    /// message, also when [`ResourceSource::generate`] returns it.
    #[error("connection refused: {0}")]
    Refused(String),
    /// The proxy's caller must authenticate first (e.g. the `api` generator on the plaintext port, a
    /// debug type without a verified identity). The stream ends with `Unauthenticated` and this
    /// message, also when [`ResourceSource::generate`] returns it.
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller may not read what it asked for (e.g. a debug path outside what its namespace may
    /// read). The stream ends with `PermissionDenied` and exactly this message (istiod's wording).
    #[error("{0}")]
    Denied(String),
    /// A request the source cannot answer as asked (e.g. a debug type with not exactly one resource
    /// name). The stream ends with `InvalidArgument` and this message (istiod ends its debug streams so).
    #[error("{0}")]
    InvalidRequest(String),
    /// The control plane is not ready to serve (e.g. caches not synced). The stream ends with
    /// `Unavailable`; the proxy retries.
    #[error("not ready: {0}")]
    NotReady(String),
    /// Generating a type failed. The engine logs it, counts `pilot_total_xds_internal_errors`, sends
    /// nothing for that type and keeps the stream open.
    #[error("generating {type_url}: {message}")]
    Generate {
        /// The type being generated.
        type_url: String,
        /// What went wrong.
        message: String,
    },
}

/// What the engine asks of the rest of the control plane. Implementations are pure with respect to
/// the engine: no sockets, no waiting; they read an immutable snapshot.
pub trait ResourceSource: Send + Sync + 'static {
    /// The server-side change event (Istio's `PushRequest`).
    type Push: PushEvent;
    /// The connected node as the control plane models it (meshpilot: Istio's `Proxy`, read from the
    /// node id `TYPE~IP~ID~DOMAIN` and the node metadata).
    type Node: Send + Sync + 'static;
    /// Per-connection state the source keeps (e.g. the proxy's sidecar scope).
    type Context: Send + 'static;

    /// Reads the node of a stream's first request, already present and within the engine's size
    /// limits ([`crate::node::node_parts`]), together with what the caller proved (`None` on a port
    /// that does not authenticate).
    ///
    /// # Errors
    /// [`SourceError::InvalidNode`] (or any other variant) ends the stream before it is registered.
    fn node(&self, node: NodeParts, caller: Option<&StreamCaller>) -> Result<Self::Node, SourceError>;

    /// The engine's view of a node: connection id, claimed namespace, version, node id for logs.
    fn node_info<'a>(&self, node: &'a Self::Node) -> NodeInfo<'a>;

    /// Called once per stream after the node is read and the caller checked, before any response.
    ///
    /// # Errors
    /// [`SourceError::Refused`] or [`SourceError::NotReady`] end the stream.
    fn connect(&self, proxy: &Self::Node) -> Result<Self::Context, SourceError>;

    /// Whether `push` concerns this proxy at all (Istio's `ProxyNeedsPush`); `false` skips every
    /// type. Default: always.
    fn needs_push(&self, _ctx: &mut Self::Context, _proxy: &Self::Node, _push: &Self::Push) -> bool {
        true
    }

    /// The resources of `request.type_url` for `request.watch`, or `None` when nothing needs
    /// sending (see [`Trigger`]).
    ///
    /// # Errors
    /// [`SourceError::Generate`] or [`SourceError::NotReady`]: the engine sends nothing for the type
    /// and keeps the stream. [`SourceError::Unauthenticated`], [`SourceError::Refused`],
    /// [`SourceError::Denied`], [`SourceError::InvalidRequest`] and [`SourceError::InvalidNode`] end the stream with their status.
    fn generate(
        &self,
        ctx: &mut Self::Context,
        request: &GenerateRequest<'_, Self::Node, Self::Push>,
    ) -> Result<Option<Generated>, SourceError>;

    /// Called once when the stream ends.
    fn disconnect(&self, _ctx: Self::Context, _proxy: &Self::Node) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;

    #[test]
    fn resource_new_packs_with_the_message_type_url_and_a_stable_version() {
        let c = Cluster { name: "backend".into(), ..Default::default() };
        let r = Resource::new("backend", &c);
        assert_eq!(r.body.type_url, crate::type_url::CLUSTER);
        assert_eq!(r.version, Resource::new("backend", &c).version);
        assert_eq!(r.version.len(), 16);
        let c2 = Cluster { name: "backend2".into(), ..Default::default() };
        assert_ne!(r.version, Resource::new("backend", &c2).version);
        assert_eq!(r.clone().with_version("7").version, "7");
    }

    #[test]
    fn watch_covers() {
        assert!(Watch::wildcard().covers("x"));
        assert!(Watch::names(["a"]).covers("a"));
        assert!(!Watch::names(["a"]).covers("b"));
        assert!(Watch::default().is_empty());
    }
}
