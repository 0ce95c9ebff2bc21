//! Talking to the Kubernetes API server: connecting, watches with their retry backoff, facts about
//! the Istio CRDs (name, served version, Established), REST calls on Istio custom resources,
//! converting objects into [`Config`]s, and errors explained in plain words. The config source, the
//! service registry and the `meshpilot apply/get/delete` commands all go through here.
//!
//! Objects are handled as [`DynamicObject`]s addressed by the [`api`] schema registry (group, version,
//! plural), so no Rust type per CRD is needed and the server's JSON reaches meshpilot's own strict
//! parser ([`config::parse::parse_json`]) unchanged.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use api::{Kind, Schema};
use config::parse::{Finding, ParseOptions, parse_json};
use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions},
    config::{KubeConfigOptions, Kubeconfig},
    core::ApiResource,
    runtime::{WatchStreamExt, utils::Backoff, watcher},
};
use model::Config;

/// The field manager meshpilot names in server-side apply and writes.
pub const FIELD_MANAGER: &str = "meshpilot";

/// An error talking to the API server, with what it means for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeError {
    /// No usable client configuration (kubeconfig missing or broken, not in a cluster).
    #[error("cannot load the Kubernetes client configuration: {0}")]
    Config(String),
    /// The API server answered with an error status.
    #[error("{explanation}")]
    Api {
        /// HTTP status code (403, 404, 409, 422, …).
        code: u16,
        /// Kubernetes reason (`Forbidden`, `Conflict`, `AlreadyExists`, `NotFound`, `Invalid`, …).
        reason: String,
        /// The server's message.
        message: String,
        /// The server's message with what it means and what to do.
        explanation: String,
    },
    /// The API server could not be reached or the connection failed.
    #[error("cannot reach the Kubernetes API server: {0}")]
    Transport(String),
}

impl KubeError {
    /// The HTTP status of an API error (`None` for configuration and transport errors).
    pub fn code(&self) -> Option<u16> {
        match self {
            KubeError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// `true` for 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// `true` for a 409 that is a write conflict (not AlreadyExists).
    pub fn is_conflict(&self) -> bool {
        matches!(self, KubeError::Api { code: 409, reason, .. } if reason != "AlreadyExists")
    }

    /// `true` for 409 AlreadyExists.
    pub fn is_already_exists(&self) -> bool {
        matches!(self, KubeError::Api { reason, .. } if reason == "AlreadyExists")
    }

    /// `true` for 403 Forbidden (RBAC denied the request).
    pub fn is_forbidden(&self) -> bool {
        self.code() == Some(403)
    }

    /// Converts a kube-rs error. `action` says what was tried (`create VirtualService default/reviews`),
    /// for the explanation.
    pub fn from_kube(err: kube::Error, action: &str) -> KubeError {
        match err {
            kube::Error::Api(status) => {
                let code = status.code;
                let reason = status.reason.clone();
                let message = status.message.clone();
                let hint = match (code, reason.as_str()) {
                    (401, _) => {
                        "the API server did not accept the credentials in the kubeconfig (expired or wrong token \
                         or certificate); log in again or use another kubeconfig"
                    }
                    (403, _) => {
                        "Kubernetes RBAC denied it: the kubeconfig's user has no Role or ClusterRole allowing this \
                         verb on this resource in this namespace; ask a cluster admin for one, or use a kubeconfig \
                         with more rights"
                    }
                    (409, "AlreadyExists") => {
                        "the object already exists; use `meshpilot apply -f` to update it"
                    }
                    (409, _) => {
                        "the object was changed by someone else since it was read (its resourceVersion is stale): \
                         read it again (`meshpilot get KIND NAME -n NS -o yaml`), redo the change on that copy and \
                         retry, or remove metadata.resourceVersion from the file to overwrite unconditionally"
                    }
                    (404, _) => {
                        "not found (if the resource type itself is missing, the Istio CRDs are not installed in \
                         this cluster)"
                    }
                    (422, _) => "the API server's schema for this kind rejected the object",
                    (429 | 500..=599, _) => "the API server is overloaded or failing; retry later",
                    _ => "the API server refused the request",
                };
                let explanation = format!("{action}: {message} ({code} {reason}): {hint}");
                KubeError::Api { code, reason, message, explanation }
            }
            other => KubeError::Transport(format!("{action}: {other}")),
        }
    }
}

/// A client and the namespace of the kubeconfig's current context (`default` when it names none).
#[derive(Clone)]
pub struct Connection {
    /// The client.
    pub client: Client,
    /// The current context's namespace.
    pub default_namespace: String,
    /// The API server URL (for messages).
    pub server: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .field("default_namespace", &self.default_namespace)
            .finish_non_exhaustive()
    }
}

/// Loads the client configuration: `kubeconfig` if given, else `$KUBECONFIG`, `~/.kube/config`, then
/// the in-cluster service account (kubectl's order; the CLI commands' rule). The control plane uses
/// [`resolve_access`] and [`Cluster`] instead, which never read `~/.kube/config`.
///
/// # Errors
/// [`KubeError::Config`] naming the file or what is missing.
pub async fn client_config(kubeconfig: Option<&Path>) -> Result<kube::Config, KubeError> {
    match kubeconfig {
        Some(path) => kubeconfig_file(path).await,
        None => kube::Config::infer().await.map_err(|e| {
            KubeError::Config(format!(
                "{e} (give --kubeconfig PATH, set KUBECONFIG, or run in a pod with a service account)"
            ))
        }),
    }
}

/// The configuration of the kubeconfig file at `path` (its current context).
async fn kubeconfig_file(path: &Path) -> Result<kube::Config, KubeError> {
    let file = Kubeconfig::read_from(path)
        .map_err(|e| KubeError::Config(format!("kubeconfig {}: {e}", path.display())))?;
    kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| KubeError::Config(format!("kubeconfig {}: {e}", path.display())))
}

