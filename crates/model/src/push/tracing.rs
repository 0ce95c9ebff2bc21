//! The Telemetry API's tracing as istiod resolves it (`pilot/pkg/model/telemetry.go`, `Tracing`), and
//! the legacy tracing settings of the proxy config (`ProxyConfig.tracing`) istiod falls back to
//! (`pilot/pkg/networking/core/tracing.go`).
//!
//! Resolution for one proxy ([`tracing`]):
//! 1. No Telemetry `tracing` entry applies and the mesh names no `defaultProviders.tracing`: `None`,
//!    the mesh config decides (`enableTracing`: tracing with the proxy config's sampling, no provider
//!    in the connection manager).
//! 2. Otherwise both directions start from the first mesh default provider, request-id sampling and
//!    Istio tags on; then every `tracing` entry of the applicable Telemetries (root namespace,
//!    namespace, workload: [`super::telemetry::applicable_telemetries`]), in order, overrides for the
//!    directions its `match.mode` selects: the first provider named (looked up in mesh
//!    `extensionProviders`, case-insensitively; an unknown name leaves no provider),
//!    `disableSpanReporting`, `customTags` (the whole map, a shallow merge), `randomSamplingPercentage`,
//!    `useRequestIdForTraceSampling`, `enableIstioTags`, `disableContextPropagation`.
//! 3. A direction left without a provider is disabled.

use std::{collections::BTreeMap, sync::Arc};

use api::{
    Spec,
    telemetry::{Telemetry, WorkloadMode},
};
use serde_json::Value;

pub use api::telemetry::tracing::CustomTag;

use super::{
    extension_provider::{ExtensionProvider, ProviderKind, find_provider},
    telemetry::Direction,
};
use crate::{Config, Finding, Severity};

/// Istio's default of `PILOT_TRACE_SAMPLING`: the percentage of requests traced when neither a
/// Telemetry nor the proxy config sets one.
pub const DEFAULT_TRACE_SAMPLING: f64 = 1.0;

/// The tracing of one direction (Istio's `TracingSpec`).
#[derive(Clone, Debug, PartialEq)]
pub struct TracingSpec {
    /// The tracer (`None`: the direction is disabled).
    pub provider: Option<ExtensionProvider>,
    /// No tracing configured for this direction (`disableSpanReporting`, or no provider).
    pub disabled: bool,
    /// `randomSamplingPercentage` (`None`: the proxy config's sampling, else `PILOT_TRACE_SAMPLING`).
    pub random_sampling_percentage: Option<f64>,
    /// `customTags` of the last entry that sets any, by tag name.
    pub custom_tags: BTreeMap<String, CustomTag>,
    /// `useRequestIdForTraceSampling` (default `true`).
    pub use_request_id_for_trace_sampling: bool,
    /// `enableIstioTags` (default `true`): Istio's service tags and the dry-run policy tags.
    pub enable_istio_tags: bool,
    /// `disableContextPropagation` (default `false`).
    pub disable_context_propagation: bool,
}

impl Default for TracingSpec {
    fn default() -> Self {
        TracingSpec {
            provider: None,
            disabled: false,
            random_sampling_percentage: None,
            custom_tags: BTreeMap::new(),
            use_request_id_for_trace_sampling: true,
            enable_istio_tags: true,
            disable_context_propagation: false,
        }
    }
}

/// The tracing of both directions of a proxy (Istio's `TracingConfig`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TracingConfig {
    /// Sidecar outbound and gateway connection managers.
    pub client: TracingSpec,
    /// Sidecar inbound connection managers.
    pub server: TracingSpec,
}

impl TracingConfig {
    /// The spec of `direction`.
    pub fn spec(&self, direction: Direction) -> &TracingSpec {
        match direction {
            Direction::Client => &self.client,
            Direction::Server => &self.server,
        }
    }
}

/// `true` for the provider kinds that are tracers.
pub fn is_tracing_provider(kind: &ProviderKind) -> bool {
    matches!(
        kind,
        ProviderKind::Zipkin(_)
            | ProviderKind::Datadog(_)
            | ProviderKind::Skywalking(_)
            | ProviderKind::Lightstep(_)
            | ProviderKind::Opentelemetry(_)
    )
}

fn telemetry(config: &Config) -> Option<&Telemetry> {
    match &config.spec {
        Spec::Telemetry(t) => Some(t),
        _ => None,
    }
}

/// Istio's `fetchProvider` for tracing: mesh `extensionProviders` only (compared
/// case-insensitively); the built-in `envoy` logger is found too and later refused as no tracer.
fn fetch(providers: &[ExtensionProvider], name: &str) -> Option<ExtensionProvider> {
    find_provider(providers, name)
}

