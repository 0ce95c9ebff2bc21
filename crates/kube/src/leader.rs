//! Leader election on a `coordination.k8s.io/v1` Lease or a ConfigMap, as istiod does it
//! (`pilot/pkg/leaderelection` over client-go's `tools/leaderelection`): one replica of the control plane
//! runs a controller (status writing, analysis, Gateway deployments, …), the others wait and take over
//! when the leader stops or stops renewing.
//!
//! ```text
//!  LeaderElection::new(client, ANALYZE_CONTROLLER, LockScope::Shared, options)
//!      .start(shutdown) ──► Leadership (watch: leading / not leading)
//!                               └── run_while_leading(f): f(term) runs while leading, term ends on loss
//! ```
//!
//! **Istio's facts followed.** Lock names are Istio's ([`STATUS_CONTROLLER`], [`ANALYZE_CONTROLLER`],
//! [`GATEWAY_STATUS_CONTROLLER`], [`GATEWAY_DEPLOYMENT_CONTROLLER`], …); a per-revision lock is named
//! `<lock>-<revision>` (revision `default` when none is set), as `NewPerRevisionLeaderElection` does, so
//! control planes of different revisions each have a leader. The identity is `POD_NAME`; the lock lives
//! in `POD_NAMESPACE` (`istio-system` by default). Timing is istiod's: a 30 s lease (the TTL), renew
//! deadline TTL/2 (15 s), retry period TTL/4 (7.5 s). The lease is released on shutdown
//! (`ReleaseOnCancel: true`): the holder identity is cleared, so another replica takes over at its next
//! retry instead of after the lease expires. Like client-go, expiry is judged on the local clock from
//! the moment this replica last saw the lease record change (never by comparing `renewTime` with the
//! local clock, so clock skew between replicas does not matter). After losing the lease the election
//! starts over, as istiod's `Run` loop does. `PILOT_ENABLE_LEADER_ELECTION=false` makes every replica
//! the leader without touching the API server (Istio's bypass for single-replica installs).
//!
//! **Lock kinds as istiod's** ([`istiod_lock_kind`]), so that replicas of meshpilot and of istiod in one
//! rollout contend for the same object instead of each leading on its own: per-revision locks and
//! [`STATUS_CONTROLLER`] are Leases (istiod's `NewPerRevisionLeaderElection` / `NewLeaseLeaderElection`);
//! every other shared lock is a ConfigMap of the lock's name whose annotation
//! [`CONFIGMAP_RECORD_ANNOTATION`] holds client-go's JSON leader record (holder identity, holder key,
//! lease duration in seconds, acquire and renew times in RFC 3339 seconds, transitions), istiod's
//! `NewLeaderElection` kept for compatibility with older control planes. Shared Leases carry Istio's
//! holder-key annotation ([`HOLDER_KEY_ANNOTATION`]) with the revision, as istiod's Lease locks do.
//!
//! **Where meshpilot differs.** istiod lets the *default* revision steal a shared lock from another
//! revision (prioritized election, driven by its default-revision watcher); meshpilot does not (the
//! first holder keeps it until it stops; an istiod of the default revision may still take it from
//! meshpilot, which then stops leading). Without `POD_NAME` istiod's identity is `unknown-<hostname>`;
//! meshpilot's is `unknown-<hostname>-<pid>`, so that two processes on one machine never both believe
//! they hold the lock.

use std::{future::Future, time::Duration};

