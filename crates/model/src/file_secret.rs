//! The names of SDS secrets that stand for certificate files (Istio's `pkg/security`
//! `SdsCertificateConfig`): `file-cert:CERT~KEY` for a key pair, `file-root:CA` for trusted CA
//! certificates. Pure naming and parsing; the generators build the Envoy references from these
//! (`networking::sds`) and the SDS server the secrets (`sds::file_secrets`).

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
}

fn valid_path(path: &str) -> bool {
    !path.is_empty() && !path.contains(RESOURCE_SEPARATOR)
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
}
