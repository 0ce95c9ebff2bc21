//! The statuses Istio writes on Gateway API objects (`status:`), as typed values.
//!
//! Counts and names that Kubernetes always prints (`attachedRoutes: 0`, a condition's `status`) are
//! plain fields serialized even when zero or empty; optional ones are omitted when absent.

use serde::{Deserialize, Serialize};

use super::{ParentReference, gateway::GatewaySpecAddress, gateway::RouteGroupKind};

/// A Kubernetes condition (`metav1.Condition`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition {
    /// Condition type (`Accepted`, `Programmed`, `ResolvedRefs`, `Conflicted`, …).
    pub r#type: String,
    /// `"True"`, `"False"` or `"Unknown"`.
    pub status: String,
    /// The `metadata.generation` the condition was computed from.
    #[serde(skip_serializing_if = "crate::wkt::is_default")]
    pub observed_generation: i64,
    /// RFC 3339 time of the last change of `status`.
    pub last_transition_time: String,
    /// CamelCase reason (`Accepted`, `NoMatchingParent`, `BackendNotFound`, `RefNotPermitted`, …).
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

impl Condition {
    /// A condition with `status` `"True"` or `"False"` and no generation or time yet.
    pub fn new(r#type: &str, status: bool, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            r#type: r#type.to_string(),
            status: if status { "True" } else { "False" }.to_string(),
            observed_generation: 0,
            last_transition_time: String::new(),
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

object! {
    /// `GatewayClass.status`.
    pub struct GatewayClassStatus {
        /// Conditions (`Accepted`).
        pub conditions: Vec<Condition>,
        /// Features the controller supports (Istio lists its conformance features).
        pub supported_features: Vec<SupportedFeature>,
    }
}

object! {
    /// A supported feature of a GatewayClass.
    pub struct SupportedFeature {
        /// Feature name.
        pub name: String,
    }
}

object! {
    /// `Gateway.status`.
    pub struct GatewayStatus {
        /// Addresses the Gateway is reachable at (its Service's load-balancer or cluster addresses).
        pub addresses: Vec<GatewaySpecAddress>,
        /// Conditions (`Accepted`, `Programmed`, `ResolvedRefs`, …).
        pub conditions: Vec<Condition>,
        /// Per-listener statuses, in the order of `spec.listeners`.
        pub listeners: Vec<ListenerStatus>,
        /// ListenerSets attached (experimental).
        pub attached_listener_sets: Option<i32>,
    }
}

/// The status of one listener.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListenerStatus {
    /// The listener name.
    pub name: String,
    /// Route kinds the listener accepts.
    pub supported_kinds: Vec<RouteGroupKind>,
    /// Routes attached to the listener (always printed).
    pub attached_routes: i32,
    /// Conditions (`Accepted`, `Conflicted`, `Programmed`, `ResolvedRefs`).
    pub conditions: Vec<Condition>,
}

object! {
    /// `status` of HTTPRoute, GRPCRoute, TCPRoute and TLSRoute (`RouteStatus`).
    pub struct RouteStatus {
        /// One entry per parent reference this controller handles.
        pub parents: Vec<RouteParentStatus>,
    }
}

object! {
    /// The status of a route for one parent.
    pub struct RouteParentStatus {
        /// The parent reference as written in the route.
        pub parent_ref: ParentReference,
        /// The controller writing this entry (`istio.io/gateway-controller`).
        pub controller_name: String,
        /// Conditions (`Accepted`, `ResolvedRefs`).
        pub conditions: Vec<Condition>,
    }
}

object! {
    /// `status` of policies (BackendTLSPolicy, XBackendTrafficPolicy): one entry per ancestor.
    pub struct PolicyStatus {
        /// Ancestors the policy was evaluated for.
        pub ancestors: Vec<PolicyAncestorStatus>,
    }
}

object! {
    /// The status of a policy for one ancestor.
    pub struct PolicyAncestorStatus {
        /// The ancestor (a Gateway or a Service).
        pub ancestor_ref: ParentReference,
        /// The controller writing this entry.
        pub controller_name: String,
        /// Conditions (`Accepted`, `ResolvedRefs`).
        pub conditions: Vec<Condition>,
    }
}
