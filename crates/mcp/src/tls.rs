//! TLS towards an `xds://` config source, from the mesh config's `tlsSettings` (Istio's
//! `ClientTLSSettings`).
//!
//! Supported: `mode` `DISABLE` (plaintext), `SIMPLE` and `MUTUAL`; `caCertificates` (a PEM file; the
//! system's roots when empty), `clientCertificate` + `privateKey` (PEM files, `MUTUAL`), `sni` (the
//! name sent and verified; default the address's host), `subjectAltNames` (the server certificate
//! must be valid for one of them, instead of the SNI name), `insecureSkipVerify` (no verification at
//! all). Refused with a clear error: `ISTIO_MUTUAL` (needs an Istio agent's certificates),
//! `credentialName` (a Kubernetes secret), `caCrl`.
//!
//! (istiod dials `xds://` sources in plaintext whatever `tlsSettings` says.)

use std::{
    future::Future,
    path::Path,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use api::networking::destination_rule::{ClientTlsSettings, client_tls_settings::TlSmode};
use hyper_util::rt::TokioIo;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime, pem::PemObject};
use tokio::net::TcpStream;
use tokio_rustls::{
    TlsConnector,
    client::TlsStream,
    rustls::{
        self, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
        client::{
            WebPkiServerVerifier,
            danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
        },
        crypto::CryptoProvider,
    },
};

/// The TLS dialer of one config source: TCP to `HOST:PORT`, then a TLS handshake. Cheap to clone.
#[derive(Clone)]
pub struct TlsDialer {
    connector: TlsConnector,
    address: String,
    name: ServerName<'static>,
}

impl std::fmt::Debug for TlsDialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsDialer").field("address", &self.address).field("name", &self.name).finish()
    }
}

