//! meshpilot's control-plane HTTP endpoints (axum): readiness and Istio's debug handlers
//! (`pilot/pkg/xds/debug.go`) on `--http-addr` (8080), Prometheus `/metrics` on `--monitoring-addr`
//! (15014), where the binary serves the debug handlers too, as istiod does. The handlers read the [`DiscoveryServer`] (config, services, connections, the current
//! push context) and the SDS [`FileSecrets`]; only `/debug/adsz?push=true` acts (a forced push).
//!
//! | path | body |
//! |---|---|
//! | `/` | the web status page ([`status_page`]): proxies and their sync state, recent pushes, config objects and their status, refreshed in place every second |
//! | `/ready` | 200 once config and services are synced and the first push context is built, else 503 with the reason (e.g. a config source that has not answered) |
//! | `/debug` | the list of debug endpoints |
//! | `/debug/configz` | config in force (Istio's shape) |
//! | `/debug/syncz` | per-proxy, per-type sync status (CSDS-style), streams and polling proxies |
//! | `/debug/adsz` | connections and watches; `?push=true` forces a push to all |
//! | `/debug/registryz` | services |
//! | `/debug/endpointz` | endpoints per service and shard |
//! | `/debug/config_dump?proxyID=ID[&include_eds]` | what meshpilot would send the proxy, as Envoy's admin `ConfigDump` (istiod's; `istio.io/debug/config_dump` over xDS gives the same sections, [`debug_xds`]) |
//! | `/debug/config_summary?proxyID=ID` | meshpilot only: the same summarised (clusters with their DestinationRule, listeners, routes, endpoints, findings; `meshpilot proxy-config`) |
//! | `/debug/proxystatusz` | meshpilot only: control-plane name and per-proxy, per-type sync status with versions (`meshpilot proxy-status`; see [`proxystatus`]) |
//! | `/debug/objectz?kind=&namespace=&name=` | one config object: source (file:line or cluster), validation, the connected proxies it concerns and per proxy ACKED / PENDING / NACKED with Envoy's error and the Istio field traced (`discovery::objects`); without `name`, every object (optionally of `kind` / in `namespace`) with its validation state and counts; unknown kind 400, unknown object 404 |
//! | `/debug/mesh` | the mesh config in force (istiod's; the fields as given) |
//! | `/debug/configstatusz` | invalid objects of every source (kind, namespace, name, resourceVersion, source, each finding's field path and reason: [`invalid`]), file sources' bad files and duplicates, registry warnings, push context findings, findings of per-proxy generation (e.g. security policies that could not be translated, with their field path and the proxies concerned), file secrets (SDS names served or refused, with the reason) |

//! | `POST /v3/discovery:{clusters,listeners,routes,endpoints,secrets}` | Envoy's REST-JSON xDS ([`rest`]; not guarded, like the plaintext ADS port; SDS refused) |
//!
//! Every path but `/ready` and the REST-JSON xDS paths is guarded ([`access`]): loopback callers, or callers authenticated as on
//! the secure xDS port, as istiod's `allowAuthenticatedOrLocalhost`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod access;
pub mod serve;
pub mod status_page;

use std::sync::Arc;

