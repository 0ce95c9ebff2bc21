//! `gateway`: Istio Gateways against the workloads and Services they run on, each other, and the
//! Secrets they reference (Istio's `pkg/config/analysis/analyzers/gateway`).

use std::collections::BTreeMap;

use api::{
    Kind, Spec,
    networking::gateway::{Gateway, ServerTlsSettings},
};
use base64::Engine;
use serde_json::Value;

use crate::{
    Context, IstioResource, KubeObject, Message, Resource,
    analyzers::Analyzer,
    msg::{self, Arg},
    resource::kinds,
    util,
};

fn gateways<'a>(ctx: &'a Context<'_>) -> impl Iterator<Item = (&'a IstioResource, &'a Gateway)> {
    ctx.istio(Kind::Gateway).filter_map(|r| match r.spec() {
        Spec::Gateway(g) => Some((r, &**g)),
        _ => None,
    })
}

/// The field path of the selector's first label (`spec.selector[istio]`), where istioctl points
/// selector messages.
fn selector_path(selector: &BTreeMap<String, String>) -> String {
    match selector.keys().next() {
        Some(k) => format!("spec.selector[{k}]"),
        None => "spec.selector".to_string(),
    }
}

/// Checks that a Gateway's selector matches a pod (IST0101 `selector`) and that each server port is
/// a (target) port of a TCP Service port selecting those pods (IST0162).
pub struct IngressGatewayPortAnalyzer;

/// A Service port's `targetPort` as a number (a numeric string counts, a named port is 0), as
/// Kubernetes' `IntOrString.IntValue`.
fn int_value(v: Option<&Value>) -> u32 {
    match v {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0) as u32,
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default()
}

impl Analyzer for IngressGatewayPortAnalyzer {
    fn name(&self) -> &str {
        "gateway.IngressGatewayPortAnalyzer"
    }
    fn description(&self) -> &str {
        "Checks a gateway's ports against the gateway's Kubernetes service ports"
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::GATEWAY, kinds::POD, kinds::SERVICE]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        for (r, gw) in gateways(ctx) {
            let selector = util::labels_string(&gw.selector);
            let mut service_ports: Vec<u32> = Vec::new();
            let mut port_mapping: BTreeMap<u32, u32> = BTreeMap::new();
            let mut matches = 0;
            for pod in ctx.kube_selected(kinds::POD, None, &gw.selector) {
                matches += 1;
                for svc in ctx.kube(kinds::SERVICE).filter(|s| s.ns() == pod.ns()) {
                    let svc_selector = string_map(svc.pointer("/spec/selector"));
                    if !util::selector_matches(&svc_selector, &pod.labels) {
                        continue;
                    }
                    for port in svc.pointer("/spec/ports").and_then(Value::as_array).into_iter().flatten() {
                        if port.get("protocol").and_then(Value::as_str) != Some("TCP") {
                            continue;
                        }
                        let number = int_value(port.get("port"));
                        match int_value(port.get("targetPort")) {
                            0 => service_ports.push(number),
                            target => {
                                service_ports.push(target);
                                port_mapping.entry(number).or_insert(target);
                            }
                        }
                    }
                }
            }
            if matches == 0 {
                let args = ["selector".into(), Arg::from(&selector)];
                out.push(r.message_at(
                    &msg::REFERENCED_RESOURCE_NOT_FOUND,
                    &args,
                    &selector_path(&gw.selector),
                ));
                continue;
            }
            for server in &gw.servers {
                let Some(port) = &server.port else { continue };
                if !service_ports.contains(&port.number) && !port_mapping.contains_key(&port.number) {
                    let args = [Arg::from(port.number), Arg::from(&selector)];
                    let path = selector_path(&gw.selector);
                    out.push(r.message_at(&msg::GATEWAY_PORT_NOT_DEFINED_ON_SERVICE, &args, &path));
                }
            }
        }
    }
}

/// Checks that Gateways selecting the same workloads do not define the same host on the same port
/// and bind address (IST0145), and that the selector matches a pod (IST0101 `selector`).
pub struct ConflictingGatewayAnalyzer;

/// `selector string` → `port` → gateway (`ns/name`) → host → bind.
type GatewayMap = BTreeMap<(String, String), BTreeMap<String, BTreeMap<String, String>>>;

