//! Checks shared by several kinds: host names, ports, percentages, durations, IP addresses, `exportTo`,
//! labels and selectors, regular expressions, HTTP headers, and object metadata.
//!
//! Each check follows one function of Istio's `pkg/config/validation` (or the package it calls), named
//! in its documentation, and returns the reason in Istio's words: `Err("port number 0 must be in the
//! range 1..65535")`. Checks that Istio runs as one function but that can find several problems join
//! the distinct reasons with `"; "`.
//!
//! Istio is written in Go and its messages print values with Go's formatting; [`go_quote`] (`%q`),
//! [`go_float`] (`%v` of a float) and [`go_duration`] (`time.Duration`) reproduce it.
//!
//! Every function is total: any input (empty, huge, non-ASCII) gives a result, never a panic.

use std::collections::{BTreeMap, BTreeSet};

use api::{meta::ObjectMeta, type_v1beta1::PolicyTargetReference, wkt::Duration};

use crate::{Report, kube::Protocol};

// ===== Go formatting =====

/// Quotes text the way Go's `%q` / `strconv.Quote` does: in double quotes, with `"` and `\` escaped,
/// C escapes (`\n`, `\t`, …), `\xNN` for other ASCII control bytes, and `\uNNNN` / `\UNNNNNNNN` for
/// characters Go does not consider printable (format characters, non-ASCII spaces, private use).
pub fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if go_printable(c) => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the
/// ASCII space are printable; controls, format characters, non-ASCII spaces, private-use code points
/// and non-characters are not.
fn go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let u = c as u32;
    let format_or_private = matches!(
        u,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
            | 0xE000..=0xF8FF
            | 0xF0000..=0x10FFFF
    );
    let noncharacter = (0xFDD0..=0xFDEF).contains(&u) || (u & 0xFFFE) == 0xFFFE;
    !format_or_private && !noncharacter
}

/// Formats a float the way Go's `%v` does: shortest round-trip digits, in exponent form
/// (`1e-05`, `1e+06`) when the decimal exponent is below -4 or at least 6, plain otherwise (`150.5`).
pub fn go_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let sci = format!("{value:e}");
    let Some((mantissa, exponent)) = sci.split_once('e') else {
        return format!("{value}");
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    } else {
        format!("{value}")
    }
}

/// The number of nanoseconds Go's `durationpb.AsDuration` gives for a protobuf duration: the exact
/// value, or `i64::MAX` / `i64::MIN` (by the sign of `seconds`) when it overflows Go's `time.Duration`.
pub fn go_duration_nanos(d: &Duration) -> i64 {
    let saturated = if d.seconds < 0 { i64::MIN } else { i64::MAX };
    let Some(whole) = d.seconds.checked_mul(1_000_000_000) else {
        return saturated;
    };
    whole.checked_add(i64::from(d.nanos)).unwrap_or(saturated)
}

/// Formats nanoseconds the way Go's `time.Duration.String` does: `0s`, `999ns`, `1.5µs`, `1.5ms`,
/// `1.5s`, `1m1s`, `1h0m0s`.
pub fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    let body = if u < 1_000 {
        format!("{u}ns")
    } else if u < 1_000_000 {
        format!("{}µs", decimal(u, 3))
    } else if u < 1_000_000_000 {
        format!("{}ms", decimal(u, 6))
    } else {
        let total_secs = u / 1_000_000_000;
        let secs = decimal(u % 60_000_000_000, 9);
        let minutes = (total_secs / 60) % 60;
        let hours = total_secs / 3600;
        if hours > 0 {
            format!("{hours}h{minutes}m{secs}s")
        } else if minutes > 0 {
            format!("{minutes}m{secs}s")
        } else {
            format!("{secs}s")
        }
    };
    format!("{sign}{body}")
}

/// `value / 10^digits` with the remainder as a fraction, trailing zeros dropped (`1500, 3` → `1.5`).
fn decimal(value: u64, digits: u32) -> String {
    let scale = 10u64.pow(digits);
    let (int, frac) = (value / scale, value % scale);
    if frac == 0 {
        return int.to_string();
    }
    let frac = format!("{frac:0width$}", width = digits as usize);
    format!("{int}.{}", frac.trim_end_matches('0'))
}

/// Joins several reasons into one result: `Ok` when there are none, otherwise the distinct reasons in
/// order, separated by `"; "`.
fn join(reasons: Vec<String>) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    let distinct: Vec<String> = reasons.into_iter().filter(|r| seen.insert(r.clone())).collect();
    if distinct.is_empty() { Ok(()) } else { Err(distinct.join("; ")) }
}

/// Go's `strings.EqualFold` against an ASCII lower-case word: ASCII letters in any case, plus the
/// non-ASCII characters Unicode folds onto them (`ſ` for `s`, the Kelvin sign for `k`).
fn equal_fold_ascii(text: &str, lower_word: &str) -> bool {
    let mut chars = text.chars();
    for want in lower_word.chars() {
        let folded = match chars.next() {
            Some('\u{17F}') => 's',
            Some('\u{212A}') => 'k',
            Some(c) => c.to_ascii_lowercase(),
            None => return false,
        };
        if folded != want {
            return false;
        }
    }
    chars.next().is_none()
}

// ===== DNS names and hosts =====

const DNS1123_LABEL_MAX_LENGTH: usize = 63;

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?` without a length limit.
fn matches_label_pattern(value: &str) -> bool {
    let b = value.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            is_alnum(first) && is_alnum(last) && b.iter().all(|&c| is_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// `true` for a DNS label as Istio checks it (`labels.IsDNS1123Label`): 1 to 63 letters (either
/// case), digits and `-`, starting and ending with a letter or digit.
///
/// Istio accepts upper-case letters; Kubernetes object names do not ([`is_lowercase_dns1123_label`]).
pub fn is_dns1123_label(value: &str) -> bool {
    value.len() <= DNS1123_LABEL_MAX_LENGTH && matches_label_pattern(value)
}

/// `true` for a DNS label that may start with a wildcard, as Istio checks it
/// (`labels.IsWildcardDNS1123Label`): `*`, or a [DNS label](is_dns1123_label) optionally preceded by
/// `*` or `*-` (`*foo`, `*-foo`), at most 63 characters in all.
pub fn is_wildcard_dns1123_label(value: &str) -> bool {
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        return false;
    }
    if value == "*" {
        return true;
    }
    let rest = value.strip_prefix("*-").or_else(|| value.strip_prefix('*')).unwrap_or(value);
    matches_label_pattern(rest)
}

/// Checks the length of a domain name, following Istio's `CheckDNS1123Preconditions`:
/// `empty domain name not allowed`, `domain name "…" too long (max 255)`.
pub fn check_dns1123_preconditions(name: &str) -> Result<(), String> {
    if name.len() > 255 {
        return Err(format!("domain name {} too long (max 255)", go_quote(name)));
    }
    if name.is_empty() {
        return Err("empty domain name not allowed".to_owned());
    }
    Ok(())
}

/// `true` when Go's `strconv.Atoi` reads the text as a number: an optional sign and decimal digits
/// that fit a 64-bit integer (a longer run of digits is "out of range" and does not count).
fn go_atoi_ok(text: &str) -> bool {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && text.parse::<i64>().is_ok()
}

/// Checks the dot-separated labels of a domain name, following Istio's `ValidateDNS1123Labels`: the
/// top-level label may not be all-numeric, every label must be a [DNS label](is_dns1123_label), and a
/// single trailing dot is allowed (`istio.io.`).
///
/// Errors: `domain name "…" invalid (top level domain "…" cannot be all-numeric)`,
/// `domain name "…" invalid (label "…" invalid)`.
pub fn validate_dns1123_labels(domain: &str) -> Result<(), String> {
    let parts: Vec<&str> = domain.split('.').collect();
    let tld = parts.last().copied().unwrap_or("");
    if go_atoi_ok(tld) {
        return Err(format!(
            "domain name {} invalid (top level domain {} cannot be all-numeric)",
            go_quote(domain),
            go_quote(tld)
        ));
    }
    for (i, label) in parts.iter().enumerate() {
        if i == parts.len() - 1 && label.is_empty() {
            return Ok(());
        }
        if !is_dns1123_label(label) {
            return Err(format!(
                "domain name {} invalid (label {} invalid)",
                go_quote(domain),
                go_quote(label)
            ));
        }
    }
    Ok(())
}

/// Checks a fully-qualified domain name, following Istio's `ValidateFQDN`: 1 to 255 characters and
/// [valid labels](validate_dns1123_labels). Note that Istio accepts short names (`reviews`) here.
pub fn validate_fqdn(fqdn: &str) -> Result<(), String> {
    check_dns1123_preconditions(fqdn)?;
    validate_dns1123_labels(fqdn)
}

/// Checks a domain name whose first label may be a wildcard (`*`, `*.bar.com`, `*foo.bar.com`,
/// `*-foo.bar.com`), following Istio's `ValidateWildcardDomain`. IP addresses are rejected (their last
/// label is numeric).
pub fn validate_wildcard_domain(domain: &str) -> Result<(), String> {
    check_dns1123_preconditions(domain)?;
    let (first, rest) = match domain.split_once('.') {
        Some((first, rest)) => (first, Some(rest)),
        None => (domain, None),
    };
    if !is_wildcard_dns1123_label(first) {
        return Err(format!("domain name {} invalid (label {} invalid)", go_quote(domain), go_quote(first)));
    }
    match rest {
        Some(rest) => validate_dns1123_labels(rest),
        None => Ok(()),
    }
}

/// Rejects partial wildcards (`*foo.com`, `foo.*.com`), following Istio's `ValidatePartialWildCard`:
/// a host with `*` must be exactly `*` or start with `*.`. Error: `partial wildcard "…" not allowed`.
pub fn validate_partial_wildcard(host: &str) -> Result<(), String> {
    if host.contains('*') && host.len() != 1 && !host.starts_with("*.") {
        return Err(format!("partial wildcard {} not allowed", go_quote(host)));
    }
    Ok(())
}

const OUTBOUND_HOST_NAME_FORMAT: &str = "outbound_.<PORT>_._.<HOSTNAME>";

/// Checks a VirtualService host (or an SNI host when `sni`), following Istio's
/// `ValidateWildcardDomainForVirtualServiceBoundToGateway`: like [`validate_wildcard_domain`], except
/// that SNI names generated for AUTO_PASSTHROUGH (`outbound_.80_._.e2e.foobar.mesh`) are accepted
/// when their port part has a digit and their host part a letter.
pub fn validate_wildcard_domain_for_virtual_service_bound_to_gateway(
    sni: bool,
    domain: &str,
) -> Result<(), String> {
    check_dns1123_preconditions(domain)?;
    if sni && domain.starts_with("outbound_") {
        let parts: Vec<&str> = domain.split('_').collect();
        if parts.len() < 4 {
            return Err(format!(
                "domain name {domain} invalid, should follow '{OUTBOUND_HOST_NAME_FORMAT}' format"
            ));
        }
        let (direction, port, host) = (parts[0], parts[1].trim_matches('.'), parts[3].trim_matches('.'));
        if direction != "outbound" {
            return Err(format!(
                "domain name {} invalid (label {} invalid)",
                go_quote(domain),
                go_quote(direction)
            ));
        }
        for (part, ok) in [
            (port, port.bytes().any(|b| b.is_ascii_digit())),
            (host, host.bytes().any(|b| b.is_ascii_alphabetic())),
        ] {
            if !ok {
                return Err(format!(
                    "domain name {} invalid (label {} invalid). should follow {OUTBOUND_HOST_NAME_FORMAT} format",
                    go_quote(domain),
                    go_quote(part)
                ));
            }
        }
        return Ok(());
    }
    validate_wildcard_domain(domain)
}

/// Checks a trust domain, following Istio's `ValidateTrustDomain`: non-empty, dot-separated
/// [DNS labels](is_dns1123_label), one trailing dot allowed. Errors: `empty domain name not allowed`,
/// `trust domain name "…" invalid`.
pub fn validate_trust_domain(domain: &str) -> Result<(), String> {
    if domain.is_empty() {
        return Err("empty domain name not allowed".to_owned());
    }
    let parts: Vec<&str> = domain.split('.').collect();
    for (i, label) in parts.iter().enumerate() {
        if i == parts.len() - 1 && label.is_empty() {
            return Ok(());
        }
        if !is_dns1123_label(label) {
            return Err(format!("trust domain name {} invalid", go_quote(domain)));
        }
    }
    Ok(())
}

/// The host part of a Sidecar egress host or Gateway server host (Istio's
/// `validateSidecarOrGatewayHostnamePart`).
fn sidecar_or_gateway_hostname_part(hostname: &str, is_gateway: bool, reasons: &mut Vec<String>) {
    if hostname != "*" && !hostname.contains('.') {
        reasons.push("short names (non FQDN) are not allowed".to_owned());
    }
    if let Err(e) = validate_wildcard_domain(hostname) {
        // A Gateway may name an IP address instead of a host.
        if !is_gateway || !is_valid_ip_address(hostname) {
            reasons.push(e);
        }
    }
    if let Err(e) = validate_partial_wildcard(hostname) {
        reasons.push(e);
    }
}

/// Checks a `namespace/host` entry of a Sidecar egress listener (`is_gateway = false`) or a Gateway
/// server (`is_gateway = true`), following Istio's `ValidateNamespaceSlashWildcardHostname`.
///
/// - The namespace may be `*`, `.`, or a [DNS label](is_dns1123_label); in a Sidecar it may be prefixed
///   with `~` (excluded) and may be empty only as a reported error; in a Gateway `~` alone is allowed
///   with `gateway_semantics` (Gateways generated from the Gateway API).
/// - A Gateway host may omit the namespace (old style `host`) and may be an IP address.
/// - The host must be `*` or contain a dot (`short names (non FQDN) are not allowed`), be a
///   [wildcard domain](validate_wildcard_domain) and not a [partial wildcard](validate_partial_wildcard).
///
/// Errors include `host must be of form namespace/dnsName`,
/// `config namespace and dnsName in host entry cannot be empty`,
/// `invalid namespace value "…" in sidecar`, `invalid namespace value "…" in gateway`.
pub fn validate_namespace_slash_wildcard_hostname(
    hostname: &str,
    is_gateway: bool,
    gateway_semantics: bool,
) -> Result<(), String> {
    let mut reasons = Vec::new();
    let Some((namespace, host)) = hostname.split_once('/') else {
        if is_gateway {
            sidecar_or_gateway_hostname_part(hostname, true, &mut reasons);
        } else {
            reasons.push("host must be of form namespace/dnsName".to_owned());
        }
        return join(reasons);
    };
    if namespace.is_empty() || host.is_empty() {
        reasons.push("config namespace and dnsName in host entry cannot be empty".to_owned());
    }
    if !is_gateway {
        let ns = namespace.strip_prefix('~').unwrap_or(namespace);
        if !ns.is_empty() && ns != "*" && ns != "." && !is_dns1123_label(ns) {
            reasons.push(format!("invalid namespace value {} in sidecar", go_quote(namespace)));
        }
    } else if namespace != "*"
        && namespace != "."
        && !(namespace == "~" && gateway_semantics)
        && !is_dns1123_label(namespace)
    {
        reasons.push(format!("invalid namespace value {} in gateway", go_quote(namespace)));
    }
    sidecar_or_gateway_hostname_part(host, is_gateway, &mut reasons);
    join(reasons)
}

/// `true` for a Kubernetes DNS-1123 label: 1 to 63 lower-case letters, digits and `-`, starting and
/// ending with a letter or digit (namespace names, Service names).
pub fn is_lowercase_dns1123_label(value: &str) -> bool {
    value.len() <= DNS1123_LABEL_MAX_LENGTH
        && matches_label_pattern(value)
        && !value.bytes().any(|b| b.is_ascii_uppercase())
}

/// The DNS-1123 subdomain pattern (lower case), without the length limit.
fn matches_lowercase_subdomain_pattern(value: &str) -> bool {
    value.split('.').all(|l| matches_label_pattern(l) && !l.bytes().any(|b| b.is_ascii_uppercase()))
}

const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Checks a Kubernetes DNS-1123 subdomain (most object names), as the Kubernetes API server does: at
/// most 253 characters of lower-case letters, digits, `-` and `.`, each dot-separated part starting and
/// ending with a letter or digit. The error names the rule (`a lowercase RFC 1123 subdomain must
/// consist of …`, `must be no more than 253 characters`).
pub fn validate_dns1123_subdomain(value: &str) -> Result<(), String> {
    let mut reasons = Vec::new();
    if value.len() > 253 {
        reasons.push("must be no more than 253 characters".to_owned());
    }
    if !matches_lowercase_subdomain_pattern(value) {
        reasons.push(DNS1123_SUBDOMAIN_MESSAGE.to_owned());
    }
    join(reasons)
}

