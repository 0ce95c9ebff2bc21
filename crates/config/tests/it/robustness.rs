//! Property tests: arbitrary bytes and mutated corpus documents never panic the reader or the
//! validators, and every failure carries a location.

use std::path::{Path, PathBuf};

use meshpilot_config::parse::{ParseOptions, ParsedDocument, config_files, parse_text};
use proptest::prelude::*;

fn corpus() -> &'static [String] {
    static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/istio-testdata");
        let mut files: Vec<PathBuf> = config_files(&root.join("tests/testdata/config")).unwrap();
        files.extend(config_files(&root.join("samples/bookinfo/networking")).unwrap());
        files.extend(config_files(&root.join("pkg/config/validation/testdata/crds")).unwrap());
        files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect()
    })
}

/// Every finding has a line inside the text (or just past its end). Lines are counted as YAML
/// counts them: `\r` alone is a line break too (and the parser also breaks on NEL, LS and PS).
fn check_locations(text: &str, docs: &[ParsedDocument]) {
    let breaks =
        text.chars().filter(|c| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')).count();
    let lines = breaks as u32 + 2;
    for doc in docs {
        for f in doc.errors.iter().chain(&doc.warnings) {
            assert!(
                f.line >= 1 && f.line <= lines,
                "finding without a valid line: {f:?} (text has {lines} lines)"
            );
            assert!(!f.message.is_empty());
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, String),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Indent(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let fragment = prop_oneof![
        Just(":".to_string()),
        Just("- ".to_string()),
        Just("[".to_string()),
        Just("}".to_string()),
        Just("\"".to_string()),
        Just("'".to_string()),
        Just("\n".to_string()),
        Just("\t".to_string()),
        Just("  ".to_string()),
        Just("&a ".to_string()),
        Just("*a".to_string()),
        Just("~".to_string()),
        Just("-1".to_string()),
        Just("99999999999999999999".to_string()),
        Just("1.5s".to_string()),
        Just("é".to_string()),
        "[a-zA-Z0-9_.*/]{1,8}",
    ];
    prop_oneof![
        (any::<usize>(), 0usize..20).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), fragment).prop_map(|(a, s)| Mutation::Insert(a, s)),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (any::<usize>(), 0usize..6).prop_map(|(a, n)| Mutation::Indent(a, n)),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let boundary = |s: &str, at: usize| {
        let mut i = at % (s.len() + 1);
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    match m {
        Mutation::Delete(at, n) => {
            let a = boundary(text, *at);
            let b = boundary(text, (a + n).min(text.len()));
            format!("{}{}", &text[..a], &text[b.max(a)..])
        }
        Mutation::Insert(at, s) => {
            let a = boundary(text, *at);
            format!("{}{s}{}", &text[..a], &text[a..])
        }
        Mutation::DuplicateLine(i) | Mutation::Indent(i, _) | Mutation::SwapLines(i, _) => {
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            if lines.is_empty() {
                return text.to_string();
            }
            let i = i % lines.len();
            match m {
                Mutation::DuplicateLine(_) => lines.insert(i, lines[i].clone()),
                Mutation::Indent(_, n) => lines[i] = format!("{}{}", " ".repeat(*n), lines[i]),
                Mutation::SwapLines(_, j) => {
                    let j = j % lines.len();
                    lines.swap(i, j);
                }
                _ => unreachable!(),
            }
            lines.join("\n")
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        let docs = parse_text("fuzz.yaml", &text, &ParseOptions::default());
        check_locations(&text, &docs);
    }

    #[test]
    fn yaml_like_text_never_panics(text in "([a-zA-Z0-9_]{0,6}(: |:|- |\n|  |\\[|\\]|\\{|\\}|, |---\n|\"|'|#|&x |\\*x)){0,60}") {
        let docs = parse_text("fuzz.yaml", &text, &ParseOptions::default());
        check_locations(&text, &docs);
    }

    #[test]
    fn mutated_corpus_documents_never_panic(
        file in 0usize..1000,
        mutations in proptest::collection::vec(mutation(), 1..6),
    ) {
        let corpus = corpus();
        let mut text = corpus[file % corpus.len()].clone();
        for m in &mutations {
            text = apply(&text, m);
        }
        let docs = parse_text("mutated.yaml", &text, &ParseOptions::default());
        check_locations(&text, &docs);
    }
}

/// Field names and string values seen in the corpus, so random specs decode often and reach the
/// validators with odd combinations and values.
fn vocabulary() -> &'static (Vec<String>, Vec<String>) {
    static VOCAB: std::sync::OnceLock<(Vec<String>, Vec<String>)> = std::sync::OnceLock::new();
    VOCAB.get_or_init(|| {
        fn walk(
            v: &serde_json::Value,
            keys: &mut std::collections::BTreeSet<String>,
            strings: &mut std::collections::BTreeSet<String>,
        ) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, v) in m {
                        keys.insert(k.clone());
                        walk(v, keys, strings);
                    }
                }
                serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, keys, strings)),
                serde_json::Value::String(s) if s.len() < 40 => {
                    strings.insert(s.clone());
                }
                _ => {}
            }
        }
        let mut keys = std::collections::BTreeSet::new();
        let mut strings = std::collections::BTreeSet::new();
        for text in corpus() {
            for doc in api::yaml::parse_documents(text).into_iter().flatten() {
                if let Some(spec) = doc.root.as_ref().and_then(|r| r.get("spec")) {
                    walk(&spec.to_json(), &mut keys, &mut strings);
                }
            }
        }
        (keys.into_iter().collect(), strings.into_iter().collect())
    })
}

fn random_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        prop_oneof![Just(0i64), Just(-1), Just(65536), Just(i64::MAX), -5i64..70_000]
            .prop_map(serde_json::Value::from),
        prop_oneof![Just(0.5f64), Just(-0.0), Just(1e300), Just(100.0001)].prop_map(serde_json::Value::from),
        any::<prop::sample::Index>().prop_map(|i| {
            let strings = &vocabulary().1;
            serde_json::Value::from(strings[i.index(strings.len())].clone())
        }),
        "[a-z*./:~^$()\\[\\]{}%-]{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::vec((any::<prop::sample::Index>(), inner), 0..6).prop_map(|entries| {
                let keys = &vocabulary().0;
                serde_json::Value::Object(
                    entries.into_iter().map(|(i, v)| (keys[i.index(keys.len())].clone(), v)).collect(),
                )
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// Random specs of every kind, built from the corpus's own field names and values, reach the
    /// validators: no panic, and every finding has a location.
    #[test]
    fn random_specs_never_panic_the_validators(kind in 0usize..api::Kind::ALL.len(), spec in random_value()) {
        let schema = api::Kind::ALL[kind].schema();
        let doc = serde_json::json!({
            "apiVersion": schema.api_version(),
            "kind": schema.kind.as_str(),
            "metadata": {"name": "fuzz", "namespace": "fuzz"},
            "spec": spec,
        });
        let text = serde_json::to_string_pretty(&doc).unwrap();
        let docs = parse_text("fuzz.json", &text, &ParseOptions::default());
        check_locations(&text, &docs);
    }
}
