//! LDS: listeners (Istio's `pilot/pkg/networking/core/listener*.go`, `gateway.go`,
//! `grpcgen/lds.go`).
//!
//! | proxy | listeners |
//! |---|---|
//! | sidecar | `BIND_PORT` per distinct service port (`0.0.0.0_9080`): HTTP ports → connection manager with RDS `PORT`; TLS/HTTPS ports → one SNI filter chain per service → TCP proxy; TCP ports → TCP proxy to the port's service (VirtualService TCP routes when bound to `mesh`); a TCP service with a VIP gets its own `VIP_PORT` listener. With interception (default) these do not bind (`bind_to_port: false`) and `virtualOutbound` (15001, original destination, unknown traffic → `PassthroughCluster`/`BlackHoleCluster`) and `virtualInbound` (15006, the chains of [`crate::inbound`] per target port of the proxy's instances, or per Sidecar `ingress` entry → `inbound\|PORT\|\|`) capture the traffic; with `INTERCEPTION_MODE=NONE` they bind their ports and there are no virtual listeners (as Istio); Sidecar `ingress` entries then bind `BIND_PORT` listeners of their own. |
//! | router | `BIND_PORT` per Gateway server port: HTTP → RDS `http.PORT`; HTTPS terminated with files → SNI filter chain with the server's TLS context and RDS `https.PORT.PORTNAME.GATEWAY.NAMESPACE`; TLS passthrough → SNI filter chains from VirtualService TLS routes → TCP proxy; TCP → TCP proxy from TCP routes. |
//! | proxyless gRPC | API listeners named exactly as asked (`HOST:PORT`, short names resolved in the proxy's namespace) with a connection manager on RDS `outbound\|PORT\|\|FQDN`; server listeners `xds.istio.io/grpc/lds/inbound/IP:PORT` for the proxy's instances. |

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use api::networking::virtual_service::{Destination, RouteDestination};
use envoy_types::pb::envoy::{
    config::{
        core::v3::TrafficDirection as EnvoyDirection,
        listener::v3::{ApiListener, Filter, FilterChain, FilterChainMatch, Listener},
        route::v3::{
            NonForwardingAction, Route, RouteConfiguration, RouteMatch, VirtualHost, route::Action,
            route_match::PathSpecifier,
        },
    },
    extensions::transport_sockets::tls::v3::DownstreamTlsContext,
};
use model::{Protocol, service::Service};

use crate::{
    Snapshot,
    convert::{address, any, boolv, transport_socket},
    filters::{
        FilterTarget, Routes, TLS_TRANSPORT_SOCKET, hcm_filter, http_connection_manager, tcp_proxy_filter,
        tls_inspector,
    },
    gateway::{GatewayServer, PortKind, ServerKind},
    generated::Generated,
    naming::{
        BLACK_HOLE_CLUSTER, GRPC_INBOUND_LISTENER_PREFIX, MESH_GATEWAY, PASSTHROUGH_CLUSTER,
        VIRTUAL_OUTBOUND_LISTENER, VIRTUAL_OUTBOUND_PORT, listener_name, outbound_cluster_name,
    },
    tls,
};
use model::{
    Finding, Severity, host,
    push::{
        IndexedVirtualService, InterceptionMode, OutboundTrafficPolicy, ProxyContext, ProxyKind, SidecarScope,
    },
};

/// Weighted destinations of a layer-4 route: `(cluster, weight)`.
type Destinations = Vec<(String, u32)>;

/// How a service port is carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Carriage {
    Http,
    Tls,
    Tcp,
}

fn carriage(protocol: Protocol) -> Option<Carriage> {
    match protocol {
        Protocol::Udp => None,
        p if p.is_http() || p == Protocol::HttpProxy => Some(Carriage::Http),
        Protocol::Https | Protocol::Tls => Some(Carriage::Tls),
        _ => Some(Carriage::Tcp),
    }
}

/// Services on one port, by carriage.
#[derive(Default)]
struct PortServices {
    http: Vec<Arc<Service>>,
    tls: Vec<Arc<Service>>,
    tcp: Vec<Arc<Service>>,
    tcp_vip: Vec<(Arc<Service>, String)>,
}

fn first_vip(service: &Service) -> Option<String> {
    service
        .addresses
        .iter()
        .filter_map(|a| crate::convert::single_ip(a))
        .find(|ip| *ip != model::service::UNSPECIFIED_IP)
        .map(str::to_string)
}

