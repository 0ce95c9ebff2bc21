//! What `istioctl validate` checks on plain Kubernetes objects, and Istio's port-protocol rules.
//!
//! `istioctl validate` (istioctl/pkg/validate/validate.go) validates Istio kinds with the webhook rules
//! and looks at two Kubernetes kinds only:
//!
//! - **Service**: every port that is not UDP must either carry an `appProtocol` Istio knows
//!   ([`Protocol::parse`]) or a `name` of the form `<protocol>[-<suffix>]`; an unnamed port is an error.
//!   These are *errors* (the command fails), even though the messages say "not recommended".
//! - **Deployment**: when the pod template lacks the canonical-service labels (`app`/`version` or their
//!   newer equivalents) istioctl prints a notice and still calls the object valid; that notice is
//!   neither an error nor a warning ([`deployment_telemetry_label_notice`]).
//!
//! Objects in the Istio namespace (`istio-system` unless told otherwise) are skipped, and a `List`
//! has its items checked one by one. Every other kind is accepted without checks.
//!
//! The port-protocol rule itself ([`api::protocol::convert_protocol`], Istio's `pkg/config/kube`) is shared
//! with the service registry.

use std::collections::BTreeMap;

use api::protocol::Protocol;
use serde_json::Value;

use crate::{Report, common::go_quote};

/// The namespace `istioctl validate` skips when none is configured.
pub const DEFAULT_ISTIO_NAMESPACE: &str = "istio-system";

/// Istio's page on port naming and the other workload requirements, as linked from istioctl 1.30 messages.
pub const DEPLOYMENT_REQUIREMENTS_URL: &str = "https://istio.io/v1.30/docs/ops/deployment/requirements/";

/// Istio's page on protocol selection, as linked from istioctl 1.30 messages.
pub const PROTOCOL_SELECTION_URL: &str =
    "https://istio.io/v1.30/docs/ops/configuration/traffic-management/protocol-selection/";

/// `true` when a Service port name follows the convention as `istioctl validate` checks it: the text
/// before the first `-` (or the whole name) parses as a known protocol. (`istioctl` does not special-case
/// `grpc-web`; its prefix `grpc` is known anyway.)
pub fn port_name_follows_convention(name: &str) -> bool {
    let prefix = name.split('-').next().unwrap_or("");
    !Protocol::parse(prefix).is_unsupported()
}

/// Checks a plain Kubernetes object as `istioctl validate` does; kinds other than Service, Deployment
/// and lists of them are accepted without checks.
///
/// `doc` is the whole document (`apiVersion`, `kind`, `metadata`, `spec`). `istio_namespace` is the
/// namespace whose objects are skipped; empty means [`DEFAULT_ISTIO_NAMESPACE`]. Paths in the report
/// are relative to the document (`spec.ports[0].name`, `items[1].spec.ports[0]`).
pub fn validate_kube_object(doc: &Value, istio_namespace: &str) -> Report {
    let mut report = Report::default();
    if let Some(items) = doc.get("items").and_then(Value::as_array) {
        for (i, item) in items.iter().enumerate() {
            let prefix = format!("items[{i}].");
            match kind_of(item) {
                "Service" => check_service(item, istio_namespace, &prefix, &mut report),
                "Deployment" => check_deployment(item, istio_namespace, &prefix, &mut report),
                _ => {}
            }
        }
    }
    match kind_of(doc) {
        "Service" => check_service(doc, istio_namespace, "", &mut report),
        "Deployment" => check_deployment(doc, istio_namespace, "", &mut report),
        _ => {}
    }
    report
}

/// Checks a Service's port names and `appProtocol`s as `istioctl validate` does (see the module docs).
///
/// Errors, in Istio's words (`<name>/<namespace>/:` is how istioctl names the Service):
/// - `service "hello//:" has an unnamed port. This is not recommended, See <requirements URL>`;
/// - `service "hello//:" port "hello" does not follow the Istio naming convention. See <requirements URL>`;
/// - `service "hello//:" doesn't follow Istio protocol selection. This is not recommended, See <protocol selection URL>`
///   for an `appProtocol` Istio does not know (including `kubernetes.io/h2c` and friends, which the
///   registry understands but istioctl's check does not).
pub fn validate_service(doc: &Value, istio_namespace: &str) -> Report {
    let mut report = Report::default();
    check_service(doc, istio_namespace, "", &mut report);
    report
}

/// Checks a Deployment as `istioctl validate` does: the only possible error is a malformed
/// `spec.template.metadata` (labels that are not a map of strings). Missing telemetry labels are not
/// reported here; see [`deployment_telemetry_label_notice`].
pub fn validate_deployment(doc: &Value, istio_namespace: &str) -> Report {
    let mut report = Report::default();
    check_deployment(doc, istio_namespace, "", &mut report);
    report
}

