//! Access loggers on HTTP connection managers, TCP proxies and listeners, as istiod puts them
//! (`pilot/pkg/networking/core/accesslog.go`, `pilot/pkg/model/telemetry_logging.go`).
//!
//! | source | loggers |
//! |---|---|
//! | Telemetry `accessLogging` (resolved by `model::push::telemetry`) | one per enabled provider, sorted by name; `filter.expression` as Envoy's CEL access log filter |
//! | otherwise mesh `accessLogFile` (non-empty) | one file logger in `accessLogEncoding` / `accessLogFormat` |
//!
//! Providers: `envoyFileAccessLog` (path, default `/dev/stdout`; `logFormat.text` or `.labels`, Istio's
//! default text format otherwise; the built-in `envoy` provider without a `logFormat` follows the mesh's
//! encoding and format), `envoyOtelAls` (OTLP/gRPC to the provider's service), `envoyHttpAls` /
//! `envoyTcpAls` (Envoy's gRPC access log service). A gRPC provider whose service is not in the
//! registry is left out and reported, as istiod logs it.
//!
//! Where: every connection manager and TCP proxy of sidecar outbound listeners and gateway listeners
//! (`CLIENT`) and of sidecar inbound chains (`SERVER`); listener-level loggers (only connections no
//! filter chain matched, response flag `NR`) on `virtualOutbound`, `virtualInbound` and gateway
//! listeners.

use std::{
    collections::BTreeMap,
    sync::{Arc, LazyLock, Mutex},
};

use envoy_types::pb::{
    envoy::{
        config::{
            accesslog::v3::{
                AccessLog, AccessLogFilter, AndFilter, ExtensionFilter, ResponseFlagFilter, access_log,
                access_log_filter::FilterSpecifier, extension_filter,
            },
            core::v3::{
                ApiVersion, DataSource, GrpcService, JsonFormatOptions, SubstitutionFormatString,
                TypedExtensionConfig, data_source, grpc_service, substitution_format_string,
            },
        },
        extensions::{
            access_loggers::{
                file::v3::{FileAccessLog, file_access_log},
                filters::cel::v3::ExpressionFilter,
                grpc::v3::{CommonGrpcAccessLogConfig, HttpGrpcAccessLogConfig, TcpGrpcAccessLogConfig},
                open_telemetry::v3::OpenTelemetryAccessLogConfig,
            },
            formatter::req_without_query::v3::ReqWithoutQuery,
        },
    },
    google::protobuf::{ListValue, Struct, Value, value},
    opentelemetry::proto::common::v1::{AnyValue, KeyValue, KeyValueList, any_value},
};
use model::{
    ConfigKey, Finding, Severity,
    push::{
        MeshSettings, ProxyContext,
        extension_provider::{self, ExtensionProvider, LogFormat, ProviderKind},
        telemetry::{AccessLogEncoding, Direction, LoggingConfig},
    },
    service::Service,
};
use serde_json::{Map, Value as Json};

use crate::{Snapshot, authz::extauthz::lookup_cluster, convert::any};

/// Istio's default text access log format (`EnvoyTextLogFormat`, Istio 1.9 onwards).
pub const ISTIO_TEXT_FORMAT: &str = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% \
%PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% \
\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% \
%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \
\"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" %UPSTREAM_CLUSTER_RAW% \
%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% \
%REQUESTED_SERVER_NAME% %ROUTE_NAME%\n";

/// Istio's default JSON access log labels (`EnvoyJSONLogFormatIstio`).
pub const ISTIO_JSON_LABELS: &[(&str, &str)] = &[
    ("start_time", "%START_TIME%"),
    ("route_name", "%ROUTE_NAME%"),
    ("method", "%REQ(:METHOD)%"),
    ("path", "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"),
    ("protocol", "%PROTOCOL%"),
    ("response_code", "%RESPONSE_CODE%"),
    ("response_flags", "%RESPONSE_FLAGS%"),
    ("response_code_details", "%RESPONSE_CODE_DETAILS%"),
    ("connection_termination_details", "%CONNECTION_TERMINATION_DETAILS%"),
    ("bytes_received", "%BYTES_RECEIVED%"),
    ("bytes_sent", "%BYTES_SENT%"),
    ("duration", "%DURATION%"),
    ("upstream_service_time", "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%"),
    ("x_forwarded_for", "%REQ(X-FORWARDED-FOR)%"),
    ("user_agent", "%REQ(USER-AGENT)%"),
    ("request_id", "%REQ(X-REQUEST-ID)%"),
    ("authority", "%REQ(:AUTHORITY)%"),
    ("upstream_host", "%UPSTREAM_HOST%"),
    ("upstream_cluster", "%UPSTREAM_CLUSTER_RAW%"),
    ("upstream_local_address", "%UPSTREAM_LOCAL_ADDRESS%"),
    ("downstream_local_address", "%DOWNSTREAM_LOCAL_ADDRESS%"),
    ("downstream_remote_address", "%DOWNSTREAM_REMOTE_ADDRESS%"),
    ("requested_server_name", "%REQUESTED_SERVER_NAME%"),
    ("upstream_transport_failure_reason", "%UPSTREAM_TRANSPORT_FAILURE_REASON%"),
];

