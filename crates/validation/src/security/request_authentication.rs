//! RequestAuthentication validation, following Istio's `ValidateRequestAuthentication` (with
//! `validateJwtRule`, `security.ParseJwksURI`, `warnPrivateJwksKeys` and the JWKS reading of
//! `lestrrat-go/jwx` v1 `jwk.Parse` that it relies on) and the rules of the RequestAuthentication CRD
//! schema (`only one of jwks or jwksUri can be set`, the `jwksUri` scheme CEL rule, `minLength` /
//! `maxLength` / `maxItems`, the `header` pattern, the `timeout` CEL rule).
//!
//! The typed spec cannot tell an explicitly empty string from an absent one: the CRD's `minLength: 1`
//! on `issuer` / `jwksUri` (an explicit `issuer: ""`) is [`crate::presence`]'s, for objects read as
//! text; Istio's own rule (an issuer or a `jwksUri` is needed) is here.

use api::{
    meta::ObjectMeta,
    security::request_authentication::{JwtRule, RequestAuthentication, jwt_rule::JwtRequirement},
};

use super::authorization_policy::check_policy_selection;
use crate::{
    Report,
    common::{check_enum, go_quote, validate_duration, validate_strict_http_header_name},
    extensions::wasm_plugin::go_url,
};

/// Most `jwtRules` the CRD schema allows.
const MAX_JWT_RULES: usize = 4096;
/// Most `spaceDelimitedClaims` per rule the CRD schema allows.
const MAX_SPACE_DELIMITED_CLAIMS: usize = 64;
/// Longest `jwksUri` the CRD schema allows.
const MAX_JWKS_URI: usize = 2048;

/// Validates a RequestAuthentication; findings use paths from the document root (`spec.…`).
///
/// Follows Istio's `ValidateRequestAuthentication`: the selector / target references, and for each
/// JWT rule: non-empty audiences, an issuer or a `jwksUri`, a `jwksUri` that parses as an `http(s)`
/// URL, an inline `jwks` that parses as a JSON Web Key Set (a warning for private key material),
/// non-empty token locations (`fromHeaders` names, `fromParams`, `fromCookies`), `outputClaimToHeaders`
/// with a claim and a valid header name, and a timeout of whole milliseconds (at least 1ms). CRD
/// rules on top: not both `jwks` and `jwksUri`, a `jwksUri` of at most 2048 characters that also
/// parses as a request URI, non-empty `spaceDelimitedClaims` (at most 64), at most 4096 rules.
pub fn validate(meta: &ObjectMeta, spec: &RequestAuthentication, report: &mut Report) {
    let _ = meta;
    check_policy_selection(spec.selector.as_ref(), spec.target_ref.as_ref(), &spec.target_refs, report);
    if spec.jwt_rules.len() > MAX_JWT_RULES {
        report.error(
            "spec.jwtRules",
            format!("Too many: {}: must have at most {MAX_JWT_RULES} items", spec.jwt_rules.len()),
        );
    }
    for (i, rule) in spec.jwt_rules.iter().enumerate() {
        check_jwt_rule(&format!("spec.jwtRules[{i}]"), rule, report);
    }
}

