//! CDS: clusters for a proxy (Istio's `pilot/pkg/networking/core/cluster*.go`).
//!
//! | cluster | when | discovery |
//! |---|---|---|
//! | `outbound\|PORT\|\|HOST` | every port of every service the proxy sees (Sidecar scope) | by resolution: `STATIC` → EDS over ADS; `DNS` → STRICT_DNS, endpoints inline; `DNS_ROUND_ROBIN` → LOGICAL_DNS; `NONE` → ORIGINAL_DST |
//! | `outbound\|PORT\|SUBSET\|HOST` | every subset of the DestinationRule applying to the service | as above; `PASSTHROUGH` load balancing → ORIGINAL_DST |
//! | `inbound\|PORT\|\|` | sidecars with interception: each target port of the proxy's service instances | ORIGINAL_DST to the workload |
//! | `inbound\|PORT\|\|` | instead, when the Sidecar has `ingress` entries (any interception mode): each entry's port | STATIC to `defaultEndpoint` (`0.0.0.0` → the proxy's IP, `unix://` → a pipe); ORIGINAL_DST without one |
//! | `BlackHoleCluster`, `PassthroughCluster` | always | STATIC without endpoints; ORIGINAL_DST |
//! | `InboundPassthroughCluster` | sidecars with interception | ORIGINAL_DST |
//!
//! DestinationRule traffic policy (destination level, replaced per port by `portLevelSettings`,
//! overridden per field by a subset's policy, as Istio's `MergeSubsetTrafficPolicy`): load balancer
//! (`simple` → LEAST_REQUEST (default) / ROUND_ROBIN / RANDOM / CLUSTER_PROVIDED; `consistentHash` →
//! RING_HASH or MAGLEV; `warmup` → slow start), connection pool (circuit breaker thresholds, connect
//! timeout, TCP keepalive, HTTP idle timeout, max requests per connection, max connection duration,
//! HTTP/2 upgrade, max concurrent streams, HTTP/2 keepalive, use client protocol), outlier detection,
//! retry budget, TLS (`DISABLE`, `SIMPLE`, `MUTUAL` with files; `ISTIO_MUTUAL` for proxies with workload
//! certificates, [`crate::mtls`]). Without DestinationRule TLS, proxies with workload certificates get
//! auto mTLS (`transport_socket_matches` on the endpoints' `tlsMode`) to mesh-internal EDS and DNS
//! clusters when the mesh enables it. `proxyProtocol` wraps the resulting socket(s) (plaintext:
//! `raw_buffer`) in `upstream_proxy_protocol` (Istio's `applyUpstreamProxyProtocol`). `tunnel` leaves
//! the cluster alone: it becomes the `tunneling_config` of the sidecar's outbound TCP proxies
//! (`crate::listener`), and is reported on clusters of HTTP ports, which istiod never tunnels.
//! Everything else is reported.

use std::collections::HashMap;

use api::networking::destination_rule::{
    ClientTlsSettings, ConnectionPoolSettings, DestinationRule, LoadBalancerSettings, OutlierDetection,
    TrafficPolicy,
    client_tls_settings::TlSmode as ClientMode,
    connection_pool_settings::http_settings::H2UpgradePolicy,
    load_balancer_settings::SimpleLb,
    traffic_policy::{ProxyProtocol, RetryBudget, proxy_protocol::Version as PpVersion},
};
use envoy_types::pb::envoy::{
    config::{
        cluster::v3::{
            CircuitBreakers, Cluster, OutlierDetection as EnvoyOutlier, UpstreamConnectionOptions,
            circuit_breakers::{Thresholds, thresholds::RetryBudget as EnvoyRetryBudget},
            cluster::{
                ClusterDiscoveryType, CommonLbConfig, DiscoveryType, DnsLookupFamily, EdsClusterConfig,
                LbConfig, LbPolicy, LeastRequestLbConfig, MaglevLbConfig, OriginalDstLbConfig,
                RingHashLbConfig, RoundRobinLbConfig, SlowStartConfig,
            },
        },
        core::v3::{
            BindConfig, Http1ProtocolOptions, Http2ProtocolOptions, HttpProtocolOptions as CoreHttpOptions,
            KeepaliveSettings, ProxyProtocolConfig, RuntimeDouble, SocketAddress, TcpKeepalive,
            TransportSocket, proxy_protocol_config::Version as EnvoyPpVersion, socket_address,
        },
        endpoint::v3::{
            ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
        },
    },
    extensions::transport_sockets::proxy_protocol::v3::ProxyProtocolUpstreamTransport,
    extensions::upstreams::http::v3::{
        HttpProtocolOptions,
        http_protocol_options::{
            ExplicitHttpConfig, UpstreamProtocolOptions, UseDownstreamHttpConfig,
            explicit_http_config::ProtocolConfig,
        },
    },
    r#type::v3::Percent,
};
use model::{
    ConfigKey, Protocol,
    service::{Port, Resolution, Service, labels_match},
};

use crate::{
    Snapshot,
    built::Built,
    cache::{Encoded, EncodedResource, OutboundClustersKey, SharedClusters},
    convert::{ads_config_source, any, duration, std_duration, transport_socket, u32v, u64v},
    endpoint::{locality_lb_endpoints, sends_unhealthy},
    filters::TLS_TRANSPORT_SOCKET,
    locality, mtls,
    naming::{
        BLACK_HOLE_CLUSTER, INBOUND_PASSTHROUGH_BIND_IPV4, INBOUND_PASSTHROUGH_CLUSTER, PASSTHROUGH_CLUSTER,
        inbound_cluster_name, outbound_cluster_name,
    },
    tls,
};
use model::{
    Finding, Severity,
    push::{IndexedDestinationRule, InterceptionMode, ProxyContext, ProxyKind},
};

/// Key of `typed_extension_protocol_options` for upstream HTTP options.
const HTTP_PROTOCOL_OPTIONS_KEY: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// One part of a traffic policy and where it came from (a field path in the DestinationRule).
struct Part<'a, T> {
    value: &'a T,
    path: &'a str,
}

impl<T> Clone for Part<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Part<'_, T> {}

/// The traffic policy that applies to one cluster, part by part.
#[derive(Clone, Copy, Default)]
struct Policy<'a> {
    connection_pool: Option<Part<'a, ConnectionPoolSettings>>,
    outlier: Option<Part<'a, OutlierDetection>>,
    lb: Option<Part<'a, LoadBalancerSettings>>,
    tls: Option<Part<'a, ClientTlsSettings>>,
    retry_budget: Option<Part<'a, RetryBudget>>,
    /// `tunnel` path when set: it configures the outbound TCP proxies (`listener.rs`), never the
    /// cluster, and is reported only where it cannot apply.
    tunnel: Option<&'a str>,
    proxy_protocol: Option<Part<'a, ProxyProtocol>>,
}

/// Field paths of one traffic policy block.
struct PolicyPaths {
    pool: String,
    outlier: String,
    lb: String,
    tls: String,
    retry_budget: String,
    tunnel: String,
    proxy_protocol: String,
}

impl PolicyPaths {
    fn new(prefix: &str) -> PolicyPaths {
        PolicyPaths {
            pool: format!("{prefix}.connectionPool"),
            outlier: format!("{prefix}.outlierDetection"),
            lb: format!("{prefix}.loadBalancer"),
            tls: format!("{prefix}.tls"),
            retry_budget: format!("{prefix}.retryBudget"),
            tunnel: format!("{prefix}.tunnel"),
            proxy_protocol: format!("{prefix}.proxyProtocol"),
        }
    }
}

/// Paths for the destination-level policy, each port-level entry and each subset: computed once per
/// rule and cluster set.
struct RulePaths {
    top: PolicyPaths,
    ports: Vec<PolicyPaths>,
    subsets: Vec<(PolicyPaths, Vec<PolicyPaths>)>,
}

impl RulePaths {
    fn new(rule: &DestinationRule) -> RulePaths {
        let port_paths = |prefix: &str, tp: Option<&TrafficPolicy>| {
            tp.map(|tp| {
                (0..tp.port_level_settings.len())
                    .map(|i| PolicyPaths::new(&format!("{prefix}.portLevelSettings[{i}]")))
                    .collect()
            })
            .unwrap_or_default()
        };
        RulePaths {
            top: PolicyPaths::new("spec.trafficPolicy"),
            ports: port_paths("spec.trafficPolicy", rule.traffic_policy.as_ref()),
            subsets: rule
                .subsets
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let prefix = format!("spec.subsets[{i}].trafficPolicy");
                    (PolicyPaths::new(&prefix), port_paths(&prefix, s.traffic_policy.as_ref()))
                })
                .collect(),
        }
    }
}

