//! VirtualService validation. PLACEHOLDER: to be written with Istio's rules.

use api::meta::ObjectMeta;

use crate::Report;

/// Validates a VirtualService; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &api::networking::VirtualService, report: &mut Report) {
    let _ = (meta, spec, report);
}
