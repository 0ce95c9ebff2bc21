//! Pure conversion of Kubernetes objects into the service model: Service → [`Service`],
//! EndpointSlice endpoint (+ its Pod, Node and Namespace) → [`Endpoint`]s, Pod → workload facts.
//!
//! Follows Istio's `pilot/pkg/serviceregistry/kube/conversion.go` (`ConvertService`),
//! `kube/controller/endpointslice.go` (`endpointHealthStatus`, `updateEndpointCacheForSlice`),
//! `kube/controller/endpoint_builder.go` (`NewEndpointBuilder`) and `util/label` (`AugmentLabels`).
//! Input is taken as the API server gives it; nothing here fails.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use k8s_openapi::{
    api::{
        core::v1::{Pod, Service as KubeService},
        discovery::v1::{Endpoint as SliceEndpoint, EndpointConditions},
    },
    apimachinery::pkg::util::intstr::IntOrString,
};
use model::service::{
    ANNOTATION_TRAFFIC_DISTRIBUTION, Endpoint, ExportTo, HealthStatus, LABEL_ISTIO_LOCALITY,
    LABEL_TOPOLOGY_CLUSTER, LABEL_TOPOLOGY_LOCALITY, LABEL_TOPOLOGY_NETWORK, LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_SUBZONE, LABEL_TOPOLOGY_ZONE, Labels, Locality, Port, ProviderId, Resolution, Service,
    TLS_MODE_DISABLED, TLS_MODE_LABEL, TrafficDistribution, convert_protocol,
};

use super::KubeRegistryOptions;

/// Service annotation restricting where the service is visible (`networking.istio.io/exportTo`,
/// comma-separated `exportTo` entries).
pub const ANNOTATION_EXPORT_TO: &str = "networking.istio.io/exportTo";
/// Service annotation listing SPIFFE identities the service runs as
/// (`alpha.istio.io/canonical-serviceaccounts`, comma-separated).
pub const ANNOTATION_CANONICAL_SERVICE_ACCOUNTS: &str = "alpha.istio.io/canonical-serviceaccounts";
/// Service annotation listing Kubernetes service accounts the service runs as
/// (`alpha.istio.io/kubernetes-serviceaccounts`, comma-separated; turned into SPIFFE identities).
pub const ANNOTATION_KUBERNETES_SERVICE_ACCOUNTS: &str = "alpha.istio.io/kubernetes-serviceaccounts";
/// EndpointSlice label naming the Service the slice belongs to (`kubernetes.io/service-name`).
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// EndpointSlice label of multi-cluster services slices (`multicluster.kubernetes.io/service-name`);
/// slices carrying it are ignored, as Istio's slice selector does.
pub const LABEL_MCS_SERVICE_NAME: &str = "multicluster.kubernetes.io/service-name";
/// Endpoint label carrying the node name (`kubernetes.io/hostname`).
pub const LABEL_HOSTNAME: &str = model::service::LABEL_HOSTNAME;
/// The label of the ReplicaSet hash on Deployment pods (`pod-template-hash`).
pub const LABEL_POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// Service label turning on persistent sessions (`istio.io/persistent-session`): draining endpoints
/// are then kept (Istio's `PersistentSessionLabel`).
pub const LABEL_PERSISTENT_SESSION: &str = "istio.io/persistent-session";
/// Service label turning on header-based persistent sessions (`istio.io/persistent-session-header`).
pub const LABEL_PERSISTENT_SESSION_HEADER: &str = "istio.io/persistent-session-header";
/// The deprecated node region label Istio still reads (`failure-domain.beta.kubernetes.io/region`).
pub const LABEL_NODE_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
/// The deprecated node zone label Istio still reads (`failure-domain.beta.kubernetes.io/zone`).
pub const LABEL_NODE_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";

/// `NAME.NAMESPACE.svc.DOMAIN`, the hostname of a Kubernetes Service (Istio's `ServiceHostname`).
pub fn service_hostname(name: &str, namespace: &str, domain_suffix: &str) -> String {
    format!("{name}.{namespace}.svc.{domain_suffix}")
}

/// `spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/ACCOUNT`.
pub fn spiffe_identity(trust_domain: &str, namespace: &str, account: &str) -> String {
    format!("spiffe://{trust_domain}/ns/{namespace}/sa/{account}")
}

