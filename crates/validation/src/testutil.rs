//! Test helpers: build typed specs and metadata from YAML snippets.

use api::{de::from_node, meta::ObjectMeta, yaml::parse_documents};

/// Decodes a YAML snippet as `T` (e.g. a VirtualService spec), panicking on a decode error or an
/// unknown field, so a test's input is exactly what it says.
pub(crate) fn spec<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    let root = parse_documents(yaml).remove(0).expect("snippet parses").root.expect("snippet has content");
    let (value, unknown) = from_node::<T>(&root, "spec").unwrap_or_else(|e| panic!("snippet decodes: {e}"));
    assert!(unknown.is_empty(), "snippet has unknown fields: {unknown:?}");
    value
}

/// Metadata with a name and namespace.
pub(crate) fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta { name: name.into(), namespace: namespace.into(), ..ObjectMeta::default() }
}

/// Runs `validate` on a spec and returns the report.
pub(crate) fn run<T>(
    validate: fn(&ObjectMeta, &T, &mut crate::Report),
    meta: &ObjectMeta,
    spec: &T,
) -> crate::Report {
    let mut report = crate::Report::default();
    validate(meta, spec, &mut report);
    report
}
