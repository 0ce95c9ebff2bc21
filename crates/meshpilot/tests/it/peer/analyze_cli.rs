//! `meshpilot analyze` against istioctl's command-level expectations
//! (`../shared/istio-testdata/_derived/analyze/istioctl-analyze-cli-cases.yaml`, from
//! `istioctl/pkg/analyze/analyze_test.go` and `tests/integration/pilot/analyze_test.go`): exit status,
//! the message codes in output order followed by istioctl's boilerplate, output substrings and JSON
//! output. The binary runs with the test-data root as working directory, so paths print as given.
//!
//! Cases that read a live cluster (`use_kube: true`) run against the real kube-apiserver test
//! environment: a namespace per case with `istio-injection=enabled`, the `applied` files applied with
//! kubectl, and the flags istio's integration test adds (`--use-kube=true`, `--namespace NS`,
//! `--suppress IST0139=*`, `--suppress "IST0002=CustomResourceDefinition *"`). The cluster has no
//! Istio installation and no pods; cases that depend on more are in [`KUBE_GAPS`] with the reason.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use kube_source::testenv::TestEnv;
use serde_json::Value;

/// Cluster cases that do not agree with istioctl's expectation: case name → reason. A listed case that
/// passes fails the test.
const KUBE_GAPS: &[(&str, &str)] = &[(
    "file + kube combined",
    "destinationrule.SubsetSelectPodAnalyzer (newer than this expectation) reports IST0173: no pod of \
     reviews runs in the test cluster, which has no kubelet",
)];

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/istio-testdata")
}

fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let doc =
        api::yaml::parse_documents(&text).into_iter().next().expect("one document").expect("valid YAML");
    doc.root.expect("not empty").to_json()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).map(String::from).collect()
}

/// Prepares the cluster for a `use_kube` case: a fresh namespace (two for
/// `applied_in_two_namespaces`) with injection enabled and the case's files applied. Returns the
/// namespace to analyze.
fn prepare_cluster(env: &TestEnv, index: usize, case: &Value, root: &Path) -> Result<String, String> {
    let ns = format!("analyze-cli-{index}");
    let mut namespaces = vec![ns.clone()];
    let mut files = strings(&case["applied"]);
    if case.get("applied_in_two_namespaces").is_some() {
        namespaces.push(format!("{ns}-b"));
        files = strings(&case["applied_in_two_namespaces"]);
    }
    for n in &namespaces {
        let _ = env.kubectl(&["create", "namespace", n]);
        env.kubectl(&["label", "namespace", n, "istio-injection=enabled", "--overwrite"])
            .map_err(|e| e.to_string())?;
        for f in &files {
            let path = root.join(f);
            env.kubectl(&["apply", "-n", n, "-f", &path.display().to_string()]).map_err(|e| e.to_string())?;
        }
    }
    Ok(ns)
}

/// Deletes what [`prepare_cluster`] applied (the test API server has no namespace controller, so the
/// objects are deleted one by one), so that later cases do not see them.
fn clean_cluster(env: &TestEnv, ns: &str, case: &Value, root: &Path) {
    let (namespaces, files) = match case.get("applied_in_two_namespaces") {
        Some(f) => (vec![ns.to_string(), format!("{ns}-b")], strings(f)),
        None => (vec![ns.to_string()], strings(&case["applied"])),
    };
    for n in &namespaces {
        for f in &files {
            let path = root.join(f);
            let _ =
                env.kubectl(&["delete", "-n", n, "--ignore-not-found", "-f", &path.display().to_string()]);
        }
    }
}

