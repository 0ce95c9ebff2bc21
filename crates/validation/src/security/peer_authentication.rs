//! PeerAuthentication validation, following Istio's `ValidatePeerAuthentication` (with
//! `validateWorkloadSelector`) and the rules of the PeerAuthentication CRD schema (`portLevelMtls
//! requires selector`, port keys 1–65535, mode enums, selector label limits).
//!
//! Istio also rejects an explicitly empty `portLevelMtls: {}` (and so does the CRD's
//! `minProperties: 1`); the typed spec cannot tell it from an absent map, so that case is not
//! reported here.

use api::{
    meta::ObjectMeta,
    security::peer_authentication::{PeerAuthentication, peer_authentication::mutual_tls::Mode},
};

use super::authorization_policy::check_policy_selection;
use crate::Report;
use crate::common::check_enum;

/// Validates a PeerAuthentication; findings use paths from the document root (`spec.…`).
///
/// Follows Istio's `ValidatePeerAuthentication`: port-level mTLS needs a selector with labels (a
/// mesh- or namespace-wide policy cannot have it), port numbers are 1–65535, and the selector's
/// labels are valid (a warning when it has none). The mTLS modes must be known values (CRD enum).
pub fn validate(meta: &ObjectMeta, spec: &PeerAuthentication, report: &mut Report) {
    let _ = meta;
    let empty_selector = spec.selector.as_ref().is_none_or(|s| s.match_labels.is_empty());
    if empty_selector && !spec.port_level_mtls.is_empty() {
        report.error("spec.portLevelMtls", "mesh/namespace peer authentication cannot have port level mTLS");
    }
    for (port, mtls) in &spec.port_level_mtls {
        let path = format!("spec.portLevelMtls.{port}");
        if *port == 0 || *port > 65535 {
            report.error(&path, "port must be in range 1..65535");
        }
        check_enum::<Mode>(&format!("{path}.mode"), mtls.mode, report);
    }
    if let Some(mtls) = &spec.mtls {
        check_enum::<Mode>("spec.mtls.mode", mtls.mode, report);
    }
    check_policy_selection(spec.selector.as_ref(), None, &[], report);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{meta, run, spec};

    fn check(name: &str, yaml: &str) -> Report {
        let policy: PeerAuthentication = spec(yaml);
        run(validate, &meta(name, "istio-system"), &policy)
    }

    /// `(name, config name, yaml, expected error substring and path or None, warning expected)`.
    /// An expected error: a substring of its message and its path.
    type Expect = Option<(&'static str, &'static str)>;

    const CASES: &[(&str, &str, &str, Expect, bool)] = &[
        ("empty spec", "default", "{}", None, false),
        ("empty mtls with selector of empty labels", "default", "selector: {}\n", None, true),
        ("empty spec with non default name", "some-name", "{}", None, false),
        (
            "default name with non empty selector",
            "default",
            "selector:\n  matchLabels: {app: httpbin}\n",
            None,
            false,
        ),
        (
            "empty selector with port level mtls",
            "default",
            "portLevelMtls:\n  8080: {mode: UNSET}\n",
            Some(("mesh/namespace peer authentication cannot have port level mTLS", "spec.portLevelMtls")),
            false,
        ),
        (
            "selector without labels and port level mtls",
            "foo",
            "selector: {}\nportLevelMtls:\n  8080: {mode: STRICT}\n",
            Some(("cannot have port level mTLS", "spec.portLevelMtls")),
            true,
        ),
        (
            "port 0",
            "foo",
            "selector:\n  matchLabels: {app: httpbin}\nportLevelMtls:\n  0: {mode: UNSET}\n",
            Some(("port must be in range 1..65535", "spec.portLevelMtls.0")),
            false,
        ),
        (
            "port too high",
            "foo",
            "selector:\n  matchLabels: {app: httpbin}\nportLevelMtls:\n  \"65536\": {mode: DISABLE}\n",
            Some(("port must be in range 1..65535", "spec.portLevelMtls.65536")),
            false,
        ),
        ("unset mode", "default", "mtls: {mode: UNSET}\n", None, false),
        (
            "port level",
            "port-level",
            "selector:\n  matchLabels: {app: httpbin}\nportLevelMtls:\n  8080: {mode: UNSET}\n",
            None,
            false,
        ),
        (
            "full (CRD table)",
            "full",
            "selector:\n  matchLabels: {app: foo}\nmtls: {mode: PERMISSIVE}\nportLevelMtls:\n  \"8080\": {mode: STRICT}\n  \"9090\": {mode: DISABLE}\n",
            None,
            false,
        ),
        (
            "bad selector key",
            "foo",
            "selector:\n  matchLabels: {\"app*\": foo}\n",
            Some(("wildcard is not supported in selector", "spec.selector.matchLabels")),
            false,
        ),
        (
            "unknown mode number",
            "foo",
            "mtls: {mode: 9}\n",
            Some(("Unsupported value: 9", "spec.mtls.mode")),
            false,
        ),
    ];

    #[test]
    fn istio_cases() {
        for (name, config_name, yaml, expected, warning) in CASES {
            let report = check(config_name, yaml);
            match expected {
                None => assert!(report.errors.is_empty(), "{name}: unexpected errors {:?}", report.errors),
                Some((message, path)) => assert!(
                    report.errors.iter().any(|e| e.message.contains(message) && e.path == *path),
                    "{name}: expected {message:?} at {path}, got {:?}",
                    report.errors
                ),
            }
            assert_eq!(!report.warnings.is_empty(), *warning, "{name}: warnings {:?}", report.warnings);
        }
    }
}
