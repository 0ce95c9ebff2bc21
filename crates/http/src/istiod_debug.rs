//! istiod's debug HTTP surface (`pilot/pkg/xds/debug.go`, `AddDebugHandlers`) as synchronous
//! functions: every guarded `/debug/*` path is answered by [`serve_debug`] (and
//! [`serve_debug_path`], its bytes-only form for callers outside HTTP, e.g. debug over xDS), from a
//! [`DebugState`], the path with its query, and the caller's [`Grant`]. The axum router
//! ([`crate::debug_router`]) runs the dispatcher on a blocking thread.
//!
//! Each handler answers with istiod's JSON shape where meshpilot has the data (the module table of
//! [`crate`] and docs/DEBUGGING.md list them); what meshpilot cannot have is a `501 Not Implemented`
//! with a text saying why ([`NOT_IMPLEMENTED`]: `pprof`, `ambientz`, `krtz`, `mcsz`),
//! never a made-up body. Unknown paths are `404`.
//!
//! Authorisation is istiod's (`allowAuthenticatedOrLocalhost`, `AuthorizeDebugRequest`,
//! `getDebugConnection`): a [`Grant::Namespaces`] caller reaches only the paths of
//! [`access::namespace_path`] (istiod's `activeNamespaceDebuggers`: `config_dump`, `edsz`, `ndsz`),
//! and only for proxies of its namespaces (`403` otherwise). The dispatcher checks this itself, so a
//! caller that is not behind [`access::guard`] gets the same rule.
//!
//! Bounds: the path and query at most [`MAX_PATH_AND_QUERY`] bytes, a `proxyID` at most
//! [`MAX_PROXY_ID`]; per-proxy generation (`config_dump`, `edsz`, `ndsz`, `ecdsz`) at most
//! [`DebugLimits::CONCURRENT_DUMPS`](crate::DebugLimits::CONCURRENT_DUMPS) at once (`429` beyond),
//! each on a cache of its own (a debug dump never fills the serving cache); a forced push
//! (`/debug/adsz?push=true`) at most once a second.

use std::{collections::BTreeMap, sync::Arc};

use axum::{
    extract::Query,
    http::{StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use discovery::source::proxy_context;
use model::push::{PushContext, PushRequest, TriggerReason, node::Proxy};
use serde_json::{Map, Value, json};
use xds::{ConnectionSnapshot, debug::rfc3339_nano, type_url};

use crate::{
    DebugState,
    access::{self, Grant},
    proxies, proxystatus, syncz,
};

/// The longest path and query [`serve_debug`] reads, bytes (`414` beyond).
pub const MAX_PATH_AND_QUERY: usize = 8192;

/// The longest `proxyID` accepted, bytes (`400` beyond): connection ids are a proxy id and a counter.
pub const MAX_PROXY_ID: usize = 1024;

/// A debug handler's answer: status, content type and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugReply {
    /// The HTTP status.
    pub status: StatusCode,
    /// `application/json` or `text/plain; charset=utf-8`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl DebugReply {
    /// `200` with `value` as JSON.
    pub fn json(value: &Value) -> DebugReply {
        DebugReply::json_bytes(serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec()))
    }

    /// `200` with a JSON body already written.
    pub fn json_bytes(body: Vec<u8>) -> DebugReply {
        DebugReply { status: StatusCode::OK, content_type: "application/json", body }
    }

    /// `status` with a text body.
    pub fn text(status: StatusCode, text: impl Into<String>) -> DebugReply {
        DebugReply { status, content_type: "text/plain; charset=utf-8", body: text.into().into_bytes() }
    }
}

impl IntoResponse for DebugReply {
    fn into_response(self) -> Response {
        (self.status, [(header::CONTENT_TYPE, self.content_type)], self.body).into_response()
    }
}

/// A debug path: its name as `/debug/list` and `/debug` show it, and istiod's help text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebugPath {
    /// The path (with a query where istiod registers one, e.g. `/debug/adsz?push=true`).
    pub path: &'static str,
    /// What it shows.
    pub help: &'static str,
}

/// Every debug path served, istiod's (`addDebugHandler` calls) and meshpilot's own, sorted.
/// `/debug/force_disconnect` is registered only with `UNSAFE_ENABLE_ADMIN_ENDPOINTS`
/// ([`access::DebugAccess::unsafe_admin_endpoints`]), as in istiod; `pprof` paths answer `501`.
pub const DEBUG_PATHS: &[DebugPath] = &[
    DebugPath { path: "/debug/adsz", help: "Status and debug interface for ADS" },
    DebugPath {
        path: "/debug/adsz?push=true",
        help: "Initiates push of the current state to all connected endpoints",
    },
    DebugPath {
        path: "/debug/ambientz",
        help: "Debug support for ambient (501: meshpilot has no ambient mode)",
    },
    DebugPath { path: "/debug/authorizationz", help: "Internal authorization policies" },
    DebugPath { path: "/debug/cachez", help: "Info about the internal XDS caches" },
    DebugPath { path: "/debug/cachez?clear=true", help: "Clear the XDS caches" },
    DebugPath { path: "/debug/cachez?sizes=true", help: "Info about the size of the internal XDS caches" },
    DebugPath { path: "/debug/clusterz", help: "List remote clusters where istiod reads endpoints" },
    DebugPath {
        path: "/debug/config_dump",
        help: "ConfigDump in the form of the Envoy admin config dump API for passed in proxyID",
    },
    DebugPath {
        path: "/debug/config_summary",
        help: "meshpilot: what the proxy gets, summarised per resource (meshpilot proxy-config)",
    },
    DebugPath { path: "/debug/configstatusz", help: "meshpilot: invalid objects, findings, config sources" },
    DebugPath { path: "/debug/configz", help: "Debug support for config" },
    DebugPath { path: "/debug/connections", help: "Info about the connected XDS clients" },
    DebugPath { path: "/debug/ecdsz", help: "Status and debug interface for ECDS" },
    DebugPath { path: "/debug/edsz", help: "Status and debug interface for EDS" },
    DebugPath { path: "/debug/endpointShardz", help: "Info about the endpoint shards" },
    DebugPath { path: "/debug/endpointz", help: "Obsolete, use endpointShardz" },
    DebugPath { path: "/debug/inject", help: "Active inject template" },
    DebugPath { path: "/debug/instancesz", help: "Debug support for service instances" },
    DebugPath { path: "/debug/krtz", help: "Debug support for krt (501: meshpilot has no krt)" },
    DebugPath { path: "/debug/list", help: "List all supported debug commands in json" },
    DebugPath { path: "/debug/mcsz", help: "List information about Kubernetes MCS services (501)" },
    DebugPath { path: "/debug/mesh", help: "Active mesh config" },
    DebugPath { path: "/debug/ndsz", help: "Status and debug interface for NDS" },
    DebugPath { path: "/debug/networkz", help: "List cross-network gateways" },
    DebugPath {
        path: "/debug/objectz",
        help: "meshpilot: one config object's source, validation and per-proxy sync state",
    },
    DebugPath { path: "/debug/pprof/", help: "Displays pprof index (501: a Go runtime facility)" },
    DebugPath {
        path: "/debug/proxystatusz",
        help: "meshpilot: per-proxy, per-type sync status (proxy-status)",
    },
    DebugPath { path: "/debug/push_status", help: "Last PushContext Details" },
    DebugPath { path: "/debug/pushcontext", help: "Debug support for current push context" },
    DebugPath { path: "/debug/registryz", help: "Debug support for registry" },
    DebugPath { path: "/debug/resourcesz", help: "Debug support for watched resources" },
    DebugPath { path: "/debug/sidecarz", help: "Debug sidecar scope for a proxy" },
    DebugPath {
        path: "/debug/syncz",
        help: "Synchronization status of all Envoys connected to this Pilot instance",
    },
    DebugPath { path: "/debug/telemetryz", help: "Debug Telemetry configuration" },
];

