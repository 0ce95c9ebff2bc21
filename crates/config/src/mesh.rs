//! The mesh config file (`--mesh-config`, Istio's `MeshConfig` YAML as in the `istio` ConfigMap's
//! `mesh` key): the fields the generators use become [`MeshSettings`]; other known fields are
//! accepted and ignored; unknown fields are returned as warnings, never fatal.

use std::{collections::BTreeSet, time::Duration};

use model::push::{
    MeshSettings, OutboundTrafficPolicy, cluster_local::ServiceSettings, telemetry::AccessLogEncoding,
};
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
    "dnsRefreshRate",
    "discoverySelectors",
    "trustDomain",
    "trustDomainAliases",
    "enableAutoMtls",
    "extensionProviders",
    "configSources",
    "accessLogFile",
    "accessLogEncoding",
    "accessLogFormat",
    "defaultProviders",
    "enableTracing",
    "defaultConfig",
    "localityLbSetting",
    "zoneAwareLbSetting",
    "serviceSettings",
];

/// Other MeshConfig fields: known, not used (no warning).
const KNOWN: &[&str] = &[
    "ingressClass",
    "ingressService",
    "ingressControllerMode",
    "ingressSelector",
    "protocolDetectionTimeout",
    "enablePrometheusMerge",
    "meshNetworks",
    "tcpKeepalive",
    "h2UpgradePolicy",
    "inboundClusterStatName",
    "outboundClusterStatName",
    "certificates",
    "caCertificates",
    "pathNormalization",
    "defaultHttpRetryPolicy",
    "meshMTLS",
    "tlsDefaults",
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
    mesh.source = Value::Object(map.clone());
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
            "connectTimeout" => match value.as_str().map(validation::common::parse_go_duration) {
                Some(Ok(d)) if d > Duration::ZERO => mesh.connect_timeout = d,
                _ => warnings.push(format!("connectTimeout: expected a duration such as 10s, got {value}; using 10s")),
            },
            "dnsRefreshRate" => match value.as_str().map(validation::common::parse_go_duration) {
                Some(Ok(d)) if d > Duration::ZERO => mesh.dns_refresh_rate = d,
                _ => warnings.push(format!("dnsRefreshRate: expected a duration such as 60s, got {value}; using 60s")),
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
            "configSources" => {
                config_sources(value)?;
            }
            "accessLogFile" => match value.as_str() {
                Some(path) => mesh.access_log_file = path.to_string(),
                None => warnings.push(format!("accessLogFile: expected a path, got {value}; no access log")),
            },
            "accessLogEncoding" => match value.as_str() {
                Some("TEXT") => mesh.access_log_encoding = AccessLogEncoding::Text,
                Some("JSON") => mesh.access_log_encoding = AccessLogEncoding::Json,
                _ => warnings.push(format!("accessLogEncoding: expected TEXT or JSON, got {value}; using TEXT")),
            },
            "accessLogFormat" => match value.as_str() {
                Some(format) => mesh.access_log_format = format.to_string(),
                None => warnings.push(format!("accessLogFormat: expected a string, got {value}; using Istio's default")),
            },
            "defaultProviders" => {
                mesh.default_access_log_providers = default_providers(value, "accessLogging")?;
                mesh.default_tracing_providers = default_providers(value, "tracing")?;
                mesh.default_metrics_providers = default_providers(value, "metrics")?;
            }
            "enableTracing" => match value.as_bool() {
                Some(b) => mesh.enable_tracing = b,
                None => warnings.push(format!("enableTracing: expected true or false, got {value}; using true")),
            },
            "defaultConfig" => {
                match value.get("discoveryAddress") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(a)) if !a.is_empty() => mesh.discovery_address = a.clone(),
                    Some(other) => warnings.push(format!(
                        "defaultConfig.discoveryAddress: expected host:port, got {other}; using istiod.istio-system.svc:15012"
                    )),
                }
                if let Some(tracing) = value.get("tracing").filter(|t| !t.is_null()) {
                    match model::push::tracing::parse_proxy_tracing(tracing, "defaultConfig.tracing") {
                        Ok(t) => mesh.default_proxy_tracing = Some(t),
                        Err(e) => warnings.push(format!("{e}; the tracing defaults apply")),
                    }
                }
            }
            "enableAutoMtls" => match value.as_bool() {
                Some(b) => mesh.enable_auto_mtls = b,
                None => warnings.push(format!("enableAutoMtls: expected true or false, got {value}; using true")),
            },
            "localityLbSetting" => match serde_json::from_value(value.clone()) {
                Ok(setting) => mesh.locality_lb_setting = Some(setting),
                Err(e) => warnings.push(format!("localityLbSetting: {e}; using Istio's default (enabled)")),
            },
            "zoneAwareLbSetting" => match serde_json::from_value(value.clone()) {
                Ok(setting) => mesh.zone_aware_lb_setting = Some(setting),
                Err(e) => warnings.push(format!("zoneAwareLbSetting: {e}; ignored")),
            },
            "serviceSettings" => mesh.service_settings = service_settings(value, &mut warnings),
            k if KNOWN.contains(&k) => {}
            k => warnings.push(format!("unknown mesh config field {k:?} ignored")),
        }
    }
    debug_assert!(USED.iter().all(|u| !KNOWN.contains(u)));
    if mesh.access_log_encoding == AccessLogEncoding::Json
        && !mesh.access_log_format.is_empty()
        && !serde_json::from_str::<Value>(&mesh.access_log_format).is_ok_and(|v| v.is_object())
    {
        // As istiod: the default JSON labels are used instead.
        warnings.push(
            "accessLogFormat: with accessLogEncoding JSON it must be a JSON object of labels; using Istio's \
             default JSON labels"
                .to_string(),
        );
        mesh.access_log_format.clear();
    }
    Ok((mesh, warnings))
}

