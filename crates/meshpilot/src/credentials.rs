//! `credentialName` secrets from the cluster: the Secret watch (`kube_source::secrets`) feeding the
//! discovery server's [`sds::CredentialSecrets`], each change pushed over SDS to the connections using
//! the Secret (docs/GATEWAY-API.md, "HTTPS gateways and credentialName").

use std::{sync::Arc, time::Duration};

use discovery::{DiscoveryServer, Input, SecretsChanged};
use kube_source::secrets::{SecretChange, watch_secrets};
use sds::credentials::{KUBERNETES_SOURCE, SecretData};
use tracing::info;

/// client-go's watch backoff (800 ms, capped at 30 s), as the other watches.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(800), Duration::from_secs(30));

/// Watches `cluster` until `shutdown` and keeps `server`'s credential secrets
/// up to date.
///
/// # Errors
/// A message when the cluster cannot be reached to start the watch.
pub async fn run_kube_secrets(
    cluster: kube_source::Cluster,
    server: Arc<DiscoveryServer>,
    shutdown: model::Shutdown,
) -> Result<(), String> {
    let connection = cluster.connect().map_err(|e| e.to_string())?;
    let store = server.credentials().clone();
    let apply = move |changes: Vec<SecretChange>| {
        let mut changed = std::collections::BTreeSet::new();
        for c in changes {
            let (key, data) = match c {
                SecretChange::Upsert { key, data } => (key, Some(SecretData { data })),
                SecretChange::Delete { key } => (key, None),
            };
            if store.apply(KUBERNETES_SOURCE, key.clone(), data) {
                changed.insert(key);
            }
        }
        if !changed.is_empty() {
            server.inputs().send(Input::Secrets(SecretsChanged::kubernetes(changed)));
        }
    };
    let synced = || info!("Kubernetes Secrets listed for credentialName secrets");
    watch_secrets(connection.client, BACKOFF, apply, synced, shutdown).await;
    Ok(())
}
