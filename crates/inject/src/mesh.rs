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
/// `defaultConfig`, as istiod's `ApplyProxyConfig` ([`merge_proxy_config`]: fields the annotation
/// sets replace the mesh's, `proxyMetadata` merges; fields `ProxyConfig` does not have are ignored).
///
/// # Errors
/// The annotation is not YAML or not an object.
pub fn apply_proxy_config(yaml: &str, mesh: &Json) -> Result<Json, MeshError> {
    let overlay = parse_proxy_config(yaml)?;
    let mut out = mesh.clone();
    if !out["defaultConfig"].is_object() {
        out["defaultConfig"] = json!({});
    }
    if let Json::Object(base) = &mut out["defaultConfig"] {
        merge_proxy_config(base, &overlay);
    }
    Ok(out)
}

/// A proxy config's YAML (the `proxy.istio.io/config` annotation) as a proto-JSON object of the
/// `ProxyConfig` fields it sets, as Go's `jsonpb` reads it into `meshconfig.ProxyConfig`: field names
/// in camelCase or as in the proto (`hold_application_until_proxy_starts`), unknown fields ignored
/// (istiod's `protomarshal.ApplyYAML` retries with `AllowUnknownFields`), `null` left unset.
///
/// # Errors
/// Not YAML, or not an object.
pub fn parse_proxy_config(yaml: &str) -> Result<Map<String, Json>, MeshError> {
    match yaml_object(yaml).map_err(MeshError::ProxyConfig)? {
        Json::Object(fields) => Ok(known_proxy_config_fields(&fields)),
        _ => Err(MeshError::ProxyConfig("not an object".to_string())),
    }
}

/// The `ProxyConfig` fields of `fields` under their proto-JSON (camelCase) names; unknown and `null`
/// fields dropped.
fn known_proxy_config_fields(fields: &Map<String, Json>) -> Map<String, Json> {
    let mut out = Map::new();
    for (key, value) in fields {
        let camel = api::de::lower_camel(key);
        if value.is_null() || !PROXY_CONFIG_FIELD_ORDER.contains(&camel.as_str()) {
            continue;
        }
        out.insert(camel, value.clone());
    }
    out
}

/// The `ProxyHeaders` fields istiod keeps from the proxy config below when the one above sets
/// `proxyHeaders` without them (`correctProxyHeaders`, `pkg/config/mesh/mesh.go`).
const KEPT_PROXY_HEADERS: &[&str] =
    &["forwardedClientCert", "requestId", "attemptCount", "server", "envoyDebugHeaders"];

/// Merges the proxy config `overlay` into `base` as istiod's `MergeProxyConfig`
/// (`pkg/config/mesh/mesh.go`, over Go's `jsonpb` into an existing message): every top-level field
/// the overlay sets replaces the base's whole (a message is not merged field by field, a list is not
/// appended), except `proxyMetadata`, whose entries are added to the base's (the overlay's winning),
/// and `proxyHeaders`, which keeps the base's `forwardedClientCert`, `requestId`, `attemptCount`,
/// `server` and `envoyDebugHeaders` where the overlay's leaves them unset.
pub fn merge_proxy_config(base: &mut Map<String, Json>, overlay: &Map<String, Json>) {
    let original_metadata = base.get("proxyMetadata").cloned();
    let original_headers = base.get("proxyHeaders").cloned();
    for (key, value) in overlay {
        base.insert(key.clone(), value.clone());
    }
    if let (Some(Json::Object(original)), Some(Json::Object(new))) =
        (original_metadata, overlay.get("proxyMetadata"))
    {
        let mut merged = original;
        merged.extend(new.iter().map(|(k, v)| (k.clone(), v.clone())));
        base.insert("proxyMetadata".into(), Json::Object(merged));
    }
    if let (Some(Json::Object(original)), Some(Json::Object(headers))) =
        (original_headers, base.get_mut("proxyHeaders"))
    {
        for key in KEPT_PROXY_HEADERS {
            // Unset: absent, or `forwardedClientCert`'s enum zero.
            if headers.get(*key).is_none_or(|v| is_proto3_zero_scalar(v) || v == "UNDEFINED")
                && let Some(kept) = original.get(*key)
            {
                headers.insert((*key).to_string(), kept.clone());
            }
        }
    }
}

