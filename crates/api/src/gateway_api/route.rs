//! HTTPRoute, GRPCRoute, TCPRoute and TLSRoute (`gateway.networking.k8s.io/v1`).

use super::{
    BackendObjectReference, BackendRef, HTTPHeader, LocalObjectReference, ParentReference, SessionPersistence,
};

object! {
    /// `HTTPRoute.spec`: HTTP routing rules attached to Gateways (or to Services, for mesh routes).
    pub struct HTTPRouteSpec {
        /// The Gateways (listeners) or Services the route attaches to.
        pub parent_refs: Vec<ParentReference>,
        /// Hostnames matched against the `Host` header (wildcard left-most label allowed); empty
        /// means the listener's hostnames.
        pub hostnames: Vec<String>,
        /// The rules; absent means one rule matching `PathPrefix /` with no backend.
        pub rules: Vec<HTTPRouteRule>,
        /// `All` or `None`: attach to the Gateways of the default scope (experimental).
        pub use_default_gateways: Option<String>,
    }
}

object! {
    /// One rule of an HTTPRoute: matches, filters, backends and policies.
    pub struct HTTPRouteRule {
        /// Rule name (Istio names the generated route `NAMESPACE.ROUTE.RULE`).
        pub name: Option<String>,
        /// Matches (ORed); empty means `PathPrefix /`.
        pub matches: Vec<HTTPRouteMatch>,
        /// Filters applied to matched requests.
        pub filters: Vec<HTTPRouteFilter>,
        /// Backends, weighted; none means the request is answered by a filter, or with 500.
        pub backend_refs: Vec<HTTPBackendRef>,
        /// Request and backend-request timeouts.
        pub timeouts: Option<HTTPRouteTimeouts>,
        /// Retry policy.
        pub retry: Option<HTTPRouteRetry>,
        /// Session persistence.
        pub session_persistence: Option<SessionPersistence>,
    }
}

object! {
    /// One match of an HTTPRoute rule: path, headers, query parameters and method, ANDed.
    pub struct HTTPRouteMatch {
        /// Path match; absent means `PathPrefix /`.
        pub path: Option<HTTPPathMatch>,
        /// Header matches.
        pub headers: Vec<HTTPHeaderMatch>,
        /// Query parameter matches.
        pub query_params: Vec<HTTPQueryParamMatch>,
        /// HTTP method.
        pub method: Option<String>,
    }
}

object! {
    /// A path match (`HTTPPathMatch`).
    pub struct HTTPPathMatch {
        /// `Exact`, `PathPrefix` (the default) or `RegularExpression`.
        pub r#type: Option<String>,
        /// The path or expression; absent means `/`.
        pub value: Option<String>,
    }
}

object! {
    /// A header match (`HTTPHeaderMatch`).
    pub struct HTTPHeaderMatch {
        /// `Exact` (the default) or `RegularExpression`.
        pub r#type: Option<String>,
        /// Header name.
        pub name: String,
        /// Value or expression.
        pub value: String,
    }
}

object! {
    /// A query parameter match (`HTTPQueryParamMatch`).
    pub struct HTTPQueryParamMatch {
        /// `Exact` (the default) or `RegularExpression`.
        pub r#type: Option<String>,
        /// Parameter name.
        pub name: String,
        /// Value or expression.
        pub value: String,
    }
}

object! {
    /// One filter of an HTTPRoute rule or backend (`HTTPRouteFilter`): `type` names the member set.
    pub struct HTTPRouteFilter {
        /// `RequestHeaderModifier`, `ResponseHeaderModifier`, `RequestMirror`, `RequestRedirect`,
        /// `URLRewrite`, `ExtensionRef`, `CORS` or `ExternalAuth`. Required.
        pub r#type: String,
        /// Request header changes.
        pub request_header_modifier: Option<HTTPHeaderFilter>,
        /// Response header changes.
        pub response_header_modifier: Option<HTTPHeaderFilter>,
        /// Request mirroring.
        pub request_mirror: Option<HTTPRequestMirrorFilter>,
        /// Redirect answer.
        pub request_redirect: Option<HTTPRequestRedirectFilter>,
        /// Host / path rewrite.
        pub url_rewrite: Option<HTTPURLRewriteFilter>,
        /// Implementation filter (Istio: none supported).
        pub extension_ref: Option<LocalObjectReference>,
        /// CORS policy.
        pub cors: Option<HTTPCORSFilter>,
        /// External authorization.
        pub external_auth: Option<HTTPExternalAuthFilter>,
    }
}

object! {
    /// Header changes (`HTTPHeaderFilter`): set, then add, then remove.
    pub struct HTTPHeaderFilter {
        /// Headers to overwrite.
        pub set: Vec<HTTPHeader>,
        /// Headers to append.
        pub add: Vec<HTTPHeader>,
        /// Header names to remove.
        pub remove: Vec<String>,
    }
}

object! {
    /// `RequestMirror` filter.
    pub struct HTTPRequestMirrorFilter {
        /// Where to mirror. Required.
        pub backend_ref: BackendObjectReference,
        /// Percentage of requests mirrored (0–100).
        pub percent: Option<i32>,
        /// Fraction of requests mirrored (exclusive with `percent`).
        pub fraction: Option<Fraction>,
    }
}

