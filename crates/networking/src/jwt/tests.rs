//! Tests of the JWT filter builder. Expected values of the cases named after Istio's
//! `TestJwtFilter` / `TestConvertToEnvoyJwtConfig` (`pilot/pkg/security/authn/policy_applier_test.go`)
//! are that test's expectations, read from it and written here as decoded protos.

use std::sync::Mutex;

use api::{
    security::request_authentication::{ClaimToHeader, JwtHeader as ApiJwtHeader},
    spec::Spec,
    wkt::Duration as ApiDuration,
};
use model::ConfigMeta;

use super::*;

const FOO: &str = "https://secret.foo.com";
const BAR: &str = "https://secret.bar.com";
const FOO_URI: &str = "http://127.0.0.1:8080/oauth2/v3/certs";
/// P-256's generator as a public key (a point on the curve: Envoy loads it).
const FOO_KEYS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY","y":"T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU","kid":"foo"}]}"#;

fn policy(namespace: &str, name: &str, rules: Vec<JwtRule>) -> Arc<Config> {
    Arc::new(Config {
        meta: ConfigMeta { name: name.into(), namespace: namespace.into(), ..Default::default() },
        spec: Spec::RequestAuthentication(Box::new(RequestAuthentication {
            jwt_rules: rules,
            ..Default::default()
        })),
        status: None,
    })
}

fn rule(issuer: &str, jwks_uri: &str) -> JwtRule {
    JwtRule { issuer: issuer.into(), jwks_uri: jwks_uri.into(), ..Default::default() }
}

fn foo_source() -> StaticJwks {
    StaticJwks::default().with(FOO, FOO_URI, JwksState::Resolved(FOO_KEYS.into()))
}

/// The filter's name, type URL and decoded config.
fn decode(out: &JwtFilter) -> JwtAuthentication {
    let filter = out.filter.as_ref().expect("a jwt_authn filter");
    assert_eq!(filter.name, "envoy.filters.http.jwt_authn");
    assert!(!filter.is_optional && !filter.disabled);
    let Some(http_filter::ConfigType::TypedConfig(any)) = &filter.config_type else { panic!("typed config") };
    assert_eq!(
        any.type_url,
        "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication"
    );
    JwtAuthentication::decode(any.value.as_slice()).expect("decodes")
}

fn name(n: &str) -> JwtRequirement {
    JwtRequirement { requires_type: Some(RequiresType::ProviderName(n.into())) }
}

fn allow_missing() -> JwtRequirement {
    JwtRequirement { requires_type: Some(RequiresType::AllowMissing(Empty::default())) }
}

fn any_of(requirements: Vec<JwtRequirement>) -> JwtRequirement {
    JwtRequirement { requires_type: Some(RequiresType::RequiresAny(JwtRequirementOrList { requirements })) }
}

fn all_of(requirements: Vec<JwtRequirement>) -> JwtRequirement {
    JwtRequirement { requires_type: Some(RequiresType::RequiresAll(JwtRequirementAndList { requirements })) }
}

/// The one rule every config has: prefix `/`, requiring `requires`.
fn only_rule(config: &JwtAuthentication) -> &JwtRequirement {
    assert_eq!(config.rules.len(), 1);
    let rule = &config.rules[0];
    let m = rule.r#match.as_ref().expect("match");
    assert_eq!(m.path_specifier, Some(PathSpecifier::Prefix("/".into())));
    assert!(m.headers.is_empty() && m.query_parameters.is_empty());
    let Some(RequirementType::Requires(requires)) = &rule.requirement_type else { panic!("requires") };
    requires
}

fn inline(provider: &JwtProvider) -> &str {
    match &provider.jwks_source_specifier {
        Some(JwksSourceSpecifier::LocalJwks(DataSource {
            specifier: Some(data_source::Specifier::InlineString(s)),
            ..
        })) => s,
        other => panic!("expected inline local JWKS, got {other:?}"),
    }
}

