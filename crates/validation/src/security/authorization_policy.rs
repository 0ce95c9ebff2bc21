//! AuthorizationPolicy validation, following Istio's `ValidateAuthorizationPolicy` (and the
//! `pkg/config/security` helpers it calls: `ValidateIPs`, `ValidatePorts`, `CheckEmptyValues`,
//! `CheckServiceAccount`, `CheckTrustDomainValues`, `CheckValidPathTemplate`, `ValidateAttribute`),
//! plus the rules of the AuthorizationPolicy CRD schema (`maxItems`, `maxLength`, the
//! `serviceAccounts` CEL rule).
//!
//! This file also holds the selector / `targetRef` checks shared by the policy kinds
//! ([`check_policy_selection`], after Istio's `validateOneOfSelectorType`, `validateWorkloadSelector`
//! and `validatePolicyTargetReference(s)` with the CRD limits) and a few small helpers used by the
//! other policy-like kinds (PeerAuthentication, RequestAuthentication, Telemetry, WasmPlugin,
//! TrafficExtension).

use crate::common::check_enum;
use std::collections::BTreeMap;

use api::{
    meta::ObjectMeta,
    security::authorization_policy::{
        AuthorizationPolicy, Condition, Operation, Source,
        authorization_policy::{Action, ExtensionProvider},
    },
    type_v1beta1::{PolicyTargetReference, WorkloadSelector},
    wkt::ProtoEnum,
};

use crate::{
    Report,
    common::{
        check_dry_run_annotation, go_quote, validate_ip_block, validate_one_of_selector_type,
        validate_policy_target_reference, validate_workload_selector_labels,
    },
};

// ===== Helpers shared by the policy-like kinds =====

/// Most entries the CRD schema allows in `targetRefs`.
const MAX_TARGET_REFS: usize = 16;
/// Longest `targetRef(s).name` the CRD schema allows.
const MAX_TARGET_NAME: usize = 253;
/// Longest `selector.matchLabels` value the CRD schema allows.
const MAX_LABEL_VALUE: usize = 63;
/// Most `selector.matchLabels` entries the CRD schema allows.
const MAX_LABELS: usize = 4096;

/// Checks how a policy picks its workloads: at most one of `selector`, `targetRef` and `targetRefs`
/// (Istio's `validateOneOfSelectorType`), the selector's labels (`validateWorkloadSelector`: no empty
/// key, no `*`; a warning when it has no labels), every target reference
/// (`validatePolicyTargetReference`), and the CRD limits (at most 16 `targetRefs`, names of at most
/// 253 characters, label values of at most 63 characters, at most 4096 labels).
pub(crate) fn check_policy_selection(
    selector: Option<&WorkloadSelector>,
    target_ref: Option<&PolicyTargetReference>,
    target_refs: &[PolicyTargetReference],
    report: &mut Report,
) {
    report.check(
        "spec",
        validate_one_of_selector_type(selector.is_some(), target_ref.is_some(), target_refs.len()),
    );
    if let Some(selector) = selector {
        check_selector_labels("spec.selector", &selector.match_labels, report);
    }
    if let Some(target) = target_ref {
        check_target_ref("spec.targetRef", target, report);
    }
    if target_refs.len() > MAX_TARGET_REFS {
        report.error(
            "spec.targetRefs",
            format!("Too many: {}: must have at most {MAX_TARGET_REFS} items", target_refs.len()),
        );
    }
    for (i, target) in target_refs.iter().enumerate() {
        check_target_ref(&format!("spec.targetRefs[{i}]"), target, report);
    }
}

/// A workload selector's labels: Istio's rules and warning, then the CRD's size limits.
fn check_selector_labels(path: &str, labels: &BTreeMap<String, String>, report: &mut Report) {
    let labels_path = format!("{path}.matchLabels");
    report.check(&labels_path, validate_workload_selector_labels(labels));
    if labels.is_empty() {
        report.warn(path, "workload selector specified without labels");
    }
    if labels.len() > MAX_LABELS {
        report
            .error(&labels_path, format!("Too many: {}: must have at most {MAX_LABELS} items", labels.len()));
    }
    for (key, value) in labels {
        if value.len() > MAX_LABEL_VALUE {
            report.error(
                map_entry_path(&labels_path, key),
                format!("Too long: may not be more than {MAX_LABEL_VALUE} bytes"),
            );
        }
    }
}

/// One target reference: Istio's rules, then the CRD's name length limit.
fn check_target_ref(path: &str, target: &PolicyTargetReference, report: &mut Report) {
    report.check(path, validate_policy_target_reference(target));
    if target.name.len() > MAX_TARGET_NAME {
        report
            .error(format!("{path}.name"), format!("Too long: may not be more than {MAX_TARGET_NAME} bytes"));
    }
}

/// The path of a map entry: `base.key`, or `base` when the key cannot be written in a path (it is
/// empty or has `.`, `[` or `]`).
pub(crate) fn map_entry_path(base: &str, key: &str) -> String {
    if key.is_empty() || key.contains(['.', '[', ']']) { base.to_owned() } else { format!("{base}.{key}") }
}

/// Go's `strconv.ParseUint(s, 10, 32)`: decimal digits only (no sign), at most `u32::MAX`; the error
/// is Go's (`strconv.ParseUint: parsing "x": invalid syntax` / `value out of range`).
fn go_parse_u32(text: &str) -> Result<u32, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.ParseUint: parsing {}: invalid syntax", go_quote(text)));
    }
    text.parse::<u32>()
        .map_err(|_| format!("strconv.ParseUint: parsing {}: value out of range", go_quote(text)))
}

// ===== pkg/config/security helpers =====

/// Istio's `ValidatePorts`: every entry a decimal port up to 65535; each bad entry is reported at
/// its index (`bad port (port1): strconv.ParseUint: parsing "port1": invalid syntax`).
fn check_ports(path: &str, ports: &[String], report: &mut Report) {
    for (i, port) in ports.iter().enumerate() {
        if let Err(reason) = validate_port_value(port) {
            report.error(format!("{path}[{i}]"), reason);
        }
    }
}

/// One entry of Istio's `ValidatePorts`.
fn validate_port_value(port: &str) -> Result<(), String> {
    match go_parse_u32(port) {
        Ok(p) if p <= 65535 => Ok(()),
        // Istio prints the (nil) parse error for a number above 65535.
        Ok(_) => Err(format!("bad port ({port}): <nil>")),
        Err(e) => Err(format!("bad port ({port}): {e}")),
    }
}

/// Istio's `ValidateIPs`: each entry an IP address or a CIDR range; every bad entry is reported.
fn check_ips(path: &str, ips: &[String], report: &mut Report) {
    for (i, ip) in ips.iter().enumerate() {
        report.check(format!("{path}[{i}]"), validate_ip_block(ip));
    }
}

/// Istio's `CheckEmptyValues`: the first empty entry (`empty value not allowed, found in Principals`).
fn check_empty_values(path: &str, key: &str, values: &[String], report: &mut Report) {
    if let Some(i) = values.iter().position(String::is_empty) {
        report.error(format!("{path}[{i}]"), format!("empty value not allowed, found in {key}"));
    }
}

/// Istio's `CheckEmptyValues` as a result (the index of the first empty entry and the reason).
fn empty_values(key: &str, values: &[String]) -> Result<(), (usize, String)> {
    match values.iter().position(String::is_empty) {
        Some(i) => Err((i, format!("empty value not allowed, found in {key}"))),
        None => Ok(()),
    }
}

