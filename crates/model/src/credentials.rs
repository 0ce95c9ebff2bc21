//! `credentialName` secrets: Istio's SDS resource names for certificates kept in Kubernetes Secrets,
//! and who may read them.
//!
//! Gateway servers (`tls.credentialName`, `credentialNames`, `caCertCredentialName`) and
//! DestinationRules (`tls.credentialName`, client side) name Secrets; the generators reference them as
//! SDS secrets fetched over ADS, with Istio's names (`pilot/pkg/model/credentials`):
//!
//! - `kubernetes://NAME` (what a bare `credentialName: NAME` becomes): the Secret `NAME` in the
//!   **requesting proxy's** namespace; `kubernetes://NS/NAME` names the namespace explicitly;
//! - `kubernetes-gateway://NS/NAME`: a Secret referenced by a Gateway API listener (`certificateRefs`),
//!   always with its namespace;
//! - the suffix `-cacert` (`NAME-cacert`) asks for the CA certificates (`cacert` / `ca.crt`) of the
//!   Secret `NAME-cacert`, or of `NAME` when that does not exist.
//!
//! Authorization follows istiod's `filterAuthorizedResources` (`pilot/pkg/xds/sds.go`), see
//! [`authorize`]. This module is pure: names, parsing and the authorization decision; the Envoy
//! reference for a name is `networking::credentials::credential_sds_config`.

use std::collections::BTreeSet;

use crate::push::{PARENT_NAMESPACE_ANNOTATION, ProxyContext, PushContext};
use api::{Kind, networking::gateway::server_tls_settings::TlSmode as ServerMode};

/// `kubernetes://`: a Secret of the proxy's namespace (or `kubernetes://NS/NAME`).
pub const KUBERNETES_SECRET_URI: &str = "kubernetes://";
/// `kubernetes-gateway://NS/NAME`: a Secret referenced by a Gateway API Gateway.
pub const KUBERNETES_GATEWAY_SECRET_URI: &str = "kubernetes-gateway://";
/// `builtin://`: the gateway's own workload certificate (Istio's `ISTIO_SIMPLE` terminate mode).
pub const BUILTIN_URI: &str = "builtin://";
/// `configmap://NS/NAME`: CA certificates in a ConfigMap (not served by meshpilot).
pub const CONFIGMAP_URI: &str = "configmap://";
/// `invalid://`: a name Istio uses for a reference it refused (never served).
pub const INVALID_URI: &str = "invalid://";
/// `sds://NAME`: an external SDS server (Istio falls back to ADS without a provider or socket).
pub const EXTERNAL_SDS_URI: &str = "sds://";
/// Suffix of the CA certificate resource of a credential (Istio's `SdsCaSuffix`).
pub const SDS_CA_SUFFIX: &str = "-cacert";
/// Annotation of generated Gateways naming the service account of the gateway deployment (Istio's
/// `constants.InternalServiceAccount`): only proxies of that account get its certificates.
pub const SERVICE_ACCOUNT_ANNOTATION: &str = "internal.istio.io/service-account-name";

/// The SDS resource name of a `credentialName` (Istio's `ToResourceName`): explicit
/// `kubernetes://`, `kubernetes-gateway://`, `configmap://` names stay; anything else becomes
/// `kubernetes://NAME`. `Err` for names meshpilot cannot serve: `builtin://` (the workload
/// certificate, which only pilot-agent holds) and `invalid://`.
///
/// # Errors
/// A message saying why the name is not served.
pub fn to_resource_name(credential_name: &str) -> Result<String, String> {
    let name = credential_name.strip_prefix(EXTERNAL_SDS_URI).unwrap_or(credential_name);
    if name.starts_with(BUILTIN_URI) {
        return Err(format!(
            "{credential_name:?} uses the gateway's Istio workload certificate, which only proxies started by \
             pilot-agent hold"
        ));
    }
    if name.starts_with(INVALID_URI) {
        return Err(format!("{credential_name:?} is an invalid reference"));
    }
    if name.starts_with(KUBERNETES_SECRET_URI)
        || name.starts_with(KUBERNETES_GATEWAY_SECRET_URI)
        || name.starts_with(CONFIGMAP_URI)
    {
        return Ok(name.to_string());
    }
    Ok(format!("{KUBERNETES_SECRET_URI}{name}"))
}

/// `true` for the names of `credentialName` secrets (`kubernetes://`, `kubernetes-gateway://`,
/// `configmap://`), as opposed to certificate files (`file-cert:`, `file-root:`) and workload
/// certificates (`default`, `ROOTCA`).
pub fn is_credential_name(resource_name: &str) -> bool {
    [KUBERNETES_SECRET_URI, KUBERNETES_GATEWAY_SECRET_URI, CONFIGMAP_URI]
        .iter()
        .any(|p| resource_name.starts_with(p))
}

