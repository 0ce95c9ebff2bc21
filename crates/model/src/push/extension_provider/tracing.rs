//! The tracing providers of MeshConfig `extensionProviders` (Istio's
//! `MeshConfig_ExtensionProvider_{Zipkin,Datadog,Skywalking,Lightstep,Opentelemetry}TracingProvider`),
//! read by `pilot/pkg/networking/core/tracing.go`. Parsing checks shapes only; a service that is not
//! in the registry is reported when a proxy's connection managers are built.

use api::wkt::Duration;
use serde_json::Value;

use super::{boolean, duration, each_field, string, uint32};

/// `zipkin` (Istio's `ZipkinTracingProvider`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZipkinTracing {
    /// `service`: the collector's hostname, `[<namespace>/]<hostname>`.
    pub service: String,
    /// `port`: the collector's service port.
    pub port: u32,
    /// `maxTagLength`: the longest `http.url` tag (0: Envoy's default, 256).
    pub max_tag_length: u32,
    /// `enable64bitTraceId`: 64-bit trace ids instead of Istio's 128-bit default.
    pub enable_64bit_trace_id: bool,
    /// `path`: the collector endpoint (empty: `/api/v2/spans`).
    pub path: String,
    /// `traceContextOption`: `true` for `USE_B3_WITH_W3C_PROPAGATION` (extract and inject W3C
    /// `traceparent` as well as B3); `false`, the default, is `USE_B3`.
    pub b3_with_w3c: bool,
    /// `timeout` of a span report (`None`: Istio's 5 s).
    pub timeout: Option<Duration>,
    /// `headers` added to span reports.
    pub headers: Vec<HttpHeader>,
}

/// `datadog` (Istio's `DatadogTracingProvider`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DatadogTracing {
    /// `service`: the agent's hostname.
    pub service: String,
    /// `port`: the agent's service port.
    pub port: u32,
    /// `maxTagLength` (0: Envoy's default).
    pub max_tag_length: u32,
}

/// `skywalking` (Istio's `SkyWalkingTracingProvider`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SkywalkingTracing {
    /// `service`: the OAP's hostname.
    pub service: String,
    /// `port`: the OAP's gRPC port.
    pub port: u32,
    /// `accessToken` (read but, as istiod, not sent).
    pub access_token: String,
}

/// `lightstep` (Istio's `LightstepTracingProvider`, deprecated: istiod configures no tracer for it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LightstepTracing {
    /// `service`.
    pub service: String,
    /// `port`.
    pub port: u32,
    /// `accessToken`.
    pub access_token: String,
    /// `maxTagLength`.
    pub max_tag_length: u32,
}

/// `opentelemetry` (Istio's `OpenTelemetryTracingProvider`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OtelTracing {
    /// `service`: the collector's hostname.
    pub service: String,
    /// `port`: the collector's port.
    pub port: u32,
    /// `maxTagLength` (0: Envoy's default).
    pub max_tag_length: u32,
    /// `http`: export with OTLP/HTTP to this path (`None`: OTLP/gRPC).
    pub http: Option<HttpService>,
    /// `grpc`: OTLP/gRPC settings.
    pub grpc: Option<GrpcSettings>,
    /// `resourceDetectors.environment` set.
    pub environment_detector: bool,
    /// `resourceDetectors.dynatrace` set.
    pub dynatrace_detector: bool,
    /// `serviceAttributeEnrichment: OTEL_SEMANTIC_CONVENTIONS` (`false`: `ISTIO_CANONICAL`).
    pub otel_semantic_conventions: bool,
    /// `dynatraceSampler`.
    pub dynatrace_sampler: Option<DynatraceSampler>,
}

/// `HttpService` of a tracing provider: path, timeout and headers of the export requests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpService {
    /// `path` on the collector.
    pub path: String,
    /// `timeout` (`None`: Envoy's default).
    pub timeout: Option<Duration>,
    /// `headers` added to each request.
    pub headers: Vec<HttpHeader>,
}

