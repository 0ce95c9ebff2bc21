//! Golden agreement with Istio's authorization builder
//! (`../shared/istio-testdata/_derived/authz/builder-cases.yaml`): each case's AuthorizationPolicies
//! are built with the case's mesh config, trust domain bundle and services, written as binary
//! protobuf, and compared as decoded protos with Istio's expected filters by
//! `scripts/authz-golden.py` (run with `.venv-grpc/bin/python`; `scripts/install-grpcio.sh` installs
//! it).

mod support;

use std::{collections::BTreeMap, path::PathBuf, process::Command, sync::Arc};

use api::{Kind, spec::Spec};
use meshpilot_networking::authz::{AuthzContext, build_http, build_tcp};
use model::{
    Config,
    push::extension_provider::{ExtensionProvider, parse_extension_providers},
    service::{ProviderId, Resolution, Service},
};
use prost::Message;
use serde_json::Value;

/// Cases where meshpilot deliberately differs from Istio (fail closed), with the reason. Each is
/// checked for our own behaviour in `deliberate_differences` instead of the golden.
const DELIBERATE_DIFFERENCES: &[(&str, &str)] = &[];

fn cases_file() -> PathBuf {
    support::corpus().join("_derived/authz/builder-cases.yaml")
}

fn load_cases() -> Value {
    let text = std::fs::read_to_string(cases_file()).expect("builder-cases.yaml");
    let docs = api::yaml::parse_documents(&text);
    let doc = docs.into_iter().next().expect("one document").expect("valid YAML");
    doc.root.expect("non-empty document").to_json()
}

fn service(host: &str, ns: &str) -> Arc<Service> {
    Arc::new(Service {
        hostname: host.into(),
        namespace: ns.into(),
        name: host.into(),
        object_name: host.into(),
        registry: ProviderId::Kubernetes,
        ports: vec![],
        addresses: vec![],
        resolution: Resolution::ClientSideLb,
        mesh_external: false,
        export_to: Default::default(),
        labels: Default::default(),
        label_selector: None,
        service_accounts: vec![],
        creation_time: None,
        passthrough_target_ports: Default::default(),
    })
}

/// The AuthorizationPolicies of `configs` that select the case's proxy (namespace `foo`, labels
/// `app: httpbin, version: v1`), root namespace first, in file order.
fn select(configs: Vec<Config>, proxy: &Value) -> Vec<Arc<Config>> {
    let ns = proxy["namespace"].as_str().unwrap_or("foo");
    let labels: BTreeMap<String, String> =
        serde_json::from_value(proxy["labels"].clone()).unwrap_or_default();
    let mut out: Vec<Arc<Config>> = configs
        .into_iter()
        .filter(|c| c.kind() == Kind::AuthorizationPolicy)
        .filter(|c| c.meta.namespace == ns || c.meta.namespace == "istio-system")
        .filter(|c| match &c.spec {
            Spec::AuthorizationPolicy(p) => p
                .selector
                .as_ref()
                .is_none_or(|s| s.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))),
            _ => false,
        })
        .map(Arc::new)
        .collect();
    out.sort_by_key(|c| c.meta.namespace != "istio-system");
    out
}

struct Built {
    kind: &'static str,
    filters: Vec<Vec<u8>>,
    findings: Vec<model::Finding>,
}

