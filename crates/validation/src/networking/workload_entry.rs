//! WorkloadEntry validation, following Istio's `ValidateWorkloadEntry` / `validateWorkloadEntry`
//! (`pkg/config/validation/validation.go`) and the WorkloadEntry CRD schema (its CEL rules on Unix
//! socket addresses and ports, and its size limits).
//!
//! The checks of one workload entry are shared: a `ServiceEntry` runs them on its `STATIC` endpoints
//! (with the service's port names, IP addresses only), and a `WorkloadGroup` runs the CRD rules on
//! its template ([`check_template_schema`]).

use std::collections::{BTreeMap, BTreeSet};

use api::{meta::ObjectMeta, networking::WorkloadEntry};

use crate::{
    Report,
    common::{
        is_dns1123_label, is_valid_ip_address, validate_fqdn, validate_labels, validate_port,
        validate_port_name, validate_unix_address,
    },
};

/// Prefix of a Unix domain socket address (Istio's `UnixAddressPrefix`).
pub(crate) const UNIX_ADDRESS_PREFIX: &str = "unix://";

/// Validates a WorkloadEntry; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &WorkloadEntry, report: &mut Report) {
    let _ = meta;
    // Istio does not know the ports of the services selecting the entry, so any port name passes.
    check_workload_entry("spec", spec, None, true, report);
    check_workload_entry_schema("spec", spec, report);
}

/// The rules of Istio's `validateWorkloadEntry` for the entry at `path`.
///
/// `service_ports` are the port names of the enclosing ServiceEntry (`None` for a WorkloadEntry
/// object): endpoint ports must name one of them, and a Unix socket endpoint needs exactly one.
/// `allow_fqdn` accepts a host name as address (else only IP addresses and Unix sockets).
pub(crate) fn check_workload_entry(
    path: &str,
    we: &WorkloadEntry,
    service_ports: Option<&BTreeSet<&str>>,
    allow_fqdn: bool,
    report: &mut Report,
) {
    let address_path = format!("{path}.address");
    let addr = we.address.as_str();
    if addr.is_empty() {
        if we.network.is_empty() {
            report.error(address_path, "address is required");
            return;
        }
        report.warn(
            &address_path,
            format!("address is unset with network {}", crate::common::go_quote(&we.network)),
        );
    }

    let unix_endpoint = addr.starts_with(UNIX_ADDRESS_PREFIX);
    if let Some(socket) = addr.strip_prefix(UNIX_ADDRESS_PREFIX) {
        report.check(&address_path, validate_unix_address(socket));
        if !we.ports.is_empty() {
            report.error(format!("{path}.ports"), format!("unix endpoint {addr} must not include ports"));
        }
    } else if !addr.is_empty() && !is_valid_ip_address(addr) {
        let quoted = crate::common::go_quote(addr);
        if !allow_fqdn {
            report.error(&address_path, format!("endpoint address {quoted} is not a valid IP address"));
        } else if validate_fqdn(addr).is_err() {
            report.error(
                &address_path,
                format!("endpoint address {quoted} is not a valid FQDN or an IP address"),
            );
        }
    }

    check_endpoint_ports(path, &we.ports, service_ports, report);
    report.check(format!("{path}.labels"), validate_labels(&we.labels));
    if unix_endpoint && service_ports.is_some_and(|ports| ports.len() != 1) {
        report.error(address_path, "exactly 1 service port required for unix endpoints");
    }
}

/// The `ports` map of an endpoint: each name a port of the service (when known), a valid port name,
/// and a valid port number. Findings are at `path.ports.<name>`.
pub(crate) fn check_endpoint_ports(
    path: &str,
    ports: &BTreeMap<String, u32>,
    service_ports: Option<&BTreeSet<&str>>,
    report: &mut Report,
) {
    for (name, &port) in ports {
        let at = format!("{path}.ports.{name}");
        if service_ports.is_some_and(|known| !known.contains(name.as_str())) {
            report.error(&at, format!("endpoint port {port} is not defined by the service entry"));
        }
        report.check(&at, validate_port_name(name));
        report.check(&at, validate_port(i64::from(port)));
    }
}

/// The CRD schema rules of a WorkloadEntry (object, ServiceEntry endpoint or WorkloadGroup template)
/// that Istio's Go validation does not already cover: the size limits and the port-name length
/// (`size(key) < 63`, one shorter than a DNS label).
pub(crate) fn check_workload_entry_schema(path: &str, we: &WorkloadEntry, report: &mut Report) {
    max_length(&format!("{path}.address"), &we.address, 256, report);
    max_length(&format!("{path}.network"), &we.network, 2048, report);
    max_length(&format!("{path}.locality"), &we.locality, 2048, report);
    max_length(&format!("{path}.serviceAccount"), &we.service_account, 253, report);
    max_items(&format!("{path}.labels"), we.labels.len(), 256, report);
    max_items(&format!("{path}.ports"), we.ports.len(), 128, report);
    for name in we.ports.keys() {
        // Names Istio rejects are already reported; the CRD also rejects 63-character names.
        if is_dns1123_label(name) && name.len() >= 63 {
            report.error(
                format!("{path}.ports"),
                format!("port name must be valid: {}", crate::common::go_quote(name)),
            );
        }
    }
}

