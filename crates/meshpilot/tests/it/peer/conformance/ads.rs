//! A small SotW ADS client that fetches what one proxy gets, asking as the proxy would ([`Client`]):
//! as Envoy (CDS wildcard, EDS for the EDS clusters, LDS wildcard, RDS for the route names of the HTTP
//! connection managers) or as a proxyless gRPC client (LDS by its dial targets, RDS by the API
//! listeners' route names, CDS by the routes' clusters, EDS for the EDS clusters); every response
//! ACKed. Resources are kept as type URL + bytes; nothing is decoded beyond the names it needs.

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
            DiscoveryRequest, DiscoveryResponse,
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
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
    /// The DNS name table (`istio.networking.nds.v1.NameTable`), asked only by DNS-capturing sidecars.
    Nds,
}

impl XdsType {
    /// All five.
    pub const ALL: [XdsType; 5] = [XdsType::Cds, XdsType::Eds, XdsType::Lds, XdsType::Rds, XdsType::Nds];

    /// The v3 type URL.
    pub fn url(self) -> &'static str {
        match self {
            XdsType::Cds => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            XdsType::Eds => "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            XdsType::Lds => "type.googleapis.com/envoy.config.listener.v3.Listener",
            XdsType::Rds => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            XdsType::Nds => networking::nds::NAME_TABLE_TYPE,
        }
    }

    /// CDS, EDS, LDS, RDS.
    pub fn label(self) -> &'static str {
        match self {
            XdsType::Cds => "CDS",
            XdsType::Eds => "EDS",
            XdsType::Lds => "LDS",
            XdsType::Rds => "RDS",
            XdsType::Nds => "NDS",
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
        // One unnamed table per proxy.
        XdsType::Nds => "name-table".to_string(),
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

/// The cluster names the routes of an RDS response send requests to: each route's cluster and the
/// clusters of its weighted set (what a proxyless gRPC client subscribes to by CDS).
fn route_cluster_names(routes: &BTreeMap<String, Any>) -> BTreeSet<String> {
    use envoy_types::pb::envoy::config::route::v3::{
        RouteConfiguration, route::Action, route_action::ClusterSpecifier,
    };
    let mut out = BTreeSet::new();
    for rc in routes.values().filter_map(|a| RouteConfiguration::decode(a.value.as_slice()).ok()) {
        for route in rc.virtual_hosts.iter().flat_map(|v| v.routes.iter()) {
            let Some(Action::Route(action)) = &route.action else { continue };
            match &action.cluster_specifier {
                Some(ClusterSpecifier::Cluster(c)) => {
                    out.insert(c.clone());
                }
                Some(ClusterSpecifier::WeightedClusters(w)) => {
                    out.extend(w.clusters.iter().map(|c| c.name.clone()));
                }
                _ => {}
            }
        }
    }
    out
}

/// How the client asks for resources.
#[derive(Clone, Debug)]
pub enum Client {
    /// As Envoy: CDS wildcard; its answer brings EDS (the EDS clusters) and LDS wildcard; the LDS
    /// answer brings RDS (the connection managers' route names). With `nds`, as a sidecar whose
    /// pilot-agent proxies DNS (`DNS_CAPTURE`): the CDS answer also brings an NDS wildcard request, as
    /// the agent asks for the name table on the same stream.
    Envoy { nds: bool },
    /// As a proxyless gRPC client dialing `xds:///TARGET` for each target (`HOST:PORT`): LDS by the
    /// targets; the answer brings RDS by the route names of the API listeners' connection managers,
    /// that answer CDS by the clusters the routes use (single and weighted), that answer EDS by the EDS
    /// clusters. The targets come from the caller, never from a server's answer.
    Proxyless(BTreeSet<String>),
}

/// One request: the type, and the names asked for (`None`: wildcard).
struct Ask {
    t: XdsType,
    names: Option<BTreeSet<String>>,
}

impl Client {
    /// The first request.
    fn first(&self) -> Ask {
        match self {
            Client::Envoy { .. } => Ask { t: XdsType::Cds, names: None },
            Client::Proxyless(targets) => Ask { t: XdsType::Lds, names: Some(targets.clone()) },
        }
    }

    /// The requests the first answer of type `t` brings, from what has been received so far.
    fn next(&self, t: XdsType, got: &Fetched) -> Vec<Ask> {
        let empty = BTreeMap::new();
        let of = |t: XdsType| got.resources.get(&t).unwrap_or(&empty);
        match (self, t) {
            (Client::Envoy { nds }, XdsType::Cds) => {
                let mut asks = vec![
                    Ask { t: XdsType::Eds, names: Some(eds_names(of(XdsType::Cds))) },
                    Ask { t: XdsType::Lds, names: None },
                ];
                if *nds {
                    asks.push(Ask { t: XdsType::Nds, names: None });
                }
                asks
            }
            (_, XdsType::Lds) => {
                vec![Ask { t: XdsType::Rds, names: Some(rds_names(of(XdsType::Lds))) }]
            }
            (Client::Proxyless(_), XdsType::Rds) => {
                vec![Ask { t: XdsType::Cds, names: Some(route_cluster_names(of(XdsType::Rds))) }]
            }
            (Client::Proxyless(_), XdsType::Cds) => {
                vec![Ask { t: XdsType::Eds, names: Some(eds_names(of(XdsType::Cds))) }]
            }
            _ => vec![],
        }
    }

    /// The types only asked for after an answer of type `t` (they stay empty when `t` is never asked).
    fn behind(&self, t: XdsType) -> &'static [XdsType] {
        match (self, t) {
            (Client::Envoy { .. }, XdsType::Lds) => &[XdsType::Rds],
            (Client::Proxyless(_), XdsType::Lds) => &[XdsType::Rds, XdsType::Cds, XdsType::Eds],
            (Client::Proxyless(_), XdsType::Rds) => &[XdsType::Cds, XdsType::Eds],
            (Client::Proxyless(_), XdsType::Cds) => &[XdsType::Eds],
            _ => &[],
        }
    }
}

