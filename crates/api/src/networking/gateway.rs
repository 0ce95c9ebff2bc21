//! `Gateway` (`networking.istio.io`): a load balancer at the edge of the mesh, described as the
//! ports, protocols, hosts and TLS settings its proxies listen with.
//!
//! Follows `networking/v1alpha3/gateway.proto` of the Istio API (`istio.networking.v1alpha3`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wkt::is_default;

/// The servers (listeners) exposed by the gateway proxies selected by `selector`.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Gateway {
    /// The listeners to open. Required.
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub servers: Vec<Server>,
    /// Labels of the gateway pods that apply this configuration (searched in all namespaces unless
    /// restricted by istiod settings).
    #[prost(btree_map = "string, string", tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub selector: BTreeMap<String, String>,
}

/// One listener of a gateway: a port, the hosts served on it and its TLS settings.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Server {
    /// The port to listen on. Required.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: Option<Port>,
    /// IP or Unix domain socket (`unix:///path`, `unix://@abstract`) to bind to instead of all
    /// addresses; with a socket the port number should be 0.
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub bind: String,
    /// Hosts served, as `[namespace/]dnsName` (`*` or `.` namespaces, wildcard left-most label
    /// allowed); VirtualServices bound to the gateway must match one. Required.
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub hosts: Vec<String>,
    /// TLS settings (HTTPS redirect, termination or passthrough).
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub tls: Option<ServerTlsSettings>,
    /// Loopback address or socket to forward traffic to by default (not implemented by Istio).
    #[prost(string, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub default_endpoint: String,
    /// Server name, unique among the gateway's servers; used e.g. as a stats prefix.
    #[prost(string, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
}

/// A port: number, protocol and name.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Port {
    /// Port number. Required.
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub number: u32,
    /// Protocol: `HTTP`, `HTTPS`, `GRPC`, `GRPC-WEB`, `HTTP2`, `MONGO`, `TCP` or `TLS`. Required.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub protocol: String,
    /// Port name. Required.
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Deprecated: no replacement (only meaningful in ServiceEntry ports). Endpoint port traffic is
    /// sent to.
    #[prost(uint32, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_port: u32,
}

/// TLS settings of a gateway server.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerTlsSettings {
    /// Answer plain HTTP requests with a 301 redirect to HTTPS. Default false.
    #[prost(bool, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub https_redirect: bool,
    /// How TLS is handled on this server; default `PASSTHROUGH`.
    #[prost(enumeration = "server_tls_settings::TlSmode", tag = "2")]
    #[serde(with = "server_tls_settings::TlSmode", skip_serializing_if = "is_default")]
    pub mode: i32,
    /// Path of the server certificate file (for `SIMPLE`/`MUTUAL` without `credentialName`).
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub server_certificate: String,
    /// Path of the server private key file (for `SIMPLE`/`MUTUAL` without `credentialName`).
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub private_key: String,
    /// Path of the CA bundle verifying client certificates (for `MUTUAL`/`OPTIONAL_MUTUAL`).
    #[prost(string, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub ca_certificates: String,
    /// Path of a certificate revocation list checked against client certificates.
    #[prost(string, tag = "13")]
    #[serde(skip_serializing_if = "is_default")]
    pub ca_crl: String,
    /// Name of a Kubernetes secret holding the certificate, key (and optionally CA, CRL); not with
    /// the file paths, `credentialNames` or `tlsCertificates`.
    #[prost(string, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub credential_name: String,
    /// Like `credentialName`, for one or two secrets (e.g. RSA and ECDSA); not with
    /// `credentialName` or `tlsCertificates`.
    #[prost(string, repeated, tag = "14")]
    #[serde(skip_serializing_if = "is_default")]
    pub credential_names: Vec<String>,
    /// Secret or ConfigMap holding the CA certificates for mutual TLS; takes precedence over the CA
    /// in the credential secret.
    #[prost(string, tag = "16")]
    #[serde(skip_serializing_if = "is_default")]
    pub ca_cert_credential_name: String,
    /// One or two certificate/key file pairs (e.g. RSA and ECDSA); not with `credentialName(s)`.
    #[prost(message, repeated, tag = "15")]
    #[serde(skip_serializing_if = "is_default")]
    pub tls_certificates: Vec<server_tls_settings::TlsCertificate>,
    /// Names accepted in client certificates' subject alt names (`MUTUAL`).
    #[prost(string, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub subject_alt_names: Vec<String>,
    /// Base64 SHA-256 hashes of the SPKIs of accepted client certificates.
    #[prost(string, repeated, tag = "11")]
    #[serde(skip_serializing_if = "is_default")]
    pub verify_certificate_spki: Vec<String>,
    /// Hex SHA-256 hashes (plain or colon-separated) of accepted client certificates.
    #[prost(string, repeated, tag = "12")]
    #[serde(skip_serializing_if = "is_default")]
    pub verify_certificate_hash: Vec<String>,
    /// Minimum TLS version; `TLS_AUTO` means TLS 1.2.
    #[prost(enumeration = "server_tls_settings::TlsProtocol", tag = "7")]
    #[serde(with = "server_tls_settings::TlsProtocol", skip_serializing_if = "is_default")]
    pub min_protocol_version: i32,
    /// Maximum TLS version; `TLS_AUTO` means the proxy default.
    #[prost(enumeration = "server_tls_settings::TlsProtocol", tag = "8")]
    #[serde(with = "server_tls_settings::TlsProtocol", skip_serializing_if = "is_default")]
    pub max_protocol_version: i32,
    /// Allowed cipher suites; empty means the proxy defaults.
    #[prost(string, repeated, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub cipher_suites: Vec<String>,
    /// Skip verifying client certificates' CA signature and SAN. Default false.
    #[prost(message, optional, tag = "17")]
    #[serde(skip_serializing_if = "is_default")]
    pub insecure_skip_verify: Option<bool>,
}

