//! The environment of `meshpilot discovery`, read once at start into [`DiscoveryEnv`].
//!
//! Istio configures pilot-discovery through environment variables as well as flags (`pkg/env`
//! registrations in `pilot/pkg/features`); meshpilot reads the same names with the same defaults.
//! The process environment is read in one place — [`Environment::from_process`], called once by the
//! command — and parsed into typed settings here; no library crate reads a variable (each offers a
//! `from_lookup` over a snapshot, which its tests call with a map). A bad value stops the start with a
//! message naming the variable, its value and what is accepted, even when the feature it tunes is off.
//!
//! Variables read here besides the groups parsed by their crates (the debounce, ADS, security and JWKS
//! tables in `discovery::options`, leader election in `kube_source::leader`, status in
//! `crate::config_status`):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | [`POD_NAME`] | the host name | the control plane's name in `proxy-status`, its MCP node and its leader-election identity |
//! | [`POD_NAMESPACE`] | `istio-system` | the control plane's namespace (webhook certificate names, MCP node) |
//! | `INSTANCE_IP` (read by `mcp::NodeIdentity::from_lookup`) | the connection's local address | the IP in the MCP client's node id |
//! | [`HOSTNAME`] | — | the host name when `/proc/sys/kernel/hostname` cannot be read |
//! | [`K8S_INGRESS_NS`] | mesh `ingressControllerMode`'s namespace | namespace of the ingress gateway Service whose address Ingress status carries |
//! | [`PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER`] | `true` | deploy Gateway API gateways (Istio's automated deployment) |
//! | [`PILOT_ENABLE_GATEWAY_API_STATUS`] | `true` | write Gateway API status |
//! | [`PILOT_ENABLE_IP_AUTOALLOCATE`] | `true` | ServiceEntry VIP auto-allocation (status in a cluster, memory without) |
//! | [`ENABLE_TLS_ON_SIDECAR_INGRESS`] | `false` | Sidecar `ingress[].tls` terminates TLS on its inbound port (docs/TRAFFIC.md) |
//! | [`PILOT_REMOTE_CLUSTER_TIMEOUT`] | `30s` | how long readiness waits for a remote cluster's first sync (docs/MULTICLUSTER.md) |
//! | `PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS` (read by `kube_source::remote_kubeconfig::InsecureKubeconfigOptions::from_lookup`) | — | what remote kubeconfigs may use besides embedded data (`exec`, `tokenFile`, …; docs/SECURITY.md) |
//! | `PILOT_TRACE_SAMPLING` (read by `discovery::trace_sampling_from_lookup`) | `1.0` | the trace sampling percentage when neither Telemetry nor the proxy config sets one (docs/TELEMETRY.md) |
//! | `KUBECONFIG`, `KUBERNETES_SERVICE_HOST`, `KUBERNETES_SERVICE_PORT` (read by `kube_source::AccessEnv::from_lookup`) | — | the cluster access (`kube_source::resolve_access`) |

use std::{collections::BTreeMap, time::Duration};

use discovery::{
    AdsOptions, DebounceOptions, SecurityOptions,
    options::{EnvError, jwks_options_from_lookup},
};
use jwks::JwksOptions;
use kube_source::leader::LeaderElectionOptions;

use crate::config_status::StatusOptions;

/// `POD_NAME`: the pod running the control plane (Kubernetes' downward API).
pub const POD_NAME: &str = "POD_NAME";
/// `POD_NAMESPACE`: the control plane's namespace.
pub const POD_NAMESPACE: &str = "POD_NAMESPACE";
/// `HOSTNAME`: the host name, when the kernel's cannot be read.
pub const HOSTNAME: &str = "HOSTNAME";
/// `K8S_INGRESS_NS`: the ingress gateway Service's namespace (istiod's Ingress status).
pub const K8S_INGRESS_NS: &str = "K8S_INGRESS_NS";
/// `PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER` (default true).
pub const PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER: &str =
    "PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER";
