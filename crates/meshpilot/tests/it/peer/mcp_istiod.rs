//! MCP-over-xDS against real istiod (docs/MCP.md, "Interoperating with istiod"), both ways:
//!
//! - istiod consuming meshpilot: istiod's mesh config has `configSources: [{address: xds://<meshpilot>}]`;
//!   meshpilot serves its `--config-dir` over the `api` generator (plaintext, `ENABLE_XDS_API_GENERATOR_AUTH=false`).
//! - meshpilot consuming istiod: istiod serves its own `--configDir` over the `api` generator on its plaintext
//!   xDS port; meshpilot's `--mesh-config` has `configSources: [{address: xds://<istiod>}]`.
//!
//! In both, a real upstream Envoy on the consuming side is routed by the config that crossed over MCP
//! (a ServiceEntry with a static endpoint at an echo server and a VirtualService whose header match sets a
//! request header only that config explains), edits and deletes reach it, and a restart of the serving side
//! re-syncs without the Envoy ever losing the cluster. Two more use the secure ports: istiod reading meshpilot's
//! over `tlsSettings.mode: SIMPLE` (its client's only TLS mode), and meshpilot reading istiod's with the api
//! generator's auth on, with a client certificate from istiod's CA (root namespace served, `default` refused).
//!
//! istiod is the cached build of `scripts/istio-peer.sh build`, run by `scripts/peer/run-istiod.sh` against the
//! shared kube-apiserver test environment; a missing build fails the test (naming the script), never skips it.

use crate::istio_peer;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use kube_source::testenv::TestEnv;
use meshpilot_testing::{
    AdsApi, Bootstrap, EchoOptions, EchoServer, Envoy, free_port, free_port_block, http, repo_root, wait_for,
};
use rustls_pki_types::{CertificateDer, pem::PemObject};
use security::{
    client::{SecureTarget, channel},
    service::{IstioCertificateRequest, request_certificate},
};
use serde_json::Value;

/// How long a change may take to cross istiod/meshpilot and reach an Envoy (pushes are debounced).
const PROPAGATION: Duration = Duration::from_secs(30);

/// The service host of the test's ServiceEntry.
const HOST: &str = "echo.mesh.local";

// ------------------------------------------------------------------------------------------ peers

/// A `meshpilot discovery` process; killed on drop.
struct Meshpilot {
    child: Child,
    grpc: SocketAddr,
    http: SocketAddr,
    log: PathBuf,
    command: Command,
}

impl Meshpilot {
    /// Starts `meshpilot discovery` with `args` (config flags) on free loopback ports with the api generator's
    /// auth off, and waits for `/ready`.
    async fn start(work: &Path, args: &[&str]) -> Meshpilot {
        Meshpilot::start_with_env(work, args, &[]).await
    }

    /// [`Meshpilot::start`] with `env` added to the environment.
    async fn start_with_env(work: &Path, args: &[&str], env: &[(&str, &str)]) -> Meshpilot {
        let mp = Meshpilot::spawn(work, args, env);
        mp.wait_ready().await;
        mp
    }

    /// Starts the process without waiting for `/ready`.
    fn spawn(work: &Path, args: &[&str], env: &[(&str, &str)]) -> Meshpilot {
        let addr = |p: u16| -> SocketAddr { format!("127.0.0.1:{p}").parse().unwrap() };
        let (grpc, http, mon) = (addr(free_port()), addr(free_port()), addr(free_port()));
        let log = work.join("meshpilot.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_meshpilot"));
        command
            .arg("discovery")
            .args(args)
            .args(crate::process::secure_ports_off_unless_given(args))
            .args(["--grpc-addr", &grpc.to_string(), "--http-addr", &http.to_string()])
            .args(["--monitoring-addr", &mon.to_string()])
            .env("ENABLE_XDS_API_GENERATOR_AUTH", "false")
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null());
        let child = command.stderr(log_file(&log)).spawn().unwrap();
        Meshpilot { child, grpc, http, log, command }
    }

    async fn wait_ready(&self) {
        wait_for("meshpilot /ready", Duration::from_secs(60), async || {
            matches!(http::get(self.http, "meshpilot", "/ready", &[]).await, Ok((200, _))).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- meshpilot log ---\n{}", self.log_text()));
    }

    /// Kills the process and starts it again with the same flags and ports.
    async fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = self.command.stderr(log_file(&self.log)).spawn().unwrap();
        self.wait_ready().await;
    }

    async fn configz(&self) -> Vec<Value> {
        configz(self.http, "meshpilot").await
    }

    fn log_text(&self) -> String {
        tail(&self.log)
    }
}

