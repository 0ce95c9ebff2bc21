//! meshpilot's service registries.
//!
//! ```text
//!  config store (ServiceEntry, WorkloadEntry, WorkloadGroup events)
//!        │
//!        ▼
//!  serviceentry::ServiceEntryRegistry ──┐
//!   (ServiceEntryIndex: pure state)     ├──► aggregate::AggregateRegistry ──► RegistryEvent handlers
//!  (later) kube registry ───────────────┘        │                              (xDS server)
//!                                                 ├──► ServiceDiscovery lookups (generators)
//!                                                 └──► debug::{registryz, endpointz, registry_warnings}
//! ```
//!
//! - [`serviceentry`]: services from ServiceEntries, endpoints from inline endpoints and selected
//!   WorkloadEntries (Istio's `serviceregistry/serviceentry`).
//! - [`workload_group`]: WorkloadGroups as templates of auto-registered WorkloadEntries.
//! - [`aggregate`]: several registries as one, with a documented precedence.
//! - [`debug`]: `/debug/registryz` and `/debug/endpointz` bodies in Istio's shapes, and the warnings.
//!
//! The model (services, endpoints, the [`model::ServiceDiscovery`] and [`model::ServiceController`]
//! traits, and the notifications [`model::RegistryEvent`]) is in `model::service`, so that the xDS
//! server depends on `model` only.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod aggregate;
pub mod debug;
pub mod serviceentry;
pub mod workload_group;

pub use aggregate::AggregateRegistry;

use model::service::{RegistryEvent, RegistryEventHandler};

/// Calls every handler with `event`. A handler that panics is logged and skipped; the others still
/// run, and the registry's state is unaffected (a consumer's bug must not stop the registry).
pub(crate) fn notify(handlers: &[RegistryEventHandler], event: &RegistryEvent) {
    for handler in handlers {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(event))).is_err() {
            tracing::error!(?event, "registry event handler panicked; event skipped for that handler");
        }
    }
}
pub use serviceentry::{
    AutoAllocate, InMemoryAllocator, ServiceEntryIndex, ServiceEntryOptions, ServiceEntryRegistry,
    index_from_configs,
};
