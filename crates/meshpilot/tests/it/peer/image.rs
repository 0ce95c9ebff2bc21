//! meshpilot's image (docker/Dockerfile, scripts/image.sh) run the way Istio's istiod chart runs
//! Istio's pilot image: built from this test's binary with the machine's builder (buildah), started
//! with podman as a container — the entrypoint with `discovery` as its first argument, user 1337,
//! read-only root filesystem — and serving a real Envoy: the router gets its config from the
//! container and routes a request to the echo server; the container's process runs as 1337.
//!
//! Needs buildah and podman (`scripts/image.sh install-builder`; `.ci/run` installs them) and Envoy.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::Duration,
};

use crate::process::{Ports, echo_mesh, wait_serving};
use meshpilot_testing::{AdsApi, Bootstrap, EchoServer, Envoy, free_port, http_get, repo_root, wait_for};

const TAG: &str = "localhost/meshpilot:test";

/// `scripts/image.sh ARGS` with the image store under `storage`.
fn image_sh(storage: &Path) -> Command {
    let mut command = Command::new(repo_root().join("scripts/image.sh"));
    command.env("MESHPILOT_IMAGE_STORAGE", storage);
    command
}

fn checked(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The running container: `podman run` in the foreground; removed (and its image store with the
/// test's temporary directory) on drop.
struct Container {
    storage: PathBuf,
    name: String,
    client: Child,
    log: PathBuf,
}

impl Container {
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The container's process id on this host (`None` until it runs).
    fn pid(&self) -> Option<u32> {
        let out = image_sh(&self.storage)
            .args(["podman", "inspect", "--format", "{{.State.Pid}}", &self.name])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok().filter(|pid| *pid != 0)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Killing the podman client would leave conmon and the container behind: remove it.
        let _ = image_sh(&self.storage).args(["podman", "rm", "--force", "--time", "5", &self.name]).output();
        let _ = self.client.kill();
        let _ = self.client.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_image_runs_as_istios_pilot_image_and_serves_envoy() {
    let work = tempfile::tempdir().unwrap();
    let storage = work.path().join("storage");
    checked(
        "scripts/image.sh build",
        image_sh(&storage)
            .args(["build", "--binary", env!("CARGO_BIN_EXE_meshpilot"), "--tag", TAG])
            .output()
            .unwrap(),
    );

    // The image as built: Istio's user and an entrypoint that takes `discovery` as its first argument.
    let inspect = checked(
        "podman image inspect",
        image_sh(&storage).args(["podman", "image", "inspect", TAG]).output().unwrap(),
    );
    let inspect: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    assert_eq!(inspect[0]["Config"]["User"], "1337:1337", "{inspect:#}");
    assert_eq!(inspect[0]["Config"]["Entrypoint"], serde_json::json!(["/usr/local/bin/meshpilot"]));

    // The mesh, mounted read-only where the container (user 1337) can read it.
    let echo = EchoServer::start("echo").await.unwrap();
    let (svc_port, gw_port) = (free_port(), free_port());
    let config = work.path().join("config");
    std::fs::create_dir(&config).unwrap();
    std::fs::write(config.join("mesh.yaml"), echo_mesh(svc_port, echo.addr.port(), gw_port)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(config.join("mesh.yaml"), std::fs::Permissions::from_mode(0o644)).unwrap();

    let ports = Ports::free();
    let name = format!("meshpilot-image-test-{}", std::process::id());
    let log = work.path().join("container.log");
    let client = image_sh(&storage)
        .args(["run", "--rm", "--name", &name, "--network", "host", "--read-only"])
        .arg("--volume")
        .arg(format!("{}:/etc/meshpilot/config:ro", config.display()))
        .args([TAG, "discovery", "--configDir", "/etc/meshpilot/config"])
        .args(["--grpcAddr", &ports.grpc.to_string(), "--httpAddr", &ports.http.to_string()])
        .args(["--monitoringAddr", &ports.monitoring.to_string()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let container = Container { storage: storage.clone(), name, client, log };

    // Ready as the chart's readinessProbe asks (GET :8080/ready, here on the test's port).
    wait_for("the container's /ready", Duration::from_secs(120), async || {
        matches!(http_get(ports.http, "/ready", &[]).await, Ok((200, _))).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\ncontainer log:\n{}", container.log_text()));

    // The process in the container runs as user and group 1337.
    let pid = container.pid().unwrap_or_else(|| panic!("no pid\n{}", container.log_text()));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let ids = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.split_whitespace().next().unwrap_or("").to_owned())
    };
    assert_eq!(ids("Uid:").as_deref(), Some("1337"), "{status}");
    assert_eq!(ids("Gid:").as_deref(), Some("1337"), "{status}");

    // A real Envoy gets its config from the container and routes through it.
    let _router = Envoy::start(&Bootstrap::router(ports.grpc, AdsApi::Delta)).await.unwrap();
    wait_serving(gw_port, "the router configured by the container").await;
    drop(container);
}