/// A Service port's `targetPort`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetPort {
    /// Not set: the service port number.
    Unset,
    /// A port number on the pod.
    Number(u32),
    /// A container port name on the pod.
    Name(String),
}

/// A Service converted: the model service plus what the registry needs beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertedService {
    /// The model service.
    pub service: Arc<Service>,
    /// Per port (same order as `service.ports`), its `targetPort`.
    pub target_ports: Vec<TargetPort>,
    /// `spec.publishNotReadyAddresses`.
    pub publish_not_ready: bool,
    /// `spec.clusterIP: None`.
    pub headless: bool,
}

/// Converts a Service (Istio's `ConvertService`):
/// - hostname `NAME.NAMESPACE.svc.DOMAIN`, registry Kubernetes, namespace and labels of the object,
///   `spec.selector` as label selector;
/// - ports with the protocol from `appProtocol` or the port-name prefix ([`convert_protocol`]);
/// - addresses: `spec.clusterIPs` (or `clusterIP`); `clusterIP: None` (headless) has none and
///   [`Resolution::Passthrough`] (Istio's passthrough: the proxy forwards to the address the client
///   dialled);
/// - `type: ExternalName` with `externalName`: mesh-external, [`Resolution::Alias`] of the external
///   name ([`Service::external_name`]): no cluster of its own, its hostname served by the target's
///   virtual hosts when the target is a known service (Istio's default `ENABLE_EXTERNAL_NAME_ALIAS`,
///   now the only behaviour). Its endpoints come from EndpointSlices like any Service's (Kubernetes
///   writes none for it);
/// - `exportTo` from the `networking.istio.io/exportTo` annotation, service accounts from the
///   `alpha.istio.io/*-serviceaccounts` annotations.
pub fn convert_service(svc: &KubeService, options: &KubeRegistryOptions) -> ConvertedService {
    let meta = &svc.metadata;
    let name = meta.name.clone().unwrap_or_default();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let spec = svc.spec.clone().unwrap_or_default();
    let annotations = meta.annotations.clone().unwrap_or_default();
    let cluster_ip = spec.cluster_ip.as_deref().unwrap_or("");
    let headless = cluster_ip == "None";
    let external_name =
        spec.external_name.clone().filter(|n| !n.is_empty() && spec.type_.as_deref() == Some("ExternalName"));
    let mut resolution = if external_name.is_some() { Resolution::Alias } else { Resolution::ClientSideLb };
    let mut addresses = Vec::new();
    if headless {
        resolution = Resolution::Passthrough;
    } else if !cluster_ip.is_empty() {
        match spec.cluster_ips.as_ref().filter(|ips| ips.len() > 1) {
            Some(ips) => addresses.clone_from(ips),
            None => addresses.push(cluster_ip.to_string()),
        }
    }
    let mut ports = Vec::new();
    let mut target_ports = Vec::new();
    for p in spec.ports.iter().flatten() {
        let port_name = p.name.clone().unwrap_or_default();
        let protocol = convert_protocol(
            p.port,
            &port_name,
            p.protocol.as_deref().unwrap_or("TCP"),
            p.app_protocol.as_deref(),
        );
        ports.push(Port { name: port_name, port: u32::try_from(p.port).unwrap_or(0), protocol });
        target_ports.push(match &p.target_port {
            None => TargetPort::Unset,
            Some(IntOrString::Int(n)) => TargetPort::Number(u32::try_from(*n).unwrap_or(0)),
            Some(IntOrString::String(s)) => match s.parse::<u32>() {
                Ok(n) => TargetPort::Number(n),
                Err(_) => TargetPort::Name(s.clone()),
            },
        });
    }
    let split = |key: &str| -> Vec<String> {
        annotations
            .get(key)
            .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect())
            .unwrap_or_default()
    };
    let mut service_accounts = split(ANNOTATION_CANONICAL_SERVICE_ACCOUNTS);
    for ksa in split(ANNOTATION_KUBERNETES_SERVICE_ACCOUNTS) {
        service_accounts.push(spiffe_identity(&options.trust_domain, &namespace, &ksa));
    }
    let export_to: BTreeSet<ExportTo> =
        split(ANNOTATION_EXPORT_TO).iter().map(|e| ExportTo::parse(e)).collect();
    let service = Service {
        hostname: service_hostname(&name, &namespace, &options.domain_suffix),
        namespace,
        name: name.clone(),
        object_name: name,
        registry: ProviderId::Kubernetes,
        ports,
        addresses,
        resolution,
        mesh_external: external_name.is_some(),
        export_to,
        labels: meta.labels.clone().unwrap_or_default(),
        label_selector: spec.selector.clone(),
        service_accounts,
        creation_time: meta.creation_timestamp.as_ref().map(|t| t.0.to_string()),
        passthrough_target_ports: BTreeMap::new(),
        external_name,
        aliases: Vec::new(),
        auto_allocated: Vec::new(),
        traffic_distribution: TrafficDistribution::from_spec(
            spec.traffic_distribution.as_deref(),
            annotations.get(ANNOTATION_TRAFFIC_DISTRIBUTION).map(String::as_str),
        ),
        cluster_external_addresses: cluster_external_addresses(svc, &options.cluster_id),
    };
    ConvertedService {
        service: Arc::new(service),
        target_ports,
        publish_not_ready: spec.publish_not_ready_addresses.unwrap_or(false),
        headless,
    }
}

