//! Prometheus scrape merging (`pkg/kube/inject/webhook.go`: `applyPrometheusMerge`).
//!
//! With metrics merging on (the default), istiod moves a pod's `prometheus.io/*` scrape annotations
//! into the proxy's `ISTIO_PROMETHEUS_ANNOTATIONS` environment variable and points the annotations
//! at the agent (`prometheus.io/port: <status port>`, `prometheus.io/path: /stats/prometheus`), which
//! serves Envoy's and the application's metrics together.
//!
//! Annotation keys are compared the way Prometheus' Kubernetes discovery sees them: through
//! Prometheus' `strutil.SanitizeLabelName` (every character outside `[a-zA-Z0-9_]` becomes `_`), so
//! `prometheus.io/port`, `prometheus.io.port` and `prometheus-io/port` are one annotation. Go
//! iterates the annotation map in random order, so when a pod carries several spellings of one
//! annotation istiod's pick among them is not defined; here the first in the pod's document order is
//! used where Go returns the first it meets, and the last where Go keeps overwriting.
//!
//! Pods are JSON in the Kubernetes API's field names; the mesh config is its proto-JSON.

use serde_json::{Map, Value};
use validation::common::go_quote;

use crate::probe::{
    GoObject, container_env_mut, env_var, find_sidecar, find_sidecar_mut, go_atoi, go_parse_bool,
    pod_annotations, pod_annotations_mut, write_go_json_string,
};

/// The proxy container's environment variable carrying the application's scrape configuration as
/// JSON (`status.PrometheusScrapingConfig` in `pilot/cmd/pilot-agent/status`).
pub const PROMETHEUS_SCRAPING_CONFIG_ENV: &str = "ISTIO_PROMETHEUS_ANNOTATIONS";

/// Pod annotation turning metrics merging on or off for one pod (`annotation.PrometheusMergeMetrics`);
/// a value Go's `strconv.ParseBool` rejects is ignored.
pub const MERGE_METRICS_ANNOTATION: &str = "prometheus.istio.io/merge-metrics";

/// Pod annotation naming the port of Envoy's TLS metrics endpoint
/// (`prometheus.istio.io/secure-port`), set by [`apply_secure_prometheus_annotation`].
pub const SECURE_PORT_ANNOTATION: &str = "prometheus.istio.io/secure-port";

/// The proxy's environment variable enabling the TLS merged-metrics endpoint; its value is the port.
pub const SECURE_MERGED_METRICS_PORT_ENV: &str = "ENVOY_SECURE_MERGED_METRICS_PORT";

/// The agent's status port when the mesh config does not set `defaultConfig.statusPort` (Istio's
/// default mesh config).
pub const DEFAULT_STATUS_PORT: u32 = 15020;

/// The path of the agent's merged metrics endpoint, written into `prometheus.io/path`.
pub const MERGED_METRICS_PATH: &str = "/stats/prometheus";

const SCRAPE_KEY: &str = "prometheus_io_scrape";
const PORT_KEY: &str = "prometheus_io_port";
const PATH_KEY: &str = "prometheus_io_path";
const SCRAPE_TARGETS_KEY: &str = "prometheus_istio_io_scrape_targets";
const SECURE_PORT_KEY: &str = "prometheus_istio_io_secure_port";

/// Ports the Istio data plane owns and that metrics merging refuses to scrape, with the reason
/// istiod gives (`istioReservedPorts` in `pilot/cmd/pilot-agent/status`).
const ISTIO_RESERVED_PORTS: [(&str, &str); 9] = [
    ("15000", "Envoy admin"),
    ("15001", "outbound traffic capture"),
    ("15004", "pilot debug"),
    ("15006", "inbound traffic capture"),
    ("15008", "HBONE tunnel"),
    ("15020", "pilot-agent status / merged Prometheus"),
    ("15021", "Envoy health"),
    ("15053", "DNS proxy"),
    ("15090", "Envoy Prometheus (already merged)"),
];

/// Why [`apply_prometheus_merge`] refuses a pod; the messages are istiod's, which it returns to the
/// API server as the admission error. Ports are shown as the annotation spells them (`%q` quoting
/// for an invalid one, as Go's `strconv.Quote` does).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrometheusError {
    /// A `prometheus.istio.io/scrape-targets` port that is not an integer in 1..=65535.
    #[error("invalid prometheus scrape targets: invalid target port {}", go_quote(.0))]
    InvalidTargetPort(String),
    /// A `prometheus.istio.io/scrape-targets` port equal to the agent's status port.
    #[error("invalid prometheus scrape targets: target port {0} conflicts with agent port")]
    TargetPortIsAgentPort(String),
    /// A `prometheus.istio.io/scrape-targets` port the Istio data plane owns.
    #[error(
        "invalid prometheus scrape targets: target port {port} is reserved for Istio ({reason}) and cannot be scraped"
    )]
    TargetPortReserved {
        /// The port as written.
        port: String,
        /// What Istio uses the port for.
        reason: &'static str,
    },
    /// A `prometheus.io/port` that is not an integer in 1..=65535.
    #[error("invalid prometheus scrape configuration: invalid port {}", go_quote(.0))]
    InvalidPort(String),
    /// A `prometheus.io/port` equal to the agent's status port but spelled differently (the same
    /// spelling means the pod is already merged and is left alone).
    #[error("invalid prometheus scrape configuration: port {0} conflicts with agent port")]
    PortIsAgentPort(String),
    /// A `prometheus.io/port` the Istio data plane owns.
    #[error(
        "invalid prometheus scrape configuration: port {port} is reserved for Istio ({reason}) and cannot be scraped"
    )]
    PortReserved {
        /// The port as written.
        port: String,
        /// What Istio uses the port for.
        reason: &'static str,
    },
}