/// Istio's `CheckWildcardValues`: non-empty values with at most one `*`, only at the start or end.
fn wildcard_values(key: &str, values: &[String]) -> Result<(), (usize, String)> {
    empty_values(key, values)?;
    for (i, value) in values.iter().enumerate() {
        let count = value.matches('*').count();
        if count > 1 {
            return Err((i, format!("at most one wildcard is allowed, found in {key}: {}", go_quote(value))));
        }
        if count == 1 && value != "*" && !value.starts_with('*') && !value.ends_with('*') {
            return Err((
                i,
                format!("wildcard is only allowed at the start or end, found in {key}: {}", go_quote(value)),
            ));
        }
    }
    Ok(())
}

/// Istio's `CheckTrustDomainValues`: [wildcard values](wildcard_values) without `/`.
fn trust_domain_values(key: &str, values: &[String]) -> Result<(), (usize, String)> {
    wildcard_values(key, values)?;
    for (i, value) in values.iter().enumerate() {
        if value.contains('/') {
            return Err((
                i,
                format!("trust domain must not contain '/', found in {key}: {}", go_quote(value)),
            ));
        }
    }
    Ok(())
}

/// Istio's `CheckServiceAccount`: at most 16 values, each `name` or `namespace/name` (non-empty
/// parts, no `*`, at most 320 characters). `None` as index: the list itself.
fn service_account_values(key: &str, values: &[String]) -> Result<(), (Option<usize>, String)> {
    if values.len() > 16 {
        return Err((None, "may not have more than 16 values".to_owned()));
    }
    let expected = "expected format 'serviceAccount' or 'namespace/serviceAccount'";
    for (i, value) in values.iter().enumerate() {
        let at = Some(i);
        if value.is_empty() {
            return Err((at, format!("empty value not allowed, found in {key}")));
        }
        if value.contains('*') {
            return Err((at, format!("wildcard not allowed, found in {key}")));
        }
        if value.matches('/').count() > 1 {
            return Err((at, format!("{expected}, found {} in {key}", go_quote(value))));
        }
        if value.len() > 320 {
            return Err((
                at,
                format!("value cannot exceed 320 characters, found {} in {key}", go_quote(value)),
            ));
        }
        if let Some((ns, sa)) = value.split_once('/') {
            if ns.is_empty() {
                return Err((at, format!("{expected}, found empty namespace {} in {key}", go_quote(value))));
            }
            if sa.is_empty() {
                return Err((
                    at,
                    format!("{expected}, found empty serviceAccount {} in {key}", go_quote(value)),
                ));
            }
        }
    }
    Ok(())
}

/// Reports a list check's error at the entry it names (or at the list).
fn report_list(path: &str, result: Result<(), (usize, String)>, report: &mut Report) {
    if let Err((i, reason)) = result {
        report.error(format!("{path}[{i}]"), reason);
    }
}

/// `{*}`: one path segment.
const MATCH_ONE_TEMPLATE: &str = "{*}";
/// `{**}`: any number of path segments (only as the last operator).
const MATCH_ANY_TEMPLATE: &str = "{**}";

/// A path segment Envoy accepts as a literal next to a path template: RFC 3986 `pchar`s
/// (letters, digits, `-._~%!$&'()+,;:@=`), at least one.
fn is_valid_literal(segment: &str) -> bool {
    !segment.is_empty()
        && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%!$&'()+,;:@=".contains(&b))
}

/// Istio's `CheckValidPathTemplate` for one path: `{*}` and `{**}` only as whole segments, `{**}`
/// last, no other `{`/`}`, and literal segments of valid characters when a template is used.
fn validate_path_template(key: &str, path: &str) -> Result<(), String> {
    let has_template = path.contains(MATCH_ONE_TEMPLATE) || path.contains(MATCH_ANY_TEMPLATE);
    let trimmed = path.trim_matches('/');
    let mut found_match_any = false;
    for segment in trimmed.split('/') {
        let is_template = segment == MATCH_ONE_TEMPLATE || segment == MATCH_ANY_TEMPLATE;
        if is_template && found_match_any {
            return Err(format!(
                "invalid or unsupported path {trimmed}, found in {key}. {{**}} is not the last operator"
            ));
        }
        if is_template {
            found_match_any |= segment == MATCH_ANY_TEMPLATE;
            continue;
        }
        if segment.contains(['{', '}']) {
            return Err(format!(
                "invalid or unsupported path {trimmed}, found in {key}. Contains '{{' or '}}' beyond a supported path template"
            ));
        }
        if has_template && !is_valid_literal(segment) {
            return Err(format!(
                "invalid or unsupported path {trimmed}, found in {key}. Contains segment {segment} with invalid string literal"
            ));
        }
    }
    Ok(())
}

/// Istio's `validateMapKey`: `name[key]` with a non-empty name and key.
fn validate_map_key(key: &str) -> Result<(), String> {
    match key.find('[') {
        Some(open) if key.ends_with(']') && open > 0 && open + 2 < key.len() => Ok(()),
        _ => Err(format!("bad key ({key}): should have format a[b]")),
    }
}

/// Istio's `ValidateIPs` as one result (the reasons joined).
fn ips_result(values: &[String]) -> Result<(), String> {
    let reasons: Vec<String> = values.iter().filter_map(|v| validate_ip_block(v).err()).collect();
    if reasons.is_empty() { Ok(()) } else { Err(join_multi(&reasons)) }
}

/// Istio's `ValidatePorts` as one result (the reasons joined).
fn ports_result(values: &[String]) -> Result<(), String> {
    let reasons: Vec<String> = values.iter().filter_map(|v| validate_port_value(v).err()).collect();
    if reasons.is_empty() { Ok(()) } else { Err(join_multi(&reasons)) }
}

/// Joins several reasons (Istio returns them as one multierror).
fn join_multi(reasons: &[String]) -> String {
    reasons.join("; ")
}

/// Istio's `ValidateAttribute`: the condition keys an AuthorizationPolicy supports and the values
/// each accepts.
fn validate_attribute(key: &str, values: &[String]) -> Result<(), String> {
    empty_values(key, values).map_err(|(_, reason)| reason)?;
    let strip = |r: Result<(), (usize, String)>| r.map_err(|(_, reason)| reason);
    if key.starts_with("request.headers")
        || key.starts_with("request.auth.claims")
        || key.starts_with("experimental.envoy.filters.")
    {
        // Order follows Istio's switch; the three map-style attributes share the key check.
        return validate_map_key(key);
    }
    match key {
        "source.ip" | "remote.ip" | "destination.ip" => ips_result(values),
        "source.serviceAccount" => service_account_values(key, values).map_err(|(_, reason)| reason),
        "source.trustDomain" => strip(wildcard_values(key, values)),
        "destination.port" => ports_result(values),
        "source.namespace"
        | "source.principal"
        | "request.auth.principal"
        | "request.auth.audiences"
        | "request.auth.presenter"
        | "connection.sni" => Ok(()),
        "destination.namespace" => Err(format!("attribute {key} is replaced by the metadata.namespace")),
        _ if key.starts_with("destination.labels") => {
            Err(format!("attribute {key} is replaced by the workload selector"))
        }
        "destination.name" | "destination.user" => {
            Err(format!("deprecated attribute {key}: only supported in v1alpha1"))
        }
        _ => Err(format!("unknown attribute: {key}")),
    }
}

// ===== AuthorizationPolicy =====

/// Most `rules` (and `from` entries per rule) the CRD schema allows.
const MAX_RULES: usize = 512;

