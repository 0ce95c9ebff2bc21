//! Status written back to the cluster's Istio objects by `meshpilot discovery` (issue 18 part 2):
//! `status.validationMessages` from the analyzers (istiod's `PILOT_ENABLE_ANALYSIS`) and meshpilot's
//! `Reconciled` condition (`PILOT_ENABLE_STATUS`), by one replica: the leader.
//!
//! ```text
//!  LeaderElection (istio-analyze-leader, or istio-status-leader without analysis)
//!     └─ while leading, every PILOT_STATUS_UPDATE_INTERVAL:
//!          analysis (when pushes happened: 1 s quiet, at most PILOT_ANALYSIS_INTERVAL late)
//!             store's Istio config + the cluster's Pods, Services, Namespaces, … ─► analysis::analyze
//!          Reconciled: discovery::objects::object_statuses (the proxies each object concerns, ACKs)
//!          per cluster object: kube_source::status::status_update (no-op when unchanged)
//!             ─► merge patch of /status (at most PILOT_STATUS_QPS writes per second)
//! ```
//!
//! Where it lives: the binary crate is the one place that sees both the analyzers (`analysis`), the
//! per-object push state (`discovery`) and the Kubernetes client (`kube_source`); the parts that talk
//! to the API server and the pure "what to write" rule are in `kube_source::status`, the election in
//! `kube_source::leader`.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use analysis::{Filter, Resources, analyzers, resource::LoadOptions};
use api::Kind;
use config::FileSource;
use discovery::{DiscoveryServer, objects::ObjectStatusSummary};
use kube_source::{
    Client,
    leader::{ANALYZE_CONTROLLER, LeaderElection, LockScope, STATUS_CONTROLLER, run_while_leading},
    status::{Condition, DesiredStatus, ValidationMessage, merge_patch, patch_status, status_update},
};
use model::{ConfigKey, ConfigStore, Shutdown};
use tracing::{debug, info, warn};

use crate::env::DiscoveryEnv;

/// Counter of status writes (label `kind`): only the leader's grows.
pub const STATUS_WRITES: &str = "meshpilot_status_writes_total";
/// Counter of failed status writes.
pub const STATUS_WRITE_FAILURES: &str = "meshpilot_status_write_failures_total";
/// Counter of analysis runs.
pub const ANALYSIS_RUNS: &str = "meshpilot_analysis_runs_total";

/// The status writer's settings, from Istio's environment variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusOptions {
    /// `PILOT_ENABLE_ANALYSIS` (Istio's default: false): write `status.validationMessages`.
    pub analysis: bool,
    /// `PILOT_ENABLE_STATUS` (default false, as Istio's former distribution status): write the
    /// `Reconciled` condition.
    pub reconciled: bool,
    /// `PILOT_ANALYSIS_INTERVAL` (10 s, at least 1 s as istiod): the longest an analysis waits for
    /// config to settle.
    pub analysis_interval: Duration,
    /// `PILOT_STATUS_UPDATE_INTERVAL` (500 ms, Istio's distribution reporter's): how often the
    /// desired status is compared with the cluster's.
    pub update_interval: Duration,
    /// `PILOT_STATUS_QPS` (100): at most this many status writes per second.
    pub qps: u32,
}

impl StatusOptions {
    /// Reads the options through `lookup`.
    ///
    /// # Errors
    /// A value that is not a boolean / duration / number, naming the variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<StatusOptions, String> {
        let get = |k: &str| lookup(k).filter(|v| !v.is_empty());
        let boolean = |k: &str| -> Result<bool, String> {
            match get(k).as_deref() {
                None => Ok(false),
                Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
                Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
                Some(v) => Err(format!("{k}={v:?}: expected true or false")),
            }
        };
        let duration = |k: &str, default: Duration| -> Result<Duration, String> {
            match get(k) {
                None => Ok(default),
                Some(v) => api::wkt::Duration::parse(&v)
                    .ok()
                    .and_then(|d| d.to_std())
                    .ok_or_else(|| format!("{k}={v:?}: expected a duration such as 10s or 500ms")),
            }
        };
        let mut analysis_interval = duration("PILOT_ANALYSIS_INTERVAL", Duration::from_secs(10))?;
        if analysis_interval < Duration::from_secs(1) {
            warn!(
                "PILOT_ANALYSIS_INTERVAL {analysis_interval:?} is too small, it will be set to default 10 seconds"
            );
            analysis_interval = Duration::from_secs(10);
        }
        let qps = match get("PILOT_STATUS_QPS") {
            None => 100,
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|q| *q > 0)
                .ok_or_else(|| format!("PILOT_STATUS_QPS={v:?}: expected a positive number"))?,
        };
        Ok(StatusOptions {
            analysis: boolean("PILOT_ENABLE_ANALYSIS")?,
            reconciled: boolean("PILOT_ENABLE_STATUS")?,
            analysis_interval,
            update_interval: duration("PILOT_STATUS_UPDATE_INTERVAL", Duration::from_millis(500))?,
            qps,
        })
    }
}

