//! `/debug/edsz` beside a real Envoy: istiod's claim for its typed dumps is that they show what the
//! proxy should have; for a sidecar Envoy of a small mesh, every ClusterLoadAssignment `/debug/edsz`
//! lists is in Envoy's own EDS config dump (`/config_dump?include_eds`) with the same endpoints, and
//! Envoy has no EDS cluster `/debug/edsz` does not list. Needs Envoy (scripts/install-envoy.sh).

use std::{collections::BTreeMap, time::Duration};

use meshpilot_testing::{AdsApi, Envoy, Plane, free_port, http_get, wait_for};
use serde_json::Value;

/// `cluster name → sorted "address:port"` of ClusterLoadAssignments in proto3 JSON, in either
/// spelling (`clusterName` from meshpilot's protojson, `cluster_name` from Envoy's admin).
fn endpoints_of<'a>(assignments: impl Iterator<Item = &'a Value>) -> BTreeMap<String, Vec<String>> {
    let field = |v: &'a Value, camel: &str, snake: &str| -> &'a Value {
        if v.get(camel).is_some() { &v[camel] } else { &v[snake] }
    };
    let mut out = BTreeMap::new();
    for cla in assignments {
        let name = field(cla, "clusterName", "cluster_name").as_str().unwrap_or_default().to_string();
        let mut addrs = Vec::new();
        for locality in cla["endpoints"].as_array().into_iter().flatten() {
            for lb in field(locality, "lbEndpoints", "lb_endpoints").as_array().into_iter().flatten() {
                let sock = field(&lb["endpoint"]["address"], "socketAddress", "socket_address");
                addrs.push(format!(
                    "{}:{}",
                    sock["address"].as_str().unwrap_or_default(),
                    field(sock, "portValue", "port_value")
                ));
            }
        }
        addrs.sort();
        out.insert(name, addrs);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edsz_lists_what_a_real_envoy_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (port, upstream) = (free_port(), free_port());
    std::fs::write(
        dir.path().join("mesh.yaml"),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: default}}\n\
             spec:\n  hosts: [echo.default.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  \
             resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{http: {upstream}}}}}, {{address: 127.0.0.2, ports: {{http: {upstream}}}}}]\n"
        ),
    )
    .unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&plane.sidecar("client", "default", AdsApi::Sotw)).await.unwrap();
    let cluster = format!("outbound|{port}||echo.default.svc.cluster.local");
    let held = wait_for("Envoy to hold the echo assignment", Duration::from_secs(30), async || {
        let dump = envoy.config_dump(true).await.ok()?;
        let eds = dump["configs"]
            .as_array()?
            .iter()
            .find(|c| c["@type"] == "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump")?
            .clone();
        // Envoy dumps the inline assignments of its STATIC clusters (BlackHoleCluster, …) too: only
        // its EDS clusters are EDS's business.
        let cds = dump["configs"]
            .as_array()?
            .iter()
            .find(|c| c["@type"] == "type.googleapis.com/envoy.admin.v3.ClustersConfigDump")?;
        let eds_clusters: Vec<&str> = cds["dynamic_active_clusters"]
            .as_array()?
            .iter()
            .filter(|c| c["cluster"]["type"] == "EDS")
            .filter_map(|c| c["cluster"]["name"].as_str())
            .collect();
        let mut held =
            endpoints_of(eds["dynamic_endpoint_configs"].as_array()?.iter().map(|c| &c["endpoint_config"]));
        held.retain(|name, _| eds_clusters.contains(&name.as_str()));
        held.get(&cluster).is_some_and(|a| a.len() == 2).then_some(held)
    })
    .await
    .unwrap();
    let (status, body) = http_get(plane.http, "/debug/edsz?proxyID=client.default", &[]).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let edsz: Value = serde_json::from_str(&body).unwrap();
    let configs = edsz["configs"].as_array().unwrap();
    assert!(
        configs
            .iter()
            .all(|c| c["@type"] == "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment")
    );
    let ours = endpoints_of(configs.iter());
    assert_eq!(ours[&cluster], [format!("127.0.0.1:{upstream}"), format!("127.0.0.2:{upstream}")]);
    assert_eq!(ours, held, "edsz and Envoy's EDS config dump differ");
    envoy.assert_no_rejected_updates().await;
}
