//! Proxyless gRPC end to end: a real Python `grpcio` client (GENERATOR `grpc`, as Istio's agent
//! writes the bootstrap) dials `xds:///echo.default.svc.cluster.local:PORT`, fetches listener, route,
//! cluster and endpoints from the whole control plane over ADS, and calls two loopback gRPC servers
//! (`echo-v1`, `echo-v2`) that answer with their name. Needs grpcio (scripts/install-grpcio.sh).

use crate::support;

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::Duration,
};

use meshpilot_testing::{Plane, free_port, repo_root, wait_for};
use support::NS;
use xds::SyncState;

/// The service port the client dials (a name in xDS only: nothing listens on it).
const PORT: u16 = 7070;
const HOST: &str = "echo.default.svc.cluster.local";

/// The venv's python; panics naming the install script when missing.
fn python() -> PathBuf {
    let py = repo_root().join(".venv-grpc/bin/python");
    assert!(py.is_file(), "{} missing: run scripts/install-grpcio.sh", py.display());
    py
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpc").join(name)
}

/// A Python child process whose stderr goes to `log`; killed when dropped.
struct Py {
    child: Child,
    log: PathBuf,
}

impl Py {
    fn spawn(dir: &Path, name: &str, script_name: &str, args: &[&str], env: &[(&str, &Path)]) -> Py {
        let log = dir.join(format!("{name}.log"));
        let mut cmd = Command::new(python());
        cmd.arg(script(script_name))
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        Py { child: cmd.spawn().unwrap_or_else(|e| panic!("spawn {script_name}: {e}")), log }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads one line of `out`, or panics with the process's log when it has exited.
fn read_line(out: &mut BufReader<ChildStdout>, py: &Py) -> String {
    let mut line = String::new();
    let n = tokio::task::block_in_place(|| out.read_line(&mut line)).unwrap();
    assert!(n > 0, "python exited early; its log:\n{}", py.log_tail());
    line
}

/// `echo_server.py NAME PORT` on 127.0.0.1, started and serving.
struct EchoServer {
    port: u16,
    _py: Py,
}

impl EchoServer {
    fn start(dir: &Path, name: &str) -> EchoServer {
        let port = free_port();
        let mut py = Py::spawn(dir, name, "echo_server.py", &[name, &port.to_string()], &[]);
        let mut out = BufReader::new(py.child.stdout.take().unwrap());
        assert_eq!(read_line(&mut out, &py).trim(), "ready");
        EchoServer { port, _py: py }
    }
}

/// What the client answered for one batch of calls.
#[derive(Debug, serde::Deserialize)]
struct Batch {
    servers: Vec<String>,
    errors: Vec<String>,
    /// The request metadata the first answering server saw.
    metadata: BTreeMap<String, String>,
}

impl Batch {
    fn count(&self, server: &str) -> usize {
        self.servers.iter().filter(|s| *s == server).count()
    }
}

/// `xds_client.py xds:///HOST:PORT` with a bootstrap pointing at the plane's ADS; one open channel.
struct XdsClient {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    py: Py,
}

impl XdsClient {
    fn start(dir: &Path, plane: &Plane) -> XdsClient {
        let bootstrap = dir.join("grpc-bootstrap.json");
        std::fs::write(&bootstrap, bootstrap_json(plane).to_string()).unwrap();
        let target = format!("xds:///{HOST}:{PORT}");
        let mut py =
            Py::spawn(dir, "client", "xds_client.py", &[&target], &[("GRPC_XDS_BOOTSTRAP", &bootstrap)]);
        let stdin = py.child.stdin.take().unwrap();
        let stdout = BufReader::new(py.child.stdout.take().unwrap());
        XdsClient { stdin, stdout, py }
    }

    /// Makes `calls` calls with `metadata`.
    fn call(&mut self, calls: usize, metadata: &[(&str, &str)]) -> Batch {
        let md: BTreeMap<&str, &str> = metadata.iter().copied().collect();
        let req = serde_json::json!({"calls": calls, "metadata": md});
        writeln!(self.stdin, "{req}").unwrap();
        self.stdin.flush().unwrap();
        let line = read_line(&mut self.stdout, &self.py);
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("client printed {line:?}: {e}"))
    }

    /// Calls until a batch of `calls` satisfies `ok` (10 s), returning it.
    async fn wait_batch(
        &mut self,
        what: &str,
        calls: usize,
        metadata: &[(&str, &str)],
        ok: impl Fn(&Batch) -> bool,
    ) -> Batch {
        let mut last = None;
        let r = wait_for(what, Duration::from_secs(10), async || {
            let b = self.call(calls, metadata);
            let hit = ok(&b);
            last = Some(b);
            hit.then_some(())
        })
        .await;
        if let Err(e) = r {
            panic!("{e}; last batch {last:?}\nclient log:\n{}", self.py.log_tail());
        }
        last.unwrap()
    }
}

/// The bootstrap Istio's agent writes for a proxyless client (PEERS.md §2d), ADS on the plane.
fn bootstrap_json(plane: &Plane) -> serde_json::Value {
    serde_json::json!({
        "xds_servers": [{
            "server_uri": plane.ads.addr.to_string(),
            "channel_creds": [{"type": "insecure"}],
            "server_features": ["xds_v3"],
        }],
        "node": {
            "id": format!("sidecar~127.0.0.1~client-1.{NS}~{NS}.svc.cluster.local"),
            "metadata": {
                "GENERATOR": "grpc",
                "NAMESPACE": NS,
                "INSTANCE_IPS": "127.0.0.1",
                "ISTIO_VERSION": "1.28.0",
                "CLUSTER_ID": "Kubernetes",
            },
            "locality": {},
        },
        "server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%s",
    })
}

/// Two echo servers, the ServiceEntry `echo` (GRPC port [`PORT`]) with a WorkloadEntry per
/// version, a DestinationRule with subsets v1/v2, `vs_spec` (YAML under `spec:`, indented two
/// spaces) as VirtualService when given, and a plane serving that directory.
struct Mesh {
    dir: tempfile::TempDir,
    plane: Plane,
    _v1: EchoServer,
    _v2: EchoServer,
}

impl Mesh {
    async fn start(vs_spec: Option<&str>) -> Mesh {
        let dir = tempfile::tempdir().unwrap();
        let v1 = EchoServer::start(dir.path(), "echo-v1");
        let v2 = EchoServer::start(dir.path(), "echo-v2");
        let mut yaml = format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: {NS}}}\n\
             spec:\n  hosts: [{HOST}]\n  location: MESH_INTERNAL\n  ports:\n  \
             - {{number: {PORT}, name: grpc-echo, protocol: GRPC}}\n  resolution: STATIC\n  \
             workloadSelector:\n    labels: {{app: echo}}\n\
             ---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: echo, namespace: {NS}}}\n\
             spec:\n  host: {HOST}\n  subsets:\n  - {{name: v1, labels: {{version: v1}}}}\n  \
             - {{name: v2, labels: {{version: v2}}}}\n"
        );
        for (v, server) in [("v1", &v1), ("v2", &v2)] {
            yaml.push_str(&format!(
                "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: echo-{v}, namespace: {NS}}}\n\
                 spec:\n  address: 127.0.0.1\n  ports: {{grpc-echo: {}}}\n  labels: {{app: echo, version: {v}}}\n",
                server.port
            ));
        }
        std::fs::write(dir.path().join("echo.yaml"), yaml).unwrap();
        if let Some(spec) = vs_spec {
            write_vs(dir.path(), spec);
        }
        let plane = Plane::start(dir.path()).await;
        Mesh { dir, plane, _v1: v1, _v2: v2 }
    }

    fn client(&self) -> XdsClient {
        XdsClient::start(self.dir.path(), &self.plane)
    }

    /// The client's connection: listener, route, cluster and endpoint types all ACKed, no NACKs.
    async fn assert_all_acked(&self, client: &XdsClient) {
        let want =
            [xds::type_url::LISTENER, xds::type_url::ROUTE, xds::type_url::CLUSTER, xds::type_url::ENDPOINT];
        let acked = |s: &xds::TypeStatus| s.state == SyncState::Acked;
        let r = wait_for("the client's four types ACKed", Duration::from_secs(5), async || {
            let conns = self.plane.server.connections().snapshot();
            let c = conns.first()?;
            want.iter().all(|t| c.types.get(*t).is_some_and(acked)).then_some(())
        })
        .await;
        let conns = self.plane.server.connections().snapshot();
        let status = format!("{:#?}", conns.first().map(|c| &c.types));
        r.unwrap_or_else(|e| panic!("{e}\nour status: {status}\nclient log:\n{}", client.py.log_tail()));
        assert_eq!(conns.len(), 1, "one connection: the client");
        assert!(conns[0].proxy.is_proxyless_grpc(), "GENERATOR grpc seen");
        for (t, s) in &conns[0].types {
            assert_eq!((s.rejects, &s.last_error), (0, &None), "{t} NACKed");
        }
    }
}

