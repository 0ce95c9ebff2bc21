//! The cached real Istio binaries of the peer tests (`scripts/istio-peer.sh build`): istiod for
//! `mcp_istiod.rs`, `conformance.rs`, `istiod_beside.rs` and `inject_istiod.rs`, istioctl for
//! `kube_inject_istioctl.rs`, helm for `chart_install.rs`; and the comparison of meshpilot's output with theirs as data.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use meshpilot_testing::{free_port_block, repo_root};
use serde_json::Value;

/// `pilot-discovery` in `scripts/istio-peer.sh bin-dir`.
///
/// # Panics
/// When the script fails or the binary is missing: the message names `scripts/istio-peer.sh build` (the
/// tests need real istiod; they never skip).
pub fn pilot_discovery() -> PathBuf {
    binary("pilot-discovery")
}

/// `pilot-agent` in `scripts/istio-peer.sh bin-dir` (panics as [`pilot_discovery`]).
pub fn pilot_agent() -> PathBuf {
    binary("pilot-agent")
}

/// The pinned version's Envoy bootstrap template (`scripts/istio-peer.sh template`), which Istio's
/// `proxyv2` image has at `/var/lib/istio/envoy/envoy_bootstrap_tmpl.json`.
pub fn bootstrap_template() -> PathBuf {
    let template = PathBuf::from(script("template"));
    assert!(
        template.is_file(),
        "no bootstrap template at {} — `scripts/istio-peer.sh build`",
        template.display()
    );
    template
}

/// `istioctl` in `scripts/istio-peer.sh bin-dir` (panics as [`pilot_discovery`]).
pub fn istioctl() -> PathBuf {
    binary("istioctl")
}

/// The pinned helm (`scripts/istio-peer.sh helm-path`), which renders Istio's charts (panics as
/// [`pilot_discovery`]).
pub fn helm() -> PathBuf {
    let helm = PathBuf::from(script("helm-path"));
    assert!(helm.is_file(), "no helm at {} — build it with `scripts/istio-peer.sh build`", helm.display());
    helm
}

/// The istio.io/istio module of the pinned version (`scripts/istio-peer.sh module-dir`): Istio's own
/// test inputs and charts.
pub fn module_dir() -> PathBuf {
    PathBuf::from(script("module-dir"))
}

