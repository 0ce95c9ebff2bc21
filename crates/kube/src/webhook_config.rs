//! The ValidatingWebhookConfigurations that point the API server at meshpilot's validating webhook
//! (Istio's `pkg/webhooks/validation/controller` and the `istio-discovery` / `default` charts).
//!
//! As istiod, [`run`] keeps every ValidatingWebhookConfiguration labelled `istio.io/rev=<revision>`
//! (`default` without `--revision`) patched: each webhook's `clientConfig.caBundle` is set to the CA
//! bundle that verifies the webhook's serving certificate (again when the bundle changes or someone
//! edits it: the configurations are watched), and a `failurePolicy: Ignore` is switched to `Fail` once
//! the webhook is seen rejecting: istiod's readiness probe, a dry-run create of the Gateway
//! `invalid-gateway` in the Istio namespace, labelled with the revision and annotated
//! `internal.istio.io/webhook-always-reject`, must fail with "denied the request" (or the Gateway
//! CRD is missing, or another webhook does not support dry run). Until then it retries with
//! exponential backoff, 100 ms to 1 min, as istiod's queue.
//!
//! Beyond istiod: when no such configuration exists at start (files-first installs, tests) meshpilot
//! creates what Istio's charts would have installed ([`default_configurations`]):
//! `istio-validator[-REV]-NS` (webhook `rev.validation.istio.io`, objects labelled with the revision)
//! and, for the default revision, `istiod-default-validator` (webhook `validation.istio.io`, objects
//! with no `istio.io/rev` label; the `default` chart). Both start with `failurePolicy: Ignore` (a fresh
//! chart install) and the CA bundle already set. A configuration deleted later is not re-created.
//!
//! **Replicas.** The patcher runs in every replica, as istiod's (not elected): they agree because they
//! patch in one root, the control plane's CA shared through `istio-ca-secret` or plugged-in `cacerts`.
//! A replica whose root is its own ([`shared_root`]) patches nothing and says why. Counters:
//! `meshpilot_webhook_config_reconciles` (passes), `meshpilot_webhook_config_patches` (writes).
//!
//! Pure parts ([`default_configurations`], [`patched`], [`shared_root`]) are unit-tested; [`run`] is tested against a
//! real API server (`crates/meshpilot/tests/it/peer/webhook_cluster.rs`).

use std::{collections::BTreeMap, time::Duration};

use futures::StreamExt;
use k8s_openapi::{
    ByteString,
    api::admissionregistration::v1::{
        RuleWithOperations, ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration,
        WebhookClientConfig,
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta},
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use tokio::sync::watch;

use crate::client::KubeError;

/// Istio's revision label.
pub const REV_LABEL: &str = "istio.io/rev";
/// Istio's `constants.AlwaysReject` annotation (the readiness probe's marker).
pub const ALWAYS_REJECT_ANNOTATION: &str = "internal.istio.io/webhook-always-reject";
/// The name of the default-revision configuration of Istio's `default` chart.
pub const DEFAULT_VALIDATOR: &str = "istiod-default-validator";

/// Where the API server sends reviews.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookClient {
    /// A URL (meshpilot outside the cluster), e.g. `https://127.0.0.1:15017/validate` (the chart's
    /// `base.validationURL`).
    Url(String),
    /// The istiod Service (`istiod[-REV]` in the Istio namespace, path `/validate`, port 443).
    Service,
}

/// What [`run`] keeps.
#[derive(Clone, Debug)]
pub struct WebhookConfigOptions {
    /// `--revision` (`None` or empty: `default`).
    pub revision: Option<String>,
    /// Istio's namespace (`POD_NAMESPACE`, `istio-system`): names the configuration and the Service,
    /// and holds the readiness probe's dry-run Gateway.
    pub istio_namespace: String,
    /// Where the API server calls the webhook.
    pub client: WebhookClient,
    /// Create the configurations when none exists at start.
    pub create_if_missing: bool,
}

impl WebhookConfigOptions {
    /// The value of `istio.io/rev` for this revision.
    pub fn revision_label(&self) -> &str {
        self.revision.as_deref().filter(|r| !r.is_empty()).unwrap_or("default")
    }

    /// `istio-validator[-REV]-NS`, the chart's name for the revision's configuration.
    pub fn validator_name(&self) -> String {
        match self.revision.as_deref().filter(|r| !r.is_empty() && *r != "default") {
            Some(rev) => format!("istio-validator-{rev}-{}", self.istio_namespace),
            None => format!("istio-validator-{}", self.istio_namespace),
        }
    }

