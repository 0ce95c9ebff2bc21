//! Shared pieces of the end-to-end tests: a hand-built Envoy config (clusters, endpoints, listener,
//! routes), a `ResourceSource` serving it, and a scenario wiring ADS server + Envoy + upstreams.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    sync::{Arc, Condvar, Mutex, OnceLock},
    time::Duration,
};

use envoy_types::pb::{
    envoy::{
        config::{
            cluster::v3::{
                Cluster,
                cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig},
            },
            core::v3::{
                Address, AggregatedConfigSource, ApiVersion, ConfigSource, SocketAddress, address,
                config_source::ConfigSourceSpecifier, socket_address::PortSpecifier,
            },
            endpoint::v3::{ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint},
            listener::v3::{Filter, FilterChain, Listener, filter},
            route::v3::{
                HeaderMatcher, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost,
                header_matcher::HeaderMatchSpecifier, route, route_action::ClusterSpecifier,
                route_match::PathSpecifier,
            },
        },
        extensions::filters::{
            http::router::v3::Router,
            network::http_connection_manager::v3::{
                HttpConnectionManager, HttpFilter, Rds, http_connection_manager::RouteSpecifier, http_filter,
            },
        },
        r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher},
    },
    google::protobuf::Duration as PbDuration,
};
use envoy_types::util::pack_any;
use meshpilot_testing::{AdsApi, Bootstrap, EchoServer, Envoy, RunningAds, free_port, http_get, wait_for};
use meshpilot_xds::{
    AdsServer, ConnectionSnapshot, GenerateRequest, Generated, NodeInfo, NodeParts, Resource, ResourceSource,
    SourceError, SyncState, Trigger,
    server::StreamCaller,
    type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE},
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use model::push::node::{Locality, Proxy};

/// Whether `type_url` is ACKed at its latest response.
pub fn is_acked(c: &ConnectionSnapshot<Proxy>, type_url: &str) -> bool {
    c.types.get(type_url).is_some_and(|s| s.state == SyncState::Acked && s.nonce_sent == s.nonce_acked)
}

/// Generous per-step timeout, far below Envoy's 30 s initial-fetch trap.
pub const STEP: Duration = Duration::from_secs(10);

/// The Prometheus recorder of this test binary (installed once).
pub fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let mut b = PrometheusBuilder::new();
        for (name, buckets) in meshpilot_xds::metrics::HISTOGRAM_BUCKETS {
            b = b.set_buckets_for_metric(Matcher::Full((*name).to_owned()), buckets).expect("buckets");
        }
        let handle = b.install_recorder().expect("install Prometheus recorder");
        meshpilot_xds::metrics::describe();
        handle
    })
}

/// The value of one rendered Prometheus sample line `name{labels} value`.
pub fn prom_value(rendered: &str, series: &str) -> Option<f64> {
    rendered.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

// === resources ===

fn ads_source() -> ConfigSource {
    ConfigSource {
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        resource_api_version: ApiVersion::V3 as i32,
        ..Default::default()
    }
}

/// An EDS cluster whose endpoints come over ADS.
pub fn cluster(name: &str) -> Resource {
    let c = Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig { eds_config: Some(ads_source()), ..Default::default() }),
        connect_timeout: Some(PbDuration { seconds: 1, nanos: 0 }),
        ..Default::default()
    };
    Resource::new(name, &c)
}

fn socket(addr: SocketAddr) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: addr.ip().to_string(),
            port_specifier: Some(PortSpecifier::PortValue(u32::from(addr.port()))),
            ..Default::default()
        })),
    }
}

