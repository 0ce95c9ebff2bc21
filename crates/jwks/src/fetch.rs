//! The resolver's HTTP(S) client: hyper-util's legacy client over hyper-rustls, one connection per
//! fetch, with Istio's address guard (link-local, cloud metadata and configured CIDRs refused after
//! name resolution), OpenID discovery and the JWKS format check.

use std::{
    future::Future,
    io,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::{
    client::legacy::{
        Client as HyperClient,
        connect::{HttpConnector, dns::Name},
    },
    rt::TokioExecutor,
};
use ipnet::IpNet;
use tokio_rustls::rustls::{
    self, ClientConfig, RootCertStore,
    pki_types::{CertificateDer, pem::PemObject},
};

use super::{JwksOptions, metrics as m};

/// Path appended to the issuer for OpenID discovery (OpenID Connect Discovery 1.0, §4).
pub(super) const OPENID_DISCOVERY_SUFFIX: &str = "/.well-known/openid-configuration";

/// Cloud metadata addresses outside link-local (Istio's `knownCloudMetadataRanges`): Alibaba Cloud's
/// and AWS's IPv6 IMDS.
const CLOUD_METADATA_RANGES: [&str; 2] = ["100.100.100.200/32", "fd00:ec2::/32"];

type Connector = hyper_rustls::HttpsConnector<HttpConnector<GuardedResolver>>;

/// The HTTP(S) client of one resolver.
pub(super) struct Client {
    http: HyperClient<Connector, Empty<Bytes>>,
    guard: Arc<AddressGuard>,
    max_body_bytes: usize,
}

impl Client {
    pub(super) fn new(options: &JwksOptions) -> Self {
        let guard = Arc::new(AddressGuard::new(&options.blocked_cidrs));
        let mut http = HttpConnector::new_with_resolver(GuardedResolver { guard: guard.clone() });
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(options))
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let http = HyperClient::builder(TokioExecutor::new())
            // Istio's clients disable keep-alives: one connection per fetch.
            .pool_max_idle_per_host(0)
            .build(connector);
        Client { http, guard, max_body_bytes: options.max_body_bytes }
    }

    /// The key set of `issuer` at `jwks_uri` (empty: OpenID discovery first), checked to be a JSON
    /// object with a `keys` array.
    pub(super) async fn fetch_jwks(
        &self,
        issuer: &str,
        jwks_uri: &str,
        timeout: Duration,
    ) -> Result<String, String> {
        let uri =
            if jwks_uri.is_empty() { self.discover(issuer, timeout).await? } else { jwks_uri.to_string() };
        let body = self.get(&uri, timeout).await?;
        validate_jwks_format(&body)
            .map_err(|reason| format!("content fetched from {uri:?} is not a valid JWKS: {reason}"))?;
        Ok(body)
    }

    /// `jwks_uri` of the issuer's OpenID discovery document.
    async fn discover(&self, issuer: &str, timeout: Duration) -> Result<String, String> {
        let url = format!("{}{OPENID_DISCOVERY_SUFFIX}", issuer.trim_end_matches('/'));
        let body = self.get(&url, timeout).await?;
        let document: serde_json::Value = serde_json::from_str(&body)
            .map_err(|e| format!("OpenID discovery document {url:?} is not JSON: {e}"))?;
        match document.get("jwks_uri") {
            Some(serde_json::Value::String(uri)) => Ok(uri.clone()),
            other => Err(format!(
                "invalid jwks_uri {} in OpenID discovery configuration {url:?}",
                other.map_or_else(|| "<nil>".to_string(), ToString::to_string)
            )),
        }
    }

    /// The body of a `GET uri` answered with a 2xx status, within `timeout`; counted as a success or
    /// a failure (Istio counts each attempt, before any check of the body).
    async fn get(&self, uri: &str, timeout: Duration) -> Result<String, String> {
        let result = tokio::time::timeout(timeout, self.get_inner(uri))
            .await
            .unwrap_or_else(|_| Err(format!("GET {uri:?}: no response within {timeout:?}")));
        let counter = if result.is_ok() { m::FETCH_SUCCESS } else { m::FETCH_FAIL };
        metrics::counter!(counter).increment(1);
        result
    }

    /// `GET uri`, following up to [`MAX_REDIRECTS`] redirects (as Go's client does for Istio), each
    /// hop through the address guard.
    async fn get_inner(&self, uri: &str) -> Result<String, String> {
        let mut current: http::Uri = uri.parse().map_err(|e| format!("invalid URI {uri:?}: {e}"))?;
        for _ in 0..=MAX_REDIRECTS {
            match current.scheme_str() {
                Some(s) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https") => {}
                _ => return Err(format!("GET {uri:?}: scheme of {current} must be http or https")),
            }
            // An IP literal is connected to without resolution: check it here.
            if let Some(host) = current.host()
                && let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>()
            {
                self.guard.check(ip).map_err(|e| format!("GET {current}: {e}"))?;
            }
            let response = self
                .http
                .get(current.clone())
                .await
                .map_err(|e| format!("GET {current}: {}", error_chain(&e)))?;
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(http::header::LOCATION)
            {
                let location =
                    location.to_str().map_err(|_| format!("GET {current}: Location is not text"))?;
                current = redirect_target(&current, location)
                    .ok_or_else(|| format!("GET {current}: cannot follow Location {location:?}"))?;
                continue;
            }
            let body = Limited::new(response.into_body(), self.max_body_bytes)
                .collect()
                .await
                .map_err(|e| format!("GET {current}: reading the body: {e}"))?
                .to_bytes();
            let text = String::from_utf8_lossy(&body).into_owned();
            if !status.is_success() {
                let mut message = format!("{text:?}");
                if message.len() > 100 {
                    let mut cut = 100;
                    while !message.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    message.truncate(cut);
                    message.push_str("(truncated)");
                }
                return Err(format!("GET {current}: status {}, message {message}", status.as_u16()));
            }
            return Ok(text);
        }
        Err(format!("GET {uri:?}: stopped after {MAX_REDIRECTS} redirects"))
    }
}

