//! Access logger building on plain values: formats, the built-in provider's mesh fallback, CEL and
//! listener filters, gRPC providers' clusters.

use envoy_types::pb::envoy::config::core::v3::substitution_format_string::Format;
use model::push::extension_provider::parse_extension_providers;
use prost::Message;

use super::*;

fn file_config(log: &AccessLog) -> FileAccessLog {
    let Some(access_log::ConfigType::TypedConfig(any)) = &log.config_type else { panic!("untyped {log:?}") };
    assert_eq!(any.type_url, "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog");
    FileAccessLog::decode(any.value.as_slice()).unwrap()
}

fn format_of(log: &AccessLog) -> SubstitutionFormatString {
    match file_config(log).access_log_format {
        Some(file_access_log::AccessLogFormat::LogFormat(f)) => f,
        other => panic!("no log format: {other:?}"),
    }
}

fn text_of(log: &AccessLog) -> String {
    match format_of(log).format {
        Some(Format::TextFormatSource(DataSource {
            specifier: Some(data_source::Specifier::InlineString(s)),
            ..
        })) => s,
        other => panic!("not a text format: {other:?}"),
    }
}

fn labels_of(log: &AccessLog) -> BTreeMap<String, String> {
    match format_of(log).format {
        Some(Format::JsonFormat(s)) => s
            .fields
            .into_iter()
            .map(|(k, v)| match v.kind {
                Some(value::Kind::StringValue(s)) => (k, s),
                other => panic!("{k}: {other:?}"),
            })
            .collect(),
        other => panic!("not a JSON format: {other:?}"),
    }
}

#[test]
fn the_default_text_format_is_istios() {
    let mesh = MeshSettings { access_log_file: "/dev/stdout".into(), ..MeshSettings::default() };
    let log = mesh_file_log(&mesh.access_log_file, &mesh);
    assert_eq!(log.name, FILE_ACCESS_LOG);
    assert_eq!(file_config(&log).path, "/dev/stdout");
    let text = text_of(&log);
    assert_eq!(text, ISTIO_TEXT_FORMAT);
    assert!(text.starts_with(
        "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" %RESPONSE_CODE% "
    ));
    assert!(text.ends_with("%UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n"));
    assert!(format_of(&log).formatters.is_empty());
}

#[test]
fn a_mesh_text_format_gets_a_newline_and_the_formatter_it_needs() {
    let mesh = MeshSettings {
        access_log_file: "/tmp/x.log".into(),
        access_log_format: "%REQ_WITHOUT_QUERY(:PATH)% %RESPONSE_CODE%".into(),
        ..MeshSettings::default()
    };
    let log = mesh_file_log(&mesh.access_log_file, &mesh);
    assert_eq!(text_of(&log), "%REQ_WITHOUT_QUERY(:PATH)% %RESPONSE_CODE%\n");
    let formatters = format_of(&log).formatters;
    assert_eq!(formatters.len(), 1);
    assert_eq!(formatters[0].name, "envoy.formatter.req_without_query");
}

#[test]
#[allow(deprecated)]
fn mesh_json_uses_its_labels_or_istios() {
    let mut mesh = MeshSettings {
        access_log_file: "/tmp/x.log".into(),
        access_log_encoding: AccessLogEncoding::Json,
        ..MeshSettings::default()
    };
    let defaults = labels_of(&mesh_file_log("/tmp/x.log", &mesh));
    assert_eq!(defaults.len(), ISTIO_JSON_LABELS.len());
    assert_eq!(defaults["upstream_cluster"], "%UPSTREAM_CLUSTER_RAW%");
    assert_eq!(defaults["path"], "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%");
    mesh.access_log_format = r#"{"code": "%RESPONSE_CODE%", "who": "%REQ(USER-AGENT)%"}"#.into();
    let own = labels_of(&mesh_file_log("/tmp/x.log", &mesh));
    assert_eq!(
        own.into_iter().collect::<Vec<_>>(),
        [
            ("code".to_string(), "%RESPONSE_CODE%".to_string()),
            ("who".to_string(), "%REQ(USER-AGENT)%".to_string())
        ]
    );
    assert_eq!(
        format_of(&mesh_file_log("/tmp/x.log", &mesh)).json_format_options,
        Some(JsonFormatOptions { sort_properties: false })
    );
}

