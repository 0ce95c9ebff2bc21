//! Smoke run of the `xds-load` binary against the real `meshpilot discovery` (spawned by the tool
//! itself with `--meshpilot`): 10 sidecars of a generated mesh connect, become ready, and converge on
//! marker changes (the VirtualService change reaches the 6 sidecars of ns-0 only, which import it);
//! the control plane's RSS is sampled. Sizes are tiny: this proves the tool works
//! against the real server, it measures nothing.
//!
//! The meshpilot binary is `$MESHPILOT_BIN`, else `meshpilot` beside this package's binary in the
//! target directory (`cargo test --workspace` builds it; alone: `cargo build -p meshpilot`).

use std::{path::PathBuf, process::Command};

use serde_json::Value;

fn meshpilot() -> PathBuf {
    if let Some(p) = std::env::var_os("MESHPILOT_BIN") {
        return PathBuf::from(p);
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_xds-load")).with_file_name("meshpilot");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p meshpilot` (or set MESHPILOT_BIN)",
        bin.display()
    );
    bin
}

fn xds_load(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xds-load")).args(args).output().expect("xds-load runs")
}

fn run(dir: &std::path::Path, protocol: &str, change: &str, extra: &[&str]) -> Value {
    let json = dir.join(format!("{protocol}-{change}.json"));
    let (bin, config) = (meshpilot(), dir.join("config"));
    let log = dir.join(format!("meshpilot-{protocol}-{change}.log"));
    let mut args = vec![
        "run",
        "--config-dir",
        config.to_str().unwrap(),
        "--meshpilot",
        bin.to_str().unwrap(),
        "--meshpilot-log",
        log.to_str().unwrap(),
        "--proxies",
        "10",
        "--protocol",
        protocol,
        "--change",
        change,
        "--changes",
        "2",
        "--settle",
        "500ms",
        "--hold",
        "200ms",
        "--sample-interval",
        "100ms",
        "--ready-timeout",
        "30s",
        "--change-timeout",
        "10s",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = xds_load(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "xds-load failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("convergence"), "{stdout}");
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

fn generate(dir: &std::path::Path) {
    let config = dir.join("config");
    let out = xds_load(&[
        "gen",
        "--out",
        config.to_str().unwrap(),
        "--services",
        "5",
        "--namespaces",
        "2",
        "--workloads",
        "10",
        "--sidecar-scope",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn ten_sidecars_converge_on_meshpilot() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path());
    for (protocol, change, affected) in
        [("sotw", "workload-entry", 10), ("delta", "service-entry", 10), ("sotw", "virtual-service", 6)]
    {
        let s = run(dir.path(), protocol, change, &[]);
        let what = format!("{protocol}/{change}: {s:#}");
        assert_eq!((s["streams"].as_u64(), s["ready"].as_u64()), (Some(10), Some(10)), "{what}");
        assert_eq!(s["not_converged"], 0, "{what}");
        assert_eq!(s["streams_with_errors"], 0, "{what}");
        for c in s["changes"].as_array().unwrap() {
            assert_eq!(c["affected"], affected, "{what}");
            assert_eq!(c["converged"], affected, "{what}");
        }
        // Every type was served: sidecars of the generated mesh have EDS clusters and HTTP routes.
        for t in s["types"].as_array().unwrap() {
            assert!(t["responses"].as_u64().unwrap() >= 10, "{what}");
        }
        let cp = &s["control_plane"];
        assert!(
            cp["peak_rss"].as_u64().unwrap() > 0 && !cp["samples"].as_array().unwrap().is_empty(),
            "{what}"
        );
    }
}

/// The same over the secure port: meshpilot started with --secure-grpc-addr and the CA directory
/// xds-load created, each stream presenting a client certificate of its workload's identity (the
/// port's identity check compares the certificate's namespace with the node's).
#[test]
fn ten_sidecars_converge_over_tls_with_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path());
    let ca = dir.path().join("ca");
    let s = run(dir.path(), "sotw", "workload-entry", &["--ca-dir", ca.to_str().unwrap()]);
    let what = format!("{s:#}");
    assert_eq!(s["run"]["tls"], true, "{what}");
    assert!(s["run"]["address"].as_str().unwrap().starts_with("127.0.0.1:"), "{what}");
    assert_eq!((s["streams"].as_u64(), s["ready"].as_u64()), (Some(10), Some(10)), "{what}");
    assert_eq!(s["not_converged"], 0, "{what}");
    assert_eq!(s["streams_with_errors"], 0, "{what}");
    for c in s["changes"].as_array().unwrap() {
        assert_eq!(c["converged"], 10, "{what}");
    }
    assert!(ca.join("root-cert.pem").exists(), "the CA's root was created in --ca-dir");
}

/// A connection storm in small: 300 sidecars connected, then 200 of them drop their connections and
/// reconnect at once while a ServiceEntry changes. meshpilot admits 100 new streams per second
/// (`PILOT_MAX_REQUESTS_PER_SECOND=100`), so some reconnects are refused with RESOURCE_EXHAUSTED and
/// retried: all 200 are ready again, and the change reached the 100 that stayed connected. (The
/// 10,000-proxy storm and its timings: scripts/reliability/storm.sh, docs/RELIABILITY.md.)
#[test]
fn a_storm_of_reconnects_is_admitted_and_connected_proxies_still_get_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let out = xds_load(&[
        "gen",
        "--out",
        config.to_str().unwrap(),
        "--services",
        "5",
        "--namespaces",
        "2",
        "--workloads",
        "300",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (json, log) = (dir.path().join("storm.json"), dir.path().join("meshpilot-storm.log"));
    let bin = meshpilot();
    let out = Command::new(env!("CARGO_BIN_EXE_xds-load"))
        .env("PILOT_MAX_REQUESTS_PER_SECOND", "100")
        .args(["run", "--config-dir", config.to_str().unwrap(), "--meshpilot", bin.to_str().unwrap()])
        .args(["--meshpilot-log", log.to_str().unwrap(), "--proxies", "300", "--ramp", "100"])
        .args(["--storm", "200", "--change", "service-entry", "--changes", "1", "--settle", "500ms"])
        .args(["--hold", "200ms", "--sample-interval", "100ms", "--ready-timeout", "60s"])
        .args(["--change-timeout", "30s", "--json", json.to_str().unwrap()])
        .output()
        .expect("xds-load runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "xds-load failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let what = format!("{stdout}\n{s:#}");
    assert_eq!((s["streams"].as_u64(), s["ready"].as_u64()), (Some(300), Some(300)), "{what}");
    let storm = &s["storm"];
    assert_eq!((storm["streams"].as_u64(), storm["ready_again"].as_u64()), (Some(200), Some(200)), "{what}");
    assert!(storm["rate_limited"].as_u64().unwrap() > 0, "some reconnects were refused: {what}");
    let change = &s["changes"][0];
    assert_eq!((change["affected"].as_u64(), change["converged"].as_u64()), (Some(100), Some(100)), "{what}");
}
