//! The control plane's resource use, read from `/proc/<pid>` (Linux).
//!
//! - `status`: `VmRSS` (resident set), `VmHWM` (peak resident set), `Threads`;
//! - `stat`: `utime` + `stime` (fields 14 and 15), in clock ticks of 1/100 s (Linux's `USER_HZ` on
//!   every architecture Rust supports).

use std::time::Duration;

use serde::Serialize;

/// Linux `USER_HZ`.
const TICKS_PER_SECOND: f64 = 100.0;

/// One reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Time since the run's origin.
    pub at: Duration,
    /// Resident set, bytes.
    pub rss: u64,
    /// Peak resident set, bytes.
    pub peak_rss: u64,
    /// User + system CPU time since the process started, seconds.
    pub cpu_seconds: f64,
    /// Threads.
    pub threads: u64,
}

/// Parses `/proc/<pid>/status` and `/proc/<pid>/stat` texts.
pub fn parse(status: &str, stat: &str, at: Duration) -> Option<Sample> {
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    let threads = status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok());
    // The command name (field 2) may hold spaces and parentheses: fields start after the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Sample {
        at,
        rss: kb("VmRSS:")? * 1024,
        peak_rss: kb("VmHWM:").unwrap_or(0) * 1024,
        cpu_seconds: (utime + stime) as f64 / TICKS_PER_SECOND,
        threads: threads.unwrap_or(0),
    })
}

/// Reads process `pid` now; `None` if it is gone or unreadable.
pub fn read(pid: u32, at: Duration) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse(&status, &stat, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_stat() {
        let status = "Name:\tmeshpilot\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t7\n";
        let stat = "42 (mesh pilot) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 1000 1 1";
        let s = parse(status, stat, Duration::from_secs(1)).unwrap();
        assert_eq!((s.rss, s.peak_rss, s.threads), (100 << 20, 200 << 20, 7));
        assert!((s.cpu_seconds - 3.0).abs() < 1e-9);
        assert!(parse("", stat, Duration::ZERO).is_none());
    }

    #[test]
    fn reads_this_process() {
        let s = read(std::process::id(), Duration::ZERO).expect("/proc/self");
        assert!(s.rss > 0 && s.peak_rss >= s.rss && s.threads >= 1);
    }
}
