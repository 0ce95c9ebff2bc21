//! Istio's `injection` analyzers (`pkg/config/analysis/analyzers/injection`): namespaces and pods
//! against sidecar injection.
//!
//! * [`Analyzer`] (`injection.Analyzer`): for every Namespace but `istio-system`, IST0123
//!   NamespaceMultipleInjectionLabels when it carries more than one of `istio-injection`,
//!   `istio.io/rev`, `istio.io/dataplane-mode` (the latter two count only without `istio-injection`
//!   or with `istio-injection=enabled`); ambient namespaces stop there. A namespace with neither an
//!   `istio-injection` value nor an `istio.io/rev` label gets IST0148 NamespaceInjectionEnabledByDefault
//!   when the injector ConfigMap of its revision says `sidecarInjectorWebhook.enableNamespacesByDefault`,
//!   else IST0102 NamespaceNotInjected. In namespaces with `istio-injection=enabled`, every Pod without
//!   an `istio-proxy` container gets IST0103 PodMissingProxy, unless its `sidecar.istio.io/inject`
//!   label (else annotation) is `false` or it uses the host network.
//! * [`ImageAnalyzer`] (`injection.ImageAnalyzer`): in namespaces enabled for injection
//!   (`istio-injection=enabled` or an `istio.io/rev`), pods whose `istio-proxy` image is neither the
//!   injector ConfigMap's `global.proxy.image` (or `hub/image:tag`) nor that image with the effective
//!   image type suffix (`-distroless`) are listed in one IST0158 PodsIstioProxyImageMismatchInNamespace
//!   on the Namespace. Pods with a `sidecar.istio.io/proxyImage` annotation are skipped.
//! * [`ImageAutoAnalyzer`] (`injection.ImageAutoAnalyzer`): a Pod with an `istio-proxy` container of
//!   `image: auto` gets IST0147 ImageAutoWithoutInjectionError (a Pod that exists was not injected); a
//!   Deployment with one gets IST0146 ImageAutoWithoutInjectionWarning when no Istio mutating webhook
//!   (a webhook whose name ends in `istio.io`) selects its namespace and pod template labels.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::workload::{
    self, DATAPLANE_MODE_LABEL, INJECTION_LABEL, ISTIO_PROXY, PodTemplate, REVISION_LABEL, SIDECAR_INJECT,
    injector_config_map_name, message_at_leaf, pod_spec,
};
use crate::{
    Analyzer as AnalyzerTrait, Context, Message,
    msg::{self, Arg},
    resource::{KubeObject, Resource, kinds},
};

/// Type key of Istio's ProxyConfig.
const PROXY_CONFIG: &str = "networking.istio.io/ProxyConfig";

/// `injection.Analyzer`: injection labels of namespaces and pods missing the proxy.
#[derive(Debug, Default)]
pub struct Analyzer;

impl AnalyzerTrait for Analyzer {
    fn name(&self) -> &str {
        "injection.Analyzer"
    }

    fn description(&self) -> &str {
        "Checks conditions related to Istio sidecar injection"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::NAMESPACE, kinds::POD, kinds::CONFIG_MAP]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let resources = ctx.resources();
        // Istio keeps this flag across namespaces: a namespace whose revision has no injector
        // ConfigMap inherits the value of the previous lookup.
        let mut enable_by_default = false;
        let mut injected: BTreeSet<String> = BTreeSet::new();
        for ns in resources.kube(kinds::NAMESPACE) {
            if ns.name == "istio-system" {
                continue;
            }
            let injection = ns.labels.get(INJECTION_LABEL);
            let revision = ns.labels.get(REVISION_LABEL);
            let mut istio_labels = Vec::new();
            if let Some(v) = injection {
                istio_labels.push(format!("{INJECTION_LABEL}={v}"));
            }
            for l in [REVISION_LABEL, DATAPLANE_MODE_LABEL] {
                if let Some(v) = ns.labels.get(l)
                    && injection.is_none_or(|i| i == "enabled")
                {
                    istio_labels.push(format!("{l}={v}"));
                }
            }
            if istio_labels.len() > 1 {
                out.push(ns.message(&msg::NAMESPACE_MULTIPLE_INJECTION_LABELS, &[istio_labels.into()]));
            }
            if ns.labels.get(DATAPLANE_MODE_LABEL).is_some_and(|m| m == "ambient") {
                continue;
            }
            let cm_name = injector_config_map_name(revision.map(String::as_str).unwrap_or(""));
            if let Some(cm) = resources.kube(kinds::CONFIG_MAP).find(|cm| cm.name == cm_name) {
                enable_by_default = enable_namespaces_by_default(cm);
            }
            let injection = injection.map(String::as_str).unwrap_or("");
            if injection.is_empty() && revision.is_none() {
                if enable_by_default {
                    out.push(ns.message(&msg::NAMESPACE_INJECTION_ENABLED_BY_DEFAULT, &[]));
                } else {
                    out.push(message_at_leaf(
                        ns,
                        &msg::NAMESPACE_NOT_INJECTED,
                        &[(&ns.name).into(), (&ns.name).into()],
                        "metadata.name",
                    ));
                }
                continue;
            }
            if injection == "enabled" {
                injected.insert(ns.name.clone());
            }
        }

