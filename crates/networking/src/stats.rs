//! Istio's telemetry filters, for the proxies that have them: the `istio.stats` HTTP and network
//! filters (Istio's standard metrics, shaped by the Telemetry API's `metrics`) and the metadata
//! exchange filters that give them the peer's identity (`istio.metadata_exchange`: the HTTP peer
//! metadata filter and the TCP metadata exchange filter). References: Istio's
//! `pilot/pkg/model/telemetry.go` (`generateStatsConfig`, `buildHTTPTelemetryFilter`,
//! `buildTCPTelemetryFilter`), `pilot/pkg/xds/filters/filters.go` (`SidecarInboundMetadataFilter`,
//! `SidecarOutboundMetadataFilter`, `TCPListenerMx`), `pilot/pkg/networking/core/listener_builder.go`
//! and `networkfilter.go` (placement).
//!
//! These filters exist only in istio-proxy. istiod sends them to every proxy; meshpilot sends each
//! one only to proxies whose `node.extensions` list it ([`model::push::node::IstioExtensions`]), so
//! upstream Envoy loads the same listeners without them instead of NACKing.
//!
//! | chain | filters added |
//! |---|---|
//! | HTTP connection manager, sidecar inbound | peer metadata (downstream discovery) first; `istio.stats` before the router |
//! | HTTP connection manager, sidecar outbound and gateways | peer metadata (upstream discovery) first; `istio.stats` before the router |
//! | sidecar inbound chains (HTTP and TCP) | TCP `istio.metadata_exchange` first among the network filters |
//! | gateway TCP / TLS servers with `ISTIO_MUTUAL` | TCP `istio.metadata_exchange` first |
//! | TCP proxies (inbound, outbound, passthrough, gateways) | `istio.stats` right before `tcp_proxy` |
//!
//! Encodings, as istiod sends them: `istio.stats` is a `stats.PluginConfig` packed as its own type
//! (`type.googleapis.com/stats.PluginConfig`); the metadata exchange filters are
//! `udpa.type.v1.TypedStruct`s wrapping `io.istio.http.peer_metadata.Config` and
//! `envoy.tcp.metadataexchange.config.MetadataExchange`. The messages are written here from the
//! field numbers of istio-proxy's and istio/api's protos (none of them are in envoy-types).

use std::{collections::BTreeMap, sync::LazyLock};

use envoy_types::pb::{
    envoy::{
        config::listener::v3::{Filter, filter},
        extensions::filters::network::http_connection_manager::v3::{
            HttpConnectionManager, HttpFilter, http_filter,
        },
    },
    google::protobuf::{Any, Duration, ListValue, Struct, Value, value},
};
use model::{
    ConfigKey,
    push::{
        ProxyContext, ProxyKind,
        extensions::ListenerClass,
        metrics::{DirectionMetrics, ProviderMetrics},
        node::IstioExtensions,
        telemetry::Direction,
    },
};
use prost::Message;

use crate::Snapshot;

/// Name of Istio's stats filters (HTTP and network; istiod's `xds.StatsFilterName`).
pub const STATS_FILTER: &str = "istio.stats";
/// Name of Istio's metadata exchange filters (HTTP peer metadata and TCP; istiod's `MxFilterName`).
pub const METADATA_EXCHANGE_FILTER: &str = "istio.metadata_exchange";
/// Type URL of the stats filter's config (istio/api `envoy/extensions/stats`).
pub const STATS_CONFIG_TYPE_URL: &str = "type.googleapis.com/stats.PluginConfig";
/// Type URL of the `TypedStruct` istiod wraps the metadata exchange configs in.
pub const TYPED_STRUCT_TYPE_URL: &str = "type.googleapis.com/udpa.type.v1.TypedStruct";
/// Type URL of the HTTP peer metadata filter's config (inside the `TypedStruct`).
pub const PEER_METADATA_TYPE_URL: &str = "type.googleapis.com/io.istio.http.peer_metadata.Config";
/// Type URL of the TCP metadata exchange filter's config (inside the `TypedStruct`).
pub const METADATA_EXCHANGE_TYPE_URL: &str =
    "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange";

