//! The generation cache: what the generators derive per proxy from a [`PushContext`] and share between
//! proxies — sidecar scopes, sidecar route tables (encoded), merged gateway servers — kept outside the
//! snapshot, so that a `PushContext` stays plain data any thread reads without locks.
//!
//! Entries are keyed by the snapshot's [`PushContext::config_generation`] plus their own key (scope,
//! route key, gateway labels), not by the snapshot version: endpoint-only snapshots
//! ([`PushContext::with_endpoints`]) keep the generation and so keep sharing every entry, as none of
//! them depends on endpoints. The first lookup with a newer generation drops everything older
//! (invalidation); a lookup with an older generation (a push still generating from the previous
//! snapshot) computes its value without storing it, so it never mixes generations.
//!
//! Istio keeps the equivalent state inside its `PushContext` (`sidecarIndex`, `gatewayIndex`) and its
//! XDS cache; here the snapshot is immutable and the cache is this explicit, separately tested piece.
//!
//! [`Snapshot`] bundles a snapshot with the cache it shares: it is what the generators take.

use std::{
    collections::{BTreeMap, HashMap},
    ops::Deref,
    sync::{Arc, Mutex, OnceLock},
};

use model::{
    Finding,
    push::{ProxyContext, ProxyKind, PushContext, ScopeKey, SidecarScope},
    service::{Endpoint, Labels},
};

use crate::{
    gateway::MergedPort,
    jwt::{JwksSource, JwksState},
};

/// The servers of the gateways selecting a router, merged by port, and the findings met merging them
/// (Istio's `MergedGateway`), shared by every router with the same labels.
pub(crate) type SharedGatewayServers = Arc<(BTreeMap<crate::gateway::ListenerKey, MergedPort>, Vec<Finding>)>;

/// A resource encoded once and shared by the responses of every proxy that gets it (route tables and
/// ClusterLoadAssignments from this cache): its protobuf bytes, and a version the server derives from
/// them the first time it needs one ([`Encoded::version`]), so a push to many proxies neither encodes
/// nor hashes the same resource again.
#[derive(Debug)]
pub struct Encoded {
    bytes: Vec<u8>,
    version: OnceLock<String>,
}

impl Encoded {
    /// Wraps encoded protobuf bytes.
    pub fn new(bytes: Vec<u8>) -> Encoded {
        Encoded { bytes, version: OnceLock::new() }
    }

    /// `message` in protobuf wire format, ready to share.
    pub fn of(message: &impl prost::Message) -> Arc<Encoded> {
        Arc::new(Encoded::new(message.encode_to_vec()))
    }

    /// The encoded message.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The resource's version: made by `derive` the first time (e.g. the xDS server's content hash of
    /// these bytes), then the same string for every caller.
    pub fn version(&self, derive: impl FnOnce() -> String) -> &str {
        self.version.get_or_init(derive)
    }
}

impl PartialEq for Encoded {
    fn eq(&self, other: &Encoded) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Encoded {}

/// A named encoded resource (a route configuration, a ClusterLoadAssignment) as the encoded generators
/// return it; cloning shares the bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedResource {
    /// The resource name (route configuration name, cluster name).
    pub name: String,
    /// The encoded message, possibly shared with other proxies' responses.
    pub encoded: Arc<Encoded>,
}

impl EncodedResource {
    /// The encoded message.
    pub fn bytes(&self) -> &[u8] {
        self.encoded.bytes()
    }
}

/// An encoded resource made once per cache key and the findings met making it, shared by every proxy
/// with that key.
pub(crate) type SharedEncoded = Arc<(Arc<Encoded>, Vec<Finding>)>;

