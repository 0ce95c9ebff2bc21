//! EnvoyFilter validation, following Istio's `ValidateEnvoyFilter` (`pkg/config/validation/envoyfilter/envoyfilter.go`,
//! with `ValidateAlphaWorkloadSelector`, `validateListenerMatchName` and the parts of
//! `xds.BuildXDSObjectFromStruct` that can be checked without Envoy's protobuf types), and the
//! EnvoyFilter CRD schema: its CEL rules (`workloadSelector` / `targetRefs` exclusivity, the waypoint
//! match rules, which Istio's Go validation skips) and its enums and limits.
//!
//! Istio decodes each patch value into the Envoy message its `applyTo` names (Cluster, Listener, …).
//! Without Envoy's protobuf descriptors, meshpilot checks what does not need them: the `name` field
//! is a string, referenced `@type`s are not xDS v2 types (which Istio no longer knows), and filters
//! carry a `typed_config`. Unknown fields and frozen (deprecated) `@type`s, which Istio reports as
//! warnings, are not detected.

use api::{
    meta::ObjectMeta,
    networking::{
        EnvoyFilter,
        envoy_filter::{
            ApplyTo, EnvoyConfigObjectMatch, EnvoyConfigObjectPatch, PatchContext,
            patch::{FilterClass, Operation},
            route_configuration_match::route_match::Action,
        },
    },
    type_v1beta1::PolicyTargetReference,
    wkt::{ProtoEnum, Struct, Value, value::Kind},
};

use super::workload_entry::{max_items, max_length};
use crate::common::check_enum;
use crate::{
    Report,
    common::{go_quote, validate_regex},
};

/// The name of Envoy's HTTP connection manager network filter.
const HTTP_CONNECTION_MANAGER: &str = "envoy.filters.network.http_connection_manager";
/// Longest `proxyVersion` regex Istio compiles; longer ones are ignored with a warning.
const MAX_PROXY_VERSION_LEN: usize = 1024;

/// Deprecated Envoy filter names and their canonical replacements (Istio's
/// `xds.ReverseDeprecatedFilterNames`). Istio maps `envoy.ext_authz` to both the HTTP and the network
/// filter and keeps whichever its map iteration visits last; the HTTP filter is named here.
const DEPRECATED_FILTER_NAMES: [(&str, &str); 27] = [
    ("envoy.buffer", "envoy.filters.http.buffer"),
    ("envoy.cors", "envoy.filters.http.cors"),
    ("envoy.csrf", "envoy.filters.http.csrf"),
    ("envoy.http_dynamo_filter", "envoy.filters.http.dynamo"),
    ("envoy.ext_authz", "envoy.filters.http.ext_authz"),
    ("envoy.fault", "envoy.filters.http.fault"),
    ("envoy.grpc_http1_bridge", "envoy.filters.http.grpc_http1_bridge"),
    ("envoy.grpc_json_transcoder", "envoy.filters.http.grpc_json_transcoder"),
    ("envoy.grpc_web", "envoy.filters.http.grpc_web"),
    ("envoy.gzip", "envoy.filters.http.gzip"),
    ("envoy.health_check", "envoy.filters.http.health_check"),
    ("envoy.ip_tagging", "envoy.filters.http.ip_tagging"),
    ("envoy.lua", "envoy.filters.http.lua"),
    ("envoy.rate_limit", "envoy.filters.http.ratelimit"),
    ("envoy.router", "envoy.filters.http.router"),
    ("envoy.squash", "envoy.filters.http.squash"),
    ("envoy.listener.http_inspector", "envoy.filters.listener.http_inspector"),
    ("envoy.listener.original_dst", "envoy.filters.listener.original_dst"),
    ("envoy.listener.original_src", "envoy.filters.listener.original_src"),
    ("envoy.listener.proxy_protocol", "envoy.filters.listener.proxy_protocol"),
    ("envoy.listener.tls_inspector", "envoy.filters.listener.tls_inspector"),
    ("envoy.client_ssl_auth", "envoy.filters.network.client_ssl_auth"),
    ("envoy.http_connection_manager", HTTP_CONNECTION_MANAGER),
    ("envoy.mongo_proxy", "envoy.filters.network.mongo_proxy"),
    ("envoy.ratelimit", "envoy.filters.network.ratelimit"),
    ("envoy.redis_proxy", "envoy.filters.network.redis_proxy"),
    ("envoy.tcp_proxy", "envoy.filters.network.tcp_proxy"),
];

