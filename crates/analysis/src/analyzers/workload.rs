//! Pod, Deployment and injection helpers shared by the analyzers of the `injection`, `deployment`,
//! `authn` packages (Istio's `pkg/config/analysis/analyzers/util`: `in_mesh.go`,
//! `config.go`, `constants.go`). Kubernetes objects are read from their JSON form; a field of the
//! wrong type reads as absent, as a typed Go decode of a malformed object would leave it empty.

use std::collections::BTreeMap;

use api::yaml::{self, Node};
use serde_json::Value;

use crate::{
    Message,
    msg::{Arg, MessageType},
    resource::{KubeObject, Resource, Resources, kinds},
};

/// The sidecar container's name (`istio-proxy`).
pub const ISTIO_PROXY: &str = "istio-proxy";
/// The namespace label of the classic injection (`istio-injection`).
pub const INJECTION_LABEL: &str = "istio-injection";
/// The revision label (`istio.io/rev`).
pub const REVISION_LABEL: &str = "istio.io/rev";
/// The ambient data-plane label (`istio.io/dataplane-mode`).
pub const DATAPLANE_MODE_LABEL: &str = "istio.io/dataplane-mode";
/// The per-workload injection label and annotation (`sidecar.istio.io/inject`).
pub const SIDECAR_INJECT: &str = "sidecar.istio.io/inject";
/// Name of the injector ConfigMap of the default revision (`istio-sidecar-injector`).
pub const INJECTOR_CONFIG_MAP: &str = "istio-sidecar-injector";

/// One container of a pod spec, with the fields the analyzers read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Container {
    /// `name`.
    pub name: String,
    /// `image` (empty when absent).
    pub image: String,
    /// `securityContext.runAsUser`.
    pub run_as_user: Option<i64>,
    /// `env` as (name, literal value) pairs; `valueFrom` entries have an empty value.
    pub env: Vec<(String, String)>,
}

/// The fields of a `PodSpec` the analyzers read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSpec {
    /// `containers`.
    pub containers: Vec<Container>,
    /// `initContainers` (native sidecars run there).
    pub init_containers: Vec<Container>,
    /// `hostNetwork`.
    pub host_network: bool,
    /// `securityContext.runAsUser`.
    pub run_as_user: Option<i64>,
}

impl PodSpec {
    /// Reads a `PodSpec` JSON node (`spec` of a Pod, `spec.template.spec` of a Deployment); a missing
    /// node is an empty spec.
    pub fn from_json(spec: Option<&Value>) -> PodSpec {
        let Some(spec) = spec else { return PodSpec::default() };
        PodSpec {
            containers: containers(spec.get("containers")),
            init_containers: containers(spec.get("initContainers")),
            host_network: spec.get("hostNetwork").and_then(Value::as_bool).unwrap_or(false),
            run_as_user: run_as_user(spec),
        }
    }

    /// The image of the first container named `istio-proxy`, looking in `containers` and then in
    /// `initContainers`; empty when there is none (Istio's `hasIstioProxy` / the proxy image loops).
    pub fn proxy_image(&self) -> &str {
        self.containers
            .iter()
            .chain(&self.init_containers)
            .find(|c| c.name == ISTIO_PROXY)
            .map(|c| c.image.as_str())
            .unwrap_or("")
    }
}

fn containers(node: Option<&Value>) -> Vec<Container> {
    let Some(Value::Array(items)) = node else { return Vec::new() };
    items
        .iter()
        .map(|c| Container {
            name: str_at(c, "name").to_string(),
            image: str_at(c, "image").to_string(),
            run_as_user: run_as_user(c),
            env: match c.get("env") {
                Some(Value::Array(env)) => env
                    .iter()
                    .map(|e| (str_at(e, "name").to_string(), str_at(e, "value").to_string()))
                    .collect(),
                _ => Vec::new(),
            },
        })
        .collect()
}

fn run_as_user(node: &Value) -> Option<i64> {
    node.get("securityContext")?.get("runAsUser")?.as_i64()
}

/// The string at `key` of a JSON object, empty when absent or not a string.
pub fn str_at<'a>(node: &'a Value, key: &str) -> &'a str {
    node.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A string map (`labels`, `selector`) from JSON; a value that is not a string is read as its JSON
/// text (`1`, `true`), as the object's own labels are (see [`KubeObject::labels`]).
pub fn string_map(node: Option<&Value>) -> BTreeMap<String, String> {
    match node {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string)))
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// A Deployment's pod template: its labels, annotations and pod spec (`spec.template`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodTemplate {
    /// `spec.template.metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.template.metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.template.spec`.
    pub spec: PodSpec,
}

