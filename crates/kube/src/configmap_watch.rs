//! One ConfigMap read and watched by name (istiod's `NewConfigMapWatcher`, used for the injector's
//! `istio-sidecar-injector[-<rev>]`): [`get`] reads it once (at start, to decide whether a feature is
//! on), [`watch`] calls back with its `data` every time it is added or changed. A deleted ConfigMap
//! is logged and the last data stays in force (istiod keeps its last config too).

use std::{collections::BTreeMap, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};

use crate::client::KubeError;

/// The `data` of ConfigMap `namespace/name`, `None` when it does not exist.
///
/// # Errors
/// The API server could not be asked (the error names the ConfigMap).
pub async fn get(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    api.get_opt(name)
        .await
        .map(|cm| cm.map(|cm| cm.data.unwrap_or_default()))
        .map_err(|e| KubeError::from_kube(e, &format!("get ConfigMap {namespace}/{name}")).to_string())
}

/// Calls `on_data` with the ConfigMap's `data` each time it is added or changed (the first call
/// comes with the initial list), until `shutdown`. Watch errors are retried with backoff.
pub async fn watch(
    client: Client,
    namespace: String,
    name: String,
    on_data: impl Fn(BTreeMap<String, String>) + Send + 'static,
    mut shutdown: model::Shutdown,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api, config)
        .backoff(crate::client::watch_backoff((Duration::from_millis(500), Duration::from_secs(30))))
        .applied_objects()
        .boxed();
    let mut last: Option<String> = None;
    loop {
        tokio::select! {
            () = shutdown.wait() => return,
            event = events.next() => match event {
                None => return,
                Some(Err(err)) => tracing::debug!(error = %err, %namespace, %name, "ConfigMap watch error (retried)"),
                Some(Ok(cm)) => {
                    // A relist delivers unchanged objects again; only a new version is news.
                    let version = cm.metadata.resource_version.clone();
                    if version.is_some() && version == last {
                        continue;
                    }
                    last = version;
                    on_data(cm.data.unwrap_or_default());
                }
            },
        }
    }
}