/// Envoy's file access logger.
pub const FILE_ACCESS_LOG: &str = "envoy.access_loggers.file";
/// Envoy's HTTP gRPC access logger.
pub const HTTP_GRPC_ACCESS_LOG: &str = "envoy.access_loggers.http_grpc";
/// Envoy's TCP gRPC access logger (Istio's `TCPEnvoyALSName`).
pub const TCP_GRPC_ACCESS_LOG: &str = "envoy.tcp_grpc_access_log";
/// Envoy's OpenTelemetry access logger (Istio's `OtelEnvoyALSName`).
pub const OTEL_ACCESS_LOG: &str = "envoy.access_loggers.open_telemetry";
/// Envoy's CEL access log filter.
pub const CEL_FILTER: &str = "envoy.access_loggers.extension_filters.cel";
const REQ_WITHOUT_QUERY_FORMATTER: &str = "envoy.formatter.req_without_query";
/// Filter state a gRPC access log sends by default (Istio's `envoyStateToLog`).
const STATE_TO_LOG: &[&str] = &["upstream_peer", "downstream_peer"];
/// Filter state the OpenTelemetry logger sends (Istio's `envoyWasmStateToLog`).
const OTEL_STATE_TO_LOG: &[&str] = &[
    "upstream_peer",
    "downstream_peer",
    "wasm.upstream_peer",
    "wasm.upstream_peer_id",
    "wasm.downstream_peer",
    "wasm.downstream_peer_id",
];

/// The access loggers of one proxy and direction, and the tracing of its connection managers (both
/// are the Telemetry API's per-direction settings of a connection manager).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AccessLogs {
    /// On every HTTP connection manager and TCP proxy.
    pub filters: Vec<AccessLog>,
    /// On listeners (`virtualOutbound`, `virtualInbound`, gateway listeners): the same loggers, for
    /// connections no filter chain matched (response flag `NR`).
    pub listener: Vec<AccessLog>,
    /// The Telemetries the loggers come from (empty: the mesh config's): proxies with equal keys and
    /// direction get equal loggers.
    pub key: Vec<ConfigKey>,
    /// Providers left out (a gRPC provider's service is not in the registry), and the tracing's
    /// findings.
    pub findings: Vec<Finding>,
    /// The connection managers' tracing and request id extension ([`crate::tracing`]).
    pub tracing: crate::tracing::HcmTracing,
    /// Istio's stats and metadata exchange filters of these listeners ([`crate::stats`]; empty for
    /// proxies without istio-proxy's extensions).
    pub telemetry: crate::stats::TelemetryFilters,
}

impl AccessLogs {
    /// Sets `hcm`'s access loggers, tracing and request id extension, and adds Istio's telemetry
    /// filters ([`crate::stats::TelemetryFilters::apply_http`]).
    pub fn apply_http(
        &self,
        hcm: &mut envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager,
    ) {
        hcm.access_log = self.filters.clone();
        self.tracing.apply(hcm);
        self.telemetry.apply_http(hcm);
    }

    /// The network filters of a TCP chain whose `tcp_proxy` writes these access logs: the metadata
    /// exchange filter first when `exchange`, `security`, Istio's stats filters, then `terminal`
    /// ([`crate::stats::TelemetryFilters::tcp_chain`]).
    pub fn tcp_chain(
        &self,
        exchange: bool,
        security: &[envoy_types::pb::envoy::config::listener::v3::Filter],
        terminal: envoy_types::pb::envoy::config::listener::v3::Filter,
    ) -> Vec<envoy_types::pb::envoy::config::listener::v3::Filter> {
        self.telemetry.tcp_chain(exchange, security, terminal)
    }
}

