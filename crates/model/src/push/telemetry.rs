//! The Telemetry API's access logging as istiod resolves it (`pilot/pkg/model/telemetry.go`,
//! `telemetry_logging.go`): which Telemetries apply to a proxy, how their `accessLogging` entries
//! merge into one setting per provider, and how that combines with the mesh config.
//!
//! Resolution for one proxy and one traffic direction ([`Direction`]):
//! 1. Levels, later overriding earlier: the root namespace's namespace-wide Telemetry (no
//!    `selector.matchLabels`, no `targetRefs`; the oldest when several), the proxy namespace's
//!    namespace-wide one, then every Telemetry of the proxy's namespace whose `selector` or
//!    `targetRefs` select the proxy (the attachment rules of [`super::policy::PolicyMatcher`]), oldest
//!    first. Only levels with `accessLogging` entries count.
//! 2. [`merge_logs`]: the providers in scope are those the last level naming any (for entries whose
//!    `match.mode` fits the direction) names, else the mesh `defaultProviders.accessLogging`; an entry
//!    without providers stands for its parent's; `disabled: true` turns a provider off; a provider
//!    keeps the `filter` of the last entry naming it.
//! 3. Providers are looked up in mesh `extensionProviders` and Istio's built-in `envoy`
//!    ([`super::extension_provider::find_provider`]); unknown names and providers that are not
//!    access loggers are left out (and reported when the index is built: [`telemetry_findings`]).
//! 4. When no Telemetry and no default provider applies, or nothing is left after 3, the mesh config
//!    decides (`accessLogFile`, `accessLogEncoding`, `accessLogFormat`; Istio's fallback in
//!    `pilot/pkg/networking/core/accesslog.go`).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use api::{
    Spec,
    telemetry::{AccessLogging, Telemetry, WorkloadMode},
};

use super::{
    extension_provider::{ExtensionProvider, ProviderKind, find_provider},
    policy::PolicyMatcher,
};
use crate::{Config, ConfigKey, Finding, Severity};

/// Encoding of the mesh config's access log (`accessLogEncoding`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AccessLogEncoding {
    /// `TEXT` (the default): `accessLogFormat` is an Envoy format string.
    #[default]
    Text,
    /// `JSON`: `accessLogFormat` is a JSON object of labels to format strings.
    Json,
}

/// The traffic direction of a listener, as the Telemetry API's `match.mode` sees it (Istio's
/// `workloadMode` of a listener class: sidecar outbound and gateways are `CLIENT`, sidecar inbound is
/// `SERVER`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// Outbound sidecar listeners and gateway listeners.
    Client,
    /// Inbound sidecar listeners.
    Server,
}

/// The merged setting of one provider (Istio's `loggingSpec`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoggingSpec {
    /// The provider is turned off.
    pub disabled: bool,
    /// The CEL expression a request or connection must satisfy to be logged.
    pub filter: Option<String>,
}

/// One access logger that applies (Istio's `LoggingConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct LoggingConfig {
    /// The provider (an access log kind of [`ProviderKind`]).
    pub provider: ExtensionProvider,
    /// Turned off by a Telemetry: no logger is configured for it.
    pub disabled: bool,
    /// CEL filter expression.
    pub filter: Option<String>,
}

fn mode_matches(entry: &AccessLogging, direction: Direction) -> bool {
    let mode = entry.r#match.as_ref().map_or(WorkloadMode::ClientAndServer as i32, |m| m.mode);
    mode == WorkloadMode::ClientAndServer as i32
        || (mode == WorkloadMode::Client as i32 && direction == Direction::Client)
        || (mode == WorkloadMode::Server as i32 && direction == Direction::Server)
}

fn provider_names(entry: &AccessLogging) -> Vec<String> {
    entry.providers.iter().map(|p| p.name.clone()).collect()
}

