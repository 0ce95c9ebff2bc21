//! [`NetworkingSource`]: the engine's [`ResourceSource`], backed by the `networking` generators and
//! the [`DiscoveryServer`]'s current snapshot.
//!
//! The xDS [`Proxy`] (node id + metadata) becomes a `networking` [`ProxyContext`] once per stream
//! ([`proxy_context`]); each request or push generates from the newest [`PushContext`]. A push
//! regenerates only the types its change affects ([`type_needs_push`]); an endpoint-only push
//! regenerates only the ClusterLoadAssignments of the changed services (partial EDS response).
//! SDS (`file-cert:`/`file-root:` names) is answered by [`FileSecrets`] for exactly the names asked
//! for; names that cannot be served are left unanswered (never reported removed).

use std::{collections::BTreeSet, sync::Arc};

use envoy_types::pb::{
    envoy::config::{
        cluster::v3::Cluster, endpoint::v3::ClusterLoadAssignment, listener::v3::Listener,
        route::v3::RouteConfiguration,
    },
    google::protobuf::Any,
};
use networking::{
    InterceptionMode, ProxyContext, ProxyKind, PushContext, SidecarScope, naming::parse_cluster_name,
};
use prost::Name;
use tracing::debug;
use xds::{
    GenerateRequest, Generated, NodeType, Proxy, Resource, ResourceSource, SourceError, Trigger, type_url,
};

use sds::FileSecrets;

use crate::{
    push::{PushRequest, type_needs_push},
    server::DiscoveryServer,
};

/// The `networking` proxy kind of an xDS node type; `None` for types meshpilot does not serve
/// (waypoint, ztunnel, …).
pub fn proxy_kind(proxy: &Proxy) -> Option<ProxyKind> {
    match proxy.node_type {
        NodeType::Sidecar => Some(ProxyKind::Sidecar),
        NodeType::Router => Some(ProxyKind::Router),
        _ => None,
    }
}

/// Builds what the generators need from a connected proxy. Sidecars with `INTERCEPTION_MODE: NONE`
/// bind their outbound listeners to `127.0.0.1` (as Istio does without traffic capture); others to
/// `0.0.0.0`.
///
/// # Errors
/// [`SourceError::Refused`] for node types meshpilot does not serve.
pub fn proxy_context(proxy: &Proxy) -> Result<ProxyContext, SourceError> {
    let kind = proxy_kind(proxy).ok_or_else(|| {
        SourceError::Refused(format!(
            "node type {} is not served by meshpilot (sidecar and router are)",
            proxy.node_type.as_str()
        ))
    })?;
    let mut ctx = ProxyContext::new(kind, &proxy.config_namespace);
    ctx.id = proxy.node_id.clone();
    ctx.ips = proxy.ip_addresses.iter().map(ToString::to_string).collect();
    ctx.labels = proxy.metadata.labels.clone();
    ctx.dns_domain = proxy.dns_domain.clone();
    ctx.interception_mode = InterceptionMode::parse(&proxy.metadata.interception_mode);
    ctx.proxyless_grpc = proxy.is_proxyless_grpc();
    ctx.istio_version = proxy.metadata.istio_version.clone();
    if kind == ProxyKind::Sidecar && ctx.interception_mode == InterceptionMode::None {
        ctx.bind_address = "127.0.0.1".to_string();
    }
    Ok(ctx)
}

/// Per-connection state: the proxy as the generators see it.
#[derive(Debug)]
pub struct ConnectionContext {
    /// The proxy.
    pub proxy: ProxyContext,
    /// The proxy's Sidecar scope in the last snapshot it was checked against (Istio's
    /// `PrevSidecarScope`): a change that leaves the scope still concerns the proxy.
    pub scope: Option<Arc<SidecarScope>>,
}

/// The [`ResourceSource`] of meshpilot's xDS server.
#[derive(Debug, Clone)]
pub struct NetworkingSource {
    server: Arc<std::sync::OnceLock<Arc<DiscoveryServer>>>,
    secrets: Arc<FileSecrets>,
}

impl Default for NetworkingSource {
    fn default() -> Self {
        Self::new()
    }
}

impl NetworkingSource {
    /// A source not yet attached to a server (connections are refused as not ready until
    /// [`NetworkingSource::attach`]), serving no file secrets.
    pub fn new() -> Self {
        Self::with_file_secrets(FileSecrets::disabled())
    }

    /// A source answering SDS requests from `secrets`.
    pub fn with_file_secrets(secrets: Arc<FileSecrets>) -> Self {
        NetworkingSource { server: Arc::new(std::sync::OnceLock::new()), secrets }
    }

    /// The file secrets it serves (run them with [`FileSecrets::run`] for rotation).
    pub fn file_secrets(&self) -> &Arc<FileSecrets> {
        &self.secrets
    }

    /// Attaches the server whose snapshots the source reads (once; later calls are ignored).
    pub fn attach(&self, server: Arc<DiscoveryServer>) {
        let _ = self.server.set(server);
    }

    fn current(&self) -> Result<Arc<PushContext>, SourceError> {
        self.server
            .get()
            .filter(|s| s.is_ready())
            .and_then(|s| s.push_context())
            .ok_or_else(|| SourceError::NotReady("config and services are not synced yet".into()))
    }
}

