//! Tuning read from the environment, with Istio's variable names and defaults, parsed in one place.
//! Nothing here reads the process environment: each group parses a lookup the binary hands it (its
//! one snapshot, taken at start), so tests pass maps.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `PILOT_DEBOUNCE_AFTER` | `100ms` | quiet time after the last event before a merged push starts |
//! | `PILOT_DEBOUNCE_MAX` | `10s` | longest time from the first event of a batch to its push |
//! | `PILOT_ENABLE_EDS_DEBOUNCE` | `true` | `false`: endpoint-only updates skip the debounce |
//! | `MESHPILOT_DEBOUNCE_LEADING_EDGE` | `true` | push a change that follows a quiet period of `PILOT_DEBOUNCE_AFTER` at once (not in Istio; `false`: Istio's behaviour); see [`crate::debounce`] |
//! | `PILOT_PUSH_THROTTLE` | `0` (auto: `min(15 + 5 × CPUs, 100)`) | connections processing a push at once |
//! | `PILOT_MAX_REQUESTS_PER_SECOND` | `0` (auto: `max(min(15 + 5 × CPUs, 100), 500 × CPUs)`; Istio: the first term) | new ADS streams per second ([`AdsOptions`]) |
//! | `PILOT_XDS_SEND_TIMEOUT` | `10s` (Istio's former variable, default 0 = none) | a stream whose client reads nothing for this long is closed |
//! | `PILOT_ENABLE_FLOW_CONTROL` | `true` (Istio 1.9 added it with default `false`, later dropped it) | a push waits until the proxy answered its last responses ([`xds::AdsConfig::flow_control`]) |
//! | `MESHPILOT_XDS_RESPONSE_BUFFER_BYTES` | `65536` (not in Istio) | encoded response bytes queued per stream before its task waits for the client |
//! | `MESHPILOT_XDS_SEND_BUFFER_BYTES` | `65536` (not in Istio; hyper's default 409600) | HTTP/2 send buffer per stream beyond the peer's flow-control window |
//! | `MESHPILOT_XDS_MAX_RESOURCE_NAMES` | `50000` (not in Istio: no limit) | resource names one stream may watch per type; more: `RESOURCE_EXHAUSTED` |
//! | `MESHPILOT_XDS_MAX_TYPES_PER_STREAM` | `64` (not in Istio: no limit) | type URLs one stream may watch; more: `RESOURCE_EXHAUSTED` |
//! | `MESHPILOT_XDS_MAX_CONNECTIONS` | `100000` (not in Istio: no limit) | connections one ADS port holds at once; more are closed at accept; `0`: none |
//! | `MESHPILOT_XDS_MAX_CONNECTIONS_PER_PEER` | `0` (none; not in Istio) | connections one ADS port holds from one peer IP address (off by default: an east-west gateway or a NAT carries many proxies under one address) |
//! | `MESHPILOT_XDS_HANDSHAKE_TIMEOUT` | `10s` (grpc-go's `ConnectionTimeout`: 120 s, handshake only) | time for a new ADS connection's HTTP/2 preface and first request; `0`: none |
//! | `MESHPILOT_MEMORY_TRIM_AFTER_CLOSES` | `100` (not in Istio: Go returns free pages by itself) | after this many xDS connections closed, the freed heap is handed back to the OS once the churn stops, 10 s apart at least (glibc's `malloc_trim`); `0`: never |
//!
//! Durations use Go's syntax as Istio does (`100ms`, `1.5s`, `2m`, `1h30m`, `500us`).

use std::time::Duration;

use ipnet::IpNet;
use jwks::JwksOptions;
use validation::common::{parse_go_bool, parse_go_duration};

/// A bad environment variable: names the variable, its value and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {name}={value:?}: {reason}")]
pub struct EnvError {
    /// The variable.
    pub name: String,
    /// Its value.
    pub value: String,
    /// What is wrong and what is accepted.
    pub reason: String,
}

