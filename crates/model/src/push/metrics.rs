//! The Telemetry API's `metrics` as istiod resolves it (`pilot/pkg/model/telemetry.go`,
//! `mergeMetrics` and `telemetryFilters`): which metrics providers apply to a proxy and, per provider
//! and traffic direction, which of Istio's standard (or custom) metrics are dropped and which tags are
//! removed or set.
//!
//! Resolution for one proxy ([`metrics`]):
//! 1. The `metrics` entries of the Telemetries that apply to the proxy
//!    ([`super::telemetry::applicable_telemetries`]: root namespace, namespace, workload), in order.
//!    None at all: the mesh `defaultProviders.metrics` apply with no overrides.
//! 2. The providers in scope are those the last entry naming any names, else the mesh default; an
//!    entry without providers stands for its parent's (the previous entry's, the mesh default first).
//! 3. For every in-scope provider, each override of each entry, in order: `match` selects metrics
//!    (`metric`, `customMetric`, or every standard metric when neither or `ALL_METRICS`) and
//!    directions (`mode`, default both); `disabled` sets the metrics' drop flag; `tagOverrides` merge
//!    by tag name (a later override of a tag replaces it). An override matching every metric with
//!    `disabled: true` turns the provider off for its directions (no filter at all) until a later
//!    override for that direction turns something back on. The last `reportingInterval` set wins.
//! 4. Providers are looked up in mesh `extensionProviders` and Istio's built-in `prometheus`
//!    (case-insensitively, as `fetchProvider`). Only `prometheus` providers produce Istio's stats
//!    filter (istiod builds nothing for the others); unknown names are left out and reported
//!    ([`metrics_findings`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use api::{
    Spec,
    telemetry::{
        MetricSelector, Metrics, Telemetry, WorkloadMode,
        metric_selector::IstioMetric,
        metrics_overrides::{TagOverride, tag_override::Operation},
    },
    wkt::Duration,
};

use super::extension_provider::{ExtensionProvider, ProviderKind, find_provider};
use crate::{Config, ConfigKey, Finding, Severity};

/// The name of Istio's built-in metrics provider (mesh config default `extensionProviders` entry
/// `{name: prometheus, prometheus: {}}`; a mesh entry of the same name replaces it).
pub const BUILTIN_PROMETHEUS_PROVIDER: &str = "prometheus";

/// Istio's standard metrics by their `IstioMetric` names, sorted (istiod's `allMetrics`: every value
/// but `ALL_METRICS`).
pub const ALL_METRICS: [&str; 10] = [
    "GRPC_REQUEST_MESSAGES",
    "GRPC_RESPONSE_MESSAGES",
    "REQUEST_COUNT",
    "REQUEST_DURATION",
    "REQUEST_SIZE",
    "RESPONSE_SIZE",
    "TCP_CLOSED_CONNECTIONS",
    "TCP_OPENED_CONNECTIONS",
    "TCP_RECEIVED_BYTES",
    "TCP_SENT_BYTES",
];

/// One tag change of a metric (Istio's `tagOverride`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagChange {
    /// The tag (label) name.
    pub name: String,
    /// `REMOVE`: the tag is left out.
    pub remove: bool,
    /// `UPSERT`: the CEL expression of the tag's value (empty when removed).
    pub value: String,
}

/// The merged override of one metric in one direction (Istio's `metricsOverride`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricOverride {
    /// The metric: a standard metric's `IstioMetric` name (`REQUEST_COUNT`) or a custom metric name.
    pub name: String,
    /// The metric is dropped.
    pub disabled: bool,
    /// Tag changes, sorted by tag name.
    pub tags: Vec<TagChange>,
}

/// The metrics of one direction (Istio's `metricConfig`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirectionMetrics {
    /// Every metric is off for this direction: no stats filter.
    pub disabled: bool,
    /// Per-metric overrides, sorted by metric name.
    pub overrides: Vec<MetricOverride>,
}

/// The merged metrics setting of one provider (Istio's `metricsConfig`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsConfig {
    /// Sidecar outbound and gateway listeners.
    pub client: DirectionMetrics,
    /// Sidecar inbound listeners.
    pub server: DirectionMetrics,
    /// `reportingInterval` (`None`: the proxy's default, 5 s for TCP).
    pub reporting_interval: Option<Duration>,
}

impl MetricsConfig {
    /// The setting of `direction`.
    pub fn direction(&self, direction: super::telemetry::Direction) -> &DirectionMetrics {
        match direction {
            super::telemetry::Direction::Client => &self.client,
            super::telemetry::Direction::Server => &self.server,
        }
    }
}

