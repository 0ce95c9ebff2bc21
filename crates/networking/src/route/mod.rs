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
//! VirtualService by the route-table builder; reported as unsupported), stateful sessions (they
//! come from services), and Gateway-API / Ingress route semantics. Each destination whose
//! DestinationRule hashes consistently ([`RouteContext::hash_for`]) adds a `hash_policy` ([`hash`]). Every field of an HTTP route that is set but has no effect in the output is reported as
//! a [`Severity::Unsupported`] finding; every Envoy route that Envoy would reject is left out and
//! reported as a [`Severity::Dropped`] finding (see [`crate::check`]).

mod actions;
mod cors;
mod fault;
mod hash;
mod headers;
mod matches;
mod retry;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use api::networking::{
    destination_rule::load_balancer_settings::ConsistentHashLb,
    virtual_service::{Destination, HttpMatchRequest, HttpRoute, StringMatch, VirtualService},
};
use envoy_types::{
    pb::{
        envoy::config::{
            core::v3::Metadata,
            route::v3::{Decorator, Route, RouteMatch, route, route_action, route_match::PathSpecifier},
        },
        google::protobuf::{Struct, Value, value},
    },
    util::pack_any,
};
use model::{ConfigKey, Finding, Severity};

use crate::check;
use actions::{direct_response_action, redirect_action, route_destination};
use cors::cors_config;
use fault::fault_config;
pub use hash::{destination_hash, hash_policy, service_hash};
use headers::header_operations;
use matches::{MatchKind, is_catch_all, kind_of, match_applies, translate_match};
pub use retry::{default_retry_policy, retry_policy};

/// Name of the HTTP fault filter; per-route fault settings are keyed by it in `typed_per_filter_config`.
pub const FAULT_FILTER: &str = "envoy.filters.http.fault";
/// Name of the HTTP CORS filter; per-route CORS policies are keyed by it in `typed_per_filter_config`.
pub const CORS_FILTER: &str = "envoy.filters.http.cors";
/// `retry_on` of Istio's default retry policy (used when an HTTP route sets no `retries`).
pub const DEFAULT_RETRY_ON: &str =
    "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes";
/// Number of retries of Istio's default retry policy.
pub const DEFAULT_RETRY_ATTEMPTS: u32 = 2;

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
    /// Resolves a destination of the VirtualService to the Envoy cluster it goes to
    /// (`outbound|PORT|SUBSET|FQDN`, Istio's `GetDestinationCluster`; see [`DestinationCluster`]).
    pub cluster_for: &'a dyn Fn(&Destination) -> DestinationCluster,
    /// The `consistentHash` of a destination's DestinationRule as Istio picks it for routes
    /// ([`destination_hash`]); each hashed destination adds a route `hash_policy`. `None`: no hashing.
    pub hash_for: Option<&'a HashFor<'a>>,
}

/// Looks up the `consistentHash` that applies to a route destination ([`RouteContext::hash_for`]).
pub type HashFor<'f> = dyn Fn(&Destination) -> Option<ConsistentHashLb> + 'f;

/// Where a route's destination goes (Istio's `route.GetDestinationCluster`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DestinationCluster {
    /// The cluster of a service this route table knows.
    Service(String),
    /// A host no service of this route table defines (for a sidecar: none with the table's port). Istio keeps
    /// the route to `outbound|PORT|SUBSET|HOST` all the same; no such cluster exists, so Envoy answers 503.
    Unknown(String),
    /// An unknown host and no port to name its cluster with (a route table serving several ports).
    Unnamed,
}

/// The port of the cluster a destination goes to (Istio's `GetDestinationCluster`): the destination's own
/// port (0: none), else the port of the service when this route table knows it and it has exactly one
/// (`only_service_port`), else the route table's `listener_port`. `None` when that is 0 (a table serving
/// several ports).
pub fn destination_port(
    destination_port: u32,
    only_service_port: Option<u32>,
    listener_port: u32,
) -> Option<u32> {
    if destination_port != 0 {
        return Some(destination_port);
    }
    only_service_port.or((listener_port != 0).then_some(listener_port))
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
    let config = config_path(key);
    let fields =
        HashMap::from([("config".to_owned(), Value { kind: Some(value::Kind::StringValue(config)) })]);
    Metadata {
        filter_metadata: HashMap::from([(ISTIO_METADATA_KEY.to_owned(), Struct { fields })]),
        ..Default::default()
    }
}

/// The `istio.config` metadata value of `key`:
/// `/apis/<group>/<version>/namespaces/<ns>/<kebab-kind>/<name>`.
pub(crate) fn config_path(key: &ConfigKey) -> String {
    let schema = key.kind.schema();
    let mut kebab = String::new();
    for (n, c) in key.kind.as_str().chars().enumerate() {
        if c.is_ascii_uppercase() && n > 0 {
            kebab.push('-');
        }
        kebab.push(c.to_ascii_lowercase());
    }
    format!("/apis/{}/{}/namespaces/{}/{kebab}/{}", schema.group, schema.version, key.namespace, key.name)
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
