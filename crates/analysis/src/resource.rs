//! [`Resources`]: every object an analysis sees — Istio config as typed [`model::Config`]s
//! ([`IstioResource`]), everything else as [`KubeObject`]s — plus the mesh config, mesh networks and
//! the istio namespace (Istio's `IstiodAnalyzer` sources, `pkg/config/analysis/local`).
//!
//! Istio objects go through [`config::parse`], the reader of `meshpilot validate`: a document that
//! cannot be decoded (YAML syntax, unknown field, wrong type) is a load error (istioctl's "errors
//! parsing content"); a document that decodes but fails the kind's validation is kept, with its
//! findings, so the schema analyzers report them as IST0106 / IST0133 and the other analyzers still
//! see the object, as in Istio.

use std::{
    collections::{BTreeMap, HashSet},
    path::{Path, PathBuf},
    sync::Arc,
};

use api::{
    Kind, Spec,
    de::from_node,
    meta::ObjectMeta,
    schema::{self, Lookup},
    yaml::{self, Node, Value},
};
use config::parse::{self, Finding, ParseOptions, ParsedDocument, UnknownFields};
use model::Config;
use serde_json::Value as Json;

use crate::{
    message::{Message, Origin},
    msg::{Arg, MessageType},
};

/// Type keys naming the kinds analyzers read: `group/Kind`, or just `Kind` for the core group
/// (Istio's `gvk.*` without the version). Used for [`Analyzer::inputs`](crate::Analyzer::inputs)
/// and [`Resources::kube`].
pub mod kinds {
    #![allow(missing_docs)]
    pub const SERVICE: &str = "Service";
    pub const POD: &str = "Pod";
    pub const NAMESPACE: &str = "Namespace";
    pub const NODE: &str = "Node";
    pub const SECRET: &str = "Secret";
    pub const CONFIG_MAP: &str = "ConfigMap";
    pub const ENDPOINTS: &str = "Endpoints";
    pub const DEPLOYMENT: &str = "apps/Deployment";
    pub const MUTATING_WEBHOOK_CONFIGURATION: &str =
        "admissionregistration.k8s.io/MutatingWebhookConfiguration";
    pub const VALIDATING_WEBHOOK_CONFIGURATION: &str =
        "admissionregistration.k8s.io/ValidatingWebhookConfiguration";
    pub const CUSTOM_RESOURCE_DEFINITION: &str = "apiextensions.k8s.io/CustomResourceDefinition";
    pub const K8S_GATEWAY: &str = "gateway.networking.k8s.io/Gateway";
    pub const K8S_GATEWAY_CLASS: &str = "gateway.networking.k8s.io/GatewayClass";
    pub const HTTP_ROUTE: &str = "gateway.networking.k8s.io/HTTPRoute";
    pub const MESH_CONFIG: &str = "MeshConfig";
    pub const MESH_NETWORKS: &str = "MeshNetworks";
    pub const VIRTUAL_SERVICE: &str = "networking.istio.io/VirtualService";
    pub const GATEWAY: &str = "networking.istio.io/Gateway";
    pub const DESTINATION_RULE: &str = "networking.istio.io/DestinationRule";
    pub const SERVICE_ENTRY: &str = "networking.istio.io/ServiceEntry";
    pub const SIDECAR: &str = "networking.istio.io/Sidecar";
    pub const ENVOY_FILTER: &str = "networking.istio.io/EnvoyFilter";
    pub const WORKLOAD_ENTRY: &str = "networking.istio.io/WorkloadEntry";
    pub const REQUEST_AUTHENTICATION: &str = "security.istio.io/RequestAuthentication";
    pub const AUTHORIZATION_POLICY: &str = "security.istio.io/AuthorizationPolicy";
    pub const PEER_AUTHENTICATION: &str = "security.istio.io/PeerAuthentication";
    pub const TELEMETRY: &str = "telemetry.istio.io/Telemetry";
    pub const WASM_PLUGIN: &str = "extensions.istio.io/WasmPlugin";

    /// The type key of an Istio kind (`networking.istio.io/VirtualService`).
    pub fn istio(kind: api::Kind) -> String {
        format!("{}/{}", kind.schema().group, kind.as_str())
    }

