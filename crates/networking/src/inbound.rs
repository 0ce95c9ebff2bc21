//! Inbound listeners and filter chains of sidecars (Istio's `pilot/pkg/networking/core/listener_inbound.go`
//! and `filterchain_options.go`): the one builder of inbound filter chains, used by `virtualInbound`
//! (traffic captured by iptables) and by the listeners of Sidecar `ingress` entries that bind their port.
//!
//! Per inbound port ([`InboundPort`]), [`inbound_chains`] makes a list of [`InboundChain`]s, each with a
//! match, an optional downstream TLS context and its filters (network filters before the terminal one,
//! then an HTTP connection manager or a TCP proxy), so later policy work can add RBAC or JWT filters to
//! the chains before they become Envoy `FilterChain`s. The chains follow the port's mutual TLS mode:
//!
//! | mode | HTTP port | TCP port |
//! |---|---|---|
//! | none (proxy without workload certificates) | one plaintext chain, match on destination port only (as before mTLS existed) | same |
//! | `DISABLE` | plaintext, `transport_protocol: raw_buffer` | same |
//! | `PERMISSIVE` | mTLS on `tls` + Istio's ALPNs ([`ISTIO_MTLS_ALPNS`]); plaintext on `raw_buffer` | mTLS on `tls` + Istio's ALPNs; plaintext on `raw_buffer`; `tls` without Istio ALPN proxied as TCP (TLS passed through) |
//! | `STRICT` | mTLS on `tls` | mTLS on `tls` |
//!
//! Every chain matches the port as `destination_port`; a listener with a `tls` chain gets the
//! `tls_inspector` listener filter. HTTP chains route everything to `inbound|PORT||` with
//! `x-forwarded-client-cert` handled as Istio's sidecar inbound: `APPEND_FORWARD` with the client
//! certificate's subject, URI and DNS SANs (so the application sees the caller's SPIFFE id).

use std::sync::Arc;

use api::networking::gateway::ServerTlsSettings;
use envoy_types::pb::envoy::{
    config::{
        core::v3::TrafficDirection as EnvoyDirection,
        listener::v3::{Filter, FilterChain, FilterChainMatch, Listener},
        route::v3::{
            Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route::Action,
            route_action::ClusterSpecifier, route_match::PathSpecifier,
        },
    },
    extensions::{
        filters::network::http_connection_manager::v3::{
            HttpConnectionManager,
            http_connection_manager::{ForwardClientCertDetails, SetCurrentClientCertDetails},
        },
        transport_sockets::tls::v3::DownstreamTlsContext,
    },
};
use model::{
    Finding, Protocol, Severity,
    push::{
        EffectivePeerAuthentication, InterceptionMode, MeshSettings, MtlsMode, ProxyContext, SidecarScope,
        extensions::{ExtensionFilter, ListenerClass},
    },
};

use crate::{
    Snapshot,
    access_log::AccessLogs,
    cache::{Encoded, SecurityKey, VirtualInboundKey},
    convert::{address, boolv, transport_socket, u32v, zero_duration},
    extension::PhaseFilters,
    filters::{
        FilterTarget, Routes, TLS_TRANSPORT_SOCKET, hcm_filter, http_connection_manager, original_dst,
        tcp_proxy_filter, tls_inspector,
    },
    mtls::{
        INBOUND_ALPN, ISTIO_MTLS_ALPNS, RAW_BUFFER_TRANSPORT_PROTOCOL, TLS_TRANSPORT_PROTOCOL,
        inbound_tls_context,
    },
    naming::{
        INBOUND_PASSTHROUGH_CLUSTER, VIRTUAL_INBOUND_LISTENER, VIRTUAL_INBOUND_PORT, inbound_cluster_name,
        listener_name,
    },
    policy::SecurityFilters,
};

/// How an inbound port is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InboundProtocol {
    /// HTTP connection manager with an inline route to the inbound cluster.
    Http,
    /// TCP proxy to the inbound cluster.
    Tcp,
}