/// Istio's `validateJwtRule` and `warnPrivateJwksKeys` for the rule at `path`, with the CRD's rules.
fn check_jwt_rule(path: &str, rule: &JwtRule, report: &mut Report) {
    for (k, audience) in rule.audiences.iter().enumerate() {
        if audience.is_empty() {
            report.error(format!("{path}.audiences[{k}]"), "audience must be non-empty string");
        }
    }
    if rule.issuer.is_empty() && rule.jwks_uri.is_empty() {
        report.error(format!("{path}.issuer"), "issuer or jwksUri must be non-empty string");
    }
    if !rule.jwks_uri.is_empty() {
        let uri_path = format!("{path}.jwksUri");
        match parse_jwks_uri(&rule.jwks_uri) {
            Err(reason) => report.error(&uri_path, reason),
            // The CRD reads the URI with Kubernetes' CEL `url()`, i.e. as a request URI.
            Ok(()) => {
                if let Err(reason) = go_url::parse_request_uri(&rule.jwks_uri) {
                    report.error(&uri_path, format!("url must have scheme http:// or https://: {reason}"));
                }
            }
        }
        if rule.jwks_uri.len() > MAX_JWKS_URI {
            report.error(&uri_path, format!("Too long: may not be more than {MAX_JWKS_URI} bytes"));
        }
    }
    if !rule.jwks.is_empty() {
        let jwks_path = format!("{path}.jwks");
        match jwks::parse(&rule.jwks) {
            Err(reason) => {
                report.error(&jwks_path, format!("jwks parse error: failed to unmarshal JWK set: {reason}"))
            }
            Ok(private) => {
                for (index, is_private) in private.iter().enumerate() {
                    if *is_private {
                        report.warn(
                            &jwks_path,
                            format!("jwks key at index {index} contains private key material; only public keys are used for verification"),
                        );
                    }
                }
            }
        }
    }
    if !rule.jwks.is_empty() && !rule.jwks_uri.is_empty() {
        report.error(path, "only one of jwks or jwksUri can be set");
    }
    for (k, header) in rule.from_headers.iter().enumerate() {
        if header.name.is_empty() {
            report.error(
                format!("{path}.fromHeaders[{k}].name"),
                "location header name must be non-empty string",
            );
        }
    }
    for (k, param) in rule.from_params.iter().enumerate() {
        if param.is_empty() {
            report.error(format!("{path}.fromParams[{k}]"), "location query must be non-empty string");
        }
    }
    for (k, cookie) in rule.from_cookies.iter().enumerate() {
        if cookie.is_empty() {
            report.error(format!("{path}.fromCookies[{k}]"), "cookie name must be non-empty string");
        }
    }
    for (k, claim_to_header) in rule.output_claim_to_headers.iter().enumerate() {
        let entry = format!("{path}.outputClaimToHeaders[{k}]");
        if claim_to_header.claim.is_empty() || claim_to_header.header.is_empty() {
            report.error(entry, "outputClaimToHeaders header and claim value must be non-empty string");
            continue;
        }
        report.check(format!("{entry}.header"), validate_strict_http_header_name(&claim_to_header.header));
    }
    if let Some(timeout) = &rule.timeout {
        report.check(format!("{path}.timeout"), validate_duration(timeout));
    }
    if rule.space_delimited_claims.len() > MAX_SPACE_DELIMITED_CLAIMS {
        report.error(
            format!("{path}.spaceDelimitedClaims"),
            format!(
                "Too many: {}: must have at most {MAX_SPACE_DELIMITED_CLAIMS} items",
                rule.space_delimited_claims.len()
            ),
        );
    }
    for (k, claim) in rule.space_delimited_claims.iter().enumerate() {
        if claim.is_empty() {
            report.error(
                format!("{path}.spaceDelimitedClaims[{k}]"),
                format!("spaceDelimitedClaims[{k}] in body should be at least 1 chars long"),
            );
        }
    }
    check_enum::<JwtRequirement>(&format!("{path}.presence"), rule.presence, report);
}

/// Istio's `security.ParseJwksURI` as a check: a URL (Go's `url.Parse`) with scheme `http` or
/// `https` and, if given, a port that fits an `int`.
fn parse_jwks_uri(uri: &str) -> Result<(), String> {
    let url = go_url::parse(uri)?;
    if url.scheme != "http" && url.scheme != "https" {
        return Err(format!("URI scheme {} is not supported", go_quote(&url.scheme)));
    }
    let port = url.port();
    if !port.is_empty() && port.parse::<i64>().is_err() {
        return Err(format!("strconv.Atoi: parsing {}: value out of range", go_quote(port)));
    }
    Ok(())
}

/// Reading a JSON Web Key Set the way `lestrrat-go/jwx` v1 `jwk.Parse` does (without PEM): which
/// documents it rejects, and which keys hold private key material.
mod jwks {
    use serde_json::{Map, Value};

