//! Turning stream reports and process samples into the run's summary: a human table and JSON.

use std::{fmt::Write as _, time::Duration};

use serde::Serialize;

use crate::{client::StreamReport, procfs::Sample, xds::XdsType};

/// Percentiles of a set of durations, in milliseconds (nearest rank).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    /// Number of values.
    pub count: usize,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The distribution of `values` (`count` 0 and zeros when empty).
pub fn distribution(mut values: Vec<Duration>) -> Distribution {
    if values.is_empty() {
        return Distribution::default();
    }
    values.sort();
    let rank = |p: f64| {
        let i = ((p / 100.0) * values.len() as f64).ceil() as usize;
        ms(values[i.clamp(1, values.len()) - 1])
    };
    let sum: Duration = values.iter().sum();
    Distribution {
        count: values.len(),
        p50_ms: rank(50.0),
        p90_ms: rank(90.0),
        p99_ms: rank(99.0),
        max_ms: ms(values[values.len() - 1]),
        mean_ms: ms(sum) / values.len() as f64,
    }
}

/// One change, over the streams.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChangeSummary {
    /// Sequence number (1, 2, …).
    pub seq: u64,
    /// Streams expected to see it.
    pub affected: usize,
    /// Of those, streams that received and ACKed its marker.
    pub converged: usize,
    /// T1 − T0: response holding the marker received.
    pub received: Distribution,
    /// T2 − T0: its ACK sent (Istio's `pilot_proxy_convergence_time`).
    pub converged_after: Distribution,
    /// Responses per stream while this change was the newest: mean.
    pub responses_per_stream: f64,
    /// The same, largest.
    pub max_responses_per_stream: u64,
    /// Bytes per stream while this change was the newest: mean.
    pub bytes_per_stream: f64,
    /// Bytes to all streams while this change was the newest.
    pub total_bytes: u64,
}

/// Per xDS type totals.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TypeTotals {
    /// `cds`, `eds`, `lds`, `rds`.
    pub xds_type: String,
    /// Responses to all streams.
    pub responses: u64,
    /// Encoded bytes.
    pub bytes: u64,
    /// Resources.
    pub resources: u64,
    /// Connect → first response of this type.
    pub first_response: Distribution,
}

/// The control plane's resource use.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ControlPlane {
    /// Process id sampled.
    pub pid: u32,
    /// RSS before the first stream connected, bytes.
    pub baseline_rss: u64,
    /// RSS when all streams were ready, bytes.
    pub connected_rss: u64,
    /// Largest RSS seen (and `VmHWM`), bytes.
    pub peak_rss: u64,
    /// (connected − baseline) / streams, bytes.
    pub rss_per_stream: f64,
    /// CPU seconds from the first connect to all ready.
    pub cpu_seconds_connect: f64,
    /// CPU seconds from the first change to the end of the last.
    pub cpu_seconds_changes: f64,
    /// CPU seconds over the whole run.
    pub cpu_seconds_total: f64,
    /// Every sample.
    pub samples: Vec<Sample>,
}

/// A connection storm (`--storm`): some streams reconnected at once while the others stayed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StormSummary {
    /// Streams that reconnected.
    pub streams: usize,
    /// Of those, streams ready again (all four types ACKed on the new connection).
    pub ready_again: usize,
    /// Storm → ready again, per stream.
    pub ready_after: Distribution,
    /// Storm → the last stream ready again, ms.
    pub all_ready_ms: f64,
    /// Streams refused with `RESOURCE_EXHAUSTED` during the run (each retried).
    pub rate_limited: u64,
    /// Control-plane RSS just before the storm (steady state), bytes (0 without a pid).
    pub steady_rss: u64,
    /// Largest RSS sampled from the storm to all ready again, bytes.
    pub peak_rss: u64,
    /// RSS after all were ready again and the hold, bytes.
    pub settled_rss: u64,
}

/// Hostile connections (`--hostile`): what they cost and how the server ended them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HostileSummary {
    /// Connections opened.
    pub connections: u32,
    /// Control-plane RSS before they were opened, bytes (0 without a pid).
    pub rss_before: u64,
    /// RSS with all opened, after the hold.
    pub rss_opened: u64,
    /// RSS after the changes (pushes to every proxy, hostile ones included).
    pub rss_after_changes: u64,
    /// Per kind ([`crate::hostile::Kind`]).
    pub kinds: std::collections::BTreeMap<String, crate::hostile::KindReport>,
}