fn script(command: &str) -> String {
    let out = Command::new(repo_root().join("scripts/istio-peer.sh")).arg(command).output().unwrap();
    assert!(
        out.status.success(),
        "scripts/istio-peer.sh {command} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn binary(name: &str) -> PathBuf {
    let bin = PathBuf::from(script("bin-dir")).join(name);
    assert!(
        bin.is_file(),
        "no {name} at {} — build it with `scripts/istio-peer.sh build` (this test needs the real one)",
        bin.display()
    );
    bin
}

/// Real istiod on loopback against a test API server (`scripts/peer/run-istiod.sh`, which documents
/// its ports: a block of 81 from [`Istiod::base`]); stopped on drop.
pub struct Istiod {
    dir: PathBuf,
    /// The first port of its block (`base + 10` plaintext xDS, `+ 80` HTTP debug, …).
    pub base: u16,
}

impl Istiod {
    /// Starts istiod in `dir` (its working directory: `./var/lib/istio/inject` is read there) against
    /// the API server of `kubeconfig`, with `args` added to its command line (`ISTIOD_ARGS`) and
    /// `POD_NAME=istiod-0`.
    ///
    /// # Panics
    /// When istiod does not start: the message carries its log.
    ///
    /// `{base}` in `args` stands for [`Istiod::base`].
    pub fn start(dir: &Path, kubeconfig: &Path, args: &str) -> Istiod {
        Istiod::start_with_env(dir, kubeconfig, args, &[])
    }

    /// [`Istiod::start`] with `env` added to istiod's environment.
    pub fn start_with_env(dir: &Path, kubeconfig: &Path, args: &str, env: &[(&str, &str)]) -> Istiod {
        pilot_discovery();
        let base = free_port_block(81);
        let out = Command::new(repo_root().join("scripts/peer/run-istiod.sh"))
            .env("POD_NAME", "istiod-0")
            .env("ISTIOD_ARGS", args.replace("{base}", &base.to_string()))
            .envs(env.iter().copied())
            .arg("start")
            .arg(dir)
            .arg(kubeconfig)
            .arg(base.to_string())
            .output()
            .unwrap();
        let istiod = Istiod { dir: dir.to_path_buf(), base };
        assert!(
            out.status.success(),
            "istiod did not start: {}\n--- istiod log ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            istiod.log()
        );
        istiod
    }

    /// Its log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("istiod.log")
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Its plaintext xDS address (Istio's 15010).
    pub fn xds(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.base + 10).into()
    }

    /// Stops it (also done on drop).
    pub fn stop(&self) {
        let _ =
            Command::new(repo_root().join("scripts/peer/run-istiod.sh")).arg("stop").arg(&self.dir).output();
    }
}

impl Drop for Istiod {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `value` without nulls and empty maps and lists, recursively (`None` when nothing is left): Go's
/// typed round trip writes some of them, `omitempty` drops others, so outputs are compared after it.
pub fn normalize(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Object(map) => {
            let map: serde_json::Map<String, Value> =
                map.into_iter().filter_map(|(k, v)| normalize(v).map(|v| (k, v))).collect();
            (!map.is_empty()).then_some(Value::Object(map))
        }
        Value::Array(items) => {
            let items: Vec<Value> = items.into_iter().filter_map(normalize).collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        other => Some(other),
    }
}

/// The first path where meshpilot's value `ours` and Istio's `theirs` differ, with both values (for a
/// failure message); `None` when equal.
pub fn first_difference(ours: &Value, theirs: &Value, path: String) -> Option<String> {
    match (ours, theirs) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let p = format!("{path}.{key}");
                match (x.get(key), y.get(key)) {
                    (Some(v), Some(w)) => {
                        if let Some(d) = first_difference(v, w, p) {
                            return Some(d);
                        }
                    }
                    (v, w) => return Some(format!("{p}: meshpilot {v:?}, Istio {w:?}")),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (v, w))| first_difference(v, w, format!("{path}[{i}]")))
        }
        _ if ours == theirs => None,
        _ => Some(format!("{path}: meshpilot {ours}, Istio {theirs}")),
    }
}

/// Files of Istio's injection test data (`pkg/kube/inject/testdata/inject` of the pinned module) that
/// are inputs — not the settings (`.iop`, `.mesh`, `.values`, `.config`) of other inputs — sorted.
///
/// # Panics
/// When fewer than 80 are found (the module is not where `scripts/istio-peer.sh` says).
pub fn injection_inputs() -> Vec<PathBuf> {
    let dir = module_dir().join("pkg/kube/inject/testdata/inject");
    let settings = [".iop.yaml", ".mesh.yaml", ".values.yaml", ".config.yaml"];
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".yaml") && !settings.iter().any(|s| name.ends_with(s))
        })
        .collect();
    inputs.sort();
    assert!(inputs.len() > 80, "Istio's injection inputs in {}", dir.display());
    inputs
}

/// Asserts that the inputs on which meshpilot differs from `peer` (`differences`: input → first
/// difference) are exactly the `known` ones (input, reason): a new difference fails, and so does a
/// known one that now agrees, so that the list stays true. `total` is the number of inputs compared.
pub fn assert_known_differences(
    peer: &str,
    differences: &std::collections::BTreeMap<String, String>,
    known: &[(&str, &str)],
    total: usize,
) {
    let unexpected: Vec<String> = differences
        .iter()
        .filter(|(name, _)| !known.iter().any(|(k, _)| k == name))
        .map(|(name, d)| format!("{name}: {d}"))
        .collect();
    let agreeing: Vec<&str> =
        known.iter().map(|(k, _)| *k).filter(|name| !differences.contains_key(*name)).collect();
    assert!(
        unexpected.is_empty(),
        "{} of {total} inputs differ from {peer}:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    assert!(agreeing.is_empty(), "now equal to {peer}, remove from the known differences: {agreeing:?}");
}
