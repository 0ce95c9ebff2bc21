//! ProxyConfig validation, following Istio's `ValidateProxyConfig` (`validateWorkloadSelector`,
//! `validateConcurrency` in `pkg/config/validation/validation.go`) and the ProxyConfig CRD schema
//! (selector key and value rules, the length of environment variable values).

use api::{meta::ObjectMeta, networking::ProxyConfig};

use super::workload_entry::{max_items, max_length};
use crate::{Report, common::check_workload_selector};

/// Validates a ProxyConfig; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &ProxyConfig, report: &mut Report) {
    let _ = meta;
    if let Some(selector) = &spec.selector {
        let path = "spec.selector.matchLabels";
        check_workload_selector(path, &selector.match_labels, report);
        max_items(path, selector.match_labels.len(), 4096, report);
        for (key, value) in &selector.match_labels {
            max_length(&format!("{path}.{key}"), value, 63, report);
        }
    }
    if spec.concurrency.is_some_and(|c| c < 0) {
        report.error("spec.concurrency", "concurrency must be greater than or equal to 0");
    }
    for (name, value) in &spec.environment_variables {
        max_length(&format!("spec.environmentVariables.{name}"), value, 2048, report);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Case, check_cases, meta, run, spec};

    // TestValidateProxyConfig, and the CRD cases (proxyconfig-valid.yaml / -invalid.yaml).
    #[test]
    fn proxy_configs() {
        let cases: &[Case] = &[
            ("empty", "{}", None, false),
            (
                "invalid concurrency",
                "concurrency: -1",
                Some(("concurrency must be greater than or equal to 0", "spec.concurrency")),
                false,
            ),
            ("zero concurrency", "concurrency: 0", None, false),
            (
                "crd full",
                "concurrency: 1\nselector: {matchLabels: {foo: bar}}\nimage: {imageType: foo}\nenvironmentVariables: {foo: baz}",
                None,
                false,
            ),
            ("crd empty-selector", "selector: {matchLabels: {}}", None, true),
            (
                "crd empty-key-selector",
                "selector: {matchLabels: {'': bar}}",
                Some(("empty key is not supported in selector", "spec.selector.matchLabels")),
                false,
            ),
            (
                "wildcard selector",
                "selector: {matchLabels: {app: '*'}}",
                Some(("wildcard is not supported in selector", "spec.selector.matchLabels")),
                false,
            ),
        ];
        check_cases::<ProxyConfig>(validate, &meta("pc", "default"), cases);
        let long = format!("environmentVariables: {{A: {}}}", "x".repeat(2049));
        let report = run(validate, &meta("pc", "default"), &spec::<ProxyConfig>(&long));
        assert_eq!(report.errors[0].path, "spec.environmentVariables.A");
    }
}
