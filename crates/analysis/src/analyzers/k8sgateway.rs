//! Istio's `k8sgateway` analyzers (`pkg/config/analysis/analyzers/k8sgateway`).
//!
//! * [`SelectorAnalyzer`] (`k8sgateway.SelectorAnalyzer`): an AuthorizationPolicy,
//!   RequestAuthentication, Telemetry or WasmPlugin without `targetRef` whose `selector.matchLabels`
//!   all appear on a Pod of a Kubernetes Gateway (a pod labelled `gateway.networking.k8s.io/gateway-name`)
//!   of its namespace gets IST0166 IneffectiveSelector (the gateway name), once per such pod: Istio
//!   ignores selectors on Gateway API gateways, they need `targetRef`.
//! * [`CRDVersionAnalyzer`] (`k8sgateway.CRDVersionAnalyzer`): a Gateway API CustomResourceDefinition
//!   whose `gateway.networking.k8s.io/bundle-version` annotation (a semantic version, pre-release
//!   ignored) is below the version Istio requires for it gets IST0176 GatewayAPICRDVersionBelowMinimum
//!   (CRD name, installed version, minimum). The minimums are Istio's `gatewayapi.MinimumCRDVersions`
//!   at the Istio version meshpilot follows: GRPCRoute 1.1.0, BackendTLSPolicy 1.4.0, TLSRoute 1.5.0,
//!   TCPRoute 1.6.0. Unparsable versions are skipped.

use std::collections::BTreeMap;

use crate::{
    Analyzer, Context, Message, msg,
    resource::{Resource, kinds},
};

/// The label Gateway API deployments put on gateway pods.
const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// `k8sgateway.SelectorAnalyzer`: policy selectors on Kubernetes Gateway pods.
#[derive(Debug, Default)]
pub struct SelectorAnalyzer;

impl Analyzer for SelectorAnalyzer {
    fn name(&self) -> &str {
        "k8sgateway.SelectorAnalyzer"
    }

    fn description(&self) -> &str {
        "Check that selectors are effective for Kubernetes gateway"
    }

    fn inputs(&self) -> &[&'static str] {
        &[
            kinds::AUTHORIZATION_POLICY,
            kinds::REQUEST_AUTHENTICATION,
            kinds::TELEMETRY,
            kinds::WASM_PLUGIN,
            kinds::POD,
        ]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let mut gateway_pods: BTreeMap<&str, Vec<&BTreeMap<String, String>>> = BTreeMap::new();
        for pod in ctx.kube(kinds::POD) {
            if pod.labels.contains_key(GATEWAY_NAME_LABEL) {
                gateway_pods.entry(pod.ns()).or_default().push(&pod.labels);
            }
        }
        for kind in [
            api::Kind::AuthorizationPolicy,
            api::Kind::RequestAuthentication,
            api::Kind::Telemetry,
            api::Kind::WasmPlugin,
        ] {
            for config in ctx.istio(kind) {
                let (selector, target_ref) = match config.spec() {
                    api::Spec::AuthorizationPolicy(p) => (p.selector.as_ref(), p.target_ref.is_some()),
                    api::Spec::RequestAuthentication(p) => (p.selector.as_ref(), p.target_ref.is_some()),
                    api::Spec::Telemetry(p) => (p.selector.as_ref(), p.target_ref.is_some()),
                    api::Spec::WasmPlugin(p) => (p.selector.as_ref(), p.target_ref.is_some()),
                    _ => continue,
                };
                let Some(selector) = selector.filter(|_| !target_ref) else { continue };
                for labels in gateway_pods.get(config.namespace()).into_iter().flatten() {
                    if selector.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                        let gateway = labels.get(GATEWAY_NAME_LABEL).cloned().unwrap_or_default();
                        out.push(config.message(&msg::INEFFECTIVE_SELECTOR, &[gateway.into()]));
                    }
                }
            }
        }
    }
}

/// `k8sgateway.CRDVersionAnalyzer`: Gateway API CRDs older than Istio supports.
#[derive(Debug, Default)]
pub struct CRDVersionAnalyzer;