/// One application metrics endpoint (`status.ScrapeTarget`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrapeTarget {
    /// The port as written in the annotation (trimmed, not validated).
    pub port: String,
    /// The HTTP path; `/metrics` when the annotation gives none.
    pub path: String,
}

/// The application's scrape configuration handed to the agent
/// (`status.PrometheusScrapeConfiguration`); every field is the annotation's text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScrapeConfiguration {
    /// `prometheus.io/scrape`.
    pub scrape: String,
    /// `prometheus.io/path`.
    pub path: String,
    /// `prometheus.io/port`.
    pub port: String,
    /// `prometheus.istio.io/scrape-targets`, parsed.
    pub targets: Vec<ScrapeTarget>,
}

impl ScrapeConfiguration {
    /// Whether nothing is set (Istio's `IsEmpty`); an empty configuration is not handed to the agent.
    pub fn is_empty(&self) -> bool {
        self.scrape.is_empty() && self.path.is_empty() && self.port.is_empty() && self.targets.is_empty()
    }

    /// The `ISTIO_PROMETHEUS_ANNOTATIONS` value: the bytes Go's `json.Marshal` writes for Istio's
    /// struct (`scrape`, `path`, `port`, then `targets` when there are any).
    pub fn to_go_json(&self) -> String {
        let mut out = String::new();
        let mut obj = GoObject::new(&mut out);
        write_go_json_string(obj.key("scrape"), &self.scrape);
        write_go_json_string(obj.key("path"), &self.path);
        write_go_json_string(obj.key("port"), &self.port);
        if !self.targets.is_empty() {
            let list = obj.key("targets");
            list.push('[');
            for (i, target) in self.targets.iter().enumerate() {
                if i > 0 {
                    list.push(',');
                }
                let mut t = GoObject::new(list);
                write_go_json_string(t.key("port"), &target.port);
                write_go_json_string(t.key("path"), &target.path);
                t.end();
            }
            list.push(']');
        }
        obj.end();
        out
    }
}

/// Parses a `prometheus.istio.io/scrape-targets` value (Istio's `status.ParseScrapeTargets`): a
/// comma-separated list of `port[:path]`, each entry and part trimmed of Unicode white space, empty
/// entries skipped, a missing or empty path meaning `/metrics`.
///
/// # Errors
///
/// An entry with an empty port: `empty port in scrape target ":/x"` (the entry `%q`-quoted).
pub fn parse_scrape_targets(raw: &str) -> Result<Vec<ScrapeTarget>, String> {
    let mut targets = Vec::new();
    for entry in raw.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let (port, path) = match entry.split_once(':') {
            Some((port, path)) => (port.trim(), path.trim()),
            None => (entry, ""),
        };
        if port.is_empty() {
            return Err(format!("empty port in scrape target {}", go_quote(entry)));
        }
        let path = if path.is_empty() { "/metrics" } else { path };
        targets.push(ScrapeTarget { port: port.to_owned(), path: path.to_owned() });
    }
    Ok(targets)
}

/// Whether metrics merging applies to a pod (Istio's `enablePrometheusMerge`): the annotation
/// [`MERGE_METRICS_ANNOTATION`] when it is a Go boolean, else the mesh config's
/// `enablePrometheusMerge` (proto-JSON; `enable_prometheus_merge` accepted too) when it is a boolean,
/// else `true`.
pub fn enable_prometheus_merge(mesh: &Value, annotations: Option<&Map<String, Value>>) -> bool {
    if let Some(value) = annotations.and_then(|a| a.get(MERGE_METRICS_ANNOTATION)).and_then(Value::as_str) {
        match go_parse_bool(value) {
            Some(b) => return b,
            None => tracing::warn!("invalid annotation {MERGE_METRICS_ANNOTATION}={value}"),
        }
    }
    proto_field(mesh, "enablePrometheusMerge", "enable_prometheus_merge")
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

/// The agent's status port from a mesh config (proto-JSON `defaultConfig.statusPort`, or
/// `default_config.status_port`; a number or a numeric string as proto-JSON allows), or
/// [`DEFAULT_STATUS_PORT`] when it is absent or not a port number. An explicit `0` is kept.
pub fn mesh_status_port(mesh: &Value) -> u32 {
    let port = proto_field(mesh, "defaultConfig", "default_config")
        .and_then(|c| proto_field(c, "statusPort", "status_port"));
    match port {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Some(Value::String(s)) => s.parse::<u32>().ok(),
        _ => None,
    }
    .filter(|p| i32::try_from(*p).is_ok())
    .unwrap_or(DEFAULT_STATUS_PORT)
}

fn proto_field<'a>(msg: &'a Value, json_name: &str, proto_name: &str) -> Option<&'a Value> {
    msg.get(json_name).filter(|v| !v.is_null()).or_else(|| msg.get(proto_name).filter(|v| !v.is_null()))
}

