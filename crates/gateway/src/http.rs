//! One HTTPRoute or GRPCRoute rule → one Istio `HTTPRoute` (Istio's `convertHTTPRoute`,
//! `convertGRPCRoute`, `buildHTTPDestination` and the filter helpers), and Istio's route ordering.

use api::{
    Kind,
    gateway_api::{
        BackendObjectReference,
        route::{
            GRPCRouteMatch, GRPCRouteRule, HTTPCORSFilter, HTTPHeaderFilter, HTTPRequestMirrorFilter,
            HTTPRequestRedirectFilter, HTTPRouteMatch, HTTPRouteRule, HTTPURLRewriteFilter,
        },
    },
    networking::virtual_service::{
        CorsPolicy, Headers, HttpDirectResponse, HttpMatchRequest, HttpMirrorPolicy, HttpRedirect, HttpRetry,
        HttpRewrite, HttpRoute, HttpRouteDestination, RegexRewrite, StringMatch,
        cors_policy::UnmatchedPreflights, headers::HeaderOperations, http_redirect::RedirectPortSelection,
    },
    wkt::Duration,
};

use std::collections::BTreeMap;

use crate::{
    Ctx, Fits, Representable, percent, proto_duration,
    refs::{INVALID_CONFIGURATION, INVALID_FILTER, is_invalid_backend},
    status::ConfigError,
    unsigned,
};

/// The result of converting one rule: the route (`None`: the rule is rejected) and the error to
/// report in `ResolvedRefs`.
pub(crate) type RuleResult<T = HttpRoute> = (Option<Fits<T>>, Option<ConfigError>);

/// The kinds of [`StringMatch`] the conversion builds.
#[derive(Clone, Copy)]
enum MatchKind {
    Exact,
    Prefix,
    Regex,
}

fn string_match(kind: MatchKind, value: &str) -> StringMatch {
    let value = Some(value.to_string());
    match kind {
        MatchKind::Exact => StringMatch { exact: value, ..Default::default() },
        MatchKind::Prefix => StringMatch { prefix: value, ..Default::default() },
        MatchKind::Regex => StringMatch { regex: value, ..Default::default() },
    }
}

fn uri_match(m: &HTTPRouteMatch) -> Result<Option<StringMatch>, ConfigError> {
    let Some(path) = &m.path else { return Ok(None) };
    let value = path.value.clone().unwrap_or_else(|| "/".to_string());
    match path.r#type.as_deref().unwrap_or("PathPrefix") {
        "PathPrefix" => {
            let v = if value == "/" { value } else { value.trim_end_matches('/').to_string() };
            let v = if v.is_empty() { "/".to_string() } else { v };
            Ok(Some(string_match(MatchKind::Prefix, &v)))
        }
        "Exact" => Ok(Some(string_match(MatchKind::Exact, &value))),
        "RegularExpression" => Ok(Some(string_match(MatchKind::Regex, &value))),
        t => Err(ConfigError::new(
            INVALID_CONFIGURATION,
            format!("unknown type: {t:?} is not supported Path match type"),
        )),
    }
}

fn keyed_matches<'a>(
    items: impl Iterator<Item = (&'a str, Option<&'a str>, &'a str)>,
    what: &str,
) -> Result<BTreeMap<String, StringMatch>, ConfigError> {
    let mut out = BTreeMap::new();
    for (name, ty, value) in items {
        let m = match ty.unwrap_or("Exact") {
            "Exact" => string_match(MatchKind::Exact, value),
            "RegularExpression" => string_match(MatchKind::Regex, value),
            t => {
                return Err(ConfigError::new(
                    INVALID_CONFIGURATION,
                    format!("unknown type: {t:?} is not supported {what} type"),
                ));
            }
        };
        out.insert(name.to_string(), m);
    }
    Ok(out)
}

fn valid_header_value(v: &str) -> bool {
    v.bytes().all(|c| c == 0x09 || (c >= 0x20 && c != 0x7f))
}

