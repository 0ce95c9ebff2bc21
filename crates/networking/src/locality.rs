//! Locality and zone-aware load balancing: which setting applies to a destination, the cluster-level
//! Envoy config it needs, and the per-proxy priorities and weights of a `ClusterLoadAssignment`
//! (Istio's `pilot/pkg/networking/core/loadbalancer/loadbalancer.go` at the pinned version).
//!
//! - **Which setting** ([`effective_setting`]): the DestinationRule's `zoneAwareLbSetting`, else its
//!   `localityLbSetting` (`enabled: false` turns locality load balancing off for the destination), else
//!   the Service's `trafficDistribution` (`PreferSameZone` / `PreferClose`: failover priority by network,
//!   region, zone; `PreferSameNode`: also subzone and node, both forcing failover), else the mesh's
//!   `zoneAwareLbSetting`, else the mesh's `localityLbSetting` (Istio's default `{enabled: true}`).
//! - **Priorities** ([`apply_to_assignment`]): with `distribute`, the proxy's first matching `from` rule
//!   re-weights the destination localities (`to`, split over the localities a wildcard matches by their
//!   own weights, rounded up) and empties the others. Otherwise, only when failover is on (the cluster
//!   has outlier detection, or the setting forces it): `failoverPriority` labels split each locality by
//!   how many leading labels an endpoint shares with the proxy (a `key=value` entry compares with the
//!   value instead of the proxy's label; a leading `topology.istio.io/network` mismatch ranks below all
//!   others), and locality failover ranks localities 0 (same region/zone/subzone), 1 (same zone),
//!   2 (same region), 3 (other regions; 4 for regions that are not the `failover` target of the proxy's
//!   region). Priorities are composed (earlier rank × 5 + locality rank) and made contiguous from 0.
//! - **Zone-aware**: endpoints in the proxy's region at priority 0, `failover` target regions at 1, the
//!   rest at 2 (after `failoverPriority`, × 3), and the cluster gets Envoy's `zone_aware_lb_config`
//!   (`routing_enabled: 0%` when the setting says `enabled: false`).

use std::collections::BTreeMap;

use api::networking::destination_rule::{
    LoadBalancerSettings, LocalityLoadBalancerSetting, ZoneAwareLoadBalancerSetting,
    locality_load_balancer_setting::Distribute,
};
use envoy_types::pb::envoy::{
    config::{
        cluster::v3::cluster::{
            CommonLbConfig,
            common_lb_config::{LocalityConfigSpecifier, LocalityWeightedLbConfig, ZoneAwareLbConfig},
        },
        core::v3::Locality as EnvoyLocality,
        endpoint::v3::LocalityLbEndpoints,
    },
    r#type::v3::Percent,
};
use model::{
    push::{MeshSettings, node::Locality},
    service::{
        LABEL_HOSTNAME, LABEL_TOPOLOGY_NETWORK, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_SUBZONE,
        LABEL_TOPOLOGY_ZONE, Labels, TrafficDistribution,
    },
};

use crate::convert::u32v;

/// The parts of `rule`'s traffic policy for `port` and `subset` locality load balancing reads (Istio's
/// `getOutlierDetectionAndLoadBalancerSettings` over `MergeSubsetTrafficPolicy`): the outlier
/// detection and the load balancer settings. A matching port-level entry stands for its policy
/// (Istio's `GetPortLevelTrafficPolicy`); the subset's parts override the destination's one by one, all
/// of them when the subset has a matching port-level entry.
pub(crate) fn lb_policy_for<'r>(
    rule: &'r api::networking::destination_rule::DestinationRule,
    port: u32,
    subset: &str,
) -> (Option<&'r api::networking::destination_rule::OutlierDetection>, Option<&'r LoadBalancerSettings>) {
    use api::networking::destination_rule::{OutlierDetection, TrafficPolicy};
    type Parts<'r> = (Option<&'r OutlierDetection>, Option<&'r LoadBalancerSettings>);
    let level = |tp: &'r TrafficPolicy| -> (Parts<'r>, bool) {
        match tp.port_level(port) {
            Some(p) => ((p.outlier_detection.as_ref(), p.load_balancer.as_ref()), true),
            None => ((tp.outlier_detection.as_ref(), tp.load_balancer.as_ref()), false),
        }
    };
    let ((mut outlier, mut lb), _) = rule.traffic_policy.as_ref().map_or(((None, None), false), level);
    if !subset.is_empty()
        && let Some(tp) =
            rule.subsets.iter().find(|s| s.name == subset).and_then(|s| s.traffic_policy.as_ref())
    {
        // A subset's port-level entry replaces these parts outright (Istio's `MergeTrafficPolicy`).
        let ((o, l), port_level) = level(tp);
        outlier = if port_level { o } else { o.or(outlier) };
        lb = if port_level { l } else { l.or(lb) };
    }
    (outlier, lb)
}

