//! `ProxyConfig` (`networking.istio.io`): proxy-level settings (worker threads, environment, image)
//! for the workloads of a namespace or the whole mesh.
//!
//! Follows `networking/v1beta1/proxy_config.proto` of the Istio API (package `istio.networking.v1beta1`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wkt::is_default;

/// Proxy-level configuration of the selected workloads; merged over the `proxy.istio.io/config`
/// annotation and mesh defaults, taking precedence over both.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProxyConfig {
    /// Workloads this applies to; unset applies to every workload in the namespace.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub selector: Option<crate::type_v1beta1::WorkloadSelector>,
    /// Number of proxy worker threads; unset derives it from CPU limits, 0 uses all cores.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub concurrency: Option<i32>,
    /// Extra environment variables of the proxy; `ISTIO_META_*` ones are also sent as node metadata.
    #[prost(btree_map = "string, string", tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub environment_variables: BTreeMap<String, String>,
    /// Which proxy image flavour to run.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub image: Option<ProxyImage>,
}

/// The proxy image flavour (the image URL is `${hub}/${image_name}/${tag}-${image_type}`).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProxyImage {
    /// Image type: `default`, `debug`, `distroless`, or any type published to the hub.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub image_type: String,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use prost::Message;

    use super::*;
    use crate::{de::from_node, yaml::parse_documents};

    fn spec(text: &str) -> (ProxyConfig, Vec<String>) {
        let root = parse_documents(text).remove(0).unwrap().root.unwrap();
        let (v, unknown) = from_node::<ProxyConfig>(&root, "spec").unwrap();
        (v, unknown.into_iter().map(|u| u.path).collect())
    }

    const PC: &str = r#"
selector:
  matchLabels:
    app: ratings
concurrency: 0
environmentVariables:
  ISTIO_META_DNS_CAPTURE: "true"
image:
  imageType: debug
"#;

    #[test]
    fn reads_yaml() {
        let (pc, unknown) = spec(PC);
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(pc.selector.as_ref().unwrap().match_labels["app"], "ratings");
        assert_eq!(pc.concurrency, Some(0));
        assert_eq!(
            pc.environment_variables,
            BTreeMap::from([("ISTIO_META_DNS_CAPTURE".to_string(), "true".to_string())])
        );
        assert_eq!(pc.image.as_ref().unwrap().image_type, "debug");

        let (pc, unknown) = spec("selector:\n  labels: {app: x}\nimage: {image_type: distroless}\n");
        assert_eq!(pc.image.unwrap().image_type, "distroless");
        assert!(pc.concurrency.is_none());
        assert_eq!(unknown, vec!["spec.selector.labels"]);
    }

    #[test]
    fn protobuf_round_trip_and_wire() {
        let (pc, _) = spec(PC);
        assert_eq!(ProxyConfig::decode(&*pc.encode_to_vec()).unwrap(), pc);

        // concurrency = 2 (0x12) as Int32Value: a present 0 is an empty wrapper message; 4 is
        // { value = 1 (0x08) 4 }. image = 4 (0x22) { image_type = 1 (0x0a) "d" }.
        let pc = ProxyConfig { concurrency: Some(0), ..Default::default() };
        assert_eq!(pc.encode_to_vec(), vec![0x12, 0]);
        let pc = ProxyConfig {
            concurrency: Some(4),
            image: Some(ProxyImage { image_type: "d".into() }),
            ..Default::default()
        };
        assert_eq!(pc.encode_to_vec(), vec![0x12, 2, 0x08, 4, 0x22, 3, 0x0a, 1, b'd']);
        assert_eq!(ProxyConfig::decode(&*pc.encode_to_vec()).unwrap(), pc);
    }

    #[test]
    fn json_output() {
        let (pc, _) = spec(PC);
        let v = serde_json::to_value(&pc).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "selector": {"matchLabels": {"app": "ratings"}},
                // A set wrapper is written even when it holds 0.
                "concurrency": 0,
                "environmentVariables": {"ISTIO_META_DNS_CAPTURE": "true"},
                "image": {"imageType": "debug"},
            })
        );
        let v = serde_json::to_value(ProxyConfig::default()).unwrap();
        assert_eq!(v, serde_json::json!({}));
    }
}