impl InboundProtocol {
    /// The carriage of a port protocol (`None` for UDP, which has no inbound chain).
    pub fn of(protocol: Protocol) -> Option<InboundProtocol> {
        match protocol {
            Protocol::Udp => None,
            p if p.is_http() || p == Protocol::HttpProxy => Some(InboundProtocol::Http),
            _ => Some(InboundProtocol::Tcp),
        }
    }
}

/// One inbound port: what its chains match and where they send traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboundPort {
    /// The workload (target) port matched as `destination_port`; 0 for the passthrough chains (no
    /// port match).
    pub port: u32,
    /// HTTP or TCP.
    pub protocol: InboundProtocol,
    /// Destination cluster (`inbound|PORT||`, or `InboundPassthroughCluster`).
    pub cluster: String,
    /// Chain name (`BIND_PORT`, or `PassthroughFilterChain`).
    pub name: String,
    /// HTTP stat prefix (`inbound_BIND_PORT`).
    pub stat_prefix: String,
    /// Set Istio's `x-forwarded-client-cert` handling on HTTP chains.
    pub forward_client_cert: bool,
}

/// The last network filter of a chain.
#[derive(Clone, Debug, PartialEq)]
pub enum Terminal {
    /// An HTTP connection manager (HTTP filters may be inserted before its router).
    Http(Box<HttpConnectionManager>),
    /// A TCP proxy network filter.
    Tcp(Box<Filter>),
}

/// One inbound filter chain before it becomes Envoy's: match, optional mTLS termination, network
/// filters placed before the terminal filter, terminal filter.
#[derive(Clone, Debug, PartialEq)]
pub struct InboundChain {
    /// Chain name (Istio gives all chains of a port the same name).
    pub name: String,
    /// The match.
    pub filter_chain_match: FilterChainMatch,
    /// The downstream TLS context when the chain terminates mutual TLS.
    pub tls: Option<DownstreamTlsContext>,
    /// Network filters before the terminal one (Istio's metadata exchange; RBAC, ext_authz and
    /// Istio's stats on TCP chains).
    pub network_filters: Vec<Filter>,
    /// The terminal filter.
    pub terminal: Terminal,
}

impl InboundChain {
    /// The Envoy filter chain (a match that matches everything is left out, as Envoy writes it).
    pub fn into_filter_chain(self) -> FilterChain {
        let mut filters = self.network_filters;
        filters.push(match self.terminal {
            Terminal::Http(hcm) => hcm_filter(&hcm),
            Terminal::Tcp(f) => *f,
        });
        FilterChain {
            name: self.name,
            filter_chain_match: (self.filter_chain_match != FilterChainMatch::default())
                .then_some(self.filter_chain_match),
            filters,
            transport_socket: self.tls.map(|ctx| transport_socket(TLS_TRANSPORT_SOCKET, &ctx)),
            ..Default::default()
        }
    }

    /// `true` if the chain matches on the `tls` transport protocol (the listener needs the TLS
    /// inspector).
    pub fn needs_tls_inspector(&self) -> bool {
        self.filter_chain_match.transport_protocol == TLS_TRANSPORT_PROTOCOL
    }
}

/// One match option (Istio's `FilterChainMatchOptions`): transport protocol, application protocols,
/// whether the chain terminates mTLS.
struct MatchOption {
    transport: &'static str,
    alpn: &'static [&'static str],
    mtls: bool,
}

const TLS_MTLS: MatchOption = MatchOption { transport: TLS_TRANSPORT_PROTOCOL, alpn: &[], mtls: true };
const TLS_ISTIO_MTLS: MatchOption =
    MatchOption { transport: TLS_TRANSPORT_PROTOCOL, alpn: &ISTIO_MTLS_ALPNS, mtls: true };
