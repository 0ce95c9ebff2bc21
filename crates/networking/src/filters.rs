//! Network and HTTP filters shared by the listener generators: the HTTP filter chain contract, HTTP
//! connection managers (RDS over ADS or inline routes), TCP proxies, listener filters.
//!
//! HTTP filter chain contract (every connection manager built here): [`FAULT_FILTER`],
//! [`CORS_FILTER`], then [`ROUTER_FILTER`] last, each with a typed config of its own type URL.
//! Route translation puts per-route fault and CORS settings in `typed_per_filter_config` under those
//! names.

use envoy_types::pb::envoy::{
    config::{
        accesslog::v3::AccessLog,
        listener::v3::{Filter, ListenerFilter, filter, listener_filter},
        route::v3::RouteConfiguration,
    },
    extensions::filters::{
        http::{cors::v3::Cors, fault::v3::HttpFault, router::v3::Router},
        listener::{
            http_inspector::v3::HttpInspector, original_dst::v3::OriginalDst, tls_inspector::v3::TlsInspector,
        },
        network::{
            http_connection_manager::v3::{
                HttpConnectionManager, HttpFilter, Rds,
                http_connection_manager::{
                    CodecType, PathWithEscapedSlashesAction, RouteSpecifier, UpgradeConfig,
                },
                http_filter,
            },
            tcp_proxy::v3::{
                TcpProxy,
                tcp_proxy::{self, TunnelingConfig, WeightedCluster, weighted_cluster::ClusterWeight},
            },
        },
    },
};

use crate::convert::{ads_config_source, any, boolv};

/// Name of the fault injection HTTP filter (`envoy.filters.http.fault`), as route translation keys
/// per-route settings.
pub const FAULT_FILTER: &str = crate::route::FAULT_FILTER;
/// Name of the CORS HTTP filter (`envoy.filters.http.cors`), as route translation keys per-route
/// settings.
pub const CORS_FILTER: &str = crate::route::CORS_FILTER;
/// Name of the router HTTP filter (`envoy.filters.http.router`), always last.
pub const ROUTER_FILTER: &str = "envoy.filters.http.router";
/// Name of the HTTP connection manager network filter.
pub const HTTP_CONNECTION_MANAGER: &str = "envoy.filters.network.http_connection_manager";
/// The `server` response header Istio's proxies send (`EnvoyServerName`).
pub const ISTIO_SERVER_NAME: &str = "istio-envoy";
/// Name of the TCP proxy network filter.
pub const TCP_PROXY: &str = "envoy.filters.network.tcp_proxy";
/// Name of the TLS inspector listener filter.
pub const TLS_INSPECTOR: &str = "envoy.filters.listener.tls_inspector";
/// Name of the HTTP inspector listener filter.
pub const HTTP_INSPECTOR: &str = "envoy.filters.listener.http_inspector";
/// Name of the original destination listener filter.
pub const ORIGINAL_DST: &str = "envoy.filters.listener.original_dst";
/// Name of the TLS transport socket.
pub const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";

/// Who the HTTP filters are for: Envoy, or a proxyless gRPC client or server (which NACK filters they
/// do not know unless marked optional: CORS always, fault on the server side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterTarget {
    /// Envoy.
    Envoy,
    /// A proxyless gRPC client (API listener).
    GrpcClient,
    /// A proxyless gRPC server (inbound listener).
    GrpcServer,
}

fn http_filter(name: &str, config: envoy_types::pb::google::protobuf::Any, optional: bool) -> HttpFilter {
    HttpFilter {
        name: name.to_string(),
        is_optional: optional,
        config_type: Some(http_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    }
}

/// The contract's HTTP filters: fault, CORS, router (last).
pub fn http_filters(target: FilterTarget) -> Vec<HttpFilter> {
    vec![
        http_filter(FAULT_FILTER, any(&HttpFault::default()), target == FilterTarget::GrpcServer),
        http_filter(CORS_FILTER, any(&Cors::default()), target != FilterTarget::Envoy),
        http_filter(ROUTER_FILTER, any(&Router::default()), false),
    ]
}

/// Where a connection manager gets its routes.
pub enum Routes {
    /// RDS over ADS, by route configuration name.
    Rds(String),
    /// Inline.
    Inline(Box<RouteConfiguration>),
}

/// An HTTP connection manager with the contract's filters.
pub fn http_connection_manager(
    stat_prefix: &str,
    routes: Routes,
    target: FilterTarget,
    use_remote_address: bool,
) -> HttpConnectionManager {
    let route_specifier = match routes {
        Routes::Rds(name) => {
            RouteSpecifier::Rds(Rds { config_source: Some(ads_config_source()), route_config_name: name })
        }
        Routes::Inline(rc) => RouteSpecifier::RouteConfig(*rc),
    };
    let envoy = target == FilterTarget::Envoy;
    HttpConnectionManager {
        codec_type: CodecType::Auto as i32,
        stat_prefix: if envoy { stat_prefix.to_string() } else { String::new() },
        // Istio's connection manager defaults for Envoy (what istiod sends with the default mesh
        // config): paths normalised (mesh `pathNormalization: BASE`) with escaped slashes kept, no
        // stream idle timeout (Envoy's default of 5 min would reset idle long-lived streams), `100
        // Continue` proxied, and `server: istio-envoy` on responses.
        normalize_path: envoy.then(|| boolv(true)),
        path_with_escaped_slashes_action: if envoy {
            PathWithEscapedSlashesAction::KeepUnchanged as i32
        } else {
            0
        },
        stream_idle_timeout: envoy.then(|| crate::convert::std_duration(std::time::Duration::ZERO)),
        proxy_100_continue: envoy,
        server_name: if envoy { ISTIO_SERVER_NAME.to_string() } else { String::new() },
        http_filters: http_filters(target),
        use_remote_address: (envoy && use_remote_address).then(|| boolv(true)),
        upgrade_configs: if envoy {
            vec![UpgradeConfig { upgrade_type: "websocket".to_string(), ..Default::default() }]
        } else {
            Vec::new()
        },
        route_specifier: Some(route_specifier),
        ..Default::default()
    }
}

/// The connection manager as a network filter.
pub fn hcm_filter(hcm: &HttpConnectionManager) -> Filter {
    Filter {
        name: HTTP_CONNECTION_MANAGER.to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(any(hcm))),
    }
}

