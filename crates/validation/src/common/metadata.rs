//! Object metadata: Kubernetes' name, label and annotation rules and Istio's annotation rules.

use api::meta::ObjectMeta;

use super::{
    go::{go_quote, parse_go_bool},
    labels::{validate_k8s_annotations, validate_k8s_labels},
};
use crate::Report;

/// Annotation that makes Istio's validation webhook reject any object (used to test the webhook).
pub const ALWAYS_REJECT_ANNOTATION: &str = "internal.istio.io/webhook-always-reject";
/// Internal annotation naming the parents of generated config; users may not set it.
pub const INTERNAL_PARENT_NAMES_ANNOTATION: &str = "internal.istio.io/parents";
/// Internal annotation naming the namespace of generated config's parent; users may not set it.
pub const INTERNAL_PARENT_NAMESPACE_ANNOTATION: &str = "internal.istio.io/parent-namespace";
/// Annotation that puts an AuthorizationPolicy in dry-run mode (`"true"` / `"false"`).
pub const DRY_RUN_ANNOTATION: &str = "istio.io/dry-run";

/// Checks object metadata as Istio's validation does (`istioctl validate`, the webhook, `istioctl
/// analyze`).
///
/// `metadata.name` is required (unless `generateName` is set); `metadata.labels` and
/// `metadata.annotations` must be valid ([`validate_k8s_labels`], [`validate_k8s_annotations`]). The
/// *format* of the name and namespace is the API server's rule (a lowercase DNS-1123 subdomain and
/// label), checked before any admission webhook sees the object: Istio's validation does not check it
/// (a Gateway named `defaultgateway-bogusCredentialName` is valid to istioctl), so neither does this.
///
/// Istio rules (on `metadata.annotations`): the annotation `internal.istio.io/webhook-always-reject`
/// is rejected (`"internal.istio.io/webhook-always-reject" annotation found, rejecting`), and so are
/// Istio's internal parent annotations (`"internal.istio.io/parents" annotation found, this may not be
/// set by users`). The `istio.io/dry-run` annotation depends on the kind; see
/// [`check_dry_run_annotation`].
pub fn validate_metadata(meta: &ObjectMeta, report: &mut Report) {
    if meta.name.is_empty() && meta.generate_name.is_empty() {
        report.error("metadata.name", "Required value: name or generateName is required");
    }
    report.check("metadata.labels", validate_k8s_labels(&meta.labels));
    report.check("metadata.annotations", validate_k8s_annotations(&meta.annotations));
    if meta.annotations.contains_key(ALWAYS_REJECT_ANNOTATION) {
        report.error(
            "metadata.annotations",
            format!("{} annotation found, rejecting", go_quote(ALWAYS_REJECT_ANNOTATION)),
        );
    }
    for internal in [INTERNAL_PARENT_NAMESPACE_ANNOTATION, INTERNAL_PARENT_NAMES_ANNOTATION] {
        if meta.annotations.contains_key(internal) {
            report.error(
                "metadata.annotations",
                format!("{} annotation found, this may not be set by users", go_quote(internal)),
            );
        }
    }
}

