//! "Is my config applied?" per config object: which connected proxies an object concerns and, per
//! proxy, whether Envoy ACKed, has not yet ACKed, or rejected (NACKed) the xDS responses that carry
//! the object's current version (issue 19; istioctl's `x describe` / `proxy-status <object>`
//! distribution view, Istio's `pilot/pkg/status/distribution` reporter).
//!
//! ```text
//!  push N (server.rs) ── Tracking::record_push: per object key, the first push counter N whose
//!                        PushContext holds its current resourceVersion (a map per key, bounded)
//!  NetworkingSource::generate ── Tracking::record_generated: per proxy and type URL, the newest push
//!                        counter a response was generated (or found unchanged) for
//!  /debug/objectz, `meshpilot status` ── object_status: concerned proxies × affected types →
//!                        type_sync (the pure rule) → ACKED / PENDING / NACKED
//! ```
//!
//! **Versions.** Response versions are the push context's `<RFC3339>/<counter>`
//! ([`model::push::PushContext::version`]); they are compared by the counter ([`push_counter`]),
//! never as strings.
//!
//! **The rule** ([`type_sync`]), for one proxy, one xDS type, and the counter `required` of the first
//! push holding the object: the proxy's *effective* response is its last sent one or, when a later
//! push was generated for it but not sent because it would have repeated the last response byte for
//! byte (the xDS engine skips those, unlike Istio), that later push. NACKED when the latest response
//! was rejected and is effectively at or after `required`; ACKED when the latest ACKed response is
//! at or after it (effectively, for a type whose latest response is ACKed); PENDING otherwise. A proxy
//! is NACKED when any affected type is, ACKED when all are ([`proxy_sync`]).
//!
//! **Which proxies** an object concerns ([`concerns`]): Istio's push-scope rules
//! (`model::push::scope_needs_push` and the SidecarScope: imported services, VirtualServices and
//! DestinationRules; the Sidecar that applies), Gateways by selector, VirtualServices bound to a
//! selected Gateway, security policies by their selectors ([`PushContext::authorization_policies`]),
//! PeerAuthentications for proxies with workload certificates in their namespace or the root
//! namespace, EnvoyFilters, WasmPlugins, TrafficExtensions and Telemetries as the generators select
//! them. **Which types** ([`judged_types`]): the push model's per-type tables
//! ([`crate::push::type_needs_push`]) restricted to the types the proxy watches; a Wasm extension on
//! ECDS, a Lua one on LDS.
//!
//! **Envoy field → Istio field** ([`trace_field`]): a NACK's text is matched against the object's
//! string fields (a regex, a header value or its `%COMMAND%` that Envoy names) and cluster names
//! (`outbound|port|subset|host` → the DestinationRule subset or the ServiceEntry port).
//!
//! Limits: an object changed while a push is being built is credited to the next push (conservative:
//! PENDING a little longer); between the generation of a response and its send a proxy can show
//! ACKED for a response still in flight (milliseconds); a proxy that disconnected is not listed.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use api::Kind;
use config::{FileSource, ObjectOrigin};
use model::{
    Config, ConfigKey, ConfigStore,
    push::{ProxyContext, ProxyKind, PushContext, PushRequest, SidecarScope, TriggerReason, node::Proxy},
};
use serde::Serialize;
use xds::{ConnectionSnapshot, SyncState, type_url};

use crate::{DiscoveryServer, push::type_needs_push, source::proxy_context};

/// The counter of a push version `<RFC3339>/<counter>` (`None` for anything else, e.g. an empty
/// version before the first response).
pub fn push_counter(version: &str) -> Option<u64> {
    version.rsplit_once('/').and_then(|(_, n)| n.parse().ok())
}

/// The first push whose context holds an object's current version.
#[derive(Debug, Clone, PartialEq)]
pub struct FirstPush {
    /// The object as that push read it (the store's copy: holding it costs a reference count).
    pub config: Arc<Config>,
    /// The push counter.
    pub counter: u64,
    /// The full push version (`<RFC3339>/<counter>`).
    pub version: String,
}

/// The xDS types an object's status is judged on ([`affected_types`] picks among them); generation
/// is tracked for these only, in a fixed array per proxy rather than a map of type URL strings.
pub const TRACKED_TYPES: [&str; 5] =
    [type_url::CLUSTER, type_url::ENDPOINT, type_url::LISTENER, type_url::ROUTE, type_url::EXTENSION_CONFIG];

fn tracked_type(type_url: &str) -> Option<usize> {
    TRACKED_TYPES.iter().position(|t| *t == type_url)
}

/// What the object status needs from pushes and generation; owned by the [`DiscoveryServer`].
/// Memory: one entry per config object and one per connected proxy (five counters).
#[derive(Debug, Default)]
pub struct Tracking {
    objects: Mutex<HashMap<ConfigKey, FirstPush>>,
    /// Per proxy node id, the newest push counter per [`TRACKED_TYPES`] entry (0: none).
    generated: Mutex<HashMap<String, [u64; TRACKED_TYPES.len()]>>,
}

