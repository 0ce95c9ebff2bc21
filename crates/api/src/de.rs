//! A serde `Deserializer` over a [`Node`] tree that knows where it is.
//!
//! It turns a [`Node`] into any `Deserialize` type (the Istio API types) and adds what plain serde
//! formats lack for config validation:
//!
//! - every error carries the **field path** (`spec.http[0].route[0].weight`) and the **line**;
//! - fields the target type does not know are **collected** (not silently dropped) as
//!   [`UnknownField`]s with their path and line, the way `istioctl validate` reports them
//!   (`unknown field "foo" in …`); the caller decides whether they are errors (validate) or warnings;
//! - the protobuf JSON mapping rules Istio's readers follow: a snake_case proto field name is
//!   accepted where the lowerCamelCase JSON name is expected (`per_try_timeout` for `perTryTimeout`),
//!   integers may be written as strings (`"80"`), and integral floats (`80.0`) are integers.
//!
//! Strings are strict: a number or boolean where a string is expected is an error, as it is for
//! Istio (YAML is turned into JSON, then parsed with protojson).

use std::{cell::RefCell, fmt};

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess,
    SeqAccess, VariantAccess, Visitor,
};

use crate::yaml::{Mark, Node, Value};

/// A field present in the input that the target type does not have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownField {
    /// Path of the unknown field, e.g. `spec.http[0].route[0].destination.subsett`.
    pub path: String,
    /// Where the field's value starts.
    pub mark: Mark,
}

/// A failure to turn a node into the target type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Path of the offending value, e.g. `spec.http[0].timeout`; empty for the root.
    pub path: String,
    /// Where the offending value starts.
    pub mark: Mark,
    /// What is wrong, e.g. `invalid type: a string, expected u32`.
    pub message: String,
    located: bool,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for DecodeError {}

impl de::Error for DecodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DecodeError { path: String::new(), mark: Mark::default(), message: msg.to_string(), located: false }
    }
}

impl DecodeError {
    fn at(mut self, path: &Path<'_>, mark: Mark) -> Self {
        if !self.located {
            self.path = path.render();
            self.mark = mark;
            self.located = true;
        }
        self
    }
}

/// Decodes `node` into `T`. `root` is the path prefix used in messages (e.g. `spec`).
///
/// Returns the value and the unknown fields met on the way.
///
/// # Errors
/// The first value that cannot be converted, with its path and position.
pub fn from_node<T: DeserializeOwned>(
    node: &Node,
    root: &str,
) -> Result<(T, Vec<UnknownField>), DecodeError> {
    let unknown = RefCell::new(Vec::new());
    let path = if root.is_empty() { Path::Root } else { Path::Field(&Path::Root, root) };
    let de = NodeDe { node, path, unknown: &unknown };
    let value = T::deserialize(de).map_err(|e| e.at(&path, node.mark))?;
    Ok((value, unknown.into_inner()))
}

