//! How Kubernetes objects and Istio protos look to an injection template.
//!
//! istiod executes the templates over Go structs (`SidecarTemplateData`): a pod's fields are read by
//! their Go names (`.Spec.Containers`, `.ObjectMeta.Annotations`, `$c.Ports`), protobuf messages
//! also by their getters (`.ProxyConfig.GetTracing.GetTlsSettings`), and Helm values
//! (`map[string]any` from JSON) by their keys, with every number a float64. Here every object is
//! JSON; this module turns JSON into the template value a Go template would see, and back:
//!
//! - [`plain`]: JSON as Go's `map[string]any` (`.Values`, `fromJSON`).
//! - [`kube`]: a Kubernetes object (JSON names) as its Go struct: field names capitalised as the
//!   Go API types name them ([`go_field_name`]), map-typed fields (labels, annotations, resource
//!   limits, …) keeping their keys, the metadata's `Name`/`Namespace`/`Annotations`/`Labels` always
//!   present as Go's zero values are.
//! - [`proto`]: an Istio message in its proto-JSON form as the Go message: capitalised field names,
//!   a `GetX` beside every `X`, wrapper types (`BoolValue`, …) as `{Value, GetValue}`, enum fields
//!   at their zero value when unset (Go prints `REDIRECT` for an unset `interceptionMode`). The
//!   message's own JSON is kept with it for `protoToJSON`.
//! - [`to_json`]: a view back to JSON names (for `structToJSON`, `toYaml`, `toJson`), leaving out
//!   zero values as the Kubernetes types' `omitempty` tags do.
//!
//! Every struct is a template *map* (a missing field reads as `<no value>`, not an error): the Go
//! types have many more fields than an object sets, and a template reading an unset one gets a
//! zero value in Go, an absent one here; `eq`/`ne`/`default` treat the two alike ([`crate::gotmpl`]).

use std::collections::HashMap;

use gtmpl_ng::{Number, Value};
use serde_json::Value as Json;

/// The key under which a proto view keeps its message's JSON (not a valid Go identifier, so no
/// template can name it).
const PROTO_JSON_KEY: &str = "\u{0}json";

/// The key that marks a template map as a Go struct's view (so [`to_json`] gives its fields their
/// JSON names and omits zero values) rather than a Go map (keys kept as they are, whatever their
/// case); as [`PROTO_JSON_KEY`], no template can name it.
const STRUCT_KEY: &str = "\u{0}struct";

fn struct_view(mut fields: HashMap<String, Value>) -> Value {
    fields.insert(STRUCT_KEY.to_string(), Value::Bool(true));
    Value::Map(fields)
}

/// JSON names whose Go field name is not the JSON name with its first letter capitalised
/// (`k8s.io/api` types; the Go name is what a template writes).
const SPECIAL_NAMES: &[(&str, &str)] = &[
    ("apiVersion", "APIVersion"),
    ("uid", "UID"),
    ("tty", "TTY"),
    ("ip", "IP"),
    ("os", "OS"),
    ("seLinuxOptions", "SELinuxOptions"),
    ("fsGroup", "FSGroup"),
    ("fsGroupChangePolicy", "FSGroupChangePolicy"),
    ("fsType", "FSType"),
    ("dnsPolicy", "DNSPolicy"),
    ("dnsConfig", "DNSConfig"),
    ("httpGet", "HTTPGet"),
    ("httpHeaders", "HTTPHeaders"),
    ("tcpSocket", "TCPSocket"),
    ("grpc", "GRPC"),
    ("iscsi", "ISCSI"),
    ("iqn", "IQN"),
    ("nfs", "NFS"),
    ("cephfs", "CephFS"),
    ("rbd", "RBD"),
    ("fc", "FC"),
    ("csi", "CSI"),
    ("wwids", "WWIDs"),
    ("pdName", "PDName"),
    ("awsElasticBlockStore", "AWSElasticBlockStore"),
    ("gcePersistentDisk", "GCEPersistentDisk"),
    ("storageos", "StorageOS"),
    ("gmsaCredentialSpecName", "GMSACredentialSpecName"),
    ("gmsaCredentialSpec", "GMSACredentialSpec"),
];

