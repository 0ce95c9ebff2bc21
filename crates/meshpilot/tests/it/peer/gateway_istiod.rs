//! meshpilot's automated Gateway deployment against real istiod's deployment controller of the
//! pinned Istio version, both rendering the `kube-gateway` template of the injection config Istio's
//! charts render by default (`./var/lib/istio/inject`, as in `inject_istiod.rs`) on the same real
//! kube-apiserver. The same objects are set up in two namespaces — Gateways of class `istio`: a plain
//! one, one that a `ProxyConfig` selects (by `gateway.networking.k8s.io/gateway-name`) besides the
//! namespace-wide `ProxyConfig`, one with a `parametersRef` ConfigMap overlay, and one with name and
//! service-type annotations and infrastructure labels; all under a class defaults ConfigMap — then
//! istiod runs alone and reconciles the first namespace, is stopped, and meshpilot reconciles the
//! second. The applied ServiceAccounts, Deployments, Services and PodDisruptionBudgets must be
//! equal as data after [`normalized`] (server-set fields dropped, the namespace name replaced). The
//! ones that still differ are in [`KNOWN_DIFFERENCES`] with the reason (docs/INSTALL.md).

use std::{collections::BTreeMap, process::Stdio, time::Duration};

use kube_source::testenv::TestEnv;
use meshpilot_testing::wait::wait_for_blocking;
use serde_json::{Value, json};

use crate::istio_peer::{self, Istiod, first_difference, normalize};
use crate::webhook_support::Webhook;

/// Objects (`<kind>/<name>`) on which meshpilot and istiod still differ, and why.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

const ISTIOD_NS: &str = "gwtpl-istiod";
const OURS_NS: &str = "gwtpl-meshpilot";

/// (Gateway, the names of its objects): the object kinds compared.
const KINDS: &[&str] = &["serviceaccount", "deployment", "service", "poddisruptionbudget"];

fn gateways() -> Vec<(&'static str, &'static str)> {
    vec![
        ("plain", "plain-istio"),
        ("selected", "selected-istio"),
        ("tuned", "tuned-istio"),
        ("named", "edge"),
    ]
}

/// The objects of one side, in namespace `ns`.
fn setup(env: &TestEnv, ns: &str) {
    let _ = env.kubectl(&["create", "namespace", ns]);
    let apply = |v: Value| env.kubectl_apply(&v.to_string()).unwrap();
    let proxy_config = |name: &str, spec: Value| {
        json!({"apiVersion": "networking.istio.io/v1beta1", "kind": "ProxyConfig",
               "metadata": {"name": name, "namespace": ns}, "spec": spec})
    };
    apply(proxy_config("namespace-wide", json!({"concurrency": 2, "environmentVariables": {"WIDE": "w"}})));
    apply(proxy_config(
        "selected",
        json!({
            "selector": {"matchLabels": {"gateway.networking.k8s.io/gateway-name": "selected"}},
            "environmentVariables": {"SELECTED": "yes"},
            "image": {"imageType": "distroless"},
        }),
    ));
    apply(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tuned-params", "namespace": ns},
        "data": {
            "deployment": "spec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        env:\n        - {name: TUNED, value: \"1\"}\n        resources:\n          limits: {memory: 1Gi}\n",
            "service": "metadata:\n  annotations: {lb: internal}\nspec:\n  externalTrafficPolicy: Local\n",
            "horizontalPodAutoscaler": "spec:\n  minReplicas: 2\n  maxReplicas: 4\n",
        },
    }));
    let gateway = |name: &str, metadata: Value, infrastructure: Value, listeners: Value| {
        let mut meta = json!({"name": name, "namespace": ns});
        meta.as_object_mut().unwrap().extend(metadata.as_object().unwrap().clone());
        let mut spec = json!({"gatewayClassName": "istio", "listeners": listeners});
        if !infrastructure.is_null() {
            spec["infrastructure"] = infrastructure;
        }
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": meta, "spec": spec})
    };
    let http = json!([{"name": "http", "port": 80, "protocol": "HTTP"}]);
    apply(gateway(
        "plain",
        json!({"labels": {"team": "a"}, "annotations": {"note": "n"}}),
        Value::Null,
        json!([
            {"name": "http", "port": 80, "protocol": "HTTP"},
            {"name": "web.alt", "port": 8080, "protocol": "HTTP"},
            {"name": "tls", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
        ]),
    ));
    apply(gateway("selected", json!({}), Value::Null, http.clone()));
    apply(gateway(
        "tuned",
        json!({}),
        json!({"parametersRef": {"group": "", "kind": "ConfigMap", "name": "tuned-params"}}),
        http.clone(),
    ));
    apply(gateway(
        "named",
        json!({"annotations": {
            "gateway.istio.io/name-override": "edge", "gateway.istio.io/service-account": "edge",
            "networking.istio.io/service-type": "ClusterIP",
        }}),
        json!({"labels": {"infra": "yes", "topology.istio.io/network": "net1"}, "annotations": {"infra-note": "i"}}),
        http,
    ));
}