/// Checks a Kubernetes DNS-1123 label (namespace names), as the Kubernetes API server does
/// ([`is_lowercase_dns1123_label`]); errors `must be no more than 63 characters` and
/// `a lowercase RFC 1123 label must consist of …`.
pub fn validate_dns1123_label(value: &str) -> Result<(), String> {
    let mut reasons = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        reasons.push("must be no more than 63 characters".to_owned());
    }
    if !matches_label_pattern(value) || value.bytes().any(|b| b.is_ascii_uppercase()) {
        reasons.push(DNS1123_LABEL_MESSAGE.to_owned());
    }
    join(reasons)
}

// ===== Ports and protocols =====

/// Checks a port number, following Istio's `ValidatePort`: `port number 0 must be in the range 1..65535`.
pub fn validate_port(port: i64) -> Result<(), String> {
    if (1..=65535).contains(&port) {
        Ok(())
    } else {
        Err(format!("port number {port} must be in the range 1..65535"))
    }
}

/// Checks a port name, following Istio's `ValidatePortName`: a [DNS label](is_dns1123_label), else
/// `invalid port name: …`.
pub fn validate_port_name(name: &str) -> Result<(), String> {
    if is_dns1123_label(name) { Ok(()) } else { Err(format!("invalid port name: {name}")) }
}

/// Checks a protocol name, following Istio's `ValidateProtocol`: empty (sniffed) or a protocol
/// [`Protocol::parse`] knows, else `unsupported protocol: …`.
pub fn validate_protocol(protocol: &str) -> Result<(), String> {
    if !protocol.is_empty() && Protocol::parse(protocol).is_unsupported() {
        return Err(format!("unsupported protocol: {protocol}"));
    }
    Ok(())
}

// ===== Numbers =====

/// Checks an integer percentage (e.g. outlier detection `maxEjectionPercent`), following Istio's
/// `ValidatePercent`: `percentage 101 is not in range 0..100`.
pub fn validate_percent(value: i64) -> Result<(), String> {
    if (0..=100).contains(&value) {
        Ok(())
    } else {
        Err(format!("percentage {value} is not in range 0..100"))
    }
}

/// Checks the value of a `Percent` message (fault injection percentages), following Istio's
/// `validatePercentage`: 0, or between 0.0001 and 100, else
/// `percentage 101 is neither 0.0, nor in range [0.0001, 100.0]`. (Like Istio, NaN passes.)
#[allow(clippy::manual_range_contains)] // a range check would reject NaN, which Istio lets through
pub fn validate_percentage(value: f64) -> Result<(), String> {
    if value < 0.0 || value > 100.0 || (value > 0.0 && value < 0.0001) {
        return Err(format!("percentage {} is neither 0.0, nor in range [0.0001, 100.0]", go_float(value)));
    }
    Ok(())
}

/// Checks a route weight, following Istio's `validateWeight`: `weight -15 < 0`.
pub fn validate_weight(weight: i64) -> Result<(), String> {
    if weight < 0 { Err(format!("weight {weight} < 0")) } else { Ok(()) }
}

/// Checks an HTTP status code of a fault abort or direct response, following Istio's
/// `validateHTTPStatus`: `HTTP status 100 is not in range 200-599`. (Like Istio, 600 passes.)
pub fn validate_http_status(status: i64) -> Result<(), String> {
    if !(200..=600).contains(&status) {
        return Err(format!("HTTP status {status} is not in range 200-599"));
    }
    Ok(())
}

// ===== Durations =====

/// Checks a duration Istio wants in whole milliseconds and at least 1ms, following Istio's
/// `ValidateDuration`: `duration must be greater than 1ms` (also for zero and negative values),
/// `only durations to ms precision are supported` (also when `nanos` has the opposite sign of
/// `seconds`, which leaves a sub-millisecond remainder).
pub fn validate_duration(d: &Duration) -> Result<(), String> {
    let nanos = go_duration_nanos(d);
    if nanos < 1_000_000 {
        return Err("duration must be greater than 1ms".to_owned());
    }
    if nanos % 1_000_000 != 0 {
        return Err("only durations to ms precision are supported".to_owned());
    }
    Ok(())
}

/// Checks that a duration lies within `[min, max]`, following Istio's `ValidateDurationRange`:
/// `time 277777h46m39s must be >1ms and <1h0m0s` (the bounds themselves pass, whatever the wording says).
pub fn validate_duration_range(d: &Duration, min: Duration, max: Duration) -> Result<(), String> {
    let (value, low, high) = (go_duration_nanos(d), go_duration_nanos(&min), go_duration_nanos(&max));
    if value > high || value < low {
        return Err(format!(
            "time {} must be >{} and <{}",
            go_duration(value),
            go_duration(low),
            go_duration(high)
        ));
    }
    Ok(())
}

/// Checks a connect timeout, following Istio's `ValidateConnectTimeout`: a [valid
/// duration](validate_duration) between 1ms and 1h.
pub fn validate_connect_timeout(d: &Duration) -> Result<(), String> {
    validate_duration(d)?;
    validate_duration_range(d, Duration::from_millis(1), Duration { seconds: 3600, nanos: 0 })
}

// ===== IP addresses =====

/// An address as Go's `netip.ParseAddr` reads it.
struct GoAddr {
    is6: bool,
    zoned: bool,
}

fn addr_error(input: &str, msg: &str, at: &str) -> String {
    if at.is_empty() {
        format!("ParseAddr({}): {msg}", go_quote(input))
    } else {
        format!("ParseAddr({}): {msg} (at {})", go_quote(input), go_quote(at))
    }
}

/// Reads the dotted-decimal IPv4 text `s` (part of `input`), Go's rules: four fields of 1 to 3 digits,
/// no leading zeros, each at most 255.
fn parse_ipv4_fields(input: &str, s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let (mut value, mut digits, mut dots) = (0u32, 0u32, 0u32);
    for (i, &c) in b.iter().enumerate() {
        if c.is_ascii_digit() {
            if digits == 1 && value == 0 {
                return Err(addr_error(input, "IPv4 field has octet with leading zero", ""));
            }
            value = value * 10 + u32::from(c - b'0');
            digits += 1;
            if value > 255 {
                return Err(addr_error(input, "IPv4 field has value >255", ""));
            }
        } else if c == b'.' {
            if i == 0 || i == b.len() - 1 || b[i - 1] == b'.' {
                return Err(addr_error(input, "IPv4 field must have at least one digit", &s[i..]));
            }
            if dots == 3 {
                return Err(addr_error(input, "IPv4 address too long", ""));
            }
            dots += 1;
            value = 0;
            digits = 0;
        } else {
            return Err(addr_error(input, "unexpected character", s.get(i..).unwrap_or("")));
        }
    }
    if dots < 3 {
        return Err(addr_error(input, "IPv4 address too short", ""));
    }
    Ok(())
}

/// Reads IPv6 text with an optional `%zone`, Go's rules.
fn parse_ipv6(input: &str) -> Result<GoAddr, String> {
    let (mut s, zoned) = match input.split_once('%') {
        Some((_, "")) => return Err(addr_error(input, "zone must be a non-empty string", "")),
        Some((addr, _)) => (addr, true),
        None => (input, false),
    };
    let addr_end = s.len();
    let mut filled = 0usize; // bytes of the 16-byte address parsed so far
    let mut ellipsis: Option<usize> = None;
    if let Some(rest) = s.strip_prefix("::") {
        ellipsis = Some(0);
        s = rest;
        if s.is_empty() {
            return Ok(GoAddr { is6: true, zoned });
        }
    }
    while filled < 16 {
        let b = s.as_bytes();
        let mut off = 0;
        let mut acc = 0u32;
        while off < b.len() {
            let Some(v) = (b[off] as char).to_digit(16) else {
                break;
            };
            acc = (acc << 4) + v;
            if off > 3 {
                return Err(addr_error(input, "each group must have 4 or less digits", s));
            }
            if acc > 0xFFFF {
                return Err(addr_error(input, "IPv6 field has value >=2^16", s));
            }
            off += 1;
        }
        if off == 0 {
            return Err(addr_error(input, "each colon-separated field must have at least one digit", s));
        }
        if b.get(off) == Some(&b'.') {
            if ellipsis.is_none() && filled != 12 {
                return Err(addr_error(
                    input,
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    s,
                ));
            }
            if filled + 4 > 16 {
                return Err(addr_error(
                    input,
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    s,
                ));
            }
            let start = addr_end - s.len();
            parse_ipv4_fields(input, &input[start..addr_end])?;
            s = "";
            filled += 4;
            break;
        }
        filled += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Err(addr_error(input, "unexpected character, want colon", s));
        }
        if s.len() == 1 {
            return Err(addr_error(input, "colon must be followed by more characters", s));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Err(addr_error(input, "multiple :: in address", s));
            }
            ellipsis = Some(filled);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_error(input, "trailing garbage after address", s));
    }
    if filled < 16 {
        if ellipsis.is_none() {
            return Err(addr_error(input, "address string too short", ""));
        }
    } else if ellipsis.is_some() {
        return Err(addr_error(input, "the :: must expand to at least one field of zeros", ""));
    }
    Ok(GoAddr { is6: true, zoned })
}

