//! Proxy identity: Istio's node id `TYPE~IP~ID~DOMAIN` and the typed node metadata ([`Proxy`], the
//! identity part of Istio's `model.Proxy`). The xDS engine reads the protobuf `node` into plain parts
//! and bounds their sizes (`xds::node::node_parts`); [`Proxy::from_node`] reads those parts;
//! [`super::ProxyContext::from_proxy`] derives what the generators read.
//!
//! An Envoy (or proxyless gRPC client) names itself in the first request of an xDS stream
//! (`node.id`, `node.metadata`, `node.locality`). Istio's agent writes
//! `sidecar~10.1.2.3~reviews-v1-abc.default~default.svc.cluster.local` and upper-snake metadata keys
//! (`NAMESPACE`, `LABELS`, `INSTANCE_IPS`, `CLUSTER_ID`, …). This module follows Istio's
//! `ParseServiceNodeWithMetadata` and `GetProxyConfigNamespace` (`pilot/pkg/model/context.go`) and
//! the JSON names of `NodeMetadata` (`pkg/model/proxy.go`):
//!
//! - exactly four `~`-separated parts; the type is one of [`NodeType::ALL`];
//! - IP addresses come from `INSTANCE_IPS` (comma-separated) when every entry is a valid IP, else from
//!   the node id's IP part; a proxy with neither is rejected;
//! - the config namespace is `NAMESPACE`, else the first label of the DNS domain
//!   (`default.svc.cluster.local` → `default`).

use std::{collections::BTreeMap, fmt, net::IpAddr, str::FromStr};

use serde_json::{Map, Value as Json};

/// How much of a client-chosen value an error message quotes, bytes.
const QUOTED_BYTES: usize = 256;

/// `value` as an error message quotes it ([`crate::finding::clip`] to [`QUOTED_BYTES`]).
fn quoted(value: &str) -> String {
    crate::finding::clip(value, QUOTED_BYTES).into_owned()
}

/// Errors reading a proxy's identity. The text is what the proxy receives as the gRPC
/// `InvalidArgument` message, so it says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// The first request of a stream carried no node or an empty `node.id`.
    #[error(
        "missing node information: the first request on an xDS stream must carry node.id \
         (TYPE~IP~ID~DOMAIN, e.g. sidecar~10.1.2.3~reviews-v1-abc.default~default.svc.cluster.local)"
    )]
    MissingNode,
    /// The node id does not have exactly four `~`-separated parts.
    #[error(
        "invalid node id {id:?}: it has {parts} '~'-separated part(s), expected 4: TYPE~IP~ID~DOMAIN \
         (e.g. sidecar~10.1.2.3~reviews-v1-abc.default~default.svc.cluster.local)"
    )]
    WrongPartCount {
        /// The node id as sent.
        id: String,
        /// How many parts it has.
        parts: usize,
    },
    /// The first part of the node id is not a known proxy type.
    #[error(
        "invalid node id {id:?}: unknown proxy type {node_type:?} (valid types: {})",
        NodeType::valid_list()
    )]
    InvalidType {
        /// The node id as sent.
        id: String,
        /// The type part.
        node_type: String,
    },
    /// Neither `INSTANCE_IPS` nor the node id's IP part holds a valid IP address.
    #[error(
        "invalid node id {id:?}: no valid IP address in the node id's IP part {ip:?} or in the \
         INSTANCE_IPS metadata (comma-separated IPs)"
    )]
    NoValidIp {
        /// The node id as sent.
        id: String,
        /// The IP part of the node id.
        ip: String,
    },
    /// A metadata key Istio reads has a value of the wrong JSON type.
    #[error("invalid node metadata {key}: expected {expected}, got {found}")]
    Metadata {
        /// The metadata key (`LABELS`, `NAMESPACE`, …).
        key: &'static str,
        /// What Istio expects there.
        expected: &'static str,
        /// The value found, as JSON.
        found: String,
    },
}

/// The role of a proxy, the first part of its node id (Istio's `NodeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeType {
    /// `sidecar`: an application's sidecar proxy (also proxyless gRPC clients).
    Sidecar,
    /// `router`: a standalone gateway (ingress/egress).
    Router,
    /// `waypoint`: an ambient waypoint proxy.
    Waypoint,
    /// `ztunnel`: ambient's node proxy.
    Ztunnel,
    /// `agentgateway`: the experimental agentgateway data plane.
    Agentgateway,
}

