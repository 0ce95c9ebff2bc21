//! Polling discovery: Envoy's REST-JSON xDS (`api_config_source: {api_type: REST}`), answered from
//! the same generators and the same published snapshot as ADS ([`NetworkingSource`]).
//!
//! Envoy's REST client (`source/extensions/config_subscription/rest/http_subscription_impl.cc`,
//! `source/common/http/rest_api_fetcher.cc`) sends `POST /v3/discovery:<type>` ([`RestType`]) with a
//! JSON `DiscoveryRequest` (the proto3 JSON mapping) carrying the whole node, its last accepted
//! `version_info` and, for RDS and EDS, the resource names (one route configuration or one cluster per
//! subscription); its `Host` header is the name of the cluster it polls through. It takes:
//! - `200` with a JSON `DiscoveryResponse` (`@type` in each resource) as an update, which it applies or
//!   rejects (then only its `update_rejected` counter and log say so: no nonce, no `error_detail`);
//! - `304 Not Modified` as "no change" ([`RestXds::poll`] answers it when `version_info` is the version
//!   of the newest published snapshot);
//! - any other status as a connection failure (it polls again after `refresh_delay` plus up to one more).
//!
//! Listeners and clusters sent to a polling proxy point RDS, EDS, SDS and ECDS at a REST
//! `api_config_source` instead of `ads {}` (a REST-only Envoy has no ADS and would reject them):
//! [`RestConfigSource`], read per request from the node metadata and the `Host` header.
//!
//! On the secure port ([`crate::secure`]) the caller is authenticated as for ADS there (its client
//! certificate's SPIFFE id, or a bearer token): [`PollMeta::caller`]. A node of a namespace none of the
//! caller's identities belongs to is refused (`403`, Istio's `PILOT_ENABLE_XDS_IDENTITY_CHECK`), and
//! SDS answers with what ADS on that port gives the same identity. Without a caller (the plain HTTP
//! port) SDS is refused (`403`): secrets go only to authenticated proxies (docs/SECURITY.md).
//!
//! A `304` is decided before the node is read ([`RequestHead`]): when `versionInfo` is the newest
//! version and the same node (same bytes, same caller) was read by an earlier poll of this proxy, the
//! poll is recorded against that proxy and answered without decoding the request.
//!
//! Every poll is recorded in the [`PollingRegistry`] (`/debug/syncz`, `proxy-status`, the status page).
//! docs/REST-XDS.md.

use std::{
    borrow::Cow,
    hash::{Hash as _, Hasher as _},
    net::SocketAddr,
    sync::Arc,
    time::Duration,
};

use envoy_types::pb::{
    envoy::{
        config::core::v3::{ApiConfigSource, ApiVersion, api_config_source::ApiType},
        service::discovery::v3::DiscoveryRequest,
    },
    google::protobuf::{Any, Duration as PbDuration},
};
use model::push::node::Proxy;
use prost::Message;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, Kind, MessageDescriptor, ReflectMessage, Value,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use xds::{
    GenerateRequest, Generated, NodeInfo, Poll, PollOutcome, PollingRegistry, ResourceSource, SourceError,
    StreamCaller, Trigger, Variant, Watch, type_url,
};

use crate::NetworkingSource;

/// The largest request body accepted, bytes: 4 MiB, the largest message the ADS ports accept. Every
/// poll carries the whole node (metadata up to 1 MiB of protobuf, `xds::node::MAX_NODE_METADATA_BYTES`,
/// and Envoy's list of `extensions`, tens of KiB of JSON), so any node ADS accepts fits.
pub const MAX_REQUEST_BYTES: usize = 4 << 20;

/// Node metadata key naming the cluster a polling proxy reaches meshpilot through (the
/// `cluster_names` of the REST config sources meshpilot sends it). Without it, the request's `Host`
/// header, which Envoy's REST client sets to that cluster's name; without either, `xds-grpc`.
pub const CLUSTER_METADATA_KEY: &str = "REST_XDS_CLUSTER";

