//! Istio metrics configured for a real upstream Envoy 1.40, which lists none of istio-proxy's
//! extensions in `node.extensions`: with mesh `defaultProviders.metrics: [prometheus]` and a
//! Telemetry with `metrics` overrides in force, the listeners it gets carry no `istio.stats` or
//! `istio.metadata_exchange` filter (istiod would send both, and this Envoy would NACK them), so it
//! ACKs and serves. Needs Envoy (scripts/install-envoy.sh).

use std::time::Duration;

use meshpilot_testing::{
    AdsApi, EchoServer, Envoy, Plane, PlaneOptions, free_port, request, wait_for, write_atomic,
};

use crate::support::NS;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upstream_envoy_acks_and_serves_with_istio_metrics_configured() {
    let app = EchoServer::start("app").await.unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: app, namespace: {NS}}}\nspec:\n  \
         workloadSelector: {{labels: {{app: app}}}}\n  ingress:\n  \
         - port: {{number: {port}, protocol: HTTP, name: http}}\n    defaultEndpoint: 127.0.0.1:{app_port}\n\
         ---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: mesh-default, namespace: istio-system}}\n\
         spec:\n  metrics:\n  - providers: [{{name: prometheus}}]\n    reportingInterval: 10s\n    overrides:\n    \
         - match: {{metric: REQUEST_COUNT, mode: SERVER}}\n      tagOverrides:\n        \
         request_host: {{value: request.host}}\n        source_app: {{operation: REMOVE}}\n\
         ---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: app, namespace: {NS}}}\n\
         spec:\n  selector: {{matchLabels: {{app: app}}}}\n  metrics:\n  - overrides:\n    \
         - match: {{customMetric: my_metric}}\n      disabled: true\n",
        app_port = app.addr.port()
    );
    write_atomic(dir.path(), "config.yaml", &config);
    let plane = Plane::start_with(PlaneOptions {
        mesh_config: "defaultProviders:\n  metrics: [prometheus]\n".to_string(),
        ..PlaneOptions::config_dir(dir.path())
    })
    .await
    .unwrap();
    let envoy = Envoy::start(&plane.sidecar("app", NS, AdsApi::Sotw)).await.unwrap();
    // Served through the inbound connection manager: the listener was accepted.
    let addr = ([127, 0, 0, 1], port).into();
    wait_for("a 200 through the inbound listener", Duration::from_secs(20), async || {
        let r = request(addr, "app.example", "/stats-check", &[]).await.ok()?;
        (r.status == 200).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    for (manager, t) in [("cluster_manager", "cds"), ("listener_manager", "lds")] {
        let stat = |what: &str| format!("{manager}.{t}.{what}");
        let rejected = envoy.stat(&stat("update_rejected")).await.unwrap();
        assert_eq!(rejected, Some(0), "{t} NACKed:\n{}", envoy.log_tail(40));
        let accepted = envoy.stat(&stat("update_success")).await.unwrap().unwrap_or(0);
        assert!(accepted >= 1, "{t} never accepted:\n{}", envoy.log_tail(40));
    }
    let dump = envoy.config_dump(false).await.unwrap().to_string();
    for name in ["istio.stats", "istio.metadata_exchange", "stats.PluginConfig"] {
        assert!(!dump.contains(name), "{name} in the config of an Envoy without Istio's extensions");
    }
}
