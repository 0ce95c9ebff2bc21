//! One AuthorizationPolicy rule → one Envoy RBAC policy (Istio's `pilot/pkg/security/authz/model`):
//! each `from` becomes a principal and each `to` a permission (an AND of the fields set, each an OR
//! of its values, `not*` values under a NOT); `when` conditions are added to every principal or
//! permission, according to the attribute.

use envoy_types::pb::envoy::config::{
    core::v3::TypedExtensionConfig,
    rbac::v3::{Permission, Policy, Principal, permission, principal},
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListMatcher, MetadataMatcher, StringMatcher, ValueMatcher, list_matcher, value_matcher,
};

use super::matcher as m;
use crate::convert::any;

/// Name of the JWT authentication HTTP filter, whose dynamic metadata holds the token payload.
pub const JWT_AUTHN_FILTER: &str = "envoy.filters.http.jwt_authn";
/// Metadata key of the JWT payload under [`JWT_AUTHN_FILTER`] (`payload_in_metadata`).
pub const JWT_PAYLOAD_KEY: &str = "payload";
const SPIFFE_PREFIX: &str = "spiffe://";

/// The attribute of a rule entry, and how it translates (Istio's generators).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attr {
    DestIp,
    DestPort,
    ConnSni,
    EnvoyFilter,
    SrcIp,
    RemoteIp,
    SrcNamespace,
    SrcTrustDomain,
    SrcServiceAccount,
    SrcPrincipal,
    RequestPrincipal,
    RequestAudiences,
    RequestPresenter,
    RequestHeader,
    RequestClaims,
    Host,
    Path,
    Method,
}

impl Attr {
    /// Extended generators translate all values at once (one matcher for the list).
    fn extended(self) -> bool {
        matches!(
            self,
            Attr::EnvoyFilter
                | Attr::RequestPrincipal
                | Attr::RequestAudiences
                | Attr::RequestPresenter
                | Attr::RequestClaims
        )
    }
}

/// Why a value could not be translated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GenError {
    /// An HTTP-only attribute on a TCP filter chain (Istio drops it, or the rule for ALLOW).
    HttpOnly,
    /// A malformed value or key (bad IP, port, bracket syntax, unknown attribute).
    Invalid(String),
}

/// One `source` or `operation` field: attribute, key, values, not-values and their field names.
type Field<'a> = (Attr, &'a str, &'a [String], &'a [String], &'a str, &'a str);

/// One translation problem, with the field path it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Field path in the policy (`spec.rules[0].when[1].key`).
    pub path: String,
    /// What went wrong.
    pub error: GenError,
}

#[derive(Clone, Debug)]
struct Entry {
    attr: Attr,
    key: String,
    values: Vec<String>,
    not_values: Vec<String>,
    /// Field paths of `values` and `not_values` (without an index).
    values_path: String,
    not_values_path: String,
}

/// The translation model of one rule (Istio's `Model`): principal and permission entry lists.
#[derive(Clone, Debug)]
pub struct RuleModel {
    /// The policy's namespace (default namespace of `serviceAccounts` values).
    namespace: String,
    principals: Vec<Vec<Entry>>,
    permissions: Vec<Vec<Entry>>,
}

fn when_attr(key: &str) -> Option<Attr> {
    Some(match key {
        "destination.ip" => Attr::DestIp,
        "destination.port" => Attr::DestPort,
        "connection.sni" => Attr::ConnSni,
        "source.ip" => Attr::SrcIp,
        "remote.ip" => Attr::RemoteIp,
        "source.namespace" => Attr::SrcNamespace,
        "source.trustDomain" => Attr::SrcTrustDomain,
        "source.serviceAccount" => Attr::SrcServiceAccount,
        "source.principal" => Attr::SrcPrincipal,
        "request.auth.principal" => Attr::RequestPrincipal,
        "request.auth.audiences" => Attr::RequestAudiences,
        "request.auth.presenter" => Attr::RequestPresenter,
        k if k.starts_with("experimental.envoy.filters.") => Attr::EnvoyFilter,
        k if k.starts_with("request.headers") => Attr::RequestHeader,
        k if k.starts_with("request.auth.claims") => Attr::RequestClaims,
        _ => return None,
    })
}

