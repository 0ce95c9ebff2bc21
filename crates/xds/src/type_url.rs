//! xDS type URLs and the per-type rules that depend only on the type: wildcard semantics, push order,
//! short names for logs and metric labels.
//!
//! Follows Envoy's xDS protocol (`api-docs/xds_protocol`) and Istio's `pkg/model/xds.go`
//! (`GetShortType`, `GetMetricType`) and `pkg/xds/server.go` (`IsWildcardTypeURL`).

/// `envoy.config.cluster.v3.Cluster` (CDS).
pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// `envoy.config.endpoint.v3.ClusterLoadAssignment` (EDS).
pub const ENDPOINT: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// `envoy.config.listener.v3.Listener` (LDS).
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// `envoy.config.route.v3.RouteConfiguration` (RDS).
pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
/// `envoy.extensions.transport_sockets.tls.v3.Secret` (SDS).
pub const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
/// `envoy.config.core.v3.TypedExtensionConfig` (ECDS).
pub const EXTENSION_CONFIG: &str = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig";

/// `istio.networking.nds.v1.NameTable` (NDS: the name table of pilot-agent's DNS proxy, Istio's
/// `model.NameTableType`).
pub const NAME_TABLE: &str = "type.googleapis.com/istio.networking.nds.v1.NameTable";

/// `istio.mcp.v1alpha1.Resource`, the `Any` of every MCP-over-xDS config resource.
pub const MCP_RESOURCE: &str = "type.googleapis.com/istio.mcp.v1alpha1.Resource";
/// `istio.mesh.v1alpha1.MeshConfig`, the `Any` of the one resource of [`MCP_MESH_CONFIG`].
pub const MESH_CONFIG: &str = "type.googleapis.com/istio.mesh.v1alpha1.MeshConfig";
/// The MCP-over-xDS type URL of mesh config (Istio's `gvk.MeshConfig`).
pub const MCP_MESH_CONFIG: &str = "core/v1alpha1/MeshConfig";

/// `istio.io/debug`: istiod's generic debug type (`pilot/pkg/xds/v3.DebugType`, `debuggen.go`). The one
/// resource name is a debug path with its query (`syncz`, `config_dump?proxyID=…`); the answer is one
/// resource of this type whose bytes are what the HTTP debug handler of `/debug/<name>` writes.
pub const DEBUG: &str = "istio.io/debug";
/// `istio.io/debug/syncz`: one `envoy.service.status.v3.ClientConfig` per connected proxy (istiod's
/// `statusgen.go`), what `istioctl proxy-status` and `istioctl version --remote` read.
pub const DEBUG_SYNCZ: &str = "istio.io/debug/syncz";
/// `istio.io/debug/config_dump`: the Envoy admin `ConfigDump` sections (one `Any` each) of the proxy
/// named by the one resource name (istiod's `statusgen.go`), what `istioctl proxy-status POD` diffs.
pub const DEBUG_CONFIG_DUMP: &str = "istio.io/debug/config_dump";

/// Whether `type_url` is one of istiod's debug types ([`DEBUG`] and `istio.io/debug/…`): answered
/// only on request, to authenticated callers, with resources of other message types.
pub fn is_debug_type(type_url: &str) -> bool {
    type_url == DEBUG || type_url.strip_prefix(DEBUG).is_some_and(|rest| rest.starts_with('/'))
}

/// Whether `type_url` is an MCP-over-xDS config type (`group/version/Kind`, Istio's `apigen`
/// request types): anything that is not a protobuf `Any` type URL.
pub fn is_mcp_type(type_url: &str) -> bool {
    !type_url.starts_with("type.googleapis.com/")
        && !is_debug_type(type_url)
        && type_url.split('/').count() == 3
}

/// Whether `type_url` is one of Envoy's resource types (`type.googleapis.com/envoy.…`): those every
/// client answers with an ACK or NACK (Envoy, gRPC, istiod's `adsc`), so flow control
/// ([`crate::AdsConfig::flow_control`]) may wait for their answers. Other types are not always answered:
/// istiod's MCP client (`pkg/adsc`) never ACKs a MeshConfig response with resources, nor
/// `istio.io/debug` responses.
pub fn is_envoy_type(type_url: &str) -> bool {
    type_url.starts_with("type.googleapis.com/envoy.")
}

