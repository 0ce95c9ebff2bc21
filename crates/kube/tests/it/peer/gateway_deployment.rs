//! Automated deployment on a real kube-apiserver with the Gateway API CRDs installed by the test
//! environment, rendering a `kube-gateway` injection template: a Gateway of class `istio` gets the
//! template's ServiceAccount, Deployment and Service (names, labels, ownerReferences, field manager,
//! the managed label), the GatewayClass `istio` is created, a
//! listener edit moves the Service's ports, a `parametersRef` ConfigMap's overlay is applied and its
//! change re-applied, a Gateway whose overlay ConfigMap is missing gets nothing (and is listed as
//! failing) while the others are served, and after the Gateway is deleted the objects still point at
//! it through ownerReferences (a bare API server runs no garbage collector). The chart's own template
//! is compared with istiod's output in meshpilot's `peer::gateway_istiod` test.

use crate::support;

use std::{sync::Arc, time::Duration};

use inject::injector::{Injector, InjectorState, NativeSidecars};
use meshpilot_kube::{
    gateway_deployment::{DeploymentFailures, DeploymentOptions, GatewayDeployer},
    leader::LeaderElectionOptions,
    testenv::TestEnv,
};
use model::shutdown_channel;
use serde_json::{Value, json};
use support::{namespace, wait_for};

const NS: &str = "gw-deploy";

const TEMPLATE: &str = r#"apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{.ServiceAccount | quote}}
  namespace: {{.Namespace | quote}}
  labels:
    {{- toJsonMap .InfrastructureLabels (strdict "gateway.networking.k8s.io/gateway-name" .Name "gateway.networking.k8s.io/gateway-class-name" .GatewayClass) | nindent 4 }}
  ownerReferences:
  - {apiVersion: gateway.networking.k8s.io/v1, kind: Gateway, name: "{{.Name}}", uid: "{{.UID}}"}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{.DeploymentName | quote}}
  namespace: {{.Namespace | quote}}
  labels:
    {{- toJsonMap .InfrastructureLabels (strdict "gateway.networking.k8s.io/gateway-name" .Name "gateway.networking.k8s.io/gateway-class-name" .GatewayClass) | nindent 4 }}
  ownerReferences:
  - {apiVersion: gateway.networking.k8s.io/v1, kind: Gateway, name: "{{.Name}}", uid: "{{.UID}}"}
spec:
  selector:
    matchLabels:
      "{{.GatewayNameLabel}}": {{.Name}}
  template:
    metadata:
      labels:
        "{{.GatewayNameLabel}}": {{.Name}}
    spec:
      serviceAccountName: {{.ServiceAccount | quote}}
      containers:
      - name: istio-proxy
        image: "{{.ProxyImage}}"
        args: [proxy, router]
---
apiVersion: v1
kind: Service
metadata:
  name: {{.DeploymentName | quote}}
  namespace: {{.Namespace | quote}}
  labels:
    {{- toJsonMap .InfrastructureLabels (strdict "gateway.networking.k8s.io/gateway-name" .Name "gateway.networking.k8s.io/gateway-class-name" .GatewayClass) | nindent 4 }}
  ownerReferences:
  - {apiVersion: gateway.networking.k8s.io/v1, kind: Gateway, name: "{{.Name}}", uid: "{{.UID}}"}
spec:
  ports:
  {{- range $key, $val := .Ports }}
  - name: {{ $val.Name | quote }}
    port: {{ $val.Port }}
    protocol: {{ $val.Protocol }}
    appProtocol: {{ $val.AppProtocol }}
  {{- end }}
  selector:
    "{{.GatewayNameLabel}}": {{.Name}}
  type: {{ .ServiceType | quote }}
"#;

fn injector() -> Arc<Injector> {
    let config = serde_json::to_string(&json!({"templates": {"kube-gateway": TEMPLATE}})).unwrap();
    Arc::new(Injector::new(InjectorState {
        config: Arc::new(inject::config::InjectConfig::parse(&config).unwrap()),
        values: inject::config::Values::parse(r#"{"global": {"hub": "docker.io/istio", "tag": "1.28.0"}}"#)
            .unwrap(),
        mesh: inject::mesh::apply_mesh_config("").unwrap(),
        revision: String::new(),
        native_sidecars: NativeSidecars::Auto,
    }))
}

fn get(env: &TestEnv, args: &[&str]) -> Option<Value> {
    env.kubectl(args).ok().and_then(|s| serde_json::from_str(&s).ok())
}

fn gateway(name: &str, listeners: &str, infrastructure: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: {name}\n  namespace: {NS}\n  \
         labels: {{team: payments}}\nspec:\n  gatewayClassName: istio\n{infrastructure}  listeners:\n{listeners}"
    )
}

fn port_numbers(svc: &Value) -> Vec<i64> {
    svc["spec"]["ports"].as_array().unwrap().iter().map(|p| p["port"].as_i64().unwrap()).collect()
}

