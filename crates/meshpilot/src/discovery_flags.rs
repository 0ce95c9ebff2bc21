//! The flags `meshpilot discovery` takes from istiod's `pilot-discovery discovery`, spelled as istiod
//! spells them, so that the container args of Istio's istiod Helm chart (`discovery
//! --monitoringAddr=:15014 --log_output_level=default:info [--log_as_json] --domain cluster.local
//! [--cniNamespace=NS] --keepaliveMaxServerConnectionAge 30m` and the chart's `extraContainerArgs`)
//! start meshpilot.
//!
//! Where istiod defines them (module `istio.io/istio`): `pilot/cmd/pilot-discovery/app/cmd.go`
//! (`addFlags`), `pkg/log/options.go` (`AttachFlags`: `log_*`), `pkg/keepalive/options.go`
//! (`keepalive*`), `pkg/ctrlz/options.go` (`ctrlz_*`) and `pkg/log/klog.go` (`--vklog`). The flags
//! meshpilot acts on are fields of [`crate::discovery::Args`], [`LogArgs`] and [`KeepaliveArgs`]; the
//! others are in [`NotUsedArgs`]: parsed as istiod parses them (a malformed value is an error, as in
//! istiod), listed under their own heading in `--help`, named in a warning at start when given.
//!
//! istiod ignores a flag it does not know (`FParseErrWhitelist{UnknownFlags: true}`); meshpilot
//! refuses it, naming the flag, so that a misspelt flag does not pass silently.

use std::{path::PathBuf, time::Duration};

use validation::common::{parse_go_bool, parse_go_duration};
use xds::AdsConfig;

/// Log output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The log level when neither `--log_output_level` nor `RUST_LOG` sets one (istiod's default scope
/// level).
pub const DEFAULT_LOG_LEVEL: &str = "info";

/// The logging flags meshpilot acts on: its own `--log-format` and istiod's `--log_as_json` and
/// `--log_output_level` (`pkg/log/options.go`).
#[derive(clap::Args, Debug)]
pub struct LogArgs {
    /// Log format (`json` is istiod's --log_as_json).
    #[arg(long = "log-format", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Log one JSON object per line (istiod's --log_as_json): the same as --log-format json. A Go
    /// boolean flag: no value, or `=true`/`=false`.
    #[arg(long = "log_as_json", value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = go_bool,
          action = clap::ArgAction::Set)]
    pub log_as_json: bool,

    /// Log level (istiod's --log_output_level): `LEVEL` or `SCOPE:LEVEL,…`, a level being debug, info,
    /// warn, error, fatal (error here) or none (off). A bare LEVEL, `default:` and `all:` set
    /// meshpilot's level (`all:` also drops the entries before it); another scope is taken as a tracing
    /// target, a meshpilot crate such as `meshpilot_xds` or `meshpilot_kube` (istiod's own scope names select
    /// nothing here, as istiod ignores a scope it does not know). RUST_LOG, when set, replaces it.
    /// Default: info.
    #[arg(long = "log_output_level", value_name = "LEVELS", value_parser = LogLevels::parse)]
    pub log_output_level: Option<LogLevels>,
}

impl LogArgs {
    /// Whether logs are JSON: `--log-format json` or `--log_as_json`.
    pub fn json(&self) -> bool {
        self.log_format == LogFormat::Json || self.log_as_json
    }

    /// The `tracing_subscriber::EnvFilter` directives these flags give (used when `RUST_LOG` is
    /// unset): [`LogLevels::directives`], else [`DEFAULT_LOG_LEVEL`].
    pub fn filter(&self) -> String {
        match &self.log_output_level {
            Some(levels) => levels.directives(DEFAULT_LOG_LEVEL),
            None => DEFAULT_LOG_LEVEL.to_string(),
        }
    }
}

/// An istiod log level (`pkg/log/options.go`, `stringToLevel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// `debug`.
    Debug,
    /// `info`.
    Info,
    /// `warn`.
    Warn,
    /// `error`.
    Error,
    /// `fatal`: tracing has no level above error, so error.
    Fatal,
    /// `none`: nothing (tracing's `off`).
    None,
}

