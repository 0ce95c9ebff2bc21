//! MeshConfig `extensionProviders` as typed values (Istio's `meshconfig.MeshConfig_ExtensionProvider`),
//! as far as the authorization builder reads them: the external authorizers of `CUSTOM`
//! AuthorizationPolicies (`envoyExtAuthzHttp`, `envoyExtAuthzGrpc`) and the access loggers of the
//! Telemetry API (`envoyFileAccessLog`, `envoyOtelAls`, `envoyHttpAls`, `envoyTcpAls`), and its tracers
//! (`zipkin`, `opentelemetry`, `datadog`, `skywalking`, `lightstep`: [`tracing`]). Other providers
//! (metrics, …) keep only their name and kind.
//!
//! Parsing checks shapes only (types, known oneof); semantic problems (a port out of range, an
//! unknown `statusOnError`, a `pathPrefix` without `/`, a service that does not exist) are reported by
//! the authorization builder when a `CUSTOM` policy uses the provider, as Istio does.

use std::collections::BTreeMap;

use api::wkt::Duration;

pub mod tracing;
use serde_json::{Map, Value};

/// One entry of MeshConfig `extensionProviders`.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtensionProvider {
    /// The provider's name (`name`), referenced by AuthorizationPolicy `provider.name` and Telemetry.
    /// Not validated here (Istio reports an empty, duplicate or malformed name when a policy uses it).
    pub name: String,
    /// What the provider is.
    pub kind: ProviderKind,
}

/// The provider oneof of an extension provider.
#[derive(Clone, Debug, PartialEq)]
pub enum ProviderKind {
    /// `envoyExtAuthzHttp`: an HTTP external authorizer.
    EnvoyExtAuthzHttp(ExtAuthzHttp),
    /// `envoyExtAuthzGrpc`: a gRPC external authorizer.
    EnvoyExtAuthzGrpc(ExtAuthzGrpc),
    /// `envoyFileAccessLog`: Envoy's file access logger.
    EnvoyFileAccessLog(FileAccessLog),
    /// `envoyOtelAls`: Envoy's OpenTelemetry (OTLP/gRPC) access logger.
    EnvoyOtelAls(OtelAccessLog),
    /// `envoyHttpAls`: Envoy's gRPC access log service, HTTP flavour.
    EnvoyHttpAls(GrpcAccessLog),
    /// `envoyTcpAls`: Envoy's gRPC access log service, TCP flavour.
    EnvoyTcpAls(GrpcAccessLog),
    /// `zipkin`: a Zipkin tracer.
    Zipkin(tracing::ZipkinTracing),
    /// `datadog`: a Datadog tracer.
    Datadog(tracing::DatadogTracing),
    /// `skywalking`: a SkyWalking tracer.
    Skywalking(tracing::SkywalkingTracing),
    /// `lightstep`: deprecated; istiod configures no tracer for it.
    Lightstep(tracing::LightstepTracing),
    /// `opentelemetry`: an OpenTelemetry (OTLP) tracer.
    Opentelemetry(tracing::OtelTracing),
    /// Any other provider; holds the provider field name (`"zipkin"`, `"envoyFileAccessLog"`, …), or
    /// an empty string when the entry names no provider.
    Other(String),
}

