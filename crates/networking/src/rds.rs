//! RDS: route configurations (Istio's `pilot/pkg/networking/core/httproute.go`, gateway routes in
//! `gateway.go`, proxyless routes in `grpcgen/rds.go`).
//!
//! | name | proxy | content |
//! |---|---|---|
//! | `PORT` (`9080`) | sidecar | one virtual host per visible service with that port (`HOST:PORT`, domains: FQDN, absolute FQDN, short forms from the proxy's DNS domain, VIPs), routes from the `mesh`-bound VirtualService for the host, else the `default` route to `outbound\|PORT\|\|HOST`; then the catch-all `allow_any` (→ `PassthroughCluster`) or `block_all` (502) |
//! | `http.PORT` | router | one virtual host per host served by the plain-HTTP servers on the port and named by a VirtualService bound to their gateway; `require_tls: ALL` for `httpsRedirect` servers |
//! | `https.PORT.PORTNAME.GATEWAY.NAMESPACE` | router | the same for one terminated HTTPS server |
//! | `outbound\|PORT\|\|HOST` | proxyless gRPC | the virtual host of that service (domains with `:PORT`) |
//!
//! HTTP routes of VirtualServices come from [`route::translate_http_routes`]. A VirtualService whose
//! routes all fall away (matches for other gateways or sources) leaves its hosts without a virtual host,
//! as in Istio; domains already used by an earlier virtual host are removed from later ones (Envoy
//! rejects duplicates), and a virtual host left without domains is dropped and reported.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    sync::Arc,
};

use api::networking::virtual_service::Destination;
use envoy_types::pb::envoy::config::route::v3::{
    Decorator, DirectResponseAction, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost,
    route::Action,
    route_action::{ClusterSpecifier, MaxStreamDuration},
    route_match::PathSpecifier,
    virtual_host::TlsRequirementType,
};
use model::{ConfigKey, service::Service};
use prost::Message;

use crate::{
    Snapshot,
    built::Built,
    cache::{Encoded, SidecarRouteKey},
    convert::{boolv, zero_duration},
    gateway::{GatewayServer, PortKind, ServerKind},
    naming::{
        ALLOW_ANY_VHOST, BLOCK_ALL_VHOST, DEFAULT_ROUTE_NAME, MESH_GATEWAY, TrafficDirection,
        outbound_cluster_name, parse_cluster_name,
    },
    route::{DestinationCluster, RouteContext, destination_port, translate_http_routes},
};
use model::{
    Finding, Severity, host,
    push::{Imports, IndexedVirtualService, OutboundTrafficPolicy, ProxyContext, ProxyKind, SidecarScope},
};

fn prefix_match() -> RouteMatch {
    RouteMatch { path_specifier: Some(PathSpecifier::Prefix("/".to_string())), ..Default::default() }
}

fn no_timeout_action(cluster: &str) -> RouteAction {
    // Istio's `setTimeout` without a VirtualService timeout: no timeout, and the gRPC timeout header
    // honoured without a cap through the deprecated `max_grpc_timeout` (Istio: "the replacement
    // MaxStreamDuration has some regressions").
    #[allow(deprecated)]
    RouteAction {
        cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.to_string())),
        timeout: Some(zero_duration()),
        max_grpc_timeout: Some(zero_duration()),
        ..Default::default()
    }
}

/// The route a host gets without VirtualService (Istio's `BuildDefaultHTTPOutboundRoute`): prefix
/// `/`, no timeout, the default retry policy (without the previous-hosts predicate when the
/// destination hashes consistently; proxyless gRPC clients get it too, as from istiod, and retry
/// `unavailable` and `cancelled` calls), decorator `HOST:PORT/*`.
pub fn default_route(cluster: &str, host: &str, port: u32, proxyless: bool, consistent_hash: bool) -> Route {
    let mut action = no_timeout_action(cluster);
    if proxyless {
        // gRPC's xDS client reads only `max_stream_duration`.
        #[allow(deprecated)]
        {
            action.max_grpc_timeout = None;
        }
        action.max_stream_duration =
            Some(MaxStreamDuration { max_stream_duration: Some(zero_duration()), ..Default::default() });
    }
    action.retry_policy = Some(crate::route::default_retry_policy(consistent_hash));
    Route {
        name: DEFAULT_ROUTE_NAME.to_string(),
        r#match: Some(prefix_match()),
        decorator: Some(Decorator {
            operation: format!("{}/*", host::domain_name(host, port)),
            ..Default::default()
        }),
        action: Some(Action::Route(action)),
        ..Default::default()
    }
}

/// The last virtual host of a sidecar's route configuration: `allow_any` to `allow_any_cluster`
/// (`PassthroughCluster`, or the Sidecar's egress proxy: [`crate::naming::allow_any_cluster`]), or
/// `block_all` answering 502.
pub fn catch_all_virtual_host(policy: OutboundTrafficPolicy, allow_any_cluster: &str) -> VirtualHost {
    let (name, action) = match policy {
        OutboundTrafficPolicy::AllowAny => {
            (ALLOW_ANY_VHOST, Action::Route(no_timeout_action(allow_any_cluster)))
        }
        OutboundTrafficPolicy::RegistryOnly => (
            BLOCK_ALL_VHOST,
            Action::DirectResponse(DirectResponseAction { status: 502, ..Default::default() }),
        ),
    };
    VirtualHost {
        name: name.to_string(),
        domains: vec!["*".to_string()],
        routes: vec![Route {
            name: name.to_string(),
            r#match: Some(prefix_match()),
            action: Some(action),
            ..Default::default()
        }],
        include_request_attempt_count: true,
        ..Default::default()
    }
}

/// Istio's `appendDomainPort`: `domain`, and `domain:port` unless `port` is 0.
fn append_domain_port(out: &mut Vec<String>, domain: &str, port: u32) {
    out.push(host::ipv6_compliant(domain));
    if port != 0 {
        out.push(host::domain_name(domain, port));
    }
}

