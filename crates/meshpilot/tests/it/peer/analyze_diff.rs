//! `meshpilot analyze` and `meshpilot validate` against the real istioctl of the pinned Istio version
//! (`scripts/istio-peer.sh build`) on a fixed subset of Istio's own inputs: the differential harness
//! `scripts/analyze-diff.py --subset` (its `SUBSET`: about 30 analyzer, validation, sample and test files
//! of the pinned module, one or more per analyzer family). Per file it compares the exit status and the
//! (code, origin) set of `analyze --use-kube=false -A -o json`, and the verdict and the set of objects
//! with errors of `validate -f`. The whole corpus is `scripts/analyze-diff.py` without `--subset`; its
//! numbers and remaining differences are in docs/ANALYZE.md.
//!
//! As the other istioctl peer tests, this one fails (never skips) when istioctl is not built.

use std::process::Command;

use meshpilot_testing::repo_root;

use crate::istio_peer;

#[test]
fn analyze_and_validate_agree_with_istioctl_on_the_ci_subset() {
    let istioctl = istio_peer::istioctl();
    let module = istio_peer::module_dir();
    let out = Command::new("python3")
        .arg(repo_root().join("scripts/analyze-diff.py"))
        .arg("--subset")
        .arg("--meshpilot")
        .arg(env!("CARGO_BIN_EXE_meshpilot"))
        .arg("--istioctl")
        .arg(&istioctl)
        .arg("--module")
        .arg(&module)
        .output()
        .expect("running python3 scripts/analyze-diff.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary = stdout.lines().last().unwrap_or_default();
    // The harness read the subset: a summary with every file agreeing.
    assert!(summary.starts_with("files: "), "no summary from the harness:\n{stdout}\n{stderr}");
    assert!(
        out.status.success() && summary.ends_with("differing: 0"),
        "meshpilot differs from istioctl ({summary}):\n{stdout}\n{stderr}"
    );
    let files: usize = summary.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(files >= 25, "the subset is about 30 files, the harness read {files}: {summary}");
}