        for pod in resources.kube(kinds::POD) {
            if !injected.contains(pod.ns()) {
                continue;
            }
            let inject = pod.labels.get(SIDECAR_INJECT).or_else(|| pod.annotations.get(SIDECAR_INJECT));
            if inject.is_some_and(|v| v.eq_ignore_ascii_case("false")) {
                continue;
            }
            let spec = pod_spec(pod);
            if spec.host_network {
                continue;
            }
            if spec.proxy_image().is_empty() {
                let name = workload::full_name(pod.ns(), &pod.name);
                out.push(pod.message(&msg::POD_MISSING_PROXY, &[name.into()]));
            }
        }
    }
}

/// `sidecarInjectorWebhook.enableNamespacesByDefault` of the injector ConfigMap's `values` (JSON);
/// false when absent or malformed (Istio panics on a missing key; meshpilot reads it as false).
fn enable_namespaces_by_default(cm: &KubeObject) -> bool {
    injector_values(cm)
        .and_then(|v| v.get("sidecarInjectorWebhook")?.get("enableNamespacesByDefault")?.as_bool())
        .unwrap_or(false)
}

/// The injector ConfigMap's `data.values`, parsed as JSON.
fn injector_values(cm: &KubeObject) -> Option<Value> {
    let text = cm.value.get("data")?.get("values")?.as_str()?;
    serde_json::from_str(text).ok()
}

/// The proxy image the injector ConfigMap configures: `global.proxy.image` when it contains a `/`,
/// else `global.hub/global.proxy.image:global.tag`; empty when `values` is not JSON (Istio's
/// `GetIstioProxyImage`).
fn injector_proxy_image(cm: &KubeObject) -> String {
    let Some(values) = injector_values(cm) else { return String::new() };
    let global = values.get("global");
    let get = |v: Option<&Value>, k: &str| {
        v.and_then(|g| g.get(k)).and_then(Value::as_str).unwrap_or("").to_string()
    };
    let image = get(global.and_then(|g| g.get("proxy")), "image");
    if image.contains('/') {
        return image;
    }
    format!("{}/{}:{}", get(global, "hub"), image, get(global, "tag"))
}

/// `injection.ImageAnalyzer`: pods running a proxy image other than the injector's.
#[derive(Debug, Default)]
pub struct ImageAnalyzer;

impl AnalyzerTrait for ImageAnalyzer {
    fn name(&self) -> &str {
        "injection.ImageAnalyzer"
    }

