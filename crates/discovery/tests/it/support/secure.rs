//! The secure xDS port (15012) beside a test [`Plane`]: the control plane's CA, workload
//! certificates for the test's proxies, Envoy bootstraps that present them, and one-shot SDS probes
//! over the secure port (as a given identity) and over the plane's plaintext port.

use std::{collections::BTreeSet, net::SocketAddr, sync::Arc, time::Duration};

use envoy_types::pb::envoy::{
    config::core::v3::Node,
    service::discovery::v3::{
        DiscoveryRequest, DiscoveryResponse,
        aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
    },
};
use meshpilot_discovery::secure::{SecurePort, istiod_dns_names};
use meshpilot_testing::Plane;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use security::{Authenticator, IstioCa, ca::CaOptions, client::SecureTarget, identity::SpiffeId};
use serde_json::json;
use tokio_stream::StreamExt as _;

/// The control plane's namespace (istiod's serving-certificate names are of this namespace).
pub const GW_NS: &str = "istio-system";

/// The control plane's CA, a secure xDS port serving the plane's DiscoveryServer, and workload
/// certificates for the test's proxies.
pub struct Secure {
    ca: Arc<IstioCa>,
    addr: SocketAddr,
    dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Secure {
    pub async fn start(plane: &Plane) -> Secure {
        Secure::start_with(plane, xds::AdsConfig::default()).await
    }

    /// [`Secure::start`] with the port's ADS settings (connection caps, …).
    pub async fn start_with(plane: &Plane, config: xds::AdsConfig) -> Secure {
        Secure::start_with_auth(plane, config, true).await
    }

    /// [`Secure::start_with`], xDS callers authenticated only when `xds_auth` (Istio's `XDS_AUTH`).
    pub async fn start_with_auth(plane: &Plane, config: xds::AdsConfig, xds_auth: bool) -> Secure {
        let dir = tempfile::tempdir().unwrap();
        let ca =
            Arc::new(IstioCa::load_or_create(None, &dir.path().join("ca"), CaOptions::default()).unwrap());
        let port = SecurePort {
            ca: ca.clone(),
            authenticator: Arc::new(Authenticator::new("cluster.local", Vec::new(), None)),
            dns_names: istiod_dns_names(GW_NS, None),
            xds_auth,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (server, secrets) = (plane.server.clone(), plane.secrets.clone());
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            server.serve_secure(secrets, config, port, listener, shutdown).await.unwrap();
        });
        Secure { ca, addr, dir, _stop: stop }
    }

    /// Writes a workload certificate for `namespace/sa` to files: (chain, key, root) paths.
    pub fn identity_files(&self, namespace: &str, sa: &str) -> (String, String, String) {
        let id = SpiffeId {
            trust_domain: "cluster.local".into(),
            namespace: namespace.into(),
            service_account: sa.into(),
        };
        let (chain, key) = self.ca.issue_identity(&id, Duration::from_secs(3600)).unwrap();
        let path = |f: &str| self.dir.path().join(format!("{namespace}-{sa}-{f}"));
        std::fs::write(path("chain.pem"), chain.concat()).unwrap();
        std::fs::write(path("key.pem"), key).unwrap();
        std::fs::write(path("root.pem"), self.ca.root_pem()).unwrap();
        let s = |f: &str| path(f).display().to_string();
        (s("chain.pem"), s("key.pem"), s("root.pem"))
    }

    /// The router bootstrap of `plane` pointed at the secure port, presenting a certificate of
    /// `istio-system/istio-ingressgateway`.
    pub fn router_bootstrap(&self, plane: &Plane) -> serde_json::Value {
        self.secure_bootstrap(plane.router(meshpilot_testing::AdsApi::Sotw), GW_NS, "istio-ingressgateway")
    }