/// Whether `a` and `b` are the same version of an object as far as proxies are concerned: the same
/// copy, or equal but for status, resourceVersion and other metadata (Istio's `NeedsPush` rule, the
/// one the config queue applies: an update of only those raises no push). File objects have no
/// resourceVersion, so versions are told apart by content; a status write on a cluster object (the
/// `Reconciled` condition itself) must not make the object look unpushed.
fn same(a: &Arc<Config>, b: &Config) -> bool {
    std::ptr::eq(Arc::as_ptr(a), b) || !model::store::needs_push(a, b)
}

impl Tracking {
    /// Empty tracking.
    pub fn new() -> Self {
        Self::default()
    }

    /// Called before push `version` builds its context from `store`: objects new or changed (see
    /// [`same`]) are credited to this push; objects gone are forgotten.
    pub fn record_push(&self, store: &dyn ConfigStore, version: &str) {
        let Some(counter) = push_counter(version) else { return };
        let mut current: HashMap<ConfigKey, Arc<Config>> = HashMap::new();
        for kind in store.schemas() {
            for c in store.list(*kind, None) {
                current.insert(c.key(), c);
            }
        }
        let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        objects.retain(|k, _| current.contains_key(k));
        for (key, config) in current {
            if objects.get(&key).is_none_or(|f| !same(&f.config, &config)) {
                objects.insert(key, FirstPush { config, counter, version: version.to_owned() });
            }
        }
    }

    /// The first push holding the current version of `key` (`None` before it was pushed).
    pub fn first_push(&self, key: &ConfigKey) -> Option<FirstPush> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// A response of `type_url` was generated (or found unchanged by the push) for the proxy
    /// `node_id` from push `version`; keeps the newest counter.
    pub fn record_generated(&self, node_id: &str, type_url: &str, version: &str) {
        let Some(counter) = push_counter(version) else { return };
        let Some(i) = tracked_type(type_url) else { return };
        let mut generated = self.generated.lock().unwrap_or_else(|p| p.into_inner());
        let slot = match generated.get_mut(node_id) {
            Some(counters) => &mut counters[i],
            None => &mut generated.entry(node_id.to_owned()).or_default()[i],
        };
        *slot = (*slot).max(counter);
    }

    /// The newest push counter generated for `node_id` and `type_url`.
    pub fn generated(&self, node_id: &str, type_url: &str) -> Option<u64> {
        let generated = self.generated.lock().unwrap_or_else(|p| p.into_inner());
        let i = tracked_type(type_url)?;
        generated.get(node_id).map(|counters| counters[i]).filter(|&c| c > 0)
    }

    /// Forgets proxies for which `connected` is false (called after each push).
    pub fn retain_proxies(&self, connected: impl Fn(&str) -> bool) {
        self.generated.lock().unwrap_or_else(|p| p.into_inner()).retain(|id, _| connected(id));
    }
}

/// Where one object stands on one proxy (istioctl's distribution states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SyncStatus {
    /// Envoy accepted responses carrying the object's current version.
    Acked,
    /// Not yet sent, or sent and not yet answered.
    Pending,
    /// Envoy rejected the response carrying it (it keeps running its previous config).
    Nacked,
}

impl SyncStatus {
    /// `ACKED`, `PENDING`, `NACKED`.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncStatus::Acked => "ACKED",
            SyncStatus::Pending => "PENDING",
            SyncStatus::Nacked => "NACKED",
        }
    }
}

/// One type's progress on one connection, as plain counters (input of [`type_sync`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeProgress {
    /// Counter of the last response sent.
    pub sent: Option<u64>,
    /// Counter of the last response ACKed.
    pub acked: Option<u64>,
    /// Newest push counter generated for the type (sent or skipped as unchanged).
    pub generated: Option<u64>,
    /// Where the type is in its request/response cycle.
    pub state: SyncState,
}

/// The rule (see the module docs): ACKED, PENDING or NACKED for an object first pushed at
/// `required`, given one type's progress.
pub fn type_sync(required: u64, p: &TypeProgress) -> SyncStatus {
    let sent = p.sent.unwrap_or(0);
    // A generated push not sent repeated the last response: that response stands for it.
    let effective = sent.max(p.generated.unwrap_or(0));
    match p.state {
        SyncState::Rejected if p.sent.is_some() && effective >= required => SyncStatus::Nacked,
        SyncState::Acked if p.sent.is_some() && effective >= required => SyncStatus::Acked,
        _ if p.acked.is_some_and(|a| a >= required) => SyncStatus::Acked,
        _ => SyncStatus::Pending,
    }
}

/// One proxy's status from its affected types': NACKED if any is, ACKED if all are (and there is at
/// least one), else PENDING.
pub fn proxy_sync(types: impl IntoIterator<Item = SyncStatus>) -> SyncStatus {
    let mut any = false;
    let mut all_acked = true;
    for t in types {
        if t == SyncStatus::Nacked {
            return SyncStatus::Nacked;
        }
        any = true;
        all_acked &= t == SyncStatus::Acked;
    }
    if any && all_acked { SyncStatus::Acked } else { SyncStatus::Pending }
}

