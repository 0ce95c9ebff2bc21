//! WasmPlugin validation, following Istio's `ValidateWasmPlugin` (`validateWasmPluginURL` with
//! `strictParseURL`, `validateWasmPluginSHA`, `validateWasmPluginImagePullSecret`,
//! `validateWasmPluginName`, `validateWasmPluginVMConfig`, `validateWasmPluginMatch`) and the rules of
//! the WasmPlugin CRD schema (the `url` CEL rule, `minLength`/`maxLength`, `maxItems`, list-map keys
//! of `vmConfig.env` and `match[].ports`, the `valueFrom`/`value` CEL rule, enums).
//!
//! It also holds a port of Go's `net/url` parser ([`go_url`]), which Istio and the Kubernetes CEL
//! `url()`/`isURL()` functions use to read URLs, and the checks TrafficExtension shares.

use crate::common::check_enum;
use std::collections::BTreeSet;

use api::{
    extensions::wasm_plugin::{
        EnvValueSource, FailStrategy, PluginPhase, PluginType, PullPolicy, VmConfig, WasmPlugin,
    },
    meta::ObjectMeta,
    type_v1beta1::{PortSelector, WorkloadMode},
};

use crate::{Report, security::authorization_policy::check_policy_selection};

/// Go's `net/url` parsing (`url.Parse`, `url.ParseRequestURI`), reduced to what validation needs:
/// whether the text parses, Go's error text, and the scheme and host of the result.
pub(crate) mod go_url {
    use crate::common::go_quote;

    /// What a parsed URL is made of, as far as validation looks at it.
    #[derive(Debug, Default, Clone, PartialEq, Eq)]
    pub(crate) struct Url {
        /// The scheme, lower-cased (`http`), or empty.
        pub(crate) scheme: String,
        /// The authority's `host[:port]` as written (still escaped), or empty.
        pub(crate) host: String,
    }

    impl Url {
        /// The port of `host` (digits after the last `:`), as Go's `URL.Port` returns it.
        pub(crate) fn port(&self) -> &str {
            match self.host.rfind(':') {
                Some(i) if valid_optional_port(&self.host[i..]) => &self.host[i + 1..],
                _ => "",
            }
        }
    }

    /// Which part of a URL is being unescaped (Go's `encoding` modes that parsing uses).
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Mode {
        Path,
        Host,
        Zone,
        UserPassword,
        Fragment,
    }

    /// Go's `url.Parse`: a URL reference (relative or absolute), with an optional `#fragment`.
    /// Errors read `parse "<url>": <reason>`.
    pub(crate) fn parse(raw: &str) -> Result<Url, String> {
        let (before, fragment) = match raw.split_once('#') {
            Some((u, f)) => (u, Some(f)),
            None => (raw, None),
        };
        let url = parse_inner(before, false).map_err(|e| format!("parse {}: {e}", go_quote(before)))?;
        if let Some(fragment) = fragment {
            unescape(fragment, Mode::Fragment).map_err(|e| format!("parse {}: {e}", go_quote(raw)))?;
        }
        Ok(url)
    }

    /// Go's `url.ParseRequestURI`: an absolute URI or an absolute path, with no fragment handling.
    pub(crate) fn parse_request_uri(raw: &str) -> Result<Url, String> {
        parse_inner(raw, true).map_err(|e| format!("parse {}: {e}", go_quote(raw)))
    }

