//! Istio's own Helm charts as meshpilot's install, end to end on a real kube-apiserver: the `base` and
//! `istiod` charts rendered by real helm with `install/values-meshpilot.yaml` and applied; meshpilot
//! started exactly as the rendered Deployment says (`webhook_support::chart_install`: args, env,
//! mounts, the istiod ServiceAccount's in-cluster credentials under the chart's RBAC, no
//! `--kubeconfig`); the API server then calls meshpilot's `/inject` and `/validate` through the chart's
//! own webhook configurations (Service `istiod` port 443, resolved to its EndpointSlice).

use std::time::Duration;

use kube_source::testenv::TestEnv;
use meshpilot_testing::wait::wait_for_blocking;
use serde_json::Value;

use crate::webhook_support::{
    chart_install::{self, ChartIstiod, InjectedSidecar, NAMESPACE},
    kubelet::PodNetwork,
};

/// The pod of Istio's `curl` sample Deployment (`samples/curl/curl.yaml`) in `namespace`.
fn curl_pod(namespace: &str, name: &str) -> String {
    let text = std::fs::read_to_string(meshpilot_testing::testdata().join("samples/curl/curl.yaml")).unwrap();
    let deployment = api::yaml::parse_documents(&text)
        .into_iter()
        .filter_map(|d| d.unwrap().root.map(|r| r.to_json()))
        .find(|o| o["kind"] == "Deployment")
        .expect("the sample's Deployment");
    let template = &deployment["spec"]["template"];
    let mut metadata = template["metadata"].clone();
    metadata["name"] = name.into();
    metadata["namespace"] = namespace.into();
    let mut spec = template["spec"].clone();
    // The sample's ServiceAccount `curl` is not created here; the pod runs as `default`.
    spec["serviceAccountName"] = "default".into();
    serde_json::to_string(
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}),
    )
    .unwrap()
}

fn kubectl_create(env: &TestEnv, manifest: &str) -> Result<String, String> {
    let file = env.dir().join(format!("create-{}.json", std::process::id()));
    std::fs::write(&file, manifest).unwrap();
    env.kubectl(&["create", "-f", &file.display().to_string()]).map_err(|e| e.to_string())
}

fn get(env: &TestEnv, kind: &str, name: &str, namespace: Option<&str>) -> Value {
    let mut args = vec!["get", kind, name, "-o", "json"];
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    serde_json::from_str(&env.kubectl(&args).unwrap()).unwrap()
}