/// What a ClusterLoadAssignment depends on within one config generation: its cluster name, the
/// snapshot's endpoint list of the service port (by address: endpoint-only snapshots keep the list of
/// every service they did not re-read, [`PushContext::endpoint_list`]), the subset's labels, whether
/// unhealthy endpoints are sent, whether host names are allowed (DNS clusters), whether endpoints carry the auto-mTLS match metadata, and
/// what locality load balancing ranks them against (`None`: nothing; the assignment is the same for
/// every proxy).
#[derive(Clone, Debug)]
pub(crate) struct AssignmentKey {
    pub name: String,
    pub endpoints: Arc<[Arc<Endpoint>]>,
    pub subset: Option<Labels>,
    pub unhealthy: bool,
    pub dns: bool,
    pub tls_metadata: bool,
    pub locality: Option<LocalityKey>,
    /// The proxy's network and IP families (IPv4, IPv6) when split-horizon EDS applies (some network
    /// has a gateway), else `None`.
    pub network: Option<(String, bool, bool)>,
}

/// What a proxy-relative assignment depends on (Istio keys its EDS cache on the proxy's locality and
/// failover-priority label values the same way): the DestinationRule that chose the setting (by
/// address within the generation; 0 for none), whether the cluster has outlier detection, the proxy's
/// locality, and the proxy's values of the `failoverPriority` labels in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LocalityKey {
    pub rule: usize,
    pub outlier_detection: bool,
    pub locality: model::push::node::Locality,
    pub labels: Vec<Option<String>>,
}

impl PartialEq for AssignmentKey {
    fn eq(&self, other: &AssignmentKey) -> bool {
        Arc::ptr_eq(&self.endpoints, &other.endpoints)
            && self.name == other.name
            && self.subset == other.subset
            && self.unhealthy == other.unhealthy
            && self.dns == other.dns
            && self.tls_metadata == other.tls_metadata
            && self.locality == other.locality
            && self.network == other.network
    }
}

impl Eq for AssignmentKey {}

impl std::hash::Hash for AssignmentKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        std::ptr::hash(Arc::as_ptr(&self.endpoints).cast::<()>(), state);
        self.subset.hash(state);
        self.unhealthy.hash(state);
        self.dns.hash(state);
        self.tls_metadata.hash(state);
        self.locality.hash(state);
        self.network.hash(state);
    }
}

/// What a sidecar's outbound route configuration `PORT` depends on besides the snapshot's config and
/// services (never endpoints): the scope, the DNS domain (short virtual-host domains), proxyless, and
/// the workload labels only when the scope can tell workloads apart (a VirtualService match with
/// `sourceLabels`, or a DestinationRule with a workload selector in the proxy's namespace).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SidecarRouteKey {
    pub port: u32,
    /// The service of a `HOST:PORT` table (a sniffed listener of its own); `None` for `PORT`.
    pub host: Option<String>,
    pub scope: ScopeKey,
    pub dns_domain: String,
    pub proxyless: bool,
    pub labels: Option<Labels>,
}

/// What a proxy's outbound clusters depend on besides the snapshot (config, services and endpoints):
/// the scope (services imported, DestinationRules visible from the namespace), the workload labels
/// only when the scope can tell workloads apart (the rule of [`SidecarRouteKey`]: a DestinationRule of
/// the namespace selects workloads, or an imported VirtualService matches `sourceLabels`), the proxy
/// kind (routers keep their own TLS rules; sniffed ports are sidecar-only), proxyless gRPC (its
/// translation), workload certificates (ISTIO_MUTUAL and auto mTLS) and an IPv6-only proxy (the
/// DNS lookup family of DNS clusters).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct OutboundClustersKey {
    pub scope: ScopeKey,
    pub labels: Option<Labels>,
    pub kind: ProxyKind,
    pub proxyless: bool,
    pub workload_certificates: bool,
    pub ipv6_only: bool,
    /// The proxy's locality when the scope has DNS-resolved services (their clusters carry endpoints
    /// ranked for it, [`crate::locality`]); `None` otherwise.
    pub locality: Option<model::push::node::Locality>,
    /// The proxy has istio-proxy's upstream `istio.metadata_exchange` (its clusters carry it).
    pub metadata_exchange: bool,
}

/// A proxy's outbound clusters, encoded in name order of generation, and the findings met making them,
/// shared by every proxy with the same [`OutboundClustersKey`] in one snapshot.
pub(crate) type SharedClusters = Arc<(Vec<EncodedResource>, Vec<Finding>)>;