/// The last 60 lines of the log file at `path`.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

impl Drop for Meshpilot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The log file a (re)started process appends to.
fn log_file(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap()
}

/// Real istiod (`scripts/peer/run-istiod.sh`); stopped on drop.
struct Istiod {
    dir: PathBuf,
    base: u16,
    env: Vec<(String, String)>,
    xds: SocketAddr,
    http: SocketAddr,
}

impl Istiod {
    /// Starts istiod in `dir` with `mesh` as its mesh config, `env` added to its environment and `args` as
    /// extra flags, and waits until it is ready (the script waits for `/ready`).
    fn start(dir: &Path, mesh: &str, env: &[(&str, &str)], args: &str) -> Istiod {
        let istiod = Istiod::prepare(dir, mesh, env, args);
        istiod.run_start();
        istiod
    }

    /// An istiod set up in `dir` (mesh config written, ports chosen), not started yet.
    fn prepare(dir: &Path, mesh: &str, env: &[(&str, &str)], args: &str) -> Istiod {
        istio_peer::pilot_discovery();
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("mesh.yaml"), mesh).unwrap();
        // run-istiod.sh takes BASE+10 (xDS), +12, +14, +76 and +80 (HTTP).
        let base = free_port_block(81);
        let mut env: Vec<(String, String)> =
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        env.push(("ISTIOD_ARGS".into(), args.into()));
        let addr = |p: u16| -> SocketAddr { format!("127.0.0.1:{p}").parse().unwrap() };
        Istiod { dir: dir.to_path_buf(), base, env, xds: addr(base + 10), http: addr(base + 80) }
    }

    fn run_start(&self) {
        if let Err(e) = self.try_run_start() {
            panic!("{e}");
        }
    }

    /// Runs `run-istiod.sh start`: the script's error and istiod's log tail if istiod exits or never becomes
    /// ready.
    fn try_run_start(&self) -> Result<(), String> {
        let kubeconfig = TestEnv::shared_by(file!()).kubeconfig();
        let out = Command::new(run_istiod())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .arg("start")
            .arg(&self.dir)
            .arg(&kubeconfig)
            .arg(self.base.to_string())
            .output()
            .unwrap();
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "istiod did not start: {}\n--- istiod log ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.join("istiod.log")).unwrap_or_default()
        ))
    }

    /// Stops istiod and starts it again on the same ports with the same config.
    fn restart(&self) {
        self.stop();
        self.run_start();
    }

    fn stop(&self) {
        let _ = Command::new(run_istiod()).arg("stop").arg(&self.dir).output();
    }

    async fn configz(&self) -> Vec<Value> {
        configz(self.http, "istiod").await
    }

    /// The secure xDS + CA port (Istio's 15012).
    fn secure(&self) -> SocketAddr {
        format!("127.0.0.1:{}", self.base + 12).parse().unwrap()
    }

    fn log_tail(&self) -> String {
        tail(&self.dir.join("istiod.log"))
    }
}