/// Istio's provider for a plain rule (`PayloadInMetadata`, default space-delimited claims).
fn plain_provider(issuer: &str, keys: &str) -> JwtProvider {
    JwtProvider {
        issuer: issuer.into(),
        payload_in_metadata: "payload".into(),
        normalize_payload_in_metadata: Some(NormalizePayload {
            space_delimited_claims: vec!["permission".into(), "scope".into()],
        }),
        jwks_source_specifier: Some(JwksSourceSpecifier::LocalJwks(DataSource {
            specifier: Some(data_source::Specifier::InlineString(keys.into())),
            ..Default::default()
        })),
        ..Default::default()
    }
}

#[test]
fn no_policy_or_no_rule_gives_no_filter() {
    // Istio: "No policy", "Empty policy".
    assert!(build_jwt_filter(&[], &StaticJwks::default()).filter.is_none());
    let out = build_jwt_filter(&[policy("ns", "empty", vec![])], &StaticJwks::default());
    assert!(out.filter.is_none() && out.findings.is_empty());
}

#[test]
fn single_rule_matches_istio() {
    // Istio: "Single JWT policy".
    let out = build_jwt_filter(&[policy("ns", "p", vec![rule(FOO, FOO_URI)])], &foo_source());
    assert!(out.findings.is_empty(), "{:?}", out.findings);
    let config = decode(&out);
    assert_eq!(*only_rule(&config), any_of(vec![name("origins-0"), allow_missing()]));
    assert!(config.bypass_cors_preflight);
    assert_eq!(config.providers.len(), 1);
    assert_eq!(config.providers["origins-0"], plain_provider(FOO, FOO_KEYS));
    assert!(config.requirement_map.is_empty() && config.filter_state_rules.is_none());
    assert!(config.stat_prefix.is_empty() && !config.strip_failure_response);
}

#[test]
fn several_rules_are_sorted_by_issuer_across_policies_and_combined_as_istio() {
    // Istio: "Multiple JWT rule" (foo by jwksUri, bar inline), here split over two policies.
    let bar_keys = r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#;
    let policies = [
        policy("ns", "a", vec![rule(FOO, FOO_URI)]),
        policy("ns", "b", vec![JwtRule { issuer: BAR.into(), jwks: bar_keys.into(), ..Default::default() }]),
    ];
    let out = build_jwt_filter(&policies, &foo_source());
    assert!(out.findings.is_empty(), "{:?}", out.findings);
    let config = decode(&out);
    assert_eq!(config.providers["origins-0"], plain_provider(BAR, bar_keys));
    assert_eq!(config.providers["origins-1"], plain_provider(FOO, FOO_KEYS));
    assert_eq!(
        *only_rule(&config),
        any_of(vec![
            name("origins-0"),
            name("origins-1"),
            all_of(vec![
                any_of(vec![name("origins-0"), allow_missing()]),
                any_of(vec![name("origins-1"), allow_missing()]),
            ]),
        ])
    );
}

#[test]
fn a_required_rule_makes_every_rule_hold_at_once() {
    // `presence: REQUIRED` (istio.io/api v1.32.0): its token must be there; an OPTIONAL rule's may be
    // missing, not invalid. The requirement Istio builds (any one provider) would let a request with
    // only the optional token through.
    let bar_keys = r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#;
    let required = |mut r: JwtRule| {
        r.presence = JwtPresence::Required as i32;
        r
    };
    let policies = [
        policy("ns", "a", vec![required(rule(FOO, FOO_URI))]),
        policy("ns", "b", vec![JwtRule { issuer: BAR.into(), jwks: bar_keys.into(), ..Default::default() }]),
    ];
    let config = decode(&build_jwt_filter(&policies, &foo_source()));
    assert_eq!(config.providers["origins-1"], plain_provider(FOO, FOO_KEYS));
    assert_eq!(
        *only_rule(&config),
        all_of(vec![any_of(vec![name("origins-0"), allow_missing()]), name("origins-1")])
    );
    // A single required rule: just its provider, no allow_missing.
    let config =
        decode(&build_jwt_filter(&[policy("ns", "a", vec![required(rule(FOO, FOO_URI))])], &foo_source()));
    assert_eq!(*only_rule(&config), name("origins-0"));
}

