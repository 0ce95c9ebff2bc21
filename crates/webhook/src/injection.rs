//! `POST /inject` and `/inject/…` (istiod's `serveInject`): the AdmissionReview envelope of
//! [`crate::admission`] around [`inject::injector::Injector::answer`]. A patch is answered as
//! `patchType: JSONPatch` with the patch base64-encoded (`response.patch`); a pod that cannot be
//! injected is denied with istiod's message.

use base64::Engine;
use inject::injector::{Answer, Injector};
use serde_json::{Map, Value, json};

use crate::admission::{Decision, HttpAnswer, answer_review};

/// Answers one injection review that came on `path`.
pub fn review(injector: &Injector, content_type: Option<&str>, body: &[u8], path: &str) -> HttpAnswer {
    answer_review(content_type, body, |request| {
        let Some(request) = request else {
            return Decision::deny("could not decode object: AdmissionReview has no request".into())
                .response_fields();
        };
        match injector.answer(request, path) {
            Answer::Allow => {
                metrics::counter!("sidecar_injection_skip_total").increment(1);
                Map::from_iter([("allowed".to_string(), json!(true))])
            }
            Answer::Patch(ops) => {
                metrics::counter!("sidecar_injection_success_total").increment(1);
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
                metrics::counter!("sidecar_injection_failure_total").increment(1);
                tracing::error!(%message, "pod injection failed");
                Decision::deny(message).response_fields()
            }
        }
    })
}
