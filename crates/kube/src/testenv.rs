//! A real Kubernetes control plane for tests: etcd and kube-apiserver started by
//! `scripts/kube-testenv.sh` (built from source by `scripts/kube-testenv.sh build`, which `.ci/run` and
//! `scripts/test.sh` call), on free loopback ports, with the Istio CRDs installed.
//!
//! [`TestEnv::start`] starts one; dropping it stops both processes and removes its directory.
//! [`TestEnv::shared_by`] gives one per key per test process: each test module passes `file!()`, so its
//! tests share one API server (each in its own namespaces) and no other module's control plane acts on
//! it. Its processes stop when the test process exits (the script watches the test process's pid).

use std::{
    collections::BTreeMap,
    io,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU32, Ordering},
    },
};

/// A running etcd + kube-apiserver.
#[derive(Debug)]
pub struct TestEnv {
    dir: PathBuf,
    owned: bool,
    /// The script's report of how long the start took (`ready in … ms (…)`).
    pub start_report: String,
}

/// The repository's `scripts/kube-testenv.sh`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kube-testenv.sh")
}

fn run_script(args: &[&str]) -> io::Result<Output> {
    let out = Command::new("bash").arg(script()).args(args).output()?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(io::Error::other(format!(
            "scripts/kube-testenv.sh {} failed ({}):\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

static SHARED_BY: Mutex<BTreeMap<&'static str, &'static TestEnv>> = Mutex::new(BTreeMap::new());
static COUNTER: AtomicU32 = AtomicU32::new(0);

impl TestEnv {
    /// Starts etcd + kube-apiserver in a fresh directory and installs the Istio CRDs.
    ///
    /// # Errors
    /// The script failed (its stderr is in the message).
    pub fn start() -> io::Result<TestEnv> {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("meshpilot-kube-testenv-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let pid = std::process::id().to_string();
        // A failed start has already stopped what it started (its error carries the logs' tails).
        let out =
            run_script(&["start", &dir.display().to_string(), "--watch-pid", &pid]).inspect_err(|_| {
                let _ = std::fs::remove_dir_all(&dir);
            })?;
        let start_report = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Ok(TestEnv { dir, owned: true, start_report })
    }

    /// One environment per `key` per test process, started on first use; its processes stop when the
    /// process exits. A test module passes `file!()`: its tests share the API server, and control planes
    /// started by other modules of the same test binary (leader election, status writers, istiod,
    /// cluster-scoped objects) never act on it. Starts are serialised.
    ///
    /// # Panics
    /// When it cannot be started (the error says why).
    pub fn shared_by(key: &'static str) -> &'static TestEnv {
        let mut envs = SHARED_BY.lock().unwrap_or_else(PoisonError::into_inner);
        envs.entry(key).or_insert_with(|| Box::leak(Box::new(TestEnv::start_for_process())))
    }

    fn start_for_process() -> TestEnv {
        let mut env =
            TestEnv::start().unwrap_or_else(|e| panic!("cannot start the Kubernetes test environment: {e}"));
        // Statics are never dropped; the script's pid watch stops the processes.
        env.owned = false;
        env
    }

    /// The environment's directory (logs, certificates, pid files).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A kubeconfig for the admin user (`system:masters`).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// A kubeconfig for a user with no RBAC grants (every request is forbidden).
    pub fn viewer_kubeconfig(&self) -> PathBuf {
        self.dir.join("viewer.kubeconfig")
    }

    /// Runs the environment's `kubectl` with the admin kubeconfig.
    ///
    /// # Errors
    /// kubectl could not run or exited non-zero (its stderr is in the message).
    pub fn kubectl(&self, args: &[&str]) -> io::Result<String> {
        let bin = run_script(&["bin-dir"])?;
        let bin = PathBuf::from(String::from_utf8_lossy(&bin.stdout).trim()).join("kubectl");
        let out = Command::new(bin).arg("--kubeconfig").arg(self.kubeconfig()).args(args).output()?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(io::Error::other(format!(
                "kubectl {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            )))
        }
    }

    /// Applies a manifest (YAML text) with kubectl, bypassing meshpilot's validation (to put objects
    /// meshpilot would refuse into the cluster).
    ///
    /// # Errors
    /// As [`TestEnv::kubectl`].
    pub fn kubectl_apply(&self, manifest: &str) -> io::Result<String> {
        let file = self.dir.join(format!("manifest-{}.yaml", COUNTER.fetch_add(1, Ordering::SeqCst)));
        std::fs::write(&file, manifest)?;
        self.kubectl(&["apply", "-f", &file.display().to_string()])
    }

    /// Installs the Gateway API CRDs Istio's integration tests use
    /// (`../shared/istio-testdata/tests/integration/pilot/testdata/gateway-api-crd.yaml`, standard and
    /// experimental channels) and waits until they are Established. Idempotent (server-side apply,
    /// which also avoids the size limit of kubectl's last-applied annotation), so every test may call
    /// it on the shared environment.
    ///
    /// # Errors
    /// The file is missing, or kubectl failed.
    pub fn install_gateway_api_crds(&self) -> io::Result<()> {
        // Per environment: a test process has several (one per test file), each its own API server.
        static INSTALLED: std::sync::Mutex<std::collections::BTreeSet<PathBuf>> =
            std::sync::Mutex::new(std::collections::BTreeSet::new());
        let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
        if installed.contains(&self.dir) {
            return Ok(());
        }
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/istio-testdata/tests/integration/pilot/testdata/gateway-api-crd.yaml");
        if !file.is_file() {
            return Err(io::Error::other(format!("Gateway API CRDs not found at {}", file.display())));
        }
        let path = file.display().to_string();
        self.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &path])?;
        self.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/gatewayclasses.gateway.networking.k8s.io",
            "crd/gateways.gateway.networking.k8s.io",
            "crd/httproutes.gateway.networking.k8s.io",
            "crd/grpcroutes.gateway.networking.k8s.io",
            "crd/referencegrants.gateway.networking.k8s.io",
            "crd/tcproutes.gateway.networking.k8s.io",
            "crd/tlsroutes.gateway.networking.k8s.io",
        ])?;
        installed.insert(self.dir.clone());
        Ok(())
    }

    /// Loads the admin kubeconfig as a client configuration.
    ///
    /// # Errors
    /// The kubeconfig cannot be read.
    pub async fn client_config(&self) -> Result<kube::Config, crate::KubeError> {
        crate::client::client_config(Some(&self.kubeconfig())).await
    }

    /// Stops only the API server (etcd keeps the data).
    ///
    /// # Errors
    /// The script failed.
    pub fn stop_apiserver(&self) -> io::Result<()> {
        run_script(&["stop-apiserver", &self.dir.display().to_string()]).map(|_| ())
    }

    /// Starts the API server again on the same port and waits until it is ready.
    ///
    /// # Errors
    /// The script failed.
    pub fn start_apiserver(&self) -> io::Result<()> {
        run_script(&["start-apiserver", &self.dir.display().to_string()]).map(|_| ())
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if self.owned {
            let _ = run_script(&["stop", &self.dir.display().to_string()]);
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
