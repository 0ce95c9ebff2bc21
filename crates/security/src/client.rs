//! A gRPC channel to a secure port (15012) over TLS, optionally presenting a client certificate:
//! what a sidecar agent does, for meshpilot's tools (`xds-load`) and tests. Server certificates are
//! verified against the given roots and `server_name` (istiod's `istiod.istio-system.svc` by
//! default, as pilot-agent's `ISTIOD_SAN`).

use std::{
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use hyper_util::rt::TokioIo;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::{
    TlsConnector,
    client::TlsStream,
    rustls::{ClientConfig, RootCertStore},
};
use tonic::transport::{Channel, Endpoint};

/// How to reach a secure port.
#[derive(Clone, Debug)]
pub struct SecureTarget {
    /// Address to dial.
    pub addr: SocketAddr,
    /// Name the server certificate must carry.
    pub server_name: String,
    /// Trust anchors for the server certificate.
    pub roots: Vec<CertificateDer<'static>>,
}

/// Connects a channel to `target`, presenting `identity` (chain, key) when given.
///
/// # Errors
/// A message when the roots, the identity or the connection are unusable.
pub async fn channel(
    target: &SecureTarget,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<Channel, String> {
    let connector = Connector::new(target, identity)?;
    Endpoint::from_shared(format!("http://{}", target.addr))
        .map_err(|e| e.to_string())?
        .connect_with_connector(connector)
        .await
        .map_err(|e| format!("cannot connect to {}: {e:?}", target.addr))
}

/// The TLS dialer of [`channel`], for callers that build their own [`Endpoint`] (window sizes,
/// timeouts, lazy connections: `Endpoint::connect_with_connector_lazy`). Cloning is cheap (the TLS
/// configuration is shared); each connection makes its own TLS session.
#[derive(Clone)]
pub struct Connector {
    tls: TlsConnector,
    addr: SocketAddr,
    name: ServerName<'static>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector").field("addr", &self.addr).field("name", &self.name).finish()
    }
}

impl Connector {
    /// A dialer of `target` (TLS 1.2/1.3, ALPN `h2`), presenting `identity` (chain, key) when given.
    ///
    /// # Errors
    /// A message when the roots, the identity or the server name are unusable.
    pub fn new(
        target: &SecureTarget,
        identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    ) -> Result<Connector, String> {
        let mut roots = RootCertStore::empty();
        for root in &target.roots {
            roots.add(root.clone()).map_err(|e| format!("unusable root certificate: {e}"))?;
        }
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let mut config = match identity {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("unusable client certificate: {e}"))?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        let name = ServerName::try_from(target.server_name.clone())
            .map_err(|e| format!("invalid server name: {e}"))?;
        Ok(Connector { tls: TlsConnector::from(Arc::new(config)), addr: target.addr, name })
    }
}

impl tower_service::Service<http::Uri> for Connector {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, std::io::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let tcp = TcpStream::connect(this.addr).await?;
            let _ = tcp.set_nodelay(true);
            Ok(TokioIo::new(this.tls.connect(this.name, tcp).await?))
        })
    }
}

/// A server certificate verifier that accepts any certificate for any name, still checking the
/// handshake signatures (so the connection is well-formed TLS): what Istio's `insecureSkipVerify`
/// (`ClientTLSSettings`) and `JWKS_RESOLVER_INSECURE_SKIP_VERIFY` ask for. Never the default.
#[derive(Debug)]
pub struct AcceptAnyServerCertificate(pub Arc<tokio_rustls::rustls::crypto::CryptoProvider>);

impl tokio_rustls::rustls::client::danger::ServerCertVerifier for AcceptAnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<tokio_rustls::rustls::client::danger::ServerCertVerified, tokio_rustls::rustls::Error> {
        Ok(tokio_rustls::rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<tokio_rustls::rustls::client::danger::HandshakeSignatureValid, tokio_rustls::rustls::Error>
    {
        tokio_rustls::rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<tokio_rustls::rustls::client::danger::HandshakeSignatureValid, tokio_rustls::rustls::Error>
    {
        tokio_rustls::rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<tokio_rustls::rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
