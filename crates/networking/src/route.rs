//! VirtualService HTTP routes → Envoy routes, as Istio's `pilot/pkg/networking/core/route` builds them
//! (`BuildHTTPRoutesForVirtualService`, `TranslateRoute`, `TranslateRouteMatch`, and
//! `route/retry.ConvertPolicy`).
//!
//! ```text
//!  spec.http[i] ──(once per HTTP route)──► template: action, headers, fault, CORS, metadata
//!  spec.http[i].match[j] ──(per match that applies to this proxy)──► RouteMatch, name, decorator
//!                                   └──► Envoy Route ──► check::check_route ──► kept, or dropped + Finding
//! ```
//!
//! One Envoy route per `match` entry (a route without matches is a catch-all on prefix `/`); matches
//! whose `port`, `gateways`, `sourceLabels` or `sourceNamespace` do not fit the route table in
//! [`RouteContext`] are left out, as Istio evaluates them at generation time. Like Istio, the output
//! of a VirtualService stops after its first catch-all route (the rest is unreachable).
//!
//! What Istio leaves to other stages is out of scope here: `delegate` (merged into the root
//! VirtualService by the route-table builder; reported as unsupported), consistent-hash policies and
//! stateful sessions (they come from DestinationRules and services), and Gateway-API / Ingress route
//! semantics. Every field of an HTTP route that is set but has no effect in the output is reported as
//! a [`Severity::Unsupported`] finding; every Envoy route that Envoy would reject is left out and
//! reported as a [`Severity::Dropped`] finding (see [`crate::check`]).

use std::collections::{BTreeMap, HashMap};

use api::networking::virtual_service::{
    CorsPolicy as IstioCors, Destination, Headers, HttpDirectResponse, HttpFaultInjection, HttpMatchRequest,
    HttpMirrorPolicy, HttpRedirect, HttpRetry, HttpRoute, HttpRouteDestination, StringMatch, VirtualService,
    cors_policy::UnmatchedPreflights, http_redirect::RedirectPortSelection,
};
use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{
                DataSource, HeaderValue, HeaderValueOption, Metadata, RuntimeFractionalPercent, data_source,
                header_value_option::HeaderAppendAction,
            },
            route::v3::{
                Decorator, DirectResponseAction, HeaderMatcher, QueryParameterMatcher, RedirectAction,
                RetryPolicy, Route, RouteAction, RouteMatch, WeightedCluster,
                header_matcher::HeaderMatchSpecifier, query_parameter_matcher::QueryParameterMatchSpecifier,
                redirect_action, retry_policy, route, route_action, route_match::PathSpecifier,
                weighted_cluster,
            },
        },
        extensions::{
            filters::{
                common::fault::v3::{FaultDelay, fault_delay::FaultDelaySecifier},
                http::{
                    cors::v3::CorsPolicy,
                    fault::v3::{FaultAbort, HttpFault, fault_abort},
                },
            },
            retry::{
                host::previous_hosts::v3::PreviousHostsPredicate,
                priority::previous_priorities::v3::PreviousPrioritiesConfig,
            },
        },
        r#type::{
            matcher::v3::{
                ListMatcher, MetadataMatcher, OrMatcher, RegexMatchAndSubstitute, RegexMatcher,
                StringMatcher, ValueMatcher, list_matcher, metadata_matcher, string_matcher, value_matcher,
            },
            v3::{FractionalPercent, fractional_percent::DenominatorType},
        },
    },
    google::protobuf::{BoolValue, Duration, Struct, UInt32Value, Value, value},
};
use envoy_types::util::pack_any;
use model::{
    ConfigKey,
    push::{MESH_GATEWAY, resolve_gateway_name},
};

use model::{Finding, Severity};

use crate::check;

/// Name of the HTTP fault filter; per-route fault settings are keyed by it in `typed_per_filter_config`.
pub const FAULT_FILTER: &str = "envoy.filters.http.fault";
/// Name of the HTTP CORS filter; per-route CORS policies are keyed by it in `typed_per_filter_config`.
pub const CORS_FILTER: &str = "envoy.filters.http.cors";
/// `retry_on` of Istio's default retry policy (used when an HTTP route sets no `retries`).
pub const DEFAULT_RETRY_ON: &str =
    "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes";
/// Number of retries of Istio's default retry policy.
pub const DEFAULT_RETRY_ATTEMPTS: u32 = 2;

/// Filter that holds verified JWT payloads (`@request.auth.claims.*` header matches read it).
const JWT_FILTER: &str = "envoy.filters.http.jwt_authn";
/// Key of the JWT payload in that filter's dynamic metadata.
const JWT_PAYLOAD_KEY: &str = "payload";
/// The header-name prefix Istio reads as a JWT claim match.
const JWT_CLAIM_PREFIX: &str = "@request.auth.claims";
/// Key of Istio's filter metadata on routes.
const ISTIO_METADATA_KEY: &str = "istio";

/// What route translation needs to know about the route table being built.
pub struct RouteContext<'a> {
    /// Port of the listener / route configuration being built (matches with `port` must equal it);
    /// 0 when the route table serves several ports.
    pub listener_port: u32,
    /// The gateways this route table is for: `["mesh"]` for a sidecar, `["ns/name", …]` for a gateway's
    /// servers. HTTP matches naming other `gateways` do not apply.
    pub gateways: &'a [String],
    /// Labels of the proxy asking (for `sourceLabels` matches).
    pub proxy_labels: &'a BTreeMap<String, String>,
    /// Namespace of the proxy asking (for `sourceNamespace` matches).
    pub proxy_namespace: &'a str,
    /// Resolves a destination of the VirtualService to its Envoy cluster name
    /// (`outbound|PORT|SUBSET|FQDN`), or `None` when the host is unknown (then the route is dropped with
    /// a finding, as Envoy would fail the request anyway).
    pub cluster_for: &'a dyn Fn(&Destination) -> Option<String>,
}

/// Translates the `http` routes of `vs` (object `key`) into Envoy routes, in order, for the route table
/// described by `ctx`. Routes Envoy would reject are left out and reported in `findings`.
pub fn translate_http_routes(
    vs: &VirtualService,
    key: &ConfigKey,
    ctx: &RouteContext<'_>,
    findings: &mut Vec<Finding>,
) -> Vec<Route> {
    translate(vs, key, ctx, findings, true)
}

/// [`translate_http_routes`], with the pre-send check optional (tests compare against Envoy with it off).
pub(crate) fn translate(
    vs: &VirtualService,
    key: &ConfigKey,
    ctx: &RouteContext<'_>,
    findings: &mut Vec<Finding>,
    run_check: bool,
) -> Vec<Route> {
    let mut out = Vec::new();
    for (i, http) in vs.http.iter().enumerate() {
        let at = format!("spec.http[{i}]");
        if http.delegate.is_some() {
            findings.push(finding(
                Severity::Unsupported,
                key,
                format!("{at}.delegate"),
                resource_name(&http.name, &at),
                "a delegating route takes the routes of another VirtualService; delegation is resolved when \
                 route tables are assembled, not by the route translator, so this route produces no Envoy route",
            ));
            continue;
        }
        let matches: Vec<(Option<&HttpMatchRequest>, String)> = if http.r#match.is_empty() {
            vec![(None, at.clone())]
        } else {
            http.r#match.iter().enumerate().map(|(j, m)| (Some(m), format!("{at}.match[{j}]"))).collect()
        };
        let mut catch_all = http.r#match.is_empty();
        // Built on the first match that applies, so that findings about the route come once and only
        // when the route is used by this route table.
        let mut built: Option<Option<Template>> = None;
        let count = matches.len();
        for (j, (m, m_at)) in matches.into_iter().enumerate() {
            if let Some(m) = m
                && !match_applies(m, key, ctx)
            {
                continue;
            }
            let template = built.get_or_insert_with(|| build_template(http, &at, key, ctx, findings, false));
            let (route_match, _) = translate_match(m, &m_at, false);
            let this_catch_all = is_catch_all(&route_match);
            if let Some(t) = template {
                // The last match takes the template's route instead of a copy (most routes have one).
                let base = if j + 1 == count { std::mem::take(&mut t.route) } else { t.route.clone() };
                let route = Template::finish(base, http, m, route_match, &key.name, ctx.listener_port);
                let violations = if run_check { check::check_route(&route) } else { Vec::new() };
                if violations.is_empty() {
                    out.push(route);
                } else {
                    let resource = resource_name(&route.name, &m_at);
                    // Translated again with provenance recorded, to name the Istio field of each
                    // violation (findings of the first translation are already reported).
                    let route_prov = build_template(http, &at, key, ctx, &mut Vec::new(), true)
                        .map(|t| t.prov)
                        .unwrap_or_default();
                    let (_, match_prov) = translate_match(m, &m_at, true);
                    for v in violations {
                        let path = istio_path(&v.field, &match_prov, &route_prov, &m_at, &at);
                        findings.push(finding(
                            Severity::Dropped,
                            key,
                            path,
                            resource.clone(),
                            format!(
                                "{} (Envoy field `{}`); Envoy would reject the route, so it is left out",
                                v.reason, v.field
                            ),
                        ));
                    }
                }
            }
            // Like Istio, nothing after a catch-all is emitted; this holds when the catch-all itself was
            // dropped too, as the routes after it were unreachable as written.
            if m.is_some() && this_catch_all {
                catch_all = true;
                break;
            }
        }
        if catch_all {
            break;
        }
    }
    out
}

// ===== Findings and field paths =====

fn finding(
    severity: Severity,
    key: &ConfigKey,
    path: impl Into<String>,
    resource: impl Into<String>,
    message: impl Into<String>,
) -> Finding {
    Finding {
        severity,
        config: Some(key.clone()),
        path: path.into(),
        resource: resource.into(),
        message: message.into(),
    }
}

/// How an Envoy route is named in findings: `route <name>`, or by the Istio path that produced it.
fn resource_name(name: &str, at: &str) -> String {
    if name.is_empty() { format!("route for {at}") } else { format!("route {name}") }
}

/// Provenance: (Envoy field path prefix, relative to the route) → Istio field path.
/// Recorded only when asked for ([`Prov::recording`]): the paths are formatted for every field of every
/// route otherwise, and only a route that fails its pre-send check needs them (it is then translated
/// again with recording on).
#[derive(Debug, Default)]
struct Prov {
    recording: bool,
    entries: Vec<(String, String)>,
}

impl Prov {
    fn recording(recording: bool) -> Prov {
        Prov { recording, entries: Vec::new() }
    }

    /// Records the entry `entry()` gives when recording.
    fn add(&mut self, entry: impl FnOnce() -> (String, String)) {
        if self.recording {
            self.entries.push(entry());
        }
    }

    fn iter(&self) -> std::slice::Iter<'_, (String, String)> {
        self.entries.iter()
    }
}