fn is_principal_attr(a: Attr) -> bool {
    !matches!(
        a,
        Attr::DestIp
            | Attr::DestPort
            | Attr::ConnSni
            | Attr::EnvoyFilter
            | Attr::Host
            | Attr::Path
            | Attr::Method
    )
}

fn entry(
    attr: Attr,
    key: &str,
    values: &[String],
    not_values: &[String],
    vpath: String,
    npath: String,
) -> Option<Entry> {
    if values.is_empty() && not_values.is_empty() {
        return None;
    }
    Some(Entry {
        attr,
        key: key.into(),
        values: values.to_vec(),
        not_values: not_values.to_vec(),
        values_path: vpath,
        not_values_path: npath,
    })
}

impl RuleModel {
    /// The model of `rule` (index `index` of a policy in `namespace`), Istio's `authzmodel.New`.
    ///
    /// # Errors
    /// An unknown `when` key, with its field path.
    pub fn new(
        namespace: &str,
        index: usize,
        rule: &api::security::authorization_policy::Rule,
    ) -> Result<Self, Problem> {
        let base = format!("spec.rules[{index}]");
        let mut base_principal = Vec::new();
        let mut base_permission = Vec::new();
        for (k, when) in rule.when.iter().enumerate() {
            let Some(attr) = when_attr(&when.key) else {
                return Err(Problem {
                    path: format!("{base}.when[{k}].key"),
                    error: GenError::Invalid(format!("unknown attribute {}", when.key)),
                });
            };
            let e = entry(
                attr,
                &when.key,
                &when.values,
                &when.not_values,
                format!("{base}.when[{k}].values"),
                format!("{base}.when[{k}].notValues"),
            );
            if let Some(e) = e {
                if is_principal_attr(attr) { base_principal.push(e) } else { base_permission.push(e) }
            }
        }
        let mut principals = Vec::new();
        for (j, from) in rule.from.iter().enumerate() {
            let mut merged = Vec::new();
            if let Some(s) = &from.source {
                let p = |f: &str| format!("{base}.from[{j}].source.{f}");
                // Istio inserts each at the front, so the last listed here comes first.
                let fields: [Field<'_>; 7] = [
                    (
                        Attr::SrcPrincipal,
                        "source.principal",
                        &s.principals,
                        &s.not_principals,
                        "principals",
                        "notPrincipals",
                    ),
                    (
                        Attr::RequestPrincipal,
                        "request.auth.principal",
                        &s.request_principals,
                        &s.not_request_principals,
                        "requestPrincipals",
                        "notRequestPrincipals",
                    ),
                    (
                        Attr::SrcServiceAccount,
                        "source.serviceAccount",
                        &s.service_accounts,
                        &s.not_service_accounts,
                        "serviceAccounts",
                        "notServiceAccounts",
                    ),
                    (
                        Attr::SrcTrustDomain,
                        "source.trustDomain",
                        &s.trust_domains,
                        &s.not_trust_domains,
                        "trustDomains",
                        "notTrustDomains",
                    ),
                    (
                        Attr::SrcNamespace,
                        "source.namespace",
                        &s.namespaces,
                        &s.not_namespaces,
                        "namespaces",
                        "notNamespaces",
                    ),
                    (
                        Attr::RemoteIp,
                        "remote.ip",
                        &s.remote_ip_blocks,
                        &s.not_remote_ip_blocks,
                        "remoteIpBlocks",
                        "notRemoteIpBlocks",
                    ),
                    (Attr::SrcIp, "source.ip", &s.ip_blocks, &s.not_ip_blocks, "ipBlocks", "notIpBlocks"),
                ];
                for (attr, key, v, n, vp, np) in fields {
                    merged.extend(entry(attr, key, v, n, p(vp), p(np)));
                }
            }
            merged.extend(base_principal.iter().cloned());
            principals.push(merged);
        }
        if rule.from.is_empty() {
            principals.push(base_principal);
        }
        let mut permissions = Vec::new();
        for (j, to) in rule.to.iter().enumerate() {
            let mut merged = Vec::new();
            if let Some(o) = &to.operation {
                let p = |f: &str| format!("{base}.to[{j}].operation.{f}");
                let fields: [Field<'_>; 4] = [
                    (Attr::Host, ":authority", &o.hosts, &o.not_hosts, "hosts", "notHosts"),
                    (Attr::Method, ":method", &o.methods, &o.not_methods, "methods", "notMethods"),
                    (Attr::Path, "path-matcher", &o.paths, &o.not_paths, "paths", "notPaths"),
                    (Attr::DestPort, "destination.port", &o.ports, &o.not_ports, "ports", "notPorts"),
                ];
                for (attr, key, v, n, vp, np) in fields {
                    merged.extend(entry(attr, key, v, n, p(vp), p(np)));
                }
            }
            merged.extend(base_permission.iter().cloned());
            permissions.push(merged);
        }
        if rule.to.is_empty() {
            permissions.push(base_permission);
        }
        Ok(RuleModel { namespace: namespace.to_string(), principals, permissions })
    }