/// `PILOT_ENABLE_IP_AUTOALLOCATE` (default true): ServiceEntry VIP auto-allocation (docs/DNS.md).
pub const PILOT_ENABLE_IP_AUTOALLOCATE: &str = "PILOT_ENABLE_IP_AUTOALLOCATE";
/// `ENABLE_TLS_ON_SIDECAR_INGRESS` (default false, istiod's experimental feature): Sidecar
/// `ingress[].tls` terminates TLS on its inbound port (docs/TRAFFIC.md).
pub const ENABLE_TLS_ON_SIDECAR_INGRESS: &str = "ENABLE_TLS_ON_SIDECAR_INGRESS";
/// `PILOT_ENABLE_GATEWAY_API_STATUS` (default true).
pub const PILOT_ENABLE_GATEWAY_API_STATUS: &str = "PILOT_ENABLE_GATEWAY_API_STATUS";
/// `PILOT_REMOTE_CLUSTER_TIMEOUT` (Go duration, default `30s`; `0s` waits for ever): after it,
/// readiness no longer waits for remote clusters that have not synced (docs/MULTICLUSTER.md).
pub const PILOT_REMOTE_CLUSTER_TIMEOUT: &str = "PILOT_REMOTE_CLUSTER_TIMEOUT";
/// Serve sidecar injection (`/inject`) when an injection config is found (istiod's default: true).
pub const INJECT_ENABLED: &str = "INJECT_ENABLED";
/// Whether injected proxies are native sidecars: `true`, `false` or `auto` (istiod's default).
pub const ENABLE_NATIVE_SIDECARS: &str = "ENABLE_NATIVE_SIDECARS";

/// A snapshot of environment variables (name → value; variables that are not UTF-8 are left out,
/// as unset).
#[derive(Clone, Debug, Default)]
pub struct Environment {
    vars: BTreeMap<String, String>,
}

impl Environment {
    /// The process environment, now. Call once per command.
    pub fn from_process() -> Environment {
        let vars =
            std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        Environment { vars: vars.collect() }
    }

    /// The variables of `pairs` (tests).
    #[cfg(test)]
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Environment {
        Environment { vars: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
    }

    /// The value of `name`, as set (possibly empty).
    pub fn get(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }

    /// The value of `name` unless unset or empty (Istio's `env.Register` treats empty as unset).
    pub fn non_empty(&self, name: &str) -> Option<String> {
        self.vars.get(name).filter(|v| !v.trim().is_empty()).cloned()
    }

    /// A boolean as Go's `strconv.ParseBool` reads it (Istio's `env.Register`), `default` when unset
    /// or empty.
    ///
    /// # Errors
    /// Any other value, naming the variable.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.vars.get(name).map(String::as_str) {
            None | Some("") => Ok(default),
            Some(value) => validation::common::parse_go_bool(value)
                .ok_or_else(|| format!("{name}={value:?}: expected true or false")),
        }
    }

    /// Go duration `name` (`30s`, `1m30s`), `default` when unset or empty.
    ///
    /// # Errors
    /// Not a Go duration: the name, value and why.
    pub fn duration(&self, name: &str, default: Duration) -> Result<Duration, String> {
        match self.vars.get(name).map(String::as_str) {
            None | Some("") => Ok(default),
            Some(value) => validation::common::parse_go_duration(value)
                .map_err(|reason| format!("{name}={value:?}: {reason}")),
        }
    }
}

