//! The scenarios: Istio config from the shared corpus (`../shared/istio-testdata`) and the proxies that
//! connect to both control planes for each. Istio kinds go to the config directory both watch; other
//! Kubernetes objects (Services, Deployments) go to the test cluster both read services from.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// A proxy identity connected to both sides.
#[derive(Clone, Debug)]
pub struct ProxySpec {
    /// Short label in the report (`sidecar`, `router`, `grpc`).
    pub label: &'static str,
    /// `sidecar` or `router`.
    pub node_type: &'static str,
    /// Pod name part of the node id.
    pub name: &'static str,
    /// Config namespace.
    pub namespace: &'static str,
    /// The proxy's IP.
    pub ip: &'static str,
    /// Workload labels.
    pub labels: &'static [(&'static str, &'static str)],
    /// Extra string metadata (`INTERCEPTION_MODE`, `GENERATOR`, …). `GENERATOR: grpc` makes the client ask
    /// as a proxyless gRPC client does (by name, LDS first).
    pub metadata: &'static [(&'static str, &'static str)],
}

impl ProxySpec {
    /// Istio's node id `TYPE~IP~POD.NS~NS.svc.cluster.local`.
    pub fn node_id(&self) -> String {
        format!(
            "{}~{}~{}.{}~{}.svc.cluster.local",
            self.node_type, self.ip, self.name, self.namespace, self.namespace
        )
    }
}

/// One scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Name in the report.
    pub name: &'static str,
    /// Corpus files (paths relative to `../shared/istio-testdata`, or to the repository for `crates/…`; a
    /// directory means its `*.yaml`).
    pub files: &'static [&'static str],
    /// The proxies.
    pub proxies: Vec<ProxySpec>,
    /// Only run by `scripts/conformance.sh` (large), not in CI.
    pub large: bool,
    /// EDS field differences count (assignments' priorities and weights): for scenarios about them.
    pub assert_eds: bool,
}

/// The ingress gateway of `istio-system` (`istio: ingressgateway`).
pub const ROUTER: ProxySpec = ProxySpec {
    label: "router",
    node_type: "router",
    name: "istio-ingressgateway-0",
    namespace: "istio-system",
    ip: "10.99.0.1",
    labels: &[("istio", "ingressgateway"), ("app", "istio-ingressgateway")],
    metadata: &[],
};

/// The proxy of Istio's xDS benchmarks (`pilot/pkg/xds/bench_test.go`, `_derived/xds/benchmarks/params.yaml`):
/// `1.1.1.1`, labels `istio.io/benchmark: "true"`, namespace `default`. The workloads' services and
/// gateways are written for it (`proxy-service-instance` endpoints at its IP, gateway selectors on its
/// label), so it is both a service instance and the gateway's workload.
const BENCHMARK_LABELS: &[(&str, &str)] = &[("istio.io/benchmark", "true")];

/// [`BENCHMARK_LABELS`]' proxy as a sidecar.
pub const BENCHMARK_SIDECAR: ProxySpec = ProxySpec {
    label: "sidecar",
    node_type: "sidecar",
    name: "v0",
    namespace: "default",
    ip: "1.1.1.1",
    labels: BENCHMARK_LABELS,
    metadata: &[],
};

/// [`BENCHMARK_LABELS`]' proxy as a router (the benchmarks' `router` cases), another pod at the same IP.
pub const BENCHMARK_ROUTER: ProxySpec =
    ProxySpec { label: "router", node_type: "router", name: "v0-gateway", ..BENCHMARK_SIDECAR };

const fn sidecar(
    name: &'static str,
    namespace: &'static str,
    ip: &'static str,
    labels: &'static [(&'static str, &'static str)],
) -> ProxySpec {
    ProxySpec { label: "sidecar", node_type: "sidecar", name, namespace, ip, labels, metadata: &[] }
}

const BOOKINFO_PRODUCTPAGE: ProxySpec =
    sidecar("productpage-v1-0", "default", "10.60.0.10", &[("app", "productpage"), ("version", "v1")]);

