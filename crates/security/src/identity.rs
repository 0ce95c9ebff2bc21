//! SPIFFE identities as Istio writes them: `spiffe://<trust domain>/ns/<namespace>/sa/<service
//! account>` (`pkg/spiffe`). A workload certificate carries its identity as a URI SAN.

use std::fmt;

/// A workload identity. Display gives the SPIFFE URI.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpiffeId {
    /// Trust domain (`cluster.local` by default, mesh config `trustDomain`).
    pub trust_domain: String,
    /// Kubernetes namespace.
    pub namespace: String,
    /// Kubernetes service account.
    pub service_account: String,
}

impl SpiffeId {
    /// Parses `spiffe://TD/ns/NS/sa/SA`; `None` for anything else (other paths, empty parts).
    pub fn parse(uri: &str) -> Option<SpiffeId> {
        let rest = uri.strip_prefix("spiffe://")?;
        let mut parts = rest.split('/');
        let (td, ns_word, ns, sa_word, sa) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some()
            || ns_word != "ns"
            || sa_word != "sa"
            || [td, ns, sa].iter().any(|p| p.is_empty())
        {
            return None;
        }
        Some(SpiffeId { trust_domain: td.into(), namespace: ns.into(), service_account: sa.into() })
    }

    /// The identity of a Kubernetes service-account user name `system:serviceaccount:NS:SA` (what
    /// a TokenReview returns for a service-account token) in `trust_domain`.
    pub fn from_service_account_user(username: &str, trust_domain: &str) -> Option<SpiffeId> {
        let rest = username.strip_prefix("system:serviceaccount:")?;
        let (ns, sa) = rest.split_once(':')?;
        if ns.is_empty() || sa.is_empty() || sa.contains(':') {
            return None;
        }
        Some(SpiffeId { trust_domain: trust_domain.into(), namespace: ns.into(), service_account: sa.into() })
    }
}

impl fmt::Display for SpiffeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "spiffe://{}/ns/{}/sa/{}", self.trust_domain, self.namespace, self.service_account)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_istio_identities_and_refuses_others() {
        let id = SpiffeId::parse("spiffe://cluster.local/ns/default/sa/bookinfo").unwrap();
        assert_eq!(
            (id.trust_domain.as_str(), id.namespace.as_str(), id.service_account.as_str()),
            ("cluster.local", "default", "bookinfo")
        );
        assert_eq!(id.to_string(), "spiffe://cluster.local/ns/default/sa/bookinfo");
        for bad in [
            "spiffe://cluster.local/ns/default",
            "spiffe://cluster.local/ns//sa/x",
            "spiffe://cluster.local/ns/a/sa/b/extra",
            "spiffe://cluster.local/namespace/a/sa/b",
            "https://cluster.local/ns/a/sa/b",
            "spiffe:///ns/a/sa/b",
        ] {
            assert_eq!(SpiffeId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn service_account_users_map_to_identities() {
        let id = SpiffeId::from_service_account_user("system:serviceaccount:foo:bar", "td.example").unwrap();
        assert_eq!(id.to_string(), "spiffe://td.example/ns/foo/sa/bar");
        for bad in [
            "system:serviceaccount:foo",
            "system:serviceaccount::bar",
            "admin",
            "system:serviceaccount:a:b:c",
        ] {
            assert_eq!(SpiffeId::from_service_account_user(bad, "cluster.local"), None, "{bad}");
        }
    }
}
