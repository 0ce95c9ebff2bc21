//! `networking.istio.io`: traffic management (`istio.networking.v1alpha3` and `v1beta1` protos).

pub mod destination_rule;
pub mod envoy_filter;
pub mod gateway;
pub mod proxy_config;
pub mod service_entry;
pub mod sidecar;
pub mod virtual_service;
pub mod workload_entry;
pub mod workload_group;

pub use destination_rule::DestinationRule;
pub use envoy_filter::EnvoyFilter;
pub use gateway::Gateway;
pub use proxy_config::ProxyConfig;
pub use service_entry::ServiceEntry;
pub use sidecar::Sidecar;
pub use virtual_service::VirtualService;
pub use workload_entry::WorkloadEntry;
pub use workload_group::WorkloadGroup;
