//! Tracing on HTTP connection managers, as istiod sets it (`pilot/pkg/networking/core/tracing.go`,
//! `configureTracing`), and the request id extension that goes with it
//! (`pilot/pkg/xds/requestidextension`).
//!
//! | source | connection manager `tracing` |
//! |---|---|
//! | Telemetry `tracing` or mesh `defaultProviders.tracing` (resolved by `model::push::tracing`) | the direction's provider as Envoy tracer (`envoy.tracers.zipkin`, `.opentelemetry`, `.datadog`, `.skywalking`) sending to the provider service's outbound cluster; random sampling from `randomSamplingPercentage`, else the proxy config's `tracing.sampling`, else `PILOT_TRACE_SAMPLING`; 100 % with an OpenTelemetry sampler; client and overall sampling 100 %; custom tags; `spawn_upstream_span` for gateways and SkyWalking; `no_context_propagation`. A disabled direction, a provider that is no tracer, or a service not in the registry: no tracing (the last two reported) |
//! | otherwise mesh `enableTracing` (default `true`) | tracing without a provider (Envoy's bootstrap tracer, set by pilot-agent from `defaultConfig.tracing`), the proxy config's sampling and custom tags |
//!
//! Custom tags, sorted by tag name: Istio's service tags (`istio.canonical_revision`,
//! `istio.canonical_service`, `istio.mesh_id`, `istio.namespace`, `istio.cluster_id`) and the
//! authorization dry-run tags unless `enableIstioTags` is false; then the Telemetry's `customTags`, or,
//! when it sets none, the proxy config's `tracing.customTags`.
//!
//! Every connection manager gets Envoy's UUID request id extension; `use_request_id_for_trace_sampling`
//! is the direction's `useRequestIdForTraceSampling` when Telemetry tracing applies, else `true`.
//!
//! meshpilot serves the newest proxies: istiod's version gates (Zipkin `collector_service` from Istio
//! 1.29, `trace_context_option` from 1.28, formatter tags from 1.29, `no_context_propagation` from
//! 1.30) are taken as passed.

use std::sync::Arc;

use envoy_types::pb::envoy::{
    config::{
        core::v3::{
            GrpcService, HeaderValue, HeaderValueOption, HttpService, HttpUri, TypedExtensionConfig,
            grpc_service, header_value_option::HeaderAppendAction, http_uri,
        },
        trace::v3::{
            DatadogConfig, OpenTelemetryConfig, SkyWalkingConfig, ZipkinConfig,
            tracing::Http,
            tracing::http,
            zipkin_config::{CollectorEndpointVersion, TraceContextOption},
        },
    },
    extensions::{
        filters::network::http_connection_manager::v3::{
            HttpConnectionManager, RequestIdExtension, http_connection_manager::Tracing,
        },
        request_id::uuid::v3::UuidRequestIdConfig,
        tracers::opentelemetry::{
            resource_detectors::v3::{DynatraceResourceDetectorConfig, EnvironmentResourceDetectorConfig},
            samplers::v3::DynatraceSamplerConfig,
        },
    },
    r#type::{
        metadata::v3::{
            MetadataKey, MetadataKind, metadata_key::PathSegment, metadata_key::path_segment, metadata_kind,
        },
        tracing::v3::{CustomTag as EnvoyTag, custom_tag},
        v3::Percent,
    },
};
use model::{
    Finding, Severity,
    push::{
        ProxyContext, ProxyKind,
        extension_provider::{
            ExtensionProvider, ProviderKind,
            tracing::{HttpHeader, OtelTracing, ZipkinTracing},
        },
        telemetry::Direction,
        tracing::{CustomTag, ProxyTracing, TracingSpec, proxy_sampling},
    },
    service::Service,
};

use crate::{
    Snapshot,
    authz::extauthz::lookup_cluster,
    convert::{any, boolv, duration, u32v},
};

