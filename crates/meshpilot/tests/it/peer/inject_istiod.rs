//! meshpilot's `/inject` against real istiod's `/inject` of the pinned Istio version: every pod of
//! Istio's injection test inputs (`pkg/kube/inject/testdata/inject/*.yaml`: a Pod as it is, a
//! workload's pod template as the API server would create its pod) is sent as the same
//! `AdmissionReview` to both webhooks, both running with the injector config, values and mesh config
//! Istio's charts render by default (`istioctl manifest generate`). Their answers must agree: both
//! allow or both deny, and the pods after each JSON patch are equal as data (after
//! [`istio_peer::normalize`]). The inputs that still differ are in [`KNOWN_DIFFERENCES`] with the
//! reason (docs/INSTALL.md); the test fails when one starts to agree.
//!
//! istiod runs from `scripts/peer/run-istiod.sh` with its webhook port on, its working directory
//! holding `./var/lib/istio/inject/{config,values}` as its image does; meshpilot likewise. The
//! reviews are posted with `curl` (the servers' certificates name `istiod.istio-system.svc`, not the
//! loopback address, so the client does not verify them; nothing secret is sent).

use std::{
    collections::BTreeMap,
    path::Path,
    process::{Command, Stdio},
};

use base64::Engine;
use kube_source::testenv::TestEnv;
use serde_json::{Value, json};

use crate::istio_peer::{self, Istiod, first_difference, normalize};
use crate::webhook_support::{self, Webhook};

/// Inputs on which meshpilot's and istiod's webhooks still disagree, and why.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

/// Writes the chart's injector `config` and `values` into `dir/var/lib/istio/inject` and its mesh
/// config into `dir/mesh.yaml`.
pub(super) fn chart_settings(dir: &Path) {
    let inject = dir.join("var/lib/istio/inject");
    std::fs::create_dir_all(&inject).unwrap();
    let maps = webhook_support::chart_objects("ConfigMap", &[]);
    let map =
        |name: &str| maps.iter().find(|c| c["metadata"]["name"] == name).unwrap_or_else(|| panic!("{name}"));
    let injector = map("istio-sidecar-injector");
    std::fs::write(inject.join("config"), injector["data"]["config"].as_str().unwrap()).unwrap();
    std::fs::write(inject.join("values"), injector["data"]["values"].as_str().unwrap()).unwrap();
    std::fs::write(dir.join("mesh.yaml"), map("istio")["data"]["mesh"].as_str().unwrap()).unwrap();
}

/// The pods the API server would review for the objects of one input file: a Pod as it is; a
/// workload's pod template (`spec.template`, a CronJob's `spec.jobTemplate.spec.template`) with the
/// workload's namespace and a name. Each pod is named `<input>/<document>`.
fn pods(file: &Path) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(file).unwrap();
    let stem = file.file_name().unwrap().to_string_lossy().into_owned();
    let mut out = Vec::new();
    for (i, doc) in api::yaml::parse_documents(&text).into_iter().enumerate() {
        let Ok(doc) = doc else { continue };
        let Some(object) = doc.root.map(|r| r.to_json()) else { continue };
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
        let name = object["metadata"]["name"].as_str().unwrap_or("pod").to_string();
        let template = match object["kind"].as_str() {
            Some("Pod") => {
                let mut pod = object.clone();
                pod["metadata"]["namespace"] = json!(namespace);
                out.push((format!("{stem}/{i}"), pod));
                continue;
            }
            Some("CronJob") => object["spec"]["jobTemplate"]["spec"]["template"].clone(),
            _ => object["spec"]["template"].clone(),
        };
        if !template.is_object() {
            continue;
        }
        let mut metadata = template["metadata"].clone();
        if !metadata.is_object() {
            metadata = json!({});
        }
        metadata["name"] = json!(format!("{name}-0"));
        metadata["namespace"] = json!(namespace);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]});
        out.push((format!("{stem}/{i}"), pod));
    }
    out
}

/// `pod` as the API server hands it to admission webhooks: created with `--dry-run=server`, so
/// defaulted and round-tripped through Kubernetes' types (every container has `resources: {}`, for
/// one — the webhooks' JSON patches assume it). A pod the API server refuses is sent as written.
fn as_admitted(env: &TestEnv, dir: &Path, pod: &Value) -> Value {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    let _ = env.kubectl(&["create", "namespace", namespace]);
    let file = dir.join("pod.json");
    std::fs::write(&file, pod.to_string()).unwrap();
    match env.kubectl(&["create", "--dry-run=server", "-o", "json", "-f", file.to_str().unwrap()]) {
        Ok(out) => serde_json::from_str(&out).unwrap(),
        Err(_) => pod.clone(),
    }
}

/// The AdmissionReview (v1) the API server sends for creating `pod`.
fn review(pod: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"]["name"],
            "namespace": pod["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
            "dryRun": false
        }
    })
}

