//! REST-JSON pollers (Envoy's `api_config_source: {api_type: REST}`): N simulated proxies, each
//! posting a JSON `DiscoveryRequest` per type (`/v3/discovery:clusters`, `:listeners`, …) every
//! `interval` on its own keep-alive HTTP/1.1 connection, as Envoy's REST client does
//! (`rest_api_fetcher.cc`: one request per subscription and refresh, the whole node each time, the
//! last accepted `versionInfo` carried so an unchanged poll is `304`).
//!
//! ```text
//!  connect N ─ first poll of each type (200) ─ all warm? ─ measure `duration`: polls, 200/304/other,
//!  bytes up/down, latency, control-plane CPU and RSS (/proc) ─ stop
//! ```
//!
//! The node is the same identity as an ADS stream of the layout ([`crate::client::node`]'s
//! metadata) plus `extensions` entries like Envoy's node (Envoy 1.40 sends ≈ 300, ≈ 48 KB of JSON):
//! what a real poll costs to read.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use serde::Serialize;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::TcpStream,
};

use crate::{
    layout::{Layout, ProxyIdentity, ProxyType},
    procfs::{self, Sample},
    report::{Distribution, distribution},
    xds::XdsType,
};

/// What to run.
#[derive(Clone, Debug)]
pub struct PollOptions {
    /// The control plane's HTTP address (REST-JSON paths).
    pub address: SocketAddr,
    /// Pollers (simulated proxies).
    pub proxies: u32,
    /// Layout index of the first poller.
    pub first_index: u32,
    /// Sidecars or routers.
    pub kind: ProxyType,
    /// Node identities.
    pub layout: Layout,
    /// Types polled each round, in order. With `cds`, `eds` is polled per EDS cluster the CDS
    /// answer names (one poll per name, as Envoy's REST client); with `lds`, `rds` per route
    /// configuration; without them, `eds` and `rds` are wildcard polls.
    pub types: Vec<XdsType>,
    /// Envoy's `refresh_delay`: one round per poller per interval.
    pub interval: Duration,
    /// Entries in the node's `extensions` list.
    pub extensions: usize,
    /// Extra node metadata (string values).
    pub metadata: Vec<(String, String)>,
    /// `ISTIO_VERSION` metadata.
    pub istio_version: String,
    /// Longest wait for every poller's first `200` of every type.
    pub warm_timeout: Duration,
    /// The measured window, after all are warm.
    pub duration: Duration,
    /// Control-plane process to sample.
    pub pid: Option<u32>,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Free-form run description (the command line …) for the JSON.
    pub label: serde_json::Value,
}

/// Counts over the pollers.
#[derive(Debug, Default)]
struct Counters {
    ok: AtomicU64,
    not_modified: AtomicU64,
    other: AtomicU64,
    failed: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    warm: AtomicUsize,
}

impl Counters {
    fn snapshot(&self) -> Counts {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Counts {
            ok: g(&self.ok),
            not_modified: g(&self.not_modified),
            other: g(&self.other),
            failed: g(&self.failed),
            bytes_up: g(&self.bytes_up),
            bytes_down: g(&self.bytes_down),
        }
    }
}

/// Poll counts and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// `200` answers.
    pub ok: u64,
    /// `304` answers.
    pub not_modified: u64,
    /// Other statuses (`503` over the concurrency bound, `4xx`).
    pub other: u64,
    /// Polls that got no answer (connection error, timeout).
    pub failed: u64,
    /// Request bytes (head and body).
    pub bytes_up: u64,
    /// Response bytes (head and body).
    pub bytes_down: u64,
}

impl Counts {
    fn minus(self, o: Counts) -> Counts {
        Counts {
            ok: self.ok - o.ok,
            not_modified: self.not_modified - o.not_modified,
            other: self.other - o.other,
            failed: self.failed - o.failed,
            bytes_up: self.bytes_up - o.bytes_up,
            bytes_down: self.bytes_down - o.bytes_down,
        }
    }

    /// All polls answered or failed.
    pub fn polls(&self) -> u64 {
        self.ok + self.not_modified + self.other + self.failed
    }
}