/// Messages and enums nested in [`ServerTlsSettings`].
pub mod server_tls_settings {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    crate::proto_enum! {
        /// TLS modes of a gateway server (proto `TLSmode`).
        pub enum TlSmode {
            /// Do not terminate TLS; route on the client's SNI with VirtualService TLS routes.
            Passthrough = 0 => "PASSTHROUGH",
            /// Terminate TLS without requesting a client certificate.
            Simple = 1 => "SIMPLE",
            /// Terminate TLS and require a valid client certificate.
            Mutual = 2 => "MUTUAL",
            /// Passthrough routed on SNI-encoded cluster names, without VirtualServices
            /// (east-west gateways; both ends use Istio mTLS).
            AutoPassthrough = 3 => "AUTO_PASSTHROUGH",
            /// Mutual TLS with Istio-issued workload certificates (other fields must be empty).
            IstioMutual = 4 => "ISTIO_MUTUAL",
            /// Terminate TLS, request a client certificate and verify it if one is sent.
            OptionalMutual = 5 => "OPTIONAL_MUTUAL",
        }
    }

    crate::proto_enum! {
        /// TLS protocol versions.
        pub enum TlsProtocol {
            /// Let the proxy choose.
            TlsAuto = 0 => "TLS_AUTO",
            /// TLS 1.0.
            Tlsv10 = 1 => "TLSV1_0",
            /// TLS 1.1.
            Tlsv11 = 2 => "TLSV1_1",
            /// TLS 1.2.
            Tlsv12 = 3 => "TLSV1_2",
            /// TLS 1.3.
            Tlsv13 = 4 => "TLSV1_3",
        }
    }

    /// A server certificate and key given as file paths.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct TlsCertificate {
        /// Path of the server certificate file.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub server_certificate: String,
        /// Path of the server private key file.
        #[prost(string, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub private_key: String,
        /// Path of a CA bundle verifying client certificates (not documented by Istio).
        #[prost(string, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub ca_certificates: String,
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::{
        de::{UnknownField, from_node},
        schema::Kind,
        test_corpus::{Scope, check_corpus, spec_node},
    };

    fn decode(text: &str) -> (Gateway, Vec<UnknownField>) {
        from_node::<Gateway>(&spec_node(text), "spec").unwrap()
    }

