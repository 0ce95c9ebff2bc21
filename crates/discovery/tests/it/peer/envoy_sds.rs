//! Certificate files served over SDS to a real Envoy: a Gateway server with `SIMPLE` TLS whose
//! certificate and key are files under `--file-secret-root`; the ingress gateway, connected to the
//! secure xDS port with a workload certificate of the Gateway's namespace, terminates TLS with them
//! and routes to a loopback upstream; rewriting the files rotates the certificate Envoy serves
//! without a restart; a server naming files outside the root is refused and reported. The same names
//! asked for over plaintext, by a proxy of another namespace, or a file no config of the caller
//! names, are refused (docs/SECURITY.md). Needs Envoy (scripts/install-envoy.sh).

use crate::support;

use std::{collections::BTreeSet, net::SocketAddr, path::Path, time::Duration};

use meshpilot_testing::{AdsApi, EchoServer, Envoy, Plane, PlaneOptions, free_port, wait_for};
use sds::FileSecretOptions;
use support::{
    NS,
    secure::{Secure, plaintext_sds, secret_names},
};
use xds::SyncState;

use support::tls::{HOST, TestCa as Ca, https_get};

pub(super) fn write_pair(root: &Path, (cert, key, _): &(String, String, Vec<u8>)) {
    std::fs::write(root.join("cert.pem"), cert).unwrap();
    std::fs::write(root.join("key.pem"), key).unwrap();
}

pub(super) fn gateway_yaml(name: &str, port: u16, host: &str, cert: &Path, key: &Path) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {NS}}}\n\
         spec:\n  selector: {{istio: ingressgateway}}\n  servers:\n  - port: {{number: {port}, name: https, protocol: HTTPS}}\n    \
         hosts: [{host}]\n    tls: {{mode: SIMPLE, serverCertificate: {}, privateKey: {}}}\n",
        cert.display(),
        key.display()
    )
}

/// A plane reading config from `config`, serving certificate files under `certs` (`--file-secret-root`).
pub(super) async fn file_secret_plane(config: &Path, certs: &Path) -> Plane {
    file_secret_plane_with(config, certs, false).await
}

