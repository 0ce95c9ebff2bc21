//! WasmPlugin / TrafficExtension → Envoy: the HTTP filters placed in connection managers (LDS) and the
//! ECDS resources (`envoy.config.core.v3.TypedExtensionConfig`), as istiod's
//! `pilot/pkg/networking/core/extension` (`extensionfilter.go`, `lua.go`) and
//! `model/extensions.go` build them.
//!
//! - A Lua extension is inlined: an HTTP filter named by its resource name with an
//!   `envoy.extensions.filters.http.lua.v3.Lua` config (`default_source_code` inline). A change of
//!   it is a listener change.
//! - A Wasm extension is an HTTP filter named by its resource name
//!   (`extensions.istio.io/trafficextension/NAMESPACE.NAME`) with a `config_discovery` over ADS
//!   (initial fetch timeout 0: the listener waits for it, as the filter may be security critical; no
//!   default config), accepting the Wasm and RBAC HTTP filter types. ECDS then sends
//!   `envoy.extensions.filters.http.wasm.v3.Wasm` under that name: plugin `NAMESPACE.NAME`, `root_id`
//!   the `pluginName`, `configuration` the `pluginConfig` as JSON in a `google.protobuf.StringValue`
//!   (an empty `Any` without one), runtime `envoy.wasm.runtime.v8`, code a local file for `file://`
//!   URLs and otherwise a remote source (`http_uri` with 30 s timeout and cluster `_`, `sha256`):
//!   istiod's split, where pilot-agent fetches `http(s)://` and `oci://` modules and rewrites the
//!   resource to a local file before Envoy sees it. VM environment: `vmConfig.env` (inline values;
//!   `HOST` ones as `host_env_keys`), `ISTIO_META_WASM_IMAGE_PULL_POLICY` when a pull policy is set
//!   and `ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION`. `failStrategy` maps to the plugin's failure policy.
//!   Differences: image pull secrets are never sent (istiod sends the Docker credentials to
//!   authenticated proxies of the plugin's namespace, for pilot-agent); NETWORK Wasm filters are not
//!   placed (reported).
//!
//! Order in a connection manager (Istio's `buildHTTPConnectionManager`): CUSTOM authorization
//! (`ext_authz`), AUTHN extensions, `jwt_authn`, AUTHZ extensions, RBAC, STATS extensions,
//! UNSPECIFIED-phase extensions, then fault, CORS and the router.

use std::{collections::HashMap, sync::Arc};

use envoy_types::pb::{
    envoy::{
        config::core::v3::{
            AsyncDataSource, ConfigSource, DataSource, ExtensionConfigSource, HttpUri, RemoteDataSource,
            TypedExtensionConfig, async_data_source, data_source, http_uri,
        },
        extensions::{
            filters::{
                http::{lua::v3::Lua, wasm::v3::Wasm},
                network::http_connection_manager::v3::{HttpConnectionManager, HttpFilter, http_filter},
            },
            wasm::v3::{EnvironmentVariables, FailurePolicy, PluginConfig, VmConfig, plugin_config},
        },
    },
    google::protobuf::{Any, StringValue},
};
use model::push::{
    ProxyContext,
    extensions::{ChainType, ExtensionCode, ExtensionFilter, ListenerClass, Phase, check_url},
};

use crate::{Built, Snapshot, convert::any};

/// The Wasm runtime istiod names (`envoy.wasm.runtime.v8`).
pub const WASM_RUNTIME: &str = "envoy.wasm.runtime.v8";
/// Type URL of the Wasm HTTP filter config (what ECDS sends).
pub const WASM_HTTP_FILTER_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm";
/// Type URL of the RBAC HTTP filter config (also accepted by the filter's `config_discovery`, as
/// istiod).
pub const RBAC_HTTP_FILTER_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC";
/// VM environment variable carrying the pull policy to pilot-agent (Istio's `WasmPolicyEnv`).
pub const WASM_POLICY_ENV: &str = "ISTIO_META_WASM_IMAGE_PULL_POLICY";
/// VM environment variable carrying the object's resource version (Istio's `WasmResourceVersionEnv`).
pub const WASM_RESOURCE_VERSION_ENV: &str = "ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION";
/// Timeout of a remote module fetch (istiod's 30 s).
const REMOTE_FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The extension HTTP filters of one connection manager, by phase (empty for a proxy without
/// extensions).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhaseFilters {
    /// Before `jwt_authn`.
    pub authn: Vec<HttpFilter>,
    /// Before the RBAC filters.
    pub authz: Vec<HttpFilter>,
    /// After the RBAC filters.
    pub stats: Vec<HttpFilter>,
    /// After the STATS phase.
    pub unspecified: Vec<HttpFilter>,
}