/// Validates an AuthorizationPolicy; findings use paths from the document root (`spec.…`).
///
/// Follows Istio's `ValidateAuthorizationPolicy`: the selector / target references, the action and
/// its provider (`CUSTOM` needs `provider.name` and supports only some source fields and condition
/// keys; other actions take no provider; `CUSTOM` and `DENY` need `rules`), each rule's `from`,
/// `to` and `when` entries and their values, and the warning for `DENY` rules that only use HTTP
/// attributes. The `istio.io/dry-run` annotation is checked against the action. CRD rules: at most
/// 512 rules and 512 `from` entries per rule, and `serviceAccounts` not combined with `principals`
/// or `namespaces`.
pub fn validate(meta: &ObjectMeta, spec: &AuthorizationPolicy, report: &mut Report) {
    let action_name = Action::name_of(spec.action).map_or_else(|| spec.action.to_string(), str::to_owned);
    report.check("metadata.annotations", check_dry_run_annotation(meta, Some(&action_name)));
    check_enum::<Action>("spec.action", spec.action, report);
    check_policy_selection(spec.selector.as_ref(), spec.target_ref.as_ref(), &spec.target_refs, report);

    let custom = spec.action == Action::Custom as i32;
    if custom {
        check_custom_action(spec, report);
    }
    if spec.provider.is_some() && !custom {
        report.error(
            "spec.provider",
            format!("`provider` must not be with non CUSTOM action, found {action_name}"),
        );
    }
    if spec.action == Action::Deny as i32 && spec.rules.is_empty() {
        report.error(
            "spec.rules",
            "DENY action without `rules` is meaningless as it will never be triggered, add an empty rule `{}` if you want it be triggered for every request",
        );
    }
    if spec.rules.len() > MAX_RULES {
        report.error(
            "spec.rules",
            format!("Too many: {}: must have at most {MAX_RULES} items", spec.rules.len()),
        );
    }

    // An empty `from: []` / `to: []` decodes as an absent list (as protojson does), so Istio's
    // "`from` must not be empty" cannot arise from YAML input.
    for (i, rule) in spec.rules.iter().enumerate() {
        let rule_path = format!("spec.rules[{i}]");
        if rule.from.len() > MAX_RULES {
            report.error(
                format!("{rule_path}.from"),
                format!("Too many: {}: must have at most {MAX_RULES} items", rule.from.len()),
            );
        }
        let mut tcp_rules_in_from = false;
        let mut tcp_rules_in_to = false;
        let mut from_rule_exists = false;
        let mut to_rule_exists = false;
        for (j, from) in rule.from.iter().enumerate() {
            let from_path = format!("{rule_path}.from[{j}]");
            match &from.source {
                None => report.error(from_path, format!("`from.source` must not be nil, found at rule {i}")),
                Some(source) => {
                    from_rule_exists = true;
                    tcp_rules_in_from |= check_source(&format!("{from_path}.source"), i, source, report);
                }
            }
        }
        for (j, to) in rule.to.iter().enumerate() {
            let to_path = format!("{rule_path}.to[{j}]");
            match &to.operation {
                None => report.error(to_path, format!("`to.operation` must not be nil, found at rule {i}")),
                Some(operation) => {
                    to_rule_exists = true;
                    tcp_rules_in_to |= check_operation(&format!("{to_path}.operation"), i, operation, report);
                }
            }
        }
        for (k, condition) in rule.when.iter().enumerate() {
            check_condition(&format!("{rule_path}.when[{k}]"), condition, report);
        }
        let http_only = (from_rule_exists && !to_rule_exists && !tcp_rules_in_from)
            || (to_rule_exists && !tcp_rules_in_to);
        if http_only && spec.action == Action::Deny as i32 {
            report.warn(
                rule_path,
                "configured AuthorizationPolicy will deny all traffic to TCP ports under its scope due to the use of only HTTP attributes in a DENY rule; it is recommended to explicitly specify the port",
            );
        }
    }
}

/// The extra rules of a `CUSTOM` policy: `rules` and `provider.name` set, and no source fields or
/// condition keys that need the peer or request identity.
fn check_custom_action(spec: &AuthorizationPolicy, report: &mut Report) {
    if spec.rules.is_empty() {
        report.error(
            "spec.rules",
            "CUSTOM action without `rules` is meaningless as it will never be triggered, add an empty rule `{}` if you want it be triggered for every request",
        );
    } else if spec.provider.as_ref().is_none_or(|p: &ExtensionProvider| p.name.is_empty()) {
        let path = if spec.provider.is_some() { "spec.provider.name" } else { "spec.provider" };
        report.error(path, "`provider.name` must not be empty");
    }
    for (i, rule) in spec.rules.iter().enumerate() {
        for (j, from) in rule.from.iter().enumerate() {
            let Some(src) = &from.source else { continue };
            let path = format!("spec.rules[{i}].from[{j}].source");
            let unsupported: [(&str, &str, usize); 10] = [
                ("namespaces", "From.Namespaces", src.namespaces.len()),
                ("notNamespaces", "From.NotNamespaces", src.not_namespaces.len()),
                ("serviceAccounts", "From.ServiceAccounts", src.service_accounts.len()),
                ("notServiceAccounts", "From.NotServiceAccounts", src.not_service_accounts.len()),
                ("trustDomains", "From.TrustDomains", src.trust_domains.len()),
                ("notTrustDomains", "From.NotTrustDomains", src.not_trust_domains.len()),
                ("principals", "From.Principals", src.principals.len()),
                ("notPrincipals", "From.NotPrincipals", src.not_principals.len()),
                ("requestPrincipals", "From.RequestPrincipals", src.request_principals.len()),
                ("notRequestPrincipals", "From.NotRequestPrincipals", src.not_request_principals.len()),
            ];
            for (field, name, count) in unsupported {
                if count != 0 {
                    report.error(
                        format!("{path}.{field}"),
                        format!("{name} is currently not supported with CUSTOM action"),
                    );
                }
            }
        }
        for (k, when) in rule.when.iter().enumerate() {
            let key = when.key.as_str();
            let unsupported = matches!(
                key,
                "source.namespace" | "source.serviceAccount" | "source.trustDomain" | "source.principal"
            ) || key.starts_with("request.auth.");
            if unsupported {
                report.error(
                    format!("spec.rules[{i}].when[{k}].key"),
                    format!("{key} is currently not supported with CUSTOM action"),
                );
            }
        }
    }
}

