//! Istio's `conditions.ConditionAnalyzer` (`pkg/config/analysis/analyzers/conditions`): negative
//! status conditions written by istiod (ambient waypoints, ztunnel) and Gateway API controllers.
//!
//! Reads `status.conditions` of Services, ServiceEntries, WorkloadEntries, AuthorizationPolicies and
//! Kubernetes Gateways, and `status.parents[].conditions` of HTTPRoutes and GRPCRoutes. A condition
//! gets IST0171 NegativeConditionStatus (type, reason, message) when its status is the negative one
//! for its type and kind:
//! * Service, ServiceEntry, WorkloadEntry: `istio.io/WaypointBound=False`;
//! * AuthorizationPolicy: `ZtunnelAccepted=False`, `WaypointAccepted=False`, and also any
//!   `WaypointAccepted` with reason `PartiallyInvalid`;
//! * Gateway, HTTPRoute, GRPCRoute: `Accepted`, `Programmed` or `ResolvedRefs` `=False`.
//!
//! As in Istio, a condition of another type whose status is empty also matches (Istio compares with
//! the zero value its table lookup returns for unknown types).

use serde_json::Value;

use super::workload::str_at;
use crate::{
    Analyzer, Context, Message, msg,
    resource::{Resource, kinds},
};

/// Type key of Gateway API GRPCRoutes.
const GRPC_ROUTE: &str = "gateway.networking.k8s.io/GRPCRoute";

/// `conditions.ConditionAnalyzer`.
#[derive(Debug, Default)]
pub struct ConditionAnalyzer;

/// The negative status per condition type of a kind; empty for kinds that are not checked.
fn negative_conditions(kind: &str) -> &'static [(&'static str, &'static str)] {
    match kind {
        "Service" | "ServiceEntry" | "WorkloadEntry" => &[("istio.io/WaypointBound", "False")],
        "AuthorizationPolicy" => &[("ZtunnelAccepted", "False"), ("WaypointAccepted", "False")],
        "Gateway" | "HTTPRoute" | "GRPCRoute" => {
            &[("Accepted", "False"), ("Programmed", "False"), ("ResolvedRefs", "False")]
        }
        _ => &[],
    }
}

/// Whether a condition (type, status) is reported for `kind` (Istio's `shouldReportCondition`).
fn should_report(kind: &str, condition_type: &str, status: &str) -> bool {
    let table = negative_conditions(kind);
    if table.is_empty() {
        return false;
    }
    let negative = table.iter().find(|(t, _)| *t == condition_type).map_or("", |(_, s)| *s);
    negative == status
}

impl Analyzer for ConditionAnalyzer {
    fn name(&self) -> &str {
        "conditions.ConditionAnalyzer"
    }

    fn description(&self) -> &str {
        "Checks for negative status conditions on resources"
    }

    fn inputs(&self) -> &[&'static str] {
        &[
            kinds::SERVICE,
            kinds::SERVICE_ENTRY,
            kinds::WORKLOAD_ENTRY,
            kinds::AUTHORIZATION_POLICY,
            kinds::K8S_GATEWAY,
            kinds::HTTP_ROUTE,
            GRPC_ROUTE,
        ]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let resources = ctx.resources();
        // Kubernetes kinds: Service (core) and the Gateway API kinds, in Istio's order.
        let report = |kind: &str, status: Option<&Value>, emit: &mut dyn FnMut(&str, &str, &str)| {
            for c in conditions(kind, status) {
                let (t, s, reason, message) =
                    (str_at(c, "type"), str_at(c, "status"), str_at(c, "reason"), str_at(c, "message"));
                if should_report(kind, t, s) {
                    emit(t, reason, message);
                }
                if kind == "AuthorizationPolicy" && t == "WaypointAccepted" && reason == "PartiallyInvalid" {
                    emit(t, reason, message);
                }
            }
        };
        for svc in resources.kube(kinds::SERVICE) {
            report("Service", svc.value.get("status"), &mut |t, r, m| {
                out.push(svc.message(&msg::NEGATIVE_CONDITION_STATUS, &[t.into(), r.into(), m.into()]));
            });
        }
        for kind in [api::Kind::ServiceEntry, api::Kind::WorkloadEntry, api::Kind::AuthorizationPolicy] {
            for config in resources.istio(kind) {
                report(kind.as_str(), config.config.status.as_ref(), &mut |t, r, m| {
                    out.push(
                        config.message(&msg::NEGATIVE_CONDITION_STATUS, &[t.into(), r.into(), m.into()]),
                    );
                });
            }
        }
        for (type_key, kind) in
            [(kinds::K8S_GATEWAY, "Gateway"), (kinds::HTTP_ROUTE, "HTTPRoute"), (GRPC_ROUTE, "GRPCRoute")]
        {
            for obj in resources.kube(type_key) {
                report(kind, obj.value.get("status"), &mut |t, r, m| {
                    out.push(obj.message(&msg::NEGATIVE_CONDITION_STATUS, &[t.into(), r.into(), m.into()]));
                });
            }
        }
    }
}

/// The conditions of a status: `status.parents[].conditions` for routes, `status.conditions` otherwise.
fn conditions<'a>(kind: &str, status: Option<&'a Value>) -> Vec<&'a Value> {
    let Some(status) = status else { return Vec::new() };
    let list = |v: Option<&'a Value>| -> Vec<&'a Value> {
        match v {
            Some(Value::Array(items)) => items.iter().collect(),
            _ => Vec::new(),
        }
    };
    if kind == "HTTPRoute" || kind == "GRPCRoute" {
        list(status.get("parents")).into_iter().flat_map(|p| list(p.get("conditions"))).collect()
    } else {
        list(status.get("conditions"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_statuses_per_kind() {
        assert!(should_report("Service", "istio.io/WaypointBound", "False"));
        assert!(!should_report("Service", "istio.io/WaypointBound", "True"));
        assert!(!should_report("Service", "argocd.argoproj.io/Synced", "False"));
        assert!(should_report("HTTPRoute", "ResolvedRefs", "False"));
        assert!(!should_report("Telemetry", "Accepted", "False"));
        assert!(should_report("Gateway", "Custom", ""), "Istio's zero-value comparison");
    }
}
