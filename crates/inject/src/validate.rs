//! The injector's checks of a pod's annotations (istiod's `pkg/kube/inject/validate.go`:
//! `AnnotationValidation` and `validateAnnotations`). istiod's `RunTemplate` runs them first and
//! refuses to inject a pod with an invalid value; [`crate::inject::run_templates`] does the same.
//!
//! Every message is istiod's: `invalid value 'V' for annotation 'NAME': REASON`, several of them
//! joined as `hashicorp/go-multierror` prints a list ([`multierror`]). istiod walks the annotations
//! as a Go map, in random order; here they are reported sorted by annotation name. istiod and
//! istioctl print the list after `failed to run injection template: ` (`injectPod`'s wrapping);
//! [`crate::inject::InjectError::Annotation`] carries the list and displays it with that prefix. [`crate::inject::inject_pod`]
//! checks before it applies `proxy.istio.io/config`, so an annotation that is not a ProxyConfig
//! gets this check's message, as in istiod's webhook (istioctl applies the annotation first and
//! says `could not parse proxy config: …`).
//!
//! `proxy.istio.io/config` (`validateProxyConfig`) is read as YAML over Istio's default proxy config
//! (`mesh.DefaultProxyConfig` + `protomarshal.ApplyYAML`, which retries with unknown fields allowed,
//! so unknown fields pass) and checked as `agent.ValidateMeshConfigProxyConfig` checks it. What is
//! ported: config and binary path set, service cluster or tracing service name, drain duration
//! (≥ 1ms, ms precision, whole seconds), discovery address (set, `host:port`, port in range, host an
//! FQDN or IP), the Lightstep, Zipkin and Datadog collector addresses, statsd, metrics service and
//! access log service addresses, admin and status ports, control plane auth policy. The decoding
//! checks the types of the fields it knows (strings, int32 ports, durations as Go's
//! `time.ParseDuration` reads them, enum names, `proxyMetadata` and `runtimeValues` as string maps).
//!
//! Not ported (a pod with these wrong is injected where istiod refuses it): the tracing TLS settings
//! (`ValidateTLS`), nil tracing custom tags, `privateKeyProvider`, `connectionSettings`, and the type
//! checks of the other ProxyConfig fields (nested messages such as `readinessProbe`, `image`,
//! `proxyHeaders`, wrappers such as `concurrency`). Go's `statNameLength` has no check in
//! `ValidateMeshConfigProxyConfig` either. Warnings (`ISTIO_META_DNS_AUTO_ALLOCATE`) never refuse a
//! pod and are not produced. The texts of YAML and JSON decoding errors are meshpilot's, not
//! `sigs.k8s.io/yaml`'s or `jsonpb`'s.

use serde_json::{Map, Value as Json};
use validation::common::{
    go_quote, is_valid_ip_address, parse_go_bool, parse_go_prefix, validate_fqdn, validate_port,
};

use crate::mesh;

/// A check of one annotation value; the error is the reason in istiod's words.
pub type Check = fn(&str) -> Result<(), String>;

/// The annotations the injector checks, and how (`AnnotationValidation`).
pub const ANNOTATION_VALIDATION: &[(&str, Check)] = &[
    ("sidecar.istio.io/interceptionMode", validate_interception_mode),
    ("status.sidecar.istio.io/port", validate_status_port),
    ("readiness.status.sidecar.istio.io/initialDelaySeconds", validate_uint32),
    ("readiness.status.sidecar.istio.io/periodSeconds", validate_uint32),
    ("readiness.status.sidecar.istio.io/failureThreshold", validate_uint32),
    ("traffic.sidecar.istio.io/includeOutboundIPRanges", validate_include_ip_ranges),
    ("traffic.sidecar.istio.io/excludeOutboundIPRanges", validate_exclude_ip_ranges),
    ("traffic.sidecar.istio.io/includeInboundPorts", validate_include_inbound_ports),
    ("traffic.sidecar.istio.io/excludeInboundPorts", validate_exclude_inbound_ports),
    ("traffic.sidecar.istio.io/excludeOutboundPorts", validate_exclude_outbound_ports),
    ("traffic.sidecar.istio.io/excludeInterfaces", validate_exclude_interfaces),
    ("traffic.sidecar.istio.io/kubevirtInterfaces", validate_exclude_interfaces),
    ("istio.io/reroute-virtual-interfaces", validate_exclude_interfaces),
    ("prometheus.istio.io/merge-metrics", validate_bool),
    ("proxy.istio.io/config", validate_proxy_config),
    ("sidecar.istio.io/proxyCPU", validate_resource_quantity),
    ("sidecar.istio.io/proxyMemory", validate_resource_quantity),
    ("sidecar.istio.io/proxyCPULimit", validate_resource_quantity),
    ("sidecar.istio.io/proxyMemoryLimit", validate_resource_quantity),
];

/// The injector's check of one annotation: `None` for an annotation it does not check.
pub fn validate_annotation(name: &str, value: &str) -> Option<Result<(), String>> {
    ANNOTATION_VALIDATION.iter().find(|(n, _)| *n == name).map(|(_, check)| check(value))
}

