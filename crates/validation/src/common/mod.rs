//! Checks shared by several kinds: host names, ports, percentages, durations, IP addresses, `exportTo`,
//! labels and selectors, regular expressions, HTTP headers, and object metadata.
//!
//! Each check follows one function of Istio's `pkg/config/validation` (or the package it calls), named
//! in its documentation, and returns the reason in Istio's words: `Err("port number 0 must be in the
//! range 1..65535")`. Checks that Istio runs as one function but that can find several problems join
//! the distinct reasons with `"; "`.
//!
//! Istio is written in Go and its messages print values with Go's formatting; [`go_quote`] (`%q`),
//! [`go_float`] (`%v` of a float) and [`go_duration`] (`time.Duration`) reproduce it.
//!
//! Every function is total: any input (empty, huge, non-ASCII) gives a result, never a panic.
//!
//! The checks live in one file per topic and are used from here (`common::validate_fqdn`): `go` (Go's
//! formatting), `hosts` (DNS names, hosts, Kubernetes names), `numbers` (ports, protocols, percentages,
//! durations), `goip` (IP addresses and CIDRs as Go's `netip` reads them), `export_to`, `labels`
//! (labels, selectors, target references), `routes` (subset and gateway names, string matches), `re2`
//! (regular expressions as Go's RE2 reads them), `headers`, `metadata` and `status` (HTTP and gRPC
//! status codes by name).

mod export_to;
mod go;
mod goip;
mod headers;
mod hosts;
mod labels;
mod metadata;
mod numbers;
mod re2;
mod routes;
mod status;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

pub use export_to::validate_export_to;
pub use go::{go_duration, go_duration_nanos, go_float, go_quote, parse_go_bool, parse_go_duration};
pub use goip::{
    is_ipv4_address, is_ipv6_address, is_valid_ip_address, parse_go_prefix, validate_ip_address,
    validate_ip_block, validate_ip_subnet, validate_unix_address,
};
pub use headers::{
    is_authority_header, is_internal_header, is_jwt_claim_route, validate_cors_http_header_name,
    validate_header_name, validate_header_value, validate_http_header_operation_name,
    validate_http_header_with_authority_operation_name, validate_probe_header_name,
    validate_strict_http_header_name,
};
pub use hosts::{
    check_dns1123_preconditions, is_dns1123_label, is_lowercase_dns1123_label, is_wildcard_dns1123_label,
    validate_dns1123_label, validate_dns1123_labels, validate_dns1123_subdomain, validate_fqdn,
    validate_namespace_slash_wildcard_hostname, validate_partial_wildcard, validate_trust_domain,
    validate_wildcard_domain, validate_wildcard_domain_for_virtual_service_bound_to_gateway,
};
pub use labels::{
    check_workload_selector, validate_k8s_annotations, validate_k8s_labels, validate_labels,
    validate_one_of_selector_type, validate_policy_target_reference, validate_workload_selector_labels,
};
pub use metadata::{
    ALWAYS_REJECT_ANNOTATION, DRY_RUN_ANNOTATION, INTERNAL_PARENT_NAMES_ANNOTATION,
    INTERNAL_PARENT_NAMESPACE_ANNOTATION, check_dry_run_annotation, validate_metadata,
};
pub use numbers::{
    validate_connect_timeout, validate_duration, validate_duration_range, validate_http_status,
    validate_percent, validate_percentage, validate_port, validate_port_name, validate_protocol,
    validate_weight,
};
pub use re2::{MAX_REGEX_LENGTH, validate_regex, validate_string_regexp};
pub use routes::{
    StringMatch, validate_cors_allow_origin, validate_cors_http_method, validate_gateway_names,
    validate_string_match, validate_string_match_regexp, validate_subset_name,
};
pub use status::{grpc_status_code, is_known_http_status};

use crate::Report;

/// Joins several reasons into one result: `Ok` when there are none, otherwise the distinct reasons in
/// order, separated by `"; "`.
fn join(reasons: Vec<String>) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    let distinct: Vec<String> = reasons.into_iter().filter(|r| seen.insert(r.clone())).collect();
    if distinct.is_empty() { Ok(()) } else { Err(distinct.join("; ")) }
}

/// Reports an enum number that has no name: the CRDs accept only the value names, so the API server
/// rejects it with this (Kubernetes') message.
pub fn check_enum<E: api::wkt::ProtoEnum>(path: impl Into<String>, value: i32, report: &mut Report) {
    if E::name_of(value).is_none() {
        let names: Vec<String> = E::VALUES.iter().map(|(_, _, name)| go_quote(name)).collect();
        report.error(path, format!("Unsupported value: {value}: supported values: {}", names.join(", ")));
    }
}

/// Reports a proto oneof with more than one member set, at `path`: `only one of a, b or c may be set`.
/// `members` lists each member's JSON name and whether it is set. (The types keep oneof members as
/// sibling fields, so this is where "exactly one" is enforced.)
pub fn check_oneof(path: &str, members: &[(&str, bool)], report: &mut Report) {
    if members.iter().filter(|(_, set)| *set).count() > 1 {
        let names: Vec<&str> = members.iter().map(|(name, _)| *name).collect();
        let list = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        };
        report.error(path, format!("only one of {list} may be set"));
    }
}
