//! The secure port (15012) end to end: `meshpilot discovery --secure-grpc-addr` against the real
//! kube-apiserver test environment (service-account tokens from the TokenRequest API, checked with
//! TokenReview), and real Istio sidecars (pilot-agent + upstream Envoy, built by
//! `scripts/istio-peer.sh build`) bootstrapping from it.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use envoy_types::pb::envoy::{
    config::core::v3::Node,
    service::discovery::v3::{
        DeltaDiscoveryRequest, aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
    },
};
use kube_source::testenv::TestEnv;
use meshpilot_testing::{
    echo::{EchoOptions, EchoServer},
    http,
    wait::{free_port, free_port_block, repo_root, wait_for},
};
use rustls_pki_types::{CertificateDer, pem::PemObject};
use security::{
    ca,
    client::{SecureTarget, channel},
    service::{IstioCertificateRequest, request_certificate},
};
use tonic::Code;

/// The name meshpilot's serving certificate is checked for (pilot-agent's default `ISTIOD_SAN`).
const ISTIOD_SAN: &str = "istiod.istio-system.svc";

/// A `meshpilot discovery` process with its secure port; killed on drop.
pub(super) struct Meshpilot {
    child: Child,
    pub(super) http: SocketAddr,
    /// The plaintext xDS port (15010).
    pub(super) grpc: SocketAddr,
    /// The secure xDS + CA port (15012).
    pub(super) secure: SocketAddr,
    pub(super) ca_dir: PathBuf,
    log: PathBuf,
    command: Command,
}

impl Meshpilot {
    pub(super) async fn start(config_dir: &Path, work: &Path, kubeconfig: Option<&Path>) -> Meshpilot {
        Meshpilot::start_with(config_dir, work, kubeconfig, &[]).await
    }

    /// As [`Meshpilot::start`], with `extra` arguments for `meshpilot discovery`.
    pub(super) async fn start_with(
        config_dir: &Path,
        work: &Path,
        kubeconfig: Option<&Path>,
        extra: &[&str],
    ) -> Meshpilot {
        let addr = |p: u16| -> SocketAddr { format!("127.0.0.1:{p}").parse().unwrap() };
        let (grpc, http, mon, secure) =
            (addr(free_port()), addr(free_port()), addr(free_port()), addr(free_port()));
        let ca_dir = work.join("ca");
        let log = work.join("meshpilot.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_meshpilot"));
        command
            .arg("discovery")
            .arg("--config-dir")
            .arg(config_dir)
            .args(kubeconfig.map(|k| ["--kubeconfig".as_ref(), k.as_os_str()]).into_iter().flatten())
            .args(["--grpc-addr", &grpc.to_string(), "--http-addr", &http.to_string()])
            .args(["--monitoring-addr", &mon.to_string(), "--secure-grpc-addr", &secure.to_string()])
            .arg("--ca-dir")
            .arg(&ca_dir)
            .arg("--root-ca-dir")
            .arg(work.join("no-plugged-ca"))
            .arg("--httpsAddr=")
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null());
        let child = command.stderr(std::fs::File::create(&log).unwrap()).spawn().unwrap();
        let mp = Meshpilot { child, http, grpc, secure, ca_dir, log, command };
        mp.wait_ready().await;
        mp
    }

    async fn wait_ready(&self) {
        wait_for("meshpilot /ready", Duration::from_secs(60), async || {
            matches!(http::get(self.http, "meshpilot", "/ready", &[]).await, Ok((200, _))).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.log_text()));
    }

    /// Kills the process and starts it again with the same ports and CA directory.
    async fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = std::fs::OpenOptions::new().append(true).open(&self.log).unwrap();
        self.child = self.command.stderr(log).spawn().unwrap();
        self.wait_ready().await;
    }

    pub(super) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn root_pem(&self) -> String {
        std::fs::read_to_string(self.ca_dir.join(ca::ROOT_CERT)).unwrap()
    }

    fn target(&self) -> SecureTarget {
        let roots = CertificateDer::pem_slice_iter(self.root_pem().as_bytes()).map(Result::unwrap).collect();
        SecureTarget { addr: self.secure, server_name: ISTIOD_SAN.into(), roots }
    }
}