/// Istio's `GetPortLevelTrafficPolicy`: a matching port-level entry replaces the destination-level
/// policy (its unset parts take defaults, not the destination's); returns whether one matched.
fn port_policy<'a>(
    tp: Option<&'a TrafficPolicy>,
    paths: &'a PolicyPaths,
    port_paths: &'a [PolicyPaths],
    port: u32,
) -> (Policy<'a>, bool) {
    let Some(tp) = tp else { return (Policy::default(), false) };
    let level = tp
        .port_level_settings
        .iter()
        .enumerate()
        .find(|(_, p)| p.port.as_ref().is_some_and(|s| s.number == port));
    if let Some((i, p)) = level
        && let Some(pp) = port_paths.get(i)
    {
        let policy = Policy {
            connection_pool: p.connection_pool.as_ref().map(|v| Part { value: v, path: &pp.pool }),
            outlier: p.outlier_detection.as_ref().map(|v| Part { value: v, path: &pp.outlier }),
            lb: p.load_balancer.as_ref().map(|v| Part { value: v, path: &pp.lb }),
            tls: p.tls.as_ref().map(|v| Part { value: v, path: &pp.tls }),
            ..Policy::default()
        };
        return (policy, true);
    }
    let policy = Policy {
        connection_pool: tp.connection_pool.as_ref().map(|v| Part { value: v, path: &paths.pool }),
        outlier: tp.outlier_detection.as_ref().map(|v| Part { value: v, path: &paths.outlier }),
        lb: tp.load_balancer.as_ref().map(|v| Part { value: v, path: &paths.lb }),
        tls: tp.tls.as_ref().map(|v| Part { value: v, path: &paths.tls }),
        retry_budget: tp.retry_budget.as_ref().map(|v| Part { value: v, path: &paths.retry_budget }),
        tunnel: tp.tunnel.as_ref().map(|_| paths.tunnel.as_str()),
        proxy_protocol: tp.proxy_protocol.as_ref().map(|v| Part { value: v, path: &paths.proxy_protocol }),
    };
    (policy, false)
}

/// Istio's `MergeSubsetTrafficPolicy`: the subset's (port-level) policy overrides the destination's
/// part by part; a subset port-level match replaces the four port-level parts outright.
fn subset_policy<'a>(base: Policy<'a>, subset: (Policy<'a>, bool)) -> Policy<'a> {
    let (sub, port_level) = subset;
    let mut out = base;
    if sub.connection_pool.is_some() || port_level {
        out.connection_pool = sub.connection_pool;
    }
    if sub.outlier.is_some() || port_level {
        out.outlier = sub.outlier;
    }
    if sub.lb.is_some() || port_level {
        out.lb = sub.lb;
    }
    if sub.tls.is_some() || port_level {
        out.tls = sub.tls;
    }
    if sub.retry_budget.is_some() {
        out.retry_budget = sub.retry_budget;
    }
    if sub.tunnel.is_some() {
        out.tunnel = sub.tunnel;
    }
    if sub.proxy_protocol.is_some() {
        out.proxy_protocol = sub.proxy_protocol;
    }
    out
}

/// Collects findings for one cluster.
struct Report<'a> {
    config: Option<&'a ConfigKey>,
    resource: &'a str,
    findings: &'a mut Vec<Finding>,
}

impl Report<'_> {
    fn unsupported(&mut self, path: &str, message: impl Into<String>) {
        self.findings.push(Finding {
            severity: Severity::Unsupported,
            config: self.config.cloned(),
            path: path.to_string(),
            resource: self.resource.to_string(),
            message: message.into(),
        });
    }

    fn dropped(&mut self, message: impl Into<String>) {
        self.findings.push(Finding {
            severity: Severity::Dropped,
            config: self.config.cloned(),
            path: String::new(),
            resource: self.resource.to_string(),
            message: message.into(),
        });
    }
}

/// A cluster under construction with its upstream HTTP options.
struct Builder {
    cluster: Cluster,
    http: Option<HttpProtocolOptions>,
}

fn discovery_type(t: DiscoveryType) -> Option<ClusterDiscoveryType> {
    Some(ClusterDiscoveryType::Type(t as i32))
}

fn cluster_type(c: &Cluster) -> Option<DiscoveryType> {
    match c.cluster_discovery_type {
        Some(ClusterDiscoveryType::Type(t)) => DiscoveryType::try_from(t).ok(),
        _ => None,
    }
}

/// Istio's default circuit breaker thresholds (`getDefaultCircuitBreakerThresholds`): everything at
/// `u32::MAX`; remaining capacity not tracked (`DISABLE_TRACK_REMAINING_CB_METRICS` defaults to true).
fn default_thresholds() -> Thresholds {
    Thresholds {
        max_connections: Some(u32v(u32::MAX)),
        max_pending_requests: Some(u32v(u32::MAX)),
        max_requests: Some(u32v(u32::MAX)),
        max_retries: Some(u32v(u32::MAX)),
        ..Default::default()
    }
}

/// Istio's `features.PilotDNSCaresUDPMaxQueries` (`PILOT_DNS_CARES_UDP_MAX_QUERIES`, default 100).
const DNS_CARES_UDP_MAX_QUERIES: u32 = 100;

/// Istio's `features.PilotDNSJitterDurationEnv` (`PILOT_DNS_JITTER_DURATION`, default 100 ms).
const DNS_JITTER: std::time::Duration = std::time::Duration::from_millis(100);

/// The DNS settings Istio's `buildCluster` gives STRICT_DNS and LOGICAL_DNS clusters: the c-ares resolver
/// with `udp_max_queries` 100, 100 ms of jitter, the mesh's `dnsRefreshRate` on failures and the records'
/// TTL otherwise.
#[allow(deprecated)]
fn apply_dns_settings(cluster: &mut Cluster, refresh: std::time::Duration) {
    use envoy_types::pb::envoy::{
        config::core::v3::TypedExtensionConfig,
        extensions::network::dns_resolver::cares::v3::CaresDnsResolverConfig,
    };
    let cares = CaresDnsResolverConfig {
        udp_max_queries: Some(u32v(DNS_CARES_UDP_MAX_QUERIES)),
        ..Default::default()
    };
    cluster.typed_dns_resolver_config = Some(TypedExtensionConfig {
        name: "envoy.network.dns_resolver.cares".to_string(),
        typed_config: Some(crate::convert::any(&cares)),
    });
    cluster.dns_jitter = Some(std_duration(DNS_JITTER));
    cluster.dns_refresh_rate = Some(std_duration(refresh));
    cluster.respect_dns_ttl = true;
}

fn h2_options() -> UpstreamProtocolOptions {
    UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
        protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(Http2ProtocolOptions::default())),
    })
}

impl Builder {
    fn http(&mut self) -> &mut HttpProtocolOptions {
        self.http.get_or_insert_with(HttpProtocolOptions::default)
    }

    fn set_h2(&mut self) {
        let http = self.http();
        if http.upstream_protocol_options.is_none() {
            http.upstream_protocol_options = Some(h2_options());
        }
    }

    fn h2_options_mut(&mut self) -> Option<&mut Http2ProtocolOptions> {
        match self.http.as_mut()?.upstream_protocol_options.as_mut()? {
            UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(h2)),
            }) => Some(h2),
            _ => None,
        }
    }

    fn build(mut self) -> Cluster {
        if let Some(mut http) = self.http {
            if http.upstream_protocol_options.is_none() {
                http.upstream_protocol_options =
                    Some(UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
                        protocol_config: Some(ProtocolConfig::HttpProtocolOptions(
                            Http1ProtocolOptions::default(),
                        )),
                    }));
            }
            self.cluster
                .typed_extension_protocol_options
                .insert(HTTP_PROTOCOL_OPTIONS_KEY.to_string(), any(&http));
        }
        self.cluster
    }
}

fn dns_lookup_family(proxy: &ProxyContext) -> DnsLookupFamily {
    let v6 = |ip: &String| ip.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_ipv6());
    if !proxy.ips.is_empty() && proxy.ips.iter().all(v6) {
        DnsLookupFamily::V6Only
    } else {
        DnsLookupFamily::V4Only
    }
}

