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
//! | `/debug/list` | istiod's: the debug command names, sorted |
//! | `/debug/configz` | config in force (Istio's shape) |
//! | `/debug/syncz[?namespace=]` | per-proxy, per-type sync status (CSDS-style), streams and polling proxies |
//! | `/debug/adsz` | connections and watches; `?push=true` forces a push to all |
//! | `/debug/connections` | istiod's: connection ids, times and addresses |
//! | `/debug/registryz` | services |
//! | `/debug/endpointShardz`, `/debug/endpointz` | endpoints per service and shard (istiod's `Shardz`; `endpointz` its alias) |
//! | `/debug/config_dump?proxyID=ID[&include_eds]` | what meshpilot would send the proxy, as Envoy's admin `ConfigDump` (istiod's; `istio.io/debug/config_dump` over xDS gives the same sections, [`debug_xds`]) |
//! | `/debug/config_summary?proxyID=ID` | meshpilot only: the same summarised (clusters with their DestinationRule, listeners, routes, endpoints, findings; `meshpilot proxy-config`) |
//! | `/debug/edsz`, `/debug/ndsz`, `/debug/ecdsz` `?proxyID=ID` | istiod's typed dumps: Envoy's admin `ConfigDump` of the EDS / NDS / ECDS resources generated for the proxy's watch |
//! | `/debug/cachez[?sizes=true\|?clear=true]` | the generation cache's resources by type, their sizes, or clear it |
//! | `/debug/sidecarz?proxyID=ID` | the proxy's Sidecar scope (istiod's `SidecarScope` JSON) |
//! | `/debug/resourcesz` | the config kinds (group, version, kind) |
//! | `/debug/instancesz` | per proxy its service targets |
//! | `/debug/authorizationz` | AuthorizationPolicies by namespace |
//! | `/debug/telemetryz[?proxyID=ID]` | Telemetries by namespace, or those applying to the proxy |
//! | `/debug/push_status` | findings of the push in force, istiod's `ProxyStatus` shape |
//! | `/debug/pushcontext` | AuthorizationPolicies and network gateways of the push context |
//! | `/debug/clusterz` | the clusters endpoints are read from |
//! | `/debug/inject` | the injection templates in force (404 without an injector) |
//! | `/debug/force_disconnect?proxyID=ID` | ends the proxy's stream; only with `UNSAFE_ENABLE_ADMIN_ENDPOINTS` |
//! | `/debug/pprof/*`, `/debug/ambientz`, `/debug/krtz`, `/debug/mcsz` | 501 with the reason ([`istiod_debug::NOT_IMPLEMENTED`]) |
//! | `/debug/proxystatusz` | meshpilot only: control-plane name and per-proxy, per-type sync status with versions (`meshpilot proxy-status`; see [`proxystatus`]) |
//! | `/debug/objectz?kind=&namespace=&name=` | one config object: source (file:line or cluster), validation, the connected proxies it concerns and per proxy ACKED / PENDING / NACKED with Envoy's error and the Istio field traced (`discovery::objects`); without `name`, every object (optionally of `kind` / in `namespace`) with its validation state and counts; unknown kind 400, unknown object 404 |
//! | `/debug/mesh` | the mesh config in force (istiod's; the fields as given) |
//! | `/debug/configstatusz` | invalid objects of every source (kind, namespace, name, resourceVersion, source, each finding's field path and reason: [`invalid`]), file sources' bad files and duplicates, registry warnings, push context findings, findings of per-proxy generation (e.g. security policies that could not be translated, with their field path and the proxies concerned), file secrets (SDS names served or refused, with the reason) |
//!
//! Every `/debug/*` path but `config_summary` is answered by [`istiod_debug::serve_debug`], a synchronous
//! dispatcher run on a blocking thread (and callable outside HTTP: [`istiod_debug::serve_debug_path`], which
//! `istio.io/debug` over xDS uses, [`debug_xds`]).
//! | `POST /v3/discovery:{clusters,listeners,routes,endpoints,secrets}` | Envoy's REST-JSON xDS ([`rest`]; not guarded, like the plaintext ADS port; SDS refused) |
//!
//! Every path but `/ready` and the REST-JSON xDS paths is guarded ([`access`]): loopback callers, or callers authenticated as on
//! the secure xDS port, as istiod's `allowAuthenticatedOrLocalhost`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod access;
pub mod istiod_debug;
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
use serde_json::Value;

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
    /// The injection templates in force for `/debug/inject` (set by the binary when it runs the
    /// injector; default: none).
    pub inject_templates: istiod_debug::InjectTemplates,
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

/// The `--http-addr` router: `/ready` and `/debug/*`, guarded by [`access::guard`] (serve it with
/// [`serve::serve`], which tells the guard the caller's address).
pub fn debug_router(state: DebugState) -> Router {
    let access = state.access.clone();
    let mut router = Router::new()
        .route("/", get(status_page::status_page))
        .route("/ready", get(ready))
        .route("/debug", get(dispatch))
        .route("/debug/config_summary", get(config_summary))
        .route(istiod_debug::FORCE_DISCONNECT.path, get(dispatch))
        .route("/debug/pprof/{*rest}", get(dispatch));
    let mut routed = std::collections::BTreeSet::from(["/debug/config_summary"]);
    for p in istiod_debug::DEBUG_PATHS {
        let path = p.path.split('?').next().unwrap_or(p.path);
        if routed.insert(path) {
            router = router.route(path, get(dispatch));
        }
    }
    router.with_state(state).layer(axum::middleware::from_fn_with_state(access, access::guard))
}

/// Every guarded `/debug/*` path but `config_summary`: [`istiod_debug::serve_debug`] on a blocking thread.
async fn dispatch(
    State(s): State<DebugState>,
    Extension(grant): Extension<Grant>,
    uri: axum::http::Uri,
) -> Response {
    let path_and_query =
        uri.path_and_query().map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    match tokio::task::spawn_blocking(move || istiod_debug::serve_debug(&s, &path_and_query, &grant)).await {
        Ok(reply) => reply.into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("debug handler failed: {e}\n")).into_response(),
    }
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

#[derive(Deserialize)]
struct DumpQuery {
    #[serde(rename = "proxyID")]
    proxy_id: Option<String>,
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
        return (StatusCode::TOO_MANY_REQUESTS, "other config dumps are being generated; try again\n")
            .into_response();
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
