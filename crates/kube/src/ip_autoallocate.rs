//! ServiceEntry VIP auto-allocation in a cluster (Istio's `ipallocate` controller): the leader of
//! `istio-ip-autoallocate` (a ConfigMap lock, as istiod) writes `status.addresses` (`[{value, host}]`)
//! of every ServiceEntry that should get addresses ([`model::autoallocate`], the rules) and reads the
//! existing ones back first, so addresses are stable across restarts and leader changes.
//!
//! istiod writes with a JSON patch whose `test` operation checks the status it decided on; here the
//! status is written with a merge patch carrying the object's `resourceVersion`, which the API server
//! checks the same way (a concurrent change is a conflict, retried with the newer object). The rules
//! are pure; this is the edge: the cluster's ServiceEntries from the CRD source, the writes, the term.

use std::{collections::HashMap, net::IpAddr, sync::Arc, time::Duration};

use api::Kind;
use kube::Client;
use model::{
    Config, ConfigStoreController,
    autoallocate::{Allocator, Entry, Owner, StatusAddress, addresses_json, status_addresses},
    store::Shutdown,
};
use serde_json::json;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::{
    leader::{
        IP_AUTOALLOCATE_CONTROLLER, LeaderElection, LeaderElectionOptions, LockScope, run_while_leading,
    },
    status::patch_status,
};

/// Re-reads every ServiceEntry this often besides the change notifications (a failed write retried).
const RESYNC: Duration = Duration::from_secs(30);

/// The cluster allocator: the CRD source's ServiceEntries in, status writes out, while leading.
pub struct IpAutoallocator {
    client: Client,
    source: Arc<dyn ConfigStoreController>,
    changed: Arc<Notify>,
}

impl IpAutoallocator {
    /// An allocator over the ServiceEntries of `source` (the cluster's CRD source), writing through
    /// `client`. Registers a change handler on `source` right away.
    pub fn new(client: Client, source: Arc<dyn ConfigStoreController>) -> Arc<IpAutoallocator> {
        let changed = Arc::new(Notify::new());
        let notify = changed.clone();
        source.register_event_handler(
            Kind::ServiceEntry,
            Arc::new(move |_, _, _| {
                notify.notify_one();
                Ok(())
            }),
        );
        Arc::new(IpAutoallocator { client, source, changed })
    }

    /// Joins the election on `istio-ip-autoallocate` and allocates while leading, until `shutdown`.
    pub fn start(
        self: Arc<Self>,
        options: LeaderElectionOptions,
        shutdown: Shutdown,
    ) -> tokio::task::JoinHandle<()> {
        let election =
            LeaderElection::new(self.client.clone(), IP_AUTOALLOCATE_CONTROLLER, LockScope::Shared, options);
        info!(lock = %election.lock(), "ServiceEntry IP auto-allocation: joining leader election");
        let leadership = election.start(shutdown.clone());
        tokio::spawn(async move {
            run_while_leading(leadership.subscribe(), shutdown, |term| self.clone().lead(term)).await;
            leadership.stopped().await;
        })
    }

    /// One leadership term (Istio's `Run`): waits for the source, warms an allocator with every
    /// entry's addresses, then reconciles on every change.
    async fn lead(self: Arc<Self>, mut term: Shutdown) {
        while !self.source.has_synced() {
            tokio::select! {
                () = term.wait() => return,
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        let mut allocator = Allocator::new();
        let configs = self.source.list(Kind::ServiceEntry, None);
        let mut conflicts = allocator.warm(&entries(&configs));
        info!(
            entries = configs.len(),
            conflicts = conflicts.len(),
            "ServiceEntry IP auto-allocation: leading"
        );
        // The resource version each entry was last written from: not decided again until it changes.
        let mut written: HashMap<Owner, String> = HashMap::new();
        loop {
            let configs = self.source.list(Kind::ServiceEntry, None);
            let all = entries(&configs);
            for conflict in std::mem::take(&mut conflicts) {
                warn!(owner = ?conflict.owner, addresses = ?conflict.addresses, "auto-allocated address conflict: reassigning");
                for (owner, addresses) in allocator.resolve_conflict(true, &conflict, &all) {
                    let Some(config) = configs.iter().find(|c| owner_of(c) == owner) else { continue };
                    self.write(&mut allocator, config, &addresses, &mut written).await;
                }
            }
            for (config, entry) in configs.iter().zip(&all) {
                if written.get(&entry.owner) == Some(&config.meta.resource_version) {
                    continue;
                }
                let (desired, found) = allocator.reconcile(true, entry, false);
                conflicts.extend(found);
                if let Some(addresses) = desired {
                    self.write(&mut allocator, config, &addresses, &mut written).await;
                }
            }
            if !conflicts.is_empty() {
                continue;
            }
            tokio::select! {
                () = term.wait() => return,
                () = self.changed.notified() => {}
                () = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    /// Writes `addresses` as the status of `config`, at its resource version; on failure releases what
    /// was newly allocated for it (Istio's `freeAddresses`), so the next round decides again.
    async fn write(
        &self,
        allocator: &mut Allocator,
        config: &Config,
        addresses: &[StatusAddress],
        written: &mut HashMap<Owner, String>,
    ) {
        let owner = owner_of(config);
        let patch = json!({
            "metadata": {"resourceVersion": config.meta.resource_version},
            "status": {"addresses": addresses_json(addresses)},
        });
        let result =
            patch_status(&self.client, Kind::ServiceEntry, &config.meta.namespace, &config.meta.name, &patch)
                .await;
        match result {
            Ok(()) => {
                debug!(namespace = %owner.0, name = %owner.1, addresses = addresses.len(), "status.addresses written");
                written.insert(owner, config.meta.resource_version.clone());
            }
            Err(e) => {
                let old: Vec<IpAddr> =
                    status_addresses(config.status.as_ref()).iter().map(|a| a.value).collect();
                let new: Vec<IpAddr> =
                    addresses.iter().map(|a| a.value).filter(|a| !old.contains(a)).collect();
                allocator.free(&owner, &new);
                warn!(namespace = %owner.0, name = %owner.1, error = %e, "status.addresses not written; retried on the next change");
            }
        }
    }
}

fn owner_of(config: &Config) -> Owner {
    (config.meta.namespace.clone(), config.meta.name.clone())
}

/// The allocator's view of the ServiceEntries among `configs`.
fn entries(configs: &[Arc<Config>]) -> Vec<Entry<'_>> {
    configs
        .iter()
        .filter_map(|c| match &c.spec {
            api::Spec::ServiceEntry(spec) => Some(Entry {
                owner: owner_of(c),
                creation_time: c.meta.creation_timestamp.as_deref(),
                labels: &c.meta.labels,
                spec,
                status: status_addresses(c.status.as_ref()),
            }),
            _ => None,
        })
        .collect()
}