fn params(replicas: u32) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: edge-params, namespace: {NS}}}\ndata:\n  \
         deployment: |\n    spec:\n      replicas: {replicas}\n  service: |\n    metadata:\n      annotations: {{lb: internal}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_of_class_istio_gets_the_templates_objects() {
    let env = TestEnv::shared_by(file!());
    env.install_gateway_api_crds().unwrap();
    namespace(env, NS);
    let config = env.client_config().await.unwrap();
    let failures = DeploymentFailures::default();
    let options = DeploymentOptions {
        leader: LeaderElectionOptions {
            namespace: NS.into(),
            identity: "gw-deploy-test".into(),
            ..LeaderElectionOptions::default()
        }
        .with_ttl(Duration::from_secs(4)),
        backoff: (Duration::from_millis(100), Duration::from_secs(1)),
        system_namespace: NS.into(),
        injector: Some(injector()),
        failures: failures.clone(),
        ..DeploymentOptions::default()
    };
    let (trigger, shutdown) = shutdown_channel();
    let task = tokio::spawn(GatewayDeployer::new(config, options).run(shutdown));

    // The built-in class is created.
    wait_for("GatewayClass istio", || get(env, &["get", "gatewayclass", "istio", "-o", "json"]).is_some())
        .await;
    let class = get(env, &["get", "gatewayclass", "istio", "-o", "json"]).unwrap();
    assert_eq!(class["spec"]["controllerName"], "istio.io/gateway-controller");
    assert_eq!(class["spec"]["description"], "The default Istio GatewayClass");

    env.kubectl_apply(&params(2)).unwrap();
    let with_params =
        "  infrastructure:\n    parametersRef: {group: \"\", kind: ConfigMap, name: edge-params}\n";
    env.kubectl_apply(&gateway("edge", "  - {name: http, port: 80, protocol: HTTP}\n", with_params)).unwrap();
    let gw = get(env, &["-n", NS, "get", "gateway", "edge", "-o", "json"]).unwrap();
    let uid = gw["metadata"]["uid"].as_str().unwrap().to_string();
    let svc_args = ["-n", NS, "get", "service", "edge-istio", "-o", "json"];
    wait_for("Service edge-istio", || get(env, &svc_args).is_some()).await;
    for kind in ["serviceaccount", "deployment", "service"] {
        let o = get(env, &["-n", NS, "get", kind, "edge-istio", "-o", "json", "--show-managed-fields"])
            .unwrap_or_else(|| panic!("{kind} missing"));
        let labels = &o["metadata"]["labels"];
        assert_eq!(labels["gateway.networking.k8s.io/gateway-name"], "edge", "{kind}");
        assert_eq!(labels["gateway.networking.k8s.io/gateway-class-name"], "istio", "{kind}");
        assert_eq!(labels["gateway.istio.io/managed"], "istio.io-gateway-controller", "{kind}");
        assert_eq!(labels["team"], "payments", "{kind}: the Gateway's labels are copied");
        let owner = &o["metadata"]["ownerReferences"][0];
        assert_eq!(
            (owner["kind"].as_str(), owner["name"].as_str(), owner["uid"].as_str()),
            (Some("Gateway"), Some("edge"), Some(uid.as_str())),
            "{kind}"
        );
        let managers: Vec<&str> = o["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert!(managers.contains(&"istio.io/gateway-controller"), "{kind}: managers {managers:?}");
    }
    let svc = get(env, &svc_args).unwrap();
    assert_eq!(port_numbers(&svc), [15021, 80]);
    assert_eq!(svc["spec"]["type"], "LoadBalancer");
    assert_eq!(svc["metadata"]["annotations"]["lb"], "internal", "the parametersRef overlay");
    let deployment_args = ["-n", NS, "get", "deployment", "edge-istio", "-o", "json"];
    let deployment = get(env, &deployment_args).unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "docker.io/istio/proxyv2:1.28.0"
    );
    // The overlay ConfigMap changes: the Deployment follows.
    env.kubectl_apply(&params(3)).unwrap();
    wait_for("replicas 3", || get(env, &deployment_args).is_some_and(|d| d["spec"]["replicas"] == 3)).await;

    // A new listener: the Service's ports follow.
    env.kubectl_apply(&gateway(
        "edge",
        "  - {name: http, port: 80, protocol: HTTP}\n  - {name: tls, port: 8443, protocol: TLS, tls: {mode: Passthrough}}\n",
        with_params,
    ))
    .unwrap();
    wait_for("Service port 8443", || {
        get(env, &svc_args).is_some_and(|s| port_numbers(&s) == [15021, 80, 8443])
    })
    .await;
    let svc = get(env, &svc_args).unwrap();
    assert_eq!(svc["spec"]["ports"][2]["name"], "tls");
    assert_eq!(svc["spec"]["ports"][2]["appProtocol"], "tls");

    // A Gateway whose overlay ConfigMap does not exist: nothing applied, the failure listed; a
    // Gateway created after it is still served.
    let missing = "  infrastructure:\n    parametersRef: {group: \"\", kind: ConfigMap, name: nowhere}\n";
    env.kubectl_apply(&gateway("broken", "  - {name: http, port: 80, protocol: HTTP}\n", missing)).unwrap();
    env.kubectl_apply(&gateway("later", "  - {name: http, port: 81, protocol: HTTP}\n", "")).unwrap();
    wait_for("Service later-istio", || {
        get(env, &["-n", NS, "get", "service", "later-istio", "-o", "json"]).is_some()
    })
    .await;
    wait_for("the broken Gateway listed", || failures.list().iter().any(|(_, name, _)| name == "broken"))
        .await;
    let (_, _, reason) = failures.list().into_iter().find(|(_, name, _)| name == "broken").unwrap();
    assert_eq!(
        reason,
        format!("render: parametersRef targeting configmap \"{NS}/nowhere\", but configmap does not exist")
    );
    assert!(get(env, &["-n", NS, "get", "deployment", "broken-istio", "-o", "json"]).is_none());

    // Delete: no garbage collector here; the objects keep their ownerReferences to the gone Gateway.
    env.kubectl(&["-n", NS, "delete", "gateway", "edge"]).unwrap();
    let dep = get(env, &deployment_args).unwrap();
    assert_eq!(dep["metadata"]["ownerReferences"][0]["uid"], uid.as_str());

    trigger.trigger();
    task.await.unwrap();
}
