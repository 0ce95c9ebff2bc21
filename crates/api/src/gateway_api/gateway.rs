//! GatewayClass and Gateway (`gateway.networking.k8s.io/v1`).

use std::collections::BTreeMap;

use super::{LabelSelector, ObjectReference, SecretObjectReference};

object! {
    /// `GatewayClass.spec`: the controller that implements Gateways of this class (cluster-scoped).
    pub struct GatewayClassSpec {
        /// The controller name; Istio implements `istio.io/gateway-controller` (and its ambient
        /// classes `istio.io/mesh-controller`, `istio.io/unmanaged-gateway`). Required.
        pub controller_name: String,
        /// Controller-specific parameters.
        pub parameters_ref: Option<ParametersReference>,
        /// Free-form description.
        pub description: Option<String>,
    }
}

object! {
    /// A reference to controller-specific parameters (`ParametersReference`).
    pub struct ParametersReference {
        /// API group.
        pub group: String,
        /// Kind (Istio reads a `ConfigMap`).
        pub kind: String,
        /// Name.
        pub name: String,
        /// Namespace (for namespaced kinds).
        pub namespace: Option<String>,
    }
}

object! {
    /// `Gateway.spec`: a load balancer with listeners, implemented by the controller of its class.
    pub struct GatewaySpec {
        /// The GatewayClass name (Istio: `istio`, `istio-remote`, `istio-waypoint`, …). Required.
        pub gateway_class_name: String,
        /// The listeners (at least one). Required.
        pub listeners: Vec<Listener>,
        /// Requested addresses; Istio reads a `Hostname` or `IPAddress` address as the existing
        /// gateway Service to use (manual deployment).
        pub addresses: Vec<GatewaySpecAddress>,
        /// Labels, annotations and parameters for the deployed infrastructure.
        pub infrastructure: Option<GatewayInfrastructure>,
        /// Which ListenerSets may attach (experimental).
        pub allowed_listeners: Option<AllowedListeners>,
        /// Gateway-wide TLS settings (backend client certificate, frontend client validation).
        pub tls: Option<GatewayTLSConfig>,
        /// `All` or `None`: whether routes with `useDefaultGateways` attach (experimental).
        pub default_scope: Option<String>,
    }
}

object! {
    /// One address of a Gateway (`GatewaySpecAddress`, `GatewayStatusAddress`).
    pub struct GatewaySpecAddress {
        /// `IPAddress` (the default), `Hostname`, or an implementation-specific type.
        pub r#type: Option<String>,
        /// The address.
        pub value: String,
    }
}

object! {
    /// `spec.infrastructure` of a Gateway.
    pub struct GatewayInfrastructure {
        /// Labels for the generated resources.
        pub labels: BTreeMap<String, String>,
        /// Annotations for the generated resources.
        pub annotations: BTreeMap<String, String>,
        /// Per-Gateway parameters (a local object, e.g. a ConfigMap).
        pub parameters_ref: Option<LocalParametersReference>,
    }
}

object! {
    /// A same-namespace reference to parameters (`LocalParametersReference`).
    pub struct LocalParametersReference {
        /// API group.
        pub group: String,
        /// Kind.
        pub kind: String,
        /// Name.
        pub name: String,
    }
}

object! {
    /// `spec.allowedListeners` of a Gateway.
    pub struct AllowedListeners {
        /// Namespaces whose ListenerSets may attach.
        pub namespaces: Option<ListenerNamespaces>,
    }
}

object! {
    /// The namespaces of [`AllowedListeners`].
    pub struct ListenerNamespaces {
        /// `All`, `Selector`, `Same` or `None` (the default).
        pub from: Option<String>,
        /// Namespace label selector, with `from: Selector`.
        pub selector: Option<LabelSelector>,
    }
}

object! {
    /// `spec.tls` of a Gateway (`GatewayTLSConfig`).
    pub struct GatewayTLSConfig {
        /// TLS towards backends.
        pub backend: Option<GatewayBackendTLS>,
        /// Client certificate validation of the listeners.
        pub frontend: Option<FrontendTLSConfig>,
    }
}