/// A path from the root to the current node, kept on the stack while descending.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Field(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out);
        out
    }

    fn render_into(&self, out: &mut String) {
        match self {
            Path::Root => {}
            Path::Field(parent, name) => {
                parent.render_into(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Path::Index(parent, i) => {
                parent.render_into(out);
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
}

#[derive(Clone, Copy)]
struct NodeDe<'a> {
    node: &'a Node,
    path: Path<'a>,
    unknown: &'a RefCell<Vec<UnknownField>>,
}

impl<'a> NodeDe<'a> {
    fn err(&self, message: impl Into<String>) -> DecodeError {
        DecodeError { path: self.path.render(), mark: self.node.mark, message: message.into(), located: true }
    }

    fn invalid_type(&self, expected: &str) -> DecodeError {
        self.err(format!("invalid type: {}, expected {expected}", self.node.value.type_name()))
    }

    fn integer(&self) -> Result<i128, DecodeError> {
        match &self.node.value {
            Value::Int(i) => Ok(i128::from(*i)),
            Value::UInt(u) => Ok(i128::from(*u)),
            Value::Float(f) if f.fract() == 0.0 && f.is_finite() && f.abs() < 1.8e19 => Ok(*f as i128),
            Value::String(s) => {
                s.trim().parse::<i128>().map_err(|_| self.err(format!("invalid integer \"{s}\"")))
            }
            _ => Err(self.invalid_type("an integer")),
        }
    }

    fn float(&self) -> Result<f64, DecodeError> {
        match &self.node.value {
            Value::Int(i) => Ok(*i as f64),
            Value::UInt(u) => Ok(*u as f64),
            Value::Float(f) => Ok(*f),
            Value::String(s) => match s.as_str() {
                "Infinity" => Ok(f64::INFINITY),
                "-Infinity" => Ok(f64::NEG_INFINITY),
                "NaN" => Ok(f64::NAN),
                _ => s.trim().parse::<f64>().map_err(|_| self.err(format!("invalid number \"{s}\""))),
            },
            _ => Err(self.invalid_type("a number")),
        }
    }
}

macro_rules! int_method {
    ($method:ident, $visit:ident, $ty:ty) => {
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
            let i = self.integer()?;
            let v = <$ty>::try_from(i)
                .map_err(|_| self.err(format!("integer {i} is out of range for {}", stringify!($ty))))?;
            visitor.$visit(v)
        }
    };
}

impl<'de> Deserializer<'de> for NodeDe<'_> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Int(i) => visitor.visit_i64(*i),
            Value::UInt(u) => visitor.visit_u64(*u),
            Value::Float(f) => visitor.visit_f64(*f),
            Value::String(s) => visitor.visit_str(s),
            Value::Seq(_) => self.deserialize_seq(visitor),
            Value::Map(_) => self.deserialize_map(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            Value::Bool(b) => visitor.visit_bool(*b),
            _ => Err(self.invalid_type("a boolean")),
        }
    }

    int_method!(deserialize_i8, visit_i8, i8);
    int_method!(deserialize_i16, visit_i16, i16);
    int_method!(deserialize_i32, visit_i32, i32);
    int_method!(deserialize_i64, visit_i64, i64);
    int_method!(deserialize_u8, visit_u8, u8);
    int_method!(deserialize_u16, visit_u16, u16);
    int_method!(deserialize_u32, visit_u32, u32);
    int_method!(deserialize_u64, visit_u64, u64);

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_f32(self.float()? as f32)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_f64(self.float()?)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            Value::String(s) => visitor.visit_str(s),
            _ => Err(self.invalid_type("a string")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            Value::Null => visitor.visit_unit(),
            _ => Err(self.invalid_type("null")),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            // protojson treats null as the default (empty) value of a repeated field.
            Value::Null => {
                visitor.visit_seq(SeqDe { items: &[], next: 0, path: self.path, unknown: self.unknown })
            }
            Value::Seq(items) => {
                visitor.visit_seq(SeqDe { items, next: 0, path: self.path, unknown: self.unknown })
            }
            _ => Err(self.invalid_type("a list")),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            Value::Null => visitor.visit_map(MapDe::new(&[], &[], self)),
            Value::Map(entries) => visitor.visit_map(MapDe::new(entries, &[], self)),
            _ => Err(self.invalid_type("a mapping")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            Value::Null => visitor.visit_map(MapDe::new(&[], fields, self)),
            Value::Map(entries) => visitor.visit_map(MapDe::new(entries, fields, self)),
            _ => Err(self.invalid_type("a mapping")),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            Value::String(_) => visitor.visit_enum(UnitEnum(self)),
            _ => Err(self.invalid_type("a string")),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        // Serde's derived code asks for `IgnoredAny` exactly when it meets a field it does not know.
        self.unknown.borrow_mut().push(UnknownField { path: self.path.render(), mark: self.node.mark });
        visitor.visit_unit()
    }
}

struct SeqDe<'a> {
    items: &'a [Node],
    next: usize,
    path: Path<'a>,
    unknown: &'a RefCell<Vec<UnknownField>>,
}

