//! `meshpilot ca issue`: credentials for a workload outside Kubernetes. Without a cluster there is no
//! service-account token for a sidecar's first certificate request; pilot-agent can instead present a
//! certificate from a provisioning directory (`PROV_CERT`, Istio's VM onboarding). This command signs
//! one with the CA meshpilot serves (`--ca-dir`, or a plugged-in `--root-ca-dir`) and writes Istio's
//! file names: `cert-chain.pem` (leaf, intermediates, root), `key.pem`, `root-cert.pem`.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use security::{CaOptions, IstioCa, SpiffeId};

/// Arguments of `meshpilot ca issue`.
#[derive(clap::Args, Debug)]
pub struct IssueArgs {
    /// The self-signed CA directory of `meshpilot discovery --ca-dir`.
    #[arg(long = "ca-dir", value_name = "DIR")]
    ca_dir: PathBuf,
    /// Istio's plugged-in CA directory (used instead when it holds ca-key.pem).
    #[arg(long = "root-ca-dir", env = "ROOT_CA_DIR", value_name = "DIR", default_value = "./etc/cacerts")]
    root_ca_dir: PathBuf,
    /// Namespace of the identity.
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// Service account of the identity.
    #[arg(long = "service-account", default_value = "default")]
    service_account: String,
    /// Trust domain (mesh config `trustDomain`).
    #[arg(long = "trust-domain", default_value = "cluster.local")]
    trust_domain: String,
    /// Validity in hours (at most MAX_WORKLOAD_CERT_TTL, 2160).
    #[arg(long = "ttl-hours", default_value_t = 24)]
    ttl_hours: u64,
    /// Directory to write cert-chain.pem, key.pem (mode 0600) and root-cert.pem into (created).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// The `ca` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum CaCommand {
    /// Sign a key and certificate for a workload identity (pilot-agent's PROV_CERT directory).
    Issue(IssueArgs),
}

/// Runs `meshpilot ca …`; returns the exit status.
pub fn run(command: &CaCommand) -> ExitCode {
    let CaCommand::Issue(args) = command;
    match issue(args) {
        Ok(id) => {
            println!("wrote {} for {id}", args.out.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("Error: {err}");
            ExitCode::from(1)
        }
    }
}

fn issue(args: &IssueArgs) -> Result<SpiffeId, String> {
    let plugged = args.root_ca_dir.join(security::ca::CA_KEY).exists().then_some(args.root_ca_dir.as_path());
    if plugged.is_none() && !args.ca_dir.join(security::ca::CA_KEY).exists() {
        return Err(format!(
            "no CA in {} (run `meshpilot discovery --secure-grpc-addr … --ca-dir {}` once to create it)",
            args.ca_dir.display(),
            args.ca_dir.display()
        ));
    }
    let options = CaOptions { trust_domain: args.trust_domain.clone(), ..CaOptions::default() };
    let ca = IstioCa::load_or_create(plugged, &args.ca_dir, options).map_err(|e| format!("CA: {e}"))?;
    let id = SpiffeId {
        trust_domain: args.trust_domain.clone(),
        namespace: args.namespace.clone(),
        service_account: args.service_account.clone(),
    };
    let (chain, key) = ca
        .issue_identity(&id, Duration::from_secs(args.ttl_hours.saturating_mul(3600)))
        .map_err(|e| e.to_string())?;
    let out = &args.out;
    let fail = |name: &str, e: std::io::Error| format!("cannot write {}: {e}", out.join(name).display());
    std::fs::create_dir_all(out).map_err(|e| fail("", e))?;
    std::fs::write(out.join("cert-chain.pem"), chain.concat()).map_err(|e| fail("cert-chain.pem", e))?;
    security::ca::write_private(&out.join("key.pem"), key.as_bytes()).map_err(|e| fail("key.pem", e))?;
    std::fs::write(out.join("root-cert.pem"), ca.root_pem()).map_err(|e| fail("root-cert.pem", e))?;
    Ok(id)
}