/// The addresses a Service is reached at from outside its cluster (Istio's `ConvertService`:
/// `ClusterExternalAddresses`): for `type: LoadBalancer`, each `status.loadBalancer.ingress` entry's
/// `ip`, else its `hostname` (not resolved, as istiod); then `spec.externalIPs`; keyed by the
/// registry's cluster id (an empty map when there are none).
fn cluster_external_addresses(svc: &KubeService, cluster_id: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = Vec::new();
    let spec = svc.spec.as_ref();
    if spec.and_then(|s| s.type_.as_deref()) == Some("LoadBalancer") {
        let ingress =
            svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|l| l.ingress.as_ref());
        for entry in ingress.into_iter().flatten() {
            match (entry.ip.as_deref(), entry.hostname.as_deref()) {
                (Some(ip), _) if !ip.is_empty() => out.push(ip.to_string()),
                (_, Some(host)) if !host.is_empty() => out.push(host.to_string()),
                _ => {}
            }
        }
    }
    out.extend(spec.and_then(|s| s.external_ips.clone()).into_iter().flatten());
    if out.is_empty() { BTreeMap::new() } else { BTreeMap::from([(cluster_id.to_string(), out)]) }
}

/// Health of an EndpointSlice endpoint (Istio's `endpointHealthStatus`, plus the Kubernetes
/// EndpointSlice controller's `publishNotReadyAddresses` rule):
/// - `ready` unset or true → healthy;
/// - not ready, but the service sets `publishNotReadyAddresses` and the endpoint is not terminating →
///   healthy (the EndpointSlice controller writes `ready: true` for such endpoints itself, so this
///   only matters for slices written by hand);
/// - not ready, `serving` and `terminating` (unset counts as true) and the service has a persistent
///   session label → draining;
/// - not ready and `terminating` (unset counts as true, as Istio) → terminating;
/// - otherwise unhealthy.
///
/// The EDS generator leaves out terminating endpoints and sends unhealthy ones as `UNHEALTHY` unless the
/// cluster's outlier detection sets `minHealthPercent` (`networking::endpoint::sends_unhealthy`).
pub fn endpoint_health(conditions: Option<&EndpointConditions>, service: &ConvertedService) -> HealthStatus {
    let c = conditions.cloned().unwrap_or_default();
    if c.ready.unwrap_or(true) {
        return HealthStatus::Healthy;
    }
    let terminating = c.terminating.unwrap_or(true);
    if service.publish_not_ready && c.terminating != Some(true) {
        return HealthStatus::Healthy;
    }
    let labels = &service.service.labels;
    let persistent = labels.get(LABEL_PERSISTENT_SESSION).is_some_and(|v| !v.is_empty())
        || labels.get(LABEL_PERSISTENT_SESSION_HEADER).is_some_and(|v| !v.is_empty());
    if persistent && c.serving.unwrap_or(true) && terminating {
        return HealthStatus::Draining;
    }
    if terminating { HealthStatus::Terminating } else { HealthStatus::Unhealthy }
}