impl Analyzer for ConflictingGatewayAnalyzer {
    fn name(&self) -> &str {
        "gateway.ConflictingGatewayAnalyzer"
    }
    fn description(&self) -> &str {
        "Checks a gateway's selector, port number and hosts"
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::GATEWAY, kinds::POD]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let mut map: GatewayMap = BTreeMap::new();
        for (r, gw) in gateways(ctx) {
            let name = util::full_name(r.namespace(), r.name());
            let selector = util::labels_string(&gw.selector);
            for server in &gw.servers {
                let port = server.port.as_ref().map_or(0, |p| p.number).to_string();
                let hosts: BTreeMap<String, String> =
                    server.hosts.iter().map(|h| (h.clone(), server.bind.clone())).collect();
                map.entry((selector.clone(), port)).or_default().insert(name.clone(), hosts);
            }
        }
        for (r, gw) in gateways(ctx) {
            let name = util::full_name(r.namespace(), r.name());
            let selector = util::labels_string(&gw.selector);
            let mut hits = Vec::new();
            for (key, gateways) in &map {
                let other = &key.0;
                let matched = *other == selector
                    || ((other.contains(&selector) || selector.contains(other.as_str())) && {
                        let other_selector = parse_selector(other);
                        ctx.kube(kinds::POD).any(|pod| {
                            util::selector_matches(&gw.selector, &pod.labels)
                                && util::selector_matches(&other_selector, &pod.labels)
                        })
                    });
                if matched {
                    hits.push((key, gateways));
                }
            }
            if !selector.is_empty() && hits.is_empty() {
                let args = ["selector".into(), Arg::from(&selector)];
                out.push(r.message_at(
                    &msg::REFERENCED_RESOURCE_NOT_FOUND,
                    &args,
                    &selector_path(&gw.selector),
                ));
                continue;
            }
            for server in &gw.servers {
                let port = server.port.as_ref().map_or(0, |p| p.number).to_string();
                let mut conflicting: Vec<&str> = Vec::new();
                for ((_, key_port), gateways) in &hits {
                    if *key_port != port {
                        continue;
                    }
                    for (other, hosts) in *gateways {
                        let duplicate = server
                            .hosts
                            .iter()
                            .any(|h| hosts.get(h).is_some_and(|bind| *bind == server.bind));
                        if *other != name && duplicate {
                            conflicting.push(other);
                        }
                    }
                }
                if !conflicting.is_empty() {
                    conflicting.sort_unstable();
                    let args = [
                        Arg::Str(conflicting.join(",")),
                        Arg::from(&selector),
                        Arg::from(&port),
                        Arg::Str(server.hosts.join(",")),
                    ];
                    out.push(r.message(&msg::CONFLICTING_GATEWAYS, &args));
                }
            }
        }
    }
}

/// `k=v,k2=v2` back into a map (entries without exactly one `=` are dropped, as Istio does).
fn parse_selector(s: &str) -> BTreeMap<String, String> {
    s.split(',')
        .filter_map(|pair| {
            let mut parts = pair.split('=');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(k), Some(v), None) => Some((k.to_string(), v.to_string())),
                _ => None,
            }
        })
        .collect()
}

/// Checks the Secrets a Gateway's servers name in `tls.credentialName` (looked up in the namespace
/// of the gateway's pods): they exist (IST0101 `credentialName`) and hold a certificate and key
/// (`cert`/`key` or `tls.crt`/`tls.key`) whose certificate is currently valid (IST0161). A selector
/// matching no pod is IST0101 `selector`.
pub struct SecretAnalyzer;

