//! meshpilot's SDS file server: the secrets `file-cert:CERT~KEY` and `file-root:CA` that the
//! generators reference for certificate files of DestinationRules and Gateways
//! (names: [`model::file_secret`]; references: `networking::sds`), read from files under `--file-secret-root`, sent inline, and re-pushed when
//! the files change. In Istio, istio-agent answers these names from the proxy's own file system
//! (`security/pkg/nodeagent/cache`); see [`file_secrets`] for why and how meshpilot's control plane
//! does it.
//!
//! - [`file_secrets`]: [`FileSecrets`] (which files may be read, the cache, the file watch, the
//!   SDS-only pushes).
//! - [`credentials`]: [`CredentialSecrets`], the `credentialName` secrets (`kubernetes://NAME`,
//!   `kubernetes-gateway://NS/NAME`) from Kubernetes Secrets, authorized per proxy as istiod does.
//! - [`config_dir`]: [`ConfigDirSecrets`], Kubernetes Secret documents in `--config-dir`.
//! - [`pem`]: the PEM checks a certificate chain or key file must pass (`rustls-pki-types`).
//! - [`key_match`]: does a private key belong to its certificate (`x509-parser`, `ring`).
//!
//! The crate does not know the discovery server: [`FileSecrets::run`] pushes through an
//! `xds::ConnectionRegistry` with an event the caller builds from the changed names.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::{path::PathBuf, time::Duration};

pub mod config_dir;
pub mod credentials;
pub mod file_secrets;
pub mod key_match;
pub mod pem;

pub use config_dir::ConfigDirSecrets;
pub use credentials::CredentialSecrets;
pub use file_secrets::{FileSecretStatus, FileSecrets};

/// Which certificate files the control plane may read to serve the SDS secrets `file-cert:CERT~KEY`
/// and `file-root:CA` (see [`file_secrets`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSecretOptions {
    /// `--file-secret-root` (repeatable): only files under these directories (after resolving `..`
    /// and symlinks) are read. Empty (the default): no file is read and every such name is refused,
    /// because any proxy may ask for any name and would otherwise read the control plane's files.
    pub roots: Vec<PathBuf>,
    /// Quiet time after a file-system event before the files are re-read (100 ms).
    pub debounce: Duration,
    /// Every how often all names are re-read even without events (60 s; `None` never): covers lost
    /// events and files appearing in directories that did not exist.
    pub recheck_interval: Option<Duration>,
}

impl Default for FileSecretOptions {
    fn default() -> Self {
        FileSecretOptions {
            roots: Vec::new(),
            debounce: Duration::from_millis(100),
            recheck_interval: Some(Duration::from_secs(60)),
        }
    }
}
