//! Istio's `deployment` analyzers (`pkg/config/analysis/analyzers/deployment`).
//!
//! * [`ServiceAssociationAnalyzer`] (`deployment.ServiceAssociationAnalyzer`; Istio's metadata name is
//!   `deployment.MultiServiceAnalyzer`): for every Deployment in the mesh (see
//!   [`workload::in_mesh`]; waypoints, labelled `gateway.istio.io/managed=istio.io-mesh-controller`,
//!   are skipped), the Services of its namespace whose non-empty `selector` matches its pod template
//!   labels are collected. A service port number used with different protocols (empty reads as TCP)
//!   gives IST0116 DeploymentAssociatedToMultipleServices (deployment name, port, the services sorted);
//!   a target port (the port number when unset or 0) reached from different service ports gives
//!   IST0137 DeploymentConflictingPorts (deployment name, services, target port, ports sorted).
//! * [`ApplicationUIDAnalyzer`] (`deployment.ApplicationUIDAnalyzer`; Istio's metadata name is
//!   `applicationUID.Analyzer`): Pods and Deployments that are not Istio's control plane (no `istio`
//!   label, no `release=istio`) get IST0144 InvalidApplicationUID when the pod's
//!   `securityContext.runAsUser` or a container's (other than `istio-proxy` and `istio-operator`;
//!   init containers are not checked) is 1337, the proxy's UID.

use std::collections::BTreeMap;

use serde_json::Value;

use super::workload::{self, ISTIO_PROXY, PodTemplate, full_name, message_at_leaf, pod_spec, string_map};
use crate::{
    Analyzer, Context, Message, msg,
    resource::{KubeObject, Resource, kinds},
};

/// `deployment.ServiceAssociationAnalyzer`: a deployment behind services that disagree on ports.
#[derive(Debug, Default)]
pub struct ServiceAssociationAnalyzer;

impl Analyzer for ServiceAssociationAnalyzer {
    fn name(&self) -> &str {
        "deployment.MultiServiceAnalyzer"
    }

    fn type_name(&self) -> &str {
        "deployment.ServiceAssociationAnalyzer"
    }

    fn description(&self) -> &str {
        "Checks association between services and pods"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::SERVICE, kinds::DEPLOYMENT, kinds::NAMESPACE]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let resources = ctx.resources();
        for deployment in resources.kube(kinds::DEPLOYMENT) {
            if deployment
                .labels
                .get("gateway.istio.io/managed")
                .is_some_and(|v| v == "istio.io-mesh-controller")
            {
                continue;
            }
            let template = PodTemplate::of_deployment(deployment);
            let ns = deployment.ns();
            if !workload::in_mesh(
                resources,
                &template.labels,
                &template.annotations,
                ns,
                &template.spec,
                false,
            ) {
                continue;
            }
            let services: Vec<(String, Vec<ServicePort>)> = resources
                .kube(kinds::SERVICE)
                .filter(|svc| svc.ns() == ns)
                .filter(|svc| {
                    let selector = string_map(svc.value.get("spec").and_then(|s| s.get("selector")));
                    !selector.is_empty() && selector.iter().all(|(k, v)| template.labels.get(k) == Some(v))
                })
                .map(|svc| (full_name(svc.ns(), &svc.name), service_ports(svc)))
                .collect();
            port_protocols(deployment, &services, out);
            target_ports(deployment, &services, out);
        }
    }
}

/// One Service port: number, protocol (empty when unset) and target port as Kubernetes' IntOrString
/// prints it (`""` when unset).
struct ServicePort {
    port: i64,
    protocol: String,
    target_port: String,
}

fn service_ports(svc: &KubeObject) -> Vec<ServicePort> {
    let Some(Value::Array(ports)) = svc.value.get("spec").and_then(|s| s.get("ports")) else {
        return Vec::new();
    };
    ports
        .iter()
        .map(|p| ServicePort {
            port: p.get("port").and_then(Value::as_i64).unwrap_or(0),
            protocol: workload::str_at(p, "protocol").to_string(),
            target_port: match p.get("targetPort") {
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::String(s)) => s.clone(),
                _ => String::new(),
            },
        })
        .collect()
}

