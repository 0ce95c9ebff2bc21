//! The routers served on loopback, before the discovery server has synced: `/ready` answers 503,
//! `/debug` lists the endpoints, `/debug/config_dump` without `proxyID` is a 400, `/debug/configstatusz`
//! has its sections, the status page `/` (and its `?fragment=sections`) renders its empty sections, and
//! `/metrics` renders with Prometheus' content type.

use std::sync::Arc;

use config::mesh::parse_mesh_config;
use config::{MemoryStore, QueueOptions};
use discovery::{DiscoveryServer, ServerOptions};
use meshpilot_http::{DebugState, debug_router, monitoring_router};
use model::{ConfigStoreController, service::ServiceController};
use registry::AggregateRegistry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves `router` on a loopback port; returns its address.
async fn serve(router: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(meshpilot_http::serve::serve(
        listener,
        router,
        meshpilot_http::serve::HEADER_READ_TIMEOUT,
        std::future::pending(),
    ));
    addr
}

/// A DiscoveryServer with no config and no services (not synced).
fn empty_server() -> Arc<DiscoveryServer> {
    let store: Arc<dyn ConfigStoreController> =
        Arc::new(MemoryStore::new("test", api::Kind::ALL, QueueOptions::default()));
    let services: Arc<dyn ServiceController> = Arc::new(AggregateRegistry::new());
    let (mesh, _) = parse_mesh_config("", "cluster.local").unwrap();
    DiscoveryServer::new(store, services, mesh, ServerOptions::default())
}

/// The debug handlers' state over `server`, guarded by `access`.
pub(crate) fn debug_state(
    server: &Arc<DiscoveryServer>,
    access: meshpilot_http::access::DebugAccess,
    startup_warnings: Vec<String>,
) -> DebugState {
    DebugState {
        server: server.clone(),
        files: Vec::new(),
        startup_warnings: Arc::new(startup_warnings),
        mesh_sources: Arc::default(),
        secrets: sds::FileSecrets::disabled(),
        invalid_objects: Vec::new(),
        access: Arc::new(access),
        limits: Default::default(),
        control_plane_id: meshpilot_http::proxystatus::control_plane_id(None, None).into(),
        inject_templates: Default::default(),
    }
}

/// `GET path` over HTTP/1.1: (status, headers, body).
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
    get_from(addr, path, None, None).await
}

/// `GET path` from the local address `from` (default: the OS's choice, 127.0.0.1), with `token` as
/// `Authorization: Bearer`: (status, headers, body).
pub(crate) async fn get_from(
    addr: std::net::SocketAddr,
    path: &str,
    from: Option<std::net::IpAddr>,
    token: Option<&str>,
) -> (u16, String, String) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if let Some(from) = from {
        socket.bind((from, 0).into()).unwrap();
    }
    let mut tcp = socket.connect(addr).await.unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tcp.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_string())
}

#[tokio::test]
async fn debug_and_monitoring_endpoints_answer_before_the_first_push() {
    let state = debug_state(&empty_server(), Default::default(), vec!["a warning".into()]);
    let debug = serve(debug_router(state)).await;

    let (status, _, body) = get(debug, "/ready").await;
    assert_eq!(status, 503, "{body}");
    let (status, _, body) = get(debug, "/debug").await;
    assert_eq!(status, 200);
    let list: Vec<String> = serde_json::from_str(&body).unwrap();
    assert!(list.iter().any(|e| e == "/debug/configstatusz"), "{list:?}");
    let (status, _, body) = get(debug, "/debug/config_dump").await;
    assert_eq!(status, 400);
    assert!(body.contains("missing proxyID"), "{body}");
    let (status, _, body) = get(debug, "/debug/configstatusz").await;
    assert_eq!(status, 200);
    let status_json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status_json["startupWarnings"], serde_json::json!(["a warning"]));
    assert_eq!(status_json["fileSecrets"]["secrets"], serde_json::json!([]));

    let (status, head, page) = get(debug, "/").await;
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html; charset=utf-8"), "{head}");
    assert!(page.contains("<section id=\"summary\" data-ready=\"false\">"), "{page}");
    assert!(page.contains("<p class=\"empty\">No proxy is connected.</p>"), "{page}");
    assert!(page.contains("<p class=\"empty\">No push yet.</p>"), "{page}");
    assert!(page.contains("<li class=\"warning\">a warning</li>"), "{page}");
    assert!(page.contains("fetch('/?fragment=sections'"), "{page}");
    let (status, _, fragment) = get(debug, "/?fragment=sections").await;
    assert_eq!(status, 200);
    assert!(fragment.starts_with("<section id=\"summary\""), "{fragment}");
    assert!(!fragment.contains("<script>") && !fragment.contains("<html"), "{fragment}");

    let monitoring = serve(monitoring_router(Arc::new(|| "pilot_xds 0\n".to_string()))).await;
    let (status, head, body) = get(monitoring, "/metrics").await;
    assert_eq!((status, body.as_str()), (200, "pilot_xds 0\n"));
    assert!(head.contains("content-type: text/plain; version=0.0.4"), "{head}");
}

