//! The pure half of the validating webhook: an AdmissionReview request body in, the HTTP answer out
//! (Istio's `pkg/webhooks/validation/server`, `serve` + `validate`). No I/O, no clock: unit-tested with
//! plain values, served by [`super::serve`].
//!
//! What istiod answers, case by case (and so meshpilot):
//!
//! | request | answer |
//! |---|---|
//! | empty body | HTTP 400 `no body found` |
//! | `Content-Type` other than `application/json` | HTTP 415 ``invalid Content-Type, want `application/json` `` |
//! | body larger than 6 MiB (`MaxRequestBodyBytes`) | HTTP 400 `Request entity too large: limit is 6291456` ([`too_large`]) |
//! | body that is not an `admission.k8s.io/v1` or `v1beta1` AdmissionReview | HTTP 200, a v1beta1-shaped review without type fields whose `response` denies with `could not decode body: …` |
//! | operation other than CREATE / UPDATE | allowed |
//! | `request.object` not an object with `apiVersion`/`kind`/`metadata` | denied: `cannot decode configuration: …` |
//! | group and kind not an Istio config kind (the version is ignored, as istiod's `FindByGroupKind`) | denied: `unrecognized type GROUP/VERSION, Kind=KIND` |
//! | annotation `internal.istio.io/webhook-always-reject` (istiod's own readiness probe) | denied: `configuration is invalid: "internal.istio.io/webhook-always-reject" annotation found, rejecting` |
//! | validation errors | denied: `configuration is invalid: PATH: REASON` (several: Go's multierror text, `N errors occurred:` then one `\t* PATH: REASON` line each) |
//! | valid | allowed, validation warnings in `response.warnings` (`PATH: REASON`) |
//!
//! The answer has the request's `apiVersion` and `kind` and `response.uid` = `request.uid`.
//!
//! Where meshpilot differs: the validation is meshpilot's (the `meshpilot validate` rules: strict
//! decoding, unknown fields, Istio's per-kind rules), so every finding carries its field path; a review
//! without `request` is denied with `could not decode object: AdmissionReview has no request` (istiod
//! dereferences the missing request and its HTTP server drops the connection).

use api::{Kind, Schema, schema::GroupVersionKind};
use config::parse::{Finding, ParseOptions, parse_json};
use serde_json::{Map, Value, json};

use crate::metrics::{self, Failure};

/// Istio's `MaxRequestBodyBytes`: the largest review body read (6 MiB, twice Kubernetes' own limit).
pub const MAX_REQUEST_BODY_BYTES: usize = 6 * 1024 * 1024;

/// Istio's `constants.AlwaysReject`: an object carrying this annotation is always rejected; istiod
/// dry-runs such a Gateway to learn that its webhook is serving before it switches the
/// ValidatingWebhookConfiguration to `failurePolicy: Fail`.
pub const ALWAYS_REJECT_ANNOTATION: &str = "internal.istio.io/webhook-always-reject";

const V1: &str = "admission.k8s.io/v1";
const V1BETA1: &str = "admission.k8s.io/v1beta1";

/// An HTTP answer: status code, content type and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpAnswer {
    /// HTTP status code (200 for every decoded review, allowed or denied).
    pub status: u16,
    /// `application/json` for reviews, `text/plain; charset=utf-8` for HTTP errors (Go's `http.Error`).
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpAnswer {
    fn error(status: u16, message: &str) -> HttpAnswer {
        // Go's http.Error appends a newline.
        HttpAnswer {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{message}\n").into_bytes(),
        }
    }

    fn review(value: &Value) -> HttpAnswer {
        HttpAnswer {
            status: 200,
            content_type: "application/json",
            body: serde_json::to_vec(value).unwrap_or_default(),
        }
    }
}

/// The decision on one admission request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether the object is admitted.
    pub allowed: bool,
    /// Why not (`response.status.message`), when denied.
    pub message: Option<String>,
    /// `response.warnings` (validation warnings of an admitted object).
    pub warnings: Vec<String>,
}

