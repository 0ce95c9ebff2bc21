//! TLS contexts from Istio settings: upstream (DestinationRule `tls`, TLS origination) and downstream
//! (Gateway server `tls`, termination). Certificate files are referenced as SDS secrets with Istio's
//! names (`file-cert:CERT~KEY`, `file-root:CA`, see [`crate::sds`]); the paths never reach CDS/LDS
//! as file data sources, so a missing file cannot make Envoy reject a whole update. `credentialName(s)`
//! become SDS secrets of Kubernetes Secrets ([`crate::credentials`]); `ISTIO_MUTUAL` uses the workload
//! certificate of a proxy that holds one (see [`crate::mtls`]) and is reported for others.
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
        certificate_validation_context::TrustChainVerification,
        common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
        subject_alt_name_matcher::SanType,
    },
    r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern},
};

use std::collections::BTreeSet;

use api::networking::destination_rule::TrafficPolicy;
use model::push::ProxyContext;

use crate::{
    Snapshot,
    convert::{boolv, file},
    credentials,
    sds::{FileSecret, RESOURCE_SEPARATOR},
};

/// The certificate-file SDS names (`file-cert:CERT~KEY`, `file-root:CA`) that a proxy of the
/// verified `namespace` may read: those named by config that applies to `proxy` and lives in that
/// namespace or in the mesh root namespace — the `tls` blocks without `credentialName` of the
/// DestinationRules that apply to the services in its scope (traffic policy, port levels, subsets),
/// of its Sidecar's `ingress` entries and, for a router, of its Gateways' servers (docs/SECURITY.md).
///
/// Why: in Istio each proxy's own istio-agent reads these files from the proxy's own disk, so no
/// proxy can read another's; meshpilot reads them from its own disk. Config of the proxy's own
/// namespace (or the mesh operator's root namespace) stands in for "the proxy's own disk", as
/// istiod's rule for `credentialName` Secrets (a Gateway reads Secrets of its own namespace) does.
/// A superset of what the generators emit (a mode that ignores a file still lists it): only config
/// that names a file can make it readable.
pub fn file_secret_references(push: &Snapshot, proxy: &ProxyContext, namespace: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let root = push.mesh().root_namespace.as_str();
    let trusted = |ns: &str| ns == namespace || ns == root;
    let add_pair = |out: &mut BTreeSet<String>, cert: &str, key: &str| {
        if let Some(pair) = FileSecret::key_pair(cert, key) {
            out.insert(pair.resource_name());
        }
    };
    let add_root = |out: &mut BTreeSet<String>, ca: &str| {
        if let Some(root) = FileSecret::root(ca) {
            out.insert(root.resource_name());
        }
    };
    let server = |out: &mut BTreeSet<String>, tls: &ServerTlsSettings| {
        if !tls.credential_name.is_empty() || !tls.credential_names.is_empty() {
            return;
        }
        add_pair(out, &tls.server_certificate, &tls.private_key);
        add_root(out, &tls.ca_certificates);
        for cert in &tls.tls_certificates {
            add_pair(out, &cert.server_certificate, &cert.private_key);
            add_root(out, &cert.ca_certificates);
        }
    };
    for gateway in push.gateways_for_proxy(proxy) {
        if !trusted(&gateway.config.meta.namespace) {
            continue;
        }
        for tls in gateway.spec().servers.iter().filter_map(|s| s.tls.as_ref()) {
            server(&mut out, tls);
        }
    }
    let policy = |out: &mut BTreeSet<String>, tp: &TrafficPolicy| {
        let levels = tp.port_level_settings.iter().filter_map(|l| l.tls.as_ref());
        for tls in tp.tls.iter().chain(levels).filter(|t| t.credential_name.is_empty()) {
            add_pair(out, &tls.client_certificate, &tls.private_key);
            add_root(out, &tls.ca_certificates);
        }
    };
    let scope = push.sidecar_scope(proxy);
    // The Sidecar's ingress `tls` (kept by the scope only under ENABLE_TLS_ON_SIDECAR_INGRESS).
    if scope.sidecar.as_ref().is_some_and(|k| trusted(&k.namespace)) {
        for (tls, _) in scope.ingress.iter().filter_map(|i| i.tls.as_ref()) {
            server(&mut out, tls);
        }
    }
    for service in scope.services() {
        let Some(dr) = push.destination_rule(proxy, service).filter(|dr| trusted(&dr.namespace)) else {
            continue;
        };
        let subsets = dr.rule.subsets.iter().filter_map(|s| s.traffic_policy.as_ref());
        for tp in dr.rule.traffic_policy.iter().chain(subsets) {
            policy(&mut out, tp);
        }
    }
    out
}

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
        validation_context_sds_secret_config: Some(crate::sds::file_secret_config(&root)),
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
/// SDS secret `file-cert:clientCertificate~privateKey`. With `credentialName`, see
/// [`upstream_credential`] (`gateway`: the proxy is a router).
pub(crate) fn upstream(tls: &ClientTlsSettings, gateway: bool) -> Translated<UpstreamTlsContext> {
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
        return upstream_credential(tls, gateway);
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
        common.tls_certificate_sds_secret_configs.push(crate::sds::file_secret_config(&pair));
    }
    let context =
        UpstreamTlsContext { common_tls_context: Some(common), sni: tls.sni.clone(), ..Default::default() };
    Translated { context: Some(context), unsupported }
}