impl Drop for Istiod {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run_istiod() -> PathBuf {
    repo_root().join("scripts/peer/run-istiod.sh")
}

/// `/debug/configz` of the server at `http` (an empty list while it does not answer).
async fn configz(http: SocketAddr, host: &str) -> Vec<Value> {
    match http::get(http, host, "/debug/configz", &[]).await {
        Ok((200, body)) => serde_json::from_str(&body).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The object `kind` `namespace/name` of a configz dump.
fn find<'a>(dump: &'a [Value], kind: &str, namespace: &str, name: &str) -> Option<&'a Value> {
    dump.iter().find(|o| {
        o["kind"] == kind && o["metadata"]["namespace"] == namespace && o["metadata"]["name"] == name
    })
}

/// The `x-route` value the VirtualService `default/echo` of `dump` sets on its header-matched route.
fn x_route(dump: &[Value]) -> Option<String> {
    let vs = find(dump, "VirtualService", "default", "echo")?;
    vs["spec"]["http"][0]["route"][0]["headers"]["request"]["set"]["x-route"].as_str().map(str::to_owned)
}

// ------------------------------------------------------------------------------------------ config

/// A ServiceEntry `default/echo` for [`HOST`]:`port` (HTTP, STATIC) whose one endpoint is `echo`.
fn service_entry(port: u16, echo: SocketAddr) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: default, \
         labels: {{app: echo}}}}\nspec:\n  hosts: [{HOST}]\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  \
         location: MESH_EXTERNAL\n  resolution: STATIC\n  endpoints: [{{address: {ip}, ports: {{http: {echo_port}}}}}]\n",
        ip = echo.ip(),
        echo_port = echo.port()
    )
}

/// A VirtualService `default/echo`: requests with `x-pick: b` get `x-route: <mark>` set; the others go
/// to the same host unchanged.
fn virtual_service(mark: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: echo, namespace: default}}\n\
         spec:\n  hosts: [{HOST}]\n  http:\n  - match: [{{headers: {{x-pick: {{exact: b}}}}}}]\n    \
         route: [{{destination: {{host: {HOST}}}, headers: {{request: {{set: {{x-route: {mark}}}}}}}}}]\n  \
         - route: [{{destination: {{host: {HOST}}}}}]\n"
    )
}

/// A DestinationRule `default/echo` for [`HOST`].
fn destination_rule() -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: echo, namespace: default}}\n\
         spec:\n  host: {HOST}\n  trafficPolicy: {{connectionPool: {{http: {{maxRequestsPerConnection: 3}}}}}}\n"
    )
}

/// Writes `text` to `dir/name` atomically (a rename), so a watcher never sees half a file.
fn write_config(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

// ------------------------------------------------------------------------------------------ traffic

/// A sidecar Envoy (namespace `default`, no interception) on the plaintext xDS server `ads`.
async fn sidecar(ads: SocketAddr) -> Envoy {
    let envoy = Envoy::start(&Bootstrap::sidecar_in("client", "default", ads, AdsApi::Sotw)).await.unwrap();
    envoy.wait_live(Duration::from_secs(20)).await.unwrap();
    envoy
}

/// What the echo answered through the Envoy's outbound listener 127.0.0.1:`port` for `Host: HOST:port`
/// with `x-pick: b`: `Some(x-route value or "")` when the echo answered, `None` otherwise.
async fn routed_mark(port: u16) -> Option<String> {
    let listener: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let host = format!("{HOST}:{port}");
    let (status, body) = http::get(listener, &host, "/", &[("x-pick", "b")]).await.ok()?;
    if status != 200 || !body.starts_with("echo") {
        return None;
    }
    let mark = body.lines().find_map(|l| l.strip_prefix("x-route: ")).unwrap_or("");
    Some(mark.to_owned())
}

/// Waits until a request through the Envoy reaches the echo with `x-route: mark` (`""`: no such header).
async fn wait_mark(envoy: &Envoy, port: u16, mark: &str, context: impl Fn() -> String) {
    wait_for(&format!("x-route {mark:?} through Envoy"), PROPAGATION, async || {
        (routed_mark(port).await.as_deref() == Some(mark)).then_some(())
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}\nlast answer: {:?}\n{}\n--- envoy ---\n{}",
            routed_mark_blocking(port),
            context(),
            envoy.log_tail(40)
        )
    });
}

fn routed_mark_blocking(port: u16) -> Option<String> {
    let listener: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    http::request_blocking(listener, &format!("{HOST}:{port}"), "/", &[("x-pick", "b")])
        .ok()
        .map(|r| format!("{} {}", r.status, r.body))
}

/// Envoy's `cluster_manager.cluster_removed` counter.
async fn clusters_removed(envoy: &Envoy) -> u64 {
    envoy.stat("cluster_manager.cluster_removed").await.unwrap().unwrap_or(0)
}