use access::{DebugAccess, Grant};
use axum::{
    Extension, Json, Router,
    extract::{Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::get,
};
use config::FileSource;
use discovery::{DiscoveryServer, source::proxy_context};
use sds::FileSecrets;
use serde::Deserialize;
use serde_json::{Value, json};

use model::push::{PushRequest, TriggerReason};

pub mod debug_xds;
pub mod invalid;
pub mod proxystatus;
pub mod rest;
pub mod syncz;

/// The proxies the debug handlers show: the xDS streams (but debug clients such as `istioctl`
/// asking only debug types, [`discovery::debug::is_debug_client`]), then the proxies polling the
/// REST-JSON endpoints (protocol `rest`, [`xds::polling`]).
pub fn proxies(server: &DiscoveryServer) -> Vec<xds::ConnectionSnapshot<model::push::node::Proxy>> {
    let mut all = server.connections().snapshot();
    all.retain(|c| !discovery::debug::is_debug_client(c));
    all.extend(server.polling().snapshot(std::time::SystemTime::now()));
    all
}

/// What the debug handlers read.
#[derive(Clone, Debug)]
pub struct DebugState {
    /// The server.
    pub server: Arc<DiscoveryServer>,
    /// The `--config-dir` sources (for their bad-file status).
    pub files: Vec<Arc<FileSource>>,
    /// Warnings read at start-up (mesh config).
    pub startup_warnings: Arc<Vec<String>>,
    /// Where the mesh config and mesh networks come from, what is in force and why the last version
    /// was refused (the binary's mesh keepers write it; `mesh` in `/debug/configstatusz`). `null`
    /// when nothing is kept.
    pub mesh_sources: Arc<std::sync::RwLock<Value>>,
    /// The SDS file secrets (for their status).
    pub secrets: Arc<FileSecrets>,
    /// Invalid objects of the other sources (the cluster's), for `invalidObjects` in configstatusz.
    pub invalid_objects: Vec<invalid::InvalidObjectsFn>,
    /// Who may call the guarded paths ([`access`]).
    pub access: Arc<DebugAccess>,
    /// The bounds of the expensive handlers ([`DebugLimits`]).
    pub limits: Arc<DebugLimits>,
    /// This control plane's name in `/debug/proxystatusz`'s `ISTIOD` column
    /// ([`proxystatus::control_plane_id`], computed once by the binary).
    pub control_plane_id: Arc<str>,
}

/// The bounds of the debug handlers that cost the control plane work: a forced push
/// (`/debug/adsz?push=true`) at most once per [`DebugLimits::FORCED_PUSH_INTERVAL`], and at most
/// [`DebugLimits::CONCURRENT_DUMPS`] `config_dump`s generating at once, each on a blocking thread so
/// the async runtime serving xDS never waits for one. Over either: `429 Too Many Requests`.
#[derive(Debug)]
pub struct DebugLimits {
    last_forced_push: std::sync::Mutex<Option<std::time::Instant>>,
    dumps: Arc<tokio::sync::Semaphore>,
}

impl Default for DebugLimits {
    fn default() -> Self {
        DebugLimits {
            last_forced_push: std::sync::Mutex::new(None),
            dumps: Arc::new(tokio::sync::Semaphore::new(Self::CONCURRENT_DUMPS)),
        }
    }
}

impl DebugLimits {
    /// Shortest time between two forced pushes asked for over HTTP.
    pub const FORCED_PUSH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
    /// Most `config_dump`s generating at once.
    pub const CONCURRENT_DUMPS: usize = 2;

    /// `true` (and the push is recorded) if a forced push may start at `now`.
    pub fn admit_forced_push(&self, now: std::time::Instant) -> bool {
        let mut last = self.last_forced_push.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|t| now.saturating_duration_since(t) < Self::FORCED_PUSH_INTERVAL) {
            return false;
        }
        *last = Some(now);
        true
    }
}

const ENDPOINTS: &[&str] = &[
    "/",
    "/ready",
    "/debug/configz",
    "/debug/syncz",
    "/debug/adsz",
    "/debug/registryz",
    "/debug/endpointz",
    "/debug/config_dump?proxyID=",
    "/debug/config_summary?proxyID=",
    "/debug/configstatusz",
    "/debug/proxystatusz",
    "/debug/objectz?kind=&namespace=&name=",
    "/debug/mesh",
];

