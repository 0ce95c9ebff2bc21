//! TLS contexts from Istio settings: upstream (DestinationRule `tls`, TLS origination) and downstream
//! (Gateway server `tls`, termination). Certificate files are referenced as SDS secrets with Istio's
//! names (`file-cert:CERT~KEY`, `file-root:CA`, see [`crate::sds`]); the paths never reach CDS/LDS
//! as file data sources, so a missing file cannot make Envoy reject a whole update. `credentialName(s)`,
//! `ISTIO_MUTUAL` and other secret-store settings are reported.
//!
//! Follows `pilot/pkg/networking/core/cluster_tls.go` (`constructUpstreamTLS`) and
//! `pilot/pkg/security/model/authentication.go` (`ApplyToCommonTLSContext`): the CA comes through a
//! `CombinedValidationContext` (static SAN / SPKI / hash matchers and CRL file + the SDS root secret).

use api::networking::{
    destination_rule::{ClientTlsSettings, client_tls_settings::TlSmode as ClientMode},
    gateway::{ServerTlsSettings, server_tls_settings::TlSmode as ServerMode},
};
use envoy_types::pb::envoy::{
    extensions::transport_sockets::tls::v3::{
        CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SubjectAltNameMatcher,
        TlsParameters, UpstreamTlsContext,
        common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
        subject_alt_name_matcher::SanType,
    },
    r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern},
};

use crate::{
    convert::{boolv, file},
    sds::{FileSecret, RESOURCE_SEPARATOR},
};

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

/// The validation context: without a CA file, the static matchers only; with one, Istio's
/// `CombinedValidationContext` of the static matchers (SANs, SPKI, hashes, the CRL file) and the SDS
/// root secret `file-root:CA`. `Err` names the field whose path cannot be an SDS name.
fn validation_context(
    ca: &str,
    crl: &str,
    sans: &[String],
    spki: &[String],
    hash: &[String],
) -> Result<ValidationContextType, (String, String)> {
    let static_part = CertificateValidationContext {
        crl: (!crl.is_empty()).then(|| file(crl)),
        match_typed_subject_alt_names: san_matchers(sans),
        verify_certificate_spki: spki.to_vec(),
        verify_certificate_hash: hash.to_vec(),
        ..Default::default()
    };
    if ca.is_empty() {
        return Ok(ValidationContextType::ValidationContext(static_part));
    }
    let root = FileSecret::root(ca).ok_or_else(|| unnamed("caCertificates", ca))?;
    Ok(ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
        default_validation_context: Some(static_part),
        validation_context_sds_secret_config: Some(root.sds_secret_config()),
        ..Default::default()
    }))
}

/// The finding for a path that cannot be put into an SDS resource name (it contains `~`).
fn unnamed(field: &str, path: &str) -> (String, String) {
    (
        field.to_string(),
        format!(
            "the path {path:?} contains '{RESOURCE_SEPARATOR}', which separates the paths of an SDS file secret \
             name; TLS is not configured"
        ),
    )
}

/// Upstream TLS from a DestinationRule `tls` block: `DISABLE` gives none; `ISTIO_MUTUAL` gives none
/// with a finding (callers handle it for proxies with workload certificates, see [`crate::mtls`]);
/// `SIMPLE` verifies the server
/// with `caCertificates` through the SDS secret `file-root:CA` (without `caCertificates` only the SAN
/// matchers are set: meshpilot does not serve Istio's `file-root:system`); `MUTUAL` also presents the
/// SDS secret `file-cert:clientCertificate~privateKey`.
pub(crate) fn upstream(tls: &ClientTlsSettings) -> Translated<UpstreamTlsContext> {
    let mut unsupported = Vec::new();
    let mode = tls.mode;
    if mode == ClientMode::Disable as i32 {
        return Translated { context: None, unsupported };
    }
    if mode == ClientMode::IstioMutual as i32 {
        unsupported.push((
            "mode".to_string(),
            "ISTIO_MUTUAL needs an Istio workload certificate, which only proxies started by pilot-agent hold \
             (node metadata PROXY_CONFIG); this proxy sends in plain text"
                .to_string(),
        ));
        return Translated { context: None, unsupported };
    }
    if !tls.credential_name.is_empty() {
        unsupported.push((
            "credentialName".to_string(),
            "certificates from credentialName secrets need a secret store, which meshpilot does not read; TLS \
             origination is skipped"
                .to_string(),
        ));
        return Translated { context: None, unsupported };
    }
    let mut common = CommonTlsContext::default();
    let skip_verify = tls.insecure_skip_verify == Some(true);
    if !skip_verify
        && (!tls.ca_certificates.is_empty() || !tls.subject_alt_names.is_empty() || !tls.ca_crl.is_empty())
    {
        match validation_context(&tls.ca_certificates, &tls.ca_crl, &tls.subject_alt_names, &[], &[]) {
            Ok(v) => common.validation_context_type = Some(v),
            Err(finding) => {
                unsupported.push(finding);
                return Translated { context: None, unsupported };
            }
        }
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
        let Some(pair) = FileSecret::key_pair(&tls.client_certificate, &tls.private_key) else {
            let (field, path) = if tls.client_certificate.contains(RESOURCE_SEPARATOR) {
                ("clientCertificate", &tls.client_certificate)
            } else {
                ("privateKey", &tls.private_key)
            };
            unsupported.push(unnamed(field, path));
            return Translated { context: None, unsupported };
        };
        common.tls_certificate_sds_secret_configs.push(pair.sds_secret_config());
    }
    let context =
        UpstreamTlsContext { common_tls_context: Some(common), sni: tls.sni.clone(), ..Default::default() };
    Translated { context: Some(context), unsupported }
}