/// Node metadata key with the `refresh_delay` of the REST config sources meshpilot sends a polling
/// proxy (a Go duration, `1s`, `200ms`); default [`DEFAULT_REFRESH_DELAY`].
pub const REFRESH_DELAY_METADATA_KEY: &str = "REST_XDS_REFRESH_DELAY";

/// The `refresh_delay` of the REST config sources when the node does not set one: 1 s.
pub const DEFAULT_REFRESH_DELAY: Duration = Duration::from_secs(1);

/// The cluster name used when neither the metadata nor the `Host` header name one (Istio's bootstrap
/// name of the control-plane cluster).
pub const DEFAULT_CLUSTER: &str = "xds-grpc";

/// Shortest `refresh_delay` meshpilot puts in a config source (a smaller metadata value is raised to it).
pub const MIN_REFRESH_DELAY: Duration = Duration::from_millis(100);

/// The xDS types served over REST, by the last path segment (`/v3/discovery:clusters`, …: the
/// `google.api.http` `post` rules of Envoy's discovery services).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestType {
    /// `/v3/discovery:clusters` (CDS).
    Clusters,
    /// `/v3/discovery:listeners` (LDS).
    Listeners,
    /// `/v3/discovery:routes` (RDS).
    Routes,
    /// `/v3/discovery:endpoints` (EDS).
    Endpoints,
    /// `/v3/discovery:secrets` (SDS: refused on plain HTTP).
    Secrets,
}

impl RestType {
    /// Every type, in path order.
    pub const ALL: [RestType; 5] =
        [RestType::Clusters, RestType::Listeners, RestType::Routes, RestType::Endpoints, RestType::Secrets];

    /// The path Envoy posts to.
    pub fn path(self) -> &'static str {
        match self {
            RestType::Clusters => "/v3/discovery:clusters",
            RestType::Listeners => "/v3/discovery:listeners",
            RestType::Routes => "/v3/discovery:routes",
            RestType::Endpoints => "/v3/discovery:endpoints",
            RestType::Secrets => "/v3/discovery:secrets",
        }
    }

    /// The resource type URL.
    pub fn type_url(self) -> &'static str {
        match self {
            RestType::Clusters => type_url::CLUSTER,
            RestType::Listeners => type_url::LISTENER,
            RestType::Routes => type_url::ROUTE,
            RestType::Endpoints => type_url::ENDPOINT,
            RestType::Secrets => type_url::SECRET,
        }
    }

    /// The type whose path is `path`.
    pub fn from_path(path: &str) -> Option<RestType> {
        Self::ALL.into_iter().find(|t| t.path() == path)
    }

    fn short(self) -> &'static str {
        match self {
            RestType::Clusters => "cds",
            RestType::Listeners => "lds",
            RestType::Routes => "rds",
            RestType::Endpoints => "eds",
            RestType::Secrets => "sds",
        }
    }
}

/// The answer to one poll: an HTTP status and its body (JSON for `200`, a plain-text reason
/// otherwise, empty for `304`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestReply {
    /// `200`, `304`, `400`, `403`, `500` or `503`.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

impl RestReply {
    fn text(status: u16, message: impl Into<String>) -> Self {
        let mut body = message.into().into_bytes();
        body.push(b'\n');
        RestReply { status, body }
    }

    /// Whether the body is a JSON `DiscoveryResponse`.
    pub fn is_json(&self) -> bool {
        self.status == 200
    }
}

/// Where the config sources of listeners and clusters sent to a polling proxy point: a REST
/// `api_config_source` with these `cluster_names` and `refresh_delay`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestConfigSource {
    /// The cluster the proxy reaches meshpilot through.
    pub cluster: String,
    /// How often the proxy polls the RDS / EDS / SDS / ECDS subscriptions these sources start.
    pub refresh_delay: Duration,
}