/// `udpa.type.v1.TypedStruct`: a config given as a `Struct` for the message `type_url` names.
#[derive(Clone, PartialEq, Message)]
pub struct TypedStruct {
    /// The config message's type URL.
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// The config, as protobuf JSON.
    #[prost(message, optional, tag = "2")]
    pub value: Option<Struct>,
}

/// `stats.PluginConfig` (istio/api `envoy/extensions/stats/config.proto`), the fields istiod sets.
#[derive(Clone, PartialEq, Message)]
pub struct PluginConfig {
    /// Do not fall back to the `host` header for the destination service (inbound and gateways).
    #[prost(bool, tag = "6")]
    pub disable_host_header_fallback: bool,
    /// How often long-lived TCP connections report (the Telemetry `reportingInterval`; unset: 5 s).
    #[prost(message, optional, tag = "7")]
    pub tcp_reporting_duration: Option<Duration>,
    /// Per-metric changes.
    #[prost(message, repeated, tag = "8")]
    pub metrics: Vec<MetricConfig>,
    /// Who reports (`0` `CLIENT_SERVER_DEFAULT`; `1` `SERVER_GATEWAY` for waypoints, not served here).
    #[prost(int32, tag = "10")]
    pub reporter: i32,
}

/// `stats.MetricConfig`: the changes to one metric.
#[derive(Clone, PartialEq, Message)]
pub struct MetricConfig {
    /// Tags set, by tag name, to CEL expressions.
    #[prost(btree_map = "string, string", tag = "1")]
    pub dimensions: BTreeMap<String, String>,
    /// The metric's name without the `istio_` prefix (`requests_total`), or a custom metric's.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Tags removed.
    #[prost(string, repeated, tag = "3")]
    pub tags_to_remove: Vec<String>,
    /// A CEL condition for recording (istiod never sets it).
    #[prost(string, tag = "4")]
    pub r#match: String,
    /// The metric is not recorded.
    #[prost(bool, tag = "5")]
    pub drop: bool,
}

/// The Prometheus name (without `istio_`) of a standard metric (istiod's `metricToPrometheusMetric`);
/// `None` for a custom metric.
pub fn prometheus_name(metric: &str) -> Option<&'static str> {
    Some(match metric {
        "REQUEST_COUNT" => "requests_total",
        "REQUEST_DURATION" => "request_duration_milliseconds",
        "REQUEST_SIZE" => "request_bytes",
        "RESPONSE_SIZE" => "response_bytes",
        "TCP_OPENED_CONNECTIONS" => "tcp_connections_opened_total",
        "TCP_CLOSED_CONNECTIONS" => "tcp_connections_closed_total",
        "TCP_SENT_BYTES" => "tcp_sent_bytes_total",
        "TCP_RECEIVED_BYTES" => "tcp_received_bytes_total",
        "GRPC_REQUEST_MESSAGES" => "request_messages_total",
        "GRPC_RESPONSE_MESSAGES" => "response_messages_total",
        _ => return None,
    })
}

/// The `stats.PluginConfig` of one provider for listeners of `class` (istiod's
/// `generateStatsConfig`); `None` when the class' direction has every metric disabled.
pub fn plugin_config(
    class: ListenerClass,
    metrics: &DirectionMetrics,
    reporting_interval: Option<&api::wkt::Duration>,
) -> Option<PluginConfig> {
    if metrics.disabled {
        return None;
    }
    Some(PluginConfig {
        disable_host_header_fallback: matches!(class, ListenerClass::SidecarInbound | ListenerClass::Gateway),
        tcp_reporting_duration: reporting_interval.map(crate::convert::duration),
        metrics: metrics
            .overrides
            .iter()
            .map(|o| MetricConfig {
                dimensions: o
                    .tags
                    .iter()
                    .filter(|t| !t.remove)
                    .map(|t| (t.name.clone(), t.value.clone()))
                    .collect(),
                name: prometheus_name(&o.name).map_or_else(|| o.name.clone(), str::to_string),
                tags_to_remove: o.tags.iter().filter(|t| t.remove).map(|t| t.name.clone()).collect(),
                r#match: String::new(),
                drop: o.disabled,
            })
            .collect(),
        reporter: 0,
    })
}