/// `serviceSettings`: each entry's `hosts` and `settings.clusterLocal`; an entry of the wrong shape is
/// left out with a warning.
fn service_settings(value: &Value, warnings: &mut Vec<String>) -> Vec<ServiceSettings> {
    let Some(list) = value.as_array() else {
        if !value.is_null() {
            warnings.push(format!("serviceSettings: expected a list, got {value}; ignored"));
        }
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        let hosts = match entry.get("hosts") {
            None | Some(Value::Null) => Some(Vec::new()),
            Some(Value::Array(hosts)) => hosts.iter().map(|h| h.as_str().map(str::to_string)).collect(),
            Some(_) => None,
        };
        let cluster_local = match entry.get("settings").and_then(|s| s.get("clusterLocal")) {
            None | Some(Value::Null) => Some(false),
            Some(v) => v.as_bool(),
        };
        match (hosts, cluster_local) {
            (Some(hosts), Some(cluster_local)) => out.push(ServiceSettings { hosts, cluster_local }),
            _ => warnings.push(format!(
                "serviceSettings[{i}]: expected {{hosts: [host…], settings: {{clusterLocal: true|false}}}}, got {entry}; \
                 entry ignored"
            )),
        }
    }
    out
}

/// `defaultProviders.<field>` (`accessLogging`, `tracing`, `metrics`).
fn default_providers(value: &Value, field: &str) -> Result<Vec<String>, String> {
    let Some(list) = value.get(field).filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
    let bad = || format!("defaultProviders.{field}: expected a list of provider names, got {list}");
    list.as_array().ok_or_else(bad)?.iter().map(|v| v.as_str().map(str::to_string).ok_or_else(bad)).collect()
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

/// One entry of the mesh config's `configSources` (Istio's `ConfigSource`), by address scheme.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigSource {
    /// `fs:///PATH`: a directory of config files (as `--config-dir`).
    File(std::path::PathBuf),
    /// `k8s://`: the Istio custom resources of the `--kubeconfig` cluster.
    Kubernetes,
    /// `xds://HOST:PORT`: an MCP-over-xDS server.
    Xds {
        /// `HOST:PORT` to dial.
        address: String,
        /// `tlsSettings` (Istio's `ClientTLSSettings`); `None` or mode `DISABLE` dials plaintext.
        tls: Option<api::networking::destination_rule::ClientTlsSettings>,
    },
}

