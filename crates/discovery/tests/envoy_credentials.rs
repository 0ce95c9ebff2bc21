//! `credentialName` secrets served over SDS to a real Envoy router: Kubernetes Secrets written in the
//! config directory, an Istio Gateway with `credentialName` (and `kubernetes-gateway://` names allowed
//! by a ReferenceGrant), the router connected to the secure xDS port with a workload certificate of
//! its namespace (istiod sends credentials only to authenticated proxies). HTTPS through the router
//! presents the Secret's certificate; rewriting the Secret rotates it without a restart; a proxy of
//! another namespace, or a name no ReferenceGrant allows, gets nothing. Needs Envoy
//! (scripts/install-envoy.sh).

mod support;

use std::{collections::BTreeSet, net::SocketAddr, sync::Arc, time::Duration};

use envoy_types::pb::envoy::{
    config::core::v3::Node,
    service::discovery::v3::{
        DiscoveryRequest, aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
    },
};
use meshpilot_discovery::secure::{SecurePort, istiod_dns_names};
use meshpilot_testing::{EchoServer, Envoy, Plane, free_port, wait_for};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use security::{Authenticator, IstioCa, ca::CaOptions, client::SecureTarget, identity::SpiffeId};
use serde_json::json;
use tokio_stream::StreamExt as _;

use support::tls::{HOST, TestCa, https_get};
const GW_NS: &str = "istio-system";

/// A `kubernetes.io/tls` Secret document with `stringData`.
fn secret_yaml(namespace: &str, name: &str, (cert, key, _): &(String, String, Vec<u8>)) -> String {
    let indent = |s: &str| s.lines().map(|l| format!("    {l}\n")).collect::<String>();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {namespace}}}\ntype: kubernetes.io/tls\n\
         stringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(cert),
        indent(key)
    )
}

fn https_server(port: u16, credential: &str) -> String {
    format!(
        "  - port: {{number: {port}, name: https-{port}, protocol: HTTPS}}\n    hosts: [{HOST}]\n    \
         tls: {{mode: SIMPLE, credentialName: \"{credential}\"}}\n"
    )
}

/// The control plane's CA, a secure xDS port serving the plane's DiscoveryServer, and workload
/// certificates for the test's proxies.
struct Secure {
    ca: Arc<IstioCa>,
    addr: SocketAddr,
    dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Secure {
    async fn start(plane: &Plane) -> Secure {
        let dir = tempfile::tempdir().unwrap();
        let ca =
            Arc::new(IstioCa::load_or_create(None, &dir.path().join("ca"), CaOptions::default()).unwrap());
        let port = SecurePort {
            ca: ca.clone(),
            authenticator: Arc::new(Authenticator::new("cluster.local", Vec::new(), None)),
            dns_names: istiod_dns_names(GW_NS, None),
            xds_auth: true,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (server, secrets) = (plane.server.clone(), plane.secrets.clone());
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            server.serve_secure(secrets, xds::AdsConfig::default(), port, listener, shutdown).await.unwrap();
        });
        Secure { ca, addr, dir, _stop: stop }
    }

