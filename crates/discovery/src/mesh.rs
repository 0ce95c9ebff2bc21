//! The mesh config file (`--mesh-config`, Istio's `MeshConfig` YAML as in the `istio` ConfigMap's
//! `mesh` key): the fields the generators use become [`MeshSettings`]; other known fields are
//! accepted and ignored; unknown fields are returned as warnings, never fatal.

use std::{collections::BTreeSet, time::Duration};

use model::push::{MeshSettings, OutboundTrafficPolicy};
use model::{selector::DiscoverySelectors, service::ExportTo};
use serde_json::Value;

/// MeshConfig fields meshpilot reads.
const USED: &[&str] = &[
    "rootNamespace",
    "outboundTrafficPolicy",
    "defaultServiceExportTo",
    "defaultVirtualServiceExportTo",
    "defaultDestinationRuleExportTo",
    "connectTimeout",
    "discoverySelectors",
    "trustDomain",
    "trustDomainAliases",
    "enableAutoMtls",
    "extensionProviders",
];

/// Other MeshConfig fields: known, not used (no warning).
const KNOWN: &[&str] = &[
    "accessLogFile",
    "accessLogEncoding",
    "accessLogFormat",
    "defaultConfig",
    "enableTracing",
    "ingressClass",
    "ingressService",
    "ingressControllerMode",
    "ingressSelector",
    "defaultProviders",
    "localityLbSetting",
    "dnsRefreshRate",
    "protocolDetectionTimeout",
    "enablePrometheusMerge",
    "meshNetworks",
    "tcpKeepalive",
    "h2UpgradePolicy",
    "inboundClusterStatName",
    "outboundClusterStatName",
    "certificates",
    "caCertificates",
    "serviceSettings",
    "pathNormalization",
    "defaultHttpRetryPolicy",
    "meshMTLS",
    "tlsDefaults",
    "configSources",
    "rootCert",
    "enableEnvoyAccessLogService",
    "outboundTrafficPolicyMode",
    "verifyCertificateAtClient",
    "proxyListenPort",
    "proxyHttpPort",
    "proxyInboundListenPort",
];

/// Reads mesh config YAML on top of Istio's defaults (`domain_suffix` from `--domain`). Returns the
/// settings and warnings (unknown fields, ignored bad values).
///
/// # Errors
/// The YAML is unreadable or not a map; `discoverySelectors` or the shape of `extensionProviders` is
/// invalid (the error names the field path, e.g. `discoverySelectors[0].matchExpressions[1].operator`).
pub fn parse_mesh_config(text: &str, domain_suffix: &str) -> Result<(MeshSettings, Vec<String>), String> {
    let mut mesh = MeshSettings { domain_suffix: domain_suffix.to_string(), ..MeshSettings::default() };
    let mut warnings = Vec::new();
    let Some(map) = mesh_map(text)? else { return Ok((mesh, warnings)) };
    for (key, value) in &map {
        match key.as_str() {
            "rootNamespace" => match value.as_str() {
                Some(s) if !s.is_empty() => mesh.root_namespace = s.to_string(),
                _ => warnings.push(format!("rootNamespace: expected a namespace name, got {value}; using istio-system")),
            },
            "outboundTrafficPolicy" => match value.get("mode").and_then(Value::as_str) {
                Some("REGISTRY_ONLY") => mesh.outbound_traffic_policy = OutboundTrafficPolicy::RegistryOnly,
                Some("ALLOW_ANY") | None => mesh.outbound_traffic_policy = OutboundTrafficPolicy::AllowAny,
                Some(other) => warnings.push(format!(
                    "outboundTrafficPolicy.mode: unknown mode {other:?} (ALLOW_ANY or REGISTRY_ONLY); using ALLOW_ANY"
                )),
            },
            "defaultServiceExportTo" | "defaultVirtualServiceExportTo" | "defaultDestinationRuleExportTo" => {
                // One default for all three in MeshSettings; the service default wins when set.
                let list: BTreeSet<ExportTo> = value
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).map(ExportTo::parse).collect())
                    .unwrap_or_default();
                if key == "defaultServiceExportTo" || mesh.default_export_to.is_empty() {
                    mesh.default_export_to = list;
                }
            }
            "connectTimeout" => match value.as_str().map(crate::options::parse_go_duration) {
                Some(Ok(d)) if d > Duration::ZERO => mesh.connect_timeout = d,
                _ => warnings.push(format!("connectTimeout: expected a duration such as 10s, got {value}; using 10s")),
            },
            "discoverySelectors" => {
                DiscoverySelectors::from_json(value)?;
            }
            "trustDomain" => match value.as_str() {
                Some(td) if !td.is_empty() && !td.contains('/') => mesh.trust_domain = td.to_string(),
                _ => return Err(format!("trustDomain: expected a domain such as cluster.local, got {value}")),
            },
            "trustDomainAliases" => match value.as_array() {
                Some(list) if list.iter().all(Value::is_string) => {
                    mesh.trust_domain_aliases = list.iter().filter_map(Value::as_str).map(String::from).collect();
                }
                _ => warnings.push(format!("trustDomainAliases: expected a list of domains, got {value}; ignored")),
            },
            "extensionProviders" => {
                mesh.extension_providers = model::push::extension_provider::parse_extension_providers(value)?;
            }
            "enableAutoMtls" => match value.as_bool() {
                Some(b) => mesh.enable_auto_mtls = b,
                None => warnings.push(format!("enableAutoMtls: expected true or false, got {value}; using true")),
            },
            k if KNOWN.contains(&k) => {}
            k => warnings.push(format!("unknown mesh config field {k:?} ignored")),
        }
    }
    debug_assert!(USED.iter().all(|u| !KNOWN.contains(u)));
    Ok((mesh, warnings))
}

