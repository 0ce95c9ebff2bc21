//! The servers of every Gateway that selects a router, merged by port (Istio's `MergeGateways`,
//! `pilot/pkg/model/gateway.go`), shared by the listener and route generators.
//!
//! A port serves one kind of traffic: plain HTTP (route configuration `http.PORT`), TLS (terminated
//! HTTPS servers with `https.PORT.PORTNAME.GATEWAY.NAMESPACE` routes and passthrough servers, told
//! apart by SNI), or opaque TCP. A server whose kind does not fit the port's first server is left out
//! and reported, as Istio reports the conflict.

use std::{
    borrow::Cow,
    collections::BTreeMap,
    sync::{Arc, LazyLock},
};

use api::networking::gateway::{Server, server_tls_settings::TlSmode};
use model::Protocol;

use crate::{
    cache::{SharedGatewayServers, Snapshot},
    naming::{gateway_http_route_name, gateway_https_route_name},
};
use model::{
    Finding, Severity, host,
    push::{IndexedGateway, IndexedVirtualService, ProxyContext, ProxyKind, PushContext},
};

/// What one server does with its traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServerKind {
    /// Plain HTTP (also HTTP with `httpsRedirect`).
    Http,
    /// HTTPS terminated with the server's certificate, then HTTP routes.
    HttpsTerminated,
    /// TLS not terminated, routed on SNI by TLS routes.
    TlsPassthrough,
    /// TLS terminated, then TCP routes.
    TlsTerminatedTcp,
    /// Opaque TCP, by TCP routes.
    Tcp,
}

/// The traffic a merged port serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortKind {
    /// Plain HTTP.
    Http,
    /// TLS: terminated and passthrough servers, matched on SNI.
    Tls,
    /// Opaque TCP.
    Tcp,
}

impl ServerKind {
    fn port_kind(self) -> PortKind {
        match self {
            ServerKind::Http => PortKind::Http,
            ServerKind::Tcp => PortKind::Tcp,
            _ => PortKind::Tls,
        }
    }
}

/// One server of one gateway.
#[derive(Clone, Debug)]
pub(crate) struct GatewayServer {
    pub gateway: Arc<IndexedGateway>,
    pub index: usize,
    pub kind: ServerKind,
    /// The server's own port number (`spec.servers[].port.number`): what VirtualService `match.port`
    /// and virtual host names (`host:PORT`) see. The listener port can differ ([`resolve_ports`]).
    pub port: u32,
}

impl GatewayServer {
    pub fn server(&self) -> &Server {
        static NONE: LazyLock<Server> = LazyLock::new(Server::default);
        self.gateway.spec().servers.get(self.index).unwrap_or(&NONE)
    }

    pub fn path(&self) -> String {
        format!("spec.servers[{}]", self.index)
    }

    /// Whether the server's TLS mode is `AUTO_PASSTHROUGH` (SNI-DNAT: the SNI names the cluster).
    pub fn is_auto_passthrough(&self) -> bool {
        self.server().tls.as_ref().is_some_and(|t| t.mode == TlSmode::AutoPassthrough as i32)
    }

    pub fn namespace(&self) -> &str {
        &self.gateway.config.meta.namespace
    }

    /// The route configuration name of an HTTP or terminated HTTPS server listened on `port` (the
    /// resolved listener port), as Istio's `gatewayRDSRouteName(server, resolvedPort, …)`: an HTTP
    /// server's name carries the listener port (`http.8080`), a terminated HTTPS server's its own port
    /// number (`https.443.https.gw.ns` even when a Service maps 443 to a target port 8443); a server
    /// with a `bind` adds `.BIND` (`http.8080.127.0.0.1`).
    pub fn route_name(&self, port: u32) -> String {
        let name = match self.kind {
            ServerKind::HttpsTerminated => gateway_https_route_name(
                self.port,
                self.server().port.as_ref().map_or("", |p| p.name.as_str()),
                &self.gateway.config.meta.name,
                self.namespace(),
            ),
            _ => gateway_http_route_name(port),
        };
        match self.server().bind.as_str() {
            "" => name,
            bind => format!("{name}.{bind}"),
        }
    }

