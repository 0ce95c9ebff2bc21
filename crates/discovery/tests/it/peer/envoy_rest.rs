//! Polling discovery (REST-JSON xDS, issue 45) with a real Envoy: a sidecar whose bootstrap has no
//! ADS, only `api_type: REST` config sources for CDS and LDS (refresh 200 ms) pointing at the plane's
//! HTTP port, reaches a loopback upstream through meshpilot's config, follows config changes, gets a
//! route Envoy would reject dropped (and reported) instead of rejecting the table, and ends up with the
//! same config as an ADS sidecar of the same mesh. The HTTP semantics (304, 400, 403, 413) are checked
//! with a plain HTTP/1.1 client. Needs Envoy (scripts/install-envoy.sh).

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::{AdsApi, EchoServer, Envoy, Plane, free_port, get, http_get, wait_for, write_atomic};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{NS, echo_registry};

/// The echo upstream, its ServiceEntry on `port`, a plane and (for most tests) a REST sidecar.
struct Setup {
    dir: tempfile::TempDir,
    plane: Plane,
    /// The sidecar's listener for the echo service.
    addr: SocketAddr,
    _echo: EchoServer,
}

async fn setup() -> Setup {
    let echo = EchoServer::start("echo").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(dir.path().join("echo-registry.yaml"), echo_registry(port, echo.addr.port())).unwrap();
    let plane = Plane::start(dir.path()).await;
    Setup { dir, plane, addr: ([127, 0, 0, 1], port).into(), _echo: echo }
}

impl Setup {
    fn host(&self) -> String {
        format!("echo:{}", self.addr.port())
    }

    /// Waits (20 s) until `path` through the sidecar answers `status`.
    async fn wait_status(&self, envoy: &Envoy, path: &str, status: u16) {
        let host = self.host();
        let mut last = None;
        let r = wait_for(&format!("{path} answered {status}"), Duration::from_secs(20), async || {
            let r = get(self.addr, &host, path, &[]).await.ok();
            let hit = r.as_ref().is_some_and(|(s, _)| *s == status);
            last = r;
            hit.then_some(())
        })
        .await;
        if let Err(e) = r {
            panic!("{e}; last answer {last:?}\n{}", envoy.log_tail(60));
        }
    }

