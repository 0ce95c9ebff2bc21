//! VirtualService validation, following Istio's `ValidateVirtualService`
//! (pkg/config/validation/validation.go) and what it calls: `validateHTTPRoute` and its helpers in
//! virtualservice.go (route conflicts, match requests, authority rewrites), `validateTLSRoute`,
//! `validateTCPRoute`, `validateSniHost`, `validateHTTPRouteDestinations`, `validateRouteDestinations`,
//! `validateDestination`, `validateCORSPolicy`, `validateHTTPFaultInjection`, `validateHTTPRedirect`,
//! `validateHTTPDirectResponse`, `validateHTTPMirrors`, `validateHTTPRewrite`, `agent.ValidateHTTPRetry`,
//! `validateGatewayNames`, `validateExportTo`, and the unreachable-rule analysis
//! (`analyzeUnreachableHTTPRules`, `…TCPRules`, `…TLSRules`) whose findings are warnings.
//!
//! The CRD schema adds the proto oneofs (string matches, redirect `port`/`derivePort`, direct response
//! body, abort error type, delay type) and enum names; those are enforced here too.

use crate::common::{check_enum, check_oneof};
use std::collections::BTreeMap;

use api::{
    meta::ObjectMeta,
    networking::virtual_service::{
        CorsPolicy, Destination, Headers, HttpDirectResponse, HttpFaultInjection, HttpMatchRequest,
        HttpMirrorPolicy, HttpRedirect, HttpRetry, HttpRewrite, HttpRoute, HttpRouteDestination,
        L4MatchAttributes, RouteDestination, StringMatch, TcpRoute, TlsMatchAttributes, TlsRoute,
        VirtualService, cors_policy::UnmatchedPreflights, headers::HeaderOperations,
        http_redirect::RedirectPortSelection,
    },
};

use crate::{
    Report,
    common::{
        self, go_quote, is_authority_header, is_dns1123_label, is_jwt_claim_route, is_valid_ip_address,
        validate_cors_allow_origin, validate_cors_http_header_name, validate_cors_http_method,
        validate_duration, validate_export_to, validate_gateway_names, validate_header_name,
        validate_header_value, validate_http_header_operation_name,
        validate_http_header_with_authority_operation_name, validate_http_status, validate_ip_subnet,
        validate_labels, validate_percentage, validate_port, validate_string_match,
        validate_string_match_regexp, validate_string_regexp, validate_subset_name, validate_weight,
        validate_wildcard_domain, validate_wildcard_domain_for_virtual_service_bound_to_gateway,
    },
};

/// Annotation Istio sets on VirtualServices it generates from Gateway API routes.
const ROUTE_SEMANTICS_ANNOTATION: &str = "internal.istio.io/route-semantics";

/// The namespace of an object that names none (as `istioctl validate` and the API server assume).
const DEFAULT_NAMESPACE: &str = "default";

/// The reserved gateway name meaning "all sidecars".
const MESH_GATEWAY: &str = "mesh";

/// Direct response bodies above this size draw a warning.
const DIRECT_RESPONSE_WARN_SIZE: usize = 100 * 1024;

/// Direct response bodies above this size are rejected.
const DIRECT_RESPONSE_MAX_SIZE: usize = 1024 * 1024;

/// `retryOn` policies Envoy knows (`x-envoy-retry-on` and `x-envoy-retry-grpc-on`); HTTP status codes
/// are accepted as well.
const RETRY_ON_POLICIES: [&str; 16] = [
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "envoy-ratelimited",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

/// HTTP status codes Go's `net/http.StatusText` names.
const HTTP_STATUS_CODES: [i64; 62] = [
    100, 101, 102, 103, 200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 307,
    308, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418, 421,
    422, 423, 424, 425, 426, 428, 429, 431, 451, 500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511,
];

/// gRPC status names a fault abort may return.
const GRPC_STATUSES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// Validates a VirtualService; findings use paths from the document root (`spec.…`).
///
/// A VirtualService without hosts is a delegate: it may have neither gateways nor TLS/TCP routes, and
/// its HTTP routes may not delegate further. VirtualServices generated from Gateway API routes
/// (annotation `internal.istio.io/route-semantics: gateway`) skip the destination checks.
pub fn validate(meta: &ObjectMeta, spec: &VirtualService, report: &mut Report) {
    let delegate = spec.hosts.is_empty();
    if delegate {
        if !spec.gateways.is_empty() {
            report.error("spec.gateways", "delegate virtual service must have no gateways specified");
        }
        if !spec.tls.is_empty() {
            report.error("spec.tls", "delegate virtual service must have no tls route specified");
        }
        if !spec.tcp.is_empty() {
            report.error("spec.tcp", "delegate virtual service must have no tcp route specified");
        }
    }
    let gateway_semantics = meta.annotations.get(ROUTE_SEMANTICS_ANNOTATION).is_some_and(|v| v == "gateway");

    let (applies_to_mesh, applies_to_gateway) = if spec.gateways.is_empty() {
        (true, false)
    } else {
        validate_gateway_names(&spec.gateways, gateway_semantics, "spec.gateways", report);
        let to_gateway = is_gateway(spec);
        (!to_gateway, to_gateway)
    };

    if !applies_to_gateway {
        check_jwt_claim_routes(spec, report);
    }

    validate_hosts(spec, applies_to_mesh, applies_to_gateway, report);

    if spec.http.is_empty() && spec.tcp.is_empty() && spec.tls.is_empty() {
        report.error("spec", "http, tcp or tls must be provided in virtual service");
    }
    for (i, route) in spec.http.iter().enumerate() {
        validate_http_route(route, delegate, gateway_semantics, &format!("spec.http[{i}]"), report);
    }
    for (i, route) in spec.tls.iter().enumerate() {
        validate_tls_route(route, spec, gateway_semantics, &format!("spec.tls[{i}]"), report);
    }
    for (i, route) in spec.tcp.iter().enumerate() {
        validate_tcp_route(route, gateway_semantics, &format!("spec.tcp[{i}]"), report);
    }

    // Like istioctl, an object without a namespace is taken to live in `default`.
    let namespace = if meta.namespace.is_empty() { DEFAULT_NAMESPACE } else { meta.namespace.as_str() };
    report.check("spec.exportTo", validate_export_to(namespace, &spec.export_to, false, false));

    analyze_unreachable_http_rules(&spec.http, report);
    analyze_unreachable_l4_rules(
        "spec.tcp",
        &spec.tcp.iter().map(|r| r.r#match.as_slice()).collect::<Vec<_>>(),
        report,
    );
    analyze_unreachable_l4_rules(
        "spec.tls",
        &spec.tls.iter().map(|r| r.r#match.as_slice()).collect::<Vec<_>>(),
        report,
    );
}

/// Istio's `isGateway`: the rules apply to gateways only when `mesh` is not among the gateways
/// (note: also when there are no gateways at all, which matters to SNI host checks).
fn is_gateway(spec: &VirtualService) -> bool {
    !spec.gateways.iter().any(|g| g == MESH_GATEWAY)
}

/// `true` when some TLS route matches on SNI hosts (Istio's `isSniHost`).
fn has_sni_hosts(spec: &VirtualService) -> bool {
    spec.tls.iter().flat_map(|r| &r.r#match).any(|m| !m.sni_hosts.is_empty())
}

/// JWT claim routing (`@request.auth.claims.…` header matches) works only on gateways.
fn check_jwt_claim_routes(spec: &VirtualService, report: &mut Report) {
    let gateways = format!("[{}]", spec.gateways.join(" "));
    for (i, route) in spec.http.iter().enumerate() {
        for (j, m) in route.r#match.iter().enumerate() {
            for (field, headers) in [("headers", &m.headers), ("withoutHeaders", &m.without_headers)] {
                for key in headers.keys().filter(|k| is_jwt_claim_route(k)) {
                    report.error(
                        format!("spec.http[{i}].match[{j}].{field}.{key}"),
                        format!(
                            "JWT claim based routing (key: {key}) is only supported for gateway, found no gateways: {gateways}"
                        ),
                    );
                }
            }
        }
    }
}

/// The host checks of `ValidateVirtualService`: valid (wildcard) domain names or IP addresses, `*`
/// only for gateways, and no host that overlaps another.
fn validate_hosts(
    spec: &VirtualService,
    applies_to_mesh: bool,
    applies_to_gateway: bool,
    report: &mut Report,
) {
    let sni = has_sni_hosts(spec);
    let mut all_valid = true;
    for (i, host) in spec.hosts.iter().enumerate() {
        let result = if applies_to_gateway {
            validate_wildcard_domain_for_virtual_service_bound_to_gateway(sni, host)
        } else {
            validate_wildcard_domain(host)
        };
        match result {
            Err(e) => {
                if !is_valid_ip_address(host) {
                    report.error(format!("spec.hosts[{i}]"), e);
                    all_valid = false;
                }
            }
            Ok(()) if applies_to_mesh && host == "*" => {
                report.error(
                    format!("spec.hosts[{i}]"),
                    "wildcard host * is not allowed for virtual services bound to the mesh gateway",
                );
                all_valid = false;
            }
            Ok(()) => {}
        }
    }
    if all_valid {
        for (i, a) in spec.hosts.iter().enumerate() {
            for (j, b) in spec.hosts.iter().enumerate().skip(i + 1) {
                if host_matches(a, b) {
                    report.error(
                        format!("spec.hosts[{j}]"),
                        format!("duplicate hosts in virtual service: {a} & {b}"),
                    );
                }
            }
        }
    }
}

/// The host name without its leading `*` when it is a wildcard (`*.foo.com` → `.foo.com`).
fn wildcard_suffix(host: &str) -> Option<&str> {
    host.strip_prefix('*')
}

/// Istio's `host.Name.Matches`: the names are equal, or a wildcard of one covers the other.
fn host_matches(a: &str, b: &str) -> bool {
    match (wildcard_suffix(a), wildcard_suffix(b)) {
        (Some(sa), Some(sb)) => {
            if a.len() < b.len() {
                sb.ends_with(sa)
            } else {
                sa.ends_with(sb)
            }
        }
        (Some(sa), None) => b.ends_with(sa),
        (None, Some(sb)) => a.ends_with(sb),
        (None, None) => a == b,
    }
}

/// Istio's `host.Name.SubsetOf`: `a` is covered by `b`.
fn host_subset_of(a: &str, b: &str) -> bool {
    match (wildcard_suffix(a), wildcard_suffix(b)) {
        (Some(sa), Some(sb)) => a.len() >= b.len() && sa.ends_with(sb),
        (Some(_), None) => false,
        (None, Some(sb)) => a.ends_with(sb),
        (None, None) => a == b,
    }
}

/// The match type of a `StringMatch` (reporting more than one as an error at `path`).
fn string_match<'a>(m: &'a StringMatch, path: &str, report: &mut Report) -> Option<common::StringMatch<'a>> {
    check_oneof(
        path,
        &[("exact", m.exact.is_some()), ("prefix", m.prefix.is_some()), ("regex", m.regex.is_some())],
        report,
    );
    if let Some(v) = &m.exact {
        Some(common::StringMatch::Exact(v))
    } else if let Some(v) = &m.prefix {
        Some(common::StringMatch::Prefix(v))
    } else {
        m.regex.as_deref().map(common::StringMatch::Regex)
    }
}

/// Go's `%f`: six decimals, `NaN`, `+Inf`, `-Inf`.
fn go_fixed(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_owned()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{value:.6}")
    }
}

