//! Gives the heap that connection churn freed back to the operating system (issue 20,
//! docs/RELIABILITY.md "Connection storms").
//!
//! glibc's allocator returns free memory to the kernel on its own only from the top of each arena.
//! When thousands of proxy connections close while thousands of others open (a control-plane
//! failover as the proxies see it), the closed connections' memory is freed between the new ones'
//! live allocations and stays resident: 10,000 reconnections left meshpilot 11–13 % above its
//! steady state. `malloc_trim(0)` (glibc 2.8 and later) walks every arena and hands each whole free
//! page back with `madvise`. istiod has no such step because Go's runtime scavenger returns free
//! pages by itself; glibc has to be asked.
//!
//! [`run`] samples the xDS connection churn ([`xds::connection_churn`]) once a second and trims once
//! `MESHPILOT_MEMORY_TRIM_AFTER_CLOSES` connections (default 100) have closed since the last trim,
//! as soon as a second passes with no connection opened or closed (the churn is over), or after 30
//! seconds of churn that does not stop; trims are 10 s apart at least. Counted in
//! `meshpilot_memory_trims`.

use std::time::{Duration, Instant};

use xds::ConnectionChurn;

/// The counter of trims.
const TRIMS: &str = "meshpilot_memory_trims";

/// Seconds between samples of the churn counters.
const TICK: Duration = Duration::from_secs(1);

/// Samples (seconds) a due trim waits for the churn to stop before it runs anyway.
const MAX_WAIT_TICKS: u32 = 30;

/// Samples (seconds) from one trim to the next at least, so that churn that never stops costs one
/// trim (≈ 20 ms of one thread on a 700 MiB heap) per 10 s at most.
const MIN_GAP_TICKS: u32 = 10;

/// When to trim: a pure rule over successive samples of the churn counters, one per second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Trigger {
    /// Closes since the last trim that make a trim due.
    after_closes: u64,
    /// Samples a due trim waits for a quiet one.
    max_wait: u32,
    /// Samples from one trim to the next at least.
    min_gap: u32,
    /// The closes counter at the last trim.
    trimmed_at: u64,
    /// Samples since the last trim (`None`: no trim yet).
    since_trim: Option<u32>,
    /// The previous sample.
    previous: ConnectionChurn,
    /// Samples since the trim became due.
    waited: u32,
}

impl Trigger {
    /// A rule that trims after `after_closes` closes (at least 1), at the first sample in which
    /// nothing opened or closed or after `max_wait` samples, and `min_gap` samples after the last
    /// trim at the earliest. `start` is the churn when it begins.
    pub(crate) fn new(after_closes: u64, max_wait: u32, min_gap: u32, start: ConnectionChurn) -> Self {
        Trigger {
            after_closes: after_closes.max(1),
            max_wait,
            min_gap,
            trimmed_at: start.closed,
            since_trim: None,
            previous: start,
            waited: 0,
        }
    }

    /// Takes the next sample; `true` when the heap should be trimmed now.
    pub(crate) fn sample(&mut self, now: ConnectionChurn) -> bool {
        let quiet = now == self.previous;
        self.previous = now;
        self.since_trim = self.since_trim.map(|n| n.saturating_add(1));
        if now.closed.saturating_sub(self.trimmed_at) < self.after_closes {
            self.waited = 0;
            return false;
        }
        self.waited = self.waited.saturating_add(1);
        let gap_ok = self.since_trim.is_none_or(|n| n >= self.min_gap);
        if gap_ok && (quiet || self.waited >= self.max_wait) {
            self.trimmed_at = now.closed;
            self.since_trim = Some(0);
            self.waited = 0;
            return true;
        }
        false
    }
}

