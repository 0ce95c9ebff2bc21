//! EnvoyFilter patches on the generated resources (crate `envoyfilter`), with the check that keeps a
//! bad patch from reaching Envoy.
//!
//! Where istiod applies patches inside its builders, meshpilot applies them to the finished resources of
//! one proxy, in the same order per resource kind (listeners with their inline inbound routes, clusters,
//! route configurations), then checks each patched resource as Envoy would load it:
//! - every route passes [`crate::check::check_route`] (regexes, header values, weights, …);
//! - an HTTP connection manager ends with its terminal router filter and has it nowhere else (the
//!   classic EnvoyFilter mistake: an HTTP filter ADDed after the router, which Envoy rejects);
//! - a resource keeps a name; added listeners and clusters do not duplicate a name.
//!
//! A resource that fails is sent with the patches of all EnvoyFilters but the one that breaks it (the
//! latest in order whose removal makes it pass), or unpatched if no single one does; each culprit is
//! reported as a `Dropped` finding on the EnvoyFilter (`/debug/configstatusz`). Envoy never sees the
//! bad resource, so it never NACKs the whole type — istiod sends it and the proxy rejects every listener
//! of the push.
//!
//! Cost: EnvoyFilters are read once per config generation (cached); patched resources are cached per
//! generation by (patch set, a keyed 128-bit hash of the unpatched bytes), so proxies with the same patches and the
//! same generated resource share one patched copy. Proxies no EnvoyFilter selects pay one lookup.

use std::{collections::HashMap, sync::Arc};

use api::networking::envoy_filter::ApplyTo;
use envoy_types::pb::envoy::{
    config::{
        cluster::v3::Cluster,
        listener::v3::{Listener, filter},
        route::v3::RouteConfiguration,
    },
    extensions::filters::network::http_connection_manager::v3::{
        HttpConnectionManager, http_connection_manager::RouteSpecifier,
    },
};
use envoyfilter::{CompiledEnvoyFilter, Findings, PatchContext, ProxyPatches, cluster, listener, route};
use model::{ConfigKey, Finding, Severity, push::ProxyContext};
use prost::Message;

use crate::{
    Built,
    cache::{Encoded, EncodedResource, Snapshot},
    check::check_route,
};

/// Name of Envoy's terminal HTTP router filter.
const ROUTER: &str = "envoy.filters.http.router";

/// The EnvoyFilters of a generation, read once: by key.
pub(crate) type CompiledIndex = HashMap<ConfigKey, Arc<CompiledEnvoyFilter>>;

/// The patches that apply to `proxy` and the read-time findings of their EnvoyFilters; `None` when no
/// EnvoyFilter selects it (or it is a proxyless gRPC client, which istiod does not patch either) or
/// the ones that do have neither patches nor findings.
fn proxy_patches(push: &Snapshot, proxy: &ProxyContext) -> Option<(ProxyPatches, Vec<Finding>)> {
    if !push.has_envoy_filters() || proxy.proxyless_grpc {
        return None;
    }
    let filters = push.envoy_filters(proxy);
    if filters.is_empty() {
        return None;
    }
    let index = push.compiled_envoy_filters(|configs| {
        configs.iter().map(|c| (c.key(), Arc::new(envoyfilter::compile(c)))).collect()
    });
    let compiled: Vec<&CompiledEnvoyFilter> =
        filters.iter().filter_map(|c| index.get(&c.key()).map(Arc::as_ref)).collect();
    let findings: Vec<Finding> = compiled.iter().flat_map(|c| c.findings.iter().cloned()).collect();
    let patches = ProxyPatches::new(compiled, proxy);
    (!patches.is_empty() || !findings.is_empty()).then_some((patches, findings))
}