    /// Istio's `MigrateTrustDomain`: `source.principal` values in the trust domain bundle (or
    /// `cluster.local`) are matched in every domain of the bundle; `source.trustDomain` values in the
    /// bundle are expanded to the whole bundle.
    pub fn migrate_trust_domain(&mut self, bundle: &[String]) {
        for list in &mut self.principals {
            for e in list.iter_mut() {
                match e.attr {
                    Attr::SrcPrincipal => {
                        if !e.values.is_empty() {
                            e.values = replace_trust_domain_aliases(bundle, &e.values);
                        }
                        if !e.not_values.is_empty() {
                            e.not_values = replace_trust_domain_aliases(bundle, &e.not_values);
                        }
                    }
                    Attr::SrcTrustDomain => {
                        if !e.values.is_empty() {
                            e.values = expand_trust_domain_aliases(bundle, &e.values);
                        }
                        if !e.not_values.is_empty() {
                            e.not_values = expand_trust_domain_aliases(bundle, &e.not_values);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// The RBAC policy of the rule (Istio's `Model.Generate` with authenticated principals).
    ///
    /// `dropped` receives the field paths of HTTP-only values left out on TCP (Istio drops them for
    /// DENY / AUDIT / CUSTOM and skips the whole rule for ALLOW: the caller decides).
    ///
    /// # Errors
    /// The first invalid value or key (bad IP, port, bracket syntax).
    pub fn generate(&self, for_tcp: bool, dropped: &mut Vec<String>) -> Result<Policy, Problem> {
        let ctx = Gen;
        let mut permissions = Vec::new();
        for list in &self.permissions {
            let mut and = Vec::new();
            for e in list {
                and.extend(ctx.entry(
                    e,
                    dropped,
                    &|e, v| permission_of(e, v, for_tcp),
                    &|e, vs| extended_permission(e, vs),
                    permission_or,
                    |p| Permission { rule: Some(permission::Rule::NotRule(Box::new(p))) },
                )?);
            }
            if and.is_empty() {
                and.push(permission_any());
            }
            permissions
                .push(Permission { rule: Some(permission::Rule::AndRules(permission::Set { rules: and })) });
        }
        let mut principals = Vec::new();
        for list in &self.principals {
            let mut and = Vec::new();
            for e in list {
                and.extend(ctx.entry(
                    e,
                    dropped,
                    &|e, v| principal_of(e, v, for_tcp, &self.namespace),
                    &|e, vs| extended_principal(e, vs, for_tcp),
                    principal_or,
                    |p| Principal { identifier: Some(principal::Identifier::NotId(Box::new(p))) },
                )?);
            }
            if and.is_empty() {
                and.push(principal_any());
            }
            principals.push(Principal {
                identifier: Some(principal::Identifier::AndIds(principal::Set { ids: and })),
            });
        }
        Ok(Policy { permissions, principals, ..Default::default() })
    }
}

struct Gen;

type One<'a, T> = &'a dyn Fn(&Entry, &str) -> Result<T, GenError>;
type Many<'a, T> = &'a dyn Fn(&Entry, &[String]) -> Result<Option<T>, GenError>;

impl Gen {
    /// Istio's `rule.permission` / `rule.principal`: the OR of the values and the NOT of the OR of
    /// the not-values (extended generators: one matcher each).
    #[allow(clippy::too_many_arguments)]
    fn entry<T>(
        &self,
        e: &Entry,
        dropped: &mut Vec<String>,
        one: One<'_, T>,
        many: Many<'_, T>,
        or: fn(Vec<T>) -> T,
        not: fn(T) -> T,
    ) -> Result<Vec<T>, Problem> {
        let mut out = Vec::new();
        for (values, path, negate) in
            [(&e.values, &e.values_path, false), (&e.not_values, &e.not_values_path, true)]
        {
            if values.is_empty() {
                continue;
            }
            let got = if e.attr.extended() {
                match many(e, values) {
                    Ok(v) => v,
                    Err(err) => {
                        self.check(err, path.clone(), dropped)?;
                        None
                    }
                }
            } else {
                let mut items = Vec::new();
                for (i, v) in values.iter().enumerate() {
                    match one(e, v) {
                        Ok(t) => items.push(t),
                        Err(err) => self.check(err, format!("{path}[{i}]"), dropped)?,
                    }
                }
                (!items.is_empty()).then(|| or(items))
            };
            if let Some(t) = got {
                out.push(if negate { not(t) } else { t });
            }
        }
        Ok(out)
    }

    /// Istio's `checkError`, made fail-closed: an invalid value always fails the rule; an HTTP-only
    /// value on TCP is dropped and recorded.
    fn check(&self, err: GenError, path: String, dropped: &mut Vec<String>) -> Result<(), Problem> {
        match err {
            GenError::HttpOnly => {
                if !dropped.contains(&path) {
                    dropped.push(path);
                }
                Ok(())
            }
            error => Err(Problem { path, error }),
        }
    }
}

fn permission_any() -> Permission {
    Permission { rule: Some(permission::Rule::Any(true)) }
}

fn principal_any() -> Principal {
    Principal { identifier: Some(principal::Identifier::Any(true)) }
}

fn permission_or(rules: Vec<Permission>) -> Permission {
    Permission { rule: Some(permission::Rule::OrRules(permission::Set { rules })) }
}

fn principal_or(ids: Vec<Principal>) -> Principal {
    Principal { identifier: Some(principal::Identifier::OrIds(principal::Set { ids })) }
}

fn principal_and(ids: Vec<Principal>) -> Principal {
    Principal { identifier: Some(principal::Identifier::AndIds(principal::Set { ids })) }
}

fn authenticated(name: StringMatcher) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::Authenticated(principal::Authenticated {
            principal_name: Some(name),
        })),
    }
}

// Istio (and its goldens) use the `metadata` identifier, deprecated in favour of `sourced_metadata`.
#[allow(deprecated)]
fn principal_metadata(md: MetadataMatcher) -> Principal {
    Principal { identifier: Some(principal::Identifier::Metadata(md)) }
}

fn http_only(for_tcp: bool) -> Result<(), GenError> {
    if for_tcp { Err(GenError::HttpOnly) } else { Ok(()) }
}

/// Istio's `convertToPort`: decimal digits, at most 65535.
pub fn parse_port(value: &str) -> Result<u32, GenError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(GenError::Invalid(format!("invalid port {value:?}")));
    }
    match value.parse::<u32>() {
        Ok(p) if p <= 65535 => Ok(p),
        _ => Err(GenError::Invalid(format!("invalid port {value:?}: out of range [0, 65535]"))),
    }
}

fn permission_of(e: &Entry, value: &str, for_tcp: bool) -> Result<Permission, GenError> {
    use permission::Rule;
    let rule = match e.attr {
        Attr::DestIp => Rule::DestinationIp(m::cidr_range(value).map_err(GenError::Invalid)?),
        Attr::DestPort => Rule::DestinationPort(parse_port(value)?),
        Attr::ConnSni => Rule::RequestedServerName(m::string(value)),
        Attr::Host => {
            http_only(for_tcp)?;
            Rule::Header(m::host_matcher(":authority", value))
        }
        Attr::Method => {
            http_only(for_tcp)?;
            Rule::Header(m::header_matcher(":method", value))
        }
        Attr::Path => {
            http_only(for_tcp)?;
            if m::contains_path_template(value) {
                Rule::UriTemplate(TypedExtensionConfig {
                    name: "uri-template".into(),
                    typed_config: Some(any(&m::path_template_matcher(value))),
                })
            } else {
                Rule::UrlPath(m::path_matcher(value))
            }
        }
        other => return Err(GenError::Invalid(format!("{other:?} is not a permission attribute"))),
    };
    Ok(Permission { rule: Some(rule) })
}

// Istio (and its goldens) use the `metadata` rule, deprecated in favour of `sourced_metadata`.
#[allow(deprecated)]
fn extended_permission(e: &Entry, values: &[String]) -> Result<Option<Permission>, GenError> {
    if e.attr != Attr::EnvoyFilter {
        return Err(GenError::Invalid(format!("{:?} is not a permission attribute", e.attr)));
    }
    let trimmed = e.key.strip_prefix("experimental.").unwrap_or(&e.key);
    let trimmed = trimmed.strip_suffix(']').unwrap_or(trimmed);
    let Some((filter, key)) = trimmed.split_once('[') else {
        return Err(GenError::Invalid(format!("invalid key: {}", e.key)));
    };
    let matchers = values
        .iter()
        .map(|v| match v.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            Some(inner) => ValueMatcher {
                match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(ListMatcher {
                    match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(m::string_value(
                        m::string(inner.trim_matches(|c| c == '[' || c == ']')),
                    )))),
                }))),
            },
            None => m::string_value(m::string(v)),
        })
        .collect();
    let md = m::metadata_value(filter, key, m::or_values(matchers));
    Ok(Some(Permission { rule: Some(permission::Rule::Metadata(md)) }))
}