const RAW: MatchOption = MatchOption { transport: RAW_BUFFER_TRANSPORT_PROTOCOL, alpn: &[], mtls: false };
const TLS_PLAIN: MatchOption = MatchOption { transport: TLS_TRANSPORT_PROTOCOL, alpn: &[], mtls: false };
const ANY: MatchOption = MatchOption { transport: "", alpn: &[], mtls: false };

/// Istio's `getFilterChainMatchOptions` for an explicitly declared protocol (TCP permissive with the
/// plain-TLS chain, as when no other TLS chain exists on the port); `None` (no workload certificates):
/// a single chain matching anything.
fn match_options(mode: Option<MtlsMode>, protocol: InboundProtocol) -> Vec<MatchOption> {
    match (mode, protocol) {
        (None, _) => vec![ANY],
        (Some(MtlsMode::Disable), _) => vec![RAW],
        (Some(MtlsMode::Strict), _) => vec![TLS_MTLS],
        (Some(MtlsMode::Permissive), InboundProtocol::Http) => vec![TLS_ISTIO_MTLS, RAW],
        (Some(MtlsMode::Permissive), InboundProtocol::Tcp) => vec![TLS_ISTIO_MTLS, RAW, TLS_PLAIN],
    }
}

/// The inline route configuration of an inbound HTTP chain: everything to `cluster`, no timeout.
fn inbound_route_config(port: u32, cluster: &str) -> RouteConfiguration {
    let route = Route {
        name: "default".to_string(),
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix("/".to_string())),
            ..Default::default()
        }),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.to_string())),
            timeout: Some(zero_duration()),
            ..Default::default()
        })),
        ..Default::default()
    };
    RouteConfiguration {
        name: cluster.to_string(),
        virtual_hosts: vec![VirtualHost {
            name: format!("inbound|http|{port}"),
            domains: vec!["*".to_string()],
            routes: vec![route],
            ..Default::default()
        }],
        validate_clusters: Some(boolv(false)),
        ..Default::default()
    }
}

fn terminal(port: &InboundPort, logs: &AccessLogs) -> Terminal {
    match port.protocol {
        InboundProtocol::Http => {
            let mut hcm = http_connection_manager(
                &port.stat_prefix,
                Routes::Inline(Box::new(inbound_route_config(port.port, &port.cluster))),
                FilterTarget::Envoy,
                false,
            );
            logs.apply_http(&mut hcm);
            if port.forward_client_cert {
                hcm.forward_client_cert_details = ForwardClientCertDetails::AppendForward as i32;
                hcm.set_current_client_cert_details = Some(SetCurrentClientCertDetails {
                    subject: Some(boolv(true)),
                    uri: true,
                    dns: true,
                    ..Default::default()
                });
            }
            Terminal::Http(Box::new(hcm))
        }
        InboundProtocol::Tcp => Terminal::Tcp(Box::new(tcp_proxy_filter(
            &port.cluster,
            &[(port.cluster.clone(), 1)],
            &logs.filters,
        ))),
    }
}

/// The filter chains of one inbound port under `mode` (`None`: the proxy has no workload certificates,
/// plaintext only); the table in the module documentation. `mesh` gives the trust domains peers are
/// verified against; `security` the proxy's policy filters (RBAC, ext_authz, jwt_authn), put in front
/// of every chain's HTTP filters or TCP proxy.
pub fn inbound_chains(
    mesh: &MeshSettings,
    port: &InboundPort,
    mode: Option<MtlsMode>,
    security: &SecurityFilters,
) -> Vec<InboundChain> {
    inbound_chains_logged(mesh, port, mode, (security, &[]), &AccessLogs::default())
}