/// Reads an IP address the way Go's `netip.ParseAddr` does (IPv4 without leading zeros, IPv6 with an
/// optional zone); the error is Go's message.
fn parse_go_addr(s: &str) -> Result<GoAddr, String> {
    for b in s.bytes() {
        match b {
            b'.' => {
                return parse_ipv4_fields(s, s).map(|()| GoAddr { is6: false, zoned: false });
            }
            b':' => return parse_ipv6(s),
            b'%' => return Err(addr_error(s, "missing IPv6 address", "")),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", ""))
}

/// Reads a CIDR prefix the way Go's `netip.ParsePrefix` does (the address may have host bits set; the
/// length is plain decimal without sign or leading zeros); the error is Go's message.
fn parse_go_prefix(s: &str) -> Result<(), String> {
    let fail = |msg: &str| Err(format!("netip.ParsePrefix({}): {msg}", go_quote(s)));
    let Some((addr, bits)) = s.rsplit_once('/') else {
        return fail("no '/'");
    };
    let ip = match parse_go_addr(addr) {
        Ok(ip) => ip,
        Err(e) => return fail(&e),
    };
    if ip.is6 && ip.zoned {
        return fail("IPv6 zones cannot be present in a prefix");
    }
    let bad_bits = || fail(&format!("bad bits after slash: {}", go_quote(bits)));
    if bits.len() > 1 && !(b'1'..=b'9').contains(&bits.as_bytes()[0]) {
        return bad_bits();
    }
    if !go_atoi_ok(bits) {
        return bad_bits();
    }
    let max = if ip.is6 { 128 } else { 32 };
    match bits.parse::<i64>() {
        Ok(n) if (0..=max).contains(&n) && ipnet_accepts(ip.is6, n) => Ok(()),
        _ => fail("prefix length out of range"),
    }
}

/// Cross-checks a prefix length with the `ipnet` crate's rules.
fn ipnet_accepts(is6: bool, bits: i64) -> bool {
    let Ok(bits) = u8::try_from(bits) else {
        return false;
    };
    if is6 {
        ipnet::Ipv6Net::new(std::net::Ipv6Addr::UNSPECIFIED, bits).is_ok()
    } else {
        ipnet::Ipv4Net::new(std::net::Ipv4Addr::UNSPECIFIED, bits).is_ok()
    }
}

/// `true` for an IPv4 or IPv6 address as Go's `netip.ParseAddr` reads it (Istio's
/// `netutil.IsValidIPAddress`): no CIDR suffix, no leading zeros in IPv4, IPv6 zones (`fe80::1%eth0`)
/// allowed.
pub fn is_valid_ip_address(s: &str) -> bool {
    parse_go_addr(s).is_ok()
}

/// `true` for an IPv4 address ([`is_valid_ip_address`] and dotted decimal).
pub fn is_ipv4_address(s: &str) -> bool {
    parse_go_addr(s).is_ok_and(|a| !a.is6)
}

/// `true` for an IPv6 address ([`is_valid_ip_address`] and not IPv4), including IPv4-mapped ones.
pub fn is_ipv6_address(s: &str) -> bool {
    parse_go_addr(s).is_ok_and(|a| a.is6)
}

/// Checks an IP address, following Istio's `ValidateIPAddress`: `1.1.A.1 is not a valid IP`.
pub fn validate_ip_address(addr: &str) -> Result<(), String> {
    if is_valid_ip_address(addr) { Ok(()) } else { Err(format!("{addr} is not a valid IP")) }
}

/// Checks a subnet in CIDR notation or a plain IP address, following Istio's `ValidateIPSubnet`:
/// `1.1.1.1/48 is not a valid CIDR block` (text with exactly one `/`), else as [`validate_ip_address`].
pub fn validate_ip_subnet(subnet: &str) -> Result<(), String> {
    if subnet.matches('/').count() == 1 {
        return match parse_go_prefix(subnet) {
            Ok(()) => Ok(()),
            Err(_) => Err(format!("{subnet} is not a valid CIDR block")),
        };
    }
    validate_ip_address(subnet)
}

/// Checks one entry of an AuthorizationPolicy `ipBlocks`-style list, following Istio's
/// `security.ValidateIPs`: text with a `/` must be a CIDR (`bad CIDR range (…): netip.ParsePrefix(…): …`),
/// other text an IP address (`bad IP address (…)`).
pub fn validate_ip_block(value: &str) -> Result<(), String> {
    if value.contains('/') {
        parse_go_prefix(value).map_err(|e| format!("bad CIDR range ({value}): {e}"))
    } else if is_valid_ip_address(value) {
        Ok(())
    } else {
        Err(format!("bad IP address ({value})"))
    }
}

/// Checks a Unix domain socket address (after `unix://`), following Istio's `ValidateUnixAddress`:
/// an absolute file path (not ending in `/`) or an abstract socket starting with `@`.
pub fn validate_unix_address(addr: &str) -> Result<(), String> {
    if addr.is_empty() {
        return Err("unix address must not be empty".to_owned());
    }
    if addr.starts_with('@') {
        return Ok(());
    }
    if !addr.starts_with('/') || addr.ends_with('/') {
        return Err(format!("{addr} is not an absolute path to a file"));
    }
    Ok(())
}

// ===== exportTo =====

/// Checks an `exportTo` list, following Istio's `validateExportTo`.
///
/// `namespace` is the object's namespace (`.` stands for it). Entries must be `.`, `*` or a [DNS
/// label](is_dns1123_label); `~` (visible to no one) only in a ServiceEntry (`is_service_entry`) and
/// only alone; `*` only alone; no duplicates (`.` and the namespace itself count as the same). A
/// DestinationRule with a workload selector (`is_destination_rule_with_selector`) may export only to
/// its own namespace.
///
/// Errors (joined): `duplicate entries in exportTo: . and current namespace ns5`,
/// `duplicate entries in exportTo for entry ns1`,
/// `exportTo ~ (none) is not allowed for Istio configuration objects`,
/// `only .,*, or a valid DNS 1123 label is allowed as exportTo entry`,
/// `destination rule with workload selector cannot have multiple entries in exportTo`,
/// `destination rule with workload selector cannot have exportTo beyond current namespace`,
/// `cannot have both public (*) and non-public exportTo values for a resource`,
/// `cannot export service entry to no one (~) and someone`.
pub fn validate_export_to(
    namespace: &str,
    export_to: &[String],
    is_service_entry: bool,
    is_destination_rule_with_selector: bool,
) -> Result<(), String> {
    if export_to.is_empty() {
        return Ok(());
    }
    let mut reasons = Vec::new();
    let mut set: BTreeSet<&str> = BTreeSet::new();
    for entry in export_to {
        let key = if entry == "." { namespace } else { entry.as_str() };
        if set.contains(key) {
            if key != entry {
                reasons.push(format!("duplicate entries in exportTo: . and current namespace {namespace}"));
            } else {
                reasons.push(format!("duplicate entries in exportTo for entry {entry}"));
            }
        } else if is_service_entry && entry == "~" {
            set.insert(key);
        } else {
            match key {
                "." | "*" => {
                    set.insert(key);
                }
                "~" => reasons
                    .push("exportTo ~ (none) is not allowed for Istio configuration objects".to_owned()),
                _ if is_dns1123_label(key) => {
                    set.insert(key);
                }
                _ => reasons
                    .push("only .,*, or a valid DNS 1123 label is allowed as exportTo entry".to_owned()),
            }
        }
    }
    if is_destination_rule_with_selector && !set.is_empty() {
        if set.contains(namespace) {
            if set.len() > 1 {
                reasons.push(
                    "destination rule with workload selector cannot have multiple entries in exportTo"
                        .to_owned(),
                );
            }
        } else {
            reasons.push(
                "destination rule with workload selector cannot have exportTo beyond current namespace"
                    .to_owned(),
            );
        }
    }
    if set.contains("*") && export_to.len() > 1 {
        reasons.push("cannot have both public (*) and non-public exportTo values for a resource".to_owned());
    }
    if set.contains("~") && export_to.len() > 1 {
        reasons.push("cannot export service entry to no one (~) and someone".to_owned());
    }
    join(reasons)
}

// ===== Labels and selectors =====

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: alphanumeric at both ends, `-`, `_`, `.` inside.
fn is_qualified_name_part(value: &str) -> bool {
    let b = value.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            is_alnum(first)
                && is_alnum(last)
                && b.iter().all(|&c| is_alnum(c) || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// One label key as Istio's `labels.Instance.Validate` checks it.
fn validate_istio_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| p.split('.').all(matches_label_pattern));
    if !prefix_ok || !is_qualified_name_part(name) {
        return Err(format!("invalid tag key: {}", go_quote(key)));
    }
    if prefix.is_some_and(|p| p.len() > 253) {
        return Err(format!("invalid tag key: {} (DNS prefix is too long)", go_quote(key)));
    }
    if name.len() > DNS1123_LABEL_MAX_LENGTH {
        return Err(format!("invalid tag key: {} (name is too long)", go_quote(key)));
    }
    Ok(())
}

/// Checks labels in a spec (WorkloadEntry `labels`, `sourceLabels` matches, …), following Istio's
/// `labels.Instance.Validate`.
///
/// Keys: an optional prefix of dot-separated DNS labels (either case, at most 253 characters) and `/`,
/// then a name of at most 63 letters, digits, `-`, `_`, `.`, alphanumeric at both ends. Values: empty
/// or the same character rules as names, with no length limit (Istio does not check it).
/// Errors (joined): `invalid tag key: "…"`, `invalid tag key: "…" (DNS prefix is too long)`,
/// `invalid tag key: "…" (name is too long)`, `invalid tag value: "…"`.
pub fn validate_labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    let mut reasons = Vec::new();
    for (key, value) in labels {
        if let Err(e) = validate_istio_label_key(key) {
            reasons.push(e);
        }
        if !value.is_empty() && !is_qualified_name_part(value) {
            reasons.push(format!("invalid tag value: {}", go_quote(value)));
        }
    }
    join(reasons)
}

const QUALIFIED_NAME_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// A Kubernetes qualified name (label or annotation key) as the API server checks it.
fn k8s_qualified_name(key: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                reasons.push("prefix part must be non-empty".to_owned());
            } else if let Err(e) = validate_dns1123_subdomain(prefix) {
                reasons.extend(e.split("; ").map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            reasons.push(format!(
                "a qualified name {QUALIFIED_NAME_MESSAGE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return reasons;
        }
    };
    if name.is_empty() {
        reasons.push("name part must be non-empty".to_owned());
    } else if name.len() > DNS1123_LABEL_MAX_LENGTH {
        reasons.push("name part must be no more than 63 characters".to_owned());
    }
    if !is_qualified_name_part(name) {
        reasons.push(format!("name part {QUALIFIED_NAME_MESSAGE}"));
    }
    reasons
}

/// Checks `metadata.labels` as the Kubernetes API server does.
///
/// Keys: a qualified name, an optional lower-case DNS subdomain prefix (at most 253 characters) and
/// `/`, then a name of at most 63 letters, digits, `-`, `_`, `.`, alphanumeric at both ends. Values: at
/// most 63 characters, empty or with the same character rules as names. Errors name the key or value:
/// `Invalid value: "bad key": name part must consist of …`.
pub fn validate_k8s_labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    let mut reasons = Vec::new();
    for (key, value) in labels {
        for reason in k8s_qualified_name(key) {
            reasons.push(format!("Invalid value: {}: {reason}", go_quote(key)));
        }
        if value.len() > DNS1123_LABEL_MAX_LENGTH {
            reasons.push(format!("Invalid value: {}: must be no more than 63 characters", go_quote(value)));
        }
        if !value.is_empty() && !is_qualified_name_part(value) {
            reasons.push(format!(
                "Invalid value: {}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                go_quote(value)
            ));
        }
    }
    join(reasons)
}

/// Largest total size of `metadata.annotations` (keys and values) the Kubernetes API server accepts.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Checks `metadata.annotations` as the Kubernetes API server does: keys are qualified names (checked
/// lower-cased, as Kubernetes does) and keys plus values take at most 256 KiB.
pub fn validate_k8s_annotations(annotations: &BTreeMap<String, String>) -> Result<(), String> {
    let mut reasons = Vec::new();
    let mut total = 0usize;
    for (key, value) in annotations {
        for reason in k8s_qualified_name(&key.to_ascii_lowercase()) {
            reasons.push(format!("Invalid value: {}: {reason}", go_quote(key)));
        }
        total = total.saturating_add(key.len()).saturating_add(value.len());
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        reasons.push(format!("Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"));
    }
    join(reasons)
}

/// Checks the labels of a workload selector, following Istio's `validateWorkloadSelector` (and
/// `ValidateAlphaWorkloadSelector`): no empty key (`empty key is not supported in selector: "=v"`) and
/// no `*` in keys or values (`wildcard is not supported in selector: "k=v"`). See
/// [`check_workload_selector`] for the warning about a selector without labels.
pub fn validate_workload_selector_labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    let mut reasons = Vec::new();
    for (key, value) in labels {
        let pair = go_quote(&format!("{key}={value}"));
        if key.is_empty() {
            reasons.push(format!("empty key is not supported in selector: {pair}"));
        }
        if key.contains('*') || value.contains('*') {
            reasons.push(format!("wildcard is not supported in selector: {pair}"));
        }
    }
    join(reasons)
}

/// Checks a workload selector that is present in the spec (Istio's `validateWorkloadSelector`): the
/// errors of [`validate_workload_selector_labels`] at `path`, and the warning
/// `workload selector specified without labels` when there are none.
pub fn check_workload_selector(path: &str, labels: &BTreeMap<String, String>, report: &mut Report) {
    report.check(path, validate_workload_selector_labels(labels));
    if labels.is_empty() {
        report.warn(path, "workload selector specified without labels");
    }
}

/// Kinds a policy `targetRef` may name (group as Istio prints it, version, kind).
const ALLOWED_TARGET_REFS: [(&str, &str, &str); 4] = [
    ("core", "v1", "Service"),
    ("networking.istio.io", "v1", "ServiceEntry"),
    ("gateway.networking.k8s.io", "v1", "Gateway"),
    ("gateway.networking.k8s.io", "v1", "GatewayClass"),
];

/// Checks a policy `targetRef`, following Istio's `validatePolicyTargetReference`: a name, no
/// namespace, and a Service, ServiceEntry, Gateway API Gateway or GatewayClass.
///
/// Errors (joined): `targetRef name must be set`,
/// `targetRef namespace must not be set; cross namespace referencing is not supported`,
/// `targetRef must be to one of [core/v1/Service …] but was <group>/<kind>`.
pub fn validate_policy_target_reference(target: &PolicyTargetReference) -> Result<(), String> {
    let mut reasons = Vec::new();
    if target.name.is_empty() {
        reasons.push("targetRef name must be set".to_owned());
    }
    if !target.namespace.is_empty() {
        reasons.push(
            "targetRef namespace must not be set; cross namespace referencing is not supported".to_owned(),
        );
    }
    let group = if target.group.is_empty() { "core" } else { target.group.as_str() };
    if !ALLOWED_TARGET_REFS.iter().any(|(g, _, k)| *g == group && *k == target.kind) {
        let allowed =
            ALLOWED_TARGET_REFS.iter().map(|(g, v, k)| format!("{g}/{v}/{k}")).collect::<Vec<_>>().join(" ");
        reasons.push(format!(
            "targetRef must be to one of [{allowed}] but was {}/{}",
            target.group, target.kind
        ));
    }
    join(reasons)
}

/// Checks that at most one of `selector`, `targetRef` and `targetRefs` is used, following Istio's
/// `validateOneOfSelectorType`: `only one of targetRefs or workloadSelector can be set`.
pub fn validate_one_of_selector_type(
    has_selector: bool,
    has_target_ref: bool,
    target_refs: usize,
) -> Result<(), String> {
    let set = usize::from(has_selector) + usize::from(has_target_ref) + usize::from(target_refs > 0);
    if set > 1 {
        return Err("only one of targetRefs or workloadSelector can be set".to_owned());
    }
    Ok(())
}

// ===== Names used in routes =====

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

/// Longest regex Istio accepts; Envoy limits the compiled RE2 program size, which Istio approximates
/// by the length of the text.
pub const MAX_REGEX_LENGTH: usize = 1024;

/// Checks a regex used in Envoy config, following Istio's `validateStringRegexp`: at most 1024 bytes
/// (`"uri": regex is too large, max length allowed is 1024`) and valid RE2 syntax as Go reads it
/// (`"uri": error parsing regexp: missing closing ]: `[`; Istio uses RE2 style regex-based match
/// (https://github.com/google/re2/wiki/Syntax)`). `location` names the field, as in Istio's messages.
pub fn validate_string_regexp(re: &str, location: &str) -> Result<(), String> {
    if re.len() > MAX_REGEX_LENGTH {
        return Err(format!(
            "{}: regex is too large, max length allowed is {MAX_REGEX_LENGTH}",
            go_quote(location)
        ));
    }
    validate_regex(re).map_err(|e| {
        format!(
            "{}: {e}; Istio uses RE2 style regex-based match (https://github.com/google/re2/wiki/Syntax)",
            go_quote(location)
        )
    })
}

