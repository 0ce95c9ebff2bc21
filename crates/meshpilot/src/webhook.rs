//! `meshpilot discovery --https-addr`: Istio's validating admission webhook (istiod's 15017,
//! `POST /validate`, served by crate `meshpilot-webhook`) and, with cluster access, the
//! ValidatingWebhookConfigurations that send the API server's reviews to it
//! (`kube_source::webhook_config`). See docs/CONFIG-FEEDBACK.md, "Validating webhook".

use std::{path::Path, sync::Arc};

use ::webhook::{Routes, WebhookTls, serve};
use config::parse::ParseOptions;
use kube_source::webhook_config::{WebhookClient, WebhookConfigOptions};
use security::IstioCa;
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
    let config = inject::config::InjectConfig::parse(config_text).map_err(|e| format!("config: {e}"))?;
    let values = inject::config::Values::parse(values_text).map_err(|e| format!("values: {e}"))?;
    let mesh = inject::mesh::apply_mesh_config(mesh_text).map_err(|e| format!("mesh config: {e}"))?;
    Ok(inject::injector::InjectorState {
        config: Arc::new(config),
        values,
        mesh,
        revision: revision.filter(|r| *r != "default").unwrap_or_default().to_string(),
        native_sidecars,
    })
}

/// The sidecar injector from `dir/config` and `dir/values` (istiod's file watcher source), `None`
/// when `dir/config` does not exist. `mesh_text` is the mesh config's YAML (`--meshConfig`).
///
/// # Errors
/// A file that cannot be read, a config or template that does not parse, bad values or mesh
/// config: each names the file.
pub fn load_injector(
    dir: &Path,
    mesh_text: &str,
    revision: Option<&str>,
    native_sidecars: inject::injector::NativeSidecars,
) -> Result<Option<inject::injector::Injector>, String> {
    let config_path = dir.join("config");
    if !config_path.exists() {
        return Ok(None);
    }
    let read =
        |path: &Path| api::yaml::read_config_text(path).map_err(|e| format!("{}: {e}", path.display()));
    let values_path = dir.join("values");
    let values_text = if values_path.exists() { read(&values_path)? } else { String::new() };
    let state = injector_state(&read(&config_path)?, &values_text, mesh_text, revision, native_sidecars)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(Some(inject::injector::Injector::new(state)))
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
/// a changed ConfigMap replaces the injector's state; one that does not parse is logged with the
/// reason, counted in `meshpilot_injector_config_errors`, and the last good state stays in force.
/// `None` when the ConfigMap does not exist at start (istiod: "Skipping sidecar injector, template
/// not found").
///
/// # Errors
/// The API server cannot be reached, or the ConfigMap does not parse at start.
pub async fn injector_from_cluster(
    cluster: &kube_source::Cluster,
    namespace: &str,
    revision: Option<&str>,
    mesh: tokio::sync::watch::Receiver<String>,
    native_sidecars: inject::injector::NativeSidecars,
    shutdown: model::Shutdown,
) -> Result<Option<(Arc<inject::injector::Injector>, JoinHandle<()>)>, String> {
    let connection = cluster.connect().map_err(|e| e.to_string())?;
    let name = injector_configmap_name(revision);
    let Some(data) = kube_source::configmap_watch::get(&connection.client, namespace, &name).await? else {
        info!(configmap = %format!("{namespace}/{name}"), "no injection config: sidecar injection is off");
        return Ok(None);
    };
    let text = |data: &std::collections::BTreeMap<String, String>, key: &str| {
        data.get(key).cloned().unwrap_or_default()
    };
    let mesh_text = mesh.borrow().clone();
    let state =
        injector_state(&text(&data, "config"), &text(&data, "values"), &mesh_text, revision, native_sidecars)
            .map_err(|e| format!("ConfigMap {namespace}/{name}: {e}"))?;
    let injector = Arc::new(inject::injector::Injector::new(state));
    let (keeper, revision) = (injector.clone(), revision.map(str::to_string));
    let source = format!("{namespace}/{name}");
    let on_data = move |data: std::collections::BTreeMap<String, String>| match injector_state(
        &text(&data, "config"),
        &text(&data, "values"),
        &mesh.borrow(),
        revision.as_deref(),
        native_sidecars,
    ) {
        Ok(state) => {
            keeper.set(state);
            info!(configmap = %source, "injection config loaded");
        }
        Err(reason) => {
            metrics::counter!("meshpilot_injector_config_errors").increment(1);
            tracing::error!(configmap = %source, %reason, "injection config not applied; the last good one stays in force");
        }
    };
    let task = tokio::spawn(kube_source::configmap_watch::watch(
        connection.client,
        namespace.to_string(),
        name,
        on_data,
        shutdown,
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