/// Checks a pod's annotations (`validateAnnotations`): every invalid one's error, sorted by
/// annotation name, as a [`multierror`]. A value that is not a JSON string is checked as its JSON
/// text.
///
/// # Errors
/// The multierror text istiod refuses the pod with.
pub fn validate_annotations(annotations: &Map<String, Json>) -> Result<(), String> {
    let mut names: Vec<&String> = annotations.keys().collect();
    names.sort();
    let errors: Vec<String> = names
        .into_iter()
        .filter_map(|name| {
            let value = match &annotations[name] {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            };
            match validate_annotation(name, &value) {
                Some(Err(e)) => Some(format!("invalid value '{value}' for annotation '{name}': {e}")),
                _ => None,
            }
        })
        .collect();
    if errors.is_empty() { Ok(()) } else { Err(multierror(&errors)) }
}

/// Several errors as `hashicorp/go-multierror` prints them (`ListFormatFunc`), one included:
/// `"1 error occurred:\n\t* A\n\n"`, `"2 errors occurred:\n\t* A\n\t* B\n\n"`.
pub fn multierror(errors: &[String]) -> String {
    let noun = if errors.len() == 1 { "error" } else { "errors" };
    let points: Vec<String> = errors.iter().map(|e| format!("* {e}")).collect();
    format!("{} {noun} occurred:\n\t{}\n\n", errors.len(), points.join("\n\t"))
}

/// `validateInterceptionMode`: `REDIRECT`, `TPROXY` or `NONE`.
///
/// # Errors
/// `interceptionMode invalid, use REDIRECT,TPROXY,NONE: MODE`.
pub fn validate_interception_mode(mode: &str) -> Result<(), String> {
    match mode {
        "REDIRECT" | "TPROXY" | "NONE" => Ok(()),
        _ => Err(format!("interceptionMode invalid, use REDIRECT,TPROXY,NONE: {mode}")),
    }
}

/// Go's `strconv.ParseUint(value, 10, bits)`, with its error text.
fn parse_uint(value: &str, bits: u32) -> Result<u64, String> {
    let quoted = go_quote(value);
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.ParseUint: parsing {quoted}: invalid syntax"));
    }
    match value.parse::<u64>() {
        Ok(v) if bits >= 64 || v < (1u64 << bits) => Ok(v),
        _ => Err(format!("strconv.ParseUint: parsing {quoted}: value out of range")),
    }
}

/// `validateUInt32`: a decimal unsigned 32-bit integer.
///
/// # Errors
/// `strconv.ParseUint`'s error.
pub fn validate_uint32(value: &str) -> Result<(), String> {
    parse_uint(value, 32).map(drop)
}

/// `parsePort`: a 16-bit unsigned integer, spaces around it allowed.
fn parse_port(port: &str) -> Result<u64, String> {
    parse_uint(port.trim(), 16).map_err(|e| format!("failed parsing port '{port}': {e}"))
}

/// `validatePortList` (`parsePorts`): comma-separated ports, or nothing.
fn validate_port_list(parameter: &str, ports: &str) -> Result<(), String> {
    let ports = ports.trim();
    if ports.is_empty() {
        return Ok(());
    }
    for port in ports.split(',') {
        parse_port(port).map_err(|e| format!("{parameter} invalid: failed parsing port '{port}': {e}"))?;
    }
    Ok(())
}

/// `validateStatusPort`: one port (the message names `excludeInboundPorts`, as istiod's does).
///
/// # Errors
/// `excludeInboundPorts invalid: failed parsing port 'P': …`.
pub fn validate_status_port(port: &str) -> Result<(), String> {
    parse_port(port).map(drop).map_err(|e| format!("excludeInboundPorts invalid: {e}"))
}

/// `ValidateIncludeInboundPorts`: `*` or a port list.
///
/// # Errors
/// `includeInboundPorts invalid: …`.
pub fn validate_include_inbound_ports(ports: &str) -> Result<(), String> {
    if ports == "*" { Ok(()) } else { validate_port_list("includeInboundPorts", ports) }
}

/// `ValidateExcludeInboundPorts`: a port list.
///
/// # Errors
/// `excludeInboundPorts invalid: …`.
pub fn validate_exclude_inbound_ports(ports: &str) -> Result<(), String> {
    validate_port_list("excludeInboundPorts", ports)
}

/// `ValidateExcludeOutboundPorts`: a port list.
///
/// # Errors
/// `excludeOutboundPorts invalid: …`.
pub fn validate_exclude_outbound_ports(ports: &str) -> Result<(), String> {
    validate_port_list("excludeOutboundPorts", ports)
}

/// `validateCIDRList`: comma-separated CIDRs as Go's `netip.ParsePrefix` reads them, or nothing.
fn validate_cidr_list(cidrs: &str) -> Result<(), String> {
    if cidrs.is_empty() {
        return Ok(());
    }
    for cidr in cidrs.split(',') {
        parse_go_prefix(cidr).map_err(|e| format!("failed parsing cidr '{cidr}': {e}"))?;
    }
    Ok(())
}

/// `ValidateIncludeIPRanges`: `*` or a CIDR list.
///
/// # Errors
/// `includeIPRanges invalid: failed parsing cidr 'C': netip.ParsePrefix(…): …`.
pub fn validate_include_ip_ranges(ranges: &str) -> Result<(), String> {
    if ranges == "*" {
        return Ok(());
    }
    validate_cidr_list(ranges).map_err(|e| format!("includeIPRanges invalid: {e}"))
}

/// `ValidateExcludeIPRanges`: a CIDR list (`*` is not one).
///
/// # Errors
/// `excludeIPRanges invalid: failed parsing cidr 'C': netip.ParsePrefix(…): …`.
pub fn validate_exclude_ip_ranges(ranges: &str) -> Result<(), String> {
    validate_cidr_list(ranges).map_err(|e| format!("excludeIPRanges invalid: {e}"))
}

