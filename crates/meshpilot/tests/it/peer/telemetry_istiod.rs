//! Differential against real istiod (issue 40): Istio's telemetry filters for a sidecar and a gateway
//! that claim istio-proxy's extensions in `node.extensions`. istiod (`--configDir`, the pinned build of
//! `scripts/istio-peer.sh`) and the real `meshpilot discovery` binary read the same config directory
//! (ServiceEntries, a Sidecar with HTTP and TCP ingress ports, a Gateway, Telemetries with `metrics`
//! overrides at root and workload level) and mesh config (`defaultProviders.metrics: [prometheus]`);
//! the conformance harness' ADS client fetches both sides' LDS for the same nodes.
//!
//! Compared, per listener and filter chain present on both sides: the sequence of Istio's telemetry
//! filters among the chain's network filters and its connection manager's HTTP filters — each
//! `istio.stats` with its decoded `stats.PluginConfig`, each `istio.metadata_exchange` with its
//! `TypedStruct` (type URL and fields), and the `tcp_proxy` / router they must precede — after
//! normalisation (configs decoded; everything else in the chains left out: those are compared by the
//! conformance test). Differences not in [`KNOWN_DIFFERENCES`] fail the test; those in it are listed
//! in docs/TELEMETRY.md with the reason.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    time::Duration,
};

use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{Extension, Node},
            listener::v3::{Listener, filter},
        },
        extensions::filters::network::http_connection_manager::v3::{HttpConnectionManager, http_filter},
    },
    google::protobuf::{Any, Struct, Value as PbValue, value::Kind},
};
use kube_source::testenv::TestEnv;
use networking::stats::{PluginConfig, STATS_CONFIG_TYPE_URL, TYPED_STRUCT_TYPE_URL, TypedStruct};
use prost::Message;

use super::conformance::{
    Meshpilot,
    ads::{Client, Fetched, XdsType, fetch},
    node as conformance_node,
    scenarios::ProxySpec,
};
use crate::istio_peer::Istiod;

const MESH: &str =
    "trustDomain: cluster.local\nrootNamespace: istio-config\ndefaultProviders:\n  metrics: [prometheus]\n";

const CONFIG: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: tel}
spec:
  hosts: [web.tel.svc.cluster.local]
  addresses: [10.201.1.1]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.202.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: tel}
spec:
  hosts: [db.tel.svc.cluster.local]
  addresses: [10.201.1.2]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.202.0.2}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: app, namespace: tel}
spec:
  workloadSelector: {labels: {app: app}}
  ingress:
  - port: {number: 9080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
  - port: {number: 9090, protocol: TCP, name: tcp}
    defaultEndpoint: 127.0.0.1:8090
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-config}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-config}
spec:
  metrics:
  - providers: [{name: prometheus}]
    reportingInterval: 15s
    overrides:
    - match: {metric: REQUEST_COUNT, mode: SERVER}
      tagOverrides:
        request_host: {value: request.host}
        source_app: {operation: REMOVE}
    - match: {metric: TCP_SENT_BYTES}
      disabled: true
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: app, namespace: tel}
spec:
  selector: {matchLabels: {app: app}}
  metrics:
  - overrides:
    - match: {customMetric: my_metric, mode: CLIENT}
      tagOverrides:
        my_tag: {value: "'x'"}
    - match: {metric: REQUEST_DURATION, mode: CLIENT}
      disabled: true
"#;

/// A difference accepted with its reason: the listener/chain key prefix and the reason
/// (docs/TELEMETRY.md, "Differences from istiod").
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[(
    "sidecar 0.0.0.0_80: only istiod: [\"istio.stats",
    "not a telemetry difference: istiod's outbound HTTP listener has a TCP passthrough chain \
     (`PassthroughFilterChain`, stats + tcp_proxy to PassthroughCluster) that meshpilot's listener does not \
     have; the stats config on it is the same as on meshpilot's other outbound TCP chains",
)];

/// The proxies compared.
const PROXIES: &[ProxySpec] = &[
    ProxySpec {
        label: "sidecar",
        node_type: "sidecar",
        name: "app-1",
        namespace: "tel",
        ip: "10.203.0.1",
        labels: &[("app", "app")],
        metadata: &[],
    },
    ProxySpec {
        label: "router",
        node_type: "router",
        name: "ingress-1",
        namespace: "istio-config",
        ip: "10.203.0.2",
        labels: &[("istio", "ingressgateway")],
        metadata: &[],
    },
];

