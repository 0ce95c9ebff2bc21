//! `RequestAuthentication` (`security.istio.io`): JWT validation for requests to workloads.
//!
//! Follows `security/v1beta1/request_authentication.proto` of the Istio API
//! (`istio.security.v1beta1.RequestAuthentication`, with `JWTRule`, `JWTHeader` and `ClaimToHeader`).

use serde::{Deserialize, Serialize};

use crate::{
    type_v1beta1::{PolicyTargetReference, WorkloadSelector},
    wkt::{Duration, is_default},
};

/// The JWTs the selected workloads accept. A request carrying a token that fails validation is
/// rejected; a request without a token is accepted (with no request identity).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestAuthentication {
    /// Workloads (in the policy's namespace, or all namespaces from the root namespace) the policy
    /// applies to. Unset with no `targetRefs`: every workload. At most one of `selector` and
    /// `targetRefs` may be set.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub selector: Option<WorkloadSelector>,
    /// A single resource the policy attaches to (undocumented form of `targetRefs`).
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_ref: Option<PolicyTargetReference>,
    /// Resources (Gateway, GatewayClass, Service, ServiceEntry) the policy attaches to; up to 16.
    /// Waypoints only honour policies that use this field.
    #[prost(message, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_refs: Vec<PolicyTargetReference>,
    /// How to find and validate tokens, one rule per issuer/location; up to 4096. A request with
    /// tokens in several locations has an undefined principal.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub jwt_rules: Vec<JwtRule>,
}

/// How to find, validate and forward a JSON Web Token (RFC 7519) of one issuer.
///
/// Without `fromHeaders`, `fromParams` and `fromCookies`, the token is read from
/// `Authorization: Bearer <token>`, then from the `access_token` query parameter.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JwtRule {
    /// The required `iss` claim, e.g. `https://accounts.example.com`. Required (non-empty).
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub issuer: String,
    /// Accepted `aud` claims (any one suffices). Empty: the service name is accepted.
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub audiences: Vec<String>,
    /// `http(s)` URL of the issuer's JSON Web Key Set (at most 2048 characters). Optional when
    /// it can be found by OpenID discovery or from the issuer's email domain. Not with `jwks`.
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub jwks_uri: String,
    /// The JSON Web Key Set itself, inline. Not with `jwksUri`.
    #[prost(string, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub jwks: String,
    /// Request headers that may carry the token (with an optional prefix to strip).
    #[prost(message, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub from_headers: Vec<JwtHeader>,
    /// Query parameters that may carry the token (`/path?my_token=<JWT>`).
    #[prost(string, repeated, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub from_params: Vec<String>,
    /// Header to which the verified payload is written, base64-encoded JSON. Empty: not written.
    #[prost(string, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub output_payload_to_header: String,
    /// Cookies that may carry the token.
    #[prost(string, repeated, tag = "12")]
    #[serde(skip_serializing_if = "is_default")]
    pub from_cookies: Vec<String>,
    /// Keep the token in the request forwarded upstream. Default `false` (the token is removed).
    #[prost(bool, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub forward_original_token: bool,
    /// Claims copied into request headers after verification (experimental); header names must be
    /// unique. Nested claims (`a.b.c`) of string, integer or boolean type are supported.
    #[prost(message, repeated, tag = "11")]
    #[serde(skip_serializing_if = "is_default")]
    pub output_claim_to_headers: Vec<ClaimToHeader>,
    /// How long istiod waits when fetching the JWKS (when it resolves JWKS remotely). Default 5s.
    #[prost(message, optional, tag = "13")]
    #[serde(skip_serializing_if = "is_default")]
    pub timeout: Option<Duration>,
    /// Claims whose string value is split on whitespace for authorization matching, in addition
    /// to `scope` and `permission` (always split); up to 64.
    #[prost(string, repeated, tag = "14")]
    #[serde(skip_serializing_if = "is_default")]
    pub space_delimited_claims: Vec<String>,
    /// Whether a request must carry this rule's token (istio.io/api v1.32.0, field 15): `OPTIONAL`
    /// (default) lets a request without it through (a present but invalid token is still rejected),
    /// `REQUIRED` rejects a request without it (401) even when another rule's token is valid.
    #[prost(enumeration = "jwt_rule::JwtRequirement", tag = "15")]
    #[serde(with = "jwt_rule::JwtRequirement", skip_serializing_if = "is_default")]
    pub presence: i32,
}