/// The cluster shell: name, discovery type, endpoints for static/DNS types, connect timeout.
fn base_cluster(
    push: &Snapshot,
    proxy: &ProxyContext,
    name: &str,
    service: &Service,
    port: &Port,
    subset: Option<&api::networking::destination_rule::Subset>,
    report: &mut Report<'_>,
) -> Option<Builder> {
    let kind = match service.resolution {
        Resolution::ClientSideLb => DiscoveryType::Eds,
        Resolution::Dns => DiscoveryType::StrictDns,
        Resolution::DnsRoundRobin => DiscoveryType::LogicalDns,
        Resolution::Passthrough => DiscoveryType::OriginalDst,
        Resolution::DynamicDns => {
            report.dropped(
                "DYNAMIC_DNS resolution needs a dynamic forward proxy cluster, which is not built; no cluster".to_string(),
            );
            return None;
        }
        // Never asked for: `outbound_clusters` leaves aliases out.
        Resolution::Alias => return None,
    };
    // Istio's `applyLoadBalancer`: with unhealthy endpoints sent (`PILOT_AUTO_SEND_UNHEALTHY_ENDPOINTS`,
    // default true) the panic threshold is 0 (off) unless outlier detection sets `minHealthPercent`;
    // original-destination clusters (CLUSTER_PROVIDED) have no load balancer settings.
    let panic_threshold = (kind != DiscoveryType::OriginalDst).then_some(Percent { value: 0.0 });
    let mut cluster = Cluster {
        name: name.to_string(),
        cluster_discovery_type: discovery_type(kind),
        connect_timeout: Some(std_duration(push.mesh().connect_timeout)),
        common_lb_config: Some(CommonLbConfig {
            healthy_panic_threshold: panic_threshold,
            ..Default::default()
        }),
        ..Default::default()
    };
    match kind {
        DiscoveryType::StrictDns | DiscoveryType::LogicalDns => {
            let eps = push
                .endpoints(&service.hostname, &service.namespace, port.port)
                .iter()
                .filter(|e| subset.is_none_or(|s| labels_match(&s.labels, &e.labels)))
                .map(|e| e.as_ref());
            let accepts_mtls =
                |ep: &model::service::Endpoint| crate::endpoint::endpoint_accepts_mtls(push, ep);
            let tls_metadata = (proxy.has_workload_certificates() && !proxy.proxyless_grpc)
                .then_some(&accepts_mtls as &dyn Fn(&model::service::Endpoint) -> bool);
            let rule = push.destination_rule(proxy, service);
            let subset_name = subset.map_or("", |s| s.name.as_str());
            let unhealthy = sends_unhealthy(
                rule.as_deref().map(|r| &r.rule),
                port.port,
                subset_name,
                service.traffic_distribution,
            );
            let mut endpoints =
                locality_lb_endpoints(eps, true, unhealthy, tls_metadata, name, report.findings);
            if endpoints.is_empty() {
                report.dropped("DNS-resolved cluster without endpoints is not built (as Istio)".to_string());
                return None;
            }
            if kind == DiscoveryType::LogicalDns {
                let total: usize = endpoints.iter().map(|l| l.lb_endpoints.len()).sum();
                if total > 1 {
                    report.dropped(format!(
                        "DNS_ROUND_ROBIN (LOGICAL_DNS) takes one endpoint; {} more left out",
                        total - 1
                    ));
                    endpoints.truncate(1);
                    endpoints[0].lb_endpoints.truncate(1);
                }
            }
            cluster.dns_lookup_family = dns_lookup_family(proxy) as i32;
            apply_dns_settings(&mut cluster, push.mesh().dns_refresh_rate);
            cluster.load_assignment = Some(ClusterLoadAssignment {
                cluster_name: name.to_string(),
                endpoints,
                ..Default::default()
            });
        }
        DiscoveryType::OriginalDst => {
            if let Some(target) = service.passthrough_target_ports.get(&port.port) {
                cluster.lb_config = Some(LbConfig::OriginalDstLbConfig(OriginalDstLbConfig {
                    upstream_port_override: Some(u32v(*target)),
                    ..Default::default()
                }));
            }
        }
        _ => {}
    }
    let mut builder = Builder { cluster, http: None };
    if port.protocol.is_http2() {
        builder.set_h2();
    } else if port.protocol.is_unsupported() && proxy.kind == ProxyKind::Sidecar && !proxy.proxyless_grpc {
        // A sniffed port carries what the client spoke: HTTP/1.1 upstream for HTTP/1.1, HTTP/2 for h2c
        // (Istio's `setUpstreamProtocol`, sidecars only).
        builder.http().upstream_protocol_options = Some(use_downstream_protocol());
    }
    Some(builder)
}

fn apply_connection_pool(
    push: &Snapshot,
    b: &mut Builder,
    pool: Option<Part<'_, ConnectionPoolSettings>>,
    retry_budget: Option<Part<'_, RetryBudget>>,
    port: &Port,
    outbound: bool,
) {
    let mut threshold = default_thresholds();
    if let Some(rb) = retry_budget {
        let rb = rb.value;
        threshold.retry_budget = Some(EnvoyRetryBudget {
            budget_percent: Some(Percent { value: rb.percent.unwrap_or(20.0) }),
            min_retry_concurrency: Some(u32v(if rb.min_retry_concurrency > 0 {
                rb.min_retry_concurrency
            } else {
                3
            })),
            budget_interval: rb.budget_interval.as_ref().map(duration),
        });
    }
    b.cluster.connect_timeout = Some(std_duration(push.mesh().connect_timeout));
    let Some(pool) = pool.map(|p| p.value) else {
        b.cluster.circuit_breakers =
            Some(CircuitBreakers { thresholds: vec![threshold], ..Default::default() });
        return;
    };
    if outbound
        && let Some(http) = &pool.http
        && !http.use_client_protocol
        && http.h2_upgrade_policy == H2UpgradePolicy::Upgrade as i32
    {
        b.set_h2();
    }
    let positive = |v: i32| u32::try_from(v).ok().filter(|v| *v > 0);
    let mut idle = None;
    let mut max_requests_per_connection = None;
    let mut max_concurrent_streams = None;
    let mut keepalive = None;
    if let Some(http) = &pool.http {
        if let Some(v) = positive(http.http2_max_requests) {
            threshold.max_requests = Some(u32v(v));
        }
        if let Some(v) = positive(http.http1_max_pending_requests) {
            threshold.max_pending_requests = Some(u32v(v));
        }
        if let Some(v) = positive(http.max_retries) {
            threshold.max_retries = Some(u32v(v));
        }
        idle = http.idle_timeout.as_ref().map(duration);
        max_requests_per_connection = positive(http.max_requests_per_connection);
        max_concurrent_streams = positive(http.max_concurrent_streams);
        keepalive = http.http2_keep_alive.as_ref();
    }
    let mut max_connection_duration = None;
    if let Some(tcp) = &pool.tcp {
        if let Some(t) = &tcp.connect_timeout {
            b.cluster.connect_timeout = Some(duration(t));
        }
        if let Some(v) = positive(tcp.max_connections) {
            threshold.max_connections = Some(u32v(v));
        }
        max_connection_duration = tcp.max_connection_duration.as_ref().map(duration);
        if idle.is_none() {
            idle = tcp.idle_timeout.as_ref().map(duration);
        }
        if let Some(ka) = &tcp.tcp_keepalive {
            let secs = |d: &Option<api::wkt::Duration>| {
                d.as_ref().and_then(|d| u32::try_from(d.seconds).ok()).filter(|s| *s > 0).map(u32v)
            };
            b.cluster.upstream_connection_options = Some(UpstreamConnectionOptions {
                tcp_keepalive: Some(TcpKeepalive {
                    keepalive_probes: (ka.probes > 0).then(|| u32v(ka.probes)),
                    keepalive_time: secs(&ka.time),
                    keepalive_interval: secs(&ka.interval),
                }),
                ..Default::default()
            });
        }
    }
    b.cluster.circuit_breakers = Some(CircuitBreakers { thresholds: vec![threshold], ..Default::default() });
    if idle.is_some()
        || max_requests_per_connection.is_some()
        || max_connection_duration.is_some()
        || max_concurrent_streams.is_some()
        || keepalive.is_some()
    {
        let common = b.http().common_http_protocol_options.get_or_insert_with(CoreHttpOptions::default);
        common.idle_timeout = idle;
        common.max_requests_per_connection = max_requests_per_connection.map(u32v);
        common.max_connection_duration = max_connection_duration;
        if let Some(h2) = b.h2_options_mut() {
            h2.max_concurrent_streams = max_concurrent_streams.map(u32v);
            if let Some(ka) = keepalive {
                h2.connection_keepalive = Some(KeepaliveSettings {
                    interval: ka.interval.as_ref().map(duration),
                    timeout: ka.timeout.as_ref().map(duration),
                    ..Default::default()
                });
            }
        }
    }
    if pool.http.as_ref().is_some_and(|h| h.use_client_protocol) && (port.protocol.is_http() || !outbound) {
        b.http().upstream_protocol_options = Some(use_downstream_protocol());
    }
}

