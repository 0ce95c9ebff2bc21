//! RFC 3339 timestamps (UTC, whole seconds); [`Periodic`] re-scan timers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A timer for periodic re-scans: ticks every `period`, the first one period from now; never when the
/// period is `None` or zero. A slow tick handler delays the next tick instead of causing a burst of
/// catch-up ticks.
#[derive(Debug)]
pub struct Periodic(Option<tokio::time::Interval>);

impl Periodic {
    /// A timer with `period` (see the type).
    pub fn new(period: Option<Duration>) -> Self {
        Periodic(period.filter(|p| !p.is_zero()).map(|p| {
            let mut t = tokio::time::interval_at(tokio::time::Instant::now() + p, p);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        }))
    }

    /// Waits for the next tick (forever for a timer that never ticks).
    pub async fn tick(&mut self) {
        match self.0.as_mut() {
            Some(t) => {
                t.tick().await;
            }
            None => std::future::pending().await,
        }
    }
}

/// `t` as `YYYY-MM-DDTHH:MM:SSZ` (the form Kubernetes writes `creationTimestamp` in: UTC, whole
/// seconds, the fraction truncated), formatted by `jiff`. Times before 1970 print as the epoch.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // Past jiff's range (year 9999): its last second.
    let secs = i64::try_from(secs).unwrap_or(i64::MAX).min(jiff::Timestamp::MAX.as_second());
    jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH).to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(1_795_000_000)), "2026-11-18T11:06:40Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::new(59, 999_999_999)), "1970-01-01T00:00:59Z", "truncated");
        assert_eq!(rfc3339(UNIX_EPOCH - Duration::from_secs(1)), "1970-01-01T00:00:00Z", "before 1970");
    }
}
