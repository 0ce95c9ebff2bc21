//! Traffic policies: `validateTrafficPolicy`, `validateOutlierDetection`, `validateConnectionPool`,
//! `validatePortTrafficPolicies`, `validateTunnelSettings`, `validateProxyProtocol` and `agent.ValidateTLS`.

use api::networking::destination_rule::{
    ClientTlsSettings, ConnectionPoolSettings, OutlierDetection, TrafficPolicy,
    client_tls_settings::TlSmode,
    connection_pool_settings::http_settings::H2UpgradePolicy,
    traffic_policy::{PortTrafficPolicy, ProxyProtocol, TunnelSettings, proxy_protocol::Version},
};

use super::{check_range, load_balancer::validate_load_balancer};
use crate::{
    Report,
    common::{
        check_enum, go_duration_nanos, go_quote, validate_duration, validate_fqdn, validate_ip_address,
        validate_percent, validate_port,
    },
};

/// Prefix of a `credentialName` read from a ConfigMap (`configmap://namespace/name`).
const CONFIG_MAP_CREDENTIAL_PREFIX: &str = "configmap://";
/// Istio's `validateTrafficPolicy` for a policy at `path` (top level or in a subset).
pub(super) fn validate_traffic_policy(
    namespace: &str,
    policy: &TrafficPolicy,
    path: &str,
    report: &mut Report,
) {
    if policy.outlier_detection.is_none()
        && policy.connection_pool.is_none()
        && policy.load_balancer.is_none()
        && policy.tls.is_none()
        && policy.port_level_settings.is_empty()
        && policy.tunnel.is_none()
        && policy.proxy_protocol.is_none()
        && policy.retry_budget.is_none()
    {
        report.error(path, "traffic policy must have at least one field");
        return;
    }
    if policy.tunnel.is_some() && policy.proxy_protocol.is_some() {
        // Istio stops here: the other settings are not looked at.
        report.error(path, "tunnel and proxyProtocol must not be set together");
        return;
    }

    let outlier = policy.outlier_detection.as_ref();
    if let Some(o) = outlier {
        validate_outlier_detection(o, &format!("{path}.outlierDetection"), report);
    }
    if let Some(pool) = &policy.connection_pool {
        validate_connection_pool(pool, &format!("{path}.connectionPool"), report);
    }
    if let Some(lb) = &policy.load_balancer {
        validate_load_balancer(lb, outlier, &format!("{path}.loadBalancer"), report);
    }
    if let Some(tls) = &policy.tls {
        validate_tls(namespace, tls, &format!("{path}.tls"), report);
    }
    for (k, port_policy) in policy.port_level_settings.iter().enumerate() {
        validate_port_traffic_policy(
            namespace,
            port_policy,
            &format!("{path}.portLevelSettings[{k}]"),
            report,
        );
    }
    if let Some(tunnel) = &policy.tunnel {
        validate_tunnel(tunnel, &format!("{path}.tunnel"), report);
    }
    if let Some(proxy_protocol) = &policy.proxy_protocol {
        validate_proxy_protocol(proxy_protocol, &format!("{path}.proxyProtocol"), report);
    }
    if let Some(budget) = &policy.retry_budget {
        // Only the CRD checks the retry budget: a percentage between 0 and 100.
        if let Some(percent) = budget.percent {
            check_range(format!("{path}.retryBudget.percent"), percent, 0.0, Some(100.0), report);
        }
    }
}
/// Istio's `validateProxyProtocol`: version V1 or V2.
fn validate_proxy_protocol(proxy_protocol: &ProxyProtocol, path: &str, report: &mut Report) {
    let version = proxy_protocol.version;
    if version != Version::V1 as i32 && version != Version::V2 as i32 {
        report.error(format!("{path}.version"), format!("proxy protocol version is invalid: {version}"));
    }
}

/// Istio's `validateTunnelSettings`: `CONNECT` or `POST`, a target host that is an FQDN or IP
/// address, and a valid target port.
fn validate_tunnel(tunnel: &TunnelSettings, path: &str, report: &mut Report) {
    if !matches!(tunnel.protocol.as_str(), "" | "CONNECT" | "POST") {
        report.error(format!("{path}.protocol"), "tunnel protocol must be \"CONNECT\" or \"POST\"");
    }
    if let (Err(fqdn), Err(ip)) =
        (validate_fqdn(&tunnel.target_host), validate_ip_address(&tunnel.target_host))
    {
        report.error(
            format!("{path}.targetHost"),
            format!("tunnel target host must be valid FQDN or IP address: {fqdn}; {ip}"),
        );
    }
    if let Err(e) = validate_port(i64::from(tunnel.target_port)) {
        report.error(format!("{path}.targetPort"), format!("tunnel target port is invalid: {e}"));
    }
}