/// `true` when `field` is `prefix` or a field inside it.
fn field_has_prefix(field: &str, prefix: &str) -> bool {
    field.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The Istio field path an Envoy field came from: the longest recorded prefix, else the match or the
/// HTTP route.
fn istio_path(field: &str, match_prov: &Prov, route_prov: &Prov, match_at: &str, route_at: &str) -> String {
    let best = match_prov
        .iter()
        .chain(route_prov.iter())
        .filter(|(prefix, _)| field_has_prefix(field, prefix))
        .max_by_key(|(prefix, _)| prefix.len());
    match best {
        Some((_, path)) => path.clone(),
        None if field_has_prefix(field, "match") => match_at.to_owned(),
        None => route_at.to_owned(),
    }
}

/// `base.exact` / `base.prefix` / `base.regex` for a string match, `base` when it has no type.
fn string_match_path(base: &str, m: &StringMatch) -> String {
    match kind_of(m) {
        Some(MatchKind::Exact(_)) => format!("{base}.exact"),
        Some(MatchKind::Prefix(_)) => format!("{base}.prefix"),
        Some(MatchKind::Regex(_)) => format!("{base}.regex"),
        None => base.to_owned(),
    }
}

// ===== Which matches apply =====

/// Istio's `TranslateRoute` preconditions: the match's `port` equals the route table's port (when both
/// are set), and `sourceMatchHTTP`: one of the match's `gateways` is a gateway of this route table, or
/// (without `gateways`) the proxy carries the `sourceLabels` and is in `sourceNamespace`.
fn match_applies(m: &HttpMatchRequest, key: &ConfigKey, ctx: &RouteContext<'_>) -> bool {
    if ctx.listener_port != 0 && m.port != 0 && m.port != ctx.listener_port {
        return false;
    }
    if !m.gateways.is_empty() {
        return m.gateways.iter().any(|g| {
            let resolved =
                if g == MESH_GATEWAY { g.clone() } else { resolve_gateway_name(g, &key.namespace) };
            ctx.gateways.contains(&resolved)
        });
    }
    m.source_labels.iter().all(|(k, v)| ctx.proxy_labels.get(k) == Some(v))
        && (m.source_namespace.is_empty() || m.source_namespace == ctx.proxy_namespace)
}

// ===== Matches =====

enum MatchKind<'a> {
    Exact(&'a str),
    Prefix(&'a str),
    Regex(&'a str),
}

/// The member of a `StringMatch` oneof that is set (the first, should several be).
fn kind_of(m: &StringMatch) -> Option<MatchKind<'_>> {
    if let Some(v) = &m.exact {
        Some(MatchKind::Exact(v))
    } else if let Some(v) = &m.prefix {
        Some(MatchKind::Prefix(v))
    } else {
        m.regex.as_deref().map(MatchKind::Regex)
    }
}

fn regex_matcher(regex: &str) -> RegexMatcher {
    RegexMatcher { regex: regex.to_owned(), ..Default::default() }
}

/// Istio's `util.ConvertToEnvoyMatch`.
fn envoy_string_match(m: &StringMatch) -> Option<StringMatcher> {
    let pattern = match kind_of(m)? {
        MatchKind::Exact(v) => string_matcher::MatchPattern::Exact(v.to_owned()),
        MatchKind::Prefix(v) => string_matcher::MatchPattern::Prefix(v.to_owned()),
        MatchKind::Regex(v) => string_matcher::MatchPattern::SafeRegex(regex_matcher(v)),
    };
    Some(StringMatcher { match_pattern: Some(pattern), ..Default::default() })
}

/// Istio's `canBeConvertedToPresentMatch`: no match type, or the regex `*` (not RE2; Istio reads it as
/// "header present").
fn is_presence_match(m: &StringMatch) -> bool {
    match kind_of(m) {
        None => true,
        Some(MatchKind::Regex(re)) => re == "*",
        Some(_) => false,
    }
}

/// Istio's `translateHeaderMatch`.
fn header_matcher(name: &str, m: &StringMatch) -> HeaderMatcher {
    let specifier = if is_presence_match(m) {
        Some(HeaderMatchSpecifier::PresentMatch(true))
    } else {
        envoy_string_match(m).map(HeaderMatchSpecifier::StringMatch)
    };
    HeaderMatcher { name: name.to_owned(), header_match_specifier: specifier, ..Default::default() }
}

/// Istio's `translateQueryParamMatch`.
fn query_parameter_matcher(name: &str, m: &StringMatch) -> QueryParameterMatcher {
    let specifier = if is_presence_match(m) {
        Some(QueryParameterMatchSpecifier::PresentMatch(true))
    } else {
        envoy_string_match(m).map(QueryParameterMatchSpecifier::StringMatch)
    };
    QueryParameterMatcher { name: name.to_owned(), query_parameter_match_specifier: specifier }
}

/// Istio's `jwt.ToRoutingClaim`: the claim path of a `@request.auth.claims.a.b` or
/// `@request.auth.claims[a][b]` header name, `None` for other names.
fn jwt_claims(name: &str) -> Option<Vec<String>> {
    let head = name.get(..JWT_CLAIM_PREFIX.len())?;
    if !head.eq_ignore_ascii_case(JWT_CLAIM_PREFIX) {
        return None;
    }
    let rest = &name[JWT_CLAIM_PREFIX.len()..];
    if let Some(dotted) = rest.strip_prefix('.')
        && !dotted.is_empty()
    {
        return Some(dotted.split('.').map(str::to_owned).collect());
    }
    if rest.len() > 2
        && let Some(inner) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']'))
    {
        return Some(inner.split("][").map(str::to_owned).collect());
    }
    None
}

/// Istio's `translateMetadataMatch` for JWT claim routing: a dynamic metadata matcher on the JWT
/// filter's payload that matches the claim's value, or any element when the claim is a list.
fn jwt_metadata_matcher(name: &str, m: &StringMatch) -> Option<MetadataMatcher> {
    let claims = jwt_claims(name)?;
    let value = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::StringMatch(
            envoy_string_match(m).unwrap_or_default(),
        )),
    };
    let list = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(ListMatcher {
            match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(value.clone()))),
        }))),
    };
    let path = std::iter::once(JWT_PAYLOAD_KEY.to_owned())
        .chain(claims)
        .map(|k| metadata_matcher::PathSegment {
            segment: Some(metadata_matcher::path_segment::Segment::Key(k)),
        })
        .collect();
    Some(MetadataMatcher {
        filter: JWT_FILTER.to_owned(),
        path,
        value: Some(ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::OrMatch(OrMatcher {
                value_matchers: vec![list, value],
            })),
        }),
        invert: false,
    })
}

/// Istio's `TranslateRouteMatch`, with the provenance of each Envoy field.
fn translate_match(m: Option<&HttpMatchRequest>, at: &str, record: bool) -> (RouteMatch, Prov) {
    let mut out =
        RouteMatch { path_specifier: Some(PathSpecifier::Prefix("/".to_owned())), ..Default::default() };
    let mut prov = Prov::recording(record);
    let Some(m) = m else {
        return (out, prov);
    };

    let mut headers: Vec<(HeaderMatcher, String)> = Vec::new();
    let mut dynamic: Vec<(MetadataMatcher, String)> = Vec::new();
    for (name, sm) in &m.headers {
        let path = string_match_path(&format!("{at}.headers.{name}"), sm);
        match jwt_metadata_matcher(name, sm) {
            Some(mm) => dynamic.push((mm, path)),
            None => headers.push((header_matcher(name, sm), path)),
        }
    }
    for (name, sm) in &m.without_headers {
        let path = string_match_path(&format!("{at}.withoutHeaders.{name}"), sm);
        match jwt_metadata_matcher(name, sm) {
            Some(mut mm) => {
                mm.invert = true;
                dynamic.push((mm, path));
            }
            None => {
                let mut hm = header_matcher(name, sm);
                hm.invert_match = true;
                // treat_missing_header_as_empty conflicts with present_match.
                hm.treat_missing_header_as_empty = !is_presence_match(sm);
                headers.push((hm, path));
            }
        }
    }
    headers.sort_by(|a, b| a.0.name.cmp(&b.0.name));

    if let Some(uri) = &m.uri {
        let path = string_match_path(&format!("{at}.uri"), uri);
        match kind_of(uri) {
            Some(MatchKind::Exact(v)) => {
                out.path_specifier = Some(PathSpecifier::Path(v.to_owned()));
                prov.add(|| ("match.path".to_owned(), path));
            }
            Some(MatchKind::Prefix(v)) => {
                out.path_specifier = Some(PathSpecifier::Prefix(v.to_owned()));
                prov.add(|| ("match.prefix".to_owned(), path));
            }
            Some(MatchKind::Regex(v)) => {
                out.path_specifier = Some(PathSpecifier::SafeRegex(regex_matcher(v)));
                prov.add(|| ("match.safe_regex".to_owned(), path));
            }
            None => {}
        }
    }
    out.case_sensitive = Some(BoolValue { value: !m.ignore_uri_case });

    for (field, name, sm) in [
        ("method", ":method", &m.method),
        ("authority", ":authority", &m.authority),
        ("scheme", ":scheme", &m.scheme),
    ] {
        if let Some(sm) = sm {
            headers.push((header_matcher(name, sm), string_match_path(&format!("{at}.{field}"), sm)));
        }
    }
    for (k, (hm, path)) in headers.into_iter().enumerate() {
        out.headers.push(hm);
        prov.add(|| (format!("match.headers[{k}]"), path));
    }
    for (k, (mm, path)) in dynamic.into_iter().enumerate() {
        out.dynamic_metadata.push(mm);
        prov.add(|| (format!("match.dynamic_metadata[{k}]"), path));
    }
    for (name, sm) in &m.query_params {
        prov.add(|| {
            (
                format!("match.query_parameters[{}]", out.query_parameters.len()),
                string_match_path(&format!("{at}.queryParams.{name}"), sm),
            )
        });
        out.query_parameters.push(query_parameter_matcher(name, sm));
    }
    (out, prov)
}

/// Istio's `IsCatchAllRoute`: prefix `/` (or regex `.*`) and no header, query or metadata condition.
fn is_catch_all(m: &RouteMatch) -> bool {
    let any_path = match &m.path_specifier {
        Some(PathSpecifier::Prefix(p) | PathSpecifier::PathSeparatedPrefix(p)) => p == "/",
        Some(PathSpecifier::SafeRegex(re)) => re.regex == ".*",
        _ => false,
    };
    any_path && m.headers.is_empty() && m.query_parameters.is_empty() && m.dynamic_metadata.is_empty()
}

// ===== The per-HTTP-route part =====

/// Everything of an Envoy route that does not depend on the match.
#[derive(Default)]
struct Template {
    route: Route,
    prov: Prov,
}

impl Template {
    /// The Envoy route for one match: the template's route (`route`) plus match, name, stat prefix
    /// and decorator.
    fn finish(
        mut route: Route,
        http: &HttpRoute,
        m: Option<&HttpMatchRequest>,
        route_match: RouteMatch,
        vs_name: &str,
        listener_port: u32,
    ) -> Route {
        route.name = match m {
            Some(m) if !m.name.is_empty() => format!("{}.{}", http.name, m.name),
            _ => http.name.clone(),
        };
        if let Some(m) = m
            && !m.stat_prefix.is_empty()
        {
            route.stat_prefix = m.stat_prefix.clone();
        }
        route.r#match = Some(route_match);
        route.decorator = Some(Decorator {
            operation: route_operation(&route, vs_name, listener_port),
            ..Default::default()
        });
        route
    }
}

/// Istio's `GetRouteOperation`: `host:port/path*` for a single `outbound|…` cluster, else
/// `<VirtualService name>:<port>/path*`.
fn route_operation(route: &Route, vs_name: &str, port: u32) -> String {
    let path = match route.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()) {
        Some(PathSpecifier::Prefix(p)) => format!("{p}*"),
        Some(PathSpecifier::Path(p)) => p.clone(),
        Some(PathSpecifier::SafeRegex(re)) => re.regex.clone(),
        _ => "/*".to_owned(),
    };
    if let Some(route::Action::Route(action)) = &route.action
        && let Some(route_action::ClusterSpecifier::Cluster(cluster)) = &action.cluster_specifier
        && cluster.matches('|').count() == 3
    {
        let mut parts = cluster.split('|');
        let (_, port, _, host) = (parts.next(), parts.next(), parts.next(), parts.next());
        let port: i64 = port.and_then(|p| p.parse().ok()).unwrap_or(0);
        return format!("{}:{port}{path}", host.unwrap_or_default());
    }
    format!("{vs_name}:{port}{path}")
}

/// Istio's `BuildConfigInfoMetadata`: `filter_metadata.istio.config` =
/// `/apis/<group>/<version>/namespaces/<ns>/<kebab-kind>/<name>`.
fn config_metadata(key: &ConfigKey) -> Metadata {
    let schema = key.kind.schema();
    let mut kebab = String::new();
    for (n, c) in key.kind.as_str().chars().enumerate() {
        if c.is_ascii_uppercase() && n > 0 {
            kebab.push('-');
        }
        kebab.push(c.to_ascii_lowercase());
    }
    let config = format!(
        "/apis/{}/{}/namespaces/{}/{kebab}/{}",
        schema.group, schema.version, key.namespace, key.name
    );
    let fields =
        HashMap::from([("config".to_owned(), Value { kind: Some(value::Kind::StringValue(config)) })]);
    Metadata {
        filter_metadata: HashMap::from([(ISTIO_METADATA_KEY.to_owned(), Struct { fields })]),
        ..Default::default()
    }
}

/// Builds the match-independent part of the Envoy routes of `http`; `None` (with findings) when the
/// route cannot be translated at all.
fn build_template(
    http: &HttpRoute,
    at: &str,
    key: &ConfigKey,
    ctx: &RouteContext<'_>,
    findings: &mut Vec<Finding>,
    record: bool,
) -> Option<Template> {
    let resource = resource_name(&http.name, at);
    let mut t = Template { route: Route::default(), prov: Prov::recording(record) };
    t.route.metadata = Some(config_metadata(key));

    let mut authority = None;
    if let Some(headers) = &http.headers {
        let ops = header_operations(headers, &format!("{at}.headers"), key, &resource, findings);
        authority = ops.apply_to_route(&mut t.route, &mut t.prov);
    }

    if let Some(redirect) = &http.redirect {
        report_ignored_by_action(http, at, "redirect", authority.as_ref(), key, &resource, findings);
        match redirect_action(redirect, ctx.listener_port, false) {
            Ok(action) => {
                t.route.action = Some(route::Action::Redirect(action));
                t.prov.add(|| ("redirect".to_owned(), format!("{at}.redirect")));
            }
            Err(reason) => {
                findings.push(finding(
                    Severity::Dropped,
                    key,
                    format!("{at}.redirect.redirectCode"),
                    resource,
                    reason,
                ));
                return None;
            }
        }
    } else if let Some(direct) = &http.direct_response {
        report_ignored_by_action(http, at, "directResponse", authority.as_ref(), key, &resource, findings);
        t.route.action = Some(route::Action::DirectResponse(direct_response_action(direct)));
        t.prov.add(|| ("direct_response".to_owned(), format!("{at}.directResponse")));
    } else {
        let action = route_destination(http, at, authority, &mut t, key, ctx, &resource, findings)?;
        t.route.action = Some(route::Action::Route(action));
    }

    if let Some(fault) = &http.fault
        && let Some(config) = fault_config(fault, &format!("{at}.fault"), key, &resource, findings)
    {
        t.route.typed_per_filter_config.insert(FAULT_FILTER.to_owned(), pack_any(config));
        let base = format!("typed_per_filter_config[{FAULT_FILTER}]");
        t.prov.add(|| (format!("{base}.delay"), format!("{at}.fault.delay")));
        t.prov.add(|| (format!("{base}.abort"), format!("{at}.fault.abort")));
        t.prov.add(|| (base, format!("{at}.fault")));
    }
    if let Some(cors) = &http.cors_policy {
        let config = cors_config(cors, &format!("{at}.corsPolicy"), &mut t.prov, key, &resource, findings);
        t.route.typed_per_filter_config.insert(CORS_FILTER.to_owned(), pack_any(config));
    }
    Some(t)
}