/// Istio's `GenerateAltVirtualHosts`: the other names a service is reachable by from a proxy in
/// `proxy_domain` (`reviews`, `reviews.bookinfo`, `reviews.bookinfo.svc` for
/// `reviews.bookinfo.svc.cluster.local` seen from `bookinfo.svc.cluster.local`), plus the absolute
/// FQDN (`reviews.bookinfo.svc.cluster.local.`); with `:port` variants unless `port` is 0.
pub fn alt_virtual_hosts(hostname: &str, port: u32, proxy_domain: &str) -> Vec<String> {
    let mut out = Vec::new();
    if !crate::convert::is_ip(hostname) {
        out.push(format!("{hostname}."));
        if port != 0 {
            out.push(host::domain_name(&format!("{hostname}."), port));
        }
    }
    if let Some(svc_at) = proxy_domain.find(".svc.") {
        let shared_suffix = &proxy_domain[svc_at..];
        if !hostname.ends_with(shared_suffix) {
            return out;
        }
        let proxy_ns = &proxy_domain[..svc_at];
        let Some(ih) = hostname.find(".svc.") else { return out };
        let Some(dot) = hostname.find('.') else { return out };
        if dot + 1 > ih {
            return out;
        }
        let name = &hostname[..dot];
        let name_ns = &hostname[..ih];
        let name_ns_svc = format!("{name_ns}.svc");
        if &hostname[dot + 1..ih] == proxy_ns {
            append_domain_port(&mut out, name, port);
            append_domain_port(&mut out, &name_ns_svc, port);
            append_domain_port(&mut out, name_ns, port);
        } else {
            append_domain_port(&mut out, name_ns, port);
            append_domain_port(&mut out, &name_ns_svc, port);
        }
        return out;
    }
    // Shared DNS suffix between the host and the proxy domain.
    let host_parts: Vec<&str> = hostname.split('.').collect();
    let domain_parts: Vec<&str> = proxy_domain.split('.').collect();
    let shared = host_parts.iter().rev().zip(domain_parts.iter().rev()).take_while(|(a, b)| a == b).count();
    if shared == 0 || proxy_domain.is_empty() {
        return out;
    }
    let unique = &host_parts[..host_parts.len() - shared];
    if unique.is_empty() {
        return out;
    }
    let unique_host = unique.join(".");
    append_domain_port(&mut out, &unique_host, port);
    if unique.len() == 2 {
        let shared_first = host_parts[host_parts.len() - shared];
        append_domain_port(&mut out, &format!("{unique_host}.{shared_first}"), port);
    }
    out
}

/// Domains of a service's virtual host (Istio's `generateVirtualHostDomains`) and the alternative
/// forms among them: its hostname and then each of its aliases' (Kubernetes `ExternalName` Services
/// resolving to it), each with its alternative forms, then its VIPs. `port` 0: no `:port` variants
/// (Envoy proxies ignore the port in host matching).
fn service_domains(service: &Service, port: u32, proxy_domain: &str) -> (Vec<String>, Vec<String>) {
    let mut domains = Vec::new();
    let mut alt = Vec::new();
    let names = std::iter::once(&service.hostname).chain(service.aliases.iter().map(|a| &a.hostname));
    for name in names {
        let forms = alt_virtual_hosts(name, port, proxy_domain);
        append_domain_port(&mut domains, name, port);
        domains.extend(forms.iter().cloned());
        alt.extend(forms);
    }
    for addr in &service.addresses {
        if let Some(ip) = crate::convert::single_ip(addr).filter(|ip| *ip != model::service::UNSPECIFIED_IP) {
            append_domain_port(&mut domains, ip, port);
        }
    }
    (domains, alt)
}

/// Keeps domains not used yet (Istio's `dedupeDomains`): also drops an alternative form that is the
/// real hostname of another service.
fn dedupe_domains(
    domains: Vec<String>,
    used: &mut HashSet<String>,
    alt: &[String],
    known: &HashSet<String>,
) -> Vec<String> {
    let mut out = Vec::with_capacity(domains.len());
    for d in domains {
        let lower = d.to_ascii_lowercase();
        if used.contains(&lower) || (alt.contains(&d) && known.contains(&d)) {
            continue;
        }
        used.insert(lower);
        out.push(d);
    }
    out
}

/// Translates the routes of VirtualServices once per route table.
struct RouteTranslator<'a> {
    push: &'a Snapshot,
    proxy: &'a ProxyContext,
    /// The services route destinations resolve against (Istio's route registry: the egress
    /// listener's services for a sidecar table, everything the scope imports for a gateway).
    scope: &'a Imports,
    cache: HashMap<(ConfigKey, String), Arc<[Route]>>,
    findings: Vec<Finding>,
}

impl<'a> RouteTranslator<'a> {
    fn new(push: &'a Snapshot, proxy: &'a ProxyContext, scope: &'a Imports) -> Self {
        RouteTranslator { push, proxy, scope, cache: HashMap::new(), findings: Vec::new() }
    }

    /// The routes of `vs` for a table on `port` serving `gateway` (shared: translated once per table).
    fn routes(&mut self, vs: &IndexedVirtualService, port: u32, gateway: &str) -> Arc<[Route]> {
        let key = (vs.key.clone(), gateway.to_string());
        if let Some(r) = self.cache.get(&key) {
            return r.clone();
        }
        let routes: Arc<[Route]> = self.translate(vs, port, gateway).into();
        self.cache.insert(key, routes.clone());
        routes
    }

