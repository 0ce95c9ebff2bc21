//! Which security policies (AuthorizationPolicy, RequestAuthentication) apply to a proxy: Istio's
//! `WorkloadPolicyMatcher.ShouldAttachPolicy` (`pilot/pkg/model/policyattachment.go`) and
//! `AuthorizationPolicies.ListAuthorizationPolicies` (`pilot/pkg/model/authorization.go`).
//!
//! Policies are looked up in the root namespace (mesh-wide) and in the proxy's namespace, root first,
//! each by creation time then name. Within those:
//! - a policy whose `targetRef(s)` name a classic `networking.istio.io` Gateway the proxy serves (policy
//!   in the Gateway's namespace, reference namespace empty or equal) applies;
//! - a workload that is not a Kubernetes Gateway API gateway (no `gateway.networking.k8s.io/gateway-name`
//!   label) ignores policies with `targetRef(s)` and takes the others when their `selector.matchLabels`
//!   is a subset of its labels (no selector: every workload);
//! - a Gateway API gateway takes selector policies as above (Istio's default
//!   `ENABLE_SELECTOR_BASED_K8S_GATEWAY_POLICY=true`) and policies in its own namespace whose
//!   `targetRef(s)` name its Gateway (`gateway.networking.k8s.io` `Gateway`).
//!
//! Service / ServiceEntry / GatewayClass references attach to waypoints only, which meshpilot does
//! not serve; policies that target HTTPRoutes (per-route authorization) are not applied yet.

use std::sync::Arc;

use api::{
    spec::Spec,
    type_v1beta1::{PolicyTargetReference, WorkloadSelector},
};

use crate::{
    config::Config,
    service::{Labels, labels_match},
};

/// Workload label naming the Kubernetes Gateway a gateway deployment serves.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// The selector labels and target references of a policy kind that supports both.
fn targeting(spec: &Spec) -> Option<(Option<&Labels>, Vec<&PolicyTargetReference>)> {
    fn labels(s: Option<&WorkloadSelector>) -> Option<&Labels> {
        s.map(|s| &s.match_labels)
    }
    let (selector, target_ref, target_refs) = match spec {
        Spec::AuthorizationPolicy(p) => (labels(p.selector.as_ref()), p.target_ref.as_ref(), &p.target_refs),
        Spec::RequestAuthentication(p) => {
            (labels(p.selector.as_ref()), p.target_ref.as_ref(), &p.target_refs)
        }
        Spec::Telemetry(p) => (labels(p.selector.as_ref()), p.target_ref.as_ref(), &p.target_refs),
        // EnvoyFilter's `workloadSelector` has `labels`; it never had the single `targetRef`.
        Spec::EnvoyFilter(f) => (f.workload_selector.as_ref().map(|s| &s.labels), None, &f.target_refs),
        Spec::WasmPlugin(p) => (labels(p.selector.as_ref()), p.target_ref.as_ref(), &p.target_refs),
        Spec::TrafficExtension(p) => (labels(p.selector.as_ref()), None, &p.target_refs),
        _ => return None,
    };
    // `targetRefs` wins; the older single `targetRef` is used only when the list is empty.
    let refs =
        if target_refs.is_empty() { target_ref.into_iter().collect() } else { target_refs.iter().collect() };
    Some((selector, refs))
}

/// Istio's canonical group: empty means the core group.
fn group_is(reference: &PolicyTargetReference, group: &str) -> bool {
    let canonical = if reference.group.is_empty() { "core" } else { reference.group.as_str() };
    canonical == group
}

/// What a policy is matched against: the proxy's namespace and labels, the classic Gateways it serves
/// (`namespace`, `name`) and the mesh's root namespace.
#[derive(Clone, Copy, Debug)]
pub struct PolicyMatcher<'a> {
    /// The proxy's (config) namespace.
    pub namespace: &'a str,
    /// The proxy's workload labels.
    pub labels: &'a Labels,
    /// Classic `networking.istio.io` Gateways this proxy serves, as (namespace, name).
    pub gateways: &'a [(String, String)],
    /// `rootNamespace` of the mesh config.
    pub root_namespace: &'a str,
}

