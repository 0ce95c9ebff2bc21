//! HTTP, TCP and gRPC probes rewritten to go through the agent (`pkg/kube/inject/app_probe.go`).
//!
//! With mutual TLS the kubelet cannot reach an application's probe endpoints, so istiod points every
//! HTTP, TCP and gRPC probe (and every HTTP/TCP lifecycle hook) of the application containers at the
//! agent's status port (`/app-health/<container>/<readyz|livez|startupz>`,
//! `/app-lifecycle/<container>/<prestopz|poststartz>`), and hands the original probes to the agent as
//! JSON in the proxy container's `ISTIO_KUBE_APP_PROBERS` environment variable.
//!
//! Pods are JSON in the Kubernetes API's field names. The pod is assumed to be one the API server
//! accepted (ports are `int32` numbers or names, probes are objects); where it is not, a field of the
//! wrong type is read as absent rather than rejected.
//!
//! The `ISTIO_KUBE_APP_PROBERS` value is written byte for byte as Go's `encoding/json` writes
//! Istio's `KubeAppProbers` (`map[string]*Prober`): keys sorted, struct fields in the Kubernetes
//! types' declaration order with their `omitempty` rules, `<`, `>`, `&`, U+2028 and U+2029 escaped
//! as `\u003c`-style sequences.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// Name of the proxy container (Istio's `ProxyContainerName`); it is looked for in
/// `spec.containers` first, then in `spec.initContainers` (native sidecars).
pub const PROXY_CONTAINER_NAME: &str = "istio-proxy";

/// The proxy container's environment variable carrying the original probes as JSON
/// (`status.KubeAppProberEnvName` in `pilot/cmd/pilot-agent/status`).
pub const KUBE_APP_PROBERS_ENV: &str = "ISTIO_KUBE_APP_PROBERS";

/// Pod annotation turning the probe rewrite on or off for one pod
/// (`annotation.SidecarRewriteAppHTTPProbers`); a value Go's `strconv.ParseBool` rejects is ignored.
pub const REWRITE_APP_HTTP_PROBERS_ANNOTATION: &str = "sidecar.istio.io/rewriteAppHTTPProbers";

/// Pod annotation overriding the agent's status port the rewritten probes point at
/// (`annotation.SidecarStatusPort`).
pub const STATUS_PORT_ANNOTATION: &str = "status.sidecar.istio.io/port";

/// Pod annotation istiod writes on injection (`annotation.SidecarStatus`); its presence marks a pod
/// as previously injected.
pub const SIDECAR_STATUS_ANNOTATION: &str = "sidecar.istio.io/status";

/// Whether the application probes of a pod are rewritten (Istio's `ShouldRewriteAppHTTPProbers`).
///
/// `annotations` are the pod's `metadata.annotations`; `values_default` is the injector's
/// `sidecarInjectorWebhook.rewriteAppHTTPProbe` value. The annotation
/// [`REWRITE_APP_HTTP_PROBERS_ANNOTATION`] wins when its value is a boolean Go's `strconv.ParseBool`
/// accepts (`1`, `t`, `T`, `TRUE`, `true`, `True`, `0`, `f`, `F`, `FALSE`, `false`, `False`);
/// otherwise (absent, not a string, or another string) `values_default` is returned.
pub fn should_rewrite_app_http_probers(
    annotations: Option<&Map<String, Value>>,
    values_default: bool,
) -> bool {
    annotations
        .and_then(|a| a.get(REWRITE_APP_HTTP_PROBERS_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(go_parse_bool)
        .unwrap_or(values_default)
}

/// The `ISTIO_KUBE_APP_PROBERS` value for a pod (Istio's `DumpAppProbers`), or `None` when no probe
/// is handed to the agent (Go returns `""`).
///
/// Every container of `spec.initContainers` then `spec.containers` except [`PROXY_CONTAINER_NAME`]
/// contributes its readiness, liveness and startup probes (HTTP, TCP or gRPC) and its `preStop` and
/// `postStart` hooks (HTTP or TCP), keyed by the agent path they are rewritten to. A named port is
/// resolved against the container's named `ports` (`containerPort`); a probe whose port name the
/// container does not declare is left out (it is still rewritten by [`patch_rewrite_probes`]), as is
/// an HTTP/TCP probe whose numeric port already is `status_port` (already rewritten). gRPC probes are
/// always kept. `status_port` is the mesh's `defaultConfig.statusPort` (Istio's `int32`; values
/// above `i32::MAX` wrap as Go's conversion would).
///
/// The string is the bytes Go's `json.Marshal` produces for Istio's `KubeAppProbers`.
///
/// The pod is not modified. (Go's version writes the resolved port numbers back into the pod's probes
/// as a side effect; in `applyRewrite` [`patch_rewrite_probes`] overwrites those ports right after,
/// so the result is the same.)
pub fn dump_app_probers(pod: &Value, status_port: u32) -> Option<String> {
    let target = i64::from(status_port as i32);
    let mut out: BTreeMap<String, Option<Prober>> = BTreeMap::new();
    for container in all_containers(pod) {
        let name = str_field(container, "name");
        if name == PROXY_CONTAINER_NAME {
            continue;
        }
        let urls = ProberUrls::new(name);
        let mut named_ports: HashMap<&str, i64> = HashMap::new();
        if let Some(ports) = container.get("ports").and_then(Value::as_array) {
            for port in ports.iter().filter_map(Value::as_object) {
                let port_name = str_field(port, "name");
                if !port_name.is_empty() {
                    named_ports.insert(port_name, int_field(port, "containerPort"));
                }
            }
        }
        let probes = [
            ("readinessProbe", &urls.readyz),
            ("livenessProbe", &urls.livez),
            ("startupProbe", &urls.startupz),
        ];
        for (field, url) in probes {
            let prober = container.get(field).and_then(|p| Prober::from_probe(p, true));
            if let Some(p) = prober.and_then(|p| p.resolve_port(&named_ports, target)) {
                out.insert(url.clone(), Some(p));
            }
        }
        if let Some(lifecycle) = container.get("lifecycle").and_then(Value::as_object) {
            let hooks = [("preStop", &urls.prestopz), ("postStart", &urls.poststartz)];
            for (field, url) in hooks {
                let prober = lifecycle.get(field).and_then(|p| Prober::from_probe(p, false));
                if let Some(p) = prober.and_then(|p| p.resolve_port(&named_ports, target)) {
                    out.insert(url.clone(), Some(p));
                }
            }
        }
    }
    if out.is_empty() { None } else { Some(encode_probers(&out)) }
}

/// Points the application containers' probes and lifecycle hooks at the agent (Istio's
/// `patchRewriteProbe`), in `spec.containers` and `spec.initContainers`, skipping
/// [`PROXY_CONTAINER_NAME`].
///
/// - An `httpGet` probe or hook keeps its other fields; `port` becomes the status port, `path` the
///   agent path, and a `scheme` of `HTTPS` becomes `HTTP` (the agent speaks HTTPS to the app).
/// - A `tcpSocket` probe or hook, and a `grpc` probe, are replaced by
///   `httpGet: {path: <agent path>, port: <status port>}`; the probe's timing fields stay.
/// - Other handlers (`exec`, `sleep`) are untouched.
///
/// The port is `status_port` unless the pod has the annotation [`STATUS_PORT_ANNOTATION`], whose
/// value is then read as Go's `strconv.Atoi` reads it — including Go's results on failure: `0` for
/// a value that is not a number, the clamped `int64` bound for one out of range — and narrowed to
/// `int32` as Go does. A failure is logged (`tracing::error!`), as istiod logs it.
pub fn patch_rewrite_probes(pod: &mut Value, status_port: u32) {
    let port = match pod_annotations(pod).and_then(|a| a.get(STATUS_PORT_ANNOTATION)).and_then(Value::as_str)
    {
        Some(value) => {
            let parsed = go_atoi(value);
            if parsed.is_err() {
                tracing::error!("Invalid annotation {STATUS_PORT_ANNOTATION}={value}: not a valid integer");
            }
            let (Ok(n) | Err(n)) = parsed;
            n as i32
        }
        None => status_port as i32,
    };
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for list in ["containers", "initContainers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            if str_field(container, "name") == PROXY_CONTAINER_NAME {
                continue;
            }
            rewrite_container(container, port);
        }
    }
}

