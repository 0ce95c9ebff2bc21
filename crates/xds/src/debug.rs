//! Times in debug JSON as Istio's Go structs print them (`time.RFC3339Nano`). The Istio-shaped
//! `/debug/syncz` and `/debug/adsz` that read connection state are built from
//! [`ConnectionSnapshot`](crate::ConnectionSnapshot)s by `meshpilot-http` (`syncz`), which knows the
//! node type.

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats a time as Go's `time.RFC3339Nano` in UTC (trailing zeros of the fraction dropped, no
/// fraction when it is zero), with `jiff`; `None` (and times before 1970, or past jiff's year 9999)
/// as Go's zero time `0001-01-01T00:00:00Z`.
pub fn rfc3339_nano(t: Option<SystemTime>) -> String {
    t.filter(|t| *t >= UNIX_EPOCH)
        .and_then(|t| jiff::Timestamp::try_from(t).ok())
        .map_or_else(|| "0001-01-01T00:00:00Z".to_owned(), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_matches_go() {
        assert_eq!(rfc3339_nano(None), "0001-01-01T00:00:00Z");
        assert_eq!(rfc3339_nano(Some(UNIX_EPOCH)), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::new(1_763_700_000, 120_000_000);
        assert_eq!(rfc3339_nano(Some(t)), "2025-11-21T04:40:00.12Z");
        let t = UNIX_EPOCH + Duration::new(951_782_400, 1); // leap day 2000
        assert_eq!(rfc3339_nano(Some(t)), "2000-02-29T00:00:00.000000001Z");
        let t = UNIX_EPOCH + Duration::new(1_795_000_000, 123_456_000);
        assert_eq!(rfc3339_nano(Some(t)), "2026-11-18T11:06:40.123456Z");
        assert_eq!(rfc3339_nano(Some(UNIX_EPOCH - Duration::from_secs(1))), "0001-01-01T00:00:00Z");
    }
}
