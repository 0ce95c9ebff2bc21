//! The injection templates' engine: Go's `text/template` (the `gtmpl-ng` crate: parser, executor,
//! Go's builtins, render limits) with the functions istiod registers for injection templates
//! (`pkg/kube/inject/template.go`, `InjectionFuncmap`, registered after sprig's so Istio's win) and
//! the sprig functions Istio's charts and common custom templates use.
//!
//! Where the engine alone differs from Go and we shim it (each shim is a function of this module):
//! - `eq` / `ne`: a missing map entry (`<no value>`) compares equal to the other operand's zero value,
//!   as Go's `map[string]string` gives `""` for a missing key (`eq (index .ObjectMeta.Annotations
//!   "x") ""` is true in istiod).
//! - Go methods on protobuf messages (`.ProxyConfig.GetTracing`, `.HoldApplicationUntilProxyStarts.
//!   GetValue`, `.InterceptionMode.String`) are fields of the template's view ([`crate::view`]), not
//!   functions.
//! - `protoToJSON` and `structToJSON` read the JSON a view keeps beside its Go-named fields.
//!
//! Not provided (a template calling one fails to parse, naming it): sprig's crypto, date, regex,
//! network and random functions, which no Istio injection template uses.

use std::collections::BTreeMap;

use gtmpl_ng::{Context, Func, FuncError, Limits, Number, Template, Value};

use validation::common::go_quote;

use crate::view;

/// A parse or render failure of one named template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template {template:?}: {message}")]
pub struct TemplateError {
    /// The template's name in the injector config (`sidecar`, `gateway`, …).
    pub template: String,
    /// Why, as the engine says it (line and column for a parse error).
    pub message: String,
}

/// The parsed templates of an injector config, by name (istiod's `Templates`).
pub struct Templates {
    by_name: BTreeMap<String, Template>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates").field("names", &self.by_name.keys().collect::<Vec<_>>()).finish()
    }
}

/// How much one render may do: generous for the chart's templates (≈ 600 lines, a few hundred
/// loop iterations), bounded against a hostile custom template (the engine's defaults, plus a time
/// limit of 5 s per render).
fn limits() -> Limits {
    Limits::default().with_deadline(std::time::Duration::from_secs(5))
}

impl Templates {
    /// Parses every template of `raw` (name → Go template text), as istiod's `ParseTemplates`.
    ///
    /// # Errors
    /// The first template that does not parse (unknown function, syntax), naming it.
    pub fn parse(raw: &BTreeMap<String, String>) -> Result<Templates, TemplateError> {
        let mut by_name = BTreeMap::new();
        for (name, text) in raw {
            let mut template = Template::with_limits(limits());
            template.name = "inject".to_string();
            template.add_funcs(FUNCS);
            template
                .parse(enum_string_calls(text))
                .map_err(|e| TemplateError { template: name.clone(), message: e.to_string() })?;
            by_name.insert(name.clone(), template);
        }
        Ok(Templates { by_name })
    }

    /// The template names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Whether a template of this name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Renders template `name` over `data` (the view of istiod's `SidecarTemplateData`).
    ///
    /// # Errors
    /// No such template, or the render failed (a function's error, a limit reached).
    pub fn render(&self, name: &str, data: Value) -> Result<String, TemplateError> {
        let template = self.by_name.get(name).ok_or_else(|| TemplateError {
            template: name.to_string(),
            message: "no such template".to_string(),
        })?;
        template
            .render(&Context::from(data))
            .map_err(|e| TemplateError { template: name.to_string(), message: e.to_string() })
    }
}

/// Every function the templates may call beyond Go's builtins (those are the engine's), and the
/// builtins we replace (`eq`, `ne`).
pub const FUNCS: &[(&str, Func)] = &[
    // Go builtins with map-zero-value semantics.
    ("eq", eq as Func),
    ("ne", ne as Func),
    ("index", index as Func),
    // istiod's InjectionFuncmap.
    ("formatDuration", format_duration as Func),
    ("isset", isset as Func),
    ("excludeInboundPort", exclude_inbound_port as Func),
    ("includeInboundPorts", include_inbound_ports as Func),
    ("kubevirtInterfaces", identity_string as Func),
    ("excludeInterfaces", identity_string as Func),
    ("applicationPorts", application_ports as Func),
    ("annotation", annotation as Func),
    ("valueOrDefault", value_or_default as Func),
    ("toJSON", to_json_string_map as Func),
    ("fromJSON", from_json as Func),
    ("structToJSON", struct_to_json as Func),
    ("protoToJSON", proto_to_json as Func),
    ("toYaml", to_yaml as Func),
    ("indent", istio_indent as Func),
    ("directory", directory as Func),
    ("contains", flipped_contains as Func),
    ("toLower", to_lower as Func),
    ("appendMultusNetwork", append_multus_network as Func),
    ("env", env as Func),
    ("omit", omit as Func),
    ("strdict", strdict as Func),
    ("toJsonMap", to_json_map as Func),
    ("mergeMaps", merge_maps_fn as Func),
    ("omitNil", omit_nil as Func),
    ("otelResourceAttributes", otel_resource_attributes as Func),
    // sprig (masterminds/sprig v3): the subset templates use.
    ("default", sprig_default as Func),
    ("empty", sprig_empty as Func),
    ("coalesce", coalesce as Func),
    ("ternary", ternary as Func),
    ("quote", quote as Func),
    ("squote", squote as Func),
    ("nindent", nindent as Func),
    ("trim", trim as Func),
    ("trimAll", trim_all as Func),
    ("trimPrefix", trim_prefix as Func),
    ("trimSuffix", trim_suffix as Func),
    ("lower", to_lower as Func),
    ("upper", to_upper as Func),
    ("replace", replace as Func),
    ("hasPrefix", has_prefix as Func),
    ("hasSuffix", has_suffix as Func),
    ("trunc", trunc as Func),
    ("join", join as Func),
    ("splitList", split_list as Func),
    ("first", first as Func),
    ("last", last as Func),
    ("list", list as Func),
    ("append", append as Func),
    ("prepend", prepend as Func),
    ("has", has as Func),
    ("dict", dict as Func),
    ("get", get as Func),
    ("set", set as Func),
    ("hasKey", has_key as Func),
    ("keys", keys as Func),
    ("toString", to_string as Func),
    ("toJson", sprig_to_json as Func),
    ("int", to_int as Func),
    ("add", add as Func),
    ("sub", sub as Func),
    ("mul", mul as Func),
    ("max", max as Func),
    ("min", min as Func),
];

