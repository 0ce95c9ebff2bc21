//! Gateway validation, following Istio's `ValidateGateway` (pkg/config/validation/validation.go) and the
//! functions it calls: `validateServer`, `validateServerPort`, `validateServerBind` and
//! `validateTLSOptions`, plus `ValidateNamespaceSlashWildcardHostname` for server hosts. The CRD's
//! `maxItems: 2` on `tls.credentialNames` and `tls.tlsCertificates` is enforced as well.

use crate::common::check_enum;
use std::collections::BTreeSet;

use api::{
    meta::ObjectMeta,
    networking::gateway::{Port, Server, ServerTlsSettings, server_tls_settings::TlSmode},
    protocol::Protocol,
    wkt::ProtoEnum,
};

use crate::{
    Report,
    common::{
        go_quote, is_dns1123_label, validate_ip_address, validate_namespace_slash_wildcard_hostname,
        validate_port, validate_unix_address,
    },
};

/// Annotation Istio sets on Gateways it generates from Gateway API resources.
const GATEWAY_SEMANTICS_ANNOTATION: &str = "internal.istio.io/gateway-semantics";

/// Prefix of a server `bind` naming a Unix domain socket.
const UNIX_ADDRESS_PREFIX: &str = "unix://";

/// Cipher suites Envoy (BoringSSL) accepts in `tls.cipherSuites` (Istio's `ValidCipherSuites`).
const VALID_CIPHER_SUITES: [&str; 15] = [
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

/// Most entries the CRD allows in `tls.credentialNames` and `tls.tlsCertificates`.
const MAX_SERVER_CERTIFICATES: usize = 2;

/// Validates a Gateway; findings use paths from the document root (`spec.…`).
///
/// Gateways generated from the Gateway API (annotation `internal.istio.io/gateway-semantics: gateway`)
/// may have any name and may use `~/host` for servers without routes.
pub fn validate(meta: &ObjectMeta, spec: &api::networking::Gateway, report: &mut Report) {
    let gateway_semantics =
        meta.annotations.get(GATEWAY_SEMANTICS_ANNOTATION).is_some_and(|v| v == "gateway");

    // An empty name is reported by the metadata checks (or filled in from `generateName`).
    if !meta.name.is_empty() && !is_dns1123_label(&meta.name) && !gateway_semantics {
        report.error("metadata.name", format!("invalid gateway name: {}", go_quote(&meta.name)));
    }

    if spec.servers.is_empty() {
        report.error("spec.servers", "gateway must have at least one server");
    }
    for (i, server) in spec.servers.iter().enumerate() {
        validate_server(server, gateway_semantics, &format!("spec.servers[{i}]"), report);
    }

    let mut port_names = BTreeSet::new();
    for (i, server) in spec.servers.iter().enumerate() {
        let Some(port) = &server.port else { continue };
        if !port_names.insert(port.name.as_str()) {
            report.error(
                format!("spec.servers[{i}].port.name"),
                format!("port names in servers must be unique: duplicate name {}", port.name),
            );
        }
        let https_redirect = server.tls.as_ref().is_some_and(|t| t.https_redirect);
        if https_redirect && !Protocol::parse(&port.protocol).is_http() {
            report.warn(
                format!("spec.servers[{i}].tls.httpsRedirect"),
                "tls.httpsRedirect should only be used with http servers",
            );
        }
    }
}

/// Istio's `validateServer`: hosts, port, bind address, TLS options, and whether the protocol and the
/// TLS settings go together.
fn validate_server(server: &Server, gateway_semantics: bool, path: &str, report: &mut Report) {
    if server.hosts.is_empty() {
        report.error(format!("{path}.hosts"), "server config must contain at least one host");
    }
    for (j, host) in server.hosts.iter().enumerate() {
        report.check(
            format!("{path}.hosts[{j}]"),
            validate_namespace_slash_wildcard_hostname(host, true, gateway_semantics),
        );
    }

    let port_ok = validate_server_port(server.port.as_ref(), &server.bind, path, report);
    validate_server_bind(server.port.as_ref(), &server.bind, path, report);
    if let Some(tls) = &server.tls {
        validate_tls_options(tls, &format!("{path}.tls"), report);
    }

    // Only when the port itself is valid is its protocol compared with the TLS settings.
    let Some(port) = server.port.as_ref().filter(|_| port_ok) else { return };
    let protocol = Protocol::parse(&port.protocol);
    match &server.tls {
        None if protocol.is_tls() => {
            report.error(format!("{path}.tls"), "server must have TLS settings for HTTPS/TLS protocols");
        }
        Some(tls) if !protocol.is_tls() => {
            if protocol.is_http() {
                // Plain-text HTTP servers may only ask for an HTTPS redirect (a passthrough `tls` block).
                let passthrough = is_passthrough(tls);
                if !passthrough
                    || !tls.ca_certificates.is_empty()
                    || !tls.private_key.is_empty()
                    || !tls.server_certificate.is_empty()
                {
                    report.error(
                        format!("{path}.tls"),
                        "server cannot have TLS settings for plain text HTTP ports",
                    );
                }
            } else {
                report
                    .error(format!("{path}.tls"), "server cannot have TLS settings for non HTTPS/TLS ports");
            }
        }
        _ => {}
    }
}

/// `true` for the TLS passthrough modes (Istio's `gateway.IsPassThroughServer`).
fn is_passthrough(tls: &ServerTlsSettings) -> bool {
    tls.mode == TlSmode::Passthrough as i32 || tls.mode == TlSmode::AutoPassthrough as i32
}

/// Istio's `validateServerPort`; returns `true` when it found nothing wrong.
fn validate_server_port(port: Option<&Port>, bind: &str, path: &str, report: &mut Report) -> bool {
    let Some(port) = port else {
        report.error(format!("{path}.port"), "port is required");
        return false;
    };
    let before = report.errors.len();
    if Protocol::parse(&port.protocol).is_unsupported() {
        report.error(
            format!("{path}.port.protocol"),
            format!(
                "invalid protocol {}, supported protocols are HTTP, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP",
                go_quote(&port.protocol)
            ),
        );
    }
    if port.number > 0 || !bind.starts_with(UNIX_ADDRESS_PREFIX) {
        report.check(format!("{path}.port.number"), validate_port(i64::from(port.number)));
    }
    if port.target_port > 0 {
        report.error(format!("{path}.port.targetPort"), "targetPort has no impact on Gateways");
    }
    if port.name.is_empty() {
        report.error(format!("{path}.port.name"), format!("port name must be set: {}", port_text(port)));
    }
    report.errors.len() == before
}

/// Istio's `validateServerBind`: a Unix domain socket (`unix://…`, with port number 0) or an IP address.
fn validate_server_bind(port: Option<&Port>, bind: &str, path: &str, report: &mut Report) {
    if let Some(socket) = bind.strip_prefix(UNIX_ADDRESS_PREFIX) {
        report.check(format!("{path}.bind"), validate_unix_address(socket));
        if let Some(port) = port.filter(|p| p.number != 0) {
            report.error(
                format!("{path}.port.number"),
                format!("port number must be 0 for unix domain socket: {}", port_text(port)),
            );
        }
    } else if !bind.is_empty() {
        report.check(format!("{path}.bind"), validate_ip_address(bind));
    }
}

/// A port in protobuf text form, as Go's `%v` prints the message (`number:80 name:"http"`).
fn port_text(port: &Port) -> String {
    let mut parts = Vec::new();
    if port.number != 0 {
        parts.push(format!("number:{}", port.number));
    }
    if !port.protocol.is_empty() {
        parts.push(format!("protocol:{}", go_quote(&port.protocol)));
    }
    if !port.name.is_empty() {
        parts.push(format!("name:{}", go_quote(&port.name)));
    }
    if port.target_port != 0 {
        parts.push(format!("target_port:{}", port.target_port));
    }
    parts.join(" ")
}

/// The name of a server TLS mode as Istio prints it (`PASSTHROUGH`; a number the enum lacks as is).
fn mode_name(mode: i32) -> String {
    TlSmode::name_of(mode).map_or_else(|| mode.to_string(), str::to_owned)
}

/// `true` for a cipher suite entry Istio accepts (`security.IsValidCipherSuite`): a known suite, empty,
/// `ALL`, or an expression starting with an operator (`-`, `+`, `!`, …).
pub fn is_valid_cipher_suite(suite: &str) -> bool {
    // Istio looks at the first byte, read as a Latin-1 character.
    match suite.as_bytes().first() {
        None => true,
        Some(first) => {
            suite == "ALL" || !char::from(*first).is_alphanumeric() || VALID_CIPHER_SUITES.contains(&suite)
        }
    }
}

/// Istio's `validateTLSOptions` for a server's `tls` block at `path`.
pub(crate) fn validate_tls_options(tls: &ServerTlsSettings, path: &str, report: &mut Report) {
    use api::networking::gateway::server_tls_settings::TlsProtocol;

    let mode = tls.mode;
    check_enum::<TlSmode>(format!("{path}.mode"), mode, report);
    check_enum::<TlsProtocol>(format!("{path}.minProtocolVersion"), tls.min_protocol_version, report);
    check_enum::<TlsProtocol>(format!("{path}.maxProtocolVersion"), tls.max_protocol_version, report);
    if (tls.min_protocol_version == TlsProtocol::Tlsv10 as i32
        || tls.min_protocol_version == TlsProtocol::Tlsv11 as i32)
        && tls.cipher_suites.is_empty()
    {
        report.warn(
            format!("{path}.minProtocolVersion"),
            "TLS version below TLSV1_2 require setting compatible ciphers as by default they no longer include compatible ciphers.",
        );
    }

    let mut invalid = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut duplicates = BTreeSet::new();
    for suite in &tls.cipher_suites {
        if !is_valid_cipher_suite(suite) {
            invalid.insert(suite.as_str());
        } else if !seen.insert(suite.as_str()) {
            duplicates.insert(suite.as_str());
        }
    }
    if !invalid.is_empty() {
        let list: Vec<&str> = invalid.into_iter().collect();
        report.warn(
            format!("{path}.cipherSuites"),
            format!("ignoring invalid cipher suites: [{}]", list.join(" ")),
        );
    }
    if !duplicates.is_empty() {
        let list: Vec<&str> = duplicates.into_iter().collect();
        report.warn(
            format!("{path}.cipherSuites"),
            format!("ignoring duplicate cipher suites: [{}]", list.join(" ")),
        );
    }

    // The CRD allows at most two certificates (one RSA, one ECDSA).
    for (field, count) in
        [("credentialNames", tls.credential_names.len()), ("tlsCertificates", tls.tls_certificates.len())]
    {
        if count > MAX_SERVER_CERTIFICATES {
            report.error(
                format!("{path}.{field}"),
                format!("Too many: {count}: must have at most {MAX_SERVER_CERTIFICATES} items"),
            );
        }
    }

    if mode == TlSmode::IstioMutual as i32 {
        // Istio's own certificates are used; any other certificate source is a mistake.
        for (field, set) in [
            ("serverCertificate", !tls.server_certificate.is_empty()),
            ("privateKey", !tls.private_key.is_empty()),
            ("caCertificates", !tls.ca_certificates.is_empty()),
            ("tlsCertificates", !tls.tls_certificates.is_empty()),
            ("credentialName", !tls.credential_name.is_empty()),
            ("credentialNames", !tls.credential_names.is_empty()),
        ] {
            if set {
                let what = match field {
                    "serverCertificate" => "server certificate",
                    "privateKey" => "private key",
                    "caCertificates" => "CA bundle",
                    other => other,
                };
                report.error(
                    format!("{path}.{field}"),
                    format!("ISTIO_MUTUAL TLS cannot have associated {what}"),
                );
            }
        }
        return;
    }

    if (mode == TlSmode::Passthrough as i32 || mode == TlSmode::AutoPassthrough as i32)
        && (!tls.ca_crl.is_empty()
            || !tls.server_certificate.is_empty()
            || !tls.private_key.is_empty()
            || !tls.ca_certificates.is_empty()
            || !tls.tls_certificates.is_empty()
            || !tls.credential_name.is_empty()
            || !tls.credential_names.is_empty())
    {
        report
            .warn(path, format!("{} mode does not use certificates, they will be ignored", mode_name(mode)));
    }

    let sources = [
        !tls.server_certificate.is_empty() && !tls.private_key.is_empty(),
        !tls.credential_name.is_empty(),
        !tls.credential_names.is_empty(),
        !tls.tls_certificates.is_empty(),
    ];
    if sources.iter().filter(|s| **s).count() > 1 {
        report.error(
            path,
            "only one of credential_name, credential_names, server_certificate/private_key, tls_certificates should be specified",
        );
    }

    let terminating = mode == TlSmode::Simple as i32
        || mode == TlSmode::Mutual as i32
        || mode == TlSmode::OptionalMutual as i32;
    // With a credential name the certificates are fetched from the cluster (SDS).
    if terminating && (!tls.credential_name.is_empty() || !tls.credential_names.is_empty()) {
        return;
    }
    if terminating {
        let prefix = if mode == TlSmode::Simple as i32 { "SIMPLE TLS" } else { "MUTUAL TLS" };
        if prefix == "MUTUAL TLS" && tls.ca_certificates.is_empty() {
            report.error(format!("{path}.caCertificates"), format!("{prefix} requires a client CA bundle"));
        }
        if tls.tls_certificates.len() > MAX_SERVER_CERTIFICATES {
            report.warn(
                format!("{path}.tlsCertificates"),
                format!("{prefix} can support up to 2 server certificates"),
            );
        }
        if tls.tls_certificates.is_empty() {
            if tls.server_certificate.is_empty() {
                report.error(
                    format!("{path}.serverCertificate"),
                    format!("{prefix} requires a server certificate"),
                );
            }
            if tls.private_key.is_empty() {
                report.error(format!("{path}.privateKey"), format!("{prefix} requires a private key"));
            }
        }
        for (k, cert) in tls.tls_certificates.iter().enumerate() {
            if cert.server_certificate.is_empty() {
                report.error(
                    format!("{path}.tlsCertificates[{k}].serverCertificate"),
                    format!("{prefix} requires a server certificate"),
                );
            }
            if cert.private_key.is_empty() {
                report.error(
                    format!("{path}.tlsCertificates[{k}].privateKey"),
                    format!("{prefix} requires a private key"),
                );
            }
        }
    }
    if !tls.ca_crl.is_empty() {
        if !tls.credential_name.is_empty() {
            report.error(
                format!("{path}.caCrl"),
                "CRL is not supported with credentialName. CRL has to be specified in the credential",
            );
        }
        if mode == TlSmode::Simple as i32 {
            report.error(format!("{path}.caCrl"), "CRL is not supported with SIMPLE TLS");
        }
    }
}

#[cfg(test)]
mod tests {
    use api::networking::Gateway;

    use super::*;
    use crate::testutil::{
        Want::{self, Error, Valid, Warning},
        check, meta, run, spec,
    };

    fn check_all(cases: &[(&str, &str, Want)]) {
        crate::testutil::check_all::<Gateway>(validate, &meta("gw", "ns"), cases);
    }

    /// A gateway with one server: the given port and TLS block (flow-style YAML), host `foo.bar.com`.
    fn server(port: &str, tls: &str) -> String {
        let tls = if tls.is_empty() { String::new() } else { format!(", tls: {tls}") };
        format!("servers: [{{hosts: [foo.bar.com], port: {port}{tls}}}]")
    }

    const HTTP7: &str = "{number: 7, name: http, protocol: http}";
    const HTTPS443: &str = "{number: 443, name: https, protocol: HTTPS}";

    #[test]
    fn gateway_cases_from_istio() {
        check_all(&[
            ("empty", "{}", Error("spec.servers", "gateway must have at least one server")),
            (
                "happy domain",
                "servers: [{hosts: [foo.bar.com], port: {name: name1, number: 7, protocol: http}}]",
                Valid,
            ),
            (
                "gateway-api ~ namespace without gateway semantics",
                "servers: [{hosts: [~/foo.bar.com], port: {name: name1, number: 7, protocol: http}}]",
                Error("spec.servers[0].hosts[0]", "invalid namespace value \"~\" in gateway"),
            ),
            (
                "invalid port",
                "servers: [{hosts: [foo.bar.com], port: {name: name1, number: 66000, protocol: http}}]",
                Error("spec.servers[0].port.number", "port number 66000 must be in the range 1..65535"),
            ),
            (
                "duplicate port names",
                "servers:\n- {hosts: [foo.bar.com], port: {name: foo, number: 80, protocol: http}}\n- {hosts: [scooby.doo.com], port: {name: foo, number: 8080, protocol: http}}",
                Error(
                    "spec.servers[1].port.name",
                    "port names in servers must be unique: duplicate name foo",
                ),
            ),
            (
                "invalid domain",
                "servers: [{hosts: [foo.*.bar.com], port: {number: 7, protocol: http}}]",
                Error("spec.servers[0].hosts[0]", "partial wildcard \"foo.*.bar.com\" not allowed"),
            ),
            (
                "port without name",
                "servers: [{hosts: [foo.bar.com], port: {number: 7, protocol: http}}]",
                Error("spec.servers[0].port.name", "port name must be set: number:7 protocol:\"http\""),
            ),
            (
                "valid httpsRedirect",
                "servers: [{hosts: [bar.com], port: {name: http, number: 80, protocol: http}, tls: {httpsRedirect: true}}]",
                Valid,
            ),
            (
                "httpsRedirect on an https server",
                "servers: [{hosts: [bar.com], port: {name: https, number: 80, protocol: https}, tls: {httpsRedirect: true}}]",
                Warning(
                    "spec.servers[0].tls.httpsRedirect",
                    "tls.httpsRedirect should only be used with http servers",
                ),
            ),
            (
                "invalid partial wildcard",
                "servers: [{hosts: ['*bar.com'], port: {name: tls, number: 443, protocol: tls}, tls: {mode: ISTIO_MUTUAL}}]",
                Error("spec.servers[0].hosts[0]", "partial wildcard \"*bar.com\" not allowed"),
            ),
            (
                "no servers key but a selector",
                "selector: {istio: ingressgateway}",
                Error("spec.servers", "gateway must have at least one server"),
            ),
        ]);
    }

    #[test]
    fn gateway_semantics_allow_tilde_namespace_and_any_name() {
        let mut m = meta("gateway~istio-autogenerated~foo", "ns");
        m.annotations.insert(GATEWAY_SEMANTICS_ANNOTATION.into(), "gateway".into());
        let gw = spec::<Gateway>(
            "servers: [{hosts: [~/foo.bar.com], port: {name: name1, number: 7, protocol: http}}]",
        );
        check("k8s gateway", &run(validate, &m, &gw), Valid);
    }

    #[test]
    fn gateway_name_must_be_a_dns_label() {
        let gw = spec::<Gateway>(&server(HTTP7, ""));
        check(
            "dotted name",
            &run(validate, &meta("foo.bar", "ns"), &gw),
            Error("metadata.name", "invalid gateway name: \"foo.bar\""),
        );
        check("plain name", &run(validate, &meta("foo-bar", "ns"), &gw), Valid);
    }

    #[test]
    fn server_cases_from_istio() {
        check_all(&[
            (
                "empty server",
                "servers: [{}]",
                Error("spec.servers[0].hosts", "server config must contain at least one host"),
            ),
            ("empty server port", "servers: [{}]", Error("spec.servers[0].port", "port is required")),
            ("happy", &server(HTTP7, ""), Valid),
            ("happy ip", &format!("servers: [{{hosts: [1.1.1.1], port: {HTTP7}}}]"), Valid),
            ("happy ns/name", &format!("servers: [{{hosts: [ns1/foo.bar.com], port: {HTTP7}}}]"), Valid),
            ("happy */name", &format!("servers: [{{hosts: ['*/foo.bar.com'], port: {HTTP7}}}]"), Valid),
            ("happy ./name", &format!("servers: [{{hosts: [./foo.bar.com], port: {HTTP7}}}]"), Valid),
            (
                "invalid domain ns/name format",
                &format!("servers: [{{hosts: [ns1/foo.*.bar.com], port: {HTTP7}}}]"),
                Error("spec.servers[0].hosts[0]", "partial wildcard \"foo.*.bar.com\" not allowed"),
            ),
            (
                "invalid short name host",
                &format!("servers: [{{hosts: [foo], port: {HTTP7}}}]"),
                Error("spec.servers[0].hosts[0]", "short names (non FQDN) are not allowed"),
            ),
            (
                "invalid tls options",
                &server("{number: 1, name: http, protocol: http}", "{mode: SIMPLE}"),
                Error("spec.servers[0].tls.serverCertificate", "SIMPLE TLS requires a server certificate"),
            ),
            (
                "no tls on HTTPS",
                &server("{number: 10000, name: https, protocol: https}", ""),
                Error("spec.servers[0].tls", "server must have TLS settings for HTTPS/TLS protocols"),
            ),
            (
                "tls on HTTP",
                &server("{number: 10000, name: http, protocol: http}", "{mode: SIMPLE, credentialName: foo}"),
                Error("spec.servers[0].tls", "server cannot have TLS settings for plain text HTTP ports"),
            ),
            (
                "tls on TCP",
                &server("{number: 10000, name: tcp, protocol: TCP}", "{mode: SIMPLE, credentialName: foo}"),
                Error("spec.servers[0].tls", "server cannot have TLS settings for non HTTPS/TLS ports"),
            ),
            (
                "passthrough certificate on HTTP",
                &server(HTTP7, "{httpsRedirect: true, serverCertificate: /cert}"),
                Error("spec.servers[0].tls", "server cannot have TLS settings for plain text HTTP ports"),
            ),
            (
                "tls redirect on HTTP",
                &server("{number: 10000, name: http, protocol: http}", "{httpsRedirect: true}"),
                Valid,
            ),
            (
                "bind ip",
                "servers: [{hosts: [foo.bar.com], port: {number: 7, name: http, protocol: http}, bind: 127.0.0.1}]",
                Valid,
            ),
            (
                "bind unix path with invalid port",
                "servers: [{hosts: [foo.bar.com], port: {number: 7, name: http, protocol: http}, bind: 'unix://@foobar'}]",
                Error("spec.servers[0].port.number", "port number must be 0 for unix domain socket"),
            ),
            (
                "bind unix path",
                "servers: [{hosts: [foo.bar.com], port: {number: 0, name: http, protocol: http}, bind: 'unix://@foobar'}]",
                Valid,
            ),
            (
                "bind relative unix path",
                "servers: [{hosts: [foo.bar.com], port: {number: 0, name: http, protocol: http}, bind: 'unix://foo'}]",
                Error("spec.servers[0].bind", "foo is not an absolute path to a file"),
            ),
            (
                "bind bad ip",
                "servers: [{hosts: [foo.bar.com], port: {number: 0, name: http, protocol: http}, bind: foo.bar}]",
                Error("spec.servers[0].bind", "foo.bar is not a valid IP"),
            ),
            ("https with credential", &server(HTTPS443, "{mode: SIMPLE, credentialName: cert}"), Valid),
            (
                "tls passthrough",
                &server("{number: 443, name: tls, protocol: TLS}", "{mode: PASSTHROUGH}"),
                Valid,
            ),
            (
                "auto passthrough",
                &server("{number: 15443, name: tls, protocol: TLS}", "{mode: AUTO_PASSTHROUGH}"),
                Valid,
            ),
        ]);
    }

    #[test]
    fn server_port_cases_from_istio() {
        check_all(&[
            (
                "empty port: protocol",
                "servers: [{hosts: [foo.bar.com], port: {}}]",
                Error("spec.servers[0].port.protocol", "invalid protocol \"\", supported protocols are HTTP"),
            ),
            (
                "empty port: name",
                "servers: [{hosts: [foo.bar.com], port: {}}]",
                Error("spec.servers[0].port.name", "port name must be set"),
            ),
            (
                "happy",
                "servers: [{hosts: [foo.bar.com], port: {protocol: http, number: 1, name: Henry}}]",
                Valid,
            ),
            (
                "invalid protocol",
                "servers: [{hosts: [foo.bar.com], port: {protocol: kafka, number: 1, name: Henry}}]",
                Error("spec.servers[0].port.protocol", "invalid protocol \"kafka\""),
            ),
            (
                "invalid number",
                "servers: [{hosts: [foo.bar.com], port: {protocol: http, number: 1073741824, name: http}}]",
                Error("spec.servers[0].port.number", "port number 1073741824 must be in the range 1..65535"),
            ),
            (
                "name, no number",
                "servers: [{hosts: [foo.bar.com], port: {protocol: http, number: 0, name: Henry}}]",
                Error("spec.servers[0].port.number", "port number 0 must be in the range 1..65535"),
            ),
            (
                "name, no number, uds",
                "servers: [{hosts: [foo.bar.com], port: {protocol: http, number: 0, name: Henry}, bind: 'uds:///tmp'}]",
                Error("spec.servers[0].port.number", "port number 0"),
            ),
            (
                "target port",
                "servers: [{hosts: [foo.bar.com], port: {protocol: http, number: 80, name: http, targetPort: 8080}}]",
                Error("spec.servers[0].port.targetPort", "targetPort has no impact on Gateways"),
            ),
        ]);
    }

    #[test]
    fn tls_option_cases_from_istio() {
        let https = |tls: &str| server(HTTPS443, tls);
        let path = "spec.servers[0].tls";
        check_all(&[
            ("empty", &https("{}"), Valid),
            ("simple", &https("{mode: SIMPLE, serverCertificate: a, privateKey: b}"), Valid),
            (
                "simple with client bundle",
                &https("{mode: SIMPLE, serverCertificate: a, privateKey: b, caCertificates: c}"),
                Valid,
            ),
            ("simple sds", &https("{mode: SIMPLE, credentialName: sds-name}"), Valid),
            (
                "simple sds with server cert",
                &https("{mode: SIMPLE, serverCertificate: a, privateKey: b, credentialName: sds-name}"),
                Error(
                    path,
                    "only one of credential_name, credential_names, server_certificate/private_key, tls_certificates",
                ),
            ),
            (
                "simple no server cert",
                &https("{mode: SIMPLE, privateKey: b}"),
                Error("spec.servers[0].tls.serverCertificate", "SIMPLE TLS requires a server certificate"),
            ),
            (
                "simple no private key",
                &https("{mode: SIMPLE, serverCertificate: a}"),
                Error("spec.servers[0].tls.privateKey", "SIMPLE TLS requires a private key"),
            ),
            (
                "simple more than 2 certs (the CRD allows two)",
                &https(
                    "{mode: SIMPLE, tlsCertificates: [{serverCertificate: a, privateKey: b}, {serverCertificate: c, privateKey: d}, {serverCertificate: e, privateKey: f}]}",
                ),
                Error("spec.servers[0].tls.tlsCertificates", "Too many: 3: must have at most 2 items"),
            ),
            (
                "simple with both server cert and tls certs",
                &https(
                    "{mode: SIMPLE, serverCertificate: a, privateKey: b, tlsCertificates: [{serverCertificate: a, privateKey: b}]}",
                ),
                Error(path, "only one of credential_name, credential_names"),
            ),
            (
                "simple 2 certs with missing certificate",
                &https(
                    "{mode: SIMPLE, tlsCertificates: [{privateKey: b}, {serverCertificate: c, privateKey: d}]}",
                ),
                Error(
                    "spec.servers[0].tls.tlsCertificates[0].serverCertificate",
                    "SIMPLE TLS requires a server certificate",
                ),
            ),
            (
                "simple 2 certs with missing private key",
                &https(
                    "{mode: SIMPLE, tlsCertificates: [{serverCertificate: a}, {serverCertificate: c, privateKey: d}]}",
                ),
                Error(
                    "spec.servers[0].tls.tlsCertificates[0].privateKey",
                    "SIMPLE TLS requires a private key",
                ),
            ),
            (
                "simple sds no server cert",
                &https("{mode: SIMPLE, privateKey: b, credentialName: sds-name}"),
                Valid,
            ),
            (
                "mutual",
                &https("{mode: MUTUAL, serverCertificate: a, privateKey: b, caCertificates: c}"),
                Valid,
            ),
            ("mutual sds", &https("{mode: MUTUAL, caCertificates: c, credentialName: sds-name}"), Valid),
            (
                "mutual sds with credential name and tls certs",
                &https(
                    "{mode: MUTUAL, caCertificates: c, credentialName: sds, tlsCertificates: [{serverCertificate: a, privateKey: b}]}",
                ),
                Error(path, "only one of credential_name, credential_names"),
            ),
            (
                "credential names and certificates",
                &https(
                    "{mode: MUTUAL, serverCertificate: a, privateKey: b, credentialNames: [server-certs]}",
                ),
                Error(path, "only one of credential_name, credential_names"),
            ),
            (
                "only tls certificates",
                &https(
                    "{mode: MUTUAL, caCertificates: c, tlsCertificates: [{serverCertificate: a, privateKey: b}]}",
                ),
                Valid,
            ),
            (
                "mutual no client CA bundle",
                &https("{mode: MUTUAL, serverCertificate: a, privateKey: b}"),
                Error("spec.servers[0].tls.caCertificates", "MUTUAL TLS requires a client CA bundle"),
            ),
            (
                "mutual no certs: server certificate",
                &https("{mode: MUTUAL}"),
                Error("spec.servers[0].tls.serverCertificate", "MUTUAL TLS requires a server certificate"),
            ),
            (
                "mutual no certs: private key",
                &https("{mode: MUTUAL}"),
                Error("spec.servers[0].tls.privateKey", "MUTUAL TLS requires a private key"),
            ),
            (
                "optional mutual no certs",
                &https("{mode: OPTIONAL_MUTUAL}"),
                Error("spec.servers[0].tls.caCertificates", "MUTUAL TLS requires a client CA bundle"),
            ),
            (
                "mutual 2 certs with missing CA certificate",
                &https(
                    "{mode: MUTUAL, tlsCertificates: [{serverCertificate: a, privateKey: b}, {serverCertificate: c, privateKey: d}]}",
                ),
                Error("spec.servers[0].tls.caCertificates", "MUTUAL TLS requires a client CA bundle"),
            ),
            (
                "pass through sds no certs",
                &https("{mode: PASSTHROUGH, credentialName: sds-name}"),
                Warning(path, "PASSTHROUGH mode does not use certificates, they will be ignored"),
            ),
            (
                "pass through crl",
                &https("{mode: PASSTHROUGH, caCrl: scrl}"),
                Warning(path, "PASSTHROUGH mode does not use certificates"),
            ),
            ("istio_mutual no certs", &https("{mode: ISTIO_MUTUAL}"), Valid),
            (
                "istio_mutual with server cert",
                &https("{mode: ISTIO_MUTUAL, serverCertificate: a}"),
                Error(
                    "spec.servers[0].tls.serverCertificate",
                    "ISTIO_MUTUAL TLS cannot have associated server certificate",
                ),
            ),
            (
                "istio_mutual with client bundle",
                &https("{mode: ISTIO_MUTUAL, caCertificates: c}"),
                Error(
                    "spec.servers[0].tls.caCertificates",
                    "ISTIO_MUTUAL TLS cannot have associated CA bundle",
                ),
            ),
            (
                "istio_mutual with private key",
                &https("{mode: ISTIO_MUTUAL, privateKey: b}"),
                Error(
                    "spec.servers[0].tls.privateKey",
                    "ISTIO_MUTUAL TLS cannot have associated private key",
                ),
            ),
            (
                "istio_mutual with credential name",
                &https("{mode: ISTIO_MUTUAL, credentialName: some-cred}"),
                Error(
                    "spec.servers[0].tls.credentialName",
                    "ISTIO_MUTUAL TLS cannot have associated credentialName",
                ),
            ),
            (
                "invalid cipher suites",
                &https("{mode: SIMPLE, credentialName: sds-name, cipherSuites: [not-a-cipher-suite]}"),
                Warning(
                    "spec.servers[0].tls.cipherSuites",
                    "ignoring invalid cipher suites: [not-a-cipher-suite]",
                ),
            ),
            (
                "valid cipher suites",
                &https("{mode: SIMPLE, credentialName: sds-name, cipherSuites: [ECDHE-ECDSA-AES128-SHA]}"),
                Valid,
            ),
            (
                "cipher suites operations",
                &https("{mode: SIMPLE, credentialName: sds-name, cipherSuites: [-ECDHE-ECDSA-AES128-SHA]}"),
                Valid,
            ),
            (
                "duplicate cipher suites",
                &https(
                    "{mode: SIMPLE, credentialName: sds-name, cipherSuites: [ECDHE-ECDSA-AES128-SHA, ECDHE-ECDSA-AES128-SHA]}",
                ),
                Warning(
                    "spec.servers[0].tls.cipherSuites",
                    "ignoring duplicate cipher suites: [ECDHE-ECDSA-AES128-SHA]",
                ),
            ),
            (
                "invalid cipher suites with invalid config",
                &https("{mode: SIMPLE, cipherSuites: [not-a-cipher-suite]}"),
                Error("spec.servers[0].tls.privateKey", "SIMPLE TLS requires a private key"),
            ),
            (
                "crl specified for SIMPLE TLS",
                &https("{mode: SIMPLE, caCrl: crl, serverCertificate: a, privateKey: b}"),
                Error("spec.servers[0].tls.caCrl", "CRL is not supported with SIMPLE TLS"),
            ),
            (
                "crl specified with credentialName in SIMPLE mode",
                &https("{mode: SIMPLE, caCrl: crl, credentialName: credential}"),
                Valid,
            ),
            (
                "crl with credentialName in PASSTHROUGH mode",
                &https("{mode: PASSTHROUGH, caCrl: crl, credentialName: credential}"),
                Error("spec.servers[0].tls.caCrl", "CRL is not supported with credentialName"),
            ),
            (
                "with CredentialNames",
                &https("{mode: MUTUAL, credentialNames: [credential1, credential2]}"),
                Valid,
            ),
            (
                "three credential names",
                &https("{mode: MUTUAL, credentialNames: [a, b, c]}"),
                Error("spec.servers[0].tls.credentialNames", "Too many: 3: must have at most 2 items"),
            ),
            (
                "old protocol without ciphers",
                &https("{mode: SIMPLE, credentialName: c, minProtocolVersion: TLSV1_1}"),
                Warning(
                    "spec.servers[0].tls.minProtocolVersion",
                    "TLS version below TLSV1_2 require setting compatible ciphers",
                ),
            ),
            (
                "unknown mode number",
                &https("{mode: 9, credentialName: c}"),
                Error("spec.servers[0].tls.mode", "Unsupported value: 9: supported values: \"PASSTHROUGH\""),
            ),
        ]);
    }
}