    /// The type key of `apiVersion` + `kind` (`apps/v1` + `Deployment` → `apps/Deployment`).
    pub fn of(api_version: &str, kind: &str) -> String {
        match api_version.rsplit_once('/') {
            Some((group, _)) if !group.is_empty() => format!("{group}/{kind}"),
            _ => kind.to_string(),
        }
    }

    /// Kinds istioctl does not read from files (`kuberesource.DefaultExcludedSchemas`): only a cluster
    /// (`--use-kube`) provides them, so analyzers that need them are skipped in a files-only run.
    pub const RUNTIME: &[&str] = &[SERVICE, NAMESPACE, NODE, POD, SECRET];
}

/// Namespaces whose objects analysis never reads (Istio's `inject.IgnoredNamespaces`).
pub const IGNORED_NAMESPACES: &[&str] =
    &["kube-system", "kube-public", "kube-node-lease", "local-path-storage"];

/// Kubernetes kinds without a namespace (objects of these kinds never get the default namespace).
const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "Node",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "GatewayClass",
    "APIService",
];

/// What every analyzed object offers: where it came from, its source tree (for field lines) and
/// message construction.
pub trait Resource {
    /// The object's origin (kind, namespace, name, file, start line).
    fn origin(&self) -> &Origin;

    /// The object's document tree, when it was read from a file (field paths resolve to lines).
    fn root(&self) -> Option<&Node>;

    /// The object's annotations.
    fn annotations(&self) -> &BTreeMap<String, String>;

    /// A message about the object, pointing at its start.
    fn message(&self, kind: &'static MessageType, args: &[Arg]) -> Message {
        Message::new(kind, self.origin().clone(), args)
    }

    /// A message about the field at `path` (`spec.gateways[0]`; a map key with dots goes in
    /// brackets: `spec.selector[app.kubernetes.io/name]`); the origin's line becomes the field's line
    /// (or its deepest existing parent's), as istioctl's `util.ErrorLine`.
    fn message_at(&self, kind: &'static MessageType, args: &[Arg], path: &str) -> Message {
        let mut m = self.message(kind, args);
        if let Some(root) = self.root() {
            let line = find_field(root, path).mark.line;
            if line > 0 {
                m.origin.line = Some(line);
            }
        }
        m.path = Some(path.to_string());
        m
    }
}

/// The node at `path`: `.`-separated names, `[i]` list indexes and `[key]` map keys (which may hold
/// dots); the deepest existing node when the path does not exist all the way.
pub fn find_field<'a>(root: &'a Node, path: &str) -> &'a Node {
    let mut node = root;
    let mut rest = path;
    while !rest.is_empty() {
        let segment;
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').unwrap_or(after.len());
            segment = &after[..end];
            rest = after.get(end + 1..).unwrap_or("");
            let child = match (&node.value, segment.parse::<usize>()) {
                (Value::Seq(items), Ok(i)) => items.get(i),
                (Value::Map(_), _) => node.get(segment),
                _ => None,
            };
            match child {
                Some(c) => node = c,
                None => return node,
            }
            continue;
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        segment = &rest[..end];
        rest = &rest[end..];
        if segment.is_empty() {
            continue;
        }
        match node.get(segment) {
            Some(c) => node = c,
            None => return node,
        }
    }
    node
}

/// An Istio config object.
#[derive(Clone, Debug)]
pub struct IstioResource {
    /// The typed object. Its namespace is what the source gave, or the default namespace (which may
    /// be empty: the analyzer test table reads objects without one).
    pub config: Config,
    /// Where it came from.
    pub origin: Origin,
    /// Validation errors of the kind (reported by the schema analyzers as IST0106).
    pub errors: Vec<Finding>,
    /// Validation warnings (IST0133).
    pub warnings: Vec<Finding>,
    root: Option<Arc<Node>>,
}

impl IstioResource {
    /// The object's kind.
    pub fn kind(&self) -> Kind {
        self.config.kind()
    }

    /// The object's namespace (empty when read without one and no default namespace).
    pub fn namespace(&self) -> &str {
        &self.config.meta.namespace
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        &self.config.meta.name
    }

    /// The typed spec.
    pub fn spec(&self) -> &Spec {
        &self.config.spec
    }
}

impl Resource for IstioResource {
    fn origin(&self) -> &Origin {
        &self.origin
    }
    fn root(&self) -> Option<&Node> {
        self.root.as_deref()
    }
    fn annotations(&self) -> &BTreeMap<String, String> {
        &self.config.meta.annotations
    }
}

