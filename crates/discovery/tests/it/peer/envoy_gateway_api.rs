//! Gateway API from a config directory, through a real Envoy router: a Gateway (class `istio`,
//! address `istio-ingressgateway`) and an HTTPRoute are converted into Istio config on each push and
//! served to a router that is an instance of the gateway Service. Requests follow path and header
//! matches, weights (0 vs 100), a request-header filter and a redirect; a rule whose backend does not
//! exist answers 500 (Istio's Gateway API semantics) while the other rules keep working; an edit of
//! the route file moves traffic live. Needs Envoy (scripts/install-envoy.sh).

use crate::support;

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::{AdsApi, EchoOptions, EchoServer, Envoy, Plane, free_port, wait_for, write_atomic};
use support::Traffic;

const GW_NS: &str = "istio-system";
const NS: &str = "default";

/// The gateway Service (the router's), and the two backends `v1` and `v2` in `default`.
fn registry(port: u16, v1: SocketAddr, v2: SocketAddr) -> String {
    let mut out = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: istio-ingressgateway, namespace: {GW_NS}}}\n\
         spec:\n  hosts: [istio-ingressgateway.{GW_NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{istio: ingressgateway}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: router, namespace: {GW_NS}}}\n\
         spec:\n  address: 127.0.0.1\n  ports: {{http: {port}}}\n  labels: {{istio: ingressgateway}}\n"
    );
    for (name, addr) in [("v1", v1), ("v2", v2)] {
        out.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {NS}}}\n\
             spec:\n  hosts: [{name}.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
             - {{number: 8080, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: {name}}}\n\
             ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: {name}, namespace: {NS}}}\n\
             spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  labels: {{app: {name}}}\n",
            addr.port()
        ));
    }
    out
}

fn gateway(port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: istio}}\n\
         spec: {{controllerName: istio.io/gateway-controller}}\n\
         ---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {GW_NS}}}\n\
         spec:\n  gatewayClassName: istio\n  addresses: [{{type: Hostname, value: istio-ingressgateway}}]\n  listeners:\n  \
         - name: http\n    port: {port}\n    protocol: HTTP\n    allowedRoutes: {{namespaces: {{from: All}}}}\n"
    )
}

/// The HTTPRoute; `default_backend` takes what no other rule matches.
fn route(default_backend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: shop, namespace: {NS}}}\n\
         spec:\n  parentRefs: [{{name: gw, namespace: {GW_NS}}}]\n  hostnames: [shop.example.com]\n  rules:\n  \
         - matches: [{{path: {{type: PathPrefix, value: /v2}}}}]\n    backendRefs: [{{name: v2, port: 8080}}]\n  \
         - matches: [{{headers: [{{name: x-version, value: v2}}]}}]\n    backendRefs: [{{name: v2, port: 8080}}]\n  \
         - matches: [{{path: {{type: Exact, value: /weighted}}}}]\n    backendRefs:\n    - {{name: v1, port: 8080, weight: 0}}\n    - {{name: v2, port: 8080, weight: 100}}\n  \
         - matches: [{{path: {{type: PathPrefix, value: /headers}}}}]\n    filters:\n    - type: RequestHeaderModifier\n      \
         requestHeaderModifier: {{set: [{{name: x-added, value: by-route}}]}}\n    backendRefs: [{{name: v1, port: 8080}}]\n  \
         - matches: [{{path: {{type: PathPrefix, value: /old}}}}]\n    filters:\n    - type: RequestRedirect\n      \
         requestRedirect: {{hostname: new.example.com, statusCode: 301}}\n  \
         - matches: [{{path: {{type: PathPrefix, value: /missing}}}}]\n    backendRefs: [{{name: nowhere, port: 8080}}]\n  \
         - backendRefs: [{{name: {default_backend}, port: 8080}}]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_routes_from_a_config_directory_steer_router_traffic() {
    let v1 =
        EchoServer::start_with("v1", EchoOptions { echo_head: true, ..Default::default() }).await.unwrap();
    let v2 = EchoServer::start("v2").await.unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write_atomic(dir.path(), "registry.yaml", &registry(port, v1.addr, v2.addr));
    write_atomic(dir.path(), "gateway.yaml", &gateway(port));
    write_atomic(dir.path(), "route.yaml", &route("v1"));
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&plane.router(AdsApi::Sotw)).await.unwrap();
    let t = Traffic { envoy, addr: ([127, 0, 0, 1], port).into(), host: "shop.example.com" };

    let r = t.wait_status("the default rule", "GET", "/", &[], 200).await;
    assert!(r.body.starts_with("v1"), "default backend v1: {r:?}");
    // Path prefix (whole segments) and header matches.
    assert!(t.send("GET", "/v2/items", &[]).await.unwrap().body.starts_with("v2"));
    assert!(t.send("GET", "/v2x", &[]).await.unwrap().body.starts_with("v1"), "prefix matches segments");
    assert!(t.send("GET", "/", &[("x-version", "v2")]).await.unwrap().body.starts_with("v2"));
    // Weight 0 gets nothing: every request goes to the weight-100 backend.
    for _ in 0..10 {
        assert!(t.send("GET", "/weighted", &[]).await.unwrap().body.starts_with("v2"));
    }
    // The request-header filter reaches the upstream.
    let r = t.send("GET", "/headers", &[]).await.unwrap();
    assert!(r.body.contains("x-added: by-route"), "header set by the route: {r:?}");
    // Redirect.
    let r = t.send("GET", "/old/page", &[]).await.unwrap();
    assert_eq!(r.status, 301, "{r:?}");
    assert!(r.header("location").is_some_and(|l| l.contains("new.example.com")), "{r:?}");
    // A missing backend answers 500; the other rules still work.
    assert_eq!(t.status("GET", "/missing", &[]).await, 500);
    assert_eq!(t.status("GET", "/v2", &[]).await, 200);

    // The route's status says why: the backend is not found.
    let ctx = plane.server.push_context().unwrap();
    let status = ctx
        .generated()
        .statuses
        .iter()
        .find(|s| s.key.kind == api::Kind::HTTPRoute && s.key.name == "shop")
        .expect("the HTTPRoute's status")
        .status
        .clone();
    let conditions = &status["parents"][0]["conditions"];
    let resolved = conditions.as_array().unwrap().iter().find(|c| c["type"] == "ResolvedRefs").unwrap();
    assert_eq!(resolved["status"], "False", "{status}");
    assert_eq!(resolved["reason"], "BackendNotFound", "{status}");
    let accepted = conditions.as_array().unwrap().iter().find(|c| c["type"] == "Accepted").unwrap();
    assert_eq!(accepted["status"], "True", "{status}");

    // Editing the route moves traffic live.
    write_atomic(dir.path(), "route.yaml", &route("v2"));
    wait_for("the default rule goes to v2", Duration::from_secs(15), async || {
        t.send("GET", "/", &[]).await.filter(|r| r.body.starts_with("v2"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.envoy.log_tail(40)));
    t.assert_no_nack().await;
}