/// The `--http-addr` router: `/ready` and `/debug/*`, guarded by [`access::guard`] (serve it with
/// [`serve::serve`], which tells the guard the caller's address).
pub fn debug_router(state: DebugState) -> Router {
    let access = state.access.clone();
    Router::new()
        .route("/", get(status_page::status_page))
        .route("/ready", get(ready))
        .route("/debug", get(|| async { Json(json!(ENDPOINTS)) }))
        .route("/debug/list", get(|| async { Json(json!(ENDPOINTS)) }))
        .route("/debug/configz", get(configz))
        .route("/debug/syncz", get(syncz))
        .route("/debug/adsz", get(adsz))
        .route("/debug/registryz", get(registryz))
        .route("/debug/endpointz", get(endpointz))
        .route("/debug/config_dump", get(config_dump))
        .route("/debug/config_summary", get(config_summary))
        .route("/debug/configstatusz", get(configstatusz))
        .route("/debug/proxystatusz", get(proxystatusz))
        .route("/debug/objectz", get(objectz))
        .route("/debug/mesh", get(mesh))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(access, access::guard))
}

/// The `--monitoring-addr` router: `/metrics` rendered by `render`.
pub fn monitoring_router(render: Arc<dyn Fn() -> String + Send + Sync>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let render = render.clone();
            async move { ([("content-type", "text/plain; version=0.0.4")], render()) }
        }),
    )
}

async fn ready(State(s): State<DebugState>) -> Response {
    if s.server.is_ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        let body = match s.server.store().not_synced_reason() {
            // E.g. a config source that never answered (`config source xds://… has not answered: …`).
            Some(reason) => format!("not ready: {reason}\n"),
            None => "not ready: config and services are not synced yet\n".to_string(),
        };
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

async fn configz(State(s): State<DebugState>) -> Json<Value> {
    let mut dump = config::configz(s.server.store().as_ref());
    if let Some(ctx) = s.server.push_context() {
        // Generated config (Gateway API → Istio) and the statuses computed for its inputs.
        config::configz::add_generated(&mut dump, ctx.generated());
    }
    Json(dump)
}

/// `/debug/mesh` (istiod's "Active mesh config"): the mesh config in force as given (its fields; Istio's
/// defaults for the others are not filled in, unlike istiod's).
async fn mesh(State(s): State<DebugState>) -> Json<Value> {
    Json(s.server.mesh().source.clone())
}

async fn syncz(State(s): State<DebugState>) -> Json<Value> {
    Json(syncz::syncz(&proxies(&s.server), None))
}

#[derive(Deserialize)]
struct AdszQuery {
    push: Option<String>,
}

async fn adsz(State(s): State<DebugState>, Query(q): Query<AdszQuery>) -> Response {
    if q.push.as_deref() == Some("true") {
        if !s.limits.admit_forced_push(std::time::Instant::now()) {
            return (StatusCode::TOO_MANY_REQUESTS, "a forced push was requested less than a second ago\n")
                .into_response();
        }
        s.server.config_update(PushRequest::forced(TriggerReason::Debug));
    }
    Json(syncz::adsz(&s.server.connections().snapshot())).into_response()
}

async fn registryz(State(s): State<DebugState>) -> Json<Value> {
    Json(registry::debug::registryz(&s.server.services().services()))
}

async fn endpointz(State(s): State<DebugState>) -> Json<Value> {
    Json(registry::debug::endpointz(&s.server.services().endpoint_shards()))
}

#[derive(Deserialize)]
struct DumpQuery {
    #[serde(rename = "proxyID")]
    proxy_id: Option<String>,
    include_eds: Option<String>,
    pretty: Option<String>,
}

/// `/debug/config_dump?proxyID=ID[&include_eds][&pretty]`: istiod's — what meshpilot would send the
/// proxy now as Envoy's admin `ConfigDump` ([`discovery::debug::config_dump`]), generated on a blocking
/// thread under [`DebugLimits`].
async fn config_dump(
    State(s): State<DebugState>,
    Extension(grant): Extension<Grant>,
    Query(q): Query<DumpQuery>,
) -> Response {
    let Some(id) = q.proxy_id.filter(|i| !i.is_empty()) else {
        return (
            StatusCode::BAD_REQUEST,
            "missing proxyID (a connection id or a part of it, see /debug/adsz)\n",
        )
            .into_response();
    };
    let options = discovery::debug::DumpOptions { include_eds: q.include_eds.is_some() };
    let pretty = q.pretty.is_some();
    let dump = limited_blocking(&s, move |s| {
        debug_xds::dump_configs(&s, &id, &grant, options)
            .and_then(|configs| {
                debug_xds::dump_body(configs, pretty).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e))
            })
            .map(|body| ([("content-type", "application/json")], body).into_response())
            .unwrap_or_else(|(code, message)| (code, format!("{message}\n")).into_response())
    });
    dump.await
}

