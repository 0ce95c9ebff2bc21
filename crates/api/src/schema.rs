//! The kinds meshpilot serves: group, version and version aliases, plural, scope, protobuf names.
//!
//! This is Istio's `collections.Pilot` set (`pkg/config/schema/metadata.yaml`, Istio master
//! 2026-08): every older served version of a kind (`v1alpha3`, `v1beta1`) maps to the same schema and
//! the same Rust type as its current version.

use std::fmt;

/// A Kubernetes GroupVersionKind, e.g. `networking.istio.io/v1alpha3/VirtualService`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionKind {
    /// API group (`networking.istio.io`); empty for the Kubernetes core group.
    pub group: String,
    /// API version (`v1`).
    pub version: String,
    /// Kind (`VirtualService`).
    pub kind: String,
}

impl GroupVersionKind {
    /// Splits an `apiVersion` (`group/version`, or `version` for the core group) and a kind.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.to_string()),
        };
        GroupVersionKind { group, version, kind: kind.to_string() }
    }

    /// The `apiVersion` string: `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

impl fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        write!(f, "{group}/{}/{}", self.version, self.kind)
    }
}

/// Everything known about one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schema {
    /// The kind.
    pub kind: Kind,
    /// API group.
    pub group: &'static str,
    /// The version Istio uses for this kind (the one written on output and in MCP type URLs).
    pub version: &'static str,
    /// Older versions still served and read as the same schema.
    pub version_aliases: &'static [&'static str],
    /// Lower-case plural used in Kubernetes REST paths (`virtualservices`).
    pub plural: &'static str,
    /// `true` for cluster-scoped kinds (GatewayClass; none of Istio's own config kinds is).
    pub cluster_scoped: bool,
    /// Fully qualified protobuf message of the spec (`istio.networking.v1alpha3.VirtualService`); for
    /// the Gateway API kinds, the name Istio's metadata.yaml gives (they have no protobuf: their
    /// specs encode as `google.protobuf.Struct`).
    pub proto: &'static str,
    /// Fully qualified protobuf message of the status (empty for ReferenceGrant, which has none).
    pub status_proto: &'static str,
}

impl Schema {
    /// The schema's current GroupVersionKind.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind {
            group: self.group.to_string(),
            version: self.version.to_string(),
            kind: self.kind.as_str().to_string(),
        }
    }

    /// `true` if `version` is the current version or an alias.
    pub fn serves_version(&self, version: &str) -> bool {
        self.version == version || self.version_aliases.contains(&version)
    }

    /// The MCP-over-xDS type URL Istio uses for this kind: `group/version/Kind`.
    pub fn mcp_type_url(&self) -> String {
        format!("{}/{}/{}", self.group, self.version, self.kind.as_str())
    }

    /// The `apiVersion` of the current version (`networking.istio.io/v1`).
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }
}

/// The first argument, or the second when given (optional parts of `kinds!` entries).
macro_rules! first_or {
    ($default:expr) => {
        $default
    };
    ($default:expr, $given:expr) => {
        $given
    };
}

macro_rules! kinds {
    ($( $kind:ident $(as $name:literal)? : $group:literal, $version:literal, [$($alias:literal),*], $plural:literal, $proto:literal, $status:expr $(, cluster_scoped = $cs:literal)?; )+) => {
        /// A config kind meshpilot understands: Istio's kinds, then the Gateway API's.
        ///
        /// The variant name is Istio's identifier (`collections.KubernetesGateway` for the Gateway
        /// API's `Gateway`); [`Kind::as_str`] is the Kubernetes kind name written in YAML.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind {
            $(
                #[doc = concat!("`", $group, "` ", first_or!(stringify!($kind) $(, $name)?), ".")]
                $kind,
            )+
        }

        /// Every schema: Istio's `collections.Pilot` in its order, then the Gateway API kinds.
        pub static SCHEMAS: &[Schema] = &[
            $(
                Schema {
                    kind: Kind::$kind,
                    group: $group,
                    version: $version,
                    version_aliases: &[$($alias),*],
                    plural: $plural,
                    cluster_scoped: first_or!(false $(, $cs)?),
                    proto: $proto,
                    status_proto: $status,
                },
            )+
        ];

        impl Kind {
            /// Every kind.
            pub const ALL: &'static [Kind] = &[$(Kind::$kind),+];

            /// The Kubernetes kind name (`VirtualService`; `Gateway` for both Istio's Gateway and
            /// the Gateway API's, which only their group tells apart).
            pub fn as_str(&self) -> &'static str {
                match self { $( Kind::$kind => first_or!(stringify!($kind) $(, $name)?), )+ }
            }

            /// Istio's identifier of the kind (`KubernetesGateway`), unique across groups.
            pub fn identifier(&self) -> &'static str {
                match self { $( Kind::$kind => stringify!($kind), )+ }
            }
        }
    };
}

