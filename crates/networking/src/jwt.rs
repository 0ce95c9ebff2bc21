//! RequestAuthentication → the `envoy.filters.http.jwt_authn` HTTP filter, as istiod builds it for
//! sidecars (inbound) and gateways (`pilot/pkg/security/authn/policy_applier.go`,
//! `convertToEnvoyJwtConfig`).
//!
//! What is built, given the RequestAuthentications that apply to a proxy:
//!
//! - the JWT rules of all policies, in one list **sorted by issuer** (stable: rules with the same
//!   issuer keep the policies' order); one provider per rule, named `origins-N` by its position;
//! - each provider: `issuer`, `audiences`, `forward` (`forwardOriginalToken`), `forward_payload_header`
//!   (`outputPayloadToHeader`), `from_headers` (name, `value_prefix`), `from_params`, `from_cookies`,
//!   `claim_to_headers` (`outputClaimToHeaders`), the verified payload written to dynamic metadata
//!   `envoy.filters.http.jwt_authn` under key [`PAYLOAD_IN_METADATA`] (`payload`: what authorization
//!   policies' `requestPrincipals` and `request.auth.claims[…]` match), the claims `permission`, `scope`
//!   and the rule's `spaceDelimitedClaims` split on spaces in that metadata, and, for gateways only,
//!   `clear_route_cache` (so VirtualService routes can match claims);
//! - the key set always **inline** (`local_jwks.inline_string`): the rule's `jwks`, or the one the
//!   control plane fetched from `jwksUri` (OpenID discovery from the issuer when `jwksUri` is empty)
//!   through a [`JwksSource`] (Istio's default `PILOT_JWT_ENABLE_REMOTE_JWKS=false`: istiod fetches,
//!   Envoy never does). A key set not fetched yet (no finding), not fetchable, or one Envoy cannot
//!   load (inline or fetched: Envoy would reject the whole listener, see `keys`) is replaced by
//!   [`PUBLIC_ONLY_JWKS`], a key whose private half was discarded: every token of that issuer is then
//!   rejected (fail closed), tokenless requests still pass;
//! - one requirement rule for every path (`prefix: /`), with `bypass_cors_preflight`: one provider →
//!   `requires_any [origins-0, allow_missing]`; several → `requires_any [origins-0, …, origins-N,
//!   requires_all [requires_any [origins-0, allow_missing], …]]`. A request without a token passes
//!   (with no request principal: an AuthorizationPolicy naming `requestPrincipals` then denies it,
//!   403); a request with a token that fails verification is rejected (401).
//!
//! Istio's former `istio_authn` filter (istio-proxy only; it copied the JWT principal into its own
//! metadata) is not emitted: Istio itself dropped it (1.24), authorization reading the `jwt_authn`
//! metadata directly, and upstream Envoy has no such filter.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use api::security::request_authentication::{
    JwtRule, RequestAuthentication, jwt_rule::JwtRequirement as JwtPresence,
};
use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{DataSource, data_source},
            route::v3::{RouteMatch, route_match::PathSpecifier},
        },
        extensions::filters::{
            http::jwt_authn::v3::{
                JwtAuthentication, JwtClaimToHeader, JwtHeader, JwtProvider, JwtRequirement,
                JwtRequirementAndList, JwtRequirementOrList, RequirementRule,
                jwt_provider::{JwksSourceSpecifier, NormalizePayload},
                jwt_requirement::RequiresType,
                requirement_rule::RequirementType,
            },
            network::http_connection_manager::v3::{HttpFilter, http_filter},
        },
    },
    google::protobuf::{Any, Empty},
};
use model::{
    Config,
    finding::{Finding, Severity},
};
use prost::{Message, Name};

/// Name of the JWT authentication HTTP filter, also the dynamic metadata namespace it writes.
pub const JWT_AUTHN_FILTER: &str = "envoy.filters.http.jwt_authn";

