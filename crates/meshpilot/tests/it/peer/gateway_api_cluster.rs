//! Gateway API from the Kubernetes API server, end to end (issue 17): a real kube-apiserver with the
//! Gateway API CRDs, the real `meshpilot discovery --kubeconfig` binary, and a real Envoy router.
//!
//! A Gateway of class `istio` (its Service `gw-istio` deployed by meshpilot's gateway deployment
//! controller) admits routes from namespaces labelled `gw-access: "yes"` (so the converter must see
//! the cluster's namespace labels); two HTTPRoutes are applied with kubectl. Through the router
//! (`router~` node whose IP is a pod of `gw-istio`, so an instance of that Service): path and header
//! matches, weights 0/100 then (after a route edit, live) 100/0, a request-header filter; a route
//! whose backend does not exist answers 500 while the other keeps working. Status read back from the
//! API server: GatewayClass Accepted; Gateway Accepted/Programmed, the listener's attachedRoutes, the
//! gateway Service's load-balancer address in `status.addresses`; routes' `parents[]` Accepted /
//! ResolvedRefs (BackendNotFound) at the current `observedGeneration`, `lastTransitionTime` kept
//! across an edit; written by the holder of `istio-gateway-status-leader-default`; a later change
//! that alters no status of the existing objects writes none of them (their resourceVersions stay).
//!
//! Needs Envoy (scripts/install-envoy.sh) and the test environment (scripts/kube-testenv.sh build).

use std::{
    net::{IpAddr, SocketAddr},
    process::{Child, Command, Stdio},
    time::Duration,
};

use kube_source::testenv::TestEnv;
use meshpilot_testing::{
    AdsApi, Bootstrap, EchoOptions, EchoServer, Envoy, free_port, http::request, wait_for,
};
use serde_json::{Value, json};

/// The Gateway's namespace (also where the leases live).
const GW_NS: &str = "gwapi-e2e";
/// The routes' and backends' namespace (labelled to be admitted).
const APPS: &str = "gwapi-apps";

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A non-loopback IPv4 address of this machine (the API server refuses loopback endpoints).
fn host_ip() -> std::net::Ipv4Addr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
    socket.connect("198.51.100.1:9").expect("a default route");
    match socket.local_addr().expect("local address").ip() {
        IpAddr::V4(ip) if !ip.is_loopback() => ip,
        other => panic!("no non-loopback IPv4 address (got {other})"),
    }
}

/// A Service `name` in APPS on port 8080 with an EndpointSlice pointing at `echo`.
fn backend(name: &str, echo: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {APPS}}}\n\
         spec:\n  ports: [{{name: http, port: 8080, targetPort: http}}]\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}, namespace: {APPS}, \
         labels: {{kubernetes.io/service-name: {name}}}}}\naddressType: IPv4\n\
         ports: [{{name: http, port: {}}}]\nendpoints: [{{addresses: [\"{}\"], conditions: {{ready: true}}}}]\n---\n",
        echo.port(),
        echo.ip()
    )
}

fn gateway(port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {GW_NS}}}\n\
         spec:\n  gatewayClassName: istio\n  listeners:\n  - name: http\n    port: {port}\n    protocol: HTTP\n    \
         allowedRoutes:\n      namespaces:\n        from: Selector\n        selector: {{matchLabels: {{gw-access: \"yes\"}}}}\n"
    )
}

/// The shop route; `weights` of v1 and v2 on `/weighted`.
fn shop(weights: (u32, u32)) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: shop, namespace: {APPS}}}\n\
         spec:\n  parentRefs: [{{name: gw, namespace: {GW_NS}}}]\n  hostnames: [shop.example.com]\n  rules:\n  \
         - matches: [{{path: {{type: PathPrefix, value: /v2}}}}]\n    backendRefs: [{{name: v2, port: 8080}}]\n  \
         - matches: [{{headers: [{{name: x-version, value: v2}}]}}]\n    backendRefs: [{{name: v2, port: 8080}}]\n  \
         - matches: [{{path: {{type: Exact, value: /weighted}}}}]\n    backendRefs:\n    \
         - {{name: v1, port: 8080, weight: {}}}\n    - {{name: v2, port: 8080, weight: {}}}\n  \
         - matches: [{{path: {{type: PathPrefix, value: /headers}}}}]\n    filters:\n    - type: RequestHeaderModifier\n      \
         requestHeaderModifier: {{set: [{{name: x-added, value: by-route}}]}}\n    backendRefs: [{{name: v1, port: 8080}}]\n  \
         - backendRefs: [{{name: v1, port: 8080}}]\n",
        weights.0, weights.1
    )
}

