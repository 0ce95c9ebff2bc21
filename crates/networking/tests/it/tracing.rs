//! Tracing in generated listeners: the mesh fallback (`enableTracing`, `defaultConfig.tracing`),
//! Telemetry tracing per direction with a Zipkin and an OpenTelemetry provider, gateways, unknown
//! providers and missing collector services reported.

use crate::support;

use envoy_types::pb::envoy::{
    config::{
        listener::v3::Listener,
        trace::v3::{OpenTelemetryConfig, ZipkinConfig, tracing::http::ConfigType},
    },
    extensions::{
        filters::network::http_connection_manager::v3::{
            HttpConnectionManager, http_connection_manager::Tracing,
        },
        request_id::uuid::v3::UuidRequestIdConfig,
    },
    r#type::tracing::v3::custom_tag,
};
use meshpilot_networking::listener::generate_listeners;
use model::push::{
    MeshSettings, ProxyContext, extension_provider::parse_extension_providers, tracing::ProxyTracing,
};
use prost::Message;
use support::*;

/// Besides `web.ns1` (HTTP port 80, [`http_service_entry`]): the collector and a Sidecar with an HTTP
/// ingress port for `app: app`.
const SERVICES: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: zipkin, namespace: istio-system}
spec:
  hosts: [zipkin.istio-system.svc.cluster.local]
  addresses: [10.1.1.9]
  location: MESH_INTERNAL
  ports: [{number: 9411, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.9}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: app, namespace: ns1}
spec:
  workloadSelector: {labels: {app: app}}
  ingress:
  - port: {number: 9080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
"#;

const PROVIDERS: &str = r#"[
  {"name": "zipkin", "zipkin": {"service": "zipkin.istio-system.svc.cluster.local", "port": 9411, "maxTagLength": 99}},
  {"name": "otel", "opentelemetry": {"service": "zipkin.istio-system.svc.cluster.local", "port": 9411,
     "http": {"path": "/v1/traces", "timeout": "3s", "headers": [{"name": "x-a", "value": "1"}, {"name": "x-b", "envName": "TOKEN"}]},
     "dynatraceSampler": {"tenant": "t", "clusterId": 7}}},
  {"name": "nowhere", "zipkin": {"service": "missing.ns1.svc.cluster.local", "port": 9411}}
]"#;

/// The world of [`SERVICES`], `web.ns1` and `extra` (YAML documents).
fn world(extra: &str) -> World {
    World::new(parse(
        &format!("{}{SERVICES}---\n{extra}", http_service_entry("web", "ns1", "10.0.0.1")),
        "ns1",
    ))
}

fn mesh() -> MeshSettings {
    MeshSettings {
        extension_providers: parse_extension_providers(&serde_json::from_str(PROVIDERS).unwrap()).unwrap(),
        ..MeshSettings::default()
    }
}

/// (listener, tracing, request-id sampling) of every connection manager in `listeners`.
fn managers(listeners: &[Listener]) -> Vec<(String, Option<Tracing>, bool)> {
    typed_filters(listeners)
        .into_iter()
        .filter(|(_, any)| any.type_url.ends_with("HttpConnectionManager"))
        .map(|(listener, any)| {
            let hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
            assert_eq!(hcm.generate_request_id.as_ref().map(|b| b.value), Some(true), "{listener}");
            let ext = hcm.request_id_extension.and_then(|e| e.typed_config).expect("request id extension");
            let uuid = UuidRequestIdConfig::decode(ext.value.as_slice()).unwrap();
            let by_request_id = uuid.use_request_id_for_trace_sampling.is_some_and(|b| b.value);
            (listener.to_string(), hcm.tracing, by_request_id)
        })
        .collect()
}

fn tracing_of<'a>(
    all: &'a [(String, Option<Tracing>, bool)],
    listener: &str,
) -> &'a (String, Option<Tracing>, bool) {
    all.iter().find(|(l, _, _)| l == listener).unwrap_or_else(|| panic!("no {listener} in {all:#?}"))
}

fn literal_tags(t: &Tracing) -> Vec<(String, String)> {
    t.custom_tags
        .iter()
        .filter_map(|c| match &c.r#type {
            Some(custom_tag::Type::Literal(l)) => Some((c.tag.clone(), l.value.clone())),
            _ => None,
        })
        .collect()
}

fn random(t: &Tracing) -> f64 {
    t.random_sampling.as_ref().unwrap().value
}