    /// Parses a JWK set (`{"keys": [...]}`) or a single JWK; returns, per key, whether it is a
    /// private (or symmetric) key.
    pub(super) fn parse(text: &str) -> Result<Vec<bool>, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let Value::Object(object) = value else {
            return Err(match value {
                Value::Array(_) => "expected '{', but got '['".to_owned(),
                _ => "error reading token: EOF".to_owned(),
            });
        };
        match object.get("keys") {
            Some(Value::Array(keys)) => keys
                .iter()
                .enumerate()
                .map(|(i, key)| {
                    parse_key(key).map_err(|e| format!("failed to decode key #{i} in \"keys\": {e}"))
                })
                .collect(),
            Some(Value::Null) => Ok(Vec::new()),
            Some(other) => Err(format!(
                "failed to decode \"keys\": json: cannot unmarshal {} into Go value of type []json.RawMessage",
                json_type(other)
            )),
            None => parse_key(&Value::Object(object))
                .map(|private| vec![private])
                .map_err(|e| format!("failed to parse sole key in key set: {e}")),
        }
    }

    /// The kinds of keys and the fields each reads as base64 bytes, with the fields a public and a
    /// private key require.
    struct KeyKind {
        kty: &'static str,
        bytes: &'static [&'static str],
        required_public: &'static [&'static str],
        required_private: &'static [&'static str],
        has_crv: bool,
    }

    const KINDS: [KeyKind; 4] = [
        KeyKind {
            kty: "RSA",
            bytes: &["d", "dp", "dq", "e", "n", "p", "q", "qi"],
            required_public: &["e", "n"],
            required_private: &["d", "e", "n"],
            has_crv: false,
        },
        KeyKind {
            kty: "EC",
            bytes: &["d", "x", "y"],
            required_public: &["crv", "x", "y"],
            required_private: &["crv", "d", "x", "y"],
            has_crv: true,
        },
        KeyKind {
            kty: "oct",
            bytes: &["k"],
            required_public: &["k"],
            required_private: &["k"],
            has_crv: false,
        },
        KeyKind {
            kty: "OKP",
            bytes: &["d", "x"],
            required_public: &["crv", "x"],
            required_private: &["crv", "d", "x"],
            has_crv: true,
        },
    ];

    /// Fields every key type reads as strings.
    const STRING_FIELDS: [&str; 6] = ["alg", "kid", "use", "x5t", "x5t#S256", "x5u"];

    /// `jwk.ParseKey`: one JWK. Returns whether it holds private key material.
    fn parse_key(value: &Value) -> Result<bool, String> {
        let object = match value {
            Value::Object(object) => object,
            Value::Null => return Err("invalid key type from JSON ()".to_owned()),
            other => {
                return Err(format!(
                    "failed to unmarshal JSON into key hint: json: cannot unmarshal {} into Go value of type struct",
                    json_type(other)
                ));
            }
        };
        // The type hint matches field names case-insensitively, as Go's encoding/json does.
        let hint =
            |name: &str| object.iter().rev().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v);
        let kty = match hint("kty") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(format!(
                    "failed to unmarshal JSON into key hint: json: cannot unmarshal {} into Go struct field .kty of type string",
                    json_type(other)
                ));
            }
        };
        let Some(kind) = KINDS.iter().find(|k| k.kty == kty) else {
            return Err(format!("invalid key type from JSON ({kty})"));
        };
        let private = kind.kty == "oct" || hint("d").is_some();
        check_fields(kind, object)?;
        let required = if private { kind.required_private } else { kind.required_public };
        if let Some(missing) = required.iter().find(|f| !object.contains_key(**f)) {
            return Err(format!("required field {missing} is missing"));
        }
        Ok(private)
    }

    /// The field-by-field reading of a key: strings, base64 bytes, key operations, certificates.
    fn check_fields(kind: &KeyKind, object: &Map<String, Value>) -> Result<(), String> {
        for (name, value) in object {
            let name = name.as_str();
            if name == "kty" {
                match value {
                    Value::String(s) if s == kind.kty => {}
                    Value::String(s) => return Err(format!("invalid kty value for key ({s})")),
                    Value::Null => return Err("invalid kty value for key ()".to_owned()),
                    other => return Err(not_a_string("kty", other)),
                }
            } else if STRING_FIELDS.contains(&name) || (kind.has_crv && name == "crv") {
                if !matches!(value, Value::String(_) | Value::Null) {
                    return Err(not_a_string(name, value));
                }
            } else if kind.bytes.contains(&name) {
                match value {
                    Value::Null => {}
                    Value::String(s) => {
                        if super::base64::decode(s).is_none() {
                            return Err(format!(
                                "failed to decode value for key {name}: expected base64 encoded []byte (string)"
                            ));
                        }
                    }
                    other => return Err(not_a_string(name, other)),
                }
            } else if name == "key_ops" {
                match value {
                    Value::Null => {}
                    Value::Array(items)
                        if items.iter().all(|i| matches!(i, Value::String(_) | Value::Null)) => {}
                    other => {
                        return Err(format!(
                            "failed to decode value for key key_ops: json: cannot unmarshal {} into Go value of type jwk.KeyOperation",
                            json_type(other)
                        ));
                    }
                }
            } else if name == "x5c" {
                check_certificate_chain(value)?;
            }
            // Any other field is kept as an arbitrary JSON value.
        }
        Ok(())
    }

    /// `x5c`: a list of base64 DER certificates.
    fn check_certificate_chain(value: &Value) -> Result<(), String> {
        let items = match value {
            Value::Null => return Ok(()),
            Value::Array(items) => items,
            other => {
                return Err(format!(
                    "failed to decode value for key x5c: failed to unmarshal JSON into []string: json: cannot unmarshal {} into Go value of type []string",
                    json_type(other)
                ));
            }
        };
        for item in items {
            let text = match item {
                Value::String(s) => s.as_str(),
                Value::Null => "",
                other => {
                    return Err(format!(
                        "failed to decode value for key x5c: json: cannot unmarshal {} into Go value of type string",
                        json_type(other)
                    ));
                }
            };
            let der = super::base64::decode(text).ok_or_else(|| {
                "failed to decode value for key x5c: failed to base64 decode list element".to_owned()
            })?;
            if !super::der::looks_like_certificate(&der) {
                return Err("failed to decode value for key x5c: failed to parse certificate".to_owned());
            }
        }
        Ok(())
    }

    fn not_a_string(name: &str, value: &Value) -> String {
        format!(
            "failed to decode value for key {name}: error reading next value: json: cannot unmarshal {} into Go value of type string",
            json_type(value)
        )
    }

    /// The JSON type name Go's encoding/json prints.
    fn json_type(value: &Value) -> &'static str {
        match value {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
}

