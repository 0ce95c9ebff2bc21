//! Locality load balancing rules as pure functions (the cases of Istio's
//! `loadbalancer_test.go` and its documentation, with our own values).

use std::collections::BTreeMap;

use api::networking::destination_rule::{
    DestinationRule, LoadBalancerSettings, LocalityLoadBalancerSetting, OutlierDetection, Subset,
    TrafficPolicy, ZoneAwareLoadBalancerSetting,
    locality_load_balancer_setting::{Distribute, Failover},
    traffic_policy::PortTrafficPolicy,
    zone_aware_load_balancer_setting::Failover as ZoneFailover,
};
use api::networking::virtual_service::PortSelector;
use envoy_types::pb::envoy::config::{
    cluster::v3::cluster::{CommonLbConfig, common_lb_config::LocalityConfigSpecifier},
    core::v3::Locality as EnvoyLocality,
    endpoint::v3::{LbEndpoint, LocalityLbEndpoints},
};
use model::{
    push::{MeshSettings, node::Locality},
    service::{Labels, TrafficDistribution},
};

use super::*;

fn loc(label: &str) -> Locality {
    let mut p = label.split('/').map(str::to_string);
    Locality {
        region: p.next().unwrap_or_default(),
        zone: p.next().unwrap_or_default(),
        sub_zone: p.next().unwrap_or_default(),
    }
}

/// One locality group of `n` endpoints of weight 1 each.
fn group(label: &str, n: usize) -> LocalityLbEndpoints {
    let l = loc(label);
    LocalityLbEndpoints {
        locality: Some(EnvoyLocality { region: l.region, zone: l.zone, sub_zone: l.sub_zone }),
        lb_endpoints: (0..n)
            .map(|_| LbEndpoint { load_balancing_weight: Some(u32v(1)), ..Default::default() })
            .collect(),
        load_balancing_weight: Some(u32v(u32::try_from(n).unwrap())),
        ..Default::default()
    }
}

fn priorities(groups: &[LocalityLbEndpoints]) -> Vec<(String, u32)> {
    groups
        .iter()
        .map(|g| {
            let l = g.locality.as_ref().unwrap();
            (format!("{}/{}/{}", l.region, l.zone, l.sub_zone), g.priority)
        })
        .collect()
}

fn locality_setting(s: LocalityLoadBalancerSetting) -> LbSetting<'static> {
    LbSetting::Locality { setting: std::borrow::Cow::Owned(s), force: false }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn default_failover_ranks_subzone_zone_region_then_others() {
    let proxy = loc("r1/z1/s1");
    let mut groups =
        vec![group("r1/z1/s1", 1), group("r1/z1/s2", 1), group("r1/z2/s1", 1), group("r2/z1/s1", 1)];
    let setting = locality_setting(LocalityLoadBalancerSetting { enabled: Some(true), ..Default::default() });
    let view = ProxyView { locality: &proxy, labels: &Labels::new() };
    apply_to_assignment(&mut groups, &[], view, &setting, true);
    let got: Vec<u32> = groups.iter().map(|g| g.priority).collect();
    assert_eq!(got, [0, 1, 2, 3]);
}

#[test]
fn priorities_are_contiguous_when_a_rank_has_no_endpoints() {
    let proxy = loc("r1/z1/s1");
    // No same-zone-other-subzone and no same-region endpoints: ranks 0 and 3 become 0 and 1.
    let mut groups = vec![group("r2/z9/s9", 2), group("r1/z1/s1", 1)];
    let setting = locality_setting(LocalityLoadBalancerSetting::default());
    apply_to_assignment(
        &mut groups,
        &[],
        ProxyView { locality: &proxy, labels: &Labels::new() },
        &setting,
        true,
    );
    assert_eq!(priorities(&groups), [("r2/z9/s9".to_string(), 1), ("r1/z1/s1".to_string(), 0)]);
}

