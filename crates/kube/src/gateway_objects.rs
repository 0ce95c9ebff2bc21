//! What the Gateway API converter needs from the cluster besides config ([`gateway::KubeObjects`]):
//! Namespaces with their labels (`allowedRoutes` namespace selectors), which Secrets exist
//! (`certificateRefs`), and the external (load-balancer) addresses of Services (a Gateway's
//! `status.addresses`, Istio's `ClusterExternalAddresses`). Istio's gateway controller reads the same
//! three from its informers.
//!
//! ```text
//!  watch Namespaces ─┐
//!  watch Secrets (metadata only) ─┼─► GatewayObjects (state) ──► watch::Receiver<KubeObjects> (after sync)
//!  watch Services ───┘
//! ```
//!
//! Each watch goes through a [`Relist`]. Nothing is published until all three have listed once; then
//! every change that alters [`KubeObjects`] publishes a new value (a Service whose load-balancer
//! addresses did not change publishes nothing). Secrets are watched metadata-only: only their names are
//! needed, their data never leaves the API server. A Secret list that is refused (RBAC) leaves
//! `secrets: None` (every reference taken as valid), as from a config directory.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use gateway::KubeObjects;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use kube::{Api, Client, core::PartialObjectMeta};
use model::Shutdown;
use tokio::sync::watch;

use crate::{
    client::{self, KubeError},
    relist::{Change, ObjectKey, Relist, name_key, namespaced_key},
};

/// Settings of [`GatewayObjects`].
#[derive(Clone, Debug)]
pub struct GatewayObjectsOptions {
    /// DNS suffix of Service hostnames (`cluster.local`).
    pub domain_suffix: String,
    /// Watch retry backoff (initial, max).
    pub backoff: (Duration, Duration),
}

impl Default for GatewayObjectsOptions {
    fn default() -> Self {
        GatewayObjectsOptions {
            domain_suffix: "cluster.local".into(),
            backoff: (Duration::from_secs(1), Duration::from_secs(30)),
        }
    }
}

#[derive(Default)]
struct State {
    objects: KubeObjects,
    /// Secrets seen so far (published once their list is done).
    secrets: BTreeSet<(String, String)>,
    /// Namespaces, Secrets, Services listed.
    listed: [bool; 3],
    /// The Secret list failed before it ever succeeded (no permission): `secrets: None`.
    secrets_unavailable: bool,
}

/// The cluster's Namespaces, Secrets and Service addresses for the Gateway API converter.
#[derive(Clone)]
pub struct GatewayObjects {
    config: kube::Config,
    options: GatewayObjectsOptions,
    state: Arc<Mutex<State>>,
    tx: Arc<watch::Sender<Option<KubeObjects>>>,
}

impl std::fmt::Debug for GatewayObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayObjects").field("options", &self.options).finish_non_exhaustive()
    }
}

impl GatewayObjects {
    /// Watches for the cluster of `config` once [`GatewayObjects::run`] runs.
    pub fn new(config: kube::Config, options: GatewayObjectsOptions) -> Self {
        GatewayObjects { config, options, state: Arc::default(), tx: Arc::new(watch::Sender::new(None)) }
    }

