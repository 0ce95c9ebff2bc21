//! WorkloadGroup validation, following Istio's `ValidateWorkloadGroup` and `validateReadinessProbe`
//! (`pkg/config/validation/validation.go`) and the WorkloadGroup CRD schema: the rules on the
//! `template` (a WorkloadEntry whose address is optional), on the probe (one health check method,
//! ports in range, header-name pattern, non-negative numbers) and the size limits.

use api::{
    meta::ObjectMeta,
    networking::{WorkloadGroup, workload_group::ReadinessProbe},
};

use super::workload_entry::{check_template_schema, max_items};
use crate::{
    Report,
    common::{validate_labels, validate_port, validate_probe_header_name},
};

/// Validates a WorkloadGroup; findings use paths from the document root (`spec.…`).
pub fn validate(meta: &ObjectMeta, spec: &WorkloadGroup, report: &mut Report) {
    let _ = meta;
    match &spec.template {
        None => report.error("spec.template", "template is required"),
        // Istio's Go validation leaves the template alone (its address is filled in when a
        // workload registers); the CRD schema checks it.
        Some(template) => check_template_schema("spec.template", template, report),
    }
    if let Some(metadata) = &spec.metadata {
        if let Err(e) = validate_labels(&metadata.labels) {
            report.error("spec.metadata.labels", format!("invalid labels: {e}"));
        }
        max_items("spec.metadata.labels", metadata.labels.len(), 256, report);
        max_items("spec.metadata.annotations", metadata.annotations.len(), 256, report);
    }
    if let Some(probe) = &spec.probe {
        check_probe("spec.probe", probe, report);
    }
}

