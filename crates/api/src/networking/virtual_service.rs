//! `VirtualService` (`networking.istio.io`): HTTP, TLS and TCP routing rules for a set of hosts.
//!
//! Follows `networking/v1alpha3/virtual_service.proto` of the Istio API (`istio.networking.v1alpha3`).
//! The small messages other kinds reuse ([`Destination`], [`PortSelector`], [`StringMatch`],
//! [`Percent`]) live here as well, as they do in the proto.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wkt::{Duration, is_default};

/// Routing rules applied to traffic addressed to a set of hosts, as seen by the sidecars and
/// gateways it is bound to.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualService {
    /// Destination hosts the rules apply to: DNS names (wildcard prefix allowed), short service
    /// names, or IPs for gateway servers. Required (may be empty only for delegate VirtualServices).
    #[prost(string, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub hosts: Vec<String>,
    /// Gateways (`[namespace/]name`) and/or the reserved `mesh` (all sidecars) that apply these
    /// rules. Empty means `mesh` only.
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub gateways: Vec<String>,
    /// Ordered HTTP routes (HTTP/1.1, HTTP/2, gRPC traffic); the first match wins.
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub http: Vec<HttpRoute>,
    /// Ordered routes for unterminated TLS/HTTPS traffic, matched on SNI; the first match wins.
    #[prost(message, repeated, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub tls: Vec<TlsRoute>,
    /// Ordered routes for opaque TCP traffic; the first match wins.
    #[prost(message, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub tcp: Vec<TcpRoute>,
    /// Namespaces the VirtualService is visible to (`.` = own namespace, `*` = all). Empty means
    /// the mesh-wide default (usually all).
    #[prost(string, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub export_to: Vec<String>,
}

/// The service (and optionally subset and port) a request or connection is forwarded to.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Destination {
    /// Service name from the registry (Kubernetes service or ServiceEntry host); short names are
    /// qualified with the rule's namespace. Required.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub host: String,
    /// Name of a subset defined in the host's DestinationRule.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub subset: String,
    /// Port on the host; may be omitted when the service exposes a single port.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: Option<PortSelector>,
}

/// One HTTP routing rule: match conditions and what to do with matching requests (forward,
/// redirect, answer directly or delegate), plus per-route policies.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRoute {
    /// Route name, used in access logs and concatenated with match names for debugging.
    #[prost(string, tag = "17")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Match blocks; the rule applies when any block matches (conditions inside a block are ANDed).
    /// Empty matches everything.
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#match: Vec<HttpMatchRequest>,
    /// Weighted destinations to forward the request to.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub route: Vec<HttpRouteDestination>,
    /// Send an HTTP redirect instead of forwarding.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub redirect: Option<HttpRedirect>,
    /// Answer with a fixed response instead of forwarding; only without `route` and `redirect`.
    #[prost(message, optional, tag = "21")]
    #[serde(skip_serializing_if = "is_default")]
    pub direct_response: Option<HttpDirectResponse>,
    /// Take the routes of another VirtualService; only without `route` and `redirect`.
    #[prost(message, optional, tag = "20")]
    #[serde(skip_serializing_if = "is_default")]
    pub delegate: Option<Delegate>,
    /// Rewrite the URI and/or authority before forwarding; not with `redirect`.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub rewrite: Option<HttpRewrite>,
    /// Overall request timeout; unset means no timeout.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub timeout: Option<Duration>,
    /// Retry policy; unset means the mesh default retry policy.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub retries: Option<HttpRetry>,
    /// Faults (delays, aborts) injected on the client side.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub fault: Option<HttpFaultInjection>,
    /// A destination that gets a copy of the traffic (responses are discarded).
    #[prost(message, optional, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub mirror: Option<Destination>,
    /// Several mirror destinations, each with its own percentage.
    #[prost(message, repeated, tag = "22")]
    #[serde(skip_serializing_if = "is_default")]
    pub mirrors: Vec<HttpMirrorPolicy>,
    /// Deprecated: use `mirrorPercentage` instead. Integer percentage (0–100) of traffic mirrored.
    #[prost(message, optional, tag = "18")]
    #[serde(skip_serializing_if = "is_default")]
    pub mirror_percent: Option<u32>,
    /// Share of traffic sent to `mirror`; unset means 100%.
    #[prost(message, optional, tag = "19")]
    #[serde(skip_serializing_if = "is_default")]
    pub mirror_percentage: Option<Percent>,
    /// Cross-origin resource sharing policy.
    #[prost(message, optional, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub cors_policy: Option<CorsPolicy>,
    /// Request and response header changes.
    #[prost(message, optional, tag = "16")]
    #[serde(skip_serializing_if = "is_default")]
    pub headers: Option<Headers>,
}