#[test]
fn same_issuer_keeps_policy_order() {
    let policies = [
        policy("ns", "a", vec![JwtRule { audiences: vec!["first".into()], ..rule(FOO, FOO_URI) }]),
        policy("ns", "b", vec![JwtRule { audiences: vec!["second".into()], ..rule(FOO, FOO_URI) }]),
    ];
    let config = decode(&build_jwt_filter(&policies, &foo_source()));
    assert_eq!(config.providers["origins-0"].audiences, ["first"]);
    assert_eq!(config.providers["origins-1"].audiences, ["second"]);
}

#[test]
fn every_rule_field_is_translated() {
    // Istio: "Forward original token", "Output payload", "Output claim to header", "custom space
    // delimited claims"; plus locations.
    let r = JwtRule {
        audiences: vec!["a1".into(), "a2".into()],
        forward_original_token: true,
        output_payload_to_header: "x-foo".into(),
        output_claim_to_headers: vec![
            ClaimToHeader { header: "x-jwt-key1".into(), claim: "value1".into() },
            ClaimToHeader { header: "x-jwt-key2".into(), claim: "value2".into() },
        ],
        from_headers: vec![
            ApiJwtHeader { name: "x-jwt-assertion".into(), prefix: "Bearer ".into() },
            ApiJwtHeader { name: "x-goog-iap-jwt-assertion".into(), prefix: String::new() },
        ],
        from_params: vec!["my_token".into()],
        from_cookies: vec!["auth-token".into()],
        space_delimited_claims: vec!["roles".into(), "custom_scope".into(), "scope".into()],
        ..rule(FOO, FOO_URI)
    };
    let config = decode(&build_jwt_filter(&[policy("ns", "p", vec![r])], &foo_source()));
    let p = &config.providers["origins-0"];
    let expected = JwtProvider {
        audiences: vec!["a1".into(), "a2".into()],
        forward: true,
        forward_payload_header: "x-foo".into(),
        claim_to_headers: vec![
            JwtClaimToHeader {
                header_name: "x-jwt-key1".into(),
                claim_name: "value1".into(),
                ..Default::default()
            },
            JwtClaimToHeader {
                header_name: "x-jwt-key2".into(),
                claim_name: "value2".into(),
                ..Default::default()
            },
        ],
        from_headers: vec![
            JwtHeader { name: "x-jwt-assertion".into(), value_prefix: "Bearer ".into() },
            JwtHeader { name: "x-goog-iap-jwt-assertion".into(), value_prefix: String::new() },
        ],
        from_params: vec!["my_token".into()],
        from_cookies: vec!["auth-token".into()],
        normalize_payload_in_metadata: Some(NormalizePayload {
            // Istio's sorted union with the defaults.
            space_delimited_claims: ["custom_scope", "permission", "roles", "scope"]
                .map(String::from)
                .to_vec(),
        }),
        ..plain_provider(FOO, FOO_KEYS)
    };
    assert_eq!(*p, expected);
    assert!(!p.clear_route_cache && p.subjects.is_none() && !p.require_expiration);
}

#[test]
fn gateways_clear_the_route_cache() {
    let policies = [policy("ns", "p", vec![rule(FOO, FOO_URI), rule(BAR, "http://bar/keys")])];
    let gateway = decode(&build_gateway_jwt_filter(&policies, &foo_source()));
    assert!(gateway.providers.values().all(|p| p.clear_route_cache));
    let sidecar = decode(&build_jwt_filter(&policies, &foo_source()));
    assert!(sidecar.providers.values().all(|p| !p.clear_route_cache));
}

