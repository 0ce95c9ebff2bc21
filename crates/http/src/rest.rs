//! The REST-JSON discovery endpoints (Envoy's `api_type: REST`) on the HTTP port: `POST
//! /v3/discovery:clusters`, `:listeners`, `:routes`, `:endpoints`, `:secrets`, answered by
//! [`discovery::rest::RestXds`] through [`discovery::rest_router`] (shared with the secure port).
//!
//! Not behind the debug guard ([`crate::access`]): like the plaintext ADS port (15010), they answer
//! any caller that reaches the HTTP port with the config of the node it names, and never a secret
//! (SDS is `403` here: no poll on this port has an identity). Request bodies are bounded
//! ([`MAX_REQUEST_BYTES`]: `413` over it); a body that is no `DiscoveryRequest` is `400` with the
//! reason; at most [`MAX_CONCURRENT_POLLS`] polls generate at once (`503` with `Retry-After: 1` over
//! it). docs/REST-XDS.md, docs/SECURITY.md.

use std::sync::Arc;

use axum::Router;
use discovery::rest::RestXds;

pub use discovery::{rest::MAX_REQUEST_BYTES, rest_router::MAX_CONCURRENT_POLLS};

/// The router of the REST-JSON endpoints, to merge into the `--http-addr` router next to (not under)
/// the guarded debug routes.
pub fn rest_router(rest: Arc<RestXds>) -> Router {
    rest_router_with(rest, MAX_CONCURRENT_POLLS)
}

/// [`rest_router`] with at most `concurrent` polls generating at once.
pub fn rest_router_with(rest: Arc<RestXds>, concurrent: usize) -> Router {
    discovery::rest_router::router(rest, concurrent, None)
}