/// The notice `istioctl validate` prints (to its output, not as a warning) for a Deployment whose pod
/// template lacks a canonical service name label (`service.istio.io/canonical-name`,
/// `app.kubernetes.io/name` or `app`) or revision label (`service.istio.io/canonical-revision`,
/// `app.kubernetes.io/version` or `version`), e.g.
/// `deployment "hello/:" may not provide Istio metrics and telemetry labels: map[]. See <requirements URL>`.
///
/// `None` when the labels are there, the Deployment is in the Istio namespace, the object is not a
/// Deployment, or its template labels are malformed (that is an error instead).
pub fn deployment_telemetry_label_notice(doc: &Value, istio_namespace: &str) -> Option<String> {
    if kind_of(doc) != "Deployment" || in_istio_namespace(doc, istio_namespace) {
        return None;
    }
    let labels = template_labels(doc).ok()?.unwrap_or_default();
    let has = |keys: &[&str]| keys.iter().any(|k| labels.contains_key(*k));
    let has_name = has(&["service.istio.io/canonical-name", "app.kubernetes.io/name", "app"]);
    let has_revision = has(&["service.istio.io/canonical-revision", "app.kubernetes.io/version", "version"]);
    if has_name && has_revision {
        return None;
    }
    let who = format!("{}/{}:", name_of(doc), namespace_of(doc));
    let map =
        labels.iter().map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v))).collect::<Vec<_>>().join(" ");
    Some(format!(
        "deployment {} may not provide Istio metrics and telemetry labels: map[{map}]. See {DEPLOYMENT_REQUIREMENTS_URL}",
        go_quote(&who)
    ))
}

/// The pod template labels of a Deployment-like object (`spec.template.metadata.labels`), as istioctl's
/// `GetTemplateLabels` reads them.
///
/// `Ok(None)` when there is no `spec.template` object or it has no labels. An error (in the wording of
/// Kubernetes' unstructured accessors) when `metadata` or `labels` is not a map or a label value is not
/// a string.
pub fn template_labels(doc: &Value) -> Result<Option<BTreeMap<String, String>>, String> {
    let Some(template) = doc.get("spec").and_then(Value::as_object).and_then(|s| s.get("template")) else {
        return Ok(None);
    };
    let Some(template) = template.as_object() else {
        return Ok(None);
    };
    let metadata = match template.get("metadata") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(not_a_map(".metadata", other)),
    };
    let labels = match metadata.get("labels") {
        None => return Ok(None),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(not_a_map(".metadata.labels", other)),
    };
    let mut out = BTreeMap::new();
    for (k, v) in labels {
        match v {
            Value::String(s) => {
                out.insert(k.clone(), s.clone());
            }
            other => {
                return Err(format!(
                    ".metadata.labels accessor error: contains non-string value in the map under key {}: {} is of the type {}, expected string",
                    go_quote(k),
                    go_value(other),
                    go_type(other)
                ));
            }
        }
    }
    Ok(Some(out))
}

fn not_a_map(path: &str, value: &Value) -> String {
    format!(
        "{path} accessor error: {} is of the type {}, expected map[string]interface{{}}",
        go_value(value),
        go_type(value)
    )
}

/// How Go's `%v` prints a decoded JSON value (close enough for messages).
fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Go's type name of a decoded JSON value.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn kind_of(doc: &Value) -> &str {
    doc.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn metadata_str<'a>(doc: &'a Value, field: &str) -> &'a str {
    doc.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or("")
}

fn name_of(doc: &Value) -> &str {
    metadata_str(doc, "name")
}

fn namespace_of(doc: &Value) -> &str {
    metadata_str(doc, "namespace")
}

fn in_istio_namespace(doc: &Value, istio_namespace: &str) -> bool {
    let istio_namespace = if istio_namespace.is_empty() { DEFAULT_ISTIO_NAMESPACE } else { istio_namespace };
    namespace_of(doc) == istio_namespace
}

