//! istiod's debug HTTP surface side by side with real istiod (issue 42): istiod (`--configDir`, the
//! pinned build of `scripts/istio-peer.sh`, on the shared kube-apiserver test environment) and an
//! in-process meshpilot plane read the same config directory (an AuthorizationPolicy, a Telemetry in
//! the root namespace, a ServiceEntry); no proxy is connected. Compared:
//!
//! - `/debug/list`: every command istiod lists, meshpilot lists too; meshpilot's extras are its own
//!   paths (`config_summary`, `configstatusz`, `objectz`, `proxystatusz`);
//! - the bodies of `/debug/connections`, `/debug/authorizationz` and `/debug/telemetryz` (after
//!   dropping nulls and empties, which Go's `omitempty` and meshpilot write differently), and the field
//!   names of `/debug/pushcontext` and `/debug/resourcesz`;
//! - the statuses of the per-proxy paths without a `proxyID` (400) and with an unknown one (404);
//! - with the same proxy connected to both (a sidecar of `shop` on a real ADS stream, CDS and EDS):
//!   `/debug/edsz` (the same assignments and endpoints), `/debug/ecdsz` and `/debug/ndsz` of types it
//!   does not watch (`{}` on both), and the field names of `/debug/connections`, `/debug/syncz`,
//!   `/debug/sidecarz`, `/debug/telemetryz?proxyID=` and `/debug/instancesz`.
//!
//! A missing istiod build fails the test (naming the script), never skips it.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use kube_source::testenv::TestEnv;
use meshpilot_testing::{AckingClient, Plane, http_get, sidecar_node, wait_for};
use serde_json::Value;

use crate::istio_peer::{Istiod, first_difference, normalize};

const CONFIG: &str = "apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-get, namespace: shop}
spec:
  selector: {matchLabels: {app: reviews}}
  rules: [{to: [{operation: {methods: [GET]}}]}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  accessLogging: [{providers: [{name: envoy}]}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews.shop.svc.cluster.local]
  addresses: [10.9.0.1]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.20.0.5}]
";

/// One istiod at a time: `run-istiod.sh` creates `istio-system` if missing, which races.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// (status, body) of `GET path` at `addr`.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    http_get(addr, path, &[]).await.unwrap_or_else(|e| panic!("{path} at {addr}: {e}"))
}

async fn json(addr: std::net::SocketAddr, path: &str) -> Value {
    let (status, body) = get(addr, path).await;
    assert_eq!(status, 200, "{path} at {addr}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path} at {addr}: {e}: {body}"))
}

/// istiod and a meshpilot plane reading one config directory ([`CONFIG`]), one pair at a time.
struct Sides {
    // Dropped in this order: istiod stops before its directory goes and the next test starts.
    istiod: Istiod,
    plane: Plane,
    _work: tempfile::TempDir,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

impl Sides {
    async fn start() -> Sides {
        let serial = SERIAL.lock().await;
        let env = TestEnv::shared_by(file!());
        let work = tempfile::tempdir().unwrap();
        let config = work.path().join("config");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("config.yaml"), CONFIG).unwrap();
        let istiod = Istiod::start(
            &work.path().join("istiod"),
            &env.kubeconfig(),
            &format!("--configDir {}", config.display()),
        );
        let plane = Plane::start(&config).await;
        Sides { istiod, plane, _work: work, _serial: serial }
    }

    /// istiod's HTTP debug address (Istio's 8080).
    fn istiod_http(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.istiod.base + 80).into()
    }
}

