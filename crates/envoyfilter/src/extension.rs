//! EXTENSION_CONFIG patches (Istio's `extension_configuration_patch.go`): ADD patches provide
//! `TypedExtensionConfig`s served over ECDS under their `name` to proxies that ask for that name (an
//! HTTP filter with `config_discovery`, typically added by another patch). Other operations do nothing,
//! as in istiod.

use api::networking::envoy_filter::{ApplyTo, patch::Operation};
use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;

use crate::ProxyPatches;

/// The extension configurations EXTENSION_CONFIG ADD patches give for `names` (empty: all), in patch
/// order (Istio's `InsertedExtensionConfigurations`).
pub fn inserted_extension_configs(patches: &ProxyPatches, names: &[String]) -> Vec<TypedExtensionConfig> {
    patches
        .of(ApplyTo::ExtensionConfig)
        .iter()
        .filter(|p| p.operation == Operation::Add)
        .filter_map(|p| p.value.as_ref().map(|v| v.typed::<TypedExtensionConfig>()))
        .filter(|e| names.is_empty() || names.contains(&e.name))
        .collect()
}
