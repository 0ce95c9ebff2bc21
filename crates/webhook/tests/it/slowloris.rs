//! Slowloris on the validation webhook's HTTPS port (issue 20, docs/RELIABILITY.md): after the TLS
//! handshake, a client that never finishes its request headers, or sends nothing, is closed after the
//! header read timeout (istiod's `ReadHeaderTimeout`, 30 s; 300 ms here), while a normal review is
//! answered meanwhile.

use std::{sync::Arc, time::Duration};

use config::parse::ParseOptions;
use meshpilot_testing::http::trickle_headers_until_closed;
use meshpilot_webhook::{Routes, WebhookTls, serve_with_header_timeout};
use rustls_pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::{
    TlsConnector,
    client::TlsStream,
    rustls::{self, ClientConfig, RootCertStore},
};

const STEP: Duration = Duration::from_secs(10);

/// A TLS connection to the webhook, verified against its CA bundle.
async fn connect(addr: std::net::SocketAddr, ca_bundle: &str) -> TlsStream<TcpStream> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_bundle.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap()
}

#[tokio::test]
async fn webhook_clients_that_never_finish_their_headers_are_closed_and_reviews_are_answered() {
    let tls = WebhookTls::new(None, vec!["127.0.0.1".into()], "cluster.local").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_with_header_timeout(
        listener,
        tls.config.clone(),
        Routes { parse: ParseOptions::default(), injector: None },
        Duration::from_millis(300),
        async {
            let _ = stopped.await;
        },
    ));

    let mut slow = connect(addr, &tls.ca_bundle).await;
    slow.write_all(b"POST /validate HTTP/1.1\r\nHost: istiod\r\n").await.unwrap();
    let mut silent = connect(addr, &tls.ca_bundle).await;

    // A normal client is answered while the others hang (an empty body: the review's 400).
    let mut ok = connect(addr, &tls.ca_bundle).await;
    ok.write_all(
        b"POST /validate HTTP/1.1\r\nHost: istiod\r\nContent-Type: application/json\r\n\
          Content-Length: 2\r\nConnection: close\r\n\r\n{}",
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(STEP, ok.read_to_end(&mut answer)).await.expect("an answer");
    assert!(answer.starts_with(b"HTTP/1.1 "), "{}", String::from_utf8_lossy(&answer));

    trickle_headers_until_closed(slow, STEP).await;
    let mut rest = Vec::new();
    let _ =
        tokio::time::timeout(STEP, silent.read_to_end(&mut rest)).await.expect("the silent client is closed");
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));

    let _ = stop.send(());
    server.await.unwrap();
}