fn check_service(doc: &Value, istio_namespace: &str, prefix: &str, report: &mut Report) {
    if in_istio_namespace(doc, istio_namespace) {
        return;
    }
    let who = go_quote(&format!("{}/{}/:", name_of(doc), namespace_of(doc)));
    let Some(ports) = doc.get("spec").and_then(|s| s.get("ports")) else {
        return;
    };
    let ports = match ports {
        Value::Null => return,
        Value::Array(ports) => ports,
        _ => {
            report.error(format!("{prefix}spec.ports"), format!("service {who} ports must be a list"));
            return;
        }
    };
    for (i, port) in ports.iter().enumerate() {
        let path = format!("{prefix}spec.ports[{i}]");
        let Some(port) = port.as_object() else {
            report.error(path, format!("service {who} has a port that is not an object"));
            continue;
        };
        if port.get("protocol").and_then(Value::as_str).is_some_and(|p| p.eq_ignore_ascii_case("UDP")) {
            continue;
        }
        match port.get("appProtocol") {
            Some(Value::Null) | None => {}
            Some(app) => {
                if app.as_str().is_none_or(|a| Protocol::parse(a).is_unsupported()) {
                    report.error(
                        format!("{path}.appProtocol"),
                        format!(
                            "service {who} doesn't follow Istio protocol selection. This is not recommended, See {PROTOCOL_SELECTION_URL}"
                        ),
                    );
                }
                continue;
            }
        }
        match port.get("name") {
            Some(Value::Null) | None => report.error(
                path,
                format!("service {who} has an unnamed port. This is not recommended, See {DEPLOYMENT_REQUIREMENTS_URL}"),
            ),
            Some(name) => {
                let text = name.as_str().map_or_else(|| name.to_string(), str::to_owned);
                if name.as_str().is_none_or(|n| !port_name_follows_convention(n)) {
                    report.error(
                        format!("{path}.name"),
                        format!(
                            "service {who} port {} does not follow the Istio naming convention. See {DEPLOYMENT_REQUIREMENTS_URL}",
                            go_quote(&text)
                        ),
                    );
                }
            }
        }
    }
}

