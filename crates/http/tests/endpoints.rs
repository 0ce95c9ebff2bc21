//! The routers served on loopback, before the discovery server has synced: `/ready` answers 503,
//! `/debug` lists the endpoints, `/debug/config_dump` without `proxyID` is a 400, `/debug/configstatusz`
//! has its sections, the status page `/` (and its `?fragment=sections`) renders its empty sections, and
//! `/metrics` renders with Prometheus' content type.

use std::sync::Arc;

use config::{MemoryStore, QueueOptions};
use discovery::{DebounceOptions, DiscoveryServer, mesh::parse_mesh_config};
use meshpilot_http::{DebugState, debug_router, monitoring_router};
use model::{ConfigStoreController, service::ServiceController};
use registry::AggregateRegistry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves `router` on a loopback port; returns its address.
async fn serve(router: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// `GET path` over HTTP/1.1: (status, headers, body).
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tcp.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_string())
}

#[tokio::test]
async fn debug_and_monitoring_endpoints_answer_before_the_first_push() {
    let store: Arc<dyn ConfigStoreController> =
        Arc::new(MemoryStore::new("test", api::Kind::ALL, QueueOptions::default()));
    let services: Arc<dyn ServiceController> = Arc::new(AggregateRegistry::new());
    let (mesh, _) = parse_mesh_config("", "cluster.local").unwrap();
    let server = DiscoveryServer::new(store, services, mesh, DebounceOptions::default());
    let state = DebugState {
        server,
        files: Vec::new(),
        startup_warnings: Arc::new(vec!["a warning".into()]),
        secrets: sds::FileSecrets::disabled(),
        invalid_objects: Vec::new(),
    };
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
