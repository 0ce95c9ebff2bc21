//! Gateway API kinds: the checks of their CRD schemas (bundle v1.6.0) that a file source must make
//! itself, since no API server checked the object.
//!
//! Istio registers no validation for these kinds (`validation.EmptyValidate`): the API server applies
//! the CRD's OpenAPI schema and CEL rules. meshpilot checks the part that decides meaning — required
//! fields, enumerations, port and weight ranges, one filter member per `type` — and names the field.
//! Everything the CRD allows is accepted, so an object the converter reports in its status (an
//! unknown GatewayClass, a missing backend) still loads, as it would in a cluster.

use api::gateway_api::{
    BackendObjectReference, BackendRef, BackendTLSPolicySpec, BackendTrafficPolicySpec, GRPCRouteSpec,
    GatewayClassSpec, GatewaySpec, HTTPRouteSpec, ParentReference, ReferenceGrantSpec, TCPRouteSpec,
    TLSRouteSpec,
    route::{HTTPHeaderFilter, HTTPRouteFilter},
};

use crate::Report;

fn one_of(report: &mut Report, path: &str, value: &str, allowed: &[&str]) {
    if !allowed.contains(&value) {
        report.error(path, format!("Unsupported value: \"{value}\": supported values: {}", quoted(allowed)));
    }
}

fn opt_one_of(report: &mut Report, path: &str, value: Option<&str>, allowed: &[&str]) {
    if let Some(v) = value {
        one_of(report, path, v, allowed);
    }
}

fn quoted(values: &[&str]) -> String {
    values.iter().map(|v| format!("\"{v}\"")).collect::<Vec<_>>().join(", ")
}

fn required(report: &mut Report, path: &str, value: &str) {
    if value.is_empty() {
        report.error(path, "Required value");
    }
}

fn port(report: &mut Report, path: &str, port: Option<i32>) {
    if let Some(p) = port
        && !(1..=65535).contains(&p)
    {
        report.error(path, format!("Invalid value: {p}: must be between 1 and 65535"));
    }
}

fn weight(report: &mut Report, path: &str, weight: Option<i32>) {
    if let Some(w) = weight
        && !(0..=1_000_000).contains(&w)
    {
        report.error(path, format!("Invalid value: {w}: must be between 0 and 1000000"));
    }
}

fn parent_refs(report: &mut Report, refs: &[ParentReference]) {
    if refs.len() > 32 {
        report.error("spec.parentRefs", format!("Too many: {}: must have at most 32 items", refs.len()));
    }
    for (i, r) in refs.iter().enumerate() {
        let path = format!("spec.parentRefs[{i}]");
        required(report, &format!("{path}.name"), &r.name);
        port(report, &format!("{path}.port"), r.port);
    }
}

fn backend(report: &mut Report, path: &str, r: &BackendObjectReference) {
    required(report, &format!("{path}.name"), &r.name);
    port(report, &format!("{path}.port"), r.port);
    if r.kind_or_default() == "Service" && r.group_or_default().is_empty() && r.port.is_none() {
        report.error(format!("{path}.port"), "Required value: port is required when kind is Service");
    }
}

fn weighted_backends(report: &mut Report, rule: &str, refs: &[BackendRef]) {
    for (i, r) in refs.iter().enumerate() {
        let path = format!("{rule}.backendRefs[{i}]");
        backend(report, &path, &r.object_ref());
        weight(report, &format!("{path}.weight"), r.weight);
    }
}

fn header_filter(report: &mut Report, path: &str, f: &HTTPHeaderFilter) {
    for (field, headers) in [("set", &f.set), ("add", &f.add)] {
        for (i, h) in headers.iter().enumerate() {
            required(report, &format!("{path}.{field}[{i}].name"), &h.name);
        }
    }
}

const HTTP_FILTERS: &[&str] = &[
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestMirror",
    "RequestRedirect",
    "URLRewrite",
    "ExtensionRef",
    "CORS",
    "ExternalAuth",
];

