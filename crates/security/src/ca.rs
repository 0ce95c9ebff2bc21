//! The certificate authority, as istiod's (`security/pkg/pki/ca`, `security/pkg/server/ca`):
//!
//! - **Keys.** Istio's plugged-in CA directory (`ROOT_CA_DIR`, default `./etc/cacerts`; the `cacerts`
//!   secret mounted there) when it holds `ca-key.pem`: `ca-cert.pem` signs, `cert-chain.pem` is the
//!   chain from it up to (and possibly including) the root, `root-cert.pem` the root(s). Otherwise a
//!   self-signed root (organization = trust domain, 10 years as `CITADEL_SELF_SIGNED_CA_CERT_TTL`),
//!   created at first start and persisted in a directory under the same file names as Istio's
//!   `istio-ca-secret`, so a restart keeps it and existing sidecars keep working and renew.
//!   Unlike istiod (RSA 2048), the self-signed root key is ECDSA P-256: `ring` cannot generate RSA
//!   keys. Workload CSRs may carry RSA or EC keys either way.
//! - **Signing** ([`IstioCa::sign_csr`]): the CSR's signature is checked and only its public key is
//!   used; the certificate names the caller's authenticated identities as URI SANs (critical, empty
//!   subject), whatever the CSR asks. Validity starts 2 minutes in the past (Istio's clock-skew grace)
//!   and lasts the requested TTL: non-positive → `DEFAULT_WORKLOAD_CERT_TTL` (24 h), above
//!   `MAX_WORKLOAD_CERT_TTL` (90 days) → refused as `InvalidArgument`. Key usage digital signature +
//!   key encipherment, extended key usage server + client auth, not a CA.
//! - **Chain** ([`IstioCa::sign_csr`] result): leaf, then each certificate of `cert-chain.pem` (none
//!   for the self-signed root), then the root PEM as one element (the root is last, as the API says).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType, SerialNumber, SubjectPublicKeyInfo,
};
use rustls_pki_types::{CertificateDer, pem::PemObject};
use x509_parser::prelude::{FromDer, X509CertificationRequest};

use crate::identity::SpiffeId;

/// Istio's clock-skew grace: certificates are valid from 2 minutes before they are signed.
pub const CLOCK_SKEW_GRACE: Duration = Duration::from_secs(120);

/// CA settings, with Istio's defaults.
#[derive(Clone, Debug)]
pub struct CaOptions {
    /// Trust domain of issued identities (mesh config `trustDomain`, default `cluster.local`).
    pub trust_domain: String,
    /// TTL for a request with a non-positive validity (`DEFAULT_WORKLOAD_CERT_TTL`, 24 h).
    pub default_cert_ttl: Duration,
    /// Longest TTL granted (`MAX_WORKLOAD_CERT_TTL`, 90 days); longer requests are refused.
    pub max_cert_ttl: Duration,
    /// Lifetime of a newly created self-signed root (`CITADEL_SELF_SIGNED_CA_CERT_TTL`, 10 years).
    pub self_signed_root_ttl: Duration,
}

impl Default for CaOptions {
    fn default() -> Self {
        CaOptions {
            trust_domain: "cluster.local".into(),
            default_cert_ttl: Duration::from_secs(24 * 3600),
            max_cert_ttl: Duration::from_secs(90 * 24 * 3600),
            self_signed_root_ttl: Duration::from_secs(87_600 * 3600),
        }
    }
}

/// Why the CA refused or failed. [`CaError::grpc_code`] maps each to the status istiod answers with.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The CSR is not a PEM certificate request, or its signature does not verify.
    #[error("CSR parse error: {0}")]
    Csr(String),
    /// The requested TTL is above the maximum.
    #[error("requested TTL {requested}s is greater than the max allowed TTL {max}s")]
    Ttl {
        /// Requested seconds.
        requested: i64,
        /// Maximum seconds.
        max: u64,
    },
    /// No identity to put in the certificate.
    #[error("no identity to sign for")]
    NoIdentity,
    /// Making the certificate failed.
    #[error("certificate generation failed: {0}")]
    Sign(String),
    /// A CA file cannot be read or is not what it must be (start-up error).
    #[error("{}: {reason}", file.display())]
    File {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl CaError {
    /// The gRPC status code istiod answers with: `InvalidArgument` for a bad CSR or TTL, `Internal`
    /// otherwise.
    pub fn grpc_code(&self) -> tonic::Code {
        match self {
            CaError::Csr(_) | CaError::Ttl { .. } => tonic::Code::InvalidArgument,
            _ => tonic::Code::Internal,
        }
    }

    /// The label of Istio's `citadel_server_*` error counters this falls under.
    pub fn kind(&self) -> &'static str {
        match self {
            CaError::Csr(_) => "csr_parsing",
            CaError::Ttl { .. } => "ttl",
            CaError::NoIdentity => "id_extraction",
            CaError::Sign(_) | CaError::File { .. } => "csr_sign",
        }
    }
}

