//! EndpointSlice churn on a real kube-apiserver reaches a real Envoy as EDS updates only: scaling a
//! service's endpoints up and down adds EDS responses on the sidecar's stream while its CDS, LDS and RDS
//! response counts stay put (Istio's incremental EDS path). The counts are the connection's own
//! (`ConnectionSnapshot`), so other tests of this binary pushing at the same time do not move them.
//! Needs Envoy (scripts/install-envoy.sh) and the test environment.

use crate::support;

use std::time::Duration;

use meshpilot_kube::testenv::TestEnv;
use meshpilot_testing::{AdsApi, Envoy, Plane, free_port, wait_for};
use support::{namespace, slice, slice_endpoint, start_plane};
use xds::{SyncState, type_url};

const NS: &str = "kreg-churn";

/// Responses sent on the plane's one connection for CDS, LDS, RDS, EDS, and whether the sidecar has
/// ACKed the last response of each.
fn responses(plane: &Plane) -> ([u64; 4], bool) {
    let conns = plane.server.connections().snapshot();
    let Some(c) = conns.first() else { return ([0; 4], false) };
    let types = [type_url::CLUSTER, type_url::LISTENER, type_url::ROUTE, type_url::ENDPOINT];
    let counts = types.map(|t| c.types.get(t).map_or(0, |s| s.responses));
    let acked = types.iter().all(|t| {
        c.types.get(*t).is_some_and(|s| s.state == SyncState::Acked && s.nonce_sent == s.nonce_acked)
    });
    (counts, acked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn endpoint_churn_is_eds_only() {
    let env = TestEnv::shared_by(file!());
    namespace(env, NS);
    let port = free_port();
    env.kubectl_apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: churn, namespace: {NS}}}\nspec:\n  \
         ports: [{{name: http, port: {port}, targetPort: 8080}}]\n"
    ))
    .unwrap();
    let scale = |n: usize| {
        let eps: Vec<String> =
            (0..n).map(|i| slice_endpoint(&format!("10.3.0.{}", i + 1), "", true, false)).collect();
        env.kubectl_apply(&slice(NS, "churn-1", "churn", "{name: http, port: 8080}", &eps)).unwrap();
    };
    scale(1);
    let plane = start_plane(env, NS).await;
    let envoy = Envoy::start(&plane.sidecar("client", NS, AdsApi::Sotw)).await.unwrap();
    let stat = format!("cluster.outbound|{port}||churn.{NS}.svc.cluster.local.membership_total");
    let members = async |n: u64| {
        wait_for(&format!("{n} endpoints in Envoy"), Duration::from_secs(30), async || {
            (envoy.stat(&stat).await.ok().flatten() == Some(n)).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(30)));
    };
    members(1).await;
    // Marker: one endpoint moves to a new address. Pushes go out in order and a debounced push carries
    // every change that came before it, so once the sidecar has ACKed an EDS response after this one
    // nothing from start-up is still on its way.
    let (start, _) = responses(&plane);
    env.kubectl_apply(&slice(
        NS,
        "churn-1",
        "churn",
        "{name: http, port: 8080}",
        &[slice_endpoint("10.3.0.200", "", true, false)],
    ))
    .unwrap();
    let before = wait_for("the marker EDS response ACKed", Duration::from_secs(30), async || {
        let (now, acked) = responses(&plane);
        (acked && now[3] > start[3]).then_some(now)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(30)));
    for n in [3, 5, 2, 4, 1] {
        scale(n);
        members(n as u64).await;
    }
    let (after, _) = responses(&plane);
    println!("responses before churn (cds, lds, rds, eds): {before:?}; after: {after:?}");
    assert_eq!(after[..3], before[..3], "no CDS/LDS/RDS push for endpoint churn");
    assert!(after[3] >= before[3] + 5, "one EDS push per scale step at least: {before:?} → {after:?}");
    assert_eq!(envoy.stat("cluster_manager.cds.update_rejected").await.unwrap().unwrap_or(0), 0);
}
