//! A small SotW ADS client that fetches what one proxy gets, as Envoy asks for it: CDS (wildcard), EDS
//! for the EDS clusters, LDS (wildcard), RDS for the route names of the HTTP connection managers; every
//! response ACKed. Resources are kept as type URL + bytes; nothing is decoded beyond the names it needs.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    time::Duration,
};

use envoy_types::pb::{
    envoy::{
        config::{
            cluster::v3::{Cluster, cluster::ClusterDiscoveryType},
            core::v3::Node,
            listener::v3::{Listener, filter},
        },
        extensions::filters::network::http_connection_manager::v3::{
            HttpConnectionManager, http_connection_manager::RouteSpecifier,
        },
        service::discovery::v3::{
            DiscoveryRequest, aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::protobuf::Any,
};
use prost::Message;
use tokio::sync::mpsc;

/// The four xDS types the harness compares, in Envoy's request order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum XdsType {
    /// Clusters.
    Cds,
    /// Cluster load assignments.
    Eds,
    /// Listeners.
    Lds,
    /// Route configurations.
    Rds,
}

impl XdsType {
    /// All four.
    pub const ALL: [XdsType; 4] = [XdsType::Cds, XdsType::Eds, XdsType::Lds, XdsType::Rds];

    /// The v3 type URL.
    pub fn url(self) -> &'static str {
        match self {
            XdsType::Cds => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            XdsType::Eds => "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            XdsType::Lds => "type.googleapis.com/envoy.config.listener.v3.Listener",
            XdsType::Rds => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
        }
    }

    /// CDS, EDS, LDS, RDS.
    pub fn label(self) -> &'static str {
        match self {
            XdsType::Cds => "CDS",
            XdsType::Eds => "EDS",
            XdsType::Lds => "LDS",
            XdsType::Rds => "RDS",
        }
    }

    fn from_url(url: &str) -> Option<XdsType> {
        XdsType::ALL.into_iter().find(|t| t.url() == url)
    }
}

/// What one proxy received: per type, resource name → the resource (`Any`).
#[derive(Debug, Default, Clone)]
pub struct Fetched {
    /// Per type, by name.
    pub resources: BTreeMap<XdsType, BTreeMap<String, Any>>,
}

/// The name of a resource of type `t` (the field each message keeps it in).
fn name_of(t: XdsType, any: &Any) -> String {
    use envoy_types::pb::envoy::config::{
        endpoint::v3::ClusterLoadAssignment, route::v3::RouteConfiguration,
    };
    let v = any.value.as_slice();
    match t {
        XdsType::Cds => Cluster::decode(v).map(|c| c.name).unwrap_or_default(),
        XdsType::Eds => ClusterLoadAssignment::decode(v).map(|c| c.cluster_name).unwrap_or_default(),
        XdsType::Lds => Listener::decode(v).map(|l| l.name).unwrap_or_default(),
        XdsType::Rds => RouteConfiguration::decode(v).map(|r| r.name).unwrap_or_default(),
    }
}

/// The EDS names of the EDS clusters of a CDS response.
fn eds_names(clusters: &BTreeMap<String, Any>) -> BTreeSet<String> {
    use envoy_types::pb::envoy::config::cluster::v3::cluster::DiscoveryType;
    clusters
        .values()
        .filter_map(|a| Cluster::decode(a.value.as_slice()).ok())
        .filter(|c| c.cluster_discovery_type == Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)))
        .map(|c| match c.eds_cluster_config.as_ref().map(|e| e.service_name.clone()) {
            Some(s) if !s.is_empty() => s,
            _ => c.name,
        })
        .collect()
}

/// The RDS names the HTTP connection managers of an LDS response name.
fn rds_names(listeners: &BTreeMap<String, Any>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for l in listeners.values().filter_map(|a| Listener::decode(a.value.as_slice()).ok()) {
        // A proxyless gRPC listener is an API listener holding the connection manager.
        if let Some(any) = l.api_listener.as_ref().and_then(|a| a.api_listener.as_ref())
            && let Ok(hcm) = HttpConnectionManager::decode(any.value.as_slice())
            && let Some(RouteSpecifier::Rds(rds)) = hcm.route_specifier
        {
            out.insert(rds.route_config_name);
        }
        let chains = l.filter_chains.iter().chain(l.default_filter_chain.iter());
        for f in chains.flat_map(|c| c.filters.iter()) {
            if let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type
                && any.type_url.ends_with("HttpConnectionManager")
                && let Ok(hcm) = HttpConnectionManager::decode(any.value.as_slice())
                && let Some(RouteSpecifier::Rds(rds)) = hcm.route_specifier
            {
                out.insert(rds.route_config_name);
            }
        }
    }
    out
}

