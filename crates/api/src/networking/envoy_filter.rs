//! `EnvoyFilter` (`networking.istio.io`): patches applied to the Envoy configuration Istio generates
//! for selected proxies.
//!
//! Follows `networking/v1alpha3/envoy_filter.proto` of the Istio API (package
//! `istio.networking.v1alpha3`). Everything nested in `EnvoyFilter` ([`ApplyTo`], [`PatchContext`],
//! [`ProxyMatch`], [`ListenerMatch`], [`Patch`], …) lives in this module, which is the `envoy_filter`
//! module prost-build would generate for them; deeper levels are submodules
//! ([`listener_match`], [`route_configuration_match`], [`waypoint_match`], [`patch`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wkt::is_default;

/// A set of patches to the Envoy configuration of the selected workloads (or target resources).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EnvoyFilter {
    /// Workloads to patch; unset patches every workload of the namespace (of every namespace when
    /// the EnvoyFilter is in the root namespace). At most one of this and `targetRefs`.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub workload_selector: Option<super::sidecar::WorkloadSelector>,
    /// Resources (Gateway, GatewayClass, Service, ServiceEntry) whose proxies are patched. At most
    /// one of this and `workloadSelector`.
    #[prost(message, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_refs: Vec<crate::type_v1beta1::PolicyTargetReference>,
    /// The patches, applied in order.
    #[prost(message, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub config_patches: Vec<EnvoyConfigObjectPatch>,
    /// Order among EnvoyFilters of the same context (lower first; default 0, negative allowed).
    #[prost(int32, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub priority: i32,
}

crate::proto_enum! {
    /// The kind of Envoy configuration object a patch applies to.
    pub enum ApplyTo {
        /// Not set (invalid).
        Invalid = 0 => "INVALID",
        /// A listener.
        Listener = 1 => "LISTENER",
        /// A filter chain of a listener.
        FilterChain = 2 => "FILTER_CHAIN",
        /// A network filter (modify one or add one).
        NetworkFilter = 3 => "NETWORK_FILTER",
        /// An HTTP filter of the HTTP connection manager (modify one or add one).
        HttpFilter = 4 => "HTTP_FILTER",
        /// A route configuration (RDS) as a whole; only `MERGE` is allowed.
        RouteConfiguration = 5 => "ROUTE_CONFIGURATION",
        /// A virtual host of a route configuration.
        VirtualHost = 6 => "VIRTUAL_HOST",
        /// A route of the matched virtual host.
        HttpRoute = 7 => "HTTP_ROUTE",
        /// A cluster (CDS); also used to add clusters.
        Cluster = 8 => "CLUSTER",
        /// An extension config (ECDS; HTTP filters only).
        ExtensionConfig = 9 => "EXTENSION_CONFIG",
        /// Deprecated: the bootstrap configuration.
        Bootstrap = 10 => "BOOTSTRAP",
        /// A listener filter.
        ListenerFilter = 11 => "LISTENER_FILTER",
    }
}

crate::proto_enum! {
    /// The proxy type and traffic direction a patch applies to.
    pub enum PatchContext {
        /// Sidecars and gateways, both directions.
        Any = 0 => "ANY",
        /// Sidecar inbound listeners/routes/clusters.
        SidecarInbound = 1 => "SIDECAR_INBOUND",
        /// Sidecar outbound listeners/routes/clusters.
        SidecarOutbound = 2 => "SIDECAR_OUTBOUND",
        /// Gateway listeners/routes/clusters.
        Gateway = 3 => "GATEWAY",
        /// Waypoint listeners/routes/clusters.
        Waypoint = 4 => "WAYPOINT",
    }
}

/// Properties of the proxy to match.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProxyMatch {
    /// RE2 regular expression matched against the proxy's Istio version (`ISTIO_VERSION` metadata).
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub proxy_version: String,
    /// Node metadata entries the proxy must have, with exactly these (string) values.
    #[prost(btree_map = "string, string", tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub metadata: BTreeMap<String, String>,
}

/// Conditions a cluster must meet to be patched.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterMatch {
    /// Service port of the cluster (target port for inbound clusters); 0 matches any.
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub port_number: u32,
    /// Fully qualified service name (ServiceEntry host); empty matches any; ignored for inbound.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub service: String,
    /// Subset of the service; empty matches any.
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub subset: String,
    /// Exact cluster name (e.g. `PassthroughCluster`); set alone to match by name.
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
}

