//! `DestinationRule` (`networking.istio.io`): policies applied to traffic for a service after
//! routing (load balancing, connection pools, outlier detection, TLS origination, subsets).
//!
//! Follows `networking/v1alpha3/destination_rule.proto` of the Istio API (`istio.networking.v1alpha3`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::virtual_service::PortSelector;
use crate::{
    type_v1beta1::WorkloadSelector,
    wkt::{Duration, is_default},
};

/// Traffic policies for one host, and its named subsets (versions).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DestinationRule {
    /// The service the rule applies to (registry name; short names are qualified with the rule's
    /// namespace; wildcard prefix allowed). Required.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub host: String,
    /// Policies for all traffic to the host (subsets and ports may override them).
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub traffic_policy: Option<TrafficPolicy>,
    /// Named groups of the host's endpoints, selected by labels, with optional own policies.
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub subsets: Vec<Subset>,
    /// Namespaces the rule is visible to (`.` = own namespace, `*` = all). Empty means the
    /// mesh-wide default (usually all).
    #[prost(string, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub export_to: Vec<String>,
    /// Workloads (in the rule's namespace) that apply this rule; unset means all workloads that can
    /// see it.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub workload_selector: Option<WorkloadSelector>,
}

/// Policies for traffic to a destination: load balancing, connection pool, outlier detection,
/// TLS, per-port overrides, tunnelling, PROXY protocol and retry budget.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TrafficPolicy {
    /// Load balancing algorithm and locality settings.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub load_balancer: Option<LoadBalancerSettings>,
    /// Limits on connections and requests to each upstream host (circuit breaking).
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub connection_pool: Option<ConnectionPoolSettings>,
    /// Ejection of unhealthy hosts from the load balancing pool.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub outlier_detection: Option<OutlierDetection>,
    /// TLS settings for connections to the upstream.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub tls: Option<ClientTlsSettings>,
    /// Per-port policies; a port-level policy replaces (does not merge with) the destination-level
    /// one. At most 4096 entries.
    #[prost(message, repeated, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub port_level_settings: Vec<traffic_policy::PortTrafficPolicy>,
    /// Tunnel TCP/TLS traffic for the host through an HTTP CONNECT or POST proxy.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub tunnel: Option<traffic_policy::TunnelSettings>,
    /// Send a PROXY protocol header on upstream connections.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub proxy_protocol: Option<traffic_policy::ProxyProtocol>,
    /// Limit on concurrent retries relative to active requests.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub retry_budget: Option<traffic_policy::RetryBudget>,
}

impl TrafficPolicy {
    /// The `portLevelSettings` entry for `port` (the first whose `port.number` is `port`): it replaces
    /// the destination-level policy for that port, without inheriting from it (Istio's
    /// `GetPortLevelTrafficPolicy`).
    pub fn port_level(&self, port: u32) -> Option<&traffic_policy::PortTrafficPolicy> {
        self.port_level_settings.iter().find(|p| p.port.as_ref().is_some_and(|s| s.number == port))
    }
}

/// Messages nested in [`TrafficPolicy`].
pub mod traffic_policy {
    use serde::{Deserialize, Serialize};

    use crate::wkt::{Duration, is_default};

    /// Policies for one port of the destination, overriding the destination-level ones.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct PortTrafficPolicy {
        /// The port these policies apply to.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub port: Option<super::PortSelector>,
        /// Load balancing for this port.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub load_balancer: Option<super::LoadBalancerSettings>,
        /// Connection pool limits for this port.
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub connection_pool: Option<super::ConnectionPoolSettings>,
        /// Outlier detection for this port.
        #[prost(message, optional, tag = "4")]
        #[serde(skip_serializing_if = "is_default")]
        pub outlier_detection: Option<super::OutlierDetection>,
        /// Upstream TLS settings for this port.
        #[prost(message, optional, tag = "5")]
        #[serde(skip_serializing_if = "is_default")]
        pub tls: Option<super::ClientTlsSettings>,
    }

    /// Where and how to tunnel the downstream connection.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct TunnelSettings {
        /// Tunnel protocol: `CONNECT` (default) or `POST`.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub protocol: String,
        /// Host (FQDN or IP) the connection is tunnelled to. Required.
        #[prost(string, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub target_host: String,
        /// Port the connection is tunnelled to. Required.
        #[prost(uint32, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub target_port: u32,
    }

    /// PROXY protocol settings for upstream connections.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct ProxyProtocol {
        /// PROXY protocol version; default `V1`.
        #[prost(enumeration = "proxy_protocol::Version", tag = "1")]
        #[serde(with = "proxy_protocol::Version", skip_serializing_if = "is_default")]
        pub version: i32,
    }

    /// Enums nested in [`ProxyProtocol`].
    pub mod proxy_protocol {
        crate::proto_enum! {
            /// PROXY protocol versions.
            pub enum Version {
                /// Version 1, human-readable text header.
                V1 = 0 => "V1",
                /// Version 2, binary header.
                V2 = 1 => "V2",
            }
        }
    }

    /// A cap on concurrent retries as a share of active and pending requests.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct RetryBudget {
        /// Allowed concurrent retries as a percentage (0–100) of active plus pending requests;
        /// unset means 20.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub percent: Option<f64>,
        /// Concurrent retries always allowed regardless of the percentage; 0 means 3.
        #[prost(uint32, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub min_retry_concurrency: u32,
        /// Window over which requests count toward the budget; unset or 0 means only current
        /// active and pending requests.
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub budget_interval: Option<Duration>,
    }
}

