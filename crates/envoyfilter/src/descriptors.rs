//! Envoy's API as protobuf descriptors, for reading and merging patch values of any Envoy message type
//! by reflection (what Go's `protoreflect` gives istiod).
//!
//! The descriptor set is the one the `envoy-types` crate is generated from (its
//! `src/generated/types.bin`, copied into this crate's build by `build.rs`), so every message the
//! typed `envoy_types::pb` structs know is here with the same field numbers, plus the well-known types,
//! `xds.*` / `udpa.*` and the validation annotations. It is decoded once, on first use (an EnvoyFilter
//! in the config), in a few tens of milliseconds.

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, MessageDescriptor};
use prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto,
    field_descriptor_proto::{Label, Type},
};

static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/envoy_descriptors.bin"));

/// The pool of Envoy's descriptors, decoded on first use.
///
/// # Panics
/// Never in practice: the embedded set is checked by this crate's tests.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut pool = DescriptorPool::decode(DESCRIPTORS).expect("the envoy-types descriptor set decodes");
        add_typed_structs(&mut pool);
        pool
    })
}

/// Adds `udpa.type.v1.TypedStruct` and `xds.type.v3.TypedStruct` (`type_url` = 1, `value` = 2, a
/// `google.protobuf.Struct`): Envoy reads them in any `typed_config` (a filter's config as JSON under
/// another type URL, common in older EnvoyFilters), but the envoy-types set does not carry them.
fn add_typed_structs(pool: &mut DescriptorPool) {
    let Some(structs) = pool.get_message_by_name("google.protobuf.Struct") else { return };
    let struct_file = structs.parent_file().name().to_string();
    for (package, path) in [
        ("udpa.type.v1", "udpa/type/v1/typed_struct.proto"),
        ("xds.type.v3", "xds/type/v3/typed_struct.proto"),
    ] {
        if pool.get_message_by_name(&format!("{package}.TypedStruct")).is_some() {
            continue;
        }
        let field =
            |name: &str, json: &str, number, kind: Type, type_name: Option<&str>| FieldDescriptorProto {
                name: Some(name.into()),
                json_name: Some(json.into()),
                number: Some(number),
                label: Some(Label::Optional as i32),
                r#type: Some(kind as i32),
                type_name: type_name.map(str::to_string),
                ..Default::default()
            };
        let file = FileDescriptorProto {
            name: Some(path.into()),
            package: Some(package.into()),
            dependency: vec![struct_file.clone()],
            syntax: Some("proto3".into()),
            message_type: vec![DescriptorProto {
                name: Some("TypedStruct".into()),
                field: vec![
                    field("type_url", "typeUrl", 1, Type::String, None),
                    field("value", "value", 2, Type::Message, Some(".google.protobuf.Struct")),
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        // Cannot fail for these two well-formed files; a failure only leaves the type out.
        let _ = pool.add_file_descriptor_proto(file);
    }
}

/// The descriptor of the message `full_name` (`envoy.config.listener.v3.Listener`), if Envoy's API has it.
pub fn message(full_name: &str) -> Option<MessageDescriptor> {
    pool().get_message_by_name(full_name)
}

/// The descriptor of the message a type URL names (`type.googleapis.com/envoy.…`: the part after the
/// last `/`, as protobuf's `Any` resolution does).
pub fn message_for_type_url(type_url: &str) -> Option<MessageDescriptor> {
    message(type_url.rsplit('/').next().unwrap_or(type_url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_holds_what_envoy_filters_patch() {
        for name in [
            "envoy.config.listener.v3.Listener",
            "envoy.config.cluster.v3.Cluster",
            "envoy.config.route.v3.RouteConfiguration",
            "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "envoy.extensions.filters.http.lua.v3.Lua",
            "envoy.config.core.v3.TypedExtensionConfig",
            "envoy.config.bootstrap.v3.Bootstrap",
            "google.protobuf.Duration",
            "xds.type.v3.TypedStruct",
            "udpa.type.v1.TypedStruct",
        ] {
            assert!(message(name).is_some(), "{name} missing from the descriptor set");
        }
        assert_eq!(
            message_for_type_url("type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua")
                .map(|m| m.full_name().to_string()),
            Some("envoy.extensions.filters.http.lua.v3.Lua".to_string())
        );
    }
}
