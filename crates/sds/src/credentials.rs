//! [`CredentialSecrets`]: serves the SDS secrets of `credentialName` / `certificateRefs`
//! (`kubernetes://NAME`, `kubernetes://NS/NAME`, `kubernetes-gateway://NS/NAME`, each with its
//! `-cacert` CA resource; names in [`model::credentials`]) from Kubernetes Secrets, as istiod's
//! `SecretGen` (`pilot/pkg/xds/sds.go`) with the credentials controller
//! (`pilot/pkg/credentials/kube/secrets.go`).
//!
//! ```text
//!  Secret watch (kube) ─┐                      SDS request (names, proxy identity, verified refs)
//!  --config-dir Secrets ┴► sources ─► get(ns, name)     │ model::credentials::authorize
//!        │ changed (ns, name)                            ▼
//!        ▼                                  extract cert/key or CA ─► Envoy Secret (inline bytes)
//!  SDS-only push of the subscribed names that resolve to a changed Secret (or its -cacert twin)
//! ```
//!
//! Secrets come from named sources (the cluster's watch, the config directories), each replaced or
//! updated by its owner; a name is looked up in the sources in the order they were first given data,
//! config directories before the cluster ([`CredentialSecrets::with_sources`]). Which keys are read
//! (Istio's `ExtractCertInfo` / `ExtractRoot`): `cert`/`key` (+ `crl`), else `tls.crt`/`tls.key`
//! (+ `tls.ocsp-staple`, `ca.crl`); CA: `cacert` (+ `crl`), else `ca.crt` (+ `ca.crl`). A `-cacert`
//! name reads the Secret `NAME-cacert`, or `NAME` when that does not exist.
//!
//! A name that cannot be served (not authorized, missing Secret, missing keys) is not sent and the
//! reason is logged as a warning with istiod's wording, counted in `pilot_sds_certificate_errors_total`.
//! Secret contents never reach logs or `Debug` output (only names and key names).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
};

use envoy_types::pb::envoy::{
    config::core::v3::{DataSource, data_source},
    extensions::transport_sockets::tls::v3::{CertificateValidationContext, Secret, TlsCertificate, secret},
};
use model::credentials::{self, Denied, ProxyIdentity, SecretResource};
use tracing::warn;
use xds::Resource;

/// Counter of secrets that could not be sent (Istio's `pilot_sds_certificate_errors_total`).
pub const SDS_CERTIFICATE_ERRORS: &str = "pilot_sds_certificate_errors_total";

/// Key of the certificate chain in a generic Secret (Istio's `GenericScrtCert`).
pub const GENERIC_CERT: &str = "cert";
/// Key of the private key in a generic Secret.
pub const GENERIC_KEY: &str = "key";
/// Key of the CA certificates in a generic Secret.
pub const GENERIC_CA_CERT: &str = "cacert";
/// Key of the CRL in a generic Secret.
pub const GENERIC_CRL: &str = "crl";
/// Key of the certificate chain in a `kubernetes.io/tls` Secret.
pub const TLS_CERT: &str = "tls.crt";
/// Key of the private key in a `kubernetes.io/tls` Secret.
pub const TLS_KEY: &str = "tls.key";
/// Key of the OCSP staple in a `kubernetes.io/tls` Secret.
pub const TLS_OCSP_STAPLE: &str = "tls.ocsp-staple";
/// Key of the CA certificates in a `kubernetes.io/tls` Secret.
pub const TLS_CA_CERT: &str = "ca.crt";
/// Key of the CRL in a `kubernetes.io/tls` Secret.
pub const TLS_CRL: &str = "ca.crl";

/// One Secret's `data` (decoded bytes by key). `Debug` shows the key names only.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct SecretData {
    /// The decoded values by key.
    pub data: BTreeMap<String, Vec<u8>>,
}

impl std::fmt::Debug for SecretData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretData").field("keys", &self.data.keys().collect::<Vec<_>>()).finish()
    }
}

/// A Secret's identity: `(namespace, name)`.
pub type SecretKey = (String, String);

/// What a key pair resource carries (Istio's `credentials.CertInfo`). `Debug` shows sizes only.
#[derive(Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// Certificate chain (PEM), or the CA certificates for a CA resource.
    pub cert: Vec<u8>,
    /// Private key (PEM); empty for a CA resource.
    pub key: Vec<u8>,
    /// OCSP staple, if any.
    pub staple: Option<Vec<u8>>,
    /// CRL, if any.
    pub crl: Option<Vec<u8>>,
}

