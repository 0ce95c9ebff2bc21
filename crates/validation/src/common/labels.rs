//! Labels, workload selectors and policy target references (Istio's and Kubernetes' rules).

use std::collections::BTreeMap;

use api::type_v1beta1::PolicyTargetReference;

use super::{
    go::go_quote,
    hosts::{DNS1123_LABEL_MAX_LENGTH, is_alnum, matches_label_pattern, validate_dns1123_subdomain},
    join,
};
use crate::Report;

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: alphanumeric at both ends, `-`, `_`, `.` inside.
fn is_qualified_name_part(value: &str) -> bool {
    let b = value.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            is_alnum(first)
                && is_alnum(last)
                && b.iter().all(|&c| is_alnum(c) || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// One label key as Istio's `labels.Instance.Validate` checks it.
fn validate_istio_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| p.split('.').all(matches_label_pattern));
    if !prefix_ok || !is_qualified_name_part(name) {
        return Err(format!("invalid tag key: {}", go_quote(key)));
    }
    if prefix.is_some_and(|p| p.len() > 253) {
        return Err(format!("invalid tag key: {} (DNS prefix is too long)", go_quote(key)));
    }
    if name.len() > DNS1123_LABEL_MAX_LENGTH {
        return Err(format!("invalid tag key: {} (name is too long)", go_quote(key)));
    }
    Ok(())
}

/// Checks labels in a spec (WorkloadEntry `labels`, `sourceLabels` matches, …), following Istio's
/// `labels.Instance.Validate`.
///
/// Keys: an optional prefix of dot-separated DNS labels (either case, at most 253 characters) and `/`,
/// then a name of at most 63 letters, digits, `-`, `_`, `.`, alphanumeric at both ends. Values: empty
/// or the same character rules as names, with no length limit (Istio does not check it).
/// Errors (joined): `invalid tag key: "…"`, `invalid tag key: "…" (DNS prefix is too long)`,
/// `invalid tag key: "…" (name is too long)`, `invalid tag value: "…"`.
pub fn validate_labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    let mut reasons = Vec::new();
    for (key, value) in labels {
        if let Err(e) = validate_istio_label_key(key) {
            reasons.push(e);
        }
        if !value.is_empty() && !is_qualified_name_part(value) {
            reasons.push(format!("invalid tag value: {}", go_quote(value)));
        }
    }
    join(reasons)
}

const QUALIFIED_NAME_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// A Kubernetes qualified name (label or annotation key) as the API server checks it.
fn k8s_qualified_name(key: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                reasons.push("prefix part must be non-empty".to_owned());
            } else if let Err(e) = validate_dns1123_subdomain(prefix) {
                reasons.extend(e.split("; ").map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            reasons.push(format!(
                "a qualified name {QUALIFIED_NAME_MESSAGE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return reasons;
        }
    };
    if name.is_empty() {
        reasons.push("name part must be non-empty".to_owned());
    } else if name.len() > DNS1123_LABEL_MAX_LENGTH {
        reasons.push("name part must be no more than 63 characters".to_owned());
    }
    if !is_qualified_name_part(name) {
        reasons.push(format!("name part {QUALIFIED_NAME_MESSAGE}"));
    }
    reasons
}

/// Checks `metadata.labels` as the Kubernetes API server does.
///
/// Keys: a qualified name, an optional lower-case DNS subdomain prefix (at most 253 characters) and
/// `/`, then a name of at most 63 letters, digits, `-`, `_`, `.`, alphanumeric at both ends. Values: at
/// most 63 characters, empty or with the same character rules as names. Errors name the key or value:
/// `Invalid value: "bad key": name part must consist of …`.
pub fn validate_k8s_labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    let mut reasons = Vec::new();
    for (key, value) in labels {
        for reason in k8s_qualified_name(key) {
            reasons.push(format!("Invalid value: {}: {reason}", go_quote(key)));
        }
        if value.len() > DNS1123_LABEL_MAX_LENGTH {
            reasons.push(format!("Invalid value: {}: must be no more than 63 characters", go_quote(value)));
        }
        if !value.is_empty() && !is_qualified_name_part(value) {
            reasons.push(format!(
                "Invalid value: {}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                go_quote(value)
            ));
        }
    }
    join(reasons)
}

/// Largest total size of `metadata.annotations` (keys and values) the Kubernetes API server accepts.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Checks `metadata.annotations` as the Kubernetes API server does: keys are qualified names (checked
/// lower-cased, as Kubernetes does) and keys plus values take at most 256 KiB.
pub fn validate_k8s_annotations(annotations: &BTreeMap<String, String>) -> Result<(), String> {
    let mut reasons = Vec::new();
    let mut total = 0usize;
    for (key, value) in annotations {
        for reason in k8s_qualified_name(&key.to_ascii_lowercase()) {
            reasons.push(format!("Invalid value: {}: {reason}", go_quote(key)));
        }
        total = total.saturating_add(key.len()).saturating_add(value.len());
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        reasons.push(format!("Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"));
    }
    join(reasons)
}

