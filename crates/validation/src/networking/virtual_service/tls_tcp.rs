//! TLS and TCP routes: `validateTLSRoute`, `validateSniHost`, `validateTCPRoute`.

use api::networking::virtual_service::{
    L4MatchAttributes, TcpRoute, TlsMatchAttributes, TlsRoute, VirtualService,
};

use super::{host_subset_of, http::validate_route_destinations, is_gateway};
use crate::{
    Report,
    common::{
        go_quote, is_valid_ip_address, validate_gateway_names, validate_ip_subnet, validate_labels,
        validate_port, validate_wildcard_domain,
        validate_wildcard_domain_for_virtual_service_bound_to_gateway,
    },
};

/// Istio's `validateTLSRoute`.
pub(super) fn validate_tls_route(
    route: &TlsRoute,
    spec: &VirtualService,
    gateway_semantics: bool,
    path: &str,
    report: &mut Report,
) {
    if route.r#match.is_empty() {
        report.error(format!("{path}.match"), "TLS route must have at least one match condition");
    }
    for (j, m) in route.r#match.iter().enumerate() {
        validate_tls_match(m, spec, &format!("{path}.match[{j}]"), report);
    }
    if route.route.is_empty() {
        report.error(format!("{path}.route"), "TLS route is required");
    }
    validate_route_destinations(&route.route, gateway_semantics, &format!("{path}.route"), report);
}

/// Istio's `validateTLSMatch`.
fn validate_tls_match(m: &TlsMatchAttributes, spec: &VirtualService, path: &str, report: &mut Report) {
    if m.sni_hosts.is_empty() {
        report.error(format!("{path}.sniHosts"), "TLS match must have at least one SNI host");
    }
    for (k, sni) in m.sni_hosts.iter().enumerate() {
        validate_sni_host(sni, spec, &format!("{path}.sniHosts[{k}]"), report);
    }
    for (k, subnet) in m.destination_subnets.iter().enumerate() {
        report.check(format!("{path}.destinationSubnets[{k}]"), validate_ip_subnet(subnet));
    }
    if m.port != 0 {
        report.check(format!("{path}.port"), validate_port(i64::from(m.port)));
    }
    report.check(format!("{path}.sourceLabels"), validate_labels(&m.source_labels));
    validate_gateway_names(&m.gateways, false, &format!("{path}.gateways"), report);
}

/// Istio's `validateSniHost`: a valid (wildcard) domain covered by one of the VirtualService's hosts;
/// an IP address is only a warning.
fn validate_sni_host(sni: &str, spec: &VirtualService, path: &str, report: &mut Report) {
    let result = if is_gateway(spec) {
        validate_wildcard_domain_for_virtual_service_bound_to_gateway(true, sni)
    } else {
        validate_wildcard_domain(sni)
    };
    if let Err(e) = result {
        if is_valid_ip_address(sni) {
            report.warn(
                path,
                format!(
                    "using an IP address ({}) goes against SNI spec and most clients do not support this",
                    go_quote(sni)
                ),
            );
        } else {
            report.error(path, e);
        }
        return;
    }
    if !spec.hosts.iter().any(|host| host_subset_of(sni, host)) {
        report.error(
            path,
            format!(
                "SNI host {} is not a compatible subset of any of the virtual service hosts: [{}]",
                go_quote(sni),
                spec.hosts.join(", ")
            ),
        );
    }
}

/// Istio's `validateTCPRoute`.
pub(super) fn validate_tcp_route(route: &TcpRoute, gateway_semantics: bool, path: &str, report: &mut Report) {
    for (j, m) in route.r#match.iter().enumerate() {
        validate_tcp_match(m, &format!("{path}.match[{j}]"), report);
    }
    if route.route.is_empty() {
        report.error(format!("{path}.route"), "TCP route is required");
    }
    validate_route_destinations(&route.route, gateway_semantics, &format!("{path}.route"), report);
}

/// Istio's `validateTCPMatch`.
fn validate_tcp_match(m: &L4MatchAttributes, path: &str, report: &mut Report) {
    for (k, subnet) in m.destination_subnets.iter().enumerate() {
        report.check(format!("{path}.destinationSubnets[{k}]"), validate_ip_subnet(subnet));
    }
    if m.port != 0 {
        report.check(format!("{path}.port"), validate_port(i64::from(m.port)));
    }
    report.check(format!("{path}.sourceLabels"), validate_labels(&m.source_labels));
    validate_gateway_names(&m.gateways, false, &format!("{path}.gateways"), report);
}
