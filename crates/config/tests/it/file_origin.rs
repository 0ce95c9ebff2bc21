//! `FileSource::origin`: where an object in force comes from (file, line, validation warnings), and
//! the errors of a file whose new content is rejected while its last good objects stay in force.

use api::Kind;
use meshpilot_config::{FileSource, FileSourceOptions};
use model::ConfigKey;

const GOOD: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a, namespace: ns}\n\
spec: {hosts: [a.example], http: [{route: [{destination: {host: a.example}}]}]}\n\
---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: cb, namespace: ns}\nspec:\n  \
host: a.example\n  trafficPolicy:\n    outlierDetection: {consecutiveErrors: 7}\n";

fn key(kind: Kind, name: &str) -> ConfigKey {
    ConfigKey { kind, namespace: "ns".into(), name: name.into() }
}

#[test]
fn origin_names_file_line_and_warnings_then_the_errors_of_a_rejected_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mesh.yaml");
    std::fs::write(&file, GOOD).unwrap();
    let source = FileSource::new(dir.path(), FileSourceOptions::default()).unwrap();

    let vs = source.origin(&key(Kind::VirtualService, "a")).unwrap();
    assert_eq!((vs.file.as_path(), vs.line), (file.as_path(), 1));
    assert!(vs.warnings.is_empty() && vs.rejected.is_none(), "{vs:?}");
    let dr = source.origin(&key(Kind::DestinationRule, "cb")).unwrap();
    assert_eq!(dr.line, 6, "the second document starts after the separator: {dr:?}");
    assert!(
        dr.warnings.iter().any(|w| w.contains("consecutive errors is deprecated")),
        "the deprecation warning: {dr:?}"
    );
    assert!(source.origin(&key(Kind::VirtualService, "nope")).is_none());
    let all = source.origins();
    assert_eq!(all.len(), 2);
    assert_eq!(all.get(&key(Kind::DestinationRule, "cb")), Some(&dr), "the list agrees with origin");

    // A new content that fails validation: the object stays in force, its origin carries the errors.
    std::fs::write(&file, GOOD.replace("{host: a.example}}]", "{host: a.example}, weight: -15}]")).unwrap();
    source.rescan().unwrap();
    let vs = source.origin(&key(Kind::VirtualService, "a")).unwrap();
    let rejected =
        vs.rejected.unwrap_or_else(|| panic!("the new content is rejected: {:?}", source.status()));
    assert_eq!(vs.line, 0, "the line of the last good content is not kept");
    assert!(rejected.errors.iter().any(|e| e.path.contains("weight")), "{rejected:?}");
    assert_eq!(source.origins()[&key(Kind::VirtualService, "a")].rejected.as_ref(), Some(&rejected));
}
