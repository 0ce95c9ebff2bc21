//! Strategic merge of a pod overlay into a pod (Kubernetes' strategic merge patch with the `Pod`
//! type's patch strategies, `k8s.io/apimachinery/pkg/util/strategicpatch`), as istiod merges a
//! rendered injection template into the pod (`applyOverlayYAML`).
//!
//! Objects merge field by field; a `null` in the overlay deletes the field; lists with a merge key
//! merge element by element (an element with the same key merges, a new one is appended); lists of
//! strings with the merge strategy (`finalizers`) take the union; every other list is replaced.

use serde_json::{Map, Value as Json};

/// List fields of a pod that merge by a key, by the field name (the `patchMergeKey` of the
/// `k8s.io/api/core/v1` types).
const MERGE_KEYS: &[(&str, &str)] = &[
    ("containers", "name"),
    ("initContainers", "name"),
    ("ephemeralContainers", "name"),
    ("volumes", "name"),
    ("imagePullSecrets", "name"),
    ("env", "name"),
    ("ports", "containerPort"),
    ("volumeMounts", "mountPath"),
    ("volumeDevices", "devicePath"),
    ("hostAliases", "ip"),
    ("topologySpreadConstraints", "topologyKey"),
    ("schedulingGates", "name"),
    ("resourceClaims", "name"),
    ("ownerReferences", "uid"),
    ("resizePolicy", "resourceName"),
];

/// Lists of scalars that merge as sets.
const SET_LISTS: &[&str] = &["finalizers"];

/// Merges `overlay` into `target` with the pod's strategies.
pub fn merge_pod(target: &mut Json, overlay: &Json) {
    merge_value(target, overlay, None);
}

fn merge_value(target: &mut Json, overlay: &Json, field: Option<&str>) {
    match (target, overlay) {
        (Json::Object(t), Json::Object(o)) => merge_object(t, o),
        (Json::Array(t), Json::Array(o)) => {
            if let Some(key) = field.and_then(merge_key) {
                merge_keyed_list(t, o, key);
            } else if field.is_some_and(|f| SET_LISTS.contains(&f)) {
                for item in o {
                    if !t.contains(item) {
                        t.push(item.clone());
                    }
                }
            } else {
                *t = o.clone();
            }
        }
        (target, overlay) => *target = overlay.clone(),
    }
}

fn merge_key(field: &str) -> Option<&'static str> {
    MERGE_KEYS.iter().find(|(f, _)| *f == field).map(|(_, k)| *k)
}

fn merge_object(target: &mut Map<String, Json>, overlay: &Map<String, Json>) {
    for (key, value) in overlay {
        if value.is_null() {
            target.remove(key);
            continue;
        }
        match target.get_mut(key) {
            Some(existing) => merge_value(existing, value, Some(key)),
            None => {
                target.insert(key.clone(), without_nulls(value));
            }
        }
    }
}

/// A new value from an overlay: `null` fields mean "delete", so they are not added.
fn without_nulls(value: &Json) -> Json {
    match value {
        Json::Object(o) => Json::Object(
            o.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), without_nulls(v))).collect(),
        ),
        Json::Array(a) => Json::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

fn merge_keyed_list(target: &mut Vec<Json>, overlay: &[Json], key: &str) {
    for item in overlay {
        let id = item.get(key);
        let found = id.and_then(|id| target.iter_mut().find(|t| t.get(key) == Some(id)));
        match found {
            Some(existing) => merge_value(existing, item, None),
            None => target.push(without_nulls(item)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn containers_merge_by_name_and_new_ones_are_appended() {
        let mut pod = json!({"spec": {"containers": [
            {"name": "app", "image": "a", "env": [{"name": "X", "value": "1"}], "args": ["a"]}
        ]}});
        merge_pod(
            &mut pod,
            &json!({"spec": {"containers": [
                {"name": "istio-proxy", "image": "p"},
                {"name": "app", "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "3"}], "args": ["b"]}
            ]}}),
        );
        assert_eq!(
            pod,
            json!({"spec": {"containers": [
                {"name": "app", "image": "a", "env": [{"name": "X", "value": "3"}, {"name": "Y", "value": "2"}], "args": ["b"]},
                {"name": "istio-proxy", "image": "p"}
            ]}})
        );
    }

    #[test]
    fn null_deletes_and_maps_merge() {
        let mut pod = json!({"metadata": {"annotations": {"a": "1", "b": "2"}}, "spec": {"dnsPolicy": "x"}});
        merge_pod(
            &mut pod,
            &json!({"metadata": {"annotations": {"b": null, "c": "3"}}, "spec": {"dnsPolicy": null}}),
        );
        assert_eq!(pod, json!({"metadata": {"annotations": {"a": "1", "c": "3"}}, "spec": {}}));
    }

    #[test]
    fn ports_merge_by_container_port_and_unkeyed_lists_replace() {
        let mut c = json!({"ports": [{"containerPort": 80, "name": "a"}], "tolerations": [{"key": "x"}]});
        merge_value(
            &mut c,
            &json!({"ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 90}], "tolerations": []}),
            None,
        );
        assert_eq!(
            c,
            json!({"ports": [{"containerPort": 80, "name": "a", "protocol": "TCP"}, {"containerPort": 90}], "tolerations": []})
        );
    }
}
