//! End-to-end helpers of the discovery tests: bookinfo's reviews upstreams and samples, the echo
//! setup for route features, and bootstraps in the bookinfo namespace. The control plane, Envoy,
//! the HTTP client and the echo servers are `meshpilot_testing`'s.

pub mod secure;
pub mod tls;

use std::{net::SocketAddr, path::Path, time::Duration};

use meshpilot_testing::{AdsApi, Bootstrap, EchoServer, Envoy, Plane, free_port, get, testdata, wait_for};

/// reviews v1/v2/v3 as echo servers, plus the ServiceEntry/WorkloadEntries pointing at them, with the
/// service on `port`.
pub struct Reviews {
    pub v1: EchoServer,
    pub v2: EchoServer,
    pub v3: EchoServer,
}

impl Reviews {
    pub async fn start() -> Reviews {
        Reviews {
            v1: EchoServer::start("reviews-v1").await.unwrap(),
            v2: EchoServer::start("reviews-v2").await.unwrap(),
            v3: EchoServer::start("reviews-v3").await.unwrap(),
        }
    }

    /// ServiceEntry `reviews.<ns>.svc.cluster.local:port` + one WorkloadEntry per version.
    pub fn registry_yaml(&self, namespace: &str, port: u16) -> String {
        let mut out = format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: reviews, namespace: {namespace}}}\n\
             spec:\n  hosts: [reviews.{namespace}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
             - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: reviews}}\n"
        );
        for (v, echo) in [("v1", &self.v1), ("v2", &self.v2), ("v3", &self.v3)] {
            out.push_str(&format!(
                "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: reviews-{v}, namespace: {namespace}}}\n\
                 spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  labels: {{app: reviews, version: {v}}}\n",
                echo.addr.port()
            ));
        }
        out
    }
}

/// Copies `files` (paths under the Istio test data) into `dir`, setting `namespace` on every object.
pub fn copy_samples(dir: &Path, files: &[&str], namespace: &str) {
    for f in files {
        let text = std::fs::read_to_string(testdata().join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        let text = text.replace("metadata:\n", &format!("metadata:\n  namespace: {namespace}\n"));
        let name = Path::new(f).file_name().unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }
}

/// A ServiceEntry `echo.<NS>.svc.cluster.local` on `port` (HTTP, STATIC) and one WorkloadEntry
/// `127.0.0.1:upstream_port` for it, as one YAML file's text.
pub fn echo_registry(port: u16, upstream_port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  hosts: [echo.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: echo}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  address: 127.0.0.1\n  ports: {{http: {upstream_port}}}\n  labels: {{app: echo}}\n"
    )
}

/// A ServiceEntry `echo.<NS>.svc.cluster.local:port` with one WorkloadEntry at `upstream`, the
/// VirtualService `vs_spec` (the YAML under `spec:`, indented two spaces) for host `echo`, a plane
/// and a sidecar Envoy. Returns the listener address; the caller waits for the route's effect.
pub async fn setup_echo(
    upstream: SocketAddr,
    vs_spec: &str,
) -> (tempfile::TempDir, Plane, Envoy, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let registry = echo_registry(port, upstream.port());
    std::fs::write(dir.path().join("echo-registry.yaml"), registry).unwrap();
    let vs = format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: echo, namespace: {NS}}}\nspec:\n{vs_spec}"
    );
    std::fs::write(dir.path().join("echo-vs.yaml"), vs).unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&sidecar("client", &plane, AdsApi::Sotw)).await.unwrap();
    (dir, plane, envoy, ([127, 0, 0, 1], port).into())
}

/// The namespace of the bookinfo workloads.
pub const NS: &str = "default";

/// A sidecar bootstrap for workload `name` in [`NS`].
pub fn sidecar(name: &str, plane: &Plane, api: AdsApi) -> Bootstrap {
    plane.sidecar(name, NS, api)
}

/// An ingress gateway bootstrap (`istio: ingressgateway` in `istio-system`).
pub fn router(plane: &Plane, api: AdsApi) -> Bootstrap {
    plane.router(api)
}

/// The bookinfo reviews setup: reviews v1/v2/v3 echo servers, `vs` plus `destination-rule-all.yaml`,
/// a plane and a productpage sidecar Envoy whose reviews route works; returns the listener address.
pub async fn setup(api: AdsApi, vs: &str) -> (tempfile::TempDir, Reviews, Plane, Envoy, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let reviews = Reviews::start().await;
    let port = free_port();
    std::fs::write(dir.path().join("reviews-registry.yaml"), reviews.registry_yaml(NS, port)).unwrap();
    copy_samples(
        dir.path(),
        &[
            &format!("samples/bookinfo/networking/{vs}"),
            "samples/bookinfo/networking/destination-rule-all.yaml",
        ],
        NS,
    );
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&sidecar("productpage", &plane, api)).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let host = format!("reviews:{port}");
    wait_for("reviews route through Envoy", Duration::from_secs(10), async || {
        match get(addr, &host, "/", &[]).await {
            Ok((200, body)) if body.starts_with("reviews-v") => Some(()),
            _ => None,
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    (dir, reviews, plane, envoy, addr)
}

/// Envoy's body for a request the RBAC filter denies.
pub const RBAC_DENIED: &str = "RBAC: access denied";

/// A listener of a running Envoy that a test sends requests to with one `Host`, waiting for config
/// changes by their effect on the answers (policies and routes arrive asynchronously).
pub struct Traffic {
    pub envoy: Envoy,
    pub addr: SocketAddr,
    pub host: &'static str,
}

impl Traffic {
    /// One request; `None` if it could not be made.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Option<meshpilot_testing::Response> {
        meshpilot_testing::request_method(self.addr, method, self.host, path, headers).await.ok()
    }

    /// Waits (up to 15 s) until `method path` with `headers` gets `status`; panics with the last
    /// answer and Envoy's log otherwise.
    pub async fn wait_status(
        &self,
        what: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        status: u16,
    ) -> meshpilot_testing::Response {
        match wait_for(what, Duration::from_secs(15), async || {
            self.send(method, path, headers).await.filter(|r| r.status == status)
        })
        .await
        {
            Ok(r) => r,
            Err(e) => {
                let last = self.send(method, path, headers).await;
                panic!("{e}\nlast: {last:?}\n{}", self.envoy.log_tail(40))
            }
        }
    }

    /// The status of one request now (after a change was observed through another request); 0 if
    /// the request failed.
    pub async fn status(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
        self.send(method, path, headers).await.map(|r| r.status).unwrap_or(0)
    }

    /// Envoy rejected no CDS or LDS update.
    pub async fn assert_no_nack(&self) {
        for t in ["cds", "lds"] {
            let rejected = self.envoy.stat(&format!("{t}.update_rejected")).await.unwrap().unwrap_or(0);
            assert_eq!(rejected, 0, "{t} NACKed:\n{}", self.envoy.log_tail(40));
        }
    }
}
