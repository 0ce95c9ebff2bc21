//! End-to-end against a real Envoy 1.40 over State-of-the-World ADS.

use crate::support;

use meshpilot_testing::{AdsApi, percent_decode};
use meshpilot_xds::{
    SyncState,
    type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE},
};
use support::{Changed, STEP, Scenario, prom_value, prometheus, route_bad_regex, route_canary, route_to};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_envoy_acks_every_type_and_traffic_reaches_the_upstream() {
    let s = Scenario::start("sotw-startup", AdsApi::Sotw).await;
    let c = s.connection();
    assert!(c.id.starts_with("sotw-startup.test-"), "connection id is <proxy id>-<n>: {}", c.id);
    assert_eq!(c.proxy.config_namespace, "test");
    assert_eq!(c.proxy.metadata.cluster_id, "Kubernetes");
    for t in [CLUSTER, ENDPOINT, LISTENER, ROUTE] {
        let st = &c.types[t];
        assert_eq!(st.state, SyncState::Acked, "{t}");
        assert_eq!(st.version_acked, "1", "{t}");
        assert_eq!(st.last_error, None, "{t}");
        assert_eq!(st.rejects, 0, "{t}");
    }
    assert!(c.types[CLUSTER].watch.wildcard && c.types[LISTENER].watch.wildcard);
    assert_eq!(c.types[ENDPOINT].watch.names.iter().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(c.types[ROUTE].watch.names.iter().collect::<Vec<_>>(), ["local_route"]);

    // Envoy's side: every subscription accepted, nothing rejected, connected.
    let e = &s.envoy;
    assert_eq!(e.stat("control_plane.connected_state").await.unwrap(), Some(1));
    assert!(e.stat("cluster_manager.cds.update_success").await.unwrap() >= Some(1));
    assert_eq!(e.stat("cluster_manager.cds.update_rejected").await.unwrap(), Some(0));
    assert!(e.stat("listener_manager.lds.update_success").await.unwrap() >= Some(1));
    assert_eq!(e.stat("listener_manager.lds.update_rejected").await.unwrap(), Some(0));
    assert!(e.stat("cluster.a.update_success").await.unwrap() >= Some(1));
    assert_eq!(e.stat("cluster.a.update_rejected").await.unwrap(), Some(0));
    assert_eq!(s.rds_stats().await, (1, 0));

    s.wait_body(&[], "a").await;

    // Istio's metric names, no `_total`.
    let m = prometheus().render();
    for t in ["cds", "eds", "lds", "rds"] {
        assert!(
            prom_value(&m, &format!("pilot_xds_pushes{{type=\"{t}\"}}")).is_some_and(|v| v >= 1.0),
            "{m}"
        );
    }
    assert!(m.contains("pilot_xds{version=\"1.28.0\"}"), "{m}");
    assert!(m.contains("# TYPE pilot_xds_pushes counter"), "{m}");
    assert!(!m.contains("pilot_xds_pushes_total"), "no _total suffix: {m}");
    let size = format!("pilot_xds_config_size_bytes_count{{type=\"{CLUSTER}\"}}");
    assert!(prom_value(&m, &size).is_some_and(|v| v >= 1.0), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_route_change_moves_traffic_without_restart() {
    let s = Scenario::start("sotw-route", AdsApi::Sotw).await;
    s.wait_body(&[], "a").await;
    let pid = s.envoy.pid();
    let lds_before = s.envoy.stat("listener_manager.lds.update_success").await.unwrap();

    let v = s.push_route(route_canary("local_route", "a", "b"));
    s.wait_version(ROUTE, &v).await;
    s.wait_body(&[("x-canary", "true")], "b").await;
    s.wait_body(&[], "a").await;

    let v = s.push_route(route_to("local_route", "b"));
    let c = s.wait_version(ROUTE, &v).await;
    s.wait_body(&[], "b").await;

    // The pushes converged (enqueue to ACK) and were measured.
    let m = prometheus().render();
    assert!(prom_value(&m, "pilot_proxy_convergence_time_count").is_some_and(|v| v >= 2.0), "{m}");
    assert!(m.contains("pilot_proxy_convergence_time_bucket{le=\"0.1\"}"), "{m}");

    // Same process, listener untouched: only RDS was pushed.
    assert_eq!(s.envoy.pid(), pid);
    assert_eq!(s.envoy.stat("listener_manager.lds.update_success").await.unwrap(), lds_before);
    assert_eq!(s.rds_stats().await, (3, 0));
    assert_eq!(c.types[LISTENER].responses, 1, "an RDS-only push sends no listeners");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_invalid_route_is_nacked_recorded_not_resent_and_old_config_serves() {
    let s = Scenario::start("sotw-nack", AdsApi::Sotw).await;
    let v_good = s.push_route(route_to("local_route", "b"));
    s.wait_version(ROUTE, &v_good).await;
    s.wait_body(&[], "b").await;

    let rejects_before =
        prom_value(&prometheus().render(), "pilot_total_xds_rejects{type=\"rds\"}").unwrap_or(0.0);
    let v_bad = s.push_route(route_bad_regex("local_route", "a"));
    let c = meshpilot_testing::wait_for("the RDS NACK to be recorded", STEP, async || {
        let c = s.connection();
        (c.types[ROUTE].state == SyncState::Rejected).then_some(c)
    })
    .await
    .unwrap();
    let rds = &c.types[ROUTE];
    assert_eq!(rds.rejects, 1);
    assert_eq!(rds.version_sent, v_bad);
    assert_eq!(rds.version_acked, v_good, "Envoy still runs the last accepted version");
    let err = rds.last_error.as_deref().unwrap();
    assert!(err.contains("missing ): /foo("), "{err}");
    let rejects = prom_value(&prometheus().render(), "pilot_total_xds_rejects{type=\"rds\"}").unwrap();
    assert!(rejects > rejects_before);
    assert_eq!(s.rds_stats().await.1, 1, "Envoy counted one rejection");

    // The old config keeps serving.
    s.wait_body(&[], "b").await;

    // A push that regenerates every type produces the rejected route again: it is not re-sent
    // (and the other types, unchanged, are not re-sent either).
    let responses_before = rds.responses;
    let cds_before = c.types[CLUSTER].responses;
    let pushes = || s.source.calls().iter().filter(|c| c.trigger == "push" && c.type_url == ROUTE).count();
    let pushes_before = pushes();
    assert_eq!(s.ads.registry.push_all(Changed::default()), 1);
    meshpilot_testing::wait_for("the push to be generated", STEP, async || {
        (pushes() > pushes_before).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(s.connection().types[ROUTE].state, SyncState::Rejected);

    // A later valid version is ACKed and clears the error. Pushes reach the stream in order, so a
    // re-sent rejected route would have come before it: it is the only RDS response since.
    let v_fixed = s.push_route(route_to("local_route", "a"));
    let c = s.wait_version(ROUTE, &v_fixed).await;
    assert_eq!(c.types[ROUTE].responses, responses_before + 1, "rejected config not re-sent");
    assert_eq!(s.rds_stats().await.1, 1, "no second rejection on Envoy");
    assert_eq!(c.types[CLUSTER].responses, cds_before, "unchanged clusters not re-sent");
    assert_eq!(c.types[ROUTE].last_error, None);
    s.wait_body(&[], "a").await;

    // What /debug/syncz prints (meshpilot-http's `syncz`): the route's latest nonce is ACKed.
    let snapshot = s.ads.registry.snapshot();
    assert_eq!(snapshot[0].proxy.id, "sotw-nack.test");
    assert_eq!(snapshot[0].types[ROUTE].nonce_sent, snapshot[0].types[ROUTE].nonce_acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_with_a_malformed_node_id_is_refused_with_a_clear_grpc_error() {
    let source = support::TestSource::new(vec![]);
    let ads =
        meshpilot_testing::RunningAds::start(meshpilot_xds::AdsServer::new(source), None).await.unwrap();
    let mut bootstrap = meshpilot_testing::Bootstrap::sidecar("bad", ads.addr, AdsApi::Sotw);
    bootstrap.node_id = "not-an-istio-node-id".into();
    let envoy = meshpilot_testing::Envoy::start(&bootstrap).await.unwrap();
    // Envoy logs (at warning level) the gRPC status it got: 3 (InvalidArgument) and our message,
    // percent-encoded as grpc-message is on the wire.
    let line = meshpilot_testing::wait_for("Envoy to log the refusal", STEP, async || {
        envoy.log().lines().map(percent_decode).find(|l| l.contains("closed: 3, invalid node id"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    assert!(line.contains("[warning]"), "{line}");
    assert!(
        line.contains("invalid node id \"not-an-istio-node-id\": it has 1 '~'-separated part(s), expected 4: TYPE~IP~ID~DOMAIN"),
        "{line}"
    );
    assert_eq!(
        envoy.stat("cluster_manager.cds.update_success").await.unwrap(),
        Some(0),
        "no config reached Envoy"
    );
    assert!(ads.registry.is_empty());
}