impl Decision {
    fn allow(warnings: Vec<String>) -> Decision {
        Decision { allowed: true, message: None, warnings }
    }

    pub(crate) fn deny(message: String) -> Decision {
        Decision { allowed: false, message: Some(message), warnings: Vec::new() }
    }

    /// The AdmissionResponse JSON (`uid`, `allowed`, `status.message`, `warnings`).
    fn response(&self, uid: &str) -> Value {
        let mut response = Map::new();
        response.insert("uid".into(), uid.into());
        response.extend(self.response_fields());
        Value::Object(response)
    }

    /// The AdmissionResponse's fields but `uid` (`allowed`, `status.message`, `warnings`).
    pub(crate) fn response_fields(&self) -> Map<String, Value> {
        let mut response = Map::new();
        response.insert("allowed".into(), self.allowed.into());
        if let Some(message) = &self.message {
            response.insert("status".into(), json!({"metadata": {}, "message": message}));
        }
        if !self.warnings.is_empty() {
            response.insert("warnings".into(), json!(self.warnings));
        }
        response
    }
}

/// The answer to a body larger than [`MAX_REQUEST_BODY_BYTES`] (istiod answers 400 with the
/// Kubernetes "entity too large" error text).
pub fn too_large() -> HttpAnswer {
    HttpAnswer::error(400, &format!("Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}"))
}

/// Answers one `POST /validate`: `content_type` is the request's `Content-Type` header, `body` its
/// body (the caller stops reading past [`MAX_REQUEST_BODY_BYTES`] and answers [`too_large`]); `parse`
/// gives the domain suffix recorded on configs.
///
/// Counted as istiod counts (`crate::metrics`): each judged request as `galley_validation_passed` or
/// `_failed`, each HTTP error (400, 415) as `galley_validation_http_error`.
pub fn review(content_type: Option<&str>, body: &[u8], parse: &ParseOptions) -> HttpAnswer {
    let answer = answer_review(content_type, body, |request| match request {
        Some(request) => {
            let (decision, failure) = judge(request, parse);
            metrics::record_validation(request, failure);
            decision.response_fields()
        }
        None => {
            Decision::deny("could not decode object: AdmissionReview has no request".into()).response_fields()
        }
    });
    if answer.status != 200 {
        metrics::record_validation_http_error(answer.status);
    }
    answer
}

/// The AdmissionReview envelope shared by `/validate` and `/inject` (istiod's `serve` and
/// `serveInject`): body and content type checked, the review decoded (v1 or v1beta1), `respond`
/// given its `request` (`None` when it has none) and answering the response's fields but `uid`,
/// the answer carrying the request's `apiVersion`, `kind` and `uid`.
pub(crate) fn answer_review(
    content_type: Option<&str>,
    body: &[u8],
    respond: impl FnOnce(Option<&Value>) -> Map<String, Value>,
) -> HttpAnswer {
    if body.is_empty() {
        return HttpAnswer::error(400, "no body found");
    }
    if content_type != Some("application/json") {
        return HttpAnswer::error(415, "invalid Content-Type, want `application/json`");
    }
    let review: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return undecodable(&format!("could not decode body: {e}")),
    };
    let api_version = review.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = review.get("kind").and_then(Value::as_str).unwrap_or_default();
    if api_version.is_empty() || kind.is_empty() {
        return undecodable(&format!(
            "could not decode body: Object 'Kind' is missing in '{}'",
            String::from_utf8_lossy(body)
        ));
    }
    if kind != "AdmissionReview" || (api_version != V1 && api_version != V1BETA1) {
        return undecodable(&format!(
            "could not decode body: no kind \"{kind}\" is registered for version \"{api_version}\""
        ));
    }
    let request = review.get("request").filter(|r| r.is_object());
    let uid = request.and_then(|r| r.get("uid")).and_then(Value::as_str).unwrap_or_default();
    let mut response = Map::new();
    response.insert("uid".into(), uid.into());
    response.extend(respond(request));
    HttpAnswer::review(&json!({
        "kind": kind,
        "apiVersion": api_version,
        "response": response,
    }))
}

