//! [`NetworkingSource`]: the engine's [`ResourceSource`], backed by the `networking` generators and
//! the snapshots the [`crate::DiscoveryServer`] publishes ([`crate::server::PushContexts`]).
//!
//! The xDS [`Proxy`] (node id + metadata) becomes a model [`ProxyContext`] once per stream
//! ([`proxy_context`]); a request generates from the newest published [`PushContext`], a push from the
//! snapshot it carries, both through the source's one [`GenerationCache`]. A push
//! regenerates only the types its change affects ([`type_needs_push`]); an endpoint-only push
//! regenerates only the ClusterLoadAssignments of the changed services (partial EDS response).
//! SDS (`file-cert:`/`file-root:` names) is answered by [`FileSecrets`] for the names asked for that
//! an authenticated proxy's own config names ([`networking::file_secret_references`]; nothing over
//! plaintext); `credentialName` secrets (`kubernetes://…`, `kubernetes-gateway://…`) by [`CredentialSecrets`]
//! for the names the proxy may read (its verified identity, its gateways' verified certificate
//! references, as istiod's `SecretGen`); names that cannot be served are left unanswered (never
//! reported removed). MCP-over-xDS config
//! types (`group/version/Kind`) are answered by the [`ApiGenerator`] ([`mcp::server`]).

use std::{collections::BTreeSet, sync::Arc};

use envoy_types::pb::{
    envoy::config::{
        cluster::v3::Cluster, endpoint::v3::ClusterLoadAssignment, listener::v3::Listener,
        route::v3::RouteConfiguration,
    },
    google::protobuf::Any,
};
use model::push::node::{Locality, Proxy, VerifiedIdentity};
use model::{
    ServiceDiscovery,
    push::{ProxyContext, PushContext, PushRequest, SidecarScope},
};
use networking::{
    GenerationCache, Snapshot,
    cache::EncodedResource,
    naming::parse_cluster_name,
    nds::{NameTable, NameTableProxy, build_name_table},
};
use prost::{Message, Name};
use tracing::debug;
use xds::{
    GenerateRequest, Generated, NodeInfo, NodeParts, Resource, ResourceSource, SourceError, Trigger,
    server::StreamCaller, type_url,
};

use mcp::server::{ApiGenerator, ApiState};
use networking::credentials::{ProxyIdentity, is_credential_name, verified_certificate_references};
use sds::{CredentialSecrets, FileSecrets};

use crate::{objects::Tracking, push::type_needs_push, server::PushContexts};

/// What the generators read of a connected proxy ([`ProxyContext::from_proxy`]).
///
/// # Errors
/// [`SourceError::Refused`] for node types meshpilot does not serve.
pub fn proxy_context(proxy: &Proxy) -> Result<ProxyContext, SourceError> {
    ProxyContext::from_proxy(proxy).map_err(SourceError::Refused)
}

/// Per-connection state: the proxy as the generators see it.
#[derive(Debug)]
pub struct ConnectionContext {
    /// The proxy.
    pub proxy: ProxyContext,
    /// The proxy's Sidecar scope in the last snapshot it was checked against (Istio's
    /// `PrevSidecarScope`): a change that leaves the scope still concerns the proxy.
    pub scope: Option<Arc<SidecarScope>>,
    /// The config types' versions last sent ([`mcp::server`]).
    pub api: ApiState,
}

/// The [`ResourceSource`] of meshpilot's xDS server: reads the published snapshots and the service
/// registry (for the proxy's own service instances); never calls back into the server.
#[derive(Clone)]
pub struct NetworkingSource {
    snapshots: PushContexts,
    services: Arc<dyn ServiceDiscovery>,
    cache: Arc<GenerationCache>,
    secrets: Arc<FileSecrets>,
    credentials: Arc<CredentialSecrets>,
    tracking: Option<Arc<Tracking>>,
    api: Option<Arc<ApiGenerator>>,
    ip_autoallocate: bool,
    debug: crate::debug::DebugSlot,
}

impl std::fmt::Debug for NetworkingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkingSource")
            .field("version", &self.snapshots.borrow().as_ref().map(|p| p.version().to_string()))
            .field("secrets", &self.secrets)
            .finish_non_exhaustive()
    }
}