    fn write_vs(&self, http: &str) {
        let vs = format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: echo, namespace: {NS}}}\n\
             spec:\n  hosts: [echo]\n  http:\n{http}"
        );
        write_atomic(self.dir.path(), "echo-vs.yaml", &vs);
    }

    async fn debug(&self, path: &str) -> Value {
        let (status, body) = http_get(self.plane.http, path, &[]).await.unwrap();
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

const FAULT_418: &str = "  - fault: {abort: {httpStatus: 418, percentage: {value: 100}}}\n    \
                         route: [{destination: {host: echo}}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rest_envoy_routes_follows_changes_and_shows_as_polling() {
    let s = setup().await;
    let envoy = Envoy::start(&s.plane.rest_sidecar("client", NS)).await.unwrap();
    // CDS and LDS over REST, the listener's RDS and the cluster's EDS over the REST sources meshpilot
    // wrote into them: the request reaches the upstream.
    s.wait_status(&envoy, "/hello", 200).await;
    let (_, body) = get(s.addr, &s.host(), "/hello", &[]).await.unwrap();
    assert!(body.starts_with("echo"), "{body}");
    let dump = envoy.config_dump(false).await.unwrap().to_string();
    assert!(!dump.contains(r#""ads":{}"#), "an ADS config source reached a REST-only Envoy");
    assert!(dump.contains(r#""api_type":"REST""#), "{dump}");

    // A change reaches it: a VirtualService aborting with 418 (a new RDS version).
    s.write_vs(FAULT_418);
    s.wait_status(&envoy, "/hello", 418).await;
    envoy.assert_no_rejected_updates().await;

    // Listed as a polling proxy, in sync for CDS and LDS once its next polls carried the versions sent.
    let status = wait_for("the REST proxy SYNCED in proxystatusz", Duration::from_secs(10), async || {
        let v = s.debug("/debug/proxystatusz").await;
        let p = v["proxies"].as_array()?.iter().find(|p| p["protocol"] == "rest")?.clone();
        let synced = |t: &str| p["types"][t]["configStatus"] == "SYNCED";
        (synced(xds::type_url::CLUSTER) && synced(xds::type_url::LISTENER) && synced(xds::type_url::ROUTE))
            .then_some(p)
    })
    .await
    .unwrap();
    assert_eq!(status["proxy"], "client.default");
    assert_eq!(status["polling"], true);
    assert!(status["lastPoll"].is_string(), "{status}");
    assert!(status["connectionId"].as_str().unwrap().ends_with("-rest"), "{status}");
    let syncz = s.debug("/debug/syncz").await;
    assert!(syncz.as_array().unwrap().iter().any(|p| p["proxy"] == "client.default"), "{syncz}");
    let (_, page) = http_get(s.plane.http, "/", &[]).await.unwrap();
    assert!(page.contains("data-polling=\"true\""), "the status page does not mark the polling proxy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_route_envoy_would_reject_is_dropped_and_reported() {
    let s = setup().await;
    // Three weights of i32::MAX: valid Istio config, but the sum exceeds what Envoy accepts (u32).
    s.write_vs(&format!(
        "  - match: [{{uri: {{prefix: /heavy}}}}]\n    route:\n    \
         - {{destination: {{host: echo}}, weight: 2147483647}}\n    \
         - {{destination: {{host: echo}}, weight: 2147483647}}\n    \
         - {{destination: {{host: echo}}, weight: 2147483647}}\n{FAULT_418}"
    ));
    let envoy = Envoy::start(&s.plane.rest_sidecar("client", NS)).await.unwrap();
    // The rest of the table is in force: /heavy falls through to the 418 route.
    s.wait_status(&envoy, "/heavy", 418).await;
    envoy.assert_no_rejected_updates().await;
    let status = s.debug("/debug/configstatusz").await;
    let findings = status["generationFindings"].as_array().unwrap();
    let f = findings
        .iter()
        .find(|f| f["path"] == "spec.http[0].route")
        .unwrap_or_else(|| panic!("no finding for the dropped route: {findings:?}"));
    assert!(f["message"].as_str().unwrap().contains("exceeds"), "{f}");
    assert!(f["proxies"].to_string().contains("client.default"), "{f}");
    // `meshpilot status virtualservice/NS/echo` reads this: the dropped part, and the polling proxy
    // marked as one that cannot ACK or NACK.
    let object = s.debug(&format!("/debug/objectz?kind=VirtualService&namespace={NS}&name=echo")).await;
    let dropped = object["findings"].as_array().unwrap();
    assert!(
        dropped.iter().any(|f| f["severity"] == "dropped"
            && f["path"] == "spec.http[0].route"
            && f["proxies"].to_string().contains("client.default")),
        "objectz has no finding for the dropped route: {object}"
    );
    let proxy = object["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["proxy"].as_str().unwrap().contains("client.default"))
        .unwrap_or_else(|| panic!("the polling proxy is not among the concerned proxies: {object}"));
    assert_eq!(proxy["polling"], true, "{proxy}");
}

/// `METHOD path` with `body` and `Host: host` on a fresh HTTP/1.1 connection: (status, body).
async fn post(addr: SocketAddr, path: &str, host: &str, body: &[u8]) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // A body over the limit may be refused before it is all read.
    let _ = s.write_all(body).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

fn request(version: &str, resource_names: &[&str]) -> Vec<u8> {
    json!({
        "versionInfo": version,
        "node": {"id": "sidecar~127.0.0.1~curl.default~default.svc.cluster.local", "cluster": "curl.default",
                 "metadata": {"NAMESPACE": "default", "INSTANCE_IPS": "127.0.0.1", "INTERCEPTION_MODE": "NONE",
                              "ISTIO_VERSION": "1.28.0", "LABELS": {"app": "curl"}},
                 "userAgentName": "envoy"},
        "resourceNames": resource_names,
    })
    .to_string()
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_semantics_of_the_rest_endpoints() {
    let s = setup().await;
    let http = s.plane.http;
    // 200: every resource with its @type; the Host header names the cluster of the REST sources.
    let (status, body) = post(http, "/v3/discovery:listeners", "my-xds", &request("", &[])).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let version = v["versionInfo"].as_str().unwrap().to_string();
    assert!(!version.is_empty());
    assert_eq!(v["typeUrl"], xds::type_url::LISTENER);
    let resources = v["resources"].as_array().unwrap();
    assert!(!resources.is_empty());
    assert!(resources.iter().all(|r| r["@type"] == xds::type_url::LISTENER), "{body}");
    assert!(!body.contains(r#""ads":{}"#), "{body}");
    assert!(body.contains(r#""clusterNames":["my-xds"]"#), "{body}");
    // 304 for the current version, 200 for an older one.
    let (status, body) = post(http, "/v3/discovery:listeners", "my-xds", &request(&version, &[])).await;
    assert_eq!((status, body.as_str()), (304, ""));
    let (status, _) = post(http, "/v3/discovery:clusters", "my-xds", &request("0/old", &[])).await;
    assert_eq!(status, 200);
    // RDS honours the names.
    let port = s.addr.port().to_string();
    let (status, body) = post(http, "/v3/discovery:routes", "my-xds", &request("", &[&port])).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> =
        v["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, [port.as_str()]);
    // 400: not JSON, a wrong type, no node.
    let (status, body) = post(http, "/v3/discovery:clusters", "x", b"{\"versionInfo\": 3}").await;
    assert_eq!(status, 400);
    assert!(body.contains("malformed DiscoveryRequest JSON"), "{body}");
    let wrong =
        json!({"typeUrl": xds::type_url::ROUTE, "node": {"id": "sidecar~1.1.1.1~a.b~b.svc.cluster.local"}});
    let (status, body) = post(http, "/v3/discovery:clusters", "x", wrong.to_string().as_bytes()).await;
    assert_eq!(status, 400);
    assert!(body.contains("which serves"), "{body}");
    let (status, body) = post(http, "/v3/discovery:clusters", "x", b"{}").await;
    assert_eq!(status, 400);
    assert!(body.contains("missing node"), "{body}");
    // 403: no secret over plain HTTP.
    let (status, body) =
        post(http, "/v3/discovery:secrets", "x", &request("", &["file-root:/etc/ca.pem"])).await;
    assert_eq!(status, 403);
    assert!(body.contains("no identity"), "{body}");
    // 413: over the body limit.
    let big = vec![b' '; meshpilot_discovery::rest::MAX_REQUEST_BYTES + 1];
    let (status, _) = post(http, "/v3/discovery:clusters", "x", &big).await;
    assert_eq!(status, 413);
    // The curl "proxy" is listed as polling.
    let v = s.debug("/debug/proxystatusz").await;
    assert!(
        v["proxies"].as_array().unwrap().iter().any(|p| p["proxy"] == "curl.default" && p["polling"] == true),
        "{v}"
    );
}

/// Replaces every config source (`ads: {}`, or a REST `api_config_source`) with a placeholder, and
/// drops versions and update times: what may differ between an ADS and a REST Envoy.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let rest = map.get("api_config_source").is_some_and(|a| a["api_type"] == "REST");
            if map.remove("ads").is_some() || (rest && map.remove("api_config_source").is_some()) {
                map.insert("config_source".into(), json!("xds"));
            }
            map.remove("version_info");
            map.remove("last_updated");
            map.values_mut().for_each(normalize);
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// The dynamic clusters, listeners and route configurations of `envoy`, normalized, sorted by name.
async fn dynamic_config(envoy: &Envoy) -> Option<Value> {
    let dump = envoy.config_dump(false).await.ok()?;
    let mut out = serde_json::Map::new();
    for (key, list, inner) in [
        ("clusters", "dynamic_active_clusters", "/cluster"),
        ("listeners", "dynamic_listeners", "/active_state/listener"),
        ("routes", "dynamic_route_configs", "/route_config"),
    ] {
        let mut items: Vec<Value> = dump["configs"]
            .as_array()?
            .iter()
            .filter_map(|c| c.get(list))
            .flat_map(|l| l.as_array().cloned().unwrap_or_default())
            .filter_map(|i| i.pointer(inner).cloned())
            .collect();
        items.iter_mut().for_each(normalize);
        items.sort_by_key(|i| i["name"].as_str().unwrap_or_default().to_string());
        out.insert(key.into(), Value::Array(items));
    }
    Some(Value::Object(out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ads_and_rest_envoys_get_the_same_config() {
    let s = setup().await;
    s.write_vs(FAULT_418);
    let ads = Envoy::start(&s.plane.sidecar("client", NS, AdsApi::Sotw)).await.unwrap();
    let rest = Envoy::start(&s.plane.rest_sidecar("client", NS)).await.unwrap();
    s.wait_status(&rest, "/x", 418).await;
    // Both converge on the same mesh config; only the config sources (normalized) may differ.
    let mut last = None;
    let same = wait_for("the same dynamic config on both", Duration::from_secs(20), async || {
        let (a, r) = (dynamic_config(&ads).await?, dynamic_config(&rest).await?);
        let equal = a == r && !a["routes"].as_array()?.is_empty();
        last = Some((a, r));
        equal.then_some(())
    })
    .await;
    if let Err(e) = same {
        let (a, r) = last.unwrap_or_default();
        panic!("{e}\nADS: {a:#}\nREST: {r:#}");
    }
    rest.assert_no_rejected_updates().await;
}

/// Polls are answered on blocking threads, a bounded number at once: over the bound a poll is `503`
/// with `Retry-After` (here a router allowing none), not queued on the async workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_over_the_concurrency_bound_are_503_with_retry_after() {
    let s = setup().await;
    let rest = std::sync::Arc::new(s.plane.server.rest_xds(sds::FileSecrets::disabled()));
    let router = meshpilot_http::rest::rest_router_with(rest, 0);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server =
        tokio::spawn(meshpilot_http::serve::serve(listener, router, Duration::from_secs(5), async {
            let _ = stopped.await;
        }));
    let (status, body) = post(addr, "/v3/discovery:clusters", "x", &request("", &[])).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("poll again"), "{body}");
    // The plane's own router (the default bound) answers the same poll.
    let (status, body) = post(s.plane.http, "/v3/discovery:clusters", "x", &request("", &[])).await;
    assert_eq!(status, 200, "{body}");
    let _ = stop.send(());
    let _ = server.await;
}
