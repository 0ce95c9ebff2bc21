//! The remote secret of `meshpilot create-remote-secret`: what `istioctl create-remote-secret` writes
//! (`istioctl/pkg/multicluster/remote_secret.go`), a Secret holding a kubeconfig that lets a control
//! plane in another cluster read this one, as the reader service account.
//!
//! ```text
//!  ServiceAccount istio-reader-service-account (created with its ClusterRole/Binding when asked)
//!        │ token Secret kubernetes.io/service-account-token (found, or created and waited for)
//!        ▼
//!  kubeconfig {cluster NAME: server, CA; user NAME: token} ──► Secret istio-remote-secret-NAME
//!                                                              labels istio/multiCluster: "true"
//!                                                              annotations networking.istio.io/cluster: NAME
//!                                                              stringData NAME: <kubeconfig>
//! ```
//!
//! As istioctl: the cluster name defaults to the `kube-system` namespace's UID; `--type config` writes
//! `istio-kubeconfig` (key `config`) with the `istiod` service account; on Kubernetes 1.24+ the token
//! Secret is the one `--secret-name` names (it must reference the service account), else the first of
//! the namespace referencing it, else `<sa>-istio-remote-secret-token` is created and its `token` and
//! `ca.crt` waited for (the token controller fills it; five more reads one second apart).
//! Not done: `--auth-type plugin`, and the pre-1.24 path (token Secrets listed in the service account).

use std::{collections::BTreeMap, time::Duration};

use base64::Engine as _;
use k8s_openapi::api::{
    core::v1::{Namespace, Secret, ServiceAccount},
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::remote_kubeconfig::{InsecureKubeconfigOptions, remote_kubeconfig};

/// Label of remote secrets (istiod's `MultiClusterSecretLabel`); value `"true"`.
pub const MULTICLUSTER_SECRET_LABEL: &str = "istio/multiCluster";
/// Annotation naming the cluster of a remote secret (istioctl's `clusterNameAnnotationKey`).
pub const CLUSTER_NAME_ANNOTATION: &str = "networking.istio.io/cluster";
/// Prefix of a remote secret's name: `istio-remote-secret-<cluster>`.
pub const REMOTE_SECRET_PREFIX: &str = "istio-remote-secret-";
/// Name of the `--type config` secret (key [`CONFIG_SECRET_KEY`]).
pub const CONFIG_SECRET_NAME: &str = "istio-kubeconfig";
/// Data key of the `--type config` secret.
pub const CONFIG_SECRET_KEY: &str = "config";
/// Default service account of `--type remote` (Istio's `DefaultServiceAccountName`).
pub const READER_SERVICE_ACCOUNT: &str = "istio-reader-service-account";
/// Default service account of `--type config` (Istio's `DefaultConfigServiceAccountName`).
pub const CONFIG_SERVICE_ACCOUNT: &str = "istiod";
/// Annotation of a token Secret naming its service account (`kubernetes.io/service-account.name`).
pub const SERVICE_ACCOUNT_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// Type of a service-account token Secret.
pub const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
/// Field manager of the objects created here.
const FIELD_MANAGER: &str = "meshpilot";

/// `--type`: which secret is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecretType {
    /// `remote` (default): `istio-remote-secret-<cluster>`, key `<cluster>`, reader service account.
    #[default]
    Remote,
    /// `config`: `istio-kubeconfig`, key `config`, `istiod` service account (external control plane).
    Config,
}

/// The options of `create-remote-secret` (istioctl's `RemoteSecretOptions`, bearer-token auth).
#[derive(Debug, Clone)]
pub struct RemoteSecretOptions {
    /// `--name`: the cluster whose credentials are written (a DNS-1123 label); `None`: the
    /// `kube-system` namespace's UID.
    pub cluster_name: Option<String>,
    /// The namespace of the service account, its token Secret and the written Secret.
    pub namespace: String,
    /// `--service-account`; `None`: [`READER_SERVICE_ACCOUNT`] or [`CONFIG_SERVICE_ACCOUNT`] by type.
    pub service_account: Option<String>,
    /// `--create-service-account` (default true): create the reader service account, ClusterRole and
    /// ClusterRoleBinding (and the namespace) when the service account is missing.
    pub create_service_account: bool,
    /// `--type`.
    pub secret_type: SecretType,
    /// `--server`: the API server address written; `None`: the kubeconfig's.
    pub server: Option<String>,
    /// `--tls-server-name`: `tls-server-name` of the written cluster.
    pub tls_server_name: Option<String>,
    /// `--secret-name`: the token Secret to use.
    pub secret_name: Option<String>,
    /// How many more times the token Secret is read, one [`RemoteSecretOptions::token_wait`] apart,
    /// until the token controller has filled it (istioctl: 5).
    pub token_retries: u32,
    /// See [`RemoteSecretOptions::token_retries`] (istioctl: 1 s).
    pub token_wait: Duration,
}