/// [`inbound_chains`] whose connection managers and TCP proxies write `logs`' access loggers (and
/// whose connection managers trace as `logs` says), with the proxy's WasmPlugins / TrafficExtensions
/// (`extensions`, priority-sorted) placed among the security filters of HTTP chains by phase when
/// their `match` takes the port ([`crate::extension`]).
pub fn inbound_chains_logged(
    mesh: &MeshSettings,
    port: &InboundPort,
    mode: Option<MtlsMode>,
    filters: (&SecurityFilters, &[Arc<ExtensionFilter>]),
    logs: &AccessLogs,
) -> Vec<InboundChain> {
    let options = match_options(mode, port.protocol);
    let tls = options.iter().any(|o| o.mtls).then(|| inbound_tls_context(mesh));
    chains_with(port, options, tls, filters, logs)
}

/// The chains of `port` for the match `options`, the ones that terminate TLS with `tls`.
fn chains_with(
    port: &InboundPort,
    options: Vec<MatchOption>,
    tls: Option<DownstreamTlsContext>,
    (security, extensions): (&SecurityFilters, &[Arc<ExtensionFilter>]),
    logs: &AccessLogs,
) -> Vec<InboundChain> {
    let mut terminal = terminal(port, logs);
    // As istiod: the TCP metadata exchange filter leads every inbound chain; TCP chains then carry
    // the security filters and Istio's stats before `tcp_proxy` (added with the terminal).
    let network_filters = match &mut terminal {
        Terminal::Http(hcm) => {
            let phases = PhaseFilters::for_listener(extensions, ListenerClass::SidecarInbound, port.port);
            security.apply_http_with(hcm, &phases);
            logs.telemetry.tcp_metadata_exchange.iter().cloned().collect()
        }
        Terminal::Tcp(_) => logs.telemetry.tcp_filters(true, &security.tcp),
    };
    options
        .into_iter()
        .map(|o| InboundChain {
            name: port.name.clone(),
            filter_chain_match: FilterChainMatch {
                destination_port: (port.port != 0).then(|| u32v(port.port)),
                transport_protocol: o.transport.to_string(),
                application_protocols: o.alpn.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            },
            tls: if o.mtls { tls.clone() } else { None },
            network_filters: network_filters.clone(),
            terminal: terminal.clone(),
        })
        .collect()
}

/// The PeerAuthentication in force for `proxy`: `None` without workload certificates (no mTLS).
fn peer_authentication(push: &Snapshot, proxy: &ProxyContext) -> Option<EffectivePeerAuthentication> {
    proxy.has_workload_certificates().then(|| push.peer_authentication(proxy))
}

/// The mode of workload port `port` under `policy` (`None`: plaintext only, as before mTLS existed).
fn mode_for(policy: &Option<EffectivePeerAuthentication>, port: u32) -> Option<MtlsMode> {
    policy.as_ref().map(|p| p.for_port(port))
}

/// The address an ingress listener binds to (and names its chains after): `bind`, else the proxy's
/// first IP, else `0.0.0.0`.
fn ingress_bind(bind: &str, proxy: &ProxyContext) -> String {
    if !bind.is_empty() {
        return bind.to_string();
    }
    proxy.ips.first().cloned().unwrap_or_else(|| "0.0.0.0".to_string())
}

/// `true` if a Sidecar ingress entry gets a listener of its own (its `captureMode`, else the proxy's
/// interception mode is `NONE`; Istio's `getBindToPort`).
fn binds_port(bind_to_port: Option<bool>, proxy: &ProxyContext) -> bool {
    bind_to_port.unwrap_or(proxy.interception_mode == InterceptionMode::None)
}

/// One inbound port as [`inbound_ports`] plans it.
struct PlannedPort<'a> {
    port: InboundPort,
    /// The address of a listener of its own; `None`: chains of `virtualInbound`.
    bind: Option<String>,
    /// The Sidecar ingress entry's `tls` (with its field path), when `ENABLE_TLS_ON_SIDECAR_INGRESS`
    /// let the scope keep it.
    tls: Option<&'a (ServerTlsSettings, String)>,
}