/// Validates an EnvoyFilter; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &EnvoyFilter, report: &mut Report) {
    let _ = meta;
    if let Some(selector) = &spec.workload_selector
        && !super::workload_entry::check_networking_selector("Envoy filter", &selector.labels, report)
    {
        // Istio's `validateEnvoyFilter` returns the selector error alone (its warnings dropped).
        return;
    }
    report.warn(
        "spec",
        "EnvoyFilter exposes internal implementation details that may change at any time. Prefer other APIs if possible, and exercise extreme caution, especially around upgrades.",
    );

    if spec.workload_selector.is_some() && !spec.target_refs.is_empty() {
        report.error("spec", "only one of targetRefs or workloadSelector can be set");
    }
    max_items("spec.targetRefs", spec.target_refs.len(), 16, report);
    for (i, target) in spec.target_refs.iter().enumerate() {
        check_target_ref(&format!("spec.targetRefs[{i}]"), target, report);
    }

    for (i, patch) in spec.config_patches.iter().enumerate() {
        let path = format!("spec.configPatches[{i}]");
        check_patch_schema(&path, patch, report);
        check_patch(&path, patch, report);
    }
}

/// The CRD rules of a `targetRefs` entry: a kind and a name, a lower-case DNS subdomain as group, and
/// no namespace.
fn check_target_ref(path: &str, target: &PolicyTargetReference, report: &mut Report) {
    let kind_path = format!("{path}.kind");
    if target.kind.is_empty() {
        report.error(&kind_path, "Required value");
    } else if !is_kind_name(&target.kind) {
        report.error(
            &kind_path,
            format!(
                "Invalid value: {}: should match '^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$'",
                go_quote(&target.kind)
            ),
        );
    }
    max_length(&kind_path, &target.kind, 63, report);
    if target.name.is_empty() {
        report.error(format!("{path}.name"), "Required value");
    }
    max_length(&format!("{path}.name"), &target.name, 253, report);
    if !target.group.is_empty() && crate::common::validate_dns1123_subdomain(&target.group).is_err() {
        report.error(
            format!("{path}.group"),
            format!(
                "Invalid value: {}: should match '^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
                go_quote(&target.group)
            ),
        );
    }
    if !target.namespace.is_empty() {
        report.error(format!("{path}.namespace"), "cross namespace referencing is not currently supported");
    }
}

/// `^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`
fn is_kind_name(kind: &str) -> bool {
    let b = kind.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphabetic()
                && last.is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        }
        _ => false,
    }
}

/// The CRD rules of one config patch: enum values, one object type per match, the waypoint match
/// exactly when the context is `WAYPOINT`, and a waypoint port in 1..65535.
fn check_patch_schema(path: &str, patch: &EnvoyConfigObjectPatch, report: &mut Report) {
    check_enum::<ApplyTo>(&format!("{path}.applyTo"), patch.apply_to, report);
    if let Some(p) = &patch.patch {
        check_enum::<Operation>(&format!("{path}.patch.operation"), p.operation, report);
        check_enum::<FilterClass>(&format!("{path}.patch.filterClass"), p.filter_class, report);
    }
    let Some(m) = &patch.r#match else {
        return;
    };
    let match_path = format!("{path}.match");
    check_enum::<PatchContext>(&format!("{match_path}.context"), m.context, report);
    let set: Vec<&str> = [
        (m.listener.is_some(), "listener"),
        (m.route_configuration.is_some(), "routeConfiguration"),
        (m.cluster.is_some(), "cluster"),
        (m.waypoint.is_some(), "waypoint"),
    ]
    .into_iter()
    .filter_map(|(present, name)| present.then_some(name))
    .collect();
    if set.len() > 1 {
        report.error(
            &match_path,
            format!(
                "only one of listener, routeConfiguration, cluster or waypoint may be set (found {})",
                set.join(", ")
            ),
        );
    }
    if (m.context == PatchContext::Waypoint as i32) != m.waypoint.is_some() {
        report.error(&match_path, "only support waypointMatch when context is WAYPOINT");
    }
    if let Some(waypoint) = &m.waypoint
        && waypoint.port_number > 65535
    {
        report.error(format!("{match_path}.waypoint.portNumber"), "port must be between 1-65535");
    }
    if let Some(vhost) = m.route_configuration.as_ref().and_then(|r| r.vhost.as_ref())
        && let Some(route) = &vhost.route
    {
        check_enum::<Action>(
            &format!("{match_path}.routeConfiguration.vhost.route.action"),
            route.action,
            report,
        );
    }
}

