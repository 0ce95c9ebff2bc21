//! DestinationRule validation, following Istio's `ValidateDestinationRule`
//! (pkg/config/validation/validation.go) and what it calls: `validateTrafficPolicy`,
//! `validateOutlierDetection`, `validateConnectionPool`, `validateLoadBalancer`,
//! `validatePortTrafficPolicies`, `validateTunnelSettings`, `validateProxyProtocol`, `validateSubset`,
//! `validateExportTo`, `validateWorkloadSelector`, and from pkg/config/validation/agent `ValidateTLS`,
//! `ValidateLocalityLbSetting` and `ValidateZoneAwareLbSetting`.
//!
//! The CRD schema adds rules the webhook does not have; those enforced here are the proto oneofs
//! (`simple`/`consistentHash`, the consistent-hash key and algorithm), the 1ms minimum of
//! `warmupDurationSecs`, the ranges of `warmup.minimumPercent`, `retryBudget.percent`,
//! `outlierDetectionHttpErrorCodes` and `zoneAwareLbSetting.minClusterSize`, enum names, and the
//! `workloadSelector.matchLabels` limits.

use crate::common::{check_enum, check_oneof};
use std::collections::{BTreeMap, BTreeSet};

use api::{
    meta::ObjectMeta,
    networking::destination_rule::{
        ClientTlsSettings, ConnectionPoolSettings, LoadBalancerSettings, LocalityLoadBalancerSetting,
        OutlierDetection, TrafficPolicy, ZoneAwareLoadBalancerSetting,
        client_tls_settings::TlSmode,
        connection_pool_settings::http_settings::H2UpgradePolicy,
        load_balancer_settings::{ConsistentHashLb, SimpleLb},
        traffic_policy::{PortTrafficPolicy, ProxyProtocol, TunnelSettings, proxy_protocol::Version},
    },
    wkt::Duration,
};

use crate::{
    Report,
    common::{
        check_workload_selector, go_duration_nanos, go_float, go_quote, validate_duration,
        validate_export_to, validate_fqdn, validate_ip_address, validate_labels, validate_percent,
        validate_port, validate_subset_name, validate_wildcard_domain,
    },
};

/// The namespace of an object that names none (as `istioctl validate` and the API server assume).
const DEFAULT_NAMESPACE: &str = "default";

/// Topology labels that locality failover settings may not name in `failoverPriority`.
const TOPOLOGY_LABELS: [&str; 3] =
    ["topology.kubernetes.io/region", "topology.kubernetes.io/zone", "topology.istio.io/subzone"];

/// Prefix of a `credentialName` read from a ConfigMap (`configmap://namespace/name`).
const CONFIG_MAP_CREDENTIAL_PREFIX: &str = "configmap://";

/// The smallest Maglev table size Envoy rejects.
const MAGLEV_TABLE_SIZE_LIMIT: u64 = 5_000_011;

/// Most entries the CRD allows in `workloadSelector.matchLabels`.
const MAX_SELECTOR_LABELS: usize = 4096;

/// Longest `workloadSelector.matchLabels` value the CRD allows.
const MAX_SELECTOR_LABEL_VALUE: usize = 63;

/// Validates a DestinationRule; findings use paths from the document root (`spec.…`).
///
/// `meta.namespace` matters to `exportTo` (`.` is the own namespace) and to `configmap://`
/// credential names, which must name the rule's own namespace.
pub fn validate(meta: &ObjectMeta, spec: &api::networking::DestinationRule, report: &mut Report) {
    // Like istioctl, an object without a namespace is taken to live in `default`.
    let namespace = if meta.namespace.is_empty() { DEFAULT_NAMESPACE } else { meta.namespace.as_str() };
    report.check("spec.host", validate_wildcard_domain(&spec.host));
    if let Some(policy) = &spec.traffic_policy {
        validate_traffic_policy(namespace, policy, "spec.trafficPolicy", report);
    }

    let mut names = BTreeSet::new();
    for (i, subset) in spec.subsets.iter().enumerate() {
        let path = format!("spec.subsets[{i}]");
        if !names.insert(subset.name.as_str()) {
            report.error(format!("{path}.name"), format!("duplicate subset names: {}", subset.name));
        }
        report.check(format!("{path}.name"), validate_subset_name(&subset.name));
        report.check(format!("{path}.labels"), validate_labels(&subset.labels));
        if let Some(policy) = &subset.traffic_policy {
            validate_traffic_policy(namespace, policy, &format!("{path}.trafficPolicy"), report);
        }
    }

    report.check(
        "spec.exportTo",
        validate_export_to(namespace, &spec.export_to, false, spec.workload_selector.is_some()),
    );

    if let Some(selector) = &spec.workload_selector {
        check_workload_selector("spec.workloadSelector", &selector.match_labels, report);
        check_selector_schema(&selector.match_labels, report);
    }
}

/// The CRD limits of `workloadSelector.matchLabels`: at most 4096 entries, values of at most 63
/// characters. (Empty keys and `*` are the webhook's errors too.)
fn check_selector_schema(labels: &BTreeMap<String, String>, report: &mut Report) {
    let path = "spec.workloadSelector.matchLabels";
    if labels.len() > MAX_SELECTOR_LABELS {
        report.error(
            path,
            format!("Too many: {}: must have at most {MAX_SELECTOR_LABELS} items", labels.len()),
        );
    }
    for (key, value) in labels {
        if value.len() > MAX_SELECTOR_LABEL_VALUE {
            report.error(
                format!("{path}.{key}"),
                format!("Too long: may not be more than {MAX_SELECTOR_LABEL_VALUE} bytes"),
            );
        }
    }
}

/// The CRD's `duration(self) >= duration('1ms')` rule on duration fields.
fn check_min_duration(path: String, d: &Duration, report: &mut Report) {
    if go_duration_nanos(d) < 1_000_000 {
        report.error(path, "must be a valid duration greater than 1ms");
    }
}

