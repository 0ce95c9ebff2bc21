//! DNS names and hosts: Istio's host, domain and trust-domain checks, and the Kubernetes DNS-1123
//! name rules.

use super::{
    go::{go_atoi_ok, go_quote},
    goip::is_valid_ip_address,
    join,
};

pub(super) const DNS1123_LABEL_MAX_LENGTH: usize = 63;

pub(super) fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?` without a length limit.
pub(super) fn matches_label_pattern(value: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::tests::expect;

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
}
