//! EnvoyFilter objects read once per push context into patches ready to apply (Istio's
//! `convertToEnvoyFilterWrapper`, `pilot/pkg/model/envoyfilter.go`).
//!
//! Each patch value (a `google.protobuf.Struct` in the object) is read as the Envoy message its
//! `applyTo` names (`xds.BuildXDSObjectFromStruct`): LISTENER a `Listener`, FILTER_CHAIN a
//! `FilterChain`, NETWORK_FILTER a listener `Filter`, HTTP_FILTER an `HttpFilter`, ROUTE_CONFIGURATION a
//! `RouteConfiguration`, VIRTUAL_HOST a `VirtualHost`, HTTP_ROUTE a `Route`, CLUSTER a `Cluster`,
//! EXTENSION_CONFIG a `TypedExtensionConfig`, LISTENER_FILTER a `ListenerFilter`, BOOTSTRAP a `Bootstrap`.
//! `typed_config` values (`"@type": type.googleapis.com/…`) are read as the type they name. Field names may
//! be `snake_case` or `lowerCamelCase` (protobuf JSON).
//!
//! Rules kept from istiod:
//! - a value that does not read as its type drops that patch (istiod logs and skips it); unknown fields are
//!   ignored there (istiod reads leniently, so EnvoyFilters written for newer Envoy APIs still apply) and
//!   reported here as a warning;
//! - INSERT_BEFORE / INSERT_AFTER / INSERT_FIRST on anything but LISTENER_FILTER, NETWORK_FILTER,
//!   HTTP_FILTER and HTTP_ROUTE become ADD;
//! - a patch without `match` matches everything in every context;
//! - `match.proxy.proxyVersion` is an RE2 expression matched against the proxy's `ISTIO_VERSION` (a proxy
//!   without one never matches); longer than 1,024 bytes it matches no proxy.
//!
//! Differences: BOOTSTRAP patches are read and reported (`Unsupported`), never applied — istiod does the
//! same silently (the bootstrap is pilot-agent's); a `proxyVersion` that does not compile matches no
//! proxy and is reported (istiod's would match every proxy); `filterClass` is ignored, as istiod ignores it.

use std::sync::Arc;

use api::{
    networking::envoy_filter::{
        ApplyTo, EnvoyConfigObjectMatch, EnvoyFilter, PatchContext, patch::Operation,
    },
    spec::Spec,
};
use model::{Config, ConfigKey, Finding, Severity, push::ProxyContext};
use prost::Message;
use prost_reflect::{DeserializeOptions, DynamicMessage};
use regex::Regex;

use crate::descriptors;

/// Longest `proxyVersion` expression compiled (Istio's `maxProxyVersionLen`).
pub const MAX_PROXY_VERSION_LEN: usize = 1024;

/// A patch value read as its Envoy message: reflected (for merges) and encoded (for typed copies).
#[derive(Clone, Debug)]
pub struct PatchValue {
    /// The value as a reflected message of the `applyTo` type.
    pub message: DynamicMessage,
    /// The same value, protobuf-encoded.
    pub encoded: Vec<u8>,
}

impl PatchValue {
    /// The value as the typed message `M` (the `applyTo` type; a default `M` if it is another type).
    pub fn typed<M: Message + Default>(&self) -> M {
        M::decode(self.encoded.as_slice()).unwrap_or_default()
    }
}

/// How a patch's `proxyVersion` is matched.
#[derive(Clone, Debug)]
enum VersionMatch {
    Any,
    Regex(Regex),
    Never,
}

/// One patch of an EnvoyFilter, ready to apply.
#[derive(Clone, Debug)]
pub struct CompiledPatch {
    /// The EnvoyFilter it comes from.
    pub filter: ConfigKey,
    /// Its index in `spec.configPatches` (for findings: `spec.configPatches[i]`).
    pub index: usize,
    /// What it applies to.
    pub apply_to: ApplyTo,
    /// The operation (INSERT_* already turned into ADD where Istio does).
    pub operation: Operation,
    /// The patch context (`ANY` when there is no `match`).
    pub context: PatchContext,
    /// The object match (a default, match-all one when there is no `match`).
    pub matches: EnvoyConfigObjectMatch,
    /// The value; `None` for REMOVE.
    pub value: Option<PatchValue>,
    version: VersionMatch,
}

