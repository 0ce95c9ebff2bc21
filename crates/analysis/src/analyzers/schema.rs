//! `schema`: the kind's own validation as analysis messages (Istio's `schema.ValidationAnalyzer`,
//! one per Istio kind): each validation error is IST0106 SchemaValidationError, each warning IST0133
//! SchemaWarning, except the VirtualService rule findings Istio reports with their own codes: an
//! unreachable rule is IST0130 VirtualServiceUnreachableRule and a shadowed match IST0131
//! VirtualServiceIneffectiveMatch.
//!
//! The validation is `meshpilot validate`'s (`validation::validate`, run when the object was read),
//! so both commands agree. meshpilot points each message at the offending field's line, where
//! istioctl gives the object's first line.

use api::Kind;

use crate::{
    Context, Message,
    analyzers::Analyzer,
    msg::{self, Arg},
    resource::{Resource, kinds},
};

/// Validation of one Istio kind.
pub struct ValidationAnalyzer {
    kind: Kind,
    name: String,
    type_name: String,
    description: String,
    inputs: [&'static str; 1],
}

impl ValidationAnalyzer {
    /// The analyzer for `kind`.
    pub fn new(kind: Kind) -> ValidationAnalyzer {
        let input: &'static str = match kind {
            Kind::VirtualService => kinds::VIRTUAL_SERVICE,
            Kind::Gateway => kinds::GATEWAY,
            Kind::DestinationRule => kinds::DESTINATION_RULE,
            Kind::ServiceEntry => kinds::SERVICE_ENTRY,
            Kind::Sidecar => kinds::SIDECAR,
            Kind::EnvoyFilter => kinds::ENVOY_FILTER,
            Kind::WorkloadEntry => kinds::WORKLOAD_ENTRY,
            Kind::RequestAuthentication => kinds::REQUEST_AUTHENTICATION,
            Kind::AuthorizationPolicy => kinds::AUTHORIZATION_POLICY,
            Kind::PeerAuthentication => kinds::PEER_AUTHENTICATION,
            Kind::Telemetry => kinds::TELEMETRY,
            Kind::WasmPlugin => kinds::WASM_PLUGIN,
            // Istio kinds are always available; the key only has to be one that is.
            _ => kinds::VIRTUAL_SERVICE,
        };
        ValidationAnalyzer {
            kind,
            name: format!("schema.ValidationAnalyzer.{kind}"),
            type_name: format!("schemaValidation.CollectionValidationAnalyzer(collections.{kind})"),
            description: format!("Runs schema validation as an analyzer on '{kind}' resources"),
            inputs: [input],
        }
    }
}

/// One analyzer per Istio kind, in the order of Istio's `collections.Pilot`.
pub fn all_validation_analyzers() -> Vec<Box<dyn Analyzer>> {
    Kind::ISTIO.iter().map(|k| Box::new(ValidationAnalyzer::new(*k)) as Box<dyn Analyzer>).collect()
}

impl Analyzer for ValidationAnalyzer {
    fn name(&self) -> &str {
        &self.name
    }
    fn type_name(&self) -> &str {
        &self.type_name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn inputs(&self) -> &[&'static str] {
        &self.inputs
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        for r in ctx.istio(self.kind) {
            for e in &r.errors {
                out.push(r.message_at(
                    &msg::SCHEMA_VALIDATION_ERROR,
                    &[Arg::Str(e.message.clone())],
                    &e.path,
                ));
            }
            for w in &r.warnings {
                let m = match virtual_service_rule(&w.message) {
                    Some((kind, args)) => r.message_at(kind, &args, &w.path),
                    None => r.message_at(&msg::SCHEMA_WARNING, &[Arg::Str(w.message.clone())], &w.path),
                };
                out.push(m);
            }
        }
    }
}

/// Istio's analysis-aware VirtualService warnings: `virtualService rule R not used (why)` →
/// IST0130 (R, why); `virtualService rule R match M is not used (duplicate/overlapping match in rule
/// P)` → IST0131 (R, M, P).
fn virtual_service_rule(text: &str) -> Option<(&'static msg::MessageType, Vec<Arg>)> {
    let rest = text.strip_prefix("virtualService rule ")?;
    if let Some((head, tail)) = rest.split_once(" is not used (duplicate/overlapping match in rule ") {
        let (rule, matched) = head.split_once(" match ")?;
        let prior = tail.strip_suffix(')')?;
        return Some((
            &msg::VIRTUAL_SERVICE_INEFFECTIVE_MATCH,
            vec![rule.into(), matched.into(), prior.into()],
        ));
    }
    let (rule, why) = rest.split_once(" not used (")?;
    let why = why.strip_suffix(')')?;
    Some((&msg::VIRTUAL_SERVICE_UNREACHABLE_RULE, vec![rule.into(), why.into()]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{LoadOptions, Resources};

    #[test]
    fn errors_and_rule_warnings_get_their_codes() {
        let mut r = Resources::new(LoadOptions::default());
        r.add_text(
            "vs.yaml",
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a}\nspec:\n  hosts: [a]\n  http:\n  - route:\n    - destination: {host: a}\n      weight: -5\n---\n\
             apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: b}\nspec:\n  hosts: [b]\n  http:\n  - route:\n    - destination: {host: b}\n  - route:\n    - destination: {host: b}\n",
            true,
        );
        let mut out = Vec::new();
        ValidationAnalyzer::new(Kind::VirtualService).analyze(&Context::new(&r), &mut out);
        let got: Vec<String> = out.iter().map(|m| format!("{} {}", m.code(), m.origin)).collect();
        assert_eq!(
            got,
            ["IST0106 VirtualService default/a vs.yaml:9", "IST0130 VirtualService default/b vs.yaml:19"],
            "{out:#?}"
        );
        assert_eq!(out[1].text, "VirtualService rule #1 not used (only the last rule can have no matches).");
    }
}