impl RemoteSecretOptions {
    /// istioctl's defaults for `namespace`: remote type, service account created, five retries a second
    /// apart.
    pub fn new(namespace: &str) -> RemoteSecretOptions {
        RemoteSecretOptions {
            cluster_name: None,
            namespace: namespace.to_string(),
            service_account: None,
            create_service_account: true,
            secret_type: SecretType::Remote,
            server: None,
            tls_server_name: None,
            secret_name: None,
            token_retries: 5,
            token_wait: Duration::from_secs(1),
        }
    }
}

/// The secret made by [`create_remote_secret`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSecret {
    /// Secret name.
    pub name: String,
    /// Secret namespace.
    pub namespace: String,
    /// The cluster name (annotation value; the data key for `--type remote`).
    pub cluster_name: String,
    /// The data key.
    pub key: String,
    /// The kubeconfig (YAML, as client-go's `latest.Codec` writes it).
    pub kubeconfig: String,
    /// istioctl's warning when the server looks unreachable from another cluster (loopback).
    pub warning: Option<String>,
}

impl RemoteSecret {
    /// The Secret as `istioctl create-remote-secret` prints it: a header comment, the YAML with the
    /// kubeconfig under `stringData`, and `---`.
    pub fn to_yaml(&self) -> String {
        let mut out = String::from(
            "# This file is autogenerated, do not edit.\napiVersion: v1\nkind: Secret\nmetadata:\n",
        );
        out.push_str(&format!(
            "  annotations:\n    {CLUSTER_NAME_ANNOTATION}: {}\n",
            scalar(&self.cluster_name)
        ));
        out.push_str(&format!("  labels:\n    {MULTICLUSTER_SECRET_LABEL}: \"true\"\n"));
        out.push_str(&format!("  name: {}\n  namespace: {}\n", scalar(&self.name), scalar(&self.namespace)));
        out.push_str(&format!("stringData:\n  {}: |\n", scalar(&self.key)));
        for line in self.kubeconfig.lines() {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
        out.push_str("---\n");
        out
    }
}

/// A YAML scalar as Go's YAML encoder writes strings: plain when it cannot be read as anything but
/// that string, else double-quoted.
fn scalar(s: &str) -> String {
    let keyword = matches!(
        s.to_ascii_lowercase().as_str(),
        "" | "~" | "null" | "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n"
    );
    let number = s.parse::<f64>().is_ok()
        || s.strip_prefix("0x").is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()));
    let date = s.len() >= 8 && s.as_bytes()[..4].iter().all(u8::is_ascii_digit) && s.as_bytes()[4] == b'-';
    let safe_chars = s.chars().all(|c| c.is_ascii_alphanumeric() || "._/:+=@-".contains(c));
    let safe_start = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '/' || c == '.');
    if keyword || number || date || !safe_chars || !safe_start {
        serde_json::Value::String(s.to_string()).to_string()
    } else {
        s.to_string()
    }
}

