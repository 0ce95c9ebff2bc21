//! "Same routing": a small, pure evaluator of Envoy's route matching over a decoded
//! `RouteConfiguration` (virtual host by `:authority` as Envoy picks it: exact domain, then the longest
//! `*.suffix`, then the longest `prefix.*`, then `*`; then the first route whose path, header and query
//! matchers all match), and the sampled requests it is run on (built from the matchers of both sides'
//! route tables, so every route of either side is aimed at at least once).

use std::collections::BTreeSet;

use envoy_types::pb::envoy::{
    config::route::v3::{
        HeaderMatcher, Route, RouteConfiguration, RouteMatch, VirtualHost,
        header_matcher::HeaderMatchSpecifier, query_parameter_matcher::QueryParameterMatchSpecifier,
        route::Action, route_action::ClusterSpecifier, route_match::PathSpecifier,
    },
    extensions::filters::http::fault::v3::HttpFault,
    r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern},
};
use prost::Message;
use serde_json::{Value, json};

use super::debug_json::to_json;

/// One sampled request.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    /// `:authority`.
    pub host: String,
    /// `:path` (with the query string, if any).
    pub path: String,
    /// Other headers, lower-case names.
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.host, self.path)?;
        for (k, v) in &self.headers {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

/// What the route table does with `req`: the target cluster(s), rewrites, redirect or direct response,
/// and the fault filter's per-route config; `{"no_virtual_host": true}` / `{"no_route": true}` when
/// Envoy would answer 404.
pub fn decide(rc: &RouteConfiguration, req: &Request) -> Value {
    let Some(vh) = pick_virtual_host(&rc.virtual_hosts, &req.host) else {
        return json!({"no_virtual_host": true});
    };
    let Some(route) = vh.routes.iter().find(|r| r.r#match.as_ref().is_some_and(|m| route_matches(m, req)))
    else {
        return json!({"no_route": true});
    };
    let mut out = serde_json::Map::new();
    match &route.action {
        Some(Action::Route(a)) => {
            match &a.cluster_specifier {
                Some(ClusterSpecifier::Cluster(c)) => {
                    out.insert("cluster".into(), json!(c));
                }
                Some(ClusterSpecifier::WeightedClusters(w)) => {
                    let mut set: Vec<(String, u32)> = w
                        .clusters
                        .iter()
                        .map(|c| (c.name.clone(), c.weight.as_ref().map_or(0, |w| w.value)))
                        .collect();
                    set.sort();
                    out.insert("weighted_clusters".into(), json!(set));
                }
                Some(ClusterSpecifier::ClusterHeader(h)) => {
                    out.insert("cluster_header".into(), json!(h));
                }
                other => {
                    out.insert("cluster_specifier".into(), to_json(other));
                }
            }
            if !a.prefix_rewrite.is_empty() {
                out.insert("prefix_rewrite".into(), json!(a.prefix_rewrite));
            }
            if let Some(r) = &a.regex_rewrite {
                out.insert("regex_rewrite".into(), to_json(r));
            }
            if let Some(h) = &a.host_rewrite_specifier {
                out.insert("host_rewrite".into(), to_json(h));
            }
        }
        Some(Action::Redirect(r)) => {
            out.insert("redirect".into(), to_json(r));
        }
        Some(Action::DirectResponse(d)) => {
            out.insert("direct_response".into(), json!(d.status));
        }
        other => {
            out.insert("action".into(), to_json(other));
        }
    }
    let fault = route
        .typed_per_filter_config
        .get("envoy.filters.http.fault")
        .or_else(|| vh.typed_per_filter_config.get("envoy.filters.http.fault"));
    if let Some(any) = fault {
        let f = HttpFault::decode(any.value.as_slice()).map(|f| to_json(&f)).unwrap_or(json!("undecodable"));
        out.insert("fault".into(), f);
    }
    Value::Object(out)
}

/// Envoy's virtual host choice for `host` (lower-cased): exact, longest suffix wildcard, longest prefix
/// wildcard, `*`.
fn pick_virtual_host<'a>(vhs: &'a [VirtualHost], host: &str) -> Option<&'a VirtualHost> {
    let host = host.to_ascii_lowercase();
    let domains = || vhs.iter().flat_map(|vh| vh.domains.iter().map(move |d| (vh, d.to_ascii_lowercase())));
    if let Some((vh, _)) = domains().find(|(_, d)| *d == host) {
        return Some(vh);
    }
    let suffix = domains()
        .filter_map(|(vh, d)| {
            let s = d.strip_prefix('*')?;
            (!s.is_empty() && host.len() > s.len() && host.ends_with(s)).then_some((s.len(), vh))
        })
        .max_by_key(|(len, _)| *len);
    if let Some((_, vh)) = suffix {
        return Some(vh);
    }
    let prefix = domains()
        .filter_map(|(vh, d)| {
            let p = d.strip_suffix('*')?;
            (!p.is_empty() && host.len() > p.len() && host.starts_with(p)).then_some((p.len(), vh))
        })
        .max_by_key(|(len, _)| *len);
    if let Some((_, vh)) = prefix {
        return Some(vh);
    }
    domains().find(|(_, d)| d == "*").map(|(vh, _)| vh)
}

