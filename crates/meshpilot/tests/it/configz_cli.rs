//! `meshpilot configz`: the file config source as a user sees it.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    sync::mpsc,
    time::Duration,
};

const GATEWAY: &str = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: ns}\n\
spec:\n  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n";

fn meshpilot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_meshpilot"))
}

#[test]
fn prints_the_config_in_force_and_reports_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gw.yaml"), GATEWAY).unwrap();
    std::fs::write(
        dir.path().join("bad.yaml"),
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: b}\nspec:\n  servers: 7\n",
    )
    .unwrap();
    let out = meshpilot().args(["configz", "--config-dir"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a bad file makes the exit status 1");
    let objects: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let objects = objects.as_array().unwrap();
    assert_eq!(objects.len(), 1, "only the good object is in force: {objects:?}");
    assert_eq!(objects[0]["kind"], "Gateway");
    assert_eq!(objects[0]["metadata"]["name"], "gw");
    assert_eq!(objects[0]["spec"]["servers"][0]["port"]["number"], 80);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.yaml") && stderr.contains("spec.servers"), "{stderr}");
}

#[test]
fn watch_prints_live_events() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gw.yaml"), GATEWAY).unwrap();
    let mut child = meshpilot()
        .args(["configz", "--watch", "--config-dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("{\"") {
                let _ = tx.send(line);
            }
        }
    });
    // The watch is live once a change is printed: rewrite a marker object until one of its events
    // shows (no pause to guess how long the start takes).
    let marker =
        |n: u32| GATEWAY.replace("name: gw,", "name: marker,").replace("number: 80", &format!("number: {n}"));
    let mut live = false;
    for n in 0..300 {
        std::fs::write(dir.path().join("marker.yaml"), marker(9000 + n)).unwrap();
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            live = line.contains("\"name\":\"marker\"");
            assert!(live, "an event before any change but the marker: {line}");
            break;
        }
    }
    assert!(live, "no event for the marker within 60 s");
    // The next event of `gw` (the marker's later rewrites may still be printed).
    let next_gw = || loop {
        let line = rx.recv_timeout(Duration::from_secs(10)).expect("an event for gw");
        let event: serde_json::Value = serde_json::from_str(&line).unwrap();
        if event["name"] == "gw" {
            break event;
        }
    };
    std::fs::write(dir.path().join("gw.yaml"), GATEWAY.replace("number: 80", "number: 8080")).unwrap();
    let update = next_gw();
    std::fs::remove_file(dir.path().join("gw.yaml")).unwrap();
    let delete = next_gw();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        (update["event"].as_str(), update["kind"].as_str(), update["name"].as_str()),
        (Some("update"), Some("Gateway"), Some("gw"))
    );
    assert_eq!((delete["event"].as_str(), delete["name"].as_str()), (Some("delete"), Some("gw")));
}
