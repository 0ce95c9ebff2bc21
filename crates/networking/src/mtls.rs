//! Istio mutual TLS between workloads (for proxies with workload certificates, see
//! [`model::push::ProxyContext::has_workload_certificates`]): the SDS references to pilot-agent's
//! secrets, the downstream context of inbound chains, the upstream context of `ISTIO_MUTUAL` clusters and
//! auto-mTLS transport socket matches.
//!
//! Follows `pilot/pkg/security/model/authentication.go` (`ConstructSdsSecretConfig`,
//! `ApplyToCommonTLSContext`), `pilot/pkg/security/authn/utils/utils.go` (`BuildInboundTLS`) and
//! `pilot/pkg/networking/core/cluster_tls.go` (`buildIstioMutualTLS`, auto mTLS):
//!
//! - certificate: SDS secret `default`, validation: SDS secret `ROOTCA`, both fetched over the
//!   bootstrap cluster `sds-grpc` (gRPC API config source, v3, node sent on the first message only);
//! - inbound: `require_client_certificate`, ALPN `h2`, `http/1.1`, TLS 1.2–1.3 with Istio's cipher
//!   list, peers accepted when their URI SAN starts with `spiffe://<trust domain>/` (the mesh's trust
//!   domain and aliases, Istio's `TrustDomainsForValidation`);
//! - outbound: ALPN `istio` (`istio`, `h2` for HTTP/2 clusters), SNI `outbound_.PORT_.SUBSET_.HOST`,
//!   the destination's identities as exact URI SANs.
//!
//! Differences from istiod: no `istio-peer-exchange` ALPN (no metadata exchange filter in upstream
//! Envoy); SAN matchers are typed (`match_typed_subject_alt_names`, URI) where istiod still writes the
//! untyped, deprecated `match_subject_alt_names`.

use envoy_types::pb::{
    envoy::{
        config::{
            cluster::v3::cluster::TransportSocketMatch,
            core::v3::{
                ApiConfigSource, ApiVersion, ConfigSource, GrpcService, Metadata, TransportSocket,
                api_config_source::ApiType, config_source::ConfigSourceSpecifier, grpc_service,
            },
        },
        extensions::transport_sockets::{
            raw_buffer::v3::RawBuffer,
            tls::v3::{
                CertificateProviderPluginInstance, CertificateValidationContext, CommonTlsContext,
                DownstreamTlsContext, SdsSecretConfig, SubjectAltNameMatcher, TlsParameters,
                UpstreamTlsContext,
                common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
                subject_alt_name_matcher::SanType,
                tls_parameters::TlsProtocol,
            },
        },
        r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern},
    },
    google::protobuf::{Struct, Value, value::Kind as ValueKind},
};
use model::push::MeshSettings;

use crate::{
    convert::{boolv, transport_socket},
    filters::TLS_TRANSPORT_SOCKET,
};

/// The bootstrap cluster pilot-agent serves SDS on (Istio's `SDSClusterName`).
pub const SDS_CLUSTER: &str = "sds-grpc";
/// SDS name of the workload key pair (Istio's `SDSDefaultResourceName`).
pub const SDS_DEFAULT: &str = "default";
/// SDS name of the mesh root certificates (Istio's `SDSRootResourceName`).
pub const SDS_ROOT: &str = "ROOTCA";
/// The raw buffer (plaintext) transport socket.
pub const RAW_BUFFER_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.raw_buffer";
/// Endpoint metadata namespace Envoy reads transport socket matches from.
pub const TRANSPORT_SOCKET_MATCH_KEY: &str = "envoy.transport_socket_match";
/// Key of the endpoint metadata and cluster matches (Istio's `TLSModeLabelShortname`).
pub const TLS_MODE_KEY: &str = "tlsMode";
/// Name of the auto-mTLS match of endpoints with an Istio proxy (`tlsMode-istio`).
pub const TLS_MODE_ISTIO_MATCH: &str = "tlsMode-istio";
/// Name of the auto-mTLS fallback match (`tlsMode-disabled`): plaintext.
pub const TLS_MODE_DISABLED_MATCH: &str = "tlsMode-disabled";
/// ALPN of inbound mTLS contexts (Istio's `ALPNHttp`; `istio` is matched on the filter chain, never
/// offered by the server).
pub const INBOUND_ALPN: [&str; 2] = ["h2", "http/1.1"];
/// Application protocols an Istio client offers over mTLS (Istio's `allIstioMtlsALPNs`): the
/// PERMISSIVE TLS chain matches them, so plain TLS from outside the mesh is not mistaken for mTLS.
pub const ISTIO_MTLS_ALPNS: [&str; 5] =
    ["istio", "istio-peer-exchange", "istio-http/1.0", "istio-http/1.1", "istio-h2"];
