//! Istio's `serviceentry` analyzers (`pkg/config/analysis/analyzers/serviceentry`).
//!
//! * [`ProtocolAddressesAnalyzer`] (`serviceentry.ProtocolAddressesAnalyzer`; Istio's metadata name is
//!   `serviceentry.Analyzer`): a ServiceEntry without `addresses`, without addresses allocated in its
//!   `status.addresses`, in a mesh that does not auto-allocate (`defaultConfig.proxyMetadata`
//!   `ISTIO_META_DNS_CAPTURE=true` together with `ISTIO_META_DNS_AUTO_ALLOCATE=true` or
//!   `PILOT_ENABLE_IP_AUTOALLOCATE=true`), gets one IST0134 ServiceEntryAddressesRequired per port whose
//!   protocol is empty or TCP (any case), pointing at `spec.ports[i].name`.
//! * [`ConflictingServiceEntryProtocolAnalyzer`] (`serviceentry.ConflictingServiceEntryProtocolAnalyzer`):
//!   ServiceEntries visible in the same scope (their `exportTo` namespaces, `.` being their own; no
//!   `exportTo` or `*` is the global scope, which every namespace also sees) that define the same host
//!   and port number with protocols differing other than by case each get one IST0177
//!   ConflictingServiceEntryProtocol (only the first conflict found per ServiceEntry is reported, as
//!   Istio does). Keys are visited in a fixed order (scope, host, port) where Istio's map order is random.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::workload::{full_name, message_at_leaf};
use crate::{
    Analyzer, Context, Message, msg,
    resource::{IstioResource, kinds},
};

/// `serviceentry.ProtocolAddressesAnalyzer`: TCP ports without addresses.
#[derive(Debug, Default)]
pub struct ProtocolAddressesAnalyzer;

impl Analyzer for ProtocolAddressesAnalyzer {
    fn name(&self) -> &str {
        "serviceentry.Analyzer"
    }

    fn type_name(&self) -> &str {
        "serviceentry.ProtocolAddressesAnalyzer"
    }

    fn description(&self) -> &str {
        "Checks the validity of ServiceEntry"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::SERVICE_ENTRY, kinds::MESH_CONFIG]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let metadata = ctx
            .mesh
            .get("defaultConfig")
            .and_then(|d| d.get("proxyMetadata"))
            .cloned()
            .unwrap_or(Value::Null);
        let is_true = |k: &str| metadata.get(k).and_then(Value::as_str) == Some("true");
        let auto_allocated = is_true("ISTIO_META_DNS_CAPTURE")
            && (is_true("ISTIO_META_DNS_AUTO_ALLOCATE") || is_true("PILOT_ENABLE_IP_AUTOALLOCATE"));
        if auto_allocated {
            return;
        }
        for config in ctx.istio(api::Kind::ServiceEntry) {
            let api::Spec::ServiceEntry(se) = config.spec() else { continue };
            if !se.addresses.is_empty() || address_allocated(config.config.status.as_ref()) {
                continue;
            }
            for (i, port) in se.ports.iter().enumerate() {
                if port.protocol.is_empty() || port.protocol.eq_ignore_ascii_case("TCP") {
                    out.push(message_at_leaf(
                        config,
                        &msg::SERVICE_ENTRY_ADDRESSES_REQUIRED,
                        &[],
                        &format!("spec.ports[{i}].name"),
                    ));
                }
            }
        }
    }
}

/// Whether the ServiceEntry's status lists allocated addresses (`status.addresses`).
fn address_allocated(status: Option<&Value>) -> bool {
    status.and_then(|s| s.get("addresses")).and_then(Value::as_array).is_some_and(|a| !a.is_empty())
}

/// `serviceentry.ConflictingServiceEntryProtocolAnalyzer`: one host and port, several protocols.
#[derive(Debug, Default)]
pub struct ConflictingServiceEntryProtocolAnalyzer;

/// The global scope (`exportTo` empty or containing `*`).
const ALL_NAMESPACES: &str = "*";

impl Analyzer for ConflictingServiceEntryProtocolAnalyzer {
    fn name(&self) -> &str {
        "serviceentry.ConflictingServiceEntryProtocolAnalyzer"
    }

    fn description(&self) -> &str {
        "Checks if multiple ServiceEntries define the same host and port with different protocols"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::SERVICE_ENTRY]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let configs: Vec<&IstioResource> = ctx.istio(api::Kind::ServiceEntry).collect();
        // (scope, host, port) → (protocol, index into `configs`) in reading order.
        let mut index: BTreeMap<(String, String, u32), Vec<(String, usize)>> = BTreeMap::new();
        for (i, config) in configs.iter().enumerate() {
            let api::Spec::ServiceEntry(se) = config.spec() else { continue };
            for scope in export_scopes(&se.export_to, config.namespace()) {
                for host in &se.hosts {
                    for port in &se.ports {
                        index
                            .entry((scope.clone(), host.clone(), port.number))
                            .or_default()
                            .push((port.protocol.clone(), i));
                    }
                }
            }
        }
        let mut reported: BTreeSet<usize> = BTreeSet::new();
        for ((scope, host, port), entries) in &index {
            let mut entries = entries.clone();
            if scope != ALL_NAMESPACES
                && let Some(global) = index.get(&(ALL_NAMESPACES.to_string(), host.clone(), *port))
            {
                entries.extend(global.iter().cloned());
            }
            let protocols: BTreeSet<String> = entries.iter().map(|(p, _)| p.to_uppercase()).collect();
            if protocols.len() < 2 {
                continue;
            }
            let mut names: Vec<String> = Vec::new();
            for (_, i) in &entries {
                let n = full_name(configs[*i].namespace(), configs[*i].name());
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            names.sort();
            let names = names.join(", ");
            let protocols = protocols.into_iter().collect::<Vec<_>>().join(", ");
            for (_, i) in &entries {
                if !reported.insert(*i) {
                    continue;
                }
                out.push(message_at_leaf(
                    configs[*i],
                    &msg::CONFLICTING_SERVICE_ENTRY_PROTOCOL,
                    &[names.as_str().into(), host.as_str().into(), (*port).into(), protocols.as_str().into()],
                    "metadata.name",
                ));
            }
        }
    }
}

/// The scopes a ServiceEntry is visible in: `*` when exported to all namespaces (no `exportTo` or
/// `*` among them), else its `exportTo` namespaces with `.` replaced by its own.
fn export_scopes(export_to: &[String], namespace: &str) -> BTreeSet<String> {
    if export_to.is_empty() || export_to.iter().any(|e| e == ALL_NAMESPACES) {
        return BTreeSet::from([ALL_NAMESPACES.to_string()]);
    }
    export_to.iter().map(|e| if e == "." { namespace.to_string() } else { e.clone() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_scopes_follow_istio() {
        assert_eq!(export_scopes(&[], "a"), BTreeSet::from(["*".to_string()]));
        assert_eq!(export_scopes(&[".".into(), "*".into()], "a"), BTreeSet::from(["*".to_string()]));
        assert_eq!(
            export_scopes(&[".".into(), "b".into()], "a"),
            BTreeSet::from(["a".to_string(), "b".to_string()])
        );
    }
}