/// The locality semantics in force for one destination (Istio's `LBSettings`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum LbSetting<'a> {
    /// Locality-weighted distribution or failover; `force` turns failover on without outlier
    /// detection (a Service's `trafficDistribution`).
    Locality { setting: std::borrow::Cow<'a, LocalityLoadBalancerSetting>, force: bool },
    /// Zone-aware routing.
    ZoneAware(std::borrow::Cow<'a, ZoneAwareLoadBalancerSetting>),
}

/// Istio's `GetEffectiveLbSetting`: DestinationRule `zoneAwareLbSetting` > DestinationRule
/// `localityLbSetting` > Service `trafficDistribution` > mesh `zoneAwareLbSetting` > mesh
/// `localityLbSetting`; `None` when locality load balancing is off for the destination.
pub(crate) fn effective_setting<'a>(
    mesh: &'a MeshSettings,
    lb: Option<&'a LoadBalancerSettings>,
    traffic_distribution: TrafficDistribution,
) -> Option<LbSetting<'a>> {
    use std::borrow::Cow;
    if let Some(za) = lb.and_then(|l| l.zone_aware_lb_setting.as_ref()) {
        return Some(LbSetting::ZoneAware(Cow::Borrowed(za)));
    }
    if let Some(l) = lb.and_then(|l| l.locality_lb_setting.as_ref()) {
        return (l.enabled != Some(false))
            .then_some(LbSetting::Locality { setting: Cow::Borrowed(l), force: false });
    }
    let by_labels = |labels: &[&str]| LbSetting::Locality {
        setting: Cow::Owned(LocalityLoadBalancerSetting {
            enabled: Some(true),
            failover_priority: labels.iter().map(|l| (*l).to_string()).collect(),
            ..Default::default()
        }),
        force: true,
    };
    match traffic_distribution {
        TrafficDistribution::PreferSameZone => {
            return Some(by_labels(&[LABEL_TOPOLOGY_NETWORK, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE]));
        }
        TrafficDistribution::PreferSameNode => {
            return Some(by_labels(&[
                LABEL_TOPOLOGY_NETWORK,
                LABEL_TOPOLOGY_REGION,
                LABEL_TOPOLOGY_ZONE,
                LABEL_TOPOLOGY_SUBZONE,
                LABEL_HOSTNAME,
            ]));
        }
        TrafficDistribution::Any => {}
    }
    if let Some(za) = &mesh.zone_aware_lb_setting {
        return Some(LbSetting::ZoneAware(Cow::Borrowed(za)));
    }
    mesh.locality_lb_setting
        .as_ref()
        .filter(|l| l.enabled != Some(false))
        .map(|l| LbSetting::Locality { setting: Cow::Borrowed(l), force: false })
}