/// The result of a poll run.
#[derive(Clone, Debug, Serialize)]
pub struct PollSummary {
    /// The run's description.
    pub run: serde_json::Value,
    /// Pollers started.
    pub pollers: u32,
    /// Pollers that got a `200` of every type.
    pub warm: usize,
    /// Time from the start to all warm.
    pub warm_seconds: f64,
    /// Bytes of one poller's first request (the node size as sent).
    pub request_bytes: usize,
    /// Counts until all were warm.
    pub warmup: Counts,
    /// Counts in the measured window.
    pub window: Counts,
    /// The measured window, seconds.
    pub window_seconds: f64,
    /// Poll latency (request written → answer read) in the window.
    pub latency: Distribution,
    /// Control-plane CPU seconds until all warm.
    pub cpu_seconds_warmup: f64,
    /// Control-plane CPU seconds in the window.
    pub cpu_seconds_window: f64,
    /// Control-plane RSS at the start, bytes.
    pub rss_before: u64,
    /// Control-plane RSS at the end of the window, bytes.
    pub rss_after: u64,
    /// Control-plane peak RSS (`VmHWM`), bytes.
    pub peak_rss: u64,
}

impl PollSummary {
    /// The human table.
    pub fn table(&self) -> String {
        let w = &self.window;
        let secs = self.window_seconds.max(1e-9);
        let mb = |b: u64| b as f64 / 1e6;
        format!(
            "pollers {} (warm {}) in {:.1} s; request {} bytes\n\
             warm-up: 200 {} 304 {} other {} failed {}; CPU {:.2} s\n\
             window {:.1} s: polls {} ({:.0}/s) 200 {} 304 {} other {} failed {}\n  \
             up {:.1} MB ({:.2} MB/s) down {:.1} MB ({:.2} MB/s)\n  \
             latency p50 {:.2} ms p99 {:.2} ms max {:.2} ms\n  \
             control plane CPU {:.2} s ({:.2} cores); RSS {:.1} → {:.1} MB (peak {:.1} MB)\n",
            self.pollers,
            self.warm,
            self.warm_seconds,
            self.request_bytes,
            self.warmup.ok,
            self.warmup.not_modified,
            self.warmup.other,
            self.warmup.failed,
            self.cpu_seconds_warmup,
            self.window_seconds,
            w.polls(),
            w.polls() as f64 / secs,
            w.ok,
            w.not_modified,
            w.other,
            w.failed,
            mb(w.bytes_up),
            mb(w.bytes_up) / secs,
            mb(w.bytes_down),
            mb(w.bytes_down) / secs,
            self.latency.p50_ms,
            self.latency.p99_ms,
            self.latency.max_ms,
            self.cpu_seconds_window,
            self.cpu_seconds_window / secs,
            mb(self.rss_before),
            mb(self.rss_after),
            mb(self.peak_rss),
        )
    }
}

/// The node of `identity` as Envoy's REST client writes it (proto3 JSON), with `extensions` entries.
pub fn node_json(identity: &ProxyIdentity, options: &PollOptions) -> serde_json::Value {
    let mut metadata = serde_json::json!({
        "NAMESPACE": identity.namespace, "INSTANCE_IPS": identity.ip, "WORKLOAD_NAME": identity.workload,
        "SERVICE_ACCOUNT": identity.service_account, "CLUSTER_ID": "Kubernetes", "MESH_ID": "cluster.local",
        "ISTIO_VERSION": options.istio_version,
        "LABELS": identity
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect::<serde_json::Map<String, serde_json::Value>>(),
    });
    for (k, v) in &options.metadata {
        metadata[k] = serde_json::Value::String(v.clone());
    }
    let extensions: Vec<serde_json::Value> = (0..options.extensions)
        .map(|i| {
            serde_json::json!({
                "name": format!("envoy.extension.number_{i}"),
                "category": format!("envoy.category_{}", i % 40),
                "typeUrls": [format!("type.googleapis.com/envoy.extensions.sample.v3.Config{i}")]
            })
        })
        .collect();
    serde_json::json!({
        "id": identity.node_id,
        "cluster": format!("{}.{}", identity.workload, identity.namespace),
        "metadata": metadata,
        "userAgentName": "envoy",
        "userAgentBuildVersion": {"version": {"majorNumber": 1, "minorNumber": 40}},
        "extensions": extensions,
    })
}

