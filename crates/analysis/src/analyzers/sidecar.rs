//! `sidecar`: Sidecar workload selectors (Istio's `pkg/config/analysis/analyzers/sidecar`).

use std::collections::BTreeMap;

use api::{Kind, Spec};

use crate::{
    Context, IstioResource, KubeObject, Message, Resource,
    analyzers::Analyzer,
    msg::{self, Arg},
    resource::kinds,
    util,
};

/// Checks Sidecar workload selectors: a selector must match a pod in the Sidecar's namespace
/// (IST0101 `selector`); a pod must not be selected by several Sidecars (IST0110 on each); a namespace
/// must not have several Sidecars without selector (IST0111 on each). Sidecars selecting ambient pods,
/// or without selector in an ambient namespace, have no effect (IST0167).
pub struct SelectorAnalyzer;

fn pod_in_ambient_mode(pod: &KubeObject) -> bool {
    pod.annotations.get("ambient.istio.io/redirection").is_some_and(|v| v == "enabled")
}

fn namespace_in_ambient_mode(ns: Option<&KubeObject>) -> bool {
    let Some(ns) = ns else { return false };
    if ns.labels.get("istio-injection").is_some_and(|v| v == "enabled") {
        return false;
    }
    if ns.labels.get("istio.io/rev").is_some_and(|v| !v.is_empty()) {
        return false;
    }
    ns.labels.get("istio.io/dataplane-mode").is_some_and(|v| v == "ambient")
}

fn sorted_names(list: &[&IstioResource]) -> Vec<String> {
    let mut names: Vec<String> = list.iter().map(|r| r.name().to_string()).collect();
    names.sort();
    names
}

impl Analyzer for SelectorAnalyzer {
    fn name(&self) -> &str {
        "sidecar.SelectorAnalyzer"
    }
    fn description(&self) -> &str {
        "Validates that sidecars that define a workload selector match at least one pod, and that there \
         aren't multiple sidecar resources that select overlapping pods"
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::SIDECAR, kinds::POD, kinds::NAMESPACE]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let mut pods_to_sidecars: BTreeMap<(String, String), (&KubeObject, Vec<&IstioResource>)> =
            BTreeMap::new();
        let mut namespaces_to_sidecars: BTreeMap<&str, Vec<&IstioResource>> = BTreeMap::new();
        for r in ctx.istio(Kind::Sidecar) {
            let Spec::Sidecar(sidecar) = r.spec() else { continue };
            let selector = sidecar.workload_selector.as_ref().map(|w| &w.labels).filter(|l| !l.is_empty());
            let Some(selector) = selector else {
                namespaces_to_sidecars.entry(r.namespace()).or_default().push(r);
                continue;
            };
            let mut found = false;
            for pod in ctx.kube_selected(kinds::POD, Some(r.namespace()), selector) {
                found = true;
                let key = (pod.ns().to_string(), pod.name.clone());
                pods_to_sidecars.entry(key).or_insert_with(|| (pod, Vec::new())).1.push(r);
            }
            if !found {
                let label = selector.keys().next().map(String::as_str).unwrap_or_default();
                let args = ["selector".into(), Arg::Str(util::labels_string(selector))];
                let path = format!("spec.workloadSelector.labels[{label}]");
                out.push(r.message_at(&msg::REFERENCED_RESOURCE_NOT_FOUND, &args, &path));
            }
        }
        let mut reported: Vec<(String, String)> = Vec::new();
        let mut report_once = |r: &IstioResource, why: &str, out: &mut Vec<Message>| {
            let key = (r.namespace().to_string(), r.name().to_string());
            if !reported.contains(&key) {
                out.push(r.message(&msg::INEFFECTIVE_POLICY, &[Arg::from(why)]));
                reported.push(key);
            }
        };
        for ((pod_ns, pod_name), (pod, sidecars)) in &pods_to_sidecars {
            let ambient = pod_in_ambient_mode(pod);
            if sidecars.len() == 1 && !ambient {
                continue;
            }
            let names = sorted_names(sidecars);
            for r in sidecars {
                if ambient {
                    report_once(r, "selected workload is in ambient mode, the policy has no impact", out);
                    continue;
                }
                let args = [Arg::Strs(names.clone()), Arg::from(pod_ns), Arg::from(pod_name)];
                out.push(r.message_at(&msg::CONFLICTING_SIDECAR_WORKLOAD_SELECTORS, &args, "metadata.name"));
            }
        }
        for (ns, sidecars) in &namespaces_to_sidecars {
            if namespace_in_ambient_mode(ctx.find_kube(kinds::NAMESPACE, "", ns)) {
                for r in sidecars {
                    report_once(r, "namespace is in ambient mode, the policy has no impact", out);
                }
                continue;
            }
            if sidecars.len() > 1 {
                let names = sorted_names(sidecars);
                for r in sidecars {
                    let args = [Arg::Strs(names.clone()), Arg::from(*ns)];
                    out.push(r.message(&msg::MULTIPLE_SIDECARS_WITHOUT_WORKLOAD_SELECTORS, &args));
                }
            }
        }
    }
}
