//! The one door into the push model: every change the DiscoveryServer must act on arrives as an
//! [`Input`] through an [`Inputs`] handle, and the server's debounce loop turns what it takes into a
//! [`PushRequest`] with its reason, as istiod turns each of its inputs into a `ConfigUpdate`
//! (`pilot/pkg/bootstrap/server.go`: config and registry handlers, the mesh watcher's full push).
//!
//! ```text
//!  config handlers ─┐                                  ┌─► mesh settings replaced (full push, Global)
//!  registry events ─┤                                  ├─► Gateway API cluster objects (full push, Global)
//!  MCP mesh config ─┼─► Inputs::send ─► pending ─► take ─┼─► secrets: SDS push, now, to the connections
//!  Gateway API objs ┤   (merged, never grows)           │   watching them (non-full, reason `secret`)
//!  Secret watches ──┤                                  └─► PushRequest merged ─► debounce ─► push
//!  JWKS, /debug ────┘
//! ```
//!
//! An [`Inputs`] handle may exist before the server (the binary makes one and hands clones to the
//! sources that need it, e.g. the MCP client's mesh handler, then to
//! [`ServerOptions::inputs`](crate::ServerOptions::inputs)); what is sent before the
//! server runs is applied to its first snapshot. Sending never blocks and never pushes by itself.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex, PoisonError},
};

use model::push::{MeshSettings, PushRequest};
use tokio::sync::Notify;

/// One change for the push model.
#[derive(Debug)]
pub enum Input {
    /// A config, service or endpoint change (Istio's `ConfigUpdate`); merged with those pending.
    Config(PushRequest),
    /// New mesh settings (mesh config received at run time, e.g. over MCP). Settings equal to those
    /// in force change nothing; others replace them and cause a full push (reason `global`), as
    /// istiod's mesh watcher does.
    Mesh(Box<MeshSettings>),
    /// New mesh networks (`meshNetworks`, kept apart from the mesh config by their own source: the
    /// mesh settings in force keep them across [`Input::Mesh`]). A changed value causes a full push
    /// (reason `global`), as istiod's `NetworksTrigger`.
    MeshNetworks(Arc<model::network::MeshNetworks>),
    /// What the cluster says about namespaces, Secrets and Service addresses, for the Gateway API
    /// converter. A change causes a full push (reason `global`): the converter reads it on the next
    /// push context build.
    GatewayApiObjects(gateway::KubeObjects),
    /// Secrets whose content changed. Pushed over SDS only, without a new push context, to the
    /// connections that watch them, each with the changed names it watches (istiod: a non-full push
    /// naming the Secrets, reason `secret`; `pilot/pkg/xds/sds.go`, `credentials/kube`).
    Secrets(SecretsChanged),
}

/// Secrets whose content changed, as their sources name them (merged by union).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretsChanged {
    /// Kubernetes Secrets `(namespace, name)` served as `credentialName` secrets (from the cluster's
    /// Secret watch or `kind: Secret` documents in `--config-dir`); a connection is concerned when one
    /// of its SDS names resolves to one of them ([`sds::CredentialSecrets::affected_names`]).
    pub kubernetes: BTreeSet<sds::credentials::SecretKey>,
    /// SDS names of certificate files (`file-cert:CERT~KEY`, `file-root:CA`); a connection is
    /// concerned when it watches the name.
    pub files: BTreeSet<String>,
}

impl SecretsChanged {
    /// Changed Kubernetes Secrets.
    pub fn kubernetes(keys: BTreeSet<sds::credentials::SecretKey>) -> Self {
        SecretsChanged { kubernetes: keys, files: BTreeSet::new() }
    }

    /// Changed certificate files, by SDS name.
    pub fn files(names: BTreeSet<String>) -> Self {
        SecretsChanged { kubernetes: BTreeSet::new(), files: names }
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.kubernetes.is_empty() && self.files.is_empty()
    }

    /// The names of `watched` (a connection's SDS subscriptions, its proxy in `proxy_namespace`) that
    /// these changes concern.
    pub fn affected(&self, watched: &BTreeSet<String>, proxy_namespace: &str) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = watched.intersection(&self.files).cloned().collect();
        names.extend(sds::CredentialSecrets::affected_names(watched, proxy_namespace, &self.kubernetes));
        names
    }
}