/// Which store a secret resource name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceType {
    /// `kubernetes://`.
    KubernetesSecret,
    /// `kubernetes-gateway://`.
    KubernetesGateway,
    /// `configmap://`.
    ConfigMap,
}

/// A parsed secret resource name (Istio's `credentials.SecretResource`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretResource {
    /// Which store.
    pub resource_type: ResourceType,
    /// The Secret's name, `-cacert` suffix included.
    pub name: String,
    /// The Secret's namespace (the proxy's for `kubernetes://NAME`); never empty.
    pub namespace: String,
    /// The resource name as requested.
    pub resource_name: String,
}

impl SecretResource {
    /// `true` for a CA-only resource (`…-cacert`).
    pub fn is_ca_only(&self) -> bool {
        self.name.ends_with(SDS_CA_SUFFIX)
    }

    /// The Secret holding this resource's data first, then the one without `-cacert` (Istio's
    /// `GetCaCert` falls back to it): `(namespace, name)` pairs.
    pub fn candidate_secrets(&self) -> Vec<(String, String)> {
        let mut out = vec![(self.namespace.clone(), self.name.clone())];
        if let Some(stripped) = self.name.strip_suffix(SDS_CA_SUFFIX) {
            out.push((self.namespace.clone(), stripped.to_string()));
        }
        out
    }
}

/// Parses an SDS resource name requested by a proxy of `proxy_namespace` (Istio's
/// `ParseResourceName`): `kubernetes://NAME` (the proxy's namespace), `kubernetes://NS/NAME`,
/// `kubernetes-gateway://NS/NAME`, `configmap://NS/NAME`.
///
/// # Errors
/// Istio's messages: `unknown resource type: NAME`, `invalid resource name "…". Expected namespace
/// and name` (also for an empty namespace or name).
pub fn parse_resource_name(resource_name: &str, proxy_namespace: &str) -> Result<SecretResource, String> {
    let parts = |rest: &str| -> Result<(String, String), String> {
        let mut split = rest.split('/');
        let (Some(namespace), Some(name)) = (split.next(), split.next()) else {
            return Err(format!("invalid resource name {resource_name:?}. Expected namespace and name"));
        };
        if namespace.is_empty() {
            return Err(format!("invalid resource name {resource_name:?}. Expected namespace"));
        }
        if name.is_empty() {
            return Err(format!("invalid resource name {resource_name:?}. Expected name"));
        }
        Ok((namespace.to_string(), name.to_string()))
    };
    let (resource_type, namespace, name) =
        if let Some(rest) = resource_name.strip_prefix(KUBERNETES_SECRET_URI) {
            let mut split = rest.split('/');
            let first = split.next().unwrap_or_default();
            match split.next() {
                Some(second) => (ResourceType::KubernetesSecret, first.to_string(), second.to_string()),
                None => (ResourceType::KubernetesSecret, proxy_namespace.to_string(), first.to_string()),
            }
        } else if let Some(rest) = resource_name.strip_prefix(KUBERNETES_GATEWAY_SECRET_URI) {
            let (namespace, name) = parts(rest)?;
            (ResourceType::KubernetesGateway, namespace, name)
        } else if let Some(rest) = resource_name.strip_prefix(CONFIGMAP_URI) {
            let (namespace, name) = parts(rest)?;
            (ResourceType::ConfigMap, namespace, name)
        } else {
            return Err(format!("unknown resource type: {resource_name}"));
        };
    if name.is_empty() || namespace.is_empty() {
        return Err(format!("invalid resource name {resource_name:?}. Expected namespace and name"));
    }
    Ok(SecretResource { resource_type, name, namespace, resource_name: resource_name.to_string() })
}

/// The identity a proxy proved on its xDS stream (the first of `Proxy::verified_identities`), as
/// Istio's `VerifiedIdentity`: namespace and service account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyIdentity {
    /// The namespace.
    pub namespace: String,
    /// The service account (from `spiffe://TD/ns/NS/sa/SA`; empty if the identity has none).
    pub service_account: String,
}

impl ProxyIdentity {
    /// The identity from a SPIFFE URI and its namespace.
    pub fn new(spiffe: &str, namespace: &str) -> Self {
        let service_account = spiffe.split_once("/sa/").map(|(_, sa)| sa.to_string()).unwrap_or_default();
        ProxyIdentity { namespace: namespace.to_string(), service_account }
    }
}