/// Checks the labels of a workload selector, following Istio's `validateWorkloadSelector` (and
/// `ValidateAlphaWorkloadSelector`): no empty key (`empty key is not supported in selector: "=v"`) and
/// no `*` in keys or values (`wildcard is not supported in selector: "k=v"`). See
/// [`check_workload_selector`] for the warning about a selector without labels.
pub fn validate_workload_selector_labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    let mut reasons = Vec::new();
    for (key, value) in labels {
        let pair = go_quote(&format!("{key}={value}"));
        if key.is_empty() {
            reasons.push(format!("empty key is not supported in selector: {pair}"));
        }
        if key.contains('*') || value.contains('*') {
            reasons.push(format!("wildcard is not supported in selector: {pair}"));
        }
    }
    join(reasons)
}

/// Checks a workload selector that is present in the spec (Istio's `validateWorkloadSelector`): the
/// errors of [`validate_workload_selector_labels`] at `path`, and the warning
/// `workload selector specified without labels` when there are none.
pub fn check_workload_selector(path: &str, labels: &BTreeMap<String, String>, report: &mut Report) {
    report.check(path, validate_workload_selector_labels(labels));
    if labels.is_empty() {
        report.warn(path, "workload selector specified without labels");
    }
}

/// Kinds a policy `targetRef` may name (group as Istio prints it, version, kind).
const ALLOWED_TARGET_REFS: [(&str, &str, &str); 4] = [
    ("core", "v1", "Service"),
    ("networking.istio.io", "v1", "ServiceEntry"),
    ("gateway.networking.k8s.io", "v1", "Gateway"),
    ("gateway.networking.k8s.io", "v1", "GatewayClass"),
];

/// Checks a policy `targetRef`, following Istio's `validatePolicyTargetReference`: a name, no
/// namespace, and a Service, ServiceEntry, Gateway API Gateway or GatewayClass.
///
/// Errors (joined): `targetRef name must be set`,
/// `targetRef namespace must not be set; cross namespace referencing is not supported`,
/// `targetRef must be to one of [core/v1/Service …] but was <group>/<kind>`.
pub fn validate_policy_target_reference(target: &PolicyTargetReference) -> Result<(), String> {
    let mut reasons = Vec::new();
    if target.name.is_empty() {
        reasons.push("targetRef name must be set".to_owned());
    }
    if !target.namespace.is_empty() {
        reasons.push(
            "targetRef namespace must not be set; cross namespace referencing is not supported".to_owned(),
        );
    }
    let group = if target.group.is_empty() { "core" } else { target.group.as_str() };
    if !ALLOWED_TARGET_REFS.iter().any(|(g, _, k)| *g == group && *k == target.kind) {
        let allowed =
            ALLOWED_TARGET_REFS.iter().map(|(g, v, k)| format!("{g}/{v}/{k}")).collect::<Vec<_>>().join(" ");
        reasons.push(format!(
            "targetRef must be to one of [{allowed}] but was {}/{}",
            target.group, target.kind
        ));
    }
    join(reasons)
}

