//! Helpers for the tests of `common`, and property tests over all of its checks.

use std::collections::BTreeMap;

use api::{meta::ObjectMeta, wkt::Duration};
use proptest::prelude::*;

use super::*;

pub(super) fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

pub(super) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// `want`: `None` for valid, `Some(text)` for an error containing `text`.
pub(super) fn expect(got: Result<(), String>, want: Option<&str>, input: &str) {
    match (got, want) {
        (Ok(()), None) => {}
        (Err(e), Some(w)) => assert!(e.contains(w), "{input:?}: {e:?} does not contain {w:?}"),
        (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
    }
}

pub(super) fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta { name: name.to_owned(), namespace: namespace.to_owned(), ..ObjectMeta::default() }
}

/// Characters that exercise the parsers: regex and host syntax, escapes, and non-ASCII.
const TRICKY: &str = "[a-zA-Z0-9.*/~%()\\[\\]{}\\\\|?+^$:,<>=!@_ \"'\t\n-]|é|\u{200b}|\u{10FFFF}|K|ſ";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn string_checks_never_panic(s in proptest::string::string_regex(&format!("({TRICKY}){{0,40}}")).unwrap()) {
        let _ = validate_fqdn(&s);
        let _ = validate_wildcard_domain(&s);
        let _ = validate_partial_wildcard(&s);
        let _ = validate_dns1123_labels(&s);
        let _ = is_dns1123_label(&s);
        let _ = is_wildcard_dns1123_label(&s);
        let _ = validate_dns1123_subdomain(&s);
        let _ = validate_dns1123_label(&s);
        let _ = validate_wildcard_domain_for_virtual_service_bound_to_gateway(true, &s);
        let _ = validate_trust_domain(&s);
        for (gateway, semantics) in [(false, false), (true, false), (true, true)] {
            let _ = validate_namespace_slash_wildcard_hostname(&s, gateway, semantics);
        }
        let _ = validate_port_name(&s);
        let _ = validate_protocol(&s);
        let _ = validate_ip_address(&s);
        let _ = validate_ip_subnet(&s);
        let _ = validate_ip_block(&s);
        let _ = validate_unix_address(&s);
        let _ = validate_export_to(&s, &[s.clone(), ".".to_owned(), s.clone()], true, true);
        let labels = map(&[(&s, &s)]);
        let _ = validate_labels(&labels);
        let _ = validate_k8s_labels(&labels);
        let _ = validate_k8s_annotations(&labels);
        let _ = validate_workload_selector_labels(&labels);
        let _ = validate_subset_name(&s);
        let _ = validate_cors_http_method(&s);
        let _ = validate_header_name(&s);
        let _ = validate_strict_http_header_name(&s);
        let _ = validate_probe_header_name(&s);
        let _ = validate_cors_http_header_name(&s);
        let _ = validate_http_header_with_authority_operation_name(&s);
        let _ = validate_http_header_operation_name(&s);
        let _ = validate_header_value(&s);
        let _ = validate_string_regexp(&s, &s);
        let _ = validate_cors_allow_origin(Some(StringMatch::Regex(&s)));
        let _ = go_quote(&s);
        let mut report = Report::default();
        validate_gateway_names(std::slice::from_ref(&s), false, "g", &mut report);
        let mut m = meta(&s, &s);
        m.generate_name = s.clone();
        m.annotations.insert(s.clone(), s.clone());
        m.annotations.insert(DRY_RUN_ANNOTATION.to_owned(), s.clone());
        validate_metadata(&m, &mut report);
        let _ = check_dry_run_annotation(&m, Some(&s));
    }

    #[test]
    fn any_string_never_panics(s in ".*") {
        let _ = validate_regex(&s);
        let _ = validate_fqdn(&s);
        let _ = validate_namespace_slash_wildcard_hostname(&s, true, true);
        let _ = validate_ip_subnet(&s);
        let _ = validate_header_value(&s);
        let _ = validate_labels(&map(&[(&s, &s)]));
    }

    #[test]
    fn numbers_never_panic(n in any::<i64>(), f in any::<f64>(), seconds in any::<i64>(), nanos in any::<i32>()) {
        let _ = validate_port(n);
        let _ = validate_percent(n);
        let _ = validate_weight(n);
        let _ = validate_http_status(n);
        let _ = validate_percentage(f);
        let _ = go_float(f);
        let _ = go_duration(n);
        let d = Duration { seconds, nanos };
        let _ = validate_duration(&d);
        let _ = validate_connect_timeout(&d);
        let _ = validate_duration_range(&d, d, d);
    }
}
