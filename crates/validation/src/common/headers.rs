//! HTTP header names and values.

use super::go::{equal_fold_ascii, go_quote};

/// `true` for an HTTP token (RFC 7230 `tchar`s: letters, digits and ``!#$%&'*+-.^_`|~``).
fn is_http_token(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn empty_header_name() -> Result<(), String> {
    Err("header name cannot be empty".to_owned())
}

fn invalid_header_name(name: &str) -> Result<(), String> {
    Err(format!("header name {name} is not a valid header name"))
}

/// `true` when a header name uses Istio's JWT claim routing form, `@request.auth.claims.<claim>` or
/// `@request.auth.claims[<claim>]` (the prefix in any case), following Istio's `jwt.ToRoutingClaim`.
pub fn is_jwt_claim_route(name: &str) -> bool {
    const PREFIX: &str = "@request.auth.claims";
    let Some(head) = name.get(..PREFIX.len()) else {
        return false;
    };
    if !head.eq_ignore_ascii_case(PREFIX) {
        return false;
    }
    let rest = &name[PREFIX.len()..];
    (rest.starts_with('.') && rest.len() > 1)
        || (rest.starts_with('[') && rest.ends_with(']') && rest.len() > 2)
}

/// HTTP/2 pseudo-headers Istio accepts in a header match.
const PSEUDO_HEADERS: [&str; 5] = [":method", ":scheme", ":authority", ":path", ":status"];

/// Checks the header name of a route's header match (`headers`, `withoutHeaders`), following Istio's
/// `ValidateHTTPHeaderNameOrJwtClaimRoute`: a JWT claim route ([`is_jwt_claim_route`]), a pseudo-header
/// (`:method`, `:scheme`, `:authority`, `:path`, `:status`) or an HTTP token.
/// Errors: `header name cannot be empty`, `header name … is not a valid header name`.
pub fn validate_header_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return empty_header_name();
    }
    if is_jwt_claim_route(name) || PSEUDO_HEADERS.contains(&name) {
        return Ok(());
    }
    if !is_http_token(name) {
        return invalid_header_name(name);
    }
    Ok(())
}

/// Checks a header name with Istio's strict character set (letters, digits, `-`, `_`), following
/// `ValidateStrictHTTPHeaderName`.
pub fn validate_strict_http_header_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return empty_header_name();
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return invalid_header_name(name);
    }
    Ok(())
}

/// Checks a header name of an HTTP readiness probe (letters, digits, `-`, like Kubernetes), following
/// Istio's `ValidateProbeHeaderName`.
pub fn validate_probe_header_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return empty_header_name();
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return invalid_header_name(name);
    }
    Ok(())
}

/// Checks a CORS `allowHeaders` / `exposeHeaders` entry, following Istio's
/// `ValidateCORSHTTPHeaderName`: `*` or an HTTP token.
pub fn validate_cors_http_header_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return empty_header_name();
    }
    if name != "*" && !is_http_token(name) {
        return invalid_header_name(name);
    }
    Ok(())
}

/// `true` for a header Envoy does not let routes modify: a `:`-prefixed pseudo-header or `Host` (any
/// case), following Istio's `isInternalHeader`.
pub fn is_internal_header(name: &str) -> bool {
    name.starts_with(':') || equal_fold_ascii(name, "host")
}

/// `true` for `:authority` or `Host` (any case), following Istio's `isAuthorityHeader`.
pub fn is_authority_header(name: &str) -> bool {
    equal_fold_ascii(name, ":authority") || equal_fold_ascii(name, "host")
}

/// Checks a header name added or set on a request (where the authority may be rewritten), following
/// Istio's `ValidateHTTPHeaderWithAuthorityOperationName`:
/// `invalid header ":path": header cannot have ":" prefix` (`:authority` and `Host` are allowed).
pub fn validate_http_header_with_authority_operation_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return empty_header_name();
    }
    if is_internal_header(name) && !is_authority_header(name) {
        return Err(format!("invalid header {}: header cannot have \":\" prefix", go_quote(name)));
    }
    Ok(())
}

