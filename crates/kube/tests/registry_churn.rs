//! EndpointSlice churn on a real kube-apiserver reaches a real Envoy as EDS updates only: scaling a
//! service's endpoints up and down grows `pilot_xds_pushes{type="eds"}` while the cds, lds and rds
//! counts stay put (Istio's incremental EDS path). Own test binary: the push counters are global.
//! Needs Envoy (scripts/install-envoy.sh) and the test environment.

mod support;

use std::{sync::OnceLock, time::Duration};

use meshpilot_kube::testenv::TestEnv;
use meshpilot_testing::{AdsApi, Envoy, free_port, wait_for};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use support::{namespace, slice, slice_endpoint, start_plane};

const NS: &str = "kreg-churn";

fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| PrometheusBuilder::new().install_recorder().expect("install Prometheus recorder"))
}

/// `pilot_xds_pushes{type=T}` for cds, lds, rds, eds.
fn pushes() -> [u64; 4] {
    let text = prometheus().render();
    ["cds", "lds", "rds", "eds"].map(|t| {
        let series = format!("pilot_xds_pushes{{type=\"{t}\"}} ");
        text.lines().find_map(|l| l.strip_prefix(&series)?.trim().parse::<f64>().ok()).unwrap_or(0.0) as u64
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn endpoint_churn_is_eds_only() {
    prometheus();
    let env = TestEnv::shared();
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
    // Settle: no push in flight (the counters stop moving).
    let mut before = pushes();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = pushes();
        if now == before {
            break;
        }
        before = now;
    }
    for n in [3, 5, 2, 4, 1] {
        scale(n);
        members(n as u64).await;
    }
    let after = pushes();
    println!("pushes before churn (cds, lds, rds, eds): {before:?}; after: {after:?}");
    assert_eq!(after[..3], before[..3], "no CDS/LDS/RDS push for endpoint churn");
    assert!(after[3] >= before[3] + 5, "one EDS push per scale step at least: {before:?} → {after:?}");
    assert_eq!(envoy.stat("cluster_manager.cds.update_rejected").await.unwrap().unwrap_or(0), 0);
}
