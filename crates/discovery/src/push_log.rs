//! The recent pushes: a bounded ring buffer of [`PushRecord`]s that
//! [`DiscoveryServer`](crate::DiscoveryServer) appends to when a merged push completes, for the web status page and
//! debugging ("did my change cause a push, why, to how many proxies?").
//!
//! Istio has no such log (its push history lives in metrics and logs: `pilot_xds_pushes`,
//! `pilot_push_triggers`, `pilot_proxy_convergence_time`); the fields follow Istio's terms: the push
//! version (the `PushContext` version, `<RFC 3339 time>/<counter>`), the trigger reasons
//! (`TriggerReason`: `config`, `endpoint`, `service`, `debug`, …), full vs incremental (Istio's
//! `PushRequest.Full`: an incremental push only updates endpoints).

use std::{
    collections::VecDeque,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

/// How many pushes [`PushLog::default`] keeps.
pub const DEFAULT_CAPACITY: usize = 50;

/// One completed push.
#[derive(Debug, Clone, PartialEq)]
pub struct PushRecord {
    /// The version of the `PushContext` the push carried (`<RFC 3339 time>/<counter>`).
    pub version: String,
    /// The trigger reasons merged into the push, with how many events of each (Istio's
    /// `PushRequest.Reason`; names as in `pilot_push_triggers`' `type` label), in `TriggerReason` order.
    pub reasons: Vec<(String, u32)>,
    /// `true` for a full push (new snapshot from the whole store), `false` for an incremental
    /// (endpoint-only) one.
    pub full: bool,
    /// Config objects named by the push's events (`Kind/namespace/name`), at most
    /// [`PushRecord::MAX_CONFIGS`] of them; [`PushRecord::configs_total`] is the full count.
    pub configs: Vec<String>,
    /// How many config objects the push's events named in all.
    pub configs_total: usize,
    /// How many connected proxies the push was queued to (those the change can matter to).
    pub proxies: usize,
    /// From the start of the push (building the `PushContext`) until it was queued to every proxy
    /// concerned; the proxies' own sending and ACKs come after this.
    pub duration: Duration,
    /// When the push completed (wall clock).
    pub time: SystemTime,
}

impl PushRecord {
    /// How many config keys a record keeps.
    pub const MAX_CONFIGS: usize = 10;

    /// The duration in milliseconds (fractional).
    pub fn duration_ms(&self) -> f64 {
        self.duration.as_secs_f64() * 1000.0
    }
}

/// A bounded log of the most recent pushes, oldest dropped first. Cheap to append (one short lock).
#[derive(Debug)]
pub struct PushLog {
    capacity: usize,
    records: Mutex<VecDeque<PushRecord>>,
    total: AtomicU64,
}

impl Default for PushLog {
    fn default() -> Self {
        PushLog::new(DEFAULT_CAPACITY)
    }
}

impl PushLog {
    /// A log keeping the last `capacity` pushes (at least 1).
    pub fn new(capacity: usize) -> PushLog {
        let capacity = capacity.max(1);
        PushLog { capacity, records: Mutex::new(VecDeque::with_capacity(capacity)), total: AtomicU64::new(0) }
    }

    /// Appends a record, dropping the oldest when full.
    pub fn record(&self, record: PushRecord) {
        let mut records = self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if records.len() == self.capacity {
            records.pop_front();
        }
        records.push_back(record);
        drop(records);
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    /// The kept records, newest first.
    pub fn recent(&self) -> Vec<PushRecord> {
        self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().rev().cloned().collect()
    }

    /// How many records were ever appended (kept or dropped).
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// How many records it keeps at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The record for a finished push of `request`: its reasons, config keys (capped), full or
    /// incremental, how many proxies it was queued to and how long it took since `started`.
    pub fn record_push(
        &self,
        version: &str,
        request: &model::push::PushRequest,
        full: bool,
        proxies: usize,
        started: std::time::Instant,
    ) {
        self.record(PushRecord {
            version: version.to_owned(),
            reasons: request.reasons.iter().map(|(r, n)| (r.as_str().to_owned(), *n)).collect(),
            full,
            configs: request
                .configs_updated
                .iter()
                .take(PushRecord::MAX_CONFIGS)
                .map(|k| k.to_string())
                .collect(),
            configs_total: request.configs_updated.len(),
            proxies,
            duration: started.elapsed(),
            time: SystemTime::now(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::push::{PushRequest, TriggerReason};

    fn record(version: &str) -> PushRecord {
        PushRecord {
            version: version.into(),
            reasons: vec![("config".into(), 1)],
            full: true,
            configs: Vec::new(),
            configs_total: 0,
            proxies: 0,
            duration: Duration::from_millis(3),
            time: SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn keeps_the_newest_records_newest_first() {
        let log = PushLog::new(3);
        assert!(log.recent().is_empty());
        for v in ["a", "b", "c", "d", "e"] {
            log.record(record(v));
        }
        let versions: Vec<String> = log.recent().into_iter().map(|r| r.version).collect();
        assert_eq!(versions, ["e", "d", "c"]);
        assert_eq!(log.total(), 5);
        assert_eq!(log.capacity(), 3);
        assert_eq!(PushLog::new(0).capacity(), 1);
        assert_eq!(PushLog::default().capacity(), DEFAULT_CAPACITY);
    }

    #[test]
    fn a_push_request_becomes_a_record() {
        let log = PushLog::default();
        let keys = (0..12).map(|i| model::ConfigKey {
            kind: api::Kind::VirtualService,
            namespace: "ns".into(),
            name: format!("vs{i:02}"),
        });
        let mut request = PushRequest::config(keys, TriggerReason::Config);
        request.merge_from(PushRequest::forced(TriggerReason::Debug));
        log.record_push("v1", &request, true, 4, std::time::Instant::now());
        let r = &log.recent()[0];
        assert_eq!(r.version, "v1");
        assert_eq!(r.reasons, [("config".to_owned(), 1), ("debug".to_owned(), 1)]);
        assert!(r.full);
        assert_eq!((r.proxies, r.configs_total, r.configs.len()), (4, 12, PushRecord::MAX_CONFIGS));
        assert_eq!(r.configs[0], request.configs_updated.iter().next().unwrap().to_string());
        assert!(r.duration_ms() >= 0.0);
    }
}
