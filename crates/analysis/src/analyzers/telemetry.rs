//! Istio's `telemetry` analyzers (`pkg/config/analysis/analyzers/telemetry`).
//!
//! * [`ProviderAnalyzer`] (`telemetry.ProviderAnalyzer`): when the mesh config has no
//!   `defaultProviders.accessLogging`, every Telemetry `accessLogging` entry that is not
//!   `disabled: true` and names no provider gets IST0157 InvalidTelemetryProvider (name, namespace).
//! * [`LightstepAnalyzer`] (`telemetry.LightstepAnalyzer`): a Telemetry tracing provider that names a
//!   mesh `extensionProviders` entry of type `lightstep` gets IST0002 Deprecated.
//! * [`SelectorAnalyzer`] (`telemetry.SelectorAnalyzer`): a Telemetry whose selector has `matchLabels`
//!   that no Pod of its namespace carries gets IST0101 ReferencedResourceNotFound (`selector`, the
//!   labels as `k=v,…`); every Telemetry selecting a pod that another Telemetry also selects gets
//!   IST0159 ConflictingTelemetryWorkloadSelectors (names sorted, namespace, pod).
//! * [`DefaultSelectorAnalyzer`] (`telemetry.DefaultSelectorAnalyzer`): in a namespace with more
//!   than one Telemetry without `selector`, each of them gets IST0160
//!   MultipleTelemetriesWithoutWorkloadSelectors (names sorted, namespace).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::workload::message_at_leaf;
use crate::{
    Analyzer, Context, Message, msg,
    resource::{IstioResource, Resource, kinds},
};

fn telemetries<'a>(
    ctx: &Context<'a>,
) -> impl Iterator<Item = (&'a IstioResource, &'a api::telemetry::Telemetry)> + 'a {
    ctx.resources().istio(api::Kind::Telemetry).filter_map(|c| match c.spec() {
        api::Spec::Telemetry(t) => Some((c, &**t)),
        _ => None,
    })
}

/// `telemetry.ProviderAnalyzer`: access logging without providers and no mesh default.
#[derive(Debug, Default)]
pub struct ProviderAnalyzer;

impl Analyzer for ProviderAnalyzer {
    fn name(&self) -> &str {
        "telemetry.ProviderAnalyzer"
    }

    fn description(&self) -> &str {
        "Validates that providers in telemetry resource is valid"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::TELEMETRY, kinds::MESH_CONFIG]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let defaults =
            ctx.mesh.get("defaultProviders").and_then(|d| d.get("accessLogging")).and_then(Value::as_array);
        if defaults.is_some_and(|d| !d.is_empty()) {
            return;
        }
        for (config, telemetry) in telemetries(ctx) {
            for logging in &telemetry.access_logging {
                if logging.disabled == Some(true) {
                    continue;
                }
                if logging.providers.is_empty() {
                    out.push(config.message(
                        &msg::INVALID_TELEMETRY_PROVIDER,
                        &[config.name().into(), config.namespace().into()],
                    ));
                }
            }
        }
    }
}

/// `telemetry.LightstepAnalyzer`: tracing through the deprecated Lightstep provider.
#[derive(Debug, Default)]
pub struct LightstepAnalyzer;

impl Analyzer for LightstepAnalyzer {
    fn name(&self) -> &str {
        "telemetry.LightstepAnalyzer"
    }

    fn description(&self) -> &str {
        "Validates that lightstep provider is still used"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::TELEMETRY, kinds::MESH_CONFIG]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let lightstep: BTreeSet<&str> = match ctx.mesh.get("extensionProviders") {
            Some(Value::Array(providers)) => providers
                .iter()
                .filter(|p| p.get("lightstep").is_some_and(|l| !l.is_null()))
                .filter_map(|p| p.get("name").and_then(Value::as_str))
                .collect(),
            _ => BTreeSet::new(),
        };
        if lightstep.is_empty() {
            return;
        }
        for (config, telemetry) in telemetries(ctx) {
            for provider in telemetry.tracing.iter().flat_map(|t| &t.providers) {
                if lightstep.contains(provider.name.as_str()) {
                    let detail = format!(
                        "The Lightstep provider {} is deprecated, please migrate to OpenTelemetry provider.",
                        provider.name
                    );
                    out.push(config.message(&msg::DEPRECATED, &[detail.into()]));
                }
            }
        }
    }
}