/// Conditions a route configuration (or a virtual host / route in it) must meet to be patched.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteConfigurationMatch {
    /// Service or gateway server port the route configuration is for; 0 matches all ports.
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub port_number: u32,
    /// Gateway server port name (`GATEWAY` context only).
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub port_name: String,
    /// Gateway config `namespace/name` the route configuration is for (`GATEWAY` context only).
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub gateway: String,
    /// A virtual host to patch.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub vhost: Option<route_configuration_match::VirtualHostMatch>,
    /// Route configuration name (e.g. `http_proxy`).
    #[prost(string, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
}

/// Items nested in [`RouteConfigurationMatch`].
pub mod route_configuration_match {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// Conditions a route in a virtual host must meet.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct RouteMatch {
        /// Route name (`default`, or the name of the VirtualService HTTP route).
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub name: String,
        /// Route action kind to match (default `ANY`).
        #[prost(enumeration = "route_match::Action", tag = "2")]
        #[serde(with = "route_match::Action", skip_serializing_if = "is_default")]
        pub action: i32,
    }

    /// Items nested in [`RouteMatch`].
    pub mod route_match {
        crate::proto_enum! {
            /// The action of an Envoy route.
            pub enum Action {
                /// Any action.
                Any = 0 => "ANY",
                /// Routes to a cluster or weighted clusters.
                Route = 1 => "ROUTE",
                /// Redirects.
                Redirect = 2 => "REDIRECT",
                /// Responds directly.
                DirectResponse = 3 => "DIRECT_RESPONSE",
            }
        }
    }

    /// Conditions a virtual host in a route configuration must meet.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct VirtualHostMatch {
        /// Virtual host name (`host:port` for those Istio generates).
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub name: String,
        /// A domain the virtual host must serve.
        #[prost(string, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub domain_name: String,
        /// A route within the virtual host to patch.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub route: Option<RouteMatch>,
    }
}

/// Conditions a listener (or a filter chain / filter in it) must meet to be patched.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListenerMatch {
    /// Service or gateway port of the listener; 0 matches all listeners.
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub port_number: u32,
    /// Service port name, case-insensitive (not implemented by Istio).
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub port_name: String,
    /// A filter chain (and optionally a filter in it) to patch instead of the whole listener.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub filter_chain: Option<listener_match::FilterChainMatch>,
    /// A listener filter name to patch.
    #[prost(string, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub listener_filter: String,
    /// Listener name (`IP:Port` for those Istio generates).
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
}

/// Items nested in [`ListenerMatch`].
pub mod listener_match {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// Conditions a filter chain of a listener must meet.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct FilterChainMatch {
        /// Filter chain name.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub name: String,
        /// SNI of the chain's match (chains without SNI match do not match).
        #[prost(string, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub sni: String,
        /// `raw_buffer` or `tls` (`SIDECAR_INBOUND` only).
        #[prost(string, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub transport_protocol: String,
        /// Comma-separated application protocols (`h2`, `http/1.1`, `http/1.0`; sidecars only).
        #[prost(string, tag = "4")]
        #[serde(skip_serializing_if = "is_default")]
        pub application_protocols: String,
        /// A network filter of the chain to patch (e.g. `envoy.filters.network.http_connection_manager`).
        #[prost(message, optional, tag = "5")]
        #[serde(skip_serializing_if = "is_default")]
        pub filter: Option<FilterMatch>,
        /// Destination port of the chain's match (chains without one do not match).
        #[prost(uint32, tag = "6")]
        #[serde(skip_serializing_if = "is_default")]
        pub destination_port: u32,
    }

    /// Conditions a network filter in a filter chain must meet.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct FilterMatch {
        /// Canonical Envoy filter name.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub name: String,
        /// A filter inside this filter (e.g. an HTTP filter of the HTTP connection manager).
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub sub_filter: Option<SubFilterMatch>,
    }

    /// Conditions a filter inside another filter must meet.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct SubFilterMatch {
        /// Filter name.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub name: String,
    }
}

/// Conditions waypoint configuration must meet to be patched (`WAYPOINT` context only).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WaypointMatch {
    /// Service port (1–65535); 0 matches all ports.
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub port_number: u32,
    /// A route to patch.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub route: Option<waypoint_match::RouteMatch>,
    /// A filter to patch (e.g. `envoy.filters.network.http_connection_manager`).
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub filter: Option<waypoint_match::FilterMatch>,
}