/// Header changes (Istio's `createHeadersFilter`): names lower-cased, the first of a name wins.
fn headers_filter(f: &HTTPHeaderFilter) -> Result<HeaderOperations, ConfigError> {
    for h in f.set.iter().chain(&f.add) {
        if !valid_header_value(&h.value) {
            return Err(ConfigError::new(
                INVALID_FILTER,
                format!("header {:?} value contains invalid characters", h.name),
            ));
        }
    }
    let to_map = |list: &[api::gateway_api::HTTPHeader]| {
        let mut m = BTreeMap::new();
        for h in list {
            m.entry(h.name.to_ascii_lowercase()).or_insert_with(|| h.value.clone());
        }
        m
    };
    Ok(HeaderOperations { set: to_map(&f.set), add: to_map(&f.add), remove: f.remove.clone() })
}

/// Sets the request or response header changes of `headers`.
fn set_headers(headers: &mut Option<Headers>, request: bool, ops: HeaderOperations) {
    let headers = headers.get_or_insert_default();
    if request {
        headers.request = Some(ops);
    } else {
        headers.response = Some(ops);
    }
}

fn redirect(f: &HTTPRequestRedirectFilter, rep: &mut Representable) -> HttpRedirect {
    let mut out = HttpRedirect::default();
    if let Some(code) = f.status_code {
        out.redirect_code = rep.take(unsigned(code));
    }
    if let Some(h) = &f.hostname {
        out.authority.clone_from(h);
    }
    if let Some(s) = &f.scheme {
        out.scheme.clone_from(s);
    }
    match (f.port, &f.scheme) {
        (Some(p), _) => out.port = Some(rep.take(unsigned(p))),
        (None, Some(_)) => out.derive_port = Some(RedirectPortSelection::FromProtocolDefault as i32),
        (None, None) => out.derive_port = Some(RedirectPortSelection::FromRequestPort as i32),
    }
    if let Some(p) = &f.path {
        match p.r#type.as_str() {
            "ReplaceFullPath" => out.uri = p.replace_full_path.clone().unwrap_or_default(),
            "ReplacePrefixMatch" => out.prefix_rewrite = p.replace_prefix_match.clone().unwrap_or_default(),
            _ => {}
        }
    }
    out
}

/// The rewrite of a URLRewrite filter; `None` when it changes nothing (not even an empty hostname).
fn rewrite(f: &HTTPURLRewriteFilter) -> Option<HttpRewrite> {
    let mut out = HttpRewrite::default();
    let mut set = false;
    if let Some(p) = &f.path {
        match p.r#type.as_str() {
            "ReplacePrefixMatch" => {
                let uri = p.replace_prefix_match.clone().unwrap_or_default();
                let uri = uri.trim_end_matches('/');
                out.uri = if uri.is_empty() { "/" } else { uri }.to_string();
                set = true;
            }
            "ReplaceFullPath" => {
                out.uri_regex_rewrite = Some(RegexRewrite {
                    r#match: "/.*".to_string(),
                    rewrite: p.replace_full_path.clone().unwrap_or_default(),
                });
                set = true;
            }
            _ => {}
        }
    }
    if let Some(h) = &f.hostname {
        out.authority.clone_from(h);
        set = true;
    }
    set.then_some(out)
}

