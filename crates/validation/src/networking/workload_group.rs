//! WorkloadGroup validation. PLACEHOLDER: to be written with Istio's rules.

use api::meta::ObjectMeta;

use crate::Report;

/// Validates a WorkloadGroup; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &api::networking::WorkloadGroup, report: &mut Report) {
    let _ = (meta, spec, report);
}