/// A proxy config as istiod's `protomarshal.ToYAML` writes it before merging it again
/// (`mergeWithPrecedence`, `pilot/pkg/model/proxy_config.go`): the known fields, less those at
/// their proto3 zero value (`0`, `""`, `false`, an empty list or map, an enum's zero such as
/// `interceptionMode: REDIRECT`), which Go's `jsonpb` does not write — so such a value set in an
/// annotation does not override the mesh's there. The wrapper fields (`concurrency`,
/// `holdApplicationUntilProxyStarts`, `statsCompression`) keep a `0` or `false`.
pub fn proto_written(proxy_config: &Map<String, Json>) -> Map<String, Json> {
    known_proxy_config_fields(proxy_config)
        .into_iter()
        .filter(|(key, value)| !is_proto3_zero(key, value))
        .collect()
}

/// A scalar, list or map at its proto3 zero value (objects, messages, are never zero).
fn is_proto3_zero_scalar(value: &Json) -> bool {
    match value {
        Json::Null => true,
        Json::String(s) => s.is_empty(),
        Json::Number(n) => n.as_f64() == Some(0.0),
        Json::Bool(b) => !b,
        Json::Array(a) => a.is_empty(),
        Json::Object(_) => false,
    }
}

/// Whether Go's `jsonpb` leaves the top-level `ProxyConfig` field `key` out when it holds `value`:
/// a proto3 zero (an empty map; a scalar or list, unless the field is a wrapper), or an enum at its
/// zero value. A message, even empty, is written.
fn is_proto3_zero(key: &str, value: &Json) -> bool {
    match value {
        Json::Null => true,
        Json::Object(map) => matches!(key, "proxyMetadata" | "runtimeValues") && map.is_empty(),
        _ if matches!(key, "concurrency" | "holdApplicationUntilProxyStarts" | "statsCompression") => false,
        _ => {
            is_proto3_zero_scalar(value)
                || crate::view::PROTO_ENUM_ZEROS
                    .iter()
                    .any(|(name, z)| *name == key && value.as_str() == Some(*z))
        }
    }
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
        if !same_as_default && !is_proto3_zero(key, value) {
            out.insert(key.clone(), sorted_proto_map(key, value));
        }
    }
    serde_json::to_string(&Json::Object(out)).unwrap_or_else(|_| "{}".to_string())
}

/// `value` with its keys sorted when `key` is a protobuf map field of ProxyConfig (`proxyMetadata`,
/// `runtimeValues`): Go's protojson writes map entries in key order, so istiod's `PROXY_CONFIG`
/// annotation does; other fields keep their order.
fn sorted_proto_map(key: &str, value: &Json) -> Json {
    match (key, value) {
        ("proxyMetadata" | "runtimeValues", Json::Object(map)) => {
            let mut entries: Vec<(&String, &Json)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Json::Object(entries.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        }
        _ => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_metadata_keys_are_written_in_key_order() {
        let pc = serde_json::json!({"proxyMetadata": {"ZED": "1", "ALPHA": "2", "MID": "3"}});
        let text = clean_proxy_config_json(&pc);
        let (a, m, z) = (text.find("ALPHA").unwrap(), text.find("MID").unwrap(), text.find("ZED").unwrap());
        assert!(a < m && m < z, "{text}");
    }

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
    fn the_annotation_merges_as_istios_merge_proxy_config() {
        // istiod's ApplyProxyConfig → MergeProxyConfig (`pkg/config/mesh/mesh.go`): Go's jsonpb into
        // the existing message replaces each field set whole; proxyMetadata entries are added; the
        // proto's own field names are accepted; unknown fields are ignored; zero values do apply here.
        let mesh = apply_mesh_config(
            "defaultConfig:\n  tracing: {sampling: 10, zipkin: {address: a:9411}}\n  extraStatTags: [a]\n  interceptionMode: TPROXY\n",
        )
        .unwrap();
        let out = apply_proxy_config(
            "tracing: {zipkin: {address: b:9411}}\nextraStatTags: [c]\ninterceptionMode: REDIRECT\nhold_application_until_proxy_starts: true\nnotAField: 1\n",
            &mesh,
        )
        .unwrap();
        let pc = &out["defaultConfig"];
        assert_eq!(pc["tracing"], json!({"zipkin": {"address": "b:9411"}}));
        assert_eq!(pc["extraStatTags"], json!(["c"]));
        assert_eq!(pc["interceptionMode"], "REDIRECT");
        assert_eq!(pc["holdApplicationUntilProxyStarts"], true);
        assert!(pc.get("notAField").is_none());
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