/// `envoyExtAuthzHttp` (Istio's `EnvoyExternalAuthorizationHttpProvider`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExtAuthzHttp {
    /// `service`: the authorizer's hostname, `[<namespace>/]<hostname>`.
    pub service: String,
    /// `port`: the authorizer's service port (range checked by the builder, not here).
    pub port: u32,
    /// `timeout`; `None` means Istio's default of 600 s.
    pub timeout: Option<Duration>,
    /// `pathPrefix`: prefix of the check request path (must start with `/`; checked by the builder).
    pub path_prefix: String,
    /// `failOpen`: let requests through when the authorizer is unreachable or fails.
    pub fail_open: bool,
    /// `clearRouteCache`: clear the route cache after the check (read by Istio's waypoint code only;
    /// kept for completeness).
    pub clear_route_cache: bool,
    /// `statusOnError`: HTTP status returned when the authorizer fails, as written (`"403"`); empty
    /// means Envoy's default. Validated by the builder.
    pub status_on_error: String,
    /// `includeRequestHeadersInCheck`: request headers sent to the authorizer (exact, `prefix*` or
    /// `*suffix`).
    pub include_request_headers_in_check: Vec<String>,
    /// `includeHeadersInCheck` (deprecated form of `includeRequestHeadersInCheck`, used only when that
    /// is empty).
    pub include_headers_in_check: Vec<String>,
    /// `includeAdditionalHeadersInCheck`: fixed headers added to the check request.
    pub include_additional_headers_in_check: BTreeMap<String, String>,
    /// `includeRequestBodyInCheck`: buffer and send the request body.
    pub include_request_body_in_check: Option<RequestBodyInCheck>,
    /// `headersToUpstreamOnAllow`: authorizer response headers forwarded upstream on allow.
    pub headers_to_upstream_on_allow: Vec<String>,
    /// `headersToDownstreamOnAllow`: authorizer response headers sent to the client on allow.
    pub headers_to_downstream_on_allow: Vec<String>,
    /// `headersToDownstreamOnDeny`: authorizer response headers sent to the client on deny.
    pub headers_to_downstream_on_deny: Vec<String>,
}

/// `envoyExtAuthzGrpc` (Istio's `EnvoyExternalAuthorizationGrpcProvider`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExtAuthzGrpc {
    /// `service`: the authorizer's hostname, `[<namespace>/]<hostname>`.
    pub service: String,
    /// `port`: the authorizer's service port (range checked by the builder, not here).
    pub port: u32,
    /// `timeout`; `None` means Istio's default of 600 s.
    pub timeout: Option<Duration>,
    /// `failOpen`: let requests through when the authorizer is unreachable or fails.
    pub fail_open: bool,
    /// `clearRouteCache` (read by Istio's waypoint code only; kept for completeness).
    pub clear_route_cache: bool,
    /// `statusOnError`, as written; empty means Envoy's default. Validated by the builder.
    pub status_on_error: String,
    /// `includeRequestBodyInCheck`: buffer and send the request body.
    pub include_request_body_in_check: Option<RequestBodyInCheck>,
}

/// `includeRequestBodyInCheck` (Istio's `EnvoyExternalAuthorizationRequestBody`), Envoy's
/// `BufferSettings`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestBodyInCheck {
    /// `maxRequestBytes`: the most body bytes buffered.
    pub max_request_bytes: u32,
    /// `allowPartialMessage`: send what was buffered when the limit is reached instead of 413.
    pub allow_partial_message: bool,
    /// `packAsBytes`: send the body as raw bytes instead of UTF-8 text.
    pub pack_as_bytes: bool,
}

/// A log format of an access log provider (`logFormat`): text, JSON labels, or neither.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogFormat {
    /// `text`: an Envoy format string (Istio appends a newline when missing).
    pub text: String,
    /// `labels`: the JSON object of a JSON log (`None`: not set).
    pub labels: Option<Map<String, Value>>,
}

/// `envoyFileAccessLog` (Istio's `EnvoyFileAccessLogProvider`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileAccessLog {
    /// `path`: the file written (empty: `/dev/stdout`).
    pub path: String,
    /// `logFormat` (`None`: not set: Istio's default text format, or the mesh format for the built-in
    /// `envoy` provider).
    pub log_format: Option<LogFormat>,
    /// `omitEmptyValues`: leave out empty fields.
    pub omit_empty_values: bool,
}

/// `envoyOtelAls` (Istio's `EnvoyOpenTelemetryLogProvider`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OtelAccessLog {
    /// `service`: the collector's hostname, `[<namespace>/]<hostname>`.
    pub service: String,
    /// `port`: the collector's service port.
    pub port: u32,
    /// `logName` (empty: Istio's `otel_envoy_accesslog`).
    pub log_name: String,
    /// `logFormat`: the body text and attributes (labels).
    pub log_format: Option<LogFormat>,
}