    fn service_name(&self) -> String {
        match self.revision.as_deref().filter(|r| !r.is_empty() && *r != "default") {
            Some(rev) => format!("istiod-{rev}"),
            None => "istiod".to_string(),
        }
    }
}

/// The configurations Istio's charts install, with `ca_bundle` (PEM) set: the revision's validator
/// and, for the default revision, `istiod-default-validator`. Rules: CREATE and UPDATE of every
/// resource of `security.istio.io`, `networking.istio.io`, `telemetry.istio.io`,
/// `extensions.istio.io`, any version; `sideEffects: None`; `admissionReviewVersions: ["v1"]`;
/// `failurePolicy: Ignore`.
pub fn default_configurations(
    options: &WebhookConfigOptions,
    ca_bundle: &str,
) -> Vec<ValidatingWebhookConfiguration> {
    let rev = options.revision_label();
    let client_config = WebhookClientConfig {
        ca_bundle: Some(ByteString(ca_bundle.as_bytes().to_vec())),
        service: match &options.client {
            WebhookClient::Url(_) => None,
            WebhookClient::Service => Some(ServiceReference {
                name: options.service_name(),
                namespace: options.istio_namespace.clone(),
                path: Some("/validate".into()),
                port: None,
            }),
        },
        url: match &options.client {
            WebhookClient::Url(url) => Some(url.clone()),
            WebhookClient::Service => None,
        },
    };
    let strings = |items: &[&str]| Some(items.iter().map(|s| (*s).to_string()).collect::<Vec<_>>());
    let webhook = |name: &str, operator: &str, values: Option<Vec<String>>| ValidatingWebhook {
        name: name.to_string(),
        client_config: client_config.clone(),
        rules: Some(vec![RuleWithOperations {
            operations: strings(&["CREATE", "UPDATE"]),
            api_groups: strings(&[
                "security.istio.io",
                "networking.istio.io",
                "telemetry.istio.io",
                "extensions.istio.io",
            ]),
            api_versions: strings(&["*"]),
            resources: strings(&["*"]),
            scope: None,
        }]),
        failure_policy: Some("Ignore".into()),
        side_effects: "None".into(),
        admission_review_versions: vec!["v1".into()],
        object_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: REV_LABEL.into(),
                operator: operator.into(),
                values,
            }]),
            match_labels: None,
        }),
        ..ValidatingWebhook::default()
    };
    let labels = |extra: &[(&str, &str)]| {
        let mut labels: BTreeMap<String, String> = [
            ("app", "istiod"),
            ("istio", "istiod"),
            (REV_LABEL, rev),
            ("app.kubernetes.io/name", "istiod"),
            ("app.kubernetes.io/managed-by", "meshpilot"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
        labels.extend(extra.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())));
        Some(labels)
    };
    let mut out = vec![ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(options.validator_name()),
            labels: labels(&[]),
            ..ObjectMeta::default()
        },
        webhooks: Some(vec![webhook("rev.validation.istio.io", "In", Some(vec![rev.to_string()]))]),
    }];
    if rev == "default" {
        out.push(ValidatingWebhookConfiguration {
            metadata: ObjectMeta {
                name: Some(DEFAULT_VALIDATOR.into()),
                labels: labels(&[("istio.io/tag", "default")]),
                ..ObjectMeta::default()
            },
            webhooks: Some(vec![webhook("validation.istio.io", "DoesNotExist", None)]),
        });
    }
    out
}

/// Whether replicas serving the webhook with a certificate from a CA of `source` (`None`: a root made
/// in memory) share one root, so that the caBundle one writes verifies every replica. istiod's
/// replicas share theirs through the secret `istio-ca-secret` (or plugged-in `cacerts`); a root that
/// only this replica has must not be patched in: two replicas would overwrite each other's caBundle
/// forever and the API server's calls to the other replica would fail TLS.
///
/// # Errors
/// Why the root is this replica's own, and what to do instead (the caller logs it and patches
/// nothing).
pub fn shared_root(source: Option<&security::ca::CaSource>) -> Result<(), String> {
    use security::ca::CaSource;
    let own = match source {
        Some(CaSource::Secret(_) | CaSource::PluggedIn(_)) => return Ok(()),
        Some(CaSource::SelfSigned(dir)) => {
            format!(
                "the webhook's root is the self-signed one in --ca-dir {}, which other replicas do not share",
                dir.display()
            )
        }
        None => "the webhook's root was made in memory by this replica".to_string(),
    };
    Err(format!(
        "not patching the caBundle of ValidatingWebhookConfigurations: {own}; replicas with different \
         roots would overwrite each other's caBundle and the API server's calls to the others would fail \
         TLS. Drop --ca-dir to keep the root in the secret istio-ca-secret (as istiod), or plug in a CA \
         (ROOT_CA_DIR)"
    ))
}