/// What the writer reads.
struct Ctx {
    server: Arc<DiscoveryServer>,
    files: Vec<Arc<FileSource>>,
    /// The cluster's Istio objects (the Kubernetes config source): only these get status.
    cluster: Arc<dyn ConfigStore>,
    client: Client,
    options: StatusOptions,
    istio_namespace: String,
}

/// Starts the status writer when `PILOT_ENABLE_ANALYSIS` or `PILOT_ENABLE_STATUS` is set: a leader
/// election and, while leading, the writer, over the objects of `cluster` (the Kubernetes config
/// source of the control plane's cluster). Returns `None` (and starts nothing) when both are off or there is no
/// cluster (a warning says so).
///
/// # Errors
/// No Kubernetes client.
pub async fn start(
    server: Arc<DiscoveryServer>,
    files: Vec<Arc<FileSource>>,
    cluster: Option<Arc<dyn ConfigStore>>,
    kube: Option<&kube_source::Cluster>,
    env: &DiscoveryEnv,
    shutdown: Shutdown,
) -> Result<Option<tokio::task::JoinHandle<()>>, String> {
    let options = env.status.clone();
    if !options.analysis && !options.reconciled {
        return Ok(None);
    }
    let (Some(cluster), Some(kube)) = (cluster, kube) else {
        warn!(
            "PILOT_ENABLE_ANALYSIS / PILOT_ENABLE_STATUS ignored: status is written to cluster objects only, and there is \
             no cluster access"
        );
        return Ok(None);
    };
    let leader = env.leader.clone();
    let client = kube.connect().map_err(|e| e.to_string())?.client;
    // One writer for both: istiod's analysis lock when analysis is on, else its status lock.
    let lock = if options.analysis { ANALYZE_CONTROLLER } else { STATUS_CONTROLLER };
    info!(
        lock,
        identity = %leader.identity,
        namespace = %leader.namespace,
        analysis = options.analysis,
        reconciled = options.reconciled,
        "status writer: joining leader election"
    );
    let istio_namespace = leader.namespace.clone();
    let leadership =
        LeaderElection::new(client.clone(), lock, LockScope::Shared, leader).start(shutdown.clone());
    let ctx = Arc::new(Ctx { server, files, cluster, client, options, istio_namespace });
    Ok(Some(tokio::spawn(async move {
        let leading = leadership.subscribe();
        run_while_leading(leading, shutdown, |term| run_writer(ctx.clone(), term)).await;
        leadership.stopped().await;
    })))
}

/// The writer while leading: until `term` ends.
async fn run_writer(ctx: Arc<Ctx>, mut term: Shutdown) {
    info!("status writer: leading, writing status");
    let mut analysis = AnalysisState::default();
    // Per object, the status last written and not yet seen back from the cluster.
    let mut in_flight: HashMap<ConfigKey, (i64, DesiredStatus)> = HashMap::new();
    loop {
        tokio::select! {
            () = term.wait() => break,
            () = tokio::time::sleep(ctx.options.update_interval) => {}
        }
        if !ctx.server.is_ready() {
            continue;
        }
        if ctx.options.analysis {
            analysis.maybe_run(&ctx).await;
            if analysis.messages.is_none() {
                // Never clear messages before the first analysis has run.
                continue;
            }
        }
        write_pass(&ctx, &analysis, &mut in_flight, &mut term).await;
    }
    info!("status writer: no longer leading, stopped writing");
}

#[derive(Default)]
struct AnalysisState {
    /// Messages per object of the last successful run (`None` before it).
    messages: Option<HashMap<ConfigKey, Vec<ValidationMessage>>>,
    /// The push count the last run saw.
    analyzed: Option<u64>,
    seen: Option<u64>,
    changed_at: Option<Instant>,
    pending_since: Option<Instant>,
}

