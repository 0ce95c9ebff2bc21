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
pub mod extensions;
pub mod gateway_api;
pub mod kube;
pub mod networking;
pub mod presence;
mod report;
pub mod security;
pub mod telemetry;
#[cfg(test)]
mod testutil;

pub use presence::Presence;
pub use report::{Issue, Report};

use api::{Spec, meta::ObjectMeta};

/// Validates one object of any kind.
///
/// `meta` is the object's metadata (name and namespace matter to some kinds, e.g. a Sidecar in the
/// root namespace). Errors make the object invalid; warnings do not.
pub fn validate(meta: &ObjectMeta, spec: &Spec) -> Report {
    let mut report = Report::default();
    common::validate_metadata(meta, &mut report);
    if !matches!(spec, Spec::AuthorizationPolicy(_)) {
        // AuthorizationPolicy checks the dry-run annotation against its action itself.
        report.check("metadata.annotations", common::check_dry_run_annotation(meta, None));
    }
    let r = &mut report;
    match spec {
        Spec::VirtualService(s) => networking::virtual_service::validate(meta, s, r),
        Spec::DestinationRule(s) => networking::destination_rule::validate(meta, s, r),
        Spec::Gateway(s) => networking::gateway::validate(meta, s, r),
        Spec::ServiceEntry(s) => networking::service_entry::validate(meta, s, r),
        Spec::WorkloadEntry(s) => networking::workload_entry::validate(meta, s, r),
        Spec::WorkloadGroup(s) => networking::workload_group::validate(meta, s, r),
        Spec::Sidecar(s) => networking::sidecar::validate(meta, s, r),
        Spec::EnvoyFilter(s) => networking::envoy_filter::validate(meta, s, r),
        Spec::ProxyConfig(s) => networking::proxy_config::validate(meta, s, r),
        Spec::AuthorizationPolicy(s) => security::authorization_policy::validate(meta, s, r),
        Spec::PeerAuthentication(s) => security::peer_authentication::validate(meta, s, r),
        Spec::RequestAuthentication(s) => security::request_authentication::validate(meta, s, r),
        Spec::Telemetry(s) => telemetry::validate(meta, s, r),
        Spec::WasmPlugin(s) => extensions::wasm_plugin::validate(meta, s, r),
        Spec::TrafficExtension(s) => extensions::traffic_extension::validate(meta, s, r),
        Spec::GatewayClass(s) => gateway_api::validate_gateway_class(s, r),
        Spec::KubernetesGateway(s) => gateway_api::validate_gateway(s, r),
        Spec::HTTPRoute(s) => gateway_api::validate_http_route(s, r),
        Spec::GRPCRoute(s) => gateway_api::validate_grpc_route(s, r),
        Spec::TCPRoute(s) => gateway_api::validate_tcp_route(s, r),
        Spec::TLSRoute(s) => gateway_api::validate_tls_route(s, r),
        Spec::ReferenceGrant(s) => gateway_api::validate_reference_grant(s, r),
        Spec::BackendTLSPolicy(s) => gateway_api::validate_backend_tls_policy(s, r),
        Spec::XBackendTrafficPolicy(s) => gateway_api::validate_backend_traffic_policy(s, r),
    }
    report
}

/// [`validate`], plus the CRD rules that need to know which fields were written empty
/// ([`presence::check`]): what the Kubernetes API server rejects for an object written as text.
/// Readers of text (files, Kubernetes objects, the webhook) pass what they saw; with
/// `Presence::default()` this is [`validate`].
pub fn validate_with_presence(meta: &ObjectMeta, spec: &Spec, presence: &Presence) -> Report {
    let mut report = validate(meta, spec);
    presence::check(spec, presence, &mut report);
    report
}