/// The xDS types (CDS, EDS, LDS, RDS, ECDS URLs) a change of an object of `kind` regenerates for a
/// proxy of `proxy_kind`, by the push model's tables ([`type_needs_push`]).
pub fn affected_types(kind: Kind, proxy_kind: ProxyKind) -> Vec<&'static str> {
    let key = ConfigKey { kind, namespace: String::new(), name: String::new() };
    let request = PushRequest::config([key], TriggerReason::Config);
    TRACKED_TYPES.into_iter().filter(|t| type_needs_push(&request, t, proxy_kind)).collect()
}

/// The xDS types an object's status is judged on for a proxy of `proxy_kind`: [`affected_types`],
/// except for extensions, judged on where their code travels. A Wasm extension (a WasmPlugin, a
/// TrafficExtension with `wasm`) on ECDS: a change of its module or configuration is pushed over ECDS
/// alone (`PushRequest::extension_content`), so LDS would wait for an unrelated listener push. A Lua
/// TrafficExtension on LDS, where its code is inlined.
pub fn judged_types(config: &Config, proxy_kind: ProxyKind) -> Vec<&'static str> {
    match &config.spec {
        api::Spec::WasmPlugin(_) => vec![type_url::EXTENSION_CONFIG],
        api::Spec::TrafficExtension(t) if t.lua.is_some() => vec![type_url::LISTENER],
        api::Spec::TrafficExtension(_) => vec![type_url::EXTENSION_CONFIG],
        _ => affected_types(config.kind(), proxy_kind),
    }
}

/// A connected proxy as the scope rules see it.
#[derive(Debug)]
pub struct ProxyView {
    /// The connection.
    pub connection: ConnectionSnapshot<Proxy>,
    /// The proxy as the generators see it (labels, namespace, service instances).
    pub proxy: ProxyContext,
    /// Its SidecarScope (sidecars only).
    pub scope: Option<Arc<SidecarScope>>,
    /// The Gateways selecting it, `namespace/name` (routers only).
    pub gateways: Vec<String>,
}

/// The connected proxies meshpilot serves (streams, then proxies polling over REST), with their scopes
/// in `push`. MCP-over-xDS config clients
/// (`GENERATOR: api`, [`mcp::server`]) are not proxies: they are left out.
pub fn proxy_views(server: &DiscoveryServer, push: &PushContext) -> Vec<ProxyView> {
    let discovery: &dyn model::ServiceDiscovery = server.services().as_ref();
    let mut connections = server.connections().snapshot();
    // Polling proxies (REST xDS): their ACKs are inferred from their next poll (xds::polling).
    connections.extend(server.polling().snapshot(std::time::SystemTime::now()));
    connections
        .into_iter()
        .filter(|connection| !connection.proxy.uses_api_generator())
        .filter_map(|connection| {
            let mut proxy = proxy_context(&connection.proxy).ok()?;
            proxy.set_instances_from(discovery);
            let scope = proxy.is_sidecar().then(|| server.generation_cache().sidecar_scope(push, &proxy));
            let gateways = if proxy.kind == ProxyKind::Router {
                push.gateways_for_proxy(&proxy)
                    .iter()
                    .map(|g| format!("{}/{}", g.config.meta.namespace, g.config.meta.name))
                    .collect()
            } else {
                Vec::new()
            };
            Some(ProxyView { connection, proxy, scope, gateways })
        })
        .collect()
}

/// Whether `config` can change what the proxy `view` gets (see the module docs).
pub fn concerns(push: &PushContext, view: &ProxyView, config: &Config) -> bool {
    let key = config.key();
    let proxy = &view.proxy;
    if !model::push::kind_affects_proxy(key.kind, proxy.kind) {
        return false;
    }
    let root = &push.mesh().root_namespace;
    let local = key.namespace == proxy.namespace || &key.namespace == root;
    match (key.kind, &config.spec) {
        (Kind::AuthorizationPolicy, _) => push.authorization_policies(proxy).iter().any(|c| c.key() == key),
        (Kind::RequestAuthentication, _) => {
            push.request_authentications(proxy).iter().any(|c| c.key() == key)
        }
        (Kind::PeerAuthentication, _) => proxy.has_workload_certificates() && local,
        (Kind::Sidecar, _) => push.sidecar_for(proxy).is_some_and(|c| c.key() == key),
        (Kind::Gateway, _) => view.gateways.iter().any(|g| *g == format!("{}/{}", key.namespace, key.name)),
        (Kind::VirtualService, _) if proxy.kind == ProxyKind::Router => {
            push.virtual_services().iter().any(|vs| {
                vs.key == key
                    && view.gateways.iter().any(|g| {
                        vs.bound_to(g)
                            && push
                                .virtual_services_for_gateway(&proxy.namespace, g)
                                .iter()
                                .any(|v| v.key == key)
                    })
            })
        }
        (Kind::ServiceEntry, api::Spec::ServiceEntry(se)) => se.hosts.iter().any(|host| match &view.scope {
            Some(scope) => {
                scope.service(host).is_some_and(|s| s.namespace == key.namespace)
                    || proxy.service_instances.iter().any(|i| {
                        i.service.hostname.eq_ignore_ascii_case(host) && i.service.namespace == key.namespace
                    })
            }
            None => push.visible_service(host, &proxy.namespace).is_some(),
        }),
        // Selected as the generators select them (workloadSelector / targetRefs, namespace and root).
        (Kind::EnvoyFilter, _) => push.envoy_filters(proxy).iter().any(|c| c.key() == key),
        (Kind::WasmPlugin | Kind::TrafficExtension, _) => {
            push.extensions(proxy).iter().any(|e| e.config.key() == key)
        }
        (Kind::Telemetry, _) => push.telemetries(proxy).iter().any(|c| c.key() == key),
        (Kind::VirtualService | Kind::DestinationRule, _) => match &view.scope {
            Some(scope) => scope.depends_on(&key),
            // Gateways read every DestinationRule visible to them.
            None => key.kind == Kind::DestinationRule,
        },
        _ => local,
    }
}