/// A resource form the generators return: a typed message or its encoding.
pub(crate) trait Form<M>: Sized {
    fn name(&self) -> &str;
    /// The encoded bytes, when the form has them (then the patched-resource cache is used).
    fn bytes(&self) -> Option<&[u8]>;
    /// The typed message (typed forms only).
    fn typed(&self) -> Option<M>;
    fn from_typed(message: &M) -> Self;
    fn from_encoded(name: String, encoded: Arc<Encoded>) -> Self;
}

macro_rules! forms {
    ($($m:ty),*) => {$(
        impl Form<$m> for $m {
            fn name(&self) -> &str {
                &self.name
            }
            fn bytes(&self) -> Option<&[u8]> {
                None
            }
            fn typed(&self) -> Option<$m> {
                Some(self.clone())
            }
            fn from_typed(message: &$m) -> Self {
                message.clone()
            }
            fn from_encoded(_: String, encoded: Arc<Encoded>) -> Self {
                <$m>::decode(encoded.bytes()).unwrap_or_default()
            }
        }

        impl Form<$m> for EncodedResource {
            fn name(&self) -> &str {
                &self.name
            }
            fn bytes(&self) -> Option<&[u8]> {
                Some(EncodedResource::bytes(self))
            }
            fn typed(&self) -> Option<$m> {
                <$m>::decode(EncodedResource::bytes(self)).ok()
            }
            fn from_typed(message: &$m) -> Self {
                EncodedResource { name: message.name.clone(), encoded: Arc::new(Encoded::new(message.encode_to_vec())) }
            }
            fn from_encoded(name: String, encoded: Arc<Encoded>) -> Self {
                EncodedResource { name, encoded }
            }
        }
    )*};
}
forms!(Listener, Cluster, RouteConfiguration);

/// What a patched resource depends on beyond the patches and its own encoding: the proxy's facts the
/// patches of its kind read (part of the patched-resource cache key).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct PatchInputs {
    /// For an `inbound|PORT|…` cluster: the services the proxy serves on that (target) port.
    hosts: Vec<String>,
    /// For a gateway's route configuration: the port numbers of the Gateway servers that use it
    /// ([`crate::gateway::route_server_ports`]).
    server_ports: Vec<u32>,
}

/// What a resource kind needs: its per-resource patch and its check.
trait Kind: Message + Default + Clone {
    const TAG: u8;
    fn name(&self) -> &str;
    /// The proxy's facts the patches of the resource named `name` read.
    fn inputs(_push: &Snapshot, _proxy: &ProxyContext, _name: &str) -> PatchInputs {
        PatchInputs::default()
    }
    /// Patches one resource; `false` when a patch removes it.
    fn patch(
        &mut self,
        patches: &ProxyPatches,
        proxy: &ProxyContext,
        inputs: &PatchInputs,
        findings: &mut Findings,
    ) -> bool;
    /// Why Envoy would reject it (empty: it would accept it).
    fn violations(&self) -> Vec<String>;
}

impl Kind for Listener {
    fn name(&self) -> &str {
        &self.name
    }
    const TAG: u8 = 0;
    fn patch(
        &mut self,
        patches: &ProxyPatches,
        proxy: &ProxyContext,
        _: &PatchInputs,
        findings: &mut Findings,
    ) -> bool {
        listener::patch_one(patches, self, is_gateway(proxy), findings)
    }
    fn violations(&self) -> Vec<String> {
        listener_violations(self)
    }
}

impl Kind for Cluster {
    fn name(&self) -> &str {
        &self.name
    }
    const TAG: u8 = 1;
    fn inputs(_: &Snapshot, proxy: &ProxyContext, name: &str) -> PatchInputs {
        PatchInputs { hosts: inbound_hosts(proxy, name), server_ports: Vec::new() }
    }
    fn patch(
        &mut self,
        patches: &ProxyPatches,
        proxy: &ProxyContext,
        inputs: &PatchInputs,
        findings: &mut Findings,
    ) -> bool {
        let ctx = cluster::context_of(&self.name, is_gateway(proxy));
        cluster::patch_cluster(ctx, patches, self, &inputs.hosts, findings)
    }
    fn violations(&self) -> Vec<String> {
        if self.name.is_empty() { vec!["a cluster without a name".into()] } else { Vec::new() }
    }
}

