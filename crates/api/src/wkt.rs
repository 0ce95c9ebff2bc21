//! Protobuf well-known types and the serde helpers every Istio API type uses.
//!
//! The Istio API is defined in protobuf and read from Kubernetes-style JSON/YAML with the protobuf JSON
//! mapping ("protojson"). These pieces carry that mapping into handwritten Rust types:
//!
//! - [`Duration`]: `google.protobuf.Duration`, JSON `"1.5s"`, protobuf `{seconds = 1, nanos = 2}`;
//! - [`Struct`], [`Value`], [`ListValue`]: `google.protobuf.Struct` & co, JSON any object/value;
//! - [`proto_enum!`](crate::proto_enum): a protobuf enum whose JSON form is the value's name;
//!   fields hold the number (`i32`, as prost requires) and use `#[serde(with = "Enum::<E>")]`,
//!   [`OptEnum`] or [`EnumList`];
//! - [`Base64`]: `bytes` fields, JSON base64;
//! - [`is_default`]: `skip_serializing_if` for every field, so output omits default values the way
//!   protojson does.
//!
//! Wrapper types (`google.protobuf.BoolValue`, `UInt32Value`, …) need no helper: prost encodes
//! `Option<bool>`/`Option<u32>` declared as `#[prost(message, optional)]` as the wrapper message, and
//! serde reads and writes them as bare values.

use std::{collections::BTreeMap, fmt, marker::PhantomData};

use serde::{
    Deserialize, Deserializer, Serialize, Serializer,
    de::{self, MapAccess, SeqAccess, Visitor},
    ser::{SerializeMap, SerializeSeq},
};

/// `true` when `value` equals its type's default; used as `skip_serializing_if` on every field so
/// that output, like protojson, omits defaults.
pub fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

// ===== Duration =====

/// Largest number of seconds a protobuf Duration may hold (±10,000 years).
const MAX_DURATION_SECONDS: i64 = 315_576_000_000;

