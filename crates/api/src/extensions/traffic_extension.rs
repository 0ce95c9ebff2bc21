//! `TrafficExtension` (`extensions.istio.io`): a Wasm or Lua filter added to proxies.
//!
//! Follows `extensions/v1alpha1/traffic_extension.proto` of the Istio API
//! (`istio.extensions.v1alpha1.TrafficExtension`). The enums and VM settings it shares with
//! `WasmPlugin` come from [`super::wasm_plugin`].

use serde::{Deserialize, Serialize};

use super::wasm_plugin::{FailStrategy, PluginType, PullPolicy, VmConfig};
use crate::{
    type_v1beta1::{PolicyTargetReference, PortSelector, WorkloadMode, WorkloadSelector},
    wkt::{Struct, is_default},
};

/// A filter (Wasm module or inline Lua script) inserted into the filter chain of the selected
/// workloads. Exactly one of `wasm` and `lua` must be set.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TrafficExtension {
    /// Workloads (in the resource's namespace, or all namespaces from the root namespace) that get
    /// the filter. Unset with no `targetRefs`: every workload of the namespace. At most one of
    /// `selector` and `targetRefs` may be set.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub selector: Option<WorkloadSelector>,
    /// Resources (Gateway, GatewayClass, Service, ServiceEntry) the filter attaches to; up to 16.
    /// Waypoints only honour resources that use this field.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_refs: Vec<PolicyTargetReference>,
    /// Where in the filter chain the filter goes. Default: chosen by the control plane (near the end).
    #[prost(enumeration = "traffic_extension::ExecutionPhase", tag = "3")]
    #[serde(with = "traffic_extension::ExecutionPhase", skip_serializing_if = "is_default")]
    pub phase: i32,
    /// Order among filters of the same phase: higher first. Default 0; ties are ordered by
    /// creation time, then name and namespace.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub priority: Option<i32>,
    /// Traffic the filter sees: traffic matching any selector. Empty: all traffic.
    #[prost(message, repeated, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#match: Vec<TrafficSelector>,
    /// A WebAssembly filter.
    ///
    /// One of `filter_config`: at most one of `wasm`, `lua` may be set (exactly one is required).
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub wasm: Option<WasmConfig>,
    /// A Lua filter.
    ///
    /// One of `filter_config`: at most one of `wasm`, `lua` may be set (exactly one is required).
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub lua: Option<LuaConfig>,
}

/// Nested types of [`TrafficExtension`].
#[allow(clippy::module_inception)] // prost-build layout: the message's nested types live in its snake_case module
pub mod traffic_extension {
    crate::proto_enum! {
        /// Where in the filter chain a `TrafficExtension` is inserted.
        pub enum ExecutionPhase {
            /// Chosen by the control plane, usually at the end of the chain just before the router.
            Unspecified = 0 => "UNSPECIFIED",
            /// Before Istio's authentication filters.
            Authn = 1 => "AUTHN",
            /// After authentication, before Istio's authorization filters.
            Authz = 2 => "AUTHZ",
            /// After authorization, before Istio's stats filters.
            Stats = 3 => "STATS",
        }
    }
}

/// A WebAssembly filter: where to fetch the module and how to run it.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WasmConfig {
    /// Where the module is: `oci://` (the default scheme), `file://` or `http(s)://`. Required.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub url: String,
    /// Expected SHA-256 of the module or image (64 lowercase hex digits); must agree with a
    /// `@sha256:` digest in `url`.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub sha256: String,
    /// When to pull the module again. Default: `IfNotPresent`, or `Always` for an OCI `latest` tag.
    #[prost(enumeration = "PullPolicy", tag = "3")]
    #[serde(with = "PullPolicy", skip_serializing_if = "is_default")]
    pub image_pull_policy: i32,
    /// Name of a Docker pull secret, in the resource's namespace, for the OCI registry.
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub image_pull_secret: String,
    /// Public key to verify signed modules (reserved; not implemented by Istio).
    #[prost(string, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub verification_key: String,
    /// Configuration handed to the plugin, any JSON object.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub plugin_config: Option<Struct>,
    /// The plugin's name in the Envoy configuration (formerly `rootID`); some modules need it to
    /// pick a plugin.
    #[prost(string, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub plugin_name: String,
    /// What happens when the module cannot be fetched or fails fatally. Default `FAIL_CLOSE`.
    #[prost(enumeration = "FailStrategy", tag = "8")]
    #[serde(with = "FailStrategy", skip_serializing_if = "is_default")]
    pub fail_strategy: i32,
    /// Settings of the Wasm VM that runs the module.
    #[prost(message, optional, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub vm_config: Option<VmConfig>,
    /// HTTP (layer 7) or network (layer 4) extension. Default HTTP.
    #[prost(enumeration = "PluginType", tag = "10")]
    #[serde(with = "PluginType", skip_serializing_if = "is_default")]
    pub r#type: i32,
}