/// Kubernetes fields of a map type: their keys are data, not field names.
const MAP_FIELDS: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "limits",
    "requests",
    "data",
    "binaryData",
    "stringData",
    "volumeAttributes",
    "matchLabels",
    "options",
    "parameters",
    "overhead",
];

/// Istio proto fields of a map type (`map<string, string>`).
const PROTO_MAP_FIELDS: &[&str] = &["proxyMetadata", "runtimeValues", "environmentVariables"];

/// Istio proto fields of a wrapper type (`google.protobuf.BoolValue`, `Int32Value`, …), read by
/// templates through `.GetValue`.
const PROTO_WRAPPER_FIELDS: &[&str] = &[
    "concurrency",
    "holdApplicationUntilProxyStarts",
    "statsCompression",
    "enableAutoMtls",
    "enablePrometheusMerge",
    "verifyCertificateAtClient",
    "enableTracing",
];

/// Enum fields of `ProxyConfig` (JSON names) and their zero value's name: what Go prints when unset,
/// and what proto3 JSON leaves out. Templates call `.String` on them ([`crate::gotmpl`]).
pub const PROTO_ENUM_ZEROS: &[(&str, &str)] = &[
    ("interceptionMode", "REDIRECT"),
    ("controlPlaneAuthPolicy", "NONE"),
    ("tracingServiceName", "APP_LABEL_AND_NAMESPACE"),
];

/// The Go field name of a Kubernetes JSON field name.
pub fn go_field_name(json: &str) -> String {
    if let Some((_, go)) = SPECIAL_NAMES.iter().find(|(j, _)| *j == json) {
        return (*go).to_string();
    }
    capitalize(json)
}