impl NodeType {
    /// Every type a node id may name, in Istio's order.
    pub const ALL: [NodeType; 5] =
        [NodeType::Sidecar, NodeType::Router, NodeType::Waypoint, NodeType::Ztunnel, NodeType::Agentgateway];

    /// The node-id spelling (`sidecar`, `router`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeType::Sidecar => "sidecar",
            NodeType::Router => "router",
            NodeType::Waypoint => "waypoint",
            NodeType::Ztunnel => "ztunnel",
            NodeType::Agentgateway => "agentgateway",
        }
    }

    fn valid_list() -> String {
        NodeType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for NodeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NodeType {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        NodeType::ALL.into_iter().find(|t| t.as_str() == s).ok_or(())
    }
}

/// The node metadata Istio's control plane reads (`pkg/model/proxy.go` `NodeMetadata`), with the
/// upper-snake JSON keys the agent writes. Absent string keys are empty; absent maps are empty.
/// Every key, including those not modelled here, is kept in [`NodeMetadata::raw`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeMetadata {
    /// `ISTIO_VERSION`: the proxy's Istio version (label of the `pilot_xds` gauge).
    pub istio_version: String,
    /// `LABELS`: the workload's labels.
    pub labels: BTreeMap<String, String>,
    /// `ANNOTATIONS`: the workload's annotations.
    pub annotations: BTreeMap<String, String>,
    /// `INSTANCE_IPS`: the workload's IPs, as sent (a comma-separated string on the wire).
    pub instance_ips: Vec<String>,
    /// `NAMESPACE`: the workload's namespace (the proxy's config namespace when set).
    pub namespace: String,
    /// `NODE_NAME`: the Kubernetes node the workload runs on.
    pub node_name: String,
    /// `WORKLOAD_NAME`: the workload (e.g. Deployment) name.
    pub workload_name: String,
    /// `SERVICE_ACCOUNT`: the workload's service account.
    pub service_account: String,
    /// `CLUSTER_ID`: the cluster the proxy belongs to.
    pub cluster_id: String,
    /// `NETWORK`: the network the proxy belongs to.
    pub network: String,
    /// `MESH_ID`: the mesh id.
    pub mesh_id: String,
    /// `INTERCEPTION_MODE`: how traffic reaches the proxy (`REDIRECT`, `TPROXY`, `NONE`).
    pub interception_mode: String,
    /// `GENERATOR`: a custom generator the client asks for (`grpc` for proxyless gRPC).
    pub generator: String,
    /// The keys not modelled above, as JSON (the modelled ones are kept once, in their fields: a
    /// proxy's metadata lives as long as its stream, once per connected proxy).
    pub raw: Map<String, Json>,
}

impl NodeMetadata {
    /// A boolean key of [`NodeMetadata::raw`] (`DNS_CAPTURE`, `DNS_AUTO_ALLOCATE`): Istio's
    /// `StringBool`, a string Go's `strconv.ParseBool` reads as true (`"true"`, `"1"`, `"T"`, …) or a JSON
    /// `true`. Absent or anything else: false.
    pub fn flag(&self, key: &str) -> bool {
        match self.raw.get(key) {
            Some(Json::Bool(b)) => *b,
            Some(Json::String(s)) => matches!(s.as_str(), "1" | "t" | "T" | "TRUE" | "true" | "True"),
            _ => false,
        }
    }
}

/// The keys modelled besides [`STRING_KEYS`].
const MODELLED_KEYS: [&str; 3] = ["LABELS", "ANNOTATIONS", "INSTANCE_IPS"];

/// The string-valued keys: (JSON key, accessor).
const STRING_KEYS: [&str; 10] = [
    "ISTIO_VERSION",
    "NAMESPACE",
    "NODE_NAME",
    "WORKLOAD_NAME",
    "SERVICE_ACCOUNT",
    "CLUSTER_ID",
    "NETWORK",
    "MESH_ID",
    "INTERCEPTION_MODE",
    "GENERATOR",
];