/// The Istio field of `config` a NACK's `error` most likely comes from, as a path
/// (`spec.http[0].headers.request.set.x-bad`), or `None`. Cheap matching, no regeneration: cluster
/// names `outbound|port|subset|host` in the text map to a DestinationRule subset or a ServiceEntry
/// port; otherwise the longest string field whose value (or a `%COMMAND%` inside it) the text quotes.
pub fn trace_field(config: &Config, error: &str) -> Option<String> {
    let spec = config::kubernetes_object(config).get("spec").cloned()?;
    if let Some(path) = trace_cluster(config, &spec, error) {
        return Some(path);
    }
    let mut best: Option<(usize, String)> = None;
    walk_strings(&spec, "spec", &mut |path, value| {
        for needle in needles(value) {
            if needle.len() >= 3 && error.contains(needle) && best.as_ref().is_none_or(|b| needle.len() > b.0)
            {
                best = Some((needle.len(), path.to_owned()));
            }
        }
    });
    best.map(|(_, path)| path)
}

fn trace_cluster(config: &Config, spec: &serde_json::Value, error: &str) -> Option<String> {
    let names =
        error.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | ',' | '[' | ']' | '(' | ')'));
    for name in names {
        let Some(cluster) = networking::naming::parse_cluster_name(name) else { continue };
        match config.kind() {
            Kind::DestinationRule if !cluster.subset.is_empty() => {
                let subsets = spec.get("subsets")?.as_array()?;
                if let Some(i) = subsets.iter().position(|s| s["name"] == cluster.subset) {
                    return Some(format!("spec.subsets[{i}]"));
                }
            }
            Kind::ServiceEntry => {
                let ports = spec.get("ports")?.as_array()?;
                if let Some(i) = ports.iter().position(|p| p["number"] == cluster.port) {
                    return Some(format!("spec.ports[{i}]"));
                }
            }
            _ => {}
        }
    }
    None
}

/// The value itself and the command names of its `%COMMAND%` / `%COMMAND(args)%` parts.
fn needles(value: &str) -> Vec<&str> {
    let mut out = vec![value];
    let mut parts = value.split('%');
    parts.next();
    while let (Some(command), Some(_)) = (parts.next(), parts.next()) {
        let name = command.split('(').next().unwrap_or_default();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

fn walk_strings(value: &serde_json::Value, path: &str, f: &mut impl FnMut(&str, &str)) {
    match value {
        serde_json::Value::String(s) => f(path, s),
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                walk_strings(v, &format!("{path}[{i}]"), f);
            }
        }
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                // Header names are map keys: a key Envoy quotes is the field.
                f(&format!("{path}.{k}"), k);
                walk_strings(v, &format!("{path}.{k}"), f);
            }
        }
        _ => {}
    }
}

/// Where an object comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectSource {
    /// `file` (a `--config-dir` file), `xds` (an MCP-over-xDS server of mesh config
    /// `configSources`) or `cluster` (a Kubernetes API server or another store).
    pub kind: String,
    /// `path:line` for files, `resourceVersion N` for the cluster, `xds://HOST:PORT, version V` for
    /// an MCP server.
    pub location: String,
    /// The file, for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The 1-based line its document starts on, for files (when known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// The validation result of the object's source document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Validation {
    /// `valid`, `warnings` (valid with warnings) or `invalid` (the file's new content is rejected;
    /// the last good version stays in force).
    pub state: String,
    /// The warnings or errors, `field.path: reason` (errors: `file:line: object field: reason`).
    pub messages: Vec<String>,
}

/// One affected type of one proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeSync {
    /// CDS, EDS, LDS or RDS.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The type's status.
    pub status: SyncStatus,
    /// Version of the last response sent.
    pub version_sent: String,
    /// Version of the last response ACKed.
    pub version_acked: String,
    /// Envoy's error text, when NACKED.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where an object stands on one proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyObjectStatus {
    /// The proxy's node id.
    pub proxy: String,
    /// The connection id (`<proxy id>-<counter>`, as in `/debug/syncz`).
    pub connection: String,
    /// The proxy's status ([`proxy_sync`]).
    pub status: SyncStatus,
    /// Per affected type the proxy watches.
    pub types: Vec<TypeSync>,
    /// Envoy's error text of the first NACKed type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The Istio field the error most likely comes from ([`trace_field`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// A proxy polling over REST-JSON xDS: it cannot ACK or NACK, so ACKED means its next poll
    /// carried the version, and a response it rejected stays PENDING (only Envoy's
    /// `update_rejected` counter shows it; the pre-send check is what stops bad parts).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub polling: bool,
}