/// [`file_secret_plane`] with `ENABLE_TLS_ON_SIDECAR_INGRESS` set to `tls_on_sidecar_ingress`.
pub(super) async fn file_secret_plane_with(
    config: &Path,
    certs: &Path,
    tls_on_sidecar_ingress: bool,
) -> Plane {
    let options = FileSecretOptions { roots: vec![certs.to_path_buf()], ..FileSecretOptions::default() };
    Plane::start_with(PlaneOptions {
        file_secrets: options,
        tls_on_sidecar_ingress,
        ..PlaneOptions::config_dir(config)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_terminates_tls_with_file_certificates_and_rotates_them() {
    let certs = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    let first = ca.issue("first");
    write_pair(certs.path(), &first);
    let backend = EchoServer::start("secure-backend").await.unwrap();
    let port = free_port();
    std::fs::write(
        config.path().join("secure.yaml"),
        format!(
            "{}---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: secure, namespace: {NS}}}\n\
             spec:\n  hosts: [{HOST}]\n  gateways: [secure]\n  http:\n  - route:\n    - destination: {{host: backend.{NS}.svc.cluster.local, port: {{number: 8080}}}}\n\
             ---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: backend, namespace: {NS}}}\n\
             spec:\n  hosts: [backend.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
             - {{number: 8080, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: backend}}\n\
             ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: backend-1, namespace: {NS}}}\n\
             spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  labels: {{app: backend}}\n",
            gateway_yaml("secure", port, HOST, &certs.path().join("cert.pem"), &certs.path().join("key.pem")),
            backend.addr.port()
        ),
    )
    .unwrap();
    let plane = file_secret_plane(config.path(), certs.path()).await;
    // The ingress gateway runs in the Gateway's namespace and proves it with a workload certificate.
    let secure = Secure::start(&plane).await;
    let mut router = plane.router(AdsApi::Sotw);
    router.node_id = format!("router~127.0.0.1~istio-ingressgateway-1.{NS}~{NS}.svc.cluster.local");
    router.metadata["NAMESPACE"] = NS.into();
    let envoy =
        Envoy::start_json(&secure.secure_bootstrap(router, NS, "istio-ingressgateway")).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let client = ca.client();

    let (status, body, served) = wait_for("HTTPS through the gateway", Duration::from_secs(10), async || {
        https_get(&client, addr).await.ok()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{:#?}\n{}", plane.secrets.status(), envoy.log_tail(40)));
    assert_eq!((status, body.as_str()), (200, "secure-backend"));
    assert_eq!(served, first.2, "Envoy presents the certificate from the file");
    let name = format!("file-cert:{0}/cert.pem~{0}/key.pem", certs.path().display());
    let st = plane.secrets.status();
    assert!(st.iter().any(|s| s.name == name && s.served && s.error.is_none()), "{st:#?}");

    // Nobody else reads the key: not over plaintext (15010 serves no secret), not a router of another
    // namespace that the Gateway's selector also matches, not a file that no config of the caller names.
    let plaintext = plaintext_sds(&plane, NS, &[&name]).await;
    assert_eq!(plaintext.type_url, xds::type_url::SECRET);
    assert!(plaintext.resources.is_empty(), "plaintext got {:?}", secret_names(&plaintext));
    let other_ns = secure.sds_names("other", "istio-ingressgateway", &[&name]).await;
    assert!(other_ns.is_empty(), "a proxy of another namespace got {other_ns:?}");
    let unnamed = format!("file-cert:{0}/key.pem~{0}/key.pem", certs.path().display());
    let own = secure.sds_names(NS, "istio-ingressgateway", &[&name, &unnamed]).await;
    assert_eq!(own, BTreeSet::from([name.clone()]), "only the name its config names");

    // Rotation: the files are rewritten in place (certificate first, then key); Envoy gets the new
    // secret over SDS and serves it on new connections, without a restart.
    let second = ca.issue("second");
    let pushes_before = plane.server.push_count();
    let rotated = std::time::Instant::now();
    write_pair(certs.path(), &second);
    wait_for("the rotated certificate served", Duration::from_secs(10), async || {
        https_get(&client, addr).await.ok().filter(|(_, _, served)| *served == second.2)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{:#?}\n{}", plane.secrets.status(), envoy.log_tail(40)));
    eprintln!("rotated certificate served {:?} after the files were rewritten", rotated.elapsed());
    // The change went through the server's input door as an SDS-only push (`Input::Secrets`): no new
    // push context was built for it.
    assert_eq!(plane.server.push_count(), pushes_before, "a secret change rebuilt the push context");
    for i in 0..5 {
        let (status, body, served) = https_get(&client, addr).await.unwrap();
        assert_eq!((status, body.as_str(), served == second.2), (200, "secure-backend", true), "request {i}");
    }

    // A server naming files outside the root: refused and reported; the first server keeps working.
    let refused_port = free_port();
    std::fs::write(
        config.path().join("refused.yaml"),
        gateway_yaml(
            "refused",
            refused_port,
            "refused.example.com",
            Path::new("/etc/ssl/x.pem"),
            Path::new("/etc/ssl/x-key.pem"),
        ),
    )
    .unwrap();
    let reason = wait_for("the refused secret reported", Duration::from_secs(10), async || {
        plane.secrets.status().into_iter().find(|s| s.name.contains("/etc/ssl/x.pem")).and_then(|s| s.error)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    assert!(reason.contains("outside every --file-secret-root"), "{reason}");
    let (status, _, served) = https_get(&client, addr).await.unwrap();
    assert_eq!((status, served == second.2), (200, true));

    let conns = plane.server.connections().snapshot();
    let sds = &conns[0].types[xds::type_url::SECRET];
    assert_eq!((sds.state, sds.rejects), (SyncState::Acked, 0), "{sds:#?}");
    assert!(conns[0].types.values().all(|t| t.rejects == 0), "{:#?}", conns[0].types);
    let (_, stats) = envoy.admin_get("/stats?filter=update_rejected").await.unwrap();
    assert!(stats.lines().all(|l| l.ends_with(": 0")), "{stats}");
}

/// The secure port's connection cap (`MESHPILOT_XDS_MAX_CONNECTIONS`) is checked at TCP accept, before
/// the TLS handshake: while a client that never starts TLS holds the only place, another client's
/// handshake is refused (the server closes before answering its ClientHello); once the place is
/// free, a handshake completes. (Before, the cap was checked after the handshake, so every client got
/// the server's TLS work first.)
#[tokio::test]
async fn the_secure_ports_connection_cap_applies_before_the_tls_handshake() {
    let config = tempfile::tempdir().unwrap();
    let plane = Plane::start_with(PlaneOptions::config_dir(config.path())).await.unwrap();
    let limits = xds::http2::ConnectionLimits { max_total: 1, max_per_peer: 0 };
    let secure =
        Secure::start_with(&plane, xds::AdsConfig { connection_limits: limits, ..Default::default() }).await;
    let held = tokio::net::TcpStream::connect(secure.addr()).await.unwrap();
    let refused = secure.tls_handshake().await;
    assert!(refused.is_err(), "a handshake over the cap completed");
    drop(held);
    wait_for("a handshake once the place is free", Duration::from_secs(30), async || {
        secure.tls_handshake().await.ok()
    })
    .await
    .unwrap();
}
