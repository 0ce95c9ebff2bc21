//! Ports, protocols, percentages, weights, HTTP statuses and durations.

use api::{protocol::Protocol, wkt::Duration};

use super::{
    go::{go_duration, go_duration_nanos, go_float},
    hosts::is_dns1123_label,
};

/// Checks a port number, following Istio's `ValidatePort`: `port number 0 must be in the range 1..65535`.
pub fn validate_port(port: i64) -> Result<(), String> {
    if (1..=65535).contains(&port) {
        Ok(())
    } else {
        Err(format!("port number {port} must be in the range 1..65535"))
    }
}

/// Checks a port name, following Istio's `ValidatePortName`: a [DNS label](is_dns1123_label), else
/// `invalid port name: …`.
pub fn validate_port_name(name: &str) -> Result<(), String> {
    if is_dns1123_label(name) { Ok(()) } else { Err(format!("invalid port name: {name}")) }
}

/// Checks a protocol name, following Istio's `ValidateProtocol`: empty (sniffed) or a protocol
/// [`Protocol::parse`] knows, else `unsupported protocol: …`.
pub fn validate_protocol(protocol: &str) -> Result<(), String> {
    if !protocol.is_empty() && Protocol::parse(protocol).is_unsupported() {
        return Err(format!("unsupported protocol: {protocol}"));
    }
    Ok(())
}

// ===== Numbers =====

/// Checks an integer percentage (e.g. outlier detection `maxEjectionPercent`), following Istio's
/// `ValidatePercent`: `percentage 101 is not in range 0..100`.
pub fn validate_percent(value: i64) -> Result<(), String> {
    if (0..=100).contains(&value) {
        Ok(())
    } else {
        Err(format!("percentage {value} is not in range 0..100"))
    }
}

/// Checks the value of a `Percent` message (fault injection percentages), following Istio's
/// `validatePercentage`: 0, or between 0.0001 and 100, else
/// `percentage 101 is neither 0.0, nor in range [0.0001, 100.0]`. (Like Istio, NaN passes.)
#[allow(clippy::manual_range_contains)] // a range check would reject NaN, which Istio lets through
pub fn validate_percentage(value: f64) -> Result<(), String> {
    if value < 0.0 || value > 100.0 || (value > 0.0 && value < 0.0001) {
        return Err(format!("percentage {} is neither 0.0, nor in range [0.0001, 100.0]", go_float(value)));
    }
    Ok(())
}

/// Checks a route weight, following Istio's `validateWeight`: `weight -15 < 0`.
pub fn validate_weight(weight: i64) -> Result<(), String> {
    if weight < 0 { Err(format!("weight {weight} < 0")) } else { Ok(()) }
}

/// Checks an HTTP status code of a fault abort or direct response, following Istio's
/// `validateHTTPStatus`: `HTTP status 100 is not in range 200-599`. (Like Istio, 600 passes.)
pub fn validate_http_status(status: i64) -> Result<(), String> {
    if !(200..=600).contains(&status) {
        return Err(format!("HTTP status {status} is not in range 200-599"));
    }
    Ok(())
}

// ===== Durations =====

/// Checks a duration Istio wants in whole milliseconds and at least 1ms, following Istio's
/// `ValidateDuration`: `duration must be greater than 1ms` (also for zero and negative values),
/// `only durations to ms precision are supported` (also when `nanos` has the opposite sign of
/// `seconds`, which leaves a sub-millisecond remainder).
pub fn validate_duration(d: &Duration) -> Result<(), String> {
    let nanos = go_duration_nanos(d);
    if nanos < 1_000_000 {
        return Err("duration must be greater than 1ms".to_owned());
    }
    if nanos % 1_000_000 != 0 {
        return Err("only durations to ms precision are supported".to_owned());
    }
    Ok(())
}