    /// Go's `parse`.
    fn parse_inner(raw: &str, via_request: bool) -> Result<Url, String> {
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err("net/url: invalid control character in URL".to_owned());
        }
        if raw.is_empty() && via_request {
            return Err("empty url".to_owned());
        }
        let mut url = Url::default();
        if raw == "*" {
            return Ok(url);
        }
        let (scheme, rest) = get_scheme(raw)?;
        url.scheme = scheme.to_ascii_lowercase();
        let rest = if rest.ends_with('?') && rest.matches('?').count() == 1 {
            &rest[..rest.len() - 1]
        } else {
            rest.split_once('?').map_or(rest, |(before, _)| before)
        };
        if !rest.starts_with('/') {
            if !url.scheme.is_empty() {
                // A rootless path after a scheme is opaque.
                return Ok(url);
            }
            if via_request {
                return Err("invalid URI for request".to_owned());
            }
            let segment = rest.split('/').next().unwrap_or_default();
            if segment.contains(':') {
                return Err("first path segment in URL cannot contain colon".to_owned());
            }
        }
        let mut path = rest;
        if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///")) && rest.starts_with("//") {
            let authority_and_path = &rest[2..];
            let (authority, after) = match authority_and_path.find('/') {
                Some(i) => (&authority_and_path[..i], &authority_and_path[i..]),
                None => (authority_and_path, ""),
            };
            parse_authority(authority)?;
            url.host = host_of(authority).to_owned();
            path = after;
        }
        unescape(path, Mode::Path)?;
        Ok(url)
    }

    /// The `host[:port]` part of an authority (after the last `@`).
    fn host_of(authority: &str) -> &str {
        authority.rfind('@').map_or(authority, |i| &authority[i + 1..])
    }

    /// Go's `getScheme`: `[a-zA-Z][a-zA-Z0-9+-.]*` before a `:`, else no scheme.
    fn get_scheme(raw: &str) -> Result<(&str, &str), String> {
        for (i, c) in raw.bytes().enumerate() {
            match c {
                b'a'..=b'z' | b'A'..=b'Z' => {}
                b'0'..=b'9' | b'+' | b'-' | b'.' => {
                    if i == 0 {
                        return Ok(("", raw));
                    }
                }
                b':' => {
                    if i == 0 {
                        return Err("missing protocol scheme".to_owned());
                    }
                    return Ok((&raw[..i], &raw[i + 1..]));
                }
                _ => return Ok(("", raw)),
            }
        }
        Ok(("", raw))
    }

    /// Go's `parseAuthority`: `[userinfo@]host[:port]`.
    fn parse_authority(authority: &str) -> Result<(), String> {
        let at = authority.rfind('@');
        parse_host(host_of(authority))?;
        let Some(at) = at else { return Ok(()) };
        let userinfo = &authority[..at];
        if !valid_userinfo(userinfo) {
            return Err("net/url: invalid userinfo".to_owned());
        }
        match userinfo.split_once(':') {
            None => unescape(userinfo, Mode::UserPassword),
            Some((user, password)) => {
                unescape(user, Mode::UserPassword)?;
                unescape(password, Mode::UserPassword)
            }
        }
    }

    /// Go's `parseHost`: an IP literal in brackets with an optional zone and port, or a name with an
    /// optional numeric port; `%`-escapes only for non-ASCII bytes.
    fn parse_host(host: &str) -> Result<(), String> {
        if host.starts_with('[') {
            let Some(close) = host.rfind(']') else {
                return Err("missing ']' in host".to_owned());
            };
            let colon_port = &host[close + 1..];
            if !valid_optional_port(colon_port) {
                return Err(format!("invalid port {} after host", go_quote(colon_port)));
            }
            if let Some(zone) = host[..close].find("%25") {
                unescape(&host[..zone], Mode::Host)?;
                unescape(&host[zone..close], Mode::Zone)?;
                return unescape(&host[close..], Mode::Host);
            }
        } else if let Some(colon) = host.rfind(':') {
            let colon_port = &host[colon..];
            if !valid_optional_port(colon_port) {
                return Err(format!("invalid port {} after host", go_quote(colon_port)));
            }
        }
        unescape(host, Mode::Host)
    }

    /// Go's `validOptionalPort`: empty or `:` followed by digits.
    fn valid_optional_port(port: &str) -> bool {
        port.is_empty() || (port.starts_with(':') && port[1..].bytes().all(|b| b.is_ascii_digit()))
    }

    /// Go's `validUserinfo`: RFC 3986 userinfo characters (ASCII only).
    fn valid_userinfo(userinfo: &str) -> bool {
        userinfo.chars().all(|c| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c))
    }

    /// Go's `shouldEscape` for the modes parsing checks (host and zone).
    fn should_escape_host(c: u8) -> bool {
        !(c.is_ascii_alphanumeric() || b"!$&'()*+,;=:[]<>\"-_.~".contains(&c))
    }

    fn is_hex(c: u8) -> bool {
        c.is_ascii_hexdigit()
    }

    fn unhex(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => 0,
        }
    }

    /// Go's `unescape` error checks: well-formed `%XX` escapes, and in a host only escapes of
    /// non-ASCII bytes (or `%25`) and no characters a host may not contain.
    fn unescape(s: &str, mode: Mode) -> Result<(), String> {
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'%' => {
                    if i + 2 >= bytes.len() || !is_hex(bytes[i + 1]) || !is_hex(bytes[i + 2]) {
                        let end = (i + 3).min(bytes.len());
                        return Err(escape_error(&bytes[i..end]));
                    }
                    let escape = &bytes[i..i + 3];
                    if mode == Mode::Host && unhex(bytes[i + 1]) < 8 && escape != b"%25" {
                        return Err(escape_error(escape));
                    }
                    if mode == Mode::Zone {
                        let v = (unhex(bytes[i + 1]) << 4) | unhex(bytes[i + 2]);
                        if escape != b"%25" && v != b' ' && should_escape_host(v) {
                            return Err(escape_error(escape));
                        }
                    }
                    i += 3;
                }
                c => {
                    if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape_host(c) {
                        return Err(format!(
                            "invalid character {} in host name",
                            go_quote(&String::from_utf8_lossy(&[c]))
                        ));
                    }
                    i += 1;
                }
            }
        }
        Ok(())
    }

    /// Go's `EscapeError` text.
    fn escape_error(escape: &[u8]) -> String {
        format!("invalid URL escape {}", go_quote(&String::from_utf8_lossy(escape)))
    }
}