impl Drop for Meshpilot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One real sidecar (pilot-agent + Envoy, `scripts/run-pilot-agent.sh`); stopped on drop.
pub(super) struct Sidecar {
    dir: PathBuf,
}

impl Sidecar {
    /// Starts a sidecar at `ip` in `work/name` against `mp`'s secure port and waits until it is
    /// ready; `env` adds variables (POD_NAME, ISTIO_METAJSON_LABELS, SECRET_TTL, OUTPUT_CERTS …).
    fn start(
        mp: &Meshpilot,
        work: &Path,
        name: &str,
        ip: &str,
        token_file: &Path,
        env: &[(&str, &str)],
    ) -> Sidecar {
        let dir = work.join(name);
        let base = sidecar_port_base();
        let out = Command::new(script())
            .envs(env.iter().copied())
            .arg("start")
            .arg(&dir)
            .arg(mp.secure.to_string())
            .arg(mp.ca_dir.join(ca::ROOT_CERT))
            .arg(token_file)
            .args([ip, &base.to_string()])
            .output()
            .unwrap();
        let sidecar = Sidecar { dir };
        if !out.status.success() {
            let agent_log = std::fs::read_to_string(sidecar.dir.join("agent.log")).unwrap_or_default();
            panic!(
                "sidecar {name} did not become ready: {}\n--- agent ---\n{agent_log}\n--- meshpilot ---\n{}",
                String::from_utf8_lossy(&out.stderr),
                mp.log_text()
            );
        }
        sidecar
    }
}

impl Sidecar {
    /// A files-only sidecar (no token to review): `meshpilot ca issue` provisions a certificate for
    /// `default/vm` (pilot-agent's `PROV_CERT`, Istio's VM onboarding) that authenticates its first
    /// certificate request; then as [`Sidecar::start`] with `env` added.
    pub(super) fn provisioned(
        mp: &Meshpilot,
        work: &Path,
        name: &str,
        ip: &str,
        env: &[(&str, &str)],
    ) -> Sidecar {
        let prov = work.join(format!("prov-{name}"));
        let issued = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
            .args(["ca", "issue", "--namespace", "default", "--service-account", "vm"])
            .arg("--ca-dir")
            .arg(&mp.ca_dir)
            .arg("--root-ca-dir")
            .arg(work.join("no-plugged-ca"))
            .arg("--out")
            .arg(&prov)
            .output()
            .unwrap();
        assert!(issued.status.success(), "{}", String::from_utf8_lossy(&issued.stderr));
        let chain = std::fs::read_to_string(prov.join("cert-chain.pem")).unwrap();
        let leaf = CertificateDer::from_pem_slice(chain.as_bytes()).unwrap();
        let ids: Vec<String> = ca::certificate_identities(&leaf).iter().map(ToString::to_string).collect();
        assert_eq!(ids, ["spiffe://cluster.local/ns/default/sa/vm"]);
        let no_token = work.join("no-token");
        std::fs::write(&no_token, "").unwrap();
        let prov_dir = prov.display().to_string();
        let mut all = vec![("PROV_CERT", prov_dir.as_str()), ("SERVICE_ACCOUNT", "vm")];
        all.extend_from_slice(env);
        Sidecar::start(mp, work, name, ip, &no_token, &all)
    }
}

impl Sidecar {
    /// Its Envoy's admin port on 127.0.0.1 (`ADMIN_PORT` in the script's `DIR/env`).
    pub(super) fn admin_port(&self) -> u16 {
        let env = std::fs::read_to_string(self.dir.join("env")).unwrap();
        env.lines().find_map(|l| l.strip_prefix("ADMIN_PORT=")).unwrap().trim().parse().unwrap()
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).output();
    }
}

/// A port base whose sidecar ports (`run-pilot-agent.sh`: BASE, BASE+20, BASE+21, BASE+90) are all
/// free now: one free port alone may leave the others taken by another process.
fn sidecar_port_base() -> u16 {
    // pilot-agent's sidecar binds BASE (Envoy admin), BASE+20/+21 (agent) and BASE+90 (health).
    free_port_block(91)
}