/// The kubeconfig istioctl embeds (`createBearerTokenKubeconfig`): one cluster, context and user, all
/// named `cluster_name`; the CA as `certificate-authority-data` (base64), the token inline.
pub fn bearer_token_kubeconfig(
    cluster_name: &str,
    server: &str,
    tls_server_name: Option<&str>,
    ca: &[u8],
    token: &str,
) -> String {
    let name = scalar(cluster_name);
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let mut out = String::from("apiVersion: v1\nclusters:\n- cluster:\n");
    if !ca.is_empty() {
        out.push_str(&format!("    certificate-authority-data: {ca}\n"));
    }
    out.push_str(&format!("    server: {}\n", scalar(server)));
    if let Some(tls) = tls_server_name.filter(|s| !s.is_empty()) {
        out.push_str(&format!("    tls-server-name: {}\n", scalar(tls)));
    }
    out.push_str(&format!(
        "  name: {name}\ncontexts:\n- context:\n    cluster: {name}\n    user: {name}\n  name: {name}\n"
    ));
    out.push_str(&format!("current-context: {name}\nkind: Config\nusers:\n- name: {name}\n"));
    if token.is_empty() {
        out.push_str("  user: {}\n");
    } else {
        out.push_str(&format!("  user:\n    token: {}\n", scalar(token)));
    }
    out
}

/// istioctl's warning for a server address other clusters cannot reach.
fn loopback_warning(server: &str) -> Option<String> {
    (server.contains("127.0.0.1") || server.contains("localhost")).then(|| {
        format!(
            "server in Kubeconfig is {server}. This is likely not reachable from inside the cluster, if you're \
             using Kubernetes in Docker, pass --server with the container IP for the API Server"
        )
    })
}

/// `true` for a DNS-1123 label (lower-case alphanumerics and `-`, alphanumeric at both ends, ≤ 63).
fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Connects as `istioctl --kubeconfig PATH --context NAME` does: the kubeconfig at `kubeconfig`, else
/// `$KUBECONFIG`'s files merged, else `~/.kube/config`, else the in-cluster service account; its
/// context `context` (default: the current one). Returns the client and the server as the kubeconfig
/// writes it (what [`create_remote_secret`] embeds unless `--server` is given). Must run inside a
/// tokio runtime.
///
/// # Errors
/// The kubeconfig cannot be read, or names no such context or cluster.
pub async fn connect(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> Result<(Client, String), String> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let file = match kubeconfig {
        Some(path) => {
            Some(Kubeconfig::read_from(path).map_err(|e| format!("kubeconfig {}: {e}", path.display()))?)
        }
        None => Kubeconfig::read().ok(),
    };
    let Some(file) = file else {
        if let Some(context) = context {
            return Err(format!(
                "context {context:?} given but no kubeconfig found ($KUBECONFIG, ~/.kube/config)"
            ));
        }
        let config = kube::Config::infer().await.map_err(|e| e.to_string())?;
        let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
        return Ok((Client::try_from(config).map_err(|e| e.to_string())?, server));
    };
    let chosen = context.map(str::to_string).or_else(|| file.current_context.clone()).unwrap_or_default();
    let server = file
        .contexts
        .iter()
        .find(|c| c.name == chosen)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| file.clusters.iter().find(|k| k.name == c.cluster))
        .and_then(|k| k.cluster.as_ref())
        .and_then(|k| k.server.clone())
        .ok_or_else(|| {
            format!("context {chosen:?} does not exist in the kubeconfig or names a cluster without server")
        })?;
    let options = KubeConfigOptions { context: Some(chosen), ..KubeConfigOptions::default() };
    let config = kube::Config::from_custom_kubeconfig(file, &options).await.map_err(|e| e.to_string())?;
    Ok((Client::try_from(config).map_err(|e| e.to_string())?, server))
}

/// The namespace of the current context of the kubeconfig files `paths` merged (client-go's rules:
/// the first file to set a value wins); `None` when unset or unreadable. istioctl's
/// `create-remote-secret` writes into this namespace when `-n` is not given, reading `$KUBECONFIG` (or
/// `~/.kube/config`) even when `--kubeconfig` names another file.
pub fn context_namespace(paths: &[std::path::PathBuf]) -> Option<String> {
    use kube::config::Kubeconfig;
    let merged = paths
        .iter()
        .filter(|p| p.is_file())
        .filter_map(|p| Kubeconfig::read_from(p).ok())
        .try_fold(Kubeconfig::default(), Kubeconfig::merge)
        .ok()?;
    let current = merged.current_context.as_deref()?;
    let context = merged.contexts.iter().find(|c| c.name == current)?.context.as_ref()?;
    context.namespace.clone().filter(|n| !n.is_empty())
}