/// `/debug/config_summary?proxyID=ID` (meshpilot only; `meshpilot proxy-config`): what meshpilot would
/// send the proxy, summarised per resource, with the DestinationRule applied to each cluster and the
/// generation findings ([`networking::debug::config_dump`]).
async fn config_summary(
    State(s): State<DebugState>,
    Extension(grant): Extension<Grant>,
    Query(q): Query<DumpQuery>,
) -> Response {
    let Some(id) = q.proxy_id.filter(|i| !i.is_empty()) else {
        return (
            StatusCode::BAD_REQUEST,
            "missing proxyID (a connection id or a part of it, see /debug/adsz)\n",
        )
            .into_response();
    };
    let conns = proxies(&s.server);
    let Some(conn) = syncz::find_connection(&conns, &id) else {
        return (StatusCode::NOT_FOUND, format!("no connected proxy matches proxyID {id:?}\n"))
            .into_response();
    };
    let Some(push) = s.server.push_context() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no push context yet\n").into_response();
    };
    match proxy_context(&conn.proxy) {
        Ok(proxy) if !grant.allows_namespace(&proxy.namespace) => (
            StatusCode::FORBIDDEN,
            "this proxy is not of your namespace: callers outside the control plane's namespace may only \
             read their own namespace's proxies\n",
        )
            .into_response(),
        Ok(mut proxy) => {
            let discovery: &dyn model::ServiceDiscovery = s.server.services().as_ref();
            proxy.set_instances_from(discovery);
            // A cache of its own: a debug dump never fills the serving cache.
            limited_blocking(&s, move |_| {
                Json(networking::debug::config_dump(&networking::Snapshot::new(push), &proxy)).into_response()
            })
            .await
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

/// Runs `work` on a blocking thread (the async workers serve xDS meanwhile) if fewer than
/// [`DebugLimits::CONCURRENT_DUMPS`] run, else answers `429`.
async fn limited_blocking(
    s: &DebugState,
    work: impl FnOnce(DebugState) -> Response + Send + 'static,
) -> Response {
    let Ok(permit) = s.limits.dumps.clone().try_acquire_owned() else {
        return (StatusCode::TOO_MANY_REQUESTS, "other config dumps are being generated; try again\n").into_response();
    };
    let state = s.clone();
    match tokio::task::spawn_blocking(move || {
        let _permit = permit;
        work(state)
    })
    .await
    {
        Ok(response) => response,
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("config dump failed: {e}\n")).into_response(),
    }
}

/// The body a guarded debug path answers with, synchronously (for `istio.io/debug` over xDS, whose
/// resource names are such paths): `path_and_query` is `/debug/<path>[?query]`. Unknown paths: 404.
pub fn serve_debug_path(state: &DebugState, path_and_query: &str, grant: &Grant) -> (StatusCode, Vec<u8>) {
    let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
    let param = |key: &str| {
        query.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k == key).then(|| v.to_string())
        })
    };
    let json = |v: Value| (StatusCode::OK, serde_json::to_vec(&v).unwrap_or_default());
    match path {
        "/debug/syncz" => json(syncz::syncz(&proxies(&state.server), None)),
        "/debug/list" => json(json!(ENDPOINTS)),
        "/debug/configz" => json(config::configz(state.server.store().as_ref())),
        "/debug/mesh" => json(state.server.mesh().source.clone()),
        "/debug/registryz" => json(registry::debug::registryz(&state.server.services().services())),
        "/debug/endpointz" => json(registry::debug::endpointz(&state.server.services().endpoint_shards())),
        "/debug/config_dump" => {
            let Some(id) = param("proxyID").filter(|i| !i.is_empty()) else {
                return (StatusCode::BAD_REQUEST, b"missing proxyID\n".to_vec());
            };
            let options = discovery::debug::DumpOptions { include_eds: param("include_eds").is_some() };
            match debug_xds::dump_configs(state, &id, grant, options)
                .and_then(|c| debug_xds::dump_body(c, false).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e)))
            {
                Ok(body) => (StatusCode::OK, body),
                Err((code, message)) => (code, format!("{message}\n").into_bytes()),
            }
        }
        // Go's wording, which `istioctl x internal-debug` looks for to print the list instead.
        _ => (StatusCode::NOT_FOUND, b"404 page not found\n".to_vec()),
    }
}

