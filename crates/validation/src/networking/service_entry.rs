//! ServiceEntry validation, following Istio's `ValidateServiceEntry` (`pkg/config/validation/validation.go`,
//! with `ValidateAlphaWorkloadSelector`, `validateWorkloadEntry`, `validateExportTo` and the IP
//! auto-allocation rule of `serviceentry.ShouldV2AutoAllocateIPFromConfig`) and the ServiceEntry CRD
//! schema (its CEL rules and size limits).

use crate::common::check_enum;
use std::collections::BTreeSet;

use api::{
    meta::ObjectMeta,
    networking::{
        ServiceEntry, WorkloadEntry,
        service_entry::{Location, Resolution},
    },
    protocol::Protocol,
    wkt::ProtoEnum,
};

use super::workload_entry::{
    check_endpoint_ports, check_workload_entry, check_workload_entry_schema, max_items, max_length,
};
use crate::{
    Report,
    common::{
        go_quote, is_valid_ip_address, validate_export_to, validate_fqdn, validate_ip_subnet,
        validate_labels, validate_partial_wildcard, validate_port, validate_port_name, validate_protocol,
        validate_wildcard_domain,
    },
};

/// Label with which a ServiceEntry opts out of automatic IP allocation (`"false"`).
const AUTOALLOCATE_LABEL: &str = "networking.istio.io/enable-autoallocate-ip";
/// Label that makes a ServiceEntry's traffic go through a waypoint.
const USE_WAYPOINT_LABEL: &str = "istio.io/use-waypoint";

/// Validates a ServiceEntry; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &ServiceEntry, report: &mut Report) {
    let resolution = Resolution::from_number(spec.resolution);

    if let Some(selector) = &spec.workload_selector {
        if !super::workload_entry::check_networking_selector("service entry", &selector.labels, report) {
            // Istio's `ValidateServiceEntry` returns the selector error alone.
            return;
        }
        if !spec.endpoints.is_empty() {
            report.error("spec", "only one of WorkloadSelector or Endpoints is allowed in Service Entry");
        }
    }

    check_hosts(spec, resolution, report);
    check_addresses(spec, resolution, report);

    let auto_allocation = should_auto_allocate_ip(meta, spec);
    let mut port_names: BTreeSet<&str> = BTreeSet::new();
    let mut port_numbers: BTreeSet<u32> = BTreeSet::new();
    max_items("spec.ports", spec.ports.len(), 256, report);
    for (i, port) in spec.ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        if !port_names.insert(port.name.as_str()) {
            report.error(
                format!("{path}.name"),
                format!("service entry port name {} already defined", go_quote(&port.name)),
            );
        }
        if !port_numbers.insert(port.number) {
            report.error(
                format!("{path}.number"),
                format!("service entry port {} already defined", port.number),
            );
        }
        if port.target_port != 0 {
            report.check(format!("{path}.targetPort"), validate_port(i64::from(port.target_port)));
        }
        if spec.addresses.is_empty()
            && !auto_allocation
            && (port.protocol.is_empty() || port.protocol == "TCP")
        {
            report.warn(
                &path,
                "addresses are required for ports serving TCP (or unset) protocol when IP Autoallocation is not enabled",
            );
        }
        report.check(format!("{path}.name"), validate_port_name(&port.name));
        report.check(format!("{path}.protocol"), validate_protocol(&port.protocol));
        report.check(format!("{path}.number"), validate_port(i64::from(port.number)));
        max_length(&format!("{path}.name"), &port.name, 256, report);
        max_length(&format!("{path}.protocol"), &port.protocol, 256, report);
    }

    check_resolution(meta, spec, resolution, &port_names, report);

    // Plain TCP cannot tell hosts apart (HTTP has the authority, TLS the SNI), unless the hosts are
    // ignored (resolution NONE).
    if resolution != Some(Resolution::None)
        && spec.hosts.len() > 1
        && let Some(i) = spec.ports.iter().position(|p| {
            let protocol = Protocol::parse(&p.protocol);
            !protocol.is_http() && !protocol.is_tls()
        })
    {
        report.error(
            format!("spec.ports[{i}].protocol"),
            "multiple hosts provided with non-HTTP, non-TLS ports",
        );
    }

    check_enum::<Location>("spec.location", spec.location, report);
    report.check("spec.exportTo", validate_export_to(&meta.namespace, &spec.export_to, true, false));
    max_items("spec.endpoints", spec.endpoints.len(), 4096, report);
    for (i, endpoint) in spec.endpoints.iter().enumerate() {
        check_workload_entry_schema(&format!("spec.endpoints[{i}]"), endpoint, report);
    }
}

