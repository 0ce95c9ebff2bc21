//! The discovery namespace filter (Istio's `pkg/kube/namespace/filter.go`): which namespaces the mesh
//! config's `discoverySelectors` select, kept up to date from a Namespace watch.
//!
//! The registry and the CRD source each own one, fed by their own Namespace watch (the registry
//! already watches Namespaces; the source starts one only when selectors are configured). A
//! namespace not seen yet counts as unselected; when it shows up selected, its objects are added.
//! As in Istio, deleting a namespace changes no membership event (its objects are deleted by their
//! own watches).

use std::collections::HashSet;

use model::{selector::DiscoverySelectors, service::Labels};

/// A change of a namespace's membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Membership {
    /// The namespace became selected: its objects appear.
    Selected,
    /// The namespace is no longer selected: its objects disappear.
    Deselected,
}

/// Selected namespaces under a set of discovery selectors.
#[derive(Clone, Debug, Default)]
pub struct NamespaceFilter {
    selectors: DiscoverySelectors,
    selected: HashSet<String>,
}

impl NamespaceFilter {
    /// A filter for `selectors`; no namespace is known yet.
    pub fn new(selectors: DiscoverySelectors) -> NamespaceFilter {
        NamespaceFilter { selectors, selected: HashSet::new() }
    }

    /// `true` when selectors are configured (else every namespace is selected and nothing changes).
    pub fn is_enabled(&self) -> bool {
        !self.selectors.is_empty()
    }

    /// Whether objects of `namespace` are read. The empty namespace (cluster-scoped) always is.
    pub fn selects(&self, namespace: &str) -> bool {
        !self.is_enabled() || namespace.is_empty() || self.selected.contains(namespace)
    }

    /// A Namespace was listed, added or changed: its membership change, if any.
    pub fn apply(&mut self, name: &str, labels: &Labels) -> Option<Membership> {
        if !self.is_enabled() {
            return None;
        }
        let now = self.selectors.selects(labels);
        let before = self.selected.contains(name);
        match (before, now) {
            (false, true) => {
                self.selected.insert(name.to_string());
                Some(Membership::Selected)
            }
            (true, false) => {
                self.selected.remove(name);
                Some(Membership::Deselected)
            }
            _ => None,
        }
    }

    /// A Namespace went away (no membership event: its objects go with it).
    pub fn delete(&mut self, name: &str) {
        self.selected.remove(name);
    }

    /// A Namespace (re)list finished: forget namespaces not in `listed`.
    pub fn retain(&mut self, listed: &HashSet<String>) {
        self.selected.retain(|n| listed.contains(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_follows_label_changes() {
        let selectors = DiscoverySelectors::from_json(
            &serde_json::json!([{"matchLabels": {"istio-discovery": "enabled"}}]),
        )
        .unwrap();
        let mut f = NamespaceFilter::new(selectors);
        let on: Labels = [("istio-discovery".to_string(), "enabled".to_string())].into();
        assert!(!f.selects("a"), "unknown namespaces are not selected");
        assert!(f.selects(""), "cluster-scoped objects are");
        assert_eq!(f.apply("a", &Labels::new()), None);
        assert_eq!(f.apply("a", &on), Some(Membership::Selected));
        assert!(f.selects("a"));
        assert_eq!(f.apply("a", &on), None);
        assert_eq!(f.apply("a", &Labels::new()), Some(Membership::Deselected));
        assert!(!f.selects("a"));
        f.apply("b", &on);
        f.retain(&HashSet::new());
        assert!(!f.selects("b"));
        let all = NamespaceFilter::new(DiscoverySelectors::default());
        assert!(all.selects("anything"));
    }
}
