//! The web status page (`GET /` on the debug HTTP port) in a real headless Chromium, driven over
//! WebDriver (chromedriver + fantoccini), against the in-process control plane and real Envoy
//! sidecars:
//!
//! 1. A VirtualService that our validation and pre-send checks let through but Envoy rejects (a
//!    request header value `%FOO%`: an unknown `%COMMAND%`, "Not supported field in StreamInfo"),
//!    so the first sidecar NACKs its routes: its row is `NACKED` with Envoy's own error text, and so
//!    is the VirtualService's row in the objects table (naming the proxy).
//! 2. A second sidecar connects: its row appears without a reload (a marker set on `window` after
//!    the first load is still there).
//! 3. The VirtualService is fixed: the push it causes appears in the pushes table and the first
//!    sidecar's row turns `SYNCED`, again without a reload.
//!
//! Needs Envoy (scripts/install-envoy.sh) and Chromium with chromedriver (Debian packages
//! `chromium`, `chromium-driver`; `$CHROMIUM_BIN`/`$CHROMEDRIVER_BIN` override `/usr/bin/…`). Without
//! Chromium the test is skipped with a message, except under CI (`CI` set), where it fails.

use std::{
    net::SocketAddr,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::support;

use fantoccini::{Client, ClientBuilder};
use meshpilot_testing::{AdsApi, Envoy, Plane, free_port, get, wait_for};
use serde_json::{Value, json};

use support::NS;
const LIMIT: Duration = Duration::from_secs(20);

/// Chromium and chromedriver, when both are installed.
fn browser_binaries() -> Option<(PathBuf, PathBuf)> {
    let bin = |var: &str, default: &str| {
        let p = std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from);
        p.is_file().then_some(p)
    };
    Some((bin("CHROMIUM_BIN", "/usr/bin/chromium")?, bin("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")?))
}

/// chromedriver (in its own process group) and the Chromium it starts (found by its unique
/// `--user-data-dir`); both are killed on drop.
struct Browser {
    driver: Child,
    port: u16,
    profile: tempfile::TempDir,
}

impl Browser {
    async fn start(chromedriver: &Path) -> Browser {
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", chromedriver.display()));
        let browser = Browser { driver, port, profile: tempfile::tempdir().unwrap() };
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        wait_for("chromedriver to answer /status", LIMIT, async || {
            matches!(get(addr, "localhost", "/status", &[]).await, Ok((200, _))).then_some(())
        })
        .await
        .unwrap();
        browser
    }

