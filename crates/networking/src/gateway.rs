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

use crate::naming::{gateway_http_route_name, gateway_https_route_name};
use model::{
    Finding, Severity, host,
    push::{IndexedGateway, IndexedVirtualService, ProxyContext, PushContext},
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
}

impl GatewayServer {
    pub fn server(&self) -> &Server {
        static NONE: LazyLock<Server> = LazyLock::new(Server::default);
        self.gateway.spec().servers.get(self.index).unwrap_or(&NONE)
    }

    pub fn path(&self) -> String {
        format!("spec.servers[{}]", self.index)
    }

    pub fn namespace(&self) -> &str {
        &self.gateway.config.meta.namespace
    }

    /// The route configuration name of an HTTP or terminated HTTPS server.
    pub fn route_name(&self, port: u32) -> String {
        match self.kind {
            ServerKind::HttpsTerminated => gateway_https_route_name(
                port,
                self.server().port.as_ref().map_or("", |p| p.name.as_str()),
                &self.gateway.config.meta.name,
                self.namespace(),
            ),
            _ => gateway_http_route_name(port),
        }
    }

    /// `false` for a terminating server whose TLS context cannot be built (it gets no listener filter
    /// chain, so its routes are not asked for either).
    pub fn servable(&self) -> bool {
        match self.kind {
            ServerKind::HttpsTerminated | ServerKind::TlsTerminatedTcp => {
                self.server().tls.as_ref().is_some_and(|t| crate::tls::downstream(t, &[]).context.is_some())
            }
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

/// The servers on one port.
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

/// The servers of the gateways selecting `proxy`, by port number.
pub(crate) fn merge(
    push: &PushContext,
    proxy: &ProxyContext,
    findings: &mut Vec<Finding>,
) -> BTreeMap<u32, MergedPort> {
    let mut ports: BTreeMap<u32, MergedPort> = BTreeMap::new();
    for gateway in push.gateways_for_proxy(proxy) {
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
            if !server.bind.is_empty() {
                report(Severity::Unsupported, ".bind", "servers listen on the proxy's bind address".into());
            }
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
            let entry = ports
                .entry(port.number)
                .or_insert_with(|| MergedPort { kind: kind.port_kind(), servers: Vec::new() });
            if entry.kind != kind.port_kind() || (entry.kind == PortKind::Tcp && !entry.servers.is_empty()) {
                report(
                    Severity::Dropped,
                    "",
                    format!(
                        "port {} already serves {:?} traffic from another server; this server is left out",
                        port.number, entry.kind
                    ),
                );
                continue;
            }
            entry.servers.push(GatewayServer { gateway: gateway.clone(), index, kind });
        }
    }
    ports
}