/// Go prints an enum through its `String` method, and templates call it (`.ProxyConfig.
/// InterceptionMode.String`); in a view the enum already is its name ([`view::proxy_config`]), so
/// the call is dropped from the template text.
fn enum_string_calls(text: &str) -> String {
    let mut out = text.to_string();
    for (json_name, _) in view::PROTO_ENUM_ZEROS {
        let field = view::capitalize(json_name);
        let call = format!(".{field}.String");
        let mut from = 0;
        while let Some(at) = out[from..].find(&call).map(|i| i + from) {
            let end = at + call.len();
            let next = out[end..].chars().next();
            if next.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                from = end;
                continue;
            }
            out.replace_range(at + field.len() + 1..end, "");
            from = at + field.len() + 1;
        }
    }
    out
}

// ---- helpers -------------------------------------------------------------------------------------

fn generic(message: impl Into<String>) -> FuncError {
    FuncError::Generic(message.into())
}

fn exactly(name: &str, n: usize, args: &[Value]) -> Result<(), FuncError> {
    if args.len() != n { Err(FuncError::ExactlyXArgs(name.to_string(), n)) } else { Ok(()) }
}

fn at_least(name: &str, n: usize, args: &[Value]) -> Result<(), FuncError> {
    if args.len() < n { Err(FuncError::AtLeastXArgs(name.to_string(), n)) } else { Ok(()) }
}

/// Go's `fmt.Sprint` of a value (`<nil>` for nil, the string itself for strings).
fn sprint(value: &Value) -> String {
    match value {
        Value::NoValue => "<no value>".to_string(),
        other => other.to_string(),
    }
}

/// A string argument; absent values read as `""` (Go's zero value in the string-typed functions).
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::NoValue | Value::Nil => String::new(),
        other => other.to_string(),
    }
}

fn int(value: &Value) -> Result<i64, FuncError> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .ok_or_else(|| generic(format!("not an integer: {n}"))),
        Value::String(s) => s.trim().parse().map_err(|_| generic(format!("not an integer: {s:?}"))),
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::NoValue | Value::Nil => Ok(0),
        other => Err(generic(format!("not an integer: {other}"))),
    }
}

fn entries(value: &Value) -> Option<&std::collections::HashMap<String, Value>> {
    match value {
        Value::Map(m) | Value::Object(m) => Some(m),
        _ => None,
    }
}

/// Whether a value is "empty" in sprig's sense: nil, false, 0, `""`, an empty list or map.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::NoValue | Value::Nil => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Map(m) | Value::Object(m) => m.is_empty(),
        Value::Function(_) => false,
    }
}

/// The zero value of `like`'s type (`""`, `0`, `false`), for comparing a missing entry.
fn zero_like(like: &Value) -> Option<Value> {
    match like {
        Value::String(_) => Some(Value::String(String::new())),
        Value::Number(_) => Some(Value::Number(Number::from(0u64))),
        Value::Bool(_) => Some(Value::Bool(false)),
        _ => None,
    }
}