/// istiod's `/debug/force_disconnect` entry (only with `UNSAFE_ENABLE_ADMIN_ENDPOINTS`).
pub const FORCE_DISCONNECT: DebugPath =
    DebugPath { path: "/debug/force_disconnect", help: "Disconnects a proxy from this Pilot" };

/// The paths meshpilot cannot serve and why (`501` with this text).
pub const NOT_IMPLEMENTED: &[(&str, &str)] = &[
    (
        "/debug/pprof",
        "pprof is the Go runtime's profiler; meshpilot is a Rust program and has no Go runtime to \
         profile (use perf or a heap profiler on the process)",
    ),
    (
        "/debug/ambientz",
        "meshpilot has no ambient mode (no ztunnel or waypoint support, no workload address index)",
    ),
    ("/debug/krtz", "krt is istiod's internal collection framework; meshpilot has no krt collections"),
    (
        "/debug/mcsz",
        "meshpilot does not implement Kubernetes multi-cluster services (ServiceExport / ServiceImport)",
    ),
];

/// `/debug/networkz` (istiod's `networkz`: `NetworkManager.AllGateways()`): the east-west gateways of
/// the current push context, sorted by address then port, with Go's field names (`Network`,
/// `Cluster`, `Addr`, `Port`, `HBONEPort` — always 0: no ambient —, `ServiceAccount`); `null` when
/// there is none, as istiod's nil list.
fn networkz(state: &DebugState) -> Value {
    state.server.push_context().map_or(Value::Null, |push| gateways_json(&push))
}

/// A push context's gateways as istiod's JSON list (`null` when empty).
fn gateways_json(push: &model::push::PushContext) -> Value {
    let mut gateways: Vec<_> = push.network_gateways().all().collect();
    gateways.sort_by(|a, b| (&a.address, a.port).cmp(&(&b.address, b.port)));
    if gateways.is_empty() {
        return Value::Null;
    }
    gateways
        .into_iter()
        .map(|g| {
            json!({
                "Network": g.network,
                "Cluster": g.cluster,
                "Addr": g.address,
                "Port": g.port,
                "HBONEPort": 0,
                "ServiceAccount": {"Namespace": "", "Name": ""},
            })
        })
        .collect()
}

/// The injection templates in force by name, for `/debug/inject` (istiod's `webhook` function): set
/// once by whoever runs the sidecar injector ([`InjectTemplates::set`]); unset, `/debug/inject` is a
/// `404`, as istiod without a webhook. Clones share the slot.
#[derive(Clone, Default)]
pub struct InjectTemplates(Arc<std::sync::OnceLock<TemplatesFn>>);

type TemplatesFn = Arc<dyn Fn() -> BTreeMap<String, String> + Send + Sync>;

impl std::fmt::Debug for InjectTemplates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("InjectTemplates").field(&self.0.get().is_some()).finish()
    }
}

impl InjectTemplates {
    /// Reads the templates with `templates` from now on (the first call wins; `false` after that).
    pub fn set(&self, templates: impl Fn() -> BTreeMap<String, String> + Send + Sync + 'static) -> bool {
        self.0.set(Arc::new(templates)).is_ok()
    }

    /// The templates now, `None` when no injector was set.
    pub fn get(&self) -> Option<BTreeMap<String, String>> {
        self.0.get().map(|f| f())
    }
}

/// A debug path's query parameters.
pub type Params = BTreeMap<String, String>;