/// `ValidateExcludeInterfaces` (`netutil.ValidateInterfaceNames`): comma-separated interface
/// names, each (trimmed) 1 to 15 bytes of `^[a-zA-Z][a-zA-Z0-9_.\-]*$`; or nothing.
///
/// # Errors
/// `empty interface name`, `interface name "N" too long (max 15 chars)`, `interface name "N"
/// contains invalid characters`.
pub fn validate_exclude_interfaces(interfaces: &str) -> Result<(), String> {
    if interfaces.is_empty() {
        return Ok(());
    }
    for name in interfaces.split(',').map(str::trim) {
        if name.is_empty() {
            return Err("empty interface name".into());
        }
        if name.len() > 15 {
            return Err(format!("interface name {} too long (max 15 chars)", go_quote(name)));
        }
        let mut bytes = name.bytes();
        let first = bytes.next().is_some_and(|b| b.is_ascii_alphabetic());
        if !first || !bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')) {
            return Err(format!("interface name {} contains invalid characters", go_quote(name)));
        }
    }
    Ok(())
}

/// `validateBool`: Go's `strconv.ParseBool`.
///
/// # Errors
/// `strconv.ParseBool: parsing "V": invalid syntax`.
pub fn validate_bool(value: &str) -> Result<(), String> {
    match parse_go_bool(value) {
        Some(_) => Ok(()),
        None => Err(format!("strconv.ParseBool: parsing {}: invalid syntax", go_quote(value))),
    }
}

const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// `validateResourceQuantity`: no control characters, then Kubernetes' `resource.ParseQuantity`.
///
/// # Errors
/// `value contains control characters`, or `ParseQuantity`'s error (the format, the suffix, the
/// numeric part).
pub fn validate_resource_quantity(value: &str) -> Result<(), String> {
    if value.chars().any(char::is_control) {
        return Err("value contains control characters".into());
    }
    parse_quantity(value)
}

/// Kubernetes' `resource.ParseQuantity` (`parseQuantityString`, the suffixer), for its verdict
/// only: a sign, a number with an optional fraction, a suffix (`Ki`…`Ei`, `n`…`E`, `eN`).
fn parse_quantity(s: &str) -> Result<(), String> {
    let wrong = || Err(QUANTITY_FORMAT.to_string());
    if s.is_empty() {
        return wrong();
    }
    let b = s.as_bytes();
    let digits_from = |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut pos = usize::from(matches!(b[0], b'+' | b'-'));
    while pos < b.len() && b[pos] == b'0' {
        pos += 1;
    }
    if pos == b.len() {
        return Ok(()); // zero (or a lone sign, which Go reads as zero)
    }
    let num_end = digits_from(pos);
    let num_len = (num_end - pos).max(1);
    let mut end = num_end;
    let mut denom_len = 0;
    if end < b.len() && b[end] == b'.' {
        let denom_end = digits_from(end + 1);
        denom_len = denom_end - end - 1;
        end = denom_end;
    }
    let value = &s[..end];
    let suffix_start = end;
    let mut i = end;
    while i < b.len() && b"eEinumkKMGTP".contains(&b[i]) {
        i += 1;
    }
    if i < b.len() && matches!(b[i], b'+' | b'-') {
        i += 1;
    }
    if digits_from(i) != b.len() {
        return wrong();
    }
    let suffix = &s[suffix_start..];
    // (binary, exponent)
    let (binary, exponent): (bool, i64) = match suffix {
        "" => (false, 0),
        "n" => (false, -9),
        "u" => (false, -6),
        "m" => (false, -3),
        "k" => (false, 3),
        "M" => (false, 6),
        "G" => (false, 9),
        "T" => (false, 12),
        "P" => (false, 15),
        "E" => (false, 18),
        "Ki" => (true, 10),
        "Mi" => (true, 20),
        "Gi" => (true, 30),
        "Ti" => (true, 40),
        "Pi" => (true, 50),
        "Ei" => (true, 60),
        _ if suffix.len() > 1 && suffix.starts_with(['e', 'E']) => match suffix[1..].parse::<i64>() {
            Ok(e) => (false, e),
            Err(_) => return Err("unable to parse quantity's suffix".into()),
        },
        _ => return Err("unable to parse quantity's suffix".into()),
    };
    let digits = i64::try_from(num_len + denom_len).unwrap_or(i64::MAX);
    let (precision, scale) = if binary {
        if denom_len == 0 { (15 - digits - exponent * 3 / 10 - 1, 0) } else { (-1, 0) }
    } else {
        (18 - digits, exponent)
    };
    let fast = precision >= 0 && scale - i64::try_from(denom_len).unwrap_or(i64::MAX) >= -9;
    // The slow path reads the number part as a decimal: it needs a digit.
    if !fast && !value.bytes().any(|c| c.is_ascii_digit()) {
        return Err("unable to parse numeric part of quantity".into());
    }
    Ok(())
}

