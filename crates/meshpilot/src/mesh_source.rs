//! Where `meshpilot discovery` finds the mesh config and the mesh networks, as istiod does
//! (`pilot/pkg/bootstrap/mesh.go`, `getConfigurationSources`; `pkg/config/mesh/kubemesh`):
//!
//! 1. the file (`--meshConfig`, default `./etc/istio/config/mesh`; `--networksConfig`, default
//!    `./etc/istio/config/meshNetworks`; relative to the working directory) when it exists, watched;
//! 2. else, with cluster access, the ConfigMap `istio` (`istio-<revision>` for a revision other than
//!    `default`) in `POD_NAMESPACE`, key `mesh` / `meshNetworks`, watched;
//! 3. else Istio's defaults (istiod: "Using default mesh - missing file … and no k8s client").
//!
//! A change is checked first; a good one replaces the value in force (the mesh config is sent to the
//! DiscoveryServer as `discovery::Input::Mesh`, a full push, and to the sidecar injector through
//! [`MeshKeeper::subscribe`]); a broken one (YAML, a field) keeps the last good value and is reported:
//! a warning naming the source and the reason, `meshpilot_mesh_config_errors{source}` and the `mesh`
//! section of `/debug/configstatusz`. Fields read only at start (`configSources`,
//! `discoverySelectors`, `trustDomain`, the Ingress fields) are logged as needing a restart when they
//! change; `trustDomain` keeps its start value in force (the CA issues identities for it).
//!
//! istiod's `SHARED_MESH_CONFIG` (a second, user ConfigMap merged under the first) is not supported:
//! it is an experimental istiod feature that Istio's charts do not set.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError, RwLock},
};

use serde_json::{Value, json};
use tokio::{sync::watch, task::JoinHandle};
use tracing::{info, warn};

/// istiod's `--meshConfig` default (relative to the working directory).
pub const DEFAULT_MESH_CONFIG: &str = "./etc/istio/config/mesh";
/// istiod's `--networksConfig` default.
pub const DEFAULT_NETWORKS_CONFIG: &str = "./etc/istio/config/meshNetworks";
/// The mesh config's key in the ConfigMap (`kubemesh.MeshConfigKey`).
pub const MESH_KEY: &str = "mesh";
/// The mesh networks' key in the ConfigMap (`kubemesh.MeshNetworksKey`).
pub const NETWORKS_KEY: &str = "meshNetworks";
/// The counter of refused mesh config and mesh networks versions (label `source`: the file path or
/// `configmap:NS/NAME:KEY`). istiod only logs them.
pub const ERRORS_METRIC: &str = "meshpilot_mesh_config_errors";

/// Mesh config fields read once at start; a change is logged as needing a restart.
const START_ONLY: &[&str] = &[
    "configSources",
    "discoverySelectors",
    "trustDomain",
    "ingressClass",
    "ingressService",
    "ingressControllerMode",
    "ingressSelector",
];

/// Where a mesh config (or mesh networks) comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file (watched).
    File(PathBuf),
    /// A key of a ConfigMap (watched).
    ConfigMap {
        /// `POD_NAMESPACE`.
        namespace: String,
        /// `istio` or `istio-<revision>`.
        name: String,
        /// `mesh` or `meshNetworks`.
        key: &'static str,
    },
    /// Istio's defaults (no file, no cluster).
    Defaults,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::ConfigMap { namespace, name, key } => write!(f, "configmap:{namespace}/{name}:{key}"),
            Origin::Defaults => write!(f, "defaults"),
        }
    }
}

/// The mesh ConfigMap's name (istiod's `getMeshConfigMapName`): `istio`, or `istio-<revision>` for a
/// revision other than empty and `default`.
pub fn mesh_configmap_name(revision: Option<&str>) -> String {
    match revision.filter(|r| !r.is_empty() && *r != "default") {
        Some(rev) => format!("istio-{rev}"),
        None => "istio".to_string(),
    }
}