impl LbSetting<'_> {
    /// Whether zone-aware routing is on (unset `enabled` means on).
    fn zone_aware_routing(za: &ZoneAwareLoadBalancerSetting) -> bool {
        za.enabled != Some(false)
    }

    /// The `failoverPriority` labels that rank endpoints against the proxy (Istio's
    /// `FailoverPriorityLabels`): none with `distribute`, or for disabled zone-aware routing.
    pub(crate) fn failover_priority(&self) -> &[String] {
        match self {
            LbSetting::Locality { setting, .. } if setting.distribute.is_empty() => {
                &setting.failover_priority
            }
            LbSetting::ZoneAware(za) if Self::zone_aware_routing(za) => &za.failover_priority,
            _ => &[],
        }
    }

    /// This setting without `failoverPriority`, or, when it has some, that setting and the labels
    /// (comma-separated) it had: for assignments ranked without the proxy's labels.
    pub(crate) fn without_failover_priority(self) -> Result<Self, (Self, String)> {
        let labels = self.failover_priority().join(", ");
        if labels.is_empty() {
            return Ok(self);
        }
        let stripped = match self {
            LbSetting::Locality { setting, force } => LbSetting::Locality {
                setting: std::borrow::Cow::Owned(LocalityLoadBalancerSetting {
                    failover_priority: Vec::new(),
                    ..setting.into_owned()
                }),
                force,
            },
            LbSetting::ZoneAware(za) => {
                LbSetting::ZoneAware(std::borrow::Cow::Owned(ZoneAwareLoadBalancerSetting {
                    failover_priority: Vec::new(),
                    ..za.into_owned()
                }))
            }
        };
        Err((stripped, labels))
    }

    /// Whether the assignment of a cluster with (`outlier_detection`) or without it is made relative
    /// to the proxy: `false` when [`apply_to_assignment`] would leave it as it is, so it can be shared by
    /// every proxy.
    pub(crate) fn changes_assignment(&self, outlier_detection: bool) -> bool {
        match self {
            LbSetting::Locality { setting, force } => {
                !setting.distribute.is_empty() || outlier_detection || *force
            }
            LbSetting::ZoneAware(za) => Self::zone_aware_routing(za),
        }
    }

    /// Istio's `ApplyToCluster`, cluster part: the locality config of `common` for a cluster with or
    /// without outlier detection. Locality-weighted config is set with `distribute`, or when failover
    /// is on and `failover` or `failoverPriority` is set; zone-aware settings give Envoy's
    /// `zone_aware_lb_config` (`min_cluster_size`; `routing_enabled: 0%` when disabled).
    pub(crate) fn apply_to_cluster(&self, common: &mut CommonLbConfig, outlier_detection: bool) {
        let weighted =
            || Some(LocalityConfigSpecifier::LocalityWeightedLbConfig(LocalityWeightedLbConfig::default()));
        match self {
            LbSetting::Locality { setting, force } => {
                let failover = *force || outlier_detection;
                if !setting.distribute.is_empty()
                    || (failover && (!setting.failover.is_empty() || !setting.failover_priority.is_empty()))
                {
                    common.locality_config_specifier = weighted();
                }
            }
            LbSetting::ZoneAware(za) => {
                common.locality_config_specifier =
                    Some(LocalityConfigSpecifier::ZoneAwareLbConfig(ZoneAwareLbConfig {
                        routing_enabled: (!Self::zone_aware_routing(za)).then_some(Percent { value: 0.0 }),
                        min_cluster_size: za
                            .min_cluster_size
                            .map(|value| envoy_types::pb::google::protobuf::UInt64Value { value }),
                        ..Default::default()
                    }));
            }
        }
    }
}

/// What an assignment is ranked against: the proxy's locality and labels (with Istio's topology
/// labels, [`model::push::ProxyContext::set_topology`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProxyView<'a> {
    pub locality: &'a Locality,
    pub labels: &'a Labels,
}

/// Istio's `ApplyToLoadAssignment`: sets priorities and weights of `localities` for the proxy
/// `view`. `members[i][j]` are the labels of the `j`th endpoint of `localities[i]` (failover priority
/// compares them); `outlier_detection` says whether the cluster has outlier detection (without it, or
/// a forcing setting, failover is not applied: Envoy would never leave priority 0).
pub(crate) fn apply_to_assignment(
    localities: &mut Vec<LocalityLbEndpoints>,
    members: &[Vec<&Labels>],
    view: ProxyView<'_>,
    setting: &LbSetting<'_>,
    outlier_detection: bool,
) {
    match setting {
        LbSetting::Locality { setting, force } => {
            if !setting.distribute.is_empty() {
                apply_distribute(view.locality, localities, &setting.distribute);
            } else if outlier_detection || *force {
                // With `failoverPriority`, region failover follows only when `failover` is given too.
                let by_labels = !setting.failover_priority.is_empty();
                if by_labels {
                    apply_failover_priority(localities, members, view.labels, &setting.failover_priority);
                }
                if !by_labels || !setting.failover.is_empty() {
                    apply_locality_failover(view.locality, localities, |proxy_region, ep| {
                        failover_rank(&setting.failover, proxy_region, ep)
                    });
                }
            }
        }
        LbSetting::ZoneAware(za) => {
            if !LbSetting::zone_aware_routing(za) {
                return;
            }
            if !za.failover_priority.is_empty() {
                apply_failover_priority(localities, members, view.labels, &za.failover_priority);
            }
            rank_and_compact(localities, 3, |l| {
                let region = l.locality.as_ref().map_or("", |l| l.region.as_str());
                if region == view.locality.region {
                    0
                } else if za
                    .failover
                    .iter()
                    .find(|f| f.from == view.locality.region)
                    .is_some_and(|f| f.to == region)
                {
                    1
                } else {
                    2
                }
            });
        }
    }
}

