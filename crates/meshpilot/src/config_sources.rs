//! Mesh config `configSources` → the config sources of `meshpilot discovery`, as istiod's
//! `initConfigSources`: with `configSources` set, the aggregate is made of exactly those sources,
//! in the order given (`fs:///PATH` a file source, `k8s://` the cluster's custom
//! resources, `xds://HOST:PORT` an MCP client), and `--config-dir` is not read (istiod ignores
//! `--configDir` and its own cluster's CRDs the same way). The Kubernetes service registry is not a
//! config source and still follows `--registries`.
//!
//! A MeshConfig received over MCP becomes the mesh config: its fields are laid over the local
//! `--mesh-config` (fields the server leaves unset keep their local value), read with the same
//! rules and warnings as `--mesh-config`, and applied with a full push. Local-only settings stay
//! local: `configSources` and `discoverySelectors` are taken from the local file (they are read
//! once, at start) and so is `trustDomain` (the CA's identities are issued for it). The local mesh
//! config is the one in force when the MeshConfig arrives (it is watched: `crate::mesh_source`),
//! and a later local change is laid under the last MeshConfig received ([`effective_mesh`]).

use std::{
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
};

use config::mesh::ConfigSource;
use config::{FileSource, ReadOnlySource};
use discovery::{Input, Inputs};
use model::ConfigStoreController;
use serde_json::Value;
use tracing::{debug, info, warn};

/// The sources built from `configSources`.
pub(crate) struct Built {
    /// The sources, in the order given.
    pub sources: Vec<Arc<dyn ConfigStoreController>>,
    /// The file sources among them (for their bad-file status).
    pub files: Vec<Arc<FileSource>>,
    /// The cluster source, when `k8s://` is listed.
    pub cluster: Option<Arc<kube_source::KubeSource>>,
}

/// What building the sources needs from the command line.
pub(crate) struct Context<'a> {
    /// File source settings (domain, default namespace).
    pub file_options: &'a config::FileSourceOptions,
    /// `--revision` / `REVISION`.
    pub revision: Option<&'a str>,
    /// `--domain`.
    pub domain: &'a str,
    /// The local mesh config text (`--mesh-config`, or empty).
    pub local_mesh: tokio::sync::watch::Receiver<String>,
    /// Where the MeshConfig last received over MCP is kept (for [`effective_mesh`]).
    pub received_mesh: ReceivedMesh,
    /// The node an MCP client presents (`POD_NAME`, `POD_NAMESPACE`, `INSTANCE_IP`).
    pub mcp_node: &'a mcp::NodeIdentity,
    /// The cluster's config source (used for `k8s://`; `None` without cluster access).
    pub kube: Option<Arc<kube_source::KubeSource>>,
    /// The DiscoveryServer's inputs: MeshConfig from an MCP server is sent there.
    pub inputs: &'a Inputs,
}

/// Builds the sources of `configured`, in order.
///
/// # Errors
/// An unreadable directory, `k8s://` without cluster access, unusable TLS settings.
pub(crate) fn build(configured: &[ConfigSource], cx: &Context<'_>) -> Result<Built, String> {
    let mut built = Built { sources: Vec::new(), files: Vec::new(), cluster: None };
    for source in configured {
        match source {
            ConfigSource::File(dir) => {
                let file = Arc::new(FileSource::new(dir.clone(), cx.file_options.clone()).map_err(|e| {
                    format!("mesh config configSources {}: cannot read directory: {e}", source.address())
                })?);
                for bad in &file.status().bad_files {
                    warn!(file = %bad.file.display(), errors = bad.errors.len(), "bad config file: its objects are not loaded");
                }
                built.sources.push(Arc::new(ReadOnlySource::new(FileSource::clone(&file))));
                built.files.push(file);
            }
            ConfigSource::Kubernetes => {
                let Some(kube) = cx.kube.clone() else {
                    return Err("mesh config configSources lists k8s:// but there is no cluster access \
                                (--kubeconfig, KUBECONFIG or an in-cluster service account)"
                        .into());
                };
                if built.cluster.is_some() {
                    return Err("mesh config configSources lists k8s:// twice".into());
                }
                built.cluster = Some(kube.clone());
                built.sources.push(kube);
            }
            ConfigSource::Xds { address, tls } => {
                let mut options = mcp::McpOptions::new(address.clone());
                options.tls = tls.clone();
                options.node = cx.mcp_node.clone();
                options.parse.domain_suffix = cx.domain.to_string();
                options.revision = cx.revision.map(str::to_string);
                options.mesh_handler = Some(mesh_handler(
                    cx.local_mesh.clone(),
                    cx.received_mesh.clone(),
                    cx.domain,
                    cx.inputs.clone(),
                )?);
                let mcp = mcp::McpSource::new(options)?;
                info!(source = %source.address(), tls = tls.is_some(), "reading Istio config from an MCP-over-xDS server");
                built.sources.push(Arc::new(ReadOnlySource::new(mcp)));
            }
        }
    }
    Ok(built)
}

