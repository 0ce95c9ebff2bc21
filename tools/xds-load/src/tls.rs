//! TLS to a secure xDS port (istiod's 15012, meshpilot's `--secure-grpc-addr`), with client
//! certificates as a pilot-agent would present them.
//!
//! The certificates come from the control plane's CA directory (`--ca-dir`, the directory meshpilot
//! keeps its self-signed root in): xds-load reads the CA's files with [`IstioCa::load_or_create`]
//! (creating the root there when absent, before the control plane starts and loads the same files)
//! and signs one client certificate per workload identity
//! `spiffe://<trust domain>/ns/<namespace>/sa/<service account>` locally, for a fresh ECDSA P-256
//! key. This is a shortcut for the benchmark: the signing (what `CreateCertificate` would do) is not
//! part of the measured load, only the TLS handshakes and the encrypted ADS streams are.

use std::{collections::HashMap, net::SocketAddr, path::Path};

use anyhow::{Context as _, anyhow};
use rcgen::{CertificateParams, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, pem::PemObject};
use security::{CaOptions, IstioCa, client::Connector, client::SecureTarget};

use crate::layout::ProxyIdentity;

/// istiod's name on the secure port (pilot-agent's default `ISTIOD_SAN`).
pub const DEFAULT_SERVER_NAME: &str = "istiod.istio-system.svc";

/// How streams reach a secure port.
pub struct TlsSettings {
    /// The address, name and roots of the server.
    pub target: SecureTarget,
    /// The CA to sign client certificates with; none: no client certificate.
    pub ca: Option<IstioCa>,
    /// Trust domain of the client identities.
    pub trust_domain: String,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("target", &self.target.addr)
            .field("server_name", &self.target.server_name)
            .field("client_certificates", &self.ca.is_some())
            .finish()
    }
}

impl TlsSettings {
    /// Settings for `addr`: roots from `root_file` (PEM), or else the CA's root; client certificates
    /// signed with the CA of `ca_dir` (loaded, or created there) when given.
    ///
    /// # Errors
    /// Unreadable roots or CA files, or neither given.
    pub fn new(
        addr: SocketAddr,
        server_name: &str,
        root_file: Option<&Path>,
        ca_dir: Option<&Path>,
    ) -> anyhow::Result<TlsSettings> {
        let ca = match ca_dir {
            Some(dir) => Some(
                IstioCa::load_or_create(None, dir, CaOptions::default())
                    .map_err(|e| anyhow!("--ca-dir {}: {e}", dir.display()))?,
            ),
            None => None,
        };
        let roots = match (root_file, &ca) {
            (Some(file), _) => {
                let text = std::fs::read(file).with_context(|| format!("--tls-root {}", file.display()))?;
                CertificateDer::pem_slice_iter(&text)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| anyhow!("--tls-root {}: not PEM certificates: {e}", file.display()))?
            }
            (None, Some(ca)) => ca.roots().to_vec(),
            (None, None) => anyhow::bail!("TLS needs --tls-root FILE or --ca-dir DIR"),
        };
        let trust_domain =
            ca.as_ref().map_or_else(|| "cluster.local".into(), |c| c.options().trust_domain.clone());
        Ok(TlsSettings {
            target: SecureTarget { addr, server_name: server_name.into(), roots },
            ca,
            trust_domain,
        })
    }

    /// One dialer per workload identity (namespace, service account) of `proxies`, each with its own
    /// key and certificate when there is a CA.
    ///
    /// # Errors
    /// A certificate that cannot be made, or an unusable root.
    pub fn connectors<'a>(
        &self,
        proxies: impl IntoIterator<Item = &'a ProxyIdentity>,
    ) -> anyhow::Result<HashMap<(String, String), Connector>> {
        let mut out = HashMap::new();
        for p in proxies {
            let key = (p.namespace.clone(), p.service_account.clone());
            if out.contains_key(&key) {
                continue;
            }
            let identity = match &self.ca {
                Some(ca) => Some(self.client_certificate(ca, &p.namespace, &p.service_account)?),
                None => None,
            };
            out.insert(key, Connector::new(&self.target, identity).map_err(|e| anyhow!(e))?);
        }
        Ok(out)
    }

    fn client_certificate(
        &self,
        ca: &IstioCa,
        namespace: &str,
        service_account: &str,
    ) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
        let spiffe = format!("spiffe://{}/ns/{namespace}/sa/{service_account}", self.trust_domain);
        let key = KeyPair::generate().context("client key")?;
        let csr = CertificateParams::default().serialize_request(&key).context("client CSR")?;
        let chain =
            ca.sign_csr(&csr.pem().context("client CSR")?, &[spiffe], 0).map_err(|e| anyhow!("{e}"))?;
        // Leaf and intermediates, as Envoy presents them (the root, last, is the server's to hold).
        let chain = chain[..chain.len().saturating_sub(1)]
            .iter()
            .map(|pem| CertificateDer::from_pem_slice(pem.as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow!("signed chain: {e}"))?;
        Ok((chain, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()))))
    }
}