/// Checks the `istio.io/dry-run` annotation, following Istio's `checkDryRunAnnotation`.
///
/// `authz_action` is `Some(action)` (the AuthorizationPolicy action's name, `ALLOW` when unset) for an
/// AuthorizationPolicy and `None` for every other kind. Errors:
/// `<ns>/<name> has unsupported annotation istio.io/dry-run, please remove the annotation` (other kinds),
/// `the annotation istio.io/dry-run currently only supports action ALLOW/DENY, found action CUSTOM in <ns>/<name>`,
/// `<ns>/<name> has annotation istio.io/dry-run with invalid value (yes): strconv.ParseBool: parsing "yes": invalid syntax`.
pub fn check_dry_run_annotation(meta: &ObjectMeta, authz_action: Option<&str>) -> Result<(), String> {
    let Some(value) = meta.annotations.get(DRY_RUN_ANNOTATION) else {
        return Ok(());
    };
    let who = format!("{}/{}", meta.namespace, meta.name);
    match authz_action {
        None => Err(format!(
            "{who} has unsupported annotation {DRY_RUN_ANNOTATION}, please remove the annotation"
        )),
        Some("ALLOW" | "DENY") => {
            if parse_go_bool(value).is_some() {
                Ok(())
            } else {
                Err(format!(
                    "{who} has annotation {DRY_RUN_ANNOTATION} with invalid value ({value}): strconv.ParseBool: parsing {}: invalid syntax",
                    go_quote(value)
                ))
            }
        }
        Some(action) => Err(format!(
            "the annotation {DRY_RUN_ANNOTATION} currently only supports action ALLOW/DENY, found action {action} in {who}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::tests::{expect, meta};

    #[test]
    fn metadata() {
        let mut report = Report::default();
        validate_metadata(&meta("reviews", "default"), &mut report);
        assert_eq!(report, Report::default());

        let mut report = Report::default();
        validate_metadata(&meta("", ""), &mut report);
        assert_eq!(report.errors[0].path, "metadata.name");
        assert!(report.errors[0].message.contains("name or generateName is required"));

        let mut generated = meta("", "");
        generated.generate_name = "reviews-".to_owned();
        let mut report = Report::default();
        validate_metadata(&generated, &mut report);
        assert!(report.is_valid(), "{report:?}");

        // The API server's name format is not Istio's rule (istioctl accepts upper-case names).
        let mut report = Report::default();
        validate_metadata(&meta("Reviews_v1", "Bad_NS"), &mut report);
        assert_eq!(report, Report::default());

        let mut rejected = meta("valid", "default");
        rejected.annotations.insert(ALWAYS_REJECT_ANNOTATION.to_owned(), "true".to_owned());
        rejected.annotations.insert(INTERNAL_PARENT_NAMES_ANNOTATION.to_owned(), "x".to_owned());
        rejected.labels.insert("bad key".to_owned(), "v".to_owned());
        let mut report = Report::default();
        validate_metadata(&rejected, &mut report);
        let messages: Vec<_> = report.errors.iter().map(|e| (e.path.as_str(), e.message.as_str())).collect();
        assert!(messages.contains(&(
            "metadata.annotations",
            "\"internal.istio.io/webhook-always-reject\" annotation found, rejecting"
        )));
        assert!(messages.contains(&(
            "metadata.annotations",
            "\"internal.istio.io/parents\" annotation found, this may not be set by users"
        )));
        assert!(messages.iter().any(|(path, _)| *path == "metadata.labels"));
    }

    #[test]
    fn dry_run_annotation() {
        let mut m = meta("policy", "foo");
        expect(check_dry_run_annotation(&m, None), None, "absent");
        m.annotations.insert(DRY_RUN_ANNOTATION.to_owned(), "true".to_owned());
        expect(
            check_dry_run_annotation(&m, None),
            Some("foo/policy has unsupported annotation istio.io/dry-run, please remove the annotation"),
            "other kind",
        );
        expect(check_dry_run_annotation(&m, Some("ALLOW")), None, "allow");
        expect(check_dry_run_annotation(&m, Some("DENY")), None, "deny");
        expect(
            check_dry_run_annotation(&m, Some("CUSTOM")),
            Some(
                "the annotation istio.io/dry-run currently only supports action ALLOW/DENY, found action CUSTOM in foo/policy",
            ),
            "custom",
        );
        m.annotations.insert(DRY_RUN_ANNOTATION.to_owned(), "yes".to_owned());
        expect(
            check_dry_run_annotation(&m, Some("ALLOW")),
            Some(
                "foo/policy has annotation istio.io/dry-run with invalid value (yes): strconv.ParseBool: parsing \"yes\": invalid syntax",
            ),
            "bad value",
        );
    }

    /// The reject annotation rule as the shared GVK dataset words it.
    #[test]
    fn always_reject_wording_matches_dataset() {
        let path = "/work/shared/istio-testdata/_derived/validation/gvk-dataset-cases.yaml";
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        let mut m = meta("valid", "default");
        m.annotations.insert(ALWAYS_REJECT_ANNOTATION.to_owned(), "true".to_owned());
        let mut report = Report::default();
        validate_metadata(&m, &mut report);
        let message = &report.errors[0].message;
        assert!(text.contains(&message.replace('"', "\\\"")), "{message}");
    }
}