impl NetworkingSource {
    /// A source generating from the snapshots `snapshots` publishes ([`crate::DiscoveryServer::push_contexts`];
    /// connections are refused as not ready until the first one), with `services` for the proxies' own
    /// service instances, serving no file secrets.
    pub fn new(snapshots: PushContexts, services: Arc<dyn ServiceDiscovery>) -> Self {
        Self::with_file_secrets(snapshots, services, FileSecrets::disabled())
    }

    /// As [`NetworkingSource::new`], answering SDS requests from `secrets`.
    pub fn with_file_secrets(
        snapshots: PushContexts,
        services: Arc<dyn ServiceDiscovery>,
        secrets: Arc<FileSecrets>,
    ) -> Self {
        Self::with_cache(snapshots, services, secrets, Arc::new(GenerationCache::new()))
    }

    /// As [`NetworkingSource::with_file_secrets`], generating through `cache` (the DiscoveryServer's:
    /// shared with other sources and the debug handlers, carrying the JWKS resolver).
    pub fn with_cache(
        snapshots: PushContexts,
        services: Arc<dyn ServiceDiscovery>,
        secrets: Arc<FileSecrets>,
        cache: Arc<GenerationCache>,
    ) -> Self {
        NetworkingSource {
            snapshots,
            services,
            cache,
            secrets,
            credentials: Arc::default(),
            tracking: None,
            api: None,
            ip_autoallocate: true,
            debug: Arc::default(),
        }
    }

    /// Records into `tracking` the push each response is generated from (or found unchanged by),
    /// per proxy and type, for the object status ([`crate::objects`]).
    #[must_use]
    pub fn with_tracking(mut self, tracking: Arc<Tracking>) -> Self {
        self.tracking = Some(tracking);
        self
    }

    /// Answers `credentialName` SDS names from `credentials` (without it: an empty store).
    #[must_use]
    pub fn with_credentials(mut self, credentials: Arc<CredentialSecrets>) -> Self {
        self.credentials = credentials;
        self
    }

    /// Answers MCP-over-xDS config types with `api` (without it they get empty sets).
    #[must_use]
    pub fn with_api_generator(mut self, api: ApiGenerator) -> Self {
        self.api = Some(Arc::new(api));
        self
    }

    /// Answers istiod's debug types through the generator `slot` holds once set ([`crate::debug`];
    /// until then, and without it, they are refused as not served).
    #[must_use]
    pub fn with_debug(mut self, slot: crate::debug::DebugSlot) -> Self {
        self.debug = slot;
        self
    }

    /// `PILOT_ENABLE_IP_AUTOALLOCATE` (default true): NDS gives proxies that capture DNS the
    /// ServiceEntries' auto-allocated VIPs.
    #[must_use]
    pub fn with_ip_autoallocate(mut self, on: bool) -> Self {
        self.ip_autoallocate = on;
        self
    }

    /// The file secrets it serves (run them with [`FileSecrets::run`] for rotation).
    pub fn file_secrets(&self) -> &Arc<FileSecrets> {
        &self.secrets
    }

    /// The generation cache its generators share (scopes, route tables, gateway servers).
    pub fn cache(&self) -> &Arc<GenerationCache> {
        &self.cache
    }

    /// `push` with the source's generation cache.
    pub fn snapshot(&self, push: Arc<PushContext>) -> Snapshot {
        Snapshot::with_cache(push, self.cache.clone())
    }

    /// The version of the newest published snapshot (`None` before the first): what a response
    /// generated now carries as its `version_info`.
    pub fn current_version(&self) -> Option<String> {
        self.snapshots.borrow().as_ref().map(|p| p.version().to_string())
    }

    fn current(&self) -> Result<Snapshot, SourceError> {
        let current = self.snapshots.borrow().clone();
        current
            .map(|p| self.snapshot(p))
            .ok_or_else(|| SourceError::NotReady("config and services are not synced yet".into()))
    }
}

impl ResourceSource for NetworkingSource {
    type Push = PushRequest;
    type Node = Proxy;
    type Context = ConnectionContext;

