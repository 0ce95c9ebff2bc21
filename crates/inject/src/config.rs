//! The injector's configuration as istiod reads it (`pkg/kube/inject/inject.go`: `Config`,
//! `UnmarshalConfig`; `webhook.go`: `NewValuesConfig`): the `config` key of the ConfigMap
//! `istio-sidecar-injector[-<rev>]` (policy, templates, aliases, selectors) and its `values` key
//! (the Helm values the chart rendered, JSON).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value as Json;

use crate::gotmpl::{TemplateError, Templates};

/// The template injected when a pod names none (`inject.istio.io/templates`) and the config gives
/// no `defaultTemplates`.
pub const SIDECAR_TEMPLATE: &str = "sidecar";

/// Why an injector config or values document was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not YAML, or not the config's shape (field path and reason).
    #[error("failed to unmarshal injection template: {0}")]
    Yaml(String),
    /// A template does not parse.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The values are not a JSON (or YAML) object.
    #[error("failed to parse values: {0}")]
    Values(String),
}

/// Whether pods are injected when nothing on them says (istiod's `InjectionPolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// Inject unless the pod opts out.
    Enabled,
    /// Inject only pods that opt in.
    Disabled,
    /// Any other value: istiod logs an error and injects nothing.
    Invalid(String),
}

