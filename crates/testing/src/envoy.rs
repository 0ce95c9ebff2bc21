//! A real Envoy driven over ADS: the bootstrap ([`Bootstrap`], [`AdsApi`]) and the process
//! ([`Envoy`]).
//!
//! Envoy is found at `$ENVOY_BIN` or `<repo>/.venv-envoy/bin/envoy` (installed by
//! `scripts/install-envoy.sh`); a missing binary is an error naming the script, never a silent skip.
//! Each [`Envoy`] runs in its own process group with a unique `--base-id`, `--concurrency 1` and
//! `--disable-hot-restart`, and is killed (the whole group) when dropped, also when a test panics.
//! Waits use timeouts well below Envoy's 30 s initial-fetch trap (PEERS.md §1).

use std::{
    net::SocketAddr,
    os::unix::process::CommandExt,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use serde_json::{Value as Json, json};

use crate::{HarnessError, error::io, http::http_get, wait::repo_root, wait_for};

/// The Envoy binary: `$ENVOY_BIN`, else `<repo>/.venv-envoy/bin/envoy`.
///
/// # Errors
/// [`HarnessError::EnvoyMissing`] naming `scripts/install-envoy.sh`.
pub fn envoy_binary() -> Result<PathBuf, HarnessError> {
    let path = std::env::var_os("ENVOY_BIN")
        .map_or_else(|| repo_root().join(".venv-envoy/bin/envoy"), PathBuf::from);
    if path.is_file() { Ok(path) } else { Err(HarnessError::EnvoyMissing { path }) }
}

/// Which ADS variant the Envoy bootstrap uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdsApi {
    /// `api_type: GRPC` (State of the World).
    Sotw,
    /// `api_type: DELTA_GRPC`.
    Delta,
    /// No ADS: CDS and LDS polled over REST-JSON (`api_type: REST`, `refresh_delay` 200 ms) from the
    /// control plane's HTTP port ([`Bootstrap::ads`] is then that port); the node metadata asks for the
    /// same delay on the RDS/EDS sources meshpilot sends (`REST_XDS_REFRESH_DELAY`).
    Rest,
}

/// The `refresh_delay` of [`AdsApi::Rest`] bootstraps.
pub const REST_REFRESH_DELAY: &str = "0.2s";

/// An Envoy bootstrap for ADS against a meshpilot server on loopback.
#[derive(Debug, Clone)]
pub struct Bootstrap {
    /// `node.id`.
    pub node_id: String,
    /// `node.cluster`.
    pub node_cluster: String,
    /// `node.metadata` (Istio's upper-snake keys).
    pub metadata: Json,
    /// The ADS server (for [`AdsApi::Rest`], the control plane's HTTP port).
    pub ads: SocketAddr,
    /// SotW or Delta.
    pub api: AdsApi,
}

impl Bootstrap {
    /// An Istio-style sidecar node (`sidecar~127.0.0.1~<name>.test~test.svc.cluster.local`) talking
    /// `api` to `ads`: [`Bootstrap::sidecar_in`] namespace `test`.
    pub fn sidecar(name: &str, ads: SocketAddr, api: AdsApi) -> Self {
        Self::sidecar_in(name, "test", ads, api)
    }

    /// A sidecar of workload `name` (label `app: <name>`) in `namespace`: node id
    /// `sidecar~127.0.0.1~<name>.<namespace>~<namespace>.svc.cluster.local`, metadata `NAMESPACE`,
    /// `INSTANCE_IPS` 127.0.0.1 and `INTERCEPTION_MODE: NONE` (no iptables: the test talks to the
    /// listeners on loopback).
    pub fn sidecar_in(name: &str, namespace: &str, ads: SocketAddr, api: AdsApi) -> Self {
        Bootstrap {
            node_id: format!("sidecar~127.0.0.1~{name}.{namespace}~{namespace}.svc.cluster.local"),
            node_cluster: format!("{name}.{namespace}"),
            metadata: json!({
                "ISTIO_VERSION": "1.28.0", "NAMESPACE": namespace, "INSTANCE_IPS": "127.0.0.1",
                "CLUSTER_ID": "Kubernetes", "LABELS": {"app": name}, "INTERCEPTION_MODE": "NONE"
            }),
            ads,
            api,
        }
    }

