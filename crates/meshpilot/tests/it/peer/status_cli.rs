//! `meshpilot status KIND/NAMESPACE/NAME` against the whole control plane in-process and real Envoy
//! sidecars (needs Envoy, scripts/install-envoy.sh): a VirtualService that meshpilot's validation and
//! pre-send route check let through but Envoy rejects (a header value naming an unknown `%COMMAND%`,
//! which the check leaves to Envoy) shows its proxy NACKED with Envoy's text; a good one shows ACKED
//! for the proxy it concerns and leaves out proxies outside its scope (another namespace it is not
//! exported to; a namespace whose Sidecar imports only its own services).

use std::{process::Command, time::Duration};

use meshpilot_testing::{AdsApi, Envoy, Plane, free_port, wait_for};
use serde_json::Value;

fn meshpilot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_meshpilot"))
}

/// Runs `meshpilot status ARGS… --addr ADDR` off the async workers; (exit code, stdout, stderr).
async fn status(addr: std::net::SocketAddr, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = meshpilot();
    cmd.arg("status").args(args).args(["--addr", &addr.to_string()]);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Polls `status OBJECT -o json` (15 s) until `ok` holds for the answer.
async fn wait_status(
    addr: std::net::SocketAddr,
    object: &str,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = String::new();
    let found = wait_for(&format!("{object}: {what}"), Duration::from_secs(15), async || {
        let (code, out, err) = status(addr, &[object, "-o", "json"]).await;
        last = format!("exit {code:?}\n{out}\n{err}");
        let v: Value = serde_json::from_str(&out).ok()?;
        ok(&v).then_some(v)
    })
    .await;
    found.unwrap_or_else(|e| panic!("{e}; last answer: {last}"))
}

/// Whether the proxy `node_id` has status `want` in a status answer.
fn has(v: &Value, node_id: &str, want: &str) -> bool {
    v["proxies"].as_array().is_some_and(|ps| ps.iter().any(|p| p["proxy"] == node_id && p["status"] == want))
}

fn node(namespace: &str) -> String {
    format!("sidecar~127.0.0.1~client.{namespace}~{namespace}.svc.cluster.local")
}

fn config(bad_port: u16, good_port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: api, namespace: bad}}\nspec:\n  \
         hosts: [api.bad.example]\n  exportTo: [\".\"]\n  ports: [{{number: {bad_port}, name: http, protocol: HTTP}}]\n  \
         resolution: STATIC\n  endpoints: [{{address: 127.0.0.2}}]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: broken, namespace: bad}}\nspec:\n  \
         hosts: [api.bad.example]\n  exportTo: [\".\"]\n  http:\n  - headers: {{request: {{set: {{x-bad: \"%FOO%\"}}}}}}\n    \
         route: [{{destination: {{host: api.bad.example}}}}]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: web, namespace: good}}\nspec:\n  \
         hosts: [web.good.example]\n  exportTo: [\".\", scoped]\n  ports: [{{number: {good_port}, name: http, protocol: HTTP}}]\n  \
         resolution: STATIC\n  endpoints: [{{address: 127.0.0.2}}]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: fine, namespace: good}}\nspec:\n  \
         hosts: [web.good.example]\n  exportTo: [\".\", scoped]\n  http:\n  - timeout: 5s\n    \
         route: [{{destination: {{host: web.good.example}}}}]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: scoped}}\nspec:\n  \
         egress: [{{hosts: [\"./*\"]}}]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_names_the_nacking_proxy_and_acks_in_scope_only() {
    let dir = tempfile::tempdir().unwrap();
    let (bad_port, good_port) = (free_port(), free_port());
    std::fs::write(dir.path().join("mesh.yaml"), config(bad_port, good_port)).unwrap();
    let plane = Plane::start(dir.path()).await;
    let mut envoys = Vec::new();
    for ns in ["bad", "good", "scoped"] {
        envoys.push(Envoy::start(&plane.sidecar("client", ns, AdsApi::Sotw)).await.unwrap());
    }

    // The rejected object: its proxy NACKED, with Envoy's text and the Istio field.
    let broken =
        wait_status(plane.http, "vs/bad/broken", "NACKED on bad", |v| has(v, &node("bad"), "NACKED")).await;
    let (code, out, err) = status(plane.http, &["virtualservice/bad/broken"]).await;
    eprintln!("{out}");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&node("bad")) && out.contains("NACKED"), "{out}");
    let error = broken["proxies"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("FOO"), "Envoy's error text: {broken}");
    assert!(out.contains(error), "the text form carries Envoy's error: {out}");
    assert!(out.contains("Istio field: spec.http[0].headers.request.set.x-bad"), "{out}");
    assert!(out.contains("mesh.yaml:"), "source file:line: {out}");
    assert_eq!(broken["proxies"].as_array().unwrap().len(), 1, "only the bad namespace sees it: {broken}");
    assert_eq!(broken["validation"]["state"], "valid", "meshpilot's validation let it through: {broken}");
    let stats = envoys[0].admin_get("/stats?filter=rds.*update_rejected").await.unwrap().1;
    assert!(
        stats.lines().any(|l| l.contains("rds") && !l.ends_with(": 0")),
        "Envoy's own count shows the rejection: {stats}"
    );

    // The good object: ACKED on the proxy it concerns; the other namespaces are not listed.
    let fine = wait_status(plane.http, "VirtualService/good/fine", "ACKED on good", |v| {
        has(v, &node("good"), "ACKED")
    })
    .await;
    let listed: Vec<&str> =
        fine["proxies"].as_array().unwrap().iter().filter_map(|p| p["proxy"].as_str()).collect();
    assert_eq!(listed, vec![node("good").as_str()], "{fine}");
    let (code, out, _) = status(plane.http, &["vs/fine", "-n", "good"]).await;
    eprintln!("{out}");
    assert_eq!(code, Some(0));
    assert!(out.contains("1 ACKED, 0 PENDING, 0 NACKED"), "{out}");
    assert!(!out.contains(&node("scoped")) && !out.contains(&node("bad")), "{out}");

    // A change that leaves the proxy's config byte for byte the same (a label): meshpilot does not
    // send it again, and the ACK of the identical response counts for the new version.
    let first = fine["pushVersion"].as_str().unwrap().to_owned();
    let labeled = config(bad_port, good_port)
        .replace("name: fine, namespace: good}", "name: fine, namespace: good, labels: {v: '2'}}");
    assert_ne!(labeled, config(bad_port, good_port));
    std::fs::write(dir.path().join("mesh.yaml.tmp"), labeled).unwrap();
    std::fs::rename(dir.path().join("mesh.yaml.tmp"), dir.path().join("mesh.yaml")).unwrap();
    let relabeled = wait_status(plane.http, "vs/good/fine", "pushed again", |v| {
        v["pushVersion"].as_str().is_some_and(|p| p != first)
    })
    .await;
    let relabeled = if has(&relabeled, &node("good"), "ACKED") {
        relabeled
    } else {
        wait_status(plane.http, "vs/good/fine", "ACKED after the label", |v| has(v, &node("good"), "ACKED"))
            .await
    };
    // Nothing new was sent: the ACKED comes from the identical response of the first push.
    assert_eq!(relabeled["proxies"][0]["types"][2]["versionAcked"], first.as_str(), "{relabeled}");

    // The list endpoint counts both.
    let (_, body) =
        meshpilot_testing::http_get(plane.http, "/debug/objectz?kind=VirtualService", &[]).await.unwrap();
    let list: Value = serde_json::from_str(&body).unwrap();
    let counts = |name: &str| {
        list.as_array().unwrap().iter().find(|o| o["name"] == name).map(|o| o["counts"].clone()).unwrap()
    };
    assert_eq!(counts("broken")["nacked"], 1, "{list}");
    assert_eq!(counts("fine")["acked"], 1, "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_objects_and_kinds_exit_1_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let plane = Plane::start(dir.path()).await;
    let (code, out, err) = status(plane.http, &["vs/default/nope"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(err.contains("VirtualService default/nope not found"), "{err}");
    // An object whose file never validated: not in force, and the file's errors say why.
    std::fs::write(
        dir.path().join("bad.yaml"),
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: neg, namespace: default}\n\
         spec: {hosts: [a.example], http: [{route: [{destination: {host: a.example}, weight: -15}]}]}\n",
    )
    .unwrap();
    let (_, _, err) = wait_for("bad.yaml rejected", Duration::from_secs(15), async || {
        let answer = status(plane.http, &["vs/default/neg"]).await;
        answer.2.contains("rejected").then_some(answer)
    })
    .await
    .unwrap();
    assert!(err.contains("VirtualService default/neg not found"), "{err}");
    assert!(err.contains("bad.yaml:4: spec.http[0].route[0].weight"), "{err}");
    let (code, _, err) = status(plane.http, &["pod/default/x"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("unknown kind \"pod\""), "{err}");
    let port = free_port();
    let (code, _, err) = status(([127, 0, 0, 1], port).into(), &["vs/default/x"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("cannot reach meshpilot"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_objects_concern_the_selected_router_and_mesh_objects_the_sidecars() {
    let (gw_port, svc_port) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: istio-system}}\nspec:\n  \
         selector: {{istio: ingressgateway}}\n  servers:\n  - port: {{number: {gw_port}, name: http, protocol: HTTP}}\n    \
         hosts: [\"*\"]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: web, namespace: app}}\nspec:\n  \
         hosts: [web.example]\n  ports: [{{number: {svc_port}, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  \
         endpoints: [{{address: 127.0.0.2}}]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: edge, namespace: app}}\nspec:\n  \
         hosts: [web.example]\n  gateways: [istio-system/gw]\n  http:\n  - route: [{{destination: {{host: web.example}}}}]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: inside, namespace: app}}\nspec:\n  \
         hosts: [web.example]\n  http:\n  - timeout: 3s\n    route: [{{destination: {{host: web.example}}}}]\n"
    );
    std::fs::write(dir.path().join("edge.yaml"), yaml).unwrap();
    let plane = Plane::start(dir.path()).await;
    let _router = Envoy::start(&plane.router(AdsApi::Sotw)).await.unwrap();
    let _sidecar = Envoy::start(&plane.sidecar("client", "app", AdsApi::Sotw)).await.unwrap();
    let router = "router~127.0.0.1~istio-ingressgateway-1.istio-system~istio-system.svc.cluster.local";
    let proxies = |v: &Value| -> Vec<String> {
        v["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["proxy"].as_str().map(str::to_owned))
            .collect()
    };
    for object in ["gw/istio-system/gw", "vs/app/edge"] {
        let v = wait_status(plane.http, object, "ACKED on the router", |v| has(v, router, "ACKED")).await;
        assert_eq!(proxies(&v), vec![router.to_owned()], "only the selected router: {v}");
    }
    let v =
        wait_status(plane.http, "vs/app/inside", "ACKED on the sidecar", |v| has(v, &node("app"), "ACKED"))
            .await;
    assert_eq!(proxies(&v), vec![node("app")], "a mesh VirtualService does not concern the router: {v}");
}

/// An EnvoyFilter concerns the workloads its `workloadSelector` selects, not its whole namespace: the
/// selected sidecar is listed (and ACKs), its neighbour is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn envoy_filters_concern_the_workloads_they_select() {
    let svc_port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: web, namespace: app}}\nspec:\n  \
         hosts: [web.example]\n  ports: [{{number: {svc_port}, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  \
         endpoints: [{{address: 127.0.0.2}}]\n\
         ---\napiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {{name: timeouts, namespace: app}}\nspec:\n  \
         workloadSelector: {{labels: {{app: client}}}}\n  configPatches:\n  - applyTo: CLUSTER\n    \
         match: {{context: SIDECAR_OUTBOUND, cluster: {{service: web.example}}}}\n    \
         patch: {{operation: MERGE, value: {{connect_timeout: 3s}}}}\n"
    );
    std::fs::write(dir.path().join("filters.yaml"), yaml).unwrap();
    let plane = Plane::start(dir.path()).await;
    let _client = Envoy::start(&plane.sidecar("client", "app", AdsApi::Sotw)).await.unwrap();
    let _other = Envoy::start(&plane.sidecar("other", "app", AdsApi::Sotw)).await.unwrap();
    let client = node("app");
    let other = "sidecar~127.0.0.1~other.app~app.svc.cluster.local";
    // Both connected (the neighbour is known to the control plane) before the status is read.
    wait_status(plane.http, "serviceentry/app/web", "ACKED on both sidecars", |v| {
        has(v, &client, "ACKED") && has(v, other, "ACKED")
    })
    .await;
    let v = wait_status(plane.http, "envoyfilter/app/timeouts", "ACKED on the selected sidecar", |v| {
        has(v, &client, "ACKED")
    })
    .await;
    let listed: Vec<&str> =
        v["proxies"].as_array().unwrap().iter().filter_map(|p| p["proxy"].as_str()).collect();
    assert_eq!(listed, [client.as_str()], "only the selected workload: {v}");
}