/// One metrics provider that applies to a proxy, with its merged setting.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderMetrics {
    /// The provider (from mesh `extensionProviders` or the built-in `prometheus`).
    pub provider: ExtensionProvider,
    /// Its setting.
    pub config: MetricsConfig,
}

#[derive(Clone, Debug, Default)]
struct Override {
    disabled: Option<bool>,
    tags: BTreeMap<String, TagOverride>,
}

/// The directions a selector's `mode` stands for (istiod's `getModes`).
fn modes(mode: i32) -> &'static [WorkloadMode] {
    if mode == WorkloadMode::Client as i32 {
        &[WorkloadMode::Client]
    } else if mode == WorkloadMode::Server as i32 {
        &[WorkloadMode::Server]
    } else {
        &[WorkloadMode::Client, WorkloadMode::Server]
    }
}

/// Whether the selector takes every standard metric (istiod's `isAllMetrics`).
fn is_all_metrics(selector: Option<&MetricSelector>) -> bool {
    match selector {
        Some(MetricSelector { custom_metric: Some(_), .. }) => false,
        Some(MetricSelector { metric: Some(m), .. }) => *m == IstioMetric::AllMetrics as i32,
        _ => true,
    }
}

/// The metric names a selector takes (istiod's `getMatches`).
fn matches(selector: Option<&MetricSelector>) -> Vec<String> {
    match selector {
        Some(MetricSelector { custom_metric: Some(c), .. }) => vec![c.clone()],
        Some(MetricSelector { metric: Some(m), .. }) if *m != IstioMetric::AllMetrics as i32 => {
            match IstioMetric::try_from(*m) {
                Ok(metric) => vec![metric.as_str_name().to_string()],
                // An unknown enum value: istiod prints the number.
                Err(_) => vec![m.to_string()],
            }
        }
        _ => ALL_METRICS.iter().map(|s| s.to_string()).collect(),
    }
}

fn provider_names(m: &Metrics) -> Vec<String> {
    m.providers.iter().map(|p| p.name.clone()).collect()
}

/// Istio's `mergeMetrics`: the setting per provider name of `entries` (the `metrics` entries of the
/// applicable Telemetries, root namespace first) with `defaults` the mesh `defaultProviders.metrics`.
/// Rules in the module documentation.
pub fn merge_metrics(entries: &[&Metrics], defaults: &[String]) -> BTreeMap<String, MetricsConfig> {
    // provider -> direction -> metric -> override
    let mut providers: BTreeMap<String, BTreeMap<WorkloadMode, BTreeMap<String, Override>>> = BTreeMap::new();
    if entries.is_empty() {
        for name in defaults {
            providers.insert(name.clone(), BTreeMap::new());
        }
    }
    let mut in_scope: Vec<String> = defaults.to_vec();
    for m in entries {
        let names = provider_names(m);
        if !names.is_empty() {
            in_scope = names;
        }
    }
    let in_scope: BTreeSet<String> = in_scope.into_iter().collect();
    let mut parent: Vec<String> = defaults.to_vec();
    let mut all_disabled: BTreeSet<(String, WorkloadMode)> = BTreeSet::new();
    let mut intervals: BTreeMap<String, Duration> = BTreeMap::new();
    for m in entries {
        let mut names = provider_names(m);
        if names.is_empty() {
            names = parent.clone();
        }
        parent = names.clone();
        for provider in names.iter().filter(|n| in_scope.contains(*n)) {
            if let Some(interval) = &m.reporting_interval {
                intervals.insert(provider.clone(), *interval);
            }
            let by_mode = providers.entry(provider.clone()).or_insert_with(|| {
                [(WorkloadMode::Client, BTreeMap::new()), (WorkloadMode::Server, BTreeMap::new())]
                    .into_iter()
                    .collect()
            });
            for o in &m.overrides {
                let selector = o.r#match.as_ref();
                let mode = selector.map_or(WorkloadMode::ClientAndServer as i32, |s| s.mode);
                if is_all_metrics(selector) && o.disabled == Some(true) {
                    for d in modes(mode) {
                        all_disabled.insert((provider.clone(), *d));
                    }
                    continue;
                }
                let metric_names = matches(selector);
                for d in modes(mode) {
                    all_disabled.remove(&(provider.clone(), *d));
                    let metrics = by_mode.entry(*d).or_default();
                    for name in &metric_names {
                        let entry = metrics.entry(name.clone()).or_default();
                        if o.disabled.is_some() {
                            entry.disabled = o.disabled;
                        }
                        for (tag, change) in &o.tag_overrides {
                            entry.tags.insert(tag.clone(), change.clone());
                        }
                    }
                }
            }
        }
    }
    providers
        .into_iter()
        .map(|(provider, by_mode)| {
            let mut config =
                MetricsConfig { reporting_interval: intervals.get(&provider).copied(), ..Default::default() };
            for (mode, metrics) in by_mode {
                let out = if mode == WorkloadMode::Client { &mut config.client } else { &mut config.server };
                if all_disabled.contains(&(provider.clone(), mode)) {
                    out.disabled = true;
                    continue;
                }
                out.overrides = metrics
                    .into_iter()
                    .map(|(name, o)| MetricOverride {
                        name,
                        disabled: o.disabled.unwrap_or(false),
                        tags: o
                            .tags
                            .into_iter()
                            .map(|(name, t)| {
                                let remove = t.operation == Operation::Remove as i32;
                                TagChange {
                                    name,
                                    remove,
                                    value: if remove { String::new() } else { t.value },
                                }
                            })
                            .collect(),
                    })
                    .collect();
            }
            (provider, config)
        })
        .collect()
}