impl NodeMetadata {
    /// Reads the metadata from a JSON object (the protojson form of `node.metadata`).
    ///
    /// # Errors
    /// [`NodeError::Metadata`] when a modelled key has the wrong JSON type.
    pub fn from_json(raw: Map<String, Json>) -> Result<Self, NodeError> {
        let mut m = NodeMetadata::default();
        for key in STRING_KEYS {
            let value = string_key(&raw, key)?;
            *m.string_field_mut(key) = value;
        }
        m.labels = string_map_key(&raw, "LABELS")?;
        m.annotations = string_map_key(&raw, "ANNOTATIONS")?;
        let ips = string_key(&raw, "INSTANCE_IPS")?;
        m.instance_ips =
            if ips.is_empty() { Vec::new() } else { ips.split(',').map(str::to_owned).collect() };
        let mut raw = raw;
        raw.retain(|key, _| !MODELLED_KEYS.contains(&key.as_str()) && !STRING_KEYS.contains(&key.as_str()));
        m.raw = raw;
        Ok(m)
    }

    fn string_field_mut(&mut self, key: &str) -> &mut String {
        match key {
            "ISTIO_VERSION" => &mut self.istio_version,
            "NAMESPACE" => &mut self.namespace,
            "NODE_NAME" => &mut self.node_name,
            "WORKLOAD_NAME" => &mut self.workload_name,
            "SERVICE_ACCOUNT" => &mut self.service_account,
            "CLUSTER_ID" => &mut self.cluster_id,
            "NETWORK" => &mut self.network,
            "MESH_ID" => &mut self.mesh_id,
            "INTERCEPTION_MODE" => &mut self.interception_mode,
            _ => &mut self.generator,
        }
    }

    fn string_field(&self, key: &str) -> &str {
        match key {
            "ISTIO_VERSION" => &self.istio_version,
            "NAMESPACE" => &self.namespace,
            "NODE_NAME" => &self.node_name,
            "WORKLOAD_NAME" => &self.workload_name,
            "SERVICE_ACCOUNT" => &self.service_account,
            "CLUSTER_ID" => &self.cluster_id,
            "NETWORK" => &self.network,
            "MESH_ID" => &self.mesh_id,
            "INTERCEPTION_MODE" => &self.interception_mode,
            _ => &self.generator,
        }
    }

    /// The modelled fields as JSON with Istio's keys, empty ones omitted, `INSTANCE_IPS` joined with
    /// commas — the shape of `metadata` in Istio's `/debug/adsz`.
    pub fn to_json(&self) -> Map<String, Json> {
        let mut out = Map::new();
        let put_str = |out: &mut Map<String, Json>, key: &str, v: &str| {
            if !v.is_empty() {
                out.insert(key.to_owned(), Json::String(v.to_owned()));
            }
        };
        put_str(&mut out, "ISTIO_VERSION", &self.istio_version);
        if !self.labels.is_empty() {
            out.insert("LABELS".into(), string_map_json(&self.labels));
        }
        if !self.annotations.is_empty() {
            out.insert("ANNOTATIONS".into(), string_map_json(&self.annotations));
        }
        put_str(&mut out, "INSTANCE_IPS", &self.instance_ips.join(","));
        for key in STRING_KEYS.iter().skip(1) {
            put_str(&mut out, key, self.string_field(key));
        }
        out
    }
}

fn string_map_json(m: &BTreeMap<String, String>) -> Json {
    Json::Object(m.iter().map(|(k, v)| (k.clone(), Json::String(v.clone()))).collect())
}

fn string_key(raw: &Map<String, Json>, key: &'static str) -> Result<String, NodeError> {
    match raw.get(key) {
        None | Some(Json::Null) => Ok(String::new()),
        Some(Json::String(s)) => Ok(s.clone()),
        Some(other) => {
            Err(NodeError::Metadata { key, expected: "a string", found: quoted(&other.to_string()) })
        }
    }
}

fn string_map_key(raw: &Map<String, Json>, key: &'static str) -> Result<BTreeMap<String, String>, NodeError> {
    let err = |found: &Json| NodeError::Metadata {
        key,
        expected: "an object of string values",
        found: quoted(&found.to_string()),
    };
    match raw.get(key) {
        None | Some(Json::Null) => Ok(BTreeMap::new()),
        Some(Json::Object(o)) => o
            .iter()
            .map(|(k, v)| match v {
                Json::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(err(&raw[key])),
            })
            .collect(),
        Some(other) => Err(err(other)),
    }
}

/// Where a proxy runs (`node.locality`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Locality {
    /// Region.
    pub region: String,
    /// Zone.
    pub zone: String,
    /// Sub-zone.
    pub sub_zone: String,
}

