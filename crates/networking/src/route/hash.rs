//! Route hash policies from DestinationRule `consistentHash` settings, as Istio's
//! `pilot/pkg/networking/core/route/route.go` (`ConsistentHashToHashPolicy`, `hashForService`,
//! `HashForHTTPDestination`). The cluster gets RING_HASH or MAGLEV ([`crate::cluster`]); the key it hashes
//! comes from the route's `hash_policy`.

use api::networking::{
    destination_rule::{
        DestinationRule, TrafficPolicy, load_balancer_settings::ConsistentHashLb,
        traffic_policy::PortTrafficPolicy,
    },
    virtual_service::Destination,
};
use envoy_types::pb::envoy::config::route::v3::route_action::{
    HashPolicy,
    hash_policy::{ConnectionProperties, Cookie, CookieAttribute, Header, PolicySpecifier, QueryParameter},
};

use crate::convert::duration;

/// The Envoy route hash policy for a `consistentHash` setting (Istio's `ConsistentHashToHashPolicy`):
/// `httpHeaderName` → header, `httpCookie` → cookie (name, path, TTL, attributes; Envoy generates the
/// cookie when it is absent and a TTL is set), `useSourceIp` → the connection's source IP,
/// `httpQueryParameterName` → query parameter. `None` when no hash key is set (the ring then has no key).
pub fn hash_policy(ch: &ConsistentHashLb) -> Option<HashPolicy> {
    let specifier = if let Some(name) = &ch.http_header_name {
        PolicySpecifier::Header(Header { header_name: name.clone(), ..Default::default() })
    } else if let Some(cookie) = &ch.http_cookie {
        PolicySpecifier::Cookie(Cookie {
            name: cookie.name.clone(),
            ttl: cookie.ttl.as_ref().map(duration),
            path: cookie.path.clone(),
            attributes: cookie
                .attributes
                .iter()
                .map(|a| CookieAttribute { name: a.name.clone(), value: a.value.clone() })
                .collect(),
        })
    } else if let Some(source_ip) = ch.use_source_ip {
        PolicySpecifier::ConnectionProperties(ConnectionProperties { source_ip })
    } else if let Some(name) = &ch.http_query_parameter_name {
        PolicySpecifier::QueryParameter(QueryParameter { name: name.clone() })
    } else {
        return None;
    };
    Some(HashPolicy { policy_specifier: Some(specifier), ..Default::default() })
}

/// The `consistentHash` of a service port without VirtualService (Istio's `hashForService`): the
/// rule's, replaced by the one of the port's `portLevelSettings` entry when that entry sets one
/// (a port-level `simple` policy does not clear the rule's hash).
pub fn service_hash(rule: &DestinationRule, port: u32) -> Option<&ConsistentHashLb> {
    let tp = rule.traffic_policy.as_ref()?;
    let top = tp.load_balancer.as_ref().and_then(|lb| lb.consistent_hash.as_ref());
    tp.port_level(port).and_then(port_hash).or(top)
}

/// The `consistentHash` for a VirtualService destination (Istio's `HashForHTTPDestination`), first
/// set of: the subset's port-level entry for the destination's port, the subset's, the rule's
/// port-level entry for that port, the rule's. Port-level entries count only when the destination
/// names a port.
pub fn destination_hash<'r>(rule: &'r DestinationRule, dst: &Destination) -> Option<&'r ConsistentHashLb> {
    let port = dst.port.as_ref().map(|p| p.number);
    let level_hash =
        |tp: &'r TrafficPolicy| -> Option<&'r ConsistentHashLb> { port_hash(tp.port_level(port?)?) };
    let tp = rule.traffic_policy.as_ref();
    let top = tp.and_then(|tp| tp.load_balancer.as_ref()).and_then(|lb| lb.consistent_hash.as_ref());
    let top_level = tp.and_then(level_hash);
    let subset = rule.subsets.iter().find(|s| s.name == dst.subset).and_then(|s| s.traffic_policy.as_ref());
    let subset_level = subset.and_then(level_hash);
    let subset_top =
        subset.and_then(|tp| tp.load_balancer.as_ref()).and_then(|lb| lb.consistent_hash.as_ref());
    subset_level.or(subset_top).or(top_level).or(top)
}

fn port_hash(level: &PortTrafficPolicy) -> Option<&ConsistentHashLb> {
    level.load_balancer.as_ref()?.consistent_hash.as_ref()
}

#[cfg(test)]
mod tests {
    use api::networking::{
        destination_rule::{
            LoadBalancerSettings, Subset, TrafficPolicy,
            load_balancer_settings::consistent_hash_lb::{HttpCookie, http_cookie::Attribute},
        },
        virtual_service::PortSelector,
    };

    use super::*;

