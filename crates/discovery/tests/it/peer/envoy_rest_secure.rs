//! REST-JSON xDS on the secure port (15012, issue 45): a real Envoy whose only config sources are
//! `api_type: REST` through a cluster to the secure port (HTTP/2, TLS, a workload certificate of its
//! namespace issued by the control plane's CA) routes traffic from meshpilot's config; polls without
//! a certificate are `401`, a certificate of another namespace gets no config of this one (`403`),
//! and SDS over REST gives an identity exactly what ADS on the same port gives it. With `XDS_AUTH=false`
//! (Istio's switch for the secure port) a poll needs no credentials and gets config, but never a
//! secret: no poll then has a verified identity, as istiod's SDS requires one. Needs Envoy
//! (scripts/install-envoy.sh).

use std::{collections::BTreeSet, net::SocketAddr, time::Duration};

use meshpilot_testing::{AdsApi, Bootstrap, EchoServer, Envoy, Plane, free_port, get, http_get, wait_for};
use serde_json::{Value, json};

use super::envoy_sds::{file_secret_plane, gateway_yaml, write_pair};
use crate::support::{
    NS, echo_registry,
    secure::{Secure, rest_post},
    tls::{HOST, TestCa},
};

/// A JSON `DiscoveryRequest` of the proxy `node_id` in `namespace` with `labels`.
fn request(node_id: &str, namespace: &str, labels: Value, version: &str, names: &[&str]) -> Vec<u8> {
    json!({
        "versionInfo": version,
        "node": {"id": node_id, "metadata": {"NAMESPACE": namespace, "ISTIO_VERSION": "1.28.0",
                 "INSTANCE_IPS": "127.0.0.9", "INTERCEPTION_MODE": "NONE", "LABELS": labels}},
        "resourceNames": names,
    })
    .to_string()
    .into_bytes()
}

fn gateway_request(namespace: &str, version: &str, names: &[&str]) -> Vec<u8> {
    request(
        &format!("router~127.0.0.9~gw-1.{namespace}~{namespace}.svc.cluster.local"),
        namespace,
        json!({"istio": "ingressgateway"}),
        version,
        names,
    )
}

