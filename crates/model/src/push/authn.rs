//! PeerAuthentication selection (Istio's `pilot/pkg/model/authentication.go`
//! `GetPoliciesForWorkload` and `pilot/pkg/security/authn` `composePeerAuthentication`): which mutual TLS
//! mode a workload port accepts.
//!
//! Rules, as Istio:
//! - a policy without selector (or with an empty `matchLabels`) in the **root namespace** is mesh-wide;
//!   one without selector in another namespace is namespace-wide; one with a selector matching the
//!   workload's labels, in the workload's namespace, is workload-level (a policy with a selector in the
//!   root namespace is ignored for every workload, as Istio);
//! - at each level the oldest policy wins (creation time, then name);
//! - the mode is resolved mesh → namespace → workload: a level whose `mtls.mode` is `UNSET` (or has no
//!   `mtls`) inherits the level above; with nothing set the mode is `PERMISSIVE`;
//! - `portLevelMtls` is read only from the workload-level policy (so only with a selector), keyed by
//!   the workload (target) port; `UNSET` there inherits the workload's resolved mode.

use std::{collections::BTreeMap, sync::Arc};

use api::{
    Spec,
    security::{
        PeerAuthentication,
        peer_authentication::peer_authentication::{MutualTls, mutual_tls::Mode},
    },
};

use crate::{Config, ConfigKey, service::Labels};

/// The mutual TLS mode a workload port accepts (Istio's `model.MutualTLSMode` without `UNKNOWN`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MtlsMode {
    /// Plaintext only.
    Disable,
    /// Both mutual TLS and plaintext (Istio's default).
    #[default]
    Permissive,
    /// Mutual TLS only.
    Strict,
}

impl MtlsMode {
    /// The mode a `mtls` block sets; `None` for `UNSET` or no block (inherit).
    fn of(mtls: Option<&MutualTls>) -> Option<MtlsMode> {
        match Mode::try_from(mtls?.mode).ok()? {
            Mode::Unset => None,
            Mode::Disable => Some(MtlsMode::Disable),
            Mode::Permissive => Some(MtlsMode::Permissive),
            Mode::Strict => Some(MtlsMode::Strict),
        }
    }

    /// Istio's name (`DISABLE`, `PERMISSIVE`, `STRICT`).
    pub fn as_str(self) -> &'static str {
        match self {
            MtlsMode::Disable => "DISABLE",
            MtlsMode::Permissive => "PERMISSIVE",
            MtlsMode::Strict => "STRICT",
        }
    }
}

/// One PeerAuthentication as the selection rule reads it: where it lives, when it was made, its
/// selector labels (`None` or empty: namespace- or mesh-wide) and its spec.
#[derive(Clone, Debug)]
pub struct PeerAuthenticationPolicy {
    /// The object's key.
    pub key: ConfigKey,
    /// `metadata.creationTimestamp` (RFC 3339), compared as text as Istio orders configs; `None` sorts
    /// first.
    pub creation_timestamp: Option<String>,
    /// `selector.matchLabels`; `None` when the policy has no selector.
    pub selector: Option<Labels>,
    /// The spec.
    pub spec: PeerAuthentication,
}

impl PeerAuthenticationPolicy {
    /// The policy of a PeerAuthentication config; `None` for another kind.
    pub fn from_config(config: &Config) -> Option<PeerAuthenticationPolicy> {
        let Spec::PeerAuthentication(spec) = &config.spec else { return None };
        Some(PeerAuthenticationPolicy {
            key: config.key(),
            creation_timestamp: config.meta.creation_timestamp.clone(),
            selector: spec.selector.as_ref().map(|s| s.match_labels.clone()),
            spec: (**spec).clone(),
        })
    }

    fn has_selector(&self) -> bool {
        self.selector.as_ref().is_some_and(|s| !s.is_empty())
    }

    /// Istio's precedence among policies of one level: older first, then by name.
    fn older_than(&self, other: &PeerAuthenticationPolicy) -> bool {
        (&self.creation_timestamp, &self.key.name) < (&other.creation_timestamp, &other.key.name)
    }
}

/// The resolved policy of one workload (Istio's `MergedPeerAuthentication`): its mode and the modes of
/// the ports the workload-level policy names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EffectivePeerAuthentication {
    /// The workload's mode (ports not in `per_port`).
    pub mode: MtlsMode,
    /// Mode per workload port, from the workload-level policy's `portLevelMtls`.
    pub per_port: BTreeMap<u32, MtlsMode>,
}

impl EffectivePeerAuthentication {
    /// The mode of workload port `port` (0: the workload's mode, as for Istio's passthrough chains).
    pub fn for_port(&self, port: u32) -> MtlsMode {
        self.per_port.get(&port).copied().unwrap_or(self.mode)
    }
}

/// Picks the oldest of `candidates` (creation time, then name).
fn oldest<'a>(
    candidates: impl Iterator<Item = &'a PeerAuthenticationPolicy>,
) -> Option<&'a PeerAuthenticationPolicy> {
    candidates.fold(None, |best, p| match best {
        Some(b) if !p.older_than(b) => Some(b),
        _ => Some(p),
    })
}