    /// Istio's `ParseServiceNodeWithMetadata`: the node id `TYPE~IP~ID~DOMAIN` and typed metadata
    /// ([`Proxy::from_node`]), with the identities the caller proved (mTLS certificate or token).
    fn node(&self, node: NodeParts, caller: Option<&StreamCaller>) -> Result<Proxy, SourceError> {
        let locality = Locality { region: node.region, zone: node.zone, sub_zone: node.sub_zone };
        let mut proxy = Proxy::from_node(&node.id, node.metadata, locality, node.user_agent_name)
            .map_err(|e| SourceError::InvalidNode(e.to_string()))?;
        proxy.service_cluster = node.cluster;
        let ext = node.istio_extensions;
        proxy.istio_extensions = model::push::node::IstioExtensions {
            http_stats: ext.http_stats,
            tcp_stats: ext.tcp_stats,
            http_peer_metadata: ext.http_peer_metadata,
            tcp_metadata_exchange: ext.tcp_metadata_exchange,
            upstream_metadata_exchange: ext.upstream_metadata_exchange,
        };
        if let Some(caller) = caller {
            proxy.verified_identities = (caller.identities.iter().zip(&caller.namespaces))
                .map(|(identity, namespace)| VerifiedIdentity {
                    identity: identity.clone(),
                    namespace: namespace.clone(),
                })
                .collect();
        }
        Ok(proxy)
    }