    const SAMPLE: &str = r#"
selector:
  istio: ingressgateway
servers:
- port: {number: 80, name: http, protocol: HTTP}
  hosts: ["*.example.com"]
  tls: {httpsRedirect: true}
- name: https-main
  port: {number: 443, name: https, protocol: HTTPS}
  bind: 0.0.0.0
  hosts: [prod/www.example.com, "./api.example.com"]
  tls:
    mode: MUTUAL
    credentialName: example-cert
    caCertCredentialName: example-ca
    subjectAltNames: [spiffe://cluster.local/ns/a/sa/b]
    verifyCertificateSpki: [abc=]
    verifyCertificateHash: ["AB:CD"]
    minProtocolVersion: TLSV1_2
    maxProtocolVersion: TLSV1_3
    cipherSuites: [ECDHE-RSA-AES128-GCM-SHA256]
    caCrl: /etc/crl.pem
    insecureSkipVerify: false
- port: {number: 8443, name: https-multi, protocol: HTTPS}
  hosts: ["*"]
  tls:
    mode: SIMPLE
    tlsCertificates:
    - {serverCertificate: /etc/rsa.crt, privateKey: /etc/rsa.key}
    - {serverCertificate: /etc/ec.crt, privateKey: /etc/ec.key, caCertificates: /etc/ca.crt}
- port: {number: 15443, name: tls, protocol: TLS, targetPort: 15443}
  hosts: ["*.local"]
  tls: {mode: AUTO_PASSTHROUGH, credentialNames: [rsa, ecdsa]}
"#;

    #[test]
    fn decodes_a_realistic_spec() {
        let (gw, unknown) = decode(SAMPLE);
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(gw.selector["istio"], "ingressgateway");
        assert_eq!(gw.servers.len(), 4);
        let s0 = &gw.servers[0];
        assert_eq!(
            s0.port,
            Some(Port { number: 80, protocol: "HTTP".into(), name: "http".into(), target_port: 0 })
        );
        assert!(s0.tls.as_ref().unwrap().https_redirect);
        let s1 = &gw.servers[1];
        assert_eq!(s1.name, "https-main");
        assert_eq!(s1.bind, "0.0.0.0");
        let tls = s1.tls.as_ref().unwrap();
        assert_eq!(tls.mode, server_tls_settings::TlSmode::Mutual as i32);
        assert_eq!(tls.credential_name, "example-cert");
        assert_eq!(tls.ca_cert_credential_name, "example-ca");
        assert_eq!(tls.min_protocol_version, server_tls_settings::TlsProtocol::Tlsv12 as i32);
        assert_eq!(tls.max_protocol_version, server_tls_settings::TlsProtocol::Tlsv13 as i32);
        assert_eq!(tls.verify_certificate_hash, ["AB:CD"]);
        assert_eq!(tls.insecure_skip_verify, Some(false));
        let certs = &gw.servers[2].tls.as_ref().unwrap().tls_certificates;
        assert_eq!(certs[1].ca_certificates, "/etc/ca.crt");
        let s3 = &gw.servers[3];
        assert_eq!(s3.port.as_ref().unwrap().target_port, 15443);
        let tls = s3.tls.as_ref().unwrap();
        assert_eq!(tls.mode, server_tls_settings::TlSmode::AutoPassthrough as i32);
        assert_eq!(tls.credential_names, ["rsa", "ecdsa"]);
    }

    #[test]
    fn misspelt_fields_are_reported_with_their_path() {
        let text = "servers:\n- port: {number: 80, name: http, protocol: HTTP}\n  hosts: ['*']\n  tls: {mode: SIMPLE, credentialname: x}\nselectors: {app: gw}\n";
        let (gw, unknown) = decode(text);
        assert!(gw.selector.is_empty());
        let paths: Vec<&str> = unknown.iter().map(|u| u.path.as_str()).collect();
        assert_eq!(paths, ["spec.servers[0].tls.credentialname", "spec.selectors"]);
        assert_eq!(unknown[0].mark.line, 4);
    }

    #[test]
    fn unknown_tls_mode_is_an_error() {
        let text = "servers:\n- tls: {mode: STRICT}\n";
        let err = from_node::<Gateway>(&spec_node(text), "spec").unwrap_err();
        assert_eq!(err.path, "spec.servers[0].tls.mode");
        assert!(err.message.contains("OPTIONAL_MUTUAL"), "{err}");
    }

    #[test]
    fn protobuf_round_trip() {
        let (gw, _) = decode(SAMPLE);
        assert_eq!(Gateway::decode(&*gw.encode_to_vec()).unwrap(), gw);
    }

    #[test]
    fn wire_format_uses_istio_field_numbers() {
        // Server: port (1) { number (1) = 80 }, bind (4) = "b", name (6) = "n".
        let server = Server {
            port: Some(Port { number: 80, ..Default::default() }),
            bind: "b".into(),
            name: "n".into(),
            ..Default::default()
        };
        assert_eq!(server.encode_to_vec(), [0x0a, 2, 0x08, 80, 0x22, 1, b'b', 0x32, 1, b'n']);
        // ServerTLSSettings: mode (2) = MUTUAL (2), credentialNames (14) = ["x"],
        // caCertCredentialName (16) = "y" (tag 16 << 3 | 2 = 0x82 0x01),
        // insecureSkipVerify (17) BoolValue {1: true} (tag 0x8a 0x01).
        let tls = ServerTlsSettings {
            mode: server_tls_settings::TlSmode::Mutual as i32,
            credential_names: vec!["x".into()],
            ca_cert_credential_name: "y".into(),
            insecure_skip_verify: Some(true),
            ..Default::default()
        };
        assert_eq!(
            tls.encode_to_vec(),
            [0x10, 2, 0x72, 1, b'x', 0x82, 0x01, 1, b'y', 0x8a, 0x01, 2, 0x08, 1]
        );
        // Gateway.selector is map field 2: entry {key (1) = "k", value (2) = "v"}.
        let gw = Gateway { selector: [("k".to_string(), "v".to_string())].into(), ..Default::default() };
        assert_eq!(gw.encode_to_vec(), [0x12, 6, 0x0a, 1, b'k', 0x12, 1, b'v']);
    }

    #[test]
    fn json_output_uses_istio_names_and_omits_defaults() {
        let text = "servers:\n- port: {number: 443, name: https, protocol: HTTPS, targetPort: 0}\n  hosts: [a]\n  tls: {mode: PASSTHROUGH, httpsRedirect: false, minProtocolVersion: TLSV1_3, caCertCredentialName: ca}\n";
        let (gw, _) = decode(text);
        assert_eq!(
            serde_json::to_value(&gw).unwrap(),
            serde_json::json!({
                "servers": [{
                    "port": {"number": 443, "name": "https", "protocol": "HTTPS"},
                    "hosts": ["a"],
                    "tls": {"minProtocolVersion": "TLSV1_3", "caCertCredentialName": "ca"}
                }]
            })
        );
    }

    #[test]
    fn corpus_gateways_decode() {
        let n = check_corpus::<Gateway>(Kind::Gateway, Scope::Valid, &[]);
        assert!(n > 0);
    }
}
