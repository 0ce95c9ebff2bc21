//! meshpilot's xDS protocol engine (in progress): node identity and type URLs.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod convert;
pub mod node;
pub mod type_url;

pub use node::{NodeError, NodeMetadata, NodeType, Proxy};
