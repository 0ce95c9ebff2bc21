//! Protobuf messages as JSON without reflection: the `Debug` text prost derives for every envoy-types
//! message (`Name { field: value, .. }`, `Some(..)`, enum values by name, oneofs as `Variant(..)`, maps as
//! `{k: v}`, bytes as `[n, ..]`) is parsed into a `serde_json::Value`, and every `Any` whose type the table
//! in [`expand_any`] knows is decoded and expanded in place (unknown ones stay as type URL + bytes).
//! proto3 defaults (empty strings, zeros, `false`, empty lists and maps, `None`) are left out, so two
//! messages that encode alike give the same JSON.

use base64::Engine;
use envoy_types::pb::envoy::{
    config::{
        cluster::v3::Cluster, endpoint::v3::ClusterLoadAssignment, listener::v3::Listener,
        route::v3::RouteConfiguration,
    },
    extensions::{
        filters::{
            http::{
                cors::v3::{Cors, CorsPolicy},
                ext_authz::v3::{ExtAuthz, ExtAuthzPerRoute},
                fault::v3::HttpFault,
                grpc_stats::v3::FilterConfig as GrpcStats,
                jwt_authn::v3::JwtAuthentication,
                rbac::v3::{Rbac as HttpRbac, RbacPerRoute},
                router::v3::Router,
            },
            listener::{
                http_inspector::v3::HttpInspector, original_dst::v3::OriginalDst,
                tls_inspector::v3::TlsInspector,
            },
            network::{
                http_connection_manager::v3::HttpConnectionManager, rbac::v3::Rbac as NetworkRbac,
                tcp_proxy::v3::TcpProxy,
            },
        },
        retry::host::previous_hosts::v3::PreviousHostsPredicate,
        transport_sockets::{
            raw_buffer::v3::RawBuffer,
            tls::v3::{DownstreamTlsContext, UpstreamTlsContext},
        },
        upstreams::http::v3::HttpProtocolOptions,
    },
};
use prost::{Message, Name};
use serde_json::{Map, Value};

/// The JSON of `msg` (see the module docs).
pub fn to_json<T: std::fmt::Debug>(msg: &T) -> Value {
    let text = format!("{msg:?}");
    let mut p = Parser { s: text.as_bytes(), i: 0 };
    let v = p.value().unwrap_or_else(|e| panic!("cannot read the Debug text of a message ({e}): {text}"));
    // Expand first: an `Any`'s bytes are a list of numbers in which zeros are data, not defaults.
    prune(expand(v)).unwrap_or(Value::Object(Map::new()))
}

/// A decoded xDS resource of one of the four types, as JSON.
pub fn resource_json(type_url: &str, bytes: &[u8]) -> Value {
    expand_any(type_url, bytes).unwrap_or_else(|| unknown_any(type_url, bytes))
}

macro_rules! known {
    ($url:expr, $bytes:expr, $($t:ty),* $(,)?) => {
        $(
            if $url == <$t>::type_url() {
                return Some(match <$t>::decode($bytes) {
                    Ok(m) => to_json(&m),
                    Err(e) => Value::String(format!("undecodable {}: {e}", $url)),
                });
            }
        )*
    };
}

/// `udpa.type.v1.TypedStruct` / `xds.type.v3.TypedStruct` (not in envoy-types): an extension's config as
/// a type URL and a `Struct`, how istiod sends istio-proxy extensions such as `istio.metadata_exchange`.
#[derive(Clone, PartialEq, prost::Message)]
struct TypedStruct {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(message, optional, tag = "2")]
    value: Option<envoy_types::pb::google::protobuf::Struct>,
}

/// Type URLs of [`TypedStruct`].
const TYPED_STRUCT: &[&str] =
    &["type.googleapis.com/udpa.type.v1.TypedStruct", "type.googleapis.com/xds.type.v3.TypedStruct"];

/// The JSON of an `Any` whose type is one the harness decodes; `None` for other types.
fn expand_any(type_url: &str, bytes: &[u8]) -> Option<Value> {
    if TYPED_STRUCT.contains(&type_url) {
        return Some(match TypedStruct::decode(bytes) {
            Ok(m) => to_json(&m),
            Err(e) => Value::String(format!("undecodable {type_url}: {e}")),
        });
    }
    known!(
        type_url,
        bytes,
        Cluster,
        ClusterLoadAssignment,
        Listener,
        RouteConfiguration,
        HttpConnectionManager,
        TcpProxy,
        NetworkRbac,
        HttpRbac,
        RbacPerRoute,
        Router,
        HttpFault,
        Cors,
        CorsPolicy,
        JwtAuthentication,
        ExtAuthz,
        ExtAuthzPerRoute,
        GrpcStats,
        TlsInspector,
        HttpInspector,
        OriginalDst,
        UpstreamTlsContext,
        DownstreamTlsContext,
        RawBuffer,
        HttpProtocolOptions,
        PreviousHostsPredicate,
        networking::nds::NameTable,
    );
    None
}

