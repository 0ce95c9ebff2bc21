//! Istio's validating admission webhook (`pkg/webhooks/validation/server`): `POST /validate` (and
//! `/validate/…`, as istiod) over HTTPS on `--validation-webhook-addr` (istiod's 15017), answering
//! AdmissionReview v1 and v1beta1 with the same validation as `meshpilot validate`.
//!
//! - [`admission`]: the pure review → answer function (all of istiod's cases, unit-tested).
//! - [`serve`]: the HTTPS server (HTTP/1.1 over rustls) around it; [`WebhookTls`] its certificate.
//!
//! The serving certificate is signed by the control plane's CA (the secure port's, or with a cluster
//! the root in `istio-ca-secret` that every replica shares), else — files only, no cluster — by a root
//! made in memory at start ([`WebhookTls::new`]); either way it is re-issued when half of its
//! lifetime ([`security::tls::SERVING_CERT_TTL`]) has passed, and [`WebhookTls::ca_bundle`] — the
//! root — verifies every certificate served. The ValidatingWebhookConfiguration that points the API
//! server here is kept by `kube_source::webhook_config` (this crate does not talk to Kubernetes).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod admission;
pub mod injection;
pub mod metrics;

use std::{convert::Infallible, future::Future, net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use bytes::Bytes;
use config::parse::ParseOptions;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, Response, body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use security::{CaOptions, IstioCa, ca::CaBundle, ca::CaError, ca::CaSource};
use tokio::net::TcpListener;
use tokio_rustls::{TlsAcceptor, rustls::ServerConfig};

use admission::HttpAnswer;

/// Istio's webhook port.
pub const DEFAULT_PORT: u16 = 15017;

/// The webhook's TLS configuration and the CA bundle that verifies it.
#[derive(Clone, Debug)]
pub struct WebhookTls {
    /// The rustls server configuration (renewing serving certificate, ALPN `http/1.1`).
    pub config: Arc<ServerConfig>,
    /// PEM root(s) verifying the serving certificate: the `caBundle` to advertise.
    pub ca_bundle: String,
}

impl WebhookTls {
    /// A serving certificate for `names` (DNS names such as `istiod.istio-system.svc`, or IP
    /// addresses such as `127.0.0.1` when the API server calls a URL) signed by `ca`; without a CA, a
    /// self-signed root (ECDSA P-256, 10 years, organization `trust_domain`) is made in memory for it.
    ///
    /// # Errors
    /// [`CaError`] when a certificate cannot be made.
    pub fn new(
        ca: Option<Arc<IstioCa>>,
        names: Vec<String>,
        trust_domain: &str,
    ) -> Result<WebhookTls, CaError> {
        let ca = match ca {
            Some(ca) => ca,
            None => {
                let options = CaOptions { trust_domain: trust_domain.to_string(), ..CaOptions::default() };
                let bundle = CaBundle::self_signed(&options)?;
                let location = PathBuf::from("(webhook root in memory)");
                Arc::new(IstioCa::from_bundle(
                    &bundle,
                    &location,
                    CaSource::SelfSigned(location.clone()),
                    options,
                )?)
            }
        };
        let ca_bundle = ca.root_pem().to_string();
        Ok(WebhookTls { config: security::tls::https_server_config(ca, names)?, ca_bundle })
    }
}

/// istiod's `ReadHeaderTimeout` on the webhook server (`pilot/pkg/bootstrap/webhook.go`): a connection
/// that does not complete a request's headers in this time is closed.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the webhook on `listener` with `tls` until `shutdown` completes (then stops accepting;
/// reviews in flight finish). Each connection's TLS handshake is bounded by
/// [`security::tls::HANDSHAKE_TIMEOUT`]; `parse` gives the domain suffix recorded on configs.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    routes: Routes,
    shutdown: impl Future<Output = ()>,
) {
    serve_with_header_timeout(listener, tls, routes, HEADER_READ_TIMEOUT, shutdown).await;
}