/// Istio's `mergeLogs`: the setting per provider name of `levels` (root, namespace, workload
/// Telemetries' `accessLogging` lists, in that order) for `direction`, with `defaults` the mesh
/// `defaultProviders.accessLogging`. Rules in the module documentation.
pub fn merge_logs(
    levels: &[&[AccessLogging]],
    defaults: &[String],
    direction: Direction,
) -> BTreeMap<String, LoggingSpec> {
    let mut providers = BTreeMap::new();
    if levels.is_empty() {
        for name in defaults {
            providers.insert(name.clone(), LoggingSpec::default());
        }
        return providers;
    }
    let mut in_scope: Vec<String> = defaults.to_vec();
    let mut filters: BTreeMap<String, LoggingSpec> = BTreeMap::new();
    for level in levels {
        let mut names = BTreeSet::new();
        for entry in level.iter().filter(|e| mode_matches(e, direction)) {
            for name in provider_names(entry) {
                filters.insert(
                    name.clone(),
                    LoggingSpec {
                        disabled: false,
                        filter: entry.filter.as_ref().map(|f| f.expression.clone()),
                    },
                );
                names.insert(name);
            }
        }
        if !names.is_empty() {
            in_scope = names.into_iter().collect();
        }
    }
    let in_scope: BTreeSet<String> = in_scope.into_iter().collect();
    let mut parent: Vec<String> = defaults.to_vec();
    for level in levels {
        for entry in level.iter() {
            let mut names = provider_names(entry);
            if names.is_empty() {
                names = parent.clone();
            }
            parent = names.clone();
            if !mode_matches(entry, direction) {
                continue;
            }
            for name in names.into_iter().filter(|n| in_scope.contains(n)) {
                let spec = if entry.disabled == Some(true) {
                    LoggingSpec { disabled: true, filter: None }
                } else {
                    filters.get(&name).cloned().unwrap_or_default()
                };
                providers.insert(name, spec);
            }
        }
    }
    providers
}

/// `true` for the provider kinds that are access loggers.
pub fn is_access_log_provider(kind: &ProviderKind) -> bool {
    matches!(
        kind,
        ProviderKind::EnvoyFileAccessLog(_)
            | ProviderKind::EnvoyOtelAls(_)
            | ProviderKind::EnvoyHttpAls(_)
            | ProviderKind::EnvoyTcpAls(_)
    )
}

/// The Telemetry spec of a config, if it is one.
fn telemetry(config: &Config) -> Option<&Telemetry> {
    match &config.spec {
        Spec::Telemetry(t) => Some(t),
        _ => None,
    }
}

/// `true` for a namespace-wide Telemetry (no `selector.matchLabels`, no `targetRef(s)`).
fn namespace_wide(t: &Telemetry) -> bool {
    t.selector.as_ref().is_none_or(|s| s.match_labels.is_empty())
        && t.target_ref.is_none()
        && t.target_refs.is_empty()
}

/// The Telemetries that apply to the proxy `matcher` describes, in Istio's order (root namespace's
/// namespace-wide one, the proxy namespace's, then the selecting ones of the proxy's namespace);
/// `by_namespace` gives one namespace's Telemetries oldest first.
pub fn applicable_telemetries<'c>(
    matcher: &PolicyMatcher<'_>,
    by_namespace: impl Fn(&str) -> &'c [Arc<Config>],
) -> Vec<Arc<Config>> {
    let first_wide =
        |ns: &str| by_namespace(ns).iter().find(|c| telemetry(c).is_some_and(namespace_wide)).cloned();
    let mut out = Vec::new();
    out.extend(first_wide(matcher.root_namespace));
    if matcher.namespace != matcher.root_namespace {
        out.extend(first_wide(matcher.namespace));
    }
    out.extend(
        by_namespace(matcher.namespace)
            .iter()
            .filter(|c| telemetry(c).is_some_and(|t| !namespace_wide(t)) && matcher.should_attach(c))
            .cloned(),
    );
    out
}

