//! Sidecar validation, following Istio's `ValidateSidecar` (`pkg/config/validation/validation.go`) and
//! what it calls: `ValidateAlphaWorkloadSelector`, `validateSidecarIngressPortAndBind`,
//! `validateSidecarEgressPortBindAndCaptureMode`, `validateSidecarOutboundTrafficPolicy`,
//! `validateTLSOptions`, `validateConnectionPool` and `validateDestination`; plus the Sidecar CRD
//! schema's enums and size limits.

use super::destination_rule::validate_connection_pool;
use crate::common::check_enum;
use std::collections::{BTreeMap, BTreeSet};

use api::{
    meta::ObjectMeta,
    networking::{
        Sidecar,
        gateway::server_tls_settings::TlSmode,
        sidecar::{
            CaptureMode, IstioEgressListener, IstioIngressListener, OutboundTrafficPolicy, SidecarPort,
            outbound_traffic_policy::Mode,
        },
    },
    protocol::Protocol,
    wkt::ProtoEnum,
};

use super::workload_entry::UNIX_ADDRESS_PREFIX;
use crate::{
    Report,
    common::{
        go_quote, validate_fqdn, validate_ip_address, validate_namespace_slash_wildcard_hostname,
        validate_port, validate_port_name, validate_protocol, validate_subset_name, validate_unix_address,
        validate_wildcard_domain,
    },
};

/// The outbound traffic mode that only MeshConfig supports (`ALLOW_ANY_DYNAMIC_DNS`, number 3 of
/// MeshConfig's enum; the Sidecar enum stops at `ALLOW_ANY`).
const ALLOW_ANY_DYNAMIC_DNS: i32 = 3;

/// Validates a Sidecar; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &Sidecar, report: &mut Report) {
    if let Some(selector) = &spec.workload_selector
        && !super::workload_entry::check_networking_selector("sidecar", &selector.labels, report)
    {
        // Istio's `ValidateSidecar` returns the selector error alone.
        return;
    }

    if spec.egress.is_empty()
        && spec.ingress.is_empty()
        && spec.outbound_traffic_policy.is_none()
        && spec.inbound_connection_pool.is_none()
    {
        report.error("spec", "sidecar: empty configuration provided");
        return;
    }

    let mut ingress_ports = BTreeSet::new();
    for (i, listener) in spec.ingress.iter().enumerate() {
        check_ingress(&format!("spec.ingress[{i}]"), listener, &mut ingress_ports, report);
    }

    if let Some(pool) = &spec.inbound_connection_pool {
        validate_connection_pool(pool, "spec.inboundConnectionPool", report);
    }

    let mut egress_ports = BTreeSet::new();
    let mut unix_binds = BTreeSet::new();
    let mut catch_all_found = false;
    let last = spec.egress.len().saturating_sub(1);
    for (i, listener) in spec.egress.iter().enumerate() {
        let path = format!("spec.egress[{i}]");
        match &listener.port {
            None if catch_all_found => {
                report.error(&path, "sidecar: egress can have only one listener with empty port");
                continue;
            }
            None if i == last => catch_all_found = true,
            None => report.error(
                &path,
                "sidecar: the egress listener with empty port should be the last listener in the list",
            ),
            Some(port) => {
                check_egress_port(&path, listener, port, report);
                if port.number == 0 {
                    if !unix_binds.insert(listener.bind.as_str()) {
                        report.error(
                            format!("{path}.bind"),
                            "sidecar: unix domain socket values for listeners must be unique",
                        );
                    }
                } else if !egress_ports.insert(port.number) {
                    report.error(
                        format!("{path}.port.number"),
                        "sidecar: ports on IP bound listeners must be unique",
                    );
                }
            }
        }
        check_enum::<CaptureMode>(&format!("{path}.captureMode"), listener.capture_mode, report);
        check_egress_hosts(&path, meta, listener, report);
    }

    if let Some(policy) = &spec.outbound_traffic_policy {
        check_outbound_traffic_policy("spec.outboundTrafficPolicy", policy, report);
    }
}