/// The local mesh config as JSON (an empty map for none).
fn local_json(text: &str) -> Result<serde_json::Map<String, Value>, String> {
    let doc = api::yaml::parse_documents(text).into_iter().next();
    match doc {
        None => Ok(serde_json::Map::new()),
        Some(Err(e)) => Err(format!("line {}: {}", e.mark.line, e.message)),
        Some(Ok(doc)) => match doc.root.map(|n| n.to_json()) {
            None | Some(Value::Null) => Ok(serde_json::Map::new()),
            Some(Value::Object(map)) => Ok(map),
            Some(_) => Err("mesh config must be a YAML map".into()),
        },
    }
}

/// Overlays a received MeshConfig (as JSON) on the local mesh config; the local-only fields stay.
pub(crate) fn merged_mesh(local: &serde_json::Map<String, Value>, received: &Value) -> Value {
    let mut merged = local.clone();
    if let Value::Object(fields) = received {
        for (key, value) in fields {
            if matches!(key.as_str(), "configSources" | "discoverySelectors" | "trustDomain") {
                if local.get(key).unwrap_or(&Value::Null) != value && key == "trustDomain" {
                    warn!(
                        received = %value,
                        "mesh config from the config source sets trustDomain; the local one stays (identities are issued for it)"
                    );
                }
                continue;
            }
            merged.insert(key.clone(), value.clone());
        }
    }
    Value::Object(merged)
}

/// The MeshConfig (as JSON) last received from an MCP config source, `None` before any.
pub(crate) type ReceivedMesh = Arc<Mutex<Option<Value>>>;

/// The mesh config in force for the local mesh config text `local_text`: the local one, with the
/// MeshConfig last received over MCP laid over it when there is one ([`merged_mesh`]).
///
/// # Errors
/// The local text or the merged config does not read.
pub(crate) fn effective_mesh(
    local_text: &str,
    received: &ReceivedMesh,
    domain: &str,
) -> Result<(model::push::MeshSettings, Vec<String>), String> {
    let received = received.lock().unwrap_or_else(PoisonError::into_inner).clone();
    match received {
        None => config::mesh::parse_mesh_config(local_text, domain),
        Some(received) => {
            let merged = merged_mesh(&local_json(local_text)?, &received);
            let text = serde_json::to_string(&merged).map_err(|e| e.to_string())?;
            config::mesh::parse_mesh_config(&text, domain)
        }
    }
}

/// The handler applying MeshConfig from an MCP server: merged over the local mesh config in force
/// (`local`), checked, kept in `received`, and sent to the DiscoveryServer as an [`Input::Mesh`] (a
/// full push when it differs from what is in force; received before the server runs, it is in the
/// first snapshot).
fn mesh_handler(
    local: tokio::sync::watch::Receiver<String>,
    received: ReceivedMesh,
    domain: &str,
    inputs: Inputs,
) -> Result<mcp::MeshHandler, String> {
    local_json(&local.borrow()).map_err(|e| format!("--mesh-config: {e}"))?;
    let domain = domain.to_string();
    Ok(Arc::new(move |value: &Value| {
        let local_text = local.borrow().clone();
        let merged = merged_mesh(&local_json(&local_text)?, value);
        let text = serde_json::to_string(&merged).map_err(|e| e.to_string())?;
        let (mesh, warnings) = config::mesh::parse_mesh_config(&text, &domain)?;
        debug!("mesh config received from the config source");
        *received.lock().unwrap_or_else(PoisonError::into_inner) = Some(value.clone());
        inputs.send(Input::Mesh(Box::new(mesh)));
        Ok(warnings)
    }))
}

/// `--config-dir` flags ignored because `configSources` is set (istiod ignores `--configDir` too).
pub(crate) fn warn_ignored(config_dirs: &[PathBuf], kubeconfig_crds: bool) {
    for dir in config_dirs {
        warn!(dir = %dir.display(), "--config-dir ignored: mesh config configSources is set (as istiod)");
    }
    if kubeconfig_crds {
        info!("the cluster's Istio config is read only if configSources lists k8s://");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_mesh_config_overlays_the_local_one_except_local_only_fields() {
        let local = local_json(
            "rootNamespace: local\ntrustDomain: td.local\nconfigSources: [{address: k8s://}]\n\
                                connectTimeout: 3s\n",
        )
        .unwrap();
        let received = serde_json::json!({
            "rootNamespace": "remote", "trustDomain": "td.remote",
            "configSources": [{"address": "xds://x:1"}], "enableAutoMtls": false,
        });
        let merged = merged_mesh(&local, &received);
        assert_eq!(merged["rootNamespace"], "remote");
        assert_eq!(merged["trustDomain"], "td.local");
        assert_eq!(merged["configSources"][0]["address"], "k8s://");
        assert_eq!(merged["connectTimeout"], "3s");
        assert_eq!(merged["enableAutoMtls"], false);
        assert!(local_json("- a\n").is_err());
        assert!(local_json("").unwrap().is_empty());
    }
}