/// The metrics provider named `name`: mesh `extensionProviders` (case-insensitively), else Istio's
/// built-in `prometheus` ([`BUILTIN_PROMETHEUS_PROVIDER`]).
pub fn find_metrics_provider(providers: &[ExtensionProvider], name: &str) -> Option<ExtensionProvider> {
    let found = find_provider(providers, name);
    if found.is_some() {
        return found;
    }
    name.eq_ignore_ascii_case(BUILTIN_PROMETHEUS_PROVIDER).then(|| ExtensionProvider {
        name: BUILTIN_PROMETHEUS_PROVIDER.to_string(),
        kind: ProviderKind::Other("prometheus".to_string()),
    })
}

/// `true` for a Prometheus provider (the only metrics provider istiod builds a filter for).
pub fn is_prometheus(kind: &ProviderKind) -> bool {
    matches!(kind, ProviderKind::Other(k) if k == "prometheus")
}

/// `true` for the provider kinds that are metrics providers (`prometheus`, `stackdriver`).
pub fn is_metrics_provider(kind: &ProviderKind) -> bool {
    matches!(kind, ProviderKind::Other(k) if k == "prometheus" || k == "stackdriver")
}

fn telemetry(config: &Config) -> Option<&Telemetry> {
    match &config.spec {
        Spec::Telemetry(t) => Some(t),
        _ => None,
    }
}

/// The metrics providers of a proxy with their merged settings, from the Telemetries that apply to
/// it (`applicable`, Istio's order), the mesh `defaultProviders.metrics` (`defaults`) and
/// `extensionProviders`; sorted by provider name. Only providers found and that are Prometheus
/// providers are returned (the ones a stats filter is built for).
pub fn metrics(
    applicable: &[Arc<Config>],
    defaults: &[String],
    providers: &[ExtensionProvider],
) -> Vec<ProviderMetrics> {
    let entries: Vec<&Metrics> =
        applicable.iter().filter_map(|c| telemetry(c)).flat_map(|t| t.metrics.iter()).collect();
    if entries.is_empty() && defaults.is_empty() {
        return Vec::new();
    }
    merge_metrics(&entries, defaults)
        .into_iter()
        .filter_map(|(name, config)| {
            let provider = find_metrics_provider(providers, &name)?;
            is_prometheus(&provider.kind).then_some(ProviderMetrics { provider, config })
        })
        .collect()
}

/// The keys of the Telemetries among `applicable` that have `metrics` entries: proxies with equal
/// keys (and kind) get the same stats filters.
pub fn metrics_key(applicable: &[Arc<Config>]) -> Vec<ConfigKey> {
    applicable
        .iter()
        .filter(|c| telemetry(c).is_some_and(|t| !t.metrics.is_empty()))
        .map(|c| c.key())
        .collect()
}