    /// Writes a workload certificate for `namespace/sa` to files: (chain, key, root) paths.
    fn identity_files(&self, namespace: &str, sa: &str) -> (String, String, String) {
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
    fn router_bootstrap(&self, plane: &Plane) -> serde_json::Value {
        let mut b = plane.router(meshpilot_testing::AdsApi::Sotw);
        b.ads = self.addr;
        let mut json = b.to_json();
        let (chain, key, root) = self.identity_files(GW_NS, "istio-ingressgateway");
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

    /// One SotW SDS request for `names` over the secure port as a router of `namespace` (labels of
    /// [`router_metadata`]) with a certificate of `namespace/sa`: the names in the first response.
    async fn sds_names(&self, namespace: &str, sa: &str, names: &[&str]) -> BTreeSet<String> {
        let (chain, key, _) = self.identity_files(namespace, sa);
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(&chain).unwrap().map(Result::unwrap).collect();
        let key = PrivateKeyDer::from_pem_file(&key).unwrap();
        let roots = self.ca.roots().to_vec();
        let target = SecureTarget { addr: self.addr, server_name: "istiod.istio-system.svc".into(), roots };
        let channel = security::client::channel(&target, Some((chain, key))).await.unwrap();
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        let metadata = router_metadata(namespace);
        let node = Node {
            id: format!("router~127.0.0.9~probe-1.{namespace}~{namespace}.svc.cluster.local"),
            metadata: Some(metadata),
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
        let response = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("an SDS response")
            .unwrap()
            .expect("an SDS response");
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
}

/// Node metadata of a router of `namespace` with the ingress gateway's labels plus `probe: "true"`
/// (so the Gateway `probe`, whose Secret no ReferenceGrant allows, applies to it and not to Envoy:
/// a listener waiting for a refused secret would hold Envoy's whole first listener set for the 15 s
/// initial fetch timeout).
fn router_metadata(namespace: &str) -> envoy_types::pb::google::protobuf::Struct {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_serves_credential_name_secrets_from_the_config_dir_and_rotates_them() {
    let config = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    let first = ca.issue("first");
    let app = ca.issue("app");
    let backend = EchoServer::start("credential-backend").await.unwrap();
    let (port, granted_port, denied_port) = (free_port(), free_port(), free_port());
    // `denied_port` belongs to the Gateway `probe`, which only the SDS probe below selects.
    std::fs::write(
        config.path().join("gateway.yaml"),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: secure, namespace: {GW_NS}}}\n\
             spec:\n  selector: {{istio: ingressgateway}}\n  servers:\n{}{}\
             ---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: probe, namespace: {GW_NS}}}\n\
             spec:\n  selector: {{istio: ingressgateway, probe: \"true\"}}\n  servers:\n{}\
             ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: secure, namespace: {GW_NS}}}\n\
             spec:\n  hosts: [{HOST}]\n  gateways: [secure]\n  http:\n  - route:\n    - destination: {{host: backend.{GW_NS}.svc.cluster.local, port: {{number: 8080}}}}\n\
             ---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: backend, namespace: {GW_NS}}}\n\
             spec:\n  hosts: [backend.{GW_NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
             - {{number: 8080, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: backend}}\n\
             ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: backend-1, namespace: {GW_NS}}}\n\
             spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  labels: {{app: backend}}\n\
             ---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: allow-gw, namespace: apps}}\n\
             spec:\n  from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: {GW_NS}}}]\n  to: [{{group: \"\", kind: Secret, name: app-cert}}]\n",
            https_server(port, "gw-cert"),
            https_server(granted_port, "kubernetes-gateway://apps/app-cert"),
            https_server(denied_port, "kubernetes-gateway://apps/denied-cert"),
            backend.addr.port()
        ),
    )
    .unwrap();
    let secrets_file = config.path().join("secrets.yaml");
    let write_secrets = |gw: &(String, String, Vec<u8>)| {
        let docs = [
            secret_yaml(GW_NS, "gw-cert", gw),
            secret_yaml("apps", "app-cert", &app),
            secret_yaml("apps", "denied-cert", &app),
            secret_yaml("other", "own-cert", &app),
        ];
        std::fs::write(&secrets_file, docs.join("---\n")).unwrap();
    };
    write_secrets(&first);

    let plane = Plane::start(config.path()).await;
    let (trigger, shutdown) = model::shutdown_channel();
    let reader = sds::ConfigDirSecrets::new(
        vec![config.path().to_path_buf()],
        plane.server.credentials().clone(),
        None,
    );
    tokio::spawn(reader.run(plane.server.connections().clone(), shutdown, model::push::PushRequest::secrets));
    let secure = Secure::start(&plane).await;
    let envoy = Envoy::start_json(&secure.router_bootstrap(&plane)).await.unwrap();
    let client = ca.client();
    let at = |p: u16| -> SocketAddr { ([127, 0, 0, 1], p).into() };

    let first_try = wait_for("HTTPS with the credentialName secret", Duration::from_secs(15), async || {
        https_get(&client, at(port)).await.ok()
    })
    .await;
    let (status, body, served) = match first_try {
        Ok(r) => r,
        Err(e) => {
            let last = https_get(&client, at(port)).await.err();
            let (_, dump) = envoy.admin_get("/config_dump?resource=dynamic_active_secrets").await.unwrap();
            panic!(
                "{e}: last error {last:?}\nsecrets: {}\n{}",
                &dump[..dump.len().min(3000)],
                envoy.log_tail(10)
            )
        }
    };
    assert_eq!((status, body.as_str()), (200, "credential-backend"));
    assert_eq!(served, first.2, "Envoy presents the Secret's certificate");

    // kubernetes-gateway:// across namespaces, allowed by the ReferenceGrant.
    let (status, _, served) =
        wait_for("HTTPS with the granted secret", Duration::from_secs(15), async || {
            https_get(&client, at(granted_port)).await.ok()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    assert_eq!((status, served == app.2), (200, true));

    // Rotation: the Secret document is rewritten; Envoy gets the new certificate over SDS.
    let second = ca.issue("second");
    write_secrets(&second);
    wait_for("the rotated certificate served", Duration::from_secs(15), async || {
        https_get(&client, at(port)).await.ok().filter(|(_, _, served)| *served == second.2)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    let (status, _, served) = https_get(&client, at(port)).await.unwrap();
    assert_eq!((status, served == second.2), (200, true));

    // Authorization, each in one request/response: the router's own namespace and the granted
    // Gateway API name are sent; the ungranted one is not.
    let got = secure
        .sds_names(
            GW_NS,
            "istio-ingressgateway",
            &[
                "kubernetes://gw-cert",
                "kubernetes-gateway://apps/app-cert",
                "kubernetes-gateway://apps/denied-cert",
            ],
        )
        .await;
    assert_eq!(
        got,
        BTreeSet::from([
            "kubernetes-gateway://apps/app-cert".to_string(),
            "kubernetes://gw-cert".to_string()
        ])
    );
    // A router of another namespace gets its own namespace's Secret, never istio-system's.
    let got = secure
        .sds_names(
            "other",
            "default",
            &[
                "kubernetes://own-cert",
                "kubernetes://istio-system/gw-cert",
                "kubernetes-gateway://apps/app-cert",
            ],
        )
        .await;
    assert_eq!(got, BTreeSet::from(["kubernetes://own-cert".to_string()]));

    let conns = plane.server.connections().snapshot();
    let router = conns.iter().find(|c| c.proxy.id.starts_with("istio-ingressgateway")).unwrap();
    assert!(router.types.values().all(|t| t.rejects == 0), "{:#?}", router.types);
    let (_, stats) = envoy.admin_get("/stats?filter=update_rejected").await.unwrap();
    assert!(stats.lines().all(|l| l.ends_with(": 0")), "{stats}");
    drop(trigger);
}