/// Items nested in [`WaypointMatch`].
pub mod waypoint_match {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// Conditions a waypoint route must meet.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct RouteMatch {
        /// Route name (`default`, or the name of the route rule).
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub name: String,
    }

    /// Conditions a waypoint filter must meet.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct FilterMatch {
        /// Canonical Envoy filter name.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub name: String,
        /// A filter inside this filter (e.g. an HTTP filter).
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub sub_filter: Option<filter_match::SubFilterMatch>,
    }

    /// Items nested in [`FilterMatch`].
    pub mod filter_match {
        use serde::{Deserialize, Serialize};

        use crate::wkt::is_default;

        /// Conditions a filter inside another filter must meet.
        #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct SubFilterMatch {
            /// Filter name.
            #[prost(string, tag = "1")]
            #[serde(skip_serializing_if = "is_default")]
            pub name: String,
        }
    }
}

/// How the selected object is changed.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Patch {
    /// The operation.
    #[prost(enumeration = "patch::Operation", tag = "1")]
    #[serde(with = "patch::Operation", skip_serializing_if = "is_default")]
    pub operation: i32,
    /// The Envoy config (JSON) merged into, added or used as replacement, as the operation says.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub value: Option<crate::wkt::Struct>,
    /// Where an `ADD`ed filter goes relative to Istio's own filters (preferred over `INSERT_*`).
    #[prost(enumeration = "patch::FilterClass", tag = "3")]
    #[serde(with = "patch::FilterClass", skip_serializing_if = "is_default")]
    pub filter_class: i32,
}

/// Items nested in [`Patch`].
pub mod patch {
    crate::proto_enum! {
        /// How a patch is applied.
        pub enum Operation {
            /// Not set (invalid).
            Invalid = 0 => "INVALID",
            /// Proto-merge the value into the object.
            Merge = 1 => "MERGE",
            /// Add the value to the list (listeners, clusters, virtual hosts, filters); ignored for
            /// `ROUTE_CONFIGURATION` and `HTTP_ROUTE`.
            Add = 2 => "ADD",
            /// Remove the selected object from its list; needs no value.
            Remove = 3 => "REMOVE",
            /// Insert before the selected filter/route (at the front when none is selected).
            InsertBefore = 4 => "INSERT_BEFORE",
            /// Insert after the selected filter/route (at the end when none is selected).
            InsertAfter = 5 => "INSERT_AFTER",
            /// Insert first in the list.
            InsertFirst = 6 => "INSERT_FIRST",
            /// Replace the named filter (`HTTP_FILTER`, `NETWORK_FILTER` only).
            Replace = 7 => "REPLACE",
            /// Proto-merge, but lists in the value replace lists in the object.
            MergeAndReplaceList = 8 => "MERGE_AND_REPLACE_LIST",
        }
    }

    crate::proto_enum! {
        /// Insertion point of an added filter relative to the filters Istio inserts.
        pub enum FilterClass {
            /// Istio decides.
            Unspecified = 0 => "UNSPECIFIED",
            /// After Istio's authentication filters.
            Authn = 1 => "AUTHN",
            /// After Istio's authorization filters.
            Authz = 2 => "AUTHZ",
            /// Before Istio's stats filters.
            Stats = 3 => "STATS",
        }
    }
}

/// Which generated configuration object a patch applies to.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EnvoyConfigObjectMatch {
    /// Proxy type and direction (default `ANY`).
    #[prost(enumeration = "PatchContext", tag = "1")]
    #[serde(with = "PatchContext", skip_serializing_if = "is_default")]
    pub context: i32,
    /// Properties of the proxy.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub proxy: Option<ProxyMatch>,
    /// Match a listener.
    /// One of `object_types`: at most one of `listener`, `routeConfiguration`, `cluster`, `waypoint` may be set.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub listener: Option<ListenerMatch>,
    /// Match an HTTP route configuration.
    /// One of `object_types`: at most one of `listener`, `routeConfiguration`, `cluster`, `waypoint` may be set.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub route_configuration: Option<RouteConfigurationMatch>,
    /// Match a cluster.
    /// One of `object_types`: at most one of `listener`, `routeConfiguration`, `cluster`, `waypoint` may be set.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub cluster: Option<ClusterMatch>,
    /// Match waypoint configuration (`WAYPOINT` context only).
    /// One of `object_types`: at most one of `listener`, `routeConfiguration`, `cluster`, `waypoint` may be set.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub waypoint: Option<WaypointMatch>,
}