/// The pod's scrape configuration (Istio's `getPrometheusScrapeConfiguration`): `prometheus.io/scrape`,
/// `prometheus.io/path`, `prometheus.io/port` and the parsed `prometheus.istio.io/scrape-targets`, in
/// any spelling (see the module docs). A scrape-targets value [`parse_scrape_targets`] rejects is
/// logged (`tracing::warn!`) and ignored.
pub fn scrape_configuration(pod: &Value) -> ScrapeConfiguration {
    let mut cfg = ScrapeConfiguration::default();
    for (key, value) in string_annotations(pod) {
        match sanitize_label_name(key).as_str() {
            PORT_KEY => cfg.port = value.to_owned(),
            SCRAPE_KEY => cfg.scrape = value.to_owned(),
            PATH_KEY => cfg.path = value.to_owned(),
            SCRAPE_TARGETS_KEY => match parse_scrape_targets(value) {
                Ok(targets) => cfg.targets = targets,
                Err(e) => tracing::warn!("failed to parse {key} annotation: {e}"),
            },
            _ => {}
        }
    }
    cfg
}

/// istiod's `applyPrometheusMerge`.
///
/// Does nothing when the pod opts out of scraping (a `prometheus.io/scrape` that is a Go boolean
/// `false`), when merging is off ([`enable_prometheus_merge`]), or when `prometheus.io/port` already
/// is the agent's status port ([`mesh_status_port`]) spelled the same way (a re-injection).
/// Otherwise:
///
/// 1. the pod's [`scrape_configuration`] is checked: with scrape targets, the configuration's port
///    and path become the first target's, and every target port must be an integer in 1..=65535,
///    not the status port and not a port Istio reserves; without, the same holds for a non-empty
///    `prometheus.io/port`;
/// 2. when the pod has a proxy container and the configuration is not empty, an
///    `ISTIO_PROMETHEUS_ANNOTATIONS` entry with its Go JSON ([`ScrapeConfiguration::to_go_json`]) is
///    appended to the proxy's `env`;
/// 3. every spelling of `prometheus.io/scrape`, `prometheus.io/port`, `prometheus.io/path` and
///    `prometheus.istio.io/scrape-targets` is removed ([`clear_prometheus_annotations`]) and
///    `prometheus.io/port: <status port>`, `prometheus.io/path: /stats/prometheus` and
///    `prometheus.io/scrape: "true"` are set (also on a pod without annotations: merging is on for
///    every pod by default).
///
/// # Errors
///
/// A [`PrometheusError`] for a port check of step 1 that fails, with istiod's message; the pod is
/// then unchanged.
pub fn apply_prometheus_merge(pod: &mut Value, mesh: &Value) -> Result<(), PrometheusError> {
    if !prometheus_scrape(pod) || !enable_prometheus_merge(mesh, pod_annotations(pod)) {
        return Ok(());
    }
    let target_port = mesh_status_port(mesh).to_string();
    if prometheus_port(pod).is_some_and(|cur| cur == target_port) {
        return Ok(());
    }
    let mut scrape = scrape_configuration(pod);
    if let Some(first) = scrape.targets.first() {
        scrape.port = first.port.clone();
        scrape.path = first.path.clone();
        for target in &scrape.targets {
            check_port(&target.port, &target_port).map_err(|problem| match problem {
                PortProblem::Invalid => PrometheusError::InvalidTargetPort(target.port.clone()),
                PortProblem::AgentPort => PrometheusError::TargetPortIsAgentPort(target.port.clone()),
                PortProblem::Reserved(reason) => {
                    PrometheusError::TargetPortReserved { port: target.port.clone(), reason }
                }
            })?;
        }
    } else if !scrape.port.is_empty() {
        check_port(&scrape.port, &target_port).map_err(|problem| match problem {
            PortProblem::Invalid => PrometheusError::InvalidPort(scrape.port.clone()),
            PortProblem::AgentPort => PrometheusError::PortIsAgentPort(scrape.port.clone()),
            PortProblem::Reserved(reason) => {
                PrometheusError::PortReserved { port: scrape.port.clone(), reason }
            }
        })?;
    }
    if !scrape.is_empty()
        && let Some(sidecar) = find_sidecar_mut(pod)
    {
        container_env_mut(sidecar).push(env_var(PROMETHEUS_SCRAPING_CONFIG_ENV, &scrape.to_go_json()));
    }
    clear_prometheus_annotations(pod);
    if let Some(annotations) = pod_annotations_mut(pod) {
        annotations.insert("prometheus.io/port".to_owned(), Value::String(target_port));
        annotations.insert("prometheus.io/path".to_owned(), Value::String(MERGED_METRICS_PATH.to_owned()));
        annotations.insert("prometheus.io/scrape".to_owned(), Value::String("true".to_owned()));
    }
    Ok(())
}

