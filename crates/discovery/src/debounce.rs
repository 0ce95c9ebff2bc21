//! The debounce rule as a pure state machine (no clock, no I/O): fed each change with the instant it
//! arrived, it says whether to push now or by when.
//!
//! Istio (`pilot/pkg/xds/discovery.go` `debounce`) always waits: a push starts `PILOT_DEBOUNCE_AFTER`
//! (100 ms) after the last event of a batch, or `PILOT_DEBOUNCE_MAX` (10 s) after its first. So one
//! isolated edit costs at least 100 ms before any work starts. meshpilot keeps those two rules for
//! bursts and adds a **leading edge**: a change that arrives after a quiet period of at least
//! `after` since the previous change, with no batch pending, is pushed at once; the changes that follow
//! it within the window form a batch debounced as Istio does. A burst therefore costs at most one extra
//! push (its first change alone), and an isolated change costs no debounce at all.
//! `MESHPILOT_DEBOUNCE_LEADING_EDGE=false` turns the leading edge off (Istio's behaviour).

use std::time::{Duration, Instant};

/// What to do after a change arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Push this change now, on its own (leading edge).
    PushNow,
    /// The change joined the pending batch; push the batch at this deadline unless more changes move it.
    PushAt(Instant),
}

/// The debounce state of one DiscoveryServer.
#[derive(Debug, Clone)]
pub struct Debouncer {
    after: Duration,
    max: Duration,
    leading_edge: bool,
    /// When the previous change arrived (pushed or batched).
    last_event: Option<Instant>,
    /// (first, last) change of the pending batch.
    batch: Option<(Instant, Instant)>,
}

impl Debouncer {
    /// A debouncer with Istio's `after` (quiet time) and `max` (longest wait of a batch); with
    /// `leading_edge`, isolated changes are pushed at once (module documentation).
    pub fn new(after: Duration, max: Duration, leading_edge: bool) -> Debouncer {
        Debouncer { after, max, leading_edge, last_event: None, batch: None }
    }

    /// A change arrived at `now`.
    pub fn on_change(&mut self, now: Instant) -> Decision {
        let quiet = self.last_event.is_none_or(|last| now.saturating_duration_since(last) >= self.after);
        self.last_event = Some(now);
        if self.leading_edge && quiet && self.batch.is_none() {
            return Decision::PushNow;
        }
        let (first, _) = *self.batch.get_or_insert((now, now));
        self.batch = Some((first, now));
        Decision::PushAt(self.deadline().unwrap_or(now))
    }

    /// When the pending batch is due (`None`: no batch pending).
    pub fn deadline(&self) -> Option<Instant> {
        self.batch.map(|(first, last)| (last + self.after).min(first + self.max))
    }

    /// The pending batch was pushed (call at its deadline).
    pub fn batch_pushed(&mut self) {
        self.batch = None;
    }

    /// Whether a batch is pending.
    pub fn has_batch(&self) -> bool {
        self.batch.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AFTER: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(10);

    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    #[test]
    fn an_isolated_change_is_pushed_at_once() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(AFTER, MAX, true);
        assert_eq!(d.on_change(t0), Decision::PushNow);
        assert!(!d.has_batch());
        // Another isolated change after a quiet period: at once again.
        assert_eq!(d.on_change(at(t0, 150)), Decision::PushNow);
    }

    #[test]
    fn changes_within_the_window_form_one_batch_debounced_as_istio() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(AFTER, MAX, true);
        assert_eq!(d.on_change(t0), Decision::PushNow);
        assert_eq!(d.on_change(at(t0, 10)), Decision::PushAt(at(t0, 110)));
        assert_eq!(d.on_change(at(t0, 50)), Decision::PushAt(at(t0, 150)), "the quiet time restarts");
        assert_eq!(d.deadline(), Some(at(t0, 150)));
        d.batch_pushed();
        // A change right after the batch (within `after` of the last change) starts a new batch...
        assert_eq!(d.on_change(at(t0, 120)), Decision::PushAt(at(t0, 220)));
        d.batch_pushed();
        // ...one after a quiet period is pushed at once.
        assert_eq!(d.on_change(at(t0, 400)), Decision::PushNow);
    }

    #[test]
    fn a_burst_costs_two_pushes_at_most() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(AFTER, MAX, true);
        let mut pushes = 0;
        for i in 0..1000u64 {
            // One change per millisecond for a second.
            if d.on_change(at(t0, i)) == Decision::PushNow {
                pushes += 1;
            }
        }
        assert!(d.has_batch());
        d.batch_pushed();
        pushes += 1;
        assert_eq!(pushes, 2, "the leading change, then one merged batch");
    }

    #[test]
    fn a_batch_never_waits_longer_than_max() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(AFTER, Duration::from_millis(300), true);
        assert_eq!(d.on_change(t0), Decision::PushNow);
        let mut last = Decision::PushNow;
        for i in 1..=50u64 {
            last = d.on_change(at(t0, i * 20));
        }
        // The batch started at 20 ms: due at 320 ms however long the changes go on.
        assert_eq!(last, Decision::PushAt(at(t0, 320)));
    }

    #[test]
    fn without_the_leading_edge_every_change_waits_as_in_istio() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(AFTER, MAX, false);
        assert_eq!(d.on_change(t0), Decision::PushAt(at(t0, 100)));
        d.batch_pushed();
        assert_eq!(d.on_change(at(t0, 500)), Decision::PushAt(at(t0, 600)));
    }
}