/// `telemetry.SelectorAnalyzer`: selectors matching no pod, pods selected twice.
#[derive(Debug, Default)]
pub struct SelectorAnalyzer;

impl Analyzer for SelectorAnalyzer {
    fn name(&self) -> &str {
        "telemetry.SelectorAnalyzer"
    }

    fn description(&self) -> &str {
        "Validates that telemetries that define a selector match at least one pod, and that there aren't multiple telemetry resources that select overlapping pods"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::TELEMETRY, kinds::POD]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        // Pod (namespace, name) → the Telemetries selecting it.
        let mut pods_to_telemetries: BTreeMap<(String, String), Vec<&IstioResource>> = BTreeMap::new();
        for (config, telemetry) in telemetries(ctx) {
            let Some(selector) = telemetry.selector.as_ref().filter(|s| !s.match_labels.is_empty()) else {
                continue;
            };
            let mut found = false;
            for pod in ctx.kube(kinds::POD) {
                if pod.ns() != config.namespace() {
                    continue;
                }
                if selector.match_labels.iter().all(|(k, v)| pod.labels.get(k) == Some(v)) {
                    found = true;
                    pods_to_telemetries
                        .entry((pod.ns().to_string(), pod.name.clone()))
                        .or_default()
                        .push(config);
                }
            }
            if !found {
                let text = crate::util::labels_string(&selector.match_labels);
                let first = selector.match_labels.keys().next().cloned().unwrap_or_default();
                out.push(message_at_leaf(
                    config,
                    &msg::REFERENCED_RESOURCE_NOT_FOUND,
                    &["selector".into(), text.into()],
                    &format!("spec.selector.matchLabels.{first}"),
                ));
            }
        }
        for ((ns, pod), list) in pods_to_telemetries {
            if list.len() < 2 {
                continue;
            }
            let names = sorted_names(&list);
            for config in list {
                out.push(message_at_leaf(
                    config,
                    &msg::CONFLICTING_TELEMETRY_WORKLOAD_SELECTORS,
                    &[names.clone().into(), ns.as_str().into(), pod.as_str().into()],
                    "metadata.name",
                ));
            }
        }
    }
}

fn sorted_names(list: &[&IstioResource]) -> Vec<String> {
    let mut names: Vec<String> = list.iter().map(|c| c.name().to_string()).collect();
    names.sort();
    names
}

/// `telemetry.DefaultSelectorAnalyzer`: several namespace-wide Telemetries in one namespace.
#[derive(Debug, Default)]
pub struct DefaultSelectorAnalyzer;

impl Analyzer for DefaultSelectorAnalyzer {
    fn name(&self) -> &str {
        "telemetry.DefaultSelectorAnalyzer"
    }

    fn description(&self) -> &str {
        "Validates that there aren't multiple telemetry resources that have no selector"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::TELEMETRY]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let mut by_namespace: BTreeMap<&str, Vec<&IstioResource>> = BTreeMap::new();
        for (config, telemetry) in telemetries(ctx) {
            if telemetry.selector.is_none() {
                by_namespace.entry(config.namespace()).or_default().push(config);
            }
        }
        for (ns, list) in by_namespace {
            if list.len() < 2 {
                continue;
            }
            let names = sorted_names(&list);
            for config in list {
                out.push(config.message(
                    &msg::MULTIPLE_TELEMETRIES_WITHOUT_WORKLOAD_SELECTORS,
                    &[names.clone().into(), ns.into()],
                ));
            }
        }
    }
}