/// Any other object (Kubernetes core kinds, webhooks, CRDs, Gateway API, …) as JSON with its
/// identifying fields pulled out.
#[derive(Clone, Debug)]
pub struct KubeObject {
    /// `apiVersion` as written (`apps/v1`).
    pub api_version: String,
    /// `kind` (`Deployment`).
    pub kind: String,
    /// The type key (`apps/Deployment`, see [`kinds`]).
    pub type_key: String,
    /// Namespace; `None` for cluster-scoped kinds and objects read without one.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// The whole object.
    pub value: Json,
    /// Where it came from.
    pub origin: Origin,
    root: Option<Arc<Node>>,
}

impl KubeObject {
    /// The namespace, or `""`.
    pub fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }

    /// The value at a JSON pointer (`/spec/ports`), if present.
    pub fn pointer(&self, pointer: &str) -> Option<&Json> {
        self.value.pointer(pointer)
    }

    /// `spec` (or `Null`).
    pub fn spec(&self) -> &Json {
        self.value.get("spec").unwrap_or(&Json::Null)
    }
}

impl Resource for KubeObject {
    fn origin(&self) -> &Origin {
        &self.origin
    }
    fn root(&self) -> Option<&Node> {
        self.root.as_deref()
    }
    fn annotations(&self) -> &BTreeMap<String, String> {
        &self.annotations
    }
}

/// A document that could not be read (istioctl's "errors parsing content").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// The source name (file as given, `-`, or `kubernetes`).
    pub source: String,
    /// What went wrong, with the line and field path when known.
    pub message: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "errors parsing content \"{}\": {}", self.source, self.message)
    }
}

/// The mesh config as analyzers read it: Istio's defaults (`mesh.DefaultMeshConfig`, the fields
/// analyzers use) overlaid with the given file's top-level fields. Kept as JSON with Istio's field names.
#[derive(Clone, Debug, PartialEq)]
pub struct MeshConfig {
    /// The merged config.
    pub value: serde_json::Map<String, Json>,
}

impl Default for MeshConfig {
    fn default() -> Self {
        let value = serde_json::json!({
            "ingressClass": "istio",
            "ingressService": "istio-ingressgateway",
            "ingressControllerMode": "STRICT",
            "rootNamespace": "istio-system",
            "trustDomain": "cluster.local",
            "enableAutoMtls": true,
            "enableTracing": true,
            "accessLogFile": "",
            "outboundTrafficPolicy": {"mode": "ALLOW_ANY"},
            "defaultConfig": {
                "configPath": "./etc/istio/proxy",
                "binaryPath": "/usr/local/bin/envoy",
                "serviceCluster": "istio-proxy",
                "discoveryAddress": "istiod.istio-system.svc:15012",
                "proxyAdminPort": 15000,
                "statusPort": 15020,
            },
        });
        let Json::Object(value) = value else { unreachable!("a JSON object literal") };
        MeshConfig { value }
    }
}

impl MeshConfig {
    /// Reads a MeshConfig YAML (the `mesh` key of the `istio` ConfigMap, istioctl's
    /// `--meshConfigFile`) on top of the defaults: each top-level field replaces the default's,
    /// except `defaultConfig`, whose fields are merged (Istio's `ApplyMeshConfigDefaults`).
    ///
    /// # Errors
    /// The text is not YAML, or not a mapping.
    pub fn from_yaml(text: &str) -> Result<MeshConfig, String> {
        let mut mesh = MeshConfig::default();
        let value = yaml_value(text)?;
        match value {
            Json::Null => {}
            Json::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), mesh.value.get_mut(&k), v) {
                        ("defaultConfig", Some(Json::Object(old)), Json::Object(new)) => old.extend(new),
                        (_, _, v) => {
                            mesh.value.insert(k, v);
                        }
                    }
                }
            }
            other => return Err(format!("mesh config: expected a mapping, found {other}")),
        }
        Ok(mesh)
    }

    /// A top-level field.
    pub fn get(&self, field: &str) -> Option<&Json> {
        self.value.get(field)
    }

    /// `ingressControllerMode` (`STRICT`, `DEFAULT` or `OFF`).
    pub fn ingress_controller_mode(&self) -> &str {
        self.get("ingressControllerMode").and_then(Json::as_str).unwrap_or("STRICT")
    }

    /// `ingressService` (`istio-ingressgateway`).
    pub fn ingress_service(&self) -> &str {
        self.get("ingressService").and_then(Json::as_str).unwrap_or("istio-ingressgateway")
    }

    /// `rootNamespace` (`istio-system`).
    pub fn root_namespace(&self) -> &str {
        self.get("rootNamespace").and_then(Json::as_str).unwrap_or("istio-system")
    }
}