/// The path a type is polled on.
pub fn path(kind: XdsType) -> &'static str {
    match kind {
        XdsType::Cluster => "/v3/discovery:clusters",
        XdsType::Endpoint => "/v3/discovery:endpoints",
        XdsType::Listener => "/v3/discovery:listeners",
        XdsType::Route => "/v3/discovery:routes",
    }
}

/// One `DiscoveryRequest` body: `versionInfo`, the node (already JSON), `typeUrl`.
pub fn request_body(version: &str, node: &str, kind: XdsType) -> Vec<u8> {
    named_request_body(version, node, kind, None)
}

/// [`request_body`] for one named resource (`resourceNames: [name]`), as Envoy's REST client polls
/// each EDS cluster and each RDS route configuration: one subscription, and one poll, per name.
pub fn named_request_body(version: &str, node: &str, kind: XdsType, name: Option<&str>) -> Vec<u8> {
    let version = serde_json::Value::String(version.to_string());
    let names = match name {
        Some(n) => format!(r#","resourceNames":[{}]"#, serde_json::Value::String(n.to_string())),
        None => String::new(),
    };
    format!(r#"{{"versionInfo":{version},"node":{node},"typeUrl":"{}"{names}}}"#, kind.url()).into_bytes()
}

/// The names a `200` of `kind` makes Envoy subscribe to over REST: for CDS the EDS clusters'
/// `edsClusterConfig.serviceName` (else the cluster's name), for LDS every `rds.routeConfigName`;
/// nothing for the other types. Sorted, without repeats.
pub fn dependent_names(kind: XdsType, body: &[u8]) -> Vec<String> {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else { return Vec::new() };
    let mut names = std::collections::BTreeSet::new();
    let resources = v["resources"].as_array().into_iter().flatten();
    match kind {
        XdsType::Cluster => {
            for c in resources.filter(|c| c.get("edsClusterConfig").is_some()) {
                let service = c["edsClusterConfig"]["serviceName"].as_str().filter(|s| !s.is_empty());
                if let Some(name) = service.or(c["name"].as_str()) {
                    names.insert(name.to_string());
                }
            }
        }
        XdsType::Listener => {
            fn walk(v: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
                match v {
                    serde_json::Value::Object(m) => {
                        if let Some(serde_json::Value::String(n)) = m.get("routeConfigName") {
                            out.insert(n.clone());
                        }
                        m.values().for_each(|v| walk(v, out));
                    }
                    serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
                    _ => {}
                }
            }
            resources.for_each(|l| walk(l, &mut names));
        }
        XdsType::Endpoint | XdsType::Route => {}
    }
    names.into_iter().collect()
}

/// One REST subscription of a poller: a type, one name or the wildcard, the version it holds.
struct Subscription {
    kind: XdsType,
    name: Option<String>,
    version: String,
}

/// The subscriptions `types` start with: the wildcard ones (CDS, LDS; EDS and RDS only when polled
/// without the type that names them).
fn initial_subscriptions(types: &[XdsType]) -> Vec<Subscription> {
    types
        .iter()
        .filter(|&&k| match k {
            XdsType::Endpoint => !types.contains(&XdsType::Cluster),
            XdsType::Route => !types.contains(&XdsType::Listener),
            _ => true,
        })
        .map(|&kind| Subscription { kind, name: None, version: String::new() })
        .collect()
}

/// The type a `200` of `kind` names resources of, when it is polled.
fn dependent_kind(kind: XdsType, types: &[XdsType]) -> Option<XdsType> {
    let dependent = match kind {
        XdsType::Cluster => XdsType::Endpoint,
        XdsType::Listener => XdsType::Route,
        _ => return None,
    };
    types.contains(&dependent).then_some(dependent)
}

/// `subs` with the named subscriptions of `kind` set to `names` (versions of kept ones kept).
fn resubscribe(subs: &mut Vec<Subscription>, kind: XdsType, names: Vec<String>) {
    let mut held: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    subs.retain_mut(|s| match (&s.name, s.kind == kind) {
        (Some(n), true) => {
            held.insert(n.clone(), std::mem::take(&mut s.version));
            false
        }
        _ => true,
    });
    for name in names {
        let version = held.remove(&name).unwrap_or_default();
        subs.push(Subscription { kind, name: Some(name), version });
    }
}

/// An answer: status, bytes read, and for a `200` its `versionInfo`.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Bytes read (head and body).
    pub bytes: usize,
    /// `versionInfo` of a `200`.
    pub version: Option<String>,
    /// The body of a `200`.
    pub body: Vec<u8>,
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    io: BufReader<TcpStream>,
}

impl Conn {
    async fn connect(addr: SocketAddr, timeout: Duration) -> anyhow::Result<Conn> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .with_context(|| format!("connect to {addr} timed out"))??;
        stream.set_nodelay(true)?;
        Ok(Conn { io: BufReader::new(stream) })
    }

    /// Posts `body` to `path` with `Host: xds-grpc` (Envoy sends the cluster name); (answer, bytes sent).
    async fn post(&mut self, path: &str, body: &[u8]) -> anyhow::Result<(Answer, usize)> {
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: xds-grpc\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let stream = self.io.get_mut();
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        let mut read = 0;
        let mut line = String::new();
        read += self.io.read_line(&mut line).await?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("not an HTTP status line: {line:?}"))?;
        let mut length = 0usize;
        loop {
            line.clear();
            let n = self.io.read_line(&mut line).await?;
            anyhow::ensure!(n > 0, "connection closed in the response head");
            read += n;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().context("content-length")?;
            }
        }
        let mut response = vec![0; length];
        self.io.read_exact(&mut response).await?;
        read += length;
        let version = (status == 200).then(|| response_version(&response)).flatten();
        Ok((Answer { status, bytes: read, version, body: response }, head.len() + body.len()))
    }
}

