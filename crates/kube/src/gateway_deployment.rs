//! Automated deployment of Gateway API Gateways (Istio's `DeploymentController`,
//! `pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go`, and its `kube-gateway` template): for
//! every `gateway.networking.k8s.io` Gateway of a class whose controller is
//! `istio.io/gateway-controller` (the built-in class `istio`), the ServiceAccount, Deployment and
//! Service that run its proxies, server-side applied with Istio's field manager, by the leader of the
//! per-revision lock `istio-gateway-deployment-<rev>` only. The GatewayClass `istio` itself is created
//! when absent (Istio's `ClassController`).
//!
//! ```text
//!  leader of istio-gateway-deployment-<rev>:
//!    create GatewayClass istio if absent
//!    watch Gateways + GatewayClasses ──► render (pure) ──► server-side apply SA, Deployment, Service
//! ```
//!
//! **What is rendered** ([`render`], pure, tested by values), as Istio's template:
//! - names: `<gateway>-<class>` (annotation `gateway.istio.io/name-override` overrides; the
//!   ServiceAccount's name is `gateway.istio.io/service-account` when set), in the Gateway's namespace;
//! - labels of all three: the infrastructure labels (`spec.infrastructure.labels`, else the Gateway's
//!   own labels; keys under `gateway.networking.k8s.io/` dropped from the former) plus
//!   `gateway.networking.k8s.io/gateway-name`, `gateway.networking.k8s.io/gateway-class-name` and
//!   `gateway.istio.io/managed: istio.io-gateway-controller`; annotations: the infrastructure
//!   annotations without `kubectl.kubernetes.io/last-applied-configuration` and Istio's three
//!   `gateway.istio.io/*` control annotations;
//! - `ownerReferences` to the Gateway (`gateway.networking.k8s.io/v1`, kind, name, uid);
//! - Deployment: selector `gateway.networking.k8s.io/gateway-name: <gateway>`, pod labels
//!   `sidecar.istio.io/inject: "false"`, `service.istio.io/canonical-name`, `…/canonical-revision:
//!   latest`, pod annotations `istio.io/rev` and the Prometheus ones, one `istio-proxy` container
//!   (`proxy router`, ports 15020 `metrics`, 15021 `status-port`, 15090 `http-envoy-prom`);
//! - Service: type from `networking.istio.io/service-type` (default `LoadBalancer`),
//!   `ipFamilyPolicy: PreferDualStack`, `loadBalancerIP` from the first address of a LoadBalancer
//!   Gateway, ports `status-port` 15021 then one per distinct listener port (name: the listener's with
//!   dots as dashes, at most 63 characters, made unique with `-<port>`; protocol TCP, `appProtocol` the
//!   listener protocol in lower case), selector as the Deployment's.
//!
//! A Gateway with a hostname address, or several addresses, is not managed (Istio's `IsManaged` with
//! manual deployment enabled, its default). An existing object without the `gateway.istio.io/managed`
//! label is left alone (Istio's `canManage`).
//!
//! **Where meshpilot differs.** meshpilot has no injection templates: the Deployment carries the
//! container Istio's template names, with the image of [`DeploymentOptions::proxy_image`], but not the
//! injected bootstrap environment; HorizontalPodAutoscaler / PodDisruptionBudget overlays,
//! `parametersRef` ConfigMaps, ListenerSets and the `gateway.istio.io/controller-version` annotation
//! are not handled. Objects are re-applied when their Gateway or class changes, not when someone edits
//! the generated objects (istiod also watches those). Deleting a Gateway leaves the objects to the
//! Kubernetes garbage collector through their ownerReferences, as in Istio.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Service, ServiceAccount},
};
use kube::{
    Api, Client, Resource,
    api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use model::Shutdown;
use serde_json::{Map, Value, json};

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
/// Its value: the controller name with `/` as `-`.
pub const MANAGED_VALUE: &str = "istio.io-gateway-controller";
/// Gateway name label (also the selector).
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";
/// Gateway class label.
pub const GATEWAY_CLASS_LABEL: &str = "gateway.networking.k8s.io/gateway-class-name";

const OMITTED_ANNOTATIONS: [&str; 4] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    "gateway.istio.io/name-override",
    "gateway.istio.io/service-account",
    "gateway.istio.io/controller-version",
];

