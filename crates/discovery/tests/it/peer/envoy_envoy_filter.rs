//! EnvoyFilter through a real Envoy: a sidecar (workload `app`, connected directly: plaintext,
//! INTERCEPTION_MODE NONE) with a Sidecar `ingress` port forwarding to a local echo app, so every request
//! crosses the inbound connection manager the patches target (context SIDECAR_INBOUND). Lua filters
//! added by EnvoyFilters set response headers; each step waits for the header value it expects. Needs
//! Envoy (scripts/install-envoy.sh), which has `envoy.filters.http.lua`.

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::{
    AdsApi, EchoServer, Envoy, Plane, PlaneOptions, free_port, request, wait_for, write_atomic,
};

use crate::support::NS;

struct Setup {
    dir: tempfile::TempDir,
    _plane: Plane,
    envoy: Envoy,
    port: SocketAddr,
    _app: EchoServer,
}

/// `files` written into the config directory before the plane starts, then the plane and an Envoy for
/// workload `app`.
async fn setup(files: &[(&str, String)]) -> Setup {
    let app = EchoServer::start("app").await.unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let sidecar = format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: app, namespace: {NS}}}\nspec:\n  \
         workloadSelector: {{labels: {{app: app}}}}\n  ingress:\n  \
         - port: {{number: {port}, protocol: HTTP, name: http}}\n    defaultEndpoint: 127.0.0.1:{app_port}\n",
        app_port = app.addr.port()
    );
    write_atomic(dir.path(), "sidecar.yaml", &sidecar);
    for (name, text) in files {
        write_atomic(dir.path(), name, text);
    }
    let plane = Plane::start_with(PlaneOptions::config_dir(dir.path())).await.unwrap();
    let envoy = Envoy::start(&plane.sidecar("app", NS, AdsApi::Sotw)).await.unwrap();
    Setup { dir, _plane: plane, envoy, port: ([127, 0, 0, 1], port).into(), _app: app }
}

/// An EnvoyFilter in the test namespace selecting `app` workloads `app_label`, inserting (`operation`)
/// a Lua filter before the inbound router that appends `value` to the response header `header`.
fn lua_filter(
    name: &str,
    app_label: &str,
    priority: i32,
    operation: &str,
    header: &str,
    value: &str,
) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: {name}, namespace: {NS}}}
spec:
  workloadSelector: {{labels: {{app: {app_label}}}}}
  priority: {priority}
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_INBOUND
      listener:
        filterChain:
          filter:
            name: envoy.filters.network.http_connection_manager
            subFilter: {{name: envoy.filters.http.router}}
    patch:
      operation: {operation}
      value:
        name: lua-{name}
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          inlineCode: |
            function envoy_on_response(h)
              local before = h:headers():get("{header}") or ""
              h:headers():replace("{header}", before .. "{value}")
            end
"#
    )
}

impl Setup {
    /// Requests until `check` accepts the response; returns it.
    async fn wait_response(
        &self,
        what: &str,
        check: impl Fn(&meshpilot_testing::Response) -> bool,
    ) -> meshpilot_testing::Response {
        wait_for(what, Duration::from_secs(30), async || {
            let r = request(self.port, "app.example", "/ef", &[]).await.ok()?;
            if check(&r) {
                return Some(r);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            None
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.envoy.log_tail(40)))
    }

    async fn assert_no_nack(&self) {
        self.envoy.assert_no_rejected_updates().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lua_envoy_filter_applies_to_the_selected_workload_is_updated_live_and_removed_cleanly() {
    let s = setup(&[
        ("lua.yaml", lua_filter("lua", "app", 0, "INSERT_BEFORE", "x-lua", "v1")),
        ("other.yaml", lua_filter("other", "not-app", 0, "INSERT_BEFORE", "x-other", "no")),
    ])
    .await;
    // The first response carrying the selected filter's header is generated from the snapshot holding
    // both filters: the one selecting another workload is absent.
    let r = s.wait_response("x-lua: v1", |r| r.header("x-lua") == Some("v1")).await;
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.header("x-other"), None, "a filter for another workload applied: {}", r.head);

    write_atomic(s.dir.path(), "lua.yaml", &lua_filter("lua", "app", 0, "INSERT_BEFORE", "x-lua", "v2"));
    s.wait_response("x-lua: v2", |r| r.header("x-lua") == Some("v2")).await;

    std::fs::remove_file(s.dir.path().join("lua.yaml")).unwrap();
    let r = s.wait_response("x-lua removed", |r| r.header("x-lua").is_none()).await;
    assert_eq!(r.status, 200, "{}", r.head);
    s.assert_no_nack().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patches_apply_in_priority_order_and_a_patch_envoy_would_reject_is_kept_from_it() {
    // Both INSERT_FIRST: the one applied last is first in the chain. Response (encoder) filters run in
    // reverse chain order, so the first-applied filter writes first: "early" (priority -1), then
    // "late" (priority 1), whatever their file or name order.
    let s = setup(&[
        ("a.yaml", lua_filter("late", "app", 1, "INSERT_FIRST", "x-order", "late;")),
        ("b.yaml", lua_filter("early", "app", -1, "INSERT_FIRST", "x-order", "early;")),
    ])
    .await;
    let r = s.wait_response("x-order", |r| r.header("x-order").is_some()).await;
    assert_eq!(r.header("x-order"), Some("early;late;"), "{}", r.head);

    // Raising "early" above "late" reverses the order.
    write_atomic(s.dir.path(), "b.yaml", &lua_filter("early", "app", 5, "INSERT_FIRST", "x-order", "early;"));
    s.wait_response("order reversed", |r| r.header("x-order") == Some("late;early;")).await;

    // A filter ADDed after the router would make Envoy reject the listener: meshpilot sends the listener
    // without that EnvoyFilter's patches (the others still apply) and Envoy never NACKs.
    write_atomic(s.dir.path(), "c.yaml", &lua_filter("after-router", "app", 0, "ADD", "x-bad", "bad"));
    write_atomic(s.dir.path(), "d.yaml", &lua_filter("marker", "app", 0, "INSERT_BEFORE", "x-marker", "m"));
    let r = s.wait_response("marker applied", |r| r.header("x-marker") == Some("m")).await;
    assert_eq!(r.header("x-bad"), None, "{}", r.head);
    assert_eq!(r.header("x-order"), Some("late;early;"), "{}", r.head);
    s.assert_no_nack().await;
}