/// Key under which each provider writes the verified JWT payload in the filter's dynamic metadata
/// (Istio's `filters.EnvoyJwtFilterPayload`); authorization matches `payload.iss`, `payload.sub` and
/// claims under it.
pub const PAYLOAD_IN_METADATA: &str = "payload";

/// Claims always treated as space-delimited lists in the payload metadata (Istio's default, added to
/// each rule's `spaceDelimitedClaims`).
pub const DEFAULT_SPACE_DELIMITED_CLAIMS: [&str; 2] = ["permission", "scope"];

/// Fetch timeout of a rule without `timeout` (Istio's default, 5 s).
pub const DEFAULT_JWKS_TIMEOUT: Duration = Duration::from_secs(5);

/// The key set used when the real one is not available (Istio's `PublicOnlyJwks`, byte for byte): one
/// RSA public key whose private key was generated and discarded, so no token verifies against it —
/// the provider rejects every token (fail closed) while tokenless requests still pass.
pub const PUBLIC_ONLY_JWKS: &str = r#"{
  "keys": [
    {
      "kty": "RSA",
      "e": "AQAB",
      "n": "0xObjM0UvS_oaazjpEYlAbwctEJ4L8pH3OuTb7qth7gUwqet-EzQB4dgFdvSdMgrLnSncQGRjpEYz3F3viIbH-3EN3TxSlPNviHxeOdyiBVfumN8dMxbLvVJUpfNOnvmMxJcl-8NNjAwcOjk4otSALaYgYYyOPyvKtgVdrQr-FoubWX4yrjxW-MJ2-7OBeepUUNOsVwGV23YX03sVkkyvY3otRflkBcY3_HKpBxJl9wk2GyOShN4_PNUF9-vwfnvOXMbCDX-w4PTef4geeb_GiT40YCKHTKMSPVanGRn5GExIWmki-mmqh94-mPTJyBR74ShspL3BxPZitDL574T1w"
    }
  ]
}"#;

/// What the control plane knows of a remote key set (`jwksUri`, or the issuer's OpenID discovery).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwksState {
    /// The fetched JSON Web Key Set (JSON text, `{"keys": [...]}`), sent inline.
    Resolved(String),
    /// Not fetched yet (first fetch under way): [`PUBLIC_ONLY_JWKS`] is sent, tokens of the issuer
    /// are rejected until the fetch completes and the source notifies.
    Pending,
    /// The fetch failed (the reason, for findings and logs): [`PUBLIC_ONLY_JWKS`] is sent and a
    /// [`Finding`] reported.
    Failed(String),
}

/// Where remote key sets come from (meshpilot-discovery's `JwksResolver`; fixed maps in tests).
pub trait JwksSource: Send + Sync {
    /// The key set of `issuer` at `jwks_uri` (empty `jwks_uri`: found by OpenID discovery from the
    /// issuer). Must not block: an unknown entry answers [`JwksState::Pending`] and is fetched in the
    /// background.
    fn jwks(&self, issuer: &str, jwks_uri: &str) -> JwksState;

    /// [`JwksSource::jwks`] with the rule's fetch `timeout` (`jwtRules[].timeout`, default
    /// [`DEFAULT_JWKS_TIMEOUT`]); the default implementation ignores it.
    fn jwks_with_timeout(&self, issuer: &str, jwks_uri: &str, timeout: Duration) -> JwksState {
        let _ = timeout;
        self.jwks(issuer, jwks_uri)
    }
}

/// A fixed [`JwksSource`]: answers from a map keyed by `(issuer, jwks_uri)`, [`JwksState::Pending`]
/// for anything else. For tests and tools.
#[derive(Clone, Debug, Default)]
pub struct StaticJwks(pub BTreeMap<(String, String), JwksState>);

impl StaticJwks {
    /// Adds (or replaces) the answer for `(issuer, jwks_uri)`.
    pub fn with(mut self, issuer: &str, jwks_uri: &str, state: JwksState) -> Self {
        self.0.insert((issuer.to_string(), jwks_uri.to_string()), state);
        self
    }
}