const ISTIO_STATUS: &str = "istio.meta.v1alpha1.IstioStatus";

kinds! {
    VirtualService: "networking.istio.io", "v1", ["v1alpha3", "v1beta1"], "virtualservices", "istio.networking.v1alpha3.VirtualService", ISTIO_STATUS;
    Gateway: "networking.istio.io", "v1", ["v1alpha3", "v1beta1"], "gateways", "istio.networking.v1alpha3.Gateway", ISTIO_STATUS;
    ServiceEntry: "networking.istio.io", "v1", ["v1alpha3", "v1beta1"], "serviceentries", "istio.networking.v1alpha3.ServiceEntry", "istio.networking.v1alpha3.ServiceEntryStatus";
    WorkloadEntry: "networking.istio.io", "v1", ["v1alpha3", "v1beta1"], "workloadentries", "istio.networking.v1alpha3.WorkloadEntry", ISTIO_STATUS;
    WorkloadGroup: "networking.istio.io", "v1", ["v1alpha3", "v1beta1"], "workloadgroups", "istio.networking.v1alpha3.WorkloadGroup", ISTIO_STATUS;
    DestinationRule: "networking.istio.io", "v1", ["v1alpha3", "v1beta1"], "destinationrules", "istio.networking.v1alpha3.DestinationRule", ISTIO_STATUS;
    EnvoyFilter: "networking.istio.io", "v1alpha3", [], "envoyfilters", "istio.networking.v1alpha3.EnvoyFilter", ISTIO_STATUS;
    Sidecar: "networking.istio.io", "v1", ["v1alpha3", "v1beta1"], "sidecars", "istio.networking.v1alpha3.Sidecar", ISTIO_STATUS;
    ProxyConfig: "networking.istio.io", "v1beta1", [], "proxyconfigs", "istio.networking.v1beta1.ProxyConfig", ISTIO_STATUS;
    AuthorizationPolicy: "security.istio.io", "v1", ["v1beta1"], "authorizationpolicies", "istio.security.v1beta1.AuthorizationPolicy", ISTIO_STATUS;
    RequestAuthentication: "security.istio.io", "v1", ["v1beta1"], "requestauthentications", "istio.security.v1beta1.RequestAuthentication", ISTIO_STATUS;
    PeerAuthentication: "security.istio.io", "v1", ["v1beta1"], "peerauthentications", "istio.security.v1beta1.PeerAuthentication", ISTIO_STATUS;
    Telemetry: "telemetry.istio.io", "v1", ["v1alpha1"], "telemetries", "istio.telemetry.v1alpha1.Telemetry", ISTIO_STATUS;
    WasmPlugin: "extensions.istio.io", "v1alpha1", [], "wasmplugins", "istio.extensions.v1alpha1.WasmPlugin", ISTIO_STATUS;
    TrafficExtension: "extensions.istio.io", "v1alpha1", [], "trafficextensions", "istio.extensions.v1alpha1.TrafficExtension", ISTIO_STATUS;
    // Gateway API (Istio's `collections.PilotGatewayAPI()`): versions and aliases of Istio's
    // metadata.yaml, plus the versions the v1.6.0 CRDs also serve.
    GatewayClass: "gateway.networking.k8s.io", "v1", ["v1alpha2", "v1beta1"], "gatewayclasses", "k8s.io.gateway_api.api.v1alpha1.GatewayClassSpec", "k8s.io.gateway_api.api.v1alpha1.GatewayClassStatus", cluster_scoped = true;
    KubernetesGateway as "Gateway": "gateway.networking.k8s.io", "v1", ["v1alpha2", "v1beta1"], "gateways", "k8s.io.gateway_api.api.v1alpha1.GatewaySpec", "k8s.io.gateway_api.api.v1alpha1.GatewayStatus";
    HTTPRoute: "gateway.networking.k8s.io", "v1", ["v1alpha2", "v1beta1"], "httproutes", "k8s.io.gateway_api.api.v1alpha1.HTTPRouteSpec", "k8s.io.gateway_api.api.v1alpha1.HTTPRouteStatus";
    GRPCRoute: "gateway.networking.k8s.io", "v1", ["v1alpha2"], "grpcroutes", "k8s.io.gateway_api.api.v1alpha1.GRPCRouteSpec", "k8s.io.gateway_api.api.v1alpha1.GRPCRouteStatus";
    TCPRoute: "gateway.networking.k8s.io", "v1", ["v1alpha2"], "tcproutes", "k8s.io.gateway_api.api.v1.TCPRouteSpec", "k8s.io.gateway_api.api.v1.TCPRouteStatus";
    TLSRoute: "gateway.networking.k8s.io", "v1", ["v1alpha2", "v1alpha3"], "tlsroutes", "k8s.io.gateway_api.api.v1.TLSRouteSpec", "k8s.io.gateway_api.api.v1.TLSRouteStatus";
    ReferenceGrant: "gateway.networking.k8s.io", "v1beta1", ["v1alpha2", "v1"], "referencegrants", "k8s.io.gateway_api.api.v1alpha1.ReferenceGrantSpec", "";
    BackendTLSPolicy: "gateway.networking.k8s.io", "v1", ["v1alpha3"], "backendtlspolicies", "k8s.io.gateway_api.api.v1.BackendTLSPolicySpec", "k8s.io.gateway_api.api.v1.PolicyStatus";
    XBackendTrafficPolicy: "gateway.networking.x-k8s.io", "v1alpha1", [], "xbackendtrafficpolicies", "k8s.io.gateway_api.apix.v1alpha1.BackendTrafficPolicySpec", "PolicyStatus";
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Kind {
    /// Istio's own kinds (`collections.Pilot`): everything but the Gateway API. MCP-over-xDS carries
    /// these only, as istiod's MCP client subscribes to these only.
    pub const ISTIO: &'static [Kind] = &[
        Kind::VirtualService,
        Kind::Gateway,
        Kind::ServiceEntry,
        Kind::WorkloadEntry,
        Kind::WorkloadGroup,
        Kind::DestinationRule,
        Kind::EnvoyFilter,
        Kind::Sidecar,
        Kind::ProxyConfig,
        Kind::AuthorizationPolicy,
        Kind::RequestAuthentication,
        Kind::PeerAuthentication,
        Kind::Telemetry,
        Kind::WasmPlugin,
        Kind::TrafficExtension,
    ];

    /// The Gateway API kinds meshpilot reads (Istio's `collections.PilotGatewayAPI()` minus
    /// ListenerSet, XBackend, UDPRoute and the inference kinds). Not served over MCP.
    pub const GATEWAY_API: &'static [Kind] = &[
        Kind::GatewayClass,
        Kind::KubernetesGateway,
        Kind::HTTPRoute,
        Kind::GRPCRoute,
        Kind::TCPRoute,
        Kind::TLSRoute,
        Kind::ReferenceGrant,
        Kind::BackendTLSPolicy,
        Kind::XBackendTrafficPolicy,
    ];

    /// This kind's schema.
    pub fn schema(&self) -> &'static Schema {
        SCHEMAS.iter().find(|s| s.kind == *self).expect("every kind has a schema")
    }

    /// The kind with this Kubernetes kind name. `Gateway` is ambiguous and names Istio's Gateway
    /// (the first match); use [`Kind::from_group_kind`] when the group is known.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.as_str() == name)
    }

    /// The kind with this API group and Kubernetes kind name (`gateway.networking.k8s.io`,
    /// `Gateway` → [`Kind::KubernetesGateway`]).
    pub fn from_group_kind(group: &str, kind: &str) -> Option<Kind> {
        SCHEMAS.iter().find(|s| s.group == group && s.kind.as_str() == kind).map(|s| s.kind)
    }

    /// `true` for the Gateway API kinds (`gateway.networking.k8s.io`, `gateway.networking.x-k8s.io`).
    pub fn is_gateway_api(&self) -> bool {
        Kind::GATEWAY_API.contains(self)
    }
}