    /// The routes of `vs` for a table on `port` serving `gateway`, translated now (not cached).
    fn translate(&mut self, vs: &IndexedVirtualService, port: u32, gateway: &str) -> Vec<Route> {
        let scope = self.scope;
        let suffix = self.push.mesh().domain_suffix.clone();
        let ns = vs.namespace().to_string();
        let semantics = route_semantics(vs);
        // Istio's route registry: a sidecar's table on a port knows only the services with that port
        // (`BuildSidecarOutboundVirtualHosts`), a gateway's every service it sees.
        let sidecar_port = (gateway == MESH_GATEWAY && port != 0).then_some(port);
        let cluster_for = |d: &Destination| -> DestinationCluster {
            let hostname = host::resolve_short_name(&d.host.to_ascii_lowercase(), &ns, &suffix);
            let service = scope
                .service(&hostname)
                .filter(|s| sidecar_port.is_none_or(|p| s.port_by_number(p).is_some()));
            let only_port = service.and_then(|s| match s.ports.as_slice() {
                [only] => Some(only.port),
                _ => None,
            });
            let dest_port = d.port.as_ref().map_or(0, |p| p.number);
            let Some(port) = destination_port(dest_port, only_port, port) else {
                return DestinationCluster::Unnamed;
            };
            match service {
                Some(s) => {
                    DestinationCluster::Service(outbound_cluster_name(port, &d.subset, s.destination_host()))
                }
                None => DestinationCluster::Unknown(outbound_cluster_name(port, &d.subset, &hostname)),
            }
        };
        let (push, proxy) = (self.push, self.proxy);
        // Istio's `hashForVirtualService`: the rule of the destination's host as the proxy sees it.
        let hash_for = |d: &Destination| {
            let hostname = host::resolve_short_name(&d.host.to_ascii_lowercase(), &ns, &suffix);
            let dr = push.destination_rule(proxy, scope.service(&hostname)?)?;
            crate::route::destination_hash(&dr.rule, d).cloned()
        };
        let gateways = [gateway.to_string()];
        let ctx = RouteContext {
            listener_port: port,
            gateways: &gateways,
            proxy_labels: &self.proxy.labels,
            proxy_namespace: &self.proxy.namespace,
            cluster_for: &cluster_for,
            hash_for: Some(&hash_for),
        };
        let mut routes = translate_http_routes(vs.spec(), &vs.key, &ctx, &mut self.findings);
        if let Some(semantics) = semantics {
            apply_route_semantics(&mut routes, semantics);
        }
        routes
    }
}

/// Route semantics of a generated VirtualService (annotation `internal.istio.io/route-semantics`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RouteSemantics {
    /// `gateway`: generated from the Gateway API (Istio's `UseGatewaySemantics`).
    Gateway,
    /// `ingress`: generated from a Kubernetes Ingress (Istio's `UseIngressSemantics`).
    Ingress,
}

fn route_semantics(vs: &IndexedVirtualService) -> Option<RouteSemantics> {
    match vs.config.meta.annotations.get("internal.istio.io/route-semantics").map(String::as_str) {
        Some("gateway") => Some(RouteSemantics::Gateway),
        Some("ingress") => Some(RouteSemantics::Ingress),
        _ => None,
    }
}

/// Istio's route semantics of generated VirtualServices (`pilot/pkg/networking/core/route/route.go`):
/// for both Gateway API and Ingress routes a path prefix matches whole segments
/// (`path_separated_prefix`, one trailing `/` removed; `/` stays a plain prefix: `/a` matches `/a`
/// and `/a/b`, not `/ab`); for Gateway API routes only, a backend whose cluster does not exist
/// answers 500 (`cluster_not_found_response_code`).
fn apply_route_semantics(routes: &mut [Route], semantics: RouteSemantics) {
    use envoy_types::pb::envoy::config::route::v3::route_action::ClusterNotFoundResponseCode;
    for r in routes {
        if semantics == RouteSemantics::Gateway
            && let Some(Action::Route(action)) = &mut r.action
        {
            action.cluster_not_found_response_code = ClusterNotFoundResponseCode::InternalServerError as i32;
        }
        if let Some(m) = &mut r.r#match
            && let Some(PathSpecifier::Prefix(p)) = &m.path_specifier
            && p != "/"
        {
            let trimmed = p.strip_suffix('/').unwrap_or(p).to_string();
            m.path_specifier = Some(PathSpecifier::PathSeparatedPrefix(trimmed));
        }
    }
}

fn route_configuration(name: &str, virtual_hosts: Vec<VirtualHost>, ignore_port: bool) -> RouteConfiguration {
    RouteConfiguration {
        name: name.to_string(),
        virtual_hosts,
        validate_clusters: Some(boolv(false)),
        ignore_port_in_host_matching: ignore_port,
        max_direct_response_body_size_bytes: Some(envoy_types::pb::google::protobuf::UInt32Value {
            value: crate::check::MAX_DIRECT_RESPONSE_BODY_BYTES as u32,
        }),
        ..Default::default()
    }
}

/// A virtual host candidate before domain deduplication.
struct VhostDraft {
    name: String,
    domains: Vec<String>,
    alt: Vec<String>,
    routes: Vec<Route>,
}