fn same(a: &Value, b: &Value) -> bool {
    let absent = |v: &Value| matches!(v, Value::NoValue);
    match (a, b) {
        (x, y) if absent(x) && !absent(y) => zero_like(y).is_some_and(|z| &z == y),
        (x, y) if absent(y) && !absent(x) => zero_like(x).is_some_and(|z| &z == x),
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    entries(value).map(|m| m.iter().map(|(k, v)| (k.clone(), text(v))).collect()).unwrap_or_default()
}

fn string_map_value(map: BTreeMap<String, String>) -> Value {
    Value::Map(map.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

// ---- Go builtins we replace ----------------------------------------------------------------------

fn eq(args: &[Value]) -> Result<Value, FuncError> {
    at_least("eq", 2, args)?;
    Ok(Value::Bool(args[1..].iter().any(|other| same(&args[0], other))))
}

fn ne(args: &[Value]) -> Result<Value, FuncError> {
    exactly("ne", 2, args)?;
    Ok(Value::Bool(!same(&args[0], &args[1])))
}

/// Go's `index`, except that indexing a missing value gives `<no value>` instead of failing: in
/// istiod the value is a typed nil map (`.ProxyConfig.ProxyMetadata` unset), which indexes to the
/// zero value.
fn index(args: &[Value]) -> Result<Value, FuncError> {
    at_least("index", 1, args)?;
    if matches!(args[0], Value::NoValue | Value::Nil) && args.len() > 1 {
        return Ok(Value::NoValue);
    }
    gtmpl_ng::funcs::index(args)
}

// ---- istiod's InjectionFuncmap -------------------------------------------------------------------

/// `formatDuration`: a protobuf duration (JSON `"90s"`) as Go's `time.Duration.String` (`1m30s`).
fn format_duration(args: &[Value]) -> Result<Value, FuncError> {
    exactly("formatDuration", 1, args)?;
    let raw = text(&args[0]);
    let seconds: f64 = raw.trim_end_matches('s').parse().unwrap_or(0.0);
    Ok(Value::String(go_duration(seconds)))
}

/// Go's `time.Duration.String` for a whole or fractional number of seconds.
pub fn go_duration(seconds: f64) -> String {
    if seconds == 0.0 {
        return "0s".to_string();
    }
    let negative = seconds < 0.0;
    let total = seconds.abs();
    let hours = (total / 3600.0).floor();
    let minutes = ((total - hours * 3600.0) / 60.0).floor();
    let secs = total - hours * 3600.0 - minutes * 60.0;
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if total < 1.0 {
        let ms = total * 1000.0;
        out.push_str(&format!("{}ms", trim_float(ms)));
        return out;
    }
    if hours > 0.0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0.0 || minutes > 0.0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{}s", trim_float(secs)));
    out
}

fn trim_float(f: f64) -> String {
    let s = format!("{f:.9}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn isset(args: &[Value]) -> Result<Value, FuncError> {
    exactly("isset", 2, args)?;
    let key = text(&args[1]);
    Ok(Value::Bool(entries(&args[0]).is_some_and(|m| m.contains_key(&key))))
}

fn split_ports(ports: &str) -> impl Iterator<Item = &str> {
    ports.split(',')
}

fn exclude_inbound_port(args: &[Value]) -> Result<Value, FuncError> {
    exactly("excludeInboundPort", 2, args)?;
    let port = sprint(&args[0]).trim().to_string();
    let excluded = text(&args[1]);
    if port.is_empty() || port == "0" {
        return Ok(Value::String(excluded));
    }
    let mut out = Vec::new();
    for p in split_ports(&excluded) {
        if p == port {
            return Ok(Value::String(excluded.clone()));
        }
        let p = p.trim();
        if !p.is_empty() {
            out.push(p.to_string());
        }
    }
    out.push(port);
    Ok(Value::String(out.join(",")))
}

/// The TCP ports (not UDP or SCTP) of `containers` (a view's `.Spec.Containers`), comma-separated.
fn container_ports(containers: &Value, skip_proxy: bool) -> String {
    let mut parts = Vec::new();
    if let Value::Array(list) = containers {
        for container in list {
            let Some(c) = entries(container) else { continue };
            if skip_proxy && c.get("Name").map(text).as_deref() == Some("istio-proxy") {
                continue;
            }
            if let Some(Value::Array(ports)) = c.get("Ports") {
                for port in ports {
                    let Some(p) = entries(port) else { continue };
                    let protocol = p.get("Protocol").map(text).unwrap_or_default();
                    if protocol == "UDP" || protocol == "SCTP" {
                        continue;
                    }
                    parts.push(p.get("ContainerPort").map(sprint).unwrap_or_else(|| "0".into()));
                }
            }
        }
    }
    parts.join(",")
}

fn include_inbound_ports(args: &[Value]) -> Result<Value, FuncError> {
    exactly("includeInboundPorts", 1, args)?;
    Ok(Value::String(container_ports(&args[0], false)))
}

fn application_ports(args: &[Value]) -> Result<Value, FuncError> {
    exactly("applicationPorts", 1, args)?;
    Ok(Value::String(container_ports(&args[0], true)))
}

fn identity_string(args: &[Value]) -> Result<Value, FuncError> {
    exactly("kubevirtInterfaces", 1, args)?;
    Ok(Value::String(text(&args[0])))
}

/// `annotation META NAME DEFAULT`: the annotation's value, else `fmt.Sprint(DEFAULT)`.
fn annotation(args: &[Value]) -> Result<Value, FuncError> {
    exactly("annotation", 3, args)?;
    let name = text(&args[1]);
    let found = entries(&args[0])
        .and_then(|meta| meta.get("Annotations"))
        .and_then(entries)
        .and_then(|a| a.get(&name));
    Ok(Value::String(match found {
        Some(v) => text(v),
        None => match &args[2] {
            Value::NoValue => "<nil>".to_string(),
            other => sprint(other),
        },
    }))
}

fn value_or_default(args: &[Value]) -> Result<Value, FuncError> {
    exactly("valueOrDefault", 2, args)?;
    Ok(match &args[0] {
        Value::NoValue | Value::Nil => args[1].clone(),
        Value::String(s) if s.is_empty() => args[1].clone(),
        other => other.clone(),
    })
}

/// `toJSON` of a `map[string]string` (`{}` for nil), keys sorted as Go's encoder sorts them.
fn to_json_string_map(args: &[Value]) -> Result<Value, FuncError> {
    exactly("toJSON", 1, args)?;
    Ok(Value::String(serde_json::to_string(&string_map(&args[0])).unwrap_or_else(|_| "{}".into())))
}

/// `fromJSON`: the JSON text as a value (Go's numbers are float64); invalid JSON gives the string
/// `"{}"`, as istiod (which logs a warning).
fn from_json(args: &[Value]) -> Result<Value, FuncError> {
    exactly("fromJSON", 1, args)?;
    Ok(match serde_json::from_str::<serde_json::Value>(&text(&args[0])) {
        Ok(json) => view::plain(&json),
        Err(_) => {
            tracing::warn!(value = %text(&args[0]), "fromJSON: not JSON");
            Value::String("{}".into())
        }
    })
}

fn struct_to_json(args: &[Value]) -> Result<Value, FuncError> {
    exactly("structToJSON", 1, args)?;
    Ok(Value::String(match &args[0] {
        Value::NoValue | Value::Nil => "{}".to_string(),
        other => serde_json::to_string(&view::to_json(other)).unwrap_or_else(|_| "{}".into()),
    }))
}

fn proto_to_json(args: &[Value]) -> Result<Value, FuncError> {
    exactly("protoToJSON", 1, args)?;
    Ok(Value::String(view::proto_json_of(&args[0]).unwrap_or_else(|| "{}".to_string())))
}

fn to_yaml(args: &[Value]) -> Result<Value, FuncError> {
    exactly("toYaml", 1, args)?;
    Ok(Value::String(view::yaml_text(&view::to_json(&args[0]))))
}

/// Istio's `indent N TEXT`: every line but the first gets N spaces (sprig's indents the first too).
fn istio_indent(args: &[Value]) -> Result<Value, FuncError> {
    exactly("indent", 2, args)?;
    let spaces = usize::try_from(int(&args[0])?).unwrap_or(0).min(1024);
    let pad = " ".repeat(spaces);
    let source = text(&args[1]);
    let mut out = String::with_capacity(source.len());
    for (i, line) in source.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(&pad);
        }
        out.push_str(line);
    }
    Ok(Value::String(out))
}

/// sprig's `nindent N TEXT`: a newline, then every line indented by N.
fn nindent(args: &[Value]) -> Result<Value, FuncError> {
    exactly("nindent", 2, args)?;
    let spaces = usize::try_from(int(&args[0])?).unwrap_or(0).min(1024);
    let pad = " ".repeat(spaces);
    let source = text(&args[1]);
    let lines: Vec<String> = source.split('\n').map(|l| format!("{pad}{l}")).collect();
    Ok(Value::String(format!("\n{}", lines.join("\n"))))
}

fn directory(args: &[Value]) -> Result<Value, FuncError> {
    exactly("directory", 1, args)?;
    let path = text(&args[0]);
    Ok(Value::String(match path.rfind('/') {
        Some(i) => path[..=i].to_string(),
        None => String::new(),
    }))
}

/// Istio's `contains NEEDLE HAYSTACK` (sprig's takes the haystack second too, but Istio's template
/// calls `contains "/" .Values.image`... both read NEEDLE first).
fn flipped_contains(args: &[Value]) -> Result<Value, FuncError> {
    exactly("contains", 2, args)?;
    Ok(Value::Bool(text(&args[1]).contains(&text(&args[0]))))
}

fn to_lower(args: &[Value]) -> Result<Value, FuncError> {
    exactly("toLower", 1, args)?;
    Ok(Value::String(text(&args[0]).to_lowercase()))
}

fn to_upper(args: &[Value]) -> Result<Value, FuncError> {
    exactly("upper", 1, args)?;
    Ok(Value::String(text(&args[0]).to_uppercase()))
}

/// `appendMultusNetwork EXISTING NETWORK`: adds the Istio CNI network to a Multus networks
/// annotation (a comma list or a JSON array), unless already there.
fn append_multus_network(args: &[Value]) -> Result<Value, FuncError> {
    exactly("appendMultusNetwork", 2, args)?;
    let existing = text(&args[0]);
    let network = text(&args[1]);
    if existing.is_empty() {
        return Ok(Value::String(network));
    }
    if let Some(i) = existing.rfind(']') {
        let Ok(list) = serde_json::from_str::<Vec<serde_json::Map<String, serde_json::Value>>>(&existing)
        else {
            return Ok(Value::String(existing));
        };
        let (ns, name) = match network.split_once('/') {
            Some((ns, name)) => (ns.to_string(), name.to_string()),
            None => (String::new(), network.clone()),
        };
        let present = list.iter().any(|n| {
            n.get("name").and_then(|v| v.as_str()) == Some(name.as_str())
                && n.get("namespace").and_then(|v| v.as_str()).unwrap_or("") == ns
        });
        if present {
            return Ok(Value::String(existing));
        }
        let entry = if ns.is_empty() {
            format!(r#", {{"name": "{name}"}}"#)
        } else {
            format!(r#", {{"name": "{name}", "namespace": "{ns}"}}"#)
        };
        return Ok(Value::String(format!("{}{}{}", &existing[..i], entry, &existing[i..])));
    }
    if existing.split(',').any(|n| n.trim() == network) {
        return Ok(Value::String(existing));
    }
    Ok(Value::String(format!("{existing}, {network}")))
}

/// `env NAME DEFAULT`: the control plane's environment variable, else DEFAULT.
fn env(args: &[Value]) -> Result<Value, FuncError> {
    exactly("env", 2, args)?;
    Ok(Value::String(
        std::env::var(text(&args[0])).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| text(&args[1])),
    ))
}

fn omit(args: &[Value]) -> Result<Value, FuncError> {
    at_least("omit", 1, args)?;
    let mut map = string_map(&args[0]);
    for key in &args[1..] {
        map.remove(&text(key));
    }
    Ok(string_map_value(map))
}

fn strdict(args: &[Value]) -> Result<Value, FuncError> {
    let mut map = BTreeMap::new();
    for pair in args.chunks(2) {
        map.insert(text(&pair[0]), pair.get(1).map(text).unwrap_or_default());
    }
    Ok(string_map_value(map))
}

fn merge_maps(args: &[Value]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for m in args {
        out.extend(string_map(m));
    }
    out
}

fn merge_maps_fn(args: &[Value]) -> Result<Value, FuncError> {
    if args.is_empty() {
        return Ok(Value::Nil);
    }
    Ok(string_map_value(merge_maps(args)))
}

fn to_json_map(args: &[Value]) -> Result<Value, FuncError> {
    if args.is_empty() {
        return Ok(Value::String("null".into()));
    }
    Ok(Value::String(serde_json::to_string(&merge_maps(args)).unwrap_or_default()))
}

fn omit_nil(args: &[Value]) -> Result<Value, FuncError> {
    exactly("omitNil", 1, args)?;
    Ok(omit_nil_value(&args[0]).unwrap_or(Value::Nil))
}

/// Removes nil entries recursively; a map or list left empty by that becomes nil itself.
fn omit_nil_value(value: &Value) -> Option<Value> {
    match value {
        Value::Nil | Value::NoValue => None,
        Value::Map(m) | Value::Object(m) => {
            if !m.values().any(has_nil) {
                return Some(value.clone());
            }
            let out: std::collections::HashMap<String, Value> =
                m.iter().filter_map(|(k, v)| omit_nil_value(v).map(|v| (k.clone(), v))).collect();
            (!out.is_empty()).then_some(Value::Map(out))
        }
        Value::Array(a) => {
            if !a.iter().any(has_nil) {
                return Some(value.clone());
            }
            let out: Vec<Value> = a.iter().filter_map(omit_nil_value).collect();
            (!out.is_empty()).then_some(Value::Array(out))
        }
        other => Some(other.clone()),
    }
}

fn has_nil(value: &Value) -> bool {
    match value {
        Value::Nil | Value::NoValue => true,
        Value::Map(m) | Value::Object(m) => m.values().any(has_nil),
        Value::Array(a) => a.iter().any(has_nil),
        _ => false,
    }
}

/// `otelResourceAttributes MESH ANNOTATIONS LABELS NAMESPACE CONTAINERS`: `OTEL_RESOURCE_ATTRIBUTES`
/// when an OpenTelemetry provider of the mesh asks for `OTEL_SEMANTIC_CONVENTIONS`, else `""`.
fn otel_resource_attributes(args: &[Value]) -> Result<Value, FuncError> {
    exactly("otelResourceAttributes", 5, args)?;
    let mesh: serde_json::Value =
        view::proto_json_of(&args[0]).and_then(|j| serde_json::from_str(&j).ok()).unwrap_or_default();
    let enriched = mesh["extensionProviders"].as_array().is_some_and(|providers| {
        providers.iter().any(|p| {
            p["opentelemetry"]["serviceAttributeEnrichment"].as_str() == Some("OTEL_SEMANTIC_CONVENTIONS")
        })
    });
    if !enriched {
        return Ok(Value::String(String::new()));
    }
    let annotations = string_map(&args[1]);
    let labels = string_map(&args[2]);
    let namespace = text(&args[3]);
    let containers: Vec<&std::collections::HashMap<String, Value>> = match &args[4] {
        Value::Array(list) => list.iter().filter_map(entries).collect(),
        _ => Vec::new(),
    };
    let non_empty = |m: &BTreeMap<String, String>, k: &str| m.get(k).filter(|v| !v.is_empty()).cloned();
    let mut attrs = Vec::new();
    if let Some(v) = non_empty(&annotations, "resource.opentelemetry.io/service.namespace") {
        attrs.push(format!("service.namespace={v}"));
    } else if !namespace.is_empty() {
        attrs.push(format!("service.namespace={namespace}"));
    }
    if let Some(v) = non_empty(&annotations, "resource.opentelemetry.io/service.version")
        .or_else(|| non_empty(&labels, "app.kubernetes.io/version"))
    {
        attrs.push(format!("service.version={v}"));
    } else if containers.len() == 1 {
        let image = containers[0].get("Image").map(text).unwrap_or_default();
        let (tag, digest) = image_tag_digest(&image);
        let version = match (tag.is_empty(), digest.is_empty()) {
            (false, false) => format!("{tag}@{digest}"),
            (true, false) => digest,
            (false, true) => tag,
            (true, true) => String::new(),
        };
        if !version.is_empty() {
            attrs.push(format!("service.version={version}"));
        }
    }
    if let Some(v) = non_empty(&annotations, "resource.opentelemetry.io/service.instance.id") {
        attrs.push(format!("service.instance.id={v}"));
    } else if let Some(first) = containers.first() {
        let name = first.get("Name").map(text).unwrap_or_default();
        attrs.push(format!("service.instance.id={namespace}.$(POD_NAME).{name}"));
    }
    Ok(Value::String(attrs.join(",")))
}

/// The tag and digest of an image reference `[registry[:port]/]name[:tag][@digest]`.
fn image_tag_digest(image: &str) -> (String, String) {
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, digest.to_string()),
        None => (image, String::new()),
    };
    let slash = rest.rfind('/').map_or(-1, |i| i as i64);
    let tag = match rest.rfind(':') {
        Some(colon) if colon as i64 > slash => rest[colon + 1..].to_string(),
        _ => String::new(),
    };
    (tag, digest)
}

// ---- sprig ---------------------------------------------------------------------------------------

/// sprig's `default DEFAULT GIVEN`: GIVEN unless it is empty (or missing).
fn sprig_default(args: &[Value]) -> Result<Value, FuncError> {
    at_least("default", 1, args)?;
    Ok(match args.get(1) {
        Some(given) if !is_empty(given) => given.clone(),
        _ => args[0].clone(),
    })
}

fn sprig_empty(args: &[Value]) -> Result<Value, FuncError> {
    exactly("empty", 1, args)?;
    Ok(Value::Bool(is_empty(&args[0])))
}

fn coalesce(args: &[Value]) -> Result<Value, FuncError> {
    Ok(args.iter().find(|v| !is_empty(v)).cloned().unwrap_or(Value::Nil))
}

fn ternary(args: &[Value]) -> Result<Value, FuncError> {
    exactly("ternary", 3, args)?;
    Ok(if matches!(args[2], Value::Bool(true)) { args[0].clone() } else { args[1].clone() })
}

/// sprig's `quote`: each non-nil argument as a Go `%q` string, space-separated.
fn quote(args: &[Value]) -> Result<Value, FuncError> {
    let parts: Vec<String> = args
        .iter()
        .filter(|v| !matches!(v, Value::Nil | Value::NoValue))
        .map(|v| go_quote(&text(v)))
        .collect();
    Ok(Value::String(parts.join(" ")))
}

fn squote(args: &[Value]) -> Result<Value, FuncError> {
    let parts: Vec<String> = args
        .iter()
        .filter(|v| !matches!(v, Value::Nil | Value::NoValue))
        .map(|v| format!("'{}'", text(v)))
        .collect();
    Ok(Value::String(parts.join(" ")))
}

fn trim(args: &[Value]) -> Result<Value, FuncError> {
    exactly("trim", 1, args)?;
    Ok(Value::String(text(&args[0]).trim().to_string()))
}

fn trim_all(args: &[Value]) -> Result<Value, FuncError> {
    exactly("trimAll", 2, args)?;
    let cut: Vec<char> = text(&args[0]).chars().collect();
    Ok(Value::String(text(&args[1]).trim_matches(|c| cut.contains(&c)).to_string()))
}

fn trim_prefix(args: &[Value]) -> Result<Value, FuncError> {
    exactly("trimPrefix", 2, args)?;
    let (prefix, s) = (text(&args[0]), text(&args[1]));
    Ok(Value::String(s.strip_prefix(prefix.as_str()).unwrap_or(&s).to_string()))
}

fn trim_suffix(args: &[Value]) -> Result<Value, FuncError> {
    exactly("trimSuffix", 2, args)?;
    let (suffix, s) = (text(&args[0]), text(&args[1]));
    Ok(Value::String(s.strip_suffix(suffix.as_str()).unwrap_or(&s).to_string()))
}

fn replace(args: &[Value]) -> Result<Value, FuncError> {
    exactly("replace", 3, args)?;
    Ok(Value::String(text(&args[2]).replace(&text(&args[0]), &text(&args[1]))))
}

fn has_prefix(args: &[Value]) -> Result<Value, FuncError> {
    exactly("hasPrefix", 2, args)?;
    Ok(Value::Bool(text(&args[1]).starts_with(&text(&args[0]))))
}

fn has_suffix(args: &[Value]) -> Result<Value, FuncError> {
    exactly("hasSuffix", 2, args)?;
    Ok(Value::Bool(text(&args[1]).ends_with(&text(&args[0]))))
}

/// sprig's `trunc N S`: the first N characters (N < 0: the last -N).
fn trunc(args: &[Value]) -> Result<Value, FuncError> {
    exactly("trunc", 2, args)?;
    let n = int(&args[0])?;
    let s: Vec<char> = text(&args[1]).chars().collect();
    let out: String = if n >= 0 {
        s.iter().take(n as usize).collect()
    } else {
        let keep = (-n) as usize;
        s.iter().skip(s.len().saturating_sub(keep)).collect()
    };
    Ok(Value::String(out))
}

fn join(args: &[Value]) -> Result<Value, FuncError> {
    exactly("join", 2, args)?;
    let sep = text(&args[0]);
    Ok(Value::String(match &args[1] {
        Value::Array(items) => items.iter().map(sprint).collect::<Vec<_>>().join(&sep),
        other => text(other),
    }))
}

fn split_list(args: &[Value]) -> Result<Value, FuncError> {
    exactly("splitList", 2, args)?;
    let sep = text(&args[0]);
    Ok(Value::Array(text(&args[1]).split(sep.as_str()).map(|s| Value::String(s.to_string())).collect()))
}

fn first(args: &[Value]) -> Result<Value, FuncError> {
    exactly("first", 1, args)?;
    Ok(match &args[0] {
        Value::Array(a) => a.first().cloned().unwrap_or(Value::Nil),
        _ => Value::Nil,
    })
}

fn last(args: &[Value]) -> Result<Value, FuncError> {
    exactly("last", 1, args)?;
    Ok(match &args[0] {
        Value::Array(a) => a.last().cloned().unwrap_or(Value::Nil),
        _ => Value::Nil,
    })
}

fn list(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::Array(args.to_vec()))
}

