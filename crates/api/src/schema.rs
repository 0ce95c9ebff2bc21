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
    /// `true` for cluster-scoped kinds (none of Istio's config kinds is).
    pub cluster_scoped: bool,
    /// Fully qualified protobuf message of the spec (`istio.networking.v1alpha3.VirtualService`).
    pub proto: &'static str,
    /// Fully qualified protobuf message of the status.
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

macro_rules! kinds {
    ($( $kind:ident : $group:literal, $version:literal, [$($alias:literal),*], $plural:literal, $proto:literal, $status:expr; )+) => {
        /// An Istio config kind meshpilot understands.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind {
            $(
                #[doc = concat!("`", $group, "` ", stringify!($kind), ".")]
                $kind,
            )+
        }

        /// Every schema, in the order of Istio's `collections.Pilot`.
        pub static SCHEMAS: &[Schema] = &[
            $(
                Schema {
                    kind: Kind::$kind,
                    group: $group,
                    version: $version,
                    version_aliases: &[$($alias),*],
                    plural: $plural,
                    cluster_scoped: false,
                    proto: $proto,
                    status_proto: $status,
                },
            )+
        ];

        impl Kind {
            /// Every kind.
            pub const ALL: &'static [Kind] = &[$(Kind::$kind),+];

            /// The kind's name (`VirtualService`).
            pub fn as_str(&self) -> &'static str {
                match self { $( Kind::$kind => stringify!($kind), )+ }
            }

            /// The kind with this exact name.
            pub fn from_name(name: &str) -> Option<Kind> {
                match name { $( stringify!($kind) => Some(Kind::$kind), )+ _ => None }
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
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Kind {
    /// This kind's schema.
    pub fn schema(&self) -> &'static Schema {
        SCHEMAS.iter().find(|s| s.kind == *self).expect("every kind has a schema")
    }
}

/// The outcome of looking up an `apiVersion` + `kind` pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// An Istio config kind at a served version.
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
            let Some(kind) = Kind::from_name(r["kind"].as_str().unwrap()) else {
                continue;
            };
            if r["group"].as_str() != Some(kind.schema().group) {
                continue;
            }
            seen += 1;
            let s = kind.schema();
            assert_eq!(r["version"].as_str().unwrap(), s.version, "{kind}");
            assert_eq!(r["plural"].as_str().unwrap(), s.plural, "{kind}");
            assert_eq!(r["proto"].as_str().unwrap(), s.proto, "{kind}");
            assert_eq!(r["statusProto"].as_str().unwrap(), s.status_proto, "{kind}");
            let aliases: Vec<&str> = r["versionAliases"]
                .as_array()
                .map_or(vec![], |a| a.iter().map(|v| v.as_str().unwrap()).collect());
            assert_eq!(aliases, s.version_aliases, "{kind}");
        }
        assert_eq!(seen, Kind::ALL.len());
    }
}