impl RestConfigSource {
    /// The config source of a proxy with node `metadata` whose request had `host` as its `Host` header
    /// (see [`CLUSTER_METADATA_KEY`], [`REFRESH_DELAY_METADATA_KEY`]).
    pub fn for_node(metadata: &serde_json::Map<String, serde_json::Value>, host: Option<&str>) -> Self {
        let text =
            |key: &str| metadata.get(key).and_then(|v| v.as_str()).map(str::trim).filter(|s| !s.is_empty());
        let cluster = text(CLUSTER_METADATA_KEY)
            .or(host.map(str::trim).filter(|h| !h.is_empty()))
            .unwrap_or(DEFAULT_CLUSTER)
            .to_string();
        let refresh_delay = text(REFRESH_DELAY_METADATA_KEY)
            .and_then(|d| validation::common::parse_go_duration(d).ok())
            .unwrap_or(DEFAULT_REFRESH_DELAY)
            .max(MIN_REFRESH_DELAY);
        RestConfigSource { cluster, refresh_delay }
    }

    /// The `api_config_source` that replaces `ads {}`.
    pub fn api_config_source(&self) -> ApiConfigSource {
        ApiConfigSource {
            api_type: ApiType::Rest as i32,
            transport_api_version: ApiVersion::V3 as i32,
            cluster_names: vec![self.cluster.clone()],
            refresh_delay: Some(PbDuration {
                seconds: self.refresh_delay.as_secs() as i64,
                nanos: self.refresh_delay.subsec_nanos() as i32,
            }),
            ..Default::default()
        }
    }
}

fn pool() -> &'static DescriptorPool {
    envoyfilter::descriptors::pool()
}

fn descriptor(full_name: &str) -> Result<MessageDescriptor, String> {
    pool().get_message_by_name(full_name).ok_or_else(|| format!("{full_name} is not in Envoy's API"))
}

/// Reads a JSON `DiscoveryRequest` (the proto3 JSON mapping Envoy writes; unknown fields are ignored,
/// as a newer Envoy's node may carry fields this API version lacks).
///
/// # Errors
/// A message naming what is wrong and where (`… at line 1 column 42`).
pub fn decode_request(body: &[u8]) -> Result<DiscoveryRequest, String> {
    let desc = descriptor("envoy.service.discovery.v3.DiscoveryRequest")?;
    let mut de = serde_json::Deserializer::from_slice(body);
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let message = DynamicMessage::deserialize_with_options(desc, &mut de, &options)
        .and_then(|m| de.end().map(|()| m))
        .map_err(|e| format!("malformed DiscoveryRequest JSON: {e}"))?;
    message.transcode_to::<DiscoveryRequest>().map_err(|e| format!("malformed DiscoveryRequest: {e}"))
}

/// Points every `ads {}` config source inside `msg` (through nested messages, lists, maps and the
/// messages packed in `Any`s) at `api` instead; returns whether anything changed.
fn rewrite(msg: &mut DynamicMessage, api: &DynamicMessage) -> bool {
    let desc = msg.descriptor();
    match desc.full_name() {
        "envoy.config.core.v3.ConfigSource" => {
            if !msg.has_field_by_name("ads") {
                return false;
            }
            msg.clear_field_by_name("ads");
            msg.set_field_by_name("api_config_source", Value::Message(api.clone()));
            return true;
        }
        "google.protobuf.Any" => {
            let Some(Value::String(url)) = msg.get_field_by_name("type_url").map(|v| v.into_owned()) else {
                return false;
            };
            let Some(Value::Bytes(bytes)) = msg.get_field_by_name("value").map(|v| v.into_owned()) else {
                return false;
            };
            let Some(inner) = url.rsplit_once('/').and_then(|(_, name)| pool().get_message_by_name(name))
            else {
                return false;
            };
            let Ok(mut inner) = DynamicMessage::decode(inner, bytes) else { return false };
            if !rewrite(&mut inner, api) {
                return false;
            }
            msg.set_field_by_name("value", Value::Bytes(inner.encode_to_vec().into()));
            return true;
        }
        // Free-form data: no config source inside.
        "google.protobuf.Struct" | "google.protobuf.Value" | "google.protobuf.ListValue" => return false,
        _ => {}
    }
    let mut changed = false;
    for field in desc.fields() {
        let is_message = match field.kind() {
            Kind::Message(m) => {
                !m.is_map_entry() || matches!(m.map_entry_value_field().kind(), Kind::Message(_))
            }
            _ => false,
        };
        if !is_message || !msg.has_field(&field) {
            continue;
        }
        match msg.get_field_mut(&field) {
            Value::Message(m) => changed |= rewrite(m, api),
            Value::List(items) => {
                for item in items {
                    if let Value::Message(m) = item {
                        changed |= rewrite(m, api);
                    }
                }
            }
            Value::Map(entries) => {
                for value in entries.values_mut() {
                    if let Value::Message(m) = value {
                        changed |= rewrite(m, api);
                    }
                }
            }
            _ => {}
        }
    }
    changed
}

