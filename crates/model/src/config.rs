//! [`Config`]: one Istio config object.

use std::{collections::BTreeMap, fmt};

use api::{GroupVersionKind, Kind, Spec};

/// Identifies a config object: kind, namespace and name (Istio's `ConfigKey`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigKey {
    /// The object's kind.
    pub kind: Kind,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl fmt::Display for ConfigKey {
    /// `Kind/namespace/name`, the form Istio uses in logs and messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// Metadata of a config object (Istio's `config.Meta`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigMeta {
    /// The GroupVersionKind as written in the source (`networking.istio.io/v1alpha3/VirtualService`);
    /// version aliases are kept so output can echo what the user wrote.
    pub gvk: GroupVersionKind,
    /// Object name.
    pub name: String,
    /// Object namespace (the reader's default namespace when the source gave none).
    pub namespace: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Opaque version for optimistic concurrency; empty when the source has none.
    pub resource_version: String,
    /// Sequence number of spec changes (0 when the source has none).
    pub generation: i64,
    /// RFC 3339 creation time, when known.
    pub creation_timestamp: Option<String>,
    /// DNS domain suffix the object belongs to (`cluster.local`).
    pub domain_suffix: String,
}

/// One Istio config object: metadata, typed spec and (free-form) status.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Metadata.
    pub meta: ConfigMeta,
    /// The typed spec; its variant is the object's kind.
    pub spec: Spec,
    /// Status as written in the source (`status:`), kept as JSON; `None` when absent.
    pub status: Option<serde_json::Value>,
}

impl Config {
    /// The object's kind.
    pub fn kind(&self) -> Kind {
        self.spec.kind()
    }

    /// The object's key.
    pub fn key(&self) -> ConfigKey {
        ConfigKey { kind: self.kind(), namespace: self.meta.namespace.clone(), name: self.meta.name.clone() }
    }

    /// The object as a Kubernetes-style JSON document (`apiVersion`, `kind`, `metadata`, `spec`
    /// [, `status`]), with Istio's field names.
    pub fn to_json(&self) -> serde_json::Value {
        let mut metadata = serde_json::Map::new();
        metadata.insert("name".into(), self.meta.name.clone().into());
        if !self.meta.namespace.is_empty() {
            // Cluster-scoped kinds (GatewayClass) have none.
            metadata.insert("namespace".into(), self.meta.namespace.clone().into());
        }
        if !self.meta.labels.is_empty() {
            metadata.insert("labels".into(), serde_json::to_value(&self.meta.labels).unwrap_or_default());
        }
        if !self.meta.annotations.is_empty() {
            metadata.insert(
                "annotations".into(),
                serde_json::to_value(&self.meta.annotations).unwrap_or_default(),
            );
        }
        if !self.meta.resource_version.is_empty() {
            metadata.insert("resourceVersion".into(), self.meta.resource_version.clone().into());
        }
        if self.meta.generation != 0 {
            metadata.insert("generation".into(), self.meta.generation.into());
        }
        if let Some(ts) = &self.meta.creation_timestamp {
            metadata.insert("creationTimestamp".into(), ts.clone().into());
        }
        let mut doc = serde_json::Map::new();
        doc.insert("apiVersion".into(), self.meta.gvk.api_version().into());
        doc.insert("kind".into(), self.kind().as_str().into());
        doc.insert("metadata".into(), metadata.into());
        doc.insert("spec".into(), self.spec.to_json());
        if let Some(status) = &self.status {
            doc.insert("status".into(), status.clone());
        }
        doc.into()
    }
}