/// The mesh config's `discoverySelectors` (Istio's `MeshConfig.discovery_selectors`): the namespaces
/// whose Kubernetes objects meshpilot reads; empty (or absent) reads all.
///
/// # Errors
/// As [`parse_mesh_config`].
pub fn parse_discovery_selectors(text: &str) -> Result<DiscoverySelectors, String> {
    match mesh_map(text)? {
        Some(map) => map
            .get("discoverySelectors")
            .map_or(Ok(DiscoverySelectors::default()), DiscoverySelectors::from_json),
        None => Ok(DiscoverySelectors::default()),
    }
}

/// The mesh config's top-level map; `None` for an empty document.
fn mesh_map(text: &str) -> Result<Option<serde_json::Map<String, Value>>, String> {
    let docs = api::yaml::parse_documents(text);
    let root = match docs.into_iter().next() {
        None => return Ok(None),
        Some(Err(e)) => return Err(format!("line {}: {}", e.mark.line, e.message)),
        Some(Ok(doc)) => match doc.root {
            None => return Ok(None),
            Some(node) => node.to_json(),
        },
    };
    match root {
        Value::Object(map) => Ok(Some(map)),
        _ => Err("mesh config must be a YAML map".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_used_fields_and_warns_on_unknown() {
        let (m, w) = parse_mesh_config(
            "rootNamespace: mesh-root\noutboundTrafficPolicy: {mode: REGISTRY_ONLY}\ndefaultServiceExportTo: [\".\"]\n\
             connectTimeout: 2s\nenableTracing: true\nbogus: 1\n",
            "example.org",
        )
        .unwrap();
        assert_eq!(m.root_namespace, "mesh-root");
        assert_eq!(m.outbound_traffic_policy, OutboundTrafficPolicy::RegistryOnly);
        assert_eq!(m.default_export_to, BTreeSet::from([ExportTo::Private]));
        assert_eq!(m.connect_timeout, Duration::from_secs(2));
        assert_eq!(m.domain_suffix, "example.org");
        assert_eq!(w, vec!["unknown mesh config field \"bogus\" ignored".to_string()]);
        assert!(parse_mesh_config("- a\n", "cluster.local").is_err());
        assert_eq!(parse_mesh_config("", "cluster.local").unwrap().0.root_namespace, "istio-system");
    }

    #[test]
    fn reads_discovery_selectors() {
        let text = "discoverySelectors:\n- matchLabels: {istio-discovery: enabled}\n\
                    - matchExpressions: [{key: app, operator: In, values: [a]}]\n";
        let s = parse_discovery_selectors(text).unwrap();
        assert_eq!(s.0.len(), 2);
        assert!(s.selects(&[("istio-discovery".to_string(), "enabled".to_string())].into()));
        assert!(!s.selects(&model::service::Labels::new()));
        let (_, warnings) = parse_mesh_config(text, "cluster.local").unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(parse_discovery_selectors("rootNamespace: x\n").unwrap().is_empty());
        let bad = "discoverySelectors:\n- matchExpressions: [{key: app, operator: Bogus}]\n";
        let want = "discoverySelectors[0].matchExpressions[0].operator: unknown operator \"Bogus\" (In, NotIn, Exists, DoesNotExist)";
        assert_eq!(parse_mesh_config(bad, "cluster.local").unwrap_err(), want);
        assert_eq!(parse_discovery_selectors(bad).unwrap_err(), want);
    }

    #[test]
    fn reads_the_identity_settings() {
        let td = |text: &str| parse_mesh_config(text, "cluster.local").map(|(m, _)| m.trust_domain);
        assert_eq!(td("").unwrap(), "cluster.local");
        assert_eq!(td("trustDomain: td.example\n").unwrap(), "td.example");
        for bad in ["trustDomain: 7\n", "trustDomain: \"\"\n", "trustDomain: a/b\n"] {
            assert!(td(bad).unwrap_err().contains("trustDomain"), "{bad}");
        }
        let (mesh, warnings) =
            parse_mesh_config("enableAutoMtls: false\ntrustDomainAliases: [old.example]\n", "cluster.local")
                .unwrap();
        assert!(!mesh.enable_auto_mtls && warnings.is_empty(), "{warnings:?}");
        assert_eq!(mesh.trust_domain_aliases, ["old.example"]);
        let (mesh, warnings) = parse_mesh_config("enableAutoMtls: maybe\n", "cluster.local").unwrap();
        assert!(mesh.enable_auto_mtls && warnings[0].contains("enableAutoMtls"), "{warnings:?}");
    }
}