/// `google.protobuf.Duration`: a signed span of time.
///
/// JSON: a string of decimal seconds with the suffix `s` and up to 9 fractional digits
/// (`"10s"`, `"1.5s"`, `"0.001s"`, `"-2s"`). Output writes 0, 3, 6 or 9 fractional digits, as protojson
/// does (`"1.500s"`). Protobuf: `seconds = 1`, `nanos = 2`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Message)]
pub struct Duration {
    /// Whole seconds.
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// Fraction of a second in nanoseconds, with the same sign as `seconds` (−999,999,999 to 999,999,999).
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Duration {
    /// A duration of whole milliseconds.
    pub fn from_millis(ms: i64) -> Self {
        Duration { seconds: ms / 1000, nanos: ((ms % 1000) * 1_000_000) as i32 }
    }

    /// The duration in milliseconds, rounded toward zero.
    pub fn as_millis(&self) -> i64 {
        self.seconds.saturating_mul(1000).saturating_add(i64::from(self.nanos / 1_000_000))
    }

    /// The duration as a `std::time::Duration`, or `None` when negative.
    pub fn to_std(&self) -> Option<std::time::Duration> {
        if self.seconds < 0 || self.nanos < 0 {
            return None;
        }
        Some(std::time::Duration::new(self.seconds as u64, self.nanos as u32))
    }

    /// Parses a duration string: the protojson form (`"1.5s"`, up to 9 fractional digits) or Go's
    /// `time.ParseDuration` form, which Istio also accepts (`"100ms"`, `"1m"`, `"1h30m"`, `"0"`;
    /// units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`).
    ///
    /// # Errors
    /// A message saying what is wrong with the text (no unit, bad digits, out of range).
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!("invalid duration \"{text}\": expected a number with a unit, like \"1.5s\" or \"100ms\"")
        };
        let (neg, mut rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        if rest == "0" {
            return Ok(Duration::default());
        }
        if rest.is_empty() {
            return Err(bad());
        }
        // Total in nanoseconds; i128 cannot overflow for any input within the range check below.
        let mut total: i128 = 0;
        while !rest.is_empty() {
            let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            let (int, after) = rest.split_at(int_len);
            let (frac, after) = match after.strip_prefix('.') {
                Some(f) => {
                    let n = f.bytes().take_while(u8::is_ascii_digit).count();
                    f.split_at(n)
                }
                None => ("", after),
            };
            if int.is_empty() && frac.is_empty() {
                return Err(bad());
            }
            let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
            let (unit, after) = after.split_at(unit_len);
            let scale: i128 = match unit {
                "ns" => 1,
                "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                _ => return Err(bad()),
            };
            if int.len() > 20 || frac.len() > 30 {
                return Err(format!("duration \"{text}\" is out of range"));
            }
            let int_value: i128 = if int.is_empty() { 0 } else { int.parse().map_err(|_| bad())? };
            let mut frac_value: i128 = 0;
            let mut frac_scale: i128 = 1;
            for d in frac.bytes().take(18) {
                frac_value = frac_value * 10 + i128::from(d - b'0');
                frac_scale *= 10;
            }
            total += int_value * scale + frac_value * scale / frac_scale;
            if total > i128::from(MAX_DURATION_SECONDS) * 1_000_000_000 {
                return Err(format!("duration \"{text}\" is out of range"));
            }
            rest = after;
        }
        let seconds = (total / 1_000_000_000) as i64;
        let nanos = (total % 1_000_000_000) as i32;
        Ok(if neg { Duration { seconds: -seconds, nanos: -nanos } } else { Duration { seconds, nanos } })
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let neg = self.seconds < 0 || self.nanos < 0;
        let secs = self.seconds.unsigned_abs();
        let nanos = self.nanos.unsigned_abs();
        let sign = if neg { "-" } else { "" };
        if nanos == 0 {
            write!(f, "{sign}{secs}s")
        } else if nanos.is_multiple_of(1_000_000) {
            write!(f, "{sign}{secs}.{:03}s", nanos / 1_000_000)
        } else if nanos.is_multiple_of(1_000) {
            write!(f, "{sign}{secs}.{:06}s", nanos / 1_000)
        } else {
            write!(f, "{sign}{secs}.{nanos:09}s")
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string like \"1.5s\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                Duration::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

// ===== Struct / Value / ListValue =====

/// `google.protobuf.Struct`: a free-form JSON object (EnvoyFilter patches, WasmPlugin config).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Struct {
    /// The object's members.
    #[prost(btree_map = "string, message", tag = "1")]
    pub fields: BTreeMap<String, Value>,
}

/// `google.protobuf.Value`: any JSON value. Numbers are doubles (integers above 2^53 lose precision,
/// as in protobuf).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Value {
    /// The value; `None` reads as JSON null.
    #[prost(oneof = "value::Kind", tags = "1, 2, 3, 4, 5, 6")]
    pub kind: Option<value::Kind>,
}

/// The members of [`Value`]'s `kind` oneof.
pub mod value {
    /// Which kind of JSON value a [`Value`](super::Value) holds.
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Kind {
        /// JSON null (the enum `NullValue`, always 0).
        #[prost(int32, tag = "1")]
        NullValue(i32),
        /// A JSON number.
        #[prost(double, tag = "2")]
        NumberValue(f64),
        /// A JSON string.
        #[prost(string, tag = "3")]
        StringValue(String),
        /// A JSON boolean.
        #[prost(bool, tag = "4")]
        BoolValue(bool),
        /// A JSON object.
        #[prost(message, tag = "5")]
        StructValue(super::Struct),
        /// A JSON array.
        #[prost(message, tag = "6")]
        ListValue(super::ListValue),
    }
}

/// `google.protobuf.ListValue`: a JSON array.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListValue {
    /// The array's items.
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<Value>,
}

impl Value {
    /// Converts from a JSON value.
    pub fn from_json(v: &serde_json::Value) -> Self {
        use serde_json::Value as J;
        use value::Kind;
        let kind = match v {
            J::Null => Kind::NullValue(0),
            J::Bool(b) => Kind::BoolValue(*b),
            J::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
            J::String(s) => Kind::StringValue(s.clone()),
            J::Array(a) => Kind::ListValue(ListValue { values: a.iter().map(Value::from_json).collect() }),
            J::Object(o) => Kind::StructValue(Struct::from_json_map(o)),
        };
        Value { kind: Some(kind) }
    }

    /// Converts to a JSON value (non-finite numbers become null).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        use value::Kind;
        match &self.kind {
            None | Some(Kind::NullValue(_)) => J::Null,
            Some(Kind::BoolValue(b)) => J::Bool(*b),
            Some(Kind::NumberValue(n)) => json_number(*n),
            Some(Kind::StringValue(s)) => J::String(s.clone()),
            Some(Kind::ListValue(l)) => J::Array(l.values.iter().map(Value::to_json).collect()),
            Some(Kind::StructValue(s)) => s.to_json(),
        }
    }
}