/// Virtual hosts for the services `imports` holds on `port` (all ports when `only` names one host, for
/// proxyless), with the catch-all of `scope`'s outbound traffic policy.
fn sidecar_virtual_hosts(
    proxy: &ProxyContext,
    (scope, imports): (&SidecarScope, &Imports),
    port: u32,
    only: Option<&str>,
    translator: &mut RouteTranslator<'_>,
) -> Vec<VirtualHost> {
    let proxyless = proxy.proxyless_grpc;
    let domain_port = if proxyless { port } else { 0 };
    let services: Vec<&Service> = imports
        .services()
        .iter()
        .map(|s| s.as_ref())
        .filter(|s| s.port_by_number(port).is_some())
        .filter(|s| only.is_none_or(|h| s.hostname.eq_ignore_ascii_case(h)))
        .collect();
    let mut drafts: Vec<VhostDraft> = Vec::new();
    let mut known: HashSet<String> = HashSet::new();
    for s in &services {
        known.insert(s.hostname.clone());
        known.insert(host::domain_name(&s.hostname, port));
    }
    for s in &services {
        let routes = match imports.virtual_service_for(&s.hostname.to_ascii_lowercase()) {
            Some(vs) => translator.routes(vs, port, MESH_GATEWAY).to_vec(),
            // An alias has no virtual host of its own (Istio's `BuildSidecarVirtualHostWrapper`): its
            // names are domains of the concrete service's virtual host.
            None if s.is_alias() => continue,
            // Default routes only for HTTP (or sniffed) ports, as Istio.
            None if s.port_by_number(port).is_some_and(|p| p.protocol.is_http_or_sniffed()) => {
                let rule = translator.push.destination_rule(proxy, s);
                let hashed =
                    rule.as_ref().is_some_and(|dr| crate::cluster::uses_consistent_hash(&dr.rule, port));
                let mut route = default_route(
                    &outbound_cluster_name(port, "", &s.hostname),
                    &s.hostname,
                    port,
                    proxyless,
                    hashed,
                );
                // Istio's `buildSidecarVirtualHostForService`: the port's hash key on the default route.
                if let (Some(dr), Some(Action::Route(action))) = (&rule, route.action.as_mut()) {
                    action.hash_policy.extend(
                        crate::route::service_hash(&dr.rule, port).and_then(crate::route::hash_policy),
                    );
                }
                vec![route]
            }
            None => continue,
        };
        if routes.is_empty() {
            continue;
        }
        let (domains, alt) = service_domains(s, domain_port, &proxy.dns_domain);
        drafts.push(VhostDraft { name: host::domain_name(&s.hostname, port), domains, alt, routes });
    }
    // VirtualService hosts that are not services: only on port 80, as Istio.
    if port == 80 && only.is_none() {
        for vs in imports.virtual_services() {
            let extra: Vec<&String> = vs
                .hosts
                .iter()
                .filter(|h| !services.iter().any(|s| host::matches(&s.hostname.to_ascii_lowercase(), h)))
                .collect();
            if extra.is_empty() {
                continue;
            }
            let routes = translator.routes(vs, port, MESH_GATEWAY);
            if routes.is_empty() {
                continue;
            }
            for h in extra {
                let mut domains = Vec::new();
                append_domain_port(&mut domains, h, domain_port);
                drafts.push(VhostDraft {
                    name: host::domain_name(h, port),
                    domains,
                    alt: Vec::new(),
                    routes: routes.to_vec(),
                });
            }
        }
    }
    drafts.sort_by(|a, b| a.name.cmp(&b.name));
    let mut used = HashSet::new();
    let mut names = BTreeSet::new();
    let mut out = Vec::new();
    for d in drafts {
        if !names.insert(d.name.clone()) {
            continue;
        }
        let domains = dedupe_domains(d.domains, &mut used, &d.alt, &known);
        if domains.is_empty() {
            translator.findings.push(Finding {
                severity: Severity::Dropped,
                config: None,
                path: String::new(),
                resource: d.name.clone(),
                message:
                    "every domain of this virtual host is already used by another; virtual host left out"
                        .into(),
            });
            continue;
        }
        out.push(VirtualHost {
            name: d.name,
            domains,
            routes: d.routes,
            // Istio's proxy headers default: `x-envoy-attempt-count` sent upstream.
            include_request_attempt_count: true,
            ..Default::default()
        });
    }
    if only.is_none() && !proxyless {
        let allow_any = crate::naming::allow_any_cluster(scope.egress_proxy.as_ref());
        let catch_all = catch_all_virtual_host(scope.outbound_traffic_policy, &allow_any);
        if !used.contains("*") {
            out.push(catch_all);
        }
    }
    out
}

/// A sidecar route configuration name read as Istio's `extractListenerPort` reads it: `PORT` → `(PORT,
/// None)`; `HOST:PORT` (a sniffed listener of its own) → `(PORT, Some(HOST))`; anything else (port 0,
/// no number) → `None`.
pub fn sidecar_route_name(name: &str) -> Option<(u32, Option<&str>)> {
    let (host, port) = match name.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => (Some(host), port),
        Some(_) => return None,
        None => (None, name),
    };
    match port.parse::<u32>() {
        Ok(port) if port > 0 => Some((port, host)),
        _ => None,
    }
}

/// The sidecar route configuration named `PORT` (or `HOST:PORT`), generated once per snapshot for
/// every proxy with the same scope, DNS domain and (when they matter) labels.
fn shared_sidecar_route(
    push: &Snapshot,
    proxy: &ProxyContext,
    port: u32,
    host: Option<&str>,
    findings: &mut Vec<Finding>,
) -> Arc<Encoded> {
    let scope = push.sidecar_scope(proxy);
    let key = SidecarRouteKey {
        port,
        host: host.map(str::to_string),
        scope: push.scope_key(proxy),
        dns_domain: proxy.dns_domain.clone(),
        proxyless: proxy.proxyless_grpc,
        labels: push.routes_depend_on_labels(&scope).then(|| proxy.labels.clone()),
    };
    let shared = push.sidecar_route(key, || {
        let mut found = Vec::new();
        let route = sidecar_route(push, proxy, port, host, &mut found);
        (encode_route_configuration(route), found)
    });
    findings.extend(shared.1.iter().cloned());
    shared.0.clone()
}

/// The sidecar route configuration named `PORT`, or `HOST:PORT` for a sniffed listener of its own
/// (`host`; Istio's `getVirtualHostsForSniffedServicePort`): then only the virtual host of service
/// `host` on `port`, matching every domain (`*`: the listener already chose the service), and no
/// catch-all virtual host.
fn sidecar_route(
    push: &Snapshot,
    proxy: &ProxyContext,
    port: u32,
    host: Option<&str>,
    findings: &mut Vec<Finding>,
) -> RouteConfiguration {
    let scope = push.sidecar_scope(proxy);
    // Istio's `GetEgressListenerForRDS`: the egress listener on the port (else the catch-all) gives
    // the services and VirtualServices; no listener, no virtual hosts but the catch-all.
    let empty = Imports::default();
    let imports = scope.egress_for_port(port).map_or(&empty, |e| &*e.imports);
    let mut translator = RouteTranslator::new(push, proxy, imports);
    let mut vhosts = sidecar_virtual_hosts(proxy, (&scope, imports), port, host, &mut translator);
    findings.append(&mut translator.findings);
    let name = match host {
        None => port.to_string(),
        Some(host) => {
            if let [only] = vhosts.as_mut_slice() {
                only.domains = vec!["*".to_string()];
            }
            format!("{host}:{port}")
        }
    };
    route_configuration(&name, vhosts, true)
}

