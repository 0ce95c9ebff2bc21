//! istiod's debug paths (`meshpilot_http::istiod_debug`) against a small mesh: a plane reading a
//! config directory (ServiceEntries `reviews` in `shop` and `ledger` in `bank`, a Sidecar, a
//! DestinationRule, an AuthorizationPolicy, a Telemetry in the root namespace) and two ADS clients on
//! real gRPC streams — `client.shop` (CDS wildcard, EDS for `reviews`, NDS with `DNS_CAPTURE`, its
//! instance IP the `reviews` WorkloadEntry's) and `teller.bank` (EDS for `ledger`). Each path's JSON
//! has the fields istiod's handler writes; a caller of `shop` reads only `shop`'s proxies through the
//! namespace paths; the paths meshpilot cannot have answer 501 with a reason.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use meshpilot_http::{access::Grant, istiod_debug, serve::serve as serve_http};
use meshpilot_testing::{AckingClient, Plane, free_port, http_get, sidecar_node, wait_for};
use serde_json::{Value, json};
use xds::type_url;

use crate::endpoints::{Reviewer, debug_state, get_from};

/// The IP of the `reviews` WorkloadEntry, and `client.shop`'s instance IP.
const REVIEWS_IP: &str = "10.20.0.5";

fn mesh_yaml(port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: reviews, namespace: shop}}
spec:
  hosts: [reviews.shop.svc.cluster.local]
  addresses: [10.9.0.1]
  location: MESH_INTERNAL
  ports: [{{number: {port}, name: http, protocol: HTTP}}]
  resolution: STATIC
  workloadSelector: {{labels: {{app: reviews}}}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: reviews, namespace: shop}}
spec: {{address: {REVIEWS_IP}, labels: {{app: reviews}}}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: ledger, namespace: bank}}
spec:
  hosts: [ledger.bank.svc.cluster.local]
  addresses: [10.9.0.2]
  location: MESH_INTERNAL
  ports: [{{number: {port}, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: 10.30.0.7}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: reviews, namespace: shop}}
spec: {{host: reviews.shop.svc.cluster.local, trafficPolicy: {{connectionPool: {{tcp: {{maxConnections: 7}}}}}}}}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: shop}}
spec:
  egress: [{{hosts: ['./*', 'bank/*']}}]
  outboundTrafficPolicy: {{mode: REGISTRY_ONLY}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: allow-get, namespace: shop, annotations: {{team: storefront}}}}
spec:
  selector: {{matchLabels: {{app: reviews}}}}
  rules: [{{to: [{{operation: {{methods: [GET]}}}}]}}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {{name: mesh-default, namespace: istio-system}}
spec:
  accessLogging: [{{providers: [{{name: envoy}}]}}]
"
    )
}

