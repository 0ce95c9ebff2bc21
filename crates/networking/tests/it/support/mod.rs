//! Builders shared by the networking tests: configs from YAML (files or text), a memory store, a
//! ServiceEntry registry index as `ServiceDiscovery`, proxies.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Arc,
};

use api::Kind;
use config::parse::{ParseOptions, parse_text};
use config::{
    memory::{Change, MemoryStore},
    queue::QueueOptions,
};
use envoy_types::pb::envoy::config::route::v3::{
    RouteConfiguration, VirtualHost, route::Action, route_action::ClusterSpecifier,
};
use meshpilot_networking::Snapshot;
use model::{
    Config, ServiceDiscovery,
    push::{InterceptionMode, MeshSettings, ProxyContext, ProxyKind, PushContext},
    service::{Endpoint, Labels, Port, ProviderId, Resolution, Service, ServiceInstance},
};
use registry::{ServiceEntryIndex, ServiceEntryOptions, index_from_configs};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared Istio corpus.
pub fn corpus() -> PathBuf {
    repo().join("../shared/istio-testdata")
}

/// Valid configs of `text`, objects without namespace put in `namespace`.
pub fn parse(text: &str, namespace: &str) -> Vec<Config> {
    let options = ParseOptions { default_namespace: namespace.to_string(), ..ParseOptions::default() };
    parse_text("test.yaml", text, &options).into_iter().filter_map(|d| d.config).collect()
}

/// Valid configs of a file.
pub fn parse_file(path: &Path, namespace: &str) -> Vec<Config> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let options = ParseOptions { default_namespace: namespace.to_string(), ..ParseOptions::default() };
    parse_text(&path.display().to_string(), &text, &options).into_iter().filter_map(|d| d.config).collect()
}

/// The bookinfo example of the repository (ServiceEntries, WorkloadEntries, and optionally its traffic
/// rules).
pub fn bookinfo_example(with_traffic: bool) -> Vec<Config> {
    let dir = repo().join("examples/bookinfo");
    let mut out = parse_file(&dir.join("services.yaml"), "bookinfo");
    out.extend(parse_file(&dir.join("workloads.yaml"), "bookinfo"));
    if with_traffic {
        out.extend(parse_file(&dir.join("traffic.yaml"), "bookinfo"));
    }
    out
}

/// `ServiceDiscovery` over a ServiceEntry index, plus services given as values (no endpoints), e.g.
/// Kubernetes ones.
pub struct IndexDiscovery(pub ServiceEntryIndex, pub Vec<Arc<Service>>);

impl ServiceDiscovery for IndexDiscovery {
    fn services(&self) -> Vec<Arc<Service>> {
        let mut all = self.0.services();
        all.extend(self.1.iter().cloned());
        all.sort_by(|a, b| (&a.hostname, &a.namespace).cmp(&(&b.hostname, &b.namespace)));
        all
    }
    fn get_service(&self, hostname: &str, namespace: &str) -> Option<Arc<Service>> {
        self.0
            .get_service(hostname, namespace)
            .or_else(|| self.1.iter().find(|s| s.hostname == hostname && s.namespace == namespace).cloned())
    }
    fn endpoints(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        subset: Option<&Labels>,
    ) -> Vec<Arc<Endpoint>> {
        self.0.endpoints(hostname, namespace, port, subset)
    }
    fn proxy_instances(&self, ips: &[String], namespace: Option<&str>) -> Vec<ServiceInstance> {
        self.0.proxy_instances(ips, namespace)
    }
}

/// A world: the store of every config and the registry of the ServiceEntries among them.
pub struct World {
    pub store: MemoryStore,
    pub discovery: IndexDiscovery,
}

impl World {
    pub fn new(configs: Vec<Config>) -> World {
        World::with_services(configs, Vec::new())
    }

    /// A world of `configs` and the `services` given as values.
    pub fn with_services(configs: Vec<Config>, services: Vec<Service>) -> World {
        let store = MemoryStore::new("test", Kind::ALL, QueueOptions::default());
        let (index, _) = index_from_configs(configs.iter(), ServiceEntryOptions::default());
        store.apply(configs.into_iter().map(|c| Change::Upsert(Arc::new(c))));
        World { store, discovery: IndexDiscovery(index, services.into_iter().map(Arc::new).collect()) }
    }

    /// A snapshot of the world with the default mesh settings and a generation cache of its own.
    pub fn push(&self) -> Snapshot {
        self.push_with(MeshSettings::default())
    }

    /// A snapshot of the world with `mesh` settings and a generation cache of its own.
    pub fn push_with(&self, mesh: MeshSettings) -> Snapshot {
        Snapshot::new(PushContext::new(&self.store, &self.discovery, mesh, "v1"))
    }
}

/// Two mesh-internal STATIC ServiceEntries in `ns1`: `web` (HTTP 80, VIP 10.1.1.1, endpoint 10.0.0.1)
/// and `db` (TCP 5432, VIP 10.1.1.2, endpoint 10.0.0.2), as YAML documents ending with `---`.
pub const WEB_AND_DB: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns1}
spec:
  hosts: [web.ns1.svc.cluster.local]
  addresses: [10.1.1.1]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: ns1}
spec:
  hosts: [db.ns1.svc.cluster.local]
  addresses: [10.1.1.2]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
"#;

