//! Istio's telemetry filters in generated listeners: `istio.stats` and `istio.metadata_exchange`
//! where istiod puts them, for proxies whose `node.extensions` list istio-proxy's filters, and none
//! for upstream Envoy; Telemetry `metrics` overrides in the stats config; findings.

use crate::support;

use envoy_types::pb::envoy::{
    config::listener::v3::{Listener, filter},
    extensions::filters::network::http_connection_manager::v3::{HttpConnectionManager, http_filter},
};
use meshpilot_networking::{
    listener::generate_listeners,
    stats::{METADATA_EXCHANGE_FILTER, PluginConfig, STATS_CONFIG_TYPE_URL, STATS_FILTER},
};
use model::push::{MeshSettings, ProxyContext, node::IstioExtensions};
use prost::Message;
use support::*;

fn istio_proxy(mut p: ProxyContext) -> ProxyContext {
    p.istio_extensions = IstioExtensions::ALL;
    p
}

fn prometheus_mesh() -> MeshSettings {
    MeshSettings { default_metrics_providers: vec!["prometheus".into()], ..MeshSettings::default() }
}

/// Every filter chain of `listeners` as `listener/chain: network filters` with a connection
/// manager's HTTP filters in brackets, e.g. `virtualInbound/0.0.0.0_9090: istio.metadata_exchange,
/// istio.stats, envoy.filters.network.tcp_proxy`.
fn chains(listeners: &[Listener]) -> Vec<String> {
    let mut out = Vec::new();
    for l in listeners {
        for c in l.filter_chains.iter().chain(&l.default_filter_chain) {
            let filters: Vec<String> = c
                .filters
                .iter()
                .map(|f| match &f.config_type {
                    Some(filter::ConfigType::TypedConfig(any))
                        if any.type_url.ends_with("HttpConnectionManager") =>
                    {
                        let hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
                        let names: Vec<&str> = hcm.http_filters.iter().map(|h| h.name.as_str()).collect();
                        format!("hcm[{}]", names.join(","))
                    }
                    _ => f.name.clone(),
                })
                .collect();
            out.push(format!("{}/{}: {}", l.name, c.name, filters.join(", ")));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The `stats.PluginConfig`s of the `istio.stats` HTTP filters of `listener`'s connection managers.
fn http_stats(listeners: &[Listener], listener: &str) -> Vec<PluginConfig> {
    let mut out = Vec::new();
    for (l, any) in typed_filters(listeners) {
        if l != listener || !any.type_url.ends_with("HttpConnectionManager") {
            continue;
        }
        let hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
        for f in hcm.http_filters.iter().filter(|f| f.name == STATS_FILTER) {
            let Some(http_filter::ConfigType::TypedConfig(c)) = &f.config_type else { panic!("{f:?}") };
            assert_eq!(c.type_url, STATS_CONFIG_TYPE_URL);
            out.push(PluginConfig::decode(c.value.as_slice()).unwrap());
        }
    }
    out
}

const HCM: &str = "envoy.filters.http.fault,envoy.filters.http.cors";

#[test]
fn istio_proxy_gets_the_filters_where_istiod_puts_them() {
    let world = World::new(parse(&format!("{WEB_AND_DB}{APP_SIDECAR}"), "ns1"));
    let push = world.push_with(prometheus_mesh());
    let built = generate_listeners(&push, &istio_proxy(sidecar("ns1", &[("app", "app")])), &[]);
    let got = chains(&built.resources);
    let mx = METADATA_EXCHANGE_FILTER;
    let hcm = format!("hcm[{mx},{HCM},{STATS_FILTER},envoy.filters.http.router]");
    for want in [
        // Outbound HTTP: peer metadata first, stats before the router; no TCP metadata exchange.
        format!("0.0.0.0_80/0.0.0.0_80: {hcm}"),
        // Outbound TCP: stats before tcp_proxy.
        format!(
            "10.1.1.2_5432/outbound|5432||db.ns1.svc.cluster.local: {STATS_FILTER}, envoy.filters.network.tcp_proxy"
        ),
        format!("virtualOutbound/PassthroughFilterChain: {STATS_FILTER}, envoy.filters.network.tcp_proxy"),
        // Inbound: the TCP metadata exchange filter leads every chain.
        format!("virtualInbound/0.0.0.0_9080: {mx}, {hcm}"),
        format!("virtualInbound/0.0.0.0_9090: {mx}, {STATS_FILTER}, envoy.filters.network.tcp_proxy"),
        format!(
            "virtualInbound/PassthroughFilterChain: {mx}, {STATS_FILTER}, envoy.filters.network.tcp_proxy"
        ),
    ] {
        assert!(got.contains(&want), "{want}\nnot in {got:#?}");
    }
    let inbound = http_stats(&built.resources, "virtualInbound");
    assert!(inbound.iter().all(|c| c.disable_host_header_fallback && c.metrics.is_empty()), "{inbound:?}");
    let outbound = http_stats(&built.resources, "0.0.0.0_80");
    assert!(outbound.iter().all(|c| !c.disable_host_header_fallback), "{outbound:?}");
    assert!(built.findings.is_empty(), "{:#?}", built.findings);

    // Upstream Envoy (no Istio extensions in node.extensions): none of them.
    let plain = generate_listeners(&push, &sidecar("ns1", &[("app", "app")]), &[]);
    let got = chains(&plain.resources);
    assert!(got.iter().all(|c| !c.contains("istio.")), "{got:#?}");

    // Without a metrics provider (istiod's built-in default): metadata exchange only.
    let built = generate_listeners(&world.push(), &istio_proxy(sidecar("ns1", &[("app", "app")])), &[]);
    let got = chains(&built.resources);
    assert!(got.iter().all(|c| !c.contains(STATS_FILTER)), "{got:#?}");
    assert!(got.iter().any(|c| c.contains(mx)), "{got:#?}");
}

#[test]
fn a_proxy_with_only_some_extensions_gets_only_those() {
    let world = World::new(parse(&format!("{WEB_AND_DB}{APP_SIDECAR}"), "ns1"));
    let push = world.push_with(prometheus_mesh());
    let mut p = sidecar("ns1", &[("app", "app")]);
    p.istio_extensions = IstioExtensions { http_stats: true, ..IstioExtensions::default() };
    let got = chains(&generate_listeners(&push, &p, &[]).resources);
    assert!(
        got.contains(&format!("0.0.0.0_80/0.0.0.0_80: hcm[{HCM},{STATS_FILTER},envoy.filters.http.router]")),
        "{got:#?}"
    );
    assert!(got.iter().all(|c| !c.contains(METADATA_EXCHANGE_FILTER)), "{got:#?}");
    assert!(
        got.contains(&"virtualInbound/0.0.0.0_9090: envoy.filters.network.tcp_proxy".to_string()),
        "no TCP stats filter without the network extension: {got:#?}"
    );
}

#[test]
fn telemetry_metrics_shape_the_stats_config_per_direction() {
    let telemetry = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  metrics:
  - providers: [{name: prometheus}]
    reportingInterval: 15s
    overrides:
    - match: {metric: REQUEST_COUNT, mode: SERVER}
      tagOverrides:
        request_host: {value: request.host}
        source_app: {operation: REMOVE}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: app-metrics, namespace: ns1}
spec:
  selector: {matchLabels: {app: app}}
  metrics:
  - overrides:
    - match: {metric: ALL_METRICS, mode: CLIENT}
      disabled: true
    - match: {customMetric: my_metric, mode: SERVER}
      disabled: true
"#;
    let world = World::new(parse(&format!("{WEB_AND_DB}{APP_SIDECAR}---\n{telemetry}"), "ns1"));
    let push = world.push();
    let app = generate_listeners(&push, &istio_proxy(sidecar("ns1", &[("app", "app")])), &[]);
    // The workload turns its client-side metrics off: no stats filter on outbound listeners, the
    // metadata exchange filter stays.
    assert!(http_stats(&app.resources, "0.0.0.0_80").is_empty());
    let got = chains(&app.resources);
    assert!(got.contains(&format!(
        "0.0.0.0_80/0.0.0.0_80: hcm[{METADATA_EXCHANGE_FILTER},{HCM},envoy.filters.http.router]"
    )));
    let inbound = http_stats(&app.resources, "virtualInbound");
    let c = &inbound[0];
    assert_eq!(c.tcp_reporting_duration.as_ref().map(|d| d.seconds), Some(15));
    let names: Vec<(&str, bool)> = c.metrics.iter().map(|m| (m.name.as_str(), m.drop)).collect();
    assert_eq!(names, [("requests_total", false), ("my_metric", true)]);
    assert_eq!(c.metrics[0].dimensions.get("request_host").map(String::as_str), Some("request.host"));
    assert_eq!(c.metrics[0].tags_to_remove, ["source_app"]);
    // Another workload only has the root's settings: client-side stats with no overrides.
    let other = generate_listeners(&push, &istio_proxy(sidecar("ns1", &[("app", "other")])), &[]);
    let client = http_stats(&other.resources, "0.0.0.0_80");
    assert_eq!(client.len(), 1);
    assert!(client[0].metrics.is_empty());
    assert!(app.findings.is_empty(), "{:#?}", app.findings);
}

#[test]
fn gateways_get_client_side_stats_without_host_header_fallback() {
    let world = World::new(parse(&format!("{WEB_AND_DB}{HTTP_GATEWAY_8080}"), "ns1"));
    let push = world.push_with(prometheus_mesh());
    let gw = istio_proxy(router("istio-system", &[("istio", "ingressgateway")]));
    let built = generate_listeners(&push, &gw, &[]);
    let got = chains(&built.resources);
    assert_eq!(
        got,
        [format!(
            "0.0.0.0_8080/0.0.0.0_8080: hcm[{METADATA_EXCHANGE_FILTER},{HCM},{STATS_FILTER},envoy.filters.http.router]"
        )]
    );
    assert!(http_stats(&built.resources, "0.0.0.0_8080")[0].disable_host_header_fallback);
}

#[test]
fn unknown_metrics_providers_are_reported_with_their_field_path() {
    let telemetry = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: typo, namespace: ns1}
spec:
  metrics:
  - providers: [{name: prometheus}, {name: promethues}]
"#;
    let world = World::new(parse(&format!("{WEB_AND_DB}{telemetry}"), "ns1"));
    let push = world.push();
    let finding = config_finding(&push, "typo");
    assert_eq!(finding.path, "spec.metrics[0].providers[1].name");
    assert!(finding.message.contains("\"promethues\" is not defined"), "{}", finding.message);
    // The known provider still applies.
    let built = generate_listeners(&push, &istio_proxy(sidecar("ns1", &[])), &[]);
    assert_eq!(http_stats(&built.resources, "0.0.0.0_80").len(), 1);
}

#[test]
fn outbound_clusters_carry_the_upstream_metadata_exchange_filter() {
    use meshpilot_networking::cluster::generate_clusters;
    let world = World::new(parse(&format!("{WEB_AND_DB}{APP_SIDECAR}"), "ns1"));
    let push = world.push();
    let with_filter = |p: &ProxyContext| -> Vec<String> {
        generate_clusters(&push, p, &[])
            .resources
            .iter()
            .filter(|c| c.filters.iter().any(|f| f.name == METADATA_EXCHANGE_FILTER))
            .map(|c| c.name.clone())
            .collect()
    };
    assert_eq!(
        with_filter(&istio_proxy(sidecar("ns1", &[("app", "app")]))),
        [
            "PassthroughCluster",
            "outbound|5432||db.ns1.svc.cluster.local",
            "outbound|80||web.ns1.svc.cluster.local"
        ]
    );
    assert!(with_filter(&sidecar("ns1", &[("app", "app")])).is_empty());
    // Only the upstream network filter's flag decides.
    let mut listeners_only = sidecar("ns1", &[("app", "app")]);
    listeners_only.istio_extensions =
        IstioExtensions { tcp_metadata_exchange: true, ..IstioExtensions::default() };
    assert!(with_filter(&listeners_only).is_empty());
}