/// A connected proxy's identity, read once from the first request of its stream (Istio's
/// `model.Proxy`, identity part only).
#[derive(Debug, Clone, PartialEq)]
pub struct Proxy {
    /// The proxy's role.
    pub node_type: NodeType,
    /// The workload's IPs: `INSTANCE_IPS` when all valid, else the node id's IP.
    pub ip_addresses: Vec<IpAddr>,
    /// The id part, conventionally `<pod>.<namespace>`.
    pub id: String,
    /// The DNS domain part, e.g. `default.svc.cluster.local`.
    pub dns_domain: String,
    /// The namespace whose config applies: `NAMESPACE`, else the DNS domain's first label.
    pub config_namespace: String,
    /// Typed node metadata.
    pub metadata: NodeMetadata,
    /// `node.locality`.
    pub locality: Locality,
    /// The node id exactly as sent.
    pub node_id: String,
    /// `node.user_agent_name` (`envoy`, `gRPC C-core linux Python`, …).
    pub user_agent_name: String,
    /// `node.cluster` (Istio's `XdsNode.Cluster`: pilot-agent's service cluster), the service name
    /// of the spans a Datadog or OpenTelemetry tracer reports. Set by the xDS server.
    pub service_cluster: String,
    /// What the stream's caller proved (Istio's `VerifiedIdentity`): set by the xDS server on an
    /// authenticating port (15012), empty on the plaintext port.
    pub verified_identities: Vec<VerifiedIdentity>,
    /// Which of istio-proxy's telemetry filters the proxy has compiled in (from `node.extensions`;
    /// set by the xDS server). Upstream Envoy has none: it gets no Istio stats or metadata exchange
    /// filters.
    pub istio_extensions: IstioExtensions,
}

/// Which of istio-proxy's own telemetry filters a proxy has (what it reports in `node.extensions`,
/// found by config type: `stats.PluginConfig`, `io.istio.http.peer_metadata.Config`,
/// `envoy.tcp.metadataexchange.config.MetadataExchange`). istiod assumes all of them; meshpilot adds
/// a filter only to proxies that can load it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IstioExtensions {
    /// The HTTP `istio.stats` filter.
    pub http_stats: bool,
    /// The TCP (network) `istio.stats` filter.
    pub tcp_stats: bool,
    /// The HTTP peer metadata filter (`istio.metadata_exchange` in HTTP filter chains).
    pub http_peer_metadata: bool,
    /// The TCP `istio.metadata_exchange` network filter.
    pub tcp_metadata_exchange: bool,
    /// `istio.metadata_exchange` as an upstream network filter (on outbound clusters).
    pub upstream_metadata_exchange: bool,
}

impl IstioExtensions {
    /// All of istio-proxy's telemetry filters (what a pilot-agent-run istio-proxy reports).
    pub const ALL: IstioExtensions = IstioExtensions {
        http_stats: true,
        tcp_stats: true,
        http_peer_metadata: true,
        tcp_metadata_exchange: true,
        upstream_metadata_exchange: true,
    };

    /// Whether the proxy has none of them (upstream Envoy).
    pub fn is_none(&self) -> bool {
        *self == IstioExtensions::default()
    }
}

/// An identity the caller of an xDS stream proved with a client certificate or a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedIdentity {
    /// The SPIFFE URI (`spiffe://cluster.local/ns/istio-system/sa/istiod`).
    pub identity: String,
    /// Its namespace (`istio-system`).
    pub namespace: String,
}