/// What a [`DiscoveryServer`](crate::DiscoveryServer) is built with besides its config store, service
/// registry and mesh settings: every setting in one value, given once at construction (no setter
/// changes the server afterwards). The binary fills it from flags and the environment
/// (`meshpilot`'s `env` module: one snapshot of the environment parsed with
/// [`DebounceOptions::from_lookup`], [`SecurityOptions::from_lookup`], [`jwks_options_from_lookup`]);
/// tests start from `Default` (Istio's defaults).
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The push pipeline's tuning.
    pub debounce: DebounceOptions,
    /// `ENABLE_XDS_API_GENERATOR_AUTH` (true): the `api` generator (MCP-over-xDS config) serves only
    /// callers authenticated in the mesh root namespace ([`mcp::server`]).
    pub api_generator_auth: bool,
    /// The JWKS resolver's settings (`PILOT_JWT_*`).
    pub jwks: JwksOptions,
    /// The server's input handle ([`crate::Inputs`]). A new one by default; make one first to hand
    /// clones to sources built before the server (what they send is in its first snapshot).
    pub inputs: crate::Inputs,
    /// `PILOT_ENABLE_IP_AUTOALLOCATE` (true): proxies that capture DNS get ServiceEntries'
    /// auto-allocated VIPs in their NDS name table ([`networking::nds`]).
    pub ip_autoallocate: bool,
    /// `PILOT_TRACE_SAMPLING` (default 1.0, [`trace_sampling_from_lookup`]): put into every mesh
    /// settings the server takes (`MeshSettings::trace_sampling`).
    pub trace_sampling: f64,
    /// `ENABLE_TLS_ON_SIDECAR_INGRESS` (false): Sidecar `ingress[].tls` terminates TLS; put into every
    /// mesh settings the server takes (`MeshSettings::enable_tls_on_sidecar_ingress`).
    pub tls_on_sidecar_ingress: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            debounce: DebounceOptions::default(),
            api_generator_auth: true,
            jwks: JwksOptions::default(),
            inputs: crate::Inputs::new(),
            ip_autoallocate: true,
            trace_sampling: model::push::tracing::DEFAULT_TRACE_SAMPLING,
            tls_on_sidecar_ingress: false,
        }
    }
}

/// `PILOT_TRACE_SAMPLING` as istiod reads it (`pilot/pkg/features/telemetry.go`): a percentage,
/// default 1.0; a value that is not a number or is outside 0–100 gives 1.0 and a warning (the second
/// value), as istiod logs it.
pub fn trace_sampling_from_lookup(lookup: impl Fn(&str) -> Option<String>) -> (f64, Option<String>) {
    let default = model::push::tracing::DEFAULT_TRACE_SAMPLING;
    let Some(value) = lookup("PILOT_TRACE_SAMPLING").filter(|v| !v.trim().is_empty()) else {
        return (default, None);
    };
    match value.trim().parse::<f64>() {
        Ok(f) if (0.0..=100.0).contains(&f) => (f, None),
        _ => (
            default,
            Some(format!("PILOT_TRACE_SAMPLING={value:?} is not a percentage in 0.0-100.0; using 1.0")),
        ),
    }
}

/// The push pipeline's tuning (Istio's `features/tuning.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebounceOptions {
    /// `PILOT_DEBOUNCE_AFTER`.
    pub after: Duration,
    /// `PILOT_DEBOUNCE_MAX`.
    pub max: Duration,
    /// `PILOT_ENABLE_EDS_DEBOUNCE`.
    pub eds_debounce: bool,
    /// `PILOT_PUSH_THROTTLE` resolved (never 0: `0`/unset means [`xds::default_push_throttle`]).
    pub push_throttle: usize,
    /// `MESHPILOT_DEBOUNCE_LEADING_EDGE` (meshpilot's): push isolated changes at once
    /// ([`crate::debounce`]).
    pub leading_edge: bool,
}

impl Default for DebounceOptions {
    fn default() -> Self {
        DebounceOptions {
            after: Duration::from_millis(100),
            max: Duration::from_secs(10),
            eds_debounce: true,
            push_throttle: xds::default_push_throttle(),
            leading_edge: true,
        }
    }
}

impl DebounceOptions {
    /// Reads variables through `lookup` (tests pass a map).
    ///
    /// # Errors
    /// [`EnvError`] naming the first bad variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let mut out = DebounceOptions::default();
        if let Some(v) = lookup("PILOT_DEBOUNCE_AFTER") {
            out.after = duration_var("PILOT_DEBOUNCE_AFTER", &v)?;
        }
        if let Some(v) = lookup("PILOT_DEBOUNCE_MAX") {
            out.max = duration_var("PILOT_DEBOUNCE_MAX", &v)?;
        }
        if let Some(v) = lookup("PILOT_ENABLE_EDS_DEBOUNCE") {
            out.eds_debounce = bool_var("PILOT_ENABLE_EDS_DEBOUNCE", &v)?;
        }
        if let Some(v) = lookup("MESHPILOT_DEBOUNCE_LEADING_EDGE") {
            out.leading_edge = bool_var("MESHPILOT_DEBOUNCE_LEADING_EDGE", &v)?;
        }
        if let Some(v) = lookup("PILOT_PUSH_THROTTLE") {
            let n: usize = v.trim().parse().map_err(|_| EnvError {
                name: "PILOT_PUSH_THROTTLE".into(),
                value: v.clone(),
                reason: "expected a non-negative integer (0: automatic)".into(),
            })?;
            if n > 0 {
                out.push_throttle = n;
            }
        }
        Ok(out)
    }
}

