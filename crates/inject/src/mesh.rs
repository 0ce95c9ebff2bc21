//! Mesh config and proxy config as injection reads them, in proto-JSON form (`pkg/config/mesh`:
//! `DefaultMeshConfig`, `DefaultProxyConfig`, `ApplyMeshConfig`, `MergeProxyConfig`; and
//! `pkg/kube/inject/template.go`: `cleanProxyConfig` for `protoToJSON`).
//!
//! The mesh config's YAML is applied over Istio's defaults as istiod applies it: fields override,
//! messages (and the proxy config, and `proxyMetadata`) merge.

use serde_json::{Map, Value as Json, json};

/// Istio's `DefaultProxyConfig()` (pilot's code defaults), proto-JSON.
pub fn default_proxy_config() -> Json {
    json!({
        "configPath": "./etc/istio/proxy",
        "binaryPath": "/usr/local/bin/envoy",
        "serviceCluster": "istio-proxy",
        "drainDuration": "45s",
        "terminationDrainDuration": "5s",
        "proxyAdminPort": 15000,
        "controlPlaneAuthPolicy": "MUTUAL_TLS",
        "discoveryAddress": "istiod.istio-system.svc:15012",
        "statNameLength": 189,
        "statusPort": 15020
    })
}

/// The fields of Istio's `DefaultMeshConfig()` that injection and its templates read, proto-JSON.
pub fn default_mesh_config() -> Json {
    json!({
        "enableTracing": true,
        "accessLogEncoding": "TEXT",
        "ingressService": "istio-ingressgateway",
        "ingressControllerMode": "STRICT",
        "ingressClass": "istio",
        "trustDomain": "cluster.local",
        "enableAutoMtls": true,
        "outboundTrafficPolicy": {"mode": "ALLOW_ANY"},
        "enablePrometheusMerge": true,
        "rootNamespace": "istio-system",
        "connectTimeout": "10s",
        "dnsRefreshRate": "60s",
        "defaultConfig": default_proxy_config()
    })
}

/// Why a mesh config or a `proxy.istio.io/config` annotation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeshError {
    /// The mesh config is not YAML or not an object.
    #[error("failed to convert to proto: {0}")]
    Mesh(String),
    /// The proxy config (annotation) is not YAML or not an object.
    #[error("could not parse proxy config: {0}")]
    ProxyConfig(String),
}

