//! EnvoyFilter validation. PLACEHOLDER: to be written with Istio's rules.

use api::meta::ObjectMeta;

use crate::Report;

/// Validates a EnvoyFilter; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &api::networking::EnvoyFilter, report: &mut Report) {
    let _ = (meta, spec, report);
}