impl Kind for RouteConfiguration {
    fn name(&self) -> &str {
        &self.name
    }
    const TAG: u8 = 2;
    fn inputs(push: &Snapshot, proxy: &ProxyContext, name: &str) -> PatchInputs {
        let server_ports = if is_gateway(proxy) {
            crate::gateway::route_server_ports(push, proxy, name)
        } else {
            Vec::new()
        };
        PatchInputs { hosts: Vec::new(), server_ports }
    }
    fn patch(
        &mut self,
        patches: &ProxyPatches,
        proxy: &ProxyContext,
        inputs: &PatchInputs,
        findings: &mut Findings,
    ) -> bool {
        let context = if is_gateway(proxy) { PatchContext::Gateway } else { PatchContext::SidecarOutbound };
        let scope = route::RouteScope { context, server_ports: &inputs.server_ports };
        route::patch_route_configuration(scope, patches, self, findings);
        true
    }
    fn violations(&self) -> Vec<String> {
        route_violations(self)
    }
}

fn is_gateway(proxy: &ProxyContext) -> bool {
    proxy.kind == model::push::ProxyKind::Router
}

/// For an `inbound|PORT|…` cluster: the services the proxy serves on that (target) port.
fn inbound_hosts(proxy: &ProxyContext, cluster_name: &str) -> Vec<String> {
    let Some(port) = cluster_name.strip_prefix("inbound|").and_then(|r| r.split('|').next()) else {
        return Vec::new();
    };
    let port: u32 = port.parse().unwrap_or(0);
    proxy
        .service_instances
        .iter()
        .filter(|i| i.endpoint.endpoint_port == port)
        .map(|i| i.service.hostname.clone())
        .collect()
}

fn route_violations(rc: &RouteConfiguration) -> Vec<String> {
    let mut out = Vec::new();
    for vh in &rc.virtual_hosts {
        for (i, r) in vh.routes.iter().enumerate() {
            for v in check_route(r) {
                out.push(format!("virtual host {} route {i}: {}: {}", vh.name, v.field, v.reason));
            }
        }
    }
    out
}

fn listener_violations(l: &Listener) -> Vec<String> {
    let mut out = Vec::new();
    if l.name.is_empty() {
        out.push("a listener without a name".into());
    }
    for fc in l.filter_chains.iter().chain(l.default_filter_chain.as_ref()) {
        for f in &fc.filters {
            let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else { continue };
            if f.name != listener::HTTP_CONNECTION_MANAGER {
                continue;
            }
            let Ok(hcm) = HttpConnectionManager::decode(any.value.as_slice()) else {
                out.push(format!("filter chain {:?}: the HTTP connection manager does not decode", fc.name));
                continue;
            };
            let last = hcm.http_filters.len().saturating_sub(1);
            for (i, h) in hcm.http_filters.iter().enumerate() {
                if h.name == ROUTER && i != last {
                    out.push(format!(
                        "filter chain {:?}: the terminal filter {ROUTER} is not the last HTTP filter (position {i} \
                         of {}): Envoy rejects the listener",
                        fc.name,
                        last + 1
                    ));
                }
            }
            if let Some(h) = hcm.http_filters.last()
                && h.name != ROUTER
                && hcm.http_filters.iter().any(|h| h.name == ROUTER)
            {
                out.push(format!(
                    "filter chain {:?}: HTTP filter {} comes after the router",
                    fc.name, h.name
                ));
            }
            if let Some(RouteSpecifier::RouteConfig(rc)) = &hcm.route_specifier {
                out.extend(route_violations(rc));
            }
        }
    }
    out
}

