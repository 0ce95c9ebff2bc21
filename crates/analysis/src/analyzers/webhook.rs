//! Istio's `webhook.Analyzer` (`pkg/config/analysis/analyzers/webhook`): Istio's injection webhooks
//! must not overlap and must point at an existing control plane Service.
//!
//! The MutatingWebhookConfigurations considered are those with a revision (an `istio.io/rev` label, or
//! `istio.io/rev` in a webhook's namespace or object selector, as `matchLabels` or a `matchExpressions`
//! key's values) or with a webhook whose name ends in `istio.io`. For every combination of namespace
//! labels ({}, `istio-injection=enabled`, `istio-injection=disabled`, each also with `istio.io/rev=<r>`
//! for every revision found) and object labels ({}, `sidecar.istio.io/inject=true|false`, each also with
//! `istio.io/rev=<r>`), when more than one webhook selects both, each of them gets IST0139
//! InvalidWebhook "Webhook overlaps with others: [others]. This may cause injection to occur twice."
//! (once per webhook and text). A webhook whose `clientConfig.service` names a Service that is not
//! loaded gets IST0139 "Injector refers to a control plane service that does not exist: ns/name.".

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{
    injection::selector_matches,
    workload::{full_name, str_at},
};
use crate::{
    Analyzer as AnalyzerTrait, Context, Message, msg,
    resource::{KubeObject, Resource, kinds},
};

/// `webhook.Analyzer`.
#[derive(Debug, Default)]
pub struct Analyzer;

const REV: &str = "istio.io/rev";

/// One webhook of a considered configuration.
struct Hook<'a> {
    /// `configuration/webhook`.
    key: String,
    config: &'a KubeObject,
    namespace_selector: Option<&'a Value>,
    object_selector: Option<&'a Value>,
    service: Option<&'a Value>,
}

impl AnalyzerTrait for Analyzer {
    fn name(&self) -> &str {
        "webhook.Analyzer"
    }

    fn description(&self) -> &str {
        "Checks the validity of Istio webhooks"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::MUTATING_WEBHOOK_CONFIGURATION, kinds::SERVICE]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let resources = ctx.resources();
        let mut hooks: Vec<Hook<'_>> = Vec::new();
        let mut revisions: BTreeSet<String> = BTreeSet::new();
        for config in resources.kube(kinds::MUTATING_WEBHOOK_CONFIGURATION) {
            let webhooks: &[Value] = match config.value.get("webhooks") {
                Some(Value::Array(w)) => w,
                _ => &[],
            };
            let revs = revisions_of(config, webhooks);
            if revs.is_empty() && !webhooks.iter().any(|w| str_at(w, "name").ends_with("istio.io")) {
                continue;
            }
            let config_name = full_name(config.ns(), &config.name);
            for w in webhooks {
                let present = |k: &str| w.get(k).filter(|v| !v.is_null());
                hooks.push(Hook {
                    key: format!("{config_name}/{}", str_at(w, "name")),
                    config,
                    namespace_selector: present("namespaceSelector"),
                    object_selector: present("objectSelector"),
                    service: present("clientConfig").and_then(|c| c.get("service")).filter(|v| !v.is_null()),
                });
            }
            revisions.extend(revs);
        }

        let namespace_labels = label_sets("istio-injection", ["enabled", "disabled"], &revisions);
        let object_labels = label_sets("sidecar.istio.io/inject", ["true", "false"], &revisions);
        let by_key: BTreeMap<&str, &KubeObject> = hooks.iter().map(|h| (h.key.as_str(), h.config)).collect();
        let mut reported: BTreeSet<(String, String)> = BTreeSet::new();
        for nl in &namespace_labels {
            for ol in &object_labels {
                let matches: BTreeSet<&str> = hooks
                    .iter()
                    .filter(|h| {
                        selector_matches(h.namespace_selector, nl) && selector_matches(h.object_selector, ol)
                    })
                    .map(|h| h.key.as_str())
                    .collect();
                if matches.len() < 2 {
                    continue;
                }
                for &key in &matches {
                    let others: Vec<&str> = matches.iter().copied().filter(|k| *k != key).collect();
                    let text = format!(
                        "Webhook overlaps with others: [{}]. This may cause injection to occur twice.",
                        others.join(" ")
                    );
                    if reported.insert((key.to_string(), text.clone())) {
                        out.push(by_key[key].message(&msg::INVALID_WEBHOOK, &[text.into()]));
                    }
                }
            }
        }

        for hook in &hooks {
            let Some(service) = hook.service else { continue };
            let (ns, name) = (str_at(service, "namespace"), str_at(service, "name"));
            let exists = resources.find_kube(kinds::SERVICE, ns, name).is_some();
            if !exists {
                let text = format!(
                    "Injector refers to a control plane service that does not exist: {}.",
                    full_name(ns, name)
                );
                out.push(hook.config.message(&msg::INVALID_WEBHOOK, &[text.into()]));
            }
        }
    }
}

/// The label sets a selector is tried against: none, `key=values[0]`, `key=values[1]`, and each of
/// these with `istio.io/rev=<r>` for every revision.
fn label_sets(key: &str, values: [&str; 2], revisions: &BTreeSet<String>) -> Vec<BTreeMap<String, String>> {
    let plain = [
        BTreeMap::new(),
        BTreeMap::from([(key.to_string(), values[0].to_string())]),
        BTreeMap::from([(key.to_string(), values[1].to_string())]),
    ];
    let mut all = plain.to_vec();
    for rev in revisions {
        for p in &plain {
            let mut l = p.clone();
            l.insert(REV.to_string(), rev.clone());
            all.push(l);
        }
    }
    all
}

/// The revisions a webhook configuration serves: its `istio.io/rev` label and the `istio.io/rev`
/// values of its webhooks' namespace and object selectors.
fn revisions_of(config: &KubeObject, webhooks: &[Value]) -> BTreeSet<String> {
    let mut revs = BTreeSet::new();
    if let Some(r) = config.labels.get(REV) {
        revs.insert(r.clone());
    }
    for w in webhooks {
        for sel in ["namespaceSelector", "objectSelector"] {
            let Some(selector) = w.get(sel).filter(|s| !s.is_null()) else { continue };
            if let Some(r) = selector.get("matchLabels").and_then(|m| m.get(REV)).and_then(Value::as_str) {
                revs.insert(r.to_string());
            }
            let Some(Value::Array(exprs)) = selector.get("matchExpressions") else { continue };
            for e in exprs.iter().filter(|e| str_at(e, "key") == REV) {
                if let Some(Value::Array(values)) = e.get("values") {
                    revs.extend(values.iter().filter_map(Value::as_str).map(str::to_string));
                }
            }
        }
    }
    revs
}