/// The whole run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// What was run: workload, options, the command line.
    pub run: serde_json::Value,
    /// Streams opened.
    pub streams: usize,
    /// Streams that became ready.
    pub ready: usize,
    /// Connect → ready.
    pub startup: Distribution,
    /// First stream started → last stream ready, ms.
    pub all_ready_ms: Option<f64>,
    /// Per type.
    pub types: Vec<TypeTotals>,
    /// NACKs sent.
    pub nacks: u64,
    /// Reconnections.
    pub reconnects: u64,
    /// Responses answered with an ACK or NACK carrying their nonce (equals `responses`).
    pub answered: u64,
    /// Streams that saw any error.
    pub streams_with_errors: usize,
    /// Distinct error texts (first 10).
    pub errors: Vec<String>,
    /// Per change.
    pub changes: Vec<ChangeSummary>,
    /// All changes pooled: T2 − T0 over every (affected stream, change) that converged.
    pub convergence: Distribution,
    /// Largest time until the last affected stream converged, over changes, ms.
    pub time_to_last_ms: f64,
    /// (stream, change) pairs expected but not converged within the timeout.
    pub not_converged: usize,
    /// Control plane, when a pid was known.
    pub control_plane: Option<ControlPlane>,
    /// CPU seconds xds-load itself used (it shares the machine with the control plane).
    pub client_cpu_seconds: f64,
    /// The connection storm, when one was run.
    pub storm: Option<StormSummary>,
    /// The hostile connections, when some were opened.
    pub hostile: Option<HostileSummary>,
}

impl Summary {
    /// Summarises `reports` of a run with `changes` changes.
    pub fn new(run: serde_json::Value, reports: &[StreamReport], changes: u64) -> Summary {
        let mut s = Summary {
            run,
            streams: reports.len(),
            ready: reports.iter().filter(|r| r.ready_after.is_some()).count(),
            startup: distribution(reports.iter().filter_map(|r| r.ready_after).collect()),
            ..Summary::default()
        };
        let first = reports.iter().map(|r| r.started).min();
        let last_ready = reports.iter().filter_map(|r| r.ready_after.map(|d| r.started + d)).max();
        if s.ready == s.streams
            && let (Some(a), Some(b)) = (first, last_ready)
        {
            s.all_ready_ms = Some(ms(b.saturating_sub(a)));
        }
        for t in XdsType::ALL {
            let i = t.index();
            s.types.push(TypeTotals {
                xds_type: t.short().into(),
                responses: reports.iter().map(|r| r.responses[i]).sum(),
                bytes: reports.iter().map(|r| r.bytes[i]).sum(),
                resources: reports.iter().map(|r| r.resources[i]).sum(),
                first_response: distribution(reports.iter().filter_map(|r| r.first_response[i]).collect()),
            });
        }
        s.nacks = reports.iter().map(|r| r.nacks).sum();
        s.reconnects = reports.iter().map(|r| r.reconnects).sum();
        s.answered = reports.iter().map(|r| r.answered).sum();
        s.streams_with_errors = reports.iter().filter(|r| !r.errors.is_empty()).count();
        for e in reports.iter().flat_map(|r| &r.errors) {
            if s.errors.len() < 10 && !s.errors.contains(e) {
                s.errors.push(e.clone());
            }
        }
        let mut pooled = Vec::new();
        for seq in 1..=changes {
            let at = |r: &StreamReport| r.changes.get(seq as usize).cloned().unwrap_or_default();
            let affected: Vec<_> = reports.iter().filter(|r| r.affected).map(at).collect();
            let acked: Vec<Duration> = affected.iter().filter_map(|o| o.acked).collect();
            let all: Vec<_> = reports.iter().map(at).collect();
            pooled.extend(acked.iter().copied());
            let c = ChangeSummary {
                seq,
                affected: affected.len(),
                converged: acked.len(),
                received: distribution(affected.iter().filter_map(|o| o.received).collect()),
                converged_after: distribution(acked),
                responses_per_stream: all.iter().map(|o| o.responses).sum::<u64>() as f64
                    / all.len().max(1) as f64,
                max_responses_per_stream: all.iter().map(|o| o.responses).max().unwrap_or(0),
                bytes_per_stream: all.iter().map(|o| o.bytes).sum::<u64>() as f64 / all.len().max(1) as f64,
                total_bytes: all.iter().map(|o| o.bytes).sum(),
            };
            s.not_converged += c.affected - c.converged;
            s.time_to_last_ms = s.time_to_last_ms.max(c.converged_after.max_ms);
            s.changes.push(c);
        }
        s.convergence = distribution(pooled);
        s
    }