/// A named group of the host's endpoints (e.g. a version), with policies that override the
/// rule-level ones.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Subset {
    /// Subset name, referenced by `destination.subset` in routes. Required.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Labels an endpoint must carry to belong to the subset.
    #[prost(btree_map = "string, string", tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub labels: BTreeMap<String, String>,
    /// Policies for this subset; fields set here override the rule-level policy.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub traffic_policy: Option<TrafficPolicy>,
}

/// Load balancing policy for a destination.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoadBalancerSettings {
    /// A standard algorithm. One of `lb_policy`: at most one of `simple`, `consistentHash` may be set.
    #[prost(enumeration = "load_balancer_settings::SimpleLb", optional, tag = "1")]
    #[serde(
        with = "crate::wkt::OptEnum::<load_balancer_settings::SimpleLb>",
        skip_serializing_if = "is_default"
    )]
    pub simple: Option<i32>,
    /// Hash-based soft session affinity. One of `lb_policy`: at most one of `simple`,
    /// `consistentHash` may be set.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub consistent_hash: Option<load_balancer_settings::ConsistentHashLb>,
    /// Locality-weighted load balancing; replaces the mesh-wide setting entirely. Not with
    /// `zoneAwareLbSetting`.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub locality_lb_setting: Option<LocalityLoadBalancerSetting>,
    /// Zone-aware load balancing; replaces the mesh-wide setting entirely. Not with
    /// `localityLbSetting`.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub zone_aware_lb_setting: Option<ZoneAwareLoadBalancerSetting>,
    /// Deprecated: use `warmup` instead. Slow-start window for new endpoints.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub warmup_duration_secs: Option<Duration>,
    /// Slow start: new endpoints get progressively more traffic during a window (ROUND_ROBIN and
    /// LEAST_REQUEST only). Not with `warmupDurationSecs`.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub warmup: Option<WarmupConfiguration>,
}

/// Messages and enums nested in [`LoadBalancerSettings`].
pub mod load_balancer_settings {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    crate::proto_enum! {
        /// Load balancing algorithms that need no tuning.
        pub enum SimpleLb {
            /// Not set: Istio picks the default (LEAST_REQUEST).
            Unspecified = 0 => "UNSPECIFIED",
            /// Deprecated: use `LEAST_REQUEST` instead.
            LeastConn = 1 => "LEAST_CONN",
            /// A random healthy host.
            Random = 2 => "RANDOM",
            /// Forward to the original destination address, without load balancing.
            Passthrough = 3 => "PASSTHROUGH",
            /// Round robin over hosts.
            RoundRobin = 4 => "ROUND_ROBIN",
            /// Favour hosts with the fewest outstanding requests.
            LeastRequest = 5 => "LEAST_REQUEST",
        }
    }