/// One resource as proto3 JSON with its `@type` first, its `ads {}` config sources pointed at `api`
/// when given.
fn resource_json(body: &Any, api: Option<&DynamicMessage>, out: &mut Vec<u8>) -> Result<(), String> {
    let name = body.type_url.rsplit_once('/').map_or(body.type_url.as_str(), |(_, n)| n);
    let mut message = DynamicMessage::decode(descriptor(name)?, body.value.as_slice())
        .map_err(|e| format!("{name} does not decode: {e}"))?;
    if let Some(api) = api {
        rewrite(&mut message, api);
    }
    let json = serde_json::to_vec(&message).map_err(|e| format!("{name} has no JSON form: {e}"))?;
    out.extend_from_slice(b"{\"@type\":");
    serde_json::to_writer(&mut *out, &body.type_url).map_err(|e| e.to_string())?;
    if json.len() > 2 {
        out.push(b',');
        out.extend_from_slice(&json[1..]);
    } else {
        out.push(b'}');
    }
    Ok(())
}

/// One resource as proto3 JSON with its `@type` first (how Envoy's admin and istiod's debug handlers
/// write an `Any`; the `/debug/edsz`-style dumps), its config sources as generated.
///
/// # Errors
/// A type that is not in Envoy's API, or bytes that do not decode as it.
pub fn any_json(body: &Any) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(body.value.len() * 2 + 64);
    resource_json(body, None, &mut out)?;
    Ok(out)
}

/// The JSON `DiscoveryResponse` of `generated` for `type_url` (proto3 JSON mapping, `@type` in each
/// resource, no nonce), with the `ads {}` config sources inside pointed at `source` when given.
///
/// # Errors
/// A resource whose type is not in Envoy's API (never for what the generators produce).
pub fn encode_response(
    type_url: &str,
    generated: &Generated,
    source: Option<&RestConfigSource>,
) -> Result<Vec<u8>, String> {
    let api = match source {
        Some(s) => {
            let desc = descriptor("envoy.config.core.v3.ApiConfigSource")?;
            Some(
                DynamicMessage::decode(desc, s.api_config_source().encode_to_vec().as_slice())
                    .map_err(|e| e.to_string())?,
            )
        }
        None => None,
    };
    let mut out =
        Vec::with_capacity(generated.resources.iter().map(|r| r.body.value.len() * 2).sum::<usize>() + 128);
    out.extend_from_slice(b"{\"versionInfo\":");
    serde_json::to_writer(&mut out, &generated.version).map_err(|e| e.to_string())?;
    out.extend_from_slice(b",\"resources\":[");
    for (i, r) in generated.resources.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        resource_json(&r.body, api.as_ref(), &mut out)?;
    }
    out.extend_from_slice(b"],\"typeUrl\":");
    serde_json::to_writer(&mut out, type_url).map_err(|e| e.to_string())?;
    out.push(b'}');
    Ok(out)
}