/// The endpoints of `cluster`: one host.
pub fn endpoints(cluster: &str, host: SocketAddr) -> Resource {
    let cla = ClusterLoadAssignment {
        cluster_name: cluster.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(socket(host)),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    Resource::new(cluster, &cla)
}

/// An HTTP listener on 127.0.0.1:`port` whose routes come from RDS `route_name` over ADS.
pub fn listener(name: &str, port: u16, route_name: &str) -> Resource {
    let hcm = HttpConnectionManager {
        stat_prefix: "ingress".into(),
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: Some(ads_source()),
            route_config_name: route_name.into(),
        })),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(pack_any(Router::default()))),
            ..Default::default()
        }],
        ..Default::default()
    };
    let l = Listener {
        name: name.into(),
        address: Some(socket(SocketAddr::from(([127, 0, 0, 1], port)))),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: "envoy.filters.network.http_connection_manager".into(),
                config_type: Some(filter::ConfigType::TypedConfig(pack_any(hcm))),
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    Resource::new(name, &l)
}

fn to_cluster(m: RouteMatch, cluster: &str) -> Route {
    Route {
        r#match: Some(m),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.into())),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn prefix(p: &str) -> RouteMatch {
    RouteMatch { path_specifier: Some(PathSpecifier::Prefix(p.into())), ..Default::default() }
}

fn route_config(name: &str, routes: Vec<Route>) -> Resource {
    let rc = RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    };
    Resource::new(name, &rc)
}

/// Route configuration `name`: everything to `cluster`.
pub fn route_to(name: &str, cluster: &str) -> Resource {
    route_config(name, vec![to_cluster(prefix("/"), cluster)])
}

/// Route configuration `name`: requests with header `x-canary: true` to `canary`, the rest to `cluster`.
pub fn route_canary(name: &str, cluster: &str, canary: &str) -> Resource {
    let mut m = prefix("/");
    m.headers = vec![HeaderMatcher {
        name: "x-canary".into(),
        header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(string_matcher::MatchPattern::Exact("true".into())),
            ..Default::default()
        })),
        ..Default::default()
    }];
    route_config(name, vec![to_cluster(m, canary), to_cluster(prefix("/"), cluster)])
}

