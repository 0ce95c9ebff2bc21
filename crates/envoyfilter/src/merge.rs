//! Istio's merge of protobuf messages (`pkg/proto/merge`, used by every EnvoyFilter `MERGE`), on
//! reflected messages.
//!
//! Like protobuf's `Merge`: every field set in the source is written to the destination; messages are
//! merged field by field, repeated fields appended, map entries replaced. Istio's differences, kept
//! here: a `google.protobuf.Duration` is replaced as a whole (merging `1.5s` with `2s` gives `2s`, not
//! `2.5s`), and `MERGE_AND_REPLACE_LIST` replaces repeated fields instead of appending to them. Setting
//! one member of a oneof clears the others.

use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use prost_reflect::{DynamicMessage, ReflectMessage, Value};

use crate::descriptors;

/// Merges `src` into `dst` with Istio's rules (module documentation); `replace_lists` is
/// `MERGE_AND_REPLACE_LIST`. Both must be of the same message type.
pub fn merge(dst: &mut DynamicMessage, src: &DynamicMessage, replace_lists: bool) {
    for (field, value) in src.fields() {
        if let Some(oneof) = field.containing_oneof() {
            for other in oneof.fields().filter(|f| *f != field) {
                dst.clear_field(&other);
            }
        }
        match value {
            Value::List(items) => {
                if let Value::List(list) = dst.get_field_mut(&field) {
                    if replace_lists {
                        list.clear();
                    }
                    list.extend(items.iter().cloned());
                }
            }
            Value::Map(entries) => {
                if let Value::Map(map) = dst.get_field_mut(&field) {
                    map.extend(entries.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
            Value::Message(m) if m.descriptor().full_name() != "google.protobuf.Duration" => {
                if let Value::Message(existing) = dst.get_field_mut(&field) {
                    merge(existing, m, replace_lists);
                }
            }
            other => dst.set_field(&field, other.clone()),
        }
    }
}

/// Merges the reflected `src` into the typed message `dst` (encoded, merged by reflection, decoded).
///
/// # Errors
/// `src` is not an `M`, or the merged bytes do not decode as `M` (they always should).
pub fn merge_typed<M>(dst: &mut M, src: &DynamicMessage, replace_lists: bool) -> Result<(), String>
where
    M: Message + prost::Name + Default,
{
    let full_name = M::full_name();
    if src.descriptor().full_name() != full_name {
        return Err(format!("a {} patch cannot merge into a {full_name}", src.descriptor().full_name()));
    }
    let descriptor =
        descriptors::message(&full_name).ok_or_else(|| format!("{full_name} is not in Envoy's API"))?;
    let mut reflected = DynamicMessage::decode(descriptor, dst.encode_to_vec().as_slice())
        .map_err(|e| format!("{full_name} does not decode: {e}"))?;
    merge(&mut reflected, src, replace_lists);
    *dst = M::decode(reflected.encode_to_vec().as_slice()).map_err(|e| format!("merged {full_name}: {e}"))?;
    Ok(())
}

/// Istio's `MergeAnyWithAny`: both `Any`s unpacked (each by its own type URL), `src` merged into
/// `dst`, packed again under `dst`'s type URL.
///
/// # Errors
/// A type URL Envoy's API does not define, bytes that do not decode, or two different types (Go's
/// merge panics there and istiod leaves the listener unpatched).
pub fn merge_any(dst: &Any, src: &Any) -> Result<Any, String> {
    let unpack = |any: &Any| {
        let descriptor = descriptors::message_for_type_url(&any.type_url)
            .ok_or_else(|| format!("unknown type {}", any.type_url))?;
        DynamicMessage::decode(descriptor, any.value.as_slice()).map_err(|e| format!("{}: {e}", any.type_url))
    };
    let mut target = unpack(dst)?;
    let patch = unpack(src)?;
    if target.descriptor() != patch.descriptor() {
        return Err(format!(
            "typed_config of type {} cannot merge into one of type {}",
            patch.descriptor().full_name(),
            target.descriptor().full_name()
        ));
    }
    merge(&mut target, &patch, false);
    Ok(Any { type_url: dst.type_url.clone(), value: target.encode_to_vec() })
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use serde_json::json;

    use super::*;
    use crate::compile::read_value;

    fn cluster(value: serde_json::Value) -> Cluster {
        let m = read_value("envoy.config.cluster.v3.Cluster", &value, true).unwrap();
        Cluster::decode(m.encode_to_vec().as_slice()).unwrap()
    }

    fn patch(value: serde_json::Value) -> DynamicMessage {
        read_value("envoy.config.cluster.v3.Cluster", &value, true).unwrap()
    }

    #[test]
    fn a_duration_is_replaced_whole_and_scalars_overwrite() {
        let mut c =
            cluster(json!({"name": "c", "connect_timeout": "1.5s", "per_connection_buffer_limit_bytes": 10}));
        merge_typed(&mut c, &patch(json!({"connectTimeout": "2s"})), false).unwrap();
        let t = c.connect_timeout.unwrap();
        assert_eq!((t.seconds, t.nanos), (2, 0), "protobuf's field merge would give 2.5s");
        assert_eq!(c.name, "c");
        assert_eq!(c.per_connection_buffer_limit_bytes.map(|v| v.value), Some(10));
    }

    #[test]
    fn lists_append_or_replace_and_oneof_members_clear_each_other() {
        let base = json!({"name": "c", "dns_resolvers": [{"socket_address": {"address": "1.1.1.1", "port_value": 53}}],
                          "type": "STATIC"});
        let extra = json!({"dns_resolvers": [{"socket_address": {"address": "8.8.8.8", "port_value": 53}}]});
        let mut appended = cluster(base.clone());
        merge_typed(&mut appended, &patch(extra.clone()), false).unwrap();
        #[allow(deprecated)]
        let n = appended.dns_resolvers.len();
        assert_eq!(n, 2);
        let mut replaced = cluster(base);
        merge_typed(&mut replaced, &patch(extra), true).unwrap();
        #[allow(deprecated)]
        let n = replaced.dns_resolvers.len();
        assert_eq!(n, 1);
        // `type` and `cluster_type` are a oneof: setting one clears the other.
        let mut c = cluster(json!({"name": "c", "type": "STRICT_DNS"}));
        merge_typed(
            &mut c,
            &patch(json!({"cluster_type": {"name": "envoy.clusters.aggregate",
                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig", "clusters": ["a"]}}})),
            false,
        )
        .unwrap();
        use envoy_types::pb::envoy::config::cluster::v3::cluster::ClusterDiscoveryType;
        assert!(c.cluster_discovery_type.is_some_and(|t| matches!(t, ClusterDiscoveryType::ClusterType(_))));
    }

    #[test]
    fn any_values_merge_by_their_own_type_and_refuse_another() {
        let lua = |code: &str| {
            let m = read_value(
                "google.protobuf.Any",
                &json!({"@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua", "inline_code": code}),
                true,
            )
            .unwrap();
            Any::decode(m.encode_to_vec().as_slice()).unwrap()
        };
        let merged = merge_any(&lua("a"), &lua("b")).unwrap();
        let decoded =
            envoy_types::pb::envoy::extensions::filters::http::lua::v3::Lua::decode(merged.value.as_slice());
        #[allow(deprecated)]
        let code = decoded.unwrap().inline_code;
        assert_eq!(code, "b");
        let other =
            Any { type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(), value: vec![] };
        assert!(merge_any(&lua("a"), &other).unwrap_err().contains("cannot merge"));
        let unknown = Any { type_url: "type.googleapis.com/no.such.Type".into(), value: vec![] };
        assert!(merge_any(&lua("a"), &unknown).is_err());
    }
}
