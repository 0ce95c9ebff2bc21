//! `meshpilot discovery`'s Kubernetes Ingress source (Istio's ingress controller): the cluster's
//! Ingresses as Gateways and VirtualServices, and their `status.loadBalancer` written by the leader of
//! `istio-leader`; and the automated deployment of Gateway API Gateways of class `istio`
//! (docs/INGRESS.md).

use std::{path::Path, sync::Arc};

use ingress::IngressSettings;
use kube_source::{
    gateway_deployment::{DeploymentOptions, GatewayDeployer},
    ingress_source::{IngressSource, IngressSourceOptions},
    leader::LeaderElectionOptions,
};
use model::ConfigStoreController;
use tracing::{info, warn};

/// The source for the cluster of `kubeconfig`, with the Ingress fields of the mesh config (`mesh`, as
/// JSON) and `K8S_INGRESS_NS` (default `istio-system`).
///
/// # Errors
/// The kubeconfig cannot be read; `PILOT_ENABLE_LEADER_ELECTION` is not a boolean.
pub async fn source(
    kubeconfig: &Path,
    mesh: &serde_json::Value,
    domain: &str,
) -> Result<Arc<dyn ConfigStoreController>, String> {
    let config = kube_source::client_config(Some(kubeconfig)).await.map_err(|e| e.to_string())?;
    let (mut settings, warnings) = IngressSettings::from_mesh_json(mesh);
    for w in warnings {
        warn!("mesh config {w}");
    }
    if let Some(ns) = std::env::var("K8S_INGRESS_NS").ok().filter(|n| !n.is_empty()) {
        settings.namespace = ns;
    }
    let leader = LeaderElectionOptions::from_env()?;
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
    Ok(Arc::new(IngressSource::new(config, options)))
}

/// The automated Gateway deployment for the cluster of `kubeconfig`, unless
/// `PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER=false` (Istio's switch, default true).
///
/// # Errors
/// The kubeconfig cannot be read; an environment variable is not a boolean.
pub async fn gateway_deployer(
    kubeconfig: &Path,
    revision: Option<&str>,
) -> Result<Option<GatewayDeployer>, String> {
    if !env_bool("PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER", true)? {
        return Ok(None);
    }
    let config = kube_source::client_config(Some(kubeconfig)).await.map_err(|e| e.to_string())?;
    let options = DeploymentOptions {
        revision: revision.unwrap_or_default().to_string(),
        leader: LeaderElectionOptions::from_env()?,
        ..DeploymentOptions::default()
    };
    Ok(Some(GatewayDeployer::new(config, options)))
}

/// A boolean environment variable as Go's `strconv.ParseBool` reads it (Istio's `env.Register`), `default`
/// when unset or empty.
///
/// # Errors
/// Any other value, naming the variable.
pub fn env_bool(name: &str, default: bool) -> Result<bool, String> {
    match std::env::var(name).ok().as_deref() {
        None | Some("") => Ok(default),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some(other) => Err(format!("{name}={other:?}: expected true or false")),
    }
}
