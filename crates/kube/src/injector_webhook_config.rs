//! The MutatingWebhookConfigurations that send pods to meshpilot's `/inject` (Istio's
//! `pkg/webhooks/webhookpatch.go`, `WebhookCertPatcher`, started by istiod's `initSidecarInjector`).
//!
//! As istiod, [`run`] keeps the `clientConfig.caBundle` of every webhook whose name ends with
//! `sidecar-injector.istio.io` in the MutatingWebhookConfigurations labelled
//! `istio.io/rev=<revision>` set to the bundle that verifies the webhook's serving certificate
//! (again when someone edits it: the configurations are watched). It creates none: Istio's
//! `istiod` chart installs `istio-sidecar-injector[-<rev>]`. Every replica patches (no election), as
//! istiod: they patch in the same shared root. Counter: `meshpilot_injector_webhook_patches`.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::{ByteString, api::admissionregistration::v1::MutatingWebhookConfiguration};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use tokio::sync::watch;

use crate::client::KubeError;
use crate::webhook_config::REV_LABEL;

/// The suffix of the injection webhooks' names (`features.InjectionWebhookName` is the chart's
/// `sidecar-injector.istio.io`; the chart names them `rev.namespace.sidecar-injector.istio.io`, …).
pub const INJECTION_WEBHOOK_SUFFIX: &str = "sidecar-injector.istio.io";

/// `current` with the caBundle of every injection webhook set to `ca_bundle`; `None` when nothing
/// changes.
pub fn patched(
    current: &MutatingWebhookConfiguration,
    ca_bundle: &str,
) -> Option<MutatingWebhookConfiguration> {
    let mut updated = current.clone();
    let mut changed = false;
    for wh in updated.webhooks.iter_mut().flatten() {
        if !wh.name.ends_with(INJECTION_WEBHOOK_SUFFIX) {
            continue;
        }
        if wh.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()) != Some(ca_bundle.as_bytes()) {
            wh.client_config.ca_bundle = Some(ByteString(ca_bundle.as_bytes().to_vec()));
            changed = true;
        }
    }
    changed.then_some(updated)
}

/// Keeps the revision's MutatingWebhookConfigurations patched with the bundle in `ca_bundle` until
/// `shutdown`; API errors are logged and retried (100 ms → 1 min), nothing here ends the process.
pub async fn run(
    client: Client,
    revision_label: String,
    mut ca_bundle: watch::Receiver<String>,
    mut shutdown: model::Shutdown,
) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client);
    let selector = format!("{REV_LABEL}={revision_label}");
    let mut events = watcher(api.clone(), watcher::Config::default().labels(&selector))
        .backoff(crate::client::watch_backoff((Duration::from_millis(500), Duration::from_secs(30))))
        .boxed();
    let mut retry: Option<Duration> = None;
    loop {
        let bundle = ca_bundle.borrow_and_update().clone();
        match reconcile(&api, &selector, &bundle).await {
            Ok(()) => retry = None,
            Err(reason) => {
                let delay =
                    retry.map_or(Duration::from_millis(100), |d| (d * 2).min(Duration::from_secs(60)));
                tracing::info!(%reason, retry_in = ?delay, "injection webhook configuration not patched yet");
                retry = Some(delay);
            }
        }
        let sleep = tokio::time::sleep(retry.unwrap_or(Duration::from_secs(3600)));
        tokio::select! {
            () = shutdown.wait() => return,
            changed = ca_bundle.changed() => if changed.is_err() { return },
            event = events.next() => match event {
                None => return,
                Some(Err(err)) => tracing::debug!(error = %err, "MutatingWebhookConfiguration watch error (retried)"),
                Some(Ok(_)) => {}
            },
            () = sleep, if retry.is_some() => {}
        }
    }
}

async fn reconcile(
    api: &Api<MutatingWebhookConfiguration>,
    selector: &str,
    bundle: &str,
) -> Result<(), String> {
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| KubeError::from_kube(e, "list MutatingWebhookConfigurations").to_string())?;
    let mut result = Ok(());
    for current in &list.items {
        let Some(updated) = patched(current, bundle) else { continue };
        let name = current.metadata.name.clone().unwrap_or_default();
        match api.replace(&name, &PostParams::default(), &updated).await {
            Ok(_) => {
                metrics::counter!("meshpilot_injector_webhook_patches").increment(1);
                tracing::info!(%name, "patched the caBundle of MutatingWebhookConfiguration");
            }
            Err(err) => {
                result =
                    Err(KubeError::from_kube(err, &format!("update MutatingWebhookConfiguration {name}"))
                        .to_string());
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, WebhookClientConfig};

    use super::*;

    fn config(webhooks: &[(&str, Option<&str>)]) -> MutatingWebhookConfiguration {
        MutatingWebhookConfiguration {
            webhooks: Some(
                webhooks
                    .iter()
                    .map(|(name, bundle)| MutatingWebhook {
                        name: name.to_string(),
                        client_config: WebhookClientConfig {
                            ca_bundle: bundle.map(|b| ByteString(b.as_bytes().to_vec())),
                            ..Default::default()
                        },
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn only_injection_webhooks_get_the_bundle_and_only_when_it_differs() {
        let current =
            config(&[("rev.namespace.sidecar-injector.istio.io", None), ("other.example.com", None)]);
        let updated = patched(&current, "PEM").expect("changed");
        let webhooks = updated.webhooks.unwrap();
        assert_eq!(webhooks[0].client_config.ca_bundle.as_ref().unwrap().0, b"PEM");
        assert!(webhooks[1].client_config.ca_bundle.is_none());
        let current = config(&[("object.sidecar-injector.istio.io", Some("PEM"))]);
        assert!(patched(&current, "PEM").is_none());
    }
}
