//! Which matches apply to the route table being built (`port`, `gateways`, `sourceLabels`,
//! `sourceNamespace`), and Istio's `TranslateRouteMatch`: URI, header, query parameter and JWT claim
//! matches.

use api::networking::virtual_service::{HttpMatchRequest, StringMatch};
use envoy_types::pb::{
    envoy::{
        config::route::v3::{
            HeaderMatcher, QueryParameterMatcher, RouteMatch, header_matcher::HeaderMatchSpecifier,
            query_parameter_matcher::QueryParameterMatchSpecifier, route_match::PathSpecifier,
        },
        r#type::matcher::v3::{
            ListMatcher, MetadataMatcher, OrMatcher, RegexMatcher, StringMatcher, ValueMatcher, list_matcher,
            metadata_matcher, string_matcher, value_matcher,
        },
    },
    google::protobuf::BoolValue,
};
use model::{
    ConfigKey,
    push::{MESH_GATEWAY, resolve_gateway_name},
};

use super::{Prov, RouteContext, string_match_path};

/// Filter that holds verified JWT payloads (`@request.auth.claims.*` header matches read it).
const JWT_FILTER: &str = "envoy.filters.http.jwt_authn";
/// Key of the JWT payload in that filter's dynamic metadata.
const JWT_PAYLOAD_KEY: &str = "payload";
/// The header-name prefix Istio reads as a JWT claim match.
const JWT_CLAIM_PREFIX: &str = "@request.auth.claims";

/// Istio's `TranslateRoute` preconditions: the match's `port` equals the route table's port (when both
/// are set), and `sourceMatchHTTP`: one of the match's `gateways` is a gateway of this route table, or
/// (without `gateways`) the proxy carries the `sourceLabels` and is in `sourceNamespace`.
pub(super) fn match_applies(m: &HttpMatchRequest, key: &ConfigKey, ctx: &RouteContext<'_>) -> bool {
    if ctx.listener_port != 0 && m.port != 0 && m.port != ctx.listener_port {
        return false;
    }
    if !m.gateways.is_empty() {
        return m.gateways.iter().any(|g| {
            let resolved =
                if g == MESH_GATEWAY { g.clone() } else { resolve_gateway_name(g, &key.namespace) };
            ctx.gateways.contains(&resolved)
        });
    }
    m.source_labels.iter().all(|(k, v)| ctx.proxy_labels.get(k) == Some(v))
        && (m.source_namespace.is_empty() || m.source_namespace == ctx.proxy_namespace)
}

// ===== Matches =====

pub(super) enum MatchKind<'a> {
    Exact(&'a str),
    Prefix(&'a str),
    Regex(&'a str),
}

/// The member of a `StringMatch` oneof that is set (the first, should several be).
pub(super) fn kind_of(m: &StringMatch) -> Option<MatchKind<'_>> {
    if let Some(v) = &m.exact {
        Some(MatchKind::Exact(v))
    } else if let Some(v) = &m.prefix {
        Some(MatchKind::Prefix(v))
    } else {
        m.regex.as_deref().map(MatchKind::Regex)
    }
}

pub(super) fn regex_matcher(regex: &str) -> RegexMatcher {
    RegexMatcher { regex: regex.to_owned(), ..Default::default() }
}

/// Istio's `util.ConvertToEnvoyMatch`.
pub(super) fn envoy_string_match(m: &StringMatch) -> Option<StringMatcher> {
    let pattern = match kind_of(m)? {
        MatchKind::Exact(v) => string_matcher::MatchPattern::Exact(v.to_owned()),
        MatchKind::Prefix(v) => string_matcher::MatchPattern::Prefix(v.to_owned()),
        MatchKind::Regex(v) => string_matcher::MatchPattern::SafeRegex(regex_matcher(v)),
    };
    Some(StringMatcher { match_pattern: Some(pattern), ..Default::default() })
}

/// Istio's `canBeConvertedToPresentMatch`: no match type, or the regex `*` (not RE2; Istio reads it as
/// "header present").
fn is_presence_match(m: &StringMatch) -> bool {
    match kind_of(m) {
        None => true,
        Some(MatchKind::Regex(re)) => re == "*",
        Some(_) => false,
    }
}

/// Istio's `translateHeaderMatch`.
fn header_matcher(name: &str, m: &StringMatch) -> HeaderMatcher {
    let specifier = if is_presence_match(m) {
        Some(HeaderMatchSpecifier::PresentMatch(true))
    } else {
        envoy_string_match(m).map(HeaderMatchSpecifier::StringMatch)
    };
    HeaderMatcher { name: name.to_owned(), header_match_specifier: specifier, ..Default::default() }
}

/// Istio's `translateQueryParamMatch`.
fn query_parameter_matcher(name: &str, m: &StringMatch) -> QueryParameterMatcher {
    let specifier = if is_presence_match(m) {
        Some(QueryParameterMatchSpecifier::PresentMatch(true))
    } else {
        envoy_string_match(m).map(QueryParameterMatchSpecifier::StringMatch)
    };
    QueryParameterMatcher { name: name.to_owned(), query_parameter_match_specifier: specifier }
}

/// Istio's `jwt.ToRoutingClaim`: the claim path of a `@request.auth.claims.a.b` or
/// `@request.auth.claims[a][b]` header name, `None` for other names.
fn jwt_claims(name: &str) -> Option<Vec<String>> {
    let head = name.get(..JWT_CLAIM_PREFIX.len())?;
    if !head.eq_ignore_ascii_case(JWT_CLAIM_PREFIX) {
        return None;
    }
    let rest = &name[JWT_CLAIM_PREFIX.len()..];
    if let Some(dotted) = rest.strip_prefix('.')
        && !dotted.is_empty()
    {
        return Some(dotted.split('.').map(str::to_owned).collect());
    }
    if rest.len() > 2
        && let Some(inner) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']'))
    {
        return Some(inner.split("][").map(str::to_owned).collect());
    }
    None
}