fn container_names(pod: &Value, list: &str) -> Vec<String> {
    pod["spec"][list]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn istios_charts_install_meshpilot_which_injects_and_validates_through_the_api_server() {
    let _ports = chart_install::lock_istiod_ports();
    let env = TestEnv::shared_by(file!());

    // Render with real helm and apply: base (CRDs, the default validator) then istiod.
    // One chart value marks the mesh config (the ConfigMap `istio`), so that the injected proxy shows
    // where its defaults came from.
    let base = chart_install::render("base", "base", &[]);
    let istiod = chart_install::render(
        "istiod",
        "istio-control/istio-discovery",
        &["meshConfig.defaultConfig.proxyMetadata.MESHPILOT_MESH_SOURCE=configmap-istio"],
    );
    let deployment = chart_install::find(&istiod, "Deployment", "istiod");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"], "localhost/meshpilot:0.1.0",
        "the values file swaps the image"
    );
    chart_install::apply(env, &base);
    chart_install::apply(env, &istiod);

    // meshpilot as the Deployment's container.
    let mut server = ChartIstiod::start(env, &istiod, "istiod-7d4b9c8f6-chart");
    assert_eq!(server.args.first().map(String::as_str), Some("discovery"));
    assert_eq!(server.env["POD_NAMESPACE"], NAMESPACE);
    assert_eq!(server.env["SERVICE_ACCOUNT"], "istiod");
    assert_eq!(server.env["KUBECONFIG"], "/var/run/secrets/remote/config", "a file the chart leaves absent");
    server.wait_ready(Duration::from_secs(120));

    // The pod is ready: the endpointslice controller's EndpointSlice, at this machine's address.
    let ip = chart_install::host_ipv4();
    chart_install::write_endpoint_slice(env, &istiod, "istiod", &server.pod_name, &ip);

    // meshpilot patches the caBundle of the chart's webhooks, and the validator's failurePolicy to Fail.
    wait_for_blocking("the chart's webhooks patched by meshpilot", Duration::from_secs(90), || {
        let mwc = get(env, "mutatingwebhookconfiguration", "istio-sidecar-injector", None);
        let vwc = get(env, "validatingwebhookconfiguration", "istio-validator-istio-system", None);
        let patched = |c: &Value| {
            c["webhooks"]
                .as_array()
                .is_some_and(|ws| ws.iter().all(|w| w["clientConfig"]["caBundle"].is_string()))
        };
        let fail =
            vwc["webhooks"].as_array().is_some_and(|ws| ws.iter().all(|w| w["failurePolicy"] == "Fail"));
        (patched(&mwc) && patched(&vwc) && fail).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", server.output()));

    // A namespace labelled istio-injection=enabled: the API server calls /inject.
    let _ = env.kubectl(&["create", "namespace", "chart-injected"]);
    env.kubectl(&["label", "namespace", "chart-injected", "istio-injection=enabled", "--overwrite"]).unwrap();
    kubectl_create(env, &curl_pod("chart-injected", "curl-injected"))
        .unwrap_or_else(|e| panic!("{e}\n{}", server.output()));
    let pod = get(env, "pod", "curl-injected", Some("chart-injected"));
    let (init, containers) = (container_names(&pod, "initContainers"), container_names(&pod, "containers"));
    assert!(pod["metadata"]["annotations"]["sidecar.istio.io/status"].is_string(), "{pod}");
    assert!(init.contains(&"istio-init".to_string()), "the chart has no CNI: istio-init runs: {init:?}");
    // Native sidecars (ENABLE_NATIVE_SIDECARS=auto with no Node objects): istio-proxy is an init
    // container that restarts always.
    let proxy = pod["spec"]["initContainers"].as_array().unwrap().iter().find(|c| c["name"] == "istio-proxy");
    let proxy =
        proxy.unwrap_or_else(|| panic!("istio-proxy among the init containers: {init:?}, {containers:?}"));
    assert_eq!(proxy["restartPolicy"], "Always");
    assert_eq!(containers, ["curl"]);
    let args: Vec<&str> = proxy["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(args.first(), Some(&"proxy"), "{args:?}");
    assert!(
        proxy["image"].as_str().unwrap().contains("/proxyv2:"),
        "the proxy image stays Istio's: {}",
        proxy["image"]
    );
    let proxy_config = proxy["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "PROXY_CONFIG")
        .and_then(|e| e["value"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        proxy_config.contains("MESHPILOT_MESH_SOURCE") && proxy_config.contains("configmap-istio"),
        "the mesh config from the chart's ConfigMap istio: {proxy_config}"
    );

    // Without the label: not injected.
    let _ = env.kubectl(&["create", "namespace", "chart-plain"]);
    kubectl_create(env, &curl_pod("chart-plain", "curl-plain")).unwrap();
    let plain = get(env, "pod", "curl-plain", Some("chart-plain"));
    assert_eq!(container_names(&plain, "containers"), ["curl"]);
    assert!(container_names(&plain, "initContainers").is_empty(), "{plain}");

    // An Istio object with an invalid field: refused through the chart's validator and /validate.
    let invalid = r#"{"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": "bad", "namespace": "chart-plain"},
        "spec": {"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "reviews"}, "weight": -1}]}]}}"#;
    let refused = kubectl_create(env, invalid).expect_err("the invalid VirtualService is refused");
    assert!(refused.contains("denied the request"), "refused by the admission webhook: {refused}");
    assert!(refused.contains("validation.istio.io"), "by the chart's validator: {refused}");

    // The injected pod runs: Istio's containers from the stored pod start a real sidecar that gets its
    // certificate and config from meshpilot and routes the application's request.
    injected_pod_runs_a_real_sidecar(env, &server, "chart-injected", "curl-injected");

    // Every request the chart's RBAC refused meshpilot (the report lists them).
    let denials = server.denials();
    assert!(
        denials.is_empty(),
        "meshpilot needed permissions the chart's RBAC does not grant:\n{}",
        denials.join("\n")
    );
}

/// Runs the injected pod `pod_name` as a node would, against the chart-installed meshpilot `server`:
/// the scheduler's binding and the kubelet's pod status (its network namespace's address), the
/// objects a controller-manager would have made (ServiceAccount `default`, ConfigMap
/// `kube-root-ca.crt`), then the pod's `istio-init` and `istio-proxy` from the stored spec
/// ([`InjectedSidecar`]); an upstream Service `echo` whose one endpoint is a server on this machine.
/// The sidecar becomes ready, holds a certificate for the pod's SPIFFE identity issued by meshpilot, and
/// the application's plain request to the Service's ClusterIP is redirected by istio-init's rules into
/// Envoy, which routes it to the endpoint.
fn injected_pod_runs_a_real_sidecar(env: &TestEnv, server: &ChartIstiod, namespace: &str, pod_name: &str) {
    let mut network = PodNetwork::create(0);
    // The pod resolves the mesh config's discoveryAddress (istiod.istio-system.svc:15012) to this
    // machine's end of the pod network, where meshpilot listens on all addresses (`:15012`).
    network.hosts.push((network.host_ip.clone(), format!("istiod.{NAMESPACE}.svc")));

    let _ = env.kubectl(&["create", "serviceaccount", "default", "-n", namespace]);
    let ca = std::fs::read_to_string(env.dir().join("pki/ca.crt")).unwrap();
    let root_ca = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt", "namespace": namespace}, "data": {"ca.crt": ca}});
    env.kubectl_apply(&root_ca.to_string()).unwrap();
    let binding = serde_json::json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod_name, "namespace": namespace}, "target": {"kind": "Node", "name": "node-1"}});
    kubectl_create(env, &binding.to_string()).unwrap();
    let status = serde_json::json!({"status": {
        "phase": "Running", "podIP": network.pod_ip, "podIPs": [{"ip": network.pod_ip}],
        "hostIP": network.host_ip, "hostIPs": [{"ip": network.host_ip}],
        "conditions": [{"type": "Ready", "status": "True"}],
    }});
    env.kubectl(&[
        "patch",
        "pod",
        pod_name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ])
    .unwrap();

    // The root meshpilot publishes in every namespace, which the pod mounts (the kubelet waits for it).
    wait_for_blocking("istio-ca-root-cert in the pod's namespace", Duration::from_secs(60), || {
        let out = env.kubectl(&[
            "get",
            "configmap",
            "istio-ca-root-cert",
            "-n",
            namespace,
            "--ignore-not-found",
            "-o",
            "name",
        ]);
        out.ok().filter(|o| !o.trim().is_empty())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", server.output()));

    // The upstream: a server on this machine's end of the pod network, Service `echo` port 80 (HTTP by
    // its name) with that server as its one endpoint, as the endpointslice controller would write it.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let options = meshpilot_testing::echo::EchoOptions {
        ip: network.host_ip.parse().unwrap(),
        echo_head: true,
        ..Default::default()
    };
    let echo = runtime.block_on(meshpilot_testing::echo::EchoServer::start_with("echo", options)).unwrap();
    let service = serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "echo", "namespace": namespace},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": echo.addr.port()}]}});
    env.kubectl_apply(&service.to_string()).unwrap();
    let slice = serde_json::json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "echo-1", "namespace": namespace, "labels": {
            "kubernetes.io/service-name": "echo",
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [network.host_ip], "conditions": {"ready": true, "serving": true, "terminating": false}}],
        "ports": [{"name": "http", "port": echo.addr.port(), "protocol": "TCP"}]});
    env.kubectl_apply(&slice.to_string()).unwrap();
    let cluster_ip =
        get(env, "service", "echo", Some(namespace))["spec"]["clusterIP"].as_str().unwrap().to_string();

    let pod = get(env, "pod", pod_name, Some(namespace));
    let mut sidecar = InjectedSidecar::start(env, &pod, &network);
    let proxy_env = &sidecar.proxy.env;
    assert_eq!(proxy_env["INSTANCE_IP"], network.pod_ip, "status.podIP");
    assert_eq!(proxy_env["POD_NAME"], pod_name);
    assert_eq!(sidecar.proxy.args[..2], ["proxy", "sidecar"]);
    assert!(
        sidecar.proxy.args.contains(&format!("{namespace}.svc.cluster.local")),
        "$(POD_NAMESPACE) expanded"
    );
    sidecar.wait_ready(&network, Duration::from_secs(120));

    // Its certificate: issued by meshpilot's CA for the pod's identity (Envoy's admin on the pod's
    // loopback).
    let spiffe = format!("spiffe://cluster.local/ns/{namespace}/sa/default");
    let certs = wait_for_blocking("the workload certificate in Envoy", Duration::from_secs(60), || {
        let out = network.exec("curl", &["-s", "-m", "5", "http://127.0.0.1:15000/certs"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.contains(&spiffe).then_some(text)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}\n{}", sidecar.proxy.output(), server.output()));
    // The root Envoy trusts is the one meshpilot published (its serial, as Envoy prints it).
    let root = env
        .kubectl(&[
            "get",
            "configmap",
            "istio-ca-root-cert",
            "-n",
            namespace,
            "-o",
            "jsonpath={.data.root-cert\\.pem}",
        ])
        .unwrap();
    let (_, pem) = x509_parser::pem::parse_x509_pem(root.as_bytes()).unwrap();
    let serial: String =
        pem.parse_x509().unwrap().tbs_certificate.raw_serial().iter().map(|b| format!("{b:02x}")).collect();
    let serial = serial.trim_start_matches('0');
    // Envoy prints serials in hex with or without a leading zero nibble: compare without leading zeros.
    let in_trust = certs
        .split("\"serial_number\": \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .any(|s| s.trim_start_matches('0') == serial);
    assert!(in_trust, "meshpilot's root {serial} in Envoy's trust: {certs}");

    // The application's request, as the curl container would send it: to the Service's ClusterIP,
    // redirected by istio-init's iptables rules to Envoy's 15001, routed to the endpoint.
    let host = format!("echo.{namespace}.svc.cluster.local");
    let body = wait_for_blocking("the request routed through the sidecar", Duration::from_secs(60), || {
        let url = format!("http://{cluster_ip}/through-the-sidecar");
        let out = network.exec("curl", &["-s", "-m", "5", "-H", &format!("Host: {host}"), &url]);
        let body = String::from_utf8_lossy(&out.stdout).to_string();
        body.starts_with("echo\n").then_some(body)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}\nistio-init:\n{}", sidecar.proxy.output(), sidecar.init_output));
    assert!(body.contains("get /through-the-sidecar http/1.1"), "{body}");
    assert!(body.contains("x-request-id:"), "Envoy's request id: the request went through Envoy: {body}");
    assert!(echo.hits() >= 1);
    drop(echo);
    drop(runtime);
}