/// A TCP proxy to one cluster, or to weighted clusters when several (`(cluster, weight)`), writing
/// `access_log`.
pub fn tcp_proxy_filter(
    stat_prefix: &str,
    destinations: &[(String, u32)],
    access_log: &[AccessLog],
) -> Filter {
    tcp_proxy_filter_with(stat_prefix, destinations, access_log, TcpProxyPolicy::default())
}

/// What a DestinationRule adds to an outbound TCP proxy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TcpProxyPolicy {
    /// `tunneling_config`: each downstream connection is carried to the cluster inside an HTTP
    /// `CONNECT` (or `POST`) request for `hostname` (Istio's `tunnelingconfig.Apply`).
    pub tunneling: Option<TunnelingConfig>,
    /// `hash_policy: [{source_ip: {}}]`: the ring-hash / Maglev cluster picks its host by the
    /// downstream connection's source IP (Istio's `maybeSetHashPolicy` for `consistentHash.useSourceIp`).
    pub source_ip_hash: bool,
}

/// [`tcp_proxy_filter`] with a DestinationRule's `policy` (tunneling, source-IP hashing); the default
/// policy gives the plain proxy.
pub fn tcp_proxy_filter_with(
    stat_prefix: &str,
    destinations: &[(String, u32)],
    access_log: &[AccessLog],
    policy: TcpProxyPolicy,
) -> Filter {
    let cluster_specifier = match destinations {
        [(single, _)] => tcp_proxy::ClusterSpecifier::Cluster(single.clone()),
        many => tcp_proxy::ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: many
                .iter()
                .map(|(name, weight)| ClusterWeight {
                    name: name.clone(),
                    weight: *weight,
                    ..Default::default()
                })
                .collect(),
        }),
    };
    let proxy = TcpProxy {
        stat_prefix: stat_prefix.to_string(),
        cluster_specifier: Some(cluster_specifier),
        access_log: access_log.to_vec(),
        tunneling_config: policy.tunneling,
        hash_policy: if policy.source_ip_hash {
            vec![envoy_types::pb::envoy::r#type::v3::HashPolicy {
                policy_specifier: Some(
                    envoy_types::pb::envoy::r#type::v3::hash_policy::PolicySpecifier::SourceIp(
                        Default::default(),
                    ),
                ),
            }]
        } else {
            Vec::new()
        },
        ..Default::default()
    };
    Filter { name: TCP_PROXY.to_string(), config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))) }
}

/// The TLS inspector listener filter (reads SNI for `server_names` matches).
pub fn tls_inspector() -> ListenerFilter {
    ListenerFilter {
        name: TLS_INSPECTOR.to_string(),
        // Istio's 512-byte first read (Envoy's default is 64 KiB): enough for a ClientHello.
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(&TlsInspector {
            initial_read_buffer_size: Some(crate::convert::u32v(512)),
            ..Default::default()
        }))),
        ..Default::default()
    }
}

/// The HTTP inspector listener filter: reports `http/1.1` or `h2c` as the application protocol of a
/// plaintext HTTP connection, for the `application_protocols` match of a sniffed listener's HTTP chain
/// (Envoy's `envoy.filters.listener.http_inspector`, as istiod configures it: no settings).
pub fn http_inspector() -> ListenerFilter {
    ListenerFilter {
        name: HTTP_INSPECTOR.to_string(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(&HttpInspector::default()))),
        ..Default::default()
    }
}

/// The original destination listener filter (restores the pre-redirect destination).
pub fn original_dst() -> ListenerFilter {
    ListenerFilter {
        name: ORIGINAL_DST.to_string(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(&OriginalDst::default()))),
        ..Default::default()
    }
}
