//! The whole control plane against a real Envoy over Istio's own config corpus: every file of
//! `tests/testdata/config/` and every `samples/**/networking/*.yaml`, served to a sidecar and to an
//! ingress gateway, must be ACKed by Envoy. Needs Envoy (scripts/install-envoy.sh).

use crate::support;

use std::{net::SocketAddr, path::Path, time::Duration};

use meshpilot_testing::{AdsApi, Bootstrap, EchoServer, Envoy, Plane, free_port, get, wait_for};
use support::{NS, copy_samples, router, setup};
use xds::SyncState;

/// Every corpus file copied (flattened, without renaming collisions away) into `dir`; returns how
/// many were copied.
fn copy_corpus(dir: &Path) -> usize {
    let root = meshpilot_testing::testdata();
    let mut files = Vec::new();
    for e in std::fs::read_dir(root.join("tests/testdata/config")).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            files.push(p);
        }
    }
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "yaml")
                && p.parent().and_then(Path::file_name).is_some_and(|n| n == "networking")
            {
                out.push(p);
            }
        }
    }
    walk(&root.join("samples"), &mut files);
    files.sort();
    for p in &files {
        let rel = p.strip_prefix(&root).unwrap().to_string_lossy().replace('/', "__");
        std::fs::copy(p, dir.join(rel)).unwrap();
    }
    files.len()
}

fn sidecar(plane: &Plane, api: AdsApi) -> Bootstrap {
    let mut b = Bootstrap::sidecar("productpage", plane.ads.addr, api);
    b.node_id = "sidecar~127.0.0.1~productpage-1.default~default.svc.cluster.local".to_owned();
    b.metadata["NAMESPACE"] = "default".into();
    b
}

/// All `*.update_rejected` counters of Envoy that are not 0, plus whether the CDS and LDS ones exist.
async fn rejected_stats(envoy: &Envoy) -> (Vec<String>, bool) {
    let (_, body) = envoy.admin_get("/stats?filter=update_rejected").await.unwrap();
    let nonzero = body
        .lines()
        .filter(|l| l.split_once(": ").is_some_and(|(_, v)| v.trim() != "0"))
        .map(str::to_owned)
        .collect();
    let present = body.contains("cluster_manager.cds.update_rejected")
        && body.contains("listener_manager.lds.update_rejected");
    (nonzero, present)
}

/// Serves the whole corpus to the Envoy `bootstrap` builds: every type it watches (CDS, EDS, LDS, RDS,
/// and SDS for the certificate files DestinationRules and Gateways name) reaches ACK, with no NACK at
/// all, and Envoy's `*.update_rejected` counters stay 0.
///
/// The corpus's certificate files (`/etc/certs/…`, `tests/testdata/certs/…`) do not exist and no
/// `--file-secret-root` is given, so their `file-cert:`/`file-root:` secrets are not answered: the
/// clusters and listeners using them warm until Envoy's SDS initial fetch timeout (15 s), which holds
/// the proxy's first LDS request back by that long (clusters warm before listeners are asked for). Before SDS, those paths were in CDS/LDS and Envoy
/// rejected the whole update.
async fn corpus_acked(label: &str, bootstrap: impl Fn(&Plane) -> Bootstrap) {
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let n = copy_corpus(dir.path());
    assert!(n > 40, "corpus has only {n} files");
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&bootstrap(&plane)).await.unwrap();
    let want = [
        xds::type_url::CLUSTER,
        xds::type_url::ENDPOINT,
        xds::type_url::LISTENER,
        xds::type_url::ROUTE,
        xds::type_url::SECRET,
    ];
    let settled = |s: &xds::TypeStatus| matches!(s.state, SyncState::Acked | SyncState::Rejected);
    let res = wait_for("every type answered", Duration::from_secs(40), async || {
        let conns = plane.server.connections().snapshot();
        let c = conns.first()?;
        want.iter().all(|t| c.types.get(*t).is_some_and(settled)).then_some(())
    })
    .await;
    let conns = plane.server.connections().snapshot();
    let status = format!("{:#?}", conns.first().map(|c| &c.types));
    res.unwrap_or_else(|e| panic!("{label}: {e}\nour status: {status}\n{}", envoy.log_tail(60)));
    let c = &conns[0];
    let rejected: Vec<(&String, Option<&String>)> = c
        .types
        .iter()
        .filter(|(_, s)| s.rejects > 0 || s.state == SyncState::Rejected)
        .map(|(t, s)| (t, s.last_error.as_ref()))
        .collect();
    assert!(rejected.is_empty(), "{label}: NACKs: {rejected:#?}\n{}", envoy.log_tail(60));
    for t in want {
        assert_eq!(c.types[t].state, SyncState::Acked, "{label}: {t}");
    }
    let secrets = &c.types[xds::type_url::SECRET].watch.names;
    assert!(
        secrets.iter().any(|n| n.starts_with("file-cert:") || n.starts_with("file-root:")),
        "the corpus's certificate files are asked for over SDS: {secrets:?}"
    );
    let (nonzero, present) = rejected_stats(&envoy).await;
    assert!(present, "Envoy has no CDS/LDS update_rejected stats");
    assert!(nonzero.is_empty(), "Envoy's update_rejected counters: {nonzero:?}");
    let files = plane.files().status();
    assert!(files.bad_files.is_empty(), "{:?}", files.bad_files);
    let refused = plane.secrets.status();
    assert!(
        refused
            .iter()
            .all(|s| !s.served && s.error.as_deref().is_some_and(|e| e.contains("--file-secret-root")))
    );
    eprintln!(
        "{label}: {n} corpus files, {} objects, SDS names {secrets:?} (refused: no --file-secret-root), resources {:?}, {:?}",
        files.objects,
        c.types
            .iter()
            .map(|(t, s)| (t.rsplit('.').next().unwrap_or(t), s.last_resources))
            .collect::<Vec<_>>(),
        started.elapsed()
    );
}