/// What a poll needs to be answered `304`: the request's `versionInfo`, `typeUrl`, `resourceNames`
/// and its node as raw JSON (not decoded). Read with serde alone, skipping everything else, at a
/// small part of the cost of [`decode_request`] (BENCHMARKS.md, "REST-JSON xDS").
#[derive(Debug, Deserialize)]
pub struct RequestHead<'a> {
    /// `versionInfo` (proto3 JSON also accepts `version_info`).
    #[serde(rename = "versionInfo", alias = "version_info", default, borrow)]
    pub version_info: Cow<'a, str>,
    /// `typeUrl`.
    #[serde(rename = "typeUrl", alias = "type_url", default, borrow)]
    pub type_url: Cow<'a, str>,
    /// `resourceNames`.
    #[serde(rename = "resourceNames", alias = "resource_names", default)]
    pub resource_names: Vec<String>,
    /// The node, as sent.
    #[serde(default, borrow)]
    pub node: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct NodeId<'a> {
    #[serde(default, borrow)]
    id: Cow<'a, str>,
}

impl<'a> RequestHead<'a> {
    /// Reads the head of a JSON `DiscoveryRequest`; `None` when the body is not a JSON object of these
    /// fields (the full decode then says what is wrong).
    pub fn read(body: &'a [u8]) -> Option<Self> {
        serde_json::from_slice(body).ok()
    }

    /// The node's `id`, if the node is an object with a string `id`.
    pub fn node_id(&self) -> Option<Cow<'a, str>> {
        let node: NodeId<'a> = serde_json::from_str(self.node?.get()).ok()?;
        Some(node.id).filter(|id| !id.is_empty())
    }

    /// A key of the node as sent together with the caller's identities: two polls with the same key
    /// read to the same proxy and pass the same identity check.
    pub fn node_key(&self, caller: Option<&StreamCaller>) -> Option<u64> {
        let mut hasher = std::hash::DefaultHasher::new();
        self.node?.get().hash(&mut hasher);
        caller.map(|c| &c.identities).hash(&mut hasher);
        Some(hasher.finish())
    }
}

/// The status a poll gets for `version_info`: `true` (`304`) when it is the current version.
pub fn not_modified(client_version: &str, current: Option<&str>) -> bool {
    !client_version.is_empty() && current == Some(client_version)
}

/// The REST-JSON discovery service of one DiscoveryServer ([`crate::DiscoveryServer::rest_xds`]).
#[derive(Clone, Debug)]
pub struct RestXds {
    source: Arc<NetworkingSource>,
    polling: PollingRegistry<Proxy>,
}

/// What a poll's HTTP request carried besides its body.
#[derive(Debug, Clone, Copy, Default)]
pub struct PollMeta<'a> {
    /// The caller's address.
    pub peer: Option<SocketAddr>,
    /// The `Host` header (Envoy: the name of the cluster it polls through).
    pub host: Option<&'a str>,
    /// The authenticated caller (the secure port); `None` on a port that does not authenticate.
    pub caller: Option<&'a StreamCaller>,
    /// Refuse a node of a namespace none of `caller`'s identities belongs to (Istio's
    /// `PILOT_ENABLE_XDS_IDENTITY_CHECK`, as ADS on the same port).
    pub identity_check: bool,
}

impl RestXds {
    /// The service answering from `source`, recording polls in `polling`.
    pub fn new(source: Arc<NetworkingSource>, polling: PollingRegistry<Proxy>) -> Self {
        RestXds { source, polling }
    }

    /// The polling proxies.
    pub fn polling(&self) -> &PollingRegistry<Proxy> {
        &self.polling
    }

    /// Answers one poll of `kind` whose request body is `body` (see the module doc for the statuses).
    pub fn poll(&self, kind: RestType, body: &[u8], meta: PollMeta<'_>) -> RestReply {
        let reply = self.answer(kind, body, meta);
        metrics::counter!(crate::metrics::REST_POLLS, "type" => kind.short(), "code" => reply.status.to_string())
            .increment(1);
        reply
    }