impl std::fmt::Debug for CertInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertInfo")
            .field("cert_bytes", &self.cert.len())
            .field("key_bytes", &self.key.len())
            .field("staple", &self.staple.is_some())
            .field("crl", &self.crl.is_some())
            .finish()
    }
}

fn non_empty<'a>(data: &'a BTreeMap<String, Vec<u8>>, key: &str) -> Option<&'a Vec<u8>> {
    data.get(key).filter(|v| !v.is_empty())
}

/// Up to three key names, then "and N more..." (Istio's `truncatedKeysMessage`).
fn truncated_keys(data: &BTreeMap<String, Vec<u8>>) -> String {
    let keys: Vec<&str> = data.keys().map(String::as_str).collect();
    if keys.len() < 3 {
        return keys.join(", ");
    }
    format!("{}, and {} more...", keys[..3].join(", "), keys.len() - 3)
}

/// The certificate chain and key of a Secret (Istio's `ExtractCertInfo`): `cert`/`key` (+ `crl`)
/// first, else `tls.crt`/`tls.key` (+ `tls.ocsp-staple`, `ca.crl`).
///
/// # Errors
/// Istio's messages: empty keys, or the keys found when neither pair is there.
pub fn extract_cert_info(data: &BTreeMap<String, Vec<u8>>) -> Result<CertInfo, String> {
    if let (Some(cert), Some(key)) = (non_empty(data, GENERIC_CERT), non_empty(data, GENERIC_KEY)) {
        return Ok(CertInfo {
            cert: cert.clone(),
            key: key.clone(),
            staple: None,
            crl: data.get(GENERIC_CRL).cloned(),
        });
    }
    if let (Some(cert), Some(key)) = (non_empty(data, TLS_CERT), non_empty(data, TLS_KEY)) {
        return Ok(CertInfo {
            cert: cert.clone(),
            key: key.clone(),
            staple: data.get(TLS_OCSP_STAPLE).cloned(),
            crl: data.get(TLS_CRL).cloned(),
        });
    }
    for (c, k) in [(GENERIC_CERT, GENERIC_KEY), (TLS_CERT, TLS_KEY)] {
        if data.contains_key(c) && data.contains_key(k) {
            return Err(format!("found keys {c:?} and {k:?}, but they were empty"));
        }
    }
    Err(format!(
        "found secret, but didn't have expected keys ({GENERIC_CERT} and {GENERIC_KEY}) or ({TLS_CERT} and \
         {TLS_KEY}); found: {}",
        truncated_keys(data)
    ))
}

/// The CA certificates of a Secret (Istio's `ExtractRoot`): `cacert` (+ `crl`), else `ca.crt`
/// (+ `ca.crl`).
///
/// # Errors
/// Istio's messages: an empty key, or the keys found.
pub fn extract_root(data: &BTreeMap<String, Vec<u8>>) -> Result<CertInfo, String> {
    for (ca, crl) in [(GENERIC_CA_CERT, GENERIC_CRL), (TLS_CA_CERT, TLS_CRL)] {
        if let Some(cert) = non_empty(data, ca) {
            return Ok(CertInfo {
                cert: cert.clone(),
                key: Vec::new(),
                staple: None,
                crl: data.get(crl).cloned(),
            });
        }
    }
    for ca in [GENERIC_CA_CERT, TLS_CA_CERT] {
        if data.contains_key(ca) {
            return Err(format!("found key {ca:?}, but it was empty"));
        }
    }
    Err(format!(
        "found secret, but didn't have expected keys {GENERIC_CA_CERT} or {TLS_CA_CERT}; found: {}",
        truncated_keys(data)
    ))
}

fn inline(bytes: &[u8]) -> DataSource {
    DataSource { specifier: Some(data_source::Specifier::InlineBytes(bytes.to_vec())), ..Default::default() }
}

/// The Envoy `Secret` of a key pair (Istio's `toEnvoyTLSSecret` without private key providers):
/// chain, key and OCSP staple inline.
pub fn tls_secret(name: &str, info: &CertInfo) -> Secret {
    Secret {
        name: name.to_string(),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(&info.cert)),
            private_key: Some(inline(&info.key)),
            ocsp_staple: info.staple.as_deref().map(inline),
            ..Default::default()
        })),
    }
}