#[test]
fn labels_encode_to_the_same_bytes_every_time() {
    let labels = default_labels();
    let first = json_format(&labels).encode_to_vec();
    for _ in 0..20 {
        assert_eq!(json_format(&labels).encode_to_vec(), first);
    }
}

fn provider(json: serde_json::Value) -> ExtensionProvider {
    parse_extension_providers(&serde_json::json!([json])).unwrap().remove(0)
}

#[test]
fn file_providers_build_text_and_json_logs() {
    let mesh = MeshSettings::default();
    let text = provider(
        serde_json::json!({"name": "t", "envoyFileAccessLog": {"path": "/tmp/t.log", "logFormat": {"text": "%RESPONSE_CODE%"}}}),
    );
    let log = provider_log(&[], &mesh, &text).unwrap();
    assert_eq!(file_config(&log).path, "/tmp/t.log");
    assert_eq!(text_of(&log), "%RESPONSE_CODE%\n");
    let json = provider(
        serde_json::json!({"name": "j", "envoyFileAccessLog": {"logFormat": {"labels": {"code": "%RESPONSE_CODE%"}}, "omitEmptyValues": true}}),
    );
    let log = provider_log(&[], &mesh, &json).unwrap();
    assert_eq!(file_config(&log).path, "/dev/stdout", "the default path");
    assert_eq!(labels_of(&log)["code"], "%RESPONSE_CODE%");
    assert!(format_of(&log).omit_empty_values);
    let plain = provider(serde_json::json!({"name": "p", "envoyFileAccessLog": {}}));
    assert_eq!(text_of(&provider_log(&[], &mesh, &plain).unwrap()), ISTIO_TEXT_FORMAT);
}

#[test]
fn the_builtin_provider_follows_the_mesh_format() {
    let mesh = MeshSettings {
        access_log_encoding: AccessLogEncoding::Json,
        access_log_format: r#"{"c": "%RESPONSE_CODE%"}"#.into(),
        ..MeshSettings::default()
    };
    let builtin = extension_provider::find_provider(&[], "envoy").unwrap();
    let log = provider_log(&[], &mesh, &builtin).unwrap();
    assert_eq!(file_config(&log).path, "/dev/stdout");
    assert_eq!(labels_of(&log)["c"], "%RESPONSE_CODE%");
}

#[test]
fn grpc_providers_need_a_registered_service() {
    let mesh = MeshSettings::default();
    let otel = provider(
        serde_json::json!({"name": "otel", "envoyOtelAls": {"service": "otel.observability.svc.cluster.local", "port": 4317}}),
    );
    let err = provider_log(&[], &mesh, &otel).unwrap_err();
    assert!(err.contains("could not find service otel.observability.svc.cluster.local"), "{err}");
}

#[test]
fn cel_and_listener_filters_combine() {
    let log = typed_log(FILE_ACCESS_LOG, any(&FileAccessLog::default()));
    let config = LoggingConfig {
        provider: extension_provider::find_provider(&[], "envoy").unwrap(),
        disabled: false,
        filter: Some("response.code >= 500".into()),
    };
    let cel = cel_filter(&config).unwrap();
    let Some(FilterSpecifier::ExtensionFilter(ext)) = &cel.filter_specifier else { panic!("{cel:?}") };
    assert_eq!(ext.name, CEL_FILTER);
    let Some(extension_filter::ConfigType::TypedConfig(any)) = &ext.config_type else { panic!() };
    assert_eq!(
        any.type_url,
        "type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter"
    );
    assert_eq!(ExpressionFilter::decode(any.value.as_slice()).unwrap().expression, "response.code >= 500");
    let both = with_filter(log.clone(), vec![listener_filter(), cel.clone()]);
    let Some(FilterSpecifier::AndFilter(and)) = both.filter.unwrap().filter_specifier else { panic!() };
    assert_eq!(and.filters.len(), 2);
    assert_eq!(with_filter(log.clone(), vec![cel.clone()]).filter, Some(cel));
    assert_eq!(with_filter(log, vec![]).filter, None);
}