/// Nested types of [`JwtRule`].
pub mod jwt_rule {
    crate::proto_enum! {
        /// Whether the rule's token must be present (`JWTRule.JWTRequirement`).
        pub enum JwtRequirement {
            /// A request without the token is allowed; an invalid token is not.
            Optional = 0 => "OPTIONAL",
            /// A request without the token is rejected with 401.
            Required = 1 => "REQUIRED",
        }
    }
}

/// A request header that may carry a token.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JwtHeader {
    /// The header name. Required (non-empty).
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Text the header value must start with, stripped before decoding (e.g. `"Bearer "`, with
    /// its trailing space). A value without it is invalid.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub prefix: String,
}

/// Copies one claim of a verified token into a request header.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimToHeader {
    /// The header to set (replaced if present); letters, digits, `-` and `_`. Required.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub header: String,
    /// The claim to copy (string, integer or boolean; otherwise, or when absent, no header is
    /// set). Required.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub claim: String,
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::{
        de::from_node,
        test_corpus::{Scope, check_corpus},
    };

    use crate::test_corpus::spec_of as spec;

    const FULL: &str = r#"
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata:
  name: jwt
spec:
  selector:
    matchLabels:
      istio: ingressgateway
  jwtRules:
  - issuer: https://accounts.example.com
    audiences: [bookstore_web.apps.example.com, bookstore_android.apps.example.com]
    jwksUri: https://accounts.example.com/.well-known/jwks.json
    fromHeaders:
    - name: x-jwt-assertion
      prefix: "Bearer "
    - name: x-goog-iap-jwt-assertion
    fromParams: [my_token]
    fromCookies: [auth-token]
    outputPayloadToHeader: x-jwt-payload
    forwardOriginalToken: true
    outputClaimToHeaders:
    - header: x-jwt-group
      claim: nested.key.group
    timeout: 1.5s
    spaceDelimitedClaims: [custom_scope, roles]
  - issuer: testing@secure.istio.io
    jwks: '{"keys": []}'
