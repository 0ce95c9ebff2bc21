//! Istio's `externalcontrolplane.ExternalControlPlaneAnalyzer`
//! (`pkg/config/analysis/analyzers/externalcontrolplane`): the webhooks of a remote cluster must reach
//! the external control plane.
//!
//! Looks at the ValidatingWebhookConfigurations named `istiod-default-validator` or starting with
//! `istio-validator`, and the MutatingWebhookConfigurations starting with `istio-sidecar-injector`. For
//! each of their webhooks: a `clientConfig.url` Go's `url.Parse` rejects gives IST0163
//! InvalidExternalControlPlaneConfig ("was provided in an invalid format"); a URL whose host is an IP
//! address gives IST0164 ExternalControlPlaneAddressIsNotAHostname; no `url` and no `service` gives
//! IST0163 ("is blank"). An empty `url: ""` is a (valid, host-less) URL, as in Istio.

use serde_json::Value;

use super::workload::str_at;
use crate::{
    Analyzer, Context, Message, msg,
    resource::{KubeObject, Resource, kinds},
};

/// `externalcontrolplane.ExternalControlPlaneAnalyzer`.
#[derive(Debug, Default)]
pub struct ExternalControlPlaneAnalyzer;

impl Analyzer for ExternalControlPlaneAnalyzer {
    fn name(&self) -> &str {
        "externalcontrolplane.ExternalControlPlaneAnalyzer"
    }

    fn description(&self) -> &str {
        "Checks that the remote IstioOperator resources reference an external control plane"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::VALIDATING_WEBHOOK_CONFIGURATION, kinds::MUTATING_WEBHOOK_CONFIGURATION]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let resources = ctx.resources();
        for config in resources.kube(kinds::VALIDATING_WEBHOOK_CONFIGURATION) {
            if config.name == "istiod-default-validator" || config.name.starts_with("istio-validator") {
                check_webhooks(config, out);
            }
        }
        for config in resources.kube(kinds::MUTATING_WEBHOOK_CONFIGURATION) {
            if config.name.starts_with("istio-sidecar-injector") {
                check_webhooks(config, out);
            }
        }
    }
}

fn check_webhooks(config: &KubeObject, out: &mut Vec<Message>) {
    let Some(Value::Array(hooks)) = config.value.get("webhooks") else { return };
    for hook in hooks {
        let name = str_at(hook, "name");
        let client = hook.get("clientConfig");
        let url = client.and_then(|c| c.get("url")).and_then(Value::as_str);
        let service = client.and_then(|c| c.get("service")).filter(|s| !s.is_null());
        match url {
            Some(url) => match go_url_hostname(url) {
                Err(_) => out.push(config.message(
                    &msg::INVALID_EXTERNAL_CONTROL_PLANE_CONFIG,
                    &[url.into(), name.into(), "was provided in an invalid format".into()],
                )),
                Ok(host) if host.parse::<std::net::IpAddr>().is_ok() => out.push(config.message(
                    &msg::EXTERNAL_CONTROL_PLANE_ADDRESS_IS_NOT_A_HOSTNAME,
                    &[url.into(), name.into()],
                )),
                Ok(_) => {}
            },
            None if service.is_none() => out.push(config.message(
                &msg::INVALID_EXTERNAL_CONTROL_PLANE_CONFIG,
                &["".into(), name.into(), "is blank".into()],
            )),
            None => {}
        }
    }
}

/// The host name of a URL as Go's `url.Parse(raw).Hostname()` gives it (no port, no IPv6 brackets;
/// empty for host-less URLs), or the reason Go's `url.Parse` rejects the URL: control characters, a
/// leading `:` (missing scheme), a colon in the first path segment of a scheme-less URL, a bad port, an
/// unclosed `[`, a bad `%` escape or a character not allowed in a host.
fn go_url_hostname(raw: &str) -> Result<String, String> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("invalid control character in URL".into());
    }
    let (rest, fragment) = raw.split_once('#').unwrap_or((raw, ""));
    check_escapes(fragment)?;
    if rest.is_empty() || rest == "*" {
        return Ok(String::new());
    }
    let (scheme, rest) = split_scheme(rest)?;
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    if !rest.starts_with('/') {
        if !scheme.is_empty() {
            // Opaque URL (`mailto:x`): no host.
            return Ok(String::new());
        }
        let first_segment = rest.split('/').next().unwrap_or("");
        if first_segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    let mut host = "";
    let mut path = rest;
    if (!scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let authority_and_path = &rest[2..];
        let end = authority_and_path.find('/').unwrap_or(authority_and_path.len());
        let authority = &authority_and_path[..end];
        path = &authority_and_path[end..];
        host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        check_host(host)?;
    }
    check_escapes(path)?;
    Ok(hostname(host))
}

/// Go's `getScheme`: letters, then letters, digits, `+`, `-`, `.` up to a `:`.
fn split_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".into()),
            ':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// Go's `parseHost` checks: a bracketed IPv6 literal followed by nothing or a port; otherwise an
/// optional `:digits` port; valid `%` escapes; only characters allowed in a host.
fn check_host(host: &str) -> Result<(), String> {
    if let Some(inner) = host.strip_prefix('[') {
        let Some(close) = inner.find(']') else { return Err("missing ']' in host".into()) };
        let after = &inner[close + 1..];
        if !valid_optional_port(after) {
            return Err(format!("invalid port {after:?} after host"));
        }
        return Ok(());
    }
    if let Some(i) = host.rfind(':')
        && !valid_optional_port(&host[i..])
    {
        return Err(format!("invalid port {:?} after host", &host[i..]));
    }
    check_escapes(host)?;
    let allowed =
        |c: char| c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"%".contains(c) || !c.is_ascii();
    match host.chars().find(|c| !allowed(*c)) {
        Some(c) => Err(format!("invalid character {c:?} in host name")),
        None => Ok(()),
    }
}

fn valid_optional_port(port: &str) -> bool {
    port.is_empty() || port.strip_prefix(':').is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// Every `%` starts a two-digit hex escape.
fn check_escapes(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                return Err("invalid URL escape".into());
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// Go's `URL.Hostname`: the host without port and without IPv6 brackets.
fn hostname(host: &str) -> String {
    let host = match host.rfind(':') {
        Some(i) if valid_optional_port(&host[i..]) => &host[..i],
        _ => host,
    };
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames_and_errors_follow_go_url_parse() {
        assert_eq!(go_url_hostname("https://test.com:15017/validate").unwrap(), "test.com");
        assert_eq!(go_url_hostname("https://1.1.1.1:5100/inject").unwrap(), "1.1.1.1");
        assert_eq!(go_url_hostname("https://[::1]:443/x").unwrap(), "::1");
        assert_eq!(go_url_hostname("https://[::1]/x").unwrap(), "::1");
        assert_eq!(go_url_hostname("").unwrap(), "");
        assert_eq!(go_url_hostname("test.com:15017/validate").unwrap(), "", "scheme test.com, opaque");
        assert!(go_url_hostname("1.2.3.4:15017").is_err(), "colon in first segment");
        assert!(go_url_hostname("://x").is_err(), "missing scheme");
        assert!(go_url_hostname("https://test.com:abc/").is_err(), "bad port");
        assert!(go_url_hostname("https://[::1/").is_err(), "unclosed bracket");
        assert!(go_url_hostname("https://te st.com/").is_err(), "space in host");
        assert!(go_url_hostname("https://test.com/%zz").is_err(), "bad escape");
        assert!(go_url_hostname("https://test.com/\n").is_err(), "control character");
    }
}