    fn answer(&self, kind: RestType, body: &[u8], meta: PollMeta<'_>) -> RestReply {
        if body.len() > MAX_REQUEST_BYTES {
            return RestReply::text(
                413,
                format!("request of {} bytes is over the limit of {MAX_REQUEST_BYTES}", body.len()),
            );
        }
        let head = RequestHead::read(body);
        if let Some(reply) = head.as_ref().and_then(|h| self.fast_not_modified(kind, h, meta)) {
            return reply;
        }
        let node_key = head.as_ref().and_then(|h| h.node_key(meta.caller));
        let request = match decode_request(body) {
            Ok(r) => r,
            Err(e) => return RestReply::text(400, e),
        };
        if !request.type_url.is_empty() && request.type_url != kind.type_url() {
            return RestReply::text(
                400,
                format!(
                    "type_url {:?} was posted to {}, which serves {}",
                    request.type_url,
                    kind.path(),
                    kind.type_url()
                ),
            );
        }
        let parts = match xds::node::node_parts(request.node.as_ref()) {
            Ok(p) => p,
            Err(e) => return RestReply::text(400, e.to_string()),
        };
        let metadata = parts.metadata.clone();
        let proxy = match self.source.node(parts, meta.caller) {
            Ok(p) => Arc::new(p),
            Err(e) => return RestReply::text(400, e.to_string()),
        };
        if let Some(caller) = meta.caller.filter(|_| meta.identity_check)
            && let Err(status) = xds::check_identity(caller, &proxy.config_namespace)
        {
            tracing::warn!(node = %proxy.node_id, peer = ?meta.peer, "REST xDS: refusing poll: {}", status.message());
            xds::metrics::record_auth_failure("identity");
            return RestReply::text(403, status.message());
        }
        let names = request.resource_names;
        let record = |outcome: PollOutcome| {
            let NodeInfo { node_id, .. } = self.source.node_info(&proxy);
            let poll = Poll {
                type_url: kind.type_url(),
                names: &names,
                client_version: &request.version_info,
                outcome,
                at: std::time::SystemTime::now(),
            };
            self.polling.record_keyed(node_id, node_key, proxy.clone(), meta.peer, body.len(), &poll);
        };
        if kind == RestType::Secrets && meta.caller.is_none() {
            let message = "SDS over REST is refused on a port that does not authenticate its callers: this \
                           request carries no identity (no client certificate, no token), and secrets go \
                           only to authenticated proxies; poll the secure port with a workload certificate \
                           (docs/REST-XDS.md)";
            record(PollOutcome::Failed(message.into()));
            return RestReply::text(403, message);
        }
        let current = self.source.current_version();
        // Secrets are answered every time: a certificate can be renewed within one push version.
        if kind != RestType::Secrets && not_modified(&request.version_info, current.as_deref()) {
            record(PollOutcome::NotModified);
            return RestReply { status: 304, body: Vec::new() };
        }
        let (reply, outcome) = self.generate(kind, &proxy, &names, &metadata, meta.host);
        record(outcome);
        reply
    }

    /// The `304` of a poll whose version is current from a proxy whose node (and caller) is the one
    /// its entry was read from: recorded without decoding the request. `None`: read it all.
    fn fast_not_modified(
        &self,
        kind: RestType,
        head: &RequestHead<'_>,
        meta: PollMeta<'_>,
    ) -> Option<RestReply> {
        if kind == RestType::Secrets || (!head.type_url.is_empty() && head.type_url != kind.type_url()) {
            return None;
        }
        let current = self.source.current_version();
        if !not_modified(&head.version_info, current.as_deref()) {
            return None;
        }
        let node_id = head.node_id()?;
        let key = head.node_key(meta.caller)?;
        let poll = Poll {
            type_url: kind.type_url(),
            names: &head.resource_names,
            client_version: &head.version_info,
            outcome: PollOutcome::NotModified,
            at: std::time::SystemTime::now(),
        };
        self.polling
            .refresh(&node_id, key, meta.peer, &poll)
            .then(|| RestReply { status: 304, body: Vec::new() })
    }