/// The effective PeerAuthentication of a workload in `namespace` with `labels`, from `policies` (any
/// namespaces; those of other namespaces than `namespace` and `root_namespace` are ignored). See the
/// module documentation for the rules.
pub fn effective_peer_authentication(
    policies: &[Arc<PeerAuthenticationPolicy>],
    root_namespace: &str,
    namespace: &str,
    labels: &Labels,
) -> EffectivePeerAuthentication {
    let mesh = oldest(
        policies.iter().map(AsRef::as_ref).filter(|p| p.key.namespace == root_namespace && !p.has_selector()),
    );
    let ns =
        oldest(policies.iter().map(AsRef::as_ref).filter(|p| {
            p.key.namespace == namespace && p.key.namespace != root_namespace && !p.has_selector()
        }));
    let workload = oldest(policies.iter().map(AsRef::as_ref).filter(|p| {
        p.key.namespace == namespace
            && p.key.namespace != root_namespace
            && p.has_selector()
            && p.selector.as_ref().is_some_and(|s| crate::service::labels_match(s, labels))
    }));
    let mut out = EffectivePeerAuthentication::default();
    for level in [mesh, ns, workload].into_iter().flatten() {
        if let Some(mode) = MtlsMode::of(level.spec.mtls.as_ref()) {
            out.mode = mode;
        }
    }
    if let Some(w) = workload {
        for (port, mtls) in &w.spec.port_level_mtls {
            out.per_port.insert(*port, MtlsMode::of(Some(mtls)).unwrap_or(out.mode));
        }
    }
    out
}

/// The mode of one workload port: [`effective_peer_authentication`] then
/// [`EffectivePeerAuthentication::for_port`].
pub fn effective_mtls_mode(
    policies: &[Arc<PeerAuthenticationPolicy>],
    root_namespace: &str,
    namespace: &str,
    labels: &Labels,
    port: u32,
) -> MtlsMode {
    effective_peer_authentication(policies, root_namespace, namespace, labels).for_port(port)
}

#[cfg(test)]
mod tests {
    use api::{Kind, type_v1beta1::WorkloadSelector};

    use super::*;

    const ROOT: &str = "istio-system";

    fn mtls(mode: Mode) -> Option<MutualTls> {
        Some(MutualTls { mode: mode as i32 })
    }

    fn policy(
        ns: &str,
        name: &str,
        created: &str,
        selector: &[(&str, &str)],
        mode: Mode,
    ) -> Arc<PeerAuthenticationPolicy> {
        let labels: Labels = selector.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let spec = PeerAuthentication {
            selector: (!selector.is_empty()).then(|| WorkloadSelector { match_labels: labels.clone() }),
            mtls: mtls(mode),
            port_level_mtls: BTreeMap::new(),
        };
        Arc::new(PeerAuthenticationPolicy {
            key: ConfigKey { kind: Kind::PeerAuthentication, namespace: ns.into(), name: name.into() },
            creation_timestamp: Some(created.into()),
            selector: (!selector.is_empty()).then_some(labels),
            spec,
        })
    }

    fn with_ports(p: Arc<PeerAuthenticationPolicy>, ports: &[(u32, Mode)]) -> Arc<PeerAuthenticationPolicy> {
        let mut p = (*p).clone();
        for (port, mode) in ports {
            p.spec.port_level_mtls.insert(*port, MutualTls { mode: *mode as i32 });
        }
        Arc::new(p)
    }

    fn app(v: &str) -> Labels {
        [("app".to_string(), v.to_string())].into()
    }

    fn mode(policies: &[Arc<PeerAuthenticationPolicy>], ns: &str, labels: &Labels, port: u32) -> MtlsMode {
        effective_mtls_mode(policies, ROOT, ns, labels, port)
    }

    const T1: &str = "2024-01-01T00:00:00Z";
    const T2: &str = "2024-02-01T00:00:00Z";

    #[test]
    fn no_policy_is_permissive() {
        assert_eq!(mode(&[], "ns", &app("a"), 80), MtlsMode::Permissive);
    }

    #[test]
    fn workload_beats_namespace_beats_mesh() {
        let mesh = policy(ROOT, "default", T1, &[], Mode::Strict);
        let ns = policy("ns", "default", T1, &[], Mode::Disable);
        let wl = policy("ns", "a", T1, &[("app", "a")], Mode::Permissive);
        assert_eq!(mode(std::slice::from_ref(&mesh), "ns", &app("a"), 80), MtlsMode::Strict);
        assert_eq!(mode(&[mesh.clone(), ns.clone()], "ns", &app("a"), 80), MtlsMode::Disable);
        assert_eq!(mode(&[mesh.clone(), ns.clone(), wl.clone()], "ns", &app("a"), 80), MtlsMode::Permissive);
        // The workload policy selects app=a only.
        assert_eq!(mode(&[mesh.clone(), ns.clone(), wl.clone()], "ns", &app("b"), 80), MtlsMode::Disable);
        // Another namespace's policies do not apply.
        assert_eq!(mode(&[mesh, ns, wl], "other", &app("a"), 80), MtlsMode::Strict);
    }

