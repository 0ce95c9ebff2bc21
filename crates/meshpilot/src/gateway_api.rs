//! `meshpilot discovery`'s Gateway API side with `--kubeconfig` (docs/GATEWAY-API.md): the converter's
//! cluster inputs and the status writer.
//!
//! ```text
//!  kube_source::gateway_objects (Namespaces, Secret names, Service LB addresses)
//!     └─► GatewayApiConverter::set_kube_objects + a push
//!  LeaderElection istio-gateway-status-leader-<rev> (Istio's GatewayStatusController, per revision)
//!     └─ while leading: after each push context and every second,
//!          per status the converter computed, for objects of the cluster at the same generation:
//!          kube_source::gateway_status::desired_status (live conditions merged) ─► write if it differs
//! ```
//!
//! The Gateway API objects themselves come from the Kubernetes config source (`KubeSource` watches every
//! kind of `Kind::ALL` whose CRD is installed, and starts when a CRD appears), so nothing here lists them.

use std::{collections::HashMap, sync::Arc, time::Duration};

use discovery::{DiscoveryServer, Input};
use kube_source::{
    Client,
    gateway_objects::{GatewayObjects, GatewayObjectsOptions},
    gateway_status::{STATUS_KINDS, desired_status, needs_write, replace_status},
    leader::{GATEWAY_STATUS_CONTROLLER, LeaderElection, LockScope, run_while_leading},
};
use model::{ConfigKey, ConfigStore, Shutdown};
use serde_json::Value;
use tracing::{debug, info, warn};

use crate::env::DiscoveryEnv;

/// Counter of Gateway API status writes (label `kind`): only the leader's grows.
pub const GATEWAY_STATUS_WRITES: &str = "meshpilot_gateway_status_writes_total";
/// Counter of Gateway API status passes (each compares every computed status with the cluster's).
pub const GATEWAY_STATUS_PASSES: &str = "meshpilot_gateway_status_passes_total";

/// How often the writer compares again without a new push context (a status changed by someone else,
/// a failed write).
const RECHECK: Duration = Duration::from_secs(1);

/// Starts watching the cluster's Namespaces, Secret names and Service addresses for the Gateway API
/// converter; each change is handed to the converter and pushed.
///
/// # Errors
/// The kubeconfig cannot be read.
pub async fn start_inputs(
    server: Arc<DiscoveryServer>,
    cluster: &kube_source::Cluster,
    domain: &str,
    shutdown: Shutdown,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let config = cluster.config();
    let objects = GatewayObjects::new(
        config,
        GatewayObjectsOptions { domain_suffix: domain.into(), ..Default::default() },
    );
    let mut updates = objects.subscribe();
    let watch = objects.run(shutdown.clone());
    let mut stop = shutdown;
    Ok(tokio::spawn(async move {
        tokio::pin!(watch);
        loop {
            tokio::select! {
                () = stop.wait() => return,
                r = &mut watch => {
                    if let Err(e) = r {
                        warn!(error = %e, "Gateway API: cannot watch Namespaces, Secrets and Services");
                    }
                    return;
                }
                r = updates.changed() => if r.is_err() { return },
            }
            let Some(objects) = updates.borrow_and_update().clone() else { continue };
            // A change is pushed to every proxy: the converter reads these on the next push context.
            server.inputs().send(Input::GatewayApiObjects(objects));
        }
    }))
}

