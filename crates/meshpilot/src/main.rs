//! `meshpilot`: an Istio-compatible service-mesh control plane.
//!
//! Subcommands:
//! - `validate -f PATH…`: check Istio config files offline, like `istioctl validate`.
//! - `configz --config-dir DIR…`: load config directories and print the config in force.

mod configz;
mod validate;

use std::process::ExitCode;

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
    /// Load --config-dir directories and print the config in force (Istio's /debug/configz shape).
    Configz(configz::Args),
}

fn main() -> ExitCode {
    // Logs go to stderr; RUST_LOG sets the level (default: warnings).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = err.print();
            return if err.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Configz(args) => configz::run(&args),
    }
}