/// Istio's Go rules for one config patch (skipped for the `WAYPOINT` context).
fn check_patch(path: &str, cp: &EnvoyConfigObjectPatch, report: &mut Report) {
    if cp.r#match.as_ref().is_some_and(|m| m.context == PatchContext::Waypoint as i32) {
        return;
    }
    if cp.apply_to == ApplyTo::Invalid as i32 {
        report.error(format!("{path}.applyTo"), "Envoy filter: missing applyTo");
        return;
    }
    let Some(patch) = &cp.patch else {
        report.error(format!("{path}.patch"), "Envoy filter: missing patch");
        return;
    };
    if patch.operation == Operation::Invalid as i32 {
        report.error(format!("{path}.patch.operation"), "Envoy filter: missing patch operation");
        return;
    }
    if patch.operation != Operation::Remove as i32 && patch.value.is_none() {
        report.error(
            format!("{path}.patch.value"),
            "Envoy filter: missing patch value for non-remove operation",
        );
        return;
    }

    if let Some(version) =
        cp.r#match.as_ref().and_then(|m| m.proxy.as_ref()).map(|p| p.proxy_version.as_str())
        && !version.is_empty()
    {
        let at = format!("{path}.match.proxy.proxyVersion");
        if version.len() > MAX_PROXY_VERSION_LEN {
            report.warn(
                at,
                format!("Envoy filter: proxyVersion match exceeds {MAX_PROXY_VERSION_LEN} characters and will be ignored"),
            );
        } else if let Err(e) = validate_regex(version) {
            report.error(at, format!("Envoy filter: invalid regex for proxy version, [{e}]"));
            return;
        }
    }

    if let Some(m) = &cp.r#match
        && !check_match_kind(path, cp.apply_to, m, report)
    {
        return;
    }

    if let Some(value) = &patch.value {
        check_patch_value(&format!("{path}.patch.value"), cp.apply_to, value, report);
    }
}

/// Whether a match holds an object type (Istio's `ObjectTypes != nil`).
fn has_object_type(m: &EnvoyConfigObjectMatch) -> bool {
    m.listener.is_some() || m.route_configuration.is_some() || m.cluster.is_some() || m.waypoint.is_some()
}

