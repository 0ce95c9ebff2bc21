//! Resolver tests against a local HTTP server. Every wait is for a positive signal (the change
//! counter, or the server having answered), bounded by [`LIMIT`] only so a broken test cannot hang.

use std::{
    collections::HashMap,
    convert::Infallible,
    net::SocketAddr,
    sync::{
        Mutex as StdMutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use meshpilot_testing::jwt::TestKey;
use tokio::net::TcpListener;

use super::*;

/// Upper bound of any wait here (not an assertion on speed).
const LIMIT: Duration = Duration::from_secs(20);

/// What the test server answers per path: status and body.
#[derive(Default)]
struct Routes {
    answers: StdMutex<HashMap<String, (u16, String)>>,
    requests: AtomicUsize,
}

impl Routes {
    fn set(&self, path: &str, status: u16, body: impl Into<String>) {
        self.answers.lock().unwrap().insert(path.to_string(), (status, body.into()));
    }
}

/// The test server's answer: from `routes`, 404 for unknown paths; a 3xx answer's body is its
/// `Location`.
async fn answer(
    routes: Arc<Routes>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    routes.requests.fetch_add(1, Ordering::SeqCst);
    let answer = routes.answers.lock().unwrap().get(request.uri().path()).cloned();
    let (status, body) = answer.unwrap_or((404, "no such path".into()));
    let mut response = Response::builder().status(status);
    if (300..400).contains(&status) {
        response = response.header("location", body.clone());
    }
    Ok(response.body(Full::new(Bytes::from(body))).unwrap())
}

/// A loopback HTTP/1.1 server answering from `routes`, over TLS when `tls` is given; runs until the
/// test's runtime ends.
async fn serve_on(listener: TcpListener, routes: Arc<Routes>) {
    serve(listener, routes, None).await;
}

async fn serve(listener: TcpListener, routes: Arc<Routes>, tls: Option<tokio_rustls::TlsAcceptor>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { return };
        let routes = routes.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(routes.clone(), request));
            let http = hyper::server::conn::http1::Builder::new();
            let _ = match tls {
                None => http.serve_connection(TokioIo::new(stream), service).await,
                Some(acceptor) => {
                    let Ok(stream) = acceptor.accept(stream).await else { return };
                    http.serve_connection(TokioIo::new(stream), service).await
                }
            };
        });
    }
}

async fn server() -> (SocketAddr, Arc<Routes>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let routes = Arc::new(Routes::default());
    tokio::spawn(serve_on(listener, routes.clone()));
    (addr, routes)
}

/// Fast options for tests: no system roots, short retry and failure intervals, long refresh.
fn fast() -> JwksOptions {
    JwksOptions {
        refresh_interval: Duration::from_secs(3600),
        refresh_interval_on_failure: Duration::from_millis(50),
        refresh_backoff_max: Duration::from_millis(200),
        retry_interval: Duration::from_millis(20),
        refresh_retries: 2,
        system_roots: false,
        extra_root_ca_paths: Vec::new(),
        ..JwksOptions::default()
    }
}

/// Waits for the next change of the counter.
async fn next_change(rx: &mut watch::Receiver<u64>) {
    tokio::time::timeout(LIMIT, rx.changed())
        .await
        .expect("a change within the limit")
        .expect("resolver alive");
}

/// Waits until `resolver` answers something other than Pending for the key, returning it.
async fn settled(
    resolver: &JwksResolver,
    rx: &mut watch::Receiver<u64>,
    issuer: &str,
    uri: &str,
) -> JwksState {
    loop {
        let state = resolver.jwks(issuer, uri);
        if state != JwksState::Pending {
            return state;
        }
        next_change(rx).await;
    }
}

#[tokio::test]
async fn resolves_in_the_background_and_notifies() {
    let (addr, routes) = server().await;
    let key = TestKey::generate();
    routes.set("/keys", 200, key.jwks_json());
    let resolver = JwksResolver::new(fast());
    let mut rx = resolver.subscribe();
    let uri = format!("http://{addr}/keys");
    assert_eq!(resolver.jwks("https://issuer", &uri), JwksState::Pending);
    next_change(&mut rx).await;
    assert_eq!(resolver.jwks("https://issuer", &uri), JwksState::Resolved(key.jwks_json()));
    assert_eq!(*rx.borrow(), 1);
    assert_eq!(resolver.len(), 1);
}