use k8s_openapi::{
    api::{
        coordination::v1::{Lease, LeaseSpec},
        core::v1::ConfigMap,
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use kube::{Api, Client, api::PostParams};
use model::{Shutdown, shutdown_channel};
use tokio::{sync::watch, task::JoinHandle, time::Instant};
use tracing::{debug, info, warn};

use crate::client::{FIELD_MANAGER, KubeError};

/// Istio's `NamespaceController` lock (the `istio-ca-root-cert` ConfigMap writer).
pub const NAMESPACE_CONTROLLER: &str = "istio-namespace-controller-election";
/// Istio's `ClusterTrustBundleController` lock.
pub const CLUSTER_TRUST_BUNDLE_CONTROLLER: &str = "istio-clustertrustbundle-controller-election";
/// Istio's `ServiceExportController` lock (multi-cluster services).
pub const SERVICE_EXPORT_CONTROLLER: &str = "istio-serviceexport-controller-election";
/// Istio's `IngressController` lock (the legacy name `istio-leader`: Kubernetes Ingress status).
pub const INGRESS_CONTROLLER: &str = "istio-leader";
/// Istio's `GatewayStatusController` lock: status of `gateway.networking.k8s.io` objects (per revision
/// in istiod: `istio-gateway-status-leader-<rev>`).
pub const GATEWAY_STATUS_CONTROLLER: &str = "istio-gateway-status-leader";
/// Istio's `StatusController` lock: writing Istio status to objects.
pub const STATUS_CONTROLLER: &str = "istio-status-leader";
/// Istio's `AnalyzeController` lock: the in-cluster analysis (`PILOT_ENABLE_ANALYSIS`) and its
/// `status.validationMessages`.
pub const ANALYZE_CONTROLLER: &str = "istio-analyze-leader";
/// Istio's `GatewayDeploymentController` lock: Deployments/Services derived from Kubernetes Gateways
/// (per revision in istiod: `istio-gateway-deployment-<rev>`).
pub const GATEWAY_DEPLOYMENT_CONTROLLER: &str = "istio-gateway-deployment";
/// Istio's `InferencePoolController` lock.
pub const INFERENCE_POOL_CONTROLLER: &str = "istio-gateway-inferencepool";
/// Istio's `NodeUntaintController` lock.
pub const NODE_UNTAINT_CONTROLLER: &str = "istio-node-untaint";
/// Istio's `IPAutoallocateController` lock.
pub const IP_AUTOALLOCATE_CONTROLLER: &str = "istio-ip-autoallocate";

/// The Lease annotation holding the holder's key (its revision for shared locks), Istio's
/// `leader.istio.io/holder-key`.
pub const HOLDER_KEY_ANNOTATION: &str = "leader.istio.io/holder-key";

/// The ConfigMap annotation holding a ConfigMap lock's JSON record (client-go's
/// `LeaderElectionRecordAnnotationKey`).
pub const CONFIGMAP_RECORD_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";

/// The revision name used when none is set (Istio: "Default revision for consistency").
pub const DEFAULT_REVISION: &str = "default";

/// Whether one leader serves all revisions or each revision elects its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockScope {
    /// One leader across revisions, the lock named as given (istiod's `NewLeaderElection` /
    /// `NewLeaseLeaderElection`: status, analysis, ingress, namespace controller).
    Shared,
    /// One leader per revision, the lock named `<lock>-<revision>` (istiod's
    /// `NewPerRevisionLeaderElection`: Gateway API status and deployments).
    PerRevision,
}

/// The object that holds a lock's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// A `coordination.k8s.io/v1` Lease (`spec.holderIdentity`, …).
    Lease,
    /// A ConfigMap whose [`CONFIGMAP_RECORD_ANNOTATION`] holds the JSON record.
    ConfigMap,
}

/// The kind istiod uses for `election_id` in `scope` (`pilot/pkg/leaderelection`,
/// `pilot/pkg/bootstrap`): a Lease for per-revision locks and for [`STATUS_CONTROLLER`], a ConfigMap
/// for every other shared lock ([`INGRESS_CONTROLLER`], [`ANALYZE_CONTROLLER`],
/// [`NAMESPACE_CONTROLLER`], [`IP_AUTOALLOCATE_CONTROLLER`], …).
pub fn istiod_lock_kind(election_id: &str, scope: LockScope) -> LockKind {
    match scope {
        LockScope::PerRevision => LockKind::Lease,
        LockScope::Shared if election_id == STATUS_CONTROLLER => LockKind::Lease,
        LockScope::Shared => LockKind::ConfigMap,
    }
}

/// Settings of an election (see [`LeaderElectionOptions::from_lookup`] for istiod's defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionOptions {
    /// Namespace of the Lease (`POD_NAMESPACE`, default `istio-system`).
    pub namespace: String,
    /// This replica's identity, written as the Lease's `holderIdentity` (`POD_NAME`).
    pub identity: String,
    /// Control-plane revision (`REVISION`; [`DEFAULT_REVISION`] when empty).
    pub revision: String,
    /// How long a lease is valid without renewal (istiod: 30 s).
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failed renewal before giving leadership up (TTL/2).
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew (TTL/4).
    pub retry_period: Duration,
    /// `false` (`PILOT_ENABLE_LEADER_ELECTION=false`): always the leader, no Lease.
    pub enabled: bool,
}