impl JwksSource for StaticJwks {
    fn jwks(&self, issuer: &str, jwks_uri: &str) -> JwksState {
        self.0.get(&(issuer.to_string(), jwks_uri.to_string())).cloned().unwrap_or(JwksState::Pending)
    }
}

/// The JWT filter of one proxy and what could not be honoured.
#[derive(Clone, Debug, Default)]
pub struct JwtFilter {
    /// `envoy.filters.http.jwt_authn` with its `JwtAuthentication` config; `None` when no policy has a
    /// JWT rule (no filter at all, as Istio).
    pub filter: Option<HttpFilter>,
    /// Rules whose key set was replaced by [`PUBLIC_ONLY_JWKS`] because it was unusable (inline
    /// `jwks` Istio's validation or Envoy rejects: path `spec.jwtRules[N].jwks`) or could not be
    /// fetched or loaded (path `spec.jwtRules[N].jwksUri`, or `.issuer` for OpenID discovery);
    /// severity `Dropped`.
    pub findings: Vec<Finding>,
}

/// The JWT filter for a **sidecar** (inbound HTTP chains): see the module doc. `policies` are the
/// RequestAuthentications that apply to the proxy (other kinds are ignored); `jwks` answers
/// `jwksUri` rules.
pub fn build_jwt_filter(policies: &[Arc<Config>], jwks: &dyn JwksSource) -> JwtFilter {
    build(policies, jwks, false)
}

/// The JWT filter for a **gateway** (router): as [`build_jwt_filter`] with `clear_route_cache` set
/// on every provider (Istio sets it for every proxy that is not a sidecar, so that routes matching
/// JWT claims see the verified payload).
pub fn build_gateway_jwt_filter(policies: &[Arc<Config>], jwks: &dyn JwksSource) -> JwtFilter {
    build(policies, jwks, true)
}

/// One JWT rule with where it comes from.
struct SourcedRule<'a> {
    config: &'a Config,
    index: usize,
    rule: &'a JwtRule,
}

fn build(policies: &[Arc<Config>], jwks: &dyn JwksSource, clear_route_cache: bool) -> JwtFilter {
    let mut rules: Vec<SourcedRule<'_>> = policies
        .iter()
        .filter_map(|config| match &config.spec {
            api::spec::Spec::RequestAuthentication(spec) => Some((config.as_ref(), &**spec)),
            _ => None,
        })
        .flat_map(|(config, spec): (&Config, &RequestAuthentication)| {
            spec.jwt_rules.iter().enumerate().map(move |(index, rule)| SourcedRule { config, index, rule })
        })
        .collect();
    if rules.is_empty() {
        return JwtFilter::default();
    }
    rules.sort_by(|a, b| a.rule.issuer.cmp(&b.rule.issuer));

    let mut findings = Vec::new();
    let mut providers = BTreeMap::new();
    let mut names = Vec::with_capacity(rules.len());
    for (i, sourced) in rules.iter().enumerate() {
        let name = format!("origins-{i}");
        let (keys, finding) = key_set(sourced, jwks);
        if let Some((path, message)) = finding {
            findings.push(Finding {
                severity: Severity::Dropped,
                config: Some(sourced.config.key()),
                path,
                resource: format!("{JWT_AUTHN_FILTER} provider {name}"),
                message,
            });
        }
        providers.insert(name.clone(), provider(sourced.rule, keys, clear_route_cache));
        names.push((name, sourced.rule.presence == JwtPresence::Required as i32));
    }
    let config = JwtAuthentication {
        rules: vec![RequirementRule {
            r#match: Some(RouteMatch {
                path_specifier: Some(PathSpecifier::Prefix("/".to_string())),
                ..Default::default()
            }),
            requirement_type: Some(RequirementType::Requires(requirement(&names))),
        }],
        bypass_cors_preflight: true,
        ..Default::default()
    };
    JwtFilter {
        filter: Some(HttpFilter {
            name: JWT_AUTHN_FILTER.to_string(),
            config_type: Some(http_filter::ConfigType::TypedConfig(pack(config, &providers))),
            ..Default::default()
        }),
        findings,
    }
}

