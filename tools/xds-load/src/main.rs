//! `xds-load`: the command line (see `xds-load --help`).

use std::{
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, ExitCode, Stdio},
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use xds_load::{
    change::{ChangeKind, Changer, CommandChanger, FileChanger},
    client::{Protocol, StreamOptions},
    generate,
    layout::{Layout, ProxyType},
    run::{RunOptions, run},
    tls::TlsSettings,
    xds::XdsType,
};

/// Simulate Envoy proxies over ADS against an xDS control plane and measure it: startup
/// (connect → all of CDS, EDS, LDS, RDS ACKed), convergence of config changes (T0 → marker received
/// and ACKed, Istio's pilot_proxy_convergence_time), responses and bytes per change, and the control
/// plane's RSS and CPU from /proc.
#[derive(Parser, Debug)]
#[command(name = "xds-load", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Write a synthetic mesh (ServiceEntries, WorkloadEntries, VirtualServices, Sidecars, an ingress
    /// Gateway) into a config directory, plus .xds-load.json so `run --config-dir` uses matching
    /// node identities.
    Gen(GenArgs),
    /// Open ADS streams, wait until ready, apply marker changes, report.
    Run(Box<RunArgs>),
    /// Poll the REST-JSON xDS paths (Envoy's api_type: REST) on the HTTP port from N simulated
    /// proxies every --interval, carrying the versions (unchanged polls are 304); report 200/304
    /// counts, bytes, latency and the control plane's CPU and RSS over a steady window.
    Poll(Box<PollArgs>),
}

