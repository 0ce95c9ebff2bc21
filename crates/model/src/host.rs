//! Host names as Istio compares them (`pkg/config/host`): wildcard matching, subsets, short-name
//! resolution, intersection of two host lists.
//!
//! A host is a DNS name, possibly with a wildcard left-most label (`*.example.com`) or the single `*`.
//! Comparisons are on the lower-cased text; callers lower-case once when they index.

use std::net::IpAddr;

/// `true` if `name` starts with `*` (`*`, `*.example.com`).
pub fn is_wildcard(name: &str) -> bool {
    name.starts_with('*')
}

/// Istio's `host.Name.Matches`: `true` when the two hosts have a name in common. Symmetric:
/// `*.example.com` matches `a.example.com` and `*.a.example.com`; `*` matches everything.
pub fn matches(a: &str, b: &str) -> bool {
    match (is_wildcard(a), is_wildcard(b)) {
        (true, true) => {
            let (a, b) = (&a[1..], &b[1..]);
            if a.len() < b.len() { b.ends_with(a) } else { a.ends_with(b) }
        }
        (true, false) => b.ends_with(&a[1..]),
        (false, true) => a.ends_with(&b[1..]),
        (false, false) => a == b,
    }
}

/// Istio's `host.Name.SubsetOf`: `true` when every name `a` covers is covered by `b`
/// (`a.example.com` ⊆ `*.example.com` ⊆ `*`).
pub fn subset_of(a: &str, b: &str) -> bool {
    if is_wildcard(a) {
        return is_wildcard(b) && a[1..].ends_with(&b[1..]);
    }
    if is_wildcard(b) {
        return a.ends_with(&b[1..]);
    }
    a == b
}

/// The more specific of two matching hosts (the one that is a subset of the other), as Istio's
/// `Names.Intersection` keeps it; `None` when they do not match.
pub fn intersect<'a>(a: &'a str, b: &'a str) -> Option<&'a str> {
    if !matches(a, b) {
        return None;
    }
    Some(if subset_of(a, b) { a } else { b })
}

/// Istio's `ResolveShortnameToFQDN`: a host without a dot is qualified with the object's namespace
/// and `svc.<domain suffix>` (`reviews` in `bookinfo` → `reviews.bookinfo.svc.cluster.local`); `*`,
/// IP addresses and names with a dot are used as written. An empty host stays empty.
pub fn resolve_short_name(host: &str, namespace: &str, domain_suffix: &str) -> String {
    if host.is_empty() || host == "*" || host.parse::<IpAddr>().is_ok() || host.contains('.') {
        return host.to_string();
    }
    let mut out = host.to_string();
    if !namespace.is_empty() {
        out.push('.');
        out.push_str(namespace);
    }
    if !domain_suffix.is_empty() {
        out.push_str(".svc.");
        out.push_str(domain_suffix);
    }
    out
}

/// Among `candidates`, the one that matches `needle` most specifically (Istio's
/// `MostSpecificHostMatch`): the exact name if present, else the longest matching wildcard.
pub fn most_specific_match<'a, I>(needle: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut best: Option<&'a str> = None;
    for c in candidates {
        if c == needle {
            return Some(c);
        }
        if is_wildcard(c) && matches(c, needle) && subset_of(needle, c) {
            match best {
                Some(b) if b.len() >= c.len() => {}
                _ => best = Some(c),
            }
        }
    }
    best
}

/// An IP written as Envoy wants it in a domain or authority: IPv6 in brackets (Istio's
/// `IPv6Compliant`); anything else unchanged.
pub fn ipv6_compliant(host: &str) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => format!("[{host}]"),
        _ => host.to_string(),
    }
}

/// `host:port` with IPv6 in brackets (Istio's `util.DomainName`).
pub fn domain_name(host: &str, port: u32) -> String {
    use std::fmt::Write;
    // Only a host with a `:` can be an IPv6 address; names skip the parse.
    let mut out = if host.contains(':') {
        ipv6_compliant(host)
    } else {
        let mut name = String::with_capacity(host.len() + 6);
        name.push_str(host);
        name
    };
    let _ = write!(out, ":{port}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_matching_follows_istio() {
        assert!(matches("*.example.com", "a.example.com"));
        assert!(matches("a.example.com", "*.example.com"));
        assert!(matches("*", "anything.at.all"));
        assert!(matches("*.example.com", "*.a.example.com"));
        assert!(!matches("*.example.com", "example.org"));
        assert!(subset_of("a.example.com", "*.example.com"));
        assert!(!subset_of("*.example.com", "a.example.com"));
        assert_eq!(intersect("*", "foo.com"), Some("foo.com"));
        assert_eq!(intersect("*.foo.com", "a.foo.com"), Some("a.foo.com"));
        assert_eq!(intersect("a.bar.com", "a.foo.com"), None);
    }

    #[test]
    fn short_names_resolve_in_the_namespace() {
        assert_eq!(
            resolve_short_name("reviews", "bookinfo", "cluster.local"),
            "reviews.bookinfo.svc.cluster.local"
        );
        assert_eq!(resolve_short_name("reviews.other", "bookinfo", "cluster.local"), "reviews.other");
        assert_eq!(resolve_short_name("*", "bookinfo", "cluster.local"), "*");
        assert_eq!(resolve_short_name("10.0.0.1", "bookinfo", "cluster.local"), "10.0.0.1");
        assert_eq!(resolve_short_name("::1", "bookinfo", "cluster.local"), "::1");
    }

    #[test]
    fn most_specific_wins() {
        let c = ["*", "*.com", "*.foo.com", "a.foo.com"];
        assert_eq!(most_specific_match("a.foo.com", c), Some("a.foo.com"));
        assert_eq!(most_specific_match("b.foo.com", c), Some("*.foo.com"));
        assert_eq!(most_specific_match("b.bar.org", c), Some("*"));
        assert_eq!(most_specific_match("x", ["*.foo.com"]), None);
        assert_eq!(domain_name("::1", 80), "[::1]:80");
    }
}