/// The message of a Kubernetes API error (the server's words, as client-go prints them), else the
/// transport error.
fn api_message(e: kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Makes the remote secret of this cluster (see the module docs), creating what istioctl creates
/// (service account and its RBAC, namespace, token Secret). `kubeconfig_server` is the server of the
/// kubeconfig `client` was made from (written unless `options.server` is set).
///
/// # Errors
/// istioctl's messages: an invalid `--name`, a missing service account with
/// `--create-service-account=false` (`could not get access token to read resources from local
/// kube-apiserver: failed retrieving service account NAME.NS required for creating the remote
/// secret (hint: …): …`), a `--secret-name` that does not reference the service account, a token
/// Secret still without `ca.crt`/`token` after the retries (`no "ca.crt" data found`), API errors.
pub async fn create_remote_secret(
    client: &Client,
    kubeconfig_server: &str,
    options: &RemoteSecretOptions,
) -> Result<RemoteSecret, String> {
    if let Some(name) = &options.cluster_name
        && !is_dns1123_label(name)
    {
        return Err(format!("{name} is not a valid DNS 1123 label"));
    }
    let cluster_name = match &options.cluster_name {
        Some(name) => name.clone(),
        None => {
            let ns = Api::<Namespace>::all(client.clone()).get("kube-system").await.map_err(api_message)?;
            ns.metadata.uid.unwrap_or_default()
        }
    };
    let (name, key, default_account) = match options.secret_type {
        SecretType::Remote => {
            (format!("{REMOTE_SECRET_PREFIX}{cluster_name}"), cluster_name.clone(), READER_SERVICE_ACCOUNT)
        }
        SecretType::Config => {
            (CONFIG_SECRET_NAME.to_string(), CONFIG_SECRET_KEY.to_string(), CONFIG_SERVICE_ACCOUNT)
        }
    };
    let account = options.service_account.clone().unwrap_or_else(|| default_account.to_string());
    let token_secret = service_account_secret(client, options, &account).await.map_err(|e| {
        format!("could not get access token to read resources from local kube-apiserver: {e}")
    })?;
    let (server, warning) = match &options.server {
        Some(server) => (server.clone(), None),
        None => (kubeconfig_server.to_string(), loopback_warning(kubeconfig_server)),
    };
    let (ca, token) = wait_for_token_data(client, token_secret, options).await?;
    let token =
        String::from_utf8(token).map_err(|_| "the service account token is not UTF-8 text".to_string())?;
    let kubeconfig =
        bearer_token_kubeconfig(&cluster_name, &server, options.tls_server_name.as_deref(), &ca, &token);
    // What istioctl checks with clientcmd.Validate; meshpilot checks it as a control plane reads it.
    remote_kubeconfig(kubeconfig.as_bytes(), &InsecureKubeconfigOptions::default())
        .map_err(|e| format!("invalid kubeconfig: {e}"))?;
    Ok(RemoteSecret { name, namespace: options.namespace.clone(), cluster_name, key, kubeconfig, warning })
}

/// The token Secret of `account` (istioctl's `getServiceAccountSecret`, Kubernetes 1.24+).
async fn service_account_secret(
    client: &Client,
    options: &RemoteSecretOptions,
    account: &str,
) -> Result<Secret, String> {
    let ns = &options.namespace;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    if let Err(e) = accounts.get(account).await {
        if !options.create_service_account || !is_not_found(&e) {
            return Err(format!(
                "failed retrieving service account {account}.{ns} required for creating the remote secret (hint: try \
                 installing a minimal Istio profile on the cluster first, or run with '--create-service-account=true'): {}",
                api_message(e)
            ));
        }
        create_reader_service_account(client, ns).await?;
        accounts.get(account).await.map_err(|e| {
            format!("failed retrieving service account {account}.{ns} after creating it: {}", api_message(e))
        })?;
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let references = |s: &Secret| {
        s.type_.as_deref() == Some(SERVICE_ACCOUNT_TOKEN_TYPE)
            && s.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SERVICE_ACCOUNT_NAME_ANNOTATION))
                .map(String::as_str)
                == Some(account)
    };
    if let Some(secret_name) = &options.secret_name {
        let secret = secrets
            .get(secret_name)
            .await
            .map_err(|e| format!("could not get specified secret {ns}/{secret_name}: {}", api_message(e)))?;
        if !references(&secret) {
            return Err(format!("secret {ns}/{secret_name} does not reference ServiceAccount {account}"));
        }
        return Ok(secret);
    }
    let list = secrets
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("failed listing secrets in {ns}: {}", api_message(e)))?;
    if let Some(found) = list.items.into_iter().find(|s| references(s)) {
        return Ok(found);
    }
    tracing::info!(account, "creating token secret for service account");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": format!("{account}-istio-remote-secret-token"),
            "annotations": {SERVICE_ACCOUNT_NAME_ANNOTATION: account},
        },
        "type": SERVICE_ACCOUNT_TOKEN_TYPE,
    }))
    .map_err(|e| e.to_string())?;
    secrets.create(&PostParams::default(), &secret).await.map_err(api_message)
}

