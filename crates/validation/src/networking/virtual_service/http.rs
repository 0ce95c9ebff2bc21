//! HTTP routes: `validateHTTPRoute` and its parts (matches, headers, CORS, fault injection, redirects,
//! direct responses, mirrors, retries, rewrites, destinations).

use api::networking::virtual_service::{
    CorsPolicy, Destination, Headers, HttpDirectResponse, HttpFaultInjection, HttpMatchRequest,
    HttpMirrorPolicy, HttpRedirect, HttpRetry, HttpRewrite, HttpRoute, HttpRouteDestination,
    RouteDestination, StringMatch, cors_policy::UnmatchedPreflights, headers::HeaderOperations,
    http_redirect::RedirectPortSelection,
};

use crate::{
    Report,
    common::{
        self, check_enum, check_oneof, go_quote, grpc_status_code, is_authority_header, is_dns1123_label,
        is_known_http_status, validate_cors_allow_origin, validate_cors_http_header_name,
        validate_cors_http_method, validate_duration, validate_gateway_names, validate_header_name,
        validate_header_value, validate_http_header_operation_name,
        validate_http_header_with_authority_operation_name, validate_http_status, validate_labels,
        validate_percentage, validate_port, validate_string_match, validate_string_match_regexp,
        validate_string_regexp, validate_subset_name, validate_weight, validate_wildcard_domain,
    },
};

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
pub(super) fn validate_http_route(
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
            if grpc_status_code(status).is_none() {
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
    text.parse::<i64>().is_ok_and(is_known_http_status)
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
pub(super) fn validate_route_destinations(
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
mod tests;
