//! The `/debug/configz` dump: every object of a store as a Kubernetes-style JSON object.
//!
//! Shape as Istio's `configz` handler (`pilot/pkg/xds/debug.go`, objects converted by
//! `crd.ConvertConfig`): a JSON array, kinds in the store's schema order, objects by namespace and name;
//! each object is
//!
//! ```json
//! {"kind": "VirtualService", "apiVersion": "networking.istio.io/v1",
//!  "metadata": {"name": "reviews", "namespace": "default", "resourceVersion": "3",
//!               "creationTimestamp": null, "labels": {…}, "annotations": {…}},
//!  "spec": {…}, "status": {…}}
//! ```
//!
//! As in Kubernetes' `ObjectMeta`, empty `resourceVersion`, `generation`, `labels` and `annotations`
//! are left out and `creationTimestamp` is `null` when unknown; `status` is left out when absent. An
//! empty namespace is shown as `default` (no Istio kind is cluster-scoped).
//!
//! meshpilot adds one field Istio does not have: `"source"` (last), where the object in force comes
//! from — `file:///PATH/TO/FILE`, `k8s://`, or `xds://HOST:PORT` (docs/MCP.md).

use model::{Config, ConfigStore};
use serde_json::{Map, Value};

/// Every object of `store`, as Istio's `/debug/configz` lists them, each with a meshpilot-only
/// top-level `"source"` when the store knows where the object comes from
/// ([`ConfigStore::source_of`]: `file:///PATH`, `k8s://`, `xds://HOST:PORT`). Istio's configz has
/// no such field; it comes last, after Istio's fields.
pub fn configz(store: &dyn ConfigStore) -> Value {
    let mut out = Vec::new();
    for kind in store.schemas() {
        for config in store.list(*kind, None) {
            let mut object = kubernetes_object(&config);
            let meta = &config.meta;
            if let (Some(source), Some(map)) =
                (store.source_of(*kind, &meta.namespace, &meta.name), object.as_object_mut())
            {
                map.insert("source".into(), source.into());
            }
            out.push(object);
        }
    }
    Value::Array(out)
}

/// Adds what converters generated (`model::push::GeneratedConfig`) to a [`configz`] dump: each input
/// object's computed status replaces its `status` (the Gateway API objects, as Istio writes their
/// status), and the generated Istio objects are appended with `"source": "generated"` (istiod lists
/// them too: its configz includes the Gateways and VirtualServices it generated).
pub fn add_generated(dump: &mut Value, generated: &model::push::GeneratedConfig) {
    let Some(list) = dump.as_array_mut() else { return };
    for status in &generated.statuses {
        let kind = status.key.kind;
        let found = list.iter_mut().find(|o| {
            o["kind"] == kind.as_str()
                && o["apiVersion"].as_str().is_some_and(|v| v.starts_with(kind.schema().group))
                && o["metadata"]["name"] == status.key.name.as_str()
                && (kind.schema().cluster_scoped
                    || o["metadata"]["namespace"] == status.key.namespace.as_str())
        });
        if let Some(object) = found.and_then(Value::as_object_mut) {
            object.insert("status".into(), status.status.clone());
        }
    }
    for config in &generated.configs {
        let mut object = kubernetes_object(config);
        if let Some(map) = object.as_object_mut() {
            map.insert("source".into(), "generated".into());
        }
        list.push(object);
    }
}

/// One object in Kubernetes form (`kind`, `apiVersion`, `metadata`, `spec`, `status`).
pub fn kubernetes_object(config: &Config) -> Value {
    let meta = &config.meta;
    let api_version = if meta.gvk.version.is_empty() || meta.gvk.group.is_empty() {
        config.kind().schema().api_version()
    } else {
        meta.gvk.api_version()
    };
    let mut metadata = Map::new();
    metadata.insert("name".into(), meta.name.clone().into());
    if !config.kind().schema().cluster_scoped {
        let namespace = if meta.namespace.is_empty() { "default" } else { meta.namespace.as_str() };
        metadata.insert("namespace".into(), namespace.into());
    }
    if !meta.resource_version.is_empty() {
        metadata.insert("resourceVersion".into(), meta.resource_version.clone().into());
    }
    if meta.generation != 0 {
        metadata.insert("generation".into(), meta.generation.into());
    }
    metadata.insert(
        "creationTimestamp".into(),
        meta.creation_timestamp.clone().map_or(Value::Null, Value::String),
    );
    if !meta.labels.is_empty() {
        metadata.insert("labels".into(), string_map(&meta.labels));
    }
    if !meta.annotations.is_empty() {
        metadata.insert("annotations".into(), string_map(&meta.annotations));
    }
    let mut object = Map::new();
    object.insert("kind".into(), config.kind().as_str().into());
    object.insert("apiVersion".into(), api_version.into());
    object.insert("metadata".into(), metadata.into());
    object.insert("spec".into(), config.spec.to_json());
    if let Some(status) = &config.status {
        object.insert("status".into(), status.clone());
    }
    object.into()
}

fn string_map(map: &std::collections::BTreeMap<String, String>) -> Value {
    map.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<Map<_, _>>().into()
}
