//! Envoy matchers for AuthorizationPolicy values (Istio's `pilot/pkg/security/authz/matcher`): Istio's
//! `*` syntax (exact `abc`, prefix `abc*`, suffix `*abc`, presence `*`) as string, header, host, path,
//! path-template and metadata matchers.

use envoy_types::pb::envoy::{
    config::{
        core::v3::CidrRange,
        route::v3::{HeaderMatcher, header_matcher::HeaderMatchSpecifier},
    },
    extensions::path::r#match::uri_template::v3::UriTemplateMatchConfig,
    r#type::matcher::v3::{
        ListMatcher, ListStringMatcher, MetadataMatcher, OrMatcher, PathMatcher, RegexMatcher, StringMatcher,
        ValueMatcher, list_matcher, metadata_matcher::PathSegment, metadata_matcher::path_segment::Segment,
        path_matcher, string_matcher::MatchPattern, value_matcher,
    },
};

use crate::convert::u32v;

/// Istio's path template operator matching one path segment.
pub const MATCH_ONE_TEMPLATE: &str = "{*}";
/// Istio's path template operator matching any number of path segments.
pub const MATCH_ANY_TEMPLATE: &str = "{**}";

/// An exact string matcher.
pub fn exact(value: &str, ignore_case: bool) -> StringMatcher {
    StringMatcher { ignore_case, match_pattern: Some(MatchPattern::Exact(value.into())) }
}

/// A prefix string matcher.
pub fn prefix(value: &str, ignore_case: bool) -> StringMatcher {
    StringMatcher { ignore_case, match_pattern: Some(MatchPattern::Prefix(value.into())) }
}

/// A suffix string matcher.
pub fn suffix(value: &str, ignore_case: bool) -> StringMatcher {
    StringMatcher { ignore_case, match_pattern: Some(MatchPattern::Suffix(value.into())) }
}

/// A RE2 regex string matcher (`safe_regex`, default engine).
pub fn regex(re: &str) -> StringMatcher {
    StringMatcher {
        ignore_case: false,
        match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher { regex: re.into(), ..Default::default() })),
    }
}

/// Istio's `StringMatcher`: `*` → regex `.+`, `*abc` → suffix, `abc*` → prefix, else exact.
pub fn string(value: &str) -> StringMatcher {
    string_with_prefix(value, "")
}

/// Istio's `StringMatcherWithPrefix`: [`string`] with `prefix` prepended to the matched value
/// (`spiffe://` for principals). A suffix match with a prefix becomes the regex
/// `<prefix>.*<quoted suffix>`.
pub fn string_with_prefix(value: &str, pre: &str) -> StringMatcher {
    if value == "*" {
        regex(".+")
    } else if let Some(rest) = value.strip_prefix('*') {
        if pre.is_empty() { suffix(rest, false) } else { regex(&format!("{pre}.*{}", quote_meta(rest))) }
    } else if let Some(rest) = value.strip_suffix('*') {
        prefix(&format!("{pre}{rest}"), false)
    } else {
        exact(&format!("{pre}{value}"), false)
    }
}

/// Go's `regexp.QuoteMeta`: every RE2 metacharacter escaped with a backslash.
pub fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A value matcher of one string matcher.
pub fn string_value(m: StringMatcher) -> ValueMatcher {
    ValueMatcher { match_pattern: Some(value_matcher::MatchPattern::StringMatch(m)) }
}

/// Istio's `OrMatcher`: one matcher alone, several in an `or_match`.
pub fn or_values(mut matchers: Vec<ValueMatcher>) -> ValueMatcher {
    if matchers.len() == 1 {
        return matchers.remove(0);
    }
    ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::OrMatch(OrMatcher { value_matchers: matchers })),
    }
}

/// Istio's `StringOrMatcher`: [`string`] of each value, or-ed.
pub fn string_or(values: &[String]) -> ValueMatcher {
    or_values(values.iter().map(|v| string_value(string(v))).collect())
}

fn header(name: &str, value: &str, ignore_case: bool) -> HeaderMatcher {
    let spec = if value == "*" {
        HeaderMatchSpecifier::PresentMatch(true)
    } else if let Some(rest) = value.strip_prefix('*') {
        HeaderMatchSpecifier::StringMatch(suffix(rest, ignore_case))
    } else if let Some(rest) = value.strip_suffix('*') {
        HeaderMatchSpecifier::StringMatch(prefix(rest, ignore_case))
    } else {
        HeaderMatchSpecifier::StringMatch(exact(value, ignore_case))
    };
    HeaderMatcher { name: name.into(), header_match_specifier: Some(spec), ..Default::default() }
}