impl Level {
    /// istiod's name for the level.
    fn parse(text: &str) -> Option<Level> {
        Some(match text {
            "debug" => Level::Debug,
            "info" => Level::Info,
            "warn" => Level::Warn,
            "error" => Level::Error,
            "fatal" => Level::Fatal,
            "none" => Level::None,
            _ => return None,
        })
    }

    /// The level in a tracing directive.
    fn directive(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error | Level::Fatal => "error",
            Level::None => "off",
        }
    }
}

/// istiod's name of the scope a bare `LEVEL` sets (`log.DefaultScopeName`).
const DEFAULT_SCOPE: &str = "default";
/// istiod's scope that sets every scope (`log.OverrideScopeName`).
const OVERRIDE_SCOPE: &str = "all";

/// A `--log_output_level` (or `--log_stacktrace_level`) value: `SCOPE:LEVEL` entries in the order
/// given, a bare `LEVEL` being the `default` scope's (istiod's `convertScopedLevel` and
/// `processLevels`, `pkg/log/options.go` and `pkg/log/config.go`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLevels(Vec<(String, Level)>);

impl LogLevels {
    /// Parses `SCOPE:LEVEL,…` (empty: no entry).
    ///
    /// # Errors
    /// An entry with more than one `:` or an unknown level, as istiod (`invalid output level …`); a
    /// scope that cannot be a tracing target (letters, digits, `_` and `-` can).
    pub fn parse(text: &str) -> Result<LogLevels, String> {
        if text.is_empty() {
            return Ok(LogLevels(Vec::new()));
        }
        let entry = |entry: &str| {
            let (scope, level) = match entry.split(':').collect::<Vec<_>>()[..] {
                [level] => (DEFAULT_SCOPE, level),
                [scope, level] => (scope, level),
                _ => return Err(format!("invalid output level format '{entry}'")),
            };
            let level = Level::parse(level).ok_or_else(|| {
                format!("invalid output level '{level}' (expected debug, info, warn, error, fatal or none)")
            })?;
            if scope.is_empty() || !scope.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(format!(
                    "invalid scope '{scope}' in '{entry}' (expected letters, digits, _ or -)"
                ));
            }
            Ok((scope.to_string(), level))
        };
        text.split(',').map(entry).collect::<Result<_, _>>().map(LogLevels)
    }

    /// The `tracing_subscriber::EnvFilter` directives: the level of `default` (or of the last `all`
    /// after it), else `default_level`, then `SCOPE=LEVEL` for every other scope. Entries are read in
    /// order as istiod reads them: a later one for the same scope wins, `all` replaces every one
    /// before it.
    pub fn directives(&self, default_level: &str) -> String {
        let mut global = None;
        let mut targets: Vec<(&str, Level)> = Vec::new();
        for (scope, level) in &self.0 {
            match scope.as_str() {
                DEFAULT_SCOPE => global = Some(*level),
                OVERRIDE_SCOPE => {
                    global = Some(*level);
                    targets.clear();
                }
                _ => {
                    targets.retain(|(s, _)| s != scope);
                    targets.push((scope, *level));
                }
            }
        }
        let global = global.map_or(default_level, |level| level.directive());
        std::iter::once(global.to_string())
            .chain(targets.iter().map(|(scope, level)| format!("{scope}={}", level.directive())))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A Go boolean flag's value (`strconv.ParseBool`, as pflag's `BoolVar`).
fn go_bool(text: &str) -> Result<bool, String> {
    parse_go_bool(text)
        .ok_or_else(|| "expected true or false (Go's 1, t, T, TRUE, true, True, 0, f, …)".into())
}