fn app() -> ProxyContext {
    let mut p = sidecar("ns1", &[("app", "app"), ("service.istio.io/canonical-name", "app")]);
    p.mesh_id = "mesh1".into();
    p
}

#[test]
fn the_mesh_default_traces_without_a_provider_at_pilot_trace_sampling() {
    let world = world("");
    let all = managers(&generate_listeners(&world.push(), &app(), &[]).resources);
    assert!(all.len() >= 2, "{all:#?}");
    for (listener, tracing, by_request_id) in &all {
        let t = tracing.as_ref().unwrap_or_else(|| panic!("{listener}: enableTracing defaults to true"));
        assert!(t.provider.is_none(), "{listener}: the bootstrap's tracer");
        assert_eq!(random(t), 1.0, "{listener}: PILOT_TRACE_SAMPLING's default");
        assert_eq!(t.client_sampling.as_ref().unwrap().value, 100.0);
        assert!(by_request_id);
        let tags = literal_tags(t);
        for want in [
            ("istio.canonical_revision", "latest"),
            ("istio.canonical_service", "app"),
            ("istio.cluster_id", "unknown"),
            ("istio.mesh_id", "mesh1"),
            ("istio.namespace", "ns1"),
        ] {
            assert!(
                tags.contains(&(want.0.to_string(), want.1.to_string())),
                "{listener}: {want:?} in {tags:?}"
            );
        }
        let names: Vec<&str> = t.custom_tags.iter().map(|c| c.tag.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "sorted by tag name");
        assert_eq!(names.len(), 9, "five service tags and four dry-run policy tags: {names:?}");
    }
    // The mesh's defaultConfig.tracing: sampling, custom tags, no Istio tags.
    let mut proxy_tracing =
        ProxyTracing { sampling: 25.0, enable_istio_tags: Some(false), ..Default::default() };
    proxy_tracing.custom_tags.insert(
        "team".into(),
        serde_json::from_value(serde_json::json!({"literal": {"value": "blue"}})).unwrap(),
    );
    let push = world
        .push_with(MeshSettings { default_proxy_tracing: Some(proxy_tracing), ..MeshSettings::default() });
    let all = managers(&generate_listeners(&push, &app(), &[]).resources);
    let t = tracing_of(&all, "0.0.0.0_80").1.clone().unwrap();
    assert_eq!(random(&t), 25.0);
    assert_eq!(literal_tags(&t), [("team".to_string(), "blue".to_string())]);
    // enableTracing: false: no tracing, the request id extension stays.
    let push = world.push_with(MeshSettings { enable_tracing: false, ..MeshSettings::default() });
    let all = managers(&generate_listeners(&push, &app(), &[]).resources);
    assert!(all.iter().all(|(_, t, by_id)| t.is_none() && *by_id), "{all:#?}");
}

#[test]
fn telemetry_tracing_per_direction_with_zipkin() {
    let telemetry = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  tracing:
  - providers: [{name: zipkin}]
    randomSamplingPercentage: 100
    customTags: {team: {literal: {value: blue}}, who: {header: {name: x-user, defaultValue: anon}}}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: app, namespace: ns1}
spec:
  selector: {matchLabels: {app: app}}
  tracing:
  - match: {mode: SERVER}
    disableSpanReporting: true
  - match: {mode: CLIENT}
    useRequestIdForTraceSampling: false
    enableIstioTags: false