/// Reviews tokens as a fixed table (`token` → service account user), for the audience `istio-ca`.
#[derive(Debug)]
pub(crate) struct Reviewer;

impl security::authn::TokenReviewer for Reviewer {
    fn review<'a>(
        &'a self,
        token: &'a str,
        _audiences: &'a [String],
    ) -> security::authn::BoxFuture<'a, Result<security::authn::TokenReviewStatus, String>> {
        let user = match token {
            "istiod-token" => Some("system:serviceaccount:istio-system:istiod"),
            "shop-token" => Some("system:serviceaccount:shop:default"),
            _ => None,
        };
        Box::pin(async move {
            Ok(security::authn::TokenReviewStatus {
                authenticated: user.is_some(),
                username: user.unwrap_or_default().to_string(),
                audiences: if user.is_some() { vec!["istio-ca".into()] } else { Vec::new() },
                error: if user.is_some() { String::new() } else { "invalid token".into() },
            })
        })
    }
}

/// The debug port as istiod guards it: 127.0.0.2 is not loopback-trusted; without a token it gets
/// 401 (`/ready` excepted), with a token of the system namespace everything, with one of another
/// namespace only `config_dump` (403 elsewhere); without a cluster to review tokens, only loopback.
#[tokio::test]
async fn debug_endpoints_need_loopback_or_an_authenticated_caller() {
    let server = empty_server();
    let state = |access| debug_state(&server, access, Vec::new());
    let remote: std::net::IpAddr = [127, 0, 0, 2].into();

    let loopback_only = serve(debug_router(state(Default::default()))).await;
    assert_eq!(get(loopback_only, "/debug/configz").await.0, 200);
    for path in ["/debug/configz", "/debug/configstatusz", "/debug/adsz?push=true", "/", "/debug/syncz"] {
        let (status, _, body) = get_from(loopback_only, path, Some(remote), None).await;
        assert_eq!((status, body.as_str()), (401, "authentication failure\n"), "{path}");
        let (status, ..) = get_from(loopback_only, path, Some(remote), Some("istiod-token")).await;
        assert_eq!(status, 401, "{path}: no cluster reviews tokens");
    }
    assert_eq!(get_from(loopback_only, "/ready", Some(remote), None).await.0, 503, "/ready answers everyone");

    let authenticator =
        security::Authenticator::new("cluster.local", vec!["istio-ca".into()], Some(Arc::new(Reviewer)));
    let access = meshpilot_http::access::DebugAccess {
        authenticator: Some(Arc::new(authenticator)),
        ..Default::default()
    };
    let guarded = serve(debug_router(state(access))).await;
    assert_eq!(get_from(guarded, "/debug/configz", Some(remote), None).await.0, 401);
    assert_eq!(get_from(guarded, "/debug/configz", Some(remote), Some("forged")).await.0, 401);
    let (status, _, body) = get_from(guarded, "/debug/configz", Some(remote), Some("istiod-token")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(get_from(guarded, "/debug/configstatusz", Some(remote), Some("istiod-token")).await.0, 200);
    for path in ["/debug/configz", "/debug/configstatusz", "/debug/adsz?push=true", "/debug/syncz", "/"] {
        assert_eq!(get_from(guarded, path, Some(remote), Some("shop-token")).await.0, 403, "{path}");
    }
    let (status, _, body) =
        get_from(guarded, "/debug/config_dump?proxyID=nobody", Some(remote), Some("shop-token")).await;
    assert_eq!(status, 404, "config_dump is open to the namespace's callers: {body}");
}