/// Rank 3 (another region) becomes 4 when the proxy's region has a `failover` rule whose target is not
/// the endpoint's region.
fn failover_rank(
    failover: &[api::networking::destination_rule::locality_load_balancer_setting::Failover],
    proxy_region: &str,
    endpoint: Option<&EnvoyLocality>,
) -> u32 {
    match failover.iter().find(|f| f.from == proxy_region) {
        Some(rule) if endpoint.is_none_or(|l| l.region != rule.to) => 4,
        _ => 3,
    }
}

/// Istio's `LbPriority`: 0 same region, zone and subzone; 1 same region and zone; 2 same region;
/// 3 otherwise.
fn locality_rank(proxy: &Locality, endpoint: Option<&EnvoyLocality>) -> u32 {
    let (region, zone, sub_zone) = endpoint.map_or(("", "", ""), |l| (&*l.region, &*l.zone, &*l.sub_zone));
    match (proxy.region == region, proxy.zone == zone, proxy.sub_zone == sub_zone) {
        (true, true, true) => 0,
        (true, true, false) => 1,
        (true, false, _) => 2,
        (false, _, _) => 3,
    }
}

/// Istio's `applyLocalityFailover`: ranks each locality by [`locality_rank`] (other regions through
/// `other_region`), composed with the priority it has (× 5), then compacted.
fn apply_locality_failover(
    proxy: &Locality,
    localities: &mut [LocalityLbEndpoints],
    other_region: impl Fn(&str, Option<&EnvoyLocality>) -> u32,
) {
    rank_and_compact(localities, 5, |l| match locality_rank(proxy, l.locality.as_ref()) {
        3 => other_region(&proxy.region, l.locality.as_ref()),
        rank => rank,
    });
}

/// Sets each locality's priority to `previous × factor + rank(locality)` and renumbers the distinct
/// priorities 0, 1, 2, … in order (Envoy wants them without gaps).
fn rank_and_compact(
    localities: &mut [LocalityLbEndpoints],
    factor: u32,
    rank: impl Fn(&LocalityLbEndpoints) -> u32,
) {
    for l in localities.iter_mut() {
        l.priority = l.priority.saturating_mul(factor).saturating_add(rank(l));
    }
    compact(localities);
}

/// Renumbers the distinct priorities of `localities` to 0..N keeping their order.
fn compact(localities: &mut [LocalityLbEndpoints]) {
    let distinct: BTreeMap<u32, u32> = localities
        .iter()
        .map(|l| l.priority)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .zip(0..)
        .collect();
    for l in localities.iter_mut() {
        l.priority = distinct[&l.priority];
    }
}

/// Istio's `LocalityMatch`: `region[/zone[/subzone]]` where `*` matches anything and a missing part
/// matches any zone or subzone (the region must be given or `*`).
pub(crate) fn locality_matches(locality: &Locality, rule: &str) -> bool {
    let mut parts = rule.split('/');
    let (region, zone, sub_zone) = (parts.next().unwrap_or(""), parts.next(), parts.next());
    let part = |rule: Option<&str>, have: &str| match rule {
        None | Some("" | "*") => true,
        Some(want) => want == have,
    };
    (region == "*" || region == locality.region)
        && part(zone, &locality.zone)
        && part(sub_zone, &locality.sub_zone)
}

fn model_locality(l: Option<&EnvoyLocality>) -> Locality {
    l.map(|l| Locality { region: l.region.clone(), zone: l.zone.clone(), sub_zone: l.sub_zone.clone() })
        .unwrap_or_default()
}