/// The access loggers of `proxy` for `direction` under `push` (rules in the module documentation),
/// with the connection managers' tracing ([`crate::tracing::hcm_tracing`]).
pub fn access_logs(push: &Snapshot, proxy: &ProxyContext, direction: Direction) -> AccessLogs {
    let (key, configs) = push.access_logging(proxy, direction);
    let mesh = push.mesh();
    let tracing = crate::tracing::hcm_tracing(push, proxy, direction);
    let telemetry = crate::stats::telemetry_filters(push, proxy, direction);
    let mut out =
        AccessLogs { key, findings: tracing.findings.clone(), tracing, telemetry, ..AccessLogs::default() };
    if configs.is_empty() {
        if !mesh.access_log_file.is_empty() {
            let log = mesh_file_log(&mesh.access_log_file, mesh);
            out.listener.push(with_filter(log.clone(), vec![listener_filter()]));
            out.filters.push(log);
        }
        return out;
    }
    for config in configs.iter().filter(|c| !c.disabled) {
        let log = match provider_log(push.services(), mesh, &config.provider) {
            Ok(log) => log,
            Err(e) => {
                out.findings.push(Finding {
                    severity: Severity::Dropped,
                    config: None,
                    path: String::new(),
                    resource: format!("access log provider {}", config.provider.name),
                    message: format!("no access log for provider {:?}: {e}", config.provider.name),
                });
                continue;
            }
        };
        let cel = cel_filter(config);
        out.filters.push(with_filter(log.clone(), cel.clone().into_iter().collect()));
        out.listener.push(with_filter(log, std::iter::once(listener_filter()).chain(cel).collect()));
    }
    out
}

fn with_filter(mut log: AccessLog, filters: Vec<AccessLogFilter>) -> AccessLog {
    log.filter = match filters.len() {
        0 => None,
        1 => filters.into_iter().next(),
        _ => Some(AccessLogFilter {
            filter_specifier: Some(FilterSpecifier::AndFilter(AndFilter { filters })),
        }),
    };
    log
}

fn cel_filter(config: &LoggingConfig) -> Option<AccessLogFilter> {
    let expression = config.filter.as_ref()?;
    Some(AccessLogFilter {
        filter_specifier: Some(FilterSpecifier::ExtensionFilter(ExtensionFilter {
            name: CEL_FILTER.to_string(),
            config_type: Some(extension_filter::ConfigType::TypedConfig(any(&ExpressionFilter {
                expression: expression.clone(),
                ..Default::default()
            }))),
        })),
    })
}

/// Istio's listener access log filter: only connections no filter chain matched.
fn listener_filter() -> AccessLogFilter {
    AccessLogFilter {
        filter_specifier: Some(FilterSpecifier::ResponseFlagFilter(ResponseFlagFilter {
            flags: vec!["NR".to_string()],
        })),
    }
}