    fn generate(
        &self,
        kind: RestType,
        proxy: &Proxy,
        names: &[String],
        metadata: &serde_json::Map<String, serde_json::Value>,
        host: Option<&str>,
    ) -> (RestReply, PollOutcome) {
        let fail = |status: u16, message: String| {
            (RestReply::text(status, message.clone()), PollOutcome::Failed(message))
        };
        let mut ctx = match self.source.connect(proxy) {
            Ok(c) => c,
            Err(e @ SourceError::NotReady(_)) => return fail(503, e.to_string()),
            Err(e @ (SourceError::Refused(_) | SourceError::Unauthenticated(_))) => {
                return fail(403, e.to_string());
            }
            Err(e) => return fail(400, e.to_string()),
        };
        let watch = if names.is_empty() { Watch::wildcard() } else { Watch::names(names.iter().cloned()) };
        let request = GenerateRequest {
            proxy,
            type_url: kind.type_url(),
            protocol: Variant::Rest,
            watch: &watch,
            trigger: Trigger::Request,
        };
        let generated = self.source.generate(&mut ctx, &request);
        self.source.disconnect(ctx, proxy);
        let generated = match generated {
            // The engine's own check before send: no resource of another type.
            Ok(Some(g)) => {
                let (g, dropped) = xds::server::check_resources(kind.type_url(), g);
                for (name, any_type) in dropped {
                    tracing::warn!(
                        proxy = %proxy.id,
                        "{}: dropping resource {name:?}: its Any type {any_type:?} is not the response type",
                        kind.short()
                    );
                    xds::metrics::record_internal_error();
                }
                g
            }
            Ok(None) => Generated::full(self.source.current_version().unwrap_or_default(), Vec::new()),
            Err(e) => return fail(500, e.to_string()),
        };
        let source = matches!(kind, RestType::Clusters | RestType::Listeners)
            .then(|| RestConfigSource::for_node(metadata, host));
        match encode_response(kind.type_url(), &generated, source.as_ref()) {
            Ok(body) => {
                let outcome = PollOutcome::Sent {
                    version: generated.version.clone(),
                    resources: generated.resources.len(),
                    bytes: generated.resources.iter().map(|r| r.body.value.len() as u64).sum(),
                };
                (RestReply { status: 200, body }, outcome)
            }
            Err(e) => fail(500, format!("encoding the response as JSON: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::{
        cluster::v3::{Cluster, cluster::EdsClusterConfig},
        core::v3::{ConfigSource, config_source::ConfigSourceSpecifier},
    };
    use xds::Resource;

    fn eds_cluster(name: &str) -> Cluster {
        Cluster {
            name: name.into(),
            eds_cluster_config: Some(EdsClusterConfig {
                eds_config: Some(ConfigSource {
                    config_source_specifier: Some(ConfigSourceSpecifier::Ads(Default::default())),
                    resource_api_version: ApiVersion::V3 as i32,
                    ..Default::default()
                }),
                service_name: String::new(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn requests_decode_from_envoys_json_and_errors_say_where() {
        let body = br#"{"versionInfo":"3","node":{"id":"sidecar~1.2.3.4~a.ns~ns.svc.cluster.local",
            "metadata":{"NAMESPACE":"ns"},"userAgentName":"envoy","someFutureField":1,
            "extensions":[{"name":"envoy.filters.http.router","category":"envoy.filters.http"}]},
            "resourceNames":["80"],"typeUrl":"type.googleapis.com/envoy.config.route.v3.RouteConfiguration"}"#;
        let r = decode_request(body).unwrap();
        assert_eq!((r.version_info.as_str(), r.resource_names.as_slice()), ("3", &["80".to_string()][..]));
        let node = r.node.unwrap();
        assert_eq!(node.user_agent_name, "envoy");
        assert_eq!(node.extensions.len(), 1);
        let e = decode_request(br#"{"versionInfo": 3}"#).unwrap_err();
        assert!(e.starts_with("malformed DiscoveryRequest JSON") && e.contains("column"), "{e}");
        assert!(decode_request(b"{\"versionInfo\":\"1\"} trailing").is_err());
    }

    #[test]
    fn responses_carry_type_and_rest_config_sources() {
        let generated =
            Generated::full("7", vec![Resource::new("outbound|80||a", &eds_cluster("outbound|80||a"))]);
        let source =
            RestConfigSource { cluster: "xds_cluster".into(), refresh_delay: Duration::from_millis(200) };
        let json = encode_response(type_url::CLUSTER, &generated, Some(&source)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["versionInfo"], "7");
        assert_eq!(v["typeUrl"], type_url::CLUSTER);
        let c = &v["resources"][0];
        assert_eq!(c["@type"], type_url::CLUSTER);
        assert_eq!(c["name"], "outbound|80||a");
        let eds = &c["edsClusterConfig"]["edsConfig"];
        assert!(eds.get("ads").is_none(), "{eds}");
        assert_eq!(
            eds["apiConfigSource"],
            serde_json::json!({"apiType": "REST", "transportApiVersion": "V3", "clusterNames": ["xds_cluster"],
                "refreshDelay": "0.200s"})
        );
        assert_eq!(eds["resourceApiVersion"], "V3");
        // Without a source (RDS, EDS), the resource is as generated; the round trip through JSON gives
        // the same message back.
        let json = encode_response(type_url::CLUSTER, &generated, None).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert!(v["resources"][0]["edsClusterConfig"]["edsConfig"].get("ads").is_some());
        let desc = descriptor("envoy.config.cluster.v3.Cluster").unwrap();
        let mut r = v["resources"][0].clone();
        r.as_object_mut().unwrap().remove("@type");
        let back: Cluster = DynamicMessage::deserialize(desc, r).unwrap().transcode_to().unwrap();
        assert_eq!(back, eds_cluster("outbound|80||a"));
    }

    #[test]
    fn config_sources_inside_any_are_rewritten() {
        use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
            HttpConnectionManager, Rds, http_connection_manager::RouteSpecifier,
        };
        let hcm = HttpConnectionManager {
            route_specifier: Some(RouteSpecifier::Rds(Rds {
                config_source: eds_cluster("x").eds_cluster_config.unwrap().eds_config,
                route_config_name: "80".into(),
            })),
            ..Default::default()
        };
        let any = Any {
            type_url: "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
                .into(),
            value: hcm.encode_to_vec(),
        };
        let source = RestConfigSource { cluster: "c".into(), refresh_delay: Duration::from_secs(1) };
        let mut out = Vec::new();
        let api = DynamicMessage::decode(
            descriptor("envoy.config.core.v3.ApiConfigSource").unwrap(),
            source.api_config_source().encode_to_vec().as_slice(),
        )
        .unwrap();
        resource_json(&any, Some(&api), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["rds"]["configSource"]["apiConfigSource"]["clusterNames"][0], "c");
        assert_eq!(v["rds"]["routeConfigName"], "80");
    }

    #[test]
    fn the_config_source_comes_from_metadata_then_host() {
        let meta = |v: serde_json::Value| v.as_object().unwrap().clone();
        let s = RestConfigSource::for_node(&meta(serde_json::json!({})), None);
        assert_eq!((s.cluster.as_str(), s.refresh_delay), (DEFAULT_CLUSTER, DEFAULT_REFRESH_DELAY));
        let s = RestConfigSource::for_node(&meta(serde_json::json!({})), Some("xds_cluster"));
        assert_eq!(s.cluster, "xds_cluster");
        let s = RestConfigSource::for_node(
            &meta(serde_json::json!({"REST_XDS_CLUSTER": "cp", "REST_XDS_REFRESH_DELAY": "250ms"})),
            Some("xds_cluster"),
        );
        assert_eq!((s.cluster.as_str(), s.refresh_delay), ("cp", Duration::from_millis(250)));
        let s = RestConfigSource::for_node(&meta(serde_json::json!({"REST_XDS_REFRESH_DELAY": "1ms"})), None);
        assert_eq!(s.refresh_delay, MIN_REFRESH_DELAY);
    }

    #[test]
    fn only_the_current_version_is_not_modified() {
        assert!(not_modified("5", Some("5")));
        assert!(!not_modified("4", Some("5")));
        assert!(!not_modified("", Some("")));
        assert!(!not_modified("5", None));
    }

    #[test]
    fn paths_name_the_types() {
        for t in RestType::ALL {
            assert_eq!(RestType::from_path(t.path()), Some(t));
        }
        assert_eq!(RestType::from_path("/v3/discovery:runtime"), None);
    }
}