/// A proxyless gRPC productpage (`GENERATOR: grpc`) next to the sidecar one: it dials every service of
/// the scenario as `xds:///HOST:PORT`.
const BOOKINFO_GRPC: ProxySpec = ProxySpec {
    label: "grpc",
    metadata: &[("GENERATOR", "grpc")],
    ..sidecar("productpage-grpc-0", "default", "10.60.0.11", &[("app", "productpage"), ("version", "v1")])
};

/// Every scenario; the CI set is those with `large: false`.
pub fn all() -> Vec<Scenario> {
    let bookinfo = |name, files| Scenario {
        name,
        files,
        proxies: vec![BOOKINFO_PRODUCTPAGE, ROUTER, BOOKINFO_GRPC],
        large: false,
        assert_eds: false,
    };
    let mut out = vec![
        Scenario {
            name: "xds: sidecar_none (tests/testdata/config)",
            files: &["tests/testdata/config"],
            proxies: vec![
                ProxySpec {
                    metadata: &[("INTERCEPTION_MODE", "NONE"), ("HTTP10", "1")],
                    ..sidecar("none-0", "none", "10.11.0.1", &[])
                },
                sidecar("seexamples-0", "seexamples", "10.12.0.1", &[("app", "client")]),
                ROUTER,
            ],
            large: false,
            assert_eds: false,
        },
        Scenario {
            name: "xds: ingress gateway",
            files: &["tests/testdata/networking/ingress-gateway/configs.yaml"],
            proxies: vec![ProxySpec { ip: "99.1.1.1", ..ROUTER }],
            large: false,
            assert_eds: false,
        },
        Scenario {
            name: "xds: sidecar scoped to workload without service",
            files: &["tests/testdata/networking/sidecar-without-service/configs.yaml"],
            proxies: vec![sidecar("consumeronly-0", "consumerns", "98.1.1.1", &[("app", "consumeronly")])],
            large: false,
            assert_eds: false,
        },
        bookinfo(
            "bookinfo: gateway, destination rules, all v1",
            &[
                "samples/bookinfo/platform/kube/bookinfo.yaml",
                "samples/bookinfo/networking/bookinfo-gateway.yaml",
                "samples/bookinfo/networking/destination-rule-all.yaml",
                "samples/bookinfo/networking/virtual-service-all-v1.yaml",
            ],
        ),
        bookinfo(
            "bookinfo: jason to v2, ratings delay, details abort",
            &[
                "samples/bookinfo/platform/kube/bookinfo.yaml",
                "samples/bookinfo/networking/bookinfo-gateway.yaml",
                "samples/bookinfo/networking/destination-rule-all.yaml",
                "samples/bookinfo/networking/virtual-service-reviews-test-v2.yaml",
                "samples/bookinfo/networking/virtual-service-ratings-test-delay.yaml",
                "samples/bookinfo/networking/fault-injection-details-v1.yaml",
            ],
        ),
        bookinfo(
            "bookinfo: weighted reviews, mTLS rules, egress to googleapis",
            &[
                "samples/bookinfo/platform/kube/bookinfo.yaml",
                "samples/bookinfo/networking/destination-rule-all-mtls.yaml",
                "samples/bookinfo/networking/virtual-service-reviews-80-20.yaml",
                "samples/bookinfo/networking/virtual-service-details-v2.yaml",
                "samples/bookinfo/networking/egress-rule-google-apis.yaml",
            ],
        ),
        bookinfo(
            "bookinfo: jason v2 else v3, ratings db",
            &[
                "samples/bookinfo/platform/kube/bookinfo.yaml",
                "samples/bookinfo/platform/kube/bookinfo-ratings-v2.yaml",
                "samples/bookinfo/networking/destination-rule-reviews.yaml",
                "samples/bookinfo/networking/virtual-service-reviews-jason-v2-v3.yaml",
                "samples/bookinfo/networking/certmanager-gateway.yaml",
            ],
        ),
        // The remaining bookinfo networking samples, one reviews VirtualService each (they share its name).
        bookinfo(
            "bookinfo: reviews 50/50 v1 v3, ratings v2 mysql",
            &[
                "samples/bookinfo/platform/kube/bookinfo.yaml",
                "samples/bookinfo/platform/kube/bookinfo-ratings-v2-mysql.yaml",
                "samples/bookinfo/networking/destination-rule-all.yaml",
                "samples/bookinfo/networking/virtual-service-reviews-50-v3.yaml",
            ],
        ),
        bookinfo(
            "bookinfo: reviews 90/10 v1 v2, mTLS rules",
            &[
                "samples/bookinfo/platform/kube/bookinfo.yaml",
                "samples/bookinfo/networking/destination-rule-all-mtls.yaml",
                "samples/bookinfo/networking/virtual-service-reviews-90-10.yaml",
            ],
        ),
        bookinfo(
            "bookinfo: reviews v2 v3, reviews rules only",
            &[
                "samples/bookinfo/platform/kube/bookinfo.yaml",
                "samples/bookinfo/networking/destination-rule-reviews.yaml",
                "samples/bookinfo/networking/virtual-service-reviews-v2-v3.yaml",
            ],
        ),
        bookinfo(
            "bookinfo: reviews v3",
            &[
                "samples/bookinfo/platform/kube/bookinfo.yaml",
                "samples/bookinfo/networking/destination-rule-all.yaml",
                "samples/bookinfo/networking/virtual-service-reviews-v3.yaml",
            ],
        ),
        bookinfo(
            "bookinfo: reviews v3 to ratings v2 (db)",
            &[
                "samples/bookinfo/platform/kube/bookinfo.yaml",
                "samples/bookinfo/platform/kube/bookinfo-ratings-v2.yaml",
                "samples/bookinfo/networking/destination-rule-all.yaml",
                "samples/bookinfo/networking/virtual-service-ratings-db.yaml",
            ],
        ),
        bookinfo(
            "bookinfo: reviews v3 to ratings v2 on a mysql VM",
            &[
                "samples/bookinfo/platform/kube/bookinfo.yaml",
                "samples/bookinfo/platform/kube/bookinfo-ratings-v2-mysql-vm.yaml",
                "samples/bookinfo/networking/destination-rule-all-mtls.yaml",
                "samples/bookinfo/networking/virtual-service-ratings-mysql-vm.yaml",
            ],
        ),
    ];
    out.push(Scenario {
        name: "listener addresses: VIP, CIDR, none, NONE resolution, headless",
        files: &["crates/meshpilot/tests/it/peer/conformance/listener-addresses.yaml"],
        proxies: vec![sidecar("client-0", "listeners", "10.42.0.1", &[("app", "client")])],
        large: false,
        assert_eds: false,
    });
    out.push(Scenario {
        name: "sidecar egress listeners: port, bind, captureMode; gateway server bind",
        files: &["crates/meshpilot/tests/it/peer/conformance/sidecar-egress.yaml"],
        proxies: vec![sidecar("client-0", "egress", "10.45.1.1", &[("app", "client")]), ROUTER],
        large: false,
        assert_eds: false,
    });
    out.push(Scenario {
        name: "locality load balancing: failover, failoverPriority, distribute",
        files: &["crates/meshpilot/tests/it/peer/conformance/locality.yaml"],
        proxies: vec![sidecar(
            "client-0",
            "locality",
            "10.43.0.1",
            &[
                ("app", "client"),
                ("tier", "gold"),
                ("topology.kubernetes.io/region", "r1"),
                ("topology.kubernetes.io/zone", "z1"),
            ],
        )],
        large: false,
        assert_eds: true,
    });
    out.push(Scenario {
        name: "dns: name table of a DNS-capturing sidecar",
        files: &[
            "samples/bookinfo/platform/kube/bookinfo.yaml",
            "crates/meshpilot/tests/it/peer/conformance/dns.yaml",
        ],
        proxies: vec![ProxySpec {
            metadata: &[("DNS_CAPTURE", "true")],
            ..sidecar("dns-client-0", "default", "10.44.0.1", &[("app", "dns-client")])
        }],
        large: false,
        assert_eds: false,
    });
    out.push(Scenario {
        name: "envoyfilter: production patches and Istio's envoyfilter-without-service",
        files: &[
            "tests/testdata/networking/envoyfilter-without-service",
            "crates/meshpilot/tests/it/peer/conformance/envoy-filter.yaml",
        ],
        proxies: vec![
            sidecar("envoyfilter-test-0", "ns1", "10.45.0.1", &[("app", "envoyfilter-test-app")]),
            ROUTER,
        ],
        large: false,
        assert_eds: false,
    });
    // The 16 rendered benchmark workloads: large, run by scripts/conformance.sh only.
    if let Ok(dir) = std::fs::read_dir(corpus().join("_derived/xds/benchmarks/rendered")) {
        let mut names: Vec<String> =
            dir.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        for n in names {
            let path: &'static str =
                Box::leak(format!("_derived/xds/benchmarks/rendered/{n}").into_boxed_str());
            let name: &'static str = Box::leak(format!("benchmark: {n}").into_boxed_str());
            let files: &'static [&'static str] = Box::leak(vec![path].into_boxed_slice());
            out.push(Scenario {
                name,
                files,
                proxies: vec![BENCHMARK_SIDECAR, BENCHMARK_ROUTER],
                large: true,
                assert_eds: false,
            });
        }
    }
    out
}