/// Connects (see [`client_config`]). Must run inside a tokio runtime, which the client's background
/// task then lives on.
///
/// # Errors
/// [`KubeError::Config`].
pub async fn connect(kubeconfig: Option<&Path>) -> Result<Connection, KubeError> {
    let config = client_config(kubeconfig).await?;
    connection(config)
}

/// The directory of a pod's service-account credentials (`token`, `ca.crt`, `namespace`), where
/// client-go's `rest.InClusterConfig` and kube-rs' `Config::incluster` read them.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// What [`resolve_access`] reads from the environment: `KUBECONFIG`, `KUBERNETES_SERVICE_HOST`,
/// `KUBERNETES_SERVICE_PORT` (empty values are unset, as client-go reads them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessEnv {
    /// `KUBECONFIG`: a kubeconfig path, or several separated by `:`.
    pub kubeconfig: Option<String>,
    /// `KUBERNETES_SERVICE_HOST`: the API server's address inside a pod.
    pub service_host: Option<String>,
    /// `KUBERNETES_SERVICE_PORT`: its port.
    pub service_port: Option<String>,
}

impl AccessEnv {
    /// The variables through `lookup` (the binary's one snapshot of the environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> AccessEnv {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        AccessEnv {
            kubeconfig: get("KUBECONFIG"),
            service_host: get("KUBERNETES_SERVICE_HOST"),
            service_port: get("KUBERNETES_SERVICE_PORT"),
        }
    }
}

/// Where the control plane's cluster access comes from (see [`resolve_access`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterAccess {
    /// The kubeconfig file given with `--kubeconfig`.
    Flag(PathBuf),
    /// The kubeconfig file named by `KUBECONFIG` (the first of its `:`-separated paths that exists).
    KubeconfigEnv(PathBuf),
    /// The pod's service account: the API server at `KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT`,
    /// the token and CA of [`SERVICE_ACCOUNT_DIR`] (client-go's `rest.InClusterConfig`).
    InCluster {
        /// `host:port` of the API server.
        server: String,
    },
}