/// What configstatusz reports about one Telemetry's `metrics`: each provider that is neither in mesh
/// `extensionProviders` nor the built-in `prometheus` (`spec.metrics[i].providers[j].name`,
/// `Dropped`), each provider that is no metrics provider (`Dropped`), and each `stackdriver` provider
/// (`Unsupported`: istiod builds no filter for it either).
pub fn metrics_findings(config: &Config, providers: &[ExtensionProvider]) -> Vec<Finding> {
    let Some(t) = telemetry(config) else { return Vec::new() };
    let mut out = Vec::new();
    for (i, entry) in t.metrics.iter().enumerate() {
        for (j, p) in entry.providers.iter().enumerate() {
            let path = format!("spec.metrics[{i}].providers[{j}].name");
            let (severity, message) = match find_metrics_provider(providers, &p.name) {
                None => (
                    Severity::Dropped,
                    format!(
                        "metrics provider {:?} is not defined in mesh config extensionProviders (nor the \
                         built-in \"prometheus\"); no metrics are configured for it",
                        p.name
                    ),
                ),
                Some(found) if !is_metrics_provider(&found.kind) => (
                    Severity::Dropped,
                    format!(
                        "provider {:?} is not a metrics provider (prometheus); ignored for metrics",
                        p.name
                    ),
                ),
                Some(found) if !is_prometheus(&found.kind) => (
                    Severity::Unsupported,
                    format!(
                        "metrics provider {:?} is not prometheus: no stats filter is configured for it (as istiod)",
                        p.name
                    ),
                ),
                Some(_) => continue,
            };
            out.push(Finding {
                severity,
                config: Some(config.key()),
                path,
                resource: String::new(),
                message,
            });
        }
    }
    out
}