fn principal_of(e: &Entry, value: &str, for_tcp: bool, namespace: &str) -> Result<Principal, GenError> {
    use principal::Identifier;
    Ok(match e.attr {
        Attr::SrcIp => Principal {
            identifier: Some(Identifier::DirectRemoteIp(m::cidr_range(value).map_err(GenError::Invalid)?)),
        },
        Attr::RemoteIp => Principal {
            identifier: Some(Identifier::RemoteIp(m::cidr_range(value).map_err(GenError::Invalid)?)),
        },
        Attr::SrcNamespace => {
            let ns = value.split('*').map(m::quote_meta).collect::<Vec<_>>().join(".*");
            authenticated(m::regex(&format!(".*/ns/{ns}/.*")))
        }
        Attr::SrcTrustDomain => authenticated(trust_domain_matcher(value)),
        Attr::SrcServiceAccount => authenticated(m::regex(&service_account_regex(namespace, value))),
        Attr::SrcPrincipal => authenticated(m::string_with_prefix(value, SPIFFE_PREFIX)),
        Attr::RequestHeader => {
            http_only(for_tcp)?;
            let name = name_in_brackets(e.key.strip_prefix("request.headers").unwrap_or_default())?;
            Principal { identifier: Some(Identifier::Header(m::header_matcher(&name, value))) }
        }
        other => return Err(GenError::Invalid(format!("{other:?} is not a principal attribute"))),
    })
}