/// Fetches CDS, EDS, LDS and RDS for `node` from the ADS server at `addr` (plaintext) in the order
/// `client` asks, waiting at most `limit` in all. A type the server answers with nothing, or that is
/// never asked for (nothing to ask), stays empty.
pub async fn fetch(addr: SocketAddr, node: Node, limit: Duration, client: Client) -> Result<Fetched, String> {
    tokio::time::timeout(limit, fetch_inner(addr, node, client))
        .await
        .map_err(|_| format!("no complete CDS/EDS/LDS/RDS from {addr} within {limit:?}"))?
}

/// The request for `ask` (with the node on the stream's first request), or `None` when it names nothing:
/// a client sends no request then, so the type and what waits on it are marked answered (empty).
fn issue(
    client: &Client,
    ask: Ask,
    asked: &mut BTreeMap<XdsType, BTreeSet<String>>,
    answered: &mut BTreeSet<XdsType>,
    node: &mut Option<Node>,
) -> Option<DiscoveryRequest> {
    asked.insert(ask.t, ask.names.clone().unwrap_or_default());
    if ask.names.as_ref().is_some_and(|n| n.is_empty()) {
        answered.insert(ask.t);
        answered.extend(client.behind(ask.t).iter().copied());
        return None;
    }
    Some(DiscoveryRequest {
        node: node.take(),
        type_url: ask.t.url().into(),
        resource_names: ask.names.unwrap_or_default().into_iter().collect(),
        ..Default::default()
    })
}

/// An ADS stream to `addr` (plaintext) opened with request `first`: the sender of the requests that
/// follow, and the responses.
pub async fn open_stream(
    addr: SocketAddr,
    first: DiscoveryRequest,
) -> Result<(mpsc::Sender<DiscoveryRequest>, tonic::Streaming<DiscoveryResponse>), String> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let (tx, rx) = mpsc::channel::<DiscoveryRequest>(16);
    tx.send(first).await.map_err(|_| "request channel closed".to_string())?;
    let mut grpc = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(usize::MAX);
    let responses = grpc
        .stream_aggregated_resources(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|m| (m, rx))
        }))
        .await
        .map_err(|s| format!("{addr}: {s}"))?
        .into_inner();
    Ok((tx, responses))
}

/// The next response on a stream of [`open_stream`] to `addr`; an error when the stream ends or fails.
pub async fn next_response(
    responses: &mut tonic::Streaming<DiscoveryResponse>,
    addr: SocketAddr,
) -> Result<DiscoveryResponse, String> {
    match responses.message().await {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err(format!("{addr} closed the stream")),
        Err(s) => Err(format!("{addr}: {s}")),
    }
}

async fn fetch_inner(addr: SocketAddr, node: Node, client: Client) -> Result<Fetched, String> {
    let mut out = Fetched::default();
    for t in XdsType::ALL {
        out.resources.insert(t, BTreeMap::new());
    }
    // Which types have been answered (or will never be asked); which names were asked for.
    let mut answered = BTreeSet::new();
    if !matches!(client, Client::Envoy { nds: true }) {
        answered.insert(XdsType::Nds);
    }
    let mut asked: BTreeMap<XdsType, BTreeSet<String>> = BTreeMap::new();
    let mut node = Some(node);
    let Some(first) = issue(&client, client.first(), &mut asked, &mut answered, &mut node) else {
        // Nothing to ask for at all (a proxyless client without targets).
        return Ok(out);
    };
    let (tx, mut responses) = open_stream(addr, first).await?;
    let mut followed = BTreeSet::new();
    loop {
        let resp = next_response(&mut responses, addr).await?;
        let t = XdsType::from_url(&resp.type_url);
        // ACK whatever it is, with the names asked for.
        let ack = DiscoveryRequest {
            type_url: resp.type_url.clone(),
            version_info: resp.version_info.clone(),
            response_nonce: resp.nonce.clone(),
            resource_names: t
                .and_then(|t| asked.get(&t))
                .map(|n| n.iter().cloned().collect())
                .unwrap_or_default(),
            ..Default::default()
        };
        tx.send(ack).await.map_err(|_| "request channel closed".to_string())?;
        let Some(t) = t else { continue };
        let map = out.resources.entry(t).or_default();
        for any in resp.resources {
            map.insert(name_of(t, &any), any);
        }
        answered.insert(t);
        // The first answer of a type brings the requests that depend on it; later pushes are only ACKed.
        if followed.insert(t) {
            for ask in client.next(t, &out) {
                if let Some(req) = issue(&client, ask, &mut asked, &mut answered, &mut node) {
                    tx.send(req).await.map_err(|_| "request channel closed".to_string())?;
                }
            }
        }
        if XdsType::ALL.iter().all(|t| answered.contains(t)) {
            return Ok(out);
        }
    }
}
