//! Locality load balancing through a real Envoy sidecar (INTERCEPTION_MODE NONE, loopback): one
//! ServiceEntry `echo` whose WorkloadEntries are loopback echo servers in distinct localities, a
//! DestinationRule per test, and a client sidecar whose workload labels place it in `r1/z1`
//! (Istio reads the proxy's locality from its topology labels). Failover is observed by which
//! upstream answers; upstreams fail and recover on command. Needs Envoy (scripts/install-envoy.sh).

use crate::support::NS;

use std::{collections::BTreeMap, net::SocketAddr, time::Duration};

use meshpilot_testing::{AdsApi, EchoServer, Envoy, Plane, free_port, request, wait_for};

/// The upstreams, by name, with their WorkloadEntry localities and extra labels.
struct Upstreams {
    servers: BTreeMap<&'static str, EchoServer>,
}

impl Upstreams {
    async fn start(names: &[&'static str]) -> Upstreams {
        let mut servers = BTreeMap::new();
        for name in names {
            servers.insert(*name, EchoServer::start(name).await.unwrap());
        }
        Upstreams { servers }
    }

    fn get(&self, name: &str) -> &EchoServer {
        &self.servers[name]
    }
}

/// ServiceEntry `echo.<NS>.svc.cluster.local:port` (STATIC, selecting `app: echo`) and one
/// WorkloadEntry per `(upstream, locality, labels)`.
fn registry(port: u16, upstreams: &Upstreams, entries: &[(&str, &str, &str)]) -> String {
    let mut out = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  hosts: [echo.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: echo}}\n"
    );
    for (name, locality, labels) in entries {
        let extra = if labels.is_empty() { String::new() } else { format!(", {labels}") };
        out.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: {name}, namespace: {NS}}}\n\
             spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  locality: {locality}\n  labels: {{app: echo{extra}}}\n",
            upstreams.get(name).addr.port()
        ));
    }
    out
}

