//! WorkloadGroups as templates of WorkloadEntries (Istio's auto-registration,
//! `pilot/pkg/autoregistration/controller.go`).
//!
//! A WorkloadGroup is never an endpoint itself. When a VM's proxy connects with
//! `ISTIO_META_AUTO_REGISTER_GROUP=<group>`, Istio creates a WorkloadEntry from the group's template;
//! that entry is then an endpoint like any other. The ServiceEntry registry keeps the groups, warns
//! when the entries a group would create are selected by no ServiceEntry, and this module builds the
//! entry the way Istio does, for the (later) auto-registration controller.

use std::collections::BTreeMap;

use api::{Kind, Spec, networking::WorkloadEntry};
use model::{Config, ConfigMeta, service::Labels};

use crate::serviceentry::conversion::ANNOTATION_AUTO_REGISTRATION_GROUP;

/// Label Istio's agent uses for the proxy's locality (`istio-locality`); dropped from the labels a
/// proxy contributes, since the entry gets a `locality` field instead.
const LABEL_ISTIO_LOCALITY: &str = model::service::LABEL_ISTIO_LOCALITY;

/// What the connecting proxy tells about itself (from its node metadata).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AutoRegistration {
    /// The proxy's first IP address; becomes the entry's `address`.
    pub address: String,
    /// The proxy's namespace; the entry is created there.
    pub namespace: String,
    /// The proxy's network, if any (overrides the template's).
    pub network: String,
    /// The proxy's locality `region/zone/subzone`, if any (overrides the template's).
    pub locality: String,
    /// The proxy's labels (node metadata `LABELS`); they win over the group's.
    pub labels: Labels,
}

/// The labels a WorkloadEntry created from `group` carries before the proxy adds its own: the
/// template's labels with the group's `metadata.labels` over them. Empty for a config that is not a
/// WorkloadGroup.
pub fn group_entry_labels(group: &Config) -> Labels {
    let Spec::WorkloadGroup(wg) = &group.spec else {
        return Labels::new();
    };
    let mut labels = wg.template.as_ref().map(|t| t.labels.clone()).unwrap_or_default();
    if let Some(meta) = &wg.metadata {
        labels.extend(meta.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    labels
}

/// The name Istio gives an auto-registered entry: `<group>-<address>[-<network>]`, with `:` in the
/// address written as `-`, cut to its last 253 characters.
pub fn auto_registered_name(group_name: &str, address: &str, network: &str) -> String {
    let mut name = format!("{group_name}-{}", address.replace(':', "-"));
    if !network.is_empty() {
        name.push('-');
        name.push_str(network);
    }
    if name.len() > 253 {
        let mut cut = name.len() - 253;
        while !name.is_char_boundary(cut) {
            cut += 1;
        }
        name = name[cut..].to_string();
    }
    name
}

/// The WorkloadEntry Istio creates for a proxy registering into `group` (Istio's
/// `workloadEntryFromGroup`): the template with the proxy's address; labels = template < group
/// metadata < proxy (without `istio-locality`); annotations = group metadata annotations plus
/// `istio.io/autoRegistrationGroup: <group>`; the proxy's network and locality when it has them.
/// `None` when `group` is not a WorkloadGroup.
pub fn workload_entry_from_group(group: &Config, proxy: &AutoRegistration) -> Option<Config> {
    let Spec::WorkloadGroup(wg) = &group.spec else {
        return None;
    };
    let mut entry: WorkloadEntry = wg.template.clone().unwrap_or_default();
    entry.address = proxy.address.clone();
    let mut labels = group_entry_labels(group);
    if !proxy.labels.is_empty() {
        labels.extend(proxy.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        labels.remove(LABEL_ISTIO_LOCALITY);
    }
    entry.labels = labels.clone();
    let mut annotations =
        BTreeMap::from([(ANNOTATION_AUTO_REGISTRATION_GROUP.to_string(), group.meta.name.clone())]);
    if let Some(meta) = &wg.metadata {
        annotations.extend(meta.annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if !proxy.network.is_empty() {
        entry.network = proxy.network.clone();
    }
    if !proxy.locality.is_empty() {
        entry.locality = proxy.locality.clone();
    }
    Some(Config {
        meta: ConfigMeta {
            gvk: Kind::WorkloadEntry.schema().gvk(),
            name: auto_registered_name(&group.meta.name, &proxy.address, &proxy.network),
            namespace: proxy.namespace.clone(),
            labels,
            annotations,
            domain_suffix: group.meta.domain_suffix.clone(),
            ..ConfigMeta::default()
        },
        spec: Spec::WorkloadEntry(Box::new(entry)),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_istio() {
        assert_eq!(auto_registered_name("vm", "10.0.0.1", ""), "vm-10.0.0.1");
        assert_eq!(auto_registered_name("vm", "2001:db8::1", "net1"), "vm-2001-db8--1-net1");
        let long = auto_registered_name(&"g".repeat(300), "1.1.1.1", "");
        assert_eq!(long.len(), 253);
        assert!(long.ends_with("g-1.1.1.1"));
    }
}