impl<'de> SeqAccess<'de> for SeqDe<'_> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        let Some(node) = self.items.get(self.next) else {
            return Ok(None);
        };
        let path = Path::Index(&self.path, self.next);
        self.next += 1;
        let de = NodeDe { node, path, unknown: self.unknown };
        seed.deserialize(de).map(Some).map_err(|e| e.at(&path, node.mark))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len() - self.next)
    }
}

struct MapDe<'a> {
    entries: &'a [(crate::yaml::Key, Node)],
    fields: &'static [&'static str],
    next: usize,
    /// The key name handed to serde for the current entry (after snake_case → camelCase mapping).
    current: Option<(&'a str, &'a Node)>,
    parent: NodeDe<'a>,
}

impl<'a> MapDe<'a> {
    fn new(
        entries: &'a [(crate::yaml::Key, Node)],
        fields: &'static [&'static str],
        parent: NodeDe<'a>,
    ) -> Self {
        MapDe { entries, fields, next: 0, current: None, parent }
    }
}

/// A snake_case proto field name in protojson's lowerCamelCase (`jwks_uri` → `jwksUri`); names without
/// `_` are returned unchanged.
pub fn lower_camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Maps a snake_case proto field name to the lowerCamelCase JSON name when the struct knows it.
fn canonical_key(key: &str, fields: &'static [&'static str]) -> Option<&'static str> {
    if fields.is_empty() || !key.contains('_') || fields.contains(&key) {
        return None;
    }
    let camel = lower_camel(key);
    fields.iter().copied().find(|f| *f == camel)
}

impl<'de> MapAccess<'de> for MapDe<'_> {
    type Error = DecodeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, DecodeError> {
        let Some((key, value)) = self.entries.get(self.next) else {
            return Ok(None);
        };
        self.next += 1;
        let name: &str = canonical_key(&key.name, self.fields).unwrap_or(&key.name);
        self.current = Some((&key.name, value));
        seed.deserialize(KeyDe(name)).map(Some).map_err(|e: DecodeError| {
            let path = Path::Field(&self.parent.path, &key.name);
            e.at(&path, key.mark)
        })
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DecodeError> {
        let (name, node) = self.current.take().ok_or_else(|| de::Error::custom("value without key"))?;
        let path = Path::Field(&self.parent.path, name);
        let de = NodeDe { node, path, unknown: self.parent.unknown };
        seed.deserialize(de).map_err(|e| e.at(&path, node.mark))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len() - self.next)
    }
}

/// A mapping key. Keys are strings in YAML/JSON; an integer-keyed map (protobuf `map<uint32, …>`,
/// e.g. PeerAuthentication `portLevelMtls`) reads them as numbers, as protojson does.
struct KeyDe<'a>(&'a str);

macro_rules! key_int_method {
    ($method:ident, $visit:ident, $ty:ty) => {
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
            let v = self.0.parse::<$ty>().map_err(|_| {
                de::Error::custom(format!("invalid {} map key \"{}\"", stringify!($ty), self.0))
            })?;
            visitor.$visit(v)
        }
    };
}

impl<'de> Deserializer<'de> for KeyDe<'_> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.0.into_deserializer().deserialize_any(visitor)
    }

    key_int_method!(deserialize_i8, visit_i8, i8);
    key_int_method!(deserialize_i16, visit_i16, i16);
    key_int_method!(deserialize_i32, visit_i32, i32);
    key_int_method!(deserialize_i64, visit_i64, i64);
    key_int_method!(deserialize_u8, visit_u8, u8);
    key_int_method!(deserialize_u16, visit_u16, u16);
    key_int_method!(deserialize_u32, visit_u32, u32);
    key_int_method!(deserialize_u64, visit_u64, u64);

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.0 {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            other => Err(de::Error::custom(format!("invalid bool map key \"{other}\""))),
        }
    }

    serde::forward_to_deserialize_any! {
        f32 f64 char str string bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// A string node read as a unit enum variant.
struct UnitEnum<'a>(NodeDe<'a>);