/// The outcome of looking up an `apiVersion` + `kind` pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A config kind meshpilot reads (Istio's, or the Gateway API's) at a served version.
    Istio(&'static Schema),
    /// An Istio kind, but at a version that is not served (e.g. `networking.istio.io/v2`).
    UnservedVersion(&'static Schema),
    /// A kind Istio removed; the string names what replaced it.
    Removed(&'static str),
    /// Not an Istio config kind (a Kubernetes kind, a CRD of another project, …).
    Other,
}

/// Finds the schema for an `apiVersion` and `kind`.
pub fn lookup(api_version: &str, kind: &str) -> Lookup {
    let gvk = GroupVersionKind::from_api_version(api_version, kind);
    if let Some(replacement) = removed_kind(&gvk.group, kind) {
        return Lookup::Removed(replacement);
    }
    match SCHEMAS.iter().find(|s| s.group == gvk.group && s.kind.as_str() == kind) {
        Some(s) if s.serves_version(&gvk.version) => Lookup::Istio(s),
        Some(s) => Lookup::UnservedVersion(s),
        None => Lookup::Other,
    }
}

/// Kinds of Istio's removed APIs (config.istio.io, authentication.istio.io, rbac.istio.io, mixer) and
/// what replaced each.
fn removed_kind(group: &str, kind: &str) -> Option<&'static str> {
    Some(match (group, kind) {
        ("config.istio.io", "RouteRule") => "networking.istio.io VirtualService",
        ("config.istio.io", "DestinationPolicy") => "networking.istio.io DestinationRule",
        ("config.istio.io", "EgressRule") => "networking.istio.io ServiceEntry",
        ("config.istio.io", "Ingress") => "networking.istio.io Gateway and VirtualService",
        ("authentication.istio.io", "Policy") => {
            "security.istio.io PeerAuthentication and RequestAuthentication"
        }
        ("authentication.istio.io", "MeshPolicy") => {
            "security.istio.io PeerAuthentication in the root namespace"
        }
        ("rbac.istio.io", "ServiceRole" | "ServiceRoleBinding") => "security.istio.io AuthorizationPolicy",
        ("rbac.istio.io", "RbacConfig" | "ClusterRbacConfig") => "security.istio.io AuthorizationPolicy",
        ("config.istio.io", _) => {
            "Telemetry (telemetry.istio.io) or WasmPlugin (extensions.istio.io); Mixer was removed in Istio 1.8"
        }
        ("authentication.istio.io" | "rbac.istio.io", _) => "security.istio.io policies",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_map_to_one_schema() {
        for v in ["v1", "v1alpha3", "v1beta1"] {
            assert_eq!(
                lookup(&format!("networking.istio.io/{v}"), "VirtualService"),
                Lookup::Istio(Kind::VirtualService.schema())
            );
        }
        assert!(matches!(lookup("networking.istio.io/v2", "VirtualService"), Lookup::UnservedVersion(_)));
        assert!(matches!(lookup("networking.istio.io/v1", "EnvoyFilter"), Lookup::UnservedVersion(_)));
        assert_eq!(lookup("v1", "Service"), Lookup::Other);
    }

    #[test]
    fn removed_kinds_name_their_replacement() {
        assert_eq!(
            lookup("config.istio.io/v1alpha2", "RouteRule"),
            Lookup::Removed("networking.istio.io VirtualService")
        );
        assert!(
            matches!(lookup("rbac.istio.io/v1alpha1", "ServiceRole"), Lookup::Removed(r) if r.contains("AuthorizationPolicy"))
        );
    }

    #[test]
    fn metadata_yaml_agrees() {
        // Cross-check against Istio's own kind registry in the shared test data.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/istio-testdata/pkg/config/schema/metadata.yaml"
        );
        let text = std::fs::read_to_string(path).expect("shared test data beside the repository");
        let docs = crate::yaml::parse_documents(&text);
        let root = docs[0].as_ref().unwrap().root.as_ref().unwrap().to_json();
        let mut seen = 0;
        for r in root["resources"].as_array().unwrap() {
            let Some(kind) = Kind::from_group_kind(
                r["group"].as_str().unwrap_or_default(),
                r["kind"].as_str().unwrap_or_default(),
            ) else {
                continue;
            };
            seen += 1;
            let s = kind.schema();
            assert_eq!(r["version"].as_str().unwrap(), s.version, "{kind}");
            assert_eq!(r["plural"].as_str().unwrap(), s.plural, "{kind}");
            assert_eq!(r["proto"].as_str().unwrap(), s.proto, "{kind}");
            assert_eq!(r["statusProto"].as_str().unwrap_or_default(), s.status_proto, "{kind}");
            assert_eq!(r["clusterScoped"].as_bool().unwrap_or_default(), s.cluster_scoped, "{kind}");
            let aliases: Vec<&str> = r["versionAliases"]
                .as_array()
                .map_or(vec![], |a| a.iter().map(|v| v.as_str().unwrap()).collect());
            if kind.is_gateway_api() {
                // Ours add the versions the v1.6.0 CRDs serve (checked by `gateway_api_crds_agree`).
                assert!(aliases.iter().all(|a| s.version_aliases.contains(a)), "{kind}: {aliases:?}");
            } else {
                assert_eq!(aliases, s.version_aliases, "{kind}");
            }
        }
        assert_eq!(seen, Kind::ALL.len());
    }

    #[test]
    fn gateway_api_crds_agree() {
        // Every version the Gateway API CRD bundle (v1.6.0) serves is read; plural and scope match.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/istio-testdata/tests/integration/pilot/testdata/gateway-api-crd.yaml"
        );
        let text = std::fs::read_to_string(path).expect("shared test data beside the repository");
        let mut seen = Vec::new();
        for doc in crate::yaml::parse_documents(&text) {
            let Some(root) = doc.ok().and_then(|d| d.root) else { continue };
            let crd = root.to_json();
            let spec = &crd["spec"];
            let Some(kind) = Kind::from_group_kind(
                spec["group"].as_str().unwrap_or_default(),
                spec["names"]["kind"].as_str().unwrap_or_default(),
            ) else {
                continue;
            };
            let s = kind.schema();
            assert_eq!(spec["names"]["plural"].as_str().unwrap(), s.plural, "{kind}");
            assert_eq!(spec["scope"].as_str().unwrap() == "Cluster", s.cluster_scoped, "{kind}");
            for v in spec["versions"].as_array().unwrap() {
                if v["served"].as_bool() == Some(true) {
                    assert!(s.serves_version(v["name"].as_str().unwrap()), "{kind} {}", v["name"]);
                }
            }
            seen.push(kind);
        }
        seen.sort();
        let mut want = Kind::GATEWAY_API.to_vec();
        want.sort();
        assert_eq!(seen, want);
    }

    #[test]
    fn gateway_names_are_told_apart_by_group() {
        assert_eq!(Kind::from_name("Gateway"), Some(Kind::Gateway));
        assert_eq!(
            Kind::from_group_kind("gateway.networking.k8s.io", "Gateway"),
            Some(Kind::KubernetesGateway)
        );
        assert_eq!(Kind::KubernetesGateway.as_str(), "Gateway");
        assert_eq!(Kind::KubernetesGateway.identifier(), "KubernetesGateway");
        assert_eq!(
            lookup("gateway.networking.k8s.io/v1beta1", "Gateway"),
            Lookup::Istio(Kind::KubernetesGateway.schema())
        );
        assert_eq!(lookup("networking.istio.io/v1", "Gateway"), Lookup::Istio(Kind::Gateway.schema()));
        assert!(matches!(lookup("gateway.networking.k8s.io/v2", "HTTPRoute"), Lookup::UnservedVersion(_)));
        assert_eq!(Kind::ISTIO.len() + Kind::GATEWAY_API.len(), Kind::ALL.len());
        assert!(Kind::GatewayClass.schema().cluster_scoped);
    }
}