fn append(args: &[Value]) -> Result<Value, FuncError> {
    exactly("append", 2, args)?;
    let mut out = match &args[0] {
        Value::Array(a) => a.clone(),
        Value::Nil | Value::NoValue => Vec::new(),
        other => return Err(generic(format!("cannot append to {other}"))),
    };
    out.push(args[1].clone());
    Ok(Value::Array(out))
}

fn prepend(args: &[Value]) -> Result<Value, FuncError> {
    exactly("prepend", 2, args)?;
    let mut out = vec![args[1].clone()];
    if let Value::Array(a) = &args[0] {
        out.extend(a.iter().cloned());
    }
    Ok(Value::Array(out))
}

fn has(args: &[Value]) -> Result<Value, FuncError> {
    exactly("has", 2, args)?;
    Ok(Value::Bool(matches!(&args[1], Value::Array(a) if a.iter().any(|v| same(v, &args[0])))))
}

fn dict(args: &[Value]) -> Result<Value, FuncError> {
    let mut map = std::collections::HashMap::new();
    for pair in args.chunks(2) {
        map.insert(text(&pair[0]), pair.get(1).cloned().unwrap_or(Value::String(String::new())));
    }
    Ok(Value::Map(map))
}

fn get(args: &[Value]) -> Result<Value, FuncError> {
    exactly("get", 2, args)?;
    Ok(entries(&args[0])
        .and_then(|m| m.get(&text(&args[1])))
        .cloned()
        .unwrap_or(Value::String(String::new())))
}