fn yaml_value(text: &str) -> Result<Json, String> {
    let mut docs = yaml::parse_documents(text).into_iter();
    match docs.next() {
        None => Ok(Json::Null),
        Some(Err(e)) => Err(format!("line {}: {}", e.mark.line, e.message)),
        Some(Ok(doc)) => Ok(doc.root.map_or(Json::Null, |n| n.to_json())),
    }
}

/// How objects are read.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Namespace given to namespaced objects that name none; empty keeps them without one (the
    /// analyzer test table), istioctl uses the `--namespace` / kubeconfig namespace (`default`).
    pub default_namespace: String,
    /// Read the kinds of [`kinds::RUNTIME`] (Service, Pod, …) from files too. istioctl does not
    /// (its files-only runs skip analyzers needing them); the analyzer test harness does.
    pub runtime_kinds_from_files: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { default_namespace: "default".into(), runtime_kinds_from_files: false }
    }
}

/// Everything one analysis sees.
#[derive(Clone, Debug)]
pub struct Resources {
    istio: Vec<IstioResource>,
    kube: Vec<KubeObject>,
    keys: HashSet<(String, String, String)>,
    /// The mesh config.
    pub mesh: MeshConfig,
    /// The mesh networks (`{networks: {…}}`), Istio's default is empty.
    pub mesh_networks: Json,
    /// Istio's namespace (`istio-system`).
    pub istio_namespace: String,
    /// How files are read.
    pub options: LoadOptions,
    /// `true` once a cluster source was added: every kind is available.
    cluster: bool,
    /// Documents that could not be read.
    pub load_errors: Vec<LoadError>,
    /// Documents skipped because of their kind in a files-only run (`Kind name (file)`).
    pub skipped: Vec<String>,
}

impl Resources {
    /// No objects, the default mesh config, `istio-system`.
    pub fn new(options: LoadOptions) -> Resources {
        Resources {
            istio: Vec::new(),
            kube: Vec::new(),
            keys: HashSet::new(),
            mesh: MeshConfig::default(),
            mesh_networks: serde_json::json!({"networks": {}}),
            istio_namespace: "istio-system".into(),
            options,
            cluster: false,
            load_errors: Vec::new(),
            skipped: Vec::new(),
        }
    }