/// Istio's `updateValidatingWebhookConfiguration`: `current` with every webhook's caBundle set to
/// `ca_bundle` and, when `fail_closed`, every failurePolicy set to `Fail`; `None` when nothing
/// changes. (`fail_closed` is what the caller learnt from the readiness probe; istiod probes only
/// when some webhook is not `Fail`, see [`needs_fail_closed`].)
pub fn patched(
    current: &ValidatingWebhookConfiguration,
    ca_bundle: &str,
    fail_closed: bool,
) -> Option<ValidatingWebhookConfiguration> {
    let mut updated = current.clone();
    let mut changed = false;
    for wh in updated.webhooks.iter_mut().flatten() {
        if wh.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()) != Some(ca_bundle.as_bytes()) {
            wh.client_config.ca_bundle = Some(ByteString(ca_bundle.as_bytes().to_vec()));
            changed = true;
        }
        if fail_closed && wh.failure_policy.as_deref().is_some_and(|p| p != "Fail") {
            wh.failure_policy = Some("Fail".into());
            changed = true;
        }
    }
    changed.then_some(updated)
}

/// Istio's `failurePolicyIsIgnore`: some webhook has a failurePolicy other than `Fail`.
pub fn needs_fail_closed(current: &ValidatingWebhookConfiguration) -> bool {
    current.webhooks.iter().flatten().any(|wh| wh.failure_policy.as_deref().is_some_and(|p| p != "Fail"))
}

/// Istio's `isDryRunOfInvalidConfigRejected`: dry-run creates the always-rejected Gateway and reads
/// the answer. `Ok(())` = the webhook answers (or the probe cannot tell, as istiod assumes ready);
/// `Err(reason)` otherwise.
async fn probe_rejects_invalid_config(client: &Client, options: &WebhookConfigOptions) -> Result<(), String> {
    let api = crate::client::kind_api(client, api::Kind::Gateway, Some(&options.istio_namespace));
    let schema = api::Kind::Gateway.schema();
    let object: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": schema.api_version(),
        "kind": "Gateway",
        "metadata": {
            "name": "invalid-gateway",
            "namespace": options.istio_namespace,
            "labels": {REV_LABEL: options.revision_label()},
            "annotations": {ALWAYS_REJECT_ANNOTATION: "true"},
        },
        "spec": {},
    }))
    .map_err(|e| e.to_string())?;
    let params = PostParams { dry_run: true, ..PostParams::default() };
    let mut result = api.create(&params, &object).await.map(|_| ());
    if let Err(kube::Error::Api(status)) = &result
        && status.reason == "AlreadyExists"
    {
        result = api.replace("invalid-gateway", &params, &object).await.map(|_| ());
    }
    match result {
        Ok(()) => Err("dummy invalid config not rejected".into()),
        Err(err) => {
            let text = err.to_string();
            if text.contains("denied the request") {
                Ok(())
            } else if text.contains("the server could not find the requested resource") {
                tracing::warn!(
                    "missing Gateway CRD, cannot perform validation check; assuming validation is ready"
                );
                Ok(())
            } else if text.contains("does not support dry run") {
                tracing::warn!(error = %text, "a validating webhook does not support dry run; assuming validation is ready");
                Ok(())
            } else {
                Err(format!("dummy invalid config rejected for the wrong reason: {text}"))
            }
        }
    }
}

