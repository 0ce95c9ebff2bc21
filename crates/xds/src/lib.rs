//! meshpilot's xDS protocol engine (in progress): node identity, type URLs, the resource-source
//! seam and the pure SotW/Delta state machines.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod convert;
pub mod delta;
pub mod node;
pub mod sotw;
pub mod source;
pub mod state;
pub mod type_url;

pub use node::{NodeError, NodeMetadata, NodeType, Proxy};
pub use source::{
    GenerateRequest, Generated, Protocol, PushEvent, Resource, ResourceSource, SourceError, Trigger, Watch,
};
pub use state::SyncState;