/// Integral doubles print as integers (`8080`, not `8080.0`), like Go's JSON encoder does.
fn json_number(n: f64) -> serde_json::Value {
    if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
        serde_json::Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

impl Struct {
    /// Converts from a JSON object.
    pub fn from_json_map(map: &serde_json::Map<String, serde_json::Value>) -> Self {
        Struct { fields: map.iter().map(|(k, v)| (k.clone(), Value::from_json(v))).collect() }
    }

    /// Converts to a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(self.fields.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use value::Kind;
        match &self.kind {
            None | Some(Kind::NullValue(_)) => s.serialize_unit(),
            Some(Kind::BoolValue(b)) => s.serialize_bool(*b),
            Some(Kind::NumberValue(n)) => json_number(*n).serialize(s),
            Some(Kind::StringValue(v)) => s.serialize_str(v),
            Some(Kind::ListValue(l)) => {
                let mut seq = s.serialize_seq(Some(l.values.len()))?;
                for v in &l.values {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Some(Kind::StructValue(st)) => st.serialize(s),
        }
    }
}

impl Serialize for Struct {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.fields.len()))?;
        for (k, v) in &self.fields {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl Serialize for ListValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.values.len()))?;
        for v in &self.values {
            seq.serialize_element(v)?;
        }
        seq.end()
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value { kind: Some(value::Kind::NullValue(0)) })
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value { kind: Some(value::Kind::BoolValue(v)) })
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value { kind: Some(value::Kind::NumberValue(v as f64)) })
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value { kind: Some(value::Kind::NumberValue(v as f64)) })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value { kind: Some(value::Kind::NumberValue(v)) })
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value { kind: Some(value::Kind::StringValue(v.to_string())) })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut values = Vec::new();
        while let Some(v) = seq.next_element::<Value>()? {
            values.push(v);
        }
        Ok(Value { kind: Some(value::Kind::ListValue(ListValue { values })) })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = BTreeMap::new();
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            fields.insert(k, v);
        }
        Ok(Value { kind: Some(value::Kind::StructValue(Struct { fields })) })
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for Struct {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match d.deserialize_map(ValueVisitor)?.kind {
            Some(value::Kind::StructValue(s)) => Ok(s),
            _ => Err(de::Error::custom("expected a mapping")),
        }
    }
}

impl<'de> Deserialize<'de> for ListValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match d.deserialize_seq(ValueVisitor)?.kind {
            Some(value::Kind::ListValue(l)) => Ok(l),
            _ => Err(de::Error::custom("expected a list")),
        }
    }
}

// ===== Enums =====

/// A protobuf enum with its JSON names. Implemented by [`proto_enum!`](crate::proto_enum).
pub trait ProtoEnum: Sized + Copy + 'static {
    /// Every value with its protobuf number and JSON name, in declaration order.
    const VALUES: &'static [(Self, i32, &'static str)];

    /// The JSON name of a number, or `None` for a number this enum does not define.
    fn name_of(number: i32) -> Option<&'static str> {
        Self::VALUES.iter().find(|(_, n, _)| *n == number).map(|(_, _, s)| *s)
    }

    /// The number of a JSON name (exact, case-sensitive, as protojson requires).
    fn number_of(name: &str) -> Option<i32> {
        Self::VALUES.iter().find(|(_, _, s)| *s == name).map(|(_, n, _)| *n)
    }

    /// The enum value of a number.
    fn from_number(number: i32) -> Option<Self> {
        Self::VALUES.iter().find(|(_, n, _)| *n == number).map(|(v, _, _)| *v)
    }
}

/// Declares a protobuf enum: a `#[repr(i32)]` Rust enum with `prost::Enumeration` and its JSON names.
///
/// ```
/// meshpilot_api::proto_enum! {
///     /// Load balancing algorithms.
///     pub enum SimpleLb {
///         /// No preference.
///         Unspecified = 0 => "UNSPECIFIED",
///         /// Round robin.
///         RoundRobin = 3 => "ROUND_ROBIN",
///     }
/// }
/// ```
#[macro_export]
macro_rules! proto_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $num:literal => $json:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
        #[repr(i32)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $num, )+
        }

        impl $crate::wkt::ProtoEnum for $name {
            const VALUES: &'static [(Self, i32, &'static str)] = &[ $( ($name::$variant, $num, $json), )+ ];
        }

        impl $name {
            /// The JSON (protobuf) name of this value.
            pub fn as_str_name(&self) -> &'static str {
                match self { $( $name::$variant => $json, )+ }
            }

            /// Serde helper for `i32` fields holding this enum: `#[serde(with = "ThisEnum")]`.
            pub fn serialize<S: ::serde::Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
                $crate::wkt::Enum::<$name>::serialize(v, s)
            }

            /// Serde helper for `i32` fields holding this enum: `#[serde(with = "ThisEnum")]`.
            pub fn deserialize<'de, D: ::serde::Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
                $crate::wkt::Enum::<$name>::deserialize(d)
            }
        }
    };
}