/// What a sidecar's `virtualInbound` listener depends on within one generation when it has no Sidecar
/// `ingress` entries (its ports are then its service instances' target ports): each port with its
/// protocol and mTLS mode, the passthrough chains' mode, whether it has workload certificates (client
/// certificate forwarding), the policies selected for it ([`SecurityKey`]; `None`: none) and its bind
/// address. Not its own IP: replicas of a workload share one listener.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct VirtualInboundKey {
    pub ports: Vec<(u32, crate::inbound::InboundProtocol, Option<model::push::MtlsMode>)>,
    pub passthrough: Option<model::push::MtlsMode>,
    pub certified: bool,
    pub security: Option<SecurityKey>,
    pub bind_address: String,
    /// The Telemetries the inbound access loggers come from (`access_log::AccessLogs::key`).
    pub telemetry: Vec<model::ConfigKey>,
    /// The WasmPlugins / TrafficExtensions selected for the proxy, in order.
    pub extensions: Vec<model::ConfigKey>,
    /// The inbound connection managers' tracing, encoded (`tracing::HcmTracing::fingerprint`): it
    /// depends on the proxy's labels and metadata (Istio's span tags), not only on Telemetries.
    pub tracing: Vec<u8>,
    /// What Istio's telemetry filters depend on (`stats::TelemetryFilters::key`): the proxy's
    /// istio-proxy extensions and the Telemetries with `metrics` that apply to it.
    pub stats: (model::push::node::IstioExtensions, Vec<model::ConfigKey>),
}

/// Per-generation cache of sidecar scopes, sidecar route tables and merged gateway servers. One per
/// control plane (the DiscoveryServer's source owns it); cheap to share in an `Arc`. Its lock is held
/// only for map lookups and inserts, never while a value is computed.
#[derive(Debug, Default)]
pub struct GenerationCache {
    state: Mutex<CacheState>,
    jwks: JwksHolder,
}

/// The control plane's JWKS resolver, when it has one (set once, at start).
#[derive(Default)]
struct JwksHolder(std::sync::OnceLock<Arc<dyn JwksSource>>);

impl std::fmt::Debug for JwksHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "JwksSource" } else { "no JwksSource" })
    }
}

/// The [`JwksSource`] of a cache without a resolver: every `jwksUri` is unresolved, so its provider
/// gets the fake key set that rejects every token (fail closed, as Istio when a fetch fails).
struct NoJwksResolver;

impl JwksSource for NoJwksResolver {
    fn jwks(&self, _issuer: &str, jwks_uri: &str) -> JwksState {
        JwksState::Failed(format!("no JWKS resolver in this process to fetch {jwks_uri}"))
    }
}

#[derive(Debug, Default)]
struct CacheState {
    generation: u64,
    scopes: HashMap<ScopeKey, Arc<SidecarScope>>,
    routes: HashMap<SidecarRouteKey, SharedEncoded>,
    assignments: HashMap<AssignmentKey, SharedEncoded>,
    /// `assignments.len()` after its last pruning ([`GenerationCache::assignment`]).
    assignments_pruned_at: usize,
    gateways: HashMap<GatewayKey, SharedGatewayServers>,
    security: HashMap<SecurityKey, Arc<crate::policy::SecurityFilters>>,
    inbound: HashMap<VirtualInboundKey, Arc<Encoded>>,
    /// The snapshot ([`PushContext::snapshot_id`]) `clusters` holds entries for: outbound clusters
    /// depend on endpoints, so within a generation they are kept per snapshot.
    clusters_snapshot: u64,
    clusters: HashMap<OutboundClustersKey, SharedClusters>,
    findings: BTreeMap<Finding, ProxiesReporting>,
    /// The generation's EnvoyFilters, read once ([`Snapshot::compiled_envoy_filters`]).
    envoy_filters: HashMap<(), Arc<crate::envoy_filter::CompiledIndex>>,
    /// Resources patched by EnvoyFilters ([`Snapshot::patched_resource`]).
    patched: HashMap<PatchedKey, SharedPatched>,
}