/// Settings of the deployment controller.
#[derive(Clone, Debug)]
pub struct DeploymentOptions {
    /// Control-plane revision (`istio.io/rev` of the pods; the lock's suffix).
    pub revision: String,
    /// Image of the `istio-proxy` container.
    pub proxy_image: String,
    /// Election settings (the lock is `istio-gateway-deployment-<revision>`).
    pub leader: LeaderElectionOptions,
    /// Watch retry backoff: first delay and cap.
    pub backoff: (Duration, Duration),
}

impl Default for DeploymentOptions {
    fn default() -> Self {
        DeploymentOptions {
            revision: String::new(),
            proxy_image: "docker.io/istio/proxyv2:1.28.0".into(),
            leader: LeaderElectionOptions::default(),
            backoff: (Duration::from_millis(800), Duration::from_secs(30)),
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

/// The objects Istio would apply for `gateway` (JSON as read from the API server): ServiceAccount,
/// Deployment, Service, in that order; empty when the Gateway is not managed ([`is_managed`]). The
/// caller decides whether the Gateway's class is Istio's.
///
/// # Errors
/// The Gateway has no name, namespace, uid or `spec.gatewayClassName` (the message names the field).
pub fn render(gateway: &Value, options: &DeploymentOptions) -> Result<Vec<Value>, String> {
    let meta = &gateway["metadata"];
    let field = |v: &Value, name: &str| {
        v.as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("Gateway: {name} is missing"))
    };
    let name = field(&meta["name"], "metadata.name")?;
    let namespace = field(&meta["namespace"], "metadata.namespace")?;
    let uid = field(&meta["uid"], "metadata.uid")?;
    let class = field(&gateway["spec"]["gatewayClassName"], "spec.gatewayClassName")?;
    if !is_managed(gateway) {
        return Ok(Vec::new());
    }
    let annotations = string_map(&meta["annotations"]);
    let default_name = format!("{name}-{class}");
    let deployment_name =
        annotations.get("gateway.istio.io/name-override").cloned().unwrap_or(default_name.clone());
    let account = annotations.get("gateway.istio.io/service-account").cloned().unwrap_or(default_name);
    let service_type =
        annotations.get("networking.istio.io/service-type").cloned().unwrap_or("LoadBalancer".into());
    let mut infra_annotations = infrastructure(gateway, "annotations");
    for omit in OMITTED_ANNOTATIONS {
        infra_annotations.remove(omit);
    }
    let mut labels = infrastructure(gateway, "labels");
    labels.insert(GATEWAY_NAME_LABEL.into(), name.clone());
    labels.insert(GATEWAY_CLASS_LABEL.into(), class.clone());
    labels.insert(MANAGED_LABEL.into(), MANAGED_VALUE.into());
    let owner = json!([{
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": name, "uid": uid,
    }]);
    let metadata = |object_name: &str| {
        json!({
            "name": object_name, "namespace": namespace, "labels": labels,
            "annotations": infra_annotations, "ownerReferences": owner,
        })
    };
    let selector = json!({ GATEWAY_NAME_LABEL: name });
    let revision = if options.revision.is_empty() { "default" } else { options.revision.as_str() };
    let mut pod_annotations: Map<String, Value> =
        infra_annotations.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    pod_annotations.insert("istio.io/rev".into(), revision.into());
    pod_annotations.insert("prometheus.io/path".into(), "/stats/prometheus".into());
    pod_annotations.insert("prometheus.io/port".into(), "15020".into());
    pod_annotations.insert("prometheus.io/scrape".into(), "true".into());
    let mut pod_labels: Map<String, Value> = Map::new();
    pod_labels.insert("sidecar.istio.io/inject".into(), "false".into());
    pod_labels.insert("service.istio.io/canonical-name".into(), deployment_name.clone().into());
    pod_labels.insert("service.istio.io/canonical-revision".into(), "latest".into());
    for (k, v) in &labels {
        pod_labels.insert(k.clone(), v.clone().into());
    }
    let service_account =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(&account)});
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata(&deployment_name),
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"annotations": pod_annotations, "labels": pod_labels},
                "spec": {
                    "serviceAccountName": account,
                    "containers": [{
                        "name": "istio-proxy",
                        "image": options.proxy_image,
                        "args": ["proxy", "router"],
                        "ports": [
                            {"containerPort": 15020, "name": "metrics", "protocol": "TCP"},
                            {"containerPort": 15021, "name": "status-port", "protocol": "TCP"},
                            {"containerPort": 15090, "name": "http-envoy-prom", "protocol": "TCP"},
                        ],
                    }],
                },
            },
        },
    });
    let mut service_spec = json!({
        "ipFamilyPolicy": "PreferDualStack",
        "ports": service_ports(gateway),
        "selector": selector,
        "type": service_type,
    });
    if service_type == "LoadBalancer"
        && let Some(ip) = gateway["spec"]["addresses"][0]["value"].as_str()
    {
        service_spec["loadBalancerIP"] = ip.into();
    }
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": metadata(&deployment_name), "spec": service_spec});
    Ok(vec![service_account, deployment, service])
}