fn apply_outlier(b: &mut Builder, outlier: Option<Part<'_, OutlierDetection>>, report: &mut Report<'_>) {
    let Some(part) = outlier else { return };
    let o = part.value;
    let mut out = EnvoyOutlier { enforcing_success_rate: Some(u32v(0)), ..Default::default() };
    let consecutive_5xx =
        o.consecutive_5xx_errors.or_else(|| u32::try_from(o.consecutive_errors).ok().filter(|v| *v > 0));
    if let Some(v) = consecutive_5xx {
        out.consecutive_5xx = Some(u32v(v));
        out.enforcing_consecutive_5xx = Some(u32v(if v > 0 { 100 } else { 0 }));
    }
    if let Some(v) = o.consecutive_gateway_errors {
        out.consecutive_gateway_failure = Some(u32v(v));
        out.enforcing_consecutive_gateway_failure = Some(u32v(if v > 0 { 100 } else { 0 }));
    }
    out.interval = o.interval.as_ref().map(duration);
    out.base_ejection_time = o.base_ejection_time.as_ref().map(duration);
    if let Ok(v) = u32::try_from(o.max_ejection_percent)
        && v > 0
    {
        out.max_ejection_percent = Some(u32v(v));
    }
    if o.split_external_local_origin_errors {
        out.split_external_local_origin_errors = true;
        if let Some(v) = o.consecutive_local_origin_failures.filter(|v| *v > 0) {
            out.consecutive_local_origin_failure = Some(u32v(v));
            out.enforcing_consecutive_local_origin_failure = Some(u32v(100));
        }
        out.enforcing_local_origin_success_rate = Some(u32v(0));
    }
    if !o.outlier_detection_http_error_codes.is_empty() {
        report.unsupported(
            &format!("{}.outlierDetectionHttpErrorCodes", part.path),
            "custom error codes are not translated; 5xx responses count as errors",
        );
    }
    b.cluster.outlier_detection = Some(out);
    if o.min_health_percent >= 0
        && let Some(common) = b.cluster.common_lb_config.as_mut()
    {
        common.healthy_panic_threshold = Some(Percent { value: f64::from(o.min_health_percent) });
    }
}

fn slow_start(lb: &LoadBalancerSettings) -> Option<SlowStartConfig> {
    if let Some(w) = &lb.warmup {
        return Some(SlowStartConfig {
            slow_start_window: w.duration.as_ref().map(duration),
            aggression: Some(RuntimeDouble {
                default_value: w.aggression.unwrap_or(1.0),
                runtime_key: "(".to_string(),
            }),
            min_weight_percent: Some(Percent { value: w.minimum_percent.unwrap_or(10.0) }),
        });
    }
    lb.warmup_duration_secs
        .as_ref()
        .map(|d| SlowStartConfig { slow_start_window: Some(duration(d)), ..Default::default() })
}

/// Istio's load balancer for `lb`. Unset (or UNSPECIFIED) means LEAST_REQUEST for Envoy but
/// ROUND_ROBIN for proxyless gRPC (Istio's grpcgen leaves `lb_policy` at its zero value; gRPC C-core
/// NACKs LEAST_REQUEST: "LB policy is not supported"). `http`: the port carries HTTP (or sniffed) traffic,
/// whose routes carry the consistent-hash key.
fn apply_lb(
    b: &mut Builder,
    lb: Option<Part<'_, LoadBalancerSettings>>,
    proxyless: bool,
    http: bool,
    report: &mut Report<'_>,
) {
    if cluster_type(&b.cluster) == Some(DiscoveryType::OriginalDst) {
        b.cluster.lb_policy = LbPolicy::ClusterProvided as i32;
        return;
    }
    let settings = lb.map(|p| p.value);
    let simple = settings.and_then(|l| l.simple).and_then(|s| SimpleLb::try_from(s).ok());
    match simple {
        Some(SimpleLb::Random) => b.cluster.lb_policy = LbPolicy::Random as i32,
        None | Some(SimpleLb::Unspecified) if proxyless => b.cluster.lb_policy = LbPolicy::RoundRobin as i32,
        Some(SimpleLb::RoundRobin) => {
            b.cluster.lb_policy = LbPolicy::RoundRobin as i32;
            if let Some(ss) = settings.and_then(slow_start) {
                b.cluster.lb_config =
                    Some(LbConfig::RoundRobinLbConfig(RoundRobinLbConfig { slow_start_config: Some(ss) }));
            }
        }
        Some(SimpleLb::Passthrough) => {
            b.cluster.lb_policy = LbPolicy::ClusterProvided as i32;
            b.cluster.cluster_discovery_type = discovery_type(DiscoveryType::OriginalDst);
            b.cluster.load_assignment = None;
            b.cluster.eds_cluster_config = None;
            b.cluster.lb_config = None;
        }
        _ => {
            b.cluster.lb_policy = LbPolicy::LeastRequest as i32;
            if let Some(ss) = settings.and_then(slow_start) {
                b.cluster.lb_config = Some(LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
                    slow_start_config: Some(ss),
                    ..Default::default()
                }));
            }
        }
    }
    let Some(part) = lb else { return };
    if let Some(ch) = &part.value.consistent_hash {
        if let Some(m) = &ch.maglev {
            b.cluster.lb_policy = LbPolicy::Maglev as i32;
            b.cluster.lb_config = (m.table_size != 0)
                .then(|| LbConfig::MaglevLbConfig(MaglevLbConfig { table_size: Some(u64v(m.table_size)) }));
        } else {
            // Istio's `ApplyRingHashLoadBalancer`: `ringHash` without a size leaves Envoy's default;
            // otherwise the deprecated `minimumRingSize`, else 1024.
            let size = match &ch.ring_hash {
                Some(r) => Some(r.minimum_ring_size).filter(|s| *s != 0),
                None => Some(Some(ch.minimum_ring_size).filter(|s| *s != 0).unwrap_or(1024)),
            };
            b.cluster.lb_policy = LbPolicy::RingHash as i32;
            b.cluster.lb_config = size.map(|size| {
                LbConfig::RingHashLbConfig(RingHashLbConfig {
                    minimum_ring_size: Some(u64v(size)),
                    ..Default::default()
                })
            });
        }
        // The hash key goes on HTTP routes (`crate::route::hash_policy`); TCP proxies hash only on the
        // source IP, read from the rule's top level and subsets (`crate::listener`, Istio's
        // `maybeSetHashPolicy`).
        if !http {
            let port_level = part.path.contains("portLevelSettings");
            if ch.use_source_ip != Some(true) {
                report.unsupported(
                    &format!("{}.consistentHash", part.path),
                    "a TCP connection has no header, cookie or query parameter to hash (only useSourceIp \
                     applies to TCP proxies); the ring is used without a key, as with istiod",
                );
            } else if port_level {
                report.unsupported(
                    &format!("{}.consistentHash.useSourceIp", part.path),
                    "TCP proxies read useSourceIp from the rule's top level and subsets only (as istiod); \
                     this port-level setting hashes nothing on TCP",
                );
            }
        }
    }
}

