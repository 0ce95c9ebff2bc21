//! DestinationRule consistent-hash load balancing through a real Envoy sidecar (INTERCEPTION_MODE
//! NONE, loopback): ServiceEntry `echo` with four loopback echo upstreams (WorkloadEntries, each answering
//! with its name), no VirtualService (the default route carries the hash policy), one DestinationRule
//! per test. Needs Envoy (scripts/install-envoy.sh).

use crate::support::NS;

use std::{collections::BTreeSet, net::SocketAddr, time::Duration};

use meshpilot_testing::{AdsApi, EchoServer, Envoy, Plane, Response, free_port, request, wait_for};

const UPSTREAMS: [&str; 4] = ["e1", "e2", "e3", "e4"];

/// Starts the upstreams, a plane with `dr_spec` (YAML under `spec:`, indented two spaces) for host
/// `echo`, and a client sidecar; returns the listener address once the cluster is RING_HASH or
/// MAGLEV in Envoy and a request gets through.
async fn setup(dr_spec: &str) -> (Vec<EchoServer>, tempfile::TempDir, Plane, Envoy, SocketAddr) {
    let mut servers = Vec::new();
    for name in UPSTREAMS {
        servers.push(EchoServer::start(name).await.unwrap());
    }
    let port = free_port();
    let mut registry = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  hosts: [echo.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: echo}}\n"
    );
    for (name, server) in UPSTREAMS.iter().zip(&servers) {
        registry.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: {name}, namespace: {NS}}}\n\
             spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  labels: {{app: echo}}\n",
            server.addr.port()
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("echo-registry.yaml"), registry).unwrap();
    let dr = format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  host: echo\n{dr_spec}"
    );
    std::fs::write(dir.path().join("echo-dr.yaml"), dr).unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&plane.sidecar("client", NS, AdsApi::Sotw)).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_for("all four upstreams in the hashed cluster", Duration::from_secs(20), async || {
        let dump = envoy.config_dump(false).await.ok()?.to_string();
        let hashed = dump.contains("RING_HASH") || dump.contains("MAGLEV");
        let (_, clusters) = envoy.admin_get("/clusters").await.ok()?;
        let known = servers
            .iter()
            .all(|s| clusters.contains(&format!("||echo.{NS}.svc.cluster.local::{}::health_flags", s.addr)));
        if !(hashed && known) {
            return None;
        }
        // The listener may still be warming: a refused connection is "not yet", not a failure.
        let r = request(addr, &format!("echo:{}", addr.port()), "/", &[]).await.ok()?;
        (r.status == 200).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    (servers, dir, plane, envoy, addr)
}

async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    request(addr, &format!("echo:{}", addr.port()), path, headers).await.unwrap()
}

/// The upstreams answering `n` requests made by `req`.
async fn answered_by<F: AsyncFn(usize) -> Response>(n: usize, req: F) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for i in 0..n {
        let r = req(i).await;
        assert_eq!(r.status, 200, "request {i}: {r:?}");
        out.insert(r.body.clone());
    }
    out
}

async fn no_nacks(envoy: &Envoy) {
    envoy.assert_no_rejected_updates().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn header_hash_sticks_per_value_and_spreads_over_values() {
    let dr = "  trafficPolicy:\n    loadBalancer: {consistentHash: {httpHeaderName: x-user}}\n";
    let (_servers, _dir, _plane, envoy, addr) = setup(dr).await;
    for user in ["alice", "bob"] {
        let one = answered_by(100, async |_| get(addr, "/", &[("x-user", user)]).await).await;
        assert_eq!(one.len(), 1, "{user} moved between upstreams: {one:?}");
    }
    let users: Vec<String> = (0..100).map(|i| format!("user-{i}")).collect();
    let many = answered_by(100, async |i| get(addr, "/", &[("x-user", &users[i])]).await).await;
    assert!(many.len() > 1, "100 different users all went to {many:?}");
    no_nacks(&envoy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn generated_cookie_is_set_and_replaying_it_sticks() {
    let dr = "  trafficPolicy:\n    loadBalancer: {consistentHash: {httpCookie: {name: sticky, ttl: 60s, path: /}}}\n";
    let (_servers, _dir, _plane, envoy, addr) = setup(dr).await;
    let mut cookies = BTreeSet::new();
    let mut firsts = BTreeSet::new();
    for _ in 0..20 {
        let r = get(addr, "/", &[]).await;
        let set = r.header("set-cookie").unwrap_or_else(|| panic!("no Set-Cookie: {r:?}"));
        assert!(set.starts_with("sticky=") && set.contains("max-age=60"), "{set}");
        let cookie = set.split(';').next().unwrap().to_string();
        let stuck = answered_by(100, async |_| get(addr, "/", &[("cookie", &cookie)]).await).await;
        assert_eq!(stuck.len(), 1, "cookie {cookie} moved between upstreams: {stuck:?}");
        firsts.extend(stuck);
        cookies.insert(cookie);
    }
    assert!(cookies.len() > 1 && firsts.len() > 1, "20 fresh cookies all went to {firsts:?}");
    no_nacks(&envoy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn query_parameter_hash_sticks_per_value_and_spreads_over_values() {
    let dr = "  trafficPolicy:\n    loadBalancer: {consistentHash: {httpQueryParameterName: u}}\n";
    let (_servers, _dir, _plane, envoy, addr) = setup(dr).await;
    let one = answered_by(100, async |_| get(addr, "/?u=carol", &[]).await).await;
    assert_eq!(one.len(), 1, "u=carol moved between upstreams: {one:?}");
    let paths: Vec<String> = (0..100).map(|i| format!("/?u=user-{i}")).collect();
    let many = answered_by(100, async |i| get(addr, &paths[i], &[]).await).await;
    assert!(many.len() > 1, "100 different values all went to {many:?}");
    no_nacks(&envoy).await;
}
