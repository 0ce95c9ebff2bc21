//! Access logs through a real Envoy: a sidecar with two Sidecar `ingress` ports on 127.0.0.1 (an Envoy
//! connected directly: plaintext, INTERCEPTION_MODE NONE), one forwarding to a local echo app, one to a
//! closed port (Envoy answers 503), so every request crosses an inbound connection manager (the
//! `SERVER` side). Logs go to files in the test's directory; Envoy flushes them about once a second,
//! so each test waits for the line it expects. Needs Envoy (scripts/install-envoy.sh).

use std::{net::SocketAddr, path::Path, time::Duration};

use meshpilot_testing::{
    AdsApi, EchoServer, Envoy, Plane, PlaneOptions, free_port, http_get, request, wait_for, write_atomic,
};

use crate::support::NS;

struct Setup {
    dir: tempfile::TempDir,
    plane: Plane,
    envoy: Envoy,
    /// The port forwarding to the app (200).
    ok: SocketAddr,
    /// The port forwarding to a closed port (503).
    failing: SocketAddr,
    _app: EchoServer,
}

/// A plane whose mesh config is `mesh(dir)` and an Envoy for workload `app`.
async fn setup(mesh: impl Fn(&Path) -> String) -> Setup {
    let app = EchoServer::start("app").await.unwrap();
    let (ok_port, failing_port, closed) = (free_port(), free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let sidecar = format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: app, namespace: {NS}}}\nspec:\n  \
         workloadSelector: {{labels: {{app: app}}}}\n  ingress:\n  \
         - port: {{number: {ok_port}, protocol: HTTP, name: http}}\n    defaultEndpoint: 127.0.0.1:{app_port}\n  \
         - port: {{number: {failing_port}, protocol: HTTP, name: http-failing}}\n    defaultEndpoint: 127.0.0.1:{closed}\n",
        app_port = app.addr.port()
    );
    write_atomic(dir.path(), "sidecar.yaml", &sidecar);
    let plane = Plane::start_with(PlaneOptions {
        mesh_config: mesh(dir.path()),
        ..PlaneOptions::config_dir(dir.path())
    })
    .await
    .unwrap();
    let envoy = Envoy::start(&plane.sidecar("app", NS, AdsApi::Sotw)).await.unwrap();
    Setup {
        dir,
        plane,
        envoy,
        ok: ([127, 0, 0, 1], ok_port).into(),
        failing: ([127, 0, 0, 1], failing_port).into(),
        _app: app,
    }
}

impl Setup {
    /// Sends `path` to `addr` until a line of the log file `file` contains it (the config is in force
    /// and Envoy flushed); returns that line.
    async fn wait_logged(&self, addr: SocketAddr, path: &str, file: &str) -> String {
        let log = self.dir.path().join(file);
        wait_for(&format!("{path} in {file}"), Duration::from_secs(20), async || {
            let _ = request(addr, "app.example", path, &[]).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            let text = std::fs::read_to_string(&log).ok()?;
            text.lines().find(|l| l.contains(path)).map(str::to_string)
        })
        .await
        .unwrap_or_else(|e| {
            panic!("{e}\nlog: {:?}\n{}", std::fs::read_to_string(&log), self.envoy.log_tail(40))
        })
    }

    async fn assert_no_nack(&self) {
        self.envoy.assert_no_rejected_updates().await;
    }
}