/// Go's `regexp.QuoteMeta`.
fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn cors(f: &HTTPCORSFilter) -> CorsPolicy {
    let mut origins = Vec::new();
    for o in f.allow_origins.iter().filter(|o| !o.is_empty()) {
        if o == "*" {
            origins.push(string_match(MatchKind::Regex, r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s?#]+$"));
        } else if !o.contains('*') {
            origins.push(string_match(MatchKind::Exact, o));
        } else if o.matches('*').count() == 1 && o.ends_with('*') {
            origins.push(string_match(MatchKind::Prefix, o.trim_end_matches('*')));
        } else {
            origins
                .push(string_match(MatchKind::Regex, &format!("^{}$", quote_meta(o).replace("\\*", ".*"))));
        }
    }
    CorsPolicy {
        allow_origins: origins,
        allow_credentials: (f.allow_credentials == Some(true)).then_some(true),
        allow_methods: f.allow_methods.clone(),
        allow_headers: f.allow_headers.clone(),
        expose_headers: f.expose_headers.clone(),
        max_age: f.max_age.filter(|a| *a > 0).map(|age| Duration { seconds: i64::from(age), nanos: 0 }),
        unmatched_preflights: UnmatchedPreflights::Ignore as i32,
        ..Default::default()
    }
}

/// A Gateway API duration (`1h2m3s4ms`) → seconds as Istio prints a protobuf Duration (`0.003s`).
/// `None` when not a valid duration (Istio ignores it then).
pub(crate) fn duration(text: &str) -> Option<String> {
    let mut total_ms: u128 = 0;
    let mut number = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u128 = number.parse().ok()?;
        number.clear();
        let unit_ms = match c {
            'h' => 3_600_000,
            's' => 1000,
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                1
            }
            'm' => 60_000,
            _ => return None,
        };
        total_ms += n * unit_ms;
    }
    if !number.is_empty() {
        return None;
    }
    if total_ms == 0 {
        return Some("0s".into());
    }
    let secs = total_ms / 1000;
    let ms = total_ms % 1000;
    Some(if ms == 0 {
        format!("{secs}s")
    } else {
        format!("{secs}.{}s", format!("{ms:03}").trim_end_matches('0'))
    })
}

fn mirror(
    ctx: &Ctx<'_>,
    f: &HTTPRequestMirrorFilter,
    ns: &str,
    enforce: bool,
    kind: Kind,
) -> Result<Fits<HttpMirrorPolicy>, ConfigError> {
    let dst = ctx.destination(&f.backend_ref, ns, enforce, kind).map_err(|(_, e)| e)?;
    let percentage = if let Some(fr) = &f.fraction {
        Some(100.0 * f64::from(fr.numerator) / f64::from(fr.denominator.unwrap_or(100)))
    } else {
        f.percent.map(f64::from)
    };
    let mut rep = Representable::default();
    let destination = Some(rep.take(dst));
    let percentage = percentage.map(|p| rep.take(percent(p)));
    Ok(rep.finish(HttpMirrorPolicy { destination, percentage }))
}

/// A backend, its weight, and its filters (type, header changes).
type WeightedBackend<'a> =
    (BackendObjectReference, Option<i32>, Vec<(&'a str, Option<&'a HTTPHeaderFilter>)>);