impl ResourceSource for NetworkingSource {
    type Push = PushRequest;
    type Context = ConnectionContext;

    fn connect(&self, proxy: &Proxy) -> Result<ConnectionContext, SourceError> {
        let push = self.current()?;
        let mut ctx = proxy_context(proxy)?;
        if let Some(server) = self.server.get() {
            let discovery: &dyn model::ServiceDiscovery = server.services().as_ref();
            ctx.set_instances_from(discovery);
        }
        let scope = ctx.is_sidecar().then(|| push.sidecar_scope(&ctx));
        Ok(ConnectionContext { proxy: ctx, scope })
    }

    fn needs_push(&self, ctx: &mut ConnectionContext, _proxy: &Proxy, push: &PushRequest) -> bool {
        // Changed file secrets concern exactly the connections they were pushed to.
        let secrets = !push.secrets_updated.is_empty();
        if !crate::push::proxy_needs_push(push, ctx.proxy.kind) {
            return secrets;
        }
        // Forced, endpoint-only and secret-only pushes leave the scope as it was: no lookup.
        if push.forced || push.configs_updated.is_empty() {
            return true;
        }
        let (Some(snapshot), true) = (&push.push, ctx.proxy.is_sidecar()) else { return true };
        let scope = snapshot.sidecar_scope(&ctx.proxy);
        let previous = ctx.scope.replace(scope.clone());
        crate::push::scope_needs_push(push, &ctx.proxy, previous.as_deref(), &scope) || secrets
    }

    fn generate(
        &self,
        ctx: &mut ConnectionContext,
        request: &GenerateRequest<'_, PushRequest>,
    ) -> Result<Option<Generated>, SourceError> {
        if request.type_url == type_url::SECRET {
            return Ok(self.generate_secrets(request));
        }
        let push = match request.trigger {
            Trigger::Push(p) => {
                if !type_needs_push(p, request.type_url, ctx.proxy.kind) {
                    return Ok(None);
                }
                match &p.push {
                    Some(push) => push.clone(),
                    None => self.current()?,
                }
            }
            _ => self.current()?,
        };
        let mut names: Vec<String> = request.watch.names.iter().cloned().collect();
        if request.watch.wildcard {
            names.clear();
        }
        // Endpoint-only push: only the changed services' assignments (a partial EDS response).
        let mut incremental = false;
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
        let proxy = &ctx.proxy;
        let (resources, findings) = generate_type(&push, proxy, request.type_url, &names)?;
        if !findings.is_empty() {
            debug!(proxy = %proxy.id, type_url = request.type_url, findings = findings.len(), "generation findings");
        }
        Ok(Some(if incremental {
            Generated::incremental(push.version(), resources, Vec::new())
        } else {
            Generated::full(push.version(), resources)
        }))
    }
}

impl NetworkingSource {
    /// SDS: the requested names on a request; on a push, only the subscribed names whose files
    /// changed (all subscribed names when forced). Always an incremental result, so a name that cannot
    /// be served is neither sent nor reported removed: the proxy keeps waiting for it.
    fn generate_secrets(&self, request: &GenerateRequest<'_, PushRequest>) -> Option<Generated> {
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
        let resources = self.secrets.resources(&names);
        if resources.is_empty() && !is_request {
            return None;
        }
        let version = self.current().map(|p| p.version().to_string()).unwrap_or_default();
        Some(Generated::incremental(version, resources, Vec::new()))
    }
}

/// Calls the `networking` generator for `type_url` (CDS, EDS, LDS, RDS); other types get an empty
/// set. `names` empty means everything the proxy gets.
///
/// # Errors
/// Never for known types; kept for generators that can fail.
pub fn generate_type(
    push: &PushContext,
    proxy: &ProxyContext,
    type_url: &str,
    names: &[String],
) -> Result<(Vec<Resource>, Vec<networking::Finding>), SourceError> {
    Ok(match type_url {
        type_url::CLUSTER => {
            let g = networking::cluster::generate_clusters(push, proxy, names);
            (g.resources.iter().map(|c: &Cluster| Resource::new(c.name.clone(), c)).collect(), g.findings)
        }
        type_url::ENDPOINT => {
            let g = networking::endpoint::generate_endpoints(push, proxy, names);
            (
                g.resources
                    .iter()
                    .map(|c: &ClusterLoadAssignment| Resource::new(c.cluster_name.clone(), c))
                    .collect(),
                g.findings,
            )
        }
        type_url::LISTENER => {
            let g = networking::listener::generate_listeners(push, proxy, names);
            (g.resources.iter().map(|l: &Listener| Resource::new(l.name.clone(), l)).collect(), g.findings)
        }
        type_url::ROUTE => {
            let g = networking::rds::generate_routes_encoded(push, proxy, names);
            (
                g.resources
                    .into_iter()
                    .map(|r| {
                        Resource::from_any(
                            r.name,
                            Any { type_url: RouteConfiguration::type_url(), value: r.bytes },
                        )
                    })
                    .collect(),
                g.findings,
            )
        }
        _ => (Vec::new(), Vec::new()),
    })
}