/// istio-proxy's telemetry extensions as it lists them in `node.extensions`.
fn istio_extensions() -> Vec<Extension> {
    let ext = |name: &str, category: &str, t: &str| Extension {
        name: name.into(),
        category: category.into(),
        type_urls: vec![t.into()],
        ..Default::default()
    };
    vec![
        ext("envoy.filters.http.istio_stats", "envoy.filters.http", "stats.PluginConfig"),
        ext("envoy.filters.network.istio_stats", "envoy.filters.network", "stats.PluginConfig"),
        ext("envoy.filters.http.peer_metadata", "envoy.filters.http", "io.istio.http.peer_metadata.Config"),
        ext(
            "envoy.filters.network.metadata_exchange",
            "envoy.filters.network",
            "envoy.tcp.metadataexchange.config.MetadataExchange",
        ),
        ext(
            "envoy.filters.network.metadata_exchange",
            "envoy.filters.upstream_network",
            "envoy.tcp.metadataexchange.config.MetadataExchange",
        ),
        ext(
            "envoy.filters.http.router",
            "envoy.filters.http",
            "envoy.extensions.filters.http.router.v3.Router",
        ),
    ]
}

/// The node of a proxy as pilot-agent writes it (the conformance harness' node), claiming istio-proxy's
/// extensions.
fn node(spec: &ProxySpec) -> Node {
    let mut n = conformance_node(spec);
    n.user_agent_name = "envoy".into();
    n.extensions = istio_extensions();
    n
}

fn struct_json(s: &Struct) -> serde_json::Value {
    let sorted: BTreeMap<&String, &PbValue> = s.fields.iter().collect();
    serde_json::Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), value_json(v))).collect())
}

fn value_json(v: &PbValue) -> serde_json::Value {
    use serde_json::Value as J;
    match &v.kind {
        Some(Kind::StringValue(s)) => J::String(s.clone()),
        Some(Kind::BoolValue(b)) => J::Bool(*b),
        Some(Kind::NumberValue(n)) => serde_json::json!(n),
        Some(Kind::StructValue(s)) => struct_json(s),
        Some(Kind::ListValue(l)) => J::Array(l.values.iter().map(value_json).collect()),
        Some(Kind::NullValue(_)) | None => J::Null,
    }
}

/// A telemetry filter's config, normalised: a stats config decoded (its `Debug` form: fields by
/// name, maps sorted), a `TypedStruct` as its type URL and JSON.
fn config_of(any: &Any) -> String {
    if any.type_url == STATS_CONFIG_TYPE_URL {
        match PluginConfig::decode(any.value.as_slice()) {
            Ok(c) => format!("{c:?}"),
            Err(e) => format!("undecodable stats config: {e}"),
        }
    } else if any.type_url == TYPED_STRUCT_TYPE_URL {
        match TypedStruct::decode(any.value.as_slice()) {
            Ok(t) => format!("{} {}", t.type_url, t.value.as_ref().map(struct_json).unwrap_or_default()),
            Err(e) => format!("undecodable TypedStruct: {e}"),
        }
    } else {
        any.type_url.clone()
    }
}

const TELEMETRY: &[&str] = &["istio.stats", "istio.metadata_exchange"];

/// The telemetry signatures of every listener: listener name → the distinct sequences of telemetry
/// filters (with configs) and the terminal filters they precede, over its filter chains (chain names
/// are left out: istiod leaves many empty and names its catch-all chains its own way).
fn signatures(listeners: &BTreeMap<String, Any>) -> BTreeMap<String, BTreeSet<Vec<String>>> {
    let mut out: BTreeMap<String, BTreeSet<Vec<String>>> = BTreeMap::new();
    for any in listeners.values() {
        let l = Listener::decode(any.value.as_slice()).unwrap();
        for c in l.filter_chains.iter().chain(&l.default_filter_chain) {
            let mut sig = Vec::new();
            for f in &c.filters {
                let Some(filter::ConfigType::TypedConfig(cfg)) = &f.config_type else { continue };
                if TELEMETRY.contains(&f.name.as_str()) {
                    sig.push(format!("{} {}", f.name, config_of(cfg)));
                } else if f.name == "envoy.filters.network.tcp_proxy" {
                    sig.push("tcp_proxy".to_string());
                } else if f.name == "envoy.filters.network.http_connection_manager" {
                    let hcm = HttpConnectionManager::decode(cfg.value.as_slice()).unwrap();
                    for h in &hcm.http_filters {
                        let Some(http_filter::ConfigType::TypedConfig(hc)) = &h.config_type else { continue };
                        if TELEMETRY.contains(&h.name.as_str()) {
                            sig.push(format!("http {} {}", h.name, config_of(hc)));
                        } else if h.name == "envoy.filters.http.router" {
                            sig.push("http router".to_string());
                        }
                    }
                }
            }
            out.entry(l.name.clone()).or_default().insert(sig);
        }
    }
    out
}

