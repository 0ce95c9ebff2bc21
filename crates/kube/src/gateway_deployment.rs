//! Automated deployment of Gateway API Gateways (Istio's `DeploymentController`,
//! `pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go`): for every `gateway.networking.k8s.io`
//! Gateway of a class whose controller is `istio.io/gateway-controller` (the built-in class `istio`),
//! the objects of the injection config's `kube-gateway` template, rendered as istiod renders them and
//! server-side applied with Istio's field manager, by the leader of the per-revision lock
//! `istio-gateway-deployment-<rev>` only. The GatewayClass `istio` itself is created when absent
//! (Istio's `ClassController`).
//!
//! ```text
//!  leader of istio-gateway-deployment-<rev>:
//!    create GatewayClass istio if absent
//!    watch Gateways, GatewayClasses, ConfigMaps ─┐
//!    injection config / ProxyConfigs changed ────┴► template input ─► kube-gateway template
//!        ─► overlays (class defaults, parametersRef) ─► server-side apply each object
//! ```
//!
//! **Template input** ([`template_data`], istiod's `derivedInput`): the Gateway as the Go template
//! sees it through struct embedding (`.Name`, `.Namespace`, `.UID`, `.Labels`, `.Annotations`,
//! `.ObjectMeta`, `.TypeMeta`, `.Spec`, `.Status`), and `GatewayClass`, `DeploymentName` and
//! `ServiceAccount` (`<gateway>-<class>`, or the annotations `gateway.istio.io/name-override` /
//! `gateway.istio.io/service-account`), `Ports` ([`service_ports`]), `ServiceType`
//! (`networking.istio.io/service-type`, default `LoadBalancer`), `ClusterID`, `KubeVersion` (the API
//! server's major and minor as one number, `133`), `Revision`, `NativeSidecars`, `ProxyUID`/`ProxyGID`
//! (1337, or the namespace's OpenShift ranges: [`proxy_ids`]), `CompliancePolicy`
//! (`COMPLIANCE_POLICY`), `InfrastructureLabels`/`InfrastructureAnnotations`
//! (`spec.infrastructure.labels`/`annotations` without keys under `gateway.networking.k8s.io/`, else
//! the Gateway's own), `GatewayNameLabel`, `IsEastWestGateway` (false), `ControllerLabel`,
//! `ProxyImage` (as the injector's), `ProxyConfig` — the effective proxy config of a workload in the
//! Gateway's namespace labelled `gateway.networking.k8s.io/gateway-name: <gateway>` (mesh
//! `defaultConfig`, the root namespace's and the namespace's `ProxyConfig`, then the selecting one;
//! istiod's `GetProxyConfigOrDefault`, [`inject::proxy_config`]) — `MeshConfig` and `Values`.
//!
//! **Overlays** ([`apply_overlay`], istiod's `applyOverlay`): each rendered object is patched by the
//! oldest ConfigMap of the system namespace labelled `gateway.istio.io/defaults-for-class=<class>`,
//! then by the ConfigMap of the Gateway's `spec.infrastructure.parametersRef` (core `ConfigMap`, the
//! Gateway's namespace; any other kind is an error, as a missing ConfigMap is). Their keys
//! `deployment`, `service`, `serviceAccount`, `horizontalPodAutoscaler` and `podDisruptionBudget`
//! (any other key is an error) hold YAML merged into the object of that kind as a Kubernetes
//! strategic merge patch ([`inject::smp`]): maps merge, `null` deletes, lists with a patch merge key
//! merge by it (a pod template's containers, volumes, env, … by name, container ports by
//! `containerPort`, a Service's ports by `port`, ownerReferences by `uid`, a ServiceAccount's secrets
//! by name), `finalizers` take the union, other lists are replaced; `$patch: delete|replace` on list
//! elements. Not implemented: `$retainKeys`, `$setElementOrder`, `$deleteFromPrimitiveList` and
//! `$patch` on maps (istiod accepts them). The HorizontalPodAutoscaler and PodDisruptionBudget are
//! applied only when an overlay names them. An overlay may not change the name, namespace, uid,
//! ownerReferences, finalizers or other identity fields ("illegal metadata change").
//!
//! **Apply** ([`apply`], istiod's `apply`): only the template's kinds (Deployment, DaemonSet,
//! Service, ServiceAccount, HorizontalPodAutoscaler, PodDisruptionBudget), in the Gateway's
//! namespace, named as the Deployment or ServiceAccount or prefixed by the Gateway's name; the
//! `gateway.istio.io/managed` label set; an existing object without that label is left alone
//! (`canManage`), an existing one's resourceVersion is sent (no lost update); a Deployment still
//! selecting on the pre-1.24 `istio.io/gateway-name` label keeps its selector.
//!
//! A Gateway with a hostname address, or several addresses, is not managed (Istio's `IsManaged` with
//! manual deployment enabled, its default). The annotation `gateway.istio.io/controller-version` is
//! written (`5`, through the status subresource) as istiod's `ManagedGatewayControllerVersion`
//! decides; a Gateway with a higher or unreadable version is left to that controller.
//!
//! **Failures.** With no injection config, or none with a `kube-gateway` template, or a template or
//! overlay that fails, the Gateway's objects are not applied; the error is logged as istiod logs it
//! ("error rendering templates"), counted in `meshpilot_gateway_deployment_errors{stage}` and listed
//! by [`DeploymentFailures`] (`/debug/configstatusz`, `invalidObjects`) until the Gateway renders;
//! other Gateways are unaffected.
//!
//! **Where meshpilot differs.** ListenerSets are not read for the Service's ports; the waypoint,
//! east-west and agentgateway classes are not deployed (ambient is off in istiod by default).
//! Objects are re-applied when their Gateway (generation, labels, annotations), class or overlay
//! ConfigMaps change, and when the injection config, mesh config or `ProxyConfig` resources in force
//! change (checked every [`DeploymentOptions::recheck`]); not when someone edits the generated
//! objects (istiod also watches those) or the namespace. Deleting a Gateway leaves the objects to the
//! Kubernetes garbage collector through their ownerReferences, as in Istio.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use gtmpl_ng::{Number, Value as Tv};
use inject::{
    injector::{Injector, InjectorState, NativeSidecars, ProxyConfigSource},
    proxy_config::ProxyConfigs,
    view,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use model::Shutdown;
use serde_json::{Value, json};

use crate::{
    client::{self, KubeError},
    leader::{
        GATEWAY_DEPLOYMENT_CONTROLLER, LeaderElection, LeaderElectionOptions, LockScope, run_while_leading,
    },
};

/// Istio's Gateway controller name (`PILOT_GATEWAY_API_CONTROLLER_NAME`), also the field manager of
/// its server-side applies.
pub const GATEWAY_CONTROLLER: &str = "istio.io/gateway-controller";
/// The built-in GatewayClass (`PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME`).
pub const DEFAULT_GATEWAY_CLASS: &str = "istio";
/// Its description, as Istio writes it.
pub const DEFAULT_GATEWAY_CLASS_DESCRIPTION: &str = "The default Istio GatewayClass";
/// The label marking objects this controller manages.
pub const MANAGED_LABEL: &str = "gateway.istio.io/managed";
/// Its value: the controller name with `/` as `-` (also the template's `ControllerLabel`).
pub const MANAGED_VALUE: &str = "istio.io-gateway-controller";
/// Gateway name label (also the selector).
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";
/// Gateway class label.
pub const GATEWAY_CLASS_LABEL: &str = "gateway.networking.k8s.io/gateway-class-name";
/// The injection template of class `istio`.
pub const TEMPLATE: &str = "kube-gateway";
/// Label of the system namespace's ConfigMaps holding a class's default overlays.
pub const CLASS_DEFAULTS_LABEL: &str = "gateway.istio.io/defaults-for-class";
/// The Gateway annotation naming the controller version that manages it.
pub const CONTROLLER_VERSION_ANNOTATION: &str = "gateway.istio.io/controller-version";
/// Istio's controller version (1.18 and later).
pub const CONTROLLER_VERSION: i64 = 5;
/// Overlay keys, sorted (as istiod lists them in its error).
pub const SUPPORTED_OVERLAYS: [&str; 5] =
    ["deployment", "horizontalPodAutoscaler", "podDisruptionBudget", "service", "serviceAccount"];
const REQUIRED_OVERLAYS: [&str; 2] = ["horizontalPodAutoscaler", "podDisruptionBudget"];
const APPLY_KINDS: [(&str, &str); 6] = [
    ("Deployment", "deployments"),
    ("DaemonSet", "daemonsets"),
    ("Service", "services"),
    ("ServiceAccount", "serviceaccounts"),
    ("HorizontalPodAutoscaler", "horizontalpodautoscalers"),
    ("PodDisruptionBudget", "poddisruptionbudgets"),
];

/// The Gateways whose objects could not be rendered or applied, with the reason, until they are
/// (for `/debug/configstatusz`). Clones share the list.
#[derive(Clone, Debug, Default)]
pub struct DeploymentFailures(Arc<Mutex<BTreeMap<(String, String), String>>>);

impl DeploymentFailures {
    fn set(&self, namespace: &str, name: &str, reason: Option<String>) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let key = (namespace.to_string(), name.to_string());
        match reason {
            Some(r) => map.insert(key, r),
            None => map.remove(&key),
        };
    }

    /// (namespace, name, reason) of each failing Gateway, sorted.
    pub fn list(&self) -> Vec<(String, String, String)> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.iter().map(|((ns, n), r)| (ns.clone(), n.clone(), r.clone())).collect()
    }
}