fn telemetry(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n{spec}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mesh_access_log_file_writes_istios_text_format() {
    let s = setup(|dir| format!("accessLogFile: {}\n", dir.join("access.log").display())).await;
    let line = s.wait_logged(s.ok, "/text-check?x=1", "access.log").await;
    // Istio's default format: [START_TIME] "METHOD PATH PROTOCOL" CODE FLAGS DETAILS ... "AUTHORITY"
    // "UPSTREAM_HOST" UPSTREAM_CLUSTER ...
    assert!(line.starts_with('['), "{line}");
    assert!(line.contains("] \"GET /text-check?x=1 HTTP/1.1\" 200 - via_upstream - \"-\" "), "{line}");
    assert!(line.contains("\"app.example\""), "authority: {line}");
    let upstream = format!("\"127.0.0.1:{}\" inbound|{}||", s._app.addr.port(), s.ok.port());
    assert!(line.contains(&upstream), "upstream host and cluster {upstream}: {line}");
    assert!(line.contains(&format!(" 127.0.0.1:{} ", s.ok.port())), "downstream local address: {line}");
    // A 503 is logged too, with its flags.
    let line = s.wait_logged(s.failing, "/text-failing", "access.log").await;
    assert!(line.contains("\"GET /text-failing HTTP/1.1\" 503 UF"), "{line}");
    s.assert_no_nack().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_telemetry_json_provider_writes_the_configured_labels() {
    let s = setup(|dir| {
        format!(
            "extensionProviders:\n- name: json-log\n  envoyFileAccessLog:\n    path: {}\n    logFormat:\n      labels:\n        \
             method: '%REQ(:METHOD)%'\n        path: '%REQ(:PATH)%'\n        code: '%RESPONSE_CODE%'\n        \
             cluster: '%UPSTREAM_CLUSTER_RAW%'\n",
            dir.join("json.log").display()
        )
    })
    .await;
    // Written while Envoy runs: the LDS push carries the logger.
    write_atomic(
        s.dir.path(),
        "telemetry.yaml",
        &telemetry(
            "app-logs",
            "  selector: {matchLabels: {app: app}}\n  accessLogging:\n  - providers: [{name: json-log}]\n",
        ),
    );
    let line = s.wait_logged(s.ok, "/json-check", "json.log").await;
    let json: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let mut keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["cluster", "code", "method", "path"], "{line}");
    assert_eq!(json["method"], "GET");
    assert_eq!(json["path"], "/json-check");
    assert_eq!(json["code"], 200);
    assert_eq!(json["cluster"], format!("inbound|{}||", s.ok.port()));
    s.assert_no_nack().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cel_filter_keeps_only_server_errors_and_an_unknown_provider_is_reported() {
    let s = setup(|dir| {
        format!(
            "extensionProviders:\n- name: errors\n  envoyFileAccessLog: {{path: {}}}\n",
            dir.join("errors.log").display()
        )
    })
    .await;
    write_atomic(
        s.dir.path(),
        "telemetry.yaml",
        &format!(
            "{}---\n{}",
            telemetry(
                "errors-only",
                "  selector: {matchLabels: {app: app}}\n  accessLogging:\n  - providers: [{name: errors}]\n    \
                 filter: {expression: 'response.code >= 500'}\n"
            ),
            // Another workload's Telemetry names a provider the mesh does not define.
            telemetry(
                "typo",
                "  selector: {matchLabels: {app: other}}\n  accessLogging:\n  - providers: [{name: errros}]\n"
            ),
        ),
    );
    wait_for("the app's port", Duration::from_secs(20), async || {
        request(s.ok, "app.example", "/warm-up", &[]).await.ok().filter(|r| r.status == 200)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.envoy.log_tail(40)));
    // A 200 first, then 503s until one is logged: the 200 was sent under the same config (the logger
    // and its filter arrive in one listener update, and nothing writes errors.log without them)...
    let ok = request(s.ok, "app.example", "/ok-before", &[]).await.unwrap();
    assert_eq!(ok.status, 200);
    let line = s.wait_logged(s.failing, "/server-error", "errors.log").await;
    assert!(line.contains("\"GET /server-error HTTP/1.1\" 503 UF"), "{line}");
    // ...and a 200 sent once the filter is in force.
    let ok = request(s.ok, "app.example", "/ok-after", &[]).await.unwrap();
    assert_eq!(ok.status, 200);
    let line = s.wait_logged(s.failing, "/server-error-2", "errors.log").await;
    assert!(line.contains(" 503 "), "{line}");
    let text = std::fs::read_to_string(s.dir.path().join("errors.log")).unwrap();
    assert!(!text.contains("/ok-"), "a 200 was logged:\n{text}");
    assert!(text.lines().all(|l| l.contains(" 503 ")), "{text}");
    s.assert_no_nack().await;

    // The bad Telemetry is reported with its field path; it touched no other proxy.
    let (status, body) = http_get(s.plane.http, "/debug/configstatusz", &[]).await.unwrap();
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    // Index findings are listed as text: kind/namespace/name, field path, message.
    let finding = json["pushContextFindings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.contains("Telemetry/default/typo"))
        .unwrap_or_else(|| panic!("no finding for the Telemetry: {json:#}"));
    assert!(finding.contains(" spec.accessLogging[0].providers[0].name: "), "{finding}");
    assert!(finding.contains("\"errros\" is not defined"), "{finding}");
    let untranslated = json.to_string();
    assert!(!untranslated.contains("Telemetry is not translated"), "{json:#}");
}
