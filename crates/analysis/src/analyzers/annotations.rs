//! `annotations`: Istio annotations on Kubernetes objects (Istio's
//! `pkg/config/analysis/analyzers/annotations`), checked against istio/api's catalogue
//! ([`crate::annotation`]) and the sidecar injector's value checks (`pkg/kube/inject/validate.go`).

use std::net::IpAddr;

use crate::{
    Context, KubeObject, Message, Resource,
    analyzers::Analyzer,
    annotation,
    msg::{self, Arg},
    resource::kinds,
};

/// Checks the Istio annotations (keys whose prefix ends in `istio.io`, and
/// `kubernetes.io/ingress.class`) on Namespaces, Services, Pods and Deployments: unknown (IST0108),
/// deprecated (IST0135), on a kind it does not belong on (IST0107), or with a value the sidecar
/// injector rejects (IST0125).
pub struct K8sAnalyzer;

/// Annotations Istio sets itself: never reported.
const ALWAYS_IGNORED: &[&str] =
    &["sidecar.istio.io/status", "gateway.istio.io/controller-version", "istio.io/rev"];

const SIDECAR_INJECT: &str = "sidecar.istio.io/inject";

fn is_istio_annotation(name: &str) -> bool {
    name == "kubernetes.io/ingress.class" || name.split('/').next().is_some_and(|p| p.ends_with("istio.io"))
}

impl Analyzer for K8sAnalyzer {
    fn name(&self) -> &str {
        "annotations.K8sAnalyzer"
    }
    fn description(&self) -> &str {
        "Checks for misplaced and invalid Istio annotations in Kubernetes resources"
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::NAMESPACE, kinds::SERVICE, kinds::POD, kinds::DEPLOYMENT]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        for (key, kind) in [
            (kinds::NAMESPACE, "Namespace"),
            (kinds::SERVICE, "Service"),
            (kinds::POD, "Pod"),
            (kinds::DEPLOYMENT, "Deployment"),
        ] {
            for r in ctx.kube(key) {
                check(r, kind, out);
            }
        }
    }
}

fn check(r: &KubeObject, kind: &str, out: &mut Vec<Message>) {
    for (name, value) in &r.annotations {
        if !is_istio_annotation(name) || ALWAYS_IGNORED.contains(&name.as_str()) {
            continue;
        }
        let path = format!("metadata.annotations[{name}]");
        let Some(def) = annotation::lookup(name) else {
            out.push(r.message_at(&msg::UNKNOWN_ANNOTATION, &[Arg::from(name)], &path));
            continue;
        };
        if def.deprecated && !(name == SIDECAR_INJECT && r.labels.contains_key(SIDECAR_INJECT)) {
            let extra = if name == SIDECAR_INJECT {
                " in favor of the \"sidecar.istio.io/inject\" label"
            } else {
                ""
            };
            out.push(r.message_at(&msg::DEPRECATED_ANNOTATION, &[Arg::from(name), Arg::from(extra)], &path));
        }
        if def.resources.contains(&"Any") {
            continue;
        }
        if !def.resources.contains(&kind) {
            let args = [Arg::from(name), Arg::Str(def.resources.join(", "))];
            out.push(r.message_at(&msg::MISPLACED_ANNOTATION, &args, &path));
            continue;
        }
        if let Some(Err(e)) = validate_value(name, value) {
            out.push(r.message_at(&msg::INVALID_ANNOTATION, &[Arg::from(name), Arg::Str(e)], &path));
        }
    }
}

/// The injector's check of an annotation value (`inject.AnnotationValidation`), `None` for
/// annotations it does not check. Error texts follow Go's.
fn validate_value(name: &str, value: &str) -> Option<Result<(), String>> {
    let result = match name {
        "sidecar.istio.io/interceptionMode" => match value {
            "REDIRECT" | "TPROXY" | "NONE" => Ok(()),
            _ => Err(format!("interceptionMode invalid, use REDIRECT,TPROXY,NONE: {value}")),
        },
        "status.sidecar.istio.io/port" => {
            parse_port(value).map(|_| ()).map_err(|e| format!("excludeInboundPorts invalid: {e}"))
        }
        "readiness.status.sidecar.istio.io/initialDelaySeconds"
        | "readiness.status.sidecar.istio.io/periodSeconds"
        | "readiness.status.sidecar.istio.io/failureThreshold" => parse_uint(value, 32).map(|_| ()),
        "traffic.sidecar.istio.io/includeOutboundIPRanges" if value == "*" => Ok(()),
        "traffic.sidecar.istio.io/includeOutboundIPRanges" => {
            cidr_list(value).map_err(|e| format!("includeIPRanges invalid: {e}"))
        }
        "traffic.sidecar.istio.io/excludeOutboundIPRanges" => {
            cidr_list(value).map_err(|e| format!("excludeIPRanges invalid: {e}"))
        }
        "traffic.sidecar.istio.io/includeInboundPorts" if value == "*" => Ok(()),
        "traffic.sidecar.istio.io/includeInboundPorts" => port_list("includeInboundPorts", value),
        "traffic.sidecar.istio.io/excludeInboundPorts" => port_list("excludeInboundPorts", value),
        "traffic.sidecar.istio.io/excludeOutboundPorts" => port_list("excludeOutboundPorts", value),
        "traffic.sidecar.istio.io/excludeInterfaces"
        | "traffic.sidecar.istio.io/kubevirtInterfaces"
        | "istio.io/reroute-virtual-interfaces" => interface_names(value),
        "prometheus.istio.io/merge-metrics" => match value {
            "1" | "t" | "T" | "TRUE" | "true" | "True" | "0" | "f" | "F" | "FALSE" | "false" | "False" => {
                Ok(())
            }
            _ => Err(format!("strconv.ParseBool: parsing {}: invalid syntax", msg::go_quote(value))),
        },
        "proxy.istio.io/config" => proxy_config(value),
        "sidecar.istio.io/proxyCPU"
        | "sidecar.istio.io/proxyMemory"
        | "sidecar.istio.io/proxyCPULimit"
        | "sidecar.istio.io/proxyMemoryLimit" => quantity(value),
        _ => return None,
    };
    Some(result)
}