/// Where the CA's keys come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaSource {
    /// Istio's plugged-in CA files in this directory.
    PluggedIn(PathBuf),
    /// A self-signed root persisted in this directory.
    SelfSigned(PathBuf),
    /// A self-signed root persisted in this Kubernetes secret (`namespace/name`).
    Secret(String),
}

/// File names, as Istio's `cacerts` / `istio-ca-secret`.
pub const CA_CERT: &str = "ca-cert.pem";
/// The signing key (PEM: PKCS#8, or PKCS#1 RSA / SEC1 EC as Istio writes them).
pub const CA_KEY: &str = "ca-key.pem";
/// The chain from the signing certificate up to the root (empty for a self-signed root).
pub const CERT_CHAIN: &str = "cert-chain.pem";
/// The root certificate(s).
pub const ROOT_CERT: &str = "root-cert.pem";

/// The CA's key material under Istio's names (files of the `cacerts` directory, data keys of the
/// `istio-ca-secret` / `cacerts` secrets), PEM text each.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CaBundle {
    /// `ca-cert.pem`: the signing certificate.
    pub ca_cert: String,
    /// `ca-key.pem`: its PKCS#8 key.
    pub ca_key: String,
    /// `cert-chain.pem`: from the signing certificate up to the root (empty for a self-signed root).
    pub cert_chain: String,
    /// `root-cert.pem`: the root(s).
    pub root_cert: String,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaBundle").field("root_cert", &self.root_cert).finish_non_exhaustive()
    }
}

impl CaBundle {
    /// Reads Istio's files from `dir` (`cert-chain.pem` may be absent).
    ///
    /// # Errors
    /// [`CaError::File`] naming a file that cannot be read.
    pub fn read_dir(dir: &Path) -> Result<CaBundle, CaError> {
        Ok(CaBundle {
            ca_key: read(dir, CA_KEY)?,
            ca_cert: read(dir, CA_CERT)?,
            cert_chain: if dir.join(CERT_CHAIN).exists() { read(dir, CERT_CHAIN)? } else { String::new() },
            root_cert: read(dir, ROOT_CERT)?,
        })
    }

    /// A new self-signed root as istiod makes one: organization = trust domain, CA, key usage
    /// certificate signing, valid 2 minutes back to `self_signed_root_ttl` ahead; ECDSA P-256 key.
    ///
    /// # Errors
    /// [`CaError::Sign`].
    pub fn self_signed(options: &CaOptions) -> Result<CaBundle, CaError> {
        let key = KeyPair::generate().map_err(|e| CaError::Sign(e.to_string()))?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::OrganizationName, options.trust_domain.clone());
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        params.serial_number = Some(random_serial()?);
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - CLOCK_SKEW_GRACE;
        params.not_after = now + options.self_signed_root_ttl;
        let cert = params.self_signed(&key).map_err(|e| CaError::Sign(e.to_string()))?;
        Ok(CaBundle {
            ca_cert: cert.pem(),
            ca_key: key.serialize_pem(),
            cert_chain: String::new(),
            root_cert: cert.pem(),
        })
    }

    /// Writes the files into `dir` (created; the key with mode 0600), each atomically (a temporary
    /// file written and synced, then renamed over the name, then the directory synced), the
    /// certificates first and the key last: a write cut short (kill, crash, full disk) leaves either
    /// no key, so the next start makes a new root, or the complete set. A key without its certificate
    /// is found at start and named ([`IstioCa::load_or_create`]).
    ///
    /// # Errors
    /// [`CaError::File`] naming what cannot be written.
    pub fn write_dir(&self, dir: &Path) -> Result<(), CaError> {
        let fail = |file: PathBuf| {
            move |e: std::io::Error| CaError::File { file, reason: format!("cannot write: {e}") }
        };
        std::fs::create_dir_all(dir).map_err(fail(dir.to_path_buf()))?;
        for (name, text) in
            [(CA_CERT, &self.ca_cert), (ROOT_CERT, &self.root_cert), (CERT_CHAIN, &self.cert_chain)]
        {
            let file = dir.join(name);
            write_atomic(&file, text.as_bytes(), 0o644).map_err(fail(file))?;
        }
        let key_file = dir.join(CA_KEY);
        write_atomic(&key_file, self.ca_key.as_bytes(), 0o600).map_err(fail(key_file))?;
        Ok(())
    }
}

