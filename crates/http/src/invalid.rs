//! The `invalidObjects` list of `/debug/configstatusz`: every config object that is not in force (or
//! not in its current version) because it failed parsing or validation, whatever its source, in one
//! shape: `{kind, namespace, name, resourceVersion, source, keptPrevious, findings: [{path, message}]}`.
//!
//! Cluster objects come from the CRD source's rejected list (`kube_source::KubeSource::rejected`,
//! handed in as an [`InvalidObjectsFn`] so this crate does not depend on Kubernetes); file objects from
//! the file sources' bad files (one entry per document with errors; `resourceVersion` is `null`,
//! `source` is `FILE:LINE`, `keptPrevious` says whether the file's last good objects stay in force).
//! Istio lists neither (istiod only logs a rejected object); meshpilot keeps them visible.

use std::sync::Arc;

use config::FileSource;
use serde::Serialize;

/// One invalid object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InvalidObject {
    /// Its kind (`VirtualService`), as written for files.
    pub kind: String,
    /// Its namespace (empty when a file names none).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The rejected version (`metadata.resourceVersion`; `None` for files).
    pub resource_version: Option<String>,
    /// Where it is: the source name (`kubernetes:https://…`) or `FILE:LINE`.
    pub source: String,
    /// `true` when an earlier valid version (of the object, or of the file's objects) stays in force.
    pub kept_previous: bool,
    /// Each finding: field path (empty for the object itself) and reason.
    pub findings: Vec<InvalidFinding>,
}

/// One finding of an [`InvalidObject`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InvalidFinding {
    /// Field path (`spec.http[0].route[0].weight`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// Lists a source's invalid objects now (called per request).
#[derive(Clone)]
pub struct InvalidObjectsFn(pub Arc<dyn Fn() -> Vec<InvalidObject> + Send + Sync>);

impl std::fmt::Debug for InvalidObjectsFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InvalidObjectsFn")
    }
}

/// The invalid objects of the file sources: one entry per (file, document, object) with errors.
pub fn file_invalid_objects(files: &[Arc<FileSource>]) -> Vec<InvalidObject> {
    let mut out: Vec<InvalidObject> = Vec::new();
    for source in files {
        for bad in &source.status().bad_files {
            let mut current: Option<(usize, String)> = None;
            for e in &bad.errors {
                if current.as_ref() != Some(&(e.document, e.object.clone())) {
                    current = Some((e.document, e.object.clone()));
                    let mut parts = e.object.splitn(3, '/');
                    let mut part = || parts.next().unwrap_or_default().to_string();
                    let (kind, namespace, name) = (part(), part(), part());
                    let file = bad.file.display();
                    out.push(InvalidObject {
                        kind,
                        namespace,
                        name,
                        resource_version: None,
                        source: if e.line > 0 { format!("{file}:{}", e.line) } else { file.to_string() },
                        kept_previous: bad.kept_objects > 0,
                        findings: Vec::new(),
                    });
                }
                if let Some(last) = out.last_mut() {
                    last.findings.push(InvalidFinding { path: e.path.clone(), message: e.message.clone() });
                }
            }
        }
    }
    out
}