/// Whether a resource packed as `any_type` may go out in a response of `response_type`. Envoy
/// types: only the same type (a client rejects the whole response otherwise). The one exception is
/// debug types ([`is_debug_type`]), whose answers carry status and admin messages, and
/// MCP-over-xDS, where the response type names a config kind and the resources are wrapped:
/// `networking.istio.io/v1/VirtualService` carries [`MCP_RESOURCE`]s and [`MCP_MESH_CONFIG`] a raw
/// [`MESH_CONFIG`] (Istio's `apigen`).
pub fn resource_type_matches(response_type: &str, any_type: &str) -> bool {
    if response_type == any_type {
        return true;
    }
    if response_type == MCP_MESH_CONFIG {
        return any_type == MESH_CONFIG;
    }
    if is_debug_type(response_type) {
        // Debug answers carry other messages (ClientConfig, the ConfigDump sections), as istiod's.
        return true;
    }
    is_mcp_type(response_type) && any_type == MCP_RESOURCE
}

/// Whether a subscription to `type_url` may be a wildcard ("all resources of this type for me").
///
/// By the xDS spec, Listener and Cluster are wildcard-capable and RouteConfiguration,
/// ClusterLoadAssignment, Secret and TypedExtensionConfig are not: for those, an empty name list means
/// "no longer interested" (unsubscribe). Like Istio, every other (non-Envoy) type is treated as
/// wildcard-capable.
pub fn is_wildcard_type(type_url: &str) -> bool {
    !matches!(type_url, ENDPOINT | ROUTE | SECRET | EXTENSION_CONFIG)
}

/// Whether a State-of-the-World response for `type_url` must carry the complete set of the client's
/// resources (a resource missing from the response is deleted by the client).
///
/// True for Listener and Cluster (and, like Istio, for non-Envoy types); false for the named types,
/// whose SotW responses may carry only the resources that changed.
pub fn sotw_requires_full_state(type_url: &str) -> bool {
    is_wildcard_type(type_url)
}

/// Whether a Delta response to a request reports the explicitly subscribed names that do not exist
/// in `removed_resources`, so the client stops waiting for them.
///
/// True for every type except Secret: a secret that cannot be served yet (e.g. a certificate file
/// that is missing) is left unanswered, so Envoy keeps the cluster or listener that needs it warming
/// until it arrives or the SDS initial fetch timeout passes, exactly as with SotW (where an absent
/// resource is simply not sent). Envoy would take a removal as "stop waiting" and activate the
/// cluster or listener without its certificate.
pub fn delta_reports_missing(type_url: &str) -> bool {
    type_url != SECRET
}

/// Rank of `type_url` in the push order of one ADS stream: CDS, EDS, LDS, RDS, SDS, then every other
/// type ("make before break": a cluster exists before endpoints are assigned to it, a listener's
/// routes arrive after the listener; Istio's `PushOrder`).
pub fn push_rank(type_url: &str) -> u8 {
    match type_url {
        CLUSTER => 0,
        ENDPOINT => 1,
        LISTENER => 2,
        ROUTE => 3,
        SECRET => 4,
        _ => 5,
    }
}

/// Sorts type URLs into push order (see [`push_rank`]); types of equal rank sort by name so the
/// order is deterministic.
pub fn sort_push_order<S: AsRef<str>>(types: &mut [S]) {
    types.sort_by(|a, b| (push_rank(a.as_ref()), a.as_ref()).cmp(&(push_rank(b.as_ref()), b.as_ref())));
}

/// Short upper-case name for logs (`CDS`, `EDS`, `LDS`, `RDS`, `SDS`, `ECDS`); the type URL itself
/// for other types.
pub fn short_name(type_url: &str) -> &str {
    match type_url {
        CLUSTER => "CDS",
        ENDPOINT => "EDS",
        LISTENER => "LDS",
        ROUTE => "RDS",
        SECRET => "SDS",
        EXTENSION_CONFIG => "ECDS",
        NAME_TABLE => "NDS",
        other => other,
    }
}

