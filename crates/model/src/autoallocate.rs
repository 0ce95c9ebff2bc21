//! ServiceEntry VIP auto-allocation, pure (the rules of Istio's `ipallocate` controller,
//! `pilot/pkg/controllers/ipallocate`, and `pilot/pkg/networking/serviceentry`).
//!
//! A ServiceEntry without `addresses` whose resolution is not `NONE` and which does not opt out
//! (label `networking.istio.io/enable-autoallocate-ip: "false"`) gets one IPv4 address from
//! `240.240.0.0/16` and one IPv6 address from `2001:2::/48` per host (wildcard hosts only with
//! `DYNAMIC_DNS`), written to `status.addresses` as `[{value, host}]`. Existing status addresses are
//! kept (stable across restarts: the allocator is warmed with every entry's status first); an address
//! used by two entries is a conflict: the oldest entry keeps it and the others are reassigned, or all
//! are reassigned when a user-written `spec.addresses` holds it.
//!
//! No I/O here: the cluster controller (`kube_source::ip_autoallocate`) and the files-only in-memory
//! mode (`registry`) drive the same [`Allocator`].

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use api::networking::service_entry::{Resolution, ServiceEntry};
use serde_json::Value as Json;

use crate::service::Labels;

/// The opt-out label: `"false"` (any case) turns auto-allocation off for the entry.
pub const ENABLE_LABEL: &str = "networking.istio.io/enable-autoallocate-ip";
/// The leader-election lock of the allocator (Istio's `leaderelection.IPAutoallocateController`).
pub const LEADER_LOCK: &str = "istio-ip-autoallocate";
/// IPv4 range (Istio's `PILOT_IP_AUTOALLOCATE_IPV4_PREFIX` default).
pub const IPV4_PREFIX: (Ipv4Addr, u8) = (Ipv4Addr::new(240, 240, 0, 0), 16);
/// IPv6 range (Istio's `PILOT_IP_AUTOALLOCATE_IPV6_PREFIX` default).
pub const IPV6_PREFIX: (Ipv6Addr, u8) = (Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0), 48);

/// Whether an entry gets (and uses) auto-allocated addresses (Istio's `ShouldV2AutoAllocateIP`):
/// the feature is on, resolution is not `NONE`, no opt-out label, no `spec.addresses`.
pub fn should_allocate(enabled: bool, labels: &Labels, spec: &ServiceEntry) -> bool {
    enabled
        && spec.resolution != Resolution::None as i32
        && !labels.get(ENABLE_LABEL).is_some_and(|v| v.eq_ignore_ascii_case("false"))
        && spec.addresses.is_empty()
}

/// Whether `host` of the entry gets an address: wildcard hosts only with `DYNAMIC_DNS` (Istio's
/// `keepHost`).
pub fn keep_host(spec: &ServiceEntry, host: &str) -> bool {
    !host.starts_with('*') || spec.resolution == Resolution::DynamicDns as i32
}

/// One `status.addresses` item: `{"value": "240.240.0.1", "host": "api.example.com"}` (Istio's
/// `ServiceEntryAddress`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StatusAddress {
    /// The host it belongs to.
    pub host: String,
    /// The address.
    pub value: IpAddr,
}

impl StatusAddress {
    /// As Istio writes it: `{"value": …, "host": …}`.
    pub fn to_json(&self) -> Json {
        serde_json::json!({"value": self.value.to_string(), "host": self.host})
    }
}

/// The status `addresses` as JSON, in order.
pub fn addresses_json(addresses: &[StatusAddress]) -> Json {
    Json::Array(addresses.iter().map(StatusAddress::to_json).collect())
}

/// `status.addresses` of an object's status (`None`: no status). Items whose value is not an IP are
/// skipped, as Istio's `getHostAddressesFromServiceEntryStatus` does.
pub fn status_addresses(status: Option<&Json>) -> Vec<StatusAddress> {
    let items = status.and_then(|s| s.get("addresses")).and_then(Json::as_array);
    items
        .into_iter()
        .flatten()
        .filter_map(|a| {
            let value = a.get("value")?.as_str()?.parse().ok()?;
            let host = a.get("host").and_then(Json::as_str).unwrap_or_default().to_string();
            Some(StatusAddress { host, value })
        })
        .collect()
}

