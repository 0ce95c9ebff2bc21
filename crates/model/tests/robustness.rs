//! Property tests: arbitrary bytes and mutated corpus documents never panic the reader or the
//! validators, and every failure carries a location.

use std::path::{Path, PathBuf};

use meshpilot_model::parse::{ParseOptions, ParsedDocument, config_files, parse_text};
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
