//! `meshpilot kube-inject` against the real `istioctl kube-inject` of the pinned Istio version, over
//! every injection test input of that version (`pkg/kube/inject/testdata/inject/*.yaml`), both with
//! the injector config, values and mesh config that Istio's charts render by default (taken from
//! `istioctl manifest generate`, the ConfigMaps `istio-sidecar-injector` and `istio`).
//!
//! istioctl watches MutatingWebhookConfigurations even when given every file, so it is pointed at
//! the test kube-apiserver (scripts/kube-testenv.sh).
//!
//! Outputs are compared as data after a normalisation both sides get: documents parsed, nulls and
//! empty maps and lists dropped (Go's typed round trip writes some, `omitempty` drops others). An
//! input on which one side fails must fail on the other too. The inputs that still differ are listed
//! in [`KNOWN_DIFFERENCES`] with the reason; the test fails when one of them starts to agree, so the
//! list stays true.

use std::{collections::BTreeMap, path::Path, process::Command};

use kube_source::testenv::TestEnv;
use serde_json::Value;

use crate::istio_peer::{self, first_difference, normalize};

/// Inputs on which meshpilot and istioctl still disagree, and why.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

/// Writes the chart's injector config, values and mesh config (istioctl's default install) into `dir`.
fn chart_settings(dir: &Path) {
    let out = Command::new(istio_peer::istioctl()).args(["manifest", "generate"]).output().unwrap();
    assert!(out.status.success(), "istioctl manifest generate: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut found = 0;
    for doc in api::yaml::parse_documents(&text) {
        let Some(root) = doc.unwrap().root else { continue };
        let object = root.to_json();
        if object["kind"] != "ConfigMap" {
            continue;
        }
        let data = &object["data"];
        match object["metadata"]["name"].as_str() {
            Some("istio-sidecar-injector") => {
                std::fs::write(dir.join("config"), data["config"].as_str().unwrap()).unwrap();
                std::fs::write(dir.join("values"), data["values"].as_str().unwrap()).unwrap();
                found += 1;
            }
            Some("istio") => {
                std::fs::write(dir.join("mesh"), data["mesh"].as_str().unwrap()).unwrap();
                found += 1;
            }
            _ => {}
        }
    }
    assert_eq!(found, 2, "the manifest has the ConfigMaps istio-sidecar-injector and istio");
}

fn documents(text: &str) -> Vec<Value> {
    api::yaml::parse_documents(text)
        .into_iter()
        .filter_map(|d| d.unwrap().root.map(|r| r.to_json()))
        .filter_map(normalize)
        .collect()
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn run(command: &mut Command) -> Run {
    let out = command.output().unwrap();
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn kube_inject_gives_what_istioctl_gives_on_istios_injection_inputs() {
    let env = TestEnv::shared_by(file!());
    let settings = tempfile::tempdir().unwrap();
    chart_settings(settings.path());
    let files = |name: &str| settings.path().join(name);
    let inputs = istio_peer::injection_inputs();

    let mut differences = BTreeMap::new();
    for input in &inputs {
        let name = input.file_name().unwrap().to_string_lossy().into_owned();
        let common = |c: &mut Command| {
            c.arg("kube-inject")
                .arg("-f")
                .arg(input)
                .arg("--injectConfigFile")
                .arg(files("config"))
                .arg("--valuesFile")
                .arg(files("values"))
                .arg("--meshConfigFile")
                .arg(files("mesh"));
        };
        let mut ours = Command::new(env!("CARGO_BIN_EXE_meshpilot"));
        common(&mut ours);
        let mut theirs = Command::new(istio_peer::istioctl());
        common(&mut theirs);
        theirs.arg("--kubeconfig").arg(env.kubeconfig());
        let (ours, theirs) = (run(&mut ours), run(&mut theirs));
        let difference = match (ours.ok, theirs.ok) {
            (true, true) => {
                let (a, b) = (documents(&ours.stdout), documents(&theirs.stdout));
                if a.len() != b.len() {
                    Some(format!("{} documents, istioctl {}", a.len(), b.len()))
                } else {
                    a.iter()
                        .zip(&b)
                        .enumerate()
                        .find_map(|(i, (x, y))| first_difference(x, y, format!("[{i}]")))
                }
            }
            (false, false) => None,
            (true, false) => Some(format!("istioctl fails ({}), meshpilot injects", theirs.stderr.trim())),
            (false, true) => Some(format!("meshpilot fails ({}), istioctl injects", ours.stderr.trim())),
        };
        if let Some(d) = difference {
            differences.insert(name, d);
        }
    }

    istio_peer::assert_known_differences("istioctl", &differences, KNOWN_DIFFERENCES, inputs.len());
}
