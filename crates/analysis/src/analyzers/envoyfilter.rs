//! Istio's `envoyfilter.EnvoyPatchAnalyzer` (`pkg/config/analysis/analyzers/envoyfilter`): patch
//! operations that Envoy ignores or that depend on the order EnvoyFilters are applied in.
//!
//! For each EnvoyFilter, each config patch in order (stopping at the first patch without `patch`):
//! * `ADD` with `applyTo` `ROUTE_CONFIGURATION` or `HTTP_ROUTE`: IST0153 EnvoyFilterUsesAddOperationIncorrectly;
//! * `REMOVE` with those `applyTo`: IST0154 EnvoyFilterUsesRemoveOperationIncorrectly;
//! * `REPLACE` with an `applyTo` other than `NETWORK_FILTER`, `HTTP_FILTER`, `VIRTUAL_HOST`: IST0152
//!   EnvoyFilterUsesReplaceOperationIncorrectly;
//! * other `REMOVE`/`REPLACE`, `INSERT_BEFORE` and `INSERT_AFTER` on an EnvoyFilter without `priority`:
//!   IST0151 EnvoyFilterUsesRelativeOperation, or IST0155 EnvoyFilterUsesRelativeOperationWithProxyVersion
//!   when an earlier patch (of this or an earlier EnvoyFilter) that matched a `proxyVersion` had the
//!   same instance name.
//!
//! The instance name of a patch is the `name` of its `patch.value`, else (a value without `name`) the
//! `match.listener.filterChain.filter.name`. Istio compares the value's name in protobuf text form
//! (`string_value:"…"`), so a value name never equals a filter-match name; meshpilot keeps that
//! distinction. Messages stay on the EnvoyFilter's first line: Istio names the patch value, a mapping
//! its line index does not hold, so several findings of one EnvoyFilter print (and merge) as one.

use api::networking::envoy_filter::{ApplyTo, EnvoyConfigObjectPatch, patch::Operation};

use crate::{
    Analyzer, Context, Message,
    msg::{self, MessageType},
    resource::{Resource, kinds},
};

/// `envoyfilter.EnvoyPatchAnalyzer`.
#[derive(Debug, Default)]
pub struct EnvoyPatchAnalyzer;

impl Analyzer for EnvoyPatchAnalyzer {
    fn name(&self) -> &str {
        "envoyfilter.EnvoyPatchAnalyzer"
    }

    fn description(&self) -> &str {
        "Checks an envoyFilters"
    }

    fn inputs(&self) -> &[&'static str] {
        &[kinds::ENVOY_FILTER]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        // Instance names of patches that matched a proxy version, across EnvoyFilters in reading order.
        let mut versioned_names: Vec<String> = Vec::new();
        for config in ctx.istio(api::Kind::EnvoyFilter) {
            let api::Spec::EnvoyFilter(ef) = config.spec() else { continue };
            for patch in &ef.config_patches {
                let Some(p) = &patch.patch else { break };
                let instance = instance_name(patch);
                let apply_to = patch.apply_to;
                let route_level =
                    apply_to == ApplyTo::RouteConfiguration as i32 || apply_to == ApplyTo::HttpRoute as i32;
                let replaceable = [ApplyTo::NetworkFilter, ApplyTo::HttpFilter, ApplyTo::VirtualHost]
                    .iter()
                    .any(|a| *a as i32 == apply_to);
                let relative = || -> Option<&'static MessageType> {
                    match (ef.priority, versioned_names.contains(&instance)) {
                        (0, true) => Some(&msg::ENVOY_FILTER_USES_RELATIVE_OPERATION_WITH_PROXY_VERSION),
                        (0, false) => Some(&msg::ENVOY_FILTER_USES_RELATIVE_OPERATION),
                        _ => None,
                    }
                };
                let found = match Operation::try_from(p.operation) {
                    Ok(Operation::Add) if route_level => {
                        Some(&msg::ENVOY_FILTER_USES_ADD_OPERATION_INCORRECTLY)
                    }
                    Ok(Operation::Remove) if route_level => {
                        Some(&msg::ENVOY_FILTER_USES_REMOVE_OPERATION_INCORRECTLY)
                    }
                    Ok(Operation::Replace) if !replaceable => {
                        Some(&msg::ENVOY_FILTER_USES_REPLACE_OPERATION_INCORRECTLY)
                    }
                    Ok(
                        Operation::Remove
                        | Operation::Replace
                        | Operation::InsertBefore
                        | Operation::InsertAfter,
                    ) => relative(),
                    _ => None,
                };
                if let Some(t) = found {
                    out.push(config.message(t, &[]));
                }
                if patch
                    .r#match
                    .as_ref()
                    .and_then(|m| m.proxy.as_ref())
                    .is_some_and(|p| !p.proxy_version.is_empty())
                {
                    versioned_names.push(instance);
                }
            }
        }
    }
}

/// The patch's instance name (see the module docs); empty when there is none.
fn instance_name(patch: &EnvoyConfigObjectPatch) -> String {
    let Some(value) = patch.patch.as_ref().and_then(|p| p.value.as_ref()) else { return String::new() };
    if let Some(name) = value.fields.get("name") {
        return format!("value:{}", name.to_json());
    }
    patch
        .r#match
        .as_ref()
        .and_then(|m| m.listener.as_ref())
        .and_then(|l| l.filter_chain.as_ref())
        .and_then(|fc| fc.filter.as_ref())
        .map(|f| f.name.clone())
        .unwrap_or_default()
}
