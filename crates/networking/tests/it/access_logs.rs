//! Access loggers in generated listeners: mesh `accessLogFile`, Telemetry `accessLogging` per
//! direction and workload, disabled providers, CEL filters, unknown providers reported.

use crate::support;

use envoy_types::pb::envoy::{
    config::{
        accesslog::v3::{AccessLog, access_log::ConfigType, access_log_filter::FilterSpecifier},
        listener::v3::Listener,
    },
    extensions::{
        access_loggers::file::v3::FileAccessLog,
        filters::network::{http_connection_manager::v3::HttpConnectionManager, tcp_proxy::v3::TcpProxy},
    },
};
use meshpilot_networking::listener::generate_listeners;
use model::push::{MeshSettings, telemetry::AccessLogEncoding};
use prost::Message;
use support::*;

/// [`WEB_AND_DB`] and [`APP_SIDECAR`].
fn services() -> String {
    format!("{WEB_AND_DB}{APP_SIDECAR}")
}

/// (where, logger path or name, CEL expression) of every access logger in `listeners`.
fn loggers(listeners: &[Listener]) -> Vec<(String, String, Option<String>)> {
    let mut out = Vec::new();
    for l in listeners {
        for log in &l.access_log {
            out.push((format!("{}:listener", l.name), describe(log).0, describe(log).1));
        }
    }
    for (listener, any) in typed_filters(listeners) {
        let logs = if any.type_url.ends_with("HttpConnectionManager") {
            ("hcm", HttpConnectionManager::decode(any.value.as_slice()).unwrap().access_log)
        } else if any.type_url.ends_with("TcpProxy") {
            ("tcp", TcpProxy::decode(any.value.as_slice()).unwrap().access_log)
        } else {
            continue;
        };
        for log in &logs.1 {
            let (what, cel) = describe(log);
            out.push((format!("{listener}:{}", logs.0), what, cel));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The file path (or logger name) and the CEL expression of one logger.
fn describe(log: &AccessLog) -> (String, Option<String>) {
    let what = match &log.config_type {
        Some(ConfigType::TypedConfig(any)) if any.type_url.ends_with("FileAccessLog") => {
            FileAccessLog::decode(any.value.as_slice()).unwrap().path
        }
        _ => log.name.clone(),
    };
    let mut cel = None;
    let mut filters = log.filter.iter().collect::<Vec<_>>();
    while let Some(f) = filters.pop() {
        match &f.filter_specifier {
            Some(FilterSpecifier::AndFilter(and)) => filters.extend(&and.filters),
            Some(FilterSpecifier::ExtensionFilter(ext)) => {
                let Some(
                    envoy_types::pb::envoy::config::accesslog::v3::extension_filter::ConfigType::TypedConfig(
                        any,
                    ),
                ) = &ext.config_type
                else {
                    panic!("{ext:?}")
                };
                let e = envoy_types::pb::envoy::extensions::access_loggers::filters::cel::v3::ExpressionFilter::decode(
                    any.value.as_slice(),
                )
                .unwrap();
                cel = Some(e.expression);
            }
            _ => {}
        }
    }
    (what, cel)
}

fn app() -> model::push::ProxyContext {
    sidecar("ns1", &[("app", "app")])
}

fn paths(listeners: &[Listener]) -> std::collections::BTreeSet<String> {
    loggers(listeners).into_iter().map(|(_, p, _)| p).collect()
}

#[test]
fn mesh_access_log_file_goes_on_every_connection_manager_tcp_proxy_and_virtual_listener() {
    let world = World::new(parse(&services(), "ns1"));
    let mesh = MeshSettings { access_log_file: "/var/log/mesh.log".into(), ..MeshSettings::default() };
    let built = generate_listeners(&world.push_with(mesh), &app(), &[]);
    let places: Vec<String> =
        loggers(&built.resources).into_iter().map(|(w, p, _)| format!("{w} {p}")).collect();
    for want in [
        "0.0.0.0_80:hcm /var/log/mesh.log",
        "10.1.1.2_5432:tcp /var/log/mesh.log",
        "virtualOutbound:listener /var/log/mesh.log",
        "virtualOutbound:tcp /var/log/mesh.log",
        "virtualInbound:listener /var/log/mesh.log",
        "virtualInbound:hcm /var/log/mesh.log",
        "virtualInbound:tcp /var/log/mesh.log",
    ] {
        assert!(places.iter().any(|p| p == want), "{want} missing in {places:#?}");
    }
    // Without the mesh setting, nothing logs.
    let built = generate_listeners(&world.push(), &app(), &[]);
    assert!(loggers(&built.resources).is_empty());
}

const JSON_PROVIDER: &str = r#"[
  {"name": "json-file", "envoyFileAccessLog": {"path": "/tmp/json.log", "logFormat": {"labels": {"code": "%RESPONSE_CODE%"}}}}
]"#;

fn mesh_with_providers() -> MeshSettings {
    let providers = model::push::extension_provider::parse_extension_providers(
        &serde_json::from_str(JSON_PROVIDER).unwrap(),
    )
    .unwrap();
    MeshSettings {
        access_log_file: "/var/log/mesh.log".into(),
        access_log_encoding: AccessLogEncoding::Json,
        extension_providers: providers,
        ..MeshSettings::default()
    }
}

#[test]
fn a_workload_telemetry_overrides_the_mesh_for_its_direction_only() {
    let telemetry = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: app-logs, namespace: ns1}
spec:
  selector: {matchLabels: {app: app}}
  accessLogging:
  - providers: [{name: json-file}]
    match: {mode: SERVER}
    filter: {expression: "response.code >= 500"}
"#;
    let world = World::new(parse(&format!("{}---\n{telemetry}", services()), "ns1"));
    let push = world.push_with(mesh_with_providers());
    let built = generate_listeners(&push, &app(), &[]);
    let logs = loggers(&built.resources);
    let inbound: Vec<_> = logs.iter().filter(|(w, _, _)| w.starts_with("virtualInbound")).collect();
    assert!(!inbound.is_empty());
    for (w, p, cel) in &inbound {
        assert_eq!((p.as_str(), cel.as_deref()), ("/tmp/json.log", Some("response.code >= 500")), "{w}");
    }
    // The Telemetry names no provider for the client side: nothing is left there, so the mesh's
    // accessLogFile applies (istiod's fallback when no logging config results).
    let outbound: Vec<_> = logs.iter().filter(|(w, _, _)| !w.starts_with("virtualInbound")).collect();
    assert!(!outbound.is_empty());
    assert!(outbound.iter().all(|(_, p, _)| p == "/var/log/mesh.log"), "{outbound:#?}");
    // Another workload of the namespace keeps the mesh's log.
    let other = generate_listeners(&push, &sidecar("ns1", &[("app", "other")]), &[]);
    assert_eq!(paths(&other.resources), ["/var/log/mesh.log".to_string()].into_iter().collect());
    assert!(built.findings.is_empty(), "{:#?}", built.findings);
}

#[test]
fn disabling_the_mesh_provider_turns_logs_off_and_unknown_providers_are_reported() {
    let telemetry = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  accessLogging:
  - providers: [{name: envoy}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: quiet, namespace: ns1}
spec:
  accessLogging:
  - disabled: true
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: typo, namespace: ns2}
spec:
  accessLogging:
  - providers: [{name: json-fiel}]
"#;
    let world = World::new(parse(&format!("{}---\n{telemetry}", services()), "ns1"));
    let push = world.push_with(mesh_with_providers());
    // ns1 inherits `envoy` from the root and turns it off.
    assert!(loggers(&generate_listeners(&push, &app(), &[]).resources).is_empty());
    // ns3 has no Telemetry of its own: the root's `envoy` (stdout, the mesh's JSON encoding).
    assert_eq!(
        paths(&generate_listeners(&push, &sidecar("ns3", &[]), &[]).resources),
        ["/dev/stdout".to_string()].into_iter().collect()
    );
    // ns2 names an unknown provider: nothing is left, so the mesh's accessLogFile applies (istiod's
    // fallback), and the Telemetry is reported with the field path.
    assert_eq!(
        paths(&generate_listeners(&push, &sidecar("ns2", &[]), &[]).resources),
        ["/var/log/mesh.log".to_string()].into_iter().collect()
    );
    let finding = config_finding(&push, "typo");
    assert_eq!(finding.path, "spec.accessLogging[0].providers[0].name");
    assert!(finding.message.contains("\"json-fiel\" is not defined"), "{}", finding.message);
}

#[test]
fn gateways_log_as_clients() {
    let telemetry = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  accessLogging:
  - providers: [{name: json-file}]
    match: {mode: CLIENT}
"#;
    let world = World::new(parse(&format!("{}---\n{HTTP_GATEWAY_8080}{telemetry}", services()), "ns1"));
    let push = world.push_with(mesh_with_providers());
    let built = generate_listeners(&push, &router("istio-system", &[("istio", "ingressgateway")]), &[]);
    let logs: Vec<String> =
        loggers(&built.resources).into_iter().map(|(w, p, _)| format!("{w} {p}")).collect();
    assert_eq!(logs, ["0.0.0.0_8080:hcm /tmp/json.log", "0.0.0.0_8080:listener /tmp/json.log"]);
}