/// istiod's choice of source (`getConfigurationSources`): `file` when it exists (`file_exists`),
/// else the ConfigMap key with a cluster, else the defaults. Pure.
pub fn locate(
    file: &Path,
    file_exists: bool,
    cluster: bool,
    namespace: &str,
    revision: Option<&str>,
    key: &'static str,
) -> Origin {
    if file_exists {
        Origin::File(file.to_path_buf())
    } else if cluster {
        Origin::ConfigMap { namespace: namespace.to_string(), name: mesh_configmap_name(revision), key }
    } else {
        Origin::Defaults
    }
}

/// The origin's text now: `None` when absent (a ConfigMap or key that does not exist, the defaults).
///
/// # Errors
/// A file that cannot be read; the API server cannot be asked.
pub async fn read(origin: &Origin, client: Option<&kube_source::Client>) -> Result<Option<String>, String> {
    match (origin, client) {
        (Origin::File(path), _) => read_file(path).map(Some),
        (Origin::ConfigMap { namespace, name, key }, Some(client)) => {
            Ok(kube_source::configmap_watch::get(client, namespace, name)
                .await?
                .and_then(|mut d| d.remove(*key)))
        }
        _ => Ok(None),
    }
}

fn read_file(path: &Path) -> Result<String, String> {
    api::yaml::read_config_text(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// What a keeper checks and applies: the text → the value to keep (as JSON for the debug
/// endpoints), or why it is refused.
pub type Apply = Box<dyn Fn(&str) -> Result<Value, String> + Send + Sync>;

/// Keeps one mesh source's last good value and reports refused versions (see the module).
pub struct MeshKeeper {
    what: &'static str,
    origin: Origin,
    apply: Apply,
    state: Mutex<KeeperState>,
    status: Arc<RwLock<Value>>,
    status_key: &'static str,
}

#[derive(Default)]
struct KeeperState {
    /// The last text seen (good or not): an unchanged text is not applied or reported again.
    seen: Option<Option<String>>,
    /// The value in force, as JSON.
    value: Value,
    /// Why the last text was refused (`None` when it was applied).
    error: Option<String>,
    /// Refused versions so far.
    errors: u64,
}

impl MeshKeeper {
    /// A keeper of `what` (`mesh config`, `mesh networks`) read from `origin`; `status` is the shared
    /// `mesh` section of `/debug/configstatusz`, where this keeper writes under `status_key`.
    pub fn new(
        what: &'static str,
        origin: Origin,
        apply: Apply,
        status: Arc<RwLock<Value>>,
        status_key: &'static str,
    ) -> Arc<MeshKeeper> {
        Arc::new(MeshKeeper { what, origin, apply, state: Mutex::default(), status, status_key })
    }

    /// Records the state at start: `seen` was read, `value` is in force, and `error` says why `seen`
    /// is not (reported as a refused version). The watch's first delivery of the same text is then
    /// not applied or reported again.
    pub fn started(&self, seen: Option<String>, value: Value, error: Option<String>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.seen = Some(seen);
        state.value = value;
        if let Some(reason) = &error {
            state.errors += 1;
            metrics::counter!(ERRORS_METRIC, "source" => self.origin.to_string()).increment(1);
            warn!(source = %self.origin, %reason, "{} not applied; Istio's defaults are in force", self.what);
        }
        state.error = error;
        self.publish(&state);
    }

    /// Checks `text` (`None`: absent, Istio's defaults) and applies it when good; a refused one is
    /// logged, counted and shown, and the last good value stays. An unchanged text does nothing.
    /// Returns whether it was applied.
    pub fn offer(&self, text: Option<String>) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.seen.as_ref() == Some(&text) {
            return false;
        }
        state.seen = Some(text.clone());
        let applied = match (self.apply)(text.as_deref().unwrap_or_default()) {
            Ok(value) => {
                info!(source = %self.origin, "{} applied", self.what);
                state.value = value;
                state.error = None;
                true
            }
            Err(reason) => {
                state.errors += 1;
                metrics::counter!(ERRORS_METRIC, "source" => self.origin.to_string()).increment(1);
                warn!(source = %self.origin, %reason, "{} not applied; the last good one stays in force", self.what);
                state.error = Some(reason);
                false
            }
        };
        self.publish(&state);
        applied
    }

    fn publish(&self, state: &KeeperState) {
        let section = json!({
            "source": self.origin.to_string(),
            "inForce": state.value,
            "lastError": state.error,
            "errors": state.errors,
        });
        let mut status = self.status.write().unwrap_or_else(PoisonError::into_inner);
        if !status.is_object() {
            *status = json!({});
        }
        status[self.status_key] = section;
    }

    /// Watches the origin until `shutdown`, offering each new text (a file: its directory, so that a
    /// ConfigMap mount's `..data` swap is seen, re-read every minute too; a ConfigMap: its watch).
    /// `None` for the defaults (nothing to watch).
    pub fn watch(
        self: &Arc<Self>,
        client: Option<kube_source::Client>,
        shutdown: model::Shutdown,
    ) -> Option<JoinHandle<()>> {
        let keeper = self.clone();
        match (&self.origin, client) {
            (Origin::File(path), _) => {
                let path = path.clone();
                let dir = path
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."))
                    .to_path_buf();
                let options = config::watch::WatchOptions {
                    recursive: false,
                    settle: std::time::Duration::from_millis(100),
                    recheck: Some(std::time::Duration::from_secs(60)),
                    what: keeper.what,
                };
                Some(tokio::spawn(async move {
                    config::watch::watch_dirs(&[dir], &options, shutdown, || match read_file(&path) {
                        Ok(text) => {
                            keeper.offer(Some(text));
                        }
                        Err(reason) => warn!(source = %keeper.origin, %reason, "{} not re-read; the last good one stays in force", keeper.what),
                    })
                    .await;
                }))
            }
            (Origin::ConfigMap { namespace, name, key }, Some(client)) => {
                let key = *key;
                let on_data = move |mut data: BTreeMap<String, String>| {
                    keeper.offer(data.remove(key));
                };
                Some(tokio::spawn(kube_source::configmap_watch::watch(
                    client,
                    namespace.clone(),
                    name.clone(),
                    on_data,
                    shutdown,
                )))
            }
            _ => None,
        }
    }

    /// The value in force (JSON).
    #[cfg(test)]
    fn value(&self) -> Value {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).value.clone()
    }
}