// `common_config` (OpenTelemetry) is deprecated in Envoy 1.40 in favour of top-level fields older
// Envoys do not know; istiod still sends it, and so do we.
#[allow(deprecated)]
fn provider_log(
    services: &[Arc<Service>],
    mesh: &MeshSettings,
    provider: &ExtensionProvider,
) -> Result<AccessLog, String> {
    match &provider.kind {
        ProviderKind::EnvoyFileAccessLog(p) => {
            if provider.name == extension_provider::BUILTIN_ENVOY_PROVIDER
                && p.log_format.is_none()
                && !p.omit_empty_values
            {
                let path = if p.path.is_empty() { "/dev/stdout" } else { p.path.as_str() };
                return Ok(mesh_file_log(path, mesh));
            }
            let path = if p.path.is_empty() { "/dev/stdout" } else { p.path.as_str() };
            let format = match &p.log_format {
                Some(LogFormat { labels: Some(labels), .. }) if !labels.is_empty() => json_format(labels),
                Some(LogFormat { labels: Some(_), .. }) => json_format(&default_labels()),
                Some(f) => text_format(&f.text),
                None => text_format(""),
            };
            Ok(file_log(path, format, p.omit_empty_values))
        }
        ProviderKind::EnvoyOtelAls(p) => {
            let (host, cluster) = lookup_cluster(services, &p.service, p.port)?;
            let log_name = if p.log_name.is_empty() { "otel_envoy_accesslog" } else { p.log_name.as_str() };
            let text = p.log_format.as_ref().map(|f| f.text.as_str()).filter(|t| !t.is_empty());
            let body = text.unwrap_or(ISTIO_TEXT_FORMAT);
            let labels = p.log_format.as_ref().and_then(|f| f.labels.as_ref());
            let mut formatters = formatters_for(body);
            if formatters.is_empty() && labels.is_some_and(|l| l.values().any(needs_req_without_query)) {
                formatters = vec![req_without_query()];
            }
            let config = OpenTelemetryAccessLogConfig {
                common_config: Some(common_grpc(log_name, &cluster, &host, OTEL_STATE_TO_LOG)),
                disable_builtin_labels: true,
                body: Some(AnyValue { value: Some(any_value::Value::StringValue(body.to_string())) }),
                attributes: labels.filter(|l| !l.is_empty()).map(|l| {
                    let mut keys: Vec<&String> = l.keys().collect();
                    keys.sort();
                    KeyValueList {
                        values: keys
                            .into_iter()
                            .map(|k| KeyValue {
                                key: k.clone(),
                                value: Some(AnyValue {
                                    value: Some(any_value::Value::StringValue(
                                        l[k].as_str().unwrap_or_default().to_string(),
                                    )),
                                }),
                                ..Default::default()
                            })
                            .collect(),
                    }
                }),
                formatters,
                ..Default::default()
            };
            Ok(typed_log(OTEL_ACCESS_LOG, any(&config)))
        }
        ProviderKind::EnvoyHttpAls(p) => {
            let (host, cluster) = lookup_cluster(services, &p.service, p.port)?;
            let name = if p.log_name.is_empty() { "http_envoy_accesslog" } else { p.log_name.as_str() };
            let config = HttpGrpcAccessLogConfig {
                common_config: Some(common_grpc(
                    name,
                    &cluster,
                    &host,
                    &state_to_log(&p.filter_state_objects_to_log),
                )),
                additional_request_headers_to_log: p.additional_request_headers_to_log.clone(),
                additional_response_headers_to_log: p.additional_response_headers_to_log.clone(),
                additional_response_trailers_to_log: p.additional_response_trailers_to_log.clone(),
            };
            Ok(typed_log(HTTP_GRPC_ACCESS_LOG, any(&config)))
        }
        ProviderKind::EnvoyTcpAls(p) => {
            let (host, cluster) = lookup_cluster(services, &p.service, p.port)?;
            let name = if p.log_name.is_empty() { "tcp_envoy_accesslog" } else { p.log_name.as_str() };
            let config = TcpGrpcAccessLogConfig {
                common_config: Some(common_grpc(
                    name,
                    &cluster,
                    &host,
                    &state_to_log(&p.filter_state_objects_to_log),
                )),
            };
            Ok(typed_log(TCP_GRPC_ACCESS_LOG, any(&config)))
        }
        _ => Err("not an access log provider".to_string()),
    }
}

fn state_to_log(configured: &[String]) -> Vec<&str> {
    if configured.is_empty() {
        STATE_TO_LOG.to_vec()
    } else {
        configured.iter().map(String::as_str).collect()
    }
}