impl std::fmt::Display for ClusterAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClusterAccess::Flag(path) => write!(f, "kubeconfig {} (--kubeconfig)", path.display()),
            ClusterAccess::KubeconfigEnv(path) => write!(f, "kubeconfig {} (KUBECONFIG)", path.display()),
            ClusterAccess::InCluster { server } => {
                write!(f, "in-cluster service account ({server}, {SERVICE_ACCOUNT_DIR})")
            }
        }
    }
}

/// The outcome of [`resolve_access`]: the access chosen, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Talk to the cluster this way.
    Access(ClusterAccess),
    /// No cluster (files only), and why.
    NoCluster(String),
}

/// How the control plane reaches its cluster, as client-go's loading rules resolve it for istiod
/// (`pkg/kube/util.go` `DefaultRestConfig`: explicit path, else `KUBECONFIG`'s files that exist, else
/// in-cluster), with one deliberate difference: `~/.kube/config` is never read, so a files-only
/// user on a laptop does not silently watch whatever cluster their kubectl points at.
///
/// 1. `flag` (`--kubeconfig`) → that file (whether or not it exists: reading it reports the error).
/// 2. `KUBECONFIG` naming a file that exists → that file (the first that exists of a `:`-separated list;
///    client-go merges them all, meshpilot takes one).
/// 3. `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` set and the service account's `token` and
///    `ca.crt` present → in-cluster. This includes `KUBECONFIG` naming a missing file, client-go's
///    fallback that Istio's chart relies on (`KUBECONFIG=/var/run/secrets/remote/config`, a Secret
///    that usually does not exist).
/// 4. Otherwise no cluster.
///
/// Pure: `exists` answers whether a file is present.
pub fn resolve_access(flag: Option<&Path>, env: &AccessEnv, exists: &dyn Fn(&Path) -> bool) -> Resolved {
    if let Some(path) = flag {
        return Resolved::Access(ClusterAccess::Flag(path.to_path_buf()));
    }
    let mut missing = Vec::new();
    if let Some(list) = &env.kubeconfig {
        for path in list.split(':').filter(|p| !p.is_empty()).map(PathBuf::from) {
            if exists(&path) {
                return Resolved::Access(ClusterAccess::KubeconfigEnv(path));
            }
            missing.push(path.display().to_string());
        }
    }
    let dir = Path::new(SERVICE_ACCOUNT_DIR);
    let credentials = ["token", "ca.crt"].iter().all(|f| exists(&dir.join(f)));
    let kubeconfig_note = if missing.is_empty() {
        String::new()
    } else {
        format!("KUBECONFIG names no existing file ({}); ", missing.join(", "))
    };
    match (&env.service_host, &env.service_port) {
        (Some(host), Some(port)) if credentials => {
            let server =
                if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
            Resolved::Access(ClusterAccess::InCluster { server })
        }
        (Some(_), Some(_)) => Resolved::NoCluster(format!(
            "{kubeconfig_note}KUBERNETES_SERVICE_HOST is set but {SERVICE_ACCOUNT_DIR} has no token and ca.crt"
        )),
        _ => Resolved::NoCluster(format!(
            "{kubeconfig_note}no --kubeconfig, and not in a pod (KUBERNETES_SERVICE_HOST/PORT unset); \
             ~/.kube/config is not read"
        )),
    }
}

/// The control plane's cluster: the [`ClusterAccess`] chosen and its loaded client configuration.
/// Cheap to clone; every part of `meshpilot discovery` that talks to the cluster takes one.
#[derive(Clone)]
pub struct Cluster {
    /// Where the access comes from.
    pub access: ClusterAccess,
    config: kube::Config,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("access", &self.access).finish_non_exhaustive()
    }
}

impl Cluster {
    /// Loads the configuration of `access` (the kubeconfig file, or the service account as kube-rs'
    /// `Config::incluster_env`: `KUBERNETES_SERVICE_HOST`/`PORT`, token re-read as it rotates).
    ///
    /// # Errors
    /// [`KubeError::Config`] naming the file, or what the in-cluster credentials lack.
    pub async fn load(access: ClusterAccess) -> Result<Cluster, KubeError> {
        let config = match &access {
            ClusterAccess::Flag(path) | ClusterAccess::KubeconfigEnv(path) => kubeconfig_file(path).await?,
            ClusterAccess::InCluster { .. } => kube::Config::incluster_env()
                .map_err(|e| KubeError::Config(format!("in-cluster service account: {e}")))?,
        };
        Ok(Cluster { access, config })
    }