/// The inbound ports of `proxy`: the Sidecar's `ingress` entries when it has any (with whether each
/// binds its own listener and its bind address; an entry with `tls` has the protocol seen after
/// termination, as istiod: HTTPS is served as HTTP, TLS as TCP), else its service instances' target
/// ports (first instance of a port wins), neither binding.
fn inbound_ports<'a>(scope: &'a SidecarScope, proxy: &ProxyContext) -> Vec<PlannedPort<'a>> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let certified = proxy.has_workload_certificates();
    if !scope.ingress.is_empty() {
        for i in &scope.ingress {
            let declared = if i.tls.is_some() { i.protocol.after_tls_termination() } else { i.protocol };
            let Some(protocol) = InboundProtocol::of(declared) else { continue };
            if !seen.insert(i.port) {
                continue;
            }
            let bind = ingress_bind(&i.bind, proxy);
            let name = listener_name(&bind, i.port);
            let port = InboundPort {
                port: i.port,
                protocol,
                cluster: inbound_cluster_name(i.port),
                stat_prefix: format!("inbound_{name}"),
                name,
                forward_client_cert: true,
            };
            out.push(PlannedPort {
                port,
                bind: binds_port(i.bind_to_port, proxy).then_some(bind),
                tls: i.tls.as_ref(),
            });
        }
        return out;
    }
    for instance in &proxy.service_instances {
        let port = instance.endpoint.endpoint_port;
        let Some(protocol) = InboundProtocol::of(instance.service_port.protocol) else { continue };
        if port == 0 || !seen.insert(port) {
            continue;
        }
        out.push(PlannedPort {
            port: InboundPort {
                port,
                protocol,
                cluster: inbound_cluster_name(port),
                name: format!("0.0.0.0_{port}"),
                stat_prefix: format!("inbound_0.0.0.0_{port}"),
                forward_client_cert: certified,
            },
            bind: None,
            tls: None,
        });
    }
    out
}

/// The server TLS of a Sidecar ingress entry, when it applies: istiod terminates the entry's `tls`
/// only where mutual TLS is off on the port (PeerAuthentication `DISABLE`; here also a proxy without
/// workload certificates, which serves plain text only), and keeps the mutual TLS chains otherwise.
/// `Some(Err(findings))` when the certificate cannot be served (istiod's `BuildListenerTLSContext`
/// with the gateway server's rules: `credentialName(s)`, certificate files, `ISTIO_MUTUAL`; ALPN
/// `h2`, `http/1.1`).
fn ingress_tls(
    tls: Option<&(ServerTlsSettings, String)>,
    mode: Option<MtlsMode>,
    proxy: &ProxyContext,
) -> Option<crate::tls::Translated<DownstreamTlsContext>> {
    let (settings, _) = tls?;
    matches!(mode, None | Some(MtlsMode::Disable))
        .then(|| crate::tls::downstream(settings, &INBOUND_ALPN, proxy.has_workload_certificates()))
}

/// The chains of one planned port under `mode`: one chain terminating the Sidecar ingress entry's own
/// TLS (match `transport_protocol: tls`, as istiod's `getTLSFilterChainMatchOptions`) when it applies
/// ([`ingress_tls`]), else the mutual TLS chains of `mode`. `None` when the entry's TLS cannot be
/// served: the port is left out ([`ingress_tls_findings`] says why) rather than served in plain text.
fn port_chains(
    mesh: &MeshSettings,
    proxy: &ProxyContext,
    planned: &PlannedPort<'_>,
    mode: Option<MtlsMode>,
    filters: (&SecurityFilters, &[Arc<ExtensionFilter>]),
    logs: &AccessLogs,
) -> Option<Vec<InboundChain>> {
    match ingress_tls(planned.tls, mode, proxy) {
        None => Some(inbound_chains_logged(mesh, &planned.port, mode, filters, logs)),
        Some(translated) => {
            let tls = translated.context?;
            Some(chains_with(&planned.port, vec![TLS_MTLS], Some(tls), filters, logs))
        }
    }
}