/// Checks that at most one of `selector`, `targetRef` and `targetRefs` is used, following Istio's
/// `validateOneOfSelectorType`: `only one of targetRefs or workloadSelector can be set`.
pub fn validate_one_of_selector_type(
    has_selector: bool,
    has_target_ref: bool,
    target_refs: usize,
) -> Result<(), String> {
    let set = usize::from(has_selector) + usize::from(has_target_ref) + usize::from(target_refs > 0);
    if set > 1 {
        return Err("only one of targetRefs or workloadSelector can be set".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::tests::{expect, map};

    // TestInstanceValidate (pkg/config/labels).
    #[test]
    fn istio_labels() {
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
        let cases: &[Case<'_>] = &[
            (&[], None),
            (&[("^", "^")], Some("invalid tag key: \"^\"")),
            (&[("key", "value")], None),
            (&[("key", "")], None),
            (&[("k8s.io/key", "value")], None),
            (&[("app.kubernetes.io/name", "value")], None),
            (&[("", "value")], Some("invalid tag key: \"\"")),
            (&[(".key", "value")], Some("invalid tag key")),
            (&[("key_", "value")], Some("invalid tag key")),
            (&[("key$", "value")], Some("invalid tag key")),
            (&[("istio./key", "value")], Some("invalid tag key")),
            (&[("key", ".value")], Some("invalid tag value: \".value\"")),
            (&[("key", "value_")], Some("invalid tag value")),
            (&[("key", "value$")], Some("invalid tag value")),
            (&[("Upper.Case/Key", "v")], None),
            (&[("a/b/c", "v")], Some("invalid tag key")),
        ];
        for (labels, want) in cases {
            expect(validate_labels(&map(labels)), *want, &format!("{labels:?}"));
        }
        let long_name = "a".repeat(64);
        expect(validate_labels(&map(&[(&long_name, "v")])), Some("(name is too long)"), "long name");
        let long_prefix = format!("{}/a", ["a"; 130].join("."));
        expect(
            validate_labels(&map(&[(&long_prefix, "v")])),
            Some("(DNS prefix is too long)"),
            "long prefix",
        );
        let long_value = "v".repeat(100);
        expect(validate_labels(&map(&[("k", &long_value)])), None, "long value");
    }

    #[test]
    fn kubernetes_labels_and_annotations() {
        expect(validate_k8s_labels(&map(&[("app", "reviews"), ("example.com/x", "")])), None, "ok");
        let long_value = "v".repeat(64);
        expect(
            validate_k8s_labels(&map(&[("k", &long_value)])),
            Some("must be no more than 63 characters"),
            "value",
        );
        expect(
            validate_k8s_labels(&map(&[("Example.com/x", "v")])),
            Some("prefix part a lowercase RFC 1123 subdomain"),
            "prefix",
        );
        expect(
            validate_k8s_labels(&map(&[("a/b/c", "v")])),
            Some("a qualified name must consist of"),
            "slashes",
        );
        expect(
            validate_k8s_labels(&map(&[("/x", "v")])),
            Some("prefix part must be non-empty"),
            "empty prefix",
        );
        expect(validate_k8s_labels(&map(&[("x/", "v")])), Some("name part must be non-empty"), "empty name");
        expect(
            validate_k8s_labels(&map(&[("k", "-v")])),
            Some("a valid label must be an empty string"),
            "bad value",
        );
        expect(
            validate_k8s_annotations(&map(&[("Example.com/Key", "anything goes: {}")])),
            None,
            "annotation",
        );
        expect(
            validate_k8s_annotations(&map(&[("bad key", "v")])),
            Some("Invalid value: \"bad key\""),
            "bad key",
        );
        let huge = "x".repeat(300 * 1024);
        expect(validate_k8s_annotations(&map(&[("k", &huge)])), Some("Too long"), "huge");
    }

    #[test]
    fn workload_selectors() {
        expect(validate_workload_selector_labels(&map(&[("app", "reviews")])), None, "ok");
        expect(
            validate_workload_selector_labels(&map(&[("", "v")])),
            Some("empty key is not supported in selector: \"=v\""),
            "empty",
        );
        expect(
            validate_workload_selector_labels(&map(&[("app", "rev*")])),
            Some("wildcard is not supported in selector: \"app=rev*\""),
            "value",
        );
        expect(
            validate_workload_selector_labels(&map(&[("a*", "v")])),
            Some("wildcard is not supported in selector"),
            "key",
        );
        let mut report = Report::default();
        check_workload_selector("spec.selector.matchLabels", &BTreeMap::new(), &mut report);
        assert!(report.errors.is_empty());
        assert_eq!(report.warnings[0].message, "workload selector specified without labels");
        expect(validate_one_of_selector_type(true, false, 0), None, "one");
        expect(
            validate_one_of_selector_type(true, false, 2),
            Some("only one of targetRefs or workloadSelector can be set"),
            "two",
        );
    }

    #[test]
    fn target_refs() {
        let target = |group: &str, kind: &str, name: &str, namespace: &str| PolicyTargetReference {
            group: group.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        };
        expect(validate_policy_target_reference(&target("", "Service", "reviews", "")), None, "svc");
        expect(
            validate_policy_target_reference(&target("gateway.networking.k8s.io", "Gateway", "gw", "")),
            None,
            "gw",
        );
        expect(
            validate_policy_target_reference(&target("networking.istio.io", "ServiceEntry", "se", "")),
            None,
            "se",
        );
        expect(
            validate_policy_target_reference(&target("apps", "Deployment", "x", "")),
            Some(
                "targetRef must be to one of [core/v1/Service networking.istio.io/v1/ServiceEntry gateway.networking.k8s.io/v1/Gateway gateway.networking.k8s.io/v1/GatewayClass] but was apps/Deployment",
            ),
            "deployment",
        );
        expect(
            validate_policy_target_reference(&target("", "Service", "", "")),
            Some("targetRef name must be set"),
            "name",
        );
        expect(
            validate_policy_target_reference(&target("", "Service", "x", "other")),
            Some("targetRef namespace must not be set; cross namespace referencing is not supported"),
            "namespace",
        );
    }
}