/// Answers `path_and_query` (`/debug/edsz?proxyID=a.b`) for a caller with `grant`: istiod's handler of
/// that path (see the module docs), on the calling thread. Per-proxy generation runs here too: call
/// it where blocking is allowed (a blocking thread under tokio).
pub fn serve_debug(state: &DebugState, path_and_query: &str, grant: &Grant) -> DebugReply {
    if path_and_query.len() > MAX_PATH_AND_QUERY {
        return DebugReply::text(
            StatusCode::URI_TOO_LONG,
            format!("the path and query exceed {MAX_PATH_AND_QUERY} bytes\n"),
        );
    }
    let Ok(uri) = path_and_query.parse::<Uri>() else {
        return DebugReply::text(StatusCode::BAD_REQUEST, "not a path and query\n");
    };
    let q = match Query::<Params>::try_from_uri(&uri) {
        Ok(Query(q)) => q,
        Err(e) => return DebugReply::text(StatusCode::BAD_REQUEST, format!("bad query: {e}\n")),
    };
    let path = uri.path();
    if *grant != Grant::All && !access::namespace_path(path) {
        return DebugReply::text(
            StatusCode::FORBIDDEN,
            "callers outside the control plane's namespace may only read /debug/config_dump, /debug/edsz \
             and /debug/ndsz of their own namespace's proxies\n",
        );
    }
    if let Some((_, why)) =
        NOT_IMPLEMENTED.iter().find(|(p, _)| path == *p || path.starts_with(&format!("{p}/")))
    {
        return DebugReply::text(StatusCode::NOT_IMPLEMENTED, format!("{why}\n"));
    }
    match path {
        "/debug" => DebugReply::json(&index()),
        "/debug/list" => DebugReply::json(&list(state)),
        "/debug/configz" => DebugReply::json(&configz(state)),
        "/debug/mesh" => DebugReply::json(&state.server.mesh().source),
        "/debug/networkz" => DebugReply::json(&networkz(state)),
        "/debug/syncz" => {
            DebugReply::json(&syncz::syncz(&proxies(&state.server), q.get("namespace").map(String::as_str)))
        }
        "/debug/adsz" => adsz(state, &q),
        "/debug/connections" => DebugReply::json(&connections(&state.server.connections().snapshot())),
        "/debug/registryz" => {
            DebugReply::json(&registry::debug::registryz(&state.server.services().services()))
        }
        "/debug/endpointz" | "/debug/endpointShardz" => {
            DebugReply::json(&registry::debug::endpointz(&state.server.services().endpoint_shards()))
        }
        "/debug/config_dump" => config_dump_sync(state, &q, grant),
        "/debug/edsz" => typed_dump(state, &q, grant, type_url::ENDPOINT),
        "/debug/ndsz" => typed_dump(state, &q, grant, type_url::NAME_TABLE),
        "/debug/ecdsz" => typed_dump(state, &q, grant, type_url::EXTENSION_CONFIG),
        "/debug/cachez" => cachez(state, &q),
        "/debug/sidecarz" => sidecarz(state, &q, grant),
        "/debug/resourcesz" => DebugReply::json(&resourcesz(state)),
        "/debug/instancesz" => DebugReply::json(&instancesz(state)),
        "/debug/authorizationz" => {
            DebugReply::json(&json!({"authorization_policies": authorization_policies(state)}))
        }
        "/debug/telemetryz" => telemetryz(state, &q, grant),
        "/debug/push_status" => DebugReply::json(&push_status(state)),
        "/debug/pushcontext" => DebugReply::json(&pushcontext(state)),
        "/debug/clusterz" => DebugReply::json(&clusterz(state)),
        "/debug/inject" => inject(state),
        "/debug/force_disconnect" if state.access.unsafe_admin_endpoints => {
            force_disconnect(state, &q, grant)
        }
        "/debug/configstatusz" => DebugReply::json(&configstatusz(state)),
        "/debug/proxystatusz" => {
            DebugReply::json(&proxystatus::proxystatusz(&proxies(&state.server), &state.control_plane_id))
        }
        "/debug/objectz" => objectz(state, &q),
        _ => DebugReply::text(StatusCode::NOT_FOUND, format!("no debug path {path:?}; see /debug/list\n")),
    }
}

/// [`serve_debug`] as status and body (the content type is JSON for `2xx` answers but
/// `/debug/cachez?clear=true` and `/debug/force_disconnect`, text otherwise).
pub fn serve_debug_path(state: &DebugState, path_and_query: &str, grant: &Grant) -> (StatusCode, Vec<u8>) {
    let reply = serve_debug(state, path_and_query, grant);
    (reply.status, reply.body)
}

/// `/debug`: every path served, `/` and `/ready` first (meshpilot's JSON list; istiod renders the same
/// list as an HTML table).
fn index() -> Value {
    let mut all = vec!["/".to_string(), "/ready".to_string()];
    all.extend(DEBUG_PATHS.iter().map(|p| p.path.to_string()));
    json!(all)
}

/// `/debug/list` (istiod's `list`): the names of the debug paths without `/debug/`, sorted, without
/// `list` itself and the `pprof` paths; `force_disconnect` only when registered.
pub fn list(state: &DebugState) -> Value {
    let mut names: Vec<&str> = DEBUG_PATHS
        .iter()
        .chain(state.access.unsafe_admin_endpoints.then_some(&FORCE_DISCONNECT))
        .map(|p| p.path.trim_start_matches("/debug/"))
        .filter(|n| *n != "list" && !n.contains("pprof"))
        .collect();
    names.sort_unstable();
    json!(names)
}

fn configz(state: &DebugState) -> Value {
    let mut dump = config::configz(state.server.store().as_ref());
    if let Some(ctx) = state.server.push_context() {
        // Generated config (Gateway API → Istio) and the statuses computed for its inputs.
        config::configz::add_generated(&mut dump, ctx.generated());
    }
    dump
}

/// `/debug/adsz`: connections and watches; `?push=true` first forces a push to all (at most once a
/// second, `429` otherwise).
fn adsz(state: &DebugState, q: &Params) -> DebugReply {
    if q.get("push").map(String::as_str) == Some("true") {
        if !state.limits.admit_forced_push(std::time::Instant::now()) {
            return DebugReply::text(
                StatusCode::TOO_MANY_REQUESTS,
                "a forced push was requested less than a second ago\n",
            );
        }
        state.server.config_update(PushRequest::forced(TriggerReason::Debug));
    }
    DebugReply::json(&syncz::adsz(&state.server.connections().snapshot()))
}