impl Proxy {
    /// Parses a node id `TYPE~IP~ID~DOMAIN` together with its metadata (Istio's
    /// `ParseServiceNodeWithMetadata` + `GetProxyConfigNamespace`).
    ///
    /// # Errors
    /// [`NodeError`] naming the node id and what is expected.
    pub fn parse(node_id: &str, metadata: NodeMetadata) -> Result<Self, NodeError> {
        if node_id.is_empty() {
            return Err(NodeError::MissingNode);
        }
        let parts: Vec<&str> = node_id.split('~').collect();
        let [node_type, ip, id, domain] = parts[..] else {
            return Err(NodeError::WrongPartCount { id: quoted(node_id), parts: parts.len() });
        };
        let node_type = node_type
            .parse::<NodeType>()
            .map_err(|()| NodeError::InvalidType { id: quoted(node_id), node_type: node_type.to_owned() })?;
        let from_meta: Option<Vec<IpAddr>> = if metadata.instance_ips.is_empty() {
            None
        } else {
            metadata.instance_ips.iter().map(|s| s.trim().parse::<IpAddr>().ok()).collect()
        };
        let ip_addresses = match from_meta {
            Some(ips) => ips,
            None => match ip.parse::<IpAddr>() {
                Ok(a) => vec![a],
                Err(_) => {
                    return Err(NodeError::NoValidIp { id: quoted(node_id), ip: quoted(ip) });
                }
            },
        };
        let config_namespace = if metadata.namespace.is_empty() {
            match domain.split_once('.') {
                Some((first, _)) => first.to_owned(),
                None => String::new(),
            }
        } else {
            metadata.namespace.clone()
        };
        Ok(Proxy {
            node_type,
            ip_addresses,
            id: id.to_owned(),
            dns_domain: domain.to_owned(),
            config_namespace,
            metadata,
            locality: Locality::default(),
            node_id: node_id.to_owned(),
            user_agent_name: String::new(),
            service_cluster: String::new(),
            verified_identities: Vec::new(),
            istio_extensions: IstioExtensions::default(),
        })
    }

    /// Reads a proxy from what the first request's `node` carries: `node.id`, `node.metadata` as
    /// JSON, `node.locality` and `node.user_agent_name` (the xDS engine unpacks the protobuf and bounds
    /// the sizes before: `xds::node::node_parts`).
    ///
    /// # Errors
    /// [`NodeError`] when the metadata is mistyped ([`NodeMetadata::from_json`]) or the id malformed
    /// ([`Proxy::parse`]).
    pub fn from_node(
        node_id: &str,
        metadata: Map<String, Json>,
        locality: Locality,
        user_agent_name: String,
    ) -> Result<Self, NodeError> {
        let mut proxy = Proxy::parse(node_id, NodeMetadata::from_json(metadata)?)?;
        proxy.locality = locality;
        proxy.user_agent_name = user_agent_name;
        Ok(proxy)
    }

    /// Whether this is a proxyless gRPC client (`GENERATOR=grpc`).
    pub fn is_proxyless_grpc(&self) -> bool {
        self.metadata.generator == "grpc"
    }

