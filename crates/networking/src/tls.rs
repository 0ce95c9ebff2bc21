//! TLS contexts from Istio settings: upstream (DestinationRule `tls`, TLS origination) and downstream
//! (Gateway server `tls`, termination). Certificates are files only: `credentialName(s)`,
//! `ISTIO_MUTUAL` and other SDS-based settings need a secret server and are reported.
//!
//! Follows `pilot/pkg/networking/core/cluster_tls.go` and `gateway.go` `buildGatewayListenerTLSContext`.

use api::networking::{
    destination_rule::{ClientTlsSettings, client_tls_settings::TlSmode as ClientMode},
    gateway::{ServerTlsSettings, server_tls_settings::TlSmode as ServerMode},
};
use envoy_types::pb::envoy::{
    extensions::transport_sockets::tls::v3::{
        CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SubjectAltNameMatcher,
        TlsCertificate, TlsParameters, UpstreamTlsContext, common_tls_context::ValidationContextType,
        subject_alt_name_matcher::SanType,
    },
    r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern},
};

use crate::convert::{boolv, file};

/// The outcome of translating TLS settings: the context (if any) and what was not translated
/// (`(field path relative to the tls block, message)`).
pub(crate) struct Translated<T> {
    pub context: Option<T>,
    pub unsupported: Vec<(String, String)>,
}

fn san_matchers(sans: &[String]) -> Vec<SubjectAltNameMatcher> {
    sans.iter()
        .map(|san| SubjectAltNameMatcher {
            san_type: if san.contains("://") { SanType::Uri as i32 } else { SanType::Dns as i32 },
            matcher: Some(StringMatcher {
                match_pattern: Some(MatchPattern::Exact(san.clone())),
                ignore_case: false,
            }),
            ..Default::default()
        })
        .collect()
}

fn validation_context(
    ca: &str,
    crl: &str,
    sans: &[String],
    spki: &[String],
    hash: &[String],
) -> CertificateValidationContext {
    CertificateValidationContext {
        trusted_ca: (!ca.is_empty()).then(|| file(ca)),
        crl: (!crl.is_empty()).then(|| file(crl)),
        match_typed_subject_alt_names: san_matchers(sans),
        verify_certificate_spki: spki.to_vec(),
        verify_certificate_hash: hash.to_vec(),
        ..Default::default()
    }
}

/// Upstream TLS from a DestinationRule `tls` block: `DISABLE` gives none; `SIMPLE` verifies the server
/// with `caCertificates` (else the proxy's defaults: no validation context is set, as Istio without
/// `VERIFY_CERTIFICATE_AT_CLIENT`); `MUTUAL` also presents `clientCertificate`/`privateKey`.
pub(crate) fn upstream(tls: &ClientTlsSettings) -> Translated<UpstreamTlsContext> {
    let mut unsupported = Vec::new();
    let mode = tls.mode;
    if mode == ClientMode::Disable as i32 {
        return Translated { context: None, unsupported };
    }
    if mode == ClientMode::IstioMutual as i32 {
        unsupported.push((
            "mode".to_string(),
            "ISTIO_MUTUAL needs workload certificates over SDS, which meshpilot does not serve; traffic is sent in \
             plain text"
                .to_string(),
        ));
        return Translated { context: None, unsupported };
    }
    if !tls.credential_name.is_empty() {
        unsupported.push((
            "credentialName".to_string(),
            "certificates from secrets need SDS, which meshpilot does not serve; TLS origination is skipped"
                .to_string(),
        ));
        return Translated { context: None, unsupported };
    }
    let mut common = CommonTlsContext::default();
    let skip_verify = tls.insecure_skip_verify == Some(true);
    if !skip_verify
        && (!tls.ca_certificates.is_empty() || !tls.subject_alt_names.is_empty() || !tls.ca_crl.is_empty())
    {
        common.validation_context_type = Some(ValidationContextType::ValidationContext(validation_context(
            &tls.ca_certificates,
            &tls.ca_crl,
            &tls.subject_alt_names,
            &[],
            &[],
        )));
    }
    if mode == ClientMode::Mutual as i32 {
        if tls.client_certificate.is_empty() || tls.private_key.is_empty() {
            unsupported.push((
                "clientCertificate".to_string(),
                "MUTUAL without clientCertificate and privateKey files; TLS origination is skipped"
                    .to_string(),
            ));
            return Translated { context: None, unsupported };
        }
        common.tls_certificates.push(TlsCertificate {
            certificate_chain: Some(file(&tls.client_certificate)),
            private_key: Some(file(&tls.private_key)),
            ..Default::default()
        });
    }
    let context =
        UpstreamTlsContext { common_tls_context: Some(common), sni: tls.sni.clone(), ..Default::default() };
    Translated { context: Some(context), unsupported }
}

