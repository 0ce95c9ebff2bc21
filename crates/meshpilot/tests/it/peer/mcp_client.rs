//! `meshpilot discovery` with mesh config `configSources: [{address: xds://…}]` consuming another
//! meshpilot (the in-process plane, serving MCP-over-xDS with generator auth off), and a real Envoy
//! routed by the config that came over MCP: a VirtualService arrives, an edit and a delete at the
//! origin propagate; `/debug/configz` names the source; a consumer whose source never answered is
//! not ready and says why. Needs Envoy (scripts/install-envoy.sh).

use std::{
    net::SocketAddr,
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use meshpilot_testing::{
    AdsApi, Bootstrap, EchoServer, Envoy, Plane, PlaneOptions, free_port, get, wait_for, write_atomic,
};

const NS: &str = "shop";
const WAIT: Duration = Duration::from_secs(60);

/// A STATIC ServiceEntry `name.NS.svc.cluster.local:port` with one endpoint on `upstream`.
fn service(name: &str, port: u16, upstream: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {NS}}}\n\
         spec:\n  hosts: [{name}.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  \
         endpoints: [{{address: 127.0.0.1, ports: {{http: {upstream}}}}}]\n"
    )
}

/// A VirtualService sending traffic for `alpha` to `dest`.
fn vs(dest: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: alpha, namespace: {NS}}}\n\
         spec:\n  hosts: [alpha.{NS}.svc.cluster.local]\n  http: [{{route: [{{destination: {{host: {dest}.{NS}.svc.cluster.local}}}}]}}]\n"
    )
}

/// A `meshpilot discovery` process reading only `mesh` (its configSources); killed on drop.
struct Consumer {
    child: Child,
    grpc: SocketAddr,
    http: SocketAddr,
    log: std::path::PathBuf,
}

impl Consumer {
    fn start(work: &Path, name: &str, mesh: &str) -> Consumer {
        let addr = |p: u16| -> SocketAddr { ([127, 0, 0, 1], p).into() };
        let (grpc, http, mon) = (addr(free_port()), addr(free_port()), addr(free_port()));
        let mesh_file = work.join(format!("{name}-mesh.yaml"));
        std::fs::write(&mesh_file, mesh).unwrap();
        let log = work.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
            .arg("discovery")
            .arg("--mesh-config")
            .arg(&mesh_file)
            .args(["--grpc-addr", &grpc.to_string(), "--http-addr", &http.to_string()])
            .args(["--monitoring-addr", &mon.to_string()])
            .args(["--secureGRPCAddr=", "--httpsAddr="])
            .env("POD_NAME", name)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Consumer { child, grpc, http, log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn meshpilot_consumes_meshpilot_over_mcp_and_routes_envoy() {
    let work = tempfile::tempdir().unwrap();
    let origin = work.path().join("origin");
    std::fs::create_dir(&origin).unwrap();
    let alpha = EchoServer::start("alpha").await.unwrap();
    let beta = EchoServer::start("beta").await.unwrap();
    let port = free_port();
    write_atomic(
        &origin,
        "services.yaml",
        &format!(
            "{}---\n{}",
            service("alpha", port, alpha.addr.port()),
            service("beta", port, beta.addr.port())
        ),
    );
    write_atomic(&origin, "vs.yaml", &vs("beta"));
    let plane =
        Plane::start_with(PlaneOptions { api_generator_auth: false, ..PlaneOptions::config_dir(&origin) })
            .await
            .unwrap();

    // A consumer whose source is not there: not ready, and /ready says why.
    let dead = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let lonely =
        Consumer::start(work.path(), "lonely", &format!("configSources:\n- address: xds://{dead}\n"));
    let body = wait_for("/ready names the silent source", WAIT, async || {
        match get(lonely.http, "localhost", "/ready", &[]).await {
            Ok((503, body)) if body.contains("has not answered: ") => Some(body),
            _ => None,
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", lonely.log_text()));
    assert!(body.starts_with(&format!("not ready: config source xds://{dead} has not answered: ")), "{body}");
    drop(lonely);

    // The consumer of the plane, and an Envoy of the consumer.
    let consumer = Consumer::start(
        work.path(),
        "consumer",
        &format!("configSources:\n- address: xds://{}\n", plane.ads.addr),
    );
    wait_for("consumer ready", WAIT, async || {
        matches!(get(consumer.http, "localhost", "/ready", &[]).await, Ok((200, _))).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", consumer.log_text()));
    let envoy =
        Envoy::start(&Bootstrap::sidecar_in("client", NS, consumer.grpc, AdsApi::Sotw)).await.unwrap();
    let target: SocketAddr = ([127, 0, 0, 1], port).into();
    let host = format!("alpha.{NS}.svc.cluster.local:{port}");
    let reaches = async |name: &'static str| {
        wait_for(&format!("alpha traffic answered by {name}"), WAIT, async || {
            match get(target, &host, "/", &[]).await {
                Ok((200, body)) if body.starts_with(name) => Some(()),
                _ => None,
            }
        })
        .await
    };
    reaches("beta").await.unwrap_or_else(|e| panic!("{e}\n{}\n{}", envoy.log_tail(30), consumer.log_text()));

    // configz names where each object came from.
    let (status, configz) = get(consumer.http, "localhost", "/debug/configz", &[]).await.unwrap();
    assert_eq!(status, 200);
    let objects: serde_json::Value = serde_json::from_str(&configz).unwrap();
    let vs_obj = objects.as_array().unwrap().iter().find(|o| o["kind"] == "VirtualService").unwrap();
    assert_eq!(vs_obj["source"], format!("xds://{}", plane.ads.addr));
    let (status, objectz) = get(
        consumer.http,
        "localhost",
        &format!("/debug/objectz?kind=VirtualService&namespace={NS}&name=alpha"),
        &[],
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{objectz}");
    let objectz: serde_json::Value = serde_json::from_str(&objectz).unwrap();
    assert_eq!(objectz["source"]["kind"], "xds", "{objectz}");
    assert!(
        objectz["source"]["location"]
            .as_str()
            .unwrap()
            .starts_with(&format!("xds://{}, version ", plane.ads.addr)),
        "{objectz}"
    );

    // An edit at the origin reaches the consumer's Envoy; then a delete.
    write_atomic(&origin, "vs.yaml", &vs("alpha"));
    reaches("alpha").await.unwrap_or_else(|e| panic!("{e}\n{}", consumer.log_text()));
    write_atomic(&origin, "vs.yaml", &vs("beta"));
    reaches("beta").await.unwrap();
    std::fs::remove_file(origin.join("vs.yaml")).unwrap();
    reaches("alpha").await.unwrap_or_else(|e| panic!("{e}\n{}", consumer.log_text()));
    let (_, configz) = get(consumer.http, "localhost", "/debug/configz", &[]).await.unwrap();
    assert!(!configz.contains("\"VirtualService\""), "the deleted VirtualService is gone: {configz}");
}
