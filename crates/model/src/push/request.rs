//! [`PushRequest`] (Istio's `model.PushRequest`, `pilot/pkg/model/push_context.go`) and the rules
//! deciding which proxies a change concerns (Istio's `pilot/pkg/xds/proxy_dependencies.go`). Which xDS
//! types a change regenerates is the xDS server's business (`discovery`'s `type_needs_push`).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Instant,
};

use api::Kind;

use super::{ProxyContext, ProxyKind, PushContext, SidecarScope};
use crate::ConfigKey;

/// Why a push happens (Istio's `TriggerReason`; the label of `pilot_push_triggers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TriggerReason {
    /// Endpoints of a service changed (EDS path).
    Endpoint,
    /// A config object changed.
    Config,
    /// A service appeared, changed or went away.
    Service,
    /// Forced from the debug endpoint.
    Debug,
    /// Mesh-wide settings changed, or the first push.
    Global,
    /// Certificate files behind served SDS secrets changed.
    Secret,
}

impl TriggerReason {
    /// Istio's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerReason::Endpoint => "endpoint",
            TriggerReason::Config => "config",
            TriggerReason::Service => "service",
            TriggerReason::Debug => "debug",
            TriggerReason::Global => "global",
            TriggerReason::Secret => "secret",
        }
    }
}

/// One (merged) change to push.
#[derive(Debug, Clone)]
pub struct PushRequest {
    /// Config objects that changed (`{ServiceEntry, hostname, namespace}` for service changes).
    pub configs_updated: BTreeSet<ConfigKey>,
    /// Services `(hostname, namespace)` whose endpoints changed (Istio's `Endpoints` pseudo-kind keys).
    pub endpoints_updated: BTreeSet<(String, String)>,
    /// SDS secrets whose content changed (resource names); only their subscribers get them, SDS only.
    pub secrets_updated: BTreeSet<String>,
    /// Keys of `configs_updated` whose change concerns ECDS only: WasmPlugins and TrafficExtensions
    /// whose placement in listeners is unchanged ([`super::extensions::placement_changed`]). Other
    /// types leave them out of their push decision.
    pub ecds_only: BTreeSet<ConfigKey>,
    /// Regenerate everything for every proxy.
    pub forced: bool,
    /// Reason → count.
    pub reasons: BTreeMap<TriggerReason, u32>,
    /// When the first merged event arrived.
    pub start: Instant,
    /// The snapshot to generate from (set when the push is sent to connections).
    pub push: Option<Arc<PushContext>>,
}

impl PushRequest {
    /// A request for changed config objects.
    pub fn config(keys: impl IntoIterator<Item = ConfigKey>, reason: TriggerReason) -> Self {
        let mut r = Self::empty(reason);
        r.configs_updated = keys.into_iter().collect();
        r
    }

    /// An endpoint-only request for the service `(hostname, namespace)`.
    pub fn endpoints(hostname: &str, namespace: &str) -> Self {
        let mut r = Self::empty(TriggerReason::Endpoint);
        r.endpoints_updated.insert((hostname.to_string(), namespace.to_string()));
        r
    }

    /// An SDS-only request for the secrets `names` (no config or endpoint change).
    pub fn secrets(names: impl IntoIterator<Item = String>) -> Self {
        let mut r = Self::empty(TriggerReason::Secret);
        r.secrets_updated = names.into_iter().collect();
        r
    }

    /// A forced push of everything.
    pub fn forced(reason: TriggerReason) -> Self {
        let mut r = Self::empty(reason);
        r.forced = true;
        r
    }

    fn empty(reason: TriggerReason) -> Self {
        PushRequest {
            configs_updated: BTreeSet::new(),
            endpoints_updated: BTreeSet::new(),
            secrets_updated: BTreeSet::new(),
            ecds_only: BTreeSet::new(),
            forced: false,
            reasons: BTreeMap::from([(reason, 1)]),
            start: Instant::now(),
            push: None,
        }
    }

    /// `true` when only endpoints changed: the incremental EDS path (no config index rebuild, EDS
    /// only).
    pub fn is_endpoints_only(&self) -> bool {
        !self.forced && self.configs_updated.is_empty()
    }

