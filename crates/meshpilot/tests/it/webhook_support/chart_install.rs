//! Istio's own Helm charts as meshpilot's install (issue 39, docs/INSTALL.md "Istio's charts"): the
//! `base` and `istiod` charts of the pinned Istio module rendered by real helm
//! (`crate::istio_peer::helm`) with `install/values-meshpilot.yaml`, applied to the test API
//! server, and meshpilot started as the kubelet would start the rendered Deployment `istiod`'s container
//! `discovery`: its args, its env (field and resource references resolved), its volume mounts
//! materialised inside a private mount namespace, the in-cluster credentials of ServiceAccount `istiod`,
//! working directory `/`.
//!
//! What a kubelet does that this does not: the pod object itself (no Pod `istiod-…` is stored, so the
//! tokens are not bound to one), running as user 1337, service-link variables other than
//! `KUBERNETES_SERVICE_*`, and `KUBERNETES_SERVICE_HOST/PORT` name the API server's loopback address
//! and port instead of the `kubernetes` Service's ClusterIP (nothing routes ClusterIPs here).

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use base64::Engine as _;
use kube_source::testenv::TestEnv;
use meshpilot_testing::repo_root;
use serde_json::{Value, json};

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

/// meshpilot running as the rendered Deployment `istiod`'s container `discovery`; killed on drop, with
/// its mount namespace (nothing of it stays on the host).
pub struct ChartIstiod {
    child: Child,
    /// The pod name it was given (`metadata.name`).
    pub pod_name: String,
    /// Its stderr and stdout (a file in the staging directory).
    pub log: PathBuf,
    /// The resolved environment it was started with.
    pub env: BTreeMap<String, String>,
    /// Its argv after the binary (the container's `args`).
    pub args: Vec<String>,
    _staging: tempfile::TempDir,
}

impl Drop for ChartIstiod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A volume as the kubelet would materialise it.
enum Volume {
    /// A directory prepared in the staging directory, bind-mounted.
    Dir(PathBuf),
    /// `emptyDir` with `medium: Memory`: a tmpfs.
    Tmpfs,
}

impl ChartIstiod {
    /// Starts meshpilot from the rendered Deployment `istiod` in `objects` (already applied to `env`, so
    /// that ConfigMap and Secret volumes and references are read from the API server, as the kubelet
    /// reads them), as pod `pod_name`.
    ///
    /// # Panics
    /// The Deployment has something this cannot materialise (the message names it), or a command fails.
    pub fn start(env: &TestEnv, objects: &[Value], pod_name: &str) -> ChartIstiod {
        let deployment = find(objects, "Deployment", "istiod");
        let pod = &deployment["spec"]["template"]["spec"];
        let container = pod["containers"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == "discovery"))
            .expect("the Deployment's container discovery");
        let service_account = pod["serviceAccountName"].as_str().unwrap_or("default").to_string();
        let staging = tempfile::Builder::new().prefix("meshpilot-chart-pod-").tempdir().unwrap();
        let pod = Pod { env, namespace: NAMESPACE, name: pod_name, service_account: &service_account };

