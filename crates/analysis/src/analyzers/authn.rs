//! Istio's `authn.BlockedCIDRsAnalyzer` (`pkg/config/analysis/analyzers/authn`): when
//! RequestAuthentications exist, istiod should restrict where it fetches JWKS from.
//!
//! With at least one RequestAuthentication loaded, every Deployment labelled `app=istiod` none of
//! whose containers sets the environment variable `BLOCKED_CIDRS_IN_JWKS_URIS` to a non-empty value
//! gets IST0175 JwksUriFetchUnrestricted (the number of RequestAuthentications and their
//! `namespace/name`s, the first five then "and N more"). meshpilot's own JWKS fetcher refuses the
//! same kind of addresses (docs/POLICY.md); the analyzer looks at an istiod Deployment, as Istio's does.

use super::workload::{PodTemplate, full_name};
use crate::{
    Analyzer, Context, Message, msg,
    resource::{Resource, kinds},
};

/// `authn.BlockedCIDRsAnalyzer`.
#[derive(Debug, Default)]
pub struct BlockedCIDRsAnalyzer;

impl Analyzer for BlockedCIDRsAnalyzer {
    fn name(&self) -> &str {
        "authn.BlockedCIDRsAnalyzer"
    }

    fn description(&self) -> &str {
        "Checks that BLOCKED_CIDRS_IN_JWKS_URIS is configured on istiod when RequestAuthentication resources exist"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::REQUEST_AUTHENTICATION, kinds::DEPLOYMENT]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let names: Vec<String> =
            ctx.istio(api::Kind::RequestAuthentication).map(|r| full_name(r.namespace(), r.name())).collect();
        if names.is_empty() {
            return;
        }
        for deployment in ctx.kube(kinds::DEPLOYMENT) {
            if deployment.labels.get("app").is_none_or(|a| a != "istiod") {
                continue;
            }
            let template = PodTemplate::of_deployment(deployment);
            let configured = template
                .spec
                .containers
                .iter()
                .flat_map(|c| &c.env)
                .any(|(name, value)| name == "BLOCKED_CIDRS_IN_JWKS_URIS" && !value.is_empty());
            if !configured {
                out.push(deployment.message(
                    &msg::JWKS_URI_FETCH_UNRESTRICTED,
                    &[(names.len() as i64).into(), format_names(&names).into()],
                ));
            }
        }
    }
}

/// The first five names joined with `, `, then `, and N more`.
fn format_names(names: &[String]) -> String {
    const MAX_DISPLAY: usize = 5;
    if names.len() <= MAX_DISPLAY {
        return names.join(", ");
    }
    format!("{}, and {} more", names[..MAX_DISPLAY].join(", "), names.len() - MAX_DISPLAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shortened_after_five() {
        let names: Vec<String> = (1..=7).map(|i| format!("ns/ra{i}")).collect();
        assert_eq!(format_names(&names[..2]), "ns/ra1, ns/ra2");
        assert_eq!(format_names(&names), "ns/ra1, ns/ra2, ns/ra3, ns/ra4, ns/ra5, and 2 more");
    }
}
