//! The proxy as the generators see it ([`ProxyContext`]; Istio's `model.Proxy` in
//! `pilot/pkg/model/context.go`): kind, IPs, namespace, labels, interception mode, generator, and the
//! service instances its workload serves.

use std::{collections::BTreeMap, sync::Arc};

use super::node::{Locality, NodeType, Proxy};
use crate::{
    ServiceDiscovery,
    service::{
        LABEL_HOSTNAME, LABEL_ISTIO_LOCALITY, LABEL_TOPOLOGY_CLUSTER, LABEL_TOPOLOGY_LOCALITY,
        LABEL_TOPOLOGY_NETWORK, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_SUBZONE, LABEL_TOPOLOGY_ZONE, Labels,
        ServiceInstance,
    },
};

/// Kind of proxy asking (the first field of the node id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProxyKind {
    /// A workload's sidecar (`sidecar`).
    Sidecar,
    /// A gateway (`router`).
    Router,
}

/// How traffic reaches a sidecar (node metadata `INTERCEPTION_MODE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum InterceptionMode {
    /// iptables REDIRECT to the virtual listeners 15001/15006 (Istio's default).
    #[default]
    Redirect,
    /// iptables TPROXY to the virtual listeners (transparent).
    Tproxy,
    /// No capture: outbound listeners bind their own ports; no virtual listeners, no inbound listeners
    /// derived from services.
    None,
}

impl InterceptionMode {
    /// Reads `REDIRECT`, `TPROXY` or `NONE` (any other value: `REDIRECT`, as Istio).
    pub fn parse(text: &str) -> InterceptionMode {
        match text {
            "NONE" => InterceptionMode::None,
            "TPROXY" => InterceptionMode::Tproxy,
            _ => InterceptionMode::Redirect,
        }
    }
}

/// What the generators need to know about the proxy asking. Built by the xDS server from the node
/// (`TYPE~IP~ID~DOMAIN` and metadata); tests build it directly.
#[derive(Clone, Debug)]
pub struct ProxyContext {
    /// Node id (`sidecar~10.1.2.3~reviews-v1-abc.bookinfo~bookinfo.svc.cluster.local`), for findings.
    pub id: String,
    /// Sidecar or gateway.
    pub kind: ProxyKind,
    /// The proxy's IPs (`INSTANCE_IPS`, else the node id's IP).
    pub ips: Vec<String>,
    /// Config namespace (`NAMESPACE`, else from the DNS domain).
    pub namespace: String,
    /// Workload labels (`LABELS`).
    pub labels: Labels,
    /// DNS domain of the proxy (`bookinfo.svc.cluster.local`): short host forms in virtual hosts
    /// are derived from it.
    pub dns_domain: String,
    /// `INTERCEPTION_MODE`.
    pub interception_mode: InterceptionMode,
    /// `GENERATOR=grpc`: a proxyless gRPC client (API listeners, its own route and cluster shapes).
    pub proxyless_grpc: bool,
    /// `ISTIO_VERSION` (informational).
    pub istio_version: String,
    /// Address outbound and gateway listeners bind to (`0.0.0.0`, Istio's wildcard); `127.0.0.1` in
    /// loopback tests. Listener names follow it (`0.0.0.0_80`, `127.0.0.1_80`).
    pub bind_address: String,
    /// The service instances this proxy's workload serves (Istio's `ServiceTargets`), from
    /// [`ServiceDiscovery::proxy_instances`]; see [`ProxyContext::set_instances_from`].
    pub service_instances: Vec<ServiceInstance>,
    /// The node metadata carries `PROXY_CONFIG` (see [`ProxyContext::has_workload_certificates`]).
    pub workload_certificates: bool,
    /// Where the proxy runs (Istio's `Proxy.Locality`, set by `setTopologyLabels`): the topology
    /// labels of its workload, else its `topology.istio.io/locality` / `istio-locality` label, else
    /// what the node sent (`node.locality`). Locality load balancing ranks endpoints against it.
    pub locality: Locality,
    /// The node metadata's string-valued entries (`ISTIO_VERSION`, `CLUSTER_ID`, …, as the node sent
    /// them): what EnvoyFilter `match.proxy.metadata` compares against (Istio's `Metadata.Raw`).
    pub metadata: Arc<BTreeMap<String, String>>,
    /// `MESH_ID` (Istio's `istio.mesh_id` span tag; empty: `unknown`).
    pub mesh_id: String,
    /// `node.cluster` ([`super::node::Proxy::service_cluster`]): the service name of Datadog and
    /// OpenTelemetry spans.
    pub service_cluster: String,
    /// `tracing` of the proxy's own proxy config (`PROXY_CONFIG` node metadata; `None` when it has
    /// none or it cannot be read). Only used when [`workload_certificates`](ProxyContext::workload_certificates)
    /// says the proxy has a proxy config; otherwise the mesh `defaultConfig.tracing` applies.
    pub proxy_tracing: Option<super::tracing::ProxyTracing>,
    /// Which of istio-proxy's telemetry filters the proxy has (`node.extensions`,
    /// [`super::node::IstioExtensions`]): the stats and metadata exchange filters go only to proxies
    /// that have them.
    pub istio_extensions: super::node::IstioExtensions,
    /// What [`ProxyContext::set_topology`] adds to [`labels`](ProxyContext::labels): the node's
    /// `CLUSTER_ID`, `NETWORK` and `NODE_NAME` (kept to redo the labels when the locality changes).
    topology: TopologyMetadata,
}