/// `GrpcService` of the OpenTelemetry provider.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GrpcSettings {
    /// `timeout` of an export call.
    pub timeout: Option<Duration>,
    /// `initialMetadata` sent with each call.
    pub initial_metadata: Vec<HttpHeader>,
}

/// One header (`HttpHeader`): a fixed value or the value of an environment variable of istiod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpHeader {
    /// `name`.
    pub name: String,
    /// `value` (empty when `envName` is used).
    pub value: String,
    /// `envName`: istiod reads this variable of its own environment (meshpilot does not: the
    /// header is left out and reported).
    pub env_name: String,
}

/// `dynatraceSampler` (Istio's `OpenTelemetryTracingProvider.DynatraceSampler`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DynatraceSampler {
    /// `tenant`.
    pub tenant: String,
    /// `clusterId`.
    pub cluster_id: i32,
    /// `rootSpansPerMinute` (0: Envoy's default, 1000).
    pub root_spans_per_minute: u32,
    /// `httpService`: the Dynatrace API (`None`: the provider's OTLP/HTTP service is reused).
    pub http_service: Option<DynatraceApi>,
}

/// `DynatraceSampler.DynatraceApi`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DynatraceApi {
    /// `service`.
    pub service: String,
    /// `port`.
    pub port: u32,
    /// `http`.
    pub http: HttpService,
}

/// A two-valued proto enum (protojson: its name or number): `true` for the second value.
fn second_of(v: &Value, path: &str, names: [&str; 2]) -> Result<bool, String> {
    match v {
        Value::String(s) if s == names[0] => Ok(false),
        Value::String(s) if s == names[1] => Ok(true),
        Value::Number(n) if n.as_u64() == Some(0) => Ok(false),
        Value::Number(n) if n.as_u64() == Some(1) => Ok(true),
        other => Err(format!("{path}: expected {} or {}, found {other}", names[0], names[1])),
    }
}

