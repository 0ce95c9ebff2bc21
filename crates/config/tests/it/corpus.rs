//! Verdict agreement with Istio on the shared corpora (`../shared/istio-testdata`), and the protobuf /
//! JSON round trip of every valid document.
//!
//! Each test prints its agreement count and fails listing every disagreement.

use std::path::{Path, PathBuf};

use api::{
    Spec,
    yaml::{self, Node, Value},
};
use meshpilot_config::parse::{ParseOptions, ParsedDocument, config_files, parse_node, parse_text};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/istio-testdata")
}

fn load_table(rel: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(testdata().join(rel)).expect("shared test data beside the repository");
    let docs = yaml::parse_documents(&text);
    docs[0].as_ref().expect("table parses").root.as_ref().expect("table has content").to_json()
}

/// The non-empty documents of a file, in order (the tables' `doc_index` counts these).
fn non_empty_documents(path: &Path) -> Vec<Node> {
    let text = std::fs::read_to_string(path).unwrap();
    yaml::parse_documents(&text).into_iter().filter_map(|d| d.expect("corpus file parses").root).collect()
}

fn describe(doc: &ParsedDocument) -> String {
    let errs: Vec<String> = doc.errors.iter().map(|e| format!("{}:{} {e}", doc.file, e.line)).collect();
    format!("{} errors={errs:?}", doc.object_ref())
}

#[test]
fn crd_validation_cases_agree_with_istio() {
    let table = load_table("_derived/validation/crd-validation-cases.yaml");
    let mut agree = 0;
    let mut failures = Vec::new();
    let cases = table["cases"].as_array().unwrap();
    for case in cases {
        let file = case["file"].as_str().unwrap();
        let index = case["doc_index"].as_u64().unwrap() as usize;
        let mut root = non_empty_documents(&testdata().join(file)).swap_remove(index);
        // The `_err` key carries the expected apiserver message; it is not part of the object.
        if let Value::Map(entries) = &mut root.value {
            entries.retain(|(k, _)| k.name != "_err");
        }
        let docs = parse_node(file, index, &root, &ParseOptions::default());
        assert_eq!(docs.len(), 1);
        let doc = &docs[0];
        assert_eq!(doc.name, case["name"].as_str().unwrap(), "{file}#{index}");
        let expect_valid = case["expect"] == "valid";
        if doc.is_valid() != expect_valid {
            failures.push(format!(
                "{file}#{index} {}: expected {} got {}",
                doc.name,
                case["expect"],
                describe(doc)
            ));
        } else {
            agree += 1;
        }
    }
    println!("crd-validation-cases: {agree}/{} agree", cases.len());
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}

