//! `WasmPlugin` (`extensions.istio.io`): WebAssembly filters added to proxies.
//!
//! Follows `extensions/v1alpha1/wasm.proto` of the Istio API (`istio.extensions.v1alpha1.WasmPlugin`),
//! including the package-level enums and messages that `TrafficExtension` shares
//! ([`PluginType`], [`PluginPhase`], [`PullPolicy`], [`VmConfig`], [`EnvVar`], [`EnvValueSource`],
//! [`FailStrategy`]).

use serde::{Deserialize, Serialize};

use crate::{
    type_v1beta1::{PolicyTargetReference, WorkloadSelector},
    wkt::{Struct, is_default},
};

/// A Wasm module, fetched from an OCI registry, HTTP(S) or the proxy's file system, inserted into
/// the filter chain of the selected workloads.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WasmPlugin {
    /// Workloads (in the plugin's namespace, or all namespaces from the root namespace) that get
    /// the plugin. Unset with no `targetRefs`: every workload of the namespace. At most one of
    /// `selector` and `targetRefs` may be set.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub selector: Option<WorkloadSelector>,
    /// A single resource the plugin attaches to (undocumented form of `targetRefs`).
    #[prost(message, optional, tag = "15")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_ref: Option<PolicyTargetReference>,
    /// Resources (Gateway, GatewayClass, Service, ServiceEntry) the plugin attaches to; up to 16.
    /// Waypoints only honour plugins that use this field.
    #[prost(message, repeated, tag = "16")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_refs: Vec<PolicyTargetReference>,
    /// Where the module is: `oci://` (the default scheme), `file://` or `http(s)://`. Required.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub url: String,
    /// Expected SHA-256 of the module or image (64 lowercase hex digits); must agree with a
    /// `@sha256:` digest in `url`.
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub sha256: String,
    /// When to pull the module again. Default: `IfNotPresent`, or `Always` for an OCI `latest` tag.
    #[prost(enumeration = "PullPolicy", tag = "4")]
    #[serde(with = "PullPolicy", skip_serializing_if = "is_default")]
    pub image_pull_policy: i32,
    /// Name of a Docker pull secret, in the plugin's namespace, for the OCI registry.
    #[prost(string, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub image_pull_secret: String,
    /// Public key to verify signed modules (reserved; not implemented by Istio).
    #[prost(string, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub verification_key: String,
    /// Configuration handed to the plugin, any JSON object.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub plugin_config: Option<Struct>,
    /// The plugin's name in the Envoy configuration (formerly `rootID`); some modules need it to
    /// pick a plugin.
    #[prost(string, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub plugin_name: String,
    /// Where in the filter chain the plugin goes. Default: chosen by the control plane (near the end).
    #[prost(enumeration = "PluginPhase", tag = "9")]
    #[serde(with = "PluginPhase", skip_serializing_if = "is_default")]
    pub phase: i32,
    /// Order among plugins of the same phase: higher first. Default 0; ties are ordered by name
    /// and namespace.
    #[prost(message, optional, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub priority: Option<i32>,
    /// What happens when the plugin cannot be fetched or fails fatally. Default `FAIL_CLOSE`.
    #[prost(enumeration = "FailStrategy", tag = "13")]
    #[serde(with = "FailStrategy", skip_serializing_if = "is_default")]
    pub fail_strategy: i32,
    /// Settings of the Wasm VM that runs the plugin.
    #[prost(message, optional, tag = "11")]
    #[serde(skip_serializing_if = "is_default")]
    pub vm_config: Option<VmConfig>,
    /// Traffic the plugin sees: traffic matching any selector. Empty: all traffic.
    #[prost(message, repeated, tag = "12")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#match: Vec<wasm_plugin::TrafficSelector>,
    /// HTTP (layer 7) or network (layer 4) extension. Default HTTP.
    #[prost(enumeration = "PluginType", tag = "14")]
    #[serde(with = "PluginType", skip_serializing_if = "is_default")]
    pub r#type: i32,
}