impl PodTemplate {
    /// Reads `spec.template` of a Deployment's JSON form.
    pub fn of_deployment(deployment: &KubeObject) -> PodTemplate {
        let template = deployment.value.get("spec").and_then(|s| s.get("template"));
        let meta = template.and_then(|t| t.get("metadata"));
        PodTemplate {
            labels: string_map(meta.and_then(|m| m.get("labels"))),
            annotations: string_map(meta.and_then(|m| m.get("annotations"))),
            spec: PodSpec::from_json(template.and_then(|t| t.get("spec"))),
        }
    }
}

/// A Pod's spec (`spec`).
pub fn pod_spec(pod: &KubeObject) -> PodSpec {
    PodSpec::from_json(pod.value.get("spec"))
}

pub use crate::util::full_name;

/// The injector ConfigMap of a revision: `istio-sidecar-injector`, or `istio-sidecar-injector-<rev>`
/// for a revision other than empty or `default` (Istio's `util.GetInjectorConfigMapName`).
pub fn injector_config_map_name(revision: &str) -> String {
    if revision.is_empty() || revision == "default" {
        INJECTOR_CONFIG_MAP.to_string()
    } else {
        format!("{INJECTOR_CONFIG_MAP}-{revision}")
    }
}

/// Whether an object belongs to Istio's control plane: it has an `istio` label or `release=istio`
/// (Istio's `util.IsIstioControlPlane`).
pub fn is_istio_control_plane(labels: &BTreeMap<String, String>) -> bool {
    labels.contains_key("istio") || labels.get("release").is_some_and(|r| r == "istio")
}

/// Whether a workload is (or will be) in the mesh (Istio's `util.inMesh`): it has an `istio-proxy`
/// container with an image; else its `sidecar.istio.io/inject` label, then annotation, decides
/// (`"true"` only); else its Namespace object's `istio-injection=enabled`; else no.
pub fn in_mesh(
    resources: &Resources,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    namespace: &str,
    spec: &PodSpec,
    include_init_containers: bool,
) -> bool {
    let proxy = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().filter(|_| include_init_containers))
        .find(|c| c.name == ISTIO_PROXY);
    if proxy.is_some_and(|c| !c.image.is_empty()) {
        return true;
    }
    if let Some(v) = labels.get(SIDECAR_INJECT) {
        return v == "true";
    }
    if let Some(v) = annotations.get(SIDECAR_INJECT) {
        return v == "true";
    }
    match find_namespace(resources, namespace) {
        Some(ns) => ns.labels.get(INJECTION_LABEL).is_some_and(|v| v == "enabled"),
        None => false,
    }
}

/// The Namespace object named `name`, if loaded.
pub fn find_namespace<'a>(resources: &'a Resources, name: &str) -> Option<&'a KubeObject> {
    resources.find_kube(kinds::NAMESPACE, "", name)
}

/// A message about the field at `path` (`spec.ports[0].name`) when that field is a scalar written in
/// the object's source, else about the object itself. This is where istioctl's `util.ErrorLine`
/// finds a line: its field map holds scalar leaves only, so a message about a mapping (an EnvoyFilter
/// patch value) or a missing field stays on the object's first line, and identical messages about
/// one object are then merged as istioctl merges them.
pub fn message_at_leaf<R: Resource + ?Sized>(
    r: &R,
    kind: &'static MessageType,
    args: &[Arg],
    path: &str,
) -> Message {
    match r.root().and_then(|root| leaf(root, path)) {
        Some(_) => r.message_at(kind, args, path),
        None => r.message(kind, args),
    }
}

/// The scalar node at `path`, if the whole path exists and ends on a scalar. The last segments may
/// form one key containing dots (`spec.selector.matchLabels.app.kubernetes.io/name`), as in Istio's
/// field paths.
fn leaf<'a>(root: &'a Node, path: &str) -> Option<&'a Node> {
    let segments: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
    let mut node = root;
    for (n, segment) in segments.iter().enumerate() {
        let (name, indexes) = segment.find('[').map_or((*segment, ""), |i| (&segment[..i], &segment[i..]));
        if !name.is_empty() {
            match node.get(name) {
                Some(child) => node = child,
                None if indexes.is_empty() => {
                    return node.get(&segments[n..].join(".")).filter(|l| is_scalar(l));
                }
                None => return None,
            }
        }
        for index in indexes.split(['[', ']']).filter(|s| !s.is_empty()) {
            node = match (&node.value, index.parse::<usize>()) {
                (yaml::Value::Seq(items), Ok(i)) => items.get(i)?,
                _ => return None,
            };
        }
    }
    Some(node).filter(|l| is_scalar(l))
}

fn is_scalar(node: &Node) -> bool {
    !matches!(node.value, yaml::Value::Seq(_) | yaml::Value::Map(_))
}