/// `envoyHttpAls` / `envoyTcpAls` (Istio's `EnvoyHttpGrpcV3LogProvider` /
/// `EnvoyTcpGrpcV3LogProvider`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GrpcAccessLog {
    /// `service`: the log service's hostname, `[<namespace>/]<hostname>`.
    pub service: String,
    /// `port`: the log service's port.
    pub port: u32,
    /// `logName` (empty: Istio's default per flavour).
    pub log_name: String,
    /// `filterStateObjectsToLog` (empty: Istio's default).
    pub filter_state_objects_to_log: Vec<String>,
    /// `additionalRequestHeadersToLog` (HTTP only).
    pub additional_request_headers_to_log: Vec<String>,
    /// `additionalResponseHeadersToLog` (HTTP only).
    pub additional_response_headers_to_log: Vec<String>,
    /// `additionalResponseTrailersToLog` (HTTP only).
    pub additional_response_trailers_to_log: Vec<String>,
}

/// The name of the access log provider every mesh has (Istio's built-in `envoy`: a file log to
/// `/dev/stdout` in the mesh's `accessLogEncoding` / `accessLogFormat`).
pub const BUILTIN_ENVOY_PROVIDER: &str = "envoy";

/// The provider named `name` (compared case-insensitively, as Istio's `fetchProvider`), among the mesh
/// `extensionProviders` and Istio's built-in `envoy` file access log (which an entry named `envoy`
/// replaces, as istiod merges mesh config providers by name).
pub fn find_provider(providers: &[ExtensionProvider], name: &str) -> Option<ExtensionProvider> {
    let own = providers.iter().find(|p| p.name == BUILTIN_ENVOY_PROVIDER);
    let builtin = own.cloned().unwrap_or_else(|| ExtensionProvider {
        name: BUILTIN_ENVOY_PROVIDER.to_string(),
        kind: ProviderKind::EnvoyFileAccessLog(FileAccessLog {
            path: "/dev/stdout".to_string(),
            ..FileAccessLog::default()
        }),
    });
    std::iter::once(&builtin)
        .chain(providers.iter().filter(|p| p.name != BUILTIN_ENVOY_PROVIDER))
        .find(|p| p.name.eq_ignore_ascii_case(name))
        .cloned()
}

/// Parses the JSON of MeshConfig `extensionProviders` (a list of provider objects).
///
/// Field names are protojson's (camelCase; snake_case accepted too). Unknown fields inside a provider
/// are ignored, as for the rest of mesh config. Integers may be JSON numbers or decimal strings
/// (protojson); durations are strings (`"0.5s"`, `"100ms"`).
///
/// # Errors
/// A message naming the path of the first malformed value, e.g.
/// `extensionProviders[1].envoyExtAuthzHttp.port: expected an unsigned 32-bit integer, found "x"`.
pub fn parse_extension_providers(value: &Value) -> Result<Vec<ExtensionProvider>, String> {
    let path = "extensionProviders";
    let list = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(list) => list,
        other => return Err(format!("{path}: expected a list, found {}", kind_of(other))),
    };
    list.iter().enumerate().map(|(i, item)| parse_provider(item, &format!("{path}[{i}]"))).collect()
}

fn parse_provider(item: &Value, path: &str) -> Result<ExtensionProvider, String> {
    let obj = object(item, path)?;
    let name = match field(obj, "name") {
        Some(v) => string(v, &format!("{path}.name"))?,
        None => String::new(),
    };
    let mut kind = None;
    for (key, value) in obj {
        if key == "name" || value.is_null() {
            continue;
        }
        let sub = format!("{path}.{key}");
        let parsed = match key.as_str() {
            "envoyExtAuthzHttp" | "envoy_ext_authz_http" => {
                ProviderKind::EnvoyExtAuthzHttp(parse_http(value, &sub)?)
            }
            "envoyExtAuthzGrpc" | "envoy_ext_authz_grpc" => {
                ProviderKind::EnvoyExtAuthzGrpc(parse_grpc(value, &sub)?)
            }
            "envoyFileAccessLog" | "envoy_file_access_log" => {
                ProviderKind::EnvoyFileAccessLog(parse_file_log(value, &sub)?)
            }
            "envoyOtelAls" | "envoy_otel_als" => ProviderKind::EnvoyOtelAls(parse_otel_log(value, &sub)?),
            "envoyHttpAls" | "envoy_http_als" => ProviderKind::EnvoyHttpAls(parse_grpc_log(value, &sub)?),
            "envoyTcpAls" | "envoy_tcp_als" => ProviderKind::EnvoyTcpAls(parse_grpc_log(value, &sub)?),
            "zipkin" => ProviderKind::Zipkin(tracing::parse_zipkin(value, &sub)?),
            "datadog" => ProviderKind::Datadog(tracing::parse_datadog(value, &sub)?),
            "skywalking" => ProviderKind::Skywalking(tracing::parse_skywalking(value, &sub)?),
            "lightstep" => ProviderKind::Lightstep(tracing::parse_lightstep(value, &sub)?),
            "opentelemetry" => ProviderKind::Opentelemetry(tracing::parse_otel(value, &sub)?),
            other => ProviderKind::Other(other.to_string()),
        };
        if kind.is_some() {
            return Err(format!("{sub}: only one provider may be set per extension provider"));
        }
        kind = Some(parsed);
    }
    Ok(ExtensionProvider { name, kind: kind.unwrap_or(ProviderKind::Other(String::new())) })
}

