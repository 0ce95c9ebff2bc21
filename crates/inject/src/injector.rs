//! The injection webhook's state and its answer to one AdmissionRequest (istiod's `Webhook.inject`,
//! `pkg/kube/inject/webhook.go`): the request's pod decoded, the policy checked, the pod injected,
//! the JSON Patch from the pod as sent to the pod as it is to be stored.
//!
//! The state (templates, values, mesh config) is swapped whole when its sources change; a request
//! works on the state it started with. The `ProxyConfig` resources are read per request from the
//! control plane's current push context ([`ProxyConfigSource`]), so a changed resource applies to the
//! next pod injected.

use std::{
    collections::BTreeMap,
    sync::{Arc, OnceLock, RwLock},
};

use serde_json::Value as Json;

use crate::config::{InjectConfig, Values};
use crate::inject::{
    IGNORED_NAMESPACES, InjectionParams, inject_pod, inject_required, labels_of, owner_of_pod,
};
use crate::patch::create_patch;
use crate::proxy_config::ProxyConfigs;

/// Where the webhook reads the `ProxyConfig` resources the control plane has now (istiod: the
/// current push context's `ProxyConfigs`); `None` before the first push context.
pub type ProxyConfigSource = Arc<dyn Fn() -> Option<Arc<ProxyConfigs>> + Send + Sync>;

/// `ENABLE_NATIVE_SIDECARS` (istiod's `features.EnableNativeSidecars`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NativeSidecars {
    /// Always (`true`).
    Enabled,
    /// Never (`false`).
    Disabled,
    /// `auto` (istiod's default): when every node's kubelet is 1.33 or later; with no nodes known,
    /// on (istiod looks at the Node objects; meshpilot has no node informer yet, so `auto` is on).
    #[default]
    Auto,
}

impl NativeSidecars {
    /// Reads `ENABLE_NATIVE_SIDECARS` (`true`, `false`, `auto` or unset = auto; anything else is
    /// `auto` with a warning, as istiod's feature flag parsing falls back to its default).
    pub fn from_env_value(value: Option<&str>) -> NativeSidecars {
        match value.map(str::to_ascii_lowercase).as_deref() {
            Some("true") => NativeSidecars::Enabled,
            Some("false") => NativeSidecars::Disabled,
            None | Some("auto") | Some("") => NativeSidecars::Auto,
            Some(other) => {
                tracing::warn!(value = other, "ENABLE_NATIVE_SIDECARS: not true, false or auto; using auto");
                NativeSidecars::Auto
            }
        }
    }

    fn enabled(self) -> bool {
        !matches!(self, NativeSidecars::Disabled)
    }
}

/// One consistent injection configuration.
#[derive(Debug)]
pub struct InjectorState {
    /// The injector config (`config` key); shared, so that a new mesh config keeps it without
    /// parsing the templates again.
    pub config: Arc<InjectConfig>,
    /// The values (`values` key).
    pub values: Values,
    /// The effective mesh config (proto-JSON).
    pub mesh: Json,
    /// The control plane's revision (`""` for the default one).
    pub revision: String,
    /// Native sidecar mode.
    pub native_sidecars: NativeSidecars,
}

/// The injection webhook's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Admit unchanged (not to be injected, or not a pod).
    Allow,
    /// Admit with this JSON Patch.
    Patch(Vec<Json>),
    /// Deny with this message (istiod's `Result.Message`, `allowed: false`).
    Deny(String),
}

/// The webhook's injector: its current state, replaced whole by [`Injector::set`], and where it reads
/// the `ProxyConfig` resources ([`Injector::set_proxy_configs`]).
pub struct Injector {
    state: RwLock<Arc<InjectorState>>,
    proxy_configs: OnceLock<ProxyConfigSource>,
}

impl std::fmt::Debug for Injector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Injector")
            .field("state", &self.state)
            .field("proxy_configs", &self.proxy_configs.get().map(|_| "set"))
            .finish()
    }
}

impl Injector {
    /// An injector over `state`, with no `ProxyConfig` resources until
    /// [`Injector::set_proxy_configs`].
    pub fn new(state: InjectorState) -> Injector {
        Injector { state: RwLock::new(Arc::new(state)), proxy_configs: OnceLock::new() }
    }

    /// Reads the `ProxyConfig` resources from `source` for every request from now on (set once; a
    /// second call is ignored and returns `false`).
    pub fn set_proxy_configs(&self, source: ProxyConfigSource) -> bool {
        self.proxy_configs.set(source).is_ok()
    }

    /// Replaces the state (a changed ConfigMap or file); requests in flight finish with the old one.
    pub fn set(&self, state: InjectorState) {
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(state);
    }

    /// Replaces the state with `change(current)` under the state's lock, so that an update of one part
    /// (the mesh config) cannot undo a concurrent [`Injector::set`] of another (the ConfigMap).
    pub fn update(&self, change: impl FnOnce(&InjectorState) -> InjectorState) {
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        *state = Arc::new(change(&state));
    }