    /// The client configuration.
    pub fn config(&self) -> kube::Config {
        self.config.clone()
    }

    /// A new client (inside a tokio runtime).
    ///
    /// # Errors
    /// [`KubeError::Config`] when the TLS or auth settings cannot be used.
    pub fn connect(&self) -> Result<Connection, KubeError> {
        connection(self.config())
    }
}

/// A [`Connection`] from a loaded configuration (inside a tokio runtime).
///
/// # Errors
/// [`KubeError::Config`] when the TLS or auth settings cannot be used.
pub fn connection(config: kube::Config) -> Result<Connection, KubeError> {
    let default_namespace = config.default_namespace.clone();
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|e| KubeError::Config(e.to_string()))?;
    Ok(Connection { client, default_namespace, server })
}

/// The REST coordinates of `schema` at `version` (one of its served versions).
pub fn api_resource(schema: &Schema, version: &str) -> ApiResource {
    ApiResource {
        group: schema.group.to_string(),
        version: version.to_string(),
        api_version: format!("{}/{version}", schema.group),
        kind: schema.kind.as_str().to_string(),
        plural: schema.plural.to_string(),
    }
}

/// The API of `kind` (at its current version) in `namespace`, or across all namespaces for `None`.
pub fn kind_api(client: &Client, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    let schema = kind.schema();
    let resource = api_resource(schema, schema.version);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// The name of the CustomResourceDefinition of `schema` (`virtualservices.networking.istio.io`).
pub fn crd_name(schema: &Schema) -> String {
    format!("{}.{}", schema.plural, schema.group)
}

/// The served version to watch a kind at: its current version when served, else the first served alias.
pub fn served_version(schema: &Schema, crd: &CustomResourceDefinition) -> Option<String> {
    let served: Vec<&str> = crd.spec.versions.iter().filter(|v| v.served).map(|v| v.name.as_str()).collect();
    if served.contains(&schema.version) {
        return Some(schema.version.to_string());
    }
    schema.version_aliases.iter().find(|a| served.contains(a)).map(|a| (*a).to_string())
}

/// `true` when the CRD has the condition `Established=True` (its API is served).
pub fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
}

/// `metadata.resourceVersion` of an object read as JSON (empty when missing).
pub fn resource_version(object: &serde_json::Value) -> String {
    object["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string()
}

/// Exponential backoff for watch retries: `initial`, doubling, capped at `max`; reset after a success.
pub struct WatchBackoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let current = self.next;
        self.next = (self.next * 2).min(self.max);
        Some(current)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// A [`WatchBackoff`] from `(initial, max)`.
pub fn watch_backoff((initial, max): (Duration, Duration)) -> WatchBackoff {
    WatchBackoff { initial, max, next: initial }
}

/// A kube-runtime watcher on `api` (all objects it addresses, default list/watch settings) retried
/// with [`watch_backoff`]`(backoff)`.
pub fn watch<K>(api: Api<K>, backoff: (Duration, Duration)) -> BoxStream<'static, WatchEvent<K>>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    watcher(api, watcher::Config::default()).backoff(watch_backoff(backoff)).boxed()
}

/// One item of a [`watch`] stream.
pub type WatchEvent<K> = Result<watcher::Event<K>, watcher::Error>;

