//! `PeerAuthentication` (`security.istio.io`): the mutual TLS mode a workload accepts.
//!
//! Follows `security/v1beta1/peer_authentication.proto` of the Istio API
//! (`istio.security.v1beta1.PeerAuthentication`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{type_v1beta1::WorkloadSelector, wkt::is_default};

/// How the selected workloads accept connections: plaintext, mTLS, or both; for the whole workload
/// and per port.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PeerAuthentication {
    /// Workloads in the policy's namespace (all namespaces from the root namespace) the policy
    /// applies to. Unset: every workload of the namespace (of the mesh, in the root namespace).
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub selector: Option<WorkloadSelector>,
    /// The mTLS mode of the workload. Unset: inherited from the namespace or mesh policy.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub mtls: Option<peer_authentication::MutualTls>,
    /// mTLS modes for single workload ports (the container port, not the Service port), keyed by
    /// port number (1–65535; JSON keys are strings such as `"8080"`). Only honoured with a
    /// `selector`.
    #[prost(btree_map = "uint32, message", tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub port_level_mtls: BTreeMap<u32, peer_authentication::MutualTls>,
}

/// Nested types of [`PeerAuthentication`].
#[allow(clippy::module_inception)] // prost-build layout: the message's nested types live in its snake_case module
pub mod peer_authentication {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// Mutual TLS settings.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct MutualTls {
        /// The mode. Default `UNSET` (inherit).
        #[prost(enumeration = "mutual_tls::Mode", tag = "1")]
        #[serde(with = "mutual_tls::Mode", skip_serializing_if = "is_default")]
        pub mode: i32,
    }

    /// Nested types of [`MutualTls`].
    pub mod mutual_tls {
        crate::proto_enum! {
            /// Whether connections must, may or must not use mutual TLS.
            pub enum Mode {
                /// Inherit the parent's mode; `PERMISSIVE` when there is no parent.
                Unset = 0 => "UNSET",
                /// Plaintext only: connections are not tunneled through mTLS.
                Disable = 1 => "DISABLE",
                /// Both plaintext and mTLS are accepted.
                Permissive = 2 => "PERMISSIVE",
                /// mTLS only: the client must present a certificate.
                Strict = 3 => "STRICT",
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::{peer_authentication::MutualTls, peer_authentication::mutual_tls::Mode, *};
    use crate::{
        de::from_node,
        test_corpus::{Scope, check_corpus},
    };

    use crate::test_corpus::spec_of as spec;

    const FULL: &str = r#"
spec:
  selector:
    matchLabels:
      app: reviews
  mtls:
    mode: STRICT
  portLevelMtls:
    8080:
      mode: DISABLE
    "9090":
      mode: PERMISSIVE
"#;

    fn mtls(mode: Mode) -> MutualTls {
        MutualTls { mode: mode as i32 }
    }

    #[test]
    fn decodes_modes_and_port_map() {
        let (p, unknown) = from_node::<PeerAuthentication>(&spec(FULL), "spec").unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(p.selector.unwrap().match_labels["app"], "reviews");
        assert_eq!(p.mtls, Some(mtls(Mode::Strict)));
        assert_eq!(
            p.port_level_mtls,
            BTreeMap::from([(8080, mtls(Mode::Disable)), (9090, mtls(Mode::Permissive))])
        );
    }

    #[test]
    fn misspelt_field_is_reported_with_its_path() {
        let text = "spec:\n  portLevelMtls:\n    \"80\":\n      mdoe: STRICT\n";
        let (p, unknown) = from_node::<PeerAuthentication>(&spec(text), "spec").unwrap();
        assert_eq!(p.port_level_mtls[&80], MutualTls::default());
        let paths: Vec<_> = unknown.iter().map(|u| (u.path.as_str(), u.mark.line)).collect();
        assert_eq!(paths, [("spec.portLevelMtls.80.mdoe", 4)]);
    }

    #[test]
    fn bad_port_key_and_mode_are_errors() {
        let err = from_node::<PeerAuthentication>(
            &spec("spec:\n  portLevelMtls:\n    http: {mode: STRICT}\n"),
            "spec",
        )
        .unwrap_err();
        assert_eq!(err.path, "spec.portLevelMtls.http");
        assert!(err.message.contains("invalid u32 map key \"http\""), "{err}");
        let err =
            from_node::<PeerAuthentication>(&spec("spec:\n  mtls: {mode: strict}\n"), "spec").unwrap_err();
        assert_eq!(err.path, "spec.mtls.mode");
        assert!(err.message.contains("UNSET, DISABLE, PERMISSIVE, STRICT"), "{err}");
    }

    #[test]
    fn protobuf_round_trip() {
        let (p, _) = from_node::<PeerAuthentication>(&spec(FULL), "spec").unwrap();
        assert_eq!(PeerAuthentication::decode(&*p.encode_to_vec()).unwrap(), p);
    }

    #[test]
    fn wire_field_numbers() {
        // mtls = 2 { mode = 1 }; portLevelMtls = 3, entries { key = 1 (varint), value = 2 { mode = 1 } }.
        let p = PeerAuthentication {
            mtls: Some(mtls(Mode::Permissive)),
            port_level_mtls: BTreeMap::from([(80, mtls(Mode::Strict))]),
            ..Default::default()
        };
        assert_eq!(p.encode_to_vec(), [0x12, 2, 0x08, 2, 0x1a, 6, 0x08, 80, 0x12, 2, 0x08, 3]);
    }

    #[test]
    fn json_uses_camel_case_and_enum_names() {
        let (p, _) = from_node::<PeerAuthentication>(&spec(FULL), "spec").unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({
                "selector": {"matchLabels": {"app": "reviews"}},
                "mtls": {"mode": "STRICT"},
                "portLevelMtls": {"8080": {"mode": "DISABLE"}, "9090": {"mode": "PERMISSIVE"}},
            })
        );
        // UNSET and the empty map are omitted; the JSON reads back through serde_json too.
        let unset = PeerAuthentication { mtls: Some(MutualTls::default()), ..Default::default() };
        assert_eq!(serde_json::to_value(&unset).unwrap(), serde_json::json!({"mtls": {}}));
        let back: PeerAuthentication = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn corpus_decodes_without_unknown_fields() {
        assert!(check_corpus::<PeerAuthentication>(crate::Kind::PeerAuthentication, Scope::Valid, &[]) > 0);
        assert!(check_corpus::<PeerAuthentication>(crate::Kind::PeerAuthentication, Scope::Other, &[]) > 0);
    }
}
