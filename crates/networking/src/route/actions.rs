//! Route actions: redirects, direct responses, mirrors and destinations (single and weighted
//! clusters, timeouts, rewrites).

use api::networking::virtual_service::{
    Destination, HttpDirectResponse, HttpMirrorPolicy, HttpRedirect, HttpRoute, HttpRouteDestination,
    http_redirect::RedirectPortSelection,
};
use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{DataSource, RuntimeFractionalPercent, data_source},
            route::v3::{
                DirectResponseAction, RedirectAction, RouteAction, WeightedCluster, redirect_action,
                route_action, weighted_cluster,
            },
        },
        r#type::{
            matcher::v3::RegexMatchAndSubstitute,
            v3::{FractionalPercent, fractional_percent::DenominatorType},
        },
    },
    google::protobuf::{BoolValue, Duration, UInt32Value},
};
use model::{ConfigKey, Finding, Severity};

use super::{
    DestinationCluster, RouteContext, Template, finding,
    hash::hash_policy,
    headers::{extend, header_operations},
    matches::regex_matcher,
    retry::retry_policy,
};

/// Istio's `ApplyRedirect`; `Err` for a redirect code Envoy has no equivalent for.
pub(super) fn redirect_action(
    r: &HttpRedirect,
    listener_port: u32,
    is_tls: bool,
) -> Result<RedirectAction, String> {
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
pub(super) fn direct_response_action(d: &HttpDirectResponse) -> DirectResponseAction {
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

pub(super) fn envoy_duration(d: &api::wkt::Duration) -> Duration {
    Duration { seconds: d.seconds, nanos: d.nanos }
}

pub(super) fn hundredths(numerator: u32) -> FractionalPercent {
    FractionalPercent { numerator, denominator: DenominatorType::Hundred as i32 }
}

/// Istio's `translatePercentToFractionalPercent`: a 0–100 double as parts per million.
pub(super) fn millionths(percent: f64) -> FractionalPercent {
    FractionalPercent { numerator: (percent * 10_000.0) as u32, denominator: DenominatorType::Million as i32 }
}

/// Istio's `MirrorPercent`: `mirrorPercentage`, else the deprecated `mirrorPercent`, else 100%; `None`
/// (no mirroring) for an explicit 0.
pub(super) fn mirror_percent(http: &HttpRoute) -> Option<RuntimeFractionalPercent> {
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

/// The cluster of a destination, or a finding (and `None`) when there is none.
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
    resolve_cluster(dest, at, "route", ctx, key, resource, findings)
}

/// The cluster `dest` (at field path `at`) goes to, as Istio's `GetDestinationCluster` names it. A host no
/// service of this route table defines keeps its route, as in Istio, with a warning: the cluster it names
/// does not exist, so Envoy answers 503 (a mirror's copies fail). Without a port to name the cluster with,
/// the `what` (route or mirror) is left out with a finding.
fn resolve_cluster(
    dest: &Destination,
    at: &str,
    what: &str,
    ctx: &RouteContext<'_>,
    key: &ConfigKey,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> Option<String> {
    match (ctx.cluster_for)(dest) {
        DestinationCluster::Service(cluster) => Some(cluster),
        DestinationCluster::Unknown(cluster) => {
            findings.push(finding(
                Severity::Warning,
                key,
                format!("{at}.host"),
                resource,
                format!(
                    "unknown destination host {:?} (no service defines it on this port); the {what} goes to \
                     {cluster}, which does not exist: Envoy answers 503, as with Istio",
                    dest.host
                ),
            ));
            Some(cluster)
        }
        DestinationCluster::Unnamed => {
            findings.push(finding(
                Severity::Dropped,
                key,
                format!("{at}.host"),
                resource,
                format!(
                    "unknown destination host {:?} (no service defines it) and no port to name its cluster \
                     with; the {what} is left out",
                    dest.host
                ),
            ));
            None
        }
    }
}

/// Istio's `applyHTTPRouteDestination`: timeout, rewrite, host rewrite, mirrors, destination(s) and
/// retry policy.
#[allow(clippy::too_many_arguments)]
pub(super) fn route_destination(
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
        if let Some(fraction) = mirror_percent(http)
            && let Some(cluster) =
                resolve_cluster(mirror, &format!("{at}.mirror"), "mirror", ctx, key, resource, findings)
        {
            t.prov.add(|| {
                (
                    format!("route.request_mirror_policies[{}]", action.request_mirror_policies.len()),
                    format!("{at}.mirror"),
                )
            });
            action.request_mirror_policies.push(mirror_policy(cluster, fraction));
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
        if let Some(cluster) =
            resolve_cluster(dest, &format!("{here}.destination"), "mirror", ctx, key, resource, findings)
        {
            t.prov.add(|| {
                (format!("route.request_mirror_policies[{}]", action.request_mirror_policies.len()), here)
            });
            action.request_mirror_policies.push(mirror_policy(cluster, fraction));
        }
    }

    // As Istio: only a single hashed destination keeps retries on the same host.
    let mut consistent_hash = false;
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
            single_destination(dst, &format!("{at}.route[0]"), &mut action, t, key, ctx, resource, findings)?;
            consistent_hash = add_hash_policy(dst, &format!("{at}.route[0]"), &mut action, t, ctx);
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
                add_hash_policy(dst, &here, &mut action, t, ctx);
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

    action.retry_policy = retry_policy(http.retries.as_ref(), consistent_hash);
    if http.retries.is_some() {
        t.prov.add(|| ("route.retry_policy".to_owned(), format!("{at}.retries")));
    }
    Some(action)
}

/// Appends the hash policy of `dst`'s DestinationRule to the route (Istio's `LookupHash` in
/// `processDestination` / `processWeightedDestination`); `true` if the rule hashes consistently, with a
/// hash key or not (Istio then drops the previous-hosts retry predicate all the same).
fn add_hash_policy(
    dst: &HttpRouteDestination,
    at: &str,
    action: &mut RouteAction,
    t: &mut Template,
    ctx: &RouteContext<'_>,
) -> bool {
    let (Some(hash_for), Some(d)) = (ctx.hash_for, dst.destination.as_ref()) else { return false };
    let Some(hash) = hash_for(d) else { return false };
    if let Some(policy) = hash_policy(&hash) {
        t.prov.add(|| {
            (format!("route.hash_policy[{}]", action.hash_policy.len()), format!("{at}.destination"))
        });
        action.hash_policy.push(policy);
    }
    true
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
