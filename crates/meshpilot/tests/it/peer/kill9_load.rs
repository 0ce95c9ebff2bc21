//! The kill -9 scenario under load (docs/RELIABILITY.md), `#[ignore]`d: run by
//! `scripts/reliability/kill9.sh`, which installs the load tool (hey) and passes `HEY_BIN`.
//!
//! meshpilot (the real binary) serves a sidecar and an ingress gateway Envoy; hey sends a steady
//! load through both (`RELIAB_RATE` req/s per Envoy, default 1,000: 2,000 in all) for the whole run;
//! meshpilot is killed with SIGKILL, stays down `RELIAB_DOWN_SECS` (default 5), and is restarted on the
//! same ports. The test prints one report per ADS flavour (SotW, Delta): requests and failures
//! (hey's status codes and errors), seconds from the restart to both streams reconnected and to
//! every response ACKed, Envoy's CDS/LDS update counts and churn counters before and after,
//! meshpilot's pushes and RSS. It fails if any request failed or any cluster/listener changed.

use crate::process;

use std::{
    collections::BTreeMap,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use meshpilot_testing::{AdsApi, Bootstrap, EchoServer, Envoy, free_port};
use process::{Meshpilot, Ports, ROUTER, SIDECAR, churn, echo_mesh, synced, wait_serving, wait_synced};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// hey's summary: requests per status code, errors, requests/s.
#[derive(Debug, Default)]
struct HeyResult {
    codes: BTreeMap<u16, u64>,
    errors: u64,
    rps: f64,
    text: String,
}

impl HeyResult {
    fn parse(text: &str) -> HeyResult {
        let mut r = HeyResult { text: text.to_owned(), ..HeyResult::default() };
        let mut section = "";
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with("Status code distribution") || t.starts_with("Error distribution") {
                section = if t.starts_with("Status") { "codes" } else { "errors" };
                continue;
            }
            if let Some(v) = t.strip_prefix("Requests/sec:") {
                r.rps = v.trim().parse().unwrap_or(0.0);
            }
            let Some(rest) = t.strip_prefix('[') else { continue };
            let Some((key, tail)) = rest.split_once(']') else { continue };
            let count = tail.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
            match section {
                "codes" => *r.codes.entry(key.parse().unwrap_or(0)).or_default() += count,
                "errors" => r.errors += key.parse::<u64>().unwrap_or(0),
                _ => {}
            }
        }
        r
    }

    fn total(&self) -> u64 {
        self.codes.values().sum::<u64>() + self.errors
    }

    fn failed(&self) -> u64 {
        self.codes.iter().filter(|(c, _)| **c != 200).map(|(_, n)| n).sum::<u64>() + self.errors
    }
}