    fn node_info<'a>(&self, proxy: &'a Proxy) -> NodeInfo<'a> {
        NodeInfo {
            id: &proxy.id,
            namespace: &proxy.config_namespace,
            version: &proxy.metadata.istio_version,
            node_id: &proxy.node_id,
        }
    }

    fn connect(&self, proxy: &Proxy) -> Result<ConnectionContext, SourceError> {
        let push = self.current()?;
        if let Some(api) = self.api.as_ref().filter(|_| proxy.uses_api_generator()) {
            api.authorize(proxy, &push.mesh().root_namespace)?;
        }
        let mut ctx = proxy_context(proxy)?;
        ctx.set_instances_from(self.services.as_ref());
        let scope = (ctx.is_sidecar() && !proxy.uses_api_generator()).then(|| push.sidecar_scope(&ctx));
        Ok(ConnectionContext { proxy: ctx, scope, api: ApiState::default() })
    }

    fn needs_push(&self, ctx: &mut ConnectionContext, proxy: &Proxy, push: &PushRequest) -> bool {
        if proxy.uses_api_generator() {
            // Each config type decides for itself (ApiGenerator::generate).
            return true;
        }
        // Changed file secrets concern exactly the connections they were pushed to.
        let secrets = !push.secrets_updated.is_empty();
        if !model::push::proxy_needs_push(push, ctx.proxy.kind) {
            return secrets;
        }
        // Forced, endpoint-only and secret-only pushes leave the scope as it was: no lookup.
        if push.forced || push.configs_updated.is_empty() {
            return true;
        }
        let (Some(snapshot), true) = (&push.push, ctx.proxy.is_sidecar()) else { return true };
        let scope = self.cache.sidecar_scope(snapshot, &ctx.proxy);
        let previous = ctx.scope.replace(scope.clone());
        model::push::scope_needs_push(push, &ctx.proxy, previous.as_deref(), &scope) || secrets
    }

    fn generate(
        &self,
        ctx: &mut ConnectionContext,
        request: &GenerateRequest<'_, Proxy, PushRequest>,
    ) -> Result<Option<Generated>, SourceError> {
        if type_url::is_debug_type(request.type_url) {
            // Answered on request only: a push changes no debug answer a client waits for.
            if !matches!(request.trigger, Trigger::Request) {
                return Ok(None);
            }
            let Some(debug) = self.debug.get() else {
                return Err(SourceError::InvalidRequest(format!("{} is not served here", request.type_url)));
            };
            let debug_request = crate::debug::DebugRequest {
                type_url: request.type_url,
                names: &request.watch.names,
                caller: request.proxy,
            };
            return debug.generate(&debug_request).map(Some);
        }
        if request.type_url == type_url::SECRET {
            return Ok(self.generate_secrets(ctx, request));
        }
        if request.type_url == type_url::NAME_TABLE {
            return self.generate_name_table(ctx, request);
        }
        if let Some(api) = self.api.as_ref().filter(|_| type_url::is_mcp_type(request.type_url)) {
            let push = self.current()?;
            api.authorize(request.proxy, &push.mesh().root_namespace).map_err(|e| SourceError::Generate {
                type_url: request.type_url.to_string(),
                message: e.to_string(),
            })?;
            return Ok(api.generate(&mut ctx.api, request.type_url, request.trigger, push.mesh()));
        }
        let push = match request.trigger {
            Trigger::Push(p) => {
                if !type_needs_push(p, request.type_url, ctx.proxy.kind) {
                    // Unchanged by this push: what the proxy has stands for it.
                    if let (Some(t), Some(push)) = (&self.tracking, &p.push) {
                        t.record_generated(&ctx.proxy.id, request.type_url, push.version());
                    }
                    return Ok(None);
                }
                match &p.push {
                    Some(push) => self.snapshot(push.clone()),
                    None => self.current()?,
                }
            }
            _ => self.current()?,
        };
        if let Some(t) = &self.tracking {
            t.record_generated(&ctx.proxy.id, request.type_url, push.version());
        }
        // A push to a watch larger than the proxy's clusters: only the watched clusters, as a partial
        // response (the other names were answered when requested), and nothing when none is watched.
        let from_clusters = push_names_from_clusters(&push, &ctx.proxy, request);
        if from_clusters.as_ref().is_some_and(Vec::is_empty) {
            return Ok(None);
        }
        let mut incremental = from_clusters.is_some();
        let mut names: Vec<String> =
            from_clusters.unwrap_or_else(|| request.watch.names.iter().cloned().collect());
        if request.watch.wildcard {
            names.clear();
        }
        // Endpoint-only push: only the changed services' assignments (a partial EDS response).
        if let Trigger::Push(p) = request.trigger
            && request.type_url == type_url::ENDPOINT
            && p.is_endpoints_only()
            && !request.watch.wildcard
        {
            names.retain(|n| {
                parse_cluster_name(n)
                    .is_some_and(|k| p.endpoints_updated.iter().any(|(h, _)| h.eq_ignore_ascii_case(k.host)))
            });
            if names.is_empty() {
                return Ok(None);
            }
            incremental = true;
        }
        if !request.watch.wildcard && names.is_empty() {
            return Ok(Some(Generated::full(push.version(), Vec::new())));
        }
        // A push (or the EDS that follows CDS) leaves out endpoint names that are no cluster of the
        // proxy: they were answered (empty) when requested, and a client watching many unknown names
        // must not cost work on every push (docs/RELIABILITY.md, nonce flood).
        let known_only = request.type_url == type_url::ENDPOINT
            && !request.watch.wildcard
            && !matches!(request.trigger, Trigger::Request);
        let proxy = &ctx.proxy;
        let (resources, findings) = generate_type(&push, proxy, request.type_url, &names, known_only)?;
        if known_only && resources.is_empty() {
            return Ok(None);
        }
        let incremental = incremental || (known_only && resources.len() < names.len());
        if !findings.is_empty() {
            debug!(proxy = %proxy.id, type_url = request.type_url, findings = findings.len(), "generation findings");
            for f in self.cache.record_findings(&push, &proxy.id, &findings) {
                let kind = f.config.as_ref().map(|k| k.kind);
                if f.severity == model::finding::Severity::Dropped
                    && matches!(kind, Some(api::Kind::AuthorizationPolicy | api::Kind::RequestAuthentication))
                {
                    let kind = kind.map(|k| k.to_string()).unwrap_or_default();
                    metrics::counter!(crate::metrics::SECURITY_POLICY_FINDINGS, "kind" => kind).increment(1);
                }
                if let Some(key) = f.config.as_ref().filter(|k| k.kind == api::Kind::EnvoyFilter) {
                    let severity = match f.severity {
                        model::finding::Severity::Dropped => "dropped",
                        model::finding::Severity::Unsupported => "unsupported",
                        model::finding::Severity::Warning => "warning",
                    };
                    metrics::counter!(
                        crate::metrics::ENVOY_FILTER_FINDINGS,
                        "name" => format!("{}/{}", key.namespace, key.name),
                        "severity" => severity
                    )
                    .increment(1);
                }
            }
        }
        Ok(Some(if incremental {
            Generated::incremental(push.version(), resources, Vec::new())
        } else {
            Generated::full(push.version(), resources)
        }))
    }
}

/// Watches at most this large are read name by name on a push; a larger one is intersected with the
/// proxy's clusters instead ([`push_names_from_clusters`]).
const SCAN_WATCH_NAMES: usize = 64;