/// The `versionInfo` of a JSON `DiscoveryResponse`.
pub fn response_version(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "versionInfo")]
        version_info: String,
    }
    serde_json::from_slice::<Head>(body).ok().map(|h| h.version_info)
}

/// One poller: a round of `types` every `interval` (the first after a random part of it, as Envoy's
/// jitter spreads them), the versions carried; latencies of polls made while `measuring` go to
/// `latencies` as they are taken (the poller is aborted at the end, mid-sleep).
async fn poller(
    index: u32,
    options: Arc<PollOptions>,
    counters: Arc<Counters>,
    measuring: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    latencies: Arc<std::sync::Mutex<Vec<Duration>>>,
) {
    let identity = options.layout.proxy(options.kind, index);
    let node = node_json(&identity, &options).to_string();
    let mut subs = initial_subscriptions(&options.types);
    let mut warm = false;
    let mut conn: Option<Conn> = None;
    let offset = options.interval.mul_f64(f64::from(index % 1000) / 1000.0);
    let mut next = tokio::time::Instant::now() + offset;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep_until(next).await;
        next += options.interval;
        let mut i = 0;
        while i < subs.len() {
            if conn.is_none() {
                conn = Conn::connect(options.address, options.connect_timeout).await.ok();
            }
            let Some(c) = conn.as_mut() else {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                i += 1;
                continue;
            };
            let (kind, name) = (subs[i].kind, subs[i].name.clone());
            let body = named_request_body(&subs[i].version, &node, kind, name.as_deref());
            let started = Instant::now();
            match c.post(path(kind), &body).await {
                Ok((answer, sent)) => {
                    if measuring.load(Ordering::Relaxed) {
                        latencies
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(started.elapsed());
                    }
                    counters.bytes_up.fetch_add(sent as u64, Ordering::Relaxed);
                    counters.bytes_down.fetch_add(answer.bytes as u64, Ordering::Relaxed);
                    let counter = match answer.status {
                        200 => &counters.ok,
                        304 => &counters.not_modified,
                        _ => &counters.other,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    if let Some(v) = answer.version {
                        subs[i].version = v;
                        // New EDS clusters / route configurations: polled from this round on.
                        if let Some(dependent) = dependent_kind(kind, &options.types) {
                            resubscribe(&mut subs, dependent, dependent_names(kind, &answer.body));
                        }
                    }
                }
                Err(_) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    conn = None;
                }
            }
            i += 1;
        }
        // Dependent subscriptions are made, and polled, in the round their parent's 200 names them.
        if !warm && subs.iter().all(|s| !s.version.is_empty()) {
            warm = true;
            counters.warm.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Runs the pollers and measures.
///
/// # Errors
/// Not all pollers warm within `warm_timeout`.
pub async fn run_pollers(options: PollOptions) -> anyhow::Result<PollSummary> {
    let options = Arc::new(options);
    let counters = Arc::new(Counters::default());
    let (measuring, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let origin = Instant::now();
    let sample = |pid: Option<u32>| pid.and_then(|p| procfs::read(p, origin.elapsed()));
    let before = sample(options.pid);
    let identity = options.layout.proxy(options.kind, options.first_index);
    let request_bytes = request_body("", &node_json(&identity, &options).to_string(), options.types[0]).len();
    let latencies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..options.proxies)
        .map(|i| {
            tokio::spawn(poller(
                options.first_index + i,
                Arc::clone(&options),
                Arc::clone(&counters),
                Arc::clone(&measuring),
                Arc::clone(&stop),
                Arc::clone(&latencies),
            ))
        })
        .collect();
    let deadline = Instant::now() + options.warm_timeout;
    while counters.warm.load(Ordering::Relaxed) < options.proxies as usize && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let warm = counters.warm.load(Ordering::Relaxed);
    let warm_seconds = origin.elapsed().as_secs_f64();
    let warmup = counters.snapshot();
    let at_warm = sample(options.pid);
    measuring.store(true, Ordering::Relaxed);
    let window_start = Instant::now();
    if warm == options.proxies as usize {
        tokio::time::sleep(options.duration).await;
    }
    let window = counters.snapshot().minus(warmup);
    let window_seconds = window_start.elapsed().as_secs_f64();
    let at_end = sample(options.pid);
    stop.store(true, Ordering::Relaxed);
    measuring.store(false, Ordering::Relaxed);
    for t in tasks {
        // A poller sleeping until its next round is not waited for.
        t.abort();
        let _ = t.await;
    }
    let latencies = std::mem::take(&mut *latencies.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let cpu = |a: Option<Sample>, b: Option<Sample>| match (a, b) {
        (Some(a), Some(b)) => (b.cpu_seconds - a.cpu_seconds).max(0.0),
        _ => 0.0,
    };
    let summary = PollSummary {
        run: options.label.clone(),
        pollers: options.proxies,
        warm,
        warm_seconds,
        request_bytes,
        warmup,
        window,
        window_seconds,
        latency: distribution(latencies),
        cpu_seconds_warmup: cpu(before, at_warm),
        cpu_seconds_window: cpu(at_warm, at_end),
        rss_before: before.map_or(0, |s| s.rss),
        rss_after: at_end.map_or(0, |s| s.rss),
        peak_rss: at_end.map_or(0, |s| s.peak_rss),
    };
    anyhow::ensure!(
        warm == options.proxies as usize,
        "{} of {} pollers never got every type within {:?}\n{}",
        options.proxies as usize - warm,
        options.proxies,
        options.warm_timeout,
        summary.table()
    );
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(extensions: usize) -> PollOptions {
        PollOptions {
            address: ([127, 0, 0, 1], 1).into(),
            proxies: 1,
            first_index: 0,
            kind: ProxyType::Sidecar,
            layout: Layout::default(),
            types: vec![XdsType::Cluster],
            interval: Duration::from_secs(1),
            extensions,
            metadata: vec![("K".into(), "v".into())],
            istio_version: "1.28.0".into(),
            warm_timeout: Duration::from_secs(1),
            duration: Duration::from_secs(1),
            pid: None,
            connect_timeout: Duration::from_secs(1),
            label: serde_json::Value::Null,
        }
    }

    #[test]
    fn the_request_carries_the_node_version_and_type() {
        let layout = Layout::default();
        let identity = layout.proxy(ProxyType::Sidecar, 3);
        let node = node_json(&identity, &options(300));
        let body = request_body("v\"1", &node.to_string(), XdsType::Listener);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["versionInfo"], "v\"1");
        assert_eq!(v["typeUrl"], XdsType::Listener.url());
        assert_eq!(v["node"]["id"], identity.node_id.as_str());
        assert_eq!(v["node"]["metadata"]["NAMESPACE"], identity.namespace.as_str());
        assert_eq!(v["node"]["metadata"]["LABELS"]["app"], "svc-3");
        assert_eq!(v["node"]["metadata"]["K"], "v");
        assert_eq!(v["node"]["extensions"].as_array().unwrap().len(), 300);
        // About the size of Envoy 1.40's node.
        assert!((30_000..80_000).contains(&body.len()), "{}", body.len());
    }

    #[test]
    fn cds_and_lds_answers_name_the_eds_and_rds_subscriptions() {
        let cds = br#"{"versionInfo":"1","resources":[
            {"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"outbound|80||a.ns.svc.cluster.local",
             "type":"EDS","edsClusterConfig":{"edsConfig":{"ads":{}},"serviceName":"outbound|80||a.ns.svc.cluster.local"}},
            {"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"BlackHoleCluster","type":"STATIC"},
            {"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"plain","edsClusterConfig":{}}]}"#;
        assert_eq!(
            dependent_names(XdsType::Cluster, cds),
            ["outbound|80||a.ns.svc.cluster.local", "plain"].map(String::from)
        );
        let lds = br#"{"versionInfo":"1","resources":[{"name":"0.0.0.0_80","filterChains":[{"filters":[
            {"typedConfig":{"rds":{"routeConfigName":"80"}}},{"typedConfig":{"rds":{"routeConfigName":"80"}}}]},
            {"filters":[{"typedConfig":{"rds":{"routeConfigName":"9080"}}}]}]}]}"#;
        assert_eq!(dependent_names(XdsType::Listener, lds), ["80", "9080"].map(String::from));
        assert!(dependent_names(XdsType::Route, lds).is_empty());
        let body = named_request_body("", "{}", XdsType::Route, Some("80"));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["resourceNames"], serde_json::json!(["80"]));
    }

    #[test]
    fn resubscribing_keeps_held_versions_and_drops_gone_names() {
        let mut subs = initial_subscriptions(&[XdsType::Cluster, XdsType::Endpoint, XdsType::Listener]);
        assert_eq!(subs.iter().map(|s| s.kind).collect::<Vec<_>>(), [XdsType::Cluster, XdsType::Listener]);
        resubscribe(&mut subs, XdsType::Endpoint, vec!["a".into(), "b".into()]);
        subs[2].version = "v-a".into();
        resubscribe(&mut subs, XdsType::Endpoint, vec!["a".into(), "c".into()]);
        let named: Vec<_> = subs.iter().filter_map(|s| Some((s.name.clone()?, s.version.clone()))).collect();
        assert_eq!(named, [("a".into(), "v-a".into()), ("c".into(), String::new())]);
        // Without CDS, EDS is one wildcard subscription.
        let subs = initial_subscriptions(&[XdsType::Endpoint]);
        assert!(subs.len() == 1 && subs[0].name.is_none());
    }

    #[test]
    fn the_version_of_a_response_is_read() {
        assert_eq!(response_version(br#"{"versionInfo":"7/2","resources":[]}"#).as_deref(), Some("7/2"));
        assert_eq!(response_version(b"not json"), None);
    }

    #[tokio::test]
    async fn a_poller_carries_the_version_so_the_next_poll_is_304() {
        // A stand-in REST server: 200 with version "v1" unless the request carries it, then 304.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut io = BufReader::new(stream);
            loop {
                let mut length = 0;
                let mut line = String::new();
                loop {
                    line.clear();
                    if io.read_line(&mut line).await.unwrap() == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                io.read_exact(&mut body).await.unwrap();
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let reply = if v["versionInfo"] == "v1" {
                    "HTTP/1.1 304 Not Modified\r\ncontent-length: 0\r\n\r\n".to_string()
                } else {
                    let b = r#"{"versionInfo":"v1","resources":[]}"#;
                    format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{b}", b.len())
                };
                io.get_mut().write_all(reply.as_bytes()).await.unwrap();
            }
        });
        let options = PollOptions {
            address: addr,
            interval: Duration::from_millis(50),
            duration: Duration::from_secs(1),
            ..options(2)
        };
        let summary = run_pollers(options).await.unwrap();
        assert_eq!((summary.warm, summary.warmup.ok), (1, 1));
        assert!(summary.window.not_modified >= 1, "{summary:?}");
        // Every poll of the window is timed, though the pollers are aborted mid-sleep at the end.
        assert!(summary.latency.count >= 1, "{summary:?}");
        assert_eq!((summary.window.ok, summary.window.other, summary.window.failed), (0, 0, 0));
    }
}