/// Downstream TLS for a gateway server terminating TLS (`SIMPLE`, `MUTUAL`, `OPTIONAL_MUTUAL`) with
/// certificate files, each key pair as the SDS secret `file-cert:CERT~KEY` and the client CA as
/// `file-root:CA`. `None` context (with the reason in `unsupported`) when the server's certificate
/// cannot be served: then the server is left out, as Envoy would reject a TLS context without one.
pub(crate) fn downstream(tls: &ServerTlsSettings, alpn: &[&str]) -> Translated<DownstreamTlsContext> {
    let mut unsupported = Vec::new();
    let mode = tls.mode;
    let sds = !tls.credential_name.is_empty() || !tls.credential_names.is_empty();
    if mode == ServerMode::IstioMutual as i32 || sds {
        unsupported.push((
            if sds { "credentialName" } else { "mode" }.to_string(),
            "certificates from credentialName secrets or Istio workload certificates are not served by meshpilot \
             (only certificate files are); the server is not built"
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
            "CA certificates from credentialName secrets are not served by meshpilot; ignored".to_string(),
        ));
    }
    let mut sds = Vec::new();
    for (cert, key) in certs {
        match FileSecret::key_pair(cert, key) {
            Some(pair) => sds.push(pair.sds_secret_config()),
            None if cert.contains(RESOURCE_SEPARATOR) => unsupported.push(unnamed("serverCertificate", cert)),
            None => unsupported.push(unnamed("privateKey", key)),
        }
    }
    if sds.is_empty() {
        return Translated { context: None, unsupported };
    }
    let mut common = CommonTlsContext {
        tls_certificate_sds_secret_configs: sds,
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
        match validation_context(
            ca,
            &tls.ca_crl,
            &tls.subject_alt_names,
            &tls.verify_certificate_spki,
            &tls.verify_certificate_hash,
        ) {
            Ok(v) => common.validation_context_type = Some(v),
            Err(finding) => {
                unsupported.push(finding);
                return Translated { context: None, unsupported };
            }
        }
    }
    let verifies = common.validation_context_type.is_some();
    let context = DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: (mode == ServerMode::Mutual as i32 && verifies).then(|| boolv(true)),
        ..Default::default()
    };
    Translated { context: Some(context), unsupported }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::SdsSecretConfig;

    use super::*;

    fn names(configs: &[SdsSecretConfig]) -> Vec<&str> {
        configs.iter().map(|c| c.name.as_str()).collect()
    }

    fn combined(common: &CommonTlsContext) -> &CombinedCertificateValidationContext {
        match &common.validation_context_type {
            Some(ValidationContextType::CombinedValidationContext(c)) => c,
            other => panic!("expected a combined validation context, got {other:?}"),
        }
    }

    #[test]
    fn upstream_mutual_references_file_secrets() {
        let tls = ClientTlsSettings {
            mode: ClientMode::Mutual as i32,
            client_certificate: "/etc/certs/cert-chain.pem".into(),
            private_key: "/etc/certs/key.pem".into(),
            ca_certificates: "/etc/certs/root-cert.pem".into(),
            ca_crl: "/etc/certs/crl.pem".into(),
            subject_alt_names: vec!["spiffe://cluster.local/ns/a/sa/b".into(), "db.example".into()],
            sni: "db.example".into(),
            ..Default::default()
        };
        let t = upstream(&tls);
        assert!(t.unsupported.is_empty(), "{:?}", t.unsupported);
        let ctx = t.context.unwrap();
        assert_eq!(ctx.sni, "db.example");
        let common = ctx.common_tls_context.unwrap();
        assert!(common.tls_certificates.is_empty(), "no file paths in CDS");
        assert_eq!(
            names(&common.tls_certificate_sds_secret_configs),
            ["file-cert:/etc/certs/cert-chain.pem~/etc/certs/key.pem"]
        );
        let c = combined(&common);
        assert_eq!(
            c.validation_context_sds_secret_config.as_ref().unwrap().name,
            "file-root:/etc/certs/root-cert.pem"
        );
        let static_part = c.default_validation_context.as_ref().unwrap();
        assert_eq!(static_part.trusted_ca, None);
        assert_eq!(static_part.crl, Some(file("/etc/certs/crl.pem")), "the CRL stays a file, as in Istio");
        let sans: Vec<i32> = static_part.match_typed_subject_alt_names.iter().map(|m| m.san_type).collect();
        assert_eq!(sans, [SanType::Uri as i32, SanType::Dns as i32]);
    }

    #[test]
    fn upstream_simple_without_ca_keeps_only_matchers_and_skip_verify_drops_validation() {
        let mut tls = ClientTlsSettings {
            mode: ClientMode::Simple as i32,
            subject_alt_names: vec!["a.example".into()],
            ..Default::default()
        };
        let common = upstream(&tls).context.unwrap().common_tls_context.unwrap();
        assert!(matches!(common.validation_context_type, Some(ValidationContextType::ValidationContext(_))));
        assert!(common.tls_certificate_sds_secret_configs.is_empty());
        tls.ca_certificates = "/ca.pem".into();
        tls.insecure_skip_verify = Some(true);
        let common = upstream(&tls).context.unwrap().common_tls_context.unwrap();
        assert_eq!(common.validation_context_type, None);
    }

    #[test]
    fn a_path_with_the_separator_is_reported_not_sent() {
        let tls = ClientTlsSettings {
            mode: ClientMode::Mutual as i32,
            client_certificate: "/home/~me/cert.pem".into(),
            private_key: "/k.pem".into(),
            ..Default::default()
        };
        let t = upstream(&tls);
        assert!(t.context.is_none());
        assert_eq!(t.unsupported[0].0, "clientCertificate");
        assert!(t.unsupported[0].1.contains("'~'"), "{}", t.unsupported[0].1);
        let t = upstream(&ClientTlsSettings {
            mode: ClientMode::Simple as i32,
            ca_certificates: "~/ca.pem".into(),
            ..Default::default()
        });
        assert!(t.context.is_none());
        assert_eq!(t.unsupported[0].0, "caCertificates");
    }

    #[test]
    fn downstream_references_every_key_pair_and_the_client_ca() {
        let tls = ServerTlsSettings {
            mode: ServerMode::Mutual as i32,
            server_certificate: "/etc/certs/cert-chain.pem".into(),
            private_key: "/etc/certs/key.pem".into(),
            ca_certificates: "/etc/certs/root-cert.pem".into(),
            tls_certificates: vec![api::networking::gateway::server_tls_settings::TlsCertificate {
                server_certificate: "/etc/certs/ec.pem".into(),
                private_key: "/etc/certs/ec-key.pem".into(),
                ..Default::default()
            }],
            verify_certificate_spki: vec!["spki".into()],
            verify_certificate_hash: vec!["hash".into()],
            ..Default::default()
        };
        let t = downstream(&tls, &["h2", "http/1.1"]);
        assert!(t.unsupported.is_empty(), "{:?}", t.unsupported);
        let ctx = t.context.unwrap();
        assert_eq!(ctx.require_client_certificate, Some(boolv(true)));
        let common = ctx.common_tls_context.unwrap();
        assert!(common.tls_certificates.is_empty(), "no file paths in LDS");
        assert_eq!(
            names(&common.tls_certificate_sds_secret_configs),
            [
                "file-cert:/etc/certs/cert-chain.pem~/etc/certs/key.pem",
                "file-cert:/etc/certs/ec.pem~/etc/certs/ec-key.pem"
            ]
        );
        assert_eq!(common.alpn_protocols, ["h2", "http/1.1"]);
        let c = combined(&common);
        assert_eq!(
            c.validation_context_sds_secret_config.as_ref().unwrap().name,
            "file-root:/etc/certs/root-cert.pem"
        );
        let static_part = c.default_validation_context.as_ref().unwrap();
        assert_eq!(static_part.verify_certificate_spki, ["spki"]);
        assert_eq!(static_part.verify_certificate_hash, ["hash"]);
    }

    #[test]
    fn downstream_simple_has_no_validation_and_unusable_pairs_are_reported() {
        let mut tls = ServerTlsSettings {
            mode: ServerMode::Simple as i32,
            server_certificate: "/c.pem".into(),
            private_key: "/k.pem".into(),
            ..Default::default()
        };
        let common = downstream(&tls, &[]).context.unwrap().common_tls_context.unwrap();
        assert_eq!(common.validation_context_type, None);
        assert_eq!(names(&common.tls_certificate_sds_secret_configs), ["file-cert:/c.pem~/k.pem"]);
        tls.private_key = "/a~b.pem".into();
        let t = downstream(&tls, &[]);
        assert!(t.context.is_none());
        assert_eq!(t.unsupported[0].0, "privateKey");
    }
}