/// Envoy's Zipkin tracer.
pub const ZIPKIN_TRACER: &str = "envoy.tracers.zipkin";
/// Envoy's OpenTelemetry tracer.
pub const OPENTELEMETRY_TRACER: &str = "envoy.tracers.opentelemetry";
/// Envoy's Datadog tracer.
pub const DATADOG_TRACER: &str = "envoy.tracers.datadog";
/// Envoy's SkyWalking tracer.
pub const SKYWALKING_TRACER: &str = "envoy.tracers.skywalking";
/// Envoy's UUID request id extension.
pub const UUID_REQUEST_ID: &str = "envoy.request_id.uuid";
const ENVIRONMENT_DETECTOR: &str = "envoy.tracers.opentelemetry.resource_detectors.environment";
const DYNATRACE_DETECTOR: &str = "envoy.tracers.opentelemetry.resource_detectors.dynatrace";
const DYNATRACE_SAMPLER: &str = "envoy.tracers.opentelemetry.samplers.dynatrace";
/// The RBAC filter's metadata namespace the dry-run tags read.
const RBAC_FILTER: &str = "envoy.filters.http.rbac";

/// The tracing of one proxy and direction's connection managers.
#[derive(Clone, Debug, PartialEq)]
pub struct HcmTracing {
    /// The connection manager's `tracing` (`None`: not traced).
    pub tracing: Option<Tracing>,
    /// The request id extension's `use_request_id_for_trace_sampling`.
    pub use_request_id_for_trace_sampling: bool,
    /// Problems met (a provider that is no tracer, a collector service not in the registry, a header
    /// read from istiod's environment), reported as generation findings.
    pub findings: Vec<Finding>,
}

impl Default for HcmTracing {
    fn default() -> Self {
        HcmTracing { tracing: None, use_request_id_for_trace_sampling: true, findings: Vec::new() }
    }
}

impl HcmTracing {
    /// The encoded tracing and request id setting: equal for proxies whose connection managers trace
    /// alike (a cache key part).
    pub fn fingerprint(&self) -> Vec<u8> {
        let mut out = self.tracing.as_ref().map(prost::Message::encode_to_vec).unwrap_or_default();
        out.push(u8::from(self.use_request_id_for_trace_sampling));
        out
    }

    /// Sets `hcm`'s `tracing` and request id extension (istiod sets `generate_request_id` too).
    pub fn apply(&self, hcm: &mut HttpConnectionManager) {
        hcm.tracing = self.tracing.clone();
        hcm.generate_request_id = Some(boolv(true));
        hcm.request_id_extension = Some(RequestIdExtension {
            typed_config: Some(any(&UuidRequestIdConfig {
                use_request_id_for_trace_sampling: Some(boolv(self.use_request_id_for_trace_sampling)),
                ..Default::default()
            })),
        });
    }
}

