//! Kubernetes object metadata (`metadata:` of every document), the part Istio config uses.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wkt::is_default;

/// `metadata` of a Kubernetes-style object (a subset of `k8s.io/apimachinery` ObjectMeta: the
/// fields Istio config readers use; others such as `managedFields` are accepted and ignored).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    /// Object name (a DNS-1123 subdomain for most kinds).
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Prefix for a server-generated name (accepted, unused by file sources).
    #[serde(skip_serializing_if = "is_default")]
    pub generate_name: String,
    /// Namespace; empty means "the default namespace of the reader".
    #[serde(skip_serializing_if = "is_default")]
    pub namespace: String,
    /// Labels.
    #[serde(skip_serializing_if = "is_default")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(skip_serializing_if = "is_default")]
    pub annotations: BTreeMap<String, String>,
    /// Opaque version for optimistic concurrency.
    #[serde(skip_serializing_if = "is_default")]
    pub resource_version: String,
    /// Sequence number of spec changes.
    #[serde(skip_serializing_if = "is_default")]
    pub generation: i64,
    /// RFC 3339 creation time, e.g. `2026-11-21T05:00:00Z`.
    #[serde(skip_serializing_if = "is_default")]
    pub creation_timestamp: Option<String>,
    /// Unique id assigned by the API server.
    #[serde(skip_serializing_if = "is_default")]
    pub uid: String,
    /// Finalizers (accepted and ignored).
    #[serde(skip_serializing_if = "is_default")]
    pub finalizers: Vec<String>,
    /// Owner references (kept as free-form JSON).
    #[serde(skip_serializing_if = "is_default")]
    pub owner_references: Vec<serde_json::Value>,
    /// Deletion time, if the object is being deleted.
    #[serde(skip_serializing_if = "is_default")]
    pub deletion_timestamp: Option<String>,
    /// Seconds the object may take to be deleted (accepted, unused).
    #[serde(skip_serializing_if = "is_default")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// Deprecated self link (accepted, unused).
    #[serde(skip_serializing_if = "is_default")]
    pub self_link: String,
    /// Server-side apply bookkeeping (kept as free-form JSON).
    #[serde(skip_serializing_if = "is_default")]
    pub managed_fields: Vec<serde_json::Value>,
}