/// Writes (atomically) the VirtualService `echo` with `spec`.
fn write_vs(dir: &Path, spec: &str) {
    let text = format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: echo, namespace: {NS}}}\nspec:\n{spec}"
    );
    let tmp = dir.join(".vs.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join("echo-vs.yaml")).unwrap();
}

const HEADER_VS: &str = "  hosts: [echo]\n  http:\n  - match: [{headers: {end-user: {exact: jason}}}]\n    \
                         route: [{destination: {host: echo, subset: v2}}]\n  \
                         - route: [{destination: {host: echo, subset: v1}}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn default_route_reaches_both_servers() {
    let mesh = Mesh::start(None).await;
    let mut client = mesh.client();
    // ROUND_ROBIN picks among connected endpoints: the first calls may all go to whichever server
    // connected first.
    client
        .wait_batch("both servers answer", 10, &[], |b| b.count("echo-v1") > 0 && b.count("echo-v2") > 0)
        .await;
    // Both connected: strict alternation over the (subset-less) cluster's two endpoints.
    let b = client.call(20, &[]);
    assert_eq!((b.count("echo-v1"), b.count("echo-v2"), b.errors.len()), (10, 10, 0), "{b:?}");
    mesh.assert_all_acked(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn header_match_routes_to_subsets() {
    let mesh = Mesh::start(Some(HEADER_VS)).await;
    let mut client = mesh.client();
    let jason = client.call(20, &[("end-user", "jason")]);
    let other = client.call(20, &[]);
    let log = client.py.log_tail();
    assert!(jason.errors.is_empty() && other.errors.is_empty(), "{jason:?} {other:?}\n{log}");
    assert_eq!(jason.count("echo-v2"), 20, "end-user: jason → v2: {jason:?}");
    assert_eq!(other.count("echo-v1"), 20, "default → v1: {other:?}");
    assert_eq!(
        jason.metadata.get("end-user").map(String::as_str),
        Some("jason"),
        "header reached the server"
    );
    mesh.assert_all_acked(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn weighted_split_and_live_change() {
    let weighted = "  hosts: [echo]\n  http:\n  - route:\n    - {destination: {host: echo, subset: v1}, weight: 80}\n    \
                    - {destination: {host: echo, subset: v2}, weight: 20}\n";
    let mesh = Mesh::start(Some(weighted)).await;
    let mut client = mesh.client();
    let calls = 400;
    let b = client.call(calls, &[]);
    assert!(b.errors.is_empty(), "{b:?}");
    // gRPC picks a weighted cluster at random per call: v2 ~ Binomial(400, 0.2), mean 80, sd 8;
    // ±4 sd fails by chance about once in 16 000 runs.
    let v2 = b.count("echo-v2");
    assert_eq!(b.count("echo-v1") + v2, calls);
    assert!((48..=112).contains(&v2), "v2 got {v2} of {calls} (want ~80)");
    mesh.assert_all_acked(&client).await;

    // A live VirtualService change moves all traffic to v2 on the same channel.
    let all_v2 = "  hosts: [echo]\n  http:\n  - route: [{destination: {host: echo, subset: v2}}]\n";
    write_vs(mesh.dir.path(), all_v2);
    client.wait_batch("traffic moved to v2", 10, &[], |b| b.count("echo-v2") == 10).await;
    let b = client.call(50, &[]);
    assert_eq!((b.count("echo-v2"), b.errors.len()), (50, 0), "{b:?}");
    mesh.assert_all_acked(&client).await;
}