/// Per-status proxy counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncCounts {
    /// Proxies ACKED.
    pub acked: usize,
    /// Proxies PENDING.
    pub pending: usize,
    /// Proxies NACKED.
    pub nacked: usize,
}

/// An object's full status (`/debug/objectz?kind=&namespace=&name=`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatus {
    /// Istio kind.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.resourceVersion` in force (empty when the source has none).
    pub resource_version: String,
    /// Where it comes from.
    pub source: ObjectSource,
    /// Its validation result.
    pub validation: Validation,
    /// The first push version holding its current version (`None`: not pushed yet).
    pub push_version: Option<String>,
    /// The connected proxies it concerns, by node id.
    pub proxies: Vec<ProxyObjectStatus>,
    /// Counts of [`ObjectStatus::proxies`] by status.
    pub counts: SyncCounts,
    /// What generation could not honour in this object, in the config in force: parts dropped
    /// before sending because Envoy would reject them (the pre-send check, the only guard a polling
    /// REST proxy has, since it cannot NACK), fields not translated, warnings. Push-context findings
    /// first, then those met generating for the connected proxies ([`ObjectFinding`]).
    pub findings: Vec<ObjectFinding>,
}

/// One [`model::Finding`] of an object (`findings` of `/debug/objectz`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectFinding {
    /// `dropped` (left out of the output; the rest is sent), `not translated` or `warning`.
    pub severity: String,
    /// Field path in the object (`spec.http[0].route`), or empty.
    pub path: String,
    /// The Envoy resource affected (route config `80`, a cluster name).
    pub resource: String,
    /// What happened and why.
    pub message: String,
    /// Up to 5 proxy ids whose generation met it (empty for push-context findings, which are
    /// proxy-independent).
    pub proxies: Vec<String>,
}

impl ObjectFinding {
    fn new(f: &model::Finding, proxies: Vec<String>) -> ObjectFinding {
        let severity = match f.severity {
            model::Severity::Dropped => "dropped",
            model::Severity::Unsupported => "not translated",
            model::Severity::Warning => "warning",
        };
        ObjectFinding {
            severity: severity.to_owned(),
            path: f.path.clone(),
            resource: f.resource.clone(),
            message: f.message.clone(),
            proxies,
        }
    }
}

/// One line of the object list (`/debug/objectz`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatusSummary {
    /// Istio kind.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.resourceVersion` in force.
    pub resource_version: String,
    /// `valid`, `warnings` or `invalid` ([`Validation::state`]).
    pub validation: String,
    /// The first push version holding its current version.
    pub push_version: Option<String>,
    /// Concerned proxies by status.
    pub counts: SyncCounts,
}

/// The status of the object `key` in force, or `None` if no store holds it. `files` are the
/// `--config-dir` sources (for file:line and validation); objects found in none of them come from
/// the cluster.
pub fn object_status(
    server: &DiscoveryServer,
    files: &[Arc<FileSource>],
    key: &ConfigKey,
) -> Option<ObjectStatus> {
    let config = server.store().get(key.kind, &key.namespace, &key.name)?;
    let push = server.push_context();
    let views = push.as_deref().map(|p| proxy_views(server, p)).unwrap_or_default();
    let origin = files.iter().find_map(|f| f.origin(key));
    let mut status = status_of(server, origin, push.as_deref(), &views, &config);
    status.findings = object_findings(server, push.as_deref(), key);
    Some(status)
}

/// The findings of `key` ([`ObjectStatus::findings`]): the push context's, then generation's.
fn object_findings(
    server: &DiscoveryServer,
    push: Option<&PushContext>,
    key: &ConfigKey,
) -> Vec<ObjectFinding> {
    let mut findings: Vec<ObjectFinding> = push
        .into_iter()
        .flat_map(|p| p.findings())
        .filter(|f| f.config.as_ref() == Some(key))
        .map(|f| ObjectFinding::new(f, Vec::new()))
        .collect();
    findings.extend(
        server
            .generation_cache()
            .generation_findings()
            .into_iter()
            .filter(|(f, _)| f.config.as_ref() == Some(key))
            .map(|(f, seen)| ObjectFinding::new(&f, seen.proxies)),
    );
    findings
}