/// Downstream TLS for a gateway server terminating TLS (`SIMPLE`, `MUTUAL`, `OPTIONAL_MUTUAL`) with
/// certificate files, each key pair as the SDS secret `file-cert:CERT~KEY` and the client CA as
/// `file-root:CA`; `ISTIO_MUTUAL` with the router's workload certificate (Istio's
/// `BuildListenerTLSContext`: SDS `default`, client certificate required and verified against
/// `ROOTCA` and the server's `subjectAltNames`) when the router holds one (`workload_certificates`:
/// started by pilot-agent). `None` context (with the reason in `unsupported`) when the server's
/// certificate cannot be served: then the server is left out, as Envoy would reject a TLS context
/// without one.
pub(crate) fn downstream(
    tls: &ServerTlsSettings,
    alpn: &[&str],
    workload_certificates: bool,
) -> Translated<DownstreamTlsContext> {
    let mut unsupported = Vec::new();
    let mode = tls.mode;
    if mode == ServerMode::IstioMutual as i32 {
        if workload_certificates {
            let context = crate::mtls::istio_mutual_downstream(alpn, &tls.subject_alt_names);
            return Translated { context: Some(context), unsupported };
        }
        unsupported.push((
            "mode".to_string(),
            "ISTIO_MUTUAL needs an Istio workload certificate, which only routers started by pilot-agent hold \
             (node metadata PROXY_CONFIG); the server is not built"
                .to_string(),
        ));
        return Translated { context: None, unsupported };
    }
    if !tls.credential_name.is_empty() || !tls.credential_names.is_empty() {
        return downstream_credential(tls, alpn);
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
    let mut sds = Vec::new();
    for (cert, key) in certs {
        match FileSecret::key_pair(cert, key) {
            Some(pair) => sds.push(crate::sds::file_secret_config(&pair)),
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
    common.tls_params = tls_params(tls);
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

/// The server's protocol versions and cipher suites, if any is set.
fn tls_params(tls: &ServerTlsSettings) -> Option<TlsParameters> {
    (tls.min_protocol_version != 0 || tls.max_protocol_version != 0 || !tls.cipher_suites.is_empty()).then(
        || TlsParameters {
            tls_minimum_protocol_version: tls.min_protocol_version,
            tls_maximum_protocol_version: tls.max_protocol_version,
            cipher_suites: tls.cipher_suites.clone(),
            ..Default::default()
        },
    )
}

/// Downstream TLS from `credentialName` / `credentialNames` (Istio's
/// `ApplyCredentialSDSToServerCommonTLSContext`): each name an SDS secret over ADS
/// ([`credentials::to_resource_name`]: `kubernetes://NAME`, `kubernetes-gateway://NS/NAME`); for
/// `MUTUAL` / `OPTIONAL_MUTUAL` a combined validation context of the static matchers (SANs, SPKI,
/// hashes; `insecureSkipVerify` accepts untrusted chains) and the SDS secret `caCertCredentialName`,
/// else `<first credential>-cacert`; for `SIMPLE` with `subjectAltNames`, a plain validation context
/// of the SAN matchers (as Istio). The files settings (`serverCertificate`, …) are then ignored, as
/// in Istio.
fn downstream_credential(tls: &ServerTlsSettings, alpn: &[&str]) -> Translated<DownstreamTlsContext> {
    let mut unsupported = Vec::new();
    let names: Vec<(String, &str)> = if tls.credential_names.is_empty() {
        vec![("credentialName".to_string(), tls.credential_name.as_str())]
    } else {
        tls.credential_names
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("credentialNames[{i}]"), n.as_str()))
            .collect()
    };
    let mut sds = Vec::new();
    for (field, name) in &names {
        match credentials::credential_sds_config(name) {
            Ok(c) => sds.push(c),
            Err(e) => unsupported.push((field.clone(), format!("{e}; the server is not built"))),
        }
    }
    if sds.is_empty() || !unsupported.is_empty() {
        return Translated { context: None, unsupported };
    }
    let mut common = CommonTlsContext {
        tls_certificate_sds_secret_configs: sds,
        alpn_protocols: alpn.iter().map(|s| s.to_string()).collect(),
        tls_params: tls_params(tls),
        ..Default::default()
    };
    let mode = tls.mode;
    let mutual = mode == ServerMode::Mutual as i32 || mode == ServerMode::OptionalMutual as i32;
    if mutual {
        let ca = if tls.ca_cert_credential_name.is_empty() {
            format!("{}{}", names[0].1, credentials::SDS_CA_SUFFIX)
        } else {
            tls.ca_cert_credential_name.clone()
        };
        let root = match credentials::credential_sds_config(&ca) {
            Ok(c) => c,
            Err(e) => {
                unsupported
                    .push(("caCertCredentialName".to_string(), format!("{e}; the server is not built")));
                return Translated { context: None, unsupported };
            }
        };
        let static_part = CertificateValidationContext {
            match_typed_subject_alt_names: san_matchers(&tls.subject_alt_names),
            verify_certificate_spki: tls.verify_certificate_spki.clone(),
            verify_certificate_hash: tls.verify_certificate_hash.clone(),
            trust_chain_verification: if tls.insecure_skip_verify == Some(true) {
                TrustChainVerification::AcceptUntrusted as i32
            } else {
                TrustChainVerification::VerifyTrustChain as i32
            },
            ..Default::default()
        };
        common.validation_context_type =
            Some(ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
                default_validation_context: Some(static_part),
                validation_context_sds_secret_config: Some(root),
                ..Default::default()
            }));
    } else if !tls.subject_alt_names.is_empty() {
        common.validation_context_type =
            Some(ValidationContextType::ValidationContext(CertificateValidationContext {
                match_typed_subject_alt_names: san_matchers(&tls.subject_alt_names),
                ..Default::default()
            }));
    }
    let context = DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: Some(boolv(mode == ServerMode::Mutual as i32)),
        ..Default::default()
    };
    Translated { context: Some(context), unsupported }
}