/// Istio's `validateReadinessProbe` plus the CRD's one-method rule and field rules.
fn check_probe(path: &str, probe: &ReadinessProbe, report: &mut Report) {
    for (value, field) in [
        (probe.period_seconds, "periodSeconds"),
        (probe.initial_delay_seconds, "initialDelaySeconds"),
        (probe.timeout_seconds, "timeoutSeconds"),
        (probe.success_threshold, "successThreshold"),
        (probe.failure_threshold, "failureThreshold"),
    ] {
        if value < 0 {
            report.error(format!("{path}.{field}"), format!("{field} must be non-negative"));
        }
    }

    let methods: Vec<&str> = [
        (probe.http_get.is_some(), "httpGet"),
        (probe.tcp_socket.is_some(), "tcpSocket"),
        (probe.exec.is_some(), "exec"),
        (probe.grpc.is_some(), "grpc"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect();
    if methods.len() > 1 {
        report.error(
            path,
            format!("only one of httpGet, tcpSocket, exec or grpc may be set (found {})", methods.join(", ")),
        );
    }
    if methods.is_empty() {
        report.error(path, "unknown health check method <nil>");
    }

    if let Some(http) = &probe.http_get {
        let p = format!("{path}.httpGet");
        report.check(format!("{p}.port"), validate_port(i64::from(http.port)));
        if !matches!(http.scheme.as_str(), "" | "HTTPS" | "HTTP") {
            report.error(format!("{p}.scheme"), "httpGet.scheme must be one of \"HTTPS\", \"HTTP\"");
        }
        for (i, header) in http.http_headers.iter().enumerate() {
            report.check(format!("{p}.httpHeaders[{i}].name"), validate_probe_header_name(&header.name));
        }
    }
    if let Some(tcp) = &probe.tcp_socket {
        report.check(format!("{path}.tcpSocket.port"), validate_port(i64::from(tcp.port)));
    }
    if let Some(exec) = &probe.exec {
        if exec.command.is_empty() {
            report.error(format!("{path}.exec.command"), "exec.command is required");
        }
        for (i, part) in exec.command.iter().enumerate() {
            if part.is_empty() {
                report.error(
                    format!("{path}.exec.command[{i}]"),
                    "Invalid value: \"\": should be at least 1 chars long",
                );
            }
        }
    }
    if let Some(grpc) = &probe.grpc {
        // The CRD accepts gRPC probes, but Istio's validation knows no such method and rejects them.
        report.error(format!("{path}.grpc"), "unknown health check method *v1alpha3.ReadinessProbe_Grpc");
        if grpc.port > 65535 {
            report.error(format!("{path}.grpc.port"), "port must be between 1-65535");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{meta, run, spec};

    /// (name, spec YAML, expected error substring and path or `None` for valid).
    type Case = (&'static str, &'static str, Option<(&'static str, &'static str)>);

    // TestValidateWorkloadGroup, and the CRD cases (workloadgroup-invalid.yaml).
    #[test]
    fn workload_groups() {
        let cases: &[Case] = &[
            ("valid", "template: {}", None),
            ("no-spec", "{}", Some(("template is required", "spec.template"))),
            (
                "invalid labels",
                "template: {}\nmetadata: {labels: {'.': '~'}}",
                Some(("invalid labels: invalid tag key", "spec.metadata.labels")),
            ),
            ("metadata", "template: {}\nmetadata: {labels: {app: a}, annotations: {'x/y': z}}", None),
            (
                "probe missing method",
                "template: {}\nprobe: {}",
                Some(("unknown health check method <nil>", "spec.probe")),
            ),
            (
                "probe http empty",
                "template: {}\nprobe: {httpGet: {}}",
                Some(("port number 0 must be in the range 1..65535", "spec.probe.httpGet.port")),
            ),
            ("probe http valid", "template: {}\nprobe: {httpGet: {port: 5}}", None),
            (
                "probe http full",
                "template: {}\nprobe: {initialDelaySeconds: 1, timeoutSeconds: 2, periodSeconds: 3, successThreshold: 1, failureThreshold: 2, httpGet: {path: /ready, port: 8080, host: a, scheme: HTTPS, httpHeaders: [{name: x-a, value: b}]}}",
                None,
            ),
            (
                "probe bad scheme",
                "template: {}\nprobe: {httpGet: {port: 5, scheme: ftp}}",
                Some(("httpGet.scheme must be one of \"HTTPS\", \"HTTP\"", "spec.probe.httpGet.scheme")),
            ),
            (
                "probe tcp invalid",
                "template: {}\nprobe: {tcpSocket: {}}",
                Some(("port number 0", "spec.probe.tcpSocket.port")),
            ),
            ("probe tcp valid", "template: {}\nprobe: {tcpSocket: {port: 5}}", None),
            (
                "probe exec invalid",
                "template: {}\nprobe: {exec: {}}",
                Some(("exec.command is required", "spec.probe.exec.command")),
            ),
            ("probe exec valid", "template: {}\nprobe: {exec: {command: [foo, bar]}}", None),
            (
                "probe exec empty part",
                "template: {}\nprobe: {exec: {command: [foo, '']}}",
                Some(("at least 1 chars long", "spec.probe.exec.command[1]")),
            ),
            (
                "probe grpc",
                "template: {}\nprobe: {grpc: {port: 5}}",
                Some(("unknown health check method", "spec.probe.grpc")),
            ),
            (
                "two methods",
                "template: {}\nprobe: {tcpSocket: {port: 5}, exec: {command: [a]}}",
                Some(("only one of httpGet, tcpSocket, exec or grpc may be set", "spec.probe")),
            ),
            (
                "negative period",
                "template: {}\nprobe: {periodSeconds: -1, tcpSocket: {port: 5}}",
                Some(("periodSeconds must be non-negative", "spec.probe.periodSeconds")),
            ),
            (
                "negative threshold",
                "template: {}\nprobe: {failureThreshold: -1, tcpSocket: {port: 5}}",
                Some(("failureThreshold must be non-negative", "spec.probe.failureThreshold")),
            ),
            (
                "crd tcp-probe-invalid",
                "probe: {tcpSocket: {port: 65536}}\ntemplate: {serviceAccount: sa, network: net}",
                Some(("port number 65536 must be in the range 1..65535", "spec.probe.tcpSocket.port")),
            ),
            (
                "crd http-probe-invalid",
                "probe: {httpGet: {httpHeaders: [{name: '**'}], port: 80}}\ntemplate: {}",
                Some(("not a valid header name", "spec.probe.httpGet.httpHeaders[0].name")),
            ),
            (
                "probe header with underscore",
                "template: {}\nprobe: {httpGet: {port: 80, httpHeaders: [{name: a_b}]}}",
                Some(("not a valid header name", "spec.probe.httpGet.httpHeaders[0].name")),
            ),
            (
                "template uds with ports",
                "template: {address: 'unix:///a', ports: {http: 80}}",
                Some(("UDS may not include ports", "spec.template.ports")),
            ),
            (
                "template with address",
                "template: {address: 1.2.3.4, ports: {http: 80}, labels: {app: a}}",
                None,
            ),
        ];
        for (name, yaml, want) in cases {
            let report = run(validate, &meta("wg", "default"), &spec::<WorkloadGroup>(yaml));
            match want {
                None => assert!(report.is_valid(), "{name}: {report:?}"),
                Some((message, path)) => assert!(
                    report.errors.iter().any(|e| e.message.contains(message) && e.path == *path),
                    "{name}: want {message:?} at {path}, got {report:?}"
                ),
            }
            assert!(report.warnings.is_empty(), "{name}: {report:?}");
        }
    }
}
