//! `deprecation`: deprecated Istio fields and removed custom resource types (Istio's
//! `pkg/config/analysis/analyzers/deprecation`).

use api::{Kind, Spec};

use crate::{
    Context, Message, Resource,
    analyzers::Analyzer,
    msg::{self, Arg},
    resource::kinds,
};

/// Reports IST0002 Deprecated for: a VirtualService HTTP fault delay with `percent` (use
/// `percentage`); a Sidecar `outboundTrafficPolicy.egressProxy` (ignored); a CustomResourceDefinition of
/// the removed `rbac.istio.io` kinds.
pub struct FieldAnalyzer;

const REMOVED_CRDS: &[(&str, &str)] = &[
    ("rbac.istio.io", "ClusterRbacConfig"),
    ("rbac.istio.io", "RbacConfig"),
    ("rbac.istio.io", "ServiceRole"),
    ("rbac.istio.io", "ServiceRoleBinding"),
];

impl Analyzer for FieldAnalyzer {
    fn name(&self) -> &str {
        "deprecation.DeprecationAnalyzer"
    }
    fn type_name(&self) -> &str {
        "deprecation.FieldAnalyzer"
    }
    fn description(&self) -> &str {
        "Checks for deprecated Istio types and fields"
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::VIRTUAL_SERVICE, kinds::SIDECAR, kinds::CUSTOM_RESOURCE_DEFINITION]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        for r in ctx.istio(Kind::VirtualService) {
            let Spec::VirtualService(vs) = r.spec() else { continue };
            for (i, route) in vs.http.iter().enumerate() {
                if route.fault.as_ref().and_then(|f| f.delay.as_ref()).is_some_and(|d| d.percent > 0) {
                    let text =
                        "HTTPRoute.fault.delay.percent is deprecated; use HTTPRoute.fault.delay.percentage";
                    out.push(r.message_at(
                        &msg::DEPRECATED,
                        &[Arg::from(text)],
                        &format!("spec.http[{i}].fault.delay.percent"),
                    ));
                }
            }
        }
        for r in ctx.istio(Kind::Sidecar) {
            let Spec::Sidecar(sc) = r.spec() else { continue };
            if sc.outbound_traffic_policy.as_ref().is_some_and(|p| p.egress_proxy.is_some()) {
                let text = "OutboundTrafficPolicy.EgressProxy ignored";
                out.push(r.message_at(
                    &msg::DEPRECATED,
                    &[Arg::from(text)],
                    "spec.outboundTrafficPolicy.egressProxy",
                ));
            }
        }
        for crd in ctx.kube(kinds::CUSTOM_RESOURCE_DEFINITION) {
            let group = crd.pointer("/spec/group").and_then(serde_json::Value::as_str).unwrap_or("");
            let kind = crd.pointer("/spec/names/kind").and_then(serde_json::Value::as_str).unwrap_or("");
            if REMOVED_CRDS.contains(&(group, kind)) {
                let text = format!("Custom resource type {group} {kind} is removed");
                out.push(crd.message(&msg::DEPRECATED, &[Arg::Str(text)]));
            }
        }
    }
}