/// What the webhook server answers: `/validate` always; `/inject` when an injector is configured
/// (istiod registers it only when it found an injection config).
#[derive(Clone, Debug, Default)]
pub struct Routes {
    /// Validation's options (the domain suffix recorded on configs).
    pub parse: ParseOptions,
    /// The sidecar injector, if any.
    pub injector: Option<Arc<inject::injector::Injector>>,
}

/// [`serve`] with another header read timeout than istiod's [`HEADER_READ_TIMEOUT`] (tests use a short
/// one): a connection whose request headers are not complete `header_read_timeout` after the TLS
/// handshake (or after the previous response) is closed.
pub async fn serve_with_header_timeout(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    routes: Routes,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let routes = Arc::new(routes);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "validation webhook: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        tokio::spawn(connection(acceptor.clone(), tcp, peer, routes.clone(), header_read_timeout));
    }
}

async fn connection(
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    routes: Arc<Routes>,
    header_read_timeout: Duration,
) {
    let stream = match tokio::time::timeout(security::tls::HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(err)) => {
            tracing::debug!(%peer, error = %err, "validation webhook: TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "validation webhook: TLS handshake timed out");
            return;
        }
    };
    let service = service_fn(move |request| {
        let routes = routes.clone();
        async move { Ok::<_, Infallible>(handle(request, &routes).await) }
    });
    // istiod's webhook server: ReadHeaderTimeout 30 s (a slowloris client is closed; hyper's timeout
    // needs its timer, which `Builder::new` leaves unset).
    let mut http = http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(header_read_timeout);
    if let Err(err) = http.serve_connection(TokioIo::new(stream), service).await {
        tracing::debug!(%peer, error = %err, "validation webhook: connection ended with an error");
    }
}

/// Routes one request: `/validate` and `/validate/…` to [`admission::review`], `/inject` and
/// `/inject/…` to [`injection::review`] when an injector is configured, anything else 404 (Go's
/// `404 page not found`).
async fn handle(request: Request<Incoming>, routes: &Routes) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_string();
    let validate = path == "/validate" || path.starts_with("/validate/");
    let injector = routes.injector.as_ref().filter(|_| path == "/inject" || path.starts_with("/inject/"));
    let answer = if validate || injector.is_some() {
        let started = std::time::Instant::now();
        if injector.is_some() {
            metrics::record_injection(metrics::INJECTION_REQUESTS);
        }
        let content_type = request
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let answer = match Limited::new(request.into_body(), admission::MAX_REQUEST_BODY_BYTES)
            .collect()
            .await
        {
            Ok(body) => match injector {
                Some(injector) => {
                    injection::review(injector, content_type.as_deref(), &body.to_bytes(), &path)
                }
                None => {
                    let answer = admission::review(content_type.as_deref(), &body.to_bytes(), &routes.parse);
                    ::metrics::counter!("meshpilot_validation_webhook_reviews", "code" => answer.status.to_string())
                        .increment(1);
                    answer
                }
            },
            Err(err) if err.is::<http_body_util::LengthLimitError>() => admission::too_large(),
            Err(err) => HttpAnswer {
                status: 400,
                content_type: "text/plain; charset=utf-8",
                body: format!("{err}\n").into_bytes(),
            },
        };
        if injector.is_some() {
            // istiod: every review written is a "success" (injected, skipped or denied alike); an
            // HTTP error a failure.
            let outcome =
                if answer.status == 200 { metrics::INJECTION_SUCCESS } else { metrics::INJECTION_FAILURE };
            metrics::record_injection(outcome);
            metrics::record_injection_time(started.elapsed().as_secs_f64());
        }
        answer
    } else {
        HttpAnswer {
            status: 404,
            content_type: "text/plain; charset=utf-8",
            body: b"404 page not found\n".to_vec(),
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(answer.body)));
    *response.status_mut() = hyper::StatusCode::from_u16(answer.status).unwrap_or(hyper::StatusCode::OK);
    if let Ok(value) = hyper::header::HeaderValue::from_str(answer.content_type) {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}
