//! `meshpilot proxy-status` and `meshpilot proxy-config` against a real `meshpilot discovery`
//! process and two real Envoys (a sidecar and an ingress gateway). Needs Envoy
//! (scripts/install-envoy.sh).

use std::{
    net::SocketAddr,
    path::Path,
    process::{Child, Command, Output, Stdio},
    time::Duration,
};

use meshpilot_testing::{AdsApi, Bootstrap, Envoy, free_port, wait_for};

use crate::cds_client::CdsClient;

/// The sidecar's namespace (and the config's).
const NS: &str = "shop";

/// A ServiceEntry `reviews.example.com:9080` (two subsets' worth of WorkloadEntries), a
/// DestinationRule with subsets v1/v2, a VirtualService sending `/api` to v1, and a Gateway +
/// VirtualService for the ingress gateway (HTTP on `gw_port`).
fn config(gw_port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: reviews, namespace: {NS}}}\n\
         spec:\n  hosts: [reviews.example.com]\n  location: MESH_INTERNAL\n  ports:\n  - {{number: 9080, name: http, protocol: HTTP}}\n  \
         resolution: STATIC\n  workloadSelector:\n    labels: {{app: reviews}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: reviews-1, namespace: {NS}}}\n\
         spec:\n  address: 127.0.0.11\n  labels: {{app: reviews, version: v1}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: reviews-2, namespace: {NS}}}\n\
         spec:\n  address: 127.0.0.12\n  labels: {{app: reviews, version: v2}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: reviews-dr, namespace: {NS}}}\n\
         spec:\n  host: reviews.example.com\n  subsets:\n  - {{name: v1, labels: {{version: v1}}}}\n  - {{name: v2, labels: {{version: v2}}}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: reviews-vs, namespace: {NS}}}\n\
         spec:\n  hosts: [reviews.example.com]\n  http:\n  - match: [{{uri: {{prefix: /api}}}}]\n    route:\n    \
         - destination: {{host: reviews.example.com, subset: v1}}\n  - route:\n    - destination: {{host: reviews.example.com, subset: v2}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: public-gw, namespace: istio-system}}\n\
         spec:\n  selector: {{istio: ingressgateway}}\n  servers:\n  - port: {{number: {gw_port}, name: http, protocol: HTTP}}\n    hosts: [\"*\"]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: public, namespace: istio-system}}\n\
         spec:\n  hosts: [\"*\"]\n  gateways: [public-gw]\n  http:\n  - route:\n    - destination: {{host: reviews.example.com, port: {{number: 9080}}}}\n"
    )
}

/// A `meshpilot discovery` process; killed on drop.
struct Meshpilot {
    child: Child,
    grpc: SocketAddr,
    http: SocketAddr,
    log: std::path::PathBuf,
}