/// istiod's `applyRewrite`: when the pod has a proxy container (see [`PROXY_CONTAINER_NAME`]) and
/// [`should_rewrite_app_http_probers`] says so, hands the probes to the agent
/// ([`dump_app_probers`] into the proxy's `ISTIO_KUBE_APP_PROBERS`, through
/// [`merge_or_append_probers`]) and rewrites them ([`patch_rewrite_probes`]).
///
/// `values_rewrite_default` is the injector's `sidecarInjectorWebhook.rewriteAppHTTPProbe`;
/// `status_port` is the mesh's `defaultConfig.statusPort`. The pod counts as previously injected
/// when it has the annotation [`SIDECAR_STATUS_ANNOTATION`]. Without a proxy container nothing
/// changes. Never fails (istiod's version returns no error either).
pub fn apply_rewrite(pod: &mut Value, values_rewrite_default: bool, status_port: u32) {
    if find_sidecar_mut(pod).is_none() {
        return;
    }
    if !should_rewrite_app_http_probers(pod_annotations(pod), values_rewrite_default) {
        return;
    }
    if let Some(probers) = dump_app_probers(pod, status_port) {
        let previously_injected =
            pod_annotations(pod).is_some_and(|a| a.contains_key(SIDECAR_STATUS_ANNOTATION));
        if let Some(sidecar) = find_sidecar_mut(pod) {
            let env = container_env_mut(sidecar);
            merge_or_append_probers(previously_injected, env, &probers);
        }
    }
    patch_rewrite_probes(pod, status_port);
}

/// Adds `new_probers` (a [`dump_app_probers`] value) to a proxy container's `env` list (Istio's
/// `mergeOrAppendProbers`).
///
/// When the pod was not previously injected, an `{"name": "ISTIO_KUBE_APP_PROBERS", "value": …}`
/// entry is appended, even if one exists. Otherwise the first existing `ISTIO_KUBE_APP_PROBERS`
/// entry is replaced by one whose value merges both maps — an entry already present wins over a new
/// one with the same key — re-encoded as Go encodes it (so fields Istio's `Prober` does not know are
/// dropped); without an existing entry the new one is appended. When either value is not JSON Go's
/// `encoding/json` would decode into `KubeAppProbers`, the list is left unchanged and the failure is
/// logged (`tracing::error!`), as istiod does.
pub fn merge_or_append_probers(previously_injected: bool, env: &mut Vec<Value>, new_probers: &str) {
    let append = |env: &mut Vec<Value>| env.push(env_var(KUBE_APP_PROBERS_ENV, new_probers));
    if !previously_injected {
        append(env);
        return;
    }
    let Some(index) =
        env.iter().position(|e| e.get("name").and_then(Value::as_str) == Some(KUBE_APP_PROBERS_ENV))
    else {
        append(env);
        return;
    };
    let existing = env[index].get("value").and_then(Value::as_str).unwrap_or("");
    let existing = match decode_probers(existing) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("failed to unmarshal existing kubeAppProbers {e}");
            return;
        }
    };
    let mut merged = match decode_probers(new_probers) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("failed to unmarshal new kubeAppProbers {e}");
            return;
        }
    };
    merged.extend(existing);
    env[index] = env_var(KUBE_APP_PROBERS_ENV, &encode_probers(&merged));
}

// ---------------------------------------------------------------------------------------------
// Helpers shared with `prometheus`.

/// The pod's `metadata.annotations`, when it is an object.
pub(crate) fn pod_annotations(pod: &Value) -> Option<&Map<String, Value>> {
    pod.get("metadata")?.get("annotations")?.as_object()
}

/// The pod's `metadata.annotations`, created (with `metadata`) when absent or null; `None` only when
/// the pod, its metadata or its annotations have another JSON type.
pub(crate) fn pod_annotations_mut(pod: &mut Value) -> Option<&mut Map<String, Value>> {
    let pod = pod.as_object_mut()?;
    let metadata = pod
        .entry("metadata")
        .and_modify(|m| {
            if m.is_null() {
                *m = Value::Object(Map::new());
            }
        })
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()?;
    metadata
        .entry("annotations")
        .and_modify(|a| {
            if a.is_null() {
                *a = Value::Object(Map::new());
            }
        })
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
}

fn is_proxy(container: &Value) -> bool {
    container.get("name").and_then(Value::as_str) == Some(PROXY_CONTAINER_NAME)
}

/// The first container named [`PROXY_CONTAINER_NAME`] in `spec.containers`, else in
/// `spec.initContainers` (Istio's `FindSidecar`).
pub(crate) fn find_sidecar(pod: &Value) -> Option<&Map<String, Value>> {
    let spec = pod.get("spec")?;
    ["containers", "initContainers"]
        .into_iter()
        .find_map(|list| spec.get(list)?.as_array()?.iter().find(|c| is_proxy(c))?.as_object())
}

/// [`find_sidecar`], mutable.
pub(crate) fn find_sidecar_mut(pod: &mut Value) -> Option<&mut Map<String, Value>> {
    let spec = pod.get_mut("spec")?.as_object_mut()?;
    let in_containers =
        spec.get("containers").and_then(Value::as_array).is_some_and(|cs| cs.iter().any(is_proxy));
    let list = if in_containers { "containers" } else { "initContainers" };
    spec.get_mut(list)?.as_array_mut()?.iter_mut().find(|c| is_proxy(c))?.as_object_mut()
}

/// A container's `env` list, created when absent or not a list.
pub(crate) fn container_env_mut(container: &mut Map<String, Value>) -> &mut Vec<Value> {
    let env = container.entry("env").or_insert_with(|| Value::Array(Vec::new()));
    if !env.is_array() {
        *env = Value::Array(Vec::new());
    }
    match env {
        Value::Array(list) => list,
        _ => unreachable!("env was just made a list"),
    }
}

/// A Kubernetes `EnvVar` with a literal value.
pub(crate) fn env_var(name: &str, value: &str) -> Value {
    let mut env = Map::new();
    env.insert("name".to_owned(), Value::String(name.to_owned()));
    env.insert("value".to_owned(), Value::String(value.to_owned()));
    Value::Object(env)
}

/// Go's `strconv.ParseBool`.
pub(crate) fn go_parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `strconv.Atoi` on a 64-bit platform: `Ok` with the number, or `Err` with the number Go
/// returns beside its error — `0` for a syntax error, `i64::MAX` / `i64::MIN` when out of range
/// (Go reports whichever problem it meets first, scanning left to right).
pub(crate) fn go_atoi(text: &str) -> Result<i64, i64> {
    let bytes = text.as_bytes();
    let (negative, digits) = match bytes.first() {
        Some(b'+') => (false, &bytes[1..]),
        Some(b'-') => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    let out_of_range = if negative { i64::MIN } else { i64::MAX };
    if digits.is_empty() {
        return Err(0);
    }
    let mut n: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(0);
        }
        match n.checked_mul(10).and_then(|n| n.checked_add(u64::from(c - b'0'))) {
            Some(next) => n = next,
            None => return Err(out_of_range),
        }
    }
    const CUTOFF: u64 = 1 << 63;
    match (negative, n) {
        (false, n) if n >= CUTOFF => Err(i64::MAX),
        (true, n) if n > CUTOFF => Err(i64::MIN),
        (true, n) => Ok((n as i64).wrapping_neg()),
        (false, n) => Ok(n as i64),
    }
}

/// Appends `text` as a JSON string the way Go's `encoding/json` writes it by default: `"` and `\`
/// escaped, `\b \f \n \r \t`, other control characters as `\u00XX`, and the HTML-significant `<`,
/// `>`, `&` plus U+2028 and U+2029 as `\uXXXX` (lower-case hex).
pub(crate) fn write_go_json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

// ---------------------------------------------------------------------------------------------
// The pod side.

fn str_field<'a>(obj: &'a Map<String, Value>, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}

fn int_field(obj: &Map<String, Value>, key: &str) -> i64 {
    obj.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn object_field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    obj.get(key).and_then(Value::as_object)
}