/// The access loggers of one proxy and direction from the Telemetries that apply to it
/// ([`applicable_telemetries`]), the mesh `defaultProviders.accessLogging` and `providers` (mesh
/// `extensionProviders`). Empty: the mesh config's `accessLogFile` decides (step 4 of the module
/// documentation). Sorted by provider name.
pub fn access_logging(
    applicable: &[Arc<Config>],
    defaults: &[String],
    providers: &[ExtensionProvider],
    direction: Direction,
) -> Vec<LoggingConfig> {
    let levels: Vec<&[AccessLogging]> = applicable
        .iter()
        .filter_map(|c| telemetry(c))
        .map(|t| t.access_logging.as_slice())
        .filter(|l| !l.is_empty())
        .collect();
    if levels.is_empty() && defaults.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<LoggingConfig> = merge_logs(&levels, defaults, direction)
        .into_iter()
        .filter_map(|(name, spec)| {
            let provider = find_provider(providers, &name)?;
            is_access_log_provider(&provider.kind).then_some(LoggingConfig {
                provider,
                disabled: spec.disabled,
                filter: spec.filter,
            })
        })
        .collect();
    out.sort_by(|a, b| a.provider.name.cmp(&b.provider.name));
    out
}

/// What configstatusz reports about one Telemetry: each `accessLogging` provider that the mesh does
/// not define or that is not an access logger (`spec.accessLogging[i].providers[j].name`), the
/// tracing providers [`super::tracing::tracing_findings`] reports, and the metrics providers
/// [`super::metrics::metrics_findings`] reports.
pub fn telemetry_findings(config: &Config, providers: &[ExtensionProvider]) -> Vec<Finding> {
    let Some(t) = telemetry(config) else { return Vec::new() };
    let mut out = Vec::new();
    let finding = |severity, path: String, message: String| Finding {
        severity,
        config: Some(config.key()),
        path,
        resource: String::new(),
        message,
    };
    for (i, entry) in t.access_logging.iter().enumerate() {
        for (j, p) in entry.providers.iter().enumerate() {
            let path = format!("spec.accessLogging[{i}].providers[{j}].name");
            match find_provider(providers, &p.name) {
                None => out.push(finding(
                    Severity::Dropped,
                    path,
                    format!(
                        "access log provider {:?} is not defined in mesh config extensionProviders (nor the \
                         built-in \"envoy\"); no access log is configured for it",
                        p.name
                    ),
                )),
                Some(found) if !is_access_log_provider(&found.kind) => out.push(finding(
                    Severity::Dropped,
                    path,
                    format!(
                        "provider {:?} is not an access log provider (envoyFileAccessLog, envoyOtelAls, \
                         envoyHttpAls, envoyTcpAls); ignored for access logging",
                        p.name
                    ),
                )),
                Some(_) => {}
            }
        }
    }
    out.extend(super::tracing::tracing_findings(config, providers));
    out.extend(super::metrics::metrics_findings(config, providers));
    out
}

/// The keys of the Telemetries among `applicable` that have access logging: proxies with equal keys
/// (and direction) get the same access loggers.
pub fn logging_key(applicable: &[Arc<Config>]) -> Vec<ConfigKey> {
    applicable
        .iter()
        .filter(|c| telemetry(c).is_some_and(|t| !t.access_logging.is_empty()))
        .map(|c| c.key())
        .collect()
}

#[cfg(test)]
mod tests {
    use api::telemetry::{
        ProviderRef,
        access_logging::{Filter, LogSelector},
    };

    use super::*;
    use crate::{ConfigMeta, service::Labels};

    fn entry(
        providers: &[&str],
        mode: Option<WorkloadMode>,
        disabled: Option<bool>,
        filter: Option<&str>,
    ) -> AccessLogging {
        AccessLogging {
            r#match: mode.map(|m| LogSelector { mode: m as i32 }),
            providers: providers.iter().map(|p| ProviderRef { name: p.to_string() }).collect(),
            disabled,
            filter: filter.map(|f| Filter { expression: f.to_string() }),
        }
    }

    fn on(filter: Option<&str>) -> LoggingSpec {
        LoggingSpec { disabled: false, filter: filter.map(String::from) }
    }

    const OFF: LoggingSpec = LoggingSpec { disabled: true, filter: None };

    fn merged(levels: &[&[AccessLogging]], defaults: &[&str], d: Direction) -> Vec<(String, LoggingSpec)> {
        let defaults: Vec<String> = defaults.iter().map(|s| s.to_string()).collect();
        merge_logs(levels, &defaults, d).into_iter().collect()
    }