/// Checks a header name removed from a request or modified on a response, following Istio's
/// `ValidateHTTPHeaderOperationName`: `invalid header "host": cannot set Host header`,
/// `invalid header ":path": header cannot have ":" prefix`.
pub fn validate_http_header_operation_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return empty_header_name();
    }
    if equal_fold_ascii(name, "host") {
        return Err(format!("invalid header {}: cannot set Host header", go_quote(name)));
    }
    if is_internal_header(name) {
        return Err(format!("invalid header {}: header cannot have \":\" prefix", go_quote(name)));
    }
    Ok(())
}

/// Checks a custom header value, following Istio's `ValidateHTTPHeaderValue`: no control characters
/// other than tab (`header value configuration … is invalid`), and well-formed Envoy `%COMMAND%`
/// substitutions: `%%` is a literal `%`, `%NAME%` and `%NAME(args)%` must be closed
/// (`header value configuration: invalid header configuration. Un-escaped %`, `… Un-terminated variable
/// expression '…'`, and the other reasons of Envoy's header parser, in its words).
pub fn validate_header_value(value: &str) -> Result<(), String> {
    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(format!("header value configuration {value} is invalid"));
    }
    envoy_header_value(value).map_err(|e| format!("header value configuration: {e}"))
}

/// The `%…%` syntax check of Envoy's header formatter, as Istio ports it (`validateHeaderValue`).
fn envoy_header_value(value: &str) -> Result<(), String> {
    #[derive(PartialEq)]
    enum State {
        Literal,
        VariableName,
        ExpectArray,
        ExpectString,
        String,
        ExpectArrayDelimiterOrEnd,
        ExpectArgsEnd,
        ExpectVariableEnd,
    }
    let b = value.as_bytes();
    let mut state = State::Literal;
    let mut pos = 0;
    while pos < b.len() {
        let ch = b[pos];
        let has_next = pos + 1 < b.len();
        match state {
            State::Literal => {
                if ch == b'%' {
                    if !has_next {
                        return Err("invalid header configuration. Un-escaped %".to_owned());
                    }
                    if b[pos + 1] == b'%' {
                        pos += 1;
                    } else {
                        state = State::VariableName;
                    }
                }
            }
            State::VariableName => {
                if ch == b'%' {
                    state = State::Literal;
                } else if ch == b'(' {
                    state = State::ExpectArray;
                }
            }
            State::ExpectArray => {
                if ch == b'[' {
                    state = State::ExpectString;
                } else if ch != b' ' {
                    state = State::String;
                }
            }
            State::ExpectArrayDelimiterOrEnd => {
                if ch == b',' {
                    state = State::ExpectString;
                } else if ch == b']' {
                    state = State::ExpectArgsEnd;
                } else if ch != b' ' {
                    return Err("invalid header configuration. Expecting ',', ']', or whitespace".to_owned());
                }
            }
            State::ExpectString => {
                if ch == b'"' {
                    state = State::String;
                } else if ch != b' ' {
                    return Err("invalid header configuration. Expecting '\"'".to_owned());
                }
            }
            State::String => {
                if ch == b'\\' {
                    if !has_next {
                        return Err(
                            "invalid header configuration. Un-terminated backslash in JSON string".to_owned()
                        );
                    }
                    pos += 1;
                } else if ch == b')' {
                    state = State::ExpectVariableEnd;
                } else if ch == b'"' {
                    state = State::ExpectArrayDelimiterOrEnd;
                }
            }
            State::ExpectArgsEnd => {
                if ch == b')' {
                    state = State::ExpectVariableEnd;
                } else if ch != b' ' {
                    return Err(
                        "invalid header configuration. Expecting ')' or whitespace after '{}', but found '{}'".to_owned()
                    );
                }
            }
            State::ExpectVariableEnd => {
                if ch == b'%' {
                    state = State::Literal;
                } else if ch != b' ' {
                    return Err("invalid header configuration. Expecting '%' or whitespace after".to_owned());
                }
            }
        }
        pos += 1;
    }
    if state != State::Literal {
        return Err(format!("invalid header configuration. Un-terminated variable expression '{value}'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::tests::expect;

    // TestStrictValidateHTTPHeaderName, TestValidateHTTPHeaderName and the operation-name rules.
    #[test]
    fn header_names() {
        for (name, valid) in [
            ("header1", true),
            ("X-Requested-With", true),
            (":authority", false),
            ("", false),
            ("foo_bar", true),
        ] {
            assert_eq!(validate_strict_http_header_name(name).is_ok(), valid, "{name}");
        }
        for (name, valid) in [
            ("header1", true),
            ("X-Requested-With", true),
            (":authority", true),
            ("funky!$#_", true),
            ("", false),
            ("::", false),
            ("illegal\"char", false),
            ("@request.auth.claims.group", true),
            ("@REQUEST.auth.claims[a][b]", true),
            ("@request.auth.claims.", false),
            ("@request.auth.claims[]", false),
            (":unknown", false),
            ("é", false),
        ] {
            assert_eq!(validate_header_name(name).is_ok(), valid, "{name}");
        }
        assert_eq!(validate_header_name("").unwrap_err(), "header name cannot be empty");
        assert_eq!(validate_header_name("a b").unwrap_err(), "header name a b is not a valid header name");
        for (name, valid) in [("x-a", true), ("x_a", false), ("", false)] {
            assert_eq!(validate_probe_header_name(name).is_ok(), valid, "{name}");
        }
        for (name, valid) in [("*", true), ("header3", true), ("", false), ("a b", false)] {
            assert_eq!(validate_cors_http_header_name(name).is_ok(), valid, "{name}");
        }
        for (name, want) in [
            ("x-add", None),
            (":authority", None),
            ("Host", None),
            (":path", Some("invalid header \":path\": header cannot have \":\" prefix")),
            ("", Some("header name cannot be empty")),
        ] {
            expect(validate_http_header_with_authority_operation_name(name), want, name);
        }
        for (name, want) in [
            ("x-remove", None),
            ("HOST", Some("invalid header \"HOST\": cannot set Host header")),
            ("ho\u{17F}t", Some("cannot set Host header")),
            (":authority", Some("header cannot have \":\" prefix")),
            ("", Some("header name cannot be empty")),
        ] {
            expect(validate_http_header_operation_name(name), want, name);
        }
        assert!(
            is_authority_header(":Authority") && is_authority_header("host") && !is_authority_header("hostx")
        );
        assert!(is_internal_header(":path") && !is_internal_header("x-host"));
    }

    // TestValidateHTTPHeaderValue.
    #[test]
    fn header_values() {
        for (value, want) in [
            ("foo", None),
            ("%HOSTNAME%", None),
            ("100%%", None),
            ("prefix %HOSTNAME% suffix", None),
            ("%DOWNSTREAM_PEER_CERT_V_END(%b %d %H:%M:%S %Y %Z)%", None),
            ("%DYNAMIC_METADATA(com.test.my_filter)%", None),
            ("%REQ([\"a\", \"b\"])%", None),
            ("", None),
            ("tab\tok", None),
            ("%START_TIME%%", Some("header value configuration: invalid header configuration. Un-escaped %")),
            (
                "abc%123",
                Some(
                    "header value configuration: invalid header configuration. Un-terminated variable expression 'abc%123'",
                ),
            ),
            ("line\nbreak", Some("header value configuration line\nbreak is invalid")),
            ("%REQ([x])%", Some("Expecting '\"'")),
            ("%REQ([\"a\" x])%", Some("Expecting ',', ']', or whitespace")),
            ("%REQ([\"a\"] x)%", Some("Expecting ')' or whitespace after")),
            ("%REQ(a) x%", Some("Expecting '%' or whitespace after")),
            ("%REQ([\"a\\", Some("Un-terminated backslash in JSON string")),
        ] {
            expect(validate_header_value(value), want, value);
        }
    }
}