/// Runs one case; `Err` describes the disagreement.
fn run_case(case: &Value, root: &Path, cluster: Option<(&TestEnv, &str)>) -> Result<(), String> {
    let mut args = vec!["analyze".to_string()];
    if let Some((env, ns)) = cluster {
        args.extend([
            "--use-kube=true".to_string(),
            "--kubeconfig".to_string(),
            env.kubeconfig().display().to_string(),
            "--namespace".to_string(),
            ns.to_string(),
            "--suppress=IST0139=*".to_string(),
            "--suppress=IST0002=CustomResourceDefinition *".to_string(),
        ]);
        args.extend(strings(&case["files"]));
        args.extend(strings(&case["extra_args"]));
    } else if case.get("args").is_some() {
        args.extend(strings(&case["args"]));
    } else {
        args.push("--use-kube=false".into());
        args.extend(strings(&case["files"]));
        args.extend(strings(&case["extra_args"]));
    }
    let output = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
        .args(&args)
        .current_dir(root)
        .output()
        .map_err(|e| format!("running meshpilot: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let combined = format!("{stdout}{stderr}");
    let shown = format!("args {args:?}\n--- stdout\n{stdout}--- stderr\n{stderr}");
    let failed = !output.status.success();
    let want_error = case["want_error"].as_bool().unwrap_or(false);
    if case.get("want_error").is_some() && failed != want_error {
        return Err(format!("exit status {:?}, want_error {want_error}\n{shown}", output.status.code()));
    }
    if case["error"].as_str() == Some("FileParseError") && output.status.code() != Some(1) {
        return Err(format!("FileParseError exits 1, got {:?}\n{shown}", output.status.code()));
    }
    if want_error
        && case["error"].is_null()
        && case.get("expected_codes").is_some()
        && output.status.code() != Some(79)
    {
        return Err(format!("issues found exit 79, got {:?}\n{shown}", output.status.code()));
    }
    if let Some(codes) = case.get("expected_codes") {
        let codes = strings(codes);
        let lines: Vec<&str> = combined.trim().lines().collect();
        if codes.is_empty() {
            if lines.len() != 1 || !lines[0].contains("No validation issues found when analyzing") {
                return Err(format!("expected only the no-issues line\n{shown}"));
            }
        } else {
            // istioctl's integration check: one line per expected code, in order, then the boilerplate.
            let boilerplate = [
                "Analyzers found issues when analyzing",
                "for more information about causes and resolutions",
            ];
            if lines.len() != codes.len() + boilerplate.len() {
                return Err(format!("expected {} message lines and the boilerplate\n{shown}", codes.len()));
            }
            for (line, code) in lines.iter().zip(&codes) {
                if !line.contains(code.as_str()) {
                    return Err(format!("line {line:?} lacks {code}\n{shown}"));
                }
            }
            for (line, text) in lines[codes.len()..].iter().zip(boilerplate) {
                if !line.contains(text) {
                    return Err(format!("line {line:?} lacks {text:?}\n{shown}"));
                }
            }
        }
    }
    let given = strings(&case["files"]).first().cloned().unwrap_or_default();
    let mut substrings = strings(&case["expected_output_substrings"]);
    substrings.extend(case["expected_output_substring"].as_str().map(String::from));
    for s in substrings {
        let s = s.replace("<path as given on the command line>", &given);
        if !combined.contains(&s) {
            return Err(format!("output lacks {s:?}\n{shown}"));
        }
    }
    if let Some(expected) = case.get("expected_json") {
        let got: Value =
            serde_json::from_str(&stdout).map_err(|e| format!("stdout is not JSON: {e}\n{shown}"))?;
        let got: Vec<(String, String)> = got
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| (m["code"].as_str().unwrap_or("").into(), m["level"].as_str().unwrap_or("").into()))
            .collect();
        let want: Vec<(String, String)> = expected
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| (m["code"].as_str().unwrap_or("").into(), m["level"].as_str().unwrap_or("").into()))
            .collect();
        if got != want {
            return Err(format!("JSON messages {got:?}, want {want:?}\n{shown}"));
        }
    }
    Ok(())
}

#[test]
fn istioctl_analyze_cli_cases() {
    let root = testdata();
    let table = read_yaml(&root.join("_derived/analyze/istioctl-analyze-cli-cases.yaml"));
    let mut failures = Vec::new();
    let (mut passed, mut skipped) = (0, 0);
    for (index, case) in table["cases"].as_array().expect("cases").iter().enumerate() {
        let name = case["name"].as_str().unwrap_or_default();
        let gap = KUBE_GAPS.iter().find(|(n, _)| *n == name).map(|(_, r)| *r);
        let result = if case["use_kube"].as_bool() == Some(true) {
            let env = TestEnv::shared_by(file!());
            prepare_cluster(env, index, case, &root).and_then(|ns| {
                let result = run_case(case, &root, Some((env, &ns)));
                clean_cluster(env, &ns, case, &root);
                result
            })
        } else {
            run_case(case, &root, None)
        };
        match (result, gap) {
            (Ok(()), None) => {
                println!("pass  {name}");
                passed += 1;
            }
            (Ok(()), Some(reason)) => {
                println!("PASS! {name}: listed as a gap ({reason})");
                failures.push(format!("{name}: passes; remove it from KUBE_GAPS"));
            }
            (Err(e), Some(reason)) => {
                println!("gap   {name}: {reason}\n      {e}");
                skipped += 1;
            }
            (Err(e), None) => {
                println!("FAIL  {name}: {e}");
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    println!("{passed} passed, {} failed, {skipped} known gaps", failures.len());
    assert!(passed > 0, "no case ran");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Suppressions, thresholds and the analyzer list, on a VirtualService referencing a missing gateway.
#[test]
fn suppress_thresholds_and_listing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("vs.yaml");
    std::fs::write(
        &file,
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: r\n  namespace: ns\nspec:\n  hosts: [r]\n  gateways: [nope]\n  http:\n  - route:\n    - destination: {host: r}\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
            .arg("analyze")
            .args(extra)
            .arg(&file)
            .output()
            .expect("run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, stdout, _) = run(&["-A"]);
    assert_eq!(code, Some(79), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "Error [IST0101] (VirtualService ns/r {}:8) Referenced gateway not found: \"nope\"",
            file.display()
        )),
        "{stdout}"
    );
    // Another namespace hides the message.
    let (code, _, stderr) = run(&["-n", "other"]);
    assert_eq!(code, Some(0), "{stderr}");
    // A suppression with a glob drops it; a Warning threshold for output hides Info, not Errors.
    let (code, stdout, _) =
        run(&["-A", "-S", "IST0101=VirtualService ns/*", "-S", "IST0132=VirtualService *"]);
    assert_eq!(code, Some(0), "{stdout}");
    let (code, _, _) = run(&["-A", "--failure-threshold", "error", "--output-threshold", "WARNING"]);
    assert_eq!(code, Some(79));
    let list = Command::new(env!("CARGO_BIN_EXE_meshpilot")).args(["analyze", "-L"]).output().expect("run");
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.contains(
            "* virtualservice.GatewayAnalyzer:\n    Checks the gateways associated with each virtual service"
        ),
        "{list}"
    );
}