    /// Adds the storm's figures: `reports` of every stream, the refusals counted, the control plane's
    /// samples (may be empty) and the storm's start, end (all ready again) and settled times (since
    /// the run's origin).
    pub fn storm(
        &mut self,
        reports: &[StreamReport],
        rate_limited: u64,
        samples: &[Sample],
        (start, end, settled): (Duration, Duration, Duration),
    ) {
        let stormed: Vec<&StreamReport> = reports.iter().filter(|r| r.storm).collect();
        let again: Vec<Duration> = stormed.iter().filter_map(|r| r.storm_ready_after).collect();
        let before = |t: Duration| samples.iter().rev().find(|s| s.at <= t).map_or(0, |s| s.rss);
        self.storm = Some(StormSummary {
            streams: stormed.len(),
            ready_again: again.len(),
            all_ready_ms: again.iter().max().map_or(0.0, |d| ms(*d)),
            ready_after: distribution(again),
            rate_limited,
            steady_rss: before(start),
            peak_rss: samples
                .iter()
                .filter(|s| s.at >= start && s.at <= end)
                .map(|s| s.rss)
                .max()
                .unwrap_or(0),
            settled_rss: before(settled),
        });
    }

    /// Adds the control plane's samples, with the phase boundaries (times since the run's origin).
    pub fn control_plane(
        &mut self,
        pid: u32,
        samples: Vec<Sample>,
        connect_start: Duration,
        ready: Duration,
        changes: (Duration, Duration),
    ) {
        let before = |t: Duration| samples.iter().rev().find(|s| s.at <= t).or(samples.first()).copied();
        let after = |t: Duration| samples.iter().find(|s| s.at >= t).or(samples.last()).copied();
        let cpu = |a: Option<Sample>, b: Option<Sample>| match (a, b) {
            (Some(a), Some(b)) => (b.cpu_seconds - a.cpu_seconds).max(0.0),
            _ => 0.0,
        };
        let baseline = before(connect_start);
        let connected = after(ready);
        let baseline_rss = baseline.map_or(0, |s| s.rss);
        let connected_rss = connected.map_or(0, |s| s.rss);
        self.control_plane = Some(ControlPlane {
            pid,
            baseline_rss,
            connected_rss,
            peak_rss: samples.iter().map(|s| s.peak_rss.max(s.rss)).max().unwrap_or(0),
            rss_per_stream: connected_rss.saturating_sub(baseline_rss) as f64 / self.streams.max(1) as f64,
            cpu_seconds_connect: cpu(baseline, connected),
            cpu_seconds_changes: cpu(before(changes.0), after(changes.1)),
            cpu_seconds_total: cpu(samples.first().copied(), samples.last().copied()),
            samples,
        });
    }

