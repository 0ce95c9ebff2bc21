//! A whole control plane over the Kubernetes test environment: KubeSource (Istio config) and the
//! Kubernetes registry → aggregate → DiscoveryServer → ADS on loopback; upstreams on the host's
//! address (the API server refuses loopback endpoints).

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use config::{Aggregate, QueueOptions};
use discovery::{DebounceOptions, DiscoveryServer, NetworkingSource, mesh::parse_mesh_config};
use meshpilot_kube::{KubeRegistry, KubeRegistryOptions, KubeSource, KubeSourceOptions, testenv::TestEnv};
use model::{
    ConfigStoreController, ShutdownTrigger, parse::ParseOptions, service::ServiceController, shutdown_channel,
};
use registry::{AggregateRegistry, ServiceEntryOptions, ServiceEntryRegistry};
use sds::FileSecrets;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use xds::{
    AdsConfig,
    testing::{AdsApi, Bootstrap, RunningAds},
};

/// A running control plane reading the test cluster.
pub struct KubePlane {
    pub server: Arc<DiscoveryServer>,
    pub ads: RunningAds<NetworkingSource>,
    pub source: KubeSource,
    pub registry: KubeRegistry,
    _trigger: ShutdownTrigger,
}

impl KubePlane {
    /// Starts a plane restricted to `namespace` and waits until it is ready.
    pub async fn start(env: &TestEnv, namespace: &str) -> KubePlane {
        let config = env.client_config().await.expect("kubeconfig");
        let backoff = (Duration::from_millis(100), Duration::from_secs(1));
        let source = KubeSource::new(
            config.clone(),
            KubeSourceOptions {
                parse: ParseOptions { default_namespace: namespace.into(), ..ParseOptions::default() },
                namespaces: vec![namespace.into()],
                backoff,
                ..KubeSourceOptions::default()
            },
        );
        let store: Arc<dyn ConfigStoreController> = Arc::new(Aggregate::new(
            vec![Arc::new(source.clone()) as Arc<dyn ConfigStoreController>],
            QueueOptions::default(),
        ));
        let se = Arc::new(ServiceEntryRegistry::new(store.clone(), ServiceEntryOptions::default()));
        let registry = KubeRegistry::new(
            config,
            KubeRegistryOptions {
                namespaces: vec![namespace.into()],
                backoff,
                ..KubeRegistryOptions::default()
            },
        );
        let services = Arc::new(AggregateRegistry::new());
        services.add_registry(Arc::new(registry.clone()));
        services.add_registry(se);
        let services: Arc<dyn ServiceController> = services;
        let (mesh, _) = parse_mesh_config("", "cluster.local").unwrap();
        let server = DiscoveryServer::new(store, services, mesh, DebounceOptions::default());
        let ads = server.ads_server(FileSecrets::disabled(), AdsConfig::default());
        let ads = RunningAds::start(ads, None).await.expect("ADS");
        let (trigger, shutdown) = shutdown_channel();
        tokio::spawn(registry.run(shutdown.clone()));
        tokio::spawn(server.clone().run(shutdown));
        xds::testing::wait_for("server ready", Duration::from_secs(60), async || {
            server.is_ready().then_some(())
        })
        .await
        .unwrap();
        KubePlane { server, ads, source, registry, _trigger: trigger }
    }

    /// A sidecar bootstrap (INTERCEPTION_MODE NONE, IP 127.0.0.1) for workload `name` in `namespace`.
    pub fn sidecar(&self, name: &str, namespace: &str) -> Bootstrap {
        let mut b = Bootstrap::sidecar(name, self.ads.addr, AdsApi::Sotw);
        b.node_id = format!("sidecar~127.0.0.1~{name}.{namespace}~{namespace}.svc.cluster.local");
        b.metadata["NAMESPACE"] = namespace.into();
        b
    }
}

/// An HTTP/1.1 server on `ip` that answers every request with 200 and its name. Stops when dropped.
pub struct HostEcho {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl HostEcho {
    pub async fn start(ip: IpAddr, name: &str) -> HostEcho {
        let listener = TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let name = name.to_string();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, name.clone()));
            }
        });
        HostEcho { addr, task }
    }
}

impl Drop for HostEcho {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut stream: TcpStream, body: String) {
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
        let close = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase().contains("connection: close");
        buf.drain(..end);
        let resp = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n{}\r\n{body}",
            body.len(),
            if close { "connection: close\r\n" } else { "" }
        );
        if stream.write_all(resp.as_bytes()).await.is_err() || close {
            return;
        }
    }
}

/// Istio's test data beside the repository (`../shared/istio-testdata`).
pub fn testdata() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/istio-testdata")
}

/// `GET /` to `addr` with `Host: host` and `headers`, one connection; `(status, body)`.
pub async fn get(addr: SocketAddr, host: &str, headers: &[(&str, &str)]) -> std::io::Result<(u16, String)> {
    let fut = async {
        let mut s = TcpStream::connect(addr).await?;
        let mut req = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).await?;
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
        Ok((status, body.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("timeout")))
}