/// `validateProxyConfig`: the annotation's YAML applied over Istio's default proxy config, then
/// [`validate_mesh_config_proxy_config`].
///
/// # Errors
/// `failed to convert to apply proxy config: …` (not a YAML object, a field of the wrong type), or
/// the multierror of the proxy config's checks.
pub fn validate_proxy_config(value: &str) -> Result<(), String> {
    let convert = |e: String| format!("failed to convert to apply proxy config: {e}");
    let overlay = crate::yaml::object(value).map_err(|e| convert(e.to_string()))?;
    check_proxy_config_types(&overlay).map_err(convert)?;
    let mut config = mesh::default_proxy_config();
    // `serviceCluster` and `tracingServiceName` are one `oneof`: setting one clears the other.
    if overlay.get("tracingServiceName").is_some()
        && overlay.get("serviceCluster").is_none()
        && let Some(c) = config.as_object_mut()
    {
        c.remove("serviceCluster");
    }
    mesh::merge(&mut config, &overlay);
    validate_mesh_config_proxy_config(&config)
}

const STRING_FIELDS: &[&str] = &[
    "configPath",
    "binaryPath",
    "serviceCluster",
    "discoveryAddress",
    "zipkinAddress",
    "statsdUdpAddress",
    "envoyMetricsServiceAddress",
    "availabilityZone",
    "customConfigFile",
    "proxyBootstrapTemplatePath",
    "meshId",
];
const INT32_FIELDS: &[&str] = &["proxyAdminPort", "statNameLength", "statusPort"];
const DURATION_FIELDS: &[&str] =
    &["drainDuration", "discoveryRefreshDelay", "terminationDrainDuration", "fileFlushInterval"];

/// What `jsonpb` refuses in the fields meshpilot knows the type of (JSON `null` leaves a field
/// unset, as in Go).
fn check_proxy_config_types(overlay: &Json) -> Result<(), String> {
    let Json::Object(fields) = overlay else { return Ok(()) };
    for (name, value) in fields.iter().filter(|(_, v)| !v.is_null()) {
        let bad = |what: &str| Err(format!("field {name}: {what}, got {value}"));
        let name = name.as_str();
        if STRING_FIELDS.contains(&name) && !value.is_string() {
            return bad("expected a string");
        }
        if INT32_FIELDS.contains(&name) && as_i32(value).is_none() {
            return bad("expected a 32-bit integer");
        }
        if DURATION_FIELDS.contains(&name) {
            let Some(text) = value.as_str() else { return bad("expected a duration string") };
            parse_go_duration_nanos(text).map_err(|e| format!("bad Duration: {e}"))?;
        }
        let enum_names: &[&str] = match name {
            "controlPlaneAuthPolicy" => &["NONE", "MUTUAL_TLS"],
            "interceptionMode" => &["REDIRECT", "TPROXY", "NONE"],
            "tracingServiceName" => {
                &["APP_LABEL_AND_NAMESPACE", "CANONICAL_NAME_ONLY", "CANONICAL_NAME_AND_NAMESPACE"]
            }
            _ => &[],
        };
        if !enum_names.is_empty()
            && !value.as_str().is_some_and(|v| enum_names.contains(&v))
            && as_i32(value).is_none()
        {
            return bad(&format!("expected one of {}", enum_names.join(", ")));
        }
        if matches!(name, "proxyMetadata" | "runtimeValues")
            && !value.as_object().is_some_and(|m| m.values().all(Json::is_string))
        {
            return bad("expected a map of strings");
        }
    }
    Ok(())
}

/// An int32 as `jsonpb` reads one: a JSON integer or a quoted one.
fn as_i32(value: &Json) -> Option<i32> {
    match value {
        Json::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        Json::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Go's `time.ParseDuration` (jsonpb reads Durations with it), in nanoseconds, negative allowed:
/// the syntax is [`api::wkt::Duration::parse`]'s, the range Go's (an `int64` of nanoseconds). Every
/// refusal is `time: invalid duration "…"` (Go says `missing unit` or `unknown unit` for some).
fn parse_go_duration_nanos(text: &str) -> Result<i128, String> {
    api::wkt::Duration::parse(text)
        .ok()
        .map(|d| i128::from(d.seconds) * 1_000_000_000 + i128::from(d.nanos))
        .filter(|n| (i128::from(i64::MIN)..=i128::from(i64::MAX)).contains(n))
        .ok_or_else(|| format!("time: invalid duration {}", go_quote(text)))
}

/// Go's `strconv.Atoi`, with its error text.
fn go_atoi(text: &str) -> Result<i64, String> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {}: invalid syntax", go_quote(text)));
    }
    text.parse().map_err(|_| format!("strconv.Atoi: parsing {}: value out of range", go_quote(text)))
}

/// Go's `net.SplitHostPort`, with its error text (`address A: missing port in address`).
fn split_host_port(hostport: &str) -> Result<(&str, &str), String> {
    let fail = |why: &str| {
        Err(if hostport.is_empty() { why.to_string() } else { format!("address {hostport}: {why}") })
    };
    let Some(i) = hostport.rfind(':') else { return fail("missing port in address") };
    let (host, j, k) = if hostport.starts_with('[') {
        let Some(end) = hostport.find(']') else { return fail("missing ']' in address") };
        if end + 1 == hostport.len() {
            return fail("missing port in address");
        }
        if end + 1 != i {
            return if hostport.as_bytes()[end + 1] == b':' {
                fail("too many colons in address")
            } else {
                fail("missing port in address")
            };
        }
        (&hostport[1..end], 1, end + 1)
    } else {
        let host = &hostport[..i];
        if host.contains(':') {
            return fail("too many colons in address");
        }
        (host, 0, 0)
    };
    if hostport[j..].contains('[') {
        return fail("unexpected '[' in address");
    }
    if hostport[k..].contains(']') {
        return fail("unexpected ']' in address");
    }
    Ok((host, &hostport[i + 1..]))
}