/// A reference to the VirtualService whose HTTP routes a delegating route takes over.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Delegate {
    /// Name of the delegate VirtualService.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Namespace of the delegate VirtualService; defaults to the referring one's namespace.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub namespace: String,
}

/// Header changes applied to the request before forwarding and to the response before returning.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Headers {
    /// Changes to the request headers.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub request: Option<headers::HeaderOperations>,
    /// Changes to the response headers.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub response: Option<headers::HeaderOperations>,
}

/// Messages nested in [`Headers`].
pub mod headers {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// Edits to one set of headers: `set` overwrites, `add` appends, `remove` deletes.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct HeaderOperations {
        /// Headers to set, replacing any existing value.
        #[prost(btree_map = "string, string", tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub set: BTreeMap<String, String>,
        /// Headers to append (existing values are kept).
        #[prost(btree_map = "string, string", tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub add: BTreeMap<String, String>,
        /// Names of headers to remove.
        #[prost(string, repeated, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub remove: Vec<String>,
    }
}

/// A routing rule for unterminated TLS traffic (TLS passthrough), matched on SNI.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsRoute {
    /// Match blocks; any block matching selects the rule. Required.
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#match: Vec<TlsMatchAttributes>,
    /// Weighted destinations for the connection.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub route: Vec<RouteDestination>,
}

/// A routing rule for opaque TCP traffic.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpRoute {
    /// Match blocks; any block matching selects the rule. Empty matches everything.
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#match: Vec<L4MatchAttributes>,
    /// Weighted destinations for the connection.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub route: Vec<RouteDestination>,
}

/// Conditions on an HTTP request; all set conditions must hold for the block to match.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpMatchRequest {
    /// Match name, appended to the route name in logs and stats.
    #[prost(string, tag = "11")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Condition on the request path.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub uri: Option<StringMatch>,
    /// Condition on the URI scheme (`http`, `https`).
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub scheme: Option<StringMatch>,
    /// Condition on the HTTP method.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub method: Option<StringMatch>,
    /// Condition on the authority (Host) header.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub authority: Option<StringMatch>,
    /// Conditions on request headers, keyed by lower-case header name; an empty match means the
    /// header must be present.
    #[prost(btree_map = "string, message", tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub headers: BTreeMap<String, StringMatch>,
    /// Port the request was addressed to; 0 means any.
    #[prost(uint32, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: u32,
    /// Labels the calling workload must carry.
    #[prost(btree_map = "string, string", tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub source_labels: BTreeMap<String, String>,
    /// Gateways (or `mesh`) this match is restricted to; overrides the VirtualService's list.
    #[prost(string, repeated, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub gateways: Vec<String>,
    /// Conditions on query parameters, keyed by parameter name (only `exact` and `regex`).
    #[prost(btree_map = "string, message", tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub query_params: BTreeMap<String, StringMatch>,
    /// Compare `uri` case-insensitively (for `exact` and `prefix`). Default false.
    #[prost(bool, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub ignore_uri_case: bool,
    /// Headers that must NOT match for the block to match.
    #[prost(btree_map = "string, message", tag = "12")]
    #[serde(skip_serializing_if = "is_default")]
    pub without_headers: BTreeMap<String, StringMatch>,
    /// Namespace the calling workload must be in (a selector, not a runtime match).
    #[prost(string, tag = "13")]
    #[serde(skip_serializing_if = "is_default")]
    pub source_namespace: String,
    /// Prefix of proxy statistics emitted for this route (`route.<statPrefix>`).
    #[prost(string, tag = "14")]
    #[serde(skip_serializing_if = "is_default")]
    pub stat_prefix: String,
}

