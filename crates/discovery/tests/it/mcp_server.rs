//! meshpilot as an MCP-over-xDS config server (the `api` generator), against an in-process plane
//! and an ADS client that speaks as istiod's `configSources` client does (node metadata
//! `GENERATOR: api`, one SotW subscription per type URL of `ConfigInitialRequests`, ACK each
//! response): what it serves, how edits and deletes arrive, and who may read it.

use crate::support;

use std::{collections::BTreeMap, net::SocketAddr, time::Duration};

use api::{Kind, mcp};
use config::parse::ParseOptions;
use envoy_types::pb::{
    envoy::{
        config::core::v3::Node,
        service::discovery::v3::{
            DiscoveryRequest, DiscoveryResponse,
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::protobuf::{Struct, Value, value::Kind as ValueKind},
};
use meshpilot_testing::{Plane, PlaneOptions, write_atomic};
use model::Config;
use prost::Message;
use support::secure::Secure;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, Streaming, transport::Channel};

const STEP: Duration = Duration::from_secs(20);

const ROUTES: &str = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo, labels: {app: reviews}}
spec:
  hosts: [reviews.bookinfo.svc.cluster.local]
  http:
  - match: [{uri: {prefix: /v2}}]
    route: [{destination: {host: reviews.bookinfo.svc.cluster.local, subset: v2}}]
    timeout: 3s
  - route: [{destination: {host: reviews.bookinfo.svc.cluster.local, subset: v1}}]
---
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings.bookinfo.svc.cluster.local]
  http: [{route: [{destination: {host: ratings.bookinfo.svc.cluster.local}}]}]
";

const OTHERS: &str = "apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: bookinfo}
spec:
  host: reviews.bookinfo.svc.cluster.local
  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: bookinfo}
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
  location: MESH_EXTERNAL
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-all, namespace: istio-system, annotations: {owner: mesh-team}}
spec:
  action: DENY
  rules: [{to: [{operation: {paths: [/admin]}}]}]
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: lua, namespace: istio-system}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    patch: {operation: INSERT_BEFORE, value: {name: envoy.lua}}
";

/// The Istio objects of `text`, parsed as `meshpilot validate` reads files.
fn parse(text: &str) -> Vec<Config> {
    config::parse::parse_text("test.yaml", text, &ParseOptions::default())
        .into_iter()
        .map(|d| d.config.unwrap_or_else(|| panic!("{:?}", d.errors)))
        .collect()
}

/// The node istiod's MCP client sends (`sidecar~IP~POD.NS~NS.svc.cluster.local`, `GENERATOR: api`).
fn node(namespace: &str) -> Node {
    let s = |v: &str| Value { kind: Some(ValueKind::StringValue(v.into())) };
    Node {
        id: format!("sidecar~127.0.0.1~istiod-1.{namespace}~{namespace}.svc.cluster.local"),
        metadata: Some(Struct {
            fields: [("GENERATOR".to_string(), s("api")), ("NAMESPACE".to_string(), s(namespace))].into(),
        }),
        ..Default::default()
    }
}

/// One SotW ADS stream subscribed to every config type istiod's client asks for.
struct McpClient {
    tx: mpsc::Sender<DiscoveryRequest>,
    rx: Streaming<DiscoveryResponse>,
}

impl McpClient {
    /// Opens the stream with the first subscription queued (the server answers the call only after
    /// it read the first request); `Err` is the stream's refusal.
    async fn connect(channel: Channel, namespace: &str) -> Result<McpClient, Status> {
        let (tx, rx) = mpsc::channel(64);
        let n = node(namespace);
        for (i, type_url) in mcp::requested_type_urls().into_iter().enumerate() {
            let node = (i == 0).then(|| n.clone());
            tx.send(DiscoveryRequest { node, type_url, ..Default::default() }).await.unwrap();
        }
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        let rx = client.stream_aggregated_resources(ReceiverStream::new(rx)).await?.into_inner();
        Ok(McpClient { tx, rx })
    }

    /// The next response (ACKed), or the stream's error.
    async fn next(&mut self) -> Result<DiscoveryResponse, Status> {
        let r = tokio::time::timeout(STEP, self.rx.message())
            .await
            .map_err(|_| Status::deadline_exceeded("no response in time"))??
            .ok_or_else(|| Status::cancelled("stream ended"))?;
        let ack = DiscoveryRequest {
            type_url: r.type_url.clone(),
            version_info: r.version_info.clone(),
            response_nonce: r.nonce.clone(),
            ..Default::default()
        };
        self.tx.send(ack).await.unwrap();
        Ok(r)
    }