/// The provider of one rule with its key set `keys` (inline JSON).
fn provider(rule: &JwtRule, keys: String, clear_route_cache: bool) -> JwtProvider {
    JwtProvider {
        issuer: rule.issuer.clone(),
        audiences: rule.audiences.clone(),
        forward: rule.forward_original_token,
        forward_payload_header: rule.output_payload_to_header.clone(),
        payload_in_metadata: PAYLOAD_IN_METADATA.to_string(),
        normalize_payload_in_metadata: Some(NormalizePayload {
            space_delimited_claims: space_delimited_claims(&rule.space_delimited_claims),
        }),
        clear_route_cache,
        claim_to_headers: rule
            .output_claim_to_headers
            .iter()
            .map(|c| JwtClaimToHeader {
                header_name: c.header.clone(),
                claim_name: c.claim.clone(),
                ..Default::default()
            })
            .collect(),
        from_headers: rule
            .from_headers
            .iter()
            .map(|h| JwtHeader { name: h.name.clone(), value_prefix: h.prefix.clone() })
            .collect(),
        from_params: rule.from_params.clone(),
        from_cookies: rule.from_cookies.clone(),
        jwks_source_specifier: Some(JwksSourceSpecifier::LocalJwks(DataSource {
            specifier: Some(data_source::Specifier::InlineString(keys)),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// Istio's `buildSpaceDelimitedClaims`: the defaults when the rule names none, else the sorted,
/// deduplicated union of the rule's claims and the defaults.
fn space_delimited_claims(extra: &[String]) -> Vec<String> {
    let mut claims: Vec<String> =
        extra.iter().cloned().chain(DEFAULT_SPACE_DELIMITED_CLAIMS.iter().map(|c| c.to_string())).collect();
    claims.sort();
    claims.dedup();
    claims
}

/// The key set to inline for a rule, and a finding (field path, message) when it had to be replaced
/// by [`PUBLIC_ONLY_JWKS`].
fn key_set(sourced: &SourcedRule<'_>, jwks: &dyn JwksSource) -> (String, Option<(String, String)>) {
    let rule = sourced.rule;
    let path = format!("spec.jwtRules[{}]", sourced.index);
    if !rule.jwks.is_empty() {
        return match unusable_inline_jwks(&rule.jwks) {
            None => (rule.jwks.clone(), None),
            Some(reason) => (
                PUBLIC_ONLY_JWKS.to_string(),
                Some((
                    format!("{path}.jwks"),
                    format!("{reason}; the provider rejects every token (key set replaced)"),
                )),
            ),
        };
    }
    let timeout = rule
        .timeout
        .as_ref()
        .and_then(|d| {
            let secs = u64::try_from(d.seconds).ok()?;
            let nanos = u32::try_from(d.nanos).ok()?;
            Some(Duration::new(secs, nanos))
        })
        .unwrap_or(DEFAULT_JWKS_TIMEOUT);
    let (field, what) = if rule.jwks_uri.is_empty() {
        ("issuer", format!("OpenID discovery from issuer {:?}", rule.issuer))
    } else {
        ("jwksUri", format!("{:?}", rule.jwks_uri))
    };
    let problem = match jwks.jwks_with_timeout(&rule.issuer, &rule.jwks_uri, timeout) {
        JwksState::Resolved(keys) => match keys::envoy_jwks_error(&keys) {
            None => return (keys, None),
            Some(reason) => format!("the key set fetched ({what}) is unusable: {reason}"),
        },
        JwksState::Pending => return (PUBLIC_ONLY_JWKS.to_string(), None),
        JwksState::Failed(reason) => format!("cannot fetch the key set ({what}): {reason}"),
    };
    (
        PUBLIC_ONLY_JWKS.to_string(),
        Some((
            format!("{path}.{field}"),
            format!("{problem}; the provider rejects every token until it is fixed"),
        )),
    )
}

/// Why an inline key set cannot be sent, if so: Istio's validation rule (`jwks parse error`, which
/// istiod's webhook enforces), then Envoy's ([`keys`]: a set Envoy cannot load rejects the listener).
fn unusable_inline_jwks(text: &str) -> Option<String> {
    let spec = RequestAuthentication {
        jwt_rules: vec![JwtRule { issuer: "i".into(), jwks: text.to_string(), ..Default::default() }],
        ..Default::default()
    };
    let mut report = validation::Report::default();
    validation::security::request_authentication::validate(&Default::default(), &spec, &mut report);
    if let Some(issue) = report.errors.iter().find(|e| e.path == "spec.jwtRules[0].jwks") {
        return Some(issue.message.clone());
    }
    keys::envoy_jwks_error(text).map(|reason| format!("Envoy cannot load this key set: {reason}"))
}

/// The requirement over providers `names` (name, `presence: REQUIRED`), see the module doc. Without a
/// `REQUIRED` rule this is Istio's requirement; with one, every rule must hold at once: a `REQUIRED`
/// rule's token must be present and valid, an `OPTIONAL` rule's may be missing but not invalid
/// (`requires_all` of `provider` / `requires_any [provider, allow_missing]`, a lone required rule its bare
/// provider): Istio's `convertToEnvoyJwtConfig` since istio/istio#60830 (`JWTRule.presence`, istio.io/api
/// v1.32.0; the istiod build meshpilot is compared with predates it). As there, the tokens of such rules
/// belong in different locations: an optional rule reading the required rule's header sees a token of
/// another issuer and fails.
fn requirement(names: &[(String, bool)]) -> JwtRequirement {
    let provider =
        |name: &String| JwtRequirement { requires_type: Some(RequiresType::ProviderName(name.clone())) };
    let allow_missing =
        || JwtRequirement { requires_type: Some(RequiresType::AllowMissing(Empty::default())) };
    let any_of = |requirements| JwtRequirement {
        requires_type: Some(RequiresType::RequiresAny(JwtRequirementOrList { requirements })),
    };
    let all_of = |requirements| JwtRequirement {
        requires_type: Some(RequiresType::RequiresAll(JwtRequirementAndList { requirements })),
    };
    if names.iter().any(|(_, required)| *required) {
        let mut each: Vec<JwtRequirement> = names
            .iter()
            .map(
                |(n, required)| {
                    if *required { provider(n) } else { any_of(vec![provider(n), allow_missing()]) }
                },
            )
            .collect();
        return if each.len() == 1 { each.remove(0) } else { all_of(each) };
    }
    let inner: Vec<JwtRequirement> =
        names.iter().map(|(n, _)| any_of(vec![provider(n), allow_missing()])).collect();
    if names.len() == 1 {
        return inner.into_iter().next().expect("one provider");
    }
    let mut outer: Vec<JwtRequirement> = names.iter().map(|(n, _)| provider(n)).collect();
    outer.push(all_of(inner));
    any_of(outer)
}

/// Protobuf field number of `JwtAuthentication.providers`.
const JWT_AUTHENTICATION_PROVIDERS: u32 = 1;

/// `config` with `providers` packed as an `Any`, the providers encoded in name order (envoy-types
/// keeps the map in a `HashMap`, whose order differs between instances: the same config would
/// otherwise encode differently in every snapshot).
fn pack(config: JwtAuthentication, providers: &BTreeMap<String, JwtProvider>) -> Any {
    let mut value = Vec::new();
    config.encode_raw(&mut value);
    use prost::encoding::{btree_map, message, string};
    btree_map::encode(
        string::encode,
        string::encoded_len,
        message::encode,
        message::encoded_len,
        JWT_AUTHENTICATION_PROVIDERS,
        providers,
        &mut value,
    );
    Any { type_url: JwtAuthentication::type_url(), value }
}

mod keys;
#[cfg(test)]
mod tests;