object! {
    /// A fraction (`Fraction`).
    pub struct Fraction {
        /// Numerator.
        pub numerator: i32,
        /// Denominator; absent means 100.
        pub denominator: Option<i32>,
    }
}

object! {
    /// `RequestRedirect` filter.
    pub struct HTTPRequestRedirectFilter {
        /// `http` or `https`; absent keeps the request's scheme.
        pub scheme: Option<String>,
        /// Hostname; absent keeps the request's host.
        pub hostname: Option<String>,
        /// Path change.
        pub path: Option<HTTPPathModifier>,
        /// Port; absent derives it from the scheme or keeps the request's port.
        pub port: Option<i32>,
        /// 301, 302 (the default), 303, 307 or 308.
        pub status_code: Option<i32>,
    }
}

object! {
    /// `URLRewrite` filter.
    pub struct HTTPURLRewriteFilter {
        /// Host rewrite.
        pub hostname: Option<String>,
        /// Path rewrite.
        pub path: Option<HTTPPathModifier>,
    }
}

object! {
    /// A path change (`HTTPPathModifier`).
    pub struct HTTPPathModifier {
        /// `ReplaceFullPath` or `ReplacePrefixMatch`. Required.
        pub r#type: String,
        /// The new path (`ReplaceFullPath`).
        pub replace_full_path: Option<String>,
        /// The new prefix (`ReplacePrefixMatch`; the rule's match must be a `PathPrefix`).
        pub replace_prefix_match: Option<String>,
    }
}

object! {
    /// `CORS` filter (`HTTPCORSFilter`).
    pub struct HTTPCORSFilter {
        /// Allowed origins (`*` and `https://*.example.com` wildcards allowed).
        pub allow_origins: Vec<String>,
        /// Whether credentials are allowed.
        pub allow_credentials: Option<bool>,
        /// Allowed methods (`*` allowed).
        pub allow_methods: Vec<String>,
        /// Allowed request headers.
        pub allow_headers: Vec<String>,
        /// Response headers exposed to the client.
        pub expose_headers: Vec<String>,
        /// Seconds a preflight answer may be cached; absent means 5.
        pub max_age: Option<i32>,
    }
}

object! {
    /// `ExternalAuth` filter (`HTTPExternalAuthFilter`).
    pub struct HTTPExternalAuthFilter {
        /// `HTTP` or `GRPC`. Required.
        pub protocol: String,
        /// The authorization service. Required.
        pub backend_ref: BackendObjectReference,
        /// gRPC settings.
        pub grpc: Option<GRPCAuthConfig>,
        /// HTTP settings.
        pub http: Option<HTTPAuthConfig>,
        /// Request body forwarding.
        pub forward_body: Option<ForwardBodyConfig>,
    }
}

object! {
    /// gRPC settings of an external authorization filter.
    pub struct GRPCAuthConfig {
        /// Request headers sent to the service.
        pub allowed_headers: Vec<String>,
    }
}

object! {
    /// HTTP settings of an external authorization filter.
    pub struct HTTPAuthConfig {
        /// Path prefix of the check request.
        pub path: Option<String>,
        /// Request headers sent to the service.
        pub allowed_headers: Vec<String>,
        /// Response headers copied to the upstream request.
        pub allowed_response_headers: Vec<String>,
    }
}

object! {
    /// Request body forwarding of an external authorization filter.
    pub struct ForwardBodyConfig {
        /// Maximum bytes of body forwarded.
        pub max_size: Option<i32>,
    }
}

object! {
    /// A weighted backend of an HTTPRoute rule, with its own filters (`HTTPBackendRef`).
    pub struct HTTPBackendRef {
        /// API group; absent or `""` means the core group.
        pub group: Option<String>,
        /// Kind; absent means `Service`.
        pub kind: Option<String>,
        /// Name. Required.
        pub name: String,
        /// Namespace; absent means the route's namespace.
        pub namespace: Option<String>,
        /// Destination port.
        pub port: Option<i32>,
        /// Relative weight; absent means 1, 0 means no traffic.
        pub weight: Option<i32>,
        /// Filters for requests sent to this backend.
        pub filters: Vec<HTTPRouteFilter>,
    }
}

object! {
    /// `timeouts` of an HTTPRoute rule (Gateway API durations such as `10s`, `500ms`, `1h2m`).
    pub struct HTTPRouteTimeouts {
        /// Whole-request timeout (Istio: the route `timeout`).
        pub request: Option<String>,
        /// Per-attempt timeout (Istio: `retries.perTryTimeout`).
        pub backend_request: Option<String>,
    }
}

object! {
    /// `retry` of an HTTPRoute rule (`HTTPRouteRetry`).
    pub struct HTTPRouteRetry {
        /// HTTP status codes to retry.
        pub codes: Vec<i32>,
        /// Maximum retries.
        pub attempts: Option<i32>,
        /// Back-off between retries, a Gateway API duration.
        pub backoff: Option<String>,
    }
}