/// An HTTP destination with its traffic weight and header changes.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteDestination {
    /// Where to send the request. Required.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub destination: Option<Destination>,
    /// Relative share of traffic (weights of a route should sum to 100); 0 with a single
    /// destination means all traffic.
    #[prost(int32, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub weight: i32,
    /// Header changes applied when this destination is chosen.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub headers: Option<Headers>,
}

/// A TLS/TCP destination with its traffic weight.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteDestination {
    /// Where to send the connection. Required.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub destination: Option<Destination>,
    /// Relative share of connections (weights of a route should sum to 100).
    #[prost(int32, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub weight: i32,
}

/// Conditions on a TCP connection (L4).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct L4MatchAttributes {
    /// Destination IPs or CIDRs (`a.b.c.d` or `a.b.c.d/xx`).
    #[prost(string, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub destination_subnets: Vec<String>,
    /// Destination port; 0 means any.
    #[prost(uint32, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: u32,
    /// Source IP or CIDR (reserved for future use).
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub source_subnet: String,
    /// Labels the calling workload must carry.
    #[prost(btree_map = "string, string", tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub source_labels: BTreeMap<String, String>,
    /// Gateways (or `mesh`) this match is restricted to.
    #[prost(string, repeated, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub gateways: Vec<String>,
    /// Namespace the calling workload must be in.
    #[prost(string, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub source_namespace: String,
}

/// Conditions on a TLS connection, chiefly its SNI.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsMatchAttributes {
    /// SNI values to match (wildcard prefix allowed); must be a subset of the VirtualService hosts.
    /// Required.
    #[prost(string, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub sni_hosts: Vec<String>,
    /// Destination IPs or CIDRs.
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub destination_subnets: Vec<String>,
    /// Destination port; 0 means any.
    #[prost(uint32, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: u32,
    /// Labels the calling workload must carry.
    #[prost(btree_map = "string, string", tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub source_labels: BTreeMap<String, String>,
    /// Gateways (or `mesh`) this match is restricted to.
    #[prost(string, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub gateways: Vec<String>,
    /// Namespace the calling workload must be in.
    #[prost(string, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub source_namespace: String,
}

/// An HTTP redirect response that replaces parts of the request URL.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRedirect {
    /// Replacement for the whole path; not with `prefixRewrite`.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub uri: String,
    /// Replacement for the authority (host).
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub authority: String,
    /// Replacement port. One of `redirect_port`: at most one of `port`, `derivePort` may be set.
    #[prost(uint32, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: Option<u32>,
    /// How to pick the port dynamically. One of `redirect_port`: at most one of `port`,
    /// `derivePort` may be set.
    #[prost(enumeration = "http_redirect::RedirectPortSelection", optional, tag = "5")]
    #[serde(
        with = "crate::wkt::OptEnum::<http_redirect::RedirectPortSelection>",
        skip_serializing_if = "is_default"
    )]
    pub derive_port: Option<i32>,
    /// Replacement scheme (`http`, `https`); unset keeps the original.
    #[prost(string, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub scheme: String,
    /// Status code of the redirect; 0 means 301 (Moved Permanently).
    #[prost(uint32, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub redirect_code: u32,
    /// Replacement for the matched path prefix (the route must match by prefix); not with `uri`.
    #[prost(string, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub prefix_rewrite: String,
}

/// Enums nested in [`HttpRedirect`].
pub mod http_redirect {
    crate::proto_enum! {
        /// How a redirect picks its port when no fixed `port` is given.
        pub enum RedirectPortSelection {
            /// 80 for `http`, 443 for `https`.
            FromProtocolDefault = 0 => "FROM_PROTOCOL_DEFAULT",
            /// The port the request came in on.
            FromRequestPort = 1 => "FROM_REQUEST_PORT",
        }
    }
}

/// A fixed response returned without forwarding the request.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpDirectResponse {
    /// HTTP status code of the response. Required.
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub status: u32,
    /// Response body; unset means empty.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub body: Option<HttpBody>,
}