/// A review that could not be decoded: istiod answers a v1beta1 AdmissionReview without type fields.
fn undecodable(message: &str) -> HttpAnswer {
    HttpAnswer::review(&json!({"response": Decision::deny(message.to_string()).response("")}))
}

/// Istio's `validate`: the decision on one AdmissionRequest (`request` as JSON).
pub fn decide(request: &Value, parse: &ParseOptions) -> Decision {
    judge(request, parse).0
}

/// [`decide`], with why the request did not pass (`None` when it passed) for the metrics: istiod's
/// reasons, all of meshpilot's validation findings (strict decoding, unknown fields, per-kind rules,
/// the always-reject annotation) being `invalid_resource`.
fn judge(request: &Value, parse: &ParseOptions) -> (Decision, Option<Failure>) {
    let operation = request.get("operation").and_then(Value::as_str).unwrap_or_default();
    if operation != "CREATE" && operation != "UPDATE" {
        return (Decision::allow(Vec::new()), Some(Failure::UnsupportedOperation));
    }
    let object = match request.get("object") {
        Some(object @ Value::Object(_)) => object,
        Some(other) => {
            let message =
                format!("cannot decode configuration: expected a JSON object, found {}", json_type(other));
            return (Decision::deny(message), Some(Failure::YamlDecodeError));
        }
        None => {
            let message = "cannot decode configuration: request has no object".into();
            return (Decision::deny(message), Some(Failure::YamlDecodeError));
        }
    };
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let gvk = GroupVersionKind::from_api_version(api_version, kind);
    let Some(schema) = schema_by_group_kind(&gvk.group, kind) else {
        let gv =
            if gvk.group.is_empty() { gvk.version.clone() } else { format!("{}/{}", gvk.group, gvk.version) };
        return (Decision::deny(format!("unrecognized type {gv}, Kind={kind}")), Some(Failure::UnknownType));
    };
    if object.pointer("/metadata/annotations").and_then(|a| a.get(ALWAYS_REJECT_ANNOTATION)).is_some() {
        let message =
            format!("configuration is invalid: \"{ALWAYS_REJECT_ANNOTATION}\" annotation found, rejecting");
        return (Decision::deny(message), Some(Failure::InvalidResource));
    }
    // The version does not matter (every version has one schema): read it at the served one.
    let mut object = object.clone();
    if !schema.serves_version(&gvk.version) {
        object["apiVersion"] = schema.api_version().into();
    }
    let mut options = parse.clone();
    if let Some(namespace) = request.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        options.default_namespace = namespace.to_string();
    }
    let documents = parse_json("admission request", &object, &options);
    let errors: Vec<&Finding> = documents.iter().flat_map(|d| &d.errors).collect();
    if !errors.is_empty() {
        let message = format!("configuration is invalid: {}", multierror(&errors));
        return (Decision::deny(message), Some(Failure::InvalidResource));
    }
    (Decision::allow(documents.iter().flat_map(|d| &d.warnings).map(Finding::to_string).collect()), None)
}

fn schema_by_group_kind(group: &str, kind: &str) -> Option<&'static Schema> {
    Kind::ALL.iter().map(Kind::schema).find(|s| s.group == group && s.kind.as_str() == kind)
}