/// sprig's `set MAP KEY VALUE`: Go maps are references, so `set` changes the map in place; a
/// template value here is a copy, so `set` returns the changed map (what `$_ := set …` discards and
/// what a pipeline would use). Templates that rely on the in-place change of a shared map are not
/// supported.
fn set(args: &[Value]) -> Result<Value, FuncError> {
    exactly("set", 3, args)?;
    let mut map = entries(&args[0]).cloned().unwrap_or_default();
    map.insert(text(&args[1]), args[2].clone());
    Ok(Value::Map(map))
}

fn has_key(args: &[Value]) -> Result<Value, FuncError> {
    exactly("hasKey", 2, args)?;
    Ok(Value::Bool(entries(&args[0]).is_some_and(|m| m.contains_key(&text(&args[1])))))
}

fn keys(args: &[Value]) -> Result<Value, FuncError> {
    let mut out = Vec::new();
    for m in args {
        if let Some(m) = entries(m) {
            out.extend(m.keys().map(|k| Value::String(k.clone())));
        }
    }
    Ok(Value::Array(out))
}

fn to_string(args: &[Value]) -> Result<Value, FuncError> {
    exactly("toString", 1, args)?;
    Ok(Value::String(text(&args[0])))
}

fn sprig_to_json(args: &[Value]) -> Result<Value, FuncError> {
    exactly("toJson", 1, args)?;
    Ok(Value::String(serde_json::to_string(&view::to_json(&args[0])).unwrap_or_default()))
}