/// The Envoy `Secret` of CA certificates (Istio's `toEnvoyCaSecret`): `trusted_ca` and the CRL inline.
pub fn ca_secret(name: &str, info: &CertInfo) -> Secret {
    Secret {
        name: name.to_string(),
        r#type: Some(secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(inline(&info.cert)),
            crl: info.crl.as_deref().map(inline),
            ..Default::default()
        })),
    }
}

#[derive(Default)]
struct State {
    /// Sources in lookup order, each with its Secrets.
    sources: Vec<(String, BTreeMap<SecretKey, Arc<SecretData>>)>,
}

impl State {
    fn get(&self, key: &SecretKey) -> Option<&Arc<SecretData>> {
        self.sources.iter().find_map(|(_, s)| s.get(key))
    }

    fn source(&mut self, source: &str) -> &mut BTreeMap<SecretKey, Arc<SecretData>> {
        let i = match self.sources.iter().position(|(n, _)| n == source) {
            Some(i) => i,
            None => {
                self.sources.push((source.to_string(), BTreeMap::new()));
                self.sources.len() - 1
            }
        };
        &mut self.sources[i].1
    }
}

/// Kubernetes Secrets by source, served as SDS secrets; see the module documentation.
#[derive(Default)]
pub struct CredentialSecrets {
    state: Mutex<State>,
}

impl std::fmt::Debug for CredentialSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        let counts: Vec<(&str, usize)> = state.sources.iter().map(|(n, s)| (n.as_str(), s.len())).collect();
        f.debug_struct("CredentialSecrets").field("sources", &counts).finish()
    }
}

/// Source name of the config directories' Secrets.
pub const CONFIG_DIR_SOURCE: &str = "config-dir";
/// Source name of the cluster's Secrets.
pub const KUBERNETES_SOURCE: &str = "kubernetes";

impl CredentialSecrets {
    /// An empty store whose lookups go through `sources` in this order (more sources are appended
    /// when first given data).
    pub fn with_sources(sources: &[&str]) -> Arc<CredentialSecrets> {
        let state = State { sources: sources.iter().map(|s| (s.to_string(), BTreeMap::new())).collect() };
        Arc::new(CredentialSecrets { state: Mutex::new(state) })
    }

    /// An empty store: config directories first, then the cluster.
    pub fn new() -> Arc<CredentialSecrets> {
        Self::with_sources(&[CONFIG_DIR_SOURCE, KUBERNETES_SOURCE])
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces every Secret of `source` (a full list or a re-scan); returns the Secrets whose effective
    /// content changed (added, removed, updated, or shadowed differently).
    pub fn replace(&self, source: &str, secrets: BTreeMap<SecretKey, SecretData>) -> BTreeSet<SecretKey> {
        let mut state = self.lock();
        let before: BTreeMap<SecretKey, Option<Arc<SecretData>>> = {
            let old: BTreeSet<SecretKey> = state.source(source).keys().cloned().collect();
            old.union(&secrets.keys().cloned().collect())
                .map(|k| (k.clone(), state.get(k).cloned()))
                .collect()
        };
        *state.source(source) = secrets.into_iter().map(|(k, v)| (k, Arc::new(v))).collect();
        before.into_iter().filter(|(k, old)| state.get(k) != old.as_ref()).map(|(k, _)| k).collect()
    }

    /// Sets (`Some`) or removes (`None`) one Secret of `source`; `true` if its effective content changed.
    pub fn apply(&self, source: &str, key: SecretKey, data: Option<SecretData>) -> bool {
        let mut state = self.lock();
        let old = state.get(&key).cloned();
        match data {
            Some(d) => {
                state.source(source).insert(key.clone(), Arc::new(d));
            }
            None => {
                state.source(source).remove(&key);
            }
        }
        state.get(&key) != old.as_ref()
    }

    /// The Secret `namespace/name` as served (first source holding it).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<SecretData>> {
        self.lock().get(&(namespace.to_string(), name.to_string())).cloned()
    }

    /// `(namespace, name)` of every Secret held, any source.
    pub fn keys(&self) -> BTreeSet<SecretKey> {
        self.lock().sources.iter().flat_map(|(_, s)| s.keys().cloned()).collect()
    }

