//! Normalisation (what legitimately differs between istiod and meshpilot, each rule with its reason in
//! docs/CONFORMANCE.md) and the field-level JSON diff.

use serde_json::{Map, Value};

/// HTTP, network and listener filters (by name) that only istio-proxy (Istio's Envoy build) has, or that
/// only feed Istio's telemetry: istiod emits them, meshpilot targets upstream Envoy and does not.
pub const ISTIO_PROXY_ONLY_FILTERS: &[&str] = &[
    "istio.metadata_exchange",
    "istio.alpn",
    "istio.stats",
    "istio.peer_metadata",
    "istio_authn",
    "envoy.filters.http.grpc_stats",
    "envoy.filters.network.metadata_exchange",
    "envoy.filters.http.peer_metadata",
];

/// Type URL prefixes of istio-proxy-only extensions (`io.istio.*`, `istio.*` protos).
const ISTIO_PROXY_ONLY_TYPES: &[&str] = &["type.googleapis.com/io.istio.", "type.googleapis.com/istio."];

/// Whether `v` (an element of a filter list) is an istio-proxy-only filter.
fn istio_proxy_only(v: &Value) -> bool {
    let Some(m) = v.as_object() else { return false };
    if m.get("name").and_then(Value::as_str).is_some_and(|n| ISTIO_PROXY_ONLY_FILTERS.contains(&n)) {
        return true;
    }
    let typed = m.get("config_type").and_then(|c| c.get("TypedConfig")).or_else(|| m.get("typed_config"));
    let url = typed.and_then(|t| t.get("@type")).and_then(Value::as_str).unwrap_or("");
    let inner = typed.and_then(|t| t.get("type_url")).and_then(Value::as_str).unwrap_or("");
    ISTIO_PROXY_ONLY_TYPES.iter().any(|p| {
        url.starts_with(p) || inner.starts_with(&p["type.googleapis.com/".len()..]) || inner.starts_with(p)
    })
}

/// Fields that only carry telemetry (stats names, access logs, tracing), not routing or security: left
/// out of the field-level comparison.
const TELEMETRY_FIELDS: &[&str] = &["access_log", "tracing", "stat_prefix", "alt_stat_name", "stats_matcher"];

/// Normalises one resource's JSON in place.
pub fn normalise(v: &mut Value) {
    match v {
        Value::Array(a) => {
            a.retain(|e| !istio_proxy_only(e));
            a.iter_mut().for_each(normalise);
        }
        Value::Object(m) => {
            for f in TELEMETRY_FIELDS {
                m.remove(*f);
            }
            if let Some(Value::Object(per_filter)) = m.get_mut("typed_per_filter_config") {
                per_filter.retain(|k, _| !ISTIO_PROXY_ONLY_FILTERS.contains(&k.as_str()));
            }
            // `filter_metadata.istio` (config names, services, workload ids) feeds istio-proxy's telemetry.
            if let Some(Value::Object(md)) = m.get_mut("metadata")
                && let Some(Value::Object(fm)) = md.get_mut("filter_metadata")
            {
                fm.remove("istio");
            }
            m.values_mut().for_each(normalise);
            // A list or map emptied by the removals above is as absent (proto3).
            m.retain(|k, v| match v {
                Value::Array(a) => !a.is_empty(),
                Value::Object(o) => {
                    !(o.is_empty() && (k == "filter_metadata" || k == "typed_per_filter_config"))
                }
                _ => true,
            });
            if m.get("metadata")
                .and_then(Value::as_object)
                .is_some_and(|md| md.iter().all(|(_, v)| v.as_object().is_some_and(|o| o.is_empty())))
            {
                m.remove("metadata");
            }
        }
        _ => {}
    }
}

/// One field-level difference: a path and both sides' values (`null` where absent).
#[derive(Debug, Clone, serde::Serialize)]
pub struct FieldDiff {
    /// JSON path (`.listeners[name=x].filters[0]`).
    pub path: String,
    /// istiod's value.
    pub istiod: Value,
    /// meshpilot's value.
    pub meshpilot: Value,
}

/// The field-level differences between `a` (istiod) and `b` (meshpilot); arrays of objects that all have
/// a unique `name` are matched by name, other arrays by position.
pub fn diff(a: &Value, b: &Value) -> Vec<FieldDiff> {
    let mut out = Vec::new();
    walk(a, b, String::new(), &mut out);
    out
}

fn named(a: &[Value]) -> Option<Map<String, Value>> {
    let mut m = Map::new();
    for e in a {
        let n = e.get("name")?.as_str()?;
        if m.insert(n.to_string(), e.clone()).is_some() {
            return None;
        }
    }
    Some(m)
}

fn walk(a: &Value, b: &Value, path: String, out: &mut Vec<FieldDiff>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null));
                walk(va, vb, format!("{path}.{k}"), out);
            }
        }
        (Value::Array(x), Value::Array(y)) => match (named(x), named(y)) {
            (Some(nx), Some(ny)) if !x.is_empty() && !y.is_empty() => {
                let keys: std::collections::BTreeSet<&String> = nx.keys().chain(ny.keys()).collect();
                for k in keys {
                    let (va, vb) = (nx.get(k).unwrap_or(&Value::Null), ny.get(k).unwrap_or(&Value::Null));
                    walk(va, vb, format!("{path}[name={k}]"), out);
                }
                let order = |m: &Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
                let common: Vec<String> = order(&nx).into_iter().filter(|k| ny.contains_key(k)).collect();
                let common_b: Vec<String> = order(&ny).into_iter().filter(|k| nx.contains_key(k)).collect();
                if common != common_b {
                    out.push(FieldDiff {
                        path: format!("{path}[order]"),
                        istiod: Value::from(common),
                        meshpilot: Value::from(common_b),
                    });
                }
            }
            _ => {
                for i in 0..x.len().max(y.len()) {
                    walk(
                        x.get(i).unwrap_or(&Value::Null),
                        y.get(i).unwrap_or(&Value::Null),
                        format!("{path}[{i}]"),
                        out,
                    );
                }
            }
        },
        _ => out.push(FieldDiff { path, istiod: a.clone(), meshpilot: b.clone() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn named_arrays_match_by_name_and_istio_only_filters_go() {
        let mut a = json!({"http_filters": [{"name": "istio.metadata_exchange"}, {"name": "a", "x": 1}, {"name": "b"}],
                           "stat_prefix": "s", "filters": [{"name": "istio.metadata_exchange"}],
                           "metadata": {"filter_metadata": {"istio": {"services": []}}}});
        normalise(&mut a);
        assert_eq!(a, json!({"http_filters": [{"name": "a", "x": 1}, {"name": "b"}]}));
        let b = json!({"http_filters": [{"name": "b"}, {"name": "a", "x": 2}]});
        let d = diff(&a, &b);
        let paths: Vec<&str> = d.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, [".http_filters[name=a].x", ".http_filters[order]"]);
    }
}
