//! SDS resource names for certificate files, and the Envoy `Secret`s they stand for.
//!
//! DestinationRule and Gateway `tls` blocks name certificate files (`caCertificates`,
//! `clientCertificate`/`privateKey`, `serverCertificate`/`privateKey`). Like Istio, the generators never
//! put those paths into CDS/LDS (Envoy would read them while loading the update and reject the whole
//! update if one is missing); they reference SDS secrets named after the files, with Istio's names
//! (`pkg/security` `SdsCertificateConfig`):
//!
//! - `file-cert:CERT~KEY`: a key pair (`TlsCertificate`), e.g. `file-cert:/etc/certs/cert-chain.pem~/etc/certs/key.pem`;
//! - `file-root:CA`: trusted CA certificates (`CertificateValidationContext`), e.g. `file-root:/etc/certs/root-cert.pem`.
//!
//! The `SdsSecretConfig` points at ADS (Istio's `SDSAdsConfig`: no initial fetch timeout set, so Envoy's
//! default of 15 s applies and a secret that never comes does not block the proxy forever). Istio's
//! istio-agent serves these names from the proxy's file system; meshpilot has no agent, so the control
//! plane serves them (`meshpilot-discovery`'s file secrets, restricted to `--file-secret-root`).
//! This module is pure: names, parsing, and building a `Secret` from bytes already read.

use envoy_types::pb::envoy::{
    config::core::v3::{
        AggregatedConfigSource, ApiVersion, ConfigSource, config_source::ConfigSourceSpecifier,
    },
    extensions::transport_sockets::tls::v3::SdsSecretConfig,
};
pub use model::file_secret::{
    FILE_CERT_PREFIX, FILE_ROOT_PREFIX, FILE_ROOT_SYSTEM, FileSecret, NameError, RESOURCE_SEPARATOR,
};

/// The reference to `secret` in a TLS context (see [`sds_secret_config`]).
pub fn file_secret_config(secret: &FileSecret) -> SdsSecretConfig {
    sds_secret_config(secret.resource_name())
}

/// An SDS reference to `name` fetched over ADS, as Istio's `SDSAdsConfig`: `ads: {}`, resource API v3,
/// no `initial_fetch_timeout` (Envoy's default, 15 s, after which the cluster or listener stops waiting
/// for the secret, without it).
pub fn sds_secret_config(name: String) -> SdsSecretConfig {
    SdsSecretConfig {
        name,
        sds_config: Some(ConfigSource {
            config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource::default())),
            resource_api_version: ApiVersion::V3 as i32,
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_ads_v3_without_fetch_timeout() {
        let c = sds_secret_config("file-root:/ca.pem".into());
        assert_eq!(c.name, "file-root:/ca.pem");
        let src = c.sds_config.unwrap();
        assert!(matches!(src.config_source_specifier, Some(ConfigSourceSpecifier::Ads(_))));
        assert_eq!(src.resource_api_version, ApiVersion::V3 as i32);
        assert_eq!(src.initial_fetch_timeout, None);
    }
}
