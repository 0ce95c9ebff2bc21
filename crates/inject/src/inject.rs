//! One pod's injection, as istiod's `injectPod` (`pkg/kube/inject/webhook.go`, `inject.go`):
//! whether to inject ([`inject_required`]), the templates rendered over the pod and merged into it
//! ([`run_templates`]), the user's overrides of injected containers re-applied, the post-processing
//! (cluster and network env, Prometheus merge, probe rewrite, status annotation, container order)
//! and the result ([`inject_pod`]).

use std::collections::BTreeMap;

use gtmpl_ng::{Number, Value};
use serde_json::{Map, Value as Json, json};

use crate::config::{InjectConfig, Policy, Values, image_url};
use crate::{mesh, probe, prometheus, smp, validate, view};

/// The proxy container's name.
pub const PROXY_CONTAINER: &str = "istio-proxy";
/// The init container that sets up traffic redirection (without CNI).
pub const INIT_CONTAINER: &str = "istio-init";
/// The init container that checks redirection (with CNI).
pub const VALIDATION_CONTAINER: &str = "istio-validation";
/// The init container enabling core dumps.
pub const ENABLE_CORE_DUMP_CONTAINER: &str = "enable-core-dump";

/// Annotation recording what was injected (`sidecar.istio.io/status`).
pub const STATUS_ANNOTATION: &str = "sidecar.istio.io/status";
/// Annotation naming the templates to inject (`inject.istio.io/templates`).
pub const TEMPLATES_ANNOTATION: &str = "inject.istio.io/templates";
/// Annotation keeping the user's own version of injected containers (`proxy.istio.io/overrides`).
pub const OVERRIDES_ANNOTATION: &str = "proxy.istio.io/overrides";
/// Annotation with the pod's proxy config (`proxy.istio.io/config`).
pub const PROXY_CONFIG_ANNOTATION: &str = "proxy.istio.io/config";
/// Pod label or annotation asking for or refusing injection (`sidecar.istio.io/inject`).
pub const INJECT_LABEL: &str = "sidecar.istio.io/inject";
/// Pod annotation forcing native sidecars on or off (`sidecar.istio.io/nativeSidecar`).
pub const NATIVE_SIDECAR_ANNOTATION: &str = "sidecar.istio.io/nativeSidecar";
/// The network label (`topology.istio.io/network`).
pub const NETWORK_LABEL: &str = "topology.istio.io/network";

/// Namespaces never injected (`IgnoredNamespaces`).
pub const IGNORED_NAMESPACES: &[&str] =
    &["kube-system", "kube-public", "kube-node-lease", "local-path-storage"];

/// Why a pod could not be injected; the webhook denies it with this text, as istiod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InjectError {
    /// A template named by the pod or the config does not exist.
    #[error("failed to run injection template: requested template {name:?} not found; have {known}")]
    UnknownTemplate {
        /// The name asked for.
        name: String,
        /// The templates there are, comma-separated.
        known: String,
    },
    /// A template failed to render.
    #[error("failed to run injection template: {0}")]
    Render(String),
    /// A template rendered something that is not a pod overlay.
    #[error(
        "failed to run injection template: failed parsing generated injected YAML (check Istio sidecar injector configuration): {0}"
    )]
    Overlay(String),
    /// An annotation of the pod is invalid (istiod's `validateAnnotations`, run by `RunTemplate`).
    #[error("failed to run injection template: {0}")]
    Annotation(String),
    /// Post-processing failed (for example invalid Prometheus scrape annotations).
    #[error("failed to process pod: {0}")]
    PostProcess(String),
}

/// The owner a pod's proxy reports (`DeploymentMeta` and `TypeMeta` in the templates).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    /// The workload's name (a Deployment's, not its ReplicaSet's).
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its kind (`Deployment`, `Pod`, `CronJob`, …).
    pub kind: String,
    /// Its API version (`apps/v1`, `v1`, …).
    pub api_version: String,
}