/// Checks that a duration lies within `[min, max]`, following Istio's `ValidateDurationRange`:
/// `time 277777h46m39s must be >1ms and <1h0m0s` (the bounds themselves pass, whatever the wording says).
pub fn validate_duration_range(d: &Duration, min: Duration, max: Duration) -> Result<(), String> {
    let (value, low, high) = (go_duration_nanos(d), go_duration_nanos(&min), go_duration_nanos(&max));
    if value > high || value < low {
        return Err(format!(
            "time {} must be >{} and <{}",
            go_duration(value),
            go_duration(low),
            go_duration(high)
        ));
    }
    Ok(())
}

/// Checks a connect timeout, following Istio's `ValidateConnectTimeout`: a [valid
/// duration](validate_duration) between 1ms and 1h.
pub fn validate_connect_timeout(d: &Duration) -> Result<(), String> {
    validate_duration(d)?;
    validate_duration_range(d, Duration::from_millis(1), Duration { seconds: 3600, nanos: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::tests::expect;

    #[test]
    fn ports_and_protocols() {
        for (port, valid) in
            [(0, false), (65536, false), (-1, false), (100, true), (1000, true), (65535, true)]
        {
            assert_eq!(validate_port(port).is_ok(), valid, "{port}");
        }
        assert_eq!(validate_port(0).unwrap_err(), "port number 0 must be in the range 1..65535");
        let long = "toolong".repeat(15);
        for (name, valid) in [("", false), ("simple", true), ("full", true), (long.as_str(), false)] {
            assert_eq!(validate_port_name(name).is_ok(), valid, "{name}");
        }
        assert_eq!(validate_port_name("a_b").unwrap_err(), "invalid port name: a_b");
        expect(validate_protocol(""), None, "");
        expect(validate_protocol("HTTP"), None, "HTTP");
        expect(validate_protocol("http1"), Some("unsupported protocol: http1"), "http1");
    }

    #[test]
    fn numbers() {
        expect(validate_percent(0), None, "0");
        expect(validate_percent(100), None, "100");
        expect(validate_percent(101), Some("percentage 101 is not in range 0..100"), "101");
        expect(validate_percent(-1), Some("percentage -1 is not in range 0..100"), "-1");
        for (value, want) in [
            (0.0, None),
            (0.0001, None),
            (100.0, None),
            (50.5, None),
            (f64::NAN, None),
            (101.0, Some("percentage 101 is neither 0.0, nor in range [0.0001, 100.0]")),
            (-1.0, Some("percentage -1 is neither")),
            (0.00001, Some("percentage 1e-05 is neither")),
        ] {
            expect(validate_percentage(value), want, &value.to_string());
        }
        expect(validate_weight(-15), Some("weight -15 < 0"), "-15");
        expect(validate_weight(0), None, "0");
        expect(validate_http_status(199), Some("HTTP status 199 is not in range 200-599"), "199");
        expect(validate_http_status(600), None, "600");
        expect(validate_http_status(601), Some("not in range"), "601");
    }

    // TestValidateDuration, TestValidateConnectTimeout.
    #[test]
    fn durations() {
        let d = |seconds, nanos| Duration { seconds, nanos };
        for (duration, valid) in [
            (d(1, 0), true),
            (d(1, -1), false),
            (d(-11, -1), false),
            (d(0, 1), false),
            (d(1, 1), false),
            (d(0, 1_000_000), true),
            (d(0, 0), false),
            (d(i64::MAX, 0), false),
        ] {
            assert_eq!(validate_duration(&duration).is_ok(), valid, "{duration:?}");
        }
        assert_eq!(validate_duration(&d(0, 0)).unwrap_err(), "duration must be greater than 1ms");
        assert_eq!(validate_duration(&d(1, 1)).unwrap_err(), "only durations to ms precision are supported");
        for (duration, valid) in
            [(d(1, 0), true), (d(31, 0), true), (d(999_999_999, 0), false), (d(3600, 0), true)]
        {
            assert_eq!(validate_connect_timeout(&duration).is_ok(), valid, "{duration:?}");
        }
        assert_eq!(
            validate_connect_timeout(&d(999_999_999, 0)).unwrap_err(),
            "time 277777h46m39s must be >1ms and <1h0m0s"
        );
    }
}
