//! A subset of `istio.mesh.v1alpha1.MeshConfig`: the fields meshpilot reads from a mesh config
//! (`config::mesh::parse_mesh_config`), with the Istio API's field numbers and JSON names.
//!
//! What it is for: MCP-over-xDS carries the mesh config as a raw `MeshConfig` in an `Any` (type URL
//! `type.googleapis.com/istio.mesh.v1alpha1.MeshConfig`, the response type URL
//! `core/v1alpha1/MeshConfig`). The client decodes it with [`MeshConfig::decode_any_value`] and
//! turns it into the mesh config's JSON shape with [`MeshConfig::to_json`] (then read exactly as a
//! `--mesh-config` file); the server goes the other way with [`MeshConfig::from_json`] and
//! [`prost::Message::encode_to_vec`].
//!
//! Fields outside the subset are skipped when decoding (protobuf's rule for unknown fields) and
//! ignored by [`MeshConfig::from_json`]: a peer's MeshConfig with tracing or access-log settings
//! decodes fine, those settings are simply not carried. Of `extensionProviders`, only the
//! ext_authz providers (the ones meshpilot uses) are carried; a provider of another type keeps its
//! name only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::networking::destination_rule::ClientTlsSettings;
use crate::wkt::{Duration, is_default};

/// Protobuf full name of the message (the `Any` type URL is `type.googleapis.com/` + this).
pub const MESH_CONFIG_PROTO_NAME: &str = "istio.mesh.v1alpha1.MeshConfig";

/// Type URL of a `MeshConfig` inside an `Any`.
pub const MESH_CONFIG_ANY_TYPE_URL: &str = "type.googleapis.com/istio.mesh.v1alpha1.MeshConfig";

/// The subset of Istio's `MeshConfig` that meshpilot reads (field numbers of `istio.io/api`
/// `mesh/v1alpha1/config.proto`). JSON: Istio's lowerCamelCase names; defaults are omitted.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MeshConfig {
    /// Connect timeout of Envoy clusters (field 6).
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub connect_timeout: Option<Duration>,
    /// What sidecars do with traffic to unknown destinations (field 17).
    #[prost(message, optional, tag = "17")]
    #[serde(skip_serializing_if = "is_default")]
    pub outbound_traffic_policy: Option<mesh_config::OutboundTrafficPolicy>,
    /// Where the control plane reads config from (field 22).
    #[prost(message, repeated, tag = "22")]
    #[serde(skip_serializing_if = "is_default")]
    pub config_sources: Vec<ConfigSource>,
    /// Trust domain of the mesh's identities (field 26).
    #[prost(string, tag = "26")]
    #[serde(skip_serializing_if = "is_default")]
    pub trust_domain: String,
    /// Default `exportTo` of services (field 31).
    #[prost(string, repeated, tag = "31")]
    #[serde(skip_serializing_if = "is_default")]
    pub default_service_export_to: Vec<String>,
    /// Default `exportTo` of VirtualServices (field 32).
    #[prost(string, repeated, tag = "32")]
    #[serde(skip_serializing_if = "is_default")]
    pub default_virtual_service_export_to: Vec<String>,
    /// Default `exportTo` of DestinationRules (field 33).
    #[prost(string, repeated, tag = "33")]
    #[serde(skip_serializing_if = "is_default")]
    pub default_destination_rule_export_to: Vec<String>,
    /// The mesh's root namespace (field 34).
    #[prost(string, tag = "34")]
    #[serde(skip_serializing_if = "is_default")]
    pub root_namespace: String,
    /// Automatic mutual TLS (field 43, a `BoolValue`; unset means true).
    #[prost(message, optional, tag = "43")]
    #[serde(skip_serializing_if = "is_default")]
    pub enable_auto_mtls: Option<bool>,
    /// Other trust domains treated as this one (field 46).
    #[prost(string, repeated, tag = "46")]
    #[serde(skip_serializing_if = "is_default")]
    pub trust_domain_aliases: Vec<String>,
    /// Extension providers (field 57); only the ext_authz ones are carried in full.
    #[prost(message, repeated, tag = "57")]
    #[serde(skip_serializing_if = "is_default")]
    pub extension_providers: Vec<mesh_config::ExtensionProvider>,
    /// Namespaces whose Kubernetes objects are read (field 59, Kubernetes `LabelSelector`s).
    #[prost(message, repeated, tag = "59")]
    #[serde(skip_serializing_if = "is_default")]
    pub discovery_selectors: Vec<LabelSelector>,
}

/// A config source of the mesh (`istio.mesh.v1alpha1.ConfigSource`).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConfigSource {
    /// `xds://HOST:PORT`, `fs:///PATH` or `k8s://` (field 1).
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub address: String,
    /// TLS towards an `xds://` server (field 2).
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub tls_settings: Option<ClientTlsSettings>,
    /// What to receive (field 3; the only value is `SERVICE_REGISTRY`).
    #[prost(enumeration = "Resource", repeated, tag = "3")]
    #[serde(with = "crate::wkt::EnumList::<Resource>", skip_serializing_if = "is_default")]
    pub subscribed_resources: Vec<i32>,
}