/// The certificate authority (see the module doc). Signing takes `&self`; share it in an `Arc`.
pub struct IstioCa {
    issuer: Issuer<'static, KeyPair>,
    chain_pems: Vec<String>,
    root_pem: String,
    roots: Vec<CertificateDer<'static>>,
    options: CaOptions,
    source: CaSource,
}

impl std::fmt::Debug for IstioCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IstioCa")
            .field("source", &self.source)
            .field("trust_domain", &self.options.trust_domain)
            .finish()
    }
}

fn read(dir: &Path, name: &str) -> Result<String, CaError> {
    let file = dir.join(name);
    std::fs::read_to_string(&file).map_err(|e| CaError::File { file, reason: format!("cannot read: {e}") })
}

/// The CA's signing key from PEM in any of the encodings Istio reads (`ParsePemEncodedKey`): PKCS#8
/// (`PRIVATE KEY`), PKCS#1 RSA (`RSA PRIVATE KEY`, what istiod writes into `istio-ca-secret` for its
/// default RSA root) and SEC1 EC (`EC PRIVATE KEY`); the latter two are re-wrapped as PKCS#8, the only
/// form the signer takes.
///
/// # Errors
/// The text holds no private key, or one of an unsupported algorithm (the message says which forms
/// are read).
fn signing_key(pem_text: &str) -> Result<KeyPair, String> {
    use rustls_pki_types::PrivateKeyDer;
    let unusable = |e: &dyn std::fmt::Display| {
        format!("not a usable PEM private key ({e}); PKCS#8, PKCS#1 RSA or SEC1 EC (P-256, P-384) are read")
    };
    let key = PrivateKeyDer::from_pem_slice(pem_text.as_bytes()).map_err(|e| unusable(&e))?;
    let pkcs8 = match &key {
        PrivateKeyDer::Pkcs8(der) => der.secret_pkcs8_der().to_vec(),
        PrivateKeyDer::Pkcs1(der) => der::pkcs8_of_rsa(der.secret_pkcs1_der()),
        PrivateKeyDer::Sec1(der) => der::pkcs8_of_ec(der.secret_sec1_der())
            .ok_or_else(|| unusable(&"SEC1 key without a named curve"))?,
        _ => return Err(unusable(&"unknown key encoding")),
    };
    KeyPair::try_from(pkcs8.as_slice()).map_err(|e| unusable(&e))
}