/// Everything one injection needs (istiod's `InjectionParameters`).
#[derive(Debug)]
pub struct InjectionParams<'a> {
    /// The pod as it came (JSON).
    pub pod: Json,
    /// Its owning workload.
    pub owner: Owner,
    /// The injector config (templates, aliases).
    pub config: &'a InjectConfig,
    /// Templates injected when the pod names none.
    pub default_templates: Vec<String>,
    /// Template aliases.
    pub aliases: BTreeMap<String, Vec<String>>,
    /// The effective mesh config (proto-JSON, Istio's defaults under it).
    pub mesh: Json,
    /// The pod's effective proxy config when the injection webhook computed it
    /// ([`crate::proxy_config::ProxyConfigs::effective`]: `ProxyConfig` resources and the annotation
    /// merged, istiod's `GetProxyConfigOrDefault`); the templates' `.ProxyConfig` and image then come
    /// from it while `.MeshConfig` and the probe port stay the mesh's, as in istiod's webhook. `None`:
    /// `kube-inject`'s (istioctl's) mesh `defaultConfig` with the annotation applied, for all of them.
    pub proxy_config: Option<Json>,
    /// The Helm values.
    pub values: &'a Values,
    /// The control plane's revision (`""` for the default one).
    pub revision: String,
    /// Whether the proxy runs as a native sidecar (an init container with `restartPolicy: Always`).
    pub native_sidecar: bool,
    /// Environment set on the proxy from the request path (`/inject/cluster/X/net/Y`).
    pub proxy_envs: BTreeMap<String, String>,
    /// Annotations added to the pod (the config's `injectedAnnotations`).
    pub injected_annotations: BTreeMap<String, String>,
    /// UID and GID of the proxy (1337, or the namespace's OpenShift range).
    pub proxy_uid_gid: (i64, i64),
}

impl InjectionParams<'_> {
    /// The proxy config the templates see (`.ProxyConfig`): [`InjectionParams::proxy_config`], else
    /// the mesh config's `defaultConfig`.
    fn template_proxy_config(&self) -> Json {
        self.proxy_config.clone().unwrap_or_else(|| self.mesh["defaultConfig"].clone())
    }
}

pub(crate) fn labels_of(meta: &Json, key: &str) -> BTreeMap<String, String> {
    meta[key]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default()
}

/// The pod's name for logs: its name, else `generateName` + a marker.
pub fn potential_pod_name(meta: &Json) -> String {
    match (meta["name"].as_str(), meta["generateName"].as_str()) {
        (Some(name), _) if !name.is_empty() => name.to_string(),
        (_, Some(generate)) if !generate.is_empty() => format!("{generate}***** (actual name not yet known)"),
        _ => String::new(),
    }
}

/// Whether a pod is to be injected (istiod's `injectRequired`): never with host networking or in
/// an ignored namespace; else the pod's `sidecar.istio.io/inject` label (or annotation) decides;
/// else the never/always selectors; else the policy.
pub fn inject_required(
    ignored: &[&str],
    config_policy: &Policy,
    config: Option<&InjectConfig>,
    pod: &Json,
    namespace: &str,
) -> bool {
    let spec = &pod["spec"];
    let meta = &pod["metadata"];
    if spec["hostNetwork"].as_bool() == Some(true) || ignored.contains(&namespace) {
        return false;
    }
    let labels = labels_of(meta, "labels");
    let mut selector = meta["annotations"][INJECT_LABEL].as_str().unwrap_or_default().to_string();
    if let Some(label) = labels.get(INJECT_LABEL) {
        selector = label.clone();
    }
    let (mut use_default, mut inject) = match selector.as_str() {
        "true" => (false, true),
        "false" => (false, false),
        "" => (true, false),
        other => {
            tracing::warn!(
                value = other,
                "invalid value for {INJECT_LABEL}: only 'true' and 'false' are accepted; using the default policy"
            );
            (true, false)
        }
    };
    if let Some(config) = config {
        for (selectors, verdict) in
            [(&config.never_inject_selector, false), (&config.always_inject_selector, true)]
        {
            if !use_default {
                break;
            }
            for sel in selectors.iter() {
                match sel.matches(&labels) {
                    Ok(true) if !sel.is_empty() => {
                        inject = verdict;
                        use_default = false;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "invalid injection selector"),
                }
            }
        }
    }
    match config_policy {
        Policy::Enabled => use_default || inject,
        Policy::Disabled => !use_default && inject,
        Policy::Invalid(value) => {
            tracing::error!(policy = %value, "illegal value for the injection policy, must be enabled or disabled: injection disabled");
            false
        }
    }
}