crate::proto_enum! {
    /// What a config source provides (`istio.mesh.v1alpha1.Resource`).
    pub enum Resource {
        /// Service entries generated by the platform.
        ServiceRegistry = 0 => "SERVICE_REGISTRY",
    }
}

/// A Kubernetes label selector (`k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector`).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelector {
    /// Labels that must all match (field 1).
    #[prost(btree_map = "string, string", tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements that must all hold (field 2).
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One requirement of a [`LabelSelector`].
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelectorRequirement {
    /// Label key (field 1).
    #[prost(string, tag = "1")]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist` (field 2).
    #[prost(string, tag = "2")]
    pub operator: String,
    /// Values for `In` / `NotIn` (field 3).
    #[prost(string, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub values: Vec<String>,
}

/// Nested messages of [`MeshConfig`], in the snake_case module of their parent as prost-build lays
/// them out (hence the module's name repeats this one's).
#[allow(clippy::module_inception)]
pub mod mesh_config {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    use crate::wkt::{Duration, is_default};

    /// `MeshConfig.OutboundTrafficPolicy`.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct OutboundTrafficPolicy {
        /// The mode (field 1). Note the proto default is `REGISTRY_ONLY` (0).
        #[prost(enumeration = "outbound_traffic_policy::Mode", tag = "1")]
        #[serde(with = "outbound_traffic_policy::Mode")]
        pub mode: i32,
    }

    /// Nested types of [`OutboundTrafficPolicy`].
    pub mod outbound_traffic_policy {
        crate::proto_enum! {
            /// `MeshConfig.OutboundTrafficPolicy.Mode`.
            pub enum Mode {
                /// Only services of the registry.
                RegistryOnly = 0 => "REGISTRY_ONLY",
                /// Unknown destinations are passed through.
                AllowAny = 1 => "ALLOW_ANY",
            }
        }
    }

    /// `MeshConfig.ExtensionProvider` (ext_authz members only).
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct ExtensionProvider {
        /// Provider name (field 1).
        #[prost(string, tag = "1")]
        pub name: String,
        /// ext_authz over HTTP (field 2).
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub envoy_ext_authz_http: Option<ExtAuthzHttp>,
        /// ext_authz over gRPC (field 3).
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub envoy_ext_authz_grpc: Option<ExtAuthzGrpc>,
    }

    /// `EnvoyExternalAuthorizationRequestBody`.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct RequestBody {
        /// Field 1.
        #[prost(uint32, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub max_request_bytes: u32,
        /// Field 2.
        #[prost(bool, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub allow_partial_message: bool,
        /// Field 3.
        #[prost(bool, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub pack_as_bytes: bool,
    }

    /// `EnvoyExternalAuthorizationHttpProvider`.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct ExtAuthzHttp {
        /// Field 1.
        #[prost(string, tag = "1")]
        pub service: String,
        /// Field 2.
        #[prost(uint32, tag = "2")]
        pub port: u32,
        /// Field 9.
        #[prost(message, optional, tag = "9")]
        #[serde(skip_serializing_if = "is_default")]
        pub timeout: Option<Duration>,
        /// Field 3.
        #[prost(string, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub path_prefix: String,
        /// Field 4.
        #[prost(bool, tag = "4")]
        #[serde(skip_serializing_if = "is_default")]
        pub fail_open: bool,
        /// Field 5.
        #[prost(string, tag = "5")]
        #[serde(skip_serializing_if = "is_default")]
        pub status_on_error: String,
        /// Field 6 (deprecated upstream).
        #[prost(string, repeated, tag = "6")]
        #[serde(skip_serializing_if = "is_default")]
        pub include_headers_in_check: Vec<String>,
        /// Field 10.
        #[prost(string, repeated, tag = "10")]
        #[serde(skip_serializing_if = "is_default")]
        pub include_request_headers_in_check: Vec<String>,
        /// Field 11.
        #[prost(btree_map = "string, string", tag = "11")]
        #[serde(skip_serializing_if = "is_default")]
        pub include_additional_headers_in_check: BTreeMap<String, String>,
        /// Field 12.
        #[prost(message, optional, tag = "12")]
        #[serde(skip_serializing_if = "is_default")]
        pub include_request_body_in_check: Option<RequestBody>,
        /// Field 7.
        #[prost(string, repeated, tag = "7")]
        #[serde(skip_serializing_if = "is_default")]
        pub headers_to_upstream_on_allow: Vec<String>,
        /// Field 8.
        #[prost(string, repeated, tag = "8")]
        #[serde(skip_serializing_if = "is_default")]
        pub headers_to_downstream_on_deny: Vec<String>,
        /// Field 13.
        #[prost(string, repeated, tag = "13")]
        #[serde(skip_serializing_if = "is_default")]
        pub headers_to_downstream_on_allow: Vec<String>,
    }

    /// `EnvoyExternalAuthorizationGrpcProvider`.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct ExtAuthzGrpc {
        /// Field 1.
        #[prost(string, tag = "1")]
        pub service: String,
        /// Field 2.
        #[prost(uint32, tag = "2")]
        pub port: u32,
        /// Field 5.
        #[prost(message, optional, tag = "5")]
        #[serde(skip_serializing_if = "is_default")]
        pub timeout: Option<Duration>,
        /// Field 3.
        #[prost(bool, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub fail_open: bool,
        /// Field 4.
        #[prost(string, tag = "4")]
        #[serde(skip_serializing_if = "is_default")]
        pub status_on_error: String,
        /// Field 6.
        #[prost(message, optional, tag = "6")]
        #[serde(skip_serializing_if = "is_default")]
        pub include_request_body_in_check: Option<RequestBody>,
    }
}