fn route(name: &str, host: &str, backend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {APPS}}}\n\
         spec:\n  parentRefs: [{{name: gw, namespace: {GW_NS}}}]\n  hostnames: [{host}]\n  rules:\n  \
         - backendRefs: [{{name: {backend}, port: 8080}}]\n"
    )
}

fn get_json(env: &TestEnv, args: &[&str]) -> Option<Value> {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", "json"]);
    env.kubectl(&full).ok().and_then(|out| serde_json::from_str(&out).ok())
}

fn object(env: &TestEnv, kind: &str, ns: Option<&str>, name: &str) -> Value {
    let mut args = vec![kind, name];
    if let Some(ns) = ns {
        args.extend_from_slice(&["-n", ns]);
    }
    get_json(env, &args).unwrap_or(Value::Null)
}

fn route_object(env: &TestEnv, name: &str) -> Value {
    object(env, "httproutes.gateway.networking.k8s.io", Some(APPS), name)
}

fn gateway_object(env: &TestEnv) -> Value {
    object(env, "gateways.gateway.networking.k8s.io", Some(GW_NS), "gw")
}

fn condition<'a>(conditions: &'a Value, ty: &str) -> Option<&'a Value> {
    conditions.as_array()?.iter().find(|c| c["type"] == ty)
}

/// `(status, reason)` of condition `ty` of the route's first parent.
fn parent_condition(route: &Value, ty: &str) -> Option<(String, String)> {
    let c = condition(&route["status"]["parents"][0]["conditions"], ty)?;
    Some((c["status"].as_str()?.to_string(), c["reason"].as_str()?.to_string()))
}

