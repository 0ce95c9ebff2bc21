//! IP addresses and CIDR prefixes as Go's `netip` reads them, and Unix socket addresses.

use super::go::{go_atoi_ok, go_quote};

/// An address as Go's `netip.ParseAddr` reads it.
struct GoAddr {
    is6: bool,
    zoned: bool,
}

fn addr_error(input: &str, msg: &str, at: &str) -> String {
    if at.is_empty() {
        format!("ParseAddr({}): {msg}", go_quote(input))
    } else {
        format!("ParseAddr({}): {msg} (at {})", go_quote(input), go_quote(at))
    }
}

/// Reads the dotted-decimal IPv4 text `s` (part of `input`), Go's rules: four fields of 1 to 3 digits,
/// no leading zeros, each at most 255.
fn parse_ipv4_fields(input: &str, s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let (mut value, mut digits, mut dots) = (0u32, 0u32, 0u32);
    for (i, &c) in b.iter().enumerate() {
        if c.is_ascii_digit() {
            if digits == 1 && value == 0 {
                return Err(addr_error(input, "IPv4 field has octet with leading zero", ""));
            }
            value = value * 10 + u32::from(c - b'0');
            digits += 1;
            if value > 255 {
                return Err(addr_error(input, "IPv4 field has value >255", ""));
            }
        } else if c == b'.' {
            if i == 0 || i == b.len() - 1 || b[i - 1] == b'.' {
                return Err(addr_error(input, "IPv4 field must have at least one digit", &s[i..]));
            }
            if dots == 3 {
                return Err(addr_error(input, "IPv4 address too long", ""));
            }
            dots += 1;
            value = 0;
            digits = 0;
        } else {
            return Err(addr_error(input, "unexpected character", s.get(i..).unwrap_or("")));
        }
    }
    if dots < 3 {
        return Err(addr_error(input, "IPv4 address too short", ""));
    }
    Ok(())
}

/// Reads IPv6 text with an optional `%zone`, Go's rules.
fn parse_ipv6(input: &str) -> Result<GoAddr, String> {
    let (mut s, zoned) = match input.split_once('%') {
        Some((_, "")) => return Err(addr_error(input, "zone must be a non-empty string", "")),
        Some((addr, _)) => (addr, true),
        None => (input, false),
    };
    let addr_end = s.len();
    let mut filled = 0usize; // bytes of the 16-byte address parsed so far
    let mut ellipsis: Option<usize> = None;
    if let Some(rest) = s.strip_prefix("::") {
        ellipsis = Some(0);
        s = rest;
        if s.is_empty() {
            return Ok(GoAddr { is6: true, zoned });
        }
    }
    while filled < 16 {
        let b = s.as_bytes();
        let mut off = 0;
        let mut acc = 0u32;
        while off < b.len() {
            let Some(v) = (b[off] as char).to_digit(16) else {
                break;
            };
            acc = (acc << 4) + v;
            if off > 3 {
                return Err(addr_error(input, "each group must have 4 or less digits", s));
            }
            if acc > 0xFFFF {
                return Err(addr_error(input, "IPv6 field has value >=2^16", s));
            }
            off += 1;
        }
        if off == 0 {
            return Err(addr_error(input, "each colon-separated field must have at least one digit", s));
        }
        if b.get(off) == Some(&b'.') {
            if ellipsis.is_none() && filled != 12 {
                return Err(addr_error(
                    input,
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    s,
                ));
            }
            if filled + 4 > 16 {
                return Err(addr_error(
                    input,
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    s,
                ));
            }
            let start = addr_end - s.len();
            parse_ipv4_fields(input, &input[start..addr_end])?;
            s = "";
            filled += 4;
            break;
        }
        filled += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Err(addr_error(input, "unexpected character, want colon", s));
        }
        if s.len() == 1 {
            return Err(addr_error(input, "colon must be followed by more characters", s));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Err(addr_error(input, "multiple :: in address", s));
            }
            ellipsis = Some(filled);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_error(input, "trailing garbage after address", s));
    }
    if filled < 16 {
        if ellipsis.is_none() {
            return Err(addr_error(input, "address string too short", ""));
        }
    } else if ellipsis.is_some() {
        return Err(addr_error(input, "the :: must expand to at least one field of zeros", ""));
    }
    Ok(GoAddr { is6: true, zoned })
}