/// Istio's `validateOutlierDetection`, with the deprecation warning for `consecutiveErrors`.
fn validate_outlier_detection(outlier: &OutlierDetection, path: &str, report: &mut Report) {
    if let Some(d) = &outlier.base_ejection_time {
        report.check(format!("{path}.baseEjectionTime"), validate_duration(d));
    }
    if outlier.consecutive_errors != 0 {
        report.warn(
            format!("{path}.consecutiveErrors"),
            "outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead",
        );
    }
    if !outlier.split_external_local_origin_errors
        && outlier.consecutive_local_origin_failures.unwrap_or(0) > 0
    {
        report.error(
            format!("{path}.consecutiveLocalOriginFailures"),
            "outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false",
        );
    }
    if let Some(d) = &outlier.interval {
        report.check(format!("{path}.interval"), validate_duration(d));
    }
    report.check(
        format!("{path}.maxEjectionPercent"),
        validate_percent(i64::from(outlier.max_ejection_percent)),
    );
    report.check(format!("{path}.minHealthPercent"), validate_percent(i64::from(outlier.min_health_percent)));
    // The CRD limits the HTTP status codes to 100..599.
    for (k, code) in outlier.outlier_detection_http_error_codes.iter().enumerate() {
        check_range(
            format!("{path}.outlierDetectionHttpErrorCodes[{k}]"),
            f64::from(*code),
            100.0,
            Some(599.0),
            report,
        );
    }
}

/// Istio's `validateConnectionPool`: at least one of `tcp` and `http`, no negative limits, valid
/// durations (a TCP idle timeout of 0 disables it).
pub(crate) fn validate_connection_pool(pool: &ConnectionPoolSettings, path: &str, report: &mut Report) {
    if pool.http.is_none() && pool.tcp.is_none() {
        report.error(path, "connection pool must have at least one field");
        return;
    }
    if let Some(http) = &pool.http {
        let at = |field: &str| format!("{path}.http.{field}");
        for (field, value, what) in [
            ("http1MaxPendingRequests", http.http1_max_pending_requests, "http1 max pending requests"),
            ("http2MaxRequests", http.http2_max_requests, "http2 max requests"),
            ("maxRequestsPerConnection", http.max_requests_per_connection, "max requests per connection"),
            ("maxRetries", http.max_retries, "max retries"),
        ] {
            if value < 0 {
                report.error(at(field), format!("{what} must be non-negative"));
            }
        }
        if let Some(d) = &http.idle_timeout {
            report.check(at("idleTimeout"), validate_duration(d));
        }
        check_enum::<H2UpgradePolicy>(at("h2UpgradePolicy"), http.h2_upgrade_policy, report);
        if http.h2_upgrade_policy == H2UpgradePolicy::Upgrade as i32 && http.use_client_protocol {
            report.error(
                at("useClientProtocol"),
                "use client protocol must not be true when H2UpgradePolicy is UPGRADE",
            );
        }
        if http.max_concurrent_streams < 0 {
            report.error(at("maxConcurrentStreams"), "max concurrent streams must be non-negative");
        }
        if let Some(keepalive) = &http.http2_keep_alive {
            match &keepalive.interval {
                None => report.error(at("http2KeepAlive.interval"), "http2 keepalive interval is required"),
                Some(d) => report.check(at("http2KeepAlive.interval"), validate_duration(d)),
            }
            match &keepalive.timeout {
                None => report.error(at("http2KeepAlive.timeout"), "http2 keepalive timeout is required"),
                Some(d) => report.check(at("http2KeepAlive.timeout"), validate_duration(d)),
            }
        }
    }
    if let Some(tcp) = &pool.tcp {
        let at = |field: &str| format!("{path}.tcp.{field}");
        if tcp.max_connections < 0 {
            report.error(at("maxConnections"), "max connections must be non-negative");
        }
        if let Some(d) = &tcp.connect_timeout {
            report.check(at("connectTimeout"), validate_duration(d));
        }
        if let Some(d) = &tcp.max_connection_duration {
            report.check(at("maxConnectionDuration"), validate_duration(d));
        }
        if let Some(d) = &tcp.idle_timeout {
            // Zero (whole milliseconds, truncated) disables the timeout.
            if go_duration_nanos(d) / 1_000_000 != 0 {
                report.check(at("idleTimeout"), validate_duration(d));
            }
        }
        if let Some(keepalive) = &tcp.tcp_keepalive {
            if let Some(d) = &keepalive.time {
                report.check(at("tcpKeepalive.time"), validate_duration(d));
            }
            if let Some(d) = &keepalive.interval {
                report.check(at("tcpKeepalive.interval"), validate_duration(d));
            }
        }
    }
}
/// Istio's `validatePortTrafficPolicies` for one entry: a port and at least one setting. Istio combines
/// the entry's checks with `appendErrors`, which drops their warnings; so does this.
fn validate_port_traffic_policy(
    namespace: &str,
    policy: &PortTrafficPolicy,
    path: &str,
    report: &mut Report,
) {
    report.errors_of(|r| port_traffic_policy(namespace, policy, path, r));
}