    /// Consistent-hash load balancing: the hash key and the hashing algorithm.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct ConsistentHashLb {
        /// Hash on the value of this request header. One of `hash_key`: at most one of
        /// `httpHeaderName`, `httpCookie`, `useSourceIp`, `httpQueryParameterName` may be set.
        #[prost(string, optional, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub http_header_name: Option<String>,
        /// Hash on a cookie (generated when absent and a TTL is set). One of `hash_key`: at most one
        /// of `httpHeaderName`, `httpCookie`, `useSourceIp`, `httpQueryParameterName` may be set.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub http_cookie: Option<consistent_hash_lb::HttpCookie>,
        /// Hash on the source IP (HTTP and TCP). One of `hash_key`: at most one of
        /// `httpHeaderName`, `httpCookie`, `useSourceIp`, `httpQueryParameterName` may be set.
        #[prost(bool, optional, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub use_source_ip: Option<bool>,
        /// Hash on the value of this query parameter. One of `hash_key`: at most one of
        /// `httpHeaderName`, `httpCookie`, `useSourceIp`, `httpQueryParameterName` may be set.
        #[prost(string, optional, tag = "5")]
        #[serde(skip_serializing_if = "is_default")]
        pub http_query_parameter_name: Option<String>,
        /// Ring hash (the default algorithm). One of `hash_algorithm`: at most one of `ringHash`,
        /// `maglev` may be set.
        #[prost(message, optional, tag = "6")]
        #[serde(skip_serializing_if = "is_default")]
        pub ring_hash: Option<consistent_hash_lb::RingHash>,
        /// Maglev hashing. One of `hash_algorithm`: at most one of `ringHash`, `maglev` may be set.
        #[prost(message, optional, tag = "7")]
        #[serde(skip_serializing_if = "is_default")]
        pub maglev: Option<consistent_hash_lb::MagLev>,
        /// Deprecated: use `ringHash.minimumRingSize` instead. Minimum number of virtual nodes of
        /// the hash ring.
        #[prost(uint64, tag = "4")]
        #[serde(skip_serializing_if = "is_default")]
        pub minimum_ring_size: u64,
    }

    /// Messages nested in [`ConsistentHashLb`].
    pub mod consistent_hash_lb {
        use serde::{Deserialize, Serialize};

        use crate::wkt::{Duration, is_default};

        /// Ring hash algorithm settings.
        #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct RingHash {
            /// Minimum number of virtual nodes on the ring; 0 means 1024.
            #[prost(uint64, tag = "1")]
            #[serde(skip_serializing_if = "is_default")]
            pub minimum_ring_size: u64,
        }

        /// Maglev algorithm settings.
        #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct MagLev {
            /// Lookup table size, a prime below 5000011; 0 means 65537.
            #[prost(uint64, tag = "1")]
            #[serde(skip_serializing_if = "is_default")]
            pub table_size: u64,
        }

        /// The cookie used as hash key.
        #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct HttpCookie {
            /// Cookie name. Required.
            #[prost(string, tag = "1")]
            #[serde(skip_serializing_if = "is_default")]
            pub name: String,
            /// Path attribute of a generated cookie.
            #[prost(string, tag = "2")]
            #[serde(skip_serializing_if = "is_default")]
            pub path: String,
            /// Lifetime of a generated cookie; when set, a cookie is generated if absent (0s gives a
            /// session cookie).
            #[prost(message, optional, tag = "3")]
            #[serde(skip_serializing_if = "is_default")]
            pub ttl: Option<Duration>,
            /// Extra attributes of a generated cookie.
            #[prost(message, repeated, tag = "4")]
            #[serde(skip_serializing_if = "is_default")]
            pub attributes: Vec<http_cookie::Attribute>,
        }

        /// Messages nested in [`HttpCookie`].
        pub mod http_cookie {
            use serde::{Deserialize, Serialize};

            use crate::wkt::is_default;

            /// One extra attribute of a generated cookie (e.g. `SameSite=Strict`).
            #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
            #[serde(rename_all = "camelCase", default)]
            pub struct Attribute {
                /// Attribute name. Required.
                #[prost(string, tag = "1")]
                #[serde(skip_serializing_if = "is_default")]
                pub name: String,
                /// Attribute value; empty for flag attributes.
                #[prost(string, tag = "2")]
                #[serde(skip_serializing_if = "is_default")]
                pub value: String,
            }
        }
    }
}

/// Slow start of new endpoints: their share of traffic grows over a window.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WarmupConfiguration {
    /// Length of the warm-up window. Required.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub duration: Option<Duration>,
    /// Starting share of the endpoint's normal weight, in percent (0–100); unset means 10.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub minimum_percent: Option<f64>,
    /// Shape of the ramp-up (1.0 = linear, larger = faster early growth); unset means 1.0.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub aggression: Option<f64>,
}

/// Limits on connections and requests to each host of the destination (circuit breaking).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConnectionPoolSettings {
    /// Settings for all connections (HTTP and TCP).
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub tcp: Option<connection_pool_settings::TcpSettings>,
    /// Settings for HTTP/1.1, HTTP/2 and gRPC connections.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub http: Option<connection_pool_settings::HttpSettings>,
}

/// Messages nested in [`ConnectionPoolSettings`].
pub mod connection_pool_settings {
    use serde::{Deserialize, Serialize};

    use crate::wkt::{Duration, is_default};