/// The JSON field name of a Go field name (the inverse of [`go_field_name`]).
pub fn json_field_name(go: &str) -> String {
    if let Some((json, _)) = SPECIAL_NAMES.iter().find(|(_, g)| *g == go) {
        return (*json).to_string();
    }
    let mut chars = go.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The Go field name of an Istio proto field's JSON name (`interceptionMode` → `InterceptionMode`).
pub fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn number(n: &serde_json::Number, as_float: bool) -> Value {
    if !as_float {
        if let Some(i) = n.as_i64() {
            return Value::Number(Number::from(i));
        }
        if let Some(u) = n.as_u64() {
            return Value::Number(Number::from(u));
        }
    }
    Value::Number(Number::from(n.as_f64().unwrap_or(0.0)))
}

/// JSON as Go's `map[string]any` / `[]any` from `encoding/json` (numbers are float64).
pub fn plain(json: &Json) -> Value {
    match json {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => number(n, true),
        Json::String(s) => Value::String(s.clone()),
        Json::Array(a) => Value::Array(a.iter().map(plain).collect()),
        Json::Object(o) => Value::Map(o.iter().map(|(k, v)| (k.clone(), plain(v))).collect()),
    }
}

/// A map-typed field's value: keys kept, values as they are (strings, quantities).
fn raw_map(json: &Json) -> Value {
    match json {
        Json::Object(o) => Value::Map(o.iter().map(|(k, v)| (k.clone(), typed_scalar(v))).collect()),
        Json::Null => Value::Map(HashMap::new()),
        other => typed_scalar(other),
    }
}

fn typed_scalar(json: &Json) -> Value {
    match json {
        Json::Number(n) => number(n, false),
        other => plain(other),
    }
}

/// A Kubernetes object (JSON field names) as its Go struct would look to a template.
pub fn kube(json: &Json) -> Value {
    match json {
        Json::Object(o) => {
            let out: HashMap<String, Value> = o
                .iter()
                .map(|(k, v)| {
                    let value = if MAP_FIELDS.contains(&k.as_str()) { raw_map(v) } else { kube(v) };
                    (go_field_name(k), value)
                })
                .collect();
            struct_view(out)
        }
        Json::Array(a) => Value::Array(a.iter().map(kube).collect()),
        other => typed_scalar(other),
    }
}

/// The Go view of an `ObjectMeta` (always with `Name`, `Namespace`, `Labels`, `Annotations`).
pub fn object_meta(json: &Json) -> Value {
    let mut meta = match kube(json) {
        Value::Map(m) => m,
        _ => HashMap::new(),
    };
    for key in ["Name", "Namespace", "GenerateName"] {
        meta.entry(key.to_string()).or_insert_with(|| Value::String(String::new()));
    }
    for key in ["Labels", "Annotations"] {
        meta.entry(key.to_string()).or_insert_with(|| Value::Map(HashMap::new()));
    }
    struct_view(meta)
}

/// An Istio message in proto-JSON form as the Go message looks to a template; `own_json` is what
/// `protoToJSON` prints for it (istiod prints a cleaned proxy config: [`crate::mesh`]).
pub fn proto(json: &Json, own_json: Option<String>) -> Value {
    let Json::Object(o) = json else { return plain(json) };
    let mut out = HashMap::new();
    for (key, value) in o {
        let view = if PROTO_MAP_FIELDS.contains(&key.as_str()) {
            raw_map(value)
        } else if PROTO_WRAPPER_FIELDS.contains(&key.as_str()) {
            let inner = typed_scalar(value);
            struct_view(HashMap::from([
                ("Value".to_string(), inner.clone()),
                ("GetValue".to_string(), inner),
            ]))
        } else {
            match value {
                Json::Object(_) => proto(value, None),
                Json::Array(a) => Value::Array(
                    a.iter().map(|v| if v.is_object() { proto(v, None) } else { typed_scalar(v) }).collect(),
                ),
                other => typed_scalar(other),
            }
        };
        let go = capitalize(key);
        out.insert(format!("Get{go}"), view.clone());
        out.insert(go, view);
    }
    if let Some(own) = own_json {
        out.insert(PROTO_JSON_KEY.to_string(), Value::String(own));
    }
    struct_view(out)
}

/// A `ProxyConfig` (`istio.mesh.v1alpha1`) as [`proto`] shows it, with its enum fields at their
/// zero value's name when unset; `protoToJSON` of it prints `own_json`.
pub fn proxy_config(json: &Json, own_json: String) -> Value {
    let mut view = proto(json, Some(own_json));
    if let (Value::Map(out), Json::Object(o)) = (&mut view, json) {
        // Go's nil maps index to "" instead of failing.
        for key in PROTO_MAP_FIELDS {
            if !o.contains_key(*key) {
                let go = capitalize(key);
                out.insert(format!("Get{go}"), Value::Map(HashMap::new()));
                out.insert(go, Value::Map(HashMap::new()));
            }
        }
        for (key, zero) in PROTO_ENUM_ZEROS {
            if !o.contains_key(*key) {
                let go = capitalize(key);
                out.insert(format!("Get{go}"), Value::String((*zero).to_string()));
                out.insert(go, Value::String((*zero).to_string()));
            }
        }
    }
    view
}

/// The JSON a proto view was made with (see [`proto`]).
pub fn proto_json_of(view: &Value) -> Option<String> {
    match view {
        Value::Map(m) | Value::Object(m) => match m.get(PROTO_JSON_KEY) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// Field order of Kubernetes structs templates serialise (Go's encoder follows declaration order).
const FIELD_ORDER: &[&[&str]] = &[&["name", "hostPort", "containerPort", "protocol", "hostIP"]];

/// Fields written even when zero (no `omitempty` in the Kubernetes types).
const NOT_OMITTED: &[&str] = &["containerPort"];

/// A template value back to JSON: map keys as they are, Go field names (capitalised) back to JSON
/// names, zero values of struct fields left out (`omitempty`), `GetX` twins and kept proto JSON
/// dropped. Keys are sorted, as Go's encoder sorts map keys, except for the structs of
/// [`FIELD_ORDER`], written in their Go declaration order.
pub fn to_json(value: &Value) -> Json {
    match value {
        Value::NoValue | Value::Nil | Value::Function(_) => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::String(s) => Json::String(s.clone()),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Json::from(i)
            } else if let Some(u) = n.as_u64() {
                Json::from(u)
            } else {
                let f = n.as_f64().unwrap_or(0.0);
                if f.fract() == 0.0 && f.abs() < 1e15 {
                    Json::from(f as i64)
                } else {
                    serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number)
                }
            }
        }
        Value::Array(a) => Json::Array(a.iter().map(to_json).collect()),
        Value::Map(m) | Value::Object(m) => {
            let go_struct = m.contains_key(STRUCT_KEY);
            let mut fields: Vec<(String, Json)> = m
                .iter()
                .filter(|(k, _)| k.as_str() != PROTO_JSON_KEY && k.as_str() != STRUCT_KEY)
                .filter(|(k, _)| !(go_struct && k.starts_with("Get") && m.contains_key(&k[3..])))
                .map(|(k, v)| (if go_struct { json_field_name(k) } else { k.clone() }, to_json(v)))
                .filter(|(k, v)| !go_struct || NOT_OMITTED.contains(&k.as_str()) || !is_zero(v))
                .collect();
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            if go_struct
                && let Some(order) =
                    FIELD_ORDER.iter().find(|o| fields.iter().all(|(k, _)| o.contains(&k.as_str())))
            {
                fields.sort_by_key(|(k, _)| order.iter().position(|o| o == k));
            }
            Json::Object(fields.into_iter().collect())
        }
    }
}

