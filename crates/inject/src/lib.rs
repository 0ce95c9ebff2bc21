//! Istio's sidecar injection (`pkg/kube/inject` at the pinned Istio version), for the webhook's
//! `/inject` and `meshpilot kube-inject`.
//!
//! The injector's configuration — the `config` and `values` keys of the ConfigMap
//! `istio-sidecar-injector[-<rev>]` — names Go templates (`sidecar`, `gateway`, `grpc-agent`, …) that
//! are rendered over the pod and merged into it the way istiod does:
//!
//! - [`gotmpl`]: the template engine (Go's `text/template` through the `gtmpl-ng` crate) and the
//!   functions Istio's templates call (`pkg/kube/inject/template.go` and the sprig functions used).
//! - [`view`]: how a pod, a mesh config and a proxy config look to a template — Go field names
//!   (`.Spec.Containers`, `.ObjectMeta.Annotations`, `.ProxyConfig.GetTracing`).
//! - [`probe`] and [`prometheus`]: the rewrites istiod applies after rendering (HTTP probes through
//!   the agent, Prometheus scrape merging).
//! - [`proxy_config`]: the effective proxy config of a pod (mesh `defaultConfig`, `ProxyConfig`
//!   resources, the `proxy.istio.io/config` annotation) in istiod's order.
//! - [`validate`]: the checks of the pod's annotations istiod runs before injecting.
//!
//! Pods are handled as JSON (`serde_json::Value`) in the Kubernetes API's field names, as they come
//! from an AdmissionReview or a manifest.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod config;
pub mod gotmpl;
pub mod inject;
pub mod injector;
pub mod kube_types;
pub mod mesh;
pub mod patch;
pub mod probe;
pub mod prometheus;
pub mod proxy_config;
pub mod resource;
pub mod smp;
pub mod validate;
pub mod view;
pub mod yaml;
