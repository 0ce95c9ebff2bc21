//! Istio's `authz.AuthorizationPoliciesAnalyzer` (`pkg/config/analysis/analyzers/authz`; metadata
//! name `auth.AuthorizationPoliciesAnalyzer`): AuthorizationPolicies that select no workload or name
//! namespaces that do not exist.
//!
//! * Workloads are the Pods in the mesh (see [`workload::in_mesh`], containers and init containers)
//!   and the Pods redirected by ambient (`ambient.istio.io/redirection: enabled`). A policy in the root
//!   namespace with a selector matching no such pod in any namespace, a policy elsewhere without a
//!   selector in a namespace without such pods, or with a selector matching none of its namespace's,
//!   gets IST0127 NoMatchingWorkloadsFound (the selector as `k=v,…`, empty without one).
//! * Each `rules[i].from[j].source.namespaces` / `notNamespaces` entry matching no Namespace object
//!   (`*` matches any, a leading or trailing `*` a suffix or prefix, otherwise case-insensitive
//!   equality) gets IST0101 ReferencedResourceNotFound (`namespace`, the entry).

use std::collections::BTreeMap;

use super::workload::{self, PodSpec, message_at_leaf, pod_spec};
use crate::{
    Analyzer, Context, Message, msg,
    resource::{Resource, kinds},
};

/// `authz.AuthorizationPoliciesAnalyzer`.
#[derive(Debug, Default)]
pub struct AuthorizationPoliciesAnalyzer;

type Labels = BTreeMap<String, String>;

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
        let mut pods: BTreeMap<&str, Vec<&Labels>> = BTreeMap::new();
        for pod in ctx.kube(kinds::POD) {
            let list = pods.entry(pod.ns()).or_default();
            let spec: PodSpec = pod_spec(pod);
            if workload::in_mesh(ctx, &pod.labels, &pod.annotations, pod.ns(), &spec, true) {
                list.push(&pod.labels);
            }
            if pod.annotations.get("ambient.istio.io/redirection").is_some_and(|v| v == "enabled") {
                list.push(&pod.labels);
            }
        }
        let root_namespace = ctx.mesh.root_namespace();
        let namespaces: Vec<&str> = ctx.kube(kinds::NAMESPACE).map(|n| n.name.as_str()).collect();
        for policy in ctx.istio(api::Kind::AuthorizationPolicy) {
            let api::Spec::AuthorizationPolicy(ap) = policy.spec() else { continue };
            let selector = ap.selector.as_ref().map(|s| &s.match_labels);
            let matches =
                |labels: &&Labels| selector.is_none_or(|s| s.iter().all(|(k, v)| labels.get(k) == Some(v)));
            let selector_text = selector.map(crate::util::labels_string).unwrap_or_default();
            let no_workloads = if policy.namespace() == root_namespace {
                selector.is_some() && !pods.values().flatten().any(matches)
            } else {
                !pods.get(policy.namespace()).into_iter().flatten().any(matches)
            };
            if no_workloads {
                out.push(policy.message(&msg::NO_MATCHING_WORKLOADS_FOUND, &[selector_text.into()]));
            }
            for (i, rule) in ap.rules.iter().enumerate() {
                for (j, from) in rule.from.iter().enumerate() {
                    let Some(source) = &from.source else { continue };
                    let entries =
                        source.namespaces.iter().enumerate().map(|(k, ns)| ("namespaces", k, ns)).chain(
                            source.not_namespaces.iter().enumerate().map(|(k, ns)| ("notNamespaces", k, ns)),
                        );
                    for (field, k, ns) in entries {
                        if !namespaces.iter().any(|n| namespace_match(n, ns)) {
                            let path = format!("spec.rules[{i}].from[{j}].source.{field}[{k}]");
                            out.push(message_at_leaf(
                                policy,
                                &msg::REFERENCED_RESOURCE_NOT_FOUND,
                                &["namespace".into(), ns.as_str().into()],
                                &path,
                            ));
                        }
                    }
                }
            }
        }
    }
}

/// Whether namespace `ns` matches the policy entry `exp` (Istio's `namespaceMatch`).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_patterns() {
        assert!(namespace_match("anything", "*"));
        assert!(namespace_match("team-prod", "*-prod"));
        assert!(namespace_match("team-prod", "team-*"));
        assert!(namespace_match("Foo", "foo"));
        assert!(!namespace_match("foo", "bar"));
    }
}
