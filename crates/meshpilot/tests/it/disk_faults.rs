//! Faults of the config directory under `meshpilot discovery` (the real binary), docs/RELIABILITY.md
//! "Disk and files": an in-place rewrite cut short by a full disk (a 64 KiB tmpfs mounted by the
//! test: needs root or CAP_SYS_ADMIN, which the project machines and CI have), a FIFO and a file
//! that is not UTF-8 under config names, a directory named like a config file, and a good file
//! replaced by undecodable bytes. In every case the last good objects stay served and the file is
//! listed with its error under `/debug/configstatusz`.

use crate::process;

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use meshpilot_testing::{http_get, wait_for, write_atomic};
use process::{Meshpilot, Ports, echo_mesh};
use serde_json::Value as Json;

/// A tmpfs of `size_kib` mounted on `path` for the test; unmounted on drop.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path, size_kib: u64) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_kib}k"), "meshpilot-test"])
            .arg(path)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount -t tmpfs failed (this test needs root or CAP_SYS_ADMIN): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs { path: path.to_path_buf() }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

async fn get_json(mp: &Meshpilot, path: &str) -> Option<Json> {
    let (status, body) = http_get(mp.ports.http, path, &[]).await.ok()?;
    (status == 200).then(|| serde_json::from_str(&body).ok()).flatten()
}

/// The `badFiles` entry of configstatusz for a file named `name`.
fn bad_file(status: &Json, name: &str) -> Option<Json> {
    status["configSources"].as_array()?.iter().find_map(|s| {
        s["status"]["badFiles"]
            .as_array()?
            .iter()
            .find(|b| b["file"].as_str().is_some_and(|f| f.ends_with(&format!("/{name}"))))
            .cloned()
    })
}

/// The object `kind` `namespace/name` in configz.
fn object(configz: &Json, kind: &str, namespace: &str, name: &str) -> Option<Json> {
    configz
        .as_array()?
        .iter()
        .find(|o| {
            o["kind"] == kind && o["metadata"]["namespace"] == namespace && o["metadata"]["name"] == name
        })
        .cloned()
}

/// Waits until `/debug/configstatusz` lists `name` as bad with an error containing `needle`.
async fn wait_bad(mp: &Meshpilot, name: &str, needle: &str) -> Json {
    wait_for(
        &format!("{name} listed as bad ({needle:?}) in configstatusz"),
        Duration::from_secs(60),
        async || {
            let bad = bad_file(&get_json(mp, "/debug/configstatusz").await?, name)?;
            bad["errors"]
                .as_array()?
                .iter()
                .any(|e| e["message"].as_str().is_some_and(|m| m.contains(needle)))
                .then_some(bad)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\nmeshpilot log:\n{}", mp.log_text()))
}

/// Waits until configz holds `kind` `namespace/name` and `check` accepts its spec.
async fn wait_object(mp: &Meshpilot, kind: &str, namespace: &str, name: &str, check: impl Fn(&Json) -> bool) {
    wait_for(&format!("{kind} {namespace}/{name} in configz"), Duration::from_secs(60), async || {
        let o = object(&get_json(mp, "/debug/configz").await?, kind, namespace, name)?;
        check(&o["spec"]).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\nmeshpilot log:\n{}", mp.log_text()));
}

/// A VirtualService `test/wide` for `hosts` (flow style, on one line).
fn wide_vs(hosts: &[String]) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: wide, namespace: test}}\n\
         spec:\n  hosts: [{}]\n  http:\n  - route:\n    - destination: {{host: echo.test.svc.cluster.local}}\n",
        hosts.join(", ")
    )
}

fn hosts(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:04}.example.com")).collect()
}

