//! Who is calling the CA or the secure xDS port, in istiod's order (`security/pkg/server/ca/authenticate`):
//!
//! 1. **Client certificate**: the TLS handshake already verified the chain against the CA's roots
//!    ([`crate::tls`]); the caller's identities are the leaf's SPIFFE URI SANs. A certificate without
//!    one falls through to the next step.
//! 2. **Kubernetes service-account token**: `authorization: Bearer <JWT>`, checked by a
//!    [`TokenReviewer`] (the TokenReview API) for Istio's audience (`TOKEN_AUDIENCES`, default
//!    `istio-ca`); the user `system:serviceaccount:NS:SA` becomes `spiffe://<trust domain>/ns/NS/sa/SA`.
//!    The token is reviewed in the cluster named by the `clusterid` metadata
//!    ([`TokenReviewer::review_in_cluster`]: a remote cluster's proxies hold that cluster's tokens).
//!
//! Anything else is refused. The caller learns only `Unauthenticated` ("request authenticate
//! failure", as istiod answers); the precise [`AuthnError`] goes to meshpilot's log and to the
//! counter `citadel_server_authentication_failure_count`.

use std::{future::Future, pin::Pin, sync::Arc};

use tonic::metadata::MetadataMap;

use crate::{identity::SpiffeId, tls::SecureConnectInfo};

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// Its identities (from the certificate's URI SANs, or the one of its token).
    pub identities: Vec<SpiffeId>,
    /// How it was authenticated: `client-certificate` or `kubernetes-token`.
    pub method: &'static str,
}

/// Why a caller was not authenticated (for the log and metrics, never for the caller).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthnError {
    /// Neither a usable client certificate nor a bearer token.
    #[error("no client certificate with a SPIFFE identity and no bearer token")]
    NoCredentials,
    /// The `authorization` header is not `Bearer <token>`.
    #[error("malformed authorization header")]
    MalformedHeader,
    /// A token was sent but no token reviewer is configured (no Kubernetes cluster).
    #[error("a bearer token was sent but no Kubernetes cluster is configured to review it")]
    NoReviewer,
    /// The TokenReview call failed.
    #[error("token review failed: {0}")]
    Review(String),
    /// The API server did not authenticate the token (expired, forged, wrong audience).
    #[error("token not authenticated: {0}")]
    Rejected(String),
    /// The token authenticated a user that is not a service account.
    #[error("token user {0:?} is not a service account")]
    NotServiceAccount(String),
}

/// What a TokenReview answered (`authentication.k8s.io/v1` `TokenReviewStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenReviewStatus {
    /// `status.authenticated`.
    pub authenticated: bool,
    /// `status.user.username`.
    pub username: String,
    /// `status.audiences`: the audiences the token is valid for among those asked.
    pub audiences: Vec<String>,
    /// `status.error`.
    pub error: String,
}

/// A boxed future (object-safe async in traits).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Reviews a service-account token (implemented over the Kubernetes TokenReview API by the
/// Kubernetes crate; plain values in tests).
pub trait TokenReviewer: Send + Sync + std::fmt::Debug + 'static {
    /// Reviews `token` for `audiences`. `Err` when the review itself could not be made.
    fn review<'a>(
        &'a self,
        token: &'a str,
        audiences: &'a [String],
    ) -> BoxFuture<'a, Result<TokenReviewStatus, String>>;

    /// Reviews `token` in the cluster the caller names in its `clusterid` gRPC metadata (`""` when it
    /// names none), as istiod's `KubeJWTAuthenticator` picks the config cluster's or a remote
    /// cluster's API server. By default every cluster is this reviewer's one.
    fn review_in_cluster<'a>(
        &'a self,
        cluster: &'a str,
        token: &'a str,
        audiences: &'a [String],
    ) -> BoxFuture<'a, Result<TokenReviewStatus, String>> {
        let _ = cluster;
        self.review(token, audiences)
    }
}

/// The gRPC metadata key naming the caller's cluster (pilot-agent sends its `CLUSTER_ID`; istiod's
/// `clusterIDMeta`).
pub const CLUSTER_ID_METADATA: &str = "clusterid";

/// The authenticator of the CA and the secure xDS port (see the module doc).
#[derive(Clone, Debug)]
pub struct Authenticator {
    trust_domain: String,
    audiences: Vec<String>,
    reviewer: Option<Arc<dyn TokenReviewer>>,
}

impl Authenticator {
    /// An authenticator for `trust_domain`; tokens are checked by `reviewer` (none: only client
    /// certificates are accepted) for `audiences` (Istio's default: `["istio-ca"]`).
    pub fn new(trust_domain: &str, audiences: Vec<String>, reviewer: Option<Arc<dyn TokenReviewer>>) -> Self {
        Authenticator { trust_domain: trust_domain.into(), audiences, reviewer }
    }

    /// Authenticates a request from its gRPC metadata and its connection's TLS details (the
    /// request extension [`SecureConnectInfo`], absent on plaintext connections).
    ///
    /// # Errors
    /// [`AuthnError`] with the precise reason; it is logged and counted here.
    pub async fn authenticate(
        &self,
        metadata: &MetadataMap,
        connection: Option<&SecureConnectInfo>,
    ) -> Result<Caller, AuthnError> {
        let result = self.authenticate_inner(metadata, connection).await;
        if let Err(err) = &result {
            metrics::counter!("citadel_server_authentication_failure_count").increment(1);
            tracing::warn!(peer = ?connection.and_then(|c| c.remote_addr), reason = %err, "caller not authenticated");
        }
        result
    }

