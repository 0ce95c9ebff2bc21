//! Issue 22 part 1, "only what changed": the EDS that follows a CDS change, counted per stream with a
//! real Envoy sidecar (responses, resources, bytes of the connection's `TypeStatus`).
//!
//! - One new ServiceEntry among 50: SotW sends one EDS response (the watched assignments plus the
//!   new cluster's, before Envoy asks for it); Delta sends one EDS response with the new cluster's
//!   assignment only (answering Envoy's subscription), never the 50 unchanged ones.
//! - Delta, a changed cluster (a DestinationRule) with unchanged endpoints: its assignment alone is
//!   re-sent, and Envoy's `cluster_manager.warming_clusters` goes back to 0 with traffic still served.
//!
//! Counts are read after a marker change (a VirtualService: RDS only) is ACKed: pushes and answers reach
//! a connection in order, so everything the change caused went out before the marker's routes.
//! Needs Envoy (scripts/install-envoy.sh).

use crate::support;

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::{AdsApi, EchoServer, Envoy, Plane, free_port, get, wait_for, write_atomic};
use support::NS;
use xds::{
    SyncState,
    registry::TypeStatus,
    type_url::{CLUSTER, ENDPOINT, ROUTE},
};

const SERVICES: usize = 50;
const STEP: Duration = Duration::from_secs(10);

/// A STATIC ServiceEntry `name.NS.svc.cluster.local:port` with one endpoint at `upstream`.
fn service(name: &str, port: u16, upstream: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {NS}}}\n\
         spec:\n  hosts: [{name}.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  \
         endpoints: [{{address: 127.0.0.1, ports: {{http: {upstream}}}}}]\n"
    )
}

fn echo_vs(timeout: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  hosts: [echo.{NS}.svc.cluster.local]\n  http: [{{timeout: {timeout}, route: [{{destination: {{host: echo.{NS}.svc.cluster.local}}}}]}}]\n"
    )
}

fn cluster_name(name: &str, port: u16) -> String {
    format!("outbound|{port}||{name}.{NS}.svc.cluster.local")
}

/// The sidecar's per-type status, once every response of every type is ACKed.
fn settled(plane: &Plane) -> Option<std::collections::BTreeMap<String, TypeStatus>> {
    let conn = plane.server.connections().snapshot().into_iter().next()?;
    conn.types
        .values()
        .all(|t| t.state == SyncState::Acked && t.nonce_sent == t.nonce_acked)
        .then_some(conn.types)
}

/// The 50 services plus `echo` (with its VirtualService) on one port, a plane and a sidecar over `api`,
/// settled with working traffic to `echo`.
struct Mesh {
    dir: tempfile::TempDir,
    _echo: EchoServer,
    plane: Plane,
    envoy: Envoy,
    port: u16,
    upstream: u16,
    routes: u32,
}

