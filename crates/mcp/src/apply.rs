//! One MCP response of a config type → the changes to the source's store (pure).
//!
//! The rules, istiod's client's (`pkg/adsc` `handleMCP`) except where marked:
//!
//! - A response is the **full state** of its type: objects not in it are deleted.
//! - An object whose `metadata.version` equals the version held is left as it is (istiod updates
//!   only when the version changed); a new or re-versioned one is decoded, validated and upserted.
//! - Objects labelled `istio.io/rev` with a value other than the configured revision are skipped
//!   (and so deleted if held), as Istio's `ObjectInRevision`.
//! - **Invalid objects** (undecodable, or failing the validation files and CRDs get: strict
//!   decoding, the kind's rules) keep their last good copy, or none. *meshpilot only*: each one is
//!   reported ([`Applied::invalid`]) and the response is NACKed with them; istiod logs, skips and ACKs.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use api::{Kind, mcp::Resource};
use config::Change;
use config::parse::ParseOptions;
use envoy_types::pb::google::protobuf::Any;
use model::{Config, ConfigKey};
use prost::Message;

/// The label tying an object to a control-plane revision.
pub const REVISION_LABEL: &str = "istio.io/rev";

/// One invalid resource of a response: which and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidResource {
    /// `Kind namespace/name`, or the kind and index when the resource has no usable name.
    pub resource: String,
    /// The object's key when the name was readable (its last good copy is kept).
    pub key: Option<ConfigKey>,
    /// `field.path: reason` for each problem.
    pub errors: Vec<String>,
}

impl std::fmt::Display for InvalidResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.resource, self.errors.join("; "))
    }
}

/// What [`apply_response`] decided.
#[derive(Debug, Default)]
pub struct Applied {
    /// Changes for the store (upserts of new and re-versioned objects, removals of the missing).
    pub changes: Vec<Change>,
    /// Invalid resources (their last good copies stay).
    pub invalid: Vec<InvalidResource>,
    /// Objects left out because they belong to another revision.
    pub other_revision: usize,
    /// Validation warnings of accepted objects (`Kind ns/name: field: message`).
    pub warnings: Vec<String>,
}

/// How resources are read.
#[derive(Clone, Debug)]
pub struct ApplyOptions {
    /// `xds://HOST:PORT`, named as the file in validation findings.
    pub source: String,
    /// Reader settings (domain suffix).
    pub parse: ParseOptions,
    /// This control plane's revision; `None` or empty accepts every object.
    pub revision: Option<String>,
}

/// The changes that make `held` (the objects of `kind` held now, by key) the state `resources`
/// describes, by the rules of the module documentation.
pub fn apply_response(
    kind: Kind,
    resources: &[Any],
    held: &BTreeMap<ConfigKey, Arc<Config>>,
    options: &ApplyOptions,
) -> Applied {
    let mut out = Applied::default();
    let mut present: BTreeSet<ConfigKey> = BTreeSet::new();
    for (index, any) in resources.iter().enumerate() {
        let unnamed = || format!("{kind} resource [{index}]");
        if any.type_url != api::mcp::RESOURCE_TYPE_URL {
            out.invalid.push(InvalidResource {
                resource: unnamed(),
                key: None,
                errors: vec![format!(
                    "type_url: expected {}, got {:?}",
                    api::mcp::RESOURCE_TYPE_URL,
                    any.type_url
                )],
            });
            continue;
        }
        let resource = match Resource::decode(any.value.as_slice()) {
            Ok(r) => r,
            Err(e) => {
                out.invalid.push(InvalidResource {
                    resource: unnamed(),
                    key: None,
                    errors: vec![format!("value: malformed istio.mcp.v1alpha1.Resource: {e}")],
                });
                continue;
            }
        };
        let key = resource.metadata.as_ref().and_then(|m| {
            let (ns, name) = m.name.split_once('/')?;
            (!ns.is_empty() && !name.is_empty() && !name.contains('/')).then(|| ConfigKey {
                kind,
                namespace: ns.to_string(),
                name: name.to_string(),
            })
        });
        let labels = resource.metadata.as_ref().map(|m| &m.labels);
        if !in_revision(labels, options.revision.as_deref()) {
            out.other_revision += 1;
            continue;
        }
        if let Some(key) = &key {
            present.insert(key.clone());
            let version = resource.metadata.as_ref().map_or("", |m| m.version.as_str());
            if !version.is_empty() && held.get(key).is_some_and(|c| c.meta.resource_version == version) {
                continue;
            }
        }
        match read_resource(kind, &resource, options) {
            Ok((config, warnings)) => {
                let id = format!("{kind} {}/{}", config.meta.namespace, config.meta.name);
                out.warnings.extend(warnings.into_iter().map(|w| format!("{id}: {w}")));
                out.changes.push(Change::Upsert(Arc::new(config)));
            }
            Err((resource, errors)) => {
                out.invalid.push(InvalidResource {
                    resource: resource.unwrap_or_else(unnamed),
                    key: key.clone(),
                    errors,
                });
            }
        }
    }
    for key in held.keys() {
        if !present.contains(key) {
            out.changes.push(Change::Remove(key.clone()));
        }
    }
    out
}