/// The body of a direct response, as text or bytes.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpBody {
    /// Body as text. One of `specifier`: at most one of `string`, `bytes` may be set.
    #[prost(string, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub string: Option<String>,
    /// Body as bytes (base64 in JSON). One of `specifier`: at most one of `string`, `bytes` may be set.
    #[prost(bytes = "vec", optional, tag = "2")]
    #[serde(with = "crate::wkt::OptBase64", skip_serializing_if = "is_default")]
    pub bytes: Option<Vec<u8>>,
}

/// Changes to the request URI and authority before forwarding.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRewrite {
    /// Replacement for the path, or for the matched prefix when the route matched by prefix.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub uri: String,
    /// Replacement for the authority (Host) header.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub authority: String,
    /// Regex-based rewrite of the path.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub uri_regex_rewrite: Option<RegexRewrite>,
}

/// A regex substitution applied to the path.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegexRewrite {
    /// RE2 pattern to find in the path.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#match: String,
    /// Replacement text; `\1`, `\2`, … refer to capture groups.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub rewrite: String,
}

/// A condition on a string: exact value, prefix or RE2 regex (exact and prefix are case-sensitive).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StringMatch {
    /// The value must equal this. One of `match_type`: at most one of `exact`, `prefix`, `regex`
    /// may be set.
    #[prost(string, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub exact: Option<String>,
    /// The value must start with this. One of `match_type`: at most one of `exact`, `prefix`,
    /// `regex` may be set.
    #[prost(string, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub prefix: Option<String>,
    /// The whole value must match this RE2 regex. One of `match_type`: at most one of `exact`,
    /// `prefix`, `regex` may be set.
    #[prost(string, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub regex: Option<String>,
}

/// Retry policy of an HTTP route.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRetry {
    /// Number of retries (so at most `attempts + 1` tries); 0 disables retries.
    #[prost(int32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub attempts: i32,
    /// Timeout of each try (at least 1ms); unset means the route's `timeout`.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub per_try_timeout: Option<Duration>,
    /// Comma-separated Envoy retry conditions and/or status codes (e.g. `5xx,reset,503`); unset
    /// means `connect-failure,refused-stream,unavailable,cancelled`.
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub retry_on: String,
    /// Whether retries may go to endpoints in other localities.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub retry_remote_localities: Option<bool>,
    /// Whether retries avoid hosts already tried; unset means true.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub retry_ignore_previous_hosts: Option<bool>,
    /// Base interval of the exponential back-off between tries; unset means 25ms.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub backoff: Option<Duration>,
}

/// Cross-Origin Resource Sharing (CORS) settings of a route.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CorsPolicy {
    /// Deprecated: use `allowOrigins` instead. Exact allowed origins (`*` allows all).
    #[prost(string, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub allow_origin: Vec<String>,
    /// Patterns of allowed origins; a matching origin is echoed in `Access-Control-Allow-Origin`.
    #[prost(message, repeated, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub allow_origins: Vec<StringMatch>,
    /// Allowed methods (`Access-Control-Allow-Methods`).
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub allow_methods: Vec<String>,
    /// Allowed request headers (`Access-Control-Allow-Headers`).
    #[prost(string, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub allow_headers: Vec<String>,
    /// Response headers browsers may read (`Access-Control-Expose-Headers`).
    #[prost(string, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub expose_headers: Vec<String>,
    /// How long preflight results may be cached (`Access-Control-Max-Age`).
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub max_age: Option<Duration>,
    /// Whether requests with credentials are allowed (`Access-Control-Allow-Credentials`).
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub allow_credentials: Option<bool>,
    /// What to do with preflight requests whose origin is not allowed; default forward.
    #[prost(enumeration = "cors_policy::UnmatchedPreflights", tag = "8")]
    #[serde(with = "cors_policy::UnmatchedPreflights", skip_serializing_if = "is_default")]
    pub unmatched_preflights: i32,
}