/// What has been sent and not yet taken: at most one of each (later replaces earlier, requests merge).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    pub(crate) request: Option<PushRequest>,
    pub(crate) mesh: Option<MeshSettings>,
    pub(crate) networks: Option<Arc<model::network::MeshNetworks>>,
    pub(crate) gateway_objects: Option<gateway::KubeObjects>,
    pub(crate) secrets: SecretsChanged,
}

#[derive(Debug, Default)]
struct Shared {
    pending: Mutex<Pending>,
    wake: Notify,
}

/// A handle for sending [`Input`]s to one DiscoveryServer; cheap to clone. Memory is bounded: pending
/// inputs merge into one slot per kind of input.
#[derive(Clone, Debug, Default)]
pub struct Inputs(Arc<Shared>);

impl Inputs {
    /// A new handle with nothing pending.
    pub fn new() -> Inputs {
        Inputs::default()
    }

    /// Queues `input` and wakes the server's loop. Never blocks.
    pub fn send(&self, input: Input) {
        let mut pending = self.0.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match input {
            Input::Config(request) => match pending.request.as_mut() {
                Some(p) => p.merge_from(request),
                None => pending.request = Some(request),
            },
            Input::Mesh(mesh) => pending.mesh = Some(*mesh),
            Input::MeshNetworks(networks) => pending.networks = Some(networks),
            Input::GatewayApiObjects(objects) => pending.gateway_objects = Some(objects),
            Input::Secrets(changed) => {
                pending.secrets.kubernetes.extend(changed.kubernetes);
                pending.secrets.files.extend(changed.files);
            }
        }
        drop(pending);
        self.0.wake.notify_one();
    }

    /// Takes everything pending.
    pub(crate) fn take(&self) -> Pending {
        std::mem::take(&mut *self.0.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Completes when something was sent since the last wake-up.
    pub(crate) async fn notified(&self) {
        self.0.wake.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use model::push::TriggerReason;

    use super::*;

    #[test]
    fn pending_inputs_merge_into_one_slot_each() {
        let inputs = Inputs::new();
        let key = |name: &str| model::ConfigKey {
            kind: api::Kind::VirtualService,
            namespace: "default".into(),
            name: name.into(),
        };
        inputs.send(Input::Config(PushRequest::config([key("a")], TriggerReason::Config)));
        inputs.send(Input::Config(PushRequest::config([key("b")], TriggerReason::Config)));
        let first = MeshSettings { domain_suffix: "first.local".into(), ..MeshSettings::default() };
        let second = MeshSettings { domain_suffix: "second.local".into(), ..MeshSettings::default() };
        inputs.send(Input::Mesh(Box::new(first)));
        inputs.clone().send(Input::Mesh(Box::new(second.clone())));
        let taken = inputs.take();
        let request = taken.request.expect("merged request");
        assert_eq!(request.configs_updated.len(), 2, "{request:?}");
        assert_eq!(taken.mesh, Some(second), "the later mesh settings win");
        assert!(taken.gateway_objects.is_none());
        assert!(taken.secrets.is_empty());
        let again = inputs.take();
        assert!(again.request.is_none() && again.mesh.is_none(), "taking empties the slots");
    }

    #[test]
    fn secret_changes_merge_and_concern_the_names_a_connection_watches() {
        let inputs = Inputs::new();
        inputs
            .send(Input::Secrets(SecretsChanged::files(BTreeSet::from(["file-root:/a/ca.pem".to_owned()]))));
        inputs.send(Input::Secrets(SecretsChanged::kubernetes(BTreeSet::from([(
            "apps".to_owned(),
            "gw-cert".to_owned(),
        )]))));
        let taken = inputs.take().secrets;
        assert_eq!(taken.files.len() + taken.kubernetes.len(), 2, "{taken:?}");
        let watched = BTreeSet::from([
            "file-root:/a/ca.pem".to_owned(),
            "kubernetes://gw-cert".to_owned(),
            "kubernetes://gw-cert-cacert".to_owned(),
            "kubernetes://other".to_owned(),
            "file-root:/b/ca.pem".to_owned(),
        ]);
        let affected = taken.affected(&watched, "apps");
        assert_eq!(
            affected,
            BTreeSet::from([
                "file-root:/a/ca.pem".to_owned(),
                "kubernetes://gw-cert".to_owned(),
                "kubernetes://gw-cert-cacert".to_owned(),
            ])
        );
        assert!(
            taken.affected(&watched, "elsewhere").len() == 1,
            "kubernetes:// names resolve in the proxy's namespace"
        );
    }
}
