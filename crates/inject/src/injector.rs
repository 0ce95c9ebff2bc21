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

/// The cluster a request is for when neither its path nor the values name one (istiod's
/// `constants.DefaultClusterName`).
pub const DEFAULT_CLUSTER_NAME: &str = "Kubernetes";

/// Where the webhook reads the `ProxyConfig` resources the control plane has now (istiod: the
/// current push context's `ProxyConfigs`); `None` before the first push context.
pub type ProxyConfigSource = Arc<dyn Fn() -> Option<Arc<ProxyConfigs>> + Send + Sync>;

/// `ENABLE_NATIVE_SIDECARS` (istiod's `features.EnableNativeSidecars`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NativeSidecars {
    /// Always (`true`).
    Enabled,
    /// Never (`false`, or a value istiod does not know).
    Disabled,
    /// `auto` (istiod's default): decided per pod from the cluster's Nodes ([`Nodes`],
    /// [`native_sidecars_supported`]); without a cluster (no Node informer) on, as for a cluster with
    /// no Node objects.
    #[default]
    Auto,
}

impl NativeSidecars {
    /// Reads `ENABLE_NATIVE_SIDECARS` as istiod does: unset is `auto`; `true`, `false` and `auto` as
    /// written (case matters); anything else, the empty value included, is `false` with a warning
    /// (istiod: "Unknown value for ENABLE_NATIVE_SIDECARS: …, defaulting to false").
    pub fn from_env_value(value: Option<&str>) -> NativeSidecars {
        match value {
            Some("true") => NativeSidecars::Enabled,
            Some("false") => NativeSidecars::Disabled,
            None | Some("auto") => NativeSidecars::Auto,
            Some(other) => {
                tracing::warn!(
                    value = other,
                    "unknown value for ENABLE_NATIVE_SIDECARS, defaulting to false"
                );
                NativeSidecars::Disabled
            }
        }
    }
}

/// The kubelet minor version from which `auto` turns native sidecars on (istiod: sidecar containers
/// are stable in Kubernetes 1.33).
pub const NATIVE_SIDECARS_MIN_KUBELET_MINOR: i64 = 33;

/// The second number of a kubelet version (`v1.33.2`, `1.32.0-gke.100`, `v1.31.1+k3s1`; `0` when it
/// has one number only), with the grammar istiod's version parser (`hashicorp/go-version`'s
/// `NewVersion`) accepts: an optional `v`, dot-separated decimal numbers, then an optional
/// pre-release (`-` or a letter, `-` or `~` first, then letters, digits, `-`, `~` in dot-separated
/// parts) and an optional `+` build part. `None` for anything else, a number out of `i64` included.
pub fn kubelet_minor(version: &str) -> Option<i64> {
    fn ident(c: u8) -> bool {
        c.is_ascii_alphanumeric() || c == b'-' || c == b'~'
    }
    // `ident+ ('.' ident+)*` at the start of `s`: the length taken.
    fn dotted(s: &[u8]) -> Option<usize> {
        let mut i = 0;
        loop {
            let start = i;
            while i < s.len() && ident(s[i]) {
                i += 1;
            }
            if i == start {
                return None;
            }
            if i + 1 < s.len() && s[i] == b'.' && ident(s[i + 1]) {
                i += 1;
            } else {
                return Some(i);
            }
        }
    }
    let rest = version.strip_prefix('v').unwrap_or(version).as_bytes();
    let numbers_end = rest.iter().position(|c| !(c.is_ascii_digit() || *c == b'.')).unwrap_or(rest.len());
    let numbers = std::str::from_utf8(&rest[..numbers_end]).ok()?;
    // Digits only (an empty number, from `1..2` or a trailing dot, does not parse).
    let segments: Vec<i64> = numbers.split('.').map(|n| n.parse::<i64>().ok()).collect::<Option<_>>()?;
    let mut tail = &rest[numbers_end..];
    if tail.first().is_some_and(|c| c.is_ascii_alphabetic() || *c == b'-' || *c == b'~') {
        tail = &tail[dotted(tail)?..];
    }
    if let Some(build) = tail.strip_prefix(b"+") {
        tail = &build[dotted(build)?..];
    }
    tail.is_empty().then(|| segments.get(1).copied().unwrap_or(0))
}