/// `ca.crt` and `token` of the token Secret, read again up to `token_retries` times while missing
/// (istioctl's `waitForTokenData`).
async fn wait_for_token_data(
    client: &Client,
    mut secret: Secret,
    options: &RemoteSecretOptions,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &options.namespace);
    let mut tries = 0;
    loop {
        let data = secret.data.take().unwrap_or_default();
        let result = match (data.get("ca.crt"), data.get("token")) {
            (None, _) => Err("no \"ca.crt\" data found".to_string()),
            (_, None) => Err("no \"token\" data found".to_string()),
            (Some(ca), Some(token)) => return Ok((ca.0.clone(), token.0.clone())),
        };
        if tries == options.token_retries {
            return result;
        }
        if tries == 0 {
            tracing::info!("waiting for data to be populated in {name}");
        }
        tries += 1;
        tokio::time::sleep(options.token_wait).await;
        secret = secrets.get(&name).await.map_err(api_message)?;
    }
}

/// Labels of the reader objects (those of Istio's charts that select or describe them).
fn reader_labels() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        ("app", "istio-reader"),
        ("app.kubernetes.io/name", "istio-reader"),
        ("app.kubernetes.io/instance", "istio"),
        ("app.kubernetes.io/part-of", "istio"),
        ("release", "istio"),
    ])
}