#[tokio::test]
async fn refresh_picks_up_a_new_key_set() {
    let (addr, routes) = server().await;
    let (old, new) = (TestKey::generate(), TestKey::generate());
    routes.set("/keys", 200, old.jwks_json());
    let resolver = JwksResolver::new(JwksOptions { refresh_interval: Duration::from_millis(50), ..fast() });
    let mut rx = resolver.subscribe();
    let uri = format!("http://{addr}/keys");
    assert_eq!(settled(&resolver, &mut rx, "iss", &uri).await, JwksState::Resolved(old.jwks_json()));
    routes.set("/keys", 200, new.jwks_json());
    next_change(&mut rx).await;
    assert_eq!(resolver.jwks("iss", &uri), JwksState::Resolved(new.jwks_json()));
}

#[tokio::test]
async fn unreachable_fails_then_recovers() {
    let port = meshpilot_testing::free_port();
    let uri = format!("http://127.0.0.1:{port}/keys");
    let resolver = JwksResolver::new(fast());
    let mut rx = resolver.subscribe();
    let JwksState::Failed(reason) = settled(&resolver, &mut rx, "iss", &uri).await else {
        panic!("expected a failure")
    };
    assert!(reason.contains(&uri), "{reason}");

    // The server comes up on that port: the retries find it.
    let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let routes = Arc::new(Routes::default());
    let key = TestKey::generate();
    routes.set("/keys", 200, key.jwks_json());
    tokio::spawn(serve_on(listener, routes));
    next_change(&mut rx).await;
    assert_eq!(resolver.jwks("iss", &uri), JwksState::Resolved(key.jwks_json()));
}