/// The secret resource names the gateway servers applying to `proxy` reference and that it may read
/// (Istio's `MergedGateway.VerifiedCertificateReferences`, computed in `mergeGateways`): for each
/// server with `credentialName(s)` (not `builtin://`) of a Gateway whose namespace (or
/// `internal.istio.io/parent-namespace`) is the identity's, and whose
/// `internal.istio.io/service-account-name` (if set) is the identity's account: the names of Secrets
/// in the identity's namespace (from a Gateway in that namespace), or allowed by a ReferenceGrant to
/// Gateway API Gateways of that namespace; `NAME-cacert` too for `MUTUAL` / `OPTIONAL_MUTUAL`; and an
/// explicit `kubernetes-gateway://` `caCertCredentialName` under the same rules.
pub fn verified_certificate_references(
    push: &PushContext,
    proxy: &ProxyContext,
    identity: Option<&ProxyIdentity>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(identity) = identity else { return out };
    for gateway in push.gateways_for_proxy(proxy) {
        let meta = &gateway.config.meta;
        let expected_sa = meta.annotations.get(SERVICE_ACCOUNT_ANNOTATION).map(String::as_str).unwrap_or("");
        let expected_ns = meta
            .annotations
            .get(PARENT_NAMESPACE_ANNOTATION)
            .filter(|n| !n.is_empty())
            .unwrap_or(&meta.namespace);
        if identity.namespace != *expected_ns
            || !(expected_sa.is_empty() || expected_sa == identity.service_account)
        {
            continue;
        }
        let lookup_namespace = identity.namespace.as_str();
        let config_allowed = meta.namespace == identity.namespace;
        let allowed = |rn: &str| -> bool {
            let Ok(parsed) = parse_resource_name(rn, lookup_namespace) else { return false };
            (config_allowed && parsed.namespace == lookup_namespace)
                || (parsed.resource_type == ResourceType::KubernetesGateway
                    && push.secret_allowed(
                        Kind::KubernetesGateway,
                        lookup_namespace,
                        &parsed.namespace,
                        &parsed.name,
                    ))
        };
        for server in &gateway.spec().servers {
            let Some(tls) = &server.tls else { continue };
            let names: Vec<&String> = if tls.credential_names.is_empty() {
                vec![&tls.credential_name]
            } else {
                tls.credential_names.iter().collect()
            };
            let mutual =
                tls.mode == ServerMode::Mutual as i32 || tls.mode == ServerMode::OptionalMutual as i32;
            for cn in names.into_iter().filter(|n| !n.is_empty() && !n.starts_with(BUILTIN_URI)) {
                let Ok(rn) = to_resource_name(cn) else { continue };
                if allowed(&rn) {
                    if mutual {
                        out.insert(format!("{rn}{SDS_CA_SUFFIX}"));
                    }
                    out.insert(rn);
                }
            }
            let ca = &tls.ca_cert_credential_name;
            if ca.starts_with(KUBERNETES_GATEWAY_SECRET_URI)
                && let Ok(rn) = to_resource_name(ca)
                && allowed(&rn)
            {
                out.insert(rn);
            }
        }
    }
    out
}

/// Why a requested name is not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The name as requested.
    pub resource_name: String,
    /// Why (Istio's log wording where it has one).
    pub reason: String,
}