/// What a proxy's security filters depend on within one generation: the policies selected for it
/// (AuthorizationPolicies, RequestAuthentications, in order) and whether it is a gateway.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SecurityKey {
    pub gateway: bool,
    pub authorization: Vec<model::ConfigKey>,
    pub authentication: Vec<model::ConfigKey>,
}

/// What a resource patched by EnvoyFilters depends on: its kind, whether the proxy is a gateway, the
/// patch set ([`envoyfilter::ProxyPatches::identity`]), the proxy's facts the patches read
/// ([`crate::envoy_filter::PatchInputs`]), and the unpatched encoding by length and a 128-bit hash keyed at random per process (two aHash
/// states: fast, and not something a client could aim collisions at).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PatchedKey {
    kind: u8,
    gateway: bool,
    patches: Arc<[(model::ConfigKey, usize)]>,
    inputs: crate::envoy_filter::PatchInputs,
    len: usize,
    digest: [u64; 2],
}

impl std::hash::Hash for PatchedKey {
    /// The patch set by its length only (equality compares it, pointer first), the rest by value:
    /// cheap for the lookup every patched resource makes.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
        self.gateway.hash(state);
        self.patches.len().hash(state);
        self.inputs.hash(state);
        self.len.hash(state);
        self.digest.hash(state);
    }
}

impl PatchedKey {
    pub(crate) fn new(
        kind: u8,
        gateway: bool,
        patches: Arc<[(model::ConfigKey, usize)]>,
        inputs: crate::envoy_filter::PatchInputs,
        bytes: &[u8],
    ) -> PatchedKey {
        static STATES: std::sync::OnceLock<(ahash::RandomState, ahash::RandomState)> =
            std::sync::OnceLock::new();
        let (a, b) = STATES.get_or_init(|| (ahash::RandomState::new(), ahash::RandomState::new()));
        PatchedKey {
            kind,
            gateway,
            patches,
            inputs,
            len: bytes.len(),
            digest: [a.hash_one(bytes), b.hash_one(bytes)],
        }
    }
}

/// A patched resource (name and encoding; `None`: a patch removed it) and the findings met making it.
pub(crate) type SharedPatched = Arc<(Option<(String, Arc<Encoded>)>, Vec<Finding>)>;

/// Patched resources kept per generation before the map is emptied (a bound on memory when every proxy's
/// resources differ).
const MAX_PATCHED: usize = 20_000;

/// What a router's merged gateway servers depend on within one generation: its workload labels (the
/// gateways that select by labels) and its service instances as `(hostname, namespace, port, target
/// port)` (the gateways generated for gateway services, and the listener ports of every gateway,
/// Istio's `resolvePorts`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GatewayKey {
    labels: Labels,
    instances: Vec<(String, String, u32, u32)>,
}

impl GatewayKey {
    fn of(proxy: &ProxyContext) -> GatewayKey {
        let mut instances: Vec<(String, String, u32, u32)> = proxy
            .service_instances
            .iter()
            .map(|i| {
                (
                    i.service.hostname.clone(),
                    i.service.namespace.clone(),
                    i.service_port.port,
                    i.endpoint.endpoint_port,
                )
            })
            .collect();
        instances.sort_unstable();
        instances.dedup();
        GatewayKey { labels: proxy.labels.clone(), instances }
    }
}

/// One xDS resource held by the [`GenerationCache`] ([`GenerationCache::resources`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedResource {
    /// Its type URL (`type.googleapis.com/envoy.config.route.v3.RouteConfiguration`, …).
    pub type_url: String,
    /// Its name (route configuration, cluster, listener name); empty if the encoding has none.
    pub name: String,
    /// Its encoded size, bytes.
    pub bytes: usize,
}

/// The string in field 1 of an encoded message when the encoding starts with it (prost writes fields
/// in number order), else empty.
fn leading_name(bytes: &[u8]) -> String {
    if bytes.first() != Some(&0x0a) {
        return String::new();
    }
    let (mut len, mut shift, mut at) = (0usize, 0u32, 1usize);
    while let Some(&b) = bytes.get(at) {
        at += 1;
        if shift > 56 {
            return String::new();
        }
        len |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return at
                .checked_add(len)
                .and_then(|end| bytes.get(at..end))
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .unwrap_or_default();
        }
        shift += 7;
    }
    String::new()
}