/// The little DER needed to re-wrap PKCS#1 and SEC1 keys as PKCS#8 (RFC 5208, RFC 5915).
mod der {
    /// `rsaEncryption` (1.2.840.113549.1.1.1) with its NULL parameters.
    const RSA_ALGORITHM: [u8; 13] =
        [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00];
    /// `id-ecPublicKey` (1.2.840.10045.2.1).
    const EC_PUBLIC_KEY: [u8; 9] = [0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

    /// A DER element: tag, definite length, content.
    pub(super) fn element(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let len = content.len();
        if len < 0x80 {
            out.push(len as u8);
        } else {
            let bytes: Vec<u8> = len.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
            out.push(0x80 | bytes.len() as u8);
            out.extend(bytes);
        }
        out.extend_from_slice(content);
        out
    }

    /// One element at the start of `input`: (tag, content, rest).
    pub(super) fn read(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = input.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            (rest[..n].iter().fold(0usize, |len, b| (len << 8) | usize::from(*b)), &rest[n..])
        };
        (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
    }

    fn private_key_info(algorithm: &[u8], key: &[u8]) -> Vec<u8> {
        let mut body = element(0x02, &[0]);
        body.extend(element(0x30, algorithm));
        body.extend(element(0x04, key));
        element(0x30, &body)
    }

    /// PKCS#8 around a PKCS#1 `RSAPrivateKey`.
    pub(super) fn pkcs8_of_rsa(pkcs1: &[u8]) -> Vec<u8> {
        private_key_info(&RSA_ALGORITHM, pkcs1)
    }

    /// PKCS#8 around a SEC1 `ECPrivateKey`, its curve taken from the key's `[0] parameters`; `None`
    /// when it names none.
    pub(super) fn pkcs8_of_ec(sec1: &[u8]) -> Option<Vec<u8>> {
        let (0x30, mut fields, _) = read(sec1)? else { return None };
        while let Some((tag, content, rest)) = read(fields) {
            if tag == 0xa0 {
                let mut algorithm = EC_PUBLIC_KEY.to_vec();
                algorithm.extend_from_slice(content);
                return Some(private_key_info(&algorithm, sec1));
            }
            fields = rest;
        }
        None
    }
}

fn certs_of(dir: &Path, name: &str, text: &str) -> Result<Vec<CertificateDer<'static>>, CaError> {
    CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CaError::File { file: dir.join(name), reason: format!("not PEM certificates: {e}") })
}

fn pem_of(der: &[u8]) -> String {
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    pem::encode_config(&pem::Pem::new("CERTIFICATE", der.to_vec()), config)
}

impl IstioCa {
    /// The CA from Istio's plugged-in directory when it holds `ca-key.pem`; else the self-signed
    /// root persisted in `self_signed_dir`, created there (mode 0600 key) if absent.
    ///
    /// # Errors
    /// [`CaError::File`] naming the file that cannot be read, is not PEM, or whose key does not
    /// belong to `ca-cert.pem`; also when the self-signed directory cannot be written.
    pub fn load_or_create(
        plugged_dir: Option<&Path>,
        self_signed_dir: &Path,
        options: CaOptions,
    ) -> Result<IstioCa, CaError> {
        if let Some(dir) = plugged_dir.filter(|d| d.join(CA_KEY).exists()) {
            return Self::load(dir, CaSource::PluggedIn(dir.to_path_buf()), options);
        }
        if self_signed_dir.join(CA_KEY).exists() {
            // meshpilot's own set, written key last: a key without its certificates was cut short.
            for name in [CA_CERT, ROOT_CERT] {
                if !self_signed_dir.join(name).exists() {
                    return Err(CaError::File {
                        file: self_signed_dir.join(name),
                        reason: format!(
                            "missing beside {CA_KEY}: a half-written CA (a write of an older version was \
                             cut short); restore the set, or remove {CA_KEY} to have a new root made"
                        ),
                    });
                }
            }
            return Self::load(self_signed_dir, CaSource::SelfSigned(self_signed_dir.to_path_buf()), options);
        }
        Self::create_self_signed(self_signed_dir, options)
    }

    fn load(dir: &Path, source: CaSource, options: CaOptions) -> Result<IstioCa, CaError> {
        Self::from_bundle(&CaBundle::read_dir(dir)?, dir, source, options)
    }

    fn create_self_signed(dir: &Path, options: CaOptions) -> Result<IstioCa, CaError> {
        let bundle = CaBundle::self_signed(&options)?;
        bundle.write_dir(dir)?;
        tracing::info!(dir = %dir.display(), "created a self-signed root CA");
        Self::from_bundle(&bundle, dir, CaSource::SelfSigned(dir.to_path_buf()), options)
    }