fn route_matches(m: &RouteMatch, req: &Request) -> bool {
    let case_sensitive = m.case_sensitive.as_ref().is_none_or(|b| b.value);
    let (path, query) = req.path.split_once('?').unwrap_or((&req.path, ""));
    let fold = |s: &str| if case_sensitive { s.to_string() } else { s.to_ascii_lowercase() };
    let path_ok = match &m.path_specifier {
        Some(PathSpecifier::Prefix(p)) => fold(&req.path).starts_with(&fold(p)),
        Some(PathSpecifier::Path(p)) => fold(path) == fold(p),
        Some(PathSpecifier::SafeRegex(r)) => full_match(&r.regex, path),
        Some(PathSpecifier::PathSeparatedPrefix(p)) => {
            let (path, p) = (fold(path), fold(p));
            path == p || path.starts_with(&format!("{p}/"))
        }
        _ => false,
    };
    if !path_ok {
        return false;
    }
    if m.grpc.is_some()
        && !req.headers.iter().any(|(k, v)| k == "content-type" && v.starts_with("application/grpc"))
    {
        return false;
    }
    if !m.headers.iter().all(|h| header_matches(h, req)) {
        return false;
    }
    m.query_parameters.iter().all(|q| {
        let value = query.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k == q.name).then_some(v)
        });
        match (&q.query_parameter_match_specifier, value) {
            (Some(QueryParameterMatchSpecifier::PresentMatch(p)), v) => v.is_some() == *p,
            (Some(QueryParameterMatchSpecifier::StringMatch(s)), Some(v)) => string_matches(s, v),
            _ => false,
        }
    })
}

/// The value of header `name` in `req` (pseudo-headers from the request line).
fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    match name {
        ":authority" | "host" => Some(&req.host),
        ":path" => Some(&req.path),
        ":method" => Some("GET"),
        ":scheme" => Some("http"),
        _ => req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()),
    }
}

#[allow(deprecated)]
fn header_matches(h: &HeaderMatcher, req: &Request) -> bool {
    let value = header(req, &h.name).or(if h.treat_missing_header_as_empty { Some("") } else { None });
    let hit = match (&h.header_match_specifier, value) {
        (Some(HeaderMatchSpecifier::PresentMatch(p)), v) => return (v.is_some() == *p) != h.invert_match,
        (_, None) => return false,
        (None, Some(_)) => true,
        (Some(HeaderMatchSpecifier::ExactMatch(e)), Some(v)) => v == e,
        (Some(HeaderMatchSpecifier::PrefixMatch(p)), Some(v)) => v.starts_with(p.as_str()),
        (Some(HeaderMatchSpecifier::SuffixMatch(s)), Some(v)) => v.ends_with(s.as_str()),
        (Some(HeaderMatchSpecifier::ContainsMatch(s)), Some(v)) => v.contains(s.as_str()),
        (Some(HeaderMatchSpecifier::SafeRegexMatch(r)), Some(v)) => full_match(&r.regex, v),
        (Some(HeaderMatchSpecifier::StringMatch(s)), Some(v)) => string_matches(s, v),
        (Some(HeaderMatchSpecifier::RangeMatch(r)), Some(v)) => {
            v.parse::<i64>().is_ok_and(|n| n >= r.start && n < r.end)
        }
    };
    hit != h.invert_match
}

