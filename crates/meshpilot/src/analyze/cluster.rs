//! `meshpilot analyze --use-kube`: the cluster's objects as JSON for the analysis (Istio's
//! `AddRunningKubeSource`): every Istio kind, the Kubernetes kinds the analyzers read
//! (`kube_source::client::ANALYSIS_RESOURCES`), and the mesh
//! config from the `istio` ConfigMap of the istio namespace.

use std::path::Path;

use api::Kind;

/// What the cluster gave.
pub(super) struct ClusterObjects {
    /// Every object listed.
    pub(super) objects: Vec<serde_json::Value>,
    /// The `mesh` key of the `istio` ConfigMap in the istio namespace, when present.
    pub(super) mesh_config: Option<String>,
    /// The kubeconfig context's namespace.
    pub(super) default_namespace: Option<String>,
}

/// Lists the cluster's objects (all namespaces; messages are filtered by namespace afterwards, as
/// istioctl does).
///
/// # Errors
/// The kubeconfig cannot be used or a list fails (other than a resource the server does not serve).
pub(super) fn list(kubeconfig: Option<&Path>, istio_namespace: &str) -> Result<ClusterObjects, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    rt.block_on(async {
        let conn = kube_source::connect(kubeconfig).await.map_err(|e| e.to_string())?;
        let client = &conn.client;
        let mut objects = Vec::new();
        for kind in Kind::ISTIO {
            let schema = kind.schema();
            let api_version = format!("{}/{}", schema.group, schema.version);
            let listed =
                kube_source::client::list_resource(client, &api_version, kind.as_str(), schema.plural, None)
                    .await
                    .map_err(|e| e.to_string())?;
            objects.extend(listed.unwrap_or_default());
        }
        objects
            .extend(kube_source::client::list_analysis_resources(client).await.map_err(|e| e.to_string())?);
        let mesh_config = objects
            .iter()
            .find(|o| {
                o["kind"] == "ConfigMap"
                    && o["metadata"]["name"] == "istio"
                    && o["metadata"]["namespace"] == istio_namespace
            })
            .and_then(|o| o["data"]["mesh"].as_str().map(String::from));
        Ok(ClusterObjects { objects, mesh_config, default_namespace: Some(conn.default_namespace.clone()) })
    })
}