/// A Kubernetes label selector (`matchLabels`, `matchExpressions`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelector {
    /// Labels that must all be present with these values.
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements, all of which must hold.
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One set-based requirement of a [`LabelSelector`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// The values for `In` / `NotIn`.
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Whether the selector selects nothing in particular (istiod skips empty selectors).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Whether `labels` satisfy every label and expression (Kubernetes' `LabelSelectorAsSelector`).
    ///
    /// # Errors
    /// An unknown operator, or `In`/`NotIn` without values (the selector is invalid; istiod logs it
    /// and ignores the selector).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> Result<bool, String> {
        for (key, value) in &self.match_labels {
            if labels.get(key) != Some(value) {
                return Ok(false);
            }
        }
        for req in &self.match_expressions {
            let have = labels.get(&req.key);
            let ok = match req.operator.as_str() {
                "In" | "NotIn" if req.values.is_empty() => {
                    return Err(format!(
                        "{}: values must be non-empty for operator {}",
                        req.key, req.operator
                    ));
                }
                "In" => have.is_some_and(|v| req.values.contains(v)),
                "NotIn" => have.is_none_or(|v| !req.values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct RawConfig {
    policy: String,
    default_templates: Vec<String>,
    templates: BTreeMap<String, String>,
    aliases: BTreeMap<String, Vec<String>>,
    never_inject_selector: Vec<LabelSelector>,
    always_inject_selector: Vec<LabelSelector>,
    injected_annotations: BTreeMap<String, String>,
}

/// The parsed `config` of the injector ConfigMap.
#[derive(Debug)]
pub struct InjectConfig {
    /// The namespace-default policy.
    pub policy: Policy,
    /// Templates applied when a pod names none (default `[sidecar]`).
    pub default_templates: Vec<String>,
    /// Alias → the templates it stands for.
    pub aliases: BTreeMap<String, Vec<String>>,
    /// Pods matching one of these are not injected unless they ask to be.
    pub never_inject_selector: Vec<LabelSelector>,
    /// Pods matching one of these are injected unless they ask not to be.
    pub always_inject_selector: Vec<LabelSelector>,
    /// Annotations added to every injected pod.
    pub injected_annotations: BTreeMap<String, String>,
    /// The templates, parsed.
    pub templates: Templates,
    /// The templates' text as given (for `/debug/inject`).
    pub raw_templates: BTreeMap<String, String>,
}

impl InjectConfig {
    /// Parses the ConfigMap's `config` (YAML), as istiod's `UnmarshalConfig`; the legacy single
    /// `template` key is ignored as istiod ignores it.
    ///
    /// # Errors
    /// Not the config's shape, or a template that does not parse.
    pub fn parse(yaml: &str) -> Result<InjectConfig, ConfigError> {
        let mut json = crate::yaml::object(yaml).map_err(|e| ConfigError::Yaml(e.to_string()))?;
        // An empty key (`injectedAnnotations:`) is null: Go reads it as an empty map or list.
        if let Some(fields) = json.as_object_mut() {
            fields.retain(|_, v| !v.is_null());
        }
        let raw: RawConfig = serde_json::from_value(json).map_err(|e| ConfigError::Yaml(e.to_string()))?;
        if raw.templates.is_empty() {
            tracing::warn!(
                "injection templates are empty: the injection config may come from an older Istio version; pods will not be injected"
            );
        }
        let policy = match raw.policy.as_str() {
            "enabled" => Policy::Enabled,
            "disabled" => Policy::Disabled,
            other => Policy::Invalid(other.to_string()),
        };
        let default_templates = if raw.default_templates.is_empty() {
            vec![SIDECAR_TEMPLATE.to_string()]
        } else {
            raw.default_templates
        };
        let templates = Templates::parse(&raw.templates)?;
        Ok(InjectConfig {
            policy,
            default_templates,
            aliases: raw.aliases,
            never_inject_selector: raw.never_inject_selector,
            always_inject_selector: raw.always_inject_selector,
            injected_annotations: raw.injected_annotations,
            templates,
            raw_templates: raw.templates,
        })
    }
}

/// The Helm values the injector renders with (`.Values` in templates), and the few istiod reads
/// itself.
#[derive(Debug, Clone, Default)]
pub struct Values {
    /// The values as given (JSON object).
    pub json: Json,
}

impl Values {
    /// Parses the ConfigMap's `values` (JSON; YAML is accepted too, as `sigs.k8s.io/yaml` reads both).
    ///
    /// # Errors
    /// Not JSON or YAML, or not an object.
    pub fn parse(text: &str) -> Result<Values, ConfigError> {
        let json: Json = if text.trim().is_empty() {
            Json::Object(Default::default())
        } else {
            crate::yaml::object(text).map_err(|e| ConfigError::Values(e.to_string()))?
        };
        if !json.is_object() {
            return Err(ConfigError::Values("values must be an object".into()));
        }
        Ok(Values { json })
    }

    fn at(&self, path: &[&str]) -> &Json {
        path.iter().fold(&self.json, |v, k| &v[*k])
    }

    fn string(&self, path: &[&str]) -> String {
        match self.at(path) {
            Json::String(s) => s.clone(),
            Json::Null => String::new(),
            other => other.to_string(),
        }
    }

    /// `global.hub`.
    pub fn hub(&self) -> String {
        self.string(&["global", "hub"])
    }

    /// `global.tag` in its string form (a number tag prints as Go prints it).
    pub fn tag(&self) -> String {
        self.string(&["global", "tag"])
    }

    /// `global.variant`.
    pub fn variant(&self) -> String {
        self.string(&["global", "variant"])
    }

    /// `global.proxy.image` (default `proxyv2`).
    pub fn proxy_image_name(&self) -> String {
        Some(self.string(&["global", "proxy", "image"]))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "proxyv2".into())
    }

    /// `global.proxy_init.image` (default `proxyv2`).
    pub fn proxy_init_image_name(&self) -> String {
        Some(self.string(&["global", "proxy_init", "image"]))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "proxyv2".into())
    }

    /// `global.multiCluster.clusterName`.
    pub fn cluster_name(&self) -> String {
        self.string(&["global", "multiCluster", "clusterName"])
    }

    /// `global.network`.
    pub fn network(&self) -> String {
        self.string(&["global", "network"])
    }

    /// `sidecarInjectorWebhook.rewriteAppHTTPProbe` (false when unset, as the Go getter).
    pub fn rewrite_app_http_probe(&self) -> bool {
        self.at(&["sidecarInjectorWebhook", "rewriteAppHTTPProbe"]).as_bool().unwrap_or(false)
    }

    /// `global.proxy.holdApplicationUntilProxyStarts`.
    pub fn hold_application_until_proxy_starts(&self) -> bool {
        self.at(&["global", "proxy", "holdApplicationUntilProxyStarts"]).as_bool().unwrap_or(false)
    }
}

/// Image types whose suffix on a tag is replaced rather than added to (`KnownImageTypes`).
const KNOWN_IMAGE_TYPES: &[&str] = &["distroless", "debug"];

/// `HUB/NAME:TAG[-TYPE]` as istiod's `imageURL`: a known type suffix already on the tag is replaced,
/// `default` means no suffix.
pub fn image_url(hub: &str, name: &str, tag: &str, image_type: &str) -> String {
    let mut tag = tag.to_string();
    if !image_type.is_empty() {
        for known in KNOWN_IMAGE_TYPES {
            if let Some(stripped) = tag.strip_suffix(&format!("-{known}")) {
                tag = stripped.to_string();
                break;
            }
        }
        if image_type != "default" {
            tag = format!("{tag}-{image_type}");
        }
    }
    format!("{hub}/{name}:{tag}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn config_defaults_to_the_sidecar_template_and_parses_selectors() {
        let config = InjectConfig::parse(
            "policy: enabled\ntemplates:\n  sidecar: 'x'\nneverInjectSelector:\n- matchExpressions:\n  - {key: job, operator: Exists}\n",
        )
        .unwrap();
        assert_eq!(config.policy, Policy::Enabled);
        assert_eq!(config.default_templates, vec!["sidecar"]);
        assert!(config.templates.contains("sidecar"));
        assert_eq!(config.never_inject_selector[0].matches(&labels(&[("job", "x")])), Ok(true));
        assert_eq!(config.never_inject_selector[0].matches(&labels(&[])), Ok(false));
        assert_eq!(InjectConfig::parse("policy: maybe").unwrap().policy, Policy::Invalid("maybe".into()));
    }

    #[test]
    fn a_broken_template_names_itself() {
        let err = InjectConfig::parse("templates:\n  sidecar: '{{ if }}'\n").unwrap_err();
        assert!(err.to_string().contains("\"sidecar\""), "{err}");
    }

    #[test]
    fn selector_operators() {
        let sel = |op: &str, values: &[&str]| LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: op.into(),
                values: values.iter().map(|s| s.to_string()).collect(),
            }],
        };
        let l = labels(&[("a", "1")]);
        assert_eq!(sel("In", &["1", "2"]).matches(&l), Ok(true));
        assert_eq!(sel("NotIn", &["1"]).matches(&l), Ok(false));
        assert_eq!(sel("NotIn", &["1"]).matches(&labels(&[])), Ok(true));
        assert_eq!(sel("DoesNotExist", &[]).matches(&l), Ok(false));
        assert!(sel("In", &[]).matches(&l).is_err());
        assert!(sel("Near", &[]).matches(&l).is_err());
    }

    #[test]
    fn image_urls_follow_istio() {
        assert_eq!(image_url("docker.io/istio", "proxyv2", "1.2", ""), "docker.io/istio/proxyv2:1.2");
        assert_eq!(image_url("h", "proxyv2", "1.2", "distroless"), "h/proxyv2:1.2-distroless");
        assert_eq!(image_url("h", "proxyv2", "1.2-debug", "distroless"), "h/proxyv2:1.2-distroless");
        assert_eq!(image_url("h", "proxyv2", "1.2-debug", "default"), "h/proxyv2:1.2");
    }
}
