//! `extensions.istio.io`: proxy extensions (`istio.extensions.v1alpha1` protos).

pub mod traffic_extension;
pub mod wasm_plugin;

pub use traffic_extension::TrafficExtension;
pub use wasm_plugin::WasmPlugin;