/// One ingress listener: port and bind, unique port, default endpoint, TLS, connection pool.
fn check_ingress(
    path: &str,
    listener: &IstioIngressListener,
    ports: &mut BTreeSet<u32>,
    report: &mut Report,
) {
    check_enum::<CaptureMode>(&format!("{path}.captureMode"), listener.capture_mode, report);
    let Some(port) = &listener.port else {
        report.error(format!("{path}.port"), "sidecar: port is required for ingress listeners");
        return;
    };
    if port.target_port > 0 {
        report.error(format!("{path}.port.targetPort"), "targetPort has no impact on Sidecars");
    }
    check_port_name_and_protocol(path, port, report);
    report.check(format!("{path}.port.number"), validate_port(i64::from(port.number)));
    if !listener.bind.is_empty() {
        report.check(format!("{path}.bind"), validate_ip_address(&listener.bind));
    }
    if !ports.insert(port.number) {
        report.error(format!("{path}.port.number"), "sidecar: ports on IP bound listeners must be unique");
    }

    if !listener.default_endpoint.is_empty() {
        check_default_endpoint(&format!("{path}.defaultEndpoint"), &listener.default_endpoint, report);
    }

    if let Some(tls) = &listener.tls {
        let tls_path = format!("{path}.tls");
        let unsupported = [
            (
                !tls.subject_alt_names.is_empty(),
                "subjectAltNames",
                "sidecar: subjectAltNames is not supported in ingress tls",
            ),
            (tls.https_redirect, "httpsRedirect", "sidecar: httpsRedirect is not supported"),
            (
                !tls.credential_name.is_empty(),
                "credentialName",
                "sidecar: credentialName is not currently supported",
            ),
            (
                !tls.credential_names.is_empty(),
                "credentialNames",
                "sidecar: credentialNames is not currently supported",
            ),
            (
                !tls.tls_certificates.is_empty(),
                "tlsCertificates",
                "sidecar: tls_certificates is not currently supported",
            ),
        ];
        for (set, field, message) in unsupported {
            if set {
                report.error(format!("{tls_path}.{field}"), message);
            }
        }
        if tls.mode == TlSmode::IstioMutual as i32 || tls.mode == TlSmode::AutoPassthrough as i32 {
            let mode = TlSmode::name_of(tls.mode).unwrap_or_default();
            report.error(
                format!("{tls_path}.mode"),
                format!("configuration is invalid: cannot set mode to {mode} in sidecar ingress tls"),
            );
        }
        if !Protocol::parse(&port.protocol).is_tls() {
            report.error(
                format!("{path}.port.protocol"),
                "server cannot have TLS settings for non HTTPS/TLS ports",
            );
        }
        super::gateway::validate_tls_options(tls, &tls_path, report);
    }

    let pool_path = format!("{path}.connectionPool");
    if let Some(pool) = &listener.connection_pool {
        validate_connection_pool(pool, &pool_path, report);
    }
    if listener.connection_pool.as_ref().is_some_and(|p| p.http.is_some())
        && !Protocol::parse(&port.protocol).is_http()
    {
        report.warn(
            format!("{pool_path}.http"),
            format!(
                "sidecar: HTTP connection pool settings are configured for port {} ({}) but its protocol is not HTTP ({}); only TCP settings will apply",
                port.number,
                go_quote(&port.name),
                port.protocol
            ),
        );
    }
}

/// The optional port name and the protocol of a listener port.
fn check_port_name_and_protocol(path: &str, port: &SidecarPort, report: &mut Report) {
    if !port.name.is_empty() {
        report.check(format!("{path}.port.name"), validate_port_name(&port.name));
    }
    report.check(format!("{path}.port.protocol"), validate_protocol(&port.protocol));
}

/// An ingress `defaultEndpoint`: `unix://<path>`, or `<host>:<port>` with host `127.0.0.1`, `0.0.0.0`,
/// `::1`, `::` or empty.
fn check_default_endpoint(path: &str, endpoint: &str, report: &mut Report) {
    if let Some(socket) = endpoint.strip_prefix(UNIX_ADDRESS_PREFIX) {
        report.check(path, validate_unix_address(socket));
        return;
    }
    let (host, port) = match go_split_host_port(endpoint) {
        Ok(parts) => parts,
        Err(e) => {
            report.error(path, e);
            ("", "")
        }
    };
    if !host.is_empty() && !matches!(host, "127.0.0.1" | "0.0.0.0" | "::1" | "::") {
        report.error(
            path,
            "sidecar: defaultEndpoint must be of form 127.0.0.1:<port>,0.0.0.0:<port>,[::1]:port,[::]:port,unix://filepath or unset",
        );
    }
    match go_atoi(port) {
        Ok(number) => report.check(path, validate_port(number)),
        Err(e) => report.error(path, format!("sidecar: defaultEndpoint port ({port}) is not a number: {e}")),
    }
}

/// Splits `host:port` the way Go's `net.SplitHostPort` does (IPv6 hosts in brackets); the error is
/// Go's, e.g. `address 1.1.1.1: missing port in address`.
fn go_split_host_port(hostport: &str) -> Result<(&str, &str), String> {
    let fail = |why: &str| {
        if hostport.is_empty() { Err(why.to_owned()) } else { Err(format!("address {hostport}: {why}")) }
    };
    let Some(colon) = hostport.rfind(':') else {
        return fail("missing port in address");
    };
    let (host, open_from, close_from) = if hostport.starts_with('[') {
        let Some(end) = hostport.find(']') else {
            return fail("missing ']' in address");
        };
        if end + 1 == hostport.len() {
            return fail("missing port in address");
        }
        if end + 1 != colon {
            return if hostport.as_bytes().get(end + 1) == Some(&b':') {
                fail("too many colons in address")
            } else {
                fail("missing port in address")
            };
        }
        (&hostport[1..end], 1, end + 1)
    } else {
        let host = &hostport[..colon];
        if host.contains(':') {
            return fail("too many colons in address");
        }
        (host, 0, 0)
    };
    if hostport[open_from..].contains('[') {
        return fail("unexpected '[' in address");
    }
    if hostport[close_from..].contains(']') {
        return fail("unexpected ']' in address");
    }
    Ok((host, &hostport[colon + 1..]))
}