/// How many proxies met one finding in a generation, with the first few of their ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxiesReporting {
    /// Number of generations (proxy × resource type) that reported it.
    pub count: usize,
    /// Up to [`MAX_PROXY_EXAMPLES`] proxy ids, first seen first.
    pub proxies: Vec<String>,
}

/// Proxy ids kept per finding by [`GenerationCache::record_findings`].
pub const MAX_PROXY_EXAMPLES: usize = 5;

/// Where a lookup for a given generation stands against the cache's generation.
enum Slot<'a> {
    /// The cache holds this generation (possibly just reset to it).
    Current(std::sync::MutexGuard<'a, CacheState>),
    /// The snapshot is older than what the cache holds: compute, do not store.
    Stale,
}

impl GenerationCache {
    /// An empty cache.
    pub fn new() -> GenerationCache {
        GenerationCache::default()
    }

    /// An empty cache whose generators read remote key sets (`jwksUri`) from `jwks` (the control
    /// plane's resolver, Istio's `JwtKeyResolver`).
    pub fn with_jwks(jwks: Arc<dyn JwksSource>) -> GenerationCache {
        let cache = GenerationCache::default();
        let _ = cache.jwks.0.set(jwks);
        cache
    }

    /// The JWKS source of the generators (without a resolver: every remote key set is unresolved).
    pub fn jwks(&self) -> &dyn JwksSource {
        match self.jwks.0.get() {
            Some(j) => j.as_ref(),
            None => &NoJwksResolver,
        }
    }

    /// The config generation the cache holds entries for (0 before the first lookup).
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// `(scopes, route tables, gateway server sets)` currently held, for tests and debugging.
    pub fn len(&self) -> (usize, usize, usize) {
        let s = self.lock();
        (s.scopes.len(), s.routes.len(), s.gateways.len())
    }

    /// Outbound cluster sets currently held ([`GenerationCache::outbound_clusters`]: one per key of the
    /// latest snapshot), for tests and debugging.
    pub fn outbound_cluster_sets(&self) -> usize {
        self.lock().clusters.len()
    }

    /// Shared `virtualInbound` listeners currently held ([`VirtualInboundKey`]), for tests and debugging.
    pub fn virtual_inbound_listeners(&self) -> usize {
        self.lock().inbound.len()
    }

    /// ClusterLoadAssignments currently held ([`GenerationCache::assignment`]), for tests and debugging.
    pub fn assignments(&self) -> usize {
        self.lock().assignments.len()
    }

    /// Records what generating for `proxy` from `push` met (findings of generators that run per
    /// proxy, such as security policies that cannot be translated), so `/debug/configstatusz` can show
    /// them; kept until a newer config generation is generated for. Returns the findings not seen
    /// before in this generation (for counters).
    pub fn record_findings(&self, push: &PushContext, proxy: &str, findings: &[Finding]) -> Vec<Finding> {
        let mut new = Vec::new();
        if findings.is_empty() {
            return new;
        }
        if let Slot::Current(mut state) = self.slot(push.config_generation()) {
            for f in findings {
                if !state.findings.contains_key(f) {
                    new.push(f.clone());
                }
                let entry = state.findings.entry(f.clone()).or_default();
                entry.count += 1;
                if entry.proxies.len() < MAX_PROXY_EXAMPLES && !entry.proxies.iter().any(|p| p == proxy) {
                    entry.proxies.push(proxy.to_string());
                }
            }
        }
        new
    }

    /// The findings recorded for the current generation ([`GenerationCache::record_findings`]).
    pub fn generation_findings(&self) -> Vec<(Finding, ProxiesReporting)> {
        self.lock().findings.iter().map(|(f, p)| (f.clone(), p.clone())).collect()
    }