/// `spec.initContainers` then `spec.containers` (Istio's `allContainers`).
fn all_containers(pod: &Value) -> impl Iterator<Item = &Map<String, Value>> {
    let spec = pod.get("spec");
    ["initContainers", "containers"]
        .into_iter()
        .filter_map(move |list| spec?.get(list)?.as_array())
        .flatten()
        .filter_map(Value::as_object)
}

/// The agent paths for one container (Istio's `status.FormatProberURL`).
struct ProberUrls {
    readyz: String,
    livez: String,
    startupz: String,
    prestopz: String,
    poststartz: String,
}

impl ProberUrls {
    fn new(container: &str) -> Self {
        Self {
            readyz: format!("/app-health/{container}/readyz"),
            livez: format!("/app-health/{container}/livez"),
            startupz: format!("/app-health/{container}/startupz"),
            prestopz: format!("/app-lifecycle/{container}/prestopz"),
            poststartz: format!("/app-lifecycle/{container}/poststartz"),
        }
    }
}

fn rewrite_container(container: &mut Map<String, Value>, port: i32) {
    let urls = ProberUrls::new(str_field(container, "name"));
    let probes =
        [("readinessProbe", &urls.readyz), ("livenessProbe", &urls.livez), ("startupProbe", &urls.startupz)];
    for (field, url) in probes {
        if let Some(probe) = container.get_mut(field).and_then(Value::as_object_mut) {
            rewrite_handler(probe, url, port, true);
        }
    }
    if let Some(lifecycle) = container.get_mut("lifecycle").and_then(Value::as_object_mut) {
        let hooks = [("preStop", &urls.prestopz), ("postStart", &urls.poststartz)];
        for (field, url) in hooks {
            if let Some(hook) = lifecycle.get_mut(field).and_then(Value::as_object_mut) {
                rewrite_handler(hook, url, port, false);
            }
        }
    }
}

/// Istio's `convertAppProber` (`grpc` allowed) / `convertAppLifecycleHandler`, in place. The first
/// handler present wins, in Istio's order: `httpGet`, `tcpSocket`, `grpc`.
fn rewrite_handler(handler: &mut Map<String, Value>, url: &str, port: i32, grpc: bool) {
    if let Some(http) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        http.insert("port".to_owned(), Value::from(port));
        http.insert("path".to_owned(), Value::String(url.to_owned()));
        if http.get("scheme").and_then(Value::as_str) == Some("HTTPS") {
            http.insert("scheme".to_owned(), Value::String("HTTP".to_owned()));
        }
        return;
    }
    let replaced = if object_field(handler, "tcpSocket").is_some() {
        "tcpSocket"
    } else if grpc && object_field(handler, "grpc").is_some() {
        "grpc"
    } else {
        return;
    };
    handler.shift_remove(replaced);
    let mut http = Map::new();
    http.insert("path".to_owned(), Value::String(url.to_owned()));
    http.insert("port".to_owned(), Value::from(port));
    handler.insert("httpGet".to_owned(), Value::Object(http));
}

// ---------------------------------------------------------------------------------------------
// Istio's `Prober` and its Go JSON encoding.

/// Kubernetes' `intstr.IntOrString`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum IntOrString {
    Int(i64),
    Str(String),
}

impl Default for IntOrString {
    fn default() -> Self {
        Self::Int(0)
    }
}

impl IntOrString {
    /// As the API server decodes a pod's port: a string is a name, anything else a number.
    fn from_pod(value: Option<&Value>) -> Self {
        match value {
            Some(Value::String(name)) => Self::Str(name.clone()),
            Some(v) => Self::Int(v.as_i64().unwrap_or(0)),
            None => Self::Int(0),
        }
    }

    fn write(&self, out: &mut String) {
        match self {
            Self::Int(n) => {
                let _ = write!(out, "{n}");
            }
            Self::Str(s) => write_go_json_string(out, s),
        }
    }
}

/// `corev1.HTTPGetAction`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct HttpGet {
    path: String,
    port: IntOrString,
    host: String,
    scheme: String,
    /// `httpHeaders`: (name, value).
    headers: Vec<(String, String)>,
}

/// `corev1.TCPSocketAction`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct TcpSocket {
    port: IntOrString,
    host: String,
}

/// `corev1.GRPCAction`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Grpc {
    port: i64,
    service: Option<String>,
}

/// Istio's `Prober`: one probe handed to the agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Prober {
    http_get: Option<HttpGet>,
    tcp_socket: Option<TcpSocket>,
    grpc: Option<Grpc>,
    timeout_seconds: i64,
}

impl Prober {
    /// Istio's `kubeProbeToInternalProber` (`probe` true: a `Probe`, with `grpc` and
    /// `timeoutSeconds`) / `kubeLifecycleHandlerToInternalProber` (a `LifecycleHandler`).
    fn from_probe(value: &Value, probe: bool) -> Option<Self> {
        let obj = value.as_object()?;
        let timeout_seconds = if probe { int_field(obj, "timeoutSeconds") } else { 0 };
        let mut prober = Self { timeout_seconds, ..Self::default() };
        if let Some(http) = object_field(obj, "httpGet") {
            let headers = http
                .get("httpHeaders")
                .and_then(Value::as_array)
                .map(|hs| {
                    hs.iter()
                        .filter_map(Value::as_object)
                        .map(|h| (str_field(h, "name").to_owned(), str_field(h, "value").to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            prober.http_get = Some(HttpGet {
                path: str_field(http, "path").to_owned(),
                port: IntOrString::from_pod(http.get("port")),
                host: str_field(http, "host").to_owned(),
                scheme: str_field(http, "scheme").to_owned(),
                headers,
            });
        } else if let Some(tcp) = object_field(obj, "tcpSocket") {
            prober.tcp_socket = Some(TcpSocket {
                port: IntOrString::from_pod(tcp.get("port")),
                host: str_field(tcp, "host").to_owned(),
            });
        } else if let Some(grpc) = object_field(obj, "grpc").filter(|_| probe) {
            prober.grpc = Some(Grpc {
                port: int_field(grpc, "port"),
                service: grpc.get("service").and_then(Value::as_str).map(str::to_owned),
            });
        } else {
            return None;
        }
        Some(prober)
    }

    /// `updateNamedPort` of Istio's `DumpAppProbers`: gRPC probes pass; a named HTTP/TCP port is
    /// resolved (or the probe dropped when the name is unknown); a numeric one equal to the status
    /// port means the probe was already rewritten, and it is dropped.
    fn resolve_port(mut self, named_ports: &HashMap<&str, i64>, status_port: i64) -> Option<Self> {
        if self.grpc.is_some() {
            return Some(self);
        }
        let port = match (&mut self.http_get, &mut self.tcp_socket) {
            (Some(http), _) => &mut http.port,
            (None, Some(tcp)) => &mut tcp.port,
            (None, None) => return None,
        };
        match port {
            IntOrString::Str(name) => *port = IntOrString::Int(*named_ports.get(name.as_str())?),
            IntOrString::Int(n) if *n == status_port => return None,
            IntOrString::Int(_) => {}
        }
        Some(self)
    }

    /// Go's `json.Marshal` of `*Prober`.
    fn write(&self, out: &mut String) {
        let mut fields = GoObject::new(out);
        if let Some(http) = &self.http_get {
            let out = fields.key("httpGet");
            let mut f = GoObject::new(out);
            if !http.path.is_empty() {
                write_go_json_string(f.key("path"), &http.path);
            }
            http.port.write(f.key("port"));
            if !http.host.is_empty() {
                write_go_json_string(f.key("host"), &http.host);
            }
            if !http.scheme.is_empty() {
                write_go_json_string(f.key("scheme"), &http.scheme);
            }
            if !http.headers.is_empty() {
                let out = f.key("httpHeaders");
                out.push('[');
                for (i, (name, value)) in http.headers.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let mut h = GoObject::new(out);
                    write_go_json_string(h.key("name"), name);
                    write_go_json_string(h.key("value"), value);
                    h.end();
                }
                out.push(']');
            }
            f.end();
        }
        if let Some(tcp) = &self.tcp_socket {
            let mut f = GoObject::new(fields.key("tcpSocket"));
            tcp.port.write(f.key("port"));
            if !tcp.host.is_empty() {
                write_go_json_string(f.key("host"), &tcp.host);
            }
            f.end();
        }
        if let Some(grpc) = &self.grpc {
            let mut f = GoObject::new(fields.key("grpc"));
            let _ = write!(f.key("port"), "{}", grpc.port);
            match &grpc.service {
                Some(s) => write_go_json_string(f.key("service"), s),
                None => f.key("service").push_str("null"),
            }
            f.end();
        }
        if self.timeout_seconds != 0 {
            let _ = write!(fields.key("timeoutSeconds"), "{}", self.timeout_seconds);
        }
        fields.end();
    }
}

/// Writes a JSON object field by field.
pub(crate) struct GoObject<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> GoObject<'a> {
    pub(crate) fn new(out: &'a mut String) -> Self {
        out.push('{');
        Self { out, first: true }
    }

    /// Writes `"key":` (with a leading comma after the first field) and returns the buffer for the
    /// value.
    pub(crate) fn key(&mut self, key: &str) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        write_go_json_string(self.out, key);
        self.out.push(':');
        self.out
    }

    pub(crate) fn end(self) {
        self.out.push('}');
    }
}

/// Go's `json.Marshal` of `KubeAppProbers` (`map[string]*Prober`: keys in byte order, nil as
/// `null`).
fn encode_probers(probers: &BTreeMap<String, Option<Prober>>) -> String {
    let mut out = String::new();
    let mut obj = GoObject::new(&mut out);
    for (key, prober) in probers {
        let value = obj.key(key);
        match prober {
            Some(p) => p.write(value),
            None => value.push_str("null"),
        }
    }
    obj.end();
    out
}

// ---------------------------------------------------------------------------------------------
// Decoding an `ISTIO_KUBE_APP_PROBERS` value as Go's `encoding/json` decodes `KubeAppProbers`.
//
// Go's rules kept: object keys match struct fields exactly or case-insensitively (Unicode simple
// folding, which for these ASCII names also lets U+017F match `s` and U+212A match `k`), the last
// matching key wins, unknown keys are ignored, `null` leaves a value field alone and sets a pointer
// or slice to nil, and a JSON value of the wrong type (a string for a number, a non-integral or
// out-of-range number for an `int32`) is an error.

type Decoded<T> = Result<T, String>;

fn decode_probers(text: &str) -> Decoded<BTreeMap<String, Option<Prober>>> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    match value {
        Value::Null => {}
        Value::Object(map) => {
            for (key, value) in map {
                let prober = match value {
                    Value::Null => None,
                    Value::Object(obj) => Some(decode_prober(&obj)?),
                    other => return Err(type_error(&other, "inject.Prober")),
                };
                out.insert(key, prober);
            }
        }
        other => return Err(type_error(&other, "inject.KubeAppProbers")),
    }
    Ok(out)
}

