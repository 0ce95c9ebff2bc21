//! `meshpilot`: an Istio-compatible service-mesh control plane.
//!
//! Subcommands:
//! - `validate -f PATH…`: check Istio config files offline, like `istioctl validate`.
//! - `analyze [FILE…]`: Istio's config analyzers over files and/or a cluster, like `istioctl analyze`.
//! - `configz --config-dir DIR…`: load config directories and print the config in force.
//! - `discovery --config-dir DIR… | --kubeconfig PATH`: the control plane (xDS, debug HTTP, metrics).
//! - `apply -f`, `create -f`, `get`, `delete`: Istio config in a Kubernetes cluster, validated first.
//! - `proxy-status [PROXY]`, `proxy-config KIND PROXY`: a running control plane's view of its proxies.
//! - `status KIND/NAMESPACE/NAME`: whether a config object is applied (proxies concerned, ACK/NACK).
//! - `create-remote-secret --name NAME`: the Secret giving another cluster's control plane access to this
//!   one, like `istioctl create-remote-secret`.
//! - `kube-inject -f FILE`: Istio's sidecar injection applied to manifests offline.

mod analyze;
mod ca;
mod cluster;
mod config_sources;
mod config_status;
mod configz;
mod credentials;
mod debug_client;
mod discovery;
mod discovery_flags;
mod env;
mod gateway_api;
mod ingress_source;
mod kube_inject;
mod mesh_source;
mod process_metrics;
mod proxy;
mod proxy_configs;
mod remote_secret;
mod shutdown;
mod status;
mod trim;
mod validate;
mod webhook;

use std::process::ExitCode;

/// With the `mimalloc` feature the process allocates with mimalloc instead of the system allocator
/// (BENCHMARKS.md, "Allocator": the A/B it was chosen by; run it with `MIMALLOC_PURGE_DELAY=50`, since
/// mimalloc v3's default 1,000 ms keeps freed pages long enough to cost tens of MiB).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

/// meshpilot: an Istio-compatible service-mesh control plane.
#[derive(Parser, Debug)]
#[command(name = "meshpilot", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate Istio config files (like `istioctl validate`).
    #[command(visible_alias = "v")]
    Validate(validate::Args),
    /// Analyze Istio config (files and/or a cluster) and print validation messages (like `istioctl analyze`).
    Analyze(analyze::Args),
    /// Load --config-dir directories and print the config in force (Istio's /debug/configz shape).
    Configz(configz::Args),
    /// Run the control plane: serve --config-dir and/or --kubeconfig config over xDS (Istio's pilot-discovery).
    Discovery(Box<discovery::Args>),
    /// The CA outside Kubernetes: `ca issue` signs credentials for a workload (pilot-agent's PROV_CERT).
    #[command(subcommand)]
    Ca(ca::CaCommand),
    /// Validate Istio config files, then server-side apply them to the cluster (create or update).
    Apply(cluster::WriteArgs),
    /// Validate Istio config files, then create their objects in the cluster (like `istioctl create -f`).
    Create(cluster::WriteArgs),
    /// Show Istio config objects in the cluster: `get KIND [NAME] [-n NS | -A] [-o yaml|json|name]`.
    Get(cluster::GetArgs),
    /// Delete Istio config objects from the cluster: `delete KIND NAME… [-n NS]` or `delete -f PATH`.
    Delete(cluster::DeleteArgs),
    /// Show each connected proxy's xDS sync status (like `istioctl proxy-status`).
    #[command(visible_alias = "ps")]
    ProxyStatus(proxy::status::Args),
    /// Show the config meshpilot generates for a proxy: clusters, listeners, routes, endpoints, secret.
    #[command(subcommand, visible_alias = "pc", long_about = proxy::config::LONG_ABOUT)]
    ProxyConfig(proxy::config::ConfigCommand),
    /// Show whether a config object is applied: `status KIND/NAMESPACE/NAME` (proxies, ACKED/PENDING/NACKED).
    Status(status::Args),
    /// Print a Secret giving another cluster's control plane read access to this cluster (like
    /// `istioctl create-remote-secret`).
    CreateRemoteSecret(remote_secret::Args),
    KubeInject(kube_inject::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = err.print();
            return if err.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    // Logs go to stderr; RUST_LOG sets the level (else the server's --log_output_level, default
    // info; warnings for the other commands).
    let (default_filter, json) = match &cli.command {
        Command::Discovery(args) => (args.log.filter(), args.log.json()),
        _ => ("warn".to_string(), false),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Analyze(args) => analyze::run(&args),
        Command::KubeInject(args) => kube_inject::run(&args),
        Command::Configz(args) => configz::run(&args),
        Command::Discovery(args) => discovery::run(&args),
        Command::Ca(command) => ca::run(&command),
        Command::Apply(args) => cluster::run_write(&args, false),
        Command::Create(args) => cluster::run_write(&args, true),
        Command::Get(args) => cluster::run_get(&args),
        Command::Delete(args) => cluster::run_delete(&args),
        Command::ProxyStatus(args) => proxy::status::run(&args),
        Command::ProxyConfig(command) => proxy::config::run(&command),
        Command::Status(args) => status::run(&args),
        Command::CreateRemoteSecret(args) => remote_secret::run(&args),
    }
}