/// The proxyless route configuration `outbound|PORT||HOST`.
fn grpc_route(
    push: &Snapshot,
    proxy: &ProxyContext,
    name: &str,
    findings: &mut Vec<Finding>,
) -> RouteConfiguration {
    let scope = push.sidecar_scope(proxy);
    let mut translator = RouteTranslator::new(push, proxy, scope.imports());
    let mut vhosts = match parse_cluster_name(name) {
        Some(key) if key.direction == TrafficDirection::Outbound => {
            sidecar_virtual_hosts(proxy, (&scope, scope.imports()), key.port, Some(key.host), &mut translator)
        }
        _ => Vec::new(),
    };
    for route in vhosts.iter_mut().flat_map(|v| v.routes.iter_mut()) {
        grpc_stream_timeout(route);
    }
    findings.append(&mut translator.findings);
    RouteConfiguration { name: name.to_string(), virtual_hosts: vhosts, ..Default::default() }
}

/// A VirtualService route's timeout as a proxyless gRPC client reads it (Istio's `setTimeout` for a
/// proxyless node): `max_stream_duration` holds the timeout, and the deprecated `max_grpc_timeout`, which
/// gRPC does not read, is left out. Without this a VirtualService `timeout` would not apply to gRPC calls.
fn grpc_stream_timeout(route: &mut Route) {
    let Some(Action::Route(action)) = &mut route.action else { return };
    #[allow(deprecated)]
    let timeout = action.max_grpc_timeout.take();
    if let Some(timeout) = timeout {
        action.max_stream_duration =
            Some(MaxStreamDuration { max_stream_duration: Some(timeout), ..Default::default() });
    }
}

/// Protobuf field number of `RouteConfiguration.virtual_hosts` (envoy/config/route/v3/route.proto).
const ROUTE_CONFIGURATION_VIRTUAL_HOSTS: u32 = 2;
/// Protobuf field number of `VirtualHost.routes` (envoy/config/route/v3/route_components.proto).
const VIRTUAL_HOST_ROUTES: u32 = 3;

/// Appends the key and length of a length-delimited field `field` whose value is `len` bytes long.
fn put_message_header(buf: &mut Vec<u8>, field: u32, len: usize) {
    prost::encoding::encode_key(field, prost::encoding::WireType::LengthDelimited, buf);
    prost::encoding::encode_varint(len as u64, buf);
}

/// Encoded size of a length-delimited field `field` of `len` bytes (key, length, value).
fn message_field_len(field: u32, len: usize) -> usize {
    prost::encoding::key_len(field) + prost::encoding::encoded_len_varint(len as u64) + len
}

/// Protobuf field number of `Route.typed_per_filter_config` (route_components.proto).
const ROUTE_TYPED_PER_FILTER_CONFIG: u32 = 13;

/// Appends `route` (without its own key and length) as prost encodes it, except that the entries of
/// `typed_per_filter_config` come in key order. envoy-types keeps that map in a `HashMap`, whose
/// iteration order differs between instances, so a route with two per-filter configs (fault and
/// CORS) would encode differently in every snapshot, and its content-hash version would change
/// without a change (re-sent to every proxy that holds it).
fn encode_route_raw(route: &Route, buf: &mut Vec<u8>) {
    if route.typed_per_filter_config.len() < 2 {
        route.encode_raw(buf);
    } else {
        encode_route_ordered(route, buf);
    }
}

/// [`encode_route_raw`] for a route with several per-filter configs (rare: kept out of line).
#[cold]
#[inline(never)]
fn encode_route_ordered(route: &Route, buf: &mut Vec<u8>) {
    let mut rest = route.clone();
    let ordered: BTreeMap<String, envoy_types::pb::google::protobuf::Any> =
        std::mem::take(&mut rest.typed_per_filter_config).into_iter().collect();
    rest.encode_raw(buf);
    use prost::encoding::{btree_map, message, string};
    btree_map::encode(
        string::encode,
        string::encoded_len,
        message::encode,
        message::encoded_len,
        ROUTE_TYPED_PER_FILTER_CONFIG,
        &ordered,
        buf,
    );
}

/// `routes` encoded as repeated `VirtualHost.routes` fields: the bytes appended to an encoded
/// virtual host to give it these routes (protobuf concatenates repeated fields). Deterministic
/// ([`encode_route_raw`]).
fn encode_routes_field(routes: &[Route]) -> Vec<u8> {
    let lens: Vec<usize> = routes.iter().map(Message::encoded_len).collect();
    let mut buf =
        Vec::with_capacity(lens.iter().map(|len| message_field_len(VIRTUAL_HOST_ROUTES, *len)).sum());
    for (r, len) in routes.iter().zip(lens) {
        put_message_header(&mut buf, VIRTUAL_HOST_ROUTES, len);
        encode_route_raw(r, &mut buf);
    }
    buf
}

/// `config` encoded, with the routes of every virtual host encoded deterministically
/// ([`encode_route_raw`]); decodes to `config`.
fn encode_route_configuration(mut config: RouteConfiguration) -> Vec<u8> {
    let vhosts = std::mem::take(&mut config.virtual_hosts);
    let mut buf = Vec::new();
    config.encode_raw(&mut buf);
    for mut vhost in vhosts {
        let routes = encode_routes_field(&std::mem::take(&mut vhost.routes));
        put_message_header(&mut buf, ROUTE_CONFIGURATION_VIRTUAL_HOSTS, vhost.encoded_len() + routes.len());
        vhost.encode_raw(&mut buf);
        buf.extend_from_slice(&routes);
    }
    buf
}

/// A virtual host of a gateway table while it is assembled: its name (`host:port`), its one domain
/// (the host), whether it requires TLS, and the encoded routes of each VirtualService that
/// contributes to it, in order. Kept small: thousands are moved around per table.
struct GatewayVhost {
    name: String,
    domain: String,
    require_tls: bool,
    routes: Vec<Arc<[u8]>>,
}

/// Protobuf field numbers of `VirtualHost.name`, `.domains` and `.require_tls`.
const VIRTUAL_HOST_NAME: u32 = 1;
const VIRTUAL_HOST_DOMAINS: u32 = 2;
const VIRTUAL_HOST_REQUIRE_TLS: u32 = 4;
const VIRTUAL_HOST_INCLUDE_REQUEST_ATTEMPT_COUNT: u32 = 14;

impl GatewayVhost {
    const REQUIRE_TLS_ALL: i32 = TlsRequirementType::All as i32;