/// An `Any` the harness does not decode: its type URL and its bytes (base64).
fn unknown_any(type_url: &str, bytes: &[u8]) -> Value {
    let mut m = Map::new();
    m.insert("@type".into(), Value::String(type_url.into()));
    m.insert("@bytes".into(), Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)));
    Value::Object(m)
}

/// Replaces every `{type_url, value: [bytes]}` object under `v` by its decoded JSON with `@type` first.
fn expand(v: Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.into_iter().map(expand).collect()),
        Value::Object(m) => {
            if let (Some(Value::String(url)), Some(bytes)) = (m.get("type_url"), m.get("value"))
                && m.len() == 2
                && let Some(bytes) = as_bytes(bytes)
            {
                return any_json(url, &bytes);
            }
            if let (Some(Value::String(url)), 1) = (m.get("type_url"), m.len()) {
                // An Any with an empty value.
                return any_json(url, &[]);
            }
            Value::Object(m.into_iter().map(|(k, v)| (k, expand(v))).collect())
        }
        other => other,
    }
}

fn any_json(url: &str, bytes: &[u8]) -> Value {
    match expand_any(url, bytes) {
        Some(Value::Object(inner)) => {
            let mut m = Map::new();
            m.insert("@type".into(), Value::String(url.into()));
            m.extend(inner);
            Value::Object(m)
        }
        Some(other) => other,
        None => unknown_any(url, bytes),
    }
}

fn as_bytes(v: &Value) -> Option<Vec<u8>> {
    v.as_array()?.iter().map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok())).collect()
}

/// Drops proto3 defaults; `None` when `v` itself is one.
fn prune(v: Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Bool(false) => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::String(s) if s.is_empty() => None,
        Value::Array(a) if a.is_empty() => None,
        Value::Array(a) => {
            // Elements keep their place and their value: a 0 or "" in a list is data; a message element
            // that is all defaults is an empty object.
            let keep = |e: Value| match e {
                Value::Object(_) | Value::Array(_) => prune(e).unwrap_or(Value::Object(Map::new())),
                scalar => scalar,
            };
            Some(Value::Array(a.into_iter().map(keep).collect()))
        }
        Value::Object(m) => {
            let m: Map<String, Value> = m.into_iter().filter_map(|(k, v)| Some((k, prune(v)?))).collect();
            // A set message field with all defaults (`Some(Empty)`) stays as `{}` in its parent: only
            // absent (`None`) fields disappear.
            Some(Value::Object(m))
        }
        other => Some(other),
    }
}

