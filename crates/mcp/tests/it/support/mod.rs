//! A small MCP-over-xDS server for the client's tests: per type URL a list of resources (set by
//! the test), sent in full to every stream that subscribed and again whenever the test changes
//! it; the requests (ACKs, NACKs) the client sends are recorded.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, Mutex},
};

use api::{Kind, mcp::Resource};
use envoy_types::pb::{
    envoy::service::discovery::v3::{
        DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
        aggregated_discovery_service_server::{AggregatedDiscoveryService, AggregatedDiscoveryServiceServer},
    },
    google::protobuf::Any,
};
use prost::Message;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tonic::{Request, Response, Status, Streaming};

/// Per type URL: (version, resources).
pub type State = BTreeMap<String, (u64, Vec<Any>)>;

#[derive(Clone)]
struct Service {
    state: watch::Receiver<State>,
    requests: Arc<Mutex<Vec<DiscoveryRequest>>>,
}

type ResponseStream = Pin<Box<dyn Stream<Item = Result<DiscoveryResponse, Status>> + Send>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Service {
    type StreamAggregatedResourcesStream = ResponseStream;
    type DeltaAggregatedResourcesStream =
        Pin<Box<dyn Stream<Item = Result<DeltaDiscoveryResponse, Status>> + Send>>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let mut state = self.state.clone();
        let requests = self.requests.clone();
        tokio::spawn(async move {
            // Type URL → version last sent on this stream.
            let mut sent: BTreeMap<String, u64> = BTreeMap::new();
            let mut nonce = 0u64;
            loop {
                let mut due: Vec<String> = Vec::new();
                tokio::select! {
                    r = incoming.next() => match r {
                        Some(Ok(req)) => {
                            requests.lock().unwrap().push(req.clone());
                            if req.response_nonce.is_empty() && !sent.contains_key(&req.type_url) {
                                sent.insert(req.type_url.clone(), u64::MAX);
                                due.push(req.type_url.clone());
                            }
                        }
                        _ => return,
                    },
                    changed = state.changed() => {
                        if changed.is_err() { return; }
                        let current = state.borrow().clone();
                        for (url, last) in &sent {
                            let version = current.get(url).map_or(0, |(v, _)| *v);
                            if version != *last { due.push(url.clone()); }
                        }
                    }
                }
                let current = state.borrow().clone();
                for url in due {
                    let (version, resources) = current.get(&url).cloned().unwrap_or((0, Vec::new()));
                    sent.insert(url.clone(), version);
                    nonce += 1;
                    let response = DiscoveryResponse {
                        version_info: version.to_string(),
                        resources,
                        type_url: url,
                        nonce: nonce.to_string(),
                        ..DiscoveryResponse::default()
                    };
                    if tx.send(Ok(response)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented("delta"))
    }
}

/// The running fake server.
pub struct FakeServer {
    pub addr: SocketAddr,
    state: watch::Sender<State>,
    pub requests: Arc<Mutex<Vec<DiscoveryRequest>>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl FakeServer {
    /// Serves `state` on `addr` (port 0: any free port).
    pub async fn start(addr: SocketAddr, state: State) -> FakeServer {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = watch::channel(state);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let service = Service { state: rx, requests: requests.clone() };
        let (stop, stopped) = oneshot::channel::<()>();
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(AggregatedDiscoveryServiceServer::new(service))
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
        });
        FakeServer { addr, state: tx, requests, stop: Some(stop), task: Some(task) }
    }

    /// Replaces the resources of `type_url` (a new version).
    pub fn set(&self, type_url: &str, resources: Vec<Any>) {
        self.state.send_modify(|s| {
            let next = s.values().map(|(v, _)| *v).max().unwrap_or(0) + 1;
            s.insert(type_url.to_string(), (next, resources));
        });
    }

    /// The current state (to restart a server with it).
    pub fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// The requests received with a nonce (ACKs and NACKs), in order.
    pub fn replies(&self) -> Vec<DiscoveryRequest> {
        self.requests.lock().unwrap().iter().filter(|r| !r.response_nonce.is_empty()).cloned().collect()
    }

    /// Stops serving and drops every stream (a server that goes away).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Streams stay open through a graceful shutdown; end them by closing the state channel.
        drop(self.state);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// A VirtualService resource `ns/name` routing `host` to `dest`, at MCP version `version`.
pub fn vs(ns_name: &str, version: &str, host: &str, dest: &str) -> Any {
    let json = serde_json::json!({"hosts": [host], "http": [{"route": [{"destination": {"host": dest}}]}]});
    resource(Kind::VirtualService, ns_name, version, &json)
}

/// A resource of `kind` named `ns/name` with the spec `json`, at MCP version `version`.
pub fn resource(kind: Kind, ns_name: &str, version: &str, json: &serde_json::Value) -> Any {
    let node = api::yaml::Node::from_json(json, api::yaml::Mark::default());
    let spec = api::Spec::from_node(kind, Some(&node)).unwrap().0;
    let (namespace, name) = ns_name.split_once('/').unwrap();
    let meta = api::mcp::ResourceMeta {
        namespace: namespace.into(),
        name: name.into(),
        version: version.into(),
        ..api::mcp::ResourceMeta::default()
    };
    let r: Resource = api::mcp::to_resource(&meta, &spec);
    Any { type_url: api::mcp::RESOURCE_TYPE_URL.into(), value: r.encode_to_vec() }
}

/// A MeshConfig resource.
pub fn mesh_config(json: &serde_json::Value) -> Any {
    let mesh = api::mesh_config::MeshConfig::from_json(json).unwrap();
    Any { type_url: api::mesh_config::MESH_CONFIG_ANY_TYPE_URL.into(), value: mesh.encode_to_vec() }
}
