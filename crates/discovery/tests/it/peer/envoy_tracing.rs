//! Tracing through a real Envoy: a sidecar (an Envoy connected directly: plaintext, INTERCEPTION_MODE
//! NONE) with a Sidecar `ingress` port forwarding to a local echo app, so every request crosses an
//! inbound connection manager (the `SERVER` side). A tiny Zipkin collector (HTTP on loopback taking
//! `POST /api/v2/spans`, JSON v2) is registered as a ServiceEntry and named by a mesh
//! `extensionProviders` entry; a Telemetry selects it with 100 % sampling and a literal tag, then 0 %
//! with another tag value. Envoy batches spans (5 spans or 5 s), so the test waits for the spans it
//! expects. Needs Envoy (scripts/install-envoy.sh).

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Json, Router, extract::State, routing::post};
use meshpilot_testing::{
    AdsApi, EchoServer, Envoy, Plane, PlaneOptions, free_port, request, wait_for, write_atomic,
};
use serde_json::Value;

use crate::support::NS;

/// The spans a collector received, in arrival order.
type Spans = Arc<Mutex<Vec<Value>>>;

/// A Zipkin collector on 127.0.0.1 keeping every span posted to `/api/v2/spans`; stops when the
/// task is aborted.
async fn zipkin_collector() -> (SocketAddr, Spans, tokio::task::JoinHandle<()>) {
    let spans: Spans = Arc::default();
    let app = Router::new()
        .route(
            "/api/v2/spans",
            post(|State(spans): State<Spans>, Json(body): Json<Vec<Value>>| async move {
                spans.lock().unwrap().extend(body);
                axum::http::StatusCode::ACCEPTED
            }),
        )
        .with_state(spans.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, spans, task)
}

/// The `http.url` and `phase` tags of every span received.
fn seen(spans: &Spans) -> Vec<(String, String)> {
    let tag = |s: &Value, name: &str| s["tags"][name].as_str().unwrap_or_default().to_string();
    spans.lock().unwrap().iter().map(|s| (tag(s, "http.url"), tag(s, "phase"))).collect()
}

fn telemetry(sampling: u32, phase: &str) -> String {
    format!(
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: app-tracing, namespace: {NS}}}\nspec:\n  \
         selector: {{matchLabels: {{app: app}}}}\n  tracing:\n  - providers: [{{name: zipkin}}]\n    \
         randomSamplingPercentage: {sampling}\n    customTags: {{phase: {{literal: {{value: {phase}}}}}}}\n"
    )
}

struct Setup {
    dir: tempfile::TempDir,
    _plane: Plane,
    envoy: Envoy,
    /// The Sidecar ingress port forwarding to the app.
    ingress: SocketAddr,
    spans: Spans,
    _app: EchoServer,
    collector: tokio::task::JoinHandle<()>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.collector.abort();
    }
}

async fn setup() -> Setup {
    let app = EchoServer::start("app").await.unwrap();
    let (collector_addr, spans, collector) = zipkin_collector().await;
    let ingress_port = free_port();
    let dir = tempfile::tempdir().unwrap();
    // The collector listens on `collector_addr`; the ServiceEntry port is another one (its targetPort the
    // collector's), since this sidecar (INTERCEPTION_MODE NONE) binds each outbound port on loopback.
    let zipkin_port = free_port();
    let config = format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: app, namespace: {NS}}}\nspec:\n  \
         workloadSelector: {{labels: {{app: app}}}}\n  ingress:\n  \
         - port: {{number: {ingress_port}, protocol: HTTP, name: http}}\n    defaultEndpoint: 127.0.0.1:{app_port}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: zipkin, namespace: {NS}}}\nspec:\n  \
         hosts: [zipkin.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  \
         ports: [{{number: {zipkin_port}, name: http, protocol: HTTP, targetPort: {collector_port}}}]\n  resolution: STATIC\n  \
         endpoints: [{{address: 127.0.0.1}}]\n",
        app_port = app.addr.port(),
        collector_port = collector_addr.port()
    );
    write_atomic(dir.path(), "workloads.yaml", &config);
    write_atomic(dir.path(), "telemetry.yaml", &telemetry(100, "one"));
    let mesh = format!(
        "extensionProviders:\n- name: zipkin\n  zipkin: {{service: zipkin.{NS}.svc.cluster.local, port: {zipkin_port}}}\n"
    );
    let plane = Plane::start_with(PlaneOptions { mesh_config: mesh, ..PlaneOptions::config_dir(dir.path()) })
        .await
        .unwrap();
    let envoy = Envoy::start(&plane.sidecar("app", NS, AdsApi::Sotw)).await.unwrap();
    Setup {
        dir,
        _plane: plane,
        envoy,
        ingress: ([127, 0, 0, 1], ingress_port).into(),
        spans,
        _app: app,
        collector,
    }
}

impl Setup {
    /// Sends requests to `path-<n>` (with `headers`) until a span of one of them arrives tagged
    /// `phase`; returns its `http.url`.
    async fn wait_span(&self, path: &str, phase: &str, headers: &[(&str, &str)]) -> String {
        let mut n = 0;
        wait_for(&format!("a span of {path} tagged {phase}"), Duration::from_secs(30), async || {
            n += 1;
            let _ = request(self.ingress, "app.example", &format!("{path}-{n}"), headers).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            seen(&self.spans)
                .into_iter()
                .find(|(url, p)| url.contains(path) && p == phase)
                .map(|(url, _)| url)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\nspans: {:?}\n{}", seen(&self.spans), self.envoy.log_tail(40)))
    }

    async fn assert_no_nack(&self) {
        self.envoy.assert_no_rejected_updates().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn telemetry_zipkin_spans_carry_the_custom_tag_and_sampling_zero_traces_only_forced_requests() {
    let s = setup().await;
    // 100 %: every request is traced; the span carries the literal tag and Istio's service tags.
    let url = s.wait_span("/sampled", "one", &[]).await;
    assert!(url.starts_with("http://app.example/sampled-"), "{url}");
    let span =
        s.spans.lock().unwrap().iter().find(|sp| sp["tags"]["http.url"] == url.as_str()).cloned().unwrap();
    assert_eq!(span["kind"], "SERVER", "the inbound side: {span:#}");
    assert_eq!(span["tags"]["istio.namespace"], NS, "{span:#}");
    assert_eq!(span["tags"]["istio.canonical_revision"], "latest", "{span:#}");
    s.assert_no_nack().await;

    // 0 % with another tag value. Spans tagged "two" come from the new config only (the tag and the
    // sampling arrive in one listener update). A request with x-client-trace-id is still traced
    // (client sampling 100 %): its span is the positive signal that the config is in force and
    // that spans of the requests sent before it have been flushed.
    write_atomic(s.dir.path(), "telemetry.yaml", &telemetry(0, "two"));
    s.wait_span("/forced", "two", &[("x-client-trace-id", "meshpilot-forced")]).await;
    for n in 0..10 {
        let r = request(s.ingress, "app.example", &format!("/unsampled-{n}"), &[]).await.unwrap();
        assert_eq!(r.status, 200);
    }
    // Another forced request after the unsampled ones: once its span is in, any span of the
    // unsampled requests would be too (Envoy flushes spans in order).
    s.wait_span("/forced-after", "two", &[("x-client-trace-id", "meshpilot-forced-after")]).await;
    let unsampled: Vec<_> =
        seen(&s.spans).into_iter().filter(|(url, _)| url.contains("/unsampled-")).collect();
    assert!(unsampled.is_empty(), "sampled at 0 %: {unsampled:?}");
    s.assert_no_nack().await;
}