/// The tracing of a proxy from the Telemetries that apply to it (`applicable`, in Istio's order),
/// the mesh `defaultProviders.tracing` and `extensionProviders`; `None` when neither a Telemetry
/// `tracing` entry nor a default provider applies (the mesh config decides). Rules in the module
/// documentation.
pub fn tracing(
    applicable: &[Arc<Config>],
    default_providers: &[String],
    providers: &[ExtensionProvider],
) -> Option<TracingConfig> {
    let entries: Vec<&api::telemetry::Tracing> =
        applicable.iter().filter_map(|c| telemetry(c)).flat_map(|t| t.tracing.iter()).collect();
    if entries.is_empty() && default_providers.is_empty() {
        return None;
    }
    let mut config = TracingConfig::default();
    if let Some(first) = default_providers.first() {
        let fetched = fetch(providers, first);
        config.client.provider = fetched.clone();
        config.server.provider = fetched;
    }
    for entry in entries {
        let mode = entry.r#match.as_ref().map_or(WorkloadMode::ClientAndServer as i32, |m| m.mode);
        let mut specs: Vec<&mut TracingSpec> = if mode == WorkloadMode::Client as i32 {
            vec![&mut config.client]
        } else if mode == WorkloadMode::Server as i32 {
            vec![&mut config.server]
        } else {
            vec![&mut config.client, &mut config.server]
        };
        for spec in specs.iter_mut() {
            if let Some(first) = entry.providers.first() {
                spec.provider = fetch(providers, &first.name);
            }
            if let Some(disabled) = entry.disable_span_reporting {
                spec.disabled = disabled;
            }
            if !entry.custom_tags.is_empty() {
                spec.custom_tags = entry.custom_tags.clone();
            }
            if let Some(p) = entry.random_sampling_percentage {
                spec.random_sampling_percentage = Some(p);
            }
            if let Some(v) = entry.use_request_id_for_trace_sampling {
                spec.use_request_id_for_trace_sampling = v;
            }
            if let Some(v) = entry.enable_istio_tags {
                spec.enable_istio_tags = v;
            }
            if let Some(v) = entry.disable_context_propagation {
                spec.disable_context_propagation = v;
            }
        }
    }
    for spec in [&mut config.client, &mut config.server] {
        if spec.provider.is_none() {
            spec.disabled = true;
        }
    }
    Some(config)
}

/// What configstatusz reports about one Telemetry's `tracing` (`spec.tracing[i].providers[j].name`):
/// a provider the mesh does not define (the direction gets no tracer), one that is not a tracer (no
/// tracer either: istiod refuses it when building the connection manager), and providers after the
/// first (istiod uses only the first).
pub fn tracing_findings(config: &Config, providers: &[ExtensionProvider]) -> Vec<Finding> {
    let Some(t) = telemetry(config) else { return Vec::new() };
    let mut out = Vec::new();
    for (i, entry) in t.tracing.iter().enumerate() {
        for (j, p) in entry.providers.iter().enumerate() {
            let path = format!("spec.tracing[{i}].providers[{j}].name");
            let message = if j > 0 {
                format!("only the first tracing provider is used; {:?} is ignored", p.name)
            } else {
                match fetch(providers, &p.name) {
                    None => format!(
                        "tracing provider {:?} is not defined in mesh config extensionProviders; no tracing \
                         is configured for the directions this entry selects",
                        p.name
                    ),
                    Some(found) if !is_tracing_provider(&found.kind) => format!(
                        "provider {:?} is not a tracing provider (zipkin, opentelemetry, datadog, skywalking, \
                         lightstep); no tracing is configured for the directions this entry selects",
                        p.name
                    ),
                    Some(_) => continue,
                }
            };
            out.push(Finding {
                severity: Severity::Dropped,
                config: Some(config.key()),
                path,
                resource: String::new(),
                message,
            });
        }
    }
    out
}

/// The legacy tracing settings of a proxy config (`ProxyConfig.tracing`: mesh `defaultConfig.tracing`
/// or the proxy's own `PROXY_CONFIG` node metadata). The tracer address (`zipkin.address`, …) is
/// pilot-agent's bootstrap business, not istiod's, and is not read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxyTracing {
    /// `sampling`: percentage of requests traced (0: unset).
    pub sampling: f64,
    /// `customTags` (literal, environment, header).
    pub custom_tags: BTreeMap<String, CustomTag>,
    /// `maxPathTagLength` (0: unset).
    pub max_path_tag_length: u32,
    /// `enableIstioTags` (`None`: `true`).
    pub enable_istio_tags: Option<bool>,
}

/// Reads `ProxyConfig.tracing` (protojson field names; snake_case accepted).
///
/// # Errors
/// A message naming the field path under `path` (e.g. `defaultConfig.tracing.sampling: …`).
pub fn parse_proxy_tracing(value: &Value, path: &str) -> Result<ProxyTracing, String> {
    let mut out = ProxyTracing::default();
    let Some(map) = value.as_object() else {
        return Err(format!("{path}: expected an object, found {value}"));
    };
    for (key, v) in map.iter().filter(|(_, v)| !v.is_null()) {
        let p = format!("{path}.{key}");
        match api::de::lower_camel(key).as_str() {
            "sampling" => {
                out.sampling = v
                    .as_f64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                    .ok_or_else(|| format!("{p}: expected a number, found {v}"))?;
            }
            "maxPathTagLength" => {
                out.max_path_tag_length = v
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| format!("{p}: expected an unsigned 32-bit integer, found {v}"))?;
            }
            "enableIstioTags" => {
                out.enable_istio_tags =
                    Some(v.as_bool().ok_or_else(|| format!("{p}: expected true or false, found {v}"))?);
            }
            "customTags" => {
                let Some(tags) = v.as_object() else {
                    return Err(format!("{p}: expected a map of tag names to tags, found {v}"));
                };
                for (name, tag) in tags {
                    let tag: CustomTag =
                        serde_json::from_value(tag.clone()).map_err(|e| format!("{p}.{name}: {e}"))?;
                    out.custom_tags.insert(name.clone(), tag);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Istio's `proxyConfigSamplingValue`: the proxy config's `tracing.sampling` when set (a value over
/// 100 becomes 1.0), else `pilot_default` (`PILOT_TRACE_SAMPLING`).
pub fn proxy_sampling(proxy_tracing: Option<&ProxyTracing>, pilot_default: f64) -> f64 {
    match proxy_tracing.map(|t| t.sampling) {
        Some(s) if s != 0.0 && s > 100.0 => 1.0,
        Some(s) if s != 0.0 => s,
        _ => pilot_default,
    }
}

#[cfg(test)]
mod tests;