/// Node metadata that becomes topology labels of the proxy.
#[derive(Clone, Debug, Default)]
struct TopologyMetadata {
    cluster_id: String,
    network: String,
    node_name: String,
}

/// The node metadata key pilot-agent always writes into the bootstrap node (`PROXY_CONFIG`, the proxy's
/// `ProxyConfig`: Istio's `pkg/istio-agent` / `pkg/bootstrap` `getNodeMetaData` sets
/// `meta.ProxyConfig`). It is the signal that the proxy was bootstrapped by pilot-agent.
pub const PROXY_CONFIG_METADATA: &str = "PROXY_CONFIG";

impl ProxyKind {
    /// The kind for a node type; `None` for types meshpilot does not serve (waypoint, ztunnel,
    /// agentgateway).
    pub fn of(node_type: NodeType) -> Option<ProxyKind> {
        match node_type {
            NodeType::Sidecar => Some(ProxyKind::Sidecar),
            NodeType::Router => Some(ProxyKind::Router),
            _ => None,
        }
    }
}

impl ProxyContext {
    /// What the generators read of a connected proxy (Istio's `model.Proxy` after `SetWorkloadLabels`
    /// and friends): kind, node id, IPs, config namespace, labels, DNS domain, interception mode,
    /// generator, Istio version. Sidecars with `INTERCEPTION_MODE: NONE` bind their outbound listeners
    /// to `127.0.0.1` (as Istio does without traffic capture); others to `0.0.0.0`. Service instances
    /// are left empty ([`ProxyContext::set_instances_from`]).
    ///
    /// # Errors
    /// The node type is not served (sidecar and router are): the message says so.
    pub fn from_proxy(proxy: &Proxy) -> Result<ProxyContext, String> {
        let kind = ProxyKind::of(proxy.node_type).ok_or_else(|| {
            format!(
                "node type {} is not served by meshpilot (sidecar and router are)",
                proxy.node_type.as_str()
            )
        })?;
        let mut ctx = ProxyContext::new(kind, &proxy.config_namespace);
        ctx.id = proxy.node_id.clone();
        ctx.ips = proxy.ip_addresses.iter().map(ToString::to_string).collect();
        ctx.labels = proxy.metadata.labels.clone();
        ctx.dns_domain = proxy.dns_domain.clone();
        ctx.interception_mode = InterceptionMode::parse(&proxy.metadata.interception_mode);
        ctx.proxyless_grpc = proxy.is_proxyless_grpc();
        ctx.istio_version = proxy.metadata.istio_version.clone();
        ctx.workload_certificates = proxy.metadata.raw.contains_key(PROXY_CONFIG_METADATA);
        ctx.locality = proxy.locality.clone();
        ctx.metadata = Arc::new(
            proxy
                .metadata
                .raw
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect(),
        );
        ctx.mesh_id = proxy.metadata.mesh_id.clone();
        ctx.service_cluster = proxy.service_cluster.clone();
        ctx.istio_extensions = proxy.istio_extensions;
        ctx.proxy_tracing = proxy
            .metadata
            .raw
            .get(PROXY_CONFIG_METADATA)
            .and_then(|pc| pc.get("tracing"))
            .filter(|t| !t.is_null())
            .and_then(|t| super::tracing::parse_proxy_tracing(t, "PROXY_CONFIG.tracing").ok());
        ctx.topology = TopologyMetadata {
            cluster_id: proxy.metadata.cluster_id.clone(),
            network: proxy.metadata.network.clone(),
            node_name: proxy.metadata.node_name.clone(),
        };
        ctx.set_topology(None);
        if kind == ProxyKind::Sidecar && ctx.interception_mode == InterceptionMode::None {
            ctx.bind_address = "127.0.0.1".to_string();
        }
        Ok(ctx)
    }