    /// Folds a later request into this one (Istio's `Merge`): sets united, reasons summed, earliest
    /// start, the later snapshot.
    pub fn merge_from(&mut self, newer: PushRequest) {
        // A key stays ECDS-only when no merged request changed its placement.
        let placed = |r: &PushRequest| -> BTreeSet<ConfigKey> {
            r.configs_updated.difference(&r.ecds_only).cloned().collect()
        };
        let (mine, theirs) = (placed(self), placed(&newer));
        self.ecds_only.extend(newer.ecds_only);
        self.ecds_only.retain(|k| !mine.contains(k) && !theirs.contains(k));
        self.configs_updated.extend(newer.configs_updated);
        self.endpoints_updated.extend(newer.endpoints_updated);
        self.secrets_updated.extend(newer.secrets_updated);
        self.forced |= newer.forced;
        for (reason, n) in newer.reasons {
            *self.reasons.entry(reason).or_default() += n;
        }
        self.start = self.start.min(newer.start);
        if newer.push.is_some() {
            self.push = newer.push;
        }
    }

    /// The kinds of the changed config objects.
    pub fn kinds(&self) -> BTreeSet<Kind> {
        self.configs_updated.iter().map(|k| k.kind).collect()
    }

    /// The kinds of the changed config objects whose change reaches listeners, clusters or routes (all
    /// but the [`PushRequest::ecds_only`] keys).
    pub fn placed_kinds(&self) -> BTreeSet<Kind> {
        self.configs_updated.iter().filter(|k| !self.ecds_only.contains(*k)).map(|k| k.kind).collect()
    }

    /// A request for a changed WasmPlugin or TrafficExtension whose placement is unchanged: ECDS only.
    pub fn extension_content(key: ConfigKey) -> Self {
        let mut r = Self::config([key.clone()], TriggerReason::Config);
        r.ecds_only.insert(key);
        r
    }
}

/// Merging through `Extend`, so that the xDS engine's pending-push slot can merge meshpilot's requests
/// without knowing the type (`xds::PushEvent` is implemented for every `T: Extend<T>`): each request in
/// turn is folded in with [`PushRequest::merge_from`].
impl Extend<PushRequest> for PushRequest {
    fn extend<I: IntoIterator<Item = PushRequest>>(&mut self, requests: I) {
        for newer in requests {
            self.merge_from(newer);
        }
    }
}

/// Whether a change of `kind` can matter to a proxy of `proxy_kind` (Istio's
/// `UnAffectedConfigKinds`: gateways ignore Sidecars, sidecars ignore Gateways; gateways also ignore
/// PeerAuthentications, which only shape sidecar inbound chains here).
pub fn kind_affects_proxy(kind: Kind, proxy_kind: ProxyKind) -> bool {
    !matches!(
        (kind, proxy_kind),
        (Kind::Sidecar | Kind::PeerAuthentication, ProxyKind::Router) | (Kind::Gateway, ProxyKind::Sidecar)
    )
}

/// Whether a change of a PeerAuthentication concerns `proxy`: every proxy with workload certificates
/// (they read their own namespace's and the root namespace's policies for inbound chains, and the
/// destinations' namespace policies for auto mTLS, Istio's `BestEffortInferServiceMTLSMode`); never a
/// proxy without them.
fn peer_authentication_concerns(proxy: &ProxyContext) -> bool {
    proxy.has_workload_certificates()
}

/// Whether a change of an AuthorizationPolicy, RequestAuthentication, Telemetry or EnvoyFilter concerns a proxy:
/// policies of its own namespace and of the root namespace can select it (Istio's `checkProxyDependencies`
/// pushes the policy's namespace, or everything for the root namespace).
fn security_policy_concerns(key: &ConfigKey, proxy: &ProxyContext, root_namespace: &str) -> bool {
    key.namespace == proxy.namespace || key.namespace == root_namespace
}

/// Whether `request` concerns a proxy of `proxy_kind` in `namespace` at all (Istio's
/// `DefaultProxyNeedsPush`, without per-scope dependency tracking: every remaining key matters).
pub fn proxy_needs_push(request: &PushRequest, proxy_kind: ProxyKind) -> bool {
    request.forced
        || !request.endpoints_updated.is_empty()
        || request.configs_updated.iter().any(|k| kind_affects_proxy(k.kind, proxy_kind))
}