fn port_traffic_policy(namespace: &str, policy: &PortTrafficPolicy, path: &str, report: &mut Report) {
    if policy.port.is_none() {
        report.error(format!("{path}.port"), "portTrafficPolicy must have valid port");
    }
    if policy.outlier_detection.is_none()
        && policy.connection_pool.is_none()
        && policy.load_balancer.is_none()
        && policy.tls.is_none()
    {
        report.error(path, "port traffic policy must have at least one field");
        return;
    }
    let outlier = policy.outlier_detection.as_ref();
    if let Some(o) = outlier {
        validate_outlier_detection(o, &format!("{path}.outlierDetection"), report);
    }
    if let Some(pool) = &policy.connection_pool {
        validate_connection_pool(pool, &format!("{path}.connectionPool"), report);
    }
    if let Some(lb) = &policy.load_balancer {
        validate_load_balancer(lb, outlier, &format!("{path}.loadBalancer"), report);
    }
    if let Some(tls) = &policy.tls {
        validate_tls(namespace, tls, &format!("{path}.tls"), report);
    }
}

/// Istio's `agent.ValidateTLS` for a client TLS block at `path`.
fn validate_tls(namespace: &str, tls: &ClientTlsSettings, path: &str, report: &mut Report) {
    check_enum::<TlSmode>(format!("{path}.mode"), tls.mode, report);
    if let Some(rest) = tls.credential_name.strip_prefix(CONFIG_MAP_CREDENTIAL_PREFIX) {
        let at = format!("{path}.credentialName");
        let name = &tls.credential_name;
        let mut parts = rest.split('/');
        match (parts.next(), parts.next()) {
            (_, None) => report.error(
                at,
                format!(
                    "invalid configmap:// credentialName: invalid resource name {}. Expected namespace and name",
                    go_quote(name)
                ),
            ),
            (Some(""), Some(_)) => report.error(
                at,
                format!("invalid configmap:// credentialName: invalid resource name {}. Expected namespace", go_quote(name)),
            ),
            (_, Some("")) => report.error(
                at,
                format!("invalid configmap:// credentialName: invalid resource name {}. Expected name", go_quote(name)),
            ),
            (Some(ns), Some(_)) if ns != namespace || namespace.is_empty() => report.error(
                at,
                format!(
                    "invalid configmap:// credentialName: namespace must match the configuration namespace {}",
                    go_quote(namespace)
                ),
            ),
            _ => {}
        }
    }

    let simple = tls.mode == TlSmode::Simple as i32;
    let mutual = tls.mode == TlSmode::Mutual as i32;
    if tls.insecure_skip_verify == Some(true) {
        if simple
            && (!tls.ca_certificates.is_empty()
                || !tls.credential_name.is_empty()
                || !tls.subject_alt_names.is_empty())
        {
            report.error(
                format!("{path}.insecureSkipVerify"),
                "cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true",
            );
        }
        if mutual && (!tls.ca_certificates.is_empty() || !tls.subject_alt_names.is_empty()) {
            report.error(
                format!("{path}.insecureSkipVerify"),
                "cannot specify CaCertificates or SubjectAltNames when InsecureSkipVerify is set true",
            );
        }
    }

    if (simple || mutual) && !tls.credential_name.is_empty() {
        if !tls.client_certificate.is_empty()
            || !tls.ca_certificates.is_empty()
            || !tls.private_key.is_empty()
            || !tls.ca_crl.is_empty()
        {
            report.error(
                format!("{path}.credentialName"),
                "cannot specify client certificates or CA certificate or CA CRL If credentialName is set",
            );
        }
        // The certificates come from the credential.
        return;
    }
    if mutual {
        if tls.client_certificate.is_empty() {
            report.error(format!("{path}.clientCertificate"), "client certificate required for mutual tls");
        }
        if tls.private_key.is_empty() {
            report.error(format!("{path}.privateKey"), "private key required for mutual tls");
        }
    }
}