impl MeshConfig {
    /// Decodes the `value` bytes of an `Any` holding a `MeshConfig`.
    ///
    /// # Errors
    /// The bytes are not a protobuf `MeshConfig` (the message says where decoding failed).
    pub fn decode_any_value(bytes: &[u8]) -> Result<MeshConfig, String> {
        <MeshConfig as prost::Message>::decode(bytes)
            .map_err(|e| format!("invalid {MESH_CONFIG_PROTO_NAME}: {e}"))
    }

    /// The mesh config as JSON in the shape of a mesh config file (Istio's field names, defaults
    /// omitted), ready for `config::mesh::parse_mesh_config`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Reads the subset's fields from mesh config JSON; other fields are ignored.
    ///
    /// # Errors
    /// A field of the subset has the wrong shape (the message names it).
    pub fn from_json(value: &serde_json::Value) -> Result<MeshConfig, String> {
        serde_json::from_value(value.clone()).map_err(|e| format!("mesh config: {e}"))
    }
}

impl prost::Name for MeshConfig {
    const NAME: &'static str = "MeshConfig";
    const PACKAGE: &'static str = "istio.mesh.v1alpha1";

    fn full_name() -> String {
        MESH_CONFIG_PROTO_NAME.to_string()
    }

    fn type_url() -> String {
        MESH_CONFIG_ANY_TYPE_URL.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn json_and_protobuf_round_trip() {
        let json = serde_json::json!({
            "rootNamespace": "mesh-root",
            "trustDomain": "td.example",
            "trustDomainAliases": ["old.example"],
            "connectTimeout": "2s",
            "enableAutoMtls": false,
            "outboundTrafficPolicy": {"mode": "REGISTRY_ONLY"},
            "defaultServiceExportTo": ["."],
            "configSources": [{"address": "xds://127.0.0.1:15010",
                               "tlsSettings": {"mode": "SIMPLE", "caCertificates": "/ca.pem"}}],
            "discoverySelectors": [{"matchLabels": {"a": "b"},
                                    "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}],
            "extensionProviders": [{"name": "authz", "envoyExtAuthzGrpc": {"service": "authz.ns.svc.cluster.local", "port": 9000}}],
            "enableTracing": true,
        });
        let mesh = MeshConfig::from_json(&json).unwrap();
        assert_eq!(mesh.root_namespace, "mesh-root");
        assert_eq!(mesh.enable_auto_mtls, Some(false));
        assert_eq!(mesh.connect_timeout, Some(Duration { seconds: 2, nanos: 0 }));
        let bytes = mesh.encode_to_vec();
        let back = MeshConfig::decode_any_value(&bytes).unwrap();
        assert_eq!(back, mesh);
        let mut want = json.clone();
        want.as_object_mut().unwrap().remove("enableTracing");
        want["connectTimeout"] = "2s".into();
        assert_eq!(back.to_json(), want);
    }

    #[test]
    fn field_numbers_are_istios() {
        // root_namespace = 34 (tag 34, wire type 2: key 0x112), enable_auto_mtls = 43 (BoolValue).
        let mesh = MeshConfig { root_namespace: "r".into(), ..MeshConfig::default() };
        assert_eq!(mesh.encode_to_vec(), vec![0x92, 0x02, 1, b'r']);
        let mesh = MeshConfig { enable_auto_mtls: Some(true), ..MeshConfig::default() };
        assert_eq!(mesh.encode_to_vec(), vec![0xda, 0x02, 2, 0x08, 1]);
        assert!(MeshConfig::decode_any_value(&[0x92, 0x02, 9]).unwrap_err().contains(MESH_CONFIG_PROTO_NAME));
    }
}