impl Meshpilot {
    fn start(config_dir: &Path, work: &Path) -> Meshpilot {
        let addr = |p: u16| -> SocketAddr { ([127, 0, 0, 1], p).into() };
        let (grpc, http, mon) = (addr(free_port()), addr(free_port()), addr(free_port()));
        let log = work.join("meshpilot.log");
        let child = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
            .arg("discovery")
            .arg("--config-dir")
            .arg(config_dir)
            .args(["--grpc-addr", &grpc.to_string(), "--http-addr", &http.to_string()])
            .args(["--monitoring-addr", &mon.to_string()])
            .args(["--secureGRPCAddr=", "--httpsAddr="])
            .env("POD_NAME", "meshpilot-test")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Meshpilot { child, grpc, http, log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Meshpilot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn meshpilot(addr: SocketAddr, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_meshpilot"))
        .args(args)
        .env("MESHPILOT_ADDR", addr.to_string())
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "exit {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The data rows (header dropped) of a table whose first cell is `first`, split on runs of 2+ blanks.
fn rows_starting<'a>(table: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    let re = regex::Regex::new(r"\s{2,}").unwrap();
    table.lines().skip(1).filter(|l| l.starts_with(first)).map(|l| re.split(l.trim_end()).collect()).collect()
}

const SIDECAR: &str = "reviews-client.shop";
const GATEWAY: &str = "istio-ingressgateway-1.istio-system";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn proxy_status_and_config_against_real_envoys() {
    let work = tempfile::tempdir().unwrap();
    let config_dir = work.path().join("config");
    std::fs::create_dir(&config_dir).unwrap();
    std::fs::write(config_dir.join("mesh.yaml"), config(free_port())).unwrap();
    let mp = Meshpilot::start(&config_dir, work.path());
    let sidecar =
        Envoy::start(&Bootstrap::sidecar_in("reviews-client", NS, mp.grpc, AdsApi::Sotw)).await.unwrap();
    let gateway = Envoy::start(&Bootstrap::router(mp.grpc, AdsApi::Delta)).await.unwrap();

    // Both proxies SYNCED for clusters, listeners and routes in /debug/syncz.
    let http = mp.http;
    let synced = wait_for("both proxies synced in /debug/syncz", Duration::from_secs(60), async || {
        let syncz = tokio::task::spawn_blocking(move || {
            let out = meshpilot(http, &["proxy-status", "-o", "json"]);
            out.status
                .success()
                .then(|| serde_json::from_slice::<serde_json::Value>(&out.stdout).ok())
                .flatten()
        })
        .await
        .ok()??;
        let all = syncz["proxies"].as_array()?;
        let ok = |id: &str| {
            all.iter().any(|p| {
                p["proxy"] == id
                    && ["Cluster", "Listener", "RouteConfiguration"].iter().all(|t| {
                        p["types"].as_object().is_some_and(|m| {
                            m.iter().any(|(url, s)| {
                                url.ends_with(&format!(".{t}")) && s["configStatus"] == "SYNCED"
                            })
                        })
                    })
            })
        };
        (ok(SIDECAR) && ok(GATEWAY)).then_some(syncz)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}\nsidecar: {}", mp.log_text(), sidecar.log_tail(20)));
    assert_eq!(synced["controlPlane"]["id"], "meshpilot-test");

    // The summary table: both proxies, their cluster, the control plane, ISTIO_VERSION, the types.
    let table = stdout(&meshpilot(http, &["proxy-status"]));
    assert!(table.starts_with("NAME"), "{table}");
    let header: Vec<&str> =
        regex::Regex::new(r"\s{2,}").unwrap().split(table.lines().next().unwrap().trim_end()).collect();
    assert_eq!(header, ["NAME", "CLUSTER", "ISTIOD", "VERSION", "SUBSCRIBED TYPES"]);
    for id in [SIDECAR, GATEWAY] {
        let rows = rows_starting(&table, id);
        assert_eq!(rows.len(), 1, "{table}");
        assert_eq!(rows[0][..4], [id, "Kubernetes", "meshpilot-test", "1.28.0"], "{table}");
        assert!(
            rows[0][4].contains("CDS") && rows[0][4].contains("LDS") && rows[0][4].contains("RDS"),
            "{table}"
        );
    }

    // The verbose table: SYNCED cells with their age, IGNORED for ECDS (not watched).
    let verbose = stdout(&meshpilot(http, &["proxy-status", "--verbose"]));
    let header = verbose.lines().next().unwrap();
    assert!(header.starts_with("NAME") && header.contains("CDS") && header.contains("ECDS"), "{verbose}");
    let cds = header.find("CDS").unwrap();
    for id in [SIDECAR, GATEWAY] {
        let line = verbose.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("{id}: {verbose}"));
        assert!(line[cds..].starts_with("SYNCED ("), "{verbose}");
        assert!(line.contains("IGNORED"), "ECDS is not watched: {verbose}");
    }

    // One proxy: its types with versions; an unknown one: exit 1 with close matches.
    let single = stdout(&meshpilot(http, &["proxy-status", SIDECAR]));
    assert!(
        single.lines().any(|l| l.starts_with("NAME:") && l.ends_with(&format!(" {SIDECAR}"))),
        "{single}"
    );
    let cds_row = single.lines().find(|l| l.starts_with("CDS ")).unwrap_or_else(|| panic!("{single}"));
    assert!(cds_row.contains("SYNCED ("), "{single}");
    let unknown = meshpilot(http, &["proxy-status", "reviews-clent.shop"]);
    assert_eq!(unknown.status.code(), Some(1));
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        err.contains("no connected proxy matches \"reviews-clent.shop\"") && err.contains(SIDECAR),
        "{err}"
    );

    // Clusters: the subsets of the DestinationRule, named in DESTINATION RULE.
    let clusters = stdout(&meshpilot(http, &["proxy-config", "clusters", SIDECAR]));
    let reviews = rows_starting(&clusters, "reviews.example.com");
    for subset in ["-", "v1", "v2"] {
        assert!(
            reviews
                .iter()
                .any(|r| r[..6]
                    == ["reviews.example.com", "9080", subset, "outbound", "EDS", "reviews-dr.shop"]),
            "subset {subset}: {clusters}"
        );
    }
    let filtered = stdout(&meshpilot(http, &["proxy-config", "clusters", SIDECAR, "--subset", "v1"]));
    assert_eq!(filtered.lines().count(), 2, "header and the v1 cluster: {filtered}");

    // Routes: the outbound 9080 route configuration, its routes naming our VirtualService.
    let routes = stdout(&meshpilot(http, &["proxy-config", "routes", SIDECAR, "--name", "9080"]));
    let rows = rows_starting(&routes, "9080");
    assert!(
        rows.iter().any(|r| r.len() == 5
            && r[1] == "reviews.example.com:9080"
            && r[3] == "/api*"
            && r[4] == "reviews-vs.shop"),
        "{routes}"
    );

    // Listeners: the sidecar's outbound 9080 listener routes through RDS `9080`; the gateway's
    // listener through its own route configuration.
    let listeners = stdout(&meshpilot(http, &["proxy-config", "listeners", SIDECAR, "--port", "9080"]));
    assert!(
        listeners.lines().skip(1).any(|l| l.contains("9080") && l.trim_end().ends_with("Route: 9080")),
        "{listeners}"
    );
    let gw_listeners = stdout(&meshpilot(http, &["proxy-config", "listeners", GATEWAY]));
    assert!(gw_listeners.lines().skip(1).any(|l| l.contains("Route: http.")), "{gw_listeners}");

    // Endpoints: the WorkloadEntries of each subset.
    let endpoints = stdout(&meshpilot(
        http,
        &["proxy-config", "endpoints", SIDECAR, "--cluster", "outbound|9080|v1|reviews.example.com"],
    ));
    let rows = rows_starting(&endpoints, "127.0.0.11:9080");
    assert_eq!(
        rows,
        [vec!["127.0.0.11:9080", "HEALTHY", "-", "outbound|9080|v1|reviews.example.com"]],
        "{endpoints}"
    );
    assert_eq!(endpoints.lines().count(), 2, "only v1's endpoint: {endpoints}");

    // -o json prints the resources; secret says what is missing, exit 1.
    let json: serde_json::Value =
        serde_json::from_slice(&meshpilot(http, &["proxy-config", "clusters", SIDECAR, "-o", "json"]).stdout)
            .unwrap();
    assert!(
        json.as_array().unwrap().iter().any(|c| c["name"] == "outbound|9080|v2|reviews.example.com"),
        "{json}"
    );
    let secret = meshpilot(http, &["proxy-config", "secret", SIDECAR]);
    assert_eq!(secret.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&secret.stderr).contains("no secrets"), "{secret:?}");
    // proxy-config needs one proxy: unknown (with close matches) and ambiguous names exit 1.
    let unknown = meshpilot(http, &["proxy-config", "routes", "reviews-client.shopp"]);
    assert_eq!(unknown.status.code(), Some(1));
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(err.contains("close matches: reviews-client.shop"), "{err}");
    let ambiguous = meshpilot(http, &["proxy-config", "clusters", "e"]);
    assert_eq!(ambiguous.status.code(), Some(1));
    let err = String::from_utf8_lossy(&ambiguous.stderr);
    assert!(
        err.contains("matches several proxies") && err.contains(SIDECAR) && err.contains(GATEWAY),
        "{err}"
    );
    drop((sidecar, gateway));
}

#[test]
fn bad_input_exits_non_zero() {
    // Nothing listens on port 1: the debug client's error, exit 1.
    let out = meshpilot("127.0.0.1:1".parse().unwrap(), &["proxy-status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot reach meshpilot at http://127.0.0.1:1"),
        "{out:?}"
    );
    let out = meshpilot("127.0.0.1:1".parse().unwrap(), &["proxy-config", "clusters", "x.y"]);
    assert_eq!(out.status.code(), Some(1));
    // Usage errors: exit 2.
    assert_eq!(
        meshpilot("127.0.0.1:1".parse().unwrap(), &["proxy-config", "clusters"]).status.code(),
        Some(2)
    );
    assert_eq!(
        meshpilot("127.0.0.1:1".parse().unwrap(), &["proxy-config", "bogus", "x"]).status.code(),
        Some(2)
    );
    assert_eq!(
        meshpilot("127.0.0.1:1".parse().unwrap(), &["proxy-status", "-o", "xml"]).status.code(),
        Some(2)
    );
}

/// A proxy that NACKs its clusters (a scripted SotW ADS client, as Envoy would on a config it
/// rejects): proxy-status shows ERROR for CDS and, for that proxy, Envoy's error text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacked_type_shows_error_and_the_error_text() {
    let work = tempfile::tempdir().unwrap();
    let config_dir = work.path().join("config");
    std::fs::create_dir(&config_dir).unwrap();
    std::fs::write(config_dir.join("mesh.yaml"), config(free_port())).unwrap();
    let mp = Meshpilot::start(&config_dir, work.path());
    let (client, first) = CdsClient::connect(mp.grpc, "nacker", NS, &|| mp.log_text()).await;
    client.nack(&first, "cluster 'x': bad lb config");

    let http = mp.http;
    let verbose = wait_for("CDS in ERROR", Duration::from_secs(30), async || {
        let out = tokio::task::spawn_blocking(move || meshpilot(http, &["proxy-status", "--verbose"]))
            .await
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().any(|l| l.starts_with("nacker.shop") && l.contains("ERROR (")).then_some(text)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", mp.log_text()));
    let header = verbose.lines().next().unwrap();
    let row = verbose.lines().find(|l| l.starts_with("nacker.shop")).unwrap();
    assert!(row[header.find("CDS").unwrap()..].starts_with("ERROR ("), "{verbose}");
    assert!(row[header.find("LDS").unwrap()..].starts_with("IGNORED"), "LDS never asked: {verbose}");

    let single = stdout(&meshpilot(http, &["proxy-status", "nacker.shop"]));
    let cds = single.lines().find(|l| l.starts_with("CDS ")).unwrap_or_else(|| panic!("{single}"));
    assert!(cds.contains("ERROR (") && cds.contains(&first.version_info), "{single}");
    assert!(single.ends_with("CDS NACK: cluster 'x': bad lb config\n"), "{single}");
    drop(client);
}