/// Every object in force with its validation state and proxy counts, by kind, namespace, name.
pub fn object_statuses(server: &DiscoveryServer, files: &[Arc<FileSource>]) -> Vec<ObjectStatusSummary> {
    let push = server.push_context();
    let views = push.as_deref().map(|p| proxy_views(server, p)).unwrap_or_default();
    let store = server.store();
    // Each file parsed once; the first directory defining an object wins, as in the store.
    let mut origins: HashMap<ConfigKey, ObjectOrigin> = HashMap::new();
    for f in files {
        for (key, origin) in f.origins() {
            origins.entry(key).or_insert(origin);
        }
    }
    let mut out = Vec::new();
    for kind in store.schemas() {
        for config in store.list(*kind, None) {
            let origin = origins.remove(&config.key());
            let s = status_of(server, origin, push.as_deref(), &views, &config);
            out.push(ObjectStatusSummary {
                kind: s.kind,
                namespace: s.namespace,
                name: s.name,
                resource_version: s.resource_version,
                validation: s.validation.state,
                push_version: s.push_version,
                counts: s.counts,
            });
        }
    }
    out.sort_by(|a, b| (&a.kind, &a.namespace, &a.name).cmp(&(&b.kind, &b.namespace, &b.name)));
    out
}

fn status_of(
    server: &DiscoveryServer,
    origin: Option<ObjectOrigin>,
    push: Option<&PushContext>,
    views: &[ProxyView],
    config: &Config,
) -> ObjectStatus {
    let key = config.key();
    let (mut source, validation) = source_and_validation(origin, config);
    // An object from an MCP-over-xDS server (mesh config configSources) names that server.
    if source.kind == "cluster"
        && let Some(server_url) =
            server.store().source_of(key.kind, &key.namespace, &key.name).filter(|s| s.starts_with("xds://"))
    {
        let rv = &config.meta.resource_version;
        source.location =
            if rv.is_empty() { server_url.clone() } else { format!("{server_url}, version {rv}") };
        source.kind = "xds".into();
    }
    // The first push holding this very version (a newer one not pushed yet is PENDING everywhere).
    let first = server.tracking().first_push(&key).filter(|f| same(&f.config, config));
    let mut proxies = Vec::new();
    if let Some(push) = push {
        for view in views.iter().filter(|v| concerns(push, v, config)) {
            proxies.push(proxy_status(server, view, config, first.as_ref().map(|f| f.counter)));
        }
    }
    let mut counts = SyncCounts::default();
    for p in &proxies {
        match p.status {
            SyncStatus::Acked => counts.acked += 1,
            SyncStatus::Pending => counts.pending += 1,
            SyncStatus::Nacked => counts.nacked += 1,
        }
    }
    ObjectStatus {
        kind: key.kind.to_string(),
        namespace: key.namespace,
        name: key.name,
        resource_version: config.meta.resource_version.clone(),
        source,
        validation,
        push_version: first.map(|f| f.version),
        proxies,
        counts,
        findings: Vec::new(),
    }
}

fn proxy_status(
    server: &DiscoveryServer,
    view: &ProxyView,
    config: &Config,
    required: Option<u64>,
) -> ProxyObjectStatus {
    let node_id = &view.proxy.id;
    let mut types = Vec::new();
    for t in judged_types(config, view.proxy.kind) {
        let Some(s) = view.connection.types.get(t) else { continue };
        let progress = TypeProgress {
            sent: push_counter(&s.version_sent),
            acked: push_counter(&s.version_acked),
            generated: server.tracking().generated(node_id, t),
            state: s.state,
        };
        let status = required.map_or(SyncStatus::Pending, |r| type_sync(r, &progress));
        types.push(TypeSync {
            type_name: type_url::short_name(t).to_owned(),
            status,
            version_sent: s.version_sent.clone(),
            version_acked: s.version_acked.clone(),
            error: (status == SyncStatus::Nacked).then(|| s.last_error.clone()).flatten(),
        });
    }
    let status = proxy_sync(types.iter().map(|t| t.status));
    let error = types.iter().find_map(|t| t.error.clone());
    let field = error.as_deref().and_then(|e| trace_field(config, e));
    ProxyObjectStatus {
        proxy: node_id.clone(),
        connection: view.connection.id.clone(),
        status,
        types,
        error,
        field,
        polling: view.connection.last_poll.is_some(),
    }
}

/// The errors of bad `--config-dir` files that define `key` (`file:line: field.path: reason`): why
/// an object that is not in force was not loaded. Objects naming no namespace match any namespace.
pub fn rejections(files: &[Arc<FileSource>], key: &ConfigKey) -> Vec<String> {
    let mut out = Vec::new();
    for f in files {
        for bad in &f.status().bad_files {
            for e in &bad.errors {
                let mut parts = e.object.splitn(3, '/');
                let (kind, ns, name) = (parts.next(), parts.next(), parts.next());
                let matches = kind.is_some_and(|k| k.eq_ignore_ascii_case(key.kind.as_str()))
                    && ns.is_some_and(|n| n.is_empty() || n == key.namespace)
                    && name == Some(key.name.as_str());
                if matches {
                    out.push(format!("{}:{}: {}: {}", bad.file.display(), e.line, e.path, e.message));
                }
            }
        }
    }
    out
}