/// The workload owning a pod (istiod's `GetDeployMetaFromPod`): a ReplicaSet with the pod's
/// `pod-template-hash` is its Deployment, a Job named `<cronjob>-<8 to 10 digits>` its CronJob, a
/// ReplicationController of a `deploymentconfig` its DeploymentConfig.
pub fn owner_of_pod(pod: &Json) -> Owner {
    let meta = &pod["metadata"];
    let labels = labels_of(meta, "labels");
    let mut owner = Owner {
        name: meta["name"].as_str().unwrap_or_default().to_string(),
        namespace: meta["namespace"].as_str().unwrap_or_default().to_string(),
        kind: "Pod".to_string(),
        api_version: "v1".to_string(),
    };
    let generated = meta["generateName"].as_str().is_some_and(|g| !g.is_empty());
    let controller = meta["ownerReferences"]
        .as_array()
        .and_then(|refs| refs.iter().find(|r| r["controller"].as_bool() == Some(true)));
    if let (true, Some(controller)) = (generated, controller) {
        let name = controller["name"].as_str().unwrap_or_default();
        owner.api_version = controller["apiVersion"].as_str().unwrap_or_default().to_string();
        owner.kind = controller["kind"].as_str().unwrap_or_default().to_string();
        owner.name = name.to_string();
        let hash =
            |label: &str| labels.get(label).filter(|h| !h.is_empty() && name.ends_with(h.as_str())).cloned();
        if owner.kind == "ReplicaSet" {
            if let Some(h) = hash("pod-template-hash") {
                owner.name = name.strip_suffix(&format!("-{h}")).unwrap_or(name).to_string();
                owner.kind = "Deployment".into();
            } else if let Some(h) = hash("rollouts-pod-template-hash") {
                owner.name = name.strip_suffix(&format!("-{h}")).unwrap_or(name).to_string();
                owner.kind = "Rollout".into();
                owner.api_version = "v1alpha1".into();
            }
        } else if owner.kind == "ReplicationController"
            && labels.get("deploymentconfig").is_some_and(|d| !d.is_empty())
        {
            owner.name = labels["deploymentconfig"].clone();
            owner.kind = "DeploymentConfig".into();
        } else if owner.kind == "Job"
            && let Some((cron, digits)) = name.rsplit_once('-')
            && (8..=10).contains(&digits.len())
            && digits.bytes().all(|b| b.is_ascii_digit())
            && !cron.is_empty()
        {
            owner.name = cron.to_string();
            owner.kind = "CronJob".into();
            owner.api_version = "batch/v1".into();
        }
    }
    if owner.name.is_empty() {
        owner.name = meta["name"].as_str().unwrap_or_default().to_string();
    }
    owner
}

fn containers_mut<'a>(pod: &'a mut Json, list: &str) -> &'a mut Vec<Json> {
    if !pod["spec"][list].is_array() {
        pod["spec"][list] = json!([]);
    }
    pod["spec"][list].as_array_mut().expect("just made an array")
}

fn find<'a>(list: &'a Json, name: &str) -> Option<&'a Json> {
    list.as_array()?.iter().find(|c| c["name"].as_str() == Some(name))
}

/// The pod's proxy container: in `containers`, else (native sidecar) in `initContainers`.
pub fn find_sidecar_mut(pod: &mut Json) -> Option<&mut Json> {
    for list in ["containers", "initContainers"] {
        if find(&pod["spec"][list], PROXY_CONTAINER).is_some() {
            return pod["spec"][list]
                .as_array_mut()?
                .iter_mut()
                .find(|c| c["name"].as_str() == Some(PROXY_CONTAINER));
        }
    }
    None
}

fn annotations_mut(pod: &mut Json) -> &mut Map<String, Json> {
    if !pod["metadata"]["annotations"].is_object() {
        pod["metadata"]["annotations"] = json!({});
    }
    pod["metadata"]["annotations"].as_object_mut().expect("just made an object")
}

fn labels_mut(pod: &mut Json) -> &mut Map<String, Json> {
    if !pod["metadata"]["labels"].is_object() {
        pod["metadata"]["labels"] = json!({});
    }
    pod["metadata"]["labels"].as_object_mut().expect("just made an object")
}

/// The containers a previous injection added, by list (`sidecar.istio.io/status`).
fn injected_names(pod: &Json) -> Option<(Vec<String>, Vec<String>)> {
    let status: Json =
        serde_json::from_str(pod["metadata"]["annotations"][STATUS_ANNOTATION].as_str()?).ok()?;
    let names = |key: &str| -> Vec<String> {
        status[key].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)).collect()
    };
    Some((names("containers"), names("initContainers")))
}

/// The pod without what a previous injection added (istiod's `stripPod`), so injection is
/// idempotent; then the user's overrides put back (`reinsertOverrides`).
fn strip_pod(pod: &Json, status_port: u64) -> Result<Json, InjectError> {
    let mut pod = pod.clone();
    if let Some((containers, init)) = injected_names(&pod) {
        for (list, names) in [("containers", containers), ("initContainers", init)] {
            containers_mut(&mut pod, list)
                .retain(|c| !names.iter().any(|n| c["name"].as_str() == Some(n.as_str())));
        }
        if prometheus::prometheus_port(&pod).is_some_and(|p| p == status_port.to_string()) {
            prometheus::clear_prometheus_annotations(&mut pod);
        }
        annotations_mut(&mut pod).remove(STATUS_ANNOTATION);
    }
    let overrides = overrides_of(&pod)?;
    for (list, items) in [("containers", &overrides.0), ("initContainers", &overrides.1)] {
        for c in items {
            let name = c["name"].as_str().unwrap_or_default();
            if find(&pod["spec"][list], name).is_none() {
                containers_mut(&mut pod, list).push(c.clone());
            }
        }
    }
    Ok(pod)
}