    /// The SDS resources for `names` requested by proxy `proxy_id` with `identity` (`None`: not
    /// authenticated), `verified` being its gateways' verified certificate references
    /// ([`credentials::verified_certificate_references`]). Denied and unservable names are left out and
    /// logged (istiod's `filterAuthorizedResources` / `generate`).
    pub fn resources(
        &self,
        proxy_id: &str,
        names: &BTreeSet<String>,
        identity: Option<&ProxyIdentity>,
        verified: &BTreeSet<String>,
    ) -> Vec<Resource> {
        if names.is_empty() {
            return Vec::new();
        }
        let (allowed, denied) = credentials::authorize(names, identity, verified);
        log_denied(proxy_id, &denied);
        allowed.iter().filter_map(|r| self.generate(r)).collect()
    }

    fn generate(&self, r: &SecretResource) -> Option<Resource> {
        let fail = |what: &str, e: String| {
            metrics::counter!(SDS_CERTIFICATE_ERRORS).increment(1);
            warn!("failed to fetch {what} for {}: {e}", r.resource_name);
            None
        };
        if r.is_ca_only() {
            let candidates = r.candidate_secrets();
            let Some(data) = candidates.iter().find_map(|(ns, n)| self.get(ns, n)) else {
                let (ns, n) = candidates.last().cloned().unwrap_or_default();
                return fail("ca certificate", format!("secret {ns}/{n} not found"));
            };
            return match extract_root(&data.data) {
                Ok(info) => Some(Resource::new(&r.resource_name, &ca_secret(&r.resource_name, &info))),
                Err(e) => fail("ca certificate", e),
            };
        }
        let Some(data) = self.get(&r.namespace, &r.name) else {
            return fail("key and certificate", format!("secret {}/{} not found", r.namespace, r.name));
        };
        match extract_cert_info(&data.data) {
            Ok(info) => Some(Resource::new(&r.resource_name, &tls_secret(&r.resource_name, &info))),
            Err(e) => fail("key and certificate", e),
        }
    }

    /// Of the SDS names a connection `watched` (its proxy in `proxy_namespace`), those that resolve to
    /// one of the Secrets `changed` or to its `-cacert` twin (Istio's `relatedConfigs`): what an SDS
    /// push of `changed` sends that connection. Pure.
    pub fn affected_names(
        watched: &BTreeSet<String>,
        proxy_namespace: &str,
        changed: &BTreeSet<SecretKey>,
    ) -> BTreeSet<String> {
        if changed.is_empty() {
            return BTreeSet::new();
        }
        watched
            .iter()
            .filter(|n| {
                credentials::parse_resource_name(n, proxy_namespace).is_ok_and(|r| {
                    let base = r.name.strip_suffix(credentials::SDS_CA_SUFFIX).unwrap_or(&r.name).to_string();
                    let ca = format!("{base}{}", credentials::SDS_CA_SUFFIX);
                    changed.contains(&(r.namespace.clone(), base)) || changed.contains(&(r.namespace, ca))
                })
            })
            .cloned()
            .collect()
    }
}