enum PortProblem {
    Invalid,
    AgentPort,
    Reserved(&'static str),
}

/// The checks of `applyPrometheusMerge`: Go's `strconv.Atoi` in 1..=65535, then its canonical
/// decimal form compared with the agent port and the reserved ports.
fn check_port(port: &str, agent_port: &str) -> Result<(), PortProblem> {
    let canonical = match go_atoi(port) {
        Ok(n) if (1..=65535).contains(&n) => n.to_string(),
        _ => return Err(PortProblem::Invalid),
    };
    if canonical == agent_port {
        return Err(PortProblem::AgentPort);
    }
    match ISTIO_RESERVED_PORTS.iter().find(|(p, _)| *p == canonical) {
        Some((_, reason)) => Err(PortProblem::Reserved(reason)),
        None => Ok(()),
    }
}

/// istiod's `applySecurePrometheusAnnotation`: sets `prometheus.istio.io/secure-port` to the proxy
/// container's first `ENVOY_SECURE_MERGED_METRICS_PORT` env value that is neither empty nor `"0"`.
///
/// Nothing changes when the pod already has the annotation in any spelling (the user's choice wins),
/// has no proxy container (see [`crate::probe::PROXY_CONTAINER_NAME`]), or no such env value
/// (`valueFrom` entries have none).
pub fn apply_secure_prometheus_annotation(pod: &mut Value) {
    if string_annotations(pod).any(|(k, _)| sanitize_label_name(k) == SECURE_PORT_KEY) {
        return;
    }
    let port =
        find_sidecar(pod).and_then(|sidecar| sidecar.get("env")?.as_array()).into_iter().flatten().find_map(
            |env| {
                let name = env.get("name").and_then(Value::as_str);
                let value = env.get("value").and_then(Value::as_str).unwrap_or("");
                (name == Some(SECURE_MERGED_METRICS_PORT_ENV) && !value.is_empty() && value != "0")
                    .then(|| value.to_owned())
            },
        );
    if let (Some(port), Some(annotations)) = (port, pod_annotations_mut(pod)) {
        annotations.insert(SECURE_PORT_ANNOTATION.to_owned(), Value::String(port));
    }
}

/// Removes every spelling of `prometheus.io/scrape`, `prometheus.io/port`, `prometheus.io/path` and
/// `prometheus.istio.io/scrape-targets` from the pod's annotations (Istio's
/// `clearPrometheusAnnotations`); other annotations keep their order. istiod's `stripPod` calls it
/// on re-injection when [`prometheus_port`] is the agent's status port.
pub fn clear_prometheus_annotations(pod: &mut Value) {
    let Some(annotations) =
        pod.get_mut("metadata").and_then(|m| m.get_mut("annotations")).and_then(Value::as_object_mut)
    else {
        return;
    };
    annotations.retain(|key, _| {
        !matches!(sanitize_label_name(key).as_str(), PATH_KEY | PORT_KEY | SCRAPE_KEY | SCRAPE_TARGETS_KEY)
    });
}

/// The pod's `prometheus.io/port` annotation in any spelling — the first in document order — or
/// `None` (Istio's `getPrometheusPort`).
pub fn prometheus_port(pod: &Value) -> Option<String> {
    string_annotations(pod).find(|(k, _)| sanitize_label_name(k) == PORT_KEY).map(|(_, v)| v.to_owned())
}

/// Istio's `getPrometheusScrape`: the first `prometheus.io/scrape` spelling whose value is a Go
/// boolean, else `true`.
fn prometheus_scrape(pod: &Value) -> bool {
    string_annotations(pod)
        .filter(|(k, _)| sanitize_label_name(k) == SCRAPE_KEY)
        .find_map(|(_, v)| go_parse_bool(v))
        .unwrap_or(true)
}

/// The pod's annotations whose values are strings, in document order.
fn string_annotations(pod: &Value) -> impl Iterator<Item = (&str, &str)> {
    pod_annotations(pod).into_iter().flatten().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
}

/// Prometheus' `strutil.SanitizeLabelName`: every character outside `[a-zA-Z0-9_]` becomes `_`.
fn sanitize_label_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    //! Expected values are istiod's: its goldens (`pkg/kube/inject/testdata/inject/*.injected`) and
    //! unit tests (`webhook_test.go`) where they cover a case, otherwise the output of Istio's own
    //! functions at the pinned version run on the same pod and mesh config.

    use serde_json::json;

    use super::*;

    fn pod_with(annotations: Value) -> Value {
        json!({
            "metadata": {"annotations": annotations},
            "spec": {"containers": [{"name": "app"}, {"name": "istio-proxy"}]}
        })
    }

    fn annotations(pod: &Value) -> &Value {
        &pod["metadata"]["annotations"]
    }

    fn scrape_env(pod: &Value) -> Vec<&str> {
        find_sidecar(pod)
            .and_then(|s| s.get("env")?.as_array())
            .into_iter()
            .flatten()
            .filter(|e| e["name"] == PROMETHEUS_SCRAPING_CONFIG_ENV)
            .filter_map(|e| e["value"].as_str())
            .collect()
    }

    fn merged_annotations(extra: Value) -> Value {
        let mut out = json!({
            "prometheus.io/port": "15020",
            "prometheus.io/path": "/stats/prometheus",
            "prometheus.io/scrape": "true"
        });
        for (k, v) in extra.as_object().unwrap() {
            out[k] = v.clone();
        }
        out
    }

