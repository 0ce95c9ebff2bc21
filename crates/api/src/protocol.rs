//! Istio's application protocols of a port (`pkg/config/protocol`): the names Istio accepts in port
//! names, `appProtocol` and ServiceEntry / Gateway / Sidecar ports, and what each protocol implies for
//! the proxy (HTTP or TCP handling, HTTP/2, TLS).
//!
//! Shared by validation (which protocol names are known) and the service model (a port's protocol,
//! [`convert_protocol`] for Kubernetes Service ports).

use std::fmt;

/// A port's application protocol, as Istio names them (`protocol.Instance`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// gRPC (`GRPC`).
    Grpc,
    /// gRPC-Web (`GRPC-Web`).
    GrpcWeb,
    /// HTTP/1.1 (`HTTP`).
    Http,
    /// A generic outbound HTTP proxy port (`HTTP_PROXY`), for Sidecar egress listeners.
    HttpProxy,
    /// HTTP/2 (`HTTP2`).
    Http2,
    /// HTTPS (`HTTPS`).
    Https,
    /// Opaque TCP (`TCP`), the default of a Service port.
    Tcp,
    /// TLS with SNI (`TLS`).
    Tls,
    /// UDP (`UDP`); the proxy does not handle it.
    Udp,
    /// MongoDB (`Mongo`).
    Mongo,
    /// Redis (`Redis`).
    Redis,
    /// MySQL (`MySQL`).
    MySql,
    /// HBONE tunnels (`HBONE`); internal, never parsed from a name.
    Hbone,
    /// Double HBONE (`DoubleHBONE`); internal, never parsed from a name.
    DoubleHbone,
    /// Not a protocol Istio knows (`UnsupportedProtocol`); traffic is sniffed.
    Unsupported,
}

impl Protocol {
    /// Reads a protocol name ignoring case, as Istio's `protocol.Parse` does; unknown names give
    /// [`Protocol::Unsupported`].
    ///
    /// `HBONE` and `DoubleHBONE` are never returned: Istio's parser does not accept them either (it
    /// compares the lower-cased input with the mixed-case text `DoubleHBONE`, which never matches).
    pub fn parse(name: &str) -> Protocol {
        let lower = go_lowercase(name);
        match lower.as_str() {
            "tcp" => Protocol::Tcp,
            "udp" => Protocol::Udp,
            "grpc" => Protocol::Grpc,
            "grpc-web" => Protocol::GrpcWeb,
            "http" => Protocol::Http,
            "http_proxy" => Protocol::HttpProxy,
            "http2" => Protocol::Http2,
            "https" => Protocol::Https,
            "tls" => Protocol::Tls,
            "mongo" => Protocol::Mongo,
            "redis" => Protocol::Redis,
            "mysql" => Protocol::MySql,
            _ => Protocol::Unsupported,
        }
    }