/// Addresses by host.
pub fn by_host(addresses: &[StatusAddress]) -> BTreeMap<&str, Vec<IpAddr>> {
    let mut out: BTreeMap<&str, Vec<IpAddr>> = BTreeMap::new();
    for a in addresses {
        out.entry(a.host.as_str()).or_default().push(a.value);
    }
    out
}

/// The owner of addresses: `namespace/name` of a ServiceEntry.
pub type Owner = (String, String);

/// One range of addresses with its used set (Istio's `prefixUse`), as integers.
#[derive(Clone, Debug)]
struct PrefixUse {
    first: u128,
    last: u128,
    v6: bool,
    used: BTreeMap<u128, Owner>,
    next: u128,
}

impl PrefixUse {
    fn new(base: u128, bits: u8, v6: bool) -> PrefixUse {
        let width = if v6 { 128 } else { 32 };
        let size = 1u128 << (width - bits);
        // The network address itself is never handed out; the last one may be.
        PrefixUse { first: base + 1, last: base + size - 1, v6, used: BTreeMap::new(), next: base + 1 }
    }

    fn contains(&self, n: u128) -> bool {
        (self.first - 1..=self.last).contains(&n)
    }

    fn addr(&self, n: u128) -> IpAddr {
        if self.v6 { IpAddr::V6(Ipv6Addr::from(n)) } else { IpAddr::V4(Ipv4Addr::from(n as u32)) }
    }

    /// Marks `n` used by `owner`; `true` when another owner already holds it (a conflict).
    fn mark_used(&mut self, n: u128, owner: &Owner) -> bool {
        if !self.contains(n) {
            return false;
        }
        match self.used.get(&n) {
            Some(o) => o != owner,
            None => {
                self.used.insert(n, owner.clone());
                false
            }
        }
    }

    fn allocate(&mut self, owner: &Owner) -> Option<IpAddr> {
        let mut n = if (self.first..=self.last).contains(&self.next) { self.next } else { self.first };
        let start = n;
        while self.used.contains_key(&n) {
            n = if n == self.last { self.first } else { n + 1 };
            if n == start {
                return None;
            }
        }
        self.used.insert(n, owner.clone());
        self.next = n + 1;
        Some(self.addr(n))
    }

    fn free(&mut self, n: u128, owner: &Owner) {
        if self.used.get(&n) == Some(owner) {
            self.used.remove(&n);
            if n < self.next || !(self.first..=self.last).contains(&self.next) {
                self.next = n;
            }
        }
    }
}

fn to_u128(a: IpAddr) -> (u128, bool) {
    match a {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), false),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => (u128::from(u32::from(v4)), false),
            None => (u128::from(v6), true),
        },
    }
}

/// What the allocator reads of one ServiceEntry.
#[derive(Clone, Debug)]
pub struct Entry<'a> {
    /// `namespace/name`.
    pub owner: Owner,
    /// Creation time (RFC 3339), for conflict order: the oldest keeps a shared address.
    pub creation_time: Option<&'a str>,
    /// Labels (the opt-out label).
    pub labels: &'a Labels,
    /// The spec.
    pub spec: &'a ServiceEntry,
    /// `status.addresses` as read.
    pub status: Vec<StatusAddress>,
}

impl Entry<'_> {
    fn spec_addresses(&self) -> Vec<IpAddr> {
        self.spec.addresses.iter().filter_map(|a| a.parse().ok()).collect()
    }
}

/// The addresses of an entry that another owner holds: resolve with [`Allocator::resolve_conflict`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The entry that found the addresses taken.
    pub owner: Owner,
    /// The addresses.
    pub addresses: Vec<IpAddr>,
}

/// Istio's `IPAllocator` state: the used addresses of both ranges and who holds them.
#[derive(Clone, Debug)]
pub struct Allocator {
    v4: PrefixUse,
    v6: PrefixUse,
}

impl Default for Allocator {
    fn default() -> Self {
        Allocator::new()
    }
}