/// One patch: what kind of object, which ones, and the change.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EnvoyConfigObjectPatch {
    /// Kind of object patched; `match` should select objects of that kind.
    #[prost(enumeration = "ApplyTo", tag = "1")]
    #[serde(with = "ApplyTo", skip_serializing_if = "is_default")]
    pub apply_to: i32,
    /// Which objects are patched; unset matches all of the `applyTo` kind.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#match: Option<EnvoyConfigObjectMatch>,
    /// The change.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub patch: Option<Patch>,
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::{de::from_node, yaml::parse_documents};

    fn spec(text: &str) -> (EnvoyFilter, Vec<String>) {
        let root = parse_documents(text).remove(0).unwrap().root.unwrap();
        let (v, unknown) = from_node::<EnvoyFilter>(&root, "spec").unwrap();
        (v, unknown.into_iter().map(|u| u.path).collect())
    }

    const EF: &str = r#"
workloadSelector:
  labels:
    app: reviews
priority: -1
configPatches:
- applyTo: HTTP_FILTER
  match:
    context: SIDECAR_INBOUND
    proxy:
      proxyVersion: '^1\.2.*'
      metadata:
        NAME: reviews
    listener:
      portNumber: 8080
      filterChain:
        sni: app.example.com
        destinationPort: 8443
        filter:
          name: envoy.filters.network.http_connection_manager
          subFilter:
            name: envoy.filters.http.router
  patch:
    operation: INSERT_BEFORE
    filterClass: AUTHZ
    value:
      name: envoy.lua
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
        inlineCode: "function envoy_on_request(h) end"
        weight: 2.5
        enabled: true
        list: [1, "x", null]
- applyTo: VIRTUAL_HOST
  match:
    context: GATEWAY
    routeConfiguration:
      portNumber: 443
      portName: https
      gateway: istio-system/gw
      vhost:
        name: "a.com:443"
        domainName: a.com
        route:
          name: r1
          action: DIRECT_RESPONSE
  patch:
    operation: MERGE
    value:
      request_headers_to_add: []
- applyTo: CLUSTER
  match:
    cluster:
      service: reviews.default.svc.cluster.local
      subset: v1
      portNumber: 9080
  patch:
    operation: REMOVE
- applyTo: HTTP_ROUTE
  match:
    context: WAYPOINT
    waypoint:
      portNumber: 80
      route: {name: default}
      filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: router}}
  patch:
    operation: MERGE_AND_REPLACE_LIST
    value: {}