/// Patches one resource with `patches`, falling back as the module documentation says. `None`: a
/// patch removed it.
fn patch_checked<M: Kind>(
    original: &M,
    patches: &ProxyPatches,
    proxy: &ProxyContext,
    inputs: &PatchInputs,
    findings: &mut Findings,
) -> Option<M> {
    let mut patched = original.clone();
    let mut found = Vec::new();
    if !patched.patch(patches, proxy, inputs, &mut found) {
        findings.extend(found);
        return None;
    }
    let violations = patched.violations();
    if violations.is_empty() {
        findings.extend(found);
        return Some(patched);
    }
    let name = original.name().to_string();
    let culprits = patches.filters();
    for culprit in culprits.iter().rev() {
        let fewer = patches.without(culprit);
        let mut retry = original.clone();
        let mut retry_found = Vec::new();
        let kept = retry.patch(&fewer, proxy, inputs, &mut retry_found);
        if !kept || retry.violations().is_empty() {
            findings.push(rejected(culprit, &name, &violations, "sent without this EnvoyFilter's patches"));
            findings.extend(retry_found);
            return kept.then_some(retry);
        }
    }
    for culprit in &culprits {
        findings.push(rejected(culprit, &name, &violations, "sent without any EnvoyFilter patch"));
    }
    Some(original.clone())
}

fn rejected(filter: &ConfigKey, resource: &str, violations: &[String], outcome: &str) -> Finding {
    Finding {
        severity: Severity::Dropped,
        config: Some(filter.clone()),
        path: "spec.configPatches".into(),
        resource: resource.to_string(),
        message: format!(
            "the patched resource would be rejected by Envoy ({}); {outcome}",
            violations.join("; ")
        ),
    }
}

/// One resource through the per-generation cache of patched resources (encoded forms; typed forms
/// are patched directly). `None`: a patch removed it.
fn patch_one<M: Kind, F: Form<M>>(
    push: &Snapshot,
    proxy: &ProxyContext,
    patches: &ProxyPatches,
    resource: F,
    findings: &mut Findings,
) -> Option<F> {
    let inputs = M::inputs(push, proxy, resource.name());
    let Some(bytes) = resource.bytes() else {
        let Some(original) = resource.typed() else { return Some(resource) };
        return patch_checked(&original, patches, proxy, &inputs, findings).map(|m| F::from_typed(&m));
    };
    let key =
        crate::cache::PatchedKey::new(M::TAG, is_gateway(proxy), patches.identity(), inputs.clone(), bytes);
    let shared = push.patched_resource(key, || {
        let mut found = Vec::new();
        let out = match M::decode(bytes) {
            Ok(original) => patch_checked(&original, patches, proxy, &inputs, &mut found)
                .map(|m| (m.name().to_string(), Arc::new(Encoded::new(m.encode_to_vec())))),
            // Not decodable (never expected): sent as generated.
            Err(_) => Some((resource.name().to_string(), Arc::new(Encoded::new(bytes.to_vec())))),
        };
        (out, found)
    });
    findings.extend(shared.1.iter().cloned());
    let (name, encoded) = shared.0.clone()?;
    Some(F::from_encoded(name, encoded))
}

/// Patch kinds that change listeners (with the route kinds: inline inbound route configurations).
const LISTENER_KINDS: &[ApplyTo] = &[
    ApplyTo::Listener,
    ApplyTo::ListenerFilter,
    ApplyTo::FilterChain,
    ApplyTo::NetworkFilter,
    ApplyTo::HttpFilter,
    ApplyTo::RouteConfiguration,
    ApplyTo::VirtualHost,
    ApplyTo::HttpRoute,
];
/// Patch kinds that change route configurations.
const ROUTE_KINDS: &[ApplyTo] = &[ApplyTo::RouteConfiguration, ApplyTo::VirtualHost, ApplyTo::HttpRoute];

