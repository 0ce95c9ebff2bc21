//! istiod's debug HTTP surface side by side with real istiod (issue 42): istiod (`--configDir`, the
//! pinned build of `scripts/istio-peer.sh`, on the shared kube-apiserver test environment) and an
//! in-process meshpilot plane read the same config directory (an AuthorizationPolicy, a Telemetry in
//! the root namespace, a ServiceEntry); no proxy is connected. Compared:
//!
//! - `/debug/list`: every command istiod lists, meshpilot lists too; meshpilot's extras are its own
//!   paths (`configstatusz`, `objectz`, `proxystatusz`);
//! - the bodies of `/debug/connections`, `/debug/authorizationz` and `/debug/telemetryz` (after
//!   dropping nulls and empties, which Go's `omitempty` and meshpilot write differently), and the field
//!   names of `/debug/pushcontext` and `/debug/resourcesz`;
//! - the statuses of the per-proxy paths without a `proxyID` (400) and with an unknown one (404).
//!
//! A missing istiod build fails the test (naming the script), never skips it.

use std::collections::BTreeSet;

use kube_source::testenv::TestEnv;
use meshpilot_testing::{Plane, http_get};
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

/// (status, body) of `GET path` at `addr`.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    http_get(addr, path, &[]).await.unwrap_or_else(|e| panic!("{path} at {addr}: {e}"))
}

async fn json(addr: std::net::SocketAddr, path: &str) -> Value {
    let (status, body) = get(addr, path).await;
    assert_eq!(status, 200, "{path} at {addr}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path} at {addr}: {e}: {body}"))
}

fn field_names(v: &Value) -> BTreeSet<String> {
    v.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_paths_answer_as_real_istiods() {
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
    let theirs: std::net::SocketAddr = ([127, 0, 0, 1], istiod.base + 80).into();
    let plane = Plane::start(&config).await;
    let ours = plane.http;

    let names = |v: Value| -> BTreeSet<String> {
        v.as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
    };
    let (our_list, their_list) =
        (names(json(ours, "/debug/list").await), names(json(theirs, "/debug/list").await));
    let missing: Vec<_> = their_list.difference(&our_list).collect();
    assert!(missing.is_empty(), "istiod lists {missing:?}, meshpilot does not");
    let extra: BTreeSet<&str> = our_list.difference(&their_list).map(String::as_str).collect();
    assert_eq!(extra, BTreeSet::from(["configstatusz", "objectz", "proxystatusz"]));

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