"#;

    #[test]
    fn reads_yaml() {
        let (ef, unknown) = spec(EF);
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(ef.workload_selector.as_ref().unwrap().labels["app"], "reviews");
        assert_eq!(ef.priority, -1);
        assert_eq!(ef.config_patches.len(), 4);

        let p0 = &ef.config_patches[0];
        assert_eq!(p0.apply_to, ApplyTo::HttpFilter as i32);
        let m = p0.r#match.as_ref().unwrap();
        assert_eq!(m.context, PatchContext::SidecarInbound as i32);
        let proxy = m.proxy.as_ref().unwrap();
        assert_eq!(proxy.proxy_version, r"^1\.2.*");
        assert_eq!(proxy.metadata["NAME"], "reviews");
        let l = m.listener.as_ref().unwrap();
        assert_eq!(l.port_number, 8080);
        let fc = l.filter_chain.as_ref().unwrap();
        assert_eq!((fc.sni.as_str(), fc.destination_port), ("app.example.com", 8443));
        let f = fc.filter.as_ref().unwrap();
        assert_eq!(f.name, "envoy.filters.network.http_connection_manager");
        assert_eq!(f.sub_filter.as_ref().unwrap().name, "envoy.filters.http.router");
        let patch = p0.patch.as_ref().unwrap();
        assert_eq!(patch.operation, patch::Operation::InsertBefore as i32);
        assert_eq!(patch.filter_class, patch::FilterClass::Authz as i32);
        let value = patch.value.as_ref().unwrap().to_json();
        assert_eq!(value["typed_config"]["weight"], 2.5);
        assert_eq!(value["typed_config"]["list"], serde_json::json!([1, "x", null]));

        let rc = ef.config_patches[1].r#match.as_ref().unwrap().route_configuration.as_ref().unwrap();
        assert_eq!((rc.port_number, rc.port_name.as_str()), (443, "https"));
        let vh = rc.vhost.as_ref().unwrap();
        assert_eq!(vh.domain_name, "a.com");
        assert_eq!(
            vh.route.as_ref().unwrap().action,
            route_configuration_match::route_match::Action::DirectResponse as i32
        );

        let c = ef.config_patches[2].r#match.as_ref().unwrap();
        assert_eq!(c.context, PatchContext::Any as i32);
        assert_eq!(c.cluster.as_ref().unwrap().subset, "v1");
        assert!(ef.config_patches[2].patch.as_ref().unwrap().value.is_none());

        let w = ef.config_patches[3].r#match.as_ref().unwrap().waypoint.as_ref().unwrap();
        assert_eq!(w.route.as_ref().unwrap().name, "default");
        assert_eq!(w.filter.as_ref().unwrap().sub_filter.as_ref().unwrap().name, "router");

        let (ef, unknown) = spec(
            "targetRefs:\n- {group: gateway.networking.k8s.io, kind: Gateway, name: gw}\nconfigPatches:\n- applyTo: CLUSTER\n  match:\n    cluster: {servce: x}\n  patch: {operation: ADD, value: {anything: {goes: here}}}\n",
        );
        assert_eq!(ef.target_refs[0].kind, "Gateway");
        // Unknown fields inside a patch value are part of the free-form Struct, not unknown.
        assert_eq!(unknown, vec!["spec.configPatches[0].match.cluster.servce"]);
    }

    #[test]
    fn protobuf_round_trip_and_wire() {
        let (ef, _) = spec(EF);
        assert_eq!(EnvoyFilter::decode(&*ef.encode_to_vec()).unwrap(), ef);

        // config_patches = 4 (0x22) { apply_to = 1 (0x08) CLUSTER = 8, match = 2 (0x12)
        // { cluster = 5 (0x2a) { port_number = 1 (0x08) 80 } } }; priority = 5 (0x28) 3.
        let ef = EnvoyFilter {
            config_patches: vec![EnvoyConfigObjectPatch {
                apply_to: ApplyTo::Cluster as i32,
                r#match: Some(EnvoyConfigObjectMatch {
                    cluster: Some(ClusterMatch { port_number: 80, ..Default::default() }),
                    ..Default::default()
                }),
                patch: None,
            }],
            priority: 3,
            ..Default::default()
        };
        assert_eq!(ef.encode_to_vec(), vec![0x22, 8, 0x08, 8, 0x12, 4, 0x2a, 2, 0x08, 80, 0x28, 3]);

        // patch = 3 (0x1a) { operation = 1 (0x08) ADD = 2, value = 2 (0x12) Struct { fields = 1
        // (0x0a) entry { key = 1 (0x0a) "a", value = 2 (0x12) Value { bool_value = 4 (0x20) true } } },
        // filter_class = 3 (0x18) STATS = 3 }.
        let patch = EnvoyConfigObjectPatch {
            patch: Some(Patch {
                operation: patch::Operation::Add as i32,
                value: Some(crate::wkt::Struct::from_json_map(
                    serde_json::json!({"a": true}).as_object().unwrap(),
                )),
                filter_class: patch::FilterClass::Stats as i32,
            }),
            ..Default::default()
        };
        assert_eq!(
            patch.encode_to_vec(),
            vec![0x1a, 15, 0x08, 2, 0x12, 9, 0x0a, 7, 0x0a, 1, b'a', 0x12, 2, 0x20, 1, 0x18, 3]
        );

        // target_refs = 6 (0x32) { kind = 2 (0x12) "K" }.
        let ef = EnvoyFilter {
            target_refs: vec![crate::type_v1beta1::PolicyTargetReference {
                kind: "K".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(ef.encode_to_vec(), vec![0x32, 3, 0x12, 1, b'K']);
    }

    #[test]
    fn json_output() {
        let (ef, _) = spec(EF);
        let v = serde_json::to_value(&ef).unwrap();
        let p0 = &v["configPatches"][0];
        assert_eq!(p0["applyTo"], "HTTP_FILTER");
        assert_eq!(p0["match"]["context"], "SIDECAR_INBOUND");
        assert_eq!(p0["match"]["listener"]["filterChain"]["destinationPort"], 8443);
        assert_eq!(
            p0["match"]["listener"]["filterChain"]["filter"]["subFilter"]["name"],
            "envoy.filters.http.router"
        );
        assert_eq!(p0["patch"]["operation"], "INSERT_BEFORE");
        assert_eq!(p0["patch"]["filterClass"], "AUTHZ");
        assert_eq!(
            p0["patch"]["value"]["typed_config"]["@type"],
            "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua"
        );
        assert_eq!(
            v["configPatches"][1]["match"]["routeConfiguration"]["vhost"]["route"]["action"],
            "DIRECT_RESPONSE"
        );
        // context ANY (0) is omitted.
        assert!(v["configPatches"][2]["match"].get("context").is_none());
        assert_eq!(v["priority"], -1);
        assert_eq!(v["workloadSelector"], serde_json::json!({"labels": {"app": "reviews"}}));
    }
}