/// Finds the kind a command-line word means: the kind name, its plural or singular, or one of Istio's
/// CRD short names (`vs`, `dr`, `gw`, `se`, `we`, `wg`, `ap`, `ra`, `pa`), case-insensitively, with an
/// optional `.group` suffix (`virtualservices.networking.istio.io`).
pub fn kind_from_word(word: &str) -> Option<Kind> {
    let lower = word.to_ascii_lowercase();
    let (name, group) = match lower.split_once('.') {
        Some((n, g)) => (n.to_string(), Some(g.to_string())),
        None => (lower.clone(), None),
    };
    let short = |kind: Kind| -> &'static [&'static str] {
        match kind {
            Kind::VirtualService => &["vs"],
            Kind::DestinationRule => &["dr"],
            Kind::Gateway => &["gw"],
            Kind::ServiceEntry => &["se"],
            Kind::WorkloadEntry => &["we"],
            Kind::WorkloadGroup => &["wg"],
            Kind::AuthorizationPolicy => &["ap"],
            Kind::RequestAuthentication => &["ra"],
            Kind::PeerAuthentication => &["pa"],
            _ => &[],
        }
    };
    Kind::ALL.iter().copied().find(|kind| {
        let schema = kind.schema();
        let kind_lower = kind.as_str().to_ascii_lowercase();
        let matches = name == kind_lower || name == schema.plural || short(*kind).contains(&name.as_str());
        matches && group.as_deref().is_none_or(|g| g == schema.group)
    })
}

/// Converts an object read from the API server into a [`Config`] through the same parsing and
/// validation as config files.
///
/// # Errors
/// The findings that make the object invalid (each with a field path and reason).
pub fn to_config(object: &serde_json::Value, options: &ParseOptions) -> Result<Config, Vec<Finding>> {
    let mut docs = parse_json("kubernetes", object, options);
    if docs.len() != 1 {
        return Err(vec![Finding {
            path: String::new(),
            line: 0,
            message: format!("expected one object, found {}", docs.len()),
        }]);
    }
    let doc = docs.remove(0);
    match doc.config {
        Some(config) if doc.errors.is_empty() => Ok(config),
        _ if !doc.errors.is_empty() => Err(doc.errors),
        _ => Err(vec![Finding {
            path: String::new(),
            line: 0,
            message: doc.skipped.unwrap_or_else(|| "not an Istio config object".into()),
        }]),
    }
}

/// The object to send for `config`: Istio's JSON with `metadata` reduced to what a client sets
/// (name, namespace, labels, annotations, resourceVersion when non-empty).
pub fn to_object(config: &Config) -> serde_json::Value {
    let mut doc = config.to_json();
    if let Some(meta) = doc.get_mut("metadata").and_then(serde_json::Value::as_object_mut) {
        meta.remove("generation");
        meta.remove("creationTimestamp");
    }
    doc
}

fn dynamic(value: serde_json::Value, action: &str) -> Result<DynamicObject, KubeError> {
    serde_json::from_value(value)
        .map_err(|e| KubeError::Config(format!("{action}: the object is not a Kubernetes object: {e}")))
}

fn object_json(object: &DynamicObject) -> serde_json::Value {
    serde_json::to_value(object).unwrap_or_default()
}

fn describe(kind: Kind, namespace: &str, name: &str) -> String {
    format!("{kind} {namespace}/{name}")
}

/// Creates `object` (JSON with `apiVersion`, `kind`, `metadata.name`/`namespace`). Returns the stored
/// object.
///
/// # Errors
/// [`KubeError`]; AlreadyExists when it exists.
pub async fn create(
    client: &Client,
    kind: Kind,
    namespace: &str,
    object: serde_json::Value,
) -> Result<serde_json::Value, KubeError> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let action = format!("create {}", describe(kind, namespace, &name));
    let object = dynamic(object, &action)?;
    let pp = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    kind_api(client, kind, Some(namespace))
        .create(&pp, &object)
        .await
        .map(|o| object_json(&o))
        .map_err(|e| KubeError::from_kube(e, &action))
}

/// Server-side apply of `object` with field manager [`FIELD_MANAGER`] (kubectl `apply --server-side`);
/// `force` takes over fields other managers own. A `metadata.resourceVersion` in the object makes the
/// apply conditional on it (a Conflict when stale).
///
/// # Errors
/// [`KubeError`].
pub async fn apply(
    client: &Client,
    kind: Kind,
    namespace: &str,
    object: serde_json::Value,
    force: bool,
) -> Result<serde_json::Value, KubeError> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let action = format!("apply {}", describe(kind, namespace, &name));
    let mut pp = PatchParams::apply(FIELD_MANAGER);
    pp.force = force;
    kind_api(client, kind, Some(namespace))
        .patch(&name, &pp, &Patch::Apply(&object))
        .await
        .map(|o| object_json(&o))
        .map_err(|e| KubeError::from_kube(e, &action))
}

