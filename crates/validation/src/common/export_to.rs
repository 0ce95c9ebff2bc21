//! `exportTo` lists.

use std::collections::BTreeSet;

use super::{hosts::is_dns1123_label, join};

/// Checks an `exportTo` list, following Istio's `validateExportTo`.
///
/// `namespace` is the object's namespace (`.` stands for it). Entries must be `.`, `*` or a [DNS
/// label](is_dns1123_label); `~` (visible to no one) only in a ServiceEntry (`is_service_entry`) and
/// only alone; `*` only alone; no duplicates (`.` and the namespace itself count as the same). A
/// DestinationRule with a workload selector (`is_destination_rule_with_selector`) may export only to
/// its own namespace.
///
/// Errors (joined): `duplicate entries in exportTo: . and current namespace ns5`,
/// `duplicate entries in exportTo for entry ns1`,
/// `exportTo ~ (none) is not allowed for Istio configuration objects`,
/// `only .,*, or a valid DNS 1123 label is allowed as exportTo entry`,
/// `destination rule with workload selector cannot have multiple entries in exportTo`,
/// `destination rule with workload selector cannot have exportTo beyond current namespace`,
/// `cannot have both public (*) and non-public exportTo values for a resource`,
/// `cannot export service entry to no one (~) and someone`.
pub fn validate_export_to(
    namespace: &str,
    export_to: &[String],
    is_service_entry: bool,
    is_destination_rule_with_selector: bool,
) -> Result<(), String> {
    if export_to.is_empty() {
        return Ok(());
    }
    let mut reasons = Vec::new();
    let mut set: BTreeSet<&str> = BTreeSet::new();
    for entry in export_to {
        let key = if entry == "." { namespace } else { entry.as_str() };
        if set.contains(key) {
            if key != entry {
                reasons.push(format!("duplicate entries in exportTo: . and current namespace {namespace}"));
            } else {
                reasons.push(format!("duplicate entries in exportTo for entry {entry}"));
            }
        } else if is_service_entry && entry == "~" {
            set.insert(key);
        } else {
            match key {
                "." | "*" => {
                    set.insert(key);
                }
                "~" => reasons
                    .push("exportTo ~ (none) is not allowed for Istio configuration objects".to_owned()),
                _ if is_dns1123_label(key) => {
                    set.insert(key);
                }
                _ => reasons
                    .push("only .,*, or a valid DNS 1123 label is allowed as exportTo entry".to_owned()),
            }
        }
    }
    if is_destination_rule_with_selector && !set.is_empty() {
        if set.contains(namespace) {
            if set.len() > 1 {
                reasons.push(
                    "destination rule with workload selector cannot have multiple entries in exportTo"
                        .to_owned(),
                );
            }
        } else {
            reasons.push(
                "destination rule with workload selector cannot have exportTo beyond current namespace"
                    .to_owned(),
            );
        }
    }
    if set.contains("*") && export_to.len() > 1 {
        reasons.push("cannot have both public (*) and non-public exportTo values for a resource".to_owned());
    }
    if set.contains("~") && export_to.len() > 1 {
        reasons.push("cannot export service entry to no one (~) and someone".to_owned());
    }
    join(reasons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::tests::{expect, strings};

    // Test_validateExportTo.
    #[test]
    fn export_to() {
        let cases: &[(&[&str], bool, bool, Option<&str>)] = &[
            (&[], false, false, None),
            (&["*"], false, false, None),
            (&[".", "ns1"], false, false, None),
            (&["ns1", "ns2", "ns5"], false, false, None),
            (&["~"], true, false, None),
            (
                &["~", "ns1"],
                false,
                false,
                Some("exportTo ~ (none) is not allowed for Istio configuration objects"),
            ),
            (
                &[".", "*"],
                false,
                false,
                Some("cannot have both public (*) and non-public exportTo values for a resource"),
            ),
            (&["*", "ns1"], false, false, Some("cannot have both public (*)")),
            (&[".", "ns5"], false, false, Some("duplicate entries in exportTo for entry ns5")),
            (&["ns5", "."], false, false, Some("duplicate entries in exportTo: . and current namespace ns5")),
            (&["ns1", "ns2", "ns1"], false, false, Some("duplicate entries in exportTo for entry ns1")),
            (&["~", "~", "ns1"], true, false, Some("duplicate entries in exportTo for entry ~")),
            (
                &["ns1_"],
                false,
                false,
                Some("only .,*, or a valid DNS 1123 label is allowed as exportTo entry"),
            ),
            (&["~", "ns1"], true, false, Some("cannot export service entry to no one (~) and someone")),
            (
                &["*"],
                false,
                true,
                Some("destination rule with workload selector cannot have exportTo beyond current namespace"),
            ),
            (&["."], false, true, None),
            (&["somens"], false, true, Some("cannot have exportTo beyond current namespace")),
            (
                &[".", "somens"],
                false,
                true,
                Some("destination rule with workload selector cannot have multiple entries in exportTo"),
            ),
        ];
        for (export_to, is_se, is_dr, want) in cases {
            expect(
                validate_export_to("ns5", &strings(export_to), *is_se, *is_dr),
                *want,
                &format!("{export_to:?}"),
            );
        }
    }
}
