//! The cached real istiod of the istiod tests (`scripts/istio-peer.sh build`), shared by `mcp_istiod.rs` and
//! `conformance.rs`.

use std::{path::PathBuf, process::Command};

use meshpilot_testing::repo_root;

/// `pilot-discovery` in `scripts/istio-peer.sh bin-dir`.
///
/// # Panics
/// When the script fails or the binary is missing: the message names `scripts/istio-peer.sh build` (the
/// tests need real istiod; they never skip).
pub fn pilot_discovery() -> PathBuf {
    let out = Command::new(repo_root().join("scripts/istio-peer.sh")).arg("bin-dir").output().unwrap();
    assert!(
        out.status.success(),
        "scripts/istio-peer.sh bin-dir failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("pilot-discovery");
    assert!(
        bin.is_file(),
        "no istiod at {} — build it with `scripts/istio-peer.sh build` (this test needs real istiod)",
        bin.display()
    );
    bin
}
