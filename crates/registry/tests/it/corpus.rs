//! The ServiceEntries and WorkloadEntries of the shared Istio corpus load into the services and
//! endpoint counts their documents call for.
//!
//! The expectation is computed here, from the documents, with a deliberately plain re-statement of
//! the rules (every distinct host × namespace is a service; a host has, per port: one endpoint per
//! selected WorkloadEntry, or per usable inline endpoint, or itself when DNS-resolved without
//! either), and compared with the registry. A few files also get known numbers.

use crate::support;

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    path::Path,
};

use api::{Kind, Spec, networking::service_entry::Resolution as SeResolution};
use config::parse::{ParseOptions, config_files, parse_text};
use meshpilot_registry::{ServiceEntryIndex, ServiceEntryOptions, index_from_configs};
use model::{Config, RegistryEvent};
use support::*;

fn read_configs(files: &[impl AsRef<Path>]) -> Vec<Config> {
    let options = ParseOptions::default();
    let mut out = Vec::new();
    for file in files {
        let file = file.as_ref();
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for doc in parse_text(&file.display().to_string(), &text, &options) {
            if let Some(config) = doc.config
                && matches!(config.kind(), Kind::ServiceEntry | Kind::WorkloadEntry | Kind::WorkloadGroup)
            {
                out.push(config);
            }
        }
    }
    out
}

/// (hostname, namespace) → number of endpoints, from the documents.
fn expected(configs: &[Config]) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for se_config in configs {
        let Spec::ServiceEntry(se) = &se_config.spec else { continue };
        let ns = &se_config.meta.namespace;
        let ports = se.ports.len();
        let dns =
            se.resolution == SeResolution::Dns as i32 || se.resolution == SeResolution::DnsRoundRobin as i32;
        let hosts: BTreeSet<&String> = se.hosts.iter().collect();
        for host in hosts {
            let per_port = if let Some(selector) = &se.workload_selector {
                configs
                    .iter()
                    .filter(|c| c.meta.namespace == *ns)
                    .filter_map(|c| match &c.spec {
                        Spec::WorkloadEntry(we) => Some((c, we)),
                        _ => None,
                    })
                    .filter(|(c, we)| {
                        selector
                            .labels
                            .iter()
                            .all(|(k, v)| c.meta.labels.get(k).or_else(|| we.labels.get(k)) == Some(v))
                    })
                    .filter(|(_, we)| dns || we.address.parse::<IpAddr>().is_ok())
                    .count()
            } else if !se.endpoints.is_empty() {
                se.endpoints
                    .iter()
                    .filter(|e| {
                        se.resolution != SeResolution::Static as i32
                            || e.address.parse::<IpAddr>().is_ok()
                            || e.address.starts_with("unix://")
                    })
                    .count()
            } else {
                usize::from(dns)
            };
            *out.entry((host.clone(), ns.clone())).or_default() += per_port * ports;
        }
    }
    out
}

fn actual(index: &ServiceEntryIndex) -> BTreeMap<(String, String), usize> {
    index
        .services()
        .iter()
        .map(|s| {
            ((s.hostname.clone(), s.namespace.clone()), index.all_endpoints(&s.hostname, &s.namespace).len())
        })
        .collect()
}

fn check(name: &str, configs: &[Config]) -> ServiceEntryIndex {
    let (index, _) = index_from_configs(configs, ServiceEntryOptions::default());
    assert_eq!(actual(&index), expected(configs), "{name}");
    index
}

#[test]
fn tests_testdata_config_loads_as_one_folder() {
    let files = config_files(&corpus_root().join("tests/testdata/config")).unwrap();
    let configs = read_configs(&files);
    let index = check("tests/testdata/config", &configs);
    let got = actual(&index);
    assert_eq!(got.len(), 37, "services");
    assert_eq!(got.values().sum::<usize>(), 46, "endpoints");
    assert!(index.warnings().is_empty(), "{:?}", index.warnings());
    // Known values: the mongo cluster's two static endpoints, the DNS host endpoints.
    assert_eq!(got[&("mymongodb.somedomain".to_string(), "seexamples".to_string())], 2);
    assert_eq!(got[&("api.facebook.com".to_string(), "seexamples".to_string())], 1);
    assert_eq!(got[&("*.bar.com".to_string(), "seexamples".to_string())], 0);
    let mongo = index.get_service("mymongodb.somedomain", "seexamples").unwrap();
    assert_eq!(mongo.addresses, ["192.192.192.192/24"]);
}