#[tokio::test]
async fn openid_discovery_finds_the_jwks_uri() {
    let (addr, routes) = server().await;
    let key = TestKey::generate();
    routes.set(
        "/realm/.well-known/openid-configuration",
        200,
        format!(r#"{{"issuer":"x","jwks_uri":"http://{addr}/realm/certs"}}"#),
    );
    routes.set("/realm/certs", 200, key.jwks_json());
    let resolver = JwksResolver::new(fast());
    let mut rx = resolver.subscribe();
    // A trailing slash on the issuer is dropped before the suffix (Istio).
    let issuer = format!("http://{addr}/realm/");
    assert_eq!(settled(&resolver, &mut rx, &issuer, "").await, JwksState::Resolved(key.jwks_json()));
}

#[tokio::test]
async fn bad_answers_are_failures_naming_the_reason() {
    let (addr, routes) = server().await;
    routes.set("/html", 200, "<html>login</html>");
    routes.set("/nokeys", 200, r#"{"issuer":"x"}"#);
    routes.set("/.well-known/openid-configuration", 200, r#"{"jwks_uri": 7}"#);
    let resolver = JwksResolver::new(fast());
    let mut rx = resolver.subscribe();
    let failure = |s: JwksState| match s {
        JwksState::Failed(reason) => reason,
        other => panic!("expected a failure, got {other:?}"),
    };
    let base = format!("http://{addr}");
    let missing = failure(settled(&resolver, &mut rx, "i", &format!("{base}/missing")).await);
    assert!(missing.contains("status 404") && missing.contains("no such path"), "{missing}");
    let html = failure(settled(&resolver, &mut rx, "i", &format!("{base}/html")).await);
    assert!(html.contains("not a valid JWKS: not valid JSON"), "{html}");
    let nokeys = failure(settled(&resolver, &mut rx, "i", &format!("{base}/nokeys")).await);
    assert!(nokeys.contains("missing \"keys\" field"), "{nokeys}");
    let discovery = failure(settled(&resolver, &mut rx, &base, "").await);
    assert!(discovery.contains("invalid jwks_uri 7"), "{discovery}");
    assert_eq!(
        resolver.jwks("", ""),
        JwksState::Failed("jwksUri and issuer are both empty".into()),
        "nothing to fetch"
    );
}

#[tokio::test]
async fn failed_refresh_keeps_the_last_good_keys() {
    let (addr, routes) = server().await;
    let key = TestKey::generate();
    routes.set("/keys", 200, key.jwks_json());
    let resolver = JwksResolver::new(JwksOptions { refresh_interval: Duration::from_millis(30), ..fast() });
    let mut rx = resolver.subscribe();
    let uri = format!("http://{addr}/keys");
    assert_eq!(settled(&resolver, &mut rx, "iss", &uri).await, JwksState::Resolved(key.jwks_json()));
    routes.set("/keys", 503, "down");
    let seen = routes.requests.load(Ordering::SeqCst);
    // Positive signal: the server has answered several failing refreshes since.
    tokio::time::timeout(LIMIT, async {
        while routes.requests.load(Ordering::SeqCst) < seen + 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("refreshes within the limit");
    assert_eq!(resolver.jwks("iss", &uri), JwksState::Resolved(key.jwks_json()));
}

#[tokio::test]
async fn unused_entry_is_evicted_and_notifies() {
    let (addr, routes) = server().await;
    routes.set("/keys", 200, TestKey::generate().jwks_json());
    let resolver = JwksResolver::new(JwksOptions {
        refresh_interval: Duration::from_millis(20),
        eviction_duration: Duration::from_millis(200),
        ..fast()
    });
    let mut rx = resolver.subscribe();
    let uri = format!("http://{addr}/keys");
    assert!(matches!(settled(&resolver, &mut rx, "iss", &uri).await, JwksState::Resolved(_)));
    // Same keys on refresh do not notify; the next change is the eviction.
    next_change(&mut rx).await;
    assert!(resolver.is_empty());
    assert_eq!(resolver.jwks("iss", &uri), JwksState::Pending, "asked again: fetched anew");
}

#[tokio::test]
async fn guarded_addresses_are_refused() {
    let (addr, routes) = server().await;
    routes.set("/keys", 200, TestKey::generate().jwks_json());
    let resolver =
        JwksResolver::new(JwksOptions { blocked_cidrs: vec!["127.0.0.0/8".parse().unwrap()], ..fast() });
    let mut rx = resolver.subscribe();
    let failure = |s: JwksState| match s {
        JwksState::Failed(reason) => reason,
        other => panic!("expected a failure, got {other:?}"),
    };
    let metadata = failure(settled(&resolver, &mut rx, "i", "http://169.254.169.254/latest/keys").await);
    assert!(metadata.contains("is link-local"), "{metadata}");
    let alibaba = failure(settled(&resolver, &mut rx, "i", "http://100.100.100.200/keys").await);
    assert!(alibaba.contains("known cloud metadata address"), "{alibaba}");
    // By name: refused after resolution.
    let by_name =
        failure(settled(&resolver, &mut rx, "i", &format!("http://localhost:{}/keys", addr.port())).await);
    assert!(by_name.contains("blocked CIDR range 127.0.0.0/8"), "{by_name}");
    assert_eq!(routes.requests.load(Ordering::SeqCst), 0, "nothing reached the server");
}

#[test]
fn address_guard_ranges() {
    let guard = fetch::AddressGuard::new(&["10.0.0.0/8".parse().unwrap()]);
    for blocked in [
        "169.254.169.254",
        "fe80::1",
        "224.0.0.251",
        "ff02::1",
        "100.100.100.200",
        "fd00:ec2::254",
        "10.1.2.3",
        "::ffff:169.254.169.254",
    ] {
        assert!(guard.check(blocked.parse().unwrap()).is_err(), "{blocked}");
    }
    for allowed in ["127.0.0.1", "192.168.1.1", "8.8.8.8", "::1", "fd00::1", "100.100.100.201"] {
        assert!(guard.check(allowed.parse().unwrap()).is_ok(), "{allowed}");
    }
}

#[test]
fn jwks_format_check() {
    assert!(fetch::validate_jwks_format(r#"{"keys": []}"#).is_ok());
    assert_eq!(fetch::validate_jwks_format(r#"{"keys": {}}"#).unwrap_err(), "\"keys\" is not an array");
    assert_eq!(fetch::validate_jwks_format("[]").unwrap_err(), "missing \"keys\" field");
    assert!(fetch::validate_jwks_format("nope").unwrap_err().starts_with("not valid JSON"));
}

#[test]
fn same_key_set_ignores_key_order() {
    let a = r#"{"keys":[{"kid":"a","n":"1"},{"kid":"b","n":"2"}]}"#;
    let b = r#"{"keys": [{"kid":"b","n":"2"}, {"n":"1","kid":"a"}]}"#;
    assert!(same_key_set(a, b));
    assert!(!same_key_set(a, r#"{"keys":[{"kid":"a","n":"1"}]}"#));
    assert!(!same_key_set(a, "not json"));
}

#[tokio::test]
async fn redirects_are_followed() {
    let (addr, routes) = server().await;
    let key = TestKey::generate();
    routes.set("/old", 302, "/moved/here");
    routes.set("/moved/here", 301, format!("http://{addr}/keys"));
    routes.set("/keys", 200, key.jwks_json());
    let resolver = JwksResolver::new(fast());
    let mut rx = resolver.subscribe();
    let uri = format!("http://{addr}/old");
    assert_eq!(settled(&resolver, &mut rx, "iss", &uri).await, JwksState::Resolved(key.jwks_json()));
    routes.set("/loop", 302, "/loop");
    let JwksState::Failed(reason) = settled(&resolver, &mut rx, "iss", &format!("http://{addr}/loop")).await
    else {
        panic!("a redirect loop fails")
    };
    assert!(reason.contains("stopped after 10 redirects"), "{reason}");
}

#[test]
fn redirect_targets() {
    let base: http::Uri = "https://idp.example:8443/realm/certs?x=1".parse().unwrap();
    let target = |l: &str| fetch::redirect_target(&base, l).unwrap().to_string();
    assert_eq!(target("/keys"), "https://idp.example:8443/keys");
    assert_eq!(target("v2/certs"), "https://idp.example:8443/realm/v2/certs");
    assert_eq!(target("//other.example/k"), "https://other.example/k");
    assert_eq!(target("http://plain.example/k"), "http://plain.example/k");
}

/// A TLS server for `localhost` with a self-signed certificate: its address, routes and the
/// certificate's PEM file.
async fn tls_server() -> (SocketAddr, Arc<Routes>, tempfile::NamedTempFile) {
    use tokio_rustls::rustls::{ServerConfig, pki_types::PrivateKeyDer};
    let key = rcgen::KeyPair::generate().unwrap();
    let cert =
        rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap().self_signed(&key).unwrap();
    let config =
        ServerConfig::builder_with_provider(Arc::new(tokio_rustls::rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], PrivateKeyDer::try_from(key.serialize_der()).unwrap())
            .unwrap();
    let pem = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(pem.path(), cert.pem()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let routes = Arc::new(Routes::default());
    tokio::spawn(serve(listener, routes.clone(), Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))));
    (addr, routes, pem)
}

#[tokio::test]
async fn https_with_extra_roots_unknown_issuer_and_insecure_skip_verify() {
    let (addr, routes, pem) = tls_server().await;
    let key = TestKey::generate();
    routes.set("/keys", 200, key.jwks_json());
    let uri = format!("https://localhost:{}/keys", addr.port());

    let trusting =
        JwksResolver::new(JwksOptions { extra_root_ca_paths: vec![pem.path().to_path_buf()], ..fast() });
    let mut rx = trusting.subscribe();
    assert_eq!(settled(&trusting, &mut rx, "iss", &uri).await, JwksState::Resolved(key.jwks_json()));

    let untrusting = JwksResolver::new(fast());
    let mut rx = untrusting.subscribe();
    let JwksState::Failed(reason) = settled(&untrusting, &mut rx, "iss", &uri).await else {
        panic!("an unknown issuer fails")
    };
    assert!(reason.contains("UnknownIssuer"), "{reason}");

    let insecure = JwksResolver::new(JwksOptions { insecure_skip_verify: true, ..fast() });
    let mut rx = insecure.subscribe();
    assert_eq!(settled(&insecure, &mut rx, "iss", &uri).await, JwksState::Resolved(key.jwks_json()));
}

#[tokio::test(flavor = "current_thread")]
async fn fetches_are_counted_with_istios_metric_names() {
    // A recorder local to this thread; the current-thread runtime runs the fetch tasks here too.
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _guard = ::metrics::set_default_local_recorder(&recorder);
    let (addr, routes) = server().await;
    routes.set("/keys", 200, TestKey::generate().jwks_json());
    let resolver = JwksResolver::new(fast());
    let mut rx = resolver.subscribe();
    assert!(matches!(
        settled(&resolver, &mut rx, "i", &format!("http://{addr}/keys")).await,
        JwksState::Resolved(_)
    ));
    assert!(matches!(
        settled(&resolver, &mut rx, "i", &format!("http://{addr}/gone")).await,
        JwksState::Failed(_)
    ));
    let rendered = handle.render();
    let value = |name: &str| -> f64 {
        rendered
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in {rendered}"))
    };
    assert_eq!(value("pilot_jwks_resolver_network_fetch_success_total"), 1.0);
    assert!(value("pilot_jwks_resolver_network_fetch_fail_total") >= 1.0);
}