impl PolicyMatcher<'_> {
    /// Whether the policy `config` (an AuthorizationPolicy, RequestAuthentication, Telemetry, EnvoyFilter,
    /// WasmPlugin or TrafficExtension in the
    /// root or the proxy's namespace) applies to the proxy; `false` for other kinds. The rules are in the
    /// module documentation.
    pub fn should_attach(&self, config: &Config) -> bool {
        let Some((selector, refs)) = targeting(&config.spec) else { return false };
        let policy_ns = config.meta.namespace.as_str();
        let classic = refs.iter().any(|r| {
            group_is(r, "networking.istio.io")
                && r.kind == "Gateway"
                && self.gateways.iter().any(|(ns, name)| {
                    r.name == *name && policy_ns == ns && (r.namespace.is_empty() || r.namespace == *ns)
                })
        });
        if classic {
            return true;
        }
        let selected = || selector.is_none_or(|s| labels_match(s, self.labels));
        let Some(gateway_name) = self.labels.get(GATEWAY_NAME_LABEL) else {
            return refs.is_empty() && selected();
        };
        if refs.is_empty() {
            return selected();
        }
        policy_ns == self.namespace
            && refs.iter().any(|r| {
                (r.namespace.is_empty() || r.namespace == self.namespace)
                    && group_is(r, "gateway.networking.k8s.io")
                    && r.kind == "Gateway"
                    && r.name == *gateway_name
            })
    }

    /// The policies of `by_namespace` (policies of one namespace, in Istio's order) that apply: the
    /// root namespace's first, then the proxy's namespace's.
    pub fn select<'c>(&self, by_namespace: impl Fn(&str) -> &'c [Arc<Config>]) -> Vec<Arc<Config>> {
        let mut namespaces = vec![self.root_namespace];
        if self.namespace != self.root_namespace {
            namespaces.push(self.namespace);
        }
        namespaces
            .into_iter()
            .flat_map(|ns| by_namespace(ns).iter())
            .filter(|c| self.should_attach(c))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use api::security::{AuthorizationPolicy, RequestAuthentication};

    use super::*;
    use crate::config::ConfigMeta;

    fn policy(
        ns: &str,
        name: &str,
        selector: Option<&[(&str, &str)]>,
        refs: &[(&str, &str, &str)],
    ) -> Config {
        let spec = AuthorizationPolicy {
            selector: selector.map(|s| WorkloadSelector {
                match_labels: s.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            }),
            target_refs: refs
                .iter()
                .map(|(group, kind, name)| PolicyTargetReference {
                    group: group.to_string(),
                    kind: kind.to_string(),
                    name: name.to_string(),
                    namespace: String::new(),
                })
                .collect(),
            ..Default::default()
        };
        Config {
            meta: ConfigMeta { namespace: ns.into(), name: name.into(), ..Default::default() },
            spec: Spec::AuthorizationPolicy(Box::new(spec)),
            status: None,
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn selector_policies_attach_by_label_subset() {
        let l = labels(&[("app", "httpbin"), ("version", "v1")]);
        let m = PolicyMatcher { namespace: "foo", labels: &l, gateways: &[], root_namespace: "istio-system" };
        assert!(m.should_attach(&policy("foo", "all", None, &[])));
        assert!(m.should_attach(&policy("foo", "app", Some(&[("app", "httpbin")]), &[])));
        assert!(!m.should_attach(&policy("foo", "other", Some(&[("app", "other")]), &[])));
        assert!(!m.should_attach(&policy("foo", "more", Some(&[("app", "httpbin"), ("x", "y")]), &[])));
    }

    #[test]
    fn sidecars_ignore_target_ref_policies() {
        let l = labels(&[("app", "httpbin")]);
        let m = PolicyMatcher { namespace: "foo", labels: &l, gateways: &[], root_namespace: "istio-system" };
        let p = policy("foo", "svc", None, &[("", "Service", "httpbin")]);
        assert!(!m.should_attach(&p));
    }

    #[test]
    fn kubernetes_gateways_attach_by_gateway_name_in_their_namespace() {
        let l = labels(&[(GATEWAY_NAME_LABEL, "gw")]);
        let m = PolicyMatcher { namespace: "foo", labels: &l, gateways: &[], root_namespace: "istio-system" };
        let gw = ("gateway.networking.k8s.io", "Gateway", "gw");
        assert!(m.should_attach(&policy("foo", "p", None, &[gw])));
        assert!(!m.should_attach(&policy("bar", "p", None, &[gw])), "other namespace");
        assert!(!m.should_attach(&policy(
            "foo",
            "p",
            None,
            &[("gateway.networking.k8s.io", "Gateway", "x")]
        )));
        assert!(m.should_attach(&policy("foo", "sel", None, &[])), "selector-based policies apply too");
    }

    #[test]
    fn classic_gateways_attach_by_target_ref_in_the_gateway_namespace() {
        let l = labels(&[("istio", "ingressgateway")]);
        let gateways = [("istio-system".to_string(), "public".to_string())];
        let m = PolicyMatcher {
            namespace: "istio-system",
            labels: &l,
            gateways: &gateways,
            root_namespace: "istio-system",
        };
        let r = ("networking.istio.io", "Gateway", "public");
        assert!(m.should_attach(&policy("istio-system", "p", None, &[r])));
        assert!(!m.should_attach(&policy(
            "istio-system",
            "p",
            None,
            &[("networking.istio.io", "Gateway", "private")]
        )));
    }

    #[test]
    fn select_takes_root_then_own_namespace() {
        let l = labels(&[("app", "a")]);
        let m = PolicyMatcher { namespace: "foo", labels: &l, gateways: &[], root_namespace: "istio-system" };
        let root = vec![Arc::new(policy("istio-system", "mesh", None, &[]))];
        let own = vec![Arc::new(policy("foo", "local", None, &[]))];
        let other = vec![Arc::new(policy("bar", "elsewhere", None, &[]))];
        let picked = m.select(|ns| match ns {
            "istio-system" => &root,
            "foo" => &own,
            _ => &other,
        });
        let names: Vec<&str> = picked.iter().map(|c| c.meta.name.as_str()).collect();
        assert_eq!(names, ["mesh", "local"]);
    }

    #[test]
    fn request_authentications_use_the_same_rules() {
        let l = labels(&[("app", "a")]);
        let m = PolicyMatcher { namespace: "foo", labels: &l, gateways: &[], root_namespace: "istio-system" };
        let mut c = policy("foo", "jwt", None, &[]);
        c.spec = Spec::RequestAuthentication(Box::new(RequestAuthentication {
            selector: Some(WorkloadSelector { match_labels: labels(&[("app", "b")]) }),
            ..Default::default()
        }));
        assert!(!m.should_attach(&c));
    }
}