/// Upstream TLS from a DestinationRule `credentialName` (Istio's `ApplyCustomSDSToClientCommonTLSContext`):
/// for routers (gateways), and for sidecars only with a `configmap://` CA (a BackendTLSPolicy's
/// ConfigMap, which Istio lets any proxy read). A sidecar gets no TLS context for `SIMPLE` / `MUTUAL`
/// with another credentialName, as Istio does for rules without a workload selector (so that every
/// sidecar in scope does not wait for a secret it may not read); meshpilot reports it. For `MUTUAL`
/// the client certificate is the SDS secret `kubernetes://NAME`; unless `insecureSkipVerify`, the CA is
/// `kubernetes://NAME-cacert` in a combined validation context with the SAN matchers. `invalid://`
/// (a CA reference Istio's Gateway API conversion refused) keeps TLS with the CA named `invalid://`,
/// which is never served: the handshake cannot succeed, so traffic is blocked (Istio's
/// `ToResourceName`), never sent in plain text.
fn upstream_credential(tls: &ClientTlsSettings, gateway: bool) -> Translated<UpstreamTlsContext> {
    let mut unsupported = Vec::new();
    if !gateway && !tls.credential_name.starts_with(credentials::CONFIGMAP_URI) {
        unsupported.push((
            "credentialName".to_string(),
            "credentialName secrets are sent to gateways only (Istio ignores them for sidecars); this sidecar \
             originates no TLS"
                .to_string(),
        ));
        return Translated { context: None, unsupported };
    }
    let mut common = CommonTlsContext::default();
    if tls.mode == ClientMode::Mutual as i32 {
        match credentials::credential_sds_config(&tls.credential_name) {
            Ok(c) => common.tls_certificate_sds_secret_configs.push(c),
            Err(e) => {
                unsupported.push(("credentialName".to_string(), format!("{e}; TLS origination is skipped")));
                return Translated { context: None, unsupported };
            }
        }
    }
    if tls.insecure_skip_verify != Some(true) {
        let ca = format!("{}{}", tls.credential_name, credentials::SDS_CA_SUFFIX);
        let root = if tls.credential_name.starts_with(credentials::INVALID_URI) {
            Ok(crate::sds::sds_secret_config(credentials::INVALID_URI.to_string()))
        } else {
            credentials::credential_sds_config(&ca)
        };
        match root {
            Ok(root) => {
                common.validation_context_type = Some(ValidationContextType::CombinedValidationContext(
                    CombinedCertificateValidationContext {
                        default_validation_context: Some(CertificateValidationContext {
                            match_typed_subject_alt_names: san_matchers(&tls.subject_alt_names),
                            ..Default::default()
                        }),
                        validation_context_sds_secret_config: Some(root),
                        ..Default::default()
                    },
                ))
            }
            Err(e) => {
                unsupported.push(("credentialName".to_string(), format!("{e}; TLS origination is skipped")));
                return Translated { context: None, unsupported };
            }
        }
    }
    let context =
        UpstreamTlsContext { common_tls_context: Some(common), sni: tls.sni.clone(), ..Default::default() };
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
        let t = upstream(&tls, false);
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
        let common = upstream(&tls, false).context.unwrap().common_tls_context.unwrap();
        assert!(matches!(common.validation_context_type, Some(ValidationContextType::ValidationContext(_))));
        assert!(common.tls_certificate_sds_secret_configs.is_empty());
        tls.ca_certificates = "/ca.pem".into();
        tls.insecure_skip_verify = Some(true);
        let common = upstream(&tls, false).context.unwrap().common_tls_context.unwrap();
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
        let t = upstream(&tls, false);
        assert!(t.context.is_none());
        assert_eq!(t.unsupported[0].0, "clientCertificate");
        assert!(t.unsupported[0].1.contains("'~'"), "{}", t.unsupported[0].1);
        let t = upstream(
            &ClientTlsSettings {
                mode: ClientMode::Simple as i32,
                ca_certificates: "~/ca.pem".into(),
                ..Default::default()
            },
            false,
        );
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
        let t = downstream(&tls, &["h2", "http/1.1"], false);
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
        let common = downstream(&tls, &[], false).context.unwrap().common_tls_context.unwrap();
        assert_eq!(common.validation_context_type, None);
        assert_eq!(names(&common.tls_certificate_sds_secret_configs), ["file-cert:/c.pem~/k.pem"]);
        tls.private_key = "/a~b.pem".into();
        let t = downstream(&tls, &[], false);
        assert!(t.context.is_none());
        assert_eq!(t.unsupported[0].0, "privateKey");
    }

    #[test]
    fn downstream_credential_names_are_istio_sds_names() {
        let tls = ServerTlsSettings {
            mode: ServerMode::Simple as i32,
            credential_name: "gw-cert".into(),
            server_certificate: "/ignored.pem".into(),
            ..Default::default()
        };
        let t = downstream(&tls, &["h2"], false);
        assert!(t.unsupported.is_empty(), "{:?}", t.unsupported);
        let ctx = t.context.unwrap();
        assert_eq!(ctx.require_client_certificate, Some(boolv(false)));
        let common = ctx.common_tls_context.unwrap();
        assert_eq!(names(&common.tls_certificate_sds_secret_configs), ["kubernetes://gw-cert"]);
        assert_eq!(common.validation_context_type, None);
        assert_eq!(common.alpn_protocols, ["h2"]);

        let tls = ServerTlsSettings {
            mode: ServerMode::Mutual as i32,
            credential_names: vec![
                "kubernetes-gateway://apps/rsa".into(),
                "kubernetes-gateway://apps/ec".into(),
            ],
            subject_alt_names: vec!["client.example".into()],
            ..Default::default()
        };
        let ctx = downstream(&tls, &[], false).context.unwrap();
        assert_eq!(ctx.require_client_certificate, Some(boolv(true)));
        let common = ctx.common_tls_context.unwrap();
        assert_eq!(
            names(&common.tls_certificate_sds_secret_configs),
            ["kubernetes-gateway://apps/rsa", "kubernetes-gateway://apps/ec"]
        );
        let c = combined(&common);
        assert_eq!(
            c.validation_context_sds_secret_config.as_ref().unwrap().name,
            "kubernetes-gateway://apps/rsa-cacert",
            "the first credential's -cacert, as Istio"
        );
        assert_eq!(c.default_validation_context.as_ref().unwrap().match_typed_subject_alt_names.len(), 1);

        let tls = ServerTlsSettings {
            mode: ServerMode::OptionalMutual as i32,
            credential_name: "gw-cert".into(),
            ca_cert_credential_name: "client-ca".into(),
            insecure_skip_verify: Some(true),
            ..Default::default()
        };
        let ctx = downstream(&tls, &[], false).context.unwrap();
        assert_eq!(ctx.require_client_certificate, Some(boolv(false)));
        let common = ctx.common_tls_context.unwrap();
        let c = combined(&common);
        assert_eq!(c.validation_context_sds_secret_config.as_ref().unwrap().name, "kubernetes://client-ca");
        assert_eq!(
            c.default_validation_context.as_ref().unwrap().trust_chain_verification,
            TrustChainVerification::AcceptUntrusted as i32
        );
    }

    #[test]
    fn builtin_credentials_are_reported_not_built() {
        let tls = ServerTlsSettings {
            mode: ServerMode::Simple as i32,
            credential_name: "builtin://".into(),
            ..Default::default()
        };
        let t = downstream(&tls, &[], false);
        assert!(t.context.is_none());
        assert_eq!(t.unsupported[0].0, "credentialName");
        assert!(t.unsupported[0].1.contains("pilot-agent"), "{}", t.unsupported[0].1);
    }

    #[test]
    fn upstream_credential_name_on_gateways_only() {
        let tls = ClientTlsSettings {
            mode: ClientMode::Mutual as i32,
            credential_name: "client-cert".into(),
            subject_alt_names: vec!["db.example".into()],
            sni: "db.example".into(),
            ..Default::default()
        };
        let t = upstream(&tls, false);
        assert!(t.context.is_none());
        assert_eq!(t.unsupported[0].0, "credentialName");
        let t = upstream(&tls, true);
        assert!(t.unsupported.is_empty(), "{:?}", t.unsupported);
        let ctx = t.context.unwrap();
        assert_eq!(ctx.sni, "db.example");
        let common = ctx.common_tls_context.unwrap();
        assert_eq!(names(&common.tls_certificate_sds_secret_configs), ["kubernetes://client-cert"]);
        assert_eq!(
            combined(&common).validation_context_sds_secret_config.as_ref().unwrap().name,
            "kubernetes://client-cert-cacert"
        );
        let simple = ClientTlsSettings {
            mode: ClientMode::Simple as i32,
            insecure_skip_verify: Some(true),
            ..tls.clone()
        };
        let common = upstream(&simple, true).context.unwrap().common_tls_context.unwrap();
        assert!(common.tls_certificate_sds_secret_configs.is_empty());
        assert_eq!(common.validation_context_type, None);
    }

    /// BackendTLSPolicy credentials: a `configmap://` CA verifies on sidecars too (Istio lets any proxy
    /// read ConfigMaps); `invalid://` keeps TLS with a CA that is never served (traffic blocked).
    #[test]
    fn upstream_configmap_ca_on_sidecars_and_invalid_blocks() {
        let tls = ClientTlsSettings {
            mode: ClientMode::Simple as i32,
            credential_name: "configmap://default/auth-cert".into(),
            sni: "auth.example.com".into(),
            ..Default::default()
        };
        for gateway in [false, true] {
            let t = upstream(&tls, gateway);
            assert!(t.unsupported.is_empty(), "{:?}", t.unsupported);
            let ctx = t.context.expect("a TLS context");
            assert_eq!(ctx.sni, "auth.example.com");
            let common = ctx.common_tls_context.unwrap();
            assert_eq!(
                combined(&common).validation_context_sds_secret_config.as_ref().unwrap().name,
                "configmap://default/auth-cert-cacert"
            );
        }
        let invalid = ClientTlsSettings { credential_name: "invalid://".into(), ..tls };
        let common = upstream(&invalid, true).context.expect("TLS kept").common_tls_context.unwrap();
        assert_eq!(
            combined(&common).validation_context_sds_secret_config.as_ref().unwrap().name,
            "invalid://"
        );
        assert!(
            upstream(&invalid, false).context.is_none(),
            "sidecars: as Istio, no TLS for a privileged name"
        );
    }
}