/// Istio's `applyLocalityWeights`: the first `distribute` rule whose `from` matches the proxy sets
/// the weight of each destination locality its `to` names (a pattern matching several localities
/// splits the weight by their own weights, rounded up), and empties the localities no `to` entry
/// matches.
fn apply_distribute(proxy: &Locality, localities: &mut [LocalityLbEndpoints], distribute: &[Distribute]) {
    let Some(rule) = distribute.iter().find(|d| locality_matches(proxy, &d.from)) else { return };
    let mut unmatched: Vec<bool> = vec![true; localities.len()];
    for (pattern, weight) in &rule.to {
        let matched: Vec<(usize, u32)> = localities
            .iter()
            .enumerate()
            .filter(|(i, l)| unmatched[*i] && locality_matches(&model_locality(l.locality.as_ref()), pattern))
            .map(|(i, l)| (i, l.load_balancing_weight.as_ref().map_or(1, |w| w.value)))
            .collect();
        let total: u64 = matched.iter().map(|(_, w)| u64::from(*w)).sum();
        for (i, own) in matched {
            unmatched[i] = false;
            let share = (u64::from(own) * u64::from(*weight)).div_ceil(total.max(1));
            if share > 0 {
                localities[i].load_balancing_weight = Some(u32v(u32::try_from(share).unwrap_or(u32::MAX)));
            }
        }
    }
    for (l, unmatched) in localities.iter_mut().zip(unmatched) {
        if unmatched {
            l.lb_endpoints.clear();
        }
    }
}

/// Istio's `applyFailoverPriorities`: splits each locality into one entry per rank, where an
/// endpoint's rank is the number of `priorities` labels from the first mismatch to the end (0: all
/// match). A label given as `key=value` compares the endpoint's label with `value`, otherwise with
/// the proxy's. A mismatch of a leading `topology.istio.io/network` label does not stop the
/// comparison but moves the endpoint below every rank of its network. Nothing changes for a proxy
/// without labels.
fn apply_failover_priority(
    localities: &mut Vec<LocalityLbEndpoints>,
    members: &[Vec<&Labels>],
    proxy: &Labels,
    priorities: &[String],
) {
    if proxy.is_empty() || localities.is_empty() || members.len() != localities.len() {
        return;
    }
    let rules: Vec<(&str, Option<&str>)> = priorities
        .iter()
        .map(|p| match p.split_once('=') {
            Some((key, value)) if !value.contains('=') => (key, Some(value)),
            Some((key, _)) => (key, None),
            None => (p.as_str(), None),
        })
        .collect();
    let lowest = u32::try_from(rules.len()).unwrap_or(u32::MAX);
    let network_first = rules.first().is_some_and(|(k, _)| *k == LABEL_TOPOLOGY_NETWORK);
    let rank = |labels: &Labels| -> u32 {
        let mut adjust = 0;
        for (j, (key, value)) in rules.iter().enumerate() {
            let wanted = value.or_else(|| proxy.get(*key).map(String::as_str));
            if wanted.unwrap_or("") != labels.get(*key).map_or("", String::as_str) {
                if j == 0 && network_first {
                    adjust = lowest;
                    continue;
                }
                return lowest - u32::try_from(j).unwrap_or(0) + adjust;
            }
        }
        adjust
    };
    let mut out = Vec::with_capacity(localities.len());
    for (mut locality, labels) in localities.drain(..).zip(members) {
        let endpoints = std::mem::take(&mut locality.lb_endpoints);
        let mut by_rank: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (j, l) in labels.iter().enumerate() {
            by_rank.entry(rank(l)).or_default().push(j);
        }
        for (priority, indices) in by_rank {
            let lb_endpoints: Vec<_> = indices.iter().filter_map(|j| endpoints.get(*j).cloned()).collect();
            let weight = lb_endpoints
                .iter()
                .map(|e| e.load_balancing_weight.as_ref().map_or(0, |w| w.value))
                .fold(0u32, u32::saturating_add);
            out.push(LocalityLbEndpoints {
                lb_endpoints,
                priority,
                load_balancing_weight: Some(u32v(weight)),
                ..locality.clone()
            });
        }
    }
    compact(&mut out);
    *localities = out;
}

#[cfg(test)]
mod tests;