/// `/debug/connections` (istiod's `connectionsHandler`): `{"totalClients": n, "clients":
/// [{"connectionId", "connectedAt", "address"}]}` of the xDS streams, by connection id (`clients`
/// left out when none, as istiod's `omitempty`).
pub fn connections(conns: &[ConnectionSnapshot<Proxy>]) -> Value {
    let mut sorted: Vec<&ConnectionSnapshot<Proxy>> = conns.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let clients: Vec<Value> = sorted
        .iter()
        .map(|c| {
            json!({
                "connectionId": c.id,
                "connectedAt": rfc3339_nano(Some(c.connected_at)),
                "address": c.peer.map_or_else(|| "0.0.0.0".to_owned(), |p| p.to_string()),
            })
        })
        .collect();
    let mut out = Map::new();
    out.insert("totalClients".into(), json!(clients.len()));
    if !clients.is_empty() {
        out.insert("clients".into(), Value::Array(clients));
    }
    Value::Object(out)
}

/// The connection `proxyID` names (the proxy with exactly that id, else istiod's `getDebugConnection`:
/// the first whose connection id contains it), if `grant` allows its namespace: `400` without `proxyID` or with one over
/// [`MAX_PROXY_ID`], `404` when no proxy matches, `403` for a proxy of another namespace.
fn debug_connection(
    state: &DebugState,
    q: &Params,
    grant: &Grant,
) -> Result<ConnectionSnapshot<Proxy>, DebugReply> {
    let Some(id) = q.get("proxyID").filter(|i| !i.is_empty()) else {
        return Err(DebugReply::text(
            StatusCode::BAD_REQUEST,
            "missing proxyID (a connection id or a part of it, see /debug/adsz)\n",
        ));
    };
    if id.len() > MAX_PROXY_ID {
        return Err(DebugReply::text(
            StatusCode::BAD_REQUEST,
            format!("proxyID exceeds {MAX_PROXY_ID} bytes\n"),
        ));
    }
    let mut conns = proxies(&state.server);
    // The proxy with exactly this id (istiod's `getProxyConnection`, what istioctl sends over xDS),
    // else the first connection id containing it (its HTTP `getDebugConnection`).
    let exact = conns.iter().position(|c| c.proxy.id == *id);
    let Some(at) = exact.or_else(|| conns.iter().position(|c| c.id.contains(id.as_str()))) else {
        return Err(DebugReply::text(
            StatusCode::NOT_FOUND,
            format!("no connected proxy matches proxyID {id:?}\n"),
        ));
    };
    let conn = conns.swap_remove(at);
    if !grant.allows_namespace(&conn.proxy.config_namespace) {
        return Err(forbidden_proxy());
    }
    Ok(conn)
}

fn forbidden_proxy() -> DebugReply {
    DebugReply::text(
        StatusCode::FORBIDDEN,
        "this proxy is not of your namespace: callers outside the control plane's namespace may only read \
         their own namespace's proxies\n",
    )
}

/// The proxy as the generators see it (with its service instances) and the push context in force.
fn debug_proxy(
    state: &DebugState,
    conn: &ConnectionSnapshot<Proxy>,
    grant: &Grant,
) -> Result<(model::push::ProxyContext, Arc<PushContext>), DebugReply> {
    let Some(push) = state.server.push_context() else {
        return Err(DebugReply::text(StatusCode::SERVICE_UNAVAILABLE, "no push context yet\n"));
    };
    let mut proxy = proxy_context(&conn.proxy)
        .map_err(|e| DebugReply::text(StatusCode::BAD_REQUEST, format!("{e}\n")))?;
    if !grant.allows_namespace(&proxy.namespace) {
        return Err(forbidden_proxy());
    }
    let discovery: &dyn model::ServiceDiscovery = state.server.services().as_ref();
    proxy.set_instances_from(discovery);
    Ok((proxy, push))
}

/// One of the [`DebugLimits::CONCURRENT_DUMPS`](crate::DebugLimits::CONCURRENT_DUMPS) slots of
/// per-proxy generation, or `429`.
fn generation_permit(state: &DebugState) -> Result<tokio::sync::OwnedSemaphorePermit, DebugReply> {
    state.limits.dumps.clone().try_acquire_owned().map_err(|_| {
        DebugReply::text(StatusCode::TOO_MANY_REQUESTS, "other config dumps are being generated; try again\n")
    })
}

/// `/debug/config_dump?proxyID=[&include_eds][&pretty]` on the calling thread: Envoy's admin
/// `ConfigDump` of what meshpilot would send the proxy ([`proxy_config_dump`]) as JSON.
pub fn config_dump_sync(state: &DebugState, q: &Params, grant: &Grant) -> DebugReply {
    let options = discovery::debug::DumpOptions { include_eds: q.contains_key("include_eds") };
    let dump = match proxy_config_dump(state, q, grant, options) {
        Ok(d) => d,
        Err(reply) => return reply,
    };
    match discovery::debug::config_dump_json(&dump, q.contains_key("pretty")) {
        Ok(body) => DebugReply::json_bytes(body),
        Err(e) => DebugReply::text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    }
}

/// The `ConfigDump` of the proxy `q`'s `proxyID` names ([`discovery::debug::config_dump`], generated on a
/// cache of its own under one of the [`DebugLimits`](crate::DebugLimits) slots): shared by
/// `/debug/config_dump` and `istio.io/debug/config_dump` over xDS ([`crate::debug_xds`]).
///
/// # Errors
/// The reply to send instead: `400` without or with an over-long `proxyID`, `404` for no such
/// proxy, `403` for a proxy of another namespace, `503` before the first
/// push context, `429` when the slots are taken.
pub fn proxy_config_dump(
    state: &DebugState,
    q: &Params,
    grant: &Grant,
    options: discovery::debug::DumpOptions,
) -> Result<envoy_types::pb::envoy::admin::v3::ConfigDump, DebugReply> {
    let conn = debug_connection(state, q, grant)?;
    let (proxy, push) = debug_proxy(state, &conn, grant)?;
    let _permit = generation_permit(state)?;
    Ok(discovery::debug::config_dump(&networking::Snapshot::new(push), &proxy, options))
}