    /// A proxy of `kind` in `namespace` with Istio's defaults: no IPs or labels, DNS domain
    /// `<namespace>.svc.cluster.local`, REDIRECT interception, Envoy (not proxyless), bound to
    /// `0.0.0.0`.
    pub fn new(kind: ProxyKind, namespace: &str) -> ProxyContext {
        let prefix = match kind {
            ProxyKind::Sidecar => "sidecar",
            ProxyKind::Router => "router",
        };
        ProxyContext {
            id: format!("{prefix}~0.0.0.0~proxy.{namespace}~{namespace}.svc.cluster.local"),
            kind,
            ips: Vec::new(),
            namespace: namespace.to_string(),
            labels: Labels::new(),
            dns_domain: format!("{namespace}.svc.cluster.local"),
            interception_mode: InterceptionMode::Redirect,
            proxyless_grpc: false,
            istio_version: String::new(),
            bind_address: "0.0.0.0".to_string(),
            service_instances: Vec::new(),
            workload_certificates: false,
            locality: Locality::default(),
            metadata: Arc::default(),
            mesh_id: String::new(),
            service_cluster: String::new(),
            proxy_tracing: None,
            istio_extensions: super::node::IstioExtensions::default(),
            topology: TopologyMetadata::default(),
        }
    }

    /// Fills [`service_instances`](ProxyContext::service_instances) from `discovery`: the instances at
    /// the proxy's IPs, in its namespace, with its labels for registries that match them when no
    /// workload is at the IPs (Istio's `GetProxyServiceTargets`; none without IPs, as Istio).
    pub fn set_instances_from(&mut self, discovery: &dyn ServiceDiscovery) {
        self.service_instances = if self.ips.is_empty() {
            Vec::new()
        } else {
            discovery.proxy_service_targets(&self.ips, &self.namespace, &self.labels)
        };
        let workload = self.service_instances.first().map(|i| std::sync::Arc::clone(&i.endpoint.labels));
        self.set_topology(workload.as_deref());
    }

