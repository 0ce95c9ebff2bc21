//! Hostile config files against the real binary: an alias bomb ("billion laughs", 533 bytes) and a
//! 20,000-level nesting dropped into `--config-dir` beside a good file, and piped into `meshpilot
//! validate`. Each is an error naming the limit; `discovery` stays ready with the good object in force
//! and its peak RSS bounded; `validate` exits 1 instead of aborting (docs/SECURITY.md "Limits").

use crate::process;

use std::{
    io::Write as _,
    process::{Command, Stdio},
    time::Duration,
};

use meshpilot_testing::{http_get, wait_for};
use process::{Meshpilot, Ports};

/// The classic alias bomb: nine levels of nine aliases, 9⁹ strings if expanded.
fn alias_bomb() -> String {
    let mut text = String::from(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: bomb, namespace: default}\nspec:\n",
    );
    text.push_str("  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for (name, prev) in
        [("b", "a"), ("c", "b"), ("d", "c"), ("e", "d"), ("f", "e"), ("g", "f"), ("h", "g"), ("i", "h")]
    {
        let refs = vec![format!("*{prev}"); 9].join(",");
        text.push_str(&format!("  {name}: &{name} [{refs}]\n"));
    }
    text
}

/// 20,000 levels of block sequences in 40 kB (`- - - … x`).
fn deep_nesting() -> String {
    format!("{}x\n", "- ".repeat(20_000))
}

const GOOD: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: good, namespace: default}\n\
spec:\n  hosts: [good.example.com]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: DNS\n";

/// Peak resident set size in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap()
}

/// The bad files of `/debug/configstatusz`: (file, first error message, objects kept).
async fn bad_files(http: std::net::SocketAddr) -> Vec<(String, String, u64)> {
    let (_, body) = http_get(http, "/debug/configstatusz", &[]).await.unwrap();
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut out = Vec::new();
    for source in status["configSources"].as_array().unwrap() {
        for bad in source["status"]["badFiles"].as_array().unwrap() {
            out.push((
                bad["file"].as_str().unwrap().to_string(),
                bad["errors"][0]["message"].as_str().unwrap_or_default().to_string(),
                bad["keptObjects"].as_u64().unwrap(),
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_files_in_the_config_dir_are_reported_and_the_rest_is_served() {
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("config");
    std::fs::create_dir(&config).unwrap();
    std::fs::write(config.join("good.yaml"), GOOD).unwrap();
    std::fs::write(config.join("bomb.yaml"), alias_bomb()).unwrap();
    std::fs::write(config.join("deep.yaml"), deep_nesting()).unwrap();
    let mp = Meshpilot::start(&config, Ports::free(), work.path().join("meshpilot.log"));
    let http = mp.ports.http;

    wait_for("meshpilot ready", Duration::from_secs(60), async || {
        http_get(http, "/ready", &[]).await.ok().filter(|(s, _)| *s == 200)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mp.log_text()));
    let (_, configz) = http_get(http, "/debug/configz", &[]).await.unwrap();
    assert!(configz.contains("good.example.com"), "the good object is served: {configz}");
    let (_, on_monitoring) = http_get(mp.ports.monitoring, "/debug/configz", &[]).await.unwrap();
    assert_eq!(on_monitoring, configz, "the debug handlers are on 15014 too, as istiod's");
    assert!(!configz.contains("\"bomb\""), "{configz}");
    let bad = bad_files(http).await;
    let message = |file: &str| bad.iter().find(|(f, ..)| f.ends_with(file)).map(|(_, m, _)| m.clone());
    assert!(message("bomb.yaml").is_some_and(|m| m.contains("excessive aliasing")), "{bad:?}");
    assert!(message("deep.yaml").is_some_and(|m| m.contains("nesting deeper than 128 levels")), "{bad:?}");
    assert!(message("good.yaml").is_none(), "{bad:?}");

    // Later, a bomb is appended to the good file: the file is bad, its last good object stays.
    std::fs::write(config.join("good.yaml"), format!("{GOOD}---\n{}", alias_bomb())).unwrap();
    let kept = wait_for("the rewritten file reported", Duration::from_secs(30), async || {
        bad_files(http).await.into_iter().find(|(f, ..)| f.ends_with("good.yaml"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mp.log_text()));
    assert!(kept.1.contains("excessive aliasing"), "{kept:?}");
    assert_eq!(kept.2, 1, "the good object is kept: {kept:?}");
    let (ready, _) = http_get(http, "/ready", &[]).await.unwrap();
    let (_, configz) = http_get(http, "/debug/configz", &[]).await.unwrap();
    assert_eq!(ready, 200);
    assert!(configz.contains("good.example.com"), "the last good object stays: {configz}");
    let peak = peak_rss_kib(mp.pid());
    assert!(peak < 512 * 1024, "peak RSS {peak} KiB: the bomb was expanded");
}

#[test]
fn validate_reports_hostile_stdin_and_exits_1() {
    for (text, reason) in
        [(alias_bomb(), "excessive aliasing"), (deep_nesting(), "nesting deeper than 128 levels")]
    {
        let mut child = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
            .args(["validate", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let output =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{reason}: {output}");
        assert!(output.contains(reason), "{output}");
    }
}