impl PhaseFilters {
    /// The HTTP filters of the extensions among `selected` (a proxy's, priority-sorted) whose `match`
    /// takes a listener of `class` on `port`.
    pub fn for_listener(selected: &[Arc<ExtensionFilter>], class: ListenerClass, port: u32) -> PhaseFilters {
        let mut out = PhaseFilters::default();
        for f in selected {
            if f.chain_type() != ChainType::Http || !f.matches_listener(class, port) {
                continue;
            }
            let list = match f.phase {
                Phase::Authn => &mut out.authn,
                Phase::Authz => &mut out.authz,
                Phase::Stats => &mut out.stats,
                Phase::Unspecified => &mut out.unspecified,
            };
            list.push(http_filter(f));
        }
        out
    }

    /// Puts the filters in front of `hcm`'s, for connection managers without security filters
    /// (sidecar outbound); see [`crate::policy::SecurityFilters::apply_http_with`] for the others.
    pub fn apply(&self, hcm: &mut HttpConnectionManager) {
        crate::policy::SecurityFilters::default().apply_http_with(hcm, self);
    }

    /// Whether there is no filter at all.
    pub fn is_empty(&self) -> bool {
        self.authn.is_empty() && self.authz.is_empty() && self.stats.is_empty() && self.unspecified.is_empty()
    }
}

/// The config source of extension configs: ADS, v3, initial fetch timeout 0 (istiod's
/// `defaultConfigSource`: the listener is not used before its extensions arrive).
fn extension_config_source() -> ConfigSource {
    let mut source = crate::convert::ads_config_source();
    source.initial_fetch_timeout = Some(crate::convert::zero_duration());
    source
}

