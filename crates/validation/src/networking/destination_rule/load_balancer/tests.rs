//! The load balancer cases from Istio's tests.

use super::*;
use crate::{
    networking::destination_rule::tests::{check_all, policy},
    testutil::Want::{Error, Valid, Warning},
};

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
        ("consistent hash cookie", &lb("{consistentHash: {httpCookie: {name: test, ttl: 3600s}}}"), Valid),
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
            Error("spec.trafficPolicy.loadBalancer.warmup.aggression", "aggression should be greater than 0"),
        ),
        (
            "unknown simple number",
            &lb("{simple: 42}"),
            Error("spec.trafficPolicy.loadBalancer.simple", "Unsupported value: 42"),
        ),
    ]);
}

#[test]
fn locality_lb_setting_cases_from_istio() {
    let with_od =
        |l: &str| policy(&format!("{{loadBalancer: {{localityLbSetting: {l}}}, outlierDetection: {{}}}}"));
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
    let with_od =
        |l: &str| policy(&format!("{{loadBalancer: {{zoneAwareLbSetting: {l}}}, outlierDetection: {{}}}}"));
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
fn primality_matches_trial_division() {
    let trial = |x: u64| {
        x != 0
            && (x < 4
                || (x % 2 == 1 && (3..).step_by(2).take_while(|f| f * f <= x).all(|f| !x.is_multiple_of(f))))
    };
    for x in (0..2000).chain(MAGLEV_TABLE_SIZE_LIMIT - 50..MAGLEV_TABLE_SIZE_LIMIT + 2000) {
        assert_eq!(is_prime(x), trial(x), "{x}");
    }
    assert!(is_prime(18_446_744_073_709_551_557));
    assert!(!is_prime(18_446_744_073_709_551_555));
    assert!(!is_prime(4_294_967_291 * 4_294_967_279));
}