fn packed(config: &PluginConfig) -> Any {
    Any { type_url: STATS_CONFIG_TYPE_URL.to_string(), value: config.encode_to_vec() }
}

fn object(fields: Vec<(&str, Value)>) -> Value {
    Value {
        kind: Some(value::Kind::StructValue(Struct {
            fields: fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        })),
    }
}

fn list(values: Vec<Value>) -> Value {
    Value { kind: Some(value::Kind::ListValue(ListValue { values })) }
}

fn typed_struct(type_url: &str, fields: Vec<(&str, Value)>) -> Any {
    let wrapped = TypedStruct {
        type_url: type_url.to_string(),
        value: Some(Struct { fields: fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect() }),
    };
    Any { type_url: TYPED_STRUCT_TYPE_URL.to_string(), value: wrapped.encode_to_vec() }
}

/// `[{istio_headers: {}}, {workload_discovery: {}}]`, the discovery methods of istiod's peer metadata
/// filters.
fn discovery() -> Value {
    list(vec![
        object(vec![("istio_headers", object(vec![]))]),
        object(vec![("workload_discovery", object(vec![]))]),
    ])
}

fn propagation() -> Value {
    list(vec![object(vec![("istio_headers", object(vec![]))])])
}

fn http(config: Any) -> HttpFilter {
    HttpFilter {
        name: METADATA_EXCHANGE_FILTER.to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    }
}

/// istiod's `SidecarInboundMetadataFilter` (built once: a `Struct` is a hash map, so one encoding is
/// kept to keep the listener's bytes stable).
static INBOUND_PEER_METADATA: LazyLock<HttpFilter> = LazyLock::new(|| {
    http(typed_struct(
        PEER_METADATA_TYPE_URL,
        vec![("downstream_discovery", discovery()), ("downstream_propagation", propagation())],
    ))
});

/// istiod's `SidecarOutboundMetadataFilter` (sidecar outbound and gateways).
static OUTBOUND_PEER_METADATA: LazyLock<HttpFilter> = LazyLock::new(|| {
    http(typed_struct(
        PEER_METADATA_TYPE_URL,
        vec![("upstream_discovery", discovery()), ("upstream_propagation", propagation())],
    ))
});

/// istiod's `TCPListenerMx`.
static TCP_METADATA_EXCHANGE: LazyLock<Filter> = LazyLock::new(|| Filter {
    name: METADATA_EXCHANGE_FILTER.to_string(),
    config_type: Some(filter::ConfigType::TypedConfig(typed_struct(
        METADATA_EXCHANGE_TYPE_URL,
        vec![
            ("protocol", Value { kind: Some(value::Kind::StringValue("istio-peer-exchange".to_string())) }),
            ("enable_discovery", Value { kind: Some(value::Kind::BoolValue(true)) }),
        ],
    ))),
});

/// istiod's `TCPClusterMx`: the upstream network filter of outbound clusters (the same config as the
/// listener's).
static CLUSTER_METADATA_EXCHANGE: LazyLock<envoy_types::pb::envoy::config::cluster::v3::Filter> =
    LazyLock::new(|| {
        let Some(filter::ConfigType::TypedConfig(config)) = TCP_METADATA_EXCHANGE.config_type.clone() else {
            unreachable!("built with a typed config")
        };
        envoy_types::pb::envoy::config::cluster::v3::Filter {
            name: METADATA_EXCHANGE_FILTER.to_string(),
            typed_config: Some(config),
            ..Default::default()
        }
    });

/// Adds istiod's upstream `istio.metadata_exchange` filter to an outbound cluster (istiod's
/// `applyMetadataExchange`: service and subset clusters and `PassthroughCluster`) of a proxy that has
/// it as an upstream network filter.
pub fn add_cluster_metadata_exchange(
    proxy: &ProxyContext,
    cluster: &mut envoy_types::pb::envoy::config::cluster::v3::Cluster,
) {
    if proxy.istio_extensions.upstream_metadata_exchange && !proxy.proxyless_grpc {
        cluster.filters.push(CLUSTER_METADATA_EXCHANGE.clone());
    }
}