/// Server-side applies one rendered object (field manager [`GATEWAY_CONTROLLER`], forced), unless it
/// exists without the [`MANAGED_LABEL`] (then `Ok(false)`).
///
/// # Errors
/// [`KubeError`] from the API server.
pub async fn apply(client: &Client, object: &Value) -> Result<bool, KubeError> {
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    match kind {
        "ServiceAccount" => {
            apply_typed(Api::<ServiceAccount>::namespaced(client.clone(), namespace), name, object).await
        }
        "Deployment" => {
            apply_typed(Api::<Deployment>::namespaced(client.clone(), namespace), name, object).await
        }
        "Service" => apply_typed(Api::<Service>::namespaced(client.clone(), namespace), name, object).await,
        other => Err(KubeError::Transport(format!("unexpected kind {other:?} to apply"))),
    }
}

async fn apply_typed<K>(api: Api<K>, name: &str, object: &Value) -> Result<bool, KubeError>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let action = format!("apply {} {name}", object["kind"].as_str().unwrap_or_default());
    if let Some(existing) = api.get_opt(name).await.map_err(|e| KubeError::from_kube(e, &action))?
        && !existing.meta().labels.as_ref().is_some_and(|l| l.contains_key(MANAGED_LABEL))
    {
        tracing::debug!(%name, "exists without {MANAGED_LABEL}; left alone");
        return Ok(false);
    }
    api.patch(name, &PatchParams::apply(GATEWAY_CONTROLLER).force(), &Patch::Apply(object))
        .await
        .map_err(|e| KubeError::from_kube(e, &action))?;
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

    async fn lead(self, client: Client, mut term: Shutdown) {
        let mut delay = self.options.backoff.0;
        loop {
            match ensure_default_class(&client).await {
                Ok(created) => {
                    if created {
                        tracing::info!("GatewayClass {DEFAULT_GATEWAY_CLASS} created");
                    }
                    break;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "cannot ensure GatewayClass {DEFAULT_GATEWAY_CLASS}; retrying")
                }
            }
            tokio::select! {
                () = term.wait() => return,
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(self.options.backoff.1);
        }
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
        let mut events = futures::stream::select(gateways, classes);
        let mut known: BTreeMap<(String, String), Value> = BTreeMap::new();
        let mut controllers: BTreeMap<String, String> = BTreeMap::new();
        loop {
            let event = tokio::select! {
                () = term.wait() => return,
                e = events.next() => match e { Some(e) => e, None => return },
            };
            let mut touched: Vec<Value> = Vec::new();
            match event {
                Ok(Input::Gateway(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                    let v = serde_json::to_value(&o).unwrap_or_default();
                    let key = (
                        o.metadata.namespace.clone().unwrap_or_default(),
                        o.metadata.name.clone().unwrap_or_default(),
                    );
                    known.insert(key, v.clone());
                    touched.push(v);
                }
                Ok(Input::Gateway(watcher::Event::Delete(o))) => {
                    known.remove(&(
                        o.metadata.namespace.clone().unwrap_or_default(),
                        o.metadata.name.clone().unwrap_or_default(),
                    ));
                }
                Ok(Input::Class(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                    let v = serde_json::to_value(&o).unwrap_or_default();
                    let name = o.metadata.name.clone().unwrap_or_default();
                    controllers.insert(
                        name.clone(),
                        v["spec"]["controllerName"].as_str().unwrap_or_default().to_string(),
                    );
                    touched.extend(
                        known.values().filter(|g| g["spec"]["gatewayClassName"] == name.as_str()).cloned(),
                    );
                }
                Ok(Input::Class(watcher::Event::Delete(o))) => {
                    controllers.remove(&o.metadata.name.clone().unwrap_or_default());
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(error = %err, "gateway deployment watch failed; retrying with backoff")
                }
            }
            for gateway in touched {
                let class = gateway["spec"]["gatewayClassName"].as_str().unwrap_or_default();
                // The built-in class counts even before its GatewayClass exists (Istio's
                // BuiltinGatewayClasses).
                let controller = controllers
                    .get(class)
                    .map(String::as_str)
                    .or((class == DEFAULT_GATEWAY_CLASS).then_some(GATEWAY_CONTROLLER));
                if controller != Some(GATEWAY_CONTROLLER) {
                    continue;
                }
                self.reconcile(&client, &gateway).await;
            }
        }
    }

    async fn reconcile(&self, client: &Client, gateway: &Value) {
        let who = format!(
            "{}/{}",
            gateway["metadata"]["namespace"].as_str().unwrap_or_default(),
            gateway["metadata"]["name"].as_str().unwrap_or_default()
        );
        let objects = match render(gateway, &self.options) {
            Ok(o) => o,
            Err(err) => {
                tracing::warn!(gateway = %who, error = %err, "cannot render the gateway's deployment");
                return;
            }
        };
        for object in &objects {
            if let Err(err) = apply(client, object).await {
                tracing::warn!(gateway = %who, error = %err, "gateway deployment apply failed");
            }
        }
        if !objects.is_empty() {
            tracing::info!(gateway = %who, "gateway deployment applied");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn renders_istios_three_objects_with_names_labels_and_owner() {
        let objects = render(&gateway(), &DeploymentOptions::default()).unwrap();
        let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ServiceAccount", "Deployment", "Service"]);
        for o in &objects {
            assert_eq!(o["metadata"]["name"], "gw-istio");
            assert_eq!(o["metadata"]["namespace"], "ns");
            let labels = &o["metadata"]["labels"];
            assert_eq!(
                (
                    &labels["team"],
                    &labels[GATEWAY_NAME_LABEL],
                    &labels[GATEWAY_CLASS_LABEL],
                    &labels[MANAGED_LABEL]
                ),
                (&json!("a"), &json!("gw"), &json!("istio"), &json!(MANAGED_VALUE))
            );
            assert_eq!(o["metadata"]["annotations"], json!({"note": "x"}));
            assert_eq!(
                o["metadata"]["ownerReferences"],
                json!([{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "gw", "uid": "u-1"}])
            );
        }
        let pod = &objects[1]["spec"]["template"];
        assert_eq!(objects[1]["spec"]["selector"]["matchLabels"], json!({GATEWAY_NAME_LABEL: "gw"}));
        assert_eq!(pod["metadata"]["labels"]["sidecar.istio.io/inject"], "false");
        assert_eq!(pod["metadata"]["annotations"]["istio.io/rev"], "default");
        assert_eq!(pod["spec"]["serviceAccountName"], "gw-istio");
        let svc = &objects[2]["spec"];
        assert_eq!(svc["type"], "LoadBalancer");
        // Port 80 once; the listener named like the status port gets the port suffix.
        assert_eq!(
            svc["ports"],
            json!([
                {"name": "status-port", "port": 15021, "protocol": "TCP", "appProtocol": "tcp"},
                {"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http"},
                {"name": "status-port-8443", "port": 8443, "protocol": "TCP", "appProtocol": "https"},
            ])
        );
    }

    #[test]
    fn overrides_addresses_and_infrastructure_follow_istio() {
        let mut gw = gateway();
        gw["metadata"]["annotations"] = json!({
            "gateway.istio.io/name-override": "edge", "gateway.istio.io/service-account": "edge-sa",
            "networking.istio.io/service-type": "ClusterIP",
        });
        gw["spec"]["infrastructure"] =
            json!({"labels": {"infra": "yes", "gateway.networking.k8s.io/x": "dropped"}});
        gw["spec"]["addresses"] = json!([{"value": "10.0.0.9"}]);
        let objects = render(&gw, &DeploymentOptions::default()).unwrap();
        assert_eq!(objects[0]["metadata"]["name"], "edge-sa");
        assert_eq!(objects[1]["metadata"]["name"], "edge");
        assert_eq!(objects[2]["spec"]["type"], "ClusterIP");
        assert!(objects[2]["spec"].get("loadBalancerIP").is_none(), "loadBalancerIP only for LoadBalancer");
        let labels = &objects[1]["metadata"]["labels"];
        assert_eq!(labels["infra"], "yes");
        assert!(labels.get("team").is_none() && labels.get("gateway.networking.k8s.io/x").is_none());
        gw["spec"]["addresses"] = json!([{"type": "Hostname", "value": "lb.example"}]);
        assert!(
            render(&gw, &DeploymentOptions::default()).unwrap().is_empty(),
            "hostname address: not managed"
        );
        gw["metadata"]["uid"] = Value::Null;
        assert_eq!(
            render(&gw, &DeploymentOptions::default()).unwrap_err(),
            "Gateway: metadata.uid is missing"
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