/// istiod's gRPC keepalive flags (`pkg/keepalive/options.go`, `AttachCobraFlags`), for both ADS
/// ports.
#[derive(clap::Args, Debug)]
pub struct KeepaliveArgs {
    /// Interval of the server's HTTP/2 keepalive pings on the ADS ports (istiod's --keepaliveInterval,
    /// a Go duration; 0 is grpc-go's 2h, less than 1s is 1s).
    #[arg(long = "keepaliveInterval", value_name = "DURATION", default_value = "30s",
          value_parser = parse_go_duration)]
    pub interval: Duration,

    /// How long a keepalive ping may go unanswered before the connection is closed (istiod's
    /// --keepaliveTimeout, a Go duration; 0 is grpc-go's 20s).
    #[arg(long = "keepaliveTimeout", value_name = "DURATION", default_value = "10s",
          value_parser = parse_go_duration)]
    pub timeout: Duration,

    /// The age at which a connection of either ADS port is closed gracefully, so that proxies spread
    /// over new replicas (istiod's --keepaliveMaxServerConnectionAge, a Go duration; unset or 0:
    /// never; the istiod chart passes 30m): at the age ±10 % an HTTP/2 GOAWAY, 10s later (istiod's
    /// grace) the connection is dropped and its proxies reconnect (`xds::http2::MaxConnectionAge`).
    #[arg(long = "keepaliveMaxServerConnectionAge", value_name = "DURATION", value_parser = parse_go_duration)]
    pub max_server_connection_age: Option<Duration>,
}

/// grpc-go's server keepalive interval when none is given (`defaultServerKeepaliveTime`).
const GRPC_DEFAULT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2 * 3600);
/// grpc-go's shortest server keepalive interval (`internal.KeepaliveMinServerPingTime`).
const GRPC_MIN_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// grpc-go's server keepalive timeout when none is given (`defaultServerKeepaliveTimeout`).
const GRPC_DEFAULT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

impl KeepaliveArgs {
    /// `config` with these keepalive settings, read as grpc-go (istiod's gRPC server:
    /// `grpc.KeepaliveParams` and `internal/transport/http2_server.go`) reads them: an interval of 0
    /// is 2 h and one under 1 s is 1 s; a timeout of 0 is 20 s. The max connection age
    /// ([`KeepaliveArgs::max_connection_age`]) comes with istiod's 10 s grace.
    pub fn apply(&self, config: AdsConfig) -> AdsConfig {
        let keepalive_interval = match self.interval {
            Duration::ZERO => GRPC_DEFAULT_KEEPALIVE_INTERVAL,
            interval => interval.max(GRPC_MIN_KEEPALIVE_INTERVAL),
        };
        let keepalive_timeout =
            if self.timeout.is_zero() { GRPC_DEFAULT_KEEPALIVE_TIMEOUT } else { self.timeout };
        let max_connection_age = self.max_connection_age().map(xds::http2::MaxConnectionAge::new);
        AdsConfig { keepalive_interval, keepalive_timeout, max_connection_age, ..config }
    }

    /// The connection age limit asked for: `None` when unset or 0 (no limit, as grpc-go).
    pub fn max_connection_age(&self) -> Option<Duration> {
        self.max_server_connection_age.filter(|age| !age.is_zero())
    }
}

/// The `--help` heading of [`NotUsedArgs`].
pub const NOT_USED_HEADING: &str = "istiod's flags: accepted, not used";

/// istiod's flags meshpilot accepts and does not act on, so that istiod's command lines start it.
/// Values are parsed as istiod parses them; [`NotUsedArgs::given`] names those given.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = NOT_USED_HEADING)]
pub struct NotUsedArgs {
    /// Namespace of the multi-cluster secrets (istiod's --clusterRegistriesNamespace). Accepted, not
    /// used.
    #[arg(long = "clusterRegistriesNamespace", value_name = "NAMESPACE")]
    cluster_registries_namespace: Option<String>,

    /// The control plane's namespace (istiod's --namespace, default POD_NAMESPACE). Accepted, not
    /// used: meshpilot reads POD_NAMESPACE.
    #[arg(long = "namespace", short = 'n', value_name = "NAMESPACE")]
    namespace: Option<String>,

    /// Namespace of istio-cni (istiod's --cniNamespace, default POD_NAMESPACE). Accepted, not used.
    #[arg(long = "cniNamespace", value_name = "NAMESPACE")]
    cni_namespace: Option<String>,