/// The base64 reading of `lestrrat-go/jwx` (`internal/base64.Decode`) on top of Go's
/// `encoding/base64`: URL alphabet unless the text has `+` or `/`, padded if it ends with `=`;
/// `\r` and `\n` are ignored; trailing bits are not checked.
mod base64 {
    /// Decodes the text, or `None` where Go reports an error.
    pub(super) fn decode(text: &str) -> Option<Vec<u8>> {
        let padded = text.ends_with('=');
        let url = !text.contains(['+', '/']);
        let data: Vec<u8> = text.bytes().filter(|b| *b != b'\r' && *b != b'\n').collect();
        let value_of = |b: u8| -> Option<u32> {
            let v = match b {
                b'A'..=b'Z' => b - b'A',
                b'a'..=b'z' => b - b'a' + 26,
                b'0'..=b'9' => b - b'0' + 52,
                b'-' if url => 62,
                b'_' if url => 63,
                b'+' if !url => 62,
                b'/' if !url => 63,
                _ => return None,
            };
            Some(u32::from(v))
        };
        let body: &[u8] = if padded {
            if !data.len().is_multiple_of(4) {
                return None;
            }
            let pad = data.iter().rev().take_while(|b| **b == b'=').count();
            if pad > 2 {
                return None;
            }
            &data[..data.len() - pad]
        } else {
            if data.len() % 4 == 1 {
                return None;
            }
            &data
        };
        let mut out = Vec::with_capacity(body.len() * 3 / 4);
        for chunk in body.chunks(4) {
            let mut acc = 0u32;
            for (i, b) in chunk.iter().enumerate() {
                acc |= value_of(*b)? << (18 - 6 * i);
            }
            let bytes = acc.to_be_bytes();
            out.extend_from_slice(&bytes[1..chunk.len()]);
        }
        Some(out)
    }
}