    fn description(&self) -> &str {
        "Checks the image of auto-injection configured with the running proxies on pods"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::NAMESPACE, kinds::POD, kinds::CONFIG_MAP, kinds::MESH_CONFIG, PROXY_CONFIG]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let resources = ctx.resources();
        let proxy_images: BTreeMap<String, String> = resources
            .kube(kinds::CONFIG_MAP)
            .filter(|cm| cm.name.starts_with(workload::INJECTOR_CONFIG_MAP))
            .map(|cm| (cm.name.clone(), injector_proxy_image(cm)))
            .collect();
        if proxy_images.is_empty() {
            return;
        }
        let mut namespaces: BTreeMap<&str, &KubeObject> = BTreeMap::new();
        let mut injected: BTreeMap<&str, &str> = BTreeMap::new();
        for ns in resources.kube(kinds::NAMESPACE) {
            namespaces.insert(&ns.name, ns);
            match ns.labels.get(REVISION_LABEL) {
                Some(rev) => {
                    injected.insert(&ns.name, rev);
                }
                None if ns.labels.get(INJECTION_LABEL).is_some_and(|v| v == "enabled") => {
                    injected.insert(&ns.name, "default");
                }
                None => {}
            }
        }
        let resolver = ProxyConfigResolver::new(ctx);
        let mut mismatched: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for pod in resources.kube(kinds::POD) {
            let ns = pod.ns();
            let Some(rev) = injected.get(ns) else { continue };
            if pod.annotations.get("sidecar.istio.io/proxyImage").is_some_and(|v| !v.is_empty()) {
                continue;
            }
            let variant = resolver.image_type(pod);
            let Some(expected) = proxy_images.get(&injector_config_map_name(rev)) else { continue };
            let spec = pod_spec(pod);
            for c in spec.containers.iter().chain(&spec.init_containers).filter(|c| c.name == ISTIO_PROXY) {
                if c.image != *expected && c.image != format!("{expected}-{variant}") {
                    mismatched.entry(ns).or_default().push(pod.name.clone());
                }
            }
        }
        for (ns, mut pods) in mismatched {
            pods.sort();
            if let Some(ns_obj) = namespaces.get(ns) {
                out.push(ns_obj.message(&msg::PODS_ISTIO_PROXY_IMAGE_MISMATCH_IN_NAMESPACE, &[pods.into()]));
            }
        }
    }
}

/// The effective proxy image type (`imageType`) of a pod, from the mesh config's `defaultConfig`,
/// the root namespace's ProxyConfig, the pod namespace's ProxyConfig without selector, ProxyConfigs
/// whose selector the pod's labels satisfy, and the pod's `proxy.istio.io/config` annotation, each
/// overriding the previous one; `default` reads as none (Istio's `EffectiveProxyConfigResolver`).
struct ProxyConfigResolver {
    mesh: String,
    root: String,
    namespace: BTreeMap<String, String>,
    /// (`namespace/name`, selector labels, image type) of ProxyConfigs with a selector.
    workload: Vec<(String, BTreeMap<String, String>, String)>,
}

