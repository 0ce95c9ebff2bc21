//! The CA's gRPC service, `istio.v1.auth.IstioCertificateService/CreateCertificate` (Istio's
//! `security/proto/pb`, field names and numbers as Istio's; the Rust types are ours):
//!
//! | message | field | number |
//! |---|---|---|
//! | `IstioCertificateRequest` | `csr` (PEM) | 1 |
//! | | `validity_duration` (seconds) | 3 |
//! | | `metadata` (`google.protobuf.Struct`) | 4 |
//! | `IstioCertificateResponse` | `cert_chain` (PEM each; leaf first, root last) | 1 |
//!
//! The caller is authenticated ([`crate::authn`]); the certificate is signed for the caller's own
//! identities whatever the CSR asks ([`crate::ca`]). Answers as istiod: `Unauthenticated` "request
//! authenticate failure" for an unknown caller, `InvalidArgument` for a bad CSR or TTL. Counters
//! (Istio's names): `citadel_server_csr_count`, `citadel_server_success_cert_issuance_count`,
//! `citadel_server_csr_parsing_err_count`, `citadel_server_csr_sign_err_count`,
//! `citadel_server_authentication_failure_count` ([`crate::authn`]). The request metadata
//! (impersonation for ztunnel, `CertSigner`) is not read: meshpilot signs only for the caller.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tonic::{Request, Response, Status, body::Body, server::NamedService};

use crate::{authn::Authenticator, ca::IstioCa, tls::SecureConnectInfo};

/// `istio.v1.auth.IstioCertificateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IstioCertificateRequest {
    /// PEM-encoded certificate signing request.
    #[prost(string, tag = "1")]
    pub csr: String,
    /// Requested validity, seconds.
    #[prost(int64, tag = "3")]
    pub validity_duration: i64,
    /// `google.protobuf.Struct` metadata, kept as its encoded bytes (not read).
    #[prost(bytes = "vec", tag = "4")]
    pub metadata: Vec<u8>,
}

/// `istio.v1.auth.IstioCertificateResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IstioCertificateResponse {
    /// PEM certificates: leaf first, root last.
    #[prost(string, repeated, tag = "1")]
    pub cert_chain: Vec<String>,
}

/// The service name.
pub const SERVICE: &str = "istio.v1.auth.IstioCertificateService";
/// The one method's path.
pub const CREATE_CERTIFICATE_PATH: &str = "/istio.v1.auth.IstioCertificateService/CreateCertificate";

/// The CA endpoint, for `tonic::transport::Server::add_service`.
#[derive(Clone, Debug)]
pub struct CertificateService {
    ca: Arc<IstioCa>,
    authn: Arc<Authenticator>,
}

impl CertificateService {
    /// The service signing with `ca` for callers authenticated by `authn`.
    pub fn new(ca: Arc<IstioCa>, authn: Arc<Authenticator>) -> Self {
        CertificateService { ca, authn }
    }

    /// Handles one request (the whole method, minus the gRPC framing).
    ///
    /// # Errors
    /// `Unauthenticated`, `InvalidArgument` or `Internal`, as istiod.
    pub async fn create_certificate(
        &self,
        request: Request<IstioCertificateRequest>,
    ) -> Result<Response<IstioCertificateResponse>, Status> {
        metrics::counter!("citadel_server_csr_count").increment(1);
        let connection = request.extensions().get::<SecureConnectInfo>().cloned();
        let caller = self
            .authn
            .authenticate(request.metadata(), connection.as_ref())
            .await
            .map_err(|_| Status::unauthenticated("request authenticate failure"))?;
        let identities: Vec<String> = caller.identities.iter().map(ToString::to_string).collect();
        let body = request.into_inner();
        let ca = Arc::clone(&self.ca);
        let ids = identities.clone();
        // Signing is CPU work (RSA verification of the CSR, ECDSA signature): off the I/O threads.
        let signed =
            tokio::task::spawn_blocking(move || ca.sign_csr(&body.csr, &ids, body.validity_duration))
                .await
                .map_err(|e| Status::internal(format!("signing task failed: {e}")))?;
        match signed {
            Ok(cert_chain) => {
                metrics::counter!("citadel_server_success_cert_issuance_count").increment(1);
                tracing::debug!(identities = ?identities, method = caller.method, "signed a workload certificate");
                Ok(Response::new(IstioCertificateResponse { cert_chain }))
            }
            Err(err) => {
                let counter = match err.kind() {
                    "csr_parsing" => "citadel_server_csr_parsing_err_count",
                    _ => "citadel_server_csr_sign_err_count",
                };
                metrics::counter!(counter).increment(1);
                tracing::warn!(identities = ?identities, reason = %err, "CSR refused");
                Err(Status::new(err.grpc_code(), format!("CSR signing error ({err})")))
            }
        }
    }
}

impl NamedService for CertificateService {
    const NAME: &'static str = SERVICE;
}

impl tower_service::Service<http::Request<Body>> for CertificateService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            if request.uri().path() != CREATE_CERTIFICATE_PATH {
                return Ok(
                    Status::unimplemented(format!("unknown method {}", request.uri().path())).into_http()
                );
            }
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<
                IstioCertificateResponse,
                IstioCertificateRequest,
            >::default());
            Ok(grpc.unary(Unary(this), request).await)
        })
    }
}

struct Unary(CertificateService);

impl tonic::server::UnaryService<IstioCertificateRequest> for Unary {
    type Response = IstioCertificateResponse;
    type Future = Pin<Box<dyn Future<Output = Result<Response<IstioCertificateResponse>, Status>> + Send>>;

    fn call(&mut self, request: Request<IstioCertificateRequest>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { service.create_certificate(request).await })
    }
}

/// Calls `CreateCertificate` on `channel` (as pilot-agent does), with `authorization: Bearer
/// <token>` when a token is given.
///
/// # Errors
/// The status the server answered, or `Unavailable` when the channel is not usable.
pub async fn request_certificate(
    channel: tonic::transport::Channel,
    request: IstioCertificateRequest,
    bearer_token: Option<&str>,
) -> Result<IstioCertificateResponse, Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.map_err(|e| Status::unavailable(e.to_string()))?;
    let mut request = Request::new(request);
    if let Some(token) = bearer_token {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| Status::invalid_argument("token is not a header value"))?;
        request.metadata_mut().insert("authorization", value);
    }
    let path = http::uri::PathAndQuery::from_static(CREATE_CERTIFICATE_PATH);
    grpc.unary(request, path, tonic_prost::ProstCodec::default()).await.map(Response::into_inner)
}
