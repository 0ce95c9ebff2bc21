//! Load balancer settings: `validateLoadBalancer` with the consistent-hash and Maglev rules,
//! `agent.ValidateLocalityLbSetting` and `agent.ValidateZoneAwareLbSetting`.

use std::collections::{BTreeMap, BTreeSet};

use api::networking::destination_rule::{
    LoadBalancerSettings, LocalityLoadBalancerSetting, OutlierDetection, ZoneAwareLoadBalancerSetting,
    load_balancer_settings::{ConsistentHashLb, SimpleLb},
};

use super::{check_min_duration, check_range};
use crate::{
    Report,
    common::{check_enum, check_oneof, validate_duration},
};

/// Topology labels that locality failover settings may not name in `failoverPriority`.
const TOPOLOGY_LABELS: [&str; 3] =
    ["topology.kubernetes.io/region", "topology.kubernetes.io/zone", "topology.istio.io/subzone"];
/// The smallest Maglev table size Envoy rejects.
const MAGLEV_TABLE_SIZE_LIMIT: u64 = 5_000_011;
/// Istio's `validateLoadBalancer` (with the outlier detection of the same policy, which locality
/// failover needs), plus the CRD's oneofs and ranges.
pub(super) fn validate_load_balancer(
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

#[cfg(test)]
mod tests;