#[test]
fn without_outlier_detection_failover_is_not_applied_unless_forced() {
    let proxy = loc("r1/z1/s1");
    let setting = locality_setting(LocalityLoadBalancerSetting::default());
    let mut groups = vec![group("r1/z1/s1", 1), group("r2/z1/s1", 1)];
    assert!(!setting.changes_assignment(false));
    apply_to_assignment(
        &mut groups,
        &[],
        ProxyView { locality: &proxy, labels: &Labels::new() },
        &setting,
        false,
    );
    assert!(groups.iter().all(|g| g.priority == 0));

    let forced = LbSetting::Locality {
        setting: std::borrow::Cow::Owned(LocalityLoadBalancerSetting::default()),
        force: true,
    };
    assert!(forced.changes_assignment(false));
    apply_to_assignment(
        &mut groups,
        &[],
        ProxyView { locality: &proxy, labels: &Labels::new() },
        &forced,
        false,
    );
    assert_eq!(groups[1].priority, 1);
}

#[test]
fn failover_target_region_comes_before_other_regions() {
    let proxy = loc("us-east/z1");
    let mut groups = vec![group("eu-west/a", 1), group("us-west/b", 1), group("us-east/z1", 1)];
    let setting = locality_setting(LocalityLoadBalancerSetting {
        failover: vec![Failover { from: "us-east".into(), to: "us-west".into() }],
        ..Default::default()
    });
    apply_to_assignment(
        &mut groups,
        &[],
        ProxyView { locality: &proxy, labels: &Labels::new() },
        &setting,
        true,
    );
    assert_eq!(
        groups.iter().map(|g| g.priority).collect::<Vec<_>>(),
        [2, 1, 0],
        "own locality, then the failover region, then the rest"
    );
}

#[test]
fn distribute_sets_weights_from_the_first_matching_rule_and_empties_the_rest() {
    let proxy = loc("r1/z1/s1");
    let mut groups = vec![group("r1/z1/s1", 2), group("r2/a/x", 1), group("r2/b/y", 3), group("r3/c/z", 1)];
    let setting = locality_setting(LocalityLoadBalancerSetting {
        distribute: vec![
            Distribute { from: "r9/*".into(), to: BTreeMap::from([("r3/*".to_string(), 100)]) },
            Distribute {
                from: "r1/z1/*".into(),
                to: BTreeMap::from([("r1/z1/*".to_string(), 80), ("r2/*".to_string(), 20)]),
            },
        ],
        ..Default::default()
    });
    // distribute does not need outlier detection.
    assert!(setting.changes_assignment(false));
    apply_to_assignment(
        &mut groups,
        &[],
        ProxyView { locality: &proxy, labels: &Labels::new() },
        &setting,
        false,
    );
    let weights: Vec<u32> = groups.iter().map(|g| g.load_balancing_weight.as_ref().unwrap().value).collect();
    // r2's 20 split by the localities' own weights 1 and 3: ceil(20/4)=5, ceil(60/4)=15.
    assert_eq!(weights[..3], [80, 5, 15]);
    assert!(groups[3].lb_endpoints.is_empty(), "a locality no `to` names gets no traffic");
    assert!(groups.iter().all(|g| g.priority == 0), "distribute sets weights, not priorities");
}

