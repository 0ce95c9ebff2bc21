//! Conversions between envoy-types' own `google.protobuf.Struct`/`Value` and `serde_json::Value`.
//!
//! envoy-types generates its own well-known types (`envoy_types::pb::google::protobuf::*`), which are
//! neither `prost_types` nor `pbjson_types`, so these small functions live here (RUST-STACK.md
//! pitfall 2). The mapping is protojson's: numbers are doubles (integral ones become JSON integers),
//! `NullValue` is `null`, an absent kind is `null`.

use envoy_types::pb::google::protobuf::{ListValue, Struct, Value, value::Kind};
use serde_json::{Map, Number, Value as Json};

/// Largest integer a double holds exactly (2^53); integral doubles within it become JSON integers.
const MAX_EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// Converts a protobuf `Struct` (e.g. `node.metadata`) into a JSON object.
pub fn struct_to_json(s: &Struct) -> Map<String, Json> {
    let mut keys: Vec<&String> = s.fields.keys().collect();
    keys.sort();
    keys.into_iter().map(|k| (k.clone(), value_to_json(&s.fields[k]))).collect()
}

/// Converts a protobuf `Value` into JSON.
pub fn value_to_json(v: &Value) -> Json {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Json::Null,
        Some(Kind::NumberValue(n)) => number_to_json(*n),
        Some(Kind::StringValue(s)) => Json::String(s.clone()),
        Some(Kind::BoolValue(b)) => Json::Bool(*b),
        Some(Kind::StructValue(s)) => Json::Object(struct_to_json(s)),
        Some(Kind::ListValue(l)) => Json::Array(l.values.iter().map(value_to_json).collect()),
    }
}

fn number_to_json(n: f64) -> Json {
    if n.is_finite() && n.fract() == 0.0 && n.abs() <= MAX_EXACT_INT {
        // Exact: |n| <= 2^53 and integral.
        #[allow(clippy::cast_possible_truncation)]
        return Json::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map_or(Json::Null, Json::Number)
}

/// Converts a JSON object into a protobuf `Struct` (used to build node metadata in tests and
/// bootstraps).
pub fn json_to_struct(map: &Map<String, Json>) -> Struct {
    Struct { fields: map.iter().map(|(k, v)| (k.clone(), json_to_value(v))).collect() }
}

/// Converts JSON into a protobuf `Value`.
pub fn json_to_value(v: &Json) -> Value {
    let kind = match v {
        Json::Null => Kind::NullValue(0),
        Json::Bool(b) => Kind::BoolValue(*b),
        Json::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Json::String(s) => Kind::StringValue(s.clone()),
        Json::Array(a) => Kind::ListValue(ListValue { values: a.iter().map(json_to_value).collect() }),
        Json::Object(o) => Kind::StructValue(json_to_struct(o)),
    };
    Value { kind: Some(kind) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_nested_values() {
        let j =
            json!({"a": "x", "n": 15020, "f": 1.5, "b": true, "z": null, "l": [1, "two"], "o": {"k": "v"}});
        let s = json_to_struct(j.as_object().unwrap());
        assert_eq!(Json::Object(struct_to_json(&s)), j);
    }

    #[test]
    fn absent_kind_is_null_and_nan_is_null() {
        assert_eq!(value_to_json(&Value { kind: None }), Json::Null);
        assert_eq!(value_to_json(&Value { kind: Some(Kind::NumberValue(f64::NAN)) }), Json::Null);
    }
}
