//! DestinationRule validation, following Istio's `ValidateDestinationRule`
//! (pkg/config/validation/validation.go) and what it calls: `validateTrafficPolicy`,
//! `validateOutlierDetection`, `validateConnectionPool`, `validateLoadBalancer`,
//! `validatePortTrafficPolicies`, `validateTunnelSettings`, `validateProxyProtocol`, `validateSubset`,
//! `validateExportTo`, `validateWorkloadSelector`, and from pkg/config/validation/agent `ValidateTLS`,
//! `ValidateLocalityLbSetting` and `ValidateZoneAwareLbSetting`.
//!
//! The CRD schema adds rules the webhook does not have; those enforced here are the proto oneofs
//! (`simple`/`consistentHash`, the consistent-hash key and algorithm), the 1ms minimum of
//! `warmupDurationSecs`, the ranges of `warmup.minimumPercent`, `retryBudget.percent`,
//! `outlierDetectionHttpErrorCodes` and `zoneAwareLbSetting.minClusterSize`, enum names, and the
//! `workloadSelector.matchLabels` limits.

mod load_balancer;
#[cfg(test)]
mod tests;
mod traffic_policy;

use std::collections::{BTreeMap, BTreeSet};

use api::{meta::ObjectMeta, wkt::Duration};

use crate::{
    Report,
    common::{
        check_workload_selector, go_duration_nanos, go_float, validate_export_to, validate_labels,
        validate_subset_name, validate_wildcard_domain,
    },
};
pub(crate) use traffic_policy::validate_connection_pool;
use traffic_policy::validate_traffic_policy;

/// The namespace of an object that names none (as `istioctl validate` and the API server assume).
const DEFAULT_NAMESPACE: &str = "default";
/// Most entries the CRD allows in `workloadSelector.matchLabels`.
const MAX_SELECTOR_LABELS: usize = 4096;

/// Longest `workloadSelector.matchLabels` value the CRD allows.
const MAX_SELECTOR_LABEL_VALUE: usize = 63;

/// Validates a DestinationRule; findings use paths from the document root (`spec.…`).
///
/// `meta.namespace` matters to `exportTo` (`.` is the own namespace) and to `configmap://`
/// credential names, which must name the rule's own namespace.
pub fn validate(meta: &ObjectMeta, spec: &api::networking::DestinationRule, report: &mut Report) {
    // Like istioctl, an object without a namespace is taken to live in `default`.
    let namespace = if meta.namespace.is_empty() { DEFAULT_NAMESPACE } else { meta.namespace.as_str() };
    report.check("spec.host", validate_wildcard_domain(&spec.host));
    if let Some(policy) = &spec.traffic_policy {
        validate_traffic_policy(namespace, policy, "spec.trafficPolicy", report);
    }

    let mut names = BTreeSet::new();
    for (i, subset) in spec.subsets.iter().enumerate() {
        let path = format!("spec.subsets[{i}]");
        if !names.insert(subset.name.as_str()) {
            report.error(format!("{path}.name"), format!("duplicate subset names: {}", subset.name));
        }
        report.check(format!("{path}.name"), validate_subset_name(&subset.name));
        report.check(format!("{path}.labels"), validate_labels(&subset.labels));
        if let Some(policy) = &subset.traffic_policy {
            // Istio's `validateSubset` combines with `appendErrors`: the policy's warnings are dropped.
            report.errors_of(|r| {
                validate_traffic_policy(namespace, policy, &format!("{path}.trafficPolicy"), r)
            });
        }
    }

    report.check(
        "spec.exportTo",
        validate_export_to(namespace, &spec.export_to, false, spec.workload_selector.is_some()),
    );

    if let Some(selector) = &spec.workload_selector {
        check_workload_selector("spec.workloadSelector", &selector.match_labels, report);
        check_selector_schema(&selector.match_labels, report);
    }
}

/// The CRD limits of `workloadSelector.matchLabels`: at most 4096 entries, values of at most 63
/// characters. (Empty keys and `*` are the webhook's errors too.)
fn check_selector_schema(labels: &BTreeMap<String, String>, report: &mut Report) {
    let path = "spec.workloadSelector.matchLabels";
    if labels.len() > MAX_SELECTOR_LABELS {
        report.error(
            path,
            format!("Too many: {}: must have at most {MAX_SELECTOR_LABELS} items", labels.len()),
        );
    }
    for (key, value) in labels {
        if value.len() > MAX_SELECTOR_LABEL_VALUE {
            report.error(
                format!("{path}.{key}"),
                format!("Too long: may not be more than {MAX_SELECTOR_LABEL_VALUE} bytes"),
            );
        }
    }
}

/// The CRD's `duration(self) >= duration('1ms')` rule on duration fields.
fn check_min_duration(path: String, d: &Duration, report: &mut Report) {
    if go_duration_nanos(d) < 1_000_000 {
        report.error(path, "must be a valid duration greater than 1ms");
    }
}
/// The CRD's `minimum` / `maximum` on a floating-point field, in the API server's words.
fn check_range(path: String, value: f64, min: f64, max: Option<f64>, report: &mut Report) {
    if value < min {
        report.error(
            path,
            format!(
                "Invalid value: {}: should be greater than or equal to {}",
                go_float(value),
                go_float(min)
            ),
        );
    } else if let Some(max) = max.filter(|max| value > *max) {
        report.error(
            path,
            format!("Invalid value: {}: should be less than or equal to {}", go_float(value), go_float(max)),
        );
    }
}
