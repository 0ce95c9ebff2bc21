//! `meshpilot kube-inject`: Istio's sidecar injection applied to manifests offline, as
//! `istioctl kube-inject` with `--injectConfigFile`, `--valuesFile` and `--meshConfigFile` (the
//! `config` and `values` keys of the ConfigMap `istio-sidecar-injector` and the `mesh` key of the
//! ConfigMap `istio`). Reading them from a cluster is not supported yet: the files are required.

use std::{
    io::{self, Read, Write},
    path::{Path, PathBuf},
    process::ExitCode,
};

use clap::Parser;

/// Arguments of `meshpilot kube-inject`.
#[derive(Parser, Debug)]
#[command(
    about = "Inject Istio's sidecar into Kubernetes manifests, offline (as istioctl kube-inject)",
    long_about = "Injects Istio's sidecar into the workloads of Kubernetes manifests (Pods, Deployments, \
DaemonSets, StatefulSets, ReplicaSets, Jobs, CronJobs, ReplicationControllers, DeploymentConfigs, Lists), \
as the API server's call to istiod's injection webhook would, and prints the result. Other objects pass \
through unchanged. The templates and values are the `config` and `values` keys of the ConfigMap \
istio-sidecar-injector; the mesh config the `mesh` key of the ConfigMap istio (Istio's defaults when \
not given).\n\nExit status: 0 when every document was injected or skipped, 1 on an error (the file, the \
document and the reason are printed), 2 on usage errors.",
    after_help = "Examples:\n  kubectl -n istio-system get cm istio-sidecar-injector -o jsonpath='{.data.config}' > inject-config.yaml\n  \
kubectl -n istio-system get cm istio-sidecar-injector -o jsonpath='{.data.values}' > inject-values.json\n  \
kubectl -n istio-system get cm istio -o jsonpath='{.data.mesh}' > mesh.yaml\n  \
meshpilot kube-inject -f deployment.yaml --injectConfigFile inject-config.yaml --valuesFile inject-values.json \\\n    \
--meshConfigFile mesh.yaml"
)]
pub struct Args {
    /// The manifest to inject; `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    filename: PathBuf,

    /// Where to write the result (default: standard output).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    output: Option<PathBuf>,

    /// The injector config (the `config` key of the ConfigMap istio-sidecar-injector).
    #[arg(long = "injectConfigFile", value_name = "PATH", required = true)]
    inject_config_file: PathBuf,

    /// The injector values (the `values` key of the ConfigMap istio-sidecar-injector).
    #[arg(long = "valuesFile", value_name = "PATH", required = true)]
    values_file: PathBuf,

    /// The mesh config (the `mesh` key of the ConfigMap istio); Istio's defaults when not given.
    #[arg(long = "meshConfigFile", value_name = "PATH")]
    mesh_config_file: Option<PathBuf>,

    /// The control plane revision the injected proxies belong to.
    #[arg(short = 'r', long = "revision", default_value = "")]
    revision: String,
}

fn read(path: &Path) -> Result<String, String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        io::stdin().read_to_string(&mut text).map_err(|e| format!("standard input: {e}"))?;
        return Ok(text);
    }
    api::yaml::read_config_text(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn inject(args: &Args) -> Result<(String, Vec<String>), String> {
    let config_text = read(&args.inject_config_file)?;
    let config = inject::config::InjectConfig::parse(&config_text)
        .map_err(|e| format!("{}: {e}", args.inject_config_file.display()))?;
    let values = inject::config::Values::parse(&read(&args.values_file)?)
        .map_err(|e| format!("{}: {e}", args.values_file.display()))?;
    let mesh = match &args.mesh_config_file {
        Some(path) => {
            inject::mesh::apply_mesh_config(&read(path)?).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => inject::mesh::default_mesh_config(),
    };
    let revision = if args.revision == "default" { String::new() } else { args.revision.clone() };
    let kube_inject = inject::resource::KubeInject {
        config: &config,
        values: &values,
        mesh,
        revision,
        native_sidecar: std::env::var("ENABLE_NATIVE_SIDECARS").is_ok_and(|v| v == "true"),
    };
    let mut warnings = Vec::new();
    let manifest = read(&args.filename)?;
    let out = kube_inject
        .stream(&manifest, &mut warnings)
        .map_err(|e| format!("{}: {e}", args.filename.display()))?;
    Ok((out, warnings))
}

/// Runs the command; returns the process exit status.
pub fn run(args: &Args) -> ExitCode {
    let (out, warnings) = match inject(args) {
        Ok(result) => result,
        Err(e) => {
            eprintln!("Error: {e}");
            return ExitCode::from(1);
        }
    };
    if !warnings.is_empty() {
        eprintln!();
        for w in &warnings {
            eprintln!("{w}");
        }
    }
    let written = match &args.output {
        Some(path) => std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display())),
        None => io::stdout().lock().write_all(out.as_bytes()).map_err(|e| e.to_string()),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: writing output: {e}");
            ExitCode::from(1)
        }
    }
}