/// Settings of the deployment controller.
#[derive(Clone)]
pub struct DeploymentOptions {
    /// Control-plane revision (`""` for the default; the lock's suffix).
    pub revision: String,
    /// The cluster's ID (`--clusterID`, the template's `ClusterID`).
    pub cluster_id: String,
    /// The control plane's namespace (`POD_NAMESPACE`: class defaults ConfigMaps are read there).
    pub system_namespace: String,
    /// The injection config in force (templates, values, mesh config); `None`: nothing can be
    /// rendered (istiod's empty `WebhookConfig`).
    pub injector: Option<Arc<Injector>>,
    /// The `ProxyConfig` resources of the current push context; `None`: none.
    pub proxy_configs: Option<ProxyConfigSource>,
    /// Where render and apply failures are listed.
    pub failures: DeploymentFailures,
    /// Election settings (the lock is `istio-gateway-deployment-<revision>`).
    pub leader: LeaderElectionOptions,
    /// Watch retry backoff: first delay and cap.
    pub backoff: (Duration, Duration),
    /// How often the injection config and the `ProxyConfig` resources are checked for a change.
    pub recheck: Duration,
}

impl std::fmt::Debug for DeploymentOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentOptions")
            .field("revision", &self.revision)
            .field("cluster_id", &self.cluster_id)
            .field("system_namespace", &self.system_namespace)
            .field("injector", &self.injector.is_some())
            .field("proxy_configs", &self.proxy_configs.is_some())
            .field("leader", &self.leader)
            .field("backoff", &self.backoff)
            .field("recheck", &self.recheck)
            .finish()
    }
}

impl Default for DeploymentOptions {
    fn default() -> Self {
        DeploymentOptions {
            revision: String::new(),
            cluster_id: "Kubernetes".into(),
            system_namespace: "istio-system".into(),
            injector: None,
            proxy_configs: None,
            failures: DeploymentFailures::default(),
            leader: LeaderElectionOptions::default(),
            backoff: (Duration::from_millis(800), Duration::from_secs(30)),
            recheck: Duration::from_secs(1),
        }
    }
}

/// The API resource of `gateway.networking.k8s.io/v1` `kind` (`Gateway`, `GatewayClass`).
pub fn gateway_api_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect())
        .unwrap_or_default()
}

/// Whether Istio provisions the Gateway's infrastructure (`IsManaged`): no address, or one IP address.
pub fn is_managed(gateway: &Value) -> bool {
    match gateway["spec"]["addresses"].as_array().map(Vec::as_slice) {
        None | Some([]) => true,
        Some([one]) => matches!(one["type"].as_str(), None | Some("IPAddress")),
        Some(_) => false,
    }
}

/// The Service ports of a Gateway's listeners (Istio's `extractServicePorts`, see the module docs).
pub fn service_ports(gateway: &Value) -> Vec<Value> {
    let mut ports =
        vec![json!({"name": "status-port", "port": 15021, "protocol": "TCP", "appProtocol": "tcp"})];
    let mut numbers = BTreeSet::new();
    let mut used: BTreeSet<String> = BTreeSet::from(["status-port".to_string()]);
    for (i, l) in gateway["spec"]["listeners"].as_array().into_iter().flatten().enumerate() {
        let Some(port) = l["port"].as_i64() else { continue };
        if !numbers.insert(port) {
            continue;
        }
        let protocol = l["protocol"].as_str().unwrap_or_default().to_ascii_lowercase();
        let mut name: String = l["name"].as_str().unwrap_or_default().replace('.', "-");
        name.truncate(63);
        if name.is_empty() {
            name = format!("{protocol}-{i}");
        }
        let name = unique_port_name(&name, port, &mut used);
        ports.push(json!({"name": name, "port": port, "protocol": "TCP", "appProtocol": protocol}));
    }
    ports
}

fn unique_port_name(name: &str, port: i64, used: &mut BTreeSet<String>) -> String {
    let mut name = name.to_string();
    name.truncate(63);
    let mut candidate = name.clone();
    let mut suffix = format!("-{port}");
    while used.contains(&candidate) {
        let mut trimmed = name.clone();
        if trimmed.len() + suffix.len() > 63 {
            trimmed.truncate(63 - suffix.len());
        }
        candidate = format!("{trimmed}{suffix}");
        suffix.push('x');
    }
    used.insert(candidate.clone());
    candidate
}

fn infrastructure(gateway: &Value, field: &str) -> BTreeMap<String, String> {
    let infra = &gateway["spec"]["infrastructure"][field];
    if infra.is_object() {
        string_map(infra).into_iter().filter(|(k, _)| !k.starts_with("gateway.networking.k8s.io/")).collect()
    } else {
        string_map(&gateway["metadata"][field])
    }
}

/// istiod's `TemplateInput` less the Gateway itself and the cluster's facts ([`RenderEnv`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateInput {
    /// The Gateway's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// `spec.gatewayClassName`.
    pub class: String,
    /// `DeploymentName`: `<name>-<class>` or `gateway.istio.io/name-override`.
    pub deployment_name: String,
    /// `ServiceAccount`: `<name>-<class>` or `gateway.istio.io/service-account`.
    pub service_account: String,
    /// `ServiceType`: `networking.istio.io/service-type`, default `LoadBalancer`.
    pub service_type: String,
    /// `Ports` ([`service_ports`]).
    pub ports: Vec<Value>,
    /// `InfrastructureLabels`.
    pub labels: BTreeMap<String, String>,
    /// `InfrastructureAnnotations`.
    pub annotations: BTreeMap<String, String>,
}

