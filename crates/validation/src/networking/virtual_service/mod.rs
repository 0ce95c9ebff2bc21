//! VirtualService validation, following Istio's `ValidateVirtualService`
//! (pkg/config/validation/validation.go) and what it calls: `validateHTTPRoute` and its helpers in
//! virtualservice.go (route conflicts, match requests, authority rewrites), `validateTLSRoute`,
//! `validateTCPRoute`, `validateSniHost`, `validateHTTPRouteDestinations`, `validateRouteDestinations`,
//! `validateDestination`, `validateCORSPolicy`, `validateHTTPFaultInjection`, `validateHTTPRedirect`,
//! `validateHTTPDirectResponse`, `validateHTTPMirrors`, `validateHTTPRewrite`, `agent.ValidateHTTPRetry`,
//! `validateGatewayNames`, `validateExportTo`, and the unreachable-rule analysis
//! (`analyzeUnreachableHTTPRules`, `…TCPRules`, `…TLSRules`) whose findings are warnings.
//!
//! The CRD schema adds the proto oneofs (string matches, redirect `port`/`derivePort`, direct response
//! body, abort error type, delay type) and enum names; those are enforced here too.

mod http;
#[cfg(test)]
mod tests;
mod tls_tcp;
mod unreachable;

use api::{meta::ObjectMeta, networking::virtual_service::VirtualService};

use crate::{
    Report,
    common::{
        is_jwt_claim_route, is_valid_ip_address, validate_export_to, validate_gateway_names,
        validate_wildcard_domain, validate_wildcard_domain_for_virtual_service_bound_to_gateway,
    },
};
use http::validate_http_route;
use tls_tcp::{validate_tcp_route, validate_tls_route};
use unreachable::{analyze_unreachable_http_rules, analyze_unreachable_l4_rules};

/// Annotation Istio sets on VirtualServices it generates from Gateway API routes.
const ROUTE_SEMANTICS_ANNOTATION: &str = "internal.istio.io/route-semantics";

/// The namespace of an object that names none (as `istioctl validate` and the API server assume).
const DEFAULT_NAMESPACE: &str = "default";

/// The reserved gateway name meaning "all sidecars".
const MESH_GATEWAY: &str = "mesh";