impl CompiledPatch {
    /// Whether the patch applies to `proxy` (Istio's `proxyMatch`): `proxyVersion` against
    /// `ISTIO_VERSION`, and every `metadata` entry equal to the node's.
    pub fn matches_proxy(&self, proxy: &ProxyContext) -> bool {
        let Some(m) = &self.matches.proxy else { return true };
        let version_ok = match &self.version {
            VersionMatch::Any => true,
            VersionMatch::Never => false,
            VersionMatch::Regex(re) => !proxy.istio_version.is_empty() && re.is_match(&proxy.istio_version),
        };
        version_ok && m.metadata.iter().all(|(k, v)| proxy.metadata.get(k) == Some(v))
    }

    /// Whether the patch's context admits `context` (`ANY` admits all).
    pub fn context_matches(&self, context: PatchContext) -> bool {
        self.context == context || self.context == PatchContext::Any
    }

    /// `MERGE` or `MERGE_AND_REPLACE_LIST`.
    pub fn is_merge(&self) -> bool {
        matches!(self.operation, Operation::Merge | Operation::MergeAndReplaceList)
    }

    /// A finding about this patch (`spec.configPatches[i]` + `path`) for the Envoy resource `resource`.
    pub fn finding(&self, severity: Severity, path: &str, resource: &str, message: String) -> Finding {
        Finding {
            severity,
            config: Some(self.filter.clone()),
            path: format!("spec.configPatches[{}]{path}", self.index),
            resource: resource.to_string(),
            message,
        }
    }
}

/// An EnvoyFilter read into patches, with what could not be read.
#[derive(Clone, Debug, Default)]
pub struct CompiledEnvoyFilter {
    /// The patches that can apply, in `configPatches` order.
    pub patches: Vec<Arc<CompiledPatch>>,
    /// Patches dropped or partly read, with the reason.
    pub findings: Vec<Finding>,
}

/// The Envoy message an `applyTo` patches (`None` for `INVALID`).
pub fn message_type(apply_to: ApplyTo) -> Option<&'static str> {
    Some(match apply_to {
        ApplyTo::Invalid => return None,
        ApplyTo::Listener => "envoy.config.listener.v3.Listener",
        ApplyTo::FilterChain => "envoy.config.listener.v3.FilterChain",
        ApplyTo::NetworkFilter => "envoy.config.listener.v3.Filter",
        ApplyTo::HttpFilter => "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter",
        ApplyTo::RouteConfiguration => "envoy.config.route.v3.RouteConfiguration",
        ApplyTo::VirtualHost => "envoy.config.route.v3.VirtualHost",
        ApplyTo::HttpRoute => "envoy.config.route.v3.Route",
        ApplyTo::Cluster => "envoy.config.cluster.v3.Cluster",
        ApplyTo::ExtensionConfig => "envoy.config.core.v3.TypedExtensionConfig",
        ApplyTo::Bootstrap => "envoy.config.bootstrap.v3.Bootstrap",
        ApplyTo::ListenerFilter => "envoy.config.listener.v3.ListenerFilter",
    })
}

/// Reads `json` as the Envoy message `full_name`. Unknown fields are an error when `strict`.
///
/// # Errors
/// The type is not in Envoy's API, or the value does not read as it (the reader's message, with the
/// field it stopped at).
pub fn read_value(full_name: &str, json: &serde_json::Value, strict: bool) -> Result<DynamicMessage, String> {
    let descriptor =
        descriptors::message(full_name).ok_or_else(|| format!("{full_name} is not in Envoy's API"))?;
    let options = DeserializeOptions::new().deny_unknown_fields(strict);
    DynamicMessage::deserialize_with_options(descriptor, json.clone(), &options).map_err(|e| e.to_string())
}

/// Reads one EnvoyFilter `config` (any other kind gives an empty result).
pub fn compile(config: &Config) -> CompiledEnvoyFilter {
    let Spec::EnvoyFilter(spec) = &config.spec else { return CompiledEnvoyFilter::default() };
    compile_spec(config.key(), spec)
}