fn plan(scope: &SidecarScope) -> BTreeMap<u32, PortServices> {
    let mut ports: BTreeMap<u32, PortServices> = BTreeMap::new();
    for s in scope.services() {
        for p in &s.ports {
            let Some(c) = carriage(p.protocol) else { continue };
            let entry = ports.entry(p.port).or_default();
            match c {
                Carriage::Http => entry.http.push(s.clone()),
                Carriage::Tls => entry.tls.push(s.clone()),
                Carriage::Tcp => match first_vip(s) {
                    Some(vip) => entry.tcp_vip.push((s.clone(), vip)),
                    None => entry.tcp.push(s.clone()),
                },
            }
        }
    }
    ports
}

/// Ports on which a sidecar gets an HTTP connection manager with RDS `PORT`.
pub fn sidecar_http_ports(push: &Snapshot, proxy: &ProxyContext) -> Vec<u32> {
    plan(&push.sidecar_scope(proxy)).into_iter().filter(|(_, s)| !s.http.is_empty()).map(|(p, _)| p).collect()
}

/// Reports findings against one resource.
struct Report<'a> {
    findings: &'a mut Vec<Finding>,
}

impl Report<'_> {
    fn push(
        &mut self,
        severity: Severity,
        config: Option<&model::ConfigKey>,
        path: &str,
        resource: &str,
        message: impl Into<String>,
    ) {
        self.findings.push(Finding {
            severity,
            config: config.cloned(),
            path: path.to_string(),
            resource: resource.to_string(),
            message: message.into(),
        });
    }
}

/// The cluster a layer-4 route destination goes to: the service the proxy sees, the destination port
/// (or the service's only port, or `port`).
fn l4_cluster(scope: &SidecarScope, suffix: &str, vs_ns: &str, d: &Destination, port: u32) -> Option<String> {
    let hostname = host::resolve_short_name(&d.host.to_ascii_lowercase(), vs_ns, suffix);
    let service = scope.service(&hostname)?;
    let port = match &d.port {
        Some(p) if p.number != 0 => p.number,
        _ if service.ports.len() == 1 => service.ports.first().map_or(port, |p| p.port),
        _ => port,
    };
    Some(outbound_cluster_name(port, &d.subset, &service.hostname))
}

/// Weighted destinations of a TCP or TLS route (`(cluster, weight)`); `None` when no destination is
/// known.
fn l4_destinations(
    push: &Snapshot,
    scope: &SidecarScope,
    vs: &IndexedVirtualService,
    route: &[RouteDestination],
    port: u32,
    path: &str,
    report: &mut Report<'_>,
) -> Option<Vec<(String, u32)>> {
    let mut out = Vec::new();
    for (i, rd) in route.iter().enumerate() {
        let Some(d) = &rd.destination else { continue };
        match l4_cluster(scope, &push.mesh().domain_suffix, vs.namespace(), d, port) {
            Some(c) => out.push((c, u32::try_from(rd.weight).unwrap_or(0))),
            None => report.push(
                Severity::Dropped,
                Some(&vs.key),
                &format!("{path}.route[{i}]"),
                "",
                format!(
                    "destination host {:?} is not a service this proxy sees; destination left out",
                    d.host
                ),
            ),
        }
    }
    if out.is_empty() {
        return None;
    }
    if out.iter().all(|(_, w)| *w == 0) {
        for d in &mut out {
            d.1 = 1;
        }
    }
    out.retain(|(_, w)| *w > 0);
    Some(out)
}

/// `true` if a layer-4 match block applies to a table on `port` for `gateway` seen by `proxy`;
/// unsupported conditions are reported.
#[allow(clippy::too_many_arguments)]
fn l4_match_applies(
    port_match: u32,
    gateways: &[String],
    source_labels: &BTreeMap<String, String>,
    source_namespace: &str,
    subnets: bool,
    vs: &IndexedVirtualService,
    path: &str,
    port: u32,
    gateway: &str,
    proxy: &ProxyContext,
    report: &mut Report<'_>,
) -> bool {
    if subnets {
        report.push(
            Severity::Unsupported,
            Some(&vs.key),
            path,
            "",
            "destinationSubnets / sourceSubnet matches are not translated; ignored",
        );
    }
    let gateways: Vec<String> =
        gateways
            .iter()
            .map(|g| {
                if g == MESH_GATEWAY {
                    g.clone()
                } else {
                    model::push::resolve_gateway_name(g, vs.namespace())
                }
            })
            .collect();
    (port_match == 0 || port_match == port)
        && (gateways.is_empty() || gateways.iter().any(|g| g == gateway))
        && model::service::labels_match(source_labels, &proxy.labels)
        && (source_namespace.is_empty() || source_namespace == proxy.namespace)
}

