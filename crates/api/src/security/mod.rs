//! `security.istio.io`: authentication and authorization policies (`istio.security.v1beta1` protos).

pub mod authorization_policy;
pub mod peer_authentication;
pub mod request_authentication;

pub use authorization_policy::AuthorizationPolicy;
pub use peer_authentication::PeerAuthentication;
pub use request_authentication::RequestAuthentication;