    /// The first response of every subscribed type, by type URL.
    async fn initial(&mut self) -> BTreeMap<String, DiscoveryResponse> {
        let mut out = BTreeMap::new();
        while out.len() < mcp::requested_type_urls().len() {
            let r = self.next().await.unwrap();
            assert!(
                out.insert(r.type_url.clone(), r).is_none(),
                "two responses for one type before the rest"
            );
        }
        out
    }
}

/// The objects of a config-type response, decoded, by `namespace/name`, with their versions.
fn decode(r: &DiscoveryResponse) -> BTreeMap<String, (String, Config)> {
    let kind = mcp::kind_from_type_url(&r.type_url).unwrap();
    r.resources
        .iter()
        .map(|any| {
            assert_eq!(any.type_url, mcp::RESOURCE_TYPE_URL);
            let resource = mcp::Resource::decode(any.value.as_slice()).unwrap();
            let config = model::mcp::from_resource(kind, &resource, "cluster.local").unwrap();
            let name = format!("{}/{}", config.meta.namespace, config.meta.name);
            (name, (config.meta.resource_version.clone(), config))
        })
        .collect()
}

async fn plaintext(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_every_config_type_and_pushes_edits_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    write_atomic(dir.path(), "routes.yaml", ROUTES);
    write_atomic(dir.path(), "others.yaml", OTHERS);
    let options = PlaneOptions { api_generator_auth: false, ..PlaneOptions::config_dir(dir.path()) };
    let plane = Plane::start_with(options).await.unwrap();
    let mut client = McpClient::connect(plaintext(plane.ads.addr).await, "istio-system").await.unwrap();
    let initial = client.initial().await;

    // Every object comes back equal to its file: spec, labels, annotations, namespace/name.
    let files: Vec<Config> = parse(ROUTES).into_iter().chain(parse(OTHERS)).collect();
    let mut served = 0;
    for (type_url, response) in &initial {
        let Some(kind) = mcp::kind_from_type_url(type_url) else {
            assert_eq!(type_url, mcp::MESH_CONFIG_TYPE_URL);
            continue;
        };
        let objects = decode(response);
        let expected: Vec<&Config> = files.iter().filter(|c| c.kind() == kind).collect();
        assert_eq!(objects.len(), expected.len(), "{type_url}");
        for want in expected {
            let (_, got) = &objects[&format!("{}/{}", want.meta.namespace, want.meta.name)];
            assert_eq!(got.spec, want.spec, "{type_url}");
            assert_eq!(
                (&got.meta.labels, &got.meta.annotations),
                (&want.meta.labels, &want.meta.annotations)
            );
            served += 1;
        }
    }
    assert_eq!(served, 6);
    // A config client is a connection, not a proxy whose config status is tracked.
    assert_eq!(plane.server.connections().len(), 1);
    let push = plane.server.push_context().unwrap();
    assert!(meshpilot_discovery::objects::proxy_views(&plane.server, &push).is_empty());
    let vs_url = mcp::type_url(Kind::VirtualService);
    let before = decode(&initial[&vs_url]);

    // Edit one VirtualService: the next response is the VirtualService type (no other type is
    // re-sent first), with only that object's version changed.
    write_atomic(dir.path(), "routes.yaml", &ROUTES.replace("timeout: 3s", "timeout: 5s"));
    let edited = client.next().await.unwrap();
    assert_eq!(edited.type_url, vs_url);
    assert_ne!(edited.version_info, initial[&vs_url].version_info);
    let after = decode(&edited);
    assert_ne!(after["bookinfo/reviews"].0, before["bookinfo/reviews"].0, "edited object, new version");
    assert_eq!(after["bookinfo/ratings"].0, before["bookinfo/ratings"].0, "untouched object, same version");
    let Some(api::Spec::VirtualService(vs)) = Some(&after["bookinfo/reviews"].1.spec) else { unreachable!() };
    assert_eq!(vs.http[0].timeout.as_ref().map(|d| d.seconds), Some(5));

    // A label-only edit is a change too (istiod's client would otherwise keep the old labels).
    let relabelled = ROUTES.replace("labels: {app: reviews}", "labels: {app: reviews, tier: backend}");
    write_atomic(dir.path(), "routes.yaml", &relabelled.replace("timeout: 3s", "timeout: 5s"));
    let labelled = decode(&client.next().await.unwrap());
    assert_ne!(labelled["bookinfo/reviews"].0, after["bookinfo/reviews"].0);
    assert_eq!(labelled["bookinfo/reviews"].1.meta.labels["tier"], "backend");

    // Delete the DestinationRule's file content down to the other objects: its type goes empty.
    let dr_url = mcp::type_url(Kind::DestinationRule);
    let without_dr = OTHERS.split("---\n").skip(1).collect::<Vec<_>>().join("---\n");
    write_atomic(dir.path(), "others.yaml", &without_dr);
    let deleted = client.next().await.unwrap();
    assert_eq!(deleted.type_url, dr_url);
    assert!(
        deleted.resources.is_empty(),
        "the deleted DestinationRule is gone: {:?}",
        decode(&deleted).keys()
    );

    // A WorkloadGroup changes no service or endpoint (the registry raises nothing), yet it is pushed.
    let group = "apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: vms, namespace: bookinfo}
spec:
  metadata: {labels: {app: vm}}
  template: {serviceAccount: vm}
";
    write_atomic(dir.path(), "group.yaml", group);
    let groups = client.next().await.unwrap();
    assert_eq!(groups.type_url, mcp::type_url(Kind::WorkloadGroup));
    assert_eq!(decode(&groups).keys().collect::<Vec<_>>(), ["bookinfo/vms"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_callers_are_refused_while_auth_is_on() {
    let dir = tempfile::tempdir().unwrap();
    write_atomic(dir.path(), "routes.yaml", ROUTES);
    let plane = Plane::start(dir.path()).await;
    let refused = match McpClient::connect(plaintext(plane.ads.addr).await, "istio-system").await {
        Ok(mut c) => c.next().await.unwrap_err(),
        Err(status) => status,
    };
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(refused.message().contains("authenticated control-plane identity"), "{}", refused.message());
    assert!(refused.message().contains("istio-system"), "{}", refused.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secure_port_serves_only_the_root_namespace() {
    let dir = tempfile::tempdir().unwrap();
    write_atomic(dir.path(), "routes.yaml", ROUTES);
    let plane = Plane::start(dir.path()).await;
    let secure = Secure::start(&plane).await;

    let mut istiod = McpClient::connect(secure.channel_as("istio-system", "istiod").await, "istio-system")
        .await
        .expect("an istio-system identity is served");
    let initial = istiod.initial().await;
    assert_eq!(decode(&initial[&mcp::type_url(Kind::VirtualService)]).len(), 2);

    let refused = match McpClient::connect(secure.channel_as("default", "app").await, "default").await {
        Ok(mut c) => c.next().await.unwrap_err(),
        Err(status) => status,
    };
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let message = refused.message();
    assert!(message.contains("spiffe://cluster.local/ns/default/sa/app"), "{message}");
    assert!(message.contains("\"istio-system\""), "{message}");
}

/// (type version, object versions) of every config type in a client's first responses.
fn versions(
    initial: &BTreeMap<String, DiscoveryResponse>,
) -> BTreeMap<String, (String, BTreeMap<String, String>)> {
    initial
        .iter()
        .filter(|(t, _)| mcp::kind_from_type_url(t).is_some())
        .map(|(t, r)| {
            (t.clone(), (r.version_info.clone(), decode(r).into_iter().map(|(n, (v, _))| (n, v)).collect()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_sends_the_same_versions() {
    // istiod's client replaces an object whose version changed: a restart must not look like an
    // edit of everything.
    let dir = tempfile::tempdir().unwrap();
    write_atomic(dir.path(), "routes.yaml", ROUTES);
    write_atomic(dir.path(), "others.yaml", OTHERS);
    let options = || PlaneOptions { api_generator_auth: false, ..PlaneOptions::config_dir(dir.path()) };
    let first = {
        let plane = Plane::start_with(options()).await.unwrap();
        let mut client = McpClient::connect(plaintext(plane.ads.addr).await, "istio-system").await.unwrap();
        versions(&client.initial().await)
    };
    let plane = Plane::start_with(options()).await.unwrap();
    let mut client = McpClient::connect(plaintext(plane.ads.addr).await, "istio-system").await.unwrap();
    let second = versions(&client.initial().await);
    assert_eq!(first.values().map(|(_, objects)| objects.len()).sum::<usize>(), 6);
    assert_eq!(first, second);
}
