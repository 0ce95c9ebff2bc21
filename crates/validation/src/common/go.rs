//! Go's formatting of values in Istio's messages: `%q`, `%v` of a float, `time.Duration`, and the
//! string helpers Go's standard library gives Istio (`strings.EqualFold`, `strconv.Atoi`).

use api::wkt::Duration;

/// Quotes text the way Go's `%q` / `strconv.Quote` does: in double quotes, with `"` and `\` escaped,
/// C escapes (`\n`, `\t`, …), `\xNN` for other ASCII control bytes, and `\uNNNN` / `\UNNNNNNNN` for
/// characters Go does not consider printable (format characters, non-ASCII spaces, private use).
pub fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if go_printable(c) => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the
/// ASCII space are printable; controls, format characters, non-ASCII spaces, private-use code points
/// and non-characters are not.
fn go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let u = c as u32;
    let format = matches!(
        u,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private_use = matches!(u, 0xE000..=0xF8FF | 0xF0000..=0x10FFFF);
    let noncharacter = (0xFDD0..=0xFDEF).contains(&u) || (u & 0xFFFE) == 0xFFFE;
    !format && !private_use && !noncharacter
}

/// Formats a float the way Go's `%v` does: shortest round-trip digits, in exponent form
/// (`1e-05`, `1e+06`) when the decimal exponent is below -4 or at least 6, plain otherwise (`150.5`).
pub fn go_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let sci = format!("{value:e}");
    let Some((mantissa, exponent)) = sci.split_once('e') else {
        return format!("{value}");
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    } else {
        format!("{value}")
    }
}

/// The number of nanoseconds Go's `durationpb.AsDuration` gives for a protobuf duration: the exact
/// value, or `i64::MAX` / `i64::MIN` (by the sign of `seconds`) when it overflows Go's `time.Duration`.
pub fn go_duration_nanos(d: &Duration) -> i64 {
    let saturated = if d.seconds < 0 { i64::MIN } else { i64::MAX };
    let Some(whole) = d.seconds.checked_mul(1_000_000_000) else {
        return saturated;
    };
    whole.checked_add(i64::from(d.nanos)).unwrap_or(saturated)
}

/// Formats nanoseconds the way Go's `time.Duration.String` does: `0s`, `999ns`, `1.5µs`, `1.5ms`,
/// `1.5s`, `1m1s`, `1h0m0s`.
pub fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    let body = if u < 1_000 {
        format!("{u}ns")
    } else if u < 1_000_000 {
        format!("{}µs", decimal(u, 3))
    } else if u < 1_000_000_000 {
        format!("{}ms", decimal(u, 6))
    } else {
        let total_secs = u / 1_000_000_000;
        let secs = decimal(u % 60_000_000_000, 9);
        let minutes = (total_secs / 60) % 60;
        let hours = total_secs / 3600;
        if hours > 0 {
            format!("{hours}h{minutes}m{secs}s")
        } else if minutes > 0 {
            format!("{minutes}m{secs}s")
        } else {
            format!("{secs}s")
        }
    };
    format!("{sign}{body}")
}

/// `value / 10^digits` with the remainder as a fraction, trailing zeros dropped (`1500, 3` → `1.5`).
fn decimal(value: u64, digits: u32) -> String {
    let scale = 10u64.pow(digits);
    let (int, frac) = (value / scale, value % scale);
    if frac == 0 {
        return int.to_string();
    }
    let frac = format!("{frac:0width$}", width = digits as usize);
    format!("{int}.{}", frac.trim_end_matches('0'))
}

/// Go's `strings.EqualFold` against an ASCII lower-case word: ASCII letters in any case, plus the
/// non-ASCII characters Unicode folds onto them (`ſ` for `s`, the Kelvin sign for `k`).
pub(super) fn equal_fold_ascii(text: &str, lower_word: &str) -> bool {
    let mut chars = text.chars();
    for want in lower_word.chars() {
        let folded = match chars.next() {
            Some('\u{17F}') => 's',
            Some('\u{212A}') => 'k',
            Some(c) => c.to_ascii_lowercase(),
            None => return false,
        };
        if folded != want {
            return false;
        }
    }
    chars.next().is_none()
}

