//! End-to-end helpers: a whole control plane in-process (file source → aggregate → ServiceEntry
//! registry → DiscoveryServer → AdsServer on loopback) and an HTTP client that sets `Host`.

#![allow(dead_code)]

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use meshpilot_discovery as discovery;
use sds::{FileSecretOptions, FileSecrets};

use config::{Aggregate, FileSource, FileSourceOptions, QueueOptions};
use discovery::{DebounceOptions, DiscoveryServer, NetworkingSource, mesh::parse_mesh_config};
use model::push::{PushRequest, TriggerReason};
use model::{ConfigStoreController, ShutdownTrigger, service::ServiceController, shutdown_channel};
use registry::{AggregateRegistry, ServiceEntryOptions, ServiceEntryRegistry};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use xds::{
    AdsConfig,
    testing::{AdsApi, Bootstrap, EchoServer, Envoy, RunningAds, free_port, wait_for},
};

/// Istio's test data beside the repository (`../shared/istio-testdata`).
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/istio-testdata")
}

/// A running control plane.
pub struct Plane {
    pub server: Arc<DiscoveryServer>,
    pub ads: RunningAds<NetworkingSource>,
    pub files: Arc<FileSource>,
    pub secrets: Arc<FileSecrets>,
    _trigger: ShutdownTrigger,
}

impl Plane {
    pub async fn start(dir: &Path) -> Plane {
        Self::start_with(dir, FileSecretOptions::default()).await
    }

    /// A plane whose file secrets come from `secrets` (e.g. `--file-secret-root`), kept up to date.
    pub async fn start_with(dir: &Path, secrets: FileSecretOptions) -> Plane {
        let files = Arc::new(FileSource::new(dir, FileSourceOptions::default()).expect("config dir"));
        let store: Arc<dyn ConfigStoreController> = Arc::new(Aggregate::new(
            vec![files.clone() as Arc<dyn ConfigStoreController>],
            QueueOptions::default(),
        ));
        let se = Arc::new(ServiceEntryRegistry::new(store.clone(), ServiceEntryOptions::default()));
        let services = Arc::new(AggregateRegistry::new());
        services.add_registry(se);
        let services: Arc<dyn ServiceController> = services;
        let secrets = FileSecrets::new(secrets).expect("file secret roots");
        let (mesh, _) = parse_mesh_config("", "cluster.local").unwrap();
        let server = DiscoveryServer::new(store, services, mesh, DebounceOptions::default());
        let ads = server.ads_server(secrets.clone(), AdsConfig::default());
        let ads = RunningAds::start(ads, None).await.expect("ADS");
        let (trigger, shutdown) = shutdown_channel();
        tokio::spawn(server.clone().run(shutdown.clone()));
        tokio::spawn(secrets.clone().run(ads.registry.clone(), shutdown, PushRequest::secrets));
        xds::testing::wait_for("server ready", Duration::from_secs(5), async || {
            server.is_ready().then_some(())
        })
        .await
        .unwrap();
        Plane { server, ads, files, secrets, _trigger: trigger }
    }

    pub fn force_push(&self) {
        self.server.config_update(PushRequest::forced(TriggerReason::Debug));
    }
}

/// reviews v1/v2/v3 as echo servers, plus the ServiceEntry/WorkloadEntries pointing at them, with the
/// service on `port`.
pub struct Reviews {
    pub v1: EchoServer,
    pub v2: EchoServer,
    pub v3: EchoServer,
}

impl Reviews {
    pub async fn start() -> Reviews {
        Reviews {
            v1: EchoServer::start("reviews-v1").await.unwrap(),
            v2: EchoServer::start("reviews-v2").await.unwrap(),
            v3: EchoServer::start("reviews-v3").await.unwrap(),
        }
    }

    /// ServiceEntry `reviews.<ns>.svc.cluster.local:port` + one WorkloadEntry per version.
    pub fn registry_yaml(&self, namespace: &str, port: u16) -> String {
        let mut out = format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: reviews, namespace: {namespace}}}\n\
             spec:\n  hosts: [reviews.{namespace}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
             - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: reviews}}\n"
        );
        for (v, echo) in [("v1", &self.v1), ("v2", &self.v2), ("v3", &self.v3)] {
            out.push_str(&format!(
                "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: reviews-{v}, namespace: {namespace}}}\n\
                 spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  labels: {{app: reviews, version: {v}}}\n",
                echo.addr.port()
            ));
        }
        out
    }
}

/// Copies `files` (paths under the Istio test data) into `dir`, setting `namespace` on every object.
pub fn copy_samples(dir: &Path, files: &[&str], namespace: &str) {
    for f in files {
        let text = std::fs::read_to_string(testdata().join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        let text = text.replace("metadata:\n", &format!("metadata:\n  namespace: {namespace}\n"));
        let name = Path::new(f).file_name().unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }
}

/// `GET path` with a `Host` header and extra headers; (status, body). One connection per request.
pub async fn get(
    addr: SocketAddr,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<(u16, String)> {
    request(addr, host, path, headers).await.map(|r| (r.status, r.body))
}

/// A response as [`request`] read it.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// The status line and headers, lowercased.
    pub head: String,
    pub body: String,
}

impl Response {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim())
        })
    }
}

/// Like [`get`], also returning the response headers.
pub async fn request(
    addr: SocketAddr,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let fut = async {
        let mut s = TcpStream::connect(addr).await?;
        exchange(&mut s, host, path, headers).await
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("timeout")))
}

