//! Proxyless gRPC clients (`GENERATOR: grpc`) as istiod's `grpcgen` serves them, where the conformance
//! harness (docs/CONFORMANCE.md, the `grpc` proxy) found meshpilot different. Sources:
//! `pilot/pkg/networking/grpcgen/rds.go` (`BuildHTTPRoutes` over `BuildSidecarOutboundVirtualHosts`),
//! `grpcgen/cds.go` (`applyCircuitBreakers`) and
//! `pilot/pkg/networking/core/route/route.go` (`setTimeout` for a proxyless node,
//! `BuildDefaultHTTPOutboundRoute`).

use crate::support;

use envoy_types::pb::{
    envoy::config::route::v3::{RouteAction, RouteConfiguration, route::Action},
    google::protobuf::Duration,
};
use meshpilot_networking::{cluster::generate_clusters, rds::generate_routes, route::default_retry_policy};
use support::*;

/// Services `web` (10.0.0.1) and `plain` (10.0.0.2) in `ns1` on HTTP port 80; `web` with a 3 s
/// timeout on `/slow` and a DestinationRule with connection-pool limits.
fn config() -> String {
    http_service_entry("web", "ns1", "10.0.0.1")
        + &http_service_entry("plain", "ns1", "10.0.0.2")
        + r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: ns1}
spec:
  hosts: [web.ns1.svc.cluster.local]
  http:
  - match: [{uri: {prefix: /slow}}]
    timeout: 3s
    route: [{destination: {host: web}}]
  - route: [{destination: {host: web}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: ns1}
spec:
  host: web.ns1.svc.cluster.local
  trafficPolicy:
    connectionPool: {http: {http2MaxRequests: 100, http1MaxPendingRequests: 7}, tcp: {maxConnections: 5}}
"#
}

const WEB: &str = "web.ns1.svc.cluster.local";

/// The route actions of the virtual host `name` in `rc`, in order.
fn actions<'a>(rc: &'a RouteConfiguration, name: &str) -> Vec<&'a RouteAction> {
    vhost(rc, name)
        .routes
        .iter()
        .map(|r| match &r.action {
            Some(Action::Route(a)) => a,
            other => panic!("not a route action: {other:?}"),
        })
        .collect()
}

fn seconds(s: i64) -> Option<Duration> {
    Some(Duration { seconds: s, nanos: 0 })
}

#[test]
fn virtual_service_timeouts_are_the_stream_duration_for_grpc() {
    let world = World::new(parse(&config(), "ns1"));
    let push = world.push();
    let out = generate_routes(&push, &proxyless("ns1"), &[format!("outbound|80||{WEB}")]);
    let routes = actions(&out.resources[0], &format!("{WEB}:80"));
    // gRPC reads the timeout from `max_stream_duration` only: the VirtualService's 3 s there, no timeout
    // (0) on the route without one; the deprecated `max_grpc_timeout` is not sent.
    let stream = |a: &RouteAction| a.max_stream_duration.as_ref().and_then(|m| m.max_stream_duration);
    assert_eq!(routes.iter().map(|a| stream(a)).collect::<Vec<_>>(), [seconds(3), seconds(0)]);
    assert_eq!(routes.iter().map(|a| a.timeout).collect::<Vec<_>>(), [seconds(3), seconds(0)]);
    #[allow(deprecated)]
    let grpc_timeouts: Vec<_> = routes.iter().map(|a| a.max_grpc_timeout).collect();
    assert_eq!(grpc_timeouts, [None, None]);

    // Envoy keeps the timeout header cap in `max_grpc_timeout` and no stream duration.
    let out = generate_routes(&push, &sidecar("ns1", &[]), &["80".to_string()]);
    let routes = actions(&out.resources[0], &format!("{WEB}:80"));
    #[allow(deprecated)]
    let grpc_timeouts: Vec<_> = routes.iter().map(|a| a.max_grpc_timeout).collect();
    assert_eq!(grpc_timeouts, [seconds(3), seconds(0)]);
    assert!(routes.iter().all(|a| a.max_stream_duration.is_none()));
}

#[test]
fn default_routes_retry_for_grpc_as_for_envoy() {
    let world = World::new(parse(&config(), "ns1"));
    let push = world.push();
    let plain = "plain.ns1.svc.cluster.local";
    let out = generate_routes(&push, &proxyless("ns1"), &[format!("outbound|80||{plain}")]);
    let grpc = actions(&out.resources[0], &format!("{plain}:80"));
    let out = generate_routes(&push, &sidecar("ns1", &[]), &["80".to_string()]);
    let envoy = actions(&out.resources[0], &format!("{plain}:80"));
    // istiod's default route is the same for both: two retries on connect failure, refused stream,
    // unavailable and cancelled (gRPC acts on the last two), away from the previous host.
    assert_eq!(grpc.len(), 1);
    assert_eq!(grpc[0].retry_policy, Some(default_retry_policy(false)));
    assert_eq!(grpc[0].retry_policy, envoy[0].retry_policy);
    assert_eq!(grpc[0].retry_policy.as_ref().and_then(|r| r.num_retries).map(|n| n.value), Some(2));
    // No timeout either way: 0 in `max_stream_duration` for gRPC.
    let stream = grpc[0].max_stream_duration.as_ref().and_then(|m| m.max_stream_duration);
    assert_eq!(stream, seconds(0));
}

#[test]
fn grpc_clusters_limit_requests_only_as_the_destination_rule_says() {
    let world = World::new(parse(&config(), "ns1"));
    let push = world.push();
    let names = [format!("outbound|80||{WEB}"), "outbound|80||plain.ns1.svc.cluster.local".to_string()];
    let cds = generate_clusters(&push, &proxyless("ns1"), &names);
    let by_name = |n: &str| cds.resources.iter().find(|c| c.name == n).unwrap_or_else(|| panic!("no {n}"));
    // The rule's http2MaxRequests, and nothing else gRPC would not read.
    let web = by_name(&names[0]).circuit_breakers.as_ref().expect("web has the rule's limit");
    assert_eq!(web.thresholds.len(), 1);
    assert_eq!(web.thresholds[0].max_requests.map(|v| v.value), Some(100));
    assert_eq!(web.thresholds[0].max_connections, None);
    assert_eq!(web.thresholds[0].max_pending_requests, None);
    // Without a rule: no circuit breaker, so gRPC keeps its own limit (Envoy gets unlimited thresholds).
    assert_eq!(by_name(&names[1]).circuit_breakers, None);
    let envoy = generate_clusters(&push, &sidecar("ns1", &[]), &names[1..]);
    let max = envoy.resources[0].circuit_breakers.as_ref().and_then(|c| c.thresholds[0].max_requests);
    assert_eq!(max.map(|v| v.value), Some(u32::MAX));
}