    /// Istio's `setTopologyLabels`: the locality comes from the workload's topology labels (region,
    /// zone, subzone: the registry's labels of the workload at the proxy's IPs, `workload`, else the
    /// proxy's own), else from its `topology.istio.io/locality` (or `istio-locality`) label with `.` or
    /// `/` separators, else from the node's `locality`; then the proxy's labels get the topology labels
    /// (`labelutil.AugmentLabels`): region, zone, subzone, `topology.istio.io/cluster` (`CLUSTER_ID`),
    /// `kubernetes.io/hostname` (`NODE_NAME`) and `topology.istio.io/network` (`NETWORK`, unless the
    /// workload has one). Locality failover by `failoverPriority` compares these labels with the
    /// endpoints'.
    pub fn set_topology(&mut self, workload: Option<&Labels>) {
        let keys = [LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE, LABEL_TOPOLOGY_SUBZONE];
        if let Some(workload) = workload
            && !keys.iter().any(|k| self.labels.contains_key(*k))
        {
            for key in keys.into_iter().chain([LABEL_TOPOLOGY_NETWORK]) {
                if let Some(value) = workload.get(key) {
                    self.labels.entry(key.to_string()).or_insert_with(|| value.clone());
                }
            }
        }
        let from_labels = keys.map(|k| self.labels.get(k));
        if from_labels.iter().any(Option::is_some) {
            let [region, zone, sub_zone] = from_labels.map(|v| v.cloned().unwrap_or_default());
            self.locality = Locality { region, zone, sub_zone };
        } else if let Some(label) =
            self.labels.get(LABEL_TOPOLOGY_LOCALITY).or_else(|| self.labels.get(LABEL_ISTIO_LOCALITY))
        {
            let mut parts = label.split(['.', '/']).map(str::to_string);
            self.locality = Locality {
                region: parts.next().unwrap_or_default(),
                zone: parts.next().unwrap_or_default(),
                sub_zone: parts.next().unwrap_or_default(),
            };
        }
        let Locality { region, zone, sub_zone } = self.locality.clone();
        for (key, value) in [
            (LABEL_TOPOLOGY_REGION, region),
            (LABEL_TOPOLOGY_ZONE, zone),
            (LABEL_TOPOLOGY_SUBZONE, sub_zone),
            (LABEL_TOPOLOGY_CLUSTER, self.topology.cluster_id.clone()),
            (LABEL_HOSTNAME, self.topology.node_name.clone()),
        ] {
            if !value.is_empty() {
                self.labels.insert(key.to_string(), value);
            }
        }
        if !self.topology.network.is_empty()
            && self.labels.get(LABEL_TOPOLOGY_NETWORK).is_none_or(String::is_empty)
        {
            self.labels.insert(LABEL_TOPOLOGY_NETWORK.to_string(), self.topology.network.clone());
        }
    }

    /// `true` when the proxy holds an Istio workload certificate: it was bootstrapped by pilot-agent
    /// (node metadata `PROXY_CONFIG` present, [`PROXY_CONFIG_METADATA`]), whose bootstrap has the
    /// `sds-grpc` cluster on which the agent serves the SDS secrets `default` (the workload key pair)
    /// and `ROOTCA` (the mesh roots). Only such proxies get mutual TLS config (PeerAuthentication on
    /// inbound chains, `ISTIO_MUTUAL` and auto-mTLS on outbound clusters); an Envoy connected directly
    /// (no agent, no `sds-grpc` cluster) keeps plaintext config, which it can load.
    pub fn has_workload_certificates(&self) -> bool {
        self.workload_certificates
    }

    /// The node's `NETWORK` (empty when not sent: the proxy is in every network for split-horizon EDS,
    /// Istio's `Proxy.InNetwork`).
    pub fn network(&self) -> &str {
        &self.topology.network
    }

    /// Sets the proxy's network as its node metadata `NETWORK` does (also its
    /// `topology.istio.io/network` label when the workload has none): for proxies built with
    /// [`ProxyContext::new`].
    pub fn set_network(&mut self, network: &str) {
        self.topology.network = network.to_string();
        self.set_topology(None);
    }

    /// The node's `CLUSTER_ID` (empty when not sent).
    pub fn cluster_id(&self) -> &str {
        &self.topology.cluster_id
    }