#[test]
fn failover_priority_splits_localities_by_matching_labels() {
    const NET: &str = "topology.istio.io/network";
    let proxy_labels = labels(&[
        (NET, "n1"),
        ("topology.kubernetes.io/region", "r1"),
        ("topology.kubernetes.io/zone", "z1"),
    ]);
    let same = labels(&[
        (NET, "n1"),
        ("topology.kubernetes.io/region", "r1"),
        ("topology.kubernetes.io/zone", "z1"),
    ]);
    let other_zone = labels(&[
        (NET, "n1"),
        ("topology.kubernetes.io/region", "r1"),
        ("topology.kubernetes.io/zone", "z2"),
    ]);
    let other_region = labels(&[
        (NET, "n1"),
        ("topology.kubernetes.io/region", "r2"),
        ("topology.kubernetes.io/zone", "z1"),
    ]);
    let other_network = labels(&[
        (NET, "n2"),
        ("topology.kubernetes.io/region", "r1"),
        ("topology.kubernetes.io/zone", "z1"),
    ]);
    // One locality holding all four endpoints (failover priority does not look at localities).
    let mut groups = vec![group("r1/z1", 4)];
    let members = vec![vec![&other_network, &other_region, &other_zone, &same]];
    let setting = locality_setting(LocalityLoadBalancerSetting {
        failover_priority: vec![
            NET.into(),
            "topology.kubernetes.io/region".into(),
            "topology.kubernetes.io/zone".into(),
        ],
        ..Default::default()
    });
    let proxy = loc("r1/z1");
    apply_to_assignment(
        &mut groups,
        &members,
        ProxyView { locality: &proxy, labels: &proxy_labels },
        &setting,
        true,
    );
    // same (0) < other zone (1) < other region (2) < other network, same region and zone (3 + 0).
    assert_eq!(groups.len(), 4);
    let by_priority: Vec<(u32, usize)> = groups.iter().map(|g| (g.priority, g.lb_endpoints.len())).collect();
    assert_eq!(by_priority, [(0, 1), (1, 1), (2, 1), (3, 1)]);
    assert!(groups.iter().all(|g| g.load_balancing_weight.as_ref().unwrap().value == 1));
    // Without `failover`, no region failover follows: priorities stay as the labels made them.
}

#[test]
fn failover_priority_with_a_value_prefers_that_value_over_the_proxys() {
    let v1 = labels(&[("version", "v1")]);
    let v2 = labels(&[("version", "v2")]);
    let mut groups = vec![group("r1", 2)];
    let members = vec![vec![&v2, &v1]];
    let setting = locality_setting(LocalityLoadBalancerSetting {
        failover_priority: vec!["version=v1".into()],
        ..Default::default()
    });
    let proxy = loc("r1");
    let proxy_labels = labels(&[("version", "v2")]);
    apply_to_assignment(
        &mut groups,
        &members,
        ProxyView { locality: &proxy, labels: &proxy_labels },
        &setting,
        true,
    );
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].priority, 0);
    assert_eq!(groups[0].lb_endpoints.len(), 1);
    assert_eq!(groups[1].priority, 1);
}

#[test]
fn failover_priority_then_failover_composes_both() {
    let a = labels(&[("tier", "gold")]);
    let b = labels(&[("tier", "silver")]);
    // Two localities: the proxy's own zone and another region, each with a gold and a silver endpoint.
    let mut groups = vec![group("r1/z1", 2), group("r2/z1", 2)];
    let members = vec![vec![&a, &b], vec![&a, &b]];
    let setting = locality_setting(LocalityLoadBalancerSetting {
        failover_priority: vec!["tier".into()],
        failover: vec![Failover { from: "r1".into(), to: "r2".into() }],
        ..Default::default()
    });
    let proxy = loc("r1/z1");
    let proxy_labels = labels(&[("tier", "gold")]);
    apply_to_assignment(
        &mut groups,
        &members,
        ProxyView { locality: &proxy, labels: &proxy_labels },
        &setting,
        true,
    );
    let mut got: Vec<(String, u32)> = priorities(&groups);
    got.sort_by_key(|(_, p)| *p);
    // gold local, gold remote, silver local, silver remote.
    assert_eq!(
        got,
        [
            ("r1/z1/".to_string(), 0),
            ("r2/z1/".to_string(), 1),
            ("r1/z1/".to_string(), 2),
            ("r2/z1/".to_string(), 3)
        ]
    );
}

