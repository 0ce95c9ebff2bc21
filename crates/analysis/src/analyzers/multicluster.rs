//! Istio's `multicluster` analyzers (`pkg/config/analysis/analyzers/multicluster`).
//!
//! * [`MeshNetworksAnalyzer`] (`multicluster.MeshNetworksAnalyzer`; Istio's metadata name is
//!   `meshnetworks.MeshNetworksAnalyzer`): every `networks.<name>.endpoints[j].fromRegistry` of the
//!   mesh networks must name a known service registry: `Mock`, `Kubernetes`, `External` (exact case)
//!   or a key of the `data` of a Secret labelled `istio/multiCluster=true` (a remote cluster). An
//!   unknown one gives IST0126 UnknownMeshNetworksServiceRegistry (registry, network) on the
//!   MeshNetworks object.
//! * [`ServiceAnalyzer`] (`multicluster.ServiceAnalyzer`; Istio's metadata name is
//!   `services.MultiClusterServiceAnalyzer`): a Service (namespace/name) present in several clusters
//!   whose copies differ — one headless and another not, different `type`, or different `ports`
//!   (compared as sets ordered by name, every field) — gets IST0170 MultiClusterInconsistentService
//!   on one of its copies. It needs objects tagged with their cluster ([`ClusterService`]); a single
//!   cluster or files give nothing, as in Istio.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::workload::str_at;
use crate::{
    Analyzer, Context, Message, Origin, msg,
    resource::{KubeObject, Resource, Resources, kinds},
};

/// The registries every mesh knows (Istio's `provider.Mock`, `Kubernetes`, `External`).
const BUILTIN_REGISTRIES: [&str; 3] = ["Mock", "Kubernetes", "External"];

/// `multicluster.MeshNetworksAnalyzer`: unknown `fromRegistry` names.
#[derive(Debug, Default)]
pub struct MeshNetworksAnalyzer;

impl Analyzer for MeshNetworksAnalyzer {
    fn name(&self) -> &str {
        "meshnetworks.MeshNetworksAnalyzer"
    }

    fn type_name(&self) -> &str {
        "multicluster.MeshNetworksAnalyzer"
    }

    fn description(&self) -> &str {
        "Check the validity of MeshNetworks in the cluster"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::MESH_NETWORKS, kinds::SECRET]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let mut registries: BTreeSet<String> = BUILTIN_REGISTRIES.iter().map(|s| s.to_string()).collect();
        for secret in ctx.kube(kinds::SECRET) {
            if secret.labels.get("istio/multiCluster").is_some_and(|v| v == "true")
                && let Some(Value::Object(data)) = secret.value.get("data")
            {
                registries.extend(data.keys().cloned());
            }
        }
        let Some(Value::Object(networks)) = ctx.mesh_networks.get("networks") else { return };
        // Istio reads the mesh networks as the object `MeshNetworks <istio namespace>/meshnetworks`.
        let origin = Origin {
            kind: "MeshNetworks".into(),
            namespace: Some(ctx.istio_namespace.clone()),
            name: "meshnetworks".into(),
            file: None,
            line: None,
        };
        for (network, spec) in networks {
            let Some(Value::Array(endpoints)) = spec.get("endpoints") else { continue };
            for (j, endpoint) in endpoints.iter().enumerate() {
                let Some(registry) = endpoint.get("fromRegistry").and_then(Value::as_str) else { continue };
                if !registries.contains(registry) {
                    let mut m = Message::new(
                        &msg::UNKNOWN_MESH_NETWORKS_SERVICE_REGISTRY,
                        origin.clone(),
                        &[registry.into(), network.as_str().into()],
                    );
                    m.path = Some(format!("networks.{network}.endpoints[{j}]"));
                    out.push(m);
                }
            }
        }
    }
}

/// `multicluster.ServiceAnalyzer`: one Service, different shapes in different clusters. One
/// analysis covers one cluster, where it finds nothing (as istioctl without remote contexts);
/// [`inconsistent_services`] compares several clusters' objects.
#[derive(Debug, Default)]
pub struct ServiceAnalyzer;

impl Analyzer for ServiceAnalyzer {
    fn name(&self) -> &str {
        "services.MultiClusterServiceAnalyzer"
    }

    fn type_name(&self) -> &str {
        "multicluster.ServiceAnalyzer"
    }

    fn description(&self) -> &str {
        "Check the validity of services in the multi-cluster environment"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::SERVICE]
    }

    fn analyze(&self, _ctx: &Context<'_>, _out: &mut Vec<Message>) {}
}

/// IST0170 MultiClusterInconsistentService for every Service (namespace/name) present in more than
/// one of `clusters` (cluster id, that cluster's objects) whose copies disagree, on the copy of the
/// first cluster (by id) that has it.
pub fn inconsistent_services(clusters: &[(&str, &Resources)]) -> Vec<Message> {
    let mut by_name: BTreeMap<(&str, &str), BTreeMap<&str, &KubeObject>> = BTreeMap::new();
    for (cluster, resources) in clusters {
        for svc in resources.kube(kinds::SERVICE) {
            by_name.entry((svc.ns(), svc.name.as_str())).or_default().insert(cluster, svc);
        }
    }
    let mut out = Vec::new();
    for ((ns, name), copies) in by_name {
        if copies.len() < 2 {
            continue;
        }
        let (clusters, reasons) = inconsistencies(&copies);
        let Some(first) = copies.values().next().filter(|_| !clusters.is_empty()) else { continue };
        out.push(first.message(
            &msg::MULTI_CLUSTER_INCONSISTENT_SERVICE,
            &[
                name.into(),
                ns.into(),
                clusters.into_iter().collect::<Vec<_>>().into(),
                reasons.into_iter().collect::<Vec<_>>().join("; ").into(),
            ],
        ));
    }
    out
}

/// The clusters whose copy differs from the first cluster's (plus the first one), and the reasons.
fn inconsistencies(copies: &BTreeMap<&str, &KubeObject>) -> (BTreeSet<String>, BTreeSet<&'static str>) {
    let mut clusters = BTreeSet::new();
    let mut reasons = BTreeSet::new();
    let Some((first_cluster, first)) = copies.iter().next() else { return (clusters, reasons) };
    let spec = |s: &KubeObject| s.value.get("spec").cloned().unwrap_or(Value::Null);
    let first_spec = spec(first);
    let headless = |s: &Value| str_at(s, "clusterIP") == "None";
    let mut added_headless = false;
    for (cluster, svc) in copies {
        let s = spec(svc);
        if !added_headless && headless(&first_spec) != headless(&s) {
            added_headless = true;
            clusters.extend(copies.keys().map(|c| c.to_string()));
            reasons.insert("service has mixed mode like headless and clusterIP");
        }
        if str_at(&first_spec, "type") != str_at(&s, "type") {
            clusters.insert(cluster.to_string());
            reasons.insert("service type is inconsistent");
        }
        if sorted_ports(&first_spec) != sorted_ports(&s) {
            clusters.insert(cluster.to_string());
            reasons.insert("service ports are inconsistent");
        }
    }
    if !clusters.is_empty() {
        clusters.insert(first_cluster.to_string());
    }
    (clusters, reasons)
}

/// `spec.ports` ordered by name (stable).
fn sorted_ports(spec: &Value) -> Vec<Value> {
    let mut ports = match spec.get("ports") {
        Some(Value::Array(p)) => p.clone(),
        _ => Vec::new(),
    };
    ports.sort_by(|a, b| str_at(a, "name").cmp(str_at(b, "name")));
    ports
}
