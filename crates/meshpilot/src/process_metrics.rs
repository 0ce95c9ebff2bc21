//! The standard Prometheus process metrics (`process_*`, as the Prometheus client libraries'
//! process collector exports them), read from Linux's `/proc` at each scrape and appended to
//! `/metrics`. They stand in for istiod's Go runtime series (`go_*`) on the control-plane dashboard
//! (docs/TELEMETRY.md, "Control-plane dashboard").
//!
//! | metric | type | source |
//! |---|---|---|
//! | `process_cpu_seconds_total` | counter | `/proc/self/stat` utime + stime |
//! | `process_resident_memory_bytes` | gauge | `/proc/self/status` `VmRSS` |
//! | `process_virtual_memory_bytes` | gauge | `/proc/self/stat` vsize |
//! | `process_open_fds` | gauge | entries of `/proc/self/fd` |
//! | `process_max_fds` | gauge | `/proc/self/limits` "Max open files" (soft) |
//! | `process_start_time_seconds` | gauge | `/proc/self/stat` starttime + `/proc/stat` btime |
//! | `process_threads` | gauge | `/proc/self/stat` num_threads |
//!
//! Times in `/proc/.../stat` are in the kernel's `USER_HZ`, which is 100 on every architecture Linux
//! runs meshpilot on (Prometheus's own `procfs` library makes the same assumption). Elsewhere than
//! Linux, or when `/proc` cannot be read, nothing is appended (and a debug line is logged).

use std::fmt::Write;

/// The kernel's `USER_HZ`: clock ticks per second of the times in `/proc/<pid>/stat`.
const USER_HZ: f64 = 100.0;

/// The process metrics in Prometheus' text format (HELP, TYPE and one sample each), or an empty string
/// when `/proc` cannot be read.
pub fn render() -> String {
    let read = |path: &str| std::fs::read_to_string(path);
    let (stat, status, system, limits, open_fds) = match (
        read("/proc/self/stat"),
        read("/proc/self/status"),
        read("/proc/stat"),
        read("/proc/self/limits"),
        std::fs::read_dir("/proc/self/fd"),
    ) {
        (Ok(stat), Ok(status), Ok(system), Ok(limits), Ok(fds)) => {
            (stat, status, system, limits, fds.count())
        }
        _ => {
            tracing::debug!("process metrics not rendered: /proc not readable");
            return String::new();
        }
    };
    let texts = ProcTexts { stat: &stat, status: &status, system: &system, limits: &limits };
    render_texts(&texts, open_fds).unwrap_or_else(|reason| {
        tracing::debug!(%reason, "process metrics not rendered");
        String::new()
    })
}

/// The `/proc` files the metrics are read from.
struct ProcTexts<'a> {
    /// `/proc/self/stat`.
    stat: &'a str,
    /// `/proc/self/status`.
    status: &'a str,
    /// `/proc/stat`.
    system: &'a str,
    /// `/proc/self/limits`.
    limits: &'a str,
}

/// The metrics from the texts of the `/proc` files and the number of open descriptors.
fn render_texts(texts: &ProcTexts<'_>, open_fds: usize) -> Result<String, String> {
    // Fields after the command (which may hold spaces and parentheses), from field 3 (`state`) on.
    let fields: Vec<&str> = texts
        .stat
        .rsplit_once(')')
        .ok_or("/proc/self/stat has no command field")?
        .1
        .split_whitespace()
        .collect();
    let field = |n: usize| -> Result<f64, String> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<f64>().ok())
            .ok_or_else(|| format!("/proc/self/stat field {n} missing or not a number"))
    };
    let cpu = (field(14)? + field(15)?) / USER_HZ;
    let threads = field(20)?;
    let start_ticks = field(22)?;
    let virtual_bytes = field(23)?;
    let resident_kib = texts
        .status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .ok_or("/proc/self/status has no VmRSS")?;
    let boot = texts
        .system
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or("/proc/stat has no btime")?;
    // "Max open files   SOFT   HARD   files": the soft limit, or none when unlimited.
    let max_fds = texts
        .limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|soft| soft.parse::<f64>().ok());
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
    };
    metric("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", cpu);
    metric("process_open_fds", "gauge", "Number of open file descriptors.", open_fds as f64);
    if let Some(max) = max_fds {
        metric("process_max_fds", "gauge", "Maximum number of open file descriptors.", max);
    }
    metric("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", virtual_bytes);
    metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", resident_kib * 1024.0);
    metric(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        boot + start_ticks / USER_HZ,
    );
    metric("process_threads", "gauge", "Number of OS threads in the process.", threads);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (mesh pilot) (x)) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 50 0 0 20 0 \
                        7 0 123400 987654321 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0";

    fn texts<'a>(stat: &'a str, limits: &'a str) -> ProcTexts<'a> {
        ProcTexts {
            stat,
            status: "Name:\tmeshpilot\nVmSize:\t  964506 kB\nVmRSS:\t   20480 kB\nThreads:\t7\n",
            system: "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n",
            limits,
        }
    }

    #[test]
    fn renders_each_metric_from_proc_texts() {
        let limits = "Limit  Soft Limit  Hard Limit  Units\nMax open files            1024                 524288               files\n";
        let text = render_texts(&texts(STAT, limits), 12).unwrap();
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} in {text}"))
                .parse()
                .unwrap()
        };
        assert_eq!(value("process_cpu_seconds_total"), 3.0);
        assert_eq!(value("process_open_fds"), 12.0);
        assert_eq!(value("process_max_fds"), 1024.0);
        assert_eq!(value("process_virtual_memory_bytes"), 987_654_321.0);
        assert_eq!(value("process_resident_memory_bytes"), 20480.0 * 1024.0);
        assert_eq!(value("process_start_time_seconds"), 1_700_000_000.0 + 1234.0);
        assert_eq!(value("process_threads"), 7.0);
        assert!(text.contains("# TYPE process_cpu_seconds_total counter\n"), "{text}");
        assert!(text.contains("# TYPE process_resident_memory_bytes gauge\n"), "{text}");
    }

    #[test]
    fn unlimited_descriptors_have_no_max_and_a_short_stat_is_an_error() {
        let limits = "Max open files            unlimited            unlimited            files\n";
        let text = render_texts(&texts(STAT, limits), 3).unwrap();
        assert!(!text.contains("process_max_fds"), "{text}");
        let err = render_texts(&texts("1 (x) S 1 2", limits), 3).unwrap_err();
        assert!(err.contains("field 14"), "{err}");
    }

    #[test]
    fn this_process_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let text = render();
            assert!(text.contains("\nprocess_resident_memory_bytes "), "{text}");
            assert!(text.contains("\nprocess_open_fds "), "{text}");
        }
    }
}