fn corpus() -> PathBuf {
    meshpilot_testing::testdata()
}

/// The YAML documents of a scenario, as JSON values (default namespace `default` filled in), split into
/// Istio config (`*.istio.io` groups) and other Kubernetes objects. Missing files are an error.
pub fn documents(s: &Scenario) -> Result<(Vec<Value>, Vec<Value>), String> {
    let mut istio = Vec::new();
    let mut kube = Vec::new();
    for rel in s.files {
        // `crates/…`: this repository's own scenario files; anything else is in the corpus.
        let path = if rel.starts_with("crates/") {
            meshpilot_testing::repo_root().join(rel)
        } else {
            corpus().join(rel)
        };
        let files: Vec<PathBuf> = if path.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            v.sort();
            v
        } else {
            vec![path]
        };
        for f in files {
            for doc in read_docs(&f)? {
                let group =
                    doc["apiVersion"].as_str().unwrap_or("").split('/').next().unwrap_or("").to_string();
                if group.ends_with(".istio.io") {
                    istio.push(doc);
                } else if doc.get("kind").is_some() {
                    kube.push(doc);
                }
            }
        }
    }
    Ok((istio, kube))
}

fn read_docs(f: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
    let mut out = Vec::new();
    let mut chunk = String::new();
    let flush = |chunk: &mut String, out: &mut Vec<Value>| -> Result<(), String> {
        if chunk.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')) {
            let mut v: Value = serde_saphyr::from_str(chunk).map_err(|e| format!("{}: {e}", f.display()))?;
            if v.is_object() {
                if v["metadata"].get("namespace").is_none() && v["kind"] != "Namespace" {
                    v["metadata"]["namespace"] = Value::String("default".into());
                }
                out.push(v);
            }
        }
        chunk.clear();
        Ok(())
    };
    for line in text.lines() {
        // A document separator; or a top-level `apiVersion:` in a document that already has one (some
        // documents of the rendered knative benchmark have no `---` between them).
        let starts_another =
            line.starts_with("apiVersion:") && chunk.lines().any(|l| l.starts_with("apiVersion:"));
        if line.trim_end() == "---" || starts_another {
            flush(&mut chunk, &mut out)?;
        }
        if line.trim_end() != "---" {
            chunk.push_str(line);
            chunk.push('\n');
        }
    }
    flush(&mut chunk, &mut out)?;
    Ok(out)
}
