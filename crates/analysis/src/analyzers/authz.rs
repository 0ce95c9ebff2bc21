//! `authz`: AuthorizationPolicies against the workloads and namespaces they name (Istio's
//! `pkg/config/analysis/analyzers/authz`).

use std::collections::BTreeMap;

use api::{Kind, Spec};
use serde_json::Value;

use crate::{
    Context, KubeObject, Message, Resource,
    analyzers::Analyzer,
    msg::{self, Arg},
    resource::kinds,
    util,
};

/// Checks that an AuthorizationPolicy applies to some workload in the mesh (IST0127: its selector
/// matches a pod with a sidecar or in ambient mode — in any namespace for a policy in the mesh's root
/// namespace, else in its own; a policy without selector needs such a pod in its namespace) and that
/// the namespaces its rules name (`from.source.namespaces` / `notNamespaces`, `*` prefix or suffix
/// globs) exist (IST0101 `namespace`).
pub struct AuthorizationPoliciesAnalyzer;

/// Istio's `util.PodInMesh`: an `istio-proxy` container with an image, else the
/// `sidecar.istio.io/inject` label or annotation, else the namespace's `istio-injection=enabled`.
fn pod_in_mesh(ctx: &Context<'_>, pod: &KubeObject) -> bool {
    let containers = ["/spec/containers", "/spec/initContainers"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten();
    let proxy_image = containers
        .into_iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some("istio-proxy"))
        .and_then(|c| c.get("image").and_then(Value::as_str))
        .unwrap_or("");
    if !proxy_image.is_empty() {
        return true;
    }
    if let Some(v) =
        pod.labels.get("sidecar.istio.io/inject").or_else(|| pod.annotations.get("sidecar.istio.io/inject"))
    {
        return v == "true";
    }
    ctx.find_kube(kinds::NAMESPACE, "", pod.ns())
        .is_some_and(|ns| ns.labels.get("istio-injection").is_some_and(|v| v == "enabled"))
}

fn pod_in_ambient_mode(pod: &KubeObject) -> bool {
    pod.annotations.get("ambient.istio.io/redirection").is_some_and(|v| v == "enabled")
}

/// Istio's `namespaceMatch`: `*`, `*suffix`, `prefix*`, or equal ignoring case.
fn namespace_match(ns: &str, exp: &str) -> bool {
    if exp == "*" {
        return true;
    }
    if let Some(suffix) = exp.strip_prefix('*') {
        return ns.ends_with(suffix);
    }
    if let Some(prefix) = exp.strip_suffix('*') {
        return ns.starts_with(prefix);
    }
    ns.eq_ignore_ascii_case(exp)
}

impl Analyzer for AuthorizationPoliciesAnalyzer {
    fn name(&self) -> &str {
        "auth.AuthorizationPoliciesAnalyzer"
    }
    fn type_name(&self) -> &str {
        "authz.AuthorizationPoliciesAnalyzer"
    }
    fn description(&self) -> &str {
        "Checks the validity of authorization policies"
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::MESH_CONFIG, kinds::AUTHORIZATION_POLICY, kinds::NAMESPACE, kinds::POD]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        // Labels of the mesh's pods, per namespace.
        let mut pods: BTreeMap<&str, Vec<&BTreeMap<String, String>>> = BTreeMap::new();
        for pod in ctx.kube(kinds::POD) {
            let list = pods.entry(pod.ns()).or_default();
            if pod_in_mesh(ctx, pod) || pod_in_ambient_mode(pod) {
                list.push(&pod.labels);
            }
        }
        let root_namespace = ctx.mesh.root_namespace().to_string();
        let namespaces: Vec<&str> = ctx.kube(kinds::NAMESPACE).map(|n| n.name.as_str()).collect();
        for r in ctx.istio(Kind::AuthorizationPolicy) {
            let Spec::AuthorizationPolicy(ap) = r.spec() else { continue };
            let selector = ap.selector.as_ref().map(|s| &s.match_labels);
            let matches_in = |list: Option<&Vec<&BTreeMap<String, String>>>,
                              sel: &BTreeMap<String, String>| {
                list.into_iter().flatten().any(|labels| util::selector_matches(sel, labels))
            };
            let no_workload = match selector {
                Some(sel) if r.namespace() == root_namespace => {
                    !pods.values().any(|l| matches_in(Some(l), sel))
                }
                None if r.namespace() == root_namespace => false,
                Some(sel) => !matches_in(pods.get(r.namespace()), sel),
                None => pods.get(r.namespace()).is_none_or(Vec::is_empty),
            };
            if no_workload {
                let text = selector.map(util::labels_string).unwrap_or_default();
                out.push(r.message(&msg::NO_MATCHING_WORKLOADS_FOUND, &[Arg::Str(text)]));
            }
            for (i, rule) in ap.rules.iter().enumerate() {
                for (j, from) in rule.from.iter().enumerate() {
                    let Some(source) = &from.source else { continue };
                    let named = source
                        .namespaces
                        .iter()
                        .enumerate()
                        .map(|(k, ns)| (format!("spec.rules[{i}].from[{j}].source.namespaces[{k}]"), ns))
                        .chain(source.not_namespaces.iter().enumerate().map(|(k, ns)| {
                            (format!("spec.rules[{i}].from[{j}].source.notNamespaces[{k}]"), ns)
                        }));
                    for (path, ns) in named {
                        if !namespaces.iter().any(|n| namespace_match(n, ns)) {
                            out.push(r.message_at(
                                &msg::REFERENCED_RESOURCE_NOT_FOUND,
                                &["namespace".into(), Arg::from(ns)],
                                &path,
                            ));
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{LoadOptions, Resources};

    #[test]
    fn policies_need_mesh_workloads_and_existing_namespaces() {
        let mut r =
            Resources::new(LoadOptions { default_namespace: String::new(), runtime_kinds_from_files: true });
        r.add_text(
            "ap.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {name: cart, namespace: shop, labels: {app: cart}}\nspec: {containers: [{name: c}]}\n---\n\
             apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: ok, namespace: shop}\nspec:\n  selector: {matchLabels: {app: cart}}\n  rules:\n  - from:\n    - source: {namespaces: [\"sh*\"]}\n---\n\
             apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: nobody, namespace: shop}\nspec:\n  selector: {matchLabels: {app: ghost}}\n  rules:\n  - from:\n    - source: {notNamespaces: [\"gone\"]}\n",
            true,
        );
        let mut out = Vec::new();
        AuthorizationPoliciesAnalyzer.analyze(&Context::new(&r), &mut out);
        let got: Vec<String> = out.iter().map(|m| format!("{} {} {}", m.code(), m.origin, m.text)).collect();
        assert_eq!(
            got,
            [
                "IST0127 AuthorizationPolicy shop/nobody ap.yaml:19 No matching workloads for this resource with the following labels: app=ghost",
                "IST0101 AuthorizationPolicy shop/nobody ap.yaml:26 Referenced namespace not found: \"gone\"",
            ]
        );
    }
}