/// A plane serving `registry` and the DestinationRule `dr_spec` (YAML under `spec:`, indented two
/// spaces) for host `echo`, and a client sidecar in `r1/z1` with `labels` added; returns the
/// listener address once a request gets through.
async fn setup(
    registry: String,
    dr_spec: &str,
    labels: &[(&str, &str)],
    port: u16,
) -> (tempfile::TempDir, Plane, Envoy, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("echo-registry.yaml"), registry).unwrap();
    let dr = format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  host: echo\n{dr_spec}"
    );
    std::fs::write(dir.path().join("echo-dr.yaml"), dr).unwrap();
    let plane = Plane::start(dir.path()).await;
    let mut bootstrap = plane.sidecar("client", NS, AdsApi::Sotw);
    let node_labels = &mut bootstrap.metadata["LABELS"];
    node_labels["topology.kubernetes.io/region"] = "r1".into();
    node_labels["topology.kubernetes.io/zone"] = "z1".into();
    for (k, v) in labels {
        node_labels[*k] = (*v).into();
    }
    let envoy = Envoy::start(&bootstrap).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_for("echo route through Envoy", Duration::from_secs(10), async || {
        let r = request(addr, &format!("echo:{port}"), "/", &[]).await.ok()?;
        (r.status == 200).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    (dir, plane, envoy, addr)
}

/// Sends `n` requests and counts the answering upstreams by name (`503` answers count as
/// `"503:<body>"`).
async fn spread(addr: SocketAddr, n: usize) -> BTreeMap<String, usize> {
    let host = format!("echo:{}", addr.port());
    let mut out = BTreeMap::new();
    for _ in 0..n {
        let r = request(addr, &host, "/", &[]).await.unwrap();
        let key = if r.status == 200 { r.body.clone() } else { format!("{}:{}", r.status, r.body) };
        *out.entry(key).or_default() += 1;
    }
    out
}

/// Waits (20 s) until `n` consecutive requests are all answered by `upstream`.
async fn wait_served_by(envoy: &Envoy, addr: SocketAddr, upstream: &str, n: usize) {
    let mut last = BTreeMap::new();
    let r = wait_for(&format!("all traffic on {upstream}"), Duration::from_secs(20), async || {
        last = spread(addr, n).await;
        (last.len() == 1 && last.contains_key(upstream)).then_some(())
    })
    .await;
    if let Err(e) = r {
        panic!("{e}; last spread {last:?}\n{}", envoy.log_tail(40));
    }
}

async fn no_nacks(envoy: &Envoy) {
    envoy.assert_no_rejected_updates().await;
}

/// Outlier detection that ejects an upstream on its first 5xx for 2 s (Envoy brings it back at the
/// next 1 s interval after that).
const OUTLIER: &str = "    outlierDetection: {consecutive5xxErrors: 1, interval: 1s, baseEjectionTime: 2s, maxEjectionPercent: 100}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn outlier_detection_keeps_traffic_local_and_fails_over_in_locality_order_and_back() {
    let ups = Upstreams::start(&["local", "same-region", "failover-region", "other-region"]).await;
    let port = free_port();
    let reg = registry(
        port,
        &ups,
        &[
            ("local", "r1/z1", ""),
            ("same-region", "r1/z2", ""),
            ("failover-region", "r3/z1", ""),
            ("other-region", "r2/z1", ""),
        ],
    );
    let dr = format!(
        "  trafficPolicy:\n{OUTLIER}    loadBalancer:\n      localityLbSetting:\n        failover: [{{from: r1, to: r3}}]\n"
    );
    let (_dir, _plane, envoy, addr) = setup(reg, &dr, &[], port).await;

    // The proxy's own zone serves everything.
    wait_served_by(&envoy, addr, "local", 100).await;
    assert_eq!(ups.get("same-region").hits() + ups.get("other-region").hits(), 0);

    // The local zone fails: the same region's other zone takes over.
    ups.get("local").set_failing(true);
    wait_served_by(&envoy, addr, "same-region", 50).await;

    // The region fails too: the `failover` target region r3, not r2.
    ups.get("same-region").set_failing(true);
    wait_served_by(&envoy, addr, "failover-region", 50).await;
    assert_eq!(ups.get("other-region").hits(), 0, "r2 is below the failover region r3");

    // The local zone recovers: traffic comes back once Envoy lets it in again.
    ups.get("local").set_failing(false);
    ups.get("same-region").set_failing(false);
    wait_served_by(&envoy, addr, "local", 50).await;
    no_nacks(&envoy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failover_priority_prefers_endpoints_with_the_proxys_label_values() {
    let ups = Upstreams::start(&["gold", "silver", "bronze"]).await;
    let port = free_port();
    // All in one locality: only the labels rank them.
    let reg = registry(
        port,
        &ups,
        &[
            ("gold", "r1/z1", "tier: gold, site: a"),
            ("silver", "r1/z1", "tier: gold, site: b"),
            ("bronze", "r1/z1", "tier: bronze, site: a"),
        ],
    );
    let dr = format!(
        "  trafficPolicy:\n{OUTLIER}    loadBalancer:\n      localityLbSetting:\n        failoverPriority: [tier, site]\n"
    );
    let (_dir, _plane, envoy, addr) = setup(reg, &dr, &[("tier", "gold"), ("site", "a")], port).await;
    wait_served_by(&envoy, addr, "gold", 100).await;
    // `tier` matches, `site` does not: next.
    ups.get("gold").set_failing(true);
    wait_served_by(&envoy, addr, "silver", 50).await;
    // `tier` does not match: last, even though `site` does.
    ups.get("silver").set_failing(true);
    wait_served_by(&envoy, addr, "bronze", 50).await;
    no_nacks(&envoy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn distribute_splits_traffic_by_the_configured_weights() {
    let ups = Upstreams::start(&["local", "zone2", "region2"]).await;
    let port = free_port();
    let reg =
        registry(port, &ups, &[("local", "r1/z1", ""), ("zone2", "r1/z2", ""), ("region2", "r2/z1", "")]);
    let dr = "  trafficPolicy:\n    loadBalancer:\n      localityLbSetting:\n        distribute:\n        \
              - from: r1/z1/*\n          to: {\"r1/z2/*\": 75, \"r2/*\": 25}\n";
    let (_dir, _plane, envoy, addr) = setup(reg, dr, &[], port).await;
    // Wait until the weights are in force (the local zone, which gets no weight, stops serving).
    let mut last = BTreeMap::new();
    wait_for("distribute weights in force", Duration::from_secs(10), async || {
        last = spread(addr, 20).await;
        (!last.contains_key("local")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; last spread {last:?}\n{}", envoy.log_tail(40)));
    let counts = spread(addr, 400).await;
    let share = |k: &str| counts.get(k).copied().unwrap_or(0) as f64 / 400.0;
    // Envoy picks localities by weighted round robin: the shares hold within 5 points.
    assert!((share("zone2") - 0.75).abs() <= 0.05, "r1/z2 share {} of {counts:?}", share("zone2"));
    assert!((share("region2") - 0.25).abs() <= 0.05, "r2 share {} of {counts:?}", share("region2"));
    assert_eq!(share("local"), 0.0, "the local zone has no weight: {counts:?}");
    no_nacks(&envoy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_outlier_detection_localities_are_not_prioritised() {
    let ups = Upstreams::start(&["local", "remote"]).await;
    let port = free_port();
    let reg = registry(port, &ups, &[("local", "r1/z1", ""), ("remote", "r2/z1", "")]);
    // A DestinationRule without outlier detection: Istio applies no failover priorities.
    let dr = "  trafficPolicy:\n    loadBalancer: {simple: ROUND_ROBIN}\n";
    let (_dir, _plane, envoy, addr) = setup(reg, dr, &[], port).await;
    let counts = spread(addr, 40).await;
    assert!(counts.get("remote").copied().unwrap_or(0) > 0, "both localities serve: {counts:?}");
    assert!(counts.get("local").copied().unwrap_or(0) > 0, "both localities serve: {counts:?}");
    no_nacks(&envoy).await;
}