/// Checks RE2 regex syntax the way Istio does, i.e. with Go's `regexp.Compile`; the error is Go's,
/// e.g. ``error parsing regexp: invalid repeat count: `{1001}` ``.
///
/// Go's RE2 dialect, as opposed to the `regex` crate's: `\Q…\E` quotes literally; a `{` that does not
/// start a well-formed repetition is a literal (`a{,3}`, `a{x}`); repetition counts go up to 1000, also
/// when nested (`(a{100}){100}` is rejected); stacked repetitions are errors (`a**`, `a{2}{3}`);
/// escaped punctuation is literal (`\<`, `\_`); `\C`, `\Z`, `\e`, `\u`, back-references, look-around and
/// the `x`/`u`/`R` flags are rejected; `\pN` names are Go's Unicode categories and scripts; capture
/// names are ASCII letters, digits and `_` (duplicates allowed); `[` inside a class is literal unless it
/// starts `[:name:]`.
///
/// The pattern is checked by a scanner that follows Go's parser token by token (so the first error is
/// the one Go reports), and then rewritten into an equivalent canonical pattern that `regex_syntax`
/// parses as a second check. Go's limits on tree height (1000) and program size are not modelled; they
/// cannot be reached by patterns of Istio's maximum length ([`MAX_REGEX_LENGTH`]).
pub fn validate_regex(re: &str) -> Result<(), String> {
    let canonical =
        go_re::scan(re).map_err(|(code, expr)| format!("error parsing regexp: {code}: `{expr}`"))?;
    let mut parser = regex_syntax::ast::parse::ParserBuilder::new().nest_limit(4096).build();
    match parser.parse(&canonical) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.kind(), regex_syntax::ast::ErrorKind::NestLimitExceeded(_)) => {
            Err(format!("error parsing regexp: expression nests too deeply: `{re}`"))
        }
        Err(e) => Err(format!("error parsing regexp: {}: `{re}`", e.kind())),
    }
}

/// A Go-RE2 syntax scanner: reports Go's first error, or returns the pattern rewritten for
/// `regex_syntax` (literals as `\x{…}`, Unicode classes as `\pL`, capture names dropped, flag groups
/// normalized and moved to just before the next atom).
mod go_re {
    /// Error kinds, in Go's words.
    pub(super) const INVALID_CHAR_RANGE: &str = "invalid character class range";
    pub(super) const INVALID_ESCAPE: &str = "invalid escape sequence";
    pub(super) const INVALID_NAMED_CAPTURE: &str = "invalid named capture";
    pub(super) const INVALID_PERL_OP: &str = "invalid or unsupported Perl syntax";
    pub(super) const INVALID_REPEAT_OP: &str = "invalid nested repetition operator";
    pub(super) const INVALID_REPEAT_SIZE: &str = "invalid repeat count";
    pub(super) const MISSING_BRACKET: &str = "missing closing ]";
    pub(super) const MISSING_PAREN: &str = "missing closing )";
    pub(super) const MISSING_REPEAT_ARGUMENT: &str = "missing argument to repetition operator";
    pub(super) const TRAILING_BACKSLASH: &str = "trailing backslash at end of expression";
    pub(super) const UNEXPECTED_PAREN: &str = "unexpected )";

    type Error = (&'static str, String);

    fn err<T>(code: &'static str, expr: &str) -> Result<T, Error> {
        Err((code, expr.to_owned()))
    }

    /// Unicode class names Go 1.26 accepts in `\p{…}` (general categories and their long names,
    /// scripts, and `Any`, `Assigned`, `ASCII`), compared after [`canonical_name`].
    #[rustfmt::skip]
    const UNICODE_NAMES: &[&str] = &[
        "ASCII", "Adlam", "Ahom", "Any", "Arabic", "Armenian", "Assigned", "Avestan", "Balinese", "Bamum",
        "Batak", "Bengali", "Bhaiksuki", "Bopomofo", "Brahmi", "Braille", "Buginese", "Buhid", "C", "Carian",
        "Cased_Letter", "Cc", "Cf", "Chakma", "Cham", "Cherokee", "Chorasmian", "Close_Punctuation", "Cn",
        "Co", "Combining_Mark", "Common", "Connector_Punctuation", "Control", "Coptic", "Cs", "Cuneiform",
        "Currency_Symbol", "Cypriot", "Cyrillic", "Dash_Punctuation", "Decimal_Number", "Deseret",
        "Devanagari", "Dogra", "Duployan", "Elbasan", "Elymaic", "Enclosing_Mark", "Ethiopic",
        "Final_Punctuation", "Format", "Georgian", "Glagolitic", "Gothic", "Grantha", "Greek", "Gujarati",
        "Gurmukhi", "Han", "Hangul", "Hanunoo", "Hatran", "Hebrew", "Hiragana", "Inherited",
        "Initial_Punctuation", "Javanese", "Kaithi", "Kannada", "Katakana", "Kawi", "Kharoshthi", "Khmer",
        "Khojki", "Khudawadi", "L", "LC", "Lao", "Latin", "Lepcha", "Letter", "Letter_Number", "Limbu",
        "Line_Separator", "Lisu", "Ll", "Lm", "Lo", "Lowercase_Letter", "Lt", "Lu", "Lycian", "Lydian", "M",
        "Mahajani", "Makasar", "Malayalam", "Mandaic", "Manichaean", "Marchen", "Mark", "Math_Symbol", "Mc",
        "Me", "Medefaidrin", "Miao", "Mn", "Modi", "Modifier_Letter", "Modifier_Symbol", "Mongolian", "Mro",
        "Multani", "Myanmar", "N", "Nabataean", "Nandinagari", "Nd", "Newa", "Nko", "Nl", "No",
        "Nonspacing_Mark", "Number", "Nushu", "Ogham", "Open_Punctuation", "Oriya", "Osage", "Osmanya",
        "Other", "Other_Letter", "Other_Number", "Other_Punctuation", "Other_Symbol", "P", "Palmyrene",
        "Paragraph_Separator", "Pc", "Pd", "Pe", "Pf", "Phoenician", "Pi", "Po", "Private_Use", "Ps",
        "Punctuation", "Rejang", "Runic", "S", "Samaritan", "Saurashtra", "Sc", "Separator", "Sharada",
        "Shavian", "Siddham", "Sinhala", "Sk", "Sm", "So", "Sogdian", "Soyombo", "Space_Separator",
        "Spacing_Mark", "Sundanese", "Surrogate", "Symbol", "Syriac", "Tagalog", "Tagbanwa", "Takri", "Tamil",
        "Tangsa", "Tangut", "Telugu", "Thaana", "Thai", "Tibetan", "Tifinagh", "Tirhuta", "Titlecase_Letter",
        "Toto", "Ugaritic", "Unassigned", "Uppercase_Letter", "Vai", "Vithkuqi", "Wancho", "Yezidi", "Yi",
        "Z", "Zl", "Zp", "Zs", "cntrl", "digit", "punct",
    ];

    /// POSIX class names Go accepts in `[[:name:]]` (also negated, `[[:^name:]]`).
    const POSIX_NAMES: &[&str] = &[
        "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space",
        "upper", "word", "xdigit",
    ];

    /// Go's lookup key for a Unicode class name: `_`, `-` and spaces dropped, the first letter
    /// upper-cased and the other ASCII letters lower-cased.
    fn canonical_name(name: &str) -> String {
        let mut out = String::with_capacity(name.len());
        let mut first = true;
        for c in name.chars() {
            match c {
                '_' | '-' | ' ' => {}
                c if first => {
                    out.push(c.to_ascii_uppercase());
                    first = false;
                }
                c => out.push(c.to_ascii_lowercase()),
            }
        }
        out
    }

    fn known_unicode_class(name: &str) -> bool {
        let want = canonical_name(name);
        UNICODE_NAMES.iter().any(|n| canonical_name(n) == want)
    }

    /// What is on top of Go's parse stack at the current group level.
    #[derive(Clone, Copy)]
    enum Top {
        /// Nothing (start of the pattern).
        Empty,
        /// `(` or `|`: a repetition here has no argument.
        Marker,
        /// An expression; `product` is the largest product of nested counted repetitions in it.
        Atom { product: u64 },
    }

    struct Level {
        top: Top,
        /// Largest repetition product among the finished expressions of this level.
        max_product: u64,
    }

    impl Level {
        fn fold(&mut self) {
            if let Top::Atom { product } = self.top {
                self.max_product = self.max_product.max(product);
            }
        }
    }

    struct Scanner<'a> {
        whole: &'a str,
        out: String,
        pending_flags: String,
        stack: Vec<Level>,
        level: Level,
    }

    /// Writes one literal code point in a form `regex_syntax` reads everywhere.
    fn push_literal(out: &mut String, value: u32) {
        let value = if (0xD800..=0xDFFF).contains(&value) { 0xFFFD } else { value };
        match char::from_u32(value) {
            Some(c) if c.is_ascii_alphanumeric() => out.push(c),
            _ => out.push_str(&format!("\\x{{{value:X}}}")),
        }
    }

    impl Scanner<'_> {
        /// Starts a new expression at this level, writing `text` for it.
        fn atom(&mut self, text: &str) {
            self.out.push_str(&std::mem::take(&mut self.pending_flags));
            self.out.push_str(text);
            self.level.fold();
            self.level.top = Top::Atom { product: 1 };
        }

