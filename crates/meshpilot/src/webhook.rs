//! `meshpilot discovery --https-addr`: Istio's validating admission webhook (istiod's 15017,
//! `POST /validate`, served by crate `meshpilot-webhook`) and, with cluster access, the
//! ValidatingWebhookConfigurations that send the API server's reviews to it
//! (`kube_source::webhook_config`). See docs/CONFIG-FEEDBACK.md, "Validating webhook".

use std::{
    path::Path,
    sync::{Arc, Mutex, PoisonError, RwLock},
};

use ::webhook::{Routes, WebhookTls, serve};
use config::parse::ParseOptions;
use kube_source::webhook_config::{WebhookClient, WebhookConfigOptions};
use security::IstioCa;
use serde_json::Value;
use tokio::task::JoinHandle;
use tracing::info;

/// The webhook's flags of `meshpilot discovery`.
#[derive(clap::Args, Debug)]
pub struct WebhookArgs {
    /// HTTPS address of the validating admission webhook (Istio's --httpsAddr, :15017): `POST
    /// /validate` with AdmissionReview v1/v1beta1, the same validation as `meshpilot validate`.
    /// Default :15017 (istiod's) when the CA has a place for its root (cluster access, --ca-dir, a
    /// plugged-in CA), else off; `--httpsAddr=""` turns it off. With cluster access, its certificate
    /// comes from the control plane's
    /// CA (plugged-in, else the root in the secret istio-ca-secret that every replica shares), the
    /// ValidatingWebhookConfigurations labelled istio.io/rev=REVISION get that root patched in as
    /// caBundle (created as Istio's charts render them when none exists) and are switched to
    /// failurePolicy Fail once the webhook rejects a probe. A root of --ca-dir is not patched in (other
    /// replicas do not share it).
    #[arg(long = "httpsAddr", visible_alias = "https-addr", value_name = "ADDR")]
    pub https_addr: Option<String>,

    /// The URL the API server should call for reviews when meshpilot runs outside the cluster (Istio
    /// chart's base.validationURL), e.g. https://127.0.0.1:15017/validate; its host is added to the
    /// serving certificate. Without it, configurations created by meshpilot name the istiod Service
    /// of POD_NAMESPACE.
    #[arg(long = "validation-webhook-url", value_name = "URL")]
    pub url: Option<String>,
}

/// The host of an `https://HOST[:PORT][/PATH]` URL (`[v6]` brackets removed).
fn url_host(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("https://").ok_or_else(|| {
        format!("invalid --validation-webhook-url {url:?}: the API server calls webhooks over https://")
    })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    if host.is_empty() {
        return Err(format!("invalid --validation-webhook-url {url:?}: no host"));
    }
    Ok(host.to_string())
}

/// What [`start`] needs from `meshpilot discovery`.
pub struct Context<'a> {
    /// The control plane's cluster, if any.
    pub cluster: Option<&'a kube_source::Cluster>,
    /// `--revision`.
    pub revision: Option<&'a str>,
    /// `--domain`.
    pub domain: &'a str,
    /// The mesh's trust domain (names the in-memory root).
    pub trust_domain: &'a str,
    /// `POD_NAMESPACE` (`istio-system`): names the serving certificate's DNS names.
    pub pod_namespace: &'a str,
    /// The control plane's CA (the secure port's, or with a cluster the root it would use); `None`
    /// makes a root in memory, whose caBundle is never patched into a cluster.
    pub ca: Option<Arc<IstioCa>>,
    /// The sidecar injector (`/inject`), when an injection config was found.
    pub injector: Option<Arc<inject::injector::Injector>>,
    /// Stops everything started.
    pub shutdown: model::Shutdown,
}

/// istiod's injection directory (`InjectionDirectory`, relative to the working directory; the
/// chart mounts nothing there, so a cluster install reads the ConfigMap instead).
pub const INJECTION_DIRECTORY: &str = "./var/lib/istio/inject";

/// The injection config's `config` and `values` texts parsed.
fn parse_injection_config(
    config_text: &str,
    values_text: &str,
) -> Result<(inject::config::InjectConfig, inject::config::Values), String> {
    let config = inject::config::InjectConfig::parse(config_text).map_err(|e| format!("config: {e}"))?;
    let values = inject::config::Values::parse(values_text).map_err(|e| format!("values: {e}"))?;
    Ok((config, values))
}