/// The EDS names a config push or the EDS that follows CDS (not an endpoint-only push, not a
/// request) answers when the watch is larger than the proxy's outbound clusters: those clusters that
/// the watch holds, in name order, instead of every watched name (`None`: read the watch). For the EDS
/// after CDS the watch includes the clusters just sent, which are outbound clusters of the proxy.
/// A real Envoy watches exactly its EDS clusters; a client that watches thousands of unknown names
/// (docs/RELIABILITY.md, name-heavy flood) then costs a lookup per cluster of its own, not a copy and
/// a parse of every name it sent, on each push. The names dropped are the ones `known_only` leaves
/// out anyway: no outbound cluster of the proxy.
fn push_names_from_clusters(
    push: &Snapshot,
    proxy: &ProxyContext,
    request: &GenerateRequest<'_, Proxy, PushRequest>,
) -> Option<Vec<String>> {
    let endpoints_only = match request.trigger {
        Trigger::Request => return None,
        Trigger::Push(p) => p.is_endpoints_only(),
        Trigger::Dependency => false,
    };
    let watched = &request.watch.names;
    if request.type_url != type_url::ENDPOINT
        || request.watch.wildcard
        || endpoints_only
        || watched.len() <= SCAN_WATCH_NAMES
    {
        return None;
    }
    let clusters = networking::cluster::outbound_cluster_names(push, proxy);
    if watched.len() <= clusters.len() {
        return None;
    }
    let mut names: Vec<String> = clusters.into_iter().filter(|n| watched.contains(n)).collect();
    names.sort_unstable();
    Some(names)
}

impl NetworkingSource {
    /// NDS (Istio's `NdsGenerator`): the one name table of the proxy's Sidecar scope, as a complete
    /// set of one resource named `""` (as istiod). A push regenerates it when a kind Istio's
    /// `ndsNeedsPush` counts changed ([`type_needs_push`]) or, for an endpoint-only push, when a changed
    /// service is headless (its endpoints are its DNS answers; istiod makes a full push there).
    fn generate_name_table(
        &self,
        ctx: &mut ConnectionContext,
        request: &GenerateRequest<'_, Proxy, PushRequest>,
    ) -> Result<Option<Generated>, SourceError> {
        let push = match request.trigger {
            Trigger::Push(p) => {
                let snapshot = match &p.push {
                    Some(push) => self.snapshot(push.clone()),
                    None => self.current()?,
                };
                let headless = |(host, ns): &(String, String)| {
                    snapshot.services().iter().any(|s| {
                        s.hostname.eq_ignore_ascii_case(host)
                            && &s.namespace == ns
                            && s.resolution == model::service::Resolution::Passthrough
                    })
                };
                let needed = if p.is_endpoints_only() && !p.forced {
                    p.endpoints_updated.iter().any(headless)
                } else {
                    type_needs_push(p, request.type_url, ctx.proxy.kind)
                };
                if !needed {
                    if let Some(t) = &self.tracking {
                        t.record_generated(&ctx.proxy.id, request.type_url, snapshot.version());
                    }
                    return Ok(None);
                }
                snapshot
            }
            _ => self.current()?,
        };
        if let Some(t) = &self.tracking {
            t.record_generated(&ctx.proxy.id, request.type_url, push.version());
        }
        let meta = &request.proxy.metadata;
        let uses_auto = (self.ip_autoallocate || meta.flag("DNS_AUTO_ALLOCATE")) && meta.flag("DNS_CAPTURE");
        let node = NameTableProxy::new(&ctx.proxy.ips, &meta.network, uses_auto);
        let scope = push.sidecar_scope(&ctx.proxy);
        let table = build_name_table(&push, &scope, &node);
        let body = Any { type_url: NameTable::type_url(), value: table.encode_to_vec() };
        let version = xds::content_version(&body);
        let resource = Resource { name: String::new(), version, body };
        Ok(Some(Generated::full(push.version(), vec![resource])))
    }