    /// Encoded size of the virtual host without its routes.
    fn head_len(&self) -> usize {
        use prost::encoding::{bool, int32, string};
        string::encoded_len(VIRTUAL_HOST_NAME, &self.name)
            + string::encoded_len(VIRTUAL_HOST_DOMAINS, &self.domain)
            + bool::encoded_len(VIRTUAL_HOST_INCLUDE_REQUEST_ATTEMPT_COUNT, &true)
            + if self.require_tls {
                int32::encoded_len(VIRTUAL_HOST_REQUIRE_TLS, &Self::REQUIRE_TLS_ALL)
            } else {
                0
            }
    }

    /// Appends the virtual host without its routes (no `VirtualHost` message is built: thousands
    /// per table).
    fn encode_head(&self, buf: &mut Vec<u8>) {
        use prost::encoding::{bool, int32, string};
        string::encode(VIRTUAL_HOST_NAME, &self.name, buf);
        string::encode(VIRTUAL_HOST_DOMAINS, &self.domain, buf);
        // Istio's proxy headers default on gateways too: `x-envoy-attempt-count` sent upstream.
        bool::encode(VIRTUAL_HOST_INCLUDE_REQUEST_ATTEMPT_COUNT, &true, buf);
        if self.require_tls {
            int32::encode(VIRTUAL_HOST_REQUIRE_TLS, &Self::REQUIRE_TLS_ALL, buf);
        }
    }

    /// Encoded size of the whole virtual host (without its own key and length).
    fn body_len(&self) -> usize {
        self.head_len() + self.routes.iter().map(|r| r.len()).sum::<usize>()
    }
}

/// Encodes a route configuration from its non-virtual-host fields (`head`) and virtual hosts given
/// as (message without routes, encoded route fields). The result decodes to `head` with those
/// virtual hosts and routes; each VirtualService's routes are encoded once however many hosts share
/// them, and no per-host message copy is made.
fn assemble_route_configuration(head: &RouteConfiguration, vhosts: &[GatewayVhost]) -> Vec<u8> {
    let lens: Vec<usize> = vhosts.iter().map(GatewayVhost::body_len).collect();
    let total = head.encoded_len()
        + lens.iter().map(|len| message_field_len(ROUTE_CONFIGURATION_VIRTUAL_HOSTS, *len)).sum::<usize>();
    let mut buf = Vec::with_capacity(total);
    head.encode_raw(&mut buf);
    for (v, len) in vhosts.iter().zip(lens) {
        put_message_header(&mut buf, ROUTE_CONFIGURATION_VIRTUAL_HOSTS, len);
        v.encode_head(&mut buf);
        for r in &v.routes {
            buf.extend_from_slice(r);
        }
    }
    debug_assert_eq!(buf.len(), total);
    buf
}

/// What one server and VirtualService give a host of a gateway table: (host, the server's port,
/// encoded routes, `require_tls`).
type HostContribution = (String, u32, Option<Arc<[u8]>>, bool);

/// Orders hosts as their virtual host names `host:PORT` sort, without formatting the names: by the
/// host followed by `:` (the port never decides between two different hosts). Only for hosts without
/// `:` (IPv6 literals are written in brackets in names; sort those by [`host::domain_name`]).
fn vhost_name_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len().min(b.len());
    a[..n].cmp(&b[..n]).then_with(|| {
        let next = |s: &[u8]| s.get(n).copied().unwrap_or(b':');
        next(a).cmp(&next(b)).then(a.len().cmp(&b.len()))
    })
}

/// A gateway route configuration for `servers` (all listened on one port), encoded.
///
/// Routes are translated for each server's own port (VirtualService `match.port`), and a host's
/// virtual host is named `host:PORT` with the port of the first server that gives it (Istio's
/// `buildGatewayHTTPRouteConfig`: a Gateway port 80 listened on 8080 keeps `host:80`). Virtual
/// hosts are keyed by host, which is also the output order; the routes of a VirtualService are
/// translated and encoded once per table and port and appended to each of its hosts as bytes (the
/// `gateways` benchmark has 3,000 hosts over 1,000 VirtualServices, 1.5 MB).
fn gateway_route(
    push: &Snapshot,
    proxy: &ProxyContext,
    name: &str,
    servers: &[&GatewayServer],
    findings: &mut Vec<Finding>,
) -> Vec<u8> {
    let scope = push.sidecar_scope(proxy);
    let mut translator = RouteTranslator::new(push, proxy, scope.imports());
    // Encoded routes per (VirtualService, gateway, port), keyed by the snapshot's VirtualService entry.
    let mut encoded: HashMap<(*const IndexedVirtualService, &str, u32), Arc<[u8]>> = HashMap::new();
    // What each (server, VirtualService) gives each host, in order; grouped by host below (a host has
    // one virtual host).
    let mut given: Vec<HostContribution> = Vec::new();
    for server in servers {
        let redirect =
            server.server().tls.as_ref().is_some_and(|t| t.https_redirect) && server.kind == ServerKind::Http;
        let gw_name = server.gateway.name.as_str();
        let port = server.port;
        for vs in push.virtual_services_for_gateway(&proxy.namespace, gw_name) {
            let hosts = server.intersect(&vs);
            if hosts.is_empty() {
                continue;
            }
            let routes = encoded
                .entry((Arc::as_ptr(&vs), gw_name, port))
                .or_insert_with(|| encode_routes_field(&translator.translate(&vs, port, gw_name)).into())
                .clone();
            let routes = (!routes.is_empty()).then_some(routes);
            given.extend(hosts.into_iter().map(|h| (h, port, routes.clone(), redirect)));
        }
        if redirect {
            given.extend(server.hosts().into_iter().map(|(_, h)| (h, port, None, true)));
        }
    }
    findings.append(&mut translator.findings);
    // Stable: a host's contributions keep their order. Ordered as the names `host:port` are.
    if given.iter().any(|g| g.0.contains(':')) {
        given.sort_by_cached_key(|g| host::domain_name(&g.0, 0));
    } else {
        given.sort_by(|a, b| vhost_name_order(&a.0, &b.0));
    }
    let mut out: Vec<GatewayVhost> = Vec::new();
    for (h, port, routes, require_tls) in given {
        match out.last_mut() {
            Some(last) if last.domain == h => {
                last.routes.extend(routes);
                last.require_tls |= require_tls;
            }
            _ => out.push(GatewayVhost {
                name: host::domain_name(&h, port),
                domain: h,
                require_tls,
                routes: routes.into_iter().collect(),
            }),
        }
    }
    if out.is_empty() {
        out.push(GatewayVhost {
            name: host::domain_name("blackhole", servers.first().map_or(0, |s| s.port)),
            domain: "*".to_string(),
            require_tls: false,
            routes: Vec::new(),
        });
    }
    assemble_route_configuration(&route_configuration(name, Vec::new(), !proxy.proxyless_grpc), &out)
}