/// Whether a kubelet of `version` runs native sidecars for `auto` (istiod's `checkNodeVersion`: the
/// minor version only, 33 or more; a version that does not parse is not).
pub fn kubelet_supports_native_sidecars(version: &str) -> bool {
    kubelet_minor(version).is_some_and(|minor| minor >= NATIVE_SIDECARS_MIN_KUBELET_MINOR)
}

/// istiod's `DetectNativeSidecar` for `auto` over the cluster's Nodes (`nodes`: name → kubelet
/// version, `status.nodeInfo.kubeletVersion`): a pod already bound to a known node (`pod_node`, its
/// `spec.nodeName`) follows that node's kubelet; otherwise on only when every node's kubelet
/// supports it, so on with no nodes.
pub fn native_sidecars_supported(nodes: &BTreeMap<String, String>, pod_node: &str) -> bool {
    if !pod_node.is_empty() {
        if let Some(version) = nodes.get(pod_node) {
            return kubelet_supports_native_sidecars(version);
        }
        tracing::warn!(node = pod_node, "pod assigned to node but node not found in cluster");
    }
    nodes.values().all(|version| kubelet_supports_native_sidecars(version))
}

/// The Nodes of the control plane's cluster as `auto` reads them: each node's kubelet version, kept
/// by a Node informer ([`Nodes::apply`], [`Nodes::remove`], [`Nodes::reset`]).
#[derive(Debug)]
pub struct Nodes {
    cluster_id: String,
    versions: RwLock<BTreeMap<String, String>>,
}

impl Nodes {
    /// No nodes yet, of the cluster `cluster_id` (`--clusterID`).
    pub fn new(cluster_id: &str) -> Nodes {
        Nodes { cluster_id: cluster_id.to_string(), versions: RwLock::default() }
    }

    /// Records node `name` with its kubelet version (added or changed).
    pub fn apply(&self, name: &str, kubelet_version: &str) {
        self.versions
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), kubelet_version.to_string());
    }

    /// Forgets node `name` (deleted).
    pub fn remove(&self, name: &str) {
        self.versions.write().unwrap_or_else(|p| p.into_inner()).remove(name);
    }

    /// Replaces every node (a re-list).
    pub fn reset(&self, nodes: BTreeMap<String, String>) {
        *self.versions.write().unwrap_or_else(|p| p.into_inner()) = nodes;
    }

    /// `auto`'s answer for a pod bound to `pod_node` (empty: not bound) of the cluster `cluster`
    /// (the request path's, else the values' `global.multiCluster.clusterName`, else `Kubernetes`):
    /// off for another cluster (istiod has no Node client for it), else
    /// [`native_sidecars_supported`].
    pub fn native_sidecars(&self, cluster: &str, pod_node: &str) -> bool {
        if cluster != self.cluster_id {
            tracing::warn!(
                cluster,
                "configured to auto detect native sidecar support, but no Nodes are known for the cluster"
            );
            return false;
        }
        native_sidecars_supported(&self.versions.read().unwrap_or_else(|p| p.into_inner()), pod_node)
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
    nodes: OnceLock<Arc<Nodes>>,
}

impl std::fmt::Debug for Injector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Injector")
            .field("state", &self.state)
            .field("proxy_configs", &self.proxy_configs.get().map(|_| "set"))
            .field("nodes", &self.nodes.get())
            .finish()
    }
}

impl Injector {
    /// An injector over `state`, with no `ProxyConfig` resources until
    /// [`Injector::set_proxy_configs`].
    pub fn new(state: InjectorState) -> Injector {
        Injector {
            state: RwLock::new(Arc::new(state)),
            proxy_configs: OnceLock::new(),
            nodes: OnceLock::new(),
        }
    }

    /// Decides `ENABLE_NATIVE_SIDECARS=auto` from `nodes` for every request from now on (set once; a
    /// second call is ignored and returns `false`). Without it, `auto` is on.
    pub fn set_nodes(&self, nodes: Arc<Nodes>) -> bool {
        self.nodes.set(nodes).is_ok()
    }