    /// SDS: the requested names on a request; on a push, only the subscribed names whose files
    /// changed (all subscribed names when forced). Always an incremental result, so a name that cannot
    /// be served is neither sent nor reported removed: the proxy keeps waiting for it.
    fn generate_secrets(
        &self,
        ctx: &ConnectionContext,
        request: &GenerateRequest<'_, Proxy, PushRequest>,
    ) -> Option<Generated> {
        let names: BTreeSet<String> = match request.trigger {
            Trigger::Push(p) if !p.forced => {
                request.watch.names.intersection(&p.secrets_updated).cloned().collect()
            }
            _ => request.watch.names.clone(),
        };
        let is_request = matches!(request.trigger, Trigger::Request);
        if names.is_empty() && !is_request {
            return None;
        }
        let (credential_names, mut files): (BTreeSet<String>, BTreeSet<String>) =
            names.into_iter().partition(|n| is_credential_name(n));
        let snapshot = match request.trigger {
            Trigger::Push(PushRequest { push: Some(push), .. }) => Some(self.snapshot(push.clone())),
            _ => self.current().ok(),
        };
        let identity =
            request.proxy.verified_identities.first().map(|v| ProxyIdentity::new(&v.identity, &v.namespace));
        // Certificate files go only to an authenticated proxy whose own config (of its namespace or the
        // root namespace) names them, never over plaintext: networking::file_secret_references.
        if !files.is_empty() {
            let allowed = match (&identity, &snapshot) {
                (Some(identity), Some(push)) => {
                    networking::file_secret_references(push, &ctx.proxy, &identity.namespace)
                }
                _ => BTreeSet::new(),
            };
            let before = files.len();
            files.retain(|n| allowed.contains(n));
            if files.len() < before {
                debug!(
                    proxy = %request.proxy.id,
                    authenticated = identity.is_some(),
                    refused = before - files.len(),
                    "file secrets refused: not authenticated, or not named by the proxy's own config"
                );
            }
        }
        let mut resources = self.secrets.resources(&files);
        if !credential_names.is_empty()
            && let Some(push) = &snapshot
        {
            let verified = verified_certificate_references(push, &ctx.proxy, identity.as_ref());
            resources.extend(self.credentials.resources(
                &request.proxy.id,
                &credential_names,
                identity.as_ref(),
                &verified,
            ));
            resources.sort_by(|a, b| a.name.cmp(&b.name));
        }
        if resources.is_empty() && !is_request {
            return None;
        }
        let version = snapshot.map(|p| p.version().to_string()).unwrap_or_default();
        Some(Generated::incremental(version, resources, Vec::new()))
    }
}

/// A resource of type `M` from an encoded one the generators may share between proxies: the bytes
/// are copied into the response, the content-hash version ([`xds::content_version`]) is computed once
/// per shared resource.
fn shared_resource<M: Name>(e: &EncodedResource) -> Resource {
    let body = Any { type_url: M::type_url(), value: e.bytes().to_vec() };
    let version = e.encoded.version(|| xds::content_version(&body)).to_string();
    Resource { name: e.name.clone(), version, body }
}

/// Calls the `networking` generator for `type_url` (CDS, EDS, LDS, RDS, ECDS); other types get an empty
/// set. `names` empty means everything the proxy gets. `known_only` (EDS): names that are not
/// clusters of a service the proxy sees are left out instead of answered with an empty assignment.
///
/// # Errors
/// Never for known types; kept for generators that can fail.
pub fn generate_type(
    push: &Snapshot,
    proxy: &ProxyContext,
    type_url: &str,
    names: &[String],
    known_only: bool,
) -> Result<(Vec<Resource>, Vec<model::Finding>), SourceError> {
    Ok(match type_url {
        type_url::CLUSTER => {
            let g = networking::cluster::generate_clusters_encoded(push, proxy, names);
            (g.resources.into_iter().map(|c| shared_resource::<Cluster>(&c)).collect(), g.findings)
        }
        type_url::ENDPOINT => {
            let g = networking::endpoint::generate_endpoints_encoded(push, proxy, names, known_only);
            (
                g.resources.into_iter().map(|e| shared_resource::<ClusterLoadAssignment>(&e)).collect(),
                g.findings,
            )
        }
        type_url::LISTENER => {
            let g = networking::listener::generate_listeners_encoded(push, proxy, names);
            (g.resources.into_iter().map(|l| shared_resource::<Listener>(&l)).collect(), g.findings)
        }
        type_url::ROUTE => {
            let g = networking::rds::generate_routes_encoded(push, proxy, names);
            (g.resources.into_iter().map(|r| shared_resource::<RouteConfiguration>(&r)).collect(), g.findings)
        }
        type_url::EXTENSION_CONFIG => {
            let g = networking::extension::generate_extension_configs(push, proxy, names);
            (g.resources.iter().map(|c| Resource::new(c.name.clone(), c)).collect(), g.findings)
        }
        _ => (Vec::new(), Vec::new()),
    })
}