/// Starts the Gateway API status writer (unless `PILOT_ENABLE_GATEWAY_API_STATUS=false`, Istio's
/// switch, default true): the election on `istio-gateway-status-leader-<revision>` and, while leading,
/// the writer over the objects of `cluster`.
///
/// # Errors
/// No Kubernetes client.
pub async fn start_status(
    server: Arc<DiscoveryServer>,
    cluster: Arc<dyn ConfigStore>,
    kube: &kube_source::Cluster,
    revision: Option<&str>,
    env: &DiscoveryEnv,
    shutdown: Shutdown,
) -> Result<Option<tokio::task::JoinHandle<()>>, String> {
    if !env.gateway_status {
        info!("Gateway API status not written (PILOT_ENABLE_GATEWAY_API_STATUS=false)");
        return Ok(None);
    }
    let mut leader = env.leader.clone();
    leader.revision = revision.unwrap_or_default().to_string();
    let client = kube.connect().map_err(|e| e.to_string())?.client;
    let election =
        LeaderElection::new(client.clone(), GATEWAY_STATUS_CONTROLLER, LockScope::PerRevision, leader);
    info!(lock = %election.lock(), "Gateway API status writer: joining leader election");
    let leadership = election.start(shutdown.clone());
    let writer = Arc::new(Writer { server, cluster, client });
    Ok(Some(tokio::spawn(async move {
        let leading = leadership.subscribe();
        run_while_leading(leading, shutdown, |term| writer.clone().run(term)).await;
        leadership.stopped().await;
    })))
}

struct Writer {
    server: Arc<DiscoveryServer>,
    cluster: Arc<dyn ConfigStore>,
    client: Client,
}

/// What was last written for an object: the computed status and the resource versions (before and
/// after the write) at which the cluster's copy is known to hold it.
struct Written {
    computed: Value,
    versions: [String; 2],
}

impl Writer {
    async fn run(self: Arc<Self>, mut term: Shutdown) {
        info!("Gateway API status writer: leading, writing status");
        let mut snapshots = self.server.push_contexts();
        let mut written: HashMap<ConfigKey, Written> = HashMap::new();
        loop {
            self.pass(&mut written).await;
            tokio::select! {
                () = term.wait() => break,
                r = snapshots.changed() => if r.is_err() { break },
                () = tokio::time::sleep(RECHECK) => {}
            }
        }
        info!("Gateway API status writer: no longer leading, stopped writing");
    }

    /// Compares every computed status with the cluster's and writes those that differ.
    async fn pass(&self, written: &mut HashMap<ConfigKey, Written>) {
        let Some(push) = self.server.push_context() else { return };
        let now = config::rfc3339(std::time::SystemTime::now());
        for status in &push.generated().statuses {
            let key = &status.key;
            if !STATUS_KINDS.contains(&key.kind) {
                continue;
            }
            // Only objects of the cluster (not of a config directory), at the generation converted
            // (Istio skips a write for an object that changed since).
            let Some(live) = self.cluster.get(key.kind, &key.namespace, &key.name) else { continue };
            if live.meta.generation != status.generation {
                continue;
            }
            let rv = &live.meta.resource_version;
            if written.get(key).is_some_and(|w| w.computed == status.status && w.versions.contains(rv)) {
                continue;
            }
            let desired =
                desired_status(key.kind, &key.namespace, live.status.as_ref(), &status.status, &now);
            if !needs_write(live.status.as_ref(), &desired) {
                continue;
            }
            match replace_status(&self.client, key.kind, &key.namespace, &key.name, rv, &desired).await {
                Ok(new_rv) => {
                    metrics::counter!(GATEWAY_STATUS_WRITES, "kind" => key.kind.as_str()).increment(1);
                    debug!(kind = %key.kind, namespace = %key.namespace, name = %key.name, "Gateway API status written");
                    written.insert(
                        key.clone(),
                        Written { computed: status.status.clone(), versions: [rv.clone(), new_rv] },
                    );
                }
                Err(e) if e.is_not_found() || e.is_conflict() => {
                    // Gone, or changed since read: the next pass sees the new version.
                    debug!(kind = %key.kind, namespace = %key.namespace, name = %key.name, error = %e, "Gateway API status not written");
                }
                Err(e) => {
                    warn!(kind = %key.kind, namespace = %key.namespace, name = %key.name, error = %e, "cannot write Gateway API status; retrying");
                }
            }
        }
        written.retain(|k, _| push.generated().statuses.iter().any(|s| &s.key == k));
        metrics::counter!(GATEWAY_STATUS_PASSES).increment(1);
    }
}