    /// Whether this is an MCP-over-xDS config client (`GENERATOR=api`, istiod's `configSources`
    /// client): it is answered by the `api` generator (Istio's `apigen`).
    pub fn uses_api_generator(&self) -> bool {
        self.metadata.generator == "api"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(j: Json) -> NodeMetadata {
        NodeMetadata::from_json(j.as_object().unwrap().clone()).unwrap()
    }

    #[test]
    fn from_node_reads_metadata_locality_and_user_agent() {
        let metadata = json!({"GENERATOR": "grpc", "NAMESPACE": "test", "INSTANCE_IPS": "127.0.0.1"});
        let locality = Locality { region: "r".into(), zone: "z".into(), sub_zone: "s".into() };
        let p = Proxy::from_node(
            "sidecar~127.0.0.1~client-1.test~test.svc.cluster.local",
            metadata.as_object().unwrap().clone(),
            locality.clone(),
            "envoy".into(),
        )
        .unwrap();
        assert_eq!(p.locality, locality);
        assert_eq!(p.user_agent_name, "envoy");
        assert_eq!(p.config_namespace, "test");
        assert_eq!(Json::Object(p.metadata.to_json()), metadata);
    }

    #[test]
    fn malformed_ids_and_mistyped_metadata_are_quoted_only_in_part() {
        let err = Proxy::from_node(&"x".repeat(1024), Map::new(), Locality::default(), String::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("(1024 bytes)") && err.len() < 600, "{err}");
        let mistyped = json!({"NAMESPACE": ["y".repeat(10_000)]});
        let err = Proxy::from_node(
            "sidecar~10.0.0.1~a.default~default.svc.cluster.local",
            mistyped.as_object().unwrap().clone(),
            Locality::default(),
            String::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("NAMESPACE") && err.len() < 600, "{err}");
    }

    #[test]
    fn parses_a_sidecar_node_id_with_metadata() {
        let m = meta(json!({
            "ISTIO_VERSION": "1.28.0", "NAMESPACE": "bookinfo", "INSTANCE_IPS": "10.1.2.3,fd00::1",
            "LABELS": {"app": "reviews", "version": "v1"}, "CLUSTER_ID": "Kubernetes", "GENERATOR": "grpc",
            "ENVOY_STATUS_PORT": 15021
        }));
        let p = Proxy::parse("sidecar~10.9.9.9~reviews-v1-abc.default~default.svc.cluster.local", m).unwrap();
        assert_eq!(p.node_type, NodeType::Sidecar);
        assert_eq!(p.ip_addresses, vec!["10.1.2.3".parse::<IpAddr>().unwrap(), "fd00::1".parse().unwrap()]);
        assert_eq!(p.id, "reviews-v1-abc.default");
        assert_eq!(p.dns_domain, "default.svc.cluster.local");
        assert_eq!(p.config_namespace, "bookinfo", "NAMESPACE wins over the domain");
        assert_eq!(p.metadata.labels["version"], "v1");
        assert_eq!(p.metadata.cluster_id, "Kubernetes");
        assert!(p.is_proxyless_grpc());
        assert_eq!(p.metadata.raw["ENVOY_STATUS_PORT"], json!(15021));
        assert!(!p.metadata.raw.contains_key("LABELS"), "a modelled key is kept once, in its field");
        assert!(!p.metadata.raw.contains_key("NAMESPACE"));
    }

    #[test]
    fn falls_back_to_node_id_ip_and_domain_namespace() {
        let p = Proxy::parse(
            "router~10.0.0.7~gw.istio-system~istio-system.svc.cluster.local",
            NodeMetadata::default(),
        )
        .unwrap();
        assert_eq!(p.node_type, NodeType::Router);
        assert_eq!(p.ip_addresses, vec!["10.0.0.7".parse::<IpAddr>().unwrap()]);
        assert_eq!(p.config_namespace, "istio-system");
        // An invalid INSTANCE_IPS entry makes the whole list unusable (Istio: hasValidIPAddresses).
        let p = Proxy::parse("sidecar~10.0.0.8~a.b~b.svc", meta(json!({"INSTANCE_IPS": "10.0.0.1,nope"})))
            .unwrap();
        assert_eq!(p.ip_addresses, vec!["10.0.0.8".parse::<IpAddr>().unwrap()]);
        // A domain with no dot gives no namespace.
        let p = Proxy::parse("sidecar~10.0.0.8~a~local", NodeMetadata::default()).unwrap();
        assert_eq!(p.config_namespace, "");
    }

    #[test]
    fn malformed_node_ids_are_typed_errors_that_say_what_is_expected() {
        let e = Proxy::parse("just-a-name", NodeMetadata::default()).unwrap_err();
        assert_eq!(e, NodeError::WrongPartCount { id: "just-a-name".into(), parts: 1 });
        let text = e.to_string();
        assert!(text.contains("expected 4: TYPE~IP~ID~DOMAIN"), "{text}");

        let e = Proxy::parse("a~b~c~d~e", NodeMetadata::default()).unwrap_err();
        assert!(matches!(e, NodeError::WrongPartCount { parts: 5, .. }));

        let e = Proxy::parse("gateway~10.0.0.1~x.y~y.svc", NodeMetadata::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid node id \"gateway~10.0.0.1~x.y~y.svc\": unknown proxy type \"gateway\" \
             (valid types: sidecar, router, waypoint, ztunnel, agentgateway)"
        );

        let e = Proxy::parse("sidecar~not-an-ip~x.y~y.svc", NodeMetadata::default()).unwrap_err();
        assert!(matches!(e, NodeError::NoValidIp { .. }));
        assert!(e.to_string().contains("INSTANCE_IPS"));

        assert_eq!(Proxy::parse("", NodeMetadata::default()).unwrap_err(), NodeError::MissingNode);
    }

    #[test]
    fn mistyped_metadata_is_rejected_with_the_key() {
        let e = NodeMetadata::from_json(json!({"NAMESPACE": 3}).as_object().unwrap().clone()).unwrap_err();
        assert_eq!(e.to_string(), "invalid node metadata NAMESPACE: expected a string, got 3");
        let e =
            NodeMetadata::from_json(json!({"LABELS": {"a": 1}}).as_object().unwrap().clone()).unwrap_err();
        assert!(matches!(e, NodeError::Metadata { key: "LABELS", .. }));
    }
}