/// Most redirects followed per fetch (Go's `http.Client` default).
const MAX_REDIRECTS: usize = 10;

/// Where a redirect from `base` to `location` goes: an absolute URL, or a path on the same origin.
pub(super) fn redirect_target(base: &http::Uri, location: &str) -> Option<http::Uri> {
    if location.contains("://") {
        return location.parse().ok();
    }
    let scheme = base.scheme_str()?;
    if location.starts_with("//") {
        return format!("{scheme}:{location}").parse().ok();
    }
    let authority = base.authority()?.as_str();
    let path = if location.starts_with('/') {
        location.to_string()
    } else {
        let dir = base.path().rsplit_once('/').map_or("", |(dir, _)| dir);
        format!("{dir}/{location}")
    };
    format!("{scheme}://{authority}{path}").parse().ok()
}

/// `e` with its sources (hyper's errors say little at the top level).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Istio's `validateJWKSFormat`: a JSON object whose `keys` is an array (keys themselves not
/// checked).
pub(super) fn validate_jwks_format(body: &str) -> Result<(), String> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(|e| format!("not valid JSON: {e}"))?;
    match value.get("keys") {
        None => Err("missing \"keys\" field".to_string()),
        Some(serde_json::Value::Array(_)) => Ok(()),
        Some(_) => Err("\"keys\" is not an array".to_string()),
    }
}

/// The rustls client configuration: system roots and extra PEM roots, or no verification at all.
fn tls_config(options: &JwksOptions) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    if options.insecure_skip_verify {
        return builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(security::client::AcceptAnyServerCertificate(
                provider,
            )))
            .with_no_client_auth();
    }
    let mut roots = RootCertStore::empty();
    if options.system_roots {
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::warn!(%error, "reading the system's root certificates for JWKS fetches");
        }
        let (added, _) = roots.add_parsable_certificates(native.certs);
        tracing::debug!(added, "system root certificates for JWKS fetches");
    }
    for path in &options.extra_root_ca_paths {
        let Ok(pem) = std::fs::read(path) else { continue };
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok).collect();
        let (added, ignored) = roots.add_parsable_certificates(certs);
        tracing::info!(path = %path.display(), added, ignored, "extra root certificates for JWKS fetches");
    }
    builder.with_root_certificates(roots).with_no_client_auth()
}

/// Addresses the resolver never connects to (Istio's `jwksBlockedIP`).
#[derive(Debug)]
pub(super) struct AddressGuard {
    blocked: Vec<IpNet>,
    metadata: Vec<IpNet>,
}

impl AddressGuard {
    pub(super) fn new(blocked: &[IpNet]) -> Self {
        AddressGuard {
            blocked: blocked.to_vec(),
            metadata: CLOUD_METADATA_RANGES.iter().map(|c| c.parse().expect("static CIDR")).collect(),
        }
    }

    /// Why `ip` may not be connected to, if so.
    pub(super) fn check(&self, ip: IpAddr) -> Result<(), String> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let link_local = match ip {
            IpAddr::V4(v4) => v4.is_link_local() || (v4.octets()[0] == 224 && v4.octets()[1..3] == [0, 0]),
            IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80 || (v6.segments()[0] & 0xff0f) == 0xff02,
        };
        if link_local {
            return Err(format!("connection blocked: resolved IP {ip} is link-local"));
        }
        if self.metadata.iter().any(|n| n.contains(&ip)) {
            return Err(format!("connection blocked: resolved IP {ip} is a known cloud metadata address"));
        }
        if let Some(net) = self.blocked.iter().find(|n| n.contains(&ip)) {
            return Err(format!("connection blocked: resolved IP {ip} is in blocked CIDR range {net}"));
        }
        Ok(())
    }
}

/// Name resolution that refuses names resolving to a guarded address (the check Istio makes in its
/// dialer's `Control`, after resolution).
#[derive(Clone)]
struct GuardedResolver {
    guard: Arc<AddressGuard>,
}

impl tower_service::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let guard = self.guard.clone();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            for addr in &addrs {
                guard.check(addr.ip()).map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e))?;
            }
            Ok(addrs.into_iter())
        })
    }
}