    /// An ingress gateway (Istio's `router` node type, `istio: ingressgateway` in `istio-system`).
    pub fn router(ads: SocketAddr, api: AdsApi) -> Self {
        let mut b = Self::sidecar_in("istio-ingressgateway", "istio-system", ads, api);
        b.node_id =
            "router~127.0.0.1~istio-ingressgateway-1.istio-system~istio-system.svc.cluster.local".to_owned();
        b.metadata["LABELS"] = json!({"istio": "ingressgateway", "app": "istio-ingressgateway"});
        b
    }

    /// The bootstrap as JSON (which `--config-yaml` accepts). HTTP/2 to the xDS cluster (RUST-STACK.md
    /// pitfall 4), `set_node_on_first_message_only` (pitfall 5), admin on an OS-chosen loopback port,
    /// a short ADS retry back-off so reconnects are quick.
    pub fn to_json(&self) -> Json {
        let api_type = match self.api {
            AdsApi::Sotw => "GRPC",
            AdsApi::Delta => "DELTA_GRPC",
            AdsApi::Rest => return self.rest_json(),
        };
        json!({
            "node": {"id": self.node_id, "cluster": self.node_cluster, "metadata": self.metadata},
            "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
            "dynamic_resources": {
                "ads_config": {
                    "api_type": api_type,
                    "transport_api_version": "V3",
                    "set_node_on_first_message_only": true,
                    "grpc_services": [{"envoy_grpc": {
                        "cluster_name": "xds-grpc",
                        "retry_policy": {"retry_back_off": {"base_interval": "0.1s", "max_interval": "0.5s"}}
                    }}]
                },
                "cds_config": {"ads": {}, "resource_api_version": "V3"},
                "lds_config": {"ads": {}, "resource_api_version": "V3"}
            },
            "static_resources": {"clusters": [{
                "name": "xds-grpc",
                "type": "STATIC",
                "connect_timeout": "1s",
                "typed_extension_protocol_options": {
                    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                        "explicit_http_config": {"http2_protocol_options": {}}
                    }
                },
                "load_assignment": {"cluster_name": "xds-grpc", "endpoints": [{"lb_endpoints": [{"endpoint": {
                    "address": {"socket_address": {"address": self.ads.ip().to_string(), "port_value": self.ads.port()}}
                }}]}]}
            }]}
        })
    }
}

impl Bootstrap {
    /// [`AdsApi::Rest`]: CDS and LDS from `api_config_source` REST through the HTTP/1.1 cluster
    /// `xds-grpc` (the name meshpilot falls back to; Envoy sends it as `Host`).
    fn rest_json(&self) -> Json {
        let source = json!({
            "api_config_source": {
                "api_type": "REST", "transport_api_version": "V3", "cluster_names": ["xds-grpc"],
                "refresh_delay": REST_REFRESH_DELAY, "request_timeout": "5s"
            },
            "resource_api_version": "V3"
        });
        let mut metadata = self.metadata.clone();
        metadata["REST_XDS_REFRESH_DELAY"] = json!("200ms");
        json!({
            "node": {"id": self.node_id, "cluster": self.node_cluster, "metadata": metadata},
            "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
            "dynamic_resources": {"cds_config": source, "lds_config": source},
            "static_resources": {"clusters": [{
                "name": "xds-grpc",
                "type": "STATIC",
                "connect_timeout": "1s",
                "load_assignment": {"cluster_name": "xds-grpc", "endpoints": [{"lb_endpoints": [{"endpoint": {
                    "address": {"socket_address": {"address": self.ads.ip().to_string(), "port_value": self.ads.port()}}
                }}]}]}
            }]}
        })
    }
}

/// A unique `--base-id` per Envoy started by this process.
fn next_base_id() -> u32 {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    (std::process::id() % 100_000) * 100 + COUNTER.fetch_add(1, Ordering::Relaxed) % 100
}

/// A running Envoy, killed with its process group when dropped.
pub struct Envoy {
    child: Child,
    /// Envoy's admin address.
    pub admin: SocketAddr,
    dir: PathBuf,
}

impl std::fmt::Debug for Envoy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envoy").field("pid", &self.child.id()).field("admin", &self.admin).finish()
    }
}

impl Envoy {
    /// Starts Envoy with `bootstrap` and waits (≤ 10 s) for its admin endpoint.
    ///
    /// # Errors
    /// [`HarnessError::EnvoyMissing`], [`HarnessError::Io`], or [`HarnessError::Timeout`] with the
    /// log tail.
    pub async fn start(bootstrap: &Bootstrap) -> Result<Envoy, HarnessError> {
        Self::start_json(&bootstrap.to_json()).await
    }