fn resource_names(body: &str) -> BTreeSet<String> {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rest_envoy_polls_the_secure_port_with_its_workload_certificate() {
    let echo = EchoServer::start("echo").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(dir.path().join("echo-registry.yaml"), echo_registry(port, echo.addr.port())).unwrap();
    let plane = Plane::start(dir.path()).await;
    let secure = Secure::start(&plane).await;
    let bootstrap = Bootstrap::sidecar_in("client", NS, secure.addr(), AdsApi::Rest);
    let envoy = Envoy::start_json(&secure.rest_bootstrap(bootstrap, NS, "client")).await.unwrap();
    // CDS and LDS over REST on 15012, then RDS and EDS through the REST sources meshpilot wrote: the
    // request reaches the upstream.
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let host = format!("echo:{port}");
    let answered = wait_for("/hello through the REST sidecar", Duration::from_secs(20), async || {
        get(addr, &host, "/hello", &[]).await.ok().filter(|(s, _)| *s == 200)
    })
    .await;
    let (_, body) = answered.unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(60)));
    assert!(body.starts_with("echo"), "{body}");
    let dump = envoy.config_dump(false).await.unwrap().to_string();
    assert!(!dump.contains(r#""ads":{}"#), "an ADS config source reached a REST-only Envoy");
    assert!(dump.contains(r#""api_type":"REST""#), "{dump}");
    envoy.assert_no_rejected_updates().await;
    // Listed as polling, with the address it polled the secure port from.
    let (status, body) = http_get(plane.http, "/debug/proxystatusz", &[]).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let proxy = v["proxies"].as_array().unwrap().iter().find(|p| p["proxy"] == "client.default").cloned();
    let proxy = proxy.unwrap_or_else(|| panic!("the REST sidecar is not listed: {v}"));
    assert_eq!((&proxy["protocol"], &proxy["polling"]), (&json!("rest"), &json!(true)), "{proxy}");
}

/// A Gateway in NS whose server certificate is a file (the secret an ingress gateway of NS may read),
/// and a plane serving it.
struct GatewayFiles {
    _certs: tempfile::TempDir,
    _config: tempfile::TempDir,
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
    plane: Plane,
}

impl GatewayFiles {
    async fn new() -> GatewayFiles {
        let certs = tempfile::tempdir().unwrap();
        let config = tempfile::tempdir().unwrap();
        write_pair(certs.path(), &TestCa::new().issue("first"));
        let (cert, key) = (certs.path().join("cert.pem"), certs.path().join("key.pem"));
        std::fs::write(config.path().join("gw.yaml"), gateway_yaml("secure", free_port(), HOST, &cert, &key))
            .unwrap();
        let plane = file_secret_plane(config.path(), certs.path()).await;
        GatewayFiles { _certs: certs, _config: config, cert, key, plane }
    }

    /// The SDS name of the Gateway's certificate.
    fn secret(&self) -> String {
        format!("file-cert:{}~{}", self.cert.display(), self.key.display())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn secure_polls_are_authenticated_and_scoped_to_the_callers_namespace() {
    let g = GatewayFiles::new().await;
    let secure = Secure::start(&g.plane).await;
    let (secret, unnamed) = (g.secret(), format!("file-cert:{}~{}", g.key.display(), g.key.display()));
    let own = secure.channel_as(NS, "istio-ingressgateway").await;
    let other = secure.channel_as("other", "istio-ingressgateway").await;

    // No certificate (and no token): refused before the body is read.
    let anonymous = secure.channel_anonymous().await;
    let (status, body) = rest_post(&anonymous, "/v3/discovery:clusters", &gateway_request(NS, "", &[])).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("authentication failure"), "{body}");

    // Its own namespace's node: config, and a 304 for the version it holds.
    let (status, body) = rest_post(&own, "/v3/discovery:listeners", &gateway_request(NS, "", &[])).await;
    assert_eq!(status, 200, "{body}");
    let version = serde_json::from_str::<Value>(&body).unwrap()["versionInfo"].as_str().unwrap().to_string();
    assert!(!resource_names(&body).is_empty(), "{body}");
    let (status, body) =
        rest_post(&own, "/v3/discovery:listeners", &gateway_request(NS, &version, &[])).await;
    assert_eq!((status, body.as_str()), (304, ""));

    // Another namespace's certificate claiming a node of NS: nothing of NS, not even a 304.
    for (path, version) in [("/v3/discovery:listeners", ""), ("/v3/discovery:listeners", version.as_str())] {
        let (status, body) = rest_post(&other, path, &gateway_request(NS, version, &[])).await;
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("matched namespace default"), "{body}");
    }
    let (status, body) =
        rest_post(&other, "/v3/discovery:secrets", &gateway_request(NS, "", &[secret.as_str()])).await;
    assert_eq!(status, 403, "{body}");

    // SDS gives each identity what ADS on this port gives it: its own config's file, not another file.
    let names = [secret.as_str(), unnamed.as_str()];
    let (status, body) = rest_post(&own, "/v3/discovery:secrets", &gateway_request(NS, "", &names)).await;
    assert_eq!(status, 200, "{body}");
    let over_rest = resource_names(&body);
    assert_eq!(over_rest, BTreeSet::from([secret.clone()]));
    assert_eq!(over_rest, secure.sds_names(NS, "istio-ingressgateway", &names).await);
    // A gateway of the other namespace (its own certificate): no secret, as over ADS.
    let (status, body) =
        rest_post(&other, "/v3/discovery:secrets", &gateway_request("other", "", &names)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(resource_names(&body), secure.sds_names("other", "istio-ingressgateway", &names).await);
    assert!(resource_names(&body).is_empty(), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_xds_auth_off_polls_get_config_but_no_secret() {
    let g = GatewayFiles::new().await;
    let secure = Secure::start_with_auth(&g.plane, xds::AdsConfig::default(), false).await;
    let secret = g.secret();

    // No certificate, no token: config of any namespace, and the 304 for the version held.
    let anonymous = secure.channel_anonymous().await;
    let (status, body) =
        rest_post(&anonymous, "/v3/discovery:listeners", &gateway_request(NS, "", &[])).await;
    assert_eq!(status, 200, "{body}");
    assert!(!resource_names(&body).is_empty(), "{body}");
    let version = serde_json::from_str::<Value>(&body).unwrap()["versionInfo"].as_str().unwrap().to_string();
    let (status, body) =
        rest_post(&anonymous, "/v3/discovery:listeners", &gateway_request(NS, &version, &[])).await;
    assert_eq!((status, body.as_str()), (304, ""));
    // Without authentication no caller is verified, so a certificate of another namespace claiming a
    // node of NS is not refused either (the identity check needs an authenticated caller).
    let other = secure.channel_as("other", "istio-ingressgateway").await;
    let (status, body) = rest_post(&other, "/v3/discovery:listeners", &gateway_request(NS, "", &[])).await;
    assert_eq!(status, 200, "{body}");

    // Secrets: refused over REST to every caller, and over ADS on the same port nothing is sent.
    for channel in [&anonymous, &other] {
        let (status, body) =
            rest_post(channel, "/v3/discovery:secrets", &gateway_request(NS, "", &[secret.as_str()])).await;
        assert_eq!(status, 403, "{body}");
    }
    assert!(secure.sds_names(NS, "istio-ingressgateway", &[secret.as_str()]).await.is_empty());
}