/// Downstream TLS for a gateway server terminating TLS (`SIMPLE`, `MUTUAL`, `OPTIONAL_MUTUAL`) with
/// certificate files. `None` context (with the reason in `unsupported`) when the server's certificate
/// cannot be served: then the server is left out, as Envoy would reject a TLS context without one.
pub(crate) fn downstream(tls: &ServerTlsSettings, alpn: &[&str]) -> Translated<DownstreamTlsContext> {
    let mut unsupported = Vec::new();
    let mode = tls.mode;
    let sds = !tls.credential_name.is_empty() || !tls.credential_names.is_empty();
    if mode == ServerMode::IstioMutual as i32 || sds {
        unsupported.push((
            if sds { "credentialName" } else { "mode" }.to_string(),
            "certificates from secrets or Istio workload certificates need SDS, which meshpilot does not serve; the \
             server is not built"
                .to_string(),
        ));
        return Translated { context: None, unsupported };
    }
    let mut certs: Vec<(&str, &str)> = Vec::new();
    if !tls.server_certificate.is_empty() && !tls.private_key.is_empty() {
        certs.push((&tls.server_certificate, &tls.private_key));
    }
    certs.extend(
        tls.tls_certificates
            .iter()
            .filter(|c| !c.server_certificate.is_empty() && !c.private_key.is_empty())
            .map(|c| (c.server_certificate.as_str(), c.private_key.as_str())),
    );
    if certs.is_empty() {
        unsupported.push((
            "serverCertificate".to_string(),
            "no serverCertificate/privateKey files; the server is not built".to_string(),
        ));
        return Translated { context: None, unsupported };
    }
    if !tls.ca_cert_credential_name.is_empty() {
        unsupported.push((
            "caCertCredentialName".to_string(),
            "CA certificates from secrets need SDS; ignored".to_string(),
        ));
    }
    let mut common = CommonTlsContext {
        tls_certificates: certs
            .into_iter()
            .map(|(cert, key)| TlsCertificate {
                certificate_chain: Some(file(cert)),
                private_key: Some(file(key)),
                ..Default::default()
            })
            .collect(),
        alpn_protocols: alpn.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    if tls.min_protocol_version != 0 || tls.max_protocol_version != 0 || !tls.cipher_suites.is_empty() {
        common.tls_params = Some(TlsParameters {
            tls_minimum_protocol_version: tls.min_protocol_version,
            tls_maximum_protocol_version: tls.max_protocol_version,
            cipher_suites: tls.cipher_suites.clone(),
            ..Default::default()
        });
    }
    let mutual = mode == ServerMode::Mutual as i32 || mode == ServerMode::OptionalMutual as i32;
    let ca = if !tls.ca_certificates.is_empty() {
        tls.ca_certificates.as_str()
    } else {
        tls.tls_certificates.iter().map(|c| c.ca_certificates.as_str()).find(|c| !c.is_empty()).unwrap_or("")
    };
    if mutual && tls.insecure_skip_verify != Some(true) {
        if ca.is_empty() {
            unsupported.push((
                "caCertificates".to_string(),
                "MUTUAL without caCertificates: client certificates cannot be verified; the server is not built"
                    .to_string(),
            ));
            return Translated { context: None, unsupported };
        }
        common.validation_context_type = Some(ValidationContextType::ValidationContext(validation_context(
            ca,
            &tls.ca_crl,
            &tls.subject_alt_names,
            &tls.verify_certificate_spki,
            &tls.verify_certificate_hash,
        )));
    }
    let verifies = common.validation_context_type.is_some();
    let context = DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: (mode == ServerMode::Mutual as i32 && verifies).then(|| boolv(true)),
        ..Default::default()
    };
    Translated { context: Some(context), unsupported }
}