fn to_int(args: &[Value]) -> Result<Value, FuncError> {
    exactly("int", 1, args)?;
    Ok(Value::Number(Number::from(int(&args[0]).unwrap_or(0))))
}

fn fold(args: &[Value], name: &str, f: fn(i64, i64) -> i64) -> Result<Value, FuncError> {
    at_least(name, 1, args)?;
    let mut acc = int(&args[0])?;
    for v in &args[1..] {
        acc = f(acc, int(v)?);
    }
    Ok(Value::Number(Number::from(acc)))
}

fn add(args: &[Value]) -> Result<Value, FuncError> {
    fold(args, "add", i64::saturating_add)
}

fn sub(args: &[Value]) -> Result<Value, FuncError> {
    fold(args, "sub", i64::saturating_sub)
}

fn mul(args: &[Value]) -> Result<Value, FuncError> {
    fold(args, "mul", i64::saturating_mul)
}

fn max(args: &[Value]) -> Result<Value, FuncError> {
    fold(args, "max", i64::max)
}

fn min(args: &[Value]) -> Result<Value, FuncError> {
    fold(args, "min", i64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(template: &str, data: serde_json::Value) -> Result<String, TemplateError> {
        let templates = Templates::parse(&BTreeMap::from([("t".to_string(), template.to_string())]))?;
        templates.render("t", view::plain(&data))
    }

    #[test]
    fn a_missing_string_map_entry_equals_the_empty_string_as_in_go() {
        let data = serde_json::json!({"a": {}});
        assert_eq!(render(r#"{{ eq (index .a "x") "" }}"#, data.clone()).unwrap(), "true");
        assert_eq!(render(r#"{{ ne (index .a "x") "" }}"#, data.clone()).unwrap(), "false");
        assert_eq!(render(r#"{{ eq (index .a "x") "y" }}"#, data).unwrap(), "false");
    }

    #[test]
    fn istio_indent_leaves_the_first_line_and_nindent_starts_a_new_one() {
        let data = serde_json::json!({"s": "a\nb"});
        assert_eq!(render("{{ indent 2 .s }}", data.clone()).unwrap(), "a\n  b");
        assert_eq!(render("{{ .s | nindent 2 }}", data).unwrap(), "\n  a\n  b");
    }

    #[test]
    fn contains_takes_the_needle_first() {
        let data = serde_json::json!({"image": "docker.io/x"});
        assert_eq!(render(r#"{{ contains "/" .image }}"#, data.clone()).unwrap(), "true");
        assert_eq!(render(r#"{{ contains ":" .image }}"#, data).unwrap(), "false");
    }

    #[test]
    fn annotation_prints_the_default_with_go_formatting() {
        let data = serde_json::json!({"m": {"Annotations": {"a": "1"}}});
        assert_eq!(render(r#"{{ annotation .m "a" "x" }}"#, data.clone()).unwrap(), "1");
        assert_eq!(render(r#"{{ annotation .m "b" 15020 }}"#, data.clone()).unwrap(), "15020");
        assert_eq!(render(r#"{{ annotation .m "b" true }}"#, data).unwrap(), "true");
    }

    #[test]
    fn exclude_inbound_port_appends_once() {
        let data = serde_json::json!({});
        assert_eq!(render(r#"{{ excludeInboundPort 15020 "" }}"#, data.clone()).unwrap(), "15020");
        assert_eq!(render(r#"{{ excludeInboundPort "15020" "1,15020" }}"#, data.clone()).unwrap(), "1,15020");
        assert_eq!(render(r#"{{ excludeInboundPort 0 "1" }}"#, data.clone()).unwrap(), "1");
        assert_eq!(render(r#"{{ excludeInboundPort 9 " 1, 2" }}"#, data).unwrap(), "1,2,9");
    }

    #[test]
    fn sprig_default_quote_and_lists() {
        let data = serde_json::json!({"e": "", "v": "x", "l": ["a", "b"]});
        assert_eq!(
            render(
                r#"{{ .e | default "d" }} {{ .v | default "d" }} {{ .missing | default 3 }}"#,
                data.clone()
            )
            .unwrap(),
            "d x 3"
        );
        assert_eq!(render(r#"{{ quote "a\"b" }}"#, data.clone()).unwrap(), r#""a\"b""#);
        assert_eq!(
            render(r#"{{ first .l }} {{ last .l }} {{ join "," .l }}"#, data.clone()).unwrap(),
            "a b a,b"
        );
        assert_eq!(render(r#"{{ $l := list }}{{ $l = append $l "z" }}{{ len $l }}"#, data).unwrap(), "1");
    }

    #[test]
    fn multus_networks_are_appended_once_in_both_formats() {
        let data = serde_json::json!({});
        assert_eq!(render(r#"{{ appendMultusNetwork "" "istio-cni" }}"#, data.clone()).unwrap(), "istio-cni");
        assert_eq!(
            render(r#"{{ appendMultusNetwork "a" "istio-cni" }}"#, data.clone()).unwrap(),
            "a, istio-cni"
        );
        assert_eq!(
            render(r#"{{ appendMultusNetwork "a, istio-cni" "istio-cni" }}"#, data.clone()).unwrap(),
            "a, istio-cni"
        );
        assert_eq!(
            render(r#"{{ appendMultusNetwork `[{"name": "a"}]` "kube-system/istio-cni" }}"#, data).unwrap(),
            r#"[{"name": "a"}, {"name": "istio-cni", "namespace": "kube-system"}]"#
        );
    }

    #[test]
    fn an_unknown_function_is_a_parse_error_naming_the_template() {
        let err = render("{{ sha256sum .x }}", serde_json::json!({})).unwrap_err();
        assert_eq!(err.template, "t");
        assert!(err.message.contains("sha256sum"), "{err}");
    }

    #[test]
    fn a_runaway_template_is_stopped_by_the_limits() {
        assert!(render("{{ range 100000000 }}x{{ end }}", serde_json::json!({})).is_err());
    }

    #[test]
    fn enum_string_calls_read_the_enum_name() {
        assert_eq!(
            enum_string_calls("{{ .ProxyConfig.InterceptionMode.String }}"),
            "{{ .ProxyConfig.InterceptionMode }}"
        );
        assert_eq!(
            enum_string_calls("{{ .X.InterceptionMode.Strings }}"),
            "{{ .X.InterceptionMode.Strings }}"
        );
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(90.0), "1m30s");
        assert_eq!(go_duration(5.0), "5s");
        assert_eq!(go_duration(3600.0), "1h0m0s");
        assert_eq!(go_duration(0.5), "500ms");
    }
}