/// Schemes a Wasm module URL may have (empty means `oci`).
const VALID_SCHEMES: [&str; 5] = ["", "file", "http", "https", "oci"];

/// Istio's `strictParseURL`: the URL as a request URI, or failing that with `http://` in front, and
/// also as a URL reference.
fn strict_parse_url(original: &str) -> Result<go_url::Url, String> {
    match go_url::parse_request_uri(original) {
        Ok(url) => {
            go_url::parse(original).map_err(|e| format!("failed to strict parse url: {e}"))?;
            Ok(url)
        }
        Err(err) => {
            let with_scheme = format!("http://{original}");
            let url =
                go_url::parse_request_uri(&with_scheme).map_err(|_| format!("failed to parse url: {err}"))?;
            go_url::parse(&with_scheme).map_err(|e| format!("failed to strict parse url: {e}"))?;
            Ok(url)
        }
    }
}

/// Checks a Wasm module URL, following Istio's `validateWasmPluginURL` (which agrees with the CRD's
/// CEL rule `url must have schema one of [http, https, file, oci]`): set, parseable, and with a
/// supported scheme.
pub(crate) fn validate_plugin_url(url: &str) -> Result<(), String> {
    if url.is_empty() {
        return Err("url field needs to be set".to_owned());
    }
    let parsed = strict_parse_url(url)?;
    if !VALID_SCHEMES.contains(&parsed.scheme.as_str()) {
        return Err(format!("url contains unsupported scheme: {}", parsed.scheme));
    }
    Ok(())
}