/// The `proxy.istio.io/overrides` annotation: (containers, initContainers).
fn overrides_of(pod: &Json) -> Result<(Vec<Json>, Vec<Json>), InjectError> {
    let Some(text) = pod["metadata"]["annotations"][OVERRIDES_ANNOTATION].as_str() else {
        return Ok((Vec::new(), Vec::new()));
    };
    let parsed: Json = serde_json::from_str(text)
        .map_err(|e| InjectError::Annotation(format!("invalid {OVERRIDES_ANNOTATION} annotation: {e}")))?;
    let list = |k: &str| parsed[k].as_array().cloned().unwrap_or_default();
    Ok((list("containers"), list("initContainers")))
}

/// The templates to apply: the pod's `inject.istio.io/templates`, else the defaults; aliases
/// expanded.
fn select_templates(params: &InjectionParams<'_>) -> Vec<String> {
    let names: Vec<String> = match params.pod["metadata"]["annotations"][TEMPLATES_ANNOTATION].as_str() {
        Some(list) => list.split(',').map(|n| n.trim().to_string()).collect(),
        None => params.default_templates.clone(),
    };
    names.into_iter().flat_map(|n| params.aliases.get(&n).cloned().unwrap_or_else(|| vec![n])).collect()
}

/// The proxy image (`ProxyImage`): `HUB/IMAGE:TAG[-TYPE]`, TYPE from the proxy config's `image`,
/// else `global.variant`, the `sidecar.istio.io/proxyImageType` annotation winning.
pub fn proxy_image(
    values: &Values,
    proxy_config: &Json,
    annotations: &Json,
    name: String,
    use_pc_type: bool,
) -> String {
    let mut image_type = if use_pc_type {
        proxy_config["image"]["imageType"].as_str().unwrap_or_default().to_string()
    } else {
        String::new()
    };
    if image_type.is_empty() {
        image_type = values.variant();
    }
    if let Some(t) = annotations["sidecar.istio.io/proxyImageType"].as_str() {
        image_type = t.to_string();
    }
    image_url(&values.hub(), &name, &values.tag(), &image_type)
}

fn string(s: impl Into<String>) -> Value {
    Value::String(s.into())
}