/// The tracing of `proxy`'s connection managers for `direction` under `push` (rules in the module
/// documentation). Proxyless gRPC clients get none (their listeners have no connection manager of
/// this kind).
pub fn hcm_tracing(push: &Snapshot, proxy: &ProxyContext, direction: Direction) -> HcmTracing {
    let mesh = push.mesh();
    let proxy_tracing = proxy.effective_proxy_tracing(mesh.default_proxy_tracing.as_ref());
    let sampling_default = proxy_sampling(proxy_tracing, mesh.trace_sampling);
    let mut out = HcmTracing::default();
    let Some(config) = push.tracing(proxy) else {
        if mesh.enable_tracing {
            let mut tracing = sampled(sampling_default);
            tracing.custom_tags = custom_tags(None, proxy_tracing, proxy);
            tracing.max_path_tag_length =
                proxy_tracing.map(|t| t.max_path_tag_length).filter(|l| *l != 0).map(u32v);
            out.tracing = Some(tracing);
        }
        return out;
    };
    let spec = config.spec(direction);
    let Some(provider) = spec.provider.as_ref().filter(|_| !spec.disabled) else { return out };
    let built = match provider_tracing(push.services(), proxy, provider, &mut out.findings) {
        Ok(built) => built,
        Err(e) => {
            out.findings.push(Finding {
                severity: Severity::Dropped,
                config: None,
                path: String::new(),
                resource: format!("tracing provider {}", provider.name),
                message: format!("no tracing with provider {:?}: {e}", provider.name),
            });
            return out;
        }
    };
    let sampling = if built.custom_sampler {
        100.0
    } else {
        spec.random_sampling_percentage.unwrap_or(sampling_default)
    };
    let mut tracing = built.tracing;
    let percent = sampled(sampling);
    tracing.client_sampling = percent.client_sampling;
    tracing.random_sampling = percent.random_sampling;
    tracing.overall_sampling = percent.overall_sampling;
    tracing.custom_tags = custom_tags(Some(spec), proxy_tracing, proxy);
    if tracing.max_path_tag_length.is_none() {
        tracing.max_path_tag_length =
            proxy_tracing.map(|t| t.max_path_tag_length).filter(|l| *l != 0).map(u32v);
    }
    tracing.no_context_propagation = spec.disable_context_propagation;
    out.tracing = Some(tracing);
    out.use_request_id_for_trace_sampling = spec.use_request_id_for_trace_sampling;
    out
}

/// Istio's `configureSampling`: client and overall 100 %, random `percentage`.
fn sampled(percentage: f64) -> Tracing {
    Tracing {
        client_sampling: Some(Percent { value: 100.0 }),
        random_sampling: Some(Percent { value: percentage }),
        overall_sampling: Some(Percent { value: 100.0 }),
        ..Default::default()
    }
}

struct BuiltTracing {
    tracing: Tracing,
    custom_sampler: bool,
}

/// Istio's `configureFromProviderConfig` and `buildHCMTracing`.
fn provider_tracing(
    services: &[Arc<Service>],
    proxy: &ProxyContext,
    provider: &ExtensionProvider,
    findings: &mut Vec<Finding>,
) -> Result<BuiltTracing, String> {
    let mut spawn_upstream_span = proxy.kind == ProxyKind::Router;
    let mut custom_sampler = false;
    let (name, max_tag_length, config) = match &provider.kind {
        ProviderKind::Zipkin(z) => {
            let (host, cluster) = lookup_cluster(services, &z.service, z.port)?;
            (ZIPKIN_TRACER, z.max_tag_length, any(&zipkin(z, &host, &cluster, &provider.name, findings)))
        }
        ProviderKind::Datadog(d) => {
            let (host, cluster) = lookup_cluster(services, &d.service, d.port)?;
            let config = DatadogConfig {
                collector_cluster: cluster,
                service_name: proxy.service_cluster.clone(),
                collector_hostname: host,
                ..Default::default()
            };
            (DATADOG_TRACER, d.max_tag_length, any(&config))
        }
        ProviderKind::Skywalking(s) => {
            let (host, cluster) = lookup_cluster(services, &s.service, s.port)?;
            spawn_upstream_span = true;
            let config =
                SkyWalkingConfig { grpc_service: Some(envoy_grpc(&cluster, &host)), ..Default::default() };
            (SKYWALKING_TRACER, 0, any(&config))
        }
        ProviderKind::Opentelemetry(o) => {
            let (config, sampler) = otel(services, proxy, o, &provider.name, findings)?;
            custom_sampler = sampler;
            (OPENTELEMETRY_TRACER, o.max_tag_length, any(&config))
        }
        ProviderKind::Lightstep(_) => {
            return Err("the Lightstep provider is deprecated; istiod configures no tracer for it (use \
                        OpenTelemetry)"
                .to_string());
        }
        _ => return Err("not a tracing provider".to_string()),
    };
    let tracing = Tracing {
        spawn_upstream_span: spawn_upstream_span.then(|| boolv(true)),
        provider: Some(Http {
            name: name.to_string(),
            config_type: Some(http::ConfigType::TypedConfig(config)),
        }),
        max_path_tag_length: (max_tag_length != 0).then(|| u32v(max_tag_length)),
        ..Default::default()
    };
    Ok(BuiltTracing { tracing, custom_sampler })
}