    /// Every Istio object of `kind`, in load order.
    pub fn istio(&self, kind: Kind) -> impl Iterator<Item = &IstioResource> + '_ {
        self.istio.iter().filter(move |r| r.kind() == kind)
    }

    /// Every Istio object.
    pub fn all_istio(&self) -> &[IstioResource] {
        &self.istio
    }

    /// Every other object of the type key `type_key` (see [`kinds`]), in load order.
    pub fn kube<'a>(&'a self, type_key: &'a str) -> impl Iterator<Item = &'a KubeObject> + 'a {
        self.kube.iter().filter(move |o| o.type_key == type_key)
    }

    /// Every other object.
    pub fn all_kube(&self) -> &[KubeObject] {
        &self.kube
    }

    /// The Istio object `kind` `namespace`/`name`.
    pub fn find_istio(&self, kind: Kind, namespace: &str, name: &str) -> Option<&IstioResource> {
        self.istio(kind).find(|r| r.namespace() == namespace && r.name() == name)
    }

    /// The other object `type_key` `namespace`/`name` (`namespace` empty for cluster-scoped kinds).
    pub fn find_kube(&self, type_key: &str, namespace: &str, name: &str) -> Option<&KubeObject> {
        self.kube.iter().find(|o| o.type_key == type_key && o.ns() == namespace && o.name == name)
    }

    /// Objects of `type_key` in `namespace` (any namespace when `None`) whose labels match every
    /// entry of `selector` (Kubernetes' equality-based selector; an empty selector matches all).
    pub fn kube_selected<'a>(
        &'a self,
        type_key: &'a str,
        namespace: Option<&'a str>,
        selector: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = &'a KubeObject> + 'a {
        self.kube(type_key).filter(move |o| {
            namespace.is_none_or(|ns| o.ns() == ns)
                && selector.iter().all(|(k, v)| o.labels.get(k) == Some(v))
        })
    }

    /// The object with this origin's kind, namespace and name, if loaded.
    pub fn by_origin(&self, origin: &Origin) -> Option<&dyn Resource> {
        let ns = origin.namespace.as_deref().unwrap_or("");
        if let Some(r) = self
            .istio
            .iter()
            .find(|r| r.origin.kind == origin.kind && r.namespace() == ns && r.name() == origin.name)
        {
            return Some(r);
        }
        self.kube
            .iter()
            .find(|o| o.kind == origin.kind && o.ns() == ns && o.name == origin.name)
            .map(|o| o as &dyn Resource)
    }

    /// Whether objects of `type_key` can be present: always after a cluster source was added; in a
    /// files-only run, every kind but [`kinds::RUNTIME`] (unless
    /// [`LoadOptions::runtime_kinds_from_files`]). An analyzer with an input that is not available is
    /// skipped, as istioctl's `RemoveSkipped`.
    pub fn is_available(&self, type_key: &str) -> bool {
        self.cluster || self.options.runtime_kinds_from_files || !kinds::RUNTIME.contains(&type_key)
    }

    /// Marks that a cluster source is (or will be) added: every kind becomes available.
    pub fn set_cluster_source(&mut self) {
        self.cluster = true;
    }

    /// Reads the mesh config from `text` (see [`MeshConfig::from_yaml`]).
    ///
    /// # Errors
    /// As [`MeshConfig::from_yaml`].
    pub fn set_mesh_config_yaml(&mut self, text: &str) -> Result<(), String> {
        self.mesh = MeshConfig::from_yaml(text)?;
        Ok(())
    }

    /// Reads the mesh networks from `text` (`networks: {name: {endpoints, gateways}}`).
    ///
    /// # Errors
    /// The text is not YAML, or not a mapping.
    pub fn set_mesh_networks_yaml(&mut self, text: &str) -> Result<(), String> {
        match yaml_value(text)? {
            Json::Null => self.mesh_networks = serde_json::json!({"networks": {}}),
            v @ Json::Object(_) => self.mesh_networks = v,
            other => return Err(format!("mesh networks: expected a mapping, found {other}")),
        }
        Ok(())
    }

    /// Adds istioctl's default resources (`AddDefaultResources`): unless the mesh config's
    /// `ingressControllerMode` is `OFF`, a dummy `istio: ingressgateway` Pod and the mesh's ingress
    /// Service (ports 80 http2, 443 https, 31400 tcp, 15443 tls) in the istio namespace. They are read
    /// like files, so a files-only istioctl run drops them (Pods and Services are runtime kinds).
    pub fn add_default_resources(&mut self) {
        if self.mesh.ingress_controller_mode() == "OFF" {
            return;
        }
        let ns = self.istio_namespace.clone();
        let text = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    istio: ingressgateway\n  name: istio-ingressgateway-dummypod\n  namespace: {ns}\nspec:\n  containers:\n  - name: istio-proxy\n---\n\
             apiVersion: v1\nkind: Service\nmetadata:\n  name: {svc}\n  namespace: {ns}\nspec:\n  ports:\n  \
             - {{name: http2, nodePort: 31380, port: 80, protocol: TCP, targetPort: 80}}\n  \
             - {{name: https, nodePort: 31390, port: 443, protocol: TCP, targetPort: 443}}\n  \
             - {{name: tcp, nodePort: 31400, port: 31400, protocol: TCP, targetPort: 31400}}\n  \
             - {{name: tls, nodePort: 31447, port: 15443, protocol: TCP, targetPort: 15443}}\n  \
             selector:\n    istio: ingressgateway\n",
            svc = self.mesh.ingress_service()
        );
        self.add_text("", &text, false);
    }

    /// Reads a file (`-` for standard input) as a file source.
    ///
    /// # Errors
    /// The file cannot be read, is larger than [`yaml::MAX_FILE_BYTES`] or is not UTF-8 (document
    /// errors go to [`Resources::load_errors`]).
    pub fn add_file(&mut self, path: &Path) -> std::io::Result<()> {
        let text = yaml::read_config_text(path)?;
        self.add_text(&path.display().to_string(), &text, true);
        Ok(())
    }

    /// Reads every document of `text` (from the file `name`; `""` for synthetic input). With
    /// `reference` the origins carry the file name and line. Returns the number of objects added.
    /// Documents that cannot be read are recorded in [`Resources::load_errors`].
    pub fn add_text(&mut self, name: &str, text: &str, reference: bool) -> usize {
        let mut added = 0;
        for doc in yaml::parse_documents(text) {
            match doc {
                Err(err) => self.load_errors.push(LoadError {
                    source: name.to_string(),
                    message: format!("line {}: YAML syntax error: {}", err.mark.line, err.message),
                }),
                Ok(yaml::Document { root: None, .. }) => {}
                Ok(yaml::Document { index, root: Some(root), .. }) => {
                    added += self.add_node(name, index, Arc::new(root), reference, false);
                }
            }
        }
        added
    }

    /// Adds one object read from a cluster (as the API server returns it; a `List` adds its items).
    /// Returns the number of objects added; objects that cannot be read are recorded in
    /// [`Resources::load_errors`].
    pub fn add_cluster_object(&mut self, value: &Json) -> usize {
        self.cluster = true;
        let node = Node::from_json(value, yaml::Mark::default());
        self.add_node("kubernetes", 0, Arc::new(node), false, true)
    }

    fn add_node(
        &mut self,
        name: &str,
        index: usize,
        root: Arc<Node>,
        reference: bool,
        cluster: bool,
    ) -> usize {
        let kind = root.get("kind").and_then(Node::as_str).unwrap_or_default();
        if kind == "List" || (kind.ends_with("List") && root.get("items").is_some()) {
            let mut added = 0;
            if let Some(Node { value: Value::Seq(items), .. }) = root.get("items") {
                for item in items {
                    added += self.add_node(name, index, Arc::new(item.clone()), reference, cluster);
                }
            }
            return added;
        }
        let options = ParseOptions {
            default_namespace: self.options.default_namespace.clone(),
            istio_namespace: self.istio_namespace.clone(),
            // istioctl analyze decodes with Kubernetes' non-strict decoder.
            unknown_fields: UnknownFields::Ignore,
            ..ParseOptions::default()
        };
        let mut added = 0;
        for doc in parse::parse_node(name, index, &root, &options) {
            added += usize::from(self.add_document(doc, &root, reference, cluster));
        }
        added
    }

    fn add_document(
        &mut self,
        doc: ParsedDocument,
        root: &Arc<Node>,
        reference: bool,
        cluster: bool,
    ) -> bool {
        let written_ns = (!doc.namespace.is_empty()).then(|| doc.namespace.clone());
        let source = doc.file.clone();
        let describe = |e: &Finding| {
            if e.path.is_empty() {
                format!("line {}: {}", e.line, e.message)
            } else {
                format!("line {}: {}: {}", e.line, e.path, e.message)
            }
        };
        if doc.kind.is_empty() {
            for e in &doc.errors {
                self.load_errors.push(LoadError { source: source.clone(), message: describe(e) });
            }
            if doc.errors.is_empty() && doc.api_version.is_empty() {
                // istioctl's file reader (`parseChunk`): a mapping with neither apiVersion nor kind
                // (a Helm values file, a mesh config) is a parse error.
                self.load_errors.push(LoadError {
                    source: source.clone(),
                    message: format!(
                        "line {}: unable to parse resource with no group, version and kind",
                        doc.line
                    ),
                });
            }
            return false;
        }
        let namespace = if CLUSTER_SCOPED.contains(&doc.kind.as_str()) {
            None
        } else {
            written_ns.or_else(|| {
                (!self.options.default_namespace.is_empty()).then(|| self.options.default_namespace.clone())
            })
        };
        let filter_ns = if doc.kind == "Namespace" { Some(doc.name.as_str()) } else { namespace.as_deref() };
        if filter_ns.is_some_and(|ns| IGNORED_NAMESPACES.contains(&ns)) {
            return false;
        }
        let origin = Origin {
            kind: doc.kind.clone(),
            namespace: namespace.clone(),
            name: doc.name.clone(),
            file: (reference && !source.is_empty()).then(|| PathBuf::from(&source)),
            line: (reference && doc.line > 0).then_some(doc.line),
        };
        let keep_root = Some(root.clone());
        // Gateway API objects stay Kubernetes objects here, as istioctl analyze sees them.
        let istio = match schema::lookup(&doc.api_version, &doc.kind) {
            Lookup::Istio(s) => !s.kind.is_gateway_api(),
            // istioctl has no schema for a removed Istio API or an unserved version of an Istio kind:
            // its file reader skips the document without a word.
            Lookup::UnservedVersion(s) if !s.kind.is_gateway_api() => return false,
            Lookup::Removed(_) => return false,
            Lookup::UnservedVersion(_) | Lookup::Other => false,
        };
        if istio {
            let config = match doc.config {
                Some(config) => Some(config),
                None => decode_invalid(root),
            };
            let Some(mut config) = config else {
                for e in &doc.errors {
                    self.load_errors.push(LoadError {
                        source: source.clone(),
                        message: format!("{} {}: {}", doc.kind, doc.name, describe(e)),
                    });
                }
                return false;
            };
            config.meta.namespace = namespace.clone().unwrap_or_default();
            let key = (kinds::istio(config.kind()), config.meta.namespace.clone(), config.meta.name.clone());
            if !self.keys.insert(key) {
                return false;
            }
            self.istio.push(IstioResource {
                config,
                origin,
                errors: doc.errors,
                warnings: doc.warnings,
                root: keep_root,
            });
            return true;
        }
        let type_key = kinds::of(&doc.api_version, &doc.kind);
        if !cluster && !self.options.runtime_kinds_from_files && kinds::RUNTIME.contains(&type_key.as_str()) {
            self.skipped.push(format!("{} {}", doc.kind, doc.name));
            return false;
        }
        let value = root.to_json();
        let string_map = |field: &str| -> BTreeMap<String, String> {
            value
                .pointer(&format!("/metadata/{field}"))
                .and_then(Json::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), String::from)))
                        .collect()
                })
                .unwrap_or_default()
        };
        let key = (type_key.clone(), namespace.clone().unwrap_or_default(), doc.name.clone());
        if !self.keys.insert(key) {
            return false;
        }
        self.kube.push(KubeObject {
            api_version: doc.api_version,
            kind: doc.kind,
            type_key,
            namespace,
            name: doc.name,
            labels: string_map("labels"),
            annotations: string_map("annotations"),
            value,
            origin,
            root: keep_root,
        });
        true
    }
}