/// The injector's state from the texts of its `config` and `values` (the files or the ConfigMap's
/// keys) and the mesh config's YAML (`--meshConfig`).
///
/// # Errors
/// A config or template that does not parse, bad values or mesh config (without naming the source;
/// callers add it).
pub fn injector_state(
    config_text: &str,
    values_text: &str,
    mesh_text: &str,
    revision: Option<&str>,
    native_sidecars: inject::injector::NativeSidecars,
) -> Result<inject::injector::InjectorState, String> {
    let (config, values) = parse_injection_config(config_text, values_text)?;
    let mesh = inject::mesh::apply_mesh_config(mesh_text).map_err(|e| format!("mesh config: {e}"))?;
    Ok(inject::injector::InjectorState {
        config: Arc::new(config),
        values,
        mesh,
        revision: revision.filter(|r| *r != "default").unwrap_or_default().to_string(),
        native_sidecars,
    })
}

/// The key of the injection config's section in `/debug/configstatusz`'s `mesh` object.
pub const STATUS_KEY: &str = "injectionConfig";

/// The counter of refused injection configs (files or ConfigMap).
pub const ERRORS_METRIC: &str = "meshpilot_injector_config_errors";

/// Where the injector's `config` and `values` come from (the files or the ConfigMap) and how their
/// changes went: a changed pair replaces the injector's templates and values (its mesh config, kept
/// current by [`follow_mesh`], stays); one that does not parse, or cannot be read, is logged,
/// counted in [`ERRORS_METRIC`] and shown in `/debug/configstatusz` (`mesh.injectionConfig`:
/// `source`, `lastError`, `errors`), and the last good one stays in force.
pub struct InjectionConfigSource {
    source: String,
    injector: Arc<inject::injector::Injector>,
    status: Arc<RwLock<Value>>,
    state: Mutex<SourceState>,
}

#[derive(Default)]
struct SourceState {
    /// The texts last offered (`None` after a read failure).
    seen: Option<(String, String)>,
    error: Option<String>,
    errors: u64,
}

impl InjectionConfigSource {
    /// The source `source` (for the logs and configstatusz) of `injector`, whose state came from
    /// the texts `seen`; writes its section into `status` (configstatusz's `mesh` object).
    pub fn new(
        source: String,
        injector: Arc<inject::injector::Injector>,
        seen: (String, String),
        status: Arc<RwLock<Value>>,
    ) -> Arc<InjectionConfigSource> {
        let state = SourceState { seen: Some(seen), ..SourceState::default() };
        let keeper = InjectionConfigSource { source, injector, status, state: Mutex::new(state) };
        keeper.publish(&keeper.lock());
        Arc::new(keeper)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SourceState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `config_text` and `values_text` when they differ from the last offered and parse;
    /// otherwise reports them (see the type). Returns whether they were applied.
    pub fn offer(&self, config_text: &str, values_text: &str) -> bool {
        let mut state = self.lock();
        let texts = (config_text.to_string(), values_text.to_string());
        if state.seen.as_ref() == Some(&texts) {
            return false;
        }
        state.seen = Some(texts);
        let applied = match parse_injection_config(config_text, values_text) {
            Ok((config, values)) => {
                self.injector.update(|current| inject::injector::InjectorState {
                    config: Arc::new(config),
                    values,
                    mesh: current.mesh.clone(),
                    revision: current.revision.clone(),
                    native_sidecars: current.native_sidecars,
                });
                info!(source = %self.source, "injection config loaded");
                state.error = None;
                true
            }
            Err(reason) => {
                self.count_error(&mut state, reason);
                false
            }
        };
        self.publish(&state);
        applied
    }

    /// Reports that the source could not be read (`reason`), once per distinct reason; the last good
    /// config stays in force and the next texts read are offered again.
    pub fn unreadable(&self, reason: String) {
        let mut state = self.lock();
        if state.seen.is_none() && state.error.as_ref() == Some(&reason) {
            return;
        }
        state.seen = None;
        self.count_error(&mut state, reason);
        self.publish(&state);
    }

    fn count_error(&self, state: &mut SourceState, reason: String) {
        state.errors += 1;
        metrics::counter!(ERRORS_METRIC).increment(1);
        tracing::error!(source = %self.source, %reason, "injection config not applied; the last good one stays in force");
        state.error = Some(reason);
    }

    fn publish(&self, state: &SourceState) {
        let section = serde_json::json!({
            "source": self.source,
            "lastError": state.error,
            "errors": state.errors,
        });
        let mut status = self.status.write().unwrap_or_else(PoisonError::into_inner);
        if !status.is_object() {
            *status = serde_json::json!({});
        }
        status[STATUS_KEY] = section;
    }
}

/// `dir/config` and `dir/values` (empty when absent).
fn read_injection_files(dir: &Path) -> Result<(String, String), String> {
    let read =
        |path: &Path| api::yaml::read_config_text(path).map_err(|e| format!("{}: {e}", path.display()));
    let values_path = dir.join("values");
    let values_text = if values_path.exists() { read(&values_path)? } else { String::new() };
    Ok((read(&dir.join("config"))?, values_text))
}

/// A sidecar injector and the task that keeps its config current.
pub type InjectorAndTask = (Arc<inject::injector::Injector>, JoinHandle<()>);

/// What an injector source needs besides where it reads.
pub struct InjectorSetup<'a> {
    /// `--revision`.
    pub revision: Option<&'a str>,
    /// `ENABLE_NATIVE_SIDECARS`.
    pub native_sidecars: inject::injector::NativeSidecars,
    /// `/debug/configstatusz`'s `mesh` object, where the source reports
    /// ([`InjectionConfigSource`]).
    pub status: Arc<RwLock<Value>>,
    /// Stops the watch.
    pub shutdown: model::Shutdown,
}