/// Checks one `from.source` at `path` (rule `rule`); returns whether it uses TCP attributes.
fn check_source(path: &str, rule: usize, src: &Source, report: &mut Report) -> bool {
    let peer_identity =
        src.principals.len() + src.not_principals.len() + src.namespaces.len() + src.not_namespaces.len();
    let service_accounts = src.service_accounts.len() + src.not_service_accounts.len();
    if peer_identity > 0 && service_accounts > 0 {
        // Istio's webhook and the CRD's CEL rule ("Cannot set serviceAccounts with namespaces or
        // principals") reject the same combination.
        let field = if src.service_accounts.is_empty() { "notServiceAccounts" } else { "serviceAccounts" };
        report.error(
            format!("{path}.{field}"),
            format!("cannot set serviceAccounts with namespaces or principals, found at rule {rule}"),
        );
    }
    let lists: [&Vec<String>; 14] = [
        &src.principals,
        &src.request_principals,
        &src.namespaces,
        &src.ip_blocks,
        &src.remote_ip_blocks,
        &src.not_principals,
        &src.not_request_principals,
        &src.not_namespaces,
        &src.not_ip_blocks,
        &src.not_remote_ip_blocks,
        &src.service_accounts,
        &src.not_service_accounts,
        &src.trust_domains,
        &src.not_trust_domains,
    ];
    if lists.iter().all(|l| l.is_empty()) {
        report.error(path, format!("`from.source` must not be empty, found at rule {rule}"));
    }
    check_ips(&format!("{path}.ipBlocks"), &src.ip_blocks, report);
    check_ips(&format!("{path}.notIpBlocks"), &src.not_ip_blocks, report);
    check_ips(&format!("{path}.remoteIpBlocks"), &src.remote_ip_blocks, report);
    check_ips(&format!("{path}.notRemoteIpBlocks"), &src.not_remote_ip_blocks, report);
    let empty_checked: [(&str, &str, &Vec<String>); 10] = [
        ("principals", "Principals", &src.principals),
        ("requestPrincipals", "RequestPrincipals", &src.request_principals),
        ("namespaces", "Namespaces", &src.namespaces),
        ("ipBlocks", "IpBlocks", &src.ip_blocks),
        ("remoteIpBlocks", "RemoteIpBlocks", &src.remote_ip_blocks),
        ("notPrincipals", "NotPrincipals", &src.not_principals),
        ("notRequestPrincipals", "NotRequestPrincipals", &src.not_request_principals),
        ("notNamespaces", "NotNamespaces", &src.not_namespaces),
        ("notIpBlocks", "NotIpBlocks", &src.not_ip_blocks),
        ("notRemoteIpBlocks", "NotRemoteIpBlocks", &src.not_remote_ip_blocks),
    ];
    for (field, key, values) in empty_checked {
        check_empty_values(&format!("{path}.{field}"), key, values, report);
    }
    for (field, key, values) in [
        ("serviceAccounts", "ServiceAccounts", &src.service_accounts),
        ("notServiceAccounts", "NotServiceAccounts", &src.not_service_accounts),
    ] {
        let list_path = format!("{path}.{field}");
        match service_account_values(key, values) {
            Ok(()) => {}
            Err((Some(i), reason)) => report.error(format!("{list_path}[{i}]"), reason),
            Err((None, reason)) => report.error(list_path, reason),
        }
    }
    report_list(
        &format!("{path}.trustDomains"),
        trust_domain_values("TrustDomains", &src.trust_domains),
        report,
    );
    report_list(
        &format!("{path}.notTrustDomains"),
        trust_domain_values("NotTrustDomains", &src.not_trust_domains),
        report,
    );
    // Istio counts these fields (not request principals or trust domains) as TCP attributes.
    [
        &src.not_principals,
        &src.principals,
        &src.ip_blocks,
        &src.not_ip_blocks,
        &src.namespaces,
        &src.not_namespaces,
        &src.remote_ip_blocks,
        &src.not_remote_ip_blocks,
        &src.service_accounts,
        &src.not_service_accounts,
    ]
    .iter()
    .any(|l| !l.is_empty())
}

/// Checks one `to.operation` at `path` (rule `rule`); returns whether it uses ports.
fn check_operation(path: &str, rule: usize, op: &Operation, report: &mut Report) -> bool {
    let lists: [(&str, &str, &Vec<String>); 8] = [
        ("ports", "Ports", &op.ports),
        ("methods", "Methods", &op.methods),
        ("paths", "Paths", &op.paths),
        ("hosts", "Hosts", &op.hosts),
        ("notPorts", "NotPorts", &op.not_ports),
        ("notMethods", "NotMethods", &op.not_methods),
        ("notPaths", "NotPaths", &op.not_paths),
        ("notHosts", "NotHosts", &op.not_hosts),
    ];
    if lists.iter().all(|(_, _, l)| l.is_empty()) {
        report.error(path, format!("`to.operation` must not be empty, found at rule {rule}"));
    }
    check_ports(&format!("{path}.ports"), &op.ports, report);
    check_ports(&format!("{path}.notPorts"), &op.not_ports, report);
    for (field, key, values) in lists {
        check_empty_values(&format!("{path}.{field}"), key, values, report);
    }
    for (field, key, values) in [("paths", "Paths", &op.paths), ("notPaths", "NotPaths", &op.not_paths)] {
        for (i, value) in values.iter().enumerate() {
            if let Err(reason) = validate_path_template(key, value) {
                report.error(format!("{path}.{field}[{i}]"), reason);
                break;
            }
        }
    }
    !op.ports.is_empty() || !op.not_ports.is_empty()
}

