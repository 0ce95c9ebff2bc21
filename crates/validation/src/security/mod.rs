//! Validation of `security.istio.io` kinds.

pub mod authorization_policy;
pub mod peer_authentication;
pub mod request_authentication;