/// The match must suit the kind of object patched; returns `false` when Istio stops checking the
/// patch.
fn check_match_kind(path: &str, apply_to: i32, m: &EnvoyConfigObjectMatch, report: &mut Report) -> bool {
    if !has_object_type(m) {
        return true;
    }
    let match_path = format!("{path}.match");
    match ApplyTo::from_number(apply_to) {
        Some(ApplyTo::Listener | ApplyTo::FilterChain | ApplyTo::NetworkFilter | ApplyTo::HttpFilter) => {
            let Some(listener) = &m.listener else {
                report.error(
                    match_path,
                    "Envoy filter: applyTo for listener class objects cannot have non listener match",
                );
                return false;
            };
            let Some(filter) = listener.filter_chain.as_ref().and_then(|fc| fc.filter.as_ref()) else {
                return true;
            };
            let filter_path = format!("{match_path}.listener.filterChain.filter");
            if apply_to == ApplyTo::Listener as i32 || apply_to == ApplyTo::FilterChain as i32 {
                let name = ApplyTo::name_of(apply_to).unwrap_or_default();
                report.warn(
                    &filter_path,
                    format!("Envoy filter: filter match has no effect when used with {name}"),
                );
            }
            if filter.name.is_empty() {
                report.error(
                    format!("{filter_path}.name"),
                    "Envoy filter: filter match has no name to match on",
                );
                return false;
            }
            if let Some(sub_filter) = &filter.sub_filter {
                if apply_to != ApplyTo::HttpFilter as i32 {
                    report.error(
                        format!("{filter_path}.subFilter"),
                        "Envoy filter: subfilter match can be used with applyTo HTTP_FILTER only",
                    );
                    return false;
                }
                if filter.name != HTTP_CONNECTION_MANAGER && filter.name != "envoy.http_connection_manager" {
                    report.error(
                        format!("{filter_path}.name"),
                        format!("Envoy filter: subfilter match requires filter match with {HTTP_CONNECTION_MANAGER}"),
                    );
                    return false;
                }
                if sub_filter.name.is_empty() {
                    report.error(
                        format!("{filter_path}.subFilter.name"),
                        "Envoy filter: subfilter match has no name to match on",
                    );
                    return false;
                }
            }
            warn_deprecated_filter_name(&format!("{filter_path}.name"), &filter.name, report);
            if let Some(sub_filter) = &filter.sub_filter {
                warn_deprecated_filter_name(
                    &format!("{filter_path}.subFilter.name"),
                    &sub_filter.name,
                    report,
                );
            }
        }
        Some(ApplyTo::RouteConfiguration | ApplyTo::VirtualHost | ApplyTo::HttpRoute)
            if m.route_configuration.is_none() =>
        {
            report.error(
                match_path,
                "Envoy filter: applyTo for http route class objects cannot have non route configuration match",
            );
        }
        Some(ApplyTo::Cluster) if m.cluster.is_none() => {
            report.error(
                match_path,
                "Envoy filter: applyTo for cluster class objects cannot have non cluster match",
            );
        }
        _ => {}
    }
    true
}

/// Istio's `validateListenerMatchName`: a deprecated filter name is a warning naming its replacement.
fn warn_deprecated_filter_name(path: &str, name: &str, report: &mut Report) {
    if let Some((_, canonical)) = DEPRECATED_FILTER_NAMES.iter().find(|(old, _)| *old == name) {
        report.warn(
            path,
            format!("using deprecated filter name {}; use {} instead", go_quote(name), go_quote(canonical)),
        );
    }
}

/// JSON type names as Go's `encoding/json` reports them in unmarshal errors.
fn json_kind(value: &Value) -> &'static str {
    match &value.kind {
        Some(Kind::NumberValue(_)) => "number",
        Some(Kind::StringValue(_)) => "string",
        Some(Kind::BoolValue(_)) => "bool",
        Some(Kind::StructValue(_)) => "object",
        Some(Kind::ListValue(_)) => "array",
        Some(Kind::NullValue(_)) | None => "null",
    }
}

