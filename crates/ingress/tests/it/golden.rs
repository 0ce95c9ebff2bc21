//! Golden agreement with Istio's Ingress conversion (`pilot/pkg/config/kube/ingress/conversion_test.go`
//! `TestGoldenConversion`, cases listed in `../shared/istio-testdata/_derived/ingress/conversion-cases.yaml`).
//!
//! The comparison is semantic: the set of generated objects (kind, namespace, name), and per object
//! its annotations and typed spec, against the golden YAML read with meshpilot's own reader. As in the
//! Istio test, the mesh config sets only `ingressControllerMode: DEFAULT` (so `ingressClass` and
//! `ingressService` are empty) and the domain suffix is `mydomain`.

use std::{collections::BTreeMap, path::PathBuf};

use config::parse::{ParseOptions, parse_text};
use meshpilot_ingress::{
    Ingress, IngressClass, IngressControllerMode, IngressSettings, ServicePorts, convert,
};

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/istio-testdata")
}

fn documents(text: &str) -> Vec<serde_json::Value> {
    api::yaml::parse_documents(text)
        .into_iter()
        .map(|d| d.expect("readable YAML"))
        .filter_map(|d| d.root.map(|r| r.to_json()))
        .collect()
}

/// `(kind/namespace/name, annotations, spec as JSON)` of each object, sorted.
type Objects = BTreeMap<String, (BTreeMap<String, String>, serde_json::Value)>;

fn objects(configs: impl IntoIterator<Item = model::Config>) -> Objects {
    configs
        .into_iter()
        .map(|c| {
            let json = c.to_json();
            (
                format!("{}/{}/{}", c.kind(), c.meta.namespace, c.meta.name),
                (c.meta.annotations.clone(), json["spec"].clone()),
            )
        })
        .collect()
}

#[test]
fn conversion_cases_match_istio_goldens() {
    let root = testdata();
    let cases_text = std::fs::read_to_string(root.join("_derived/ingress/conversion-cases.yaml")).unwrap();
    let cases = documents(&cases_text).remove(0);
    let domain = cases["domain_suffix"].as_str().unwrap().to_string();
    let settings = IngressSettings {
        mode: IngressControllerMode::Default,
        ingress_class: String::new(),
        ingress_service: String::new(),
        ..IngressSettings::default()
    };
    let mut checked = 0;
    for case in cases["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let input = std::fs::read_to_string(root.join(case["input"].as_str().unwrap())).unwrap();
        let mut ingresses = Vec::new();
        let mut classes = BTreeMap::new();
        for doc in documents(&input) {
            match doc["kind"].as_str() {
                Some("Ingress") => ingresses.push(Ingress::from_json(&doc).unwrap()),
                Some("IngressClass") => {
                    let c = IngressClass::from_json(&doc).unwrap();
                    classes.insert(c.metadata.name.clone(), c);
                }
                other => panic!("{name}: unexpected kind {other:?}"),
            }
        }
        let got = convert(&ingresses, &classes, &ServicePorts::new(), &settings, &domain);
        let golden = std::fs::read_to_string(root.join(case["want"].as_str().unwrap())).unwrap();
        let options = ParseOptions { domain_suffix: domain.clone(), ..ParseOptions::default() };
        let want: Vec<model::Config> = parse_text("golden", &golden, &options)
            .into_iter()
            .map(|d| {
                d.config.unwrap_or_else(|| {
                    panic!("{name}: golden document {} unreadable: {:?}", d.index, d.errors)
                })
            })
            .collect();
        let (got, want) = (objects(got.configs), objects(want));
        assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{name}: objects");
        for (key, (annotations, spec)) in &want {
            assert_eq!(&got[key].0, annotations, "{name}: {key} annotations");
            assert_eq!(&got[key].1, spec, "{name}: {key} spec");
        }
        checked += 1;
    }
    assert_eq!(checked, 3);
}