/// Every setting `meshpilot discovery` takes from the environment, parsed once at start.
#[derive(Debug, Clone)]
pub struct DiscoveryEnv {
    /// The push pipeline's tuning (`PILOT_DEBOUNCE_*`, `PILOT_PUSH_THROTTLE`, …).
    pub debounce: DebounceOptions,
    /// Authentication and certificate settings (`XDS_AUTH`, `TOKEN_AUDIENCES`, …).
    pub security: SecurityOptions,
    /// Admission and slow-client limits of the ADS ports.
    pub ads: AdsOptions,
    /// The JWKS resolver (`PILOT_JWT_*`); a bad value is logged and Istio's defaults used, as before
    /// this was read here.
    pub jwks: JwksOptions,
    /// Leader election (`POD_NAMESPACE`, `POD_NAME`, `REVISION`, `PILOT_ENABLE_LEADER_ELECTION`).
    pub leader: LeaderElectionOptions,
    /// Config status and analysis (`PILOT_ENABLE_STATUS`, `PILOT_ENABLE_ANALYSIS`, …).
    pub status: StatusOptions,
    /// The node the MCP client presents (`POD_NAME`, `POD_NAMESPACE`, `INSTANCE_IP`).
    pub mcp_node: mcp::NodeIdentity,
    /// The control plane's name in `proxy-status` (`meshpilot_http::proxystatus::control_plane_id`).
    pub control_plane_id: String,
    /// `POD_NAMESPACE`, else `istio-system`.
    pub pod_namespace: String,
    /// `K8S_INGRESS_NS`.
    pub ingress_namespace: Option<String>,
    /// `PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER`.
    pub gateway_deployment_controller: bool,
    /// `PILOT_ENABLE_GATEWAY_API_STATUS`.
    pub gateway_status: bool,
    /// `PILOT_ENABLE_IP_AUTOALLOCATE`.
    pub ip_autoallocate: bool,
    /// `PILOT_TRACE_SAMPLING` (`discovery::trace_sampling_from_lookup`; a bad value is logged and
    /// 1.0 used, as istiod).
    pub trace_sampling: f64,
    /// `ENABLE_TLS_ON_SIDECAR_INGRESS`.
    pub tls_on_sidecar_ingress: bool,
    /// `INJECT_ENABLED`.
    pub inject_enabled: bool,
    /// `ENABLE_NATIVE_SIDECARS`.
    pub native_sidecars: inject::injector::NativeSidecars,
    /// What decides the cluster access besides `--kubeconfig` (`KUBECONFIG`, `KUBERNETES_SERVICE_*`).
    pub cluster_access: kube_source::AccessEnv,
    /// [`PILOT_REMOTE_CLUSTER_TIMEOUT`]: how long readiness waits for a remote cluster (zero: for ever).
    pub remote_cluster_timeout: Duration,
    /// `PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS`: what remote kubeconfigs may use besides
    /// embedded data (docs/SECURITY.md, "Remote kubeconfigs").
    pub insecure_kubeconfig_options: kube_source::remote_kubeconfig::InsecureKubeconfigOptions,
}