/// Weighted destinations (Istio's `buildHTTPDestination`): weight 0 backends are dropped, a single
/// backend gets no weight. Each backend's own header filters apply.
fn destinations(
    ctx: &Ctx<'_>,
    refs: &[WeightedBackend<'_>],
    ns: &str,
    enforce: bool,
    kind: Kind,
    rep: &mut Representable,
) -> Result<(Vec<HttpRouteDestination>, Option<ConfigError>), ConfigError> {
    let action: Vec<_> = refs.iter().filter(|r| r.1.unwrap_or(1) != 0).collect();
    let single = action.len() == 1;
    let mut invalid = None;
    let mut out = Vec::new();
    for (to, weight, filters) in action {
        let dst = match ctx.destination(to, ns, enforce, kind) {
            Ok(d) => d,
            Err((Some(d), e)) if is_invalid_backend(&e) => {
                invalid = Some(e);
                d
            }
            Err((_, e)) => return Err(e),
        };
        let mut rd = HttpRouteDestination { destination: Some(rep.take(dst)), ..Default::default() };
        if !single {
            rd.weight = weight.unwrap_or(1);
        }
        for (ty, f) in filters {
            let request = match *ty {
                "RequestHeaderModifier" => true,
                "ResponseHeaderModifier" => false,
                other => {
                    return Err(ConfigError::new(
                        INVALID_FILTER,
                        format!("unsupported filter type {other:?}"),
                    ));
                }
            };
            if let Some(f) = f {
                set_headers(&mut rd.headers, request, headers_filter(f)?);
            }
        }
        out.push(rd);
    }
    Ok((out, invalid))
}

/// Applies a RequestHeaderModifier or ResponseHeaderModifier filter of a rule to `vs`.
fn header_modifier(
    vs: &mut HttpRoute,
    request: bool,
    filter: Option<&HTTPHeaderFilter>,
) -> Result<(), ConfigError> {
    if let Some(filter) = filter {
        set_headers(&mut vs.headers, request, headers_filter(filter)?);
    }
    Ok(())
}

/// The `match` of an HTTPRoute match.
fn http_match(m: &HTTPRouteMatch) -> Result<HttpMatchRequest, ConfigError> {
    Ok(HttpMatchRequest {
        uri: uri_match(m)?,
        headers: keyed_matches(
            m.headers.iter().map(|h| (h.name.as_str(), h.r#type.as_deref(), h.value.as_str())),
            "HeaderMatch",
        )?,
        query_params: keyed_matches(
            m.query_params.iter().map(|h| (h.name.as_str(), h.r#type.as_deref(), h.value.as_str())),
            "QueryParams",
        )?,
        method: m.method.as_deref().map(|method| string_match(MatchKind::Exact, method)),
        ..Default::default()
    })
}

/// The retry policy and timeouts of an HTTPRoute rule.
fn retries_and_timeouts(rule: &HTTPRouteRule, vs: &mut HttpRoute, rep: &mut Representable) {
    if let Some(r) = &rule.retry {
        let mut retry_on = vec!["connect-failure", "refused-stream", "unavailable", "cancelled"]
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>();
        retry_on.extend(r.codes.iter().map(i32::to_string));
        let attempts = r.attempts.unwrap_or(2);
        let mut retries = HttpRetry { attempts, ..Default::default() };
        if attempts != 0 {
            retries.retry_on = retry_on.join(",");
        }
        if let Some(b) = r.backoff.as_deref().and_then(duration) {
            retries.backoff = Some(rep.take(proto_duration(&b)));
        }
        vs.retries = Some(retries);
    }
    if let Some(t) = &rule.timeouts {
        if let Some(d) = t.request.as_deref().and_then(duration).filter(|d| d != "0s") {
            vs.timeout = Some(rep.take(proto_duration(&d)));
        }
        if let Some(d) = t.backend_request.as_deref().and_then(duration).filter(|d| d != "0s") {
            let d = Some(rep.take(proto_duration(&d)));
            match &mut vs.retries {
                Some(r) => r.per_try_timeout = d,
                None => vs.timeout = d,
            }
        }
    }
}

/// Converts one HTTPRoute rule restricted to at most one match (Istio splits rules per match).
pub(crate) fn convert_http_rule(
    ctx: &Ctx<'_>,
    rule: &HTTPRouteRule,
    matched: Option<&HTTPRouteMatch>,
    route: &model::Config,
    pos: usize,
    enforce: bool,
) -> RuleResult {
    let ns = &route.meta.namespace;
    let mut rep = Representable::default();
    let name = rule.name.clone().unwrap_or_else(|| format!("{ns}.{}.{pos}", route.meta.name));
    let mut vs = HttpRoute { name, ..Default::default() };
    if let Some(m) = matched {
        match http_match(m) {
            Ok(m) => vs.r#match = vec![m],
            Err(e) => return (None, Some(e)),
        }
    }
    let mut mirror_error = None;
    let mut has_redirect = false;
    for f in &rule.filters {
        match f.r#type.as_str() {
            "RequestHeaderModifier" => {
                if let Err(e) = header_modifier(&mut vs, true, f.request_header_modifier.as_ref()) {
                    return (None, Some(e));
                }
            }
            "ResponseHeaderModifier" => {
                if let Err(e) = header_modifier(&mut vs, false, f.response_header_modifier.as_ref()) {
                    return (None, Some(e));
                }
            }
            "RequestRedirect" => {
                if let Some(r) = &f.request_redirect {
                    vs.redirect = Some(redirect(r, &mut rep));
                    has_redirect = true;
                }
            }
            "RequestMirror" => {
                if let Some(m) = &f.request_mirror {
                    match mirror(ctx, m, ns, enforce, Kind::HTTPRoute) {
                        Ok(m) => vs.mirrors.push(rep.take(m)),
                        Err(e) => mirror_error = Some(e),
                    }
                }
            }
            "URLRewrite" => vs.rewrite = f.url_rewrite.as_ref().and_then(rewrite),
            "CORS" => {
                if let Some(c) = &f.cors {
                    vs.cors_policy = Some(cors(c));
                }
            }
            other => {
                return (
                    None,
                    Some(ConfigError::new(INVALID_FILTER, format!("unsupported filter type {other:?}"))),
                );
            }
        }
    }
    retries_and_timeouts(rule, &mut vs, &mut rep);
    let weight_sum: i32 = rule.backend_refs.iter().map(|b| b.weight.unwrap_or(1)).sum();
    if weight_sum == 0 && !has_redirect {
        vs.direct_response = Some(HttpDirectResponse { status: 500, body: None });
        return (Some(rep.finish(vs)), mirror_error);
    }
    if rule.backend_refs.is_empty() {
        return (Some(rep.finish(vs)), mirror_error);
    }
    let refs: Vec<_> = rule
        .backend_refs
        .iter()
        .map(|b| {
            let filters = b
                .filters
                .iter()
                .map(|f| {
                    let hf = match f.r#type.as_str() {
                        "RequestHeaderModifier" => f.request_header_modifier.as_ref(),
                        "ResponseHeaderModifier" => f.response_header_modifier.as_ref(),
                        _ => None,
                    };
                    (f.r#type.as_str(), hf)
                })
                .collect();
            (b.object_ref(), b.weight, filters)
        })
        .collect();
    match destinations(ctx, &refs, ns, enforce, Kind::HTTPRoute, &mut rep) {
        Ok((route_dsts, invalid)) => {
            vs.route = route_dsts;
            (Some(rep.finish(vs)), invalid.or(mirror_error))
        }
        Err(e) => (None, Some(e)),
    }
}

fn grpc_uri_match(m: &GRPCRouteMatch) -> Result<Option<StringMatch>, ConfigError> {
    let Some(method) = &m.method else { return Ok(None) };
    let (service, name) = (method.service.as_deref(), method.method.as_deref());
    if service.is_none() && name.is_none() {
        return Err(ConfigError::new(
            INVALID_CONFIGURATION,
            "gRPC match must have method or service defined",
        ));
    }
    use MatchKind::{Exact, Prefix, Regex};
    Ok(Some(match (method.r#type.as_deref().unwrap_or("Exact"), service, name) {
        ("Exact", Some(s), None) => string_match(Prefix, &format!("/{s}/")),
        ("Exact" | "RegularExpression", None, Some(n)) => string_match(Regex, &format!("/[^/]+/{n}")),
        ("Exact", Some(s), Some(n)) => string_match(Exact, &format!("/{s}/{n}")),
        ("RegularExpression", Some(s), None) => string_match(Regex, &format!("/{s}/.+")),
        ("RegularExpression", Some(s), Some(n)) => string_match(Regex, &format!("/{s}/{n}")),
        (t, _, _) => {
            return Err(ConfigError::new(
                INVALID_CONFIGURATION,
                format!("unknown type: {t:?} is not supported Path match type"),
            ));
        }
    }))
}

/// The `match` of a GRPCRoute match.
fn grpc_match(m: &GRPCRouteMatch) -> Result<HttpMatchRequest, ConfigError> {
    Ok(HttpMatchRequest {
        uri: grpc_uri_match(m)?,
        headers: keyed_matches(
            m.headers.iter().map(|h| (h.name.as_str(), h.r#type.as_deref(), h.value.as_str())),
            "HeaderMatch",
        )?,
        ..Default::default()
    })
}

/// Converts one GRPCRoute rule restricted to at most one match.
pub(crate) fn convert_grpc_rule(
    ctx: &Ctx<'_>,
    rule: &GRPCRouteRule,
    matched: Option<&GRPCRouteMatch>,
    route: &model::Config,
    pos: usize,
    enforce: bool,
) -> RuleResult {
    let ns = &route.meta.namespace;
    let mut rep = Representable::default();
    let name = rule.name.clone().unwrap_or_else(|| format!("{ns}.{}.{pos}", route.meta.name));
    let mut vs = HttpRoute { name, ..Default::default() };
    if let Some(m) = matched {
        match grpc_match(m) {
            Ok(m) => vs.r#match = vec![m],
            Err(e) => return (None, Some(e)),
        }
    }
    let mut mirror_error = None;
    for f in &rule.filters {
        match f.r#type.as_str() {
            "RequestHeaderModifier" => {
                if let Err(e) = header_modifier(&mut vs, true, f.request_header_modifier.as_ref()) {
                    return (None, Some(e));
                }
            }
            "ResponseHeaderModifier" => {
                if let Err(e) = header_modifier(&mut vs, false, f.response_header_modifier.as_ref()) {
                    return (None, Some(e));
                }
            }
            "RequestMirror" => {
                if let Some(m) = &f.request_mirror {
                    match mirror(ctx, m, ns, enforce, Kind::GRPCRoute) {
                        Ok(m) => vs.mirrors.push(rep.take(m)),
                        Err(e) => mirror_error = Some(e),
                    }
                }
            }
            other => {
                return (
                    None,
                    Some(ConfigError::new(INVALID_FILTER, format!("unsupported filter type {other:?}"))),
                );
            }
        }
    }
    let weight_sum: i32 = rule.backend_refs.iter().map(|b| b.weight.unwrap_or(1)).sum();
    if weight_sum == 0 {
        vs.direct_response = Some(HttpDirectResponse { status: 500, body: None });
        return (Some(rep.finish(vs)), mirror_error);
    }
    let refs: Vec<_> = rule
        .backend_refs
        .iter()
        .map(|b| {
            let filters = b
                .filters
                .iter()
                .map(|f| {
                    let hf = match f.r#type.as_str() {
                        "RequestHeaderModifier" => f.request_header_modifier.as_ref(),
                        "ResponseHeaderModifier" => f.response_header_modifier.as_ref(),
                        _ => None,
                    };
                    (f.r#type.as_str(), hf)
                })
                .collect();
            (b.object_ref(), b.weight, filters)
        })
        .collect();
    match destinations(ctx, &refs, ns, enforce, Kind::GRPCRoute, &mut rep) {
        Ok((route_dsts, invalid)) => {
            vs.route = route_dsts;
            (Some(rep.finish(vs)), invalid.or(mirror_error))
        }
        Err(e) => (None, Some(e)),
    }
}

/// The rank of a match's path for ordering: exact, prefix, regex, then none; and the path's length.
fn uri_rank(m: &HttpMatchRequest) -> (i32, i64) {
    let Some(u) = &m.uri else { return (-1, 0) };
    for (rank, value) in [(3, &u.exact), (2, &u.prefix), (1, &u.regex)] {
        if let Some(s) = value {
            return (rank, s.len() as i64);
        }
    }
    (-1, -1)
}

/// Istio's `sortHTTPRoutes` (stable): routes without a match last; then exact before prefix before
/// regex paths, longer paths first, a method match first, more headers, more query parameters.
pub(crate) fn sort_http_routes(routes: &mut [HttpRoute]) {
    routes.sort_by(|a, b| {
        use std::cmp::Ordering;
        match (a.r#match.first(), b.r#match.first()) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(m1), Some(m2)) => {
                let (r1, l1) = uri_rank(m1);
                let (r2, l2) = uri_rank(m2);
                r2.cmp(&r1)
                    .then(l2.cmp(&l1))
                    .then(m2.method.is_some().cmp(&m1.method.is_some()))
                    .then(m2.headers.len().cmp(&m1.headers.len()))
                    .then(m2.query_params.len().cmp(&m1.query_params.len()))
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::duration;

    #[test]
    fn durations_print_as_istio() {
        assert_eq!(duration("3ms").as_deref(), Some("0.003s"));
        assert_eq!(duration("1h2m").as_deref(), Some("3720s"));
        assert_eq!(duration("1500ms").as_deref(), Some("1.5s"));
        assert_eq!(duration("0s").as_deref(), Some("0s"));
        assert_eq!(duration("5x"), None);
    }
}
