//! The end-to-end proof on a real kube-apiserver: bookinfo's reviews Service, Pods and
//! EndpointSlices created in the API server (no kubelet), bookinfo's DestinationRule and
//! VirtualService written through the KubeSource API, a real Envoy sidecar (INTERCEPTION_MODE NONE)
//! served by an in-process control plane that reads both from Kubernetes. Needs Envoy
//! (scripts/install-envoy.sh) and the test environment (scripts/kube-testenv.sh build).

use crate::support;

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    time::{Duration, Instant},
};

use api::Kind;
use config::parse::ParseOptions;
use meshpilot_kube::testenv::TestEnv;
use meshpilot_testing::{AdsApi, EchoOptions, EchoServer, Envoy, Plane, free_port, get, testdata, wait_for};
use model::ConfigStore;
use support::{host_ip, namespace, pod, set_pod_ip, slice, slice_endpoint, start_plane};

const NS: &str = "bookinfo-kube";

/// `GET /` with `Host: reviews:PORT` and optional `end-user`; the body, or the error as text.
async fn reviews(addr: SocketAddr, user: Option<&str>) -> String {
    let host = format!("reviews:{}", addr.port());
    let headers: Vec<(&str, &str)> = user.map(|u| ("end-user", u)).into_iter().collect();
    match get(addr, &host, "/", &headers).await {
        Ok((200, body)) => body,
        Ok((status, body)) => format!("HTTP {status}: {body}"),
        Err(e) => format!("error: {e}"),
    }
}

/// Writes a bookinfo sample through the KubeSource API (create, or update when it exists).
async fn write_sample(plane: &Plane, file: &str) {
    let text = std::fs::read_to_string(testdata().join("samples/bookinfo/networking").join(file)).unwrap();
    let options = ParseOptions { default_namespace: NS.into(), ..ParseOptions::default() };
    for doc in config::parse::parse_text(file, &text, &options) {
        let config = doc.config.unwrap_or_else(|| panic!("{file}: {:?}", doc.errors));
        let source = plane.kube_source().clone();
        tokio::task::spawn_blocking(move || {
            let key = config.key();
            match source.get(key.kind, &key.namespace, &key.name) {
                Some(_) => source.update(config),
                None => source.create(config),
            }
        })
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bookinfo_reviews_routing_from_kubernetes() {
    let env = TestEnv::shared_by(file!());
    namespace(env, NS);
    let ip = host_ip();
    let mut versions = Vec::new();
    for v in ["v1", "v2", "v3"] {
        let options = EchoOptions { ip: ip.into(), ..EchoOptions::default() };
        versions.push((v, EchoServer::start_with(&format!("reviews-{v}"), options).await.unwrap()));
    }
    // The Service (targetPort by name), one Pod and one EndpointSlice per version: every version
    // listens on the host address at its own port, so each slice carries its version's port.
    let port = free_port();
    let mut manifest = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: reviews, namespace: {NS}, labels: {{app: reviews}}}}\n\
         spec:\n  selector: {{app: reviews}}\n  ports: [{{name: http, port: {port}, targetPort: http}}]\n"
    );
    for (v, echo) in &versions {
        let p = echo.addr.port();
        manifest.push_str("---\n");
        manifest.push_str(&pod(
            NS,
            &format!("reviews-{v}"),
            &format!("app: reviews, version: {v}"),
            "bookinfo-reviews",
            "kreg-node-bookinfo",
            &format!("{{name: http, containerPort: {p}}}"),
        ));
    }
    env.kubectl_apply(&manifest).unwrap();
    let mut slices = String::new();
    for (v, echo) in &versions {
        set_pod_ip(env, NS, &format!("reviews-{v}"), &ip.to_string());
        slices.push_str(&slice(
            NS,
            &format!("reviews-{v}"),
            "reviews",
            &format!("{{name: http, port: {}}}", echo.addr.port()),
            &[slice_endpoint(&ip.to_string(), &format!("reviews-{v}"), true, false)],
        ));
        slices.push_str("---\n");
    }
    env.kubectl_apply(&slices).unwrap();

    let plane = start_plane(env, NS).await;
    write_sample(&plane, "destination-rule-all.yaml").await;
    write_sample(&plane, "virtual-service-reviews-jason-v2-v3.yaml").await;
    let envoy = Envoy::start(&plane.sidecar("productpage", NS, AdsApi::Sotw)).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    // Before the VirtualService reaches Envoy, round-robin can answer jason with v2 by chance: wait
    // for its `end-user` match in Envoy's routes, then for both subsets to answer.
    wait_for("jason routed to v2 through Envoy", Duration::from_secs(30), async || {
        let routed =
            envoy.config_dump(false).await.map(|d| d.to_string().contains("end-user")).unwrap_or(false);
        (routed
            && reviews(addr, Some("jason")).await == "reviews-v2"
            && reviews(addr, None).await == "reviews-v3")
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    for i in 0..10 {
        assert_eq!(reviews(addr, Some("jason")).await, "reviews-v2", "jason request {i}");
        assert_eq!(reviews(addr, Some("alice")).await, "reviews-v3", "alice request {i}");
        assert_eq!(reviews(addr, None).await, "reviews-v3", "anonymous request {i}");
    }

    // Change the VirtualService through the API: others move to v1 (test-v2: jason → v2, rest → v1).
    let start = Instant::now();
    write_sample(&plane, "virtual-service-reviews-test-v2.yaml").await;
    let vs = plane.kube_source().get(Kind::VirtualService, NS, "reviews");
    assert!(vs.is_some());
    wait_for("others moved to v1", Duration::from_secs(30), async || {
        (reviews(addr, None).await == "reviews-v1").then_some(())
    })
    .await
    .unwrap();
    let moved = start.elapsed();
    println!("VirtualService change through the API moved traffic in {} ms", moved.as_millis());
    for i in 0..5 {
        assert_eq!(reviews(addr, Some("jason")).await, "reviews-v2", "jason after the change {i}");
        assert_eq!(reviews(addr, None).await, "reviews-v1", "anonymous after the change {i}");
    }

    // Delete it: round-robin over the three versions again.
    let start = Instant::now();
    let source = plane.kube_source().clone();
    tokio::task::spawn_blocking(move || source.delete(Kind::VirtualService, NS, "reviews", None))
        .await
        .unwrap()
        .unwrap();
    let mut seen = BTreeSet::new();
    wait_for("all three versions after the delete", Duration::from_secs(30), async || {
        seen.insert(reviews(addr, Some("jason")).await);
        (["reviews-v1", "reviews-v2", "reviews-v3"].iter().all(|v| seen.contains(*v))).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: saw {seen:?}"));
    println!("VirtualService delete: all three versions served after {} ms", start.elapsed().as_millis());
    for t in ["cds", "lds", "rds"] {
        let rejected = envoy.stat(&format!("listener_manager.{t}.update_rejected")).await.unwrap();
        assert!(rejected.unwrap_or(0) == 0, "{t} rejected");
    }
    assert_eq!(envoy.stat("cluster_manager.cds.update_rejected").await.unwrap().unwrap_or(0), 0);
}
