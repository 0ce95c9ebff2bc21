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

/// What a table case expects: no findings, an error, or (and no error) a warning; each with the path
/// and a substring of the message.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Want {
    /// No error and no warning.
    Valid,
    /// An error at the path whose message contains the text.
    Error(&'static str, &'static str),
    /// No error, and a warning at the path whose message contains the text.
    Warning(&'static str, &'static str),
}

/// Asserts that `report` is what `want` says; `name` names the case in the failure message.
pub(crate) fn check(name: &str, report: &crate::Report, want: Want) {
    let has = |issues: &[crate::Issue], path: &str, text: &str| {
        issues.iter().any(|i| i.path == path && i.message.contains(text))
    };
    match want {
        Want::Valid => assert!(
            report.errors.is_empty() && report.warnings.is_empty(),
            "{name}: expected no findings, got {report:?}"
        ),
        Want::Error(path, text) => {
            assert!(has(&report.errors, path, text), "{name}: expected error {path}: {text}, got {report:?}")
        }
        Want::Warning(path, text) => assert!(
            report.errors.is_empty() && has(&report.warnings, path, text),
            "{name}: expected only warning {path}: {text}, got {report:?}"
        ),
    }
}

/// Runs every `(name, spec YAML, want)` case through `validate` with `meta`.
pub(crate) fn check_all<T: serde::de::DeserializeOwned>(
    validate: fn(&ObjectMeta, &T, &mut crate::Report),
    meta: &ObjectMeta,
    cases: &[(&str, &str, Want)],
) {
    for (name, yaml, want) in cases {
        check(name, &run(validate, meta, &spec::<T>(yaml)), *want);
    }
}

/// A table case in the other shape the per-kind tests use: (name, spec YAML, `Some((message substring,
/// path))` for an expected error or `None` for no error, whether a warning is expected).
pub(crate) type Case = (&'static str, &'static str, Option<(&'static str, &'static str)>, bool);

/// Runs every [`Case`] through `validate` with `meta`.
pub(crate) fn check_cases<T: serde::de::DeserializeOwned>(
    validate: fn(&ObjectMeta, &T, &mut crate::Report),
    meta: &ObjectMeta,
    cases: &[Case],
) {
    for (name, yaml, want, warning) in cases {
        let report = run(validate, meta, &spec::<T>(yaml));
        assert_error(name, &report, *want);
        assert_eq!(!report.warnings.is_empty(), *warning, "{name}: warnings {report:?}");
    }
}

/// Asserts that `report` has no error (`want` is `None`) or an error at `path` whose message contains
/// `message` (`want` is `Some((message, path))`); `name` names the case in the failure message.
pub(crate) fn assert_error(name: &str, report: &crate::Report, want: Option<(&str, &str)>) {
    match want {
        None => assert!(report.is_valid(), "{name}: unexpected errors {report:?}"),
        Some((message, path)) => assert!(
            report.errors.iter().any(|e| e.message.contains(message) && e.path == path),
            "{name}: want {message:?} at {path}, got {report:?}"
        ),
    }
}