/// Validates a VirtualService; findings use paths from the document root (`spec.…`).
///
/// A VirtualService without hosts is a delegate: it may have neither gateways nor TLS/TCP routes, and
/// its HTTP routes may not delegate further. VirtualServices generated from Gateway API routes
/// (annotation `internal.istio.io/route-semantics: gateway`) skip the destination checks.
pub fn validate(meta: &ObjectMeta, spec: &VirtualService, report: &mut Report) {
    let delegate = spec.hosts.is_empty();
    if delegate {
        if !spec.gateways.is_empty() {
            report.error("spec.gateways", "delegate virtual service must have no gateways specified");
        }
        if !spec.tls.is_empty() {
            report.error("spec.tls", "delegate virtual service must have no tls route specified");
        }
        if !spec.tcp.is_empty() {
            report.error("spec.tcp", "delegate virtual service must have no tcp route specified");
        }
    }
    let gateway_semantics = meta.annotations.get(ROUTE_SEMANTICS_ANNOTATION).is_some_and(|v| v == "gateway");

    let (applies_to_mesh, applies_to_gateway) = if spec.gateways.is_empty() {
        (true, false)
    } else {
        validate_gateway_names(&spec.gateways, gateway_semantics, "spec.gateways", report);
        let to_gateway = is_gateway(spec);
        (!to_gateway, to_gateway)
    };

    if !applies_to_gateway {
        check_jwt_claim_routes(spec, report);
    }

    validate_hosts(spec, applies_to_mesh, applies_to_gateway, report);

    if spec.http.is_empty() && spec.tcp.is_empty() && spec.tls.is_empty() {
        report.error("spec", "http, tcp or tls must be provided in virtual service");
    }
    for (i, route) in spec.http.iter().enumerate() {
        validate_http_route(route, delegate, gateway_semantics, &format!("spec.http[{i}]"), report);
    }
    for (i, route) in spec.tls.iter().enumerate() {
        validate_tls_route(route, spec, gateway_semantics, &format!("spec.tls[{i}]"), report);
    }
    for (i, route) in spec.tcp.iter().enumerate() {
        validate_tcp_route(route, gateway_semantics, &format!("spec.tcp[{i}]"), report);
    }

    // Like istioctl, an object without a namespace is taken to live in `default`.
    let namespace = if meta.namespace.is_empty() { DEFAULT_NAMESPACE } else { meta.namespace.as_str() };
    report.check("spec.exportTo", validate_export_to(namespace, &spec.export_to, false, false));

    analyze_unreachable_http_rules(&spec.http, report);
    analyze_unreachable_l4_rules(
        "spec.tcp",
        &spec.tcp.iter().map(|r| r.r#match.as_slice()).collect::<Vec<_>>(),
        report,
    );
    analyze_unreachable_l4_rules(
        "spec.tls",
        &spec.tls.iter().map(|r| r.r#match.as_slice()).collect::<Vec<_>>(),
        report,
    );
}

/// Istio's `isGateway`: the rules apply to gateways only when `mesh` is not among the gateways
/// (note: also when there are no gateways at all, which matters to SNI host checks).
fn is_gateway(spec: &VirtualService) -> bool {
    !spec.gateways.iter().any(|g| g == MESH_GATEWAY)
}

/// `true` when some TLS route matches on SNI hosts (Istio's `isSniHost`).
fn has_sni_hosts(spec: &VirtualService) -> bool {
    spec.tls.iter().flat_map(|r| &r.r#match).any(|m| !m.sni_hosts.is_empty())
}

/// JWT claim routing (`@request.auth.claims.…` header matches) works only on gateways.
fn check_jwt_claim_routes(spec: &VirtualService, report: &mut Report) {
    let gateways = format!("[{}]", spec.gateways.join(" "));
    for (i, route) in spec.http.iter().enumerate() {
        for (j, m) in route.r#match.iter().enumerate() {
            for (field, headers) in [("headers", &m.headers), ("withoutHeaders", &m.without_headers)] {
                for key in headers.keys().filter(|k| is_jwt_claim_route(k)) {
                    report.error(
                        format!("spec.http[{i}].match[{j}].{field}.{key}"),
                        format!(
                            "JWT claim based routing (key: {key}) is only supported for gateway, found no gateways: {gateways}"
                        ),
                    );
                }
            }
        }
    }
}

/// The host checks of `ValidateVirtualService`: valid (wildcard) domain names or IP addresses, `*`
/// only for gateways, and no host that overlaps another.
fn validate_hosts(
    spec: &VirtualService,
    applies_to_mesh: bool,
    applies_to_gateway: bool,
    report: &mut Report,
) {
    let sni = has_sni_hosts(spec);
    let mut all_valid = true;
    for (i, host) in spec.hosts.iter().enumerate() {
        let result = if applies_to_gateway {
            validate_wildcard_domain_for_virtual_service_bound_to_gateway(sni, host)
        } else {
            validate_wildcard_domain(host)
        };
        match result {
            Err(e) => {
                if !is_valid_ip_address(host) {
                    report.error(format!("spec.hosts[{i}]"), e);
                    all_valid = false;
                }
            }
            Ok(()) if applies_to_mesh && host == "*" => {
                report.error(
                    format!("spec.hosts[{i}]"),
                    "wildcard host * is not allowed for virtual services bound to the mesh gateway",
                );
                all_valid = false;
            }
            Ok(()) => {}
        }
    }
    if all_valid {
        for (i, a) in spec.hosts.iter().enumerate() {
            for (j, b) in spec.hosts.iter().enumerate().skip(i + 1) {
                if host_matches(a, b) {
                    report.error(
                        format!("spec.hosts[{j}]"),
                        format!("duplicate hosts in virtual service: {a} & {b}"),
                    );
                }
            }
        }
    }
}

/// The host name without its leading `*` when it is a wildcard (`*.foo.com` → `.foo.com`).
fn wildcard_suffix(host: &str) -> Option<&str> {
    host.strip_prefix('*')
}

/// Istio's `host.Name.Matches`: the names are equal, or a wildcard of one covers the other.
fn host_matches(a: &str, b: &str) -> bool {
    match (wildcard_suffix(a), wildcard_suffix(b)) {
        (Some(sa), Some(sb)) => {
            if a.len() < b.len() {
                sb.ends_with(sa)
            } else {
                sa.ends_with(sb)
            }
        }
        (Some(sa), None) => b.ends_with(sa),
        (None, Some(sb)) => a.ends_with(sb),
        (None, None) => a == b,
    }
}

/// Istio's `host.Name.SubsetOf`: `a` is covered by `b`.
fn host_subset_of(a: &str, b: &str) -> bool {
    match (wildcard_suffix(a), wildcard_suffix(b)) {
        (Some(sa), Some(sb)) => a.len() >= b.len() && sa.ends_with(sb),
        (Some(_), None) => false,
        (None, Some(sb)) => a.ends_with(sb),
        (None, None) => a == b,
    }
}