/// The patch value as the Envoy message `applyTo` names: checks that need no Envoy descriptors.
fn check_patch_value(path: &str, apply_to: i32, value: &Struct, report: &mut Report) {
    let Some(kind) = ApplyTo::from_number(apply_to).filter(|k| *k != ApplyTo::Invalid) else {
        report.error(path, format!("Envoy filter: unknown object type for applyTo {apply_to}"));
        return;
    };
    // Every patched message type but Bootstrap has a string `name`.
    if kind != ApplyTo::Bootstrap
        && let Some(name) = value.fields.get("name")
        && !matches!(name.kind, Some(Kind::StringValue(_) | Kind::NullValue(_)) | None)
    {
        report.error(
            format!("{path}.name"),
            format!("Envoy filter: json: cannot unmarshal {} into Go value of type string", json_kind(name)),
        );
        return;
    }
    let mut v2_types = Vec::new();
    for field in value.fields.values() {
        collect_v2_type_urls(field, &mut v2_types);
    }
    if let Some(url) = v2_types.first() {
        report.error(
            path,
            format!(
                "referenced type unknown (hint: try using the v3 XDS API): Envoy filter: could not resolve Any message type: {url}"
            ),
        );
        return;
    }
    // Filters are looked up by their typed config; a name alone is deprecated in Envoy.
    if matches!(
        kind,
        ApplyTo::NetworkFilter | ApplyTo::HttpFilter | ApplyTo::ListenerFilter | ApplyTo::ExtensionConfig
    ) {
        let typed = ["typed_config", "typedConfig"]
            .iter()
            .chain(if kind == ApplyTo::ExtensionConfig {
                &[][..]
            } else {
                &["config_discovery", "configDiscovery"][..]
            })
            .any(|key| {
                value.fields.get(*key).is_some_and(|v| !matches!(v.kind, Some(Kind::NullValue(_)) | None))
            });
        if !typed {
            let name = match value.fields.get("name").and_then(|v| v.kind.as_ref()) {
                Some(Kind::StringValue(s)) => s.as_str(),
                _ => "",
            };
            report.warn(path, format!("using deprecated types by name without typed_config; {name}"));
        }
    }
}