pub(crate) fn duration_var(name: &str, value: &str) -> Result<Duration, EnvError> {
    parse_go_duration(value).map_err(|reason| EnvError { name: name.into(), value: value.into(), reason })
}

pub(crate) fn bool_var(name: &str, value: &str) -> Result<bool, EnvError> {
    parse_go_bool(value).ok_or_else(|| EnvError {
        name: name.into(),
        value: value.into(),
        reason: "expected a boolean (true/false, 1/0, t/f)".into(),
    })
}

/// The JWKS resolver's settings read through `lookup` (the binary passes its one snapshot of the
/// environment; tests a map): the table in crate `meshpilot-jwks`'s doc
/// (`PILOT_JWT_PUB_KEY_REFRESH_INTERVAL`, `PILOT_JWT_ENABLE_REMOTE_JWKS`,
/// `JWKS_RESOLVER_INSECURE_SKIP_VERIFY`, `BLOCKED_CIDRS_IN_JWKS_URIS`), Istio's defaults otherwise.
///
/// # Errors
/// [`EnvError`] naming the first bad variable; `PILOT_JWT_ENABLE_REMOTE_JWKS` set to a mode in which
/// Envoy fetches keys (`true`, `hybrid`, `envoy`) is an error: meshpilot always fetches.
pub fn jwks_options_from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<JwksOptions, EnvError> {
    let mut out = JwksOptions::default();
    if let Some(v) = lookup("PILOT_JWT_PUB_KEY_REFRESH_INTERVAL") {
        out.refresh_interval = duration_var("PILOT_JWT_PUB_KEY_REFRESH_INTERVAL", &v)?;
        if out.refresh_interval.is_zero() {
            return Err(EnvError {
                name: "PILOT_JWT_PUB_KEY_REFRESH_INTERVAL".into(),
                value: v,
                reason: "must be positive".into(),
            });
        }
    }
    if let Some(v) = lookup("PILOT_JWT_ENABLE_REMOTE_JWKS")
        && matches!(v.as_str(), "true" | "hybrid" | "envoy")
    {
        return Err(EnvError {
            name: "PILOT_JWT_ENABLE_REMOTE_JWKS".into(),
            value: v,
            reason: "meshpilot fetches JWKS itself: only `false` / `istiod` (the default) is supported"
                .into(),
        });
    }
    if let Some(v) = lookup("JWKS_RESOLVER_INSECURE_SKIP_VERIFY") {
        out.insecure_skip_verify = bool_var("JWKS_RESOLVER_INSECURE_SKIP_VERIFY", &v)?;
    }
    if let Some(v) = lookup("BLOCKED_CIDRS_IN_JWKS_URIS") {
        for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let net: IpNet = part.parse().map_err(|_| EnvError {
                name: "BLOCKED_CIDRS_IN_JWKS_URIS".into(),
                value: v.clone(),
                reason: format!("{part:?} is not a CIDR (e.g. 10.0.0.0/8)"),
            })?;
            out.blocked_cidrs.push(net);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pilot_trace_sampling_as_istiod() {
        let one = |v: &'static str| {
            trace_sampling_from_lookup(move |n: &str| (n == "PILOT_TRACE_SAMPLING").then(|| v.to_string()))
        };
        assert_eq!(trace_sampling_from_lookup(|_| None), (1.0, None));
        assert_eq!(one("12.5"), (12.5, None));
        assert_eq!(one("0"), (0.0, None));
        for bad in ["101", "-1", "lots"] {
            let (value, warning) = one(bad);
            assert_eq!(value, 1.0, "{bad}");
            assert!(warning.is_some_and(|w| w.contains("PILOT_TRACE_SAMPLING")), "{bad}");
        }
    }

    #[test]
    fn options_from_env() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        let defaults = jwks_options_from_lookup(env(&[])).unwrap();
        assert_eq!(defaults, JwksOptions::default());
        assert_eq!(defaults.refresh_interval, Duration::from_secs(1200));
        assert_eq!(defaults.eviction_duration, Duration::from_secs(7 * 24 * 3600));
        assert_eq!(defaults.extra_root_ca_paths, [std::path::PathBuf::from("/cacerts/extra.pem")]);

        let set = jwks_options_from_lookup(env(&[
            ("PILOT_JWT_PUB_KEY_REFRESH_INTERVAL", "90s"),
            ("PILOT_JWT_ENABLE_REMOTE_JWKS", "istiod"),
            ("JWKS_RESOLVER_INSECURE_SKIP_VERIFY", "true"),
            ("BLOCKED_CIDRS_IN_JWKS_URIS", "10.0.0.0/8, 192.168.1.0/24"),
        ]))
        .unwrap();
        assert_eq!(set.refresh_interval, Duration::from_secs(90));
        assert!(set.insecure_skip_verify);
        assert_eq!(set.blocked_cidrs.len(), 2);

        let err = jwks_options_from_lookup(env(&[("PILOT_JWT_ENABLE_REMOTE_JWKS", "envoy")])).unwrap_err();
        assert_eq!(err.name, "PILOT_JWT_ENABLE_REMOTE_JWKS");
        let err =
            jwks_options_from_lookup(env(&[("BLOCKED_CIDRS_IN_JWKS_URIS", "10.0.0.0/8,nope")])).unwrap_err();
        assert!(err.reason.contains("\"nope\""), "{err}");
        let err =
            jwks_options_from_lookup(env(&[("PILOT_JWT_PUB_KEY_REFRESH_INTERVAL", "soon")])).unwrap_err();
        assert_eq!(err.name, "PILOT_JWT_PUB_KEY_REFRESH_INTERVAL");
    }

    #[test]
    fn env_defaults_and_errors_name_variable_and_value() {
        assert_eq!(DebounceOptions::from_lookup(|_| None), Ok(DebounceOptions::default()));
        let o = DebounceOptions::from_lookup(|n| match n {
            "PILOT_DEBOUNCE_AFTER" => Some("10ms".into()),
            "PILOT_DEBOUNCE_MAX" => Some("1s".into()),
            "PILOT_ENABLE_EDS_DEBOUNCE" => Some("false".into()),
            "PILOT_PUSH_THROTTLE" => Some("7".into()),
            "MESHPILOT_DEBOUNCE_LEADING_EDGE" => Some("false".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(
            o,
            DebounceOptions {
                after: Duration::from_millis(10),
                max: Duration::from_secs(1),
                eds_debounce: false,
                push_throttle: 7,
                leading_edge: false,
            }
        );
        let err =
            DebounceOptions::from_lookup(|n| (n == "PILOT_DEBOUNCE_MAX").then(|| "ten".into())).unwrap_err();
        assert_eq!(err.name, "PILOT_DEBOUNCE_MAX");
        assert!(err.to_string().contains("PILOT_DEBOUNCE_MAX=\"ten\""), "{err}");
        let auto =
            DebounceOptions::from_lookup(|n| (n == "PILOT_PUSH_THROTTLE").then(|| "0".into())).unwrap();
        assert_eq!(auto.push_throttle, xds::default_push_throttle());
        assert!(DebounceOptions::from_lookup(|n| (n == "PILOT_PUSH_THROTTLE").then(|| "-1".into())).is_err());
    }
}

/// Istio's security settings from the environment (istiod's names and defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecurityOptions {
    /// `XDS_AUTH` (true): authenticate xDS callers on the secure port.
    pub xds_auth: bool,
    /// `PILOT_ENABLE_XDS_IDENTITY_CHECK` (true): a proxy may only connect as a workload of its
    /// caller's namespace.
    pub identity_check: bool,
    /// `TOKEN_AUDIENCES` (comma-separated, `istio-ca`): audiences a service-account token must carry.
    pub token_audiences: Vec<String>,
    /// `DEFAULT_WORKLOAD_CERT_TTL` (24h).
    pub default_cert_ttl: Duration,
    /// `MAX_WORKLOAD_CERT_TTL` (2160h = 90 days).
    pub max_cert_ttl: Duration,
    /// `POD_NAMESPACE` (`istio-system`): the control plane's namespace (serving-certificate names).
    pub pod_namespace: String,
    /// `ENABLE_XDS_API_GENERATOR_AUTH` (true): the `api` generator (MCP-over-xDS config) serves only
    /// callers authenticated in the mesh root namespace ([`mcp::server`]).
    pub api_generator_auth: bool,
    /// `ENABLE_DEBUG_ENDPOINT_AUTH` (true): an authenticated debug caller outside `POD_NAMESPACE` sees
    /// only its own namespace's proxies (`meshpilot_http::access`).
    pub debug_endpoint_auth: bool,
    /// `UNSAFE_ENABLE_ADMIN_ENDPOINTS` (false): istiod's `/debug/force_disconnect` is served.
    pub unsafe_admin_endpoints: bool,
}

impl Default for SecurityOptions {
    fn default() -> Self {
        SecurityOptions {
            xds_auth: true,
            identity_check: true,
            token_audiences: vec!["istio-ca".into()],
            default_cert_ttl: Duration::from_secs(24 * 3600),
            max_cert_ttl: Duration::from_secs(90 * 24 * 3600),
            pod_namespace: "istio-system".into(),
            api_generator_auth: true,
            debug_endpoint_auth: true,
            unsafe_admin_endpoints: false,
        }
    }
}

impl SecurityOptions {
    /// Reads the variables through `lookup` (the binary's one snapshot of the environment; tests a map).
    ///
    /// # Errors
    /// [`EnvError`] naming the first bad variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let mut out = SecurityOptions::default();
        if let Some(v) = lookup("XDS_AUTH") {
            out.xds_auth = bool_var("XDS_AUTH", &v)?;
        }
        if let Some(v) = lookup("PILOT_ENABLE_XDS_IDENTITY_CHECK") {
            out.identity_check = bool_var("PILOT_ENABLE_XDS_IDENTITY_CHECK", &v)?;
        }
        if let Some(v) = lookup("TOKEN_AUDIENCES") {
            out.token_audiences =
                v.split(',').map(str::trim).filter(|a| !a.is_empty()).map(String::from).collect();
            if out.token_audiences.is_empty() {
                return Err(EnvError {
                    name: "TOKEN_AUDIENCES".into(),
                    value: v,
                    reason: "no audience given".into(),
                });
            }
        }
        if let Some(v) = lookup("DEFAULT_WORKLOAD_CERT_TTL") {
            out.default_cert_ttl = duration_var("DEFAULT_WORKLOAD_CERT_TTL", &v)?;
        }
        if let Some(v) = lookup("MAX_WORKLOAD_CERT_TTL") {
            out.max_cert_ttl = duration_var("MAX_WORKLOAD_CERT_TTL", &v)?;
        }
        if let Some(v) = lookup("ENABLE_XDS_API_GENERATOR_AUTH") {
            out.api_generator_auth = bool_var("ENABLE_XDS_API_GENERATOR_AUTH", &v)?;
        }
        if let Some(v) = lookup("ENABLE_DEBUG_ENDPOINT_AUTH") {
            out.debug_endpoint_auth = bool_var("ENABLE_DEBUG_ENDPOINT_AUTH", &v)?;
        }
        if let Some(v) = lookup("UNSAFE_ENABLE_ADMIN_ENDPOINTS") {
            out.unsafe_admin_endpoints = bool_var("UNSAFE_ENABLE_ADMIN_ENDPOINTS", &v)?;
        }
        if let Some(v) = lookup("POD_NAMESPACE").filter(|v| !v.is_empty()) {
            out.pod_namespace = v;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod security_tests {
    use super::*;

    #[test]
    fn api_generator_auth_is_on_unless_turned_off() {
        let var = |value: &'static str| {
            move |n: &str| (n == "ENABLE_XDS_API_GENERATOR_AUTH").then(|| value.to_string())
        };
        assert!(SecurityOptions::default().api_generator_auth);
        assert!(!SecurityOptions::from_lookup(var("false")).unwrap().api_generator_auth);
        let e = SecurityOptions::from_lookup(var("maybe")).unwrap_err();
        assert!(e.to_string().contains("ENABLE_XDS_API_GENERATOR_AUTH"), "{e}");
    }
}

/// Admission and slow-client limits of the ADS ports (docs/RELIABILITY.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdsOptions {
    /// `PILOT_MAX_REQUESTS_PER_SECOND`: new ADS streams admitted per second (token bucket, burst 1,
    /// excess streams wait ≤ 1 s then get `RESOURCE_EXHAUSTED`). `0`/unset: meshpilot's automatic
    /// default [`xds::default_max_requests_per_second`] (`max(min(15 + 5 × CPUs, 100), 500 × CPUs)`;
    /// Istio's automatic value is the first term only). Negative: no limit.
    pub max_requests_per_second: f64,
    /// `PILOT_XDS_SEND_TIMEOUT` (Istio's former variable, a Go duration): how long a response may wait
    /// for a client that stopped reading before the stream is closed. Default `10s`; `0`: never.
    pub send_timeout: std::time::Duration,
    /// `PILOT_ENABLE_FLOW_CONTROL`: [`xds::AdsConfig::flow_control`]. Default `true`.
    pub flow_control: bool,
    /// `MESHPILOT_XDS_RESPONSE_BUFFER_BYTES`: [`xds::AdsConfig::response_buffer_bytes`].
    pub response_buffer_bytes: usize,
    /// `MESHPILOT_XDS_SEND_BUFFER_BYTES`: [`xds::AdsConfig::send_buffer_bytes`].
    pub send_buffer_bytes: usize,
    /// `MESHPILOT_XDS_MAX_RESOURCE_NAMES`: [`xds::StreamLimits::max_resource_names`].
    pub max_resource_names: usize,
    /// `MESHPILOT_XDS_MAX_TYPES_PER_STREAM`: [`xds::StreamLimits::max_types`].
    pub max_types: usize,
    /// `MESHPILOT_XDS_HANDSHAKE_TIMEOUT` (a Go duration): [`xds::AdsConfig::handshake_timeout`].
    pub handshake_timeout: std::time::Duration,
    /// `MESHPILOT_XDS_MAX_CONNECTIONS` and `MESHPILOT_XDS_MAX_CONNECTIONS_PER_PEER` (`0`: none):
    /// [`xds::AdsConfig::connection_limits`].
    pub connection_limits: xds::http2::ConnectionLimits,
    /// `MESHPILOT_MEMORY_TRIM_AFTER_CLOSES`: xDS connections that must close before the process
    /// hands its freed heap back to the operating system (glibc's `malloc_trim`, once the churn
    /// stops; docs/RELIABILITY.md "Connection storms"). Default 100; `0`: never.
    pub memory_trim_after_closes: u64,
}

impl Default for AdsOptions {
    fn default() -> Self {
        AdsOptions {
            max_requests_per_second: xds::default_max_requests_per_second(),
            send_timeout: Duration::from_secs(10),
            flow_control: true,
            response_buffer_bytes: xds::DEFAULT_RESPONSE_BUFFER_BYTES,
            send_buffer_bytes: xds::http2::DEFAULT_SEND_BUFFER_BYTES,
            max_resource_names: xds::StreamLimits::DEFAULT_MAX_RESOURCE_NAMES,
            max_types: xds::StreamLimits::DEFAULT_MAX_TYPES,
            handshake_timeout: xds::DEFAULT_HANDSHAKE_TIMEOUT,
            connection_limits: xds::http2::ConnectionLimits::default(),
            memory_trim_after_closes: 100,
        }
    }
}

/// A positive count from variable `name`.
fn count_var(name: &str, value: &str) -> Result<usize, EnvError> {
    value.trim().parse().ok().filter(|n: &usize| *n > 0).ok_or_else(|| EnvError {
        name: name.into(),
        value: value.into(),
        reason: "expected a positive whole number".into(),
    })
}

impl AdsOptions {
    /// Reads variables through `lookup` (the binary's one snapshot of the environment; tests a map).
    ///
    /// # Errors
    /// [`EnvError`] naming the bad variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let mut out = AdsOptions::default();
        if let Some(v) = lookup("PILOT_MAX_REQUESTS_PER_SECOND") {
            let n: f64 = v.trim().parse().ok().filter(|n: &f64| n.is_finite()).ok_or_else(|| EnvError {
                name: "PILOT_MAX_REQUESTS_PER_SECOND".into(),
                value: v.clone(),
                reason: "expected a number of new streams per second (0: automatic, negative: no limit)"
                    .into(),
            })?;
            if n != 0.0 {
                out.max_requests_per_second = n;
            }
        }
        if let Some(v) = lookup("PILOT_XDS_SEND_TIMEOUT") {
            out.send_timeout = duration_var("PILOT_XDS_SEND_TIMEOUT", &v)?;
        }
        if let Some(v) = lookup("PILOT_ENABLE_FLOW_CONTROL") {
            out.flow_control = bool_var("PILOT_ENABLE_FLOW_CONTROL", &v)?;
        }
        if let Some(v) = lookup("MESHPILOT_XDS_RESPONSE_BUFFER_BYTES") {
            out.response_buffer_bytes = count_var("MESHPILOT_XDS_RESPONSE_BUFFER_BYTES", &v)?;
        }
        if let Some(v) = lookup("MESHPILOT_XDS_SEND_BUFFER_BYTES") {
            out.send_buffer_bytes = count_var("MESHPILOT_XDS_SEND_BUFFER_BYTES", &v)?;
        }
        if let Some(v) = lookup("MESHPILOT_XDS_MAX_RESOURCE_NAMES") {
            out.max_resource_names = count_var("MESHPILOT_XDS_MAX_RESOURCE_NAMES", &v)?;
        }
        if let Some(v) = lookup("MESHPILOT_XDS_MAX_TYPES_PER_STREAM") {
            out.max_types = count_var("MESHPILOT_XDS_MAX_TYPES_PER_STREAM", &v)?;
        }
        if let Some(v) = lookup("MESHPILOT_XDS_HANDSHAKE_TIMEOUT") {
            out.handshake_timeout = duration_var("MESHPILOT_XDS_HANDSHAKE_TIMEOUT", &v)?;
        }
        let connections = |name: &str, v: &str| {
            v.trim().parse::<usize>().map_err(|_| EnvError {
                name: name.into(),
                value: v.to_string(),
                reason: "expected a whole number of connections (0: no limit)".into(),
            })
        };
        if let Some(v) = lookup("MESHPILOT_XDS_MAX_CONNECTIONS") {
            out.connection_limits.max_total = connections("MESHPILOT_XDS_MAX_CONNECTIONS", &v)?;
        }
        if let Some(v) = lookup("MESHPILOT_XDS_MAX_CONNECTIONS_PER_PEER") {
            out.connection_limits.max_per_peer = connections("MESHPILOT_XDS_MAX_CONNECTIONS_PER_PEER", &v)?;
        }
        if let Some(v) = lookup("MESHPILOT_MEMORY_TRIM_AFTER_CLOSES") {
            out.memory_trim_after_closes = v.trim().parse().map_err(|_| EnvError {
                name: "MESHPILOT_MEMORY_TRIM_AFTER_CLOSES".into(),
                value: v.clone(),
                reason: "expected a whole number of closed connections (0: never trim)".into(),
            })?;
        }
        Ok(out)
    }

    /// The engine settings these options give; `limiter` is the port's admission limiter (one per port).
    pub fn apply(
        &self,
        config: xds::AdsConfig,
        limiter: &std::sync::Arc<xds::RequestLimiter>,
    ) -> xds::AdsConfig {
        xds::AdsConfig {
            request_limiter: limiter.clone(),
            send_timeout: self.send_timeout,
            flow_control: self.flow_control,
            response_buffer_bytes: self.response_buffer_bytes,
            send_buffer_bytes: self.send_buffer_bytes,
            limits: xds::StreamLimits {
                max_resource_names: self.max_resource_names,
                max_types: self.max_types,
            },
            handshake_timeout: self.handshake_timeout,
            connection_limits: self.connection_limits,
            ..config
        }
    }
}