/// Go's `strconv.ParseUint(value, 10, bits)` with its error text.
fn parse_uint(value: &str, bits: u32) -> Result<u64, String> {
    let quoted = msg::go_quote(value);
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.ParseUint: parsing {quoted}: invalid syntax"));
    }
    match value.parse::<u64>() {
        Ok(v) if bits >= 64 || v < (1u64 << bits) => Ok(v),
        _ => Err(format!("strconv.ParseUint: parsing {quoted}: value out of range")),
    }
}

fn parse_port(value: &str) -> Result<u64, String> {
    parse_uint(value.trim(), 16).map_err(|e| format!("failed parsing port '{value}': {e}"))
}

fn port_list(parameter: &str, value: &str) -> Result<(), String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(());
    }
    for port in value.split(',') {
        if let Err(e) = parse_port(port) {
            return Err(format!("{parameter} invalid: failed parsing port '{port}': {e}"));
        }
    }
    Ok(())
}

/// Comma-separated CIDRs (Go's `netip.ParsePrefix`: an address, `/`, a prefix length in range).
fn cidr_list(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    for cidr in value.split(',') {
        let bad = |why: &str| {
            format!("failed parsing cidr '{cidr}': netip.ParsePrefix({}): {why}", msg::go_quote(cidr))
        };
        let Some((addr, bits)) = cidr.split_once('/') else { return Err(bad("no '/'")) };
        let Ok(ip) = addr.parse::<IpAddr>() else { return Err(bad("bad address")) };
        let max = if ip.is_ipv4() { 32 } else { 128 };
        match bits.parse::<u32>() {
            Ok(b) if b <= max && !bits.starts_with('+') => {}
            _ => return Err(bad(&format!("bad bits after slash: {}", msg::go_quote(bits)))),
        }
    }
    Ok(())
}

fn interface_names(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    for name in value.split(',').map(str::trim) {
        if name.is_empty() {
            return Err("empty interface name".into());
        }
        if name.len() > 15 {
            return Err(format!("interface name {} too long (max 15 chars)", msg::go_quote(name)));
        }
        let mut chars = name.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
        if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
            return Err(format!("interface name {} contains invalid characters", msg::go_quote(name)));
        }
    }
    Ok(())
}

/// `proxy.istio.io/config` must be a ProxyConfig YAML mapping. meshpilot checks only that it is a
/// mapping (istioctl also validates the ProxyConfig fields).
fn proxy_config(value: &str) -> Result<(), String> {
    match api::yaml::parse_documents(value).into_iter().next() {
        None | Some(Ok(api::yaml::Document { root: None, .. })) => Ok(()),
        Some(Ok(api::yaml::Document { root: Some(n), .. }))
            if matches!(n.value, api::yaml::Value::Map(_)) =>
        {
            Ok(())
        }
        Some(Ok(_)) => Err("failed to convert to apply proxy config: expected a mapping".into()),
        Some(Err(e)) => Err(format!("failed to convert to apply proxy config: {e}")),
    }
}

/// A Kubernetes resource quantity (`100m`, `1.5Gi`, `1e3`), as `resource.ParseQuantity`.
fn quantity(value: &str) -> Result<(), String> {
    const WRONG: &str =
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    if value.chars().any(char::is_control) {
        return Err("value contains control characters".into());
    }
    let s = value.strip_prefix(['+', '-']).unwrap_or(value);
    let number_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let digits = number.replace('.', "");
    if digits.is_empty() || number.matches('.').count() > 1 {
        return Err(WRONG.into());
    }
    let ok = match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P"
        | "E" => true,
        s if s.starts_with(['e', 'E']) => {
            let exp = s[1..].strip_prefix(['+', '-']).unwrap_or(&s[1..]);
            !exp.is_empty() && exp.bytes().all(|b| b.is_ascii_digit())
        }
        _ => false,
    };
    if ok { Ok(()) } else { Err("unable to parse quantity's suffix".into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_as_the_injector_does() {
        let check = |name, value| validate_value(name, value).expect("checked");
        assert_eq!(
            check("readiness.status.sidecar.istio.io/initialDelaySeconds", "bar"),
            Err("strconv.ParseUint: parsing \"bar\": invalid syntax".to_string())
        );
        assert!(check("readiness.status.sidecar.istio.io/periodSeconds", "10").is_ok());
        assert!(check("traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.0/8,::1/128").is_ok());
        assert!(check("traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.0").is_err());
        assert!(check("traffic.sidecar.istio.io/excludeInboundPorts", "80, 443").is_ok());
        assert!(check("traffic.sidecar.istio.io/excludeInboundPorts", "80,http").is_err());
        assert!(check("sidecar.istio.io/proxyCPU", "100m").is_ok());
        assert!(check("sidecar.istio.io/proxyMemory", "1.5Gi").is_ok());
        assert!(check("sidecar.istio.io/proxyMemory", "lots").is_err());
        assert!(check("traffic.sidecar.istio.io/excludeInterfaces", "eth0,veth-1").is_ok());
        assert!(check("traffic.sidecar.istio.io/excludeInterfaces", "0eth").is_err());
        assert!(validate_value("sidecar.istio.io/inject", "yes").is_none());
    }
}