/// Splits the requested names into those the proxy may read and those it may not (Istio's
/// `parseResources` + `filterAuthorizedResources`):
///
/// - no verified identity (the plaintext port): nothing (istiod: "not authorized to receive secrets");
/// - `kubernetes-gateway://NS/NAME`: only names in `verified` ([`verified_certificate_references`]);
/// - `kubernetes://…`: only Secrets of the identity's own namespace. istiod also asks the API server
///   (SubjectAccessReview) whether the proxy's service account may `list` Secrets there, except for
///   `-cacert` names; meshpilot does not (see docs/GATEWAY-API.md), so any authenticated proxy of the
///   namespace may read them;
/// - `configmap://`: not served by meshpilot (denied with that reason).
///
/// Unparsable names are denied with the parse error.
pub fn authorize(
    names: &BTreeSet<String>,
    identity: Option<&ProxyIdentity>,
    verified: &BTreeSet<String>,
) -> (Vec<SecretResource>, Vec<Denied>) {
    let mut allowed = Vec::new();
    let mut denied = Vec::new();
    let deny = |name: &String, reason: String| Denied { resource_name: name.clone(), reason };
    let Some(identity) = identity else {
        denied.extend(names.iter().map(|n| {
            deny(
                n,
                "the proxy is not authorized to receive secrets: it did not authenticate (connect to the secure \
                 port with a workload certificate or token)"
                    .to_string(),
            )
        }));
        return (allowed, denied);
    };
    for name in names {
        let resource = match parse_resource_name(name, &identity.namespace) {
            Ok(r) => r,
            Err(e) => {
                denied.push(deny(name, e));
                continue;
            }
        };
        match resource.resource_type {
            ResourceType::KubernetesGateway if verified.contains(name) => allowed.push(resource),
            ResourceType::KubernetesGateway => denied
                .push(deny(name, "cross namespace secret reference requires ReferenceGrant".to_string())),
            ResourceType::KubernetesSecret if resource.namespace == identity.namespace => {
                allowed.push(resource)
            }
            ResourceType::KubernetesSecret => denied.push(deny(
                name,
                format!(
                    "a proxy of namespace {:?} may read kubernetes:// secrets of its own namespace only",
                    identity.namespace
                ),
            )),
            ResourceType::ConfigMap => denied
                .push(deny(name, "configmap:// CA certificates are not served by meshpilot".to_string())),
        }
    }
    (allowed, denied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_become_istio_resource_names() {
        assert_eq!(to_resource_name("my-cert").unwrap(), "kubernetes://my-cert");
        assert_eq!(to_resource_name("my-cert-cacert").unwrap(), "kubernetes://my-cert-cacert");
        assert_eq!(to_resource_name("kubernetes://ns/c").unwrap(), "kubernetes://ns/c");
        assert_eq!(to_resource_name("kubernetes-gateway://ns/c").unwrap(), "kubernetes-gateway://ns/c");
        assert_eq!(to_resource_name("sds://my-cert").unwrap(), "kubernetes://my-cert");
        assert!(to_resource_name("builtin://").unwrap_err().contains("pilot-agent"));
        assert!(to_resource_name("invalid://").is_err());
    }

    #[test]
    fn resource_names_parse_as_istio() {
        let r = parse_resource_name("kubernetes://cert", "istio-system").unwrap();
        assert_eq!(
            (r.resource_type, r.namespace.as_str(), r.name.as_str()),
            (ResourceType::KubernetesSecret, "istio-system", "cert")
        );
        let r = parse_resource_name("kubernetes://other/cert", "istio-system").unwrap();
        assert_eq!((r.namespace.as_str(), r.name.as_str()), ("other", "cert"));
        let r = parse_resource_name("kubernetes-gateway://apps/cert-cacert", "istio-system").unwrap();
        assert_eq!(r.resource_type, ResourceType::KubernetesGateway);
        assert!(r.is_ca_only());
        assert_eq!(
            r.candidate_secrets(),
            [("apps".to_string(), "cert-cacert".to_string()), ("apps".to_string(), "cert".to_string())]
        );
        assert_eq!(
            parse_resource_name("kubernetes-gateway://cert", "ns").unwrap_err(),
            "invalid resource name \"kubernetes-gateway://cert\". Expected namespace and name"
        );
        assert_eq!(
            parse_resource_name("kubernetes-gateway:///cert", "ns").unwrap_err(),
            "invalid resource name \"kubernetes-gateway:///cert\". Expected namespace"
        );
        assert_eq!(
            parse_resource_name("file-root:/x", "ns").unwrap_err(),
            "unknown resource type: file-root:/x"
        );
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn authorization_follows_istiod() {
        let identity =
            ProxyIdentity::new("spiffe://cluster.local/ns/istio-system/sa/ingress", "istio-system");
        assert_eq!(identity.service_account, "ingress");
        let names = set(&[
            "kubernetes://own",
            "kubernetes://istio-system/own2",
            "kubernetes://other/theirs",
            "kubernetes-gateway://apps/granted",
            "kubernetes-gateway://apps/not-granted",
            "configmap://apps/ca",
            "bogus",
        ]);
        let verified = set(&["kubernetes-gateway://apps/granted"]);
        let (allowed, denied) = authorize(&names, Some(&identity), &verified);
        let allowed: Vec<&str> = allowed.iter().map(|r| r.resource_name.as_str()).collect();
        assert_eq!(
            allowed,
            ["kubernetes-gateway://apps/granted", "kubernetes://istio-system/own2", "kubernetes://own"]
        );
        let denied: Vec<&str> = denied.iter().map(|d| d.resource_name.as_str()).collect();
        assert_eq!(
            denied,
            [
                "bogus",
                "configmap://apps/ca",
                "kubernetes-gateway://apps/not-granted",
                "kubernetes://other/theirs"
            ]
        );
        let (allowed, denied) = authorize(&names, None, &verified);
        assert!(allowed.is_empty());
        assert_eq!(denied.len(), names.len());
        assert!(denied[0].reason.contains("not authorized"), "{}", denied[0].reason);
    }
}