/// Istio's telemetry filters of one proxy and listener class (empty for proxies without istio-proxy's
/// extensions). Rules in the module documentation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TelemetryFilters {
    /// The HTTP peer metadata filter, first in every connection manager.
    pub http_metadata_exchange: Option<HttpFilter>,
    /// One `istio.stats` HTTP filter per Prometheus provider, before the router.
    pub http_stats: Vec<HttpFilter>,
    /// The TCP metadata exchange filter, first in inbound chains and `ISTIO_MUTUAL` gateway servers.
    pub tcp_metadata_exchange: Option<Filter>,
    /// One `istio.stats` network filter per Prometheus provider, before `tcp_proxy`.
    pub tcp_stats: Vec<Filter>,
    /// What the filters depend on besides the mesh config: the proxy's extensions and the keys of the
    /// Telemetries with `metrics` that apply to it.
    pub key: (IstioExtensions, Vec<ConfigKey>),
}

/// The listener class of `proxy`'s listeners of `direction`.
fn class_of(proxy: &ProxyContext, direction: Direction) -> ListenerClass {
    match (proxy.kind, direction) {
        (ProxyKind::Router, _) => ListenerClass::Gateway,
        (_, Direction::Client) => ListenerClass::SidecarOutbound,
        (_, Direction::Server) => ListenerClass::SidecarInbound,
    }
}

/// The telemetry filters of `proxy`'s listeners of `direction` under `push`.
pub fn telemetry_filters(push: &Snapshot, proxy: &ProxyContext, direction: Direction) -> TelemetryFilters {
    let ext = proxy.istio_extensions;
    if ext.is_none() || proxy.proxyless_grpc {
        return TelemetryFilters::default();
    }
    let (keys, providers) = push.metrics(proxy);
    build(class_of(proxy, direction), ext, &providers, keys)
}

/// [`telemetry_filters`] from resolved parts: the listener class, the proxy's extensions, its metrics
/// providers ([`model::push::metrics::metrics`]) and their Telemetry keys.
pub fn build(
    class: ListenerClass,
    ext: IstioExtensions,
    providers: &[ProviderMetrics],
    keys: Vec<ConfigKey>,
) -> TelemetryFilters {
    let direction =
        if class == ListenerClass::SidecarInbound { Direction::Server } else { Direction::Client };
    let configs: Vec<Any> = providers
        .iter()
        .filter_map(|p| {
            plugin_config(class, p.config.direction(direction), p.config.reporting_interval.as_ref())
        })
        .map(|c| packed(&c))
        .collect();
    let http_peer =
        if class == ListenerClass::SidecarInbound { &INBOUND_PEER_METADATA } else { &OUTBOUND_PEER_METADATA };
    TelemetryFilters {
        http_metadata_exchange: ext.http_peer_metadata.then(|| (**http_peer).clone()),
        http_stats: if ext.http_stats {
            configs
                .iter()
                .map(|c| HttpFilter {
                    name: STATS_FILTER.to_string(),
                    config_type: Some(http_filter::ConfigType::TypedConfig(c.clone())),
                    ..Default::default()
                })
                .collect()
        } else {
            Vec::new()
        },
        tcp_metadata_exchange: ext.tcp_metadata_exchange.then(|| TCP_METADATA_EXCHANGE.clone()),
        tcp_stats: if ext.tcp_stats {
            configs
                .into_iter()
                .map(|c| Filter {
                    name: STATS_FILTER.to_string(),
                    config_type: Some(filter::ConfigType::TypedConfig(c)),
                })
                .collect()
        } else {
            Vec::new()
        },
        key: (ext, keys),
    }
}