/// Sidecar and router, SotW and Delta: zero NACKs. The four run concurrently in one test because each
/// waits out Envoy's 15 s SDS initial fetch timeout (see [`corpus_acked`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn corpus_zero_nacks_sidecar_and_router_sotw_and_delta() {
    tokio::join!(
        corpus_acked("sidecar SotW", |p| sidecar(p, AdsApi::Sotw)),
        corpus_acked("sidecar Delta", |p| sidecar(p, AdsApi::Delta)),
        corpus_acked("router SotW", |p| router(p, AdsApi::Sotw)),
        corpus_acked("router Delta", |p| router(p, AdsApi::Delta)),
    );
}

/// `bookinfo-gateway.yaml` (its port moved to a free one) + productpage as a ServiceEntry/WorkloadEntry
/// on a loopback echo server: the ingress gateway routes `/productpage` there and 404s the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_routes_productpage() {
    let dir = tempfile::tempdir().unwrap();
    let productpage = EchoServer::start("productpage-v1").await.unwrap();
    let gw_port = free_port();
    copy_samples(dir.path(), &["samples/bookinfo/networking/bookinfo-gateway.yaml"], NS);
    let gw = dir.path().join("bookinfo-gateway.yaml");
    let text = std::fs::read_to_string(&gw).unwrap();
    assert!(text.contains("number: 8080"));
    std::fs::write(&gw, text.replace("number: 8080", &format!("number: {gw_port}"))).unwrap();
    std::fs::write(
        dir.path().join("productpage-registry.yaml"),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: productpage, namespace: {NS}}}\n\
             spec:\n  hosts: [productpage.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
             - {{number: 9080, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: productpage}}\n\
             ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: productpage-v1, namespace: {NS}}}\n\
             spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  labels: {{app: productpage, version: v1}}\n",
            productpage.addr.port()
        ),
    )
    .unwrap();
    let plane = Plane::start(dir.path()).await;
    let envoy = Envoy::start(&router(&plane, AdsApi::Sotw)).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], gw_port).into();
    let host = "bookinfo.example.com";
    wait_for("/productpage through the gateway", Duration::from_secs(10), async || {
        matches!(get(addr, host, "/productpage", &[]).await, Ok((200, _))).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    for i in 0..10 {
        let (s, body) = get(addr, host, "/productpage", &[]).await.unwrap();
        assert_eq!((s, body.as_str()), (200, "productpage-v1"), "request {i}");
        let (s, _) = get(addr, host, "/nothing", &[]).await.unwrap();
        assert_eq!(s, 404, "request {i}");
    }
    let (nonzero, _) = rejected_stats(&envoy).await;
    assert!(nonzero.is_empty(), "{nonzero:?}");
}

/// Writes a ServiceEntry `marker-<n>.example` (one static endpoint) into `dir` and waits until `envoy`
/// has its cluster with that endpoint. Pushes go out in order, each carrying every change read before
/// it, so after this returns no push for an earlier file change is still on its way: the positive
/// signal that lets a test check that an earlier (bad) change was *not* applied.
async fn marker_served(dir: &Path, envoy: &Envoy, n: u32) {
    let host = format!("marker-{n}.example");
    std::fs::write(
        dir.join(format!("marker-{n}.yaml")),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: marker-{n}, namespace: {NS}}}\n\
             spec:\n  hosts: [{host}]\n  location: MESH_EXTERNAL\n  ports: [{{number: 80, name: http, protocol: HTTP}}]\n  \
             resolution: STATIC\n  endpoints: [{{address: 127.0.0.9}}]\n"
        ),
    )
    .unwrap();
    let stat = format!("cluster.outbound|80||{host}.membership_total");
    wait_for(&format!("{host} served"), Duration::from_secs(10), async || {
        (envoy.stat(&stat).await.ok().flatten() == Some(1)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
}

/// An invalid rewrite of the VirtualService file keeps the last good routing in force and is
/// reported with its line; a valid rewrite afterwards applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_virtual_service_keeps_last_good_config() {
    let vs = "virtual-service-reviews-jason-v2-v3.yaml";
    let (dir, _reviews, plane, envoy, addr) = setup(AdsApi::Sotw, vs).await;
    let host = format!("reviews:{}", addr.port());
    let target = dir.path().join(vs);
    let good = std::fs::read_to_string(&target).unwrap();
    let write = |text: &str| {
        let tmp = dir.path().join(".vs.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &target).unwrap();
    };
    // The v3 route gets a negative weight.
    assert!(good.contains("subset: v3\n"));
    let bad = good.replace("subset: v3\n", "subset: v3\n      weight: -1\n");
    assert_ne!(bad, good);
    write(&bad);
    let status = wait_for("the bad file reported", Duration::from_secs(5), async || {
        let st = plane.files().status();
        st.bad_files.iter().find(|b| b.file.ends_with(vs)).cloned()
    })
    .await
    .unwrap();
    eprintln!("bad file status: {:?}", status.errors);
    assert!(status.errors.iter().any(|e| e.line > 0), "no line in {:?}", status.errors);
    assert!(status.kept_objects >= 1);
    marker_served(dir.path(), &envoy, 1).await;
    for i in 0..20 {
        let (s, body) = get(addr, &host, "/", &[("end-user", "jason")]).await.unwrap();
        assert_eq!((s, body.as_str()), (200, "reviews-v2"), "jason request {i}");
        let (s, body) = get(addr, &host, "/", &[]).await.unwrap();
        assert_eq!((s, body.as_str()), (200, "reviews-v3"), "anonymous request {i}");
    }
    // A YAML syntax error next.
    write(&format!("{good}\n  http: [oops\n"));
    wait_for("the syntax error reported", Duration::from_secs(5), async || {
        let st = plane.files().status();
        st.bad_files.iter().find(|b| b.file.ends_with(vs) && b.errors.iter().any(|e| e.line > 0)).cloned()
    })
    .await
    .unwrap();
    marker_served(dir.path(), &envoy, 2).await;
    for i in 0..10 {
        let (s, body) = get(addr, &host, "/", &[("end-user", "jason")]).await.unwrap();
        assert_eq!((s, body.as_str()), (200, "reviews-v2"), "jason request {i} after syntax error");
    }
    // A valid rewrite: everyone to v3 (jason too).
    let v3 = std::fs::read_to_string(
        meshpilot_testing::testdata().join("samples/bookinfo/networking/virtual-service-reviews-v3.yaml"),
    )
    .unwrap()
    .replace("metadata:\n", &format!("metadata:\n  namespace: {NS}\n"));
    write(&v3);
    wait_for("jason moved to v3", Duration::from_secs(5), async || {
        matches!(get(addr, &host, "/", &[("end-user", "jason")]).await, Ok((200, b)) if b == "reviews-v3")
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    assert!(plane.files().status().bad_files.is_empty(), "{:?}", plane.files().status().bad_files);
}

/// A node id that is not `TYPE~IP~ID~DOMAIN` is refused with InvalidArgument naming the format; a
/// valid proxy connected to the same server keeps being served.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn malformed_node_id_is_refused() {
    let (_dir, _reviews, plane, _good, addr) = setup(AdsApi::Sotw, "virtual-service-reviews-v3.yaml").await;
    let mut b = support::sidecar("broken", &plane, AdsApi::Sotw);
    b.node_id = "not-a-valid-id".to_owned();
    let bad = Envoy::start(&b).await.unwrap();
    // Envoy logs the stream's close status: `... closed: 3, <message>`.
    let line = wait_for("Envoy to log the refused stream", Duration::from_secs(10), async || {
        bad.log().lines().map(meshpilot_testing::percent_decode).find(|l| l.contains("closed: 3,"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", bad.log_tail(40)));
    eprintln!("{line}");
    assert!(line.contains("TYPE~IP~ID~DOMAIN"), "{line}");
    assert_eq!(plane.server.connections().len(), 1);
    let host = format!("reviews:{}", addr.port());
    for _ in 0..5 {
        let (s, body) = get(addr, &host, "/", &[]).await.unwrap();
        assert_eq!((s, body.as_str()), (200, "reviews-v3"));
    }
    // And a new valid proxy still connects.
    let other = Envoy::start(&support::sidecar("ratings", &plane, AdsApi::Delta)).await.unwrap();
    wait_for("second proxy connected", Duration::from_secs(10), async || {
        (plane.server.connections().len() == 2).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", other.log_tail(40)));
    other.wait_live(Duration::from_secs(10)).await.unwrap();
}