/// Whether a sidecar whose scope was `previous` and is now `current` is concerned by `request`
/// (Istio's `checkProxyDependencies` with `SidecarScope` and `PrevSidecarScope`): forced and
/// endpoint pushes always are (EDS generation filters by the proxy's watched clusters); a config
/// change is when the object is a dependency of either scope, or is a service the proxy itself
/// implements (its inbound side); a PeerAuthentication only when the proxy has workload certificates
/// and the policy is in its namespace or the root namespace; an AuthorizationPolicy,
/// RequestAuthentication, Telemetry, EnvoyFilter, WasmPlugin or TrafficExtension when it is in the proxy's
/// namespace or the root namespace (the
/// request holds keys only, so a change that stops selecting a proxy must push it too: the namespace is
/// the finest scope that covers both the old and the new selection).
pub fn scope_needs_push(
    request: &PushRequest,
    proxy: &ProxyContext,
    previous: Option<&SidecarScope>,
    current: &SidecarScope,
) -> bool {
    if request.forced || !request.endpoints_updated.is_empty() {
        return true;
    }
    request.configs_updated.iter().filter(|k| kind_affects_proxy(k.kind, proxy.kind)).any(|key| {
        if key.kind == Kind::PeerAuthentication {
            return peer_authentication_concerns(proxy);
        }
        if matches!(
            key.kind,
            Kind::AuthorizationPolicy
                | Kind::RequestAuthentication
                | Kind::Telemetry
                | Kind::EnvoyFilter
                | Kind::WasmPlugin
                | Kind::TrafficExtension
        ) {
            return security_policy_concerns(key, proxy, current.root_namespace());
        }
        if key.kind.is_gateway_api() {
            // Converted into VirtualServices of any host (mesh routes): not tracked per scope.
            return true;
        }
        current.depends_on(key)
            || previous.is_some_and(|p| p.depends_on(key))
            || (key.kind == Kind::ServiceEntry
                && proxy.service_instances.iter().any(|i| {
                    i.service.hostname.eq_ignore_ascii_case(&key.name) && i.service.namespace == key.namespace
                }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: Kind) -> ConfigKey {
        ConfigKey { kind, namespace: "ns".into(), name: "n".into() }
    }

    #[test]
    fn merge_unions_and_sums() {
        let mut a = PushRequest::endpoints("a.example", "ns");
        assert!(a.is_endpoints_only());
        let b = PushRequest::config([key(Kind::VirtualService)], TriggerReason::Config);
        a.merge_from(b);
        a.merge_from(PushRequest::endpoints("b.example", "ns"));
        assert!(!a.is_endpoints_only());
        assert_eq!(a.endpoints_updated.len(), 2);
        assert_eq!(a.reasons[&TriggerReason::Endpoint], 2);
        assert_eq!(a.reasons[&TriggerReason::Config], 1);
    }

    #[test]
    fn gateways_and_sidecars_ignore_each_others_kinds() {
        let gw = PushRequest::config([key(Kind::Gateway)], TriggerReason::Config);
        assert!(!proxy_needs_push(&gw, ProxyKind::Sidecar));
        assert!(proxy_needs_push(&gw, ProxyKind::Router));
        let sc = PushRequest::config([key(Kind::Sidecar)], TriggerReason::Config);
        assert!(proxy_needs_push(&sc, ProxyKind::Sidecar));
        assert!(!proxy_needs_push(&sc, ProxyKind::Router));
        assert!(proxy_needs_push(&PushRequest::endpoints("a", "ns"), ProxyKind::Router));
        let pa = PushRequest::config([key(Kind::PeerAuthentication)], TriggerReason::Config);
        assert!(proxy_needs_push(&pa, ProxyKind::Sidecar));
        assert!(!proxy_needs_push(&pa, ProxyKind::Router));
    }

    #[test]
    fn a_telemetry_concerns_proxies_of_its_namespace_and_all_for_the_root() {
        let proxy = ProxyContext::new(ProxyKind::Sidecar, "ns");
        let key = |ns: &str| ConfigKey { kind: Kind::Telemetry, namespace: ns.into(), name: "t".into() };
        assert!(security_policy_concerns(&key("ns"), &proxy, "istio-system"));
        assert!(security_policy_concerns(&key("istio-system"), &proxy, "istio-system"));
        assert!(!security_policy_concerns(&key("other"), &proxy, "istio-system"));
        assert!(kind_affects_proxy(Kind::Telemetry, ProxyKind::Router));
    }

    #[test]
    fn peer_authentication_concerns_certified_proxies_only() {
        let mut proxy = ProxyContext::new(ProxyKind::Sidecar, "ns");
        assert!(!peer_authentication_concerns(&proxy), "no workload certificates");
        proxy.workload_certificates = true;
        assert!(peer_authentication_concerns(&proxy));
    }
}