/// What an endpoint takes from its Pod, Node and Namespace (Istio's `EndpointBuilder`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadFacts {
    /// Pod labels plus the topology labels (region, zone, subzone, cluster, node, network); shared by
    /// the pod's endpoints.
    pub labels: Arc<Labels>,
    /// SPIFFE identity of the pod's service account, or empty without a pod.
    pub service_account: String,
    /// `region/zone/subzone`, or empty.
    pub locality: String,
    /// The `security.istio.io/tlsMode` label, else `disabled`.
    pub tls_mode: String,
    /// Network (pod label, else namespace label `topology.istio.io/network`), or empty.
    pub network: String,
    /// The workload name (the Deployment for a ReplicaSet pod, else the owner, else the pod).
    pub workload_name: String,
    /// Namespace of the pod.
    pub namespace: String,
}

/// The locality of a pod (Istio's `getPodLocality`): its `istio-locality` /
/// `topology.istio.io/locality` label (`.` read as `/`), else its node's
/// `topology.kubernetes.io/region` / `zone` (or the deprecated `failure-domain.beta` ones) and
/// `topology.istio.io/subzone` labels as `region/zone/subzone`; empty when none is known.
pub fn pod_locality(pod_labels: &Labels, node_labels: Option<&Labels>) -> String {
    if let Some(l) = pod_labels.get(LABEL_ISTIO_LOCALITY).or_else(|| pod_labels.get(LABEL_TOPOLOGY_LOCALITY))
        && !l.is_empty()
    {
        return l.replace('.', "/");
    }
    let Some(node) = node_labels else { return String::new() };
    let get = |ga: &str, beta: &str| node.get(ga).or_else(|| node.get(beta)).cloned().unwrap_or_default();
    let region = get(LABEL_TOPOLOGY_REGION, LABEL_NODE_REGION_BETA);
    let zone = get(LABEL_TOPOLOGY_ZONE, LABEL_NODE_ZONE_BETA);
    let subzone = node.get(LABEL_TOPOLOGY_SUBZONE).cloned().unwrap_or_default();
    if region.is_empty() && zone.is_empty() && subzone.is_empty() {
        return String::new();
    }
    format!("{region}/{zone}/{subzone}")
}

/// The workload name of a pod (Istio's `GetDeployMetaFromPod`, reduced): a pod whose name was
/// generated (`generateName` set) and that is owned by a ReplicaSet named `DEPLOYMENT-HASH` (its
/// `pod-template-hash` label) belongs to `DEPLOYMENT`; another controller owner of a generated pod
/// names the workload; any other pod is its own workload (istiod looks at owners of generated pods
/// only).
pub fn workload_name(pod: &Pod) -> String {
    let meta = &pod.metadata;
    let generated = meta.generate_name.as_deref().is_some_and(|g| !g.is_empty());
    let owner =
        meta.owner_references.iter().flatten().find(|o| o.controller == Some(true)).filter(|_| generated);
    match owner {
        Some(o) if o.kind == "ReplicaSet" => {
            let hash = meta.labels.as_ref().and_then(|l| l.get(LABEL_POD_TEMPLATE_HASH));
            match hash.and_then(|h| o.name.strip_suffix(&format!("-{h}"))) {
                Some(deployment) => deployment.to_string(),
                None => o.name.clone(),
            }
        }
        Some(o) => o.name.clone(),
        None => meta.name.clone().unwrap_or_default(),
    }
}

