//! Checks shared by several kinds. PLACEHOLDER: to be written.

use api::meta::ObjectMeta;

use crate::Report;

/// Checks object metadata (name, namespace, labels, annotations) like the Istio webhook does.
pub fn validate_metadata(meta: &ObjectMeta, report: &mut Report) {
    let _ = (meta, report);
}