impl Default for LeaderElectionOptions {
    fn default() -> Self {
        LeaderElectionOptions {
            namespace: "istio-system".into(),
            identity: default_identity(None, None),
            revision: DEFAULT_REVISION.into(),
            lease_duration: Duration::ZERO,
            renew_deadline: Duration::ZERO,
            retry_period: Duration::ZERO,
            enabled: true,
        }
        .with_ttl(Duration::from_secs(30))
    }
}

impl LeaderElectionOptions {
    /// Options from the environment through `lookup` (the binary's one snapshot of it; tests a map):
    /// `POD_NAMESPACE`, `POD_NAME`, `REVISION`, `PILOT_ENABLE_LEADER_ELECTION` (default true), and
    /// `HOSTNAME` for the identity when the kernel's host name cannot be read.
    ///
    /// # Errors
    /// `PILOT_ENABLE_LEADER_ELECTION` is not a boolean (the message names it and the value).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let non_empty = |k: &str| lookup(k).filter(|v| !v.is_empty());
        let enabled = match non_empty("PILOT_ENABLE_LEADER_ELECTION") {
            None => true,
            Some(v) => parse_bool(&v)
                .ok_or_else(|| format!("PILOT_ENABLE_LEADER_ELECTION={v:?}: expected true or false"))?,
        };
        Ok(LeaderElectionOptions {
            namespace: non_empty("POD_NAMESPACE").unwrap_or_else(|| "istio-system".into()),
            identity: default_identity(non_empty("POD_NAME"), non_empty("HOSTNAME")),
            revision: non_empty("REVISION").unwrap_or_else(|| DEFAULT_REVISION.into()),
            enabled,
            ..LeaderElectionOptions::default()
        })
    }

    /// Sets istiod's timing from one TTL: lease duration `ttl`, renew deadline `ttl/2`, retry period
    /// `ttl/4` (tests use a short TTL).
    #[must_use]
    pub fn with_ttl(self, ttl: Duration) -> Self {
        LeaderElectionOptions { lease_duration: ttl, renew_deadline: ttl / 2, retry_period: ttl / 4, ..self }
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    // Go's strconv.ParseBool, which Istio's env package uses.
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// `pod_name` when given, else `unknown-<hostname>-<pid>` (see the module docs); the host name is
/// the kernel's (`/proc/sys/kernel/hostname`, `/etc/hostname`), else `hostname_var` (`$HOSTNAME`),
/// else `localhost`.
pub fn default_identity(pod_name: Option<String>, hostname_var: Option<String>) -> String {
    pod_name.unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .or(hostname_var)
            .unwrap_or_else(|| "localhost".into());
        format!("unknown-{host}-{}", std::process::id())
    })
}

/// The Lease name of lock `election_id`: `<election_id>-<revision>` for [`LockScope::PerRevision`]
/// (revision [`DEFAULT_REVISION`] when empty), else `election_id`.
pub fn lock_name(election_id: &str, scope: LockScope, revision: &str) -> String {
    match scope {
        LockScope::Shared => election_id.to_string(),
        LockScope::PerRevision => {
            let rev = if revision.is_empty() { DEFAULT_REVISION } else { revision };
            format!("{election_id}-{rev}")
        }
    }
}

/// One election: a lock name and kind and this replica's settings. [`LeaderElection::start`] runs it.
#[derive(Clone)]
pub struct LeaderElection {
    client: Client,
    options: LeaderElectionOptions,
    lock: String,
    kind: LockKind,
    /// The holder key of the record (the revision for shared locks, empty for per-revision locks,
    /// as istiod).
    key: String,
}

impl std::fmt::Debug for LeaderElection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElection")
            .field("lock", &self.lock)
            .field("kind", &self.kind)
            .field("options", &self.options)
            .finish()
    }
}

/// A lock record, whichever object holds it (client-go's `LeaderElectionRecord`). Times are kept at
/// the precision the object stores (seconds in a ConfigMap, microseconds in a Lease).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockRecord {
    /// Who holds the lock; empty when released.
    pub holder_identity: String,
    /// The holder's key (istiod: its revision, `^`-prefixed for a remote istiod).
    pub holder_key: String,
    /// How long the record is valid without renewal, seconds.
    pub lease_duration_seconds: i32,
    /// When the holder acquired it.
    pub acquire_time: Option<jiff::Timestamp>,
    /// When the holder last renewed it.
    pub renew_time: Option<jiff::Timestamp>,
    /// How many times the holder changed.
    pub leader_transitions: i32,
}