impl ConfigSource {
    /// The source's address as the mesh config writes it (`fs:///PATH`, `k8s://`, `xds://HOST:PORT`).
    pub fn address(&self) -> String {
        match self {
            ConfigSource::File(path) => format!("fs://{}", path.display()),
            ConfigSource::Kubernetes => "k8s://".to_string(),
            ConfigSource::Xds { address, .. } => format!("xds://{address}"),
        }
    }
}

/// The mesh config's `configSources` (Istio's `MeshConfig.config_sources`), in the order given;
/// empty when absent.
///
/// Addresses as istiod's `initConfigSources` reads them: `fs:///ABSOLUTE/PATH`, `k8s://` (the local
/// cluster; a path after it is not supported), `xds://HOST:PORT`. Where istiod logs and skips an
/// unsupported address, meshpilot refuses it.
///
/// # Errors
/// The YAML is unreadable, or an entry is malformed; the message names the field path
/// (`configSources[1].address: …`).
pub fn parse_config_sources(text: &str) -> Result<Vec<ConfigSource>, String> {
    match mesh_map(text)? {
        Some(map) => map.get("configSources").map_or(Ok(Vec::new()), config_sources),
        None => Ok(Vec::new()),
    }
}

fn config_sources(value: &Value) -> Result<Vec<ConfigSource>, String> {
    let Some(list) = value.as_array() else {
        return Err(format!("configSources: expected a list of {{address: …}}, got {value}"));
    };
    let mut out = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        let path = format!("configSources[{i}]");
        let Some(map) = entry.as_object() else {
            return Err(format!("{path}: expected a map with address, got {entry}"));
        };
        for key in map.keys() {
            if !["address", "tlsSettings", "subscribedResources"].contains(&key.as_str()) {
                return Err(format!(
                    "{path}.{key}: unknown field (address, tlsSettings, subscribedResources)"
                ));
            }
        }
        let address = match map.get("address") {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            _ => return Err(format!("{path}.address: required (xds://HOST:PORT, fs:///PATH or k8s://)")),
        };
        let tls = match map.get("tlsSettings") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                serde_json::from_value::<api::networking::destination_rule::ClientTlsSettings>(v.clone())
                    .map_err(|e| format!("{path}.tlsSettings: {e}"))?,
            ),
        };
        if let Some(resources) = map.get("subscribedResources") {
            let ok =
                resources.as_array().is_some_and(|a| a.iter().all(|r| r == "SERVICE_REGISTRY" || r == 0));
            if !ok {
                return Err(format!(
                    "{path}.subscribedResources: expected a list of SERVICE_REGISTRY, got {resources}"
                ));
            }
        }
        let has_tls = tls.is_some();
        let source = if let Some(rest) = address.strip_prefix("xds://") {
            let rest = rest.trim_end_matches('/');
            let valid = rest.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok_and(|p| p > 0)
            });
            if !valid {
                return Err(format!("{path}.address: {address:?} must be xds://HOST:PORT"));
            }
            ConfigSource::Xds { address: rest.to_string(), tls }
        } else if let Some(rest) = address.strip_prefix("fs://") {
            if !rest.starts_with('/') || rest.len() < 2 {
                return Err(format!(
                    "{path}.address: {address:?} must name an absolute directory, as fs:///etc/istio/config"
                ));
            }
            ConfigSource::File(std::path::PathBuf::from(rest))
        } else if let Some(rest) = address.strip_prefix("k8s://") {
            if !rest.is_empty() && rest != "/" {
                return Err(format!(
                    "{path}.address: {address:?}: only k8s:// (the --kubeconfig cluster) is supported"
                ));
            }
            ConfigSource::Kubernetes
        } else {
            return Err(format!(
                "{path}.address: unsupported config source {address:?} (xds://HOST:PORT, fs:///PATH or k8s://)"
            ));
        };
        if has_tls && !matches!(source, ConfigSource::Xds { .. }) {
            return Err(format!("{path}.tlsSettings: only xds:// sources use TLS settings"));
        }
        out.push(source);
    }
    Ok(out)
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
             connectTimeout: 2s\ndnsRefreshRate: 5s\nenableTracing: true\nbogus: 1\n",
            "example.org",
        )
        .unwrap();
        assert_eq!(m.root_namespace, "mesh-root");
        assert_eq!(m.outbound_traffic_policy, OutboundTrafficPolicy::RegistryOnly);
        assert_eq!(m.default_export_to, BTreeSet::from([ExportTo::Private]));
        assert_eq!(m.connect_timeout, Duration::from_secs(2));
        assert_eq!(m.dns_refresh_rate, Duration::from_secs(5));
        assert_eq!(m.domain_suffix, "example.org");
        assert_eq!(w, vec!["unknown mesh config field \"bogus\" ignored".to_string()]);
        assert!(parse_mesh_config("- a\n", "cluster.local").is_err());
        assert_eq!(parse_mesh_config("", "cluster.local").unwrap().0.root_namespace, "istio-system");
    }

    #[test]
    fn reads_service_settings_and_the_discovery_address() {
        let (m, w) = parse_mesh_config("", "cluster.local").unwrap();
        assert!(w.is_empty() && m.service_settings.is_empty());
        assert_eq!(m.discovery_address, "istiod.istio-system.svc:15012");
        let (m, w) = parse_mesh_config(
            "serviceSettings:\n- settings: {clusterLocal: true}\n  hosts: ['*.team-a.svc.cluster.local', db.b.svc.cluster.local]\n\
             - hosts: [kubernetes.default.svc.cluster.local]\n- settings: {clusterLocal: maybe}\n  hosts: [x]\n\
             defaultConfig: {discoveryAddress: 'istiod-canary.istio-system.svc:15012'}\n",
            "cluster.local",
        )
        .unwrap();
        assert_eq!(
            m.service_settings,
            [
                ServiceSettings {
                    hosts: vec!["*.team-a.svc.cluster.local".into(), "db.b.svc.cluster.local".into()],
                    cluster_local: true
                },
                ServiceSettings {
                    hosts: vec!["kubernetes.default.svc.cluster.local".into()],
                    cluster_local: false
                },
            ]
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("serviceSettings[2]: "), "{w:?}");
        assert_eq!(m.discovery_address, "istiod-canary.istio-system.svc:15012");
    }

    #[test]
    fn reads_tracing_settings() {
        let (m, w) = parse_mesh_config("", "cluster.local").unwrap();
        assert!(w.is_empty() && m.enable_tracing, "Istio's default: enableTracing true");
        assert_eq!(m.trace_sampling, 1.0);
        let (m, w) = parse_mesh_config(
            "enableTracing: false\ndefaultProviders: {tracing: [zipkin]}\n\
             defaultConfig: {tracing: {sampling: 25, zipkin: {address: 'zipkin:9411'}}}\n",
            "cluster.local",
        )
        .unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert!(!m.enable_tracing);
        assert_eq!(m.default_tracing_providers, ["zipkin"]);
        assert_eq!(m.default_proxy_tracing.as_ref().map(|t| t.sampling), Some(25.0));
        let (m, w) =
            parse_mesh_config("defaultConfig: {tracing: {sampling: many}}\n", "cluster.local").unwrap();
        assert_eq!(m.default_proxy_tracing, None);
        assert!(w[0].starts_with("defaultConfig.tracing.sampling: "), "{w:?}");
    }

    #[test]
    fn reads_access_log_settings() {
        let (m, w) = parse_mesh_config(
            "accessLogFile: /dev/stdout\naccessLogEncoding: JSON\naccessLogFormat: '{\"code\": \"%RESPONSE_CODE%\"}'\n\
             defaultProviders: {accessLogging: [envoy], tracing: [zipkin]}\n",
            "cluster.local",
        )
        .unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(m.access_log_file, "/dev/stdout");
        assert_eq!(m.access_log_encoding, AccessLogEncoding::Json);
        assert_eq!(m.access_log_format, r#"{"code": "%RESPONSE_CODE%"}"#);
        assert_eq!(m.default_access_log_providers, ["envoy"]);
        // A JSON encoding with a format that is not a JSON object: Istio's default labels, with a warning.
        let (m, w) = parse_mesh_config(
            "accessLogEncoding: JSON\naccessLogFormat: '%RESPONSE_CODE%'\n",
            "cluster.local",
        )
        .unwrap();
        assert_eq!(m.access_log_format, "");
        assert!(w[0].starts_with("accessLogFormat: with accessLogEncoding JSON"), "{w:?}");
        let (m, w) = parse_mesh_config("accessLogEncoding: XML\n", "cluster.local").unwrap();
        assert_eq!(m.access_log_encoding, AccessLogEncoding::Text);
        assert!(w[0].starts_with("accessLogEncoding: expected TEXT or JSON"), "{w:?}");
        let err =
            parse_mesh_config("defaultProviders: {accessLogging: envoy}\n", "cluster.local").unwrap_err();
        assert!(err.starts_with("defaultProviders.accessLogging: expected a list"), "{err}");
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
    fn reads_config_sources() {
        let text = "configSources:\n- address: fs:///etc/istio/config\n- address: k8s://\n\
                    - address: xds://istiod.istio-system.svc:15010\n  tlsSettings: {mode: SIMPLE, caCertificates: /ca.pem}\n\
                    - address: xds://127.0.0.1:15010\n  subscribedResources: [SERVICE_REGISTRY]\n";
        let sources = parse_config_sources(text).unwrap();
        assert_eq!(sources[0], ConfigSource::File("/etc/istio/config".into()));
        assert_eq!(sources[1], ConfigSource::Kubernetes);
        match &sources[2] {
            ConfigSource::Xds { address, tls: Some(tls) } => {
                assert_eq!(address, "istiod.istio-system.svc:15010");
                assert_eq!(tls.ca_certificates, "/ca.pem");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(sources[3].address(), "xds://127.0.0.1:15010");
        assert!(parse_mesh_config(text, "cluster.local").unwrap().1.is_empty());
        assert!(parse_config_sources("rootNamespace: x\n").unwrap().is_empty());
        for (bad, want) in [
            ("configSources: x\n", "configSources: expected a list"),
            ("configSources: [{}]\n", "configSources[0].address: required"),
            (
                "configSources: [{address: mcp://x:1}]\n",
                "configSources[0].address: unsupported config source",
            ),
            ("configSources: [{address: xds://host}]\n", "must be xds://HOST:PORT"),
            ("configSources: [{address: fs://rel}]\n", "must name an absolute directory"),
            ("configSources: [{address: k8s://remote}]\n", "only k8s://"),
            ("configSources: [{address: k8s://, bogus: 1}]\n", "configSources[0].bogus: unknown field"),
            (
                "configSources: [{address: \"xds://a:1\", tlsSettings: {mode: BOGUS}}]\n",
                "configSources[0].tlsSettings: ",
            ),
            (
                "configSources: [{address: k8s://, subscribedResources: [X]}]\n",
                "configSources[0].subscribedResources",
            ),
        ] {
            let err = parse_config_sources(bad).unwrap_err();
            assert!(err.contains(want), "{bad}: {err}");
            assert_eq!(parse_mesh_config(bad, "cluster.local").unwrap_err(), err);
        }
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