/// Keeps the configurations labelled with the revision patched with the CA bundle in `ca_bundle`
/// (PEM; a new value re-patches them) until `shutdown` fires; see the module doc.
/// API errors are logged and retried with backoff (100 ms → 1 min); nothing here ends the process.
pub async fn run(
    client: Client,
    options: WebhookConfigOptions,
    mut ca_bundle: watch::Receiver<String>,
    mut shutdown: model::Shutdown,
) {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let selector = format!("{REV_LABEL}={}", options.revision_label());
    let mut events = watcher(api.clone(), watcher::Config::default().labels(&selector))
        .backoff(crate::client::watch_backoff((Duration::from_millis(500), Duration::from_secs(30))))
        .boxed();
    let mut first = options.create_if_missing;
    let mut ready = false;
    let mut retry: Option<Duration> = None;
    let backoff = |last: Option<Duration>| {
        last.map_or(Duration::from_millis(100), |d| (d * 2).min(Duration::from_secs(60)))
    };
    loop {
        let bundle = ca_bundle.borrow_and_update().clone();
        let outcome = reconcile(&client, &api, &options, &selector, &bundle, &mut first, &mut ready).await;
        metrics::counter!("meshpilot_webhook_config_reconciles").increment(1);
        match outcome {
            Ok(()) => retry = None,
            Err(reason) => {
                let delay = backoff(retry);
                tracing::info!(%reason, retry_in = ?delay, "validating webhook configuration not reconciled yet");
                retry = Some(delay);
            }
        }
        let sleep = tokio::time::sleep(retry.unwrap_or(Duration::from_secs(3600)));
        tokio::select! {
            () = shutdown.wait() => return,
            changed = ca_bundle.changed() => if changed.is_err() { return },
            event = events.next() => match event {
                None => return,
                Some(Err(err)) => tracing::debug!(error = %err, "ValidatingWebhookConfiguration watch error (retried)"),
                Some(Ok(_)) => {}
            },
            () = sleep, if retry.is_some() => {}
        }
    }
}