/// Metric label value for `type_url` (`cds`, `eds`, `lds`, `rds`, `sds`, `ecds`), as Istio's
/// `pilot_xds_pushes{type}` and `pilot_total_xds_rejects{type}` use; the type URL itself for other
/// types.
pub fn metric_type(type_url: &str) -> &str {
    match type_url {
        CLUSTER => "cds",
        ENDPOINT => "eds",
        LISTENER => "lds",
        ROUTE => "rds",
        SECRET => "sds",
        EXTENSION_CONFIG => "ecds",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_types_carry_wrapped_resources_and_envoy_types_only_their_own() {
        assert!(resource_type_matches(CLUSTER, CLUSTER));
        assert!(!resource_type_matches(CLUSTER, LISTENER));
        assert!(!resource_type_matches(CLUSTER, MCP_RESOURCE));
        assert!(resource_type_matches("networking.istio.io/v1/VirtualService", MCP_RESOURCE));
        assert!(!resource_type_matches("networking.istio.io/v1/VirtualService", CLUSTER));
        assert!(!resource_type_matches("networking.istio.io/v1/VirtualService", MESH_CONFIG));
        assert!(resource_type_matches(MCP_MESH_CONFIG, MESH_CONFIG));
        assert!(!resource_type_matches(MCP_MESH_CONFIG, MCP_RESOURCE));
        assert!(is_mcp_type("security.istio.io/v1/AuthorizationPolicy"));
        assert!(!is_mcp_type("type.googleapis.com/istio.networking.nds.v1.NameTable"));
        assert!(!is_mcp_type("VirtualService"));
        assert!(!is_mcp_type(DEBUG_CONFIG_DUMP));
    }

    #[test]
    fn debug_types_are_istiods_prefix_and_carry_any_message() {
        assert!(is_debug_type(DEBUG) && is_debug_type(DEBUG_SYNCZ) && is_debug_type(DEBUG_CONFIG_DUMP));
        assert!(!is_debug_type("istio.io/debugger") && !is_debug_type(CLUSTER));
        assert!(resource_type_matches(
            DEBUG_SYNCZ,
            "type.googleapis.com/envoy.service.status.v3.ClientConfig"
        ));
        assert!(!is_envoy_type(DEBUG_SYNCZ));
    }

    #[test]
    fn wildcard_types_follow_the_xds_spec() {
        assert!(is_wildcard_type(CLUSTER));
        assert!(is_wildcard_type(LISTENER));
        assert!(!is_wildcard_type(ROUTE));
        assert!(!is_wildcard_type(ENDPOINT));
        assert!(!is_wildcard_type(SECRET));
        assert!(is_wildcard_type("type.googleapis.com/istio.networking.nds.v1.NameTable"));
    }

    #[test]
    fn delta_reports_missing_names_except_secrets() {
        assert!(delta_reports_missing(ENDPOINT));
        assert!(delta_reports_missing(ROUTE));
        assert!(!delta_reports_missing(SECRET));
    }

    #[test]
    fn push_order_is_cds_eds_lds_rds_then_others() {
        let mut types = vec!["z.other", ROUTE, LISTENER, "a.other", SECRET, ENDPOINT, CLUSTER];
        sort_push_order(&mut types);
        assert_eq!(types, vec![CLUSTER, ENDPOINT, LISTENER, ROUTE, SECRET, "a.other", "z.other"]);
    }

    #[test]
    fn type_urls_match_the_envoy_types_messages() {
        use envoy_types::pb::envoy::config;
        use prost::Name;
        assert_eq!(CLUSTER, config::cluster::v3::Cluster::type_url());
        assert_eq!(ENDPOINT, config::endpoint::v3::ClusterLoadAssignment::type_url());
        assert_eq!(LISTENER, config::listener::v3::Listener::type_url());
        assert_eq!(ROUTE, config::route::v3::RouteConfiguration::type_url());
        assert_eq!(
            SECRET,
            envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret::type_url()
        );
        assert_eq!(EXTENSION_CONFIG, config::core::v3::TypedExtensionConfig::type_url());
        assert_eq!(metric_type(ROUTE), "rds");
        assert_eq!(short_name(CLUSTER), "CDS");
    }
}