/// Istio's `HeaderMatcher`: `*` → present, else a case-sensitive string match.
pub fn header_matcher(name: &str, value: &str) -> HeaderMatcher {
    header(name, value, false)
}

/// Istio's `HostMatcher`: as [`header_matcher`], but case-insensitive (hosts).
pub fn host_matcher(name: &str, value: &str) -> HeaderMatcher {
    header(name, value, true)
}

/// Istio's `PathMatcher`: [`string`] on the path.
pub fn path_matcher(path: &str) -> PathMatcher {
    PathMatcher { rule: Some(path_matcher::Rule::Path(string(path))) }
}

/// `true` when the path uses a template operator (`{*}` or `{**}`).
pub fn contains_path_template(path: &str) -> bool {
    path.contains(MATCH_ONE_TEMPLATE) || path.contains(MATCH_ANY_TEMPLATE)
}

/// Istio's `PathTemplateMatcher`: `{*}` → `*`, `{**}` → `**` in Envoy's uri_template syntax.
pub fn path_template_matcher(path: &str) -> UriTemplateMatchConfig {
    // `{**}` first: it contains no `{*}` substring, but replacing left to right in one pass keeps
    // `{*}{**}` correct too.
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix(MATCH_ONE_TEMPLATE) {
            out.push('*');
            rest = r;
        } else if let Some(r) = rest.strip_prefix(MATCH_ANY_TEMPLATE) {
            out.push_str("**");
            rest = r;
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    UriTemplateMatchConfig { path_template: out }
}

fn key_path(keys: &[&str]) -> Vec<PathSegment> {
    keys.iter().map(|k| PathSegment { segment: Some(Segment::Key((*k).into())) }).collect()
}

/// Istio's `MetadataValueMatcher`: `value` at `filter`/`key`.
pub fn metadata_value(filter: &str, key: &str, value: ValueMatcher) -> MetadataMatcher {
    MetadataMatcher {
        filter: filter.into(),
        path: key_path(&[key]),
        value: Some(value),
        ..Default::default()
    }
}

/// Istio's `MetadataListValueMatcher` with extended JWT matching: at `filter`/`keys…`, either a list
/// with one element matching `value`, or a value matching `value` itself (`or_match`).
pub fn metadata_list_or_value(filter: &str, keys: &[&str], value: ValueMatcher) -> MetadataMatcher {
    let list = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(ListMatcher {
            match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(value.clone()))),
        }))),
    };
    MetadataMatcher {
        filter: filter.into(),
        path: key_path(keys),
        value: Some(ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::OrMatch(OrMatcher {
                value_matchers: vec![list, value],
            })),
        }),
        ..Default::default()
    }
}

/// Istio's `MetadataListMatcher` without extended JWT matching: a list at `filter`/`keys…` with one
/// element matching `value`.
pub fn metadata_list(filter: &str, keys: &[&str], value: StringMatcher) -> MetadataMatcher {
    MetadataMatcher {
        filter: filter.into(),
        path: key_path(keys),
        value: Some(ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(ListMatcher {
                match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(string_value(value)))),
            }))),
        }),
        ..Default::default()
    }
}

/// Istio's ext_authz header lists: each `*suffix` / `prefix*` / exact name, case-insensitive; `None`
/// for an empty list.
pub fn header_list(headers: &[String]) -> Option<ListStringMatcher> {
    if headers.is_empty() {
        return None;
    }
    let patterns = headers
        .iter()
        .map(|h| {
            if let Some(rest) = h.strip_prefix('*') {
                suffix(rest, true)
            } else if let Some(rest) = h.strip_suffix('*') {
                prefix(rest, true)
            } else {
                exact(h, true)
            }
        })
        .collect();
    Some(ListStringMatcher { patterns })
}

