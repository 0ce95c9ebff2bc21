//! Strategic merge of a pod overlay into a pod (Kubernetes' strategic merge patch with the `Pod`
//! type's patch strategies, `k8s.io/apimachinery/pkg/util/strategicpatch`), as istiod merges a
//! rendered injection template into the pod (`applyOverlayYAML`).
//!
//! Objects merge field by field; a `null` in the overlay deletes the field; lists with a merge key
//! merge element by element (an element with the same key merges, a new one is added); lists of
//! strings with the merge strategy (`finalizers`) take the union; every other list is replaced. A
//! merged list is ordered as Kubernetes orders it (`normalizeElementOrder`): the overlay's elements
//! in the overlay's order, the elements only the target has kept at their place among them. List
//! elements may carry the `$patch: delete` (remove the element with that key) and `$patch: replace`
//! (the overlay's other elements replace the list) directives.

use serde_json::{Map, Value as Json};

/// List fields of a pod that merge by a key, by the field name (the `patchMergeKey` of the
/// `k8s.io/api/core/v1` types).
pub const POD_MERGE_KEYS: &[(&str, &str)] = &[
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
    merge_with_keys(target, overlay, POD_MERGE_KEYS);
}

/// Merges `overlay` into `target` as [`merge_pod`] does, with another type's list merge keys
/// (field name → `patchMergeKey`; a Service's `ports` merge by `port`, say).
pub fn merge_with_keys(target: &mut Json, overlay: &Json, keys: &[(&str, &str)]) {
    merge_value(target, overlay, None, keys);
}

fn merge_value(target: &mut Json, overlay: &Json, field: Option<&str>, keys: &[(&str, &str)]) {
    match (target, overlay) {
        (Json::Object(t), Json::Object(o)) => merge_object(t, o, keys),
        (Json::Array(t), Json::Array(o)) => {
            if let Some(key) = field.and_then(|f| merge_key(f, keys)) {
                merge_keyed_list(t, o, key, keys);
            } else if field.is_some_and(|f| SET_LISTS.contains(&f)) {
                let original = t.clone();
                for item in o {
                    if !t.contains(item) {
                        t.push(item.clone());
                    }
                }
                *t = kubernetes_order(std::mem::take(t), o, &original, |a, b| a == b);
            } else {
                *t = o.clone();
            }
        }
        (target, overlay) => *target = overlay.clone(),
    }
}

fn merge_key<'k>(field: &str, keys: &[(&str, &'k str)]) -> Option<&'k str> {
    keys.iter().find(|(f, _)| *f == field).map(|(_, k)| *k)
}

fn merge_object(target: &mut Map<String, Json>, overlay: &Map<String, Json>, keys: &[(&str, &str)]) {
    for (key, value) in overlay {
        if value.is_null() {
            target.remove(key);
            continue;
        }
        match target.get_mut(key) {
            Some(existing) => merge_value(existing, value, Some(key), keys),
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

const DIRECTIVE: &str = "$patch";

fn merge_keyed_list(target: &mut Vec<Json>, overlay: &[Json], key: &str, keys: &[(&str, &str)]) {
    // Directives first (`mergeSliceWithSpecialElements`).
    let mut patch = Vec::with_capacity(overlay.len());
    for item in overlay {
        match item.get(DIRECTIVE).and_then(Json::as_str) {
            Some("delete") => {
                let id = item.get(key);
                target.retain(|t| t.get(key) != id);
            }
            Some("replace") => target.clear(),
            _ => patch.push(item.clone()),
        }
    }
    let original = target.clone();
    for item in &patch {
        let id = item.get(key);
        let found = id.and_then(|id| target.iter_mut().find(|t| t.get(key) == Some(id)));
        match found {
            Some(existing) => merge_value(existing, item, None, keys),
            None => target.push(without_nulls(item)),
        }
    }
    let same = |a: &Json, b: &Json| a.get(key).is_some() && a.get(key) == b.get(key);
    *target = kubernetes_order(std::mem::take(target), &patch, &original, same);
}

/// Kubernetes' order of a merged list (`normalizeElementOrder` + `mergeSortedSlice`): the elements
/// the overlay has, in the overlay's order, and the target's others in their order, interleaved by
/// their positions in the target.
fn kubernetes_order(
    merged: Vec<Json>,
    overlay: &[Json],
    original: &[Json],
    same: impl Fn(&Json, &Json) -> bool,
) -> Vec<Json> {
    let position = |list: &[Json], item: &Json| list.iter().position(|x| same(x, item));
    let (mut from_overlay, server_only): (Vec<Json>, Vec<Json>) =
        merged.into_iter().partition(|item| position(overlay, item).is_some());
    from_overlay.sort_by_key(|item| position(overlay, item));
    let (mut left, mut right) = (server_only.into_iter().peekable(), from_overlay.into_iter().peekable());
    let mut out = Vec::new();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => match (position(original, l), position(original, r)) {
                (Some(li), Some(ri)) => li < ri,
                _ => false,
            },
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn containers_merge_by_name_in_the_overlays_order() {
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
                {"name": "istio-proxy", "image": "p"},
                {"name": "app", "image": "a", "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "3"}], "args": ["b"]}
            ]}})
        );
    }

    #[test]
    fn merged_lists_follow_the_overlays_order_with_target_only_elements_in_place() {
        // A re-injection: the template's env order wins, what only the pod had stays where it was.
        let env = |names: &[&str]| Json::Array(names.iter().map(|n| json!({"name": n})).collect());
        let mut c = json!({"env": env(&["A", "B", "P", "C"])});
        merge_value(&mut c, &json!({"env": env(&["A", "N", "B", "C", "M"])}), None, POD_MERGE_KEYS);
        assert_eq!(c["env"], env(&["A", "N", "B", "P", "C", "M"]));
        let mut c = json!({"env": env(&["A", "B"]), "finalizers": ["x", "y"]});
        merge_value(
            &mut c,
            &json!({"env": [{"name": "A", "$patch": "delete"}], "finalizers": ["z", "x"]}),
            None,
            POD_MERGE_KEYS,
        );
        assert_eq!(c["env"], env(&["B"]));
        assert_eq!(c["finalizers"], json!(["z", "x", "y"]));
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
            POD_MERGE_KEYS,
        );
        assert_eq!(
            c,
            json!({"ports": [{"containerPort": 80, "name": "a", "protocol": "TCP"}, {"containerPort": 90}], "tolerations": []})
        );
    }
}