fn field_names(v: &Value) -> BTreeSet<String> {
    v.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_paths_answer_as_real_istiods() {
    let sides = Sides::start().await;
    let (ours, theirs) = (sides.plane.http, sides.istiod_http());

    let names = |v: Value| -> BTreeSet<String> {
        v.as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
    };
    let (our_list, their_list) =
        (names(json(ours, "/debug/list").await), names(json(theirs, "/debug/list").await));
    let missing: Vec<_> = their_list.difference(&our_list).collect();
    assert!(missing.is_empty(), "istiod lists {missing:?}, meshpilot does not");
    let extra: BTreeSet<&str> = our_list.difference(&their_list).map(String::as_str).collect();
    assert_eq!(extra, BTreeSet::from(["config_summary", "configstatusz", "objectz", "proxystatusz"]));

    for path in ["/debug/connections", "/debug/authorizationz", "/debug/telemetryz"] {
        let (a, b) = (normalize(json(ours, path).await), normalize(json(theirs, path).await));
        let (a, b) = (a.unwrap_or(Value::Null), b.unwrap_or(Value::Null));
        if let Some(d) = first_difference(&a, &b, path.to_string()) {
            panic!("{d}\nmeshpilot: {a}\nistiod: {b}");
        }
    }
    let (a, b) = (json(ours, "/debug/pushcontext").await, json(theirs, "/debug/pushcontext").await);
    assert_eq!(field_names(&a), field_names(&b), "meshpilot: {a}\nistiod: {b}");
    let (a, b) = (json(ours, "/debug/resourcesz").await, json(theirs, "/debug/resourcesz").await);
    assert_eq!(field_names(&a[0]), field_names(&b[0]), "meshpilot: {a}\nistiod: {b}");

    for path in ["/debug/edsz", "/debug/ndsz", "/debug/sidecarz", "/debug/config_dump"] {
        assert_eq!(get(ours, path).await.0, get(theirs, path).await.0, "{path} without proxyID");
        let unknown = format!("{path}?proxyID=nobody");
        assert_eq!(get(ours, &unknown).await.0, get(theirs, &unknown).await.0, "{unknown}");
    }
}

/// `cluster name → sorted address:port` of the assignments of an `edsz` body.
fn endpoints_of(edsz: &Value) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for cla in edsz["configs"].as_array().into_iter().flatten() {
        let mut addrs: Vec<String> = cla["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|l| l["lbEndpoints"].as_array().into_iter().flatten())
            .map(|e| {
                let s = &e["endpoint"]["address"]["socketAddress"];
                format!("{}:{}", s["address"].as_str().unwrap_or_default(), s["portValue"])
            })
            .collect();
        addrs.sort();
        out.insert(cla["clusterName"].as_str().unwrap_or_default().to_string(), addrs);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_proxy_debug_paths_answer_as_real_istiods() {
    let sides = Sides::start().await;
    let (ours, theirs) = (sides.plane.http, sides.istiod_http());
    let cluster = "outbound|9080||reviews.shop.svc.cluster.local".to_string();
    let subscriptions =
        || vec![(xds::type_url::CLUSTER, Vec::new()), (xds::type_url::ENDPOINT, vec![cluster.clone()])];
    let node = || sidecar_node("client", "shop", "10.20.0.5", &[]);
    let _a = AckingClient::connect(sides.plane.ads.addr, node(), subscriptions()).await.unwrap();
    let _b = AckingClient::connect(sides.istiod.xds(), node(), subscriptions()).await.unwrap();
    for addr in [ours, theirs] {
        wait_for("the proxy's EDS ACKed", Duration::from_secs(30), async || {
            let syncz = json(addr, "/debug/syncz").await;
            let p = syncz.as_array()?.iter().find(|p| p["proxy"] == "client.shop")?.clone();
            (p["endpoint_sent"].is_string() && p["endpoint_sent"] == p["endpoint_acked"]).then_some(())
        })
        .await
        .unwrap();
    }

    let (a, b) = (
        json(ours, "/debug/edsz?proxyID=client.shop").await,
        json(theirs, "/debug/edsz?proxyID=client.shop").await,
    );
    assert_eq!(endpoints_of(&a), endpoints_of(&b), "meshpilot: {a}\nistiod: {b}");
    assert_eq!(endpoints_of(&a)[&cluster], ["10.20.0.5:9080"]);
    assert_eq!(a["configs"][0]["@type"], b["configs"][0]["@type"]);
    for path in ["/debug/ecdsz?proxyID=client.shop", "/debug/ndsz?proxyID=client.shop"] {
        assert_eq!(json(ours, path).await, json(theirs, path).await, "{path}");
    }

    let (a, b) = (json(ours, "/debug/connections").await, json(theirs, "/debug/connections").await);
    assert_eq!(a["totalClients"], b["totalClients"]);
    assert_eq!(field_names(&a["clients"][0]), field_names(&b["clients"][0]), "meshpilot: {a}\nistiod: {b}");
    let entry =
        |v: Value| v.as_array().unwrap().iter().find(|p| p["proxy"] == "client.shop").cloned().unwrap();
    let (a, b) = (entry(json(ours, "/debug/syncz").await), entry(json(theirs, "/debug/syncz").await));
    assert_eq!(field_names(&a), field_names(&b), "meshpilot: {a}\nistiod: {b}");
    for path in
        ["/debug/sidecarz?proxyID=client.shop", "/debug/telemetryz?proxyID=client.shop", "/debug/instancesz"]
    {
        let (a, b) = (json(ours, path).await, json(theirs, path).await);
        assert_eq!(field_names(&a), field_names(&b), "{path}\nmeshpilot: {a}\nistiod: {b}");
    }
}