/// Replaces an object (PUT); the object's `metadata.resourceVersion` must be the current one.
///
/// # Errors
/// [`KubeError`]; a Conflict when the resource version is stale.
pub async fn replace(
    client: &Client,
    kind: Kind,
    namespace: &str,
    object: serde_json::Value,
) -> Result<serde_json::Value, KubeError> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let action = format!("update {}", describe(kind, namespace, &name));
    let object = dynamic(object, &action)?;
    let pp = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    kind_api(client, kind, Some(namespace))
        .replace(&name, &pp, &object)
        .await
        .map(|o| object_json(&o))
        .map_err(|e| KubeError::from_kube(e, &action))
}

/// Replaces an object's status subresource (PUT `/status`); `object` carries the current
/// `metadata.resourceVersion` and the new `status`.
///
/// # Errors
/// [`KubeError`]; a Conflict when the resource version is stale.
pub async fn replace_status(
    client: &Client,
    kind: Kind,
    namespace: &str,
    object: serde_json::Value,
) -> Result<serde_json::Value, KubeError> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let action = format!("update the status of {}", describe(kind, namespace, &name));
    let object = dynamic(object, &action)?;
    let pp = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    kind_api(client, kind, Some(namespace))
        .replace_status(&name, &pp, &object)
        .await
        .map(|o| object_json(&o))
        .map_err(|e| KubeError::from_kube(e, &action))
}

/// Reads one object; `None` when it does not exist.
///
/// # Errors
/// [`KubeError`] other than Not Found.
pub async fn get(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<Option<serde_json::Value>, KubeError> {
    let action = format!("get {}", describe(kind, namespace, name));
    kind_api(client, kind, Some(namespace))
        .get_opt(name)
        .await
        .map(|o| o.as_ref().map(object_json))
        .map_err(|e| KubeError::from_kube(e, &action))
}

/// Lists the objects of `kind` in `namespace` (all namespaces for `None`), as the server orders them
/// (by namespace and name).
///
/// # Errors
/// [`KubeError`].
pub async fn list(
    client: &Client,
    kind: Kind,
    namespace: Option<&str>,
) -> Result<Vec<serde_json::Value>, KubeError> {
    let action = match namespace {
        Some(ns) => format!("list {kind} in namespace {ns}"),
        None => format!("list {kind} in all namespaces"),
    };
    kind_api(client, kind, namespace)
        .list(&ListParams::default())
        .await
        .map(|l| l.items.iter().map(object_json).collect())
        .map_err(|e| KubeError::from_kube(e, &action))
}

/// The Kubernetes resources Istio's analyzers read besides Istio config, as `(apiVersion, kind,
/// plural)`: what `istioctl analyze` and istiod's in-cluster analysis (`PILOT_ENABLE_ANALYSIS`) list.
pub const ANALYSIS_RESOURCES: &[(&str, &str, &str)] = &[
    ("v1", "Namespace", "namespaces"),
    ("v1", "Service", "services"),
    ("v1", "Pod", "pods"),
    ("v1", "Node", "nodes"),
    ("v1", "Secret", "secrets"),
    ("v1", "ConfigMap", "configmaps"),
    ("apps/v1", "Deployment", "deployments"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions"),
    ("gateway.networking.k8s.io/v1", "Gateway", "gateways"),
    ("gateway.networking.k8s.io/v1", "GatewayClass", "gatewayclasses"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes"),
];

/// Lists every object of [`ANALYSIS_RESOURCES`] in all namespaces, as JSON with `apiVersion` and
/// `kind` set. Resources the server does not serve (Gateway API not installed) are skipped.
///
/// # Errors
/// [`KubeError`] of the first list that fails other than Not Found.
pub async fn list_analysis_resources(client: &Client) -> Result<Vec<serde_json::Value>, KubeError> {
    let mut objects = Vec::new();
    for (api_version, kind, plural) in ANALYSIS_RESOURCES {
        objects.extend(list_resource(client, api_version, kind, plural, None).await?.unwrap_or_default());
    }
    Ok(objects)
}

/// Lists the objects of any resource given by its REST coordinates (`apps/v1`, `Deployment`,
/// `deployments`) in `namespace` (all namespaces, or a cluster-scoped resource, for `None`), as JSON
/// with `apiVersion` and `kind` set. `Ok(None)` when the server does not serve the resource (404), so
/// callers can list optional kinds (Gateway API, a CRD not installed).
///
/// # Errors
/// [`KubeError`] other than Not Found.
pub async fn list_resource(
    client: &Client,
    api_version: &str,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
) -> Result<Option<Vec<serde_json::Value>>, KubeError> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: plural.to_string(),
    };
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(Some(
            list.items
                .iter()
                .map(|o| {
                    let mut v = object_json(o);
                    if let Some(map) = v.as_object_mut() {
                        map.insert("apiVersion".into(), api_version.into());
                        map.insert("kind".into(), kind.into());
                    }
                    v
                })
                .collect(),
        )),
        Err(e) => {
            let err = KubeError::from_kube(e, &format!("list {plural}.{group}"));
            if err.is_not_found() { Ok(None) } else { Err(err) }
        }
    }
}

