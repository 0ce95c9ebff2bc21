//! Sidecar `outboundTrafficPolicy.egressProxy` (ALLOW_ANY): unknown traffic goes to the egress
//! proxy's cluster instead of `PassthroughCluster`, on `virtualOutbound` and in the `allow_any`
//! virtual host (Istio's `buildOutboundCatchAllNetworkFiltersOnly` and `BuildSidecarOutboundVirtualHosts`).

use crate::support;

use envoy_types::pb::envoy::{
    config::listener::v3::filter, extensions::filters::network::tcp_proxy::v3::TcpProxy,
};
use meshpilot_networking::{listener::generate_listeners, rds::generate_routes};
use prost::Message;
use support::*;

const EGRESS: &str = "outbound|3128|squid|egress.ns1.svc.cluster.local";

const WORLD: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns1}
spec:
  hosts: [web.ns1.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.5}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: egress, namespace: ns1}
spec:
  hosts: [egress.ns1.svc.cluster.local]
  ports: [{number: 3128, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.9}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: ns1}
spec:
  outboundTrafficPolicy:
    mode: ALLOW_ANY
    egressProxy: {host: egress.ns1.svc.cluster.local, subset: squid, port: {number: 3128}}
"#;

#[test]
fn unknown_traffic_goes_to_the_egress_proxy() {
    let w = World::new(parse(WORLD, "ns1"));
    let push = w.push();
    let proxy = sidecar("ns1", &[]);

    let lds = generate_listeners(&push, &proxy, &["virtualOutbound".to_string()]);
    let vo = &lds.resources[0];
    let f = &vo.filter_chains[0].filters[0];
    let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else { panic!("{f:?}") };
    let tcp = TcpProxy::decode(any.value.as_slice()).unwrap();
    assert_eq!(tcp.stat_prefix, EGRESS);
    assert!(lds.findings.iter().all(|f| !f.path.contains("egressProxy")), "{:?}", lds.findings);

    let rc = &generate_routes(&push, &proxy, &["80".to_string()]).resources[0];
    assert_eq!(route_clusters(vhost(rc, "allow_any")), [EGRESS]);
}
