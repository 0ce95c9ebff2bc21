//! The [`Analyzer`] trait and Istio's analyzers, one module per Istio analyzer package
//! (`pkg/config/analysis/analyzers/<package>`).
//!
//! [`all`] is istioctl's default set in Istio's order (`analyzers.All()`); [`find`] looks one up by
//! its Istio name (`virtualservice.GatewayAnalyzer`, what `--analyzer` and `--list-analyzers` use)
//! or by its Go type name as Istio's tests name it (`schemaValidation.CollectionValidationAnalyzer(collections.VirtualService)`).
//!
//! Writing one: a unit struct implementing [`Analyzer`] in `analyzers/<istio package>.rs`; read
//! objects through the [`Context`] (it derefs to [`crate::Resources`]: `ctx.istio(Kind::Gateway)`,
//! `ctx.kube(kinds::POD)`, `ctx.find_kube(..)`, `ctx.kube_selected(..)`, `ctx.mesh`), and report with
//! [`crate::Resource::message`] / [`crate::Resource::message_at`] (the latter with the offending
//! field's path, `spec.servers[0].port`, so the message carries that field's line):
//!
//! ```
//! use meshpilot_analysis::{Context, Message, Resource, analyzers::Analyzer, msg, resource::kinds};
//!
//! struct NoGateways;
//! impl Analyzer for NoGateways {
//!     fn name(&self) -> &str { "example.NoGatewaysAnalyzer" }
//!     fn description(&self) -> &str { "Reports every Gateway" }
//!     fn inputs(&self) -> &[&'static str] { &[kinds::GATEWAY] }
//!     fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
//!         for g in ctx.istio(api::Kind::Gateway) {
//!             out.push(g.message_at(&msg::DEPRECATED, &["gateways are out".into()], "spec.servers[0]"));
//!         }
//!     }
//! }
//! ```

use crate::{Context, Message};

// Istio analyzer packages, one module each. Add a module with one line here and its analyzers with
// one line each in `all()` below (the commented entries mark where, in Istio's order).
pub mod annotations;
pub mod authz;
pub mod deprecation;
pub mod destinationrule;
pub mod gateway;
pub mod schema;
pub mod service;
pub mod sidecar;
pub mod virtualservice;

/// One analyzer (Istio's `analysis.Analyzer`).
pub trait Analyzer: Send + Sync {
    /// Istio's name (`Metadata().Name`): `virtualservice.GatewayAnalyzer`,
    /// `schema.ValidationAnalyzer.VirtualService`, `applicationUID.Analyzer`.
    fn name(&self) -> &str;

    /// The Go type as Istio's analyzer tests name it (`deployment.ApplicationUIDAnalyzer`,
    /// `schemaValidation.CollectionValidationAnalyzer(collections.VirtualService)`); the same as
    /// [`Analyzer::name`] for most analyzers.
    fn type_name(&self) -> &str {
        self.name()
    }

    /// One line: what the analyzer checks (Istio's `Metadata().Description`).
    fn description(&self) -> &str;

    /// The kinds the analyzer reads, as [`crate::resource::kinds`] type keys. An analyzer one of whose
    /// inputs cannot be present is skipped (istioctl's `RemoveSkipped`).
    fn inputs(&self) -> &[&'static str];

    /// Appends the analyzer's messages to `out`.
    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>);
}

/// istioctl's default analyzers, in Istio's order (`pkg/config/analysis/analyzers/all.go`), then one
/// schema validation analyzer per Istio kind.
#[allow(clippy::vec_init_then_push)] // one line per analyzer, in Istio's order, reads better than a literal
pub fn all() -> Vec<Box<dyn Analyzer>> {
    let mut v: Vec<Box<dyn Analyzer>> = Vec::new();
    // Istio's order; one line per analyzer. Commented entries are not implemented yet.
    v.push(Box::new(annotations::K8sAnalyzer));
    // v.push(Box::new(authn::BlockedCidrsAnalyzer));
    v.push(Box::new(authz::AuthorizationPoliciesAnalyzer));
    // v.push(Box::new(conditions::ConditionAnalyzer));
    // v.push(Box::new(deployment::ServiceAssociationAnalyzer));
    // v.push(Box::new(deployment::ApplicationUidAnalyzer));
    v.push(Box::new(destinationrule::CaCertificateAnalyzer));
    v.push(Box::new(destinationrule::PodNotSelectedAnalyzer));
    v.push(Box::new(deprecation::FieldAnalyzer));
    // v.push(Box::new(envoyfilter::EnvoyPatchAnalyzer));
    // v.push(Box::new(externalcontrolplane::ExternalControlPlaneAnalyzer));
    v.push(Box::new(gateway::IngressGatewayPortAnalyzer));
    v.push(Box::new(gateway::CertificateAnalyzer));
    v.push(Box::new(gateway::SecretAnalyzer));
    v.push(Box::new(gateway::ConflictingGatewayAnalyzer));
    // v.push(Box::new(injection::Analyzer));
    // v.push(Box::new(injection::ImageAnalyzer));
    // v.push(Box::new(injection::ImageAutoAnalyzer));
    // v.push(Box::new(k8sgateway::SelectorAnalyzer));
    // v.push(Box::new(k8sgateway::CrdVersionAnalyzer));
    // v.push(Box::new(multicluster::MeshNetworksAnalyzer));
    // v.push(Box::new(multicluster::ServiceAnalyzer));
    v.push(Box::new(service::PortNameAnalyzer));
    v.push(Box::new(sidecar::SelectorAnalyzer));
    v.push(Box::new(virtualservice::ConflictingMeshGatewayHostsAnalyzer));
    v.push(Box::new(virtualservice::DestinationHostAnalyzer));
    v.push(Box::new(virtualservice::DestinationRuleAnalyzer));
    v.push(Box::new(virtualservice::GatewayAnalyzer));
    v.push(Box::new(virtualservice::JwtClaimRouteAnalyzer));
    // v.push(Box::new(serviceentry::ProtocolAddressesAnalyzer));
    // v.push(Box::new(serviceentry::ConflictingServiceEntryProtocolAnalyzer));
    // v.push(Box::new(webhook::Analyzer));
    // v.push(Box::new(telemetry::ProviderAnalyzer));
    // v.push(Box::new(telemetry::SelectorAnalyzer));
    // v.push(Box::new(telemetry::DefaultSelectorAnalyzer));
    // v.push(Box::new(telemetry::LightstepAnalyzer));
    v.extend(schema::all_validation_analyzers());
    v
}

/// Analyzers that exist but are not in istioctl's default set (Istio's `maturity.AlphaAnalyzer`, …);
/// [`find`] finds them too.
pub fn extra() -> Vec<Box<dyn Analyzer>> {
    Vec::new()
}

/// The analyzer named `name`: its Istio name or its Go type name (see [`Analyzer::type_name`]).
pub fn find(name: &str) -> Option<Box<dyn Analyzer>> {
    all().into_iter().chain(extra()).find(|a| a.name() == name || a.type_name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_findable() {
        let all = all();
        let mut names: Vec<&str> = all.iter().map(|a| a.name()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "duplicate analyzer names");
        assert!(find("schema.ValidationAnalyzer.Gateway").is_some());
        assert!(find("schemaValidation.CollectionValidationAnalyzer(collections.VirtualService)").is_some());
        assert!(find("no.SuchAnalyzer").is_none());
    }
}