impl<'de> EnumAccess<'de> for UnitEnum<'_> {
    type Error = DecodeError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), DecodeError> {
        let v = seed.deserialize(self.0)?;
        Ok((v, self))
    }
}

impl<'de> VariantAccess<'de> for UnitEnum<'_> {
    type Error = DecodeError;

    fn unit_variant(self) -> Result<(), DecodeError> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value, DecodeError> {
        Err(self.0.err("expected a mapping for this variant"))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value, DecodeError> {
        Err(self.0.err("expected a mapping for this variant"))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, DecodeError> {
        Err(self.0.err("expected a mapping for this variant"))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;
    use crate::yaml::parse_documents;

    #[derive(Deserialize, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase", default)]
    struct Inner {
        per_try_timeout: String,
        attempts: u32,
    }

    #[derive(Deserialize, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase", default)]
    struct Outer {
        hosts: Vec<String>,
        retries: Option<Inner>,
        list: Vec<Inner>,
        labels: BTreeMap<String, String>,
    }

    fn node(text: &str) -> Node {
        parse_documents(text).remove(0).unwrap().root.unwrap()
    }

    #[test]
    fn unknown_fields_are_collected_with_paths() {
        let n = node("hosts: [a]\nlist:\n- attempts: 1\n  bogus: 2\nextra: {x: 1}\n");
        let (v, unknown): (Outer, _) = from_node(&n, "spec").unwrap();
        assert_eq!(v.list[0].attempts, 1);
        let paths: Vec<_> = unknown.iter().map(|u| (u.path.as_str(), u.mark.line)).collect();
        assert_eq!(paths, vec![("spec.list[0].bogus", 4), ("spec.extra", 5)]);
    }

    #[test]
    fn errors_name_path_and_line() {
        let n = node("hosts: [a]\nlist:\n- attempts: many\n");
        let err = from_node::<Outer>(&n, "spec").unwrap_err();
        assert_eq!(err.path, "spec.list[0].attempts");
        assert_eq!(err.mark.line, 3);
        assert!(err.message.contains("invalid integer"), "{err}");
    }

    #[test]
    fn strings_are_strict() {
        let n = node("hosts: [1]\n");
        let err = from_node::<Outer>(&n, "").unwrap_err();
        assert_eq!(err.path, "hosts[0]");
        assert!(err.message.contains("expected a string"), "{err}");
    }

    #[test]
    fn snake_case_names_and_string_integers_are_accepted() {
        let n = node("retries: {per_try_timeout: 2s, attempts: \"3\"}\n");
        let (v, unknown): (Outer, _) = from_node(&n, "").unwrap();
        assert!(unknown.is_empty());
        assert_eq!(v.retries, Some(Inner { per_try_timeout: "2s".into(), attempts: 3 }));
    }

    #[test]
    fn integer_map_keys_are_parsed() {
        #[derive(Deserialize, Debug, Default, PartialEq)]
        #[serde(default)]
        struct Ports {
            ports: BTreeMap<u32, String>,
        }
        let n = node("ports: {8080: a, \"9090\": b}\n");
        let (v, _): (Ports, _) = from_node(&n, "").unwrap();
        assert_eq!(v.ports, BTreeMap::from([(8080, "a".to_string()), (9090, "b".to_string())]));
        let err = from_node::<Ports>(&node("ports: {http: a}\n"), "spec").unwrap_err();
        assert_eq!(err.path, "spec.ports.http");
        assert!(err.message.contains("invalid u32 map key"), "{err}");
    }

    #[test]
    fn out_of_range_integers_fail() {
        let n = node("retries: {attempts: -1}\n");
        let err = from_node::<Outer>(&n, "").unwrap_err();
        assert_eq!(err.path, "retries.attempts");
        assert!(err.message.contains("out of range"), "{err}");
    }
}