impl Allocator {
    /// An allocator over Istio's default ranges ([`IPV4_PREFIX`], [`IPV6_PREFIX`]).
    pub fn new() -> Allocator {
        Allocator {
            v4: PrefixUse::new(u128::from(u32::from(IPV4_PREFIX.0)), IPV4_PREFIX.1, false),
            v6: PrefixUse::new(u128::from(IPV6_PREFIX.0), IPV6_PREFIX.1, true),
        }
    }

    fn range(&mut self, v6: bool) -> &mut PrefixUse {
        if v6 { &mut self.v6 } else { &mut self.v4 }
    }

    /// Marks `addresses` used by `owner`; the ones another owner holds are returned as a conflict.
    pub fn mark_used(&mut self, owner: &Owner, addresses: &[IpAddr]) -> Option<Conflict> {
        let taken: Vec<IpAddr> = (addresses.iter().copied())
            .filter(|a| {
                let (n, v6) = to_u128(*a);
                self.range(v6).mark_used(n, owner)
            })
            .collect();
        (!taken.is_empty()).then(|| Conflict { owner: owner.clone(), addresses: taken })
    }

    /// Releases `addresses` held by `owner`.
    pub fn free(&mut self, owner: &Owner, addresses: &[IpAddr]) {
        for a in addresses {
            let (n, v6) = to_u128(*a);
            self.range(v6).free(n, owner);
        }
    }