/// Nested types of [`WasmPlugin`].
#[allow(clippy::module_inception)] // prost-build layout: the message's nested types live in its snake_case module
pub mod wasm_plugin {
    use serde::{Deserialize, Serialize};

    use crate::{
        type_v1beta1::{PortSelector, WorkloadMode},
        wkt::is_default,
    };

    /// Selects traffic by direction and port; all set conditions must hold. The same shape as
    /// the package-level `TrafficSelector` of `TrafficExtension`.
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
}

crate::proto_enum! {
    /// The kind of Wasm extension.
    pub enum PluginType {
        /// Unset: HTTP.
        UnspecifiedPluginType = 0 => "UNSPECIFIED_PLUGIN_TYPE",
        /// An HTTP (layer 7) filter.
        Http = 1 => "HTTP",
        /// A network (layer 4) filter; also sees HTTP traffic as bytes.
        Network = 2 => "NETWORK",
    }
}

crate::proto_enum! {
    /// Where in the filter chain a plugin is inserted.
    pub enum PluginPhase {
        /// Chosen by the control plane, usually at the end of the chain just before the router.
        UnspecifiedPhase = 0 => "UNSPECIFIED_PHASE",
        /// Before Istio's authentication filters.
        Authn = 1 => "AUTHN",
        /// After authentication, before Istio's authorization filters.
        Authz = 2 => "AUTHZ",
        /// After authorization, before Istio's stats filters.
        Stats = 3 => "STATS",
    }
}

crate::proto_enum! {
    /// When a module is fetched again, as for Kubernetes images.
    pub enum PullPolicy {
        /// Unset: `IfNotPresent`, or `Always` for an OCI image tagged `latest`.
        UnspecifiedPolicy = 0 => "UNSPECIFIED_POLICY",
        /// Reuse a module fetched before; fetch only when none is present.
        IfNotPresent = 1 => "IfNotPresent",
        /// Fetch the module each time the plugin changes (metadata included).
        Always = 2 => "Always",
    }
}

/// Settings of a Wasm VM.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VmConfig {
    /// Environment variables given to the VM (unique names; up to 256).
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub env: Vec<EnvVar>,
}

/// One environment variable of a Wasm VM.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EnvVar {
    /// The variable's name (a C identifier, up to 256 characters). Required.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Where the value comes from. Default `INLINE`.
    #[prost(enumeration = "EnvValueSource", tag = "3")]
    #[serde(with = "EnvValueSource", skip_serializing_if = "is_default")]
    pub value_from: i32,
    /// The value (up to 2048 characters), for `INLINE`; must be empty for `HOST`.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub value: String,
}

crate::proto_enum! {
    /// Where a Wasm VM environment variable's value comes from.
    pub enum EnvValueSource {
        /// The `value` given in the resource. The default.
        Inline = 0 => "INLINE",
        /// The proxy's environment variable of the same name.
        Host = 1 => "HOST",
    }
}

