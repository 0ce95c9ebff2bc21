//! EnvoyFilter: user patches to the Envoy configuration meshpilot generates, applied as istiod applies
//! them (`pilot/pkg/networking/core/envoyfilter`, `pilot/pkg/model/envoyfilter.go`).
//!
//! - [`compile`]: an EnvoyFilter object → [`CompiledPatch`]es (patch values read as Envoy messages by
//!   reflection over Envoy's descriptors, [`descriptors`]), once per push context.
//! - [`ProxyPatches`]: the patches of the EnvoyFilters that select one proxy (the caller gives them in
//!   Istio's order, `model::push::PushContext::envoy_filters`), filtered by `match.proxy`.
//! - [`listener`], [`cluster`], [`route`], [`extension`]: the patch operations on typed Envoy resources,
//!   with istiod's matching rules and quirks, each module saying which.
//! - [`merge`]: Istio's protobuf merge (`MERGE`, `MERGE_AND_REPLACE_LIST`).
//!
//! Patching never panics and never fails as a whole: a patch that cannot apply is skipped and reported
//! as a [`model::Finding`] naming the EnvoyFilter and `spec.configPatches[i]`; the generators' glue
//! (`networking::envoy_filter`) checks the patched resources before they are sent.

pub mod cluster;
pub mod compile;
pub mod descriptors;
pub mod extension;
pub mod listener;
pub mod merge;
pub mod route;

use std::sync::Arc;

use api::networking::envoy_filter::ApplyTo;
pub use api::networking::envoy_filter::{PatchContext, patch::Operation};
pub use compile::{CompiledEnvoyFilter, CompiledPatch, PatchValue, compile};
use model::{ConfigKey, Finding, push::ProxyContext};

/// Number of `applyTo` values (`INVALID` … `LISTENER_FILTER`).
const APPLY_TO_COUNT: usize = 12;

/// The patches that apply to one proxy, grouped by `applyTo`, each group in Istio's order (the
/// EnvoyFilters' order, then `configPatches` order). Istio's `MergedEnvoyFilterWrapper`.
#[derive(Clone, Debug, Default)]
pub struct ProxyPatches {
    by_apply_to: [Vec<Arc<CompiledPatch>>; APPLY_TO_COUNT],
    identity: Arc<[(ConfigKey, usize)]>,
}

impl ProxyPatches {
    /// The patches of `filters` (compiled EnvoyFilters already in Istio's order for this proxy) whose
    /// `match.proxy` fits `proxy`.
    pub fn new<'a>(filters: impl IntoIterator<Item = &'a CompiledEnvoyFilter>, proxy: &ProxyContext) -> Self {
        let mut out = ProxyPatches::default();
        for filter in filters {
            for patch in &filter.patches {
                if patch.matches_proxy(proxy) {
                    out.by_apply_to[patch.apply_to as usize].push(patch.clone());
                }
            }
        }
        out.identity = out.by_apply_to.iter().flatten().map(|p| (p.filter.clone(), p.index)).collect();
        out
    }

    /// The patches for `apply_to`.
    pub fn of(&self, apply_to: ApplyTo) -> &[Arc<CompiledPatch>] {
        &self.by_apply_to[apply_to as usize]
    }

    /// No patch at all.
    pub fn is_empty(&self) -> bool {
        self.by_apply_to.iter().all(Vec::is_empty)
    }

    /// Whether any patch targets one of `kinds`.
    pub fn has_any(&self, kinds: &[ApplyTo]) -> bool {
        kinds.iter().any(|k| !self.of(*k).is_empty())
    }

    /// The same patches without those of the EnvoyFilter `filter` (to find which one breaks a
    /// resource).
    pub fn without(&self, filter: &ConfigKey) -> ProxyPatches {
        let mut out = self.clone();
        for group in &mut out.by_apply_to {
            group.retain(|p| &p.filter != filter);
        }
        out.identity = out.by_apply_to.iter().flatten().map(|p| (p.filter.clone(), p.index)).collect();
        out
    }

    /// The EnvoyFilters with a patch here, in order of first appearance.
    pub fn filters(&self) -> Vec<ConfigKey> {
        let mut out: Vec<ConfigKey> = Vec::new();
        for patch in self.by_apply_to.iter().flatten() {
            if !out.contains(&patch.filter) {
                out.push(patch.filter.clone());
            }
        }
        out
    }

    /// An identity of this patch set (which patches of which EnvoyFilters), equal for two proxies with
    /// the same patches: what caches of patched resources key on.
    pub fn identity(&self) -> Arc<[(ConfigKey, usize)]> {
        self.identity.clone()
    }
}

/// Where patching stands for one resource: the findings collected while applying.
pub type Findings = Vec<Finding>;