/// The JSON form of a record in a ConfigMap's annotation (client-go: camelCase, `metav1.Time` as
/// RFC 3339 seconds or `null`).
#[derive(serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct JsonRecord {
    holder_identity: String,
    holder_key: String,
    lease_duration_seconds: i32,
    acquire_time: Option<String>,
    renew_time: Option<String>,
    leader_transitions: i32,
}

fn rfc3339_seconds(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl LockRecord {
    /// The record of a ConfigMap lock: its annotation parsed (an absent annotation is the empty
    /// record, as client-go).
    ///
    /// # Errors
    /// The annotation is not client-go's JSON record (the message quotes serde's reason).
    pub fn from_configmap(cm: &ConfigMap) -> Result<LockRecord, String> {
        let Some(text) = cm.metadata.annotations.as_ref().and_then(|a| a.get(CONFIGMAP_RECORD_ANNOTATION))
        else {
            return Ok(LockRecord::default());
        };
        let json: JsonRecord = serde_json::from_str(text)
            .map_err(|e| format!("annotation {CONFIGMAP_RECORD_ANNOTATION} is not a leader record: {e}"))?;
        let time = |t: Option<String>| t.and_then(|t| t.parse::<jiff::Timestamp>().ok());
        Ok(LockRecord {
            holder_identity: json.holder_identity,
            holder_key: json.holder_key,
            lease_duration_seconds: json.lease_duration_seconds,
            acquire_time: time(json.acquire_time),
            renew_time: time(json.renew_time),
            leader_transitions: json.leader_transitions,
        })
    }

    /// The annotation value for a ConfigMap lock (times rounded down to seconds, as `metav1.Time`).
    pub fn to_configmap_annotation(&self) -> String {
        let json = JsonRecord {
            holder_identity: self.holder_identity.clone(),
            holder_key: self.holder_key.clone(),
            lease_duration_seconds: self.lease_duration_seconds,
            acquire_time: self.acquire_time.map(rfc3339_seconds),
            renew_time: self.renew_time.map(rfc3339_seconds),
            leader_transitions: self.leader_transitions,
        };
        serde_json::to_string(&json).unwrap_or_default()
    }

    /// The record of a Lease lock (the holder key from [`HOLDER_KEY_ANNOTATION`]).
    pub fn from_lease(lease: &Lease) -> LockRecord {
        let spec = lease.spec.clone().unwrap_or_default();
        LockRecord {
            holder_identity: spec.holder_identity.unwrap_or_default(),
            holder_key: lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(HOLDER_KEY_ANNOTATION))
                .cloned()
                .unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            leader_transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// Writes this record into `lease` (spec and the holder-key annotation, removed when empty).
    fn write_lease(&self, lease: &mut Lease) {
        let spec = lease.spec.take().unwrap_or_default();
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.holder_identity.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.leader_transitions),
            ..spec
        });
        set_annotation(&mut lease.metadata, HOLDER_KEY_ANNOTATION, &self.holder_key);
    }

    /// The record as stored and read back: a ConfigMap keeps whole seconds only, so the record
    /// compared with the next read must be the rounded one.
    fn stored(mut self, kind: LockKind) -> LockRecord {
        if kind == LockKind::ConfigMap {
            let round =
                |t: Option<jiff::Timestamp>| t.and_then(|t| jiff::Timestamp::from_second(t.as_second()).ok());
            self.acquire_time = round(self.acquire_time);
            self.renew_time = round(self.renew_time);
        }
        self
    }
}

/// Sets (or, for an empty value, removes) one annotation.
fn set_annotation(meta: &mut ObjectMeta, key: &str, value: &str) {
    let mut annotations = meta.annotations.take().unwrap_or_default();
    if value.is_empty() {
        annotations.remove(key);
    } else {
        annotations.insert(key.into(), value.into());
    }
    meta.annotations = (!annotations.is_empty()).then_some(annotations);
}

/// The lock object as last read (kept for its resourceVersion: updates are compare-and-swap).
enum LockObject {
    Lease(Lease),
    ConfigMap(ConfigMap),
}

/// Reads and writes one lock object of either kind.
struct LockApi {
    kind: LockKind,
    name: String,
    namespace: String,
    leases: Api<Lease>,
    configmaps: Api<ConfigMap>,
}