    /// The xDS resources the cache holds, for istiod's `/debug/cachez`: per entry its type URL, name
    /// and encoded size in bytes — route tables, ClusterLoadAssignments, outbound clusters and shared
    /// `virtualInbound` listeners (scopes, gateway servers, security filters and EnvoyFilter-patched
    /// copies are derived state, not resources, and are not listed). Names come from the encoding's
    /// first field (every one of these messages has its name as field 1).
    pub fn resources(&self) -> Vec<CachedResource> {
        use envoy_types::pb::envoy::config::{
            cluster::v3::Cluster, endpoint::v3::ClusterLoadAssignment, listener::v3::Listener,
            route::v3::RouteConfiguration,
        };
        use prost::Name;
        let state = self.lock();
        let entry = |type_url: &str, bytes: &[u8]| CachedResource {
            type_url: type_url.to_string(),
            name: leading_name(bytes),
            bytes: bytes.len(),
        };
        let mut out = Vec::new();
        let routes = RouteConfiguration::type_url();
        out.extend(state.routes.values().map(|shared| entry(&routes, shared.0.bytes())));
        let assignments = ClusterLoadAssignment::type_url();
        out.extend(state.assignments.values().map(|shared| entry(&assignments, shared.0.bytes())));
        let listeners = Listener::type_url();
        out.extend(state.inbound.values().map(|encoded| entry(&listeners, encoded.bytes())));
        let clusters = Cluster::type_url();
        for set in state.clusters.values() {
            out.extend(set.0.iter().map(|c| CachedResource {
                type_url: clusters.clone(),
                name: c.name.clone(),
                bytes: c.bytes().len(),
            }));
        }
        out
    }

    /// Empties the cache (istiod's `/debug/cachez?clear=true`, `XdsCache.ClearAll`): every entry is
    /// made again on its next lookup. The generation and the generation findings
    /// ([`GenerationCache::generation_findings`]) are kept. Returns the number of entries dropped.
    pub fn clear(&self) -> usize {
        let mut state = self.lock();
        let dropped = state.scopes.len()
            + state.routes.len()
            + state.assignments.len()
            + state.gateways.len()
            + state.security.len()
            + state.inbound.len()
            + state.clusters.len()
            + state.envoy_filters.len()
            + state.patched.len();
        let kept = CacheState {
            generation: state.generation,
            clusters_snapshot: state.clusters_snapshot,
            findings: std::mem::take(&mut state.findings),
            ..CacheState::default()
        };
        *state = kept;
        dropped
    }

