//! Waiting for a condition instead of sleeping, free loopback ports, and where the repository and
//! Istio's test data are.
//!
//! A wait polls its check every [`POLL`] until it holds and fails after its timeout with
//! [`HarnessError::Timeout`] naming what it waited for. The timeout only stops a broken test from
//! hanging; it is not an assertion on speed, so make it generous.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use crate::HarnessError;

/// How often a wait checks its condition (20 ms).
pub const POLL: Duration = Duration::from_millis(20);

fn timeout(what: &str, after: Duration) -> HarnessError {
    HarnessError::Timeout { what: what.to_owned(), after, log_tail: String::new() }
}

/// Polls `check` every [`POLL`] until it returns `Some`, or fails after `timeout`.
///
/// # Errors
/// [`HarnessError::Timeout`] naming `what`.
pub async fn wait_for<T>(
    what: &str,
    timeout_after: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> Result<T, HarnessError> {
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if start.elapsed() > timeout_after {
            return Err(timeout(what, timeout_after));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`wait_for`] with a plain (non-async) predicate.
///
/// # Errors
/// [`HarnessError::Timeout`] naming `what`.
pub async fn wait_until(
    what: &str,
    timeout_after: Duration,
    mut check: impl FnMut() -> bool,
) -> Result<(), HarnessError> {
    wait_for(what, timeout_after, async || check().then_some(())).await
}

/// The blocking form of [`wait_for`] for tests without an async runtime (it sleeps the thread).
///
/// # Errors
/// [`HarnessError::Timeout`] naming `what`.
pub fn wait_for_blocking<T>(
    what: &str,
    timeout_after: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Result<T, HarnessError> {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return Ok(v);
        }
        if start.elapsed() > timeout_after {
            return Err(timeout(what, timeout_after));
        }
        std::thread::sleep(POLL);
    }
}

/// A free TCP port for a test to bind later (on 127.0.0.1 or on all addresses, as Envoy's gateway
/// listeners do).
///
/// Picked **below the kernel's ephemeral range** (`/proc/sys/net/ipv4/ip_local_port_range`, e.g.
/// 32768–60999): a port handed out here can then never be taken by another socket that binds port 0
/// (echo servers, Envoy admin ports, outgoing connections) between the pick and the test's own bind —
/// the race that made a gateway test fail with "cannot bind: Address already in use". Ports are handed
/// out in turn within the process (starting at an offset from the process id, so test binaries run at
/// the same time rarely meet), each checked free on all addresses, and never inside a block of
/// [`free_port_block`]. Falls back to a kernel-chosen port when the range cannot be read or leaves no
/// room.
///
/// # Panics
/// If no port can be bound on loopback.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    if let Some(range) = PortRange::read() {
        let span = range.blocks_low - range.low;
        let offset = std::process::id().wrapping_mul(7919) % span;
        for _ in 0..span {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = (range.low + (offset + n) % span) as u16;
            if bindable(port) {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// The first of `len` consecutive free ports (`len` ≤ [`BLOCK`]), for a peer that derives its ports
/// from a base (pilot-agent's sidecar takes BASE, BASE+20, BASE+21 and BASE+90). Blocks come from
/// their own part of the range below the ephemeral ports, handed out in turn within the process, so
/// no [`free_port`] call and no other block falls inside one; every port of the block is checked free.
///
/// # Panics
/// If `len` exceeds [`BLOCK`], or no free block is found.
pub fn free_port_block(len: u16) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    assert!(u32::from(len) <= BLOCK, "free_port_block: {len} ports asked, at most {BLOCK}");
    let range =
        PortRange::read().expect("free_port_block: /proc/sys/net/ipv4/ip_local_port_range is unreadable");
    let blocks = (range.high - range.blocks_low) / BLOCK;
    let offset = std::process::id().wrapping_mul(31) % blocks;
    for _ in 0..blocks {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = range.blocks_low + ((offset + n) % blocks) * BLOCK;
        if (base..base + u32::from(len)).all(|p| bindable(p as u16)) {
            return base as u16;
        }
    }
    panic!("free_port_block: no block of {len} free ports below the ephemeral range");
}

/// The size of a [`free_port_block`] block (100 ports).
pub const BLOCK: u32 = 100;

fn bindable(port: u16) -> bool {
    std::net::TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// The test ports: `[low, blocks_low)` for single ports, `[blocks_low, high)` for blocks; `high` is
/// the start of the ephemeral range. Up to 12,000 ports, never below 16,000 (clear of the well-known
/// and registered service ports tests meet, such as Istio's 15000s and etcd's 2379); the top 2,000 are
/// blocks.
struct PortRange {
    low: u32,
    blocks_low: u32,
    high: u32,
}

impl PortRange {
    fn read() -> Option<PortRange> {
        let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
        let high: u32 = text.split_whitespace().next()?.parse().ok()?;
        let low = high.saturating_sub(12_000).max(16_000);
        (high > low + 4_000).then_some(PortRange { low, blocks_low: high - 2_000, high })
    }
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Istio's test data beside the repository (`<repo>/../shared/istio-testdata`).
pub fn testdata() -> PathBuf {
    repo_root().join("../shared/istio-testdata")
}

/// Writes `file` in `dir` as a whole: written beside it (`.FILE.tmp`), then renamed, so a watching
/// file source never reads half a file. Panics on I/O errors (test support).
pub fn write_atomic(dir: &std::path::Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_for_returns_the_first_value_that_holds() {
        let mut n = 0;
        let v = wait_for("n to reach 3", Duration::from_secs(5), async || {
            n += 1;
            (n >= 3).then_some(n)
        })
        .await
        .unwrap();
        assert_eq!(v, 3);
    }

    #[tokio::test]
    async fn wait_until_times_out_naming_what_it_waited_for() {
        let e = wait_until("the moon to turn blue", Duration::ZERO, || false).await.unwrap_err();
        assert!(matches!(e, HarnessError::Timeout { .. }), "{e}");
        assert!(e.to_string().contains("waiting for the moon to turn blue"), "{e}");
    }

    #[test]
    fn blocking_wait_times_out_naming_what_it_waited_for() {
        let e = wait_for_blocking::<()>("a server to answer", Duration::ZERO, || None).unwrap_err();
        assert!(e.to_string().contains("waiting for a server to answer"), "{e}");
        assert_eq!(wait_for_blocking("at once", Duration::ZERO, || Some(7)).unwrap(), 7);
    }

    #[test]
    fn free_ports_can_be_bound() {
        let port = free_port();
        assert_ne!(port, 0);
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
    }
}
