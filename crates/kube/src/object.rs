//! Custom resources as a list or watch delivers them, decoded one object at a time.
//!
//! kube-rs decodes a whole list response (and each watch line) with serde_json, whose recursion limit
//! is 128 levels. The API server stores custom resources nested far deeper (its own JSON limit is
//! 10,000 levels), so with kube-rs's `DynamicObject` one such object fails its kind's entire list:
//! the watch retries for ever and no object of that kind — good or bad — is read. [`ListedObject`]
//! takes each item as raw text first (serde_json skips a value of any depth without recursing), then
//! decodes it on its own: an object that cannot be decoded becomes an error for that object alone,
//! reported with its namespace, name and resource version, and the rest of the list is read.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{core::DynamicResourceScope, discovery::ApiResource};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// serde_json's recursion limit (levels of arrays and objects), which [`ListedObject::body`] is
/// decoded under: deeper objects are refused (no Istio spec comes near it; config files are held to
/// the same depth, `api::yaml::MAX_DEPTH`).
pub const MAX_DEPTH: usize = 128;

/// One custom resource of a list or watch.
#[derive(Clone, Debug)]
pub struct ListedObject {
    /// The object's name, namespace, resource version and labels (read even when the body is not).
    pub metadata: ObjectMeta,
    /// The whole object as JSON, or why it could not be decoded (e.g. nested deeper than
    /// [`MAX_DEPTH`] levels).
    pub body: Result<serde_json::Value, String>,
}

/// The part of `metadata` read from every object: its identity. Other fields (managed fields mirror
/// the object's shape, so they may be as deep as the object) are skipped without recursion.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Identity {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    labels: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Head {
    metadata: Identity,
}

impl ListedObject {
    /// Decodes one object from its JSON text (never fails: an undecodable body is kept as an error).
    pub fn from_json(text: &str) -> ListedObject {
        let head: Head = serde_json::from_str(text).unwrap_or_default();
        let metadata = ObjectMeta {
            name: head.metadata.name,
            namespace: head.metadata.namespace,
            resource_version: head.metadata.resource_version,
            labels: head.metadata.labels,
            ..ObjectMeta::default()
        };
        let body = serde_json::from_str::<serde_json::Value>(text).map_err(|e| {
            if e.to_string().starts_with("recursion limit exceeded") {
                format!("the object is nested deeper than {MAX_DEPTH} levels; it cannot be read")
            } else {
                format!("the object cannot be decoded: {e}")
            }
        });
        ListedObject { metadata, body }
    }
}

impl<'de> Deserialize<'de> for ListedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Ok(ListedObject::from_json(raw.get()))
    }
}

impl kube::Resource for ListedObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    fn object(name: &str, spec: &str) -> String {
        format!(
            r#"{{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"7","managedFields":[{{"fieldsV1":{{"f:spec":{spec}}}}}]}},"spec":{{"hosts":["a"],"x":{spec}}}}}"#
        )
    }

    #[test]
    fn one_deep_object_does_not_fail_its_list() {
        let list = format!(
            r#"{{"apiVersion":"v1","kind":"List","metadata":{{"resourceVersion":"9"}},"items":[{},{},{}]}}"#,
            object("good", "1"),
            object("deep", &nested(20_000)),
            object("after", "2"),
        );
        // kube-rs's own type fails the whole list.
        assert!(serde_json::from_str::<kube::core::ObjectList<kube::api::DynamicObject>>(&list).is_err());
        let listed: kube::core::ObjectList<ListedObject> = serde_json::from_str(&list).unwrap();
        let names: Vec<_> = listed.items.iter().map(|o| o.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["good", "deep", "after"]);
        assert_eq!(listed.items[0].body.as_ref().unwrap()["spec"]["hosts"][0], "a");
        assert_eq!(listed.items[1].metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(listed.items[1].metadata.namespace.as_deref(), Some("ns"));
        let err = listed.items[1].body.as_ref().unwrap_err();
        assert!(err.contains("deeper than 128 levels"), "{err}");
        assert!(listed.items[2].body.is_ok());
    }

    #[test]
    fn a_watch_event_with_a_deep_object_is_read() {
        let line = format!(r#"{{"type":"MODIFIED","object":{}}}"#, object("deep", &nested(5_000)));
        let event: kube::core::WatchEvent<ListedObject> = serde_json::from_str(&line).unwrap();
        let kube::core::WatchEvent::Modified(o) = event else { panic!("not MODIFIED") };
        assert_eq!(o.metadata.name.as_deref(), Some("deep"));
        assert!(o.body.is_err());
        // An object just inside the limit is read whole.
        let ok = ListedObject::from_json(&object("ok", &nested(100)));
        assert!(ok.body.is_ok());
    }
}