/// `object` without what the API server sets or what names the namespace: managedFields, uid,
/// resourceVersion, creationTimestamp, generation, status, owner uids, allocated cluster IPs and
/// node ports; the namespace's name replaced by `NS`.
fn normalized(object: &Value, ns: &str) -> Value {
    let mut o = object.clone();
    let meta = o["metadata"].as_object_mut().unwrap();
    for key in ["managedFields", "uid", "resourceVersion", "creationTimestamp", "generation"] {
        meta.remove(key);
    }
    if let Some(owners) = meta.get_mut("ownerReferences").and_then(Value::as_array_mut) {
        for owner in owners {
            owner.as_object_mut().unwrap().remove("uid");
        }
    }
    o.as_object_mut().unwrap().remove("status");
    if let Some(spec) = o["spec"].as_object_mut() {
        for key in ["clusterIP", "clusterIPs", "healthCheckNodePort"] {
            spec.remove(key);
        }
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for port in ports {
                port.as_object_mut().map(|p| p.remove("nodePort"));
            }
        }
    }
    let text = o.to_string().replace(ns, "NS");
    normalize(serde_json::from_str(&text).unwrap()).unwrap_or(Value::Null)
}

/// Every compared object of `ns` (`<kind>/<name>` → normalised), once all exist (each Gateway's
/// objects come from one render); `None` until then.
fn snapshot(env: &TestEnv, ns: &str, missing: &mut String) -> Option<BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    for (gateway, object) in gateways() {
        let mut kinds = KINDS.to_vec();
        if gateway == "tuned" {
            kinds.push("horizontalpodautoscaler");
        }
        for kind in kinds {
            let text = env.kubectl(&["-n", ns, "get", kind, object, "-o", "json", "--show-managed-fields"]);
            *missing = format!("{kind}/{object}: {:?}", text.as_ref().err());
            let text = text.ok()?;
            out.insert(format!("{kind}/{object}"), normalized(&serde_json::from_str(&text).ok()?, ns));
        }
    }
    Some(out)
}

fn differences(ours: &BTreeMap<String, Value>, theirs: &BTreeMap<String, Value>) -> BTreeMap<String, String> {
    theirs
        .iter()
        .filter_map(|(key, y)| {
            let d = match ours.get(key) {
                Some(x) => first_difference(x, y, String::new()),
                None => Some("meshpilot has none".to_string()),
            };
            d.map(|d| (key.clone(), d))
        })
        .collect()
}

#[test]
fn gateway_deployments_equal_istiods_on_the_same_gateways() {
    let env = TestEnv::shared_by(file!());
    env.install_gateway_api_crds().unwrap();
    let _ = env.kubectl(&["create", "namespace", "istio-system"]);
    let work = tempfile::tempdir().unwrap();
    let (istiod_dir, ours_dir) = (work.path().join("istiod"), work.path().join("meshpilot"));
    super::inject_istiod::chart_settings(&istiod_dir);
    super::inject_istiod::chart_settings(&ours_dir);
    // The class defaults (system namespace) both controllers read.
    env.kubectl_apply(
        &json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "istio-class-defaults", "namespace": "istio-system",
                         "labels": {"gateway.istio.io/defaults-for-class": "istio"}},
            "data": {
                "deployment": "metadata:\n  annotations: {from-class: \"yes\"}\n",
                "podDisruptionBudget": "spec:\n  minAvailable: 1\n",
            },
        })
        .to_string(),
    )
    .unwrap();

    // istiod alone, on its namespace's Gateways (set up before it starts: its first push context
    // holds the ProxyConfigs).
    setup(env, ISTIOD_NS);
    let theirs = {
        let istiod = Istiod::start(&istiod_dir, &env.kubeconfig(), "");
        let mut missing = String::new();
        wait_for_blocking("istiod's gateway objects", Duration::from_secs(120), || {
            snapshot(env, ISTIOD_NS, &mut missing)
        })
        .unwrap_or_else(|e| panic!("{e}: last missing {missing}\n--- istiod log ---\n{}", istiod.log()))
    };
    // istiod is stopped: its deployment-controller lock goes with it.
    for lease in ["istio-gateway-deployment", "istio-gateway-deployment-default"] {
        let _ = env.kubectl(&["-n", "istio-system", "delete", "lease", lease, "--ignore-not-found"]);
    }

    setup(env, OURS_NS);
    let mesh = ours_dir.join("mesh.yaml");
    let _ours = Webhook::start_in(
        &ours_dir,
        env,
        &["--meshConfig", mesh.to_str().unwrap()],
        &[("POD_NAMESPACE", "istio-system"), ("POD_NAME", "meshpilot-gwtpl")],
        Stdio::null(),
    );
    // Equal objects, or after the wait the differences there are.
    let (mut last, mut missing) = (BTreeMap::new(), String::new());
    let equal =
        wait_for_blocking("meshpilot's gateway objects equal to istiod's", Duration::from_secs(120), || {
            let ours = snapshot(env, OURS_NS, &mut missing)?;
            last = differences(&ours, &theirs);
            last.keys().all(|k| KNOWN_DIFFERENCES.iter().any(|(known, _)| known == k)).then_some(())
        });
    if equal.is_err() && last.is_empty() {
        panic!("meshpilot's objects did not all appear in {OURS_NS}: last missing {missing}");
    }
    assert_eq!(theirs.len(), 4 * KINDS.len() + 1, "objects compared: {:?}", theirs.keys());
    istio_peer::assert_known_differences(
        "istiod's deployment controller",
        &last,
        KNOWN_DIFFERENCES,
        theirs.len(),
    );
}
