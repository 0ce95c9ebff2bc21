//! Automated deployment on a real kube-apiserver with the Gateway API CRDs installed by the test
//! environment: a Gateway of class `istio` gets the ServiceAccount, Deployment and Service Istio would
//! create (names, labels, ownerReferences, field manager), the GatewayClass `istio` is created, a
//! listener edit moves the Service's ports, and after the Gateway is deleted the objects still point
//! at it through ownerReferences (a bare API server runs no garbage collector).

use crate::support;

use std::time::Duration;

use meshpilot_kube::{
    gateway_deployment::{DeploymentOptions, GatewayDeployer},
    leader::LeaderElectionOptions,
    testenv::TestEnv,
};
use model::shutdown_channel;
use serde_json::Value;
use support::{namespace, wait_for};

const NS: &str = "gw-deploy";

fn get(env: &TestEnv, args: &[&str]) -> Option<Value> {
    env.kubectl(args).ok().and_then(|s| serde_json::from_str(&s).ok())
}

fn gateway(listeners: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: edge\n  namespace: {NS}\n  \
         labels: {{team: payments}}\nspec:\n  gatewayClassName: istio\n  listeners:\n{listeners}"
    )
}

fn port_numbers(svc: &Value) -> Vec<i64> {
    svc["spec"]["ports"].as_array().unwrap().iter().map(|p| p["port"].as_i64().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_of_class_istio_gets_service_account_deployment_and_service() {
    let env = TestEnv::shared_by(file!());
    env.install_gateway_api_crds().unwrap();
    namespace(env, NS);
    let config = env.client_config().await.unwrap();
    let options = DeploymentOptions {
        leader: LeaderElectionOptions {
            namespace: NS.into(),
            identity: "gw-deploy-test".into(),
            ..LeaderElectionOptions::default()
        }
        .with_ttl(Duration::from_secs(4)),
        backoff: (Duration::from_millis(100), Duration::from_secs(1)),
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

    env.kubectl_apply(&gateway("  - {name: http, port: 80, protocol: HTTP}\n")).unwrap();
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
    assert_eq!(svc["spec"]["selector"]["gateway.networking.k8s.io/gateway-name"], "edge");

    // A new listener: the Service's ports follow.
    env.kubectl_apply(&gateway("  - {name: http, port: 80, protocol: HTTP}\n  - {name: tls, port: 8443, protocol: TLS, tls: {mode: Passthrough}}\n")).unwrap();
    wait_for("Service port 8443", || {
        get(env, &svc_args).is_some_and(|s| port_numbers(&s) == [15021, 80, 8443])
    })
    .await;
    let svc = get(env, &svc_args).unwrap();
    assert_eq!(svc["spec"]["ports"][2]["name"], "tls");
    assert_eq!(svc["spec"]["ports"][2]["appProtocol"], "tls");

    // Delete: no garbage collector here; the objects keep their ownerReferences to the gone Gateway.
    env.kubectl(&["-n", NS, "delete", "gateway", "edge"]).unwrap();
    let dep = get(env, &["-n", NS, "get", "deployment", "edge-istio", "-o", "json"]).unwrap();
    assert_eq!(dep["metadata"]["ownerReferences"][0]["uid"], uid.as_str());

    trigger.trigger();
    task.await.unwrap();
}