    fn header(name: &str) -> ConsistentHashLb {
        ConsistentHashLb { http_header_name: Some(name.into()), ..Default::default() }
    }

    fn lb(ch: ConsistentHashLb) -> Option<LoadBalancerSettings> {
        Some(LoadBalancerSettings { consistent_hash: Some(ch), ..Default::default() })
    }

    fn level(port: u32, ch: Option<ConsistentHashLb>) -> PortTrafficPolicy {
        PortTrafficPolicy {
            port: Some(PortSelector { number: port }),
            load_balancer: Some(LoadBalancerSettings {
                consistent_hash: ch,
                simple: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn dst(subset: &str, port: Option<u32>) -> Destination {
        Destination {
            host: "svc".into(),
            subset: subset.into(),
            port: port.map(|number| PortSelector { number }),
        }
    }

    /// Rule: top `a`, port 80 → `b`, port 81 simple only; subset `s` → `c` with port 80 → `d`; subset `t` plain.
    fn rule() -> DestinationRule {
        DestinationRule {
            host: "svc".into(),
            traffic_policy: Some(TrafficPolicy {
                load_balancer: lb(header("a")),
                port_level_settings: vec![level(80, Some(header("b"))), level(81, None)],
                ..Default::default()
            }),
            subsets: vec![
                Subset {
                    name: "s".into(),
                    traffic_policy: Some(TrafficPolicy {
                        load_balancer: lb(header("c")),
                        port_level_settings: vec![level(80, Some(header("d")))],
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Subset { name: "t".into(), ..Default::default() },
            ],
            ..Default::default()
        }
    }

    fn key(ch: Option<&ConsistentHashLb>) -> Option<&str> {
        ch.and_then(|c| c.http_header_name.as_deref())
    }

    #[test]
    fn service_hash_prefers_a_port_level_hash_only_when_set() {
        let r = rule();
        assert_eq!(key(service_hash(&r, 80)), Some("b"));
        assert_eq!(key(service_hash(&r, 81)), Some("a"), "a port-level `simple` keeps the rule's hash");
        assert_eq!(key(service_hash(&r, 82)), Some("a"));
        assert_eq!(service_hash(&DestinationRule::default(), 80), None);
    }

    #[test]
    fn destination_hash_picks_subset_port_then_subset_then_port_then_rule() {
        let r = rule();
        assert_eq!(key(destination_hash(&r, &dst("s", Some(80)))), Some("d"));
        assert_eq!(
            key(destination_hash(&r, &dst("s", None))),
            Some("c"),
            "port levels need a destination port"
        );
        assert_eq!(key(destination_hash(&r, &dst("s", Some(81)))), Some("c"));
        assert_eq!(key(destination_hash(&r, &dst("t", Some(80)))), Some("b"));
        assert_eq!(key(destination_hash(&r, &dst("", Some(81)))), Some("a"));
        assert_eq!(key(destination_hash(&r, &dst("", None))), Some("a"));
        assert_eq!(destination_hash(&DestinationRule::default(), &dst("", Some(80))), None);
    }

    #[test]
    fn hash_keys_become_envoy_hash_policies() {
        let spec = |ch: ConsistentHashLb| hash_policy(&ch).and_then(|p| p.policy_specifier);
        assert_eq!(
            spec(header("x-user")),
            Some(PolicySpecifier::Header(Header { header_name: "x-user".into(), ..Default::default() }))
        );
        let cookie = HttpCookie {
            name: "session".into(),
            path: "/".into(),
            ttl: Some(api::wkt::Duration { seconds: 60, nanos: 0 }),
            attributes: vec![Attribute { name: "SameSite".into(), value: "Strict".into() }],
        };
        assert_eq!(
            spec(ConsistentHashLb { http_cookie: Some(cookie), ..Default::default() }),
            Some(PolicySpecifier::Cookie(Cookie {
                name: "session".into(),
                ttl: Some(envoy_types::pb::google::protobuf::Duration { seconds: 60, nanos: 0 }),
                path: "/".into(),
                attributes: vec![CookieAttribute { name: "SameSite".into(), value: "Strict".into() }],
            }))
        );
        assert_eq!(
            spec(ConsistentHashLb { use_source_ip: Some(true), ..Default::default() }),
            Some(PolicySpecifier::ConnectionProperties(ConnectionProperties { source_ip: true }))
        );
        assert_eq!(
            spec(ConsistentHashLb { http_query_parameter_name: Some("u".into()), ..Default::default() }),
            Some(PolicySpecifier::QueryParameter(QueryParameter { name: "u".into() }))
        );
        assert_eq!(hash_policy(&ConsistentHashLb { minimum_ring_size: 8, ..Default::default() }), None);
    }
}