    /// `None` until every watch has listed once, then each new [`KubeObjects`].
    pub fn subscribe(&self) -> watch::Receiver<Option<KubeObjects>> {
        self.tx.subscribe()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publishes the current objects when all watches have listed and they changed.
    fn publish(&self, state: &State) {
        if !state.listed.iter().all(|l| *l) {
            return;
        }
        let mut objects = state.objects.clone();
        objects.secrets = (!state.secrets_unavailable).then(|| state.secrets.clone());
        self.tx.send_if_modified(|current| {
            if current.as_ref() == Some(&objects) {
                return false;
            }
            *current = Some(objects);
            true
        });
    }

    fn listed(&self, index: usize) {
        let mut state = self.state();
        state.listed[index] = true;
        if index == 1 {
            state.secrets_unavailable = false;
        }
        self.publish(&state);
    }

    fn namespaces_changed(&self, changes: Vec<Change<String, Namespace>>) {
        let mut state = self.state();
        for change in changes {
            match change {
                Change::Added(ns) | Change::Updated(ns) => {
                    let labels = ns.metadata.labels.clone().unwrap_or_default();
                    state.objects.namespaces.insert(name_key(&ns), labels);
                }
                Change::Deleted(name) => {
                    state.objects.namespaces.remove(&name);
                }
            }
        }
        self.publish(&state);
    }

    fn secrets_changed(&self, changes: Vec<Change<ObjectKey, PartialObjectMeta<Secret>>>) {
        let mut state = self.state();
        for change in changes {
            match change {
                Change::Added(s) | Change::Updated(s) => {
                    state.secrets.insert(namespaced_key(&s));
                }
                Change::Deleted(key) => {
                    state.secrets.remove(&key);
                }
            }
        }
        self.publish(&state);
    }

    fn services_changed(&self, changes: Vec<Change<ObjectKey, Service>>) {
        let mut state = self.state();
        let suffix = &self.options.domain_suffix;
        for change in changes {
            let (ns, name, addresses) = match change {
                Change::Added(svc) | Change::Updated(svc) => {
                    let (ns, name) = namespaced_key(&svc);
                    (ns, name, load_balancer_addresses(&svc))
                }
                Change::Deleted((ns, name)) => (ns, name, Vec::new()),
            };
            let key = (ns.clone(), format!("{name}.{ns}.svc.{suffix}"));
            if addresses.is_empty() {
                state.objects.external_addresses.remove(&key);
            } else {
                state.objects.external_addresses.insert(key, addresses);
            }
        }
        self.publish(&state);
    }

    /// Watches until `shutdown`.
    ///
    /// # Errors
    /// No client can be made from the configuration.
    pub async fn run(self, mut shutdown: Shutdown) -> Result<(), KubeError> {
        let client = client::connection(self.config.clone())?.client;
        tokio::select! {
            () = shutdown.wait() => {}
            () = self.watch_all(client) => {}
        }
        Ok(())
    }

    async fn watch_all(&self, client: Client) {
        let backoff = self.options.backoff;
        let warn = |what: &'static str| {
            move |err: kube::runtime::watcher::Error| {
                tracing::warn!(what, error = %err, "Gateway API inputs: watch failed; retrying with backoff");
            }
        };
        let namespaces = Relist::new(name_key).follow(
            client::watch(Api::<Namespace>::all(client.clone()), backoff),
            |c| self.namespaces_changed(c),
            || self.listed(0),
            warn("Namespace"),
        );
        let secrets = self.watch_secrets(&client);
        let services = Relist::new(namespaced_key).follow(
            client::watch(Api::<Service>::all(client.clone()), backoff),
            |c| self.services_changed(c),
            || self.listed(2),
            warn("Service"),
        );
        tokio::join!(namespaces, secrets, services);
    }

    /// Which Secrets exist: names only (metadata-only watch). Kept apart so that the SDS side's own
    /// Secret watch and this listing do not depend on each other.
    async fn watch_secrets(&self, client: &Client) {
        let api = Api::<PartialObjectMeta<Secret>>::all(client.clone());
        Relist::new(namespaced_key)
            .follow(
                client::watch(api, self.options.backoff),
                |c| self.secrets_changed(c),
                || self.listed(1),
                |err| {
                    tracing::warn!(what = "Secret", error = %err, "Gateway API inputs: watch failed; retrying with backoff");
                    let mut state = self.state();
                    if !state.listed[1] || state.secrets_unavailable {
                        // Not listable yet: certificate Secrets are not checked until they are.
                        state.listed[1] = true;
                        state.secrets_unavailable = true;
                        self.publish(&state);
                    }
                },
            )
            .await;
    }
}

/// A Service's `status.loadBalancer.ingress` addresses: IPs, else host names, in order.
fn load_balancer_addresses(svc: &Service) -> Vec<String> {
    let ingress =
        svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_ref());
    ingress
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone()))
        .filter(|a| !a.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, ServiceStatus};

    #[test]
    fn load_balancer_addresses_take_ips_then_host_names() {
        let svc = Service {
            status: Some(ServiceStatus {
                load_balancer: Some(LoadBalancerStatus {
                    ingress: Some(vec![
                        LoadBalancerIngress { ip: Some("192.0.2.1".into()), ..Default::default() },
                        LoadBalancerIngress { hostname: Some("lb.example".into()), ..Default::default() },
                    ]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(load_balancer_addresses(&svc), ["192.0.2.1", "lb.example"]);
        assert!(load_balancer_addresses(&Service::default()).is_empty());
    }
}