    /// The CA from key material read elsewhere (e.g. the Kubernetes secret `istio-ca-secret`);
    /// `location` names where it came from in errors (`location/ca-key.pem: …`).
    ///
    /// # Errors
    /// [`CaError::File`] as [`IstioCa::load_or_create`].
    pub fn from_bundle(
        bundle: &CaBundle,
        location: &Path,
        source: CaSource,
        options: CaOptions,
    ) -> Result<IstioCa, CaError> {
        let bad = |name: &str, reason: String| CaError::File { file: location.join(name), reason };
        let key = signing_key(&bundle.ca_key).map_err(|reason| bad(CA_KEY, reason))?;
        let cert = certs_of(location, CA_CERT, &bundle.ca_cert)?
            .into_iter()
            .next()
            .ok_or_else(|| bad(CA_CERT, "no certificate".into()))?;
        let (_, parsed) = x509_parser::parse_x509_certificate(&cert)
            .map_err(|e| bad(CA_CERT, format!("invalid certificate: {e}")))?;
        if parsed.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
            return Err(bad(CA_KEY, format!("the key does not belong to the certificate in {CA_CERT}")));
        }
        let issuer = Issuer::from_ca_cert_der(&cert, key)
            .map_err(|e| bad(CA_CERT, format!("cannot sign with it: {e}")))?;
        let chain_pems =
            certs_of(location, CERT_CHAIN, &bundle.cert_chain)?.iter().map(|c| pem_of(c)).collect();
        let roots = certs_of(location, ROOT_CERT, &bundle.root_cert)?;
        if roots.is_empty() {
            return Err(bad(ROOT_CERT, "no certificate".into()));
        }
        Ok(IstioCa { issuer, chain_pems, root_pem: bundle.root_cert.clone(), roots, options, source })
    }

    /// Where the keys came from.
    pub fn source(&self) -> &CaSource {
        &self.source
    }

    /// The settings.
    pub fn options(&self) -> &CaOptions {
        &self.options
    }

    /// The root certificate(s), PEM (published as `root-cert.pem` / ConfigMap `istio-ca-root-cert`).
    pub fn root_pem(&self) -> &str {
        &self.root_pem
    }

    /// The root certificate(s), DER (trust anchors for client certificates on 15012).
    pub fn roots(&self) -> &[CertificateDer<'static>] {
        &self.roots
    }

    /// Signs `csr_pem` for `identities` (URI SANs) with `ttl_seconds` (see the module doc for the
    /// TTL rules). Returns the chain as `CreateCertificate` answers it: leaf, intermediates, root.
    ///
    /// # Errors
    /// [`CaError::Csr`], [`CaError::Ttl`], [`CaError::NoIdentity`], [`CaError::Sign`].
    pub fn sign_csr(
        &self,
        csr_pem: &str,
        identities: &[String],
        ttl_seconds: i64,
    ) -> Result<Vec<String>, CaError> {
        let ttl = self.ttl(ttl_seconds)?;
        if identities.is_empty() {
            return Err(CaError::NoIdentity);
        }
        let public_key = csr_public_key(csr_pem)?;
        let sans = identities
            .iter()
            .map(|i| {
                i.as_str()
                    .try_into()
                    .map(SanType::URI)
                    .map_err(|_| CaError::Sign(format!("identity {i:?} is not ASCII")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let leaf = self.issue(&public_key, sans, ttl)?;
        let mut chain = vec![leaf];
        chain.extend(self.chain_pems.iter().cloned());
        chain.push(self.root_pem.clone());
        Ok(chain)
    }

    /// A key and certificate for the control plane's own serving port (DNS SANs such as
    /// `istiod.istio-system.svc`; a name that is an IP address, such as `127.0.0.1` for a webhook
    /// called by URL, becomes an IP SAN), valid for `ttl`: (certificate chain DER, PKCS#8 key DER).
    ///
    /// # Errors
    /// [`CaError::Sign`].
    pub fn issue_serving(
        &self,
        dns_names: &[String],
        ttl: Duration,
    ) -> Result<(Vec<CertificateDer<'static>>, Vec<u8>), CaError> {
        let key = KeyPair::generate().map_err(|e| CaError::Sign(e.to_string()))?;
        let sans = dns_names
            .iter()
            .map(|n| {
                if let Ok(ip) = n.parse::<std::net::IpAddr>() {
                    return Ok(SanType::IpAddress(ip));
                }
                n.as_str()
                    .try_into()
                    .map(SanType::DnsName)
                    .map_err(|_| CaError::Sign(format!("DNS name {n:?} is not ASCII")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let leaf = self.issue(&key, sans, ttl)?;
        let mut chain =
            vec![CertificateDer::from_pem_slice(leaf.as_bytes()).map_err(|e| CaError::Sign(e.to_string()))?];
        for pem in &self.chain_pems {
            chain.push(
                CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|e| CaError::Sign(e.to_string()))?,
            );
        }
        Ok((chain, key.serialize_der()))
    }

    /// A new key and a certificate for `identity`, valid for `ttl` (capped by the CA's maximum): the
    /// credentials a workload outside Kubernetes presents for its first CSR (pilot-agent's
    /// `PROV_CERT` directory). Returns (chain PEMs as [`IstioCa::sign_csr`] answers, PKCS#8 key PEM).
    ///
    /// # Errors
    /// [`CaError::Ttl`] above the maximum TTL; [`CaError::Sign`].
    pub fn issue_identity(
        &self,
        identity: &SpiffeId,
        ttl: Duration,
    ) -> Result<(Vec<String>, String), CaError> {
        let key = KeyPair::generate().map_err(|e| CaError::Sign(e.to_string()))?;
        let seconds = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX).max(1);
        let ttl = self.ttl(seconds)?;
        let uri = identity.to_string();
        let san = uri
            .as_str()
            .try_into()
            .map(SanType::URI)
            .map_err(|_| CaError::Sign(format!("identity {uri:?} is not ASCII")))?;
        let mut chain = vec![self.issue(&key, vec![san], ttl)?];
        chain.extend(self.chain_pems.iter().cloned());
        chain.push(self.root_pem.clone());
        Ok((chain, key.serialize_pem()))
    }

    fn ttl(&self, ttl_seconds: i64) -> Result<Duration, CaError> {
        if ttl_seconds <= 0 {
            return Ok(self.options.default_cert_ttl);
        }
        let ttl = Duration::from_secs(ttl_seconds.unsigned_abs());
        if ttl > self.options.max_cert_ttl {
            return Err(CaError::Ttl { requested: ttl_seconds, max: self.options.max_cert_ttl.as_secs() });
        }
        Ok(ttl)
    }

    fn issue(
        &self,
        public_key: &impl rcgen::PublicKeyData,
        sans: Vec<SanType>,
        ttl: Duration,
    ) -> Result<String, CaError> {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.subject_alt_names = sans;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.is_ca = IsCa::ExplicitNoCa;
        params.serial_number = Some(random_serial()?);
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - CLOCK_SKEW_GRACE;
        params.not_after = now + ttl;
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(public_key, &self.issuer).map_err(|e| CaError::Sign(e.to_string()))?;
        Ok(cert.pem())
    }
}

/// The public key of a PEM CSR whose self-signature verifies.
fn csr_public_key(csr_pem: &str) -> Result<SubjectPublicKeyInfo, CaError> {
    use rustls_pki_types::CertificateSigningRequestDer;
    let der = CertificateSigningRequestDer::from_pem_slice(csr_pem.as_bytes())
        .map_err(|e| CaError::Csr(format!("not a PEM certificate request: {e}")))?;
    let (rest, csr) =
        X509CertificationRequest::from_der(der.as_ref()).map_err(|e| CaError::Csr(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CaError::Csr("trailing bytes after the certificate request".into()));
    }
    csr.verify_signature().map_err(|e| CaError::Csr(format!("signature does not verify: {e}")))?;
    SubjectPublicKeyInfo::from_der(csr.certification_request_info.subject_pki.raw)
        .map_err(|e| CaError::Csr(format!("unsupported public key: {e}")))
}

/// A random positive 128-bit serial number (`ring`'s system generator, which rcgen uses too).
fn random_serial() -> Result<SerialNumber, CaError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new().fill(&mut bytes).map_err(|_| CaError::Sign("no random source".into()))?;
    bytes[0] &= 0x7f;
    Ok(SerialNumber::from_slice(&bytes))
}

/// Writes `bytes` to `path` atomically with `mode`: a temporary file beside it (`.<name>.tmp`),
/// written and synced, renamed over `path`, then the directory synced, so a reader (or the next
/// start after a crash) sees the old content or the new, never a part.
///
/// # Errors
/// A step fails; the temporary file is removed.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let written = (|| {
        let mut f =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Writes a private key file: created or truncated, mode 0600.
///
/// # Errors
/// The file cannot be written.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(bytes)
}

/// The SPIFFE identities (URI SANs) of a DER certificate; empty when none parse.
pub fn certificate_identities(cert: &[u8]) -> Vec<SpiffeId> {
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert) else { return Vec::new() };
    let Ok(Some(san)) = parsed.subject_alternative_name() else { return Vec::new() };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::URI(uri) => SpiffeId::parse(uri),
            _ => None,
        })
        .collect()
}