/// Reads an IP address the way Go's `netip.ParseAddr` does (IPv4 without leading zeros, IPv6 with an
/// optional zone); the error is Go's message.
fn parse_go_addr(s: &str) -> Result<GoAddr, String> {
    for b in s.bytes() {
        match b {
            b'.' => {
                return parse_ipv4_fields(s, s).map(|()| GoAddr { is6: false, zoned: false });
            }
            b':' => return parse_ipv6(s),
            b'%' => return Err(addr_error(s, "missing IPv6 address", "")),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", ""))
}

/// Reads a CIDR prefix the way Go's `netip.ParsePrefix` does (the address may have host bits set; the
/// length is plain decimal without sign or leading zeros); the error is Go's message.
pub fn parse_go_prefix(s: &str) -> Result<(), String> {
    let fail = |msg: &str| Err(format!("netip.ParsePrefix({}): {msg}", go_quote(s)));
    let Some((addr, bits)) = s.rsplit_once('/') else {
        return fail("no '/'");
    };
    let ip = match parse_go_addr(addr) {
        Ok(ip) => ip,
        Err(e) => return fail(&e),
    };
    if ip.is6 && ip.zoned {
        return fail("IPv6 zones cannot be present in a prefix");
    }
    let bad_bits = || fail(&format!("bad bits after slash: {}", go_quote(bits)));
    if bits.len() > 1 && !(b'1'..=b'9').contains(&bits.as_bytes()[0]) {
        return bad_bits();
    }
    if !go_atoi_ok(bits) {
        return bad_bits();
    }
    let max = if ip.is6 { 128 } else { 32 };
    match bits.parse::<i64>() {
        Ok(n) if (0..=max).contains(&n) && ipnet_accepts(ip.is6, n) => Ok(()),
        _ => fail("prefix length out of range"),
    }
}

/// Cross-checks a prefix length with the `ipnet` crate's rules.
fn ipnet_accepts(is6: bool, bits: i64) -> bool {
    let Ok(bits) = u8::try_from(bits) else {
        return false;
    };
    if is6 {
        ipnet::Ipv6Net::new(std::net::Ipv6Addr::UNSPECIFIED, bits).is_ok()
    } else {
        ipnet::Ipv4Net::new(std::net::Ipv4Addr::UNSPECIFIED, bits).is_ok()
    }
}

/// `true` for an IPv4 or IPv6 address as Go's `netip.ParseAddr` reads it (Istio's
/// `netutil.IsValidIPAddress`): no CIDR suffix, no leading zeros in IPv4, IPv6 zones (`fe80::1%eth0`)
/// allowed.
pub fn is_valid_ip_address(s: &str) -> bool {
    parse_go_addr(s).is_ok()
}

/// `true` for an IPv4 address ([`is_valid_ip_address`] and dotted decimal).
pub fn is_ipv4_address(s: &str) -> bool {
    parse_go_addr(s).is_ok_and(|a| !a.is6)
}

/// `true` for an IPv6 address ([`is_valid_ip_address`] and not IPv4), including IPv4-mapped ones.
pub fn is_ipv6_address(s: &str) -> bool {
    parse_go_addr(s).is_ok_and(|a| a.is6)
}

/// Checks an IP address, following Istio's `ValidateIPAddress`: `1.1.A.1 is not a valid IP`.
pub fn validate_ip_address(addr: &str) -> Result<(), String> {
    if is_valid_ip_address(addr) { Ok(()) } else { Err(format!("{addr} is not a valid IP")) }
}

/// Checks a subnet in CIDR notation or a plain IP address, following Istio's `ValidateIPSubnet`:
/// `1.1.1.1/48 is not a valid CIDR block` (text with exactly one `/`), else as [`validate_ip_address`].
pub fn validate_ip_subnet(subnet: &str) -> Result<(), String> {
    if subnet.matches('/').count() == 1 {
        return match parse_go_prefix(subnet) {
            Ok(()) => Ok(()),
            Err(_) => Err(format!("{subnet} is not a valid CIDR block")),
        };
    }
    validate_ip_address(subnet)
}

/// Checks one entry of an AuthorizationPolicy `ipBlocks`-style list, following Istio's
/// `security.ValidateIPs`: text with a `/` must be a CIDR (`bad CIDR range (…): netip.ParsePrefix(…): …`),
/// other text an IP address (`bad IP address (…)`).
pub fn validate_ip_block(value: &str) -> Result<(), String> {
    if value.contains('/') {
        parse_go_prefix(value).map_err(|e| format!("bad CIDR range ({value}): {e}"))
    } else if is_valid_ip_address(value) {
        Ok(())
    } else {
        Err(format!("bad IP address ({value})"))
    }
}

/// Checks a Unix domain socket address (after `unix://`), following Istio's `ValidateUnixAddress`:
/// an absolute file path (not ending in `/`) or an abstract socket starting with `@`.
pub fn validate_unix_address(addr: &str) -> Result<(), String> {
    if addr.is_empty() {
        return Err("unix address must not be empty".to_owned());
    }
    if addr.starts_with('@') {
        return Ok(());
    }
    if !addr.starts_with('/') || addr.ends_with('/') {
        return Err(format!("{addr} is not an absolute path to a file"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::tests::expect;

    // TestValidationIPAddress, TestValidationIPSubnet, and Go's netip parsing rules.
    #[test]
    fn ip_addresses() {
        for (addr, ok) in [
            ("1.1.1.1", true),
            ("1.1.A.1", false),
            ("2001:1::1", true),
            ("2001:1:G::1", false),
            ("01.1.1.1", false),
            ("256.1.1.1", false),
            ("1.1.1", false),
            ("::", true),
            ("::ffff:1.2.3.4", true),
            ("fe80::1%eth0", true),
            ("fe80::1%", false),
            ("1.2.3.4%eth0", false),
            ("1::2::3", false),
            ("", false),
            ("1.1.1.1/24", false),
        ] {
            assert_eq!(validate_ip_address(addr).is_ok(), ok, "{addr}");
        }
        assert_eq!(validate_ip_address("1.1.A.1").unwrap_err(), "1.1.A.1 is not a valid IP");
        assert!(is_ipv4_address("10.0.0.1") && !is_ipv6_address("10.0.0.1"));
        assert!(is_ipv6_address("::1") && !is_ipv4_address("::1"));
        for (subnet, ok) in [
            ("1.1.1.1/24", true),
            ("1.1.1.1/48", false),
            ("2001:1::1/64", true),
            ("2001:1::1/132", false),
            ("1.1.1.1", true),
            ("1.1.1.1/024", false),
            ("1.1.1.1/+24", false),
            ("1.1.1.1/", false),
            ("fe80::1%eth0/64", false),
            ("1.1.1.1/2/3", false),
        ] {
            assert_eq!(validate_ip_subnet(subnet).is_ok(), ok, "{subnet}");
        }
        assert_eq!(validate_ip_subnet("1.1.1.1/48").unwrap_err(), "1.1.1.1/48 is not a valid CIDR block");
        assert_eq!(
            validate_ip_block("1.2.3.4/33").unwrap_err(),
            r#"bad CIDR range (1.2.3.4/33): netip.ParsePrefix("1.2.3.4/33"): prefix length out of range"#
        );
        assert_eq!(
            validate_ip_block("1.2.3/8").unwrap_err(),
            r#"bad CIDR range (1.2.3/8): netip.ParsePrefix("1.2.3/8"): ParseAddr("1.2.3"): IPv4 address too short"#
        );
        assert_eq!(validate_ip_block("bad").unwrap_err(), "bad IP address (bad)");
        expect(validate_ip_block("10.0.0.0/8"), None, "cidr");
        expect(validate_unix_address("/var/run/x.sock"), None, "abs");
        expect(validate_unix_address("@abstract"), None, "@");
        expect(validate_unix_address(""), Some("unix address must not be empty"), "empty");
        expect(validate_unix_address("rel/x"), Some("rel/x is not an absolute path to a file"), "rel");
        expect(validate_unix_address("/dir/"), Some("is not an absolute path"), "dir");
    }
}