/// One pass: list the revision's configurations (creating them on the first pass when there are
/// none), patch each. `Err` = retry later.
async fn reconcile(
    client: &Client,
    api: &Api<ValidatingWebhookConfiguration>,
    options: &WebhookConfigOptions,
    selector: &str,
    bundle: &str,
    first: &mut bool,
    ready: &mut bool,
) -> Result<(), String> {
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| KubeError::from_kube(e, "list ValidatingWebhookConfigurations").to_string())?;
    if std::mem::take(first) && list.items.is_empty() {
        for config in default_configurations(options, bundle) {
            let name = config.metadata.name.clone().unwrap_or_default();
            match api.create(&PostParams::default(), &config).await {
                Ok(_) => tracing::info!(%name, "created ValidatingWebhookConfiguration"),
                Err(err) => {
                    let err =
                        KubeError::from_kube(err, &format!("create ValidatingWebhookConfiguration {name}"));
                    if !err.is_already_exists() {
                        *first = true;
                        return Err(err.to_string());
                    }
                }
            }
        }
        // The watch reports the created objects; they are patched on that pass.
        return Ok(());
    }
    let mut result = Ok(());
    for current in &list.items {
        let name = current.metadata.name.clone().unwrap_or_default();
        if !*ready && needs_fail_closed(current) {
            match probe_rejects_invalid_config(client, options).await {
                Ok(()) => {
                    tracing::info!(
                        "webhook rejected the invalid probe config; switching validation to fail-closed"
                    );
                    *ready = true;
                }
                Err(reason) => {
                    tracing::info!(%reason, "not ready to switch validation to fail-closed");
                    result = Err(format!("webhook not ready: {reason}"));
                }
            }
        }
        let Some(updated) = patched(current, bundle, *ready) else { continue };
        match api.replace(&name, &PostParams::default(), &updated).await {
            Ok(latest) => {
                metrics::counter!("meshpilot_webhook_config_patches").increment(1);
                tracing::info!(
                %name,
                resource_version = latest.metadata.resource_version.as_deref().unwrap_or_default(),
                fail_closed = *ready,
                "patched ValidatingWebhookConfiguration"
                )
            }
            Err(err) => {
                result =
                    Err(KubeError::from_kube(err, &format!("update ValidatingWebhookConfiguration {name}"))
                        .to_string())
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(revision: Option<&str>, client: WebhookClient) -> WebhookConfigOptions {
        WebhookConfigOptions {
            revision: revision.map(str::to_string),
            istio_namespace: "istio-system".into(),
            client,
            create_if_missing: true,
        }
    }

    #[test]
    fn default_revision_gets_both_chart_configurations() {
        let configs = default_configurations(&options(None, WebhookClient::Service), "PEM");
        let names: Vec<_> = configs.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["istio-validator-istio-system", DEFAULT_VALIDATOR]);
        let value = serde_json::to_value(&configs[0]).unwrap();
        let wh = &value["webhooks"][0];
        assert_eq!(wh["name"], "rev.validation.istio.io");
        assert_eq!(
            wh["clientConfig"]["service"],
            serde_json::json!({"name": "istiod", "namespace": "istio-system", "path": "/validate"})
        );
        assert_eq!(wh["clientConfig"]["caBundle"], "UEVN"); // base64 of "PEM"
        assert_eq!(wh["failurePolicy"], "Ignore");
        assert_eq!(wh["sideEffects"], "None");
        assert_eq!(wh["admissionReviewVersions"], serde_json::json!(["v1"]));
        assert_eq!(wh["rules"][0]["operations"], serde_json::json!(["CREATE", "UPDATE"]));
        assert_eq!(
            wh["rules"][0]["apiGroups"],
            serde_json::json!([
                "security.istio.io",
                "networking.istio.io",
                "telemetry.istio.io",
                "extensions.istio.io"
            ])
        );
        assert_eq!(
            wh["objectSelector"]["matchExpressions"],
            serde_json::json!([{"key": "istio.io/rev", "operator": "In", "values": ["default"]}])
        );
        assert_eq!(value["metadata"]["labels"]["istio.io/rev"], "default");
        let default = serde_json::to_value(&configs[1]).unwrap();
        assert_eq!(default["webhooks"][0]["name"], "validation.istio.io");
        assert_eq!(
            default["webhooks"][0]["objectSelector"]["matchExpressions"],
            serde_json::json!([{"key": "istio.io/rev", "operator": "DoesNotExist"}])
        );
    }

    #[test]
    fn revision_names_and_url_client() {
        let url = "https://127.0.0.1:15017/validate".to_string();
        let configs =
            default_configurations(&options(Some("canary"), WebhookClient::Url(url.clone())), "PEM");
        assert_eq!(configs.len(), 1);
        assert_eq!(configs[0].metadata.name.as_deref(), Some("istio-validator-canary-istio-system"));
        let wh = &configs[0].webhooks.as_ref().unwrap()[0];
        assert_eq!(wh.client_config.url.as_ref(), Some(&url));
        assert!(wh.client_config.service.is_none());
        let sel = wh.object_selector.as_ref().unwrap().match_expressions.as_ref().unwrap();
        assert_eq!(sel[0].values.as_deref(), Some(&["canary".to_string()][..]));
        let service = default_configurations(&options(Some("canary"), WebhookClient::Service), "PEM");
        let svc = service[0].webhooks.as_ref().unwrap()[0].client_config.service.clone().unwrap();
        assert_eq!(svc.name, "istiod-canary");
    }

    #[test]
    fn only_a_shared_root_is_patched_in() {
        use security::ca::CaSource;
        assert!(shared_root(Some(&CaSource::Secret("istio-system/istio-ca-secret".into()))).is_ok());
        assert!(shared_root(Some(&CaSource::PluggedIn("/etc/cacerts".into()))).is_ok());
        let err = shared_root(Some(&CaSource::SelfSigned("/var/ca".into()))).unwrap_err();
        assert!(err.contains("--ca-dir /var/ca") && err.contains("istio-ca-secret"), "{err}");
        assert!(shared_root(None).unwrap_err().contains("in memory"));
    }

    #[test]
    fn patch_sets_bundle_and_fail_closed_only_when_needed() {
        let current = default_configurations(&options(None, WebhookClient::Service), "OLD").remove(0);
        assert!(needs_fail_closed(&current));
        let updated = patched(&current, "NEW", false).expect("bundle changed");
        let wh = &updated.webhooks.as_ref().unwrap()[0];
        assert_eq!(wh.client_config.ca_bundle.as_ref().unwrap().0, b"NEW");
        assert_eq!(wh.failure_policy.as_deref(), Some("Ignore"));
        assert!(patched(&updated, "NEW", false).is_none());
        let closed = patched(&updated, "NEW", true).expect("policy changed");
        assert_eq!(closed.webhooks.as_ref().unwrap()[0].failure_policy.as_deref(), Some("Fail"));
        assert!(!needs_fail_closed(&closed));
        assert!(patched(&closed, "NEW", true).is_none());
    }
}
