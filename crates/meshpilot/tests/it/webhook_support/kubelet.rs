//! A container started on this machine as a kubelet would start it from a pod spec: its `command`/`args`
//! (`$(VAR)` expanded) after the image's entrypoint, its environment (values, field, resource,
//! ConfigMap and Secret references resolved), its volume mounts materialised in a private mount
//! namespace (ConfigMap, Secret, projected service-account tokens, downward API, `emptyDir`), the
//! image's files it needs bind-mounted where the image has them, its user and read-only root, and
//! optionally the pod's own network namespace ([`PodNetwork`]).
//!
//! Used for the chart-rendered istiod Deployment (meshpilot as `discovery`) and for an injected pod's
//! `istio-init` and `istio-proxy` (real pilot-agent and Envoy): `chart_install`.
//!
//! What a kubelet does that this does not: probes, restarts, resource limits (the limits are read for
//! `resourceFieldRef`s only), service links other than the ones a caller adds, seccomp/AppArmor, and
//! capabilities beyond "root keeps them, any other user has none".

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
};

use base64::Engine as _;
use kube_source::testenv::TestEnv;
use serde_json::Value;

/// Docker's default `PATH`, as Istio's images keep it.
pub const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The pod being materialised: where it runs and as whom; `object` is the Pod as stored (or a pod
/// template's `metadata` and `spec`), read for field references and the downward API.
pub struct Pod<'a> {
    /// The API server ConfigMaps, Secrets and tokens come from.
    pub env: &'a TestEnv,
    /// The pod object (`metadata`, `spec`, `status`).
    pub object: Value,
}

/// A volume as the kubelet would materialise it.
pub enum Volume {
    /// A directory prepared in the staging directory, bind-mounted.
    Dir(PathBuf),
    /// `emptyDir` with `medium: Memory`: a tmpfs.
    Tmpfs,
}

/// What the image gives a container besides the pod spec.
#[derive(Default)]
pub struct Image {
    /// The image's entrypoint (an absolute path inside the container).
    pub entrypoint: String,
    /// `(file on this machine, path inside the container)`: bind-mounted read-only, as the image's
    /// layers would have them.
    pub files: Vec<(PathBuf, String)>,
    /// The image's environment (`ENV`), overridden by the container's.
    pub env: BTreeMap<String, String>,
    /// The image's `USER` (uid, gid); `None` is root.
    pub user: Option<(u64, u64)>,
}

/// How one container is started: the pieces of its command line, for tests to read.
pub struct Prepared {
    /// The resolved environment.
    pub env: BTreeMap<String, String>,
    /// The argv after the entrypoint (`args`, `$(VAR)` expanded).
    pub args: Vec<String>,
    command: Command,
}

impl Prepared {
    /// Starts it in its own process group (stopped as a group by [`Running`]'s drop), stdout and
    /// stderr to `log`.
    pub fn spawn(mut self, log: &Path) -> Running {
        let out = std::fs::File::create(log).unwrap();
        self.command.stdout(out.try_clone().unwrap()).stderr(out).stdin(Stdio::null()).process_group(0);
        let child = self.command.spawn().unwrap();
        Running { child, log: log.to_path_buf(), env: self.env, args: self.args }
    }

    /// Runs it to completion (an init container).
    pub fn output(mut self) -> Output {
        self.command.stdin(Stdio::null()).output().unwrap()
    }
}

/// A started container; its process group is killed on drop (nothing of it stays on the host: its
/// mounts live in its own mount namespace).
pub struct Running {
    child: Child,
    /// Its stdout and stderr.
    pub log: PathBuf,
    /// The resolved environment it was started with.
    pub env: BTreeMap<String, String>,
    /// Its argv after the entrypoint.
    pub args: Vec<String>,
}

impl Running {
    /// Its output so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Pod<'_> {
    /// The pod's namespace.
    pub fn namespace(&self) -> &str {
        self.object["metadata"]["namespace"].as_str().unwrap_or("default")
    }

    fn service_account(&self) -> &str {
        self.object["spec"]["serviceAccountName"].as_str().unwrap_or("default")
    }

