//! LDS: listeners (Istio's `pilot/pkg/networking/core/listener*.go`, `gateway.go`,
//! `grpcgen/lds.go`).
//!
//! | proxy | listeners |
//! |---|---|
//! | sidecar | HTTP ports (HTTP, HTTP2, gRPC, HTTP_PROXY) share `BIND_PORT` (`0.0.0.0_9080`) → connection manager with RDS `PORT`. Every other port (TCP, TLS, HTTPS, Mongo, Redis, MySQL, unknown) is placed by the service's address ([`placements`], Istio's rule): a VIP (a Kubernetes ClusterIP of the proxy's IP family, a ServiceEntry's first address) → a listener of its own `VIP_PORT` (`10.0.0.1_443`, `240.240.0.7_7070`) whose chain matches every connection; a CIDR → `BIND_PORT` with a `prefix_ranges` match; no address → `BIND_PORT`, TLS/HTTPS chains matching the hostname as SNI; `resolution: NONE` / headless TCP ports without address → one `ENDPOINTIP_PORT` listener per endpoint. Chains go to a TCP proxy to the port's cluster (VirtualService TCP/TLS routes when bound to `mesh`); of two chains matching the same connections the first service keeps it (reported). Ports without a declared protocol are placed like TCP ports and sniffed (Istio's protocol detection): Envoy's HTTP inspector sends plaintext HTTP/1.1 and h2c to a connection manager (RDS `PORT` on `BIND_PORT`, `HOST:PORT` on a listener of its own) and everything else to the TCP chains; HTTP and TCP services sharing `BIND_PORT` are sniffed the same way. Without capture (`INTERCEPTION_MODE=NONE`) every non-HTTP port stays on `BIND_PORT` too. With interception (default) these do not bind (`bind_to_port: false`) and `virtualOutbound` (15001, original destination, unknown traffic → `PassthroughCluster`/`BlackHoleCluster`) and `virtualInbound` (15006, the chains of [`crate::inbound`] per target port of the proxy's instances, or per Sidecar `ingress` entry → `inbound\|PORT\|\|`) capture the traffic; with `INTERCEPTION_MODE=NONE` they bind their ports and there are no virtual listeners (as Istio); Sidecar `ingress` entries then bind `BIND_PORT` listeners of their own. |
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
    extensions::{
        filters::network::tcp_proxy::v3::tcp_proxy::TunnelingConfig,
        transport_sockets::tls::v3::DownstreamTlsContext,
    },
};
use model::{Protocol, service::Service};

use crate::{
    Snapshot,
    access_log::{AccessLogs, access_logs},
    built::Built,
    cache::{Encoded, EncodedResource, SecurityKey},
    convert::{address, any, boolv, std_duration, transport_socket},
    extension::PhaseFilters,
    filters::{
        FilterTarget, Routes, TLS_TRANSPORT_SOCKET, TcpProxyPolicy, hcm_filter, http_connection_manager,
        http_inspector, tcp_proxy_filter, tcp_proxy_filter_with, tls_inspector,
    },
    gateway::{GatewayServer, PortKind, ServerKind},
    naming::{
        BLACK_HOLE_CLUSTER, GRPC_INBOUND_LISTENER_PREFIX, MESH_GATEWAY, VIRTUAL_INBOUND_LISTENER,
        VIRTUAL_INBOUND_PORT, VIRTUAL_OUTBOUND_LISTENER, VIRTUAL_OUTBOUND_PORT, allow_any_cluster,
        listener_name, outbound_cluster_name, parse_cluster_name,
    },
    policy::SecurityFilters,
    tls,
};
use model::{
    Finding, Severity, host,
    push::{
        Imports, IndexedVirtualService, InterceptionMode, OutboundTrafficPolicy, ProxyContext, ProxyKind,
        SidecarScope, extensions::ListenerClass, telemetry::Direction,
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
    /// No declared protocol: placed as TCP, sniffed for HTTP on the listener (Istio's
    /// `ListenerProtocolAuto`).
    Auto,
}

fn carriage(protocol: Protocol) -> Option<Carriage> {
    match protocol {
        Protocol::Udp => None,
        p if p.is_http() || p == Protocol::HttpProxy => Some(Carriage::Http),
        Protocol::Https | Protocol::Tls => Some(Carriage::Tls),
        Protocol::Unsupported => Some(Carriage::Auto),
        _ => Some(Carriage::Tcp),
    }
}

/// The application protocols Envoy's HTTP inspector reports for plaintext HTTP/1.1 and HTTP/2 (prior
/// knowledge), which a sniffed listener's HTTP filter chain matches (Istio's `plaintextHTTPALPNs`
/// without `PILOT_HTTP10`).
pub const PLAINTEXT_HTTP_ALPNS: [&str; 2] = ["http/1.1", "h2c"];

/// Where one service port's outbound listener goes (Istio's listener address selection in
/// `buildSidecarOutboundListeners` / `buildSidecarOutboundListener`, `pilot/pkg/networking/core/listener.go`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The address the listener binds: `None` is the proxy's bind address (`0.0.0.0`, or `127.0.0.1`
    /// without traffic capture); `Some(ip)` a listener of its own (`IP_PORT`: a service VIP, or an
    /// endpoint of a headless service).
    pub bind: Option<String>,
    /// A destination CIDR the filter chain matches (`prefix_ranges`): the service's address is a range,
    /// so the listener stays on the wildcard.
    pub cidr: Option<String>,
    /// TLS/HTTPS ports without a TLS route: the chain matches the service's hostname as SNI (only on a
    /// shared wildcard listener or behind a CIDR; a listener of its own needs no SNI).
    pub sni: bool,
}

/// The address of `service` for a proxy with `proxy_ips` (Istio's `Service.GetAddressForProxy`): a
/// Kubernetes Service's first cluster IP of the proxy's IP family (a proxy without IPs counts as IPv4),
/// else the first address, else [`model::service::UNSPECIFIED_IP`].
///
/// For a ServiceEntry this is its first address; [`placements`] places every address (Istio makes one
/// service per address).
pub fn service_address<'a>(service: &'a Service, proxy_ips: &[String]) -> &'a str {
    if service.registry == model::service::ProviderId::Kubernetes {
        let v6_only = !proxy_ips.is_empty() && proxy_ips.iter().all(|ip| ip.contains(':'));
        if let Some(a) = service.addresses.iter().find(|a| a.contains(':') == v6_only) {
            return a;
        }
    }
    service.default_address()
}