object! {
    /// Backend TLS settings of a Gateway (`GatewayBackendTLS`).
    pub struct GatewayBackendTLS {
        /// The client certificate the gateway presents to backends.
        pub client_certificate_ref: Option<SecretObjectReference>,
    }
}

object! {
    /// Frontend TLS settings of a Gateway (`FrontendTLSConfig`).
    pub struct FrontendTLSConfig {
        /// Settings for every HTTPS listener.
        pub default: Option<TLSConfig>,
        /// Settings for one port, overriding `default`.
        pub per_port: Vec<TLSPortConfig>,
    }
}

object! {
    /// Frontend TLS settings of one port.
    pub struct TLSPortConfig {
        /// The listener port.
        pub port: i32,
        /// The settings.
        pub tls: Option<TLSConfig>,
    }
}

object! {
    /// Frontend TLS settings (`TLSConfig`).
    pub struct TLSConfig {
        /// Client certificate validation.
        pub validation: Option<FrontendTLSValidation>,
    }
}

object! {
    /// Client certificate validation (`FrontendTLSValidation`).
    pub struct FrontendTLSValidation {
        /// CA certificates (ConfigMaps or Secrets) that client certificates must chain to.
        pub ca_certificate_refs: Vec<ObjectReference>,
        /// `AllowValidOnly` (the default) or `AllowInsecureFallback`.
        pub mode: Option<String>,
    }
}

object! {
    /// One listener of a Gateway: name, port, protocol, hostname, TLS and allowed routes.
    pub struct Listener {
        /// Listener name, unique in the Gateway (Istio's generated server names and
        /// `internal.istio.io/parents` annotations use it). Required.
        pub name: String,
        /// Hostname (`*.example.com` wildcard allowed); absent matches every host.
        pub hostname: Option<String>,
        /// Port number. Required.
        pub port: i32,
        /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP`, or an implementation protocol (Istio: `HBONE`,
        /// `istio.io/PROXY`). Required.
        pub protocol: String,
        /// TLS settings (HTTPS, TLS).
        pub tls: Option<ListenerTLSConfig>,
        /// Which routes may attach; absent means the route kinds of the protocol from the same
        /// namespace.
        pub allowed_routes: Option<AllowedRoutes>,
    }
}

object! {
    /// `tls` of a listener (`ListenerTLSConfig` / `GatewayTLSConfig` in older bundles).
    pub struct ListenerTLSConfig {
        /// `Terminate` (the default) or `Passthrough`.
        pub mode: Option<String>,
        /// The certificates to serve (Secrets; Istio also reads ConfigMaps and its own
        /// `kubernetes-gateway://` forms), at most one per key type.
        pub certificate_refs: Vec<SecretObjectReference>,
        /// Implementation options (Istio reads `gateway.istio.io/tls-terminate-mode`).
        pub options: BTreeMap<String, String>,
    }
}

impl ListenerTLSConfig {
    /// The mode with the CRD default applied (`Terminate`).
    pub fn mode_or_default(&self) -> &str {
        self.mode.as_deref().unwrap_or("Terminate")
    }
}

object! {
    /// `allowedRoutes` of a listener.
    pub struct AllowedRoutes {
        /// Namespaces routes may come from; absent means `from: Same`.
        pub namespaces: Option<RouteNamespaces>,
        /// Route kinds allowed; empty means the kinds of the listener's protocol.
        pub kinds: Vec<RouteGroupKind>,
    }
}

object! {
    /// The namespaces of [`AllowedRoutes`].
    pub struct RouteNamespaces {
        /// `All`, `Selector` or `Same` (the default).
        pub from: Option<String>,
        /// Namespace label selector, with `from: Selector`.
        pub selector: Option<LabelSelector>,
    }
}

object! {
    /// A route kind (`RouteGroupKind`).
    pub struct RouteGroupKind {
        /// API group; absent means `gateway.networking.k8s.io`.
        pub group: Option<String>,
        /// Kind (`HTTPRoute`, …). Required.
        pub kind: String,
    }
}