/// Whether the Envoy has the cluster `outbound|port||HOST`.
async fn has_cluster(envoy: &Envoy, port: u16) -> bool {
    let name = format!("outbound|{port}||{HOST}");
    envoy.config_dump(false).await.map(|d| d.to_string().contains(&name)).unwrap_or(false)
}

fn echo_options() -> EchoOptions {
    EchoOptions { echo_head: true, ..EchoOptions::default() }
}

/// The istiod environment for upstream Envoy sidecars (no istio-proxy-only filters) and a plaintext
/// api generator.
const ISTIOD_ENV: &[(&str, &str)] = &[
    ("PILOT_ENABLE_METADATA_EXCHANGE", "false"),
    ("PILOT_ENABLE_ALPN_FILTER", "false"),
    ("ENABLE_XDS_API_GENERATOR_AUTH", "false"),
];

// ------------------------------------------------------------------------------------------ tests

/// One test at a time: each runs istiod, meshpilot and Envoy, which on a 2-core machine already compete
/// for the CPU; in parallel, istiod's startup deadlines are what fails.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn istiod_consumes_meshpilot_config_over_mcp() {
    let _serial = SERIAL.lock().await;
    let _ = TestEnv::shared_by(file!());
    let work = tempfile::tempdir().unwrap();
    let echo = EchoServer::start_with("echo", echo_options()).await.unwrap();
    let port = free_port();
    let config = work.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    write_config(&config, "se.yaml", &service_entry(port, echo.addr));
    write_config(&config, "vs.yaml", &virtual_service("meshpilot-v1"));
    write_config(&config, "dr.yaml", &destination_rule());

    let mut mp = Meshpilot::start(work.path(), &["--config-dir", config.to_str().unwrap()]).await;
    let mesh = format!(
        "trustDomain: cluster.local\nenableAutoMtls: false\nconfigSources:\n- address: xds://{}\n",
        mp.grpc
    );
    let istiod = Istiod::start(&work.path().join("istiod"), &mesh, ISTIOD_ENV, "");
    let mp_log = mp.log.clone();
    let context = || format!("--- istiod ---\n{}\n--- meshpilot ---\n{}", istiod.log_tail(), tail(&mp_log));

    // istiod's configz shows our three objects, with their specs and labels.
    let dump = wait_for("meshpilot's objects in istiod's configz", PROPAGATION, async || {
        let dump = istiod.configz().await;
        ["ServiceEntry", "VirtualService", "DestinationRule"]
            .iter()
            .all(|k| find(&dump, k, "default", "echo").is_some())
            .then_some(dump)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", context()));
    let se = find(&dump, "ServiceEntry", "default", "echo").unwrap();
    assert_eq!(se["spec"]["hosts"][0], HOST, "{se}");
    assert_eq!(se["metadata"]["labels"]["app"], "echo", "{se}");
    assert_eq!(se["spec"]["endpoints"][0]["ports"]["http"], echo.addr.port(), "{se}");
    let dr = find(&dump, "DestinationRule", "default", "echo").unwrap();
    assert_eq!(dr["spec"]["trafficPolicy"]["connectionPool"]["http"]["maxRequestsPerConnection"], 3, "{dr}");
    assert_eq!(x_route(&dump).as_deref(), Some("meshpilot-v1"));

    // An Envoy on istiod is routed by our config: the echo answers, with the header only our VirtualService sets.
    let envoy = sidecar(istiod.xds).await;
    wait_mark(&envoy, port, "meshpilot-v1", context).await;

    // An edit in meshpilot's config directory reaches istiod's store and its Envoy.
    write_config(&config, "vs.yaml", &virtual_service("meshpilot-v2"));
    wait_for("the edited VirtualService in istiod's configz", PROPAGATION, async || {
        (x_route(&istiod.configz().await).as_deref() == Some("meshpilot-v2")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", context()));
    wait_mark(&envoy, port, "meshpilot-v2", context).await;

    // meshpilot restarts: istiod reconnects and re-syncs; an edit made after the restart arrives, and the
    // Envoy never lost the cluster in between (no spurious delete downstream).
    let removed = clusters_removed(&envoy).await;
    mp.restart().await;
    write_config(&config, "vs.yaml", &virtual_service("meshpilot-v3"));
    wait_mark(&envoy, port, "meshpilot-v3", context).await;
    assert_eq!(clusters_removed(&envoy).await, removed, "a cluster was removed across meshpilot's restart");
    assert!(has_cluster(&envoy, port).await);

    // A delete in meshpilot's config directory removes the VirtualService from istiod: the header is gone.
    std::fs::remove_file(config.join("vs.yaml")).unwrap();
    wait_for("the VirtualService gone from istiod's configz", PROPAGATION, async || {
        find(&istiod.configz().await, "VirtualService", "default", "echo").is_none().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", context()));
    wait_mark(&envoy, port, "", context).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meshpilot_consumes_istiod_config_over_mcp() {
    let _serial = SERIAL.lock().await;
    let _ = TestEnv::shared_by(file!());
    let work = tempfile::tempdir().unwrap();
    let echo = EchoServer::start_with("echo", echo_options()).await.unwrap();
    let port = free_port();
    let config = work.path().join("istiod-config");
    std::fs::create_dir_all(&config).unwrap();
    write_config(&config, "se.yaml", &service_entry(port, echo.addr));
    write_config(&config, "vs.yaml", &virtual_service("istiod-v1"));

    // istiod's mesh config says REGISTRY_ONLY; meshpilot's own (below) says nothing about it (ALLOW_ANY).
    let istiod = Istiod::start(
        &work.path().join("istiod"),
        "trustDomain: cluster.local\noutboundTrafficPolicy: {mode: REGISTRY_ONLY}\n",
        ISTIOD_ENV,
        &format!("--configDir {}", config.display()),
    );
    let mesh_file = work.path().join("mesh.yaml");
    std::fs::write(&mesh_file, format!("configSources:\n- address: xds://{}\n", istiod.xds)).unwrap();
    // /ready waits for the source to have answered every type.
    let mp = Meshpilot::start(work.path(), &["--mesh-config", mesh_file.to_str().unwrap()]).await;
    let mp_log = mp.log.clone();
    let context = || format!("--- istiod ---\n{}\n--- meshpilot ---\n{}", istiod.log_tail(), tail(&mp_log));

    // meshpilot's store holds istiod's objects, each marked with the source it came from.
    let dump = wait_for("istiod's objects in meshpilot's configz", PROPAGATION, async || {
        let dump = mp.configz().await;
        (find(&dump, "ServiceEntry", "default", "echo").is_some() && x_route(&dump).is_some()).then_some(dump)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", context()));
    assert_eq!(x_route(&dump).as_deref(), Some("istiod-v1"));
    let vs = find(&dump, "VirtualService", "default", "echo").unwrap();
    assert_eq!(vs["source"], format!("xds://{}", istiod.xds), "{vs}");

    // A real Envoy on meshpilot is routed by istiod's config.
    let envoy = sidecar(mp.grpc).await;
    wait_mark(&envoy, port, "istiod-v1", context).await;

    // istiod's MeshConfig came over MCP too and is in force: the catch-all virtual host of the outbound route
    // is REGISTRY_ONLY's `block_all`, not the default `allow_any`.
    let dump = wait_for("block_all (istiod's outboundTrafficPolicy) at our Envoy", PROPAGATION, async || {
        let dump = envoy.config_dump(false).await.ok()?.to_string();
        dump.contains("\"block_all\"").then_some(dump)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", context()));
    assert!(!dump.contains("\"allow_any\""), "allow_any left at our Envoy");

    // An edit in istiod's config directory reaches our Envoy.
    write_config(&config, "vs.yaml", &virtual_service("istiod-v2"));
    wait_mark(&envoy, port, "istiod-v2", context).await;

    // istiod restarts: meshpilot keeps serving its last config, reconnects and re-syncs; an edit made while
    // istiod was down arrives, and our Envoy never lost the cluster (no spurious delete).
    let removed = clusters_removed(&envoy).await;
    istiod.stop();
    write_config(&config, "vs.yaml", &virtual_service("istiod-v3"));
    istiod.restart();
    wait_mark(&envoy, port, "istiod-v3", context).await;
    assert_eq!(clusters_removed(&envoy).await, removed, "a cluster was removed across istiod's restart");

    // Deletes in istiod reach our Envoy: first the route's header, then the cluster.
    std::fs::remove_file(config.join("vs.yaml")).unwrap();
    wait_mark(&envoy, port, "", context).await;
    std::fs::remove_file(config.join("se.yaml")).unwrap();
    wait_for("the echo cluster gone from our Envoy", PROPAGATION, async || {
        (!has_cluster(&envoy, port).await).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", context()));
    assert_eq!(routed_mark(port).await, None, "the echo is no longer reachable through our Envoy");
}

/// istiod's `xds://` client speaks TLS only in `tlsSettings.mode: SIMPLE` (server verified; `caCertificates` is
/// the PEM text itself, not a file; MUTUAL falls back to plaintext), so it never presents an identity: it can
/// read meshpilot's secure port only with the api generator's and the port's caller checks off
/// (`ENABLE_XDS_API_GENERATOR_AUTH=false`, `XDS_AUTH=false`). Checked: istiod verifies meshpilot's serving
/// certificate (root from `--ca-dir`, name `istiod.istio-system.svc`) and reads the config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn istiod_reads_meshpilot_secure_port_over_simple_tls() {
    let _serial = SERIAL.lock().await;
    let _ = TestEnv::shared_by(file!());
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    write_config(&config, "vs.yaml", &virtual_service("over-tls"));
    let secure = free_port();
    let ca_dir = work.path().join("ca");
    let mp = Meshpilot::start_with_env(
        work.path(),
        &[
            "--config-dir",
            config.to_str().unwrap(),
            "--secure-grpc-addr",
            &format!("127.0.0.1:{secure}"),
            "--ca-dir",
            ca_dir.to_str().unwrap(),
            "--root-ca-dir",
            work.path().join("no-plugged-ca").to_str().unwrap(),
        ],
        &[("XDS_AUTH", "false")],
    )
    .await;
    let root = std::fs::read_to_string(ca_dir.join("root-cert.pem")).unwrap();
    let indented: String = root.lines().map(|l| format!("      {l}\n")).collect();
    let mesh = |san: &str| {
        format!(
            "trustDomain: cluster.local\nconfigSources:\n- address: xds://127.0.0.1:{secure}\n  tlsSettings:\n    \
             mode: SIMPLE\n    sni: istiod.istio-system.svc\n    subjectAltNames: [{san}]\n    \
             caCertificates: |\n{indented}"
        )
    };
    // istiod really verifies the name: with another expected SAN the handshake fails and istiod exits at
    // startup (its client's first stream fails).
    let wrong =
        Istiod::prepare(&work.path().join("istiod-wrong-san"), &mesh("other.example"), ISTIOD_ENV, "");
    let err =
        wrong.try_run_start().expect_err("istiod started although meshpilot's certificate has another name");
    assert!(err.contains("no matching SAN found"), "{err}");
    drop(wrong);
    let istiod = Istiod::start(&work.path().join("istiod"), &mesh("istiod.istio-system.svc"), ISTIOD_ENV, "");
    let mp_log = mp.log.clone();
    wait_for("meshpilot's VirtualService in istiod's configz (TLS)", PROPAGATION, async || {
        (x_route(&istiod.configz().await).as_deref() == Some("over-tls")).then_some(())
    })
    .await
    .unwrap_or_else(|e| {
        panic!("{e}\n--- istiod ---\n{}\n--- meshpilot ---\n{}", istiod.log_tail(), tail(&mp_log))
    });
}

/// A certificate from istiod's CA (its secure port) for the service account `namespace/name`, written to
/// `dir` as `cert-chain.pem` and `key.pem`; the paths.
async fn istiod_certificate(istiod: &Istiod, dir: &Path, namespace: &str, name: &str) -> (PathBuf, PathBuf) {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", namespace]);
    let _ = env.kubectl(&["create", "serviceaccount", name, "-n", namespace]);
    let token = env
        .kubectl(&["create", "token", name, "-n", namespace, "--audience", "istio-ca", "--duration", "1h"])
        .unwrap();
    let root = std::fs::read_to_string(istiod.dir.join("root-cert.pem")).unwrap();
    let roots = CertificateDer::pem_slice_iter(root.as_bytes()).map(Result::unwrap).collect();
    let target = SecureTarget { addr: istiod.secure(), server_name: "istiod.istio-system.svc".into(), roots };
    let key = rcgen::KeyPair::generate().unwrap();
    let csr = rcgen::CertificateParams::default().serialize_request(&key).unwrap().pem().unwrap();
    let request = IstioCertificateRequest { csr, validity_duration: 3600, metadata: Vec::new() };
    let response = request_certificate(channel(&target, None).await.unwrap(), request, Some(token.trim()))
        .await
        .unwrap_or_else(|e| panic!("istiod's CA refused {namespace}/{name}: {e:?}"));
    std::fs::create_dir_all(dir).unwrap();
    let (cert, key_file) = (dir.join("cert-chain.pem"), dir.join("key.pem"));
    std::fs::write(&cert, response.cert_chain.concat()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    (cert, key_file)
}

/// meshpilot reading istiod's secure port with the api generator's auth on (istiod's default): with a client
/// certificate from istiod's CA for a service account of the root namespace (`istio-system`) and
/// `POD_NAMESPACE=istio-system` (istiod checks the node's namespace against the identity), meshpilot is served;
/// with one of namespace `default` istiod refuses it, and meshpilot's `/ready` says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meshpilot_reads_istiod_secure_port_with_a_root_namespace_certificate() {
    let _serial = SERIAL.lock().await;
    let _ = TestEnv::shared_by(file!());
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("istiod-config");
    std::fs::create_dir_all(&config).unwrap();
    write_config(&config, "vs.yaml", &virtual_service("istiod-mtls"));
    let istiod = Istiod::start(
        &work.path().join("istiod"),
        "trustDomain: cluster.local\n",
        &[],
        &format!("--configDir {}", config.display()),
    );
    let root = istiod.dir.join("root-cert.pem");
    let mesh = |cert: &Path, key: &Path| {
        format!(
            "configSources:\n- address: xds://{}\n  tlsSettings:\n    mode: MUTUAL\n    sni: istiod.istio-system.svc\n    \
             caCertificates: {}\n    clientCertificate: {}\n    privateKey: {}\n",
            istiod.secure(),
            root.display(),
            cert.display(),
            key.display()
        )
    };

    // A certificate of the root namespace: served.
    let (cert, key) =
        istiod_certificate(&istiod, &work.path().join("system"), "istio-system", "mcp-reader").await;
    let mesh_file = work.path().join("mesh.yaml");
    std::fs::write(&mesh_file, mesh(&cert, &key)).unwrap();
    let env = [("POD_NAMESPACE", "istio-system")];
    let system_dir = work.path().join("mp-system");
    std::fs::create_dir_all(&system_dir).unwrap();
    let mp =
        Meshpilot::start_with_env(&system_dir, &["--mesh-config", mesh_file.to_str().unwrap()], &env).await;
    let dump = mp.configz().await;
    assert_eq!(x_route(&dump).as_deref(), Some("istiod-mtls"), "{dump:?}");
    drop(mp);

    // A certificate of namespace default: istiod refuses the api generator, meshpilot never becomes ready.
    let (cert, key) =
        istiod_certificate(&istiod, &work.path().join("default"), "default", "mcp-reader").await;
    let mesh_file = work.path().join("mesh-default.yaml");
    std::fs::write(&mesh_file, mesh(&cert, &key)).unwrap();
    let env = [("POD_NAMESPACE", "default")];
    let default_dir = work.path().join("mp-default");
    std::fs::create_dir_all(&default_dir).unwrap();
    let mp = Meshpilot::spawn(&default_dir, &["--mesh-config", mesh_file.to_str().unwrap()], &env);
    let body = wait_for("meshpilot /ready naming istiod's refusal", PROPAGATION, async || {
        match http::get(mp.http, "meshpilot", "/ready", &[]).await {
            Ok((503, body)) if body.contains("restricted to the control-plane (root) namespace") => {
                Some(body)
            }
            _ => None,
        }
    })
    .await
    .unwrap_or_else(|e| {
        panic!("{e}\n--- meshpilot ---\n{}\n--- istiod ---\n{}", mp.log_text(), istiod.log_tail())
    });
    assert!(body.contains(&format!("xds://{}", istiod.secure())), "{body}");
}