/// Route configuration `name` with an invalid RE2 regex (Envoy rejects it: `missing ): /foo(`).
pub fn route_bad_regex(name: &str, cluster: &str) -> Resource {
    let bad = RouteMatch {
        path_specifier: Some(PathSpecifier::SafeRegex(RegexMatcher {
            regex: "/foo(".into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    route_config(name, vec![to_cluster(bad, cluster), to_cluster(prefix("/"), cluster)])
}

// === source ===

/// Which types a push changed (empty: everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed(pub BTreeSet<String>);

impl Changed {
    /// A push of these types.
    pub fn types(types: &[&str]) -> Self {
        Changed(types.iter().map(|t| (*t).to_owned()).collect())
    }
}

impl Extend<Changed> for Changed {
    fn extend<I: IntoIterator<Item = Changed>>(&mut self, newer: I) {
        for newer in newer {
            if self.0.is_empty() || newer.0.is_empty() {
                self.0.clear();
            } else {
                self.0.extend(newer.0);
            }
        }
    }
}

/// One `generate` call, for assertions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Type URL.
    pub type_url: String,
    /// `request`, `push` or `dependency`.
    pub trigger: &'static str,
    /// Generated names.
    pub names: Vec<String>,
    /// The proxy's node id.
    pub node_id: String,
}

#[derive(Debug, Default)]
struct Snapshot {
    version: u64,
    resources: BTreeMap<String, Vec<Resource>>,
}

/// A `ResourceSource` over a hand-built snapshot; `set` replaces one type and bumps the version.
#[derive(Debug, Default)]
pub struct TestSource {
    snapshot: Mutex<Snapshot>,
    calls: Mutex<Vec<Call>>,
    /// While `true`, push generation for proxies whose node id contains `slow` blocks (throttle
    /// tests): `(closed, its condition)`.
    gate: (Mutex<bool>, Condvar),
}

impl TestSource {
    /// A source at version 1 with these resources per type URL.
    pub fn new(resources: Vec<(&str, Vec<Resource>)>) -> Arc<Self> {
        let snapshot = Snapshot {
            version: 1,
            resources: resources.into_iter().map(|(t, r)| (t.to_owned(), r)).collect(),
        };
        Arc::new(TestSource {
            snapshot: Mutex::new(snapshot),
            calls: Mutex::new(Vec::new()),
            gate: (Mutex::new(false), Condvar::new()),
        })
    }

    /// Makes pushes to `slow` proxies block inside `generate` until [`TestSource::open_gate`].
    pub fn close_gate(&self) {
        *self.gate.0.lock().unwrap() = true;
    }

    /// Releases pushes blocked by [`TestSource::close_gate`].
    pub fn open_gate(&self) {
        *self.gate.0.lock().unwrap() = false;
        self.gate.1.notify_all();
    }

    /// Replaces the resources of `type_url`; returns the new version.
    pub fn set(&self, type_url: &str, resources: Vec<Resource>) -> String {
        let mut s = self.snapshot.lock().unwrap();
        s.version += 1;
        s.resources.insert(type_url.to_owned(), resources);
        s.version.to_string()
    }

    /// The calls made so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

impl ResourceSource for TestSource {
    type Push = Changed;
    type Node = Proxy;
    type Context = ();

    fn node(&self, node: NodeParts, _caller: Option<&StreamCaller>) -> Result<Proxy, SourceError> {
        let locality = Locality { region: node.region, zone: node.zone, sub_zone: node.sub_zone };
        Proxy::from_node(&node.id, node.metadata, locality, node.user_agent_name)
            .map_err(|e| SourceError::InvalidNode(e.to_string()))
    }

    fn node_info<'a>(&self, p: &'a Proxy) -> NodeInfo<'a> {
        NodeInfo {
            id: &p.id,
            namespace: &p.config_namespace,
            version: &p.metadata.istio_version,
            node_id: &p.node_id,
        }
    }

    fn connect(&self, _proxy: &Proxy) -> Result<(), SourceError> {
        Ok(())
    }

    fn generate(
        &self,
        _ctx: &mut (),
        req: &GenerateRequest<'_, Proxy, Changed>,
    ) -> Result<Option<Generated>, SourceError> {
        let trigger = match req.trigger {
            Trigger::Request => "request",
            Trigger::Push(_) => "push",
            Trigger::Dependency => "dependency",
        };
        if let Trigger::Push(changed) = req.trigger
            && !changed.0.is_empty()
            && !changed.0.contains(req.type_url)
        {
            return Ok(None);
        }
        if trigger == "push" && req.proxy.node_id.contains("slow") {
            self.calls.lock().unwrap().push(Call {
                type_url: req.type_url.to_owned(),
                trigger: "push-started",
                names: Vec::new(),
                node_id: req.proxy.node_id.clone(),
            });
            let mut closed = self.gate.0.lock().unwrap();
            while *closed {
                closed = self.gate.1.wait(closed).unwrap();
            }
        }
        let s = self.snapshot.lock().unwrap();
        let resources: Vec<Resource> = s
            .resources
            .get(req.type_url)
            .into_iter()
            .flatten()
            .filter(|r| req.watch.covers(&r.name))
            .cloned()
            .collect();
        self.calls.lock().unwrap().push(Call {
            type_url: req.type_url.to_owned(),
            trigger,
            names: resources.iter().map(|r| r.name.clone()).collect(),
            node_id: req.proxy.node_id.clone(),
        });
        Ok(Some(Generated::full(s.version.to_string(), resources)))
    }
}

// === scenario ===

/// ADS server + Envoy + two upstreams (`a`, `b`): clusters `a` and `b`, listener `listener_0` on a
/// free port with RDS `local_route`, which first sends everything to `a`.
pub struct Scenario {
    /// The resource source (change it, then push).
    pub source: Arc<TestSource>,
    /// The running ADS server.
    pub ads: RunningAds<TestSource>,
    /// The Envoy.
    pub envoy: Envoy,
    /// Envoy's listener.
    pub listener: SocketAddr,
    /// Upstreams `a` and `b`, stopped when this is dropped.
    _upstreams: (EchoServer, EchoServer),
}

impl Scenario {
    /// Starts everything and waits until Envoy is LIVE and every type is ACKed.
    pub async fn start(name: &str, api: AdsApi) -> Scenario {
        prometheus();
        let a = EchoServer::start("a").await.unwrap();
        let b = EchoServer::start("b").await.unwrap();
        let port = free_port();
        let source = TestSource::new(vec![
            (CLUSTER, vec![cluster("a"), cluster("b")]),
            (ENDPOINT, vec![endpoints("a", a.addr), endpoints("b", b.addr)]),
            (LISTENER, vec![listener("listener_0", port, "local_route")]),
            (ROUTE, vec![route_to("local_route", "a")]),
        ]);
        let ads = RunningAds::start(AdsServer::new(Arc::clone(&source)), None).await.unwrap();
        let envoy = Envoy::start(&Bootstrap::sidecar(name, ads.addr, api)).await.unwrap();
        let s = Scenario {
            source,
            ads,
            envoy,
            listener: SocketAddr::from(([127, 0, 0, 1], port)),
            _upstreams: (a, b),
        };
        s.envoy.wait_live(STEP).await.unwrap();
        s.wait_acked(&[CLUSTER, ENDPOINT, LISTENER, ROUTE]).await;
        s
    }

    /// The one connection (panics if there is not exactly one).
    pub fn connection(&self) -> ConnectionSnapshot<Proxy> {
        let mut all = self.ads.registry.snapshot();
        assert_eq!(
            all.len(),
            1,
            "expected one connection, got {:?}",
            all.iter().map(|c| &c.id).collect::<Vec<_>>()
        );
        all.remove(0)
    }

    /// Waits until the one connection satisfies `cond`.
    pub async fn wait_until(
        &self,
        what: &str,
        cond: impl Fn(&ConnectionSnapshot<Proxy>) -> bool,
    ) -> ConnectionSnapshot<Proxy> {
        let r = wait_for(what, STEP, async || {
            let c = self.ads.registry.snapshot().into_iter().next()?;
            cond(&c).then_some(c)
        })
        .await;
        match r {
            Ok(c) => c,
            Err(e) => panic!(
                "{e}\n--- registry ---\n{:#?}\n--- envoy log ---\n{}",
                self.ads.registry.snapshot(),
                self.envoy.log_tail(60)
            ),
        }
    }

    /// Waits until every type in `types` is ACKed at its latest response on the one connection.
    pub async fn wait_acked(&self, types: &[&str]) -> ConnectionSnapshot<Proxy> {
        self.wait_until(&format!("ACK of {types:?}"), |c| types.iter().all(|t| is_acked(c, t))).await
    }

    /// Waits until `type_url` is ACKed at `version`.
    pub async fn wait_version(&self, type_url: &str, version: &str) -> ConnectionSnapshot<Proxy> {
        self.wait_until(&format!("ACK of {type_url} version {version}"), |c| {
            is_acked(c, type_url) && c.types[type_url].version_acked == version
        })
        .await
    }

    /// Waits until `GET /` (with `headers`) through Envoy answers `body`.
    pub async fn wait_body(&self, headers: &[(&str, &str)], body: &str) {
        let r = wait_for(&format!("traffic to reach {body:?}"), STEP, async || {
            let (status, got) = http_get(self.listener, "/", headers).await.ok()?;
            (status == 200 && got == body).then_some(())
        })
        .await;
        if let Err(e) = r {
            panic!(
                "{e}; last answer {:?}\n--- envoy log ---\n{}",
                http_get(self.listener, "/", headers).await,
                self.envoy.log_tail(60)
            );
        }
    }

    /// Replaces the route configuration and pushes an RDS-only change.
    pub fn push_route(&self, route: Resource) -> String {
        let v = self.source.set(ROUTE, vec![route]);
        assert_eq!(self.ads.registry.push_all(Changed::types(&[ROUTE])), 1);
        v
    }

    /// Envoy's RDS stats for `local_route` (`update_success`, `update_rejected`).
    pub async fn rds_stats(&self) -> (u64, u64) {
        let ok = self.envoy.stat("http.ingress.rds.local_route.update_success").await.unwrap().unwrap_or(0);
        let bad = self.envoy.stat("http.ingress.rds.local_route.update_rejected").await.unwrap().unwrap_or(0);
        (ok, bad)
    }
}
