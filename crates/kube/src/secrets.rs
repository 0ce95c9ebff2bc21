//! The cluster's Secrets for `credentialName` SDS secrets (Istio's credentials controller,
//! `pilot/pkg/credentials/kube/secrets.go`): one watch on every namespace's Secrets, without the two
//! kinds Istio filters out for size (`SecretsFieldSelector`: Helm releases and service-account
//! tokens), handed on as [`SecretChange`]s with their `data` only (no metadata, no annotations). The
//! consumer (`meshpilot-sds`'s `CredentialSecrets`) decides which keys it reads and pushes the
//! proxies using them. Secret contents never reach logs: only `namespace/name` and counts are logged.

use std::{collections::BTreeMap, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};

use crate::relist::{Change, ObjectKey, Relist, namespaced_key};

/// Istio's field selector of the Secret watch (`SecretsFieldSelector`).
pub const SECRETS_FIELD_SELECTOR: &str = "type!=helm.sh/release.v1,type!=kubernetes.io/service-account-token";

/// One Secret appearing, changing or going away.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretChange {
    /// Added or updated: its `data`, decoded.
    Upsert {
        /// `(namespace, name)`.
        key: ObjectKey,
        /// The Secret's `data` by key.
        data: BTreeMap<String, Vec<u8>>,
    },
    /// Deleted (or missing from a relist).
    Delete {
        /// `(namespace, name)`.
        key: ObjectKey,
    },
}

impl std::fmt::Debug for SecretChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretChange::Upsert { key, data } => f
                .debug_struct("Upsert")
                .field("key", key)
                .field("keys", &data.keys().collect::<Vec<_>>())
                .finish(),
            SecretChange::Delete { key } => f.debug_struct("Delete").field("key", key).finish(),
        }
    }
}

fn change(c: Change<ObjectKey, Secret>) -> SecretChange {
    match c {
        Change::Added(s) | Change::Updated(s) => {
            let key = namespaced_key(&s);
            let data = s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
            SecretChange::Upsert { key, data }
        }
        Change::Deleted(key) => SecretChange::Delete { key },
    }
}

/// Watches every namespace's Secrets (with [`SECRETS_FIELD_SELECTOR`]) until `shutdown`, calling
/// `apply` with each batch of changes (the first list as one batch) and `synced` once after the first
/// complete list. A failed list or watch is logged and retried with `backoff` (initial, max).
pub async fn watch_secrets(
    client: Client,
    backoff: (Duration, Duration),
    mut apply: impl FnMut(Vec<SecretChange>),
    synced: impl FnOnce(),
    mut shutdown: model::Shutdown,
) {
    let config = watcher::Config::default().fields(SECRETS_FIELD_SELECTOR);
    let stream =
        watcher(Api::<Secret>::all(client), config).backoff(crate::client::watch_backoff(backoff)).boxed();
    let follow = Relist::new(namespaced_key).follow(
        stream,
        |changes| apply(changes.into_iter().map(change).collect()),
        synced,
        |err| tracing::warn!(what = "Secret", error = %err, "watch failed; retrying with backoff"),
    );
    tokio::select! {
        () = follow => {}
        () = shutdown.wait() => {}
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use kube::api::ObjectMeta;

    use super::*;

    #[test]
    fn changes_carry_data_and_debug_hides_it() {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("cert".into()),
                namespace: Some("gw".into()),
                ..Default::default()
            },
            data: Some([("tls.key".to_string(), ByteString(b"PRIVATE".to_vec()))].into()),
            ..Default::default()
        };
        let c = change(Change::Added(secret));
        let SecretChange::Upsert { key, data } = &c else { panic!("{c:?}") };
        assert_eq!(key, &("gw".to_string(), "cert".to_string()));
        assert_eq!(data["tls.key"], b"PRIVATE");
        let shown = format!("{c:?}");
        assert!(shown.contains("tls.key") && !shown.contains("PRIVATE"), "{shown}");
        let d = change(Change::Deleted(("gw".into(), "cert".into())));
        assert_eq!(d, SecretChange::Delete { key: ("gw".into(), "cert".into()) });
    }
}
