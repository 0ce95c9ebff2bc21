//! Sidecar validation. PLACEHOLDER: to be written with Istio's rules.

use api::meta::ObjectMeta;

use crate::Report;

/// Validates a Sidecar; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &api::networking::Sidecar, report: &mut Report) {
    let _ = (meta, spec, report);
}