fn script() -> PathBuf {
    repo_root().join("scripts/run-pilot-agent.sh")
}

fn token(env: &TestEnv, namespace: &str, sa: &str, audience: &str) -> String {
    env.kubectl(&["create", "token", sa, "-n", namespace, "--audience", audience, "--duration", "1h"])
        .unwrap()
        .trim()
        .to_string()
}

pub(super) fn ensure_service_account(env: &TestEnv, namespace: &str, sa: &str) {
    let _ = env.kubectl(&["create", "namespace", namespace]);
    let _ = env.kubectl(&["create", "serviceaccount", sa, "-n", namespace]);
}

fn csr() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    rcgen::CertificateParams::default().serialize_request(&key).unwrap().pem().unwrap()
}

fn node(namespace: &str) -> Node {
    Node {
        id: format!("sidecar~127.0.0.5~app-1.{namespace}~{namespace}.svc.cluster.local"),
        ..Default::default()
    }
}

/// Opens a Delta ADS stream asking for clusters; the first response or the refusal.
async fn delta_clusters(
    target: &SecureTarget,
    token: Option<&str>,
    node: Node,
) -> Result<usize, tonic::Status> {
    let ch = channel(target, None).await.map_err(tonic::Status::unavailable)?;
    let mut client = AggregatedDiscoveryServiceClient::new(ch);
    let first = DeltaDiscoveryRequest {
        node: Some(node),
        type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
        ..Default::default()
    };
    let mut request =
        tonic::Request::new(futures::stream::iter(vec![first]).chain(futures::stream::pending()));
    if let Some(t) = token {
        request.metadata_mut().insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let mut stream = client.delta_aggregated_resources(request).await?.into_inner();
    let response = stream.message().await?.ok_or_else(|| tonic::Status::cancelled("no response"))?;
    Ok(response.resources.len())
}

use futures::StreamExt as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ca_and_secure_xds_authenticate_with_kubernetes_tokens() {
    let env = TestEnv::shared_by(file!());
    ensure_service_account(env, "ca-test", "app");
    ensure_service_account(env, "ca-other", "app");
    let work = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let mp = Meshpilot::start(config.path(), work.path(), Some(&env.kubeconfig())).await;
    let target = mp.target();
    let anonymous = channel(&target, None).await.unwrap();
    let request = || IstioCertificateRequest { csr: csr(), validity_duration: 3600, metadata: Vec::new() };

    // A token for ca-test/app: a certificate for that identity only.
    let good = token(env, "ca-test", "app", "istio-ca");
    let response = request_certificate(anonymous.clone(), request(), Some(&good)).await.unwrap();
    let leaf = CertificateDer::from_pem_slice(response.cert_chain[0].as_bytes()).unwrap();
    let ids: Vec<String> = ca::certificate_identities(&leaf).iter().map(ToString::to_string).collect();
    assert_eq!(ids, ["spiffe://cluster.local/ns/ca-test/sa/app"]);
    assert_eq!(response.cert_chain.last().unwrap(), &mp.root_pem());

    // Wrong audience, forged: refused as istiod refuses, whatever the reason.
    let wrong_audience = token(env, "ca-test", "app", "other");
    // A signature cut short (changing only the last character may leave its bytes unchanged).
    let forged = good[..good.len() - 8].to_string();
    for bad in [wrong_audience.as_str(), forged.as_str()] {
        let err = request_certificate(anonymous.clone(), request(), Some(bad)).await.unwrap_err();
        assert_eq!((err.code(), err.message()), (Code::Unauthenticated, "request authenticate failure"));
    }

    // xDS on the secure port: the token's namespace must be the node's.
    let resources = delta_clusters(&target, Some(&good), node("ca-test")).await.unwrap();
    assert!(resources > 0, "clusters for an authenticated proxy");
    let err = delta_clusters(&target, Some(&good), node("ca-other")).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    let err = delta_clusters(&target, None, node("ca-test")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    let log = mp.log_text();
    assert!(log.contains("token not authenticated"), "the precise reason is logged:\n{log}");

    // Publishing the root to every namespace (istio-ca-root-cert) is the elected namespace
    // controller's job: other tests' control planes on this API server compete for it, so it is tested
    // where one control plane is alone (istiod_beside.rs).

    // A plaintext (h2c) client gets no gRPC answer from the TLS port.
    let plaintext = AggregatedDiscoveryServiceClient::connect(format!("http://{}", mp.secure)).await;
    if let Ok(mut client) = plaintext {
        let first = DeltaDiscoveryRequest { node: Some(node("ca-test")), ..Default::default() };
        assert!(client.delta_aggregated_resources(futures::stream::iter(vec![first])).await.is_err());
    }
}

/// Real Istio sidecars: pilot-agent gets its certificate from meshpilot's CA and starts upstream
/// Envoy, which becomes ready on meshpilot's config over the secure port. (Its addresses and ports
/// differ from the mTLS test's, which runs at the same time: Envoys share outbound ports through
/// SO_REUSEPORT.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pilot_agent_sidecars_bootstrap_from_meshpilot() {
    let env = TestEnv::shared_by(file!());
    ensure_service_account(env, "default", "default");
    let work = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    std::fs::write(
        config.path().join("se.yaml"),
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: echo, namespace: default}\n\
spec:\n  hosts: [bootstrap.mesh.local]\n  ports: [{number: 9091, name: http, protocol: HTTP}]\n  resolution: STATIC\n  \
endpoints: [{address: 127.0.0.22}]\n",
    )
    .unwrap();
    let mp = Meshpilot::start(config.path(), work.path(), Some(&env.kubeconfig())).await;
    let token_file = work.path().join("token");
    std::fs::write(&token_file, token(env, "default", "default", "istio-ca")).unwrap();
    let certs_dir = work.path().join("agent-certs");
    std::fs::create_dir_all(&certs_dir).unwrap();
    let certs = certs_dir.display().to_string();
    let sidecar =
        Sidecar::start(&mp, work.path(), "sidecar-1", "127.0.0.21", &token_file, &[("OUTPUT_CERTS", &certs)]);
    let (_, syncz) = http::get(mp.http, "meshpilot", "/debug/syncz", &[]).await.unwrap();
    // The agent's workload certificate (it writes it to OUTPUT_CERTS): its own identity, signed
    // by meshpilot's root.
    let chain = wait_for("the agent's certificate", Duration::from_secs(30), async || {
        std::fs::read_to_string(certs_dir.join("cert-chain.pem")).ok().filter(|c| !c.is_empty())
    })
    .await;
    drop(sidecar);
    let chain =
        chain.unwrap_or_else(|e| panic!("{e}: {:?}", std::fs::read_dir(&certs_dir).map(|d| d.count())));
    let leaf = CertificateDer::from_pem_slice(chain.as_bytes()).unwrap();
    let ids: Vec<String> = ca::certificate_identities(&leaf).iter().map(ToString::to_string).collect();
    assert_eq!(ids, ["spiffe://cluster.local/ns/default/sa/default"]);
    let (_, leaf) = x509_parser::parse_x509_certificate(&leaf).unwrap();
    let root_der = CertificateDer::from_pem_slice(mp.root_pem().as_bytes()).unwrap();
    let (_, root_cert) = x509_parser::parse_x509_certificate(&root_der).unwrap();
    leaf.verify_signature(Some(root_cert.public_key())).expect("signed by meshpilot's root");
    let synced: serde_json::Value = serde_json::from_str(&syncz).unwrap();
    let proxy = synced.as_array().unwrap().iter().find(|p| p["proxy"] == "sidecar-127.0.0.21.default");
    let proxy = proxy.unwrap_or_else(|| panic!("the sidecar is connected to meshpilot: {syncz}"));
    assert_eq!(
        proxy["listener_sent"], proxy["listener_acked"],
        "Envoy accepted meshpilot's listeners: {proxy}"
    );
}