/// One HTTPRoute filter: a known `type`, its member set and no other (the CRD's CEL rules).
fn http_filter(report: &mut Report, path: &str, f: &HTTPRouteFilter) {
    one_of(report, &format!("{path}.type"), &f.r#type, HTTP_FILTERS);
    let members = [
        ("RequestHeaderModifier", "requestHeaderModifier", f.request_header_modifier.is_some()),
        ("ResponseHeaderModifier", "responseHeaderModifier", f.response_header_modifier.is_some()),
        ("RequestMirror", "requestMirror", f.request_mirror.is_some()),
        ("RequestRedirect", "requestRedirect", f.request_redirect.is_some()),
        ("URLRewrite", "urlRewrite", f.url_rewrite.is_some()),
        ("ExtensionRef", "extensionRef", f.extension_ref.is_some()),
        ("CORS", "cors", f.cors.is_some()),
        ("ExternalAuth", "externalAuth", f.external_auth.is_some()),
    ];
    for (ty, field, set) in members {
        if ty == f.r#type && !set {
            report.error(
                format!("{path}.{field}"),
                format!("Required value: {field} must be specified for {ty} filter.type"),
            );
        } else if ty != f.r#type && set {
            report.error(
                format!("{path}.{field}"),
                format!("Forbidden: {field} must be nil if the filter.type is not {ty}"),
            );
        }
    }
    if let Some(h) = &f.request_header_modifier {
        header_filter(report, &format!("{path}.requestHeaderModifier"), h);
    }
    if let Some(h) = &f.response_header_modifier {
        header_filter(report, &format!("{path}.responseHeaderModifier"), h);
    }
    if let Some(m) = &f.request_mirror {
        backend(report, &format!("{path}.requestMirror.backendRef"), &m.backend_ref);
        if m.percent.is_some() && m.fraction.is_some() {
            report.error(
                format!("{path}.requestMirror"),
                "Forbidden: only one of percent or fraction may be specified",
            );
        }
    }
    if let Some(r) = &f.request_redirect {
        let p = format!("{path}.requestRedirect");
        opt_one_of(report, &format!("{p}.scheme"), r.scheme.as_deref(), &["http", "https"]);
        if let Some(code) = r.status_code
            && ![301, 302, 303, 307, 308].contains(&code)
        {
            report.error(
                format!("{p}.statusCode"),
                format!("Unsupported value: {code}: supported values: 301, 302, 303, 307, 308"),
            );
        }
        port(report, &format!("{p}.port"), r.port);
        if let Some(m) = &r.path {
            one_of(report, &format!("{p}.path.type"), &m.r#type, &["ReplaceFullPath", "ReplacePrefixMatch"]);
        }
    }
    if let Some(r) = &f.url_rewrite
        && let Some(m) = &r.path
    {
        one_of(
            report,
            &format!("{path}.urlRewrite.path.type"),
            &m.r#type,
            &["ReplaceFullPath", "ReplacePrefixMatch"],
        );
    }
}

const MATCH_TYPES: &[&str] = &["Exact", "RegularExpression"];

/// GatewayClass: `controllerName` is required.
pub fn validate_gateway_class(spec: &GatewayClassSpec, report: &mut Report) {
    required(report, "spec.controllerName", &spec.controller_name);
}

/// Gateway: class, 1–64 listeners with unique names, ports, TLS mode and allowedRoutes.
pub fn validate_gateway(spec: &GatewaySpec, report: &mut Report) {
    required(report, "spec.gatewayClassName", &spec.gateway_class_name);
    if spec.listeners.is_empty() || spec.listeners.len() > 64 {
        report.error(
            "spec.listeners",
            format!("Invalid value: {} listeners: must have 1 to 64", spec.listeners.len()),
        );
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, l) in spec.listeners.iter().enumerate() {
        let path = format!("spec.listeners[{i}]");
        required(report, &format!("{path}.name"), &l.name);
        if !l.name.is_empty() && !names.insert(l.name.as_str()) {
            report.error(
                format!("{path}.name"),
                format!("Duplicate value: \"{}\": listener names must be unique", l.name),
            );
        }
        required(report, &format!("{path}.protocol"), &l.protocol);
        port(report, &format!("{path}.port"), Some(l.port));
        if let Some(tls) = &l.tls {
            opt_one_of(
                report,
                &format!("{path}.tls.mode"),
                tls.mode.as_deref(),
                &["Terminate", "Passthrough"],
            );
            for (j, c) in tls.certificate_refs.iter().enumerate() {
                required(report, &format!("{path}.tls.certificateRefs[{j}].name"), &c.name);
            }
        }
        if let Some(ns) = l.allowed_routes.as_ref().and_then(|a| a.namespaces.as_ref()) {
            opt_one_of(
                report,
                &format!("{path}.allowedRoutes.namespaces.from"),
                ns.from.as_deref(),
                &["All", "Selector", "Same"],
            );
        }
    }
    for (i, a) in spec.addresses.iter().enumerate() {
        required(report, &format!("spec.addresses[{i}].value"), &a.value);
    }
}

