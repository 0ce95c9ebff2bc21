//! Names and string matches used in routes: subsets, gateway names, CORS methods and origins.

use super::{
    go::go_quote,
    hosts::{is_dns1123_label, validate_fqdn},
    join,
    re2::validate_string_regexp,
};
use crate::Report;

/// Checks a subset name, following Istio's `validateSubsetName`: `subset name cannot be empty`,
/// `subset name is invalid: …` (not a [DNS label](is_dns1123_label)).
pub fn validate_subset_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("subset name cannot be empty".to_owned());
    }
    if !is_dns1123_label(name) {
        return Err(format!("subset name is invalid: {name}"));
    }
    Ok(())
}

/// Checks the `gateways` of a VirtualService or route match, following Istio's `validateGatewayNames`;
/// `path` is the list's path (entries are reported at `path[i]`).
///
/// `<namespace>/<name>` with both parts [DNS labels](is_dns1123_label) (the name is not checked with
/// `gateway_semantics`). A name without `/` is checked as an [FQDN](validate_fqdn); if it has a dot it
/// also gets the warning `using legacy gatewayName format "name.ns"; prefer the <namespace>/<name>
/// format: "ns/name"`. Like Istio, the entries after any name without `/` (including `mesh`) are not
/// checked.
pub fn validate_gateway_names(names: &[String], gateway_semantics: bool, path: &str, report: &mut Report) {
    for (i, gateway) in names.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let Some((namespace, name)) = gateway.split_once('/') else {
            if gateway.contains('.') {
                let parts: Vec<&str> = gateway.split('.').collect();
                let recommended = format!("{}/{}", parts.get(1).unwrap_or(&""), parts[0]);
                report.warn(
                    &at,
                    format!(
                        "using legacy gatewayName format {}; prefer the <namespace>/<name> format: {}",
                        go_quote(gateway),
                        go_quote(&recommended)
                    ),
                );
            }
            report.check(&at, validate_fqdn(gateway));
            return;
        };
        let mut reasons = Vec::new();
        if namespace.is_empty() || name.is_empty() {
            reasons.push("config namespace and gateway name cannot be empty".to_owned());
        }
        if !is_dns1123_label(namespace) {
            reasons.push(format!("invalid value for namespace: {}", go_quote(namespace)));
        }
        if !is_dns1123_label(name) && !gateway_semantics {
            reasons.push(format!("invalid value for gateway name: {}", go_quote(name)));
        }
        report.check(at, join(reasons));
    }
}

/// HTTP methods Istio accepts in a CORS policy (Go's `net/http` method names and `*`).
const CORS_METHODS: [&str; 10] =
    ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE", "*"];

/// Checks a CORS `allowMethods` entry, following Istio's `validateCORSHTTPMethod`:
/// `"PUTT" is not a supported HTTP method` (names are case-sensitive).
pub fn validate_cors_http_method(method: &str) -> Result<(), String> {
    if CORS_METHODS.contains(&method) {
        Ok(())
    } else {
        Err(format!("{} is not a supported HTTP method", go_quote(method)))
    }
}

// ===== String matches and regular expressions =====

