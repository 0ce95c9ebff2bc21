//! `meshpilot validate` against istioctl's command-line cases
//! (`_derived/validation/istioctl-validate/cases.yaml`, from istioctl's validate_test.go).
//!
//! The exit status must agree with istioctl for every case. Where istioctl's case checks its output,
//! we check that ours carries the same information (istioctl's exact layout has no file:line or field
//! path, which ours adds).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/istio-testdata")
}

fn meshpilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_meshpilot")).args(args).current_dir(testdata()).output().unwrap()
}

fn table() -> serde_json::Value {
    let text =
        std::fs::read_to_string(testdata().join("_derived/validation/istioctl-validate/cases.yaml")).unwrap();
    let docs = api::yaml::parse_documents(&text);
    docs[0].as_ref().unwrap().root.as_ref().unwrap().to_json()
}

/// What each of istioctl's `output_regexp`s asks for, said for meshpilot's layout.
fn expected_output(case: &str) -> Option<&'static str> {
    Some(match case {
        "valid Kubernetes YAML" => r#"(?m)^".*validKubernetesYAML.yaml" is valid$"#,
        "invalid top-level key" => r#"unknown field "unexpected_junk""#,
        "duplicate key" => r#"key ".*" already set"#,
        "warning" => concat!(
            r#"(?s)".*warning.yaml" has warnings: \n\t\* DestinationRule//reviews-cb-policy: outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead\n"#,
            r#".*Error: 1 error occurred:\n\t\* VirtualService//invalid-virtual-service: weight -15 < 0\n\t    at .*warning.yaml:\d+ \(document \d\) spec.http\[0\].route\[1\].weight"#
        ),
        _ => return None,
    })
}

#[test]
fn command_cases_agree_with_istioctl() {
    let table = table();
    let cases = table["command_cases"].as_array().unwrap();
    let mut failures = Vec::new();
    let mut agree = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut args = vec!["validate"];
        for f in case["filenames"].as_array().unwrap() {
            args.push("-f");
            args.push(f.as_str().unwrap());
        }
        if let Some(extra) = case["extra_args"].as_array() {
            args.extend(extra.iter().map(|a| a.as_str().unwrap()));
        }
        let out = meshpilot(&args);
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let want_error = case["want_error"].as_bool().unwrap();
        let mut ok = out.status.success() != want_error;
        if case["output_regexp"].is_string() {
            let re =
                regex::Regex::new(expected_output(name).expect("every output case is translated")).unwrap();
            ok &= re.is_match(&text);
        }
        if ok {
            agree += 1;
        } else {
            failures.push(format!("{name}: args {args:?} exit {:?}\n{text}", out.status.code()));
        }
    }
    println!("istioctl command cases: {agree}/{} agree", cases.len());
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n---\n"));
}

#[test]
fn exit_status_is_2_on_usage_errors() {
    assert_eq!(meshpilot(&["validate"]).status.code(), Some(2));
    assert_eq!(meshpilot(&["validate", "-f", "x.yaml", "extra"]).status.code(), Some(2));
    assert_eq!(meshpilot(&["validate", "-f", "x.yaml", "--output", "xml"]).status.code(), Some(2));
}

#[test]
fn json_output_has_one_record_per_document() {
    let out = meshpilot(&[
        "validate",
        "-o",
        "json",
        "-f",
        "_derived/validation/istioctl-validate/command-fixtures/files/invalid.yaml",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = records.as_array().unwrap();
    assert!(records.len() >= 2);
    let first = &records[0];
    for key in
        ["file", "index", "line", "apiVersion", "kind", "namespace", "name", "valid", "errors", "warnings"]
    {
        assert!(first.get(key).is_some(), "missing {key} in {first}");
    }
    assert_eq!(first["kind"], "VirtualService");
    assert_eq!(first["valid"], false);
    let err = &first["errors"][0];
    assert_eq!(err["path"], "spec.http[0].route[1].weight");
    assert!(err["message"].as_str().unwrap().contains("weight -15 < 0"), "{err}");
    assert!(err["line"].as_u64().unwrap() > 1);
}

#[test]
fn stdin_is_read_with_dash() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
        .args(["validate", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: g, namespace: ns}\nspec:\n  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("validation succeed: \"Gateway/ns/g\""));
}