/// Istio's `applyLoadBalancer` locality part (`LBSettings.ApplyToCluster`): the effective locality or
/// zone-aware setting of the destination ([`locality::effective_setting`]: DestinationRule, Service
/// `trafficDistribution`, mesh) sets the cluster's locality config, and ranks a DNS-resolved cluster's
/// `load_assignment` for `proxy` (EDS clusters are ranked in EDS, [`crate::endpoint`]). Original
/// destination clusters (CLUSTER_PROVIDED) are left alone, as in Istio.
fn apply_locality(
    push: &Snapshot,
    proxy: &ProxyContext,
    b: &mut Builder,
    lb: Option<Part<'_, LoadBalancerSettings>>,
    service: &Service,
    report: &mut Report<'_>,
) {
    if b.cluster.lb_policy == LbPolicy::ClusterProvided as i32 {
        return;
    }
    let outlier = b.cluster.outlier_detection.is_some();
    let Some(setting) =
        locality::effective_setting(push.mesh(), lb.map(|p| p.value), service.traffic_distribution)
    else {
        return;
    };
    if let Some(common) = b.cluster.common_lb_config.as_mut() {
        setting.apply_to_cluster(common, outlier);
    }
    if let Some(cla) = b.cluster.load_assignment.as_mut()
        && setting.changes_assignment(outlier)
    {
        // Outbound clusters are shared by the proxies of one scope and locality, not by their labels:
        // a DNS-resolved cluster is ranked by locality only.
        let setting = setting.without_failover_priority().unwrap_or_else(|(setting, labels)| {
            report.unsupported(
                lb.map_or("", |p| p.path),
                format!(
                    "failoverPriority ({labels}) ranks EDS endpoints only; the endpoints of this DNS-resolved \
                     cluster are ranked by locality"
                ),
            );
            setting
        });
        let view = locality::ProxyView { locality: &proxy.locality, labels: &proxy.labels };
        locality::apply_to_assignment(&mut cla.endpoints, &[], view, &setting, outlier);
    }
}

/// The identities a destination's workloads run as (Istio's `PushContext.ServiceAccounts`): the
/// service's own (ServiceEntry `subjectAltNames`, Kubernetes service accounts) and those of its
/// endpoints on `port`, sorted and deduplicated.
fn destination_identities(push: &Snapshot, service: &Service, port: u32) -> Vec<String> {
    let mut out: std::collections::BTreeSet<String> = service.service_accounts.iter().cloned().collect();
    out.extend(
        push.endpoints(&service.hostname, &service.namespace, port)
            .iter()
            .filter(|e| !e.service_account.is_empty())
            .map(|e| e.service_account.clone()),
    );
    out.into_iter().collect()
}

/// What a cluster's upstream TLS is for: the destination service, port and subset.
struct Target<'a> {
    service: &'a Service,
    port: &'a Port,
    subset: &'a str,
}

/// `true` if auto mTLS applies to a cluster of `service` for `proxy` (Istio's `buildAutoMtlsSettings`):
/// mesh `enableAutoMtls`, a proxy with workload certificates, a destination inside the mesh whose
/// endpoints Envoy knows (EDS or DNS clusters; original-destination clusters stay plaintext), and
/// whose namespace (or, without one, the mesh) PeerAuthentication is not `DISABLE` — Istio's
/// `BestEffortInferServiceMTLSMode` at namespace and mesh level (workload-selector policies are not
/// consulted: their workloads keep the namespace's inference).
fn auto_mtls_applies(push: &Snapshot, proxy: &ProxyContext, b: &Builder, service: &Service) -> bool {
    push.mesh().enable_auto_mtls
        && proxy.has_workload_certificates()
        && !proxy.proxyless_grpc
        && !service.mesh_external
        && push.workload_mtls_mode(&service.namespace, &model::service::Labels::default(), 0)
            != model::push::authn::MtlsMode::Disable
        && matches!(
            cluster_type(&b.cluster),
            Some(DiscoveryType::Eds | DiscoveryType::StrictDns | DiscoveryType::LogicalDns)
        )
}

fn apply_tls(
    push: &Snapshot,
    proxy: &ProxyContext,
    b: &mut Builder,
    tls: Option<Part<'_, ClientTlsSettings>>,
    target: &Target<'_>,
    report: &mut Report<'_>,
) {
    let proxyless = proxy.proxyless_grpc;
    let Some(part) = tls else {
        if auto_mtls_applies(push, proxy, b, target.service) {
            let h2 = b.h2_options_mut().is_some();
            let ctx = mtls::istio_mutual_upstream(
                &mtls::istio_mutual_sni(target.port.port, target.subset, &target.service.hostname),
                &destination_identities(push, target.service, target.port.port),
                h2,
            );
            b.cluster.transport_socket_matches = mtls::auto_mtls_matches(&ctx);
        }
        return;
    };
    // ISTIO_MUTUAL: SDS for proxies with workload certificates; certificate providers for proxyless
    // gRPC clients (as istiod's grpcgen, whatever their bootstrap holds).
    if part.value.mode == ClientMode::IstioMutual as i32 && (proxy.has_workload_certificates() || proxyless) {
        let sni = if part.value.sni.is_empty() {
            mtls::istio_mutual_sni(target.port.port, target.subset, &target.service.hostname)
        } else {
            part.value.sni.clone()
        };
        let sans = if part.value.subject_alt_names.is_empty() {
            destination_identities(push, target.service, target.port.port)
        } else {
            part.value.subject_alt_names.clone()
        };
        let ctx = if proxyless {
            mtls::grpc_istio_mutual_upstream(&sni, &sans)
        } else {
            mtls::istio_mutual_upstream(&sni, &sans, b.h2_options_mut().is_some())
        };
        b.cluster.transport_socket = Some(transport_socket(TLS_TRANSPORT_SOCKET, &ctx));
        return;
    }
    let translated = tls::upstream(part.value, proxy.kind == ProxyKind::Router);
    for (field, message) in translated.unsupported {
        report.unsupported(&format!("{}.{field}", part.path), message);
    }
    if let Some(ctx) = translated.context {
        if proxyless {
            report.unsupported(
                part.path,
                "file-based TLS is not sent to proxyless gRPC clients (they need certificate providers)",
            );
            return;
        }
        b.cluster.transport_socket = Some(transport_socket(TLS_TRANSPORT_SOCKET, &ctx));
    }
}

/// Istio's `applyUpstreamProxyProtocol`: wraps the cluster's transport socket (plaintext when it
/// has none) and each auto-mTLS match's socket in `envoy.transport_sockets.upstream_proxy_protocol`,
/// so Envoy sends a PROXY header (`V1` text or `V2` binary) with the downstream connection's
/// addresses before the upstream bytes (and before any TLS handshake).
fn apply_proxy_protocol(
    b: &mut Builder,
    part: Option<Part<'_, ProxyProtocol>>,
    proxyless: bool,
    report: &mut Report<'_>,
) {
    let Some(part) = part else { return };
    if proxyless {
        report.unsupported(part.path, "proxyless gRPC clients do not send a PROXY protocol header");
        return;
    }
    let version = match PpVersion::try_from(part.value.version) {
        Ok(PpVersion::V2) => EnvoyPpVersion::V2,
        _ => EnvoyPpVersion::V1,
    };
    let wrap = |inner: TransportSocket| {
        transport_socket(
            UPSTREAM_PROXY_PROTOCOL_TRANSPORT_SOCKET,
            &ProxyProtocolUpstreamTransport {
                config: Some(ProxyProtocolConfig { version: version as i32, ..Default::default() }),
                transport_socket: Some(inner),
                ..Default::default()
            },
        )
    };
    let c = &mut b.cluster;
    if c.transport_socket.is_none() && c.transport_socket_matches.is_empty() {
        c.transport_socket = Some(wrap(mtls::raw_buffer()));
        return;
    }
    if let Some(inner) = c.transport_socket.take() {
        c.transport_socket = Some(wrap(inner));
    }
    for m in &mut c.transport_socket_matches {
        if let Some(inner) = m.transport_socket.take() {
            m.transport_socket = Some(wrap(inner));
        }
    }
}

/// Envoy's upstream PROXY protocol transport socket.
const UPSTREAM_PROXY_PROTOCOL_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.upstream_proxy_protocol";