/// The facts an endpoint of `pod` gets (Istio's `NewEndpointBuilder` + `AugmentLabels`). Without a
/// pod: only the cluster label, `disabled` TLS mode, `namespace` and the namespace's network.
pub fn workload_facts(
    pod: Option<&Pod>,
    node_labels: Option<&Labels>,
    namespace_labels: Option<&Labels>,
    namespace: &str,
    options: &KubeRegistryOptions,
) -> WorkloadFacts {
    let pod_labels = pod.and_then(|p| p.metadata.labels.clone()).unwrap_or_default();
    let locality = if pod.is_some() { pod_locality(&pod_labels, node_labels) } else { String::new() };
    let node_name = pod.and_then(|p| p.spec.as_ref()?.node_name.clone()).unwrap_or_default();
    let mut labels = pod_labels.clone();
    let mut parts = locality.split('/');
    for key in [LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE, LABEL_TOPOLOGY_SUBZONE] {
        if let Some(part) = parts.next().filter(|p| !p.is_empty()) {
            labels.insert(key.to_string(), part.to_string());
        }
    }
    if !options.cluster_id.is_empty() {
        labels.insert(LABEL_TOPOLOGY_CLUSTER.to_string(), options.cluster_id.clone());
    }
    if !node_name.is_empty() {
        labels.insert(LABEL_HOSTNAME.to_string(), node_name);
    }
    let network = pod_labels
        .get(LABEL_TOPOLOGY_NETWORK)
        .or_else(|| namespace_labels.and_then(|l| l.get(LABEL_TOPOLOGY_NETWORK)))
        .cloned()
        .unwrap_or_default();
    if !network.is_empty() && labels.get(LABEL_TOPOLOGY_NETWORK).is_none_or(String::is_empty) {
        labels.insert(LABEL_TOPOLOGY_NETWORK.to_string(), network.clone());
    }
    let (service_account, workload, ns) = match pod {
        Some(p) => {
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let account = p
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| "default".to_string());
            (spiffe_identity(&options.trust_domain, &ns, &account), workload_name(p), ns)
        }
        None => (String::new(), String::new(), namespace.to_string()),
    };
    WorkloadFacts {
        tls_mode: pod_labels.get(TLS_MODE_LABEL).cloned().unwrap_or_else(|| TLS_MODE_DISABLED.to_string()),
        labels: Arc::new(labels),
        service_account,
        locality,
        network,
        workload_name: workload,
        namespace: ns,
    }
}

/// The endpoints of one address of a slice endpoint: one per slice port (`name`, `port`), as
/// Istio's `buildIstioEndpoint`.
pub fn slice_endpoints(
    address: &str,
    ports: &[(String, u32)],
    facts: &WorkloadFacts,
    health: HealthStatus,
    cluster_id: &str,
) -> Vec<Endpoint> {
    ports
        .iter()
        .map(|(name, port)| Endpoint {
            addresses: vec![address.to_string()],
            service_port_name: name.clone(),
            legacy_cluster_port_key: 0,
            endpoint_port: *port,
            labels: facts.labels.clone(),
            service_account: facts.service_account.clone(),
            network: facts.network.clone(),
            locality: Locality { label: facts.locality.clone(), cluster_id: cluster_id.to_string() },
            lb_weight: 0,
            tls_mode: facts.tls_mode.clone(),
            namespace: facts.namespace.clone(),
            workload_name: facts.workload_name.clone(),
            health_status: health,
        })
        .collect()
}

/// The `(namespace, name)` of the Pod a slice endpoint points at (`targetRef` of kind Pod).
pub fn target_pod(endpoint: &SliceEndpoint, slice_namespace: &str) -> Option<(String, String)> {
    let r = endpoint.target_ref.as_ref()?;
    if r.kind.as_deref() != Some("Pod") {
        return None;
    }
    let ns = r.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| slice_namespace.to_string());
    Some((ns, r.name.clone()?))
}

/// The IPs of a pod (`status.podIPs`, else `status.podIP`); none for a finished pod (phase
/// `Succeeded` or `Failed`: its IP may be reused, Istio filters such pods out).
pub fn pod_ips(pod: &Pod) -> Vec<String> {
    let Some(status) = &pod.status else { return Vec::new() };
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return Vec::new();
    }
    let mut ips: Vec<String> = status.pod_ips.iter().flatten().map(|p| p.ip.clone()).collect();
    if ips.is_empty()
        && let Some(ip) = status.pod_ip.clone().filter(|ip| !ip.is_empty())
    {
        ips.push(ip);
    }
    ips
}