/// Enums nested in [`CorsPolicy`].
pub mod cors_policy {
    crate::proto_enum! {
        /// Handling of preflight requests from origins that are not allowed.
        pub enum UnmatchedPreflights {
            /// Not set: same as `FORWARD`.
            Unspecified = 0 => "UNSPECIFIED",
            /// Forward them to the upstream.
            Forward = 1 => "FORWARD",
            /// Do not forward them to the upstream.
            Ignore = 2 => "IGNORE",
        }
    }
}

/// Faults injected into matching requests on the client side; at least one of delay or abort.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpFaultInjection {
    /// Delay requests before forwarding.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub delay: Option<http_fault_injection::Delay>,
    /// Fail requests with an error instead of forwarding.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub abort: Option<http_fault_injection::Abort>,
}

/// Messages nested in [`HttpFaultInjection`].
pub mod http_fault_injection {
    use serde::{Deserialize, Serialize};

    use crate::wkt::{Duration, is_default};

    /// Latency added to a share of requests.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Delay {
        /// Deprecated: use `percentage` instead. Integer percentage (0–100) of delayed requests.
        #[prost(int32, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub percent: i32,
        /// Fixed delay before forwarding (at least 1ms). One of `http_delay_type`: at most one of
        /// `fixedDelay`, `exponentialDelay` may be set.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub fixed_delay: Option<Duration>,
        /// Mean of an exponentially distributed delay (not implemented by Istio). One of
        /// `http_delay_type`: at most one of `fixedDelay`, `exponentialDelay` may be set.
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub exponential_delay: Option<Duration>,
        /// Share of requests delayed; unset means all.
        #[prost(message, optional, tag = "5")]
        #[serde(skip_serializing_if = "is_default")]
        pub percentage: Option<super::Percent>,
    }

    /// An error returned for a share of requests.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Abort {
        /// HTTP status code returned. One of `error_type`: at most one of `httpStatus`,
        /// `grpcStatus`, `http2Error` may be set.
        #[prost(int32, optional, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub http_status: Option<i32>,
        /// gRPC status returned, by name (`UNAVAILABLE`) or number. One of `error_type`: at most one
        /// of `httpStatus`, `grpcStatus`, `http2Error` may be set.
        #[prost(string, optional, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub grpc_status: Option<String>,
        /// HTTP/2 error code returned (not implemented by Istio). One of `error_type`: at most one of
        /// `httpStatus`, `grpcStatus`, `http2Error` may be set.
        #[prost(string, optional, tag = "4")]
        #[serde(skip_serializing_if = "is_default")]
        pub http2_error: Option<String>,
        /// Share of requests aborted; unset means all.
        #[prost(message, optional, tag = "5")]
        #[serde(skip_serializing_if = "is_default")]
        pub percentage: Option<super::Percent>,
    }
}

/// A destination that receives a copy of a share of the route's traffic.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpMirrorPolicy {
    /// Where mirrored requests go. Required.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub destination: Option<Destination>,
    /// Share of traffic mirrored; unset means all (100%).
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub percentage: Option<Percent>,
}

/// A port of a destination, by number.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PortSelector {
    /// The port number (1–65535).
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub number: u32,
}

/// A percentage as a double, from 0.0 to 100.0 (fractions allowed, e.g. 0.1 for one in a thousand).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Percent {
    /// The percentage, 0.0–100.0.
    #[prost(double, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub value: f64,
}

#[cfg(test)]
pub(crate) mod tests {
    use prost::Message;

    use super::*;
    use crate::{
        de::{UnknownField, from_node},
        schema::Kind,
        test_corpus::{Scope, check_corpus, spec_node},
    };

    fn decode(text: &str) -> (VirtualService, Vec<UnknownField>) {
        from_node::<VirtualService>(&spec_node(text), "spec").unwrap()
    }

