//! `credentialName` secrets in generated config: Istio's names and rules are
//! [`model::credentials`] (re-exported here); this module adds the Envoy reference to one.

use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::SdsSecretConfig;
pub use model::credentials::*;

use crate::sds::sds_secret_config;

/// The SDS reference (over ADS, [`sds_secret_config`]) for a `credentialName`
/// (Istio's `ConstructSdsSecretConfigForCredential` without a credential socket or SDS provider).
///
/// # Errors
/// As [`to_resource_name`].
pub fn credential_sds_config(credential_name: &str) -> Result<SdsSecretConfig, String> {
    to_resource_name(credential_name).map(sds_secret_config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_name_becomes_an_ads_reference_named_as_istio() {
        let c = credential_sds_config("gw-cert").unwrap();
        assert_eq!(c.name, "kubernetes://gw-cert");
        assert!(c.sds_config.is_some());
        assert!(credential_sds_config("builtin://").is_err());
    }
}