        let mut vars = pod.env(container);
        // The kubelet's service links for the API server (see the module doc) and HOSTNAME.
        let api_port = std::fs::read_to_string(env.dir().join("apiserver.port")).unwrap();
        vars.insert("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into());
        vars.insert("KUBERNETES_SERVICE_PORT".into(), api_port.trim().into());
        vars.insert("KUBERNETES_SERVICE_PORT_HTTPS".into(), api_port.trim().into());
        vars.insert("HOSTNAME".into(), pod_name.into());
        // The image's PATH (Docker's default, as Istio's pilot image keeps it).
        vars.insert("PATH".into(), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());

        let mut volumes: BTreeMap<String, Volume> = BTreeMap::new();
        for (i, volume) in pod_volumes(deployment).iter().enumerate() {
            let name = volume["name"].as_str().expect("a volume's name").to_string();
            let dir = staging.path().join(format!("volume-{i}"));
            volumes.insert(name, pod.volume(volume, &dir));
        }
        let mut mounts: Vec<(String, String, bool)> = Vec::new();
        for m in container["volumeMounts"].as_array().into_iter().flatten() {
            let name = m["name"].as_str().unwrap().to_string();
            assert!(m["subPath"].is_null(), "volume mount {name}: subPath is not materialised");
            mounts.push((name, m["mountPath"].as_str().unwrap().to_string(), m["readOnly"] == true));
        }
        // The service-account volume the kubelet adds (automountServiceAccountToken defaults to true).
        let sa_dir = staging.path().join("kube-api-access");
        pod.service_account_dir(&sa_dir);
        volumes.insert("kube-api-access".into(), Volume::Dir(sa_dir));
        mounts.push(("kube-api-access".into(), "/var/run/secrets/kubernetes.io/serviceaccount".into(), true));

        let script = mount_script(staging.path(), &volumes, &mounts, container);
        let args: Vec<String> = container["args"]
            .as_array()
            .expect("the container's args")
            .iter()
            .map(|a| a.as_str().expect("a string arg").to_string())
            .collect();
        assert!(container["command"].is_null(), "the container's command replaces the image's entrypoint");
        let log = staging.path().join("meshpilot.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "sh", "-c", &script, "sh", "env", "-i"])
            .args(vars.iter().map(|(k, v)| format!("{k}={v}")))
            .arg(env!("CARGO_BIN_EXE_meshpilot"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        ChartIstiod { child, pod_name: pod_name.into(), log, env: vars, args, _staging: staging }
    }

    /// Its output so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
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

/// The volumes of a Deployment's pod template.
fn pod_volumes(deployment: &Value) -> Vec<Value> {
    deployment["spec"]["template"]["spec"]["volumes"].as_array().cloned().unwrap_or_default()
}

/// The shell script run inside the new mount namespace before `exec "$@"`: the host's `/etc` and `/run`
/// (`/var/run`) become overlays whose upper layers are in the staging directory (so mount points can be
/// made without touching the host), each volume is mounted at its mount path, the root is made
/// read-only (`readOnlyRootFilesystem`), and the working directory is `/`.
fn mount_script(
    staging: &Path,
    volumes: &BTreeMap<String, Volume>,
    mounts: &[(String, String, bool)],
    container: &Value,
) -> String {
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let mut s = String::from("set -e\n");
    for (top, name) in [("/etc", "etc"), ("/run", "run")] {
        let (upper, work) = (staging.join(format!("{name}.upper")), staging.join(format!("{name}.work")));
        std::fs::create_dir_all(&upper).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        writeln!(
            s,
            "mount -t overlay overlay -o lowerdir={top},upperdir={},workdir={} {top}",
            q(&upper),
            q(&work)
        )
        .unwrap();
    }
    for (name, path, read_only) in mounts {
        let under_overlay = ["/etc/", "/run/", "/var/run/"].iter().any(|p| path.starts_with(p));
        assert!(
            under_overlay,
            "mount path {path} of volume {name}: only paths under /etc and /var/run are materialised"
        );
        let volume = volumes.get(name).unwrap_or_else(|| panic!("volume mount {name}: no such volume"));
        writeln!(s, "mkdir -p {}", shell_quote(path)).unwrap();
        match volume {
            Volume::Dir(dir) => writeln!(s, "mount --bind {} {}", q(dir), shell_quote(path)).unwrap(),
            Volume::Tmpfs => writeln!(s, "mount -t tmpfs tmpfs {}", shell_quote(path)).unwrap(),
        }
        if *read_only {
            writeln!(s, "mount -o remount,bind,ro {}", shell_quote(path)).unwrap();
        }
    }
    if container["securityContext"]["readOnlyRootFilesystem"] == true {
        s.push_str("mount -o remount,bind,ro /\n");
    }
    s.push_str("cd /\nexec \"$@\"\n");
    s
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The pod being materialised: where it runs and as whom.
struct Pod<'a> {
    env: &'a TestEnv,
    namespace: &'a str,
    name: &'a str,
    service_account: &'a str,
}

impl Pod<'_> {
    /// A token of the pod's ServiceAccount for `audience` (the API server's own when `None`), from a
    /// TokenRequest (`kubectl create token`).
    fn token(&self, audience: Option<&str>, expiration_seconds: Option<u64>) -> String {
        let mut args = vec![
            "create".to_string(),
            "token".into(),
            self.service_account.into(),
            "-n".into(),
            self.namespace.into(),
        ];
        if let Some(audience) = audience {
            args.extend(["--audience".into(), audience.into()]);
        }
        if let Some(seconds) = expiration_seconds {
            args.extend(["--duration".into(), format!("{seconds}s")]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.env.kubectl(&args).unwrap().trim().to_string()
    }

    /// The API object `kind` `name` in the pod's namespace, `None` when it does not exist.
    fn object(&self, kind: &str, name: &str) -> Option<Value> {
        let out = self
            .env
            .kubectl(&["get", kind, name, "-n", self.namespace, "-o", "json", "--ignore-not-found"])
            .unwrap();
        (!out.trim().is_empty()).then(|| serde_json::from_str(&out).unwrap())
    }

    /// The data of a ConfigMap or Secret (decoded), `None` when it does not exist.
    fn data(&self, kind: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
        let object = self.object(kind, name)?;
        let mut out = BTreeMap::new();
        for (k, v) in object["data"].as_object().into_iter().flatten() {
            let text = v.as_str().unwrap_or_default();
            let bytes = if kind == "secret" {
                base64::engine::general_purpose::STANDARD.decode(text).unwrap()
            } else {
                text.as_bytes().to_vec()
            };
            out.insert(k.clone(), bytes);
        }
        Some(out)
    }

    /// The container's environment as the kubelet resolves it: `value`s (with `$(VAR)` references to
    /// earlier variables expanded), `fieldRef`s, `resourceFieldRef`s, and ConfigMap/Secret key
    /// references (an optional one that is missing sets nothing).
    fn env(&self, container: &Value) -> BTreeMap<String, String> {
        let mut vars: BTreeMap<String, String> = BTreeMap::new();
        assert!(container["envFrom"].is_null(), "envFrom is not materialised");
        for e in container["env"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().unwrap().to_string();
            let from = &e["valueFrom"];
            let value = if from.is_null() {
                Some(expand(e["value"].as_str().unwrap_or(""), &vars))
            } else if let Some(path) = from["fieldRef"]["fieldPath"].as_str() {
                Some(match path {
                    "metadata.name" => self.name.to_string(),
                    "metadata.namespace" => self.namespace.to_string(),
                    "spec.serviceAccountName" => self.service_account.to_string(),
                    other => panic!("env {name}: fieldRef {other} is not materialised"),
                })
            } else if !from["resourceFieldRef"].is_null() {
                Some(resource_field(container, &from["resourceFieldRef"], &name))
            } else if let Some(r) =
                from.get("configMapKeyRef").or(from.get("secretKeyRef")).filter(|r| !r.is_null())
            {
                let kind = if from["configMapKeyRef"].is_null() { "secret" } else { "configmap" };
                let (object, key) = (r["name"].as_str().unwrap(), r["key"].as_str().unwrap());
                match self.data(kind, object).and_then(|d| d.get(key).cloned()) {
                    Some(v) => Some(String::from_utf8(v).unwrap()),
                    None if r["optional"] == true => None,
                    None => panic!(
                        "env {name}: {kind} {object} key {key} is missing (the kubelet would not start the container)"
                    ),
                }
            } else {
                panic!("env {name}: valueFrom {from} is not materialised")
            };
            if let Some(value) = value {
                vars.insert(name, value);
            }
        }
        vars
    }

    /// Materialises a pod volume in `dir` (or as a tmpfs).
    fn volume(&self, volume: &Value, dir: &Path) -> Volume {
        let name = volume["name"].as_str().unwrap();
        if let Some(empty) = volume.get("emptyDir") {
            if empty["medium"] == "Memory" {
                return Volume::Tmpfs;
            }
            std::fs::create_dir_all(dir).unwrap();
            return Volume::Dir(dir.to_path_buf());
        }
        std::fs::create_dir_all(dir).unwrap();
        let write = |path: &str, bytes: &[u8]| {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, bytes).unwrap();
        };
        if let Some(secret) = volume.get("secret") {
            let object = secret["secretName"].as_str().unwrap();
            self.source_files("secret", object, secret, name, &write);
        } else if let Some(cm) = volume.get("configMap") {
            let object = cm["name"].as_str().unwrap();
            self.source_files("configmap", object, cm, name, &write);
        } else if let Some(projected) = volume.get("projected") {
            for source in projected["sources"].as_array().into_iter().flatten() {
                if let Some(token) = source.get("serviceAccountToken") {
                    let path = token["path"].as_str().unwrap();
                    write(
                        path,
                        self.token(token["audience"].as_str(), token["expirationSeconds"].as_u64())
                            .as_bytes(),
                    );
                } else if let Some(cm) = source.get("configMap") {
                    self.source_files("configmap", cm["name"].as_str().unwrap(), cm, name, &write);
                } else if let Some(secret) = source.get("secret") {
                    self.source_files("secret", secret["name"].as_str().unwrap(), secret, name, &write);
                } else {
                    panic!("volume {name}: projected source {source} is not materialised");
                }
            }
        } else {
            panic!("volume {name}: {volume} is not materialised");
        }
        Volume::Dir(dir.to_path_buf())
    }

    /// The files of a ConfigMap or Secret volume source (`items` select and rename keys). A missing
    /// optional object gives no files (the kubelet mounts an empty directory); a missing required one
    /// is an error, as the kubelet would not start the pod.
    fn source_files(
        &self,
        kind: &str,
        object: &str,
        source: &Value,
        volume: &str,
        write: &dyn Fn(&str, &[u8]),
    ) {
        let Some(data) = self.data(kind, object) else {
            assert!(
                source["optional"] == true,
                "volume {volume}: {kind} {object} is missing and not optional"
            );
            return;
        };
        match source["items"].as_array() {
            Some(items) => {
                for item in items {
                    let key = item["key"].as_str().unwrap();
                    let path = item["path"].as_str().unwrap_or(key);
                    match data.get(key) {
                        Some(bytes) => write(path, bytes),
                        None => assert!(
                            source["optional"] == true,
                            "volume {volume}: {kind} {object} has no key {key}"
                        ),
                    }
                }
            }
            None => data.iter().for_each(|(k, v)| write(k, v)),
        }
    }

    /// The service-account directory the kubelet mounts at
    /// `/var/run/secrets/kubernetes.io/serviceaccount`: `token` (the API server's default audience),
    /// `ca.crt` (the cluster CA) and `namespace`.
    fn service_account_dir(&self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("token"), self.token(None, None)).unwrap();
        std::fs::copy(self.env.dir().join("pki/ca.crt"), dir.join("ca.crt")).unwrap();
        std::fs::write(dir.join("namespace"), self.namespace).unwrap();
    }
}

/// `$(VAR)` references to variables defined earlier, as the kubelet expands them (`$$` is a literal `$`;
/// an unknown reference stays as written).
fn expand(value: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("$$") {
            out.push('$');
            rest = t;
        } else if let Some(end) = tail.strip_prefix("$(").and_then(|t| t.find(')')) {
            let name = &tail[2..2 + end];
            match vars.get(name) {
                Some(v) => out.push_str(v),
                None => out.push_str(&tail[..3 + end]),
            }
            rest = &tail[3 + end..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// A `resourceFieldRef` as the kubelet resolves it: the container's limit (or request), divided by the
/// divisor and rounded up; an unset `limits.cpu`/`limits.memory` is the node's allocatable amount (here:
/// this machine's CPUs; memory is not materialised).
fn resource_field(container: &Value, r: &Value, env_name: &str) -> String {
    let resource = r["resource"].as_str().unwrap();
    let divisor = r["divisor"].as_str().map_or(1.0, |d| parse_cpu(d, env_name));
    let (section, name) = resource.split_once('.').unwrap();
    match (section, name, container["resources"][section][name].as_str()) {
        (_, "cpu", Some(q)) => ((parse_cpu(q, env_name) / divisor).ceil() as u64).to_string(),
        ("limits", "cpu", None) => {
            let cpus = std::thread::available_parallelism().map_or(1, usize::from) as f64;
            ((cpus / divisor).ceil() as u64).to_string()
        }
        _ => panic!("env {env_name}: resourceFieldRef {resource} is not materialised"),
    }
}

/// A CPU quantity in cores (`500m`, `2`).
fn parse_cpu(q: &str, env_name: &str) -> f64 {
    let value = match q.strip_suffix('m') {
        Some(m) => m.parse::<f64>().map(|v| v / 1000.0),
        None => q.parse::<f64>(),
    };
    value.unwrap_or_else(|_| panic!("env {env_name}: CPU quantity {q:?} is not understood"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expand_follows_the_kubelet() {
        let vars = BTreeMap::from([("A".to_string(), "x".to_string())]);
        assert_eq!(expand("$(A)-$(B)-$$(A)-$", &vars), "x-$(B)-$(A)-$");
    }
}