    /// Runs the merge on a pod with `annotations`; the pod is unchanged when it fails.
    fn merge(annotations: Value, mesh: Value) -> (Result<(), PrometheusError>, Value) {
        let original = pod_with(annotations);
        let mut pod = original.clone();
        let result = apply_prometheus_merge(&mut pod, &mesh);
        if result.is_err() {
            assert_eq!(pod, original);
        }
        (result, pod)
    }

    fn merge_error(annotations: Value, mesh: Value) -> String {
        merge(annotations, mesh).0.unwrap_err().to_string()
    }

    #[test]
    fn merge_enabled_by_annotation_then_mesh_then_default() {
        // TestEnablePrometheusAggregation.
        let on = json!({"enablePrometheusMerge": true});
        let off = json!({"enablePrometheusMerge": false});
        let anno = |v: &str| {
            let mut m = Map::new();
            m.insert(MERGE_METRICS_ANNOTATION.to_owned(), json!(v));
            m
        };
        assert!(enable_prometheus_merge(&json!({}), None));
        assert!(enable_prometheus_merge(&on, None));
        assert!(!enable_prometheus_merge(&off, None));
        assert!(enable_prometheus_merge(&off, Some(&anno("true"))));
        assert!(!enable_prometheus_merge(&on, Some(&anno("false"))));
        // An annotation Go cannot parse falls back to the mesh; proto field names are accepted.
        assert!(!enable_prometheus_merge(&off, Some(&anno("nope"))));
        assert!(!enable_prometheus_merge(&json!({"enable_prometheus_merge": false}), None));
        assert!(enable_prometheus_merge(&json!({"enablePrometheusMerge": null}), None));
    }

    #[test]
    fn mesh_status_port_defaults_to_15020() {
        assert_eq!(mesh_status_port(&json!({})), 15020);
        assert_eq!(mesh_status_port(&json!({"defaultConfig": {}})), 15020);
        assert_eq!(mesh_status_port(&json!({"defaultConfig": {"statusPort": 15999}})), 15999);
        assert_eq!(mesh_status_port(&json!({"defaultConfig": {"statusPort": "15998"}})), 15998);
        assert_eq!(mesh_status_port(&json!({"default_config": {"status_port": 15997}})), 15997);
    }

    #[test]
    fn parse_scrape_targets_like_istio() {
        let t = |port: &str, path: &str| ScrapeTarget { port: port.to_owned(), path: path.to_owned() };
        assert_eq!(
            parse_scrape_targets(" 8080:/metrics , 9100:/custom ").unwrap(),
            [t("8080", "/metrics"), t("9100", "/custom")]
        );
        assert_eq!(parse_scrape_targets("8080").unwrap(), [t("8080", "/metrics")]);
        assert_eq!(parse_scrape_targets("8080: ").unwrap(), [t("8080", "/metrics")]);
        assert_eq!(parse_scrape_targets("a:b:c").unwrap(), [t("a", "b:c")]);
        assert_eq!(parse_scrape_targets(" , ").unwrap(), []);
        // Go's TrimSpace trims Unicode white space.
        assert_eq!(parse_scrape_targets("\u{a0}8080\u{3000}:\u{2003}/m\u{85}").unwrap(), [t("8080", "/m")]);
        assert_eq!(
            parse_scrape_targets(" :/metrics").unwrap_err(),
            r#"empty port in scrape target ":/metrics""#
        );
    }

    #[test]
    fn scrape_configuration_multi_target() {
        // TestGetPrometheusScrapeConfigurationMultiTarget.
        let cfg = |annotations: Value| scrape_configuration(&pod_with(annotations));
        let targets = vec![
            ScrapeTarget { port: "8080".into(), path: "/metrics".into() },
            ScrapeTarget { port: "9100".into(), path: "/custom".into() },
        ];
        let only = cfg(json!({"prometheus.istio.io/scrape-targets": "8080:/metrics,9100:/custom"}));
        assert_eq!((only.port.as_str(), only.path.as_str()), ("", ""));
        assert_eq!(only.targets, targets);
        let legacy_too = cfg(json!({
            "prometheus.io/port": "8080",
            "prometheus.io/path": "/metrics",
            "prometheus.istio.io/scrape-targets": "8080:/metrics,9100:/custom"
        }));
        assert_eq!((legacy_too.port.as_str(), legacy_too.path.as_str()), ("8080", "/metrics"));
        assert_eq!(legacy_too.targets, targets);
        let legacy = cfg(json!({"prometheus.io/port": "8080", "prometheus.io/path": "/health"}));
        assert_eq!((legacy.port.as_str(), legacy.path.as_str()), ("8080", "/health"));
        assert!(legacy.targets.is_empty());
        let trimmed = cfg(json!({"prometheus.istio.io/scrape-targets": " 8080:/metrics , 9100:/custom "}));
        assert_eq!(trimmed.targets, targets);
        assert!(cfg(json!({"prometheus.istio.io/scrape-targets": ":/metrics"})).targets.is_empty());
    }