/// Applies the traffic policy to a cluster.
fn apply_policy(
    push: &Snapshot,
    proxy: &ProxyContext,
    b: &mut Builder,
    policy: Policy<'_>,
    target: &Target<'_>,
    report: &mut Report<'_>,
) {
    let port = target.port;
    apply_connection_pool(push, b, policy.connection_pool, policy.retry_budget, port, true);
    apply_outlier(b, policy.outlier, report);
    apply_lb(b, policy.lb, proxy.proxyless_grpc, target.port.protocol.is_http_or_sniffed(), report);
    apply_locality(push, proxy, b, policy.lb, target.service, report);
    apply_tls(push, proxy, b, policy.tls, target, report);
    if let Some(path) = policy.tunnel
        && port.protocol.is_http()
    {
        report.unsupported(
            path,
            "tunnelling applies to the TCP proxies of TCP, TLS and sniffed ports (as istiod); HTTP traffic to this port is not tunnelled",
        );
    }
    apply_proxy_protocol(b, policy.proxy_protocol, proxy.proxyless_grpc, report);
    if cluster_type(&b.cluster) == Some(DiscoveryType::Eds) {
        b.cluster.eds_cluster_config = Some(EdsClusterConfig {
            eds_config: Some(ads_config_source()),
            service_name: b.cluster.name.clone(),
        });
    }
}

/// The outbound clusters of one service: one per port, plus one per port and subset.
fn service_clusters(
    push: &Snapshot,
    proxy: &ProxyContext,
    service: &Service,
    dr: Option<&IndexedDestinationRule>,
    findings: &mut Vec<Finding>,
    out: &mut Vec<Cluster>,
) {
    let paths = dr.map(|d| RulePaths::new(&d.rule));
    let config = dr.and_then(|d| d.keys.first());
    for port in &service.ports {
        if port.protocol == Protocol::Udp {
            continue;
        }
        let name = outbound_cluster_name(port.port, "", &service.hostname);
        let mut report = Report { config, resource: &name, findings };
        let (base, _) = match (dr, &paths) {
            (Some(d), Some(p)) => port_policy(d.rule.traffic_policy.as_ref(), &p.top, &p.ports, port.port),
            _ => (Policy::default(), false),
        };
        if let Some(mut b) = base_cluster(push, proxy, &name, service, port, None, &mut report) {
            apply_policy(push, proxy, &mut b, base, &Target { service, port, subset: "" }, &mut report);
            out.push(b.build());
        }
        let (Some(d), Some(p)) = (dr, &paths) else { continue };
        for (i, subset) in d.rule.subsets.iter().enumerate() {
            if subset.name.is_empty() {
                continue;
            }
            let name = outbound_cluster_name(port.port, &subset.name, &service.hostname);
            let mut report = Report { config, resource: &name, findings };
            let Some((sp, spp)) = p.subsets.get(i) else { continue };
            let policy = match &subset.traffic_policy {
                Some(tp) => subset_policy(base, port_policy(Some(tp), sp, spp, port.port)),
                None => base,
            };
            if let Some(mut b) = base_cluster(push, proxy, &name, service, port, Some(subset), &mut report) {
                let target = Target { service, port, subset: &subset.name };
                apply_policy(push, proxy, &mut b, policy, &target, &mut report);
                out.push(b.build());
            }
        }
    }
}

fn black_hole(push: &Snapshot) -> Cluster {
    Cluster {
        name: BLACK_HOLE_CLUSTER.to_string(),
        cluster_discovery_type: discovery_type(DiscoveryType::Static),
        connect_timeout: Some(std_duration(push.mesh().connect_timeout)),
        lb_policy: LbPolicy::RoundRobin as i32,
        ..Default::default()
    }
}

/// Upstream HTTP/1.1 or HTTP/2 as the downstream connection was (`use_downstream_protocol_config`).
fn use_downstream_protocol() -> UpstreamProtocolOptions {
    UpstreamProtocolOptions::UseDownstreamProtocolConfig(UseDownstreamHttpConfig {
        http_protocol_options: Some(Http1ProtocolOptions::default()),
        http2_protocol_options: Some(Http2ProtocolOptions::default()),
        ..Default::default()
    })
}

fn passthrough(push: &Snapshot, name: &str, bind: Option<&str>) -> Cluster {
    let http = HttpProtocolOptions {
        upstream_protocol_options: Some(use_downstream_protocol()),
        ..Default::default()
    };
    Cluster {
        name: name.to_string(),
        cluster_discovery_type: discovery_type(DiscoveryType::OriginalDst),
        connect_timeout: Some(std_duration(push.mesh().connect_timeout)),
        lb_policy: LbPolicy::ClusterProvided as i32,
        circuit_breakers: Some(CircuitBreakers {
            thresholds: vec![default_thresholds()],
            ..Default::default()
        }),
        typed_extension_protocol_options: HashMap::from([(
            HTTP_PROTOCOL_OPTIONS_KEY.to_string(),
            any(&http),
        )]),
        upstream_bind_config: bind.map(bind_config),
        ..Default::default()
    }
}

fn bind_config(ip: &str) -> BindConfig {
    BindConfig {
        source_address: Some(SocketAddress {
            address: ip.to_string(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(0)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Inbound clusters `inbound|PORT||` for the proxy's instances (by target port, first instance wins),
/// original destination to the workload, with the Sidecar's `inboundConnectionPool` when set, else the
/// connection pool of the DestinationRule that applies to the instance's service (Istio's
/// `buildInboundClusterForPortOrUDS`: the Sidecar's pool replaces the rule's).
fn inbound_clusters(push: &Snapshot, proxy: &ProxyContext) -> Vec<Cluster> {
    let scope = push.sidecar_scope(proxy);
    let mut out: Vec<Cluster> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for instance in &proxy.service_instances {
        let port = instance.endpoint.endpoint_port;
        if port == 0 || instance.service_port.protocol == Protocol::Udp || !seen.insert(port) {
            continue;
        }
        let name = inbound_cluster_name(port);
        let dr = push.destination_rule(proxy, &instance.service);
        let mut b = original_dst_inbound(&name);
        if instance.service_port.protocol.is_http2() {
            b.set_h2();
        }
        let pool = inbound_pool(&scope, dr.as_deref(), instance.service_port.port, port);
        apply_connection_pool(push, &mut b, pool.part(), None, &instance.service_port, false);
        out.push(b.build());
    }
    out
}

/// The connection pool of an inbound cluster on workload port `cluster_port` (Istio's
/// `buildInboundClusterForPortOrUDS`): the Sidecar's for that port
/// ([`model::push::SidecarScope::inbound_connection_pool_for_port`]: the `ingress` entry's, else
/// `inboundConnectionPool`), else the DestinationRule's (`dr`: the rule of the instance's service) at
/// `service_port` (its `portLevelSettings` entry's pool when the entry exists, else the top level's).
fn inbound_pool<'a>(
    scope: &'a model::push::SidecarScope,
    dr: Option<&'a model::push::IndexedDestinationRule>,
    service_port: u32,
    cluster_port: u32,
) -> InboundPool<'a> {
    if let Some((value, path)) = scope.inbound_connection_pool_for_port(cluster_port) {
        return InboundPool::Sidecar(value, path);
    }
    let pool = dr.and_then(|d| {
        let tp = d.rule.traffic_policy.as_ref()?;
        let level =
            tp.port_level_settings.iter().find(|p| p.port.as_ref().is_some_and(|s| s.number == service_port));
        match level {
            Some(l) => l.connection_pool.as_ref(),
            None => tp.connection_pool.as_ref(),
        }
    });
    pool.map_or(InboundPool::None, InboundPool::Rule)
}

/// Where an inbound cluster's connection pool comes from ([`inbound_pool`]).
enum InboundPool<'a> {
    /// The Sidecar's, with its field path.
    Sidecar(&'a ConnectionPoolSettings, &'a str),
    /// The DestinationRule's.
    Rule(&'a ConnectionPoolSettings),
    /// None: Envoy's defaults.
    None,
}

impl InboundPool<'_> {
    fn part(&self) -> Option<Part<'_, ConnectionPoolSettings>> {
        match self {
            InboundPool::Sidecar(value, path) => Some(Part { value, path }),
            InboundPool::Rule(p) => Some(Part { value: p, path: "spec.trafficPolicy.connectionPool" }),
            InboundPool::None => None,
        }
    }
}

/// Where a Sidecar ingress entry's `defaultEndpoint` points: `(address, port)`; `0.0.0.0` / `[::]`
/// become the proxy's first IPv4 / IPv6 address (Istio's `PodIPAddressPrefix` rule), a `unix://` path
/// stays as is with port 0. `None` when the text is not `HOST:PORT` or `unix://PATH`.
fn ingress_endpoint(default_endpoint: &str, proxy: &ProxyContext) -> Option<(String, u32)> {
    if default_endpoint.starts_with(model::service::UNIX_ADDRESS_PREFIX) {
        return Some((default_endpoint.to_string(), 0));
    }
    let (host, port) = default_endpoint.rsplit_once(':')?;
    let port: u32 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip_of = |v6: bool| {
        proxy.ips.iter().find(|ip| ip.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_ipv6() == v6)).cloned()
    };
    let host = match host {
        "0.0.0.0" => ip_of(false)?,
        "::" => ip_of(true)?,
        h => h.to_string(),
    };
    Some((host, port))
}

