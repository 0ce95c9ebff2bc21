//! Validation of `extensions.istio.io` kinds.

pub mod traffic_extension;
pub mod wasm_plugin;