    /// Prepares `container` of this pod (by name, from `containers` or `initContainers`) with
    /// `image`, staging its volumes under `staging`. `network` is the pod's network namespace, `None`
    /// for the host's (`hostNetwork`, or loopback peers). `extra_env` are variables the kubelet adds
    /// (service links, `HOSTNAME`), before the container's own.
    ///
    /// # Panics
    /// The container is missing or has something this cannot materialise (the message names it).
    pub fn prepare(
        &self,
        container: &str,
        image: &Image,
        staging: &Path,
        network: Option<&PodNetwork>,
        extra_env: &[(&str, &str)],
    ) -> Prepared {
        let spec = &self.object["spec"];
        let container = ["containers", "initContainers"]
            .iter()
            .flat_map(|list| spec[list].as_array().into_iter().flatten())
            .find(|c| c["name"] == container)
            .unwrap_or_else(|| panic!("the pod has no container {container}"));
        std::fs::create_dir_all(staging).unwrap();

        let mut vars = image.env.clone();
        vars.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        vars.insert("HOSTNAME".into(), self.object["metadata"]["name"].as_str().unwrap_or_default().into());
        vars.extend(self.env_of(container, &vars));

        let mut volumes: BTreeMap<String, Volume> = BTreeMap::new();
        for (i, volume) in spec["volumes"].as_array().into_iter().flatten().enumerate() {
            let name = volume["name"].as_str().expect("a volume's name").to_string();
            volumes.insert(name, self.volume(volume, &staging.join(format!("volume-{i}"))));
        }
        let mut mounts: Vec<(String, String, bool)> = Vec::new();
        for m in container["volumeMounts"].as_array().into_iter().flatten() {
            let name = m["name"].as_str().unwrap().to_string();
            assert!(m["subPath"].is_null(), "volume mount {name}: subPath is not materialised");
            mounts.push((name, m["mountPath"].as_str().unwrap().to_string(), m["readOnly"] == true));
        }
        // The service-account volume the kubelet adds when admission did not
        // (automountServiceAccountToken defaults to true).
        const SA_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
        if spec["automountServiceAccountToken"] != false && !mounts.iter().any(|m| m.1 == SA_PATH) {
            let sa_dir = staging.join("kube-api-access");
            self.service_account_dir(&sa_dir);
            volumes.insert("kube-api-access (kubelet)".into(), Volume::Dir(sa_dir));
            mounts.push(("kube-api-access (kubelet)".into(), SA_PATH.into(), true));
        }

        let hosts = network.map(|n| n.hosts.as_slice()).unwrap_or_default();
        let script = mount_script(staging, &volumes, &mounts, &image.files, hosts, container);
        let command_override: Vec<String> = strings(&container["command"]);
        let mut args: Vec<String> = strings(&container["args"]);
        args = args.iter().map(|a| expand(a, &vars)).collect();
        let entrypoint = match command_override.first() {
            Some(c) => {
                let mut rest: Vec<String> = command_override[1..].iter().map(|a| expand(a, &vars)).collect();
                rest.append(&mut args);
                args = rest;
                c.clone()
            }
            None => image.entrypoint.clone(),
        };

        let mut command = match network {
            Some(n) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &n.name, "unshare"]);
                c
            }
            None => Command::new("unshare"),
        };
        command.args(["--mount", "--propagation", "private", "--", "sh", "-c", &script, "sh", "env", "-i"]);
        command.args(vars.iter().map(|(k, v)| format!("{k}={v}")));
        // The user: the container's securityContext, else the pod's, else the image's USER.
        let security = &container["securityContext"];
        let pod_security = &spec["securityContext"];
        let (image_user, image_group) = image.user.unwrap_or((0, 0));
        let user =
            security["runAsUser"].as_u64().or(pod_security["runAsUser"].as_u64()).unwrap_or(image_user);
        let non_root = security["runAsNonRoot"].as_bool().or(pod_security["runAsNonRoot"].as_bool());
        assert!(
            !(non_root == Some(true) && user == 0),
            "container runs as root with runAsNonRoot (the kubelet refuses to start it)"
        );
        if user != 0 {
            let group = security["runAsGroup"]
                .as_u64()
                .or(pod_security["runAsGroup"].as_u64())
                .unwrap_or(if user == image_user { image_group } else { 0 });
            command.args(["/usr/bin/setpriv", &format!("--reuid={user}"), &format!("--regid={group}")]);
            command.args(["--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]);
            if security["allowPrivilegeEscalation"] == false {
                command.arg("--no-new-privs");
            }
        }
        command.arg(&entrypoint).args(&args);
        Prepared { env: vars, args, command }
    }

    /// A token of the pod's ServiceAccount for `audience` (the API server's own when `None`), from a
    /// TokenRequest (`kubectl create token`).
    fn token(&self, audience: Option<&str>, expiration_seconds: Option<u64>) -> String {
        let mut args = vec![
            "create".to_string(),
            "token".into(),
            self.service_account().into(),
            "-n".into(),
            self.namespace().into(),
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

    /// The data of a ConfigMap or Secret (decoded) in the pod's namespace, `None` when it does not
    /// exist.
    fn data(&self, kind: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
        let out = self
            .env
            .kubectl(&["get", kind, name, "-n", self.namespace(), "-o", "json", "--ignore-not-found"])
            .unwrap();
        if out.trim().is_empty() {
            return None;
        }
        let object: Value = serde_json::from_str(&out).unwrap();
        let mut data = BTreeMap::new();
        for (k, v) in object["data"].as_object().into_iter().flatten() {
            let text = v.as_str().unwrap_or_default();
            let bytes = if kind == "secret" {
                base64::engine::general_purpose::STANDARD.decode(text).unwrap()
            } else {
                text.as_bytes().to_vec()
            };
            data.insert(k.clone(), bytes);
        }
        Some(data)
    }

    /// A `fieldRef` path as the kubelet resolves it from the pod (an unset status field is empty, as
    /// for a pod the kubelet has not reported yet).
    ///
    /// # Panics
    /// A path the kubelet does not support in this position.
    fn field(&self, path: &str, what: &str) -> String {
        let o = &self.object;
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        if let Some(key) = path.strip_prefix("metadata.labels['").and_then(|k| k.strip_suffix("']")) {
            return text(&o["metadata"]["labels"][key]);
        }
        if let Some(key) = path.strip_prefix("metadata.annotations['").and_then(|k| k.strip_suffix("']")) {
            return text(&o["metadata"]["annotations"][key]);
        }
        match path {
            "metadata.name" | "metadata.namespace" | "metadata.uid" => {
                text(&o["metadata"][path.trim_start_matches("metadata.")])
            }
            "metadata.labels" | "metadata.annotations" => {
                format_map(&o["metadata"][path.trim_start_matches("metadata.")])
            }
            "spec.serviceAccountName" => self.service_account().to_string(),
            "spec.nodeName" => text(&o["spec"]["nodeName"]),
            "status.podIP" | "status.hostIP" => text(&o["status"][path.trim_start_matches("status.")]),
            "status.podIPs" | "status.hostIPs" => o["status"][path.trim_start_matches("status.")]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| text(&a["ip"]))
                .collect::<Vec<_>>()
                .join(","),
            other => panic!("{what}: fieldRef {other} is not materialised"),
        }
    }

    /// The container's environment as the kubelet resolves it: `value`s (with `$(VAR)` references to
    /// variables defined before, `known` included, expanded), `fieldRef`s, `resourceFieldRef`s, and
    /// ConfigMap/Secret key references (an optional one that is missing sets nothing).
    fn env_of(&self, container: &Value, known: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut vars: BTreeMap<String, String> = known.clone();
        let mut own = BTreeMap::new();
        assert!(container["envFrom"].is_null(), "envFrom is not materialised");
        for e in container["env"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().unwrap().to_string();
            let from = &e["valueFrom"];
            let value = if from.is_null() {
                Some(expand(e["value"].as_str().unwrap_or(""), &vars))
            } else if let Some(path) = from["fieldRef"]["fieldPath"].as_str() {
                Some(self.field(path, &format!("env {name}")))
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
                vars.insert(name.clone(), value.clone());
                own.insert(name, value);
            }
        }
        own
    }

    /// Materialises a pod volume in `dir` (or as a tmpfs). An `emptyDir` is writable by every user,
    /// as the kubelet makes it (mode 0777).
    fn volume(&self, volume: &Value, dir: &Path) -> Volume {
        use std::os::unix::fs::PermissionsExt as _;
        let name = volume["name"].as_str().unwrap();
        if let Some(empty) = volume.get("emptyDir") {
            if empty["medium"] == "Memory" {
                return Volume::Tmpfs;
            }
            std::fs::create_dir_all(dir).unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
            return Volume::Dir(dir.to_path_buf());
        }
        std::fs::create_dir_all(dir).unwrap();
        let write = |path: &str, bytes: &[u8]| {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, bytes).unwrap();
        };
        let downward = |items: &Value| {
            for item in items.as_array().into_iter().flatten() {
                let path = item["path"].as_str().unwrap();
                let field = item["fieldRef"]["fieldPath"]
                    .as_str()
                    .unwrap_or_else(|| panic!("volume {name}: downward API item {item} is not materialised"));
                write(path, self.field(field, &format!("volume {name}")).as_bytes());
            }
        };
        if let Some(secret) = volume.get("secret") {
            let object = secret["secretName"].as_str().unwrap();
            self.source_files("secret", object, secret, name, &write);
        } else if let Some(cm) = volume.get("configMap") {
            let object = cm["name"].as_str().unwrap();
            self.source_files("configmap", object, cm, name, &write);
        } else if let Some(api) = volume.get("downwardAPI") {
            downward(&api["items"]);
        } else if let Some(projected) = volume.get("projected") {
            for source in projected["sources"].as_array().into_iter().flatten() {
                if let Some(token) = source.get("serviceAccountToken") {
                    let path = token["path"].as_str().unwrap();
                    let token = self.token(token["audience"].as_str(), token["expirationSeconds"].as_u64());
                    write(path, token.as_bytes());
                } else if let Some(cm) = source.get("configMap") {
                    self.source_files("configmap", cm["name"].as_str().unwrap(), cm, name, &write);
                } else if let Some(secret) = source.get("secret") {
                    self.source_files("secret", secret["name"].as_str().unwrap(), secret, name, &write);
                } else if let Some(api) = source.get("downwardAPI") {
                    downward(&api["items"]);
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
        std::fs::write(dir.join("namespace"), self.namespace()).unwrap();
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a.as_str().expect("a string in command/args").to_string())
        .collect()
}

/// The top directories made overlays in the container's mount namespace, so that mount points and
/// image files can be placed under them without touching the host.
const OVERLAY_TOPS: [&str; 4] = ["/etc", "/run", "/var/lib", "/usr/local"];

/// The overlay top a container path is under (`/var/run` is `/run` here).
fn overlay_top(path: &str) -> Option<&'static str> {
    let path = path.strip_prefix("/var/run").map_or(path.to_string(), |rest| format!("/run{rest}"));
    OVERLAY_TOPS.into_iter().find(|top| path.starts_with(&format!("{top}/")))
}

/// The shell script run inside the new mount namespace before `exec "$@"`: [`OVERLAY_TOPS`] become
/// overlays whose upper layers are in the staging directory (with `/etc/hosts` extended by `hosts`,
/// as a pod's `hostAliases` would), each volume is mounted at its mount path, each image file is
/// bind-mounted read-only at its path, read-only mounts are made so, then the root
/// (`readOnlyRootFilesystem`), and the working directory is `/`.
fn mount_script(
    staging: &Path,
    volumes: &BTreeMap<String, Volume>,
    mounts: &[(String, String, bool)],
    files: &[(PathBuf, String)],
    hosts: &[(String, String)],
    container: &Value,
) -> String {
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let mut s = String::from("set -e\n");
    for top in OVERLAY_TOPS {
        let name = top.trim_start_matches('/').replace('/', "-");
        let (upper, work) = (staging.join(format!("{name}.upper")), staging.join(format!("{name}.work")));
        std::fs::create_dir_all(&upper).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        if top == "/etc" && !hosts.is_empty() {
            let mut text = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
            for (ip, name) in hosts {
                writeln!(text, "{ip}\t{name}").unwrap();
            }
            std::fs::write(upper.join("hosts"), text).unwrap();
        }
        writeln!(
            s,
            "mount -t overlay overlay -o lowerdir={top},upperdir={},workdir={} {top}",
            q(&upper),
            q(&work)
        )
        .unwrap();
    }
    let mut read_only = Vec::new();
    for (name, path, ro) in mounts {
        assert!(
            overlay_top(path).is_some(),
            "mount path {path} of volume {name}: only paths under {OVERLAY_TOPS:?} are materialised"
        );
        let volume = volumes.get(name).unwrap_or_else(|| panic!("volume mount {name}: no such volume"));
        writeln!(s, "mkdir -p {}", shell_quote(path)).unwrap();
        match volume {
            Volume::Dir(dir) => writeln!(s, "mount --bind {} {}", q(dir), shell_quote(path)).unwrap(),
            Volume::Tmpfs => writeln!(s, "mount -t tmpfs -o mode=0777 tmpfs {}", shell_quote(path)).unwrap(),
        }
        if *ro {
            read_only.push(path.clone());
        }
    }
    for (host, path) in files {
        assert!(overlay_top(path).is_some(), "image file {path}: only paths under {OVERLAY_TOPS:?}");
        let parent = Path::new(path).parent().unwrap().display().to_string();
        writeln!(s, "mkdir -p {} && touch {}", shell_quote(&parent), shell_quote(path)).unwrap();
        writeln!(s, "mount --bind {} {}", q(host), shell_quote(path)).unwrap();
        read_only.push(path.clone());
    }
    for path in read_only {
        writeln!(s, "mount -o remount,bind,ro {}", shell_quote(&path)).unwrap();
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

/// A map as the kubelet writes it in a downward API file (`metadata.labels`, `metadata.annotations`):
/// one `key="value"` line per entry, sorted by key, the value quoted as Go's `%q` quotes it.
fn format_map(map: &Value) -> String {
    let mut lines: Vec<String> = map
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v.as_str().unwrap_or_default())))
        .collect();
    lines.sort();
    lines.join("\n")
}

/// A string quoted as Go's `strconv.Quote` quotes it: `"` and `\` escaped, `\n`, `\t`, `\r` and other
/// control characters escaped, printable characters (any script) kept.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(out, "\\x{:02x}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `$(VAR)` references to variables defined earlier, as the kubelet expands them (`$$` is a literal `$`;
/// an unknown reference stays as written).
pub fn expand(value: &str, vars: &BTreeMap<String, String>) -> String {
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
/// divisor and rounded up; an unset limit is the node's allocatable amount (here: this machine's CPUs,
/// or its `MemTotal`).
fn resource_field(container: &Value, r: &Value, env_name: &str) -> String {
    let resource = r["resource"].as_str().unwrap();
    let (section, name) = resource.split_once('.').unwrap();
    let divisor = r["divisor"].as_str().unwrap_or("1");
    let set = container["resources"][section][name].as_str();
    let amount = match (section, name, set) {
        (_, "cpu", Some(q)) => quantity(q, env_name),
        (_, "memory", Some(q)) => quantity(q, env_name),
        ("limits", "cpu", None) => std::thread::available_parallelism().map_or(1, usize::from) as f64,
        ("limits", "memory", None) => {
            let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
            let kib = meminfo
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .expect("MemTotal in /proc/meminfo");
            kib * 1024.0
        }
        _ => panic!("env {env_name}: resourceFieldRef {resource} is not materialised"),
    };
    ((amount / quantity(divisor, env_name)).ceil() as u64).to_string()
}

/// A Kubernetes quantity (`500m`, `2`, `128Mi`, `1Gi`, `1k`, `1M`) as a number.
fn quantity(q: &str, env_name: &str) -> f64 {
    const SUFFIXES: [(&str, f64); 11] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("m", 0.001),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (number, factor) =
        SUFFIXES.iter().find_map(|(s, f)| q.strip_suffix(s).map(|n| (n, *f))).unwrap_or((q, 1.0));
    let value: f64 =
        number.parse().unwrap_or_else(|_| panic!("env {env_name}: quantity {q:?} is not understood"));
    value * factor
}

/// A pod's network namespace on this machine: `ip netns add`, a veth pair between it and the host
/// (`/30`: the host end `.1` is the pod's gateway and `hostIP`, the pod end `.2` its `podIP`), `lo` up,
/// a default route through the host end. Removed on drop. `hosts` are `/etc/hosts` entries the pod's
/// containers see (as `hostAliases`: here, `istiod.istio-system.svc` at the host end, where the control
/// plane listens on all addresses).
pub struct PodNetwork {
    /// The namespace's name (`ip netns`).
    pub name: String,
    host_link: String,
    /// The host end's address (the pod's `status.hostIP`).
    pub host_ip: String,
    /// The pod's address (`status.podIP`).
    pub pod_ip: String,
    /// `(address, name)` entries added to the containers' `/etc/hosts`.
    pub hosts: Vec<(String, String)>,
}

impl PodNetwork {
    /// Creates it; the subnet `10.233.x.y/30` and the names derive from this process's id and `index`
    /// (at most one per index at a time in a process).
    ///
    /// # Panics
    /// An `ip` command fails (the message has its output).
    pub fn create(index: u8) -> PodNetwork {
        let pid = std::process::id();
        let name = format!("mp-pod-{pid}-{index}");
        let host_link = format!("mph{:x}{index}", pid & 0xfffff);
        let pod_link = format!("mpp{:x}{index}", pid & 0xfffff);
        let subnet = (pid.wrapping_mul(4) + u32::from(index)) & 0x3fff;
        let (third, fourth) = (subnet >> 6, (subnet & 0x3f) << 2);
        let base = format!("10.233.{third}");
        let (host_ip, pod_ip) = (format!("{base}.{}", fourth + 1), format!("{base}.{}", fourth + 2));
        let network = PodNetwork { name, host_link, host_ip, pod_ip, hosts: Vec::new() };
        let ip = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().unwrap();
            assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        };
        let (ns, host, pod) = (network.name.as_str(), network.host_link.as_str(), pod_link.as_str());
        ip(&["netns", "add", ns]);
        ip(&["link", "add", host, "type", "veth", "peer", "name", pod]);
        ip(&["link", "set", pod, "netns", ns]);
        ip(&["addr", "add", &format!("{}/30", network.host_ip), "dev", host]);
        ip(&["link", "set", host, "up"]);
        ip(&["-n", ns, "addr", "add", &format!("{}/30", network.pod_ip), "dev", pod]);
        ip(&["-n", ns, "link", "set", pod, "up"]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        ip(&["-n", ns, "route", "add", "default", "via", &network.host_ip]);
        network
    }

    /// Runs `program args` inside the namespace (as the host's root), e.g. an application's request.
    pub fn exec(&self, program: &str, args: &[&str]) -> Output {
        Command::new("ip").args(["netns", "exec", &self.name, program]).args(args).output().unwrap()
    }
}

impl Drop for PodNetwork {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
        let _ = Command::new("ip").args(["link", "del", &self.host_link]).output();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expand_follows_the_kubelet() {
        let vars = BTreeMap::from([("A".to_string(), "x".to_string())]);
        assert_eq!(expand("$(A)-$(B)-$$(A)-$", &vars), "x-$(B)-$(A)-$");
    }

    #[test]
    fn quantities_and_resource_fields() {
        assert_eq!(quantity("500m", "t"), 0.5);
        assert_eq!(quantity("1Gi", "t"), 1073741824.0);
        assert_eq!(quantity("128Mi", "t"), 134217728.0);
        assert_eq!(quantity("2", "t"), 2.0);
        let container = serde_json::json!({"resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}}});
        let r = |resource: &str, divisor: &str| {
            resource_field(&container, &serde_json::json!({"resource": resource, "divisor": divisor}), "t")
        };
        assert_eq!(r("limits.cpu", "1"), "2", "rounded up");
        assert_eq!(r("limits.memory", "1"), "1073741824");
        assert_eq!(r("limits.memory", "1Mi"), "1024");
    }

    #[test]
    fn downward_api_maps_are_sorted_go_quoted_lines() {
        let map = serde_json::json!({"b": "two \"quoted\"", "a": "line\nbreak", "c": "ünï"});
        assert_eq!(format_map(&map), "a=\"line\\nbreak\"\nb=\"two \\\"quoted\\\"\"\nc=\"ünï\"");
    }

    #[test]
    fn overlay_tops_cover_var_run_through_run() {
        assert_eq!(overlay_top("/var/run/secrets/tokens"), Some("/run"));
        assert_eq!(overlay_top("/var/lib/istio/data"), Some("/var/lib"));
        assert_eq!(overlay_top("/usr/local/bin/envoy"), Some("/usr/local"));
        assert_eq!(overlay_top("/opt/x"), None);
        assert_eq!(overlay_top("/etcetera/x"), None);
    }
}