    /// The legacy tracing settings that apply to this proxy (Istio's `ProxyConfigOrDefault(...).tracing`):
    /// its own proxy config's when it has one (`PROXY_CONFIG`), else the mesh `defaultConfig.tracing`.
    pub fn effective_proxy_tracing<'a>(
        &'a self,
        mesh_default: Option<&'a super::tracing::ProxyTracing>,
    ) -> Option<&'a super::tracing::ProxyTracing> {
        if self.workload_certificates { self.proxy_tracing.as_ref() } else { mesh_default }
    }

    /// `true` for a sidecar.
    pub fn is_sidecar(&self) -> bool {
        self.kind == ProxyKind::Sidecar
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::node::NodeMetadata;

    fn proxy(id: &str, interception: &str) -> Proxy {
        let metadata = NodeMetadata { interception_mode: interception.into(), ..NodeMetadata::default() };
        Proxy::parse(id, metadata).unwrap()
    }

    #[test]
    fn sidecars_without_capture_bind_loopback_and_others_are_refused() {
        let ctx =
            ProxyContext::from_proxy(&proxy("sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", "NONE")).unwrap();
        assert_eq!(
            (ctx.kind, ctx.bind_address.as_str(), ctx.namespace.as_str()),
            (ProxyKind::Sidecar, "127.0.0.1", "ns")
        );
        assert_eq!(ctx.ips, ["10.0.0.1"]);
        let ctx =
            ProxyContext::from_proxy(&proxy("router~10.0.0.2~gw.ns~ns.svc.cluster.local", "NONE")).unwrap();
        assert_eq!((ctx.kind, ctx.bind_address.as_str()), (ProxyKind::Router, "0.0.0.0"));
        let ctx = ProxyContext::from_proxy(&proxy("sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", "")).unwrap();
        assert_eq!(ctx.interception_mode, InterceptionMode::Redirect);
        assert!(!ctx.has_workload_certificates(), "no PROXY_CONFIG: an Envoy connected directly");
        let err =
            ProxyContext::from_proxy(&proxy("ztunnel~10.0.0.3~z.ns~ns.svc.cluster.local", "")).unwrap_err();
        assert!(err.contains("ztunnel is not served"), "{err}");
    }

    #[test]
    fn proxy_config_metadata_marks_a_pilot_agent_proxy() {
        let mut raw = serde_json::Map::new();
        raw.insert("PROXY_CONFIG".into(), serde_json::json!({"discoveryAddress": "istiod:15012"}));
        raw.insert("ISTIO_VERSION".into(), serde_json::json!("1.28.0"));
        let metadata = NodeMetadata::from_json(raw).unwrap();
        let p = Proxy::parse("sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", metadata).unwrap();
        assert!(ProxyContext::from_proxy(&p).unwrap().has_workload_certificates());
        let mut raw = serde_json::Map::new();
        raw.insert("ISTIO_VERSION".into(), serde_json::json!("1.28.0"));
        let p =
            Proxy::parse("sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", NodeMetadata::from_json(raw).unwrap())
                .unwrap();
        assert!(
            !ProxyContext::from_proxy(&p).unwrap().has_workload_certificates(),
            "ISTIO_VERSION alone is not enough"
        );
    }

    #[test]
    fn the_proxy_configs_tracing_wins_over_the_meshs_only_with_a_proxy_config() {
        let with = |raw: serde_json::Value| {
            let metadata = NodeMetadata::from_json(raw.as_object().unwrap().clone()).unwrap();
            let mut p = Proxy::parse("sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", metadata).unwrap();
            p.service_cluster = "a.ns".into();
            ProxyContext::from_proxy(&p).unwrap()
        };
        let mesh = super::super::tracing::ProxyTracing { sampling: 7.0, ..Default::default() };
        let own = with(
            serde_json::json!({"PROXY_CONFIG": {"tracing": {"sampling": 30}}, "MESH_ID": "m1", "CLUSTER_ID": "c1"}),
        );
        assert_eq!(own.effective_proxy_tracing(Some(&mesh)).map(|t| t.sampling), Some(30.0));
        assert_eq!(
            (own.mesh_id.as_str(), own.cluster_id(), own.service_cluster.as_str()),
            ("m1", "c1", "a.ns")
        );
        // A proxy config without tracing: istiod's defaults, not the mesh's (ProxyConfigOrDefault).
        let bare = with(serde_json::json!({"PROXY_CONFIG": {"discoveryAddress": "istiod:15012"}}));
        assert_eq!(bare.effective_proxy_tracing(Some(&mesh)), None);
        // No proxy config (an Envoy connected directly): the mesh's defaultConfig.
        let direct = with(serde_json::json!({}));
        assert_eq!(direct.effective_proxy_tracing(Some(&mesh)).map(|t| t.sampling), Some(7.0));
    }
}