    /// The human table.
    pub fn table(&self) -> String {
        let mut o = String::new();
        let d = |d: &Distribution| {
            format!(
                "p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1} ms (n={})",
                d.p50_ms, d.p90_ms, d.p99_ms, d.max_ms, d.count
            )
        };
        let _ = writeln!(o, "streams          {} opened, {} ready", self.streams, self.ready);
        let _ = writeln!(o, "connect → ready  {}", d(&self.startup));
        if let Some(t) = self.all_ready_ms {
            let _ = writeln!(o, "all ready after  {t:.0} ms (first connect → last ready)");
        }
        let _ = writeln!(o, "type  responses        bytes   resources  connect → first response");
        for t in &self.types {
            let _ = writeln!(
                o,
                "{:<4}  {:>9}  {:>11}  {:>10}  p50 {:.1}  p99 {:.1}  max {:.1} ms",
                t.xds_type,
                t.responses,
                t.bytes,
                t.resources,
                t.first_response.p50_ms,
                t.first_response.p99_ms,
                t.first_response.max_ms
            );
        }
        let _ = writeln!(
            o,
            "nacks {}  reconnects {}  streams with errors {}",
            self.nacks, self.reconnects, self.streams_with_errors
        );
        for e in &self.errors {
            let _ = writeln!(o, "  error: {e}");
        }
        if !self.changes.is_empty() {
            let _ = writeln!(
                o,
                "change  converged   T2−T0 (ACK sent after the change)                  resp/stream  bytes/stream"
            );
            for c in &self.changes {
                let _ = writeln!(
                    o,
                    "{:>6}  {:>4}/{:<4}  {}  {:>5.2} (max {})  {:>10.0}",
                    c.seq,
                    c.converged,
                    c.affected,
                    d(&c.converged_after),
                    c.responses_per_stream,
                    c.max_responses_per_stream,
                    c.bytes_per_stream
                );
            }
            let _ = writeln!(o, "convergence      {}", d(&self.convergence));
            let _ = writeln!(
                o,
                "time to last     {:.1} ms (worst change); not converged: {}",
                self.time_to_last_ms, self.not_converged
            );
        }
        if let Some(st) = &self.storm {
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            let _ = writeln!(
                o,
                "storm            {}/{} reconnected streams ready again, last after {:.0} ms; storm → ready {}",
                st.ready_again,
                st.streams,
                st.all_ready_ms,
                d(&st.ready_after)
            );
            let _ = writeln!(
                o,
                "                 {} refused with RESOURCE_EXHAUSTED (retried); RSS {:.1} MiB steady → peak {:.1} → {:.1} MiB settled ({:+.1} %)",
                st.rate_limited,
                mib(st.steady_rss),
                mib(st.peak_rss),
                mib(st.settled_rss),
                if st.steady_rss > 0 {
                    (st.settled_rss as f64 / st.steady_rss as f64 - 1.0) * 100.0
                } else {
                    0.0
                }
            );
        }
        if let Some(h) = &self.hostile {
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            let growth = mib(h.rss_after_changes.max(h.rss_opened).saturating_sub(h.rss_before));
            let _ = writeln!(
                o,
                "hostile          {} connections: RSS {:.1} → {:.1} MiB opened → {:.1} MiB after the changes ({:.1} MiB per 1,000)",
                h.connections,
                mib(h.rss_before),
                mib(h.rss_opened),
                mib(h.rss_after_changes),
                growth * 1000.0 / f64::from(h.connections.max(1))
            );
            for (kind, r) in &h.kinds {
                let _ = writeln!(
                    o,
                    "  {kind:<15} {} opened, {} closed by the server {:?} (last after {:.1} s), {} connect errors",
                    r.opened, r.closed_by_server, r.endings, r.max_seconds_to_close, r.connect_errors
                );
            }
        }
        let _ = writeln!(o, "xds-load CPU     {:.2} s", self.client_cpu_seconds);
        if let Some(cp) = &self.control_plane {
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            let _ = writeln!(
                o,
                "control plane    pid {}: RSS {:.1} MiB idle → {:.1} MiB connected (peak {:.1} MiB, {:.1} KiB/stream)",
                cp.pid,
                mib(cp.baseline_rss),
                mib(cp.connected_rss),
                mib(cp.peak_rss),
                cp.rss_per_stream / 1024.0
            );
            let _ = writeln!(
                o,
                "                 CPU {:.2} s connecting, {:.2} s during changes, {:.2} s total",
                cp.cpu_seconds_connect, cp.cpu_seconds_changes, cp.cpu_seconds_total
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ChangeObservation;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v = (1..=100).map(Duration::from_millis).collect();
        let d = distribution(v);
        assert_eq!((d.p50_ms, d.p90_ms, d.p99_ms, d.max_ms, d.count), (50.0, 90.0, 99.0, 100.0, 100));
        assert_eq!(distribution(vec![Duration::from_millis(7)]).p99_ms, 7.0);
        assert_eq!(distribution(Vec::new()).count, 0);
    }

    #[test]
    fn changes_count_affected_streams_only() {
        let obs = |acked: Option<u64>| ChangeObservation {
            received: acked.map(Duration::from_millis),
            acked: acked.map(Duration::from_millis),
            responses: 1,
            bytes: 10,
        };
        let r = |affected: bool, acked: Option<u64>| StreamReport {
            affected,
            ready_after: Some(Duration::from_millis(5)),
            changes: vec![ChangeObservation::default(), obs(acked)],
            ..Default::default()
        };
        let s =
            Summary::new(serde_json::Value::Null, &[r(true, Some(100)), r(true, None), r(false, None)], 1);
        let c = &s.changes[0];
        assert_eq!((c.affected, c.converged, s.not_converged), (2, 1, 1));
        assert_eq!(c.converged_after.max_ms, 100.0);
        assert_eq!(c.total_bytes, 30);
        assert_eq!(s.ready, 3);
    }
}