fn string_matches(s: &StringMatcher, v: &str) -> bool {
    let fold = |x: &str| if s.ignore_case { x.to_ascii_lowercase() } else { x.to_string() };
    match &s.match_pattern {
        Some(MatchPattern::Exact(e)) => fold(v) == fold(e),
        Some(MatchPattern::Prefix(p)) => fold(v).starts_with(&fold(p)),
        Some(MatchPattern::Suffix(p)) => fold(v).ends_with(&fold(p)),
        Some(MatchPattern::Contains(p)) => fold(v).contains(&fold(p)),
        Some(MatchPattern::SafeRegex(r)) => full_match(&r.regex, v),
        _ => false,
    }
}

/// RE2 full match (Envoy's `safe_regex`); an invalid expression matches nothing.
fn full_match(re: &str, v: &str) -> bool {
    regex::Regex::new(&format!("^(?:{re})$")).is_ok_and(|r| r.is_match(v))
}

/// A value that `s` accepts (a regex gets no sample).
fn string_sample(s: &StringMatcher) -> Option<String> {
    match &s.match_pattern {
        Some(MatchPattern::Exact(e)) => Some(e.clone()),
        Some(MatchPattern::Prefix(p)) => Some(format!("{p}x")),
        Some(MatchPattern::Suffix(p)) => Some(format!("x{p}")),
        Some(MatchPattern::Contains(p)) => Some(format!("x{p}x")),
        _ => None,
    }
}

/// A header value `h` accepts, or `None` when none can be made (regex, absence).
#[allow(deprecated)]
fn header_sample(h: &HeaderMatcher) -> Option<String> {
    if h.invert_match || h.name.starts_with(':') {
        return None;
    }
    match &h.header_match_specifier {
        Some(HeaderMatchSpecifier::ExactMatch(e)) => Some(e.clone()),
        Some(HeaderMatchSpecifier::PrefixMatch(p)) => Some(format!("{p}x")),
        Some(HeaderMatchSpecifier::SuffixMatch(s)) => Some(format!("x{s}")),
        Some(HeaderMatchSpecifier::ContainsMatch(s)) => Some(format!("x{s}x")),
        Some(HeaderMatchSpecifier::PresentMatch(true)) | None => Some("1".into()),
        Some(HeaderMatchSpecifier::StringMatch(s)) => string_sample(s),
        Some(HeaderMatchSpecifier::RangeMatch(r)) => Some(r.start.to_string()),
        _ => None,
    }
}

/// The request a route aims at on `host`: its path (prefix, exact or separated prefix; `/` for a regex) and
/// the header values its matchers accept.
fn aimed_request(host: &str, route: &Route) -> Request {
    let m = route.r#match.clone().unwrap_or_default();
    let path = match &m.path_specifier {
        Some(PathSpecifier::Prefix(p))
        | Some(PathSpecifier::Path(p))
        | Some(PathSpecifier::PathSeparatedPrefix(p)) => {
            if p.is_empty() {
                "/".to_string()
            } else {
                p.clone()
            }
        }
        _ => "/".into(),
    };
    let mut headers: Vec<(String, String)> =
        m.headers.iter().filter_map(|h| Some((h.name.to_ascii_lowercase(), header_sample(h)?))).collect();
    if m.grpc.is_some() {
        headers.push(("content-type".into(), "application/grpc".into()));
    }
    let query: Vec<String> = m
        .query_parameters
        .iter()
        .filter_map(|q| match &q.query_parameter_match_specifier {
            Some(QueryParameterMatchSpecifier::StringMatch(s)) => {
                Some(format!("{}={}", q.name, string_sample(s)?))
            }
            Some(QueryParameterMatchSpecifier::PresentMatch(true)) => Some(q.name.clone()),
            _ => None,
        })
        .collect();
    let path = if query.is_empty() { path } else { format!("{path}?{}", query.join("&")) };
    headers.sort();
    Request { host: host.to_string(), path, headers }
}