/// The template input of `gateway` (JSON as read from the API server).
///
/// # Errors
/// The Gateway has no name, namespace, uid or `spec.gatewayClassName` (the message names the field).
pub fn template_input(gateway: &Value) -> Result<TemplateInput, String> {
    let meta = &gateway["metadata"];
    let field = |v: &Value, name: &str| {
        v.as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("Gateway: {name} is missing"))
    };
    let name = field(&meta["name"], "metadata.name")?;
    let namespace = field(&meta["namespace"], "metadata.namespace")?;
    field(&meta["uid"], "metadata.uid")?;
    let class = field(&gateway["spec"]["gatewayClassName"], "spec.gatewayClassName")?;
    let own = string_map(&meta["annotations"]);
    let default_name = format!("{name}-{class}");
    let pick = |key: &str, default: &str| own.get(key).cloned().unwrap_or_else(|| default.to_string());
    Ok(TemplateInput {
        deployment_name: pick("gateway.istio.io/name-override", &default_name),
        service_account: pick("gateway.istio.io/service-account", &default_name),
        service_type: pick("networking.istio.io/service-type", "LoadBalancer"),
        ports: service_ports(gateway),
        labels: infrastructure(gateway, "labels"),
        annotations: infrastructure(gateway, "annotations"),
        name,
        namespace,
        class,
    })
}

/// What a render needs beyond the Gateway: the injection config in force and the cluster's facts.
#[derive(Clone, Copy, Debug)]
pub struct RenderEnv<'a> {
    /// The injection config (templates, values, mesh config, revision, native sidecars).
    pub injection: &'a InjectorState,
    /// The `ProxyConfig` resources in force.
    pub proxy_configs: &'a ProxyConfigs,
    /// `ClusterID`.
    pub cluster_id: &'a str,
    /// `KubeVersion` (`-1` when unknown, as istiod).
    pub kube_version: i64,
    /// `ProxyUID`, `ProxyGID` ([`proxy_ids`]).
    pub proxy_ids: (i64, i64),
    /// The overlays in order: class defaults, then `parametersRef` (ConfigMap data).
    pub overlays: &'a [BTreeMap<String, String>],
}

fn text(s: impl Into<String>) -> Tv {
    Tv::String(s.into())
}

fn int(n: i64) -> Tv {
    Tv::Number(Number::from(n))
}

fn struct_map(view: Tv) -> HashMap<String, Tv> {
    match view {
        Tv::Map(m) | Tv::Object(m) => m,
        _ => HashMap::new(),
    }
}

