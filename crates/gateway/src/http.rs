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
};
use serde_json::{Map, Value, json};

use crate::{
    Ctx,
    refs::{INVALID_CONFIGURATION, INVALID_FILTER, is_invalid_backend},
    status::ConfigError,
};

/// The result of converting one rule: the route (`None`: the rule is rejected) and the error to
/// report in `ResolvedRefs`.
pub(crate) type RuleResult = (Option<Value>, Option<ConfigError>);

fn string_match(kind: &str, value: &str) -> Value {
    json!({ kind: value })
}

fn uri_match(m: &HTTPRouteMatch) -> Result<Option<Value>, ConfigError> {
    let Some(path) = &m.path else { return Ok(None) };
    let value = path.value.clone().unwrap_or_else(|| "/".to_string());
    match path.r#type.as_deref().unwrap_or("PathPrefix") {
        "PathPrefix" => {
            let v = if value == "/" { value } else { value.trim_end_matches('/').to_string() };
            let v = if v.is_empty() { "/".to_string() } else { v };
            Ok(Some(string_match("prefix", &v)))
        }
        "Exact" => Ok(Some(string_match("exact", &value))),
        "RegularExpression" => Ok(Some(string_match("regex", &value))),
        t => Err(ConfigError::new(
            INVALID_CONFIGURATION,
            format!("unknown type: {t:?} is not supported Path match type"),
        )),
    }
}

fn keyed_matches<'a>(
    items: impl Iterator<Item = (&'a str, Option<&'a str>, &'a str)>,
    what: &str,
) -> Result<Option<Value>, ConfigError> {
    let mut out = Map::new();
    for (name, ty, value) in items {
        let m = match ty.unwrap_or("Exact") {
            "Exact" => string_match("exact", value),
            "RegularExpression" => string_match("regex", value),
            t => {
                return Err(ConfigError::new(
                    INVALID_CONFIGURATION,
                    format!("unknown type: {t:?} is not supported {what} type"),
                ));
            }
        };
        out.insert(name.to_string(), m);
    }
    Ok(if out.is_empty() { None } else { Some(Value::Object(out)) })
}

fn valid_header_value(v: &str) -> bool {
    v.bytes().all(|c| c == 0x09 || (c >= 0x20 && c != 0x7f))
}

/// Header changes (Istio's `createHeadersFilter`): names lower-cased, the first of a name wins.
fn headers_filter(f: &HTTPHeaderFilter) -> Result<Value, ConfigError> {
    for h in f.set.iter().chain(&f.add) {
        if !valid_header_value(&h.value) {
            return Err(ConfigError::new(
                INVALID_FILTER,
                format!("header {:?} value contains invalid characters", h.name),
            ));
        }
    }
    let to_map = |list: &[api::gateway_api::HTTPHeader]| {
        let mut m = Map::new();
        for h in list {
            m.entry(h.name.to_ascii_lowercase()).or_insert_with(|| Value::String(h.value.clone()));
        }
        m
    };
    let mut out = Map::new();
    let add = to_map(&f.add);
    if !add.is_empty() {
        out.insert("add".into(), Value::Object(add));
    }
    if !f.remove.is_empty() {
        out.insert("remove".into(), json!(f.remove));
    }
    let set = to_map(&f.set);
    if !set.is_empty() {
        out.insert("set".into(), Value::Object(set));
    }
    Ok(Value::Object(out))
}

fn redirect(f: &HTTPRequestRedirectFilter) -> Value {
    let mut out = Map::new();
    if let Some(code) = f.status_code {
        out.insert("redirectCode".into(), code.into());
    }
    if let Some(h) = &f.hostname {
        out.insert("authority".into(), h.clone().into());
    }
    if let Some(s) = &f.scheme {
        out.insert("scheme".into(), s.clone().into());
    }
    match (f.port, &f.scheme) {
        (Some(p), _) => {
            out.insert("port".into(), p.into());
        }
        (None, Some(_)) => {
            out.insert("derivePort".into(), "FROM_PROTOCOL_DEFAULT".into());
        }
        (None, None) => {
            out.insert("derivePort".into(), "FROM_REQUEST_PORT".into());
        }
    }
    if let Some(p) = &f.path {
        match p.r#type.as_str() {
            "ReplaceFullPath" => {
                out.insert("uri".into(), p.replace_full_path.clone().unwrap_or_default().into());
            }
            "ReplacePrefixMatch" => {
                out.insert("prefixRewrite".into(), p.replace_prefix_match.clone().unwrap_or_default().into());
            }
            _ => {}
        }
    }
    Value::Object(out)
}

