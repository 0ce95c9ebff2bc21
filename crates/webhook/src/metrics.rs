//! The webhooks' Prometheus metrics, with istiod's names and labels: validation as
//! `pkg/webhooks/validation/server/monitoring.go`, injection as `pkg/kube/inject/monitoring.go`.
//! Counters carry no added `_total` (the names are istiod's as exported, some already end in
//! `_total`). Call [`describe`] once at startup; [`HISTOGRAM_BUCKETS`] gives istiod's buckets.

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};
use serde_json::Value;

/// Counter `galley_validation_passed{group,version,resource}`: objects the validating webhook
/// admitted, by the request's `resource` (`networking.istio.io`, `v1`, `virtualservices`).
pub const VALIDATION_PASSED: &str = "galley_validation_passed";
/// Counter `galley_validation_failed{group,version,resource,reason}`: requests the validating webhook
/// did not pass, by `reason` ([`Failure::label`]); dry-run requests are not counted (as istiod).
pub const VALIDATION_FAILED: &str = "galley_validation_failed";
/// Counter `galley_validation_http_error{status}`: validation requests answered with an HTTP error
/// (400 no body, 415 wrong `Content-Type`).
pub const VALIDATION_HTTP_ERROR: &str = "galley_validation_http_error";

/// Counter `sidecar_injection_requests_total`: requests on `/inject`.
pub const INJECTION_REQUESTS: &str = "sidecar_injection_requests_total";
/// Counter `sidecar_injection_success_total`: injection reviews answered (istiod counts every review
/// response written: injected, skipped, or denied).
pub const INJECTION_SUCCESS: &str = "sidecar_injection_success_total";
/// Counter `sidecar_injection_failure_total`: injection requests that failed (no body, wrong
/// `Content-Type`, undecodable review, a pod that could not be injected).
pub const INJECTION_FAILURE: &str = "sidecar_injection_failure_total";
/// Counter `sidecar_injection_skip_total`: pods not injected by policy (namespace, labels,
/// annotations).
pub const INJECTION_SKIP: &str = "sidecar_injection_skip_total";
/// Histogram `sidecar_injection_time_seconds`: seconds to answer one `/inject` request.
pub const INJECTION_TIME: &str = "sidecar_injection_time_seconds";

/// istiod's buckets for the histograms above (seconds).
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] =
    &[(INJECTION_TIME, &[0.1, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0])];

/// Why the validating webhook did not pass a request (istiod's `reason` label values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// An operation other than CREATE / UPDATE (admitted, still counted as failed, as istiod).
    UnsupportedOperation,
    /// `request.object` is not a JSON object.
    YamlDecodeError,
    /// Not an Istio config kind.
    UnknownType,
    /// Validation errors, unknown fields, or the always-reject annotation.
    InvalidResource,
}

impl Failure {
    /// The `reason` label: `unsupported_operation`, `yaml_decode_error`, `unknown_type`,
    /// `invalid_resource`.
    pub fn label(self) -> &'static str {
        match self {
            Failure::UnsupportedOperation => "unsupported_operation",
            Failure::YamlDecodeError => "yaml_decode_error",
            Failure::UnknownType => "unknown_type",
            Failure::InvalidResource => "invalid_resource",
        }
    }
}

/// Registers HELP texts (istiod's wording) and zero values of the unlabelled counters, so that the
/// dashboard's panels read 0 rather than "no data" before the first request.
pub fn describe() {
    describe_counter!(VALIDATION_PASSED, "Resource is valid");
    describe_counter!(VALIDATION_FAILED, "Resource validation failed");
    describe_counter!(VALIDATION_HTTP_ERROR, "Resource validation http serve errors");
    describe_counter!(INJECTION_REQUESTS, "Total number of sidecar injection requests.");
    describe_counter!(INJECTION_SUCCESS, "Total number of successful sidecar injection requests.");
    describe_counter!(INJECTION_FAILURE, "Total number of failed sidecar injection requests.");
    describe_counter!(INJECTION_SKIP, "Total number of skipped sidecar injection requests.");
    describe_histogram!(INJECTION_TIME, Unit::Seconds, "Total time taken for injection in seconds.");
    for name in [INJECTION_REQUESTS, INJECTION_SUCCESS, INJECTION_FAILURE, INJECTION_SKIP] {
        counter!(name).absolute(0);
    }
}

/// Counts one validation verdict on `request` (the AdmissionRequest JSON): passed when `failure` is
/// `None`, else failed with its reason unless the request is a dry run.
pub(crate) fn record_validation(request: &Value, failure: Option<Failure>) {
    let field = |name: &str| {
        request.pointer(&format!("/resource/{name}")).and_then(Value::as_str).unwrap_or_default().to_string()
    };
    let (group, version, resource) = (field("group"), field("version"), field("resource"));
    match failure {
        None => counter!(VALIDATION_PASSED, "group" => group, "version" => version, "resource" => resource)
            .increment(1),
        Some(_) if request.get("dryRun").and_then(Value::as_bool) == Some(true) => {}
        Some(failure) => counter!(
            VALIDATION_FAILED,
            "group" => group,
            "version" => version,
            "resource" => resource,
            "reason" => failure.label()
        )
        .increment(1),
    }
}

pub(crate) fn record_validation_http_error(status: u16) {
    counter!(VALIDATION_HTTP_ERROR, "status" => status.to_string()).increment(1);
}

pub(crate) fn record_injection(name: &'static str) {
    counter!(name).increment(1);
}

pub(crate) fn record_injection_time(seconds: f64) {
    histogram!(INJECTION_TIME).record(seconds);
}