/// The rules of Istio's `istio-reader-clusterrole-<ns>` (chart `istio-discovery`,
/// `templates/reader-clusterrole.yaml`, without the `istiodRemote` extras).
fn reader_rules() -> serde_json::Value {
    let read = json!(["get", "list", "watch"]);
    json!([
        {"apiGroups": ["config.istio.io", "security.istio.io", "networking.istio.io", "authentication.istio.io",
                       "rbac.istio.io", "telemetry.istio.io", "extensions.istio.io"],
         "resources": ["*"], "verbs": read},
        {"apiGroups": [""], "resources": ["endpoints", "pods", "services", "nodes", "replicationcontrollers",
                                          "namespaces", "secrets", "configmaps"], "verbs": read},
        {"apiGroups": ["networking.istio.io"], "verbs": ["get", "watch", "list"], "resources": ["workloadentries"]},
        {"apiGroups": ["networking.x-k8s.io", "gateway.networking.k8s.io"], "resources": ["gateways"],
         "verbs": ["get", "watch", "list"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": read},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read},
        {"apiGroups": ["multicluster.x-k8s.io"], "resources": ["serviceexports"],
         "verbs": ["get", "list", "watch", "create", "delete"]},
        {"apiGroups": ["multicluster.x-k8s.io"], "resources": ["serviceimports"], "verbs": read},
        {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": read},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ])
}

/// istioctl's `createServiceAccount`: the namespace when missing, then the reader ServiceAccount,
/// ClusterRole and ClusterRoleBinding `istio-reader-clusterrole-<ns>` as Istio's charts render them
/// (server-side applied).
async fn create_reader_service_account(client: &Client, ns: &str) -> Result<(), String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(ns).await.map_err(api_message)?.is_none() {
        let object: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).map_err(|e| e.to_string())?;
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .map_err(|e| format!("failed creating namespace {ns}: {}", api_message(e)))?;
    }
    let labels = reader_labels();
    let role = format!("istio-reader-clusterrole-{ns}");
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": READER_SERVICE_ACCOUNT, "namespace": ns, "labels": labels}});
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .patch(READER_SERVICE_ACCOUNT, &params, &Patch::Apply(&account))
        .await
        .map_err(api_message)?;
    let cluster_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role, "labels": labels}, "rules": reader_rules()});
    Api::<ClusterRole>::all(client.clone())
        .patch(&role, &params, &Patch::Apply(&cluster_role))
        .await
        .map_err(api_message)?;
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": role, "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": READER_SERVICE_ACCOUNT, "namespace": ns}]});
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(&role, &params, &Patch::Apply(&binding))
        .await
        .map_err(api_message)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_text_is_istioctls() {
        let kubeconfig =
            bearer_token_kubeconfig("c0", "https://10.0.0.1:6443", None, b"CA-DATA", "token-abc");
        assert_eq!(
            kubeconfig,
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: Q0EtREFUQQ==\n    server: \
             https://10.0.0.1:6443\n  name: c0\ncontexts:\n- context:\n    cluster: c0\n    user: c0\n  name: c0\n\
             current-context: c0\nkind: Config\nusers:\n- name: c0\n  user:\n    token: token-abc\n"
        );
        let secret = RemoteSecret {
            name: "istio-remote-secret-c0".into(),
            namespace: "istio-system".into(),
            cluster_name: "c0".into(),
            key: "c0".into(),
            kubeconfig,
            warning: None,
        };
        let text = secret.to_yaml();
        assert!(text.starts_with(
            "# This file is autogenerated, do not edit.\napiVersion: v1\nkind: Secret\nmetadata:\n  annotations:\n    \
             networking.istio.io/cluster: c0\n  labels:\n    istio/multiCluster: \"true\"\n  name: \
             istio-remote-secret-c0\n  namespace: istio-system\nstringData:\n  c0: |\n    apiVersion: v1\n"
        ));
        assert!(text.ends_with("        token: token-abc\n---\n"));
    }

    #[test]
    fn the_embedded_kubeconfig_passes_the_untrusted_kubeconfig_rules() {
        let kubeconfig = bearer_token_kubeconfig(
            "west",
            "https://api.west:6443",
            Some("kubernetes.default"),
            b"CA",
            "t.o.k",
        );
        let config = remote_kubeconfig(kubeconfig.as_bytes(), &InsecureKubeconfigOptions::default()).unwrap();
        assert_eq!(config.current_context.as_deref(), Some("west"));
        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.tls_server_name.as_deref(), Some("kubernetes.default"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
    }

    #[test]
    fn scalars_are_quoted_when_yaml_would_read_them_otherwise() {
        assert_eq!(scalar("c0"), "c0");
        assert_eq!(scalar("https://127.0.0.1:6443"), "https://127.0.0.1:6443");
        assert_eq!(scalar("3f2b1c9e-7d4a-4c1e-9a7b-2e8f6d5c4b3a"), "3f2b1c9e-7d4a-4c1e-9a7b-2e8f6d5c4b3a");
        assert_eq!(scalar("true"), "\"true\"");
        assert_eq!(scalar("123"), "\"123\"");
        assert_eq!(scalar("1e3"), "\"1e3\"");
        assert_eq!(scalar("2024-01-02"), "\"2024-01-02\"");
        assert_eq!(scalar("a b"), "\"a b\"");
        assert_eq!(scalar("-x"), "\"-x\"");
    }

    #[test]
    fn cluster_names_must_be_dns_labels() {
        assert!(is_dns1123_label("cluster-1"));
        assert!(!is_dns1123_label("Cluster1"));
        assert!(!is_dns1123_label("c_1"));
        assert!(!is_dns1123_label("-c"));
        assert!(!is_dns1123_label(""));
        assert!(!is_dns1123_label(&"a".repeat(64)));
    }

    #[test]
    fn loopback_servers_get_istioctls_warning() {
        assert!(
            loopback_warning("https://127.0.0.1:6443")
                .unwrap()
                .starts_with("server in Kubeconfig is https://127.0.0.1:6443. This is likely not reachable")
        );
        assert!(loopback_warning("https://localhost:6443").is_some());
        assert_eq!(loopback_warning("https://10.0.0.1:6443"), None);
    }
}
