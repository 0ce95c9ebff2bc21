//! meshpilot's identity plane, after istiod's (`security/pkg/server/ca`, `pilot/pkg/bootstrap`):
//!
//! - [`identity`]: SPIFFE identities `spiffe://<trust domain>/ns/<namespace>/sa/<service account>`.
//! - [`ca`]: the certificate authority — a self-signed root created once and persisted, or Istio's
//!   plugged-in CA files (`ca-cert.pem`, `ca-key.pem`, `root-cert.pem`, `cert-chain.pem`); signs
//!   workload CSRs for the caller's authenticated identity with Istio's TTL rules.
//! - [`authn`]: who is calling — a client certificate issued by the CA, or a Kubernetes
//!   service-account token checked by a [`authn::TokenReviewer`] (the TokenReview API).
//! - [`service`]: the gRPC service `istio.v1.auth.IstioCertificateService/CreateCertificate`.
//! - [`tls`]: the TLS side of the secure port (15012): a serving certificate signed by the CA and
//!   renewed before it expires, optional client certificates, and the peer's chain handed to
//!   handlers as a request extension ([`tls::PeerCertificates`]).
//!
//! Certificates and keys are made and parsed with `rcgen` and `x509-parser`; TLS is `rustls`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod authn;
pub mod ca;
pub mod client;
pub mod identity;
pub mod service;
pub mod tls;

pub use authn::{Authenticator, Caller};
pub use ca::{CaError, CaOptions, IstioCa};
pub use identity::SpiffeId;