fn envoy_grpc(cluster: &str, authority: &str) -> GrpcService {
    GrpcService {
        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(grpc_service::EnvoyGrpc {
            cluster_name: cluster.to_string(),
            authority: authority.to_string(),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// Istio's `zipkinConfig` for current proxies: `collector_service` with a 5 s default timeout.
fn zipkin(
    z: &ZipkinTracing,
    host: &str,
    cluster: &str,
    provider: &str,
    findings: &mut Vec<Finding>,
) -> ZipkinConfig {
    let path = if z.path.is_empty() { "/api/v2/spans" } else { z.path.as_str() };
    let timeout = z
        .timeout
        .as_ref()
        .map_or_else(|| crate::convert::std_duration(std::time::Duration::from_secs(5)), duration);
    ZipkinConfig {
        collector_endpoint_version: CollectorEndpointVersion::HttpJson as i32,
        trace_id_128bit: !z.enable_64bit_trace_id,
        shared_span_context: Some(boolv(false)),
        collector_service: Some(HttpService {
            http_uri: Some(HttpUri {
                uri: format!("http://{host}{path}"),
                timeout: Some(timeout),
                http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(cluster.to_string())),
            }),
            request_headers_to_add: headers(&z.headers, provider, findings),
            ..Default::default()
        }),
        trace_context_option: if z.b3_with_w3c {
            TraceContextOption::UseB3WithW3cPropagation as i32
        } else {
            TraceContextOption::UseB3 as i32
        },
        ..Default::default()
    }
}

/// Go's `url.JoinPath` for the host-and-path strings istiod builds (no scheme).
fn join_path(host: &str, path: &str) -> String {
    let path = path.trim_start_matches('/');
    if path.is_empty() { host.to_string() } else { format!("{}/{path}", host.trim_end_matches('/')) }
}

/// Istio's `otelConfig`: the config and whether a custom sampler decides (then Envoy samples 100 %).
fn otel(
    services: &[Arc<Service>],
    proxy: &ProxyContext,
    o: &OtelTracing,
    provider: &str,
    findings: &mut Vec<Finding>,
) -> Result<(OpenTelemetryConfig, bool), String> {
    let (host, cluster) = lookup_cluster(services, &o.service, o.port)?;
    if o.otel_semantic_conventions {
        findings.push(provider_finding(
            provider,
            Severity::Unsupported,
            "serviceAttributeEnrichment OTEL_SEMANTIC_CONVENTIONS is not applied: the span service name is \
             the node's service cluster (ISTIO_CANONICAL)"
                .to_string(),
        ));
    }
    let mut config =
        OpenTelemetryConfig { service_name: proxy.service_cluster.clone(), ..Default::default() };
    if let Some(h) = &o.http {
        config.http_service = Some(HttpService {
            http_uri: Some(HttpUri {
                uri: join_path(&host, &h.path),
                timeout: h.timeout.as_ref().map(duration),
                http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(cluster.clone())),
            }),
            request_headers_to_add: headers(&h.headers, provider, findings),
            ..Default::default()
        });
    } else {
        let mut grpc = envoy_grpc(&cluster, &host);
        if let Some(g) = &o.grpc {
            grpc.timeout = g.timeout.as_ref().map(duration);
            grpc.initial_metadata = headers(&g.initial_metadata, provider, findings)
                .into_iter()
                .filter_map(|h| h.header)
                .collect();
        }
        config.grpc_service = Some(grpc);
    }
    if o.environment_detector {
        config.resource_detectors.push(TypedExtensionConfig {
            name: ENVIRONMENT_DETECTOR.to_string(),
            typed_config: Some(any(&EnvironmentResourceDetectorConfig {})),
        });
    }
    if o.dynatrace_detector {
        config.resource_detectors.push(TypedExtensionConfig {
            name: DYNATRACE_DETECTOR.to_string(),
            typed_config: Some(any(&DynatraceResourceDetectorConfig {})),
        });
    }
    let mut custom_sampler = false;
    if let Some(sampler) = &o.dynatrace_sampler {
        let http_service = match &sampler.http_service {
            None => {
                let Some(h) = &o.http else {
                    return Err("dynatrace sampler could not get http settings. considering setting the \
                                http_service field on the dynatrace sampler"
                        .to_string());
                };
                HttpService {
                    http_uri: Some(HttpUri {
                        uri: join_path(&host, "api/v2/samplingConfiguration"),
                        timeout: h.timeout.as_ref().map(duration),
                        http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(cluster.clone())),
                    }),
                    request_headers_to_add: headers(&h.headers, provider, findings),
                    ..Default::default()
                }
            }
            Some(api) => {
                let (dt_host, dt_cluster) = lookup_cluster(services, &api.service, api.port)
                    .map_err(|e| format!("could not find cluster for dynatrace sampler {e}"))?;
                HttpService {
                    http_uri: Some(HttpUri {
                        uri: join_path(&dt_host, &api.http.path),
                        timeout: api.http.timeout.as_ref().map(duration),
                        http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(dt_cluster)),
                    }),
                    request_headers_to_add: headers(&api.http.headers, provider, findings),
                    ..Default::default()
                }
            }
        };
        config.sampler = Some(TypedExtensionConfig {
            name: DYNATRACE_SAMPLER.to_string(),
            typed_config: Some(any(&DynatraceSamplerConfig {
                tenant: sampler.tenant.clone(),
                cluster_id: sampler.cluster_id,
                http_service: Some(http_service),
                root_spans_per_minute: sampler.root_spans_per_minute,
            })),
        });
        custom_sampler = true;
    }
    Ok((config, custom_sampler))
}