    fn named(pairs: &[(&str, LoggingSpec)]) -> Vec<(String, LoggingSpec)> {
        pairs.iter().map(|(n, s)| (n.to_string(), s.clone())).collect()
    }

    #[test]
    fn without_telemetry_the_default_providers_log() {
        assert_eq!(merged(&[], &["envoy"], Direction::Client), named(&[("envoy", on(None))]));
        assert!(merged(&[], &[], Direction::Server).is_empty());
    }

    #[test]
    fn an_entry_without_providers_stands_for_the_defaults() {
        let root = [entry(&[], None, None, Some("response.code >= 400"))];
        // As istiod's mergeLogs: the default provider logs, but a filter is kept only for providers an
        // entry names, so this entry's filter is not applied.
        assert_eq!(merged(&[&root], &["envoy"], Direction::Client), named(&[("envoy", on(None))]));
        // No defaults and no providers: nothing is in scope.
        assert!(merged(&[&root], &[], Direction::Client).is_empty());
    }

    #[test]
    fn the_most_specific_level_naming_providers_decides_the_scope() {
        let root = [entry(&["envoy"], None, None, None)];
        let workload = [entry(&["json"], None, None, Some("response.code >= 500"))];
        assert_eq!(
            merged(&[&root, &workload], &[], Direction::Server),
            named(&[("json", on(Some("response.code >= 500")))]),
            "the workload's provider replaces the mesh's"
        );
    }

    #[test]
    fn disabled_turns_the_inherited_provider_off() {
        let root = [entry(&["envoy"], None, None, None)];
        let namespace = [entry(&[], None, Some(true), None)];
        assert_eq!(merged(&[&root, &namespace], &[], Direction::Client), named(&[("envoy", OFF)]));
        // Re-enabled one level down.
        let workload = [entry(&["envoy"], None, Some(false), None)];
        assert_eq!(
            merged(&[&root, &namespace, &workload], &[], Direction::Client),
            named(&[("envoy", on(None))])
        );
    }

    #[test]
    fn match_mode_selects_the_direction() {
        let level = [
            entry(&["envoy"], Some(WorkloadMode::Client), None, None),
            entry(&["json"], Some(WorkloadMode::Server), None, Some("response.code >= 500")),
        ];
        assert_eq!(merged(&[&level], &[], Direction::Client), named(&[("envoy", on(None))]));
        assert_eq!(
            merged(&[&level], &[], Direction::Server),
            named(&[("json", on(Some("response.code >= 500")))])
        );
        let both = [entry(&["envoy"], Some(WorkloadMode::ClientAndServer), None, None)];
        assert_eq!(merged(&[&both], &[], Direction::Server), named(&[("envoy", on(None))]));
    }

    #[test]
    fn server_side_disable_keeps_the_client_side() {
        let root = [entry(&["envoy"], None, None, None)];
        let workload = [entry(&["envoy"], Some(WorkloadMode::Server), Some(true), None)];
        assert_eq!(merged(&[&root, &workload], &[], Direction::Server), named(&[("envoy", OFF)]));
        assert_eq!(merged(&[&root, &workload], &[], Direction::Client), named(&[("envoy", on(None))]));
    }

    #[test]
    fn a_provider_keeps_the_last_filter_set_for_it() {
        let root = [entry(&["envoy"], None, None, Some("response.code >= 400"))];
        let workload = [entry(&["envoy"], None, None, None)];
        assert_eq!(merged(&[&root, &workload], &[], Direction::Client), named(&[("envoy", on(None))]));
        assert_eq!(
            merged(&[&workload, &root], &[], Direction::Client),
            named(&[("envoy", on(Some("response.code >= 400")))])
        );
    }

    fn telemetry_config(
        ns: &str,
        name: &str,
        selector: Option<(&str, &str)>,
        logging: Vec<AccessLogging>,
    ) -> Arc<Config> {
        let t = Telemetry {
            selector: selector.map(|(k, v)| api::type_v1beta1::WorkloadSelector {
                match_labels: [(k.to_string(), v.to_string())].into_iter().collect(),
            }),
            access_logging: logging,
            ..Default::default()
        };
        Arc::new(Config {
            meta: ConfigMeta { namespace: ns.into(), name: name.into(), ..Default::default() },
            spec: Spec::Telemetry(Box::new(t)),
            status: None,
        })
    }