/// Checks a module checksum, following Istio's `validateWasmPluginSHA` (and the CRD pattern
/// `(^$|^[a-f0-9]{64}$)`): empty or 64 lower-case hex digits.
pub(crate) fn validate_sha256(sha: &str) -> Result<(), String> {
    if sha.is_empty() {
        return Ok(());
    }
    if sha.len() != 64 {
        return Err("sha256 field must be 64 characters long".to_owned());
    }
    if !sha.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err("sha256 field must match [a-f0-9]{64} pattern".to_owned());
    }
    Ok(())
}

/// Most `vmConfig.env` entries the CRD schema allows.
const MAX_ENV: usize = 256;
/// Longest env `value` the CRD schema allows.
const MAX_ENV_VALUE: usize = 2048;

/// Checks VM settings at `path`, following Istio's `validateWasmPluginVMConfig` (names set, at
/// most 256 characters, unique; `value` only with `valueFrom: INLINE`) and the CRD (at most 256
/// variables, values of at most 2048 characters).
pub(crate) fn check_vm_config(path: &str, vm: Option<&VmConfig>, report: &mut Report) {
    let Some(vm) = vm else { return };
    let env_path = format!("{path}.env");
    if vm.env.len() > MAX_ENV {
        report.error(&env_path, format!("Too many: {}: must have at most {MAX_ENV} items", vm.env.len()));
    }
    let mut names = BTreeSet::new();
    for (i, env) in vm.env.iter().enumerate() {
        let entry = format!("{env_path}[{i}]");
        check_enum::<EnvValueSource>(&format!("{entry}.valueFrom"), env.value_from, report);
        if env.name.is_empty() {
            report.error(format!("{entry}.name"), "spec.vmConfig.env invalid");
        } else if env.name.len() > 256 {
            report.error(format!("{entry}.name"), "env.name field must be less than 255 characters long");
        } else if !names.insert(env.name.as_str()) {
            report.error(format!("{entry}.name"), "duplicate env");
        }
        if env.value_from != EnvValueSource::Inline as i32 && !env.value.is_empty() {
            report.error(format!("{entry}.value"), "value may only be set when valueFrom is INLINE");
        }
        if env.value.len() > MAX_ENV_VALUE {
            report.error(
                format!("{entry}.value"),
                format!("Too long: may not be more than {MAX_ENV_VALUE} bytes"),
            );
        }
    }
}

/// Checks one traffic selector of `match` (index `index`), following Istio's
/// `validateWasmPluginMatch` / `validateTrafficExtensionMatch` (ports 1–65535) and the CRD (a known
/// mode, no port listed twice).
pub(crate) fn check_traffic_selector(index: usize, mode: i32, ports: &[PortSelector], report: &mut Report) {
    let path = format!("spec.match[{index}]");
    check_enum::<WorkloadMode>(&format!("{path}.mode"), mode, report);
    let mut seen = BTreeSet::new();
    for (j, port) in ports.iter().enumerate() {
        let port_path = format!("{path}.ports[{j}].number");
        if port.number == 0 || port.number > 65535 {
            report.error(
                &port_path,
                format!("spec.Match[{index}].Ports[{j}] is out of range: {}", port.number),
            );
        } else if !seen.insert(port.number) {
            report.error(&port_path, format!("Duplicate value: {{\"number\":{}}}", port.number));
        }
    }
}