fn source_and_validation(origin: Option<ObjectOrigin>, config: &Config) -> (ObjectSource, Validation) {
    if let Some(origin) = origin {
        let file = origin.file.display().to_string();
        let location = if origin.line > 0 { format!("{file}:{}", origin.line) } else { file.clone() };
        let validation = match (&origin.rejected, origin.warnings.is_empty()) {
            (Some(bad), _) => Validation {
                state: "invalid".into(),
                messages: bad
                    .errors
                    .iter()
                    .map(|e| format!("{}:{}: {} {}: {}", file, e.line, e.object, e.path, e.message))
                    .collect(),
            },
            (None, true) => Validation { state: "valid".into(), messages: Vec::new() },
            (None, false) => Validation { state: "warnings".into(), messages: origin.warnings.clone() },
        };
        let source = ObjectSource {
            kind: "file".into(),
            location,
            file: Some(file),
            line: (origin.line > 0).then_some(origin.line),
        };
        return (source, validation);
    }
    let rv = &config.meta.resource_version;
    let source = ObjectSource {
        kind: "cluster".into(),
        location: if rv.is_empty() { "cluster".into() } else { format!("cluster, resourceVersion {rv}") },
        file: None,
        line: None,
    };
    // The cluster admits only objects that validated (meshpilot's source re-validates on read).
    (source, Validation { state: "valid".into(), messages: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(
        sent: Option<u64>,
        acked: Option<u64>,
        generated: Option<u64>,
        state: SyncState,
    ) -> TypeProgress {
        TypeProgress { sent, acked, generated, state }
    }

    #[test]
    fn push_counter_reads_the_counter_not_the_time() {
        assert_eq!(push_counter("2026-11-25T02:00:00.123456789Z/12"), Some(12));
        assert_eq!(push_counter(""), None);
        assert_eq!(push_counter("abc"), None);
        // Counters compare as numbers: 9 < 10, unlike the strings.
        assert!(push_counter("t/9") < push_counter("t/10"));
    }

    #[test]
    fn acked_at_or_after_the_required_push() {
        assert_eq!(type_sync(5, &progress(Some(5), Some(5), Some(5), SyncState::Acked)), SyncStatus::Acked);
        assert_eq!(type_sync(5, &progress(Some(7), Some(7), None, SyncState::Acked)), SyncStatus::Acked);
        assert_eq!(type_sync(5, &progress(Some(4), Some(4), Some(4), SyncState::Acked)), SyncStatus::Pending);
    }

    #[test]
    fn sent_but_unanswered_is_pending_unless_an_earlier_ack_covers_it() {
        assert_eq!(type_sync(5, &progress(Some(5), Some(4), Some(5), SyncState::Sent)), SyncStatus::Pending);
        assert_eq!(type_sync(5, &progress(Some(7), Some(6), Some(7), SyncState::Sent)), SyncStatus::Acked);
    }

    #[test]
    fn an_unchanged_push_stands_on_the_acked_response() {
        // Push 8 generated the same bytes as response 4 and was not sent; 4 is ACKed.
        assert_eq!(type_sync(8, &progress(Some(4), Some(4), Some(8), SyncState::Acked)), SyncStatus::Acked);
        // ...but not while response 4 is still unanswered.
        assert_eq!(type_sync(8, &progress(Some(4), Some(3), Some(8), SyncState::Sent)), SyncStatus::Pending);
    }

    #[test]
    fn rejected_at_or_after_the_required_push_is_nacked() {
        assert_eq!(
            type_sync(5, &progress(Some(5), Some(4), Some(5), SyncState::Rejected)),
            SyncStatus::Nacked
        );
        // The same rejected content generated again at 9 (not re-sent): still NACKED for 9.
        assert_eq!(
            type_sync(9, &progress(Some(5), Some(4), Some(9), SyncState::Rejected)),
            SyncStatus::Nacked
        );
        // A rejection of an older response says nothing about push 6 yet.
        assert_eq!(
            type_sync(6, &progress(Some(5), Some(4), Some(5), SyncState::Rejected)),
            SyncStatus::Pending
        );
        // A later response rejected is NACKED even though the ACKed 4 carries the object: the proxy
        // is not running what meshpilot means it to.
        assert_eq!(
            type_sync(3, &progress(Some(5), Some(4), Some(5), SyncState::Rejected)),
            SyncStatus::Nacked
        );
    }

    #[test]
    fn nothing_sent_is_pending() {
        assert_eq!(type_sync(1, &progress(None, None, None, SyncState::Requested)), SyncStatus::Pending);
        assert_eq!(type_sync(1, &progress(None, None, Some(3), SyncState::Acked)), SyncStatus::Pending);
    }

    #[test]
    fn proxy_status_combines_types() {
        use SyncStatus::*;
        assert_eq!(proxy_sync([Acked, Acked]), Acked);
        assert_eq!(proxy_sync([Acked, Pending]), Pending);
        assert_eq!(proxy_sync([Pending, Nacked, Acked]), Nacked);
        assert_eq!(proxy_sync([]), Pending);
    }

    #[test]
    fn affected_types_follow_the_push_tables() {
        let vs = affected_types(Kind::VirtualService, ProxyKind::Sidecar);
        assert!(vs.contains(&type_url::ROUTE) && !vs.contains(&type_url::ENDPOINT), "{vs:?}");
        let ap = affected_types(Kind::AuthorizationPolicy, ProxyKind::Sidecar);
        assert_eq!(ap, vec![type_url::LISTENER]);
        assert!(affected_types(Kind::Gateway, ProxyKind::Sidecar).is_empty());
    }

    #[test]
    fn extensions_are_judged_where_their_code_travels() {
        let doc = |kind: &str, body: &str| {
            let yaml = format!(
                "apiVersion: extensions.istio.io/v1alpha1\nkind: {kind}\nmetadata: {{name: x, namespace: ns}}\nspec: {body}\n"
            );
            let doc =
                config::parse::parse_text("t", &yaml, &config::parse::ParseOptions::default()).remove(0);
            doc.config.unwrap_or_else(|| panic!("{:?}", doc.errors))
        };
        let wasm = doc("WasmPlugin", "{url: oci://registry/plugin:1}");
        assert_eq!(judged_types(&wasm, ProxyKind::Sidecar), [type_url::EXTENSION_CONFIG]);
        let lua = doc("TrafficExtension", "{lua: {inlineCode: 'function envoy_on_request(h) end'}}");
        assert_eq!(judged_types(&lua, ProxyKind::Sidecar), [type_url::LISTENER]);
        let ef = affected_types(Kind::EnvoyFilter, ProxyKind::Sidecar);
        assert!(ef.contains(&type_url::EXTENSION_CONFIG) && ef.contains(&type_url::LISTENER), "{ef:?}");
    }

    fn vs(name: &str) -> Config {
        let yaml = format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: ns}}\n\
             spec: {{hosts: [a.example], http: [{{route: [{{destination: {{host: a.example}}}}]}}]}}\n"
        );
        let doc = config::parse::parse_text("t", &yaml, &config::parse::ParseOptions::default()).remove(0);
        doc.config.unwrap_or_else(|| panic!("{:?}", doc.errors))
    }

    #[test]
    fn tracking_credits_an_object_to_the_first_push_holding_its_version() {
        use model::ConfigStore as _;
        let store = config::MemoryStore::new("t", &[Kind::VirtualService], config::QueueOptions::default());
        let t = Tracking::new();
        store.create(vs("a")).unwrap();
        let key = vs("a").key();
        t.record_push(&store, "t/1");
        assert_eq!(t.first_push(&key).map(|f| f.counter), Some(1));
        t.record_push(&store, "t/2");
        assert_eq!(t.first_push(&key).map(|f| f.counter), Some(1), "unchanged: still the first push");
        // A new resourceVersion and status but the same spec (a status write): no push needed, so
        // still credited to the first push.
        let mut status_only = vs("a");
        status_only.status = Some(serde_json::json!({"observedGeneration": "1"}));
        store.update(status_only).unwrap();
        t.record_push(&store, "t/3");
        assert_eq!(t.first_push(&key).map(|f| f.counter), Some(1), "status-only change");
        let mut labelled = vs("a");
        labelled.meta.labels.insert("app".into(), "a".into());
        store.update(labelled).unwrap();
        t.record_push(&store, "t/4");
        assert_eq!(
            t.first_push(&key).map(|f| f.version),
            Some("t/4".to_owned()),
            "new labels: a new version"
        );
        store.delete(Kind::VirtualService, "ns", "a", None).unwrap();
        t.record_push(&store, "t/5");
        assert_eq!(t.first_push(&key), None, "deleted objects are forgotten");
    }

    #[test]
    fn tracking_keeps_the_newest_generation_per_connected_proxy() {
        let t = Tracking::new();
        t.record_generated("a", type_url::ROUTE, "x/3");
        t.record_generated("a", type_url::ROUTE, "x/2");
        assert_eq!(t.generated("a", type_url::ROUTE), Some(3), "keeps the newest");
        t.retain_proxies(|id| id != "a");
        assert_eq!(t.generated("a", type_url::ROUTE), None);
    }

    #[test]
    fn trace_field_names_the_header_value_envoy_quotes() {
        let yaml = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: b, namespace: ns}\n\
                    spec:\n  hosts: [a.example]\n  http:\n  - route: [{destination: {host: a.example}}]\n  \
                    - headers: {request: {set: {x-bad: \"%FOO%\"}}}\n    route: [{destination: {host: a.example}}]\n";
        let doc = config::parse::parse_text("t", yaml, &config::parse::ParseOptions::default()).remove(0);
        let config = doc.config.unwrap_or_else(|| panic!("{:?}", doc.errors));
        assert_eq!(
            trace_field(&config, "Not supported field in StreamInfo: FOO").as_deref(),
            Some("spec.http[1].headers.request.set.x-bad")
        );
        assert_eq!(trace_field(&config, "something else entirely"), None);
    }

    #[test]
    fn needles_include_command_names() {
        assert_eq!(needles("a-%FOO%-%BAR(x)%"), vec!["a-%FOO%-%BAR(x)%", "FOO", "BAR"]);
        assert_eq!(needles("plain"), vec!["plain"]);
    }
}