        fn literal(&mut self, value: u32) {
            let mut text = String::new();
            push_literal(&mut text, value);
            self.atom(&text);
        }
    }

    /// The first character of `s` and its length; U+FFFD and 0 at the end (as Go's `nextRune` does).
    fn next_char(s: &str) -> (char, usize) {
        s.chars().next().map_or(('\u{FFFD}', 0), |c| (c, c.len_utf8()))
    }

    /// Go's `parseEscape`: an escape denoting one character, at the start of `s` (which begins with
    /// `\`). Returns the code point and the length consumed.
    fn parse_escape(s: &str) -> Result<(u32, usize), Error> {
        let rest = &s[1..];
        if rest.is_empty() {
            return err(TRAILING_BACKSLASH, "");
        }
        let (c, len) = next_char(rest);
        let mut pos = 1 + len;
        let invalid = |end: usize| err(INVALID_ESCAPE, &s[..end.min(s.len())]);
        let is_octal = |b: Option<&u8>| b.is_some_and(|b| (b'0'..=b'7').contains(b));
        match c {
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((c as u32, pos)),
            '1'..='7' if !is_octal(s.as_bytes().get(pos)) => invalid(pos),
            '0'..='7' => {
                let mut value = c as u32 - '0' as u32;
                for _ in 1..3 {
                    match s.as_bytes().get(pos) {
                        Some(&b) if (b'0'..=b'7').contains(&b) => {
                            value = value * 8 + u32::from(b - b'0');
                            pos += 1;
                        }
                        _ => break,
                    }
                }
                Ok((value, pos))
            }
            'x' => {
                if pos >= s.len() {
                    return invalid(pos);
                }
                let (c, len) = next_char(&s[pos..]);
                pos += len;
                if c == '{' {
                    let mut value = 0u32;
                    let mut digits = 0;
                    loop {
                        if pos >= s.len() {
                            return invalid(pos);
                        }
                        let (c, len) = next_char(&s[pos..]);
                        pos += len;
                        if c == '}' {
                            break;
                        }
                        let Some(v) = c.to_digit(16) else {
                            return invalid(pos);
                        };
                        value = value * 16 + v;
                        if value > 0x10FFFF {
                            return invalid(pos);
                        }
                        digits += 1;
                    }
                    if digits == 0 {
                        return invalid(pos);
                    }
                    return Ok((value, pos));
                }
                let high = c.to_digit(16);
                let (c2, len2) = next_char(&s[pos..]);
                pos += len2;
                match (high, if len2 == 0 { None } else { c2.to_digit(16) }) {
                    (Some(h), Some(l)) => Ok((h * 16 + l, pos)),
                    _ => invalid(pos),
                }
            }
            'a' => Ok((7, pos)),
            'f' => Ok((12, pos)),
            'n' => Ok((10, pos)),
            'r' => Ok((13, pos)),
            't' => Ok((9, pos)),
            'v' => Ok((11, pos)),
            _ => invalid(pos),
        }
    }

    /// Go's `parseUnicodeClass` at `\p` / `\P` (the start of `s`). Returns the canonical text and the
    /// length consumed.
    fn parse_unicode_class(s: &str) -> Result<(&'static str, usize), Error> {
        let mut negated = s.as_bytes()[1] == b'P';
        let (c, len) = next_char(&s[2..]);
        let (seq_len, name) = if c != '{' {
            (2 + len, &s[2..2 + len])
        } else {
            let Some(end) = s.find('}') else {
                return err(INVALID_CHAR_RANGE, s);
            };
            (end + 1, &s[3..end])
        };
        let name = match name.strip_prefix('^') {
            Some(rest) => {
                negated = !negated;
                rest
            }
            None => name,
        };
        if !known_unicode_class(name) {
            return err(INVALID_CHAR_RANGE, &s[..seq_len]);
        }
        Ok((if negated { "\\PL" } else { "\\pL" }, seq_len))
    }

    fn is_perl_class(s: &str) -> bool {
        matches!(s.as_bytes(), [b'\\', b'd' | b'D' | b's' | b'S' | b'w' | b'W', ..])
    }

    /// Go's `parseClassChar`: one character of a class, or an error when the class is unterminated.
    fn parse_class_char(t: &str, whole_class: &str) -> Result<(u32, usize), Error> {
        if t.is_empty() {
            return err(MISSING_BRACKET, whole_class);
        }
        if t.starts_with('\\') {
            return parse_escape(t);
        }
        let (c, len) = next_char(t);
        Ok((c as u32, len))
    }

    /// Go's `parseClass` at `[` (the start of `s`). Returns the canonical class and the length consumed.
    fn parse_class(s: &str) -> Result<(String, usize), Error> {
        let mut out = String::from("[");
        let mut pos = 1;
        if s[pos..].starts_with('^') {
            out.push('^');
            pos += 1;
        }
        let mut first = true;
        loop {
            let t = &s[pos..];
            if t.starts_with(']') && !first {
                break;
            }
            first = false;
            if t.len() > 2
                && t.starts_with("[:")
                && let Some(i) = t[2..].find(":]")
            {
                let name = &t[..i + 4];
                let inner = &name[2..name.len() - 2];
                if !POSIX_NAMES.contains(&inner.strip_prefix('^').unwrap_or(inner)) {
                    return err(INVALID_CHAR_RANGE, name);
                }
                out.push_str(name);
                pos += name.len();
                continue;
            }
            if t.len() >= 2 && (t.starts_with("\\p") || t.starts_with("\\P")) {
                let (text, len) = parse_unicode_class(t)?;
                out.push_str(text);
                pos += len;
                continue;
            }
            if is_perl_class(t) {
                out.push_str(&t[..2]);
                pos += 2;
                continue;
            }
            let (lo, len) = parse_class_char(t, s)?;
            let mut used = len;
            let mut hi = lo;
            let after = &t[used..];
            if after.len() >= 2 && after.starts_with('-') && !after[1..].starts_with(']') {
                let (h, len) = parse_class_char(&after[1..], s)?;
                hi = h;
                used += 1 + len;
                if hi < lo {
                    return err(INVALID_CHAR_RANGE, &t[..used]);
                }
            }
            if (0xD800..=0xDFFF).contains(&lo) || (0xD800..=0xDFFF).contains(&hi) {
                push_literal(&mut out, 0xFFFD);
            } else {
                push_literal(&mut out, lo);
                if hi != lo {
                    out.push('-');
                    push_literal(&mut out, hi);
                }
            }
            pos += used;
        }
        out.push(']');
        Ok((out, pos + 1))
    }

    /// Go's `parseInt` for repetition counts: `None` when there are no digits or a leading zero;
    /// `Some(-1)` for a number of more than 8 digits.
    fn parse_count(s: &str) -> Option<(i64, usize)> {
        let b = s.as_bytes();
        if b.first().is_none_or(|c| !c.is_ascii_digit()) {
            return None;
        }
        if b.len() >= 2 && b[0] == b'0' && b[1].is_ascii_digit() {
            return None;
        }
        let len = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut value: i64 = 0;
        for &c in &b[..len] {
            if value >= 100_000_000 {
                value = -1;
                break;
            }
            value = value * 10 + i64::from(c - b'0');
        }
        Some((value, len))
    }

    /// Go's `parseRepeat` at `{`: `(min, max, length)` with `max == -1` for `{n,}` and `min == -1` when
    /// a number is too big; `None` when the text is not a repetition (then `{` is a literal).
    fn parse_repeat(s: &str) -> Option<(i64, i64, usize)> {
        let mut pos = 1;
        let (min, len) = parse_count(&s[pos..])?;
        pos += len;
        let mut min = min;
        let max;
        match s.as_bytes().get(pos)? {
            b',' => {
                pos += 1;
                match s.as_bytes().get(pos)? {
                    b'}' => max = -1,
                    _ => {
                        let (m, len) = parse_count(&s[pos..])?;
                        pos += len;
                        if m < 0 {
                            min = -1;
                        }
                        max = m;
                    }
                }
            }
            _ => max = min,
        }
        if s.as_bytes().get(pos) != Some(&b'}') {
            return None;
        }
        Some((min, max, pos + 1))
    }

    /// Go's `parsePerlFlags` at `(?` (the start of `s`): a named capture, a non-capturing group, or a
    /// flag change. Returns the canonical text, whether it opens a group, and the length consumed.
    fn parse_perl_flags(s: &str) -> Result<(String, bool, usize), Error> {
        let b = s.as_bytes();
        let named_p = b.len() > 4 && b[2] == b'P' && b[3] == b'<';
        let named = b.len() > 3 && b[2] == b'<';
        if named_p || named {
            let start = if named_p { 4 } else { 3 };
            let Some(end) = s.find('>') else {
                return err(INVALID_NAMED_CAPTURE, s);
            };
            let name = s.get(start..end).unwrap_or("");
            if name.is_empty() || !name.bytes().all(|c| c == b'_' || c.is_ascii_alphanumeric()) {
                return err(INVALID_NAMED_CAPTURE, &s[..=end]);
            }
            return Ok(("(".to_owned(), true, end + 1));
        }
        let mut on: Vec<char> = Vec::new();
        let mut off: Vec<char> = Vec::new();
        let mut negated = false;
        let mut saw_flag = false;
        let mut pos = 2;
        while pos < s.len() {
            let (c, len) = next_char(&s[pos..]);
            pos += len;
            match c {
                'i' | 'm' | 's' | 'U' => {
                    if negated {
                        on.retain(|&f| f != c);
                        if !off.contains(&c) {
                            off.push(c);
                        }
                    } else if !on.contains(&c) {
                        on.push(c);
                    }
                    saw_flag = true;
                }
                '-' if !negated => {
                    negated = true;
                    saw_flag = false;
                }
                ':' | ')' if !negated || saw_flag => {
                    let on: String = on.iter().collect();
                    let off: String = off.iter().collect();
                    let flags = if off.is_empty() { on } else { format!("{on}-{off}") };
                    let group = c == ':';
                    let text = match (group, flags.is_empty()) {
                        (true, true) => "(?:".to_owned(),
                        (true, false) => format!("(?{flags}:"),
                        (false, true) => String::new(),
                        (false, false) => format!("(?{flags})"),
                    };
                    return Ok((text, group, pos));
                }
                _ => return err(INVALID_PERL_OP, &s[..pos]),
            }
        }
        err(INVALID_PERL_OP, &s[..pos])
    }

    /// Scans `re` as Go's `regexp/syntax` parser (Perl flags) does; see the module docs.
    pub(super) fn scan(re: &str) -> Result<String, Error> {
        let mut sc = Scanner {
            whole: re,
            out: String::with_capacity(re.len() * 2),
            pending_flags: String::new(),
            stack: Vec::new(),
            level: Level { top: Top::Empty, max_product: 1 },
        };
        let mut pos = 0;
        // Start of the previous token when it was a repetition operator.
        let mut last_repeat: Option<usize> = None;
        while pos < re.len() {
            let t = &re[pos..];
            let mut repeat_start = None;
            match t.as_bytes()[0] {
                b'(' if t.as_bytes().get(1) == Some(&b'?') => {
                    let (text, group, len) = parse_perl_flags(t)?;
                    if group {
                        sc.out.push_str(&std::mem::take(&mut sc.pending_flags));
                        sc.level.fold();
                        sc.out.push_str(&text);
                        let outer =
                            std::mem::replace(&mut sc.level, Level { top: Top::Marker, max_product: 1 });
                        sc.stack.push(outer);
                    } else {
                        sc.pending_flags.push_str(&text);
                    }
                    pos += len;
                }
                b'(' => {
                    sc.out.push_str(&std::mem::take(&mut sc.pending_flags));
                    sc.level.fold();
                    sc.out.push('(');
                    let outer = std::mem::replace(&mut sc.level, Level { top: Top::Marker, max_product: 1 });
                    sc.stack.push(outer);
                    pos += 1;
                }
                b'|' => {
                    sc.out.push_str(&std::mem::take(&mut sc.pending_flags));
                    sc.level.fold();
                    sc.level.top = Top::Marker;
                    sc.out.push('|');
                    pos += 1;
                }
                b')' => {
                    let Some(outer) = sc.stack.pop() else {
                        return err(UNEXPECTED_PAREN, sc.whole);
                    };
                    sc.pending_flags.clear();
                    sc.level.fold();
                    let product = sc.level.max_product;
                    sc.level = outer;
                    sc.out.push(')');
                    sc.level.fold();
                    sc.level.top = Top::Atom { product };
                    pos += 1;
                }
                b'^' | b'$' | b'.' => {
                    sc.atom(&t[..1]);
                    pos += 1;
                }
                b'[' => {
                    let (class, len) = parse_class(t)?;
                    sc.atom(&class);
                    pos += len;
                }
                op @ (b'*' | b'+' | b'?' | b'{') => {
                    let (min, max, mut len) = if op == b'{' {
                        match parse_repeat(t) {
                            Some(r) => r,
                            None => {
                                sc.literal(u32::from(b'{'));
                                pos += 1;
                                last_repeat = None;
                                continue;
                            }
                        }
                    } else {
                        (0, 0, 1)
                    };
                    let counted = op == b'{';
                    if counted && (!(0..=1000).contains(&min) || max > 1000 || (max >= 0 && min > max)) {
                        return err(INVALID_REPEAT_SIZE, &t[..len]);
                    }
                    let op_text = t[..len].to_owned();
                    if t.as_bytes().get(len) == Some(&b'?') {
                        len += 1;
                    }
                    if let Some(prev) = last_repeat {
                        return err(INVALID_REPEAT_OP, &re[prev..pos + len]);
                    }
                    let Top::Atom { product } = sc.level.top else {
                        return err(MISSING_REPEAT_ARGUMENT, &t[..len]);
                    };
                    let product = if !counted {
                        product
                    } else if max == 0 {
                        1
                    } else {
                        let factor = if max > 0 { max } else { min };
                        let product = product.saturating_mul(factor.max(1) as u64);
                        if (min >= 2 || max >= 2) && product > 1000 {
                            return err(INVALID_REPEAT_SIZE, &t[..len]);
                        }
                        product
                    };
                    sc.out.push_str(&op_text);
                    if len > op_text.len() {
                        sc.out.push('?');
                    }
                    sc.level.top = Top::Atom { product };
                    repeat_start = Some(pos);
                    pos += len;
                }
                b'\\' => {
                    let next = t.as_bytes().get(1).copied();
                    match next {
                        Some(b'A' | b'b' | b'B' | b'z') => {
                            sc.atom(&t[..2]);
                            pos += 2;
                        }
                        Some(b'C') => return err(INVALID_ESCAPE, &t[..2]),
                        Some(b'Q') => {
                            let body = &t[2..];
                            let (literal, consumed) = match body.find("\\E") {
                                Some(i) => (&body[..i], 2 + i + 2),
                                None => (body, t.len()),
                            };
                            for c in literal.chars() {
                                sc.literal(c as u32);
                            }
                            pos += consumed;
                        }
                        Some(b'p' | b'P') => {
                            let (text, len) = parse_unicode_class(t)?;
                            sc.atom(text);
                            pos += len;
                        }
                        _ if is_perl_class(t) => {
                            sc.atom(&t[..2]);
                            pos += 2;
                        }
                        _ => {
                            let (value, len) = parse_escape(t)?;
                            sc.literal(value);
                            pos += len;
                        }
                    }
                }
                _ => {
                    let (c, len) = next_char(t);
                    sc.literal(c as u32);
                    pos += len;
                }
            }
            last_repeat = repeat_start;
        }
        if !sc.stack.is_empty() {
            return err(MISSING_PAREN, sc.whole);
        }
        Ok(sc.out)
    }
}

// ===== HTTP headers =====

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

// ===== Object metadata =====

/// Annotation that makes Istio's validation webhook reject any object (used to test the webhook).
pub const ALWAYS_REJECT_ANNOTATION: &str = "internal.istio.io/webhook-always-reject";
/// Internal annotation naming the parents of generated config; users may not set it.
pub const INTERNAL_PARENT_NAMES_ANNOTATION: &str = "internal.istio.io/parents";
/// Internal annotation naming the namespace of generated config's parent; users may not set it.
pub const INTERNAL_PARENT_NAMESPACE_ANNOTATION: &str = "internal.istio.io/parent-namespace";
/// Annotation that puts an AuthorizationPolicy in dry-run mode (`"true"` / `"false"`).
pub const DRY_RUN_ANNOTATION: &str = "istio.io/dry-run";

/// Checks object metadata as the Kubernetes API server and Istio's webhook (`validateMetadata`) do.
///
/// Kubernetes rules: `metadata.name` is required (unless `generateName` is set) and must be a [DNS-1123
/// subdomain](validate_dns1123_subdomain); `metadata.namespace`, if set, a [DNS-1123
/// label](validate_dns1123_label); `metadata.labels` and `metadata.annotations` valid
/// ([`validate_k8s_labels`], [`validate_k8s_annotations`]).
///
/// Istio rules (on `metadata.annotations`): the annotation `internal.istio.io/webhook-always-reject`
/// is rejected (`"internal.istio.io/webhook-always-reject" annotation found, rejecting`), and so are
/// Istio's internal parent annotations (`"internal.istio.io/parents" annotation found, this may not be
/// set by users`). The `istio.io/dry-run` annotation depends on the kind; see
/// [`check_dry_run_annotation`].
pub fn validate_metadata(meta: &ObjectMeta, report: &mut Report) {
    if meta.name.is_empty() {
        if meta.generate_name.is_empty() {
            report.error("metadata.name", "Required value: name or generateName is required");
        } else {
            // The server appends a random suffix, so a trailing '-' is fine.
            let base = meta.generate_name.strip_suffix('-').unwrap_or(&meta.generate_name);
            if let Err(e) = validate_dns1123_subdomain(base) {
                report.error(
                    "metadata.generateName",
                    format!("Invalid value: {}: {e}", go_quote(&meta.generate_name)),
                );
            }
        }
    } else if let Err(e) = validate_dns1123_subdomain(&meta.name) {
        report.error("metadata.name", format!("Invalid value: {}: {e}", go_quote(&meta.name)));
    }
    if !meta.namespace.is_empty()
        && let Err(e) = validate_dns1123_label(&meta.namespace)
    {
        report.error("metadata.namespace", format!("Invalid value: {}: {e}", go_quote(&meta.namespace)));
    }
    report.check("metadata.labels", validate_k8s_labels(&meta.labels));
    report.check("metadata.annotations", validate_k8s_annotations(&meta.annotations));
    if meta.annotations.contains_key(ALWAYS_REJECT_ANNOTATION) {
        report.error(
            "metadata.annotations",
            format!("{} annotation found, rejecting", go_quote(ALWAYS_REJECT_ANNOTATION)),
        );
    }
    for internal in [INTERNAL_PARENT_NAMESPACE_ANNOTATION, INTERNAL_PARENT_NAMES_ANNOTATION] {
        if meta.annotations.contains_key(internal) {
            report.error(
                "metadata.annotations",
                format!("{} annotation found, this may not be set by users", go_quote(internal)),
            );
        }
    }
}

/// Go's `strconv.ParseBool`.
fn go_parse_bool(value: &str) -> bool {
    matches!(
        value,
        "1" | "t" | "T" | "TRUE" | "true" | "True" | "0" | "f" | "F" | "FALSE" | "false" | "False"
    )
}

/// Checks the `istio.io/dry-run` annotation, following Istio's `checkDryRunAnnotation`.
///
/// `authz_action` is `Some(action)` (the AuthorizationPolicy action's name, `ALLOW` when unset) for an
/// AuthorizationPolicy and `None` for every other kind. Errors:
/// `<ns>/<name> has unsupported annotation istio.io/dry-run, please remove the annotation` (other kinds),
/// `the annotation istio.io/dry-run currently only supports action ALLOW/DENY, found action CUSTOM in <ns>/<name>`,
/// `<ns>/<name> has annotation istio.io/dry-run with invalid value (yes): strconv.ParseBool: parsing "yes": invalid syntax`.
pub fn check_dry_run_annotation(meta: &ObjectMeta, authz_action: Option<&str>) -> Result<(), String> {
    let Some(value) = meta.annotations.get(DRY_RUN_ANNOTATION) else {
        return Ok(());
    };
    let who = format!("{}/{}", meta.namespace, meta.name);
    match authz_action {
        None => Err(format!(
            "{who} has unsupported annotation {DRY_RUN_ANNOTATION}, please remove the annotation"
        )),
        Some("ALLOW" | "DENY") => {
            if go_parse_bool(value) {
                Ok(())
            } else {
                Err(format!(
                    "{who} has annotation {DRY_RUN_ANNOTATION} with invalid value ({value}): strconv.ParseBool: parsing {}: invalid syntax",
                    go_quote(value)
                ))
            }
        }
        Some(action) => Err(format!(
            "the annotation {DRY_RUN_ANNOTATION} currently only supports action ALLOW/DENY, found action {action} in {who}"
        )),
    }
}