    #[test]
    fn oldest_wins_among_equals_then_name() {
        let old = policy("ns", "z-old", T1, &[], Mode::Strict);
        let new = policy("ns", "a-new", T2, &[], Mode::Disable);
        assert_eq!(mode(&[new.clone(), old.clone()], "ns", &app("a"), 80), MtlsMode::Strict);
        let same_time_b = policy("ns", "b", T1, &[], Mode::Disable);
        let same_time_a = policy("ns", "a", T1, &[], Mode::Strict);
        assert_eq!(mode(&[same_time_b, same_time_a], "ns", &app("a"), 80), MtlsMode::Strict);
        let wl_new = policy("ns", "w1", T2, &[("app", "a")], Mode::Disable);
        let wl_old = policy("ns", "w2", T1, &[("app", "a")], Mode::Strict);
        assert_eq!(mode(&[wl_new, wl_old], "ns", &app("a"), 80), MtlsMode::Strict);
        let mesh_new = policy(ROOT, "m1", T2, &[], Mode::Disable);
        let mesh_old = policy(ROOT, "m2", T1, &[], Mode::Strict);
        assert_eq!(mode(&[mesh_new, mesh_old], "ns", &app("a"), 80), MtlsMode::Strict);
    }

    #[test]
    fn unset_inherits_from_the_parent() {
        let mesh = policy(ROOT, "default", T1, &[], Mode::Strict);
        let ns_unset = policy("ns", "default", T1, &[], Mode::Unset);
        let wl_unset = policy("ns", "a", T1, &[("app", "a")], Mode::Unset);
        assert_eq!(mode(&[mesh.clone(), ns_unset.clone(), wl_unset], "ns", &app("a"), 80), MtlsMode::Strict);
        let mut no_block = (*policy("ns", "b", T1, &[("app", "a")], Mode::Unset)).clone();
        no_block.spec.mtls = None;
        assert_eq!(mode(&[mesh, ns_unset, Arc::new(no_block)], "ns", &app("a"), 80), MtlsMode::Strict);
        // An UNSET mesh policy leaves the default.
        assert_eq!(
            mode(&[policy(ROOT, "default", T1, &[], Mode::Unset)], "ns", &app("a"), 80),
            MtlsMode::Permissive
        );
        // The older policy of a level wins even when UNSET: its level then inherits.
        let ns_old_unset = policy("ns", "a", T1, &[], Mode::Unset);
        let ns_new_disable = policy("ns", "b", T2, &[], Mode::Disable);
        let mesh = policy(ROOT, "default", T1, &[], Mode::Strict);
        assert_eq!(mode(&[mesh, ns_old_unset, ns_new_disable], "ns", &app("a"), 80), MtlsMode::Strict);
    }

    #[test]
    fn port_level_only_with_a_selector_and_unset_ports_inherit_the_workload() {
        let ns_with_ports =
            with_ports(policy("ns", "default", T1, &[], Mode::Strict), &[(8080, Mode::Disable)]);
        assert_eq!(
            mode(&[ns_with_ports], "ns", &app("a"), 8080),
            MtlsMode::Strict,
            "namespace policy: ports ignored"
        );
        let mesh = policy(ROOT, "default", T1, &[], Mode::Strict);
        let wl = with_ports(
            policy("ns", "a", T1, &[("app", "a")], Mode::Unset),
            &[(8080, Mode::Disable), (9090, Mode::Unset), (7070, Mode::Permissive)],
        );
        let all = [mesh, wl];
        assert_eq!(mode(&all, "ns", &app("a"), 8080), MtlsMode::Disable);
        assert_eq!(
            mode(&all, "ns", &app("a"), 9090),
            MtlsMode::Strict,
            "UNSET port inherits the workload mode"
        );
        assert_eq!(mode(&all, "ns", &app("a"), 7070), MtlsMode::Permissive);
        assert_eq!(mode(&all, "ns", &app("a"), 80), MtlsMode::Strict);
    }

    #[test]
    fn a_selector_in_the_root_namespace_is_ignored_and_root_workloads_see_mesh_policy() {
        let root_selector = policy(ROOT, "sel", T1, &[("app", "a")], Mode::Disable);
        assert_eq!(mode(std::slice::from_ref(&root_selector), "ns", &app("a"), 80), MtlsMode::Permissive);
        assert_eq!(mode(&[root_selector], ROOT, &app("a"), 80), MtlsMode::Permissive);
        let mesh = policy(ROOT, "default", T1, &[], Mode::Strict);
        assert_eq!(mode(&[mesh], ROOT, &app("x"), 80), MtlsMode::Strict);
        // An empty matchLabels is a namespace-wide policy.
        let mut empty = (*policy("ns", "e", T1, &[], Mode::Disable)).clone();
        empty.spec.selector = Some(WorkloadSelector::default());
        empty.selector = Some(Labels::new());
        assert_eq!(mode(&[Arc::new(empty)], "ns", &app("a"), 80), MtlsMode::Disable);
    }
}