/// The destinations of the first TCP route of `vs` that applies.
fn tcp_route_destinations(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
    vs: &IndexedVirtualService,
    port: u32,
    gateway: &str,
    report: &mut Report<'_>,
) -> Option<Vec<(String, u32)>> {
    for (i, r) in vs.spec().tcp.iter().enumerate() {
        let path = format!("spec.tcp[{i}]");
        let applies = r.r#match.is_empty()
            || r.r#match.iter().enumerate().any(|(j, m)| {
                l4_match_applies(
                    m.port,
                    &m.gateways,
                    &m.source_labels,
                    &m.source_namespace,
                    !m.destination_subnets.is_empty() || !m.source_subnet.is_empty(),
                    vs,
                    &format!("{path}.match[{j}]"),
                    port,
                    gateway,
                    proxy,
                    report,
                )
            });
        if applies {
            return l4_destinations(push, scope, vs, &r.route, port, &path, report);
        }
    }
    None
}

/// TLS routes of `vs` that apply: `(SNI hosts, destinations)`.
#[allow(clippy::too_many_arguments)]
fn tls_route_destinations(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
    vs: &IndexedVirtualService,
    port: u32,
    gateway: &str,
    report: &mut Report<'_>,
) -> Vec<(Vec<String>, Destinations)> {
    let mut out = Vec::new();
    for (i, r) in vs.spec().tls.iter().enumerate() {
        let path = format!("spec.tls[{i}]");
        let mut sni: Vec<String> = Vec::new();
        for (j, m) in r.r#match.iter().enumerate() {
            if l4_match_applies(
                m.port,
                &m.gateways,
                &m.source_labels,
                &m.source_namespace,
                !m.destination_subnets.is_empty(),
                vs,
                &format!("{path}.match[{j}]"),
                port,
                gateway,
                proxy,
                report,
            ) {
                sni.extend(m.sni_hosts.iter().map(|h| h.to_ascii_lowercase()));
            }
        }
        if sni.is_empty() {
            continue;
        }
        if let Some(d) = l4_destinations(push, scope, vs, &r.route, port, &path, report) {
            out.push((sni, d));
        }
    }
    out
}

/// The stat prefix of a TCP proxy: its first cluster.
fn stat_of(destinations: &[(String, u32)]) -> &str {
    destinations.first().map_or("tcp", |d| d.0.as_str())
}

fn listener(
    name: String,
    addr: &str,
    port: u32,
    direction: EnvoyDirection,
    chains: Vec<FilterChain>,
) -> Listener {
    Listener {
        name,
        address: Some(address(addr, port)),
        filter_chains: chains,
        traffic_direction: direction as i32,
        ..Default::default()
    }
}

fn chain(name: &str, filter_chain_match: Option<FilterChainMatch>, filters: Vec<Filter>) -> FilterChain {
    FilterChain { name: name.to_string(), filter_chain_match, filters, ..Default::default() }
}

/// SNI names for a filter chain match: hosts without the catch-all `*` (which matches everything and
/// is expressed by no `server_names`).
fn server_names(hosts: impl IntoIterator<Item = String>) -> Vec<String> {
    let set: BTreeSet<String> = hosts.into_iter().filter(|h| h != "*").collect();
    set.into_iter().collect()
}