/// What the proxy's Sidecar ingress `tls` blocks give: certificates that cannot be served (the port
/// left out: `Dropped`; a part ignored: `Unsupported`), and blocks ignored because mutual TLS is on
/// for the port (istiod applies them only under PeerAuthentication `DISABLE`).
pub(crate) fn ingress_tls_findings(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
) -> Vec<Finding> {
    let policy = peer_authentication(push, proxy);
    let mut out = Vec::new();
    for planned in inbound_ports(scope, proxy) {
        let Some((_, path)) = planned.tls else { continue };
        let mode = mode_for(&policy, planned.port.port);
        let finding = |severity, path: String, message: String| Finding {
            severity,
            config: scope.sidecar.clone(),
            path,
            resource: planned.port.name.clone(),
            message,
        };
        match ingress_tls(planned.tls, mode, proxy) {
            None => out.push(finding(
                Severity::Unsupported,
                path.clone(),
                format!(
                    "ignored: mutual TLS is {mode:?} on port {}; istiod terminates a Sidecar ingress tls only \
                     where PeerAuthentication disables mTLS",
                    planned.port.port
                ),
            )),
            Some(translated) => {
                let severity = if translated.context.is_some() { Severity::Unsupported } else { Severity::Dropped };
                out.extend(translated.unsupported.into_iter().map(|(field, message)| {
                    let message = if severity == Severity::Dropped {
                        format!("{message} (the ingress port {} is left out)", planned.port.port)
                    } else {
                        message
                    };
                    finding(severity, format!("{path}.{field}"), message)
                }));
            }
        }
    }
    out
}

fn inbound_listener(
    name: String,
    addr: &str,
    port: u32,
    chains: Vec<InboundChain>,
    capture: bool,
) -> Listener {
    let inspector = chains.iter().any(InboundChain::needs_tls_inspector);
    let mut l = Listener {
        name,
        address: Some(address(addr, port)),
        filter_chains: chains.into_iter().map(InboundChain::into_filter_chain).collect(),
        traffic_direction: EnvoyDirection::Inbound as i32,
        ..Default::default()
    };
    if capture {
        l.listener_filters.push(original_dst());
    }
    if inspector {
        l.listener_filters.push(tls_inspector());
        // As istiod (protocol detection timeout 0): a client that sends nothing is not cut off by the
        // inspector's timer, and matching goes on if it ever fires.
        l.listener_filters_timeout =
            Some(envoy_types::pb::google::protobuf::Duration { seconds: 0, nanos: 0 });
        l.continue_on_listener_filters_timeout = true;
    }
    l
}

/// `virtualInbound` (port 15006, original destination): the chains of every inbound port that does
/// not bind its own listener, then the passthrough chains to `InboundPassthroughCluster` (for
/// proxies with workload certificates under the workload's mode, as TCP).
pub(crate) fn virtual_inbound(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
    security: &SecurityFilters,
    logs: &AccessLogs,
) -> Listener {
    let mesh = push.mesh();
    let policy = peer_authentication(push, proxy);
    let extensions = push.extensions(proxy);
    let mut chains = Vec::new();
    for planned in inbound_ports(scope, proxy) {
        if planned.bind.is_none() {
            let mode = mode_for(&policy, planned.port.port);
            chains.extend(
                port_chains(mesh, proxy, &planned, mode, (security, &extensions), logs).unwrap_or_default(),
            );
        }
    }
    let passthrough = InboundPort {
        port: 0,
        protocol: InboundProtocol::Tcp,
        cluster: INBOUND_PASSTHROUGH_CLUSTER.to_string(),
        name: "PassthroughFilterChain".to_string(),
        stat_prefix: String::new(),
        forward_client_cert: false,
    };
    chains.extend(inbound_chains_logged(
        mesh,
        &passthrough,
        mode_for(&policy, 0),
        (security, &extensions),
        logs,
    ));
    let mut l = inbound_listener(
        VIRTUAL_INBOUND_LISTENER.to_string(),
        &proxy.bind_address,
        VIRTUAL_INBOUND_PORT,
        chains,
        true,
    );
    l.access_log = logs.listener.clone();
    l
}

