//! `meshpilot create-remote-secret`: prints the Secret `istioctl create-remote-secret` prints
//! (`istioctl/pkg/multicluster/remote_secret.go`), giving another cluster's control plane read access
//! to this one (see `kube_source::remote_secret`). Apply its output in the other cluster:
//!
//! ```text
//! meshpilot --kubeconfig west.yaml create-remote-secret --name west | kubectl --kubeconfig east.yaml apply -f -
//! ```
//!
//! The namespace follows istioctl: `-n` when given, else the current context's namespace of
//! `$KUBECONFIG` (or `~/.kube/config`) when it sets one, else `-i` (default `istio-system`).

use std::{path::PathBuf, process::ExitCode};

use kube_source::remote_secret::{self, RemoteSecretOptions, SecretType};

/// `--type` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeFlag {
    /// `istio-remote-secret-<name>` with the reader service account (a remote cluster).
    Remote,
    /// `istio-kubeconfig` with the `istiod` service account (the config cluster of an external control plane).
    Config,
}

/// Arguments of `meshpilot create-remote-secret` (istioctl's flags).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Kubeconfig of the cluster whose credentials are written (default: $KUBECONFIG, ~/.kube/config,
    /// then the in-cluster service account).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,

    /// Kubeconfig context (default: the current one).
    #[arg(long)]
    context: Option<String>,

    /// Namespace of the service account and the Secret (default: see the command's help).
    #[arg(short = 'n', long)]
    namespace: Option<String>,

    /// Istio system namespace, used when -n is not given and the context sets no namespace.
    #[arg(
        short = 'i',
        long = "istioNamespace",
        visible_alias = "istio-namespace",
        default_value = "istio-system"
    )]
    istio_namespace: String,

    /// Name of the cluster whose credentials are stored (a DNS-1123 label; default: the UID of its
    /// kube-system namespace).
    #[arg(long)]
    name: Option<String>,

    /// Service account whose token is written (default: istio-reader-service-account for --type remote,
    /// istiod for --type config).
    #[arg(long)]
    service_account: Option<String>,

    /// Create the reader service account (and its ClusterRole and ClusterRoleBinding) when missing.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          default_missing_value = "true", require_equals = true, value_name = "BOOL")]
    create_service_account: bool,

    /// The API server address written (default: the kubeconfig's server).
    #[arg(long)]
    server: Option<String>,

    /// `tls-server-name` of the written cluster (when --server is a proxy in front of the API server).
    #[arg(long)]
    tls_server_name: Option<String>,

    /// The token Secret of the service account to use (it must reference the service account).
    #[arg(long)]
    secret_name: Option<String>,

    /// Type of the generated Secret.
    #[arg(long = "type", value_enum, default_value_t = TypeFlag::Remote)]
    secret_type: TypeFlag,
}

/// The kubeconfig files istioctl reads the context namespace from: `$KUBECONFIG`'s, else
/// `~/.kube/config`.
fn default_kubeconfig_paths() -> Vec<PathBuf> {
    match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(list) => std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()).collect(),
        None => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config")).into_iter().collect(),
    }
}

/// Runs the command: prints the Secret on stdout, istioctl's warning (a loopback server) on stderr.
pub fn run(args: &Args) -> ExitCode {
    let namespace = args.namespace.clone().unwrap_or_else(|| {
        remote_secret::context_namespace(&default_kubeconfig_paths())
            .unwrap_or_else(|| args.istio_namespace.clone())
    });
    let options = RemoteSecretOptions {
        cluster_name: args.name.clone(),
        service_account: args.service_account.clone(),
        create_service_account: args.create_service_account,
        secret_type: match args.secret_type {
            TypeFlag::Remote => SecretType::Remote,
            TypeFlag::Config => SecretType::Config,
        },
        server: args.server.clone(),
        tls_server_name: args.tls_server_name.clone(),
        secret_name: args.secret_name.clone(),
        ..RemoteSecretOptions::new(&namespace)
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let made = runtime.block_on(async {
        let (client, server) =
            remote_secret::connect(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
        remote_secret::create_remote_secret(&client, &server, &options).await
    });
    match made {
        Ok(secret) => {
            if let Some(warning) = &secret.warning {
                eprintln!("warn: {warning}");
            }
            print!("{}", secret.to_yaml());
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("Error: {message}");
    ExitCode::from(1)
}