fn build_case(all: &Value, case: &Value) -> Built {
    let corpus = support::corpus();
    let input = corpus.join(case["input"].as_str().unwrap());
    let policies = select(support::parse_file(&input, "foo"), &all["proxy"]);
    let providers: Vec<ExtensionProvider> = match case["meshConfig"].as_str() {
        Some(name) => parse_extension_providers(&all["meshConfigs"][name]["extensionProviders"])
            .unwrap_or_else(|e| panic!("meshConfig {name}: {e}")),
        None => vec![],
    };
    let services: Vec<Arc<Service>> = all["known_services"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| service(s["hostname"].as_str().unwrap(), s["namespace"].as_str().unwrap()))
        .collect();
    let bundle = &case["trustDomainBundle"];
    let trust_domain = bundle["trustDomain"].as_str().unwrap_or("cluster.local").to_string();
    let aliases: Vec<String> = serde_json::from_value(bundle["aliases"].clone()).unwrap_or_default();
    let ctx = AuthzContext {
        trust_domain: &trust_domain,
        trust_domain_aliases: &aliases,
        providers: &providers,
        services: &services,
        is_gateway: false,
    };
    if case["generator"].as_str().unwrap().starts_with("BuildTCP") {
        let out = build_tcp(&policies, &ctx);
        Built {
            kind: "tcp",
            filters: out.filters.iter().map(Message::encode_to_vec).collect(),
            findings: out.findings,
        }
    } else {
        let out = build_http(&policies, &ctx);
        Built {
            kind: "http",
            filters: out.filters.iter().map(Message::encode_to_vec).collect(),
            findings: out.findings,
        }
    }
}

fn python() -> PathBuf {
    let py = support::repo().join(".venv-grpc/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run scripts/install-grpcio.sh (installs grpcio, xds-protos and PyYAML into .venv-grpc)",
        py.display()
    );
    py
}

#[test]
fn builder_goldens_agree_with_istio() {
    let all = load_cases();
    let cases = all["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 20, "builder-cases.yaml changed: {} cases", cases.len());
    let dir = tempfile::tempdir().unwrap();
    let mut manifest = serde_json::Map::new();
    for case in cases {
        let built = build_case(&all, case);
        let name = format!("{}/{}", built.kind, case["name"].as_str().unwrap());
        if DELIBERATE_DIFFERENCES.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let mut got = Vec::new();
        for (i, bytes) in built.filters.iter().enumerate() {
            let path = dir.path().join(format!("{}-{i}.bin", name.replace('/', "_")));
            std::fs::write(&path, bytes).unwrap();
            got.push(Value::String(path.display().to_string()));
        }
        let want: Vec<Value> = case["want"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| Value::String(support::corpus().join(w.as_str().unwrap()).display().to_string()))
            .collect();
        manifest.insert(name, serde_json::json!({"type": built.kind, "want": want, "got": got}));
    }
    let manifest_path = dir.path().join("manifest.json");
    std::fs::write(&manifest_path, serde_json::to_vec_pretty(&Value::Object(manifest)).unwrap()).unwrap();
    let out = Command::new(python())
        .arg(support::repo().join("scripts/authz-golden.py"))
        .arg(&manifest_path)
        .output()
        .expect("run scripts/authz-golden.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "golden mismatch: see the script's output above");
}

/// Every golden case whose policies Istio translates without skipping anything yields no
/// fail-closed finding; the custom-bad case reports its provider and the TCP cases their dropped
/// HTTP-only fields.
#[test]
fn golden_case_findings() {
    let all = load_cases();
    for case in all["cases"].as_array().unwrap() {
        let built = build_case(&all, case);
        let name = format!("{}/{}", built.kind, case["name"].as_str().unwrap());
        let messages: Vec<String> = built.findings.iter().map(ToString::to_string).collect();
        assert!(
            !messages.iter().any(|m| m.contains("fail closed")),
            "{name}: unexpected fail-closed finding: {messages:#?}"
        );
        match name.as_str() {
            "http/custom-bad-invalid-config" => {
                assert!(
                    messages.iter().any(|m| m.contains("port must be in the range")),
                    "{name}: {messages:#?}"
                )
            }
            "tcp/allow-only-http" | "tcp/deny-both-http-tcp" | "tcp/allow-both-http-tcp" => {
                assert!(messages.iter().any(|m| m.contains("HTTP-only field")), "{name}: {messages:#?}")
            }
            "tcp/custom-only-http" => {
                assert!(
                    messages.iter().any(|m| m.contains("ignored on a TCP filter chain")),
                    "{name}: {messages:#?}"
                )
            }
            _ if name.starts_with("http/") => assert!(messages.is_empty(), "{name}: {messages:#?}"),
            _ => {}
        }
    }
}
