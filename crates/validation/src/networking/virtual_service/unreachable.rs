//! The unreachable-rule analysis (`analyzeUnreachableHTTPRules`, `…TCPRules`, `…TLSRules`): rules and
//! matches that earlier ones cover; findings are warnings.

use std::collections::BTreeMap;

use api::networking::virtual_service::{HttpMatchRequest, HttpRoute, StringMatch};

use crate::{Report, common::go_quote};

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
pub(super) fn analyze_unreachable_http_rules(routes: &[HttpRoute], report: &mut Report) {
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
pub(super) fn analyze_unreachable_l4_rules<M: PartialEq>(
    list_path: &str,
    rules: &[&[M]],
    report: &mut Report,
) {
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