/// Applies the EnvoyFilters of `proxy` to `built` when it has patches of one of `kinds`: each resource
/// patched and checked ([`patch_one`]), then the resources `added` gives appended (a name already taken
/// or a resource Envoy would reject is reported and left out), then sorted by name when `sort`.
fn patch_all<M: Kind, F: Form<M>>(
    push: &Snapshot,
    proxy: &ProxyContext,
    built: Built<F>,
    kinds: &[ApplyTo],
    added: impl Fn(&ProxyPatches) -> Vec<(ConfigKey, M)>,
    sort: bool,
) -> Built<F> {
    let Some((patches, mut findings)) = proxy_patches(push, proxy) else { return built };
    findings.extend(built.findings);
    if !patches.has_any(kinds) {
        return Built::new(built.resources, findings);
    }
    let mut out: Vec<F> = built
        .resources
        .into_iter()
        .filter_map(|r| patch_one(push, proxy, &patches, r, &mut findings))
        .collect();
    for (filter, resource) in added(&patches) {
        add_unique(&mut out, &filter, resource, &mut findings);
    }
    if sort {
        out.sort_by(|a, b| a.name().cmp(b.name()));
    }
    Built::new(out, findings)
}

/// Applies the EnvoyFilters of `proxy` to its listeners (LISTENER ADDs appended, sorted by name again).
pub(crate) fn patch_listeners<F: Form<Listener>>(
    push: &Snapshot,
    proxy: &ProxyContext,
    built: Built<F>,
) -> Built<F> {
    let gateway = is_gateway(proxy);
    patch_all(push, proxy, built, LISTENER_KINDS, |p| listener::added(p, gateway), true)
}

/// Applies the EnvoyFilters of `proxy` to its clusters (CLUSTER patches, then CLUSTER ADDs).
pub(crate) fn patch_clusters<F: Form<Cluster>>(
    push: &Snapshot,
    proxy: &ProxyContext,
    built: Built<F>,
) -> Built<F> {
    let contexts: &[PatchContext] = if is_gateway(proxy) {
        &[PatchContext::Gateway]
    } else {
        &[PatchContext::SidecarOutbound, PatchContext::SidecarInbound]
    };
    let added =
        |p: &ProxyPatches| contexts.iter().flat_map(|ctx| cluster::inserted_clusters(*ctx, p)).collect();
    patch_all(push, proxy, built, &[ApplyTo::Cluster], added, true)
}

/// Applies the EnvoyFilters of `proxy` to its route configurations (in the order asked).
pub(crate) fn patch_routes<F: Form<RouteConfiguration>>(
    push: &Snapshot,
    proxy: &ProxyContext,
    built: Built<F>,
) -> Built<F> {
    patch_all(push, proxy, built, ROUTE_KINDS, |_| Vec::new(), false)
}

/// The extension configs EnvoyFilter EXTENSION_CONFIG ADD patches give `proxy` under `names` (all
/// when empty), with the findings of its EnvoyFilters.
pub(crate) fn inserted_extension_configs(
    push: &Snapshot,
    proxy: &ProxyContext,
    names: &[String],
) -> (Vec<envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig>, Vec<Finding>) {
    match proxy_patches(push, proxy) {
        Some((patches, findings)) => {
            (envoyfilter::extension::inserted_extension_configs(&patches, names), findings)
        }
        None => (Vec::new(), Vec::new()),
    }
}

fn add_unique<M: Kind, F: Form<M>>(out: &mut Vec<F>, filter: &ConfigKey, added: M, findings: &mut Findings) {
    let violations = added.violations();
    let duplicate = out.iter().any(|f| f.name() == added.name());
    if duplicate || !violations.is_empty() {
        let reason = if duplicate {
            "the name is already taken by another resource".to_string()
        } else {
            format!("Envoy would reject it ({})", violations.join("; "))
        };
        findings.push(Finding {
            severity: Severity::Dropped,
            config: Some(filter.clone()),
            path: "spec.configPatches".into(),
            resource: added.name().to_string(),
            message: format!("the resource this EnvoyFilter ADDs is left out: {reason}"),
        });
        return;
    }
    out.push(F::from_typed(&added));
}