/// A mesh config read by every reader of [`config::mesh`] ([`check_mesh`]).
pub struct CheckedMesh {
    /// The settings the push uses.
    pub settings: model::push::MeshSettings,
    /// Warnings (unknown fields, …).
    pub warnings: Vec<String>,
    /// `discoverySelectors`.
    pub selectors: model::selector::DiscoverySelectors,
    /// `configSources`.
    pub config_sources: Vec<config::mesh::ConfigSource>,
}

/// The mesh config checks of `meshpilot discovery`, whatever its source: [`config::mesh`]'s readers
/// (settings, `discoverySelectors`, `configSources`), each run once.
///
/// # Errors
/// The first reader's error (YAML, a field).
pub fn check_mesh(text: &str, domain: &str) -> Result<CheckedMesh, String> {
    let (settings, warnings) = config::mesh::parse_mesh_config(text, domain)?;
    Ok(CheckedMesh {
        settings,
        warnings,
        selectors: config::mesh::parse_discovery_selectors(text)?,
        config_sources: config::mesh::parse_config_sources(text)?,
    })
}

/// The start-only fields (see the module) whose value in `new` differs from `start` (both the mesh
/// config as JSON).
pub fn start_only_changes(start: &Value, new: &Value) -> Vec<&'static str> {
    START_ONLY.iter().copied().filter(|field| start.get(field) != new.get(field)).collect()
}

/// What applying a mesh config at run time needs.
pub struct MeshApply {
    /// `--domain`.
    pub domain: String,
    /// The mesh config in force at start (JSON): start-only fields are compared with it, and its
    /// `trustDomain` stays.
    pub start: Value,
    /// The trust domain in force (from the start mesh config).
    pub trust_domain: String,
    /// The DiscoveryServer's inputs.
    pub inputs: discovery::Inputs,
    /// The local mesh config text in force, for the sidecar injector and the MCP overlay.
    pub text: watch::Sender<String>,
    /// The MeshConfig last received over MCP (`configSources` `xds://`), laid over the local one.
    pub received: crate::config_sources::ReceivedMesh,
}