/// Merges `overlay` into `base`: objects merge field by field, anything else replaces (a list in
/// the overlay is appended to the base's, as Go's jsonpb does when unmarshalling into a message
/// that has one).
pub fn merge(base: &mut Json, overlay: &Json) {
    match (base, overlay) {
        (Json::Object(b), Json::Object(o)) => {
            for (key, value) in o {
                match b.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => merge(existing, value),
                    Some(Json::Array(existing)) if value.is_array() => {
                        existing.extend(value.as_array().into_iter().flatten().cloned());
                    }
                    _ => {
                        b.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, overlay) => *base = overlay.clone(),
    }
}

fn yaml_object(text: &str) -> Result<Json, String> {
    crate::yaml::object(text).map_err(|e| e.to_string())
}

/// The effective mesh config of a mesh config file's YAML (Istio's defaults under it).
///
/// # Errors
/// Not YAML, or not an object.
pub fn apply_mesh_config(yaml: &str) -> Result<Json, MeshError> {
    let overlay = yaml_object(yaml).map_err(MeshError::Mesh)?;
    let mut mesh = default_mesh_config();
    merge(&mut mesh, &overlay);
    Ok(mesh)
}

/// The mesh config with `yaml` (a `proxy.istio.io/config` annotation) merged into its
/// `defaultConfig`, as istiod's `ApplyProxyConfig`.
///
/// # Errors
/// The annotation is not YAML or not an object.
pub fn apply_proxy_config(yaml: &str, mesh: &Json) -> Result<Json, MeshError> {
    let overlay = yaml_object(yaml).map_err(MeshError::ProxyConfig)?;
    let mut out = mesh.clone();
    if !out["defaultConfig"].is_object() {
        out["defaultConfig"] = json!({});
    }
    merge(&mut out["defaultConfig"], &overlay);
    Ok(out)
}

/// `ProxyConfig` fields in field-number order (`mesh/v1alpha1/proxy.proto`), the order Go's jsonpb
/// writes them in.
const PROXY_CONFIG_FIELD_ORDER: &[&str] = &[
    "configPath",
    "binaryPath",
    "serviceCluster",
    "drainDuration",
    "discoveryAddress",
    "discoveryRefreshDelay",
    "zipkinAddress",
    "statsdUdpAddress",
    "proxyAdminPort",
    "availabilityZone",
    "controlPlaneAuthPolicy",
    "customConfigFile",
    "statNameLength",
    "concurrency",
    "proxyBootstrapTemplatePath",
    "interceptionMode",
    "tracing",
    "envoyMetricsServiceAddress",
    "sds",
    "envoyAccessLogService",
    "envoyMetricsService",
    "proxyMetadata",
    "statusPort",
    "extraStatTags",
    "gatewayTopology",
    "terminationDrainDuration",
    "meshId",
    "readinessProbe",
    "proxyStatsMatcher",
    "holdApplicationUntilProxyStarts",
    "caCertificatesPem",
    "image",
    "tracingServiceName",
    "runtimeValues",
    "privateKeyProvider",
    "proxyHeaders",
    "fileFlushInterval",
    "fileFlushMinSizeKb",
    "statsCompression",
    "connectionSettings",
];

/// Seconds of a proto-JSON duration (`"45s"`, `"1.5s"`); `None` when not one.
fn duration_seconds(json: &Json) -> Option<f64> {
    json.as_str()?.strip_suffix('s')?.parse().ok()
}

/// What `protoToJSON .ProxyConfig` prints: the proxy config without the fields that equal Istio's
/// defaults (`cleanProxyConfig`: config and binary path, auth policy, service cluster, drain
/// durations, discovery address, admin and status ports, stat name length, empty metadata), its
/// proto3 zero values left out, in field-number order, compact.
pub fn clean_proxy_config_json(proxy_config: &Json) -> String {
    let defaults = default_proxy_config();
    let Json::Object(pc) = proxy_config else { return "{}".to_string() };
    let mut out = Map::new();
    let mut keys: Vec<&String> = pc.keys().collect();
    keys.sort_by_key(|k| PROXY_CONFIG_FIELD_ORDER.iter().position(|o| o == k).unwrap_or(usize::MAX));
    for key in keys {
        let value = &pc[key];
        let default = &defaults[key.as_str()];
        let same_as_default = match key.as_str() {
            "drainDuration" | "terminationDrainDuration" => {
                duration_seconds(value) == duration_seconds(default)
            }
            "configPath"
            | "binaryPath"
            | "controlPlaneAuthPolicy"
            | "serviceCluster"
            | "discoveryAddress"
            | "proxyAdminPort"
            | "statNameLength"
            | "statusPort" => value == default,
            "proxyMetadata" => value.as_object().is_some_and(Map::is_empty),
            _ => false,
        };
        let proto3_zero = match value {
            Json::Null => true,
            Json::String(s) => s.is_empty(),
            Json::Number(n) => n.as_f64() == Some(0.0) && key != "concurrency",
            Json::Bool(b) => !b && key != "holdApplicationUntilProxyStarts" && key != "statsCompression",
            Json::Array(a) => a.is_empty(),
            Json::Object(_) => false,
        };
        // An enum at its zero value is not written by proto3 JSON.
        let enum_zero = crate::view::PROTO_ENUM_ZEROS
            .iter()
            .any(|(name, zero)| name == key && value.as_str() == Some(*zero));
        if !same_as_default && !proto3_zero && !enum_zero {
            out.insert(key.clone(), value.clone());
        }
    }
    serde_json::to_string(&Json::Object(out)).unwrap_or_else(|_| "{}".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_config_overrides_fields_and_merges_the_proxy_config() {
        let mesh = apply_mesh_config(
            "trustDomain: example.org\ndefaultConfig:\n  proxyMetadata: {A: b}\n  holdApplicationUntilProxyStarts: true\n",
        )
        .unwrap();
        assert_eq!(mesh["trustDomain"], "example.org");
        assert_eq!(mesh["defaultConfig"]["statusPort"], 15020, "defaults stay under a partial proxy config");
        assert_eq!(mesh["defaultConfig"]["proxyMetadata"]["A"], "b");
        let with_annotation = apply_proxy_config("proxyMetadata: {C: d}\n", &mesh).unwrap();
        assert_eq!(with_annotation["defaultConfig"]["proxyMetadata"], json!({"A": "b", "C": "d"}));
        assert!(apply_proxy_config("[1, 2]", &mesh).is_err());
        assert!(apply_mesh_config("a: [").is_err());
    }

    #[test]
    fn a_default_proxy_config_prints_as_an_empty_object() {
        assert_eq!(clean_proxy_config_json(&default_proxy_config()), "{}");
    }

    #[test]
    fn non_default_proxy_config_fields_print_in_field_number_order() {
        let mut pc = default_proxy_config();
        merge(
            &mut pc,
            &json!({"holdApplicationUntilProxyStarts": true, "proxyMetadata": {"A": "b"}, "drainDuration": "45.0s",
                    "discoveryAddress": "x:15012", "interceptionMode": "REDIRECT"}),
        );
        assert_eq!(
            clean_proxy_config_json(&pc),
            r#"{"discoveryAddress":"x:15012","proxyMetadata":{"A":"b"},"holdApplicationUntilProxyStarts":true}"#
        );
    }
}