impl DiscoveryEnv {
    /// Parses `env`.
    ///
    /// # Errors
    /// The first bad variable: its name, value and what is accepted.
    pub fn parse(env: &Environment) -> Result<DiscoveryEnv, String> {
        let lookup = |k: &str| env.get(k);
        let text = |e: EnvError| e.to_string();
        let jwks = jwks_options_from_lookup(lookup).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "JWKS resolver settings ignored; using Istio's defaults");
            JwksOptions::default()
        });
        let (trace_sampling, warning) = discovery::trace_sampling_from_lookup(lookup);
        if let Some(w) = warning {
            tracing::warn!("{w}");
        }
        Ok(DiscoveryEnv {
            trace_sampling,
            debounce: DebounceOptions::from_lookup(lookup).map_err(text)?,
            security: SecurityOptions::from_lookup(lookup).map_err(text)?,
            ads: AdsOptions::from_lookup(lookup).map_err(text)?,
            jwks,
            leader: LeaderElectionOptions::from_lookup(lookup)?,
            status: StatusOptions::from_lookup(lookup)?,
            mcp_node: mcp::NodeIdentity::from_lookup(lookup),
            control_plane_id: meshpilot_http::proxystatus::control_plane_id(
                env.non_empty(POD_NAME).as_deref(),
                env.get(HOSTNAME).as_deref(),
            ),
            pod_namespace: env.non_empty(POD_NAMESPACE).unwrap_or_else(|| "istio-system".into()),
            ingress_namespace: env.non_empty(K8S_INGRESS_NS),
            gateway_deployment_controller: env.bool(PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER, true)?,
            gateway_status: env.bool(PILOT_ENABLE_GATEWAY_API_STATUS, true)?,
            ip_autoallocate: env.bool(PILOT_ENABLE_IP_AUTOALLOCATE, true)?,
            tls_on_sidecar_ingress: env.bool(ENABLE_TLS_ON_SIDECAR_INGRESS, false)?,
            inject_enabled: env.bool(INJECT_ENABLED, true)?,
            native_sidecars: inject::injector::NativeSidecars::from_env_value(
                env.get(ENABLE_NATIVE_SIDECARS).as_deref(),
            ),
            cluster_access: kube_source::AccessEnv::from_lookup(lookup),
            insecure_kubeconfig_options:
                kube_source::remote_kubeconfig::InsecureKubeconfigOptions::from_lookup(lookup),
            remote_cluster_timeout: env.duration(
                PILOT_REMOTE_CLUSTER_TIMEOUT,
                kube_source::multicluster::DEFAULT_REMOTE_CLUSTER_TIMEOUT,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_istios() {
        let env = DiscoveryEnv::parse(&Environment::default()).unwrap();
        assert_eq!(env.pod_namespace, "istio-system");
        assert_eq!(env.mcp_node.pod_name, "test-1");
        assert_eq!(env.mcp_node.pod_namespace, "istio-system");
        assert!(env.gateway_deployment_controller && env.gateway_status);
        assert!(env.leader.enabled);
        assert_eq!(env.ingress_namespace, None);
        assert!(env.control_plane_id.starts_with("meshpilot"), "{}", env.control_plane_id);
        assert!(!env.tls_on_sidecar_ingress);
    }

    #[test]
    fn one_snapshot_feeds_every_group() {
        let env = Environment::from_pairs(&[
            (POD_NAME, "istiod-7d4b9"),
            (POD_NAMESPACE, "mesh-system"),
            ("INSTANCE_IP", "10.1.2.3"),
            (K8S_INGRESS_NS, "ingress"),
            ("PILOT_DEBOUNCE_AFTER", "250ms"),
            ("PILOT_ENABLE_GATEWAY_API_STATUS", "false"),
            (ENABLE_TLS_ON_SIDECAR_INGRESS, "true"),
        ]);
        let env = DiscoveryEnv::parse(&env).unwrap();
        assert_eq!(env.control_plane_id, "istiod-7d4b9");
        assert_eq!(env.leader.identity, "istiod-7d4b9");
        assert_eq!(env.leader.namespace, "mesh-system");
        assert_eq!(env.security.pod_namespace, "mesh-system");
        assert_eq!(env.pod_namespace, "mesh-system");
        assert_eq!(
            env.mcp_node.node_id("10.1.2.3"),
            "sidecar~10.1.2.3~istiod-7d4b9.mesh-system~mesh-system.svc.cluster.local"
        );
        assert_eq!(env.mcp_node.ip.as_deref(), Some("10.1.2.3"));
        assert_eq!(env.ingress_namespace.as_deref(), Some("ingress"));
        assert_eq!(env.debounce.after, std::time::Duration::from_millis(250));
        assert!(!env.gateway_status && env.gateway_deployment_controller);
        assert!(env.tls_on_sidecar_ingress);
    }

    #[test]
    fn the_remote_cluster_timeout_is_a_go_duration_defaulting_to_istiods() {
        let timeout = |pairs: &[(&str, &str)]| {
            DiscoveryEnv::parse(&Environment::from_pairs(pairs)).unwrap().remote_cluster_timeout
        };
        assert_eq!(timeout(&[]), Duration::from_secs(30));
        assert_eq!(timeout(&[(PILOT_REMOTE_CLUSTER_TIMEOUT, "1m30s")]), Duration::from_secs(90));
        assert_eq!(timeout(&[(PILOT_REMOTE_CLUSTER_TIMEOUT, "0s")]), Duration::ZERO);
    }

    #[test]
    fn a_bad_value_is_named() {
        for (name, value) in [
            ("PILOT_DEBOUNCE_MAX", "soon"),
            ("XDS_AUTH", "maybe"),
            ("PILOT_MAX_REQUESTS_PER_SECOND", "lots"),
            ("PILOT_ENABLE_LEADER_ELECTION", "perhaps"),
            (PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER, "yes"),
            (PILOT_REMOTE_CLUSTER_TIMEOUT, "30"),
        ] {
            let err = DiscoveryEnv::parse(&Environment::from_pairs(&[(name, value)])).unwrap_err();
            assert!(err.contains(name) && err.contains(value), "{name}: {err}");
        }
    }

    #[test]
    fn a_bad_jwks_setting_falls_back_to_istios_defaults() {
        let env = Environment::from_pairs(&[("PILOT_JWT_ENABLE_REMOTE_JWKS", "envoy")]);
        assert_eq!(DiscoveryEnv::parse(&env).unwrap().jwks, JwksOptions::default());
    }
}