fn sidecar_outbound(push: &Snapshot, proxy: &ProxyContext, findings: &mut Vec<Finding>) -> Vec<Listener> {
    let scope = push.sidecar_scope(proxy);
    let mut report = Report { findings };
    let bind = proxy.bind_address.as_str();
    let capture = proxy.interception_mode != InterceptionMode::None;
    let mut out = Vec::new();
    for (port, services) in plan(&scope) {
        let name = listener_name(bind, port);
        for s in services.tcp.iter().chain(services.tcp_vip.iter().map(|(s, _)| s)) {
            if s.port_by_number(port).is_some_and(|p| p.protocol == Protocol::Unsupported) {
                report.push(
                    Severity::Unsupported,
                    None,
                    "",
                    &name,
                    format!(
                        "port {port} of {} declares no known protocol; protocol sniffing is not implemented, the port is \
                         treated as TCP",
                        s.hostname
                    ),
                );
            }
        }
        let mut chains = Vec::new();
        let mut seen_sni: BTreeSet<Vec<String>> = BTreeSet::new();
        for s in &services.tls {
            let cluster = outbound_cluster_name(port, "", &s.hostname);
            let mut destinations = vec![(cluster.clone(), 1)];
            let mut names = server_names([s.hostname.to_ascii_lowercase()]);
            if let Some(vs) = scope.virtual_service_for(&s.hostname.to_ascii_lowercase()) {
                let routes = tls_route_destinations(push, proxy, &scope, vs, port, MESH_GATEWAY, &mut report);
                if let Some((sni, d)) =
                    routes.into_iter().find(|(sni, _)| sni.iter().any(|h| host::matches(h, &s.hostname)))
                {
                    names = server_names(sni);
                    destinations = d;
                }
            }
            if !seen_sni.insert(names.clone()) {
                report.push(
                    Severity::Dropped,
                    None,
                    "",
                    &name,
                    format!("SNI {names:?} already routed on this port; {} left out", s.hostname),
                );
                continue;
            }
            let m = FilterChainMatch {
                server_names: names,
                transport_protocol: "tls".to_string(),
                ..Default::default()
            };
            chains.push(chain(&cluster, Some(m), vec![tcp_proxy_filter(&cluster, &destinations)]));
        }
        let default_chain = if !services.http.is_empty() {
            for s in &services.tcp {
                report.push(
                    Severity::Dropped,
                    None,
                    "",
                    &name,
                    format!(
                        "TCP service {} shares port {port} with HTTP services and has no VIP; not reachable",
                        s.hostname
                    ),
                );
            }
            let hcm = http_connection_manager(
                &format!("outbound_{bind}_{port}"),
                Routes::Rds(port.to_string()),
                FilterTarget::Envoy,
                false,
            );
            Some(chain(&format!("{bind}_{port}"), None, vec![hcm_filter(&hcm)]))
        } else if let Some((first, rest)) = services.tcp.split_first() {
            for s in rest {
                report.push(
                    Severity::Dropped,
                    None,
                    "",
                    &name,
                    format!(
                        "TCP port {port} already goes to {}; {} has no VIP and is not reachable",
                        first.hostname, s.hostname
                    ),
                );
            }
            Some(tcp_chain(push, proxy, &scope, first, port, &mut report))
        } else {
            None
        };
        chains.extend(default_chain);
        if !chains.is_empty() {
            let mut l = listener(name, bind, port, EnvoyDirection::Outbound, chains);
            if !services.tls.is_empty() {
                l.listener_filters.push(tls_inspector());
            }
            if capture {
                l.bind_to_port = Some(boolv(false));
            }
            out.push(l);
        }
        for (s, vip) in &services.tcp_vip {
            let c = tcp_chain(push, proxy, &scope, s, port, &mut report);
            let mut l = listener(listener_name(vip, port), vip, port, EnvoyDirection::Outbound, vec![c]);
            if capture {
                l.bind_to_port = Some(boolv(false));
            }
            out.push(l);
        }
    }
    out
}

fn tcp_chain(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
    s: &Service,
    port: u32,
    report: &mut Report<'_>,
) -> FilterChain {
    let cluster = outbound_cluster_name(port, "", &s.hostname);
    let destinations = scope
        .virtual_service_for(&s.hostname.to_ascii_lowercase())
        .and_then(|vs| tcp_route_destinations(push, proxy, scope, vs, port, MESH_GATEWAY, report))
        .unwrap_or_else(|| vec![(cluster.clone(), 1)]);
    chain(&cluster, None, vec![tcp_proxy_filter(&cluster, &destinations)])
}

fn virtual_outbound(push: &Snapshot, proxy: &ProxyContext) -> Listener {
    let scope = push.sidecar_scope(proxy);
    let target = match scope.outbound_traffic_policy {
        OutboundTrafficPolicy::AllowAny => PASSTHROUGH_CLUSTER,
        OutboundTrafficPolicy::RegistryOnly => BLACK_HOLE_CLUSTER,
    };
    let mut l = listener(
        VIRTUAL_OUTBOUND_LISTENER.to_string(),
        &proxy.bind_address,
        VIRTUAL_OUTBOUND_PORT,
        EnvoyDirection::Outbound,
        vec![chain(
            "PassthroughFilterChain",
            None,
            vec![tcp_proxy_filter(target, &[(target.to_string(), 1)])],
        )],
    );
    l.use_original_dst = Some(boolv(true));
    l
}