fn parse_http(value: &Value, path: &str) -> Result<ExtAuthzHttp, String> {
    let obj = object(value, path)?;
    let p = |name: &str| format!("{path}.{name}");
    let mut out = ExtAuthzHttp::default();
    for (key, v) in obj {
        if v.is_null() {
            continue;
        }
        match api::de::lower_camel(key).as_str() {
            "service" => out.service = string(v, &p(key))?,
            "port" => out.port = uint32(v, &p(key))?,
            "timeout" => out.timeout = Some(duration(v, &p(key))?),
            "pathPrefix" => out.path_prefix = string(v, &p(key))?,
            "failOpen" => out.fail_open = boolean(v, &p(key))?,
            "clearRouteCache" => out.clear_route_cache = boolean(v, &p(key))?,
            "statusOnError" => out.status_on_error = string(v, &p(key))?,
            "includeRequestHeadersInCheck" => out.include_request_headers_in_check = strings(v, &p(key))?,
            "includeHeadersInCheck" => out.include_headers_in_check = strings(v, &p(key))?,
            "includeAdditionalHeadersInCheck" => {
                let map = object(v, &p(key))?;
                for (name, value) in map {
                    let value = string(value, &format!("{}[{name}]", p(key)))?;
                    out.include_additional_headers_in_check.insert(name.clone(), value);
                }
            }
            "includeRequestBodyInCheck" => out.include_request_body_in_check = Some(body(v, &p(key))?),
            "headersToUpstreamOnAllow" => out.headers_to_upstream_on_allow = strings(v, &p(key))?,
            "headersToDownstreamOnAllow" => out.headers_to_downstream_on_allow = strings(v, &p(key))?,
            "headersToDownstreamOnDeny" => out.headers_to_downstream_on_deny = strings(v, &p(key))?,
            _ => {}
        }
    }
    Ok(out)
}

fn parse_grpc(value: &Value, path: &str) -> Result<ExtAuthzGrpc, String> {
    let obj = object(value, path)?;
    let p = |name: &str| format!("{path}.{name}");
    let mut out = ExtAuthzGrpc::default();
    for (key, v) in obj {
        if v.is_null() {
            continue;
        }
        match api::de::lower_camel(key).as_str() {
            "service" => out.service = string(v, &p(key))?,
            "port" => out.port = uint32(v, &p(key))?,
            "timeout" => out.timeout = Some(duration(v, &p(key))?),
            "failOpen" => out.fail_open = boolean(v, &p(key))?,
            "clearRouteCache" => out.clear_route_cache = boolean(v, &p(key))?,
            "statusOnError" => out.status_on_error = string(v, &p(key))?,
            "includeRequestBodyInCheck" => out.include_request_body_in_check = Some(body(v, &p(key))?),
            _ => {}
        }
    }
    Ok(out)
}

/// Calls `f` with each non-null field of the object `value` and its path.
fn each_field(
    value: &Value,
    path: &str,
    mut f: impl FnMut(&str, &Value, String) -> Result<(), String>,
) -> Result<(), String> {
    for (key, v) in object(value, path)? {
        if !v.is_null() {
            f(key, v, format!("{path}.{key}"))?;
        }
    }
    Ok(())
}