    #[test]
    fn merge_is_on_for_every_pod_by_default() {
        // Every golden without prometheus annotations gets these; nothing for the agent.
        let (result, pod) = merge(json!({}), json!({}));
        result.unwrap();
        assert_eq!(annotations(&pod), &merged_annotations(json!({})));
        assert!(scrape_env(&pod).is_empty());
        let mut bare = json!({"spec": {"containers": [{"name": "istio-proxy"}]}});
        apply_prometheus_merge(&mut bare, &json!({})).unwrap();
        assert_eq!(annotations(&bare), &merged_annotations(json!({})));
    }

    #[test]
    fn merge_moves_the_custom_port_and_path_to_the_agent() {
        let (result, pod) = merge(
            json!({
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "8080",
                "prometheus.io/path": "/metrics/custom",
                "other": "x"
            }),
            json!({}),
        );
        result.unwrap();
        assert_eq!(annotations(&pod), &merged_annotations(json!({"other": "x"})));
        assert_eq!(scrape_env(&pod), [r#"{"scrape":"true","path":"/metrics/custom","port":"8080"}"#]);
        // Go's JSON escapes HTML characters.
        let (result, pod) =
            merge(json!({"prometheus.io/port": "8080", "prometheus.io/path": "/m?a=1&b=<2>"}), json!({}));
        result.unwrap();
        assert_eq!(scrape_env(&pod), [r#"{"scrape":"","path":"/m?a=1\u0026b=\u003c2\u003e","port":"8080"}"#]);
        // Only what the pod sets is passed on.
        let (_, pod) = merge(json!({"prometheus.io/scrape": "true"}), json!({}));
        assert_eq!(scrape_env(&pod), [r#"{"scrape":"true","path":"","port":""}"#]);
        let (_, pod) = merge(json!({"prometheus.io/port": "", "prometheus.io/path": "/p"}), json!({}));
        assert_eq!(scrape_env(&pod), [r#"{"scrape":"","path":"/p","port":""}"#]);
    }

    #[test]
    fn merge_respects_scrape_false_in_any_spelling() {
        // prometheus-scrape.yaml, prometheus-scrape2.yaml: annotations untouched.
        for key in ["prometheus.io/scrape", "prometheus.io.scrape"] {
            let (result, pod) = merge(json!({key: "false"}), json!({}));
            result.unwrap();
            assert_eq!(annotations(&pod), &json!({key: "false"}));
            assert!(scrape_env(&pod).is_empty());
        }
        // A value that is not a Go boolean does not opt out, and is passed on as written.
        let (result, pod) =
            merge(json!({"prometheus.io/scrape": "yes", "prometheus.io/port": "9090"}), json!({}));
        result.unwrap();
        assert_eq!(annotations(&pod), &merged_annotations(json!({})));
        assert_eq!(scrape_env(&pod), [r#"{"scrape":"yes","path":"","port":"9090"}"#]);
    }

    #[test]
    fn merge_can_be_turned_off_by_the_mesh_or_the_pod() {
        let off = json!({"enablePrometheusMerge": false});
        for (anno, mesh) in [
            (json!({"prometheus.io/port": "8080"}), off.clone()),
            (json!({"prometheus.io/port": "8080", MERGE_METRICS_ANNOTATION: "false"}), json!({})),
            (json!({"prometheus.io/port": "8080", MERGE_METRICS_ANNOTATION: "nope"}), off.clone()),
        ] {
            let (result, pod) = merge(anno.clone(), mesh);
            result.unwrap();
            assert_eq!(annotations(&pod), &anno);
            assert!(scrape_env(&pod).is_empty());
        }
        let (result, pod) =
            merge(json!({"prometheus.io/port": "8080", MERGE_METRICS_ANNOTATION: "true"}), off);
        result.unwrap();
        assert_eq!(annotations(&pod), &merged_annotations(json!({MERGE_METRICS_ANNOTATION: "true"})));
        assert_eq!(scrape_env(&pod), [r#"{"scrape":"","path":"","port":"8080"}"#]);
    }

    #[test]
    fn merge_leaves_a_pod_already_pointing_at_the_agent_alone() {
        // Even scrape targets that would be refused are not looked at.
        let anno = json!({
            "prometheus.io/port": "15020",
            "prometheus.io/path": "/foo",
            "prometheus.istio.io/scrape-targets": "15000"
        });
        let (result, pod) = merge(anno.clone(), json!({}));
        result.unwrap();
        assert_eq!(annotations(&pod), &anno);
        assert!(scrape_env(&pod).is_empty());
    }

    #[test]
    fn merge_scrape_targets_into_a_native_sidecar() {
        // hello-multiport-metrics.yaml(.injected).
        let mut pod = json!({
            "metadata": {"annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.istio.io/scrape-targets": "8080:/metrics,9100:/custom-metrics"
            }},
            "spec": {
                "containers": [{"name": "hello"}],
                "initContainers": [{"name": "istio-init"}, {"name": "istio-proxy", "restartPolicy": "Always"}]
            }
        });
        apply_prometheus_merge(&mut pod, &json!({})).unwrap();
        assert_eq!(annotations(&pod), &merged_annotations(json!({})));
        assert_eq!(
            pod["spec"]["initContainers"][1]["env"],
            json!([{
                "name": PROMETHEUS_SCRAPING_CONFIG_ENV,
                "value": r#"{"scrape":"true","path":"/metrics","port":"8080","targets":[{"port":"8080","path":"/metrics"},{"port":"9100","path":"/custom-metrics"}]}"#
            }])
        );
        // A target port as Atoi reads it, passed on as written.
        let (result, pod) =
            merge(json!({"prometheus.istio.io/scrape-targets": "+8080:/m , 9100"}), json!({}));
        result.unwrap();
        assert_eq!(
            scrape_env(&pod),
            [
                r#"{"scrape":"","path":"/m","port":"+8080","targets":[{"port":"+8080","path":"/m"},{"port":"9100","path":"/metrics"}]}"#
            ]
        );
    }

    #[test]
    fn merge_refuses_bad_scrape_targets() {
        let none = json!({});
        let targets =
            |v: &str| json!({"prometheus.io/scrape": "true", "prometheus.istio.io/scrape-targets": v});
        assert_eq!(
            merge_error(targets("8080:/metrics,15000:/metrics"), none.clone()),
            "invalid prometheus scrape targets: target port 15000 is reserved for Istio (Envoy admin) and cannot be scraped"
        );
        assert_eq!(
            merge_error(targets("15020:/metrics"), none.clone()),
            "invalid prometheus scrape targets: target port 15020 conflicts with agent port"
        );
        assert_eq!(
            merge_error(targets("015020"), none.clone()),
            "invalid prometheus scrape targets: target port 015020 conflicts with agent port"
        );
        assert_eq!(
            merge_error(targets("x:/m"), none.clone()),
            r#"invalid prometheus scrape targets: invalid target port "x""#
        );
        assert_eq!(
            merge_error(targets("8080,0"), none.clone()),
            r#"invalid prometheus scrape targets: invalid target port "0""#
        );
        assert_eq!(
            merge_error(targets("65536"), none.clone()),
            r#"invalid prometheus scrape targets: invalid target port "65536""#
        );
        assert_eq!(
            merge_error(targets("a\"b\\c\u{7}\u{a0}\u{e9}\u{200b}\u{1f600}:/m"), none.clone()),
            "invalid prometheus scrape targets: invalid target port \"a\\\"b\\\\c\\a\\u00a0\u{e9}\\u200b\u{1f600}\""
        );
        assert_eq!(
            merge_error(targets("15999"), json!({"defaultConfig": {"statusPort": 15999}})),
            "invalid prometheus scrape targets: target port 15999 conflicts with agent port"
        );
    }

    #[test]
    fn merge_refuses_a_bad_legacy_port() {
        let none = json!({});
        let port = |v: &str| json!({"prometheus.io/port": v});
        assert_eq!(
            merge_error(port("abc"), none.clone()),
            r#"invalid prometheus scrape configuration: invalid port "abc""#
        );
        assert_eq!(
            merge_error(port("15090"), none.clone()),
            "invalid prometheus scrape configuration: port 15090 is reserved for Istio (Envoy Prometheus (already merged)) and cannot be scraped"
        );
        // Spelled differently from the agent port, so not taken as already merged.
        assert_eq!(
            merge_error(port("015020"), none),
            "invalid prometheus scrape configuration: port 015020 conflicts with agent port"
        );
        // With another status port, 15020 is just reserved.
        assert_eq!(
            merge_error(port("15020"), json!({"defaultConfig": {"statusPort": 15999}})),
            "invalid prometheus scrape configuration: port 15020 is reserved for Istio (pilot-agent status / merged Prometheus) and cannot be scraped"
        );
    }

    #[test]
    fn merge_points_at_the_mesh_status_port() {
        let (result, pod) =
            merge(json!({"prometheus.io/port": "8080"}), json!({"defaultConfig": {"statusPort": 15999}}));
        result.unwrap();
        assert_eq!(annotations(&pod), &merged_annotations(json!({"prometheus.io/port": "15999"})));
        assert_eq!(scrape_env(&pod), [r#"{"scrape":"","path":"","port":"8080"}"#]);
    }

    #[test]
    fn merge_ignores_unparsable_or_blank_targets() {
        let (result, pod) = merge(
            json!({"prometheus.io/port": "8080", "prometheus.istio.io/scrape-targets": ":/metrics"}),
            json!({}),
        );
        result.unwrap();
        assert_eq!(annotations(&pod), &merged_annotations(json!({})));
        assert_eq!(scrape_env(&pod), [r#"{"scrape":"","path":"","port":"8080"}"#]);
        let (result, pod) = merge(
            json!({"prometheus.io/port": "8080", "prometheus.io/path": "/p", "prometheus.istio.io/scrape-targets": " , "}),
            json!({}),
        );
        result.unwrap();
        assert_eq!(scrape_env(&pod), [r#"{"scrape":"","path":"/p","port":"8080"}"#]);
    }

    #[test]
    fn merge_reads_and_clears_every_spelling() {
        let (result, pod) = merge(
            json!({
                "prometheus-io/port": "8080",
                "prometheus.io.path": "/m",
                "prometheus.istio.io/secure-port": "15091",
                "prometheus.io/scheme": "https"
            }),
            json!({}),
        );
        result.unwrap();
        assert_eq!(
            annotations(&pod),
            &merged_annotations(json!({
                "prometheus.istio.io/secure-port": "15091",
                "prometheus.io/scheme": "https"
            }))
        );
        assert_eq!(scrape_env(&pod), [r#"{"scrape":"","path":"/m","port":"8080"}"#]);
    }

    #[test]
    fn merge_without_a_sidecar_still_rewrites_the_annotations() {
        let mut pod = json!({
            "metadata": {"annotations": {"prometheus.io/port": "8080"}},
            "spec": {"containers": [{"name": "app"}]}
        });
        apply_prometheus_merge(&mut pod, &json!({})).unwrap();
        assert_eq!(annotations(&pod), &merged_annotations(json!({})));
        assert_eq!(pod["spec"], json!({"containers": [{"name": "app"}]}));
    }

    fn secure(env: Value, annotations: Value) -> Value {
        let mut pod = json!({
            "metadata": {"annotations": annotations},
            "spec": {"containers": [{"name": "app"}, {"name": "istio-proxy", "env": env}]}
        });
        apply_secure_prometheus_annotation(&mut pod);
        pod["metadata"]["annotations"].clone()
    }

    #[test]
    fn secure_port_annotation_from_the_proxy_env() {
        // TestApplySecurePrometheusAnnotation.
        let port = |v: &str| json!({"name": SECURE_MERGED_METRICS_PORT_ENV, "value": v});
        assert_eq!(
            secure(
                json!([{"name": "ENVOY_SECURE_METRICS_PORT", "value": "15091"}, port("15092")]),
                json!({})
            ),
            json!({SECURE_PORT_ANNOTATION: "15092"})
        );
        assert_eq!(secure(json!([port("15092")]), json!({})), json!({SECURE_PORT_ANNOTATION: "15092"}));
        assert_eq!(
            secure(json!([port("15092")]), json!({SECURE_PORT_ANNOTATION: "19999"})),
            json!({SECURE_PORT_ANNOTATION: "19999"})
        );
        assert_eq!(secure(json!([port("0")]), json!({})), json!({}));
        assert_eq!(secure(json!([{"name": "SOME_OTHER_VAR", "value": "value"}]), json!({})), json!({}));
        let mut no_proxy =
            json!({"metadata": {"annotations": {}}, "spec": {"containers": [{"name": "app"}]}});
        apply_secure_prometheus_annotation(&mut no_proxy);
        assert_eq!(annotations(&no_proxy), &json!({}));
        // Any spelling of the user's annotation wins; an entry without a value is skipped.
        assert_eq!(
            secure(json!([port("15092")]), json!({"prometheus.istio.io.secure_port": "19999"})),
            json!({"prometheus.istio.io.secure_port": "19999"})
        );
        assert_eq!(
            secure(
                json!([
                    {"name": SECURE_MERGED_METRICS_PORT_ENV, "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                    port("15093")
                ]),
                json!({})
            ),
            json!({SECURE_PORT_ANNOTATION: "15093"})
        );
        // A native sidecar, on a pod without annotations.
        let mut native = json!({"spec": {
            "containers": [{"name": "app"}],
            "initContainers": [{"name": "istio-proxy", "env": [port("15094")]}]
        }});
        apply_secure_prometheus_annotation(&mut native);
        assert_eq!(annotations(&native), &json!({SECURE_PORT_ANNOTATION: "15094"}));
    }

    #[test]
    fn clear_removes_every_spelling_and_keeps_the_rest() {
        let mut pod = pod_with(json!({
            "a": "1",
            "prometheus.io/scrape": "true",
            "prometheus_io/port": "1",
            "prometheus.io.path": "/p",
            "prometheus.istio.io/scrape-targets": "1",
            "prometheus.istio.io/secure-port": "2",
            "prometheus.io/scheme": "https",
            "z": "2"
        }));
        clear_prometheus_annotations(&mut pod);
        let kept: Vec<&String> = annotations(&pod).as_object().unwrap().keys().collect();
        assert_eq!(kept, ["a", "prometheus.istio.io/secure-port", "prometheus.io/scheme", "z"]);
        let mut bare = json!({});
        clear_prometheus_annotations(&mut bare);
        assert_eq!(bare, json!({}));
    }

    #[test]
    fn prometheus_port_in_any_spelling() {
        assert_eq!(
            prometheus_port(&pod_with(json!({"a": "1", "prometheus-io.port": "8080"}))).as_deref(),
            Some("8080")
        );
        assert_eq!(prometheus_port(&pod_with(json!({"a": "1"}))), None);
        assert_eq!(prometheus_port(&json!({})), None);
    }

    #[test]
    fn go_quote_escapes_like_strconv_quote() {
        assert_eq!(go_quote("x"), r#""x""#);
        assert_eq!(go_quote("\u{7f}\u{1}\t\u{b}"), r#""\x7f\x01\t\v""#);
        assert_eq!(go_quote("\u{85}\u{feff}\u{e000}"), r#""\u0085\ufeff\ue000""#);
        assert_eq!(go_quote("\u{f0000}"), r#""\U000f0000""#);
        assert_eq!(
            go_quote("\u{890}\u{8e2}\u{110cd}\u{13430}\u{2028}\u{3000}"),
            r#""\u0890\u08e2\U000110cd\U00013430\u2028\u3000""#
        );
    }
}
