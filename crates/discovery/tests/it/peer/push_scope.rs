//! Pushes reach only the proxies a change can matter to (Istio's `SidecarScope.DependsOnConfig`):
//! two real Envoy sidecars in different namespaces, one limited by a Sidecar to its own namespace.
//! Needs Envoy (scripts/install-envoy.sh).

use std::time::Duration;

use meshpilot_testing::{AdsApi, Bootstrap, Envoy, Plane, free_port, wait_for, write_atomic};
use xds::{SyncState, type_url::ROUTE};

fn service(name: &str, ns: &str, port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: {name}, namespace: {ns}}}
spec:
  hosts: [{name}.{ns}.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{{number: {port}, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: 127.0.0.1}}]
"
    )
}

fn virtual_service(name: &str, ns: &str, timeout: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {name}-vs, namespace: {ns}}}
spec:
  hosts: [{name}.{ns}.svc.cluster.local]
  http: [{{timeout: {timeout}, route: [{{destination: {{host: {name}.{ns}.svc.cluster.local}}}}]}}]
"
    )
}

fn sidecar_in(ns: &str, plane: &Plane) -> Bootstrap {
    let mut b = Bootstrap::sidecar(&format!("app-{ns}"), plane.ads.addr, AdsApi::Sotw);
    b.node_id = format!("sidecar~127.0.0.1~app-1.{ns}~{ns}.svc.cluster.local");
    b.metadata["NAMESPACE"] = ns.into();
    b
}

/// (responses sent over all types, ROUTE version ACKed) of the connection of the proxy in `ns`,
/// once its latest routes are ACKed.
fn status(plane: &Plane, ns: &str) -> Option<(u64, String)> {
    let conns = plane.server.connections().snapshot();
    let c = conns.into_iter().find(|c| c.proxy.config_namespace == ns)?;
    let route = c.types.get(ROUTE)?;
    (route.state == SyncState::Acked && route.nonce_sent == route.nonce_acked)
        .then(|| (c.types.values().map(|t| t.responses).sum(), route.version_acked.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changes_outside_a_sidecar_scope_do_not_push_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let (pa, pb) = (free_port(), free_port());
    write_atomic(
        dir.path(),
        "a.yaml",
        &(service("a", "ns1", pa) + "---\n" + &virtual_service("a", "ns1", "5s")),
    );
    write_atomic(
        dir.path(),
        "b.yaml",
        &(service("b", "ns2", pb) + "---\n" + &virtual_service("b", "ns2", "5s")),
    );
    write_atomic(
        dir.path(),
        "sidecar.yaml",
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: ns1}\n\
         spec:\n  egress: [{hosts: [\"./*\"]}]\n",
    );
    let plane = Plane::start(dir.path()).await;
    let ns1 = Envoy::start(&sidecar_in("ns1", &plane)).await.unwrap();
    let ns2 = Envoy::start(&sidecar_in("ns2", &plane)).await.unwrap();
    let step = Duration::from_secs(10);
    let both = wait_for("both sidecars ACK their routes", step, async || {
        Some((status(&plane, "ns1")?, status(&plane, "ns2")?))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}\n{}", ns1.log_tail(20), ns2.log_tail(20)));
    let ((ns1_sent, ns1_version), (_, ns2_version)) = both;

    // ns2's VirtualService is outside ns1's scope: ns2 gets the new routes, ns1 nothing.
    let pushes = plane.server.push_count();
    write_atomic(
        dir.path(),
        "b.yaml",
        &(service("b", "ns2", pb) + "---\n" + &virtual_service("b", "ns2", "7s")),
    );
    wait_for("ns2 ACKs the new routes", step, async || {
        status(&plane, "ns2").filter(|(_, v)| *v != ns2_version).map(|_| ())
    })
    .await
    .unwrap();
    assert!(plane.server.push_count() > pushes);

    // The marker: a change inside ns1's scope, pushed after ns2's (one push at a time), reaches it.
    // Pushes reach a connection in order, so anything ns2's change had sent ns1 would have arrived
    // before the marker's routes: the marker's RDS response is the only one since.
    write_atomic(
        dir.path(),
        "a.yaml",
        &(service("a", "ns1", pa) + "---\n" + &virtual_service("a", "ns1", "7s")),
    );
    let (after, _) = wait_for("ns1 ACKs the routes of its own VirtualService change", step, async || {
        status(&plane, "ns1").filter(|(_, v)| *v != ns1_version)
    })
    .await
    .unwrap();
    assert_eq!(after, ns1_sent + 1, "ns1 was sent more than its own change (ns2's is outside its scope)");
}