/// Istio's `AddrStrToCidrRange`: `a.b.c.d/len` or a bare IP (`/32` or `/128`). The address is kept
/// as written (not masked), printed in canonical form.
///
/// # Errors
/// A message when the text is not an IP or CIDR.
pub fn cidr_range(addr: &str) -> Result<CidrRange, String> {
    if addr.is_empty() {
        return Err("empty address".into());
    }
    let (ip, len) = match addr.split_once('/') {
        Some((ip, len)) => (ip, Some(len)),
        None => (addr, None),
    };
    let ip: std::net::IpAddr = ip.parse().map_err(|_| format!("invalid IP address or CIDR {addr:?}"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(len) => match len.parse::<u32>() {
            Ok(n) if n <= max && !len.starts_with('+') && (len == "0" || !len.starts_with('0')) => n,
            _ => return Err(format!("invalid CIDR prefix length in {addr:?}")),
        },
    };
    Ok(CidrRange { address_prefix: ip.to_string(), prefix_len: Some(u32v(len)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(m: &StringMatcher) -> (&'static str, String, bool) {
        let (kind, v) = match m.match_pattern.as_ref().unwrap() {
            MatchPattern::Exact(v) => ("exact", v.clone()),
            MatchPattern::Prefix(v) => ("prefix", v.clone()),
            MatchPattern::Suffix(v) => ("suffix", v.clone()),
            MatchPattern::SafeRegex(r) => ("regex", r.regex.clone()),
            _ => ("other", String::new()),
        };
        (kind, v, m.ignore_case)
    }

    #[test]
    fn string_matchers_follow_istio_star_syntax() {
        assert_eq!(pattern(&string("*")), ("regex", ".+".into(), false));
        assert_eq!(pattern(&string("/a*")), ("prefix", "/a".into(), false));
        assert_eq!(pattern(&string("*.html")), ("suffix", ".html".into(), false));
        assert_eq!(pattern(&string("/exact")), ("exact", "/exact".into(), false));
    }

    #[test]
    fn principals_get_the_spiffe_prefix() {
        assert_eq!(
            pattern(&string_with_prefix("cluster.local/ns/a/sa/b", "spiffe://")),
            ("exact", "spiffe://cluster.local/ns/a/sa/b".into(), false)
        );
        assert_eq!(
            pattern(&string_with_prefix("td/ns/a/*", "spiffe://")),
            ("prefix", "spiffe://td/ns/a/".into(), false)
        );
        assert_eq!(
            pattern(&string_with_prefix("*/sa/b.c", "spiffe://")),
            ("regex", r"spiffe://.*/sa/b\.c".into(), false)
        );
        assert_eq!(pattern(&string_with_prefix("*", "spiffe://")), ("regex", ".+".into(), false));
    }

    #[test]
    fn quote_meta_escapes_re2_metacharacters() {
        assert_eq!(quote_meta("a.b+c*(d)|[e]{f}^$\\?"), r"a\.b\+c\*\(d\)\|\[e\]\{f\}\^\$\\\?");
        assert_eq!(quote_meta("plain-text_1"), "plain-text_1");
    }

    #[test]
    fn header_and_host_matchers() {
        let h = header_matcher(":method", "*");
        assert_eq!(h.header_match_specifier, Some(HeaderMatchSpecifier::PresentMatch(true)));
        let h = host_matcher(":authority", "*.example.com");
        let Some(HeaderMatchSpecifier::StringMatch(m)) = &h.header_match_specifier else { panic!("{h:?}") };
        assert_eq!(pattern(m), ("suffix", ".example.com".into(), true));
        let h = header_matcher("x-id", "abc*");
        let Some(HeaderMatchSpecifier::StringMatch(m)) = &h.header_match_specifier else { panic!("{h:?}") };
        assert_eq!(pattern(m), ("prefix", "abc".into(), false));
    }

    #[test]
    fn path_templates() {
        assert!(contains_path_template("/a/{*}/b"));
        assert!(contains_path_template("/a/{**}"));
        assert!(!contains_path_template("/a/*"));
        assert_eq!(path_template_matcher("/a/{*}/b/{**}").path_template, "/a/*/b/**");
        assert_eq!(path_template_matcher("/{*}{**}/é").path_template, "/***/é");
    }

    #[test]
    fn cidr_ranges() {
        let c = cidr_range("10.0.0.1").unwrap();
        assert_eq!((c.address_prefix.as_str(), c.prefix_len.unwrap().value), ("10.0.0.1", 32));
        let c = cidr_range("10.1.0.0/16").unwrap();
        assert_eq!((c.address_prefix.as_str(), c.prefix_len.unwrap().value), ("10.1.0.0", 16));
        let c = cidr_range("2001:DB8::1").unwrap();
        assert_eq!((c.address_prefix.as_str(), c.prefix_len.unwrap().value), ("2001:db8::1", 128));
        for bad in ["", "10.0.0.256", "10.0.0.0/33", "::/129", "host", "10.0.0.0/", "10.0.0.0/08"] {
            assert!(cidr_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn header_lists_are_case_insensitive() {
        assert_eq!(header_list(&[]), None);
        let l = header_list(&["x-a".into(), "x-p-*".into(), "*-s".into()]).unwrap();
        let got: Vec<_> = l.patterns.iter().map(pattern).collect();
        assert_eq!(
            got,
            [("exact", "x-a".into(), true), ("prefix", "x-p-".into(), true), ("suffix", "-s".into(), true)]
        );
    }
}