/// Logs denied names once per request, at most three names (istiod's `atMostNJoin`).
fn log_denied(proxy_id: &str, denied: &[Denied]) {
    if denied.is_empty() {
        return;
    }
    let mut names: Vec<&str> = denied.iter().take(3).map(|d| d.resource_name.as_str()).collect();
    if denied.len() > 3 {
        names.push("...");
    }
    let reasons: BTreeSet<&str> = denied.iter().map(|d| d.reason.as_str()).collect();
    metrics::counter!(SDS_CERTIFICATE_ERRORS).increment(1);
    warn!(
        "proxy {proxy_id} attempted to access unauthorized certificates {}: {}",
        names.join(", "),
        reasons.into_iter().collect::<Vec<_>>().join("; ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> SecretData {
        SecretData { data: pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect() }
    }

    fn key(ns: &str, name: &str) -> SecretKey {
        (ns.to_string(), name.to_string())
    }

    #[test]
    fn keys_are_read_as_istio() {
        let generic = data(&[("cert", "C"), ("key", "K"), ("tls.crt", "X"), ("tls.key", "Y"), ("crl", "R")]);
        let info = extract_cert_info(&generic.data).unwrap();
        assert_eq!((info.cert.as_slice(), info.key.as_slice()), (&b"C"[..], &b"K"[..]), "cert/key first");
        assert_eq!(info.crl.as_deref(), Some(&b"R"[..]));
        let tls = data(&[("tls.crt", "X"), ("tls.key", "Y"), ("tls.ocsp-staple", "O"), ("ca.crt", "CA")]);
        let info = extract_cert_info(&tls.data).unwrap();
        assert_eq!((info.cert.as_slice(), info.staple.as_deref()), (&b"X"[..], Some(&b"O"[..])));
        assert_eq!(extract_root(&tls.data).unwrap().cert, b"CA");
        assert_eq!(
            extract_cert_info(&data(&[("tls.crt", ""), ("tls.key", "")]).data).unwrap_err(),
            "found keys \"tls.crt\" and \"tls.key\", but they were empty"
        );
        assert_eq!(
            extract_cert_info(&data(&[("a", "1"), ("b", "1"), ("c", "1"), ("d", "1")]).data).unwrap_err(),
            "found secret, but didn't have expected keys (cert and key) or (tls.crt and tls.key); found: a, b, c, \
             and 1 more..."
        );
        assert_eq!(
            extract_root(&data(&[("tls.crt", "X")]).data).unwrap_err(),
            "found secret, but didn't have expected keys cacert or ca.crt; found: tls.crt"
        );
        assert_eq!(
            extract_root(&data(&[("cacert", "")]).data).unwrap_err(),
            "found key \"cacert\", but it was empty"
        );
    }

    #[test]
    fn debug_output_shows_key_names_only() {
        let d = data(&[("tls.key", "PRIVATE")]);
        let shown = format!("{d:?}");
        assert!(shown.contains("tls.key") && !shown.contains("PRIVATE"), "{shown}");
    }

    #[test]
    fn sources_shadow_in_order_and_report_effective_changes() {
        let store = CredentialSecrets::new();
        assert!(store.apply(KUBERNETES_SOURCE, key("a", "s"), Some(data(&[("cacert", "kube")]))));
        let changed =
            store.replace(CONFIG_DIR_SOURCE, BTreeMap::from([(key("a", "s"), data(&[("cacert", "file")]))]));
        assert_eq!(changed, BTreeSet::from([key("a", "s")]));
        assert_eq!(store.get("a", "s").unwrap().data["cacert"], b"file", "config directories first");
        assert!(
            !store.apply(KUBERNETES_SOURCE, key("a", "s"), Some(data(&[("cacert", "kube2")]))),
            "shadowed"
        );
        let changed = store.replace(CONFIG_DIR_SOURCE, BTreeMap::new());
        assert_eq!(changed, BTreeSet::from([key("a", "s")]));
        assert_eq!(store.get("a", "s").unwrap().data["cacert"], b"kube2");
        assert!(store.apply(KUBERNETES_SOURCE, key("a", "s"), None));
        assert!(store.get("a", "s").is_none());
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn resources_are_authorized_and_built() {
        let store = CredentialSecrets::new();
        store.apply(
            KUBERNETES_SOURCE,
            key("gw", "cert"),
            Some(data(&[("tls.crt", "C"), ("tls.key", "K"), ("ca.crt", "CA")])),
        );
        store.apply(
            KUBERNETES_SOURCE,
            key("other", "cert"),
            Some(data(&[("tls.crt", "C2"), ("tls.key", "K2")])),
        );
        let identity = ProxyIdentity::new("spiffe://cluster.local/ns/gw/sa/default", "gw");
        let requested = names(&[
            "kubernetes://cert",
            "kubernetes://cert-cacert",
            "kubernetes://other/cert",
            "kubernetes://missing",
        ]);
        let got = store.resources("router~1", &requested, Some(&identity), &BTreeSet::new());
        let got_names: Vec<&str> = got.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            got_names,
            ["kubernetes://cert", "kubernetes://cert-cacert"],
            "never another namespace's key"
        );
        let secret: Secret = prost::Message::decode(got[0].body.value.as_slice()).unwrap();
        let Some(secret::Type::TlsCertificate(t)) = secret.r#type else { panic!("{secret:?}") };
        assert_eq!(t.certificate_chain, Some(inline(b"C")));
        assert_eq!(t.private_key, Some(inline(b"K")));
        let ca: Secret = prost::Message::decode(got[1].body.value.as_slice()).unwrap();
        let Some(secret::Type::ValidationContext(v)) = ca.r#type else { panic!("{ca:?}") };
        assert_eq!(v.trusted_ca, Some(inline(b"CA")));
        assert!(
            store.resources("router~1", &requested, None, &BTreeSet::new()).is_empty(),
            "unauthenticated"
        );
        let gateway = names(&["kubernetes-gateway://other/cert"]);
        assert!(store.resources("router~1", &gateway, Some(&identity), &BTreeSet::new()).is_empty());
        let got = store.resources("router~1", &gateway, Some(&identity), &gateway);
        assert_eq!(got.len(), 1, "verified by the proxy's gateways");
    }
}