/// The sidecar injector from `dir/config` and `dir/values` (istiod's file watcher source), `None`
/// when `dir/config` does not exist, and the task that keeps it current as istiod's file watcher
/// does: the directory is watched (so a ConfigMap mount's `..data` swap is seen; re-read every
/// minute too), and a change is applied or refused by [`InjectionConfigSource`]. `mesh_text` is the
/// mesh config's YAML at start.
///
/// # Errors
/// A file that cannot be read, a config or template that does not parse, bad values or mesh
/// config at start: each names the file.
pub fn injector_from_files(
    dir: &Path,
    mesh_text: &str,
    setup: InjectorSetup<'_>,
) -> Result<Option<InjectorAndTask>, String> {
    if !dir.join("config").exists() {
        return Ok(None);
    }
    let (config_text, values_text) = read_injection_files(dir)?;
    let state = injector_state(&config_text, &values_text, mesh_text, setup.revision, setup.native_sidecars)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let injector = Arc::new(inject::injector::Injector::new(state));
    let source = InjectionConfigSource::new(
        format!("files {}", dir.display()),
        injector.clone(),
        (config_text, values_text),
        setup.status,
    );
    let options = config::watch::WatchOptions {
        recursive: false,
        settle: std::time::Duration::from_millis(100),
        recheck: Some(std::time::Duration::from_secs(60)),
        what: "injection config",
    };
    let dir = dir.to_path_buf();
    let task = tokio::spawn(async move {
        config::watch::watch_dirs(std::slice::from_ref(&dir), &options, setup.shutdown, || {
            match read_injection_files(&dir) {
                Ok((config_text, values_text)) => {
                    source.offer(&config_text, &values_text);
                }
                Err(reason) => source.unreadable(reason),
            }
        })
        .await;
    });
    Ok(Some((injector, task)))
}

/// The injector ConfigMap's name for a revision (istiod's `getInjectorConfigMapName`).
pub fn injector_configmap_name(revision: Option<&str>) -> String {
    match revision.filter(|r| !r.is_empty() && *r != "default") {
        Some(rev) => format!("istio-sidecar-injector-{rev}"),
        None => "istio-sidecar-injector".to_string(),
    }
}