    /// `bootstrap` pointed at the secure port, presenting a workload certificate of `namespace/sa`.
    pub fn secure_bootstrap(
        &self,
        mut bootstrap: meshpilot_testing::Bootstrap,
        namespace: &str,
        sa: &str,
    ) -> serde_json::Value {
        bootstrap.ads = self.addr;
        let mut json = bootstrap.to_json();
        let (chain, key, root) = self.identity_files(namespace, sa);
        json["static_resources"]["clusters"][0]["transport_socket"] = json!({
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "sni": "istiod.istio-system.svc",
                "common_tls_context": {
                    "alpn_protocols": ["h2"],
                    "tls_certificates": [{"certificate_chain": {"filename": chain}, "private_key": {"filename": key}}],
                    "validation_context": {
                        "trusted_ca": {"filename": root},
                        "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": "istiod.istio-system.svc"}}]
                    }
                }
            }
        });
        json
    }

    /// A TLS handshake with the secure port (no client certificate): whether it completed.
    pub async fn tls_handshake(&self) -> Result<(), std::io::Error> {
        use tower_service::Service as _;
        let target = SecureTarget {
            addr: self.addr,
            server_name: "istiod.istio-system.svc".into(),
            roots: self.ca.roots().to_vec(),
        };
        let mut connector = security::client::Connector::new(&target, None).unwrap();
        connector.call("https://istiod.istio-system.svc".parse().unwrap()).await.map(drop)
    }

    /// The secure port's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A channel to the secure port presenting a client certificate of `namespace/sa`.
    pub async fn channel_as(&self, namespace: &str, sa: &str) -> tonic::transport::Channel {
        let (chain, key, _) = self.identity_files(namespace, sa);
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(&chain).unwrap().map(Result::unwrap).collect();
        let key = PrivateKeyDer::from_pem_file(&key).unwrap();
        let roots = self.ca.roots().to_vec();
        let target = SecureTarget { addr: self.addr, server_name: "istiod.istio-system.svc".into(), roots };
        security::client::channel(&target, Some((chain, key))).await.unwrap()
    }

    /// A channel to the secure port presenting no client certificate.
    pub async fn channel_anonymous(&self) -> tonic::transport::Channel {
        let target = SecureTarget {
            addr: self.addr,
            server_name: "istiod.istio-system.svc".into(),
            roots: self.ca.roots().to_vec(),
        };
        security::client::channel(&target, None).await.unwrap()
    }

    /// `bootstrap` (an [`meshpilot_testing::AdsApi::Rest`] one) polling the secure port over HTTP/2
    /// with a workload certificate of `namespace/sa`.
    pub fn rest_bootstrap(
        &self,
        bootstrap: meshpilot_testing::Bootstrap,
        namespace: &str,
        sa: &str,
    ) -> serde_json::Value {
        let mut json = self.secure_bootstrap(bootstrap, namespace, sa);
        json["static_resources"]["clusters"][0]["typed_extension_protocol_options"] = json!({
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}
            }
        });
        json
    }

    /// One SotW SDS request for `names` over the secure port as a router of `namespace` (labels of
    /// [`router_metadata`]) with a certificate of `namespace/sa`: the names in the first response.
    pub async fn sds_names(&self, namespace: &str, sa: &str, names: &[&str]) -> BTreeSet<String> {
        let channel = self.channel_as(namespace, sa).await;
        secret_names(&sds_response(AggregatedDiscoveryServiceClient::new(channel), namespace, names).await)
    }
}

/// One SotW SDS request for `names` on the plane's plaintext ADS port (15010) as a router of
/// `namespace`: the first response (a control plane answers an SDS request, with no resources when
/// it serves none).
pub async fn plaintext_sds(plane: &Plane, namespace: &str, names: &[&str]) -> DiscoveryResponse {
    let client =
        AggregatedDiscoveryServiceClient::connect(format!("http://{}", plane.ads.addr)).await.unwrap();
    sds_response(client, namespace, names).await
}

/// The names of the secrets in an SDS response.
pub fn secret_names(response: &DiscoveryResponse) -> BTreeSet<String> {
    response
        .resources
        .iter()
        .map(|any| {
            let s: envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret =
                prost::Message::decode(any.value.as_slice()).unwrap();
            s.name
        })
        .collect()
}

async fn sds_response(
    mut client: AggregatedDiscoveryServiceClient<tonic::transport::Channel>,
    namespace: &str,
    names: &[&str],
) -> DiscoveryResponse {
    let node = Node {
        id: format!("router~127.0.0.9~probe-1.{namespace}~{namespace}.svc.cluster.local"),
        metadata: Some(router_metadata(namespace)),
        ..Default::default()
    };
    let request = DiscoveryRequest {
        node: Some(node),
        type_url: xds::type_url::SECRET.into(),
        resource_names: names.iter().map(ToString::to_string).collect(),
        ..Default::default()
    };
    let requests = tokio_stream::iter(vec![request]).chain(tokio_stream::pending());
    let mut stream = client.stream_aggregated_resources(requests).await.unwrap().into_inner();
    tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("an SDS response")
        .unwrap()
        .expect("an SDS response")
}

/// Node metadata of a router of `namespace` with the ingress gateway's labels plus `probe: "true"`
/// (so the Gateway `probe`, whose Secret no ReferenceGrant allows, applies to it and not to Envoy:
/// a listener waiting for a refused secret would hold Envoy's whole first listener set for the 15 s
/// initial fetch timeout).
pub fn router_metadata(namespace: &str) -> envoy_types::pb::google::protobuf::Struct {
    use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
    let s = |v: &str| Value { kind: Some(Kind::StringValue(v.to_string())) };
    let labels = Struct {
        fields: [("istio".to_string(), s("ingressgateway")), ("probe".to_string(), s("true"))]
            .into_iter()
            .collect(),
    };
    Struct {
        fields: [
            ("NAMESPACE".to_string(), s(namespace)),
            ("CLUSTER_ID".to_string(), s("Kubernetes")),
            ("LABELS".to_string(), Value { kind: Some(Kind::StructValue(labels)) }),
        ]
        .into_iter()
        .collect(),
    }
}

/// `POST path` with the JSON `body` over `channel` (HTTP/2, the secure port): (status, body).
pub async fn rest_post(channel: &tonic::transport::Channel, path: &str, body: &[u8]) -> (u16, String) {
    use tower_service::Service as _;
    let mut channel = channel.clone();
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://xds-grpc{path}"))
        .header("content-type", "application/json")
        .body(tonic::body::Body::new(axum::body::Body::from(body.to_vec())))
        .unwrap();
    std::future::poll_fn(|cx| channel.poll_ready(cx)).await.unwrap();
    let response =
        tokio::time::timeout(Duration::from_secs(10), channel.call(request)).await.unwrap().unwrap();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), usize::MAX).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}