impl LockApi {
    fn new(client: &Client, kind: LockKind, namespace: &str, name: &str) -> Self {
        LockApi {
            kind,
            name: name.into(),
            namespace: namespace.into(),
            leases: Api::namespaced(client.clone(), namespace),
            configmaps: Api::namespaced(client.clone(), namespace),
        }
    }

    fn what(&self) -> &'static str {
        match self.kind {
            LockKind::Lease => "lease",
            LockKind::ConfigMap => "configmap",
        }
    }

    /// The current object and its record; `Ok(None)` when it does not exist.
    async fn get(&self) -> Result<Option<(LockObject, LockRecord)>, String> {
        let err = |e| KubeError::from_kube(e, &format!("get the {} {}", self.what(), self.name)).to_string();
        Ok(match self.kind {
            LockKind::Lease => self.leases.get_opt(&self.name).await.map_err(err)?.map(|lease| {
                let record = LockRecord::from_lease(&lease);
                (LockObject::Lease(lease), record)
            }),
            LockKind::ConfigMap => match self.configmaps.get_opt(&self.name).await.map_err(err)? {
                Some(cm) => {
                    let record = LockRecord::from_configmap(&cm)
                        .map_err(|e| format!("configmap {}/{}: {e}", self.namespace, self.name))?;
                    Some((LockObject::ConfigMap(cm), record))
                }
                None => None,
            },
        })
    }

    /// Creates the object holding `record`; the record as stored.
    async fn create(&self, record: &LockRecord) -> Result<LockRecord, String> {
        let meta = ObjectMeta {
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            ..ObjectMeta::default()
        };
        let err =
            |e| KubeError::from_kube(e, &format!("create the {} {}", self.what(), self.name)).to_string();
        match self.kind {
            LockKind::Lease => {
                let mut lease = Lease { metadata: meta, spec: None };
                record.write_lease(&mut lease);
                let created = self.leases.create(&post_params(), &lease).await.map_err(err)?;
                Ok(LockRecord::from_lease(&created))
            }
            LockKind::ConfigMap => {
                let mut cm = ConfigMap { metadata: meta, ..ConfigMap::default() };
                set_annotation(
                    &mut cm.metadata,
                    CONFIGMAP_RECORD_ANNOTATION,
                    &record.to_configmap_annotation(),
                );
                self.configmaps.create(&post_params(), &cm).await.map_err(err)?;
                Ok(record.clone().stored(LockKind::ConfigMap))
            }
        }
    }

    /// Replaces `object`'s record with `record` (fails on a concurrent change); the record as stored.
    async fn update(&self, object: LockObject, record: &LockRecord) -> Result<LockRecord, String> {
        let err =
            |e| KubeError::from_kube(e, &format!("update the {} {}", self.what(), self.name)).to_string();
        match object {
            LockObject::Lease(mut lease) => {
                record.write_lease(&mut lease);
                let updated = self.leases.replace(&self.name, &post_params(), &lease).await.map_err(err)?;
                Ok(LockRecord::from_lease(&updated))
            }
            LockObject::ConfigMap(mut cm) => {
                set_annotation(
                    &mut cm.metadata,
                    CONFIGMAP_RECORD_ANNOTATION,
                    &record.to_configmap_annotation(),
                );
                self.configmaps.replace(&self.name, &post_params(), &cm).await.map_err(err)?;
                Ok(record.clone().stored(LockKind::ConfigMap))
            }
        }
    }
}

impl LeaderElection {
    /// An election for `election_id` (one of this module's lock constants) in `scope`, on the object
    /// kind istiod uses for it ([`istiod_lock_kind`]); an empty revision is [`DEFAULT_REVISION`].
    pub fn new(client: Client, election_id: &str, scope: LockScope, options: LeaderElectionOptions) -> Self {
        let mut options = options;
        if options.revision.is_empty() {
            options.revision = DEFAULT_REVISION.into();
        }
        let lock = lock_name(election_id, scope, &options.revision);
        let key = if scope == LockScope::Shared { options.revision.clone() } else { String::new() };
        LeaderElection { client, options, lock, kind: istiod_lock_kind(election_id, scope), key }
    }

    /// The lock object's name.
    pub fn lock(&self) -> &str {
        &self.lock
    }

    /// The lock object's kind.
    pub fn kind(&self) -> LockKind {
        self.kind
    }