#[test]
fn cluster_gets_locality_weighted_config_only_when_weights_or_failover_rules_apply() {
    let mut common = CommonLbConfig::default();
    locality_setting(LocalityLoadBalancerSetting::default()).apply_to_cluster(&mut common, true);
    assert!(common.locality_config_specifier.is_none(), "the mesh default with outlier detection");

    let failover = locality_setting(LocalityLoadBalancerSetting {
        failover: vec![Failover { from: "a".into(), to: "b".into() }],
        ..Default::default()
    });
    failover.apply_to_cluster(&mut common, false);
    assert!(common.locality_config_specifier.is_none(), "failover rules without outlier detection");
    failover.apply_to_cluster(&mut common, true);
    assert!(matches!(
        common.locality_config_specifier,
        Some(LocalityConfigSpecifier::LocalityWeightedLbConfig(_))
    ));

    let mut common = CommonLbConfig::default();
    locality_setting(LocalityLoadBalancerSetting {
        distribute: vec![Distribute { from: "*".into(), to: BTreeMap::from([("*".to_string(), 100)]) }],
        ..Default::default()
    })
    .apply_to_cluster(&mut common, false);
    assert!(matches!(
        common.locality_config_specifier,
        Some(LocalityConfigSpecifier::LocalityWeightedLbConfig(_))
    ));
}

#[test]
fn zone_aware_buckets_regions_and_configures_envoy() {
    let za = ZoneAwareLoadBalancerSetting {
        failover: vec![ZoneFailover { from: "r1".into(), to: "r3".into() }],
        min_cluster_size: Some(3),
        ..Default::default()
    };
    let setting = LbSetting::ZoneAware(std::borrow::Cow::Borrowed(&za));
    let mut common = CommonLbConfig::default();
    setting.apply_to_cluster(&mut common, false);
    let Some(LocalityConfigSpecifier::ZoneAwareLbConfig(z)) = &common.locality_config_specifier else {
        panic!("zone-aware config expected")
    };
    assert_eq!(z.min_cluster_size.as_ref().unwrap().value, 3);
    assert!(z.routing_enabled.is_none());

    let proxy = loc("r1/z1");
    // Zones of the proxy's region share priority 0 (Envoy balances zones there).
    let mut groups = vec![group("r1/z1", 1), group("r1/z2", 1), group("r2/z1", 1), group("r3/z1", 1)];
    apply_to_assignment(
        &mut groups,
        &[],
        ProxyView { locality: &proxy, labels: &Labels::new() },
        &setting,
        false,
    );
    assert_eq!(groups.iter().map(|g| g.priority).collect::<Vec<_>>(), [0, 0, 2, 1]);

    let off = ZoneAwareLoadBalancerSetting { enabled: Some(false), ..Default::default() };
    let setting = LbSetting::ZoneAware(std::borrow::Cow::Borrowed(&off));
    let mut common = CommonLbConfig::default();
    setting.apply_to_cluster(&mut common, true);
    let Some(LocalityConfigSpecifier::ZoneAwareLbConfig(z)) = &common.locality_config_specifier else {
        panic!("zone-aware config expected")
    };
    assert_eq!(z.routing_enabled.as_ref().unwrap().value, 0.0, "disabled: Envoy's own zone routing off");
    assert!(!setting.changes_assignment(true));
}