/// `/debug/edsz`, `/debug/ndsz`, `/debug/ecdsz` (istiod's `typedConfigDumpHandler`): Envoy's admin
/// `ConfigDump` of the resources of `type_url` generated now for the proxy's watch, each in the proto3
/// JSON mapping with its `@type`: `{"configs": [...]}`, or `{}` when there are none or the proxy does
/// not watch the type (istiod skips unwatched types). EDS lists only the watched names that are
/// clusters of the proxy.
fn typed_dump(state: &DebugState, q: &Params, grant: &Grant, type_url: &str) -> DebugReply {
    let conn = match debug_connection(state, q, grant) {
        Ok(c) => c,
        Err(reply) => return reply,
    };
    let Some(watched) = conn.types.get(type_url) else { return DebugReply::json(&json!({})) };
    let watch = watched.watch.clone();
    let (proxy, push) = match debug_proxy(state, &conn, grant) {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    let _permit = match generation_permit(state) {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    let snapshot = networking::Snapshot::new(push);
    let mut configs: Vec<Vec<u8>> = Vec::new();
    if type_url == type_url::NAME_TABLE {
        let meta = &conn.proxy.metadata;
        let uses_auto =
            (state.server.ip_autoallocate() || meta.flag("DNS_AUTO_ALLOCATE")) && meta.flag("DNS_CAPTURE");
        let node = networking::nds::NameTableProxy::new(&proxy.ips, &meta.network, uses_auto);
        let scope = snapshot.sidecar_scope(&proxy);
        let table = networking::nds::build_name_table(&snapshot, &scope, &node);
        configs.push(serde_json::to_vec(&name_table_json(&table)).unwrap_or_default());
    } else if watch.wildcard || !watch.names.is_empty() {
        let names: Vec<String> =
            if watch.wildcard { Vec::new() } else { watch.names.iter().cloned().collect() };
        let known_only = type_url == type_url::ENDPOINT;
        let generated = discovery::source::generate_type(&snapshot, &proxy, type_url, &names, known_only);
        let resources = match generated {
            Ok((resources, _findings)) => resources,
            Err(e) => return DebugReply::text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
        };
        for r in &resources {
            match discovery::rest::any_json(&r.body) {
                Ok(json) => configs.push(json),
                Err(e) => {
                    return DebugReply::text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("resource {:?} has no JSON form: {e}\n", r.name),
                    );
                }
            }
        }
    }
    if configs.is_empty() {
        return DebugReply::json(&json!({}));
    }
    let mut body = Vec::with_capacity(configs.iter().map(|c| c.len() + 1).sum::<usize>() + 16);
    body.extend_from_slice(b"{\"configs\":[");
    for (i, c) in configs.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(c);
    }
    body.extend_from_slice(b"]}");
    DebugReply::json_bytes(body)
}

/// `istio.networking.nds.v1.NameTable` in the proto3 JSON mapping with its `@type` (empty fields left
/// out, as protojson does).
pub fn name_table_json(table: &networking::nds::NameTable) -> Value {
    let entries: Map<String, Value> = table
        .table
        .iter()
        .map(|(host, info)| {
            let mut m = Map::new();
            if !info.ips.is_empty() {
                m.insert("ips".into(), json!(info.ips));
            }
            for (key, value) in
                [("registry", &info.registry), ("shortname", &info.shortname), ("namespace", &info.namespace)]
            {
                if !value.is_empty() {
                    m.insert(key.into(), json!(value));
                }
            }
            if !info.alt_hosts.is_empty() {
                m.insert("altHosts".into(), json!(info.alt_hosts));
            }
            (host.clone(), Value::Object(m))
        })
        .collect();
    let mut out = Map::new();
    out.insert("@type".into(), json!(networking::nds::NAME_TABLE_TYPE));
    if !entries.is_empty() {
        out.insert("table".into(), Value::Object(entries));
    }
    Value::Object(out)
}

/// istiod's `util.ByteCount`: `999B`, `1.0kB`, `2.5MB` (powers of 1000).
pub fn byte_count(bytes: usize) -> String {
    const UNIT: usize = 1000;
    if bytes < UNIT {
        return format!("{bytes}B");
    }
    let (mut div, mut exp) = (UNIT, 0usize);
    let mut n = bytes / UNIT;
    while n >= UNIT {
        div *= UNIT;
        exp += 1;
        n /= UNIT;
    }
    let unit = "kMGTPE".as_bytes().get(exp).copied().map_or('E', char::from);
    format!("{:.1}{unit}B", bytes as f64 / div as f64)
}

/// `/debug/cachez` (istiod's `cachez`) over the generation cache ([`networking::GenerationCache`]):
/// `{typeUrl: [name…]}`; `?sizes=…` `{typeUrl: size, "total": size}` in istiod's `ByteCount` form;
/// `?clear=…` empties it (`Cache cleared`). Any non-empty value selects, as in istiod.
fn cachez(state: &DebugState, q: &Params) -> DebugReply {
    let cache = state.server.generation_cache();
    let set = |k: &str| q.get(k).is_some_and(|v| !v.is_empty());
    if set("clear") {
        cache.clear();
        return DebugReply::text(StatusCode::OK, "Cache cleared\n");
    }
    let resources = cache.resources();
    if set("sizes") {
        let mut raw: BTreeMap<String, usize> = BTreeMap::new();
        for r in &resources {
            *raw.entry(r.type_url.clone()).or_default() += r.bytes;
        }
        let total: usize = raw.values().sum();
        let mut out: Map<String, Value> = raw.into_iter().map(|(k, v)| (k, json!(byte_count(v)))).collect();
        out.insert("total".into(), json!(byte_count(total)));
        return DebugReply::json(&Value::Object(out));
    }
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in resources {
        out.entry(r.type_url).or_default().push(r.name);
    }
    for names in out.values_mut() {
        names.sort_unstable();
    }
    DebugReply::json(&json!(out))
}