/// Inbound clusters `inbound|PORT||` of the Sidecar's `ingress` entries (Istio's
/// `buildInboundClusters` with ingress listeners): STATIC to `defaultEndpoint`, or original destination
/// when it is empty (traffic goes where it was captured for).
fn ingress_clusters(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &model::push::SidecarScope,
    findings: &mut Vec<Finding>,
) -> Vec<Cluster> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for ingress in &scope.ingress {
        if ingress.protocol == Protocol::Udp || !seen.insert(ingress.port) {
            continue;
        }
        let name = inbound_cluster_name(ingress.port);
        let mut b = if ingress.default_endpoint.is_empty() {
            original_dst_inbound(&name)
        } else {
            let Some((addr, port)) = ingress_endpoint(&ingress.default_endpoint, proxy) else {
                findings.push(Finding {
                    severity: Severity::Dropped,
                    config: scope.sidecar.clone(),
                    path: "spec.ingress.defaultEndpoint".to_string(),
                    resource: name,
                    message: format!(
                        "defaultEndpoint {:?} is not HOST:PORT or unix://PATH (or names the proxy IP, which is                          unknown); no inbound cluster",
                        ingress.default_endpoint
                    ),
                });
                continue;
            };
            let endpoint = LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(EnvoyEndpoint {
                    address: Some(crate::convert::address(&addr, port)),
                    ..Default::default()
                })),
                ..Default::default()
            };
            Builder {
                cluster: Cluster {
                    name: name.clone(),
                    cluster_discovery_type: discovery_type(DiscoveryType::Static),
                    connect_timeout: Some(std_duration(push.mesh().connect_timeout)),
                    common_lb_config: Some(CommonLbConfig::default()),
                    load_assignment: Some(ClusterLoadAssignment {
                        cluster_name: name.clone(),
                        endpoints: vec![LocalityLbEndpoints {
                            lb_endpoints: vec![endpoint],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                http: None,
            }
        };
        if ingress.protocol.is_http2() {
            b.set_h2();
        }
        // The entry's (or the Sidecar's inbound) pool, else — as istiod's `findOrCreateService` finds
        // the instance whose target port is the entry's port — the pool of that service's
        // DestinationRule at the entry's port number; else Envoy's defaults.
        let dr = proxy
            .service_instances
            .iter()
            .find(|i| i.endpoint.endpoint_port == ingress.port)
            .and_then(|i| push.destination_rule(proxy, &i.service));
        let pool = inbound_pool(scope, dr.as_deref(), ingress.port, ingress.port);
        if let Some(part) = pool.part() {
            let port =
                Port { name: ingress.port_name.clone(), port: ingress.port, protocol: ingress.protocol };
            apply_connection_pool(push, &mut b, Some(part), None, &port, false);
        }
        out.push(b.build());
    }
    out
}

/// An original-destination inbound cluster bound to Istio's inbound passthrough source address.
fn original_dst_inbound(name: &str) -> Builder {
    Builder {
        cluster: Cluster {
            name: name.to_string(),
            cluster_discovery_type: discovery_type(DiscoveryType::OriginalDst),
            lb_policy: LbPolicy::ClusterProvided as i32,
            common_lb_config: Some(CommonLbConfig::default()),
            cleanup_interval: Some(envoy_types::pb::google::protobuf::Duration { seconds: 60, nanos: 0 }),
            upstream_bind_config: Some(bind_config(INBOUND_PASSTHROUGH_BIND_IPV4)),
            ..Default::default()
        },
        http: None,
    }
}

/// Services whose clusters a proxy gets: the Sidecar scope's (routers: everything exported to their
/// namespace, Istio's default without `PILOT_FILTER_GATEWAY_CLUSTER_CONFIG`), except aliases
/// (Kubernetes `ExternalName` Services), which have no cluster of their own (Istio's
/// `buildOutboundClusters`).
fn outbound_clusters(push: &Snapshot, proxy: &ProxyContext, findings: &mut Vec<Finding>) -> Vec<Cluster> {
    let scope = push.sidecar_scope(proxy);
    findings.extend(scope.findings().iter().cloned());
    let mut out = Vec::new();
    for service in scope.services() {
        if service.is_alias() || (proxy.proxyless_grpc && service.resolution != Resolution::ClientSideLb) {
            continue;
        }
        let dr = push.destination_rule(proxy, service);
        service_clusters(push, proxy, service, dr.as_deref(), findings, &mut out);
    }
    for c in &mut out {
        crate::stats::add_cluster_metadata_exchange(proxy, c);
    }
    out
}

/// The SNI-DNAT clusters of a router that has an `AUTO_PASSTHROUGH` gateway server (Istio's
/// `buildOutboundSniDnatClusters`): for every mesh-internal service of its scope and every port but
/// UDP, `outbound_.PORT_._.HOST` and one per DestinationRule subset (`outbound_.PORT_.SUBSET_.HOST`),
/// built as the outbound cluster of the same port and subset but without TLS (the gateway passes the
/// client's mTLS connection through; istiod's `SniDnatClusterMode` skips the upstream TLS settings).
/// Their endpoints are the mTLS-capable ones only (`endpoint`). Not cached: made per router, as istiod.
fn sni_dnat_clusters(push: &Snapshot, proxy: &ProxyContext) -> Vec<Cluster> {
    if proxy.kind != ProxyKind::Router
        || proxy.proxyless_grpc
        || !crate::gateway::has_auto_passthrough(push, proxy)
    {
        return Vec::new();
    }
    let scope = push.sidecar_scope(proxy);
    let mut built = Vec::new();
    // The outbound clusters' findings are reported with them already.
    let mut ignored = Vec::new();
    for service in scope.services() {
        if service.mesh_external || service.is_alias() {
            continue;
        }
        let dr = push.destination_rule(proxy, service);
        service_clusters(push, proxy, service, dr.as_deref(), &mut ignored, &mut built);
    }
    built
        .into_iter()
        .filter_map(|mut c| {
            let key = crate::naming::parse_cluster_name(&c.name)?;
            let name = crate::naming::sni_dnat_cluster_name(key.port, key.subset, key.host);
            c.transport_socket = None;
            c.transport_socket_matches.clear();
            if let Some(eds) = c.eds_cluster_config.as_mut()
                && !eds.service_name.is_empty()
            {
                eds.service_name.clone_from(&name);
            }
            if let Some(la) = c.load_assignment.as_mut() {
                la.cluster_name.clone_from(&name);
            }
            c.name = name;
            Some(c)
        })
        .collect()
}

/// `true` if traffic to `port` of the rule's host is load balanced by consistent hash (then default
/// retries do not avoid previous hosts, as Istio's `DefaultConsistentHashPolicy`).
pub(crate) fn uses_consistent_hash(rule: &DestinationRule, port: u32) -> bool {
    let Some(tp) = &rule.traffic_policy else { return false };
    let lb = match tp.port_level_settings.iter().find(|p| p.port.as_ref().is_some_and(|s| s.number == port)) {
        Some(level) => level.load_balancer.as_ref(),
        None => tp.load_balancer.as_ref(),
    };
    lb.is_some_and(|lb| lb.consistent_hash.is_some())
}

/// Proxyless gRPC accepts ROUND_ROBIN, RING_HASH and LEAST_REQUEST on EDS clusters; anything else
/// becomes ROUND_ROBIN (reported), and Envoy-only fields are dropped.
fn grpc_compatible(mut c: Cluster, findings: &mut Vec<Finding>) -> Option<Cluster> {
    if cluster_type(&c) != Some(DiscoveryType::Eds) {
        return None;
    }
    let policy = LbPolicy::try_from(c.lb_policy).unwrap_or(LbPolicy::RoundRobin);
    if !matches!(policy, LbPolicy::RoundRobin | LbPolicy::RingHash | LbPolicy::LeastRequest) {
        findings.push(Finding {
            severity: Severity::Unsupported,
            config: None,
            path: String::new(),
            resource: c.name.clone(),
            message: format!(
                "proxyless gRPC does not support load balancing policy {}; ROUND_ROBIN used",
                policy.as_str_name()
            ),
        });
        c.lb_policy = LbPolicy::RoundRobin as i32;
        c.lb_config = None;
    }
    c.typed_extension_protocol_options.clear();
    c.upstream_connection_options = None;
    c.circuit_breakers = c.circuit_breakers.take().and_then(grpc_circuit_breakers);
    Some(c)
}

/// The circuit breaker a proxyless gRPC client gets (Istio's grpcgen `applyCircuitBreakers`): only a
/// DestinationRule's `http2MaxRequests`, as `max_requests` of the default priority. gRPC reads nothing
/// else there (gRFC A32) and allows 1024 concurrent requests without it; Envoy's unlimited default
/// (`u32::MAX`) would lift that limit, so it is not sent.
fn grpc_circuit_breakers(cb: CircuitBreakers) -> Option<CircuitBreakers> {
    // Priority 0 is DEFAULT (envoy.config.core.v3.RoutingPriority).
    let max = cb.thresholds.iter().find(|t| t.priority == 0).and_then(|t| t.max_requests)?;
    (max.value != u32::MAX).then(|| CircuitBreakers {
        thresholds: vec![Thresholds { max_requests: Some(max), ..Default::default() }],
        ..Default::default()
    })
}

/// The proxy's outbound clusters in generation order, after the proxyless gRPC translation for
/// proxyless clients.
fn outbound_for(push: &Snapshot, proxy: &ProxyContext, findings: &mut Vec<Finding>) -> Vec<Cluster> {
    let clusters = outbound_clusters(push, proxy, findings);
    if proxy.proxyless_grpc {
        clusters.into_iter().filter_map(|c| grpc_compatible(c, findings)).collect()
    } else {
        clusters
    }
}

/// The clusters of a proxy that are its own rather than its scope's (none for proxyless gRPC):
/// BlackHoleCluster, PassthroughCluster, and for a capturing sidecar its inbound clusters (or its
/// Sidecar's `ingress` ones) and InboundPassthroughClusterIpv4.
fn own_clusters(push: &Snapshot, proxy: &ProxyContext, findings: &mut Vec<Finding>) -> Vec<Cluster> {
    let mut clusters = Vec::new();
    if proxy.proxyless_grpc {
        return clusters;
    }
    clusters.push(black_hole(push));
    let mut outbound_passthrough = passthrough(push, PASSTHROUGH_CLUSTER, None);
    crate::stats::add_cluster_metadata_exchange(proxy, &mut outbound_passthrough);
    clusters.push(outbound_passthrough);
    let scope = (proxy.kind == ProxyKind::Sidecar).then(|| push.sidecar_scope(proxy));
    if let Some(scope) = scope.as_ref().filter(|s| !s.ingress.is_empty()) {
        clusters.extend(ingress_clusters(push, proxy, scope, findings));
    } else if proxy.kind == ProxyKind::Sidecar && proxy.interception_mode != InterceptionMode::None {
        clusters.extend(inbound_clusters(push, proxy));
    }
    if proxy.kind == ProxyKind::Sidecar && proxy.interception_mode != InterceptionMode::None {
        clusters.push(passthrough(push, INBOUND_PASSTHROUGH_CLUSTER, Some(INBOUND_PASSTHROUGH_BIND_IPV4)));
    }
    clusters
}

/// Sorts `clusters` by name (stable: of equal names the first generated is kept, the others dropped and
/// reported) and, with `names` non-empty, keeps only those.
fn finish<T>(
    mut clusters: Vec<T>,
    name: fn(&T) -> &str,
    names: &[String],
    findings: &mut Vec<Finding>,
) -> Vec<T> {
    clusters.sort_by(|a, b| name(a).cmp(name(b)));
    let before = clusters.len();
    clusters.dedup_by(|a, b| name(a) == name(b));
    if clusters.len() != before {
        findings.push(Finding {
            severity: Severity::Dropped,
            config: None,
            path: String::new(),
            resource: String::new(),
            message: format!("{} duplicate cluster names; the first of each kept", before - clusters.len()),
        });
    }
    if !names.is_empty() {
        clusters.retain(|c| names.iter().any(|n| n == name(c)));
    }
    clusters
}

/// CDS for `proxy`: clusters sorted by name; with `names` non-empty, only those (proxyless gRPC asks
/// by name).
pub fn generate_clusters(push: &Snapshot, proxy: &ProxyContext, names: &[String]) -> Built<Cluster> {
    let mut findings = Vec::new();
    let mut clusters = outbound_for(push, proxy, &mut findings);
    clusters.extend(own_clusters(push, proxy, &mut findings));
    clusters.extend(sni_dnat_clusters(push, proxy));
    let clusters = finish(clusters, |c: &Cluster| &c.name, names, &mut findings);
    crate::envoy_filter::patch_clusters(push, proxy, Built::new(clusters, findings))
}

/// CDS for `proxy`, encoded: [`generate_clusters`]'s clusters in protobuf wire format. The outbound
/// clusters are made once per snapshot for every proxy with the same [`OutboundClustersKey`] (scope,
/// and the few proxy properties they read) and shared, so a push to many proxies of one namespace
/// builds and encodes them once (Istio caches CDS per cluster, `pilot/pkg/networking/core/cluster_cache.go`);
/// the proxy's own clusters (inbound, passthrough) are made per proxy.
pub fn generate_clusters_encoded(
    push: &Snapshot,
    proxy: &ProxyContext,
    names: &[String],
) -> Built<EncodedResource> {
    let mut findings = Vec::new();
    let shared = shared_outbound(push, proxy);
    findings.extend(shared.1.iter().cloned());
    let mut clusters = shared.0.clone();
    clusters.extend(own_clusters(push, proxy, &mut findings).iter().map(shared_form));
    clusters.extend(sni_dnat_clusters(push, proxy).iter().map(shared_form));
    let clusters = finish(clusters, |c: &EncodedResource| &c.name, names, &mut findings);
    crate::envoy_filter::patch_clusters(push, proxy, Built::new(clusters, findings))
}

/// The proxy's outbound clusters, encoded, from the snapshot's cache: made once per snapshot and
/// [`OutboundClustersKey`], shared by every proxy with the same key.
fn shared_outbound(push: &Snapshot, proxy: &ProxyContext) -> SharedClusters {
    let scope = push.sidecar_scope(proxy);
    let key = OutboundClustersKey {
        scope: push.scope_key(proxy),
        labels: push.routes_depend_on_labels(&scope).then(|| proxy.labels.clone()),
        kind: proxy.kind,
        proxyless: proxy.proxyless_grpc,
        workload_certificates: proxy.has_workload_certificates(),
        ipv6_only: dns_lookup_family(proxy) == DnsLookupFamily::V6Only,
        locality: scope.has_dns_services().then(|| proxy.locality.clone()),
        metadata_exchange: proxy.istio_extensions.upstream_metadata_exchange,
    };
    push.outbound_clusters(key, || {
        let mut found = Vec::new();
        let encoded = outbound_for(push, proxy, &mut found).iter().map(shared_form).collect();
        (encoded, found)
    })
}

/// Names of the proxy's outbound clusters (what its CDS carries besides its own inbound,
/// passthrough and black-hole clusters), from the snapshot's shared cache: a lookup once the
/// snapshot's CDS was made for a proxy of the same key. Every EDS name a real proxy asks for is
/// one of these.
pub fn outbound_cluster_names(push: &Snapshot, proxy: &ProxyContext) -> Vec<String> {
    shared_outbound(push, proxy).0.iter().map(|c| c.name.clone()).collect()
}

fn shared_form(cluster: &Cluster) -> EncodedResource {
    EncodedResource { name: cluster.name.clone(), encoded: Encoded::of(cluster) }
}

/// Names of the EDS clusters [`generate_clusters`] makes for `proxy` (what EDS serves).
pub fn eds_cluster_names(push: &Snapshot, proxy: &ProxyContext) -> Vec<String> {
    generate_clusters(push, proxy, &[])
        .resources
        .into_iter()
        .filter(|c| cluster_type(c) == Some(DiscoveryType::Eds))
        .map(|c| c.name)
        .collect()
}