fn type_error(value: &Value, go_type: &str) -> String {
    format!("json: cannot unmarshal {value} into Go value of type {go_type}")
}

/// Whether a JSON key selects a Go struct field named `field` (ASCII, lower case): equal under
/// Unicode simple case folding.
fn go_fold_matches(key: &str, field: &str) -> bool {
    let mut folded = key.chars().map(|c| match c {
        '\u{17f}' => 's',
        '\u{212a}' => 'k',
        c => c.to_ascii_lowercase(),
    });
    let mut expected = field.chars().map(|c| c.to_ascii_lowercase());
    loop {
        match (folded.next(), expected.next()) {
            (None, None) => return true,
            (Some(a), Some(b)) if a == b => {}
            _ => return false,
        }
    }
}

/// The values of the keys selecting `field`, in document order.
fn matching<'a>(obj: &'a Map<String, Value>, field: &'a str) -> impl Iterator<Item = &'a Value> {
    obj.iter().filter(move |(k, _)| go_fold_matches(k, field)).map(|(_, v)| v)
}

fn decode_string(obj: &Map<String, Value>, field: &str) -> Decoded<String> {
    let mut out = String::new();
    for value in matching(obj, field) {
        match value {
            Value::Null => {}
            Value::String(s) => out = s.clone(),
            other => return Err(type_error(other, "string")),
        }
    }
    Ok(out)
}

fn as_int32(value: &Value) -> Decoded<i64> {
    value.as_i64().filter(|n| i32::try_from(*n).is_ok()).ok_or_else(|| type_error(value, "int32"))
}

fn decode_int32(obj: &Map<String, Value>, field: &str) -> Decoded<i64> {
    let mut out = 0;
    for value in matching(obj, field) {
        if !value.is_null() {
            out = as_int32(value)?;
        }
    }
    Ok(out)
}

/// `intstr.IntOrString.UnmarshalJSON`: a string sets the name; anything else makes the value a
/// number (`null` keeps the number it had).
fn decode_int_or_string(obj: &Map<String, Value>, field: &str) -> Decoded<IntOrString> {
    let (mut int_val, mut out) = (0, IntOrString::Int(0));
    for value in matching(obj, field) {
        out = match value {
            Value::String(s) => IntOrString::Str(s.clone()),
            Value::Null => IntOrString::Int(int_val),
            other => {
                int_val = as_int32(other)?;
                IntOrString::Int(int_val)
            }
        };
    }
    Ok(out)
}

/// A pointer-to-struct field: the last matching key wins, `null` making it nil.
fn decode_pointer<'a>(
    obj: &'a Map<String, Value>,
    field: &'a str,
    go_type: &str,
) -> Decoded<Option<&'a Map<String, Value>>> {
    match matching(obj, field).last() {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(inner)) => Ok(Some(inner)),
        Some(other) => Err(type_error(other, go_type)),
    }
}

fn decode_prober(obj: &Map<String, Value>) -> Decoded<Prober> {
    let http_get = match decode_pointer(obj, "httpGet", "v1.HTTPGetAction")? {
        None => None,
        Some(http) => {
            let headers = match matching(http, "httpHeaders").last() {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|h| match h {
                        Value::Null => Ok((String::new(), String::new())),
                        Value::Object(h) => Ok((decode_string(h, "name")?, decode_string(h, "value")?)),
                        other => Err(type_error(other, "v1.HTTPHeader")),
                    })
                    .collect::<Decoded<_>>()?,
                Some(other) => return Err(type_error(other, "[]v1.HTTPHeader")),
            };
            Some(HttpGet {
                path: decode_string(http, "path")?,
                port: decode_int_or_string(http, "port")?,
                host: decode_string(http, "host")?,
                scheme: decode_string(http, "scheme")?,
                headers,
            })
        }
    };
    let tcp_socket = match decode_pointer(obj, "tcpSocket", "v1.TCPSocketAction")? {
        None => None,
        Some(tcp) => {
            Some(TcpSocket { port: decode_int_or_string(tcp, "port")?, host: decode_string(tcp, "host")? })
        }
    };
    let grpc = match decode_pointer(obj, "grpc", "v1.GRPCAction")? {
        None => None,
        Some(grpc) => Some(Grpc {
            port: decode_int32(grpc, "port")?,
            service: match matching(grpc, "service").last() {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => return Err(type_error(other, "string")),
            },
        }),
    };
    Ok(Prober { http_get, tcp_socket, grpc, timeout_seconds: decode_int32(obj, "timeoutSeconds")? })
}

#[cfg(test)]
mod tests {
    //! Expected values are istiod's: its goldens (`pkg/kube/inject/testdata/inject/*.injected`) and
    //! unit tests (`app_probe_test.go`, `webhook_test.go`) where they cover a case, otherwise the
    //! output of Istio's own functions at the pinned version run on the same pod.

    use serde_json::json;

    use super::*;

    fn proxy() -> Value {
        json!({
            "name": "istio-proxy",
            "image": "proxyv2",
            "readinessProbe": {"httpGet": {"path": "/healthz/ready", "port": 15021}, "periodSeconds": 15},
            "env": [{"name": "ISTIO_META_X", "value": "1"}]
        })
    }

    /// `hello` and `world` of Istio's `hello-probes.yaml`.
    fn hello() -> Value {
        json!({
            "name": "hello",
            "ports": [{"name": "http", "containerPort": 80}],
            "livenessProbe": {"httpGet": {"port": "http"}},
            "readinessProbe": {"httpGet": {"port": 3333}},
            "lifecycle": {"preStop": {"httpGet": {"port": 91}}, "postStart": {"tcpSocket": {"port": 93}}}
        })
    }

