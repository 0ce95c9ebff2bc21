//! `service`: Kubernetes Service port names (Istio's `pkg/config/analysis/analyzers/service`).

use serde_json::Value;

use crate::{
    Context, Message, Resource,
    analyzers::Analyzer,
    msg::{self, Arg},
    resource::kinds,
};

/// Checks that each Service port declares a protocol Istio understands through its name
/// (`<protocol>[-suffix]`) or `appProtocol`: IST0118 otherwise; for an ExternalName Service (also for
/// a port named `tcp`) IST0150. Services of the control plane (an `istio` label, or `release: istio`)
/// and Services of gateways Istio deploys are skipped.
pub struct PortNameAnalyzer;

const MANAGED_GATEWAY_LABEL: &str = "gateway.istio.io/managed";
const MANAGED_BY_ISTIO: &[&str] =
    &["istio.io-gateway-controller", "istio.io-mesh-controller", "istio.io-eastwest-controller"];

impl Analyzer for PortNameAnalyzer {
    fn name(&self) -> &str {
        "service.PortNameAnalyzer"
    }
    fn description(&self) -> &str {
        "Checks the port names associated with each service"
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::SERVICE]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        for svc in ctx.kube(kinds::SERVICE) {
            if svc.labels.contains_key("istio") || svc.labels.get("release").is_some_and(|v| v == "istio") {
                continue;
            }
            if svc.labels.get(MANAGED_GATEWAY_LABEL).is_some_and(|v| MANAGED_BY_ISTIO.contains(&v.as_str())) {
                continue;
            }
            let external_name = svc.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
            for (i, port) in
                svc.pointer("/spec/ports").and_then(Value::as_array).into_iter().flatten().enumerate()
            {
                let str_field = |k: &str| port.get(k).and_then(Value::as_str).unwrap_or("");
                let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
                let name = str_field("name");
                let app_protocol = port.get("appProtocol").and_then(Value::as_str);
                let protocol =
                    api::protocol::convert_protocol(number as i32, name, str_field("protocol"), app_protocol);
                if !(protocol.is_unsupported() || (name == "tcp" && external_name)) {
                    continue;
                }
                let path = format!("spec.ports[{i}].port");
                let m = if external_name {
                    svc.message_at(&msg::EXTERNAL_NAME_SERVICE_TYPE_INVALID_PORT_NAME, &[], &path)
                } else {
                    let target = match port.get("targetPort") {
                        Some(Value::Number(n)) => n.to_string(),
                        Some(Value::String(s)) => s.clone(),
                        _ => "0".to_string(),
                    };
                    let args = [Arg::from(name), Arg::Int(number), Arg::Str(target)];
                    svc.message_at(&msg::PORT_NAME_IS_NOT_UNDER_NAMING_CONVENTION, &args, &path)
                };
                out.push(m);
            }
        }
    }
}