fn compile_spec(key: ConfigKey, spec: &EnvoyFilter) -> CompiledEnvoyFilter {
    let mut out = CompiledEnvoyFilter::default();
    for (index, cp) in spec.config_patches.iter().enumerate() {
        let finding = |severity, path: &str, message: String| Finding {
            severity,
            config: Some(key.clone()),
            path: format!("spec.configPatches[{index}]{path}"),
            resource: String::new(),
            message,
        };
        let Some(patch) = &cp.patch else {
            out.findings.push(finding(Severity::Dropped, ".patch", "no patch: nothing to apply".into()));
            continue;
        };
        let (Ok(apply_to), Ok(mut operation)) =
            (ApplyTo::try_from(cp.apply_to), Operation::try_from(patch.operation))
        else {
            out.findings.push(finding(Severity::Dropped, "", "unknown applyTo or operation".into()));
            continue;
        };
        let Some(type_name) = message_type(apply_to) else {
            out.findings.push(finding(Severity::Dropped, ".applyTo", "applyTo is not set".into()));
            continue;
        };
        let value = match &patch.value {
            None => None,
            Some(value) => {
                let json = value.to_json();
                match read_value(type_name, &json, true) {
                    Ok(message) => Some(message),
                    Err(strict_error) => match read_value(type_name, &json, false) {
                        Ok(message) => {
                            out.findings.push(finding(
                                Severity::Warning,
                                ".patch.value",
                                format!("fields unknown to Envoy's {type_name} are ignored: {strict_error}"),
                            ));
                            Some(message)
                        }
                        Err(error) => {
                            out.findings.push(finding(
                                Severity::Dropped,
                                ".patch.value",
                                format!("not a valid {type_name}, patch not applied: {error}"),
                            ));
                            continue;
                        }
                    },
                }
            }
        };
        if value.is_none() && operation != Operation::Remove {
            out.findings.push(finding(
                Severity::Dropped,
                ".patch.value",
                format!("{} needs a value; patch not applied", operation.as_str_name()),
            ));
            continue;
        }
        if apply_to == ApplyTo::Bootstrap {
            out.findings.push(finding(
                Severity::Unsupported,
                ".applyTo",
                "BOOTSTRAP patches are deprecated and not applied (istiod applies none either: the bootstrap \
                 is written by pilot-agent)"
                    .into(),
            ));
            continue;
        }
        if matches!(operation, Operation::InsertBefore | Operation::InsertAfter | Operation::InsertFirst)
            && !matches!(
                apply_to,
                ApplyTo::HttpFilter | ApplyTo::NetworkFilter | ApplyTo::HttpRoute | ApplyTo::ListenerFilter
            )
        {
            operation = Operation::Add;
        }
        let matches = cp.r#match.clone().unwrap_or_default();
        let context = PatchContext::try_from(matches.context).unwrap_or(PatchContext::Any);
        let version = match matches.proxy.as_ref().map(|p| p.proxy_version.as_str()).unwrap_or_default() {
            "" => VersionMatch::Any,
            v if v.len() > MAX_PROXY_VERSION_LEN => {
                out.findings.push(finding(
                    Severity::Warning,
                    ".match.proxy.proxyVersion",
                    format!("longer than {MAX_PROXY_VERSION_LEN} bytes: the patch matches no proxy"),
                ));
                VersionMatch::Never
            }
            v => match Regex::new(v) {
                Ok(re) => VersionMatch::Regex(re),
                Err(e) => {
                    out.findings.push(finding(
                        Severity::Dropped,
                        ".match.proxy.proxyVersion",
                        format!("not a valid regular expression, the patch matches no proxy: {e}"),
                    ));
                    VersionMatch::Never
                }
            },
        };
        let value = value.map(|message| PatchValue { encoded: message.encode_to_vec(), message });
        out.patches.push(Arc::new(CompiledPatch {
            filter: key.clone(),
            index,
            apply_to,
            operation,
            context,
            matches,
            value,
            version,
        }));
    }
    out
}