/// Istio's `serviceAccountRegex`: `[NS/]SA` (the policy's namespace by default) in any trust domain.
fn service_account_regex(default_ns: &str, value: &str) -> String {
    let (ns, sa) = value.split_once('/').unwrap_or((default_ns, value));
    format!("spiffe://.+/ns/{}/(.+/|)sa/{}(/.+)?", m::quote_meta(ns), m::quote_meta(sa))
}

fn trust_domain_matcher(value: &str) -> StringMatcher {
    if value == "*" {
        m::prefix(SPIFFE_PREFIX, false)
    } else if !value.contains('*') {
        m::prefix(&format!("{SPIFFE_PREFIX}{value}/"), false)
    } else {
        let (a, b) = value.split_once('*').unwrap_or((value, ""));
        m::regex(&format!("spiffe://{}[^/]*{}/.*", m::quote_meta(a), m::quote_meta(b)))
    }
}

fn jwt_claim(claim: &str, sm: StringMatcher) -> Principal {
    principal_metadata(MetadataMatcher {
        filter: JWT_AUTHN_FILTER.into(),
        path: [JWT_PAYLOAD_KEY, claim]
            .iter()
            .map(|k| envoy_types::pb::envoy::r#type::matcher::v3::metadata_matcher::PathSegment {
                segment: Some(
                    envoy_types::pb::envoy::r#type::matcher::v3::metadata_matcher::path_segment::Segment::Key(
                        (*k).into(),
                    ),
                ),
            })
            .collect(),
        value: Some(m::string_value(sm)),
        ..Default::default()
    })
}