/// The CRD rules of a WorkloadGroup `template` (which Istio's Go validation does not check): a Unix
/// socket address must be an absolute path or abstract socket, not a directory, and without ports;
/// port names must be valid and port numbers in 1..65535; plus [`check_workload_entry_schema`]. The
/// address itself is optional (it is filled in when a workload registers).
pub(crate) fn check_template_schema(path: &str, we: &WorkloadEntry, report: &mut Report) {
    let address_path = format!("{path}.address");
    if let Some(socket) = we.address.strip_prefix(UNIX_ADDRESS_PREFIX) {
        if !(socket.starts_with('/') || socket.starts_with('@')) {
            report.error(&address_path, "UDS must be an absolute path or abstract socket");
        }
        if we.address.ends_with('/') {
            report.error(&address_path, "UDS may not be a dir");
        }
        if !we.ports.is_empty() {
            report.error(format!("{path}.ports"), "UDS may not include ports");
        }
    }
    for (name, &port) in &we.ports {
        if !is_dns1123_label(name) {
            report.error(
                format!("{path}.ports"),
                format!("port name must be valid: {}", crate::common::go_quote(name)),
            );
        }
        if !(1..=65535).contains(&port) {
            report.error(format!("{path}.ports.{name}"), "port must be between 1-65535");
        }
    }
    check_workload_entry_schema(path, we, report);
}

/// The Kubernetes `maxLength` rule (counted in characters): `Too long: may not be more than 256 bytes`.
pub(crate) fn max_length(path: &str, value: &str, max: usize, report: &mut Report) {
    if value.chars().count() > max {
        report.error(path, format!("Too long: may not be more than {max} bytes"));
    }
}

/// The Kubernetes `maxItems` / `maxProperties` rule: `Too many: 300: must have at most 256 items`.
pub(crate) fn max_items(path: &str, count: usize, max: usize, report: &mut Report) {
    if count > max {
        report.error(path, format!("Too many: {count}: must have at most {max} items"));
    }
}