    /// Connection-level limits and timeouts shared by HTTP and TCP.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct TcpSettings {
        /// Maximum HTTP/1 or TCP connections to one host; 0 means 2^32-1.
        #[prost(int32, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub max_connections: i32,
        /// TCP connect timeout (at least 1ms); unset means 10s.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub connect_timeout: Option<Duration>,
        /// Enables SO_KEEPALIVE with these settings.
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub tcp_keepalive: Option<tcp_settings::TcpKeepalive>,
        /// Maximum lifetime of a connection (at least 1ms); unset means unlimited.
        #[prost(message, optional, tag = "4")]
        #[serde(skip_serializing_if = "is_default")]
        pub max_connection_duration: Option<Duration>,
        /// Close upstream connections idle (no bytes) this long; unset means 1h, 0s disables.
        #[prost(message, optional, tag = "5")]
        #[serde(skip_serializing_if = "is_default")]
        pub idle_timeout: Option<Duration>,
    }

    /// Messages nested in [`TcpSettings`].
    pub mod tcp_settings {
        use serde::{Deserialize, Serialize};

        use crate::wkt::{Duration, is_default};

        /// TCP keepalive probe settings; unset values use the OS defaults.
        #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct TcpKeepalive {
            /// Unanswered probes before the connection is considered dead (Linux default 9).
            #[prost(uint32, tag = "1")]
            #[serde(skip_serializing_if = "is_default")]
            pub probes: u32,
            /// Idle time before the first probe (Linux default 7200s).
            #[prost(message, optional, tag = "2")]
            #[serde(skip_serializing_if = "is_default")]
            pub time: Option<Duration>,
            /// Time between probes (Linux default 75s).
            #[prost(message, optional, tag = "3")]
            #[serde(skip_serializing_if = "is_default")]
            pub interval: Option<Duration>,
        }
    }

    /// HTTP connection pool limits.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct HttpSettings {
        /// Maximum requests queued while waiting for a connection (HTTP/1.1 and HTTP/2); 0 means
        /// 2^32-1.
        #[prost(int32, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub http1_max_pending_requests: i32,
        /// Maximum active requests to a host (HTTP/1.1 and HTTP/2); 0 means 2^32-1.
        #[prost(int32, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub http2_max_requests: i32,
        /// Maximum requests per connection (1 disables keep-alive); 0 means unlimited.
        #[prost(int32, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub max_requests_per_connection: i32,
        /// Maximum outstanding retries to all hosts of the cluster; 0 means 2^32-1.
        #[prost(int32, tag = "4")]
        #[serde(skip_serializing_if = "is_default")]
        pub max_retries: i32,
        /// Close pool connections with no active requests for this long; unset means 1h.
        #[prost(message, optional, tag = "5")]
        #[serde(skip_serializing_if = "is_default")]
        pub idle_timeout: Option<Duration>,
        /// Whether HTTP/1.1 connections are upgraded to HTTP/2.
        #[prost(enumeration = "http_settings::H2UpgradePolicy", tag = "6")]
        #[serde(with = "http_settings::H2UpgradePolicy", skip_serializing_if = "is_default")]
        pub h2_upgrade_policy: i32,
        /// Use the client's HTTP protocol upstream (disables `h2UpgradePolicy`). Default false.
        #[prost(bool, tag = "7")]
        #[serde(skip_serializing_if = "is_default")]
        pub use_client_protocol: bool,
        /// Maximum concurrent streams per HTTP/2 connection; 0 means 2^31-1.
        #[prost(int32, tag = "8")]
        #[serde(skip_serializing_if = "is_default")]
        pub max_concurrent_streams: i32,
        /// HTTP/2 PING keep-alive for upstream connections.
        #[prost(message, optional, tag = "9")]
        #[serde(skip_serializing_if = "is_default")]
        pub http2_keep_alive: Option<http_settings::ConnectionKeepalive>,
    }

    /// Messages and enums nested in [`HttpSettings`].
    pub mod http_settings {
        use serde::{Deserialize, Serialize};

        use crate::wkt::{Duration, is_default};

        crate::proto_enum! {
            /// Policy for upgrading HTTP/1.1 connections to HTTP/2.
            pub enum H2UpgradePolicy {
                /// Use the mesh-wide default.
                Default = 0 => "DEFAULT",
                /// Never upgrade.
                DoNotUpgrade = 1 => "DO_NOT_UPGRADE",
                /// Upgrade to HTTP/2.
                Upgrade = 2 => "UPGRADE",
            }
        }

        /// HTTP/2 PING frame settings.
        #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct ConnectionKeepalive {
            /// Interval between PINGs. Required when `http2KeepAlive` is set.
            #[prost(message, optional, tag = "1")]
            #[serde(skip_serializing_if = "is_default")]
            pub interval: Option<Duration>,
            /// Time to wait for a PING response before closing. Required when `http2KeepAlive` is set.
            #[prost(message, optional, tag = "2")]
            #[serde(skip_serializing_if = "is_default")]
            pub timeout: Option<Duration>,
        }
    }
}