crate::proto_enum! {
    /// What happens when a plugin cannot be fetched or fails fatally.
    pub enum FailStrategy {
        /// Requests fail with a 5xx status. The default.
        FailClose = 0 => "FAIL_CLOSE",
        /// The plugin is skipped (not advised for authentication/authorization plugins).
        FailOpen = 1 => "FAIL_OPEN",
        /// After a runtime error a new plugin instance serves the next request; other failures
        /// behave as `FAIL_CLOSE`.
        FailReload = 2 => "FAIL_RELOAD",
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::{
        de::from_node,
        test_corpus::{Scope, check_corpus},
        type_v1beta1::{PortSelector, WorkloadMode},
        wkt::{Value, value::Kind},
    };

    use crate::test_corpus::spec_of as spec;

    const FULL: &str = r#"
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata:
  name: openid-connect
  namespace: istio-ingress
spec:
  selector:
    matchLabels:
      istio: ingressgateway
  url: oci://private-registry:5000/openid-connect/openid:latest
  sha256: 9a5e1e58c2d0b3fb7a0a6b3d0ef4e8d6a8b3c1b2e0d8f7a6c5b4a39281706f5e
  imagePullPolicy: Always
  imagePullSecret: private-registry-pull-secret
  pluginName: openid
  phase: AUTHN
  priority: 10
  failStrategy: FAIL_OPEN
  type: HTTP
  pluginConfig:
    openid_server: authn
    openid_realm: ingress
    retries: 3
    scopes: [openid, email]
    nested: {enabled: true, ratio: 0.5, none: null}
  vmConfig:
    env:
    - name: POD_NAME
      valueFrom: HOST
    - name: TRUST_DOMAIN
      value: cluster.local
  match:
  - mode: SERVER
    ports:
    - number: 8080
    - number: 8443
  - mode: CLIENT
"#;

    fn decode(text: &str) -> WasmPlugin {
        let (w, unknown) = from_node::<WasmPlugin>(&spec(text), "spec").unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        w
    }

    #[test]
    fn decodes_full_plugin() {
        let w = decode(FULL);
        assert_eq!(w.selector.as_ref().unwrap().match_labels["istio"], "ingressgateway");
        assert_eq!(w.url, "oci://private-registry:5000/openid-connect/openid:latest");
        assert_eq!(w.sha256.len(), 64);
        assert_eq!(w.image_pull_policy, PullPolicy::Always as i32);
        assert_eq!(w.image_pull_secret, "private-registry-pull-secret");
        assert_eq!(w.plugin_name, "openid");
        assert_eq!(w.phase, PluginPhase::Authn as i32);
        assert_eq!(w.priority, Some(10));
        assert_eq!(w.fail_strategy, FailStrategy::FailOpen as i32);
        assert_eq!(w.r#type, PluginType::Http as i32);
        let cfg = w.plugin_config.as_ref().unwrap();
        assert_eq!(
            cfg.to_json(),
            serde_json::json!({
                "openid_server": "authn",
                "openid_realm": "ingress",
                "retries": 3,
                "scopes": ["openid", "email"],
                "nested": {"enabled": true, "ratio": 0.5, "none": null},
            })
        );
        assert_eq!(cfg.fields["retries"], Value { kind: Some(Kind::NumberValue(3.0)) });
        assert_eq!(
            w.vm_config.as_ref().unwrap().env,
            [
                EnvVar {
                    name: "POD_NAME".into(),
                    value_from: EnvValueSource::Host as i32,
                    value: String::new()
                },
                EnvVar {
                    name: "TRUST_DOMAIN".into(),
                    value_from: EnvValueSource::Inline as i32,
                    value: "cluster.local".into()
                },
            ]
        );
        assert_eq!(
            w.r#match,
            [
                wasm_plugin::TrafficSelector {
                    mode: WorkloadMode::Server as i32,
                    ports: vec![PortSelector { number: 8080 }, PortSelector { number: 8443 }],
                },
                wasm_plugin::TrafficSelector { mode: WorkloadMode::Client as i32, ports: vec![] },
            ]
        );
    }

    #[test]
    fn pull_policy_names_are_mixed_case() {
        let w = decode(
            "spec:\n  url: file:///opt/filter.wasm\n  imagePullPolicy: IfNotPresent\n  type: NETWORK\n  targetRefs:\n  - {group: gateway.networking.k8s.io, kind: Gateway, name: gw}\n",
        );
        assert_eq!(w.image_pull_policy, PullPolicy::IfNotPresent as i32);
        assert_eq!(w.r#type, PluginType::Network as i32);
        assert_eq!(w.target_refs[0].name, "gw");
        let err =
            from_node::<WasmPlugin>(&spec("spec:\n  imagePullPolicy: IF_NOT_PRESENT\n"), "spec").unwrap_err();
        assert_eq!(err.path, "spec.imagePullPolicy");
        assert!(err.message.contains("UNSPECIFIED_POLICY, IfNotPresent, Always"), "{err}");
    }

    #[test]
    fn misspelt_field_is_reported_with_its_path() {
        // Inside `pluginConfig` any key is fine; elsewhere unknown keys are reported.
        let text = "spec:\n  url: oci://x\n  pluginConfig: {anything: 1}\n  vmConfig:\n    env:\n    - name: A\n      valueFrm: HOST\n";
        let (_, unknown) = from_node::<WasmPlugin>(&spec(text), "spec").unwrap();
        let paths: Vec<_> = unknown.iter().map(|u| (u.path.as_str(), u.mark.line)).collect();
        assert_eq!(paths, [("spec.vmConfig.env[0].valueFrm", 7)]);
    }

    #[test]
    fn protobuf_round_trip() {
        let w = decode(FULL);
        assert_eq!(WasmPlugin::decode(&*w.encode_to_vec()).unwrap(), w);
    }

    #[test]
    fn wire_field_numbers() {
        // priority = 10 (Int32Value { value = 1 }), vmConfig = 11 { env = 1 { name = 1, valueFrom = 3 } },
        // match = 12 { mode = 1, ports = 2 { number = 1 } }, failStrategy = 13, type = 14.
        let w = WasmPlugin {
            priority: Some(-1),
            vm_config: Some(VmConfig {
                env: vec![EnvVar {
                    name: "A".into(),
                    value_from: EnvValueSource::Host as i32,
                    value: String::new(),
                }],
            }),
            r#match: vec![wasm_plugin::TrafficSelector {
                mode: WorkloadMode::Server as i32,
                ports: vec![PortSelector { number: 80 }],
            }],
            fail_strategy: FailStrategy::FailReload as i32,
            r#type: PluginType::Network as i32,
            ..Default::default()
        };
        let mut want = vec![0x52, 11, 0x08];
        want.extend([0xff; 9]);
        want.push(0x01); // -1 as a 10-byte varint
        want.extend([0x5a, 7, 0x0a, 5, 0x0a, 1, b'A', 0x18, 1]);
        want.extend([0x62, 6, 0x08, 2, 0x12, 2, 0x08, 80]);
        want.extend([0x68, 2, 0x70, 2]);
        assert_eq!(w.encode_to_vec(), want);

        // targetRef = 15 and targetRefs = 16 need two-byte tags; pluginConfig = 7 (Struct).
        let w = WasmPlugin {
            plugin_config: Some(Struct::default()),
            target_ref: Some(PolicyTargetReference::default()),
            target_refs: vec![PolicyTargetReference::default()],
            ..Default::default()
        };
        assert_eq!(w.encode_to_vec(), [0x3a, 0, 0x7a, 0, 0x82, 0x01, 0]);
    }

    #[test]
    fn json_uses_camel_case_and_enum_names() {
        let w = decode(FULL);
        let json = serde_json::to_value(&w).unwrap();
        assert_eq!(json["imagePullPolicy"], "Always");
        assert_eq!(json["phase"], "AUTHN");
        assert_eq!(json["failStrategy"], "FAIL_OPEN");
        assert_eq!(json["type"], "HTTP");
        assert_eq!(json["priority"], 10);
        assert_eq!(json["pluginConfig"]["retries"], 3);
        assert_eq!(
            json["vmConfig"]["env"],
            serde_json::json!([
                {"name": "POD_NAME", "valueFrom": "HOST"},
                {"name": "TRUST_DOMAIN", "value": "cluster.local"},
            ])
        );
        assert_eq!(
            json["match"],
            serde_json::json!([
                {"mode": "SERVER", "ports": [{"number": 8080}, {"number": 8443}]},
                {"mode": "CLIENT"},
            ])
        );
        // Defaults (FAIL_CLOSE, UNSPECIFIED_*, INLINE, empty strings) are omitted; priority 0 is kept.
        let small = WasmPlugin { url: "oci://x".into(), priority: Some(0), ..Default::default() };
        assert_eq!(
            serde_json::to_value(&small).unwrap(),
            serde_json::json!({"url": "oci://x", "priority": 0})
        );
        let back: WasmPlugin = serde_json::from_value(json).unwrap();
        assert_eq!(back, w);
    }

    #[test]
    fn corpus_decodes_without_unknown_fields() {
        assert!(check_corpus::<WasmPlugin>(crate::Kind::WasmPlugin, Scope::Valid, &[]) > 0);
        assert!(check_corpus::<WasmPlugin>(crate::Kind::WasmPlugin, Scope::Other, &[]) > 0);
    }
}