/// `hosts`: at least one, no `*`, wildcard domains; partial wildcards are warnings except with
/// `DYNAMIC_DNS`.
fn check_hosts(spec: &ServiceEntry, resolution: Option<Resolution>, report: &mut Report) {
    if spec.hosts.is_empty() {
        report.error("spec.hosts", "service entry must have at least one host");
    }
    max_items("spec.hosts", spec.hosts.len(), 256, report);
    for (i, host) in spec.hosts.iter().enumerate() {
        let path = format!("spec.hosts[{i}]");
        if host == "*" {
            report.error(path, format!("invalid host {host}"));
            continue;
        }
        report.check(&path, validate_wildcard_domain(host));
        if resolution != Some(Resolution::DynamicDns)
            && let Err(warning) = validate_partial_wildcard(host)
        {
            report.warn(path, warning);
        }
    }
}

/// `addresses`: IPs or CIDR blocks; CIDR blocks only with `NONE` or `STATIC` resolution.
fn check_addresses(spec: &ServiceEntry, resolution: Option<Resolution>, report: &mut Report) {
    max_items("spec.addresses", spec.addresses.len(), 256, report);
    for (i, address) in spec.addresses.iter().enumerate() {
        let path = format!("spec.addresses[{i}]");
        report.check(&path, validate_ip_subnet(address));
        max_length(&path, address, 64, report);
    }
    let cidr = spec.addresses.iter().any(|a| a.contains('/'));
    if cidr && !matches!(resolution, Some(Resolution::None | Resolution::Static)) {
        report.error("spec.addresses", "CIDR addresses are allowed only for NONE/STATIC resolution types");
    }
}

/// Whether Istio will allocate an IP address for the entry (Istio's
/// `ShouldV2AutoAllocateIPFromConfig`, with the allocation feature on as by default): not with
/// resolution `NONE`, not when opted out by label, not when addresses are given.
fn should_auto_allocate_ip(meta: &ObjectMeta, spec: &ServiceEntry) -> bool {
    if spec.resolution == Resolution::None as i32 {
        return false;
    }
    if meta.labels.get(AUTOALLOCATE_LABEL).is_some_and(|v| go_equal_fold(v, "false")) {
        return false;
    }
    spec.addresses.is_empty()
}

/// Whether the entry is bound to a waypoint: the `istio.io/use-waypoint` label set to anything but
/// `none` (Istio's `usesWaypoint`).
fn uses_waypoint(meta: &ObjectMeta) -> bool {
    meta.labels.get(USE_WAYPOINT_LABEL).is_some_and(|v| !v.is_empty() && !go_equal_fold(v, "none"))
}

/// Go's `strings.EqualFold` against a lower-case ASCII word: ASCII case folding plus the non-ASCII
/// characters that fold onto ASCII letters (`ſ` onto `s`, the Kelvin sign onto `k`).
fn go_equal_fold(text: &str, lower_word: &str) -> bool {
    let folded = text.chars().map(|c| match c {
        '\u{17F}' => 's',
        '\u{212A}' => 'k',
        c => c.to_ascii_lowercase(),
    });
    folded.eq(lower_word.chars())
}

/// The rules that depend on the resolution mode.
fn check_resolution(
    meta: &ObjectMeta,
    spec: &ServiceEntry,
    resolution: Option<Resolution>,
    port_names: &BTreeSet<&str>,
    report: &mut Report,
) {
    let name = Resolution::name_of(spec.resolution).unwrap_or("");
    match resolution {
        Some(Resolution::None) => {
            if !spec.endpoints.is_empty() {
                report.error("spec.endpoints", "no endpoints should be provided for resolution type none");
            }
            if spec.workload_selector.is_some() {
                report.warn(
                    "spec.workloadSelector",
                    "workloadSelector should not be set when resolution mode is NONE",
                );
            }
        }
        Some(Resolution::Static) => {
            for (i, endpoint) in spec.endpoints.iter().enumerate() {
                check_workload_entry(
                    &format!("spec.endpoints[{i}]"),
                    endpoint,
                    Some(port_names),
                    false,
                    report,
                );
            }
        }
        Some(Resolution::Dns | Resolution::DnsRoundRobin) => {
            if spec.endpoints.is_empty()
                && let Some((i, err)) =
                    spec.hosts.iter().enumerate().find_map(|(i, h)| validate_fqdn(h).err().map(|e| (i, e)))
            {
                report.error(
                    format!("spec.hosts[{i}]"),
                    format!(
                        "hosts must be FQDN or contain only prefix wildcards if no endpoints are provided for resolution mode {name}, {err}"
                    ),
                );
            }
            if resolution == Some(Resolution::DnsRoundRobin) && spec.endpoints.len() > 1 {
                report.error(
                    "spec.endpoints",
                    format!("there must only be 0 or 1 endpoint for resolution mode {name}"),
                );
            }
            for (i, endpoint) in spec.endpoints.iter().enumerate() {
                check_dns_endpoint(&format!("spec.endpoints[{i}]"), endpoint, port_names, report);
            }
            if !spec.addresses.is_empty()
                && spec.hosts.len() > 1
                && let Some(i) = spec.ports.iter().position(|p| Protocol::parse(&p.protocol).is_tcp())
            {
                report.warn(
                    format!("spec.ports[{i}]"),
                    "service entry can not have more than one host specified simultaneously with address and tcp port",
                );
            }
        }
        Some(Resolution::DynamicDns) => check_dynamic_dns(meta, spec, name, report),
        None => report.error("spec.resolution", format!("unsupported resolution type {}", spec.resolution)),
    }
}