/// Ejection of hosts that keep failing from the load balancing pool (passive health checking).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutlierDetection {
    /// Deprecated: use `consecutive5xxErrors` instead. Consecutive errors before ejection.
    #[prost(int32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub consecutive_errors: i32,
    /// Count locally originated failures (connect errors, timeouts) separately from upstream
    /// responses. Default false.
    #[prost(bool, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub split_external_local_origin_errors: bool,
    /// Consecutive local-origin failures before ejection (with `splitExternalLocalOriginErrors`);
    /// unset means 5.
    #[prost(message, optional, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub consecutive_local_origin_failures: Option<u32>,
    /// Consecutive gateway errors (502, 503, 504; connect failures for TCP) before ejection;
    /// unset or 0 disables.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub consecutive_gateway_errors: Option<u32>,
    /// Consecutive 5xx errors (connect and request failures for TCP) before ejection; unset means
    /// 5, 0 disables.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub consecutive_5xx_errors: Option<u32>,
    /// Time between ejection sweeps (at least 1ms); unset means 10s.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub interval: Option<Duration>,
    /// Minimum ejection time, multiplied by the number of ejections (at least 1ms); unset means 30s.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub base_ejection_time: Option<Duration>,
    /// Maximum percentage of hosts that may be ejected; 0 means 10.
    #[prost(int32, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub max_ejection_percent: i32,
    /// Outlier detection is off while fewer than this percentage of hosts are healthy; default 0.
    #[prost(int32, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub min_health_percent: i32,
    /// HTTP status codes (100–599) counted as errors; empty means 5xx.
    #[prost(uint32, repeated, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub outlier_detection_http_error_codes: Vec<u32>,
}

/// TLS settings for connections to the upstream (TLS origination).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientTlsSettings {
    /// Whether and how to use TLS.
    #[prost(enumeration = "client_tls_settings::TlSmode", tag = "1")]
    #[serde(with = "client_tls_settings::TlSmode", skip_serializing_if = "is_default")]
    pub mode: i32,
    /// Path of the client certificate file. Required for `MUTUAL` (unless `credentialName`); empty
    /// for `ISTIO_MUTUAL`.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub client_certificate: String,
    /// Path of the client private key file. Required for `MUTUAL` (unless `credentialName`); empty
    /// for `ISTIO_MUTUAL`.
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub private_key: String,
    /// Path of the CA bundle to verify the server certificate; empty means the OS CAs.
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub ca_certificates: String,
    /// Name of a secret (in the proxy's namespace) holding the client certificate, key, CA and CRL;
    /// not with the file paths.
    #[prost(string, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub credential_name: String,
    /// Names accepted in the server certificate's subject alt names; overrides the ServiceEntry's.
    #[prost(string, repeated, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub subject_alt_names: Vec<String>,
    /// SNI sent in the handshake; empty means derived from the request authority.
    #[prost(string, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub sni: String,
    /// Skip verifying the server certificate's CA signature and SAN. Default false.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub insecure_skip_verify: Option<bool>,
    /// Path of a certificate revocation list to check the server certificate against.
    #[prost(string, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub ca_crl: String,
}

/// Enums nested in [`ClientTlsSettings`].
pub mod client_tls_settings {
    crate::proto_enum! {
        /// TLS modes for upstream connections (proto `TLSmode`).
        pub enum TlSmode {
            /// Plain text, no TLS.
            Disable = 0 => "DISABLE",
            /// TLS, verifying the server.
            Simple = 1 => "SIMPLE",
            /// Mutual TLS with the given client certificate.
            Mutual = 2 => "MUTUAL",
            /// Mutual TLS with Istio-issued workload certificates (other fields must be empty).
            IstioMutual = 3 => "ISTIO_MUTUAL",
        }
    }
}

/// Locality-weighted load balancing: traffic distribution and failover between
/// `region/zone/sub-zone` localities. Set at most one of `distribute`, `failover`,
/// `failoverPriority`.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityLoadBalancerSetting {
    /// Explicit traffic weights from source localities to destination localities.
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub distribute: Vec<locality_load_balancer_setting::Distribute>,
    /// Region to fail over to when a region's endpoints are unhealthy (needs outlier detection).
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub failover: Vec<locality_load_balancer_setting::Failover>,
    /// Ordered labels (`key` or `key=value`) that rank endpoints into priorities for failover.
    #[prost(string, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub failover_priority: Vec<String>,
    /// Turn locality load balancing on or off for this destination; unset means the mesh setting.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub enabled: Option<bool>,
}

/// Messages nested in [`LocalityLoadBalancerSetting`].
pub mod locality_load_balancer_setting {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// How traffic from one locality is split over destination localities.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Distribute {
        /// Source locality (`region/zone/sub-zone`, trailing `*` allowed).
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub from: String,
        /// Destination locality to weight; weights should sum to 100, absent localities get none.
        #[prost(btree_map = "string, uint32", tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub to: BTreeMap<String, u32>,
    }

    /// A region-to-region failover rule.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Failover {
        /// Source region.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub from: String,
        /// Region that takes the traffic when `from`'s endpoints are unhealthy.
        #[prost(string, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub to: String,
    }
}