/// A recursive-descent reader of Rust's compact `Debug` output of prost messages.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.i))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek().ok_or("unexpected end")? {
            b'"' => Ok(Value::String(self.string()?)),
            b'[' => {
                self.i += 1;
                let mut out = Vec::new();
                while self.peek() != Some(b']') {
                    out.push(self.value()?);
                    if self.peek() == Some(b',') {
                        self.i += 1;
                    }
                }
                self.i += 1;
                Ok(Value::Array(out))
            }
            b'{' => {
                // A map: keys are Debug values too (strings or numbers).
                self.i += 1;
                let mut m = Map::new();
                while self.peek() != Some(b'}') {
                    let key = match self.value()? {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    self.eat(b':')?;
                    m.insert(key, self.value()?);
                    if self.peek() == Some(b',') {
                        self.i += 1;
                    }
                }
                self.i += 1;
                Ok(Value::Object(m))
            }
            c if c == b'-' || c.is_ascii_digit() => self.number(),
            c if c.is_ascii_alphabetic() || c == b'_' => self.named(),
            c => Err(format!("unexpected '{}' at byte {}", c as char, self.i)),
        }
    }

    fn ident(&mut self) -> String {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_') {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    /// `Name { .. }`, `Name(..)`, `Name`, `true`, `false`, `inf`, `NaN`.
    fn named(&mut self) -> Result<Value, String> {
        let name = self.ident();
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                let mut m = Map::new();
                while self.peek() != Some(b'}') {
                    let mut field = self.ident();
                    if self.peek() == Some(b'#') {
                        // A raw identifier (`r#type`).
                        self.i += 1;
                        field = self.ident();
                    }
                    self.eat(b':')?;
                    m.insert(field, self.value()?);
                    if self.peek() == Some(b',') {
                        self.i += 1;
                    }
                }
                self.i += 1;
                Ok(Value::Object(m))
            }
            Some(b'(') => {
                self.i += 1;
                let mut items = Vec::new();
                while self.peek() != Some(b')') {
                    items.push(self.value()?);
                    if self.peek() == Some(b',') {
                        self.i += 1;
                    }
                }
                self.i += 1;
                let inner =
                    if items.len() == 1 { items.pop().unwrap_or(Value::Null) } else { Value::Array(items) };
                if name == "Some" {
                    Ok(inner)
                } else {
                    let mut m = Map::new();
                    m.insert(name, inner);
                    Ok(Value::Object(m))
                }
            }
            _ => Ok(match name.as_str() {
                "None" => Value::Null,
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => Value::String(name),
            }),
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len()
            && matches!(self.s[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
        if let Ok(n) = text.parse::<i64>() {
            return Ok(Value::from(n));
        }
        if let Ok(n) = text.parse::<u64>() {
            return Ok(Value::from(n));
        }
        if text == "-" && self.s[self.i..].starts_with(b"inf") {
            self.i += 3;
            return Ok(Value::String("-inf".into()));
        }
        text.parse::<f64>().map(Value::from).map_err(|_| format!("bad number {text:?} at byte {start}"))
    }

    /// A Rust string literal as `Debug` writes it.
    fn string(&mut self) -> Result<String, String> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        loop {
            let c = *self.s.get(self.i).ok_or("unterminated string")?;
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = *self.s.get(self.i).ok_or("unterminated escape")?;
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'0' => out.push(0),
                        b'u' => {
                            // \u{XXXX}
                            self.eat(b'{')?;
                            let start = self.i;
                            while self.s.get(self.i) != Some(&b'}') {
                                self.i += 1;
                            }
                            let hex =
                                std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
                            self.i += 1;
                            let ch = u32::from_str_radix(hex, 16)
                                .ok()
                                .and_then(char::from_u32)
                                .ok_or("bad unicode escape")?;
                            out.extend_from_slice(ch.to_string().as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                other => out.push(other),
            }
        }
        String::from_utf8(out).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::{
        envoy::config::{
            cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType},
            core::v3::{Address, SocketAddress, address, socket_address},
        },
        google::protobuf::Any,
    };
    use serde_json::json;

    #[test]
    fn messages_enums_oneofs_and_anys_become_json() {
        let c = Cluster {
            name: "outbound|80||a \"q\".b".into(),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
            ..Default::default()
        };
        // Enum fields keep their value's name even at 0 (both sides alike); empty maps stay `{}`.
        assert_eq!(
            to_json(&c),
            json!({"name": "outbound|80||a \"q\".b", "cluster_discovery_type": {"Type": "Eds"}, "lb_policy": "RoundRobin",
                   "dns_lookup_family": "Auto", "protocol_selection": "UseConfiguredProtocol",
                   "typed_extension_protocol_options": {}})
        );
        let addr = Address {
            address: Some(address::Address::SocketAddress(SocketAddress {
                address: "10.0.0.1".into(),
                port_specifier: Some(socket_address::PortSpecifier::PortValue(8080)),
                ..Default::default()
            })),
        };
        let any = Any {
            type_url: Listener::type_url(),
            value: Listener { name: "x".into(), ..Default::default() }.encode_to_vec(),
        };
        let wrapped = envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig {
            name: "n".into(),
            typed_config: Some(any),
        };
        assert_eq!(
            to_json(&addr),
            json!({"address": {"SocketAddress": {"protocol": "Tcp", "address": "10.0.0.1", "port_specifier": {"PortValue": 8080}}}})
        );
        assert_eq!(
            to_json(&wrapped),
            json!({"name": "n", "typed_config": {"@type": "type.googleapis.com/envoy.config.listener.v3.Listener", "name": "x", "drain_type": "Default", "traffic_direction": "Unspecified"}})
        );
        let unknown = Any { type_url: "type.googleapis.com/io.istio.Nope".into(), value: vec![1, 2] };
        assert_eq!(
            to_json(&unknown),
            json!({"@type": "type.googleapis.com/io.istio.Nope", "@bytes": "AQI="})
        );
    }
}
