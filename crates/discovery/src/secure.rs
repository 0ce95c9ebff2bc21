//! The secure port (Istio's 15012): ADS (SotW + Delta) and the CA's `CreateCertificate` over TLS on
//! one gRPC server, as istiod serves them. The TLS side and the CA are `meshpilot-security`'s; this
//! module joins them to the discovery server: every stream's caller is authenticated (Istio's
//! `XDS_AUTH`) by the same [`Authenticator`] as the CA's callers, and a proxy may only connect as a
//! workload of its caller's namespace (`PILOT_ENABLE_XDS_IDENTITY_CHECK`).
//!
//! The same server answers Envoy's REST-JSON xDS (`POST /v3/discovery:*`, [`crate::rest_router`])
//! over HTTP/2, each poll authenticated by the same rules (a REST client's cluster to this port speaks
//! HTTP/2 and presents a workload certificate; docs/REST-XDS.md).

use std::{net::SocketAddr, sync::Arc};

use sds::FileSecrets;
use security::{Authenticator, IstioCa, service::CertificateService, tls::SecureConnectInfo};
use tokio::net::TcpListener;
use xds::{AdsConfig, AdsServer, BoxFuture, StreamAuthenticator, StreamCaller};

use crate::{DiscoveryServer, NetworkingSource};

/// istiod's serving-certificate names for a control plane in `namespace`: `istio-pilot.<ns>.svc`,
/// `istiod-remote.<ns>.svc`, `istiod.<ns>.svc` (as istiod's certificate carries them; pilot-agent
/// checks `ISTIOD_SAN`, default `istiod.istio-system.svc`, and checks a `localhost` address as
/// that name), plus `istiod-<rev>.<ns>.svc` for a revision.
pub fn istiod_dns_names(namespace: &str, revision: Option<&str>) -> Vec<String> {
    let mut names: Vec<String> = ["istio-pilot", "istiod-remote", "istiod"]
        .iter()
        .map(|svc| format!("{svc}.{namespace}.svc"))
        .collect();
    if let Some(rev) = revision.filter(|r| !r.is_empty() && *r != "default") {
        names.push(format!("istiod-{rev}.{namespace}.svc"));
    }
    names
}

/// [`Authenticator`] as the ADS server's stream authenticator.
#[derive(Debug)]
struct XdsAuth(Arc<Authenticator>);

impl StreamAuthenticator for XdsAuth {
    fn authenticate<'a>(
        &'a self,
        metadata: &'a tonic::metadata::MetadataMap,
        extensions: &'a http::Extensions,
    ) -> BoxFuture<'a, Result<StreamCaller, String>> {
        Box::pin(async move {
            let caller = self
                .0
                .authenticate(metadata, extensions.get::<SecureConnectInfo>())
                .await
                .map_err(|e| e.to_string())?;
            Ok(StreamCaller {
                identities: caller.identities.iter().map(ToString::to_string).collect(),
                namespaces: caller.identities.iter().map(|i| i.namespace.clone()).collect(),
            })
        })
    }

    fn peer_addr(&self, extensions: &http::Extensions) -> Option<SocketAddr> {
        extensions.get::<SecureConnectInfo>().and_then(|c| c.remote_addr)
    }
}

/// The secure port's settings.
#[derive(Clone, Debug)]
pub struct SecurePort {
    /// The CA (signs workload certificates and the port's serving certificate).
    pub ca: Arc<IstioCa>,
    /// Authenticates CA and xDS callers.
    pub authenticator: Arc<Authenticator>,
    /// DNS names of the serving certificate ([`istiod_dns_names`]).
    pub dns_names: Vec<String>,
    /// Authenticate xDS callers (Istio's `XDS_AUTH`, default true); the CA always authenticates.
    pub xds_auth: bool,
}

impl DiscoveryServer {
    /// Serves ADS (authenticated; `config` as for the plaintext port) and the CA on `listener`
    /// over TLS until `shutdown`.
    ///
    /// # Errors
    /// A message when the serving certificate cannot be made or the gRPC server fails.
    pub async fn serve_secure(
        &self,
        secrets: Arc<FileSecrets>,
        config: AdsConfig,
        port: SecurePort,
        listener: TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> Result<(), String> {
        let tls = security::tls::server_config(Arc::clone(&port.ca), port.dns_names.clone())
            .map_err(|e| format!("secure port: {e}"))?;
        let authenticator: Option<Arc<dyn StreamAuthenticator>> =
            port.xds_auth.then(|| Arc::new(XdsAuth(Arc::clone(&port.authenticator))) as _);
        // REST-JSON polls: the same authentication and identity check as the streams.
        let rest_auth = authenticator.clone().map(|authenticator| crate::rest_router::RestAuth {
            authenticator,
            identity_check: config.identity_check,
        });
        let rest = crate::rest_router::router(
            Arc::new(self.rest_xds(Arc::clone(&secrets))),
            crate::rest_router::MAX_CONCURRENT_POLLS,
            rest_auth,
        );
        let config = AdsConfig { authenticator, ..config };
        let ads: AdsServer<NetworkingSource> = self.ads_server(secrets, config);
        let mut settings = ads.config().http2_settings();
        // The port's connection caps are checked at TCP accept, before the TLS handshake (a client
        // over them costs no handshake); the HTTP/2 server then counts nothing more.
        let count = xds::http2::ConnectionCount::new(settings.connection_limits);
        settings.connection_limits = xds::http2::ConnectionLimits { max_total: 0, max_per_peer: 0 };
        let admission: security::tls::Admission = Arc::new(move |peer| {
            count
                .admit_or_refuse(Some(peer))
                .map(|slot| Box::new(slot) as Box<dyn std::any::Any + Send + Sync>)
        });
        // After the TLS handshake (bounded by `security::tls`), the HTTP/2 one.
        let handshake = ads.config().handshake_timeout;
        let incoming =
            tokio_stream::StreamExt::map(security::tls::incoming(listener, tls, Some(admission)), move |c| {
                c.map(|c| xds::handshake::HandshakeDeadline::new(c, handshake))
            });
        let grpc = tonic::service::Routes::new(ads.into_service())
            .add_service(CertificateService::new(port.ca, port.authenticator));
        let routes = tonic::service::Routes::from(grpc.into_axum_router().merge(rest));
        let peer_of = |info: &security::tls::SecureConnectInfo| info.remote_addr;
        xds::http2::serve(incoming, routes, &settings, peer_of, shutdown).await;
        Ok(())
    }
}