/// Deletes one object; with `resource_version`, only if it is the current one (a Conflict otherwise).
///
/// # Errors
/// [`KubeError`]; Not Found when it does not exist.
pub async fn delete(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    resource_version: Option<&str>,
) -> Result<(), KubeError> {
    let action = format!("delete {}", describe(kind, namespace, name));
    let dp = DeleteParams {
        preconditions: resource_version
            .map(|rv| Preconditions { resource_version: Some(rv.to_string()), uid: None }),
        ..DeleteParams::default()
    };
    kind_api(client, kind, Some(namespace))
        .delete(name, &dp)
        .await
        .map(|_| ())
        .map_err(|e| KubeError::from_kube(e, &action))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`resolve_access`] with `files` present.
    fn resolve(flag: Option<&str>, env: &[(&str, &str)], files: &[&str]) -> Resolved {
        let env = AccessEnv::from_lookup(|name| {
            env.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_string())
        });
        let present = |path: &Path| files.iter().any(|f| Path::new(f) == path);
        resolve_access(flag.map(Path::new), &env, &present)
    }

    const TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
    const CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
    const POD: &[(&str, &str)] =
        &[("KUBERNETES_SERVICE_HOST", "10.0.0.1"), ("KUBERNETES_SERVICE_PORT", "443")];

    #[test]
    fn the_flag_wins_whatever_else_is_there() {
        let env = [POD, &[("KUBECONFIG", "/k")]].concat();
        assert_eq!(
            resolve(Some("/flag"), &env, &["/k", TOKEN, CA]),
            Resolved::Access(ClusterAccess::Flag("/flag".into()))
        );
        // Even a missing file: reading it reports the error (istiod fails too).
        assert_eq!(resolve(Some("/flag"), &[], &[]), Resolved::Access(ClusterAccess::Flag("/flag".into())));
    }

    #[test]
    fn kubeconfig_env_naming_an_existing_file_comes_next() {
        let env = [POD, &[("KUBECONFIG", "/missing:/k2")]].concat();
        assert_eq!(
            resolve(None, &env, &["/k2", TOKEN, CA]),
            Resolved::Access(ClusterAccess::KubeconfigEnv("/k2".into()))
        );
    }

    #[test]
    fn a_missing_kubeconfig_falls_back_to_the_service_account_as_client_go() {
        // Istio's chart: KUBECONFIG=/var/run/secrets/remote/config, a Secret that usually is absent.
        let env = [POD, &[("KUBECONFIG", "/var/run/secrets/remote/config")]].concat();
        assert_eq!(
            resolve(None, &env, &[TOKEN, CA]),
            Resolved::Access(ClusterAccess::InCluster { server: "10.0.0.1:443".into() })
        );
        let v6 = [("KUBERNETES_SERVICE_HOST", "fd00::1"), ("KUBERNETES_SERVICE_PORT", "6443")];
        assert_eq!(
            resolve(None, &v6, &[TOKEN, CA]),
            Resolved::Access(ClusterAccess::InCluster { server: "[fd00::1]:6443".into() })
        );
    }

    #[test]
    fn without_credentials_or_pod_variables_there_is_no_cluster() {
        // The service account's files without the variables, and the variables without the files.
        for (env, files) in [
            (&[][..], &[TOKEN, CA][..]),
            (POD, &[TOKEN][..]),
            (&[("KUBERNETES_SERVICE_HOST", "h")][..], &[TOKEN, CA][..]),
        ] {
            let Resolved::NoCluster(reason) = resolve(None, env, files) else { panic!("{env:?} {files:?}") };
            assert!(!reason.is_empty());
        }
        let env = [("KUBECONFIG", "/gone"), ("HOME", "/root")];
        let Resolved::NoCluster(reason) = resolve(None, &env, &["/root/.kube/config"]) else { panic!() };
        assert!(reason.contains("/gone") && reason.contains("~/.kube/config is not read"), "{reason}");
        // Empty values are unset.
        let empty = [("KUBECONFIG", ""), ("KUBERNETES_SERVICE_HOST", ""), ("KUBERNETES_SERVICE_PORT", "")];
        assert!(matches!(resolve(None, &empty, &[TOKEN, CA, ""]), Resolved::NoCluster(_)));
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_resets() {
        let mut b = WatchBackoff {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(500),
            next: Duration::from_millis(100),
        };
        let got: Vec<u128> = b.by_ref().take(5).map(|d| d.as_millis()).collect();
        assert_eq!(got, [100, 200, 400, 500, 500]);
        b.reset();
        assert_eq!(b.next(), Some(Duration::from_millis(100)));
    }

    #[test]
    fn words_name_kinds_like_kubectl() {
        assert_eq!(kind_from_word("vs"), Some(Kind::VirtualService));
        assert_eq!(kind_from_word("VirtualService"), Some(Kind::VirtualService));
        assert_eq!(kind_from_word("destinationrules"), Some(Kind::DestinationRule));
        assert_eq!(kind_from_word("gateways.networking.istio.io"), Some(Kind::Gateway));
        assert_eq!(kind_from_word("gateways.gateway.networking.k8s.io"), Some(Kind::KubernetesGateway));
        assert_eq!(kind_from_word("telemetry"), Some(Kind::Telemetry));
        assert_eq!(kind_from_word("pods"), None);
    }

    #[test]
    fn api_errors_are_explained() {
        let status = kube::core::Status::failure(
            "virtualservices.networking.istio.io \"r\" is forbidden",
            "Forbidden",
        )
        .with_code(403);
        let err = KubeError::from_kube(kube::Error::Api(Box::new(status)), "create VirtualService default/r");
        assert!(err.is_forbidden() && !err.is_conflict());
        let text = err.to_string();
        assert!(text.starts_with("create VirtualService default/r: virtualservices"), "{text}");
        assert!(text.contains("RBAC denied it"), "{text}");

        let status = kube::core::Status::failure("the object has been modified", "Conflict").with_code(409);
        let err = KubeError::from_kube(kube::Error::Api(Box::new(status)), "update x");
        assert!(err.is_conflict() && !err.is_already_exists());
        assert!(err.to_string().contains("resourceVersion is stale"), "{err}");
    }

    #[test]
    fn objects_sent_carry_no_server_fields() {
        let value = serde_json::json!({
            "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "r", "namespace": "ns", "resourceVersion": "9", "generation": 3,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"hosts": ["r"], "http": [{"route": [{"destination": {"host": "r"}}]}]},
        });
        let config = to_config(&value, &ParseOptions::default()).unwrap();
        let sent = to_object(&config);
        assert_eq!(
            sent["metadata"],
            serde_json::json!({"name": "r", "namespace": "ns", "resourceVersion": "9"})
        );
        assert_eq!(sent["spec"]["hosts"][0], "r");
    }
}