/// One `GET` over an open connection (plain or TLS), read as [`request`] does.
pub async fn exchange<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    s: &mut S,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await?;
    // Read until the body is complete (Content-Length) or EOF: Envoy delays closing after a
    // locally generated response (delayed_close_timeout, 1 s) until the client closes.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            if len.is_some_and(|len| buf.len() >= end + 4 + len) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Ok(Response { status, head: head.to_ascii_lowercase(), body: body.to_string() })
}

/// An HTTP/1.1 upstream on 127.0.0.1 that answers 200 with a body of its name, a newline and the
/// request's head (request line and headers, lowercased), keep-alive supported; the first
/// `fail_first` requests get 503 instead. Stops when dropped.
pub struct HeaderEcho {
    pub addr: SocketAddr,
    /// Requests received so far.
    pub hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl HeaderEcho {
    pub async fn start(name: &str, fail_first: usize) -> HeaderEcho {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let name = name.to_owned();
        let counter = hits.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve_header_echo(stream, name.clone(), counter.clone(), fail_first));
            }
        });
        HeaderEcho { addr, hits, task }
    }
}

impl Drop for HeaderEcho {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_header_echo(mut stream: TcpStream, name: String, hits: Arc<AtomicUsize>, fail_first: usize) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").map_or(buf.len(), |p| p + 4);
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        buf.drain(..end);
        let close = head.contains("connection: close");
        let n = hits.fetch_add(1, Ordering::SeqCst);
        let (status, body) = if n < fail_first {
            ("503 Service Unavailable", format!("{name} failing"))
        } else {
            ("200 OK", format!("{name}\n{head}"))
        };
        let resp = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n{}\r\n{body}",
            body.len(),
            if close { "connection: close\r\n" } else { "" }
        );
        if stream.write_all(resp.as_bytes()).await.is_err() || close {
            return;
        }
    }
}

/// A ServiceEntry `echo.<NS>.svc.cluster.local:port` with one WorkloadEntry at `upstream`, the
/// VirtualService `vs_spec` (the YAML under `spec:`, indented two spaces) for host `echo`, a plane
/// and a sidecar Envoy. Returns the listener address; the caller waits for the route's effect.
pub async fn setup_echo(
    upstream: SocketAddr,
    vs_spec: &str,
) -> (tempfile::TempDir, Plane, Envoy, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let registry = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  hosts: [echo.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: echo}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  labels: {{app: echo}}\n",
        upstream.port()
    );
    std::fs::write(dir.path().join("echo-registry.yaml"), registry).unwrap();
    let vs = format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: echo, namespace: {NS}}}\nspec:\n{vs_spec}"
    );
    std::fs::write(dir.path().join("echo-vs.yaml"), vs).unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&sidecar("client", &plane, AdsApi::Sotw)).await.unwrap();
    (dir, plane, envoy, ([127, 0, 0, 1], port).into())
}

/// The namespace of the bookinfo workloads.
pub const NS: &str = "default";

/// A sidecar bootstrap for workload `name` in [`NS`].
pub fn sidecar(name: &str, plane: &Plane, api: AdsApi) -> Bootstrap {
    let mut b = Bootstrap::sidecar(name, plane.ads.addr, api);
    b.node_id = format!("sidecar~127.0.0.1~{name}.{NS}~{NS}.svc.cluster.local");
    b.metadata["NAMESPACE"] = NS.into();
    b
}

/// An ingress gateway bootstrap (`istio: ingressgateway` in `istio-system`).
pub fn router(plane: &Plane, api: AdsApi) -> Bootstrap {
    let mut b = Bootstrap::sidecar("istio-ingressgateway", plane.ads.addr, api);
    b.node_id =
        "router~127.0.0.1~istio-ingressgateway-1.istio-system~istio-system.svc.cluster.local".to_owned();
    b.node_cluster = "istio-ingressgateway.istio-system".to_owned();
    b.metadata["NAMESPACE"] = "istio-system".into();
    b.metadata["LABELS"] = serde_json::json!({"istio": "ingressgateway", "app": "istio-ingressgateway"});
    b
}

/// The bookinfo reviews setup: reviews v1/v2/v3 echo servers, `vs` plus `destination-rule-all.yaml`,
/// a plane and a productpage sidecar Envoy whose reviews route works; returns the listener address.
pub async fn setup(api: AdsApi, vs: &str) -> (tempfile::TempDir, Reviews, Plane, Envoy, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let reviews = Reviews::start().await;
    let port = free_port();
    std::fs::write(dir.path().join("reviews-registry.yaml"), reviews.registry_yaml(NS, port)).unwrap();
    copy_samples(
        dir.path(),
        &[
            &format!("samples/bookinfo/networking/{vs}"),
            "samples/bookinfo/networking/destination-rule-all.yaml",
        ],
        NS,
    );
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&sidecar("productpage", &plane, api)).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let host = format!("reviews:{port}");
    wait_for("reviews route through Envoy", Duration::from_secs(10), async || {
        match get(addr, &host, "/", &[]).await {
            Ok((200, body)) if body.starts_with("reviews-v") => Some(()),
            _ => None,
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    (dir, reviews, plane, envoy, addr)
}

/// Decodes `%XX` escapes (grpc-message is percent-encoded on the wire).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