/// Where the outbound listeners of port `port` of `service` go for a sidecar (Istio's rule, catch-all
/// egress listener, no Sidecar `bind`):
///
/// - HTTP ports (HTTP, HTTP2, gRPC, gRPC-Web, HTTP_PROXY) always share the proxy's wildcard listener; the
///   caller places them without this function.
/// - Other ports (TCP, TLS, HTTPS, Mongo, Redis, MySQL, and unknown protocols): without capture
///   (`capture` false: `INTERCEPTION_MODE: NONE`) every port goes to the proxy's bind address, with SNI
///   only when the service's address is a CIDR. With capture, the service's address
///   ([`service_address`]) decides: an IP → a listener of its own on it, no SNI; a CIDR → the wildcard
///   with a destination CIDR match and SNI; no address (`0.0.0.0`) → the wildcard with SNI, except for
///   `resolution: NONE` (passthrough, Kubernetes headless) ports, which get one listener per endpoint IP
///   (not the proxy's own first IP; endpoints with a non-IP address are skipped). A non-Kubernetes
///   service of that kind with no endpoints and no workload selector falls back to the wildcard; a
///   Kubernetes one with no endpoints gets no listener.
pub fn placements(
    service: &Service,
    port: &model::service::Port,
    capture: bool,
    proxy_ips: &[String],
    endpoints: &[Arc<model::service::Endpoint>],
) -> Vec<Placement> {
    // A ServiceEntry with several addresses is one service per address in Istio (`convertServices`),
    // each placed on its own: one listener per IP (IPv6 ones too, whatever the proxy's family), a CIDR
    // match per range (as the pinned istiod answers, docs/CONFORMANCE.md).
    if capture && service.registry != model::service::ProviderId::Kubernetes && service.addresses.len() > 1 {
        let mut out: Vec<Placement> = Vec::new();
        for address in &service.addresses {
            for p in placements_at(address, service, port, capture, proxy_ips, endpoints) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        return out;
    }
    placements_at(service_address(service, proxy_ips), service, port, capture, proxy_ips, endpoints)
}

/// [`placements`] for one `address` of `service`.
fn placements_at(
    address: &str,
    service: &Service,
    port: &model::service::Port,
    capture: bool,
    proxy_ips: &[String],
    endpoints: &[Arc<model::service::Endpoint>],
) -> Vec<Placement> {
    let is_cidr = address.contains('/') && crate::authz::matcher::cidr_range(address).is_ok();
    if !capture {
        return vec![Placement { bind: None, cidr: None, sni: is_cidr }];
    }
    if is_cidr {
        return vec![Placement { bind: None, cidr: Some(address.to_string()), sni: true }];
    }
    let unspecified = address == model::service::UNSPECIFIED_IP;
    if !unspecified && crate::convert::is_ip(address) {
        return vec![Placement { bind: Some(address.to_string()), cidr: None, sni: false }];
    }
    // No address (or, never from validated config, one that is neither an IP nor a CIDR).
    let wildcard = Placement { bind: None, cidr: None, sni: true };
    let headless = unspecified
        && service.resolution == model::service::Resolution::Passthrough
        && (port.protocol.is_tcp() || port.protocol.is_unsupported());
    if !headless {
        return vec![wildcard];
    }
    if service.registry != model::service::ProviderId::Kubernetes
        && endpoints.is_empty()
        && service.label_selector.is_none()
    {
        return vec![wildcard];
    }
    let own = proxy_ips.first().map(String::as_str);
    let mut out: Vec<Placement> = Vec::new();
    for e in endpoints {
        if e.addresses.is_empty() || !e.addresses.iter().all(|a| crate::convert::is_ip(a)) {
            continue;
        }
        if Some(e.first_address()) == own {
            continue;
        }
        let p = Placement { bind: Some(e.first_address().to_string()), cidr: None, sni: false };
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// A non-HTTP service port placed on one listener.
struct L4Service {
    service: Arc<Service>,
    tls: bool,
    /// The port declares no protocol: its TCP chain shares the listener with a sniffed HTTP chain.
    auto: bool,
    cidr: Option<String>,
    sni: bool,
}

/// What one outbound listener carries.
#[derive(Default)]
struct OutboundListener {
    http: Vec<Arc<Service>>,
    l4: Vec<L4Service>,
    /// Envoy binds the port itself (`bind_to_port` unset); else only `virtualOutbound` reaches it.
    bind_to_port: bool,
    /// Made for an egress listener with a port: the catch-all adds nothing to it (Istio's `locked`).
    locked: bool,
    /// Index of the Sidecar egress listener that made it ([`SidecarScope::egress`]): its
    /// VirtualServices route the TCP and TLS chains.
    egress: usize,
}

impl OutboundListener {
    /// `true` when the listener must tell HTTP from other traffic with Envoy's HTTP inspector (Istio's
    /// protocol sniffing): a port without a declared protocol, or HTTP services sharing the port with
    /// TCP/TLS ones (Istio's `HTTPOverTCP` / `TCPOverHTTP` / `AutoOverTCP` merges).
    fn sniffed(&self) -> bool {
        self.l4.iter().any(|e| e.auto) || (!self.http.is_empty() && !self.l4.is_empty())
    }

    /// The RDS name of the listener's HTTP filter chain (Istio's `buildSidecarOutboundHTTPListenerOpts`),
    /// `None` without one: `PORT`, shared by every service of the port on the proxy's bind address (and
    /// by a Sidecar egress listener's `bind` address); `HOST:PORT` for a port without a declared
    /// protocol on a listener of its own (a VIP, an endpoint address or an egress `bind`), whose route
    /// table holds that service only.
    fn route_name(&self, port: u32, bind: &str, wildcard: &str) -> Option<String> {
        let auto = self.l4.iter().find(|e| e.auto);
        match auto {
            Some(e) if self.http.is_empty() && bind != wildcard => {
                Some(format!("{}:{port}", e.service.hostname))
            }
            Some(_) => Some(port.to_string()),
            None if !self.http.is_empty() => Some(port.to_string()),
            None => None,
        }
    }
}

/// The loopback address a listener that binds its port without a `bind` takes (Istio's
/// `actualLocalHosts`): `::1` for an IPv6-only proxy, else `127.0.0.1`; without traffic capture the
/// proxy's own bind address (already loopback).
fn loopback(proxy: &ProxyContext) -> String {
    if proxy.interception_mode == InterceptionMode::None {
        return proxy.bind_address.clone();
    }
    if !proxy.ips.is_empty() && proxy.ips.iter().all(|ip| ip.contains(':')) {
        "::1".to_string()
    } else {
        "127.0.0.1".to_string()
    }
}

/// The sidecar's outbound listeners by `(port, bind address)` (Istio's
/// `buildSidecarOutboundListeners`): the Sidecar's egress listeners in order. One with a `port` gets
/// a listener on that port for its own hosts, of the port's declared protocol, on its `bind` (or,
/// binding its port, loopback; else each service's address as the catch-all places it); the
/// catch-all then adds every imported service port except on the `(port, bind)` pairs already made.
fn plan(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
) -> BTreeMap<(u32, String), OutboundListener> {
    let proxy_capture = proxy.interception_mode != InterceptionMode::None;
    let mut out: BTreeMap<(u32, String), OutboundListener> = BTreeMap::new();
    for (index, egress) in scope.egress.iter().enumerate() {
        if egress.port.as_ref().is_some_and(|p| !p.is_built()) {
            continue;
        }
        let bind_to_port = egress.bind_to_port(proxy_capture);
        // An explicit listener address: the entry's `bind`, else loopback when it binds its port;
        // `None` places each service as the proxy's catch-all does.
        let explicit = if !egress.bind.is_empty() {
            Some(egress.bind.clone())
        } else if bind_to_port {
            Some(loopback(proxy))
        } else {
            None
        };
        let default_bind = explicit.clone().unwrap_or_else(|| proxy.bind_address.clone());
        // The catch-all adds nothing to listeners made by the entries with a port.
        if egress.port.is_none() {
            out.values_mut().for_each(|l| l.locked = true);
        }
        let mut add = |key: (u32, String), put: &mut dyn FnMut(&mut OutboundListener)| {
            // Istio's `conflictWithReservedListener`: nothing on the wildcard at the virtual
            // listeners' ports.
            if proxy_capture
                && key.1 == proxy.bind_address
                && (key.0 == VIRTUAL_OUTBOUND_PORT || key.0 == VIRTUAL_INBOUND_PORT)
            {
                return;
            }
            let l = out.entry(key).or_insert_with(|| OutboundListener {
                bind_to_port,
                egress: index,
                ..OutboundListener::default()
            });
            if !l.locked {
                put(l);
            }
        };
        // Aliases get no listener (Istio's `buildSidecarOutboundListener`); their names reach the
        // concrete service's chains and virtual hosts.
        for s in egress.imports.services().iter().filter(|s| !s.is_alias()) {
            let ports: Vec<model::service::Port> = match &egress.port {
                Some(p) => {
                    vec![model::service::Port { name: p.name.clone(), port: p.number, protocol: p.protocol }]
                }
                None => s.ports.clone(),
            };
            for p in &ports {
                let Some(c) = carriage(p.protocol) else { continue };
                if c == Carriage::Http {
                    add((p.port, default_bind.clone()), &mut |l| l.http.push(s.clone()));
                    continue;
                }
                let endpoints = push.endpoints(&s.hostname, &s.namespace, p.port);
                let capture = proxy_capture && explicit.is_none();
                for placement in placements(s, p, capture, &proxy.ips, endpoints) {
                    let key = (p.port, placement.bind.unwrap_or_else(|| default_bind.clone()));
                    add(key, &mut |l| {
                        l.l4.push(L4Service {
                            service: s.clone(),
                            tls: c == Carriage::Tls,
                            auto: c == Carriage::Auto,
                            cidr: placement.cidr.clone(),
                            sni: placement.sni,
                        })
                    });
                }
            }
        }
    }
    out.retain(|_, l| !l.http.is_empty() || !l.l4.is_empty());
    out
}

/// The RDS names of a sidecar's outbound HTTP connection managers, sorted: `PORT` for the ports with
/// HTTP services or sniffed on the proxy's bind address, `HOST:PORT` for sniffed ports on listeners of
/// their own (see [`OutboundListener::route_name`]).
pub fn sidecar_route_names(push: &Snapshot, proxy: &ProxyContext) -> Vec<String> {
    let scope = push.sidecar_scope(proxy);
    let names: BTreeSet<String> = plan(push, proxy, &scope)
        .iter()
        .filter_map(|((port, bind), l)| l.route_name(*port, bind, &proxy.bind_address))
        .collect();
    names.into_iter().collect()
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

/// The cluster a layer-4 route destination goes to: the service the proxy sees (an alias' external
/// name, as Istio's `GetDestinationCluster`), the destination port (or the service's only port, or
/// `port`).
fn l4_cluster(scope: &SidecarScope, suffix: &str, vs_ns: &str, d: &Destination, port: u32) -> Option<String> {
    let hostname = host::resolve_short_name(&d.host.to_ascii_lowercase(), vs_ns, suffix);
    let service = scope.service(&hostname)?;
    let port = match &d.port {
        Some(p) if p.number != 0 => p.number,
        _ if service.ports.len() == 1 => service.ports.first().map_or(port, |p| p.port),
        _ => port,
    };
    Some(outbound_cluster_name(port, &d.subset, service.destination_host()))
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

/// A filter chain match on SNI names and a destination CIDR; `None` when neither is set (the chain
/// matches every connection).
fn l4_match(names: &[String], cidr: Option<&str>) -> Option<FilterChainMatch> {
    let prefix_ranges: Vec<_> =
        cidr.and_then(|c| crate::authz::matcher::cidr_range(c).ok()).into_iter().collect();
    if names.is_empty() && prefix_ranges.is_empty() {
        return None;
    }
    Some(FilterChainMatch {
        server_names: names.to_vec(),
        transport_protocol: if names.is_empty() { String::new() } else { "tls".to_string() },
        prefix_ranges,
        ..Default::default()
    })
}

fn sidecar_outbound(
    push: &Snapshot,
    proxy: &ProxyContext,
    logs: &AccessLogs,
    findings: &mut Vec<Finding>,
) -> Vec<Listener> {
    let scope = push.sidecar_scope(proxy);
    let extensions = push.extensions(proxy);
    let mut report = Report { findings };
    let mut out = Vec::new();
    for ((port, bind), services) in plan(push, proxy, &scope) {
        let imports = scope.egress.get(services.egress).map_or(scope.imports(), |e| &*e.imports);
        let name = listener_name(&bind, port);
        let sniffed = services.sniffed();
        // Filter chains by what they match (SNI names, destination CIDR) → the service that owns it; the
        // match-all chain (no names, no CIDR) becomes the default chain below.
        let mut owners: BTreeMap<(Vec<String>, Option<String>), String> = BTreeMap::new();
        let mut chains = Vec::new();
        let mut match_all = None;
        if let Some(rds) = services.route_name(port, &bind, &proxy.bind_address) {
            let mut hcm = http_connection_manager(
                &format!("outbound_{bind}_{port}"),
                Routes::Rds(rds),
                FilterTarget::Envoy,
                false,
            );
            PhaseFilters::for_listener(&extensions, ListenerClass::SidecarOutbound, port).apply(&mut hcm);
            logs.apply_http(&mut hcm);
            let http = vec![hcm_filter(&hcm)];
            if sniffed {
                // Envoy's HTTP inspector tells plaintext HTTP/1.1 and h2c from other bytes; everything
                // else falls to the TCP chains (Istio's sniffed outbound listener).
                let m = FilterChainMatch {
                    application_protocols: PLAINTEXT_HTTP_ALPNS.map(String::from).to_vec(),
                    transport_protocol: crate::mtls::RAW_BUFFER_TRANSPORT_PROTOCOL.to_string(),
                    ..Default::default()
                };
                chains.push(chain(&format!("{bind}_{port}"), Some(m), http));
            } else {
                owners.insert((Vec::new(), None), "HTTP services".to_string());
                match_all = Some(chain(&format!("{bind}_{port}"), None, http));
            }
        }
        for e in &services.l4 {
            let s = &e.service;
            let cluster = outbound_cluster_name(port, "", &s.hostname);
            let (names, c) = if e.tls {
                let mut destinations = vec![(cluster.clone(), 1)];
                let mut names =
                    if e.sni { server_names(sni_hosts(s, &proxy.dns_domain)) } else { Vec::new() };
                if let Some(vs) = imports.virtual_service_for(&s.hostname.to_ascii_lowercase()) {
                    let routes =
                        tls_route_destinations(push, proxy, &scope, vs, port, MESH_GATEWAY, &mut report);
                    if let Some((sni, d)) =
                        routes.into_iter().find(|(sni, _)| sni.iter().any(|h| host::matches(h, &s.hostname)))
                    {
                        names = server_names(sni);
                        destinations = d;
                    }
                }
                let m = l4_match(&names, e.cidr.as_deref());
                let policy = tcp_proxy_policy(push, proxy, &scope, &destinations);
                let proxy_filter = tcp_proxy_filter_with(&cluster, &destinations, &logs.filters, policy);
                (names, chain(&cluster, m, logs.tcp_chain(false, &[], proxy_filter)))
            } else {
                let m = l4_match(&[], e.cidr.as_deref());
                let mut c = tcp_chain(push, proxy, (&scope, imports), s, port, logs, &mut report);
                c.filter_chain_match = m;
                (Vec::new(), c)
            };
            let key = (names, e.cidr.clone());
            if let Some(owner) = owners.get(&key) {
                let message = match (&key.0[..], &key.1) {
                    ([], None) => format!(
                        "every connection to {name} already goes to {owner}; {} has no VIP of its own and is left out",
                        s.hostname
                    ),
                    ([], Some(cidr)) => {
                        format!("destination {cidr} already goes to {owner}; {} left out", s.hostname)
                    }
                    (sni, _) => {
                        format!("SNI {sni:?} already routed on this listener; {} left out", s.hostname)
                    }
                };
                report.push(Severity::Dropped, None, "", &name, message);
                continue;
            }
            let matches_all = key.0.is_empty() && key.1.is_none();
            owners.insert(key, s.hostname.clone());
            if matches_all {
                match_all = Some(c);
            } else {
                chains.push(c);
            }
        }
        let needs_tls_inspector =
            chains.iter().any(|c| c.filter_chain_match.as_ref().is_some_and(|m| !m.server_names.is_empty()));
        if chains.is_empty() && match_all.is_none() {
            continue;
        }
        // The match-all chain is the listener's default when other chains match on something (Istio's
        // `buildListenerFromEntry`, istio/istio#26079): Envoy narrows the candidates one criterion at a
        // time and never steps back, so a connection that enters the `raw_buffer` chains and then
        // carries no HTTP application protocol would match nothing, even with a match-all chain in
        // the list.
        let default_chain = if chains.is_empty() {
            chains.extend(match_all);
            None
        } else {
            match_all
        };
        let mut l = listener(name, &bind, port, EnvoyDirection::Outbound, chains);
        l.default_filter_chain = default_chain;
        if needs_tls_inspector {
            l.listener_filters.push(tls_inspector());
        }
        if sniffed {
            l.listener_filters.push(http_inspector());
        }
        // As istiod: listener filters wait for data without a deadline (mesh `protocolDetectionTimeout`,
        // default 0s) and a connection whose inspection ends early still gets a chain.
        l.listener_filters_timeout = Some(std_duration(std::time::Duration::ZERO));
        l.continue_on_listener_filters_timeout = true;
        if !services.bind_to_port {
            l.bind_to_port = Some(boolv(false));
        }
        out.push(l);
    }
    out
}

/// The SNI names of a TLS service's chain on a shared listener (Istio's
/// `buildSidecarOutboundTLSFilterChainOpts`): its hostname, and each alias' hostname with the alias'
/// short forms for the proxy's DNS domain.
fn sni_hosts(s: &Service, dns_domain: &str) -> Vec<String> {
    let mut out = vec![s.hostname.to_ascii_lowercase()];
    for a in &s.aliases {
        out.push(a.hostname.to_ascii_lowercase());
        out.extend(crate::rds::alt_virtual_hosts(&a.hostname, 0, dns_domain));
    }
    out
}

/// The TCP chain of a plain TCP service on a shared listener, without its match: its cluster and
/// the proxy to it (or to the TCP route of the VirtualService the listener's egress entry imports).
fn tcp_chain(
    push: &Snapshot,
    proxy: &ProxyContext,
    (scope, imports): (&SidecarScope, &Imports),
    s: &Service,
    port: u32,
    logs: &AccessLogs,
    report: &mut Report<'_>,
) -> FilterChain {
    let cluster = outbound_cluster_name(port, "", &s.hostname);
    let destinations = imports
        .virtual_service_for(&s.hostname.to_ascii_lowercase())
        .and_then(|vs| tcp_route_destinations(push, proxy, scope, vs, port, MESH_GATEWAY, report))
        .unwrap_or_else(|| vec![(cluster.clone(), 1)]);
    let policy = tcp_proxy_policy(push, proxy, scope, &destinations);
    chain(
        &cluster,
        None,
        logs.tcp_chain(false, &[], tcp_proxy_filter_with(&cluster, &destinations, &logs.filters, policy)),
    )
}

/// What the DestinationRule of the first destination's service adds to an outbound TCP proxy to
/// `destinations` (Istio's `buildOutboundNetworkFilters`): its tunnel ([`tunneling`]; sidecars only)
/// and source-IP hashing ([`source_ip_hash`]).
fn tcp_proxy_policy(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
    destinations: &[(String, u32)],
) -> TcpProxyPolicy {
    let Some((dr, subset)) = first_destination_rule(push, proxy, scope, destinations) else {
        return TcpProxyPolicy::default();
    };
    TcpProxyPolicy {
        tunneling: (proxy.kind != ProxyKind::Router).then(|| tunneling(&dr.rule, subset)).flatten(),
        source_ip_hash: source_ip_hash(&dr.rule, subset),
    }
}

/// The DestinationRule of the first destination's service, and the subset that counts: the
/// destination's own for a single destination, none (`""`) for weighted ones (Istio passes the subset
/// only with a single destination).
fn first_destination_rule<'d>(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
    destinations: &'d [(String, u32)],
) -> Option<(Arc<model::push::IndexedDestinationRule>, &'d str)> {
    let key = parse_cluster_name(&destinations.first()?.0)?;
    let dr = push.destination_rule(proxy, scope.service(key.host)?)?;
    let subset = if destinations.len() == 1 { key.subset } else { "" };
    Some((dr, subset))
}

/// Istio's `maybeSetHashPolicy`: `trafficPolicy.loadBalancer.consistentHash.useSourceIp`, replaced by
/// the named subset's when that subset sets a load balancer (a subset load balancer without
/// `useSourceIp` turns it off). Port-level settings are not read, as in istiod.
fn source_ip_hash(dr: &api::networking::DestinationRule, subset: &str) -> bool {
    let uses = |lb: Option<&api::networking::destination_rule::LoadBalancerSettings>| {
        lb.and_then(|lb| lb.consistent_hash.as_ref()).and_then(|c| c.use_source_ip).unwrap_or(false)
    };
    let subset_lb = dr
        .subsets
        .iter()
        .find(|s| s.name == subset)
        .and_then(|s| s.traffic_policy.as_ref())
        .and_then(|tp| tp.load_balancer.as_ref());
    match subset_lb {
        Some(lb) => uses(Some(lb)),
        None => uses(dr.traffic_policy.as_ref().and_then(|tp| tp.load_balancer.as_ref())),
    }
}

/// The `tunneling_config` of a sidecar's outbound TCP proxy (Istio's `tunnelingconfig.Apply` as
/// `buildOutboundNetworkFilters` calls it) from the DestinationRule of the first destination's
/// service: `trafficPolicy.tunnel`, or, for a single destination naming a `subset`, that subset's
/// `tunnel` alone (no fallback to the destination level). The hostname is `targetHost:targetPort`
/// (IPv6 hosts in brackets); `protocol: POST` sets `use_post`. Gateways never tunnel (istiod passes
/// `tunnelingconfig.Skip` there).
fn tunneling(dr: &api::networking::DestinationRule, subset: &str) -> Option<TunnelingConfig> {
    let policy = if subset.is_empty() {
        dr.traffic_policy.as_ref()
    } else {
        dr.subsets.iter().find(|s| s.name == subset)?.traffic_policy.as_ref()
    };
    let tunnel = policy?.tunnel.as_ref()?;
    let host = if tunnel.target_host.contains(':') {
        format!("[{}]", tunnel.target_host)
    } else {
        tunnel.target_host.clone()
    };
    Some(TunnelingConfig {
        hostname: format!("{host}:{}", tunnel.target_port),
        use_post: tunnel.protocol == "POST",
        ..Default::default()
    })
}

fn virtual_outbound(push: &Snapshot, proxy: &ProxyContext, logs: &AccessLogs) -> Listener {
    let scope = push.sidecar_scope(proxy);
    // Istio's `buildOutboundCatchAllNetworkFiltersOnly`: the Sidecar's egress proxy replaces
    // `PassthroughCluster` under ALLOW_ANY.
    let target = match scope.outbound_traffic_policy {
        OutboundTrafficPolicy::AllowAny => allow_any_cluster(scope.egress_proxy.as_ref()),
        OutboundTrafficPolicy::RegistryOnly => BLACK_HOLE_CLUSTER.to_string(),
    };
    let target = target.as_str();
    let mut l = listener(
        VIRTUAL_OUTBOUND_LISTENER.to_string(),
        &proxy.bind_address,
        VIRTUAL_OUTBOUND_PORT,
        EnvoyDirection::Outbound,
        vec![chain(
            "PassthroughFilterChain",
            None,
            logs.tcp_chain(false, &[], tcp_proxy_filter(target, &[(target.to_string(), 1)], &logs.filters)),
        )],
    );
    l.use_original_dst = Some(boolv(true));
    l.access_log = logs.listener.clone();
    l
}

/// How a generator hands out its listeners: as messages, or encoded with `virtualInbound` shared.
trait ListenerForm: Sized {
    fn name(&self) -> &str;
    /// A listener built for this proxy.
    fn own(listener: Listener) -> Self;
    /// The sidecar's `virtualInbound`.
    fn virtual_inbound(
        push: &Snapshot,
        proxy: &ProxyContext,
        scope: &SidecarScope,
        security: (Option<SecurityKey>, &SecurityFilters),
        logs: &AccessLogs,
    ) -> Self;
}

impl ListenerForm for Listener {
    fn name(&self) -> &str {
        &self.name
    }

    fn own(listener: Listener) -> Self {
        listener
    }

    fn virtual_inbound(
        push: &Snapshot,
        proxy: &ProxyContext,
        scope: &SidecarScope,
        (_, security): (Option<SecurityKey>, &SecurityFilters),
        logs: &AccessLogs,
    ) -> Self {
        crate::inbound::virtual_inbound(push, proxy, scope, security, logs)
    }
}

impl ListenerForm for EncodedResource {
    fn name(&self) -> &str {
        &self.name
    }

    fn own(listener: Listener) -> Self {
        let encoded = Encoded::of(&listener);
        EncodedResource { name: listener.name, encoded }
    }

    fn virtual_inbound(
        push: &Snapshot,
        proxy: &ProxyContext,
        scope: &SidecarScope,
        (key, security): (Option<SecurityKey>, &SecurityFilters),
        logs: &AccessLogs,
    ) -> Self {
        EncodedResource {
            name: VIRTUAL_INBOUND_LISTENER.to_string(),
            encoded: crate::inbound::virtual_inbound_encoded(push, proxy, scope, key, security, logs),
        }
    }
}

fn sidecar_listeners<T: ListenerForm>(
    push: &Snapshot,
    proxy: &ProxyContext,
    findings: &mut Vec<Finding>,
) -> Vec<T> {
    let client = access_logs(push, proxy, Direction::Client);
    let server = access_logs(push, proxy, Direction::Server);
    findings.extend(client.findings.iter().chain(&server.findings).cloned());
    let mut out: Vec<T> = sidecar_outbound(push, proxy, &client, findings).into_iter().map(T::own).collect();
    let scope = push.sidecar_scope(proxy);
    let (key, security) = crate::policy::security_for(push, proxy);
    findings.extend(security.findings.iter().cloned());
    findings.extend(crate::inbound::ingress_tls_findings(push, proxy, &scope));
    // A Sidecar ingress listener on the address and port of an egress one would give Envoy two
    // listeners of one name (the whole LDS refused): the egress listener keeps it, reported.
    for l in crate::inbound::ingress_listeners(push, proxy, &scope, &security, &server) {
        if out.iter().any(|o| o.name() == l.name) {
            findings.push(Finding {
                severity: Severity::Dropped,
                config: scope.sidecar.clone(),
                path: "spec.ingress".to_string(),
                resource: l.name.clone(),
                message: format!(
                    "an egress listener already listens on {}; this ingress listener is left out",
                    l.name
                ),
            });
            continue;
        }
        out.push(T::own(l));
    }
    if proxy.interception_mode != InterceptionMode::None {
        out.push(T::own(virtual_outbound(push, proxy, &client)));
        out.push(T::virtual_inbound(push, proxy, &scope, (key, &security), &server));
    }
    out
}

/// A downstream TLS transport socket for a gateway server, or `None` (reported) when it cannot be
/// built.
fn server_tls(
    server: &GatewayServer,
    proxy: &ProxyContext,
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
    let translated = tls::downstream(settings, alpn, proxy.has_workload_certificates());
    for (field, message) in translated.unsupported {
        let severity = if translated.context.is_some() { Severity::Unsupported } else { Severity::Dropped };
        report.push(severity, Some(&key), &format!("{}.tls.{field}", server.path()), listener, message);
    }
    translated.context
}

/// Whether a gateway server terminates Istio mutual TLS (`tls.mode: ISTIO_MUTUAL`): its TCP chains
/// lead with Istio's metadata exchange filter (istiod's `includeMx`).
fn istio_mutual(server: &GatewayServer) -> bool {
    server
        .server()
        .tls
        .as_ref()
        .is_some_and(|t| t.mode == api::networking::gateway::server_tls_settings::TlSmode::IstioMutual as i32)
}

fn gateway_listeners(push: &Snapshot, proxy: &ProxyContext, findings: &mut Vec<Finding>) -> Vec<Listener> {
    let shared = crate::gateway::servers(push, proxy);
    findings.extend(shared.1.iter().cloned());
    let merged = &shared.0;
    let scope = push.sidecar_scope(proxy);
    let security = crate::policy::security_filters(push, proxy);
    findings.extend(security.findings.iter().cloned());
    let extensions = push.extensions(proxy);
    let logs = access_logs(push, proxy, Direction::Client);
    findings.extend(logs.findings.iter().cloned());
    let mut report = Report { findings };
    let mut out = Vec::new();
    for ((port, server_bind), m) in merged {
        let port = *port;
        // A server's `bind` gives the listener its address (Istio's `buildGatewayListeners`).
        let bind = if server_bind.is_empty() { proxy.bind_address.as_str() } else { server_bind.as_str() };
        let name = listener_name(bind, port);
        let stat_prefix = format!("outbound_{bind}_{port}");
        let phases = PhaseFilters::for_listener(&extensions, ListenerClass::Gateway, port);
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
                    Routes::Rds(m.servers.first().map_or_else(
                        || crate::naming::gateway_http_route_name(port),
                        |s| s.route_name(port),
                    )),
                    FilterTarget::Envoy,
                    true,
                );
                security.apply_http_with(&mut hcm, &phases);
                logs.apply_http(&mut hcm);
                chains.push(chain(&name, None, vec![hcm_filter(&hcm)]));
            }
            PortKind::Tls | PortKind::Tcp => {
                for server in &m.servers {
                    let sni = server_names(server.hosts().into_iter().map(|(_, h)| h));
                    match server.kind {
                        ServerKind::HttpsTerminated => {
                            let Some(ctx) =
                                server_tls(server, proxy, &["h2", "http/1.1"], &name, &mut report)
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
                            security.apply_http_with(&mut hcm, &phases);
                            logs.apply_http(&mut hcm);
                            let mut c = chain(
                                &route,
                                Some(FilterChainMatch { server_names: sni, ..Default::default() }),
                                vec![hcm_filter(&hcm)],
                            );
                            c.transport_socket = Some(transport_socket(TLS_TRANSPORT_SOCKET, &ctx));
                            add(&mut chains, &mut report, server, c);
                        }
                        ServerKind::TlsPassthrough => {
                            if server.is_auto_passthrough() {
                                for c in auto_passthrough_chains(push, proxy, &scope, server, &logs.filters) {
                                    add(&mut chains, &mut report, server, c);
                                }
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
                                    server.port,
                                    &server.gateway.name,
                                    &mut report,
                                ) {
                                    let names = server_names(sni_hosts);
                                    let cname = format!("{}_{}", server.gateway.name, names.join(","));
                                    let c = chain(
                                        &cname,
                                        Some(FilterChainMatch { server_names: names, ..Default::default() }),
                                        logs.tcp_chain(
                                            istio_mutual(server),
                                            &security.tcp,
                                            tcp_proxy_filter_with(
                                                stat_of(&destinations),
                                                &destinations,
                                                &logs.filters,
                                                tcp_proxy_policy(push, proxy, &scope, &destinations),
                                            ),
                                        ),
                                    );
                                    add(&mut chains, &mut report, server, c);
                                }
                            }
                        }
                        ServerKind::TlsTerminatedTcp | ServerKind::Tcp => {
                            let ctx = if server.kind == ServerKind::TlsTerminatedTcp {
                                match server_tls(server, proxy, &[], &name, &mut report) {
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
                                        server.port,
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
                                logs.tcp_chain(
                                    istio_mutual(server),
                                    &security.tcp,
                                    tcp_proxy_filter_with(
                                        stat_of(&destinations),
                                        &destinations,
                                        &logs.filters,
                                        tcp_proxy_policy(push, proxy, &scope, &destinations),
                                    ),
                                ),
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
        l.access_log = logs.listener.clone();
        if m.kind == PortKind::Tls {
            l.listener_filters.push(tls_inspector());
        }
        out.push(l);
    }
    out
}

/// The ALPNs of Istio mutual TLS a sidecar may offer (Istio's `allIstioMtlsALPNs`): what an
/// `AUTO_PASSTHROUGH` filter chain matches besides the SNI.
pub const ALL_ISTIO_MTLS_ALPNS: [&str; 5] =
    ["istio", "istio-peer-exchange", "istio-http/1.0", "istio-http/1.1", "istio-h2"];

/// The filter chains of an `AUTO_PASSTHROUGH` gateway server (Istio's
/// `builtAutoPassthroughFilterChains`): for every mesh-internal service of the router's scope whose
/// hostname is within one of the server's hosts, and each of its ports but UDP, a chain matching the
/// SNI `outbound_.PORT_._.HOST` (and `outbound_.PORT_.SUBSET_.HOST` per DestinationRule subset) and
/// the Istio mTLS ALPNs, with no TLS context (the connection is passed through) and no authorization,
/// whose TCP proxy goes to the SNI-DNAT cluster of that name.
fn auto_passthrough_chains(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
    server: &GatewayServer,
    access_log: &[envoy_types::pb::envoy::config::accesslog::v3::AccessLog],
) -> Vec<FilterChain> {
    let hosts: Vec<String> = server.hosts().into_iter().map(|(_, h)| h).collect();
    let mut out = Vec::new();
    for service in scope.services() {
        if service.mesh_external
            || service.is_alias()
            || !hosts.iter().any(|h| host::subset_of(&service.hostname, h))
        {
            continue;
        }
        let dr = push.destination_rule(proxy, service);
        let subsets: Vec<&str> = std::iter::once("")
            .chain(
                dr.iter()
                    .flat_map(|d| d.rule.subsets.iter().map(|s| s.name.as_str()))
                    .filter(|s| !s.is_empty()),
            )
            .collect();
        for port in service.ports.iter().filter(|p| p.protocol != Protocol::Udp) {
            for subset in &subsets {
                let cluster = crate::naming::sni_dnat_cluster_name(port.port, subset, &service.hostname);
                let m = FilterChainMatch {
                    server_names: vec![cluster.clone()],
                    application_protocols: ALL_ISTIO_MTLS_ALPNS.iter().map(|a| a.to_string()).collect(),
                    ..Default::default()
                };
                let proxy_filter = tcp_proxy_filter(&cluster, &[(cluster.clone(), 1)], access_log);
                out.push(chain(&cluster, Some(m), vec![proxy_filter]));
            }
        }
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
pub fn generate_listeners(push: &Snapshot, proxy: &ProxyContext, names: &[String]) -> Built<Listener> {
    crate::envoy_filter::patch_listeners(push, proxy, listeners_as(push, proxy, names))
}

/// LDS for `proxy`, encoded: [`generate_listeners`]'s listeners in protobuf wire format, where a
/// sidecar's `virtualInbound` is made once per generation for every sidecar with the same inbound
/// ports, modes and policies and shared (`cache::VirtualInboundKey`); the other listeners are made per
/// proxy.
pub fn generate_listeners_encoded(
    push: &Snapshot,
    proxy: &ProxyContext,
    names: &[String],
) -> Built<EncodedResource> {
    crate::envoy_filter::patch_listeners(push, proxy, listeners_as(push, proxy, names))
}

fn listeners_as<T: ListenerForm>(push: &Snapshot, proxy: &ProxyContext, names: &[String]) -> Built<T> {
    let mut findings = Vec::new();
    let mut listeners: Vec<T> = if proxy.proxyless_grpc {
        grpc_listeners(push, proxy, names).into_iter().map(T::own).collect()
    } else {
        let mut all = match proxy.kind {
            ProxyKind::Sidecar => sidecar_listeners(push, proxy, &mut findings),
            ProxyKind::Router => {
                gateway_listeners(push, proxy, &mut findings).into_iter().map(T::own).collect()
            }
        };
        if !names.is_empty() {
            all.retain(|l| names.iter().any(|n| n == l.name()));
        }
        all
    };
    listeners.sort_by(|a, b| a.name().cmp(b.name()));
    let before = listeners.len();
    listeners.dedup_by(|a, b| a.name() == b.name());
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
    Built::new(listeners, findings)
}

#[cfg(test)]
mod tests {
    //! The listener address rule of Istio's `buildSidecarOutboundListener` (listener.go) and the SNI
    //! rule of `buildSidecarOutboundTLSFilterChainOpts` (tls.go), on plain values.

    use model::service::{Endpoint, Port, ProviderId, Resolution};

    use super::*;

    fn service(registry: ProviderId, addresses: &[&str], resolution: Resolution) -> Service {
        Service {
            hostname: "svc.example".to_string(),
            namespace: "ns".to_string(),
            name: "svc".to_string(),
            object_name: "svc".to_string(),
            registry,
            ports: vec![port(Protocol::Tls)],
            addresses: addresses.iter().map(ToString::to_string).collect(),
            resolution,
            mesh_external: false,
            export_to: BTreeSet::new(),
            labels: BTreeMap::new(),
            label_selector: None,
            service_accounts: Vec::new(),
            creation_time: None,
            passthrough_target_ports: BTreeMap::new(),
            external_name: None,
            aliases: Vec::new(),
            auto_allocated: Vec::new(),
            traffic_distribution: Default::default(),
            cluster_external_addresses: Default::default(),
        }
    }

    fn port(protocol: Protocol) -> Port {
        Port { name: "p".to_string(), port: 443, protocol }
    }

    fn endpoint(addresses: &[&str]) -> Arc<Endpoint> {
        Arc::new(Endpoint {
            addresses: addresses.iter().map(ToString::to_string).collect(),
            ..Default::default()
        })
    }

    fn own(ip: &str) -> Placement {
        Placement { bind: Some(ip.to_string()), cidr: None, sni: false }
    }

    const WILDCARD_SNI: Placement = Placement { bind: None, cidr: None, sni: true };

    fn ips(v: &[&str]) -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_vip_gets_a_listener_of_its_own_without_sni() {
        // The `kubernetes` Service: ClusterIP 10.0.0.1, port 443 `https` → `10.0.0.1_443`.
        let kube = service(ProviderId::Kubernetes, &["10.0.0.1"], Resolution::ClientSideLb);
        for p in [Protocol::Https, Protocol::Tls, Protocol::Tcp, Protocol::Mongo, Protocol::Unsupported] {
            assert_eq!(
                placements(&kube, &port(p), true, &ips(&["10.70.0.1"]), &[]),
                [own("10.0.0.1")],
                "{p:?}"
            );
        }
        // A ServiceEntry with several addresses: one listener per address, IPv6 too; a range matched on
        // the wildcard.
        let se = service(
            ProviderId::External,
            &["240.240.0.7", "2001:db8::7", "10.8.0.0/16"],
            Resolution::ClientSideLb,
        );
        assert_eq!(
            placements(&se, &port(Protocol::Tls), true, &ips(&["10.70.0.1"]), &[]),
            [
                own("240.240.0.7"),
                own("2001:db8::7"),
                Placement { bind: None, cidr: Some("10.8.0.0/16".to_string()), sni: true }
            ]
        );
    }

    #[test]
    fn kubernetes_cluster_ips_follow_the_proxy_ip_family() {
        let dual = service(ProviderId::Kubernetes, &["10.0.0.5", "fd00::5"], Resolution::ClientSideLb);
        assert_eq!(service_address(&dual, &ips(&["10.1.0.1"])), "10.0.0.5");
        assert_eq!(service_address(&dual, &ips(&["fd00::1"])), "fd00::5");
        assert_eq!(service_address(&dual, &[]), "10.0.0.5");
        // ServiceEntry addresses are not filtered: the first, whatever the family.
        let se = service(ProviderId::External, &["fd00::9", "10.9.9.9"], Resolution::ClientSideLb);
        assert_eq!(service_address(&se, &ips(&["10.1.0.1"])), "fd00::9");
    }

    #[test]
    fn no_address_shares_the_wildcard_with_sni_and_a_cidr_matches_the_destination() {
        let none = service(ProviderId::External, &[], Resolution::Dns);
        assert_eq!(placements(&none, &port(Protocol::Tls), true, &[], &[]), [WILDCARD_SNI]);
        let cidr = service(ProviderId::External, &["10.8.0.0/16"], Resolution::ClientSideLb);
        assert_eq!(
            placements(&cidr, &port(Protocol::Tcp), true, &[], &[]),
            [Placement { bind: None, cidr: Some("10.8.0.0/16".to_string()), sni: true }]
        );
    }

    #[test]
    fn without_capture_everything_stays_on_the_bind_address_and_only_a_cidr_keeps_sni() {
        let vip = service(ProviderId::Kubernetes, &["10.0.0.1"], Resolution::ClientSideLb);
        let none = service(ProviderId::External, &[], Resolution::Dns);
        let cidr = service(ProviderId::External, &["10.8.0.0/16"], Resolution::ClientSideLb);
        let bound = |sni| Placement { bind: None, cidr: None, sni };
        assert_eq!(placements(&vip, &port(Protocol::Tls), false, &[], &[]), [bound(false)]);
        assert_eq!(placements(&none, &port(Protocol::Tls), false, &[], &[]), [bound(false)]);
        assert_eq!(placements(&cidr, &port(Protocol::Tls), false, &[], &[]), [bound(true)]);
    }

    #[test]
    fn headless_tcp_ports_get_one_listener_per_endpoint() {
        let headless = service(ProviderId::Kubernetes, &[], Resolution::Passthrough);
        let eps = [
            endpoint(&["10.1.0.1"]),
            endpoint(&["10.1.0.2"]),
            endpoint(&["10.1.0.2"]),
            endpoint(&["10.70.0.1"]),
            endpoint(&["db.example"]),
        ];
        let got = placements(&headless, &port(Protocol::Tcp), true, &ips(&["10.70.0.1"]), &eps);
        assert_eq!(got, [own("10.1.0.1"), own("10.1.0.2")], "the proxy's own IP and host names are skipped");
        // No endpoints: a Kubernetes headless Service gets no listener.
        assert_eq!(placements(&headless, &port(Protocol::Tcp), true, &[], &[]), Vec::<Placement>::new());
        // Unknown protocols count as TCP here.
        assert_eq!(
            placements(&headless, &port(Protocol::Unsupported), true, &[], &eps[..1]),
            [own("10.1.0.1")]
        );
    }

    #[test]
    fn passthrough_service_entries_without_endpoints_fall_back_to_the_wildcard() {
        let mut se = service(ProviderId::External, &[], Resolution::Passthrough);
        assert_eq!(placements(&se, &port(Protocol::Tcp), true, &[], &[]), [WILDCARD_SNI]);
        // With a workload selector the endpoints may come later: no listener yet.
        se.label_selector = Some(BTreeMap::from([("app".to_string(), "db".to_string())]));
        assert_eq!(placements(&se, &port(Protocol::Tcp), true, &[], &[]), Vec::<Placement>::new());
        // With endpoints: one listener each.
        se.label_selector = None;
        assert_eq!(
            placements(&se, &port(Protocol::Tcp), true, &[], &[endpoint(&["10.2.0.1"])]),
            [own("10.2.0.1")]
        );
    }
}