/// Reports the fields of `http` that a `redirect` or `directResponse` route does not use.
fn report_ignored_by_action(
    http: &HttpRoute,
    at: &str,
    action: &str,
    authority: Option<&(String, String)>,
    key: &ConfigKey,
    resource: &str,
    findings: &mut Vec<Finding>,
) {
    let mut ignored: Vec<String> = Vec::new();
    if action == "redirect" && http.direct_response.is_some() {
        ignored.push("directResponse".to_owned());
    }
    for (set, name) in [
        (!http.route.is_empty(), "route"),
        (http.rewrite.is_some(), "rewrite"),
        (http.timeout.is_some(), "timeout"),
        (http.retries.is_some(), "retries"),
        (http.mirror.is_some(), "mirror"),
        (!http.mirrors.is_empty(), "mirrors"),
        (http.mirror_percentage.is_some(), "mirrorPercentage"),
        (http.mirror_percent.is_some(), "mirrorPercent"),
    ] {
        if set {
            ignored.push(name.to_owned());
        }
    }
    for name in ignored {
        findings.push(finding(
            Severity::Unsupported,
            key,
            format!("{at}.{name}"),
            resource,
            format!("`{name}` has no effect on a route with `{action}`; not translated"),
        ));
    }
    if let Some((_, path)) = authority {
        findings.push(finding(
            Severity::Unsupported,
            key,
            path.clone(),
            resource,
            format!("an authority rewrite has no effect on a route with `{action}`; not translated"),
        ));
    }
}

// ===== Headers =====

/// Istio's `isInternalHeader`: Envoy does not let routes change these.
fn is_internal_header(name: &str) -> bool {
    name.starts_with(':') || name.eq_ignore_ascii_case("host")
}

/// Istio's `isAuthorityHeader`.
fn is_authority_header(name: &str) -> bool {
    name.eq_ignore_ascii_case(":authority") || name.eq_ignore_ascii_case("host")
}

/// Istio's `TranslateHeadersOperations`, with the Istio path of every entry.
#[derive(Default)]
struct HeaderOps {
    request_add: Vec<(HeaderValueOption, String)>,
    request_remove: Vec<(String, String)>,
    response_add: Vec<(HeaderValueOption, String)>,
    response_remove: Vec<(String, String)>,
    /// The authority set (or added) on the request, with its path: a host rewrite.
    authority: Option<(String, String)>,
}

impl HeaderOps {
    /// Appends the operations to a route's header lists; returns the authority rewrite.
    fn apply_to_route(self, route: &mut Route, prov: &mut Prov) -> Option<(String, String)> {
        extend(&mut route.request_headers_to_add, self.request_add, "request_headers_to_add", prov);
        extend(&mut route.request_headers_to_remove, self.request_remove, "request_headers_to_remove", prov);
        extend(&mut route.response_headers_to_add, self.response_add, "response_headers_to_add", prov);
        extend(
            &mut route.response_headers_to_remove,
            self.response_remove,
            "response_headers_to_remove",
            prov,
        );
        self.authority
    }
}

/// Appends `items` to `list`, recording `field[index]` → Istio path for each.
fn extend<T>(list: &mut Vec<T>, items: Vec<(T, String)>, field: &str, prov: &mut Prov) {
    for (item, path) in items {
        prov.add(|| (format!("{field}[{}]", list.len()), path));
        list.push(item);
    }
}

fn header_operations(
    headers: &Headers,
    at: &str,
    key: &ConfigKey,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> HeaderOps {
    let mut ops = HeaderOps::default();
    let mut not_modifiable = |path: String, name: &str| {
        findings.push(finding(
            Severity::Unsupported,
            key,
            path,
            resource,
            format!(
                "Envoy does not let routes change `:`-prefixed headers or Host; `{name}` is not translated"
            ),
        ));
    };
    if let Some(req) = &headers.request {
        let mut set_authority = None;
        let mut add_authority = None;
        for (field, map, action, authority) in [
            ("set", &req.set, HeaderAppendAction::OverwriteIfExistsOrAdd, &mut set_authority),
            ("add", &req.add, HeaderAppendAction::AppendIfExistsOrAdd, &mut add_authority),
        ] {
            for (name, value) in map {
                let path = format!("{at}.request.{field}.{name}");
                if is_authority_header(name) {
                    *authority = Some((value.clone(), path));
                } else if is_internal_header(name) {
                    not_modifiable(path, name);
                } else {
                    ops.request_add.push((header_value_option(name, value, action), path));
                }
            }
        }
        ops.authority = set_authority.or(add_authority);
        for (n, name) in req.remove.iter().enumerate() {
            let path = format!("{at}.request.remove[{n}]");
            if is_internal_header(name) {
                not_modifiable(path, name);
            } else {
                ops.request_remove.push((name.clone(), path));
            }
        }
    }
    if let Some(resp) = &headers.response {
        for (field, map, action) in [
            ("set", &resp.set, HeaderAppendAction::OverwriteIfExistsOrAdd),
            ("add", &resp.add, HeaderAppendAction::AppendIfExistsOrAdd),
        ] {
            for (name, value) in map {
                let path = format!("{at}.response.{field}.{name}");
                if is_internal_header(name) {
                    not_modifiable(path, name);
                } else {
                    ops.response_add.push((header_value_option(name, value, action), path));
                }
            }
        }
        for (n, name) in resp.remove.iter().enumerate() {
            let path = format!("{at}.response.remove[{n}]");
            if is_internal_header(name) {
                not_modifiable(path, name);
            } else {
                ops.response_remove.push((name.clone(), path));
            }
        }
    }
    ops
}

fn header_value_option(name: &str, value: &str, action: HeaderAppendAction) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue { key: name.to_owned(), value: value.to_owned(), ..Default::default() }),
        append_action: action as i32,
        ..Default::default()
    }
}

// ===== Actions =====

/// Istio's `ApplyRedirect`; `Err` for a redirect code Envoy has no equivalent for.
fn redirect_action(r: &HttpRedirect, listener_port: u32, is_tls: bool) -> Result<RedirectAction, String> {
    let mut out = RedirectAction { host_redirect: r.authority.clone(), ..Default::default() };
    out.path_rewrite_specifier = Some(if r.prefix_rewrite.is_empty() {
        redirect_action::PathRewriteSpecifier::PathRedirect(r.uri.clone())
    } else {
        redirect_action::PathRewriteSpecifier::PrefixRewrite(r.prefix_rewrite.clone())
    });
    if !r.scheme.is_empty() {
        out.scheme_rewrite_specifier =
            Some(redirect_action::SchemeRewriteSpecifier::SchemeRedirect(r.scheme.clone()));
    }
    if r.port.is_some() || r.derive_port.is_some() {
        out.port_redirect = match (r.port, r.derive_port) {
            (Some(port), _) => port,
            (None, Some(d)) if d == RedirectPortSelection::FromRequestPort as i32 => listener_port,
            _ => 0,
        };
        let scheme = match r.scheme.as_str() {
            "" if is_tls => "https",
            "" => "http",
            s => s,
        };
        // No explicit :80 for http or :443 for https.
        if (out.port_redirect == 80 && scheme == "http") || (out.port_redirect == 443 && scheme == "https") {
            out.port_redirect = 0;
        }
    }
    use redirect_action::RedirectResponseCode as Code;
    let code = match r.redirect_code {
        0 | 301 => Code::MovedPermanently,
        302 => Code::Found,
        303 => Code::SeeOther,
        307 => Code::TemporaryRedirect,
        308 => Code::PermanentRedirect,
        other => {
            return Err(format!(
                "redirect code {other} is not supported (Envoy redirects with 301, 302, 303, 307 or 308); the route is left out"
            ));
        }
    };
    out.response_code = code as i32;
    Ok(out)
}

/// Istio's `ApplyDirectResponse`.
fn direct_response_action(d: &HttpDirectResponse) -> DirectResponseAction {
    let body = d.body.as_ref().and_then(|b| {
        let specifier = if let Some(s) = &b.string {
            data_source::Specifier::InlineString(s.clone())
        } else {
            data_source::Specifier::InlineBytes(b.bytes.clone()?)
        };
        Some(DataSource { specifier: Some(specifier), ..Default::default() })
    });
    DirectResponseAction { status: d.status, body, ..Default::default() }
}

fn envoy_duration(d: &api::wkt::Duration) -> Duration {
    Duration { seconds: d.seconds, nanos: d.nanos }
}

fn hundredths(numerator: u32) -> FractionalPercent {
    FractionalPercent { numerator, denominator: DenominatorType::Hundred as i32 }
}

/// Istio's `translatePercentToFractionalPercent`: a 0–100 double as parts per million.
fn millionths(percent: f64) -> FractionalPercent {
    FractionalPercent { numerator: (percent * 10_000.0) as u32, denominator: DenominatorType::Million as i32 }
}

/// Istio's `MirrorPercent`: `mirrorPercentage`, else the deprecated `mirrorPercent`, else 100%; `None`
/// (no mirroring) for an explicit 0.
fn mirror_percent(http: &HttpRoute) -> Option<RuntimeFractionalPercent> {
    let value = match (&http.mirror_percentage, http.mirror_percent) {
        (Some(p), _) if p.value > 0.0 => millionths(p.value),
        (Some(_), _) => return None,
        (None, Some(p)) if p > 0 => hundredths(p),
        (None, Some(_)) => return None,
        (None, None) => hundredths(100),
    };
    Some(RuntimeFractionalPercent { default_value: Some(value), ..Default::default() })
}

/// Istio's `MirrorPercentByPolicy`.
fn mirror_policy_percent(m: &HttpMirrorPolicy) -> Option<RuntimeFractionalPercent> {
    let value = match &m.percentage {
        Some(p) if p.value > 0.0 => millionths(p.value),
        Some(_) => return None,
        None => hundredths(100),
    };
    Some(RuntimeFractionalPercent { default_value: Some(value), ..Default::default() })
}

/// Istio's `TranslateRequestMirrorPolicy` (`DISABLE_SHADOW_HOST_SUFFIX` at its default, true).
fn mirror_policy(cluster: String, fraction: RuntimeFractionalPercent) -> route_action::RequestMirrorPolicy {
    route_action::RequestMirrorPolicy {
        cluster,
        runtime_fraction: Some(fraction),
        trace_sampled: Some(BoolValue { value: false }),
        disable_shadow_host_suffix_append: true,
        ..Default::default()
    }
}