/// A shape check of DER certificates (standing in for Go's `x509.ParseCertificate`).
mod der {
    /// Reads one DER element at the start of `data`: its tag, its content and what follows.
    fn element(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = data.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 || rest.len() < count {
                return None;
            }
            let len = rest[..count].iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, &rest[count..])
        };
        if rest.len() < len {
            return None;
        }
        Some((tag, &rest[..len], &rest[len..]))
    }

    /// `true` for `SEQUENCE { SEQUENCE tbsCertificate, SEQUENCE signatureAlgorithm, BIT STRING }`
    /// with nothing after it.
    pub(super) fn looks_like_certificate(data: &[u8]) -> bool {
        let Some((0x30, body, [])) = element(data) else { return false };
        let Some((0x30, _, rest)) = element(body) else { return false };
        let Some((0x30, _, rest)) = element(rest) else { return false };
        matches!(element(rest), Some((0x03, _, [])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{meta, run, spec};

    fn check(yaml: &str) -> Report {
        let policy: RequestAuthentication = spec(yaml);
        run(validate, &meta("default", "istio-system"), &policy)
    }

    const JWKS_OK: &str = r#"{ "keys":[ {"e":"AQAB","kid":"DHFbpoIUqrY8t2zpA2qXfCmr5VO5ZEr4RzHU_-envvQ","kty":"RSA","n":"xAE7eB6qugXyCAG3yhh7pkDkT65pHymX-P7KfIupjf59vsdo91bSP9C8H07pSAGQO1MV_xFj9VswgsCg4R6otmg5PV2He95lZdHtOcU5DXIg_pbhLdKXbi66GlVeK6ABZOUW3WYtnNHD-91gVuoeJT_DwtGGcp4ignkgXfkiEm4sw-4sfb4qdt5oLbyVpmW6x9cfa7vs2WTfURiCrBoUqgBo_-4WTiULmmHSGZHOjzwa8WtrtOQGsAFjIbno85jp6MnGGGZPYZbDAa_b3y5u-YpW7ypZrvD8BgtKVjgtQgZhLAGezMt0ua3DRrWnKqTZ0BJ_EyxOGuHJrLsn00fnMQ"}]}"#;

    /// `(name, yaml, expected error substring and path or None, warning expected)`.
    /// An expected error: a substring of its message and its path.
    type Expect = Option<(&'static str, &'static str)>;

    const CASES: &[(&str, &str, Expect, bool)] = &[
        ("empty spec", "{}", None, false),
        ("another empty spec", "selector: {}\n", None, true),
        ("default name with non empty selector", "selector:\n  matchLabels: {app: httpbin}\n", None, false),
        (
            "empty jwt rule",
            "jwtRules:\n- {}\n",
            Some(("issuer or jwksUri must be non-empty string", "spec.jwtRules[0].issuer")),
            false,
        ),
        (
            "null jwt rule (CRD table)",
            "jwtRules:\n-\n",
            Some(("issuer or jwksUri must be non-empty string", "spec.jwtRules[0].issuer")),
            false,
        ),
        (
            "empty issuer and jwksUri",
            "jwtRules:\n- issuer: \"\"\n",
            Some(("issuer or jwksUri must be non-empty string", "spec.jwtRules[0].issuer")),
            false,
        ),
        (
            "empty issuer and set jwksUri",
            "jwtRules:\n- {issuer: \"\", jwksUri: \"https://foo.com/cert\"}\n",
            None,
            false,
        ),
        (
            "bad JwksUri - no protocol",
            "jwtRules:\n- {issuer: foo.com, jwksUri: foo.com}\n",
            Some(("URI scheme \"\" is not supported", "spec.jwtRules[0].jwksUri")),
            false,
        ),
        (
            "bad JwksUri - ftp",
            "jwtRules:\n- {issuer: foo.com, jwksUri: \"ftp://foo.com\"}\n",
            Some(("URI scheme \"ftp\" is not supported", "spec.jwtRules[0].jwksUri")),
            false,
        ),
        (
            "bad JwksUri - invalid port",
            "jwtRules:\n- {issuer: foo.com, jwksUri: \"https://foo.com:not-a-number\"}\n",
            Some(("invalid port \":not-a-number\" after host", "spec.jwtRules[0].jwksUri")),
            false,
        ),
        (
            "bad JwksUri - port overflow",
            "jwtRules:\n- {issuer: foo.com, jwksUri: \"https://foo.com:99999999999999999999/x\"}\n",
            Some(("value out of range", "spec.jwtRules[0].jwksUri")),
            false,
        ),
        (
            "bad JwksUri - control character (CRD table)",
            "jwtRules:\n- {issuer: example, jwksUri: \"hTPp\\\\\\blah\"}\n",
            Some(("invalid control character in URL", "spec.jwtRules[0].jwksUri")),
            false,
        ),
        (
            "JwksUri with fragment after host (CRD rule)",
            "jwtRules:\n- {issuer: example, jwksUri: \"https://foo.com#keys\"}\n",
            Some(("url must have scheme http:// or https://", "spec.jwtRules[0].jwksUri")),
            false,
        ),
        (
            "JwksUri with fragment after path",
            "jwtRules:\n- {issuer: example, jwksUri: \"HTTPS://foo.com/keys#k\"}\n",
            None,
            false,
        ),
        (
            "empty value",
            "selector:\n  matchLabels: {app: httpbin, version: \"\"}\njwtRules:\n- {issuer: foo.com, jwksUri: \"https://foo.com/cert\"}\n",
            None,
            false,
        ),
        (
            "bad workload selector - empty key",
            "selector:\n  matchLabels: {app: httpbin, \"\": v1}\njwtRules:\n- {issuer: foo.com, jwksUri: \"https://foo.com/cert\"}\n",
            Some(("empty key is not supported in selector", "spec.selector.matchLabels")),
            false,
        ),
        (
            "good targetRef",
            "targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo}\njwtRules:\n- {issuer: foo.com, jwksUri: \"https://foo.com/cert\"}\n",
            None,
            false,
        ),
        (
            "bad targetRef - empty name",
            "targetRef: {group: gateway.networking.k8s.io, kind: Gateway}\n",
            Some(("targetRef name must be set", "spec.targetRef")),
            false,
        ),
        (
            "bad targetRef - non-empty namespace",
            "targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo, namespace: bar}\n",
            Some(("targetRef namespace must not be set", "spec.targetRef")),
            false,
        ),
        (
            "bad targetRef - wrong group",
            "targetRef: {group: wrong-group, kind: Gateway, name: foo}\n",
            Some(("but was wrong-group/Gateway", "spec.targetRef")),
            false,
        ),
        (
            "bad targetRef - wrong kind",
            "targetRef: {group: gateway.networking.k8s.io, kind: wrong-kind, name: foo}\n",
            Some(("but was gateway.networking.k8s.io/wrong-kind", "spec.targetRef")),
            false,
        ),
        (
            "bad target group (CRD table)",
            "targetRef: {group: \"__\", kind: Service, name: foo}\n",
            Some(("but was __/Service", "spec.targetRef")),
            false,
        ),
        (
            "bad target kind (CRD table)",
            "targetRef: {group: \"\", kind: Serv_ice, name: foo}\n",
            Some(("but was /Serv_ice", "spec.targetRef")),
            false,
        ),
        (
            "targetRef and selector cannot both be set",
            "targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: foo}\nselector:\n  matchLabels: {app: httpbin}\n",
            Some(("only one of targetRefs or workloadSelector can be set", "spec")),
            false,
        ),
        (
            "targetRef and targetRefs (CRD table)",
            "targetRefs:\n- {group: \"\", kind: Service, name: foo}\ntargetRef: {group: \"\", kind: Service, name: foo}\n",
            Some(("only one of targetRefs or workloadSelector can be set", "spec")),
            false,
        ),
        (
            "bad header location",
            "jwtRules:\n- issuer: foo.com\n  jwksUri: \"https://foo.com\"\n  fromHeaders:\n  - {name: \"\", prefix: \"Bearer \"}\n",
            Some(("location header name must be non-empty string", "spec.jwtRules[0].fromHeaders[0].name")),
            false,
        ),
        (
            "header location without name (CRD table)",
            "jwtRules:\n- issuer: example\n  fromHeaders:\n  - {prefix: baz}\n",
            Some(("location header name must be non-empty string", "spec.jwtRules[0].fromHeaders[0].name")),
            false,
        ),
        (
            "bad param location",
            "jwtRules:\n- {issuer: foo.com, jwksUri: \"https://foo.com\", fromParams: [\"\"]}\n",
            Some(("location query must be non-empty string", "spec.jwtRules[0].fromParams[0]")),
            false,
        ),
        (
            "good",
            "jwtRules:\n- issuer: foo.com\n  jwksUri: \"https://foo.com\"\n  fromHeaders:\n  - {name: x-foo, prefix: \"Bearer \"}\n",
            None,
            false,
        ),
        (
            "bad cookie location",
            "jwtRules:\n- {issuer: foo.com, jwksUri: \"https://foo.com\", fromCookies: [\"\", foo]}\n",
            Some(("cookie name must be non-empty string", "spec.jwtRules[0].fromCookies[0]")),
            false,
        ),
        (
            "empty audience (CRD table)",
            "jwtRules:\n- {issuer: example, audiences: [\"\"]}\n",
            Some(("audience must be non-empty string", "spec.jwtRules[0].audiences[0]")),
            false,
        ),
        (
            "jwks error",
            "jwtRules:\n- {issuer: foo.com, jwks: foo}\n",
            Some(("jwks parse error", "spec.jwtRules[0].jwks")),
            false,
        ),
        (
            "jwks and jwksUri (CRD)",
            "jwtRules:\n- {issuer: foo.com, jwksUri: \"https://foo.com\", jwks: '{\"keys\": []}'}\n",
            Some(("only one of jwks or jwksUri can be set", "spec.jwtRules[0]")),
            false,
        ),
        (
            "null outputClaimToHeader (CRD table)",
            "jwtRules:\n- issuer: foo.com\n  outputClaimToHeaders:\n  - ~\n",
            Some((
                "outputClaimToHeaders header and claim value must be non-empty string",
                "spec.jwtRules[0].outputClaimToHeaders[0]",
            )),
            false,
        ),
        (
            "empty claim in outputClaimToHeader",
            "jwtRules:\n- issuer: foo.com\n  outputClaimToHeaders:\n  - {header: x-jwt-claim, claim: \"\"}\n",
            Some((
                "header and claim value must be non-empty string",
                "spec.jwtRules[0].outputClaimToHeaders[0]",
            )),
            false,
        ),
        (
            "empty header in outputClaimToHeader",
            "jwtRules:\n- issuer: foo.com\n  outputClaimToHeaders:\n  - {header: \"\", claim: sub}\n",
            Some((
                "header and claim value must be non-empty string",
                "spec.jwtRules[0].outputClaimToHeaders[0]",
            )),
            false,
        ),
        (
            "invalid header in outputClaimToHeader",
            "jwtRules:\n- issuer: foo.com\n  outputClaimToHeaders:\n  - {header: \"abc%123\", claim: sub}\n",
            Some(("is not a valid header name", "spec.jwtRules[0].outputClaimToHeaders[0].header")),
            false,
        ),
        (
            "pseudo header in outputClaimToHeader (CRD table)",
            "jwtRules:\n- issuer: foo.com\n  outputClaimToHeaders:\n  - {header: \":authority\", claim: x}\n",
            Some(("is not a valid header name", "spec.jwtRules[0].outputClaimToHeaders[0].header")),
            false,
        ),
        (
            "good outputClaimToHeader",
            "jwtRules:\n- issuer: foo.com\n  outputClaimToHeaders:\n  - {header: x-jwt_Claim-1, claim: nested.claim}\n",
            None,
            false,
        ),
        (
            "timeout below 1ms",
            "jwtRules:\n- {issuer: foo.com, timeout: 0.0001s}\n",
            Some(("duration must be greater than 1ms", "spec.jwtRules[0].timeout")),
            false,
        ),
        (
            "timeout sub-ms precision",
            "jwtRules:\n- {issuer: foo.com, timeout: 1.0005s}\n",
            Some(("only durations to ms precision are supported", "spec.jwtRules[0].timeout")),
            false,
        ),
        ("good timeout", "jwtRules:\n- {issuer: foo.com, timeout: 5s}\n", None, false),
        (
            "empty space-delimited claim (CRD table)",
            "jwtRules:\n- {issuer: example, spaceDelimitedClaims: [\"\"]}\n",
            Some((
                "spaceDelimitedClaims[0] in body should be at least 1 chars long",
                "spec.jwtRules[0].spaceDelimitedClaims[0]",
            )),
            false,
        ),
        (
            "good space-delimited claims",
            "jwtRules:\n- {issuer: example, spaceDelimitedClaims: [groups, roles]}\n",
            None,
            false,
        ),
    ];

    #[test]
    fn istio_cases() {
        for (name, yaml, expected, warning) in CASES {
            let report = check(yaml);
            match expected {
                None => assert!(report.errors.is_empty(), "{name}: unexpected errors {:?}", report.errors),
                Some((message, path)) => assert!(
                    report.errors.iter().any(|e| e.message.contains(message) && e.path == *path),
                    "{name}: expected {message:?} at {path}, got {:?}",
                    report.errors
                ),
            }
            assert_eq!(!report.warnings.is_empty(), *warning, "{name}: warnings {:?}", report.warnings);
        }
    }

    #[test]
    fn inline_jwks() {
        let mut policy: RequestAuthentication = spec("jwtRules:\n- issuer: foo.com\n");
        policy.jwt_rules[0].jwks = JWKS_OK.to_owned();
        let report = run(validate, &meta("default", "ns"), &policy);
        assert!(report.is_valid() && report.warnings.is_empty(), "{report:?}");

        // A private RSA key: accepted with a warning.
        let private =
            JWKS_OK.replace("\"kty\":\"RSA\"", "\"kty\":\"RSA\",\"d\":\"jJVKLOMXjlSnICzfP_eWshwR\"");
        policy.jwt_rules[0].jwks = private;
        let report = run(validate, &meta("default", "ns"), &policy);
        assert!(report.is_valid(), "{report:?}");
        assert_eq!(report.warnings.len(), 1);
        assert!(report.warnings[0].message.contains("jwks key at index 0 contains private key material"));
    }

    #[test]
    fn jwks_reading() {
        let ok = |text: &str| jwks::parse(text);
        assert_eq!(ok(r#"{"keys": []}"#), Ok(vec![]));
        assert_eq!(ok(r#"{"keys": null}"#), Ok(vec![]));
        assert_eq!(ok(r#"{"kty": "oct", "k": "AAEC"}"#), Ok(vec![true]));
        assert_eq!(
            ok(
                r#"{"keys": [{"kty": "EC", "crv": "P-256", "x": "AA", "y": "AQ", "kid": "a", "use": "sig"}]}"#
            ),
            Ok(vec![false])
        );
        assert_eq!(
            ok(r#"{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AA", "d": "AQ"}]}"#),
            Ok(vec![true])
        );
        assert_eq!(
            ok(
                r#"{"keys": [{"kty": "RSA", "e": "AQAB", "n": "AA==", "key_ops": ["verify"], "extra": {"a": 1}}]}"#
            ),
            Ok(vec![false])
        );
        assert_eq!(ok(r#"{"keys": [{"kty": "RSA", "e": "AQ+B", "n": "AA/="}]}"#), Ok(vec![false]));
        for bad in [
            "foo",
            "[]",
            "\"keys\"",
            "{}",
            r#"{"keys": {}}"#,
            r#"{"keys": [1]}"#,
            r#"{"keys": [null]}"#,
            r#"{"keys": [{"kty": "DSA"}]}"#,
            r#"{"keys": [{"kty": 1}]}"#,
            r#"{"keys": [{"kty": "RSA", "e": "AQAB"}]}"#,
            r#"{"keys": [{"kty": "RSA", "e": "AQAB", "n": "A"}]}"#,
            r#"{"keys": [{"kty": "RSA", "e": "AQAB", "n": "A==="}]}"#,
            r#"{"keys": [{"kty": "RSA", "e": "AQAB", "n": "A+-A"}]}"#,
            r#"{"keys": [{"kty": "RSA", "e": 65537, "n": "AA"}]}"#,
            r#"{"keys": [{"kty": "RSA", "e": "AQAB", "n": "AA", "kid": 1}]}"#,
            r#"{"keys": [{"kty": "RSA", "e": "AQAB", "n": "AA", "d": 1}]}"#,
            r#"{"keys": [{"kty": "EC", "x": "AA", "y": "AA"}]}"#,
            r#"{"keys": [{"kty": "RSA", "e": "AQAB", "n": "AA", "x5c": ["AAAA"]}]}"#,
            r#"{"keys": [{"kty": "RSA", "e": "AQAB", "n": "AA", "key_ops": "sign"}]}"#,
        ] {
            assert!(ok(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn base64_and_der() {
        assert_eq!(base64::decode("AQAB"), Some(vec![1, 0, 1]));
        assert_eq!(base64::decode("AQ"), Some(vec![1]));
        assert_eq!(base64::decode("AQ=="), Some(vec![1]));
        assert_eq!(base64::decode("-_8"), Some(vec![0xfb, 0xff]));
        assert_eq!(base64::decode("+/8="), Some(vec![0xfb, 0xff]));
        assert_eq!(base64::decode(""), Some(vec![]));
        assert_eq!(base64::decode("A"), None);
        assert_eq!(base64::decode("A=B="), None);
        assert_eq!(base64::decode("AQ=\n="), Some(vec![1]));
        // SEQUENCE { SEQUENCE {}, SEQUENCE {}, BIT STRING {0} }
        assert!(der::looks_like_certificate(&[0x30, 0x07, 0x30, 0x00, 0x30, 0x00, 0x03, 0x01, 0x00]));
        assert!(!der::looks_like_certificate(&[0x30, 0x07, 0x30, 0x00, 0x30, 0x00, 0x03, 0x01]));
        assert!(!der::looks_like_certificate(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]));
    }
}