#[test]
fn se_example_and_static_weighted_files() {
    let root = corpus_root().join("tests/testdata/config");
    let configs = read_configs(&[root.join("se-example.yaml")]);
    let index = check("se-example.yaml", &configs);
    let got = actual(&index);
    assert_eq!((got.len(), got.values().sum::<usize>()), (8, 10));
    // The Unix socket endpoint, and the DNS endpoints keeping their names and per-endpoint ports.
    let uds = index.endpoints("example.unix.local", "seexamples", 8001, None);
    assert_eq!((uds[0].first_address(), uds[0].endpoint_port), ("/var/run/example/socket", 0));
    let dns: Vec<(String, u32)> = index
        .endpoints("foo.bar.com", "seexamples", 8000, None)
        .iter()
        .map(|e| (e.first_address().to_string(), e.endpoint_port))
        .collect();
    assert_eq!(
        dns,
        [("us.foo.bar.com".into(), 8080), ("uk.foo.bar.com".into(), 9080), ("in.foo.bar.com".into(), 7080)]
    );

    let configs = read_configs(&[root.join("static-weighted-se.yaml")]);
    let index = check("static-weighted-se.yaml", &configs);
    let eps = index.endpoints("weighted.static.svc.cluster.local", "default", 80, None);
    let weights: Vec<(&str, u32, &str)> = eps
        .iter()
        .map(|e| (e.first_address(), e.load_balancing_weight(), e.locality.label.as_str()))
        .collect();
    assert_eq!(weights, [("3.3.3.3", 1, "a"), ("2.2.2.2", 8, "a"), ("1.1.1.1", 3, "b")]);
}

#[test]
fn samples_load_file_by_file() {
    let mut loaded = BTreeMap::new();
    for file in config_files(&corpus_root().join("samples")).unwrap() {
        let configs = read_configs(&[&file]);
        if configs.is_empty() {
            continue;
        }
        let name = file.strip_prefix(corpus_root()).unwrap().display().to_string();
        let index = check(&name, &configs);
        let got = actual(&index);
        loaded.insert(name, (got.len(), got.values().sum::<usize>()));
    }
    assert!(loaded.len() >= 4, "{loaded:?}");
    assert_eq!(loaded["samples/external/github.yaml"], (2, 0));
    assert_eq!(loaded["samples/extauthz/local-ext-authz.yaml"], (2, 2));
    assert_eq!(loaded["samples/bookinfo/networking/egress-rule-google-apis.yaml"], (1, 2));
}

fn benchmark_file() -> std::path::PathBuf {
    corpus_root().join("_derived/xds/benchmarks/rendered/serviceentry-workloadentry-s100-i1000.yaml")
}

#[test]
fn rendered_benchmark_workload_loads_100_services_with_10_workloads_each() {
    let configs = read_configs(&[benchmark_file()]);
    assert_eq!(configs.len(), 1101);
    let index = check("serviceentry-workloadentry-s100-i1000", &configs);
    let got = actual(&index);
    assert_eq!((got.len(), got.values().sum::<usize>()), (101, 4004));
    assert_eq!(
        got[&("random-7.host.example".to_string(), "default".to_string())],
        40,
        "10 WorkloadEntries × 4 ports"
    );
    assert!(index.warnings().is_empty(), "{:?}", index.warnings());
    // The proxy at 1.1.1.1 serves example.com's four ports.
    assert_eq!(index.proxy_instances(&["1.1.1.1".into()], Some("default")).len(), 4);
}

#[tokio::test]
async fn rendered_benchmark_workload_through_the_memory_store() {
    let h = Harness::start(read_configs(&[benchmark_file()])).await;
    let events = h.take_events();
    let count = |f: &dyn Fn(&RegistryEvent) -> bool| events.iter().filter(|e| f(e)).count();
    assert_eq!(count(&|e| matches!(e, RegistryEvent::Service(s) if s.event == model::Event::Add)), 101);
    // ServiceEntries are delivered first: each selecting service gets its endpoints one workload at a
    // time, the first one a full push (new shard), the nine others incremental.
    let full = count(&|e| matches!(e, RegistryEvent::Endpoints(u) if u.push == model::EndpointPush::Full));
    let incremental =
        count(&|e| matches!(e, RegistryEvent::Endpoints(u) if u.push == model::EndpointPush::Incremental));
    assert_eq!((full, incremental), (101, 900));
    assert_eq!(model::ServiceDiscovery::services(&h.registry).len(), 101);
}