#[test]
fn effective_setting_follows_istios_precedence() {
    let mesh = MeshSettings::default();
    let za = ZoneAwareLoadBalancerSetting::default();
    let with_both = LoadBalancerSettings {
        zone_aware_lb_setting: Some(za.clone()),
        locality_lb_setting: Some(LocalityLoadBalancerSetting::default()),
        ..Default::default()
    };
    assert!(matches!(
        effective_setting(&mesh, Some(&with_both), TrafficDistribution::PreferSameZone),
        Some(LbSetting::ZoneAware(_))
    ));
    let off = LoadBalancerSettings {
        locality_lb_setting: Some(LocalityLoadBalancerSetting { enabled: Some(false), ..Default::default() }),
        ..Default::default()
    };
    assert_eq!(effective_setting(&mesh, Some(&off), TrafficDistribution::PreferSameNode), None);

    let Some(LbSetting::Locality { setting, force }) =
        effective_setting(&mesh, None, TrafficDistribution::PreferSameZone)
    else {
        panic!("traffic distribution gives a locality setting")
    };
    assert!(force);
    assert_eq!(
        setting.failover_priority,
        ["topology.istio.io/network", "topology.kubernetes.io/region", "topology.kubernetes.io/zone"]
    );
    let Some(LbSetting::Locality { setting, .. }) =
        effective_setting(&mesh, None, TrafficDistribution::PreferSameNode)
    else {
        panic!()
    };
    assert_eq!(setting.failover_priority.last().unwrap(), "kubernetes.io/hostname");

    // Mesh: zone-aware before locality; Istio's default locality setting is on.
    let Some(LbSetting::Locality { force, .. }) = effective_setting(&mesh, None, TrafficDistribution::Any)
    else {
        panic!("Istio's default mesh setting is enabled")
    };
    assert!(!force);
    let zoned = MeshSettings { zone_aware_lb_setting: Some(za), ..MeshSettings::default() };
    assert!(matches!(
        effective_setting(&zoned, None, TrafficDistribution::Any),
        Some(LbSetting::ZoneAware(_))
    ));
    let off_mesh = MeshSettings {
        locality_lb_setting: Some(LocalityLoadBalancerSetting { enabled: Some(false), ..Default::default() }),
        ..MeshSettings::default()
    };
    assert_eq!(effective_setting(&off_mesh, None, TrafficDistribution::Any), None);
}

#[test]
fn locality_rules_match_with_wildcards_and_missing_parts() {
    let l = loc("us-east/zone-a/rack-1");
    assert!(locality_matches(&l, "us-east"));
    assert!(locality_matches(&l, "us-east/*"));
    assert!(locality_matches(&l, "*"));
    assert!(locality_matches(&l, "us-east/zone-a/rack-1"));
    assert!(!locality_matches(&l, "us-east/zone-b"));
    assert!(!locality_matches(&l, "us-west/*"));
    assert!(!locality_matches(&l, "us-east/zone-a/rack-2"));
}

#[test]
fn subset_and_port_level_policies_merge_as_istio() {
    let od = || Some(OutlierDetection::default());
    let lb = |min: u64| {
        Some(LoadBalancerSettings {
            zone_aware_lb_setting: Some(ZoneAwareLoadBalancerSetting {
                min_cluster_size: Some(min),
                ..Default::default()
            }),
            ..Default::default()
        })
    };
    let rule = DestinationRule {
        traffic_policy: Some(TrafficPolicy {
            outlier_detection: od(),
            load_balancer: lb(1),
            port_level_settings: vec![PortTrafficPolicy {
                port: Some(PortSelector { number: 9000 }),
                load_balancer: lb(2),
                ..Default::default()
            }],
            ..Default::default()
        }),
        subsets: vec![
            Subset {
                name: "a".into(),
                traffic_policy: Some(TrafficPolicy { load_balancer: lb(3), ..Default::default() }),
                ..Default::default()
            },
            Subset {
                name: "b".into(),
                traffic_policy: Some(TrafficPolicy {
                    port_level_settings: vec![PortTrafficPolicy {
                        port: Some(PortSelector { number: 80 }),
                        load_balancer: lb(4),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let size = |l: Option<&LoadBalancerSettings>| {
        l.and_then(|l| l.zone_aware_lb_setting.as_ref()).and_then(|z| z.min_cluster_size)
    };
    let (o, l) = lb_policy_for(&rule, 80, "");
    assert!(o.is_some());
    assert_eq!(size(l), Some(1));
    // A port-level entry does not inherit the destination's outlier detection.
    let (o, l) = lb_policy_for(&rule, 9000, "");
    assert!(o.is_none());
    assert_eq!(size(l), Some(2));
    // A subset's load balancer overrides, the destination's outlier detection stays.
    let (o, l) = lb_policy_for(&rule, 80, "a");
    assert!(o.is_some());
    assert_eq!(size(l), Some(3));
    // A subset's port-level entry replaces both parts.
    let (o, l) = lb_policy_for(&rule, 80, "b");
    assert!(o.is_none());
    assert_eq!(size(l), Some(4));
}
