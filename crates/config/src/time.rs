//! RFC 3339 timestamps (UTC, whole seconds) without a date-time dependency; [`Periodic`] re-scan timers.

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

/// `t` as `YYYY-MM-DDTHH:MM:SSZ` (the form Kubernetes writes `creationTimestamp` in). Times before
/// 1970 print as the epoch.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
    }
}