object! {
    /// `GRPCRoute.spec`: gRPC routing rules.
    pub struct GRPCRouteSpec {
        /// The Gateways or Services the route attaches to.
        pub parent_refs: Vec<ParentReference>,
        /// Hostnames matched against the `:authority`.
        pub hostnames: Vec<String>,
        /// The rules.
        pub rules: Vec<GRPCRouteRule>,
        /// `All` or `None` (experimental).
        pub use_default_gateways: Option<String>,
    }
}

object! {
    /// One rule of a GRPCRoute.
    pub struct GRPCRouteRule {
        /// Rule name.
        pub name: Option<String>,
        /// Matches (ORed); empty matches every request.
        pub matches: Vec<GRPCRouteMatch>,
        /// Filters.
        pub filters: Vec<GRPCRouteFilter>,
        /// Weighted backends.
        pub backend_refs: Vec<GRPCBackendRef>,
        /// Session persistence.
        pub session_persistence: Option<SessionPersistence>,
    }
}

object! {
    /// One match of a GRPCRoute rule.
    pub struct GRPCRouteMatch {
        /// Service / method match.
        pub method: Option<GRPCMethodMatch>,
        /// Header matches.
        pub headers: Vec<GRPCHeaderMatch>,
    }
}

object! {
    /// A gRPC method match (`GRPCMethodMatch`).
    pub struct GRPCMethodMatch {
        /// `Exact` (the default) or `RegularExpression`.
        pub r#type: Option<String>,
        /// Fully qualified service name (`pkg.Service`).
        pub service: Option<String>,
        /// Method name.
        pub method: Option<String>,
    }
}

object! {
    /// A gRPC header match (`GRPCHeaderMatch`).
    pub struct GRPCHeaderMatch {
        /// `Exact` (the default) or `RegularExpression`.
        pub r#type: Option<String>,
        /// Header name.
        pub name: String,
        /// Value or expression.
        pub value: String,
    }
}

object! {
    /// One filter of a GRPCRoute (`GRPCRouteFilter`).
    pub struct GRPCRouteFilter {
        /// `RequestHeaderModifier`, `ResponseHeaderModifier`, `RequestMirror` or `ExtensionRef`.
        pub r#type: String,
        /// Request header changes.
        pub request_header_modifier: Option<HTTPHeaderFilter>,
        /// Response header changes.
        pub response_header_modifier: Option<HTTPHeaderFilter>,
        /// Request mirroring.
        pub request_mirror: Option<HTTPRequestMirrorFilter>,
        /// Implementation filter.
        pub extension_ref: Option<LocalObjectReference>,
    }
}

object! {
    /// A weighted backend of a GRPCRoute rule (`GRPCBackendRef`).
    pub struct GRPCBackendRef {
        /// API group; absent or `""` means the core group.
        pub group: Option<String>,
        /// Kind; absent means `Service`.
        pub kind: Option<String>,
        /// Name. Required.
        pub name: String,
        /// Namespace; absent means the route's namespace.
        pub namespace: Option<String>,
        /// Destination port.
        pub port: Option<i32>,
        /// Relative weight; absent means 1.
        pub weight: Option<i32>,
        /// Filters for requests sent to this backend.
        pub filters: Vec<GRPCRouteFilter>,
    }
}

object! {
    /// `TCPRoute.spec`: TCP forwarding to weighted backends.
    pub struct TCPRouteSpec {
        /// The Gateways or Services the route attaches to.
        pub parent_refs: Vec<ParentReference>,
        /// The rules (Istio uses the first).
        pub rules: Vec<TCPRouteRule>,
        /// `All` or `None` (experimental).
        pub use_default_gateways: Option<String>,
    }
}

object! {
    /// One rule of a TCPRoute.
    pub struct TCPRouteRule {
        /// Rule name.
        pub name: Option<String>,
        /// Weighted backends.
        pub backend_refs: Vec<BackendRef>,
    }
}

object! {
    /// `TLSRoute.spec`: TLS connections routed by SNI.
    pub struct TLSRouteSpec {
        /// The Gateways or Services the route attaches to.
        pub parent_refs: Vec<ParentReference>,
        /// SNI hostnames matched.
        pub hostnames: Vec<String>,
        /// The rules.
        pub rules: Vec<TLSRouteRule>,
        /// `All` or `None` (experimental).
        pub use_default_gateways: Option<String>,
    }
}

object! {
    /// One rule of a TLSRoute.
    pub struct TLSRouteRule {
        /// Rule name.
        pub name: Option<String>,
        /// Weighted backends.
        pub backend_refs: Vec<BackendRef>,
    }
}

impl HTTPBackendRef {
    /// The reference without weight and filters.
    pub fn object_ref(&self) -> BackendObjectReference {
        BackendObjectReference {
            group: self.group.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            port: self.port,
        }
    }
}

impl GRPCBackendRef {
    /// The reference without weight and filters.
    pub fn object_ref(&self) -> BackendObjectReference {
        BackendObjectReference {
            group: self.group.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            port: self.port,
        }
    }
}