/// The Sidecar of workload `app` in `ns1` with two ingress ports (HTTP 9080, TCP 9090), a YAML
/// document without the trailing `---`.
pub const APP_SIDECAR: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: app, namespace: ns1}
spec:
  workloadSelector: {labels: {app: app}}
  ingress:
  - port: {number: 9080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
  - port: {number: 9090, protocol: TCP, name: tcp}
    defaultEndpoint: 127.0.0.1:8090
"#;

/// A mesh-internal STATIC ServiceEntry `name.namespace.svc.cluster.local` with one HTTP port 80 and one
/// endpoint at `address` (a YAML document ending with `---`).
pub fn http_service_entry(name: &str, namespace: &str, address: &str) -> String {
    format!(
        r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  hosts: [{name}.{namespace}.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: {address}}}]
---
"#
    )
}

/// A Kubernetes `type: ExternalName` Service `name.namespace.svc.cluster.local` pointing at `external`,
/// with `ports` (`(name, number)`, protocol from the name), as the Kubernetes registry converts it: an
/// alias.
pub fn external_name_service(name: &str, namespace: &str, external: &str, ports: &[(&str, u32)]) -> Service {
    Service {
        hostname: format!("{name}.{namespace}.svc.cluster.local"),
        namespace: namespace.to_string(),
        name: name.to_string(),
        object_name: name.to_string(),
        registry: ProviderId::Kubernetes,
        ports: ports
            .iter()
            .map(|(n, p)| Port {
                name: n.to_string(),
                port: *p,
                protocol: model::service::convert_protocol(*p as i32, n, "TCP", None),
            })
            .collect(),
        addresses: Vec::new(),
        resolution: Resolution::Alias,
        mesh_external: true,
        export_to: Default::default(),
        labels: Labels::new(),
        label_selector: None,
        service_accounts: Vec::new(),
        creation_time: None,
        passthrough_target_ports: BTreeMap::new(),
        external_name: Some(external.to_string()),
        aliases: Vec::new(),
        auto_allocated: Vec::new(),
        traffic_distribution: Default::default(),
        cluster_external_addresses: Default::default(),
    }
}

/// A Gateway `istio-system/gw` for `istio: ingressgateway` with one HTTP server on port 8080 for
/// every host (a YAML document ending with `---`).
pub const HTTP_GATEWAY_8080: &str = r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
---
"#;

/// Every typed network filter of `listeners`' filter chains (default chains included), with the
/// name of its listener.
pub fn typed_filters(
    listeners: &[envoy_types::pb::envoy::config::listener::v3::Listener],
) -> Vec<(&str, &envoy_types::pb::google::protobuf::Any)> {
    use envoy_types::pb::envoy::config::listener::v3::filter::ConfigType;
    listeners
        .iter()
        .flat_map(|l| {
            l.filter_chains.iter().chain(&l.default_filter_chain).flat_map(move |c| {
                c.filters.iter().filter_map(move |f| match &f.config_type {
                    Some(ConfigType::TypedConfig(any)) => Some((l.name.as_str(), any)),
                    _ => None,
                })
            })
        })
        .collect()
}

/// The push context finding about the config object named `name` (panics, listing all, when none).
pub fn config_finding<'a>(push: &'a Snapshot, name: &str) -> &'a model::Finding {
    push.findings()
        .iter()
        .find(|f| f.config.as_ref().is_some_and(|k| k.name == name))
        .unwrap_or_else(|| panic!("no finding about {name}: {:#?}", push.findings()))
}

/// A sidecar in `namespace` with `labels`.
pub fn sidecar(namespace: &str, labels: &[(&str, &str)]) -> ProxyContext {
    let mut p = ProxyContext::new(ProxyKind::Sidecar, namespace);
    p.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>();
    p
}

/// A sidecar without interception bound to loopback.
pub fn loopback_sidecar(namespace: &str) -> ProxyContext {
    let mut p = sidecar(namespace, &[]);
    p.interception_mode = InterceptionMode::None;
    p.bind_address = "127.0.0.1".to_string();
    p
}

/// A gateway proxy in `namespace` with `labels`.
pub fn router(namespace: &str, labels: &[(&str, &str)]) -> ProxyContext {
    let mut p = ProxyContext::new(ProxyKind::Router, namespace);
    p.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    p
}

/// A proxyless gRPC client in `namespace`.
pub fn proxyless(namespace: &str) -> ProxyContext {
    let mut p = sidecar(namespace, &[]);
    p.proxyless_grpc = true;
    p
}

/// The virtual host named `name` in `rc`; panics listing the names there are.
pub fn vhost<'a>(rc: &'a RouteConfiguration, name: &str) -> &'a VirtualHost {
    rc.virtual_hosts.iter().find(|v| v.name == name).unwrap_or_else(|| {
        panic!(
            "no virtual host {name}; have {:?}",
            rc.virtual_hosts.iter().map(|v| &v.name).collect::<Vec<_>>()
        )
    })
}

/// The cluster of every route of `v`, in order; panics on a route that is not to one cluster.
pub fn route_clusters(v: &VirtualHost) -> Vec<String> {
    v.routes
        .iter()
        .map(|r| match &r.action {
            Some(Action::Route(a)) => match &a.cluster_specifier {
                Some(ClusterSpecifier::Cluster(c)) => c.clone(),
                other => panic!("not one cluster: {other:?}"),
            },
            other => panic!("not a route action: {other:?}"),
        })
        .collect()
}