fn common_grpc(log_name: &str, cluster: &str, authority: &str, state: &[&str]) -> CommonGrpcAccessLogConfig {
    CommonGrpcAccessLogConfig {
        log_name: log_name.to_string(),
        grpc_service: Some(GrpcService {
            target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(grpc_service::EnvoyGrpc {
                cluster_name: cluster.to_string(),
                authority: authority.to_string(),
                ..Default::default()
            })),
            ..Default::default()
        }),
        transport_api_version: ApiVersion::V3 as i32,
        filter_state_objects_to_log: state.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn typed_log(name: &str, config: envoy_types::pb::google::protobuf::Any) -> AccessLog {
    AccessLog {
        name: name.to_string(),
        config_type: Some(access_log::ConfigType::TypedConfig(config)),
        ..Default::default()
    }
}

/// A file log format: the substitution format string of a file access logger.
fn file_log(path: &str, mut format: SubstitutionFormatString, omit_empty_values: bool) -> AccessLog {
    format.omit_empty_values = omit_empty_values;
    let log = FileAccessLog {
        path: path.to_string(),
        access_log_format: Some(file_access_log::AccessLogFormat::LogFormat(format)),
    };
    typed_log(FILE_ACCESS_LOG, any(&log))
}

/// Istio's `FileAccessLogFromMeshConfig`: a file log at `path` in the mesh's encoding and format.
fn mesh_file_log(path: &str, mesh: &MeshSettings) -> AccessLog {
    let format = match mesh.access_log_encoding {
        AccessLogEncoding::Text => text_format(&mesh.access_log_format),
        AccessLogEncoding::Json => {
            let labels = serde_json::from_str::<Json>(&mesh.access_log_format)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_else(default_labels);
            json_format(&labels)
        }
    };
    file_log(path, format, false)
}

/// A text format (Istio's `fileAccessLogFormat`: the default when empty, a newline appended when
/// missing).
fn text_format(text: &str) -> SubstitutionFormatString {
    let text = if text.is_empty() {
        ISTIO_TEXT_FORMAT.to_string()
    } else if text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    };
    SubstitutionFormatString {
        formatters: formatters_for(&text),
        format: Some(substitution_format_string::Format::TextFormatSource(DataSource {
            specifier: Some(data_source::Specifier::InlineString(text)),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn default_labels() -> Map<String, Json> {
    ISTIO_JSON_LABELS.iter().map(|(k, v)| (k.to_string(), Json::String(v.to_string()))).collect()
}

fn needs_req_without_query(v: &Json) -> bool {
    v.as_str().is_some_and(|s| s.contains("%REQ_WITHOUT_QUERY"))
}

// `sort_properties` is deprecated in Envoy 1.40; istiod still sets it (to false, the default).
#[allow(deprecated)]
fn json_format(labels: &Map<String, Json>) -> SubstitutionFormatString {
    SubstitutionFormatString {
        formatters: if labels.values().any(needs_req_without_query) {
            vec![req_without_query()]
        } else {
            vec![]
        },
        json_format_options: Some(JsonFormatOptions { sort_properties: false }),
        format: Some(substitution_format_string::Format::JsonFormat(labels_struct(labels))),
        ..Default::default()
    }
}

fn formatters_for(text: &str) -> Vec<TypedExtensionConfig> {
    if text.contains("%REQ_WITHOUT_QUERY") { vec![req_without_query()] } else { Vec::new() }
}

fn req_without_query() -> TypedExtensionConfig {
    TypedExtensionConfig {
        name: REQ_WITHOUT_QUERY_FORMATTER.to_string(),
        typed_config: Some(any(&ReqWithoutQuery::default())),
    }
}

/// Structs built so far, by their JSON text. A protobuf `Struct` holds a `HashMap`, which encodes in an
/// order of its own; handing out clones of one value (a clone keeps the order) keeps a listener's bytes,
/// and so its version, equal from one generation to the next.
static STRUCTS: LazyLock<Mutex<BTreeMap<String, Struct>>> = LazyLock::new(Mutex::default);

/// The most distinct label sets remembered (formats come from mesh config and providers: few).
const STRUCTS_KEPT: usize = 256;

fn labels_struct(labels: &Map<String, Json>) -> Struct {
    let text = Json::Object(labels.clone()).to_string();
    let mut structs = STRUCTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(s) = structs.get(&text) {
        return s.clone();
    }
    if structs.len() >= STRUCTS_KEPT {
        structs.clear();
    }
    let built = json_struct(labels);
    structs.insert(text, built.clone());
    built
}

fn json_struct(map: &Map<String, Json>) -> Struct {
    Struct { fields: map.iter().map(|(k, v)| (k.clone(), json_value(v))).collect() }
}

fn json_value(v: &Json) -> Value {
    let kind = match v {
        Json::Null => value::Kind::NullValue(0),
        Json::Bool(b) => value::Kind::BoolValue(*b),
        Json::Number(n) => value::Kind::NumberValue(n.as_f64().unwrap_or_default()),
        Json::String(s) => value::Kind::StringValue(s.clone()),
        Json::Array(a) => value::Kind::ListValue(ListValue { values: a.iter().map(json_value).collect() }),
        Json::Object(o) => value::Kind::StructValue(json_struct(o)),
    };
    Value { kind: Some(kind) }
}

#[cfg(test)]
mod tests;
