//! Istio's Telemetry validation cases.

use super::*;
use crate::testutil::{meta, run, spec};

fn check(yaml: &str) -> Report {
    let telemetry: Telemetry = spec(yaml);
    run(validate, &meta("name", "namespace"), &telemetry)
}

/// `(name, yaml, expected error substring and path or None, expected warning substring or None)`.
/// An expected error: a substring of its message and its path.
type Expect = Option<(&'static str, &'static str)>;

const CASES: &[(&str, &str, Expect, Option<&str>)] = &[
    ("empty", "{}", None, None),
    (
        "multiple providers",
        "tracing:\n- providers: [{name: a}, {name: b}]\n",
        None,
        Some("multiple providers"),
    ),
    ("multiple tracers", "tracing: [{}, {}]\n", None, Some("multiple tracing")),
    (
        "bad randomSamplingPercentage",
        "tracing:\n- randomSamplingPercentage: 101\n",
        Some((
            "randomSamplingPercentage must be in range [0.0, 100.0]",
            "spec.tracing[0].randomSamplingPercentage",
        )),
        None,
    ),
    (
        "negative randomSamplingPercentage",
        "tracing:\n- randomSamplingPercentage: -0.5\n",
        Some(("randomSamplingPercentage", "spec.tracing[0].randomSamplingPercentage")),
        None,
    ),
    ("good randomSamplingPercentage", "tracing:\n- randomSamplingPercentage: 100\n", None, None),
    (
        "tracing with a good custom tag",
        "tracing:\n- customTags:\n    clusterID:\n      environment: {name: FOO}\n",
        None,
        None,
    ),
    (
        "empty literal tag",
        "tracing:\n- customTags:\n    t:\n      literal: {value: \"\"}\n",
        Some(("literal tag value may not be empty", "spec.tracing[0].customTags.t.literal.value")),
        None,
    ),
    (
        "empty header tag",
        "tracing:\n- customTags:\n    t:\n      header: {defaultValue: x}\n",
        Some(("header tag name may not be empty", "spec.tracing[0].customTags.t.header.name")),
        None,
    ),
    (
        "empty environment tag",
        "tracing:\n- customTags:\n    t:\n      environment: {}\n",
        Some(("environment tag name may not be empty", "spec.tracing[0].customTags.t.environment.name")),
        None,
    ),
    (
        "empty formatter tag (CRD)",
        "tracing:\n- customTags:\n    t:\n      formatter: {}\n",
        Some(("formatter tag value may not be empty", "spec.tracing[0].customTags.t.formatter.value")),
        None,
    ),
    (
        "two tag types (CRD oneof)",
        "tracing:\n- customTags:\n    t:\n      literal: {value: a}\n      header: {name: b}\n",
        Some((
            "only one of literal, environment, header or formatter may be set",
            "spec.tracing[0].customTags.t",
        )),
        None,
    ),
    (
        "empty tag name",
        "tracing:\n- customTags:\n    \"\":\n      literal: {value: a}\n",
        Some(("tag name may not be empty", "spec.tracing[0].customTags")),
        None,
    ),
    (
        "empty provider name",
        "tracing:\n- providers: [{name: \"\"}]\n",
        Some(("providers.name may not be empty", "spec.tracing[0].providers[0].name")),
        None,
    ),
    (
        "bad metrics operation",
        "metrics:\n- overrides:\n  - tagOverrides:\n      my-tag: {operation: UPSERT, value: \"\"}\n",
        Some((
            "tagOverrides.value must be set when operation is UPSERT",
            "spec.metrics[0].overrides[0].tagOverrides.my-tag",
        )),
        None,
    ),
    (
        "tag override without operation or value",
        "metrics:\n- overrides:\n  - tagOverrides:\n      my-tag: {}\n",
        Some(("must be set when operation is UPSERT", "spec.metrics[0].overrides[0].tagOverrides.my-tag")),
        None,
    ),
    (
        "remove with value",
        "metrics:\n- overrides:\n  - tagOverrides:\n      my-tag: {operation: REMOVE, value: x}\n",
        Some((
            "tagOverrides.value may only be set when operation is UPSERT",
            "spec.metrics[0].overrides[0].tagOverrides.my-tag.value",
        )),
        None,
    ),
    (
        "good metrics operation",
        "metrics:\n- overrides:\n  - tagOverrides:\n      my-tag: {operation: UPSERT, value: some-cel-expression}\n      other: {operation: REMOVE}\n",
        None,
        None,
    ),
    (
        "empty tag override name",
        "metrics:\n- overrides:\n  - tagOverrides:\n      \"\": {operation: REMOVE}\n",
        None,
        Some("tagOverrides.name may not be empty"),
    ),
    (
        "empty custom metric",
        "metrics:\n- overrides:\n  - match: {customMetric: \"\"}\n",
        Some(("customMetric may not be empty", "spec.metrics[0].overrides[0].match.customMetric")),
        None,
    ),
    (
        "metric and custom metric (CRD oneof)",
        "metrics:\n- overrides:\n  - match: {metric: REQUEST_COUNT, customMetric: foo}\n",
        Some(("only one of metric or customMetric may be set", "spec.metrics[0].overrides[0].match")),
        None,
    ),
    (
        "good metric selector",
        "metrics:\n- providers: [{name: prometheus}]\n  overrides:\n  - match: {metric: ALL_METRICS, mode: CLIENT_AND_SERVER}\n    disabled: true\n  reportingInterval: 10s\n",
        None,
        None,
    ),
    (
        "short reporting interval (CRD)",
        "metrics:\n- reportingInterval: 0.0001s\n",
        Some(("must be a valid duration greater than 1ms", "spec.metrics[0].reportingInterval")),
        None,
    ),
    (
        "empty metrics provider",
        "metrics:\n- providers: [{}]\n",
        Some(("providers.name may not be empty", "spec.metrics[0].providers[0].name")),
        None,
    ),
    (
        "multi-accessloggings",
        "accessLogging:\n- providers: [{name: envoy}]\n- providers: [{name: otel}]\n",
        None,
        None,
    ),
    (
        "multi-accesslogging-providers",
        "accessLogging:\n- providers: [{name: envoy}, {name: otel}]\n",
        None,
        None,
    ),
    (
        "empty access log provider",
        "accessLogging:\n- providers: [{name: \"\"}]\n",
        Some(("providers.name may not be empty", "spec.accessLogging[0].providers[0].name")),
        None,
    ),
    ("good filter", "accessLogging:\n- filter: {expression: \"response.code >= 400\"}\n", None, None),
    (
        "bad filter",
        "accessLogging:\n- filter: {expression: \")++++\"}\n",
        Some((
            "must be a valid CEL expression, ERROR: <input>:1:1: Syntax error",
            "spec.accessLogging[0].filter.expression",
        )),
        None,
    ),
    (
        "good targetRef",
        "tracing:\n- customTags:\n    clusterID:\n      environment: {name: FOO}\ntargetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo}\n",
        None,
        None,
    ),
    (
        "bad targetRef - empty name",
        "targetRef: {group: gateway.networking.k8s.io, kind: Gateway}\n",
        Some(("targetRef name must be set", "spec.targetRef")),
        None,
    ),
    (
        "bad targetRef - non-empty namespace",
        "targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo, namespace: bar}\n",
        Some(("targetRef namespace must not be set", "spec.targetRef")),
        None,
    ),
    (
        "bad targetRef - wrong group",
        "targetRef: {group: wrong-group, kind: Gateway, name: foo}\n",
        Some((
            "targetRef must be to one of [core/v1/Service networking.istio.io/v1/ServiceEntry gateway.networking.k8s.io/v1/Gateway gateway.networking.k8s.io/v1/GatewayClass] but was wrong-group/Gateway",
            "spec.targetRef",
        )),
        None,
    ),
    (
        "bad targetRef - wrong kind",
        "targetRefs:\n- {group: gateway.networking.k8s.io, kind: wrong-kind, name: foo}\n",
        Some(("but was gateway.networking.k8s.io/wrong-kind", "spec.targetRefs[0]")),
        None,
    ),
    (
        "targetRef and selector cannot both be set",
        "targetRef: {group: gateway.networking.k8s.io, kind: wrong-kind, name: foo}\nselector:\n  matchLabels: {app: httpbin}\n",
        Some(("only one of targetRefs or workloadSelector can be set", "spec")),
        None,
    ),
];

#[test]
fn istio_cases() {
    for (name, yaml, expected, warning) in CASES {
        let report = check(yaml);
        match expected {
            None => assert!(report.errors.is_empty(), "{name}: unexpected errors {:?}", report.errors),
            Some((message, path)) => assert!(
                report.errors.iter().any(|e| e.message.contains(message) && e.path == *path),
                "{name}: expected {message:?} at {path}, got {:?}",
                report.errors
            ),
        }
        match warning {
            None => {
                assert!(report.warnings.is_empty(), "{name}: unexpected warnings {:?}", report.warnings)
            }
            Some(w) => assert!(
                report.warnings.iter().any(|x| x.message.contains(w)),
                "{name}: {:?}",
                report.warnings
            ),
        }
    }
}
