//! Istio's validating admission webhook (`pkg/webhooks/validation/server`): `POST /validate` (and
//! `/validate/…`, as istiod) answering AdmissionReview v1 and v1beta1 with the same validation as
//! `meshpilot validate`.
//!
//! - [`admission`]: the pure review → answer function (all of istiod's cases, unit-tested).

pub mod admission;