/// The dialer for `tls` towards `address` (`HOST:PORT`); `Ok(None)` means plaintext (no settings,
/// or mode `DISABLE`).
///
/// # Errors
/// Unsupported settings, unreadable or unusable files; the message names the `tlsSettings` field.
pub fn dialer(address: &str, tls: Option<&ClientTlsSettings>) -> Result<Option<TlsDialer>, String> {
    let Some(tls) = tls else { return Ok(None) };
    let mode =
        TlSmode::try_from(tls.mode).map_err(|_| format!("tlsSettings.mode: unknown mode {}", tls.mode))?;
    match mode {
        TlSmode::Disable => return Ok(None),
        TlSmode::IstioMutual => {
            return Err(
                "tlsSettings.mode: ISTIO_MUTUAL is not supported for config sources (it needs an Istio \
                        agent's workload certificate); use MUTUAL with clientCertificate and privateKey files"
                    .into(),
            );
        }
        TlSmode::Simple | TlSmode::Mutual => {}
    }
    if !tls.credential_name.is_empty() {
        return Err("tlsSettings.credentialName: not supported for config sources; give the files \
                    (caCertificates, clientCertificate, privateKey)"
            .into());
    }
    if !tls.ca_crl.is_empty() {
        return Err("tlsSettings.caCrl: not supported for config sources".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = verifier(tls, provider.clone())?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tlsSettings: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = if mode == TlSmode::Mutual {
        if tls.client_certificate.is_empty() || tls.private_key.is_empty() {
            return Err("tlsSettings: MUTUAL needs clientCertificate and privateKey".into());
        }
        let chain = certificates(Path::new(&tls.client_certificate), "clientCertificate")?;
        let key = PrivateKeyDer::from_pem_file(&tls.private_key)
            .map_err(|e| format!("tlsSettings.privateKey: cannot read {}: {e}", tls.private_key))?;
        builder.with_client_auth_cert(chain, key).map_err(|e| format!("tlsSettings.privateKey: {e}"))?
    } else {
        builder.with_no_client_auth()
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    let host = if tls.sni.is_empty() { host_of(address) } else { tls.sni.clone() };
    let name = ServerName::try_from(host.clone())
        .map_err(|e| format!("tlsSettings.sni: invalid server name {host:?}: {e}"))?;
    Ok(Some(TlsDialer {
        connector: TlsConnector::from(Arc::new(config)),
        address: address.to_string(),
        name,
    }))
}

/// `HOST` of `HOST:PORT` (brackets of an IPv6 literal removed).
fn host_of(address: &str) -> String {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']').to_string()
}

fn certificates(path: &Path, field: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<_, _>>())
        .map_err(|e| format!("tlsSettings.{field}: cannot read {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("tlsSettings.{field}: no certificate in {}", path.display()));
    }
    Ok(certs)
}

fn verifier(
    tls: &ClientTlsSettings,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ServerCertVerifier>, String> {
    if tls.insecure_skip_verify == Some(true) {
        return Ok(Arc::new(security::client::AcceptAnyServerCertificate(provider)));
    }
    let mut roots = RootCertStore::empty();
    if tls.ca_certificates.is_empty() {
        let native = rustls_native_certs::load_native_certs();
        for cert in native.certs {
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err("tlsSettings.caCertificates: empty and no system root certificates found".into());
        }
    } else if tls.ca_certificates.trim_start().starts_with("-----BEGIN") {
        // istiod reads a config source's caCertificates as the PEM text itself.
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(tls.ca_certificates.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("tlsSettings.caCertificates: unreadable PEM text: {e}"))?;
        for cert in certs {
            roots.add(cert).map_err(|e| format!("tlsSettings.caCertificates: unusable certificate: {e}"))?;
        }
    } else {
        for cert in certificates(Path::new(&tls.ca_certificates), "caCertificates")? {
            roots.add(cert).map_err(|e| format!("tlsSettings.caCertificates: unusable certificate: {e}"))?;
        }
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| format!("tlsSettings.caCertificates: {e}"))?;
    if tls.subject_alt_names.is_empty() {
        return Ok(webpki);
    }
    let names = tls
        .subject_alt_names
        .iter()
        .map(|n| {
            ServerName::try_from(n.clone()).map_err(|e| format!("tlsSettings.subjectAltNames: {n:?}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(AnyOfNames { inner: webpki, names }))
}

/// Verifies the chain as usual, but for any of `names` instead of the name dialed.
#[derive(Debug)]
struct AnyOfNames {
    inner: Arc<WebPkiServerVerifier>,
    names: Vec<ServerName<'static>>,
}

impl ServerCertVerifier for AnyOfNames {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let mut last = rustls::Error::General("no subjectAltNames".into());
        for name in &self.names {
            match self.inner.verify_server_cert(end_entity, intermediates, name, ocsp_response, now) {
                Ok(ok) => return Ok(ok),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

impl tower_service::Service<http::Uri> for TlsDialer {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, std::io::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let tcp = TcpStream::connect(this.address.as_str()).await?;
            let _ = tcp.set_nodelay(true);
            Ok(TokioIo::new(this.connector.connect(this.name, tcp).await?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: TlSmode) -> ClientTlsSettings {
        ClientTlsSettings { mode: mode as i32, ..ClientTlsSettings::default() }
    }

    #[test]
    fn plaintext_and_refused_settings() {
        assert!(dialer("h:1", None).unwrap().is_none());
        assert!(dialer("h:1", Some(&settings(TlSmode::Disable))).unwrap().is_none());
        let err = dialer("h:1", Some(&settings(TlSmode::IstioMutual))).unwrap_err();
        assert!(err.starts_with("tlsSettings.mode: ISTIO_MUTUAL"), "{err}");
        let cred = ClientTlsSettings { credential_name: "s".into(), ..settings(TlSmode::Simple) };
        assert!(dialer("h:1", Some(&cred)).unwrap_err().starts_with("tlsSettings.credentialName"));
        let mutual =
            ClientTlsSettings { ca_certificates: "/nonexistent/ca.pem".into(), ..settings(TlSmode::Mutual) };
        let err = dialer("h:1", Some(&mutual)).unwrap_err();
        assert!(err.starts_with("tlsSettings.caCertificates: cannot read /nonexistent/ca.pem"), "{err}");
        let inline = ClientTlsSettings {
            ca_certificates: "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".into(),
            ..settings(TlSmode::Simple)
        };
        let err = dialer("h:1", Some(&inline)).unwrap_err();
        assert!(err.starts_with("tlsSettings.caCertificates: unreadable PEM text"), "{err}");
        let skip = ClientTlsSettings { insecure_skip_verify: Some(true), ..settings(TlSmode::Mutual) };
        assert_eq!(
            dialer("h:1", Some(&skip)).unwrap_err(),
            "tlsSettings: MUTUAL needs clientCertificate and privateKey"
        );
        let simple = ClientTlsSettings { insecure_skip_verify: Some(true), ..settings(TlSmode::Simple) };
        let d = dialer("[::1]:15012", Some(&simple)).unwrap().unwrap();
        assert_eq!(format!("{:?}", d.name), format!("{:?}", ServerName::try_from("::1").unwrap()));
    }
}