#[test]
fn pending_key_set_fails_closed_without_finding() {
    // Istio sends PublicOnlyJwks while it has no key set ("Empty Jwks URI", "Unreachable Jwks URI").
    let out = build_jwt_filter(&[policy("ns", "p", vec![rule(FOO, FOO_URI)])], &StaticJwks::default());
    assert!(out.findings.is_empty());
    let config = decode(&out);
    assert_eq!(config.providers["origins-0"], plain_provider(FOO, PUBLIC_ONLY_JWKS));
    // Tokenless requests still pass; tokens are checked against a key nobody can sign with.
    assert_eq!(*only_rule(&config), any_of(vec![name("origins-0"), allow_missing()]));
}

#[test]
fn failed_fetch_fails_closed_with_finding_on_the_rule() {
    let source = StaticJwks::default()
        .with(FOO, FOO_URI, JwksState::Failed("connection refused".into()))
        .with(BAR, "", JwksState::Failed("status 404".into()));
    let policies = [policy("ns", "p", vec![rule(FOO, FOO_URI), rule(BAR, "")])];
    let out = build_jwt_filter(&policies, &source);
    let config = decode(&out);
    assert_eq!(inline(&config.providers["origins-0"]), PUBLIC_ONLY_JWKS);
    assert_eq!(inline(&config.providers["origins-1"]), PUBLIC_ONLY_JWKS);
    let paths: Vec<_> = out.findings.iter().map(|f| (f.path.as_str(), f.resource.as_str())).collect();
    // bar sorts first (origins-0) but is spec.jwtRules[1] of its policy.
    assert_eq!(
        paths,
        [
            ("spec.jwtRules[1].issuer", "envoy.filters.http.jwt_authn provider origins-0"),
            ("spec.jwtRules[0].jwksUri", "envoy.filters.http.jwt_authn provider origins-1"),
        ]
    );
    assert!(out.findings.iter().all(|f| f.severity == Severity::Dropped));
    assert_eq!(out.findings[0].config.as_ref().unwrap().to_string(), "RequestAuthentication/ns/p");
    assert!(
        out.findings[0].message.contains("OpenID discovery")
            && out.findings[0].message.contains("status 404")
    );
    assert!(out.findings[1].message.contains("connection refused"), "{}", out.findings[1].message);
}

#[test]
fn unusable_inline_jwks_is_replaced_and_reported() {
    let policies = [policy(
        "ns",
        "p",
        vec![
            // Istio's test passes "jwks-inline-data" through; its validation rejects it.
            JwtRule { issuer: "a".into(), jwks: "jwks-inline-data".into(), ..Default::default() },
            JwtRule { issuer: "b".into(), jwks: r#"{"keys": []}"#.into(), ..Default::default() },
            JwtRule { issuer: "c".into(), jwks: FOO_KEYS.into(), ..Default::default() },
        ],
    )];
    let out = build_jwt_filter(&policies, &StaticJwks::default());
    let config = decode(&out);
    assert_eq!(inline(&config.providers["origins-0"]), PUBLIC_ONLY_JWKS);
    assert_eq!(inline(&config.providers["origins-1"]), PUBLIC_ONLY_JWKS);
    assert_eq!(inline(&config.providers["origins-2"]), FOO_KEYS);
    let paths: Vec<_> = out.findings.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["spec.jwtRules[0].jwks", "spec.jwtRules[1].jwks"]);
    assert!(out.findings[0].message.contains("jwks parse error"), "{}", out.findings[0].message);
    assert!(out.findings[1].message.contains("no keys"), "{}", out.findings[1].message);
}

