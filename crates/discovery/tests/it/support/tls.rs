//! TLS helpers of the gateway tests: a test CA issuing server certificates for [`HOST`], and an HTTPS
//! `GET` that reports the certificate the server presented.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use meshpilot_testing::exchange;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio_rustls::{
    TlsConnector,
    rustls::{self, ClientConfig, RootCertStore},
};

/// The SNI and certificate name of the test servers.
pub const HOST: &str = "secure.example.com";

/// A test CA issuing server certificates for [`HOST`].
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "meshpilot test CA");
        TestCa { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    /// A new key and certificate for [`HOST`] with common name `cn`: (certificate PEM, key PEM, DER).
    pub fn issue(&self, cn: &str) -> (String, String, Vec<u8>) {
        let mut params = CertificateParams::new(vec![HOST.to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }

    /// A TLS client trusting only this CA.
    pub fn client(&self) -> TlsConnector {
        let mut roots = RootCertStore::empty();
        roots.add(self.issuer.der().clone()).unwrap();
        let config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        TlsConnector::from(Arc::new(config))
    }
}

/// `GET /` over TLS to `addr` with SNI [`HOST`], verified against the test CA: (status, body, the
/// certificate the server presented).
pub async fn https_get(client: &TlsConnector, addr: SocketAddr) -> std::io::Result<(u16, String, Vec<u8>)> {
    let fut = async {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let name = rustls::pki_types::ServerName::try_from(HOST).unwrap();
        let mut tls = client.connect(name, tcp).await?;
        let served: Vec<u8> = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.to_vec())
            .unwrap_or_default();
        let r = exchange(&mut tls, HOST, "/", &[]).await?;
        Ok((r.status, r.body, served))
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("timeout")))
}