/// The effective proxy config of `gateway`'s pods (see the module docs), proto-JSON.
pub fn gateway_proxy_config(gateway: &Value, env: &RenderEnv<'_>) -> Value {
    let name = gateway["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = gateway["metadata"]["namespace"].as_str().unwrap_or_default();
    let labels = BTreeMap::from([(GATEWAY_NAME_LABEL.to_string(), name.to_string())]);
    env.proxy_configs.effective(&env.injection.mesh["defaultConfig"], namespace, &labels, &Value::Null)
}

/// The `kube-gateway` template's data for `gateway` (istiod's `derivedInput`, see the module docs).
pub fn template_data(gateway: &Value, input: &TemplateInput, env: &RenderEnv<'_>) -> Tv {
    let state = env.injection;
    // The embedded *gateway.Gateway: its ObjectMeta's and TypeMeta's fields are promoted.
    let object_meta = inject::view::object_meta(&gateway["metadata"]);
    let mut data = struct_map(object_meta.clone());
    let type_meta = view::kube(&json!({
        "kind": gateway["kind"].as_str().unwrap_or("Gateway"),
        "apiVersion": gateway["apiVersion"].as_str().unwrap_or("gateway.networking.k8s.io/v1"),
    }));
    data.extend(struct_map(type_meta.clone()));
    data.insert("ObjectMeta".into(), object_meta);
    data.insert("TypeMeta".into(), type_meta);
    for (json_name, go_name) in [("spec", "Spec"), ("status", "Status")] {
        let value = if gateway[json_name].is_object() { &gateway[json_name] } else { &json!({}) };
        data.insert(go_name.into(), view::kube(value));
    }
    let proxy_config = gateway_proxy_config(gateway, env);
    let image = inject::inject::proxy_image(
        &state.values,
        &proxy_config,
        &gateway["metadata"]["annotations"],
        state.values.proxy_image_name(),
        true,
    );
    let fields = [
        ("GatewayClass", text(&input.class)),
        ("DeploymentName", text(&input.deployment_name)),
        ("ServiceAccount", text(&input.service_account)),
        ("Ports", Tv::Array(input.ports.iter().map(view::kube).collect())),
        ("ServiceType", text(&input.service_type)),
        ("ClusterID", text(env.cluster_id)),
        ("KubeVersion", int(env.kube_version)),
        ("Revision", text(&state.revision)),
        ("NativeSidecars", Tv::Bool(!matches!(state.native_sidecars, NativeSidecars::Disabled))),
        ("ProxyUID", int(env.proxy_ids.0)),
        ("ProxyGID", int(env.proxy_ids.1)),
        ("CompliancePolicy", text(std::env::var("COMPLIANCE_POLICY").unwrap_or_default())),
        ("InfrastructureLabels", view::plain(&json!(input.labels))),
        ("InfrastructureAnnotations", view::plain(&json!(input.annotations))),
        ("GatewayNameLabel", text(GATEWAY_NAME_LABEL)),
        ("IsEastWestGateway", Tv::Bool(false)),
        ("ControllerLabel", text(MANAGED_VALUE)),
        ("ProxyImage", text(image)),
        (
            "ProxyConfig",
            view::proxy_config(&proxy_config, inject::mesh::clean_proxy_config_json(&proxy_config)),
        ),
        ("MeshConfig", view::proto(&state.mesh, Some(state.mesh.to_string()))),
        ("Values", view::plain(&state.values.json)),
    ];
    data.extend(fields.into_iter().map(|(k, v)| (k.to_string(), v)));
    Tv::Map(data)
}

/// The documents of a multi-document YAML text as istiod splits them (`yml.SplitString`: at lines
/// starting with `---`, trimmed, empty ones dropped).
pub fn split_documents(text: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    for line in text.split_inclusive('\n') {
        if line.starts_with("---") {
            parts.push(String::new());
        } else if let Some(last) = parts.last_mut() {
            last.push_str(line);
        }
    }
    parts.into_iter().map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

/// The objects Istio would apply for `gateway`: the `kube-gateway` template of `env`'s injection
/// config rendered over [`template_data`], each object with the overlays applied
/// ([`apply_overlay`]), in the template's order. The caller decides whether the Gateway is managed
/// ([`is_managed`], [`controller_version`]) and of Istio's class.
///
/// # Errors
/// No `kube-gateway` template, a render failure, a document that is not a YAML object, an overlay
/// failure; the messages follow istiod's.
pub fn render(gateway: &Value, input: &TemplateInput, env: &RenderEnv<'_>) -> Result<Vec<Value>, String> {
    let templates = &env.injection.config.templates;
    if !templates.contains(TEMPLATE) {
        return Err(format!("no {TEMPLATE:?} template defined"));
    }
    let rendered =
        templates.render(TEMPLATE, template_data(gateway, input, env)).map_err(|e| e.to_string())?;
    let mut objects = Vec::new();
    for doc in split_documents(&rendered) {
        let object = inject::yaml::object(&doc).map_err(|e| format!("failed to find kind: {e}"))?;
        if let Some(object) = apply_overlay(object, env.overlays)? {
            objects.push(object);
        }
    }
    Ok(objects)
}

/// List merge keys of each kind's strategic merge patch (field name → `patchMergeKey`).
fn merge_keys(kind: &str) -> &'static [(&'static str, &'static str)] {
    const METADATA: &[(&str, &str)] = &[("ownerReferences", "uid")];
    const SERVICE: &[(&str, &str)] = &[("ownerReferences", "uid"), ("ports", "port")];
    const SERVICE_ACCOUNT: &[(&str, &str)] = &[("ownerReferences", "uid"), ("secrets", "name")];
    match kind {
        "Deployment" => inject::smp::POD_MERGE_KEYS,
        "Service" => SERVICE,
        "ServiceAccount" => SERVICE_ACCOUNT,
        _ => METADATA,
    }
}

/// Applies the overlays to one rendered object (istiod's `applyOverlay`, see the module docs):
/// `Ok(None)` for a HorizontalPodAutoscaler or PodDisruptionBudget no overlay names.
///
/// # Errors
/// A kind without an overlay key, an unsupported key, an overlay that is not YAML, an illegal
/// metadata change.
pub fn apply_overlay(
    mut object: Value,
    overlays: &[BTreeMap<String, String>],
) -> Result<Option<Value>, String> {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let key = match kind.as_str() {
        "Deployment" => "deployment",
        "Service" => "service",
        "ServiceAccount" => "serviceAccount",
        "HorizontalPodAutoscaler" => "horizontalPodAutoscaler",
        "PodDisruptionBudget" => "podDisruptionBudget",
        other => return Err(format!("unknown overlay kind {other:?}")),
    };
    let before = object["metadata"].clone();
    let mut applied = false;
    for overlays in overlays {
        if let Some(bad) = overlays.keys().find(|k| !SUPPORTED_OVERLAYS.contains(&k.as_str())) {
            return Err(format!(
                "unsupported overlay {bad:?} (supported: [{}])",
                SUPPORTED_OVERLAYS.join(" ")
            ));
        }
        let Some(text) = overlays.get(key) else { continue };
        let patch = if text.trim().is_empty() {
            json!({})
        } else {
            inject::yaml::object(text).map_err(|e| format!("strategic merge patch failed: {e}"))?
        };
        inject::smp::merge_with_keys(&mut object, &patch, merge_keys(&kind));
        applied = true;
    }
    if !applied && REQUIRED_OVERLAYS.contains(&key) {
        return Ok(None);
    }
    let after = &object["metadata"];
    let identity = [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "ownerReferences",
        "finalizers",
    ];
    if identity.iter().any(|f| before[f] != after[f])
        || !before["managedFields"].is_null()
        || !after["managedFields"].is_null()
    {
        return Err("illegal metadata change".into());
    }
    Ok(Some(object))
}

/// An OpenShift ID block, `start/size` or `start-end`: (start, end).
fn id_block(text: &str) -> Option<(u32, u32)> {
    if let Some((start, size)) = text.split_once('/') {
        let (start, size): (u32, u32) = (start.trim().parse().ok()?, size.trim().parse().ok()?);
        return Some((start, start.checked_add(size.checked_sub(1)?)?));
    }
    let (start, end) = text.split_once('-')?;
    let (start, end): (u32, u32) = (start.trim().parse().ok()?, end.trim().parse().ok()?);
    (end >= start).then_some((start, end))
}

/// The proxy's UID and GID for a namespace with `annotations` (istiod's `GetProxyIDs`): 1337, or the
/// end of OpenShift's `openshift.io/sa.scc.uid-range` and of the first block of
/// `openshift.io/sa.scc.supplemental-groups` (that falling back to the UID range).
pub fn proxy_ids(annotations: &Value) -> (i64, i64) {
    let uid_range = annotations["openshift.io/sa.scc.uid-range"].as_str().filter(|s| !s.is_empty());
    let uid = uid_range.and_then(id_block).map_or(1337, |(_, end)| i64::from(end));
    let groups = annotations["openshift.io/sa.scc.supplemental-groups"]
        .as_str()
        .filter(|s| !s.is_empty())
        .or(uid_range);
    let gid = groups
        .and_then(|g| g.split(',').map(id_block).collect::<Option<Vec<_>>>())
        .and_then(|blocks| blocks.first().copied())
        .map_or(1337, |(_, end)| i64::from(end));
    (uid, gid)
}

/// istiod's `ManagedGatewayControllerVersion`: (the version on the Gateway, whether to write ours,
/// whether to manage it).
pub fn controller_version(gateway: &Value) -> (Option<String>, bool, bool) {
    let Some(current) = gateway["metadata"]["annotations"][CONTROLLER_VERSION_ANNOTATION].as_str() else {
        return (None, true, true);
    };
    let existing = Some(current.to_string());
    match current.parse::<i64>() {
        Err(_) => (existing, false, false),
        Ok(n) if n > CONTROLLER_VERSION => (existing, false, false),
        Ok(n) if n == CONTROLLER_VERSION => (existing, false, true),
        Ok(_) => (existing, true, true),
    }
}

/// The ConfigMap a Gateway's `spec.infrastructure.parametersRef` names (namespace, name), if any
/// (istiod's `fetchParameters`).
///
/// # Errors
/// A reference to anything but a core ConfigMap.
pub fn parameters_ref(gateway: &Value) -> Result<Option<(String, String)>, String> {
    let r = &gateway["spec"]["infrastructure"]["parametersRef"];
    if !r.is_object() {
        return Ok(None);
    }
    let (group, kind) = (r["group"].as_str().unwrap_or_default(), r["kind"].as_str().unwrap_or_default());
    if kind == "ConfigMap" && group.is_empty() {
        let namespace = gateway["metadata"]["namespace"].as_str().unwrap_or_default();
        return Ok(Some((namespace.to_string(), r["name"].as_str().unwrap_or_default().to_string())));
    }
    Err(format!("invalid parameters: unknown infrastructure parameters type {group}/{kind}"))
}

fn api_resource_of(object: &Value) -> Result<ApiResource, String> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let plural = APPLY_KINDS.iter().find(|(k, _)| *k == kind).map(|(_, p)| *p).ok_or_else(|| {
        let kinds: Vec<&str> = APPLY_KINDS.iter().map(|(k, _)| *k).collect();
        format!("unexpected object kind {kind:?}, only {kinds:?} are allowed")
    })?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Ok(ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    })
}

