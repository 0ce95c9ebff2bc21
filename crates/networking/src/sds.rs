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
        AggregatedConfigSource, ApiVersion, ConfigSource, DataSource, config_source::ConfigSourceSpecifier,
        data_source,
    },
    extensions::transport_sockets::tls::v3::{
        CertificateValidationContext, SdsSecretConfig, Secret, TlsCertificate, secret,
    },
};

/// Prefix of key-pair secret names (`file-cert:CERT~KEY`).
pub const FILE_CERT_PREFIX: &str = "file-cert:";
/// Prefix of root-certificate secret names (`file-root:CA`).
pub const FILE_ROOT_PREFIX: &str = "file-root:";
/// Separator of the certificate and key paths in a `file-cert:` name (Istio's `ResourceSeparator`).
pub const RESOURCE_SEPARATOR: char = '~';
/// Istio's name for the operating system's CA bundle, which istio-agent resolves itself; meshpilot
/// never references it and does not serve it.
pub const FILE_ROOT_SYSTEM: &str = "file-root:system";

/// What a file secret name refers to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileSecret {
    /// A certificate chain and its private key (`file-cert:CERT~KEY`).
    KeyPair {
        /// Path of the PEM certificate chain, as written in the Istio config.
        cert: String,
        /// Path of the PEM private key, as written in the Istio config.
        key: String,
    },
    /// Trusted CA certificates (`file-root:CA`).
    Root {
        /// Path of the PEM CA bundle, as written in the Istio config.
        ca: String,
    },
}

/// Why a name is not a file secret name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Neither `file-cert:` nor `file-root:`.
    #[error("not a file secret name: expected file-cert:CERT~KEY or file-root:CA")]
    UnknownPrefix,
    /// The right prefix, a wrong shape (empty path, wrong number of `~`-separated paths).
    #[error("malformed file secret name: {0}")]
    Malformed(&'static str),
    /// `file-root:system` (the operating system's CA bundle, resolved by istio-agent).
    #[error("file-root:system (the proxy host's CA bundle) is not served by meshpilot")]
    SystemRoot,
}

impl FileSecret {
    /// A key pair secret, or `None` if either path is empty or contains the separator `~` (the name
    /// could not be parsed back).
    pub fn key_pair(cert: &str, key: &str) -> Option<FileSecret> {
        (valid_path(cert) && valid_path(key))
            .then(|| FileSecret::KeyPair { cert: cert.to_string(), key: key.to_string() })
    }

    /// A root secret, or `None` if the path is empty or contains `~`.
    pub fn root(ca: &str) -> Option<FileSecret> {
        valid_path(ca).then(|| FileSecret::Root { ca: ca.to_string() })
    }

    /// The SDS resource name (Istio's `GetResourceName` / `GetRootResourceName`).
    pub fn resource_name(&self) -> String {
        match self {
            FileSecret::KeyPair { cert, key } => format!("{FILE_CERT_PREFIX}{cert}{RESOURCE_SEPARATOR}{key}"),
            FileSecret::Root { ca } => format!("{FILE_ROOT_PREFIX}{ca}"),
        }
    }

    /// Parses a resource name (Istio's `SdsCertificateConfigFromResourceName`, stricter: empty paths
    /// are refused, and `file-root:system` is recognised and refused).
    ///
    /// # Errors
    /// [`NameError`] saying what is wrong.
    pub fn parse(name: &str) -> Result<FileSecret, NameError> {
        if let Some(rest) = name.strip_prefix(FILE_CERT_PREFIX) {
            let (cert, key) = rest
                .split_once(RESOURCE_SEPARATOR)
                .ok_or(NameError::Malformed("file-cert: needs CERT~KEY, found no '~'"))?;
            if key.contains(RESOURCE_SEPARATOR) {
                return Err(NameError::Malformed("file-cert: needs exactly one '~' between CERT and KEY"));
            }
            return FileSecret::key_pair(cert, key)
                .ok_or(NameError::Malformed("file-cert: the certificate or key path is empty"));
        }
        if let Some(ca) = name.strip_prefix(FILE_ROOT_PREFIX) {
            if name == FILE_ROOT_SYSTEM {
                return Err(NameError::SystemRoot);
            }
            if ca.contains(RESOURCE_SEPARATOR) {
                return Err(NameError::Malformed("file-root: takes one path, found '~'"));
            }
            return FileSecret::root(ca).ok_or(NameError::Malformed("file-root: the path is empty"));
        }
        Err(NameError::UnknownPrefix)
    }

    /// The file paths the secret is read from, as written (certificate before key).
    pub fn paths(&self) -> Vec<&str> {
        match self {
            FileSecret::KeyPair { cert, key } => vec![cert, key],
            FileSecret::Root { ca } => vec![ca],
        }
    }