    /// The options.
    pub fn options(&self) -> &LeaderElectionOptions {
        &self.options
    }

    /// Starts the election on the current tokio runtime; it runs until `shutdown`, then releases the
    /// lock if held. Returns the leadership signal.
    pub fn start(self, shutdown: Shutdown) -> Leadership {
        let (tx, rx) = watch::channel(false);
        let task = if self.options.enabled {
            tokio::spawn(self.run(tx, shutdown))
        } else {
            info!(lock = %self.lock, "bypassing leader election (PILOT_ENABLE_LEADER_ELECTION=false)");
            let _ = tx.send(true);
            tokio::spawn(async move {
                let mut shutdown = shutdown;
                shutdown.wait().await;
                let _ = tx.send(false);
            })
        };
        Leadership { rx, task }
    }

    async fn run(self, tx: watch::Sender<bool>, mut shutdown: Shutdown) {
        let api = LockApi::new(&self.client, self.kind, &self.options.namespace, &self.lock);
        let mut state = Observed::default();
        let mut cycle = 0u32;
        // 0 while waiting, 1 while leading (`lock` label: the lock object's name).
        metrics::gauge!("meshpilot_leader_election_leading", "lock" => self.lock.clone()).set(0.0);
        loop {
            // Acquire: try every retry period until it succeeds or we are told to stop.
            loop {
                if self.try_acquire_or_renew(&api, &mut state).await {
                    break;
                }
                tokio::select! {
                    () = shutdown.wait() => return,
                    () = tokio::time::sleep(self.options.retry_period) => {}
                }
            }
            cycle += 1;
            info!(lock = %self.lock, kind = api.what(), identity = %self.options.identity, cycle, "leader election lock obtained");
            metrics::gauge!("meshpilot_leader_election_leading", "lock" => self.lock.clone()).set(1.0);
            let _ = tx.send(true);
            // Renew every retry period; give up when no renewal succeeded within the renew deadline.
            let mut last_renew = Instant::now();
            let stopped = loop {
                tokio::select! {
                    () = shutdown.wait() => break true,
                    () = tokio::time::sleep(self.options.retry_period) => {}
                }
                if self.try_acquire_or_renew(&api, &mut state).await {
                    last_renew = Instant::now();
                } else if last_renew.elapsed() >= self.options.renew_deadline || state.held_by_other {
                    break false;
                }
            };
            let _ = tx.send(false);
            metrics::gauge!("meshpilot_leader_election_leading", "lock" => self.lock.clone()).set(0.0);
            if stopped {
                self.release(&api).await;
                info!(lock = %self.lock, "leader election lock released");
                return;
            }
            warn!(lock = %self.lock, cycle, "leader election lock lost; trying again");
        }
    }