fn provider_finding(provider: &str, severity: Severity, message: String) -> Finding {
    Finding {
        severity,
        config: None,
        path: String::new(),
        resource: format!("tracing provider {provider}"),
        message,
    }
}

/// Istio's `buildHTTPHeaders` (overwrite or add). A header whose value istiod reads from its own
/// environment (`envName`) is left out and reported: meshpilot's generators read no environment.
fn headers(list: &[HttpHeader], provider: &str, findings: &mut Vec<Finding>) -> Vec<HeaderValueOption> {
    list.iter()
        .filter(|h| {
            if h.env_name.is_empty() {
                return true;
            }
            findings.push(provider_finding(
                provider,
                Severity::Unsupported,
                format!(
                    "header {:?} takes its value from istiod's environment variable {:?}; meshpilot does not \
                     read it and leaves the header out",
                    h.name, h.env_name
                ),
            ));
            false
        })
        .map(|h| HeaderValueOption {
            header: Some(HeaderValue { key: h.name.clone(), value: h.value.clone(), ..Default::default() }),
            append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
            ..Default::default()
        })
        .collect()
}

fn literal(tag: &str, value: &str) -> EnvoyTag {
    EnvoyTag {
        tag: tag.to_string(),
        r#type: Some(custom_tag::Type::Literal(custom_tag::Literal { value: value.to_string() })),
    }
}

/// Istio's `buildServiceTags`.
fn service_tags(proxy: &ProxyContext) -> Vec<EnvoyTag> {
    let or = |v: Option<&str>, default: &'static str| -> String {
        v.filter(|s| !s.is_empty()).unwrap_or(default).to_string()
    };
    let label = |name: &str| proxy.labels.get(name).map(String::as_str);
    vec![
        literal("istio.canonical_revision", &or(label("service.istio.io/canonical-revision"), "latest")),
        literal("istio.canonical_service", &or(label("service.istio.io/canonical-name"), "unknown")),
        literal("istio.mesh_id", &or(Some(&proxy.mesh_id), "unknown")),
        literal("istio.namespace", &or(Some(&proxy.namespace), "default")),
        literal("istio.cluster_id", &or(Some(proxy.cluster_id()), "unknown")),
    ]
}