/// The `@type` URLs of xDS v2 messages (`….v2.…`) anywhere under a value; Istio no longer has them.
fn collect_v2_type_urls(value: &Value, found: &mut Vec<String>) {
    match &value.kind {
        Some(Kind::StructValue(s)) => {
            if let Some(Value { kind: Some(Kind::StringValue(url)) }) = s.fields.get("@type")
                && url.contains(".v2.")
            {
                found.push(url.clone());
            }
            for field in s.fields.values() {
                collect_v2_type_urls(field, found);
            }
        }
        Some(Kind::ListValue(list)) => {
            for item in &list.values {
                collect_v2_type_urls(item, found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{meta, run, spec};

    const ALWAYS: &str = "EnvoyFilter exposes internal implementation details";

    /// (name, spec YAML, expected error substring and path or `None` for valid, expected warning
    /// substring besides the one every EnvoyFilter gets).
    type Case = (&'static str, &'static str, Option<(&'static str, &'static str)>, Option<&'static str>);

    fn check(cases: &[Case]) {
        for (name, yaml, want, warning) in cases {
            let report = run(validate, &meta("foo", "bar"), &spec::<EnvoyFilter>(yaml));
            match want {
                None => assert!(report.is_valid(), "{name}: {report:?}"),
                Some((message, path)) => assert!(
                    report.errors.iter().any(|e| e.message.contains(message) && e.path == *path),
                    "{name}: want {message:?} at {path}, got {report:?}"
                ),
            }
            if report.errors.iter().any(|e| e.path == "spec.workloadSelector.labels") {
                // Istio's `validateEnvoyFilter` returns a selector error alone, warnings dropped.
                assert!(report.warnings.is_empty(), "{name}: {report:?}");
                continue;
            }
            assert!(report.warnings.iter().any(|w| w.message.starts_with(ALWAYS)), "{name}");
            let others: Vec<_> = report.warnings.iter().filter(|w| !w.message.starts_with(ALWAYS)).collect();
            match warning {
                None => assert!(others.is_empty(), "{name}: unexpected warnings {others:?}"),
                Some(w) => assert!(
                    others.iter().any(|o| o.message.contains(w)),
                    "{name}: want warning {w:?}, got {others:?}"
                ),
            }
        }
    }

    // TestValidateEnvoyFilter, and the CRD cases (envoyfilter-valid.yaml / -invalid.yaml).
    #[test]
    fn envoy_filters() {
        check(&[
            ("empty filters", "{}", None, None),
            (
                "labels not defined in workload selector",
                "workloadSelector: {}",
                None,
                Some(
                    "Envoy filter: workload selector specified without labels, will be applied to all services in namespace",
                ),
            ),
            (
                "invalid applyTo",
                "configPatches: [{applyTo: INVALID}]",
                Some(("Envoy filter: missing applyTo", "spec.configPatches[0].applyTo")),
                None,
            ),
            (
                "nil patch",
                "configPatches: [{applyTo: LISTENER}]",
                Some(("Envoy filter: missing patch", "spec.configPatches[0].patch")),
                None,
            ),
            (
                "invalid patch operation",
                "configPatches: [{applyTo: LISTENER, patch: {}}]",
                Some(("Envoy filter: missing patch operation", "spec.configPatches[0].patch.operation")),
                None,
            ),
            (
                "nil patch value",
                "configPatches: [{applyTo: LISTENER, patch: {operation: ADD}}]",
                Some((
                    "Envoy filter: missing patch value for non-remove operation",
                    "spec.configPatches[0].patch.value",
                )),
                None,
            ),
            (
                "match with invalid regex",
                "configPatches: [{applyTo: LISTENER, match: {proxy: {proxyVersion: '%#@~++==`24c234`'}}, patch: {operation: REMOVE}}]",
                Some((
                    "Envoy filter: invalid regex for proxy version, [error parsing regexp: invalid nested repetition operator: `++`]",
                    "spec.configPatches[0].match.proxy.proxyVersion",
                )),
                None,
            ),
            (
                "match with valid regex",
                "configPatches: [{applyTo: LISTENER, match: {proxy: {proxyVersion: 'release-1\\.2-23434'}}, patch: {operation: REMOVE}}]",
                None,
                None,
            ),
            (
                "listener with invalid match",
                "configPatches: [{applyTo: LISTENER, match: {cluster: {}}, patch: {operation: REMOVE}}]",
                Some((
                    "Envoy filter: applyTo for listener class objects cannot have non listener match",
                    "spec.configPatches[0].match",
                )),
                None,
            ),
            (
                "listener with invalid filter match",
                "configPatches: [{applyTo: NETWORK_FILTER, match: {listener: {filterChain: {sni: '124', filter: {}}}}, patch: {operation: REMOVE}}]",
                Some((
                    "Envoy filter: filter match has no name to match on",
                    "spec.configPatches[0].match.listener.filterChain.filter.name",
                )),
                None,
            ),
            (
                "listener with sub filter match and invalid applyTo",
                "configPatches: [{applyTo: NETWORK_FILTER, match: {listener: {filterChain: {filter: {name: random, subFilter: {}}}}}, patch: {operation: REMOVE}}]",
                Some((
                    "Envoy filter: subfilter match can be used with applyTo HTTP_FILTER only",
                    "spec.configPatches[0].match.listener.filterChain.filter.subFilter",
                )),
                None,
            ),
            (
                "listener with sub filter match and invalid filter name",
                "configPatches: [{applyTo: HTTP_FILTER, match: {listener: {filterChain: {filter: {name: random, subFilter: {}}}}}, patch: {operation: REMOVE}}]",
                Some((
                    "Envoy filter: subfilter match requires filter match with envoy.filters.network.http_connection_manager",
                    "spec.configPatches[0].match.listener.filterChain.filter.name",
                )),
                None,
            ),
            (
                "listener with sub filter match and no sub filter name",
                "configPatches: [{applyTo: HTTP_FILTER, match: {listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {}}}}}, patch: {operation: REMOVE}}]",
                Some((
                    "Envoy filter: subfilter match has no name to match on",
                    "spec.configPatches[0].match.listener.filterChain.filter.subFilter.name",
                )),
                None,
            ),
            (
                "filter match on a listener patch",
                "configPatches: [{applyTo: LISTENER, match: {listener: {filterChain: {filter: {name: envoy.filters.network.tcp_proxy}}}}, patch: {operation: REMOVE}}]",
                None,
                Some("Envoy filter: filter match has no effect when used with LISTENER"),
            ),
            (
                "route configuration with invalid match",
                "configPatches: [{applyTo: VIRTUAL_HOST, match: {cluster: {}}, patch: {operation: REMOVE}}]",
                Some((
                    "Envoy filter: applyTo for http route class objects cannot have non route configuration match",
                    "spec.configPatches[0].match",
                )),
                None,
            ),
            (
                "cluster with invalid match",
                "configPatches: [{applyTo: CLUSTER, match: {listener: {}}, patch: {operation: REMOVE}}]",
                Some((
                    "Envoy filter: applyTo for cluster class objects cannot have non cluster match",
                    "spec.configPatches[0].match",
                )),
                None,
            ),
            (
                "invalid patch value",
                "configPatches: [{applyTo: CLUSTER, match: {cluster: {}}, patch: {operation: ADD, value: {name: false}}}]",
                Some((
                    "Envoy filter: json: cannot unmarshal bool into Go value of type string",
                    "spec.configPatches[0].patch.value.name",
                )),
                None,
            ),
            (
                "happy config",
                "configPatches:\n- {applyTo: CLUSTER, match: {cluster: {}}, patch: {operation: ADD, value: {lb_policy: RING_HASH}}}\n- applyTo: NETWORK_FILTER\n  match: {listener: {filterChain: {name: envoy.tcp_proxy}}}\n  patch:\n    operation: INSERT_BEFORE\n    value: {typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz}}\n- applyTo: NETWORK_FILTER\n  match: {listener: {filterChain: {name: envoy.tcp_proxy}}}\n  patch:\n    operation: INSERT_FIRST\n    value: {typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz}}\n",
                None,
                None,
            ),
            (
                "deprecated config",
                "configPatches:\n- applyTo: NETWORK_FILTER\n  match: {listener: {filterChain: {name: envoy.tcp_proxy}}}\n  patch:\n    operation: INSERT_FIRST\n    value: {typed_config: {'@type': type.googleapis.com/envoy.config.filter.network.ext_authz.v2.ExtAuthz}}\n",
                Some((
                    "referenced type unknown (hint: try using the v3 XDS API)",
                    "spec.configPatches[0].patch.value",
                )),
                None,
            ),
            (
                "deprecated type",
                "configPatches: [{applyTo: HTTP_FILTER, match: {listener: {filterChain: {filter: {name: envoy.http_connection_manager}}}}, patch: {operation: INSERT_FIRST, value: {}}}]",
                None,
                Some(
                    "using deprecated filter name \"envoy.http_connection_manager\"; use \"envoy.filters.network.http_connection_manager\" instead",
                ),
            ),
            (
                "filter without typed config",
                "configPatches: [{applyTo: NETWORK_FILTER, patch: {operation: INSERT_FIRST, value: {name: envoy.filters.network.tcp_proxy}}}]",
                None,
                Some("using deprecated types by name without typed_config; envoy.filters.network.tcp_proxy"),
            ),
            (
                "duration marshal",
                "configPatches: [{applyTo: CLUSTER, patch: {operation: ADD, value: {dns_refresh_rate: 500ms}}}]",
                None,
                None,
            ),
            (
                "selector and targetRefs",
                "workloadSelector: {labels: {app: a}}\ntargetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw}]",
                Some(("only one of targetRefs or workloadSelector can be set", "spec")),
                None,
            ),
            (
                "targetRef with namespace",
                "targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw, namespace: other}]",
                Some((
                    "cross namespace referencing is not currently supported",
                    "spec.targetRefs[0].namespace",
                )),
                None,
            ),
            (
                "targetRef without name",
                "targetRefs: [{kind: Gateway}]",
                Some(("Required value", "spec.targetRefs[0].name")),
                None,
            ),
            (
                "targetRef bad kind",
                "targetRefs: [{kind: '1x', name: a}]",
                Some(("should match", "spec.targetRefs[0].kind")),
                None,
            ),
            (
                "targetRef bad group",
                "targetRefs: [{kind: Gateway, group: Foo, name: a}]",
                Some(("should match", "spec.targetRefs[0].group")),
                None,
            ),
            ("targetRef", "targetRefs: [{kind: Service, name: a}]", None, None),
            (
                "two object types in a match",
                "configPatches: [{applyTo: CLUSTER, match: {cluster: {}, listener: {}}, patch: {operation: REMOVE}}]",
                Some((
                    "only one of listener, routeConfiguration, cluster or waypoint may be set",
                    "spec.configPatches[0].match",
                )),
                None,
            ),
            (
                "bad selector",
                "workloadSelector: {labels: {'': a}}",
                Some(("empty key is not supported in selector", "spec.workloadSelector.labels")),
                None,
            ),
            // The CRD cases.
            (
                "crd http-filter",
                "configPatches:\n- applyTo: HTTP_FILTER\n  match:\n    listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}\n  patch:\n    operation: INSERT_FIRST\n    value:\n      name: envoy.filters.http.ext_proc\n      typed_config:\n        '@type': type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor\n        failure_mode_allow: false\n        grpc_service: {envoy_grpc: {cluster_name: fake-cluster}}\n",
                None,
                None,
            ),
            (
                "crd waypoint-http-filter",
                "configPatches: [{applyTo: HTTP_FILTER, match: {context: WAYPOINT, waypoint: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}, patch: {operation: REMOVE}}]",
                None,
                None,
            ),
            (
                "crd waypoint-cluster",
                "configPatches: [{applyTo: CLUSTER, match: {context: WAYPOINT, waypoint: {}}, patch: {operation: REMOVE}}]",
                None,
                None,
            ),
            (
                "crd add-cluster",
                "configPatches: [{applyTo: CLUSTER, patch: {operation: ADD, value: {name: lua_cluster}}}]",
                None,
                None,
            ),
            (
                "crd merge-and-replace-list",
                "configPatches:\n- applyTo: NETWORK_FILTER\n  match: {listener: {filterChain: {transportProtocol: tls}}}\n  patch:\n    operation: MERGE_AND_REPLACE_LIST\n    value:\n      name: envoy.filters.network.http_connection_manager\n      typed_config:\n        '@type': type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n        upgrade_configs: [{upgrade_type: websocket}]\n",
                None,
                None,
            ),
            (
                "crd waypoint-wrong-context",
                "configPatches: [{applyTo: HTTP_FILTER, match: {context: SIDECAR_INBOUND, waypoint: {filter: {name: envoy.filters.network.http_connection_manager}}}}]",
                Some(("only support waypointMatch when context is WAYPOINT", "spec.configPatches[0].match")),
                None,
            ),
            (
                "crd waypoint-wrong-match",
                "configPatches: [{applyTo: HTTP_FILTER, match: {context: WAYPOINT, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}}]",
                Some(("only support waypointMatch when context is WAYPOINT", "spec.configPatches[0].match")),
                None,
            ),
            (
                "crd waypoint-wrong-port",
                "configPatches: [{applyTo: HTTP_FILTER, match: {context: WAYPOINT, waypoint: {portNumber: 65536}}}]",
                Some(("port must be between 1-65535", "spec.configPatches[0].match.waypoint.portNumber")),
                None,
            ),
            (
                "waypoint without context",
                "configPatches: [{applyTo: CLUSTER, match: {waypoint: {}}, patch: {operation: REMOVE}}]",
                Some(("only support waypointMatch when context is WAYPOINT", "spec.configPatches[0].match")),
                None,
            ),
            (
                "unknown applyTo number",
                "configPatches: [{applyTo: 42, patch: {operation: ADD, value: {}}}]",
                Some(("Unsupported value: 42", "spec.configPatches[0].applyTo")),
                None,
            ),
        ]);
    }

    #[test]
    fn long_proxy_version_is_a_warning() {
        let yaml = format!(
            "configPatches: [{{applyTo: LISTENER, match: {{proxy: {{proxyVersion: '{}'}}}}, patch: {{operation: REMOVE}}}}]",
            "a{100}".repeat(200)
        );
        let report = run(validate, &meta("foo", "bar"), &spec::<EnvoyFilter>(&yaml));
        assert!(report.is_valid(), "{report:?}");
        assert!(
            report.warnings.iter().any(|w| w.message.contains("proxyVersion match exceeds 1024 characters"))
        );
    }
}
