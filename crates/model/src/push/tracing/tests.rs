use api::telemetry::{
    ProviderRef, Tracing,
    tracing::{Literal, TracingSelector},
};
use serde_json::json;

use super::*;
use crate::ConfigMeta;

fn providers() -> Vec<ExtensionProvider> {
    super::super::extension_provider::parse_extension_providers(&json!([
        {"name": "zipkin", "zipkin": {"service": "zipkin.istio-system.svc.cluster.local", "port": 9411}},
        {"name": "otel", "opentelemetry": {"service": "otel.ns.svc.cluster.local", "port": 4317}},
        {"name": "file", "envoyFileAccessLog": {"path": "/dev/stdout"}},
    ]))
    .unwrap()
}

fn entry(providers: &[&str], mode: Option<WorkloadMode>) -> Tracing {
    Tracing {
        r#match: mode.map(|m| TracingSelector { mode: m as i32 }),
        providers: providers.iter().map(|p| ProviderRef { name: p.to_string() }).collect(),
        ..Default::default()
    }
}

fn telemetry_config(name: &str, tracing: Vec<Tracing>) -> Arc<Config> {
    Arc::new(Config {
        meta: ConfigMeta { namespace: "istio-system".into(), name: name.into(), ..Default::default() },
        spec: Spec::Telemetry(Box::new(Telemetry { tracing, ..Default::default() })),
        status: None,
    })
}

fn provider_name(spec: &TracingSpec) -> Option<&str> {
    spec.provider.as_ref().map(|p| p.name.as_str())
}

#[test]
fn without_telemetry_or_default_provider_the_mesh_config_decides() {
    assert_eq!(tracing(&[], &[], &providers()), None);
    let no_tracing = telemetry_config("mesh", vec![]);
    assert_eq!(tracing(&[no_tracing], &[], &providers()), None, "a Telemetry without tracing counts as none");
}

#[test]
fn the_first_default_provider_applies_to_both_directions() {
    let config = tracing(&[], &["ZIPKIN".to_string(), "otel".to_string()], &providers()).unwrap();
    assert_eq!(provider_name(&config.client), Some("zipkin"), "looked up case-insensitively");
    assert_eq!(provider_name(&config.server), Some("zipkin"));
    assert!(!config.client.disabled);
    assert!(config.client.use_request_id_for_trace_sampling && config.client.enable_istio_tags);
    assert_eq!(config.client.random_sampling_percentage, None);
}

#[test]
fn later_levels_override_per_field_and_direction() {
    let mut root = entry(&["zipkin"], None);
    root.random_sampling_percentage = Some(10.0);
    root.custom_tags.insert(
        "team".into(),
        CustomTag { literal: Some(Literal { value: "a".into() }), ..Default::default() },
    );
    let mut workload = entry(&["otel"], Some(WorkloadMode::Server));
    workload.use_request_id_for_trace_sampling = Some(false);
    workload.custom_tags.insert(
        "owner".into(),
        CustomTag { literal: Some(Literal { value: "b".into() }), ..Default::default() },
    );
    let config = tracing(
        &[telemetry_config("root", vec![root]), telemetry_config("workload", vec![workload])],
        &[],
        &providers(),
    )
    .unwrap();
    assert_eq!(provider_name(&config.client), Some("zipkin"));
    assert_eq!(provider_name(&config.server), Some("otel"));
    assert_eq!(config.server.random_sampling_percentage, Some(10.0), "inherited from the root");
    assert!(config.client.use_request_id_for_trace_sampling);
    assert!(!config.server.use_request_id_for_trace_sampling);
    let tags = |s: &TracingSpec| s.custom_tags.keys().cloned().collect::<Vec<_>>();
    assert_eq!(tags(&config.client), ["team"]);
    assert_eq!(tags(&config.server), ["owner"], "custom tags replace the parent's map (shallow merge)");
}

#[test]
fn disable_span_reporting_and_missing_providers_disable_a_direction() {
    let mut off = entry(&[], Some(WorkloadMode::Client));
    off.disable_span_reporting = Some(true);
    let config =
        tracing(&[telemetry_config("t", vec![entry(&["zipkin"], None), off])], &[], &providers()).unwrap();
    assert!(config.client.disabled);
    assert!(!config.server.disabled);
    // An entry without providers and no default: nothing to trace with.
    let config = tracing(&[telemetry_config("t", vec![entry(&[], None)])], &[], &providers()).unwrap();
    assert!(config.client.disabled && config.server.disabled);
    // An unknown provider replaces the default one and leaves the direction without a tracer.
    let config =
        tracing(&[telemetry_config("t", vec![entry(&["missing"], None)])], &["zipkin".into()], &providers())
            .unwrap();
    assert!(config.client.disabled && config.client.provider.is_none());
}

#[test]
fn unknown_non_tracing_and_extra_providers_are_reported_with_their_path() {
    let t = telemetry_config(
        "t",
        vec![entry(&["zipkin", "otel"], None), entry(&["missing"], None), entry(&["file"], None)],
    );
    let findings = tracing_findings(&t, &providers());
    let got: Vec<(&str, bool)> = findings
        .iter()
        .map(|f| (f.path.as_str(), f.message.contains("not defined") || f.message.contains("not a tracing")))
        .collect();
    assert_eq!(
        got,
        [
            ("spec.tracing[0].providers[1].name", false),
            ("spec.tracing[1].providers[0].name", true),
            ("spec.tracing[2].providers[0].name", true),
        ]
    );
    assert!(findings[0].message.contains("only the first"), "{}", findings[0].message);
}

#[test]
fn proxy_config_tracing_and_sampling_fallback() {
    let parsed = parse_proxy_tracing(
        &json!({"sampling": 50, "maxPathTagLength": 99, "enableIstioTags": false,
                "customTags": {"env": {"environment": {"name": "POD", "defaultValue": "x"}}},
                "zipkin": {"address": "zipkin:9411"}}),
        "defaultConfig.tracing",
    )
    .unwrap();
    assert_eq!(parsed.sampling, 50.0);
    assert_eq!(parsed.max_path_tag_length, 99);
    assert_eq!(parsed.enable_istio_tags, Some(false));
    assert_eq!(parsed.custom_tags["env"].environment.as_ref().unwrap().name, "POD");
    assert_eq!(proxy_sampling(Some(&parsed), DEFAULT_TRACE_SAMPLING), 50.0);
    assert_eq!(proxy_sampling(None, 3.0), 3.0, "PILOT_TRACE_SAMPLING");
    let over = ProxyTracing { sampling: 150.0, ..Default::default() };
    assert_eq!(proxy_sampling(Some(&over), 3.0), 1.0, "over 100 becomes 1.0, as istiod");
    let err = parse_proxy_tracing(&json!({"sampling": "lots"}), "defaultConfig.tracing").unwrap_err();
    assert!(err.starts_with("defaultConfig.tracing.sampling: "), "{err}");
}
