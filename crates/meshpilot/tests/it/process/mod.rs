//! Helpers of the process-fault tests: a `meshpilot discovery` process on fixed loopback ports
//! (restartable on the same ports), the echo mesh it serves, and what the tests read from Envoy
//! (config churn counters) and from meshpilot (`/debug/syncz`).

use std::{
    collections::BTreeMap,
    ffi::OsStr,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::Duration,
};

use meshpilot_testing::{EchoServer, Envoy, free_port, get, http_get, wait_for};
use serde_json::Value as Json;

/// The sidecar's namespace and the echo service's.
pub const NS: &str = "test";
/// The echo service's host.
pub const HOST: &str = "echo.test.svc.cluster.local";
/// The sidecar's proxy id in syncz (`Bootstrap::sidecar("echo-client", …)`).
pub const SIDECAR: &str = "echo-client.test";
/// The router's proxy id in syncz (`Bootstrap::router`).
pub const ROUTER: &str = "istio-ingressgateway-1.istio-system";

/// The echo mesh: ServiceEntry `echo.test.svc.cluster.local:svc_port` (HTTP, STATIC) with one
/// WorkloadEntry at `127.0.0.1:upstream`, and a Gateway (HTTP on `gw_port`) + VirtualService sending
/// everything on the ingress gateway to it.
pub fn echo_mesh(svc_port: u16, upstream: u16, gw_port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  hosts: [{HOST}]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {svc_port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: echo}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  address: 127.0.0.1\n  ports: {{http: {upstream}}}\n  labels: {{app: echo}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: public-gw, namespace: istio-system}}\n\
         spec:\n  selector: {{istio: ingressgateway}}\n  servers:\n  - port: {{number: {gw_port}, name: http, protocol: HTTP}}\n    hosts: [\"*\"]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: public, namespace: istio-system}}\n\
         spec:\n  hosts: [\"*\"]\n  gateways: [public-gw]\n  http:\n  - route:\n    - destination: {{host: {HOST}, port: {{number: {svc_port}}}}}\n"
    )
}

/// The mesh on disk, an echo upstream and the two proxy ports.
pub struct Mesh {
    /// The work directory: `config/` holds the mesh, logs go beside it.
    pub work: tempfile::TempDir,
    _echo: EchoServer,
    /// The sidecar's outbound port for the echo service.
    pub svc_port: u16,
    /// The router's gateway port.
    pub gw_port: u16,
}

impl Mesh {
    /// Writes the echo mesh and starts its echo server.
    pub async fn new() -> Mesh {
        let work = tempfile::tempdir().unwrap();
        let echo = EchoServer::start("echo").await.unwrap();
        let (svc_port, gw_port) = (free_port(), free_port());
        std::fs::create_dir(work.path().join("config")).unwrap();
        std::fs::write(work.path().join("config/mesh.yaml"), echo_mesh(svc_port, echo.addr.port(), gw_port))
            .unwrap();
        Mesh { work, _echo: echo, svc_port, gw_port }
    }

    /// Starts `meshpilot discovery` on the mesh, logging to `log` in the work directory.
    pub fn start(&self, ports: Ports, log: &str) -> Meshpilot {
        Meshpilot::start(&self.work.path().join("config"), ports, self.work.path().join(log))
    }

    /// Starts `meshpilot discovery` on the mesh with more `args` and `env`, logging to `log` in the work
    /// directory.
    pub fn start_with(&self, args: &[&str], env: &[(&str, &str)], ports: Ports, log: &str) -> Meshpilot {
        let config = self.work.path().join("config");
        let args: Vec<&OsStr> = [OsStr::new("--config-dir"), config.as_os_str()]
            .into_iter()
            .chain(args.iter().map(OsStr::new))
            .collect();
        Meshpilot::start_with_env(&args, env, ports, self.work.path().join(log))
    }

    /// Both proxies route to the echo server.
    pub async fn serving(&self) -> bool {
        through(self.svc_port).await && through(self.gw_port).await
    }
}

/// The three loopback addresses of one meshpilot process.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// `--grpc-addr`.
    pub grpc: SocketAddr,
    /// `--http-addr`.
    pub http: SocketAddr,
    /// `--monitoring-addr`.
    pub monitoring: SocketAddr,
}

impl Ports {
    /// Three free loopback ports.
    pub fn free() -> Ports {
        let addr = |p: u16| -> SocketAddr { ([127, 0, 0, 1], p).into() };
        Ports { grpc: addr(free_port()), http: addr(free_port()), monitoring: addr(free_port()) }
    }
}

/// `--secureGRPCAddr=` / `--httpsAddr=` (off) for each of the two ports `args` does not set: tests run
/// in parallel, and istiod's defaults (:15012, :15017, on with a cluster or a CA directory) would
/// collide. Every test that spawns `meshpilot discovery` passes these or explicit free ports.
pub fn secure_ports_off_unless_given<S: AsRef<OsStr>>(args: &[S]) -> Vec<&'static str> {
    let given = |names: &[&str]| {
        args.iter().any(|a| {
            let a = a.as_ref().to_string_lossy();
            names.iter().any(|n| a == *n || a.starts_with(&format!("{n}=")))
        })
    };
    let mut off = Vec::new();
    if !given(&["--secureGRPCAddr", "--secure-grpc-addr"]) {
        off.push("--secureGRPCAddr=");
    }
    if !given(&["--httpsAddr", "--https-addr"]) {
        off.push("--httpsAddr=");
    }
    off
}