/// Zone-aware load balancing: prefer endpoints in the caller's zone, with shares computed from
/// endpoint counts. Not with `localityLbSetting`.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ZoneAwareLoadBalancerSetting {
    /// Turn zone-aware load balancing on or off for this destination; unset means the mesh setting.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub enabled: Option<bool>,
    /// Order of the cross-region failover tiers.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub failover: Vec<zone_aware_load_balancer_setting::Failover>,
    /// Ordered labels (`key` or `key=value`) that rank endpoints into priorities.
    #[prost(string, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub failover_priority: Vec<String>,
    /// Minimum hosts in the local region for zone-aware routing to apply; unset means 6.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub min_cluster_size: Option<u64>,
}

/// Messages nested in [`ZoneAwareLoadBalancerSetting`].
pub mod zone_aware_load_balancer_setting {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// A region-to-region failover rule.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Failover {
        /// Source region.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub from: String,
        /// Region that takes the traffic when `from`'s endpoints are unhealthy.
        #[prost(string, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub to: String,
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::{
        de::{UnknownField, from_node},
        schema::Kind,
        test_corpus::{Scope, check_corpus, spec_node},
    };

    fn decode(text: &str) -> (DestinationRule, Vec<UnknownField>) {
        from_node::<DestinationRule>(&spec_node(text), "spec").unwrap()
    }

