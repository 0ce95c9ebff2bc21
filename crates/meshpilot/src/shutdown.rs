//! Graceful shutdown of `meshpilot discovery` on SIGTERM/SIGINT, bounded as istiod's.
//!
//! istiod (`pilot/pkg/bootstrap/server.go`, `waitForShutdown`) on its stop signal stops its gRPC
//! servers with `GracefulStop` (no new connections or streams; existing RPCs may finish) and, if
//! they have not stopped after `--shutdownDuration` (default 10 s), with `Stop` (every connection
//! closed); the HTTP servers get the same bound. meshpilot does the same with one difference: it
//! ends every xDS stream itself first (the server half-closes it, so proxies reconnect, through
//! their Service address, to another replica) instead of waiting for long-lived ADS streams that
//! would only end at the deadline. Whatever is still running at the deadline is abandoned and the
//! process exits with status 0; the async runtime is then dropped with the same bound
//! ([`RUNTIME_SHUTDOWN`]) so a blocked thread cannot keep the process alive.

use std::{future::Future, pin::Pin, time::Duration};

use tokio::task::JoinHandle;
use tracing::{info, warn};

/// istiod's `--shutdownDuration` default.
pub const DEFAULT_SHUTDOWN_DURATION: &str = "10s";

/// How long dropping the async runtime may wait for blocking threads after the shutdown sequence.
pub const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

/// Parses `--shutdownDuration` (a Go duration such as `10s` or `1m30s`).
///
/// # Errors
/// A message naming the flag and the accepted form.
pub fn parse_shutdown_duration(text: &str) -> Result<Duration, String> {
    validation::common::parse_go_duration(text).map_err(|reason| {
        format!("invalid --shutdownDuration {text:?}: {reason} (a Go duration such as 10s)")
    })
}

/// A spawned task of the server, whatever it returns, as awaited by [`wait_for_tasks`].
pub type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// `handle` as a [`Task`] (its result is dropped: each task logs its own errors).
pub fn task<T: Send + 'static>(handle: JoinHandle<T>) -> Task {
    Box::pin(async move {
        let _ = handle.await;
    })
}

/// Waits for the server's tasks to end, at most `bound`; logs how the shutdown ended. Returns
/// whether every task ended in time (tasks still running are abandoned: the caller exits).
pub async fn wait_for_tasks(tasks: Vec<Task>, streams_closed: usize, bound: Duration) -> bool {
    let pending = tasks.len();
    let all = async {
        for task in tasks {
            task.await;
        }
    };
    match tokio::time::timeout(bound, all).await {
        Ok(()) => {
            info!(streams_closed, "stopped: xDS streams closed, listeners and tasks ended");
            true
        }
        Err(_) => {
            warn!(
                streams_closed,
                tasks = pending,
                bound = ?bound,
                "stopped: not every task ended within --shutdownDuration; exiting anyway"
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_go_durations() {
        assert_eq!(parse_shutdown_duration(DEFAULT_SHUTDOWN_DURATION), Ok(Duration::from_secs(10)));
        assert_eq!(parse_shutdown_duration("1m30s"), Ok(Duration::from_secs(90)));
        let err = parse_shutdown_duration("ten").unwrap_err();
        assert!(err.contains("--shutdownDuration") && err.contains("\"ten\""), "{err}");
    }

    #[tokio::test]
    async fn a_task_that_never_ends_is_abandoned_at_the_bound() {
        let done = task(tokio::spawn(async { 1 }));
        let stuck = task(tokio::spawn(std::future::pending::<()>()));
        // The stuck task never ends, whatever the bound.
        assert!(!wait_for_tasks(vec![done, stuck], 1, Duration::from_millis(50)).await);
        assert!(wait_for_tasks(vec![task(tokio::spawn(async {}))], 0, Duration::from_secs(10)).await);
    }
}
