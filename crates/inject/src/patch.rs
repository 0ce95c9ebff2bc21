//! JSON Patch (RFC 6902) between two documents: what an admission webhook answers with (istiod's
//! `createPatch`, `gomodules.xyz/jsonpatch`'s `CreatePatch`). The operations differ from Go's in
//! places (lists that change length are replaced whole here), the patched document is the same.

use serde_json::{Value as Json, json};

/// RFC 6901 escaping of one reference token (`~` → `~0`, `/` → `~1`).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The operations that turn `original` into `modified`.
pub fn create_patch(original: &Json, modified: &Json) -> Vec<Json> {
    let mut ops = Vec::new();
    diff(original, modified, String::new(), &mut ops);
    ops
}

fn diff(a: &Json, b: &Json, path: String, ops: &mut Vec<Json>) {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            for (key, value) in x {
                if !y.contains_key(key) {
                    ops.push(json!({"op": "remove", "path": format!("{path}/{}", escape(key))}));
                } else {
                    diff(value, &y[key], format!("{path}/{}", escape(key)), ops);
                }
            }
            for (key, value) in y {
                if !x.contains_key(key) {
                    ops.push(json!({"op": "add", "path": format!("{path}/{}", escape(key)), "value": value}));
                }
            }
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(p, q, format!("{path}/{i}"), ops);
            }
        }
        (Json::Array(x), Json::Array(y)) if y.len() > x.len() && y[..x.len()] == x[..] => {
            for value in &y[x.len()..] {
                ops.push(json!({"op": "add", "path": format!("{path}/-"), "value": value}));
            }
        }
        _ if a == b => {}
        _ => ops.push(
            json!({"op": "replace", "path": if path.is_empty() { "".to_string() } else { path }, "value": b}),
        ),
    }
}

/// Applies `ops` (as made by [`create_patch`]: `add`, `remove`, `replace`) to `doc`.
///
/// # Errors
/// An operation whose path does not exist, or an unsupported operation.
pub fn apply_patch(doc: &mut Json, ops: &[Json]) -> Result<(), String> {
    for op in ops {
        let path = op["path"].as_str().ok_or("operation without path")?;
        let tokens: Vec<String> =
            path.split('/').skip(1).map(|t| t.replace("~1", "/").replace("~0", "~")).collect();
        let Some((last, parents)) = tokens.split_last() else {
            *doc = op["value"].clone();
            continue;
        };
        let mut target = &mut *doc;
        for token in parents {
            target = match target {
                Json::Object(m) => m.get_mut(token).ok_or_else(|| format!("{path}: no {token}"))?,
                Json::Array(a) => {
                    let i: usize = token.parse().map_err(|_| format!("{path}: bad index {token}"))?;
                    a.get_mut(i).ok_or_else(|| format!("{path}: no index {i}"))?
                }
                _ => return Err(format!("{path}: not a container")),
            };
        }
        match (op["op"].as_str(), target) {
            (Some("add" | "replace"), Json::Object(m)) => {
                m.insert(last.clone(), op["value"].clone());
            }
            (Some("remove"), Json::Object(m)) => {
                m.remove(last).ok_or_else(|| format!("{path}: nothing to remove"))?;
            }
            (Some("add"), Json::Array(a)) if last == "-" => a.push(op["value"].clone()),
            (Some(kind), Json::Array(a)) => {
                let i: usize = last.parse().map_err(|_| format!("{path}: bad index {last}"))?;
                match kind {
                    "add" if i <= a.len() => a.insert(i, op["value"].clone()),
                    "replace" if i < a.len() => a[i] = op["value"].clone(),
                    "remove" if i < a.len() => {
                        a.remove(i);
                    }
                    _ => return Err(format!("{path}: cannot {kind} at {i}")),
                }
            }
            (kind, _) => return Err(format!("{path}: cannot {kind:?} here")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_turns_the_original_into_the_modified_document() {
        let original = json!({"metadata": {"annotations": {"a/b": "1", "gone": "x"}},
                              "spec": {"containers": [{"name": "app"}], "volumes": [{"name": "v"}]}});
        let modified = json!({"metadata": {"annotations": {"a/b": "2", "sidecar.istio.io/status": "{}"}, "labels": {"x": "y"}},
                              "spec": {"containers": [{"name": "app", "env": []}, {"name": "istio-proxy"}],
                                       "initContainers": [{"name": "istio-init"}], "volumes": [{"name": "w"}]}});
        let ops = create_patch(&original, &modified);
        let mut patched = original.clone();
        apply_patch(&mut patched, &ops).unwrap();
        assert_eq!(patched, modified);
        assert!(ops.iter().any(|op| op["path"] == "/metadata/annotations/a~1b"), "{ops:?}");
        assert!(create_patch(&modified, &modified).is_empty());
    }

    #[test]
    fn appended_list_items_are_added_at_the_end() {
        let ops = create_patch(&json!({"l": [1]}), &json!({"l": [1, 2, 3]}));
        assert_eq!(
            ops,
            vec![
                json!({"op": "add", "path": "/l/-", "value": 2}),
                json!({"op": "add", "path": "/l/-", "value": 3})
            ]
        );
    }
}
