//! The cached real Istio binaries of the peer tests (`scripts/istio-peer.sh build`): istiod for
//! `mcp_istiod.rs` and `conformance.rs`, istioctl for `kube_inject_istioctl.rs`.

use std::{path::PathBuf, process::Command};

use meshpilot_testing::repo_root;

/// `pilot-discovery` in `scripts/istio-peer.sh bin-dir`.
///
/// # Panics
/// When the script fails or the binary is missing: the message names `scripts/istio-peer.sh build` (the
/// tests need real istiod; they never skip).
pub fn pilot_discovery() -> PathBuf {
    binary("pilot-discovery")
}

/// `istioctl` in `scripts/istio-peer.sh bin-dir` (panics as [`pilot_discovery`]).
pub fn istioctl() -> PathBuf {
    binary("istioctl")
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