    const SAMPLE: &str = r#"
hosts: [reviews.prod.svc.cluster.local, "*.example.com"]
gateways: [mesh, istio-system/public]
exportTo: ["."]
http:
- name: canary
  match:
  - name: jason
    uri: {prefix: /api/v1}
    headers:
      end-user: {exact: jason}
      x-debug: {}
    queryParams:
      q: {regex: "\\d+"}
    withoutHeaders:
      x-skip: {prefix: "1"}
    ignoreUriCase: true
    port: 8080
    sourceLabels: {app: productpage}
    sourceNamespace: default
    statPrefix: canary
  route:
  - destination: {host: reviews, subset: v2, port: {number: 9080}}
    weight: 80
    headers:
      request:
        set: {x-env: canary}
        add: {x-trace: "1"}
        remove: [x-internal]
  - destination: {host: reviews, subset: v1}
    weight: 20
  rewrite:
    authority: reviews.internal
    uriRegexRewrite: {match: "^/api/(.*)$", rewrite: "/\\1"}
  timeout: 1.5s
  retries:
    attempts: 3
    perTryTimeout: 2s
    retryOn: gateway-error,connect-failure
    retryRemoteLocalities: true
    retryIgnorePreviousHosts: false
    backoff: 0.1s
  fault:
    delay: {fixedDelay: 5s, percentage: {value: 0.5}}
    abort: {httpStatus: 503, percentage: {value: 10}}
  mirror: {host: reviews-shadow}
  mirrorPercentage: {value: 25.5}
  mirrors:
  - destination: {host: audit}
    percentage: {value: 1}
  corsPolicy:
    allowOrigins: [{exact: "https://example.com"}, {regex: ".*\\.example\\.org"}]
    allowMethods: [GET, POST]
    allowHeaders: [x-foo]
    exposeHeaders: [x-bar]
    maxAge: 86400s
    allowCredentials: false
    unmatchedPreflights: IGNORE
- match: [{uri: {exact: /old}}]
  redirect: {uri: /new, authority: new.example.com, derivePort: FROM_REQUEST_PORT, scheme: https, redirectCode: 308}
- match: [{uri: {prefix: /gone}}]
  directResponse: {status: 410, body: {string: gone}}
- match: [{uri: {prefix: /bin}}]
  directResponse: {status: 200, body: {bytes: aGk=}}
- delegate: {name: reviews-delegate, namespace: team}
tls:
- match: [{sniHosts: [login.example.com], port: 443, destinationSubnets: [10.0.0.0/8]}]
  route: [{destination: {host: login, port: {number: 443}}}]
tcp:
- match: [{port: 27017, sourceLabels: {app: mongo-client}, gateways: [mesh]}]
  route:
  - destination: {host: mongo, port: {number: 5555}}
    weight: 100
"#;