/// The one note configstatusz carries when metrics are configured (mesh `defaultProviders.metrics`
/// or a Telemetry `metrics` entry): Istio's stats and metadata exchange filters go only to proxies
/// that report istio-proxy's extensions in `node.extensions`; upstream Envoy gets neither (and no
/// Istio metrics), instead of a NACK. A `Warning` without a config object: nothing is wrong with the
/// input.
pub fn extension_note() -> Finding {
    Finding {
        severity: Severity::Warning,
        config: None,
        path: String::new(),
        resource: "istio.stats".to_string(),
        message: "Istio metrics are configured only on proxies whose node.extensions list istio-proxy's \
                  filters (stats.PluginConfig, io.istio.http.peer_metadata.Config, \
                  envoy.tcp.metadataexchange.config.MetadataExchange); upstream Envoy proxies get no \
                  istio.stats / istio.metadata_exchange filters and report no istio_* metrics"
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use api::telemetry::{MetricsOverrides, ProviderRef};

    use super::*;

    fn tag(op: Operation, value: &str) -> TagOverride {
        TagOverride { operation: op as i32, value: value.to_string() }
    }

    fn sel(metric: Option<IstioMetric>, custom: Option<&str>, mode: WorkloadMode) -> Option<MetricSelector> {
        Some(MetricSelector {
            metric: metric.map(|m| m as i32),
            custom_metric: custom.map(String::from),
            mode: mode as i32,
        })
    }

    fn entry(providers: &[&str], overrides: Vec<MetricsOverrides>, interval: Option<i64>) -> Metrics {
        Metrics {
            providers: providers.iter().map(|p| ProviderRef { name: p.to_string() }).collect(),
            overrides,
            reporting_interval: interval.map(|s| Duration { seconds: s, nanos: 0 }),
        }
    }

    fn over(
        r#match: Option<MetricSelector>,
        disabled: Option<bool>,
        tags: &[(&str, TagOverride)],
    ) -> MetricsOverrides {
        MetricsOverrides {
            r#match,
            disabled,
            tag_overrides: tags.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<BTreeMap<_, _>>(),
        }
    }

    fn prom() -> Vec<String> {
        vec!["prometheus".to_string()]
    }

    #[test]
    fn without_telemetry_the_default_providers_get_a_plain_filter() {
        let merged = merge_metrics(&[], &prom());
        assert_eq!(merged.len(), 1);
        assert_eq!(merged["prometheus"], MetricsConfig::default());
        assert!(merge_metrics(&[], &[]).is_empty());
    }

    #[test]
    fn an_override_applies_to_the_selected_metric_and_direction() {
        let e = entry(
            &[],
            vec![over(
                sel(Some(IstioMetric::RequestCount), None, WorkloadMode::Client),
                None,
                &[
                    ("request_host", tag(Operation::Upsert, "request.host")),
                    ("source_app", tag(Operation::Remove, "")),
                ],
            )],
            None,
        );
        let merged = merge_metrics(&[&e], &prom());
        let c = &merged["prometheus"];
        assert!(c.server.overrides.is_empty());
        assert_eq!(
            c.client.overrides,
            [MetricOverride {
                name: "REQUEST_COUNT".into(),
                disabled: false,
                tags: vec![
                    TagChange { name: "request_host".into(), remove: false, value: "request.host".into() },
                    TagChange { name: "source_app".into(), remove: true, value: String::new() },
                ],
            }]
        );
    }

    #[test]
    fn all_metrics_flattens_into_every_standard_metric() {
        let e = entry(&[], vec![over(None, None, &[("x", tag(Operation::Upsert, "'y'"))])], None);
        let merged = merge_metrics(&[&e], &prom());
        let names: Vec<&str> =
            merged["prometheus"].server.overrides.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ALL_METRICS);
    }

    #[test]
    fn disabling_all_metrics_drops_the_filter_until_re_enabled_below() {
        let root = entry(&[], vec![over(None, Some(true), &[])], None);
        let merged = merge_metrics(&[&root], &prom());
        assert!(merged["prometheus"].client.disabled && merged["prometheus"].server.disabled);
        let ns = entry(
            &[],
            vec![over(sel(Some(IstioMetric::RequestCount), None, WorkloadMode::Server), Some(false), &[])],
            None,
        );
        let merged = merge_metrics(&[&root, &ns], &prom());
        assert!(merged["prometheus"].client.disabled, "the client side stays off");
        assert!(!merged["prometheus"].server.disabled, "a server override turns the server side back on");
        assert_eq!(merged["prometheus"].server.overrides[0].name, "REQUEST_COUNT");
    }

    #[test]
    fn later_levels_override_tags_and_disabled_and_the_last_interval_wins() {
        let root = entry(
            &["prometheus"],
            vec![over(
                sel(None, Some("my_metric"), WorkloadMode::ClientAndServer),
                Some(true),
                &[("a", tag(Operation::Upsert, "1"))],
            )],
            Some(10),
        );
        let workload = entry(
            &[],
            vec![over(
                sel(None, Some("my_metric"), WorkloadMode::ClientAndServer),
                None,
                &[("a", tag(Operation::Remove, "")), ("b", tag(Operation::Upsert, "2"))],
            )],
            Some(30),
        );
        let merged = merge_metrics(&[&root, &workload], &[]);
        let o = &merged["prometheus"].client.overrides[0];
        assert!(o.disabled, "disabled is kept when a later override leaves it unset");
        assert_eq!(o.tags.len(), 2);
        assert!(o.tags[0].remove);
        assert_eq!(merged["prometheus"].reporting_interval, Some(Duration { seconds: 30, nanos: 0 }));
    }

    #[test]
    fn the_most_specific_level_naming_providers_decides_the_scope() {
        let root = entry(&["prometheus"], vec![], None);
        let workload = entry(&["other"], vec![], None);
        let merged = merge_metrics(&[&root, &workload], &[]);
        assert_eq!(merged.keys().collect::<Vec<_>>(), ["other"]);
    }

    fn telemetry_config(metrics: Vec<Metrics>) -> Arc<Config> {
        Arc::new(Config {
            meta: crate::ConfigMeta {
                namespace: "istio-system".into(),
                name: "mesh".into(),
                ..Default::default()
            },
            spec: Spec::Telemetry(Box::new(Telemetry { metrics, ..Default::default() })),
            status: None,
        })
    }

    #[test]
    fn only_prometheus_providers_get_filters_and_unknown_ones_are_reported() {
        let providers = super::super::extension_provider::parse_extension_providers(&serde_json::json!([
            {"name": "sd", "stackdriver": {}},
            {"name": "log", "envoyFileAccessLog": {}},
        ]))
        .unwrap();
        let t = telemetry_config(vec![entry(&["prometheus", "sd", "log", "missing"], vec![], None)]);
        let got = metrics(std::slice::from_ref(&t), &[], &providers);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].provider.name, "prometheus");
        let findings = metrics_findings(&t, &providers);
        let got: Vec<(&str, Severity)> = findings.iter().map(|f| (f.path.as_str(), f.severity)).collect();
        assert_eq!(
            got,
            [
                ("spec.metrics[0].providers[1].name", Severity::Unsupported),
                ("spec.metrics[0].providers[2].name", Severity::Dropped),
                ("spec.metrics[0].providers[3].name", Severity::Dropped),
            ]
        );
        assert!(findings[2].message.contains("\"missing\" is not defined"), "{}", findings[2].message);
    }

    #[test]
    fn a_mesh_provider_named_prometheus_replaces_the_builtin() {
        let providers = super::super::extension_provider::parse_extension_providers(&serde_json::json!([
            {"name": "prometheus", "envoyFileAccessLog": {}},
        ]))
        .unwrap();
        assert!(metrics(&[], &prom(), &providers).is_empty(), "not a Prometheus provider any more");
        assert_eq!(metrics(&[], &prom(), &[]).len(), 1);
    }
}
