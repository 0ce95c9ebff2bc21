//! Status written back to cluster objects by `meshpilot discovery` (PILOT_ENABLE_ANALYSIS,
//! PILOT_ENABLE_STATUS), against a real kube-apiserver, two meshpilot replicas and a real Envoy:
//! a VirtualService naming a missing gateway gets IST0101 in `status.validationMessages` with the
//! current `observedGeneration`; its `Reconciled` condition turns True once the Envoy connected to the
//! leader ACKed it; fixing it clears the messages; only the leader (holder of `istio-analyze-leader`)
//! writes.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use kube_source::testenv::TestEnv;
use meshpilot_testing::{
    AdsApi, Bootstrap, Envoy, free_port, http::request_blocking, wait::wait_for_blocking,
};
use serde_json::Value;

const NS: &str = "status-feedback";

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Replica {
    _process: Process,
    grpc: u16,
    monitoring: u16,
}

fn replica(env: &TestEnv, name: &str) -> Replica {
    let (grpc, http, monitoring) = (free_port(), free_port(), free_port());
    let process = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
        .args(["discovery", "--kubeconfig"])
        .arg(env.kubeconfig())
        .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
        .args(["--http-addr", &format!("127.0.0.1:{http}")])
        .args(["--monitoring-addr", &format!("127.0.0.1:{monitoring}")])
        .args(["--secureGRPCAddr=", "--httpsAddr="])
        .env("PILOT_ENABLE_ANALYSIS", "true")
        .env("PILOT_ENABLE_STATUS", "true")
        .env("PILOT_STATUS_UPDATE_INTERVAL", "100ms")
        .env("POD_NAME", name)
        // The lock lives in the test's namespace, so other tests' replicas do not compete for it.
        .env("POD_NAMESPACE", NS)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Replica { _process: Process(process), grpc, monitoring }
}

/// Waits (60 s at most: a limit, not a timing assertion) until `check` gives a value.
fn wait_for<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    wait_for_blocking(what, Duration::from_secs(60), check).unwrap()
}

fn get(env: &TestEnv, args: &[&str]) -> Option<Value> {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-n", NS, "-o", "json"]);
    env.kubectl(&full).ok().and_then(|out| serde_json::from_str(&out).ok())
}

fn vs(env: &TestEnv) -> Value {
    get(env, &["virtualservices.networking.istio.io", "web"]).expect("the VirtualService")
}

/// The holder of `istio-analyze-leader`: a ConfigMap lock, as istiod's (its record is client-go's JSON
/// in an annotation).
fn lock_holder(env: &TestEnv) -> Option<String> {
    let cm = get(env, &["configmap", "istio-analyze-leader"])?;
    let record: Value = serde_json::from_str(
        cm["metadata"]["annotations"]["control-plane.alpha.kubernetes.io/leader"].as_str()?,
    )
    .ok()?;
    record["holderIdentity"].as_str().filter(|h| !h.is_empty()).map(str::to_string)
}

/// The sum of a metric's series on a replica's /metrics (0 when absent); panics when the endpoint
/// does not answer or the replica has not joined the election (its leading gauge is absent), so an
/// absent metric means the replica never recorded it.
fn metric(port: u16, name: &str) -> f64 {
    let r = request_blocking(([127, 0, 0, 1], port).into(), "localhost", "/metrics", &[]).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body.contains("meshpilot_leader_election_leading"), "replica on {port} is not in the election");
    r.body
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn reconciled(object: &Value) -> Option<&Value> {
    object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Reconciled")
}

fn codes(object: &Value) -> Vec<String> {
    object["status"]["validationMessages"]
        .as_array()
        .map(|ms| ms.iter().filter_map(|m| m["type"]["code"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn manifest(gateways: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: web, namespace: {NS}}}\nspec:\n  \
         hosts: [web.example]\n  ports: [{{number: 8080, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  \
         endpoints: [{{address: 127.0.0.2}}]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: web, namespace: {NS}}}\nspec:\n  \
         hosts: [web.example]\n  gateways: [{gateways}]\n  http:\n  - timeout: 5s\n    \
         route: [{{destination: {{host: web.example}}}}]\n"
    )
}

#[test]
fn analysis_messages_and_reconciled_written_by_the_leader_only() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", NS]);
    env.kubectl_apply(&manifest("missing-gateway, mesh")).unwrap();

    let a = replica(env, "replica-a");
    wait_for("replica-a to lead", || (lock_holder(env).as_deref() == Some("replica-a")).then_some(()));
    let b = replica(env, "replica-b");

    // IST0101 (the missing gateway), at the object's current generation.
    let written = wait_for("IST0101 on the VirtualService", || {
        let v = vs(env);
        codes(&v).contains(&"IST0101".to_string()).then_some(v)
    });
    let generation = written["metadata"]["generation"].as_i64().unwrap();
    assert_eq!(written["status"]["observedGeneration"], generation.to_string(), "{written:#}");
    let m = &written["status"]["validationMessages"][0];
    assert_eq!(m["level"], "ERROR", "{m}");
    assert_eq!(m["type"]["name"], "ReferencedResourceNotFound", "{m}");
    assert!(m["documentationUrl"].as_str().unwrap().ends_with("/ist0101/"), "{m}");

    // An Envoy sidecar on the leader: Reconciled once it ACKed the object.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let bootstrap = Bootstrap::sidecar_in("client", NS, ([127, 0, 0, 1], a.grpc).into(), AdsApi::Sotw);
    let _envoy = runtime.block_on(Envoy::start(&bootstrap)).unwrap();
    let acked = wait_for("Reconciled True with the Envoy", || {
        let v = vs(env);
        let c = reconciled(&v)?;
        (c["status"] == "True" && c["message"] == "1/1 proxies up to date.").then(|| v.clone())
    });
    let c = reconciled(&acked).unwrap();
    assert_eq!(c["reason"], "Reconciled");
    assert_eq!(c["observedGeneration"], generation.to_string());
    assert!(c["lastTransitionTime"].as_str().is_some_and(|t| t.ends_with('Z')), "{c}");

    // Fixed: the messages go away at the new generation, and the Envoy ACKs the new version.
    env.kubectl_apply(&manifest("mesh")).unwrap();
    let fixed = wait_for("messages cleared and Reconciled at the new generation", || {
        let v = vs(env);
        let g = v["metadata"]["generation"].as_i64()?;
        let g_text = g.to_string();
        let c = reconciled(&v)?;
        (g > generation
            && v["status"]["validationMessages"].is_null()
            && v["status"]["observedGeneration"] == g_text.as_str()
            && c["observedGeneration"] == g_text.as_str()
            && c["status"] == "True")
            .then(|| v.clone())
    });
    assert!(codes(&fixed).is_empty(), "{fixed:#}");

    // Only the leader wrote: its counter grew, the other replica's never did.
    assert!(metric(a.monitoring, "meshpilot_status_writes_total") >= 3.0);
    assert_eq!(metric(b.monitoring, "meshpilot_status_writes_total"), 0.0);
    assert_eq!(metric(b.monitoring, "meshpilot_leader_election_leading"), 0.0);
    assert_eq!(lock_holder(env).as_deref(), Some("replica-a"));
}