/// [`virtual_inbound`], encoded. Without Sidecar `ingress` entries it is made once per generation and
/// [`VirtualInboundKey`] and shared by every sidecar with the same ports, modes and policies (the
/// listener names ports, not addresses, so the replicas of a workload get the same bytes).
pub(crate) fn virtual_inbound_encoded(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
    security_key: Option<SecurityKey>,
    security: &SecurityFilters,
    logs: &AccessLogs,
) -> Arc<Encoded> {
    let make = || Encoded::of(&virtual_inbound(push, proxy, scope, security, logs));
    if !scope.ingress.is_empty() {
        return make();
    }
    let policy = peer_authentication(push, proxy);
    let key = VirtualInboundKey {
        ports: inbound_ports(scope, proxy)
            .iter()
            .map(|p| (p.port.port, p.port.protocol, mode_for(&policy, p.port.port)))
            .collect(),
        passthrough: mode_for(&policy, 0),
        certified: proxy.has_workload_certificates(),
        security: security_key,
        bind_address: proxy.bind_address.clone(),
        telemetry: logs.key.clone(),
        extensions: push.extensions(proxy).iter().map(|e| e.config.key()).collect(),
        tracing: logs.tracing.fingerprint(),
        stats: logs.telemetry.key.clone(),
    };
    push.virtual_inbound(key, make)
}