fn rewrite(f: &HTTPURLRewriteFilter) -> Option<Value> {
    let mut out = Map::new();
    if let Some(p) = &f.path {
        match p.r#type.as_str() {
            "ReplacePrefixMatch" => {
                let uri = p.replace_prefix_match.clone().unwrap_or_default();
                let uri = uri.trim_end_matches('/');
                out.insert("uri".into(), if uri.is_empty() { "/" } else { uri }.into());
            }
            "ReplaceFullPath" => {
                out.insert(
                    "uriRegexRewrite".into(),
                    json!({"match": "/.*", "rewrite": p.replace_full_path.clone().unwrap_or_default()}),
                );
            }
            _ => {}
        }
    }
    if let Some(h) = &f.hostname {
        out.insert("authority".into(), h.clone().into());
    }
    if out.is_empty() { None } else { Some(Value::Object(out)) }
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

fn cors(f: &HTTPCORSFilter) -> Value {
    let mut origins = Vec::new();
    for o in f.allow_origins.iter().filter(|o| !o.is_empty()) {
        if o == "*" {
            origins.push(string_match("regex", r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s?#]+$"));
        } else if !o.contains('*') {
            origins.push(string_match("exact", o));
        } else if o.matches('*').count() == 1 && o.ends_with('*') {
            origins.push(string_match("prefix", o.trim_end_matches('*')));
        } else {
            origins.push(string_match("regex", &format!("^{}$", quote_meta(o).replace("\\*", ".*"))));
        }
    }
    let mut out = Map::new();
    if !origins.is_empty() {
        out.insert("allowOrigins".into(), origins.into());
    }
    if f.allow_credentials == Some(true) {
        out.insert("allowCredentials".into(), true.into());
    }
    for (field, list) in [
        ("allowMethods", &f.allow_methods),
        ("allowHeaders", &f.allow_headers),
        ("exposeHeaders", &f.expose_headers),
    ] {
        if !list.is_empty() {
            out.insert(field.into(), json!(list));
        }
    }
    if let Some(age) = f.max_age.filter(|a| *a > 0) {
        out.insert("maxAge".into(), format!("{age}s").into());
    }
    out.insert("unmatchedPreflights".into(), "IGNORE".into());
    Value::Object(out)
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
) -> Result<Value, ConfigError> {
    let dst = ctx.destination(&f.backend_ref, ns, enforce, kind).map_err(|(_, e)| e)?;
    let mut out = json!({"destination": dst});
    if let Some(fr) = &f.fraction {
        let value = 100.0 * f64::from(fr.numerator) / f64::from(fr.denominator.unwrap_or(100));
        out["percentage"] = json!({"value": value});
    } else if let Some(p) = f.percent {
        out["percentage"] = json!({"value": f64::from(p)});
    }
    Ok(out)
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
) -> Result<(Vec<Value>, Option<ConfigError>), ConfigError> {
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
        let mut rd = json!({"destination": dst});
        if !single {
            rd["weight"] = weight.unwrap_or(1).into();
        }
        for (ty, f) in filters {
            let field = match *ty {
                "RequestHeaderModifier" => "request",
                "ResponseHeaderModifier" => "response",
                other => {
                    return Err(ConfigError::new(
                        INVALID_FILTER,
                        format!("unsupported filter type {other:?}"),
                    ));
                }
            };
            if let Some(f) = f {
                rd["headers"][field] = headers_filter(f)?;
            }
        }
        out.push(rd);
    }
    Ok((out, invalid))
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
    let mut vs = Map::new();
    let name = rule.name.clone().unwrap_or_else(|| format!("{ns}.{}.{pos}", route.meta.name));
    vs.insert("name".into(), name.into());
    if let Some(m) = matched {
        let built = (|| -> Result<Value, ConfigError> {
            let mut out = Map::new();
            if let Some(u) = uri_match(m)? {
                out.insert("uri".into(), u);
            }
            let headers = keyed_matches(
                m.headers.iter().map(|h| (h.name.as_str(), h.r#type.as_deref(), h.value.as_str())),
                "HeaderMatch",
            )?;
            if let Some(h) = headers {
                out.insert("headers".into(), h);
            }
            let qp = keyed_matches(
                m.query_params.iter().map(|h| (h.name.as_str(), h.r#type.as_deref(), h.value.as_str())),
                "QueryParams",
            )?;
            if let Some(q) = qp {
                out.insert("queryParams".into(), q);
            }
            if let Some(method) = &m.method {
                out.insert("method".into(), string_match("exact", method));
            }
            Ok(Value::Object(out))
        })();
        match built {
            Ok(m) => {
                vs.insert("match".into(), json!([m]));
            }
            Err(e) => return (None, Some(e)),
        }
    }
    let mut mirror_error = None;
    let mut has_redirect = false;
    for f in &rule.filters {
        match f.r#type.as_str() {
            "RequestHeaderModifier" | "ResponseHeaderModifier" => {
                let (field, filter) = if f.r#type == "RequestHeaderModifier" {
                    ("request", &f.request_header_modifier)
                } else {
                    ("response", &f.response_header_modifier)
                };
                let Some(filter) = filter else { continue };
                match headers_filter(filter) {
                    Ok(h) => {
                        let headers = vs.entry("headers").or_insert_with(|| json!({}));
                        headers[field] = h;
                    }
                    Err(e) => return (None, Some(e)),
                }
            }
            "RequestRedirect" => {
                if let Some(r) = &f.request_redirect {
                    vs.insert("redirect".into(), redirect(r));
                    has_redirect = true;
                }
            }
            "RequestMirror" => {
                if let Some(m) = &f.request_mirror {
                    match mirror(ctx, m, ns, enforce, Kind::HTTPRoute) {
                        Ok(m) => vs
                            .entry("mirrors")
                            .or_insert_with(|| json!([]))
                            .as_array_mut()
                            .expect("array")
                            .push(m),
                        Err(e) => mirror_error = Some(e),
                    }
                }
            }
            "URLRewrite" => {
                if let Some(r) = f.url_rewrite.as_ref().and_then(rewrite) {
                    vs.insert("rewrite".into(), r);
                } else {
                    vs.remove("rewrite");
                }
            }
            "CORS" => {
                if let Some(c) = &f.cors {
                    vs.insert("corsPolicy".into(), cors(c));
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
    if let Some(r) = &rule.retry {
        let mut retry_on = vec!["connect-failure", "refused-stream", "unavailable", "cancelled"]
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>();
        retry_on.extend(r.codes.iter().map(i32::to_string));
        let attempts = r.attempts.unwrap_or(2);
        let mut retries = json!({"attempts": attempts});
        if attempts != 0 {
            retries["retryOn"] = retry_on.join(",").into();
        }
        if let Some(b) = r.backoff.as_deref().and_then(duration) {
            retries["backoff"] = b.into();
        }
        vs.insert("retries".into(), retries);
    }
    if let Some(t) = &rule.timeouts {
        if let Some(d) = t.request.as_deref().and_then(duration).filter(|d| d != "0s") {
            vs.insert("timeout".into(), d.into());
        }
        if let Some(d) = t.backend_request.as_deref().and_then(duration).filter(|d| d != "0s") {
            match vs.get_mut("retries") {
                Some(r) => r["perTryTimeout"] = d.into(),
                None => {
                    vs.insert("timeout".into(), d.into());
                }
            }
        }
    }
    let weight_sum: i32 = rule.backend_refs.iter().map(|b| b.weight.unwrap_or(1)).sum();
    if weight_sum == 0 && !has_redirect {
        vs.insert("directResponse".into(), json!({"status": 500}));
        return (Some(Value::Object(vs)), mirror_error);
    }
    if rule.backend_refs.is_empty() {
        return (Some(Value::Object(vs)), mirror_error);
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
    match destinations(ctx, &refs, ns, enforce, Kind::HTTPRoute) {
        Ok((route_dsts, invalid)) => {
            vs.insert("route".into(), route_dsts.into());
            (Some(Value::Object(vs)), invalid.or(mirror_error))
        }
        Err(e) => (None, Some(e)),
    }
}

fn grpc_uri_match(m: &GRPCRouteMatch) -> Result<Option<Value>, ConfigError> {
    let Some(method) = &m.method else { return Ok(None) };
    let (service, name) = (method.service.as_deref(), method.method.as_deref());
    if service.is_none() && name.is_none() {
        return Err(ConfigError::new(
            INVALID_CONFIGURATION,
            "gRPC match must have method or service defined",
        ));
    }
    Ok(Some(match (method.r#type.as_deref().unwrap_or("Exact"), service, name) {
        ("Exact", Some(s), None) => string_match("prefix", &format!("/{s}/")),
        ("Exact" | "RegularExpression", None, Some(n)) => string_match("regex", &format!("/[^/]+/{n}")),
        ("Exact", Some(s), Some(n)) => string_match("exact", &format!("/{s}/{n}")),
        ("RegularExpression", Some(s), None) => string_match("regex", &format!("/{s}/.+")),
        ("RegularExpression", Some(s), Some(n)) => string_match("regex", &format!("/{s}/{n}")),
        (t, _, _) => {
            return Err(ConfigError::new(
                INVALID_CONFIGURATION,
                format!("unknown type: {t:?} is not supported Path match type"),
            ));
        }
    }))
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
    let mut vs = Map::new();
    let name = rule.name.clone().unwrap_or_else(|| format!("{ns}.{}.{pos}", route.meta.name));
    vs.insert("name".into(), name.into());
    if let Some(m) = matched {
        let mut out = Map::new();
        match grpc_uri_match(m) {
            Ok(Some(u)) => {
                out.insert("uri".into(), u);
            }
            Ok(None) => {}
            Err(e) => return (None, Some(e)),
        }
        match keyed_matches(
            m.headers.iter().map(|h| (h.name.as_str(), h.r#type.as_deref(), h.value.as_str())),
            "HeaderMatch",
        ) {
            Ok(Some(h)) => {
                out.insert("headers".into(), h);
            }
            Ok(None) => {}
            Err(e) => return (None, Some(e)),
        }
        vs.insert("match".into(), json!([out]));
    }
    let mut mirror_error = None;
    for f in &rule.filters {
        match f.r#type.as_str() {
            "RequestHeaderModifier" | "ResponseHeaderModifier" => {
                let (field, filter) = if f.r#type == "RequestHeaderModifier" {
                    ("request", &f.request_header_modifier)
                } else {
                    ("response", &f.response_header_modifier)
                };
                let Some(filter) = filter else { continue };
                match headers_filter(filter) {
                    Ok(h) => {
                        let headers = vs.entry("headers").or_insert_with(|| json!({}));
                        headers[field] = h;
                    }
                    Err(e) => return (None, Some(e)),
                }
            }
            "RequestMirror" => {
                if let Some(m) = &f.request_mirror {
                    match mirror(ctx, m, ns, enforce, Kind::GRPCRoute) {
                        Ok(m) => vs
                            .entry("mirrors")
                            .or_insert_with(|| json!([]))
                            .as_array_mut()
                            .expect("array")
                            .push(m),
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
        vs.insert("directResponse".into(), json!({"status": 500}));
        return (Some(Value::Object(vs)), mirror_error);
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
    match destinations(ctx, &refs, ns, enforce, Kind::GRPCRoute) {
        Ok((route_dsts, invalid)) => {
            vs.insert("route".into(), route_dsts.into());
            (Some(Value::Object(vs)), invalid.or(mirror_error))
        }
        Err(e) => (None, Some(e)),
    }
}

fn uri_rank(m: &Value) -> (i32, i64) {
    let Some(u) = m.get("uri") else { return (-1, 0) };
    for (rank, key) in [(3, "exact"), (2, "prefix"), (1, "regex")] {
        if let Some(s) = u.get(key).and_then(Value::as_str) {
            return (rank, s.len() as i64);
        }
    }
    (-1, -1)
}

fn count(m: &Value, field: &str) -> usize {
    m.get(field).and_then(Value::as_object).map_or(0, Map::len)
}

/// Istio's `sortHTTPRoutes` (stable): routes without a match last; then exact before prefix before
/// regex paths, longer paths first, a method match first, more headers, more query parameters.
pub(crate) fn sort_http_routes(routes: &mut [Value]) {
    routes.sort_by(|a, b| {
        use std::cmp::Ordering;
        let ma = a.get("match").and_then(|m| m.get(0));
        let mb = b.get("match").and_then(|m| m.get(0));
        match (ma, mb) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(m1), Some(m2)) => {
                let (r1, l1) = uri_rank(m1);
                let (r2, l2) = uri_rank(m2);
                r2.cmp(&r1)
                    .then(l2.cmp(&l1))
                    .then(m2.get("method").is_some().cmp(&m1.get("method").is_some()))
                    .then(count(m2, "headers").cmp(&count(m1, "headers")))
                    .then(count(m2, "queryParams").cmp(&count(m1, "queryParams")))
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