/// The route configuration names the listeners of `proxy` refer to, sorted.
pub fn route_names(push: &Snapshot, proxy: &ProxyContext) -> Vec<String> {
    let mut names = BTreeSet::new();
    if proxy.proxyless_grpc {
        for s in push.sidecar_scope(proxy).services() {
            for p in &s.ports {
                names.insert(outbound_cluster_name(p.port, "", &s.hostname));
            }
        }
    } else if proxy.kind == ProxyKind::Router {
        for ((port, _), merged) in crate::gateway::servers(push, proxy).0.iter() {
            for s in &merged.servers {
                if matches!(s.kind, ServerKind::Http | ServerKind::HttpsTerminated)
                    && s.servable(proxy.has_workload_certificates())
                {
                    names.insert(s.route_name(*port));
                }
            }
        }
    } else {
        names.extend(crate::listener::sidecar_route_names(push, proxy));
    }
    names.into_iter().collect()
}

/// A route configuration in protobuf wire format (`envoy.config.route.v3.RouteConfiguration`), as
/// RDS sends it: gateway tables are assembled from encoded pieces and sidecar tables are encoded
/// once per snapshot and scope (and shared, [`crate::cache::Encoded`]), so the server never re-encodes
/// them per proxy. The name is the route configuration name (`9080`, `http.80`,
/// `outbound|80||reviews.default.svc.cluster.local`).
pub type EncodedRouteConfiguration = crate::cache::EncodedResource;

/// RDS for `proxy`, encoded: one route configuration per name in `names` (all the proxy's listeners
/// use when empty), in that order. A name the proxy's config does not produce gets an empty
/// configuration of that name, so Envoy does not wait for it.
pub fn generate_routes_encoded(
    push: &Snapshot,
    proxy: &ProxyContext,
    names: &[String],
) -> Built<EncodedRouteConfiguration> {
    let mut findings = Vec::new();
    let owned;
    let names = if names.is_empty() {
        owned = route_names(push, proxy);
        &owned
    } else {
        names
    };
    let merged = if proxy.kind == ProxyKind::Router && !proxy.proxyless_grpc {
        Some(crate::gateway::servers(push, proxy))
    } else {
        None
    };
    let empty = |name: &str| encode_route_configuration(route_configuration(name, Vec::new(), true));
    let fresh = |bytes: Vec<u8>| Arc::new(Encoded::new(bytes));
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let encoded = if proxy.proxyless_grpc && name.starts_with("outbound|") {
            fresh(encode_route_configuration(grpc_route(push, proxy, name, &mut findings)))
        } else if let Some(merged) = &merged {
            let mut found = None;
            for ((port, _), m) in &merged.0 {
                if m.kind == PortKind::Tcp {
                    continue;
                }
                let servers: Vec<&GatewayServer> = m
                    .servers
                    .iter()
                    .filter(|s| {
                        matches!(s.kind, ServerKind::Http | ServerKind::HttpsTerminated)
                            && &s.route_name(*port) == name
                    })
                    .collect();
                if !servers.is_empty() {
                    found = Some(fresh(gateway_route(push, proxy, name, &servers, &mut findings)));
                    break;
                }
            }
            found.unwrap_or_else(|| fresh(empty(name)))
        } else {
            match sidecar_route_name(name) {
                Some((port, host)) => shared_sidecar_route(push, proxy, port, host, &mut findings),
                None => fresh(empty(name)),
            }
        };
        out.push(EncodedRouteConfiguration { name: name.clone(), encoded });
    }
    crate::envoy_filter::patch_routes(push, proxy, Built::new(out, findings))
}