fn first_host(spec: &Json) -> Option<&str> {
    spec["hosts"].get(0)?.as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_cut_short_by_a_full_disk_keeps_the_last_good_objects() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("config");
    let _tmpfs = Tmpfs::mount(&dir, 64);
    std::fs::write(dir.join("mesh.yaml"), echo_mesh(9080, 9081, 9082)).unwrap();
    std::fs::write(dir.join("wide.yaml"), wide_vs(&hosts("a", 3))).unwrap();
    let mp = Meshpilot::start(&dir, Ports::free(), work.path().join("meshpilot.log"));
    wait_object(&mp, "VirtualService", "test", "wide", |s| first_host(s) == Some("a0000.example.com")).await;

    // Fill the disk (a hidden file: not config), then rewrite wide.yaml in place with 1,000 hosts
    // (≈ 20 KB): the write stops at the space the truncation freed, inside the host list.
    let mut filler = std::fs::File::create(dir.join(".filler")).unwrap();
    let full = loop {
        if let Err(e) = filler.write_all(&[b'x'; 4096]) {
            break e;
        }
    };
    assert_eq!(full.kind(), std::io::ErrorKind::StorageFull, "{full}");
    let big = wide_vs(&hosts("b", 1000));
    let mut file = std::fs::File::create(dir.join("wide.yaml")).unwrap();
    let err = file.write_all(big.as_bytes()).and_then(|()| file.flush()).unwrap_err();
    drop(file);
    assert_eq!(err.kind(), std::io::ErrorKind::StorageFull, "{err}");
    let cut = std::fs::metadata(dir.join("wide.yaml")).unwrap().len();
    assert!(cut > 0 && cut < big.len() as u64, "the rewrite was not cut: {cut} of {} bytes", big.len());

    // The cut file is bad, listed with its error, and its last good object stays in force.
    let bad = wait_bad(&mp, "wide.yaml", "").await;
    assert_eq!(bad["keptObjects"], 1, "{bad}");
    let configz = get_json(&mp, "/debug/configz").await.unwrap();
    let kept = object(&configz, "VirtualService", "test", "wide").expect("the last good VirtualService");
    assert_eq!(first_host(&kept["spec"]), Some("a0000.example.com"), "{kept}");
    assert!(object(&configz, "ServiceEntry", "test", "echo").is_some(), "the other file's objects stay");

    // Space again: a good rewrite is read and the file is no longer bad.
    drop(filler);
    std::fs::remove_file(dir.join(".filler")).unwrap();
    write_atomic(&dir, "wide.yaml", &wide_vs(&hosts("c", 3)));
    wait_object(&mp, "VirtualService", "test", "wide", |s| first_host(s) == Some("c0000.example.com")).await;
    let status = get_json(&mp, "/debug/configstatusz").await.unwrap();
    assert!(bad_file(&status, "wide.yaml").is_none(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifos_and_undecodable_files_are_reported_and_the_other_files_served() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("config");
    std::fs::create_dir_all(dir.join("nested.yaml")).unwrap();
    std::fs::write(dir.join("mesh.yaml"), echo_mesh(9080, 9081, 9082)).unwrap();
    // A directory named like a config file is a directory: its files are read.
    std::fs::write(dir.join("nested.yaml/wide.yaml"), wide_vs(&hosts("a", 2))).unwrap();
    // A FIFO: reading it would block the scan until a writer came.
    let status = Command::new("mkfifo").arg(dir.join("pipe.yaml")).status().unwrap();
    assert!(status.success(), "mkfifo");
    // Latin-1 bytes: not UTF-8.
    std::fs::write(dir.join("latin1.yaml"), b"apiVersion: v1\nkind: ConfigMap\n# caf\xe9\n").unwrap();

    let mp = Meshpilot::start(&dir, Ports::free(), work.path().join("meshpilot.log"));
    wait_bad(&mp, "pipe.yaml", "not a regular file (a FIFO)").await;
    wait_bad(&mp, "latin1.yaml", "not UTF-8").await;
    wait_object(&mp, "ServiceEntry", "test", "echo", |_| true).await;
    wait_object(&mp, "VirtualService", "test", "wide", |s| first_host(s) == Some("a0000.example.com")).await;

    // A good file replaced by undecodable bytes keeps its objects; the others are untouched.
    std::fs::write(dir.join("nested.yaml/wide.yaml"), b"\xff\xfe\x00garbage").unwrap();
    let bad = wait_bad(&mp, "wide.yaml", "not UTF-8").await;
    assert_eq!(bad["keptObjects"], 1, "{bad}");
    let configz = get_json(&mp, "/debug/configz").await.unwrap();
    let kept = object(&configz, "VirtualService", "test", "wide").expect("the last good VirtualService");
    assert_eq!(first_host(&kept["spec"]), Some("a0000.example.com"), "{kept}");
    assert!(object(&configz, "ServiceEntry", "test", "echo").is_some());
}