impl TelemetryFilters {
    /// Puts the HTTP filters into `hcm`: peer metadata first (ahead of the security filters, which
    /// [`crate::policy::SecurityFilters::apply_http_with`] keeps behind it), stats right before the
    /// router.
    pub fn apply_http(&self, hcm: &mut HttpConnectionManager) {
        if let Some(mx) = &self.http_metadata_exchange
            && !leads_with_metadata_exchange(hcm)
        {
            hcm.http_filters.insert(0, mx.clone());
        }
        if !self.http_stats.is_empty() {
            let at = hcm
                .http_filters
                .iter()
                .position(|f| f.name == crate::filters::ROUTER_FILTER)
                .unwrap_or(hcm.http_filters.len());
            hcm.http_filters.splice(at..at, self.http_stats.iter().cloned());
        }
    }

    /// The network filters of a TCP chain before its terminal filter: the metadata exchange filter
    /// first when `exchange` (inbound chains, `ISTIO_MUTUAL` gateway servers), then `security` and the
    /// stats filters (istiod's `buildCompleteNetworkFilters`).
    pub fn tcp_filters(&self, exchange: bool, security: &[Filter]) -> Vec<Filter> {
        let mut out = Vec::with_capacity(security.len() + self.tcp_stats.len() + 2);
        if exchange {
            out.extend(self.tcp_metadata_exchange.iter().cloned());
        }
        out.extend(security.iter().cloned());
        out.extend(self.tcp_stats.iter().cloned());
        out
    }

    /// [`TelemetryFilters::tcp_filters`] followed by `terminal`.
    pub fn tcp_chain(&self, exchange: bool, security: &[Filter], terminal: Filter) -> Vec<Filter> {
        let mut out = self.tcp_filters(exchange, security);
        out.push(terminal);
        out
    }
}

/// Whether `hcm`'s first HTTP filter is the peer metadata filter (security and extension filters go
/// behind it).
pub fn leads_with_metadata_exchange(hcm: &HttpConnectionManager) -> bool {
    hcm.http_filters.first().is_some_and(|f| f.name == METADATA_EXCHANGE_FILTER)
}

#[cfg(test)]
mod tests {
    use model::push::{
        extension_provider::{ExtensionProvider, ProviderKind},
        metrics::{MetricOverride, MetricsConfig, TagChange},
    };

    use super::*;

    fn prometheus(config: MetricsConfig) -> Vec<ProviderMetrics> {
        vec![ProviderMetrics {
            provider: ExtensionProvider {
                name: "prometheus".into(),
                kind: ProviderKind::Other("prometheus".into()),
            },
            config,
        }]
    }

    fn decode(any: &Any) -> PluginConfig {
        assert_eq!(any.type_url, STATS_CONFIG_TYPE_URL);
        PluginConfig::decode(any.value.as_slice()).unwrap()
    }

