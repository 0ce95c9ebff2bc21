//! The Kubernetes Gateway API (`gateway.networking.k8s.io`, `gateway.networking.x-k8s.io`): the
//! specs and statuses of the kinds Istio reads and turns into Istio config
//! (`pilot/pkg/config/kube/gateway`).
//!
//! Field names follow `sigs.k8s.io/gateway-api` `apis/v1` (and `apisx/v1alpha1` for
//! XBackendTrafficPolicy), bundle v1.6.0. These types have no protobuf message: unlike Istio's API they
//! are plain Kubernetes structs. [`crate::Spec::encode_proto`] encodes them as a
//! `google.protobuf.Struct` of their JSON, which is what Istio's `config.ToProto` does for any spec that
//! is not a protobuf message.
//!
//! **Defaults.** The CRDs' OpenAPI defaults (a parentRef's `group`/`kind`, a backendRef's `kind:
//! Service` and `weight: 1`, `allowedRoutes.namespaces.from: Same`, a rule's `PathPrefix /` match, …)
//! are applied by the Kubernetes API server, not by files. The types keep what the source wrote
//! (`Option` = absent); the accessors named `*_or_default` and the converter in `meshpilot-gateway`
//! apply the CRD defaults, so an object read from a file means what it would after `kubectl apply`.
//!
//! Enumerations (`protocol`, `type`, `mode`, …) are strings here, as in the Go types; their allowed
//! values are checked by `validation::gateway_api`, which names the field.
//!
//! - [`gateway`]: GatewayClass, Gateway (listeners, addresses, TLS, allowedRoutes).
//! - [`route`]: HTTPRoute, GRPCRoute, TCPRoute, TLSRoute and their matches, filters and backends.
//! - [`policy`]: ReferenceGrant, BackendTLSPolicy, XBackendTrafficPolicy.
//! - [`status`]: the status each kind gets (conditions, listener and route-parent statuses).

use std::collections::BTreeMap;