    const SAMPLE: &str = r#"
host: reviews.prod.svc.cluster.local
exportTo: ["."]
workloadSelector:
  matchLabels: {app: productpage}
trafficPolicy:
  loadBalancer:
    consistentHash:
      httpCookie:
        name: user
        path: /
        ttl: 0s
        attributes: [{name: SameSite, value: Strict}, {name: Secure}]
      maglev: {tableSize: 65537}
    localityLbSetting:
      enabled: true
      distribute:
      - from: us-west/zone1/*
        to: {"us-west/zone1/*": 80, "us-west/zone2/*": 20}
      failover: [{from: us-east, to: eu-west}]
    warmup: {duration: 60s, minimumPercent: 20, aggression: 1.5}
  connectionPool:
    tcp:
      maxConnections: 100
      connectTimeout: 0.030s
      tcpKeepalive: {probes: 5, time: 7200s, interval: 75s}
      maxConnectionDuration: 3600s
      idleTimeout: 0s
    http:
      http1MaxPendingRequests: 10
      http2MaxRequests: 1000
      maxRequestsPerConnection: 1
      maxRetries: 3
      idleTimeout: 30s
      h2UpgradePolicy: UPGRADE
      useClientProtocol: true
      maxConcurrentStreams: 64
      http2KeepAlive: {interval: 10s, timeout: 2s}
  outlierDetection:
    consecutive5xxErrors: 7
    consecutiveGatewayErrors: 0
    splitExternalLocalOriginErrors: true
    consecutiveLocalOriginFailures: 3
    interval: 300s
    baseEjectionTime: 900s
    maxEjectionPercent: 50
    minHealthPercent: 20
    outlierDetectionHttpErrorCodes: [500, 503]
  tls:
    mode: MUTUAL
    clientCertificate: /etc/certs/cert.pem
    privateKey: /etc/certs/key.pem
    caCertificates: /etc/certs/ca.pem
    caCrl: /etc/certs/crl.pem
    subjectAltNames: [reviews.example.com]
    sni: reviews.example.com
    insecureSkipVerify: false
  portLevelSettings:
  - port: {number: 9080}
    loadBalancer: {simple: LEAST_REQUEST, zoneAwareLbSetting: {enabled: true, minClusterSize: 3, failoverPriority: [topology.kubernetes.io/region]}}
    tls: {mode: ISTIO_MUTUAL}
  tunnel: {protocol: POST, targetHost: 10.0.0.1, targetPort: 8443}
  proxyProtocol: {version: V2}
  retryBudget: {percent: 25.5, minRetryConcurrency: 5, budgetInterval: 1s}
subsets:
- name: v1
  labels: {version: v1}
- name: v2
  labels: {version: v2}
  trafficPolicy:
    loadBalancer:
      consistentHash: {useSourceIp: false, ringHash: {minimumRingSize: 2048}}
- name: v3
  trafficPolicy:
    loadBalancer: {consistentHash: {httpHeaderName: x-user}}
"#;

    #[test]
    fn decodes_a_realistic_spec() {
        let (dr, unknown) = decode(SAMPLE);
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(dr.host, "reviews.prod.svc.cluster.local");
        assert_eq!(dr.workload_selector.as_ref().unwrap().match_labels["app"], "productpage");
        let tp = dr.traffic_policy.as_ref().unwrap();
        let lb = tp.load_balancer.as_ref().unwrap();
        assert_eq!(lb.simple, None);
        let ch = lb.consistent_hash.as_ref().unwrap();
        let cookie = ch.http_cookie.as_ref().unwrap();
        assert_eq!(cookie.ttl, Some(Duration::default()));
        assert_eq!(cookie.attributes[1].name, "Secure");
        assert_eq!(ch.maglev.as_ref().unwrap().table_size, 65537);
        assert_eq!(ch.ring_hash, None);
        let loc = lb.locality_lb_setting.as_ref().unwrap();
        assert_eq!(loc.enabled, Some(true));
        assert_eq!(loc.distribute[0].to["us-west/zone2/*"], 20);
        assert_eq!(loc.failover[0].to, "eu-west");
        let warmup = lb.warmup.as_ref().unwrap();
        assert_eq!(warmup.duration, Some(Duration::from_millis(60_000)));
        assert_eq!(warmup.minimum_percent, Some(20.0));
        assert_eq!(warmup.aggression, Some(1.5));

        let pool = tp.connection_pool.as_ref().unwrap();
        let tcp = pool.tcp.as_ref().unwrap();
        assert_eq!(tcp.max_connections, 100);
        assert_eq!(tcp.connect_timeout, Some(Duration::from_millis(30)));
        assert_eq!(tcp.tcp_keepalive.as_ref().unwrap().probes, 5);
        assert_eq!(tcp.idle_timeout, Some(Duration::default()));
        let http = pool.http.as_ref().unwrap();
        assert_eq!(http.http1_max_pending_requests, 10);
        assert_eq!(
            http.h2_upgrade_policy,
            connection_pool_settings::http_settings::H2UpgradePolicy::Upgrade as i32
        );
        assert_eq!(http.http2_keep_alive.as_ref().unwrap().timeout, Some(Duration::from_millis(2000)));

        let od = tp.outlier_detection.as_ref().unwrap();
        assert_eq!(od.consecutive_5xx_errors, Some(7));
        assert_eq!(od.consecutive_gateway_errors, Some(0));
        assert_eq!(od.consecutive_local_origin_failures, Some(3));
        assert_eq!(od.interval, Some(Duration { seconds: 300, nanos: 0 }));
        assert_eq!(od.outlier_detection_http_error_codes, [500, 503]);

        let tls = tp.tls.as_ref().unwrap();
        assert_eq!(tls.mode, client_tls_settings::TlSmode::Mutual as i32);
        assert_eq!(tls.insecure_skip_verify, Some(false));
        assert_eq!(tls.ca_crl, "/etc/certs/crl.pem");

        let port = &tp.port_level_settings[0];
        assert_eq!(port.port.as_ref().unwrap().number, 9080);
        let plb = port.load_balancer.as_ref().unwrap();
        assert_eq!(plb.simple, Some(load_balancer_settings::SimpleLb::LeastRequest as i32));
        assert_eq!(plb.zone_aware_lb_setting.as_ref().unwrap().min_cluster_size, Some(3));
        assert_eq!(port.tls.as_ref().unwrap().mode, client_tls_settings::TlSmode::IstioMutual as i32);
        assert_eq!(tp.tunnel.as_ref().unwrap().target_port, 8443);
        assert_eq!(
            tp.proxy_protocol.as_ref().unwrap().version,
            traffic_policy::proxy_protocol::Version::V2 as i32
        );
        assert_eq!(tp.retry_budget.as_ref().unwrap().percent, Some(25.5));

        assert_eq!(dr.subsets.len(), 3);
        assert_eq!(dr.subsets[0].labels["version"], "v1");
        let ch2 = dr.subsets[1].traffic_policy.as_ref().unwrap().load_balancer.as_ref().unwrap();
        let ch2 = ch2.consistent_hash.as_ref().unwrap();
        assert_eq!(ch2.use_source_ip, Some(false));
        assert_eq!(ch2.ring_hash.as_ref().unwrap().minimum_ring_size, 2048);
        let ch3 = dr.subsets[2].traffic_policy.as_ref().unwrap().load_balancer.as_ref().unwrap();
        assert_eq!(ch3.consistent_hash.as_ref().unwrap().http_header_name.as_deref(), Some("x-user"));
    }

    #[test]
    fn misspelt_fields_are_reported_with_their_path() {
        let text = "host: a\nsubsets:\n- name: v1\n  trafficPolicy:\n    outlierDetection: {consecutive5xxError: 3}\n    loadBalancer: {consistentHash: {httpCookie: {name: u, tll: 1s}}}\n";
        let (_, unknown) = decode(text);
        let paths: Vec<&str> = unknown.iter().map(|u| u.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.subsets[0].trafficPolicy.outlierDetection.consecutive5xxError",
                "spec.subsets[0].trafficPolicy.loadBalancer.consistentHash.httpCookie.tll",
            ]
        );
    }

    #[test]
    fn deprecated_and_snake_case_fields_are_read() {
        let text = "host: a\ntraffic_policy:\n  load_balancer: {simple: LEAST_CONN, warmup_duration_secs: 10s, consistent_hash: {minimum_ring_size: 512}}\n  outlier_detection: {consecutive_errors: 5, consecutive_5xx_errors: 2}\n";
        let (dr, unknown) = decode(text);
        assert!(unknown.is_empty(), "{unknown:?}");
        let tp = dr.traffic_policy.unwrap();
        let lb = tp.load_balancer.unwrap();
        assert_eq!(lb.simple, Some(load_balancer_settings::SimpleLb::LeastConn as i32));
        assert_eq!(lb.warmup_duration_secs, Some(Duration::from_millis(10_000)));
        assert_eq!(lb.consistent_hash.unwrap().minimum_ring_size, 512);
        let od = tp.outlier_detection.unwrap();
        assert_eq!((od.consecutive_errors, od.consecutive_5xx_errors), (5, Some(2)));
    }

    #[test]
    fn protobuf_round_trip() {
        let (dr, _) = decode(SAMPLE);
        assert_eq!(DestinationRule::decode(&*dr.encode_to_vec()).unwrap(), dr);
    }

    #[test]
    fn wire_format_uses_istio_field_numbers() {
        // LoadBalancerSettings.simple is oneof member 1: written even for UNSPECIFIED (0).
        let lb = LoadBalancerSettings { simple: Some(0), ..Default::default() };
        assert_eq!(lb.encode_to_vec(), [0x08, 0]);
        // consistentHash (2) { useSourceIp (3) = false }: the oneof bool is present on the wire.
        let lb = LoadBalancerSettings {
            consistent_hash: Some(load_balancer_settings::ConsistentHashLb {
                use_source_ip: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(lb.encode_to_vec(), [0x12, 2, 0x18, 0]);
        // httpQueryParameterName is field 5, maglev field 7 { tableSize (1) = 7 }.
        let ch = load_balancer_settings::ConsistentHashLb {
            http_query_parameter_name: Some("q".into()),
            maglev: Some(load_balancer_settings::consistent_hash_lb::MagLev { table_size: 7 }),
            ..Default::default()
        };
        assert_eq!(ch.encode_to_vec(), [0x2a, 1, b'q', 0x3a, 2, 0x08, 7]);
        // OutlierDetection.consecutive5xxErrors is field 7, a UInt32Value wrapper {value = 3}.
        let od = OutlierDetection { consecutive_5xx_errors: Some(3), ..Default::default() };
        assert_eq!(od.encode_to_vec(), [0x3a, 2, 0x08, 3]);
        // outlierDetectionHttpErrorCodes (10) is packed: tag 0x52, len 4, varints 500 (0xf4 0x03), 503.
        let od =
            OutlierDetection { outlier_detection_http_error_codes: vec![500, 503], ..Default::default() };
        assert_eq!(od.encode_to_vec(), [0x52, 4, 0xf4, 0x03, 0xf7, 0x03]);
        // ClientTLSSettings.credentialName is field 7; insecureSkipVerify field 8 (BoolValue).
        let tls = ClientTlsSettings {
            credential_name: "c".into(),
            insecure_skip_verify: Some(true),
            ..Default::default()
        };
        assert_eq!(tls.encode_to_vec(), [0x3a, 1, b'c', 0x42, 2, 0x08, 1]);
        // DestinationRule.workloadSelector is field 5 { matchLabels (1): map entry {1: "a", 2: "b"} }.
        let dr = DestinationRule {
            workload_selector: Some(WorkloadSelector {
                match_labels: [("a".to_string(), "b".to_string())].into(),
            }),
            ..Default::default()
        };
        assert_eq!(dr.encode_to_vec(), [0x2a, 8, 0x0a, 6, 0x0a, 1, b'a', 0x12, 1, b'b']);
        // TrafficPolicy.retryBudget is field 8 { minRetryConcurrency (2) = 4 }.
        let tp = TrafficPolicy {
            retry_budget: Some(traffic_policy::RetryBudget {
                min_retry_concurrency: 4,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(tp.encode_to_vec(), [0x42, 2, 0x10, 4]);
    }

    #[test]
    fn json_output_uses_istio_names_and_omits_defaults() {
        let text = "host: a\ntrafficPolicy:\n  loadBalancer: {simple: ROUND_ROBIN}\n  tls: {mode: DISABLE, sni: x}\n  outlierDetection: {consecutive5xxErrors: 0, maxEjectionPercent: 0}\n  connectionPool: {http: {h2UpgradePolicy: DO_NOT_UPGRADE, http2MaxRequests: 10}}\n";
        let (dr, _) = decode(text);
        assert_eq!(
            serde_json::to_value(&dr).unwrap(),
            serde_json::json!({
                "host": "a",
                "trafficPolicy": {
                    "loadBalancer": {"simple": "ROUND_ROBIN"},
                    "tls": {"sni": "x"},
                    "outlierDetection": {"consecutive5xxErrors": 0},
                    "connectionPool": {"http": {"h2UpgradePolicy": "DO_NOT_UPGRADE", "http2MaxRequests": 10}}
                }
            })
        );
    }

    #[test]
    fn corpus_destination_rules_decode() {
        let n = check_corpus::<DestinationRule>(Kind::DestinationRule, Scope::Valid, &[]);
        assert!(n > 0);
    }
}