/// Serde helpers for a plain `i32` enum field: `#[serde(with = "Enum::<E>")]` (or `with = "E"`).
///
/// Reads the value name (`"ROUND_ROBIN"`) or the number; an unknown name is an error that lists the
/// accepted names. Writes the name (or the number, for a number the enum does not define).
pub struct Enum<E>(PhantomData<E>);

/// Serde helpers for an `Option<i32>` enum field (an enum inside a oneof): `#[serde(with = "OptEnum::<E>")]`.
pub struct OptEnum<E>(PhantomData<E>);

/// Serde helpers for a `Vec<i32>` repeated enum field: `#[serde(with = "EnumList::<E>")]`.
pub struct EnumList<E>(PhantomData<E>);

struct EnumVisitor<E>(PhantomData<E>);

impl<E: ProtoEnum> Visitor<'_> for EnumVisitor<E> {
    type Value = i32;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = E::VALUES.iter().map(|(_, _, s)| *s).collect();
        write!(f, "one of {}", names.join(", "))
    }
    fn visit_str<Er: de::Error>(self, v: &str) -> Result<i32, Er> {
        E::number_of(v).ok_or_else(|| {
            let names: Vec<&str> = E::VALUES.iter().map(|(_, _, s)| *s).collect();
            Er::custom(format!("unknown value \"{v}\", expected one of {}", names.join(", ")))
        })
    }
    fn visit_i64<Er: de::Error>(self, v: i64) -> Result<i32, Er> {
        i32::try_from(v).map_err(|_| Er::custom(format!("enum number {v} is out of range")))
    }
    fn visit_u64<Er: de::Error>(self, v: u64) -> Result<i32, Er> {
        i32::try_from(v).map_err(|_| Er::custom(format!("enum number {v} is out of range")))
    }
}

impl<E: ProtoEnum> Enum<E> {
    /// Writes the enum name.
    pub fn serialize<S: Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
        match E::name_of(*v) {
            Some(name) => s.serialize_str(name),
            None => s.serialize_i32(*v),
        }
    }

    /// Reads an enum name or number.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
        d.deserialize_any(EnumVisitor::<E>(PhantomData))
    }
}

struct EnumSeed<E>(PhantomData<E>);

impl<'de, E: ProtoEnum> de::DeserializeSeed<'de> for EnumSeed<E> {
    type Value = i32;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<i32, D::Error> {
        Enum::<E>::deserialize(d)
    }
}

struct EnumRef<'a, E>(&'a i32, PhantomData<E>);

impl<E: ProtoEnum> Serialize for EnumRef<'_, E> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Enum::<E>::serialize(self.0, s)
    }
}

impl<E: ProtoEnum> OptEnum<E> {
    /// Writes the enum name (or null).
    pub fn serialize<S: Serializer>(v: &Option<i32>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_some(&EnumRef::<E>(v, PhantomData)),
            None => s.serialize_none(),
        }
    }

    /// Reads an enum name or number (null reads as unset).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
        struct V<E>(PhantomData<E>);
        impl<'de, E: ProtoEnum> Visitor<'de> for V<E> {
            type Value = Option<i32>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an enum name")
            }
            fn visit_none<Er: de::Error>(self) -> Result<Option<i32>, Er> {
                Ok(None)
            }
            fn visit_unit<Er: de::Error>(self) -> Result<Option<i32>, Er> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<i32>, D::Error> {
                Enum::<E>::deserialize(d).map(Some)
            }
        }
        d.deserialize_option(V::<E>(PhantomData))
    }
}

impl<E: ProtoEnum> EnumList<E> {
    /// Writes a list of enum names.
    pub fn serialize<S: Serializer>(v: &[i32], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for item in v {
            seq.serialize_element(&EnumRef::<E>(item, PhantomData))?;
        }
        seq.end()
    }

    /// Reads a list of enum names or numbers.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<i32>, D::Error> {
        struct V<E>(PhantomData<E>);
        impl<'de, E: ProtoEnum> Visitor<'de> for V<E> {
            type Value = Vec<i32>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of enum names")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<i32>, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element_seed(EnumSeed::<E>(PhantomData))? {
                    out.push(v);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V::<E>(PhantomData))
    }
}