    /// Alias names of clusters, `ALIAS=CLUSTER,…` (istiod's --clusterAliases). Accepted, not used.
    #[arg(long = "clusterAliases", value_name = "ALIAS=CLUSTER", value_delimiter = ',')]
    cluster_aliases: Vec<String>,

    /// Serve /debug/pprof (istiod's --profile, default true). Accepted, not used: meshpilot has no
    /// pprof.
    #[arg(long = "profile", value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    profile: Option<bool>,

    /// CA certificate of istiod's own serving certificate (istiod's --caCertFile). Accepted, not used.
    #[arg(long = "caCertFile", value_name = "FILE")]
    ca_cert_file: Option<PathBuf>,

    /// istiod's own serving certificate (istiod's --tlsCertFile). Accepted, not used.
    #[arg(long = "tlsCertFile", value_name = "FILE")]
    tls_cert_file: Option<PathBuf>,

    /// The key of --tlsCertFile (istiod's --tlsKeyFile). Accepted, not used.
    #[arg(long = "tlsKeyFile", value_name = "FILE")]
    tls_key_file: Option<PathBuf>,

    /// Cipher suites of istiod's TLS servers, comma-separated (istiod's --tls-cipher-suites).
    /// Accepted, not used.
    #[arg(long = "tls-cipher-suites", value_name = "SUITES", value_delimiter = ',')]
    tls_cipher_suites: Vec<String>,

    /// Minimum TLS version of istiod's TLS servers, 1.2 or 1.3 (istiod's --tls-min-version).
    /// Accepted, not used.
    #[arg(long = "tls-min-version", value_name = "VERSION")]
    tls_min_version: Option<String>,

    /// Queries per second to the Kubernetes API (istiod's --kubernetesApiQPS, default 80). Accepted,
    /// not used.
    #[arg(long = "kubernetesApiQPS", value_name = "QPS")]
    kubernetes_api_qps: Option<f32>,

    /// Burst of queries to the Kubernetes API (istiod's --kubernetesApiBurst, default 160). Accepted,
    /// not used.
    #[arg(long = "kubernetesApiBurst", value_name = "N")]
    kubernetes_api_burst: Option<i32>,

    /// Levels at which stack traces are logged, as --log_output_level (istiod's
    /// --log_stacktrace_level). Accepted, not used.
    #[arg(long = "log_stacktrace_level", value_name = "LEVELS", value_parser = LogLevels::parse)]
    log_stacktrace_level: Option<LogLevels>,

    /// Scopes whose logs name their caller, comma-separated (istiod's --log_caller). Accepted, not
    /// used.
    #[arg(long = "log_caller", value_name = "SCOPES")]
    log_caller: Option<String>,

    /// Where logs go, repeatable (istiod's --log_target, default stdout). Accepted, not used:
    /// meshpilot logs to stderr.
    #[arg(long = "log_target", value_name = "PATH")]
    log_target: Vec<String>,

    /// Port of the ControlZ introspection server (istiod's --ctrlz_port, default 9876). Accepted, not
    /// used: meshpilot has no ControlZ.
    #[arg(long = "ctrlz_port", value_name = "PORT")]
    ctrlz_port: Option<u16>,

    /// Address of the ControlZ server (istiod's --ctrlz_address, default localhost). Accepted, not
    /// used.
    #[arg(long = "ctrlz_address", value_name = "ADDR")]
    ctrlz_address: Option<String>,

    /// Verbosity of the Kubernetes client's klog (istiod's --vklog). Accepted, not used.
    #[arg(long = "vklog", value_name = "LEVEL")]
    vklog: Option<i32>,
}