/// `/debug/sidecarz?proxyID=` (istiod's `SidecarScope.MarshalJSON`): `version`, `name` (the Sidecar's,
/// or istiod's `default-sidecar`), `namespace`, `outboundTrafficPolicy` (`{"mode": "ALLOW_ANY"}`;
/// `{}` for `REGISTRY_ONLY`, protojson's zero enum), `services`, `egressListenerServices`,
/// `servicesByHostname`, `sidecar` (the spec, or `null`) and `destinationRules` (per host the rules
/// that apply: `[{"name", "namespace"}]` of the merged objects; istiod's consolidated rules marshal
/// as `{}`).
fn sidecarz(state: &DebugState, q: &Params, grant: &Grant) -> DebugReply {
    let conn = match debug_connection(state, q, grant) {
        Ok(c) => c,
        Err(reply) => return reply,
    };
    let (proxy, push) = match debug_proxy(state, &conn, grant) {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    let scope = state.server.generation_cache().sidecar_scope(&push, &proxy);
    let service = |s: &Arc<model::service::Service>| registry::debug::service_json(s, s.default_address());
    let services: Vec<Value> = scope.services().iter().map(service).collect();
    let egress: Vec<Value> = scope
        .egress
        .iter()
        .map(|e| Value::Array(e.imports.services().iter().map(service).collect()))
        .collect();
    let by_host: Map<String, Value> =
        scope.services().iter().map(|s| (s.hostname.clone(), json!([service(s)]))).collect();
    let rules: Map<String, Value> = scope
        .services()
        .iter()
        .filter_map(|s| {
            let rule = push.destination_rule(&proxy, s)?;
            let keys: Vec<Value> =
                rule.keys.iter().map(|k| json!({"name": k.name, "namespace": k.namespace})).collect();
            Some((s.hostname.clone(), Value::Array(keys)))
        })
        .collect();
    let sidecar = push.sidecar_for(&proxy);
    let policy = match scope.outbound_traffic_policy {
        model::push::OutboundTrafficPolicy::AllowAny => json!({"mode": "ALLOW_ANY"}),
        model::push::OutboundTrafficPolicy::RegistryOnly => json!({}),
    };
    DebugReply::json(&json!({
        "version": push.version(),
        "name": sidecar.as_ref().map_or("default-sidecar", |c| c.meta.name.as_str()),
        "namespace": scope.namespace,
        "outboundTrafficPolicy": policy,
        "services": services,
        "egressListenerServices": egress,
        "servicesByHostname": by_host,
        "sidecar": sidecar.as_ref().map_or(Value::Null, |c| c.spec.to_json()),
        "destinationRules": rules,
    }))
}

/// `/debug/resourcesz` (istiod's `resourcez`): the kinds of the config store,
/// `[{"group", "version", "kind"}]`.
fn resourcesz(state: &DebugState) -> Value {
    let kinds: Vec<Value> = state
        .server
        .store()
        .schemas()
        .iter()
        .map(|k| {
            let s = k.schema();
            json!({"group": s.group, "version": s.version, "kind": k.as_str()})
        })
        .collect();
    Value::Array(kinds)
}

/// `/debug/instancesz` (istiod's `instancesz`): per connected proxy id its service targets,
/// `[{"Service": <model.Service>, "Port": {"name", "port", "protocol", "TargetPort"}}]`.
fn instancesz(state: &DebugState) -> Value {
    let discovery: &dyn model::ServiceDiscovery = state.server.services().as_ref();
    let mut out = Map::new();
    for conn in state.server.connections().snapshot() {
        let Ok(mut proxy) = proxy_context(&conn.proxy) else { continue };
        proxy.set_instances_from(discovery);
        let targets: Vec<Value> = proxy
            .service_instances
            .iter()
            .map(|i| {
                let mut port = Map::new();
                if !i.service_port.name.is_empty() {
                    port.insert("name".into(), json!(i.service_port.name));
                }
                port.insert("port".into(), json!(i.service_port.port));
                port.insert("protocol".into(), json!(i.service_port.protocol.as_str()));
                port.insert("TargetPort".into(), json!(i.endpoint.endpoint_port));
                json!({
                    "Service": registry::debug::service_json(&i.service, i.service.default_address()),
                    "Port": port,
                })
            })
            .collect();
        out.insert(conn.proxy.id.clone(), Value::Array(targets));
    }
    Value::Object(out)
}

/// Objects of `kind` by namespace as istiod's `AuthorizationPolicies` / `Telemetries` hold them:
/// `{namespace: [{"name", "namespace", ("annotations",) "spec"}]}`.
fn by_namespace(state: &DebugState, kind: api::Kind, annotations: bool) -> Map<String, Value> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for c in state.server.store().list(kind, None) {
        let mut item = Map::new();
        item.insert("name".into(), json!(c.meta.name));
        item.insert("namespace".into(), json!(c.meta.namespace));
        if annotations {
            let a = &c.meta.annotations;
            item.insert("annotations".into(), if a.is_empty() { Value::Null } else { json!(a) });
        }
        item.insert("spec".into(), c.spec.to_json());
        out.entry(c.meta.namespace.clone()).or_default().push(Value::Object(item));
    }
    out.into_iter().map(|(ns, items)| (ns, Value::Array(items))).collect()
}

/// istiod's `AuthorizationPolicies`: `{"namespace_to_policies": {ns: [{name, namespace, annotations,
/// spec}]}, "root_namespace"}`.
fn authorization_policies(state: &DebugState) -> Value {
    json!({
        "namespace_to_policies": by_namespace(state, api::Kind::AuthorizationPolicy, true),
        "root_namespace": state.server.mesh().root_namespace,
    })
}