fn check_deployment(doc: &Value, istio_namespace: &str, prefix: &str, report: &mut Report) {
    if in_istio_namespace(doc, istio_namespace) {
        return;
    }
    if let Err(message) = template_labels(doc) {
        report.error(format!("{prefix}spec.template.metadata"), message);
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;

    #[test]
    fn port_name_convention_follows_istioctl() {
        assert!(port_name_follows_convention("http-hello"));
        assert!(port_name_follows_convention("udp"));
        assert!(!port_name_follows_convention("hello"));
        assert!(!port_name_follows_convention(""));
        assert!(!port_name_follows_convention("-http"));
    }

    fn service(ports: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hello"}, "spec": {"ports": ports}})
    }

    #[test]
    fn service_port_rules() {
        let ok = [
            json!([{"name": "http", "port": 9080}]),
            json!([{"name": "http-hello", "port": 9080}]),
            json!([{"appProtocol": "http", "name": "fake", "port": 9080}]),
            json!([{"port": 53, "protocol": "UDP"}]),
            json!([{"name": "dns", "port": 53, "protocol": "udp"}]),
            json!([{"name": "tcp", "port": 1, "appProtocol": null}]),
            json!(null),
        ];
        for ports in ok {
            let report = validate_kube_object(&service(ports.clone()), "");
            assert!(report.errors.is_empty() && report.warnings.is_empty(), "{ports}: {report:?}");
        }
        let bad = [
            (
                json!([{"name": "hello", "port": 9080}]),
                "spec.ports[0].name",
                "port \"hello\" does not follow the Istio naming convention",
            ),
            (json!([{"protocol": "TCP"}]), "spec.ports[0]", "has an unnamed port"),
            (
                json!([{"appProtocol": "fake", "port": 9080}]),
                "spec.ports[0].appProtocol",
                "doesn't follow Istio protocol selection",
            ),
            (
                json!([{"appProtocol": "kubernetes.io/h2c", "port": 9080}]),
                "spec.ports[0].appProtocol",
                "doesn't follow Istio protocol selection",
            ),
            (json!([{"name": "", "port": 9080}]), "spec.ports[0].name", "port \"\" does not follow"),
            (json!([{"name": 80, "port": 9080}]), "spec.ports[0].name", "port \"80\" does not follow"),
            (json!("x"), "spec.ports", "must be a list"),
        ];
        for (ports, path, message) in bad {
            let report = validate_kube_object(&service(ports.clone()), "");
            assert_eq!(report.errors.len(), 1, "{ports}: {report:?}");
            assert_eq!(report.errors[0].path, path);
            assert!(report.errors[0].message.contains(message), "{}", report.errors[0].message);
            assert!(
                report.errors[0].message.starts_with("service \"hello//:\" "),
                "{}",
                report.errors[0].message
            );
        }
        let report = validate_kube_object(&service(json!([{"name": "hello", "port": 1}])), "");
        assert_eq!(
            report.errors[0].message,
            "service \"hello//:\" port \"hello\" does not follow the Istio naming convention. See https://istio.io/v1.30/docs/ops/deployment/requirements/"
        );
        // The Istio namespace is skipped; a custom one replaces the default.
        let mut skipped = service(json!([{"name": "hello"}]));
        skipped["metadata"]["namespace"] = json!("istio-system");
        assert!(validate_kube_object(&skipped, "").is_valid());
        assert!(!validate_kube_object(&skipped, "other").is_valid());
        skipped["metadata"]["namespace"] = json!("mesh");
        assert!(validate_kube_object(&skipped, "mesh").is_valid());
        // No spec at all is not an error (istioctl would crash on it).
        assert!(validate_kube_object(&json!({"kind": "Service"}), "").is_valid());
    }

    #[test]
    fn lists_check_each_item() {
        let doc = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"kind": "Service", "metadata": {"name": "details"}, "spec": {"ports": [{"name": "details", "port": 9080}]}},
            {"kind": "Service", "metadata": {"name": "hello"}, "spec": {"ports": [{"port": 80, "protocol": "TCP"}]}},
            {"kind": "ConfigMap", "metadata": {"name": "x"}},
            "not an object"
        ]});
        let report = validate_kube_object(&doc, "");
        let paths: Vec<_> = report.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["items[0].spec.ports[0].name", "items[1].spec.ports[0]"]);
    }

    #[test]
    fn deployments_are_valid_and_may_get_a_notice() {
        let missing = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hello"}, "spec": null});
        assert_eq!(validate_kube_object(&missing, ""), Report::default());
        assert_eq!(
            deployment_telemetry_label_notice(&missing, "").as_deref(),
            Some(
                "deployment \"hello/:\" may not provide Istio metrics and telemetry labels: map[]. See https://istio.io/v1.30/docs/ops/deployment/requirements/"
            )
        );
        let only_app = json!({"kind": "Deployment", "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"template": {"metadata": {"labels": {"app": "a"}}}}});
        assert_eq!(
            deployment_telemetry_label_notice(&only_app, "").as_deref(),
            Some(
                "deployment \"a/ns:\" may not provide Istio metrics and telemetry labels: map[\"app\":\"a\"]. See https://istio.io/v1.30/docs/ops/deployment/requirements/"
            )
        );
        let full = json!({"kind": "Deployment", "metadata": {"name": "a"},
            "spec": {"template": {"metadata": {"labels": {"app.kubernetes.io/name": "a", "version": "v1"}}}}});
        assert_eq!(deployment_telemetry_label_notice(&full, ""), None);
        let skipped = json!({"kind": "Deployment", "metadata": {"name": "hello", "namespace": "istio-system"}, "spec": null});
        assert_eq!(deployment_telemetry_label_notice(&skipped, ""), None);
        let malformed = json!({"kind": "Deployment", "metadata": {"name": "a"},
            "spec": {"template": {"metadata": {"labels": {"app": 1}}}}});
        let report = validate_kube_object(&malformed, "");
        assert_eq!(report.errors.len(), 1);
        assert!(report.errors[0].message.contains("expected string"), "{report:?}");
    }

    fn testdata() -> Option<PathBuf> {
        let dir = PathBuf::from("/work/shared/istio-testdata/_derived/validation/istioctl-validate/inputs");
        dir.is_dir().then_some(dir)
    }

    /// The Kubernetes cases of istioctl's validate_test.go (read from the shared test data when present).
    #[test]
    fn istioctl_kubernetes_cases() {
        let Some(dir) = testdata() else {
            return;
        };
        let cases = [
            ("portNameMissingSvc.yaml", false),
            ("versionLabelMissingDeployment.yaml", true),
            ("validPortNamingSvc.yaml", true),
            ("validPortNamingWithSuffixSvc.yaml", true),
            ("invalidPortNamingSvc.yaml", false),
            ("invalidSvcList.yaml", false),
            ("skippedDeployment.yaml", true),
            ("skippedService.yaml", true),
            ("validPortNamingSvcWithAppProtocol2.yaml", true),
            ("inValidPortNamingSvcWithAppProtocol.yaml", false),
            ("validDeployment.yaml", true),
            ("validKubernetesYAML.yaml", true),
        ];
        for (file, valid) in cases {
            let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            let doc = yaml_to_json(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
            let report = validate_kube_object(&doc, "istio-system");
            assert_eq!(report.is_valid(), valid, "{file}: {report:?}");
            assert!(report.warnings.is_empty(), "{file}");
        }
    }

    /// Reads the tiny YAML subset of the istioctl inputs with the api crate's reader.
    fn yaml_to_json(text: &str) -> Result<Value, String> {
        let first = api::yaml::parse_documents(text).into_iter().next().ok_or("no document")?;
        let doc = first.map_err(|e| e.to_string())?;
        doc.root.map(|root| root.to_json()).ok_or_else(|| "empty document".to_owned())
    }
}