    /// Istio's name of the protocol (`HTTP`, `GRPC-Web`, `UnsupportedProtocol`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "GRPC",
            Protocol::GrpcWeb => "GRPC-Web",
            Protocol::Http => "HTTP",
            Protocol::HttpProxy => "HTTP_PROXY",
            Protocol::Http2 => "HTTP2",
            Protocol::Https => "HTTPS",
            Protocol::Tcp => "TCP",
            Protocol::Tls => "TLS",
            Protocol::Udp => "UDP",
            Protocol::Mongo => "Mongo",
            Protocol::Redis => "Redis",
            Protocol::MySql => "MySQL",
            Protocol::Hbone => "HBONE",
            Protocol::DoubleHbone => "DoubleHBONE",
            Protocol::Unsupported => "UnsupportedProtocol",
        }
    }

    /// `true` for protocols carried over HTTP/2 (HTTP2, gRPC, gRPC-Web).
    pub fn is_http2(self) -> bool {
        matches!(self, Protocol::Http2 | Protocol::Grpc | Protocol::GrpcWeb)
    }

    /// `true` for protocols carried over HTTP (HTTP, HTTP2, HTTP_PROXY, gRPC, gRPC-Web).
    pub fn is_http(self) -> bool {
        matches!(
            self,
            Protocol::Http | Protocol::Http2 | Protocol::HttpProxy | Protocol::Grpc | Protocol::GrpcWeb
        )
    }

    /// `true` for HTTP protocols and for unknown ones (which may turn out to be HTTP when sniffed).
    pub fn is_http_or_sniffed(self) -> bool {
        self.is_http() || self.is_unsupported()
    }

    /// `true` for protocols handled as TCP streams (TCP, HTTPS, TLS, Mongo, Redis, MySQL).
    pub fn is_tcp(self) -> bool {
        matches!(
            self,
            Protocol::Tcp
                | Protocol::Https
                | Protocol::Tls
                | Protocol::Mongo
                | Protocol::Redis
                | Protocol::MySql
        )
    }

    /// `true` for protocols on top of TLS (HTTPS, TLS).
    pub fn is_tls(self) -> bool {
        matches!(self, Protocol::Https | Protocol::Tls)
    }

    /// `true` for HTTPS.
    pub fn is_https(self) -> bool {
        self == Protocol::Https
    }

    /// `true` for gRPC and gRPC-Web.
    pub fn is_grpc(self) -> bool {
        matches!(self, Protocol::Grpc | Protocol::GrpcWeb)
    }

    /// `true` for [`Protocol::Unsupported`].
    pub fn is_unsupported(self) -> bool {
        self == Protocol::Unsupported
    }

    /// The protocol seen once TLS is terminated: HTTPS becomes HTTP, TLS becomes TCP, others stay.
    pub fn after_tls_termination(self) -> Protocol {
        match self {
            Protocol::Https => Protocol::Http,
            Protocol::Tls => Protocol::Tcp,
            other => other,
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Lower-cases text the way Go's `strings.ToLower` does for the characters that matter when comparing
/// with ASCII names: besides ASCII letters, Go maps `İ` (U+0130) to `i` and the Kelvin sign to `k`.
fn go_lowercase(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{130}' => 'i',
            '\u{212A}' => 'k',
            c if c.is_ascii() => c.to_ascii_lowercase(),
            c => {
                let mut lower = c.to_lowercase();
                match (lower.next(), lower.next()) {
                    (Some(l), None) => l,
                    _ => c,
                }
            }
        })
        .collect()
}

/// Ports on which Istio assumes TCP when the name gives no protocol (SMTP, DNS, MySQL, MongoDB), so that
/// sniffing does not break server-first protocols.
const WELL_KNOWN_TCP_PORTS: [i32; 4] = [25, 53, 3306, 27017];

/// The protocol Istio derives for a Kubernetes Service port, following `kube.ConvertProtocol`.
///
/// - `k8s_protocol` `"UDP"` gives UDP;
/// - otherwise `app_protocol` (if set) wins over `port_name`, with the Kubernetes names
///   `kubernetes.io/h2c` (HTTP2), `kubernetes.io/ws` (HTTP) and `kubernetes.io/wss` (HTTPS);
/// - a name starting with `grpc-web` (any case) is gRPC-Web; otherwise the text before the first `-`
///   is parsed with [`Protocol::parse`];
/// - an unknown protocol on a well-known port (25, 53, 3306, 27017) is TCP.
pub fn convert_protocol(
    port: i32,
    port_name: &str,
    k8s_protocol: &str,
    app_protocol: Option<&str>,
) -> Protocol {
    if k8s_protocol == "UDP" {
        return Protocol::Udp;
    }
    let mut name = port_name;
    if let Some(app) = app_protocol {
        match app {
            "kubernetes.io/h2c" => return Protocol::Http2,
            "kubernetes.io/ws" => return Protocol::Http,
            "kubernetes.io/wss" => return Protocol::Https,
            _ => name = app,
        }
    }
    if name.get(..8).is_some_and(|head| head.eq_ignore_ascii_case("grpc-web")) {
        return Protocol::GrpcWeb;
    }
    let prefix = name.split('-').next().unwrap_or("");
    let protocol = Protocol::parse(prefix);
    if protocol.is_unsupported() && WELL_KNOWN_TCP_PORTS.contains(&port) {
        return Protocol::Tcp;
    }
    protocol
}