/// What the two-sidecar tests start from: the `default/default` service account, an echo server that
/// answers with the request head, and a work and a config directory.
async fn echo_world(env: &TestEnv) -> (EchoServer, tempfile::TempDir, tempfile::TempDir) {
    ensure_service_account(env, "default", "default");
    let echo = EchoServer::start_with("echo", EchoOptions { echo_head: true, ..EchoOptions::default() })
        .await
        .unwrap();
    (echo, tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

/// Sends `GET /` with `Host: echo.mesh.local` to `addr`; the echo server's answer, or why not.
async fn echo_via(addr: SocketAddr) -> Result<String, String> {
    match http::get(addr, "echo.mesh.local", "/", &[]).await {
        Ok((200, body)) => Ok(body),
        Ok((status, body)) => Err(format!("{status}: {body}")),
        Err(e) => Err(e.to_string()),
    }
}

/// The `Hash=` of the client certificate in the `x-forwarded-client-cert` the server saw.
fn xfcc_hash(head: &str) -> Option<String> {
    let xfcc = head.lines().find_map(|l| l.strip_prefix("x-forwarded-client-cert: "))?;
    xfcc.split(';').find_map(|p| p.strip_prefix("hash=")).map(String::from)
}

const PEER_AUTHENTICATION: &str = "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\n\
metadata: {name: default, namespace: default}\nspec:\n  mtls: {mode: MODE}\n";

/// An ALLOW AuthorizationPolicy for the echo workload admitting requests whose source matches
/// `SOURCE` (one field of `source`, in flow style).
const AUTHORIZATION_POLICY: &str = "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n\
metadata: {name: echo, namespace: default}\nspec:\n  selector: {matchLabels: {app: echo}}\n  \
rules:\n  - from:\n    - source: {SOURCE}\n";

/// Two real sidecars on loopback (pilot-agent + Envoy): a client (127.0.0.111) and a server
/// (127.0.0.112, Sidecar ingress on the service port to a local echo server). The service port is a
/// free port: Envoys bind outbound listeners with SO_REUSEPORT, so another Envoy on the machine with
/// the same outbound port would silently take half of the connections. Traffic between them is mutual TLS
/// with meshpilot's certificates; the namespace PeerAuthentication is switched live between
/// PERMISSIVE, STRICT and DISABLE, and the client's short-lived certificate is rotated under traffic;
/// AuthorizationPolicies on the client's principal and namespace are enforced on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_between_real_sidecars_follows_peer_authentication() {
    let env = TestEnv::shared_by(file!());
    let (echo, work, config) = echo_world(env).await;
    let port = free_port();
    let mesh = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: default}}\n\