/// Istio's `translateMetadataMatch` for JWT claim routing: a dynamic metadata matcher on the JWT
/// filter's payload that matches the claim's value, or any element when the claim is a list.
fn jwt_metadata_matcher(name: &str, m: &StringMatch) -> Option<MetadataMatcher> {
    let claims = jwt_claims(name)?;
    let value = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::StringMatch(
            envoy_string_match(m).unwrap_or_default(),
        )),
    };
    let list = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(ListMatcher {
            match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(value.clone()))),
        }))),
    };
    let path = std::iter::once(JWT_PAYLOAD_KEY.to_owned())
        .chain(claims)
        .map(|k| metadata_matcher::PathSegment {
            segment: Some(metadata_matcher::path_segment::Segment::Key(k)),
        })
        .collect();
    Some(MetadataMatcher {
        filter: JWT_FILTER.to_owned(),
        path,
        value: Some(ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::OrMatch(OrMatcher {
                value_matchers: vec![list, value],
            })),
        }),
        invert: false,
    })
}

/// Istio's `TranslateRouteMatch`, with the provenance of each Envoy field.
pub(super) fn translate_match(m: Option<&HttpMatchRequest>, at: &str, record: bool) -> (RouteMatch, Prov) {
    let mut out =
        RouteMatch { path_specifier: Some(PathSpecifier::Prefix("/".to_owned())), ..Default::default() };
    let mut prov = Prov::recording(record);
    let Some(m) = m else {
        return (out, prov);
    };

    let mut headers: Vec<(HeaderMatcher, String)> = Vec::new();
    let mut dynamic: Vec<(MetadataMatcher, String)> = Vec::new();
    for (name, sm) in &m.headers {
        let path = string_match_path(&format!("{at}.headers.{name}"), sm);
        match jwt_metadata_matcher(name, sm) {
            Some(mm) => dynamic.push((mm, path)),
            None => headers.push((header_matcher(name, sm), path)),
        }
    }
    for (name, sm) in &m.without_headers {
        let path = string_match_path(&format!("{at}.withoutHeaders.{name}"), sm);
        match jwt_metadata_matcher(name, sm) {
            Some(mut mm) => {
                mm.invert = true;
                dynamic.push((mm, path));
            }
            None => {
                let mut hm = header_matcher(name, sm);
                hm.invert_match = true;
                // treat_missing_header_as_empty conflicts with present_match.
                hm.treat_missing_header_as_empty = !is_presence_match(sm);
                headers.push((hm, path));
            }
        }
    }
    headers.sort_by(|a, b| a.0.name.cmp(&b.0.name));

    if let Some(uri) = &m.uri {
        let path = string_match_path(&format!("{at}.uri"), uri);
        match kind_of(uri) {
            Some(MatchKind::Exact(v)) => {
                out.path_specifier = Some(PathSpecifier::Path(v.to_owned()));
                prov.add(|| ("match.path".to_owned(), path));
            }
            Some(MatchKind::Prefix(v)) => {
                out.path_specifier = Some(PathSpecifier::Prefix(v.to_owned()));
                prov.add(|| ("match.prefix".to_owned(), path));
            }
            Some(MatchKind::Regex(v)) => {
                out.path_specifier = Some(PathSpecifier::SafeRegex(regex_matcher(v)));
                prov.add(|| ("match.safe_regex".to_owned(), path));
            }
            None => {}
        }
    }
    out.case_sensitive = Some(BoolValue { value: !m.ignore_uri_case });

    for (field, name, sm) in [
        ("method", ":method", &m.method),
        ("authority", ":authority", &m.authority),
        ("scheme", ":scheme", &m.scheme),
    ] {
        if let Some(sm) = sm {
            headers.push((header_matcher(name, sm), string_match_path(&format!("{at}.{field}"), sm)));
        }
    }
    for (k, (hm, path)) in headers.into_iter().enumerate() {
        out.headers.push(hm);
        prov.add(|| (format!("match.headers[{k}]"), path));
    }
    for (k, (mm, path)) in dynamic.into_iter().enumerate() {
        out.dynamic_metadata.push(mm);
        prov.add(|| (format!("match.dynamic_metadata[{k}]"), path));
    }
    for (name, sm) in &m.query_params {
        prov.add(|| {
            (
                format!("match.query_parameters[{}]", out.query_parameters.len()),
                string_match_path(&format!("{at}.queryParams.{name}"), sm),
            )
        });
        out.query_parameters.push(query_parameter_matcher(name, sm));
    }
    (out, prov)
}

/// Istio's `IsCatchAllRoute`: prefix `/` (or regex `.*`) and no header, query or metadata condition.
pub(super) fn is_catch_all(m: &RouteMatch) -> bool {
    let any_path = match &m.path_specifier {
        Some(PathSpecifier::Prefix(p) | PathSpecifier::PathSeparatedPrefix(p)) => p == "/",
        Some(PathSpecifier::SafeRegex(re)) => re.regex == ".*",
        _ => false,
    };
    any_path && m.headers.is_empty() && m.query_parameters.is_empty() && m.dynamic_metadata.is_empty()
}