    /// Starts Envoy with the bootstrap `config` (e.g. [`Bootstrap::to_json`] edited by the test: a
    /// second control-plane address in `xds-grpc`) and waits (≤ 10 s) for its admin endpoint.
    ///
    /// # Errors
    /// As [`Envoy::start`].
    pub async fn start_json(config: &Json) -> Result<Envoy, HarnessError> {
        let bin = envoy_binary()?;
        let base_id = next_base_id();
        let dir = std::env::temp_dir().join(format!("meshpilot-envoy-{}-{base_id}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
        let admin_path = dir.join("admin-address");
        let log_path = dir.join("envoy.log");
        let _ = std::fs::remove_file(&admin_path);
        let log = std::fs::File::create(&log_path).map_err(io(format!("create {}", log_path.display())))?;
        let log2 = log.try_clone().map_err(io("clone log file"))?;
        let child = Command::new(&bin)
            .arg("--config-yaml")
            .arg(config.to_string())
            .args(["--concurrency", "1", "--disable-hot-restart", "--base-id"])
            .arg(base_id.to_string())
            .arg("--admin-address-path")
            .arg(&admin_path)
            .args(["--log-level", "warning", "--component-log-level", "config:debug"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0)
            .spawn()
            .map_err(io(format!("spawn {}", bin.display())))?;
        let mut envoy = Envoy { child, admin: SocketAddr::from(([127, 0, 0, 1], 0)), dir };
        let admin = wait_for("Envoy's admin address file", Duration::from_secs(10), async || {
            let text = std::fs::read_to_string(&admin_path).ok()?;
            text.trim().parse::<SocketAddr>().ok()
        })
        .await;
        match admin {
            Ok(a) => envoy.admin = a,
            Err(e) => return Err(envoy.with_log(e)),
        }
        Ok(envoy)
    }

    fn with_log(&self, e: HarnessError) -> HarnessError {
        match e {
            HarnessError::Timeout { what, after, .. } => {
                HarnessError::Timeout { what, after, log_tail: self.log_tail(40) }
            }
            other => other,
        }
    }

    /// The last `lines` lines of Envoy's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("envoy.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The whole log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("envoy.log")).unwrap_or_default()
    }

    /// Envoy's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `GET path` on the admin endpoint: (status, body).
    ///
    /// # Errors
    /// [`HarnessError::Io`] or [`HarnessError::Http`].
    pub async fn admin_get(&self, path: &str) -> Result<(u16, String), HarnessError> {
        http_get(self.admin, path, &[]).await
    }

    /// Waits until `/ready` says `LIVE` (Envoy got CDS and LDS, or gave up waiting for them).
    ///
    /// # Errors
    /// [`HarnessError::Timeout`] with the log tail.
    pub async fn wait_live(&self, timeout: Duration) -> Result<(), HarnessError> {
        wait_for("Envoy /ready to be LIVE", timeout, async || {
            let (status, body) = self.admin_get("/ready").await.ok()?;
            (status == 200 && body.trim() == "LIVE").then_some(())
        })
        .await
        .map_err(|e| self.with_log(e))
    }

    /// The counter or gauge `name` from `/stats` (`None` if absent).
    ///
    /// # Errors
    /// [`HarnessError::Io`] or [`HarnessError::Http`].
    pub async fn stat(&self, name: &str) -> Result<Option<u64>, HarnessError> {
        let (_, body) = self.admin_get(&format!("/stats?filter=^{}$", escape_regex(name))).await?;
        Ok(body.lines().find_map(|l| {
            let (k, v) = l.split_once(": ")?;
            (k == name).then(|| v.trim().parse().ok()).flatten()
        }))
    }

    /// Every `update_rejected` counter of this Envoy, with its stat name: the xDS updates it rejected,
    /// per subscription (`cluster_manager.cds.…`, `listener_manager.lds.…`,
    /// `http.<prefix>.rds.<route configuration>.…`, EDS and ECDS ones).
    ///
    /// # Errors
    /// The admin request's.
    pub async fn rejected_updates(&self) -> Result<Vec<(String, u64)>, HarnessError> {
        let (_, body) = self.admin_get("/stats?filter=update_rejected$").await?;
        Ok(body
            .lines()
            .filter_map(|l| {
                let (name, value) = l.split_once(": ")?;
                Some((name.to_string(), value.trim().parse().ok()?))
            })
            .collect())
    }

    /// Panics, with the counters and the log tail, when Envoy rejected any xDS update
    /// ([`Envoy::rejected_updates`]), or when its LDS counter is missing (then the counters read are
    /// not Envoy's xDS ones and zeros would prove nothing).
    pub async fn assert_no_rejected_updates(&self) {
        let counters = self.rejected_updates().await.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            counters.iter().any(|(name, _)| name == "listener_manager.lds.update_rejected"),
            "no listener_manager.lds.update_rejected among {counters:?}"
        );
        let rejected: Vec<_> = counters.iter().filter(|(_, n)| *n > 0).collect();
        assert!(rejected.is_empty(), "Envoy rejected updates: {rejected:?}\n{}", self.log_tail(40));
    }

    /// Waits until stat `name` reaches at least `min`; returns its value.
    ///
    /// # Errors
    /// [`HarnessError::Timeout`] with the log tail.
    pub async fn wait_stat(&self, name: &str, min: u64, timeout: Duration) -> Result<u64, HarnessError> {
        wait_for(&format!("Envoy stat {name} >= {min}"), timeout, async || {
            self.stat(name).await.ok().flatten().filter(|v| *v >= min)
        })
        .await
        .map_err(|e| self.with_log(e))
    }

    /// `/config_dump` as JSON (`include_eds` when `eds`).
    ///
    /// # Errors
    /// [`HarnessError::Io`] or [`HarnessError::Http`].
    pub async fn config_dump(&self, eds: bool) -> Result<Json, HarnessError> {
        let (_, body) = self.admin_get(if eds { "/config_dump?include_eds" } else { "/config_dump" }).await?;
        serde_json::from_str(&body)
            .map_err(|e| HarnessError::Http { addr: self.admin, detail: e.to_string() })
    }

    fn kill(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // The group was created by process_group(0): its id is Envoy's pid.
            let _ =
                nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        self.kill();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn escape_regex(s: &str) -> String {
    s.chars().fold(String::new(), |mut out, c| {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

/// Decodes `%XX` escapes: Envoy logs a stream's `grpc-message` percent-encoded as on the wire
/// (gRPC's encoding), e.g. `closed: 3, invalid%20node%20id`.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_has_http2_and_node_on_first_message_only() {
        let b = Bootstrap::sidecar("app", "127.0.0.1:15010".parse().unwrap(), AdsApi::Delta).to_json();
        assert_eq!(b["dynamic_resources"]["ads_config"]["api_type"], "DELTA_GRPC");
        assert_eq!(b["dynamic_resources"]["ads_config"]["set_node_on_first_message_only"], true);
        let opts = &b["static_resources"]["clusters"][0]["typed_extension_protocol_options"];
        assert!(opts.to_string().contains("http2_protocol_options"));
        assert_eq!(b["node"]["id"], "sidecar~127.0.0.1~app.test~test.svc.cluster.local");
    }

    #[test]
    fn sidecars_and_routers_name_their_namespace() {
        let ads: SocketAddr = "127.0.0.1:15010".parse().unwrap();
        let s = Bootstrap::sidecar_in("productpage", "default", ads, AdsApi::Sotw);
        assert_eq!(s.node_id, "sidecar~127.0.0.1~productpage.default~default.svc.cluster.local");
        assert_eq!(s.metadata["NAMESPACE"], "default");
        assert_eq!(s.metadata["LABELS"]["app"], "productpage");
        let r = Bootstrap::router(ads, AdsApi::Sotw);
        assert!(
            r.node_id.starts_with("router~127.0.0.1~istio-ingressgateway-1.istio-system~"),
            "{}",
            r.node_id
        );
        assert_eq!(r.metadata["NAMESPACE"], "istio-system");
        assert_eq!(r.metadata["LABELS"]["istio"], "ingressgateway");
    }

    #[test]
    fn missing_envoy_names_the_install_script() {
        let e = HarnessError::EnvoyMissing { path: "/nope/envoy".into() };
        assert!(e.to_string().contains("scripts/install-envoy.sh"));
    }

    #[test]
    fn grpc_messages_are_percent_decoded() {
        assert_eq!(percent_decode("closed: 3, invalid%20node%20id%3A x"), "closed: 3, invalid node id: x");
        assert_eq!(percent_decode("100% %zz %4"), "100% %zz %4", "not an escape: kept");
    }

    #[test]
    fn regex_metacharacters_are_escaped() {
        assert_eq!(escape_regex("cluster.a+b"), "cluster\\.a\\+b");
    }
}
