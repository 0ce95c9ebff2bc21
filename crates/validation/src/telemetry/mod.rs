//! Telemetry validation, following Istio's `ValidateTelemetry` (`validateTelemetryMetrics`,
//! `validateTelemetryTracing`, `validateTelemetryAccessLogging`, `validateTelemetryProviders`, and
//! the istiod `validateTelemetryFilter`, which parses access log filters with cel-go) and the rules
//! of the Telemetry CRD schema (provider names, the `customTags` and metric selector oneofs, tag
//! override CEL rules, `reportingInterval` at least 1ms, `randomSamplingPercentage` 0–100, enums).
//!
//! The access log filter is parsed by [`cel`], a CEL parser that accepts exactly what cel-go's
//! parser (v0.28, with the standard macros and default limits) accepts; no type checking is done,
//! as in Istio.

pub(crate) mod cel;
#[cfg(test)]
mod tests;

use crate::common::check_enum;
use api::{
    meta::ObjectMeta,
    telemetry::{
        AccessLogging, Metrics, MetricsOverrides, ProviderRef, Telemetry, Tracing, WorkloadMode,
        metric_selector::IstioMetric, metrics_overrides::tag_override::Operation,
    },
};

use crate::{
    Report,
    common::go_duration_nanos,
    security::authorization_policy::{check_policy_selection, map_entry_path},
};

/// Validates a Telemetry; findings use paths from the document root (`spec.…`).
///
/// Follows Istio's `ValidateTelemetry`: the selector / target references; metrics (provider names,
/// tag overrides: `UPSERT` needs a value, `REMOVE` takes none, a warning for an empty tag name; a
/// custom metric name must not be empty); tracing (provider names, sampling percentage 0–100,
/// custom tags with their value or name; warnings for several tracing entries or providers); access
/// logging (provider names, a filter that parses as CEL). CRD rules on top: one metric selector and
/// one custom tag type at most, formatter tags with a value, reporting intervals of at least 1ms,
/// known enum values.
pub fn validate(meta: &ObjectMeta, spec: &Telemetry, report: &mut Report) {
    let _ = meta;
    check_policy_selection(spec.selector.as_ref(), spec.target_ref.as_ref(), &spec.target_refs, report);
    for (i, metrics) in spec.metrics.iter().enumerate() {
        check_metrics(&format!("spec.metrics[{i}]"), metrics, report);
    }
    if spec.tracing.len() > 1 {
        report.warn("spec.tracing", "multiple tracing is not currently supported");
    }
    for (i, tracing) in spec.tracing.iter().enumerate() {
        check_tracing(&format!("spec.tracing[{i}]"), tracing, report);
    }
    for (i, logging) in spec.access_logging.iter().enumerate() {
        check_access_logging(&format!("spec.accessLogging[{i}]"), logging, report);
    }
}

/// Istio's `validateTelemetryProviders`: every provider has a name.
fn check_providers(path: &str, providers: &[ProviderRef], report: &mut Report) {
    for (i, provider) in providers.iter().enumerate() {
        if provider.name.is_empty() {
            report.error(format!("{path}.providers[{i}].name"), "providers.name may not be empty");
        }
    }
}

/// One `metrics` entry.
fn check_metrics(path: &str, metrics: &Metrics, report: &mut Report) {
    check_providers(path, &metrics.providers, report);
    for (j, overrides) in metrics.overrides.iter().enumerate() {
        check_metrics_overrides(&format!("{path}.overrides[{j}]"), overrides, report);
    }
    if let Some(interval) = &metrics.reporting_interval
        && go_duration_nanos(interval) < 1_000_000
    {
        report.error(format!("{path}.reportingInterval"), "must be a valid duration greater than 1ms");
    }
}