async fn stats(envoy: &Envoy) -> BTreeMap<String, u64> {
    let mut out = churn(envoy).await;
    for name in [
        "cluster_manager.cds.update_attempt",
        "cluster_manager.cds.update_success",
        "listener_manager.lds.update_attempt",
        "listener_manager.lds.update_success",
    ] {
        out.insert(name.to_owned(), envoy.stat(name).await.unwrap().unwrap_or(0));
    }
    out
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> String {
    after.iter().map(|(k, v)| format!("    {k}: {} → {v}\n", before.get(k).copied().unwrap_or(0))).collect()
}

async fn scenario(hey: &str, api: AdsApi) -> bool {
    let rate = env_u64("RELIAB_RATE", 1000);
    let down = Duration::from_secs(env_u64("RELIAB_DOWN_SECS", 5));
    let (warm, after_secs) = (5u64, 15u64);
    let total = warm + down.as_secs() + after_secs;

    let work = tempfile::tempdir().unwrap();
    let echo = EchoServer::start("echo").await.unwrap();
    let (svc_port, gw_port) = (free_port(), free_port());
    let config = work.path().join("config");
    std::fs::create_dir(&config).unwrap();
    std::fs::write(config.join("mesh.yaml"), echo_mesh(svc_port, echo.addr.port(), gw_port)).unwrap();
    let ports = Ports::free();
    let mut first = Meshpilot::start(&config, ports, work.path().join("meshpilot-1.log"));
    let sidecar = Envoy::start(&Bootstrap::sidecar("echo-client", ports.grpc, api)).await.unwrap();
    let router = Envoy::start(&Bootstrap::router(ports.grpc, api)).await.unwrap();
    wait_serving(svc_port, "the sidecar").await;
    wait_serving(gw_port, "the router").await;
    wait_synced(&first, &[SIDECAR, ROUTER]).await;
    let rss_before = first.rss_kib().unwrap_or(0);
    let pushes_before = first.metric("pilot_xds_pushes").await.unwrap_or(0.0);

    // Steady load through both Envoys for the whole run: 8 workers each at rate/8 req/s.
    let workers = 8;
    let load = |port: u16| {
        Command::new(hey)
            .args(["-z", &format!("{total}s"), "-c", &workers.to_string()])
            .args(["-q", &(rate / workers).max(1).to_string(), "-host", process::HOST])
            .arg(format!("http://127.0.0.1:{port}/"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let hey_sidecar = load(svc_port);
    let hey_router = load(gw_port);
    tokio::time::sleep(Duration::from_secs(warm)).await;
    let before = (stats(&sidecar).await, stats(&router).await);

    first.kill9();
    tokio::time::sleep(down).await;
    let restarted = Instant::now();
    let second = Meshpilot::start(&config, ports, work.path().join("meshpilot-2.log"));
    let mut reconnected = None;
    let acked = loop {
        if let Some(syncz) = second.syncz().await {
            let listed = |p: &str| syncz.as_array().is_some_and(|a| a.iter().any(|c| c["proxy"] == p));
            if reconnected.is_none() && listed(SIDECAR) && listed(ROUTER) {
                reconnected = Some(restarted.elapsed());
            }
            if synced(&syncz, SIDECAR) && synced(&syncz, ROUTER) {
                break restarted.elapsed();
            }
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(60),
            "not re-converged in 60 s: {}",
            second.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let reconnected = reconnected.unwrap_or(acked);
    let after = (stats(&sidecar).await, stats(&router).await);

    let finish = |child: std::process::Child| {
        let out = child.wait_with_output().unwrap();
        HeyResult::parse(&String::from_utf8_lossy(&out.stdout))
    };
    let (hs, hr) =
        tokio::task::spawn_blocking(move || (finish(hey_sidecar), finish(hey_router))).await.unwrap();
    let rss_after = second.rss_kib().unwrap_or(0);
    let pushes_after = second.metric("pilot_xds_pushes").await.unwrap_or(0.0);

    println!(
        "== kill -9 under load, {api:?}: {total} s of load, meshpilot down {} s\n\
         requests: sidecar {} ({:.0}/s, {} failed), router {} ({:.0}/s, {} failed)\n\
         restart → both streams reconnected: {:.2} s; → every response ACKed: {:.2} s ({:.2} s after reconnecting)\n\
         meshpilot pushes (pilot_xds_pushes): {pushes_before} before the kill, {pushes_after} in the new process\n\
         meshpilot RSS: {} KiB before the kill, {} KiB after re-converging\n\
         sidecar Envoy stats (before → after the restart):\n{}\
         router Envoy stats (before → after the restart):\n{}",
        down.as_secs(),
        hs.total(),
        hs.rps,
        hs.failed(),
        hr.total(),
        hr.rps,
        hr.failed(),
        reconnected.as_secs_f64(),
        acked.as_secs_f64(),
        (acked - reconnected).as_secs_f64(),
        rss_before,
        rss_after,
        delta(&before.0, &after.0),
        delta(&before.1, &after.1),
    );
    let mut ok = true;
    for (name, h) in [("sidecar", &hs), ("router", &hr)] {
        if h.failed() > 0 || h.total() == 0 {
            println!("FAIL: {name}: {} failed of {}:\n{}", h.failed(), h.total(), h.text);
            ok = false;
        }
    }
    for (name, b, a) in [("sidecar", &before.0, &after.0), ("router", &before.1, &after.1)] {
        for key in process::CHURN.iter().map(|s| s.to_string()).chain(["rds.config_reload".to_owned()]) {
            if b.get(&key) != a.get(&key) {
                println!("FAIL: {name}: {key} changed across the restart");
                ok = false;
            }
        }
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "long scenario under load: scripts/reliability/kill9.sh"]
async fn kill9_under_load() {
    let hey = std::env::var("HEY_BIN")
        .expect("HEY_BIN: the hey binary (scripts/reliability/install-hey.sh prints its path)");
    let mut ok = true;
    for api in [AdsApi::Sotw, AdsApi::Delta] {
        ok &= scenario(&hey, api).await;
    }
    assert!(ok, "see the FAIL lines above");
}
