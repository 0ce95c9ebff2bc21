//! The cluster's Nodes as the injection webhook reads them for `ENABLE_NATIVE_SIDECARS=auto`
//! (istiod's webhook keeps a Node informer, `pkg/kube/inject/webhook.go`): each node's name and
//! kubelet version (`status.nodeInfo.kubeletVersion`), nothing else. Needs `list` and `watch` on
//! `nodes` (the istiod chart's ClusterRole grants them).

use std::{collections::BTreeMap, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};

/// A change of the Nodes seen by [`watch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeEvent {
    /// A full list: these nodes (name → kubelet version) and no others.
    Reset(BTreeMap<String, String>),
    /// A node added or changed, with its kubelet version (empty when it has none yet).
    Apply(String, String),
    /// A node deleted.
    Delete(String),
}

fn kubelet_version(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.kubelet_version.clone())
        .unwrap_or_default()
}

/// Watches the cluster's Nodes until `shutdown`, calling `on_event` for each change (a re-list after
/// a broken watch is a [`NodeEvent::Reset`]). Watch errors are logged and retried with backoff.
pub async fn watch(
    client: Client,
    mut on_event: impl FnMut(NodeEvent) + Send,
    mut shutdown: model::Shutdown,
) {
    let api: Api<Node> = Api::all(client);
    let mut events = watcher(api, watcher::Config::default())
        .backoff(crate::client::watch_backoff((Duration::from_millis(500), Duration::from_secs(30))))
        .boxed();
    let mut listing: Option<BTreeMap<String, String>> = None;
    loop {
        let event = tokio::select! {
            () = shutdown.wait() => return,
            event = events.next() => event,
        };
        match event {
            None => return,
            Some(Err(err)) => tracing::debug!(error = %err, "Node watch error (retried)"),
            Some(Ok(watcher::Event::Init)) => listing = Some(BTreeMap::new()),
            Some(Ok(watcher::Event::InitApply(node))) => {
                if let Some(listing) = listing.as_mut() {
                    listing.insert(node.metadata.name.clone().unwrap_or_default(), kubelet_version(&node));
                }
            }
            Some(Ok(watcher::Event::InitDone)) => {
                let nodes = listing.take().unwrap_or_default();
                tracing::debug!(nodes = nodes.len(), "Nodes listed");
                on_event(NodeEvent::Reset(nodes));
            }
            Some(Ok(watcher::Event::Apply(node))) => {
                on_event(NodeEvent::Apply(
                    node.metadata.name.clone().unwrap_or_default(),
                    kubelet_version(&node),
                ));
            }
            Some(Ok(watcher::Event::Delete(node))) => {
                on_event(NodeEvent::Delete(node.metadata.name.clone().unwrap_or_default()));
            }
        }
    }
}
