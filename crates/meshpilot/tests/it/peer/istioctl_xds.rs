//! The real `istioctl` of the pinned Istio (`scripts/istio-peer.sh build`) against meshpilot's debug
//! types over xDS (`istio.io/debug/syncz`, `…/config_dump`, `istio.io/debug`; docs/DEBUGGING.md):
//! `proxy-status` (table, `-v 1`, `-o json`, and the diff against a proxy's own config dump with
//! `--file`), `x version` (`version --remote` over xDS), `x internal-debug`, with a real sidecar (pilot-agent + Envoy)
//! connected over the secure port. istioctl authenticates with a client certificate (`--cert-dir`,
//! issued by `meshpilot ca issue`), so no cluster is needed; its kubeconfig points nowhere and is never
//! needed by these verbs. The plaintext port answers "authentication required", as istiod's.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use meshpilot_testing::{http, wait::wait_for};
use serde_json::Value;

use super::secure_port::{Meshpilot, Sidecar};
use crate::istio_peer::istioctl;

const CONFIG: &str = "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: default}
spec:
  hosts: [api.example.test]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 127.0.0.9}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: api, namespace: default}
spec:
  hosts: [api.example.test]
  http:
  - timeout: 3s
    route: [{destination: {host: api.example.test}}]
";

/// A client certificate for `namespace/sa` in `dir` (istioctl's `--cert-dir` layout).
fn cert_dir(mp: &Meshpilot, work: &Path, namespace: &str, sa: &str) -> PathBuf {
    let dir = work.join(format!("certs-{namespace}-{sa}"));
    let out = Command::new(env!("CARGO_BIN_EXE_meshpilot"))
        .args(["ca", "issue", "--namespace", namespace, "--service-account", sa])
        .arg("--ca-dir")
        .arg(&mp.ca_dir)
        .arg("--root-ca-dir")
        .arg(work.join("no-plugged-ca"))
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// istioctl against `addr` with the certificate in `certs`; (exit success, stdout, stderr).
fn run_istioctl(work: &Path, addr: &str, certs: Option<&Path>, args: &[&str]) -> (bool, String, String) {
    // A kubeconfig that names an unreachable server: istioctl builds its client from it but these
    // verbs with --xds-address and --revision never need it (without --revision istioctl waits for
    // the cluster's default revision; a pod lookup that fails means "not ztunnel").
    let kubeconfig = work.join("nowhere.kubeconfig");
    if !kubeconfig.exists() {
        std::fs::write(
            &kubeconfig,
            "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
             users: [{name: u, user: {token: none}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n\
             current-context: x\n",
        )
        .unwrap();
    }
    let mut cmd = Command::new(istioctl());
    cmd.args(args).arg("--kubeconfig").arg(&kubeconfig).args(["--xds-address", addr, "--timeout", "20s"]);
    cmd.args(["--revision", "default"]);
    match certs {
        Some(dir) => {
            cmd.arg("--cert-dir").arg(dir).args(["--authority", "istiod.istio-system.svc"]);
        }
        None => {
            cmd.arg("--plaintext");
        }
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn istioctl_reads_proxy_status_version_and_debug_over_xds() {
    let work = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    std::fs::write(config.path().join("api.yaml"), CONFIG).unwrap();
    let mp = Meshpilot::start(config.path(), work.path(), None).await;
    let sidecar = Sidecar::provisioned(&mp, work.path(), "app", "127.0.0.61", &[("POD_NAME", "app-1")]);
    let secure = mp.secure.to_string();
    let system = cert_dir(&mp, work.path(), "istio-system", "istioctl");
    let istioctl = |args: &[&str]| run_istioctl(work.path(), &secure, Some(&system), args);

    // The sidecar is SYNCED on every type once it ACKed what it got.
    let table = wait_for("proxy-status lists app-1.default", Duration::from_secs(30), async || {
        let (ok, out, _) = istioctl(&["proxy-status"]);
        (ok && out.contains("app-1.default")).then_some(out)
    })
    .await
    .unwrap_or_else(|e| {
        let (ok, out, err) = istioctl(&["proxy-status"]);
        panic!("{e}: ok={ok}\n{out}\n{err}\n--- meshpilot ---\n{}", mp.log_text())
    });
    let header: Vec<&str> =
        table.lines().next().unwrap().split("  ").filter(|c| !c.trim().is_empty()).collect();
    assert_eq!(
        header.iter().map(|c| c.trim()).collect::<Vec<_>>(),
        ["NAME", "CLUSTER", "ISTIOD", "VERSION", "SUBSCRIBED TYPES"],
        "{table}"
    );
    let row = table.lines().find(|l| l.starts_with("app-1.default")).unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1], "Kubernetes", "CLUSTER is the node's CLUSTER_ID: {row}");
    let (_, proxystatusz) = http::get(mp.http, "meshpilot", "/debug/proxystatusz", &[]).await.unwrap();
    let cp_id = serde_json::from_str::<Value>(&proxystatusz).unwrap()["controlPlane"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(cols[2], cp_id, "ISTIOD is the control plane's id: {row}");
    let subscribed = row.split_once(&cp_id).unwrap().1;
    for short in ["CDS", "LDS", "EDS", "RDS"] {
        assert!(subscribed.contains(short), "{short} subscribed: {row}");
    }
    // istioctl's own queries are not proxies.
    assert_eq!(table.lines().count(), 2, "one proxy only: {table}");

    // -o json: istiod's ClientConfig per proxy, every Envoy type SYNCED.
    let synced = wait_for("every type SYNCED", Duration::from_secs(30), async || {
        let (_, out, _) = istioctl(&["proxy-status", "-o", "json"]);
        let v: Value = serde_json::from_str(&out).ok()?;
        let configs = v["resources"].as_array().or_else(|| v.as_array())?.clone();
        let app = configs.iter().find(|c| c["node"]["id"] == "app-1.default")?.clone();
        let all = app["genericXdsConfigs"].as_array()?.iter().all(|t| t["configStatus"] == "SYNCED");
        all.then_some(app)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {}", istioctl(&["proxy-status", "-o", "json"]).1));
    let types: Vec<&str> = synced["genericXdsConfigs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["typeUrl"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"type.googleapis.com/envoy.config.cluster.v3.Cluster"), "{types:?}");
    assert_eq!(synced["node"]["metadata"]["NAMESPACE"], "default");

    // -v 1: one column per type.
    let (ok, verbose, err) = istioctl(&["proxy-status", "-v", "1"]);
    assert!(ok, "{err}");
    let vrow = verbose.lines().find(|l| l.starts_with("app-1.default")).unwrap();
    assert!(vrow.matches("SYNCED").count() >= 4, "CDS, LDS, EDS, RDS synced: {verbose}");

    // x version (`version --remote` over xDS): the control plane's version from the syncz answer's
    // control_plane, the proxies' versions from their ClientConfigs.
    let (ok, version, err) = istioctl(&["x", "version"]);
    assert!(ok, "{err}");
    assert!(version.contains(&format!("control plane version: {}", env!("CARGO_PKG_VERSION"))), "{version}");
    assert!(version.contains("(1 proxies)"), "{version}");

    // x internal-debug: the HTTP handler's body, over xDS.
    let (ok, debug, err) = istioctl(&["x", "internal-debug", "syncz"]);
    assert!(ok, "{err}");
    assert!(debug.contains("app-1.default"), "{debug}");
    let (ok, config_dump, err) = istioctl(&["x", "internal-debug", "config_dump?proxyID=app-1.default"]);
    assert!(ok, "{err}");
    assert!(config_dump.contains("type.googleapis.com/envoy.admin.v3.ClustersConfigDump"), "{config_dump}");

    // proxy-status POD --file: istioctl diffs meshpilot's config dump against Envoy's own.
    let admin = std::net::SocketAddr::from(([127, 0, 0, 1], sidecar.admin_port()));
    let (status, envoy_dump) = http::get(admin, "localhost", "/config_dump", &[]).await.unwrap();
    assert_eq!(status, 200);
    let dump_file = work.path().join("envoy-dump.json");
    std::fs::write(&dump_file, &envoy_dump).unwrap();
    let (ok, diff, err) = istioctl(&["proxy-status", "app-1.default", "--file", dump_file.to_str().unwrap()]);
    assert!(ok, "{err}\n{diff}");
    for section in ["Clusters Match", "Listeners Match", "Routes Match"] {
        assert!(diff.contains(section), "{section}:\n{diff}");
    }

    // A caller of another namespace (its node in its own namespace, `-i`, or the identity check
    // refuses the stream, as istiod's): syncz of its namespace's proxies only, no generic debug paths.
    let other = cert_dir(&mp, work.path(), "shop", "viewer");
    let (ok, theirs, err) = run_istioctl(work.path(), &secure, Some(&other), &["proxy-status", "-i", "shop"]);
    assert!(ok, "{err}");
    assert!(!theirs.contains("app-1.default"), "a default-namespace proxy is not shown to shop: {theirs}");
    let (ok, _, err) =
        run_istioctl(work.path(), &secure, Some(&other), &["x", "internal-debug", "configz", "-i", "shop"]);
    assert!(!ok && err.contains("the debug info is not available for current identity"), "{err}");

    // The plaintext port: no identity, no debug answers.
    let (ok, _, err) = run_istioctl(work.path(), &mp.grpc.to_string(), None, &["proxy-status"]);
    assert!(!ok && err.contains("authentication required"), "{err}");
}

/// istioctl with a kubeconfig (token mode: it requests an `istio-ca` token for `istio-system/default`
/// through the TokenRequest API and sends it to 15012), against meshpilot and the real istiod reading
/// the same API server: the same verbs succeed on both with the same layout, and both refuse the
/// plaintext port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn istioctl_token_mode_matches_istiod() {
    let env = kube_source::testenv::TestEnv::shared_by(file!());
    super::secure_port::ensure_service_account(env, "istio-system", "default");
    let kubeconfig = env.kubeconfig();
    let work = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    std::fs::write(config.path().join("api.yaml"), CONFIG).unwrap();
    let mp = Meshpilot::start(config.path(), work.path(), Some(&kubeconfig)).await;
    let _sidecar = Sidecar::provisioned(&mp, work.path(), "app", "127.0.0.62", &[("POD_NAME", "app-2")]);
    let istiod_dir = work.path().join("istiod");
    std::fs::create_dir_all(&istiod_dir).unwrap();
    let istiod = crate::istio_peer::Istiod::start(&istiod_dir, &kubeconfig, "");
    let istiod_secure = format!("127.0.0.1:{}", istiod.base + 12);

    let token_mode = |addr: &str, args: &[&str]| {
        let out = Command::new(istioctl())
            .args(args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--xds-address", addr, "--timeout", "20s"])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let ours = wait_for("meshpilot lists app-2.default", Duration::from_secs(30), async || {
        let (ok, out, _) = token_mode(&mp.secure.to_string(), &["proxy-status"]);
        (ok && out.contains("app-2.default")).then_some(out)
    })
    .await
    .unwrap_or_else(|e| {
        panic!("{e}: {:?}\n{}", token_mode(&mp.secure.to_string(), &["proxy-status"]), mp.log_text())
    });
    let (ok, theirs, err) = token_mode(&istiod_secure, &["proxy-status"]);
    assert!(ok, "istiod: {err}\n{}", istiod.log());
    let header =
        |t: &str| t.lines().next().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(header(&ours), header(&theirs), "same layout:\n{ours}\n{theirs}");

    for addr in [mp.secure.to_string(), istiod_secure.clone()] {
        let (ok, version, err) = token_mode(&addr, &["x", "version"]);
        assert!(ok, "{addr}: {err}");
        assert!(version.contains("control plane version: "), "{addr}: {version}");
        let (ok, syncz, err) = token_mode(&addr, &["x", "internal-debug", "syncz"]);
        assert!(ok, "{addr}: {err}");
        if addr == mp.secure.to_string() {
            assert!(syncz.contains("app-2.default"), "{syncz}");
        }
    }
    // Both refuse debug answers on the plaintext port.
    for addr in [mp.grpc.to_string(), istiod.xds().to_string()] {
        let (ok, _, err) = run_istioctl(work.path(), &addr, None, &["proxy-status"]);
        assert!(!ok && err.contains("authentication required"), "{addr}: {err}");
    }
}