fn sidecar_listeners(push: &Snapshot, proxy: &ProxyContext, findings: &mut Vec<Finding>) -> Vec<Listener> {
    let mut out = sidecar_outbound(push, proxy, findings);
    let scope = push.sidecar_scope(proxy);
    let security = crate::policy::security_filters(push, proxy);
    findings.extend(security.findings.iter().cloned());
    out.extend(crate::inbound::ingress_listeners(push, proxy, &scope, &security));
    if proxy.interception_mode != InterceptionMode::None {
        out.push(virtual_outbound(push, proxy));
        out.push(crate::inbound::virtual_inbound(push, proxy, &scope, &security));
    }
    out
}

/// A downstream TLS transport socket for a gateway server, or `None` (reported) when it cannot be
/// built.
fn server_tls(
    server: &GatewayServer,
    alpn: &[&str],
    listener: &str,
    report: &mut Report<'_>,
) -> Option<DownstreamTlsContext> {
    let key = server.gateway.config.key();
    let Some(settings) = server.server().tls.as_ref() else {
        report.push(
            Severity::Dropped,
            Some(&key),
            &server.path(),
            listener,
            "TLS server without tls settings; left out",
        );
        return None;
    };
    let translated = tls::downstream(settings, alpn);
    for (field, message) in translated.unsupported {
        let severity = if translated.context.is_some() { Severity::Unsupported } else { Severity::Dropped };
        report.push(severity, Some(&key), &format!("{}.tls.{field}", server.path()), listener, message);
    }
    translated.context
}

