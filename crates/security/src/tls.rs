//! TLS for the secure xDS / CA port (Istio's 15012): the serving certificate is signed by the CA for
//! istiod's names (`istiod.<namespace>.svc` …) and re-issued when half of its lifetime has passed;
//! client certificates are optional (Go's `VerifyClientCertIfGiven`, as istiod) and, when sent, must
//! chain to the CA's roots. ALPN `h2` (gRPC). Handshakes run concurrently, each bounded by
//! [`HANDSHAKE_TIMEOUT`], so a slow client cannot hold up others.
//!
//! Each accepted connection carries a [`SecureConnectInfo`] that tonic puts into every request's
//! extensions; [`crate::authn`] reads the peer's chain from it.

use std::{
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, RwLock},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::mpsc,
};
use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        self, RootCertStore, ServerConfig,
        crypto::CryptoProvider,
        server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier},
        sign::CertifiedKey,
    },
};
use tokio_stream::wrappers::ReceiverStream;

use crate::ca::{CaError, IstioCa};

/// Longest time a TLS handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Lifetime of the serving certificate (re-issued after half of it).
pub const SERVING_CERT_TTL: Duration = Duration::from_secs(24 * 3600);

/// What a secure connection tells its requests (request extension).
#[derive(Clone, Debug, Default)]
pub struct SecureConnectInfo {
    /// The peer's address.
    pub remote_addr: Option<SocketAddr>,
    /// The client certificate chain (leaf first), verified against the CA's roots; `None` when the
    /// client sent none.
    pub peer_certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

/// An accepted TLS connection (AsyncRead + AsyncWrite for tonic's server).
pub struct TlsConnection {
    stream: tokio_rustls::server::TlsStream<TcpStream>,
    info: SecureConnectInfo,
    /// The connection's place under the port's limits ([`Admission`]), freed when it closes.
    _admitted: Option<Box<dyn std::any::Any + Send + Sync>>,
}

/// Decides at TCP accept, before any TLS work, whether a connection from the peer address is taken:
/// `Some(place)` is held with the connection and dropped when it closes, `None` closes it at once
/// (a port's connection caps, checked before a client can make the server spend a handshake).
pub type Admission =
    Arc<dyn Fn(std::net::SocketAddr) -> Option<Box<dyn std::any::Any + Send + Sync>> + Send + Sync>;

impl tonic::transport::server::Connected for TlsConnection {
    type ConnectInfo = SecureConnectInfo;

    fn connect_info(&self) -> SecureConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The serving certificate, re-issued by the CA once half its lifetime has passed.
#[derive(Debug)]
struct ServingCert {
    ca: Arc<IstioCa>,
    dns_names: Vec<String>,
    current: RwLock<(Arc<CertifiedKey>, Instant)>,
}

impl ServingCert {
    fn issue(ca: &IstioCa, dns_names: &[String]) -> Result<(Arc<CertifiedKey>, Instant), CaError> {
        let (chain, key) = ca.issue_serving(dns_names, SERVING_CERT_TTL)?;
        let key = provider()
            .key_provider
            .load_private_key(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)))
            .map_err(|e| CaError::Sign(e.to_string()))?;
        Ok((Arc::new(CertifiedKey::new(chain, key)), Instant::now() + SERVING_CERT_TTL / 2))
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let (cert, renew_at) = self.current.read().unwrap_or_else(|p| p.into_inner()).clone();
        if Instant::now() < renew_at {
            return Some(cert);
        }
        // One handshake renews; the others that raced here find the fresh one.
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if Instant::now() < current.1 {
            return Some(current.0.clone());
        }
        match Self::issue(&self.ca, &self.dns_names) {
            Ok(fresh) => {
                tracing::info!(names = ?self.dns_names, "renewed the secure port's serving certificate");
                *current = fresh;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot renew the serving certificate; using the current one, retrying in a minute");
                current.1 = Instant::now() + Duration::from_secs(60);
            }
        }
        Some(current.0.clone())
    }
}

/// The rustls configuration of the secure port: a CA-signed serving certificate for `dns_names`,
/// optional client certificates chaining to the CA's roots, ALPN `h2`.
///
/// # Errors
/// [`CaError`] when the serving certificate cannot be issued or the roots are unusable.
pub fn server_config(ca: Arc<IstioCa>, dns_names: Vec<String>) -> Result<Arc<ServerConfig>, CaError> {
    let mut roots = RootCertStore::empty();
    for root in ca.roots() {
        roots.add(root.clone()).map_err(|e| CaError::Sign(format!("root certificate unusable: {e}")))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| CaError::Sign(e.to_string()))?;
    let current = ServingCert::issue(&ca, &dns_names)?;
    let resolver = ServingCert { ca, dns_names, current: RwLock::new(current) };
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| CaError::Sign(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The rustls configuration of an HTTPS port without client certificates (the validating webhook on
/// Istio's 15017): a serving certificate for `names` (DNS names or IP addresses) signed by `ca`,
/// re-issued when half of [`SERVING_CERT_TTL`] has passed, ALPN `http/1.1`.
///
/// # Errors
/// [`CaError`] when the serving certificate cannot be issued.
pub fn https_server_config(ca: Arc<IstioCa>, names: Vec<String>) -> Result<Arc<ServerConfig>, CaError> {
    let current = ServingCert::issue(&ca, &names)?;
    let resolver = ServingCert { ca, dns_names: names, current: RwLock::new(current) };
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| CaError::Sign(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts TCP connections on `listener` (each first through `admission`, when given) and yields
/// those whose TLS handshake completes (within [`HANDSHAKE_TIMEOUT`]); failed handshakes are logged at debug level and counted in
/// `meshpilot_tls_handshake_failures`. Ends when the listener fails.
pub fn incoming(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    admission: Option<Admission>,
) -> ReceiverStream<io::Result<TlsConnection>> {
    let (tx, rx) = mpsc::channel(64);
    let acceptor = TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let (tcp, remote) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "secure port: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            if tx.is_closed() {
                return;
            }
            let admitted = match &admission {
                Some(admit) => match admit(remote) {
                    Some(place) => Some(place),
                    None => continue,
                },
                None => None,
            };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let _ = tcp.set_nodelay(true);
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let peer_certificates = stream
                            .get_ref()
                            .1
                            .peer_certificates()
                            .map(|c| Arc::new(c.iter().map(|d| d.clone().into_owned()).collect()));
                        let info = SecureConnectInfo { remote_addr: Some(remote), peer_certificates };
                        let _ = tx.send(Ok(TlsConnection { stream, info, _admitted: admitted })).await;
                    }
                    Ok(Err(err)) => {
                        metrics::counter!("meshpilot_tls_handshake_failures").increment(1);
                        tracing::debug!(peer = %remote, error = %err, "secure port: TLS handshake failed");
                    }
                    Err(_) => {
                        metrics::counter!("meshpilot_tls_handshake_failures").increment(1);
                        tracing::debug!(peer = %remote, "secure port: TLS handshake timed out");
                    }
                }
            });
        }
    });
    ReceiverStream::new(rx)
}
