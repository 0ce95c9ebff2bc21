//! Kubernetes Ingress end to end on a real kube-apiserver: an Ingress (class annotation `istio`, the
//! default STRICT mode), two Services with EndpointSlices pointing at local echo servers (no kubelet),
//! the in-process control plane reading the cluster with the Ingress source, and a real Envoy router
//! (`router~` node, `istio: ingressgateway`) that routes by host and path; an Ingress edit moves
//! traffic live; `status.loadBalancer` follows the ingress Service and is read back from the API
//! server, written only when it changes. Needs Envoy (scripts/install-envoy.sh) and the test
//! environment (scripts/kube-testenv.sh build). The router listens on port 80 (the Gateway Istio
//! generates for an Ingress), so the test needs that port free.

use crate::support;

use std::{net::SocketAddr, time::Duration};

use meshpilot_kube::{ingress_source::IngressSourceOptions, leader::LeaderElectionOptions, testenv::TestEnv};
use meshpilot_testing::{AdsApi, EchoOptions, EchoServer, Envoy, Plane, PlaneOptions, get, wait_for};
use support::{host_ip, namespace, slice, slice_endpoint};

const NS: &str = "ingress-e2e";

async fn fetch(path: &str) -> String {
    let addr: SocketAddr = ([127, 0, 0, 1], 80).into();
    match get(addr, "web.example", path, &[]).await {
        Ok((200, body)) => body,
        Ok((status, body)) => format!("HTTP {status}: {body}"),
        Err(e) => format!("error: {e}"),
    }
}

fn ingress(a_backend: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\n  namespace: {NS}\n  \
         annotations: {{kubernetes.io/ingress.class: istio}}\nspec:\n  rules:\n  - host: web.example\n    http:\n      paths:\n      \
         - {{path: /a, pathType: Prefix, backend: {{service: {{name: {a_backend}, port: {{name: http}}}}}}}}\n      \
         - {{path: /b, pathType: Prefix, backend: {{service: {{name: svc-b, port: {{number: 8080}}}}}}}}\n"
    )
}

fn lb_status(env: &TestEnv) -> String {
    env.kubectl(&["-n", NS, "get", "ingress", "web", "-o", "jsonpath={.status.loadBalancer.ingress}"])
        .unwrap_or_default()
}

fn set_gateway_ip(env: &TestEnv, ip: &str) {
    let patch = format!(
        "{{\"status\":{{\"loadBalancer\":{{\"ingress\":[{{\"ip\":\"{ip}\"}},{{\"hostname\":\"lb.example\"}}]}}}}}}"
    );
    env.kubectl(&[
        "-n",
        "istio-system",
        "patch",
        "service",
        "istio-ingressgateway",
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
    ])
    .expect("patch the ingress Service status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ingress_routes_through_a_router_and_status_follows_the_ingress_service() {
    let env = TestEnv::shared_by(file!());
    namespace(env, NS);
    namespace(env, "istio-system");
    let ip = host_ip();
    let mut manifest = String::new();
    let mut echoes = Vec::new();
    for name in ["svc-a", "svc-b"] {
        let echo = EchoServer::start_with(name, EchoOptions { ip: ip.into(), ..EchoOptions::default() })
            .await
            .unwrap();
        manifest.push_str(&format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {NS}}}\n\
             spec:\n  ports: [{{name: http, port: 8080, targetPort: http}}]\n---\n"
        ));
        manifest.push_str(&slice(
            NS,
            name,
            name,
            &format!("{{name: http, port: {}}}", echo.addr.port()),
            &[slice_endpoint(&ip.to_string(), "", true, false)],
        ));
        manifest.push_str("---\n");
        echoes.push(echo);
    }
    manifest.push_str(
        "apiVersion: v1\nkind: Service\nmetadata: {name: istio-ingressgateway, namespace: istio-system}\n\
         spec:\n  type: LoadBalancer\n  selector: {istio: ingressgateway}\n  ports: [{name: http2, port: 80, targetPort: 8080}]\n---\n",
    );
    manifest.push_str(&ingress("svc-a"));
    env.kubectl_apply(&manifest).unwrap();
    set_gateway_ip(env, "192.0.2.10");

    let config = env.client_config().await.unwrap();
    let mut options = PlaneOptions::kube(config, NS);
    let leader = LeaderElectionOptions {
        namespace: NS.into(),
        identity: "ingress-e2e".into(),
        ..LeaderElectionOptions::default()
    }
    .with_ttl(Duration::from_secs(4));
    if let Some(k) = options.kube.as_mut() {
        k.ingress = Some(IngressSourceOptions {
            backoff: (Duration::from_millis(100), Duration::from_secs(1)),
            leader: Some(leader),
            ..IngressSourceOptions::default()
        });
    }
    let plane = Plane::start_with(options).await.unwrap();
    let source = plane.kube.as_ref().unwrap().ingress.clone().unwrap();
    assert_eq!(source.supported(), [format!("{NS}/web")]);
    let envoy = Envoy::start(&plane.router(AdsApi::Sotw)).await.unwrap();

    wait_for("/a routed to svc-a by the router", Duration::from_secs(60), async || {
        (fetch("/a").await == "svc-a").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    assert_eq!(fetch("/b/x").await, "svc-b");
    assert!(fetch("/c").await.starts_with("HTTP 404"), "no route for /c");
    // Ingress prefixes match whole path segments (Istio's path_separated_prefix): /ab is not under /a.
    assert!(fetch("/ab").await.starts_with("HTTP 404"), "/ab matched the /a prefix");

    // Status: the ingress Service's load-balancer addresses, sorted by host name (IPs have none) then IP.
    let want = r#"[{"ip":"192.0.2.10"},{"hostname":"lb.example"}]"#;
    wait_for("status.loadBalancer written", Duration::from_secs(60), async || {
        (lb_status(env) == want).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: status {}", lb_status(env)));

    // Edit the Ingress: /a now goes to svc-b.
    env.kubectl_apply(&ingress("svc-b")).unwrap();
    wait_for("/a moved to svc-b", Duration::from_secs(60), async || {
        (fetch("/a").await == "svc-b").then_some(())
    })
    .await
    .unwrap();
    assert_eq!(fetch("/b").await, "svc-b");

    // Nothing to write while the addresses stay the same: after a later pass, no new write.
    let writes = source.status_writes();
    assert!(writes >= 1);
    let passes = source.status_passes();
    env.kubectl(&["-n", NS, "label", "service", "svc-a", "touched=yes", "--overwrite"]).unwrap();
    wait_for("a later status pass", Duration::from_secs(60), async || {
        (source.status_passes() > passes).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(source.status_writes(), writes, "a status pass with nothing changed wrote");

    // The ingress Service gets another address: the status follows.
    set_gateway_ip(env, "192.0.2.20");
    let want = r#"[{"ip":"192.0.2.20"},{"hostname":"lb.example"}]"#;
    wait_for("status.loadBalancer updated", Duration::from_secs(60), async || {
        (lb_status(env) == want).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: status {}", lb_status(env)));
    wait_for("the write counted", Duration::from_secs(10), async || {
        (source.status_writes() > writes).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(source.status_writes(), writes + 1, "one change, one write");

    for t in ["cds", "lds", "rds"] {
        let rejected = envoy.stat(&format!("listener_manager.{t}.update_rejected")).await.unwrap();
        assert!(rejected.unwrap_or(0) == 0, "{t} rejected");
    }
    drop(envoy);
    env.kubectl(&["-n", NS, "delete", "ingress", "web"]).unwrap();
}