    /// The current state.
    pub fn state(&self) -> Arc<InjectorState> {
        self.state.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Answers one AdmissionRequest (`request` as JSON) that came on `path` (`/inject`, or
    /// `/inject/cluster/C/net/N` whose pairs become the proxy's environment).
    pub fn answer(&self, request: &Json, path: &str) -> Answer {
        let state = self.state();
        let Some(object) = request.get("object").filter(|o| o.is_object()) else {
            return Answer::Deny("could not decode object: the request has no pod".to_string());
        };
        let mut pod = object.clone();
        if let Some(meta) = pod.get_mut("metadata").and_then(Json::as_object_mut) {
            meta.remove("managedFields");
        }
        if pod["metadata"]["namespace"].as_str().is_none_or(str::is_empty) {
            let namespace = request["namespace"].clone();
            if !pod["metadata"].is_object() {
                pod["metadata"] = serde_json::json!({});
            }
            pod["metadata"]["namespace"] = namespace;
        }
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        let config = &state.config;
        if !inject_required(IGNORED_NAMESPACES, &config.policy, Some(config), &pod, &namespace) {
            tracing::debug!(pod = %crate::inject::potential_pod_name(&pod["metadata"]), %namespace, "skipping injection due to policy check");
            return Answer::Allow;
        }
        // The patch is from the pod as Go's types would re-encode it (istiod marshals its decoded pod),
        // so that it holds injection's changes only.
        let mut original = pod.clone();
        crate::kube_types::normalize_pod(&mut original);
        // istiod's `GetProxyConfigOrDefault` over the current push context's resources (none known
        // yet: mesh defaultConfig and the annotation).
        let resources = self.proxy_configs.get().and_then(|source| source()).unwrap_or_default();
        let proxy_config = resources.effective(
            &state.mesh["defaultConfig"],
            &namespace,
            &labels_of(&pod["metadata"], "labels"),
            &pod["metadata"]["annotations"],
        );
        let params = InjectionParams {
            owner: owner_of_pod(&pod),
            pod,
            config,
            default_templates: config.default_templates.clone(),
            aliases: config.aliases.clone(),
            mesh: state.mesh.clone(),
            proxy_config: Some(proxy_config),
            values: &state.values,
            revision: state.revision.clone(),
            native_sidecar: state.native_sidecars.enabled(),
            proxy_envs: parse_inject_envs(path),
            injected_annotations: config.injected_annotations.clone(),
            proxy_uid_gid: (1337, 1337),
        };
        match inject_pod(params) {
            Ok(injected) => Answer::Patch(create_patch(&original, &injected)),
            Err(e) => Answer::Deny(e.to_string()),
        }
    }
}

/// The proxy environment in a request path (istiod's `parseInjectEnvs`): `/inject/K1/V1/K2/V2`
/// (`cluster` → `ISTIO_META_CLUSTER_ID`, `net` → `ISTIO_META_NETWORK`, anything else upper-cased;
/// `--slash--` in a value is `/`) or `/inject/:ENV:K1=V1:ENV:K2=V2` (names as given).
pub fn parse_inject_envs(path: &str) -> BTreeMap<String, String> {
    let path = path.strip_suffix('/').unwrap_or(path);
    let parts: Vec<&str> = path.splitn(3, '/').collect();
    let mut pairs: Vec<String> = Vec::new();
    if parts.len() == 3 {
        if parts[2].starts_with(":ENV:") {
            for pair in parts[2].split(":ENV:").skip(1) {
                if let Some((k, v)) = pair.split_once('=')
                    && !k.is_empty()
                {
                    pairs.push(k.to_string());
                    pairs.push(v.to_string());
                }
            }
        } else {
            pairs = parts[2]
                .split('/')
                .enumerate()
                .map(|(i, s)| if i % 2 == 1 { s.replace("--slash--", "/") } else { s.to_string() })
                .collect();
        }
    }
    let mut envs = BTreeMap::new();
    for chunk in pairs.chunks(2) {
        let [key, value] = chunk else {
            tracing::warn!(key = %chunk[0], "odd number of inject env entries, ignoring the last key");
            break;
        };
        let env = match key.as_str() {
            "cluster" => "ISTIO_META_CLUSTER_ID".to_string(),
            "net" => "ISTIO_META_NETWORK".to_string(),
            other => other.to_uppercase(),
        };
        if !env.is_empty() {
            envs.insert(env, value.clone());
        }
    }
    envs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_paths_carry_cluster_and_network() {
        let envs = parse_inject_envs("/inject/cluster/c1/net/n--slash--1");
        assert_eq!(envs.get("ISTIO_META_CLUSTER_ID").map(String::as_str), Some("c1"));
        assert_eq!(envs.get("ISTIO_META_NETWORK").map(String::as_str), Some("n/1"));
        let envs = parse_inject_envs("/inject/:ENV:cluster=c2:ENV:FOO=bar");
        assert_eq!(envs.get("ISTIO_META_CLUSTER_ID").map(String::as_str), Some("c2"));
        assert_eq!(envs.get("FOO").map(String::as_str), Some("bar"));
        assert!(parse_inject_envs("/inject").is_empty());
        assert_eq!(parse_inject_envs("/inject/cluster/c/odd").len(), 1);
    }
}
