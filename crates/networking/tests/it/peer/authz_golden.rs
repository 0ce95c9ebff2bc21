//! Golden agreement with Istio's authorization builder
//! (`../shared/istio-testdata/_derived/authz/builder-cases.yaml`): each case's AuthorizationPolicies
//! are built with the case's mesh config, trust domain bundle and services, written as binary
//! protobuf, and compared as decoded protos with Istio's expected filters by
//! `scripts/authz-golden.py` (run with `.venv-grpc/bin/python`; `scripts/install-grpcio.sh` installs
//! it). Real Envoy (`envoy --mode validate`; `$ENVOY_BIN`, else `.venv-envoy/bin/envoy` from
//! `scripts/install-envoy.sh`) must accept the filters of every case in a listener.

use crate::support;

use std::{collections::BTreeMap, path::PathBuf, process::Command, sync::Arc};

use api::{Kind, spec::Spec};
use envoy_types::pb::{
    envoy::{
        config::{
            bootstrap::v3::{Bootstrap, bootstrap::StaticResources},
            cluster::v3::{Cluster, cluster::ClusterDiscoveryType, cluster::DiscoveryType},
            core::v3::{Address, Http2ProtocolOptions, SocketAddress, address, socket_address},
            listener::v3::{Filter, FilterChain, Listener, filter},
            route::v3::RouteConfiguration,
        },
        extensions::filters::{
            http::router::v3::Router,
            network::{
                http_connection_manager::v3::{
                    HttpConnectionManager, HttpFilter, http_connection_manager::RouteSpecifier, http_filter,
                },
                tcp_proxy::v3::{TcpProxy, tcp_proxy::ClusterSpecifier},
            },
        },
    },
    google::protobuf::Any,
};
use meshpilot_networking::authz::{AuthzContext, build_http, build_tcp};
use model::{
    Config,
    push::extension_provider::{ExtensionProvider, parse_extension_providers},
    service::{ProviderId, Resolution, Service},
};
use prost::{Message, Name};
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
        external_name: None,
        aliases: Vec::new(),
        auto_allocated: Vec::new(),
        traffic_distribution: Default::default(),
        cluster_external_addresses: Default::default(),
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
    http: Vec<HttpFilter>,
    tcp: Vec<Filter>,
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
            http: vec![],
            tcp: out.filters,
            findings: out.findings,
        }
    } else {
        let out = build_http(&policies, &ctx);
        Built {
            kind: "http",
            filters: out.filters.iter().map(Message::encode_to_vec).collect(),
            http: out.filters,
            tcp: vec![],
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

fn any<T: Message + Name>(m: &T) -> Any {
    Any { type_url: T::type_url(), value: m.encode_to_vec() }
}

fn envoy_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("ENVOY_BIN") {
        return PathBuf::from(bin);
    }
    let bin = support::repo().join(".venv-envoy/bin/envoy");
    assert!(
        bin.exists(),
        "Envoy not found at {} and ENVOY_BIN is not set: run scripts/install-envoy.sh",
        bin.display()
    );
    bin
}

fn static_cluster(name: &str, http2: bool) -> Cluster {
    #[allow(deprecated)] // the plain field is enough for validation
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        http2_protocol_options: http2.then(Http2ProtocolOptions::default),
        ..Default::default()
    }
}

/// Every case's filters in a listener of one static bootstrap (HTTP: before the router in an HTTP
/// connection manager; TCP: before a TCP proxy), which `envoy --mode validate` must accept.
#[test]
fn envoy_accepts_the_filters_of_every_case() {
    let all = load_cases();
    let mut listeners = Vec::new();
    for (i, case) in all["cases"].as_array().unwrap().iter().enumerate() {
        let built = build_case(&all, case);
        let name = format!("{}/{}", built.kind, case["name"].as_str().unwrap());
        let filters = if built.kind == "http" {
            let mut http_filters = built.http;
            http_filters.push(HttpFilter {
                name: "envoy.filters.http.router".into(),
                config_type: Some(http_filter::ConfigType::TypedConfig(any(&Router::default()))),
                ..Default::default()
            });
            let hcm = HttpConnectionManager {
                stat_prefix: format!("case{i}"),
                route_specifier: Some(RouteSpecifier::RouteConfig(RouteConfiguration {
                    name: "local".into(),
                    ..Default::default()
                })),
                http_filters,
                ..Default::default()
            };
            vec![Filter {
                name: "envoy.filters.network.http_connection_manager".into(),
                config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
            }]
        } else {
            let mut filters = built.tcp;
            let proxy = TcpProxy {
                stat_prefix: format!("case{i}"),
                cluster_specifier: Some(ClusterSpecifier::Cluster("blackhole".into())),
                ..Default::default()
            };
            filters.push(Filter {
                name: "envoy.filters.network.tcp_proxy".into(),
                config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))),
            });
            filters
        };
        listeners.push(Listener {
            name,
            address: Some(Address {
                address: Some(address::Address::SocketAddress(SocketAddress {
                    address: "127.0.0.1".into(),
                    port_specifier: Some(socket_address::PortSpecifier::PortValue(20000 + i as u32)),
                    ..Default::default()
                })),
            }),
            filter_chains: vec![FilterChain { filters, ..Default::default() }],
            ..Default::default()
        });
    }
    let bootstrap = Bootstrap {
        static_resources: Some(StaticResources {
            listeners,
            clusters: vec![
                static_cluster("blackhole", false),
                static_cluster("outbound|9000||my-custom-ext-authz.foo.svc.cluster.local", true),
            ],
            ..Default::default()
        }),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("authz.pb");
    std::fs::write(&path, bootstrap.encode_to_vec()).unwrap();
    let out = Command::new(envoy_bin())
        .args(["--mode", "validate", "--log-level", "warn", "-c"])
        .arg(&path)
        .output()
        .expect("run envoy");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("OK"), "envoy rejected the authorization filters:\n{text}");
}