    #[test]
    fn decodes_a_realistic_spec() {
        let (vs, unknown) = decode(SAMPLE);
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(vs.hosts, ["reviews.prod.svc.cluster.local", "*.example.com"]);
        assert_eq!(vs.export_to, ["."]);
        let r = &vs.http[0];
        assert_eq!(r.name, "canary");
        let m = &r.r#match[0];
        assert_eq!(m.uri.as_ref().unwrap().prefix.as_deref(), Some("/api/v1"));
        assert_eq!(m.headers["end-user"].exact.as_deref(), Some("jason"));
        assert_eq!(m.headers["x-debug"], StringMatch::default());
        assert_eq!(m.query_params["q"].regex.as_deref(), Some("\\d+"));
        assert_eq!(m.without_headers["x-skip"].prefix.as_deref(), Some("1"));
        assert!(m.ignore_uri_case);
        assert_eq!(m.port, 8080);
        assert_eq!(m.source_labels["app"], "productpage");
        let d = r.route[0].destination.as_ref().unwrap();
        assert_eq!((d.host.as_str(), d.subset.as_str()), ("reviews", "v2"));
        assert_eq!(d.port, Some(PortSelector { number: 9080 }));
        assert_eq!(r.route[0].weight, 80);
        let req = r.route[0].headers.as_ref().unwrap().request.as_ref().unwrap();
        assert_eq!(req.set["x-env"], "canary");
        assert_eq!(req.remove, ["x-internal"]);
        assert_eq!(r.rewrite.as_ref().unwrap().uri_regex_rewrite.as_ref().unwrap().rewrite, "/\\1");
        assert_eq!(r.timeout, Some(Duration { seconds: 1, nanos: 500_000_000 }));
        let retries = r.retries.as_ref().unwrap();
        assert_eq!(retries.attempts, 3);
        assert_eq!(retries.per_try_timeout, Some(Duration::from_millis(2000)));
        assert_eq!(retries.retry_remote_localities, Some(true));
        assert_eq!(retries.retry_ignore_previous_hosts, Some(false));
        assert_eq!(retries.backoff, Some(Duration::from_millis(100)));
        let fault = r.fault.as_ref().unwrap();
        let delay = fault.delay.as_ref().unwrap();
        assert_eq!(delay.fixed_delay, Some(Duration::from_millis(5000)));
        assert_eq!(delay.percentage.as_ref().unwrap().value, 0.5);
        assert_eq!(fault.abort.as_ref().unwrap().http_status, Some(503));
        assert_eq!(r.mirror_percentage.as_ref().unwrap().value, 25.5);
        assert_eq!(r.mirrors[0].destination.as_ref().unwrap().host, "audit");
        let cors = r.cors_policy.as_ref().unwrap();
        assert_eq!(cors.allow_origins[1].regex.as_deref(), Some(".*\\.example\\.org"));
        assert_eq!(cors.max_age, Some(Duration { seconds: 86_400, nanos: 0 }));
        assert_eq!(cors.allow_credentials, Some(false));
        assert_eq!(cors.unmatched_preflights, cors_policy::UnmatchedPreflights::Ignore as i32);

        let redirect = vs.http[1].redirect.as_ref().unwrap();
        assert_eq!(redirect.port, None);
        assert_eq!(redirect.derive_port, Some(http_redirect::RedirectPortSelection::FromRequestPort as i32));
        assert_eq!(redirect.redirect_code, 308);
        let body = vs.http[2].direct_response.as_ref().unwrap().body.as_ref().unwrap();
        assert_eq!(body.string.as_deref(), Some("gone"));
        let body = vs.http[3].direct_response.as_ref().unwrap().body.as_ref().unwrap();
        assert_eq!(body.bytes.as_deref(), Some(&b"hi"[..]));
        assert_eq!(vs.http[4].delegate.as_ref().unwrap().namespace, "team");

        assert_eq!(vs.tls[0].r#match[0].sni_hosts, ["login.example.com"]);
        assert_eq!(vs.tcp[0].r#match[0].port, 27017);
        assert_eq!(vs.tcp[0].route[0].weight, 100);
    }

    #[test]
    fn misspelt_fields_are_reported_with_their_path() {
        let text = "hosts: [a]\nhttp:\n- route:\n  - destination: {host: a, subsett: v1}\n  retries: {attempts: 2, perTryTimeOut: 1s}\n";
        let (vs, unknown) = decode(text);
        assert_eq!(vs.http[0].retries.as_ref().unwrap().attempts, 2);
        let paths: Vec<&str> = unknown.iter().map(|u| u.path.as_str()).collect();
        assert_eq!(
            paths,
            ["spec.http[0].route[0].destination.subsett", "spec.http[0].retries.perTryTimeOut"]
        );
        assert_eq!(unknown[0].mark.line, 4);
    }

    #[test]
    fn snake_case_names_and_deprecated_fields_are_read() {
        let text = "http:\n- mirror_percent: 40\n  cors_policy: {allow_origin: ['*']}\n  fault: {delay: {percent: 10, fixed_delay: 1s}}\n";
        let (vs, unknown) = decode(text);
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(vs.http[0].mirror_percent, Some(40));
        assert_eq!(vs.http[0].cors_policy.as_ref().unwrap().allow_origin, ["*"]);
        assert_eq!(vs.http[0].fault.as_ref().unwrap().delay.as_ref().unwrap().percent, 10);
    }

    #[test]
    fn bad_enum_value_is_an_error_with_path() {
        let text = "http:\n- redirect: {derivePort: FROM_NOWHERE}\n";
        let err = from_node::<VirtualService>(&spec_node(text), "spec").unwrap_err();
        assert_eq!(err.path, "spec.http[0].redirect.derivePort");
        assert!(err.message.contains("FROM_PROTOCOL_DEFAULT"), "{err}");
    }

    #[test]
    fn protobuf_round_trip() {
        let (vs, _) = decode(SAMPLE);
        let bytes = vs.encode_to_vec();
        assert_eq!(VirtualService::decode(&*bytes).unwrap(), vs);
    }

    #[test]
    fn wire_format_uses_istio_field_numbers() {
        // StringMatch.prefix is field 2 (string): tag 0x12, length 2, "/a".
        let m = StringMatch { prefix: Some("/a".into()), ..Default::default() };
        assert_eq!(m.encode_to_vec(), [0x12, 2, b'/', b'a']);
        // A oneof member is written even when it holds the zero value: port 0 is field 4 varint.
        let r = HttpRedirect { port: Some(0), ..Default::default() };
        assert_eq!(r.encode_to_vec(), [0x20, 0]);
        // derivePort is field 5 (enum varint): tag 0x28.
        let r = HttpRedirect { derive_port: Some(1), ..Default::default() };
        assert_eq!(r.encode_to_vec(), [0x28, 1]);
        // HTTPRoute.name is field 17: tag (17 << 3 | 2) = 0x8a 0x01.
        let route = HttpRoute { name: "r".into(), ..Default::default() };
        assert_eq!(route.encode_to_vec(), [0x8a, 0x01, 1, b'r']);
        // mirror_percent (18) is a UInt32Value wrapper: tag 0x92 0x01, len 2, {field 1 varint 40}.
        let route = HttpRoute { mirror_percent: Some(40), ..Default::default() };
        assert_eq!(route.encode_to_vec(), [0x92, 0x01, 2, 0x08, 40]);
        // Abort.grpcStatus is field 3; Delay.fixedDelay is field 2 holding a Duration {seconds: 1}.
        let fault = HttpFaultInjection {
            delay: Some(http_fault_injection::Delay {
                fixed_delay: Some(Duration { seconds: 1, nanos: 0 }),
                ..Default::default()
            }),
            abort: Some(http_fault_injection::Abort { grpc_status: Some("U".into()), ..Default::default() }),
        };
        assert_eq!(fault.encode_to_vec(), [0x0a, 4, 0x12, 2, 0x08, 1, 0x12, 3, 0x1a, 1, b'U']);
        // Destination.port (3) -> PortSelector.number (1).
        let d =
            Destination { host: "h".into(), port: Some(PortSelector { number: 80 }), ..Default::default() };
        assert_eq!(d.encode_to_vec(), [0x0a, 1, b'h', 0x1a, 2, 0x08, 80]);
        // Percent.value is a double, field 1 (fixed64): 0x09 + little-endian 50.0.
        let mut expected = vec![0x09];
        expected.extend_from_slice(&50.0f64.to_le_bytes());
        assert_eq!(Percent { value: 50.0 }.encode_to_vec(), expected);
    }

    #[test]
    fn json_output_uses_istio_names_and_omits_defaults() {
        let text = "hosts: [a]\nhttp:\n- match: [{uri: {prefix: /}, ignoreUriCase: false}]\n  redirect: {port: 0, redirectCode: 302}\n  corsPolicy: {unmatchedPreflights: FORWARD, allowCredentials: false}\n  retries: {attempts: 0, perTryTimeout: 0.25s}\n  directResponse: {status: 200, body: {bytes: aGk=}}\n";
        let (vs, _) = decode(text);
        let json = serde_json::to_value(&vs).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "hosts": ["a"],
                "http": [{
                    "match": [{"uri": {"prefix": "/"}}],
                    "redirect": {"port": 0, "redirectCode": 302},
                    "corsPolicy": {"unmatchedPreflights": "FORWARD", "allowCredentials": false},
                    "retries": {"perTryTimeout": "0.250s"},
                    "directResponse": {"status": 200, "body": {"bytes": "aGk="}}
                }]
            })
        );
        let redirect = HttpRedirect { derive_port: Some(0), ..Default::default() };
        assert_eq!(
            serde_json::to_value(&redirect).unwrap(),
            serde_json::json!({"derivePort": "FROM_PROTOCOL_DEFAULT"})
        );
    }

    #[test]
    fn corpus_virtual_services_decode() {
        let n = check_corpus::<VirtualService>(Kind::VirtualService, Scope::Valid, &["websocketUpgrade"]);
        assert!(n > 0);
    }
}