    #[test]
    fn applicable_telemetries_follow_istios_levels() {
        let root = vec![
            telemetry_config("istio-system", "mesh", None, vec![entry(&["envoy"], None, None, None)]),
            telemetry_config("istio-system", "second", None, vec![]),
        ];
        let ns = vec![
            telemetry_config("foo", "ns", None, vec![]),
            telemetry_config("foo", "app", Some(("app", "a")), vec![entry(&["json"], None, None, None)]),
            telemetry_config("foo", "other", Some(("app", "b")), vec![]),
        ];
        let labels: Labels = [("app".to_string(), "a".to_string())].into_iter().collect();
        let matcher = PolicyMatcher {
            namespace: "foo",
            labels: &labels,
            gateways: &[],
            root_namespace: "istio-system",
        };
        let picked = applicable_telemetries(&matcher, |n| match n {
            "istio-system" => &root,
            "foo" => &ns,
            _ => &[],
        });
        let names: Vec<&str> = picked.iter().map(|c| c.meta.name.as_str()).collect();
        assert_eq!(names, ["mesh", "ns", "app"], "first namespace-wide per level, then the selecting ones");
        let keys: Vec<String> = logging_key(&picked).iter().map(|k| k.name.clone()).collect();
        assert_eq!(keys, ["mesh", "app"], "only Telemetries with access logging shape the loggers");
    }

    #[test]
    fn unknown_and_non_logging_providers_are_left_out_and_reported() {
        let providers = super::super::extension_provider::parse_extension_providers(&serde_json::json!([
            {"name": "json", "envoyFileAccessLog": {"path": "/tmp/a.log"}},
            {"name": "zipkin", "zipkin": {"service": "z", "port": 9411}},
        ]))
        .unwrap();
        let t = telemetry_config(
            "istio-system",
            "mesh",
            None,
            vec![entry(&["json", "missing"], None, None, None), entry(&["zipkin"], None, None, None)],
        );
        let logging = access_logging(std::slice::from_ref(&t), &[], &providers, Direction::Client);
        let names: Vec<&str> = logging.iter().map(|l| l.provider.name.as_str()).collect();
        assert_eq!(names, ["json"]);
        let findings = telemetry_findings(&t, &providers);
        let paths: Vec<&str> = findings.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            ["spec.accessLogging[0].providers[1].name", "spec.accessLogging[1].providers[0].name"]
        );
        assert!(findings[0].message.contains("\"missing\" is not defined"), "{}", findings[0].message);
        assert!(findings[1].message.contains("not an access log provider"), "{}", findings[1].message);
    }

    #[test]
    fn the_builtin_envoy_provider_is_always_there_and_can_be_replaced() {
        let logging = access_logging(
            &[telemetry_config("istio-system", "mesh", None, vec![entry(&["envoy"], None, None, None)])],
            &[],
            &[],
            Direction::Client,
        );
        assert!(
            matches!(&logging[0].provider.kind, ProviderKind::EnvoyFileAccessLog(f) if f.path == "/dev/stdout")
        );
        let own = super::super::extension_provider::parse_extension_providers(&serde_json::json!([
            {"name": "envoy", "envoyFileAccessLog": {"path": "/var/log/envoy.log"}},
        ]))
        .unwrap();
        let found = find_provider(&own, "ENVOY").unwrap();
        assert!(matches!(found.kind, ProviderKind::EnvoyFileAccessLog(f) if f.path == "/var/log/envoy.log"));
    }

    #[test]
    fn without_telemetry_and_defaults_the_mesh_config_decides() {
        assert!(access_logging(&[], &[], &[], Direction::Client).is_empty());
        let t = telemetry_config("istio-system", "mesh", None, vec![]);
        assert!(access_logging(&[t], &[], &[], Direction::Client).is_empty(), "no accessLogging section");
    }
}
