//! A load run: open the streams (ramped), wait until they are ready, apply the changes, sample the
//! control plane, stop, summarise.
//!
//! ```text
//!  change 0 (initial state) ─ settle ─ ramp N streams ─ all ready? ─ hold ─ change 1 … n ─ stop
//!  sampler: /proc/<pid> every --sample-interval, from the start to the end
//! ```
//!
//! Sequential changes (no `interval`): each change waits until every affected stream converged (or
//! `change_timeout`), then `gap`. With an `interval`, changes are applied at that rate regardless
//! (churn), and the run waits for the last one at the end.
//!
//! A storm (`storm` > 0): after `hold`, the last `storm` streams drop their streams and connections
//! and reconnect at once (new connections, retried with jittered backoff when refused), and change 1
//! is applied at the same moment; only the streams that stayed connected count as affected, so the
//! changes measure pushes to them during the storm. The run then waits until every storm stream is
//! ready again (`ready_timeout`), holds, and reports the storm ([`crate::report::StormSummary`]).
//! The streams that stay run on a runtime of their own (one thread): real proxies are separate
//! processes, and in one runtime the measured streams' responses waited behind the decoding of the
//! 10,000 reconnecting streams' configs (the load tool's own CPU, not the control plane's delay).

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use tonic::transport::Endpoint;

use crate::{
    change::Changer,
    client::{self, Shared, StreamOptions, StreamSpec},
    layout::{Layout, ProxyType},
    procfs::{self, Sample},
    report::Summary,
    tls::TlsSettings,
};

/// What to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The control plane's ADS address (`http://127.0.0.1:15010`).
    pub address: String,
    /// Streams to open.
    pub streams: u32,
    /// Index of the first stream in the layout (to split proxies over several xds-load processes).
    pub first_index: u32,
    /// Sidecars or routers.
    pub kind: ProxyType,
    /// The synthetic mesh the identities come from.
    pub layout: Layout,
    /// Stream behaviour.
    pub stream: StreamOptions,
    /// Streams sharing one HTTP/2 connection (1 = one connection per stream, as Envoy).
    pub streams_per_conn: u32,
    /// New streams per second (0 = all at once).
    pub ramp: f64,
    /// Wait after change 0 before connecting.
    pub settle: Duration,
    /// Longest wait for all streams to be ready.
    pub ready_timeout: Duration,
    /// Wait after all are ready, before the first change (RSS settles).
    pub hold: Duration,
    /// Changes to apply (1 … n).
    pub changes: u64,
    /// Apply changes at this interval instead of one after the other.
    pub interval: Option<Duration>,
    /// Longest wait for a change to converge on all affected streams.
    pub change_timeout: Duration,
    /// Pause between a converged change and the next.
    pub gap: Duration,
    /// Control-plane process to sample.
    pub pid: Option<u32>,
    /// Sampling period.
    pub sample_interval: Duration,
    /// Recorded as `run` in the summary.
    pub label: serde_json::Value,
    /// TCP connect timeout of each connection.
    pub connect_timeout: Duration,
    /// Streams (the last ones) that reconnect at once after `hold` (0: no storm).
    pub storm: u32,
    /// Hostile connections opened after `hold`, kept until the end ([`crate::hostile`]; 0: none).
    pub hostile: u32,
    /// The control plane's HTTP debug port, for the `http-slowloris` hostile kind.
    pub http_address: Option<std::net::SocketAddr>,
    /// The hostile kinds to open, round robin (empty: all).
    pub hostile_kinds: Vec<crate::hostile::Kind>,
    /// EDS names each name-watching hostile stream asks for (0: none).
    pub hostile_names: usize,
    /// Connect over TLS (a secure port: `address` is then dialled by the TLS settings' target).
    pub tls: Option<Arc<TlsSettings>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            address: "http://127.0.0.1:15010".into(),
            streams: 10,
            first_index: 0,
            kind: ProxyType::Sidecar,
            layout: Layout::default(),
            stream: StreamOptions::default(),
            streams_per_conn: 1,
            ramp: 0.0,
            settle: Duration::from_millis(500),
            ready_timeout: Duration::from_secs(120),
            hold: Duration::from_secs(1),
            changes: 0,
            interval: None,
            change_timeout: Duration::from_secs(30),
            gap: Duration::from_millis(500),
            pid: None,
            sample_interval: Duration::from_secs(1),
            label: serde_json::Value::Null,
            connect_timeout: Duration::from_secs(30),
            storm: 0,
            hostile: 0,
            http_address: None,
            hostile_kinds: Vec::new(),
            hostile_names: 20_000,
            tls: None,
        }
    }
}