#[derive(clap::Args, Debug)]
struct PollArgs {
    /// The control plane's HTTP address, IP:port (ignored with --meshpilot).
    #[arg(long, default_value = "127.0.0.1:8080")]
    address: std::net::SocketAddr,
    #[command(flatten)]
    who: ProxiesArgs,
    /// Types polled each round, in order (comma-separated): cds, lds, rds, eds. As Envoy's REST
    /// client does, EDS is polled once per EDS cluster named by the latest CDS answer and RDS once per
    /// route configuration named by the latest LDS answer (each its own subscription and version);
    /// without cds (lds), eds (rds) is one poll with no resource names.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "cds,lds")]
    types: Vec<XdsType>,
    /// Envoy's refresh_delay: one round per poller per interval.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    interval: Duration,
    /// Entries in each node's extensions list (Envoy 1.40 sends about 300: a 48 KB request).
    #[arg(long, default_value_t = 300)]
    extensions: usize,
    /// Extra node metadata KEY=VALUE (string values); repeatable.
    #[arg(long = "metadata", value_name = "KEY=VALUE")]
    metadata: Vec<String>,
    /// The control plane's config directory (the layout is read from its .xds-load.json).
    #[arg(long, value_name = "DIR")]
    config_dir: Option<PathBuf>,
    /// Longest wait for every poller's first 200 of every type.
    #[arg(long, value_parser = parse_duration, default_value = "120s")]
    warm_timeout: Duration,
    /// The measured window after all are warm.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    duration: Duration,
    #[command(flatten)]
    process: ProcessArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// The simulated proxies (`run`: ADS streams, `poll`: REST pollers).
#[derive(clap::Args, Debug)]
struct ProxiesArgs {
    /// Simulated proxies (streams or pollers).
    #[arg(long, default_value_t = 10)]
    proxies: u32,
    /// Layout index of the first proxy (to split proxies over several xds-load processes).
    #[arg(long, default_value_t = 0)]
    first_index: u32,
    /// Kind of proxy: sidecar (a workload of the layout) or router (ingress gateway in istio-system).
    #[arg(long, value_enum, default_value = "sidecar")]
    proxy_type: ProxyType,
}

/// The control plane to sample or start (`run` and `poll`).
#[derive(clap::Args, Debug)]
struct ProcessArgs {
    /// Control-plane process to sample (RSS, peak RSS, CPU seconds, threads from /proc/PID).
    #[arg(long)]
    pid: Option<u32>,
    /// Start the control plane: `BIN discovery --config-dir DIR --grpc-addr 127.0.0.1:<free port> …`
    /// (needs --config-dir), wait until its /ready answers 200, sample it, stop it at the end.
    #[arg(long, value_name = "BIN")]
    meshpilot: Option<PathBuf>,
    /// Extra argument for --meshpilot; repeatable.
    #[arg(long = "meshpilot-arg", value_name = "ARG", allow_hyphen_values = true)]
    meshpilot_args: Vec<String>,
    /// Where --meshpilot's stdout and stderr go (default: discarded).
    #[arg(long, value_name = "FILE")]
    meshpilot_log: Option<PathBuf>,
}

/// Connections, threads and the summary's outputs (`run` and `poll`).
#[derive(clap::Args, Debug)]
struct OutputArgs {
    /// TCP connect timeout per connection (a loaded control plane may accept slowly).
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    connect_timeout: Duration,
    /// Tokio worker threads of xds-load itself (1 leaves the other core to the control plane).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Write the summary as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Free text recorded in the JSON (e.g. the scenario name).
    #[arg(long)]
    label: Option<String>,
}

#[derive(clap::Args, Debug)]
struct GenArgs {
    /// Output directory (created; earlier ns-*.yaml files in it are replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Services (ServiceEntries svc-<i>, port http 80).
    #[arg(long, default_value_t = 100)]
    services: u32,
    /// Namespaces ns-<k>; services are spread round robin.
    #[arg(long, default_value_t = 10)]
    namespaces: u32,
    /// Sidecar workloads (WorkloadEntries svc-<s>-<j>); `run` streams impersonate them.
    #[arg(long, default_value_t = 200)]
    workloads: u32,
    /// Add a Sidecar `default` per namespace importing only ./* and istio-system/* (namespace
    /// isolation, Istio's scalability setup).
    #[arg(long)]
    sidecar_scope: bool,
    /// Do not write a VirtualService per service.
    #[arg(long)]
    no_virtual_services: bool,
    /// DNS domain suffix.
    #[arg(long, default_value = "cluster.local")]
    domain: String,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// ADS address of the control plane (ignored with --meshpilot, which picks a free port).
    #[arg(long, default_value = "http://127.0.0.1:15010")]
    address: String,
    #[command(flatten)]
    who: ProxiesArgs,
    /// xDS variant.
    #[arg(long, value_enum, default_value = "sotw")]
    protocol: Protocol,
    /// Streams multiplexed on one HTTP/2 connection (1 = one connection per stream, as Envoy does).
    #[arg(long, default_value_t = 1)]
    streams_per_conn: u32,
    /// Streams opened per second (0 = all at once).
    #[arg(long, default_value_t = 0.0)]
    ramp: f64,
    /// Probability to NACK a response once the stream is ready (0..1).
    #[arg(long, default_value_t = 0.0)]
    nack_rate: f64,
    /// Extra node metadata KEY=VALUE (string values); repeatable.
    #[arg(long = "metadata", value_name = "KEY=VALUE")]
    metadata: Vec<String>,
    /// The control plane's config directory: the layout is read from its .xds-load.json and marker
    /// changes are written into it (xds-load-marker.yaml).
    #[arg(long, value_name = "DIR")]
    config_dir: Option<PathBuf>,
    /// Layout when the config directory has no .xds-load.json: services.
    #[arg(long, default_value_t = 100)]
    services: u32,
    /// Layout when the config directory has no .xds-load.json: namespaces.
    #[arg(long, default_value_t = 10)]
    namespaces: u32,
    /// Layout when the config directory has no .xds-load.json: Sidecar scoping is on.
    #[arg(long)]
    sidecar_scope: bool,
    /// Kind of change: none; service-entry (CDS marker: a new host); workload-entry (EDS marker: an
    /// endpoint IP, endpoint-only change); virtual-service (RDS marker: a route prefix for svc-0);
    /// template (--template, --marker, --marker-type); command (the --command helper makes each
    /// change, EDS marker 10.255.x.y as workload-entry).
    #[arg(long, value_enum, default_value = "none")]
    change: ChangeKind,
    /// --change command: a shell command started once that reads a change number a line on stdin,
    /// makes the change (an endpoint at the marker IP of that number) and answers `ok` on stdout.
    #[arg(long, value_name = "CMD")]
    command: Option<String>,
    /// Number of changes.
    #[arg(long, default_value_t = 3)]
    changes: u64,
    /// Apply changes at this interval (e.g. 100ms: churn) instead of waiting for each to converge.
    #[arg(long, value_parser = parse_duration)]
    interval: Option<Duration>,
    /// Longest wait for a change to reach all affected streams.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    change_timeout: Duration,
    /// Pause after a converged change (sequential mode).
    #[arg(long, value_parser = parse_duration, default_value = "500ms")]
    gap: Duration,
    /// --change template: a config file whose {{SEQ}} is replaced by the change number.
    #[arg(long, value_name = "FILE")]
    template: Option<PathBuf>,
    /// --change template: the marker ({{SEQ}} replaced) searched in responses.
    #[arg(long)]
    marker: Option<String>,
    /// --change template: the response type the marker appears in.
    #[arg(long, value_enum, default_value = "cds")]
    marker_type: XdsType,
    /// --change template: only proxies of this namespace are expected to converge.
    #[arg(long)]
    affected_namespace: Option<String>,
    /// Wait after writing change 0 (the initial marker objects) before connecting.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    settle: Duration,
    /// Longest wait for all streams to be ready.
    #[arg(long, value_parser = parse_duration, default_value = "120s")]
    ready_timeout: Duration,
    /// Stay connected this long after all are ready, before the first change.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    hold: Duration,
    #[command(flatten)]
    process: ProcessArgs,
    /// Period of /proc sampling.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    sample_interval: Duration,
    /// Connect over TLS, trusting the root certificate(s) of this PEM file (default with --ca-dir: the
    /// CA's root). --address is then the secure port (host:port, e.g. 127.0.0.1:15012).
    #[arg(long, value_name = "FILE")]
    tls_root: Option<PathBuf>,
    /// Name the server certificate must carry (pilot-agent's ISTIOD_SAN).
    #[arg(long, value_name = "NAME", default_value = xds_load::tls::DEFAULT_SERVER_NAME)]
    tls_server_name: String,
    /// Connect over TLS with client certificates: read the control plane's CA from this directory
    /// (meshpilot's --ca-dir; the self-signed root is created there when absent) and sign locally one
    /// certificate per workload identity (ns/<namespace>/sa/<service account>) before connecting.
    /// With --meshpilot: the control plane is started with --secure-grpc-addr and this --ca-dir, and
    /// the streams use the secure port.
    #[arg(long, value_name = "DIR")]
    ca_dir: Option<PathBuf>,
    /// Connection storm: after --hold, the last N streams drop their streams and connections and
    /// reconnect at once on new connections (retrying with jittered backoff when refused, e.g.
    /// RESOURCE_EXHAUSTED from PILOT_MAX_REQUESTS_PER_SECOND); change 1 is applied at the same moment
    /// and measured on the streams that stayed connected. Reports time to ready again, refusals and
    /// the control plane's RSS steady → peak → settled.
    #[arg(long, default_value_t = 0, value_name = "N")]
    storm: u32,
    /// Hostile connections: after --hold, open N misbehaving connections (a mix of ADS streams that
    /// never read, garbage-request floods, HTTP/1 and half HTTP/2 prefaces on the gRPC port, slowloris
    /// on the debug port; see the `hostile` module), keep them through the changes, and report the
    /// control plane's RSS growth and how it closed each kind. Needs a plaintext --address.
    #[arg(long, default_value_t = 0, value_name = "N")]
    hostile: u32,
    /// Only these hostile kinds, round robin (comma-separated; default the first five): never-read,
    /// nonce-flood, http1-on-grpc, grpc-slowloris, http-slowloris, name-flood (20,000 unknown EDS names,
    /// every response ACKed). Measures what one kind costs.
    #[arg(long, value_delimiter = ',', value_name = "KINDS")]
    hostile_kinds: Vec<xds_load::hostile::Kind>,
    /// EDS names each nonce-flood and name-flood stream watches (unknown ones). 0: no EDS request
    /// (garbage nonces alone); over meshpilot's MESHPILOT_XDS_MAX_RESOURCE_NAMES (50,000) the stream
    /// is refused with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    hostile_names: usize,
    /// The control plane's HTTP debug address (IP:port) for the slowloris kind (set by --meshpilot).
    #[arg(long, value_name = "ADDR")]
    http_address: Option<std::net::SocketAddr>,
    #[command(flatten)]
    output: OutputArgs,
}

/// `250ms`, `2s`, `1.5s`, `1m`, or plain seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("invalid duration {text:?} (e.g. 100ms, 2s, 1m)"))?;
    if !(v >= 0.0 && v.is_finite()) {
        return Err(format!("invalid duration {text:?}: must be ≥ 0"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// A spawned control plane, killed when dropped.
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits until the spawned control plane answers `GET /ready` with 200, so startup times measure
/// serving, not the process loading its config.
fn wait_ready(child: &mut Spawned, http_port: u16, timeout: Duration) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.0.try_wait()? {
            anyhow::bail!("--meshpilot exited before it was ready ({status}); see --meshpilot-log");
        }
        let ok = std::net::TcpStream::connect(("127.0.0.1", http_port)).ok().and_then(|mut c| {
            c.write_all(b"GET /ready HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
            let mut head = String::new();
            c.read_to_string(&mut head).ok()?;
            Some(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"))
        });
        if ok == Some(true) {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            anyhow::bail!("--meshpilot not ready on 127.0.0.1:{http_port}/ready after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `bin discovery --config-dir DIR` with its gRPC and HTTP ports on loopback (`ports`) and
/// `extra` arguments, output to `log` (default: discarded), and waits until it is ready.
fn spawn_meshpilot(
    bin: &std::path::Path,
    dir: &std::path::Path,
    (grpc_port, http_port): (u16, u16),
    extra: &[String],
    log: Option<&std::path::Path>,
    ready_timeout: Duration,
) -> anyhow::Result<Spawned> {
    let (out, err) = match log {
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| format!("--meshpilot-log {}", p.display()))?;
            (Stdio::from(f.try_clone()?), Stdio::from(f))
        }
        None => (Stdio::null(), Stdio::null()),
    };
    let child = Command::new(bin)
        .arg("discovery")
        .arg("--config-dir")
        .arg(dir)
        .args(["--grpc-addr", &format!("127.0.0.1:{grpc_port}")])
        .args(["--http-addr", &format!("127.0.0.1:{http_port}"), "--monitoring-addr", "127.0.0.1:0"])
        .args(extra)
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("cannot start --meshpilot {}", bin.display()))?;
    let mut child = Spawned(child);
    wait_ready(&mut child, http_port, ready_timeout)?;
    Ok(child)
}

/// TLS settings for `address` (`host:port`, or with an `http://` / `https://` scheme).
fn tls_settings(a: &RunArgs, address: &str) -> anyhow::Result<TlsSettings> {
    let bare = address.trim_start_matches("https://").trim_start_matches("http://").trim_end_matches('/');
    let addr = std::net::ToSocketAddrs::to_socket_addrs(bare)
        .with_context(|| format!("--address {address:?}: expected host:port"))?
        .next()
        .with_context(|| format!("--address {address:?}: no address"))?;
    TlsSettings::new(addr, &a.tls_server_name, a.tls_root.as_deref(), a.ca_dir.as_deref())
}

/// The run's description in the JSON summary: `label`, the command line, the commit, `address`,
/// `layout`, then the fields of `extra`.
fn describe(
    label: Option<&str>,
    address: &str,
    layout: &Layout,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut run = serde_json::json!({
        "label": label,
        "command": std::env::args().collect::<Vec<_>>(),
        "git": git_sha(),
        "address": address,
        "layout": layout,
    });
    if let (Some(run), serde_json::Value::Object(extra)) = (run.as_object_mut(), extra) {
        run.extend(extra);
    }
    run
}

fn git_sha() -> Option<String> {
    let out =
        Command::new("git").args(["rev-parse", "--short", "HEAD"]).stderr(Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn cmd_gen(a: &GenArgs) -> anyhow::Result<()> {
    let layout = Layout {
        services: a.services.max(1),
        namespaces: a.namespaces.max(1),
        workloads: a.workloads,
        sidecar_scope: a.sidecar_scope,
        virtual_services: !a.no_virtual_services,
        domain: a.domain.clone(),
    };
    generate::write(&layout, &a.out)?;
    println!(
        "wrote {} services, {} workloads in {} namespaces to {}",
        layout.services,
        layout.workloads,
        layout.namespaces,
        a.out.display()
    );
    Ok(())
}

fn cmd_run(a: &RunArgs) -> anyhow::Result<()> {
    let layout = match &a.config_dir {
        Some(dir) => Layout::read(dir)?,
        None => None,
    }
    .unwrap_or(Layout {
        services: a.services.max(1),
        namespaces: a.namespaces.max(1),
        workloads: a.who.proxies,
        sidecar_scope: a.sidecar_scope,
        ..Layout::default()
    });
    let metadata = parse_metadata(&a.metadata)?;
    if !(0.0..=1.0).contains(&a.nack_rate) {
        anyhow::bail!("--nack-rate {} must be between 0 and 1", a.nack_rate);
    }
    let changer: Option<Box<dyn Changer>> = match a.change {
        ChangeKind::None => None,
        ChangeKind::Command => {
            let command = a.command.as_deref().context("--change command needs --command CMD")?;
            Some(Box::new(CommandChanger::start(command)?))
        }
        kind => {
            let dir =
                a.config_dir.clone().context("--change needs --config-dir (where the change is written)")?;
            let template = match &a.template {
                Some(p) => {
                    Some(std::fs::read_to_string(p).with_context(|| format!("--template {}", p.display()))?)
                }
                None => None,
            };
            Some(Box::new(FileChanger {
                dir,
                kind,
                layout: layout.clone(),
                template,
                template_marker: a.marker.clone().map(|m| (a.marker_type, m)),
                affected_namespace: a.affected_namespace.clone(),
            }))
        }
    };
    let changes = if changer.is_some() { a.changes } else { 0 };

    let secure = a.tls_root.is_some() || a.ca_dir.is_some();
    let mut address = a.address.clone();
    let mut pid = a.process.pid;
    let mut spawned = None;
    let mut tls = None;
    let mut http_address = a.http_address;
    if let Some(bin) = &a.process.meshpilot {
        let dir = a.config_dir.as_ref().context("--meshpilot needs --config-dir")?;
        let port = free_port()?;
        let http_port = free_port()?;
        address = format!("http://127.0.0.1:{port}");
        let mut secure_args = Vec::new();
        if secure {
            let ca_dir = a.ca_dir.as_ref().context("--meshpilot over TLS needs --ca-dir")?;
            let secure_port = free_port()?;
            address = format!("127.0.0.1:{secure_port}");
            // Before the control plane starts: creates the root it will load, when absent.
            tls = Some(tls_settings(a, &address)?);
            secure_args = vec![
                "--secure-grpc-addr".to_string(),
                address.clone(),
                "--ca-dir".to_string(),
                ca_dir.display().to_string(),
            ];
        }
        let extra: Vec<String> =
            secure_args.into_iter().chain(a.process.meshpilot_args.iter().cloned()).collect();
        let child = spawn_meshpilot(
            bin,
            dir,
            (port, http_port),
            &extra,
            a.process.meshpilot_log.as_deref(),
            a.ready_timeout,
        )?;
        pid = Some(child.0.id());
        http_address = Some(std::net::SocketAddr::from(([127, 0, 0, 1], http_port)));
        spawned = Some(child);
    } else if secure {
        tls = Some(tls_settings(a, &address)?);
    }

    let label = describe(
        a.output.label.as_deref(),
        &address,
        &layout,
        serde_json::json!({
            "proxy_type": a.who.proxy_type,
            "protocol": a.protocol,
            "change": a.change,
            "changes": changes,
            "interval_ms": a.interval.map(|d| d.as_millis()),
            "streams_per_conn": a.streams_per_conn,
            "ramp": a.ramp,
            "nack_rate": a.nack_rate,
            "tls": secure,
            "client_certificates": a.ca_dir.is_some(),
            "storm": a.storm,
            "hostile": a.hostile,
            "hostile_kinds": a.hostile_kinds,
            "hostile_names": a.hostile_names,
        }),
    );
    let options = RunOptions {
        address,
        streams: a.who.proxies,
        first_index: a.who.first_index,
        kind: a.who.proxy_type,
        layout,
        stream: StreamOptions {
            protocol: a.protocol,
            nack_rate: a.nack_rate,
            metadata,
            ..StreamOptions::default()
        },
        streams_per_conn: a.streams_per_conn.max(1),
        ramp: a.ramp,
        settle: a.settle,
        ready_timeout: a.ready_timeout,
        hold: a.hold,
        changes,
        interval: a.interval,
        change_timeout: a.change_timeout,
        gap: a.gap,
        pid,
        sample_interval: a.sample_interval,
        label,
        connect_timeout: a.output.connect_timeout,
        storm: a.storm,
        hostile: a.hostile,
        hostile_kinds: a.hostile_kinds.clone(),
        hostile_names: a.hostile_names,
        http_address,
        tls: tls.map(Arc::new),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(a.output.threads.max(1))
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let summary = runtime.block_on(run(&options, changer))?;
    drop(spawned);
    print!("{}", summary.table());
    if let Some(path) = &a.output.json {
        std::fs::write(path, serde_json::to_string_pretty(&summary)?)
            .with_context(|| format!("cannot write --json {}", path.display()))?;
    }
    if let Some(st) = summary.storm.as_ref().filter(|st| st.ready_again < st.streams) {
        anyhow::bail!(
            "{} of {} storm streams never became ready again",
            st.streams - st.ready_again,
            st.streams
        );
    }
    if summary.ready < summary.streams {
        anyhow::bail!(
            "{} of {} streams never became ready",
            summary.streams - summary.ready,
            summary.streams
        );
    }
    Ok(())
}

fn parse_metadata(items: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|m| {
            let (k, v) =
                m.split_once('=').with_context(|| format!("--metadata {m:?}: expected KEY=VALUE"))?;
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

fn cmd_poll(a: &PollArgs) -> anyhow::Result<()> {
    let layout = match &a.config_dir {
        Some(dir) => Layout::read(dir)?,
        None => None,
    }
    .unwrap_or(Layout { workloads: a.who.proxies, ..Layout::default() });
    anyhow::ensure!(!a.types.is_empty(), "--types: at least one type");
    let (mut address, mut pid, mut spawned) = (a.address, a.process.pid, None);
    if let Some(bin) = &a.process.meshpilot {
        let dir = a.config_dir.as_ref().context("--meshpilot needs --config-dir")?;
        let http_port = free_port()?;
        let child = spawn_meshpilot(
            bin,
            dir,
            (free_port()?, http_port),
            &a.process.meshpilot_args,
            a.process.meshpilot_log.as_deref(),
            a.warm_timeout,
        )?;
        pid = Some(child.0.id());
        address = std::net::SocketAddr::from(([127, 0, 0, 1], http_port));
        spawned = Some(child);
    }
    let label = describe(
        a.output.label.as_deref(),
        &address.to_string(),
        &layout,
        serde_json::json!({
            "types": a.types,
            "interval_ms": a.interval.as_millis(),
            "extensions": a.extensions,
        }),
    );
    let options = xds_load::poll::PollOptions {
        address,
        proxies: a.who.proxies,
        first_index: a.who.first_index,
        kind: a.who.proxy_type,
        layout,
        types: a.types.clone(),
        interval: a.interval,
        extensions: a.extensions,
        metadata: parse_metadata(&a.metadata)?,
        istio_version: StreamOptions::default().istio_version,
        warm_timeout: a.warm_timeout,
        duration: a.duration,
        pid,
        connect_timeout: a.output.connect_timeout,
        label,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(a.output.threads.max(1))
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let summary = runtime.block_on(xds_load::poll::run_pollers(options));
    drop(spawned);
    let summary = summary?;
    print!("{}", summary.table());
    if let Some(path) = &a.output.json {
        std::fs::write(path, serde_json::to_string_pretty(&summary)?)
            .with_context(|| format!("cannot write --json {}", path.display()))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Cmd::Gen(a) => cmd_gen(a),
        Cmd::Run(a) => cmd_run(a),
        Cmd::Poll(a) => cmd_poll(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("soon").unwrap_err().contains("e.g. 100ms"));
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
