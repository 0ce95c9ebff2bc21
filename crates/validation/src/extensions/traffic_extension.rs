//! TrafficExtension validation. PLACEHOLDER: to be written with Istio's rules.

use api::meta::ObjectMeta;

use crate::Report;

/// Validates a TrafficExtension; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &api::extensions::TrafficExtension, report: &mut Report) {
    let _ = (meta, spec, report);
}