/// The template data (istiod's `SidecarTemplateData`) for a stripped pod.
fn template_data(params: &InjectionParams<'_>, pod: &Json, proxy_config: &Json) -> Value {
    let annotations = &pod["metadata"]["annotations"];
    let mesh = &params.mesh;
    let inbound = match mesh["inboundTrafficPolicy"]["mode"].as_str() {
        Some("LOCALHOST") => "localhost",
        _ => "passthrough",
    };
    let data = [
        (
            "TypeMeta",
            Value::Map(
                [
                    ("Kind".into(), string(&params.owner.kind)),
                    ("APIVersion".into(), string(&params.owner.api_version)),
                ]
                .into(),
            ),
        ),
        (
            "DeploymentMeta",
            Value::Map(
                [
                    ("Name".into(), string(&params.owner.name)),
                    ("Namespace".into(), string(&params.owner.namespace)),
                ]
                .into(),
            ),
        ),
        ("ObjectMeta", view::object_meta(&pod["metadata"])),
        ("Spec", view::kube(&pod["spec"])),
        ("ProxyConfig", view::proxy_config(proxy_config, mesh::clean_proxy_config_json(proxy_config))),
        ("MeshConfig", view::proto(mesh, Some(mesh.to_string()))),
        ("Values", view::plain(&params.values.json)),
        ("Revision", string(&params.revision)),
        ("NativeSidecars", Value::Bool(params.native_sidecar)),
        (
            "ProxyImage",
            string(proxy_image(
                params.values,
                proxy_config,
                annotations,
                params.values.proxy_image_name(),
                true,
            )),
        ),
        (
            "ProxyInitImage",
            string(proxy_image(
                params.values,
                proxy_config,
                annotations,
                params.values.proxy_init_image_name(),
                false,
            )),
        ),
        ("ProxyUID", Value::Number(Number::from(params.proxy_uid_gid.0))),
        ("ProxyGID", Value::Number(Number::from(params.proxy_uid_gid.1))),
        ("InboundTrafficPolicyMode", string(inbound)),
        ("CompliancePolicy", string(std::env::var("COMPLIANCE_POLICY").unwrap_or_default())),
    ];
    Value::Map(data.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// A rendered template as a pod overlay (YAML → JSON object).
fn overlay_of(rendered: &str) -> Result<Json, InjectError> {
    crate::yaml::object(rendered).map_err(|e| InjectError::Overlay(e.to_string()))
}

/// Moves the named container from `containers` to the end of `initContainers`.
fn move_to_init(pod: &mut Json, name: &str) {
    let containers = containers_mut(pod, "containers");
    if let Some(i) = containers.iter().position(|c| c["name"].as_str() == Some(name)) {
        let c = containers.remove(i);
        containers_mut(pod, "initContainers").push(c);
    }
}

/// The pod's annotations as istiod's `validateAnnotations` checks them.
fn check_annotations(pod: &Json) -> Result<(), InjectError> {
    match pod["metadata"]["annotations"].as_object() {
        Some(annotations) => validate::validate_annotations(annotations).map_err(InjectError::Annotation),
        None => Ok(()),
    }
}

/// Renders the pod's templates and merges them into it (istiod's `RunTemplate`): the merged pod and
/// the overlay the templates alone produced.
///
/// # Errors
/// An invalid annotation ([`validate::validate_annotations`], checked first as istiod does), an
/// unknown template, a render failure, an overlay that is not a pod.
pub fn run_templates(params: &mut InjectionParams<'_>) -> Result<(Json, Json), InjectError> {
    check_annotations(&params.pod)?;
    let meta = params.pod["metadata"].clone();
    // Cluster and network from the values, the request path, then the pod's network label.
    let mut cluster = params.values.cluster_name();
    let mut network = params.values.network();
    if let Some(c) = params.proxy_envs.get("ISTIO_META_CLUSTER_ID").filter(|c| !c.is_empty()) {
        cluster = c.clone();
    }
    if let Some(n) = params.proxy_envs.get("ISTIO_META_NETWORK").filter(|n| !n.is_empty()) {
        network = n.clone();
    }
    if let Some(n) = meta["labels"][NETWORK_LABEL].as_str() {
        network = n.to_string();
    }
    if !cluster.is_empty() {
        params.proxy_envs.insert("ISTIO_META_CLUSTER_ID".into(), cluster);
    }
    if !network.is_empty() {
        params.proxy_envs.insert("ISTIO_META_NETWORK".into(), network);
    }

    let proxy_config = params.template_proxy_config();
    // istiod's `stripPod` reads the mesh config's status port.
    let status_port = params.mesh["defaultConfig"]["statusPort"].as_u64().unwrap_or(15020);
    let stripped = strip_pod(&params.pod, status_port)?;
    let data = template_data(params, &stripped, &proxy_config);

    let mut merged = params.pod.clone();
    let mut template_pod = json!({});
    for name in select_templates(params) {
        if !params.config.templates.contains(&name) {
            return Err(InjectError::UnknownTemplate {
                name,
                known: params.config.templates.names().collect::<Vec<_>>().join(", "),
            });
        }
        let rendered = params
            .config
            .templates
            .render(&name, data.clone())
            .map_err(|e| InjectError::Render(e.to_string()))?;
        let overlay = overlay_of(&rendered)?;
        smp::merge_pod(&mut template_pod, &overlay);
        let native = match merged["metadata"]["annotations"][NATIVE_SIDECAR_ANNOTATION].as_str() {
            Some("true") => true,
            Some("false") => false,
            _ => params.native_sidecar,
        };
        if native
            && find(&template_pod["spec"]["initContainers"], PROXY_CONTAINER).is_some()
            && find(&merged["spec"]["containers"], PROXY_CONTAINER).is_some()
        {
            move_to_init(&mut merged, PROXY_CONTAINER);
        }
        smp::merge_pod(&mut merged, &overlay);
    }
    Ok((merged, template_pod))
}

/// Re-applies the user's own definition of a container the templates inject (a pod that declares
/// `istio-proxy` to set its resources, say), recording it in `proxy.istio.io/overrides` on first
/// injection (istiod's `reapplyOverwrittenContainers`; the init container's user is not adjusted).
fn reapply_overwritten_containers(
    merged: &mut Json,
    original: &Json,
    template_pod: &Json,
) -> Result<(), InjectError> {
    let existing = overrides_of(original)?;
    let already = injected_names(original);
    let mut overrides: (Vec<Json>, Vec<Json>) = (Vec::new(), Vec::new());
    for (list, existing_list, injected) in [
        ("containers", &existing.0, already.as_ref().map(|a| &a.0)),
        ("initContainers", &existing.1, already.as_ref().map(|a| &a.1)),
    ] {
        for c in template_pod["spec"][list].as_array().into_iter().flatten() {
            let name = c["name"].as_str().unwrap_or_default();
            if injected.is_some_and(|names| names.iter().any(|n| n == name)) {
                continue;
            }
            let found =
                existing_list.iter().find(|e| e["name"].as_str() == Some(name)).cloned().or_else(|| {
                    find(&original["spec"][list], name).cloned().or_else(|| {
                        // An init container may have been moved from containers (native sidecar).
                        (list == "initContainers")
                            .then(|| find(&original["spec"]["containers"], name).cloned())
                            .flatten()
                    })
                });
            let Some(mut overlay) = found else { continue };
            if overlay["image"].as_str() == Some("auto") {
                overlay.as_object_mut().map(|o| o.remove("image"));
            }
            smp::merge_pod(merged, &json!({"spec": {list: [overlay.clone()]}}));
            if list == "containers" { overrides.0.push(overlay) } else { overrides.1.push(overlay) }
        }
    }
    if already.is_none() && (!overrides.0.is_empty() || !overrides.1.is_empty()) {
        // json.Marshal of istiod's ParsedContainers{Containers, InitContainers []corev1.Container}.
        let record = json!({"containers": overrides.0, "initContainers": overrides.1});
        annotations_mut(merged).insert(
            OVERRIDES_ANNOTATION.into(),
            Json::String(crate::kube_types::go_json(&record, "ParsedContainers")),
        );
    }
    Ok(())
}

/// istiod's `adjustInitContainerUser`: when the pod declares its own `istio-proxy` with a
/// `runAsUser`/`runAsGroup`, the init container follows it: with TPROXY interception the proxy runs
/// as root; otherwise `istio-validation` (CNI) takes the user and group, and `istio-init`'s (or
/// `istio-validation`'s) `-u` argument the user (unless root).
fn adjust_init_container_user(merged: &mut Json, original: &Json, proxy_config: &Json) {
    let user = ["containers", "initContainers"]
        .iter()
        .find_map(|list| find(&original["spec"][*list], PROXY_CONTAINER))
        .map(|c| c["securityContext"].clone())
        .unwrap_or(Json::Null);
    let (run_as_user, run_as_group) = (user["runAsUser"].clone(), user["runAsGroup"].clone());
    if run_as_user.is_null() && run_as_group.is_null() {
        return;
    }
    let tproxy = proxy_config["interceptionMode"].as_str() == Some("TPROXY")
        || merged["metadata"]["annotations"]["sidecar.istio.io/interceptionMode"].as_str() == Some("TPROXY");
    let Some(init_name) = [INIT_CONTAINER, VALIDATION_CONTAINER]
        .into_iter()
        .find(|name| find(&merged["spec"]["initContainers"], name).is_some())
    else {
        tracing::warn!("could not find either istio-init or istio-validation container");
        return;
    };
    if tproxy
        && !run_as_user.is_null()
        && let Some(sidecar) = find_sidecar_mut(merged)
    {
        sidecar["securityContext"]["runAsUser"] = json!(0);
    }
    let init = containers_mut(merged, "initContainers")
        .iter_mut()
        .find(|c| c["name"].as_str() == Some(init_name))
        .expect("found above");
    if !tproxy && init_name == VALIDATION_CONTAINER {
        if !init["securityContext"].is_object() {
            init["securityContext"] = json!({});
        }
        if !run_as_user.is_null() {
            init["securityContext"]["runAsUser"] = run_as_user.clone();
        }
        if !run_as_group.is_null() {
            init["securityContext"]["runAsGroup"] = run_as_group;
        }
    }
    if run_as_user.is_null() || run_as_user.as_i64() == Some(0) {
        return;
    }
    if let Some(args) = init["args"].as_array_mut()
        && let Some(i) = args.iter().position(|a| a.as_str() == Some("-u"))
        && i + 1 < args.len()
    {
        args[i + 1] = Json::String(run_as_user.to_string());
    }
}

/// The `sidecar.istio.io/status` value: what the templates injected, and the revision.
fn injection_status(template_pod: &Json, revision: &str) -> String {
    let names = |list: &str| -> Json {
        match template_pod["spec"][list].as_array() {
            Some(items) if !items.is_empty() => {
                Json::Array(items.iter().map(|i| i["name"].clone()).collect())
            }
            _ => Json::Null,
        }
    };
    let status = json!({
        "initContainers": names("initContainers"),
        "containers": names("containers"),
        "volumes": names("volumes"),
        "imagePullSecrets": names("imagePullSecrets"),
        "revision": if revision.is_empty() { "default" } else { revision },
    });
    status.to_string()
}

/// Where a container goes (`modifyContainers`).
#[derive(Clone, Copy)]
enum Move {
    First,
    Last,
}

fn move_container(pod: &mut Json, list: &str, name: &str, to: Move) {
    let items = containers_mut(pod, list);
    if let Some(i) = items.iter().position(|c| c["name"].as_str() == Some(name)) {
        let c = items.remove(i);
        match to {
            Move::First => items.insert(0, c),
            Move::Last => items.push(c),
        }
    }
}

/// istiod's `postProcessPod`: cluster/network env on the proxy, Prometheus merge, probe rewrite,
/// status annotation, container order.
fn post_process(
    pod: &mut Json,
    template_pod: &Json,
    params: &InjectionParams<'_>,
    hold_application: bool,
) -> Result<(), InjectError> {
    annotations_mut(pod);
    labels_mut(pod);
    if !params.proxy_envs.is_empty()
        && let Some(sidecar) = find_sidecar_mut(pod)
    {
        let mut env: Vec<Json> = sidecar["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| !params.proxy_envs.contains_key(e["name"].as_str().unwrap_or_default()))
            .cloned()
            .collect();
        env.extend(params.proxy_envs.iter().map(|(k, v)| json!({"name": k, "value": v})));
        sidecar["env"] = Json::Array(env);
    }
    prometheus::apply_prometheus_merge(pod, &params.mesh)
        .map_err(|e| InjectError::PostProcess(e.to_string()))?;
    prometheus::apply_secure_prometheus_annotation(pod);
    let status_port = params.mesh["defaultConfig"]["statusPort"].as_u64().unwrap_or(15020) as u32;
    probe::apply_rewrite(pod, params.values.rewrite_app_http_probe(), status_port);
    if let Some(network) = params.proxy_envs.get("ISTIO_META_NETWORK") {
        labels_mut(pod).insert(NETWORK_LABEL.into(), Json::String(network.clone()));
    }
    annotations_mut(pod)
        .insert(STATUS_ANNOTATION.into(), Json::String(injection_status(template_pod, &params.revision)));
    for (k, v) in &params.injected_annotations {
        annotations_mut(pod).insert(k.clone(), Json::String(v.clone()));
    }
    // Container order: istiod's `reorderPod` reads the mesh config with the pod's annotation applied
    // (not the ProxyConfig resources).
    let hold = hold_application || params.values.hold_application_until_proxy_starts();
    move_container(pod, "containers", PROXY_CONTAINER, if hold { Move::First } else { Move::Last });
    if find(&pod["spec"]["initContainers"], PROXY_CONTAINER).is_some() {
        for name in [ENABLE_CORE_DUMP_CONTAINER, PROXY_CONTAINER, VALIDATION_CONTAINER, INIT_CONTAINER] {
            move_container(pod, "initContainers", name, Move::First);
        }
    } else {
        move_container(pod, "initContainers", VALIDATION_CONTAINER, Move::First);
        move_container(pod, "initContainers", INIT_CONTAINER, Move::Last);
        move_container(pod, "initContainers", ENABLE_CORE_DUMP_CONTAINER, Move::Last);
    }
    Ok(())
}

/// Injects one pod (istiod's `injectPod` up to the patch): the pod as it is to be stored.
///
/// # Errors
/// [`InjectError`]: the webhook denies the pod with its text.
pub fn inject_pod(mut params: InjectionParams<'_>) -> Result<Json, InjectError> {
    // istiod validates the annotations before it reads `proxy.istio.io/config` (`RunTemplate`):
    // an invalid one is refused with the validation's message.
    check_annotations(&params.pod)?;
    let mut annotated = params.mesh.clone();
    if let Some(pca) = params.pod["metadata"]["annotations"][PROXY_CONFIG_ANNOTATION].as_str() {
        annotated = mesh::apply_proxy_config(pca, &params.mesh).map_err(|e| {
            InjectError::Annotation(format!(
                "invalid value '{pca}' for annotation '{PROXY_CONFIG_ANNOTATION}': {e}"
            ))
        })?;
    }
    let hold = annotated["defaultConfig"]["holdApplicationUntilProxyStarts"].as_bool() == Some(true);
    if params.proxy_config.is_none() {
        // kube-inject (istioctl): the annotated mesh config is the mesh config everywhere.
        params.mesh = annotated;
    }
    let (mut merged, template_pod) = run_templates(&mut params)?;
    reapply_overwritten_containers(&mut merged, &params.pod, &template_pod)?;
    adjust_init_container_user(&mut merged, &params.pod, &params.template_proxy_config());
    post_process(&mut merged, &template_pod, &params, hold)?;
    // What istiod's typed round trip through corev1.Pod does to the result.
    crate::kube_types::normalize_pod(&mut merged);
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_follow_istio() {
        let pod = |kind: &str, name: &str, labels: Json| {
            json!({"metadata": {"generateName": "x-", "namespace": "ns", "labels": labels,
                   "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": name, "controller": true}]}})
        };
        let o = owner_of_pod(&pod("ReplicaSet", "web-5d4f8", json!({"pod-template-hash": "5d4f8"})));
        assert_eq!(
            (o.name.as_str(), o.kind.as_str(), o.api_version.as_str()),
            ("web", "Deployment", "apps/v1")
        );
        let o = owner_of_pod(&pod("Job", "backup-28934560", json!({})));
        assert_eq!(
            (o.name.as_str(), o.kind.as_str(), o.api_version.as_str()),
            ("backup", "CronJob", "batch/v1")
        );
        let o = owner_of_pod(&pod("StatefulSet", "db", json!({})));
        assert_eq!((o.name.as_str(), o.kind.as_str()), ("db", "StatefulSet"));
        let o = owner_of_pod(&json!({"metadata": {"name": "p", "namespace": "ns"}}));
        assert_eq!((o.name.as_str(), o.kind.as_str(), o.api_version.as_str()), ("p", "Pod", "v1"));
    }

    #[test]
    fn injection_policy_and_pod_opt_in_out() {
        let pod = |labels: Json, annotations: Json| json!({"metadata": {"labels": labels, "annotations": annotations}, "spec": {}});
        let plain = pod(json!({}), json!({}));
        assert!(inject_required(IGNORED_NAMESPACES, &Policy::Enabled, None, &plain, "default"));
        assert!(!inject_required(IGNORED_NAMESPACES, &Policy::Disabled, None, &plain, "default"));
        assert!(!inject_required(IGNORED_NAMESPACES, &Policy::Enabled, None, &plain, "kube-system"));
        let opt_in = pod(json!({INJECT_LABEL: "true"}), json!({}));
        assert!(inject_required(IGNORED_NAMESPACES, &Policy::Disabled, None, &opt_in, "default"));
        // The label wins over the annotation.
        let both = pod(json!({INJECT_LABEL: "false"}), json!({INJECT_LABEL: "true"}));
        assert!(!inject_required(IGNORED_NAMESPACES, &Policy::Enabled, None, &both, "default"));
        let host = json!({"metadata": {}, "spec": {"hostNetwork": true}});
        assert!(!inject_required(IGNORED_NAMESPACES, &Policy::Enabled, None, &host, "default"));
        assert!(!inject_required(IGNORED_NAMESPACES, &Policy::Invalid("x".into()), None, &plain, "default"));
    }

    #[test]
    fn the_init_container_runs_as_the_user_the_pod_gives_its_proxy() {
        let original = json!({"spec": {"containers": [{"name": "istio-proxy", "securityContext": {"runAsUser": 1234, "runAsGroup": 4321}}]}});
        let merged = || {
            json!({"metadata": {"annotations": {}}, "spec": {
                "initContainers": [{"name": "istio-init", "args": ["istio-iptables", "-u", "1337", "-m", "REDIRECT"]}],
                "containers": [{"name": "istio-proxy", "securityContext": {"runAsUser": 1234}}]}})
        };
        let mut pod = merged();
        adjust_init_container_user(&mut pod, &original, &json!({}));
        assert_eq!(
            pod["spec"]["initContainers"][0]["args"],
            json!(["istio-iptables", "-u", "1234", "-m", "REDIRECT"])
        );
        // TPROXY: the proxy itself runs as root.
        let mut pod = merged();
        adjust_init_container_user(&mut pod, &original, &json!({"interceptionMode": "TPROXY"}));
        assert_eq!(pod["spec"]["containers"][0]["securityContext"]["runAsUser"], 0);
        // No user on the pod's own proxy: nothing changes.
        let mut pod = merged();
        adjust_init_container_user(&mut pod, &json!({"spec": {}}), &json!({}));
        assert_eq!(pod, merged());
    }

    #[test]
    fn status_lists_what_the_templates_added() {
        let template_pod = json!({"spec": {"containers": [{"name": "istio-proxy"}], "initContainers": [{"name": "istio-init"}],
                                   "volumes": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(
            injection_status(&template_pod, ""),
            r#"{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["a","b"],"imagePullSecrets":null,"revision":"default"}"#
        );
    }
}