/// `/debug/telemetryz` (istiod's `telemetryz`): without `proxyID`, `{"telemetries":
/// {"namespace_to_telemetries": {ns: [{name, namespace, spec}]}, "root_namespace"}}`; with one, the
/// Telemetries that apply to the proxy as istiod's `computedTelemetries`: `Root`, `Proxy`,
/// `Namespace`, `Workload` (`{"Namespace", "Name"}`, empty when none), `Metrics`, `Logging`
/// (`[{…key, "Logging": [...]}]`), `Tracing`.
fn telemetryz(state: &DebugState, q: &Params, grant: &Grant) -> DebugReply {
    if !q.contains_key("proxyID") {
        return DebugReply::json(&json!({"telemetries": {
            "namespace_to_telemetries": by_namespace(state, api::Kind::Telemetry, false),
            "root_namespace": state.server.mesh().root_namespace,
        }}));
    }
    let conn = match debug_connection(state, q, grant) {
        Ok(c) => c,
        Err(reply) => return reply,
    };
    let (proxy, push) = match debug_proxy(state, &conn, grant) {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    let root = &push.mesh().root_namespace;
    let empty = || json!({"Namespace": "", "Name": ""});
    let (mut key_root, mut key_proxy, mut key_workload) = (empty(), empty(), empty());
    let (mut metrics, mut logging, mut tracing) = (Vec::new(), Vec::new(), Vec::new());
    for c in push.telemetries(&proxy) {
        let spec = c.spec.to_json();
        let name = json!({"Namespace": c.meta.namespace, "Name": c.meta.name});
        let key_field = if &c.meta.namespace == root && spec.get("selector").is_none() {
            key_root = name.clone();
            "Root"
        } else if spec.get("selector").is_some()
            || spec.get("targetRef").is_some()
            || spec.get("targetRefs").is_some()
        {
            key_workload = name.clone();
            "Workload"
        } else {
            key_proxy = name.clone();
            "Proxy"
        };
        let list = |field: &str| spec.get(field).and_then(Value::as_array).cloned().unwrap_or_default();
        metrics.extend(list("metrics"));
        tracing.extend(list("tracing"));
        let logs = list("accessLogging");
        if !logs.is_empty() {
            let mut entry = Map::new();
            for k in ["Root", "Proxy", "Namespace", "Workload"] {
                entry.insert(k.into(), if k == key_field { name.clone() } else { empty() });
            }
            entry.insert("Logging".into(), Value::Array(logs));
            logging.push(Value::Object(entry));
        }
    }
    DebugReply::json(&json!({
        "Root": key_root, "Proxy": key_proxy, "Namespace": empty(), "Workload": key_workload,
        "Metrics": metrics, "Logging": logging, "Tracing": tracing,
    }))
}

/// `/debug/push_status` (istiod's `PushContext.StatusJSON`: `{metric: {key: {"proxy", "message"}}}`):
/// meshpilot has no istiod conflict metrics; its findings of the push context in force and of
/// per-proxy generation stand in, keyed by severity (`dropped`, `unsupported`, `warning`), then by the
/// object (`Kind/namespace/name`) or resource, with the first proxy that met it. `{}` before the first
/// push context.
fn push_status(state: &DebugState) -> Value {
    let Some(push) = state.server.push_context() else { return json!({}) };
    let mut out: BTreeMap<&'static str, Map<String, Value>> = BTreeMap::new();
    let severity = |f: &model::Finding| match f.severity {
        model::finding::Severity::Dropped => "dropped",
        model::finding::Severity::Unsupported => "unsupported",
        model::finding::Severity::Warning => "warning",
    };
    let key = |f: &model::Finding| {
        let what = f.config.as_ref().map_or_else(|| f.resource.clone(), ToString::to_string);
        if f.path.is_empty() { what } else { format!("{what} {}", f.path) }
    };
    for f in push.findings() {
        out.entry(severity(f)).or_default().insert(key(f), json!({"message": f.to_string()}));
    }
    for (f, seen) in state.server.generation_cache().generation_findings() {
        let mut status = Map::new();
        if let Some(p) = seen.proxies.first() {
            status.insert("proxy".into(), json!(p));
        }
        status.insert("message".into(), json!(f.to_string()));
        out.entry(severity(&f)).or_default().insert(key(&f), Value::Object(status));
    }
    json!(out)
}

/// `/debug/pushcontext` (istiod's `PushContextDebug`): `AuthorizationPolicies`, and the east-west
/// gateways as `NetworkGateways` and `UnresolvedGateways` (the same list: meshpilot resolves no
/// gateway host names, it leaves them out).
fn pushcontext(state: &DebugState) -> Value {
    let Some(push) = state.server.push_context() else { return json!({}) };
    json!({
        "AuthorizationPolicies": authorization_policies(state),
        "NetworkGateways": gateways_json(&push),
        "UnresolvedGateways": gateways_json(&push),
    })
}

/// `/debug/clusterz` (istiod's `cluster.DebugInfo` list): the config cluster, then the remote clusters
/// of the multi-cluster Secrets, `[{"id", "secretName", "syncStatus": "synced" | "syncing" | "timeout" |
/// "closed"}]`, plus `"error"` for a remote cluster whose kubeconfig was refused (meshpilot's addition).
/// Without a Kubernetes registry: the clusters of the endpoint shards.
fn clusterz(state: &DebugState) -> Value {
    let services = state.server.services();
    let clusters = services.clusters();
    if clusters.is_empty() {
        let status = if services.has_synced() { "synced" } else { "syncing" };
        let ids: std::collections::BTreeSet<String> =
            services.endpoint_shards().into_iter().map(|s| s.shard.cluster).collect();
        return Value::Array(
            ids.into_iter().map(|id| json!({"id": id, "secretName": "", "syncStatus": status})).collect(),
        );
    }
    Value::Array(
        clusters
            .into_iter()
            .map(|c| {
                let mut v =
                    json!({"id": c.id, "secretName": c.secret_name, "syncStatus": c.sync_status.as_str()});
                if !c.error.is_empty() {
                    v["error"] = json!(c.error);
                }
                v
            })
            .collect(),
    )
}

/// `/debug/inject` (istiod's `injectTemplateHandler`): the injection templates in force by name, `404`
/// when there is no injector (as istiod without a webhook).
fn inject(state: &DebugState) -> DebugReply {
    match state.inject_templates.get() {
        Some(templates) => DebugReply::json(&json!(templates)),
        None => DebugReply::text(StatusCode::NOT_FOUND, "no sidecar injector runs in this control plane\n"),
    }
}

/// `/debug/force_disconnect?proxyID=` (istiod's `forceDisconnect`, only with
/// `UNSAFE_ENABLE_ADMIN_ENDPOINTS`): ends the proxy's stream; `OK`.
fn force_disconnect(state: &DebugState, q: &Params, grant: &Grant) -> DebugReply {
    let conn = match debug_connection(state, q, grant) {
        Ok(c) => c,
        Err(reply) => return reply,
    };
    if state.server.connections().disconnect(&conn.id) {
        DebugReply::text(StatusCode::OK, "OK")
    } else {
        DebugReply::text(
            StatusCode::NOT_FOUND,
            "the proxy is not connected over ADS (a polling proxy has no stream)\n",
        )
    }
}

fn configstatusz(s: &DebugState) -> Value {
    let files: Vec<Value> = s
        .files
        .iter()
        .map(|f| json!({"dir": f.dir().display().to_string(), "status": f.status().to_json()}))
        .collect();
    let findings: Vec<Value> = s
        .server
        .push_context()
        .map(|p| p.findings().iter().map(|f| json!(f.to_string())).collect())
        .unwrap_or_default();
    let generation: Vec<Value> = s
        .server
        .generation_cache()
        .generation_findings()
        .into_iter()
        .map(|(f, seen)| {
            json!({
                "finding": f.to_string(),
                "config": f.config.as_ref().map(|k| k.to_string()),
                "path": f.path,
                "message": f.message,
                "proxies": seen.proxies,
                "count": seen.count,
            })
        })
        .collect();
    let mut invalid = crate::invalid::file_invalid_objects(&s.files);
    for list in &s.invalid_objects {
        invalid.extend((list.0)());
    }
    json!({
        "invalidObjects": invalid,
        "configSources": files,
        "registryWarnings": registry::debug::registry_warnings(&s.server.services().warnings()),
        "pushContextFindings": findings,
        "generationFindings": generation,
        "startupWarnings": *s.startup_warnings,
        "mesh": s.mesh_sources.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
        "fileSecrets": s.secrets.status_json(),
    })
}

/// `/debug/objectz`: see the module table of [`crate`]. `kind` is an Istio kind or its plural, any
/// case; `namespace` defaults to `default` for one object.
fn objectz(s: &DebugState, q: &Params) -> DebugReply {
    let kind =
        match q.get("kind").filter(|k| !k.is_empty()) {
            None => None,
            Some(word) => match api::Kind::ALL.iter().copied().find(|k| {
                k.as_str().eq_ignore_ascii_case(word) || k.schema().plural.eq_ignore_ascii_case(word)
            }) {
                Some(k) => Some(k),
                None => {
                    return DebugReply::text(
                        StatusCode::BAD_REQUEST,
                        format!("unknown kind {word:?}: use an Istio kind\n"),
                    );
                }
            },
        };
    let namespace = q.get("namespace").filter(|n| !n.is_empty()).cloned();
    let Some(name) = q.get("name").filter(|n| !n.is_empty()).cloned() else {
        let list: Vec<_> = discovery::objects::object_statuses(&s.server, &s.files)
            .into_iter()
            .filter(|o| kind.is_none_or(|k| o.kind == k.as_str()))
            .filter(|o| namespace.as_ref().is_none_or(|n| &o.namespace == n))
            .collect();
        return DebugReply::json(&json!(list));
    };
    let Some(kind) = kind else {
        return DebugReply::text(StatusCode::BAD_REQUEST, "name given without kind\n");
    };
    let key = model::ConfigKey { kind, namespace: namespace.unwrap_or_else(|| "default".into()), name };
    match discovery::objects::object_status(&s.server, &s.files, &key) {
        Some(status) => DebugReply::json(&json!(status)),
        None => {
            let mut body = format!("no {key} in the config in force\n");
            for r in discovery::objects::rejections(&s.files, &key) {
                body.push_str(&format!("rejected: {r}\n"));
            }
            DebugReply::text(StatusCode::NOT_FOUND, body)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_count_is_istios() {
        assert_eq!(byte_count(0), "0B");
        assert_eq!(byte_count(999), "999B");
        assert_eq!(byte_count(1000), "1.0kB");
        assert_eq!(byte_count(1536), "1.5kB");
        assert_eq!(byte_count(2_500_000), "2.5MB");
        assert_eq!(byte_count(usize::MAX), format!("{:.1}EB", usize::MAX as f64 / 1e18));
    }

    #[test]
    fn the_path_table_is_sorted_and_unique() {
        let paths: Vec<&str> = DEBUG_PATHS.iter().map(|p| p.path).collect();
        let mut sorted = paths.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(paths, sorted);
        for (p, _) in NOT_IMPLEMENTED {
            assert!(paths.iter().any(|q| q.starts_with(p)), "{p} is not listed");
        }
    }

    #[test]
    fn name_tables_are_proto3_json() {
        let mut table = networking::nds::NameTable::default();
        table.table.insert(
            "reviews.default.svc.cluster.local".into(),
            networking::nds::NameInfo {
                ips: vec!["10.0.0.1".into()],
                registry: "Kubernetes".into(),
                shortname: "reviews".into(),
                namespace: "default".into(),
                alt_hosts: Vec::new(),
            },
        );
        table.table.insert("ext.example.com".into(), networking::nds::NameInfo::default());
        assert_eq!(
            name_table_json(&table),
            json!({"@type": "type.googleapis.com/istio.networking.nds.v1.NameTable", "table": {
                "ext.example.com": {},
                "reviews.default.svc.cluster.local": {"ips": ["10.0.0.1"], "registry": "Kubernetes", "shortname": "reviews", "namespace": "default"},
            }})
        );
        assert_eq!(
            name_table_json(&networking::nds::NameTable::default()),
            json!({"@type": "type.googleapis.com/istio.networking.nds.v1.NameTable"})
        );
    }
}