    /// `true` when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0, 0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn slot(&self, generation: u64) -> Slot<'_> {
        let mut state = self.lock();
        if generation > state.generation {
            *state = CacheState { generation, ..CacheState::default() };
        }
        if generation == state.generation { Slot::Current(state) } else { Slot::Stale }
    }

    /// Looks `key` up in the map `pick` selects for `push`'s generation, else makes the value with
    /// `make` (outside the lock) and stores it unless the generation moved on meanwhile; the first
    /// value stored for a key wins, so every caller of one generation shares one value.
    fn get_or_make<K, V>(
        &self,
        push: &PushContext,
        key: K,
        pick: fn(&mut CacheState) -> &mut HashMap<K, V>,
        make: impl FnOnce() -> V,
    ) -> V
    where
        K: std::hash::Hash + Eq,
        V: Clone,
    {
        let generation = push.config_generation();
        if let Slot::Current(mut state) = self.slot(generation)
            && let Some(hit) = pick(&mut state).get(&key)
        {
            return hit.clone();
        }
        let made = make();
        match self.slot(generation) {
            Slot::Current(mut state) => pick(&mut state).entry(key).or_insert(made).clone(),
            Slot::Stale => made,
        }
    }

    /// The proxy's [`SidecarScope`] in `push`, computed once per generation and scope key (namespace
    /// and the Sidecar that applies), then shared.
    pub fn sidecar_scope(&self, push: &PushContext, proxy: &ProxyContext) -> Arc<SidecarScope> {
        self.get_or_make(
            push,
            push.scope_key(proxy),
            |s| &mut s.scopes,
            || Arc::new(push.compute_sidecar_scope(proxy)),
        )
    }

    /// The sidecar route configuration for `key`, made by `make` once per generation, then shared.
    pub(crate) fn sidecar_route(
        &self,
        push: &PushContext,
        key: SidecarRouteKey,
        make: impl FnOnce() -> (Vec<u8>, Vec<Finding>),
    ) -> SharedEncoded {
        self.get_or_make(push, key, |s| &mut s.routes, || shared(make()))
    }

    /// The ClusterLoadAssignment for `key`, made by `make` once per generation and key, then shared.
    /// Endpoint changes within a generation make new keys (a new endpoint list); entries whose list
    /// no snapshot holds any more are dropped when the map has doubled since its last pruning, so a
    /// stream of endpoint changes does not grow it without bound.
    pub(crate) fn assignment(
        &self,
        push: &PushContext,
        key: AssignmentKey,
        make: impl FnOnce() -> (Vec<u8>, Vec<Finding>),
    ) -> SharedEncoded {
        let made = self.get_or_make(push, key, |s| &mut s.assignments, || shared(make()));
        if let Slot::Current(mut state) = self.slot(push.config_generation())
            && state.assignments.len() > 2 * state.assignments_pruned_at + 256
        {
            // The cache's own key holds one reference: a list nothing else holds is gone.
            state.assignments.retain(|k, _| Arc::strong_count(&k.endpoints) > 1);
            state.assignments_pruned_at = state.assignments.len();
        }
        made
    }

    /// The outbound clusters for `key`, made by `make` once per snapshot ([`PushContext::snapshot_id`])
    /// and key, then shared. The first lookup from a newer snapshot drops the older snapshot's entries;
    /// a lookup from an older one computes without storing (as for generations).
    pub(crate) fn outbound_clusters(
        &self,
        push: &PushContext,
        key: OutboundClustersKey,
        make: impl FnOnce() -> (Vec<EncodedResource>, Vec<Finding>),
    ) -> SharedClusters {
        let id = push.snapshot_id();
        let current = |state: &mut CacheState| {
            if id > state.clusters_snapshot {
                state.clusters.clear();
                state.clusters_snapshot = id;
            }
            id == state.clusters_snapshot
        };
        if let Slot::Current(mut state) = self.slot(push.config_generation())
            && current(&mut state)
            && let Some(hit) = state.clusters.get(&key)
        {
            return hit.clone();
        }
        let made = Arc::new(make());
        if let Slot::Current(mut state) = self.slot(push.config_generation())
            && current(&mut state)
        {
            return state.clusters.entry(key).or_insert(made).clone();
        }
        made
    }

    /// The servers of the gateways selecting `proxy` merged by listener port (Istio's
    /// `SetGatewaysForProxy`), made by `make` once per generation and [`GatewayKey`] (labels and
    /// service instances), then shared by the listener and route generators of every such router.
    pub(crate) fn gateway_servers(
        &self,
        push: &PushContext,
        proxy: &ProxyContext,
        make: impl FnOnce() -> SharedGatewayServers,
    ) -> SharedGatewayServers {
        self.get_or_make(push, GatewayKey::of(proxy), |s| &mut s.gateways, make)
    }
}

fn shared((bytes, findings): (Vec<u8>, Vec<Finding>)) -> SharedEncoded {
    Arc::new((Arc::new(Encoded::new(bytes)), findings))
}

/// What the generators read: a [`PushContext`] (through `Deref`) and the [`GenerationCache`] it shares
/// with the other snapshots of the control plane. Cloning is two `Arc` clones.
#[derive(Clone, Debug)]
pub struct Snapshot {
    push: Arc<PushContext>,
    cache: Arc<GenerationCache>,
}

impl Snapshot {
    /// `push` with a cache of its own (tests, benchmarks, one-off generation such as `config_dump`).
    pub fn new(push: impl Into<Arc<PushContext>>) -> Snapshot {
        Snapshot { push: push.into(), cache: Arc::new(GenerationCache::new()) }
    }

    /// `push` sharing `cache` (the control plane's one cache).
    pub fn with_cache(push: Arc<PushContext>, cache: Arc<GenerationCache>) -> Snapshot {
        Snapshot { push, cache }
    }