#[cfg(test)]
mod ads_tests {
    use super::*;

    #[test]
    fn request_limit_and_send_timeout_from_the_environment() {
        let d = AdsOptions::from_lookup(|_| None).unwrap();
        assert!((d.max_requests_per_second - xds::default_max_requests_per_second()).abs() < f64::EPSILON);
        assert_eq!(d.send_timeout, Duration::from_secs(10));
        assert!(d.flow_control);
        let o = AdsOptions::from_lookup(|n| match n {
            "PILOT_MAX_REQUESTS_PER_SECOND" => Some("25".into()),
            "PILOT_XDS_SEND_TIMEOUT" => Some("2s".into()),
            "PILOT_ENABLE_FLOW_CONTROL" => Some("false".into()),
            _ => None,
        })
        .unwrap();
        assert!((o.max_requests_per_second - 25.0).abs() < f64::EPSILON);
        assert_eq!(o.send_timeout, Duration::from_secs(2));
        assert!(!o.flow_control);
        let e = AdsOptions::from_lookup(|n| (n == "PILOT_ENABLE_FLOW_CONTROL").then(|| "sometimes".into()))
            .unwrap_err();
        assert_eq!(e.name, "PILOT_ENABLE_FLOW_CONTROL");
        let auto = AdsOptions::from_lookup(|n| (n == "PILOT_MAX_REQUESTS_PER_SECOND").then(|| "0".into()));
        assert!((auto.unwrap().max_requests_per_second - d.max_requests_per_second).abs() < f64::EPSILON);
        let e = AdsOptions::from_lookup(|n| (n == "PILOT_MAX_REQUESTS_PER_SECOND").then(|| "lots".into()))
            .unwrap_err();
        assert_eq!(e.name, "PILOT_MAX_REQUESTS_PER_SECOND");
        let e =
            AdsOptions::from_lookup(|n| (n == "PILOT_XDS_SEND_TIMEOUT").then(|| "-1s".into())).unwrap_err();
        assert_eq!(e.name, "PILOT_XDS_SEND_TIMEOUT");
    }