/// Istio's `validateHTTPRoute` for the route at `path`; `delegate` is true inside a delegate
/// VirtualService (one without hosts).
fn validate_http_route(
    route: &HttpRoute,
    delegate: bool,
    gateway_semantics: bool,
    path: &str,
    report: &mut Report,
) {
    validate_http_route_conflict(route, delegate, path, report);
    validate_http_route_matches(route, path, report);
    if let Some(headers) = &route.headers {
        validate_headers(headers, &format!("{path}.headers"), report);
    }
    if let Some(cors) = &route.cors_policy {
        validate_cors_policy(cors, &format!("{path}.corsPolicy"), report);
    }
    if let Some(fault) = &route.fault {
        validate_fault(fault, &format!("{path}.fault"), report);
    }

    if let Some(percent) = route.mirror_percent {
        if percent > 100 {
            report.error(
                format!("{path}.mirrorPercent"),
                format!("mirror_percent must have a max value of 100 (it has {percent})"),
            );
        }
        report.warn(
            format!("{path}.mirrorPercent"),
            "using deprecated setting \"mirrorPercent\", use \"mirrorPercentage\" instead",
        );
    }
    if let Some(percentage) = &route.mirror_percentage {
        check_mirror_percentage(
            percentage.value,
            &format!("{path}.mirrorPercentage.value"),
            "mirror_percentage",
            report,
        );
    }

    if let Some(mirror) = &route.mirror {
        validate_destination(mirror, &format!("{path}.mirror"), report);
    }
    for (k, mirror) in route.mirrors.iter().enumerate() {
        validate_mirror(mirror, &format!("{path}.mirrors[{k}]"), report);
    }
    if let Some(redirect) = &route.redirect {
        validate_redirect(redirect, &route.r#match, &format!("{path}.redirect"), report);
    }
    if let Some(response) = &route.direct_response {
        validate_direct_response(response, &format!("{path}.directResponse"), report);
    }
    if let Some(retries) = &route.retries {
        validate_retry(retries, &format!("{path}.retries"), report);
    }
    if let Some(rewrite) = &route.rewrite {
        validate_rewrite(rewrite, &format!("{path}.rewrite"), report);
    }
    validate_authority_rewrite(route, path, report);
    validate_http_route_destinations(&route.route, gateway_semantics, &format!("{path}.route"), report);
    if let Some(timeout) = &route.timeout {
        report.check(format!("{path}.timeout"), validate_duration(timeout));
    }
}

/// Istio's `validateHTTPRouteConflict`: which of route, redirect, direct response and delegate may be
/// combined, by route type (a root route delegates; a delegate route is in a delegate VirtualService).
fn validate_http_route_conflict(route: &HttpRoute, delegate: bool, path: &str, report: &mut Report) {
    let name = &route.name;
    if !delegate && route.delegate.is_some() {
        if route.redirect.is_some() {
            report.error(
                format!("{path}.redirect"),
                format!("root HTTP route {name} must not specify redirect"),
            );
        }
        if !route.route.is_empty() {
            report.error(format!("{path}.route"), format!("root HTTP route {name} must not specify route"));
        }
        return;
    }
    if delegate && route.delegate.is_some() {
        report.error(format!("{path}.delegate"), "delegate HTTP route cannot contain delegate");
    }

    if route.redirect.is_some() {
        if !route.route.is_empty() {
            report.error(format!("{path}.route"), "HTTP route cannot contain both route and redirect");
        }
        if route.fault.is_some() {
            report.error(format!("{path}.fault"), "HTTP route cannot contain both fault and redirect");
        }
        if route.rewrite.is_some() {
            report
                .error(format!("{path}.rewrite"), "HTTP route rule cannot contain both rewrite and redirect");
        }
        if route.direct_response.is_some() {
            report.error(
                format!("{path}.directResponse"),
                "HTTP route rule cannot contain both direct_response and redirect",
            );
        }
    } else if route.direct_response.is_some() {
        if !route.route.is_empty() {
            report.error(format!("{path}.route"), "HTTP route cannot contain both route and direct_response");
        }
        if route.fault.is_some() {
            report.error(format!("{path}.fault"), "HTTP route cannot contain both fault and direct_response");
        }
        if route.rewrite.is_some() {
            report.error(
                format!("{path}.rewrite"),
                "HTTP route rule cannot contain both rewrite and direct_response",
            );
        }
    } else if route.route.is_empty() {
        report.error(format!("{path}.route"), "HTTP route, redirect or direct_response is required");
    }

    if route.mirror.is_some() && !route.mirrors.is_empty() {
        report.error(format!("{path}.mirrors"), "HTTP route cannot contain both mirror and mirrors");
    }
}

/// Istio's `validateHTTPRouteMatchRequest`: header, query and string matches first (URIs may use an
/// empty prefix; `withoutHeaders` may use the regex `*` for "absent"), then ports, source labels,
/// gateways and source namespaces.
fn validate_http_route_matches(route: &HttpRoute, path: &str, report: &mut Report) {
    for (j, m) in route.r#match.iter().enumerate() {
        let at = format!("{path}.match[{j}]");
        for (name, header) in &m.headers {
            let here = format!("{at}.headers.{name}");
            report.check(&here, validate_header_name(name));
            let kind = string_match(header, &here, report);
            report.check(&here, validate_string_match(kind, "headers"));
        }
        for (name, header) in &m.without_headers {
            let here = format!("{at}.withoutHeaders.{name}");
            report.check(&here, validate_header_name(name));
            let kind = string_match(header, &here, report);
            // `*` is not a regex here: it means "the header is absent".
            if header.regex.as_deref() != Some("*") {
                report.check(&here, validate_string_match(kind, "withoutHeaders"));
            }
        }
        if let Some(uri) = &m.uri {
            let here = format!("{at}.uri");
            let kind = string_match(uri, &here, report);
            report.check(here, validate_string_match_regexp(kind, "uri"));
        }
        for (field, value) in [("scheme", &m.scheme), ("method", &m.method), ("authority", &m.authority)] {
            if let Some(value) = value {
                let here = format!("{at}.{field}");
                let kind = string_match(value, &here, report);
                report.check(here, validate_string_match(kind, field));
            }
        }
        for (name, param) in &m.query_params {
            let here = format!("{at}.queryParams.{name}");
            let kind = string_match(param, &here, report);
            report.check(here, validate_string_match(kind, "queryParams"));
        }
    }
    for (j, m) in route.r#match.iter().enumerate() {
        let at = format!("{path}.match[{j}]");
        if m.port != 0 {
            report.check(format!("{at}.port"), validate_port(i64::from(m.port)));
        }
        report.check(format!("{at}.sourceLabels"), validate_labels(&m.source_labels));
        validate_gateway_names(&m.gateways, false, &format!("{at}.gateways"), report);
        if !m.source_namespace.is_empty() && !is_dns1123_label(&m.source_namespace) {
            report.error(
                format!("{at}.sourceNamespace"),
                format!("sourceNamespace match {} is invalid", m.source_namespace),
            );
        }
    }
}

/// Header changes of a route or destination: request `add`/`set` may change the authority (not other
/// pseudo-headers), request `remove` and all response changes may touch neither; values must be
/// valid Envoy header values.
fn validate_headers(headers: &Headers, path: &str, report: &mut Report) {
    if let Some(request) = &headers.request {
        validate_header_operations(request, true, &format!("{path}.request"), report);
    }
    if let Some(response) = &headers.response {
        validate_header_operations(response, false, &format!("{path}.response"), report);
    }
}

/// One set of header operations; `request` allows setting the authority.
fn validate_header_operations(ops: &HeaderOperations, request: bool, path: &str, report: &mut Report) {
    for (field, entries) in [("add", &ops.add), ("set", &ops.set)] {
        for (name, value) in entries {
            let at = format!("{path}.{field}.{name}");
            let name_check = if request {
                validate_http_header_with_authority_operation_name(name)
            } else {
                validate_http_header_operation_name(name)
            };
            report.check(&at, name_check);
            report.check(&at, validate_header_value(value));
        }
    }
    for (k, name) in ops.remove.iter().enumerate() {
        report.check(format!("{path}.remove[{k}]"), validate_http_header_operation_name(name));
    }
}

/// Istio's `validateAuthorityRewrite`: the authority may be rewritten in one place only (the rewrite
/// or one `:authority`/`Host` request header).
fn validate_authority_rewrite(route: &HttpRoute, path: &str, report: &mut Report) {
    let mut current = route.rewrite.as_ref().map_or("", |r| r.authority.as_str());
    let Some(request) = route.headers.as_ref().and_then(|h| h.request.as_ref()) else { return };
    for (field, entries) in [("set", &request.set), ("add", &request.add)] {
        for (name, value) in entries.iter().filter(|(name, _)| is_authority_header(name)) {
            if !current.is_empty() {
                report.error(
                    format!("{path}.headers.request.{field}.{name}"),
                    format!(
                        "authority header cannot be set multiple times: have {}, attempting to set {}",
                        go_quote(current),
                        go_quote(value)
                    ),
                );
                return;
            }
            current = value;
        }
    }
}

/// Istio's `validateCORSPolicy`.
fn validate_cors_policy(cors: &CorsPolicy, path: &str, report: &mut Report) {
    for (k, origin) in cors.allow_origins.iter().enumerate() {
        let at = format!("{path}.allowOrigins[{k}]");
        let kind = string_match(origin, &at, report);
        report.check(at, validate_cors_allow_origin(kind));
    }
    for (k, method) in cors.allow_methods.iter().enumerate() {
        report.check(format!("{path}.allowMethods[{k}]"), validate_cors_http_method(method));
    }
    for (k, name) in cors.allow_headers.iter().enumerate() {
        report.check(format!("{path}.allowHeaders[{k}]"), validate_cors_http_header_name(name));
    }
    for (k, name) in cors.expose_headers.iter().enumerate() {
        report.check(format!("{path}.exposeHeaders[{k}]"), validate_cors_http_header_name(name));
    }
    if let Some(max_age) = &cors.max_age {
        report.check(format!("{path}.maxAge"), validate_duration(max_age));
        if max_age.nanos > 0 {
            report.error(format!("{path}.maxAge"), "max_age duration is accurate only to seconds precision");
        }
    }
    check_enum::<UnmatchedPreflights>(
        format!("{path}.unmatchedPreflights"),
        cors.unmatched_preflights,
        report,
    );
}

/// Istio's `validateHTTPFaultInjection` with its abort and delay checks.
fn validate_fault(fault: &HttpFaultInjection, path: &str, report: &mut Report) {
    if fault.abort.is_none() && fault.delay.is_none() {
        report.error(path, "HTTP fault injection must have an abort and/or a delay");
    }
    if let Some(abort) = &fault.abort {
        let at = format!("{path}.abort");
        if let Some(percentage) = &abort.percentage {
            report.check(format!("{at}.percentage.value"), validate_percentage(percentage.value));
        }
        check_oneof(
            &at,
            &[
                ("httpStatus", abort.http_status.is_some()),
                ("grpcStatus", abort.grpc_status.is_some()),
                ("http2Error", abort.http2_error.is_some()),
            ],
            report,
        );
        if let Some(status) = abort.http_status {
            report.check(format!("{at}.httpStatus"), validate_http_status(i64::from(status)));
        } else if let Some(status) = &abort.grpc_status {
            if !GRPC_STATUSES.contains(&status.as_str()) {
                report.error(
                    format!("{at}.grpcStatus"),
                    format!(
                        "gRPC status {} is not supported. See https://github.com/grpc/grpc/blob/master/doc/statuscodes.md for a list of supported codes, for example 'NOT_FOUND'",
                        go_quote(status)
                    ),
                );
            }
        } else if abort.http2_error.is_some() {
            report.error(format!("{at}.http2Error"), "HTTP/2 abort fault injection not supported yet");
        } else {
            report.warn(&at, "abort configured, but error type not set");
        }
    }
    if let Some(delay) = &fault.delay {
        let at = format!("{path}.delay");
        if let Some(percentage) = &delay.percentage {
            report.check(format!("{at}.percentage.value"), validate_percentage(percentage.value));
        }
        check_oneof(
            &at,
            &[
                ("fixedDelay", delay.fixed_delay.is_some()),
                ("exponentialDelay", delay.exponential_delay.is_some()),
            ],
            report,
        );
        if let Some(d) = &delay.fixed_delay {
            report.check(format!("{at}.fixedDelay"), validate_duration(d));
        } else if let Some(d) = &delay.exponential_delay {
            report.check(format!("{at}.exponentialDelay"), validate_duration(d));
            report.error(format!("{at}.exponentialDelay"), "exponentialDelay not supported yet");
        }
    }
}