    /// `false` for a terminating server whose TLS context cannot be built for a router that holds
    /// (`workload_certificates`) or lacks an Istio workload certificate (it gets no listener filter
    /// chain, so its routes are not asked for either).
    pub fn servable(&self, workload_certificates: bool) -> bool {
        match self.kind {
            ServerKind::HttpsTerminated | ServerKind::TlsTerminatedTcp => self
                .server()
                .tls
                .as_ref()
                .is_some_and(|t| crate::tls::downstream(t, &[], workload_certificates).context.is_some()),
            _ => true,
        }
    }

    /// The server's hosts as `(namespace, host)`: `*` namespace when none is written, `.` replaced by
    /// the gateway's namespace; hosts lower-cased.
    pub fn hosts(&self) -> Vec<(String, String)> {
        self.host_refs().map(|(ns, h)| (ns.to_string(), h.into_owned())).collect()
    }

    /// [`GatewayServer::hosts`] without copies (a host is only copied when it has upper-case letters).
    fn host_refs(&self) -> impl Iterator<Item = (&str, Cow<'_, str>)> {
        self.server().hosts.iter().map(|h| {
            let (ns, host) = match h.split_once('/') {
                Some((".", host)) => (self.namespace(), host),
                Some((ns, host)) => (ns, host),
                None => ("*", h.as_str()),
            };
            let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
                Cow::Owned(host.to_ascii_lowercase())
            } else {
                Cow::Borrowed(host)
            };
            (ns, host)
        })
    }

    /// The hosts both the server (for a VirtualService in `vs`'s namespace) and `vs` name, the more
    /// specific of each matching pair (Istio's `Intersection`), without duplicates.
    pub fn intersect(&self, vs: &IndexedVirtualService) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (ns, server_host) in self.host_refs() {
            if ns != "*" && ns != vs.namespace() {
                continue;
            }
            for vs_host in &vs.hosts {
                if let Some(h) = host::intersect(&server_host, vs_host)
                    && !out.iter().any(|o| o == h)
                {
                    out.push(h.to_string());
                }
            }
        }
        out
    }
}

/// A gateway listener: its port and `bind` address (empty: the proxy's bind address).
pub(crate) type ListenerKey = (u32, String);

/// The servers on one listener port.
#[derive(Clone, Debug)]
pub(crate) struct MergedPort {
    pub kind: PortKind,
    pub servers: Vec<GatewayServer>,
}

fn server_kind(server: &Server) -> Option<ServerKind> {
    let protocol = Protocol::parse(server.port.as_ref().map_or("", |p| p.protocol.as_str()));
    let tls_mode = server.tls.as_ref().map(|t| t.mode);
    let passthrough = |m: i32| m == TlSmode::Passthrough as i32 || m == TlSmode::AutoPassthrough as i32;
    Some(match protocol {
        Protocol::Http | Protocol::Http2 | Protocol::Grpc | Protocol::GrpcWeb => ServerKind::Http,
        Protocol::Https => match tls_mode {
            Some(m) if passthrough(m) => ServerKind::TlsPassthrough,
            Some(_) => ServerKind::HttpsTerminated,
            None => return None,
        },
        Protocol::Tls => match tls_mode {
            Some(m) if !passthrough(m) => ServerKind::TlsTerminatedTcp,
            _ => ServerKind::TlsPassthrough,
        },
        Protocol::Tcp | Protocol::Mongo | Protocol::Redis | Protocol::MySql => ServerKind::Tcp,
        _ => return None,
    })
}

/// The label on a Service that turns gateway port translation off for gateways selecting by labels
/// (Istio's `DisableGatewayPortTranslationLabel`): a Gateway port then has to be the target port.
pub const DISABLE_PORT_TRANSLATION_LABEL: &str = "experimental.istio.io/disable-gateway-port-translation";

/// One service port a gateway proxy serves, as [`resolve_ports`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GatewayServicePort {
    /// The service port number (what a Gateway server's port refers to).
    pub port: u32,
    /// The port on the proxy (the Service's `targetPort`, the endpoint's port).
    pub target_port: u32,
    /// The service carries [`DISABLE_PORT_TRANSLATION_LABEL`].
    pub no_translation: bool,
}