/// A `meshpilot discovery` process (the real binary); killed on drop if still running.
pub struct Meshpilot {
    child: Child,
    /// Its addresses.
    pub ports: Ports,
    /// Its log (stderr).
    pub log: PathBuf,
}

impl Meshpilot {
    /// Starts `meshpilot discovery --config-dir config_dir` on `ports`, logging to `log`.
    pub fn start(config_dir: &Path, ports: Ports, log: PathBuf) -> Meshpilot {
        Self::start_with(&[OsStr::new("--config-dir"), config_dir.as_os_str()], ports, log)
    }

    /// Starts `meshpilot discovery ARGS` on `ports`, logging to `log`.
    pub fn start_with(args: &[&OsStr], ports: Ports, log: PathBuf) -> Meshpilot {
        Self::start_with_env(args, &[], ports, log)
    }

    /// Starts `meshpilot discovery ARGS` with `env` added to its environment.
    pub fn start_with_env(args: &[&OsStr], env: &[(&str, &str)], ports: Ports, log: PathBuf) -> Meshpilot {
        let child = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
            // `POD_NAME` (the leader-election identity) unless `env` names another.
            .env("POD_NAME", "meshpilot-test")
            .envs(env.iter().copied())
            .arg("discovery")
            .args(args)
            .args(secure_ports_off_unless_given(args))
            .args(["--grpc-addr", &ports.grpc.to_string(), "--http-addr", &ports.http.to_string()])
            .args(["--monitoring-addr", &ports.monitoring.to_string()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Meshpilot { child, ports, log }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9`, and reaps it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM (the process decides how to stop).
    pub fn sigterm(&self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    }

    /// Waits for the process to exit (60 s at most: a hang guard, not a timing assertion).
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let child = &mut self.child;
        wait_for("meshpilot to exit", Duration::from_secs(60), async || child.try_wait().ok().flatten())
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Its log so far, without terminal colour codes.
    pub fn log_text(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        regex::Regex::new("\x1b\\[[0-9;]*m").unwrap().replace_all(&text, "").into_owned()
    }

    /// `/debug/syncz` as JSON (`None` while it does not answer).
    pub async fn syncz(&self) -> Option<Json> {
        let (status, body) = http_get(self.ports.http, "/debug/syncz", &[]).await.ok()?;
        (status == 200).then(|| serde_json::from_str(&body).ok()).flatten()
    }

    /// The value of a counter in `/metrics` (labels summed; 0 when absent).
    pub async fn metric(&self, name: &str) -> Option<f64> {
        let (status, body) = http_get(self.ports.monitoring, "/metrics", &[]).await.ok()?;
        (status == 200).then(|| {
            body.lines()
                .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        })
    }

    /// Resident set size in KiB (`VmRSS` of /proc/PID/status).
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
    }
}

impl Drop for Meshpilot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `proxy` has a stream in `syncz` on which Clusters and Listeners were sent and every type
/// sent has its latest nonce ACKed (Istio's SYNCED).
pub fn synced(syncz: &Json, proxy: &str) -> bool {
    syncz.as_array().is_some_and(|all| {
        all.iter().any(|p| {
            p["proxy"] == proxy
                && p["resources"].as_object().is_some_and(|types| {
                    let has = |t: &str| types.keys().any(|k| k.ends_with(t));
                    has(".Cluster")
                        && has(".Listener")
                        && types
                            .values()
                            .all(|s| s["sent"].as_str().is_some_and(|n| !n.is_empty() && s["acked"] == n))
                })
        })
    })
}

/// Waits until every proxy of `proxies` is synced in `mp`'s syncz (60 s hang guard).
pub async fn wait_synced(mp: &Meshpilot, proxies: &[&str]) {
    wait_for(&format!("{proxies:?} synced in /debug/syncz"), Duration::from_secs(60), async || {
        let syncz = mp.syncz().await?;
        proxies.iter().all(|p| synced(&syncz, p)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\nmeshpilot log:\n{}", mp.log_text()));
}

/// Envoy's counters of config churn: clusters and listeners modified, updated in place or removed,
/// and route configurations reloaded (summed over every RDS subscription).
pub const CHURN: [&str; 5] = [
    "cluster_manager.cluster_modified",
    "cluster_manager.cluster_removed",
    "listener_manager.listener_modified",
    "listener_manager.listener_in_place_updated",
    "listener_manager.listener_removed",
];

/// [`CHURN`]'s values plus `rds.config_reload` (the sum of every `http.*.rds.*.config_reload`).
pub async fn churn(envoy: &Envoy) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for name in CHURN {
        out.insert(name.to_owned(), envoy.stat(name).await.unwrap().unwrap_or(0));
    }
    let (_, body) = envoy.admin_get("/stats?filter=rds\\..*\\.config_reload$").await.unwrap();
    let reloads = body.lines().filter_map(|l| l.rsplit(": ").next()?.trim().parse::<u64>().ok()).sum();
    out.insert("rds.config_reload".to_owned(), reloads);
    out
}

/// `GET /` with `Host: echo…` through a proxy listener on `port`: whether the echo answered.
pub async fn through(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    matches!(get(addr, HOST, "/", &[]).await, Ok((200, body)) if body.starts_with("echo"))
}

/// Waits until requests through `port` reach the echo server (60 s hang guard).
pub async fn wait_serving(port: u16, what: &str) {
    wait_for(
        &format!("{what} on :{port} to route to the echo server"),
        Duration::from_secs(60),
        async || through(port).await.then_some(()),
    )
    .await
    .unwrap();
}
