//! Istio's analyzer test table (`../shared/istio-testdata/_derived/analyze/analyzer-cases.yaml`, from
//! `pkg/config/analysis/analyzers/analyzers_test.go`): for each case, load the input files (with
//! Pods, Services and the other runtime kinds, as Istio's harness does), the optional mesh config /
//! mesh networks and istioctl's default resources, run only the named analyzer and compare the
//! multiset of (code, origin) with Istio's expectation.
//!
//! Every case passes except those in [`KNOWN_GAPS`] (with the reason); a known gap that passes fails
//! the test, so the list only shrinks.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use meshpilot_analysis::{
    Filter,
    resource::{LoadOptions, Resources},
};
use serde_json::Value;

/// Reason for the cases of analyzers not implemented yet.
const NOT_IMPLEMENTED: &str = "not implemented yet";

/// Cases that do not pass yet: case name → reason (the analyzer, and who implements it, in the comment).
const KNOWN_GAPS: &[(&str, &str)] = &[];

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/istio-testdata")
}

fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let doc =
        api::yaml::parse_documents(&text).into_iter().next().expect("one document").expect("valid YAML");
    doc.root.expect("not empty").to_json()
}

struct Outcome {
    name: String,
    analyzer: String,
    passed: bool,
    detail: String,
}

fn run_case(case: &Value, root: &Path) -> Outcome {
    let name = case["name"].as_str().unwrap_or_default().to_string();
    let analyzer_name = case["analyzer"].as_str().unwrap_or_default().to_string();
    let outcome = |passed, detail: String| Outcome {
        name: name.clone(),
        analyzer: analyzer_name.clone(),
        passed,
        detail,
    };
    let Some(analyzer) = meshpilot_analysis::analyzers::find(&analyzer_name) else {
        return outcome(false, format!("analyzer {analyzer_name} {NOT_IMPLEMENTED}"));
    };
    let mut resources =
        Resources::new(LoadOptions { default_namespace: String::new(), runtime_kinds_from_files: true });
    if let Some(file) = case["meshConfigFile"].as_str() {
        let text = std::fs::read_to_string(root.join(file)).expect("mesh config file");
        resources.set_mesh_config_yaml(&text).expect("mesh config");
    }
    if let Some(file) = case["meshNetworksFile"].as_str() {
        let text = std::fs::read_to_string(root.join(file)).expect("mesh networks file");
        resources.set_mesh_networks_yaml(&text).expect("mesh networks");
    }
    for file in case["inputFiles"].as_array().into_iter().flatten() {
        let path = root.join(file.as_str().expect("file name"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        resources.add_text(file.as_str().unwrap_or_default(), &text, true);
    }
    resources.add_default_resources();
    let result = meshpilot_analysis::analyze(&resources, &[analyzer], &Filter::default());
    let mut got: BTreeMap<String, i32> = BTreeMap::new();
    for m in &result.messages {
        *got.entry(format!("{} {}", m.code(), m.origin.friendly_name())).or_default() += 1;
    }
    let mut want: BTreeMap<String, i32> = BTreeMap::new();
    for e in case["expected"].as_array().into_iter().flatten() {
        let key = format!(
            "{} {}",
            e["code"].as_str().unwrap_or_default(),
            e["origin"].as_str().unwrap_or_default()
        );
        *want.entry(key).or_default() += 1;
    }
    if got == want {
        return outcome(true, String::new());
    }
    let mut diff = Vec::new();
    for (k, n) in &want {
        let g = got.get(k).copied().unwrap_or(0);
        if g < *n {
            diff.push(format!("missing {}x {k}", n - g));
        }
    }
    for (k, n) in &got {
        let w = want.get(k).copied().unwrap_or(0);
        if w < *n {
            diff.push(format!("unexpected {}x {k}", n - w));
        }
    }
    if !resources.load_errors.is_empty() {
        diff.push(format!("load errors: {:?}", resources.load_errors));
    }
    let lines: Vec<String> = result.messages.iter().map(ToString::to_string).collect();
    outcome(false, format!("{}\n      got: {lines:#?}", diff.join("; ")))
}

#[test]
fn analyzer_cases_agree_with_istio() {
    let root = testdata();
    let table = read_yaml(&root.join("_derived/analyze/analyzer-cases.yaml"));
    let cases = table["cases"].as_array().expect("cases");
    let total = cases.len();
    let outcomes: Vec<Outcome> = cases.iter().map(|c| run_case(c, &root)).collect();
    let mut failures = Vec::new();
    for (gap, _) in KNOWN_GAPS {
        if !outcomes.iter().any(|o| o.name == *gap) {
            failures.push(format!("{gap}: listed in KNOWN_GAPS but not a case of the table"));
        }
    }
    for o in &outcomes {
        let gap = KNOWN_GAPS.iter().find(|(n, _)| *n == o.name).map(|(_, reason)| *reason);
        match (o.passed, gap) {
            (true, None) => println!("pass  {} ({})", o.name, o.analyzer),
            (true, Some(reason)) => {
                println!("PASS! {} ({}): listed as a known gap ({reason}) but passes", o.name, o.analyzer);
                failures.push(format!("{}: passes; remove it from KNOWN_GAPS", o.name));
            }
            (false, Some(reason)) => {
                println!("gap   {} ({}): {reason}\n      {}", o.name, o.analyzer, o.detail)
            }
            (false, None) => {
                println!("FAIL  {} ({}): {}", o.name, o.analyzer, o.detail);
                failures.push(format!("{}: {}", o.name, o.detail));
            }
        }
    }
    let passed = outcomes.iter().filter(|o| o.passed).count();
    println!(
        "agreement with Istio: {passed}/{total} cases ({:.1} %); {} known gaps",
        100.0 * passed as f64 / total as f64,
        KNOWN_GAPS.len()
    );
    assert!(failures.is_empty(), "{} case(s) disagree with Istio:\n{}", failures.len(), failures.join("\n"));
}