/// Istio's `ObjectInRevision`: no label, or no revision configured, means included.
fn in_revision(labels: Option<&BTreeMap<String, String>>, revision: Option<&str>) -> bool {
    let Some(revision) = revision.filter(|r| !r.is_empty()) else { return true };
    labels.and_then(|l| l.get(REVISION_LABEL)).is_none_or(|v| v == revision)
}

/// Why a resource was refused: its `Kind ns/name` when readable, and each `field: reason`.
type Rejected = (Option<String>, Vec<String>);

/// Decodes one resource and validates it as a file or CRD object would be: the decoded object is
/// written as a Kubernetes document and read back through [`config::parse::parse_json`] (strict
/// decoding and the kind's validation). Errors carry the resource's name when known.
fn read_resource(
    kind: Kind,
    resource: &Resource,
    options: &ApplyOptions,
) -> Result<(Config, Vec<String>), Rejected> {
    let decoded = model::mcp::from_resource(kind, resource, &options.parse.domain_suffix).map_err(|e| {
        let named = (!e.resource.is_empty()).then(|| e.resource.clone());
        (named, vec![format!("{}: {}", e.field, e.reason)])
    })?;
    let id = format!("{kind} {}/{}", decoded.meta.namespace, decoded.meta.name);
    let mut docs = config::parse::parse_json(&options.source, &decoded.to_json(), &options.parse);
    if docs.len() != 1 {
        return Err((Some(id), vec![format!("expected one object, decoded {}", docs.len())]));
    }
    let doc = docs.remove(0);
    if !doc.errors.is_empty() {
        return Err((Some(id), doc.errors.iter().map(ToString::to_string).collect()));
    }
    let Some(mut config) = doc.config else {
        let why = doc.skipped.unwrap_or_else(|| "not an Istio config object".into());
        return Err((Some(id), vec![why]));
    };
    // As received: the version is the MCP one (what the next response is compared with).
    config.meta.resource_version = decoded.meta.resource_version;
    config.meta.creation_timestamp = decoded.meta.creation_timestamp;
    config.meta.gvk = decoded.meta.gvk;
    Ok((config, doc.warnings.iter().map(ToString::to_string).collect()))
}

/// The NACK text of a response's invalid resources: one line per resource, each naming the object
/// and every `field.path: reason`.
pub fn nack_message(type_url: &str, invalid: &[InvalidResource]) -> String {
    let mut text = format!(
        "{} invalid resource{} of {type_url} (the others were applied; invalid ones keep their last good copy):",
        invalid.len(),
        if invalid.len() == 1 { "" } else { "s" }
    );
    for r in invalid {
        text.push_str("\n- ");
        text.push_str(&r.to_string());
    }
    text
}

#[cfg(test)]
mod tests {
    use api::mcp::{Metadata, ResourceMeta};

    use super::*;

    fn options() -> ApplyOptions {
        ApplyOptions { source: "xds://test:1".into(), parse: ParseOptions::default(), revision: None }
    }

    fn vs_spec(host: &str) -> api::Spec {
        let json =
            serde_json::json!({"hosts": [host], "http": [{"route": [{"destination": {"host": host}}]}]});
        let node = api::yaml::Node::from_json(&json, api::yaml::Mark::default());
        api::Spec::from_node(Kind::VirtualService, Some(&node)).unwrap().0
    }