/// Istio's `gatewayapi.MinimumCRDVersions`: CRD name → minimum bundle version.
const MINIMUM_CRD_VERSIONS: [(&str, (u64, u64, u64)); 4] = [
    ("grpcroutes.gateway.networking.k8s.io", (1, 1, 0)),
    ("backendtlspolicies.gateway.networking.k8s.io", (1, 4, 0)),
    ("tlsroutes.gateway.networking.k8s.io", (1, 5, 0)),
    ("tcproutes.gateway.networking.k8s.io", (1, 6, 0)),
];

impl Analyzer for CRDVersionAnalyzer {
    fn name(&self) -> &str {
        "k8sgateway.CRDVersionAnalyzer"
    }

    fn description(&self) -> &str {
        "Checks Gateway API CRDs are at the minimum version required by this Istio version"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::CUSTOM_RESOURCE_DEFINITION]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        for crd in ctx.kube(kinds::CUSTOM_RESOURCE_DEFINITION) {
            let Some((_, minimum)) = MINIMUM_CRD_VERSIONS.iter().find(|(n, _)| *n == crd.name) else {
                continue;
            };
            let Some(annotation) = crd.annotations.get("gateway.networking.k8s.io/bundle-version") else {
                continue;
            };
            let Some(installed) = SemVer::parse(annotation) else { continue };
            if (installed.major, installed.minor, installed.patch) < *minimum {
                let (a, b, c) = minimum;
                out.push(crd.message(
                    &msg::GATEWAY_API_CRD_VERSION_BELOW_MINIMUM,
                    &[(&crd.name).into(), installed.to_string().into(), format!("{a}.{b}.{c}").into()],
                ));
            }
        }
    }
}

/// A semantic version read as Masterminds' `semver.NewVersion` does (loose): optional `v`, minor and
/// patch may be missing (0), then `-prerelease` and `+metadata` of dot-separated `[0-9A-Za-z-]`
/// identifiers; numeric pre-release identifiers must not have leading zeros.
#[derive(Debug, PartialEq, Eq)]
struct SemVer {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    metadata: String,
}

impl SemVer {
    fn parse(text: &str) -> Option<SemVer> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let (rest, metadata) = match text.split_once('+') {
            Some((r, m)) => (r, Some(m)),
            None => (text, None),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (rest, None),
        };
        let idents_ok = |s: &str| {
            !s.is_empty()
                && s.split('.')
                    .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        };
        if pre.is_some_and(|p| {
            !idents_ok(p)
                || p.split('.')
                    .any(|id| id.len() > 1 && id.starts_with('0') && id.bytes().all(|b| b.is_ascii_digit()))
        }) || metadata.is_some_and(|m| !idents_ok(m))
        {
            return None;
        }
        let mut parts = core.split('.');
        let num = |p: Option<&str>| -> Option<Option<u64>> {
            match p {
                None => Some(None),
                Some(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok().map(Some),
                Some(_) => None,
            }
        };
        let major = num(parts.next())??;
        let minor = num(parts.next())?.unwrap_or(0);
        let patch = num(parts.next())?.unwrap_or(0);
        if parts.next().is_some() {
            return None;
        }
        Some(SemVer {
            major,
            minor,
            patch,
            pre: pre.unwrap_or("").to_string(),
            metadata: metadata.unwrap_or("").to_string(),
        })
    }
}

impl std::fmt::Display for SemVer {
    /// `major.minor.patch[-pre][+metadata]`, without the `v` (Masterminds' `Version.String`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.metadata.is_empty() {
            write!(f, "+{}", self.metadata)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_like_masterminds_semver() {
        let v = SemVer::parse("v1.4.1").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (1, 4, 1));
        assert_eq!(v.to_string(), "1.4.1");
        assert_eq!(SemVer::parse("1.5").unwrap().to_string(), "1.5.0");
        assert_eq!(SemVer::parse("v1.5.0-rc.1+build.7").unwrap().to_string(), "1.5.0-rc.1+build.7");
        assert_eq!(SemVer::parse("1.5.0-rc.01"), None, "leading zero in a numeric pre-release identifier");
        assert_eq!(SemVer::parse("1.x"), None);
        assert_eq!(SemVer::parse("1.2.3.4"), None);
        assert_eq!(SemVer::parse(""), None);
    }
}