/// Reports an enum number that has no name: the CRDs accept only the value names, so the API server
/// rejects it with this (Kubernetes') message.
pub fn check_enum<E: api::wkt::ProtoEnum>(path: impl Into<String>, value: i32, report: &mut Report) {
    if E::name_of(value).is_none() {
        let names: Vec<String> = E::VALUES.iter().map(|(_, _, name)| go_quote(name)).collect();
        report.error(path, format!("Unsupported value: {value}: supported values: {}", names.join(", ")));
    }
}

/// Reports a proto oneof with more than one member set, at `path`: `only one of a, b or c may be set`.
/// `members` lists each member's JSON name and whether it is set. (The types keep oneof members as
/// sibling fields, so this is where "exactly one" is enforced.)
pub fn check_oneof(path: &str, members: &[(&str, bool)], report: &mut Report) {
    if members.iter().filter(|(_, set)| *set).count() > 1 {
        let names: Vec<&str> = members.iter().map(|(name, _)| *name).collect();
        let list = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        };
        report.error(path, format!("only one of {list} may be set"));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    /// `want`: `None` for valid, `Some(text)` for an error containing `text`.
    fn expect(got: Result<(), String>, want: Option<&str>, input: &str) {
        match (got, want) {
            (Ok(()), None) => {}
            (Err(e), Some(w)) => assert!(e.contains(w), "{input:?}: {e:?} does not contain {w:?}"),
            (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn go_formatting() {
        assert_eq!(go_quote("a\"b\\c\n\té\u{200b}\u{7f}\u{0}"), r#""a\"b\\c\n\té\u200b\x7f\x00""#);
        for (value, want) in [
            (101.0, "101"),
            (0.00001, "1e-05"),
            (1_000_000.0, "1e+06"),
            (100_000.0, "100000"),
            (-1.0, "-1"),
            (150.5, "150.5"),
            (1e20, "1e+20"),
            (123_456_789.0, "1.23456789e+08"),
            (0.0001, "0.0001"),
            (0.00005, "5e-05"),
            (0.0, "0"),
        ] {
            assert_eq!(go_float(value), want, "{value}");
        }
        for (nanos, want) in [
            (3_600_000_000_000, "1h0m0s"),
            (999_999_999_000_000_000, "277777h46m39s"),
            (1_000_000, "1ms"),
            (1_500, "1.5µs"),
            (1_500_000, "1.5ms"),
            (0, "0s"),
            (-1_500_000_000, "-1.5s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (61_000_000_000, "1m1s"),
            (999, "999ns"),
        ] {
            assert_eq!(go_duration(nanos), want, "{nanos}");
        }
        let d = |seconds, nanos| Duration { seconds, nanos };
        assert_eq!(go_duration_nanos(&d(1, 5)), 1_000_000_005);
        assert_eq!(go_duration_nanos(&d(1, -1)), 999_999_999);
        assert_eq!(go_duration_nanos(&d(i64::MAX, 0)), i64::MAX);
        assert_eq!(go_duration_nanos(&d(i64::MIN, 0)), i64::MIN);
        assert_eq!(go_duration_nanos(&d(9_223_372_037, -999_999_999)), i64::MAX);
        assert_eq!(go_duration_nanos(&d(9_223_372_036, 999_999_999)), i64::MAX);
    }

    // Cases from Istio's agent/validation_test.go (TestValidateFQDN, TestValidateWildcardDomain, …).
    #[test]
    fn fqdn() {
        let long = "x".repeat(256);
        let cases: &[(&str, Option<&str>)] = &[
            (&long, Some("too long (max 255)")),
            ("", Some("empty domain name not allowed")),
            ("istio.io", None),
            ("istio.io.", None),
            ("istio-pilot.istio-system.svc.cluster.local", None),
            ("istio-pilot.istio-system.svc.cluster.local.", None),
            ("reviews", None),
            ("UPPER.case", None),
            ("1.1.1.1", Some("top level domain \"1\" cannot be all-numeric")),
            ("foo.-1", Some("cannot be all-numeric")),
            ("foo.99999999999999999999", None),
            ("1.2.3.4.", None),
            ("foo..bar", Some("domain name \"foo..bar\" invalid (label \"\" invalid)")),
            ("foo_bar.com", Some("label \"foo_bar\" invalid")),
            (".", Some("label \"\" invalid")),
            ("a.b.", None),
            ("é.com", Some("invalid")),
        ];
        for (input, want) in cases {
            expect(validate_fqdn(input), *want, input);
        }
        expect(validate_dns1123_labels("istio.io"), None, "labels");
    }

    #[test]
    fn wildcard_domain() {
        let long = "x".repeat(256);
        let ok63 = "x".repeat(63);
        let cases: &[(&str, Option<&str>)] = &[
            ("", Some("empty")),
            (&long, Some("too long")),
            (&ok63, None),
            ("*", None),
            ("*.bar.com", None),
            ("*foo", None),
            ("*foo.bar.com", None),
            ("*-foo.bar.com", None),
            ("foo.*.com", Some("invalid")),
            ("foo*.bar.com", Some("invalid")),
            ("1.1.1.1", Some("invalid")),
            ("*.", None),
            ("**.com", Some("domain name \"**.com\" invalid (label \"**\" invalid)")),
            ("*-.com", Some("invalid")),
        ];
        for (input, want) in cases {
            expect(validate_wildcard_domain(input), *want, input);
        }
        assert!(is_wildcard_dns1123_label("*"));
        assert!(is_wildcard_dns1123_label("*-a"));
        assert!(!is_wildcard_dns1123_label("a*"));
        assert!(!is_wildcard_dns1123_label(&format!("*{}", "a".repeat(63))));
    }

    #[test]
    fn wildcard_domain_for_virtual_service_bound_to_gateway() {
        let long = "x".repeat(256);
        let ok63 = "x".repeat(63);
        let cases: &[(&str, bool, Option<&str>)] = &[
            ("", false, Some("empty")),
            (&long, false, Some("too long")),
            (&ok63, false, None),
            ("*", false, None),
            ("*.bar.com", false, None),
            ("*foo", false, None),
            ("*foo.bar.com", false, None),
            ("*-foo.bar.com", false, None),
            ("foo.*.com", false, Some("invalid")),
            ("foo*.bar.com", false, Some("invalid")),
            ("1.1.1.1", false, Some("invalid")),
            ("outbound_.80_._.e2e.foobar.mesh", true, None),
            ("outbound.com", true, None),
            ("neverbound_.80_._.e2e.foobar.mesh", true, Some("invalid")),
            (
                "outbound_.thisIsNotAPort_._.e2e.foobar.mesh",
                true,
                Some(
                    "invalid (label \"thisIsNotAPort\" invalid). should follow outbound_.<PORT>_._.<HOSTNAME> format",
                ),
            ),
            ("outbound_.80_._", true, Some("invalid")),
            (
                "outbound_.80",
                true,
                Some(
                    "domain name outbound_.80 invalid, should follow 'outbound_.<PORT>_._.<HOSTNAME>' format",
                ),
            ),
            ("outbound_.80_._.e2e.foobar.mesh", false, Some("invalid")),
        ];
        for (input, sni, want) in cases {
            expect(validate_wildcard_domain_for_virtual_service_bound_to_gateway(*sni, input), *want, input);
        }
    }

    #[test]
    fn trust_domain() {
        let ok63 = "x".repeat(63);
        let cases: &[(&str, Option<&str>)] = &[
            ("", Some("empty")),
            (&ok63, None),
            ("foo.bar.com", None),
            ("f-oo.bar.com", None),
            ("foo.bar.com.", None),
            ("-foo.bar.com", Some("trust domain name \"-foo.bar.com\" invalid")),
            ("foo/bar/com", Some("invalid")),
            ("foo:bar:com", Some("invalid")),
        ];
        for (input, want) in cases {
            expect(validate_trust_domain(input), *want, input);
        }
    }

    // Sidecar egress hosts (TestValidateSidecar) and Gateway server hosts (TestValidateServer).
    #[test]
    fn namespace_slash_wildcard_hostname() {
        let sidecar: &[(&str, Option<&str>)] = &[
            ("*/*", None),
            ("./*", None),
            ("./foo.com", None),
            ("~/*", None),
            ("~ns1/*", None),
            ("~/foo.com", None),
            ("ns1/bar.com", None),
            ("ns1/*.bar.com", None),
            ("~Invalid_NS/*", Some("invalid namespace value \"~Invalid_NS\" in sidecar")),
            ("*", Some("host must be of form namespace/dnsName")),
            ("/", Some("config namespace and dnsName in host entry cannot be empty")),
            ("ns1/bar", Some("short names (non FQDN) are not allowed")),
            ("ns1/*bar.com", Some("partial wildcard \"*bar.com\" not allowed")),
            ("ns1/1.2.3.4", Some("cannot be all-numeric")),
            ("ns1/foo.*.com", Some("invalid (label \"*\" invalid)")),
            ("ns1/a/b.com", Some("invalid")),
        ];
        for (input, want) in sidecar {
            expect(validate_namespace_slash_wildcard_hostname(input, false, false), *want, input);
        }
        let gateway: &[(&str, bool, Option<&str>)] = &[
            ("foo.bar.com", false, None),
            ("1.1.1.1", false, None),
            ("ns1/foo.bar.com", false, None),
            ("*/foo.bar.com", false, None),
            ("./foo.bar.com", false, None),
            ("*", false, None),
            ("~/foo.bar.com", false, Some("invalid namespace value \"~\" in gateway")),
            ("~/foo.bar.com", true, None),
            ("ns1/foo.*.bar.com", false, Some("domain")),
            ("foo.*.bar.com", false, Some("domain")),
            ("foo", false, Some("short names")),
            ("ns1/1.2.3.4", false, None),
            ("~ns/foo.com", false, Some("invalid namespace value \"~ns\" in gateway")),
            ("/foo.com", false, Some("cannot be empty")),
        ];
        for (input, semantics, want) in gateway {
            expect(validate_namespace_slash_wildcard_hostname(input, true, *semantics), *want, input);
        }
        // Several problems are all reported, once each.
        let err = validate_namespace_slash_wildcard_hostname("Bad_NS/foo", false, false).unwrap_err();
        assert_eq!(err.matches("; ").count(), 1 + usize::from(err.contains("label")), "{err}");
        assert!(err.contains("in sidecar") && err.contains("short names"), "{err}");
    }

    #[test]
    fn kubernetes_names() {
        expect(validate_dns1123_subdomain("foo.bar-1"), None, "subdomain");
        expect(validate_dns1123_subdomain("Foo"), Some("a lowercase RFC 1123 subdomain"), "Foo");
        expect(validate_dns1123_subdomain(""), Some("a lowercase RFC 1123 subdomain"), "empty");
        expect(validate_dns1123_subdomain(&"a".repeat(254)), Some("no more than 253"), "long");
        expect(validate_dns1123_label("istio-system"), None, "ns");
        expect(validate_dns1123_label("a.b"), Some("a lowercase RFC 1123 label"), "a.b");
        expect(validate_dns1123_label(&"a".repeat(64)), Some("no more than 63"), "long");
        assert!(is_lowercase_dns1123_label("abc-1"));
        assert!(!is_lowercase_dns1123_label("Abc"));
        assert!(is_dns1123_label("Abc"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label(""));
    }

    #[test]
    fn ports_and_protocols() {
        for (port, valid) in
            [(0, false), (65536, false), (-1, false), (100, true), (1000, true), (65535, true)]
        {
            assert_eq!(validate_port(port).is_ok(), valid, "{port}");
        }
        assert_eq!(validate_port(0).unwrap_err(), "port number 0 must be in the range 1..65535");
        let long = "toolong".repeat(15);
        for (name, valid) in [("", false), ("simple", true), ("full", true), (long.as_str(), false)] {
            assert_eq!(validate_port_name(name).is_ok(), valid, "{name}");
        }
        assert_eq!(validate_port_name("a_b").unwrap_err(), "invalid port name: a_b");
        expect(validate_protocol(""), None, "");
        expect(validate_protocol("HTTP"), None, "HTTP");
        expect(validate_protocol("http1"), Some("unsupported protocol: http1"), "http1");
    }

    #[test]
    fn numbers() {
        expect(validate_percent(0), None, "0");
        expect(validate_percent(100), None, "100");
        expect(validate_percent(101), Some("percentage 101 is not in range 0..100"), "101");
        expect(validate_percent(-1), Some("percentage -1 is not in range 0..100"), "-1");
        for (value, want) in [
            (0.0, None),
            (0.0001, None),
            (100.0, None),
            (50.5, None),
            (f64::NAN, None),
            (101.0, Some("percentage 101 is neither 0.0, nor in range [0.0001, 100.0]")),
            (-1.0, Some("percentage -1 is neither")),
            (0.00001, Some("percentage 1e-05 is neither")),
        ] {
            expect(validate_percentage(value), want, &value.to_string());
        }
        expect(validate_weight(-15), Some("weight -15 < 0"), "-15");
        expect(validate_weight(0), None, "0");
        expect(validate_http_status(199), Some("HTTP status 199 is not in range 200-599"), "199");
        expect(validate_http_status(600), None, "600");
        expect(validate_http_status(601), Some("not in range"), "601");
    }

    // TestValidateDuration, TestValidateConnectTimeout.
    #[test]
    fn durations() {
        let d = |seconds, nanos| Duration { seconds, nanos };
        for (duration, valid) in [
            (d(1, 0), true),
            (d(1, -1), false),
            (d(-11, -1), false),
            (d(0, 1), false),
            (d(1, 1), false),
            (d(0, 1_000_000), true),
            (d(0, 0), false),
            (d(i64::MAX, 0), false),
        ] {
            assert_eq!(validate_duration(&duration).is_ok(), valid, "{duration:?}");
        }
        assert_eq!(validate_duration(&d(0, 0)).unwrap_err(), "duration must be greater than 1ms");
        assert_eq!(validate_duration(&d(1, 1)).unwrap_err(), "only durations to ms precision are supported");
        for (duration, valid) in
            [(d(1, 0), true), (d(31, 0), true), (d(999_999_999, 0), false), (d(3600, 0), true)]
        {
            assert_eq!(validate_connect_timeout(&duration).is_ok(), valid, "{duration:?}");
        }
        assert_eq!(
            validate_connect_timeout(&d(999_999_999, 0)).unwrap_err(),
            "time 277777h46m39s must be >1ms and <1h0m0s"
        );
    }

    // TestValidationIPAddress, TestValidationIPSubnet, and Go's netip parsing rules.
    #[test]
    fn ip_addresses() {
        for (addr, ok) in [
            ("1.1.1.1", true),
            ("1.1.A.1", false),
            ("2001:1::1", true),
            ("2001:1:G::1", false),
            ("01.1.1.1", false),
            ("256.1.1.1", false),
            ("1.1.1", false),
            ("::", true),
            ("::ffff:1.2.3.4", true),
            ("fe80::1%eth0", true),
            ("fe80::1%", false),
            ("1.2.3.4%eth0", false),
            ("1::2::3", false),
            ("", false),
            ("1.1.1.1/24", false),
        ] {
            assert_eq!(validate_ip_address(addr).is_ok(), ok, "{addr}");
        }
        assert_eq!(validate_ip_address("1.1.A.1").unwrap_err(), "1.1.A.1 is not a valid IP");
        assert!(is_ipv4_address("10.0.0.1") && !is_ipv6_address("10.0.0.1"));
        assert!(is_ipv6_address("::1") && !is_ipv4_address("::1"));
        for (subnet, ok) in [
            ("1.1.1.1/24", true),
            ("1.1.1.1/48", false),
            ("2001:1::1/64", true),
            ("2001:1::1/132", false),
            ("1.1.1.1", true),
            ("1.1.1.1/024", false),
            ("1.1.1.1/+24", false),
            ("1.1.1.1/", false),
            ("fe80::1%eth0/64", false),
            ("1.1.1.1/2/3", false),
        ] {
            assert_eq!(validate_ip_subnet(subnet).is_ok(), ok, "{subnet}");
        }
        assert_eq!(validate_ip_subnet("1.1.1.1/48").unwrap_err(), "1.1.1.1/48 is not a valid CIDR block");
        assert_eq!(
            validate_ip_block("1.2.3.4/33").unwrap_err(),
            r#"bad CIDR range (1.2.3.4/33): netip.ParsePrefix("1.2.3.4/33"): prefix length out of range"#
        );
        assert_eq!(
            validate_ip_block("1.2.3/8").unwrap_err(),
            r#"bad CIDR range (1.2.3/8): netip.ParsePrefix("1.2.3/8"): ParseAddr("1.2.3"): IPv4 address too short"#
        );
        assert_eq!(validate_ip_block("bad").unwrap_err(), "bad IP address (bad)");
        expect(validate_ip_block("10.0.0.0/8"), None, "cidr");
        expect(validate_unix_address("/var/run/x.sock"), None, "abs");
        expect(validate_unix_address("@abstract"), None, "@");
        expect(validate_unix_address(""), Some("unix address must not be empty"), "empty");
        expect(validate_unix_address("rel/x"), Some("rel/x is not an absolute path to a file"), "rel");
        expect(validate_unix_address("/dir/"), Some("is not an absolute path"), "dir");
    }

    // Test_validateExportTo.
    #[test]
    fn export_to() {
        let cases: &[(&[&str], bool, bool, Option<&str>)] = &[
            (&[], false, false, None),
            (&["*"], false, false, None),
            (&[".", "ns1"], false, false, None),
            (&["ns1", "ns2", "ns5"], false, false, None),
            (&["~"], true, false, None),
            (
                &["~", "ns1"],
                false,
                false,
                Some("exportTo ~ (none) is not allowed for Istio configuration objects"),
            ),
            (
                &[".", "*"],
                false,
                false,
                Some("cannot have both public (*) and non-public exportTo values for a resource"),
            ),
            (&["*", "ns1"], false, false, Some("cannot have both public (*)")),
            (&[".", "ns5"], false, false, Some("duplicate entries in exportTo for entry ns5")),
            (&["ns5", "."], false, false, Some("duplicate entries in exportTo: . and current namespace ns5")),
            (&["ns1", "ns2", "ns1"], false, false, Some("duplicate entries in exportTo for entry ns1")),
            (&["~", "~", "ns1"], true, false, Some("duplicate entries in exportTo for entry ~")),
            (
                &["ns1_"],
                false,
                false,
                Some("only .,*, or a valid DNS 1123 label is allowed as exportTo entry"),
            ),
            (&["~", "ns1"], true, false, Some("cannot export service entry to no one (~) and someone")),
            (
                &["*"],
                false,
                true,
                Some("destination rule with workload selector cannot have exportTo beyond current namespace"),
            ),
            (&["."], false, true, None),
            (&["somens"], false, true, Some("cannot have exportTo beyond current namespace")),
            (
                &[".", "somens"],
                false,
                true,
                Some("destination rule with workload selector cannot have multiple entries in exportTo"),
            ),
        ];
        for (export_to, is_se, is_dr, want) in cases {
            expect(
                validate_export_to("ns5", &strings(export_to), *is_se, *is_dr),
                *want,
                &format!("{export_to:?}"),
            );
        }
    }

    // TestInstanceValidate (pkg/config/labels).
    #[test]
    fn istio_labels() {
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
        let cases: &[Case<'_>] = &[
            (&[], None),
            (&[("^", "^")], Some("invalid tag key: \"^\"")),
            (&[("key", "value")], None),
            (&[("key", "")], None),
            (&[("k8s.io/key", "value")], None),
            (&[("app.kubernetes.io/name", "value")], None),
            (&[("", "value")], Some("invalid tag key: \"\"")),
            (&[(".key", "value")], Some("invalid tag key")),
            (&[("key_", "value")], Some("invalid tag key")),
            (&[("key$", "value")], Some("invalid tag key")),
            (&[("istio./key", "value")], Some("invalid tag key")),
            (&[("key", ".value")], Some("invalid tag value: \".value\"")),
            (&[("key", "value_")], Some("invalid tag value")),
            (&[("key", "value$")], Some("invalid tag value")),
            (&[("Upper.Case/Key", "v")], None),
            (&[("a/b/c", "v")], Some("invalid tag key")),
        ];
        for (labels, want) in cases {
            expect(validate_labels(&map(labels)), *want, &format!("{labels:?}"));
        }
        let long_name = "a".repeat(64);
        expect(validate_labels(&map(&[(&long_name, "v")])), Some("(name is too long)"), "long name");
        let long_prefix = format!("{}/a", ["a"; 130].join("."));
        expect(
            validate_labels(&map(&[(&long_prefix, "v")])),
            Some("(DNS prefix is too long)"),
            "long prefix",
        );
        let long_value = "v".repeat(100);
        expect(validate_labels(&map(&[("k", &long_value)])), None, "long value");
    }

    #[test]
    fn kubernetes_labels_and_annotations() {
        expect(validate_k8s_labels(&map(&[("app", "reviews"), ("example.com/x", "")])), None, "ok");
        let long_value = "v".repeat(64);
        expect(
            validate_k8s_labels(&map(&[("k", &long_value)])),
            Some("must be no more than 63 characters"),
            "value",
        );
        expect(
            validate_k8s_labels(&map(&[("Example.com/x", "v")])),
            Some("prefix part a lowercase RFC 1123 subdomain"),
            "prefix",
        );
        expect(
            validate_k8s_labels(&map(&[("a/b/c", "v")])),
            Some("a qualified name must consist of"),
            "slashes",
        );
        expect(
            validate_k8s_labels(&map(&[("/x", "v")])),
            Some("prefix part must be non-empty"),
            "empty prefix",
        );
        expect(validate_k8s_labels(&map(&[("x/", "v")])), Some("name part must be non-empty"), "empty name");
        expect(
            validate_k8s_labels(&map(&[("k", "-v")])),
            Some("a valid label must be an empty string"),
            "bad value",
        );
        expect(
            validate_k8s_annotations(&map(&[("Example.com/Key", "anything goes: {}")])),
            None,
            "annotation",
        );
        expect(
            validate_k8s_annotations(&map(&[("bad key", "v")])),
            Some("Invalid value: \"bad key\""),
            "bad key",
        );
        let huge = "x".repeat(300 * 1024);
        expect(validate_k8s_annotations(&map(&[("k", &huge)])), Some("Too long"), "huge");
    }

    #[test]
    fn workload_selectors() {
        expect(validate_workload_selector_labels(&map(&[("app", "reviews")])), None, "ok");
        expect(
            validate_workload_selector_labels(&map(&[("", "v")])),
            Some("empty key is not supported in selector: \"=v\""),
            "empty",
        );
        expect(
            validate_workload_selector_labels(&map(&[("app", "rev*")])),
            Some("wildcard is not supported in selector: \"app=rev*\""),
            "value",
        );
        expect(
            validate_workload_selector_labels(&map(&[("a*", "v")])),
            Some("wildcard is not supported in selector"),
            "key",
        );
        let mut report = Report::default();
        check_workload_selector("spec.selector.matchLabels", &BTreeMap::new(), &mut report);
        assert!(report.errors.is_empty());
        assert_eq!(report.warnings[0].message, "workload selector specified without labels");
        expect(validate_one_of_selector_type(true, false, 0), None, "one");
        expect(
            validate_one_of_selector_type(true, false, 2),
            Some("only one of targetRefs or workloadSelector can be set"),
            "two",
        );
    }

    #[test]
    fn target_refs() {
        let target = |group: &str, kind: &str, name: &str, namespace: &str| PolicyTargetReference {
            group: group.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        };
        expect(validate_policy_target_reference(&target("", "Service", "reviews", "")), None, "svc");
        expect(
            validate_policy_target_reference(&target("gateway.networking.k8s.io", "Gateway", "gw", "")),
            None,
            "gw",
        );
        expect(
            validate_policy_target_reference(&target("networking.istio.io", "ServiceEntry", "se", "")),
            None,
            "se",
        );
        expect(
            validate_policy_target_reference(&target("apps", "Deployment", "x", "")),
            Some(
                "targetRef must be to one of [core/v1/Service networking.istio.io/v1/ServiceEntry gateway.networking.k8s.io/v1/Gateway gateway.networking.k8s.io/v1/GatewayClass] but was apps/Deployment",
            ),
            "deployment",
        );
        expect(
            validate_policy_target_reference(&target("", "Service", "", "")),
            Some("targetRef name must be set"),
            "name",
        );
        expect(
            validate_policy_target_reference(&target("", "Service", "x", "other")),
            Some("targetRef namespace must not be set; cross namespace referencing is not supported"),
            "namespace",
        );
    }

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

    /// Expected results of Go's `regexp.Compile` (Go 1.26, what Istio runs), recorded from Go.
    #[test]
    fn regex_matches_go() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#"a{,3}"#, None),
            (r#"a{,5000}"#, None),
            (r#"\Qa.b\E+"#, None),
            (r#"\Qabc"#, None),
            (r#"\C"#, Some(r#"error parsing regexp: invalid escape sequence: `\C`"#)),
            (r#"a**"#, Some(r#"error parsing regexp: invalid nested repetition operator: `**`"#)),
            (r#"a*?"#, None),
            (r#"a*??"#, Some(r#"error parsing regexp: invalid nested repetition operator: `*??`"#)),
            (r#"a{2}{3}"#, Some(r#"error parsing regexp: invalid nested repetition operator: `{2}{3}`"#)),
            (r#"a{2}*"#, Some(r#"error parsing regexp: invalid nested repetition operator: `{2}*`"#)),
            (r#"^*"#, None),
            (r#"$+"#, None),
            (r#"\b*"#, None),
            (r#"(?i)*"#, Some(r#"error parsing regexp: missing argument to repetition operator: `*`"#)),
            (r#"a(?i)*"#, None),
            (r#"a*(?i)*"#, None),
            (r#"a{10}(?i){200}"#, Some(r#"error parsing regexp: invalid repeat count: `{200}`"#)),
            (r#"(a{100}){100}"#, Some(r#"error parsing regexp: invalid repeat count: `{100}`"#)),
            (r#"(a{10}){100}"#, None),
            (r#"((a{10}){10}){10}"#, None),
            (r#"((a{10}){10}){11}"#, Some(r#"error parsing regexp: invalid repeat count: `{11}`"#)),
            (r#"(?:a{0}){1001}"#, Some(r#"error parsing regexp: invalid repeat count: `{1001}`"#)),
            (r#"a{1001}"#, Some(r#"error parsing regexp: invalid repeat count: `{1001}`"#)),
            (r#"a{1000}"#, None),
            (r#"a{01}"#, None),
            (r#"a{1,0}"#, Some(r#"error parsing regexp: invalid repeat count: `{1,0}`"#)),
            (r#"a{99999999999}"#, Some(r#"error parsing regexp: invalid repeat count: `{99999999999}`"#)),
            (r#"{5}"#, Some(r#"error parsing regexp: missing argument to repetition operator: `{5}`"#)),
            (r#"a{"#, None),
            (r#"a{x}"#, None),
            (r#"x{2}?"#, None),
            (r#"[]"#, Some(r#"error parsing regexp: missing closing ]: `[]`"#)),
            (r#"[]a]"#, None),
            (r#"[^]a]"#, None),
            (r#"[a-]"#, None),
            (r#"[z-a]"#, Some(r#"error parsing regexp: invalid character class range: `z-a`"#)),
            (r#"[a--b]"#, Some(r#"error parsing regexp: invalid character class range: `a--`"#)),
            (r#"[\d-z]"#, None),
            (r#"[a-\d]"#, Some(r#"error parsing regexp: invalid escape sequence: `\d`"#)),
            (r#"[[:alpha:]]"#, None),
            (r#"[[:foo:]]"#, Some(r#"error parsing regexp: invalid character class range: `[:foo:]`"#)),
            (r#"[[:a]b:]]"#, Some(r#"error parsing regexp: invalid character class range: `[:a]b:]`"#)),
            (r#"[\b]"#, Some(r#"error parsing regexp: invalid escape sequence: `\b`"#)),
            (r#"[\Q]"#, Some(r#"error parsing regexp: invalid escape sequence: `\Q`"#)),
            (r#"\pL"#, None),
            (r#"\p{Greek}"#, None),
            (r#"\p{greek}"#, None),
            (
                r#"\p{Old_Italic}"#,
                Some(r#"error parsing regexp: invalid character class range: `\p{Old_Italic}`"#),
            ),
            (
                r#"\p{OldItalic}"#,
                Some(r#"error parsing regexp: invalid character class range: `\p{OldItalic}`"#),
            ),
            (r#"\p{Letter}"#, None),
            (r#"\p{L&}"#, Some(r#"error parsing regexp: invalid character class range: `\p{L&}`"#)),
            (r#"\p{^Greek}"#, None),
            (r#"\p{Emoji}"#, Some(r#"error parsing regexp: invalid character class range: `\p{Emoji}`"#)),
            (r#"\p{Any}"#, None),
            (r#"\pX"#, Some(r#"error parsing regexp: invalid character class range: `\pX`"#)),
            (r#"\p"#, Some(r#"error parsing regexp: invalid character class range: `\p`"#)),
            (r#"\p{"#, Some(r#"error parsing regexp: invalid character class range: `\p{`"#)),
            (r#"\8"#, Some(r#"error parsing regexp: invalid escape sequence: `\8`"#)),
            (r#"\1"#, Some(r#"error parsing regexp: invalid escape sequence: `\1`"#)),
            (r#"\12"#, None),
            (r#"\0"#, None),
            (r#"\x{110000}"#, Some(r#"error parsing regexp: invalid escape sequence: `\x{110000`"#)),
            (r#"\x{D800}"#, None),
            (r#"\xg"#, Some(r#"error parsing regexp: invalid escape sequence: `\xg`"#)),
            (r#"\x{}"#, Some(r#"error parsing regexp: invalid escape sequence: `\x{}`"#)),
            (r#"\e"#, Some(r#"error parsing regexp: invalid escape sequence: `\e`"#)),
            (r#"\Z"#, Some(r#"error parsing regexp: invalid escape sequence: `\Z`"#)),
            (r#"\z"#, None),
            (r#"\_"#, None),
            (r#"\<"#, None),
            (r#"\Q"#, None),
            (r#"(?P<name>a)"#, None),
            (r#"(?<name>a)"#, None),
            (r#"(?P<1a>a)"#, None),
            (r#"(?P<a>a)(?P<a>b)"#, None),
            (r#"(?P<a.b>a)"#, Some(r#"error parsing regexp: invalid named capture: `(?P<a.b>`"#)),
            (r#"(?P=name)"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?P`"#)),
            (r#"(?=a)"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?=`"#)),
            (r#"(?<=a)"#, Some(r#"error parsing regexp: invalid named capture: `(?<=a)`"#)),
            (r#"(?i-)"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?i-)`"#)),
            (r#"(?-)"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?-)`"#)),
            (r#"(?)"#, None),
            (r#"(?ii)"#, None),
            (r#"(?i-i)"#, None),
            (r#"(?x)"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?x`"#)),
            (r#"(?U)a*"#, None),
            (r#"(?i:a)"#, None),
            (r#"(?"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?`"#)),
            (r#"(a"#, Some(r#"error parsing regexp: missing closing ): `(a`"#)),
            (r#"a)"#, Some(r#"error parsing regexp: unexpected ): `a)`"#)),
            (r#")"#, Some(r#"error parsing regexp: unexpected ): `)`"#)),
            (r#"a|*"#, Some(r#"error parsing regexp: missing argument to repetition operator: `*`"#)),
            (r#"(*)"#, Some(r#"error parsing regexp: missing argument to repetition operator: `*`"#)),
            (r#"()*"#, None),
            (r#"(?:)*"#, None),
            (r#"\"#, Some(r#"error parsing regexp: trailing backslash at end of expression: ``"#)),
            (r#"a\"#, Some(r#"error parsing regexp: trailing backslash at end of expression: ``"#)),
            (r#"[a"#, Some(r#"error parsing regexp: missing closing ]: `[a`"#)),
            (r#"["#, Some(r#"error parsing regexp: missing closing ]: `[`"#)),
            (r#"\Qab\E{2}"#, None),
            (r#"a\Q\E*"#, None),
            (r#"\pL{1000}"#, None),
            (r#"(?i)\p{Lu}"#, None),
            (r#"é\é"#, Some(r#"error parsing regexp: invalid escape sequence: `\é`"#)),
            (r#"[é-a]"#, Some(r#"error parsing regexp: invalid character class range: `é-a`"#)),
            (r#"\x{10FFFF}"#, None),
            (r#"\x41"#, None),
            (r#"\101"#, None),
            (r#"(?s)."#, None),
            (r#"(?m)^$"#, None),
            (
                r#"a{1000}{1}"#,
                Some(r#"error parsing regexp: invalid nested repetition operator: `{1000}{1}`"#),
            ),
            (r#"(a{2}){501}"#, Some(r#"error parsing regexp: invalid repeat count: `{501}`"#)),
            (r#"(a*){1000}"#, None),
            (r#"((a){1000})*"#, None),
            (r#"\d{1000}"#, None),
            (r#"[[:^alpha:]]"#, None),
            (r#"[[:word:]]"#, None),
            (r#"[a[b]"#, None),
            (r#"[a&&b]"#, None),
            (r#"[a~~b]"#, None),
            (r#"\pN+"#, None),
            (r#"(?i)k"#, None),
            (r#"}"#, None),
            (r#"]"#, None),
            (r#"a{2,}{3}"#, Some(r#"error parsing regexp: invalid nested repetition operator: `{2,}{3}`"#)),
            (r#"a+?"#, None),
            (r#"a??"#, None),
            (r#"a|b|"#, None),
        ];
        for (re, want) in cases {
            assert_eq!(validate_regex(re).err().as_deref(), *want, "{re:?}");
        }
    }

    #[test]
    fn regex_limits() {
        assert!(validate_regex(&format!("{}a{}", "(".repeat(400), ")".repeat(400))).is_ok());
        assert!(validate_regex(&format!("{}a{}", "(?:".repeat(300), ")*".repeat(300))).is_ok());
        assert!(validate_regex(&"a{2}".repeat(300)).is_ok());
        assert!(validate_regex("((a{10}){10}){10}").is_ok());
        assert_eq!(
            validate_regex("((a{10}){10}){11}").unwrap_err(),
            "error parsing regexp: invalid repeat count: `{11}`"
        );
        assert_eq!(validate_regex("(a{2}){0}(b{1000})").err(), None);
    }

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

    fn meta(name: &str, namespace: &str) -> ObjectMeta {
        ObjectMeta { name: name.to_owned(), namespace: namespace.to_owned(), ..ObjectMeta::default() }
    }

    #[test]
    fn metadata() {
        let mut report = Report::default();
        validate_metadata(&meta("reviews", "default"), &mut report);
        assert_eq!(report, Report::default());

        let mut report = Report::default();
        validate_metadata(&meta("", ""), &mut report);
        assert_eq!(report.errors[0].path, "metadata.name");
        assert!(report.errors[0].message.contains("name or generateName is required"));

        let mut generated = meta("", "");
        generated.generate_name = "reviews-".to_owned();
        let mut report = Report::default();
        validate_metadata(&generated, &mut report);
        assert!(report.is_valid(), "{report:?}");

        let mut report = Report::default();
        validate_metadata(&meta("Reviews_v1", "Bad_NS"), &mut report);
        let paths: Vec<_> = report.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["metadata.name", "metadata.namespace"]);
        assert!(report.errors[0].message.contains("a lowercase RFC 1123 subdomain"));
        assert!(report.errors[1].message.contains("a lowercase RFC 1123 label"));

        let mut rejected = meta("valid", "default");
        rejected.annotations.insert(ALWAYS_REJECT_ANNOTATION.to_owned(), "true".to_owned());
        rejected.annotations.insert(INTERNAL_PARENT_NAMES_ANNOTATION.to_owned(), "x".to_owned());
        rejected.labels.insert("bad key".to_owned(), "v".to_owned());
        let mut report = Report::default();
        validate_metadata(&rejected, &mut report);
        let messages: Vec<_> = report.errors.iter().map(|e| (e.path.as_str(), e.message.as_str())).collect();
        assert!(messages.contains(&(
            "metadata.annotations",
            "\"internal.istio.io/webhook-always-reject\" annotation found, rejecting"
        )));
        assert!(messages.contains(&(
            "metadata.annotations",
            "\"internal.istio.io/parents\" annotation found, this may not be set by users"
        )));
        assert!(messages.iter().any(|(path, _)| *path == "metadata.labels"));
    }

    #[test]
    fn dry_run_annotation() {
        let mut m = meta("policy", "foo");
        expect(check_dry_run_annotation(&m, None), None, "absent");
        m.annotations.insert(DRY_RUN_ANNOTATION.to_owned(), "true".to_owned());
        expect(
            check_dry_run_annotation(&m, None),
            Some("foo/policy has unsupported annotation istio.io/dry-run, please remove the annotation"),
            "other kind",
        );
        expect(check_dry_run_annotation(&m, Some("ALLOW")), None, "allow");
        expect(check_dry_run_annotation(&m, Some("DENY")), None, "deny");
        expect(
            check_dry_run_annotation(&m, Some("CUSTOM")),
            Some(
                "the annotation istio.io/dry-run currently only supports action ALLOW/DENY, found action CUSTOM in foo/policy",
            ),
            "custom",
        );
        m.annotations.insert(DRY_RUN_ANNOTATION.to_owned(), "yes".to_owned());
        expect(
            check_dry_run_annotation(&m, Some("ALLOW")),
            Some(
                "foo/policy has annotation istio.io/dry-run with invalid value (yes): strconv.ParseBool: parsing \"yes\": invalid syntax",
            ),
            "bad value",
        );
    }

    /// The reject annotation rule as the shared GVK dataset words it.
    #[test]
    fn always_reject_wording_matches_dataset() {
        let path = "/work/shared/istio-testdata/_derived/validation/gvk-dataset-cases.yaml";
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        let mut m = meta("valid", "default");
        m.annotations.insert(ALWAYS_REJECT_ANNOTATION.to_owned(), "true".to_owned());
        let mut report = Report::default();
        validate_metadata(&m, &mut report);
        let message = &report.errors[0].message;
        assert!(text.contains(&message.replace('"', "\\\"")), "{message}");
    }

    /// Characters that exercise the parsers: regex and host syntax, escapes, and non-ASCII.
    const TRICKY: &str = "[a-zA-Z0-9.*/~%()\\[\\]{}\\\\|?+^$:,<>=!@_ \"'\t\n-]|é|\u{200b}|\u{10FFFF}|K|ſ";

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn string_checks_never_panic(s in proptest::string::string_regex(&format!("({TRICKY}){{0,40}}")).unwrap()) {
            let _ = validate_fqdn(&s);
            let _ = validate_wildcard_domain(&s);
            let _ = validate_partial_wildcard(&s);
            let _ = validate_dns1123_labels(&s);
            let _ = is_dns1123_label(&s);
            let _ = is_wildcard_dns1123_label(&s);
            let _ = validate_dns1123_subdomain(&s);
            let _ = validate_dns1123_label(&s);
            let _ = validate_wildcard_domain_for_virtual_service_bound_to_gateway(true, &s);
            let _ = validate_trust_domain(&s);
            for (gateway, semantics) in [(false, false), (true, false), (true, true)] {
                let _ = validate_namespace_slash_wildcard_hostname(&s, gateway, semantics);
            }
            let _ = validate_port_name(&s);
            let _ = validate_protocol(&s);
            let _ = validate_ip_address(&s);
            let _ = validate_ip_subnet(&s);
            let _ = validate_ip_block(&s);
            let _ = validate_unix_address(&s);
            let _ = validate_export_to(&s, &[s.clone(), ".".to_owned(), s.clone()], true, true);
            let labels = map(&[(&s, &s)]);
            let _ = validate_labels(&labels);
            let _ = validate_k8s_labels(&labels);
            let _ = validate_k8s_annotations(&labels);
            let _ = validate_workload_selector_labels(&labels);
            let _ = validate_subset_name(&s);
            let _ = validate_cors_http_method(&s);
            let _ = validate_header_name(&s);
            let _ = validate_strict_http_header_name(&s);
            let _ = validate_probe_header_name(&s);
            let _ = validate_cors_http_header_name(&s);
            let _ = validate_http_header_with_authority_operation_name(&s);
            let _ = validate_http_header_operation_name(&s);
            let _ = validate_header_value(&s);
            let _ = validate_string_regexp(&s, &s);
            let _ = validate_cors_allow_origin(Some(StringMatch::Regex(&s)));
            let _ = go_quote(&s);
            let mut report = Report::default();
            validate_gateway_names(std::slice::from_ref(&s), false, "g", &mut report);
            let mut m = meta(&s, &s);
            m.generate_name = s.clone();
            m.annotations.insert(s.clone(), s.clone());
            m.annotations.insert(DRY_RUN_ANNOTATION.to_owned(), s.clone());
            validate_metadata(&m, &mut report);
            let _ = check_dry_run_annotation(&m, Some(&s));
        }

        #[test]
        fn any_string_never_panics(s in ".*") {
            let _ = validate_regex(&s);
            let _ = validate_fqdn(&s);
            let _ = validate_namespace_slash_wildcard_hostname(&s, true, true);
            let _ = validate_ip_subnet(&s);
            let _ = validate_header_value(&s);
            let _ = validate_labels(&map(&[(&s, &s)]));
        }

        /// Whatever the Go-syntax scanner accepts, its canonical rewrite parses with `regex_syntax`
        /// (so the second check never rejects a pattern Go accepts).
        #[test]
        fn accepted_regexes_parse_with_regex_syntax(
            s in proptest::string::string_regex(r"([ab0-9().|*+?^$\[\]{},:<>=PpQEdxLz\\-]|\\Q|\\E|\(\?i\)|\(\?P<n>|\[:alpha:\]|\\p\{Greek\}|é){0,30}").unwrap()
        ) {
            if let Ok(canonical) = go_re::scan(&s) {
                let parsed = regex_syntax::ast::parse::ParserBuilder::new().nest_limit(4096).build().parse(&canonical);
                prop_assert!(parsed.is_ok(), "{s:?} -> {canonical:?}: {parsed:?}");
            }
        }

        #[test]
        fn numbers_never_panic(n in any::<i64>(), f in any::<f64>(), seconds in any::<i64>(), nanos in any::<i32>()) {
            let _ = validate_port(n);
            let _ = validate_percent(n);
            let _ = validate_weight(n);
            let _ = validate_http_status(n);
            let _ = validate_percentage(f);
            let _ = go_float(f);
            let _ = go_duration(n);
            let d = Duration { seconds, nanos };
            let _ = validate_duration(&d);
            let _ = validate_connect_timeout(&d);
            let _ = validate_duration_range(&d, d, d);
        }
    }
}