/// Whether this build's allocator is glibc's, the one that needs asking ([`release_free_heap`]).
const GLIBC_HEAP: bool = cfg!(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc")));

/// Trims the heap after connection churn until `shutdown`; `after_closes` of 0 disables it, and so
/// does an allocator other than glibc's (nothing to ask: the task returns at once).
pub(crate) async fn run(after_closes: u64, mut shutdown: model::Shutdown) {
    if after_closes == 0 || !GLIBC_HEAP {
        return;
    }
    metrics::describe_counter!(
        TRIMS,
        "Times the freed heap was handed back to the operating system after xDS connection churn."
    );
    let mut trigger = Trigger::new(after_closes, MAX_WAIT_TICKS, MIN_GAP_TICKS, xds::connection_churn());
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.wait() => return,
        }
        let churn = xds::connection_churn();
        if !trigger.sample(churn) {
            continue;
        }
        let before = rss_kib();
        let started = Instant::now();
        // It locks each arena while it walks it: off the runtime's threads.
        let released = tokio::task::spawn_blocking(release_free_heap).await.unwrap_or(false);
        metrics::counter!(TRIMS).increment(1);
        tracing::info!(
            closed = churn.closed,
            connections = churn.opened.saturating_sub(churn.closed),
            released,
            took_ms = started.elapsed().as_millis() as u64,
            rss_before_kib = before.unwrap_or(0),
            rss_after_kib = rss_kib().unwrap_or(0),
            "returned freed heap to the operating system after connection churn"
        );
    }
}

/// Asks glibc to return every whole free page of every arena (`malloc_trim(0)`); whether it
/// returned any. A no-op returning `false` on other C libraries (musl's and mimalloc return
/// freed memory by themselves).
#[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc")))]
#[allow(unsafe_code)]
fn release_free_heap() -> bool {
    // SAFETY: malloc_trim takes no pointer and touches only the allocator's own state, under the
    // allocator's locks (glibc documents it MT-Safe); any thread may call it at any time.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc"))))]
fn release_free_heap() -> bool {
    false
}

/// This process's resident set size in KiB (`VmRSS` of /proc/self/status), where there is one.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn churn(opened: u64, closed: u64) -> ConnectionChurn {
        ConnectionChurn { opened, closed }
    }

    #[test]
    fn trims_once_the_closes_stop_and_not_again_until_more_close() {
        let mut t = Trigger::new(1000, 30, 0, churn(10_500, 0));
        // 10,000 close and reconnect over three seconds: due after the first, but not quiet.
        assert!(!t.sample(churn(12_000, 6_000)));
        assert!(!t.sample(churn(16_000, 10_000)));
        assert!(!t.sample(churn(20_500, 10_000)));
        // The first second with nothing opened or closed.
        assert!(t.sample(churn(20_500, 10_000)));
        assert!(!t.sample(churn(20_500, 10_000)), "nothing closed since the trim");
        // 999 more closes are not enough, the thousandth is.
        assert!(!t.sample(churn(20_500, 10_999)));
        assert!(!t.sample(churn(20_500, 10_999)));
        assert!(!t.sample(churn(20_500, 11_000)));
        assert!(t.sample(churn(20_500, 11_000)));
    }

    #[test]
    fn churn_that_never_stops_is_trimmed_after_the_longest_wait() {
        let mut t = Trigger::new(10, 3, 0, churn(100, 0));
        assert!(!t.sample(churn(120, 20)));
        assert!(!t.sample(churn(140, 40)));
        assert!(t.sample(churn(160, 60)), "third due sample");
        assert!(!t.sample(churn(180, 80)), "the wait starts again");
    }

    #[test]
    fn trims_are_at_least_the_gap_apart() {
        let mut t = Trigger::new(10, 30, 5, churn(0, 0));
        // The first trim has no gap to keep.
        assert!(!t.sample(churn(100, 50)));
        assert!(t.sample(churn(100, 50)));
        // Due and quiet again one sample later: waits until five samples after the trim.
        assert!(!t.sample(churn(100, 80)));
        for _ in 0..3 {
            assert!(!t.sample(churn(100, 80)));
        }
        assert!(t.sample(churn(100, 80)), "fifth sample after the trim");
    }

    #[test]
    fn opens_alone_never_trim() {
        let mut t = Trigger::new(1, 2, 0, churn(0, 0));
        for opened in 1..10 {
            assert!(!t.sample(churn(opened * 100, 0)));
        }
        assert!(!t.sample(churn(900, 0)));
    }
}
