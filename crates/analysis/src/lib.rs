//! meshpilot's config analysis: Istio's analyzers (`istioctl analyze`, `pkg/config/analysis`) over a
//! set of objects.
//!
//! ```text
//!  files / cluster objects ──► resource::Resources ──► analyzers (Analyzer::analyze) ──► Vec<Message>
//!  (+ mesh config, mesh networks,                        istioctl's default set,        sorted, deduplicated,
//!   istioctl's default resources)                        or one by name                 filtered (namespace, suppressions)
//! ```
//!
//! - [`msg`]: Istio's message catalogue (code, name, level, template) and template rendering.
//! - [`message`]: [`Message`] and [`Origin`], printed as istioctl prints them.
//! - [`resource`]: [`Resources`] — Istio objects as typed `model::Config`s, every other object as a
//!   [`resource::KubeObject`], the mesh config.
//! - [`analyzers`]: the [`Analyzer`] trait, [`analyzers::all`] (istioctl's default set, in Istio's
//!   order) and one module per Istio analyzer package.
//!
//! The crate is pure: no I/O besides reading the files it is handed, no Kubernetes client, no runtime.

pub mod analyzers;
pub mod annotation;
pub mod message;
pub mod msg;
pub mod resource;
pub mod util;

use std::ops::Deref;

pub use analyzers::Analyzer;
pub use message::{Message, Origin};
pub use msg::{Level, MessageType};
pub use resource::{IstioResource, KubeObject, Resource, Resources};

/// What an analyzer reads: the resources (with the mesh config) and the name of the analyzer running.
pub struct Context<'a> {
    resources: &'a Resources,
}

impl<'a> Context<'a> {
    /// A context over `resources`.
    pub fn new(resources: &'a Resources) -> Context<'a> {
        Context { resources }
    }

    /// The resources.
    pub fn resources(&self) -> &'a Resources {
        self.resources
    }
}

impl Deref for Context<'_> {
    type Target = Resources;
    fn deref(&self) -> &Resources {
        self.resources
    }
}

/// One `--suppress` entry: messages with `code` on objects whose friendly name (`Kind ns/name`)
/// matches `resource` (`*` matches any run of characters) are dropped (Istio's `AnalysisSuppression`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suppression {
    /// `IST0101`.
    pub code: String,
    /// `VirtualService default/reviews`, `DestinationRule *`, `*`.
    pub resource: String,
}

impl std::str::FromStr for Suppression {
    type Err = String;

    /// `CODE=KIND NAME` (istioctl's `--suppress` syntax).
    ///
    /// # Errors
    /// No `=`, or an empty code or resource.
    fn from_str(s: &str) -> Result<Suppression, String> {
        match s.split_once('=') {
            Some((code, resource)) if !code.trim().is_empty() && !resource.trim().is_empty() => {
                Ok(Suppression { code: code.trim().to_string(), resource: resource.trim().to_string() })
            }
            _ => Err(format!(
                "{s:?} is not a valid suppression value. See istioctl analyze --help: expected <code>=<resource> \
                 (for example \"IST0102=Namespace frod\")"
            )),
        }
    }
}

/// `*` globbing as istioctl's suppressions (`github.com/ryanuber/go-glob`): `*` matches any run of
/// characters, everything else literally.
pub fn glob_match(pattern: &str, subject: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == subject;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !subject.starts_with(first) {
        return false;
    }
    let mut rest = &subject[first.len()..];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The annotation that suppresses codes on its object (`galley.istio.io/analyze-suppress`:
/// comma-separated codes, or `*`).
pub const SUPPRESS_ANNOTATION: &str = "galley.istio.io/analyze-suppress";

/// Which messages to keep.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Keep only messages about objects in this namespace (and cluster-scoped objects).
    pub namespace: Option<String>,
    /// `--suppress` entries.
    pub suppressions: Vec<Suppression>,
}

/// What an analysis run gave.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    /// The messages, in Istio's order, deduplicated and filtered.
    pub messages: Vec<Message>,
    /// Names of the analyzers that ran.
    pub executed: Vec<String>,
    /// Names of the analyzers skipped because one of their inputs cannot be present (istioctl's
    /// `RemoveSkipped`: a files-only run has no Pods, Services, Namespaces, Nodes or Secrets).
    pub skipped: Vec<String>,
}

/// Runs `analyzers` over `resources` and filters the messages as istioctl does (`filterMessages`):
/// messages about objects outside `filter.namespace` (cluster-scoped objects are kept), codes
/// suppressed by the object's [`SUPPRESS_ANNOTATION`], and `--suppress` matches are dropped.
pub fn analyze(resources: &Resources, analyzers: &[Box<dyn Analyzer>], filter: &Filter) -> Analysis {
    let ctx = Context::new(resources);
    let mut analysis = Analysis::default();
    let mut messages = Vec::new();
    for a in analyzers {
        if a.inputs().iter().all(|k| resources.is_available(k)) {
            analysis.executed.push(a.name().to_string());
            a.analyze(&ctx, &mut messages);
        } else {
            analysis.skipped.push(a.name().to_string());
        }
    }
    messages.retain(|m| keep(resources, m, filter));
    message::sort_dedup(&mut messages);
    analysis.messages = messages;
    analysis
}

fn keep(resources: &Resources, m: &Message, filter: &Filter) -> bool {
    if let (Some(want), Some(ns)) = (&filter.namespace, m.origin.filter_namespace())
        && !ns.is_empty()
        && ns != want
    {
        return false;
    }
    if let Some(codes) = resources.by_origin(&m.origin).and_then(|r| r.annotations().get(SUPPRESS_ANNOTATION))
        && codes.split(',').any(|c| c.trim() == "*" || c.trim() == m.code())
    {
        return false;
    }
    let name = m.origin.friendly_name();
    !filter.suppressions.iter().any(|s| s.code == m.code() && glob_match(&s.resource, &name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_go_glob() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("DestinationRule *", "DestinationRule default/x"));
        assert!(glob_match("*/x", "DestinationRule default/x"));
        assert!(glob_match("Virtual*ns/*", "VirtualService ns/a"));
        assert!(!glob_match("DestinationRule *", "VirtualService default/x"));
        assert!(!glob_match("a*a", "a"));
        assert!(glob_match("exact", "exact") && !glob_match("exact", "exactly"));
    }

    #[test]
    fn suppressions_parse_istioctl_syntax() {
        let s: Suppression = "IST0102=Namespace frod".parse().unwrap();
        assert_eq!((s.code.as_str(), s.resource.as_str()), ("IST0102", "Namespace frod"));
        assert!("IST0102".parse::<Suppression>().is_err());
    }
}
