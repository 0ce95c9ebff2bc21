//! `meshpilot discovery`'s Kubernetes Ingress source (Istio's ingress controller): the cluster's
//! Ingresses as Gateways and VirtualServices, and their `status.loadBalancer` written by the leader of
//! `istio-leader`; and the automated deployment of Gateway API Gateways of class `istio`
//! (docs/INGRESS.md).

use std::sync::Arc;

use config::ReadOnlySource;
use ingress::IngressSettings;
use kube_source::{
    gateway_deployment::{DeploymentFailures, DeploymentOptions, GatewayDeployer},
    ingress_source::{IngressSource, IngressSourceOptions},
};
use model::ConfigStoreController;
use tracing::{info, warn};

use crate::env::DiscoveryEnv;

/// The source for `cluster`, with the Ingress fields of the mesh config (`mesh`, as
/// JSON), `K8S_INGRESS_NS` (default `istio-system`) and the leader election of `env`.
///
/// # Errors
/// The kubeconfig cannot be read.
pub async fn source(
    cluster: &kube_source::Cluster,
    mesh: &serde_json::Value,
    domain: &str,
    env: &DiscoveryEnv,
) -> Result<Arc<dyn ConfigStoreController>, String> {
    let config = cluster.config();
    let (mut settings, warnings) = IngressSettings::from_mesh_json(mesh);
    for w in warnings {
        warn!("mesh config {w}");
    }
    if let Some(ns) = &env.ingress_namespace {
        settings.namespace = ns.clone();
    }
    let leader = env.leader.clone();
    info!(
        mode = settings.mode.as_str(),
        class = %settings.ingress_class,
        service = %settings.ingress_service,
        namespace = %settings.namespace,
        "reading Kubernetes Ingresses"
    );
    let options = IngressSourceOptions {
        settings,
        domain_suffix: domain.to_string(),
        leader: Some(leader),
        ..IngressSourceOptions::default()
    };
    Ok(Arc::new(ReadOnlySource::new(IngressSource::new(config, options))))
}

/// What the automated Gateway deployment renders with: the injection config in force (its
/// `kube-gateway` template, values and mesh config) and the push context's `ProxyConfig` resources.
pub struct GatewayRendering {
    /// `--clusterID`.
    pub cluster_id: String,
    /// The sidecar injector's state (files or ConfigMap), if an injection config was found.
    pub injector: Option<Arc<inject::injector::Injector>>,
    /// The `ProxyConfig` resources of the current push context.
    pub proxy_configs: inject::injector::ProxyConfigSource,
    /// Where render failures are listed (`/debug/configstatusz`).
    pub failures: DeploymentFailures,
}

/// The automated Gateway deployment for `cluster`, unless
/// `PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER=false` (Istio's switch, default true).
///
/// # Errors
/// The kubeconfig cannot be read.
pub async fn gateway_deployer(
    cluster: &kube_source::Cluster,
    revision: Option<&str>,
    env: &DiscoveryEnv,
    rendering: GatewayRendering,
) -> Result<Option<GatewayDeployer>, String> {
    if !env.gateway_deployment_controller {
        return Ok(None);
    }
    let config = cluster.config();
    let options = DeploymentOptions {
        revision: revision.filter(|r| *r != "default").unwrap_or_default().to_string(),
        cluster_id: rendering.cluster_id,
        system_namespace: env.pod_namespace.clone(),
        injector: rendering.injector,
        proxy_configs: Some(rendering.proxy_configs),
        failures: rendering.failures,
        leader: env.leader.clone(),
        ..DeploymentOptions::default()
    };
    Ok(Some(GatewayDeployer::new(config, options)))
}

/// The Gateways whose objects could not be rendered or applied, in configstatusz's `invalidObjects`
/// shape (kind `Gateway`, source `gateway deployment`).
pub fn gateway_invalid_objects(failures: DeploymentFailures) -> meshpilot_http::invalid::InvalidObjectsFn {
    use meshpilot_http::invalid::{InvalidFinding, InvalidObject, InvalidObjectsFn};
    InvalidObjectsFn(Arc::new(move || {
        failures
            .list()
            .into_iter()
            .map(|(namespace, name, message)| InvalidObject {
                kind: "Gateway".into(),
                namespace,
                name,
                resource_version: None,
                source: "gateway deployment".into(),
                kept_previous: false,
                findings: vec![InvalidFinding { path: String::new(), message }],
            })
            .collect()
    }))
}
