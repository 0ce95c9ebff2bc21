//! Validation of `networking.istio.io` kinds.

pub mod destination_rule;
pub mod envoy_filter;
pub mod gateway;
pub mod proxy_config;
pub mod service_entry;
pub mod sidecar;
pub mod virtual_service;
pub mod workload_entry;
pub mod workload_group;