/// IST0116: one port number, several protocols.
fn port_protocols(deployment: &KubeObject, services: &[(String, Vec<ServicePort>)], out: &mut Vec<Message>) {
    let mut ports: BTreeMap<i64, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (name, svc_ports) in services {
        for p in svc_ports {
            let protocol = if p.protocol.is_empty() { "TCP".to_string() } else { p.protocol.clone() };
            ports.entry(p.port).or_default().entry(protocol).or_default().push(name.clone());
        }
    }
    for (port, protocols) in ports {
        if protocols.len() < 2 {
            continue;
        }
        let mut names: Vec<String> = protocols.into_values().flatten().collect();
        names.sort();
        out.push(message_at_leaf(
            deployment,
            &msg::DEPLOYMENT_ASSOCIATED_TO_MULTIPLE_SERVICES,
            &[(&deployment.name).into(), port.into(), names.into()],
            "metadata.name",
        ));
    }
}

/// IST0137: one target port, several service ports.
fn target_ports(deployment: &KubeObject, services: &[(String, Vec<ServicePort>)], out: &mut Vec<Message>) {
    let mut targets: BTreeMap<String, BTreeMap<i64, String>> = BTreeMap::new();
    for (name, svc_ports) in services {
        for p in svc_ports {
            let target = if p.target_port.is_empty() || p.target_port == "0" {
                p.port.to_string()
            } else {
                p.target_port.clone()
            };
            targets.entry(target).or_default().insert(p.port, name.clone());
        }
    }
    for (target, by_port) in targets {
        if by_port.len() < 2 {
            continue;
        }
        let mut names: Vec<String> = by_port.values().cloned().collect();
        names.sort();
        let ports: Vec<i64> = by_port.keys().copied().collect();
        out.push(message_at_leaf(
            deployment,
            &msg::DEPLOYMENT_CONFLICTING_PORTS,
            &[(&deployment.name).into(), names.into(), target.into(), ports.into()],
            "metadata.name",
        ));
    }
}

/// `deployment.ApplicationUIDAnalyzer`: workloads running as the proxy's UID 1337.
#[derive(Debug, Default)]
pub struct ApplicationUIDAnalyzer;

/// The proxy's user id.
const PROXY_UID: i64 = 1337;

impl Analyzer for ApplicationUIDAnalyzer {
    fn name(&self) -> &str {
        "applicationUID.Analyzer"
    }

    fn type_name(&self) -> &str {
        "deployment.ApplicationUIDAnalyzer"
    }

    fn description(&self) -> &str {
        "Checks invalid application UID"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::POD, kinds::DEPLOYMENT]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let resources = ctx.resources();
        for pod in resources.kube(kinds::POD) {
            if !workload::is_istio_control_plane(&pod.labels) {
                uid_messages(pod, &pod_spec(pod), out);
            }
        }
        for deployment in resources.kube(kinds::DEPLOYMENT) {
            if !workload::is_istio_control_plane(&deployment.labels) {
                uid_messages(deployment, &PodTemplate::of_deployment(deployment).spec, out);
            }
        }
    }
}

fn uid_messages(obj: &KubeObject, spec: &workload::PodSpec, out: &mut Vec<Message>) {
    if spec.run_as_user == Some(PROXY_UID) {
        out.push(obj.message(&msg::INVALID_APPLICATION_UID, &[]));
    }
    for c in &spec.containers {
        if c.name != ISTIO_PROXY && c.name != "istio-operator" && c.run_as_user == Some(PROXY_UID) {
            out.push(obj.message(&msg::INVALID_APPLICATION_UID, &[]));
        }
    }
}
