//! The Kubernetes side of meshpilot's CA: service-account tokens reviewed with the TokenReview API
//! (as istiod's `KubeJWTAuthenticator`), and the root certificate published to every namespace as
//! the ConfigMap `istio-ca-root-cert` (key `root-cert.pem`, label `istio.io/config: "true"`), as
//! Istio's namespace controller does, so pods can mount it.

use std::{collections::BTreeMap, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    core::v1::{ConfigMap, Namespace},
};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use security::authn::{BoxFuture, TokenReviewStatus, TokenReviewer};

use crate::client::{FIELD_MANAGER, KubeError, watch};

/// Name of the ConfigMap holding the mesh's root certificate in every namespace.
pub const ROOT_CERT_CONFIGMAP: &str = "istio-ca-root-cert";
/// Its data key.
pub const ROOT_CERT_KEY: &str = "root-cert.pem";
/// Namespaces Istio's namespace controller leaves alone (`inject.IgnoredNamespaces`).
pub const IGNORED_NAMESPACES: [&str; 4] =
    ["kube-system", "kube-public", "kube-node-lease", "local-path-storage"];

/// Reviews tokens with the API server's TokenReview API.
#[derive(Clone)]
pub struct KubeTokenReviewer {
    client: Client,
}

impl std::fmt::Debug for KubeTokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTokenReviewer").finish_non_exhaustive()
    }
}

impl KubeTokenReviewer {
    /// A reviewer over `client` (which needs `create` on `tokenreviews`).
    pub fn new(client: Client) -> Self {
        KubeTokenReviewer { client }
    }
}

impl TokenReviewer for KubeTokenReviewer {
    fn review<'a>(
        &'a self,
        token: &'a str,
        audiences: &'a [String],
    ) -> BoxFuture<'a, Result<TokenReviewStatus, String>> {
        Box::pin(async move {
            let review = TokenReview {
                spec: TokenReviewSpec { token: Some(token.to_string()), audiences: Some(audiences.to_vec()) },
                ..Default::default()
            };
            let api: Api<TokenReview> = Api::all(self.client.clone());
            let answered = api
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| KubeError::from_kube(e, "create a TokenReview").to_string())?;
            let status = answered.status.unwrap_or_default();
            Ok(TokenReviewStatus {
                authenticated: status.authenticated.unwrap_or(false),
                username: status.user.and_then(|u| u.username).unwrap_or_default(),
                audiences: status.audiences.unwrap_or_default(),
                error: status.error.unwrap_or_default(),
            })
        })
    }
}

/// The `istio-ca-root-cert` ConfigMap for `namespace`.
pub fn root_cert_configmap(namespace: &str, root_pem: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(ROOT_CERT_CONFIGMAP.into()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([("istio.io/config".to_string(), "true".to_string())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(ROOT_CERT_KEY.to_string(), root_pem.to_string())])),
        ..Default::default()
    }
}

/// Writes `istio-ca-root-cert` into `namespace` (server-side apply: created or corrected).
///
/// # Errors
/// [`KubeError`] from the API server.
pub async fn publish_root_cert(client: &Client, namespace: &str, root_pem: &str) -> Result<(), KubeError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(ROOT_CERT_CONFIGMAP, &params, &Patch::Apply(root_cert_configmap(namespace, root_pem)))
        .await
        .map_err(|e| {
            KubeError::from_kube(e, &format!("write ConfigMap {namespace}/{ROOT_CERT_CONFIGMAP}"))
        })?;
    Ok(())
}

/// Keeps `istio-ca-root-cert` in every namespace (except [`IGNORED_NAMESPACES`] and terminating
/// ones) until the task is dropped: written when a namespace appears and on every relist, so a
/// deleted or edited ConfigMap is restored at the next namespace event or relist. Failures are
/// logged and retried at the next event.
pub async fn run_root_cert_publisher(client: Client, root_pem: String) {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut events = watch(api, (Duration::from_millis(500), Duration::from_secs(30)));
    while let Some(event) = events.next().await {
        let namespaces: Vec<Namespace> = match event {
            Ok(watcher::Event::Apply(ns) | watcher::Event::InitApply(ns)) => vec![ns],
            Ok(_) => continue,
            Err(err) => {
                tracing::debug!(error = %err, "namespace watch error (retried)");
                continue;
            }
        };
        for ns in namespaces {
            let Some(name) = ns.metadata.name.as_deref() else { continue };
            let terminating = ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating");
            if terminating || IGNORED_NAMESPACES.contains(&name) {
                continue;
            }
            match publish_root_cert(&client, name, &root_pem).await {
                Ok(()) => tracing::debug!(namespace = name, "published {ROOT_CERT_CONFIGMAP}"),
                Err(err) => {
                    tracing::warn!(namespace = name, error = %err, "cannot publish {ROOT_CERT_CONFIGMAP}")
                }
            }
        }
    }
}