pub(super) fn parse_zipkin(value: &Value, path: &str) -> Result<ZipkinTracing, String> {
    let mut out = ZipkinTracing::default();
    each_field(value, path, |key, v, p| {
        match api::de::lower_camel(key).as_str() {
            "service" => out.service = string(v, &p)?,
            "port" => out.port = uint32(v, &p)?,
            "maxTagLength" => out.max_tag_length = uint32(v, &p)?,
            "enable64bitTraceId" | "enable64BitTraceId" => out.enable_64bit_trace_id = boolean(v, &p)?,
            "path" => out.path = string(v, &p)?,
            "traceContextOption" => {
                out.b3_with_w3c = second_of(v, &p, ["USE_B3", "USE_B3_WITH_W3C_PROPAGATION"])?;
            }
            "timeout" => out.timeout = Some(duration(v, &p)?),
            "headers" => out.headers = headers(v, &p)?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

/// The fields the Datadog, SkyWalking and Lightstep providers share.
#[derive(Default)]
struct Collector {
    service: String,
    port: u32,
    max_tag_length: u32,
    access_token: String,
}

fn collector(value: &Value, path: &str) -> Result<Collector, String> {
    let mut out = Collector::default();
    each_field(value, path, |key, v, p| {
        match api::de::lower_camel(key).as_str() {
            "service" => out.service = string(v, &p)?,
            "port" => out.port = uint32(v, &p)?,
            "maxTagLength" => out.max_tag_length = uint32(v, &p)?,
            "accessToken" => out.access_token = string(v, &p)?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

pub(super) fn parse_datadog(value: &Value, path: &str) -> Result<DatadogTracing, String> {
    let c = collector(value, path)?;
    Ok(DatadogTracing { service: c.service, port: c.port, max_tag_length: c.max_tag_length })
}

pub(super) fn parse_skywalking(value: &Value, path: &str) -> Result<SkywalkingTracing, String> {
    let c = collector(value, path)?;
    Ok(SkywalkingTracing { service: c.service, port: c.port, access_token: c.access_token })
}

pub(super) fn parse_lightstep(value: &Value, path: &str) -> Result<LightstepTracing, String> {
    let c = collector(value, path)?;
    Ok(LightstepTracing {
        service: c.service,
        port: c.port,
        access_token: c.access_token,
        max_tag_length: c.max_tag_length,
    })
}

pub(super) fn parse_otel(value: &Value, path: &str) -> Result<OtelTracing, String> {
    let mut out = OtelTracing::default();
    each_field(value, path, |key, v, p| {
        match api::de::lower_camel(key).as_str() {
            "service" => out.service = string(v, &p)?,
            "port" => out.port = uint32(v, &p)?,
            "maxTagLength" => out.max_tag_length = uint32(v, &p)?,
            "http" => out.http = Some(http_service(v, &p)?),
            "grpc" => {
                let mut grpc = GrpcSettings::default();
                each_field(v, &p, |key, v, p| {
                    match api::de::lower_camel(key).as_str() {
                        "timeout" => grpc.timeout = Some(duration(v, &p)?),
                        "initialMetadata" => grpc.initial_metadata = headers(v, &p)?,
                        _ => {}
                    }
                    Ok(())
                })?;
                out.grpc = Some(grpc);
            }
            "resourceDetectors" => each_field(v, &p, |key, _, _| {
                match key {
                    "environment" => out.environment_detector = true,
                    "dynatrace" => out.dynatrace_detector = true,
                    _ => {}
                }
                Ok(())
            })?,
            "serviceAttributeEnrichment" => {
                out.otel_semantic_conventions =
                    second_of(v, &p, ["ISTIO_CANONICAL", "OTEL_SEMANTIC_CONVENTIONS"])?;
            }
            "dynatraceSampler" => out.dynatrace_sampler = Some(dynatrace_sampler(v, &p)?),
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

fn dynatrace_sampler(value: &Value, path: &str) -> Result<DynatraceSampler, String> {
    let mut out = DynatraceSampler::default();
    each_field(value, path, |key, v, p| {
        match api::de::lower_camel(key).as_str() {
            "tenant" => out.tenant = string(v, &p)?,
            "clusterId" => {
                out.cluster_id = v
                    .as_i64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| format!("{p}: expected a 32-bit integer, found {v}"))?;
            }
            "rootSpansPerMinute" => out.root_spans_per_minute = uint32(v, &p)?,
            "httpService" => {
                let mut api = DynatraceApi::default();
                each_field(v, &p, |key, v, p| {
                    match api::de::lower_camel(key).as_str() {
                        "service" => api.service = string(v, &p)?,
                        "port" => api.port = uint32(v, &p)?,
                        "http" => api.http = http_service(v, &p)?,
                        _ => {}
                    }
                    Ok(())
                })?;
                out.http_service = Some(api);
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

fn http_service(value: &Value, path: &str) -> Result<HttpService, String> {
    let mut out = HttpService::default();
    each_field(value, path, |key, v, p| {
        match api::de::lower_camel(key).as_str() {
            "path" => out.path = string(v, &p)?,
            "timeout" => out.timeout = Some(duration(v, &p)?),
            "headers" => out.headers = headers(v, &p)?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

fn headers(value: &Value, path: &str) -> Result<Vec<HttpHeader>, String> {
    let list =
        value.as_array().ok_or_else(|| format!("{path}: expected a list of headers, found {value}"))?;
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let mut out = HttpHeader::default();
            each_field(item, &format!("{path}[{i}]"), |key, v, p| {
                match api::de::lower_camel(key).as_str() {
                    "name" => out.name = string(v, &p)?,
                    "value" => out.value = string(v, &p)?,
                    "envName" => out.env_name = string(v, &p)?,
                    _ => {}
                }
                Ok(())
            })?;
            Ok(out)
        })
        .collect()
}