#[test]
fn public_only_jwks_is_one_rsa_public_key() {
    let v: serde_json::Value = serde_json::from_str(PUBLIC_ONLY_JWKS).unwrap();
    let keys = v["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0]["kty"], "RSA");
    assert_eq!(keys[0]["e"], "AQAB");
    assert!(keys[0].get("d").is_none(), "no private part");
    assert_eq!(keys[0]["n"].as_str().unwrap().len(), 342, "2048-bit modulus, base64url");
    assert_eq!(keys::envoy_jwks_error(PUBLIC_ONLY_JWKS), None, "Envoy loads it");
}

/// A source that records the timeouts it is asked with.
#[derive(Default)]
struct Recording(Mutex<Vec<(String, String, Duration)>>);

impl JwksSource for Recording {
    fn jwks(&self, _: &str, _: &str) -> JwksState {
        unreachable!("the builder asks with the rule's timeout")
    }
    fn jwks_with_timeout(&self, issuer: &str, jwks_uri: &str, timeout: Duration) -> JwksState {
        self.0.lock().unwrap().push((issuer.into(), jwks_uri.into(), timeout));
        JwksState::Pending
    }
}

#[test]
fn rule_timeout_is_passed_to_the_source_default_five_seconds() {
    let source = Recording::default();
    let policies = [policy(
        "ns",
        "p",
        vec![
            JwtRule {
                timeout: Some(ApiDuration { seconds: 1, nanos: 500_000_000 }),
                ..rule(BAR, "http://bar")
            },
            rule(FOO, ""),
            JwtRule { issuer: "inline".into(), jwks: FOO_KEYS.into(), ..Default::default() },
        ],
    )];
    build_jwt_filter(&policies, &source);
    assert_eq!(
        *source.0.lock().unwrap(),
        [
            (BAR.to_string(), "http://bar".to_string(), Duration::from_millis(1500)),
            (FOO.to_string(), String::new(), Duration::from_secs(5)),
        ]
    );
}

#[test]
fn other_kinds_are_ignored() {
    let other = Arc::new(Config {
        meta: ConfigMeta::default(),
        spec: Spec::PeerAuthentication(Default::default()),
        status: None,
    });
    assert!(build_jwt_filter(std::slice::from_ref(&other), &StaticJwks::default()).filter.is_none());
    let out = build_jwt_filter(&[other, policy("ns", "p", vec![rule(FOO, FOO_URI)])], &foo_source());
    assert_eq!(decode(&out).providers.len(), 1);
}

#[test]
fn encoding_is_deterministic() {
    let rules: Vec<JwtRule> =
        (0..12).map(|i| rule(&format!("https://issuer-{i:02}"), "http://keys")).collect();
    let policies = [policy("ns", "p", rules)];
    let bytes = |out: &JwtFilter| match &out.filter.as_ref().unwrap().config_type {
        Some(http_filter::ConfigType::TypedConfig(any)) => any.value.clone(),
        _ => unreachable!(),
    };
    let first = build_jwt_filter(&policies, &StaticJwks::default());
    for _ in 0..10 {
        assert_eq!(bytes(&build_jwt_filter(&policies, &StaticJwks::default())), bytes(&first));
    }
    let decoded = decode(&first);
    assert_eq!(decoded.providers.len(), 12);
    assert_eq!(decoded.providers["origins-11"].issuer, "https://issuer-11");
}

#[test]
fn key_sets_envoy_cannot_load_are_replaced_and_reported() {
    // Measured with Envoy 1.40: a set whose only key is off its curve rejects the whole listener.
    let off_curve = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"eA","y":"eQ"}]}"#;
    let source = StaticJwks::default().with(FOO, FOO_URI, JwksState::Resolved(off_curve.into()));
    let policies = [policy(
        "ns",
        "p",
        vec![
            rule(FOO, FOO_URI),
            JwtRule { issuer: BAR.into(), jwks: off_curve.into(), ..Default::default() },
        ],
    )];
    let out = build_jwt_filter(&policies, &source);
    let config = decode(&out);
    assert!(config.providers.values().all(|p| inline(p) == PUBLIC_ONLY_JWKS));
    let found: Vec<_> = out.findings.iter().map(|f| (f.path.as_str(), f.message.as_str())).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].0, "spec.jwtRules[1].jwks");
    assert!(
        found[0].1.starts_with(
            "Envoy cannot load this key set: no usable key (key #0: x, y is not a point of P-256)"
        ),
        "{}",
        found[0].1
    );
    assert_eq!(found[1].0, "spec.jwtRules[0].jwksUri");
    assert!(found[1].1.contains("is unusable"), "{}", found[1].1);
}