/// Server-side applies one rendered object of `input`'s Gateway (field manager
/// [`GATEWAY_CONTROLLER`], forced) with istiod's safeguards (see the module docs): `Ok(false)` when
/// an existing object without the [`MANAGED_LABEL`] is left alone.
///
/// # Errors
/// A kind, namespace or name the template may not write, or the API server's error.
pub async fn apply(client: &Client, object: &Value, input: &TemplateInput) -> Result<bool, String> {
    let resource = api_resource_of(object)?;
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    if namespace != input.namespace {
        return Err(format!(
            "object namespace {namespace:?} does not match gateway namespace {:?}",
            input.namespace
        ));
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if name != input.deployment_name && name != input.service_account && !name.starts_with(&input.name) {
        return Err(format!(
            "object name {name:?} does not match expected pattern (expected {:?} or {:?} or prefix of {:?})",
            input.deployment_name, input.service_account, input.name
        ));
    }
    let mut object = object.clone();
    if !object["metadata"]["labels"].is_object() {
        object["metadata"]["labels"] = json!({});
    }
    object["metadata"]["labels"][MANAGED_LABEL] = MANAGED_VALUE.into();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let action = format!("apply {} {namespace}/{name}", resource.kind);
    let kube_error = |e| KubeError::from_kube(e, &action).to_string();
    if let Some(existing) = api.get_opt(name).await.map_err(kube_error)? {
        if !existing.metadata.labels.as_ref().is_some_and(|l| l.contains_key(MANAGED_LABEL)) {
            tracing::debug!(%name, "exists without {MANAGED_LABEL}; left alone");
            return Ok(false);
        }
        // Our look at it must not be stale.
        object["metadata"]["resourceVersion"] = existing.metadata.resource_version.clone().into();
        // A Deployment made before Istio 1.24 selects on istio.io/gateway-name: keep its selector.
        let legacy = &existing.data["spec"]["selector"]["matchLabels"]["istio.io/gateway-name"];
        if resource.kind == "Deployment" && legacy.as_str().is_some_and(|s| !s.is_empty()) {
            object["spec"]["selector"] = existing.data["spec"]["selector"].clone();
            object["spec"]["template"]["metadata"]["labels"]["istio.io/gateway-name"] =
                existing.data["spec"]["template"]["metadata"]["labels"]["istio.io/gateway-name"].clone();
        }
    }
    api.patch(name, &PatchParams::apply(GATEWAY_CONTROLLER).force(), &Patch::Apply(&object))
        .await
        .map_err(kube_error)?;
    Ok(true)
}

/// Creates the GatewayClass `istio` (controller [`GATEWAY_CONTROLLER`]) when absent; `Ok(true)` when
/// created.
///
/// # Errors
/// [`KubeError`] other than "already exists".
pub async fn ensure_default_class(client: &Client) -> Result<bool, KubeError> {
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &gateway_api_resource("GatewayClass", "gatewayclasses"));
    let action = format!("create GatewayClass {DEFAULT_GATEWAY_CLASS}");
    if api.get_opt(DEFAULT_GATEWAY_CLASS).await.map_err(|e| KubeError::from_kube(e, &action))?.is_some() {
        return Ok(false);
    }
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": DEFAULT_GATEWAY_CLASS},
        "spec": {"controllerName": GATEWAY_CONTROLLER, "description": DEFAULT_GATEWAY_CLASS_DESCRIPTION},
    }))
    .map_err(|e| KubeError::Transport(e.to_string()))?;
    match api
        .create(
            &PostParams { field_manager: Some(GATEWAY_CONTROLLER.into()), ..PostParams::default() },
            &object,
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(e) => {
            let err = KubeError::from_kube(e, &action);
            if err.is_already_exists() || err.is_conflict() { Ok(false) } else { Err(err) }
        }
    }
}

/// Whether the cluster serves the Gateway API (the CRD `gateways.gateway.networking.k8s.io` exists).
///
/// # Errors
/// [`KubeError`] other than Not Found.
pub async fn gateway_api_installed(client: &Client) -> Result<bool, KubeError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.get_opt("gateways.gateway.networking.k8s.io")
        .await
        .map(|crd| crd.is_some())
        .map_err(|e| KubeError::from_kube(e, "read the Gateway API CRD"))
}

/// The running controller: election, then (while leading) the class and the watches.
#[derive(Clone, Debug)]
pub struct GatewayDeployer {
    config: kube::Config,
    options: DeploymentOptions,
}

enum Input {
    Gateway(watcher::Event<DynamicObject>),
    Class(watcher::Event<DynamicObject>),
    ConfigMap(watcher::Event<ConfigMap>),
}

/// What the reconciles of one term share: the Gateways and classes seen, the API server's version.
struct Term {
    gateways: BTreeMap<(String, String), Value>,
    controllers: BTreeMap<String, String>,
    kube_version: i64,
}