/// The keeper's apply function for the mesh config: checked ([`check_mesh`]), start-only changes
/// logged, then sent to the DiscoveryServer (with the MeshConfig received over MCP laid over it, if
/// any) and published to the injector's subscribers.
pub fn mesh_apply(cx: MeshApply) -> Apply {
    Box::new(move |text: &str| {
        let local = check_mesh(text, &cx.domain)?;
        for w in &local.warnings {
            warn!("mesh config: {w}");
        }
        for field in start_only_changes(&cx.start, &local.settings.source) {
            warn!(field, "mesh config field changed: it takes effect at the next start (needs a restart)");
        }
        // The local settings are in force unless a MeshConfig received over MCP is laid over them.
        let received = cx.received.lock().unwrap_or_else(PoisonError::into_inner).is_some();
        let mut mesh = if received {
            crate::config_sources::effective_mesh(text, &cx.received, &cx.domain)?.0
        } else {
            local.settings
        };
        let new = mesh.source.clone();
        mesh.trust_domain.clone_from(&cx.trust_domain);
        cx.inputs.send(discovery::Input::Mesh(Box::new(mesh)));
        cx.text.send_replace(text.to_string());
        Ok(new)
    })
}

/// The keeper's apply function for mesh networks: checked ([`config::mesh_networks`]), kept, and sent
/// to the DiscoveryServer through `inputs` as `discovery::Input::MeshNetworks` (a changed value
/// pushes to every proxy, as istiod's `NetworksTrigger`).
pub fn networks_apply(inputs: discovery::Inputs) -> Apply {
    Box::new(move |text: &str| {
        let value = config::mesh_networks::parse_mesh_networks(text)?;
        let networks = model::network::MeshNetworks::from_json(&value)?;
        inputs.send(discovery::Input::MeshNetworks(Arc::new(networks)));
        Ok(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_found_in_istiods_order() {
        let file = Path::new("./etc/istio/config/mesh");
        assert_eq!(locate(file, true, true, "istio-system", None, MESH_KEY), Origin::File(file.into()));
        assert_eq!(
            locate(file, false, true, "mesh-ns", Some("canary"), MESH_KEY),
            Origin::ConfigMap { namespace: "mesh-ns".into(), name: "istio-canary".into(), key: MESH_KEY }
        );
        assert_eq!(
            locate(file, false, true, "istio-system", Some("default"), NETWORKS_KEY).to_string(),
            "configmap:istio-system/istio:meshNetworks"
        );
        assert_eq!(locate(file, false, false, "istio-system", None, MESH_KEY), Origin::Defaults);
        assert_eq!(mesh_configmap_name(Some("")), "istio");
    }

    #[test]
    fn a_broken_version_keeps_the_last_good_one_and_is_shown() {
        let status = Arc::new(RwLock::new(Value::Null));
        let keeper = MeshKeeper::new(
            "mesh networks",
            Origin::File("/m".into()),
            networks_apply(discovery::Inputs::new()),
            status.clone(),
            "meshNetworks",
        );
        assert!(keeper.offer(Some("networks: {n1: {}}\n".into())));
        assert!(!keeper.offer(Some("networks: {n1: {}}\n".into())), "unchanged text is not applied again");
        assert!(!keeper.offer(Some("networks: [\n".into())));
        assert_eq!(keeper.value(), json!({"networks": {"n1": {}}}));
        let shown = status.read().unwrap()["meshNetworks"].clone();
        assert_eq!(shown["errors"], 1);
        assert_eq!(shown["source"], "/m");
        assert!(shown["lastError"].as_str().unwrap().contains("line"), "{shown}");
        assert!(keeper.offer(None), "absent: Istio's defaults (no networks)");
        assert_eq!(status.read().unwrap()["meshNetworks"]["lastError"], Value::Null);
    }

    #[test]
    fn start_only_fields_are_named_when_they_change() {
        let start = json!({"trustDomain": "a", "connectTimeout": "1s"});
        let new = json!({"trustDomain": "b", "connectTimeout": "2s", "discoverySelectors": []});
        assert_eq!(start_only_changes(&start, &new), ["discoverySelectors", "trustDomain"]);
    }
}