/// Decodes an Istio document whose only errors are the kind's validation findings: the object
/// analysis keeps so the schema analyzers can report them. Unknown fields are ignored, as istioctl
/// analyze's non-strict decoder does. `None` when the document does not decode (wrong type,
/// unserved version, removed kind).
fn decode_invalid(root: &Node) -> Option<Config> {
    let api_version = root.get("apiVersion").and_then(Node::as_str)?;
    let kind = root.get("kind").and_then(Node::as_str)?;
    let Lookup::Istio(schema) = schema::lookup(api_version, kind) else { return None };
    let meta = match root.get("metadata") {
        None => ObjectMeta::default(),
        Some(node) => from_node::<ObjectMeta>(node, "metadata").ok()?.0,
    };
    let (spec, _unknown) = Spec::from_node(schema.kind, root.get("spec")).ok()?;
    Some(Config {
        meta: model::ConfigMeta {
            gvk: api::GroupVersionKind::from_api_version(api_version, kind),
            name: meta.name,
            namespace: meta.namespace,
            labels: meta.labels,
            annotations: meta.annotations,
            resource_version: meta.resource_version,
            generation: meta.generation,
            creation_timestamp: meta.creation_timestamp,
            domain_suffix: "cluster.local".into(),
        },
        spec,
        status: root.get("status").filter(|n| n.value != Value::Null).map(Node::to_json),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_options() -> LoadOptions {
        LoadOptions { default_namespace: String::new(), runtime_kinds_from_files: true }
    }

    #[test]
    fn invalid_istio_objects_are_kept_with_their_findings_and_undecodable_ones_are_load_errors() {
        let mut r = Resources::new(test_options());
        let added = r.add_text(
            "x.yaml",
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a}\nspec:\n  hosts: [a]\n---\n\
             apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: b}\nspec:\n  hosts: {x: 1}\n---\n\
             apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: c}\nspec:\n  hostz: [a]\n",
            true,
        );
        assert_eq!(added, 2);
        let a = r.find_istio(Kind::VirtualService, "", "a").expect("kept");
        assert!(!a.errors.is_empty(), "a VirtualService without routes is invalid");
        assert_eq!(a.origin.to_string(), "VirtualService a x.yaml:1");
        // As istioctl analyze: unknown fields are ignored; c is read, and is invalid for having no hosts.
        let c = r.find_istio(Kind::VirtualService, "", "c").expect("kept");
        assert!(c.errors.iter().all(|e| !e.message.contains("hostz")), "{:?}", c.errors);
        assert!(!c.errors.is_empty());
        assert!(
            r.load_errors.iter().all(|e| e.message.starts_with("VirtualService b: ")),
            "{:?}",
            r.load_errors
        );
        assert!(r.load_errors.iter().any(|e| e.to_string().contains("spec.hosts")), "{:?}", r.load_errors);
    }

    #[test]
    fn kindless_documents_are_load_errors_and_removed_kinds_are_skipped() {
        let mut r = Resources::new(test_options());
        let added = r.add_text(
            "x.yaml",
            "defaultConfig: {}\n---\napiVersion: v1\nmetadata: {name: n}\n---\n\
             apiVersion: config.istio.io/v1alpha2\nkind: QuotaSpec\nmetadata: {name: q}\nspec: {rules: []}\n---\n\
             apiVersion: networking.istio.io/v9\nkind: Gateway\nmetadata: {name: g}\n",
            true,
        );
        assert_eq!(added, 0);
        let errors: Vec<String> = r.load_errors.iter().map(|e| e.message.clone()).collect();
        assert_eq!(errors, ["line 1: unable to parse resource with no group, version and kind"]);
    }

    #[test]
    fn runtime_kinds_are_skipped_from_files_unless_asked() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: x}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n";
        let mut files = Resources::new(LoadOptions::default());
        assert_eq!(files.add_text("f.yaml", text, true), 1);
        assert!(!files.is_available(kinds::POD));
        assert_eq!(files.find_kube(kinds::DEPLOYMENT, "default", "d").map(|d| d.name.as_str()), Some("d"));
        let mut test = Resources::new(test_options());
        assert_eq!(test.add_text("f.yaml", text, true), 2);
        let selector = BTreeMap::from([("app".to_string(), "x".to_string())]);
        assert_eq!(test.kube_selected(kinds::POD, None, &selector).count(), 1);
    }

    #[test]
    fn field_paths_resolve_keys_with_dots() {
        let root = yaml::parse_documents(
            "spec:\n  selector:\n    app.kubernetes.io/name: x\n  list:\n  - a\n  - b\n",
        )
        .remove(0)
        .unwrap()
        .root
        .unwrap();
        assert_eq!(find_field(&root, "spec.selector[app.kubernetes.io/name]").mark.line, 3);
        assert_eq!(find_field(&root, "spec.list[1]").mark.line, 6);
        assert_eq!(find_field(&root, "spec.missing.deeper").mark.line, 2);
    }

    #[test]
    fn default_resources_follow_the_mesh_config() {
        let mut r = Resources::new(test_options());
        r.add_default_resources();
        assert!(r.find_kube(kinds::SERVICE, "istio-system", "istio-ingressgateway").is_some());
        assert!(r.find_kube(kinds::POD, "istio-system", "istio-ingressgateway-dummypod").is_some());
        let mut off = Resources::new(test_options());
        off.set_mesh_config_yaml("ingressControllerMode: \"OFF\"\n").unwrap();
        off.add_default_resources();
        assert!(off.all_kube().is_empty());
    }

    #[test]
    fn ignored_namespaces_and_cluster_scoped_kinds() {
        let mut r = Resources::new(LoadOptions::default());
        r.add_text(
            "f.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: kube-system}\n---\n\
             apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: w}\n",
            true,
        );
        assert_eq!(r.all_kube().len(), 1);
        assert_eq!(r.all_kube()[0].origin.friendly_name(), "MutatingWebhookConfiguration w");
    }
}