/// The listener names a proxyless gRPC client asks for: `HOST:PORT` of every `outbound|PORT||HOST`
/// cluster (one per `xds:///HOST:PORT` target it would dial).
fn grpc_listener_names(clusters: &BTreeMap<String, Any>) -> BTreeSet<String> {
    clusters
        .keys()
        .filter_map(|c| {
            let mut parts = c.split('|');
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some("outbound"), Some(port), Some(""), Some(host)) => Some(format!("{host}:{port}")),
                _ => None,
            }
        })
        .collect()
}

/// Fetches CDS, EDS, LDS and RDS for `node` from the ADS server at `addr` (plaintext), waiting at most
/// `limit` in all. A type the server answers with nothing stays empty. `grpc`: ask for listeners by name
/// as a proxyless gRPC client does ([`grpc_listener_names`]) instead of the wildcard.
pub async fn fetch(addr: SocketAddr, node: Node, limit: Duration, grpc: bool) -> Result<Fetched, String> {
    tokio::time::timeout(limit, fetch_inner(addr, node, grpc))
        .await
        .map_err(|_| format!("no complete CDS/EDS/LDS/RDS from {addr} within {limit:?}"))?
}

async fn fetch_inner(addr: SocketAddr, node: Node, grpc: bool) -> Result<Fetched, String> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let (tx, rx) = mpsc::channel::<DiscoveryRequest>(16);
    let send = |req: DiscoveryRequest| {
        let tx = tx.clone();
        async move { tx.send(req).await.map_err(|_| "request channel closed".to_string()) }
    };
    send(DiscoveryRequest { node: Some(node), type_url: XdsType::Cds.url().into(), ..Default::default() })
        .await?;
    let mut client = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(usize::MAX);
    let mut responses = client
        .stream_aggregated_resources(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|m| (m, rx))
        }))
        .await
        .map_err(|s| format!("{addr}: {s}"))?
        .into_inner();
    let mut out = Fetched::default();
    // Which types have been answered; which names were asked for.
    let mut answered = BTreeSet::new();
    let mut asked: BTreeMap<XdsType, BTreeSet<String>> = BTreeMap::new();
    loop {
        let resp = match responses.message().await {
            Ok(Some(r)) => r,
            Ok(None) => return Err(format!("{addr} closed the stream")),
            Err(s) => return Err(format!("{addr}: {s}")),
        };
        // ACK whatever it is.
        send(DiscoveryRequest {
            type_url: resp.type_url.clone(),
            version_info: resp.version_info.clone(),
            response_nonce: resp.nonce.clone(),
            resource_names: XdsType::from_url(&resp.type_url)
                .and_then(|t| asked.get(&t))
                .map(|n| n.iter().cloned().collect())
                .unwrap_or_default(),
            ..Default::default()
        })
        .await?;
        let Some(t) = XdsType::from_url(&resp.type_url) else { continue };
        let map = out.resources.entry(t).or_default();
        for any in resp.resources {
            map.insert(name_of(t, &any), any);
        }
        answered.insert(t);
        // Envoy's order: the first CDS answer brings EDS (its EDS clusters) and LDS; the first LDS answer
        // brings RDS (the connection managers' route names). Later pushes are only ACKed.
        let follow: Vec<(XdsType, BTreeSet<String>)> = match t {
            XdsType::Cds if !asked.contains_key(&XdsType::Lds) => {
                let clusters = &out.resources[&XdsType::Cds];
                let lds = if grpc { grpc_listener_names(clusters) } else { BTreeSet::new() };
                vec![(XdsType::Eds, eds_names(clusters)), (XdsType::Lds, lds)]
            }
            XdsType::Lds if !asked.contains_key(&XdsType::Rds) => {
                vec![(XdsType::Rds, rds_names(&out.resources[&XdsType::Lds]))]
            }
            _ => vec![],
        };
        for (t, names) in follow {
            asked.insert(t, names.clone());
            if names.is_empty() && (t != XdsType::Lds || grpc) {
                // Nothing to ask for: Envoy sends no request, the type stays empty (no listeners: no
                // routes either).
                answered.insert(t);
                if t == XdsType::Lds {
                    answered.insert(XdsType::Rds);
                }
                continue;
            }
            send(DiscoveryRequest {
                type_url: t.url().into(),
                resource_names: names.into_iter().collect(),
                ..Default::default()
            })
            .await?;
        }
        if XdsType::ALL.iter().all(|t| answered.contains(t)) {
            for t in XdsType::ALL {
                out.resources.entry(t).or_default();
            }
            return Ok(out);
        }
    }
}