/// The pod port a Service port targets (Istio's `FindPort`): a number as is; a name looked up among
/// the pod's container ports; unset → the service port. `None` when a named port is not on the pod.
pub fn find_target_port(pod: &Pod, target: &TargetPort, service_port: u32) -> Option<u32> {
    match target {
        TargetPort::Unset => Some(service_port),
        TargetPort::Number(0) => Some(service_port),
        TargetPort::Number(n) => Some(*n),
        TargetPort::Name(name) => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name))
            .and_then(|p| u32::try_from(p.container_port).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn health_follows_istio_and_publish_not_ready() {
        let svc = convert_service(
            &object(serde_json::json!({"metadata": {"name": "a", "namespace": "n"}, "spec": {}})),
            &KubeRegistryOptions::default(),
        );
        let c = |r: Option<bool>, s: Option<bool>, t: Option<bool>| EndpointConditions {
            ready: r,
            serving: s,
            terminating: t,
        };
        assert_eq!(endpoint_health(None, &svc), HealthStatus::Healthy);
        assert_eq!(endpoint_health(Some(&c(Some(false), None, Some(false))), &svc), HealthStatus::Unhealthy);
        assert_eq!(endpoint_health(Some(&c(Some(false), None, Some(true))), &svc), HealthStatus::Terminating);
        // Istio reads an unset `terminating` of a not-ready endpoint as terminating.
        assert_eq!(endpoint_health(Some(&c(Some(false), None, None)), &svc), HealthStatus::Terminating);
        let publish = ConvertedService { publish_not_ready: true, ..svc.clone() };
        assert_eq!(
            endpoint_health(Some(&c(Some(false), None, Some(false))), &publish),
            HealthStatus::Healthy
        );
        assert_eq!(
            endpoint_health(Some(&c(Some(false), None, Some(true))), &publish),
            HealthStatus::Terminating
        );
    }

    #[test]
    fn external_addresses_are_load_balancer_ingress_then_external_ips_of_the_cluster() {
        let options = KubeRegistryOptions { cluster_id: "east".into(), ..KubeRegistryOptions::default() };
        let convert = |spec: serde_json::Value, status: serde_json::Value| {
            let svc = object(serde_json::json!({"metadata": {"name": "gw", "namespace": "istio-system"},
                                                "spec": spec, "status": status}));
            convert_service(&svc, &options).service.cluster_external_addresses.clone()
        };
        let lb = convert(
            serde_json::json!({"type": "LoadBalancer", "externalIPs": ["198.51.100.7"]}),
            serde_json::json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.1"}, {"hostname": "lb.example.com"}, {}]}}),
        );
        let expected = vec!["203.0.113.1".to_string(), "lb.example.com".into(), "198.51.100.7".into()];
        assert_eq!(lb, BTreeMap::from([("east".to_string(), expected)]));
        // Not a LoadBalancer: its status is not read (istiod); no address, no entry.
        let cluster_ip = convert(
            serde_json::json!({"type": "ClusterIP"}),
            serde_json::json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.1"}]}}),
        );
        assert!(cluster_ip.is_empty(), "{cluster_ip:?}");
    }

    #[test]
    fn locality_from_pod_label_or_node() {
        let node: Labels = [(LABEL_TOPOLOGY_REGION, "r1"), (LABEL_TOPOLOGY_ZONE, "z1")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        assert_eq!(pod_locality(&Labels::new(), Some(&node)), "r1/z1/");
        let labelled: Labels = [(LABEL_ISTIO_LOCALITY.to_string(), "a.b.c".to_string())].into();
        assert_eq!(pod_locality(&labelled, Some(&node)), "a/b/c");
        assert_eq!(pod_locality(&Labels::new(), None), "");
    }

    #[test]
    fn workload_name_strips_the_replicaset_hash() {
        let pod: Pod = object(
            serde_json::json!({"metadata": {"name": "reviews-v1-7f9-abc", "namespace": "n",
            "generateName": "reviews-v1-7f9-", "labels": {"pod-template-hash": "7f9"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "reviews-v1-7f9", "uid": "u", "controller": true}]}}),
        );
        assert_eq!(workload_name(&pod), "reviews-v1");
        // A pod whose name was not generated is its own workload, owner or not (as istiod).
        let mut named = pod.clone();
        named.metadata.generate_name = None;
        assert_eq!(workload_name(&named), "reviews-v1-7f9-abc");
        let bare: Pod = object(serde_json::json!({"metadata": {"name": "p", "namespace": "n"}}));
        assert_eq!(workload_name(&bare), "p");
    }
}