async fn configstatusz(State(s): State<DebugState>) -> Json<Value> {
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
    let mut invalid = invalid::file_invalid_objects(&s.files);
    for list in &s.invalid_objects {
        invalid.extend((list.0)());
    }
    Json(json!({
        "invalidObjects": invalid,
        "configSources": files,
        "registryWarnings": registry::debug::registry_warnings(&s.server.services().warnings()),
        "pushContextFindings": findings,
        "generationFindings": generation,
        "startupWarnings": *s.startup_warnings,
        "mesh": s.mesh_sources.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
        "fileSecrets": s.secrets.status_json(),
    }))
}

async fn proxystatusz(State(s): State<DebugState>) -> Json<Value> {
    Json(proxystatus::proxystatusz(&proxies(&s.server), &s.control_plane_id))
}

#[derive(Deserialize)]
struct ObjectzQuery {
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
}

/// `/debug/objectz`: see the module table. `kind` is an Istio kind or its plural, any case;
/// `namespace` defaults to `default` for one object.
async fn objectz(State(s): State<DebugState>, Query(q): Query<ObjectzQuery>) -> Response {
    let kind =
        match q.kind.as_deref().filter(|k| !k.is_empty()) {
            None => None,
            Some(word) => match api::Kind::ALL.iter().copied().find(|k| {
                k.as_str().eq_ignore_ascii_case(word) || k.schema().plural.eq_ignore_ascii_case(word)
            }) {
                Some(k) => Some(k),
                None => {
                    return (StatusCode::BAD_REQUEST, format!("unknown kind {word:?}: use an Istio kind\n"))
                        .into_response();
                }
            },
        };
    let namespace = q.namespace.filter(|n| !n.is_empty());
    let Some(name) = q.name.filter(|n| !n.is_empty()) else {
        let list: Vec<_> = discovery::objects::object_statuses(&s.server, &s.files)
            .into_iter()
            .filter(|o| kind.is_none_or(|k| o.kind == k.as_str()))
            .filter(|o| namespace.as_ref().is_none_or(|n| &o.namespace == n))
            .collect();
        return Json(json!(list)).into_response();
    };
    let Some(kind) = kind else {
        return (StatusCode::BAD_REQUEST, "name given without kind\n").into_response();
    };
    let key = model::ConfigKey { kind, namespace: namespace.unwrap_or_else(|| "default".into()), name };
    match discovery::objects::object_status(&s.server, &s.files, &key) {
        Some(status) => Json(json!(status)).into_response(),
        None => {
            let mut body = format!("no {key} in the config in force\n");
            for r in discovery::objects::rejections(&s.files, &key) {
                body.push_str(&format!("rejected: {r}\n"));
            }
            (StatusCode::NOT_FOUND, body).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::DebugLimits;

    #[test]
    fn forced_pushes_are_at_least_a_second_apart() {
        let limits = DebugLimits::default();
        let t0 = Instant::now();
        assert!(limits.admit_forced_push(t0));
        assert!(!limits.admit_forced_push(t0 + Duration::from_millis(999)));
        assert!(limits.admit_forced_push(t0 + DebugLimits::FORCED_PUSH_INTERVAL));
        assert!(!limits.admit_forced_push(t0 + DebugLimits::FORCED_PUSH_INTERVAL));
    }
}