/// The protocol a port name declares by Istio's `<protocol>[-<suffix>]` convention, as the service
/// registry reads it ([`convert_protocol`] for a TCP port without `appProtocol` or well-known number):
/// `http-api` is HTTP, `grpc-web-x` is gRPC-Web, `api` is [`Protocol::Unsupported`].
pub fn protocol_from_port_name(name: &str) -> Protocol {
    convert_protocol(0, name, "TCP", None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convert_protocol_follows_istio() {
        let cases: [(i32, &str, &str, Option<&str>, Protocol); 16] = [
            (80, "http", "TCP", None, Protocol::Http),
            (80, "http-test", "TCP", None, Protocol::Http),
            (80, "HTTP-test", "TCP", None, Protocol::Http),
            (80, "grpc-web", "TCP", None, Protocol::GrpcWeb),
            (80, "grpc-web-test", "TCP", None, Protocol::GrpcWeb),
            (80, "GRPC-WEB-x", "TCP", None, Protocol::GrpcWeb),
            (80, "grpc-test", "TCP", None, Protocol::Grpc),
            (80, "tcp", "UDP", None, Protocol::Udp),
            (80, "", "TCP", None, Protocol::Unsupported),
            (3306, "", "TCP", None, Protocol::Tcp),
            (53, "dns", "TCP", None, Protocol::Tcp),
            (80, "foo", "TCP", Some("http"), Protocol::Http),
            (80, "http", "TCP", Some("kubernetes.io/h2c"), Protocol::Http2),
            (80, "http", "TCP", Some("kubernetes.io/ws"), Protocol::Http),
            (80, "http", "TCP", Some("kubernetes.io/wss"), Protocol::Https),
            (80, "http", "TCP", Some("weird"), Protocol::Unsupported),
        ];
        for (port, name, proto, app, want) in cases {
            assert_eq!(convert_protocol(port, name, proto, app), want, "{port} {name} {proto} {app:?}");
        }
        assert_eq!(protocol_from_port_name("mongo-db"), Protocol::Mongo);
        assert_eq!(protocol_from_port_name("grpc-webby"), Protocol::GrpcWeb);
    }

    #[test]
    fn protocol_parse_follows_istio() {
        let cases = [
            ("tcp", Protocol::Tcp),
            ("TCP", Protocol::Tcp),
            ("udp", Protocol::Udp),
            ("grpc", Protocol::Grpc),
            ("GRPC-Web", Protocol::GrpcWeb),
            ("http", Protocol::Http),
            ("Http_Proxy", Protocol::HttpProxy),
            ("http2", Protocol::Http2),
            ("HTTPS", Protocol::Https),
            ("tls", Protocol::Tls),
            ("Mongo", Protocol::Mongo),
            ("redis", Protocol::Redis),
            ("MYSQL", Protocol::MySql),
            ("DoubleHBONE", Protocol::Unsupported),
            ("hbone", Protocol::Unsupported),
            ("", Protocol::Unsupported),
            ("h2c", Protocol::Unsupported),
            ("REDİS", Protocol::Redis),
        ];
        for (name, want) in cases {
            assert_eq!(Protocol::parse(name), want, "{name}");
        }
        assert_eq!(Protocol::GrpcWeb.to_string(), "GRPC-Web");
        assert!(Protocol::Unsupported.is_http_or_sniffed());
        assert!(Protocol::Grpc.is_http2() && Protocol::Grpc.is_http() && !Protocol::Grpc.is_tcp());
        assert_eq!(Protocol::Https.after_tls_termination(), Protocol::Http);
        assert_eq!(Protocol::Tls.after_tls_termination(), Protocol::Tcp);
    }
}