spec:\n  hosts: [echo.mesh.local]\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  \
workloadSelector: {{labels: {{app: echo}}}}\n---\n\
apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: echo-1, namespace: default}}\n\
spec:\n  address: 127.0.0.112\n  serviceAccount: default\n  labels: {{app: echo, security.istio.io/tlsMode: istio}}\n---\n\
apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: echo, namespace: default}}\n\
spec:\n  workloadSelector: {{labels: {{app: echo}}}}\n  ingress:\n  - port: {{number: {port}, protocol: HTTP, name: http}}\n    \
bind: 127.0.0.112\n    defaultEndpoint: 127.0.0.1:{echo_port}\n  egress:\n  - hosts: [istio-system/*]\n---\n\
apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: echo, namespace: default}}\n\
spec:\n  host: echo.mesh.local\n  trafficPolicy: {{connectionPool: {{http: {{maxRequestsPerConnection: 1}}}}}}\n",
        echo_port = echo.addr.port()
    );
    std::fs::write(config.path().join("mesh.yaml"), mesh).unwrap();
    let mut mp = Meshpilot::start(config.path(), work.path(), Some(&env.kubeconfig())).await;
    let token_file = work.path().join("token");
    std::fs::write(&token_file, token(env, "default", "default", "istio-ca")).unwrap();
    let labels = r#"{"app":"echo"}"#;
    let _server = Sidecar::start(
        &mp,
        work.path(),
        "server",
        "127.0.0.112",
        &token_file,
        &[("POD_NAME", "echo-1"), ("ISTIO_METAJSON_LABELS", labels)],
    );
    // The client's certificate lives 20 s: the agent renews it at half-life, under traffic.
    let _client =
        Sidecar::start(&mp, work.path(), "client", "127.0.0.111", &token_file, &[("SECRET_TTL", "20s")]);
    let client_outbound: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let server_inbound: SocketAddr = format!("127.0.0.112:{port}").parse().unwrap();
    let set_mode = |mode: &str| {
        std::fs::write(config.path().join("pa.yaml"), PEER_AUTHENTICATION.replace("MODE", mode)).unwrap();
    };

    // PERMISSIVE (no policy): sidecar to sidecar is mutual TLS, the server's app sees the client's
    // identity; a plaintext client is accepted too.
    let head = wait_for("a request through both sidecars", Duration::from_secs(30), async || {
        echo_via(client_outbound).await.ok()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mp.log_text()));
    assert!(head.contains("uri=spiffe://cluster.local/ns/default/sa/default"), "{head}");
    let first_hash = xfcc_hash(&head).unwrap_or_else(|| panic!("no client certificate hash: {head}"));
    let plain = echo_via(server_inbound).await.unwrap();
    assert!(
        !plain.contains("x-forwarded-client-cert"),
        "a plaintext request has no client certificate: {plain}"
    );

    // Identity-based authorization on the server's mutual TLS chain: `principals` and `namespaces`
    // come from the client certificate, so a plaintext request carries neither.
    let set_authz = |source: &str| {
        let policy = AUTHORIZATION_POLICY.replace("SOURCE", source);
        std::fs::write(config.path().join("authz.yaml"), policy).unwrap();
    };
    set_authz("principals: [cluster.local/ns/default/sa/someone-else]");
    let denied = wait_for("another principal refused", Duration::from_secs(30), async || {
        echo_via(client_outbound).await.err().filter(|e| e.starts_with("403"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mp.log_text()));
    assert!(denied.contains("RBAC: access denied"), "{denied}");
    set_authz("principals: [cluster.local/ns/default/sa/default]");
    wait_for("the client's principal allowed", Duration::from_secs(30), async || {
        echo_via(client_outbound).await.ok()
    })
    .await
    .unwrap();
    let plain = echo_via(server_inbound).await.unwrap_err();
    assert!(plain.starts_with("403"), "plaintext has no principal: {plain}");
    set_authz("namespaces: [other-namespace]");
    wait_for("another namespace refused", Duration::from_secs(30), async || {
        echo_via(client_outbound).await.err().filter(|e| e.starts_with("403"))
    })
    .await
    .unwrap();
    set_authz("namespaces: [default]");
    wait_for("the client's namespace allowed", Duration::from_secs(30), async || {
        echo_via(client_outbound).await.ok()
    })
    .await
    .unwrap();
    std::fs::remove_file(config.path().join("authz.yaml")).unwrap();
    wait_for("plaintext allowed without a policy", Duration::from_secs(30), async || {
        echo_via(server_inbound).await.ok()
    })
    .await
    .unwrap();

    // The client's certificate is renewed: the server sees another one (each request opens its own
    // upstream connection: the DestinationRule's maxRequestsPerConnection 1), and traffic keeps flowing.
    let renewed = wait_for("a renewed client certificate", Duration::from_secs(60), async || {
        let head = echo_via(client_outbound).await.expect("traffic flows during rotation");
        xfcc_hash(&head).filter(|h| *h != first_hash)
    })
    .await
    .unwrap();

    // A restart of meshpilot keeps its root: traffic flows while it is down (Envoy keeps its
    // config), and the sidecars renew from the restarted CA.
    let root_before = mp.root_pem();
    mp.restart().await;
    assert_eq!(mp.root_pem(), root_before, "the root survives a restart");
    let after_restart =
        wait_for("a certificate renewed after the restart", Duration::from_secs(60), async || {
            let head = echo_via(client_outbound).await.expect("traffic flows across the restart");
            xfcc_hash(&head).filter(|h| *h != renewed)
        })
        .await;
    assert!(after_restart.is_ok(), "{after_restart:?}\n{}", mp.log_text());

    // STRICT, applied live: plaintext is refused, the sidecar path still works.
    set_mode("STRICT");
    wait_for("plaintext refused under STRICT", Duration::from_secs(30), async || {
        echo_via(server_inbound).await.is_err().then_some(())
    })
    .await
    .unwrap();
    let head = echo_via(client_outbound).await.unwrap();
    assert!(head.contains("uri=spiffe://cluster.local/ns/default/sa/default"), "{head}");

    // PERMISSIVE again: plaintext accepted.
    set_mode("PERMISSIVE");
    wait_for("plaintext accepted under PERMISSIVE", Duration::from_secs(30), async || {
        echo_via(server_inbound).await.ok()
    })
    .await
    .unwrap();

    // DISABLE: no mutual TLS at all — the client sends plaintext (auto mTLS reads the policy), so the
    // server's app sees no client certificate.
    set_mode("DISABLE");
    let head =
        wait_for("plaintext between the sidecars under DISABLE", Duration::from_secs(30), async || {
            echo_via(client_outbound).await.ok().filter(|h| !h.contains("x-forwarded-client-cert"))
        })
        .await
        .unwrap();
    assert!(head.starts_with("echo"), "{head}");
}

/// Two networks on loopback, each address standing for one: a client sidecar on network `net-a`
/// (127.0.0.121), and on `net-b` an east-west gateway (pilot-agent as a router, 127.0.0.122, a Gateway
/// with an `AUTO_PASSTHROUGH` server) and the server sidecar (127.0.0.123, WorkloadEntry with
/// `network: net-b`). The mesh networks (from `--networksConfig`) name the gateway's address. The
/// client's EDS for the service holds the gateway, not the server, and a request reaches the server's
/// app through the gateway with the client's identity (mTLS from sidecar to sidecar, passed through).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_network_traffic_goes_through_the_east_west_gateway() {
    let env = TestEnv::shared_by(file!());
    let (echo, work, config) = echo_world(env).await;
    let (port, gateway_port) = (free_port(), free_port());
    let mesh = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: default}}\n\
spec:\n  hosts: [echo.mesh.local]\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  \
workloadSelector: {{labels: {{app: echo}}}}\n---\n\
apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: echo-1, namespace: default}}\n\
spec:\n  address: 127.0.0.123\n  network: net-b\n  serviceAccount: default\n  labels: {{app: echo, security.istio.io/tlsMode: istio}}\n---\n\
apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: echo, namespace: default}}\n\
spec:\n  workloadSelector: {{labels: {{app: echo}}}}\n  ingress:\n  - port: {{number: {port}, protocol: HTTP, name: http}}\n    \
bind: 127.0.0.123\n    defaultEndpoint: 127.0.0.1:{echo_port}\n  egress:\n  - hosts: [istio-system/*]\n---\n\
apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: cross-network, namespace: default}}\n\
spec:\n  selector: {{istio: eastwestgateway}}\n  servers:\n  - port: {{number: {gateway_port}, name: tls, protocol: TLS}}\n    \
tls: {{mode: AUTO_PASSTHROUGH}}\n    hosts: ['*.local']\n    bind: 127.0.0.122\n",
        echo_port = echo.addr.port()
    );
    std::fs::write(config.path().join("mesh.yaml"), mesh).unwrap();
    let networks = work.path().join("meshNetworks");
    std::fs::write(
        &networks,
        format!(
            "networks:\n  net-a:\n    endpoints: [{{fromCidr: 127.0.0.121/32}}]\n  net-b:\n    \
             endpoints: [{{fromCidr: 127.0.0.123/32}}]\n    gateways: [{{address: 127.0.0.122, port: {gateway_port}}}]\n"
        ),
    )
    .unwrap();
    let networks_arg = format!("--networksConfig={}", networks.display());
    let mp =
        Meshpilot::start_with(config.path(), work.path(), Some(&env.kubeconfig()), &[&networks_arg]).await;
    let token_file = work.path().join("token");
    std::fs::write(&token_file, token(env, "default", "default", "istio-ca")).unwrap();
    let _server = Sidecar::start(
        &mp,
        work.path(),
        "server",
        "127.0.0.123",
        &token_file,
        &[
            ("POD_NAME", "echo-1"),
            ("ISTIO_METAJSON_LABELS", r#"{"app":"echo"}"#),
            ("ISTIO_META_NETWORK", "net-b"),
        ],
    );
    let _gateway = Sidecar::start(
        &mp,
        work.path(),
        "eastwest",
        "127.0.0.122",
        &token_file,
        &[
            ("PROXY_TYPE", "router"),
            ("POD_NAME", "eastwest-1"),
            ("ISTIO_METAJSON_LABELS", r#"{"istio":"eastwestgateway"}"#),
            ("ISTIO_META_NETWORK", "net-b"),
        ],
    );
    let client = Sidecar::start(
        &mp,
        work.path(),
        "client",
        "127.0.0.121",
        &token_file,
        &[("ISTIO_META_NETWORK", "net-a")],
    );

    // The gateway is known: /debug/networkz lists it as istiod does.
    let (status, networkz) = http::get(mp.http, "meshpilot", "/debug/networkz", &[]).await.unwrap();
    assert_eq!(status, 200, "{networkz}");
    let listed: serde_json::Value = serde_json::from_str(&networkz).unwrap();
    assert_eq!(listed[0]["Addr"], "127.0.0.122", "{networkz}");
    assert_eq!(listed[0]["Port"], gateway_port, "{networkz}");
    assert_eq!(listed[0]["Network"], "net-b", "{networkz}");

    // The request goes through: the server's app sees the client's identity (the server sidecar
    // terminated the client's mTLS connection, which the gateway passed through on its SNI).
    let client_outbound: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let head = wait_for("a request across the networks", Duration::from_secs(30), async || {
        echo_via(client_outbound).await.ok()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mp.log_text()));
    assert!(head.contains("uri=spiffe://cluster.local/ns/default/sa/default"), "{head}");

    // The client's endpoints for the service are the gateway's address, never the server's.
    let admin: SocketAddr = format!("127.0.0.1:{}", client.admin_port()).parse().unwrap();
    let (status, clusters) = http::get(admin, "localhost", "/clusters", &[]).await.unwrap();
    assert_eq!(status, 200);
    let cluster = format!("outbound|{port}||echo.mesh.local::");
    // Host lines read `CLUSTER::HOST:PORT::STAT::VALUE`.
    let hosts: std::collections::BTreeSet<&str> = clusters
        .lines()
        .filter_map(|l| l.strip_prefix(cluster.as_str()))
        .filter_map(|l| l.split("::").next())
        .filter(|h| h.contains(':'))
        .collect();
    let gateway = format!("127.0.0.122:{gateway_port}");
    assert_eq!(hosts, [gateway.as_str()].into(), "{clusters}");
}

/// Without Kubernetes (files only): no token to review, so the sidecar's first certificate request
/// is authenticated by a provisioned certificate (`meshpilot ca issue` → pilot-agent's `PROV_CERT`,
/// Istio's VM onboarding); the agent then gets its workload certificate and xDS from meshpilot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_only_sidecars_bootstrap_with_a_provisioned_certificate() {
    let work = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let mp = Meshpilot::start(config.path(), work.path(), None).await;
    let certs_dir = work.path().join("agent-certs");
    std::fs::create_dir_all(&certs_dir).unwrap();
    let certs = certs_dir.display().to_string();
    let sidecar =
        Sidecar::provisioned(&mp, work.path(), "vm", "127.0.0.31", &[("OUTPUT_CERTS", certs.as_str())]);
    let workload = wait_for("the agent's workload certificate", Duration::from_secs(30), async || {
        std::fs::read_to_string(certs_dir.join("cert-chain.pem")).ok().filter(|c| !c.is_empty())
    })
    .await;
    let (_, syncz) = http::get(mp.http, "meshpilot", "/debug/syncz", &[]).await.unwrap();
    drop(sidecar);
    let workload = CertificateDer::from_pem_slice(workload.unwrap().as_bytes()).unwrap();
    let ids: Vec<String> = ca::certificate_identities(&workload).iter().map(ToString::to_string).collect();
    assert_eq!(ids, ["spiffe://cluster.local/ns/default/sa/vm"]);
    assert!(syncz.contains("\"sidecar-127.0.0.31.default\""), "connected over the secure port: {syncz}");
}