/// Istio's `optionalPolicyTags`: the AuthorizationPolicy dry-run results the RBAC filter leaves in
/// the request's dynamic metadata.
fn dry_run_tags() -> Vec<EnvoyTag> {
    [
        ("istio.authorization.dry_run.allow_policy.name", "istio_dry_run_allow_shadow_effective_policy_id"),
        ("istio.authorization.dry_run.allow_policy.result", "istio_dry_run_allow_shadow_engine_result"),
        ("istio.authorization.dry_run.deny_policy.name", "istio_dry_run_deny_shadow_effective_policy_id"),
        ("istio.authorization.dry_run.deny_policy.result", "istio_dry_run_deny_shadow_engine_result"),
    ]
    .into_iter()
    .map(|(tag, key)| EnvoyTag {
        tag: tag.to_string(),
        r#type: Some(custom_tag::Type::Metadata(custom_tag::Metadata {
            kind: Some(MetadataKind { kind: Some(metadata_kind::Kind::Request(metadata_kind::Request {})) }),
            metadata_key: Some(MetadataKey {
                key: RBAC_FILTER.to_string(),
                path: vec![PathSegment { segment: Some(path_segment::Segment::Key(key.to_string())) }],
            }),
            default_value: String::new(),
        })),
    })
    .collect()
}

/// Istio's `configureCustomTags`: `spec` is the Telemetry's (`None`: the mesh config fallback).
fn custom_tags(
    spec: Option<&TracingSpec>,
    proxy_tracing: Option<&ProxyTracing>,
    proxy: &ProxyContext,
) -> Vec<EnvoyTag> {
    let istio_tags = match spec {
        None => proxy_tracing.and_then(|t| t.enable_istio_tags).unwrap_or(true),
        Some(s) => s.enable_istio_tags,
    };
    let mut tags = Vec::new();
    if istio_tags {
        tags.extend(service_tags(proxy));
        tags.extend(dry_run_tags());
    }
    match spec.filter(|s| !s.custom_tags.is_empty()) {
        Some(s) => tags.extend(s.custom_tags.iter().filter_map(|(name, tag)| envoy_tag(name, tag, true))),
        None => {
            if let Some(t) = proxy_tracing {
                tags.extend(t.custom_tags.iter().filter_map(|(name, tag)| envoy_tag(name, tag, false)));
            }
        }
    }
    tags.sort_by(|a, b| a.tag.cmp(&b.tag));
    tags
}

/// One custom tag as Envoy's; `formatter` only from Telemetry (the proxy config has none).
fn envoy_tag(name: &str, tag: &CustomTag, formatter: bool) -> Option<EnvoyTag> {
    let r#type = if let Some(l) = &tag.literal {
        custom_tag::Type::Literal(custom_tag::Literal { value: l.value.clone() })
    } else if let Some(e) = &tag.environment {
        custom_tag::Type::Environment(custom_tag::Environment {
            name: e.name.clone(),
            default_value: e.default_value.clone(),
        })
    } else if let Some(h) = &tag.header {
        custom_tag::Type::RequestHeader(custom_tag::Header {
            name: h.name.clone(),
            default_value: h.default_value.clone(),
        })
    } else if let Some(f) = tag.formatter.as_ref().filter(|_| formatter) {
        custom_tag::Type::Value(f.value.clone())
    } else {
        return None;
    };
    Some(EnvoyTag { tag: name.to_string(), r#type: Some(r#type) })
}

#[cfg(test)]
mod tests;