/// Reads a decimal integer the way Go's `strconv.Atoi` does (optional sign, 64-bit range); the error
/// is Go's, e.g. `strconv.Atoi: parsing "hi": invalid syntax`.
fn go_atoi(text: &str) -> Result<i64, String> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {}: invalid syntax", go_quote(text)));
    }
    text.parse::<i64>().map_err(|_| format!("strconv.Atoi: parsing {}: value out of range", go_quote(text)))
}

/// The port, bind address and capture mode of an egress listener with a port; port 0 means a Unix
/// domain socket listener.
fn check_egress_port(path: &str, listener: &IstioEgressListener, port: &SidecarPort, report: &mut Report) {
    if port.target_port > 0 {
        report.error(format!("{path}.port.targetPort"), "targetPort has no impact on Sidecars");
    }
    check_port_name_and_protocol(path, port, report);
    let bind_path = format!("{path}.bind");
    if port.number == 0 {
        match listener.bind.strip_prefix(UNIX_ADDRESS_PREFIX) {
            Some(socket) => report.check(&bind_path, validate_unix_address(socket)),
            None => report
                .error(&bind_path, "sidecar: ports with 0 value must have a unix domain socket bind address"),
        }
        if listener.capture_mode != CaptureMode::Default as i32
            && listener.capture_mode != CaptureMode::None as i32
        {
            report.error(
                format!("{path}.captureMode"),
                "sidecar: captureMode must be DEFAULT/NONE for unix domain socket listeners",
            );
        }
    } else {
        report.check(format!("{path}.port.number"), validate_port(i64::from(port.number)));
        if !listener.bind.is_empty() {
            report.check(&bind_path, validate_ip_address(&listener.bind));
        }
    }
}

/// The `hosts` of an egress listener: at least one, each `namespace/host`; hosts already covered by
/// another entry of the listener are warnings.
fn check_egress_hosts(path: &str, meta: &ObjectMeta, listener: &IstioEgressListener, report: &mut Report) {
    if listener.hosts.is_empty() {
        report.error(format!("{path}.hosts"), "sidecar: egress listener must contain at least one host");
        return;
    }
    // Namespace → hosts imported from it (excluded namespaces, `~ns/…`, are not tracked).
    let mut imported: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (j, hostname) in listener.hosts.iter().enumerate() {
        let at = format!("{path}.hosts[{j}]");
        if let Some((ns, host)) = hostname.split_once('/')
            && !ns.starts_with('~')
        {
            let ns = if ns == "." { meta.namespace.as_str() } else { ns };
            let hosts = imported.entry(ns).or_default();
            let duplicate =
                if host == "*" { !hosts.is_empty() } else { hosts.contains(host) || hosts.contains("*") };
            if duplicate {
                report.warn(&at, format!("duplicated egress host: {hostname}"));
            }
            hosts.insert(host);
        }
        report.check(&at, validate_namespace_slash_wildcard_hostname(hostname, false, false));
    }
    if imported.get("*").is_some_and(|hosts| hosts.contains("*")) && imported.len() != 1 {
        report.warn(format!("{path}.hosts"), "`*/*` host select all resources, no other hosts can be added");
    }
}