/// `agent.ValidateProxyAddress`: `host:port`, the port in range, the host an FQDN or an IP.
fn validate_proxy_address(address: &str) -> Result<(), String> {
    let (host, port) =
        split_host_port(address).map_err(|e| format!("unable to split {}: {e}", go_quote(address)))?;
    let port = go_atoi(port).map_err(|e| format!("port ({port}) is not a number: {e}"))?;
    validate_port(port)?;
    if validate_fqdn(host).is_err() && !is_valid_ip_address(host) {
        return Err(format!("{} is not a valid hostname or an IP address", go_quote(host)));
    }
    Ok(())
}

/// `agent.ValidateDuration` then the drain duration's whole seconds (`ValidateDrainDuration`).
fn validate_drain_duration(nanos: i128) -> Result<(), String> {
    const MS: i128 = 1_000_000;
    if nanos < MS {
        return Err("invalid drain duration: duration must be greater than 1ms".into());
    }
    if nanos % MS != 0 {
        return Err("invalid drain duration: only durations to ms precision are supported".into());
    }
    if nanos % (1000 * MS) != 0 {
        return Err("drain time only supports durations to seconds precision".into());
    }
    Ok(())
}

/// `agent.ValidateMeshConfigProxyConfig` on a proxy config in proto-JSON (the checks listed in the
/// module documentation).
///
/// # Errors
/// The [`multierror`] of every failed check, in Go's order.
pub fn validate_mesh_config_proxy_config(config: &Json) -> Result<(), String> {
    let text = |key: &str| config[key].as_str().unwrap_or_default();
    let mut errs: Vec<String> = Vec::new();
    let mut check = |prefix: &str, result: Result<(), String>| {
        if let Err(e) = result {
            errs.push(if prefix.is_empty() { e } else { format!("{prefix} {e}") });
        }
    };
    if text("configPath").is_empty() {
        check("", Err("config path must be set".into()));
    }
    if text("binaryPath").is_empty() {
        check("", Err("binary path must be set".into()));
    }
    if config.get("serviceCluster").is_some_and(|v| !v.is_null()) {
        if text("serviceCluster").is_empty() {
            check("", Err("service cluster must be specified".into()));
        }
    } else if config.get("tracingServiceName").is_none_or(Json::is_null) {
        check("", Err("oneof service cluster or tracing service name must be specified".into()));
    }
    let drain = config["drainDuration"].as_str().map_or(Ok(0), parse_go_duration_nanos).unwrap_or(0);
    check("", validate_drain_duration(drain));
    let discovery = text("discoveryAddress");
    if discovery.is_empty() {
        check("", Err("discovery address must be set to the proxy discovery service".into()));
    } else {
        check("invalid discovery address:", validate_proxy_address(discovery));
    }
    let tracing = &config["tracing"];
    if let Some(lightstep) = tracing.get("lightstep").filter(|l| l.is_object()) {
        let address = lightstep["address"].as_str().unwrap_or_default();
        if address.is_empty() {
            check("invalid lightstep config:", Err("address is required".into()));
        }
        check(
            "invalid lightstep config:",
            validate_proxy_address(address).map_err(|e| format!("invalid lightstep address: {e}")),
        );
        if lightstep["accessToken"].as_str().unwrap_or_default().is_empty() {
            check("invalid lightstep config:", Err("access token is required".into()));
        }
    }
    for (tracer, prefix) in [("zipkin", "invalid zipkin config:"), ("datadog", "invalid datadog config:")] {
        if let Some(t) = tracing.get(tracer).filter(|t| t.is_object()) {
            let address = t["address"].as_str().unwrap_or_default().replacen("$(HOST_IP)", "127.0.0.1", 1);
            check(prefix, validate_proxy_address(&address));
        }
    }
    for (address, label) in [
        (text("statsdUdpAddress"), "invalid statsd udp address"),
        (text("envoyMetricsServiceAddress"), "invalid envoy metrics service address"),
        (
            config["envoyMetricsService"]["address"].as_str().unwrap_or_default(),
            "invalid envoy metrics service address",
        ),
        (
            config["envoyAccessLogService"]["address"].as_str().unwrap_or_default(),
            "invalid envoy access log service address",
        ),
    ] {
        if !address.is_empty() {
            check(&format!("{label} {}:", go_quote(address)), validate_proxy_address(address));
        }
    }
    let port = |key: &str| as_i32(&config[key]).map_or(0, i64::from);
    check("invalid proxy admin port:", validate_port(port("proxyAdminPort")));
    let policy = &config["controlPlaneAuthPolicy"];
    let policy_ok = match policy {
        Json::Null => true,
        Json::String(s) => {
            matches!(s.as_str(), "NONE" | "MUTUAL_TLS") || matches!(s.parse::<i32>(), Ok(0 | 1))
        }
        other => matches!(as_i32(other), Some(0 | 1)),
    };
    if !policy_ok {
        let shown = policy.as_str().map_or_else(|| policy.to_string(), str::to_string);
        check(
            "invalid authentication policy:",
            Err(format!("unrecognized control plane auth policy {}", go_quote(&shown))),
        );
    }
    check("invalid status port:", validate_port(port("statusPort")));
    if errs.is_empty() { Ok(()) } else { Err(multierror(&errs)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// istiod's text for one invalid annotation.
    fn one(name: &str, value: &str, reason: &str) -> String {
        multierror(&[format!("invalid value '{value}' for annotation '{name}': {reason}")])
    }

    fn annotations(value: Json) -> Map<String, Json> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn multierror_is_go_multierror_list_format() {
        assert_eq!(multierror(&["a".into()]), "1 error occurred:\n\t* a\n\n");
        assert_eq!(multierror(&["a".into(), "b".into()]), "2 errors occurred:\n\t* a\n\t* b\n\n");
    }

    #[test]
    fn interception_mode() {
        for ok in ["REDIRECT", "TPROXY", "NONE"] {
            assert_eq!(validate_interception_mode(ok), Ok(()));
        }
        assert_eq!(
            validate_interception_mode("redirect"),
            Err("interceptionMode invalid, use REDIRECT,TPROXY,NONE: redirect".into())
        );
    }

    #[test]
    fn status_port() {
        assert_eq!(validate_status_port(" 15020 "), Ok(()));
        assert_eq!(
            validate_status_port("70000"),
            Err("excludeInboundPorts invalid: failed parsing port '70000': strconv.ParseUint: parsing \"70000\": value out of range".into())
        );
        assert_eq!(
            validate_status_port(""),
            Err("excludeInboundPorts invalid: failed parsing port '': strconv.ParseUint: parsing \"\": invalid syntax".into())
        );
    }

    #[test]
    fn uint32() {
        assert_eq!(validate_uint32("4294967295"), Ok(()));
        assert_eq!(validate_uint32("-1"), Err("strconv.ParseUint: parsing \"-1\": invalid syntax".into()));
        assert_eq!(
            validate_uint32("4294967296"),
            Err("strconv.ParseUint: parsing \"4294967296\": value out of range".into())
        );
        assert_eq!(validate_uint32("bar"), Err("strconv.ParseUint: parsing \"bar\": invalid syntax".into()));
    }

    #[test]
    fn ip_ranges() {
        assert_eq!(validate_include_ip_ranges("*"), Ok(()));
        assert_eq!(validate_include_ip_ranges(""), Ok(()));
        assert_eq!(validate_include_ip_ranges("10.0.0.0/8,::1/128"), Ok(()));
        assert_eq!(
            validate_include_ip_ranges("10.0.0.0/8, 1.2.3.4/32"),
            Err("includeIPRanges invalid: failed parsing cidr ' 1.2.3.4/32': netip.ParsePrefix(\" 1.2.3.4/32\"): ParseAddr(\" 1.2.3.4\"): unexpected character (at \" 1.2.3.4\")".into())
        );
        assert_eq!(
            validate_exclude_ip_ranges("*"),
            Err("excludeIPRanges invalid: failed parsing cidr '*': netip.ParsePrefix(\"*\"): no '/'".into())
        );
        assert_eq!(
            validate_exclude_ip_ranges("1.2.3/8"),
            Err("excludeIPRanges invalid: failed parsing cidr '1.2.3/8': netip.ParsePrefix(\"1.2.3/8\"): ParseAddr(\"1.2.3\"): IPv4 address too short".into())
        );
        assert_eq!(
            validate_exclude_ip_ranges("::1/129"),
            Err("excludeIPRanges invalid: failed parsing cidr '::1/129': netip.ParsePrefix(\"::1/129\"): prefix length out of range".into())
        );
    }

    #[test]
    fn port_lists() {
        assert_eq!(validate_include_inbound_ports("*"), Ok(()));
        assert_eq!(validate_exclude_outbound_ports(" 80 , 443 "), Ok(()));
        assert_eq!(validate_exclude_inbound_ports(""), Ok(()));
        assert_eq!(
            validate_include_inbound_ports("80,,443"),
            Err("includeInboundPorts invalid: failed parsing port '': failed parsing port '': strconv.ParseUint: parsing \"\": invalid syntax".into())
        );
        assert_eq!(
            validate_exclude_inbound_ports("*"),
            Err("excludeInboundPorts invalid: failed parsing port '*': failed parsing port '*': strconv.ParseUint: parsing \"*\": invalid syntax".into())
        );
        assert_eq!(
            validate_exclude_outbound_ports("bad"),
            Err("excludeOutboundPorts invalid: failed parsing port 'bad': failed parsing port 'bad': strconv.ParseUint: parsing \"bad\": invalid syntax".into())
        );
    }

    #[test]
    fn interfaces() {
        assert_eq!(validate_exclude_interfaces("eth0, veth-1,br.0"), Ok(()));
        assert_eq!(validate_exclude_interfaces(""), Ok(()));
        assert_eq!(validate_exclude_interfaces("eth0, ,eth1"), Err("empty interface name".into()));
        assert_eq!(
            validate_exclude_interfaces("averyveryverylongname"),
            Err("interface name \"averyveryverylongname\" too long (max 15 chars)".into())
        );
        assert_eq!(
            validate_exclude_interfaces("1eth"),
            Err("interface name \"1eth\" contains invalid characters".into())
        );
    }

    #[test]
    fn bools() {
        for ok in ["1", "t", "T", "true", "FALSE", "False"] {
            assert_eq!(validate_bool(ok), Ok(()), "{ok}");
        }
        assert_eq!(validate_bool("yes"), Err("strconv.ParseBool: parsing \"yes\": invalid syntax".into()));
    }

    #[test]
    fn resource_quantities() {
        // Go's verdicts (validate_test.go, and istioctl kube-inject on each value).
        for ok in ["100m", "128Mi", "2", "1Gi", "0", "m", "+", "Ti", "1.5Gi", "1E+3", "1e3", "-1", ".5"] {
            assert_eq!(validate_resource_quantity(ok), Ok(()), "{ok}");
        }
        let format = Err(QUANTITY_FORMAT.to_string());
        for bad in ["", "invalid", "notaquantity", "1.5.5", "lots"] {
            assert_eq!(validate_resource_quantity(bad), format, "{bad:?}");
        }
        let suffix = Err("unable to parse quantity's suffix".to_string());
        for bad in ["1ki", "1e", "1e-"] {
            assert_eq!(validate_resource_quantity(bad), suffix, "{bad}");
        }
        let numeric = Err("unable to parse numeric part of quantity".to_string());
        for bad in ["e-20", "Ei"] {
            assert_eq!(validate_resource_quantity(bad), numeric, "{bad}");
        }
        let control = Err("value contains control characters".to_string());
        for bad in
            ["100m\"\n  - name: injected\n    image: \"busybox", "100m\r", "100m\t", "100m\0", "12\u{85}"]
        {
            assert_eq!(validate_resource_quantity(bad), control, "{bad:?}");
        }
    }

    #[test]
    fn proxy_configs() {
        let one_error = |e: &str| Err(multierror(&[e.to_string()]));
        for ok in [
            "",
            "unknownField: 1\nholdApplicationUntilProxyStarts: true",
            "statusPort: \"15021\"",
            "drainDuration: 2m",
            "discoveryAddress: \"[::1]:15012\"",
            "tracingServiceName: CANONICAL_NAME_ONLY",
            "tracing:\n  zipkin:\n    address: $(HOST_IP):9411",
        ] {
            assert_eq!(validate_proxy_config(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            validate_proxy_config("statusPort: 0"),
            one_error("invalid status port: port number 0 must be in the range 1..65535")
        );
        assert_eq!(
            validate_proxy_config("drainDuration: 1.5s"),
            one_error("drain time only supports durations to seconds precision")
        );
        assert_eq!(
            validate_proxy_config("drainDuration: 0s"),
            one_error("invalid drain duration: duration must be greater than 1ms")
        );
        assert_eq!(
            validate_proxy_config("drainDuration: 1.0005s"),
            one_error("invalid drain duration: only durations to ms precision are supported")
        );
        assert_eq!(
            validate_proxy_config("discoveryAddress: istiod"),
            one_error(
                "invalid discovery address: unable to split \"istiod\": address istiod: missing port in address"
            )
        );
        assert_eq!(
            validate_proxy_config("discoveryAddress: \"istiod:abc\""),
            one_error(
                "invalid discovery address: port (abc) is not a number: strconv.Atoi: parsing \"abc\": invalid syntax"
            )
        );
        assert_eq!(
            validate_proxy_config("discoveryAddress: \"bad_host:15012\""),
            one_error("invalid discovery address: \"bad_host\" is not a valid hostname or an IP address")
        );
        assert_eq!(
            validate_proxy_config("discoveryAddress: \"\"\nconfigPath: \"\"\nbinaryPath: \"\""),
            Err(multierror(&[
                "config path must be set".into(),
                "binary path must be set".into(),
                "discovery address must be set to the proxy discovery service".into()
            ]))
        );
        assert_eq!(
            validate_proxy_config("serviceCluster: \"\""),
            one_error("service cluster must be specified")
        );
        assert_eq!(
            validate_proxy_config("controlPlaneAuthPolicy: 7"),
            one_error("invalid authentication policy: unrecognized control plane auth policy \"7\"")
        );
        assert_eq!(
            validate_proxy_config("tracing:\n  zipkin:\n    address: zipkin"),
            one_error(
                "invalid zipkin config: unable to split \"zipkin\": address zipkin: missing port in address"
            )
        );
        assert_eq!(
            validate_proxy_config("tracing:\n  lightstep: {}"),
            Err(multierror(&[
                "invalid lightstep config: address is required".into(),
                "invalid lightstep config: invalid lightstep address: unable to split \"\": missing port in address".into(),
                "invalid lightstep config: access token is required".into(),
            ]))
        );
        assert_eq!(
            validate_proxy_config("statsdUdpAddress: foo\nproxyAdminPort: 70000"),
            Err(multierror(&[
                "invalid statsd udp address \"foo\": unable to split \"foo\": address foo: missing port in address".into(),
                "invalid proxy admin port: port number 70000 must be in the range 1..65535".into(),
            ]))
        );
        assert_eq!(
            validate_proxy_config("envoyAccessLogService:\n  address: a:0"),
            one_error(
                "invalid envoy access log service address \"a:0\": port number 0 must be in the range 1..65535"
            )
        );
        assert_eq!(
            validate_proxy_config("drainDuration: abc"),
            Err("failed to convert to apply proxy config: bad Duration: time: invalid duration \"abc\""
                .into())
        );
        // Decoding errors: Go refuses these too (texts differ).
        for bad in [
            "[1, 2]",
            "a: [",
            "statusPort: abc",
            "drainDuration: 45",
            "controlPlaneAuthPolicy: FOO",
            "proxyMetadata:\n  A: 1",
        ] {
            let e = validate_proxy_config(bad).expect_err(bad);
            assert!(e.starts_with("failed to convert to apply proxy config: "), "{bad}: {e}");
        }
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration_nanos("1h2m3.5s"), Ok(3_723_500_000_000));
        assert_eq!(parse_go_duration_nanos("-1.5us"), Ok(-1_500));
        assert_eq!(parse_go_duration_nanos("0"), Ok(0));
        assert_eq!(parse_go_duration_nanos("1"), Err("time: invalid duration \"1\"".into()));
        assert_eq!(parse_go_duration_nanos("1x"), Err("time: invalid duration \"1x\"".into()));
        assert_eq!(parse_go_duration_nanos("."), Err("time: invalid duration \".\"".into()));
        assert!(parse_go_duration_nanos("9999999999h").is_err());
    }

    #[test]
    fn several_invalid_annotations_sorted_by_name() {
        let got = validate_annotations(&annotations(json!({
            "traffic.sidecar.istio.io/excludeInboundPorts": "x",
            "sidecar.istio.io/proxyCPU": "bad",
            "sidecar.istio.io/interceptionMode": "X",
            "proxy.istio.io/config": "statusPort: 0\nproxyAdminPort: 0",
            "sidecar.istio.io/inject": "maybe",
        })));
        // istioctl kube-inject's text (after "failed to run injection template: ").
        let want = "4 errors occurred:\n\t* invalid value 'statusPort: 0\nproxyAdminPort: 0' for annotation 'proxy.istio.io/config': 2 errors occurred:\n\t* invalid proxy admin port: port number 0 must be in the range 1..65535\n\t* invalid status port: port number 0 must be in the range 1..65535\n\n\n\t* invalid value 'X' for annotation 'sidecar.istio.io/interceptionMode': interceptionMode invalid, use REDIRECT,TPROXY,NONE: X\n\t* invalid value 'bad' for annotation 'sidecar.istio.io/proxyCPU': quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'\n\t* invalid value 'x' for annotation 'traffic.sidecar.istio.io/excludeInboundPorts': excludeInboundPorts invalid: failed parsing port 'x': failed parsing port 'x': strconv.ParseUint: parsing \"x\": invalid syntax\n\n";
        assert_eq!(got, Err(want.to_string()));
        assert_eq!(
            validate_annotations(&annotations(json!({"sidecar.istio.io/proxyCPU": "100m", "other": "x"}))),
            Ok(())
        );
    }

    /// Istio's `traffic-annotations-bad-*.yaml` inputs: kube-inject refuses each, with istiod's text.
    #[test]
    fn kube_inject_refuses_istio_bad_annotation_inputs() {
        use crate::config::{InjectConfig, Values};
        use crate::resource::{KubeInject, ResourceError};
        let config = InjectConfig::parse("templates:\n  sidecar: |\n    spec:\n      containers:\n      - name: istio-proxy\n        image: proxy\n").unwrap();
        let values = Values::parse("{}").unwrap();
        let kube = KubeInject {
            config: &config,
            values: &values,
            mesh: mesh::apply_mesh_config("").unwrap(),
            revision: String::new(),
            native_sidecar: false,
        };
        let cases = [
            (
                "traffic.sidecar.istio.io/excludeInboundPorts",
                "*",
                "excludeInboundPorts invalid: failed parsing port '*': failed parsing port '*': strconv.ParseUint: parsing \"*\": invalid syntax",
            ),
            (
                "traffic.sidecar.istio.io/excludeOutboundIPRanges",
                "*",
                "excludeIPRanges invalid: failed parsing cidr '*': netip.ParsePrefix(\"*\"): no '/'",
            ),
            (
                "traffic.sidecar.istio.io/excludeOutboundPorts",
                "bad",
                "excludeOutboundPorts invalid: failed parsing port 'bad': failed parsing port 'bad': strconv.ParseUint: parsing \"bad\": invalid syntax",
            ),
            (
                "traffic.sidecar.istio.io/includeInboundPorts",
                "bad",
                "includeInboundPorts invalid: failed parsing port 'bad': failed parsing port 'bad': strconv.ParseUint: parsing \"bad\": invalid syntax",
            ),
            (
                "traffic.sidecar.istio.io/includeOutboundIPRanges",
                "bad",
                "includeIPRanges invalid: failed parsing cidr 'bad': netip.ParsePrefix(\"bad\"): no '/'",
            ),
        ];
        for (name, value, reason) in cases {
            let manifest = format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: hello\nspec:\n  template:\n    metadata:\n      annotations:\n        {name}: \"{value}\"\n    spec:\n      containers:\n      - name: hello\n        image: fake.docker.io/google-samples/hello-go-gke:1.0\n"
            );
            let err = kube.stream(&manifest, &mut Vec::new()).expect_err(name);
            let ResourceError::Inject { source, .. } = err else { panic!("{name}: {err}") };
            assert_eq!(source, crate::inject::InjectError::Annotation(one(name, value, reason)));
            // istiod's text: injectPod's wrapping around the list.
            assert_eq!(
                source.to_string(),
                format!("failed to run injection template: {}", one(name, value, reason))
            );
        }
        // A valid value injects.
        let ok = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    traffic.sidecar.istio.io/includeInboundPorts: \"*\"\nspec:\n  containers:\n  - name: c\n    image: x\n";
        assert!(kube.stream(ok, &mut Vec::new()).unwrap().contains("istio-proxy"));
    }
}