/// The sidecar injector from the ConfigMap `istio-sidecar-injector[-<rev>]` in `namespace` (istiod's
/// source when the files are absent, as with Istio's chart), and the task that keeps it current:
/// a changed ConfigMap is applied or refused by [`InjectionConfigSource`]. `None` when the
/// ConfigMap does not exist at start (istiod: "Skipping sidecar injector, template not found").
///
/// # Errors
/// The API server cannot be reached, or the ConfigMap does not parse at start.
pub async fn injector_from_cluster(
    cluster: &kube_source::Cluster,
    namespace: &str,
    mesh_text: &str,
    setup: InjectorSetup<'_>,
) -> Result<Option<InjectorAndTask>, String> {
    let connection = cluster.connect().map_err(|e| e.to_string())?;
    let name = injector_configmap_name(setup.revision);
    let Some(data) = kube_source::configmap_watch::get(&connection.client, namespace, &name).await? else {
        info!(configmap = %format!("{namespace}/{name}"), "no injection config: sidecar injection is off");
        return Ok(None);
    };
    let texts = |data: &std::collections::BTreeMap<String, String>| {
        let text = |key: &str| data.get(key).cloned().unwrap_or_default();
        (text("config"), text("values"))
    };
    let (config_text, values_text) = texts(&data);
    let state = injector_state(&config_text, &values_text, mesh_text, setup.revision, setup.native_sidecars)
        .map_err(|e| format!("ConfigMap {namespace}/{name}: {e}"))?;
    let injector = Arc::new(inject::injector::Injector::new(state));
    let source = InjectionConfigSource::new(
        format!("ConfigMap {namespace}/{name}"),
        injector.clone(),
        (config_text, values_text),
        setup.status,
    );
    let on_data = move |data: std::collections::BTreeMap<String, String>| {
        let (config_text, values_text) = texts(&data);
        source.offer(&config_text, &values_text);
    };
    let task = tokio::spawn(kube_source::configmap_watch::watch(
        connection.client,
        namespace.to_string(),
        name,
        on_data,
        setup.shutdown,
    ));
    Ok(Some((injector, task)))
}

/// Keeps `injector`'s mesh config the one in force (`mesh`: the mesh config text, from
/// `crate::mesh_source`) until `shutdown`: each change replaces it, so the next pod is injected with
/// the new mesh config (istiod's injector reads the mesh watcher at each injection). The mesh config
/// was checked before it was published; one the injector cannot read is logged and skipped.
pub async fn follow_mesh(
    injector: Arc<inject::injector::Injector>,
    mut mesh: tokio::sync::watch::Receiver<String>,
    mut shutdown: model::Shutdown,
) {
    loop {
        tokio::select! {
            () = shutdown.wait() => return,
            changed = mesh.changed() => {
                if changed.is_err() {
                    return;
                }
                let text = mesh.borrow_and_update().clone();
                match inject::mesh::apply_mesh_config(&text) {
                    Ok(mesh) => {
                        injector.update(|current| inject::injector::InjectorState {
                            config: current.config.clone(),
                            values: current.values.clone(),
                            mesh,
                            revision: current.revision.clone(),
                            native_sidecars: current.native_sidecars,
                        });
                        info!("sidecar injector: mesh config updated");
                    }
                    Err(reason) => tracing::warn!(%reason, "sidecar injector: mesh config not applied"),
                }
            }
        }
    }
}

/// For `ENABLE_NATIVE_SIDECARS=auto` with a cluster: the task that keeps `injector`'s view of the
/// cluster's Nodes (their kubelet versions) current, so that each pod gets a native sidecar only
/// when its node (or, not bound yet, every node) runs kubelet 1.33 or later, as istiod decides
/// (`inject::injector::native_sidecars_supported`). `None` for `true` or `false` (no Nodes read, as
/// istiod).
///
/// # Errors
/// The kubeconfig cannot be read.
pub fn follow_nodes(
    injector: &inject::injector::Injector,
    cluster: &kube_source::Cluster,
    cluster_id: &str,
    shutdown: model::Shutdown,
) -> Result<Option<JoinHandle<()>>, String> {
    if injector.state().native_sidecars != inject::injector::NativeSidecars::Auto {
        return Ok(None);
    }
    let client = cluster.connect().map_err(|e| e.to_string())?.client;
    let nodes = Arc::new(inject::injector::Nodes::new(cluster_id));
    injector.set_nodes(nodes.clone());
    let on_event = move |event| match event {
        kube_source::nodes::NodeEvent::Reset(all) => nodes.reset(all),
        kube_source::nodes::NodeEvent::Apply(name, version) => nodes.apply(&name, &version),
        kube_source::nodes::NodeEvent::Delete(name) => nodes.remove(&name),
    };
    Ok(Some(tokio::spawn(kube_source::nodes::watch(client, on_event, shutdown))))
}