/// `true` when Go's `strconv.Atoi` reads the text as a number: an optional sign and decimal digits
/// that fit a 64-bit integer (a longer run of digits is "out of range" and does not count).
pub(super) fn go_atoi_ok(text: &str) -> bool {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && text.parse::<i64>().is_ok()
}

/// Parses a boolean as Go's `strconv.ParseBool` does: `1`, `t`, `T`, `TRUE`, `true`, `True` and
/// `0`, `f`, `F`, `FALSE`, `false`, `False`; anything else is `None`. Istio reads boolean flags,
/// environment variables and annotations this way.
pub fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Parses a Go duration (`300ms`, `1.5s`, `2h45m`; units ns, us, µs, ms, s, m, h). Negative
/// durations are refused.
///
/// # Errors
/// A message saying what is accepted.
pub fn parse_go_duration(text: &str) -> Result<std::time::Duration, String> {
    const HINT: &str = "expected a duration such as 100ms, 1.5s, 2m or 1h30m (units ns, us, ms, s, m, h)";
    let s = text.trim();
    if s == "0" {
        return Ok(std::time::Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return Err(HINT.into());
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end =
            rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(|| HINT.to_string())?;
        if num_end == 0 {
            return Err(HINT.into());
        }
        let number: f64 = rest[..num_end].parse().map_err(|_| HINT.to_string())?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let nanos_per = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(HINT.into()),
        };
        rest = &rest[unit_end..];
        total += number * nanos_per;
    }
    if !total.is_finite() || total > 1e18 {
        return Err("duration too large".into());
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(std::time::Duration::from_nanos(total as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_booleans() {
        for text in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(text), Some(true), "{text}");
        }
        for text in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(text), Some(false), "{text}");
        }
        for text in ["", "yes", "tRUE", " true", "2"] {
            assert_eq!(parse_go_bool(text), None, "{text:?}");
        }
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("100ms"), Ok(std::time::Duration::from_millis(100)));
        assert_eq!(parse_go_duration("1.5s"), Ok(std::time::Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("1h30m"), Ok(std::time::Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("500us"), Ok(std::time::Duration::from_micros(500)));
        assert_eq!(parse_go_duration("0"), Ok(std::time::Duration::ZERO));
        for bad in ["", "10", "-1s", "1x", "ms", "1.2.3s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn go_formatting() {
        assert_eq!(go_quote("a\"b\\c\n\té\u{200b}\u{7f}\u{0}"), r#""a\"b\\c\n\té\u200b\x7f\x00""#);
        for (value, want) in [
            (101.0, "101"),
            (0.00001, "1e-05"),
            (1_000_000.0, "1e+06"),
            (100_000.0, "100000"),
            (-1.0, "-1"),
            (150.5, "150.5"),
            (1e20, "1e+20"),
            (123_456_789.0, "1.23456789e+08"),
            (0.0001, "0.0001"),
            (0.00005, "5e-05"),
            (0.0, "0"),
        ] {
            assert_eq!(go_float(value), want, "{value}");
        }
        for (nanos, want) in [
            (3_600_000_000_000, "1h0m0s"),
            (999_999_999_000_000_000, "277777h46m39s"),
            (1_000_000, "1ms"),
            (1_500, "1.5µs"),
            (1_500_000, "1.5ms"),
            (0, "0s"),
            (-1_500_000_000, "-1.5s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (61_000_000_000, "1m1s"),
            (999, "999ns"),
        ] {
            assert_eq!(go_duration(nanos), want, "{nanos}");
        }
        let d = |seconds, nanos| Duration { seconds, nanos };
        assert_eq!(go_duration_nanos(&d(1, 5)), 1_000_000_005);
        assert_eq!(go_duration_nanos(&d(1, -1)), 999_999_999);
        assert_eq!(go_duration_nanos(&d(i64::MAX, 0)), i64::MAX);
        assert_eq!(go_duration_nanos(&d(i64::MIN, 0)), i64::MIN);
        assert_eq!(go_duration_nanos(&d(9_223_372_037, -999_999_999)), i64::MAX);
        assert_eq!(go_duration_nanos(&d(9_223_372_036, 999_999_999)), i64::MAX);
    }
}