/// Istio's `validateDestination`: a host that is a valid (wildcard) domain but not `*`, a valid subset
/// name, a valid port.
fn validate_destination(destination: &Destination, path: &str, report: &mut Report) {
    if destination.host == "*" {
        report.error(format!("{path}.host"), format!("invalid destination host {}", destination.host));
    } else {
        report.check(format!("{path}.host"), validate_wildcard_domain(&destination.host));
    }
    if !destination.subset.is_empty() {
        report.check(format!("{path}.subset"), validate_subset_name(&destination.subset));
    }
    if let Some(port) = &destination.port {
        report.check(format!("{path}.port.number"), validate_port(i64::from(port.number)));
    }
}

/// One entry of `mirrors` (Istio's `validateHTTPMirrors`).
fn validate_mirror(mirror: &HttpMirrorPolicy, path: &str, report: &mut Report) {
    let Some(destination) = &mirror.destination else {
        report.error(format!("{path}.destination"), "destination is required for mirrors");
        return;
    };
    validate_destination(destination, &format!("{path}.destination"), report);
    if let Some(percentage) = &mirror.percentage {
        check_mirror_percentage(
            percentage.value,
            &format!("{path}.percentage.value"),
            "mirror percentage",
            report,
        );
    }
}

/// Istio's `validateHTTPRedirect` (which reports only its first problem), plus the CRD's
/// `port`/`derivePort` oneof.
fn validate_redirect(redirect: &HttpRedirect, matches: &[HttpMatchRequest], path: &str, report: &mut Report) {
    check_oneof(
        path,
        &[("port", redirect.port.is_some()), ("derivePort", redirect.derive_port.is_some())],
        report,
    );
    if let Some(derive) = redirect.derive_port {
        check_enum::<RedirectPortSelection>(format!("{path}.derivePort"), derive, report);
    }

    if !redirect.uri.is_empty() && !redirect.prefix_rewrite.is_empty() {
        report.error(path, "redirect may only specify one of uri or prefix_rewrite");
        return;
    }
    if !redirect.prefix_rewrite.is_empty()
        && matches.iter().any(|m| m.uri.as_ref().is_some_and(|uri| uri.prefix.is_none()))
    {
        report.error(
            format!("{path}.prefixRewrite"),
            "redirect prefix_rewrite requires all URI matches to use prefix match type",
        );
        return;
    }
    let port_set = redirect.port.is_some() || redirect.derive_port.is_some();
    if redirect.uri.is_empty()
        && redirect.prefix_rewrite.is_empty()
        && redirect.authority.is_empty()
        && !port_set
        && redirect.scheme.is_empty()
    {
        report.error(path, "redirect must specify URI, authority, scheme, or port");
        return;
    }
    let code = redirect.redirect_code;
    if code != 0 && !(300..=399).contains(&code) {
        report.error(
            format!("{path}.redirectCode"),
            format!("{code} is not a valid redirect code, must be 3xx"),
        );
        return;
    }
    if !redirect.scheme.is_empty() && redirect.scheme != "http" && redirect.scheme != "https" {
        report.error(format!("{path}.scheme"), "invalid redirect scheme, must be \"http\" or \"https\"");
        return;
    }
    if let Some(port) = redirect.port.filter(|p| *p > 0) {
        report.check(format!("{path}.port"), validate_port(i64::from(port)));
    }
}

/// Istio's `validateHTTPDirectResponse`: a valid status and a body of at most 1MB (a warning above
/// 100KB), plus the CRD's `string`/`bytes` oneof.
fn validate_direct_response(response: &HttpDirectResponse, path: &str, report: &mut Report) {
    if let Some(body) = &response.body {
        let at = format!("{path}.body");
        check_oneof(&at, &[("string", body.string.is_some()), ("bytes", body.bytes.is_some())], report);
        let size = match (&body.string, &body.bytes) {
            (Some(s), _) => s.len(),
            (None, Some(b)) => b.len(),
            (None, None) => 0,
        };
        if size > DIRECT_RESPONSE_MAX_SIZE {
            report.error(
                &at,
                "large direct_responses may impact control plane performance, must be less than 1MB",
            );
        } else if size > DIRECT_RESPONSE_WARN_SIZE {
            report.warn(&at, "large direct_responses may impact control plane performance");
        }
    }
    // Istio reads the status as a 32-bit signed number.
    report.check(format!("{path}.status"), validate_http_status(i64::from(response.status as i32)));
}

/// `true` when Go's `net/http.StatusText` has a name for the text read as a number by `strconv.Atoi`.
fn is_http_status_text(text: &str) -> bool {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    text.parse::<i64>().is_ok_and(|n| HTTP_STATUS_CODES.contains(&n))
}

/// Istio's `agent.ValidateHTTPRetry`.
fn validate_retry(retries: &HttpRetry, path: &str, report: &mut Report) {
    if retries.attempts < 0 {
        report.error(format!("{path}.attempts"), "attempts cannot be negative");
    }
    if retries.attempts == 0
        && (retries.per_try_timeout.is_some()
            || !retries.retry_on.is_empty()
            || retries.retry_remote_localities.is_some())
    {
        report.error(path, "http retry policy configured when attempts are set to 0 (disabled)");
    }
    if let Some(d) = &retries.per_try_timeout {
        report.check(format!("{path}.perTryTimeout"), validate_duration(d));
    }
    if !retries.retry_on.is_empty() {
        for policy in retries.retry_on.split(',') {
            if !is_http_status_text(policy) && !RETRY_ON_POLICIES.contains(&policy) {
                report.error(
                    format!("{path}.retryOn"),
                    format!("{} is not a valid retryOn policy", go_quote(policy)),
                );
            }
        }
    }
    if let Some(d) = &retries.backoff {
        report.check(format!("{path}.backoff"), validate_duration(d));
    }
}

/// Istio's `validateHTTPRewrite` and `validateURIRegexRewrite` (first problem only).
fn validate_rewrite(rewrite: &HttpRewrite, path: &str, report: &mut Report) {
    if !rewrite.uri.is_empty() && rewrite.uri_regex_rewrite.is_some() {
        report.error(path, "rewrite may only contain one of URI or UriRegexRewrite");
        return;
    }
    if rewrite.uri.is_empty() && rewrite.uri_regex_rewrite.is_none() && rewrite.authority.is_empty() {
        report.error(
            path,
            "rewrite must specify at least one of URI, UriRegexRewrite, or authority. Only one of URI or UriRegexRewrite may be specified",
        );
        return;
    }
    let Some(regex) = &rewrite.uri_regex_rewrite else { return };
    let at = format!("{path}.uriRegexRewrite");
    if regex.r#match.is_empty() || regex.rewrite.is_empty() {
        let field = if regex.r#match.is_empty() { "match" } else { "rewrite" };
        report.error(
            format!("{at}.{field}"),
            "UriRegexRewrite has errors: UriRegexRewrite requires both Rewrite and Match fields to be specified",
        );
        return;
    }
    if let Err(e) = validate_string_regexp(&regex.r#match, "HTTPRewrite.UriRegexRewrite.Match") {
        report.error(format!("{at}.match"), format!("UriRegexRewrite has errors: {e}"));
    }
}

/// Istio's `validateHTTPRouteDestinations` for the `route` list at `path`.
fn validate_http_route_destinations(
    destinations: &[HttpRouteDestination],
    gateway_semantics: bool,
    path: &str,
    report: &mut Report,
) {
    let mut total: i32 = 0;
    for (k, weighted) in destinations.iter().enumerate() {
        let at = format!("{path}[{k}]");
        match &weighted.destination {
            None => report.error(format!("{at}.destination"), "destination is required"),
            Some(d) if !gateway_semantics => validate_destination(d, &format!("{at}.destination"), report),
            Some(_) => {}
        }
        if let Some(headers) = &weighted.headers {
            validate_headers(headers, &format!("{at}.headers"), report);
        }
        report.check(format!("{at}.weight"), validate_weight(i64::from(weighted.weight)));
        total = total.wrapping_add(weighted.weight);
    }
    if destinations.len() > 1 && total == 0 {
        report.error(path, "total destination weight = 0");
    }
}

/// Istio's `validateRouteDestinations` (TLS and TCP routes) for the `route` list at `path`.
fn validate_route_destinations(
    destinations: &[RouteDestination],
    gateway_semantics: bool,
    path: &str,
    report: &mut Report,
) {
    let mut total: i32 = 0;
    for (k, weighted) in destinations.iter().enumerate() {
        let at = format!("{path}[{k}]");
        match &weighted.destination {
            None => report.error(format!("{at}.destination"), "destination is required"),
            Some(d) if !gateway_semantics => validate_destination(d, &format!("{at}.destination"), report),
            Some(_) => {}
        }
        report.check(format!("{at}.weight"), validate_weight(i64::from(weighted.weight)));
        total = total.wrapping_add(weighted.weight);
    }
    if destinations.len() > 1 && total == 0 {
        report.error(path, "total destination weight = 0");
    }
}

/// Istio's `validateTLSRoute`.
fn validate_tls_route(
    route: &TlsRoute,
    spec: &VirtualService,
    gateway_semantics: bool,
    path: &str,
    report: &mut Report,
) {
    if route.r#match.is_empty() {
        report.error(format!("{path}.match"), "TLS route must have at least one match condition");
    }
    for (j, m) in route.r#match.iter().enumerate() {
        validate_tls_match(m, spec, &format!("{path}.match[{j}]"), report);
    }
    if route.route.is_empty() {
        report.error(format!("{path}.route"), "TLS route is required");
    }
    validate_route_destinations(&route.route, gateway_semantics, &format!("{path}.route"), report);
}

/// Istio's `validateTLSMatch`.
fn validate_tls_match(m: &TlsMatchAttributes, spec: &VirtualService, path: &str, report: &mut Report) {
    if m.sni_hosts.is_empty() {
        report.error(format!("{path}.sniHosts"), "TLS match must have at least one SNI host");
    }
    for (k, sni) in m.sni_hosts.iter().enumerate() {
        validate_sni_host(sni, spec, &format!("{path}.sniHosts[{k}]"), report);
    }
    for (k, subnet) in m.destination_subnets.iter().enumerate() {
        report.check(format!("{path}.destinationSubnets[{k}]"), validate_ip_subnet(subnet));
    }
    if m.port != 0 {
        report.check(format!("{path}.port"), validate_port(i64::from(m.port)));
    }
    report.check(format!("{path}.sourceLabels"), validate_labels(&m.source_labels));
    validate_gateway_names(&m.gateways, false, &format!("{path}.gateways"), report);
}

/// Istio's `validateSniHost`: a valid (wildcard) domain covered by one of the VirtualService's hosts;
/// an IP address is only a warning.
fn validate_sni_host(sni: &str, spec: &VirtualService, path: &str, report: &mut Report) {
    let result = if is_gateway(spec) {
        validate_wildcard_domain_for_virtual_service_bound_to_gateway(true, sni)
    } else {
        validate_wildcard_domain(sni)
    };
    if let Err(e) = result {
        if is_valid_ip_address(sni) {
            report.warn(
                path,
                format!(
                    "using an IP address ({}) goes against SNI spec and most clients do not support this",
                    go_quote(sni)
                ),
            );
        } else {
            report.error(path, e);
        }
        return;
    }
    if !spec.hosts.iter().any(|host| host_subset_of(sni, host)) {
        report.error(
            path,
            format!(
                "SNI host {} is not a compatible subset of any of the virtual service hosts: [{}]",
                go_quote(sni),
                spec.hosts.join(", ")
            ),
        );
    }
}