    /// Warms the allocator with every entry's spec and status addresses (Istio's
    /// `populateControllerDatastructures`, before any allocation); returns the conflicts found.
    pub fn warm<'e>(&mut self, entries: impl IntoIterator<Item = &'e Entry<'e>>) -> Vec<Conflict> {
        let mut conflicts = Vec::new();
        for e in entries {
            conflicts.extend(self.mark_used(&e.owner, &e.spec_addresses()));
            let status: Vec<IpAddr> = e.status.iter().map(|a| a.value).collect();
            conflicts.extend(self.mark_used(&e.owner, &status));
        }
        conflicts
    }

    /// The status addresses `entry` should have, or `None` when its status is right as it is
    /// (Istio's `reconcileServiceEntry` / `statusPatchForAddresses`): hosts that already have addresses
    /// keep them (unless `forced`, a conflict reassignment); new hosts get the next free IPv4 and
    /// IPv6 address. An entry that should not be allocated gets its stale addresses cleared (`Some(vec![])`)
    /// and released. Also returns the conflicts its existing addresses show.
    pub fn reconcile(
        &mut self,
        enabled: bool,
        entry: &Entry<'_>,
        forced: bool,
    ) -> (Option<Vec<StatusAddress>>, Vec<Conflict>) {
        let mut conflicts: Vec<Conflict> =
            self.mark_used(&entry.owner, &entry.spec_addresses()).into_iter().collect();
        if !should_allocate(enabled, entry.labels, entry.spec) {
            if entry.status.is_empty() {
                return (None, conflicts);
            }
            let old: Vec<IpAddr> = entry.status.iter().map(|a| a.value).collect();
            self.free(&entry.owner, &old);
            return (Some(Vec::new()), conflicts);
        }
        let existing = by_host(&entry.status);
        if !forced {
            let old: Vec<IpAddr> = entry.status.iter().map(|a| a.value).collect();
            conflicts.extend(self.mark_used(&entry.owner, &old));
        }
        let hosts: BTreeSet<&str> =
            entry.spec.hosts.iter().map(String::as_str).filter(|h| keep_host(entry.spec, h)).collect();
        let with_addresses: BTreeSet<&str> = existing.keys().copied().collect();
        if hosts == with_addresses && !forced {
            return (None, conflicts);
        }
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for host in entry.spec.hosts.iter().filter(|h| keep_host(entry.spec, h)) {
            if !seen.insert(host.as_str()) {
                continue;
            }
            let ips = match existing.get(host.as_str()) {
                Some(ips) if !forced => ips.clone(),
                _ => [self.v4.allocate(&entry.owner), self.v6.allocate(&entry.owner)]
                    .into_iter()
                    .flatten()
                    .collect(),
            };
            out.extend(ips.into_iter().map(|value| StatusAddress { host: host.clone(), value }));
        }
        (Some(out), conflicts)
    }

    /// Resolves a conflict (Istio's `resolveConflict`): of the entries whose status holds one of the
    /// addresses, the oldest keeps it and the others are reassigned; when an entry's `spec.addresses`
    /// holds it, every status holder is reassigned. Returns the new status addresses per owner.
    pub fn resolve_conflict(
        &mut self,
        enabled: bool,
        conflict: &Conflict,
        entries: &[Entry<'_>],
    ) -> Vec<(Owner, Vec<StatusAddress>)> {
        let holds = |e: &Entry<'_>| e.status.iter().any(|a| conflict.addresses.contains(&a.value));
        let user = entries.iter().any(|e| e.spec_addresses().iter().any(|a| conflict.addresses.contains(a)));
        let mut auto: Vec<&Entry<'_>> = entries.iter().filter(|e| holds(e)).collect();
        auto.sort_by(|a, b| (a.creation_time, &a.owner).cmp(&(b.creation_time, &b.owner)));
        let skip = usize::from(!user);
        let mut out = Vec::new();
        for e in auto.into_iter().skip(skip) {
            if let (Some(addresses), _) = self.reconcile(enabled, e, true) {
                out.push((e.owner.clone(), addresses));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn se(hosts: &[&str], resolution: Resolution, addresses: &[&str]) -> ServiceEntry {
        ServiceEntry {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            resolution: resolution as i32,
            addresses: addresses.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        }
    }

    fn entry<'a>(
        name: &str,
        spec: &'a ServiceEntry,
        labels: &'a Labels,
        status: Vec<StatusAddress>,
    ) -> Entry<'a> {
        Entry { owner: ("ns".into(), name.into()), creation_time: None, labels, spec, status }
    }

    fn sa(host: &str, value: &str) -> StatusAddress {
        StatusAddress { host: host.into(), value: value.parse().unwrap() }
    }

    #[test]
    fn allocates_one_v4_and_one_v6_per_host_in_order() {
        let labels = Labels::new();
        let spec = se(&["a.example", "b.example", "a.example"], Resolution::Dns, &[]);
        let mut alloc = Allocator::new();
        let (status, conflicts) = alloc.reconcile(true, &entry("se", &spec, &labels, vec![]), false);
        assert!(conflicts.is_empty());
        assert_eq!(
            status.unwrap(),
            vec![
                sa("a.example", "240.240.0.1"),
                sa("a.example", "2001:2::1"),
                sa("b.example", "240.240.0.2"),
                sa("b.example", "2001:2::2"),
            ]
        );
    }

    #[test]
    fn no_addresses_for_none_opt_out_user_addresses_or_wildcards() {
        let mut labels = Labels::new();
        let mut alloc = Allocator::new();
        let none = se(&["a.example"], Resolution::None, &[]);
        assert_eq!(alloc.reconcile(true, &entry("a", &none, &labels, vec![]), false).0, None);
        let user = se(&["a.example"], Resolution::Dns, &["10.0.0.1"]);
        assert_eq!(alloc.reconcile(true, &entry("a", &user, &labels, vec![]), false).0, None);
        let wildcard = se(&["*.example"], Resolution::Dns, &[]);
        assert_eq!(alloc.reconcile(true, &entry("w", &wildcard, &labels, vec![]), false).0, None);
        let dynamic = se(&["*.example"], Resolution::DynamicDns, &[]);
        assert_eq!(alloc.reconcile(true, &entry("d", &dynamic, &labels, vec![]), false).0.unwrap().len(), 2);
        let plain = se(&["a.example"], Resolution::Dns, &[]);
        assert_eq!(alloc.reconcile(false, &entry("off", &plain, &labels, vec![]), false).0, None);
        labels.insert(ENABLE_LABEL.into(), "False".into());
        assert_eq!(alloc.reconcile(true, &entry("o", &plain, &labels, vec![]), false).0, None);
        // Opting out later clears what was written and frees it.
        let status = vec![sa("a.example", "240.240.0.9")];
        assert_eq!(alloc.reconcile(true, &entry("o", &plain, &labels, status), false).0, Some(vec![]));
    }

    #[test]
    fn warmed_status_is_kept_and_never_handed_out_again() {
        let labels = Labels::new();
        let a = se(&["a.example"], Resolution::Dns, &[]);
        let b = se(&["b.example", "c.example"], Resolution::Static, &[]);
        let a_status = vec![sa("a.example", "240.240.0.1"), sa("a.example", "2001:2::1")];
        let mut alloc = Allocator::new();
        let entries = [entry("a", &a, &labels, a_status.clone()), entry("b", &b, &labels, vec![])];
        assert!(alloc.warm(&entries).is_empty());
        // A restart: a's status is read back and left alone.
        assert_eq!(alloc.reconcile(true, &entries[0], false).0, None);
        // b gets the next free addresses; c.example added later keeps b.example's.
        let b_status = alloc.reconcile(true, &entries[1], false).0.unwrap();
        assert_eq!(b_status[0], sa("b.example", "240.240.0.2"));
        assert_eq!(b_status[2], sa("c.example", "240.240.0.3"));
        let b2 = se(&["b.example", "c.example", "d.example"], Resolution::Static, &[]);
        let again = alloc.reconcile(true, &entry("b", &b2, &labels, b_status.clone()), false).0.unwrap();
        assert_eq!(&again[..4], &b_status[..]);
        assert_eq!(again[4], sa("d.example", "240.240.0.4"));
    }

    #[test]
    fn conflicts_keep_the_oldest_and_reassign_the_others() {
        let labels = Labels::new();
        let spec = se(&["x.example"], Resolution::Dns, &[]);
        let shared = vec![sa("x.example", "240.240.0.7")];
        let mut old = entry("old", &spec, &labels, shared.clone());
        old.creation_time = Some("2026-01-01T00:00:00Z");
        let mut new = entry("new", &spec, &labels, shared.clone());
        new.creation_time = Some("2026-02-01T00:00:00Z");
        let entries = [new, old];
        let mut alloc = Allocator::new();
        let conflicts = alloc.warm(&entries);
        assert_eq!(conflicts.len(), 1, "{conflicts:?}");
        let fixed = alloc.resolve_conflict(true, &conflicts[0], &entries);
        assert_eq!(fixed.len(), 1);
        assert_eq!(fixed[0].0, ("ns".to_string(), "new".to_string()));
        assert_eq!(fixed[0].1[0], sa("x.example", "240.240.0.1"));
        // A user address in the range: every status holder moves.
        let user = se(&["u.example"], Resolution::Dns, &["240.240.0.7"]);
        let mut entries = entries.to_vec();
        entries.push(entry("user", &user, &labels, vec![]));
        let conflict =
            Conflict { owner: ("ns".into(), "user".into()), addresses: vec!["240.240.0.7".parse().unwrap()] };
        assert_eq!(alloc.resolve_conflict(true, &conflict, &entries).len(), 2);
    }

    #[test]
    fn status_is_read_and_written_as_istio_does() {
        let status = serde_json::json!({"addresses": [
            {"value": "240.240.0.1", "host": "a.example"}, {"value": "bad", "host": "a.example"}]});
        let read = status_addresses(Some(&status));
        assert_eq!(read, vec![sa("a.example", "240.240.0.1")]);
        assert_eq!(addresses_json(&read), serde_json::json!([{"value": "240.240.0.1", "host": "a.example"}]));
        assert!(status_addresses(None).is_empty());
    }

    #[test]
    fn a_full_range_is_exhausted_not_looped_forever() {
        let mut r = PrefixUse::new(u128::from(u32::from(Ipv4Addr::new(10, 0, 0, 0))), 30, false);
        let o: Owner = ("ns".into(), "o".into());
        let got: Vec<_> = std::iter::from_fn(|| r.allocate(&o)).take(5).collect();
        assert_eq!(got.len(), 3, "10.0.0.1-3: {got:?}");
        r.free(u128::from(u32::from(Ipv4Addr::new(10, 0, 0, 2))), &o);
        assert_eq!(r.allocate(&o), Some("10.0.0.2".parse().unwrap()));
    }
}