impl Analyzer for SecretAnalyzer {
    fn name(&self) -> &str {
        "gateway.SecretAnalyzer"
    }
    fn description(&self) -> &str {
        "Checks a gateway's referenced secrets for correctness"
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::GATEWAY, kinds::POD, kinds::SECRET]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        for (r, gw) in gateways(ctx) {
            let Some(gw_ns) = ctx.kube_selected(kinds::POD, None, &gw.selector).next().map(KubeObject::ns)
            else {
                let args = ["selector".into(), Arg::Str(util::labels_string(&gw.selector))];
                out.push(r.message_at(
                    &msg::REFERENCED_RESOURCE_NOT_FOUND,
                    &args,
                    &selector_path(&gw.selector),
                ));
                continue;
            };
            for (i, server) in gw.servers.iter().enumerate() {
                let Some(cn) =
                    server.tls.as_ref().map(|t| t.credential_name.as_str()).filter(|c| !c.is_empty())
                else {
                    continue;
                };
                let path = format!("spec.servers[{i}].tls.credentialName");
                let (ns, name) = util::short_or_full_name(gw_ns, cn);
                match ctx.find_kube(kinds::SECRET, &ns, &name) {
                    None => {
                        let args = ["credentialName".into(), Arg::from(cn)];
                        out.push(r.message_at(&msg::REFERENCED_RESOURCE_NOT_FOUND, &args, &path));
                    }
                    Some(secret) if !valid_secret(secret) => {
                        let args = [Arg::from(r.name()), Arg::from(gw_ns)];
                        out.push(r.message_at(&msg::INVALID_GATEWAY_CREDENTIAL, &args, &path));
                    }
                    Some(_) => {}
                }
            }
        }
    }
}

/// The decoded value of a Secret key (`data` is base64, `stringData` plain); `None` when absent.
fn secret_value(secret: &KubeObject, key: &str) -> Option<Vec<u8>> {
    if let Some(v) = secret.pointer("/data").and_then(|d| d.get(key)).and_then(Value::as_str) {
        return Some(base64::engine::general_purpose::STANDARD.decode(v.trim()).unwrap_or_default());
    }
    secret
        .pointer("/stringData")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
        .map(|s| s.as_bytes().to_vec())
}

/// Istio's `ExtractCertInfo` + `ValidateCertificate`: a non-empty `cert`+`key` or `tls.crt`+`tls.key`
/// pair whose first PEM block parses as X.509 certificates valid now.
fn valid_secret(secret: &KubeObject) -> bool {
    let pair = |c: &str, k: &str| match (secret_value(secret, c), secret_value(secret, k)) {
        (Some(c), Some(k)) if !c.is_empty() && !k.is_empty() => Some(c),
        _ => None,
    };
    let Some(cert) = pair("cert", "key").or_else(|| pair("tls.crt", "tls.key")) else { return false };
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(&cert) else { return false };
    match pem.parse_x509() {
        Ok(cert) => cert.validity().is_valid(),
        Err(_) => false,
    }
}

/// Checks that Gateways selecting the same workloads (selector subset; every Gateway when the
/// selector is empty) do not use the same certificate (`credentialName`, or the same
/// `serverCertificate` and `privateKey` files): IST0138.
pub struct CertificateAnalyzer;

fn same_certificate(a: &ServerTlsSettings, b: &ServerTlsSettings) -> bool {
    if !a.credential_name.is_empty() && !b.credential_name.is_empty() {
        return a.credential_name == b.credential_name;
    }
    if a.credential_name.is_empty()
        && b.credential_name.is_empty()
        && !a.server_certificate.is_empty()
        && a.server_certificate == b.server_certificate
        && !a.private_key.is_empty()
        && !b.private_key.is_empty()
    {
        return a.private_key == b.private_key;
    }
    false
}

/// Istio's `selectorSubset`: every key of `x` is in `y` with the same value.
fn selector_subset(x: &BTreeMap<String, String>, y: &BTreeMap<String, String>) -> bool {
    x.iter().all(|(k, v)| y.get(k) == Some(v))
}

impl Analyzer for CertificateAnalyzer {
    fn name(&self) -> &str {
        "gateway.CertificateAnalyzer"
    }
    fn description(&self) -> &str {
        "Checks a gateway certificate"
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::GATEWAY]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        for (r, gw) in gateways(ctx) {
            let own = util::full_name(r.namespace(), r.name());
            for (other_r, other) in gateways(ctx) {
                let other_name = util::full_name(other_r.namespace(), other_r.name());
                if other_name == own
                    || !(gw.selector.is_empty() || selector_subset(&gw.selector, &other.selector))
                {
                    continue;
                }
                for a in gw.servers.iter().filter_map(|s| s.tls.as_ref()) {
                    for b in other.servers.iter().filter_map(|s| s.tls.as_ref()) {
                        if same_certificate(a, b) {
                            let args = [Arg::Strs(vec![own.clone(), other_name.clone()])];
                            out.push(r.message_at(
                                &msg::GATEWAY_DUPLICATE_CERTIFICATE,
                                &args,
                                "metadata.name",
                            ));
                        }
                    }
                }
            }
        }
    }
}