/// Declares a Gateway API struct: serde with the Kubernetes lowerCamelCase names, every field
/// optional on input (`default`) and omitted on output when it holds its default.
macro_rules! object {
    ($(#[$m:meta])* pub struct $name:ident { $( $(#[$fm:meta])* pub $field:ident : $ty:ty, )* }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct $name {
            $(
                $(#[$fm])*
                #[serde(skip_serializing_if = "crate::wkt::is_default")]
                pub $field: $ty,
            )*
        }
    };
}

pub mod gateway;
pub mod policy;
pub mod route;
pub mod status;

pub use gateway::{GatewayClassSpec, GatewaySpec, Listener};
pub use policy::{BackendTLSPolicySpec, BackendTrafficPolicySpec, ReferenceGrantSpec};
pub use route::{GRPCRouteSpec, HTTPRouteSpec, TCPRouteSpec, TLSRouteSpec};

/// The API group of the Gateway API's standard and experimental kinds.
pub const GROUP: &str = "gateway.networking.k8s.io";
/// The API group of the Gateway API's `X`-prefixed experimental kinds (XBackendTrafficPolicy, …).
pub const X_GROUP: &str = "gateway.networking.x-k8s.io";
/// The GatewayClass controller name Istio implements (`istio.io/gateway-controller`).
pub const ISTIO_CONTROLLER: &str = "istio.io/gateway-controller";

object! {
    /// A reference from a route to its parent (`ParentReference`): a Gateway (the default), or a
    /// Service for mesh (GAMMA) routes.
    pub struct ParentReference {
        /// API group of the parent; absent means `gateway.networking.k8s.io`, `""` the core group.
        pub group: Option<String>,
        /// Kind of the parent; absent means `Gateway`.
        pub kind: Option<String>,
        /// Namespace of the parent; absent means the route's namespace.
        pub namespace: Option<String>,
        /// Name of the parent. Required.
        pub name: String,
        /// A listener name (Gateway) or port name (Service) to attach to; absent means all.
        pub section_name: Option<String>,
        /// A listener port (Gateway) or service port (Service) to attach to; absent means all.
        pub port: Option<i32>,
    }
}

impl ParentReference {
    /// The parent's group with the CRD default applied (`gateway.networking.k8s.io`).
    pub fn group_or_default(&self) -> &str {
        self.group.as_deref().unwrap_or(GROUP)
    }

    /// The parent's kind with the CRD default applied (`Gateway`).
    pub fn kind_or_default(&self) -> &str {
        self.kind.as_deref().unwrap_or("Gateway")
    }
}

object! {
    /// A reference to a backend (`BackendObjectReference`): a Service by default, or a ServiceEntry
    /// (`networking.istio.io` `Hostname` kind), …
    pub struct BackendObjectReference {
        /// API group; absent or `""` means the core group.
        pub group: Option<String>,
        /// Kind; absent means `Service`.
        pub kind: Option<String>,
        /// Name. Required.
        pub name: String,
        /// Namespace; absent means the referring object's namespace (another namespace needs a
        /// ReferenceGrant).
        pub namespace: Option<String>,
        /// Destination port; required when the referent is a Service.
        pub port: Option<i32>,
    }
}

impl BackendObjectReference {
    /// The group with the CRD default applied (`""`, the core group).
    pub fn group_or_default(&self) -> &str {
        self.group.as_deref().unwrap_or("")
    }

    /// The kind with the CRD default applied (`Service`).
    pub fn kind_or_default(&self) -> &str {
        self.kind.as_deref().unwrap_or("Service")
    }
}

object! {
    /// A backend with a weight (`BackendRef`), as TCPRoute and TLSRoute rules list them.
    pub struct BackendRef {
        /// API group; absent or `""` means the core group.
        pub group: Option<String>,
        /// Kind; absent means `Service`.
        pub kind: Option<String>,
        /// Name. Required.
        pub name: String,
        /// Namespace; absent means the route's namespace.
        pub namespace: Option<String>,
        /// Destination port.
        pub port: Option<i32>,
        /// Relative weight among the rule's backends; absent means 1, 0 means no traffic.
        pub weight: Option<i32>,
    }
}

impl BackendRef {
    /// The reference without its weight.
    pub fn object_ref(&self) -> BackendObjectReference {
        BackendObjectReference {
            group: self.group.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            port: self.port,
        }
    }
}

object! {
    /// A reference to a Secret (`SecretObjectReference`), e.g. a listener's `certificateRefs`.
    pub struct SecretObjectReference {
        /// API group; absent or `""` means the core group.
        pub group: Option<String>,
        /// Kind; absent means `Secret`.
        pub kind: Option<String>,
        /// Name. Required.
        pub name: String,
        /// Namespace; absent means the referring object's namespace.
        pub namespace: Option<String>,
    }
}

impl SecretObjectReference {
    /// The kind with the CRD default applied (`Secret`).
    pub fn kind_or_default(&self) -> &str {
        self.kind.as_deref().unwrap_or("Secret")
    }
}

object! {
    /// A reference to an object in the same namespace (`LocalObjectReference`).
    pub struct LocalObjectReference {
        /// API group (`""` for the core group).
        pub group: String,
        /// Kind.
        pub kind: String,
        /// Name.
        pub name: String,
    }
}

object! {
    /// A reference to an object in the same or another namespace (`ObjectReference`, e.g. a
    /// frontend TLS CA certificate).
    pub struct ObjectReference {
        /// API group (`""` for the core group).
        pub group: String,
        /// Kind.
        pub kind: String,
        /// Name.
        pub name: String,
        /// Namespace; absent means the referring object's namespace.
        pub namespace: Option<String>,
    }
}

object! {
    /// A policy's target (`LocalPolicyTargetReferenceWithSectionName`).
    pub struct LocalPolicyTargetReference {
        /// API group of the target (`""` for Service).
        pub group: String,
        /// Kind of the target (`Service`, `Gateway`, …).
        pub kind: String,
        /// Name of the target.
        pub name: String,
        /// A section of the target (a Service port name, a listener); absent means all.
        pub section_name: Option<String>,
    }
}

object! {
    /// A Kubernetes label selector (`metav1.LabelSelector`).
    pub struct LabelSelector {
        /// Labels that must all be present with these values.
        pub match_labels: BTreeMap<String, String>,
        /// Set-based requirements, all of which must hold.
        pub match_expressions: Vec<LabelSelectorRequirement>,
    }
}

object! {
    /// One set-based requirement of a [`LabelSelector`].
    pub struct LabelSelectorRequirement {
        /// The label key.
        pub key: String,
        /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
        pub operator: String,
        /// The values for `In` / `NotIn`.
        pub values: Vec<String>,
    }
}

impl LabelSelector {
    /// `true` if `labels` satisfy the selector (Kubernetes' `LabelSelectorAsSelector` semantics; an
    /// empty selector matches everything; an unknown operator matches nothing).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let value = labels.get(&e.key);
                match e.operator.as_str() {
                    "In" => value.is_some_and(|v| e.values.contains(v)),
                    "NotIn" => value.is_none_or(|v| !e.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

object! {
    /// A header name and value (`HTTPHeader`, `GRPCHeader`).
    pub struct HTTPHeader {
        /// Header name (case-insensitive).
        pub name: String,
        /// Header value.
        pub value: String,
    }
}

object! {
    /// Session persistence of a route rule or backend policy (`SessionPersistence`).
    pub struct SessionPersistence {
        /// Name of the cookie or header carrying the session.
        pub session_name: Option<String>,
        /// Absolute lifetime of the session, a Gateway API duration (`1h`).
        pub absolute_timeout: Option<String>,
        /// `Cookie` (the default) or `Header`.
        pub r#type: Option<String>,
        /// Cookie settings.
        pub cookie_config: Option<CookieConfig>,
    }
}

object! {
    /// Cookie settings of [`SessionPersistence`].
    pub struct CookieConfig {
        /// `Session` (the default) or `Permanent`.
        pub lifetime_type: Option<String>,
    }
}