/// The ports a gateway server on port `number` is listened on (Istio's `resolvePorts`,
/// `pilot/pkg/model/gateway.go`): a Gateway names a *service* port and the proxy listens on its
/// target port (a Service port 80 → 8080 gives a listener on 8080).
///
/// - A gateway selecting by labels (`by_labels`) takes the first service port with that number and
///   binds its target port, or the number itself when no service port has it (a proxy without
///   services, or a port the services do not declare); services labelled
///   [`DISABLE_PORT_TRANSLATION_LABEL`] are not looked at.
/// - A gateway naming its services (Gateway API) binds every distinct target port of the service
///   ports with that number, and nothing when there is none (the server is not served).
///
/// Sorted, without repeats.
pub(crate) fn resolve_ports(
    number: u32,
    ports: impl IntoIterator<Item = GatewayServicePort>,
    by_labels: bool,
) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for p in ports {
        if by_labels && p.no_translation {
            continue;
        }
        if p.port == number {
            if by_labels {
                return vec![p.target_port];
            }
            out.push(p.target_port);
        }
    }
    if out.is_empty() && by_labels {
        return vec![number];
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The port numbers (`spec.servers[].port.number`) of the HTTP and terminated HTTPS servers of `proxy`
/// whose route configuration is `route_name`, sorted: Istio's `GatewayPortMap` entry, which EnvoyFilter
/// `routeConfiguration.portNumber` matches on gateways. Empty when no server produces that name.
pub(crate) fn route_server_ports(push: &Snapshot, proxy: &ProxyContext, route_name: &str) -> Vec<u32> {
    let mut ports: Vec<u32> = servers(push, proxy)
        .0
        .iter()
        .flat_map(|((port, _), merged)| merged.servers.iter().map(move |s| (*port, s)))
        .filter(|(port, s)| {
            matches!(s.kind, ServerKind::Http | ServerKind::HttpsTerminated)
                && s.route_name(*port) == route_name
        })
        .map(|(_, s)| s.port)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// The merged servers of the gateways selecting `proxy` ([`merge`]), from the generation cache.
pub(crate) fn servers(push: &Snapshot, proxy: &ProxyContext) -> SharedGatewayServers {
    push.gateway_servers(proxy, || {
        let mut findings = Vec::new();
        Arc::new((merge(push, proxy, &mut findings), findings))
    })
}

/// Whether a gateway selecting `proxy` has an `AUTO_PASSTHROUGH` server (Istio's
/// `MergedGateway.ContainsAutoPassthroughGateways`): the router then gets the SNI-DNAT clusters.
pub(crate) fn has_auto_passthrough(push: &Snapshot, proxy: &ProxyContext) -> bool {
    servers(push, proxy).0.values().any(|m| m.servers.iter().any(GatewayServer::is_auto_passthrough))
}

impl Snapshot {
    /// Computes what the generators look up per proxy and keeps it in the cache: the sidecar scope
    /// and, for routers, the merged gateway servers (Istio's `SetSidecarScope` and
    /// `SetGatewaysForProxy`, done when a proxy connects or a push starts). Optional: the generators
    /// compute whatever is missing on first use.
    pub fn init_proxy(&self, proxy: &ProxyContext) {
        self.sidecar_scope(proxy);
        if proxy.kind == ProxyKind::Router && !proxy.proxyless_grpc {
            servers(self, proxy);
        }
    }
}

/// The servers of the gateways selecting `proxy`, by the port they are listened on
/// ([`resolve_ports`]) and their `bind` address (Istio's `ServerPort{Number, Protocol, Bind}`:
/// servers with different binds on one port are separate listeners, and conflict only with servers
/// of the same bind).
pub(crate) fn merge(
    push: &PushContext,
    proxy: &ProxyContext,
    findings: &mut Vec<Finding>,
) -> BTreeMap<ListenerKey, MergedPort> {
    let mut ports: BTreeMap<ListenerKey, MergedPort> = BTreeMap::new();
    for gateway in push.gateways_for_proxy(proxy) {
        let by_labels = gateway.selects_by_labels();
        let service_ports: Vec<GatewayServicePort> = gateway
            .service_instances(proxy)
            .map(|i| GatewayServicePort {
                port: i.service_port.port,
                target_port: if i.endpoint.endpoint_port > 0 {
                    i.endpoint.endpoint_port
                } else {
                    i.service_port.port
                },
                no_translation: i.service.labels.contains_key(DISABLE_PORT_TRANSLATION_LABEL),
            })
            .collect();
        for (index, server) in gateway.spec().servers.iter().enumerate() {
            // Field paths are only formatted for a finding (this loop runs for every server).
            let mut report = |severity: Severity, field: &str, message: String| {
                findings.push(Finding {
                    severity,
                    config: Some(gateway.config.key()),
                    path: format!("spec.servers[{index}]{field}"),
                    resource: String::new(),
                    message,
                })
            };
            let Some(port) = server.port.as_ref().filter(|p| p.number > 0) else {
                report(
                    Severity::Dropped,
                    "",
                    "server without a port number (Unix sockets are not served)".into(),
                );
                continue;
            };
            if !server.default_endpoint.is_empty() {
                report(
                    Severity::Unsupported,
                    ".defaultEndpoint",
                    "defaultEndpoint is not implemented".into(),
                );
            }
            let Some(kind) = server_kind(server) else {
                report(
                    Severity::Dropped,
                    ".port.protocol",
                    format!("protocol {:?} (with this TLS mode) is not served on gateways", port.protocol),
                );
                continue;
            };
            let listen_on = resolve_ports(port.number, service_ports.iter().copied(), by_labels);
            if listen_on.is_empty() {
                report(
                    Severity::Dropped,
                    ".port.number",
                    format!(
                        "port {} is not a port of the gateway service(s) {}; nothing listens for this server",
                        port.number,
                        gateway
                            .config
                            .meta
                            .annotations
                            .get(model::push::GATEWAY_SERVICE_ANNOTATION)
                            .map_or("", |s| s)
                    ),
                );
                continue;
            }
            for listener_port in listen_on {
                let entry = ports
                    .entry((listener_port, server.bind.clone()))
                    .or_insert_with(|| MergedPort { kind: kind.port_kind(), servers: Vec::new() });
                if entry.kind != kind.port_kind()
                    || (entry.kind == PortKind::Tcp && !entry.servers.is_empty())
                {
                    report(
                        Severity::Dropped,
                        "",
                        format!(
                            "port {listener_port}{} already serves {:?} traffic from another server; this server is left out",
                            if server.bind.is_empty() {
                                String::new()
                            } else {
                                format!(" on {}", server.bind)
                            },
                            entry.kind
                        ),
                    );
                    continue;
                }
                entry.servers.push(GatewayServer {
                    gateway: gateway.clone(),
                    index,
                    kind,
                    port: port.number,
                });
            }
        }
    }
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(port: u32, target_port: u32) -> GatewayServicePort {
        GatewayServicePort { port, target_port, no_translation: false }
    }

    #[test]
    fn label_selected_gateways_bind_the_first_target_port_or_the_number_itself() {
        // Istio's ingress gateway Service: 80 → 8080, 443 → 8443.
        let svc = [sp(15021, 15021), sp(80, 8080), sp(443, 8443), sp(80, 9090)];
        assert_eq!(resolve_ports(80, svc, true), [8080], "first match wins");
        assert_eq!(resolve_ports(443, svc, true), [8443]);
        assert_eq!(resolve_ports(8080, svc, true), [8080], "no service port 8080: bound as written");
        assert_eq!(resolve_ports(80, [], true), [80], "a proxy without services binds the port itself");
    }

    #[test]
    fn the_opt_out_label_skips_a_service_for_label_selected_gateways_only() {
        let opted_out = GatewayServicePort { port: 80, target_port: 8080, no_translation: true };
        assert_eq!(resolve_ports(80, [opted_out], true), [80]);
        assert_eq!(resolve_ports(80, [opted_out, sp(80, 8081)], true), [8081]);
        assert_eq!(resolve_ports(80, [opted_out], false), [8080], "Gateway API references are exact");
    }

    #[test]
    fn service_named_gateways_bind_every_target_port_and_nothing_without_one() {
        let svc = [sp(80, 8080), sp(80, 8081), sp(80, 8080), sp(443, 8443)];
        assert_eq!(resolve_ports(80, svc, false), [8080, 8081]);
        assert_eq!(resolve_ports(8080, svc, false), Vec::<u32>::new());
    }
}