impl AnalysisState {
    /// Istio's debounce (`concurrent.Debouncer`): run once config has been quiet for 1 s, or once
    /// `PILOT_ANALYSIS_INTERVAL` passed since the first unanalyzed change. Changes are seen as pushes
    /// (config, services and endpoints all cause one).
    async fn maybe_run(&mut self, ctx: &Ctx) {
        let count = ctx.server.push_count();
        let now = Instant::now();
        if self.seen != Some(count) {
            self.seen = Some(count);
            self.changed_at = Some(now);
            self.pending_since.get_or_insert(now);
        }
        if self.analyzed == Some(count) {
            return;
        }
        let quiet = self.changed_at.is_some_and(|t| now - t >= Duration::from_secs(1));
        let overdue = self.pending_since.is_some_and(|t| now - t >= ctx.options.analysis_interval);
        if !(quiet || overdue || self.analyzed.is_none()) {
            return;
        }
        match analyze(ctx).await {
            Ok(messages) => {
                self.messages = Some(messages);
                self.analyzed = Some(count);
                self.pending_since = None;
            }
            Err(e) => warn!("in-cluster analysis has failed: {e}"),
        }
    }
}

/// One analysis run over the store's Istio config and the cluster's Kubernetes objects: messages per
/// Istio object.
async fn analyze(ctx: &Ctx) -> Result<HashMap<ConfigKey, Vec<ValidationMessage>>, String> {
    let mut resources = Resources::new(LoadOptions::default());
    resources.istio_namespace = ctx.istio_namespace.clone();
    resources.set_cluster_source();
    let store = ctx.server.store();
    for kind in store.schemas() {
        for config in store.list(*kind, None) {
            resources.add_cluster_object(&config.to_json());
        }
    }
    for object in
        kube_source::client::list_analysis_resources(&ctx.client).await.map_err(|e| e.to_string())?
    {
        resources.add_cluster_object(&object);
    }
    let result = analysis::analyze(&resources, &analyzers::all(), &Filter::default());
    metrics::counter!(ANALYSIS_RUNS).increment(1);
    let mut out: HashMap<ConfigKey, Vec<ValidationMessage>> = HashMap::new();
    for m in &result.messages {
        let Some(kind) = Kind::ALL.iter().copied().find(|k| k.as_str() == m.origin.kind) else { continue };
        let key = ConfigKey {
            kind,
            namespace: m.origin.namespace.clone().unwrap_or_default(),
            name: m.origin.name.clone(),
        };
        out.entry(key).or_default().push(ValidationMessage {
            code: m.code().to_string(),
            name: m.kind.name.to_string(),
            level: m.level().as_str().to_uppercase(),
            documentation_url: m.documentation_url(None),
        });
    }
    debug!(messages = result.messages.len(), objects = out.len(), "in-cluster analysis done");
    Ok(out)
}

/// The `Reconciled` condition from an object's summary (see docs/CONFIG-FEEDBACK.md).
fn reconciled(summary: Option<&ObjectStatusSummary>) -> Condition {
    let Some(s) = summary else {
        return Condition {
            status: false,
            reason: "NotInForce".into(),
            message:
                "the object is not in force in this control plane (another source's copy wins, or it was \
                      rejected)"
                    .into(),
        };
    };
    let c = s.counts;
    let total = c.acked + c.pending + c.nacked;
    if s.push_version.is_none() {
        return Condition {
            status: false,
            reason: "NotPushed".into(),
            message: format!("not pushed yet; {}/{total} proxies up to date.", c.acked),
        };
    }
    if c.nacked > 0 {
        return Condition {
            status: false,
            reason: "Rejected".into(),
            message: format!(
                "{}/{total} proxies up to date; {} rejected the config (see `meshpilot status` or /debug/objectz).",
                c.acked, c.nacked
            ),
        };
    }
    if c.pending > 0 {
        return Condition {
            status: false,
            reason: "Pending".into(),
            message: format!("{}/{total} proxies up to date.", c.acked),
        };
    }
    Condition {
        status: true,
        reason: "Reconciled".into(),
        message: format!("{}/{total} proxies up to date.", c.acked),
    }
}

