//! Leader election on a `coordination.k8s.io/v1` Lease, as istiod does it
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
//! **Where meshpilot differs.** Every lock is a Lease: istiod keeps ConfigMap locks for its shared
//! (non-per-revision) elections for backwards compatibility with old istiods, which meshpilot has none
//! of; the Lease carries Istio's holder-key annotation ([`HOLDER_KEY_ANNOTATION`]) with the revision for
//! shared locks, as istiod's Lease locks do. istiod lets the *default* revision steal a shared lock from
//! another revision (prioritized election, driven by its default-revision watcher); meshpilot does not
//! (the first holder keeps it until it stops). Without `POD_NAME` istiod's identity is
//! `unknown-<hostname>`; meshpilot's is `unknown-<hostname>-<pid>`, so that two processes on one machine
//! never both believe they hold the lock.

use std::{collections::BTreeMap, future::Future, time::Duration};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
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

/// Settings of an election (see [`LeaderElectionOptions::from_env`] for istiod's defaults).
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
            identity: default_identity(None),
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
    /// Options from the environment through `lookup` (`std::env::var(k).ok()` in production):
    /// `POD_NAMESPACE`, `POD_NAME`, `REVISION`, `PILOT_ENABLE_LEADER_ELECTION` (default true).
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
            identity: default_identity(non_empty("POD_NAME")),
            revision: non_empty("REVISION").unwrap_or_else(|| DEFAULT_REVISION.into()),
            enabled,
            ..LeaderElectionOptions::default()
        })
    }

    /// [`LeaderElectionOptions::from_lookup`] over the process environment.
    ///
    /// # Errors
    /// As [`LeaderElectionOptions::from_lookup`].
    pub fn from_env() -> Result<Self, String> {
        Self::from_lookup(|k| std::env::var(k).ok())
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

/// `pod_name` when given, else `unknown-<hostname>-<pid>` (see the module docs).
pub fn default_identity(pod_name: Option<String>) -> String {
    pod_name.unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok())
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

/// One election: a lock name and this replica's settings. [`LeaderElection::start`] runs it.
#[derive(Clone)]
pub struct LeaderElection {
    client: Client,
    options: LeaderElectionOptions,
    lock: String,
    /// The holder key written in [`HOLDER_KEY_ANNOTATION`] (the revision for shared locks, none for
    /// per-revision locks, as istiod).
    key: Option<String>,
}

impl std::fmt::Debug for LeaderElection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElection").field("lock", &self.lock).field("options", &self.options).finish()
    }
}

impl LeaderElection {
    /// An election for `election_id` (one of this module's lock constants) in `scope`; an empty
    /// revision is [`DEFAULT_REVISION`].
    pub fn new(client: Client, election_id: &str, scope: LockScope, options: LeaderElectionOptions) -> Self {
        let mut options = options;
        if options.revision.is_empty() {
            options.revision = DEFAULT_REVISION.into();
        }
        let lock = lock_name(election_id, scope, &options.revision);
        let key = (scope == LockScope::Shared).then(|| options.revision.clone());
        LeaderElection { client, options, lock, key }
    }

    /// The Lease name.
    pub fn lock(&self) -> &str {
        &self.lock
    }

    /// The options.
    pub fn options(&self) -> &LeaderElectionOptions {
        &self.options
    }

    /// Starts the election on the current tokio runtime; it runs until `shutdown`, then releases the
    /// lease if held. Returns the leadership signal.
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
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.options.namespace);
        let mut state = Observed::default();
        let mut cycle = 0u32;
        // 0 while waiting, 1 while leading (`lock` label: the Lease name).
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
            info!(lock = %self.lock, identity = %self.options.identity, cycle, "leader election lock obtained");
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
                self.release(&api, &state).await;
                info!(lock = %self.lock, "leader election lock released");
                return;
            }
            warn!(lock = %self.lock, cycle, "leader election lock lost; trying again");
        }
    }

    /// client-go's `tryAcquireOrRenew`: `true` when this replica holds the lease after the call.
    async fn try_acquire_or_renew(&self, api: &Api<Lease>, state: &mut Observed) -> bool {
        state.held_by_other = false;
        let now = MicroTime(jiff::Timestamp::now());
        let duration_secs = i32::try_from(self.options.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let current = match api.get_opt(&self.lock).await {
            Ok(current) => current,
            Err(e) => {
                debug!(lock = %self.lock, error = %KubeError::from_kube(e, "get the lease"), "leader election: cannot read the lease");
                return false;
            }
        };
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.lock.clone()),
                    namespace: Some(self.options.namespace.clone()),
                    annotations: self.annotations(None),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.options.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match api.create(&post_params(), &lease).await {
                Ok(created) => {
                    state.observe(created.spec.unwrap_or_default());
                    true
                }
                Err(e) => {
                    debug!(lock = %self.lock, error = %KubeError::from_kube(e, "create the lease"), "leader election: lease not created");
                    false
                }
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        state.observe(spec.clone());
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let mine = holder == self.options.identity;
        if !holder.is_empty() && !mine && state.observed_at.elapsed() < self.options.lease_duration {
            state.held_by_other = true;
            return false;
        }
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.options.identity.clone()),
            lease_duration_seconds: Some(duration_secs),
            acquire_time: if mine { spec.acquire_time.clone() } else { Some(now.clone()) },
            renew_time: Some(now),
            lease_transitions: Some(if mine { transitions } else { transitions + 1 }),
            ..spec
        });
        lease.metadata.annotations = self.annotations(lease.metadata.annotations.take());
        match api.replace(&self.lock, &post_params(), &lease).await {
            Ok(updated) => {
                state.observe(updated.spec.unwrap_or_default());
                true
            }
            Err(e) => {
                debug!(lock = %self.lock, error = %KubeError::from_kube(e, "update the lease"), "leader election: lease not updated");
                false
            }
        }
    }

    /// client-go's `release`: clears the holder so another replica can take the lock at once.
    async fn release(&self, api: &Api<Lease>, state: &Observed) {
        let Ok(Some(mut lease)) = api.get_opt(&self.lock).await else { return };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.options.identity.as_str()) {
            return;
        }
        let now = MicroTime(jiff::Timestamp::now());
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..spec
        });
        lease.metadata.annotations = self.annotations(lease.metadata.annotations.take());
        if let Err(e) = api.replace(&self.lock, &post_params(), &lease).await {
            warn!(lock = %self.lock, error = %KubeError::from_kube(e, "release the lease"), "leader election: lease not released; it expires after its duration");
        }
        let _ = state;
    }

    fn annotations(&self, existing: Option<BTreeMap<String, String>>) -> Option<BTreeMap<String, String>> {
        let mut annotations = existing.unwrap_or_default();
        match &self.key {
            Some(key) => {
                annotations.insert(HOLDER_KEY_ANNOTATION.into(), key.clone());
            }
            None => {
                annotations.remove(HOLDER_KEY_ANNOTATION);
            }
        }
        (!annotations.is_empty()).then_some(annotations)
    }
}

fn post_params() -> PostParams {
    PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() }
}

/// What this replica last saw of the lease, and when (client-go's `observedRecord` / `observedTime`).
struct Observed {
    record: Option<LeaseSpec>,
    observed_at: Instant,
    /// The last attempt found the lease validly held by another replica.
    held_by_other: bool,
}

impl Default for Observed {
    fn default() -> Self {
        Observed { record: None, observed_at: Instant::now(), held_by_other: false }
    }
}

impl Observed {
    fn observe(&mut self, record: LeaseSpec) {
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