// ===== bytes =====

/// Serde helpers for protobuf `bytes` fields (`Vec<u8>`), JSON standard base64:
/// `#[serde(with = "Base64")]`; for a `bytes` member of a oneof (`Option<Vec<u8>>`), [`OptBase64`].
pub struct Base64;

/// Serde helpers for an `Option<Vec<u8>>` bytes field: `#[serde(with = "OptBase64")]`.
pub struct OptBase64;

impl Base64 {
    /// Writes base64.
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine as _;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }

    /// Reads standard or URL-safe base64, with or without padding.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        decode_base64(&text).map_err(de::Error::custom)
    }
}

impl OptBase64 {
    /// Writes base64 (or null).
    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine as _;
        match v {
            Some(v) => s.serialize_some(&base64::engine::general_purpose::STANDARD.encode(v)),
            None => s.serialize_none(),
        }
    }

    /// Reads base64 (null reads as unset).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| decode_base64(&t).map_err(de::Error::custom)).transpose()
    }
}

fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
        .ok_or_else(|| format!("invalid base64 \"{text}\""))
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn duration_text_round_trips() {
        for (text, secs, nanos, out) in [
            ("1.5s", 1, 500_000_000, "1.500s"),
            ("10s", 10, 0, "10s"),
            ("0.001s", 0, 1_000_000, "0.001s"),
            (".5s", 0, 500_000_000, "0.500s"),
            ("-2.000000001s", -2, -1, "-2.000000001s"),
            ("0.000002s", 0, 2_000, "0.000002s"),
            ("100ms", 0, 100_000_000, "0.100s"),
            ("1m", 60, 0, "60s"),
            ("1h30m", 5400, 0, "5400s"),
            ("1.5h", 5400, 0, "5400s"),
            ("0", 0, 0, "0s"),
            ("8ms", 0, 8_000_000, "0.008s"),
            ("2us", 0, 2_000, "0.000002s"),
            ("-1m1s", -61, 0, "-61s"),
        ] {
            let d = Duration::parse(text).unwrap();
            assert_eq!((d.seconds, d.nanos), (secs, nanos), "{text}");
            assert_eq!(d.to_string(), out);
        }
        for bad in [
            "1.5",
            "1x",
            "s",
            "abc",
            "",
            "1e3s",
            "315576000001s",
            "-",
            ".s",
            "1s2",
            "99999999999999999999999h",
        ] {
            assert!(Duration::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn duration_protobuf_uses_fields_1_and_2() {
        let d = Duration { seconds: 1, nanos: 5 };
        assert_eq!(d.encode_to_vec(), vec![0x08, 1, 0x10, 5]);
    }

    #[test]
    fn value_round_trips_json_and_protobuf() {
        let json = serde_json::json!({"a": [1, "x", null, true, {"b": 2.5}], "c": {}});
        let v = Value::from_json(&json);
        assert_eq!(v.to_json(), json);
        let back = Value::decode(v.encode_to_vec().as_slice()).unwrap();
        assert_eq!(back, v);
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
    }

    crate::proto_enum! {
        /// Test enum.
        enum Color {
            /// Zero.
            Unset = 0 => "UNSET",
            /// Red.
            Red = 2 => "RED",
        }
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug, Default)]
    struct Holder {
        #[serde(with = "Color", default)]
        c: i32,
        #[serde(with = "OptEnum::<Color>", default)]
        o: Option<i32>,
        #[serde(with = "EnumList::<Color>", default)]
        l: Vec<i32>,
        #[serde(with = "Base64", default)]
        b: Vec<u8>,
    }

    #[test]
    fn enums_read_names_and_numbers() {
        let h: Holder = serde_json::from_str(r#"{"c":"RED","o":2,"l":["RED","UNSET"],"b":"aGk="}"#).unwrap();
        assert_eq!(h, Holder { c: 2, o: Some(2), l: vec![2, 0], b: b"hi".to_vec() });
        assert_eq!(Color::Red.as_str_name(), "RED");
        assert_eq!(
            serde_json::to_value(&h).unwrap(),
            serde_json::json!({"c":"RED","o":"RED","l":["RED","UNSET"],"b":"aGk="})
        );
        let err = serde_json::from_str::<Holder>(r#"{"c":"BLUE"}"#).unwrap_err().to_string();
        assert!(err.contains("unknown value \"BLUE\", expected one of UNSET, RED"), "{err}");
    }
}