/// The cluster of a destination, or a finding (and `None`) when it has no host or the host is unknown.
fn destination_cluster(
    destination: Option<&Destination>,
    at: &str,
    ctx: &RouteContext<'_>,
    key: &ConfigKey,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> Option<String> {
    let Some(dest) = destination else {
        findings.push(finding(
            Severity::Dropped,
            key,
            at,
            resource,
            "a destination is required; the route is left out",
        ));
        return None;
    };
    let cluster = (ctx.cluster_for)(dest);
    if cluster.is_none() {
        findings.push(finding(
            Severity::Dropped,
            key,
            format!("{at}.host"),
            resource,
            format!(
                "unknown destination host {:?} (no service defines it); the route is left out",
                dest.host
            ),
        ));
    }
    cluster
}

/// Istio's `applyHTTPRouteDestination`: timeout, rewrite, host rewrite, mirrors, destination(s) and
/// retry policy.
#[allow(clippy::too_many_arguments)]
fn route_destination(
    http: &HttpRoute,
    at: &str,
    mut authority: Option<(String, String)>,
    t: &mut Template,
    key: &ConfigKey,
    ctx: &RouteContext<'_>,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> Option<RouteAction> {
    let mut action = RouteAction::default();

    // setTimeout: the VirtualService timeout, else 0 (disabled); gRPC's timeout header capped the same.
    let timeout = http.timeout.as_ref().map(envoy_duration).unwrap_or_default();
    action.timeout = Some(timeout);
    #[allow(deprecated)]
    {
        action.max_grpc_timeout = Some(timeout);
    }
    if http.timeout.is_some() {
        t.prov.add(|| ("route.timeout".to_owned(), format!("{at}.timeout")));
        t.prov.add(|| ("route.max_grpc_timeout".to_owned(), format!("{at}.timeout")));
    }

    if let Some(rewrite) = &http.rewrite {
        if let Some(rr) = &rewrite.uri_regex_rewrite {
            action.regex_rewrite = Some(RegexMatchAndSubstitute {
                pattern: Some(regex_matcher(&rr.r#match)),
                substitution: rr.rewrite.clone(),
            });
            t.prov.add(|| {
                ("route.regex_rewrite.pattern".to_owned(), format!("{at}.rewrite.uriRegexRewrite.match"))
            });
            t.prov.add(|| ("route.regex_rewrite".to_owned(), format!("{at}.rewrite.uriRegexRewrite")));
            if !rewrite.uri.is_empty() {
                findings.push(finding(
                    Severity::Unsupported,
                    key,
                    format!("{at}.rewrite.uri"),
                    resource,
                    "`uri` has no effect next to `uriRegexRewrite`; not translated",
                ));
            }
        } else if !rewrite.uri.is_empty() {
            action.prefix_rewrite = rewrite.uri.clone();
            t.prov.add(|| ("route.prefix_rewrite".to_owned(), format!("{at}.rewrite.uri")));
        }
        if !rewrite.authority.is_empty() {
            authority = Some((rewrite.authority.clone(), format!("{at}.rewrite.authority")));
        }
    }
    if let Some((host, path)) = authority {
        action.host_rewrite_specifier = Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(host));
        t.prov.add(|| ("route.host_rewrite_literal".to_owned(), path));
    }

    if let Some(mirror) = &http.mirror {
        if let Some(fraction) = mirror_percent(http) {
            match (ctx.cluster_for)(mirror) {
                Some(cluster) => {
                    t.prov.add(|| {
                        (
                            format!(
                                "route.request_mirror_policies[{}]",
                                action.request_mirror_policies.len()
                            ),
                            format!("{at}.mirror"),
                        )
                    });
                    action.request_mirror_policies.push(mirror_policy(cluster, fraction));
                }
                None => findings.push(finding(
                    Severity::Dropped,
                    key,
                    format!("{at}.mirror.host"),
                    resource,
                    format!(
                        "unknown mirror host {:?} (no service defines it); the mirror is left out",
                        mirror.host
                    ),
                )),
            }
        }
    } else {
        for (set, name) in [
            (http.mirror_percentage.is_some(), "mirrorPercentage"),
            (http.mirror_percent.is_some(), "mirrorPercent"),
        ] {
            if set {
                findings.push(finding(
                    Severity::Unsupported,
                    key,
                    format!("{at}.{name}"),
                    resource,
                    format!("`{name}` has no effect without `mirror`; not translated"),
                ));
            }
        }
    }
    for (n, m) in http.mirrors.iter().enumerate() {
        let here = format!("{at}.mirrors[{n}]");
        let Some(fraction) = mirror_policy_percent(m) else { continue };
        let Some(dest) = &m.destination else {
            findings.push(finding(
                Severity::Dropped,
                key,
                format!("{here}.destination"),
                resource,
                "a mirror needs a destination; the mirror is left out",
            ));
            continue;
        };
        match (ctx.cluster_for)(dest) {
            Some(cluster) => {
                t.prov.add(|| {
                    (format!("route.request_mirror_policies[{}]", action.request_mirror_policies.len()), here)
                });
                action.request_mirror_policies.push(mirror_policy(cluster, fraction));
            }
            None => findings.push(finding(
                Severity::Dropped,
                key,
                format!("{here}.destination.host"),
                resource,
                format!(
                    "unknown mirror host {:?} (no service defines it); the mirror is left out",
                    dest.host
                ),
            )),
        }
    }

    match http.route.as_slice() {
        [] => {
            findings.push(finding(
                Severity::Dropped,
                key,
                format!("{at}.route"),
                resource,
                "the HTTP route has no `route`, `redirect`, `directResponse` or `delegate`; the route is left out",
            ));
            return None;
        }
        [dst] => {
            single_destination(dst, &format!("{at}.route[0]"), &mut action, t, key, ctx, resource, findings)?
        }
        many => {
            let mut clusters = Vec::new();
            let mut failed = false;
            for (k, dst) in many.iter().enumerate() {
                if dst.weight == 0 {
                    // Zero-weight destinations are left out when there are others.
                    continue;
                }
                let here = format!("{at}.route[{k}]");
                match weighted_destination(dst, &here, clusters.len(), t, key, ctx, resource, findings) {
                    Some(cw) => clusters.push(cw),
                    None => failed = true,
                }
            }
            if failed {
                return None;
            }
            if clusters.is_empty() {
                findings.push(finding(
                    Severity::Dropped,
                    key,
                    format!("{at}.route"),
                    resource,
                    "every destination has weight 0, and Envoy needs weights that sum to more than 0; the route is left out",
                ));
                return None;
            }
            t.prov.add(|| ("route.weighted_clusters".to_owned(), format!("{at}.route")));
            action.cluster_specifier =
                Some(route_action::ClusterSpecifier::WeightedClusters(WeightedCluster {
                    clusters,
                    ..Default::default()
                }));
        }
    }

    action.retry_policy = retry_policy(http.retries.as_ref(), false);
    if http.retries.is_some() {
        t.prov.add(|| ("route.retry_policy".to_owned(), format!("{at}.retries")));
    }
    Some(action)
}

/// Istio's `processDestination`: one cluster; the destination's header changes join the route's.
#[allow(clippy::too_many_arguments)]
fn single_destination(
    dst: &HttpRouteDestination,
    at: &str,
    action: &mut RouteAction,
    t: &mut Template,
    key: &ConfigKey,
    ctx: &RouteContext<'_>,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> Option<()> {
    let cluster = destination_cluster(
        dst.destination.as_ref(),
        &format!("{at}.destination"),
        ctx,
        key,
        resource,
        findings,
    )?;
    action.cluster_specifier = Some(route_action::ClusterSpecifier::Cluster(cluster));
    t.prov.add(|| ("route.cluster".to_owned(), format!("{at}.destination")));
    if let Some(headers) = &dst.headers {
        let ops = header_operations(headers, &format!("{at}.headers"), key, resource, findings);
        // The route-level authority (header or rewrite) wins over the destination's.
        if let Some((host, path)) = ops.apply_to_route(&mut t.route, &mut t.prov)
            && action.host_rewrite_specifier.is_none()
        {
            action.host_rewrite_specifier =
                Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(host));
            t.prov.add(|| ("route.host_rewrite_literal".to_owned(), path));
        }
    }
    Some(())
}

/// Istio's `processWeightedDestination`: a weighted cluster carrying the destination's header changes.
#[allow(clippy::too_many_arguments)]
fn weighted_destination(
    dst: &HttpRouteDestination,
    at: &str,
    index: usize,
    t: &mut Template,
    key: &ConfigKey,
    ctx: &RouteContext<'_>,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> Option<weighted_cluster::ClusterWeight> {
    let name = destination_cluster(
        dst.destination.as_ref(),
        &format!("{at}.destination"),
        ctx,
        key,
        resource,
        findings,
    )?;
    // As Istio's uint32 conversion: the weight's bits (validation rejects negative weights).
    let mut cw = weighted_cluster::ClusterWeight {
        name,
        weight: Some(UInt32Value { value: dst.weight as u32 }),
        ..Default::default()
    };
    let base = format!("route.weighted_clusters.clusters[{index}]");
    if let Some(headers) = &dst.headers {
        let ops = header_operations(headers, &format!("{at}.headers"), key, resource, findings);
        extend(
            &mut cw.request_headers_to_add,
            ops.request_add,
            &format!("{base}.request_headers_to_add"),
            &mut t.prov,
        );
        extend(
            &mut cw.request_headers_to_remove,
            ops.request_remove,
            &format!("{base}.request_headers_to_remove"),
            &mut t.prov,
        );
        extend(
            &mut cw.response_headers_to_add,
            ops.response_add,
            &format!("{base}.response_headers_to_add"),
            &mut t.prov,
        );
        extend(
            &mut cw.response_headers_to_remove,
            ops.response_remove,
            &format!("{base}.response_headers_to_remove"),
            &mut t.prov,
        );
        if let Some((host, path)) = ops.authority {
            cw.host_rewrite_specifier =
                Some(weighted_cluster::cluster_weight::HostRewriteSpecifier::HostRewriteLiteral(host));
            t.prov.add(|| (format!("{base}.host_rewrite_literal"), path));
        }
    }
    t.prov.add(|| (base, at.to_owned()));
    Some(cw)
}

// ===== Retries =====

/// Istio's `previous_hosts` retry host predicate (retries avoid hosts already tried).
fn previous_hosts_predicate() -> retry_policy::RetryHostPredicate {
    retry_policy::RetryHostPredicate {
        name: "envoy.retry_host_predicates.previous_hosts".to_owned(),
        config_type: Some(retry_policy::retry_host_predicate::ConfigType::TypedConfig(pack_any(
            PreviousHostsPredicate::default(),
        ))),
    }
}

/// Istio's default retry policy, used when an HTTP route sets no `retries`: 2 retries on
/// [`DEFAULT_RETRY_ON`], 5 host selection attempts, and (without consistent hashing) retries avoid
/// hosts already tried. Since Istio 1.24 (`EXCLUDE_503_FROM_DEFAULT_RETRIES`, a flag later removed) it
/// lists no retriable status codes, so `retriable-status-codes` only applies to codes a request names in
/// `x-envoy-retriable-status-codes`.
pub fn default_retry_policy(consistent_hash: bool) -> RetryPolicy {
    RetryPolicy {
        num_retries: Some(UInt32Value { value: DEFAULT_RETRY_ATTEMPTS }),
        retry_on: DEFAULT_RETRY_ON.to_owned(),
        host_selection_retry_max_attempts: 5,
        retry_host_predicate: if consistent_hash { Vec::new() } else { vec![previous_hosts_predicate()] },
        ..Default::default()
    }
}

/// Istio's `retry.ConvertPolicy`: `None` for the default policy ([`default_retry_policy`]); no policy
/// when `attempts` is 0 or less; otherwise the default policy with the route's settings over it.
/// `consistent_hash` (the destination uses consistent-hash load balancing) drops the "avoid previous
/// hosts" predicate of the default.
pub fn retry_policy(retries: Option<&HttpRetry>, consistent_hash: bool) -> Option<RetryPolicy> {
    let Some(r) = retries else {
        return Some(default_retry_policy(consistent_hash));
    };
    if r.attempts <= 0 {
        return None;
    }
    let mut out = default_retry_policy(consistent_hash);
    out.num_retries = Some(UInt32Value { value: r.attempts as u32 });
    if !r.retry_on.is_empty() {
        let (retry_on, codes) = parse_retry_on(&r.retry_on);
        out.retry_on = retry_on;
        out.retriable_status_codes = codes;
        if !out.retriable_status_codes.is_empty() && !out.retry_on.contains("retriable-status-codes") {
            out.retry_on.push_str(",retriable-status-codes");
        }
    }
    if let Some(t) = &r.per_try_timeout {
        out.per_try_timeout = Some(envoy_duration(t));
    }
    if let Some(ignore_previous) = r.retry_ignore_previous_hosts {
        out.retry_host_predicate =
            if ignore_previous { vec![previous_hosts_predicate()] } else { Vec::new() };
    }
    if r.retry_remote_localities == Some(true) {
        out.retry_priority = Some(retry_policy::RetryPriority {
            name: "envoy.retry_priorities.previous_priorities".to_owned(),
            config_type: Some(retry_policy::retry_priority::ConfigType::TypedConfig(pack_any(
                PreviousPrioritiesConfig { update_frequency: 2 },
            ))),
        });
    }
    if let Some(b) = &r.backoff {
        out.retry_back_off =
            Some(retry_policy::RetryBackOff { base_interval: Some(envoy_duration(b)), ..Default::default() });
    }
    Some(out)
}

/// HTTP status codes Go's `net/http` has a text for (`http.StatusText(code) != ""`).
fn is_known_http_status(code: i64) -> bool {
    matches!(
        code,
        100..=103
            | 200..=208
            | 226
            | 300..=305
            | 307
            | 308
            | 400..=418
            | 421..=426
            | 428
            | 429
            | 431
            | 451
            | 500..=508
            | 510
            | 511
    )
}

/// Istio's `parseRetryOn`: comma-separated parts, trimmed; parts that are known HTTP status codes
/// become retriable status codes, the rest are joined back as Envoy `retry_on` conditions.
fn parse_retry_on(retry_on: &str) -> (String, Vec<u32>) {
    let mut codes = Vec::new();
    let mut conditions = Vec::new();
    for part in retry_on.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<i64>() {
            Ok(code) if is_known_http_status(code) => codes.push(code as u32),
            _ => conditions.push(part),
        }
    }
    (conditions.join(","), codes)
}

// ===== Fault injection =====