    fn resource(name: &str, version: &str, spec: &api::Spec, labels: &[(&str, &str)]) -> Any {
        let (namespace, name) = name.split_once('/').unwrap();
        let meta = ResourceMeta {
            namespace: namespace.into(),
            name: name.into(),
            version: version.into(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..ResourceMeta::default()
        };
        let r = api::mcp::to_resource(&meta, spec);
        Any { type_url: api::mcp::RESOURCE_TYPE_URL.into(), value: r.encode_to_vec() }
    }

    fn held_after(held: &mut BTreeMap<ConfigKey, Arc<Config>>, applied: &Applied) {
        for change in &applied.changes {
            match change {
                Change::Upsert(c) => {
                    held.insert(c.key(), c.clone());
                }
                Change::Remove(k) => {
                    held.remove(k);
                }
            }
        }
    }

    #[test]
    fn adds_updates_on_version_change_only_and_deletes_the_missing() {
        let mut held = BTreeMap::new();
        let first = [resource("ns/a", "1", &vs_spec("a"), &[]), resource("ns/b", "1", &vs_spec("b"), &[])];
        let applied = apply_response(Kind::VirtualService, &first, &held, &options());
        assert!(applied.invalid.is_empty(), "{:?}", applied.invalid);
        assert_eq!(applied.changes.len(), 2);
        held_after(&mut held, &applied);
        let a = &held[&ConfigKey { kind: Kind::VirtualService, namespace: "ns".into(), name: "a".into() }];
        assert_eq!(a.meta.resource_version, "1");
        assert_eq!(a.meta.gvk.api_version(), "networking.istio.io/v1");

        // Same version with other content: kept as held (istiod's rule). New version: updated.
        let second =
            [resource("ns/a", "1", &vs_spec("other"), &[]), resource("ns/b", "2", &vs_spec("b2"), &[])];
        let applied = apply_response(Kind::VirtualService, &second, &held, &options());
        assert_eq!(applied.changes.len(), 1, "{:?}", applied.changes);
        match &applied.changes[0] {
            Change::Upsert(c) => {
                assert_eq!((c.meta.name.as_str(), c.meta.resource_version.as_str()), ("b", "2"))
            }
            other => panic!("{other:?}"),
        }
        held_after(&mut held, &applied);

        // Missing from the full state: deleted.
        let third = [resource("ns/b", "2", &vs_spec("b2"), &[])];
        let applied = apply_response(Kind::VirtualService, &third, &held, &options());
        assert!(
            matches!(&applied.changes[..], [Change::Remove(k)] if k.name == "a"),
            "{:?}",
            applied.changes
        );
    }

    #[test]
    fn invalid_objects_keep_their_last_good_copy_and_are_reported_with_the_field() {
        let mut held = BTreeMap::new();
        let applied = apply_response(
            Kind::VirtualService,
            &[resource("ns/a", "1", &vs_spec("a"), &[])],
            &held,
            &options(),
        );
        held_after(&mut held, &applied);
        // Version 2 of `a` has an invalid host; `c` is new and valid; `d` is new and invalid.
        let bad = vs_spec("bad host!");
        let response = [
            resource("ns/a", "2", &bad, &[]),
            resource("ns/c", "1", &vs_spec("c"), &[]),
            resource("ns/d", "1", &bad, &[]),
        ];
        let applied = apply_response(Kind::VirtualService, &response, &held, &options());
        assert!(
            matches!(&applied.changes[..], [Change::Upsert(c)] if c.meta.name == "c"),
            "{:?}",
            applied.changes
        );
        assert_eq!(applied.invalid.len(), 2);
        assert_eq!(applied.invalid[0].resource, "VirtualService ns/a");
        assert!(applied.invalid[0].errors[0].starts_with("spec.hosts[0]: "), "{:?}", applied.invalid[0]);
        let text = nack_message("networking.istio.io/v1/VirtualService", &applied.invalid);
        assert!(text.starts_with("2 invalid resources of networking.istio.io/v1/VirtualService"), "{text}");
        assert!(text.contains("\n- VirtualService ns/a: spec.hosts[0]: "), "{text}");
        assert!(text.contains("\n- VirtualService ns/d: spec.hosts[0]: "), "{text}");

        // Malformed resources: named by kind and index when they have no usable name.
        let junk = [
            Any { type_url: "type.googleapis.com/other".into(), value: vec![] },
            Any { type_url: api::mcp::RESOURCE_TYPE_URL.into(), value: vec![0xff] },
            Any {
                type_url: api::mcp::RESOURCE_TYPE_URL.into(),
                value: Resource {
                    metadata: Some(Metadata { name: "noslash".into(), ..Metadata::default() }),
                    body: None,
                }
                .encode_to_vec(),
            },
        ];
        let applied = apply_response(Kind::VirtualService, &junk, &held, &options());
        assert_eq!(applied.invalid.len(), 3, "{:?}", applied.invalid);
        assert_eq!(applied.invalid[0].to_string().split(':').next(), Some("VirtualService resource [0]"));
        assert!(
            applied.invalid[2].to_string().contains("metadata.name: must be namespace/name"),
            "{}",
            applied.invalid[2]
        );
        // Nothing readable is present: the held object goes (full state).
        assert!(matches!(&applied.changes[..], [Change::Remove(k)] if k.name == "a"));
    }

    #[test]
    fn objects_of_another_revision_are_skipped() {
        let opts = ApplyOptions { revision: Some("canary".into()), ..options() };
        let response = [
            resource("ns/a", "1", &vs_spec("a"), &[(REVISION_LABEL, "stable")]),
            resource("ns/b", "1", &vs_spec("b"), &[(REVISION_LABEL, "canary")]),
            resource("ns/c", "1", &vs_spec("c"), &[]),
        ];
        let applied = apply_response(Kind::VirtualService, &response, &BTreeMap::new(), &opts);
        assert_eq!(applied.other_revision, 1);
        let names: Vec<&str> = applied
            .changes
            .iter()
            .filter_map(|c| match c {
                Change::Upsert(c) => Some(c.meta.name.as_str()),
                Change::Remove(_) => None,
            })
            .collect();
        assert_eq!(names, ["b", "c"]);
        let all = apply_response(Kind::VirtualService, &response, &BTreeMap::new(), &options());
        assert_eq!((all.other_revision, all.changes.len()), (0, 3), "no revision configured: all taken");
    }
}