/// A proxy of the mesh on a real ADS stream.
async fn connect(
    ads: SocketAddr,
    name: &str,
    ns: &str,
    ip: &str,
    extra: &[(&str, &str)],
    subscriptions: Vec<(&'static str, Vec<String>)>,
) -> AckingClient {
    AckingClient::connect(ads, sidecar_node(name, ns, ip, extra), subscriptions).await.unwrap()
}

/// `GET path` on the plane's debug port (loopback: every handler): (status, body).
async fn get(plane: &Plane, path: &str) -> (u16, String) {
    http_get(plane.http, path, &[]).await.unwrap()
}

/// `GET path` as JSON, which must be a 200.
async fn json_of(plane: &Plane, path: &str) -> Value {
    let (status, body) = get(plane, path).await;
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// The keys of a JSON object, sorted.
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> =
        v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect();
    k.sort();
    k
}

/// The mesh with both clients connected and every type they watch ACKed.
struct Mesh {
    _dir: tempfile::TempDir,
    plane: Plane,
    port: u16,
    shop: AckingClient,
    _bank: AckingClient,
}

fn reviews_cluster(port: u16) -> String {
    format!("outbound|{port}||reviews.shop.svc.cluster.local")
}

async fn mesh() -> Mesh {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(dir.path().join("mesh.yaml"), mesh_yaml(port)).unwrap();
    let plane = Plane::start(dir.path()).await;
    let shop = connect(
        plane.ads.addr,
        "client",
        "shop",
        REVIEWS_IP,
        &[("DNS_CAPTURE", "true")],
        vec![
            (type_url::CLUSTER, Vec::new()),
            (type_url::ENDPOINT, vec![reviews_cluster(port)]),
            (type_url::NAME_TABLE, Vec::new()),
        ],
    )
    .await;
    let bank = connect(
        plane.ads.addr,
        "teller",
        "bank",
        "10.30.0.9",
        &[],
        vec![(type_url::ENDPOINT, vec![format!("outbound|{port}||ledger.bank.svc.cluster.local")])],
    )
    .await;
    wait_for("both clients ACKed every type they watch", Duration::from_secs(20), async || {
        let (_, body) = get(&plane, "/debug/syncz").await;
        let syncz: Value = serde_json::from_str(&body).ok()?;
        let acked = |proxy: &str, types: &[&str]| {
            syncz.as_array()?.iter().find(|p| p["proxy"] == proxy).map(|p| {
                types.iter().all(|t| {
                    let r = &p["resources"][*t];
                    r["sent"].is_string() && r["sent"] == r["acked"]
                })
            })
        };
        (acked("client.shop", &[type_url::CLUSTER, type_url::ENDPOINT, type_url::NAME_TABLE])?
            && acked("teller.bank", &[type_url::ENDPOINT])?)
        .then_some(())
    })
    .await
    .unwrap();
    Mesh { _dir: dir, plane, port, shop, _bank: bank }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn istiods_debug_paths_answer_with_istiods_shapes() {
    let m = mesh().await;
    let p = &m.plane;

    // /debug/list: istiod's command names, sorted, without list, pprof, or the unsafe force_disconnect.
    let list = json_of(p, "/debug/list").await;
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    for n in [
        "adsz?push=true",
        "cachez?sizes=true",
        "cachez?clear=true",
        "edsz",
        "ndsz",
        "ecdsz",
        "endpointShardz",
        "connections",
        "sidecarz",
        "inject",
        "config_dump",
        "syncz",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    assert!(
        !names.iter().any(|n| *n == "list" || n.contains("pprof") || *n == "force_disconnect"),
        "{names:?}"
    );

    // /debug/connections: istiod's AdsClient with only id, time and address.
    let conns = json_of(p, "/debug/connections").await;
    assert_eq!(conns["totalClients"], 2, "{conns}");
    for c in conns["clients"].as_array().unwrap() {
        assert_eq!(keys(c), ["address", "connectedAt", "connectionId"], "{c}");
    }

    // /debug/edsz: the ClusterLoadAssignment of the watched cluster, in the proto3 JSON mapping.
    let eds = json_of(p, "/debug/edsz?proxyID=client.shop").await;
    assert_eq!(keys(&eds), ["configs"], "{eds}");
    let cla = &eds["configs"][0];
    assert_eq!(cla["@type"], "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment");
    assert_eq!(cla["clusterName"], reviews_cluster(m.port));
    let address = &cla["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"]["socketAddress"];
    assert_eq!(address["address"], REVIEWS_IP, "{cla}");
    assert_eq!(address["portValue"], m.port, "{cla}");
    // Not watched by the proxy: istiod skips the type, an empty ConfigDump.
    assert_eq!(json_of(p, "/debug/ecdsz?proxyID=client.shop").await, json!({}));
    assert_eq!(json_of(p, "/debug/ndsz?proxyID=teller.bank").await, json!({}));

    // /debug/ndsz: the proxy's name table (DNS_CAPTURE): the ServiceEntry's address; the other
    // namespace's service is imported by the Sidecar.
    let nds = json_of(p, "/debug/ndsz?proxyID=client.shop").await;
    let table = &nds["configs"][0];
    assert_eq!(table["@type"], "type.googleapis.com/istio.networking.nds.v1.NameTable", "{nds}");
    assert_eq!(table["table"]["reviews.shop.svc.cluster.local"]["ips"], json!(["10.9.0.1"]), "{nds}");
    assert_eq!(table["table"]["ledger.bank.svc.cluster.local"]["ips"], json!(["10.9.0.2"]), "{nds}");

    // /debug/sidecarz: istiod's SidecarScope JSON.
    let sc = json_of(p, "/debug/sidecarz?proxyID=client.shop").await;
    assert_eq!(
        keys(&sc),
        [
            "destinationRules",
            "egressListenerServices",
            "name",
            "namespace",
            "outboundTrafficPolicy",
            "services",
            "servicesByHostname",
            "sidecar",
            "version"
        ]
    );
    assert_eq!((sc["name"].as_str(), sc["namespace"].as_str()), (Some("default"), Some("shop")));
    assert_eq!(sc["outboundTrafficPolicy"], json!({}), "REGISTRY_ONLY is protojson's zero enum");
    assert_eq!(sc["sidecar"]["egress"][0]["hosts"], json!(["./*", "bank/*"]), "{sc}");
    let hosts: Vec<&str> =
        sc["services"].as_array().unwrap().iter().map(|s| s["hostname"].as_str().unwrap()).collect();
    assert!(
        hosts.contains(&"reviews.shop.svc.cluster.local") && hosts.contains(&"ledger.bank.svc.cluster.local"),
        "{hosts:?}"
    );
    assert_eq!(
        sc["destinationRules"]["reviews.shop.svc.cluster.local"],
        json!([{"name": "reviews", "namespace": "shop"}])
    );
    assert_eq!(
        sc["servicesByHostname"]["ledger.bank.svc.cluster.local"][0]["hostname"],
        "ledger.bank.svc.cluster.local"
    );

    // /debug/instancesz: client.shop's IP is the reviews WorkloadEntry's.
    let inst = json_of(p, "/debug/instancesz").await;
    let target = &inst["client.shop"][0];
    assert_eq!(target["Service"]["hostname"], "reviews.shop.svc.cluster.local", "{inst}");
    assert_eq!(
        target["Port"],
        json!({"name": "http", "port": m.port, "protocol": "HTTP", "TargetPort": m.port})
    );
    assert_eq!(inst["teller.bank"], json!([]));

    // /debug/resourcesz: the store's kinds as istiod's GroupVersionKind.
    let kinds = json_of(p, "/debug/resourcesz").await;
    assert!(
        kinds.as_array().unwrap().iter().any(|k| k["kind"] == "VirtualService"
            && k["group"] == "networking.istio.io"
            && k["version"].is_string()),
        "{kinds}"
    );

    // /debug/authorizationz and /debug/pushcontext: istiod's AuthorizationPolicies.
    let authz = json_of(p, "/debug/authorizationz").await;
    let policies = &authz["authorization_policies"];
    assert_eq!(policies["root_namespace"], "istio-system");
    let policy = &policies["namespace_to_policies"]["shop"][0];
    assert_eq!(keys(policy), ["annotations", "name", "namespace", "spec"]);
    assert_eq!(policy["annotations"], json!({"team": "storefront"}));
    assert_eq!(policy["spec"]["rules"][0]["to"][0]["operation"]["methods"], json!(["GET"]), "{policy}");
    let pc = json_of(p, "/debug/pushcontext").await;
    assert_eq!(pc["AuthorizationPolicies"], *policies);
    assert_eq!((pc["NetworkGateways"].clone(), pc["UnresolvedGateways"].clone()), (Value::Null, Value::Null));

    // /debug/telemetryz: by namespace, and as computed for one proxy.
    let tel = json_of(p, "/debug/telemetryz").await;
    assert_eq!(
        tel["telemetries"]["namespace_to_telemetries"]["istio-system"][0]["name"], "mesh-default",
        "{tel}"
    );
    let computed = json_of(p, "/debug/telemetryz?proxyID=client.shop").await;
    assert_eq!(computed["Root"], json!({"Namespace": "istio-system", "Name": "mesh-default"}), "{computed}");
    assert_eq!(computed["Proxy"], json!({"Namespace": "", "Name": ""}));
    assert_eq!(computed["Logging"][0]["Logging"], json!([{"providers": [{"name": "envoy"}]}]), "{computed}");

    // /debug/endpointShardz and its alias.
    let shards = json_of(p, "/debug/endpointShardz").await;
    assert_eq!(shards, json_of(p, "/debug/endpointz").await);
    assert!(shards["reviews.shop.svc.cluster.local"]["shop"]["Shards"].is_object(), "{shards}");
    let clusters = json_of(p, "/debug/clusterz").await;
    for c in clusters.as_array().unwrap() {
        assert_eq!(keys(c), ["id", "secretName", "syncStatus"]);
        assert_eq!(c["syncStatus"], "synced");
    }
    assert!(json_of(p, "/debug/push_status").await.is_object());

    // /debug/cachez: what generation cached, by type; sizes in istiod's ByteCount; clear empties it.
    let cache = json_of(p, "/debug/cachez").await;
    let assignments = cache["type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(assignments.contains(&json!(reviews_cluster(m.port))), "{cache}");
    let sizes = json_of(p, "/debug/cachez?sizes=true").await;
    let total = sizes["total"].as_str().unwrap();
    assert!(total.ends_with('B') && total != "0B", "{sizes}");
    assert_eq!(get(p, "/debug/cachez?clear=true").await, (200, "Cache cleared\n".to_string()));
    assert!(json_of(p, "/debug/cachez").await[type_url::ENDPOINT].is_null(), "assignments left after clear");

    // No injector in this plane: 404, as istiod without a webhook.
    assert_eq!(get(p, "/debug/inject").await.0, 404);
    // Not registered without UNSAFE_ENABLE_ADMIN_ENDPOINTS.
    assert_eq!(get(p, "/debug/force_disconnect?proxyID=client.shop").await.0, 404);
    assert_eq!(get(p, "/debug/nothing-here").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_meshpilot_cannot_have_is_a_501_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let plane = Plane::start(dir.path()).await;
    for (path, words) in [
        ("/debug/pprof/", "Go runtime"),
        ("/debug/pprof/heap", "Go runtime"),
        ("/debug/ambientz", "ambient"),
        ("/debug/krtz", "krt"),
        ("/debug/mcsz", "multi-cluster services"),
    ] {
        let (status, body) = get(&plane, path).await;
        assert_eq!(status, 501, "{path}: {body}");
        assert!(body.contains(words), "{path}: {body}");
    }
    // No mesh networks, no gateway Service: no gateway, istiod's nil list.
    let (status, body) = get(&plane, "/debug/networkz").await;
    assert_eq!((status, body.trim()), (200, "null"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_callers_read_only_their_own_proxies_typed_dumps() {
    let m = mesh().await;
    let access = meshpilot_http::access::DebugAccess {
        authenticator: Some(Arc::new(security::Authenticator::new(
            "cluster.local",
            vec!["istio-ca".into()],
            Some(Arc::new(Reviewer)),
        ))),
        ..Default::default()
    };
    let state = debug_state(&m.plane.server, access, Vec::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_http(
        listener,
        meshpilot_http::debug_router(state.clone()),
        meshpilot_http::serve::HEADER_READ_TIMEOUT,
        std::future::pending(),
    ));
    let remote: std::net::IpAddr = [127, 0, 0, 2].into();
    let shop = |path: &'static str| get_from(addr, path, Some(remote), Some("shop-token"));

    let (status, _, body) = shop("/debug/edsz?proxyID=client.shop").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&reviews_cluster(m.port)), "{body}");
    assert_eq!(shop("/debug/ndsz?proxyID=client.shop").await.0, 200);
    for path in [
        "/debug/edsz?proxyID=teller.bank",
        "/debug/ndsz?proxyID=teller.bank",
        "/debug/config_dump?proxyID=teller.bank",
    ] {
        assert_eq!(shop(path).await.0, 403, "{path}");
    }
    for path in [
        "/debug/ecdsz?proxyID=client.shop",
        "/debug/sidecarz?proxyID=client.shop",
        "/debug/list",
        "/debug/cachez?clear=true",
        "/debug/telemetryz",
    ] {
        assert_eq!(shop(path).await.0, 403, "{path}");
    }
    let (status, _, body) =
        get_from(addr, "/debug/edsz?proxyID=teller.bank", Some(remote), Some("istiod-token")).await;
    assert_eq!(status, 200, "the system namespace reads every proxy: {body}");

    // The dispatcher applies the same rule without the HTTP guard (debug over xDS calls it).
    let grant = Grant::Namespaces(vec!["shop".into()]);
    let (status, body) = istiod_debug::serve_debug_path(&state, "/debug/edsz?proxyID=client.shop", &grant);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(istiod_debug::serve_debug_path(&state, "/debug/edsz?proxyID=teller.bank", &grant).0, 403);
    assert_eq!(istiod_debug::serve_debug_path(&state, "/debug/cachez?clear=true", &grant).0, 403);
    let (status, body) = istiod_debug::serve_debug_path(&state, "/debug/list", &Grant::All);
    assert_eq!(
        (status.as_u16(), serde_json::from_slice::<Value>(&body).unwrap()),
        (200, json_of(&m.plane, "/debug/list").await)
    );

    // Bounds: a long proxyID, a long path.
    let long_id = format!("/debug/edsz?proxyID={}", "a".repeat(istiod_debug::MAX_PROXY_ID + 1));
    assert_eq!(istiod_debug::serve_debug_path(&state, &long_id, &Grant::All).0, 400);
    let long_path = format!("/debug/syncz?x={}", "a".repeat(istiod_debug::MAX_PATH_AND_QUERY));
    assert_eq!(istiod_debug::serve_debug_path(&state, &long_path, &Grant::All).0, 414);
    assert_eq!(istiod_debug::serve_debug_path(&state, "/debug/edsz", &Grant::All).0, 400, "no proxyID");
    assert_eq!(istiod_debug::serve_debug_path(&state, "/debug/edsz?proxyID=nobody", &Grant::All).0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_disconnect_ends_the_stream_only_when_unsafe_admin_endpoints_are_on() {
    let m = mesh().await;
    let access = meshpilot_http::access::DebugAccess { unsafe_admin_endpoints: true, ..Default::default() };
    let state = debug_state(&m.plane.server, access, Vec::new());
    let list = istiod_debug::list(&state);
    assert!(list.as_array().unwrap().contains(&json!("force_disconnect")), "{list}");
    let (status, body) =
        istiod_debug::serve_debug_path(&state, "/debug/force_disconnect?proxyID=client.shop", &Grant::All);
    assert_eq!((status.as_u16(), body.as_slice()), (200, b"OK".as_slice()));
    tokio::time::timeout(Duration::from_secs(20), m.shop.ended)
        .await
        .expect("the stream did not end")
        .unwrap();
    // The client does not reconnect: once the server has dropped the stream, nothing matches.
    wait_for("client.shop to leave the registry", Duration::from_secs(20), async || {
        let (status, _) = istiod_debug::serve_debug_path(
            &state,
            "/debug/force_disconnect?proxyID=client.shop",
            &Grant::All,
        );
        (status.as_u16() == 404).then_some(())
    })
    .await
    .unwrap();
}
