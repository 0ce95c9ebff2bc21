//! Directories watched for changes, for callers that re-read what they need themselves (the config
//! directories' `kind: Secret` documents, the mesh config file): [`watch_dirs`] calls back once per
//! burst of file-system events (after a short settle delay), and on a timer in case an event was lost
//! or a directory appears later. `Access` events (reads) are ignored.

use std::{path::PathBuf, time::Duration};

use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::Periodic;

/// How [`watch_dirs`] watches.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// Watch the directories' subdirectories too.
    pub recursive: bool,
    /// How long a burst of events settles before the callback runs (a ConfigMap mount's `..data`
    /// swap is several events).
    pub settle: Duration,
    /// The callback also runs this often (`None`: only on events).
    pub recheck: Option<Duration>,
    /// What is watched, for the logs (`config directory Secrets`, `mesh config`).
    pub what: &'static str,
}

/// Calls `changed` after each burst of file-system events under `dirs` and every
/// `options.recheck`, until `shutdown`. A directory that cannot be watched (absent, no watcher) is
/// logged and left to the periodic re-check. `changed` runs on this task (keep it short, or hand
/// the work on).
pub async fn watch_dirs(
    dirs: &[PathBuf],
    options: &WatchOptions,
    mut shutdown: model::Shutdown,
    mut changed: impl FnMut(),
) {
    let (tx, mut rx) = mpsc::channel::<()>(1);
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if !matches!(event, Ok(ref e) if matches!(e.kind, notify::EventKind::Access(_))) {
            let _ = tx.try_send(());
        }
    });
    let mode = if options.recursive {
        notify::RecursiveMode::Recursive
    } else {
        notify::RecursiveMode::NonRecursive
    };
    let what = options.what;
    let _watcher = match watcher {
        Ok(mut w) => {
            for dir in dirs {
                if let Err(e) = notify::Watcher::watch(&mut w, dir, mode) {
                    warn!(dir = %dir.display(), "cannot watch the directory for {what}: {e}");
                }
            }
            Some(w)
        }
        Err(e) => {
            warn!("cannot watch directories for {what}: {e}; relying on periodic re-checks");
            None
        }
    };
    let mut ticker = Periodic::new(options.recheck);
    loop {
        tokio::select! {
            () = shutdown.wait() => break,
            Some(()) = rx.recv() => {
                tokio::select! {
                    () = shutdown.wait() => break,
                    () = tokio::time::sleep(options.settle) => {}
                }
                while rx.try_recv().is_ok() {}
                changed();
            }
            () = ticker.tick() => changed(),
        }
    }
    debug!("{what} watch stopped");
}