    /// The snapshot.
    pub fn push_context(&self) -> &Arc<PushContext> {
        &self.push
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<GenerationCache> {
        &self.cache
    }

    /// Where remote JWKS (`jwksUri`) are read from ([`GenerationCache::jwks`]).
    pub fn jwks(&self) -> &dyn JwksSource {
        self.cache.jwks()
    }

    /// The proxy's [`SidecarScope`] (from the cache).
    pub fn sidecar_scope(&self, proxy: &ProxyContext) -> Arc<SidecarScope> {
        self.cache.sidecar_scope(&self.push, proxy)
    }

    pub(crate) fn sidecar_route(
        &self,
        key: SidecarRouteKey,
        make: impl FnOnce() -> (Vec<u8>, Vec<Finding>),
    ) -> SharedEncoded {
        self.cache.sidecar_route(&self.push, key, make)
    }

    pub(crate) fn assignment(
        &self,
        key: AssignmentKey,
        make: impl FnOnce() -> (Vec<u8>, Vec<Finding>),
    ) -> SharedEncoded {
        self.cache.assignment(&self.push, key, make)
    }

    pub(crate) fn gateway_servers(
        &self,
        proxy: &ProxyContext,
        make: impl FnOnce() -> SharedGatewayServers,
    ) -> SharedGatewayServers {
        self.cache.gateway_servers(&self.push, proxy, make)
    }

    /// The encoded `virtualInbound` listener for `key`, made by `make` once per generation, then shared.
    pub(crate) fn virtual_inbound(
        &self,
        key: VirtualInboundKey,
        make: impl FnOnce() -> Arc<Encoded>,
    ) -> Arc<Encoded> {
        self.cache.get_or_make(&self.push, key, |s| &mut s.inbound, make)
    }

    pub(crate) fn outbound_clusters(
        &self,
        key: OutboundClustersKey,
        make: impl FnOnce() -> (Vec<EncodedResource>, Vec<Finding>),
    ) -> SharedClusters {
        self.cache.outbound_clusters(&self.push, key, make)
    }

    /// The generation's EnvoyFilters read by `compile` (given every EnvoyFilter of the snapshot), once
    /// per generation.
    pub(crate) fn compiled_envoy_filters(
        &self,
        compile: impl FnOnce(&[Arc<model::Config>]) -> crate::envoy_filter::CompiledIndex,
    ) -> Arc<crate::envoy_filter::CompiledIndex> {
        self.cache.get_or_make(
            &self.push,
            (),
            |s| &mut s.envoy_filters,
            || Arc::new(compile(&self.push.all_envoy_filters())),
        )
    }

    /// The resource `key` describes, patched by `make` once per generation and shared by every proxy with
    /// the same patches and the same unpatched resource. At most [`MAX_PATCHED`] are kept.
    pub(crate) fn patched_resource(
        &self,
        key: PatchedKey,
        make: impl FnOnce() -> (Option<(String, Arc<Encoded>)>, Vec<Finding>),
    ) -> SharedPatched {
        if let Slot::Current(mut state) = self.cache.slot(self.push.config_generation())
            && state.patched.len() >= MAX_PATCHED
        {
            state.patched.clear();
        }
        self.cache.get_or_make(&self.push, key, |s| &mut s.patched, || Arc::new(make()))
    }

    /// The security filters for `key`, made by `make` once per generation, then shared by every
    /// proxy that selects the same policies.
    pub(crate) fn security_filters(
        &self,
        key: SecurityKey,
        make: impl FnOnce() -> crate::policy::SecurityFilters,
    ) -> Arc<crate::policy::SecurityFilters> {
        self.cache.get_or_make(&self.push, key, |s| &mut s.security, || Arc::new(make()))
    }
}

impl Deref for Snapshot {
    type Target = PushContext;

    fn deref(&self) -> &PushContext {
        &self.push
    }
}

impl From<PushContext> for Snapshot {
    fn from(push: PushContext) -> Snapshot {
        Snapshot::new(push)
    }
}