/// Validates a WasmPlugin; findings use paths from the document root (`spec.…`).
///
/// Follows Istio's `ValidateWasmPlugin`: the selector / target references, the module URL (an
/// `oci`, `file`, `http` or `https` URL; no scheme means `oci`), the checksum, the pull secret
/// (at most 253 characters) and plugin name (at most 256), the VM environment and the traffic
/// selectors. CRD rules on top: the pull secret and plugin name, when given, are not empty
/// (undetectable here, see the module notes), enums hold known values, env values are at most 2048
/// characters, and no port is listed twice in one selector.
pub fn validate(meta: &ObjectMeta, spec: &WasmPlugin, report: &mut Report) {
    let _ = meta;
    check_policy_selection(spec.selector.as_ref(), spec.target_ref.as_ref(), &spec.target_refs, report);
    report.check("spec.url", validate_plugin_url(&spec.url));
    report.check("spec.sha256", validate_sha256(&spec.sha256));
    if spec.image_pull_secret.len() > 253 {
        report.error("spec.imagePullSecret", "imagePullSecret field must be less than 253 characters long");
    }
    if spec.plugin_name.len() > 256 {
        report.error("spec.pluginName", "pluginName field must be less than 255 characters long");
    }
    check_enum::<PullPolicy>("spec.imagePullPolicy", spec.image_pull_policy, report);
    check_enum::<PluginPhase>("spec.phase", spec.phase, report);
    check_enum::<FailStrategy>("spec.failStrategy", spec.fail_strategy, report);
    check_enum::<PluginType>("spec.type", spec.r#type, report);
    check_vm_config("spec.vmConfig", spec.vm_config.as_ref(), report);
    for (i, selector) in spec.r#match.iter().enumerate() {
        check_traffic_selector(i, selector.mode, &selector.ports, report);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{meta, run, spec};

    fn check(yaml: &str) -> Report {
        let plugin: WasmPlugin = spec(yaml);
        run(validate, &meta("name", "namespace"), &plugin)
    }

    /// `(name, yaml, expected error substring and path or None)`.
    /// An expected error: a substring of its message and its path.
    type Expect = Option<(&'static str, &'static str)>;

    const CASES: &[(&str, &str, Expect)] = &[
        ("empty", "{}", Some(("url field needs to be set", "spec.url"))),
        (
            "wrong scheme",
            "url: ftp://test.com/test\n",
            Some(("url contains unsupported scheme: ftp", "spec.url")),
        ),
        ("valid http", "url: http://test.com/test\n", None),
        (
            "valid http w/ sha",
            "url: http://test.com/test\nsha256: 01ba4719c80b6fe911b091a7c05124b64eeece964e09c058ef8f9805daca546b\n",
            None,
        ),
        (
            "short sha",
            "url: http://test.com/test\nsha256: 01ba47\n",
            Some(("sha256 field must be 64 characters long", "spec.sha256")),
        ),
        (
            "invalid sha",
            "url: http://test.com/test\nsha256: test\n",
            Some(("sha256 field must be 64 characters long", "spec.sha256")),
        ),
        (
            "invalid sha characters",
            "url: http://test.com/test\nsha256: 01Ba4719c80b6fe911b091a7c05124b64eeece964e09c058ef8f9805daca546b\n",
            Some(("sha256 field must match [a-f0-9]{64} pattern", "spec.sha256")),
        ),
        ("valid oci", "url: oci://test.com/test\n", None),
        ("valid oci no scheme", "url: test.com/test\n", None),
        ("valid file", "url: file:///opt/filter.wasm\n", None),
        (
            "valid oci with port and tag",
            "url: oci://private-registry:5000/openid-connect/openid:latest\n",
            None,
        ),
        // `ghcr.io:` reads as a scheme, as in Go.
        (
            "registry with port, no scheme",
            "url: ghcr.io:443/istio/wasm:1.0\n",
            Some(("url contains unsupported scheme: ghcr.io", "spec.url")),
        ),
        (
            "invalid url (CRD table)",
            "url: \"#%blah$#@\"\n",
            Some(("failed to parse url: parse \"#%blah$#@\": invalid URI for request", "spec.url")),
        ),
        (
            "invalid url schema (CRD table)",
            "url: fake://example.com\n",
            Some(("unsupported scheme: fake", "spec.url")),
        ),
        ("bad escape", "url: http://test.com/%zz\n", Some(("invalid URL escape \"%zz\"", "spec.url"))),
        // Also read as a path after `http://http:` (Istio's fallback), so accepted.
        ("bad port", "url: http://test.com:port/x\n", None),
        (
            "control character",
            "url: \"http://test.com/\\u0008\"\n",
            Some(("net/url: invalid control character in URL", "spec.url")),
        ),
        // Rejected as a request URI, accepted as `http://http://host#frag` (as by Istio and the CRD rule).
        ("fragment after the host", "url: \"http://host#frag\"\n", None),
        ("space in host, read as a path after `http://http:`", "url: \"http://ho st/x\"\n", None),
        (
            "invalid vm config - invalid env name",
            "url: test.com/test\nvmConfig:\n  env:\n  - {name: \"\", valueFrom: HOST}\n",
            Some(("spec.vmConfig.env invalid", "spec.vmConfig.env[0].name")),
        ),
        (
            "invalid vm config - duplicate env",
            "url: test.com/test\nvmConfig:\n  env:\n  - {name: ENV1, value: VAL1}\n  - {name: ENV1, value: VAL1}\n",
            Some(("duplicate env", "spec.vmConfig.env[1].name")),
        ),
        (
            "host env with value (CRD table)",
            "url: http://test\nvmConfig:\n  env:\n  - {name: test, valueFrom: HOST, value: value}\n",
            Some(("value may only be set when valueFrom is INLINE", "spec.vmConfig.env[0].value")),
        ),
        (
            "host env without value",
            "url: http://test\nvmConfig:\n  env:\n  - {name: test, valueFrom: HOST}\n",
            None,
        ),
        (
            "unset port (CRD table)",
            "url: http://test\nmatch:\n- ports:\n  - {}\n",
            Some(("spec.Match[0].Ports[0] is out of range: 0", "spec.match[0].ports[0].number")),
        ),
        (
            "port too high",
            "url: http://test\nmatch:\n- mode: SERVER\n  ports: [{number: 65536}]\n",
            Some(("is out of range: 65536", "spec.match[0].ports[0].number")),
        ),
        (
            "duplicate port (CRD)",
            "url: http://test\nmatch:\n- ports: [{number: 80}, {number: 80}]\n",
            Some(("Duplicate value", "spec.match[0].ports[1].number")),
        ),
        (
            "good match",
            "url: http://test\nmatch:\n- mode: CLIENT\n  ports: [{number: 80}, {number: 8080}]\n- mode: SERVER\n",
            None,
        ),
        (
            "wildcard label value (CRD table)",
            "url: http://test\nselector:\n  matchLabels: {istio: \"bar*\"}\n",
            Some(("wildcard is not supported in selector", "spec.selector.matchLabels")),
        ),
        (
            "wildcard label key (CRD table)",
            "url: http://test\nselector:\n  matchLabels: {\"istio*\": bar}\n",
            Some(("wildcard is not supported in selector", "spec.selector.matchLabels")),
        ),
        (
            "target-ref-good",
            "url: http://test.com/test\ntargetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo}\n",
            None,
        ),
        (
            "target-ref-good-service",
            "url: http://test.com/test\ntargetRef: {group: \"\", kind: Service, name: foo}\n",
            None,
        ),
        (
            "target-ref-non-empty-namespace",
            "url: http://test.com/test\ntargetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo, namespace: bar}\n",
            Some(("targetRef namespace must not be set", "spec.targetRef")),
        ),
        (
            "target-ref-empty-name",
            "url: http://test.com/test\ntargetRef: {group: gateway.networking.k8s.io, kind: Gateway}\n",
            Some(("targetRef name must be set", "spec.targetRef")),
        ),
        (
            "target-ref-wrong-group",
            "url: http://test.com/test\ntargetRef: {group: wrong-group, kind: Gateway, name: foo}\n",
            Some(("but was wrong-group/Gateway", "spec.targetRef")),
        ),
        (
            "target-ref-wrong-kind",
            "url: http://test.com/test\ntargetRef: {group: gateway.networking.k8s.io, kind: wrong-kind, name: foo}\n",
            Some(("but was gateway.networking.k8s.io/wrong-kind", "spec.targetRef")),
        ),
        (
            "target-ref-and-selector-cannot-both-be-set",
            "url: http://test.com/test\ntargetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo}\nselector:\n  matchLabels: {app: httpbin}\n",
            Some(("only one of targetRefs or workloadSelector can be set", "spec")),
        ),
        (
            "unknown phase number",
            "url: http://test\nphase: 9\n",
            Some(("Unsupported value: 9", "spec.phase")),
        ),
    ];

    #[test]
    fn istio_cases() {
        for (name, yaml, expected) in CASES {
            crate::testutil::assert_error(name, &check(yaml), *expected);
        }
    }

    #[test]
    fn long_names() {
        let long = "a".repeat(257);
        let report = check(&format!(
            "url: http://test\npluginName: {long}\nimagePullSecret: {long}\nvmConfig:\n  env:\n  - name: {long}\n"
        ));
        let paths: Vec<&str> = report.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["spec.imagePullSecret", "spec.pluginName", "spec.vmConfig.env[0].name"],
            "{:?}",
            report.errors
        );
        let value = "v".repeat(2049);
        let report =
            check(&format!("url: http://test\nvmConfig:\n  env:\n  - {{name: a, value: {value}}}\n"));
        assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    }

    #[test]
    fn go_url_parsing() {
        use go_url::{parse, parse_request_uri};
        assert_eq!(parse("HTTPS://Foo.com:8443/x").unwrap().scheme, "https");
        assert_eq!(parse("https://foo.com:8443/x").unwrap().port(), "8443");
        assert_eq!(parse("https://[::1]:80/x").unwrap().port(), "80");
        assert_eq!(parse("foo.com").unwrap().scheme, "");
        assert!(
            parse("https://foo.com:not-a-number")
                .unwrap_err()
                .contains("invalid port \":not-a-number\" after host")
        );
        assert_eq!(parse(":x").unwrap_err(), "parse \":x\": missing protocol scheme");
        assert!(parse("a:b/c").is_ok(), "opaque");
        assert!(parse("a/b:c").is_ok());
        assert!(parse("/a:b").is_ok());
        assert!(parse("b:c/d").is_ok());
        assert!(parse("1a:b").unwrap_err().contains("first path segment in URL cannot contain colon"));
        assert!(parse("http://x/a#%zz").unwrap_err().contains("invalid URL escape"));
        assert!(parse("http://us er@host").unwrap_err().contains("invalid userinfo"));
        assert!(parse("http://[::1").unwrap_err().contains("missing ']' in host"));
        assert!(parse("http://h%41st").unwrap_err().contains("invalid URL escape \"%41\""));
        assert!(parse("http://h%C3%A9st").is_ok());
        assert!(parse("http://[fe80::1%25en0]:80/").is_ok());
        assert!(parse("http://a\u{8}b").unwrap_err().contains("invalid control character"));
        assert!(parse_request_uri("").unwrap_err().contains("empty url"));
        assert!(parse_request_uri("*").is_ok());
        assert!(parse_request_uri("/a/b").is_ok());
        assert!(parse_request_uri("a/b").unwrap_err().contains("invalid URI for request"));
        assert!(parse_request_uri("%").is_err());
        assert!(parse("http://h/%").unwrap_err().contains("invalid URL escape \"%\""));
        assert!(parse("http://h/%4").unwrap_err().contains("invalid URL escape \"%4\""));
    }

    #[test]
    fn total_on_odd_urls() {
        for url in [
            "\u{0}",
            "é://x",
            "http://é",
            "::::",
            "[",
            "http://[]",
            "//",
            "///",
            "?",
            "#",
            "%",
            "http://@",
            "a@b",
            "http://u:p@h:1/p?q#f",
        ] {
            let _ = validate_plugin_url(url);
        }
    }
}