    fn world() -> Value {
        json!({
            "name": "world",
            "ports": [{"name": "http", "containerPort": 90}],
            "livenessProbe": {"httpGet": {"port": "http"}},
            "readinessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}
        })
    }

    fn env_values(pod: &Value, name: &str) -> Vec<String> {
        find_sidecar(pod)
            .and_then(|s| s.get("env")?.as_array())
            .into_iter()
            .flatten()
            .filter(|e| e["name"] == name)
            .map(|e| e["value"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
        ["initContainers", "containers"]
            .into_iter()
            .filter_map(|list| pod["spec"][list].as_array())
            .flatten()
            .find(|c| c["name"] == name)
            .expect("container")
    }

    const HELLO_PROBERS: &str = r#"{"/app-health/hello/livez":{"httpGet":{"port":80}},"/app-health/hello/readyz":{"httpGet":{"port":3333}},"/app-health/world/livez":{"httpGet":{"port":90}},"/app-lifecycle/hello/poststartz":{"tcpSocket":{"port":93}},"/app-lifecycle/hello/prestopz":{"httpGet":{"port":91}}}"#;

    #[test]
    fn should_rewrite_annotation_overrides_values_default() {
        let with = |v: Value| {
            let mut m = Map::new();
            m.insert(REWRITE_APP_HTTP_PROBERS_ANNOTATION.to_owned(), v);
            m
        };
        assert!(!should_rewrite_app_http_probers(None, false));
        assert!(should_rewrite_app_http_probers(None, true));
        assert!(!should_rewrite_app_http_probers(Some(&Map::new()), false));
        assert!(should_rewrite_app_http_probers(Some(&Map::new()), true));
        assert!(should_rewrite_app_http_probers(Some(&with(json!("true"))), false));
        assert!(should_rewrite_app_http_probers(Some(&with(json!("true"))), true));
        assert!(!should_rewrite_app_http_probers(Some(&with(json!("false"))), false));
        assert!(!should_rewrite_app_http_probers(Some(&with(json!("false"))), true));
        // strconv.ParseBool's other spellings; anything else falls back to the values setting.
        assert!(should_rewrite_app_http_probers(Some(&with(json!("1"))), false));
        assert!(should_rewrite_app_http_probers(Some(&with(json!("TRUE"))), false));
        assert!(!should_rewrite_app_http_probers(Some(&with(json!("F"))), true));
        assert!(should_rewrite_app_http_probers(Some(&with(json!("yes"))), true));
        assert!(!should_rewrite_app_http_probers(Some(&with(json!("tRUE"))), false));
        assert!(should_rewrite_app_http_probers(Some(&with(json!(false))), true));
    }

    #[test]
    fn find_sidecar_looks_in_containers_then_init_containers() {
        let only = json!({"spec": {"containers": [{"name": "istio-proxy"}]}});
        assert_eq!(find_sidecar(&only).unwrap()["name"], "istio-proxy");
        let app_and = json!({"spec": {"containers": [{"name": "app"}, {"name": "istio-proxy", "x": 1}]}});
        assert_eq!(find_sidecar(&app_and).unwrap()["x"], 1);
        let none = json!({"spec": {"containers": [{"name": "app"}]}});
        assert!(find_sidecar(&none).is_none());
        let mut init = json!({"spec": {"initContainers": [{"name": "istio-proxy", "x": 2}], "containers": [{"name": "app"}]}});
        assert_eq!(find_sidecar(&init).unwrap()["x"], 2);
        assert_eq!(find_sidecar_mut(&mut init).unwrap()["x"], 2);
        let mut both = json!({"spec": {"initContainers": [{"name": "istio-proxy", "x": 2}], "containers": [{"name": "istio-proxy", "x": 1}]}});
        assert_eq!(find_sidecar(&both).unwrap()["x"], 1);
        assert_eq!(find_sidecar_mut(&mut both).unwrap()["x"], 1);
        assert!(find_sidecar(&json!({})).is_none());
    }

    #[test]
    fn dump_resolves_named_ports_and_lifecycle_hooks() {
        // hello-probes.yaml(.injected): the proxy is a native sidecar.
        let pod = json!({"spec": {"containers": [hello(), world()], "initContainers": [proxy()]}});
        assert_eq!(dump_app_probers(&pod, 15020).as_deref(), Some(HELLO_PROBERS));
        // named_port.yaml.
        let named = json!({"spec": {"containers": [{
            "name": "hello",
            "ports": [{"name": "http", "containerPort": 80}],
            "readinessProbe": {"httpGet": {"port": "http"}}
        }]}});
        assert_eq!(
            dump_app_probers(&named, 15020).as_deref(),
            Some(r#"{"/app-health/hello/readyz":{"httpGet":{"port":80}}}"#)
        );
    }

    #[test]
    fn dump_keeps_the_https_scheme_for_the_agent() {
        // https-probes.yaml(.injected).
        let mut hello = hello();
        hello["readinessProbe"] = json!({"httpGet": {"port": 3333, "scheme": "HTTPS"}});
        hello.as_object_mut().unwrap().remove("lifecycle");
        let pod = json!({"spec": {"containers": [hello, world(), proxy()]}});
        assert_eq!(
            dump_app_probers(&pod, 15020).as_deref(),
            Some(
                r#"{"/app-health/hello/livez":{"httpGet":{"port":80}},"/app-health/hello/readyz":{"httpGet":{"port":3333,"scheme":"HTTPS"}},"/app-health/world/livez":{"httpGet":{"port":90}}}"#
            )
        );
    }

    #[test]
    fn dump_tcp_probes() {
        // tcp-probes.yaml(.injected).
        let pod = json!({"spec": {"containers": [{
            "name": "hello",
            "ports": [{"name": "http", "containerPort": 80}],
            "livenessProbe": {"tcpSocket": {"port": "http"}},
            "readinessProbe": {"tcpSocket": {"port": 3333}}
        }, proxy()]}});
        assert_eq!(
            dump_app_probers(&pod, 15020).as_deref(),
            Some(
                r#"{"/app-health/hello/livez":{"tcpSocket":{"port":80}},"/app-health/hello/readyz":{"tcpSocket":{"port":3333}}}"#
            )
        );
    }

    #[test]
    fn dump_grpc_probes() {
        // TestDumpAppGRPCProbers.
        let pod =
            json!({"spec": {"containers": [{"name": "foo", "livenessProbe": {"grpc": {"port": 1234}}}]}});
        assert_eq!(
            dump_app_probers(&pod, 15020).as_deref(),
            Some(r#"{"/app-health/foo/livez":{"grpc":{"port":1234,"service":null}}}"#)
        );
        let pod = json!({"spec": {"containers": [{"name": "bar", "readinessProbe": {"grpc": {"port": 1234, "service": "foo"}}}]}});
        assert_eq!(
            dump_app_probers(&pod, 15020).as_deref(),
            Some(r#"{"/app-health/bar/readyz":{"grpc":{"port":1234,"service":"foo"}}}"#)
        );
        let pod = json!({"spec": {"containers": [{
            "name": "foo",
            "startupProbe": {"grpc": {"port": 1234, "service": "foo"}, "timeoutSeconds": 10},
            "lifecycle": {"preStop": {"httpGet": {"path": "/foo", "port": 1234, "host": "foo", "scheme": "HTTP"}}}
        }]}});
        assert_eq!(
            dump_app_probers(&pod, 15020).as_deref(),
            Some(
                r#"{"/app-health/foo/startupz":{"grpc":{"port":1234,"service":"foo"},"timeoutSeconds":10},"/app-lifecycle/foo/prestopz":{"httpGet":{"path":"/foo","port":1234,"host":"foo","scheme":"HTTP"}}}"#
            )
        );
    }

    #[test]
    fn dump_writes_go_json_and_drops_unresolvable_ports() {
        let pod = json!({"spec": {"containers": [{
            "name": "app",
            "ports": [{"name": "web", "containerPort": 8080}],
            "readinessProbe": {
                "httpGet": {
                    "path": "/h?a=1&b=<2>", "port": "web", "host": "ex\u{2028}\u{e9}", "scheme": "HTTPS",
                    "httpHeaders": [{"name": "X-A", "value": "a&b\"\\\u{8}\u{c}\u{1}\u{7f}"}, {"name": "X-B", "value": ""}]
                },
                "timeoutSeconds": 3, "periodSeconds": 7
            },
            // A port name the container does not declare, and a number written as a string (a name
            // to Kubernetes): both left out, though the probes are still rewritten.
            "livenessProbe": {"httpGet": {"port": "metrics"}},
            "startupProbe": {"httpGet": {"port": "8080"}},
            "lifecycle": {"preStop": {"tcpSocket": {"port": 15020}}, "postStart": {"tcpSocket": {"port": "web", "host": "h"}}}
        }, proxy()]}});
        let want = concat!(
            r#"{"/app-health/app/readyz":{"httpGet":{"path":"/h?a=1\u0026b=\u003c2\u003e","port":8080,"#,
            r#""host":"ex\u2028"#,
            "\u{e9}",
            r#"","scheme":"HTTPS","httpHeaders":[{"name":"X-A","value":"a\u0026b\"\\\b\f\u0001"#,
            "\u{7f}",
            r#""},{"name":"X-B","value":""}]},"timeoutSeconds":3},"#,
            r#""/app-lifecycle/app/poststartz":{"tcpSocket":{"port":8080,"host":"h"}}}"#
        );
        assert_eq!(dump_app_probers(&pod, 15020).as_deref(), Some(want));
    }

    #[test]
    fn dump_includes_init_containers() {
        let pod = json!({"spec": {
            "initContainers": [{"name": "setup", "restartPolicy": "Always", "startupProbe": {"tcpSocket": {"port": 5432}, "timeoutSeconds": 2}}],
            "containers": [proxy(), {"name": "main", "readinessProbe": {"httpGet": {"port": 8000, "path": "/r"}}}]
        }});
        assert_eq!(
            dump_app_probers(&pod, 15020).as_deref(),
            Some(
                r#"{"/app-health/main/readyz":{"httpGet":{"path":"/r","port":8000}},"/app-health/setup/startupz":{"tcpSocket":{"port":5432},"timeoutSeconds":2}}"#
            )
        );
    }

    #[test]
    fn dump_is_none_without_probes_to_hand_over() {
        let exec_only = json!({"spec": {"containers": [{
            "name": "w", "readinessProbe": {"exec": {"command": ["true"]}}, "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}
        }, proxy()]}});
        assert_eq!(dump_app_probers(&exec_only, 15020), None);
        let rewritten = json!({"spec": {"containers": [{
            "name": "x", "livenessProbe": {"httpGet": {"path": "/app-health/x/livez", "port": 15020}}
        }]}});
        assert_eq!(dump_app_probers(&rewritten, 15020), None);
        assert_eq!(dump_app_probers(&json!({}), 15020), None);
    }

    #[test]
    fn dump_status_port_check_applies_to_http_and_tcp_only() {
        let grpc =
            json!({"spec": {"containers": [{"name": "g", "readinessProbe": {"grpc": {"port": 15020}}}]}});
        assert_eq!(
            dump_app_probers(&grpc, 15020).as_deref(),
            Some(r#"{"/app-health/g/readyz":{"grpc":{"port":15020,"service":null}}}"#)
        );
        let custom = json!({"spec": {"containers": [{
            "name": "c", "readinessProbe": {"httpGet": {"port": 15020}}, "livenessProbe": {"httpGet": {"port": 15999}}
        }]}});
        assert_eq!(
            dump_app_probers(&custom, 15999).as_deref(),
            Some(r#"{"/app-health/c/readyz":{"httpGet":{"port":15020}}}"#)
        );
    }

    #[test]
    fn dump_last_port_of_a_name_wins() {
        let pod = json!({"spec": {"containers": [{
            "name": "d",
            "ports": [{"name": "p", "containerPort": 1}, {"name": "p", "containerPort": 2}, {"containerPort": 3}],
            "readinessProbe": {"httpGet": {"port": "p"}}
        }]}});
        assert_eq!(
            dump_app_probers(&pod, 15020).as_deref(),
            Some(r#"{"/app-health/d/readyz":{"httpGet":{"port":2}}}"#)
        );
    }

    #[test]
    fn patch_grpc_probes_become_http_gets() {
        // TestPatchRewriteProbe.
        let mut no_probes = json!({"spec": {"containers": [{"name": "foo"}]}});
        patch_rewrite_probes(&mut no_probes, 15020);
        assert_eq!(no_probes, json!({"spec": {"containers": [{"name": "foo"}]}}));

        let mut pod = json!({"spec": {"containers": [
            {
                "name": "foo",
                "livenessProbe": {"grpc": {"port": 1234, "service": "foo"}},
                "readinessProbe": {"grpc": {"port": 1235, "service": "foo"}, "timeoutSeconds": 10}
            },
            {
                "name": "bar",
                "startupProbe": {"grpc": {"port": 1236}, "timeoutSeconds": 20, "periodSeconds": 10, "initialDelaySeconds": 10}
            }
        ]}});
        patch_rewrite_probes(&mut pod, 15020);
        assert_eq!(
            pod,
            json!({"spec": {"containers": [
                {
                    "name": "foo",
                    "livenessProbe": {"httpGet": {"path": "/app-health/foo/livez", "port": 15020}},
                    "readinessProbe": {"httpGet": {"path": "/app-health/foo/readyz", "port": 15020}, "timeoutSeconds": 10}
                },
                {
                    "name": "bar",
                    "startupProbe": {
                        "httpGet": {"path": "/app-health/bar/startupz", "port": 15020},
                        "timeoutSeconds": 20, "periodSeconds": 10, "initialDelaySeconds": 10
                    }
                }
            ]}})
        );
    }

    #[test]
    fn patch_http_tcp_probes_and_lifecycle_hooks() {
        let mut pod = json!({"spec": {"containers": [{
            "name": "lc",
            "readinessProbe": {
                "httpGet": {"path": "/ready", "port": 8443, "scheme": "HTTPS", "host": "h", "httpHeaders": [{"name": "A", "value": "b"}]},
                "failureThreshold": 3
            },
            "livenessProbe": {"tcpSocket": {"port": 9000, "host": "h2"}, "timeoutSeconds": 4},
            "startupProbe": {"exec": {"command": ["true"]}},
            "lifecycle": {"preStop": {"tcpSocket": {"port": 91, "host": "x"}}, "postStart": {"exec": {"command": ["sh"]}}}
        }, proxy()]}});
        patch_rewrite_probes(&mut pod, 15020);
        assert_eq!(
            pod["spec"]["containers"][0],
            json!({
                "name": "lc",
                "readinessProbe": {
                    "httpGet": {"path": "/app-health/lc/readyz", "port": 15020, "scheme": "HTTP", "host": "h", "httpHeaders": [{"name": "A", "value": "b"}]},
                    "failureThreshold": 3
                },
                "livenessProbe": {"httpGet": {"path": "/app-health/lc/livez", "port": 15020}, "timeoutSeconds": 4},
                "startupProbe": {"exec": {"command": ["true"]}},
                "lifecycle": {
                    "preStop": {"httpGet": {"path": "/app-lifecycle/lc/prestopz", "port": 15020}},
                    "postStart": {"exec": {"command": ["sh"]}}
                }
            })
        );
        assert_eq!(pod["spec"]["containers"][1], proxy());
    }

    #[test]
    fn patch_reads_the_status_port_annotation_like_go_atoi() {
        for (annotation, port) in [
            ("123", 123),
            ("+15021", 15021),
            ("-5", -5),
            // Go's strconv.Atoi gives 0 on a syntax error…
            ("abc", 0),
            ("", 0),
            // …and the clamped int64 on overflow (even before a bad character), which int32()
            // narrows to -1; a value past 2^32 wraps.
            ("99999999999999999999", -1),
            ("99999999999999999999x", -1),
            ("4294967297", 1),
        ] {
            let mut pod = json!({
                "metadata": {"annotations": {STATUS_PORT_ANNOTATION: annotation}},
                "spec": {"containers": [{"name": "s", "readinessProbe": {"httpGet": {"port": 80}}}]}
            });
            patch_rewrite_probes(&mut pod, 15020);
            assert_eq!(
                pod["spec"]["containers"][0]["readinessProbe"]["httpGet"],
                json!({"path": "/app-health/s/readyz", "port": port}),
                "{annotation:?}"
            );
        }
    }

    #[test]
    fn patch_skips_every_proxy_container() {
        let mut pod = json!({"spec": {
            "initContainers": [proxy()],
            "containers": [proxy(), {"name": "s", "readinessProbe": {"httpGet": {"port": 80}}}]
        }});
        patch_rewrite_probes(&mut pod, 15020);
        assert_eq!(pod["spec"]["initContainers"][0], proxy());
        assert_eq!(pod["spec"]["containers"][0], proxy());
        assert_eq!(
            pod["spec"]["containers"][1]["readinessProbe"],
            json!({"httpGet": {"path": "/app-health/s/readyz", "port": 15020}})
        );
    }

    #[test]
    fn apply_rewrite_hands_probes_to_a_native_sidecar() {
        // hello-probes.yaml.injected.
        let mut pod = json!({"spec": {"containers": [hello(), world()], "initContainers": [proxy()]}});
        apply_rewrite(&mut pod, true, 15020);
        assert_eq!(
            pod["spec"]["initContainers"][0]["env"],
            json!([{"name": "ISTIO_META_X", "value": "1"}, {"name": KUBE_APP_PROBERS_ENV, "value": HELLO_PROBERS}])
        );
        assert_eq!(
            container(&pod, "hello"),
            &json!({
                "name": "hello",
                "ports": [{"name": "http", "containerPort": 80}],
                "livenessProbe": {"httpGet": {"path": "/app-health/hello/livez", "port": 15020}},
                "readinessProbe": {"httpGet": {"path": "/app-health/hello/readyz", "port": 15020}},
                "lifecycle": {
                    "preStop": {"httpGet": {"path": "/app-lifecycle/hello/prestopz", "port": 15020}},
                    "postStart": {"httpGet": {"path": "/app-lifecycle/hello/poststartz", "port": 15020}}
                }
            })
        );
        assert_eq!(
            container(&pod, "world")["livenessProbe"],
            json!({"httpGet": {"path": "/app-health/world/livez", "port": 15020}})
        );
        assert_eq!(container(&pod, "world")["readinessProbe"], world()["readinessProbe"]);
        assert_eq!(container(&pod, "istio-proxy")["readinessProbe"], proxy()["readinessProbe"]);
    }

    #[test]
    fn apply_rewrite_annotation_turns_the_rewrite_off_and_on() {
        // hello-probes-with-flag-unset-in-annotation.yaml: nothing changes.
        let off = json!({
            "metadata": {"annotations": {REWRITE_APP_HTTP_PROBERS_ANNOTATION: "false"}},
            "spec": {"containers": [hello(), proxy()]}
        });
        let mut pod = off.clone();
        apply_rewrite(&mut pod, true, 15020);
        assert_eq!(pod, off);
        // Off in the injector values, no annotation: nothing changes.
        let plain = json!({"spec": {"containers": [hello(), proxy()]}});
        let mut pod = plain.clone();
        apply_rewrite(&mut pod, false, 15020);
        assert_eq!(pod, plain);
        // Off in the values, on in the annotation.
        let mut pod = json!({
            "metadata": {"annotations": {REWRITE_APP_HTTP_PROBERS_ANNOTATION: "true"}},
            "spec": {"containers": [hello(), proxy()]}
        });
        apply_rewrite(&mut pod, false, 15020);
        assert_eq!(
            env_values(&pod, KUBE_APP_PROBERS_ENV),
            [
                r#"{"/app-health/hello/livez":{"httpGet":{"port":80}},"/app-health/hello/readyz":{"httpGet":{"port":3333}},"/app-lifecycle/hello/poststartz":{"tcpSocket":{"port":93}},"/app-lifecycle/hello/prestopz":{"httpGet":{"port":91}}}"#
            ]
        );
        assert_eq!(
            container(&pod, "hello")["livenessProbe"],
            json!({"httpGet": {"path": "/app-health/hello/livez", "port": 15020}})
        );
    }

    fn previously_injected_proxy() -> Value {
        json!({"name": "istio-proxy", "env": [
            {"name": "JWT_POLICY", "value": "third-party-jwt"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": KUBE_APP_PROBERS_ENV, "value": r#"{"/app-health/hello/livez":{"httpGet":{"port":80}},"/app-health/hello/readyz":{"httpGet":{"port":3333}},"/app-health/world/livez":{"httpGet":{"port":90}}}"#},
            {"name": "TRUST_DOMAIN", "value": "cluster.local"}
        ]})
    }

    fn new_container() -> Value {
        json!({
            "name": "new",
            "ports": [{"name": "http", "containerPort": 8008}],
            "livenessProbe": {"httpGet": {"path": "/testLive", "port": 8008}},
            "readinessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}
        })
    }

    const STATUS: &str = r#"{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":[],"imagePullSecrets":null,"revision":"default"}"#;

    #[test]
    fn apply_rewrite_merges_into_a_previous_injection() {
        // merge-probers.yaml(.injected): hello and world were rewritten by the first injection.
        let mut pod = json!({
            "metadata": {"annotations": {SIDECAR_STATUS_ANNOTATION: STATUS}},
            "spec": {"containers": [
                previously_injected_proxy(),
                {
                    "name": "hello",
                    "ports": [{"name": "http", "containerPort": 80}],
                    "livenessProbe": {"httpGet": {"path": "/app-health/hello/livez", "port": 15020}},
                    "readinessProbe": {"httpGet": {"path": "/app-health/hello/readyz", "port": 15020}}
                },
                new_container()
            ]}
        });
        apply_rewrite(&mut pod, true, 15020);
        let mut want = previously_injected_proxy();
        want["env"][2]["value"] = json!(
            r#"{"/app-health/hello/livez":{"httpGet":{"port":80}},"/app-health/hello/readyz":{"httpGet":{"port":3333}},"/app-health/new/livez":{"httpGet":{"path":"/testLive","port":8008}},"/app-health/world/livez":{"httpGet":{"port":90}}}"#
        );
        assert_eq!(container(&pod, "istio-proxy"), &want);
        assert_eq!(
            container(&pod, "new")["livenessProbe"],
            json!({"httpGet": {"path": "/app-health/new/livez", "port": 15020}})
        );
    }

    #[test]
    fn apply_rewrite_merge_keeps_the_previous_entry_of_a_probe() {
        // istiod lets the old entry win: the changed readiness probe's new target is not recorded.
        let mut pod = json!({
            "metadata": {"annotations": {SIDECAR_STATUS_ANNOTATION: STATUS}},
            "spec": {"containers": [
                previously_injected_proxy(),
                {"name": "hello", "readinessProbe": {"httpGet": {"port": 4444, "path": "/new"}}}
            ]}
        });
        apply_rewrite(&mut pod, true, 15020);
        assert_eq!(container(&pod, "istio-proxy"), &previously_injected_proxy());
        assert_eq!(
            container(&pod, "hello")["readinessProbe"],
            json!({"httpGet": {"path": "/app-health/hello/readyz", "port": 15020}})
        );
    }

    #[test]
    fn apply_rewrite_appends_unless_previously_injected_with_the_env() {
        // Previously injected, but the proxy has no ISTIO_KUBE_APP_PROBERS: appended.
        let mut pod = json!({
            "metadata": {"annotations": {SIDECAR_STATUS_ANNOTATION: STATUS}},
            "spec": {"containers": [{"name": "istio-proxy"}, {"name": "s", "readinessProbe": {"httpGet": {"port": 80}}}]}
        });
        apply_rewrite(&mut pod, true, 15020);
        assert_eq!(
            container(&pod, "istio-proxy"),
            &json!({"name": "istio-proxy", "env": [
                {"name": KUBE_APP_PROBERS_ENV, "value": r#"{"/app-health/s/readyz":{"httpGet":{"port":80}}}"#}
            ]})
        );
        // Not marked as injected: a second entry is appended beside the existing one.
        let mut pod = json!({"spec": {"containers": [previously_injected_proxy(), new_container()]}});
        apply_rewrite(&mut pod, true, 15020);
        let env = &container(&pod, "istio-proxy")["env"];
        assert_eq!(env.as_array().unwrap().len(), 5);
        assert_eq!(env[2], previously_injected_proxy()["env"][2]);
        assert_eq!(
            env[4],
            json!({"name": KUBE_APP_PROBERS_ENV, "value": r#"{"/app-health/new/livez":{"httpGet":{"path":"/testLive","port":8008}}}"#})
        );
    }

    #[test]
    fn apply_rewrite_without_a_sidecar_changes_nothing() {
        let original = json!({"spec": {"containers": [hello(), world()]}});
        let mut pod = original.clone();
        apply_rewrite(&mut pod, true, 15020);
        assert_eq!(pod, original);
    }

    #[test]
    fn apply_rewrite_repoints_a_probe_already_on_the_status_port() {
        // Nothing to hand over, yet the probe's path is still rewritten.
        let mut pod = json!({"spec": {"containers": [
            {"name": "istio-proxy"},
            {"name": "x", "livenessProbe": {"httpGet": {"path": "/foo", "port": 15020}}}
        ]}});
        apply_rewrite(&mut pod, true, 15020);
        assert_eq!(
            pod,
            json!({"spec": {"containers": [
                {"name": "istio-proxy"},
                {"name": "x", "livenessProbe": {"httpGet": {"path": "/app-health/x/livez", "port": 15020}}}
            ]}})
        );
    }

    fn probers_env(value: &str) -> Value {
        json!({"name": KUBE_APP_PROBERS_ENV, "value": value})
    }

    const BAR_FOO: &str = r#"{"/app-health/bar/livez":{"httpGet":{"path":"/","port":9000,"scheme":"HTTP"}},"/app-health/foo/livez":{"httpGet":{"path":"/","port":8000,"scheme":"HTTP"}}}"#;
    const BAR: &str = r#"{"/app-health/bar/livez":{"httpGet":{"path":"/","port":9000,"scheme":"HTTP"}}}"#;
    const FOO: &str = r#"{"/app-health/foo/livez":{"httpGet":{"path":"/","port":8000,"scheme":"HTTP"}}}"#;

    #[test]
    fn merge_or_append_probers_istio_cases() {
        // TestMergeOrAppendProbers.
        let mut env = Vec::new();
        merge_or_append_probers(false, &mut env, BAR_FOO);
        assert_eq!(env, [probers_env(BAR_FOO)]);

        let one = json!({"name": "TEST_ENV_VAR1", "value": "value1"});
        let two = json!({"name": "TEST_ENV_VAR2", "value": "value2"});
        let mut env = vec![one.clone(), probers_env(FOO), two.clone()];
        merge_or_append_probers(true, &mut env, BAR);
        assert_eq!(env, [one.clone(), probers_env(BAR_FOO), two.clone()]);

        let mut env = vec![one.clone(), two.clone()];
        merge_or_append_probers(true, &mut env, BAR);
        assert_eq!(env, [one, two, probers_env(BAR)]);
    }

    #[test]
    fn merge_decodes_and_reencodes_the_existing_value_as_go_does() {
        let mut env = vec![probers_env(r#"{"/app-health/foo/livez":{"httpGet":{"port":1}}}"#)];
        merge_or_append_probers(
            true,
            &mut env,
            r#"{"/app-health/foo/livez":{"httpGet":{"port":2}},"/app-health/foo/readyz":{"tcpSocket":{"port":3}}}"#,
        );
        assert_eq!(
            env,
            [probers_env(
                r#"{"/app-health/foo/livez":{"httpGet":{"port":1}},"/app-health/foo/readyz":{"tcpSocket":{"port":3}}}"#
            )]
        );

        // Case-insensitive keys (with Unicode folding: U+017F, U+212A), unknown keys dropped, null
        // entries kept, null leaving a number alone, and valueFrom replaced.
        let existing = concat!(
            r#" { "/app-health/a/livez" : {"HTTPGET":{"Port":"http","extra":1,"#,
            "\"\u{17f}cheme\"",
            r#":"HTTPS","httpheaders":[{"NAME":"n"},null]},"timeoutSeconds":5,"TimeoutSeconds":null},"#,
            r#" "/app-health/z/readyz": null, "/app-health/k/livez": {""#,
            "tcpSoc\u{212a}et",
            r#"": {"port": 7, "host": "<h>"}}, "/app-health/g/livez": {"grpc": {"port": 9, "service": null}, "unknown": [1]}}"#
        );
        let mut existing_env = probers_env(existing);
        existing_env["valueFrom"] = json!({"fieldRef": {"fieldPath": "x"}});
        let mut env = vec![existing_env];
        merge_or_append_probers(true, &mut env, r#"{"/app-health/b/livez":{"httpGet":{"port":2}}}"#);
        assert_eq!(
            env,
            [probers_env(concat!(
                r#"{"/app-health/a/livez":{"httpGet":{"port":"http","scheme":"HTTPS","httpHeaders":[{"name":"n","value":""},{"name":"","value":""}]},"timeoutSeconds":5},"#,
                r#""/app-health/b/livez":{"httpGet":{"port":2}},"/app-health/g/livez":{"grpc":{"port":9,"service":null}},"#,
                r#""/app-health/k/livez":{"tcpSocket":{"port":7,"host":"\u003ch\u003e"}},"/app-health/z/readyz":null}"#
            ))]
        );

        for (existing, merged_x) in [
            // A whole-value null is an empty map.
            ("null", None),
            // A null port is the number 0, even after a name.
            (
                r#"{"/x":{"httpGet":{"port":null,"path":"/p"}}}"#,
                Some(r#"{"httpGet":{"path":"/p","port":0}}"#),
            ),
            (r#"{"/x":{"tcpSocket":{"port":"a","PORT":null}}}"#, Some(r#"{"tcpSocket":{"port":0}}"#)),
            // Go takes the last key naming a field, exact or folded.
            (r#"{"/x":{"tcpSocket":{"port":1,"Port":2}}}"#, Some(r#"{"tcpSocket":{"port":2}}"#)),
        ] {
            let mut env = vec![probers_env(existing)];
            merge_or_append_probers(true, &mut env, BAR_FOO);
            let want = match merged_x {
                None => BAR_FOO.to_owned(),
                Some(x) => format!("{},\"/x\":{x}}}", &BAR_FOO[..BAR_FOO.len() - 1]),
            };
            assert_eq!(env, [probers_env(&want)], "{existing}");
        }
    }

    #[test]
    fn merge_leaves_env_alone_when_go_cannot_decode_the_existing_value() {
        for existing in [
            "not json",
            r#"{"/x":{"timeoutSeconds":"5"}}"#,
            r#"{"/x":{"timeoutSeconds":1.0}}"#,
            r#"{"/x":{"grpc":{"port":2147483648}}}"#,
            "[]",
            r#"{"/x":"y"}"#,
            "",
        ] {
            let mut env = vec![probers_env(existing)];
            let before = env.clone();
            merge_or_append_probers(true, &mut env, BAR_FOO);
            assert_eq!(env, before, "{existing}");
        }
        let mut env = vec![json!({"name": KUBE_APP_PROBERS_ENV})];
        merge_or_append_probers(true, &mut env, BAR_FOO);
        assert_eq!(env, [json!({"name": KUBE_APP_PROBERS_ENV})]);
    }

    #[test]
    fn go_atoi_matches_strconv() {
        assert_eq!(go_atoi("15020"), Ok(15020));
        assert_eq!(go_atoi("+7"), Ok(7));
        assert_eq!(go_atoi("-0"), Ok(0));
        assert_eq!(go_atoi("007"), Ok(7));
        assert_eq!(go_atoi("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(go_atoi("9223372036854775808"), Err(i64::MAX));
        assert_eq!(go_atoi("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(go_atoi("-9223372036854775809"), Err(i64::MIN));
        for bad in ["", "+", "-", " 1", "1 ", "1_000", "0x10", "1.0"] {
            assert_eq!(go_atoi(bad), Err(0), "{bad:?}");
        }
    }
}