fn key_of(meta: &kube::api::ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

impl GatewayDeployer {
    /// A controller over the cluster of `config`.
    pub fn new(config: kube::Config, options: DeploymentOptions) -> GatewayDeployer {
        GatewayDeployer { config, options }
    }

    /// Runs until `shutdown`: elects on `istio-gateway-deployment-<revision>` and, while leading,
    /// keeps every Istio Gateway's objects applied. Returns at once when the Gateway API CRDs are not
    /// installed (checked once at start).
    pub async fn run(self, shutdown: Shutdown) {
        let client = match client::connection(self.config.clone()) {
            Ok(c) => c.client,
            Err(err) => {
                tracing::error!(error = %err, "gateway deployment controller: cannot create the Kubernetes client");
                return;
            }
        };
        match gateway_api_installed(&client).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!("Gateway API CRDs not installed: automated Gateway deployment off");
                return;
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot check for the Gateway API CRDs: automated Gateway deployment off");
                return;
            }
        }
        let mut leader = self.options.leader.clone();
        if !self.options.revision.is_empty() {
            leader.revision = self.options.revision.clone();
        }
        let leadership = LeaderElection::new(
            client.clone(),
            GATEWAY_DEPLOYMENT_CONTROLLER,
            LockScope::PerRevision,
            leader,
        )
        .start(shutdown.clone());
        run_while_leading(leadership.subscribe(), shutdown, |term| self.clone().lead(client.clone(), term))
            .await;
        leadership.stopped().await;
    }

    /// Waits (while `term` runs) for `step` to succeed, retrying with the backoff; `false` when the
    /// term ended first.
    async fn retry<F, Fut>(&self, term: &mut Shutdown, what: &str, mut step: F) -> bool
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let mut delay = self.options.backoff.0;
        loop {
            match step().await {
                Ok(()) => return true,
                Err(err) => tracing::warn!(error = %err, "{what}; retrying"),
            }
            tokio::select! {
                () = term.wait() => return false,
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(self.options.backoff.1);
        }
    }

    /// The injection config and `ProxyConfig` resources now in force, for change detection.
    fn inputs_in_force(&self) -> (Option<Arc<InjectorState>>, Option<Arc<ProxyConfigs>>) {
        (
            self.options.injector.as_ref().map(|i| i.state()),
            self.options.proxy_configs.as_ref().and_then(|source| source()),
        )
    }

    async fn lead(self, client: Client, mut term: Shutdown) {
        let ensured = self
            .retry(&mut term, "cannot ensure GatewayClass istio", || async {
                match ensure_default_class(&client).await {
                    Ok(true) => {
                        tracing::info!("GatewayClass {DEFAULT_GATEWAY_CLASS} created");
                        Ok(())
                    }
                    Ok(false) => Ok(()),
                    Err(e) => Err(e.to_string()),
                }
            })
            .await;
        if !ensured {
            return;
        }
        // istiod waits for its first push context: the ProxyConfig resources must be known.
        if self.options.proxy_configs.is_some() {
            let ready = self
                .retry(&mut term, "waiting for the first push context", || async {
                    self.inputs_in_force().1.map(|_| ()).ok_or_else(|| "not built yet".to_string())
                })
                .await;
            if !ready {
                return;
            }
        }
        let version = client.apiserver_version().await.ok();
        let kube_version = version
            .and_then(|v| {
                let digits = |s: &str| s.chars().filter(char::is_ascii_digit).collect::<String>();
                format!("{}{}", digits(&v.major), digits(&v.minor)).parse().ok()
            })
            .unwrap_or(-1);
        let mut state = Term { gateways: BTreeMap::new(), controllers: BTreeMap::new(), kube_version };
        let gateways = client::watch(
            Api::<DynamicObject>::all_with(client.clone(), &gateway_api_resource("Gateway", "gateways")),
            self.options.backoff,
        )
        .map(|e| e.map(Input::Gateway));
        let classes = client::watch(
            Api::<DynamicObject>::all_with(
                client.clone(),
                &gateway_api_resource("GatewayClass", "gatewayclasses"),
            ),
            self.options.backoff,
        )
        .map(|e| e.map(Input::Class));
        let config_maps = client::watch(Api::<ConfigMap>::all(client.clone()), self.options.backoff)
            .map(|e| e.map(Input::ConfigMap));
        let mut events = futures::stream::select(futures::stream::select(gateways, classes), config_maps);
        let mut in_force = self.inputs_in_force();
        let mut recheck = tokio::time::interval(self.options.recheck);
        loop {
            let mut touched: BTreeSet<(String, String)> = BTreeSet::new();
            tokio::select! {
                () = term.wait() => return,
                _ = recheck.tick() => {
                    let now = self.inputs_in_force();
                    let same_injection = match (&now.0, &in_force.0) {
                        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                        (a, b) => a.is_none() && b.is_none(),
                    };
                    if !same_injection || now.1.as_deref() != in_force.1.as_deref() {
                        tracing::debug!("injection config or ProxyConfigs changed: reconciling every Gateway");
                        touched.extend(state.gateways.keys().cloned());
                    }
                    in_force = now;
                }
                e = events.next() => match e {
                    Some(event) => self.on_event(event, &mut state, &mut touched),
                    None => return,
                },
            }
            for key in touched {
                if let Some(gateway) = state.gateways.get(&key) {
                    self.reconcile(&client, gateway, &state).await;
                }
            }
        }
    }

    fn on_event(
        &self,
        event: Result<Input, watcher::Error>,
        state: &mut Term,
        touched: &mut BTreeSet<(String, String)>,
    ) {
        match event {
            Ok(Input::Gateway(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                let key = key_of(&o.metadata);
                let v = serde_json::to_value(&o).unwrap_or_default();
                // istiod's filter: status-only updates are not reconciled.
                let unchanged = state.gateways.get(&key).is_some_and(|old| {
                    ["generation", "labels", "annotations"]
                        .iter()
                        .all(|f| old["metadata"][f] == v["metadata"][f])
                });
                state.gateways.insert(key.clone(), v);
                if !unchanged {
                    touched.insert(key);
                }
            }
            Ok(Input::Gateway(watcher::Event::Delete(o))) => {
                let key = key_of(&o.metadata);
                state.gateways.remove(&key);
                self.options.failures.set(&key.0, &key.1, None);
            }
            Ok(Input::Class(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                let controller = o.data["spec"]["controllerName"].as_str().unwrap_or_default().to_string();
                state.controllers.insert(name.clone(), controller);
                touched.extend(
                    state
                        .gateways
                        .iter()
                        .filter(|(_, g)| g["spec"]["gatewayClassName"] == name.as_str())
                        .map(|(k, _)| k.clone()),
                );
            }
            Ok(Input::Class(watcher::Event::Delete(o))) => {
                state.controllers.remove(&o.metadata.name.clone().unwrap_or_default());
            }
            Ok(Input::ConfigMap(
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o),
            )) => {
                let key = key_of(&o.metadata);
                let class = o.metadata.labels.as_ref().and_then(|l| l.get(CLASS_DEFAULTS_LABEL)).cloned();
                let class = class.filter(|_| key.0 == self.options.system_namespace);
                touched.extend(
                    state
                        .gateways
                        .iter()
                        .filter(|(_, g)| {
                            parameters_ref(g).ok().flatten().as_ref() == Some(&key)
                                || class.as_deref().is_some_and(|c| g["spec"]["gatewayClassName"] == c)
                        })
                        .map(|(k, _)| k.clone()),
                );
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(error = %err, "gateway deployment watch failed; retrying with backoff")
            }
        }
    }

    /// The overlays of `gateway`: the class defaults ConfigMap, then its `parametersRef`.
    async fn overlays(
        &self,
        client: &Client,
        gateway: &Value,
    ) -> Result<Vec<BTreeMap<String, String>>, String> {
        let class = gateway["spec"]["gatewayClassName"].as_str().unwrap_or_default();
        let system: Api<ConfigMap> = Api::namespaced(client.clone(), &self.options.system_namespace);
        let params = ListParams::default().labels(&format!("{CLASS_DEFAULTS_LABEL}={class}"));
        let mut defaults = system
            .list(&params)
            .await
            .map_err(|e| KubeError::from_kube(e, "list the class defaults ConfigMaps").to_string())?
            .items;
        defaults.sort_by(|a, b| {
            (a.metadata.creation_timestamp.as_ref().map(|t| t.0), &a.metadata.name)
                .cmp(&(b.metadata.creation_timestamp.as_ref().map(|t| t.0), &b.metadata.name))
        });
        let mut overlays: Vec<BTreeMap<String, String>> =
            defaults.into_iter().take(1).map(|cm| cm.data.unwrap_or_default()).collect();
        if let Some((namespace, name)) = parameters_ref(gateway)? {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
            let cm = api
                .get_opt(&name)
                .await
                .map_err(|e| KubeError::from_kube(e, "read the parametersRef ConfigMap").to_string())?
                .ok_or_else(|| {
                    format!("parametersRef targeting configmap \"{namespace}/{name}\", but configmap does not exist")
                })?;
            overlays.push(cm.data.unwrap_or_default());
        }
        Ok(overlays)
    }

    /// Writes our controller version on the Gateway (through its status subresource, as istiod).
    async fn set_controller_version(&self, client: &Client, gateway: &Value) -> Result<(), String> {
        let (namespace, name) = (
            gateway["metadata"]["namespace"].as_str().unwrap_or_default(),
            gateway["metadata"]["name"].as_str().unwrap_or_default(),
        );
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &gateway_api_resource("Gateway", "gateways"));
        let patch = json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"annotations": {CONTROLLER_VERSION_ANNOTATION: CONTROLLER_VERSION.to_string()}},
        });
        api.patch_status(name, &PatchParams::apply(GATEWAY_CONTROLLER).force(), &Patch::Apply(&patch))
            .await
            .map(|_| ())
            .map_err(|e| KubeError::from_kube(e, "update gateway annotation").to_string())
    }

    async fn reconcile(&self, client: &Client, gateway: &Value, state: &Term) {
        let class = gateway["spec"]["gatewayClassName"].as_str().unwrap_or_default();
        // The built-in class counts even before its GatewayClass exists (BuiltinGatewayClasses).
        let controller = state
            .controllers
            .get(class)
            .map(String::as_str)
            .or((class == DEFAULT_GATEWAY_CLASS).then_some(GATEWAY_CONTROLLER));
        if controller != Some(GATEWAY_CONTROLLER) || !is_managed(gateway) {
            return;
        }
        let (existing, take_over, manage) = controller_version(gateway);
        if !manage {
            tracing::debug!(version = ?existing, "skipping gateway which is managed by another controller version");
            return;
        }
        let namespace = gateway["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        let name = gateway["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let who = format!("{namespace}/{name}");
        let fail = |stage: &'static str, reason: String| {
            metrics::counter!("meshpilot_gateway_deployment_errors", "stage" => stage).increment(1);
            self.options.failures.set(&namespace, &name, Some(format!("{stage}: {reason}")));
        };
        let result: Result<(TemplateInput, Vec<Value>), String> = async {
            let input = template_input(gateway)?;
            let ns = Api::<Namespace>::all(client.clone())
                .get_opt(&namespace)
                .await
                .map_err(|e| KubeError::from_kube(e, "read the Gateway's namespace").to_string())?;
            let annotations = ns.and_then(|n| n.metadata.annotations).map(|a| json!(a)).unwrap_or_default();
            if take_over {
                self.set_controller_version(client, gateway).await?;
            }
            let overlays = self.overlays(client, gateway).await?;
            let (injection, proxy_configs) = self.inputs_in_force();
            let injection = injection.ok_or_else(|| format!("no {TEMPLATE:?} template defined"))?;
            let env = RenderEnv {
                injection: &injection,
                proxy_configs: &proxy_configs.unwrap_or_default(),
                cluster_id: &self.options.cluster_id,
                kube_version: state.kube_version,
                proxy_ids: proxy_ids(&annotations),
                overlays: &overlays,
            };
            let objects = render(gateway, &input, &env)?;
            Ok((input, objects))
        }
        .await;
        let (input, objects) = match result {
            Ok(r) => r,
            Err(err) => {
                // istiod: rendering errors are not retried (not ephemeral), only logged.
                tracing::error!(gateway = %who, error = %err, "error rendering templates");
                fail("render", err);
                return;
            }
        };
        for object in &objects {
            if let Err(err) = apply(client, object, &input).await {
                tracing::warn!(gateway = %who, error = %err, "gateway deployment apply failed");
                fail("apply", err);
                return;
            }
        }
        self.options.failures.set(&namespace, &name, None);
        tracing::info!(gateway = %who, "gateway updated");
    }
}

