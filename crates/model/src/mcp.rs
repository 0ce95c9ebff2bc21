//! Config objects as MCP-over-xDS resources: Istio's `PilotConfigToResource` (server side) and the
//! object half of `adsc`'s `mcpToPilot` (client side), over the wire types of [`api::mcp`].

use api::{
    Kind,
    mcp::{McpError, Resource, ResourceMeta, content_version},
};

use crate::{Config, ConfigMeta};

/// The version the MCP server puts in `metadata.version` for `config`: a content hash of its spec,
/// labels and annotations ([`api::mcp::content_version`]). Istio sends `resourceVersion`, which the
/// Kubernetes API server changes on every write; meshpilot's file source has no such version, and a
/// hash also gives a restarted server the versions it sent before (no spurious updates downstream).
pub fn resource_version(config: &Config) -> String {
    content_version(&config.spec, &config.meta.labels, &config.meta.annotations)
}

/// The MCP resource of `config`: name `namespace/name`, version [`resource_version`], labels,
/// annotations, creation time (when known), body the spec's Any.
pub fn to_resource(config: &Config) -> Resource {
    let meta = ResourceMeta {
        namespace: config.meta.namespace.clone(),
        name: config.meta.name.clone(),
        version: resource_version(config),
        labels: config.meta.labels.clone(),
        annotations: config.meta.annotations.clone(),
        creation_timestamp: config.meta.creation_timestamp.clone(),
    };
    api::mcp::to_resource(&meta, &config.spec)
}

/// The config object of an MCP resource of kind `kind`, at the kind's canonical GroupVersionKind,
/// with `resource_version` = the resource's `metadata.version` (as istiod's client) and
/// `domain_suffix` given by the reader.
///
/// # Errors
/// As [`api::mcp::from_resource`]: names the resource and field.
pub fn from_resource(kind: Kind, resource: &Resource, domain_suffix: &str) -> Result<Config, McpError> {
    let (meta, spec) = api::mcp::from_resource(kind, resource)?;
    Ok(Config {
        meta: ConfigMeta {
            gvk: kind.schema().gvk(),
            name: meta.name,
            namespace: meta.namespace,
            labels: meta.labels,
            annotations: meta.annotations,
            resource_version: meta.version,
            generation: 0,
            creation_timestamp: meta.creation_timestamp,
            domain_suffix: domain_suffix.to_string(),
        },
        spec,
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use api::{Spec, networking::VirtualService};

    use super::*;

    fn vs(hosts: &[&str]) -> Config {
        Config {
            meta: ConfigMeta {
                gvk: api::GroupVersionKind::from_api_version(
                    "networking.istio.io/v1alpha3",
                    "VirtualService",
                ),
                name: "reviews".into(),
                namespace: "bookinfo".into(),
                labels: BTreeMap::from([("app".into(), "reviews".into())]),
                annotations: BTreeMap::new(),
                resource_version: "12".into(),
                generation: 3,
                creation_timestamp: Some("2026-11-21T05:00:00Z".into()),
                domain_suffix: "cluster.local".into(),
            },
            spec: Spec::VirtualService(Box::new(VirtualService {
                hosts: hosts.iter().map(|h| h.to_string()).collect(),
                ..Default::default()
            })),
            status: None,
        }
    }

    #[test]
    fn config_round_trips_with_a_content_version() {
        let config = vs(&["reviews"]);
        let resource = to_resource(&config);
        let md = resource.metadata.as_ref().unwrap();
        assert_eq!(md.name, "bookinfo/reviews");
        assert_eq!(md.version, resource_version(&config));
        assert_ne!(md.version, "12", "the content version, not the store's resourceVersion");
        let back = from_resource(Kind::VirtualService, &resource, "cluster.local").unwrap();
        assert_eq!(back.spec, config.spec);
        assert_eq!(back.meta.gvk.to_string(), "networking.istio.io/v1/VirtualService");
        assert_eq!(back.meta.resource_version, md.version);
        assert_eq!(
            (back.meta.labels, back.meta.creation_timestamp),
            (config.meta.labels, config.meta.creation_timestamp)
        );

        // Same content in another store (other resourceVersion): same version; edited: another.
        let mut elsewhere = vs(&["reviews"]);
        elsewhere.meta.resource_version = "99".into();
        assert_eq!(resource_version(&elsewhere), md.version);
        assert_ne!(resource_version(&vs(&["reviews", "ratings"])), md.version);
    }
}