fn extended_principal(e: &Entry, values: &[String], for_tcp: bool) -> Result<Option<Principal>, GenError> {
    match e.attr {
        Attr::RequestPrincipal => {
            http_only(for_tcp)?;
            let any = || m::regex(".+");
            let mut or: Vec<Principal> = values
                .iter()
                .map(|value| {
                    let (iss, sub, found) = match value.rfind('/') {
                        Some(i) => (&value[..i], &value[i + 1..], true),
                        None => (value.as_str(), "", false),
                    };
                    let (mi, ms) = if value == "*" {
                        (any(), any())
                    } else if let Some(rest) = value.strip_prefix('*') {
                        if found {
                            let mi = if iss == "*" {
                                any()
                            } else {
                                m::suffix(iss.strip_prefix('*').unwrap_or(iss), false)
                            };
                            (mi, m::exact(sub, false))
                        } else {
                            (any(), m::suffix(rest, false))
                        }
                    } else if let Some(stripped) = value.strip_suffix('*') {
                        if found {
                            let ms = if sub == "*" {
                                any()
                            } else {
                                m::prefix(sub.strip_suffix('*').unwrap_or(sub), false)
                            };
                            (m::exact(iss, false), ms)
                        } else {
                            (m::prefix(stripped, false), any())
                        }
                    } else {
                        (m::exact(iss, false), m::exact(sub, false))
                    };
                    principal_and(vec![jwt_claim("iss", mi), jwt_claim("sub", ms)])
                })
                .collect();
            Ok(match or.len() {
                0 => None,
                1 => or.pop(),
                _ => Some(principal_or(or)),
            })
        }
        Attr::RequestAudiences | Attr::RequestPresenter => {
            http_only(for_tcp)?;
            let claim = if e.attr == Attr::RequestAudiences { "aud" } else { "azp" };
            Ok(Some(principal_metadata(m::metadata_list_or_value(
                JWT_AUTHN_FILTER,
                &[JWT_PAYLOAD_KEY, claim],
                m::string_or(values),
            ))))
        }
        Attr::RequestClaims => {
            http_only(for_tcp)?;
            let claims =
                names_in_nested_brackets(e.key.strip_prefix("request.auth.claims").unwrap_or_default())?;
            let mut keys = vec![JWT_PAYLOAD_KEY];
            keys.extend(claims.iter().map(String::as_str));
            Ok(Some(principal_metadata(m::metadata_list_or_value(
                JWT_AUTHN_FILTER,
                &keys,
                m::string_or(values),
            ))))
        }
        other => Err(GenError::Invalid(format!("{other:?} is not a principal attribute"))),
    }
}