#[cfg(test)]
mod tests {
    use api::networking::proxy_config::{ProxyConfig, ProxyImage};
    use api::type_v1beta1::WorkloadSelector;
    use inject::proxy_config::ProxyConfigResource;

    use super::*;

    /// A `kube-gateway` template reading the inputs a custom template may read (the chart's own is
    /// compared with istiod's in the meshpilot peer tests).
    const TEMPLATE_TEXT: &str = r#"apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{.ServiceAccount | quote}}
  namespace: {{.Namespace | quote}}
  labels:
    {{- toJsonMap .InfrastructureLabels (strdict "gateway.networking.k8s.io/gateway-name" .Name "gateway.networking.k8s.io/gateway-class-name" .GatewayClass) | nindent 4 }}
  ownerReferences:
  - {apiVersion: gateway.networking.k8s.io/v1, kind: Gateway, name: "{{.ObjectMeta.Name}}", uid: "{{.UID}}"}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{.DeploymentName | quote}}
  namespace: {{.Namespace | quote}}
  annotations:
    {{- toJsonMap (omit .InfrastructureAnnotations "kubectl.kubernetes.io/last-applied-configuration") | nindent 4 }}
spec:
  template:
    spec:
      containers:
      - name: istio-proxy
        image: "{{ .ProxyImage }}"
        securityContext: {runAsUser: {{ .ProxyUID | default "1337" }}, runAsGroup: {{ .ProxyGID }}}
        env:
        - {name: PROXY_CONFIG, value: {{ protoToJSON .ProxyConfig | quote }}}
        - {name: FACTS, value: "{{.ClusterID}} {{.KubeVersion}} {{.Revision | default "default"}} {{.ServiceType}} {{.Kind}} {{.Spec.GatewayClassName}} {{.ControllerLabel}} {{.MeshConfig.TrustDomain}}"}
        - {name: INTERCEPTION, value: "{{ .ProxyConfig.InterceptionMode.String }}"}
---
apiVersion: v1
kind: Service
metadata:
  name: {{.DeploymentName | quote}}
  namespace: {{.Namespace | quote}}
spec:
  ports:
  {{- range $key, $val := .Ports }}
  - name: {{ $val.Name | quote }}
    port: {{ $val.Port }}
    appProtocol: {{ $val.AppProtocol }}
  {{- end }}
  {{- if and (.Spec.Addresses) (eq .ServiceType "LoadBalancer") }}
  loadBalancerIP: {{ (index .Spec.Addresses 0).Value | quote}}
  {{- end }}
  type: {{ .ServiceType | quote }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{.DeploymentName | quote}}
  namespace: {{.Namespace | quote}}
spec:
  maxReplicas: 1