/// Istio's `validateTrafficPolicy` for a policy at `path` (top level or in a subset).
fn validate_traffic_policy(namespace: &str, policy: &TrafficPolicy, path: &str, report: &mut Report) {
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

/// The CRD's `minimum` / `maximum` on a floating-point field, in the API server's words.
fn check_range(path: String, value: f64, min: f64, max: Option<f64>, report: &mut Report) {
    if value < min {
        report.error(
            path,
            format!(
                "Invalid value: {}: should be greater than or equal to {}",
                go_float(value),
                go_float(min)
            ),
        );
    } else if let Some(max) = max.filter(|max| value > *max) {
        report.error(
            path,
            format!("Invalid value: {}: should be less than or equal to {}", go_float(value), go_float(max)),
        );
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

/// Istio's `validateLoadBalancer` (with the outlier detection of the same policy, which locality
/// failover needs), plus the CRD's oneofs and ranges.
fn validate_load_balancer(
    lb: &LoadBalancerSettings,
    outlier: Option<&OutlierDetection>,
    path: &str,
    report: &mut Report,
) {
    check_oneof(
        path,
        &[("simple", lb.simple.is_some()), ("consistentHash", lb.consistent_hash.is_some())],
        report,
    );
    if let Some(simple) = lb.simple {
        check_enum::<SimpleLb>(format!("{path}.simple"), simple, report);
    }
    if let Some(hash) = &lb.consistent_hash {
        validate_consistent_hash(hash, &format!("{path}.consistentHash"), report);
    }

    if lb.locality_lb_setting.is_some() && lb.zone_aware_lb_setting.is_some() {
        report.error(path, "only one of localityLbSetting and zoneAwareLbSetting can be set");
    }
    if let Some(locality) = &lb.locality_lb_setting {
        validate_locality_lb_setting(locality, outlier, &format!("{path}.localityLbSetting"), report);
    }
    if let Some(zone_aware) = &lb.zone_aware_lb_setting {
        validate_zone_aware_lb_setting(zone_aware, outlier, &format!("{path}.zoneAwareLbSetting"), report);
    }

    if let Some(warmup) = &lb.warmup {
        match &warmup.duration {
            None => report.error(format!("{path}.warmup.duration"), "duration is required"),
            Some(d) => report.check(format!("{path}.warmup.duration"), validate_duration(d)),
        }
        if let Some(min) = warmup.minimum_percent {
            if min > 100.0 {
                report.error(
                    format!("{path}.warmup.minimumPercent"),
                    "minimumPercent value should be less than or equal to 100",
                );
            } else {
                check_range(format!("{path}.warmup.minimumPercent"), min, 0.0, None, report);
            }
        }
        if let Some(aggression) = warmup.aggression
            && aggression <= 0.0
        {
            report.error(format!("{path}.warmup.aggression"), "aggression should be greater than 0");
        }
    }
    if let Some(d) = &lb.warmup_duration_secs {
        check_min_duration(format!("{path}.warmupDurationSecs"), d, report);
    }
}

/// The consistent-hash part of Istio's `validateLoadBalancer`, plus the CRD's two oneofs.
fn validate_consistent_hash(hash: &ConsistentHashLb, path: &str, report: &mut Report) {
    check_oneof(
        path,
        &[
            ("httpHeaderName", hash.http_header_name.is_some()),
            ("httpCookie", hash.http_cookie.is_some()),
            ("useSourceIp", hash.use_source_ip.is_some()),
            ("httpQueryParameterName", hash.http_query_parameter_name.is_some()),
        ],
        report,
    );
    let algorithm_set = hash.ring_hash.is_some() || hash.maglev.is_some();
    check_oneof(path, &[("ringHash", hash.ring_hash.is_some()), ("maglev", hash.maglev.is_some())], report);

    if let Some(cookie) = &hash.http_cookie {
        if cookie.name.is_empty() {
            report.error(format!("{path}.httpCookie.name"), "name required for HttpCookie");
        }
        let mut names = BTreeSet::new();
        for (k, attribute) in cookie.attributes.iter().enumerate() {
            let at = format!("{path}.httpCookie.attributes[{k}].name");
            if attribute.name.is_empty() {
                report.error(at, "cookie attribute name cannot be empty");
            } else if !names.insert(attribute.name.as_str()) {
                report.error(at, format!("duplicate cookie attribute name: {}", attribute.name));
            }
        }
    }
    if hash.minimum_ring_size != 0 {
        report.warn(
            format!("{path}.minimumRingSize"),
            "consistent hash MinimumRingSize is deprecated, use ConsistentHashLB's RingHash configuration instead",
        );
        if algorithm_set {
            report.error(
                format!("{path}.minimumRingSize"),
                "only one of MinimumRingSize or Maglev/Ringhash can be specified",
            );
        }
    }
    if let Some(maglev) = &hash.maglev {
        let at = format!("{path}.maglev.tableSize");
        let size = maglev.table_size;
        if size == 0 {
            report.error(&at, "tableSize must be set for maglev");
        }
        if size >= MAGLEV_TABLE_SIZE_LIMIT {
            report.error(&at, format!("tableSize must be less than {MAGLEV_TABLE_SIZE_LIMIT} for maglev"));
        }
        if !is_prime(size) {
            report.error(&at, "tableSize must be a prime number for maglev");
        }
    }
}

/// Primality as Envoy (and Istio) test the Maglev table size: 1, 2 and 3 count as prime, 0 does not.
///
/// Envoy uses trial division; sizes that large are rejected anyway, so numbers beyond the table
/// limit are tested with a deterministic Miller-Rabin instead of billions of divisions.
fn is_prime(x: u64) -> bool {
    if x != 0 && x < 4 {
        return true;
    }
    if x & 1 == 0 {
        return false;
    }
    if x < MAGLEV_TABLE_SIZE_LIMIT {
        let mut factor = 3u64;
        while factor * factor <= x {
            if x.is_multiple_of(factor) {
                return false;
            }
            factor += 2;
        }
        return true;
    }
    miller_rabin(x)
}

/// Deterministic Miller-Rabin for odd 64-bit numbers above 37.
fn miller_rabin(n: u64) -> bool {
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    let mul = |a: u64, b: u64| ((u128::from(a) * u128::from(b)) % u128::from(n)) as u64;
    let pow = |mut base: u64, mut exp: u64| {
        let mut result = 1u64;
        base %= n;
        while exp > 0 {
            if exp & 1 == 1 {
                result = mul(result, base);
            }
            base = mul(base, base);
            exp >>= 1;
        }
        result
    };
    let d_shift = (n - 1).trailing_zeros();
    let d = (n - 1) >> d_shift;
    'bases: for a in BASES {
        if n.is_multiple_of(a) {
            return n == a;
        }
        let mut x = pow(a, d);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..d_shift {
            x = mul(x, x);
            if x == n - 1 {
                continue 'bases;
            }
        }
        return false;
    }
    true
}

/// Istio's `ValidateLocalityLbSetting`: `distribute` or `failover` (not both), weights of each
/// `distribute` entry in 1..100 adding up to 100, non-overlapping localities, region-only failovers.
fn validate_locality_lb_setting(
    lb: &LocalityLoadBalancerSetting,
    outlier: Option<&OutlierDetection>,
    path: &str,
    report: &mut Report,
) {
    if !lb.distribute.is_empty() && !lb.failover.is_empty() {
        report.error(path, "can not simultaneously specify 'distribute' and 'failover'");
        return;
    }
    if !lb.failover.is_empty()
        && let Some(label) = lb.failover_priority.iter().find(|l| TOPOLOGY_LABELS.contains(&l.as_str()))
    {
        report.error(
            format!("{path}.failoverPriority"),
            format!(
                "can not simultaneously set 'failover' and topology label '{label}' in 'failover_priority'"
            ),
        );
        return;
    }

    let mut sources = Vec::new();
    for (k, distribute) in lb.distribute.iter().enumerate() {
        sources.push(distribute.from.as_str());
        let at = format!("{path}.distribute[{k}].to");
        let mut total: u32 = 0;
        for weight in distribute.to.values() {
            if *weight == 0 || *weight > 100 {
                report.error(at, "locality weight must be in range [1, 100]");
                return;
            }
            total = total.wrapping_add(*weight);
        }
        if total != 100 {
            report.error(at, format!("total locality weight {total} != 100"));
            return;
        }
        let destinations: Vec<&str> = distribute.to.keys().map(String::as_str).collect();
        report.check(at, validate_localities(&destinations));
    }
    report.check(format!("{path}.distribute"), validate_localities(&sources));

    if (!lb.failover.is_empty() || !lb.failover_priority.is_empty()) && outlier.is_none() {
        report.warn(path, "outlier detection policy must be provided for failover");
    }
    for (k, failover) in lb.failover.iter().enumerate() {
        let at = format!("{path}.failover[{k}]");
        if failover.from == failover.to {
            report.error(&at, "locality lb failover settings must specify different regions");
        }
        if failover.from.contains('/') || failover.to.contains('/') {
            report.error(&at, "locality lb failover only specify region");
        }
        if failover.from.contains('*') || failover.to.contains('*') {
            report.error(&at, "locality lb failover region should not contain '*' wildcard");
        }
    }
}

/// Istio's `ValidateZoneAwareLbSetting`: no topology labels in `failoverPriority`, region-only
/// failovers, and the CRD's minimum `minClusterSize` of 1.
fn validate_zone_aware_lb_setting(
    lb: &ZoneAwareLoadBalancerSetting,
    outlier: Option<&OutlierDetection>,
    path: &str,
    report: &mut Report,
) {
    for (k, label) in lb.failover_priority.iter().enumerate() {
        if TOPOLOGY_LABELS.contains(&label.as_str()) {
            report.error(
                format!("{path}.failoverPriority[{k}]"),
                format!(
                    "'failover_priority' for zone aware lb must not use topology label '{label}'; region- and zone-level routing are handled automatically"
                ),
            );
        }
    }
    if (!lb.failover.is_empty() || !lb.failover_priority.is_empty()) && outlier.is_none() {
        report.warn(path, "outlier detection policy must be provided for failover");
    }
    for (k, failover) in lb.failover.iter().enumerate() {
        let at = format!("{path}.failover[{k}]");
        if failover.from == failover.to {
            report.error(&at, "zone aware lb failover settings must specify different regions");
        }
        if failover.from.contains('/') || failover.to.contains('/') {
            report.error(
                &at,
                "zone aware lb failover only specifies region; zone and subzone failover are handled automatically",
            );
        }
        if failover.from.contains('*') || failover.to.contains('*') {
            report.error(&at, "zone aware lb failover region should not contain '*' wildcard");
        }
    }
    if lb.min_cluster_size == Some(0) {
        report.error(
            format!("{path}.minClusterSize"),
            "Invalid value: 0: should be greater than or equal to 1",
        );
    }
}

/// Istio's `validateLocalities`: `region[/zone[/subzone]]` with a `*` only as the last character, no
/// empty parts, and no locality covered by an earlier one. Returns the first problem.
fn validate_localities(localities: &[&str]) -> Result<(), String> {
    // region → zone → subzones; `*` stands for "all".
    let mut seen: BTreeMap<&str, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    let overlap = |locality: &str| format!("locality {locality} overlap with previous specified ones");
    for locality in localities {
        let stars = locality.matches('*').count();
        if stars > 1 || (stars == 1 && !locality.ends_with('*')) {
            return Err(format!(
                "locality {locality} wildcard '*' number can not exceed 1 and must be in the end"
            ));
        }
        if seen.contains_key("*") {
            return Err(overlap(locality));
        }
        let parts: Vec<&str> = locality.splitn(3, '/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(format!("locality {locality} must not contain empty region/zone/subzone info"));
        }
        match parts.as_slice() {
            [region] => {
                if seen.contains_key(region) {
                    return Err(overlap(locality));
                }
                seen.insert(region, BTreeMap::from([("*", BTreeSet::from(["*"]))]));
            }
            [region, zone] => match seen.get_mut(region) {
                Some(zones) => {
                    if zones.contains_key("*") || zones.contains_key(zone) {
                        return Err(overlap(locality));
                    }
                    zones.insert(zone, BTreeSet::from(["*"]));
                }
                None => {
                    seen.insert(region, BTreeMap::from([(*zone, BTreeSet::from(["*"]))]));
                }
            },
            [region, zone, subzone] => match seen.get_mut(region) {
                Some(zones) => {
                    if zones.contains_key("*") {
                        return Err(overlap(locality));
                    }
                    match zones.get_mut(zone) {
                        Some(subzones) => {
                            if subzones.contains("*") || subzones.contains(subzone) {
                                return Err(overlap(locality));
                            }
                            subzones.insert(subzone);
                        }
                        None => {
                            zones.insert(zone, BTreeSet::from([*subzone]));
                        }
                    }
                }
                None => {
                    seen.insert(region, BTreeMap::from([(*zone, BTreeSet::from([*subzone]))]));
                }
            },
            _ => {}
        }
    }
    Ok(())
}

/// Istio's `validatePortTrafficPolicies` for one entry: a port and at least one setting.
fn validate_port_traffic_policy(
    namespace: &str,
    policy: &PortTrafficPolicy,
    path: &str,
    report: &mut Report,
) {
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

#[cfg(test)]
mod tests {
    use api::networking::DestinationRule;

    use super::*;
    use crate::testutil::{
        Want::{self, Error, Valid, Warning},
        check, meta, run, spec,
    };

    fn check_all(cases: &[(&str, &str, Want)]) {
        crate::testutil::check_all::<DestinationRule>(validate, &meta("dr", "ns1"), cases);
    }

    /// A rule for host `reviews` with the given top-level traffic policy (flow-style YAML).
    fn policy(tp: &str) -> String {
        format!("host: reviews\ntrafficPolicy: {tp}")
    }

    const TP: &str = "spec.trafficPolicy";

    #[test]
    fn destination_rule_cases_from_istio() {
        let good_policy = "{loadBalancer: {simple: ROUND_ROBIN}, connectionPool: {tcp: {maxConnections: 7}, http: {http2MaxRequests: 11}}, outlierDetection: {minHealthPercent: 20}}";
        let bad_policy = "{loadBalancer: {simple: ROUND_ROBIN}, connectionPool: {}, outlierDetection: {minHealthPercent: 20}}";
        check_all(&[
            (
                "simple destination rule",
                "host: reviews\nsubsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]",
                Valid,
            ),
            (
                "empty selector labels",
                "host: reviews\nsubsets: [{name: v1, labels: {version: v1}}]\nworkloadSelector: {}",
                Warning("spec.workloadSelector", "workload selector specified without labels"),
            ),
            (
                "missing host",
                "subsets: [{name: v1, labels: {version: v1}}]",
                Error("spec.host", "empty domain name not allowed"),
            ),
            ("bad host", "host: foo.*.com", Error("spec.host", "invalid")),
            ("wildcard host", "host: '*.foo.com'", Valid),
            (
                "missing subset name",
                "host: reviews\nsubsets: [{labels: {version: v1}}, {name: v2, labels: {version: v2}}]",
                Error("spec.subsets[0].name", "subset name cannot be empty"),
            ),
            (
                "duplicate subset names",
                "host: reviews\nsubsets: [{name: foo, labels: {version: v1}}, {name: foo, labels: {version: v2}}]",
                Error("spec.subsets[1].name", "duplicate subset names: foo"),
            ),
            (
                "bad subset labels",
                "host: reviews\nsubsets: [{name: v1, labels: {'@bad': v1}}]",
                Error("spec.subsets[0].labels", "invalid tag key"),
            ),
            (
                "valid traffic policy, top level",
                &format!("host: reviews\ntrafficPolicy: {good_policy}\nsubsets: [{{name: v1}}]"),
                Valid,
            ),
            (
                "invalid traffic policy, top level",
                &format!("host: reviews\ntrafficPolicy: {bad_policy}"),
                Error("spec.trafficPolicy.connectionPool", "connection pool must have at least one field"),
            ),
            (
                "valid traffic policy, subset level",
                &format!("host: reviews\nsubsets: [{{name: v1, trafficPolicy: {good_policy}}}]"),
                Valid,
            ),
            (
                "invalid traffic policy, subset level",
                &format!("host: reviews\nsubsets: [{{name: v1, trafficPolicy: {bad_policy}}}, {{name: v2}}]"),
                Error(
                    "spec.subsets[0].trafficPolicy.connectionPool",
                    "connection pool must have at least one field",
                ),
            ),
            (
                "valid traffic policy, both levels",
                &format!(
                    "host: reviews\ntrafficPolicy: {good_policy}\nsubsets: [{{name: v1, trafficPolicy: {good_policy}}}]"
                ),
                Valid,
            ),
        ]);
    }

    #[test]
    fn insecure_skip_verify_cases_from_istio() {
        let tls = |t: &str| policy(&format!("{{tls: {t}}}"));
        let at = "spec.trafficPolicy.tls.insecureSkipVerify";
        check_all(&[
            (
                "simple, CA",
                &tls("{mode: SIMPLE, caCertificates: test, subjectAltNames: [reviews.default.svc]}"),
                Valid,
            ),
            (
                "simple, credential",
                &tls("{mode: SIMPLE, credentialName: test, subjectAltNames: [reviews.default.svc]}"),
                Valid,
            ),
            (
                "simple, skip false, CA",
                &tls("{mode: SIMPLE, caCertificates: test, subjectAltNames: [r], insecureSkipVerify: false}"),
                Valid,
            ),
            (
                "simple, skip true, credential",
                &tls("{mode: SIMPLE, credentialName: test, insecureSkipVerify: true}"),
                Error(
                    at,
                    "cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true",
                ),
            ),
            (
                "simple, skip true, CA",
                &tls("{mode: SIMPLE, caCertificates: test, insecureSkipVerify: true}"),
                Error(at, "cannot specify CaCertificates or CredentialName or SubjectAltNames"),
            ),
            (
                "simple, skip true, SAN",
                &tls("{mode: SIMPLE, subjectAltNames: [reviews.default.svc], insecureSkipVerify: true}"),
                Error(at, "cannot specify CaCertificates or CredentialName or SubjectAltNames"),
            ),
            (
                "mutual, CA",
                &tls(
                    "{mode: MUTUAL, caCertificates: test, privateKey: key, clientCertificate: cert, subjectAltNames: [r]}",
                ),
                Valid,
            ),
            ("mutual, credential", &tls("{mode: MUTUAL, credentialName: test, subjectAltNames: [r]}"), Valid),
            (
                "mutual, skip true, CA",
                &tls(
                    "{mode: MUTUAL, caCertificates: test, privateKey: key, clientCertificate: cert, insecureSkipVerify: true}",
                ),
                Error(
                    at,
                    "cannot specify CaCertificates or SubjectAltNames when InsecureSkipVerify is set true",
                ),
            ),
            (
                "mutual, skip true, credential",
                &tls("{mode: MUTUAL, credentialName: test, insecureSkipVerify: true}"),
                Valid,
            ),
            (
                "mutual, skip true, no CA",
                &tls("{mode: MUTUAL, privateKey: key, clientCertificate: cert, insecureSkipVerify: true}"),
                Valid,
            ),
            (
                "mutual, skip true, SAN",
                &tls(
                    "{mode: MUTUAL, privateKey: key, clientCertificate: cert, subjectAltNames: [r], insecureSkipVerify: true}",
                ),
                Error(at, "cannot specify CaCertificates or SubjectAltNames"),
            ),
        ]);
    }

    #[test]
    fn client_tls_cases_from_istio() {
        let tls = |t: &str| policy(&format!("{{tls: {t}}}"));
        let at = |f: &'static str| -> &'static str {
            match f {
                "credentialName" => "spec.trafficPolicy.tls.credentialName",
                "clientCertificate" => "spec.trafficPolicy.tls.clientCertificate",
                _ => "spec.trafficPolicy.tls.privateKey",
            }
        };
        let both = "cannot specify client certificates or CA certificate or CA CRL If credentialName is set";
        check_all(&[
            ("SIMPLE: credential name", &tls("{mode: SIMPLE, credentialName: some credential}"), Valid),
            (
                "SIMPLE: credential and cert",
                &tls("{mode: SIMPLE, credentialName: c, clientCertificate: cert}"),
                Error(at("credentialName"), both),
            ),
            (
                "SIMPLE: credential and key",
                &tls("{mode: SIMPLE, credentialName: c, privateKey: key}"),
                Error(at("credentialName"), both),
            ),
            (
                "SIMPLE: credential and CA",
                &tls("{mode: SIMPLE, credentialName: c, caCertificates: ca}"),
                Error(at("credentialName"), both),
            ),
            ("MUTUAL: credential name", &tls("{mode: MUTUAL, credentialName: some credential}"), Valid),
            (
                "MUTUAL: credential and cert",
                &tls("{mode: MUTUAL, credentialName: c, clientCertificate: cert}"),
                Error(at("credentialName"), both),
            ),
            (
                "MUTUAL: credential and CRL",
                &tls("{mode: MUTUAL, credentialName: c, caCrl: ca}"),
                Error(at("credentialName"), both),
            ),
            ("MUTUAL: cert and key", &tls("{mode: MUTUAL, clientCertificate: cert, privateKey: key}"), Valid),
            (
                "MUTUAL: key missing",
                &tls("{mode: MUTUAL, clientCertificate: cert}"),
                Error(at("privateKey"), "private key required for mutual tls"),
            ),
            (
                "MUTUAL: cert missing",
                &tls("{mode: MUTUAL, privateKey: key}"),
                Error(at("clientCertificate"), "client certificate required for mutual tls"),
            ),
            ("ISTIO_MUTUAL", &tls("{mode: ISTIO_MUTUAL}"), Valid),
            (
                "configmap credential in own namespace",
                &tls("{mode: SIMPLE, credentialName: 'configmap://ns1/ca'}"),
                Valid,
            ),
            (
                "configmap credential in another namespace",
                &tls("{mode: SIMPLE, credentialName: 'configmap://ns2/ca'}"),
                Error(at("credentialName"), "namespace must match the configuration namespace \"ns1\""),
            ),
            (
                "configmap credential without namespace",
                &tls("{mode: SIMPLE, credentialName: 'configmap://ca'}"),
                Error(
                    at("credentialName"),
                    "invalid resource name \"configmap://ca\". Expected namespace and name",
                ),
            ),
        ]);
    }

    #[test]
    fn traffic_policy_cases_from_istio() {
        check_all(&[
            ("empty policy", &policy("{}"), Error(TP, "traffic policy must have at least one field")),
            (
                "missing port in port level settings",
                &policy(
                    "{portLevelSettings: [{loadBalancer: {simple: ROUND_ROBIN}, outlierDetection: {minHealthPercent: 20}}]}",
                ),
                Error(
                    "spec.trafficPolicy.portLevelSettings[0].port",
                    "portTrafficPolicy must have valid port",
                ),
            ),
            (
                "empty port level settings",
                &policy("{portLevelSettings: [{port: {number: 80}}]}"),
                Error(
                    "spec.trafficPolicy.portLevelSettings[0]",
                    "port traffic policy must have at least one field",
                ),
            ),
            (
                "port level settings are validated",
                &policy(
                    "{portLevelSettings: [{port: {number: 80}, outlierDetection: {maxEjectionPercent: 105}}]}",
                ),
                Error(
                    "spec.trafficPolicy.portLevelSettings[0].outlierDetection.maxEjectionPercent",
                    "percentage 105 is not in range 0..100",
                ),
            ),
            (
                "bad max connection duration",
                &policy("{connectionPool: {tcp: {maxConnectionDuration: 0.0000005s}}}"),
                Error(
                    "spec.trafficPolicy.connectionPool.tcp.maxConnectionDuration",
                    "duration must be greater than 1ms",
                ),
            ),
            (
                "panic threshold too low",
                &policy("{outlierDetection: {minHealthPercent: -1}}"),
                Error(
                    "spec.trafficPolicy.outlierDetection.minHealthPercent",
                    "percentage -1 is not in range 0..100",
                ),
            ),
            (
                "both upgrade and use client protocol set",
                &policy("{connectionPool: {http: {h2UpgradePolicy: UPGRADE, useClientProtocol: true}}}"),
                Error(
                    "spec.trafficPolicy.connectionPool.http.useClientProtocol",
                    "use client protocol must not be true when H2UpgradePolicy is UPGRADE",
                ),
            ),
            (
                "tunnel with proxy protocol",
                &policy(
                    "{tunnel: {targetHost: example.com, targetPort: 8443}, proxyProtocol: {version: V2}}",
                ),
                Error(TP, "tunnel and proxyProtocol must not be set together"),
            ),
            (
                "tunnel",
                &policy("{tunnel: {protocol: CONNECT, targetHost: 10.0.0.1, targetPort: 8443}}"),
                Valid,
            ),
            (
                "tunnel with bad protocol",
                &policy("{tunnel: {protocol: GET, targetHost: example.com, targetPort: 8443}}"),
                Error(
                    "spec.trafficPolicy.tunnel.protocol",
                    "tunnel protocol must be \"CONNECT\" or \"POST\"",
                ),
            ),
            (
                "tunnel with bad host",
                &policy("{tunnel: {targetHost: 'bad host', targetPort: 8443}}"),
                Error(
                    "spec.trafficPolicy.tunnel.targetHost",
                    "tunnel target host must be valid FQDN or IP address",
                ),
            ),
            (
                "tunnel without port",
                &policy("{tunnel: {targetHost: example.com}}"),
                Error(
                    "spec.trafficPolicy.tunnel.targetPort",
                    "tunnel target port is invalid: port number 0 must be in the range 1..65535",
                ),
            ),
            ("proxy protocol", &policy("{proxyProtocol: {version: V2}}"), Valid),
            (
                "retry budget over 100",
                &policy("{retryBudget: {percent: 150}}"),
                Error(
                    "spec.trafficPolicy.retryBudget.percent",
                    "Invalid value: 150: should be less than or equal to 100",
                ),
            ),
            ("retry budget", &policy("{retryBudget: {percent: 20, minRetryConcurrency: 3}}"), Valid),
        ]);
    }

    #[test]
    fn connection_pool_cases_from_istio() {
        let pool = |p: &str| policy(&format!("{{connectionPool: {p}}}"));
        let http = |f: &'static str| -> String { format!("spec.trafficPolicy.connectionPool.http.{f}") };
        let tcp = |f: &'static str| -> String { format!("spec.trafficPolicy.connectionPool.tcp.{f}") };
        let cases: Vec<(&str, String, Want, Option<String>)> = vec![
            (
                "tcp and http",
                pool(
                    "{tcp: {maxConnections: 7, connectTimeout: 2s}, http: {http1MaxPendingRequests: 2, http2MaxRequests: 11, maxRequestsPerConnection: 5, maxRetries: 4, idleTimeout: 30s, maxConcurrentStreams: 5}}",
                ),
                Valid,
                None,
            ),
            ("tcp only", pool("{tcp: {maxConnections: 7, connectTimeout: 2s}}"), Valid, None),
            ("http only", pool("{http: {http1MaxPendingRequests: 2, http2MaxRequests: 11}}"), Valid, None),
            ("http2 keepalive", pool("{http: {http2KeepAlive: {interval: 15s, timeout: 5s}}}"), Valid, None),
            (
                "empty",
                pool("{}"),
                Error("spec.trafficPolicy.connectionPool", "connection pool must have at least one field"),
                None,
            ),
            (
                "bad max connections",
                pool("{tcp: {maxConnections: -1}}"),
                Error("", "max connections must be non-negative"),
                Some(tcp("maxConnections")),
            ),
            (
                "bad connect timeout",
                pool("{tcp: {connectTimeout: 2.000000005s}}"),
                Error("", "only durations to ms precision are supported"),
                Some(tcp("connectTimeout")),
            ),
            (
                "bad max pending requests",
                pool("{http: {http1MaxPendingRequests: -1}}"),
                Error("", "http1 max pending requests must be non-negative"),
                Some(http("http1MaxPendingRequests")),
            ),
            (
                "bad max requests",
                pool("{http: {http2MaxRequests: -1}}"),
                Error("", "http2 max requests must be non-negative"),
                Some(http("http2MaxRequests")),
            ),
            (
                "bad max requests per connection",
                pool("{http: {maxRequestsPerConnection: -1}}"),
                Error("", "max requests per connection must be non-negative"),
                Some(http("maxRequestsPerConnection")),
            ),
            (
                "bad max retries",
                pool("{http: {maxRetries: -1}}"),
                Error("", "max retries must be non-negative"),
                Some(http("maxRetries")),
            ),
            (
                "bad idle timeout",
                pool("{http: {idleTimeout: 30.000000005s}}"),
                Error("", "only durations to ms precision"),
                Some(http("idleTimeout")),
            ),
            ("tcp idle timeout disabled", pool("{tcp: {idleTimeout: 0s}}"), Valid, None),
            (
                "bad tcp idle timeout",
                pool("{tcp: {idleTimeout: 1.0000001s}}"),
                Error("", "only durations to ms precision"),
                Some(tcp("idleTimeout")),
            ),
            (
                "bad max concurrent streams",
                pool("{http: {maxConcurrentStreams: -1}}"),
                Error("", "max concurrent streams must be non-negative"),
                Some(http("maxConcurrentStreams")),
            ),
            (
                "keepalive without interval",
                pool("{http: {http2KeepAlive: {timeout: 5s}}}"),
                Error("", "http2 keepalive interval is required"),
                Some(http("http2KeepAlive.interval")),
            ),
            (
                "keepalive without timeout",
                pool("{http: {http2KeepAlive: {interval: 15s}}}"),
                Error("", "http2 keepalive timeout is required"),
                Some(http("http2KeepAlive.timeout")),
            ),
            (
                "bad keepalive interval",
                pool("{http: {http2KeepAlive: {interval: 15.000000005s, timeout: 5s}}}"),
                Error("", "only durations to ms precision"),
                Some(http("http2KeepAlive.interval")),
            ),
            (
                "bad tcp keepalive time",
                pool("{tcp: {tcpKeepalive: {time: 0.0001s}}}"),
                Error("", "duration must be greater than 1ms"),
                Some(tcp("tcpKeepalive.time")),
            ),
        ];
        for (name, yaml, want, path) in cases {
            let report = run(validate, &meta("dr", "ns1"), &spec::<DestinationRule>(&yaml));
            match (want, path) {
                (Error(_, text), Some(path)) => {
                    assert!(
                        report.errors.iter().any(|i| i.path == path && i.message.contains(text)),
                        "{name}: expected error {path}: {text}, got {report:?}"
                    );
                }
                (want, _) => check(name, &report, want),
            }
        }
    }

    #[test]
    fn load_balancer_cases_from_istio() {
        let lb = |l: &str| policy(&format!("{{loadBalancer: {l}}}"));
        let ch = "spec.trafficPolicy.loadBalancer.consistentHash";
        check_all(&[
            ("simple", &lb("{simple: ROUND_ROBIN}"), Valid),
            (
                "consistent hash with deprecated minimum ring size",
                &lb("{consistentHash: {minimumRingSize: 1024, httpCookie: {name: test, ttl: 3600s}}}"),
                Warning(
                    "spec.trafficPolicy.loadBalancer.consistentHash.minimumRingSize",
                    "consistent hash MinimumRingSize is deprecated",
                ),
            ),
            (
                "consistent hash cookie",
                &lb("{consistentHash: {httpCookie: {name: test, ttl: 3600s}}}"),
                Valid,
            ),
            (
                "cookie without name",
                &lb("{consistentHash: {httpCookie: {ttl: 3600s}}}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.consistentHash.httpCookie.name",
                    "name required for HttpCookie",
                ),
            ),
            (
                "maglev not prime",
                &lb("{consistentHash: {maglev: {tableSize: 1000}}}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.consistentHash.maglev.tableSize",
                    "tableSize must be a prime number for maglev",
                ),
            ),
            ("maglev prime", &lb("{consistentHash: {useSourceIp: true, maglev: {tableSize: 65537}}}"), Valid),
            (
                "maglev unset",
                &lb("{consistentHash: {maglev: {}}}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.consistentHash.maglev.tableSize",
                    "tableSize must be set for maglev",
                ),
            ),
            (
                "maglev too large",
                &lb("{consistentHash: {maglev: {tableSize: 18446744073709551557}}}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.consistentHash.maglev.tableSize",
                    "tableSize must be less than 5000011 for maglev",
                ),
            ),
            (
                "ring size and algorithm",
                &lb("{consistentHash: {minimumRingSize: 1024, ringHash: {minimumRingSize: 1024}}}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.consistentHash.minimumRingSize",
                    "only one of MinimumRingSize or Maglev/Ringhash can be specified",
                ),
            ),
            (
                "unique cookie attributes",
                &lb(
                    "{consistentHash: {httpCookie: {name: c, ttl: 3600s, attributes: [{name: SameSite, value: Strict}, {name: Secure, value: 'true'}]}}}",
                ),
                Valid,
            ),
            (
                "duplicate cookie attribute names",
                &lb(
                    "{consistentHash: {httpCookie: {name: c, attributes: [{name: SameSite, value: Strict}, {name: SameSite, value: Lax}]}}}",
                ),
                Error(
                    "spec.trafficPolicy.loadBalancer.consistentHash.httpCookie.attributes[1].name",
                    "duplicate cookie attribute name: SameSite",
                ),
            ),
            (
                "empty cookie attribute name",
                &lb("{consistentHash: {httpCookie: {name: c, attributes: [{name: '', value: v}]}}}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.consistentHash.httpCookie.attributes[0].name",
                    "cookie attribute name cannot be empty",
                ),
            ),
            (
                "locality and zone aware",
                &lb("{localityLbSetting: {}, zoneAwareLbSetting: {}}"),
                Error(
                    "spec.trafficPolicy.loadBalancer",
                    "only one of localityLbSetting and zoneAwareLbSetting can be set",
                ),
            ),
            (
                "zone aware failover without outlier detection",
                &lb("{zoneAwareLbSetting: {failover: [{from: us-east, to: eu-west}]}}"),
                Warning(
                    "spec.trafficPolicy.loadBalancer.zoneAwareLbSetting",
                    "outlier detection policy must be provided for failover",
                ),
            ),
            (
                "simple and consistent hash",
                &lb("{simple: ROUND_ROBIN, consistentHash: {useSourceIp: true}}"),
                Error("spec.trafficPolicy.loadBalancer", "only one of simple or consistentHash may be set"),
            ),
            (
                "two hash keys",
                &lb("{consistentHash: {useSourceIp: true, httpHeaderName: x-user}}"),
                Error(
                    ch,
                    "only one of httpHeaderName, httpCookie, useSourceIp or httpQueryParameterName may be set",
                ),
            ),
            (
                "two hash algorithms",
                &lb("{consistentHash: {useSourceIp: true, ringHash: {}, maglev: {tableSize: 65537}}}"),
                Error(ch, "only one of ringHash or maglev may be set"),
            ),
            (
                "warmup duration secs below 1ms",
                &lb("{simple: ROUND_ROBIN, warmupDurationSecs: 0s}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.warmupDurationSecs",
                    "must be a valid duration greater than 1ms",
                ),
            ),
            (
                "warmup",
                &lb("{simple: ROUND_ROBIN, warmup: {duration: 300s, minimumPercent: 5, aggression: 1.5}}"),
                Valid,
            ),
            (
                "warmup minimum percent over 100 (CRD table)",
                &lb("{warmup: {duration: 300s, minimumPercent: 150.0}}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.warmup.minimumPercent",
                    "minimumPercent value should be less than or equal to 100",
                ),
            ),
            (
                "warmup negative minimum percent",
                &lb("{warmup: {duration: 300s, minimumPercent: -1}}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.warmup.minimumPercent",
                    "should be greater than or equal to 0",
                ),
            ),
            (
                "warmup without duration (CRD table)",
                &lb("{warmup: {minimumPercent: 5.0}}"),
                Error("spec.trafficPolicy.loadBalancer.warmup.duration", "duration is required"),
            ),
            (
                "warmup negative aggression (CRD table)",
                &lb("{warmup: {duration: 300s, aggression: -0.1}}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.warmup.aggression",
                    "aggression should be greater than 0",
                ),
            ),
            (
                "unknown simple number",
                &lb("{simple: 42}"),
                Error("spec.trafficPolicy.loadBalancer.simple", "Unsupported value: 42"),
            ),
        ]);
    }

    #[test]
    fn outlier_detection_cases_from_istio() {
        let od = |o: &str| policy(&format!("{{outlierDetection: {o}}}"));
        let at = |f: &str| format!("spec.trafficPolicy.outlierDetection.{f}");
        let interval = at("interval");
        let base = at("baseEjectionTime");
        let max = at("maxEjectionPercent");
        let min = at("minHealthPercent");
        let errors = at("consecutiveErrors");
        let local = at("consecutiveLocalOriginFailures");
        let codes = at("outlierDetectionHttpErrorCodes[0]");
        let cases: Vec<(&str, String, Want, &str)> = vec![
            ("valid", od("{interval: 2s, baseEjectionTime: 2s, maxEjectionPercent: 50}"), Valid, ""),
            (
                "bad interval",
                od("{interval: 2.000000005s}"),
                Error("", "only durations to ms precision"),
                &interval,
            ),
            (
                "bad base ejection time",
                od("{baseEjectionTime: 2.000000005s}"),
                Error("", "only durations to ms precision"),
                &base,
            ),
            (
                "bad max ejection percent",
                od("{maxEjectionPercent: 105}"),
                Error("", "percentage 105 is not in range 0..100"),
                &max,
            ),
            (
                "panic threshold too low",
                od("{minHealthPercent: -1}"),
                Error("", "percentage -1 is not in range 0..100"),
                &min,
            ),
            (
                "panic threshold too high",
                od("{minHealthPercent: 101}"),
                Error("", "percentage 101 is not in range 0..100"),
                &min,
            ),
            (
                "deprecated consecutive errors",
                od("{consecutiveErrors: 101}"),
                Warning(
                    "",
                    "outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead",
                ),
                &errors,
            ),
            (
                "local origin failures without split",
                od("{consecutiveLocalOriginFailures: 10}"),
                Error(
                    "",
                    "outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false",
                ),
                &local,
            ),
            (
                "local origin failures with split",
                od("{consecutiveLocalOriginFailures: 10, splitExternalLocalOriginErrors: true}"),
                Valid,
                "",
            ),
            (
                "http error code out of range",
                od("{outlierDetectionHttpErrorCodes: [600]}"),
                Error("", "should be less than or equal to 599"),
                &codes,
            ),
            ("http error codes", od("{outlierDetectionHttpErrorCodes: [500, 503]}"), Valid, ""),
        ];
        for (name, yaml, want, path) in cases {
            let report = run(validate, &meta("dr", "ns1"), &spec::<DestinationRule>(&yaml));
            let want = match want {
                Error(_, text) => {
                    assert!(
                        report.errors.iter().any(|i| i.path == path && i.message.contains(text)),
                        "{name}: {report:?}"
                    );
                    continue;
                }
                Warning(_, text) => {
                    assert!(report.errors.is_empty(), "{name}: {report:?}");
                    assert!(
                        report.warnings.iter().any(|i| i.path == path && i.message.contains(text)),
                        "{name}: {report:?}"
                    );
                    continue;
                }
                Valid => Valid,
            };
            check(name, &report, want);
        }
    }

    #[test]
    fn locality_lb_setting_cases_from_istio() {
        let with_od = |l: &str| {
            policy(&format!("{{loadBalancer: {{localityLbSetting: {l}}}, outlierDetection: {{}}}}"))
        };
        let without_od = |l: &str| policy(&format!("{{loadBalancer: {{localityLbSetting: {l}}}}}"));
        let at = "spec.trafficPolicy.loadBalancer.localityLbSetting";
        check_all(&[
            (
                "total weight > 100",
                &with_od("{distribute: [{from: a/b/c, to: {a/b/c: 80, a/b1: 25}}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.distribute[0].to",
                    "total locality weight 105 != 100",
                ),
            ),
            (
                "total weight < 100",
                &with_od("{distribute: [{from: a/b/c, to: {a/b/c: 80, a/b1: 15}}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.distribute[0].to",
                    "total locality weight 95 != 100",
                ),
            ),
            (
                "weight = 0",
                &with_od("{distribute: [{from: a/b/c, to: {a/b/c: 0, a/b1: 100}}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.distribute[0].to",
                    "locality weight must be in range [1, 100]",
                ),
            ),
            ("distribute", &with_od("{distribute: [{from: a/b/c, to: {a/b/c: 80, a/b1: 20}}]}"), Valid),
            (
                "distribute and failover",
                &with_od(
                    "{distribute: [{from: a/b/c, to: {a/b/c: 80, a/b1: 20}}], failover: [{from: region1, to: region2}]}",
                ),
                Error(at, "can not simultaneously specify 'distribute' and 'failover'"),
            ),
            (
                "failover to the same region",
                &with_od("{failover: [{from: region1, to: region1}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.failover[0]",
                    "locality lb failover settings must specify different regions",
                ),
            ),
            (
                "failover from wildcard",
                &with_od("{failover: [{from: '*', to: region2}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.failover[0]",
                    "locality lb failover region should not contain '*' wildcard",
                ),
            ),
            (
                "failover to wildcard",
                &with_od("{failover: [{from: region1, to: '*'}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.failover[0]",
                    "should not contain '*' wildcard",
                ),
            ),
            (
                "failover from zone",
                &with_od("{failover: [{from: region1/zone1, to: region2}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.failover[0]",
                    "locality lb failover only specify region",
                ),
            ),
            (
                "failover to zone",
                &with_od("{failover: [{from: region1, to: region2/zone1}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.failover[0]",
                    "locality lb failover only specify region",
                ),
            ),
            (
                "failover priority without outlier detection",
                &without_od("{failoverPriority: [topology.istio.io/network, topology.kubernetes.io/region]}"),
                Warning(at, "outlier detection policy must be provided for failover"),
            ),
            (
                "failover without outlier detection",
                &without_od("{failover: [{from: us-east, to: eu-west}, {from: us-west, to: eu-east}]}"),
                Warning(at, "outlier detection policy must be provided for failover"),
            ),
            (
                "failover and region failover priority",
                &with_od(
                    "{failover: [{from: region1, to: region2}], failoverPriority: [topology.kubernetes.io/region]}",
                ),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.failoverPriority",
                    "can not simultaneously set 'failover' and topology label 'topology.kubernetes.io/region' in 'failover_priority'",
                ),
            ),
            (
                "overlapping source localities",
                &with_od("{distribute: [{from: a/b, to: {x: 100}}, {from: a/b/c, to: {y: 100}}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.distribute",
                    "locality a/b/c overlap with previous specified ones",
                ),
            ),
            (
                "wildcard not at the end",
                &with_od("{distribute: [{from: '*/zone', to: {x: 100}}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.distribute",
                    "wildcard '*' number can not exceed 1 and must be in the end",
                ),
            ),
            (
                "empty zone",
                &with_od("{distribute: [{from: a//c, to: {x: 100}}]}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.distribute",
                    "locality a//c must not contain empty region/zone/subzone info",
                ),
            ),
        ]);
    }

    #[test]
    fn localities_from_istio() {
        for (localities, valid) in [
            (&["*/zone/*"][..], false),
            (&["*/zone"][..], false),
            (&["*", "a/b/c"][..], false),
            (&["a", "a/b/c"][..], false),
            (&["a/*", "a/b/c"][..], false),
            (&["a/b", "a/b/c"][..], false),
            (&["a/b/*", "a/b/c"][..], false),
            (&["a1/*", "a2/*", "a3/b3/c3", "a4/b4", "a5/b5/*"][..], true),
        ] {
            assert_eq!(validate_localities(localities).is_ok(), valid, "{localities:?}");
        }
    }

    #[test]
    fn zone_aware_lb_setting_cases_from_istio() {
        let with_od = |l: &str| {
            policy(&format!("{{loadBalancer: {{zoneAwareLbSetting: {l}}}, outlierDetection: {{}}}}"))
        };
        let without_od = |l: &str| policy(&format!("{{loadBalancer: {{zoneAwareLbSetting: {l}}}}}"));
        let at = "spec.trafficPolicy.loadBalancer.zoneAwareLbSetting";
        let failover = "spec.trafficPolicy.loadBalancer.zoneAwareLbSetting.failover[0]";
        let priority = "spec.trafficPolicy.loadBalancer.zoneAwareLbSetting.failoverPriority[0]";
        check_all(&[
            ("enabled only", &with_od("{enabled: true}"), Valid),
            ("region failover", &with_od("{failover: [{from: us-east, to: eu-west}]}"), Valid),
            (
                "same region",
                &with_od("{failover: [{from: region1, to: region1}]}"),
                Error(failover, "zone aware lb failover settings must specify different regions"),
            ),
            (
                "zone in source",
                &with_od("{failover: [{from: region1/zone1, to: region2}]}"),
                Error(failover, "zone aware lb failover only specifies region"),
            ),
            (
                "zone in destination",
                &with_od("{failover: [{from: region1, to: region2/zone1}]}"),
                Error(failover, "zone aware lb failover only specifies region"),
            ),
            (
                "wildcard source",
                &with_od("{failover: [{from: '*', to: region2}]}"),
                Error(failover, "zone aware lb failover region should not contain '*' wildcard"),
            ),
            (
                "wildcard destination",
                &with_od("{failover: [{from: region1, to: '*'}]}"),
                Error(failover, "should not contain '*' wildcard"),
            ),
            (
                "region label in priority with failover",
                &with_od(
                    "{failover: [{from: region1, to: region2}], failoverPriority: [topology.kubernetes.io/region]}",
                ),
                Error(priority, "must not use topology label 'topology.kubernetes.io/region'"),
            ),
            (
                "region label",
                &with_od("{failoverPriority: [topology.kubernetes.io/region]}"),
                Error(priority, "'failover_priority' for zone aware lb must not use topology label"),
            ),
            (
                "zone label",
                &with_od("{failoverPriority: [topology.kubernetes.io/zone]}"),
                Error(priority, "topology.kubernetes.io/zone"),
            ),
            (
                "subzone label",
                &with_od("{failoverPriority: [topology.istio.io/subzone]}"),
                Error(priority, "topology.istio.io/subzone"),
            ),
            ("other labels", &with_od("{failoverPriority: [version, app=ratings]}"), Valid),
            (
                "failover without outlier detection",
                &without_od("{failover: [{from: us-east, to: eu-west}]}"),
                Warning(at, "outlier detection policy must be provided for failover"),
            ),
            (
                "priority without outlier detection",
                &without_od("{failoverPriority: [version]}"),
                Warning(at, "outlier detection policy must be provided for failover"),
            ),
            (
                "min cluster size 0",
                &with_od("{minClusterSize: 0}"),
                Error(
                    "spec.trafficPolicy.loadBalancer.zoneAwareLbSetting.minClusterSize",
                    "should be greater than or equal to 1",
                ),
            ),
        ]);
    }

    #[test]
    fn export_to_and_workload_selector() {
        check_all(&[
            ("export to own namespace", "host: reviews\nexportTo: [., ns2]", Valid),
            (
                "export to public and more",
                "host: reviews\nexportTo: ['*', ns2]",
                Error("spec.exportTo", "cannot have both public (*) and non-public exportTo values"),
            ),
            (
                "export to none",
                "host: reviews\nexportTo: ['~']",
                Error("spec.exportTo", "exportTo ~ (none) is not allowed for Istio configuration objects"),
            ),
            (
                "duplicate export",
                "host: reviews\nexportTo: [ns1, .]",
                Error("spec.exportTo", "duplicate entries in exportTo: . and current namespace ns1"),
            ),
            (
                "selector, export to own namespace",
                "host: reviews\nworkloadSelector: {matchLabels: {app: a}}\nexportTo: [.]",
                Valid,
            ),
            (
                "selector, export beyond own namespace",
                "host: reviews\nworkloadSelector: {matchLabels: {app: a}}\nexportTo: [ns2]",
                Error(
                    "spec.exportTo",
                    "destination rule with workload selector cannot have exportTo beyond current namespace",
                ),
            ),
            (
                "selector with wildcard",
                "host: reviews\nworkloadSelector: {matchLabels: {app: '*'}}",
                Error("spec.workloadSelector", "wildcard is not supported in selector: \"app=*\""),
            ),
            (
                "selector with a long value",
                "host: reviews\nworkloadSelector: {matchLabels: {app: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}}",
                Error("spec.workloadSelector.matchLabels.app", "Too long: may not be more than 63 bytes"),
            ),
        ]);
    }

    #[test]
    fn namespace_defaults_to_default() {
        let rule = spec::<DestinationRule>(
            "host: reviews\nexportTo: [.]\ntrafficPolicy: {tls: {mode: SIMPLE, credentialName: 'configmap://default/ca'}}",
        );
        check("no namespace", &run(validate, &meta("dr", ""), &rule), Valid);
    }

    #[test]
    fn primality_matches_trial_division() {
        let trial = |x: u64| {
            x != 0
                && (x < 4
                    || (x % 2 == 1
                        && (3..).step_by(2).take_while(|f| f * f <= x).all(|f| !x.is_multiple_of(f))))
        };
        for x in (0..2000).chain(MAGLEV_TABLE_SIZE_LIMIT - 50..MAGLEV_TABLE_SIZE_LIMIT + 2000) {
            assert_eq!(is_prime(x), trial(x), "{x}");
        }
        assert!(is_prime(18_446_744_073_709_551_557));
        assert!(!is_prime(18_446_744_073_709_551_555));
        assert!(!is_prime(4_294_967_291 * 4_294_967_279));
    }
}