/// One error as itself; several as hashicorp's multierror prints them (istiod's validation errors).
fn multierror(errors: &[&Finding]) -> String {
    if let [one] = errors {
        return one.to_string();
    }
    let mut text = format!("{} errors occurred:", errors.len());
    for e in errors {
        text.push_str(&format!("\n\t* {e}"));
    }
    text
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vs(weight: i64) -> Value {
        json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService",
            "metadata": {"name": "reviews", "namespace": "default"},
            "spec": {
                "hosts": ["reviews"],
                "http": [{"route": [
                    {"destination": {"host": "reviews", "subset": "v1"}, "weight": weight},
                    {"destination": {"host": "reviews", "subset": "v2"}, "weight": 100 - weight}
                ]}]
            }
        })
    }

    fn request_review(version: &str, operation: &str, object: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": version,
            "kind": "AdmissionReview",
            "request": {
                "uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
                "kind": {"group": "networking.istio.io", "version": "v1", "kind": "VirtualService"},
                "resource": {"group": "networking.istio.io", "version": "v1", "resource": "virtualservices"},
                "namespace": "default",
                "name": "reviews",
                "operation": operation,
                "object": object,
            }
        }))
        .unwrap()
    }

    fn answer(body: &[u8]) -> Value {
        let answer = review(Some("application/json"), body, &ParseOptions::default());
        assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.body));
        assert_eq!(answer.content_type, "application/json");
        serde_json::from_slice(&answer.body).unwrap()
    }

    #[test]
    fn deep_nesting_is_denied_without_a_crash() {
        let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
        let object = format!(
            r#"{{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{{"name":"x"}},"spec":{{"hosts":{deep}}}}}"#
        );
        let body = format!(
            r#"{{"apiVersion":"{V1}","kind":"AdmissionReview","request":{{"uid":"u","operation":"CREATE","object":{object}}}}}"#
        );
        let out = answer(body.as_bytes());
        assert_eq!(out["response"]["allowed"], false);
        let message = out["response"]["status"]["message"].as_str().unwrap();
        assert!(message.contains("recursion limit exceeded"), "{message}");
    }

    #[test]
    fn negative_weight_is_denied_naming_the_field() {
        let out = answer(&request_review(V1, "CREATE", vs(-5)));
        assert_eq!(out["apiVersion"], V1);
        assert_eq!(out["kind"], "AdmissionReview");
        assert_eq!(out["response"]["uid"], "0df28fbd-5f5f-11e8-bc74-36e6bb280816");
        assert_eq!(out["response"]["allowed"], false);
        let message = out["response"]["status"]["message"].as_str().unwrap();
        assert!(message.starts_with("configuration is invalid: "), "{message}");
        assert!(message.contains("spec.http[0].route[0].weight"), "{message}");
    }

    #[test]
    fn valid_object_is_allowed_for_v1_and_v1beta1() {
        for version in [V1, V1BETA1] {
            for op in ["CREATE", "UPDATE"] {
                let out = answer(&request_review(version, op, vs(30)));
                assert_eq!(out["apiVersion"], version);
                assert_eq!(out["response"]["allowed"], true, "{out}");
                assert!(out["response"].get("status").is_none());
            }
        }
    }

    #[test]
    fn warnings_are_returned_on_allowed_objects() {
        let sidecar = json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "Sidecar",
            "metadata": {"name": "default", "namespace": "default"},
            "spec": {"egress": [{"hosts": ["./reviews.default.svc.cluster.local", "./reviews.default.svc.cluster.local"]}]}
        });
        let out = answer(&request_review(V1, "CREATE", sidecar));
        assert_eq!(out["response"]["allowed"], true, "{out}");
        assert_eq!(
            out["response"]["warnings"],
            json!(["spec.egress[0].hosts[1]: duplicated egress host: ./reviews.default.svc.cluster.local"])
        );
    }

    #[test]
    fn several_errors_are_listed_as_multierror() {
        let mut object = vs(-5);
        object["spec"]["http"][0]["route"][1]["weight"] = json!(-7);
        let out = answer(&request_review(V1, "CREATE", object));
        let message = out["response"]["status"]["message"].as_str().unwrap();
        assert!(message.contains(" errors occurred:\n\t* "), "{message}");
        assert!(message.contains("spec.http[0].route[1].weight"), "{message}");
    }

    #[test]
    fn delete_and_connect_are_allowed_without_looking() {
        for op in ["DELETE", "CONNECT"] {
            let out = answer(&request_review(V1, op, json!("not even an object")));
            assert_eq!(out["response"]["allowed"], true);
        }
    }

    #[test]
    fn unknown_kind_is_unrecognized_type() {
        let object = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
        let out = answer(&request_review(V1, "CREATE", object));
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["message"], "unrecognized type example.com/v1, Kind=Widget");
    }

    #[test]
    fn any_version_of_an_istio_kind_is_validated() {
        let mut object = vs(-5);
        object["apiVersion"] = json!("networking.istio.io/v9");
        let out = answer(&request_review(V1, "CREATE", object));
        let message = out["response"]["status"]["message"].as_str().unwrap();
        assert!(message.contains("spec.http[0].route[0].weight"), "{message}");
    }

    #[test]
    fn always_reject_annotation_is_denied() {
        let object = json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "invalid-gateway", "namespace": "istio-system",
                         "annotations": {ALWAYS_REJECT_ANNOTATION: "true"}},
            "spec": {"servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}
        });
        let out = answer(&request_review(V1, "CREATE", object));
        assert_eq!(
            out["response"]["status"]["message"],
            "configuration is invalid: \"internal.istio.io/webhook-always-reject\" annotation found, rejecting"
        );
    }

    #[test]
    fn unknown_top_level_field_is_denied() {
        let mut object = vs(30);
        object["extra"] = json!(1);
        let out = answer(&request_review(V1, "CREATE", object));
        let message = out["response"]["status"]["message"].as_str().unwrap();
        assert!(message.contains("extra"), "{message}");
    }

    #[test]
    fn object_that_is_not_a_map_cannot_be_decoded() {
        let out = answer(&request_review(V1, "CREATE", json!([1, 2])));
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(
            out["response"]["status"]["message"],
            "cannot decode configuration: expected a JSON object, found an array"
        );
    }

    #[test]
    fn failures_carry_istiods_metric_reasons() {
        let options = ParseOptions::default();
        let reason = |operation: &str, object: Value| {
            judge(&json!({"operation": operation, "object": object}), &options).1.map(Failure::label)
        };
        assert_eq!(reason("CREATE", vs(50)), None);
        assert_eq!(reason("DELETE", vs(50)), Some("unsupported_operation"));
        assert_eq!(reason("CREATE", json!([1])), Some("yaml_decode_error"));
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        assert_eq!(reason("CREATE", pod), Some("unknown_type"));
        assert_eq!(reason("UPDATE", vs(-5)), Some("invalid_resource"));
    }

    #[test]
    fn http_errors_match_istiod() {
        let options = ParseOptions::default();
        let empty = review(Some("application/json"), b"", &options);
        assert_eq!((empty.status, empty.body.as_slice()), (400, &b"no body found\n"[..]));
        let yaml = review(Some("application/yaml"), b"{}", &options);
        assert_eq!(yaml.status, 415);
        assert_eq!(yaml.body, b"invalid Content-Type, want `application/json`\n");
        assert_eq!(review(None, b"{}", &options).status, 415);
    }

    #[test]
    fn undecodable_reviews_are_denied_in_a_typeless_review() {
        for body in [&b"{not json"[..], b"{}", br#"{"apiVersion":"v1","kind":"Pod"}"#] {
            let out = answer(body);
            assert!(out.get("apiVersion").is_none(), "{out}");
            assert_eq!(out["response"]["uid"], "");
            assert_eq!(out["response"]["allowed"], false);
            let message = out["response"]["status"]["message"].as_str().unwrap();
            assert!(message.starts_with("could not decode body: "), "{message}");
        }
        let out = answer(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#);
        assert_eq!(out["apiVersion"], V1);
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(
            out["response"]["status"]["message"],
            "could not decode object: AdmissionReview has no request"
        );
    }
}