    /// client-go's `tryAcquireOrRenew`: `true` when this replica holds the lock after the call.
    async fn try_acquire_or_renew(&self, api: &LockApi, state: &mut Observed) -> bool {
        state.held_by_other = false;
        let now = jiff::Timestamp::now();
        let duration_secs = i32::try_from(self.options.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let mine_new = LockRecord {
            holder_identity: self.options.identity.clone(),
            holder_key: self.key.clone(),
            lease_duration_seconds: duration_secs,
            acquire_time: Some(now),
            renew_time: Some(now),
            leader_transitions: 0,
        };
        let current = match api.get().await {
            Ok(current) => current,
            Err(error) => {
                debug!(lock = %self.lock, %error, "leader election: cannot read the lock");
                return false;
            }
        };
        let Some((object, record)) = current else {
            return match api.create(&mine_new).await {
                Ok(created) => {
                    state.observe(created);
                    true
                }
                Err(error) => {
                    debug!(lock = %self.lock, %error, "leader election: lock not created");
                    false
                }
            };
        };
        state.observe(record.clone());
        let mine = record.holder_identity == self.options.identity;
        if !record.holder_identity.is_empty()
            && !mine
            && state.observed_at.elapsed() < self.options.lease_duration
        {
            state.held_by_other = true;
            metrics::counter!("meshpilot_leader_election_held_by_other", "lock" => self.lock.clone())
                .increment(1);
            debug!(lock = %self.lock, holder = %record.holder_identity, "leader election: lock held by another");
            return false;
        }
        let next = LockRecord {
            acquire_time: if mine { record.acquire_time } else { Some(now) },
            leader_transitions: if mine { record.leader_transitions } else { record.leader_transitions + 1 },
            ..mine_new
        };
        match api.update(object, &next).await {
            Ok(updated) => {
                state.observe(updated);
                true
            }
            Err(error) => {
                debug!(lock = %self.lock, %error, "leader election: lock not updated");
                false
            }
        }
    }

    /// client-go's `release`: clears the holder so another replica can take the lock at once.
    async fn release(&self, api: &LockApi) {
        let Ok(Some((object, record))) = api.get().await else { return };
        if record.holder_identity != self.options.identity {
            return;
        }
        let now = jiff::Timestamp::now();
        let released = LockRecord {
            holder_identity: String::new(),
            holder_key: self.key.clone(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            leader_transitions: record.leader_transitions,
        };
        if let Err(error) = api.update(object, &released).await {
            warn!(lock = %self.lock, %error, "leader election: lock not released; it expires after its duration");
        }
    }
}

/// The record of lock `name` of `kind` in `namespace`, as an election reads it; `Ok(None)` when the
/// object does not exist (for status pages and tests).
///
/// # Errors
/// The API server refused the read, or a ConfigMap's annotation is not a leader record.
pub async fn read_record(
    client: &Client,
    namespace: &str,
    name: &str,
    kind: LockKind,
) -> Result<Option<LockRecord>, String> {
    Ok(LockApi::new(client, kind, namespace, name).get().await?.map(|(_, record)| record))
}

fn post_params() -> PostParams {
    PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() }
}

/// What this replica last saw of the lock, and when (client-go's `observedRecord` / `observedTime`).
struct Observed {
    record: Option<LockRecord>,
    observed_at: Instant,
    /// The last attempt found the lock validly held by another replica.
    held_by_other: bool,
}

impl Default for Observed {
    fn default() -> Self {
        Observed { record: None, observed_at: Instant::now(), held_by_other: false }
    }
}

impl Observed {
    fn observe(&mut self, record: LockRecord) {
        if self.record.as_ref() != Some(&record) {
            self.record = Some(record);
            self.observed_at = Instant::now();
        }
    }
}

/// The leadership signal of a started election.
#[derive(Debug)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl Leadership {
    /// `true` while this replica holds the lock.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// A receiver of the leading (`true`) / not leading (`false`) signal.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }

    /// Waits until the election task has ended (after shutdown: the lease released).
    pub async fn stopped(self) {
        let _ = self.task.await;
    }

    /// Ends the election at once without releasing the lease (as a crash would: the other replicas
    /// take over when the lease expires). For tests of takeover after a failure.
    pub fn abort(&self) {
        self.task.abort();
    }
}