/// Istio's `validateTCPRoute`.
fn validate_tcp_route(route: &TcpRoute, gateway_semantics: bool, path: &str, report: &mut Report) {
    for (j, m) in route.r#match.iter().enumerate() {
        validate_tcp_match(m, &format!("{path}.match[{j}]"), report);
    }
    if route.route.is_empty() {
        report.error(format!("{path}.route"), "TCP route is required");
    }
    validate_route_destinations(&route.route, gateway_semantics, &format!("{path}.route"), report);
}

/// Istio's `validateTCPMatch`.
fn validate_tcp_match(m: &L4MatchAttributes, path: &str, report: &mut Report) {
    for (k, subnet) in m.destination_subnets.iter().enumerate() {
        report.check(format!("{path}.destinationSubnets[{k}]"), validate_ip_subnet(subnet));
    }
    if m.port != 0 {
        report.check(format!("{path}.port"), validate_port(i64::from(m.port)));
    }
    report.check(format!("{path}.sourceLabels"), validate_labels(&m.source_labels));
    validate_gateway_names(&m.gateways, false, &format!("{path}.gateways"), report);
}

// ===== Unreachable rules =====

/// How Istio names a route in its warnings: `"name"` when it has one, else `#index`.
fn rule_name(name: &str, index: usize) -> String {
    if name.is_empty() { format!("#{index}") } else { go_quote(name) }
}

/// The warning for a rule that can never be used.
fn warn_unused(report: &mut Report, path: String, rule: &str, reason: &str) {
    report.warn(path, format!("virtualService rule {rule} not used ({reason})"));
}

/// The warning for a match that can never be used.
fn warn_ineffective(report: &mut Report, path: String, rule: &str, matchn: &str, dup: &str) {
    report.warn(
        path,
        format!("virtualService rule {rule} match {matchn} is not used (duplicate/overlapping match in rule {dup})"),
    );
}

/// The parts of a URI-prefix match that Istio compares to find matches covered by earlier ones
/// (`OverlappingMatchValidationForHTTPRoute`).
struct PrefixMatch {
    /// Route index and match index, for the finding's path.
    rule: usize,
    matchn: usize,
    route_name: String,
    match_name: String,
    prefix: String,
    port: u32,
    method: String,
    authority: String,
    headers: BTreeMap<String, String>,
    query_params: BTreeMap<String, String>,
    without_headers: BTreeMap<String, String>,
}

/// `exact:<v>` or `prefix:<v>` for a string match (empty when neither is set or both are empty).
fn exact_or_prefix(m: Option<&StringMatch>) -> String {
    let exact = m.and_then(|m| m.exact.as_deref()).unwrap_or("");
    let prefix = m.and_then(|m| m.prefix.as_deref()).unwrap_or("");
    if !exact.is_empty() {
        format!("exact:{exact}")
    } else if !prefix.is_empty() {
        format!("prefix:{prefix}")
    } else {
        String::new()
    }
}

/// Istio's `genMatchHTTPRoutes`: the comparable form of a match with a non-empty URI prefix.
fn prefix_match(route: &HttpRoute, rule: usize, m: &HttpMatchRequest, matchn: usize) -> Option<PrefixMatch> {
    let prefix = m.uri.as_ref()?.prefix.as_deref().filter(|p| !p.is_empty())?;
    let mut method = exact_or_prefix(m.method.as_ref());
    if method.is_empty() {
        method = "exact:GET".to_owned();
    }
    let map = |entries: &BTreeMap<String, StringMatch>| {
        entries.iter().map(|(k, v)| (k.clone(), exact_or_prefix(Some(v)))).collect::<BTreeMap<_, _>>()
    };
    Some(PrefixMatch {
        rule,
        matchn,
        route_name: rule_name(&route.name, rule),
        match_name: rule_name(&m.name, matchn),
        prefix: prefix.to_owned(),
        port: m.port,
        method,
        authority: exact_or_prefix(m.authority.as_ref()),
        headers: map(&m.headers),
        query_params: map(&m.query_params),
        without_headers: map(&m.without_headers),
    })
}

/// Istio's `coveredValidation`: every request `b` matches is also matched by the earlier `a`.
fn covered(a: &PrefixMatch, b: &PrefixMatch) -> bool {
    let covers = |va: &str, vb: &str| va == vb || va.starts_with(vb);
    let maps_cover = |ma: &BTreeMap<String, String>, mb: &BTreeMap<String, String>| {
        ma.len() == mb.len() && ma.iter().all(|(k, va)| mb.get(k).is_some_and(|vb| covers(va, vb)))
    };
    b.prefix.starts_with(&a.prefix)
        && a.port == b.port
        && covers(&a.method, &b.method)
        && covers(&a.authority, &b.authority)
        && maps_cover(&a.headers, &b.headers)
        && maps_cover(&a.query_params, &b.query_params)
        && maps_cover(&a.without_headers, &b.without_headers)
}

/// Istio's `analyzeUnreachableHTTPRules`: rules after a catch-all rule, matches identical to earlier
/// ones (the match name aside), and URI-prefix matches covered by earlier ones.
fn analyze_unreachable_http_rules(routes: &[HttpRoute], report: &mut Report) {
    let mut seen: Vec<(HttpMatchRequest, usize)> = Vec::new();
    let mut catch_all_seen = false;
    let mut prefix_matches = Vec::new();
    for (rule, route) in routes.iter().enumerate() {
        let name = rule_name(&route.name, rule);
        let path = format!("spec.http[{rule}]");
        if route.r#match.is_empty() {
            if catch_all_seen {
                warn_unused(report, path, &name, "only the last rule can have no matches");
            }
            catch_all_seen = true;
            continue;
        }
        let mut duplicates = 0;
        for (matchn, m) in route.r#match.iter().enumerate() {
            if catch_all_seen {
                warn_unused(report, path.clone(), &name, "route without matches defined before");
                continue;
            }
            let key = HttpMatchRequest { name: String::new(), ..m.clone() };
            if let Some((_, dup)) = seen.iter().find(|(earlier, _)| *earlier == key) {
                let dup_name = routes.get(*dup).map_or_else(String::new, |r| rule_name(&r.name, *dup));
                warn_ineffective(
                    report,
                    format!("{path}.match[{matchn}]"),
                    &name,
                    &rule_name(&m.name, matchn),
                    &dup_name,
                );
                duplicates += 1;
                continue;
            }
            seen.push((key, rule));
            prefix_matches.extend(prefix_match(route, rule, m, matchn));
        }
        if duplicates == route.r#match.len() {
            warn_unused(report, path, &name, "all matches used by prior rules");
        }
    }

    for (i, a) in prefix_matches.iter().enumerate() {
        for b in &prefix_matches[i + 1..] {
            if b.prefix == a.prefix {
                continue;
            }
            if covered(a, b) {
                warn_ineffective(
                    report,
                    format!("spec.http[{}].match[{}]", b.rule, b.matchn),
                    &b.route_name,
                    &format!("{} of prefix {}", b.match_name, b.prefix),
                    &format!("{} of prefix {} on {}", a.match_name, a.prefix, a.route_name),
                );
            }
        }
    }
}

/// Istio's `analyzeUnreachableTCPRules` / `analyzeUnreachableTLSRules` over the matches of each rule
/// of the list at `list_path` (`spec.tcp`, `spec.tls`); these rules and matches have no names.
fn analyze_unreachable_l4_rules<M: PartialEq>(list_path: &str, rules: &[&[M]], report: &mut Report) {
    let mut seen: Vec<(&M, usize)> = Vec::new();
    let mut catch_all_seen = false;
    for (rule, matches) in rules.iter().enumerate() {
        let name = format!("#{rule}");
        let path = format!("{list_path}[{rule}]");
        if matches.is_empty() {
            if catch_all_seen {
                warn_unused(report, path, &name, "only the last rule can have no matches");
            }
            catch_all_seen = true;
            continue;
        }
        let mut duplicates = 0;
        for (matchn, m) in matches.iter().enumerate() {
            if catch_all_seen {
                warn_unused(report, path.clone(), &name, "route without matches defined before");
                continue;
            }
            if let Some((_, dup)) = seen.iter().find(|(earlier, _)| *earlier == m) {
                warn_ineffective(
                    report,
                    format!("{path}.match[{matchn}]"),
                    &name,
                    &format!("#{matchn}"),
                    &format!("#{dup}"),
                );
                duplicates += 1;
            } else {
                seen.push((m, rule));
            }
        }
        if duplicates == matches.len() {
            warn_unused(report, path, &name, "all matches used by prior rules");
        }
    }
}

