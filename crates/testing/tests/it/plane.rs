//! The in-process control plane: ready, serving its debug HTTP and ADS, reading its config directory.

use std::time::Duration;

use meshpilot_testing::{Plane, PlaneOptions, get, wait_until};

const GATEWAY: &str = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: ns}\n\
spec:\n  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plane_answers_ready_and_serves_its_config_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gw.yaml"), GATEWAY).unwrap();
    let plane = Plane::start(dir.path()).await;
    assert!(plane.server.is_ready());
    assert_eq!(get(plane.http, "localhost", "/ready", &[]).await.unwrap(), (200, "ready\n".to_owned()));
    let (status, configz) = get(plane.http, "localhost", "/debug/configz", &[]).await.unwrap();
    assert_eq!(status, 200);
    let objects: serde_json::Value = serde_json::from_str(&configz).unwrap();
    assert_eq!(objects[0]["kind"], "Gateway", "{configz}");
    assert_eq!(objects[0]["metadata"]["name"], "gw", "{configz}");
    assert!(plane.files().status().bad_files.is_empty());
    tokio::net::TcpStream::connect(plane.ads.addr).await.expect("ADS listens");

    // The directory is watched: a new object reaches the store.
    std::fs::write(dir.path().join("gw2.yaml"), GATEWAY.replace("name: gw,", "name: gw2,")).unwrap();
    wait_until("gw2 in the store", Duration::from_secs(10), || {
        plane.server.store().get(api::Kind::Gateway, "ns", "gw2").is_some()
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_missing_config_dir_is_an_error_naming_it() {
    let options = PlaneOptions::config_dir("/nonexistent/meshpilot-config");
    let e = Plane::start_with(options).await.err().expect("no plane");
    assert!(e.to_string().contains("/nonexistent/meshpilot-config"), "{e}");
}