    #[test]
    fn stream_limits_and_handshake_timeout_from_the_environment() {
        let d = AdsOptions::from_lookup(|_| None).unwrap();
        assert_eq!((d.max_resource_names, d.max_types), (50_000, 64));
        assert_eq!((d.response_buffer_bytes, d.handshake_timeout), (64 << 10, Duration::from_secs(10)));
        assert_eq!(d.send_buffer_bytes, 64 << 10);
        let o = AdsOptions::from_lookup(|n| match n {
            "MESHPILOT_XDS_RESPONSE_BUFFER_BYTES" => Some("65536".into()),
            "MESHPILOT_XDS_SEND_BUFFER_BYTES" => Some("32768".into()),
            "MESHPILOT_XDS_MAX_RESOURCE_NAMES" => Some("100".into()),
            "MESHPILOT_XDS_MAX_TYPES_PER_STREAM" => Some(" 8 ".into()),
            "MESHPILOT_XDS_HANDSHAKE_TIMEOUT" => Some("1m".into()),
            "MESHPILOT_XDS_MAX_CONNECTIONS_PER_PEER" => Some("500".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(d.connection_limits, xds::http2::ConnectionLimits { max_total: 100_000, max_per_peer: 0 });
        assert_eq!(
            o.connection_limits,
            xds::http2::ConnectionLimits { max_total: 100_000, max_per_peer: 500 }
        );
        let e = AdsOptions::from_lookup(|n| (n == "MESHPILOT_XDS_MAX_CONNECTIONS").then(|| "-1".into()))
            .unwrap_err();
        assert_eq!(e.name, "MESHPILOT_XDS_MAX_CONNECTIONS");
        assert_eq!((o.response_buffer_bytes, o.max_resource_names, o.max_types), (65_536, 100, 8));
        assert_eq!(o.handshake_timeout, Duration::from_secs(60));
        let config = o.apply(xds::AdsConfig::default(), &std::sync::Arc::new(xds::RequestLimiter::new(1.0)));
        assert_eq!(config.limits, xds::StreamLimits { max_resource_names: 100, max_types: 8 });
        assert_eq!(config.connection_limits.max_per_peer, 500);
        assert_eq!(
            (config.response_buffer_bytes, config.send_buffer_bytes, config.handshake_timeout),
            (65_536, 32_768, Duration::from_secs(60))
        );
        for (name, bad) in
            [("MESHPILOT_XDS_MAX_RESOURCE_NAMES", "0"), ("MESHPILOT_XDS_MAX_TYPES_PER_STREAM", "many")]
        {
            let e = AdsOptions::from_lookup(|n| (n == name).then(|| bad.into())).unwrap_err();
            assert_eq!(e.name, name);
            assert!(e.reason.contains("positive whole number"), "{e}");
        }
    }

    #[test]
    fn memory_trim_threshold_from_the_environment() {
        assert_eq!(AdsOptions::from_lookup(|_| None).unwrap().memory_trim_after_closes, 100);
        let var =
            |v: &'static str| move |n: &str| (n == "MESHPILOT_MEMORY_TRIM_AFTER_CLOSES").then(|| v.into());
        assert_eq!(AdsOptions::from_lookup(var("0")).unwrap().memory_trim_after_closes, 0, "0 turns it off");
        assert_eq!(AdsOptions::from_lookup(var(" 50 ")).unwrap().memory_trim_after_closes, 50);
        let e = AdsOptions::from_lookup(var("-1")).unwrap_err();
        assert_eq!(e.name, "MESHPILOT_MEMORY_TRIM_AFTER_CLOSES");
        assert!(e.reason.contains("0: never"), "{e}");
    }
}