/// The listeners of Sidecar `ingress` entries that bind their port (`captureMode: NONE`, or the proxy
/// runs with `INTERCEPTION_MODE=NONE`): `BIND_PORT` on the entry's `bind` (else the proxy's IP),
/// the entry's chains.
pub(crate) fn ingress_listeners(
    push: &Snapshot,
    proxy: &ProxyContext,
    scope: &SidecarScope,
    security: &SecurityFilters,
    logs: &AccessLogs,
) -> Vec<Listener> {
    let mesh = push.mesh();
    let policy = peer_authentication(push, proxy);
    let extensions = push.extensions(proxy);
    inbound_ports(scope, proxy)
        .into_iter()
        .filter_map(|planned| {
            let bind = planned.bind.as_ref()?;
            let mode = mode_for(&policy, planned.port.port);
            let chains = port_chains(mesh, proxy, &planned, mode, (security, &extensions), logs)?;
            let port = &planned.port;
            let mut l = inbound_listener(port.name.clone(), bind, port.port, chains, false);
            l.access_log = logs.listener.clone();
            Some(l)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(protocol: InboundProtocol) -> InboundPort {
        InboundPort {
            port: 8080,
            protocol,
            cluster: "inbound|8080||".into(),
            name: "0.0.0.0_8080".into(),
            stat_prefix: "inbound_0.0.0.0_8080".into(),
            forward_client_cert: true,
        }
    }

    /// (transport protocol, application protocols, terminates mTLS) of each chain.
    fn shape(chains: &[InboundChain]) -> Vec<(&str, usize, bool)> {
        chains
            .iter()
            .map(|c| {
                assert_eq!(c.filter_chain_match.destination_port, Some(u32v(8080)));
                (
                    c.filter_chain_match.transport_protocol.as_str(),
                    c.filter_chain_match.application_protocols.len(),
                    c.tls.is_some(),
                )
            })
            .collect()
    }

    #[test]
    fn chain_shapes_follow_the_mode_and_protocol() {
        let mesh = MeshSettings::default();
        let http = port(InboundProtocol::Http);
        let tcp = port(InboundProtocol::Tcp);
        assert_eq!(shape(&inbound_chains(&mesh, &http, None, &SecurityFilters::default())), [("", 0, false)]);
        assert_eq!(
            shape(&inbound_chains(&mesh, &http, Some(MtlsMode::Disable), &SecurityFilters::default())),
            [("raw_buffer", 0, false)]
        );
        assert_eq!(
            shape(&inbound_chains(&mesh, &tcp, Some(MtlsMode::Disable), &SecurityFilters::default())),
            [("raw_buffer", 0, false)]
        );
        assert_eq!(
            shape(&inbound_chains(&mesh, &http, Some(MtlsMode::Strict), &SecurityFilters::default())),
            [("tls", 0, true)]
        );
        assert_eq!(
            shape(&inbound_chains(&mesh, &tcp, Some(MtlsMode::Strict), &SecurityFilters::default())),
            [("tls", 0, true)]
        );
        assert_eq!(
            shape(&inbound_chains(&mesh, &http, Some(MtlsMode::Permissive), &SecurityFilters::default())),
            [("tls", 5, true), ("raw_buffer", 0, false)]
        );
        assert_eq!(
            shape(&inbound_chains(&mesh, &tcp, Some(MtlsMode::Permissive), &SecurityFilters::default())),
            [("tls", 5, true), ("raw_buffer", 0, false), ("tls", 0, false)]
        );
        let permissive =
            inbound_chains(&mesh, &http, Some(MtlsMode::Permissive), &SecurityFilters::default());
        assert_eq!(permissive[0].filter_chain_match.application_protocols[0], "istio");
        assert!(permissive.iter().all(|c| c.name == "0.0.0.0_8080"));
    }

    #[test]
    fn http_chains_forward_the_client_certificate_and_route_to_the_inbound_cluster() {
        let chains = inbound_chains(
            &MeshSettings::default(),
            &port(InboundProtocol::Http),
            Some(MtlsMode::Strict),
            &SecurityFilters::default(),
        );
        let Terminal::Http(hcm) = &chains[0].terminal else { panic!("HTTP terminal expected") };
        assert_eq!(hcm.forward_client_cert_details, ForwardClientCertDetails::AppendForward as i32);
        let details = hcm.set_current_client_cert_details.as_ref().unwrap();
        assert_eq!((details.subject, details.uri, details.dns), (Some(boolv(true)), true, true));
        let fc = chains[0].clone().into_filter_chain();
        assert_eq!(fc.transport_socket.as_ref().unwrap().name, TLS_TRANSPORT_SOCKET);
        assert_eq!(fc.filters.len(), 1);
        let mut no_xfcc = port(InboundProtocol::Http);
        no_xfcc.forward_client_cert = false;
        let Terminal::Http(hcm) =
            &inbound_chains(&MeshSettings::default(), &no_xfcc, None, &SecurityFilters::default())[0]
                .terminal
        else {
            panic!()
        };
        assert_eq!(hcm.forward_client_cert_details, 0, "left as Envoy's default (SANITIZE)");
        assert!(hcm.set_current_client_cert_details.is_none());
    }

    #[test]
    fn listener_gets_the_tls_inspector_only_with_a_tls_chain() {
        let mesh = MeshSettings::default();
        let plain = inbound_chains(
            &mesh,
            &port(InboundProtocol::Tcp),
            Some(MtlsMode::Disable),
            &SecurityFilters::default(),
        );
        let l = inbound_listener("l".into(), "10.0.0.1", 8080, plain, false);
        assert!(l.listener_filters.is_empty());
        let strict = inbound_chains(
            &mesh,
            &port(InboundProtocol::Tcp),
            Some(MtlsMode::Strict),
            &SecurityFilters::default(),
        );
        let l = inbound_listener("l".into(), "10.0.0.1", 8080, strict, true);
        let names: Vec<&str> = l.listener_filters.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["envoy.filters.listener.original_dst", "envoy.filters.listener.tls_inspector"]);
    }
}