/// Checks one `when` condition at `path`.
fn check_condition(path: &str, condition: &Condition, report: &mut Report) {
    let key = condition.key.as_str();
    if key.is_empty() {
        report.error(format!("{path}.key"), "`key` must not be empty");
        return;
    }
    if condition.values.is_empty() && condition.not_values.is_empty() {
        report.error(path, format!("at least one of `values` or `notValues` must be set for key {key}"));
        return;
    }
    if let Err(reason) = validate_attribute(key, &condition.values) {
        report.error(format!("{path}.values"), format!("invalid `value` for `key` {key}: {reason}"));
    }
    if let Err(reason) = validate_attribute(key, &condition.not_values) {
        report.error(format!("{path}.notValues"), format!("invalid `notValue` for `key` {key}: {reason}"));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use api::security::AuthorizationPolicy;

    use super::*;
    use crate::testutil::{meta, run, spec};

    /// Runs the validator on a spec snippet with metadata `name.namespace` and the given annotations.
    fn check(yaml: &str, annotations: &[(&str, &str)]) -> Report {
        let mut m = meta("name", "namespace");
        m.annotations =
            annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>();
        let p: AuthorizationPolicy = spec(yaml);
        run(validate, &m, &p)
    }

    /// `(name, yaml, annotations, expected error substring and path or None, warning expected)`.
    type Case = (
        &'static str,
        &'static str,
        &'static [(&'static str, &'static str)],
        Option<(&'static str, &'static str)>,
        bool,
    );

    const NONE: &[(&str, &str)] = &[];

    const CASES: &[Case] = &[
        (
            "good",
            "selector: {matchLabels: {app: httpbin, version: v1}}\nrules:\n- from:\n  - source: {principals: [sa1]}\n  - source: {principals: [sa2]}\n  to:\n  - operation: {methods: [GET]}\n  - operation: {methods: [POST]}\n  when:\n  - key: source.ip\n    values: [1.2.3.4, 5.6.7.0/24]\n  - key: request.headers[:authority]\n    values: [v1, v2]\n",
            NONE,
            None,
            false,
        ),
        (
            "good serviceAccounts",
            "rules:\n- from:\n  - source: {serviceAccounts: [ns1/sa1, ns2/sa2]}\n  - source: {principals: [sa2]}\n",
            NONE,
            None,
            false,
        ),
        (
            "serviceAccounts and namespaces",
            "rules:\n- from:\n  - source: {serviceAccounts: [ns1/sa1, ns2/sa2], namespaces: [ns]}\n",
            NONE,
            Some((
                "cannot set serviceAccounts with namespaces or principals, found at rule 0",
                "spec.rules[0].from[0].source.serviceAccounts",
            )),
            false,
        ),
        (
            "notServiceAccounts and principals",
            "rules:\n- from:\n  - source: {notServiceAccounts: [sa1], principals: [p]}\n",
            NONE,
            Some(("cannot set serviceAccounts", "spec.rules[0].from[0].source.notServiceAccounts")),
            false,
        ),
        (
            "custom-good",
            "action: CUSTOM\nprovider: {name: my-custom-authz}\nrules: [{}]\n",
            NONE,
            None,
            false,
        ),
        (
            "custom-empty-provider",
            "action: CUSTOM\nprovider: {name: \"\"}\nrules: [{}]\n",
            NONE,
            Some(("`provider.name` must not be empty", "spec.provider.name")),
            false,
        ),
        (
            "custom-nil-provider",
            "action: CUSTOM\nrules: [{}]\n",
            NONE,
            Some(("`provider.name` must not be empty", "spec.provider")),
            false,
        ),
        (
            "custom-without-rules",
            "action: CUSTOM\nprovider: {name: ext}\n",
            NONE,
            Some(("CUSTOM action without `rules` is meaningless", "spec.rules")),
            false,
        ),
        (
            "custom-invalid-rule-source",
            "action: CUSTOM\nprovider: {name: my-custom-authz}\nrules:\n- from:\n  - source: {namespaces: [ns], requestPrincipals: [req]}\n",
            NONE,
            Some((
                "From.Namespaces is currently not supported with CUSTOM action",
                "spec.rules[0].from[0].source.namespaces",
            )),
            false,
        ),
        (
            "custom-invalid-rule-request-principals",
            "action: CUSTOM\nprovider: {name: my-custom-authz}\nrules:\n- from:\n  - source: {notRequestPrincipals: [req]}\n",
            NONE,
            Some((
                "From.NotRequestPrincipals is currently not supported with CUSTOM action",
                "spec.rules[0].from[0].source.notRequestPrincipals",
            )),
            false,
        ),
        (
            "custom-invalid-rule-when",
            "action: CUSTOM\nprovider: {name: my-custom-authz}\nrules:\n- when:\n  - key: request.auth.claims[a]\n    values: [claims1]\n",
            NONE,
            Some((
                "request.auth.claims[a] is currently not supported with CUSTOM action",
                "spec.rules[0].when[0].key",
            )),
            false,
        ),
        (
            "custom-invalid-rule-when-principal",
            "action: CUSTOM\nprovider: {name: my-custom-authz}\nrules:\n- when:\n  - key: source.principal\n    values: [p]\n",
            NONE,
            Some((
                "source.principal is currently not supported with CUSTOM action",
                "spec.rules[0].when[0].key",
            )),
            false,
        ),
        (
            "provider-wrong-action",
            "action: ALLOW\nprovider: {name: \"\"}\nrules: [{}]\n",
            NONE,
            Some(("`provider` must not be with non CUSTOM action, found ALLOW", "spec.provider")),
            false,
        ),
        (
            "provider-with-deny",
            "action: DENY\nprovider: {name: ext}\nrules: [{}]\n",
            NONE,
            Some(("found DENY", "spec.provider")),
            false,
        ),
        ("allow-rules-nil", "action: ALLOW\n", NONE, None, false),
        ("dry-run-valid-allow", "action: ALLOW\n", &[("istio.io/dry-run", "true")], None, false),
        ("dry-run-valid-deny", "action: DENY\nrules: [{}]\n", &[("istio.io/dry-run", "false")], None, false),
        (
            "dry-run-invalid-value",
            "action: ALLOW\n",
            &[("istio.io/dry-run", "foo")],
            Some((
                "namespace/name has annotation istio.io/dry-run with invalid value (foo)",
                "metadata.annotations",
            )),
            false,
        ),
        (
            "dry-run-invalid-action-custom",
            "action: CUSTOM\n",
            &[("istio.io/dry-run", "true")],
            Some((
                "currently only supports action ALLOW/DENY, found action CUSTOM in namespace/name",
                "metadata.annotations",
            )),
            false,
        ),
        (
            "dry-run-invalid-action-audit",
            "action: AUDIT\n",
            &[("istio.io/dry-run", "true")],
            Some(("found action AUDIT", "metadata.annotations")),
            false,
        ),
        (
            "deny-rules-nil",
            "action: DENY\n",
            NONE,
            Some(("DENY action without `rules` is meaningless", "spec.rules")),
            false,
        ),
        (
            "deny-rules-empty-list",
            "action: DENY\nrules: []\n",
            NONE,
            Some(("DENY action without", "spec.rules")),
            false,
        ),
        ("selector-empty-value", "selector: {matchLabels: {app: \"\", version: v1}}\n", NONE, None, false),
        (
            "selector-empty-key",
            "selector: {matchLabels: {app: httpbin, \"\": v1}}\n",
            NONE,
            Some(("empty key is not supported in selector", "spec.selector.matchLabels")),
            false,
        ),
        ("selector-empty-labels", "selector: {}\n", NONE, None, true),
        (
            "selector-wildcard-value",
            "selector: {matchLabels: {app: httpbin-*}}\n",
            NONE,
            Some(("wildcard is not supported in selector", "spec.selector.matchLabels")),
            false,
        ),
        (
            "selector-wildcard-key",
            "selector: {matchLabels: {app-*: httpbin}}\n",
            NONE,
            Some(("wildcard is not supported in selector", "spec.selector.matchLabels")),
            false,
        ),
        (
            "selector-value-too-long (CRD)",
            "selector: {matchLabels: {app: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}}\n",
            NONE,
            Some(("Too long: may not be more than 63 bytes", "spec.selector.matchLabels.app")),
            false,
        ),
        (
            "target-ref-good",
            "action: DENY\ntargetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo}\nrules:\n- from:\n  - source: {principals: [temp]}\n  to:\n  - operation: {ports: [\"8080\"], methods: [GET, DELETE]}\n",
            NONE,
            None,
            false,
        ),
        (
            "target-refs-good",
            "action: DENY\ntargetRefs:\n- {group: gateway.networking.k8s.io, kind: Gateway, name: foo}\nrules:\n- from:\n  - source: {principals: [temp]}\n  to:\n  - operation: {ports: [\"8080\"], methods: [GET, DELETE]}\n",
            NONE,
            None,
            false,
        ),
        (
            "target-refs-good-service",
            "action: DENY\ntargetRefs:\n- {group: \"\", kind: Service, name: foo}\nrules:\n- from:\n  - source: {principals: [temp]}\n  to:\n  - operation: {ports: [\"8080\"], methods: [GET, DELETE]}\n",
            NONE,
            None,
            false,
        ),
        (
            "target-ref-non-empty-namespace",
            "targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo, namespace: bar}\n",
            NONE,
            Some(("targetRef namespace must not be set", "spec.targetRef")),
            false,
        ),
        (
            "target-ref-empty-name",
            "targetRef: {group: gateway.networking.k8s.io, kind: Gateway}\n",
            NONE,
            Some(("targetRef name must be set", "spec.targetRef")),
            false,
        ),
        (
            "target-ref-wrong-group",
            "targetRef: {group: wrong-group, kind: Gateway, name: foo}\n",
            NONE,
            Some(("but was wrong-group/Gateway", "spec.targetRef")),
            false,
        ),
        (
            "target-ref-wrong-kind",
            "targetRefs:\n- {group: gateway.networking.k8s.io, kind: wrong-kind, name: foo}\n",
            NONE,
            Some(("but was gateway.networking.k8s.io/wrong-kind", "spec.targetRefs[0]")),
            false,
        ),
        (
            "target-ref-and-selector-cannot-both-be-set",
            "targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo}\nselector: {matchLabels: {app: httpbin}}\n",
            NONE,
            Some(("only one of targetRefs or workloadSelector can be set", "spec")),
            false,
        ),
        (
            "target-refs-and-selector-cannot-both-be-set",
            "targetRefs:\n- {group: gateway.networking.k8s.io, kind: Gateway, name: foo}\nselector: {matchLabels: {app: httpbin}}\n",
            NONE,
            Some(("only one of targetRefs or workloadSelector can be set", "spec")),
            false,
        ),
        (
            "too-many-target-refs (CRD)",
            "targetRefs: [{kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}, {kind: Service, name: a}]\n",
            NONE,
            Some(("Too many: 17: must have at most 16 items", "spec.targetRefs")),
            false,
        ),
        (
            "source-nil",
            "rules:\n- from:\n  - {}\n",
            NONE,
            Some(("`from.source` must not be nil, found at rule 0", "spec.rules[0].from[0]")),
            false,
        ),
        (
            "source-empty",
            "rules:\n- from:\n  - source: {}\n",
            NONE,
            Some(("`from.source` must not be empty, found at rule 0", "spec.rules[0].from[0].source")),
            false,
        ),
        (
            "operation-nil",
            "rules:\n- to:\n  - {}\n",
            NONE,
            Some(("`to.operation` must not be nil, found at rule 0", "spec.rules[0].to[0]")),
            false,
        ),
        (
            "operation-empty",
            "rules:\n- to:\n  - operation: {}\n",
            NONE,
            Some(("`to.operation` must not be empty, found at rule 0", "spec.rules[0].to[0].operation")),
            false,
        ),
        (
            "Principals-empty",
            "rules:\n- from:\n  - source: {principals: [p1, \"\"]}\n",
            NONE,
            Some((
                "empty value not allowed, found in Principals",
                "spec.rules[0].from[0].source.principals[1]",
            )),
            false,
        ),
        (
            "NotPrincipals-empty",
            "rules:\n- from:\n  - source: {notPrincipals: [p1, \"\"]}\n",
            NONE,
            Some(("found in NotPrincipals", "spec.rules[0].from[0].source.notPrincipals[1]")),
            false,
        ),
        (
            "RequestPrincipals-empty",
            "rules:\n- from:\n  - source: {requestPrincipals: [p1, \"\"]}\n",
            NONE,
            Some(("found in RequestPrincipals", "spec.rules[0].from[0].source.requestPrincipals[1]")),
            false,
        ),
        (
            "NotRequestPrincipals-empty",
            "rules:\n- from:\n  - source: {notRequestPrincipals: [p1, \"\"]}\n",
            NONE,
            Some(("found in NotRequestPrincipals", "spec.rules[0].from[0].source.notRequestPrincipals[1]")),
            false,
        ),
        (
            "Namespaces-empty",
            "rules:\n- from:\n  - source: {namespaces: [ns, \"\"]}\n",
            NONE,
            Some(("found in Namespaces", "spec.rules[0].from[0].source.namespaces[1]")),
            false,
        ),
        (
            "NotNamespaces-empty",
            "rules:\n- from:\n  - source: {notNamespaces: [ns, \"\"]}\n",
            NONE,
            Some(("found in NotNamespaces", "spec.rules[0].from[0].source.notNamespaces[1]")),
            false,
        ),
        (
            "ServiceAccounts-empty",
            "rules:\n- from:\n  - source: {serviceAccounts: [ns/sa, \"\"]}\n",
            NONE,
            Some((
                "empty value not allowed, found in ServiceAccounts",
                "spec.rules[0].from[0].source.serviceAccounts[1]",
            )),
            false,
        ),
        (
            "ServiceAccounts-wildcard",
            "rules:\n- from:\n  - source: {serviceAccounts: [\"ns/*\"]}\n",
            NONE,
            Some((
                "wildcard not allowed, found in ServiceAccounts",
                "spec.rules[0].from[0].source.serviceAccounts[0]",
            )),
            false,
        ),
        (
            "ServiceAccounts-two-slashes",
            "rules:\n- from:\n  - source: {serviceAccounts: [a/b/c]}\n",
            NONE,
            Some((
                "expected format 'serviceAccount' or 'namespace/serviceAccount', found \"a/b/c\" in ServiceAccounts",
                "spec.rules[0].from[0].source.serviceAccounts[0]",
            )),
            false,
        ),
        (
            "ServiceAccounts-empty-namespace",
            "rules:\n- from:\n  - source: {notServiceAccounts: [/sa]}\n",
            NONE,
            Some((
                "found empty namespace \"/sa\" in NotServiceAccounts",
                "spec.rules[0].from[0].source.notServiceAccounts[0]",
            )),
            false,
        ),
        (
            "ServiceAccounts-empty-name",
            "rules:\n- from:\n  - source: {serviceAccounts: [ns/]}\n",
            NONE,
            Some(("found empty serviceAccount \"ns/\"", "spec.rules[0].from[0].source.serviceAccounts[0]")),
            false,
        ),
        (
            "ServiceAccounts-too-many",
            "rules:\n- from:\n  - source: {serviceAccounts: [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q]}\n",
            NONE,
            Some(("may not have more than 16 values", "spec.rules[0].from[0].source.serviceAccounts")),
            false,
        ),
        (
            "IpBlocks-empty",
            "rules:\n- from:\n  - source: {ipBlocks: [1.2.3.4, \"\"]}\n",
            NONE,
            Some(("empty value not allowed, found in IpBlocks", "spec.rules[0].from[0].source.ipBlocks[1]")),
            false,
        ),
        (
            "NotIpBlocks-empty",
            "rules:\n- from:\n  - source: {notIpBlocks: [1.2.3.4, \"\"]}\n",
            NONE,
            Some(("found in NotIpBlocks", "spec.rules[0].from[0].source.notIpBlocks[1]")),
            false,
        ),
        (
            "RemoteIpBlocks-empty",
            "rules:\n- from:\n  - source: {remoteIpBlocks: [1.2.3.4, \"\"]}\n",
            NONE,
            Some(("found in RemoteIpBlocks", "spec.rules[0].from[0].source.remoteIpBlocks[1]")),
            false,
        ),
        (
            "NotRemoteIpBlocks-empty",
            "rules:\n- from:\n  - source: {notRemoteIpBlocks: [1.2.3.4, \"\"]}\n",
            NONE,
            Some(("found in NotRemoteIpBlocks", "spec.rules[0].from[0].source.notRemoteIpBlocks[1]")),
            false,
        ),
        (
            "TrustDomains-wildcard-middle",
            "rules:\n- from:\n  - source: {trustDomains: [\"a*b\"]}\n",
            NONE,
            Some((
                "wildcard is only allowed at the start or end, found in TrustDomains: \"a*b\"",
                "spec.rules[0].from[0].source.trustDomains[0]",
            )),
            false,
        ),
        (
            "TrustDomains-two-wildcards",
            "rules:\n- from:\n  - source: {notTrustDomains: [\"*a*\"]}\n",
            NONE,
            Some((
                "at most one wildcard is allowed, found in NotTrustDomains",
                "spec.rules[0].from[0].source.notTrustDomains[0]",
            )),
            false,
        ),
        (
            "TrustDomains-slash",
            "rules:\n- from:\n  - source: {trustDomains: [a/b]}\n",
            NONE,
            Some(("trust domain must not contain '/'", "spec.rules[0].from[0].source.trustDomains[0]")),
            false,
        ),
        (
            "Hosts-empty",
            "rules:\n- to:\n  - operation: {hosts: [h1, \"\"]}\n",
            NONE,
            Some(("empty value not allowed, found in Hosts", "spec.rules[0].to[0].operation.hosts[1]")),
            false,
        ),
        (
            "NotHosts-empty",
            "rules:\n- to:\n  - operation: {notHosts: [h1, \"\"]}\n",
            NONE,
            Some(("found in NotHosts", "spec.rules[0].to[0].operation.notHosts[1]")),
            false,
        ),
        (
            "Ports-empty",
            "rules:\n- to:\n  - operation: {ports: [\"80\", \"\"]}\n",
            NONE,
            Some(("empty value not allowed, found in Ports", "spec.rules[0].to[0].operation.ports[1]")),
            false,
        ),
        (
            "NotPorts-empty",
            "rules:\n- to:\n  - operation: {notPorts: [\"80\", \"\"]}\n",
            NONE,
            Some(("found in NotPorts", "spec.rules[0].to[0].operation.notPorts[1]")),
            false,
        ),
        (
            "Methods-empty",
            "rules:\n- to:\n  - operation: {methods: [GET, \"\"]}\n",
            NONE,
            Some(("found in Methods", "spec.rules[0].to[0].operation.methods[1]")),
            false,
        ),
        (
            "NotMethods-empty",
            "rules:\n- to:\n  - operation: {notMethods: [GET, \"\"]}\n",
            NONE,
            Some(("found in NotMethods", "spec.rules[0].to[0].operation.notMethods[1]")),
            false,
        ),
        (
            "Paths-empty",
            "rules:\n- to:\n  - operation: {paths: [/path, \"\"]}\n",
            NONE,
            Some(("found in Paths", "spec.rules[0].to[0].operation.paths[1]")),
            false,
        ),
        (
            "NotPaths-empty",
            "rules:\n- to:\n  - operation: {notPaths: [/path, \"\"]}\n",
            NONE,
            Some(("found in NotPaths", "spec.rules[0].to[0].operation.notPaths[1]")),
            false,
        ),
        (
            "value-empty",
            "rules:\n- when:\n  - key: request.headers[:authority]\n    values: [v1, \"\"]\n",
            NONE,
            Some((
                "invalid `value` for `key` request.headers[:authority]: empty value not allowed",
                "spec.rules[0].when[0].values",
            )),
            false,
        ),
        (
            "invalid ip and port in ipBlocks",
            "rules:\n- from:\n  - source: {ipBlocks: [1.2.3.4, ip1], notIpBlocks: [5.6.7.8, ip2]}\n  to:\n  - operation: {ports: [\"80\", port1], notPorts: [\"90\", port2]}\n",
            NONE,
            Some(("bad IP address (ip1)", "spec.rules[0].from[0].source.ipBlocks[1]")),
            false,
        ),
        (
            "invalid port in ports",
            "rules:\n- to:\n  - operation: {ports: [\"80\", port1]}\n",
            NONE,
            Some((
                "bad port (port1): strconv.ParseUint: parsing \"port1\": invalid syntax",
                "spec.rules[0].to[0].operation.ports[1]",
            )),
            false,
        ),
        (
            "port above 65535",
            "rules:\n- to:\n  - operation: {notPorts: [\"65536\"]}\n",
            NONE,
            Some(("bad port (65536)", "spec.rules[0].to[0].operation.notPorts[0]")),
            false,
        ),
        (
            "signed port",
            "rules:\n- to:\n  - operation: {ports: [\"+80\"]}\n",
            NONE,
            Some(("bad port (+80)", "spec.rules[0].to[0].operation.ports[0]")),
            false,
        ),
        (
            "invalid ip in remoteIpBlocks",
            "rules:\n- from:\n  - source: {remoteIpBlocks: [1.2.3.4, ip1], notRemoteIpBlocks: [5.6.7.8/33]}\n",
            NONE,
            Some(("bad CIDR range (5.6.7.8/33)", "spec.rules[0].from[0].source.notRemoteIpBlocks[0]")),
            false,
        ),
        (
            "condition-key-missing",
            "rules:\n- when:\n  - values: [v1, v2]\n",
            NONE,
            Some(("`key` must not be empty", "spec.rules[0].when[0].key")),
            false,
        ),
        (
            "condition-key-empty",
            "rules:\n- when:\n  - key: \"\"\n    values: [v1, v2]\n",
            NONE,
            Some(("`key` must not be empty", "spec.rules[0].when[0].key")),
            false,
        ),
        (
            "condition-value-missing",
            "rules:\n- when:\n  - key: source.principal\n",
            NONE,
            Some((
                "at least one of `values` or `notValues` must be set for key source.principal",
                "spec.rules[0].when[0]",
            )),
            false,
        ),
        (
            "condition-value-invalid",
            "rules:\n- when:\n  - key: source.ip\n    values: [a.b.c.d]\n",
            NONE,
            Some(("invalid `value` for `key` source.ip: ", "spec.rules[0].when[0].values")),
            false,
        ),
        (
            "condition-notValue-invalid",
            "rules:\n- when:\n  - key: source.ip\n    notValues: [a.b.c.d]\n",
            NONE,
            Some(("invalid `notValue` for `key` source.ip", "spec.rules[0].when[0].notValues")),
            false,
        ),
        (
            "condition-unknown",
            "rules:\n- when:\n  - key: key1\n    values: [v1]\n",
            NONE,
            Some(("unknown attribute: key1", "spec.rules[0].when[0].values")),
            false,
        ),
        (
            "condition-unknown-not-values-only",
            "rules:\n- when:\n  - key: key1\n    notValues: [v1]\n",
            NONE,
            Some(("unknown attribute: key1", "spec.rules[0].when[0].values")),
            false,
        ),
        (
            "condition-bad-header-key",
            "rules:\n- when:\n  - key: request.headers\n    values: [v1]\n",
            NONE,
            Some(("bad key (request.headers): should have format a[b]", "spec.rules[0].when[0].values")),
            false,
        ),
        (
            "condition-empty-claim",
            "rules:\n- when:\n  - key: request.auth.claims[]\n    values: [v1]\n",
            NONE,
            Some(("bad key (request.auth.claims[])", "spec.rules[0].when[0].values")),
            false,
        ),
        (
            "condition-destination-port",
            "rules:\n- when:\n  - key: destination.port\n    values: [\"99999\"]\n",
            NONE,
            Some(("bad port (99999)", "spec.rules[0].when[0].values")),
            false,
        ),
        (
            "condition-destination-namespace",
            "rules:\n- when:\n  - key: destination.namespace\n    values: [ns]\n",
            NONE,
            Some(("is replaced by the metadata.namespace", "spec.rules[0].when[0].values")),
            false,
        ),
        (
            "condition-destination-labels",
            "rules:\n- when:\n  - key: destination.labels[app]\n    values: [ns]\n",
            NONE,
            Some(("is replaced by the workload selector", "spec.rules[0].when[0].values")),
            false,
        ),
        (
            "condition-destination-user",
            "rules:\n- when:\n  - key: destination.user\n    values: [u]\n",
            NONE,
            Some((
                "deprecated attribute destination.user: only supported in v1alpha1",
                "spec.rules[0].when[0].values",
            )),
            false,
        ),
        (
            "condition-service-account",
            "rules:\n- when:\n  - key: source.serviceAccount\n    values: [\"ns/*\"]\n",
            NONE,
            Some(("wildcard not allowed, found in source.serviceAccount", "spec.rules[0].when[0].values")),
            false,
        ),
        (
            "condition-trust-domain",
            "rules:\n- when:\n  - key: source.trustDomain\n    values: [\"a*b\"]\n",
            NONE,
            Some(("wildcard is only allowed at the start or end", "spec.rules[0].when[0].values")),
            false,
        ),
        (
            "condition-good-keys",
            "rules:\n- when:\n  - {key: remote.ip, values: [10.0.0.0/8]}\n  - {key: destination.ip, notValues: [\"::1\"]}\n  - {key: connection.sni, values: [\"*.example.com\"]}\n  - {key: \"experimental.envoy.filters.a.b[c]\", values: [x]}\n  - {key: \"request.auth.claims[nested1][nested2]\", values: [x]}\n  - {key: source.namespace, values: [\"*\"]}\n",
            NONE,
            None,
            false,
        ),
        (
            "path-template-good",
            "rules:\n- to:\n  - operation: {paths: [\"/path/template/{*}\", \"/{**}/path/template\"], notPaths: [\"/a/{*}/b/{**}\"]}\n",
            NONE,
            None,
            false,
        ),
        (
            "path-template-any-not-last",
            "rules:\n- to:\n  - operation: {paths: [\"/{**}/a/{*}\"]}\n",
            NONE,
            Some((
                "invalid or unsupported path {**}/a/{*}, found in Paths. {**} is not the last operator",
                "spec.rules[0].to[0].operation.paths[0]",
            )),
            false,
        ),
        (
            "path-template-brace",
            "rules:\n- to:\n  - operation: {notPaths: [\"/a/{x}\"]}\n",
            NONE,
            Some((
                "Contains '{' or '}' beyond a supported path template",
                "spec.rules[0].to[0].operation.notPaths[0]",
            )),
            false,
        ),
        (
            "path-template-bad-literal",
            "rules:\n- to:\n  - operation: {paths: [\"/{*}/a*\"]}\n",
            NONE,
            Some((
                "Contains segment a* with invalid string literal",
                "spec.rules[0].to[0].operation.paths[0]",
            )),
            false,
        ),
        (
            "path-template-empty-segment",
            "rules:\n- to:\n  - operation: {paths: [\"/{*}//a\"]}\n",
            NONE,
            Some(("Contains segment  with invalid string literal", "spec.rules[0].to[0].operation.paths[0]")),
            false,
        ),
        (
            "path-wildcard-without-template",
            "rules:\n- to:\n  - operation: {paths: [\"/a*/b\", \"*\"]}\n",
            NONE,
            None,
            false,
        ),
        (
            "L7DenyWithFrom",
            "action: DENY\nselector: {matchLabels: {app: httpbin}}\nrules:\n- from:\n  - source: {requestPrincipals: [example.com/sub-1]}\n",
            NONE,
            None,
            true,
        ),
        (
            "L7DenyWithTo",
            "action: DENY\nselector: {matchLabels: {app: httpbin}}\nrules:\n- to:\n  - operation: {methods: [GET, DELETE]}\n",
            NONE,
            None,
            true,
        ),
        (
            "L7DenyWithFromAndTo",
            "action: DENY\nselector: {matchLabels: {app: httpbin}}\nrules:\n- from:\n  - source: {principals: [temp]}\n  to:\n  - operation: {methods: [GET, DELETE]}\n",
            NONE,
            None,
            true,
        ),
        (
            "L7DenyWithFromAndToWithPort",
            "action: DENY\nselector: {matchLabels: {app: httpbin}}\nrules:\n- from:\n  - source: {principals: [temp]}\n  to:\n  - operation: {ports: [\"8080\"], methods: [GET, DELETE]}\n",
            NONE,
            None,
            false,
        ),
        (
            "L4DenyWithFrom",
            "action: DENY\nrules:\n- from:\n  - source: {ipBlocks: [10.0.0.1]}\n",
            NONE,
            None,
            false,
        ),
        ("unknown action number", "action: 7\n", NONE, Some(("Unsupported value: 7", "spec.action")), false),
    ];

    #[test]
    fn istio_cases() {
        for (name, yaml, annotations, expected, warning) in CASES {
            let report = check(yaml, annotations);
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

    #[test]
    fn crd_table_full_policy_is_valid() {
        let full = "selector:\n  matchLabels: {app: httpbin}\nrules:\n- from:\n  - source:\n      principals: [principal, principal-prefix-*, \"*-suffix-principal\", \"*\"]\n      requestPrincipals: [requestPrincipals, \"*\"]\n      namespaces: [ns, ns-prefix-*, \"*-ns-suffix\", \"*\"]\n      ipBlocks: [1.2.3.4, 5.6.0.0/16]\n      remoteIpBlocks: [1.2.3.4, 5.6.0.0/16]\n      notIpBlocks: [9.0.0.1, 9.2.0.0/16]\n      trustDomains: [cluster.local, cluster-prefix-*, \"*-suffix-cluster\", \"*\"]\n      notTrustDomains: [not-cluster.local, \"*\"]\n  to:\n  - operation:\n      methods: [method, \"*\"]\n      hosts: [exact.com, \"*.suffix.com\", prefix.*, \"*\"]\n      ports: [\"80\", \"90\"]\n      paths: [/exact, /prefix/*, \"*/suffix\", \"*\", \"/path/template/{*}\", \"/{**}/path/template\"]\n  when:\n  - key: request.auth.principal\n    values: [\"https://example.com/*\"]\n  - key: destination.port\n    values: [\"91\"]\n    notValues: [\"9001\"]\n";
        let report = check(full, NONE);
        assert!(report.is_valid(), "{:?}", report.errors);
    }

    #[test]
    fn source_field_combinations_follow_the_crd_rule() {
        // Split across sources: valid; combined in one source: invalid.
        let split = "rules:\n- from:\n  - source: {serviceAccounts: [baz/sa, sa]}\n  - source: {principals: [bar]}\n  - source: {namespaces: [bar]}\n";
        assert!(check(split, NONE).is_valid());
        let combined = "rules:\n- from:\n  - source: {serviceAccounts: [baz/sa], principals: [bar]}\n";
        assert!(!check(combined, NONE).is_valid());
    }

    #[test]
    fn total_on_odd_input() {
        let odd = "action: 99\nprovider: {}\nrules:\n- from: [{source: {ipBlocks: [\"/\", \"1.2.3.4/\", \"::/129\", \"é\"]}}]\n  to: [{operation: {ports: [\"99999999999999999999\", \"-1\"], paths: [\"{**}/{**}\", \"/\", \"\", \"{\"]}}]\n  when: [{key: \"[\", values: [\"\"]}, {key: \"]\", notValues: [x]}, {key: \"a[]\", values: [x]}]\n";
        let report = check(odd, &[("istio.io/dry-run", "maybe")]);
        assert!(!report.is_valid());
    }

    #[test]
    fn path_template_helper() {
        assert!(validate_path_template("Paths", "/a/{*}/b").is_ok());
        assert!(validate_path_template("Paths", "{**}").is_ok());
        assert!(validate_path_template("Paths", "/{**}/{**}").is_err());
        assert!(validate_path_template("Paths", "/{*}/a%20b").is_ok());
        assert!(validate_path_template("Paths", "/a/{*}x").is_err());
    }

    #[test]
    fn go_uint_parsing() {
        assert_eq!(go_parse_u32("080"), Ok(80));
        assert!(go_parse_u32("4294967296").unwrap_err().ends_with("value out of range"));
        assert!(go_parse_u32("").unwrap_err().ends_with("invalid syntax"));
        assert!(go_parse_u32("1_0").is_err());
    }
}
