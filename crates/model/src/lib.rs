//! meshpilot's config model.
//!
//! - [`Config`], [`ConfigMeta`], [`ConfigKey`]: one Istio config object, as every later stage
//!   (stores, registries, xDS generation) sees it. Follows Istio's `config.Config` (`pkg/config/model.go`).
//!   Documents are read into `Config`s by `config::parse` (the crate that reads them); the model itself
//!   depends on the API types only.
//! - [`store`]: the [`ConfigStore`] / [`ConfigStoreController`] traits every config source implements,
//!   their events, errors and shutdown signal.
//! - [`service`]: [`Service`], [`Endpoint`], [`ServiceInstance`], the [`ServiceDiscovery`] /
//!   [`ServiceController`] traits registries implement, and their notifications ([`RegistryEvent`]).
//! - [`push`]: Istio's push model — [`push::PushContext`] (the immutable snapshot of config and
//!   services the generators read), [`push::SidecarScope`], [`push::ProxyContext`],
//!   [`push::PushRequest`] and the rules deciding which proxies a change concerns.
//! - [`host`]: host names as Istio compares them; [`finding`]: what generation could not honour.
//! - [`credentials`]: `credentialName` secrets: Istio's SDS names for Kubernetes Secrets and who may read
//!   them.
//! - [`file_secret`]: the SDS names of certificate files (`file-cert:CERT~KEY`, `file-root:CA`).
//! - [`mcp`]: config objects as MCP-over-xDS resources (`PilotConfigToResource` and back).

pub mod autoallocate;
mod config;
pub mod credentials;
pub mod file_secret;
pub mod finding;
pub mod host;
pub mod mcp;
pub mod network;
pub mod push;
pub mod selector;
pub mod service;
pub mod store;

pub use api::protocol::Protocol;
pub use config::{Config, ConfigKey, ConfigMeta};
pub use finding::{Finding, Severity};
pub use service::{
    Endpoint, EndpointPush, EndpointShard, EndpointUpdate, RegistryEvent, RegistryEventHandler,
    RegistryWarning, Service, ServiceController, ServiceDiscovery, ServiceEvent, ServiceInstance, ShardKey,
};
pub use store::{
    ConfigStore, ConfigStoreController, Event, EventHandler, HandlerError, Shutdown, ShutdownTrigger,
    StoreError, shutdown_channel,
};