/// A Lua filter given inline.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LuaConfig {
    /// The Lua script (up to 64 KiB), defining `envoy_on_request(request_handle)` and/or
    /// `envoy_on_response(response_handle)`. Required.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub inline_code: String,
}

/// Selects traffic by direction and port; all set conditions must hold. The same shape as
/// [`super::wasm_plugin::wasm_plugin::TrafficSelector`].
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TrafficSelector {
    /// Traffic direction: `CLIENT` (outbound), `SERVER` (inbound) or `CLIENT_AND_SERVER`, the
    /// default when unset. Gateways use `CLIENT` or `CLIENT_AND_SERVER`.
    #[prost(enumeration = "WorkloadMode", tag = "1")]
    #[serde(with = "WorkloadMode", skip_serializing_if = "is_default")]
    pub mode: i32,
    /// Destination ports (the service port outbound, the workload's port inbound); any one
    /// matches. Empty: any port.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub ports: Vec<PortSelector>,
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::{traffic_extension::ExecutionPhase, *};
    use crate::{
        de::from_node,
        extensions::wasm_plugin::EnvVar,
        test_corpus::{Scope, check_corpus},
    };

    use crate::test_corpus::spec_of as spec;

    const WASM: &str = r#"
apiVersion: extensions.istio.io/v1alpha1
kind: TrafficExtension
metadata:
  name: my-filter
  namespace: bookinfo
spec:
  targetRefs:
  - group: gateway.networking.k8s.io
    kind: Gateway
    name: bookinfo-gateway
  phase: AUTHZ
  priority: -5
  match:
  - mode: CLIENT
    ports:
    - number: 443
  - {}
  wasm:
    url: oci://gcr.io/myproject/filter:v1.0.0
    sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    imagePullPolicy: IfNotPresent
    imagePullSecret: gcr-secret
    verificationKey: key
    pluginName: my-filter
    pluginConfig:
      key1: value1
      limits: {rps: 100}
    failStrategy: FAIL_RELOAD
    vmConfig:
      env:
      - name: SOME_ENV_VAR
        value: some_value
      - name: HOSTNAME
        valueFrom: HOST
    type: NETWORK
"#;

    const LUA: &str = r#"
spec:
  selector:
    matchLabels:
      app: productpage
  phase: AUTHN
  lua:
    inlineCode: |
      function envoy_on_request(request_handle)
        request_handle:headers():add("x-lua-injected", "true")
      end
"#;

    fn decode(text: &str) -> TrafficExtension {
        let (t, unknown) = from_node::<TrafficExtension>(&spec(text), "spec").unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        t
    }

    #[test]
    fn decodes_wasm_extension() {
        let t = decode(WASM);
        assert!(t.selector.is_none());
        assert_eq!(t.target_refs[0].name, "bookinfo-gateway");
        assert_eq!(t.phase, ExecutionPhase::Authz as i32);
        assert_eq!(t.priority, Some(-5));
        assert_eq!(
            t.r#match,
            [
                TrafficSelector {
                    mode: WorkloadMode::Client as i32,
                    ports: vec![PortSelector { number: 443 }],
                },
                TrafficSelector::default(),
            ]
        );
        assert!(t.lua.is_none());
        let w = t.wasm.as_ref().unwrap();
        assert_eq!(w.url, "oci://gcr.io/myproject/filter:v1.0.0");
        assert_eq!(w.sha256.len(), 64);
        assert_eq!(w.image_pull_policy, PullPolicy::IfNotPresent as i32);
        assert_eq!(w.image_pull_secret, "gcr-secret");
        assert_eq!(w.verification_key, "key");
        assert_eq!(w.plugin_name, "my-filter");
        assert_eq!(
            w.plugin_config.as_ref().unwrap().to_json(),
            serde_json::json!({"key1": "value1", "limits": {"rps": 100}})
        );
        assert_eq!(w.fail_strategy, FailStrategy::FailReload as i32);
        assert_eq!(w.r#type, PluginType::Network as i32);
        let env = &w.vm_config.as_ref().unwrap().env;
        assert_eq!(env[0].value, "some_value");
        assert_eq!(
            env[1],
            EnvVar {
                name: "HOSTNAME".into(),
                value_from: crate::extensions::wasm_plugin::EnvValueSource::Host as i32,
                value: String::new(),
            }
        );
    }

    #[test]
    fn decodes_lua_extension() {
        let t = decode(LUA);
        assert_eq!(t.selector.unwrap().match_labels["app"], "productpage");
        assert_eq!(t.phase, ExecutionPhase::Authn as i32);
        assert!(t.wasm.is_none());
        assert_eq!(
            t.lua.unwrap().inline_code,
            "function envoy_on_request(request_handle)\n  request_handle:headers():add(\"x-lua-injected\", \"true\")\nend\n"
        );
    }

    #[test]
    fn both_oneof_members_decode() {
        // Both members of `filter_config` read fine; validation reports the conflict.
        let t = decode("spec:\n  wasm: {url: oci://x}\n  lua: {inlineCode: x}\n");
        assert!(t.wasm.is_some() && t.lua.is_some());
    }

    #[test]
    fn misspelt_fields_are_reported_with_their_paths() {
        let text = "spec:\n  match:\n  - ports:\n    - numbr: 80\n  wasm:\n    url: oci://x\n    vmConfig:\n      envs: []\n  luaa: {}\n";
        let (_, unknown) = from_node::<TrafficExtension>(&spec(text), "spec").unwrap();
        let paths: Vec<_> = unknown.iter().map(|u| (u.path.as_str(), u.mark.line)).collect();
        assert_eq!(
            paths,
            [("spec.match[0].ports[0].numbr", 4), ("spec.wasm.vmConfig.envs", 8), ("spec.luaa", 9),]
        );
    }

    #[test]
    fn wrong_enum_and_type_are_errors() {
        // WasmPlugin's phase names are not ExecutionPhase names.
        let err =
            from_node::<TrafficExtension>(&spec("spec:\n  phase: UNSPECIFIED_PHASE\n"), "spec").unwrap_err();
        assert_eq!(err.path, "spec.phase");
        assert!(err.message.contains("UNSPECIFIED, AUTHN, AUTHZ, STATS"), "{err}");
        let err = from_node::<TrafficExtension>(&spec("spec:\n  priority: high\n"), "spec").unwrap_err();
        assert_eq!(err.path, "spec.priority");
        let err =
            from_node::<TrafficExtension>(&spec("spec:\n  wasm: {failStrategy: FAIL_CLOSED}\n"), "spec")
                .unwrap_err();
        assert_eq!(err.path, "spec.wasm.failStrategy");
    }

    #[test]
    fn protobuf_round_trip() {
        for text in [WASM, LUA] {
            let t = decode(text);
            assert_eq!(TrafficExtension::decode(&*t.encode_to_vec()).unwrap(), t);
        }
    }

    #[test]
    fn wire_field_numbers() {
        // targetRefs = 2 { kind = 2 }, phase = 3, priority = 4 (Int32Value { value = 1 }),
        // match = 5 { ports = 2 { number = 1 } }, lua = 7 { inlineCode = 1 }.
        let t = TrafficExtension {
            target_refs: vec![PolicyTargetReference { kind: "G".into(), ..Default::default() }],
            phase: ExecutionPhase::Stats as i32,
            priority: Some(7),
            r#match: vec![TrafficSelector { mode: 0, ports: vec![PortSelector { number: 9 }] }],
            lua: Some(LuaConfig { inline_code: "x".into() }),
            ..Default::default()
        };
        assert_eq!(
            t.encode_to_vec(),
            [
                0x12, 3, 0x12, 1, b'G', // targetRefs
                0x18, 3, // phase
                0x22, 2, 0x08, 7, // priority
                0x2a, 4, 0x12, 2, 0x08, 9, // match
                0x3a, 3, 0x0a, 1, b'x', // lua
            ]
        );
        // wasm = 6 { url = 1, imagePullPolicy = 3, pluginConfig = 6, failStrategy = 8,
        // vmConfig = 9 { env = 1 { value = 2 } }, type = 10 }.
        let t = TrafficExtension {
            wasm: Some(WasmConfig {
                url: "u".into(),
                image_pull_policy: PullPolicy::Always as i32,
                plugin_config: Some(Struct::default()),
                fail_strategy: FailStrategy::FailOpen as i32,
                vm_config: Some(VmConfig { env: vec![EnvVar { value: "v".into(), ..Default::default() }] }),
                r#type: PluginType::Http as i32,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            t.encode_to_vec(),
            [
                0x32, 18, // wasm
                0x0a, 1, b'u', // url
                0x18, 2, // imagePullPolicy
                0x32, 0, // pluginConfig
                0x40, 1, // failStrategy
                0x4a, 5, 0x0a, 3, 0x12, 1, b'v', // vmConfig
                0x50, 1, // type
            ]
        );
    }

    #[test]
    fn json_uses_camel_case_and_enum_names() {
        let t = decode(WASM);
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["phase"], "AUTHZ");
        assert_eq!(json["priority"], -5);
        assert_eq!(json["match"], serde_json::json!([{"mode": "CLIENT", "ports": [{"number": 443}]}, {}]));
        let w = &json["wasm"];
        assert_eq!(w["imagePullPolicy"], "IfNotPresent");
        assert_eq!(w["imagePullSecret"], "gcr-secret");
        assert_eq!(w["verificationKey"], "key");
        assert_eq!(w["pluginName"], "my-filter");
        assert_eq!(w["pluginConfig"]["limits"]["rps"], 100);
        assert_eq!(w["failStrategy"], "FAIL_RELOAD");
        assert_eq!(w["type"], "NETWORK");
        assert_eq!(
            w["vmConfig"]["env"],
            serde_json::json!([
                {"name": "SOME_ENV_VAR", "value": "some_value"},
                {"name": "HOSTNAME", "valueFrom": "HOST"},
            ])
        );
        assert!(json.get("lua").is_none() && json.get("selector").is_none());
        let back: TrafficExtension = serde_json::from_value(json).unwrap();
        assert_eq!(back, t);

        assert_eq!(
            serde_json::to_value(decode(LUA)).unwrap(),
            serde_json::json!({
                "selector": {"matchLabels": {"app": "productpage"}},
                "phase": "AUTHN",
                "lua": {"inlineCode": "function envoy_on_request(request_handle)\n  request_handle:headers():add(\"x-lua-injected\", \"true\")\nend\n"},
            })
        );
        // Defaults (UNSPECIFIED phase, FAIL_CLOSE, empty lists) are omitted.
        let small = TrafficExtension {
            wasm: Some(WasmConfig { url: "oci://x".into(), ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(serde_json::to_value(&small).unwrap(), serde_json::json!({"wasm": {"url": "oci://x"}}));
    }

    #[test]
    fn corpus_decodes_without_unknown_fields() {
        // The validation dataset holds one (Lua) TrafficExtension; no other input has any.
        assert!(check_corpus::<TrafficExtension>(crate::Kind::TrafficExtension, Scope::Valid, &[]) > 0);
        check_corpus::<TrafficExtension>(crate::Kind::TrafficExtension, Scope::Other, &[]);
    }
}