/// RDS for `proxy` as messages ([`generate_routes_encoded`], decoded): for tests, debug output
/// and tools. A configuration that fails to decode (a bug, never expected) is replaced by an empty
/// one of that name and reported as a finding.
pub fn generate_routes(push: &Snapshot, proxy: &ProxyContext, names: &[String]) -> Built<RouteConfiguration> {
    let encoded = generate_routes_encoded(push, proxy, names);
    let mut findings = encoded.findings;
    let resources = encoded
        .resources
        .into_iter()
        .map(|e| {
            RouteConfiguration::decode(e.bytes()).unwrap_or_else(|err| {
                findings.push(Finding {
                    severity: Severity::Dropped,
                    config: None,
                    path: String::new(),
                    resource: e.name.clone(),
                    message: format!(
                        "internal error: the encoded route configuration does not decode: {err}"
                    ),
                });
                route_configuration(&e.name, Vec::new(), true)
            })
        })
        .collect();
    Built::new(resources, findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The assembled bytes decode to the message prost would build from the same parts: virtual
    /// hosts in order, each with the routes of every contributing VirtualService appended in order,
    /// the header fields (domains, `require_tls`, Istio's `include_request_attempt_count`) kept, and a host without routes left empty.
    #[test]
    fn assembled_route_configuration_decodes_to_the_whole_message() {
        let route = |name: &str, cluster: &str| Route {
            name: name.to_string(),
            r#match: Some(prefix_match()),
            action: Some(Action::Route(no_timeout_action(cluster))),
            ..Default::default()
        };
        let vs_a = [route("a1", "outbound|80||a"), route("a2", "outbound|80||a2")];
        let vs_b = [route("b1", "outbound|80||b")];
        let vhost = |name: &str, domain: &str, require_tls: bool, routes: Vec<Arc<[u8]>>| GatewayVhost {
            name: name.into(),
            domain: domain.into(),
            require_tls,
            routes,
        };
        let enc_a: Arc<[u8]> = encode_routes_field(&vs_a).into();
        let enc_b: Arc<[u8]> = encode_routes_field(&vs_b).into();
        let parts = [
            vhost("a.com:80", "a.com", false, vec![enc_a.clone(), enc_b.clone()]),
            vhost("b.com:80", "b.com", true, vec![enc_b]),
            vhost("c.com:80", "c.com", false, Vec::new()),
        ];
        let head = route_configuration("http.80", Vec::new(), true);
        let bytes = assemble_route_configuration(&head, &parts);

        let mut want = head.clone();
        let want_vhost = |name: &str, domain: &str, require_tls: i32, routes: Vec<Route>| VirtualHost {
            name: name.into(),
            domains: vec![domain.into()],
            require_tls,
            routes,
            include_request_attempt_count: true,
            ..Default::default()
        };
        want.virtual_hosts = vec![
            want_vhost("a.com:80", "a.com", 0, vec![vs_a[0].clone(), vs_a[1].clone(), vs_b[0].clone()]),
            want_vhost("b.com:80", "b.com", TlsRequirementType::All as i32, vec![vs_b[0].clone()]),
            want_vhost("c.com:80", "c.com", 0, Vec::new()),
        ];
        assert_eq!(RouteConfiguration::decode(bytes.as_slice()).unwrap(), want);
        assert_eq!(bytes.len(), want.encoded_len(), "no byte more or less than prost's encoding");
    }

    /// Hosts sorted with `vhost_name_order` come out in the order of their `host:port` names.
    #[test]
    fn vhost_order_is_the_order_of_names() {
        let hosts = ["a.com", "a.com.b", "a-b.com", "*.a.com", "*", "a.co", "a.com", "10.0.0.1", "b", "a"];
        for port in [80, 8080, 443] {
            let mut by_order: Vec<&str> = hosts.to_vec();
            by_order.sort_by(|a, b| vhost_name_order(a, b));
            let mut by_name: Vec<&str> = hosts.to_vec();
            by_name.sort_by_key(|h| host::domain_name(h, port));
            assert_eq!(by_order, by_name, "port {port}");
        }
    }

    #[test]
    fn alt_hosts_follow_istio() {
        assert_eq!(
            alt_virtual_hosts("reviews.bookinfo.svc.cluster.local", 0, "bookinfo.svc.cluster.local"),
            ["reviews.bookinfo.svc.cluster.local.", "reviews", "reviews.bookinfo.svc", "reviews.bookinfo"]
        );
        assert_eq!(
            alt_virtual_hosts("reviews.bookinfo.svc.cluster.local", 0, "other.svc.cluster.local"),
            ["reviews.bookinfo.svc.cluster.local.", "reviews.bookinfo", "reviews.bookinfo.svc"]
        );
        assert_eq!(alt_virtual_hosts("www.example.com", 0, "other.svc.cluster.local"), ["www.example.com."]);
        assert_eq!(
            alt_virtual_hosts("foo.local.campus.net", 80, "local.campus.net"),
            ["foo.local.campus.net.", "foo.local.campus.net.:80", "foo", "foo:80"]
        );
        assert_eq!(alt_virtual_hosts("10.0.0.1", 0, "ns.svc.cluster.local"), Vec::<String>::new());
    }

    /// Ingress and Gateway API routes match prefixes by whole segments (one trailing `/` dropped, `/`
    /// kept); only Gateway API routes answer 500 for a missing cluster (Istio's route.go).
    #[test]
    fn generated_routes_follow_their_route_semantics() {
        use envoy_types::pb::envoy::config::route::v3::route_action::ClusterNotFoundResponseCode;
        let prefixed = |p: &str| Route {
            r#match: Some(RouteMatch {
                path_specifier: Some(PathSpecifier::Prefix(p.to_string())),
                ..Default::default()
            }),
            action: Some(Action::Route(no_timeout_action("outbound|80||a"))),
            ..Default::default()
        };
        let paths = |routes: &[Route]| -> Vec<PathSpecifier> {
            routes.iter().map(|r| r.r#match.as_ref().unwrap().path_specifier.clone().unwrap()).collect()
        };
        let not_found = |r: &Route| match &r.action {
            Some(Action::Route(a)) => a.cluster_not_found_response_code,
            _ => panic!("not a route action"),
        };
        for semantics in [RouteSemantics::Ingress, RouteSemantics::Gateway] {
            let mut routes = [prefixed("/a/"), prefixed("/"), prefixed("/b//")];
            apply_route_semantics(&mut routes, semantics);
            assert_eq!(
                paths(&routes),
                [
                    PathSpecifier::PathSeparatedPrefix("/a".into()),
                    PathSpecifier::Prefix("/".into()),
                    PathSpecifier::PathSeparatedPrefix("/b/".into()),
                ],
                "{semantics:?}"
            );
            let want = match semantics {
                RouteSemantics::Gateway => ClusterNotFoundResponseCode::InternalServerError as i32,
                RouteSemantics::Ingress => ClusterNotFoundResponseCode::ServiceUnavailable as i32,
            };
            assert_eq!(not_found(&routes[0]), want, "{semantics:?}");
        }
    }

    #[test]
    fn catch_all_follows_the_policy() {
        let allow = catch_all_virtual_host(OutboundTrafficPolicy::AllowAny, "outbound|3128||egress.example");
        assert_eq!(allow.name, "allow_any");
        assert!(matches!(
            &allow.routes[0].action,
            Some(Action::Route(RouteAction { cluster_specifier: Some(ClusterSpecifier::Cluster(c)), .. }))
                if c == "outbound|3128||egress.example"
        ));
        let block =
            catch_all_virtual_host(OutboundTrafficPolicy::RegistryOnly, crate::naming::PASSTHROUGH_CLUSTER);
        assert_eq!(block.name, "block_all");
        assert!(matches!(
            block.routes[0].action,
            Some(Action::DirectResponse(DirectResponseAction { status: 502, .. }))
        ));
    }
}
