//! The Kubernetes side of meshpilot's CA: service-account tokens reviewed with the TokenReview API
//! (as istiod's `KubeJWTAuthenticator`), and the root certificate published to every namespace as
//! the ConfigMap `istio-ca-root-cert` (key `root-cert.pem`, label `istio.io/config: "true"`), as
//! Istio's namespace controller does, so pods can mount it.

use std::{collections::BTreeMap, time::Duration};

use futures::StreamExt;
use k8s_openapi::{
    ByteString,
    api::{
        authentication::v1::{TokenReview, TokenReviewSpec},
        core::v1::{ConfigMap, Namespace, Secret},
    },
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
    runtime::watcher,
};
use security::{
    CaOptions, IstioCa,
    authn::{BoxFuture, TokenReviewStatus, TokenReviewer},
    ca::{CA_CERT, CA_KEY, CERT_CHAIN, CaBundle, CaSource, ROOT_CERT},
};

use crate::client::{KubeError, watch};

/// Name of the ConfigMap holding the mesh's root certificate in every namespace.
pub const ROOT_CERT_CONFIGMAP: &str = "istio-ca-root-cert";
/// Its data key.
pub const ROOT_CERT_KEY: &str = "root-cert.pem";
/// Namespaces Istio's namespace controller leaves alone (`inject.IgnoredNamespaces`).
pub const IGNORED_NAMESPACES: [&str; 4] =
    ["kube-system", "kube-public", "kube-node-lease", "local-path-storage"];

/// The secret istiod keeps its self-signed root in (in its own namespace).
pub const CA_SECRET: &str = "istio-ca-secret";
/// Its type.
pub const CA_SECRET_TYPE: &str = "istio.io/ca-root";

fn secret_data(bundle: &CaBundle) -> BTreeMap<String, ByteString> {
    let entry = |k: &str, v: &str| (k.to_string(), ByteString(v.as_bytes().to_vec()));
    BTreeMap::from([
        entry(CA_CERT, &bundle.ca_cert),
        entry(CA_KEY, &bundle.ca_key),
        entry(CERT_CHAIN, &bundle.cert_chain),
        // Istio writes the key twice (`key.pem` is the older name).
        entry("key.pem", &bundle.ca_key),
        entry(ROOT_CERT, &bundle.root_cert),
    ])
}

fn bundle_of(secret: &Secret) -> CaBundle {
    let data = secret.data.clone().unwrap_or_default();
    let text = |k: &str| data.get(k).map(|b| String::from_utf8_lossy(&b.0).into_owned()).unwrap_or_default();
    CaBundle {
        ca_cert: text(CA_CERT),
        ca_key: text(CA_KEY),
        cert_chain: text(CERT_CHAIN),
        root_cert: text(ROOT_CERT),
    }
}

/// The self-signed CA kept in the secret `istio-ca-secret` of `namespace` (type `istio.io/ca-root`,
/// Istio's keys), as istiod keeps it: read when it exists, else created (if another replica created
/// it first, that one is used). A restart therefore keeps the root.
///
/// # Errors
/// A message naming the secret: the API server refused, the namespace does not exist, or the
/// secret's key material is unusable.
pub async fn self_signed_ca_from_secret(
    client: &Client,
    namespace: &str,
    options: CaOptions,
) -> Result<IstioCa, String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let name = format!("{namespace}/{CA_SECRET}");
    let location = std::path::PathBuf::from(format!("secret {name}"));
    for _ in 0..3 {
        let existing = api
            .get_opt(CA_SECRET)
            .await
            .map_err(|e| KubeError::from_kube(e, &format!("read secret {name}")).to_string())?;
        if let Some(secret) = existing {
            return IstioCa::from_bundle(&bundle_of(&secret), &location, CaSource::Secret(name), options)
                .map_err(|e| e.to_string());
        }
        let bundle = CaBundle::self_signed(&options).map_err(|e| e.to_string())?;
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(CA_SECRET.into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            },
            type_: Some(CA_SECRET_TYPE.into()),
            data: Some(secret_data(&bundle)),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &secret).await {
            Ok(_) => {
                tracing::info!(secret = %name, "created a self-signed root CA");
                return IstioCa::from_bundle(&bundle, &location, CaSource::Secret(name), options)
                    .map_err(|e| e.to_string());
            }
            Err(e) => {
                let err = KubeError::from_kube(e, &format!("create secret {name}"));
                if !err.is_already_exists() {
                    return Err(if err.is_not_found() {
                        format!(
                            "{err} (create namespace {namespace}, or set POD_NAMESPACE to the control plane's namespace)"
                        )
                    } else {
                        err.to_string()
                    });
                }
            }
        }
    }
    Err(format!("secret {name} keeps appearing and disappearing; giving up"))
}

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

/// Writes `istio-ca-root-cert` into `namespace` as istiod's namespace controller does
/// (`security/pkg/k8s/configutil.go`, `InsertDataToConfigMap`): created when absent (one that another
/// writer created meanwhile is left for the next event), else its `root-cert.pem` replaced with an
/// update when it differs. Only the verbs Istio's chart grants istiod on ConfigMaps are used (`get`,
/// `create`, `update`; not `patch`, so no server-side apply).
///
/// # Errors
/// [`KubeError`] from the API server.
pub async fn publish_root_cert(client: &Client, namespace: &str, root_pem: &str) -> Result<(), KubeError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let what = || format!("write ConfigMap {namespace}/{ROOT_CERT_CONFIGMAP}");
    let current = api.get_opt(ROOT_CERT_CONFIGMAP).await.map_err(|e| KubeError::from_kube(e, &what()))?;
    match current {
        None => match api.create(&PostParams::default(), &root_cert_configmap(namespace, root_pem)).await {
            Ok(_) => Ok(()),
            Err(e) => match KubeError::from_kube(e, &what()) {
                err if err.is_already_exists() => Ok(()),
                err => Err(err),
            },
        },
        Some(mut configmap) => {
            let data = configmap.data.get_or_insert_with(BTreeMap::new);
            if data.get(ROOT_CERT_KEY).map(String::as_str) == Some(root_pem) {
                return Ok(());
            }
            data.insert(ROOT_CERT_KEY.to_string(), root_pem.to_string());
            api.replace(ROOT_CERT_CONFIGMAP, &PostParams::default(), &configmap)
                .await
                .map_err(|e| KubeError::from_kube(e, &what()))?;
            Ok(())
        }
    }
}

/// [`run_root_cert_publisher`] on the replica that leads istiod's namespace-controller lock
/// ([`crate::leader::NAMESPACE_CONTROLLER`], a ConfigMap lock as istiod's), so that one replica of
/// meshpilot or istiod writes the ConfigMaps; stops writing when leadership is lost, releases the lock
/// on `shutdown`.
pub async fn publish_root_cert_while_leading(
    client: Client,
    root_pem: String,
    leader: crate::leader::LeaderElectionOptions,
    shutdown: model::Shutdown,
) {
    use crate::leader::{LeaderElection, LockScope, NAMESPACE_CONTROLLER, run_while_leading};
    let leadership = LeaderElection::new(client.clone(), NAMESPACE_CONTROLLER, LockScope::Shared, leader)
        .start(shutdown.clone());
    run_while_leading(leadership.subscribe(), shutdown, |mut term| {
        let (client, root_pem) = (client.clone(), root_pem.clone());
        async move {
            tokio::select! {
                () = run_root_cert_publisher(client, root_pem) => {}
                () = term.wait() => {}
            }
        }
    })
    .await;
    leadership.stopped().await;
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