fn gateway_listeners(push: &Snapshot, proxy: &ProxyContext, findings: &mut Vec<Finding>) -> Vec<Listener> {
    let shared = push.gateway_servers(proxy);
    findings.extend(shared.1.iter().cloned());
    let merged = &shared.0;
    let scope = push.sidecar_scope(proxy);
    let security = crate::policy::security_filters(push, proxy);
    findings.extend(security.findings.iter().cloned());
    let mut report = Report { findings };
    let bind = proxy.bind_address.as_str();
    let mut out = Vec::new();
    for (&port, m) in merged {
        let name = listener_name(bind, port);
        let stat_prefix = format!("outbound_{bind}_{port}");
        let mut chains: Vec<FilterChain> = Vec::new();
        let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
        let mut add = |chains: &mut Vec<FilterChain>,
                       report: &mut Report<'_>,
                       server: &GatewayServer,
                       c: FilterChain| {
            let names = c.filter_chain_match.as_ref().map(|m| m.server_names.clone()).unwrap_or_default();
            if seen.insert(names.clone()) {
                chains.push(c);
            } else {
                report.push(
                    Severity::Dropped,
                    Some(&server.gateway.config.key()),
                    &server.path(),
                    &name,
                    format!("another server on port {port} already matches SNI {names:?}; left out"),
                );
            }
        };
        match m.kind {
            PortKind::Http => {
                let mut hcm = http_connection_manager(
                    &stat_prefix,
                    Routes::Rds(crate::naming::gateway_http_route_name(port)),
                    FilterTarget::Envoy,
                    true,
                );
                security.apply_http(&mut hcm);
                chains.push(chain(&name, None, vec![hcm_filter(&hcm)]));
            }
            PortKind::Tls | PortKind::Tcp => {
                for server in &m.servers {
                    let sni = server_names(server.hosts().into_iter().map(|(_, h)| h));
                    match server.kind {
                        ServerKind::HttpsTerminated => {
                            let Some(ctx) = server_tls(server, &["h2", "http/1.1"], &name, &mut report)
                            else {
                                continue;
                            };
                            let route = server.route_name(port);
                            let mut hcm = http_connection_manager(
                                &stat_prefix,
                                Routes::Rds(route.clone()),
                                FilterTarget::Envoy,
                                true,
                            );
                            security.apply_http(&mut hcm);
                            let mut c = chain(
                                &route,
                                Some(FilterChainMatch { server_names: sni, ..Default::default() }),
                                vec![hcm_filter(&hcm)],
                            );
                            c.transport_socket = Some(transport_socket(TLS_TRANSPORT_SOCKET, &ctx));
                            add(&mut chains, &mut report, server, c);
                        }
                        ServerKind::TlsPassthrough => {
                            let auto = server.server().tls.as_ref().is_some_and(|t| {
                                t.mode
                                    == api::networking::gateway::server_tls_settings::TlSmode::AutoPassthrough
                                        as i32
                            });
                            if auto {
                                report.push(
                                    Severity::Unsupported,
                                    Some(&server.gateway.config.key()),
                                    &format!("{}.tls.mode", server.path()),
                                    &name,
                                    "AUTO_PASSTHROUGH (SNI-encoded cluster names) is not translated; server left out",
                                );
                                continue;
                            }
                            for vs in
                                push.virtual_services_for_gateway(&proxy.namespace, &server.gateway.name)
                            {
                                if server.intersect(&vs).is_empty() {
                                    continue;
                                }
                                for (sni_hosts, destinations) in tls_route_destinations(
                                    push,
                                    proxy,
                                    &scope,
                                    &vs,
                                    port,
                                    &server.gateway.name,
                                    &mut report,
                                ) {
                                    let names = server_names(sni_hosts);
                                    let cname = format!("{}_{}", server.gateway.name, names.join(","));
                                    let c = chain(
                                        &cname,
                                        Some(FilterChainMatch { server_names: names, ..Default::default() }),
                                        security.tcp_chain(tcp_proxy_filter(
                                            stat_of(&destinations),
                                            &destinations,
                                        )),
                                    );
                                    add(&mut chains, &mut report, server, c);
                                }
                            }
                        }
                        ServerKind::TlsTerminatedTcp | ServerKind::Tcp => {
                            let ctx = if server.kind == ServerKind::TlsTerminatedTcp {
                                match server_tls(server, &[], &name, &mut report) {
                                    Some(c) => Some(c),
                                    None => continue,
                                }
                            } else {
                                None
                            };
                            let destinations = push
                                .virtual_services_for_gateway(&proxy.namespace, &server.gateway.name)
                                .iter()
                                .filter(|vs| !server.intersect(vs).is_empty())
                                .find_map(|vs| {
                                    tcp_route_destinations(
                                        push,
                                        proxy,
                                        &scope,
                                        vs,
                                        port,
                                        &server.gateway.name,
                                        &mut report,
                                    )
                                });
                            let Some(destinations) = destinations else {
                                report.push(
                                    Severity::Dropped,
                                    Some(&server.gateway.config.key()),
                                    &server.path(),
                                    &name,
                                    "no VirtualService TCP route for this server; nothing to serve",
                                );
                                continue;
                            };
                            let m = ctx
                                .is_some()
                                .then(|| FilterChainMatch { server_names: sni, ..Default::default() });
                            let mut c = chain(
                                stat_of(&destinations),
                                m,
                                security.tcp_chain(tcp_proxy_filter(stat_of(&destinations), &destinations)),
                            );
                            if let Some(ctx) = ctx {
                                c.transport_socket = Some(transport_socket(TLS_TRANSPORT_SOCKET, &ctx));
                            }
                            add(&mut chains, &mut report, server, c);
                        }
                        ServerKind::Http => {}
                    }
                }
            }
        }
        if chains.is_empty() {
            continue;
        }
        let mut l = listener(name, bind, port, EnvoyDirection::Outbound, chains);
        if m.kind == PortKind::Tls {
            l.listener_filters.push(tls_inspector());
        }
        out.push(l);
    }
    out
}

/// Istio's `tryFindFQDN` for proxyless names: `name` → `name.<ns>.svc.<suffix>`, `name.ns` →
/// `name.ns.svc.<suffix>`, `name.ns.svc` → `name.ns.svc.<suffix>`.
fn grpc_fqdn(name: &str, proxy: &ProxyContext, suffix: &str) -> Option<String> {
    let dots = name.matches('.').count();
    if dots == 0 {
        return Some(format!("{name}.{}.svc.{suffix}", proxy.namespace));
    }
    if dots == 1 {
        return Some(format!("{name}.svc.{suffix}"));
    }
    if name.ends_with(".svc") {
        return Some(format!("{name}.{suffix}"));
    }
    None
}