/// The control plane's RSS now (0 without a pid).
fn procfs_rss(pid: Option<u32>, origin: Instant) -> u64 {
    pid.and_then(|pid| procfs::read(pid, origin.elapsed())).map_or(0, |s| s.rss)
}

async fn wait_until(deadline: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A runtime started from inside another one: dropped without blocking (dropping a runtime from
/// async code panics), after its tasks were awaited or when the run fails.
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl OwnRuntime {
    fn handle(&self) -> tokio::runtime::Handle {
        self.0.as_ref().expect("present until dropped").handle().clone()
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs the load and returns its summary. `changer` is required when `options.changes > 0`.
///
/// # Errors
/// A bad address, or a change that cannot be applied.
pub async fn run(options: &RunOptions, mut changer: Option<Box<dyn Changer>>) -> anyhow::Result<Summary> {
    let shared = Arc::new(Shared::default());
    let origin = shared.origin;
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = options.pid.map(|pid| {
        let (samples, sampling, every) = (samples.clone(), sampling.clone(), options.sample_interval);
        tokio::spawn(async move {
            while sampling.load(Ordering::SeqCst) {
                if let Some(s) = procfs::read(pid, origin.elapsed()) {
                    samples.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                }
                tokio::time::sleep(every).await;
            }
        })
    });
    let sample_now = || {
        if let Some(s) = options.pid.and_then(|pid| procfs::read(pid, origin.elapsed())) {
            samples.lock().unwrap_or_else(|p| p.into_inner()).push(s);
        }
    };

    if options.changes > 0 && changer.is_none() {
        anyhow::bail!("{} changes asked but no change kind given", options.changes);
    }
    if let Some(c) = changer.as_mut() {
        c.apply(0).context("initial change (seq 0)")?;
        tokio::time::sleep(options.settle).await;
    }

    let address = match &options.tls {
        Some(tls) => format!("http://{}", tls.target.addr),
        None => options.address.clone(),
    };
    let endpoint = Endpoint::from_shared(address.clone())
        .with_context(|| format!("bad address {address:?}"))?
        .tcp_nodelay(true)
        .connect_timeout(options.connect_timeout)
        .initial_stream_window_size(Some(8 << 20))
        .initial_connection_window_size(Some(32 << 20));
    let storm_from = options.streams.saturating_sub(options.storm);
    let specs: Vec<StreamSpec> = (0..options.streams)
        .map(|k| {
            let index = options.first_index + k;
            let identity = options.layout.proxy(options.kind, index);
            let storm = k >= storm_from;
            // In a storm, the changes measure the streams that stay connected.
            let affected = !storm && changer.as_ref().is_some_and(|c| c.affects(&identity, options.kind));
            StreamSpec { index, kind: options.kind, identity, affected, storm }
        })
        .collect();
    // Storm streams reconnect on new plaintext connections (over TLS: a new stream on the same one).
    let storm_endpoint = (options.storm > 0 && options.tls.is_none()).then(|| endpoint.clone());
    // Client certificates are made before the measured part (a real agent has its certificate
    // before it opens the ADS stream).
    let connectors = match &options.tls {
        Some(tls) => tls.connectors(specs.iter().map(|s| &s.identity))?,
        None => Default::default(),
    };
    sample_now();
    let connect_start = origin.elapsed();
    let affected = specs.iter().filter(|s| s.affected).count();
    let mut tasks = Vec::with_capacity(specs.len());
    let stayed_runtime = if options.storm > 0 {
        Some(OwnRuntime(Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("xds-load-stayed")
                .enable_all()
                .build()
                .context("cannot start the runtime of the streams that stay")?,
        )))
    } else {
        None
    };
    let ramp_start = Instant::now();
    let mut channel = None;
    for (k, spec) in specs.into_iter().enumerate() {
        // Channels and tasks of a stream that stays are made inside its runtime, so its connection
        // is driven there too.
        let runtime = stayed_runtime.as_ref().filter(|_| !spec.storm).map(OwnRuntime::handle);
        let _entered = runtime.as_ref().map(|h| h.enter());
        if options.ramp > 0.0 {
            let at = ramp_start + Duration::from_secs_f64(k as f64 / options.ramp);
            tokio::time::sleep_until(at.into()).await;
        }
        if (k as u32).is_multiple_of(options.streams_per_conn.max(1)) {
            // With TLS, the connection presents the certificate of its first stream's workload
            // (streams sharing a connection should be of one namespace for the identity check).
            channel = Some(
                match connectors
                    .get(&(spec.identity.namespace.clone(), spec.identity.service_account.clone()))
                {
                    Some(connector) => endpoint.connect_with_connector_lazy(connector.clone()),
                    None => endpoint.connect_lazy(),
                },
            );
        }
        let ch = channel.clone().expect("set on the first stream");
        let stream = client::run(ch, storm_endpoint.clone(), spec, options.stream.clone(), shared.clone());
        tasks.push(match &runtime {
            Some(handle) => handle.spawn(stream),
            None => tokio::spawn(stream),
        });
    }
    let total = tasks.len();
    wait_until(options.ready_timeout, || shared.ready() >= total).await;
    let ready_at = origin.elapsed();
    sample_now();
    tokio::time::sleep(options.hold).await;
    sample_now();

    let hostile = if options.hostile > 0 {
        let grpc = address
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .with_context(|| format!("--hostile needs an IP:port address, not {address:?}"))?;
        let before = procfs_rss(options.pid, origin);
        let h = crate::hostile::Hostile::open(
            options.hostile,
            grpc,
            options.http_address,
            &options.hostile_kinds,
            options.hostile_names,
        );
        wait_until(options.ready_timeout, || h.opened() >= options.hostile as usize).await;
        tokio::time::sleep(options.hold).await;
        sample_now();
        Some((h, before, procfs_rss(options.pid, origin)))
    } else {
        None
    };
    let changes_start = origin.elapsed();
    let storm_start = (options.storm > 0).then(|| {
        shared.storm();
        origin.elapsed()
    });
    if let Some(c) = changer.as_mut() {
        let mut next = Instant::now();
        for seq in 1..=options.changes {
            // Announced before it is applied: a response carrying the marker can then never arrive
            // unrecognised (the harness may be descheduled right after writing the change).
            let marker = c.marker(seq).with_context(|| format!("change {seq}"))?;
            let t0 = Instant::now();
            shared.announce(seq, marker, t0);
            c.apply(seq).with_context(|| format!("change {seq}"))?;
            match options.interval {
                Some(every) => {
                    next += every;
                    tokio::time::sleep_until(next.into()).await;
                }
                None => {
                    wait_until(options.change_timeout, || shared.converged(seq) >= affected).await;
                    tokio::time::sleep(options.gap).await;
                }
            }
        }
        if options.interval.is_some() && options.changes > 0 {
            let last = options.changes;
            wait_until(options.change_timeout, || shared.converged(last) >= affected).await;
        }
    }
    let changes_end = origin.elapsed();
    sample_now();
    let storm_end = match storm_start {
        Some(start) => {
            let stormed = options.storm.min(options.streams) as usize;
            wait_until(options.ready_timeout, || shared.storm_ready() >= stormed).await;
            let end = origin.elapsed();
            sample_now();
            tokio::time::sleep(options.hold).await;
            sample_now();
            Some((start, end, origin.elapsed()))
        }
        None => None,
    };

    let hostile = match hostile {
        Some((h, before, opened)) => {
            let after = procfs_rss(options.pid, origin);
            Some(crate::report::HostileSummary {
                connections: options.hostile,
                rss_before: before,
                rss_opened: opened,
                rss_after_changes: after,
                kinds: h.finish().await,
            })
        }
        None => None,
    };
    shared.stop();
    let mut reports = Vec::with_capacity(total);
    for t in tasks {
        reports.push(t.await.context("stream task panicked")?);
    }
    sampling.store(false, Ordering::SeqCst);
    if let Some(s) = sampler {
        s.abort();
    }
    let mut summary = Summary::new(options.label.clone(), &reports, options.changes);
    summary.hostile = hostile;
    summary.client_cpu_seconds =
        procfs::read(std::process::id(), origin.elapsed()).map_or(0.0, |s| s.cpu_seconds);
    let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(|p| p.into_inner()));
    if let Some((start, end, settled)) = storm_end {
        summary.storm(&reports, shared.rate_limited(), &samples, (start, end, settled));
    }
    if let Some(pid) = options.pid {
        summary.control_plane(pid, samples, connect_start, ready_at, (changes_start, changes_end));
    }
    Ok(summary)
}