fn resource_version(v: &Value) -> String {
    v["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string()
}

/// The sum of a metric's series with `label` (any when empty) on /metrics.
async fn metric(port: u16, name: &str, label: &str) -> f64 {
    let Ok(r) = request(([127, 0, 0, 1], port).into(), "localhost", "/metrics", &[]).await else {
        return -1.0;
    };
    r.body
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until the status writer has run two more passes (a write seen in the cluster is then
/// counted).
async fn two_more_passes(monitoring: u16) {
    let passes = metric(monitoring, "meshpilot_gateway_status_passes_total", "").await;
    wait_for("two more status passes", LIMIT, async || {
        (metric(monitoring, "meshpilot_gateway_status_passes_total", "").await >= passes + 2.0).then_some(())
    })
    .await
    .unwrap();
}

struct Router {
    envoy: Envoy,
    addr: SocketAddr,
}

impl Router {
    async fn send(&self, host: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        match request(self.addr, host, path, headers).await {
            Ok(r) => (r.status, r.body),
            Err(e) => (0, e.to_string()),
        }
    }

    /// The first line of the body (the echo server's name) of a 200 answer.
    async fn backend(&self, host: &str, path: &str, headers: &[(&str, &str)]) -> String {
        match self.send(host, path, headers).await {
            (200, body) => body.lines().next().unwrap_or_default().to_string(),
            (status, body) => format!("HTTP {status}: {body}"),
        }
    }
}

const LIMIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_api_from_the_cluster_routes_through_a_router_and_gets_istio_status() {
    let env = TestEnv::shared_by(file!());
    env.install_gateway_api_crds().unwrap();
    let _ = env.kubectl(&["create", "namespace", GW_NS]);
    let _ = env.kubectl(&["create", "namespace", APPS]);
    env.kubectl(&["label", "namespace", APPS, "gw-access=yes", "--overwrite"]).unwrap();

    let ip = host_ip();
    let echo = |name: &'static str| {
        EchoServer::start_with(name, EchoOptions { ip: ip.into(), echo_head: true, ..EchoOptions::default() })
    };
    let (v1, v2) = (echo("v1").await.unwrap(), echo("v2").await.unwrap());
    let port = free_port();
    let mut manifest = backend("v1", v1.addr);
    manifest.push_str(&backend("v2", v2.addr));
    // The gateway Service as meshpilot's deployment controller makes it for this Gateway, created
    // up front (the controller then applies its own fields over it).
    manifest.push_str(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: gw-istio, namespace: {GW_NS}}}\n\
         spec:\n  type: LoadBalancer\n  selector: {{gateway.networking.k8s.io/gateway-name: gw}}\n  \
         ports: [{{name: http, port: {port}, protocol: TCP}}]\n---\n"
    ));
    manifest.push_str(&gateway(port));
    manifest.push_str("---\n");
    manifest.push_str(&shop((0, 100)));
    manifest.push_str("---\n");
    manifest.push_str(&route("broken", "broken.example.com", "nowhere"));
    // The router's pod (no kubelet: its IP is set by hand), so the registry finds the router's
    // service instances by its IP, as Istio's Kubernetes registry does.
    manifest.push_str(&format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: gw-istio-1, namespace: {GW_NS}, \
         labels: {{gateway.networking.k8s.io/gateway-name: gw}}}}\nspec:\n  automountServiceAccountToken: false\n  \
         containers: [{{name: istio-proxy, image: example.invalid/proxy}}]\n"
    ));
    env.kubectl_apply(&manifest).unwrap();
    let pod_status = format!(
        "{{\"status\":{{\"phase\":\"Running\",\"podIP\":\"{ip}\",\"podIPs\":[{{\"ip\":\"{ip}\"}}]}}}}"
    );
    env.kubectl(&[
        "-n",
        GW_NS,
        "patch",
        "pod",
        "gw-istio-1",
        "--subresource=status",
        "--type=merge",
        "-p",
        &pod_status,
    ])
    .unwrap();

    let (grpc, http, monitoring) = (free_port(), free_port(), free_port());
    let log = tempfile::NamedTempFile::new().unwrap();
    let _meshpilot = Process(
        Command::new(env!("CARGO_BIN_EXE_meshpilot"))
            .args(["discovery", "--kubeconfig"])
            .arg(env.kubeconfig())
            .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
            .args(["--http-addr", &format!("127.0.0.1:{http}")])
            .args(["--monitoring-addr", &format!("127.0.0.1:{monitoring}")])
            .args(["--secureGRPCAddr=", "--httpsAddr="])
            .env("POD_NAME", "gwapi-e2e-0")
            // The leases live in the test's namespace: other tests' replicas do not compete.
            .env("POD_NAMESPACE", GW_NS)
            .env("RUST_LOG", "info,meshpilot::gateway_api=debug")
            .stderr(Stdio::from(log.reopen().unwrap()))
            .spawn()
            .unwrap(),
    );
    let log_tail = || {
        let text = std::fs::read_to_string(log.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };

    // The router: an instance of the deployed gateway Service gw-istio (its selector is the
    // Gateway's name label). It connects once meshpilot's registry has that Service (a proxy's
    // service instances are taken when it connects).
    wait_for("the deployed gateway Service in the registry", LIMIT, async || {
        let r = request(([127, 0, 0, 1], http).into(), "localhost", "/debug/registryz", &[]).await.ok()?;
        r.body.contains(&format!("gw-istio.{GW_NS}.svc.cluster.local")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", log_tail()));
    let mut bootstrap = Bootstrap::router(([127, 0, 0, 1], grpc).into(), AdsApi::Sotw);
    bootstrap.node_id = format!("router~{ip}~gw-istio-1.{GW_NS}~{GW_NS}.svc.cluster.local");
    bootstrap.metadata["INSTANCE_IPS"] = json!(ip.to_string());
    bootstrap.node_cluster = format!("gw-istio.{GW_NS}");
    bootstrap.metadata["NAMESPACE"] = json!(GW_NS);
    bootstrap.metadata["LABELS"] = json!({"gateway.networking.k8s.io/gateway-name": "gw"});
    let envoy = Envoy::start(&bootstrap).await.unwrap();
    let r = Router { envoy, addr: ([127, 0, 0, 1], port).into() };

    wait_for("the default rule routes to v1", LIMIT, async || {
        (r.backend("shop.example.com", "/", &[]).await == "v1").then_some(())
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}\n{}\n--- meshpilot ---\n{}\n--- shop status ---\n{}",
            r.envoy.log_tail(5),
            log_tail(),
            route_object(env, "shop")["status"]
        )
    });
    // Path prefix (whole segments) and header matches.
    assert_eq!(r.backend("shop.example.com", "/v2/items", &[]).await, "v2");
    assert_eq!(r.backend("shop.example.com", "/v2x", &[]).await, "v1", "prefixes match whole segments");
    assert_eq!(r.backend("shop.example.com", "/", &[("x-version", "v2")]).await, "v2");
    // Weight 0 / 100: everything to v2.
    for _ in 0..10 {
        assert_eq!(r.backend("shop.example.com", "/weighted", &[]).await, "v2");
    }
    // The request-header filter reaches the upstream.
    let (status, body) = r.send("shop.example.com", "/headers", &[]).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("x-added: by-route"), "header set by the route: {body}");
    // The route whose backend does not exist: 500; the other route is undisturbed.
    assert_eq!(r.send("broken.example.com", "/", &[]).await.0, 500);
    assert_eq!(r.backend("shop.example.com", "/", &[]).await, "v1");

    // Status, read back from the API server.
    let class = wait_for("GatewayClass istio Accepted", LIMIT, async || {
        let class = object(env, "gatewayclasses.gateway.networking.k8s.io", None, "istio");
        condition(&class["status"]["conditions"], "Accepted").filter(|c| c["status"] == "True")?;
        Some(class)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", log_tail()));
    assert_eq!(
        condition(&class["status"]["conditions"], "Accepted").unwrap()["message"],
        "Handled by Istio controller"
    );
    let gw = wait_for("Gateway Accepted and Programmed, 2 routes attached", LIMIT, async || {
        let gw = gateway_object(env);
        for ty in ["Accepted", "Programmed"] {
            condition(&gw["status"]["conditions"], ty).filter(|c| c["status"] == "True")?;
        }
        (gw["status"]["listeners"][0]["attachedRoutes"] == 2).then_some(gw)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {}\n{}", gateway_object(env)["status"], log_tail()));
    let programmed = condition(&gw["status"]["conditions"], "Programmed").unwrap();
    assert!(
        programmed["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("gw-istio.{GW_NS}.svc.cluster.local:{port}")),
        "{programmed}"
    );
    assert_eq!(gw["status"]["listeners"][0]["name"], "http");
    let shop_route = wait_for("shop Accepted, ResolvedRefs", LIMIT, async || {
        let route = route_object(env, "shop");
        (parent_condition(&route, "Accepted")? == ("True".into(), "Accepted".into())
            && parent_condition(&route, "ResolvedRefs")? == ("True".into(), "ResolvedRefs".into()))
            .then_some(route)
    })
    .await
    .unwrap();
    let parent = &shop_route["status"]["parents"][0];
    assert_eq!(parent["controllerName"], "istio.io/gateway-controller");
    assert_eq!(parent["parentRef"]["name"], "gw");
    let accepted = condition(&parent["conditions"], "Accepted").unwrap().clone();
    assert_eq!(accepted["observedGeneration"], shop_route["metadata"]["generation"]);
    let broken = wait_for("broken: ResolvedRefs False, BackendNotFound", LIMIT, async || {
        let route = route_object(env, "broken");
        (parent_condition(&route, "ResolvedRefs")? == ("False".into(), "BackendNotFound".into()))
            .then_some(route)
    })
    .await
    .unwrap();
    assert_eq!(parent_condition(&broken, "Accepted"), Some(("True".into(), "Accepted".into())));
    let message =
        condition(&broken["status"]["parents"][0]["conditions"], "ResolvedRefs").unwrap()["message"].clone();
    assert!(message.as_str().unwrap_or_default().contains("nowhere"), "{message}");

    // Written by the leader of Istio's per-revision lock.
    let lease = object(env, "lease", Some(GW_NS), "istio-gateway-status-leader-default");
    assert_eq!(lease["spec"]["holderIdentity"], "gwapi-e2e-0", "{lease}");

    // The gateway Service gets a load-balancer address: the Gateway's status.addresses follows
    // (the converter sees the cluster's Services).
    env.kubectl(&[
        "-n",
        GW_NS,
        "patch",
        "service",
        "gw-istio",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.55"}]}}}"#,
    ])
    .unwrap();
    wait_for("Gateway status.addresses has the load-balancer IP", LIMIT, async || {
        let gw = gateway_object(env);
        gw["status"]["addresses"].as_array()?.iter().any(|a| a["value"] == "192.0.2.55").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {}", gateway_object(env)["status"]));

    // A route edit moves traffic live (weights 100 / 0), and the route's status moves to the new
    // generation keeping its lastTransitionTime (the condition's status did not change).
    env.kubectl_apply(&shop((100, 0))).unwrap();
    wait_for("/weighted moved to v1", LIMIT, async || {
        (r.backend("shop.example.com", "/weighted", &[]).await == "v1").then_some(())
    })
    .await
    .unwrap();
    for _ in 0..10 {
        assert_eq!(r.backend("shop.example.com", "/weighted", &[]).await, "v1");
    }
    let edited = wait_for("shop status at the new generation", LIMIT, async || {
        let route = route_object(env, "shop");
        let c = condition(&route["status"]["parents"][0]["conditions"], "Accepted")?.clone();
        (c["observedGeneration"] == route["metadata"]["generation"]
            && route["metadata"]["generation"] != accepted["observedGeneration"])
            .then_some(c)
    })
    .await
    .unwrap();
    assert_eq!(edited["lastTransitionTime"], accepted["lastTransitionTime"], "lastTransitionTime kept");

    // No write when nothing changed: a new route changes its own status and the Gateway's
    // attachedRoutes, and nothing of the others.
    wait_for("statuses settled", LIMIT, async || {
        let gw = gateway_object(env);
        (gw["status"]["listeners"][0]["attachedRoutes"] == 2).then_some(())
    })
    .await
    .unwrap();
    let before: Vec<String> =
        ["shop", "broken"].iter().map(|n| resource_version(&route_object(env, n))).collect();
    let class_rv = resource_version(&object(env, "gatewayclasses.gateway.networking.k8s.io", None, "istio"));
    // Writes seen are counted once two more writer passes have run.
    two_more_passes(monitoring).await;
    let route_writes =
        metric(monitoring, "meshpilot_gateway_status_writes_total", "kind=\"HTTPRoute\"").await;
    env.kubectl_apply(&route("extra", "extra.example.com", "v2")).unwrap();
    wait_for("extra route Accepted and the Gateway counting 3 routes", LIMIT, async || {
        let route = route_object(env, "extra");
        parent_condition(&route, "Accepted").filter(|(s, _)| s == "True")?;
        (gateway_object(env)["status"]["listeners"][0]["attachedRoutes"] == 3).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(r.backend("extra.example.com", "/", &[]).await, "v2");
    let after: Vec<String> =
        ["shop", "broken"].iter().map(|n| resource_version(&route_object(env, n))).collect();
    assert_eq!(after, before, "routes whose status did not change were written");
    assert_eq!(
        resource_version(&object(env, "gatewayclasses.gateway.networking.k8s.io", None, "istio")),
        class_rv,
        "the GatewayClass was written"
    );
    two_more_passes(monitoring).await;
    assert_eq!(
        metric(monitoring, "meshpilot_gateway_status_writes_total", "kind=\"HTTPRoute\"").await,
        route_writes + 1.0,
        "one new route, one HTTPRoute status write"
    );

    for t in ["cds", "lds", "rds"] {
        let rejected = r.envoy.stat(&format!("listener_manager.{t}.update_rejected")).await.unwrap();
        assert!(rejected.unwrap_or(0) == 0, "{t} rejected");
    }
    for name in ["shop", "broken", "extra"] {
        let _ = env.kubectl(&["-n", APPS, "delete", "httproute", name]);
    }
    let _ = env.kubectl(&["-n", GW_NS, "delete", "gateway", "gw"]);
}