    async fn authenticate_inner(
        &self,
        metadata: &MetadataMap,
        connection: Option<&SecureConnectInfo>,
    ) -> Result<Caller, AuthnError> {
        if let Some(leaf) = connection.and_then(|c| c.peer_certificates.as_ref()).and_then(|c| c.first()) {
            let identities = crate::ca::certificate_identities(leaf);
            if !identities.is_empty() {
                return Ok(Caller { identities, method: "client-certificate" });
            }
        }
        let Some(header) = metadata.get("authorization") else { return Err(AuthnError::NoCredentials) };
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthnError::MalformedHeader)?;
        let reviewer = self.reviewer.as_ref().ok_or(AuthnError::NoReviewer)?;
        let cluster = metadata.get(CLUSTER_ID_METADATA).and_then(|v| v.to_str().ok()).unwrap_or("");
        let status =
            reviewer.review_in_cluster(cluster, token, &self.audiences).await.map_err(AuthnError::Review)?;
        self.caller_of(&status)
    }

    /// The caller a TokenReview status stands for (a pure rule, tested on plain values).
    ///
    /// # Errors
    /// [`AuthnError::Rejected`] when not authenticated or valid for none of the audiences;
    /// [`AuthnError::NotServiceAccount`] for another kind of user.
    pub fn caller_of(&self, status: &TokenReviewStatus) -> Result<Caller, AuthnError> {
        if !status.authenticated {
            let reason =
                if status.error.is_empty() { "not authenticated".to_string() } else { status.error.clone() };
            return Err(AuthnError::Rejected(reason));
        }
        if !status.audiences.is_empty() && !status.audiences.iter().any(|a| self.audiences.contains(a)) {
            return Err(AuthnError::Rejected(format!(
                "token audiences {:?} do not include {:?}",
                status.audiences, self.audiences
            )));
        }
        let id = SpiffeId::from_service_account_user(&status.username, &self.trust_domain)
            .ok_or_else(|| AuthnError::NotServiceAccount(status.username.clone()))?;
        Ok(Caller { identities: vec![id], method: "kubernetes-token" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fixed(TokenReviewStatus);

    impl TokenReviewer for Fixed {
        fn review<'a>(
            &'a self,
            token: &'a str,
            _: &'a [String],
        ) -> BoxFuture<'a, Result<TokenReviewStatus, String>> {
            let status = if token == "good" { self.0.clone() } else { TokenReviewStatus::default() };
            Box::pin(async move { Ok(status) })
        }
    }

    fn authn() -> Authenticator {
        let ok = TokenReviewStatus {
            authenticated: true,
            username: "system:serviceaccount:ns1:sa1".into(),
            audiences: vec!["istio-ca".into()],
            error: String::new(),
        };
        Authenticator::new("cluster.local", vec!["istio-ca".into()], Some(Arc::new(Fixed(ok))))
    }

    fn bearer(token: &str) -> MetadataMap {
        let mut m = MetadataMap::new();
        m.insert("authorization", format!("Bearer {token}").parse().unwrap());
        m
    }

    #[tokio::test]
    async fn tokens_become_service_account_identities() {
        let caller = authn().authenticate(&bearer("good"), None).await.unwrap();
        assert_eq!(caller.identities[0].to_string(), "spiffe://cluster.local/ns/ns1/sa/sa1");
        assert_eq!(caller.method, "kubernetes-token");
        assert!(matches!(authn().authenticate(&bearer("forged"), None).await, Err(AuthnError::Rejected(_))));
        assert_eq!(authn().authenticate(&MetadataMap::new(), None).await, Err(AuthnError::NoCredentials));
        let mut basic = MetadataMap::new();
        basic.insert("authorization", "Basic abc".parse().unwrap());
        assert_eq!(authn().authenticate(&basic, None).await, Err(AuthnError::MalformedHeader));
        let no_cluster = Authenticator::new("cluster.local", vec!["istio-ca".into()], None);
        assert_eq!(no_cluster.authenticate(&bearer("good"), None).await, Err(AuthnError::NoReviewer));
    }

    #[test]
    fn review_statuses_are_judged() {
        let a = authn();
        let wrong_audience = TokenReviewStatus {
            authenticated: true,
            username: "system:serviceaccount:a:b".into(),
            audiences: vec!["kubernetes".into()],
            error: String::new(),
        };
        assert!(matches!(a.caller_of(&wrong_audience), Err(AuthnError::Rejected(_))));
        let user = TokenReviewStatus { authenticated: true, username: "alice".into(), ..Default::default() };
        assert_eq!(a.caller_of(&user), Err(AuthnError::NotServiceAccount("alice".into())));
        let expired = TokenReviewStatus { error: "token has expired".into(), ..Default::default() };
        assert_eq!(a.caller_of(&expired), Err(AuthnError::Rejected("token has expired".into())));
    }
}