    fn stats_of(f: &HttpFilter) -> PluginConfig {
        match &f.config_type {
            Some(http_filter::ConfigType::TypedConfig(any)) => decode(any),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn upstream_envoy_gets_nothing() {
        let f = build(
            ListenerClass::SidecarOutbound,
            IstioExtensions::default(),
            &prometheus(MetricsConfig::default()),
            vec![],
        );
        assert_eq!(f.http_metadata_exchange, None);
        assert!(f.http_stats.is_empty() && f.tcp_stats.is_empty() && f.tcp_metadata_exchange.is_none());
    }

    #[test]
    fn overrides_become_istios_metric_configs() {
        let mut config = MetricsConfig::default();
        config.server.overrides = vec![
            MetricOverride {
                name: "REQUEST_COUNT".into(),
                disabled: false,
                tags: vec![
                    TagChange { name: "request_host".into(), remove: false, value: "request.host".into() },
                    TagChange { name: "source_app".into(), remove: true, value: String::new() },
                ],
            },
            MetricOverride { name: "my_custom".into(), disabled: true, tags: vec![] },
        ];
        config.reporting_interval = Some(api::wkt::Duration { seconds: 15, nanos: 0 });
        let f =
            build(ListenerClass::SidecarInbound, IstioExtensions::ALL, &prometheus(config.clone()), vec![]);
        let c = stats_of(&f.http_stats[0]);
        assert!(c.disable_host_header_fallback, "inbound");
        assert_eq!(c.tcp_reporting_duration, Some(Duration { seconds: 15, nanos: 0 }));
        assert_eq!(c.metrics.len(), 2);
        assert_eq!(c.metrics[0].name, "requests_total");
        assert_eq!(c.metrics[0].dimensions.get("request_host").map(String::as_str), Some("request.host"));
        assert_eq!(c.metrics[0].tags_to_remove, ["source_app"]);
        assert_eq!((c.metrics[1].name.as_str(), c.metrics[1].drop), ("my_custom", true));
        // The client side has no overrides and keeps the host header fallback.
        let out = build(ListenerClass::SidecarOutbound, IstioExtensions::ALL, &prometheus(config), vec![]);
        let c = stats_of(&out.http_stats[0]);
        assert!(!c.disable_host_header_fallback && c.metrics.is_empty());
    }

    #[test]
    fn a_disabled_direction_has_no_stats_filter_but_keeps_metadata_exchange() {
        let mut config = MetricsConfig::default();
        config.client.disabled = true;
        let f = build(ListenerClass::Gateway, IstioExtensions::ALL, &prometheus(config), vec![]);
        assert!(f.http_stats.is_empty() && f.tcp_stats.is_empty());
        assert!(f.http_metadata_exchange.is_some());
    }

    #[test]
    fn placement_in_the_connection_manager_and_tcp_chains() {
        let f = build(
            ListenerClass::SidecarInbound,
            IstioExtensions::ALL,
            &prometheus(MetricsConfig::default()),
            vec![],
        );
        let mut hcm = crate::filters::http_connection_manager(
            "x",
            crate::filters::Routes::Rds("r".into()),
            crate::filters::FilterTarget::Envoy,
            false,
        );
        f.apply_http(&mut hcm);
        // Security filters applied afterwards stay behind the metadata exchange filter.
        let security = crate::policy::SecurityFilters {
            http: vec![HttpFilter { name: "envoy.filters.http.rbac".into(), ..Default::default() }],
            ..Default::default()
        };
        security.apply_http(&mut hcm);
        let names: Vec<&str> = hcm.http_filters.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                METADATA_EXCHANGE_FILTER,
                "envoy.filters.http.rbac",
                "envoy.filters.http.fault",
                "envoy.filters.http.cors",
                STATS_FILTER,
                "envoy.filters.http.router"
            ]
        );
        let terminal = Filter { name: "envoy.filters.network.tcp_proxy".into(), config_type: None };
        let rbac = Filter { name: "envoy.filters.network.rbac".into(), config_type: None };
        let names = |v: Vec<Filter>| v.into_iter().map(|f| f.name).collect::<Vec<_>>();
        assert_eq!(
            names(f.tcp_chain(true, std::slice::from_ref(&rbac), terminal.clone())),
            [
                METADATA_EXCHANGE_FILTER,
                "envoy.filters.network.rbac",
                STATS_FILTER,
                "envoy.filters.network.tcp_proxy"
            ]
        );
        assert_eq!(
            names(f.tcp_chain(false, &[], terminal)),
            [STATS_FILTER, "envoy.filters.network.tcp_proxy"]
        );
    }

    #[test]
    fn metadata_exchange_configs_are_typed_structs_with_istiods_fields() {
        let Some(http_filter::ConfigType::TypedConfig(any)) = &INBOUND_PEER_METADATA.config_type else {
            panic!()
        };
        assert_eq!(any.type_url, TYPED_STRUCT_TYPE_URL);
        let ts = TypedStruct::decode(any.value.as_slice()).unwrap();
        assert_eq!(ts.type_url, PEER_METADATA_TYPE_URL);
        let mut keys: Vec<&String> = ts.value.as_ref().unwrap().fields.keys().collect();
        keys.sort();
        assert_eq!(keys, ["downstream_discovery", "downstream_propagation"]);
        // The same bytes every time (one encoding kept).
        assert_eq!(
            build(ListenerClass::SidecarInbound, IstioExtensions::ALL, &[], vec![]).http_metadata_exchange,
            Some(INBOUND_PEER_METADATA.clone())
        );
    }
}