/// The HTTP filter of one extension: Lua inlined, Wasm through ECDS (module documentation).
pub fn http_filter(f: &ExtensionFilter) -> HttpFilter {
    let config_type = match &f.code {
        ExtensionCode::Lua(code) => http_filter::ConfigType::TypedConfig(any(&Lua {
            default_source_code: Some(DataSource {
                specifier: Some(data_source::Specifier::InlineString(code.clone())),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ExtensionCode::Wasm(_) => http_filter::ConfigType::ConfigDiscovery(ExtensionConfigSource {
            config_source: Some(extension_config_source()),
            type_urls: vec![WASM_HTTP_FILTER_TYPE.to_string(), RBAC_HTTP_FILTER_TYPE.to_string()],
            ..Default::default()
        }),
    };
    HttpFilter { name: f.resource_name.clone(), config_type: Some(config_type), ..Default::default() }
}

/// The Wasm HTTP filter config ECDS sends for a Wasm extension; `None` for Lua and NETWORK ones.
pub fn wasm_filter(f: &ExtensionFilter) -> Option<Wasm> {
    let ExtensionCode::Wasm(wasm) = &f.code else { return None };
    if f.chain_type() != ChainType::Http {
        return None;
    }
    let configuration = match &wasm.plugin_config {
        Some(config) if !config.fields.is_empty() => {
            any(&StringValue { value: config.to_json().to_string() })
        }
        _ => Any::default(),
    };
    let scheme = check_url(&wasm.url).ok()?;
    let code = if scheme == "file" {
        AsyncDataSource {
            specifier: Some(async_data_source::Specifier::Local(DataSource {
                specifier: Some(data_source::Specifier::Filename(
                    wasm.url.strip_prefix("file://").unwrap_or(&wasm.url).to_string(),
                )),
                ..Default::default()
            })),
        }
    } else {
        let uri = if wasm.url.contains("://") { wasm.url.clone() } else { format!("oci://{}", wasm.url) };
        AsyncDataSource {
            specifier: Some(async_data_source::Specifier::Remote(RemoteDataSource {
                http_uri: Some(HttpUri {
                    uri,
                    timeout: Some(crate::convert::std_duration(REMOTE_FETCH_TIMEOUT)),
                    // pilot-agent fetches the module; the cluster is istiod's placeholder.
                    http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster("_".to_string())),
                }),
                sha256: wasm.sha256.clone(),
                ..Default::default()
            })),
        }
    };
    let mut key_values = HashMap::new();
    if let Ok(policy) = api::extensions::wasm_plugin::PullPolicy::try_from(wasm.image_pull_policy)
        && policy != api::extensions::wasm_plugin::PullPolicy::UnspecifiedPolicy
    {
        key_values.insert(WASM_POLICY_ENV.to_string(), policy.as_str_name().to_string());
    }
    key_values.insert(WASM_RESOURCE_VERSION_ENV.to_string(), f.config.meta.resource_version.clone());
    let mut host_env_keys = Vec::new();
    for e in wasm.vm_config.iter().flat_map(|v| &v.env) {
        if e.value_from == api::extensions::wasm_plugin::EnvValueSource::Host as i32 {
            host_env_keys.push(e.name.clone());
        } else {
            key_values.insert(e.name.clone(), e.value.clone());
        }
    }
    use api::extensions::wasm_plugin::FailStrategy;
    let failure_policy = match FailStrategy::try_from(wasm.fail_strategy) {
        Ok(FailStrategy::FailOpen) => FailurePolicy::FailOpen,
        Ok(FailStrategy::FailReload) => FailurePolicy::FailReload,
        _ => FailurePolicy::FailClosed,
    };
    Some(Wasm {
        config: Some(PluginConfig {
            name: format!("{}.{}", f.namespace, f.name),
            root_id: wasm.plugin_name.clone(),
            configuration: Some(configuration),
            failure_policy: failure_policy as i32,
            vm: Some(plugin_config::Vm::VmConfig(VmConfig {
                runtime: WASM_RUNTIME.to_string(),
                code: Some(code),
                environment_variables: Some(EnvironmentVariables { host_env_keys, key_values }),
                ..Default::default()
            })),
            ..Default::default()
        }),
    })
}

/// ECDS for `proxy`: the Wasm extension configs among `names` (Istio's `BuildExtensionConfiguration`
/// for TrafficExtensions), in the order asked, then those EnvoyFilter `EXTENSION_CONFIG` ADD patches
/// give under the names asked (a name already given is not repeated). Names of Lua extensions, of extensions outside the
/// proxy's namespace and the root namespace, and unknown names are left out; an empty `names` (a
/// wildcard request, which Envoy never sends for ECDS) gives the Wasm extensions that select the
/// proxy.
pub fn generate_extension_configs(
    push: &Snapshot,
    proxy: &ProxyContext,
    names: &[String],
) -> Built<TypedExtensionConfig> {
    let filters: Vec<Arc<ExtensionFilter>> = if names.is_empty() {
        push.extensions(proxy)
    } else {
        names.iter().filter_map(|n| push.extension_by_resource_name(proxy, n)).collect()
    };
    // Lua and NETWORK extensions have no ECDS resource; unusable URLs were left out (and reported)
    // when the push context was built.
    let mut out: Vec<TypedExtensionConfig> = filters
        .iter()
        .filter_map(|f| {
            let wasm = wasm_filter(f)?;
            Some(TypedExtensionConfig { name: f.resource_name.clone(), typed_config: Some(any(&wasm)) })
        })
        .collect();
    // Then the configs EnvoyFilter EXTENSION_CONFIG patches add under the names asked (istiod's order).
    let (inserted, findings) = crate::envoy_filter::inserted_extension_configs(push, proxy, names);
    for config in inserted {
        if !out.iter().any(|c| c.name == config.name) {
            out.push(config);
        }
    }
    Built::new(out, findings)
}