/// Istio's `extractNameInBrackets`: `[NAME]` → `NAME`.
pub fn name_in_brackets(s: &str) -> Result<String, GenError> {
    match s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        Some(name) => Ok(name.to_string()),
        None => Err(GenError::Invalid(format!("expecting format [<NAME>], but found {s}"))),
    }
}

/// Istio's `extractNameInNestedBrackets`: `[a][b]` → `[a, b]`; falls back to [`name_in_brackets`]
/// (`[a[b]` → `a[b`).
pub fn names_in_nested_brackets(s: &str) -> Result<Vec<String>, GenError> {
    let bytes = s.as_bytes();
    let end_bracket = |begin: usize| -> Option<usize> {
        if begin >= bytes.len() || bytes[begin] != b'[' {
            return None;
        }
        for (i, b) in bytes.iter().enumerate().skip(begin + 1) {
            match b {
                b'[' => return None,
                b']' => return Some(i),
                _ => {}
            }
        }
        None
    };
    let mut claims = Vec::new();
    let mut begin = 0;
    while begin < bytes.len() {
        let Some(end) = end_bracket(begin) else {
            return Ok(vec![name_in_brackets(s)?]);
        };
        claims.push(s[begin + 1..end].to_string());
        begin = end + 1;
    }
    Ok(claims)
}

/// Trust-domain part of a 5-part SPIFFE-less identity `td/ns/NS/sa/SA`, if it is one and not `*`.
fn enforced_trust_domain(principal: &str) -> Option<&str> {
    let parts: Vec<&str> = principal.split('/').collect();
    (parts.len() == 5 && parts[0] != "*").then_some(parts[0])
}

fn prefix_match(a: &str, pattern: &str) -> bool {
    pattern.strip_suffix('*').is_some_and(|p| a.starts_with(p))
}

fn suffix_match(a: &str, pattern: &str) -> bool {
    pattern.strip_prefix('*').is_some_and(|p| a.ends_with(p))
}

fn td_in_bundle(td: &str, bundle: &[String]) -> bool {
    bundle.iter().any(|s| {
        td == s
            || s == "*"
            || prefix_match(td, s)
            || prefix_match(s, td)
            || suffix_match(td, s)
            || suffix_match(s, td)
    })
}

/// Istio's `Bundle.ReplaceTrustDomainAliases`: a principal whose trust domain is in the bundle (or
/// is `cluster.local`) is repeated for every trust domain of the bundle.
pub fn replace_trust_domain_aliases(bundle: &[String], principals: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for p in principals {
        let Some(td) = enforced_trust_domain(p) else {
            out.push(p.clone());
            continue;
        };
        if td_in_bundle(td, bundle) || td == "cluster.local" {
            let mut for_aliases: Vec<String> = Vec::new();
            for alias in bundle {
                let new = if suffix_match(alias, td) {
                    p.clone()
                } else {
                    let rest = p.split_once('/').map(|(_, r)| r).unwrap_or_default();
                    format!("{alias}/{rest}")
                };
                if !for_aliases.contains(&new) {
                    for_aliases.push(new);
                }
            }
            out.extend(for_aliases);
        } else {
            out.push(p.clone());
        }
    }
    out
}

/// Istio's `Bundle.ExpandTrustDomainAliases`: a trust domain of the bundle becomes the whole bundle
/// (duplicates removed, first occurrence kept).
pub fn expand_trust_domain_aliases(bundle: &[String], values: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        let add: Vec<String> = if bundle.contains(v) { bundle.to_vec() } else { vec![v.clone()] };
        for a in add {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}