"#;
    let world = world(telemetry);
    let built = generate_listeners(&world.push_with(mesh()), &app(), &[]);
    assert!(built.findings.is_empty(), "{:#?}", built.findings);
    let all = managers(&built.resources);
    let (_, outbound, by_request_id) = tracing_of(&all, "0.0.0.0_80");
    let t = outbound.as_ref().expect("client side traced");
    assert!(!by_request_id, "useRequestIdForTraceSampling: false");
    assert_eq!(random(t), 100.0);
    assert_eq!(t.max_path_tag_length.as_ref().map(|v| v.value), Some(99));
    assert!(t.spawn_upstream_span.is_none(), "sidecars share spans with the app");
    let names: Vec<&str> = t.custom_tags.iter().map(|c| c.tag.as_str()).collect();
    assert_eq!(names, ["team", "who"], "no Istio tags");
    let provider = t.provider.as_ref().unwrap();
    assert_eq!(provider.name, "envoy.tracers.zipkin");
    let Some(ConfigType::TypedConfig(any)) = &provider.config_type else { panic!("{provider:?}") };
    let zipkin = ZipkinConfig::decode(any.value.as_slice()).unwrap();
    let service = zipkin.collector_service.unwrap();
    let uri = service.http_uri.unwrap();
    assert_eq!(uri.uri, "http://zipkin.istio-system.svc.cluster.local/api/v2/spans");
    assert_eq!(
        uri.http_upstream_type,
        Some(envoy_types::pb::envoy::config::core::v3::http_uri::HttpUpstreamType::Cluster(
            "outbound|9411||zipkin.istio-system.svc.cluster.local".into()
        ))
    );
    assert_eq!(uri.timeout.unwrap().seconds, 5, "istiod's default timeout");
    assert!(zipkin.trace_id_128bit);
    assert_eq!(zipkin.shared_span_context.map(|b| b.value), Some(false));
    // Inbound: span reporting disabled for the workload's server side.
    let (_, inbound, by_request_id) = tracing_of(&all, "virtualInbound");
    assert!(inbound.is_none() && *by_request_id, "{inbound:?}");
    // Another workload of the namespace: the root's settings both ways, with Istio's tags.
    let other = managers(&generate_listeners(&world.push_with(mesh()), &sidecar("ns1", &[]), &[]).resources);
    let t = tracing_of(&other, "0.0.0.0_80").1.clone().unwrap();
    assert_eq!(t.custom_tags.len(), 11, "nine Istio tags and two custom tags");
}

#[test]
fn gateways_spawn_upstream_spans_and_otel_samplers_sample_everything() {
    let config = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  tracing:
  - providers: [{name: otel}]
    randomSamplingPercentage: 5
"#;
    let world = world(&format!("{HTTP_GATEWAY_8080}{config}"));
    let built = generate_listeners(
        &world.push_with(mesh()),
        &router("istio-system", &[("istio", "ingressgateway")]),
        &[],
    );
    let all = managers(&built.resources);
    let t = tracing_of(&all, "0.0.0.0_8080").1.clone().unwrap();
    assert_eq!(t.spawn_upstream_span.map(|b| b.value), Some(true));
    assert_eq!(random(&t), 100.0, "a custom sampler decides, Envoy samples all");
    let provider = t.provider.unwrap();
    assert_eq!(provider.name, "envoy.tracers.opentelemetry");
    let Some(ConfigType::TypedConfig(any)) = &provider.config_type else { panic!() };
    let otel = OpenTelemetryConfig::decode(any.value.as_slice()).unwrap();
    let http = otel.http_service.unwrap();
    assert_eq!(http.http_uri.unwrap().uri, "zipkin.istio-system.svc.cluster.local/v1/traces");
    let headers: Vec<&str> =
        http.request_headers_to_add.iter().map(|h| h.header.as_ref().unwrap().key.as_str()).collect();
    assert_eq!(headers, ["x-a"], "the envName header is left out");
    assert_eq!(otel.sampler.unwrap().name, "envoy.tracers.opentelemetry.samplers.dynatrace");
    assert!(
        built.findings.iter().any(|f| f.message.contains("TOKEN") && f.resource == "tracing provider otel"),
        "{:#?}",
        built.findings
    );
}

#[test]
fn unknown_providers_and_missing_collectors_are_reported() {
    let telemetry = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: typo, namespace: ns1}
spec:
  tracing:
  - providers: [{name: zipkn}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: lost, namespace: ns2}
spec:
  tracing:
  - providers: [{name: nowhere}]
"#;
    let world = world(telemetry);
    let push = world.push_with(mesh());
    let all = managers(&generate_listeners(&push, &app(), &[]).resources);
    assert!(all.iter().all(|(_, t, _)| t.is_none()), "an unknown provider disables tracing: {all:#?}");
    let finding = config_finding(&push, "typo");
    assert_eq!(finding.path, "spec.tracing[0].providers[0].name");
    assert!(finding.message.contains("\"zipkn\" is not defined"), "{}", finding.message);
    // A provider whose collector service is not in the registry: no tracing, a generation finding;
    // other namespaces are unaffected.
    let built = generate_listeners(&push, &sidecar("ns2", &[]), &[]);
    assert!(managers(&built.resources).iter().all(|(_, t, _)| t.is_none()));
    assert!(
        built
            .findings
            .iter()
            .any(|f| f.message.contains("could not find service missing.ns1.svc.cluster.local")),
        "{:#?}",
        built.findings
    );
    let fine = managers(&generate_listeners(&push, &sidecar("ns3", &[]), &[]).resources);
    assert!(fine.iter().all(|(_, t, _)| t.is_some()), "{fine:#?}");
}