    /// A WebDriver session on a fresh headless Chromium.
    async fn session(&self, chromium: &Path) -> Client {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ]
        .map(str::to_owned)
        .into_iter()
        .chain([format!("--user-data-dir={}", self.profile.path().display())])
        .collect::<Vec<_>>();
        let caps = json!({"goog:chromeOptions": {"binary": chromium, "args": args}});
        let Value::Object(caps) = caps else { unreachable!() };
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .unwrap_or_else(|e| panic!("WebDriver session on chromedriver :{}: {e}", self.port))
    }

    /// The pids of the Chromium processes using this browser's profile directory.
    fn chromium_pids(&self) -> Vec<i32> {
        let needle = format!("--user-data-dir={}", self.profile.path().display());
        let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
        dir.filter_map(|e| {
            let e = e.ok()?;
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline).split('\0').any(|a| a == needle).then_some(pid)
        })
        .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        use nix::{sys::signal, unistd::Pid};
        for pid in self.chromium_pids() {
            let _ = signal::kill(Pid::from_raw(pid), signal::Signal::SIGKILL);
        }
        if let Ok(pid) = i32::try_from(self.driver.id()) {
            let _ = signal::killpg(Pid::from_raw(pid), signal::Signal::SIGKILL);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Runs `script` (a function body) in the page and returns its value.
async fn js(client: &Client, script: &str) -> Value {
    client.execute(script, Vec::new()).await.unwrap_or_else(|e| panic!("{script}: {e}"))
}

/// Waits until `script` returns a value other than `null`/`false` in the page; returns it.
async fn wait_js(client: &Client, what: &str, script: &str) -> Value {
    let mut last = Value::Null;
    let found = wait_for(what, LIMIT, async || {
        let v = client.execute(script, Vec::new()).await.ok()?;
        last = v.clone();
        (!matches!(v, Value::Null | Value::Bool(false))).then_some(v)
    })
    .await;
    match found {
        Ok(v) => v,
        Err(e) => {
            let page = client.source().await.unwrap_or_else(|e| format!("(no page source: {e})"));
            panic!("{e}; last value {last}\npage:\n{page}")
        }
    }
}

/// ServiceEntry + WorkloadEntry `echo`, and a VirtualService `echo` whose route sets request header
/// `x-debug` to `header_value`.
fn write_config(dir: &Path, header_value: &str) {
    let registry = support::echo_registry(free_port(), 9);
    std::fs::write(dir.join("echo-registry.yaml"), registry).unwrap();
    write_vs(dir, header_value);
}

fn write_vs(dir: &Path, header_value: &str) {
    let vs = format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  hosts: [echo]\n  http:\n  - headers:\n      request:\n        set: {{x-debug: \"{header_value}\"}}\n    \
         route:\n    - destination: {{host: echo}}\n"
    );
    let tmp = dir.join(".echo-vs.yaml.tmp");
    std::fs::write(&tmp, vs).unwrap();
    std::fs::rename(&tmp, dir.join("echo-vs.yaml")).unwrap();
}

/// Envoy's NACK error for the route type on `proxy`'s connection, once it has one.
async fn route_nack(plane: &Plane, proxy: &str) -> String {
    wait_for(&format!("{proxy} to NACK its routes"), LIMIT, async || {
        let conns = plane.server.connections().snapshot();
        let c = conns.iter().find(|c| c.proxy.id == proxy)?;
        c.types.get(xds::type_url::ROUTE)?.last_error.clone()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_page_shows_proxies_nacks_and_pushes_live_in_chromium() {
    let Some((chromium, chromedriver)) = browser_binaries() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but Chromium/chromedriver are missing (install the Debian packages chromium and \
             chromium-driver, as .ci/run does)"
        );
        eprintln!(
            "SKIPPED: Chromium or chromedriver not found (/usr/bin/chromium, /usr/bin/chromedriver or \
             $CHROMIUM_BIN/$CHROMEDRIVER_BIN); install the Debian packages chromium and chromium-driver"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "%FOO%");
    std::fs::write(
        dir.path().join("bad.yaml"),
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: broken, namespace: default}\n\
         spec:\n  hosts: [echo]\n  bogusField: 1\n",
    )
    .unwrap();
    let plane = Plane::start(dir.path()).await;
    let first = Envoy::start(&plane.sidecar("client", NS, AdsApi::Sotw)).await.unwrap();
    let nack = route_nack(&plane, "client.default").await;
    assert!(nack.contains("FOO"), "Envoy's NACK does not name the bad command: {nack}");

    let browser = Browser::start(&chromedriver).await;
    let client = browser.session(&chromium).await;
    client.goto(&format!("http://{}/", plane.http)).await.unwrap();
    js(&client, "window.meshpilotTestMarker = 'first-load'; return true;").await;

    // The NACKing proxy: its row, its RDS cell and Envoy's text.
    let row = r#"document.querySelector('#proxies tr[data-proxy="client.default"]')"#;
    let state = js(&client, &format!("return {row}?.dataset.state ?? null;")).await;
    assert_eq!(state, json!("NACKED"));
    let rds = js(
        &client,
        &format!("return {row}?.querySelector('td.xds[data-type=\"RDS\"]')?.dataset.state ?? null;"),
    )
    .await;
    assert_eq!(rds, json!("NACKED"));
    let shown = js(
        &client,
        &format!("return {row}?.querySelector('.nack[data-type=\"RDS\"]')?.textContent ?? null;"),
    )
    .await;
    assert_eq!(shown, json!(format!("RDS: {nack}")), "the page does not show Envoy's NACK text");
    // The clusters were accepted (ACKed before the routes were even asked for, but the page may
    // have been rendered first: wait for a refresh).
    wait_js(
        &client,
        "the NACKing proxy's CDS to be SYNCED",
        &format!("return {row}?.querySelector('td.xds[data-type=\"CDS\"]')?.dataset.state === 'SYNCED';"),
    )
    .await;

    // Objects and invalid files.
    let vs = js(
        &client,
        r#"return !!document.querySelector('#objects tr[data-object="VirtualService/default/echo"]');"#,
    )
    .await;
    assert_eq!(vs, json!(true), "no row for VirtualService default/echo");
    // The object itself is shown NACKED, naming the rejecting proxy and Envoy's text.
    let applied =
        r#"document.querySelector('#objects tr[data-object="VirtualService/default/echo"] td.applied')"#;
    wait_js(
        &client,
        "the VirtualService's Applied cell to be NACKED",
        &format!("return {applied}?.dataset.state === 'NACKED';"),
    )
    .await;
    let text = js(&client, &format!("return {applied}?.textContent ?? null;")).await;
    assert!(
        text.as_str().is_some_and(|t| t.contains("NACKED by client.default") && t.contains(&nack)),
        "the object's Applied cell: {text}"
    );
    let bad = js(
        &client,
        r#"return [...document.querySelectorAll('#config-status li[data-file]')].map(e => e.dataset.file).join(' ');"#,
    )
    .await;
    assert!(bad.as_str().is_some_and(|f| f.ends_with("bad.yaml")), "bad.yaml not listed as invalid: {bad}");
    let pushes_before =
        js(&client, "return document.querySelectorAll('#pushes tr[data-push-version]').length;").await;
    assert!(pushes_before.as_u64().is_some_and(|n| n >= 1), "no push listed: {pushes_before}");

    // A new proxy appears without a reload.
    let second = Envoy::start(&plane.sidecar("reviewer", NS, AdsApi::Delta)).await.unwrap();
    wait_js(
        &client,
        "the second proxy's row",
        r#"return !!document.querySelector('#proxies tr[data-proxy="reviewer.default"]');"#,
    )
    .await;
    assert_eq!(
        js(&client, "return window.meshpilotTestMarker ?? null;").await,
        json!("first-load"),
        "the page reloaded"
    );

    // Fixing the VirtualService: a new push row, and the first proxy is SYNCED again.
    let seen = plane.server.push_log().total();
    write_vs(dir.path(), "fixed");
    let fix = wait_for("the push of the fixed VirtualService", LIMIT, async || {
        let log = plane.server.push_log();
        (log.total() > seen)
            .then(|| {
                log.recent()
                    .into_iter()
                    .find(|r| r.configs.iter().any(|c| c == "VirtualService/default/echo"))
            })
            .flatten()
    })
    .await
    .unwrap();
    let push_row = format!(r#"#pushes tr[data-push-version="{}"]"#, fix.version);
    let reasons = wait_js(
        &client,
        "the fix's push row",
        &format!(
            "return document.querySelector('{push_row}')?.querySelector('td.reasons')?.textContent ?? null;"
        ),
    )
    .await;
    assert!(reasons.as_str().is_some_and(|r| r.contains("config")), "push reasons: {reasons}");
    wait_js(
        &client,
        "the first proxy to be SYNCED after the fix",
        r#"return document.querySelector('#proxies tr[data-proxy="client.default"]')?.dataset.state === 'SYNCED';"#,
    )
    .await;
    wait_js(
        &client,
        "the fixed VirtualService's Applied cell to be ACKED",
        &format!("return {applied}?.dataset.state === 'ACKED';"),
    )
    .await;
    let nacks = js(&client, r#"return document.querySelectorAll('#proxies .nack').length;"#).await;
    assert_eq!(nacks, json!(0), "a NACK is still shown after the fix");
    assert_eq!(
        js(&client, "return window.meshpilotTestMarker ?? null;").await,
        json!("first-load"),
        "the page reloaded"
    );

    client.close().await.unwrap();
    drop(browser);
    drop((first, second));
}