    /// Whether `pod`, sent on a path with `proxy_envs`, gets a native sidecar under `state` (before
    /// the pod's `sidecar.istio.io/nativeSidecar` annotation, which the injection applies).
    fn native_sidecar(
        &self,
        state: &InjectorState,
        pod: &Json,
        proxy_envs: &BTreeMap<String, String>,
    ) -> bool {
        match (state.native_sidecars, self.nodes.get()) {
            (NativeSidecars::Enabled, _) | (NativeSidecars::Auto, None) => true,
            (NativeSidecars::Disabled, _) => false,
            (NativeSidecars::Auto, Some(nodes)) => {
                let cluster = proxy_envs
                    .get("ISTIO_META_CLUSTER_ID")
                    .filter(|c| !c.is_empty())
                    .cloned()
                    .unwrap_or_else(|| state.values.cluster_name());
                let cluster = if cluster.is_empty() { DEFAULT_CLUSTER_NAME } else { cluster.as_str() };
                nodes.native_sidecars(cluster, pod["spec"]["nodeName"].as_str().unwrap_or_default())
            }
        }
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
        let proxy_envs = parse_inject_envs(path);
        let native_sidecar = self.native_sidecar(&state, &pod, &proxy_envs);
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
            native_sidecar,
            proxy_envs,
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
    fn kubelet_versions_parse_as_istiods_version_parser_reads_them() {
        for (version, minor) in [
            ("v1.33.0", Some(33)),
            ("1.32.4", Some(32)),
            ("v1.33.1-gke.1200000", Some(33)),
            ("v1.31.3+k3s1", Some(31)),
            ("v1.34.0-rc.1+build.7", Some(34)),
            ("v1.33", Some(33)),
            ("v1", Some(0)),
            ("1.33.0rc1", Some(33)),
            ("1.33.0-", Some(33)),
            ("v2.5.0", Some(5)),
            ("", None),
            ("v", None),
            ("V1.33.0", None),
            (" v1.33.0", None),
            ("1..33", None),
            ("1.33.", None),
            ("1.33.0.beta", None),
            ("1.33.0+", None),
            ("1.33.0-a.", None),
            ("1.99999999999999999999", None),
        ] {
            assert_eq!(kubelet_minor(version), minor, "{version:?}");
        }
        assert!(kubelet_supports_native_sidecars("v1.33.0"));
        assert!(!kubelet_supports_native_sidecars("v1.32.9"));
        assert!(!kubelet_supports_native_sidecars("not a version"));
        // The minor number only, as istiod compares it.
        assert!(!kubelet_supports_native_sidecars("v2.0.0"));
    }

    #[test]
    fn auto_follows_every_node_or_the_pods_node() {
        let nodes = |list: &[(&str, &str)]| -> BTreeMap<String, String> {
            list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
        };
        assert!(native_sidecars_supported(&nodes(&[]), ""), "no nodes: on");
        assert!(native_sidecars_supported(&nodes(&[("a", "v1.33.0"), ("b", "v1.34.1")]), ""));
        let mixed = nodes(&[("old", "v1.32.0"), ("new", "v1.33.0")]);
        assert!(!native_sidecars_supported(&mixed, ""), "one old node turns it off");
        assert!(!native_sidecars_supported(&nodes(&[("x", "garbage")]), ""), "an unparsable version is old");
        assert!(native_sidecars_supported(&mixed, "new"), "a bound pod follows its node");
        assert!(!native_sidecars_supported(&mixed, "old"));
        assert!(!native_sidecars_supported(&mixed, "gone"), "an unknown node: every node");

        let known = Nodes::new("Kubernetes");
        assert!(known.native_sidecars("Kubernetes", ""));
        known.apply("old", "v1.32.0");
        assert!(!known.native_sidecars("Kubernetes", ""));
        known.apply("old", "v1.33.2");
        assert!(known.native_sidecars("Kubernetes", ""));
        known.apply("older", "v1.30.0");
        known.remove("older");
        assert!(known.native_sidecars("Kubernetes", ""));
        known.reset(nodes(&[("n", "v1.29.0")]));
        assert!(!known.native_sidecars("Kubernetes", ""));
        known.reset(BTreeMap::new());
        assert!(!known.native_sidecars("remote", ""), "no Nodes known for another cluster: off");
    }

    #[test]
    fn native_sidecars_env_reads_as_istiod() {
        assert_eq!(NativeSidecars::from_env_value(None), NativeSidecars::Auto);
        assert_eq!(NativeSidecars::from_env_value(Some("auto")), NativeSidecars::Auto);
        assert_eq!(NativeSidecars::from_env_value(Some("true")), NativeSidecars::Enabled);
        assert_eq!(NativeSidecars::from_env_value(Some("false")), NativeSidecars::Disabled);
        assert_eq!(NativeSidecars::from_env_value(Some("TRUE")), NativeSidecars::Disabled);
        assert_eq!(NativeSidecars::from_env_value(Some("")), NativeSidecars::Disabled);
    }

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