/// Starts the webhook server on `https_addr` (the `--httpsAddr` in force; and the configuration
/// keeper with cluster access); nothing without it. Returns the tasks to await at shutdown.
///
/// # Errors
/// A bad flag, an address that cannot be listened on, a certificate that cannot be made, or a
/// kubeconfig that cannot be read.
pub async fn start(
    args: &WebhookArgs,
    https_addr: Option<&str>,
    cx: Context<'_>,
) -> Result<Vec<JoinHandle<()>>, String> {
    let Some(addr) = https_addr else {
        if args.url.is_some() {
            return Err("--validation-webhook-url needs the webhook port: give --httpsAddr".into());
        }
        return Ok(Vec::new());
    };
    let addr = crate::discovery::parse_addr("--https-addr", addr)?;
    let mut names = discovery::secure::istiod_dns_names(cx.pod_namespace, cx.revision);
    if let Some(url) = &args.url {
        names.push(url_host(url)?);
    }
    let tls = WebhookTls::new(cx.ca.clone(), names, cx.trust_domain)
        .map_err(|e| format!("validation webhook certificate: {e}"))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on --https-addr {addr}: {e}"))?;
    let ca = cx.ca.as_ref().map_or_else(|| "a root in memory".to_string(), |ca| format!("{:?}", ca.source()));
    info!(https = %addr, %ca, "validation webhook listening");
    let parse = ParseOptions { domain_suffix: cx.domain.to_string(), ..ParseOptions::default() };
    if cx.injector.is_some() {
        info!(https = %addr, "sidecar injection webhook serving /inject");
    }
    let routes = Routes { parse, injector: cx.injector.clone() };
    let mut stop = cx.shutdown.clone();
    let mut tasks =
        vec![tokio::spawn(serve(listener, tls.config.clone(), routes, async move { stop.wait().await }))];
    let sharing = kube_source::webhook_config::shared_root(cx.ca.as_ref().map(|ca| ca.source()));
    if let (Some(_), Err(reason)) = (cx.cluster, &sharing) {
        tracing::error!("{reason}");
    }
    if let (Some(cluster), Ok(())) = (cx.cluster, sharing) {
        let connection = cluster.connect().map_err(|e| e.to_string())?;
        let options = WebhookConfigOptions {
            revision: cx.revision.map(str::to_string),
            istio_namespace: cx.pod_namespace.to_string(),
            client: args.url.clone().map_or(WebhookClient::Service, WebhookClient::Url),
            create_if_missing: true,
        };
        // The bundle never changes while the process runs (a renewed serving certificate has the same
        // root); the channel is how a future CA rotation would re-patch.
        let (bundle_tx, bundle) = tokio::sync::watch::channel(tls.ca_bundle.clone());
        if cx.injector.is_some() {
            let revision = options.revision_label().to_string();
            let (client, bundle, shutdown) = (connection.client.clone(), bundle.clone(), cx.shutdown.clone());
            tasks.push(tokio::spawn(kube_source::injector_webhook_config::run(
                client, revision, bundle, shutdown,
            )));
        }
        let shutdown = cx.shutdown.clone();
        tasks.push(tokio::spawn(async move {
            kube_source::webhook_config::run(connection.client, options, bundle, shutdown).await;
            drop(bundle_tx);
        }));
    }
    Ok(tasks)
}

/// The CRD source's rejected objects in configstatusz's `invalidObjects` shape (see
/// `meshpilot_http::invalid`).
pub fn cluster_invalid_objects(
    source: &Arc<kube_source::KubeSource>,
) -> meshpilot_http::invalid::InvalidObjectsFn {
    use meshpilot_http::invalid::{InvalidFinding, InvalidObject, InvalidObjectsFn};
    let source = source.clone();
    InvalidObjectsFn(Arc::new(move || {
        let name = model::ConfigStore::name(source.as_ref()).to_string();
        source
            .rejected()
            .into_iter()
            .map(|r| InvalidObject {
                kind: r.key.kind.as_str().to_string(),
                namespace: r.key.namespace.clone(),
                name: r.key.name.clone(),
                resource_version: Some(r.resource_version.clone()),
                source: name.clone(),
                kept_previous: r.kept_previous,
                findings: r
                    .errors
                    .iter()
                    .map(|f| InvalidFinding { path: f.path.clone(), message: f.message.clone() })
                    .collect(),
            })
            .collect()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_hosts() {
        assert_eq!(url_host("https://127.0.0.1:15017/validate").unwrap(), "127.0.0.1");
        assert_eq!(url_host("https://[::1]:15017/validate").unwrap(), "::1");
        assert_eq!(url_host("https://istiod.example.com/validate").unwrap(), "istiod.example.com");
        assert!(url_host("http://127.0.0.1:15017/validate").unwrap_err().contains("https://"));
        assert!(url_host("https:///validate").unwrap_err().contains("no host"));
    }
}