/// One metrics override: its tag overrides and metric selector.
fn check_metrics_overrides(path: &str, overrides: &MetricsOverrides, report: &mut Report) {
    let tags_path = format!("{path}.tagOverrides");
    for (name, tag) in &overrides.tag_overrides {
        if name.is_empty() {
            report.warn(&tags_path, "tagOverrides.name may not be empty");
        }
        let tag_path = map_entry_path(&tags_path, name);
        check_enum::<Operation>(&format!("{tag_path}.operation"), tag.operation, report);
        if tag.operation == Operation::Upsert as i32 && tag.value.is_empty() {
            report.error(&tag_path, "tagOverrides.value must be set when operation is UPSERT");
        }
        if tag.operation == Operation::Remove as i32 && !tag.value.is_empty() {
            report.error(
                format!("{tag_path}.value"),
                "tagOverrides.value may only be set when operation is UPSERT",
            );
        }
    }
    if let Some(selector) = &overrides.r#match {
        let match_path = format!("{path}.match");
        if selector.metric.is_some() && selector.custom_metric.is_some() {
            report.error(&match_path, "only one of metric or customMetric may be set");
        }
        if let Some(metric) = selector.metric {
            check_enum::<IstioMetric>(&format!("{match_path}.metric"), metric, report);
        }
        if selector.custom_metric.as_deref() == Some("") {
            report.error(format!("{match_path}.customMetric"), "customMetric may not be empty");
        }
        check_enum::<WorkloadMode>(&format!("{match_path}.mode"), selector.mode, report);
    }
}

/// One `tracing` entry.
fn check_tracing(path: &str, tracing: &Tracing, report: &mut Report) {
    if tracing.providers.len() > 1 {
        report.warn(format!("{path}.providers"), "multiple providers is not currently supported");
    }
    check_providers(path, &tracing.providers, report);
    if let Some(percentage) = tracing.random_sampling_percentage
        && !(0.0..=100.0).contains(&percentage)
        && !percentage.is_nan()
    {
        report.error(
            format!("{path}.randomSamplingPercentage"),
            "randomSamplingPercentage must be in range [0.0, 100.0]",
        );
    }
    if let Some(selector) = &tracing.r#match {
        check_enum::<WorkloadMode>(&format!("{path}.match.mode"), selector.mode, report);
    }
    let tags_path = format!("{path}.customTags");
    for (name, tag) in &tracing.custom_tags {
        if name.is_empty() {
            report.error(&tags_path, "tag name may not be empty");
        }
        let tag_path = map_entry_path(&tags_path, name);
        let set =
            [tag.literal.is_some(), tag.environment.is_some(), tag.header.is_some(), tag.formatter.is_some()];
        if set.iter().filter(|s| **s).count() > 1 {
            report.error(&tag_path, "only one of literal, environment, header or formatter may be set");
        }
        if let Some(literal) = &tag.literal
            && literal.value.is_empty()
        {
            report.error(format!("{tag_path}.literal.value"), "literal tag value may not be empty");
        }
        if let Some(header) = &tag.header
            && header.name.is_empty()
        {
            report.error(format!("{tag_path}.header.name"), "header tag name may not be empty");
        }
        if let Some(environment) = &tag.environment
            && environment.name.is_empty()
        {
            report.error(format!("{tag_path}.environment.name"), "environment tag name may not be empty");
        }
        if let Some(formatter) = &tag.formatter
            && formatter.value.is_empty()
        {
            report.error(format!("{tag_path}.formatter.value"), "formatter tag value may not be empty");
        }
    }
}

/// One `accessLogging` entry.
fn check_access_logging(path: &str, logging: &AccessLogging, report: &mut Report) {
    if let Some(filter) = &logging.filter
        && let Err(reason) = cel::parse(&filter.expression)
    {
        report
            .error(format!("{path}.filter.expression"), format!("must be a valid CEL expression, {reason}"));
    }
    check_providers(path, &logging.providers, report);
    if let Some(selector) = &logging.r#match {
        check_enum::<WorkloadMode>(&format!("{path}.match.mode"), selector.mode, report);
    }
}