/// Istio's `TranslateFault`; `None` when neither a delay nor an abort can be translated.
fn fault_config(
    f: &HttpFaultInjection,
    at: &str,
    key: &ConfigKey,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> Option<HttpFault> {
    let mut out = HttpFault::default();
    if let Some(d) = &f.delay {
        let percentage = match &d.percentage {
            Some(p) => millionths(p.value),
            None => hundredths(d.percent as u32),
        };
        if let Some(fixed) = &d.fixed_delay {
            out.delay = Some(FaultDelay {
                percentage: Some(percentage),
                fault_delay_secifier: Some(FaultDelaySecifier::FixedDelay(envoy_duration(fixed))),
            });
        } else {
            let (path, what) = if d.exponential_delay.is_some() {
                (
                    format!("{at}.delay.exponentialDelay"),
                    "exponential delays are not implemented (nor by Istio)",
                )
            } else {
                (format!("{at}.delay"), "a delay without `fixedDelay` has no delay")
            };
            findings.push(finding(
                Severity::Unsupported,
                key,
                path,
                resource,
                format!("{what}; the delay is not translated"),
            ));
        }
    }
    if let Some(a) = &f.abort {
        let percentage = a.percentage.as_ref().map(|p| millionths(p.value));
        let error = if let Some(status) = a.http_status {
            Ok(fault_abort::ErrorType::HttpStatus(status as u32))
        } else if let Some(name) = &a.grpc_status {
            grpc_status_code(name)
                .map(fault_abort::ErrorType::GrpcStatus)
                .ok_or_else(|| (format!("{at}.abort.grpcStatus"), format!("unknown gRPC status {name:?}")))
        } else if a.http2_error.is_some() {
            Err((
                format!("{at}.abort.http2Error"),
                "HTTP/2 error aborts are not implemented (nor by Istio)".to_owned(),
            ))
        } else {
            Err((
                format!("{at}.abort"),
                "an abort without `httpStatus` or `grpcStatus` has no error".to_owned(),
            ))
        };
        match error {
            Ok(error_type) => {
                out.abort =
                    Some(FaultAbort { percentage, error_type: Some(error_type), ..Default::default() })
            }
            Err((path, what)) => findings.push(finding(
                Severity::Unsupported,
                key,
                path,
                resource,
                format!("{what}; the abort is not translated"),
            )),
        }
    }
    if out.delay.is_none() && out.abort.is_none() {
        return None;
    }
    Some(out)
}

/// gRPC status codes by name (Istio's `SupportedGRPCStatus`).
fn grpc_status_code(name: &str) -> Option<u32> {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    NAMES.iter().position(|n| *n == name).map(|p| p as u32)
}

// ===== CORS =====

/// Istio's `TranslateCORSPolicy`.
fn cors_config(
    c: &IstioCors,
    at: &str,
    prov: &mut Prov,
    key: &ConfigKey,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> CorsPolicy {
    let base = format!("typed_per_filter_config[{CORS_FILTER}]");
    let mut out = CorsPolicy {
        forward_not_matching_preflights: Some(BoolValue {
            value: c.unmatched_preflights != UnmatchedPreflights::Ignore as i32,
        }),
        ..Default::default()
    };
    if !c.allow_origins.is_empty() {
        for (k, sm) in c.allow_origins.iter().enumerate() {
            let path = format!("{at}.allowOrigins[{k}]");
            match envoy_string_match(sm) {
                Some(m) => {
                    prov.add(|| {
                        (
                            format!(
                                "{base}.allow_origin_string_match[{}]",
                                out.allow_origin_string_match.len()
                            ),
                            string_match_path(&path, sm),
                        )
                    });
                    out.allow_origin_string_match.push(m);
                }
                None => findings.push(finding(
                    Severity::Unsupported,
                    key,
                    path,
                    resource,
                    "an origin without `exact`, `prefix` or `regex` matches nothing; not translated",
                )),
            }
        }
    } else {
        for (k, origin) in c.allow_origin.iter().enumerate() {
            prov.add(|| (format!("{base}.allow_origin_string_match[{k}]"), format!("{at}.allowOrigin[{k}]")));
            out.allow_origin_string_match.push(StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Exact(origin.clone())),
                ..Default::default()
            });
        }
    }
    out.filter_enabled =
        Some(RuntimeFractionalPercent { default_value: Some(hundredths(100)), ..Default::default() });
    out.allow_credentials = c.allow_credentials.map(|value| BoolValue { value });
    out.allow_headers = c.allow_headers.join(",");
    out.allow_methods = c.allow_methods.join(",");
    out.expose_headers = c.expose_headers.join(",");
    if let Some(max_age) = &c.max_age {
        out.max_age = max_age.seconds.to_string();
    }
    for (field, istio) in [
        ("allow_headers", "allowHeaders"),
        ("allow_methods", "allowMethods"),
        ("expose_headers", "exposeHeaders"),
        ("max_age", "maxAge"),
    ] {
        prov.add(|| (format!("{base}.{field}"), format!("{at}.{istio}")));
    }
    prov.add(|| (base, at.to_owned()));
    out
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use api::Kind;
    use serde_json::json;

    use super::*;
    use crate::check::envoy_oracle;

    fn key() -> ConfigKey {
        ConfigKey { kind: Kind::VirtualService, namespace: "default".into(), name: "reviews".into() }
    }

    /// `outbound|<port or 80>|<subset>|<host>`; the host `unknown` is not known.
    fn cluster_for(d: &Destination) -> Option<String> {
        if d.host == "unknown" {
            return None;
        }
        let port = d.port.as_ref().map_or(80, |p| p.number);
        Some(format!("outbound|{port}|{}|{}", d.subset, d.host))
    }

    fn vs(spec: serde_json::Value) -> VirtualService {
        serde_json::from_value(spec).expect("VirtualService spec")
    }

    struct Table {
        port: u32,
        gateways: Vec<String>,
        labels: BTreeMap<String, String>,
        namespace: String,
    }

    impl Default for Table {
        fn default() -> Self {
            Table {
                port: 80,
                gateways: vec![MESH_GATEWAY.into()],
                labels: BTreeMap::new(),
                namespace: "default".into(),
            }
        }
    }

    impl Table {
        fn run_with(&self, vs: &VirtualService, key: &ConfigKey, check: bool) -> (Vec<Route>, Vec<Finding>) {
            let ctx = RouteContext {
                listener_port: self.port,
                gateways: &self.gateways,
                proxy_labels: &self.labels,
                proxy_namespace: &self.namespace,
                cluster_for: &cluster_for,
            };
            let mut findings = Vec::new();
            let routes = translate(vs, key, &ctx, &mut findings, check);
            (routes, findings)
        }
    }

    fn run(spec: serde_json::Value) -> (Vec<Route>, Vec<Finding>) {
        Table::default().run_with(&vs(spec), &key(), true)
    }

    // ===== Envoy as the oracle =====

    fn corpus_root() -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/istio-testdata"))
    }

    fn yaml_files(dir: &Path, recursive_networking: bool, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                if recursive_networking {
                    yaml_files(&path, true, out);
                }
            } else if path.extension().is_some_and(|e| e == "yaml")
                && (!recursive_networking || path.parent().is_some_and(|p| p.ends_with("networking")))
            {
                out.push(path);
            }
        }
    }

    /// Every VirtualService of the shared corpus.
    fn corpus_virtual_services() -> Vec<(ConfigKey, VirtualService, String)> {
        let root = corpus_root();
        assert!(root.exists(), "shared Istio test data not found at {}", root.display());
        let mut files = Vec::new();
        yaml_files(&root.join("tests/testdata/config"), false, &mut files);
        yaml_files(&root.join("samples"), true, &mut files);
        let mut out = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read corpus file");
            let name = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
            for doc in model::parse::parse_text(&name, &text, &model::parse::ParseOptions::default()) {
                if let Some(config) = doc.config
                    && let api::Spec::VirtualService(vs) = &config.spec
                {
                    out.push((config.key(), vs.clone(), name.clone()));
                }
            }
        }
        out
    }

    /// Route tables that exercise as many matches of `vs` as possible: the mesh with no labels, and
    /// every gateway the VirtualService names with the union of its `sourceLabels`.
    fn tables_for(vs: &VirtualService, key: &ConfigKey) -> Vec<Table> {
        let mut gateways: Vec<String> = vec![MESH_GATEWAY.into()];
        let mut labels = BTreeMap::new();
        let mut namespace = key.namespace.clone();
        for g in vs
            .gateways
            .iter()
            .chain(vs.http.iter().flat_map(|h| h.r#match.iter().flat_map(|m| m.gateways.iter())))
        {
            if g != MESH_GATEWAY {
                gateways.push(resolve_gateway_name(g, &key.namespace));
            }
        }
        for m in vs.http.iter().flat_map(|h| h.r#match.iter()) {
            labels.extend(m.source_labels.clone());
            if !m.source_namespace.is_empty() {
                namespace = m.source_namespace.clone();
            }
        }
        vec![Table { port: 0, ..Table::default() }, Table { port: 0, gateways, labels, namespace }]
    }

    #[test]
    fn corpus_routes_validate_in_envoy() {
        let corpus = corpus_virtual_services();
        assert!(corpus.len() >= 20, "only {} VirtualServices in the corpus", corpus.len());
        let mut all = Vec::new();
        let mut findings = Vec::new();
        let mut with_routes = 0;
        for (key, vs, file) in &corpus {
            let mut produced = 0;
            for table in tables_for(vs, key) {
                let (routes, f) = table.run_with(vs, key, true);
                produced += routes.len();
                all.extend(routes);
                findings.extend(f.into_iter().map(|f| (file.clone(), f)));
            }
            if produced > 0 {
                with_routes += 1;
            }
        }
        for (file, f) in &findings {
            eprintln!("{file}: {f}");
        }
        eprintln!(
            "{} VirtualServices, {with_routes} with HTTP routes, {} Envoy routes",
            corpus.len(),
            all.len()
        );
        assert!(all.len() >= 50, "only {} routes", all.len());
        if let Err(out) = envoy_oracle::validate(all) {
            panic!("Envoy rejected the corpus routes:\n{out}");
        }
    }

    #[test]
    fn corpus_with_a_bad_regex_still_validates_in_envoy() {
        let mut all = Vec::new();
        for (key, vs, _) in corpus_virtual_services() {
            all.extend(Table { port: 0, ..Table::default() }.run_with(&vs, &key, true).0);
        }
        let corpus_routes = all.len();
        let bad = vs(json!({"hosts": ["bad"], "http": [
            {"match": [{"headers": {"x-user": {"regex": "[unclosed"}}}], "route": [dest("bad")]},
            {"match": [{"uri": {"prefix": "/fine"}}], "route": [dest("fine")]},
        ]}));
        let (routes, findings) = Table::default().run_with(&bad, &key(), true);
        assert_eq!(paths(&findings, Severity::Dropped), ["spec.http[0].match[0].headers.x-user.regex"]);
        assert_eq!(routes.len(), 1);
        all.extend(routes);
        assert_eq!(all.len(), corpus_routes + 1);
        envoy_oracle::validate(all).unwrap();
    }

    // ===== Helpers for assertions =====

    fn action(r: &Route) -> &RouteAction {
        match &r.action {
            Some(route::Action::Route(a)) => a,
            other => panic!("not a route action: {other:?}"),
        }
    }

    fn cluster(r: &Route) -> &str {
        match &action(r).cluster_specifier {
            Some(route_action::ClusterSpecifier::Cluster(c)) => c,
            other => panic!("not a single cluster: {other:?}"),
        }
    }

    fn weighted(r: &Route) -> &WeightedCluster {
        match &action(r).cluster_specifier {
            Some(route_action::ClusterSpecifier::WeightedClusters(w)) => w,
            other => panic!("not weighted clusters: {other:?}"),
        }
    }

    fn rmatch(r: &Route) -> &RouteMatch {
        r.r#match.as_ref().expect("match")
    }

    fn fault(r: &Route) -> HttpFault {
        use prost::Message;
        HttpFault::decode(r.typed_per_filter_config[FAULT_FILTER].value.as_slice()).expect("HTTPFault")
    }

    fn cors(r: &Route) -> CorsPolicy {
        use prost::Message;
        CorsPolicy::decode(r.typed_per_filter_config[CORS_FILTER].value.as_slice()).expect("CorsPolicy")
    }

    fn exact(v: &str) -> Option<HeaderMatchSpecifier> {
        Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(string_matcher::MatchPattern::Exact(v.into())),
            ..Default::default()
        }))
    }

    fn header_kv(o: &HeaderValueOption) -> (&str, &str, i32) {
        let h = o.header.as_ref().expect("header");
        (h.key.as_str(), h.value.as_str(), o.append_action)
    }

    fn paths(findings: &[Finding], severity: Severity) -> Vec<&str> {
        findings.iter().filter(|f| f.severity == severity).map(|f| f.path.as_str()).collect()
    }

    const OVERWRITE: i32 = HeaderAppendAction::OverwriteIfExistsOrAdd as i32;
    const APPEND: i32 = HeaderAppendAction::AppendIfExistsOrAdd as i32;

    fn dest(host: &str) -> serde_json::Value {
        json!({"destination": {"host": host}})
    }

    // ===== Matches =====

    #[test]
    fn a_route_without_match_is_a_catch_all_and_ends_the_virtual_service() {
        let (routes, findings) = run(json!({"http": [
            {"route": [dest("a")]},
            {"match": [{"uri": {"prefix": "/x"}}], "route": [dest("b")]},
        ]}));
        assert!(findings.is_empty(), "{findings:?}");
        assert_eq!(routes.len(), 1);
        let m = rmatch(&routes[0]);
        assert_eq!(m.path_specifier, Some(PathSpecifier::Prefix("/".into())));
        assert_eq!(m.case_sensitive, None);
        assert_eq!(routes[0].name, "");
    }

    #[test]
    fn one_route_per_match_named_as_istio_does() {
        let (routes, _) = run(json!({"http": [
            {"name": "canary", "match": [{"name": "jason", "uri": {"exact": "/a"}}, {"uri": {"exact": "/b"}}],
             "route": [dest("a")]},
            {"match": [{"name": "only-match", "uri": {"exact": "/c"}}], "route": [dest("a")]},
        ]}));
        let names: Vec<&str> = routes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["canary.jason", "canary", ".only-match"]);
    }

    #[test]
    fn uri_matches() {
        let (routes, _) = run(json!({"http": [{"match": [
            {"uri": {"exact": "/exact"}},
            {"uri": {"prefix": "/prefix"}, "ignoreUriCase": true},
            {"uri": {"regex": "/re/[0-9]+"}},
        ], "route": [dest("a")]}]}));
        assert_eq!(rmatch(&routes[0]).path_specifier, Some(PathSpecifier::Path("/exact".into())));
        assert_eq!(rmatch(&routes[0]).case_sensitive, Some(BoolValue { value: true }));
        assert_eq!(rmatch(&routes[1]).path_specifier, Some(PathSpecifier::Prefix("/prefix".into())));
        assert_eq!(rmatch(&routes[1]).case_sensitive, Some(BoolValue { value: false }));
        let Some(PathSpecifier::SafeRegex(re)) = &rmatch(&routes[2]).path_specifier else { panic!("regex") };
        assert_eq!(re.regex, "/re/[0-9]+");
        // Like Istio, no engine is named: Envoy's default (and only) engine is Google RE2.
        assert_eq!(re.engine_type, None);
    }

    #[test]
    fn header_matches_follow_istio() {
        let (routes, _) = run(json!({"http": [{"match": [{
            "headers": {
                "x-exact": {"exact": "v"},
                "x-prefix": {"prefix": "p"},
                "x-regex": {"regex": "r.*"},
                "x-present": {},
                "x-star": {"regex": "*"},
            },
            "withoutHeaders": {"x-absent": {}, "x-not": {"exact": "no"}},
            "method": {"exact": "GET"},
            "authority": {"prefix": "api."},
            "scheme": {"exact": "https"},
        }], "route": [dest("a")]}]}));
        let headers = &rmatch(&routes[0]).headers;
        let names: Vec<&str> = headers.iter().map(|h| h.name.as_str()).collect();
        // Header and withoutHeaders matchers sorted by name, then :method, :authority, :scheme.
        assert_eq!(
            names,
            [
                "x-absent",
                "x-exact",
                "x-not",
                "x-prefix",
                "x-present",
                "x-regex",
                "x-star",
                ":method",
                ":authority",
                ":scheme"
            ]
        );
        let by_name = |n: &str| headers.iter().find(|h| h.name == n).unwrap();
        assert_eq!(by_name("x-exact").header_match_specifier, exact("v"));
        assert_eq!(
            by_name("x-present").header_match_specifier,
            Some(HeaderMatchSpecifier::PresentMatch(true))
        );
        assert_eq!(by_name("x-star").header_match_specifier, Some(HeaderMatchSpecifier::PresentMatch(true)));
        let Some(HeaderMatchSpecifier::StringMatch(re)) = &by_name("x-regex").header_match_specifier else {
            panic!()
        };
        assert!(
            matches!(&re.match_pattern, Some(string_matcher::MatchPattern::SafeRegex(r)) if r.regex == "r.*")
        );
        let absent = by_name("x-absent");
        assert!(absent.invert_match);
        assert!(!absent.treat_missing_header_as_empty);
        assert_eq!(absent.header_match_specifier, Some(HeaderMatchSpecifier::PresentMatch(true)));
        let not = by_name("x-not");
        assert!(not.invert_match && not.treat_missing_header_as_empty);
        assert_eq!(by_name(":method").header_match_specifier, exact("GET"));
        assert!(!by_name(":method").invert_match);
    }

    #[test]
    fn query_parameter_matches() {
        let (routes, _) = run(json!({"http": [{"match": [{
            "queryParams": {"a": {"exact": "1"}, "b": {"regex": "\\d+"}, "c": {}},
        }], "route": [dest("a")]}]}));
        let q = &rmatch(&routes[0]).query_parameters;
        assert_eq!(q.len(), 3);
        assert_eq!(q[0].name, "a");
        assert_eq!(
            q[0].query_parameter_match_specifier,
            Some(QueryParameterMatchSpecifier::StringMatch(StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Exact("1".into())),
                ..Default::default()
            }))
        );
        assert_eq!(
            q[2].query_parameter_match_specifier,
            Some(QueryParameterMatchSpecifier::PresentMatch(true))
        );
    }

    #[test]
    fn jwt_claim_headers_become_dynamic_metadata_matchers() {
        let (routes, _) = run(json!({"http": [{"match": [{
            "headers": {"@request.auth.claims.group": {"exact": "admin"}},
            "withoutHeaders": {"@request.auth.claims[org][team]": {"prefix": "x"}},
        }], "route": [dest("a")]}]}));
        let m = rmatch(&routes[0]);
        assert!(m.headers.is_empty());
        assert_eq!(m.dynamic_metadata.len(), 2);
        let keys = |mm: &MetadataMatcher| -> Vec<String> {
            mm.path
                .iter()
                .map(|s| match &s.segment {
                    Some(metadata_matcher::path_segment::Segment::Key(k)) => k.clone(),
                    None => String::new(),
                })
                .collect()
        };
        assert_eq!(m.dynamic_metadata[0].filter, "envoy.filters.http.jwt_authn");
        assert_eq!(keys(&m.dynamic_metadata[0]), ["payload", "group"]);
        assert!(!m.dynamic_metadata[0].invert);
        assert_eq!(keys(&m.dynamic_metadata[1]), ["payload", "org", "team"]);
        assert!(m.dynamic_metadata[1].invert);
        // The value matches the claim or any element of a list claim.
        let Some(value_matcher::MatchPattern::OrMatch(or)) =
            &m.dynamic_metadata[0].value.as_ref().unwrap().match_pattern
        else {
            panic!("or matcher")
        };
        assert_eq!(or.value_matchers.len(), 2);
        assert!(matches!(
            or.value_matchers[0].match_pattern,
            Some(value_matcher::MatchPattern::ListMatch(_))
        ));
    }

    #[test]
    fn a_catch_all_match_ends_the_virtual_service() {
        let (routes, _) = run(json!({"http": [
            {"match": [{"uri": {"prefix": "/"}}, {"uri": {"prefix": "/never"}}], "route": [dest("a")]},
            {"route": [dest("b")]},
        ]}));
        assert_eq!(routes.len(), 1);
        // A prefix `/` with a header condition is not a catch-all.
        let (routes, _) = run(json!({"http": [
            {"match": [{"uri": {"prefix": "/"}, "headers": {"x": {"exact": "1"}}}], "route": [dest("a")]},
            {"route": [dest("b")]},
        ]}));
        assert_eq!(routes.len(), 2);
    }

    #[test]
    fn port_gateways_and_source_are_evaluated_for_the_proxy() {
        let spec = vs(json!({"http": [{"match": [
            {"name": "port-8080", "port": 8080, "uri": {"prefix": "/1"}},
            {"name": "port-80", "port": 80, "uri": {"prefix": "/2"}},
            {"name": "gw-short", "gateways": ["my-gw"], "uri": {"prefix": "/3"}},
            {"name": "gw-mesh", "gateways": ["mesh"], "uri": {"prefix": "/4"}},
            {"name": "labels", "sourceLabels": {"app": "web"}, "uri": {"prefix": "/5"}},
            {"name": "labels-ns", "sourceLabels": {"app": "web"}, "sourceNamespace": "other", "uri": {"prefix": "/6"}},
        ], "route": [dest("a")]}]}));
        let names = |t: &Table| -> Vec<String> {
            t.run_with(&spec, &key(), true).0.into_iter().map(|r| r.name).collect()
        };
        assert_eq!(names(&Table::default()), [".port-80", ".gw-mesh"]);
        let web = Table { labels: BTreeMap::from([("app".into(), "web".into())]), ..Table::default() };
        assert_eq!(names(&web), [".port-80", ".gw-mesh", ".labels"]);
        let gateway = Table { gateways: vec!["default/my-gw".into()], ..Table::default() };
        assert_eq!(names(&gateway), [".port-80", ".gw-short"]);
        // Port 0: the route table serves several ports, so no port is excluded.
        let any_port = Table { port: 0, ..Table::default() };
        assert_eq!(names(&any_port), [".port-8080", ".port-80", ".gw-mesh"]);
    }

    #[test]
    fn stat_prefix_is_set_from_the_match() {
        let (routes, findings) = run(
            json!({"http": [{"match": [{"uri": {"prefix": "/a"}, "statPrefix": "canary"}], "route": [dest("a")]}]}),
        );
        assert!(findings.is_empty());
        assert_eq!(routes[0].stat_prefix, "canary");
    }

    // ===== Destinations =====

    #[test]
    fn single_destination_with_istio_defaults() {
        let (routes, findings) = run(json!({"http": [{"match": [{"uri": {"prefix": "/api"}}], "route": [
            {"destination": {"host": "reviews.default.svc.cluster.local", "subset": "v2", "port": {"number": 9080}}}
        ]}]}));
        assert!(findings.is_empty());
        let r = &routes[0];
        assert_eq!(cluster(r), "outbound|9080|v2|reviews.default.svc.cluster.local");
        let a = action(r);
        // No timeout unless the VirtualService sets one.
        assert_eq!(a.timeout, Some(Duration { seconds: 0, nanos: 0 }));
        #[allow(deprecated)]
        let max_grpc = a.max_grpc_timeout;
        assert_eq!(max_grpc, Some(Duration { seconds: 0, nanos: 0 }));
        // Istio's default retry policy.
        let retry = a.retry_policy.as_ref().expect("default retry policy");
        assert_eq!(retry.num_retries, Some(UInt32Value { value: 2 }));
        assert_eq!(
            retry.retry_on,
            "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
        );
        assert!(retry.retriable_status_codes.is_empty());
        assert_eq!(retry.host_selection_retry_max_attempts, 5);
        assert_eq!(retry.retry_host_predicate.len(), 1);
        assert_eq!(retry.retry_host_predicate[0].name, "envoy.retry_host_predicates.previous_hosts");
        let Some(retry_policy::retry_host_predicate::ConfigType::TypedConfig(any)) =
            &retry.retry_host_predicate[0].config_type
        else {
            panic!("typed config")
        };
        assert_eq!(
            any.type_url,
            "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"
        );
        assert_eq!(r.decorator.as_ref().unwrap().operation, "reviews.default.svc.cluster.local:9080/api*");
        let meta = &r.metadata.as_ref().unwrap().filter_metadata["istio"].fields["config"];
        assert_eq!(
            meta.kind,
            Some(value::Kind::StringValue(
                "/apis/networking.istio.io/v1/namespaces/default/virtual-service/reviews".into()
            ))
        );
    }

    #[test]
    fn weighted_destinations() {
        let (routes, findings) = run(json!({"http": [{"route": [
            {"destination": {"host": "a", "subset": "v1"}, "weight": 75,
             "headers": {"request": {"set": {"x-v": "1", ":authority": "a.internal"}}, "response": {"remove": ["x-debug"]}}},
            {"destination": {"host": "a", "subset": "v2"}, "weight": 25},
            {"destination": {"host": "a", "subset": "v3"}, "weight": 0},
        ]}]}));
        assert!(findings.is_empty(), "{findings:?}");
        let w = weighted(&routes[0]);
        let got: Vec<(&str, u32)> =
            w.clusters.iter().map(|c| (c.name.as_str(), c.weight.unwrap().value)).collect();
        assert_eq!(got, [("outbound|80|v1|a", 75), ("outbound|80|v2|a", 25)]);
        // Envoy sums the weights itself (Istio no longer sets the deprecated total_weight).
        #[allow(deprecated)]
        let total = w.total_weight;
        assert_eq!(total, None);
        let v1 = &w.clusters[0];
        assert_eq!(header_kv(&v1.request_headers_to_add[0]), ("x-v", "1", OVERWRITE));
        assert_eq!(v1.response_headers_to_remove, ["x-debug"]);
        assert_eq!(
            v1.host_rewrite_specifier,
            Some(weighted_cluster::cluster_weight::HostRewriteSpecifier::HostRewriteLiteral(
                "a.internal".into()
            ))
        );
        // Several clusters: the decorator names the VirtualService.
        assert_eq!(routes[0].decorator.as_ref().unwrap().operation, "reviews:80/*");
    }

    #[test]
    fn all_zero_weights_drop_the_route() {
        let (routes, findings) = run(json!({"http": [
            {"match": [{"uri": {"prefix": "/a"}}],
             "route": [{"destination": {"host": "a"}, "weight": 0}, {"destination": {"host": "b"}, "weight": 0}]},
            {"route": [dest("c")]},
        ]}));
        assert_eq!(routes.len(), 1);
        assert_eq!(cluster(&routes[0]), "outbound|80||c");
        assert_eq!(paths(&findings, Severity::Dropped), ["spec.http[0].route"]);
    }

    #[test]
    fn unknown_destination_host_drops_the_route() {
        let (routes, findings) = run(json!({"http": [
            {"match": [{"uri": {"prefix": "/a"}}, {"uri": {"prefix": "/b"}}], "route": [dest("unknown")]},
            {"route": [dest("c")]},
        ]}));
        assert_eq!(routes.len(), 1);
        // One finding for the HTTP route, not one per match.
        assert_eq!(paths(&findings, Severity::Dropped), ["spec.http[0].route[0].destination.host"]);
        assert!(findings[0].message.contains("\"unknown\""), "{}", findings[0].message);
    }

    // ===== Redirects and direct responses =====

    fn redirect(r: &Route) -> &RedirectAction {
        match &r.action {
            Some(route::Action::Redirect(a)) => a,
            other => panic!("not a redirect: {other:?}"),
        }
    }

    #[test]
    fn redirects() {
        let (routes, findings) = run(json!({"http": [
            {"match": [{"uri": {"exact": "/a"}}], "redirect": {"uri": "/new", "authority": "new.example.com"}},
            {"match": [{"uri": {"exact": "/b"}}], "redirect": {"uri": "/b2", "scheme": "https", "port": 8443, "redirectCode": 308}},
            {"match": [{"uri": {"exact": "/c"}}], "redirect": {"derivePort": "FROM_REQUEST_PORT", "redirectCode": 302}},
            {"match": [{"uri": {"exact": "/d"}}], "redirect": {"scheme": "https", "port": 443, "redirectCode": 307}},
            {"match": [{"uri": {"prefix": "/e"}}], "redirect": {"prefixRewrite": "/f", "redirectCode": 303}},
        ]}));
        assert!(findings.is_empty(), "{findings:?}");
        use redirect_action::{
            PathRewriteSpecifier as P, RedirectResponseCode as C, SchemeRewriteSpecifier as S,
        };
        let a = redirect(&routes[0]);
        assert_eq!(a.host_redirect, "new.example.com");
        assert_eq!(a.path_rewrite_specifier, Some(P::PathRedirect("/new".into())));
        assert_eq!(a.response_code, C::MovedPermanently as i32);
        assert_eq!(a.port_redirect, 0);
        let b = redirect(&routes[1]);
        assert_eq!(b.scheme_rewrite_specifier, Some(S::SchemeRedirect("https".into())));
        assert_eq!((b.port_redirect, b.response_code), (8443, C::PermanentRedirect as i32));
        // FROM_REQUEST_PORT is the listener's port; 80 with http is left implicit.
        let c = redirect(&routes[2]);
        assert_eq!((c.port_redirect, c.response_code), (0, C::Found as i32));
        let d = redirect(&routes[3]);
        assert_eq!((d.port_redirect, d.response_code), (0, C::TemporaryRedirect as i32));
        let e = redirect(&routes[4]);
        assert_eq!(e.path_rewrite_specifier, Some(P::PrefixRewrite("/f".into())));
        assert_eq!(e.response_code, C::SeeOther as i32);

        let on_8080 = Table { port: 8080, ..Table::default() };
        let spec = vs(json!({"http": [{"redirect": {"derivePort": "FROM_REQUEST_PORT"}}]}));
        let (routes, _) = on_8080.run_with(&spec, &key(), true);
        assert_eq!(redirect(&routes[0]).port_redirect, 8080);
    }

    #[test]
    fn unsupported_redirect_code_drops_the_route() {
        let (routes, findings) = run(json!({"http": [
            {"match": [{"uri": {"exact": "/a"}}], "redirect": {"uri": "/b", "redirectCode": 305}},
            {"route": [dest("c")]},
        ]}));
        assert_eq!(routes.len(), 1);
        assert_eq!(paths(&findings, Severity::Dropped), ["spec.http[0].redirect.redirectCode"]);
    }

    #[test]
    fn redirect_reports_the_fields_it_ignores() {
        let (routes, findings) = run(json!({"http": [{
            "redirect": {"uri": "/b"}, "timeout": "1s", "retries": {"attempts": 3}, "mirror": {"host": "m"},
            "headers": {"request": {"set": {"host": "x"}}},
        }]}));
        assert_eq!(routes.len(), 1);
        assert_eq!(
            paths(&findings, Severity::Unsupported),
            [
                "spec.http[0].timeout",
                "spec.http[0].retries",
                "spec.http[0].mirror",
                "spec.http[0].headers.request.set.host"
            ]
        );
    }

    #[test]
    fn direct_responses() {
        let (routes, _) = run(json!({"http": [
            {"match": [{"uri": {"exact": "/gone"}}], "directResponse": {"status": 410, "body": {"string": "gone"}}},
            {"match": [{"uri": {"exact": "/bin"}}], "directResponse": {"status": 200, "body": {"bytes": "aGk="}}},
            {"match": [{"uri": {"exact": "/empty"}}], "directResponse": {"status": 204}},
        ]}));
        let direct = |r: &Route| match &r.action {
            Some(route::Action::DirectResponse(d)) => d.clone(),
            other => panic!("not a direct response: {other:?}"),
        };
        let gone = direct(&routes[0]);
        assert_eq!(gone.status, 410);
        assert_eq!(gone.body.unwrap().specifier, Some(data_source::Specifier::InlineString("gone".into())));
        assert_eq!(
            direct(&routes[1]).body.unwrap().specifier,
            Some(data_source::Specifier::InlineBytes(b"hi".to_vec()))
        );
        assert_eq!(direct(&routes[2]).body, None);
        assert_eq!(routes[0].decorator.as_ref().unwrap().operation, "reviews:80/gone");
    }

    // ===== Rewrites, timeouts, retries =====

    #[test]
    fn rewrites() {
        let (routes, _) = run(json!({"http": [
            {"match": [{"uri": {"prefix": "/a"}}], "rewrite": {"uri": "/b", "authority": "b.internal"}, "route": [dest("a")]},
            {"match": [{"uri": {"prefix": "/c"}}], "rewrite": {"uriRegexRewrite": {"match": "^/c/(.*)$", "rewrite": "/\\1"}},
             "route": [dest("a")]},
            // A request authority set in headers rewrites the host; rewrite.authority wins over it.
            {"match": [{"uri": {"prefix": "/d"}}], "headers": {"request": {"set": {":authority": "hdr.internal"}}},
             "route": [dest("a")]},
            {"match": [{"uri": {"prefix": "/e"}}], "headers": {"request": {"add": {"Host": "hdr.internal"}}},
             "rewrite": {"authority": "rw.internal"}, "route": [dest("a")]},
            // The destination's authority applies only when the route sets none.
            {"match": [{"uri": {"prefix": "/f"}}], "rewrite": {"authority": "rw.internal"},
             "route": [{"destination": {"host": "a"}, "headers": {"request": {"set": {"host": "dst.internal"}}}}]},
            {"match": [{"uri": {"prefix": "/g"}}],
             "route": [{"destination": {"host": "a"}, "headers": {"request": {"set": {"host": "dst.internal"}}}}]},
        ]}));
        let host = |r: &Route| match &action(r).host_rewrite_specifier {
            Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(h)) => h.clone(),
            _ => String::new(),
        };
        assert_eq!(action(&routes[0]).prefix_rewrite, "/b");
        assert_eq!(host(&routes[0]), "b.internal");
        let rr = action(&routes[1]).regex_rewrite.as_ref().expect("regex rewrite");
        assert_eq!(rr.pattern.as_ref().unwrap().regex, "^/c/(.*)$");
        assert_eq!(rr.substitution, "/\\1");
        assert_eq!(action(&routes[1]).prefix_rewrite, "");
        assert_eq!(host(&routes[2]), "hdr.internal");
        assert!(routes[2].request_headers_to_add.is_empty());
        assert_eq!(host(&routes[3]), "rw.internal");
        assert_eq!(host(&routes[4]), "rw.internal");
        assert_eq!(host(&routes[5]), "dst.internal");
    }

    #[test]
    fn timeout() {
        let (routes, _) = run(json!({"http": [{"timeout": "1.5s", "route": [dest("a")]}]}));
        let a = action(&routes[0]);
        assert_eq!(a.timeout, Some(Duration { seconds: 1, nanos: 500_000_000 }));
        #[allow(deprecated)]
        let max_grpc = a.max_grpc_timeout;
        assert_eq!(max_grpc, Some(Duration { seconds: 1, nanos: 500_000_000 }));
    }

    fn retry_of(retries: serde_json::Value) -> Option<RetryPolicy> {
        let (routes, _) = run(json!({"http": [{"retries": retries, "route": [dest("a")]}]}));
        action(&routes[0]).retry_policy.clone()
    }

    #[test]
    fn retries() {
        let r = retry_of(
            json!({"attempts": 3, "perTryTimeout": "2s", "retryOn": "gateway-error,connect-failure,503",
                                "retryRemoteLocalities": true, "backoff": "0.1s"}),
        )
        .unwrap();
        assert_eq!(r.num_retries, Some(UInt32Value { value: 3 }));
        assert_eq!(r.per_try_timeout, Some(Duration { seconds: 2, nanos: 0 }));
        assert_eq!(r.retry_on, "gateway-error,connect-failure,retriable-status-codes");
        assert_eq!(r.retriable_status_codes, [503]);
        assert_eq!(r.host_selection_retry_max_attempts, 5);
        let priority = r.retry_priority.as_ref().expect("retry priority");
        assert_eq!(priority.name, "envoy.retry_priorities.previous_priorities");
        let Some(retry_policy::retry_priority::ConfigType::TypedConfig(any)) = &priority.config_type else {
            panic!()
        };
        use prost::Message;
        assert_eq!(PreviousPrioritiesConfig::decode(any.value.as_slice()).unwrap().update_frequency, 2);
        assert_eq!(
            r.retry_back_off.unwrap().base_interval,
            Some(Duration { seconds: 0, nanos: 100_000_000 })
        );

        // Istio's parseRetryOn examples.
        let r = retry_of(json!({"attempts": 2, "retryOn": "some,fake,5xx,404,conditions,503"})).unwrap();
        assert_eq!(r.retry_on, "some,fake,5xx,conditions,retriable-status-codes");
        assert_eq!(r.retriable_status_codes, [404, 503]);
        let r =
            retry_of(json!({"attempts": 2, "retryOn": "gateway-error,retriable-status-codes,503"})).unwrap();
        assert_eq!(r.retry_on, "gateway-error,retriable-status-codes");
        let r = retry_of(json!({"attempts": 2, "retryOn": "some,fake,conditions,1000"})).unwrap();
        assert_eq!(r.retry_on, "some,fake,conditions,1000");
        assert!(r.retriable_status_codes.is_empty());
        // No retryOn: the default conditions.
        let r = retry_of(json!({"attempts": 5})).unwrap();
        assert_eq!(r.retry_on, DEFAULT_RETRY_ON);
        assert_eq!(r.retry_host_predicate.len(), 1);
        let r = retry_of(json!({"attempts": 5, "retryIgnorePreviousHosts": false})).unwrap();
        assert!(r.retry_host_predicate.is_empty());
        // attempts 0 disables retries.
        assert_eq!(retry_of(json!({"attempts": 0, "retryOn": "5xx"})), None);
    }

    // ===== Fault, mirror, CORS, headers =====

    #[test]
    fn fault_injection() {
        let (routes, findings) = run(json!({"http": [{"fault": {
            "delay": {"fixedDelay": "5s", "percentage": {"value": 0.5}},
            "abort": {"httpStatus": 503, "percentage": {"value": 10}},
        }, "route": [dest("a")]}]}));
        assert!(findings.is_empty());
        let f = fault(&routes[0]);
        let delay = f.delay.unwrap();
        assert_eq!(
            delay.percentage,
            Some(FractionalPercent { numerator: 5000, denominator: DenominatorType::Million as i32 })
        );
        assert_eq!(
            delay.fault_delay_secifier,
            Some(FaultDelaySecifier::FixedDelay(Duration { seconds: 5, nanos: 0 }))
        );
        let abort = f.abort.unwrap();
        assert_eq!(abort.error_type, Some(fault_abort::ErrorType::HttpStatus(503)));
        assert_eq!(
            abort.percentage,
            Some(FractionalPercent { numerator: 100_000, denominator: DenominatorType::Million as i32 })
        );

        let (routes, _) = run(json!({"http": [{"fault": {
            "delay": {"fixedDelay": "1s", "percent": 10},
            "abort": {"grpcStatus": "UNAVAILABLE"},
        }, "route": [dest("a")]}]}));
        let f = fault(&routes[0]);
        assert_eq!(f.delay.unwrap().percentage, Some(FractionalPercent { numerator: 10, denominator: 0 }));
        let abort = f.abort.unwrap();
        assert_eq!(abort.error_type, Some(fault_abort::ErrorType::GrpcStatus(14)));
        assert_eq!(abort.percentage, None);
    }

    #[test]
    fn untranslatable_faults_are_reported() {
        let (routes, findings) = run(json!({"http": [{"fault": {
            "delay": {"exponentialDelay": "1s"},
            "abort": {"http2Error": "CANCEL"},
        }, "route": [dest("a")]}]}));
        assert!(!routes[0].typed_per_filter_config.contains_key(FAULT_FILTER));
        assert_eq!(
            paths(&findings, Severity::Unsupported),
            ["spec.http[0].fault.delay.exponentialDelay", "spec.http[0].fault.abort.http2Error"]
        );
    }

    #[test]
    fn mirrors() {
        let (routes, findings) = run(json!({"http": [
            {"match": [{"uri": {"prefix": "/a"}}], "mirror": {"host": "m"}, "route": [dest("a")]},
            {"match": [{"uri": {"prefix": "/b"}}], "mirror": {"host": "m", "subset": "v1"},
             "mirrorPercentage": {"value": 25.5}, "route": [dest("a")]},
            {"match": [{"uri": {"prefix": "/c"}}], "mirror": {"host": "m"}, "mirrorPercentage": {"value": 0}, "route": [dest("a")]},
            {"match": [{"uri": {"prefix": "/d"}}], "mirror": {"host": "m"}, "mirrorPercent": 40, "route": [dest("a")]},
            {"match": [{"uri": {"prefix": "/e"}}], "route": [dest("a")], "mirrors": [
                {"destination": {"host": "m1"}}, {"destination": {"host": "m2"}, "percentage": {"value": 1}},
                {"destination": {"host": "unknown"}},
            ]},
        ]}));
        let mirrors = |r: &Route| action(r).request_mirror_policies.clone();
        let a = &mirrors(&routes[0])[0];
        assert_eq!(a.cluster, "outbound|80||m");
        assert_eq!(a.runtime_fraction.as_ref().unwrap().default_value, Some(hundredths(100)));
        assert_eq!(a.trace_sampled, Some(BoolValue { value: false }));
        assert!(a.disable_shadow_host_suffix_append);
        let b = &mirrors(&routes[1])[0];
        assert_eq!(b.cluster, "outbound|80|v1|m");
        assert_eq!(
            b.runtime_fraction.as_ref().unwrap().default_value,
            Some(FractionalPercent { numerator: 255_000, denominator: DenominatorType::Million as i32 })
        );
        assert!(mirrors(&routes[2]).is_empty());
        assert_eq!(
            mirrors(&routes[3])[0].runtime_fraction.as_ref().unwrap().default_value,
            Some(hundredths(40))
        );
        let e = mirrors(&routes[4]);
        assert_eq!(
            e.iter().map(|m| m.cluster.as_str()).collect::<Vec<_>>(),
            ["outbound|80||m1", "outbound|80||m2"]
        );
        // An unknown mirror is left out; the route stays.
        assert_eq!(paths(&findings, Severity::Dropped), ["spec.http[4].mirrors[2].destination.host"]);
    }

    #[test]
    fn cors_policy() {
        let (routes, _) = run(json!({"http": [
            {"match": [{"uri": {"prefix": "/a"}}], "route": [dest("a")], "corsPolicy": {
                "allowOrigins": [{"exact": "https://example.com"}, {"regex": ".*\\.example\\.org"}],
                "allowMethods": ["GET", "POST"], "allowHeaders": ["x-foo", "x-bar"], "exposeHeaders": ["x-baz"],
                "maxAge": "86400s", "allowCredentials": true, "unmatchedPreflights": "IGNORE",
            }},
            {"match": [{"uri": {"prefix": "/b"}}], "route": [dest("a")], "corsPolicy": {"allowOrigin": ["*"]}},
        ]}));
        let c = cors(&routes[0]);
        assert_eq!(c.allow_origin_string_match.len(), 2);
        assert_eq!(
            c.allow_origin_string_match[0].match_pattern,
            Some(string_matcher::MatchPattern::Exact("https://example.com".into()))
        );
        assert_eq!(c.allow_methods, "GET,POST");
        assert_eq!(c.allow_headers, "x-foo,x-bar");
        assert_eq!(c.expose_headers, "x-baz");
        assert_eq!(c.max_age, "86400");
        assert_eq!(c.allow_credentials, Some(BoolValue { value: true }));
        assert_eq!(c.forward_not_matching_preflights, Some(BoolValue { value: false }));
        assert_eq!(c.filter_enabled.unwrap().default_value, Some(hundredths(100)));
        let c = cors(&routes[1]);
        assert_eq!(
            c.allow_origin_string_match[0].match_pattern,
            Some(string_matcher::MatchPattern::Exact("*".into()))
        );
        assert_eq!(c.forward_not_matching_preflights, Some(BoolValue { value: true }));
        assert_eq!(c.allow_credentials, None);
        assert_eq!(c.max_age, "");
    }

    #[test]
    fn header_operations_follow_istio() {
        let (routes, findings) = run(json!({"http": [{
            "headers": {
                "request": {"set": {"x-b": "2", "x-a": "1", ":path": "/no"}, "add": {"x-c": "3"}, "remove": ["x-d", "host"]},
                "response": {"set": {"x-e": "5"}, "add": {"x-f": "6"}, "remove": ["x-g"]},
            },
            "route": [{"destination": {"host": "a"}, "headers": {"request": {"add": {"x-h": "8"}}, "response": {"remove": ["x-i"]}}}],
        }]}));
        let r = &routes[0];
        let req: Vec<_> = r.request_headers_to_add.iter().map(header_kv).collect();
        assert_eq!(
            req,
            [("x-a", "1", OVERWRITE), ("x-b", "2", OVERWRITE), ("x-c", "3", APPEND), ("x-h", "8", APPEND)]
        );
        assert_eq!(r.request_headers_to_remove, ["x-d"]);
        let resp: Vec<_> = r.response_headers_to_add.iter().map(header_kv).collect();
        assert_eq!(resp, [("x-e", "5", OVERWRITE), ("x-f", "6", APPEND)]);
        assert_eq!(r.response_headers_to_remove, ["x-g", "x-i"]);
        assert_eq!(
            paths(&findings, Severity::Unsupported),
            ["spec.http[0].headers.request.set.:path", "spec.http[0].headers.request.remove[1]"]
        );
    }

    #[test]
    fn delegate_is_reported_unsupported() {
        let (routes, findings) = run(json!({"http": [
            {"match": [{"uri": {"prefix": "/team"}}], "delegate": {"name": "team-routes", "namespace": "team"}},
            {"route": [dest("a")]},
        ]}));
        assert_eq!(routes.len(), 1);
        assert_eq!(paths(&findings, Severity::Unsupported), ["spec.http[0].delegate"]);
        assert_eq!(findings[0].config, Some(key()));
    }

    // ===== Pre-send check =====

    #[test]
    fn a_bad_regex_drops_exactly_that_route() {
        let spec = json!({"http": [
            {"name": "r", "match": [{"name": "bad", "uri": {"regex": "/foo("}}, {"name": "good", "uri": {"regex": "/foo"}}],
             "route": [dest("a")]},
            {"route": [dest("b")]},
        ]});
        let (routes, findings) = run(spec.clone());
        assert_eq!(routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["r.good", ""]);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::Dropped);
        assert_eq!(f.config, Some(key()));
        assert_eq!(f.path, "spec.http[0].match[0].uri.regex");
        assert_eq!(f.resource, "route r.bad");
        assert!(f.message.contains("missing closing )"), "{}", f.message);

        // Envoy takes what is left, and would have rejected the whole table with the bad route in it.
        envoy_oracle::validate(routes).unwrap();
        let (unchecked, _) = Table::default().run_with(&vs(spec), &key(), false);
        let err = envoy_oracle::validate(unchecked).unwrap_err();
        assert!(err.contains("missing )"), "{err}");
    }

    #[test]
    fn route_level_problems_drop_every_route_of_that_http_route_only() {
        let (routes, findings) = run(json!({"http": [
            {"match": [{"uri": {"prefix": "/a"}}, {"uri": {"prefix": "/b"}}], "route": [dest("a")],
             "corsPolicy": {"allowOrigins": [{"regex": "*.example.com"}]}},
            {"match": [{"headers": {"x": {"regex": "(unclosed"}}}], "route": [dest("b")]},
            {"match": [{"uri": {"prefix": "/c"}}], "route": [dest("c")],
             "headers": {"request": {"set": {"x-trace": "%REQ(x-id)"}}}},
            {"route": [dest("d")]},
        ]}));
        assert_eq!(routes.len(), 1);
        assert_eq!(cluster(&routes[0]), "outbound|80||d");
        assert_eq!(
            paths(&findings, Severity::Dropped),
            [
                "spec.http[0].corsPolicy.allowOrigins[0].regex",
                "spec.http[0].corsPolicy.allowOrigins[0].regex",
                "spec.http[1].match[0].headers.x.regex",
                "spec.http[2].headers.request.set.x-trace",
            ]
        );
        envoy_oracle::validate(routes).unwrap();
    }

    #[test]
    fn every_feature_together_validates_in_envoy() {
        let (routes, findings) = run(json!({"http": [
            {"name": "canary",
             "match": [{"name": "jason", "uri": {"prefix": "/api/v1"}, "ignoreUriCase": true,
                        "headers": {"end-user": {"exact": "jason"}, "x-debug": {}, "cookie": {"regex": "^(.*?;)?(user=dev-123)(;.*)?"},
                                    "@request.auth.claims.group": {"exact": "admin"}},
                        "withoutHeaders": {"x-skip": {"prefix": "1"}, "x-gone": {}},
                        "queryParams": {"q": {"regex": "\\d+"}, "p": {"exact": "1"}, "flag": {}},
                        "method": {"exact": "GET"}, "authority": {"prefix": "api."}, "scheme": {"exact": "https"},
                        "statPrefix": "canary"}],
             "route": [
                {"destination": {"host": "reviews", "subset": "v2", "port": {"number": 9080}}, "weight": 80,
                 "headers": {"request": {"set": {"x-env": "canary", "host": "reviews.internal"}, "add": {"x-trace": "%REQ(x-request-id)%"}, "remove": ["x-internal"]},
                             "response": {"set": {"x-served-by": "v2"}}}},
                {"destination": {"host": "reviews", "subset": "v1"}, "weight": 20},
             ],
             "headers": {"response": {"add": {"x-route": "canary"}, "remove": ["server"]}},
             "rewrite": {"authority": "reviews.internal", "uriRegexRewrite": {"match": "^/api/(.*)$", "rewrite": "/\\1"}},
             "timeout": "1.5s",
             "retries": {"attempts": 3, "perTryTimeout": "2s", "retryOn": "gateway-error,connect-failure,503",
                         "retryRemoteLocalities": true, "retryIgnorePreviousHosts": false, "backoff": "0.1s"},
             "fault": {"delay": {"fixedDelay": "5s", "percentage": {"value": 0.5}}, "abort": {"grpcStatus": "UNAVAILABLE", "percentage": {"value": 10}}},
             "mirror": {"host": "reviews-shadow"}, "mirrorPercentage": {"value": 25.5},
             "mirrors": [{"destination": {"host": "audit"}, "percentage": {"value": 1}}],
             "corsPolicy": {"allowOrigins": [{"exact": "https://example.com"}, {"regex": ".*\\.example\\.org"}, {"prefix": "https://"}],
                            "allowMethods": ["GET", "POST"], "allowHeaders": ["x-foo"], "exposeHeaders": ["x-bar"],
                            "maxAge": "86400s", "allowCredentials": false, "unmatchedPreflights": "IGNORE"}},
            {"match": [{"uri": {"exact": "/old"}}], "redirect": {"uri": "/new", "authority": "new.example.com", "derivePort": "FROM_REQUEST_PORT", "scheme": "https", "redirectCode": 308}},
            {"match": [{"uri": {"prefix": "/shop"}}], "redirect": {"prefixRewrite": "/store", "port": 8443}},
            {"match": [{"uri": {"prefix": "/gone"}}], "directResponse": {"status": 410, "body": {"string": "gone"}},
             "fault": {"abort": {"httpStatus": 503}}},
            {"match": [{"uri": {"prefix": "/bin"}}], "directResponse": {"status": 200, "body": {"bytes": "aGk="}}},
            {"match": [{"uri": {"prefix": "/noretry"}}], "retries": {"attempts": 0}, "rewrite": {"uri": "/"}, "route": [dest("ratings")]},
            {"route": [dest("reviews")]},
        ]}));
        assert_eq!(paths(&findings, Severity::Dropped), Vec::<&str>::new(), "{findings:?}");
        assert_eq!(routes.len(), 7);
        envoy_oracle::validate(routes).unwrap();
    }

    #[test]
    fn odd_input_never_panics() {
        let weird = [
            "",
            "\u{0}",
            "é",
            "@request.auth.claims",
            "@request.auth.claims[]",
            "@REQUEST.AUTH.CLAIMS.",
            "a|b|c",
            "%",
        ];
        for w in weird {
            let (_, _) = run(json!({"hosts": [w], "gateways": [w], "http": [{
                "name": w,
                "match": [{"name": w, "uri": {"regex": w}, "headers": {w: {"regex": w}}, "withoutHeaders": {w: {}},
                           "queryParams": {w: {"prefix": w}}, "gateways": [w, "mesh"], "sourceNamespace": w}],
                "route": [{"destination": {"host": w, "subset": w}, "weight": -1,
                           "headers": {"request": {"set": {w: w}, "remove": [w]}}},
                          {"destination": {"host": w}, "weight": 2}],
                "rewrite": {"uri": w, "authority": w, "uriRegexRewrite": {"match": w, "rewrite": w}},
                "retries": {"attempts": -1, "retryOn": w},
                "fault": {"abort": {"grpcStatus": w}, "delay": {"percent": -5, "fixedDelay": "-1s"}},
                "corsPolicy": {"allowOrigins": [{}, {"regex": w}], "maxAge": "-3s"},
                "mirrorPercentage": {"value": -1.0e308},
                "timeout": "-10s",
            }]}));
        }
    }
}