impl Mesh {
    async fn start(api: AdsApi) -> Mesh {
        let dir = tempfile::tempdir().unwrap();
        let echo = EchoServer::start("echo").await.unwrap();
        let (port, upstream) = (free_port(), echo.addr.port());
        let mut registry = service("echo", port, upstream);
        for i in 0..SERVICES {
            registry.push_str("---\n");
            registry.push_str(&service(&format!("svc-{i}"), port, upstream));
        }
        write_atomic(dir.path(), "registry.yaml", &registry);
        write_atomic(dir.path(), "echo-vs.yaml", &echo_vs("5s"));
        let plane = Plane::start(dir.path()).await;
        let envoy = Envoy::start(&plane.sidecar("client", NS, api)).await.unwrap();
        let mesh = Mesh { dir, _echo: echo, plane, envoy, port, upstream, routes: 5 };
        mesh.wait_traffic().await;
        wait_for("the sidecar watches every assignment, all ACKed", STEP, async || {
            let types = settled(&mesh.plane)?;
            (types.get(ENDPOINT)?.watch.names.len() > SERVICES).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", mesh.envoy.log_tail(40)));
        mesh
    }

    async fn wait_traffic(&self) {
        let addr: SocketAddr = ([127, 0, 0, 1], self.port).into();
        let host = format!("echo.{NS}.svc.cluster.local:{}", self.port);
        wait_for("traffic to echo through Envoy", STEP, async || match get(addr, &host, "/", &[]).await {
            Ok((200, body)) if body.starts_with("echo") => Some(()),
            _ => None,
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.envoy.log_tail(40)));
    }

    /// Changes the echo VirtualService (an RDS-only push) and returns the status once its routes
    /// are ACKed and everything is settled.
    async fn marker(&mut self) -> std::collections::BTreeMap<String, TypeStatus> {
        let before = settled(&self.plane).and_then(|t| t.get(ROUTE).map(|r| r.version_acked.clone()));
        self.routes += 1;
        write_atomic(self.dir.path(), "echo-vs.yaml", &echo_vs(&format!("{}s", self.routes)));
        wait_for("the marker's routes ACKed", STEP, async || {
            let types = settled(&self.plane)?;
            (Some(&types.get(ROUTE)?.version_acked) != before.as_ref()).then_some(types)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.envoy.log_tail(40)))
    }
}

/// (responses, resources, bytes) of `type_url` sent between two statuses.
fn sent(
    before: &std::collections::BTreeMap<String, TypeStatus>,
    after: &std::collections::BTreeMap<String, TypeStatus>,
    type_url: &str,
) -> (u64, u64, u64) {
    let (b, a) = (&before[type_url], &after[type_url]);
    (a.responses - b.responses, a.resources_sent - b.resources_sent, a.bytes_sent - b.bytes_sent)
}

/// (CDS, EDS) sent for one new ServiceEntry, and how many assignments the sidecar then watches.
async fn one_new_service(api: AdsApi) -> ((u64, u64, u64), (u64, u64, u64), usize) {
    let mut mesh = Mesh::start(api).await;
    let before = mesh.marker().await;
    write_atomic(mesh.dir.path(), "new.yaml", &service("new", mesh.port, mesh.upstream));
    let new_cluster = cluster_name("new", mesh.port);
    wait_for("the new cluster's endpoints watched and everything ACKed", STEP, async || {
        let types = settled(&mesh.plane)?;
        types.get(ENDPOINT)?.watch.names.contains(&new_cluster).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mesh.envoy.log_tail(40)));
    let after = mesh.marker().await;
    let host = format!("new.{NS}.svc.cluster.local:{}", mesh.port);
    let addr: SocketAddr = ([127, 0, 0, 1], mesh.port).into();
    wait_for("traffic to the new service", STEP, async || match get(addr, &host, "/", &[]).await {
        Ok((200, _)) => Some(()),
        _ => None,
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mesh.envoy.log_tail(40)));
    let eds = sent(&before, &after, ENDPOINT);
    let cds = sent(&before, &after, CLUSTER);
    eprintln!(
        "{api:?}: one new ServiceEntry among {SERVICES}: CDS {cds:?}, EDS {eds:?} (responses, resources, bytes)"
    );
    (cds, eds, after[ENDPOINT].watch.names.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sotw_one_new_service_one_eds_response() {
    let (cds, eds, watched) = one_new_service(AdsApi::Sotw).await;
    assert_eq!(cds.0, 1, "one CDS response");
    // The watched assignments and the new one, in one response (SotW EDS carries the watch).
    assert_eq!((eds.0, eds.1), (1, watched as u64), "one EDS response covering the new cluster");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delta_one_new_service_sends_only_its_assignment() {
    let (cds, eds, _) = one_new_service(AdsApi::Delta).await;
    assert_eq!((cds.0, cds.1), (1, 1), "one CDS response with the new cluster");
    assert_eq!((eds.0, eds.1), (1, 1), "one EDS response with the new cluster's assignment only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delta_changed_cluster_gets_its_endpoints_again_and_leaves_warming() {
    let mut mesh = Mesh::start(AdsApi::Delta).await;
    let before = mesh.marker().await;
    let cds_version = before[CLUSTER].version_acked.clone();
    // A DestinationRule changes the echo cluster, not its endpoints.
    write_atomic(
        mesh.dir.path(),
        "echo-dr.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: echo, namespace: {NS}}}\n\
             spec:\n  host: echo.{NS}.svc.cluster.local\n  trafficPolicy: {{connectionPool: {{tcp: {{maxConnections: 77}}}}}}\n"
        ),
    );
    wait_for("the changed cluster ACKed", STEP, async || {
        let types = settled(&mesh.plane)?;
        (types.get(CLUSTER)?.version_acked != cds_version).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mesh.envoy.log_tail(40)));
    // Envoy's EDS initial fetch timeout (15 s) would also end warming: wait for less.
    wait_for("no cluster warming", Duration::from_secs(5), async || {
        (mesh.envoy.stat("cluster_manager.warming_clusters").await.ok()?? == 0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mesh.envoy.log_tail(40)));
    let after = mesh.marker().await;
    let cds = sent(&before, &after, CLUSTER);
    let eds = sent(&before, &after, ENDPOINT);
    eprintln!("Delta: one changed cluster among {}: CDS {cds:?}, EDS {eds:?}", SERVICES + 1);
    assert_eq!((cds.0, cds.1), (1, 1), "one CDS response with the changed cluster");
    assert_eq!((eds.0, eds.1), (1, 1), "the changed cluster's assignment, unchanged, re-sent alone");
    let dump = mesh.envoy.config_dump(false).await.unwrap().to_string();
    assert!(dump.contains("\"max_connections\":77"), "the changed cluster is active");
    assert_eq!(mesh.envoy.stat("cluster_manager.warming_clusters").await.unwrap(), Some(0));
    mesh.wait_traffic().await;
}