async fn write_pass(
    ctx: &Ctx,
    analysis: &AnalysisState,
    in_flight: &mut HashMap<ConfigKey, (i64, DesiredStatus)>,
    term: &mut Shutdown,
) {
    let summaries: HashMap<(String, String, String), ObjectStatusSummary> = if ctx.options.reconciled {
        discovery::objects::object_statuses(&ctx.server, &ctx.files)
            .into_iter()
            .map(|s| ((s.kind.clone(), s.namespace.clone(), s.name.clone()), s))
            .collect()
    } else {
        HashMap::new()
    };
    let now = config::rfc3339(std::time::SystemTime::now());
    let pause = Duration::from_secs(1) / ctx.options.qps;
    let mut present = std::collections::HashSet::new();
    for kind in ctx.cluster.schemas() {
        for object in ctx.cluster.list(*kind, None) {
            if term.is_shutdown() {
                return;
            }
            let key = object.key();
            present.insert(key.clone());
            let desired = DesiredStatus {
                validation_messages: analysis
                    .messages
                    .as_ref()
                    .map(|m| m.get(&key).cloned().unwrap_or_default()),
                reconciled: ctx.options.reconciled.then(|| {
                    reconciled(summaries.get(&(
                        key.kind.to_string(),
                        key.namespace.clone(),
                        key.name.clone(),
                    )))
                }),
            };
            let generation = object.meta.generation;
            let Some(new) = status_update(object.status.as_ref(), generation, &desired, &now) else {
                in_flight.remove(&key);
                continue;
            };
            if in_flight.get(&key) == Some(&(generation, desired.clone())) {
                continue; // written; the watch has not brought it back yet
            }
            let patch = merge_patch(object.status.as_ref(), &new);
            let kind_label = key.kind.as_str();
            match patch_status(&ctx.client, key.kind, &key.namespace, &key.name, &patch).await {
                Ok(()) => {
                    metrics::counter!(STATUS_WRITES, "kind" => kind_label).increment(1);
                    debug!(object = %key, "status written");
                    in_flight.insert(key, (generation, desired));
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    metrics::counter!(STATUS_WRITE_FAILURES, "kind" => kind_label).increment(1);
                    warn!(object = %key, "cannot write status: {e}");
                }
            }
            tokio::time::sleep(pause).await;
        }
    }
    in_flight.retain(|k, _| present.contains(k));
}

#[cfg(test)]
mod tests {
    use super::*;
    use discovery::objects::SyncCounts;

    #[test]
    fn options_default_off_as_istio() {
        let o = StatusOptions::from_lookup(|_| None).unwrap();
        assert!(!o.analysis && !o.reconciled);
        assert_eq!(
            (o.analysis_interval, o.update_interval, o.qps),
            (Duration::from_secs(10), Duration::from_millis(500), 100)
        );
        let o = StatusOptions::from_lookup(|k| match k {
            "PILOT_ENABLE_ANALYSIS" | "PILOT_ENABLE_STATUS" => Some("true".into()),
            "PILOT_ANALYSIS_INTERVAL" => Some("100ms".into()),
            "PILOT_STATUS_UPDATE_INTERVAL" => Some("50ms".into()),
            _ => None,
        })
        .unwrap();
        assert!(o.analysis && o.reconciled);
        assert_eq!(
            (o.analysis_interval, o.update_interval),
            (Duration::from_secs(10), Duration::from_millis(50))
        );
        let err =
            StatusOptions::from_lookup(|k| (k == "PILOT_ENABLE_STATUS").then(|| "yes".into())).unwrap_err();
        assert!(err.contains("PILOT_ENABLE_STATUS"), "{err}");
    }

    #[test]
    fn reconciled_follows_the_proxies() {
        let summary = |push: bool, acked, pending, nacked| ObjectStatusSummary {
            kind: "VirtualService".into(),
            namespace: "ns".into(),
            name: "vs".into(),
            resource_version: "1".into(),
            validation: "valid".into(),
            push_version: push.then(|| "2026-01-01T00:00:00Z/3".into()),
            counts: SyncCounts { acked, pending, nacked },
        };
        let c = reconciled(Some(&summary(true, 2, 0, 0)));
        assert!(c.status);
        assert_eq!((c.reason.as_str(), c.message.as_str()), ("Reconciled", "2/2 proxies up to date."));
        assert_eq!(reconciled(Some(&summary(true, 1, 1, 0))).reason, "Pending");
        assert_eq!(reconciled(Some(&summary(true, 1, 0, 1))).reason, "Rejected");
        assert_eq!(reconciled(Some(&summary(false, 0, 1, 0))).reason, "NotPushed");
        assert!(
            reconciled(Some(&summary(true, 0, 0, 0))).status,
            "no proxy concerned: reconciled (0/0, as Istio)"
        );
        assert_eq!(reconciled(None).reason, "NotInForce");
    }
}