/// Transport protocol the TLS inspector reports for TLS.
pub const TLS_TRANSPORT_PROTOCOL: &str = "tls";
/// Transport protocol of connections that are not TLS.
pub const RAW_BUFFER_TRANSPORT_PROTOCOL: &str = "raw_buffer";
/// Istio's server cipher list (`SupportedCiphers`).
pub const SUPPORTED_CIPHERS: [&str; 6] = [
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-GCM-SHA256",
];

/// An SDS reference to pilot-agent's secret `name` over the `sds-grpc` cluster (Istio's
/// `ConstructSdsSecretConfig`).
pub fn sds_secret_config(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.to_string(),
        sds_config: Some(ConfigSource {
            config_source_specifier: Some(ConfigSourceSpecifier::ApiConfigSource(ApiConfigSource {
                api_type: ApiType::Grpc as i32,
                set_node_on_first_message_only: true,
                transport_api_version: ApiVersion::V3 as i32,
                grpc_services: vec![GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                        grpc_service::EnvoyGrpc {
                            cluster_name: SDS_CLUSTER.to_string(),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
                ..Default::default()
            })),
            resource_api_version: ApiVersion::V3 as i32,
            // As istiod: wait for the certificate as long as it takes (Envoy's default gives up
            // after 15 s and goes live without it).
            initial_fetch_timeout: Some(envoy_types::pb::google::protobuf::Duration { seconds: 0, nanos: 0 }),
            ..Default::default()
        }),
    }
}

fn uri_san(pattern: MatchPattern) -> SubjectAltNameMatcher {
    SubjectAltNameMatcher {
        san_type: SanType::Uri as i32,
        matcher: Some(StringMatcher { match_pattern: Some(pattern), ignore_case: false }),
        ..Default::default()
    }
}

/// The workload certificate (`default`) and the root validation (`ROOTCA`) with `sans` as the static
/// part (Istio's `ApplyToCommonTLSContext`).
fn common(alpn: &[&str], sans: Vec<SubjectAltNameMatcher>) -> CommonTlsContext {
    CommonTlsContext {
        alpn_protocols: alpn.iter().map(|s| s.to_string()).collect(),
        tls_certificate_sds_secret_configs: vec![sds_secret_config(SDS_DEFAULT)],
        validation_context_type: Some(ValidationContextType::CombinedValidationContext(
            CombinedCertificateValidationContext {
                default_validation_context: Some(CertificateValidationContext {
                    match_typed_subject_alt_names: sans,
                    ..Default::default()
                }),
                validation_context_sds_secret_config: Some(sds_secret_config(SDS_ROOT)),
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

/// The trust domains peers may come from: the mesh's and its aliases, deduplicated, in order.
fn trust_domains(mesh: &MeshSettings) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for td in std::iter::once(&mesh.trust_domain).chain(&mesh.trust_domain_aliases) {
        if !td.is_empty() && !out.contains(&td.as_str()) {
            out.push(td);
        }
    }
    out
}

/// The downstream context of an inbound mTLS filter chain (Istio's `BuildInboundTLS`): client
/// certificate required, verified against `ROOTCA` and the mesh's trust domains.
pub fn inbound_tls_context(mesh: &MeshSettings) -> DownstreamTlsContext {
    let sans = trust_domains(mesh)
        .into_iter()
        .map(|td| uri_san(MatchPattern::Prefix(format!("spiffe://{td}/"))))
        .collect();
    let mut common = common(&INBOUND_ALPN, sans);
    common.tls_params = Some(TlsParameters {
        tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
        tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
        cipher_suites: SUPPORTED_CIPHERS.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    });
    DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: Some(boolv(true)),
        ..Default::default()
    }
}

/// The downstream context of a gateway server in `ISTIO_MUTUAL` mode (Istio's
/// `BuildListenerTLSContext` with `ApplyToCommonTLSContext`): the router's workload certificate, a
/// client certificate required and verified against `ROOTCA` and, when given, the server's
/// `subjectAltNames` (exact URI matches).
pub fn istio_mutual_downstream(alpn: &[&str], subject_alt_names: &[String]) -> DownstreamTlsContext {
    let sans = subject_alt_names.iter().map(|s| uri_san(MatchPattern::Exact(s.clone()))).collect();
    DownstreamTlsContext {
        common_tls_context: Some(common(alpn, sans)),
        require_client_certificate: Some(boolv(true)),
        ..Default::default()
    }
}

/// Istio's SNI for `ISTIO_MUTUAL` (`BuildDNSSrvSubsetKey`): `outbound_.PORT_.SUBSET_.HOST`, the
/// subset empty for the service's default cluster (`outbound_.9080_._.reviews.ns.svc.cluster.local`).
pub fn istio_mutual_sni(port: u32, subset: &str, host: &str) -> String {
    format!("outbound_.{port}_.{subset}_.{host}")
}

/// The upstream context of an `ISTIO_MUTUAL` cluster (Istio's `buildIstioMutualTLS`): the workload
/// certificate, `ROOTCA` validation, `sans` as exact URI matchers (none: any certificate of the mesh
/// roots), ALPN `istio` (plus `h2` when the cluster speaks HTTP/2), SNI `sni`.
pub fn istio_mutual_upstream(sni: &str, sans: &[String], h2: bool) -> UpstreamTlsContext {
    let alpn: &[&str] = if h2 { &["istio", "h2"] } else { &["istio"] };
    let matchers = sans.iter().map(|s| uri_san(MatchPattern::Exact(s.clone()))).collect();
    let mut common = common(alpn, matchers);
    // As istiod: TLS 1.2 to 1.3 (Envoy's client default stops at 1.2).
    common.tls_params = Some(TlsParameters {
        tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
        tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
        ..Default::default()
    });
    UpstreamTlsContext { common_tls_context: Some(common), sni: sni.to_string(), ..Default::default() }
}

fn tls_mode_struct(value: &str) -> Struct {
    Struct {
        fields: [(TLS_MODE_KEY.to_string(), Value { kind: Some(ValueKind::StringValue(value.to_string())) })]
            .into(),
    }
}

/// `ISTIO_MUTUAL` for a proxyless gRPC client (Istio's `grpcgen` `buildCommonTLSContext`): gRPC reads
/// no SDS, so the workload certificate and the roots come from the certificate provider instance
/// `default` of the client's gRPC bootstrap (pilot-agent writes a `file_watcher` provider there):
/// certificate name `default` for the key pair, `ROOTCA` for the roots; the destination's identities
/// as exact SAN matchers, as istiod writes them for gRPC. Only the current fields are set (grpc-go and
/// grpc-core ≥ 1.66); Istio also fills the deprecated `tls_certificate_certificate_provider_instance`
/// and `validation_context_certificate_provider_instance` for older clients.
pub fn grpc_istio_mutual_upstream(sni: &str, sans: &[String]) -> UpstreamTlsContext {
    let provider = |name: &str| CertificateProviderPluginInstance {
        instance_name: SDS_DEFAULT.to_string(),
        certificate_name: name.to_string(),
    };
    let matchers = sans
        .iter()
        .map(|s| StringMatcher { match_pattern: Some(MatchPattern::Exact(s.clone())), ..Default::default() });
    #[allow(deprecated)]
    let validation = CertificateValidationContext {
        match_subject_alt_names: matchers.collect(),
        ca_certificate_provider_instance: Some(provider(SDS_ROOT)),
        ..Default::default()
    };
    UpstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_certificate_provider_instance: Some(provider(SDS_DEFAULT)),
            validation_context_type: Some(ValidationContextType::CombinedValidationContext(
                CombinedCertificateValidationContext {
                    default_validation_context: Some(validation),
                    ..Default::default()
                },
            )),
            ..Default::default()
        }),
        sni: sni.to_string(),
        ..Default::default()
    }
}

/// Auto mTLS (Istio's `transport_socket_matches`): endpoints whose metadata says
/// `envoy.transport_socket_match: {tlsMode: istio}` get `ctx`, all others plaintext.
pub fn auto_mtls_matches(ctx: &UpstreamTlsContext) -> Vec<TransportSocketMatch> {
    vec![
        TransportSocketMatch {
            name: TLS_MODE_ISTIO_MATCH.to_string(),
            r#match: Some(tls_mode_struct(model::service::TLS_MODE_ISTIO)),
            transport_socket: Some(transport_socket(TLS_TRANSPORT_SOCKET, ctx)),
        },
        TransportSocketMatch {
            name: TLS_MODE_DISABLED_MATCH.to_string(),
            r#match: Some(Struct::default()),
            transport_socket: Some(raw_buffer()),
        },
    ]
}

/// The plaintext transport socket.
pub fn raw_buffer() -> TransportSocket {
    transport_socket(RAW_BUFFER_TRANSPORT_SOCKET, &RawBuffer::default())
}

/// The endpoint metadata auto mTLS matches on, for an endpoint whose `security.istio.io/tlsMode` is
/// `tls_mode`: `{envoy.transport_socket_match: {tlsMode: istio}}` for `istio`, `None` otherwise (Istio
/// writes none for `disabled` or unset).
pub fn endpoint_tls_metadata(tls_mode: &str) -> Option<Metadata> {
    (tls_mode == model::service::TLS_MODE_ISTIO).then(|| Metadata {
        filter_metadata: [(TRANSPORT_SOCKET_MATCH_KEY.to_string(), tls_mode_struct(tls_mode))].into(),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sds_cluster(c: &SdsSecretConfig) -> &str {
        match c.sds_config.as_ref().and_then(|s| s.config_source_specifier.as_ref()) {
            Some(ConfigSourceSpecifier::ApiConfigSource(api)) => match &api.grpc_services[0].target_specifier
            {
                Some(grpc_service::TargetSpecifier::EnvoyGrpc(g)) => &g.cluster_name,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    fn combined(c: &CommonTlsContext) -> &CombinedCertificateValidationContext {
        match &c.validation_context_type {
            Some(ValidationContextType::CombinedValidationContext(v)) => v,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn inbound_context_requires_a_mesh_client_certificate() {
        let mesh = MeshSettings {
            trust_domain_aliases: vec!["old.td".into(), "cluster.local".into()],
            ..Default::default()
        };
        let ctx = inbound_tls_context(&mesh);
        assert_eq!(ctx.require_client_certificate, Some(boolv(true)));
        let common = ctx.common_tls_context.unwrap();
        assert_eq!(common.alpn_protocols, ["h2", "http/1.1"]);
        assert_eq!(common.tls_certificate_sds_secret_configs[0].name, "default");
        assert_eq!(sds_cluster(&common.tls_certificate_sds_secret_configs[0]), "sds-grpc");
        let v = combined(&common);
        assert_eq!(v.validation_context_sds_secret_config.as_ref().unwrap().name, "ROOTCA");
        let prefixes: Vec<_> = v
            .default_validation_context
            .as_ref()
            .unwrap()
            .match_typed_subject_alt_names
            .iter()
            .map(|m| (m.san_type, m.matcher.as_ref().unwrap().match_pattern.clone()))
            .collect();
        assert_eq!(
            prefixes,
            [
                (SanType::Uri as i32, Some(MatchPattern::Prefix("spiffe://cluster.local/".into()))),
                (SanType::Uri as i32, Some(MatchPattern::Prefix("spiffe://old.td/".into())))
            ]
        );
        let params = common.tls_params.unwrap();
        assert_eq!(params.tls_minimum_protocol_version, TlsProtocol::TlSv12 as i32);
        assert_eq!(params.cipher_suites.len(), 6);
    }

    #[test]
    fn upstream_istio_mutual_has_istio_alpn_sni_and_exact_sans() {
        assert_eq!(
            istio_mutual_sni(9080, "", "reviews.ns.svc.cluster.local"),
            "outbound_.9080_._.reviews.ns.svc.cluster.local"
        );
        assert_eq!(istio_mutual_sni(9080, "v1", "r.ns"), "outbound_.9080_.v1_.r.ns");
        let ctx = istio_mutual_upstream("sni", &["spiffe://cluster.local/ns/a/sa/b".into()], true);
        assert_eq!(ctx.sni, "sni");
        let common = ctx.common_tls_context.unwrap();
        assert_eq!(common.alpn_protocols, ["istio", "h2"]);
        let sans =
            &combined(&common).default_validation_context.as_ref().unwrap().match_typed_subject_alt_names;
        assert_eq!(
            sans[0].matcher.as_ref().unwrap().match_pattern,
            Some(MatchPattern::Exact("spiffe://cluster.local/ns/a/sa/b".into()))
        );
        assert_eq!(
            istio_mutual_upstream("s", &[], false).common_tls_context.unwrap().alpn_protocols,
            ["istio"]
        );
    }

    #[test]
    fn only_istio_endpoints_carry_the_match_metadata() {
        let m = endpoint_tls_metadata("istio").unwrap();
        let s = &m.filter_metadata["envoy.transport_socket_match"];
        assert_eq!(s.fields["tlsMode"].kind, Some(ValueKind::StringValue("istio".into())));
        assert!(endpoint_tls_metadata("disabled").is_none());
        assert!(endpoint_tls_metadata("").is_none());
        let matches = auto_mtls_matches(&istio_mutual_upstream("s", &[], false));
        assert_eq!(
            matches.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["tlsMode-istio", "tlsMode-disabled"]
        );
        assert_eq!(matches[1].r#match, Some(Struct::default()));
        assert_eq!(matches[1].transport_socket.as_ref().unwrap().name, "envoy.transport_sockets.raw_buffer");
    }
}
