//! [`PushRequest`] (Istio's `model.PushRequest`) and the rules deciding which proxies and which xDS
//! types a change concerns (Istio's `proxy_dependencies.go` and the per-type `*NeedsPush` tables).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Instant,
};

use api::Kind;
use model::ConfigKey;
use networking::{ProxyContext, ProxyKind, PushContext, SidecarScope};
use xds::{PushEvent, type_url};

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
}

impl PushEvent for PushRequest {
    fn merge(&mut self, newer: Self) {
        self.merge_from(newer);
    }
}

/// Whether a change of `kind` can matter to a proxy of `proxy_kind` (Istio's
/// `UnAffectedConfigKinds`: gateways ignore Sidecars, sidecars ignore Gateways).
pub fn kind_affects_proxy(kind: Kind, proxy_kind: ProxyKind) -> bool {
    !matches!((kind, proxy_kind), (Kind::Sidecar, ProxyKind::Router) | (Kind::Gateway, ProxyKind::Sidecar))
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
/// implements (its inbound side).
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
        current.depends_on(key)
            || previous.is_some_and(|p| p.depends_on(key))
            || (key.kind == Kind::ServiceEntry
                && proxy.service_instances.iter().any(|i| {
                    i.service.hostname.eq_ignore_ascii_case(&key.name) && i.service.namespace == key.namespace
                }))
    })
}

/// Whether `request` changes resources of `type_url` for a proxy of `proxy_kind` (Istio's per-type
/// skip tables, ISTIO-REFERENCE §1.2). Endpoint-only requests affect EDS only.
pub fn type_needs_push(request: &PushRequest, type_url: &str, proxy_kind: ProxyKind) -> bool {
    if request.forced {
        return true;
    }
    if request.is_endpoints_only() {
        return type_url == type_url::ENDPOINT && !request.endpoints_updated.is_empty();
    }
    let kinds: Vec<Kind> =
        request.kinds().into_iter().filter(|k| kind_affects_proxy(*k, proxy_kind)).collect();
    let skips: &[Kind] = match type_url {
        type_url::CLUSTER => &[
            Kind::WorkloadEntry,
            Kind::WorkloadGroup,
            Kind::AuthorizationPolicy,
            Kind::RequestAuthentication,
            Kind::Telemetry,
            Kind::WasmPlugin,
            Kind::ProxyConfig,
        ],
        type_url::ENDPOINT => &[
            Kind::Gateway,
            Kind::VirtualService,
            Kind::WorkloadGroup,
            Kind::AuthorizationPolicy,
            Kind::RequestAuthentication,
            Kind::Telemetry,
            Kind::WasmPlugin,
            Kind::ProxyConfig,
            Kind::Sidecar,
        ],
        type_url::LISTENER => &[Kind::WorkloadEntry, Kind::WorkloadGroup, Kind::ProxyConfig],
        type_url::ROUTE => &[
            Kind::WorkloadEntry,
            Kind::WorkloadGroup,
            Kind::AuthorizationPolicy,
            Kind::RequestAuthentication,
            Kind::PeerAuthentication,
            Kind::WasmPlugin,
            Kind::Telemetry,
            Kind::ProxyConfig,
        ],
        _ => &[],
    };
    let config_matters = kinds.iter().any(|k| !skips.contains(k));
    config_matters || (type_url == type_url::ENDPOINT && !request.endpoints_updated.is_empty())
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
    fn endpoint_only_is_eds_only() {
        let r = PushRequest::endpoints("a", "ns");
        for t in [type_url::CLUSTER, type_url::LISTENER, type_url::ROUTE] {
            assert!(!type_needs_push(&r, t, ProxyKind::Sidecar), "{t}");
        }
        assert!(type_needs_push(&r, type_url::ENDPOINT, ProxyKind::Sidecar));
    }

    #[test]
    fn per_type_tables() {
        let vs = PushRequest::config([key(Kind::VirtualService)], TriggerReason::Config);
        assert!(type_needs_push(&vs, type_url::ROUTE, ProxyKind::Sidecar));
        assert!(!type_needs_push(&vs, type_url::ENDPOINT, ProxyKind::Sidecar));
        let gw = PushRequest::config([key(Kind::Gateway)], TriggerReason::Config);
        assert!(!proxy_needs_push(&gw, ProxyKind::Sidecar));
        assert!(proxy_needs_push(&gw, ProxyKind::Router));
        assert!(type_needs_push(&gw, type_url::LISTENER, ProxyKind::Router));
        let we = PushRequest::config([key(Kind::WorkloadEntry)], TriggerReason::Config);
        assert!(!type_needs_push(&we, type_url::CLUSTER, ProxyKind::Sidecar));
        assert!(type_needs_push(
            &PushRequest::forced(TriggerReason::Debug),
            type_url::SECRET,
            ProxyKind::Sidecar
        ));
    }
}