fn parse_log_format(value: &Value, path: &str) -> Result<LogFormat, String> {
    let mut out = LogFormat::default();
    each_field(value, path, |key, v, p| {
        match key {
            "text" => out.text = string(v, &p)?,
            "labels" => out.labels = Some(object(v, &p)?.clone()),
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

fn parse_file_log(value: &Value, path: &str) -> Result<FileAccessLog, String> {
    let mut out = FileAccessLog::default();
    each_field(value, path, |key, v, p| {
        match api::de::lower_camel(key).as_str() {
            "path" => out.path = string(v, &p)?,
            "logFormat" => out.log_format = Some(parse_log_format(v, &p)?),
            "omitEmptyValues" => out.omit_empty_values = boolean(v, &p)?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

fn parse_otel_log(value: &Value, path: &str) -> Result<OtelAccessLog, String> {
    let mut out = OtelAccessLog::default();
    each_field(value, path, |key, v, p| {
        match api::de::lower_camel(key).as_str() {
            "service" => out.service = string(v, &p)?,
            "port" => out.port = uint32(v, &p)?,
            "logName" => out.log_name = string(v, &p)?,
            "logFormat" => out.log_format = Some(parse_log_format(v, &p)?),
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

fn parse_grpc_log(value: &Value, path: &str) -> Result<GrpcAccessLog, String> {
    let mut out = GrpcAccessLog::default();
    each_field(value, path, |key, v, p| {
        match api::de::lower_camel(key).as_str() {
            "service" => out.service = string(v, &p)?,
            "port" => out.port = uint32(v, &p)?,
            "logName" => out.log_name = string(v, &p)?,
            "filterStateObjectsToLog" => out.filter_state_objects_to_log = strings(v, &p)?,
            "additionalRequestHeadersToLog" => out.additional_request_headers_to_log = strings(v, &p)?,
            "additionalResponseHeadersToLog" => out.additional_response_headers_to_log = strings(v, &p)?,
            "additionalResponseTrailersToLog" => out.additional_response_trailers_to_log = strings(v, &p)?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

fn body(value: &Value, path: &str) -> Result<RequestBodyInCheck, String> {
    let obj = object(value, path)?;
    let mut out = RequestBodyInCheck::default();
    for (key, v) in obj {
        if v.is_null() {
            continue;
        }
        let p = format!("{path}.{key}");
        match api::de::lower_camel(key).as_str() {
            "maxRequestBytes" => out.max_request_bytes = uint32(v, &p)?,
            "allowPartialMessage" => out.allow_partial_message = boolean(v, &p)?,
            "packAsBytes" => out.pack_as_bytes = boolean(v, &p)?,
            _ => {}
        }
    }
    Ok(out)
}

fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).filter(|v| !v.is_null())
}

fn kind_of(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("{s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object().ok_or_else(|| format!("{path}: expected an object, found {}", kind_of(v)))
}

fn string(v: &Value, path: &str) -> Result<String, String> {
    v.as_str().map(str::to_string).ok_or_else(|| format!("{path}: expected a string, found {}", kind_of(v)))
}

fn boolean(v: &Value, path: &str) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s == "true" => Ok(true),
        Value::String(s) if s == "false" => Ok(false),
        other => Err(format!("{path}: expected a boolean, found {}", kind_of(other))),
    }
}

fn uint32(v: &Value, path: &str) -> Result<u32, String> {
    let parsed = match v {
        Value::Number(n) => {
            n.as_u64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
        }
        Value::String(s) => s.parse::<u64>().ok(),
        _ => None,
    };
    parsed
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("{path}: expected an unsigned 32-bit integer, found {}", kind_of(v)))
}

fn strings(v: &Value, path: &str) -> Result<Vec<String>, String> {
    let list =
        v.as_array().ok_or_else(|| format!("{path}: expected a list of strings, found {}", kind_of(v)))?;
    list.iter().enumerate().map(|(i, s)| string(s, &format!("{path}[{i}]"))).collect()
}

fn duration(v: &Value, path: &str) -> Result<Duration, String> {
    let text =
        v.as_str().ok_or_else(|| format!("{path}: expected a duration string, found {}", kind_of(v)))?;
    Duration::parse(text).map_err(|e| format!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parses_http_and_grpc_providers() {
        let providers = parse_extension_providers(&json!([
            {"name": "http", "envoyExtAuthzHttp": {
                "service": "foo/authz.foo.svc.cluster.local", "port": "9000", "timeout": "10s",
                "failOpen": true, "statusOnError": "403", "pathPrefix": "/check",
                "includeRequestHeadersInCheck": ["x-a", "x-b*"],
                "includeAdditionalHeadersInCheck": {"x-h": "v"},
                "includeRequestBodyInCheck": {"maxRequestBytes": 2048, "allowPartialMessage": true, "packAsBytes": true},
                "headersToUpstreamOnAllow": ["authorization"],
                "headersToDownstreamOnDeny": ["set-cookie"],
                "headersToDownstreamOnAllow": ["x-c"]}},
            {"name": "grpc", "envoy_ext_authz_grpc": {"service": "authz", "port": 9001, "timeout": "0.002s"}},
            {"name": "tracing", "zipkin": {"service": "zipkin", "port": 9411}},
        ]))
        .unwrap();
        assert_eq!(providers.len(), 3);
        let ProviderKind::EnvoyExtAuthzHttp(http) = &providers[0].kind else { panic!("{:?}", providers[0]) };
        assert_eq!(http.port, 9000);
        assert_eq!(http.timeout, Some(Duration { seconds: 10, nanos: 0 }));
        assert!(http.fail_open);
        assert_eq!(http.include_request_headers_in_check, ["x-a", "x-b*"]);
        assert_eq!(http.include_additional_headers_in_check["x-h"], "v");
        assert_eq!(
            http.include_request_body_in_check,
            Some(RequestBodyInCheck {
                max_request_bytes: 2048,
                allow_partial_message: true,
                pack_as_bytes: true
            })
        );
        let ProviderKind::EnvoyExtAuthzGrpc(grpc) = &providers[1].kind else { panic!("{:?}", providers[1]) };
        assert_eq!((grpc.service.as_str(), grpc.port), ("authz", 9001));
        assert_eq!(grpc.timeout, Some(Duration { seconds: 0, nanos: 2_000_000 }));
        assert!(
            matches!(&providers[2].kind, ProviderKind::Zipkin(z) if z.service == "zipkin" && z.port == 9411)
        );
    }

    #[test]
    fn semantic_problems_are_not_parse_errors() {
        let providers = parse_extension_providers(&json!([
            {"name": "bad", "envoyExtAuthzHttp": {"service": "x", "port": 999999, "statusOnError": "999", "pathPrefix": "check"}}
        ]))
        .unwrap();
        let ProviderKind::EnvoyExtAuthzHttp(http) = &providers[0].kind else { panic!() };
        assert_eq!((http.port, http.status_on_error.as_str()), (999999, "999"));
    }

    #[test]
    fn errors_name_the_path() {
        let err = parse_extension_providers(&json!([
            {"name": "ok", "envoyExtAuthzGrpc": {"service": "a", "port": 1}},
            {"name": "bad", "envoyExtAuthzHttp": {"service": "a", "port": "x"}}
        ]))
        .unwrap_err();
        assert!(err.starts_with("extensionProviders[1].envoyExtAuthzHttp.port: "), "{err}");
        let err =
            parse_extension_providers(&json!([{"name": "t", "envoyExtAuthzGrpc": {"timeout": "soon"}}]))
                .unwrap_err();
        assert!(err.starts_with("extensionProviders[0].envoyExtAuthzGrpc.timeout: "), "{err}");
        let err = parse_extension_providers(
            &json!([{"name": "t", "envoyExtAuthzHttp": {"includeHeadersInCheck": [1]}}]),
        )
        .unwrap_err();
        assert!(
            err.starts_with("extensionProviders[0].envoyExtAuthzHttp.includeHeadersInCheck[0]: "),
            "{err}"
        );
        let err =
            parse_extension_providers(&json!([{"name": "two", "envoyExtAuthzHttp": {}, "prometheus": {}}]))
                .unwrap_err();
        assert!(err.contains("only one provider"), "{err}");
        assert!(
            parse_extension_providers(&json!({"name": "x"})).unwrap_err().starts_with("extensionProviders: ")
        );
        assert_eq!(parse_extension_providers(&Value::Null).unwrap(), []);
    }
}