/// Runs `f` each time `leading` becomes true, handing it a [`Shutdown`] that fires when leadership is
/// lost (or on `shutdown`); waits for `f` to return before waiting for the next term. Returns on
/// `shutdown`. This is istiod's `AddRunFunction` (the function gets the leader's stop channel).
pub async fn run_while_leading<F, Fut>(mut leading: watch::Receiver<bool>, mut shutdown: Shutdown, mut f: F)
where
    F: FnMut(Shutdown) -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        tokio::select! {
            () = shutdown.wait() => return,
            r = leading.wait_for(|l| *l) => if r.is_err() { return },
        }
        let (trigger, term) = shutdown_channel();
        let work = f(term);
        tokio::pin!(work);
        let mut ended = false;
        tokio::select! {
            () = &mut work => ended = true,
            () = shutdown.wait() => trigger.trigger(),
            _ = leading.wait_for(|l| !*l) => trigger.trigger(),
        }
        if !ended {
            work.await;
        }
        if shutdown.is_shutdown() {
            return;
        }
        // `f` returned on its own while still leading: wait for the next term.
        if *leading.borrow() {
            tokio::select! {
                () = shutdown.wait() => return,
                r = leading.wait_for(|l| !*l) => if r.is_err() { return },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn per_revision_locks_carry_the_revision() {
        assert_eq!(
            lock_name(GATEWAY_STATUS_CONTROLLER, LockScope::PerRevision, "canary"),
            "istio-gateway-status-leader-canary"
        );
        assert_eq!(
            lock_name(GATEWAY_DEPLOYMENT_CONTROLLER, LockScope::PerRevision, ""),
            "istio-gateway-deployment-default"
        );
        assert_eq!(lock_name(ANALYZE_CONTROLLER, LockScope::Shared, "canary"), "istio-analyze-leader");
    }

    #[test]
    fn lock_kinds_are_istiods() {
        // istiod: NewPerRevisionLeaderElection and NewLeaseLeaderElection (status) use Leases,
        // NewLeaderElection (ingress, analysis, namespace controller, …) ConfigMaps.
        assert_eq!(istiod_lock_kind(GATEWAY_STATUS_CONTROLLER, LockScope::PerRevision), LockKind::Lease);
        assert_eq!(istiod_lock_kind(GATEWAY_DEPLOYMENT_CONTROLLER, LockScope::PerRevision), LockKind::Lease);
        assert_eq!(istiod_lock_kind(STATUS_CONTROLLER, LockScope::Shared), LockKind::Lease);
        for lock in [INGRESS_CONTROLLER, ANALYZE_CONTROLLER, NAMESPACE_CONTROLLER, IP_AUTOALLOCATE_CONTROLLER]
        {
            assert_eq!(istiod_lock_kind(lock, LockScope::Shared), LockKind::ConfigMap, "{lock}");
        }
    }

    #[test]
    fn configmap_records_read_and_write_client_gos_json() {
        // As client-go's ConfigMapLock writes it (Istio's fork adds holderKey).
        let text = r#"{"holderIdentity":"istiod-7c9f","holderKey":"default","leaseDurationSeconds":30,"acquireTime":"2026-12-05T15:47:51Z","renewTime":"2026-12-05T15:48:06Z","leaderTransitions":2}"#;
        let cm = ConfigMap {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([(
                    CONFIGMAP_RECORD_ANNOTATION.to_string(),
                    text.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let record = LockRecord::from_configmap(&cm).unwrap();
        assert_eq!(record.holder_identity, "istiod-7c9f");
        assert_eq!(record.holder_key, "default");
        assert_eq!(record.lease_duration_seconds, 30);
        assert_eq!(record.leader_transitions, 2);
        assert_eq!(record.renew_time.unwrap().as_second(), 1_796_485_686);
        let back: serde_json::Value = serde_json::from_str(&record.to_configmap_annotation()).unwrap();
        assert_eq!(back, serde_json::from_str::<serde_json::Value>(text).unwrap());
        // Sub-second times are written as whole seconds (metav1.Time).
        let precise = LockRecord { renew_time: Some("2026-12-05T15:48:06.75Z".parse().unwrap()), ..record };
        assert!(precise.to_configmap_annotation().contains(r#""renewTime":"2026-12-05T15:48:06Z""#));
        // No annotation: the empty record; a foreign annotation: an error naming it.
        assert_eq!(LockRecord::from_configmap(&ConfigMap::default()).unwrap(), LockRecord::default());
        let mut bad = cm.clone();
        bad.metadata.annotations.as_mut().unwrap().insert(CONFIGMAP_RECORD_ANNOTATION.into(), "{".into());
        assert!(LockRecord::from_configmap(&bad).unwrap_err().contains(CONFIGMAP_RECORD_ANNOTATION));
    }

    #[test]
    fn options_follow_istiod() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_string())
        };
        let o = LeaderElectionOptions::from_lookup(env(&[])).unwrap();
        assert_eq!(o.namespace, "istio-system");
        assert_eq!(o.revision, "default");
        assert!(o.enabled);
        assert!(o.identity.starts_with("unknown-"), "{}", o.identity);
        assert_eq!(
            (o.lease_duration, o.renew_deadline, o.retry_period),
            (Duration::from_secs(30), Duration::from_secs(15), Duration::from_millis(7500))
        );
        let o = LeaderElectionOptions::from_lookup(env(&[
            ("POD_NAME", "istiod-1"),
            ("POD_NAMESPACE", "mesh"),
            ("REVISION", "canary"),
            ("PILOT_ENABLE_LEADER_ELECTION", "false"),
        ]))
        .unwrap();
        assert_eq!(
            (o.identity.as_str(), o.namespace.as_str(), o.revision.as_str()),
            ("istiod-1", "mesh", "canary")
        );
        assert!(!o.enabled);
        let err = LeaderElectionOptions::from_lookup(env(&[("PILOT_ENABLE_LEADER_ELECTION", "maybe")]))
            .unwrap_err();
        assert!(err.contains("PILOT_ENABLE_LEADER_ELECTION"), "{err}");
    }
}
