//! `POST /inject` and `/inject/…` (istiod's `serveInject`): the AdmissionReview envelope of
//! [`crate::admission`] around [`inject::injector::Injector::answer`]. A patch is answered as
//! `patchType: JSONPatch` with the patch base64-encoded (`response.patch`); a pod that cannot be
//! injected is denied with istiod's message.

use base64::Engine;
use inject::injector::{Answer, Injector};
use serde_json::{Map, Value, json};

use crate::{
    admission::{Decision, HttpAnswer, answer_review},
    metrics,
};

/// Answers one injection review that came on `path`. Counts skipped pods
/// (`sidecar_injection_skip_total`) and failures (`sidecar_injection_failure_total`: a review that
/// cannot be decoded, a pod that cannot be injected) as istiod; the caller counts the request, its
/// time, and the answer written ([`crate::metrics`]).
pub fn review(injector: &Injector, content_type: Option<&str>, body: &[u8], path: &str) -> HttpAnswer {
    let mut decoded = false;
    let answer = answer_review(content_type, body, |request| {
        decoded = true;
        let Some(request) = request else {
            metrics::record_injection(metrics::INJECTION_FAILURE);
            return Decision::deny("could not decode object: AdmissionReview has no request".into())
                .response_fields();
        };
        match injector.answer(request, path) {
            Answer::Allow => {
                metrics::record_injection(metrics::INJECTION_SKIP);
                Map::from_iter([("allowed".to_string(), json!(true))])
            }
            Answer::Patch(ops) => {
                let patch = serde_json::to_vec(&ops).unwrap_or_default();
                Map::from_iter([
                    ("allowed".to_string(), json!(true)),
                    (
                        "patch".to_string(),
                        Value::String(base64::engine::general_purpose::STANDARD.encode(patch)),
                    ),
                    ("patchType".to_string(), json!("JSONPatch")),
                ])
            }
            Answer::Deny(message) => {
                metrics::record_injection(metrics::INJECTION_FAILURE);
                tracing::error!(%message, "pod injection failed");
                Decision::deny(message).response_fields()
            }
        }
    });
    if answer.status == 200 && !decoded {
        // A review answered without being decoded (`could not decode body`).
        metrics::record_injection(metrics::INJECTION_FAILURE);
    }
    answer
}