"#;

    #[test]
    fn decodes_full_rules() {
        let (r, unknown) = from_node::<RequestAuthentication>(&spec(FULL), "spec").unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(r.selector.unwrap().match_labels["istio"], "ingressgateway");
        assert_eq!(r.jwt_rules.len(), 2);
        let j = &r.jwt_rules[0];
        assert_eq!(j.issuer, "https://accounts.example.com");
        assert_eq!(j.audiences.len(), 2);
        assert_eq!(j.jwks_uri, "https://accounts.example.com/.well-known/jwks.json");
        assert_eq!(
            j.from_headers,
            [
                JwtHeader { name: "x-jwt-assertion".into(), prefix: "Bearer ".into() },
                JwtHeader { name: "x-goog-iap-jwt-assertion".into(), prefix: String::new() },
            ]
        );
        assert_eq!(j.from_params, ["my_token"]);
        assert_eq!(j.from_cookies, ["auth-token"]);
        assert_eq!(j.output_payload_to_header, "x-jwt-payload");
        assert!(j.forward_original_token);
        assert_eq!(
            j.output_claim_to_headers,
            [ClaimToHeader { header: "x-jwt-group".into(), claim: "nested.key.group".into() }]
        );
        assert_eq!(j.timeout, Some(Duration { seconds: 1, nanos: 500_000_000 }));
        assert_eq!(j.space_delimited_claims, ["custom_scope", "roles"]);
        assert_eq!(r.jwt_rules[1].jwks, r#"{"keys": []}"#);
    }

    #[test]
    fn proto_field_names_and_target_refs_are_accepted() {
        // `jwks_uri` is the CRD's alternative name; targetRefs instead of a selector.
        let text = "spec:\n  targetRefs:\n  - {group: gateway.networking.k8s.io, kind: Gateway, name: gw}\n  jwtRules:\n  - {issuer: a, jwks_uri: 'https://a/jwks'}\n";
        let (r, unknown) = from_node::<RequestAuthentication>(&spec(text), "spec").unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(r.target_refs[0].name, "gw");
        assert_eq!(r.jwt_rules[0].jwks_uri, "https://a/jwks");
    }

    #[test]
    fn misspelt_field_is_reported_with_its_path() {
        let text = "spec:\n  jwtRules:\n  - issuer: a\n    fromHeaders:\n    - name: x\n      prefx: b\n";
        let (_, unknown) = from_node::<RequestAuthentication>(&spec(text), "spec").unwrap();
        let paths: Vec<_> = unknown.iter().map(|u| (u.path.as_str(), u.mark.line)).collect();
        assert_eq!(paths, [("spec.jwtRules[0].fromHeaders[0].prefx", 6)]);
    }

    #[test]
    fn bad_duration_is_an_error() {
        let err = from_node::<RequestAuthentication>(
            &spec("spec:\n  jwtRules:\n  - {issuer: a, timeout: apple}\n"),
            "spec",
        )
        .unwrap_err();
        assert_eq!(err.path, "spec.jwtRules[0].timeout");
        assert!(err.message.contains("invalid duration"), "{err}");
    }

    #[test]
    fn protobuf_round_trip() {
        let (r, _) = from_node::<RequestAuthentication>(&spec(FULL), "spec").unwrap();
        assert_eq!(RequestAuthentication::decode(&*r.encode_to_vec()).unwrap(), r);
    }

    #[test]
    fn wire_field_numbers() {
        // jwtRules = 2 { issuer = 1, jwks = 10, forwardOriginalToken = 9, timeout = 13 { seconds = 1 },
        // spaceDelimitedClaims = 14 }; targetRef = 3 { name = 3 }.
        let r = RequestAuthentication {
            target_ref: Some(PolicyTargetReference { name: "t".into(), ..Default::default() }),
            jwt_rules: vec![JwtRule {
                issuer: "i".into(),
                jwks: "k".into(),
                forward_original_token: true,
                timeout: Some(Duration { seconds: 2, nanos: 0 }),
                space_delimited_claims: vec!["c".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            r.encode_to_vec(),
            [
                0x12, 15, // jwtRules
                0x0a, 1, b'i', // issuer
                0x48, 1, // forwardOriginalToken
                0x52, 1, b'k', // jwks
                0x6a, 2, 0x08, 2, // timeout
                0x72, 1, b'c', // spaceDelimitedClaims
                0x1a, 3, 0x1a, 1, b't', // targetRef
            ]
        );
        // fromHeaders = 6, fromParams = 7, outputPayloadToHeader = 8, outputClaimToHeaders = 11,
        // fromCookies = 12.
        let j = JwtRule {
            from_headers: vec![JwtHeader { name: "h".into(), prefix: "p".into() }],
            from_params: vec!["q".into()],
            output_payload_to_header: "o".into(),
            output_claim_to_headers: vec![ClaimToHeader { header: "x".into(), claim: "y".into() }],
            from_cookies: vec!["c".into()],
            ..Default::default()
        };
        assert_eq!(
            j.encode_to_vec(),
            [
                0x32, 6, 0x0a, 1, b'h', 0x12, 1, b'p', // fromHeaders
                0x3a, 1, b'q', // fromParams
                0x42, 1, b'o', // outputPayloadToHeader
                0x5a, 6, 0x0a, 1, b'x', 0x12, 1, b'y', // outputClaimToHeaders
                0x62, 1, b'c', // fromCookies
            ]
        );
    }

    #[test]
    fn json_uses_camel_case_and_omits_defaults() {
        let (r, _) = from_node::<RequestAuthentication>(&spec(FULL), "spec").unwrap();
        let json = serde_json::to_value(&r).unwrap();
        let j = &json["jwtRules"][0];
        assert_eq!(j["jwksUri"], "https://accounts.example.com/.well-known/jwks.json");
        assert_eq!(j["fromHeaders"][1], serde_json::json!({"name": "x-goog-iap-jwt-assertion"}));
        assert_eq!(j["forwardOriginalToken"], true);
        assert_eq!(j["outputClaimToHeaders"][0]["claim"], "nested.key.group");
        assert_eq!(j["timeout"], "1.500s");
        assert_eq!(j["spaceDelimitedClaims"], serde_json::json!(["custom_scope", "roles"]));
        assert_eq!(
            json["jwtRules"][1],
            serde_json::json!({"issuer": "testing@secure.istio.io", "jwks": "{\"keys\": []}"})
        );
        let back: RequestAuthentication = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn corpus_decodes_without_unknown_fields() {
        // The valid inputs hold no RequestAuthentication today (the count is printed so that a
        // change shows); the analyzer test data holds one.
        check_corpus::<RequestAuthentication>(crate::Kind::RequestAuthentication, Scope::Valid, &[]);
        assert!(
            check_corpus::<RequestAuthentication>(crate::Kind::RequestAuthentication, Scope::Other, &[]) > 0
        );
    }
}