/// The cluster filters of every cluster: name → `filter config` lines.
fn cluster_filters(clusters: &BTreeMap<String, Any>) -> BTreeMap<String, Vec<String>> {
    clusters
        .iter()
        .map(|(name, any)| {
            let c =
                envoy_types::pb::envoy::config::cluster::v3::Cluster::decode(any.value.as_slice()).unwrap();
            let filters = c
                .filters
                .iter()
                .map(|f| format!("{} {}", f.name, f.typed_config.as_ref().map(config_of).unwrap_or_default()))
                .collect();
            (name.clone(), filters)
        })
        .collect()
}

async fn fetch_all(addr: std::net::SocketAddr, node: Node, side: &str, log: &Path) -> Fetched {
    fetch(addr, node, Duration::from_secs(60), Client::Envoy { nds: false })
        .await
        .unwrap_or_else(|e| panic!("{side}: {e}\n{}", std::fs::read_to_string(log).unwrap_or_default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_filters_equal_istiods_for_istio_proxy() {
    let env = TestEnv::shared_by(file!());
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.yaml"), CONFIG).unwrap();
    let _ = env.kubectl(&["create", "namespace", "istio-config"]);
    let kubeconfig = env.kubeconfig();
    let istiod_dir = work.path().join("istiod");
    std::fs::create_dir_all(&istiod_dir).unwrap();
    std::fs::write(istiod_dir.join("mesh.yaml"), MESH).unwrap();
    let istiod = Istiod::start_with_env(
        &istiod_dir,
        &kubeconfig,
        &format!("--configDir {}", config.display()),
        &[("PILOT_MAX_REQUESTS_PER_SECOND", "1000")],
    );
    let mp = Meshpilot::start_with_mesh(work.path(), &config, &kubeconfig, MESH).await;

    let mut differences = Vec::new();
    let mut compared = 0;
    let mut with_telemetry = 0;
    for spec in PROXIES {
        let (label, node_type) = (spec.label, spec.node_type);
        let n = node(spec);
        // Both sides read the directory on start; wait until each serves the config (a listener per
        // expected port), then compare.
        let want = if node_type == "router" { "0.0.0.0_8080" } else { "virtualInbound" };
        let mut theirs = Fetched::default();
        let mut ours = Fetched::default();
        for _ in 0..60 {
            theirs = fetch_all(istiod.xds(), n.clone(), "istiod", &istiod.log_path()).await;
            ours = fetch_all(mp.grpc, n.clone(), "meshpilot", &mp.log).await;
            let has = |f: &Fetched| f.resources.get(&XdsType::Lds).is_some_and(|l| l.contains_key(want));
            if has(&theirs) && has(&ours) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let of = |f: &Fetched, t: XdsType| f.resources.get(&t).cloned().unwrap_or_default();
        let (ca, cb) =
            (cluster_filters(&of(&theirs, XdsType::Cds)), cluster_filters(&of(&ours, XdsType::Cds)));
        for (name, filters) in &ca {
            match cb.get(name) {
                Some(mine) if mine == filters => {
                    compared += 1;
                    if !filters.is_empty() {
                        with_telemetry += 1;
                    }
                }
                Some(mine) => differences.push(format!(
                    "{label} cluster {name}:\n  istiod:    {filters:?}\n  meshpilot: {mine:?}"
                )),
                None => {}
            }
        }
        let (theirs, ours) = (of(&theirs, XdsType::Lds), of(&ours, XdsType::Lds));
        let (a, b) = (signatures(&theirs), signatures(&ours));
        for (key, sig) in &a {
            let Some(mine) = b.get(key) else {
                continue;
            };
            compared += sig.len();
            with_telemetry += sig.iter().filter(|s| s.iter().any(|f| f.contains("istio."))).count();
            for only in sig.difference(mine) {
                differences.push(format!("{label} {key}: only istiod: {only:?}"));
            }
            for only in mine.difference(sig) {
                differences.push(format!("{label} {key}: only meshpilot: {only:?}"));
            }
        }
    }
    let unexplained: Vec<&String> =
        differences.iter().filter(|d| !KNOWN_DIFFERENCES.iter().any(|(k, _)| d.starts_with(k))).collect();
    println!(
        "{compared} chains compared, {with_telemetry} with telemetry filters; differences:\n{differences:#?}"
    );
    assert!(with_telemetry >= 5, "too few chains with telemetry filters compared ({with_telemetry})");
    assert!(
        unexplained.is_empty(),
        "differences from istiod:\n{}",
        unexplained.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
}