/// A concrete host for a domain pattern (`*.a.com` → `wild.a.com`, `a.*` → `a.wild`, `*` → `unlisted.example`).
fn concrete_host(domain: &str) -> String {
    if domain == "*" {
        "unlisted.example".into()
    } else if let Some(s) = domain.strip_prefix('*') {
        format!("wild{s}")
    } else if let Some(p) = domain.strip_suffix('*') {
        format!("{p}wild")
    } else {
        domain.to_string()
    }
}

/// The sampled requests for a route table present on both sides: for every virtual host of either table,
/// every domain (at most 4 per virtual host) × every route's aimed request and the bare `/`, plus a host
/// no table lists.
pub fn samples(tables: &[&RouteConfiguration]) -> BTreeSet<Request> {
    let mut out = BTreeSet::new();
    out.insert(Request { host: "unlisted.conformance.invalid".into(), path: "/".into(), headers: vec![] });
    for rc in tables {
        for vh in &rc.virtual_hosts {
            for domain in vh.domains.iter().take(4) {
                let host = concrete_host(domain);
                out.insert(Request { host: host.clone(), path: "/".into(), headers: vec![] });
                for r in &vh.routes {
                    out.insert(aimed_request(&host, r));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::route::v3::{RouteAction, RouteMatch};

    fn route(prefix: &str, header: Option<(&str, &str)>, cluster: &str) -> Route {
        #[allow(deprecated)]
        let headers = header
            .map(|(n, v)| HeaderMatcher {
                name: n.into(),
                header_match_specifier: Some(HeaderMatchSpecifier::ExactMatch(v.into())),
                ..Default::default()
            })
            .into_iter()
            .collect();
        Route {
            r#match: Some(RouteMatch {
                path_specifier: Some(PathSpecifier::Prefix(prefix.into())),
                headers,
                ..Default::default()
            }),
            action: Some(Action::Route(RouteAction {
                cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.into())),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn virtual_host_and_first_matching_route_win() {
        let rc = RouteConfiguration {
            virtual_hosts: vec![
                VirtualHost {
                    domains: vec!["*.b.com".into()],
                    routes: vec![route("/", None, "suffix")],
                    ..Default::default()
                },
                VirtualHost {
                    domains: vec!["a.b.com".into()],
                    routes: vec![
                        route("/x", Some(("end-user", "jason")), "jason"),
                        route("/", None, "exact"),
                    ],
                    ..Default::default()
                },
                VirtualHost {
                    domains: vec!["*".into()],
                    routes: vec![route("/", None, "any")],
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let req = |host: &str, path: &str, h: &[(&str, &str)]| Request {
            host: host.into(),
            path: path.into(),
            headers: h.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        assert_eq!(decide(&rc, &req("a.b.com", "/x", &[("end-user", "jason")]))["cluster"], "jason");
        assert_eq!(decide(&rc, &req("a.b.com", "/x", &[])), json!({"cluster": "exact"}));
        assert_eq!(decide(&rc, &req("c.b.com", "/", &[])), json!({"cluster": "suffix"}));
        assert_eq!(decide(&rc, &req("z.org", "/", &[])), json!({"cluster": "any"}));
        let s = samples(&[&rc]);
        assert!(s.contains(&req("a.b.com", "/x", &[("end-user", "jason")])), "{s:?}");
        assert!(s.contains(&req("wild.b.com", "/", &[])), "{s:?}");
    }
}