/// HTTPRoute: parents, match types, filters, backends, weights.
pub fn validate_http_route(spec: &HTTPRouteSpec, report: &mut Report) {
    parent_refs(report, &spec.parent_refs);
    for (i, rule) in spec.rules.iter().enumerate() {
        let r = format!("spec.rules[{i}]");
        for (j, m) in rule.matches.iter().enumerate() {
            let p = format!("{r}.matches[{j}]");
            if let Some(path) = &m.path {
                opt_one_of(
                    report,
                    &format!("{p}.path.type"),
                    path.r#type.as_deref(),
                    &["Exact", "PathPrefix", "RegularExpression"],
                );
            }
            for (k, h) in m.headers.iter().enumerate() {
                opt_one_of(report, &format!("{p}.headers[{k}].type"), h.r#type.as_deref(), MATCH_TYPES);
                required(report, &format!("{p}.headers[{k}].name"), &h.name);
            }
            for (k, q) in m.query_params.iter().enumerate() {
                opt_one_of(report, &format!("{p}.queryParams[{k}].type"), q.r#type.as_deref(), MATCH_TYPES);
                required(report, &format!("{p}.queryParams[{k}].name"), &q.name);
            }
        }
        for (j, f) in rule.filters.iter().enumerate() {
            http_filter(report, &format!("{r}.filters[{j}]"), f);
        }
        for (j, b) in rule.backend_refs.iter().enumerate() {
            let p = format!("{r}.backendRefs[{j}]");
            backend(report, &p, &b.object_ref());
            weight(report, &format!("{p}.weight"), b.weight);
            for (k, f) in b.filters.iter().enumerate() {
                http_filter(report, &format!("{p}.filters[{k}]"), f);
            }
        }
    }
}

/// GRPCRoute: parents, match types, filter types, backends.
pub fn validate_grpc_route(spec: &GRPCRouteSpec, report: &mut Report) {
    parent_refs(report, &spec.parent_refs);
    for (i, rule) in spec.rules.iter().enumerate() {
        let r = format!("spec.rules[{i}]");
        for (j, m) in rule.matches.iter().enumerate() {
            if let Some(method) = &m.method {
                opt_one_of(
                    report,
                    &format!("{r}.matches[{j}].method.type"),
                    method.r#type.as_deref(),
                    MATCH_TYPES,
                );
            }
            for (k, h) in m.headers.iter().enumerate() {
                opt_one_of(
                    report,
                    &format!("{r}.matches[{j}].headers[{k}].type"),
                    h.r#type.as_deref(),
                    MATCH_TYPES,
                );
            }
        }
        for (j, f) in rule.filters.iter().enumerate() {
            one_of(
                report,
                &format!("{r}.filters[{j}].type"),
                &f.r#type,
                &["ResponseHeaderModifier", "RequestHeaderModifier", "RequestMirror", "ExtensionRef"],
            );
        }
        for (j, b) in rule.backend_refs.iter().enumerate() {
            let p = format!("{r}.backendRefs[{j}]");
            backend(report, &p, &b.object_ref());
            weight(report, &format!("{p}.weight"), b.weight);
        }
    }
}

/// TCPRoute: parents, at least one rule, backends.
pub fn validate_tcp_route(spec: &TCPRouteSpec, report: &mut Report) {
    parent_refs(report, &spec.parent_refs);
    if spec.rules.is_empty() {
        report.error("spec.rules", "Required value");
    }
    for (i, rule) in spec.rules.iter().enumerate() {
        weighted_backends(report, &format!("spec.rules[{i}]"), &rule.backend_refs);
    }
}

/// TLSRoute: parents, rules, backends.
pub fn validate_tls_route(spec: &TLSRouteSpec, report: &mut Report) {
    parent_refs(report, &spec.parent_refs);
    if spec.rules.is_empty() {
        report.error("spec.rules", "Required value");
    }
    for (i, rule) in spec.rules.iter().enumerate() {
        weighted_backends(report, &format!("spec.rules[{i}]"), &rule.backend_refs);
    }
}

/// ReferenceGrant: `from` and `to` are required, each entry's kind and namespace too.
pub fn validate_reference_grant(spec: &ReferenceGrantSpec, report: &mut Report) {
    if spec.from.is_empty() {
        report.error("spec.from", "Required value");
    }
    if spec.to.is_empty() {
        report.error("spec.to", "Required value");
    }
    for (i, f) in spec.from.iter().enumerate() {
        required(report, &format!("spec.from[{i}].kind"), &f.kind);
        required(report, &format!("spec.from[{i}].namespace"), &f.namespace);
    }
    for (i, t) in spec.to.iter().enumerate() {
        required(report, &format!("spec.to[{i}].kind"), &t.kind);
    }
}

/// BackendTLSPolicy: targets, hostname, and CA certificates or well-known CAs (exactly one).
pub fn validate_backend_tls_policy(spec: &BackendTLSPolicySpec, report: &mut Report) {
    if spec.target_refs.is_empty() {
        report.error("spec.targetRefs", "Required value");
    }
    required(report, "spec.validation.hostname", &spec.validation.hostname);
    let v = &spec.validation;
    if v.ca_certificate_refs.is_empty() == v.well_known_ca_certificates.is_none() {
        report.error(
            "spec.validation",
            "Invalid value: must specify either caCertificateRefs or wellKnownCACertificates, but not both",
        );
    }
    for (i, san) in v.subject_alt_names.iter().enumerate() {
        one_of(
            report,
            &format!("spec.validation.subjectAltNames[{i}].type"),
            &san.r#type,
            &["Hostname", "URI"],
        );
    }
}

/// XBackendTrafficPolicy: targets are required.
pub fn validate_backend_traffic_policy(spec: &BackendTrafficPolicySpec, report: &mut Report) {
    if spec.target_refs.is_empty() {
        report.error("spec.targetRefs", "Required value");
    }
}

#[cfg(test)]
mod tests {
    use api::{Kind, Spec, yaml};

    use super::*;

    fn check(kind: Kind, spec: &str) -> Vec<String> {
        let docs = yaml::parse_documents(spec);
        let node = docs[0].as_ref().unwrap().root.clone().unwrap();
        let (spec, unknown) = Spec::from_node(kind, Some(&node)).unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        let mut report = Report::default();
        match &spec {
            Spec::KubernetesGateway(s) => validate_gateway(s, &mut report),
            Spec::HTTPRoute(s) => validate_http_route(s, &mut report),
            Spec::BackendTLSPolicy(s) => validate_backend_tls_policy(s, &mut report),
            _ => unreachable!(),
        }
        report.errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn gateway_listeners() {
        assert!(
            check(
                Kind::KubernetesGateway,
                "gatewayClassName: istio\nlisteners: [{name: a, port: 80, protocol: HTTP}]"
            )
            .is_empty()
        );
        let errors = check(
            Kind::KubernetesGateway,
            "gatewayClassName: istio\nlisteners:\n- {name: a, port: 80, protocol: HTTP}\n- {name: a, port: 0, protocol: HTTPS, tls: {mode: Bogus}}",
        );
        assert_eq!(
            errors,
            [
                "spec.listeners[1].name: Duplicate value: \"a\": listener names must be unique",
                "spec.listeners[1].port: Invalid value: 0: must be between 1 and 65535",
                "spec.listeners[1].tls.mode: Unsupported value: \"Bogus\": supported values: \"Terminate\", \"Passthrough\"",
            ]
        );
    }

    #[test]
    fn http_route_filters_and_backends() {
        let errors = check(
            Kind::HTTPRoute,
            "parentRefs: [{name: gw}]\nrules:\n- filters:\n  - type: RequestRedirect\n    urlRewrite: {hostname: x}\n  backendRefs:\n  - {name: svc, weight: -1}",
        );
        assert_eq!(
            errors,
            [
                "spec.rules[0].filters[0].requestRedirect: Required value: requestRedirect must be specified for RequestRedirect filter.type",
                "spec.rules[0].filters[0].urlRewrite: Forbidden: urlRewrite must be nil if the filter.type is not URLRewrite",
                "spec.rules[0].backendRefs[0].port: Required value: port is required when kind is Service",
                "spec.rules[0].backendRefs[0].weight: Invalid value: -1: must be between 0 and 1000000",
            ]
        );
    }

    #[test]
    fn backend_tls_policy_needs_one_ca_source() {
        let errors = check(
            Kind::BackendTLSPolicy,
            "targetRefs: [{group: '', kind: Service, name: s}]\nvalidation: {hostname: s.example.com}",
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("spec.validation: "), "{errors:?}");
    }
}
