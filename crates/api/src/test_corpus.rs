//! Test-only access to the shared Istio corpus (`../shared/istio-testdata` beside the repository),
//! read and parsed once per test process and shared by every type's corpus test.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

use prost::Message;

use crate::{
    de::from_node,
    schema::{Kind, Lookup, lookup},
    yaml::{Node, parse_documents},
};

/// Which part of the Istio test data a corpus test reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Inputs Istio treats as valid: `samples/**`, `tests/testdata/config/**`,
    /// `pkg/test/datasets/validation/dataset/**`, `pkg/config/validation/testdata/crds/*-valid.yaml`
    /// and `_derived/validation/istioctl-validate/inputs/{valid,warn}*`.
    Valid,
    /// Every other YAML/JSON input (pilot, analyzer and benchmark test data), except files whose name
    /// contains `invalid`. Some of these use fields Istio removed, so only some kinds check them.
    Other,
}

struct CorpusDoc {
    file: String,
    scope: Scope,
    kind: Kind,
    spec: Option<Node>,
}

fn scope_of(rel: &str) -> Option<Scope> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let valid = rel.starts_with("samples/")
        || rel.starts_with("tests/testdata/config/")
        || rel.starts_with("pkg/test/datasets/validation/dataset/")
        || (rel.starts_with("pkg/config/validation/testdata/crds/") && name.ends_with("-valid.yaml"))
        || (rel.starts_with("_derived/validation/istioctl-validate/inputs/")
            && (name.starts_with("valid") || name.starts_with("warn")));
    if valid {
        Some(Scope::Valid)
    } else if name.to_ascii_lowercase().contains("invalid") {
        None
    } else {
        Some(Scope::Other)
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for path in entries.flatten().map(|e| e.path()) {
        if path.is_dir() {
            files_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "json") {
            out.push(path);
        }
    }
}

/// Every Istio-kind document of the test data, parsed once.
fn documents() -> &'static [CorpusDoc] {
    static DOCS: OnceLock<Vec<CorpusDoc>> = OnceLock::new();
    DOCS.get_or_init(|| {
        let base = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/istio-testdata"));
        assert!(base.is_dir(), "the Istio test data is missing: {}", base.display());
        let mut files = Vec::new();
        files_under(base, &mut files);
        files.sort();
        let mut out = Vec::new();
        for file in files {
            let rel = file.strip_prefix(base).unwrap().to_string_lossy().replace('\\', "/");
            let Some(scope) = scope_of(&rel) else { continue };
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            for doc in parse_documents(&text).into_iter().flatten() {
                let Some(root) = doc.root else { continue };
                let (Some(api_version), Some(kind)) =
                    (root.get("apiVersion").and_then(Node::as_str), root.get("kind").and_then(Node::as_str))
                else {
                    continue;
                };
                if let Lookup::Istio(schema) = lookup(api_version, kind) {
                    let file = format!("{rel}#{}", doc.index);
                    out.push(CorpusDoc { file, scope, kind: schema.kind, spec: root.get("spec").cloned() });
                }
            }
        }
        out
    })
}

/// Decodes the spec of every `kind` document in `scope` as `T`, asserting no decode error, no unknown
/// field (except those whose last path segment is in `removed`: fields Istio removed that old test
/// data still carries) and an identical protobuf round trip. Prints and returns the count.
pub(crate) fn check_corpus<T>(kind: Kind, scope: Scope, removed: &[&str]) -> usize
where
    T: Message + Default + PartialEq + serde::de::DeserializeOwned,
{
    let mut failures = Vec::new();
    let mut count = 0;
    for doc in documents().iter().filter(|d| d.kind == kind && d.scope == scope) {
        count += 1;
        let Some(spec) = &doc.spec else { continue };
        match from_node::<T>(spec, "spec") {
            Ok((value, unknown)) => {
                for u in unknown {
                    let last = u.path.rsplit('.').next().unwrap_or_default();
                    if !removed.contains(&last) {
                        failures.push(format!("{}: unknown field {}", doc.file, u.path));
                    }
                }
                if T::decode(&*value.encode_to_vec()).ok().as_ref() != Some(&value) {
                    failures.push(format!("{}: protobuf round trip changed the value", doc.file));
                }
            }
            Err(e) => failures.push(format!("{}: {e}", doc.file)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("corpus ({scope:?}): decoded {count} {kind} specs");
    count
}

/// The root node of the first document of `text` (a test snippet).
pub(crate) fn spec_node(text: &str) -> Node {
    parse_documents(text).remove(0).expect("snippet parses").root.expect("snippet has content")
}

/// The `spec` node of the first document of `text` (a test snippet with a top-level `spec:`).
pub(crate) fn spec_of(text: &str) -> Node {
    spec_node(text).get("spec").expect("snippet has a spec").clone()
}