/// Istio's range check of a mirror percentage (0–100); `what` is how Istio names the field in its
/// message (`mirror_percentage` for the route's, `mirror percentage` for a `mirrors` entry's).
fn check_mirror_percentage(value: f64, at: &str, what: &str, report: &mut Report) {
    if value > 100.0 {
        report.error(at, format!("{what} must have a max value of 100 (it has {})", go_fixed(value)));
    }
    if value < 0.0 {
        report.error(at, format!("{what} must have a min value of 0 (it has {})", go_fixed(value)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{
        Want::{self, Error, Valid, Warning},
        check, meta, run, spec,
    };

    fn check_all(cases: &[(&str, &str, Want)]) {
        crate::testutil::check_all::<VirtualService>(validate, &meta("vs", "ns1"), cases);
    }

    /// A VirtualService for `foo.bar` with one HTTP route (a flow-style YAML mapping).
    fn http(route: &str) -> String {
        format!("hosts: [foo.bar]\nhttp: [{route}]")
    }

    /// A VirtualService for `foo.bar` with one HTTP route to `foo.baz` plus the given fields.
    fn routed(fields: &str) -> String {
        http(&format!("{{route: [{{destination: {{host: foo.baz}}}}], {fields}}}"))
    }

    const SIMPLE: &str = "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}}]}]";

    #[test]
    fn virtual_service_cases_from_istio() {
        check_all(&[
            ("simple", SIMPLE, Valid),
            (
                "allow sni based domains",
                "hosts: [outbound_.15010_._.istiod.istio-system.svc.cluster.local]\ngateways: [ns1/gateway]\ntls: [{match: [{sniHosts: [outbound_.15010_._.istiod.istio-system.svc.cluster.local]}], route: [{destination: {host: istio.istio-system.svc.cluster.local}}]}]",
                Valid,
            ),
            (
                "duplicate hosts",
                "hosts: ['*.foo.bar', '*.bar']\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Error("spec.hosts[1]", "duplicate hosts in virtual service: *.foo.bar & *.bar"),
            ),
            (
                "with no destination",
                "hosts: ['*.foo.bar', '*.bar']\nhttp: [{route: [{}]}]",
                Error("spec.http[0].route[0].destination", "destination is required"),
            ),
            (
                "destination without host",
                "hosts: [foo.bar]\nhttp: [{route: [{destination: {}}]}]",
                Error("spec.http[0].route[0].destination.host", "empty domain name not allowed"),
            ),
            ("delegate with no hosts", "http: [{route: [{destination: {host: foo.baz}}]}]", Valid),
            (
                "bad host",
                "hosts: [foo.ba!r]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Error("spec.hosts[0]", "domain name \"ba!r\" invalid (label \"ba!r\" invalid)"),
            ),
            ("ip host", "hosts: [10.0.0.1]\nhttp: [{route: [{destination: {host: foo.baz}}]}]", Valid),
            (
                "no tcp or http routing",
                "hosts: [foo.bar]",
                Error("spec", "http, tcp or tls must be provided in virtual service"),
            ),
            (
                "bad gateway",
                "hosts: [foo.bar]\ngateways: [b@dgateway]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Error("spec.gateways[0]", "b@dgateway"),
            ),
            (
                "FQDN for gateway",
                "hosts: [foo.bar]\ngateways: [gateway.example.com]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Warning(
                    "spec.gateways[0]",
                    "using legacy gatewayName format \"gateway.example.com\"; prefer the <namespace>/<name> format: \"example/gateway\"",
                ),
            ),
            (
                "namespace/name for gateway",
                "hosts: [foo.bar]\ngateways: [ns1/gateway]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Valid,
            ),
            (
                "namespace/* for gateway",
                "hosts: [foo.bar]\ngateways: ['ns1/*']\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Error("spec.gateways[0]", "invalid value for gateway name: \"*\""),
            ),
            (
                "*/name for gateway",
                "hosts: [foo.bar]\ngateways: ['*/gateway']\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Error("spec.gateways[0]", "invalid value for namespace: \"*\""),
            ),
            (
                "wildcard for mesh gateway",
                "hosts: ['*']\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Error(
                    "spec.hosts[0]",
                    "wildcard host * is not allowed for virtual services bound to the mesh gateway",
                ),
            ),
            (
                "wildcard for mesh gateway, explicitly",
                "hosts: ['*']\ngateways: [mesh, ns1/gw]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Error("spec.hosts[0]", "wildcard host * is not allowed"),
            ),
            (
                "wildcard for non-mesh gateway",
                "hosts: ['*']\ngateways: [somegateway]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Valid,
            ),
            (
                "missing tcp route",
                "hosts: [foo.bar]\ntcp: [{match: [{port: 999}]}]",
                Error("spec.tcp[0].route", "TCP route is required"),
            ),
            (
                "missing tls route",
                "hosts: [foo.bar]\ntls: [{match: [{port: 999, sniHosts: [foo.bar]}]}]",
                Error("spec.tls[0].route", "TLS route is required"),
            ),
            (
                "deprecated mirror",
                "hosts: [foo.bar]\ngateways: [ns1/gateway]\nhttp: [{mirrorPercent: 5, route: [{destination: {host: foo.baz}}]}]",
                Warning(
                    "spec.http[0].mirrorPercent",
                    "using deprecated setting \"mirrorPercent\", use \"mirrorPercentage\" instead",
                ),
            ),
            ("set authority", &routed("headers: {request: {set: {':authority': foo}}}"), Valid),
            (
                "set authority in destination",
                "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}, headers: {request: {set: {':authority': foo}}}}]}]",
                Valid,
            ),
            (
                "set authority in rewrite and header",
                &routed("headers: {request: {set: {':authority': foo}}}, rewrite: {authority: bar}"),
                Error(
                    "spec.http[0].headers.request.set.:authority",
                    "authority header cannot be set multiple times: have \"bar\", attempting to set \"foo\"",
                ),
            ),
            (
                "non-method-get",
                &routed(
                    "match: [{uri: {prefix: /api/v1/product}}, {uri: {prefix: /api/v1/products}, method: {exact: GET}}]",
                ),
                Warning(
                    "spec.http[0].match[1]",
                    "virtualService rule #0 match #1 of prefix /api/v1/products is not used (duplicate/overlapping match in rule #0 of prefix /api/v1/product on #0)",
                ),
            ),
            (
                "uri-with-prefix-exact",
                &routed("match: [{uri: {prefix: /}}, {uri: {exact: /}, method: {exact: GET}}]"),
                Valid,
            ),
            (
                "jwt claim route without gateway",
                "hosts: [foo.bar]\ngateways: [mesh]\nhttp: [{route: [{destination: {host: foo.baz}}], match: [{uri: {prefix: /}, headers: {'@request.auth.claims.foo': {exact: bar}}}]}]",
                Error(
                    "spec.http[0].match[0].headers.@request.auth.claims.foo",
                    "JWT claim based routing (key: @request.auth.claims.foo) is only supported for gateway, found no gateways: [mesh]",
                ),
            ),
            (
                "jwt claim route on a gateway",
                "hosts: [foo.bar]\ngateways: [ns1/gw]\nhttp: [{route: [{destination: {host: foo.baz}}], match: [{headers: {'@request.auth.claims.foo': {exact: bar}}}]}]",
                Valid,
            ),
            (
                "ip address as sni host",
                "hosts: [foo.bar]\ntls: [{route: [{destination: {host: foo.baz}}], match: [{port: 999, sniHosts: [1.1.1.1]}]}]",
                Warning(
                    "spec.tls[0].match[0].sniHosts[0]",
                    "using an IP address (\"1.1.1.1\") goes against SNI spec and most clients do not support this",
                ),
            ),
            (
                "invalid wildcard as sni host",
                "hosts: [foo.bar]\ntls: [{route: [{destination: {host: foo.baz}}], match: [{port: 999, sniHosts: [foo.*.com]}]}]",
                Error("spec.tls[0].match[0].sniHosts[0]", "invalid"),
            ),
            (
                "sni host outside the hosts",
                "hosts: [foo.bar]\ntls: [{route: [{destination: {host: foo.baz}}], match: [{sniHosts: [other.bar]}]}]",
                Error(
                    "spec.tls[0].match[0].sniHosts[0]",
                    "SNI host \"other.bar\" is not a compatible subset of any of the virtual service hosts: [foo.bar]",
                ),
            ),
            (
                "sni host under a wildcard host",
                "hosts: ['*.bar']\ntls: [{route: [{destination: {host: foo.baz}}], match: [{sniHosts: [a.bar]}]}]",
                Valid,
            ),
            (
                "tls route without match",
                "hosts: [foo.bar]\ntls: [{route: [{destination: {host: foo.baz}}]}]",
                Error("spec.tls[0].match", "TLS route must have at least one match condition"),
            ),
            (
                "tls match without sni hosts",
                "hosts: [foo.bar]\ntls: [{route: [{destination: {host: foo.baz}}], match: [{port: 443}]}]",
                Error("spec.tls[0].match[0].sniHosts", "TLS match must have at least one SNI host"),
            ),
            (
                "export to",
                "hosts: [foo.bar]\nexportTo: [.]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Valid,
            ),
            (
                "export to public and private",
                "hosts: [foo.bar]\nexportTo: [., '*']\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Error(
                    "spec.exportTo",
                    "cannot have both public (*) and non-public exportTo values for a resource",
                ),
            ),
        ]);
    }

    #[test]
    fn chaining_cases_from_istio() {
        check_all(&[
            (
                "root simple",
                "hosts: [foo.bar]\ngateways: [test-gateway]\nhttp: [{delegate: {name: test, namespace: test}}]",
                Valid,
            ),
            (
                "root applies to sidecar with delegate",
                "hosts: [foo.bar]\nhttp: [{delegate: {name: test, namespace: test}}]",
                Valid,
            ),
            (
                "root with delegate and destination in one route",
                "hosts: [foo.bar]\nhttp: [{delegate: {name: test, namespace: test}, route: [{destination: {host: foo.baz}}]}]",
                Error("spec.http[0].route", "root HTTP route  must not specify route"),
            ),
            (
                "root with delegate and redirect",
                "hosts: [foo.bar]\nhttp: [{name: r, delegate: {name: test}, redirect: {uri: /lerp, authority: foo.biz}}]",
                Error("spec.http[0].redirect", "root HTTP route r must not specify redirect"),
            ),
            (
                "delegate with no destination",
                "hosts: []\nhttp: [{}]",
                Error("spec.http[0].route", "HTTP route, redirect or direct_response is required"),
            ),
            (
                "delegate with delegate",
                "http: [{delegate: {name: test, namespace: test}}]",
                Error("spec.http[0].delegate", "delegate HTTP route cannot contain delegate"),
            ),
            (
                "delegate with TCP route",
                "tcp: [{route: [{destination: {host: foo.baz}}]}]",
                Error("spec.tcp", "delegate virtual service must have no tcp route specified"),
            ),
            (
                "delegate with TLS route",
                "tls: [{match: [{sniHosts: [a.b]}], route: [{destination: {host: foo.baz}}]}]",
                Error("spec.tls", "delegate virtual service must have no tls route specified"),
            ),
            (
                "delegate with gateway",
                "gateways: [test]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
                Error("spec.gateways", "delegate virtual service must have no gateways specified"),
            ),
            (
                "delegate with sourceNamespace",
                "http: [{match: [{sourceNamespace: test}], route: [{destination: {host: foo.baz}}]}]",
                Valid,
            ),
        ]);
    }

    #[test]
    fn http_route_cases_from_istio() {
        check_all(&[
            (
                "empty",
                &http("{}"),
                Error("spec.http[0].route", "HTTP route, redirect or direct_response is required"),
            ),
            (
                "no destination",
                &http("{route: [{}]}"),
                Error("spec.http[0].route[0].destination", "destination is required"),
            ),
            (
                "weighted",
                &http(
                    "{route: [{destination: {host: foo.baz.south}, weight: 25}, {destination: {host: foo.baz.east}, weight: 75}]}",
                ),
                Valid,
            ),
            (
                "total weight > 100",
                &http(
                    "{route: [{destination: {host: foo.baz.south}, weight: 550}, {destination: {host: foo.baz.east}, weight: 500}]}",
                ),
                Valid,
            ),
            (
                "total weight = 0",
                &http("{route: [{destination: {host: foo.baz.south}}, {destination: {host: foo.baz.east}}]}"),
                Error("spec.http[0].route", "total destination weight = 0"),
            ),
            (
                "negative weight",
                &http(
                    "{route: [{destination: {host: c}, weight: 75}, {destination: {host: c}, weight: -15}]}",
                ),
                Error("spec.http[0].route[1].weight", "weight -15 < 0"),
            ),
            ("simple redirect", &http("{redirect: {uri: /lerp, authority: foo.biz}}"), Valid),
            (
                "prefix_rewrite redirect with prefix URI match",
                &http("{match: [{uri: {prefix: /foo}}], redirect: {prefixRewrite: /bar}}"),
                Valid,
            ),
            (
                "prefix_rewrite redirect with exact URI match",
                &http("{match: [{uri: {exact: /foo}}], redirect: {prefixRewrite: /bar}}"),
                Error(
                    "spec.http[0].redirect.prefixRewrite",
                    "redirect prefix_rewrite requires all URI matches to use prefix match type",
                ),
            ),
            (
                "prefix_rewrite redirect with regex URI match",
                &http("{match: [{uri: {regex: /foo.*}}], redirect: {prefixRewrite: /bar}}"),
                Error(
                    "spec.http[0].redirect.prefixRewrite",
                    "requires all URI matches to use prefix match type",
                ),
            ),
            (
                "prefix_rewrite redirect without URI match",
                &http("{match: [{headers: {x-foo: {exact: bar}}}], redirect: {prefixRewrite: /bar}}"),
                Valid,
            ),
            (
                "conflicting redirect and route",
                &routed("redirect: {uri: /lerp, authority: foo.biz}"),
                Error("spec.http[0].route", "HTTP route cannot contain both route and redirect"),
            ),
            (
                "redirect and fault",
                &http("{redirect: {uri: /lerp}, fault: {abort: {httpStatus: 500}}}"),
                Error("spec.http[0].fault", "HTTP route cannot contain both fault and redirect"),
            ),
            (
                "redirect and rewrite",
                &http("{redirect: {uri: /lerp}, rewrite: {uri: /a}}"),
                Error("spec.http[0].rewrite", "HTTP route rule cannot contain both rewrite and redirect"),
            ),
            (
                "redirect and direct response",
                &http("{redirect: {uri: /lerp}, directResponse: {status: 200}}"),
                Error(
                    "spec.http[0].directResponse",
                    "HTTP route rule cannot contain both direct_response and redirect",
                ),
            ),
            (
                "direct response and route",
                &routed("directResponse: {status: 200}"),
                Error("spec.http[0].route", "HTTP route cannot contain both route and direct_response"),
            ),
            (
                "direct response and fault",
                &http("{directResponse: {status: 200}, fault: {abort: {httpStatus: 500}}}"),
                Error("spec.http[0].fault", "HTTP route cannot contain both fault and direct_response"),
            ),
            (
                "direct response and rewrite",
                &http("{directResponse: {status: 200}, rewrite: {uri: /a}}"),
                Error(
                    "spec.http[0].rewrite",
                    "HTTP route rule cannot contain both rewrite and direct_response",
                ),
            ),
            (
                "valid headers",
                "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}, headers: {request: {add: {name: ''}, set: {name: ''}, remove: [name]}, response: {add: {name: ''}, set: {name: ''}, remove: [name]}}}]}]",
                Valid,
            ),
            (
                "empty header name - request add",
                "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}, headers: {request: {add: {'': value}}}}]}]",
                Error("spec.http[0].route[0].headers.request.add.", "header name cannot be empty"),
            ),
            (
                "empty header name - request remove",
                "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}, headers: {request: {remove: ['']}}}]}]",
                Error("spec.http[0].route[0].headers.request.remove[0]", "header name cannot be empty"),
            ),
            (
                "empty header name - response set",
                "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}, headers: {response: {set: {'': value}}}}]}]",
                Error("spec.http[0].route[0].headers.response.set.", "header name cannot be empty"),
            ),
            (
                "response may not set the host",
                &routed("headers: {response: {set: {host: a}}}"),
                Error(
                    "spec.http[0].headers.response.set.host",
                    "invalid header \"host\": cannot set Host header",
                ),
            ),
            (
                "request may not set a pseudo-header",
                &routed("headers: {request: {set: {':path': /a}}}"),
                Error("spec.http[0].headers.request.set.:path", "header cannot have \":\" prefix"),
            ),
            ("envoy escaped % set", &routed("headers: {response: {set: {i-love-istio: '100%%'}}}"), Valid),
            ("envoy variable set", &routed("headers: {response: {set: {name: '%HOSTNAME%'}}}"), Valid),
            (
                "envoy unescaped % set",
                &routed("headers: {response: {set: {name: 'abcd%oijasodifj'}}}"),
                Error("spec.http[0].headers.response.set.name", "header value configuration"),
            ),
            ("envoy variable add", &routed("headers: {response: {add: {name: 'hello %HOSTNAME%'}}}"), Valid),
            (
                "empty prefix header match",
                &routed("match: [{headers: {emptyprefix: {prefix: ''}}}]"),
                Error(
                    "spec.http[0].match[0].headers.emptyprefix",
                    "\"headers\": prefix string match should not be empty",
                ),
            ),
            ("header presence match", &routed("match: [{headers: {x-present: {}}}]"), Valid),
            (
                "invalid header name in match",
                &routed("match: [{headers: {'bad header': {exact: a}}}]"),
                Error("spec.http[0].match[0].headers.bad header", "is not a valid header name"),
            ),
            (
                "invalid mirror percent",
                &routed("mirrorPercent: 101"),
                Error(
                    "spec.http[0].mirrorPercent",
                    "mirror_percent must have a max value of 100 (it has 101)",
                ),
            ),
            (
                "invalid mirror percentage",
                &routed("mirrorPercentage: {value: 101}"),
                Error(
                    "spec.http[0].mirrorPercentage.value",
                    "mirror_percentage must have a max value of 100 (it has 101.000000)",
                ),
            ),
            ("valid mirror percentage", &routed("mirrorPercentage: {value: 1}"), Valid),
            (
                "negative mirror percentage",
                &routed("mirrorPercentage: {value: -1}"),
                Error(
                    "spec.http[0].mirrorPercentage.value",
                    "mirror_percentage must have a min value of 0 (it has -1.000000)",
                ),
            ),
            ("mirror", &routed("mirror: {host: foo.mirror, subset: v1, port: {number: 8080}}"), Valid),
            (
                "mirror without host",
                &routed("mirror: {subset: v1}"),
                Error("spec.http[0].mirror.host", "empty domain name not allowed"),
            ),
            (
                "mirrors without destination",
                &routed("mirrors: [{percentage: {value: 1}}]"),
                Error("spec.http[0].mirrors[0].destination", "destination is required for mirrors"),
            ),
            (
                "mirrors invalid mirror percentage",
                &routed(
                    "mirrors: [{destination: {host: foo.baz}}, {destination: {host: foo.baz}, percentage: {value: 101}}]",
                ),
                Error(
                    "spec.http[0].mirrors[1].percentage.value",
                    "mirror percentage must have a max value of 100 (it has 101.000000)",
                ),
            ),
            (
                "mirrors valid mirror percentage",
                &routed(
                    "mirrors: [{destination: {host: foo.baz}, percentage: {value: 1}}, {destination: {host: foo.baz}, percentage: {value: 50}}]",
                ),
                Valid,
            ),
            (
                "mirrors negative mirror percentage",
                &routed("mirrors: [{destination: {host: foo.baz}, percentage: {value: -1}}]"),
                Error(
                    "spec.http[0].mirrors[0].percentage.value",
                    "mirror percentage must have a min value of 0 (it has -1.000000)",
                ),
            ),
            (
                "conflicting mirror and mirrors",
                &routed("mirror: {host: foo.baz}, mirrors: [{destination: {host: foo.bar}}]"),
                Error("spec.http[0].mirrors", "HTTP route cannot contain both mirror and mirrors"),
            ),
            ("timeout", &routed("timeout: 1.5s"), Valid),
            (
                "bad timeout",
                &routed("timeout: 0.0001s"),
                Error("spec.http[0].timeout", "duration must be greater than 1ms"),
            ),
        ]);
    }

    #[test]
    fn route_match_cases_from_istio() {
        let redirect = |m: &str| http(&format!("{{match: [{m}], redirect: {{uri: /, authority: foo.biz}}}}"));
        let delegate =
            |m: &str| http(&format!("{{match: [{m}], delegate: {{name: test, namespace: test}}}}"));
        check_all(&[
            ("prefix header match", &delegate("{headers: {header: {prefix: test}}}"), Valid),
            (
                "empty prefix header match (delegate)",
                &delegate("{headers: {header: {prefix: ''}}}"),
                Error("spec.http[0].match[0].headers.header", "prefix string match should not be empty"),
            ),
            ("exact header match", &delegate("{headers: {header: {exact: test}}}"), Valid),
            ("regex header match", &delegate("{headers: {header: {regex: test}}}"), Valid),
            ("exact without headers match", &redirect("{withoutHeaders: {header: {exact: test}}}"), Valid),
            ("regex without headers match", &redirect("{withoutHeaders: {header: {regex: test}}}"), Valid),
            (
                "regex without headers match ?",
                &redirect("{withoutHeaders: {header: {regex: '?'}}}"),
                Error(
                    "spec.http[0].match[0].withoutHeaders.header",
                    "\"withoutHeaders\": error parsing regexp: missing argument to repetition operator: `?`",
                ),
            ),
            ("regex without headers match *", &redirect("{withoutHeaders: {header: {regex: '*'}}}"), Valid),
            ("regex uri match", &delegate("{uri: {regex: test}}"), Valid),
            ("prefix uri match", &delegate("{uri: {prefix: test}}"), Valid),
            ("exact uri match", &delegate("{uri: {exact: test}}"), Valid),
            ("prefix queryParams match", &delegate("{queryParams: {q: {prefix: test}}}"), Valid),
            ("exact queryParams match", &delegate("{queryParams: {q: {exact: test}}}"), Valid),
            (
                "empty prefix match in method",
                &redirect("{method: {prefix: ''}}"),
                Error("spec.http[0].match[0].method", "\"method\": prefix string match should not be empty"),
            ),
            (
                "empty regex match in method",
                &redirect("{method: {regex: ''}}"),
                Error("spec.http[0].match[0].method", "\"method\": regex string match should not be empty"),
            ),
            ("empty prefix match in uri", &redirect("{uri: {prefix: ''}}"), Valid),
            (
                "empty regex match in uri",
                &redirect("{uri: {regex: ''}}"),
                Error("spec.http[0].match[0].uri", "\"uri\": regex string match should not be empty"),
            ),
            (
                "empty regex match in query",
                &redirect("{queryParams: {q: {regex: ''}}}"),
                Error(
                    "spec.http[0].match[0].queryParams.q",
                    "\"queryParams\": regex string match should not be empty",
                ),
            ),
            (
                "empty regex match in scheme",
                &redirect("{scheme: {regex: ''}}"),
                Error("spec.http[0].match[0].scheme", "\"scheme\": regex string match should not be empty"),
            ),
            (
                "empty prefix match in authority",
                &redirect("{authority: {prefix: ''}}"),
                Error(
                    "spec.http[0].match[0].authority",
                    "\"authority\": prefix string match should not be empty",
                ),
            ),
            (
                "two match types",
                &redirect("{uri: {exact: /a, prefix: /b}}"),
                Error("spec.http[0].match[0].uri", "only one of exact, prefix or regex may be set"),
            ),
            (
                "bad port",
                &redirect("{port: 70000}"),
                Error("spec.http[0].match[0].port", "port number 70000 must be in the range 1..65535"),
            ),
            (
                "bad source labels",
                &redirect("{sourceLabels: {'@app': a}}"),
                Error("spec.http[0].match[0].sourceLabels", "invalid tag key"),
            ),
            (
                "bad match gateway",
                &redirect("{gateways: ['ns/b@d']}"),
                Error("spec.http[0].match[0].gateways[0]", "invalid value for gateway name: \"b@d\""),
            ),
            (
                "bad source namespace",
                &redirect("{sourceNamespace: Foo_bar}"),
                Error("spec.http[0].match[0].sourceNamespace", "sourceNamespace match Foo_bar is invalid"),
            ),
        ]);
    }

    #[test]
    fn cors_policy_cases_from_istio() {
        let cors = |c: &str| routed(&format!("corsPolicy: {c}"));
        check_all(&[
            (
                "valid",
                &cors(
                    "{allowMethods: [GET, POST], allowHeaders: [header1, header2], exposeHeaders: [header3], maxAge: 2s}",
                ),
                Valid,
            ),
            (
                "bad method",
                &cors("{allowMethods: [GET, PUTT]}"),
                Error("spec.http[0].corsPolicy.allowMethods[1]", "\"PUTT\" is not a supported HTTP method"),
            ),
            (
                "bad header",
                &cors("{exposeHeaders: ['']}"),
                Error("spec.http[0].corsPolicy.exposeHeaders[0]", "header name cannot be empty"),
            ),
            (
                "bad max age",
                &cors("{maxAge: 2.000000042s}"),
                Error(
                    "spec.http[0].corsPolicy.maxAge",
                    "max_age duration is accurate only to seconds precision",
                ),
            ),
            (
                "empty allow origins",
                &cors("{allowOrigins: [{exact: ''}, {prefix: ''}, {regex: ''}]}"),
                Error(
                    "spec.http[0].corsPolicy.allowOrigins[0]",
                    "'' is not a valid match type for CORS allow origins",
                ),
            ),
            (
                "non-empty allow origins",
                &cors("{allowOrigins: [{exact: exact}, {prefix: prefix}, {regex: regex}]}"),
                Valid,
            ),
            (
                "bad origin regex",
                &cors("{allowOrigins: [{regex: '['}]}"),
                Error(
                    "spec.http[0].corsPolicy.allowOrigins[0]",
                    "\"corsPolicy.allowOrigins\": error parsing regexp",
                ),
            ),
        ]);
    }

    #[test]
    fn fault_injection_cases_from_istio() {
        let fault = |f: &str| routed(&format!("fault: {f}"));
        let abort = "spec.http[0].fault.abort";
        let delay = "spec.http[0].fault.delay";
        check_all(&[
            (
                "empty fault",
                &fault("{}"),
                Error("spec.http[0].fault", "HTTP fault injection must have an abort and/or a delay"),
            ),
            ("valid abort", &fault("{abort: {percentage: {value: 20}, httpStatus: 200}}"), Valid),
            ("valid default abort", &fault("{abort: {httpStatus: 200}}"), Valid),
            (
                "invalid http status",
                &fault("{abort: {percentage: {value: 20}, httpStatus: 9000}}"),
                Error("spec.http[0].fault.abort.httpStatus", "HTTP status 9000 is not in range 200-599"),
            ),
            (
                "invalid low http status",
                &fault("{abort: {httpStatus: 100}}"),
                Error("spec.http[0].fault.abort.httpStatus", "HTTP status 100"),
            ),
            ("valid percentage", &fault("{abort: {percentage: {value: 0.001}, httpStatus: 200}}"), Valid),
            (
                "invalid fractional percent",
                &fault("{abort: {percentage: {value: -10.0}, httpStatus: 200}}"),
                Error(
                    "spec.http[0].fault.abort.percentage.value",
                    "percentage -10 is neither 0.0, nor in range [0.0001, 100.0]",
                ),
            ),
            (
                "grpc: valid",
                &fault("{abort: {percentage: {value: 20}, grpcStatus: DEADLINE_EXCEEDED}}"),
                Valid,
            ),
            ("grpc: valid default percentage", &fault("{abort: {grpcStatus: DEADLINE_EXCEEDED}}"), Valid),
            (
                "grpc: invalid status",
                &fault("{abort: {grpcStatus: BAD_STATUS}}"),
                Error("spec.http[0].fault.abort.grpcStatus", "gRPC status \"BAD_STATUS\" is not supported."),
            ),
            (
                "grpc: valid percentage",
                &fault("{abort: {percentage: {value: 0.001}, grpcStatus: INTERNAL}}"),
                Valid,
            ),
            (
                "http2 error",
                &fault("{abort: {http2Error: CANCEL}}"),
                Error(
                    "spec.http[0].fault.abort.http2Error",
                    "HTTP/2 abort fault injection not supported yet",
                ),
            ),
            (
                "abort without error type",
                &fault("{abort: {percentage: {value: 1}}}"),
                Warning(abort, "abort configured, but error type not set"),
            ),
            (
                "abort with two error types",
                &fault("{abort: {httpStatus: 500, grpcStatus: INTERNAL}}"),
                Error(abort, "only one of httpStatus, grpcStatus or http2Error may be set"),
            ),
            ("valid fixed delay", &fault("{delay: {percentage: {value: 20}, fixedDelay: 3s}}"), Valid),
            ("valid default delay", &fault("{delay: {fixedDelay: 3s}}"), Valid),
            (
                "invalid delay percent",
                &fault("{delay: {percentage: {value: 101}, fixedDelay: 3s}}"),
                Error(
                    "spec.http[0].fault.delay.percentage.value",
                    "percentage 101 is neither 0.0, nor in range [0.0001, 100.0]",
                ),
            ),
            (
                "invalid delay",
                &fault("{delay: {percentage: {value: 20}, fixedDelay: 3.000000042s}}"),
                Error("spec.http[0].fault.delay.fixedDelay", "only durations to ms precision are supported"),
            ),
            (
                "valid fractional delay percentage",
                &fault("{delay: {percentage: {value: 0.001}, fixedDelay: 3s}}"),
                Valid,
            ),
            (
                "exponential delay",
                &fault("{delay: {exponentialDelay: 1s}}"),
                Error("spec.http[0].fault.delay.exponentialDelay", "exponentialDelay not supported yet"),
            ),
            (
                "two delay types",
                &fault("{delay: {fixedDelay: 1s, exponentialDelay: 1s}}"),
                Error(delay, "only one of fixedDelay or exponentialDelay may be set"),
            ),
        ]);
    }

    #[test]
    fn retry_cases_from_istio() {
        let retries = |r: &str| routed(&format!("retries: {r}"));
        let at = "spec.http[0].retries";
        check_all(&[
            ("valid", &retries("{attempts: 10, perTryTimeout: 2s, retryOn: '5xx,gateway-error'}"), Valid),
            ("disable retries", &retries("{attempts: 0}"), Valid),
            (
                "retry policy configured but attempts set to zero",
                &retries("{attempts: 0, perTryTimeout: 2s, retryOn: '5xx,gateway-error'}"),
                Error(at, "http retry policy configured when attempts are set to 0 (disabled)"),
            ),
            ("valid default", &retries("{attempts: 10}"), Valid),
            (
                "valid http status retryOn",
                &retries("{attempts: 10, perTryTimeout: 2s, retryOn: '503,connect-failure'}"),
                Valid,
            ),
            (
                "invalid attempts",
                &retries("{attempts: -1, perTryTimeout: 2s}"),
                Error("spec.http[0].retries.attempts", "attempts cannot be negative"),
            ),
            (
                "invalid timeout",
                &retries("{attempts: 10, perTryTimeout: 2.000000001s}"),
                Error("spec.http[0].retries.perTryTimeout", "only durations to ms precision are supported"),
            ),
            (
                "timeout too small",
                &retries("{attempts: 10, perTryTimeout: 0.000000999s}"),
                Error("spec.http[0].retries.perTryTimeout", "duration must be greater than 1ms"),
            ),
            (
                "invalid backoff",
                &retries("{attempts: 10, backoff: 0.000000999s}"),
                Error("spec.http[0].retries.backoff", "duration must be greater than 1ms"),
            ),
            (
                "invalid policy retryOn",
                &retries("{attempts: 10, perTryTimeout: 2s, retryOn: '5xx,invalid policy'}"),
                Error("spec.http[0].retries.retryOn", "\"invalid policy\" is not a valid retryOn policy"),
            ),
            (
                "invalid http status retryOn",
                &retries("{attempts: 10, perTryTimeout: 2s, retryOn: '600,connect-failure'}"),
                Error("spec.http[0].retries.retryOn", "\"600\" is not a valid retryOn policy"),
            ),
            (
                "retryRemoteLocalities configured but attempts set to zero",
                &retries("{attempts: 0, retryRemoteLocalities: false}"),
                Error(at, "http retry policy configured when attempts are set to 0 (disabled)"),
            ),
        ]);
    }

    #[test]
    fn rewrite_cases_from_istio() {
        let rewrite = |r: &str| routed(&format!("rewrite: {r}"));
        let at = "spec.http[0].rewrite";
        check_all(&[
            ("uri and authority", &rewrite("{uri: /path/to/resource, authority: foobar.org}"), Valid),
            ("uri", &rewrite("{uri: /path/to/resource}"), Valid),
            ("authority", &rewrite("{authority: foobar.org}"), Valid),
            (
                "uriRegexRewrite",
                &rewrite(
                    "{uriRegexRewrite: {match: '^/service/([^/]+)(/.*)$', rewrite: '\\2/instance/\\1'}}",
                ),
                Valid,
            ),
            (
                "uriRegexRewrite and authority",
                &rewrite(
                    "{authority: foobar.org, uriRegexRewrite: {match: '^/service/([^/]+)(/.*)$', rewrite: '\\2/instance/\\1'}}",
                ),
                Valid,
            ),
            (
                "uriRegexRewrite and uri",
                &rewrite(
                    "{uri: /path, uriRegexRewrite: {match: '^/service/([^/]+)(/.*)$', rewrite: '\\2/instance/\\1'}}",
                ),
                Error(at, "rewrite may only contain one of URI or UriRegexRewrite"),
            ),
            (
                "nothing",
                &rewrite("{}"),
                Error(at, "rewrite must specify at least one of URI, UriRegexRewrite, or authority"),
            ),
            (
                "uriRegexRewrite missing match",
                &rewrite("{uriRegexRewrite: {rewrite: '\\2/instance/\\1'}}"),
                Error(
                    "spec.http[0].rewrite.uriRegexRewrite.match",
                    "UriRegexRewrite requires both Rewrite and Match fields to be specified",
                ),
            ),
            (
                "uriRegexRewrite missing rewrite",
                &rewrite("{uriRegexRewrite: {match: '^/service/([^/]+)(/.*)$'}}"),
                Error(
                    "spec.http[0].rewrite.uriRegexRewrite.rewrite",
                    "UriRegexRewrite requires both Rewrite and Match fields to be specified",
                ),
            ),
            (
                "uriRegexRewrite invalid regex patterns",
                &rewrite("{uriRegexRewrite: {match: '[', rewrite: '['}}"),
                Error(
                    "spec.http[0].rewrite.uriRegexRewrite.match",
                    "\"HTTPRewrite.UriRegexRewrite.Match\": error parsing regexp: missing closing ]",
                ),
            ),
        ]);
    }

    #[test]
    fn redirect_cases_from_istio() {
        let redirect = |r: &str| http(&format!("{{redirect: {r}}}"));
        let at = "spec.http[0].redirect";
        check_all(&[
            (
                "empty uri and authority",
                &redirect("{}"),
                Error(at, "redirect must specify URI, authority, scheme, or port"),
            ),
            (
                "too small redirect code",
                &redirect("{uri: t, redirectCode: 299}"),
                Error("spec.http[0].redirect.redirectCode", "299 is not a valid redirect code, must be 3xx"),
            ),
            (
                "too large redirect code",
                &redirect("{uri: t, redirectCode: 400}"),
                Error("spec.http[0].redirect.redirectCode", "400 is not a valid redirect code"),
            ),
            ("empty authority", &redirect("{uri: t}"), Valid),
            ("empty uri", &redirect("{authority: t}"), Valid),
            ("empty redirect code", &redirect("{uri: t, authority: t, redirectCode: 0}"), Valid),
            ("normal redirect", &redirect("{uri: t, authority: t, redirectCode: 308}"), Valid),
            ("prefix_rewrite alone", &redirect("{prefixRewrite: /bar}"), Valid),
            (
                "prefix_rewrite with authority",
                &redirect("{authority: foo.example.com, prefixRewrite: /}"),
                Valid,
            ),
            (
                "uri and prefix_rewrite",
                &redirect("{uri: /old, prefixRewrite: /new}"),
                Error(at, "redirect may only specify one of uri or prefix_rewrite"),
            ),
            ("port only", &redirect("{port: 8080}"), Valid),
            ("derived port only", &redirect("{derivePort: FROM_REQUEST_PORT}"), Valid),
            (
                "bad port",
                &redirect("{port: 70000}"),
                Error("spec.http[0].redirect.port", "port number 70000 must be in the range 1..65535"),
            ),
            (
                "port and derived port",
                &redirect("{port: 80, derivePort: FROM_REQUEST_PORT}"),
                Error(at, "only one of port or derivePort may be set"),
            ),
            ("scheme", &redirect("{scheme: https}"), Valid),
            (
                "bad scheme",
                &redirect("{scheme: ftp}"),
                Error(
                    "spec.http[0].redirect.scheme",
                    "invalid redirect scheme, must be \"http\" or \"https\"",
                ),
            ),
        ]);
    }

    #[test]
    fn direct_response_cases_from_istio() {
        let response = |r: &str| http(&format!("{{directResponse: {r}}}"));
        let big = |size: usize| response(&format!("{{status: 200, body: {{string: {}}}}}", "a".repeat(size)));
        check_all(&[
            ("status 200", &response("{status: 200}"), Valid),
            (
                "status 199",
                &response("{status: 199}"),
                Error("spec.http[0].directResponse.status", "HTTP status 199 is not in range 200-599"),
            ),
            (
                "status 601",
                &response("{status: 601}"),
                Error("spec.http[0].directResponse.status", "HTTP status 601"),
            ),
            (
                "no status",
                &response("{body: {string: a}}"),
                Error("spec.http[0].directResponse.status", "HTTP status 0"),
            ),
            ("with string body", &response("{status: 200, body: {string: hello}}"), Valid),
            ("with bytes body", &response("{status: 200, body: {bytes: aGVsbG8=}}"), Valid),
            (
                "with string body over 100kb",
                &big(101 * 1024),
                Warning(
                    "spec.http[0].directResponse.body",
                    "large direct_responses may impact control plane performance",
                ),
            ),
            (
                "with string body over 1mb",
                &big(2 * 1024 * 1024),
                Error(
                    "spec.http[0].directResponse.body",
                    "large direct_responses may impact control plane performance, must be less than 1MB",
                ),
            ),
            (
                "string and bytes",
                &response("{status: 200, body: {string: a, bytes: aGVsbG8=}}"),
                Error("spec.http[0].directResponse.body", "only one of string or bytes may be set"),
            ),
        ]);
    }

    #[test]
    fn destination_cases_from_istio() {
        let dest = |d: &str| http(&format!("{{route: [{{destination: {d}}}]}}"));
        check_all(&[
            (
                "empty",
                &dest("{}"),
                Error("spec.http[0].route[0].destination.host", "empty domain name not allowed"),
            ),
            ("simple", &dest("{host: foo.bar}"), Valid),
            ("full", &dest("{host: foo.bar, subset: shiny, port: {number: 5000}}"), Valid),
            (
                "unnumbered-selector",
                &dest("{host: foo.bar, subset: shiny, port: {}}"),
                Error(
                    "spec.http[0].route[0].destination.port.number",
                    "port number 0 must be in the range 1..65535",
                ),
            ),
            (
                "bad subset",
                &dest("{host: foo.bar, subset: Not_Valid}"),
                Error("spec.http[0].route[0].destination.subset", "subset name is invalid: Not_Valid"),
            ),
        ]);
    }

    #[test]
    fn route_destination_cases_from_istio() {
        let tcp = |routes: &str| format!("hosts: [foo.bar]\ntcp: [{{route: {routes}}}]");
        check_all(&[
            ("simple", &tcp("[{destination: {host: foo.baz}}]"), Valid),
            ("wildcard dash", &tcp("[{destination: {host: '*-foo.baz'}}]"), Valid),
            ("wildcard prefix", &tcp("[{destination: {host: '*foo.baz'}}]"), Valid),
            (
                "wildcard",
                &tcp("[{destination: {host: '*'}}]"),
                Error("spec.tcp[0].route[0].destination.host", "invalid destination host *"),
            ),
            (
                "bad wildcard",
                &tcp("[{destination: {host: 'foo.*'}}]"),
                Error("spec.tcp[0].route[0].destination.host", "invalid"),
            ),
            (
                "bad fqdn",
                &tcp("[{destination: {host: default/baz}}]"),
                Error("spec.tcp[0].route[0].destination.host", "invalid"),
            ),
            (
                "no destination",
                &tcp("[{}]"),
                Error("spec.tcp[0].route[0].destination", "destination is required"),
            ),
            (
                "weighted",
                &tcp(
                    "[{destination: {host: foo.baz.south}, weight: 25}, {destination: {host: foo.baz.east}, weight: 75}]",
                ),
                Valid,
            ),
            (
                "weight < 0",
                &tcp(
                    "[{destination: {host: foo.baz.south}, weight: 5}, {destination: {host: foo.baz.east}, weight: -1}]",
                ),
                Error("spec.tcp[0].route[1].weight", "weight -1 < 0"),
            ),
            (
                "total weight > 100",
                &tcp("[{destination: {host: a.b}, weight: 550}, {destination: {host: c.d}, weight: 500}]"),
                Valid,
            ),
            (
                "total weight = 100",
                &tcp("[{destination: {host: a.b}, weight: 100}, {destination: {host: c.d}, weight: 0}]"),
                Valid,
            ),
            ("weight = 0", &tcp("[{destination: {host: a.b}, weight: 0}]"), Valid),
            (
                "total weight = 0 with multi RouteDestination",
                &tcp("[{destination: {host: a.b}, weight: 0}, {destination: {host: c.d}, weight: 0}]"),
                Error("spec.tcp[0].route", "total destination weight = 0"),
            ),
            (
                "bad destination subnet",
                "hosts: [foo.bar]\ntcp: [{match: [{destinationSubnets: [1.1.1.1/48]}], route: [{destination: {host: a.b}}]}]",
                Error("spec.tcp[0].match[0].destinationSubnets[0]", "1.1.1.1/48 is not a valid CIDR block"),
            ),
            (
                "bad tcp port",
                "hosts: [foo.bar]\ntcp: [{match: [{port: 70000}], route: [{destination: {host: a.b}}]}]",
                Error("spec.tcp[0].match[0].port", "port number 70000 must be in the range 1..65535"),
            ),
            (
                "bad tls destination subnet",
                "hosts: [foo.bar]\ntls: [{match: [{sniHosts: [foo.bar], destinationSubnets: [a.b.c.d]}], route: [{destination: {host: a.b}}]}]",
                Error("spec.tls[0].match[0].destinationSubnets[0]", "a.b.c.d is not a valid IP"),
            ),
        ]);
    }

    #[test]
    fn unreachable_rules_are_warnings() {
        check_all(&[
            (
                "rule after a catch-all",
                "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: a.b}}]}, {route: [{destination: {host: c.d}}]}]",
                Warning(
                    "spec.http[1]",
                    "virtualService rule #1 not used (only the last rule can have no matches)",
                ),
            ),
            (
                "match after a catch-all",
                "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: a.b}}]}, {name: late, match: [{uri: {exact: /}}], route: [{destination: {host: c.d}}]}]",
                Warning(
                    "spec.http[1]",
                    "virtualService rule \"late\" not used (route without matches defined before)",
                ),
            ),
            (
                "duplicate match",
                "hosts: [foo.bar]\nhttp: [{name: a, match: [{name: m, uri: {prefix: /x}}], route: [{destination: {host: a.b}}]}, {name: b, match: [{uri: {prefix: /x}}], route: [{destination: {host: c.d}}]}]",
                Warning(
                    "spec.http[1].match[0]",
                    "virtualService rule \"b\" match #0 is not used (duplicate/overlapping match in rule \"a\")",
                ),
            ),
            (
                "all matches duplicated",
                "hosts: [foo.bar]\nhttp: [{name: a, match: [{uri: {prefix: /x}}], route: [{destination: {host: a.b}}]}, {name: b, match: [{uri: {prefix: /x}}], route: [{destination: {host: c.d}}]}]",
                Warning(
                    "spec.http[1]",
                    "virtualService rule \"b\" not used (all matches used by prior rules)",
                ),
            ),
            (
                "overlap in two rules",
                "hosts: [foo.bar]\nhttp: [{name: a, match: [{uri: {prefix: /api}}], route: [{destination: {host: a.b}}]}, {name: b, match: [{uri: {prefix: /api/v1}}], route: [{destination: {host: c.d}}]}]",
                Warning(
                    "spec.http[1].match[0]",
                    "virtualService rule \"b\" match #0 of prefix /api/v1 is not used (duplicate/overlapping match in rule #0 of prefix /api on \"a\")",
                ),
            ),
            (
                "no overlap with a different method",
                "hosts: [foo.bar]\nhttp: [{match: [{uri: {prefix: /api}, method: {exact: POST}}], route: [{destination: {host: a.b}}]}, {match: [{uri: {prefix: /api/v1}}], route: [{destination: {host: c.d}}]}]",
                Valid,
            ),
            (
                "no overlap with more headers",
                "hosts: [foo.bar]\nhttp: [{match: [{uri: {prefix: /api}}], route: [{destination: {host: a.b}}]}, {match: [{uri: {prefix: /api/v1}, headers: {x: {exact: y}}}], route: [{destination: {host: c.d}}]}]",
                Valid,
            ),
            (
                "duplicate tcp match",
                "hosts: [foo.bar]\ntcp: [{match: [{port: 80}], route: [{destination: {host: a.b}}]}, {match: [{port: 80}], route: [{destination: {host: c.d}}]}]",
                Warning(
                    "spec.tcp[1].match[0]",
                    "virtualService rule #1 match #0 is not used (duplicate/overlapping match in rule #0)",
                ),
            ),
            (
                "tcp rule after a catch-all",
                "hosts: [foo.bar]\ntcp: [{route: [{destination: {host: a.b}}]}, {route: [{destination: {host: c.d}}]}]",
                Warning(
                    "spec.tcp[1]",
                    "virtualService rule #1 not used (only the last rule can have no matches)",
                ),
            ),
            (
                "duplicate tls match",
                "hosts: [foo.bar]\ntls: [{match: [{sniHosts: [foo.bar]}], route: [{destination: {host: a.b}}]}, {match: [{sniHosts: [foo.bar]}], route: [{destination: {host: c.d}}]}]",
                Warning("spec.tls[1]", "virtualService rule #1 not used (all matches used by prior rules)"),
            ),
        ]);
    }

    #[test]
    fn route_semantics_skip_destination_checks() {
        let mut m = meta("vs", "ns1");
        m.annotations.insert(ROUTE_SEMANTICS_ANNOTATION.into(), "gateway".into());
        let vs = spec::<VirtualService>(
            "hosts: [foo.bar]\ngateways: [ns1/gateway~istio-autogenerated-k8s-gateway~foo]\nhttp: [{route: [{destination: {host: '*'}}]}]",
        );
        check("gateway semantics", &run(validate, &m, &vs), Valid);
        check(
            "same without the annotation",
            &run(validate, &meta("vs", "ns1"), &vs),
            Error("spec.http[0].route[0].destination.host", "invalid destination host *"),
        );
    }

    #[test]
    fn namespace_defaults_to_default() {
        let vs = spec::<VirtualService>(
            "hosts: [d]\nexportTo: [.]\nhttp: [{route: [{destination: {host: c, subset: v1}}]}]",
        );
        check("istioctl exportTo=. case", &run(validate, &meta("vs", ""), &vs), Valid);
    }

    #[test]
    fn istioctl_invalid_virtual_service_has_exactly_the_weight_error() {
        let vs = spec::<VirtualService>(
            "http:\n- route:\n  - destination: {host: c, subset: v1}\n    weight: 75\n  - destination: {host: c, subset: v2}\n    weight: -15\n",
        );
        let report = run(validate, &meta("invalid-virtual-service", ""), &vs);
        assert_eq!(report.errors.len(), 1, "{report:?}");
        assert_eq!(report.errors[0].path, "spec.http[0].route[1].weight");
        assert_eq!(report.errors[0].message, "weight -15 < 0");
        assert!(report.warnings.is_empty());
    }

    #[test]
    fn host_matching_follows_istio() {
        assert!(host_matches("foo.com", "foo.com"));
        assert!(!host_matches("foo.com", "bar.com"));
        assert!(host_matches("*.com", "foo.com"));
        assert!(host_matches("bar.com", "*.com"));
        assert!(!host_matches("*.foo.com", "foo.com"));
        assert!(host_matches("*", "foo.com"));
        assert!(host_matches("*", "*.com"));
        assert!(host_subset_of("a.foo.com", "*.foo.com"));
        assert!(host_subset_of("*.a.foo.com", "*.foo.com"));
        assert!(!host_subset_of("*.foo.com", "*.a.foo.com"));
        assert!(!host_subset_of("*.foo.com", "a.foo.com"));
    }
}