    /// The Envoy `Secret` named `name` with the files' contents inline (`inline_bytes`), in the order
    /// of [`FileSecret::paths`]: a `TlsCertificate` (chain, key) or a `CertificateValidationContext`
    /// (`trusted_ca`), as istio-agent sends them.
    ///
    /// # Panics
    /// Never; missing contents give empty data sources.
    pub fn to_secret(&self, contents: Vec<Vec<u8>>) -> Secret {
        let mut contents = contents.into_iter();
        let mut next = || inline(contents.next().unwrap_or_default());
        let r#type = match self {
            FileSecret::KeyPair { .. } => secret::Type::TlsCertificate(TlsCertificate {
                certificate_chain: Some(next()),
                private_key: Some(next()),
                ..Default::default()
            }),
            FileSecret::Root { .. } => secret::Type::ValidationContext(CertificateValidationContext {
                trusted_ca: Some(next()),
                ..Default::default()
            }),
        };
        Secret { name: self.resource_name(), r#type: Some(r#type) }
    }

    /// The reference to this secret in a TLS context (see [`sds_secret_config`]).
    pub fn sds_secret_config(&self) -> SdsSecretConfig {
        sds_secret_config(self.resource_name())
    }
}

fn valid_path(path: &str) -> bool {
    !path.is_empty() && !path.contains(RESOURCE_SEPARATOR)
}

fn inline(bytes: Vec<u8>) -> DataSource {
    DataSource { specifier: Some(data_source::Specifier::InlineBytes(bytes)), ..Default::default() }
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
    fn names_follow_istio_and_parse_back() {
        let pair = FileSecret::key_pair("/etc/certs/cert-chain.pem", "/etc/certs/key.pem").unwrap();
        assert_eq!(pair.resource_name(), "file-cert:/etc/certs/cert-chain.pem~/etc/certs/key.pem");
        assert_eq!(FileSecret::parse(&pair.resource_name()), Ok(pair.clone()));
        assert_eq!(pair.paths(), ["/etc/certs/cert-chain.pem", "/etc/certs/key.pem"]);
        let root = FileSecret::root("tests/testdata/certs/default/root-cert.pem").unwrap();
        assert_eq!(root.resource_name(), "file-root:tests/testdata/certs/default/root-cert.pem");
        assert_eq!(FileSecret::parse(&root.resource_name()), Ok(root));
    }

    #[test]
    fn paths_that_cannot_round_trip_are_refused() {
        assert_eq!(FileSecret::key_pair("", "/k.pem"), None);
        assert_eq!(FileSecret::key_pair("/c.pem", "/home/~x/k.pem"), None);
        assert_eq!(FileSecret::root("~/ca.pem"), None);
        assert_eq!(FileSecret::root(""), None);
    }

    #[test]
    fn malformed_names_say_why() {
        for (name, want) in [
            ("default", NameError::UnknownPrefix),
            ("kubernetes://my-secret", NameError::UnknownPrefix),
            ("file-cert:/c.pem", NameError::Malformed("file-cert: needs CERT~KEY, found no '~'")),
            (
                "file-cert:/c.pem~/k.pem~/x",
                NameError::Malformed("file-cert: needs exactly one '~' between CERT and KEY"),
            ),
            ("file-cert:~/k.pem", NameError::Malformed("file-cert: the certificate or key path is empty")),
            ("file-cert:/c.pem~", NameError::Malformed("file-cert: the certificate or key path is empty")),
            ("file-root:", NameError::Malformed("file-root: the path is empty")),
            ("file-root:/a~/b", NameError::Malformed("file-root: takes one path, found '~'")),
            ("file-root:system", NameError::SystemRoot),
        ] {
            assert_eq!(FileSecret::parse(name), Err(want), "{name}");
        }
    }

    #[test]
    fn secrets_carry_the_bytes_inline() {
        let pair = FileSecret::key_pair("/c.pem", "/k.pem").unwrap();
        let s = pair.to_secret(vec![b"CERT".to_vec(), b"KEY".to_vec()]);
        assert_eq!(s.name, "file-cert:/c.pem~/k.pem");
        let Some(secret::Type::TlsCertificate(t)) = s.r#type else { panic!("{s:?}") };
        assert_eq!(t.certificate_chain, Some(inline(b"CERT".to_vec())));
        assert_eq!(t.private_key, Some(inline(b"KEY".to_vec())));
        let s = FileSecret::root("/ca.pem").unwrap().to_secret(vec![b"CA".to_vec()]);
        let Some(secret::Type::ValidationContext(v)) = s.r#type else { panic!("{s:?}") };
        assert_eq!(v.trusted_ca, Some(inline(b"CA".to_vec())));
    }

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