impl ProxyConfigResolver {
    fn new(ctx: &Context<'_>) -> ProxyConfigResolver {
        let mesh = ctx
            .mesh
            .get("defaultConfig")
            .and_then(|d| d.pointer("/image/imageType"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let root_ns = match ctx.mesh.root_namespace() {
            "" => "istio-system".to_string(),
            ns => ns.to_string(),
        };
        let mut resolver = ProxyConfigResolver {
            mesh,
            root: String::new(),
            namespace: BTreeMap::new(),
            workload: Vec::new(),
        };
        for config in ctx.istio(api::Kind::ProxyConfig) {
            let api::Spec::ProxyConfig(pc) = config.spec() else { continue };
            let config = &config.config;
            let image_type = pc.image.as_ref().map(|i| i.image_type.clone()).unwrap_or_default();
            if config.meta.namespace == root_ns {
                resolver.root = image_type;
            } else if let Some(selector) = &pc.selector {
                resolver.workload.push((
                    workload::full_name(&config.meta.namespace, &config.meta.name),
                    selector.match_labels.clone(),
                    image_type,
                ));
            } else {
                resolver.namespace.insert(config.meta.namespace.clone(), image_type);
            }
        }
        resolver
    }

    fn image_type(&self, pod: &KubeObject) -> String {
        let mut variant = self.mesh.as_str();
        if !self.root.is_empty() {
            variant = &self.root;
        }
        let ns = pod.ns();
        if let Some(v) = self.namespace.get(ns).filter(|v| !v.is_empty()) {
            variant = v;
        }
        for (key, selector, image_type) in &self.workload {
            // Istio compares the ProxyConfig's `namespace/name` by prefix with the pod's namespace.
            if !key.starts_with(ns) {
                continue;
            }
            if selector.iter().all(|(k, v)| pod.labels.get(k) == Some(v)) && !image_type.is_empty() {
                variant = image_type;
            }
        }
        let annotated = pod
            .annotations
            .get("proxy.istio.io/config")
            .and_then(|text| yaml_json(text))
            .and_then(|v| v.pointer("/image/imageType").and_then(Value::as_str).map(str::to_string));
        let variant = match annotated.as_deref() {
            Some(a) if !a.is_empty() => a.to_string(),
            _ => variant.to_string(),
        };
        if variant == "default" { String::new() } else { variant }
    }
}

/// `injection.ImageAutoAnalyzer`: `image: auto` in workloads no Istio webhook injects.
#[derive(Debug, Default)]
pub struct ImageAutoAnalyzer;

impl AnalyzerTrait for ImageAutoAnalyzer {
    fn name(&self) -> &str {
        "injection.ImageAutoAnalyzer"
    }

    fn description(&self) -> &str {
        "Makes sure that Pods and Deployments with `image: auto` are going to be injected"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::NAMESPACE, kinds::POD, kinds::DEPLOYMENT, kinds::MUTATING_WEBHOOK_CONFIGURATION]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let resources = ctx.resources();
        let mut webhooks: Vec<(Option<Value>, Option<Value>)> = Vec::new();
        for config in resources.kube(kinds::MUTATING_WEBHOOK_CONFIGURATION) {
            let Some(Value::Array(hooks)) = config.value.get("webhooks") else { continue };
            for hook in hooks {
                if workload::str_at(hook, "name").ends_with("istio.io") {
                    webhooks.push((
                        non_null(hook.get("namespaceSelector")),
                        non_null(hook.get("objectSelector")),
                    ));
                }
            }
        }
        for pod in resources.kube(kinds::POD) {
            if has_auto_image(&pod_spec(pod)) {
                out.push(
                    pod.message(
                        &msg::IMAGE_AUTO_WITHOUT_INJECTION_ERROR,
                        &["Pod".into(), (&pod.name).into()],
                    ),
                );
            }
        }
        for deployment in resources.kube(kinds::DEPLOYMENT) {
            let template = PodTemplate::of_deployment(deployment);
            if !has_auto_image(&template.spec) {
                continue;
            }
            let ns = match deployment.ns() {
                "" => "default",
                ns => ns,
            };
            let ns_labels =
                workload::find_namespace(resources, ns).map(|n| n.labels.clone()).unwrap_or_default();
            let injected = webhooks.iter().any(|(ns_sel, obj_sel)| {
                selector_matches(ns_sel.as_ref(), &ns_labels)
                    && selector_matches(obj_sel.as_ref(), &template.labels)
            });
            if !injected {
                out.push(deployment.message(
                    &msg::IMAGE_AUTO_WITHOUT_INJECTION_WARNING,
                    &["Deployment".into(), Arg::from(&deployment.name)],
                ));
            }
        }
    }
}

fn non_null(v: Option<&Value>) -> Option<Value> {
    v.filter(|v| !v.is_null()).cloned()
}

/// Whether a pod spec has an `istio-proxy` container (not init container) with `image: auto`.
fn has_auto_image(spec: &workload::PodSpec) -> bool {
    spec.containers.iter().any(|c| c.name == ISTIO_PROXY && c.image == "auto")
}

/// Whether a Kubernetes `LabelSelector` (JSON) selects `labels`: no selector selects everything; a
/// selector Kubernetes would reject selects nothing (Istio's `selectorMatches`).
pub(crate) fn selector_matches(selector: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else { return true };
    match model::selector::LabelSelector::from_json(selector, "selector") {
        Ok(s) => s.matches(labels),
        Err(_) => false,
    }
}

/// The first document of a YAML text as JSON; `None` when it is not YAML.
fn yaml_json(text: &str) -> Option<Value> {
    let doc = api::yaml::parse_documents(text).into_iter().next()?.ok()?;
    doc.root.map(|n| n.to_json())
}
