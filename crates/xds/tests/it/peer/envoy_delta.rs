//! End-to-end against a real Envoy 1.40 over Delta (incremental) ADS.

use crate::support;

use meshpilot_testing::{AdsApi, wait_for};
use meshpilot_xds::{
    SyncState, Variant,
    type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE},
};
use support::{Changed, STEP, Scenario, prom_value, prometheus, route_bad_regex, route_canary, route_to};

const ALL: [&str; 4] = [CLUSTER, ENDPOINT, LISTENER, ROUTE];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_envoy_acks_every_type_and_traffic_reaches_the_upstream() {
    let s = Scenario::start("delta-startup", AdsApi::Delta).await;
    let c = s.connection();
    assert_eq!(c.protocol, Variant::Delta);
    for t in ALL {
        assert_eq!(c.types[t].state, SyncState::Acked, "{t}");
        assert_eq!(c.types[t].last_error, None, "{t}");
    }
    assert!(c.types[CLUSTER].watch.wildcard && c.types[LISTENER].watch.wildcard, "legacy wildcard");
    assert_eq!(c.types[CLUSTER].resources_sent, 2);
    assert_eq!(c.types[ENDPOINT].resources_sent, 2);
    assert_eq!(c.types[ROUTE].watch.names.iter().collect::<Vec<_>>(), ["local_route"]);

    let e = &s.envoy;
    assert_eq!(e.stat("control_plane.connected_state").await.unwrap(), Some(1));
    assert_eq!(e.stat("cluster_manager.cds.update_rejected").await.unwrap(), Some(0));
    assert_eq!(e.stat("listener_manager.lds.update_rejected").await.unwrap(), Some(0));
    assert!(e.stat("cluster.b.update_success").await.unwrap() >= Some(1));
    assert_eq!(s.rds_stats().await, (1, 0));
    s.wait_body(&[], "a").await;

    // Envoy's config_dump shows what was sent, with our per-resource versions.
    let dump = e.config_dump(false).await.unwrap();
    let clusters = dump["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["@type"].as_str().unwrap().contains("ClustersConfigDump"))
        .unwrap();
    let names: Vec<&str> = clusters["dynamic_active_clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cluster"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_route_change_moves_traffic_without_restart() {
    let s = Scenario::start("delta-route", AdsApi::Delta).await;
    s.wait_body(&[], "a").await;
    let pid = s.envoy.pid();
    let v = s.push_route(route_canary("local_route", "a", "b"));
    s.wait_version(ROUTE, &v).await;
    s.wait_body(&[("x-canary", "true")], "b").await;
    s.wait_body(&[], "a").await;
    let v = s.push_route(route_to("local_route", "b"));
    let c = s.wait_version(ROUTE, &v).await;
    s.wait_body(&[], "b").await;
    assert_eq!(s.envoy.pid(), pid);
    assert_eq!(s.rds_stats().await, (3, 0));
    assert_eq!(c.types[ROUTE].resources_sent, 3, "one route configuration per change");
    assert_eq!(c.types[CLUSTER].responses, 1, "an RDS-only push sends no clusters");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_invalid_route_is_nacked_recorded_not_resent_and_old_config_serves() {
    let s = Scenario::start("delta-nack", AdsApi::Delta).await;
    let v_good = s.push_route(route_to("local_route", "b"));
    s.wait_version(ROUTE, &v_good).await;
    s.wait_body(&[], "b").await;

    let v_bad = s.push_route(route_bad_regex("local_route", "a"));
    let c = s.wait_until("the RDS NACK", |c| c.types[ROUTE].state == SyncState::Rejected).await;
    let rds = &c.types[ROUTE];
    assert_eq!(rds.rejects, 1);
    assert_eq!(rds.version_sent, v_bad);
    assert_eq!(rds.version_acked, v_good);
    assert!(rds.last_error.as_deref().unwrap().contains("missing ): /foo("), "{:?}", rds.last_error);
    assert!(prom_value(&prometheus().render(), "pilot_total_xds_rejects{type=\"rds\"}").unwrap() >= 1.0);
    assert_eq!(s.rds_stats().await.1, 1);
    s.wait_body(&[], "b").await;

    // Regenerating everything yields the rejected version again: nothing is re-sent.
    let calls_before = s.source.calls().len();
    let responses_before = rds.responses;
    assert_eq!(s.ads.registry.push_all(Changed::default()), 1);
    wait_for("the push to be generated", STEP, async || {
        s.source.calls()[calls_before..]
            .iter()
            .any(|c| c.type_url == ROUTE && c.trigger == "push")
            .then_some(())
    })
    .await
    .unwrap();

    // A later valid version must arrive; pushes reach the stream in order, so a re-sent rejected
    // version would have come before it: it is the only RDS response since.
    let v_fixed = s.push_route(route_to("local_route", "a"));
    let c = s.wait_version(ROUTE, &v_fixed).await;
    assert_eq!(c.types[ROUTE].responses, responses_before + 1, "rejected version not re-sent");
    assert_eq!(c.types[CLUSTER].responses, 1, "unchanged clusters not re-sent either");
    assert_eq!(s.rds_stats().await.1, 1);
    assert_eq!(c.types[ROUTE].last_error, None);
    s.wait_body(&[], "a").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_reconnect_with_initial_resource_versions_resends_nothing_unchanged() {
    let s = Scenario::start("delta-reconnect", AdsApi::Delta).await;
    s.wait_body(&[], "a").await;
    let first = s.connection();
    let modified_before = s.envoy.stat("cluster_manager.cluster_modified").await.unwrap();
    let calls_before = s.source.calls().len();
    let cds_ok_before = s.envoy.stat("cluster_manager.cds.update_success").await.unwrap().unwrap();

    // The server ends the stream; Envoy reconnects and lists what it holds.
    assert!(s.ads.registry.disconnect(&first.id));
    let second = wait_for("Envoy to reconnect and ACK every type", STEP, async || {
        let all = s.ads.registry.snapshot();
        let c = all.into_iter().find(|c| c.id != first.id)?;
        ALL.iter().all(|t| support::is_acked(&c, t)).then_some(c)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.envoy.log_tail(60)));
    assert_ne!(second.id, first.id);
    assert!(second.id.starts_with("delta-reconnect.test-"));
    for t in ALL {
        assert_eq!(second.types[t].resources_sent, 0, "{t}: unchanged resources must not be re-sent");
        assert!(second.types[t].responses >= 1, "{t}: the initial request is still answered");
    }
    // The clusters were generated for the new stream's request, and skipped as unchanged.
    let calls = s.source.calls();
    assert!(
        calls[calls_before..]
            .iter()
            .any(|c| c.type_url == CLUSTER && c.trigger == "request" && c.names == ["a", "b"]),
        "{calls:?}"
    );
    // Envoy took the (empty) updates without touching its clusters, and keeps serving.
    s.envoy.wait_stat("cluster_manager.cds.update_success", cds_ok_before + 1, STEP).await.unwrap();
    assert_eq!(s.envoy.stat("cluster_manager.cluster_modified").await.unwrap(), modified_before);
    assert_eq!(s.envoy.stat("control_plane.connected_state").await.unwrap(), Some(1));
    s.wait_body(&[], "a").await;

    // The new stream carries on normally: a change sends just that resource.
    let v = s.push_route(route_to("local_route", "b"));
    let c = wait_for("the route change on the new stream", STEP, async || {
        let c = s.ads.registry.connection(&second.id)?;
        (support::is_acked(&c, ROUTE) && c.types[ROUTE].version_acked == v).then_some(c)
    })
    .await
    .unwrap();
    assert_eq!(c.types[ROUTE].resources_sent, 1);
    s.wait_body(&[], "b").await;
}