/// An endpoint of a `DNS` / `DNS_ROUND_ROBIN` entry: an IP address or host name, valid labels, and
/// ports that name service ports.
fn check_dns_endpoint(
    path: &str,
    endpoint: &WorkloadEntry,
    port_names: &BTreeSet<&str>,
    report: &mut Report,
) {
    let address = endpoint.address.as_str();
    if !is_valid_ip_address(address) && validate_fqdn(address).is_err() {
        report.error(
            format!("{path}.address"),
            format!("endpoint address {} is not a valid FQDN or an IP address", go_quote(address)),
        );
    }
    report.check(format!("{path}.labels"), validate_labels(&endpoint.labels));
    check_endpoint_ports(path, &endpoint.ports, Some(port_names), report);
}

/// `DYNAMIC_DNS`: wildcard hosts only, no addresses or endpoints, HTTP/TLS/gRPC/HTTP2 ports, and a
/// location that works with the entry's waypoint binding.
fn check_dynamic_dns(meta: &ObjectMeta, spec: &ServiceEntry, name: &str, report: &mut Report) {
    if spec.hosts.is_empty() {
        report.error(
            "spec.hosts",
            format!("at least one wildcard host must be provided for resolution type {name}"),
        );
    }
    for (i, host) in spec.hosts.iter().enumerate() {
        if !host.starts_with('*') {
            report.error(
                format!("spec.hosts[{i}]"),
                format!("host must be wildcarded for resolution mode {name}"),
            );
        }
    }
    // Istio's messages lack the space between "generated" / "hosts" and "from" / "field".
    if !spec.addresses.is_empty() {
        report.error(
            "spec.addresses",
            format!(
                "addresses cannot be set for resolution type {name}. HTTP route domains will only be generatedfrom the hosts field values"
            ),
        );
    }
    if !spec.endpoints.is_empty() {
        report.error(
            "spec.endpoints",
            format!(
                "endpoints cannot be set for resolution type {name}. Destination IP address determined from hostsfield values"
            ),
        );
    }
    for (i, port) in spec.ports.iter().enumerate() {
        let protocol = Protocol::parse(&port.protocol);
        if !matches!(protocol, Protocol::Http | Protocol::Tls | Protocol::Grpc | Protocol::Http2) {
            report.error(
                format!("spec.ports[{i}].protocol"),
                format!("only HTTP, TLS, GRPC, and HTTP2 protocols are supported for resolution type {name}"),
            );
        }
    }
    match Location::from_number(spec.location) {
        Some(Location::MeshInternal) if uses_waypoint(meta) => report.error(
            "spec.location",
            format!(
                "location MESH_INTERNAL with resolution type {name} is not supported when using waypoints"
            ),
        ),
        Some(_) => {}
        None => report.error(
            "spec.location",
            format!("location must be MESH_EXTERNAL or MESH_INTERNAL for resolution type {name}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Case, meta, run, spec};

    fn check_with(meta: &ObjectMeta, cases: &[Case]) {
        crate::testutil::check_cases::<ServiceEntry>(validate, meta, cases);
    }

    fn check(cases: &[Case]) {
        check_with(&meta("se", "default"), cases);
    }

    const HTTP2_PORTS: &str = "ports:\n- {number: 80, protocol: http, name: http-valid1}\n- {number: 8080, protocol: http, name: http-valid2}\n";

    // TestValidateServiceEntries.
    #[test]
    fn service_entries() {
        let dns = format!(
            "hosts: ['*.google.com']\n{HTTP2_PORTS}endpoints:\n- {{address: lon.google.com, ports: {{http-valid1: 8080}}}}\n- {{address: in.google.com, ports: {{http-valid2: 9080}}}}\nresolution: DNS\n"
        );
        let dns_rr = format!(
            "hosts: ['*.istio.io']\n{HTTP2_PORTS}endpoints:\n- {{address: api-v1.istio.io, ports: {{http-valid1: 8080}}}}\nresolution: DNS_ROUND_ROBIN\n"
        );
        let dns_tls_mode = format!(
            "hosts: ['*.google.com']\n{HTTP2_PORTS}endpoints:\n- {{address: lon.google.com, ports: {{http-valid1: 8080}}, labels: {{security.istio.io/tlsMode: istio}}}}\nresolution: DNS\n"
        );
        let leaked: Vec<&'static str> = [dns, dns_rr, dns_tls_mode].into_iter().map(|s| &*s.leak()).collect();
        check(&[
            ("discovery type DNS", leaked[0], None, false),
            ("discovery type DNS Round Robin", leaked[1], None, false),
            ("discovery type DNS, label tlsMode: istio", leaked[2], None, false),
            (
                "DNS, one host with IP address and https port",
                "hosts: [httpbin.org]\naddresses: [10.10.10.10]\nports:\n- {number: 80, protocol: http, name: http-valid1}\n- {number: 443, protocol: https, name: https}\nresolution: DNS",
                None,
                false,
            ),
            (
                "DNS, multi hosts with IP address and https port",
                "hosts: [httpbin.org, wikipedia.org]\naddresses: [10.10.10.10]\nports:\n- {number: 80, protocol: http, name: http-valid1}\n- {number: 443, protocol: https, name: https}\nresolution: DNS",
                None,
                true,
            ),
            (
                "DNS, IP address set",
                "hosts: ['*.google.com']\naddresses: [10.10.10.10]\nports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: lon.google.com, ports: {http-valid1: 8080}}]\nresolution: DNS",
                None,
                false,
            ),
            (
                "DNS, IP in endpoints",
                "hosts: ['*.google.com']\nports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: 1.1.1.1, ports: {http-valid1: 8080}}]\nresolution: DNS",
                None,
                false,
            ),
            (
                "DYNAMIC_DNS",
                "hosts: ['*.google.com']\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DYNAMIC_DNS",
                None,
                false,
            ),
            (
                "empty hosts",
                "ports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: in.google.com, ports: {http-valid2: 9080}}]\nresolution: DNS",
                Some(("service entry must have at least one host", "spec.hosts")),
                false,
            ),
            (
                "bad hosts",
                "hosts: ['-']\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DNS\nendpoints: [{address: in.google.com}]",
                Some(("domain name \"-\" invalid", "spec.hosts[0]")),
                false,
            ),
            (
                "full wildcard host",
                "hosts: [foo.com, '*']\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DNS\nendpoints: [{address: in.google.com}]",
                Some(("invalid host *", "spec.hosts[1]")),
                false,
            ),
            (
                "short name host",
                "hosts: [foo, bar.com]\nports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: in.google.com, ports: {http-valid1: 9080}}]\nresolution: DNS",
                None,
                false,
            ),
            (
                "undefined endpoint port",
                "hosts: [google.com]\nports:\n- {number: 80, protocol: http, name: http-valid1}\n- {number: 80, protocol: http, name: http-valid2}\nendpoints:\n- {address: lon.google.com, ports: {http-valid1: 8080}}\n- {address: in.google.com, ports: {http-dne: 9080}}\nresolution: DNS",
                Some((
                    "endpoint port 9080 is not defined by the service entry",
                    "spec.endpoints[1].ports.http-dne",
                )),
                false,
            ),
            (
                "duplicate port number",
                "hosts: [google.com]\nports:\n- {number: 80, protocol: http, name: http-valid1}\n- {number: 80, protocol: http, name: http-valid2}\nresolution: DNS",
                Some(("service entry port 80 already defined", "spec.ports[1].number")),
                false,
            ),
            (
                "DNS, non-FQDN endpoint",
                "hosts: ['*.google.com']\nports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: '*.lon.google.com', ports: {http-valid1: 8080}}]\nresolution: DNS",
                Some((
                    "endpoint address \"*.lon.google.com\" is not a valid FQDN or an IP address",
                    "spec.endpoints[0].address",
                )),
                false,
            ),
            (
                "DNS, non-FQDN host",
                "hosts: ['*.google.com']\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DNS",
                Some((
                    "hosts must be FQDN or contain only prefix wildcards if no endpoints are provided for resolution mode DNS, domain name \"*.google.com\" invalid (label \"*\" invalid)",
                    "spec.hosts[0]",
                )),
                false,
            ),
            (
                "DNS, no endpoints",
                "hosts: [google.com]\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DNS",
                None,
                false,
            ),
            (
                "DNS, unix endpoint",
                "hosts: ['*.google.com']\nports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: 'unix:///lon/google/com'}]\nresolution: DNS",
                Some(("is not a valid FQDN or an IP address", "spec.endpoints[0].address")),
                false,
            ),
            (
                "none",
                "hosts: [google.com]\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: NONE",
                None,
                false,
            ),
            (
                "none, endpoints provided",
                "hosts: [google.com]\nports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: lon.google.com, ports: {http-valid1: 8080}}]\nresolution: NONE",
                Some(("no endpoints should be provided for resolution type none", "spec.endpoints")),
                false,
            ),
            (
                "none, cidr addresses",
                "hosts: [google.com]\naddresses: [172.1.2.16/16]\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: NONE",
                None,
                false,
            ),
            (
                "static, cidr addresses with endpoints",
                "hosts: [google.com]\naddresses: [172.1.2.16/16]\nports:\n- {number: 80, protocol: http, name: http-valid1}\n- {number: 8080, protocol: http, name: http-valid2}\nendpoints:\n- {address: 1.1.1.1, ports: {http-valid1: 8080}}\n- {address: 2.2.2.2, ports: {http-valid2: 9080}}\nresolution: STATIC",
                None,
                false,
            ),
            (
                "dns with cidr",
                "hosts: [google.com]\naddresses: [172.1.2.16/16]\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DNS",
                Some(("CIDR addresses are allowed only for NONE/STATIC resolution types", "spec.addresses")),
                false,
            ),
            (
                "bad address",
                "hosts: [google.com]\naddresses: [1.1.1.1/48]\nports: [{number: 80, protocol: http, name: http-valid1}]",
                Some(("1.1.1.1/48 is not a valid CIDR block", "spec.addresses[0]")),
                false,
            ),
            (
                "static, FQDN in endpoints",
                "hosts: [google.com]\naddresses: [172.1.2.16]\nports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: google.com, ports: {http-valid1: 8080}}]\nresolution: STATIC",
                Some((
                    "endpoint address \"google.com\" is not a valid IP address",
                    "spec.endpoints[0].address",
                )),
                false,
            ),
            (
                "static, missing endpoints",
                "hosts: [google.com]\naddresses: [172.1.2.16]\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: STATIC",
                None,
                false,
            ),
            (
                "static, bad endpoint port name",
                "hosts: [google.com]\naddresses: [172.1.2.16]\nports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: 2.2.2.2, ports: {http-dne: 9080}}]\nresolution: STATIC",
                Some((
                    "endpoint port 9080 is not defined by the service entry",
                    "spec.endpoints[0].ports.http-dne",
                )),
                false,
            ),
            (
                "none, conflicting port names",
                "hosts: [google.com]\nports:\n- {number: 80, protocol: http, name: http-conflict}\n- {number: 8080, protocol: http, name: http-conflict}\nresolution: NONE",
                Some(("service entry port name \"http-conflict\" already defined", "spec.ports[1].name")),
                false,
            ),
            (
                "unix socket",
                "hosts: [uds.cluster.local]\nports: [{number: 6553, protocol: grpc, name: grpc-service1}]\nresolution: STATIC\nendpoints: [{address: 'unix:///path/to/socket'}]",
                None,
                false,
            ),
            (
                "unix socket, relative path",
                "hosts: [uds.cluster.local]\nports: [{number: 6553, protocol: grpc, name: grpc-service1}]\nresolution: STATIC\nendpoints: [{address: 'unix://./relative/path.sock'}]",
                Some(("./relative/path.sock is not an absolute path to a file", "spec.endpoints[0].address")),
                false,
            ),
            (
                "unix socket, endpoint ports",
                "hosts: [uds.cluster.local]\nports: [{number: 6553, protocol: grpc, name: grpc-service1}]\nresolution: STATIC\nendpoints: [{address: 'unix:///path/to/socket', ports: {grpc-service1: 6553}}]",
                Some(("must not include ports", "spec.endpoints[0].ports")),
                false,
            ),
            (
                "unix socket, multiple service ports",
                "hosts: [uds.cluster.local]\nports:\n- {number: 6553, protocol: grpc, name: grpc-service1}\n- {number: 80, protocol: http, name: http-service2}\nresolution: STATIC\nendpoints: [{address: 'unix:///path/to/socket'}]",
                Some(("exactly 1 service port required for unix endpoints", "spec.endpoints[0].address")),
                false,
            ),
            (
                "empty protocol",
                "hosts: [google.com]\naddresses: [172.1.2.16/16]\nports:\n- {number: 80, protocol: http, name: http-valid1}\n- {number: 8080, name: http-valid2}\nresolution: NONE",
                None,
                false,
            ),
            (
                "selector",
                "hosts: [google.com]\nworkloadSelector: {labels: {foo: bar}}\nports: [{number: 80, protocol: http, name: http-valid1}]",
                None,
                true,
            ),
            (
                "workload selector without labels",
                "hosts: [google.com]\nports: [{number: 80, protocol: http, name: http-valid1}]\nworkloadSelector: {}",
                None,
                true,
            ),
            (
                "selector and endpoints",
                "hosts: [google.com]\nworkloadSelector: {labels: {foo: bar}}\nports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: 1.1.1.1}]",
                Some(("only one of WorkloadSelector or Endpoints is allowed in Service Entry", "spec")),
                true,
            ),
            (
                "selector and resolution DNS",
                "hosts: [google.com]\nworkloadSelector: {labels: {foo: bar}}\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DNS",
                None,
                false,
            ),
            (
                "bad selector key",
                "hosts: [google.com]\nworkloadSelector: {labels: {'': bar}}\nports: [{number: 80, protocol: http, name: http-valid1}]",
                Some(("empty key is not supported in selector: \"=bar\"", "spec.workloadSelector.labels")),
                // Istio returns the selector error alone: no warning.
                false,
            ),
            (
                "wildcard selector value",
                "hosts: [google.com]\nworkloadSelector: {labels: {app: '*'}}\nresolution: DNS",
                Some(("wildcard is not supported in selector", "spec.workloadSelector.labels")),
                false,
            ),
            (
                "repeat target port",
                "hosts: [google.com]\nresolution: DNS\nports:\n- {number: 80, protocol: http, name: http-valid1, targetPort: 80}\n- {number: 81, protocol: http, name: http-valid2, targetPort: 80}",
                None,
                false,
            ),
            (
                "invalid target port",
                "hosts: [google.com]\nresolution: DNS\nports: [{number: 80, protocol: http, name: http-valid1, targetPort: 65536}]",
                Some(("port number 65536 must be in the range 1..65535", "spec.ports[0].targetPort")),
                false,
            ),
            (
                "warn target port",
                "hosts: [google.com]\nworkloadSelector: {labels: {key: bar}}\nports: [{number: 80, protocol: http, name: http-valid1, targetPort: 1234}]",
                None,
                true,
            ),
            (
                "valid endpoint port",
                "hosts: [google.com]\nports: [{number: 80, protocol: http, name: http-valid1, targetPort: 81}]\nresolution: STATIC\nendpoints: [{address: 1.1.1.1, ports: {http-valid1: 8081}}]",
                None,
                false,
            ),
            (
                "invalid endpoint port",
                "hosts: [google.com]\nports: [{number: 80, protocol: http, name: http-valid1, targetPort: 81}]\nresolution: STATIC\nendpoints: [{address: 1.1.1.1, ports: {http-valid1: 65536}}]",
                Some((
                    "port number 65536 must be in the range 1..65535",
                    "spec.endpoints[0].ports.http-valid1",
                )),
                false,
            ),
            (
                "protocol unset for addresses empty",
                "hosts: [google.com]\nports:\n- {number: 80, protocol: http, name: http-valid1}\n- {number: 8080, name: http-valid2}\nresolution: NONE",
                None,
                true,
            ),
            (
                "protocol is TCP for addresses empty",
                "hosts: [google.com]\nports:\n- {number: 80, protocol: http, name: http-valid1}\n- {number: 81, protocol: TCP, name: tcp-valid1}\nresolution: NONE",
                None,
                true,
            ),
            (
                "tcp with auto allocation",
                "hosts: [google.com]\nports: [{number: 81, protocol: TCP, name: tcp-valid1}]\nresolution: DNS",
                None,
                false,
            ),
            (
                "dns round robin with more than one endpoint",
                "hosts: [google.com]\nports: [{number: 8081, protocol: http, name: http-valid1}]\nendpoints:\n- {address: api-v1.istio.io, ports: {http-valid1: 8081}}\n- {address: 1.1.1.2, ports: {http-valid1: 8081}}\nresolution: DNS_ROUND_ROBIN",
                Some((
                    "there must only be 0 or 1 endpoint for resolution mode DNS_ROUND_ROBIN",
                    "spec.endpoints",
                )),
                false,
            ),
            (
                "dns round robin with 0 endpoints",
                "hosts: [google.com]\nports: [{number: 8081, protocol: http, name: http-valid1}]\nendpoints: []\nresolution: DNS_ROUND_ROBIN",
                None,
                false,
            ),
            (
                "partial wildcard hosts",
                "hosts: ['*.nytimes.com', '*washingtonpost.com']\nports: [{number: 443, protocol: HTTPS, name: https-nytimes}]\nresolution: NONE",
                None,
                true,
            ),
            (
                "network set with no address on endpoint",
                "hosts: [www.example.com]\nports: [{number: 443, protocol: HTTPS, name: https-example}]\nendpoints: [{network: cluster-1}]\nresolution: STATIC",
                None,
                true,
            ),
            (
                "static endpoint without address or network",
                "hosts: [www.example.com]\nports: [{number: 443, protocol: HTTPS, name: https-example}]\nendpoints: [{labels: {a: b}}]\nresolution: STATIC",
                Some(("address is required", "spec.endpoints[0].address")),
                false,
            ),
            (
                "DYNAMIC_DNS, unsupported TCP protocol",
                "hosts: ['*.google.com']\nports:\n- {number: 80, protocol: http, name: http-valid1}\n- {number: 81, protocol: TCP, name: tcp-valid1}\nresolution: DYNAMIC_DNS",
                Some((
                    "only HTTP, TLS, GRPC, and HTTP2 protocols are supported for resolution type DYNAMIC_DNS",
                    "spec.ports[1].protocol",
                )),
                false,
            ),
            (
                "DYNAMIC_DNS, GRPC protocol",
                "hosts: ['*.svc.cluster.local']\nports: [{number: 9090, protocol: GRPC, name: grpc}]\nresolution: DYNAMIC_DNS",
                None,
                false,
            ),
            (
                "DYNAMIC_DNS, FQDN host",
                "hosts: [google.com]\nports: [{number: 80, protocol: http, name: http-valid}]\nresolution: DYNAMIC_DNS",
                Some(("host must be wildcarded for resolution mode DYNAMIC_DNS", "spec.hosts[0]")),
                false,
            ),
            (
                "DYNAMIC_DNS, endpoints set",
                "hosts: ['*.google.com']\nports: [{number: 80, protocol: http, name: http-valid1}]\nendpoints: [{address: in.google.com, ports: {http-valid1: 9080}}]\nresolution: DYNAMIC_DNS",
                Some(("endpoints cannot be set for resolution type DYNAMIC_DNS", "spec.endpoints")),
                false,
            ),
            (
                "DYNAMIC_DNS, IP address set",
                "hosts: ['*.google.com']\naddresses: [10.10.10.10]\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DYNAMIC_DNS",
                Some(("addresses cannot be set for resolution type DYNAMIC_DNS", "spec.addresses")),
                false,
            ),
            (
                "DYNAMIC_DNS, empty hosts",
                "ports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DYNAMIC_DNS",
                Some((
                    "at least one wildcard host must be provided for resolution type DYNAMIC_DNS",
                    "spec.hosts",
                )),
                false,
            ),
            (
                "DYNAMIC_DNS, multiple wildcarded hosts",
                "hosts: ['*.google.com', '*.amazon.com']\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DYNAMIC_DNS",
                None,
                false,
            ),
            (
                "DYNAMIC_DNS, partial wildcard is no warning",
                "hosts: ['*google.com']\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DYNAMIC_DNS",
                None,
                false,
            ),
            (
                "DYNAMIC_DNS, internal mesh location",
                "hosts: ['*.google.com']\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DYNAMIC_DNS\nlocation: MESH_INTERNAL",
                None,
                false,
            ),
            (
                "multiple hosts with TCP",
                "hosts: [a.com, b.com]\naddresses: [1.1.1.1]\nports: [{number: 80, protocol: TCP, name: tcp}]\nresolution: DNS",
                Some(("multiple hosts provided with non-HTTP, non-TLS ports", "spec.ports[0].protocol")),
                true,
            ),
            (
                "multiple hosts with TCP, resolution NONE",
                "hosts: [a.com, b.com]\naddresses: [1.1.1.1]\nports: [{number: 80, protocol: TCP, name: tcp}]",
                None,
                false,
            ),
            (
                "bad port name and protocol",
                "hosts: [a.com]\nports: [{number: 80, protocol: foo, name: 'a_b'}]\nresolution: DNS",
                Some(("invalid port name: a_b", "spec.ports[0].name")),
                false,
            ),
            (
                "unsupported protocol",
                "hosts: [a.com]\nports: [{number: 80, protocol: foo, name: ab}]\nresolution: DNS",
                Some(("unsupported protocol: foo", "spec.ports[0].protocol")),
                false,
            ),
            (
                "port without name (CRD requires it)",
                "hosts: [a.com]\nports: [{number: 80, protocol: http}]\nresolution: DNS",
                Some(("invalid port name: ", "spec.ports[0].name")),
                false,
            ),
            (
                "zero port",
                "hosts: [a.com]\nports: [{name: a, protocol: http}]\nresolution: DNS",
                Some(("port number 0", "spec.ports[0].number")),
                false,
            ),
            (
                "bad exportTo",
                "hosts: [a.com]\nresolution: DNS\nexportTo: ['*', '.']",
                Some((
                    "cannot have both public (*) and non-public exportTo values for a resource",
                    "spec.exportTo",
                )),
                false,
            ),
            ("exportTo none", "hosts: [a.com]\nresolution: DNS\nexportTo: ['~']", None, false),
            (
                "unknown resolution number",
                "hosts: [a.com]\nresolution: 9",
                Some(("unsupported resolution type 9", "spec.resolution")),
                false,
            ),
            (
                "unknown location number",
                "hosts: [a.com]\nresolution: DNS\nlocation: 5",
                Some((
                    "Unsupported value: 5: supported values: \"MESH_EXTERNAL\", \"MESH_INTERNAL\"",
                    "spec.location",
                )),
                false,
            ),
            // The CRD cases (serviceentry-valid.yaml).
            (
                "crd full",
                "hosts: [example.com]\nworkloadSelector: {labels: {foo: bar}}\naddresses: [1.2.3.4, '001:db8::']\nexportTo: [foo, .]\nlocation: MESH_EXTERNAL\nports: [{name: foo, protocol: HTTP, number: 1234, targetPort: 2345}]\nsubjectAltNames: [sa]\nresolution: DNS",
                None,
                false,
            ),
            (
                "crd static-endpoints",
                "hosts: [example.com]\nendpoints: [{address: sub.example.com}]\nports: [{name: foo, protocol: HTTP, number: 1234, targetPort: 2345}]\nresolution: DNS",
                None,
                false,
            ),
            ("crd empty-selector", "workloadSelector: {}\nhosts: [example.com]", None, true),
            ("crd partial-wildcard", "hosts: ['*x']", None, true),
            ("crd none-cidr", "hosts: [example.com]\naddresses: [1.1.1.1/32]", None, false),
        ]);
    }

    #[test]
    fn waypoint_and_autoallocation_labels() {
        let mut waypoint = meta("se", "default");
        waypoint.labels.insert(USE_WAYPOINT_LABEL.into(), "my-waypoint".into());
        let dynamic = "hosts: ['*.google.com']\nports: [{number: 80, protocol: http, name: http-valid1}]\nresolution: DYNAMIC_DNS\nlocation: MESH_INTERNAL";
        check_with(
            &waypoint,
            &[(
                "DYNAMIC_DNS, MESH_INTERNAL with waypoint",
                dynamic,
                Some((
                    "location MESH_INTERNAL with resolution type DYNAMIC_DNS is not supported when using waypoints",
                    "spec.location",
                )),
                false,
            )],
        );
        waypoint.labels.insert(USE_WAYPOINT_LABEL.into(), "None".into());
        check_with(&waypoint, &[("waypoint none", dynamic, None, false)]);

        let mut opt_out = meta("se", "default");
        opt_out.labels.insert(AUTOALLOCATE_LABEL.into(), "FALSE".into());
        check_with(
            &opt_out,
            &[(
                "opted out of auto allocation",
                "hosts: [a.com]\nports: [{number: 81, protocol: TCP, name: tcp}]\nresolution: DNS",
                None,
                true,
            )],
        );
    }

    #[test]
    fn schema_limits() {
        let hosts: Vec<String> = (0..257).map(|i| format!("h{i}.com")).collect();
        let yaml = format!("hosts: [{}]\nresolution: DNS", hosts.join(", "));
        let report = run(validate, &meta("se", "default"), &spec::<ServiceEntry>(&yaml));
        assert!(
            report.errors.iter().any(|e| e.path == "spec.hosts" && e.message.contains("Too many: 257")),
            "{report:?}"
        );

        let long = "a".repeat(64);
        let yaml = format!("hosts: [a.com]\nworkloadSelector: {{labels: {{app: {long}}}}}\nresolution: DNS");
        let report = run(validate, &meta("se", "default"), &spec::<ServiceEntry>(&yaml));
        assert_eq!(report.errors[0].path, "spec.workloadSelector.labels.app");
    }
}