impl NotUsedArgs {
    /// The flags given on the command line (their istiod names, without dashes).
    pub fn given(&self) -> Vec<&'static str> {
        [
            ("clusterRegistriesNamespace", self.cluster_registries_namespace.is_some()),
            ("namespace", self.namespace.is_some()),
            ("cniNamespace", self.cni_namespace.is_some()),
            ("clusterAliases", !self.cluster_aliases.is_empty()),
            ("profile", self.profile.is_some()),
            ("caCertFile", self.ca_cert_file.is_some()),
            ("tlsCertFile", self.tls_cert_file.is_some()),
            ("tlsKeyFile", self.tls_key_file.is_some()),
            ("tls-cipher-suites", !self.tls_cipher_suites.is_empty()),
            ("tls-min-version", self.tls_min_version.is_some()),
            ("kubernetesApiQPS", self.kubernetes_api_qps.is_some()),
            ("kubernetesApiBurst", self.kubernetes_api_burst.is_some()),
            ("log_stacktrace_level", self.log_stacktrace_level.is_some()),
            ("log_caller", self.log_caller.is_some()),
            ("log_target", !self.log_target.is_empty()),
            ("ctrlz_port", self.ctrlz_port.is_some()),
            ("ctrlz_address", self.ctrlz_address.is_some()),
            ("vklog", self.vklog.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(text: &str) -> String {
        LogLevels::parse(text).unwrap().directives(DEFAULT_LOG_LEVEL)
    }

    #[test]
    fn log_output_levels_become_tracing_directives() {
        assert_eq!(filter("default:info"), "info");
        assert_eq!(filter("debug"), "debug");
        assert_eq!(filter(""), "info");
        assert_eq!(filter("fatal"), "error");
        assert_eq!(filter("default:none"), "off");
        assert_eq!(filter("ads:debug,default:warn"), "warn,ads=debug");
        assert_eq!(filter("meshpilot_xds:debug,meshpilot_xds:error"), "info,meshpilot_xds=error");
        // `all` replaces what came before it; what follows still applies.
        assert_eq!(
            filter("meshpilot_xds:debug,default:warn,all:error,meshpilot_kube:debug"),
            "error,meshpilot_kube=debug"
        );
    }

    #[test]
    fn bad_log_output_levels_are_refused_as_istiod_refuses_them() {
        for (text, message) in [
            ("default:loud", "invalid output level 'loud'"),
            ("a:b:info", "invalid output level format 'a:b:info'"),
            ("default:info,", "invalid output level ''"),
            ("INFO", "invalid output level 'INFO'"),
            ("x=y:info", "invalid scope 'x=y'"),
        ] {
            let err = LogLevels::parse(text).unwrap_err();
            assert!(err.contains(message), "{text}: {err}");
        }
    }

    #[test]
    fn keepalive_values_read_as_grpc_go_reads_them() {
        let keepalive = |interval, timeout| {
            let args = KeepaliveArgs { interval, timeout, max_server_connection_age: None };
            let config = args.apply(AdsConfig::default());
            (config.keepalive_interval, config.keepalive_timeout)
        };
        let s = Duration::from_secs;
        assert_eq!(keepalive(s(30), s(10)), (s(30), s(10)));
        assert_eq!(keepalive(Duration::ZERO, Duration::ZERO), (s(7200), s(20)));
        assert_eq!(keepalive(Duration::from_millis(10), s(5)), (s(1), s(5)));
    }

    #[test]
    fn a_connection_age_of_zero_is_no_limit() {
        let age = |age| {
            KeepaliveArgs {
                interval: Duration::ZERO,
                timeout: Duration::ZERO,
                max_server_connection_age: age,
            }
            .max_connection_age()
        };
        assert_eq!(age(None), None);
        assert_eq!(age(Some(Duration::ZERO)), None);
        assert_eq!(age(Some(Duration::from_secs(1800))), Some(Duration::from_secs(1800)));
    }

    #[test]
    fn the_connection_age_reaches_the_ads_config_only_when_given() {
        let config = |age| {
            KeepaliveArgs {
                interval: Duration::from_secs(30),
                timeout: Duration::from_secs(10),
                max_server_connection_age: age,
            }
            .apply(AdsConfig::default())
            .http2_settings()
            .max_connection_age
        };
        assert_eq!(config(None), None);
        assert_eq!(config(Some(Duration::ZERO)), None);
        assert_eq!(
            config(Some(Duration::from_secs(1800))),
            Some(xds::http2::MaxConnectionAge {
                age: Duration::from_secs(1800),
                grace: Duration::from_secs(10)
            })
        );
    }
}