/// The CRD cases Istio's own test does not hold its Go validation to ("webhook cannot distinguish empty
/// string vs unset"): meshpilot keeps what the reader saw (`validation::presence`), so it must reject each
/// at the field the API server names (with its message where Istio's validator has none). The object's name is lower-cased first: two of them have names the
/// API server's name rule refuses, which would hide whether the rule under test fired.
#[test]
fn crd_cases_that_need_field_presence_fail_with_the_api_servers_message() {
    let table = load_table("_derived/validation/crd-validation-cases.yaml");
    let cases: Vec<&serde_json::Value> = table["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["note"].as_str().is_some_and(|n| n.contains("cannot distinguish empty string vs unset"))
        })
        .collect();
    assert!(cases.len() >= 9, "the table lists the presence cases: {}", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let file = case["file"].as_str().unwrap();
        let index = case["doc_index"].as_u64().unwrap() as usize;
        let mut root = non_empty_documents(&testdata().join(file)).swap_remove(index);
        if let Value::Map(entries) = &mut root.value {
            entries.retain(|(k, _)| k.name != "_err");
            for (k, v) in entries.iter_mut() {
                if k.name == "metadata"
                    && let Value::Map(meta) = &mut v.value
                {
                    for (mk, mv) in meta.iter_mut() {
                        if mk.name == "name"
                            && let Value::String(name) = &mut mv.value
                        {
                            *name = name.to_ascii_lowercase();
                        }
                    }
                }
            }
        }
        let docs = parse_node(file, index, &root, &ParseOptions::default());
        let want = case["error_substring"].as_str().unwrap();
        // Empty list items (`audiences: [""]`) are visible on the typed value, and Istio's validator
        // rejects them at the same field with its own words: that counts too.
        let field = want.split(" in body").next().unwrap();
        if !docs[0].errors.iter().any(|e| e.message.contains(want) || e.path.ends_with(field)) {
            failures.push(format!(
                "{file}#{index}: expected an error containing {want:?}, got {}",
                describe(&docs[0])
            ));
        }
    }
    println!("presence cases: {}/{} fire", cases.len() - failures.len(), cases.len());
    assert!(failures.is_empty(), "{} missing:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn istioctl_resource_cases_agree_with_istio() {
    let table = load_table("_derived/validation/istioctl-validate/cases.yaml");
    let cases = table["resource_cases"].as_array().unwrap();
    let options = ParseOptions { default_namespace: String::new(), ..ParseOptions::default() };
    let mut agree = 0;
    let mut failures = Vec::new();
    for case in cases {
        let file = case["file"].as_str().unwrap();
        let text = std::fs::read_to_string(testdata().join(file)).unwrap();
        let docs = parse_text(file, &text, &options);
        let valid = docs.iter().all(ParsedDocument::is_valid);
        let warning = docs.iter().any(|d| !d.warnings.is_empty());
        if valid == case["valid"].as_bool().unwrap() && warning == case["warning"].as_bool().unwrap() {
            agree += 1;
        } else {
            let got: Vec<String> = docs.iter().map(describe).collect();
            failures.push(format!(
                "{} ({file}): expected {case} got valid={valid} warning={warning} {got:?}",
                case["name"]
            ));
        }
    }
    println!("istioctl resource cases: {agree}/{} agree", cases.len());
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn gvk_dataset_cases_agree_with_istio() {
    let table = load_table("_derived/validation/gvk-dataset-cases.yaml");
    let annotation = table["always_reject_annotation"].as_str().unwrap();
    let cases = table["cases"].as_array().unwrap();
    let mut agree = 0;
    let mut failures = Vec::new();
    for case in cases {
        let file = case["file"].as_str().unwrap();
        let text = std::fs::read_to_string(testdata().join(file)).unwrap();
        let docs = parse_text(file, &text, &ParseOptions::default());
        let expect_valid = case["expect"] == "valid";
        let valid = !docs.is_empty() && docs.iter().all(ParsedDocument::is_valid);
        // The same object with the always-reject annotation must be denied.
        let mut root = non_empty_documents(&testdata().join(file)).swap_remove(0);
        add_annotation(&mut root, annotation, "true");
        let rejected = parse_node(file, 0, &root, &ParseOptions::default()).iter().any(|d| !d.is_valid());
        if valid == expect_valid && rejected {
            agree += 1;
        } else {
            let got: Vec<String> = docs.iter().map(describe).collect();
            failures.push(format!(
                "{file}: expected {expect_valid}, got valid={valid} annotated-rejected={rejected} {got:?}"
            ));
        }
    }
    println!("gvk dataset cases: {agree}/{} agree", cases.len());
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}

fn add_annotation(root: &mut Node, key: &str, value: &str) {
    let mark = root.mark;
    let Value::Map(entries) = &mut root.value else { panic!("object") };
    let meta = match entries.iter_mut().find(|(k, _)| k.name == "metadata") {
        Some((_, m)) => m,
        None => panic!("metadata"),
    };
    let Value::Map(meta_entries) = &mut meta.value else { panic!("metadata map") };
    if !meta_entries.iter().any(|(k, _)| k.name == "annotations") {
        meta_entries
            .push((yaml::Key { mark, name: "annotations".into() }, Node { mark, value: Value::Map(vec![]) }));
    }
    let (_, ann) = meta_entries.iter_mut().find(|(k, _)| k.name == "annotations").unwrap();
    let Value::Map(ann_entries) = &mut ann.value else { panic!("annotations map") };
    ann_entries
        .push((yaml::Key { mark, name: key.into() }, Node { mark, value: Value::String(value.into()) }));
}

/// Every file that Istio treats as valid config: `tests/testdata/config/**` and `samples/**`.
fn valid_corpus_files() -> Vec<PathBuf> {
    let mut files = config_files(&testdata().join("tests/testdata/config")).unwrap();
    files.extend(config_files(&testdata().join("samples")).unwrap());
    files
}

#[test]
fn every_sample_and_testdata_config_file_is_valid() {
    let mut docs_total = 0;
    let mut istio_objects = 0;
    let mut failures = Vec::new();
    let files = valid_corpus_files();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for doc in parse_text(&file.display().to_string(), &text, &ParseOptions::default()) {
            docs_total += 1;
            istio_objects += usize::from(doc.config.is_some());
            if !doc.is_valid() {
                failures.push(describe(&doc));
            }
        }
    }
    println!(
        "valid corpus: {} files, {docs_total} documents ({istio_objects} Istio objects), {} valid",
        files.len(),
        docs_total - failures.len()
    );
    assert!(istio_objects >= 131, "expected the whole corpus to be read, got {istio_objects} Istio objects");
    assert!(failures.is_empty(), "{} invalid:\n{}", failures.len(), failures.join("\n"));
}

/// typed → protobuf → typed must be the identity, and typed → JSON → typed too, for every valid
/// Istio object in the corpus (which makes the JSON output carry the input's semantics).
#[test]
fn protobuf_and_json_round_trip_over_the_corpus() {
    let mut files = valid_corpus_files();
    files.extend(config_files(&testdata().join("pkg/test/datasets/validation/dataset")).unwrap());
    files.extend(
        config_files(&testdata().join("pkg/config/validation/testdata/crds"))
            .unwrap()
            .into_iter()
            .filter(|f| f.to_string_lossy().ends_with("-valid.yaml")),
    );
    let mut checked = 0;
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for doc in parse_text(&file.display().to_string(), &text, &ParseOptions::default()) {
            let Some(config) = doc.config else { continue };
            let spec = &config.spec;
            let bytes = spec.encode_proto();
            match Spec::decode_proto(spec.kind(), &bytes) {
                Ok(back) if &back == spec => {}
                Ok(back) => {
                    failures.push(format!("{}: protobuf round trip changed the spec: {back:?}", doc.file))
                }
                Err(e) => failures.push(format!("{}: protobuf decode failed: {e}", doc.file)),
            }
            let json = spec.to_json();
            let node = Node::from_json(&json, yaml::Mark::default());
            match Spec::from_node(spec.kind(), Some(&node)) {
                Ok((back, unknown)) if &back == spec && unknown.is_empty() => {}
                Ok((_, unknown)) if !unknown.is_empty() => failures.push(format!(
                    "{}: JSON output has fields the reader does not know: {unknown:?}",
                    doc.file
                )),
                Ok(_) => failures.push(format!("{}: JSON round trip changed the spec: {json}", doc.file)),
                Err(e) => {
                    failures.push(format!("{}: JSON output does not read back: {e} in {json}", doc.file))
                }
            }
            checked += 1;
        }
    }
    println!("round trip: {checked} objects");
    assert!(checked >= 178, "expected the whole corpus, got {checked}");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