fn is_zero(json: &Json) -> bool {
    match json {
        Json::Null => true,
        Json::Bool(b) => !b,
        Json::Number(n) => n.as_f64() == Some(0.0),
        Json::String(s) => s.is_empty(),
        Json::Array(a) => a.is_empty(),
        Json::Object(o) => o.is_empty(),
    }
}

/// YAML text of a JSON value as `sigs.k8s.io/yaml.Marshal` writes it: block style, map keys sorted,
/// sequences at their key's indentation, strings quoted when they would read back as another type;
/// `null\n` for null, `{}\n` and `[]\n` for empty collections.
pub fn yaml_text(json: &Json) -> String {
    let mut out = String::new();
    match json {
        Json::Object(o) if !o.is_empty() => write_map(&mut out, o, 0),
        Json::Array(a) if !a.is_empty() => write_seq(&mut out, a, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Json>, indent: usize) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for key in keys {
        let value = &map[key];
        out.push_str(&" ".repeat(indent));
        out.push_str(&scalar_string(key));
        out.push(':');
        match value {
            Json::Object(o) if !o.is_empty() => {
                out.push('\n');
                write_map(out, o, indent + 2);
            }
            Json::Array(a) if !a.is_empty() => {
                out.push('\n');
                write_seq(out, a, indent);
            }
            other => {
                out.push(' ');
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn write_seq(out: &mut String, items: &[Json], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match item {
            Json::Object(o) if !o.is_empty() => {
                // The first key on the dash's line, the rest under it.
                let mut nested = String::new();
                write_map(&mut nested, o, indent + 2);
                out.push_str(nested.trim_start());
            }
            Json::Array(a) if !a.is_empty() => {
                let mut nested = String::new();
                write_seq(&mut nested, a, indent + 2);
                out.push_str(nested.trim_start());
            }
            other => {
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn scalar(json: &Json) -> String {
    match json {
        Json::Null => "null".to_string(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => n.to_string(),
        Json::String(s) => scalar_string(s),
        Json::Array(_) => "[]".to_string(),
        Json::Object(_) => "{}".to_string(),
    }
}

/// A string as a YAML scalar: plain when it reads back as the same string, else double-quoted.
fn scalar_string(s: &str) -> String {
    let reserved = matches!(
        s.to_ascii_lowercase().as_str(),
        "" | "~"
            | "null"
            | "true"
            | "false"
            | "yes"
            | "no"
            | "on"
            | "off"
            | "y"
            | "n"
            | ".nan"
            | ".inf"
            | "-.inf"
    );
    let numeric = s.parse::<f64>().is_ok() || s.starts_with("0x") || s.starts_with("0o");
    let first = s.chars().next().unwrap_or(' ');
    let special_start = "-?:,[]{}#&*!|>'\"%@` ".contains(first);
    let special_inside = s.contains(": ")
        || s.contains(" #")
        || s.ends_with(':')
        || s.ends_with(' ')
        || s.chars().any(|c| c.is_control());
    if reserved || numeric || special_start || special_inside {
        serde_json::to_string(s).unwrap_or_default()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn field<'a>(value: &'a Value, name: &str) -> &'a Value {
        match value {
            Value::Map(m) => m.get(name).unwrap_or_else(|| panic!("no {name} in {value}")),
            other => panic!("not a map: {other}"),
        }
    }

    #[test]
    fn kube_objects_get_go_field_names_and_keep_map_keys() {
        let pod = json!({"metadata": {"name": "p", "annotations": {"sidecar.istio.io/inject": "true"}},
                         "spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80}],
                                  "livenessProbe": {"httpGet": {"port": 80}}}]}});
        let view = kube(&pod);
        let meta = object_meta(&pod["metadata"]);
        assert_eq!(field(&meta, "Name"), &Value::String("p".into()));
        assert_eq!(
            field(field(&meta, "Annotations"), "sidecar.istio.io/inject"),
            &Value::String("true".into())
        );
        assert_eq!(field(&meta, "Labels"), &Value::Map(HashMap::new()), "zero-valued like Go");
        let container = match field(field(&view, "Spec"), "Containers") {
            Value::Array(a) => &a[0],
            other => panic!("{other}"),
        };
        assert!(matches!(
            field(field(field(container, "LivenessProbe"), "HTTPGet"), "Port"),
            Value::Number(_)
        ));
    }

    #[test]
    fn struct_views_go_back_to_json_names_in_go_order_without_zero_fields() {
        let port = kube(&json!({"protocol": "TCP", "containerPort": 80, "name": "http", "hostIP": ""}));
        assert_eq!(
            serde_json::to_string(&to_json(&port)).unwrap(),
            r#"{"name":"http","containerPort":80,"protocol":"TCP"}"#
        );
        let bare = kube(&json!({"containerPort": 0}));
        assert_eq!(serde_json::to_string(&to_json(&bare)).unwrap(), r#"{"containerPort":0}"#);
    }

    #[test]
    fn maps_keep_their_keys_whatever_their_case_and_structs_get_json_names() {
        let pc =
            proxy_config(&json!({"proxyMetadata": {"ISTIO_META_DNS_CAPTURE": "true", "B": ""}}), "{}".into());
        assert_eq!(to_json(field(&pc, "ProxyMetadata")), json!({"B": "", "ISTIO_META_DNS_CAPTURE": "true"}));
        let values = plain(&json!({"Upper": {"Inner": 0}}));
        assert_eq!(to_json(&values), json!({"Upper": {"Inner": 0}}));
        let container = kube(&json!({"name": "c", "tty": false, "securityContext": {"runAsUser": 1}}));
        assert_eq!(to_json(&container), json!({"name": "c", "securityContext": {"runAsUser": 1}}));
    }

    #[test]
    fn proto_views_have_getters_wrappers_and_enum_zero_values() {
        let pc = json!({"discoveryAddress": "istiod:15012", "holdApplicationUntilProxyStarts": true,
                        "tracing": {"tlsSettings": {"caCertificates": "/etc/ca.pem"}}, "proxyMetadata": {"a_b": "1"}});
        let view = proxy_config(&pc, "{}".into());
        assert_eq!(field(field(&view, "HoldApplicationUntilProxyStarts"), "GetValue"), &Value::Bool(true));
        assert_eq!(
            field(field(field(&view, "GetTracing"), "GetTlsSettings"), "GetCaCertificates"),
            &Value::String("/etc/ca.pem".into())
        );
        assert_eq!(field(&view, "InterceptionMode"), &Value::String("REDIRECT".into()));
        assert_eq!(field(field(&view, "ProxyMetadata"), "a_b"), &Value::String("1".into()));
        assert_eq!(proto_json_of(&view).as_deref(), Some("{}"));
    }

    #[test]
    fn yaml_text_reads_back_as_the_same_json() {
        let value = json!({"b": [{"x": 1, "y": ["p", "q"]}, "true", "a: b"], "a": {"c": null, "d": ""}, "e": [], "f": {}});
        let text = yaml_text(&value);
        let back = crate::yaml::object(&text).unwrap();
        assert_eq!(back, value, "{text}");
        assert_eq!(yaml_text(&Json::Null), "null\n");
        assert_eq!(yaml_text(&json!({})), "{}\n");
    }
}