/// The `workloadSelector` of a ServiceEntry, Sidecar or EnvoyFilter (the networking selector with a
/// `labels` map): Istio's label checks, its "specified without labels" warning (prefixed with the kind
/// as Istio words it, e.g. `sidecar`), and the CRD's limits (256 labels, values up to 63 characters).
///
/// Returns `false` when Istio's label check (`ValidateAlphaWorkloadSelector`) fails: Istio then returns
/// that error alone, so the caller stops.
#[must_use]
pub(crate) fn check_networking_selector(
    kind: &str,
    labels: &BTreeMap<String, String>,
    report: &mut Report,
) -> bool {
    let path = "spec.workloadSelector.labels";
    if let Err(e) = crate::common::validate_workload_selector_labels(labels) {
        report.error(path, e);
        return false;
    }
    if labels.is_empty() {
        report.warn(
            "spec.workloadSelector",
            format!("{kind}: workload selector specified without labels, will be applied to all services in namespace"),
        );
    }
    max_items(path, labels.len(), 256, report);
    for (key, value) in labels {
        max_length(&format!("{path}.{key}"), value, 63, report);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Case, meta, run, spec};

    fn check(cases: &[Case]) {
        crate::testutil::check_cases::<WorkloadEntry>(validate, &meta("we", "default"), cases);
    }

    // TestValidateWorkloadEntry, and the CRD cases (workloadentry-valid.yaml / -invalid.yaml).
    #[test]
    fn workload_entries() {
        check(&[
            ("valid", "address: 1.2.3.4", None, false),
            ("missing address", "{}", Some(("address is required", "spec.address")), false),
            ("missing address with network", "network: network-2", None, true),
            ("valid unix endpoint", "address: unix:///lon/google/com", None, false),
            (
                "invalid unix endpoint",
                "address: unix:///lon/google/com\nports: {'7777': 7777}",
                Some(("unix endpoint unix:///lon/google/com must not include ports", "spec.ports")),
                false,
            ),
            ("valid FQDN", "address: validdns.com\nports: {'7777': 7777}", None, false),
            (
                "invalid FQDN",
                "address: invaliddns.com:9443\nports: {'7777': 7777}",
                Some((
                    "endpoint address \"invaliddns.com:9443\" is not a valid FQDN or an IP address",
                    "spec.address",
                )),
                false,
            ),
            ("valid IP", "address: 172.16.1.1\nports: {'7777': 7777}", None, false),
            ("valid IPv6", "address: 2001:db8::1", None, false),
            (
                "crd full",
                "address: 1.2.3.4\nserviceAccount: sa\nnetwork: net\nlabels: {app: app}\nports: {http: 1}\nweight: 2\nlocality: foo/bar/baz",
                None,
                false,
            ),
            ("crd uds abstract", "address: unix://@foo", None, false),
            ("crd uds path", "address: unix:///foo/bar", None, false),
            ("crd fqdn", "address: example.com", None, false),
            (
                "crd bad uds dir",
                "address: unix:///dir/",
                Some(("/dir/ is not an absolute path to a file", "spec.address")),
                false,
            ),
            (
                "crd bad uds relative",
                "address: unix://relative",
                Some(("relative is not an absolute path to a file", "spec.address")),
                false,
            ),
            (
                "crd empty uds",
                "address: unix://",
                Some(("unix address must not be empty", "spec.address")),
                false,
            ),
            (
                "crd uds with ports",
                "address: unix://@foo\nports: {http: 80}",
                Some(("must not include ports", "spec.ports")),
                false,
            ),
            (
                "crd high port",
                "address: 1.1.1.1\nports: {http: 99999}",
                Some(("port number 99999 must be in the range 1..65535", "spec.ports.http")),
                false,
            ),
            (
                "zero port",
                "address: 1.1.1.1\nports: {http: 0}",
                Some(("port number 0 must be in the range 1..65535", "spec.ports.http")),
                false,
            ),
            (
                "crd bad port name",
                "address: 1.1.1.1\nports: {'@': 80}",
                Some(("invalid port name: @", "spec.ports.@")),
                false,
            ),
            (
                "port name of 63 characters (CRD)",
                "address: 1.1.1.1\nports: {aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: 80}",
                Some(("port name must be valid", "spec.ports")),
                false,
            ),
            (
                "bad label",
                "address: 1.1.1.1\nlabels: {'a b': c}",
                Some(("invalid tag key: \"a b\"", "spec.labels")),
                false,
            ),
            (
                "bad label value",
                "address: 1.1.1.1\nlabels: {a: '-c'}",
                Some(("invalid tag value", "spec.labels")),
                false,
            ),
            (
                "ip with port",
                "address: 1.1.1.1:80",
                Some(("is not a valid FQDN or an IP address", "spec.address")),
                false,
            ),
            (
                "wildcard address",
                "address: '*.example.com'",
                Some(("not a valid FQDN", "spec.address")),
                false,
            ),
        ]);
    }

    #[test]
    fn schema_limits() {
        let yaml =
            format!("address: 1.1.1.1\nserviceAccount: {}\nlocality: {}", "a".repeat(254), "b".repeat(2049));
        let report = run(validate, &meta("we", "default"), &spec::<WorkloadEntry>(&yaml));
        let paths: Vec<_> = report.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["spec.locality", "spec.serviceAccount"], "{report:?}");
        assert_eq!(report.errors[1].message, "Too long: may not be more than 253 bytes");
    }

    #[test]
    fn service_entry_endpoint_rules() {
        let ports: BTreeSet<&str> = ["http"].into_iter().collect();
        let we = spec::<WorkloadEntry>("address: example.com\nports: {grpc: 80}");
        let mut report = Report::default();
        check_workload_entry("spec.endpoints[0]", &we, Some(&ports), false, &mut report);
        let messages: Vec<_> = report.errors.iter().map(|e| (e.path.as_str(), e.message.as_str())).collect();
        assert!(messages.contains(&(
            "spec.endpoints[0].address",
            "endpoint address \"example.com\" is not a valid IP address"
        )));
        assert!(messages.contains(&(
            "spec.endpoints[0].ports.grpc",
            "endpoint port 80 is not defined by the service entry"
        )));

        let two: BTreeSet<&str> = ["a", "b"].into_iter().collect();
        let mut report = Report::default();
        check_workload_entry(
            "spec.endpoints[0]",
            &spec("address: unix:///sock"),
            Some(&two),
            false,
            &mut report,
        );
        assert_eq!(report.errors[0].message, "exactly 1 service port required for unix endpoints");
    }

    #[test]
    fn template_rules() {
        for (yaml, want) in [
            ("{}", None),
            ("serviceAccount: sa\nnetwork: net", None),
            ("address: unix:///dir/", Some("UDS may not be a dir")),
            ("address: unix://relative", Some("UDS must be an absolute path or abstract socket")),
            ("address: unix://@foo\nports: {http: 80}", Some("UDS may not include ports")),
            ("ports: {http: 99999}", Some("port must be between 1-65535")),
            ("ports: {'@': 80}", Some("port name must be valid")),
        ] {
            let mut report = Report::default();
            check_template_schema("spec.template", &spec(yaml), &mut report);
            match want {
                None => assert!(report.is_valid(), "{yaml}: {report:?}"),
                Some(m) => assert!(report.errors.iter().any(|e| e.message.contains(m)), "{yaml}: {report:?}"),
            }
        }
    }
}