/// `outboundTrafficPolicy`: its mode, and an egress proxy only with `ALLOW_ANY`.
fn check_outbound_traffic_policy(path: &str, policy: &OutboundTrafficPolicy, report: &mut Report) {
    let mode_path = format!("{path}.mode");
    if policy.mode == ALLOW_ANY_DYNAMIC_DNS {
        report.error(
            mode_path,
            "sidecar: ALLOW_ANY_DYNAMIC_DNS mode is only supported in MeshConfig, not in Sidecar resource",
        );
        return;
    }
    check_enum::<Mode>(&mode_path, policy.mode, report);
    let Some(proxy) = &policy.egress_proxy else {
        return;
    };
    let proxy_path = format!("{path}.egressProxy");
    if policy.mode != Mode::AllowAny as i32 {
        report.error(
            proxy_path,
            "sidecar: egress_proxy must be set only with ALLOW_ANY outbound_traffic_policy mode",
        );
        return;
    }
    report.check(format!("{proxy_path}.host"), validate_fqdn(&proxy.host));
    let Some(port) = &proxy.port else {
        report.error(format!("{proxy_path}.port"), "sidecar: egress_proxy port must be non-nil");
        return;
    };
    // Istio's validateDestination.
    if proxy.host == "*" {
        report.error(format!("{proxy_path}.host"), format!("invalid destination host {}", proxy.host));
    } else {
        report.check(format!("{proxy_path}.host"), validate_wildcard_domain(&proxy.host));
    }
    if !proxy.subset.is_empty() {
        report.check(format!("{proxy_path}.subset"), validate_subset_name(&proxy.subset));
    }
    report.check(format!("{proxy_path}.port.number"), validate_port(i64::from(port.number)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::networking::gateway::is_valid_cipher_suite;
    use crate::testutil::{Case, meta};

    fn check(cases: &[Case]) {
        crate::testutil::check_cases::<Sidecar>(validate, &meta("foo", "bar"), cases);
    }

    const ALL: &str = "egress: [{hosts: ['*/*']}]";

    // TestValidateSidecar.
    #[test]
    fn sidecars() {
        check(&[
            (
                "empty ingress and egress",
                "{}",
                Some(("sidecar: empty configuration provided", "spec")),
                false,
            ),
            ("default", ALL, None, false),
            (
                "workload selector without labels",
                "egress: [{hosts: ['*/*']}]\nworkloadSelector: {}",
                None,
                true,
            ),
            ("import local namespace with wildcard", "egress: [{hosts: ['./*']}]", None, false),
            ("import local namespace with fqdn", "egress: [{hosts: ['./foo.com']}]", None, false),
            ("import nothing", "egress: [{hosts: ['~/*']}]", None, false),
            ("import all except a namespace", "egress: [{hosts: ['*/*', '~ns1/*']}]", None, false),
            ("import all except an exact host", "egress: [{hosts: ['*/*', '~/foo.com']}]", None, false),
            (
                "exclude with invalid namespace",
                "egress: [{hosts: ['*/*', '~Invalid_NS/*']}]",
                Some(("invalid namespace value \"~Invalid_NS\" in sidecar", "spec.egress[0].hosts[1]")),
                false,
            ),
            (
                "bad egress host 1",
                "egress: [{hosts: ['*']}]",
                Some(("host must be of form namespace/dnsName", "spec.egress[0].hosts[0]")),
                false,
            ),
            (
                "bad egress host 2",
                "egress: [{hosts: ['/']}]",
                Some((
                    "config namespace and dnsName in host entry cannot be empty",
                    "spec.egress[0].hosts[0]",
                )),
                false,
            ),
            (
                "empty egress host",
                "egress: [{hosts: []}]",
                Some(("sidecar: egress listener must contain at least one host", "spec.egress[0].hosts")),
                false,
            ),
            (
                "multiple wildcard egress",
                "egress: [{hosts: ['*/foo.com']}, {hosts: ['ns1/bar.com']}]",
                Some((
                    "sidecar: the egress listener with empty port should be the last listener in the list",
                    "spec.egress[0]",
                )),
                false,
            ),
            (
                "two listeners without port",
                "egress: [{port: {number: 80, name: h}, hosts: ['*/foo.com']}, {hosts: ['ns1/bar.com']}, {hosts: ['ns2/bar.com']}]",
                Some((
                    "sidecar: the egress listener with empty port should be the last listener in the list",
                    "spec.egress[1]",
                )),
                false,
            ),
            (
                "wildcard egress not in end",
                "egress: [{hosts: ['*/foo.com']}, {port: {protocol: http, number: 8080, name: h8080}, hosts: ['ns1/bar.com']}]",
                Some(("should be the last listener in the list", "spec.egress[0]")),
                false,
            ),
            (
                "invalid Port",
                "egress: [{port: {protocol: http1, number: 1000000, name: ''}, hosts: [ns1/bar.com]}]",
                Some(("port number 1000000 must be in the range 1..65535", "spec.egress[0].port.number")),
                false,
            ),
            (
                "invalid Port protocol",
                "egress: [{port: {protocol: http1, number: 100}, hosts: [ns1/bar.com]}]",
                Some(("unsupported protocol: http1", "spec.egress[0].port.protocol")),
                false,
            ),
            (
                "Port without name",
                "egress: [{port: {protocol: http, number: 8080}, hosts: [ns1/bar.com]}]",
                None,
                false,
            ),
            (
                "UDS bind in outbound",
                "egress: [{port: {protocol: http, number: 0, name: uds}, hosts: [ns1/bar.com], bind: 'unix:///@foo/bar/com'}]",
                None,
                false,
            ),
            (
                "UDS bind in inbound",
                "ingress: [{port: {protocol: http, number: 0, name: uds}, bind: 'unix:///@foo/bar/com', defaultEndpoint: '127.0.0.1:9999'}]",
                Some(("port number 0 must be in the range 1..65535", "spec.ingress[0].port.number")),
                false,
            ),
            (
                "UDS bind in outbound 2",
                "egress: [{port: {protocol: http, number: 0, name: uds}, hosts: [ns1/bar.com], bind: 'unix:///foo/bar/com'}]",
                None,
                false,
            ),
            (
                "invalid bind",
                "egress: [{port: {protocol: http, number: 0, name: uds}, hosts: [ns1/bar.com], bind: 'foobar:///@foo/bar/com'}]",
                Some((
                    "sidecar: ports with 0 value must have a unix domain socket bind address",
                    "spec.egress[0].bind",
                )),
                false,
            ),
            (
                "invalid capture mode with uds bind",
                "egress: [{port: {protocol: http, number: 0, name: uds}, hosts: [ns1/bar.com], bind: 'unix:///@foo/bar/com', captureMode: IPTABLES}]",
                Some((
                    "sidecar: captureMode must be DEFAULT/NONE for unix domain socket listeners",
                    "spec.egress[0].captureMode",
                )),
                false,
            ),
            (
                "duplicate UDS bind",
                "egress:\n- {port: {protocol: http, number: 0, name: uds}, hosts: [ns1/bar.com], bind: 'unix:///@foo/bar/com'}\n- {port: {protocol: http, number: 0, name: uds}, hosts: [ns1/bar.com], bind: 'unix:///@foo/bar/com'}",
                Some((
                    "sidecar: unix domain socket values for listeners must be unique",
                    "spec.egress[1].bind",
                )),
                false,
            ),
            (
                "duplicate ports",
                "egress:\n- {port: {protocol: http, number: 90, name: foo}, hosts: [ns1/bar.com]}\n- {port: {protocol: tcp, number: 90, name: tcp}, hosts: [ns2/bar.com]}",
                Some(("sidecar: ports on IP bound listeners must be unique", "spec.egress[1].port.number")),
                false,
            ),
            (
                "egress bind not an IP",
                "egress: [{port: {protocol: http, number: 90, name: foo}, bind: foo, hosts: [ns1/bar.com]}]",
                Some(("foo is not a valid IP", "spec.egress[0].bind")),
                false,
            ),
            (
                "egress target port",
                "egress: [{port: {protocol: http, number: 90, name: foo, targetPort: 9090}, hosts: [ns1/bar.com]}]",
                Some(("targetPort has no impact on Sidecars", "spec.egress[0].port.targetPort")),
                false,
            ),
            (
                "ingress without port",
                "ingress: [{defaultEndpoint: '127.0.0.1:110'}]\negress: [{hosts: ['*/*']}]",
                Some(("sidecar: port is required for ingress listeners", "spec.ingress[0].port")),
                false,
            ),
            (
                "ingress with duplicate ports",
                "ingress:\n- {port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '127.0.0.1:110'}\n- {port: {protocol: tcp, number: 90, name: bar}, defaultEndpoint: '[::1]:110'}",
                Some(("sidecar: ports on IP bound listeners must be unique", "spec.ingress[1].port.number")),
                false,
            ),
            (
                "ingress without default endpoint",
                "ingress: [{port: {protocol: http, number: 90, name: foo}}]\negress: [{hosts: ['*/*']}]",
                None,
                false,
            ),
            (
                "ingress with invalid default endpoint in IPv4",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '1.1.1.1:90'}]",
                Some((
                    "sidecar: defaultEndpoint must be of form 127.0.0.1:<port>",
                    "spec.ingress[0].defaultEndpoint",
                )),
                false,
            ),
            (
                "ingress with invalid default endpoint in IPv6",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '[1:1:1:1:1:1:1:1]:90'}]",
                Some(("sidecar: defaultEndpoint must be of form", "spec.ingress[0].defaultEndpoint")),
                false,
            ),
            (
                "ingress with invalid default endpoint uds",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: 'unix:///'}]",
                Some(("/ is not an absolute path to a file", "spec.ingress[0].defaultEndpoint")),
                false,
            ),
            (
                "ingress with invalid default endpoint port in IPv4",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '127.0.0.1:hi'}]",
                Some((
                    "sidecar: defaultEndpoint port (hi) is not a number: strconv.Atoi: parsing \"hi\": invalid syntax",
                    "spec.ingress[0].defaultEndpoint",
                )),
                false,
            ),
            (
                "ingress with invalid default endpoint port in IPv6",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '[::1]:hi'}]",
                Some(("is not a number", "spec.ingress[0].defaultEndpoint")),
                false,
            ),
            (
                "default endpoint without port",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '127.0.0.1'}]",
                Some(("address 127.0.0.1: missing port in address", "spec.ingress[0].defaultEndpoint")),
                false,
            ),
            (
                "default endpoint port out of range",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: ':70000'}]",
                Some(("port number 70000 must be in the range 1..65535", "spec.ingress[0].defaultEndpoint")),
                false,
            ),
            (
                "valid ingress and egress in IPv4",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '127.0.0.1:9999'}]\negress: [{hosts: ['*/*']}]",
                None,
                false,
            ),
            (
                "valid ingress and egress in IPv6",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '[::1]:9999'}]\negress: [{hosts: ['*/*']}]",
                None,
                false,
            ),
            (
                "valid ingress, any host",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '0.0.0.0:9999'}]",
                None,
                false,
            ),
            (
                "valid ingress, empty host",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: ':9999'}]",
                None,
                false,
            ),
            (
                "valid ingress, uds",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: 'unix:///var/run/a.sock'}]",
                None,
                false,
            ),
            (
                "ingress bind",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, bind: 'x.y'}]",
                Some(("x.y is not a valid IP", "spec.ingress[0].bind")),
                false,
            ),
            (
                "ingress bad port name",
                "ingress: [{port: {protocol: http, number: 90, name: 'a_b'}}]",
                Some(("invalid port name: a_b", "spec.ingress[0].port.name")),
                false,
            ),
            ("just outbound traffic policy", "outboundTrafficPolicy: {mode: ALLOW_ANY}", None, false),
            (
                "empty protocol in IPv4",
                "ingress: [{port: {number: 90, name: foo}, defaultEndpoint: '127.0.0.1:9999'}]\negress: [{hosts: ['*/*']}]",
                None,
                false,
            ),
            (
                "ALLOW_ANY sidecar egress policy with no egress proxy",
                "outboundTrafficPolicy: {mode: ALLOW_ANY}\negress: [{hosts: ['*/*']}]",
                None,
                false,
            ),
            (
                "sidecar egress proxy with REGISTRY_ONLY (default)",
                "outboundTrafficPolicy: {egressProxy: {host: foo.bar, subset: shiny, port: {number: 5000}}}\negress: [{hosts: ['*/*']}]",
                Some((
                    "sidecar: egress_proxy must be set only with ALLOW_ANY outbound_traffic_policy mode",
                    "spec.outboundTrafficPolicy.egressProxy",
                )),
                false,
            ),
            (
                "sidecar egress proxy with ALLOW_ANY",
                "outboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {host: foo.bar, subset: shiny, port: {number: 5000}}}\negress: [{hosts: ['*/*']}]",
                None,
                false,
            ),
            (
                "sidecar egress proxy with ALLOW_ANY, service hostname invalid fqdn",
                "outboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {host: 'foobar*123', subset: shiny, port: {number: 5000}}}\negress: [{hosts: ['*/*']}]",
                Some(("domain name \"foobar*123\" invalid", "spec.outboundTrafficPolicy.egressProxy.host")),
                false,
            ),
            (
                "sidecar egress proxy (without port) with ALLOW_ANY",
                "outboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {host: foo.bar, subset: shiny}}\negress: [{hosts: ['*/*']}]",
                Some((
                    "sidecar: egress_proxy port must be non-nil",
                    "spec.outboundTrafficPolicy.egressProxy.port",
                )),
                false,
            ),
            (
                "sidecar egress proxy with bad subset",
                "outboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {host: foo.bar, subset: 'a_b', port: {number: 5000}}}",
                Some(("subset name is invalid: a_b", "spec.outboundTrafficPolicy.egressProxy.subset")),
                false,
            ),
            (
                "ALLOW_ANY_DYNAMIC_DNS rejected in sidecar",
                "outboundTrafficPolicy: {mode: 3}\negress: [{hosts: ['*/*']}]",
                Some((
                    "sidecar: ALLOW_ANY_DYNAMIC_DNS mode is only supported in MeshConfig",
                    "spec.outboundTrafficPolicy.mode",
                )),
                false,
            ),
            ("sidecar egress only one wildcarded", "egress: [{hosts: ['*/*', 'test/a.com']}]", None, true),
            ("sidecar egress wildcarded ns", "egress: [{hosts: ['*/b.com', 'test/a.com']}]", None, false),
            (
                "sidecar egress duplicated with wildcarded same namespace",
                "egress: [{hosts: ['test/*', 'test/a.com']}]",
                None,
                true,
            ),
            ("sidecar egress duplicated host", "egress: [{hosts: ['test/a.com', 'test/a.com']}]", None, true),
            (
                "invalid partial wildcard",
                "egress: [{hosts: ['test/*a.com']}]",
                Some(("partial wildcard \"*a.com\" not allowed", "spec.egress[0].hosts[0]")),
                false,
            ),
            (
                "short name",
                "egress: [{hosts: ['test/a']}]",
                Some(("short names (non FQDN) are not allowed", "spec.egress[0].hosts[0]")),
                false,
            ),
            (
                "sidecar egress duplicated with wildcarded same namespace .",
                "egress: [{hosts: ['./*', 'bar/a.com']}]",
                None,
                true,
            ),
            (
                "ingress tls mode set to ISTIO_MUTUAL",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '127.0.0.1:9999', tls: {mode: ISTIO_MUTUAL}}]",
                Some((
                    "configuration is invalid: cannot set mode to ISTIO_MUTUAL in sidecar ingress tls",
                    "spec.ingress[0].tls.mode",
                )),
                false,
            ),
            (
                "ingress tls mode set to AUTO_PASSTHROUGH",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, defaultEndpoint: '[::1]:9999', tls: {mode: AUTO_PASSTHROUGH}}]",
                Some((
                    "cannot set mode to AUTO_PASSTHROUGH in sidecar ingress tls",
                    "spec.ingress[0].tls.mode",
                )),
                false,
            ),
            (
                "ingress tls invalid protocol",
                "ingress: [{port: {protocol: tcp, number: 90, name: foo}, defaultEndpoint: '127.0.0.1:9999', tls: {mode: SIMPLE, serverCertificate: a, privateKey: b}}]",
                Some((
                    "server cannot have TLS settings for non HTTPS/TLS ports",
                    "spec.ingress[0].port.protocol",
                )),
                false,
            ),
            (
                "ingress tls httpRedirect is not supported",
                "ingress: [{port: {protocol: tcp, number: 90, name: foo}, defaultEndpoint: '127.0.0.1:9999', tls: {mode: SIMPLE, httpsRedirect: true}}]",
                Some(("sidecar: httpsRedirect is not supported", "spec.ingress[0].tls.httpsRedirect")),
                false,
            ),
            (
                "ingress tls SAN entries are not supported",
                "ingress: [{port: {protocol: tcp, number: 90, name: foo}, defaultEndpoint: '127.0.0.1:9999', tls: {mode: SIMPLE, subjectAltNames: [httpbin.com]}}]",
                Some((
                    "sidecar: subjectAltNames is not supported in ingress tls",
                    "spec.ingress[0].tls.subjectAltNames",
                )),
                false,
            ),
            (
                "ingress tls credentialName is not supported",
                "ingress: [{port: {protocol: tcp, number: 90, name: foo}, defaultEndpoint: '127.0.0.1:9999', tls: {mode: SIMPLE, credentialName: secret-name}}]",
                Some((
                    "sidecar: credentialName is not currently supported",
                    "spec.ingress[0].tls.credentialName",
                )),
                false,
            ),
            (
                "ingress tls credentialNames is not supported",
                "ingress: [{port: {protocol: tcp, number: 90, name: foo}, defaultEndpoint: '[::1]:9999', tls: {mode: SIMPLE, credentialNames: [secret-name]}}]",
                Some((
                    "sidecar: credentialNames is not currently supported",
                    "spec.ingress[0].tls.credentialNames",
                )),
                false,
            ),
            (
                "ingress tls tlsCertificates is not supported",
                "ingress: [{port: {protocol: tcp, number: 90, name: foo}, tls: {mode: SIMPLE, tlsCertificates: [{serverCertificate: a, privateKey: b}, {serverCertificate: c, privateKey: d}]}}]",
                Some((
                    "sidecar: tls_certificates is not currently supported",
                    "spec.ingress[0].tls.tlsCertificates",
                )),
                false,
            ),
            (
                "ingress simple tls",
                "ingress: [{port: {protocol: https, number: 90, name: foo}, tls: {mode: SIMPLE, serverCertificate: /a.crt, privateKey: /a.key}}]",
                None,
                false,
            ),
            (
                "ingress simple tls without key",
                "ingress: [{port: {protocol: https, number: 90, name: foo}, tls: {mode: SIMPLE, serverCertificate: /a.crt}}]",
                Some(("SIMPLE TLS requires a private key", "spec.ingress[0].tls.privateKey")),
                false,
            ),
            (
                "ingress mutual tls without CA",
                "ingress: [{port: {protocol: https, number: 90, name: foo}, tls: {mode: MUTUAL, serverCertificate: /a.crt, privateKey: /a.key}}]",
                Some(("MUTUAL TLS requires a client CA bundle", "spec.ingress[0].tls.caCertificates")),
                false,
            ),
            (
                "ingress simple tls with CRL",
                "ingress: [{port: {protocol: https, number: 90, name: foo}, tls: {mode: SIMPLE, serverCertificate: /a.crt, privateKey: /a.key, caCrl: /crl}}]",
                Some(("CRL is not supported with SIMPLE TLS", "spec.ingress[0].tls.caCrl")),
                false,
            ),
            (
                "ingress tls with bad cipher suites",
                "ingress: [{port: {protocol: https, number: 90, name: foo}, tls: {mode: SIMPLE, serverCertificate: /a.crt, privateKey: /a.key, cipherSuites: [foo, AES128-SHA, AES128-SHA, -AES256-SHA]}}]",
                None,
                true,
            ),
            (
                "ingress passthrough tls with certificates",
                "ingress: [{port: {protocol: tls, number: 90, name: foo}, tls: {mode: PASSTHROUGH, serverCertificate: /a.crt}}]",
                None,
                true,
            ),
            (
                "ingress old TLS without ciphers",
                "ingress: [{port: {protocol: tls, number: 90, name: foo}, tls: {mode: PASSTHROUGH, minProtocolVersion: TLSV1_1}}]",
                None,
                true,
            ),
            (
                "valid inbound connection pool",
                "inboundConnectionPool: {http: {http1MaxPendingRequests: 1024, http2MaxRequests: 1024, maxRequestsPerConnection: 1024, maxRetries: 1024}}",
                None,
                false,
            ),
            (
                "valid port-level connection pool with top level default",
                "ingress: [{port: {protocol: http, number: 90, name: foo}, connectionPool: {http: {http1MaxPendingRequests: 1024}}}]\ninboundConnectionPool: {http: {maxRetries: 1024}}",
                None,
                false,
            ),
            (
                "warn http connection settings on tcp port",
                "ingress: [{port: {protocol: tcp, number: 90, name: foo}, connectionPool: {http: {http1MaxPendingRequests: 1024}}}]",
                None,
                true,
            ),
            (
                "invalid top level connection pool",
                "inboundConnectionPool: {}",
                Some(("connection pool must have at least one field", "spec.inboundConnectionPool")),
                false,
            ),
            (
                "invalid port-level connection pool",
                "ingress: [{port: {protocol: tcp, number: 90, name: foo}, connectionPool: {}}]",
                Some(("connection pool must have at least one field", "spec.ingress[0].connectionPool")),
                false,
            ),
            (
                "negative connection pool settings",
                "inboundConnectionPool: {http: {maxRetries: -1}, tcp: {maxConnections: -1}}",
                Some(("max retries must be non-negative", "spec.inboundConnectionPool.http.maxRetries")),
                false,
            ),
            (
                "connection pool durations",
                "inboundConnectionPool: {tcp: {connectTimeout: 0.5ms, idleTimeout: 0s}}",
                Some(("duration must be greater than 1ms", "spec.inboundConnectionPool.tcp.connectTimeout")),
                false,
            ),
            (
                "tcp idle timeout below 1ms disables it",
                "inboundConnectionPool: {tcp: {idleTimeout: 0.5ms}}",
                None,
                false,
            ),
            (
                "http2 keepalive needs interval and timeout",
                "inboundConnectionPool: {http: {http2KeepAlive: {interval: 1s}}}",
                Some((
                    "http2 keepalive timeout is required",
                    "spec.inboundConnectionPool.http.http2KeepAlive.timeout",
                )),
                false,
            ),
            (
                "upgrade with client protocol",
                "inboundConnectionPool: {http: {h2UpgradePolicy: UPGRADE, useClientProtocol: true}}",
                Some((
                    "use client protocol must not be true when H2UpgradePolicy is UPGRADE",
                    "spec.inboundConnectionPool.http.useClientProtocol",
                )),
                false,
            ),
            (
                "bad selector",
                "workloadSelector: {labels: {app: '*'}}\negress: [{hosts: ['*/*']}]",
                Some(("wildcard is not supported in selector", "spec.workloadSelector.labels")),
                false,
            ),
            (
                "unknown capture mode number",
                "egress: [{hosts: ['*/*'], captureMode: 7}]",
                Some(("Unsupported value: 7", "spec.egress[0].captureMode")),
                false,
            ),
        ]);
    }

    #[test]
    fn split_host_port_like_go() {
        for (input, want) in [
            ("127.0.0.1:80", Ok(("127.0.0.1", "80"))),
            ("[::1]:80", Ok(("::1", "80"))),
            (":80", Ok(("", "80"))),
            ("a:", Ok(("a", ""))),
            ("a", Err("address a: missing port in address")),
            ("a:b:c", Err("address a:b:c: too many colons in address")),
            ("[::1]", Err("address [::1]: missing port in address")),
            ("[::1", Err("address [::1: missing ']' in address")),
            ("[::1]x:80", Err("address [::1]x:80: missing port in address")),
            ("[a]:b:80", Err("address [a]:b:80: too many colons in address")),
            ("a[:80", Err("address a[:80: unexpected '[' in address")),
            ("a]:80", Err("address a]:80: unexpected ']' in address")),
        ] {
            assert_eq!(go_split_host_port(input), want.map_err(str::to_owned), "{input}");
        }
        assert_eq!(go_atoi("+80"), Ok(80));
        assert_eq!(go_atoi("-1"), Ok(-1));
        assert_eq!(go_atoi(""), Err("strconv.Atoi: parsing \"\": invalid syntax".to_owned()));
        assert_eq!(
            go_atoi("99999999999999999999"),
            Err("strconv.Atoi: parsing \"99999999999999999999\": value out of range".to_owned())
        );
    }

    #[test]
    fn cipher_suites() {
        for (suite, valid) in [
            ("", true),
            ("ALL", true),
            ("-AES128-SHA", true),
            ("AES128-SHA", true),
            ("foo", false),
            ("é", false),
        ] {
            assert_eq!(is_valid_cipher_suite(suite), valid, "{suite}");
        }
    }
}
