//! Loopback HTTP/1.1 upstreams that answer with their name.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

use crate::{HarnessError, error::io};

/// How an [`EchoServer`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EchoOptions {
    /// The address to listen on (127.0.0.1; a non-loopback host address where a Kubernetes API
    /// server must accept it as an endpoint).
    pub ip: IpAddr,
    /// Answer `<name>\n<request head>` (request line and headers, lowercased) instead of `<name>`,
    /// so a test sees what the proxy sent upstream.
    pub echo_head: bool,
    /// Answer the first this many requests with `503` and body `<name> failing`.
    pub fail_first: usize,
}

impl Default for EchoOptions {
    fn default() -> Self {
        EchoOptions { ip: Ipv4Addr::LOCALHOST.into(), echo_head: false, fail_first: 0 }
    }
}

/// An HTTP/1.1 server that answers every request with 200 and its own name as the body
/// (keep-alive supported, request bodies ignored; see [`EchoOptions`] for variants). Stops when
/// dropped.
pub struct EchoServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The name it answers with.
    pub name: String,
    hits: Arc<AtomicUsize>,
    failing: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for EchoServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EchoServer").field("name", &self.name).field("addr", &self.addr).finish()
    }
}

impl EchoServer {
    /// Starts a server answering `name` on a free port of 127.0.0.1.
    ///
    /// # Errors
    /// [`HarnessError::Io`] if no port can be bound.
    pub async fn start(name: &str) -> Result<EchoServer, HarnessError> {
        Self::start_with(name, EchoOptions::default()).await
    }

    /// Starts a server answering `name` as `options` say, on a free port of `options.ip`.
    ///
    /// # Errors
    /// [`HarnessError::Io`] if no port can be bound.
    pub async fn start_with(name: &str, options: EchoOptions) -> Result<EchoServer, HarnessError> {
        let listener = TcpListener::bind((options.ip, 0)).await.map_err(io("bind echo server"))?;
        let addr = listener.local_addr().map_err(io("echo server address"))?;
        let hits = Arc::new(AtomicUsize::new(0));
        let failing = Arc::new(AtomicBool::new(false));
        let serve = Serve { name: name.to_owned(), options, hits: hits.clone(), failing: failing.clone() };
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve.clone().connection(stream));
            }
        });
        Ok(EchoServer { addr, name: name.to_owned(), hits, failing, task })
    }

    /// How many requests it received so far (answered or failed).
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// From now on answer every request with `503` and body `<name> failing` (`true`), or normally
    /// again (`false`): an upstream that goes bad and recovers.
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Serve {
    name: String,
    options: EchoOptions,
    hits: Arc<AtomicUsize>,
    failing: Arc<AtomicBool>,
}

impl Serve {
    async fn connection(self, mut stream: TcpStream) {
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
            let n = self.hits.fetch_add(1, Ordering::SeqCst);
            let name = &self.name;
            let (status, body) = if n < self.options.fail_first || self.failing.load(Ordering::SeqCst) {
                ("503 Service Unavailable", format!("{name} failing"))
            } else if self.options.echo_head {
                ("200 OK", format!("{name}\n{head}"))
            } else {
                ("200 OK", name.clone())
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
}