/// A `StringMatch` of the Istio API, by match type (the spec types hold it as sibling optional fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StringMatch<'a> {
    /// `exact: …`
    Exact(&'a str),
    /// `prefix: …`
    Prefix(&'a str),
    /// `regex: …` (RE2 syntax)
    Regex(&'a str),
}

/// Checks a string match of a route (`scheme`, `method`, `authority`, header and query matches),
/// following Istio's `validateStringMatch`: a prefix may not be empty
/// (`"method": prefix string match should not be empty`) and a regex must be valid
/// ([`validate_string_match_regexp`]). `None` (no match type) passes.
pub fn validate_string_match(m: Option<StringMatch<'_>>, location: &str) -> Result<(), String> {
    match m {
        Some(StringMatch::Prefix("")) => {
            Err(format!("{}: prefix string match should not be empty", go_quote(location)))
        }
        Some(StringMatch::Regex(_)) => validate_string_match_regexp(m, location),
        _ => Ok(()),
    }
}

/// Checks the regex of a string match (URI matches allow the other types to be empty), following
/// Istio's `validateStringMatchRegexp`: `"uri": regex string match should not be empty`, then
/// [`validate_string_regexp`]. Non-regex matches pass.
pub fn validate_string_match_regexp(m: Option<StringMatch<'_>>, location: &str) -> Result<(), String> {
    match m {
        Some(StringMatch::Regex("")) => {
            Err(format!("{}: regex string match should not be empty", go_quote(location)))
        }
        Some(StringMatch::Regex(re)) => validate_string_regexp(re, location),
        _ => Ok(()),
    }
}

/// Checks a CORS `allowOrigins` entry, following Istio's `validateAllowOrigins`: a non-empty exact,
/// prefix or regex value (`'' is not a valid match type for CORS allow origins`), and a valid regex.
pub fn validate_cors_allow_origin(m: Option<StringMatch<'_>>) -> Result<(), String> {
    let value = match m {
        Some(StringMatch::Exact(v) | StringMatch::Prefix(v) | StringMatch::Regex(v)) => v,
        None => "",
    };
    if value.is_empty() {
        return Err(format!("'{value}' is not a valid match type for CORS allow origins"));
    }
    validate_string_match_regexp(m, "corsPolicy.allowOrigins")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::tests::{expect, strings};

    #[test]
    fn route_names() {
        expect(validate_subset_name(""), Some("subset name cannot be empty"), "empty");
        expect(validate_subset_name("v1"), None, "v1");
        expect(validate_subset_name("v_1"), Some("subset name is invalid: v_1"), "v_1");
        for (method, ok) in [("GET", true), ("POST", true), ("*", true), ("PUTT", false), ("get", false)] {
            assert_eq!(validate_cors_http_method(method).is_ok(), ok, "{method}");
        }
        assert_eq!(validate_cors_http_method("PUTT").unwrap_err(), "\"PUTT\" is not a supported HTTP method");

        let mut report = Report::default();
        validate_gateway_names(
            &strings(&["ns/gw", "bad_ns/gw", "ns/Bad_Name", "mesh", "bad_ns/gw"]),
            false,
            "spec.gateways",
            &mut report,
        );
        let errors: Vec<_> = report.errors.iter().map(|e| (e.path.as_str(), e.message.as_str())).collect();
        assert_eq!(
            errors,
            [
                ("spec.gateways[1]", "invalid value for namespace: \"bad_ns\""),
                ("spec.gateways[2]", "invalid value for gateway name: \"Bad_Name\""),
            ]
        );
        let mut report = Report::default();
        validate_gateway_names(&strings(&["ns/Bad_Name"]), true, "g", &mut report);
        assert!(report.is_valid());
        let mut report = Report::default();
        validate_gateway_names(&strings(&["gw.ns", "bad_ns/gw"]), false, "g", &mut report);
        assert!(report.is_valid(), "entries after a legacy name are not checked: {report:?}");
        assert_eq!(
            report.warnings[0].message,
            "using legacy gatewayName format \"gw.ns\"; prefer the <namespace>/<name> format: \"ns/gw\""
        );
        let mut report = Report::default();
        validate_gateway_names(&strings(&["/gw"]), false, "g", &mut report);
        assert!(report.errors[0].message.contains("config namespace and gateway name cannot be empty"));
    }

    #[test]
    fn string_matches() {
        expect(validate_string_match(None, "method"), None, "none");
        expect(validate_string_match(Some(StringMatch::Exact("")), "method"), None, "exact");
        expect(
            validate_string_match(Some(StringMatch::Prefix("")), "method"),
            Some("\"method\": prefix string match should not be empty"),
            "prefix",
        );
        expect(
            validate_string_match(Some(StringMatch::Regex("")), "headers"),
            Some("\"headers\": regex string match should not be empty"),
            "regex",
        );
        expect(validate_string_match_regexp(Some(StringMatch::Prefix("")), "uri"), None, "uri prefix");
        expect(
            validate_string_match_regexp(Some(StringMatch::Regex("[")), "uri"),
            Some(
                "\"uri\": error parsing regexp: missing closing ]: `[`; Istio uses RE2 style regex-based match (https://github.com/google/re2/wiki/Syntax)",
            ),
            "bad regex",
        );
        // TestValidateCORSPolicy's allowOrigins cases.
        for m in [StringMatch::Exact(""), StringMatch::Prefix(""), StringMatch::Regex("")] {
            expect(
                validate_cors_allow_origin(Some(m)),
                Some("'' is not a valid match type for CORS allow origins"),
                "empty",
            );
        }
        for m in [StringMatch::Exact("exact"), StringMatch::Prefix("prefix"), StringMatch::Regex("regex")] {
            expect(validate_cors_allow_origin(Some(m)), None, "non-empty");
        }
        expect(validate_cors_allow_origin(None), Some("'' is not a valid match type"), "unset");
        expect(
            validate_cors_allow_origin(Some(StringMatch::Regex("a{1001}"))),
            Some("\"corsPolicy.allowOrigins\": error parsing regexp: invalid repeat count"),
            "cors regex",
        );
        let long = "a".repeat(1025);
        expect(
            validate_string_regexp(&long, "uri"),
            Some("\"uri\": regex is too large, max length allowed is 1024"),
            "long",
        );
        expect(validate_string_regexp(&"a".repeat(1024), "uri"), None, "1024");
        expect(
            validate_string_regexp("^/service/([^/]+)(/.*)$", "HTTPRewrite.UriRegexRewrite.Match"),
            None,
            "rewrite",
        );
    }
}