fn api_listener(name: String, service: &Service, port: u32) -> Listener {
    let hcm = http_connection_manager(
        "",
        Routes::Rds(outbound_cluster_name(port, "", &service.hostname)),
        FilterTarget::GrpcClient,
        false,
    );
    Listener {
        name,
        address: Some(address(service.default_address(), port)),
        api_listener: Some(ApiListener { api_listener: Some(any(&hcm)) }),
        ..Default::default()
    }
}

fn grpc_server_listener(proxy: &ProxyContext, name: &str) -> Option<Listener> {
    let addr = name.strip_prefix(GRPC_INBOUND_LISTENER_PREFIX)?;
    let (ip, port) = addr.rsplit_once(':')?;
    let ip = ip.trim_start_matches('[').trim_end_matches(']');
    let port: u32 = port.parse().ok()?;
    proxy.service_instances.iter().find(|i| i.endpoint.endpoint_port == port)?;
    let rc = RouteConfiguration {
        name: "inbound".to_string(),
        virtual_hosts: vec![VirtualHost {
            name: format!("inbound|http|{port}"),
            domains: vec!["*".to_string()],
            routes: vec![Route {
                r#match: Some(RouteMatch {
                    path_specifier: Some(PathSpecifier::Prefix("/".to_string())),
                    ..Default::default()
                }),
                action: Some(Action::NonForwardingAction(NonForwardingAction {})),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let hcm = http_connection_manager("", Routes::Inline(Box::new(rc)), FilterTarget::GrpcServer, false);
    Some(Listener {
        name: name.to_string(),
        address: Some(address(ip, port)),
        filter_chains: vec![chain("inbound-plaintext", None, vec![hcm_filter(&hcm)])],
        ..Default::default()
    })
}

fn grpc_listeners(push: &Snapshot, proxy: &ProxyContext, names: &[String]) -> Vec<Listener> {
    let scope = push.sidecar_scope(proxy);
    let mut out = Vec::new();
    if names.is_empty() {
        for s in scope.services() {
            for p in &s.ports {
                out.push(api_listener(host::domain_name(&s.hostname, p.port), s, p.port));
            }
        }
        return out;
    }
    let suffix = &push.mesh().domain_suffix;
    for name in names {
        if name.starts_with(GRPC_INBOUND_LISTENER_PREFIX) {
            out.extend(grpc_server_listener(proxy, name));
            continue;
        }
        let (requested_host, port) = match name.rsplit_once(':') {
            Some((h, p)) if p.parse::<u32>().is_ok() => (h, p.parse::<u32>().ok()),
            _ => (name.as_str(), None),
        };
        let lower = requested_host.to_ascii_lowercase();
        let service = scope
            .service(&lower)
            .or_else(|| grpc_fqdn(&lower, proxy, suffix).and_then(|f| scope.service(&f)));
        let Some(service) = service else { continue };
        for p in &service.ports {
            if port.is_some_and(|want| want != p.port) {
                continue;
            }
            let listener_name = match port {
                Some(_) => name.clone(),
                None => host::domain_name(requested_host, p.port),
            };
            out.push(api_listener(listener_name, service, p.port));
        }
    }
    out
}

/// LDS for `proxy`, sorted by name; with `names` non-empty, only those (proxyless gRPC asks by name
/// and gets listeners named exactly as asked).
pub fn generate_listeners(push: &Snapshot, proxy: &ProxyContext, names: &[String]) -> Generated<Listener> {
    let mut findings = Vec::new();
    let mut listeners = if proxy.proxyless_grpc {
        grpc_listeners(push, proxy, names)
    } else {
        let mut all = match proxy.kind {
            ProxyKind::Sidecar => sidecar_listeners(push, proxy, &mut findings),
            ProxyKind::Router => gateway_listeners(push, proxy, &mut findings),
        };
        if !names.is_empty() {
            all.retain(|l| names.iter().any(|n| n == &l.name));
        }
        all
    };
    listeners.sort_by(|a, b| a.name.cmp(&b.name));
    let before = listeners.len();
    listeners.dedup_by(|a, b| a.name == b.name);
    if before != listeners.len() {
        findings.push(Finding {
            severity: Severity::Dropped,
            config: None,
            path: String::new(),
            resource: String::new(),
            message: format!(
                "{} listeners with duplicate names (same VIP and port); the first kept",
                before - listeners.len()
            ),
        });
    }
    Generated::new(listeners, findings)
}