/// What one webhook made of a review: the patched pod, or the denial's message.
#[derive(Debug)]
enum Outcome {
    Pod(Value),
    Denied(String),
}

/// Posts `body` to `url` and applies the answer's JSON patch to `pod`.
fn inject(url: &str, body: &Path, pod: &Value) -> Result<Outcome, String> {
    let out = Command::new("curl")
        .args(["-sS", "-k", "-H", "Content-Type: application/json", "--data-binary"])
        .arg(format!("@{}", body.display()))
        .arg(url)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(format!("curl {url}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let answer: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{url}: {e}: {}", String::from_utf8_lossy(&out.stdout)))?;
    let response = &answer["response"];
    if response["allowed"] != true {
        return Ok(Outcome::Denied(response["result"]["message"].as_str().unwrap_or("").to_string()));
    }
    let mut patched = pod.clone();
    if let Some(patch) = response["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD.decode(patch).map_err(|e| e.to_string())?;
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        json_patch::patch(&mut patched, &patch).map_err(|e| format!("{url}: patch does not apply: {e}"))?;
    }
    Ok(Outcome::Pod(normalize(patched).unwrap_or(Value::Null)))
}

#[test]
fn inject_answers_as_istiods_inject_on_istios_injection_inputs() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", "istio-system"]);
    let work = tempfile::tempdir().unwrap();
    let (istiod_dir, ours_dir) = (work.path().join("istiod"), work.path().join("meshpilot"));
    chart_settings(&istiod_dir);
    chart_settings(&ours_dir);

    let istiod = Istiod::start(&istiod_dir, &env.kubeconfig(), "--httpsAddr 127.0.0.1:{base}");
    let theirs_url = format!("https://127.0.0.1:{}/inject", istiod.base);
    let mesh = ours_dir.join("mesh.yaml");
    let ours = Webhook::start_in(
        &ours_dir,
        env,
        &["--meshConfig", mesh.to_str().unwrap()],
        &[("POD_NAMESPACE", "istio-system")],
        Stdio::null(),
    );
    let ours_url = ours.url.replace("/validate", "/inject");

    let inputs = istio_peer::injection_inputs();
    let reviews: Vec<(String, Value)> = inputs
        .iter()
        .flat_map(|f| pods(f))
        .map(|(name, pod)| (name, as_admitted(env, work.path(), &pod)))
        .collect();

    // Both webhooks answer (istiod reads its injector files once its informers are up).
    let body = work.path().join("review.json");
    std::fs::write(&body, review(&reviews[0].1).to_string()).unwrap();
    for url in [&theirs_url, &ours_url] {
        meshpilot_testing::wait::wait_for_blocking(
            &format!("{url} to answer"),
            std::time::Duration::from_secs(120),
            || inject(url, &body, &reviews[0].1).ok(),
        )
        .unwrap_or_else(|e| panic!("{e}\n--- istiod log ---\n{}", istiod.log()));
    }

    let mut differences = BTreeMap::new();
    let mut injected_by_istiod = 0;
    for (name, pod) in &reviews {
        std::fs::write(&body, review(pod).to_string()).unwrap();
        let (ours, theirs) = (inject(&ours_url, &body, pod), inject(&theirs_url, &body, pod));
        if let Ok(Outcome::Pod(pod)) = &theirs {
            let containers = pod["spec"]["containers"]
                .as_array()
                .into_iter()
                .chain(pod["spec"]["initContainers"].as_array());
            if containers.flatten().any(|c| c["name"] == "istio-proxy") {
                injected_by_istiod += 1;
            }
        }
        let difference = match (ours, theirs) {
            (Ok(Outcome::Pod(x)), Ok(Outcome::Pod(y))) => first_difference(&x, &y, String::new()),
            (Ok(Outcome::Denied(_)), Ok(Outcome::Denied(_))) => None,
            (Ok(Outcome::Pod(_)), Ok(Outcome::Denied(m))) => {
                Some(format!("istiod denies ({m}), meshpilot injects"))
            }
            (Ok(Outcome::Denied(m)), Ok(Outcome::Pod(_))) => {
                Some(format!("meshpilot denies ({m}), istiod injects"))
            }
            (Err(e), Ok(_)) => Some(format!("meshpilot: {e}")),
            (Ok(_), Err(e)) => Some(format!("istiod: {e}")),
            (Err(e), Err(f)) => (e.split(": ").skip(1).collect::<Vec<_>>()
                != f.split(": ").skip(1).collect::<Vec<_>>())
            .then(|| format!("meshpilot: {e}; istiod: {f}")),
        };
        if let Some(d) = difference {
            differences.insert(name.clone(), d);
        }
    }

    // The comparison is not of two untouched pods: istiod injects most of them.
    assert!(
        injected_by_istiod * 2 > reviews.len(),
        "istiod injected {injected_by_istiod} of {}",
        reviews.len()
    );
    istio_peer::assert_known_differences("istiod's /inject", &differences, KNOWN_DIFFERENCES, reviews.len());
}