"#;

    fn injection(template: &str) -> InjectorState {
        let config = serde_json::to_string(&json!({"templates": {TEMPLATE: template}})).unwrap();
        InjectorState {
            config: Arc::new(inject::config::InjectConfig::parse(&config).unwrap()),
            values: inject::config::Values::parse(
                r#"{"global": {"hub": "hub.example", "tag": "1.0", "proxy": {"image": "proxyv2"}}}"#,
            )
            .unwrap(),
            mesh: inject::mesh::apply_mesh_config("trustDomain: td.example\n").unwrap(),
            revision: String::new(),
            native_sidecars: NativeSidecars::Auto,
        }
    }

    fn proxy_configs() -> ProxyConfigs {
        let resource = |name: &str, created: &str, spec: ProxyConfig| ProxyConfigResource {
            namespace: "ns".into(),
            name: name.into(),
            creation_timestamp: Some(created.into()),
            spec,
        };
        let namespace_wide = ProxyConfig { concurrency: Some(3), ..ProxyConfig::default() };
        let selecting = ProxyConfig {
            selector: Some(WorkloadSelector {
                match_labels: [(GATEWAY_NAME_LABEL.to_string(), "gw".to_string())].into(),
            }),
            image: Some(ProxyImage { image_type: "distroless".into() }),
            environment_variables: [("A".to_string(), "1".to_string())].into(),
            ..ProxyConfig::default()
        };
        ProxyConfigs::new(
            "istio-system",
            [
                resource("wide", "2026-01-01T00:00:00Z", namespace_wide),
                resource("gw", "2026-01-01T00:00:01Z", selecting),
            ],
        )
    }

    fn gateway() -> Value {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "ns", "uid": "u-1",
                "labels": {"team": "a"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "x"}},
            "spec": {"gatewayClassName": "istio", "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"},
                {"name": "http.alt", "port": 80, "protocol": "HTTP"},
                {"name": "status-port", "port": 8443, "protocol": "HTTPS"},
            ]},
        })
    }

    fn render_with(gw: &Value, overlays: &[BTreeMap<String, String>]) -> Result<Vec<Value>, String> {
        let state = injection(TEMPLATE_TEXT);
        let configs = proxy_configs();
        let env = RenderEnv {
            injection: &state,
            proxy_configs: &configs,
            cluster_id: "c1",
            kube_version: 133,
            proxy_ids: (1000, 2000),
            overlays,
        };
        render(gw, &template_input(gw).unwrap(), &env)
    }

    fn env_of(deployment: &Value, name: &str) -> String {
        let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap();
        env.iter().find(|e| e["name"] == name).unwrap()["value"].as_str().unwrap().to_string()
    }

    #[test]
    fn the_template_sees_istios_input() {
        let objects = render_with(&gateway(), &[]).unwrap();
        let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ServiceAccount", "Deployment", "Service"], "no HPA without an overlay");
        let (sa, deployment, service) = (&objects[0], &objects[1], &objects[2]);
        assert_eq!(sa["metadata"]["name"], "gw-istio");
        assert_eq!(
            sa["metadata"]["labels"],
            json!({"team": "a", GATEWAY_NAME_LABEL: "gw", GATEWAY_CLASS_LABEL: "istio"})
        );
        assert_eq!(sa["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(deployment["metadata"]["annotations"], json!({"note": "x"}));
        let proxy = &deployment["spec"]["template"]["spec"]["containers"][0];
        // The selecting ProxyConfig's image type, the namespace's concurrency and its metadata.
        assert_eq!(proxy["image"], "hub.example/proxyv2:1.0-distroless");
        assert_eq!(proxy["securityContext"], json!({"runAsUser": 1000, "runAsGroup": 2000}));
        let pc: Value = serde_json::from_str(&env_of(deployment, "PROXY_CONFIG")).unwrap();
        assert_eq!(
            pc,
            json!({"concurrency": 3, "image": {"imageType": "distroless"}, "proxyMetadata": {"A": "1"}})
        );
        assert_eq!(
            env_of(deployment, "FACTS"),
            "c1 133 default LoadBalancer Gateway istio istio.io-gateway-controller td.example"
        );
        assert_eq!(env_of(deployment, "INTERCEPTION"), "REDIRECT");
        // Port 80 once; the listener named like the status port gets the port suffix.
        assert_eq!(
            service["spec"]["ports"],
            json!([
                {"name": "status-port", "port": 15021, "appProtocol": "tcp"},
                {"name": "http", "port": 80, "appProtocol": "http"},
                {"name": "status-port-8443", "port": 8443, "appProtocol": "https"},
            ])
        );
        assert!(service["spec"].get("loadBalancerIP").is_none());
    }

    #[test]
    fn names_addresses_and_infrastructure_follow_istio() {
        let mut gw = gateway();
        gw["metadata"]["annotations"] = json!({
            "gateway.istio.io/name-override": "edge", "gateway.istio.io/service-account": "edge-sa",
        });
        gw["spec"]["infrastructure"] =
            json!({"labels": {"infra": "yes", "gateway.networking.k8s.io/x": "dropped"}});
        gw["spec"]["addresses"] = json!([{"value": "10.0.0.9"}]);
        let objects = render_with(&gw, &[]).unwrap();
        assert_eq!(objects[0]["metadata"]["name"], "edge-sa");
        assert_eq!(objects[1]["metadata"]["name"], "edge");
        assert_eq!(objects[2]["spec"]["loadBalancerIP"], "10.0.0.9");
        assert_eq!(objects[0]["metadata"]["labels"]["infra"], "yes");
        assert!(objects[0]["metadata"]["labels"].get("team").is_none());
        assert!(objects[0]["metadata"]["labels"].get("gateway.networking.k8s.io/x").is_none());
        assert!(is_managed(&gw));
        gw["spec"]["addresses"] = json!([{"type": "Hostname", "value": "lb.example"}]);
        assert!(!is_managed(&gw), "hostname address: not managed");
        gw["metadata"]["uid"] = Value::Null;
        assert_eq!(template_input(&gw).unwrap_err(), "Gateway: metadata.uid is missing");
    }

    #[test]
    fn overlays_merge_in_order_as_a_strategic_merge_patch() {
        let class = BTreeMap::from([
            ("deployment".to_string(), "spec:\n  replicas: 2\n".to_string()),
            ("horizontalPodAutoscaler".to_string(), "spec:\n  maxReplicas: 5\n".to_string()),
        ]);
        let params = BTreeMap::from([
            (
                "deployment".to_string(),
                "spec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        env:\n        - {name: EXTRA, value: e}\n        - {name: FACTS, value: replaced}\n".to_string(),
            ),
            (
                "service".to_string(),
                "metadata:\n  annotations: {lb: internal}\nspec:\n  ports:\n  - {port: 80, name: web}\n".to_string(),
            ),
        ]);
        let objects = render_with(&gateway(), &[class.clone(), params]).unwrap();
        let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ServiceAccount", "Deployment", "Service", "HorizontalPodAutoscaler"]);
        let deployment = &objects[1];
        assert_eq!(deployment["spec"]["replicas"], 3, "parametersRef after the class defaults");
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "hub.example/proxyv2:1.0-distroless", "containers merge by name");
        let names: Vec<&str> =
            container["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
        // Kubernetes' order: the overlay's elements in its order, the others at their place among them.
        assert_eq!(names, ["EXTRA", "PROXY_CONFIG", "FACTS", "INTERCEPTION"]);
        assert_eq!(env_of(deployment, "FACTS"), "replaced");
        let ports = &objects[2]["spec"]["ports"];
        assert_eq!(
            ports[1],
            json!({"name": "web", "port": 80, "appProtocol": "http"}),
            "ports merge by port"
        );
        assert_eq!(ports.as_array().unwrap().len(), 3);
        assert_eq!(objects[2]["metadata"]["annotations"]["lb"], "internal");
        assert_eq!(objects[3]["spec"]["maxReplicas"], 5);

        let bad = BTreeMap::from([("pod".to_string(), "x: 1".to_string())]);
        assert_eq!(
            render_with(&gateway(), &[bad]).unwrap_err(),
            "unsupported overlay \"pod\" (supported: [deployment horizontalPodAutoscaler podDisruptionBudget service serviceAccount])"
        );
        let rename = BTreeMap::from([("service".to_string(), "metadata:\n  name: other\n".to_string())]);
        assert_eq!(render_with(&gateway(), &[rename]).unwrap_err(), "illegal metadata change");
    }

    #[test]
    fn a_missing_or_failing_template_is_an_error() {
        let state = injection("kind: [\n");
        let configs = ProxyConfigs::default();
        let env = RenderEnv {
            injection: &state,
            proxy_configs: &configs,
            cluster_id: "c",
            kube_version: 133,
            proxy_ids: (1337, 1337),
            overlays: &[],
        };
        let gw = gateway();
        let input = template_input(&gw).unwrap();
        assert!(render(&gw, &input, &env).unwrap_err().starts_with("failed to find kind"));
        let mut none = injection(TEMPLATE_TEXT);
        let config = serde_json::to_string(&json!({"templates": {"sidecar": "x: 1"}})).unwrap();
        none.config = Arc::new(inject::config::InjectConfig::parse(&config).unwrap());
        let env = RenderEnv { injection: &none, ..env };
        assert_eq!(render(&gw, &input, &env).unwrap_err(), "no \"kube-gateway\" template defined");
    }

    #[test]
    fn documents_split_as_istio_splits_them() {
        assert_eq!(split_documents("a: 1\n---\n\n--- # c\nb: 2\n---"), ["a: 1", "b: 2"]);
    }

    #[test]
    fn controller_versions_parameters_and_proxy_ids() {
        let with_version = |v: &str| json!({"metadata": {"annotations": {CONTROLLER_VERSION_ANNOTATION: v}}});
        assert_eq!(controller_version(&json!({})), (None, true, true));
        assert_eq!(controller_version(&with_version("1")), (Some("1".into()), true, true));
        assert_eq!(controller_version(&with_version("5")), (Some("5".into()), false, true));
        assert_eq!(controller_version(&with_version("6")), (Some("6".into()), false, false));
        assert_eq!(controller_version(&with_version("x")), (Some("x".into()), false, false));

        let gw = |r: Value| json!({"metadata": {"namespace": "ns"}, "spec": {"infrastructure": {"parametersRef": r}}});
        assert_eq!(
            parameters_ref(&gw(json!({"group": "", "kind": "ConfigMap", "name": "p"}))).unwrap(),
            Some(("ns".into(), "p".into()))
        );
        assert_eq!(
            parameters_ref(&gw(json!({"group": "example.com", "kind": "Params", "name": "p"}))).unwrap_err(),
            "invalid parameters: unknown infrastructure parameters type example.com/Params"
        );
        assert_eq!(parameters_ref(&json!({"spec": {}})).unwrap(), None);

        assert_eq!(proxy_ids(&json!({})), (1337, 1337));
        assert_eq!(
            proxy_ids(&json!({"openshift.io/sa.scc.uid-range": "1000620000/10000"})),
            (1000629999, 1000629999)
        );
        assert_eq!(
            proxy_ids(
                &json!({"openshift.io/sa.scc.uid-range": "100/10", "openshift.io/sa.scc.supplemental-groups": "5-9,20/2"})
            ),
            (109, 9)
        );
    }

    #[test]
    fn long_duplicate_port_names_stay_unique_and_short() {
        let long = "a".repeat(70);
        let gw = json!({"spec": {"listeners": [
            {"name": long, "port": 1, "protocol": "TCP"},
            {"name": format!("{long}b"), "port": 2, "protocol": "TCP"},
        ]}});
        let ports = service_ports(&gw);
        let names: Vec<&str> = ports.iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names[1], "a".repeat(63));
        assert_eq!(names[2], format!("{}-2", "a".repeat(61)));
    }
}
